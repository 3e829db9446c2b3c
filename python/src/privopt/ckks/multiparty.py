"""xMK-CKKS: multi-key CKKS as EEZOFL uses it (the EEZOFL paper, §III-B).

Every party holds its own secret and nobody holds the sum. A round:

1. the server picks a 32-byte seed for the :class:`CommonPoly`; each :class:`Party` sends
   :meth:`Party.public_key_share`; :meth:`CollectivePublicKey.aggregate` sums them;
2. anyone encrypts under the collective key; ciphertexts of the session add up;
3. each member sends :meth:`Party.partial_decrypt` of the sum;
4. :func:`fuse` combines the shares: the message sum, and nothing about any one party's part.

A missing member's share fails the round with a :class:`~privopt.errors.ProtocolError`
naming the party; shares of another session, ciphertext or party raise
:class:`~privopt.errors.PeerMisbehaved`.

Threshold form (any ``t`` of the ``N`` members decrypt, so a round survives dropouts)::

    committee = Committee(7, range(10))
    dealt = party.deal(committee, session)        # {recipient: bytes}, each sent encrypted
    member = ThresholdParty.from_shares(party, committee, session, shares_received)
    active = ActiveSet(committee, total, survivors)   # the server fixes it first
    share = member.partial_decrypt(total, active)     # once per ciphertext, ever
    result = fuse_threshold(params, total, active, shares)

A second request for the same ciphertext raises :class:`~privopt.errors.PeerMisbehaved`: a
failed round is retried on a fresh encryption.

After setup, the server checks every dealing once (a dealer whose shares lie on no polynomial
of degree < t with its key's secret as constant is named)::

    check = DealingCheck(committee, session, os.urandom(32), present)  # after all dealings
    answer = member.answer_dealing_check(check, crs)                 # once per setup
    bad = failed_dealers(params, committee, crs, key_shares, check, answers)  # leave them out

Whole models (any length, ``n`` values per ciphertext in the coefficients)::

    codec = ModelCodec(params, length, clip=1.0)
    upload = codec.encrypt(key, update)                   # 1-D float32, entries within ±clip
    total = EncryptedModel.sum(uploads)                   # on the server
    active = ActiveSet.for_model(committee, total, survivors)
    shares = [m.partial_decrypt_model(total, active) for m in members]
    average = codec.average(total, active, shares)        # float64, the mean of the updates

The default smudging (σ* = 2^20 per share) is a heuristic margin over the noise it hides.
For a share that is provably within ``2**-40`` statistical distance of one revealing nothing,
size it with :func:`model_smudging_bits` and build the parameters with it
(``Params(4096, [60, 45], scale_bits=49, smudging_bits=...)``); the codec lifts the values
so the average keeps its precision, at twice the bytes of one prime.
"""

from __future__ import annotations

from .._native import multiparty as _native

CommonPoly = _native.CommonPoly
Party = _native.Party
CollectivePublicKey = _native.CollectivePublicKey
Ciphertext = _native.Ciphertext
Decrypted = _native.Decrypted
fuse = _native.fuse_shares
Committee = _native.Committee
ActiveSet = _native.ActiveSet
ThresholdParty = _native.ThresholdParty
ModelCodec = _native.ModelCodec
EncryptedModel = _native.EncryptedModel
ThresholdSetup = _native.ThresholdSetup
fuse_threshold = _native.fuse_threshold_shares
model_smudging_bits = _native.model_smudging_bits
smudging_bits = _native.smudging_bits
DealingCheck = _native.DealingCheck
failed_dealers = _native.failed_dealers

__all__ = [
    "CommonPoly",
    "Party",
    "CollectivePublicKey",
    "Ciphertext",
    "Decrypted",
    "fuse",
    "Committee",
    "ActiveSet",
    "ThresholdParty",
    "fuse_threshold",
    "ModelCodec",
    "EncryptedModel",
    "model_smudging_bits",
    "smudging_bits",
    "DealingCheck",
    "failed_dealers",
    "ThresholdSetup",
]
