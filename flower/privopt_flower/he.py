"""Encrypted averaging of whole models for any Flower app, under a threshold multi-key CKKS
key that no party holds: the server sums ciphertexts and learns the average only, and no
party, the server included, holds a key that decrypts one client's update.

The same shape as the SecAgg+ drop-in (:mod:`privopt_flower.secagg`)::

    from privopt_flower.he import HeFedAvgWorkflow, he_mod

    workflow = DefaultWorkflow(fit_workflow=HeFedAvgWorkflow(clip=8.0))
    client_app = ClientApp(client_fn=client_fn, mods=[he_mod])

and :func:`encrypted_mean` for apps on the Message API (``@app.main()`` with a ``Grid``).

Each round, for the sampled clients (privopt's xMK-CKKS, docs/mkckks.md):

1. ``keys``: each client draws a fresh secret for the round and sends an X25519 sealing key;
2. ``deal``: each client deals Shamir shares of its secret, each sealed to its recipient (the
   server relays them and can open none);
3. ``encrypt`` (the train message): each client opens its shares, runs the app's train
   function, and uploads ``[w, w·x]`` (``w`` its example count over ``max_weight``, ``x`` the
   flattened arrays, every entry within ``±clip``) encrypted under its own secret, ``n``
   values per ciphertext in the coefficients (n = 4096, one 60-bit prime: 128-bit secure,
   scale 2^49). Each chunk's ``c1`` is expanded from the round's seed and never sent, so an
   upload is one polynomial per chunk, and the uploads add up to a ciphertext under the sum of
   the uploaders' secrets, of which every member holds a Shamir share;
4. ``ready`` and ``decrypt``: the server sums the uploads, asks the uploaders whether they are
   still there, fixes the round's active set (``t`` of those present) and asks only them for
   their decryption shares, once; it fuses them into the weighted average. Members decrypt
   only a sum of at least ``t`` uploads (the server cannot ask for a smaller group's), and
   answer once per chunk whoever contributed.

``t`` (``threshold``, default two thirds of the sampled clients): a round survives the loss of
``N − t`` clients after setup; ``t`` colluding clients could decrypt any upload. A client that
misses ``keys`` or ``deal`` is left out and the setup restarts without it; one that misses
``encrypt`` is not in the average; one that uploaded and then dies before ``ready`` is in the
average (its upload is in the sum) and not asked to decrypt; one of the active set that dies
after ``ready`` fails the round (its sum is never asked about again). A malicious client can still upload any update
within ``±clip`` (no proof that it came from its data).
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, RecordDict
from flwr.app.message_type import MessageType
from flwr.clientapp.typing import ClientAppCallable
from privopt import ckks
from privopt.ckks import multiparty as mk
from privopt.errors import PrivoptError, ProtocolError
from privopt.protocols import eezofl

from .secagg import (
    AggregateResult,
    Round,
    check_update,
    copy_content,
    legacy_fit,
    record_of,
    reply_arrays,
    round_request,
    send,
    unflatten,
    weight_cap,
)
from .transport import payload_bytes

__all__ = ["RECORD", "EncryptedMean", "HeFedAvgWorkflow", "Stage", "encrypted_mean", "he_mod"]

log = logging.getLogger("privopt_flower.he")

RECORD = "privopt.heavg"
"""The config record that carries this protocol's fields in every message."""
STATE = "privopt.heavg.state"
"""The client's context-state record (its party and setup between stages)."""
# n = 4096 at scale 2^49 with one 60-bit prime (log Q = 60 <= 109, the HE standard's 128-bit
# bound), enough for a sum of up to 2^8 / clip updates within +-clip; larger rounds take a
# second prime (log Q = 105), doubling the bytes.
RING_DEGREE, SCALE_BITS = 4096, 49
ONE_PRIME, TWO_PRIMES = [60], [60, 45]
# σ* = 2^20 per decryption share: a heuristic margin over the noise it hides (docs/mkckks.md);
# ``distance_bits`` sizes it for a stated statistical distance instead.
DEFAULT_SMUDGING_BITS = 20.0
MAX_SETUP_ATTEMPTS = 3


class Stage:
    """The stages of a round."""

    KEYS = "keys"
    DEAL = "deal"
    ENCRYPT = "encrypt"
    READY = "ready"
    DECRYPT = "decrypt"


def params(primes: Sequence[int], smudging_bits: float = DEFAULT_SMUDGING_BITS) -> ckks.Params:
    return ckks.Params(
        RING_DEGREE, list(primes), scale_bits=SCALE_BITS, smudging_bits=smudging_bits
    )


def modulus_for(
    updates: int, clip: float, length: int, distance_bits: float | None
) -> tuple[list[int], float]:
    """The primes and the smudging (``log2`` σ*) of a round: the default smudging on the
    smallest modulus that holds the sum, or smudging sized for ``2**-distance_bits`` over the
    round's ``length`` values on two primes (the codec lifts the values above it)."""
    if distance_bits is None:
        return primes_for(updates, clip), DEFAULT_SMUDGING_BITS
    bits = mk.model_smudging_bits(params(TWO_PRIMES), length, updates, distance_bits)
    return TWO_PRIMES, bits


def primes_for(updates: int, clip: float) -> list[int]:
    """The smallest modulus whose sum of ``updates`` updates within ``±clip`` cannot wrap."""
    return ONE_PRIME if updates * _bound(clip) <= 2**8 else TWO_PRIMES


def _bound(clip: float) -> float:
    """The codec's entry bound: the update's ``±clip`` and its weight ratio in ``[0, 1]``."""
    return max(clip, 1.0)


def _crs(p: ckks.Params, session: int) -> mk.CommonPoly:
    # Public: every member derives the round's common polynomial from the session.
    return mk.CommonPoly(p, hashlib.sha256(f"privopt-heavg/{session}".encode()).digest())


@dataclass
class EncryptedMean(AggregateResult):
    """What :func:`encrypted_mean` returns: ``arrays`` is the mean ``Σ w_i · x_i / Σ w_i``."""

    up_bytes: dict[int, int] = field(default_factory=dict)
    """Bytes of this protocol's fields each node sent (keys, sealed shares, upload, share)."""
    down_bytes: dict[int, int] = field(default_factory=dict)
    """Bytes of this protocol's fields each node received."""


@dataclass
class _Traffic:
    up: dict[int, int] = field(default_factory=dict)
    down: dict[int, int] = field(default_factory=dict)

    def send(
        self,
        grid: Any,
        requests: Mapping[int, RecordDict],
        group: str,
        timeout: float | None,
        dropped: dict[int, str],
        stage: str,
    ) -> dict[int, Message]:
        """:func:`privopt_flower.secagg.send`, counting this protocol's bytes each way."""
        for node, content in requests.items():
            sent = payload_bytes(dict(content.config_records[RECORD]))
            self.down[node] = self.down.get(node, 0) + sent
        replies = send(grid, requests, group, timeout, dropped, stage)
        for node, msg in replies.items():
            record = msg.content.config_records.get(RECORD)
            got = payload_bytes(dict(record)) if record is not None else 0
            self.up[node] = self.up.get(node, 0) + got
        return replies


@dataclass
class _Setup:
    nodes: list[int]
    """The members, in id order (member ``i`` is ``nodes[i]``)."""
    threshold: int
    session: int
    inbox: dict[int, list[bytes]]
    """Each member's sealed shares, by dealer in member order."""
    key_shares: list[bytes]
    """Each member's public key share, which its dealing is checked against."""
    params: ckks.Params
    """The round's parameters, as the members were told them at ``keys``."""


def _setup(
    grid: Any,
    nodes: list[int],
    clip: float,
    length: int,
    distance_bits: float | None,
    threshold: int | None,
    group: str,
    timeout: float | None,
    dropped: dict[int, str],
    traffic: _Traffic,
) -> _Setup:
    """Keys and dealing among ``nodes``; a node that misses either is left out and the setup
    restarts without it."""
    for _ in range(MAX_SETUP_ATTEMPTS):
        if len(nodes) < 2:
            raise ProtocolError(f"encrypted averaging needs at least 2 clients, got {len(nodes)}")
        t = min(threshold or eezofl.default_threshold(len(nodes)), len(nodes))
        session = int.from_bytes(os.urandom(8), "little") >> 1
        ids = list(range(len(nodes)))
        primes, smudging_bits = modulus_for(len(nodes), clip, length, distance_bits)
        keys = {
            node: RecordDict(
                {
                    RECORD: ConfigRecord(
                        {
                            "stage": Stage.KEYS,
                            "session": session,
                            "id": i,
                            "members": ids,
                            "threshold": t,
                            "primes": primes,
                            "smudging_bits": smudging_bits,
                        }
                    )
                }
            )
            for i, node in enumerate(nodes)
        }
        replies = traffic.send(grid, keys, group, timeout, dropped, Stage.KEYS)
        if len(replies) < len(nodes):
            nodes = [n for n in nodes if n in replies]
            continue
        fields = [replies[n].content.config_records[RECORD] for n in nodes]
        deal = ConfigRecord(
            {
                "stage": Stage.DEAL,
                "sealing_keys": [cast(bytes, f["sealing_key"]) for f in fields],
            }
        )
        replies = traffic.send(grid, {n: RecordDict({RECORD: deal}) for n in nodes}, group,
                               timeout, dropped, Stage.DEAL)  # fmt: skip
        if len(replies) < len(nodes):
            nodes = [n for n in nodes if n in replies]
            continue
        dealt = {
            n: list(cast(list[bytes], replies[n].content.config_records[RECORD]["sealed"]))
            for n in nodes
        }
        if any(len(s) != len(nodes) for s in dealt.values()):
            raise ProtocolError("a member dealt the wrong number of sealed shares")
        inbox = {node: [dealt[d][i] for d in nodes] for i, node in enumerate(nodes)}
        key_shares = [
            cast(bytes, replies[n].content.config_records[RECORD]["key_share"]) for n in nodes
        ]
        for node in nodes:
            dropped.pop(node, None)  # a failed earlier attempt does not count against it
        return _Setup(nodes, t, session, inbox, key_shares, params(primes, smudging_bits))
    raise ProtocolError(f"the key setup failed {MAX_SETUP_ATTEMPTS} times: {dropped}")


def _run_round(
    grid: Any,
    train_contents: Mapping[int, RecordDict],
    shapes: Sequence[tuple[int, ...]],
    clip: float,
    max_weight: float,
    threshold: int | None,
    server_round: int,
    timeout: float | None,
    weighted: bool = True,
    traffic: _Traffic | None = None,
    distance_bits: float | None = None,
) -> Round:
    traffic = traffic if traffic is not None else _Traffic()
    length = 1 + sum(math.prod(s) for s in shapes)
    group = str(server_round)
    dropped: dict[int, str] = {}
    setup = _setup(
        grid, sorted(train_contents), clip, length, distance_bits, threshold, group, timeout,
        dropped, traffic,
    )  # fmt: skip
    nodes, t, inbox, p = setup.nodes, setup.threshold, setup.inbox, setup.params
    codec = mk.ModelCodec(p, length, _bound(clip), len(nodes))
    index = {node: i for i, node in enumerate(nodes)}
    committee = mk.Committee(t, list(range(len(nodes))))
    # Drawn now that every dealing is in: no dealer could tune its shares to it.
    check = mk.DealingCheck(committee, setup.session, os.urandom(32), list(range(len(nodes))))
    requests = {}
    for node in nodes:
        content = copy_content(train_contents[node])
        content.config_records[RECORD] = ConfigRecord(
            {
                "stage": Stage.ENCRYPT,
                "sealed": inbox[node],
                "check": check.to_bytes(p),
                "length": length,
                "clip": clip,
                "max_weight": max_weight,
                "weighted": weighted,
            }
        )
        requests[node] = content
    replies = traffic.send(grid, requests, group, timeout, dropped, Stage.ENCRYPT)
    uploads: dict[int, mk.EncryptedModel] = {}
    for node, msg in replies.items():
        try:
            blob = cast(bytes, msg.content.config_records[RECORD]["upload"])
            upload = mk.EncryptedModel.from_bytes(p, blob)
            if upload.length != length or upload.contributors != [index[node]]:
                raise ProtocolError(
                    f"an upload of {upload.length} values from members {upload.contributors}"
                )
            uploads[node] = upload
        except (PrivoptError, KeyError, TypeError) as e:
            dropped[node] = f"{Stage.ENCRYPT}: upload refused ({e})"
    for bad in _failed_dealers(p, committee, setup, check, replies):
        node = nodes[bad]
        uploads.pop(node, None)
        dropped[node] = (
            f"{Stage.ENCRYPT}: its Shamir shares fail the dealing check (they lie on no "
            "polynomial with its key's secret as constant); left out of the sum"
        )
    if len(uploads) < t:
        raise ProtocolError(f"{len(uploads)} of {len(nodes)} clients uploaded, {t} needed")
    total = mk.EncryptedModel.sum(list(uploads.values()))
    # Who is still there once the sum exists: the active set is fixed among them, before any
    # share is asked for (a member asked and lost fails the round, never to be re-asked).
    ping = RecordDict({RECORD: ConfigRecord({"stage": Stage.READY})})
    present = traffic.send(grid, {n: ping for n in uploads}, group, timeout, dropped, Stage.READY)
    if len(present) < t:
        raise ProtocolError(
            f"{len(present)} of {len(nodes)} clients present to decrypt, {t} needed"
        )
    asked = sorted(present)[:t]
    active = mk.ActiveSet.for_model(committee, total, [index[n] for n in asked])
    request = ConfigRecord(
        {"stage": Stage.DECRYPT, "sum": total.to_bytes(), "active": active.to_bytes(p)}
    )
    shares = traffic.send(grid, {n: RecordDict({RECORD: request}) for n in asked}, group,
                          timeout, dropped, Stage.DECRYPT)  # fmt: skip
    if len(shares) < len(asked):
        missing = sorted(set(asked) - set(shares))
        raise ProtocolError(f"node(s) {missing} of the active set sent no decryption share")
    try:
        mean = codec.average(
            total, active,
            [cast(bytes, shares[n].content.config_records[RECORD]["share"]) for n in asked],
        ) * total.count  # fmt: skip
    except PrivoptError as e:  # a share or an upload that was not what it claimed
        raise ProtocolError(f"round {server_round}'s sum did not decrypt: {e}") from e
    weight_sum = float(mean[0])
    if weight_sum <= 0:
        raise ProtocolError("the contributors' weights sum to zero: no average exists")
    return Round(
        average=unflatten(mean[1:] / weight_sum, shapes),
        weight=weight_sum * max_weight,
        replies={n: replies[n] for n in uploads},
        dropped={n: why for n, why in dropped.items() if n not in uploads},
    )


def _failed_dealers(
    p: ckks.Params,
    committee: mk.Committee,
    setup: _Setup,
    check: mk.DealingCheck,
    replies: Mapping[int, Message],
) -> list[int]:
    """The members whose dealing fails ``check``, from the answers in the encrypt replies.
    With a member of the check gone, the check cannot be completed: it is skipped (a wrong
    dealing still cannot make a wrong mean: the decrypted sum's bound check catches it)."""
    answers = {}
    for node in setup.nodes:
        record = replies[node].content.config_records.get(RECORD) if node in replies else None
        if record is None or "dealing" not in record:
            log.warning("dealing check skipped: node %s sent no answer", node)
            return []
        answers[node] = cast(bytes, record["dealing"])
    try:
        return mk.failed_dealers(
            p, committee, _crs(p, setup.session), setup.key_shares, check, list(answers.values())
        )
    except PrivoptError as e:
        raise ProtocolError(f"the dealing check could not be completed: {e}") from e


def encrypted_mean(
    grid: Any,
    node_ids: Iterable[int],
    content: RecordDict | Mapping[int, RecordDict],
    *,
    server_round: int,
    template: ArrayRecord | None = None,
    weighted: bool = False,
    clip: float = 8.0,
    max_weight: float | None = None,
    threshold: int | None = None,
    timeout: float | None = None,
    distance_bits: float | None = None,
) -> EncryptedMean:
    """Sends ``content`` (one RecordDict for all, or one per node) as a train message to
    ``node_ids`` whose ClientApps run :func:`he_mod`, and returns the mean of the arrays they
    reply with (weighted by their ``num-examples`` metric if ``weighted``), without any party
    seeing one reply's arrays. ``template`` gives the reply's array shapes (default: the first
    ArrayRecord of the content sent). Entries must lie within ``±clip`` (a client with one
    outside drops out, named). Raises :class:`privopt.errors.ProtocolError` when fewer than
    the threshold upload or a member of the active set does not answer. ``distance_bits``
    sizes the decryption shares' smudging for that statistical distance (see
    :class:`HeFedAvgWorkflow`)."""
    per_node, keys, shapes = round_request(node_ids, content, template, "encrypted_mean")
    cap = weight_cap(max_weight, weighted)
    _check_settings(clip, cap, threshold, timeout, distance_bits)
    traffic = _Traffic()
    outcome = _run_round(
        grid, per_node, shapes, clip, cap, threshold, server_round, timeout, weighted, traffic,
        distance_bits,
    )  # fmt: skip
    return EncryptedMean(
        arrays=record_of(keys, outcome.average),
        weight=outcome.weight,
        replies=outcome.replies,
        dropped=outcome.dropped,
        up_bytes=traffic.up,
        down_bytes=traffic.down,
    )


def _check_settings(
    clip: float,
    max_weight: float,
    threshold: int | None,
    timeout: float | None,
    distance_bits: float | None = None,
) -> None:
    if not (math.isfinite(clip) and 0 < clip <= 2**8):
        raise ValueError("`clip` must be a finite number in (0, 256].")
    if not (math.isfinite(max_weight) and max_weight > 0):
        raise ValueError("`max_weight` must be greater than 0.")
    if threshold is not None and (isinstance(threshold, bool) or threshold < 2):
        raise ValueError("`threshold` must be None (two thirds) or an integer >= 2.")
    if timeout is not None and not timeout > 0:
        raise ValueError("`timeout` must be None or greater than 0.")
    if distance_bits is not None and not (
        not isinstance(distance_bits, bool) and 16 <= distance_bits <= 64
    ):
        raise ValueError("`distance_bits` must be None (σ* = 2^20) or a number in [16, 64].")


class HeFedAvgWorkflow:
    """A fit workflow that averages the sampled clients' parameters under threshold
    multi-key CKKS: ``DefaultWorkflow(fit_workflow=HeFedAvgWorkflow(...))`` with a legacy
    ``Strategy`` and ``LegacyContext``; its ClientApp runs :func:`he_mod`. The strategy's
    ``aggregate_fit`` receives every contributor's ``FitRes`` carrying the weighted average
    (so FedAvg returns it), never a client's own.

    ``distance_bits``: ``None`` smudges every decryption share with σ* = 2^20 (a heuristic
    margin, one 60-bit prime); a number ``λ`` sizes σ* so that what the server sees is within
    ``2**-λ`` statistical distance of what it would see without the uploads' noise, from one
    honest member's share alone (σ* ≈ 2^57 for 11 M values), on two primes: twice the bytes
    and about 1.8× the compute (docs/flower.md)."""

    def __init__(
        self,
        *,
        clip: float = 8.0,
        max_weight: float = 1000.0,
        threshold: int | None = None,
        timeout: float | None = None,
        distance_bits: float | None = None,
    ) -> None:
        _check_settings(clip, max_weight, threshold, timeout, distance_bits)
        self.clip = clip
        self.max_weight = max_weight
        self.threshold = threshold
        self.timeout = timeout
        self.distance_bits = distance_bits

    def __call__(self, grid: Any, context: Context) -> None:
        """Runs one round of encrypted averaging."""

        def aggregate(
            contents: Mapping[int, RecordDict], shapes: Sequence[tuple[int, ...]], rnd: int
        ) -> Round:
            return _run_round(
                grid, contents, shapes, self.clip, self.max_weight, self.threshold, rnd,
                self.timeout, distance_bits=self.distance_bits,
            )  # fmt: skip

        legacy_fit(context, aggregate, "Encrypted averaging")


def he_mod(msg: Message, ctxt: Context, call_next: ClientAppCallable) -> Message:
    """A ClientApp mod that answers the stages of :class:`HeFedAvgWorkflow` and
    :func:`encrypted_mean` and encrypts what the ClientApp's train function returns. Messages
    other than train pass through; a train message without this protocol's configuration is
    refused (the update would leave in the clear)."""
    if msg.metadata.message_type != MessageType.TRAIN:
        return call_next(msg, ctxt)
    configs = msg.content.config_records.get(RECORD)
    if configs is None:
        raise ValueError(
            "privopt_flower.he.he_mod: a train message without encrypted-averaging "
            "configuration; this client sends updates only encrypted (run the server with "
            "privopt_flower.he's HeFedAvgWorkflow or encrypted_mean)"
        )
    stage = configs.get("stage")
    if stage == Stage.KEYS:
        session = int(cast(int, configs["session"]))
        members = [int(m) for m in cast(list[int], configs["members"])]
        primes = [int(b) for b in cast(list[int], configs["primes"])]
        if primes not in (ONE_PRIME, TWO_PRIMES):
            raise ValueError(f"encrypted averaging: unknown modulus {primes}")
        # The parameters refuse smudging below 2^20 or too wide for the modulus.
        smudging_bits = float(cast(float, configs["smudging_bits"]))
        p = params(primes, smudging_bits)
        committee = mk.Committee(int(cast(int, configs["threshold"])), members)
        party = mk.Party(int(cast(int, configs["id"])), p, _crs(p, session))
        setup = mk.ThresholdSetup(party, committee, session)
        _save(
            ctxt,
            party=party.snapshot(),
            setup=setup.save(),
            session=session,
            members=members,
            threshold=committee.threshold,
            primes=primes,
            smudging_bits=smudging_bits,
        )
        return _reply(msg, RecordDict(), {"sealing_key": setup.sealing_key})
    state = _load(ctxt, str(stage))
    p = params(
        [int(b) for b in cast(list[int], state["primes"])],
        float(cast(float, state["smudging_bits"])),
    )
    party = mk.Party.restore(p, cast(bytes, state["party"]))
    session = int(cast(int, state["session"]))
    members = [int(m) for m in cast(list[int], state["members"])]
    committee = mk.Committee(int(cast(int, state["threshold"])), members)
    if stage == Stage.DEAL:
        setup = mk.ThresholdSetup.restore(cast(bytes, state["setup"]))
        keys = list(cast(list[bytes], configs["sealing_keys"]))
        if len(keys) != len(members) or keys[members.index(party.id)] != setup.sealing_key:
            raise ValueError("encrypted averaging: the relayed sealing keys replace this client's")
        sealed = setup.deal(party, keys)
        _save(ctxt, **{**state, "setup": setup.save()})
        # The key share the dealing is checked against: its secret is the one dealt.
        return _reply(
            msg,
            RecordDict(),
            {"sealed": [sealed[m] for m in members], "key_share": party.public_key_share(session)},
        )
    if stage == Stage.ENCRYPT:
        if "member" in state:
            # A second upload under the same secret and seeds would reveal the difference.
            raise ValueError("encrypted averaging: a second encrypt message in one round")
        setup = mk.ThresholdSetup.restore(cast(bytes, state["setup"]))
        member = setup.finish(party, list(cast(list[bytes], configs["sealed"])))
        check = mk.DealingCheck.from_bytes(p, cast(bytes, configs["check"]))
        dealing = member.answer_dealing_check(check, _crs(p, session))  # once per setup
        result = call_next(msg, ctxt)
        if result.has_error():
            return result
        arrays, weight = reply_arrays(result.content)
        if not configs["weighted"]:
            weight = 1.0
        if weight is None:
            raise ValueError(
                "encrypted averaging: the train reply has no weight (a legacy FitRes "
                "num_examples or a 'num-examples' metric)"
            )
        length = int(cast(int, configs["length"]))
        check_update(arrays, weight, length - 1, "encrypted averaging")
        clip = float(cast(float, configs["clip"]))
        max_weight = float(cast(float, configs["max_weight"]))
        ratio = weight / max_weight
        if ratio > 1:
            raise ValueError(
                f"encrypted averaging: the update's weight {weight} exceeds max_weight {max_weight}"
            )
        flat = [np.asarray(a, dtype=np.float64).reshape(-1) * ratio for a in arrays]
        vector = np.concatenate([[ratio], *flat]).astype(np.float32)
        outside = np.flatnonzero(np.abs(vector[1:]) > clip)
        if outside.size:
            i = int(outside[0]) + 1  # the vector's index: the weight is at 0
            raise ValueError(
                f"encrypted averaging: value {vector[i]} at index {i} is not within ±{clip}"
            )
        codec = mk.ModelCodec(p, length, _bound(clip), len(members))
        upload = codec.encrypt_secret(party, committee, session, vector).to_bytes()
        _save(ctxt, **{**state, "member": member.snapshot()})
        content = result.content
        for record in content.array_records.values():
            record.clear()
        return _reply(msg, content, {"upload": upload, "dealing": dealing})
    if stage == Stage.READY:
        if "member" not in state:
            raise ValueError("encrypted averaging: a ready message before this client's upload")
        return _reply(msg, RecordDict(), {"ready": True})
    if stage == Stage.DECRYPT:
        if "member" not in state:
            raise ValueError("encrypted averaging: a decrypt message before this client's upload")
        member = mk.ThresholdParty.restore(p, cast(bytes, state["member"]))
        total = mk.EncryptedModel.from_bytes(p, cast(bytes, configs["sum"]))
        active = mk.ActiveSet.from_bytes(p, cast(bytes, configs["active"]))
        try:
            share = member.partial_decrypt_model(total, active)
        finally:
            del ctxt.state.config_records[STATE]  # the round's secrets are spent either way
        return _reply(msg, RecordDict(), {"share": share})
    raise ValueError(f"encrypted averaging: unknown stage {stage!r}")


def _reply(msg: Message, content: RecordDict, fields: Mapping[str, Any]) -> Message:
    content.config_records[RECORD] = ConfigRecord(dict(fields))
    return Message(content, reply_to=msg)


def _save(ctxt: Context, **fields: Any) -> None:
    ctxt.state.config_records[STATE] = ConfigRecord(fields)


def _load(ctxt: Context, stage: str) -> dict[str, Any]:
    record = ctxt.state.config_records.get(STATE)
    if record is None:
        raise ValueError(f"encrypted averaging: a {stage} message before this round's keys")
    return dict(record)
