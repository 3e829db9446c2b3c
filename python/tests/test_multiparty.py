from __future__ import annotations

import os

import numpy as np
import pytest

from privopt import ckks
from privopt.ckks import multiparty as mk
from privopt.errors import (
    MalformedMessage,
    ParameterError,
    PeerMisbehaved,
    PrivoptError,
    ProtocolError,
)


@pytest.fixture(scope="module")
def setup():
    params = ckks.Params(4096, [37, 36, 36])  # the paper's first set (EEZOFL)
    crs = mk.CommonPoly(params, os.urandom(32))
    parties = [mk.Party(i, params, crs) for i in range(4)]
    session = 7
    key = mk.CollectivePublicKey.aggregate(
        params,
        crs,
        [p.id for p in parties],
        session,
        [p.public_key_share(session) for p in parties],
    )
    return params, crs, parties, key


def test_encrypted_sums_fuse_to_the_plain_sum(setup):
    params, _, parties, key = setup
    xs = [0.25, -1.5, 3.0, 0.125]
    # Each device's ciphertext crosses the wire as bytes.
    cts = [mk.Ciphertext.from_bytes(params, key.encrypt_scalar(x).to_bytes()) for x in xs]
    total = mk.Ciphertext.sum(cts)
    assert total.count == 4 and total.members == [0, 1, 2, 3]
    shares = [p.partial_decrypt(total) for p in parties]
    assert abs(mk.fuse(params, total, shares).scalar() - sum(xs)) < 1e-3
    vs = np.random.default_rng(1).uniform(-1, 1, (4, 100))
    vsum = mk.Ciphertext.sum([key.encrypt_vector(v) for v in vs])
    out = mk.fuse(params, vsum, [p.partial_decrypt(vsum) for p in parties]).vector(length=100)
    np.testing.assert_allclose(out, vs.sum(axis=0), atol=1e-3)


def test_a_missing_or_foreign_share_fails_the_round_naming_the_party(setup):
    params, crs, parties, key = setup
    total = key.encrypt_scalar(1.0) + key.encrypt_scalar(2.0)
    shares = [p.partial_decrypt(total) for p in parties]
    with pytest.raises(ProtocolError, match="party 3"):
        mk.fuse(params, total, shares[:3])
    with pytest.raises(PeerMisbehaved, match="duplicate"):
        mk.fuse(params, total, shares + shares[:1])
    other = key.encrypt_scalar(5.0)
    with pytest.raises(PeerMisbehaved, match="another ciphertext"):
        mk.fuse(params, total, shares[:3] + [parties[3].partial_decrypt(other)])
    with pytest.raises(ProtocolError, match="missing share"):
        mk.CollectivePublicKey.aggregate(
            params, crs, [0, 1, 2, 3], 8, [p.public_key_share(8) for p in parties[:3]]
        )
    with pytest.raises(PeerMisbehaved, match="session"):
        mk.CollectivePublicKey.aggregate(
            params, crs, [0, 1, 2, 3], 8, [p.public_key_share(9) for p in parties]
        )
    with pytest.raises(MalformedMessage):
        mk.fuse(params, total, [s[:-8] for s in shares])


def test_any_three_of_four_decrypt_once_per_ciphertext(setup):
    """Threshold setup through bytes; any 3 of the 4 members decrypt the sum; a member asked
    twice for one ciphertext refuses; a fresh encryption of the same values is answered."""
    params, _, parties, key = setup
    session = 7
    committee = mk.Committee(3, [p.id for p in parties])
    dealt = {p.id: p.deal(committee, session) for p in parties}
    members = [
        mk.ThresholdParty.from_shares(p, committee, session, [d[p.id] for d in dealt.values()])
        for p in parties
    ]
    xs = [0.5, -0.25, 1.0, 2.0]
    for survivors in ([0, 1, 2], [1, 2, 3], [0, 1, 2, 3]):
        total = mk.Ciphertext.sum([key.encrypt_scalar(x) for x in xs])
        active = mk.ActiveSet(committee, total, survivors)
        wire = mk.ActiveSet.from_bytes(params, active.to_bytes(params))
        shares = [members[j].partial_decrypt(total, wire) for j in survivors]
        assert abs(mk.fuse_threshold(params, total, active, shares).scalar() - sum(xs)) < 1e-3
    assert members[0].has_answered(total)
    # A member restored from its snapshot keeps its ledger.
    restored = mk.ThresholdParty.restore(params, members[0].snapshot())
    assert restored.id == 0 and restored.has_answered(total)
    with pytest.raises(PeerMisbehaved, match="fresh encryption"):
        restored.partial_decrypt(total, mk.ActiveSet(committee, total, [0, 1, 2]))
    with pytest.raises(MalformedMessage):
        mk.ThresholdParty.restore(params, members[0].snapshot()[:-1])
    with pytest.raises(PeerMisbehaved, match="fresh encryption"):
        members[0].partial_decrypt(total, mk.ActiveSet(committee, total, [0, 1, 2]))
    with pytest.raises(ProtocolError, match="party 2"):
        again = mk.Ciphertext.sum([key.encrypt_scalar(x) for x in xs])
        active = mk.ActiveSet(committee, again, [0, 1, 2])
        mk.fuse_threshold(
            params, again, active, [members[j].partial_decrypt(again, active) for j in (0, 1)]
        )
    with pytest.raises(ParameterError, match="threshold"):
        mk.ActiveSet(committee, total, [0, 1])
    with pytest.raises(ParameterError):
        mk.Committee(1, [0, 1, 2])


def five_members_four_decrypt() -> tuple[
    ckks.Params, list[mk.Party], mk.CollectivePublicKey, mk.Committee, list[mk.ThresholdParty]
]:
    """Five parties (n = 4096, one 60-bit prime, Λ = 2^46), their collective key and a 4-of-5
    threshold committee set up among them."""
    params = ckks.Params(4096, [60], scale_bits=46)
    crs = mk.CommonPoly(params, os.urandom(32))
    parties = [mk.Party(i, params, crs) for i in range(5)]
    key = mk.CollectivePublicKey.aggregate(
        params, crs, list(range(5)), 0, [p.public_key_share(0) for p in parties]
    )
    committee = mk.Committee(4, list(range(5)))
    dealt = [p.deal(committee, 0) for p in parties]
    members = [
        mk.ThresholdParty.from_shares(p, committee, 0, [d[p.id] for d in dealt]) for p in parties
    ]
    return params, parties, key, committee, members


def test_whole_models_average_under_a_threshold_key_with_a_member_gone():
    params, parties, key, committee, members = five_members_four_decrypt()
    length = 2 * 4096 + 5
    codec = mk.ModelCodec(params, length, clip=1.0)
    assert codec.chunks == 3
    rng = np.random.default_rng(0)
    updates = [rng.uniform(-0.05, 0.05, length).astype(np.float32) for _ in range(5)]
    uploads = [
        mk.EncryptedModel.from_bytes(params, codec.encrypt(key, u).to_bytes()) for u in updates
    ]
    total = mk.EncryptedModel.sum(uploads)
    assert (total.count, total.length) == (5, length)
    active = mk.ActiveSet.for_model(committee, total, [0, 2, 3, 4])  # member 1 is gone
    shares = [members[j].partial_decrypt_model(total, active) for j in (0, 2, 3, 4)]
    with pytest.raises(PeerMisbehaved):
        members[0].partial_decrypt_model(total, active)  # each chunk is answered once
    average = codec.average(total, active, shares)
    want = np.mean(np.stack(updates).astype(np.float64), axis=0)
    assert np.max(np.abs(average - want)) / np.max(np.abs(want)) < 1e-6
    bad = updates[0].copy()
    bad[7] = np.nan
    with pytest.raises(PrivoptError, match="index 7"):
        codec.encrypt(key, bad)
    with pytest.raises(PrivoptError, match="needs a modulus"):
        mk.ModelCodec(params, 10, clip=1e6, max_updates=1 << 20)


def test_secret_key_uploads_halve_the_bytes_and_decrypt_only_as_a_large_enough_sum():
    params, parties, key, committee, members = five_members_four_decrypt()
    length = 4096 + 9
    codec = mk.ModelCodec(params, length, clip=1.0)
    rng = np.random.default_rng(1)
    updates = [rng.uniform(-0.05, 0.05, length).astype(np.float32) for _ in range(5)]
    uploads = [
        mk.EncryptedModel.from_bytes(params, codec.encrypt_secret(p, committee, 0, u).to_bytes())
        for p, u in zip(parties, updates)
    ]
    public = len(codec.encrypt(key, updates[0]).to_bytes())
    assert abs(2 * len(uploads[0].to_bytes()) - public) < 200
    assert uploads[3].contributors == [3] and codec.encrypt(key, updates[0]).contributors is None
    total = mk.EncryptedModel.sum([uploads[i] for i in (0, 2, 3, 4)])  # 1 never uploaded
    assert total.contributors == [0, 2, 3, 4] and total.count == 4
    active = mk.ActiveSet.for_model(committee, total, [0, 1, 2, 3])
    average = codec.average(
        total, active, [members[j].partial_decrypt_model(total, active) for j in (0, 1, 2, 3)]
    )
    want = np.mean(np.stack([updates[i] for i in (0, 2, 3, 4)]).astype(np.float64), axis=0)
    assert np.max(np.abs(average - want)) / np.max(np.abs(want)) < 1e-6
    with pytest.raises(ParameterError, match="a sum of 3 members' encryptions"):
        mk.ActiveSet.for_model(committee, mk.EncryptedModel.sum(uploads[:3]), [0, 1, 2, 3])
    with pytest.raises(PrivoptError, match="party 2's encryption is in both"):
        mk.EncryptedModel.sum([uploads[2], uploads[2]])


def test_the_dealing_check_passes_a_sound_setup_and_names_a_dealer_of_another_secret():
    params = ckks.Params(4096, [60], scale_bits=46)
    crs = mk.CommonPoly(params, os.urandom(32))
    parties = [mk.Party(i, params, crs) for i in range(5)]
    keys = [p.public_key_share(0) for p in parties]
    committee = mk.Committee(3, list(range(5)))
    # Party 4 deals the shares of a secret other than its key's.
    impostor = mk.Party(4, params, crs)
    dealers = [*parties[:4], impostor]
    dealt = [p.deal(committee, 0) for p in dealers]
    members = [
        mk.ThresholdParty.from_shares(p, committee, 0, [d[p.id] for d in dealt]) for p in parties
    ]
    check = mk.DealingCheck(committee, 0, os.urandom(32), range(5))
    assert check.sets == [[0, 1, 2], [0, 1, 3], [0, 1, 4]]
    wire = mk.DealingCheck.from_bytes(params, check.to_bytes(params))
    answers = [m.answer_dealing_check(wire, crs) for m in members]
    assert mk.failed_dealers(params, committee, crs, keys, check, answers) == [4]
    # With the impostor's key share, every dealing is sound.
    honest_keys = [*keys[:4], impostor.public_key_share(0)]
    assert mk.failed_dealers(params, committee, crs, honest_keys, check, answers) == []
    with pytest.raises(PeerMisbehaved, match="dealing check"):
        members[0].answer_dealing_check(wire, crs)
    with pytest.raises(ProtocolError, match="party 1"):
        mk.failed_dealers(params, committee, crs, keys, check, answers[:1])
    with pytest.raises(ParameterError, match="32"):
        mk.DealingCheck(committee, 0, b"short", range(5))


def test_smudging_sized_for_a_distance_lifts_the_values_and_keeps_the_average():
    base = ckks.Params(4096, [60, 45], scale_bits=49)
    bits = mk.model_smudging_bits(base, 10_000, 5)
    assert 51.9 < bits < 52.1
    params = ckks.Params(4096, [60, 45], scale_bits=49, smudging_bits=bits)
    assert params.smudging_bits == bits
    codec = mk.ModelCodec(params, 10_000, clip=1.0, max_updates=5)
    assert codec.lift_bits == 33  # ⌈52.0 − 20⌉: the default smudging's precision
    assert mk.ModelCodec(base, 10_000, clip=1.0, max_updates=5).lift_bits == 0
    with pytest.raises(ParameterError, match="no room"):
        ckks.Params(4096, [60], scale_bits=49, smudging_bits=55)
    with pytest.raises(ParameterError):
        mk.model_smudging_bits(base, 0, 5)
