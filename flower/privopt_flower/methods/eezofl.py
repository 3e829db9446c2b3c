"""EEZOFL, digital path: each round every member device sends one xMK-CKKS-encrypted scalar
(its two-point directional derivative along the round's direction), the server sums the
ciphertexts, devices send decryption shares of the sum, and the server fuses them into the sum
alone and steps the model along the direction.

Keys: by default a **threshold key** (``eezofl.threshold``; two thirds of the devices, rounded
up): after aggregating the collective key the devices re-share their secrets, each share sealed
to its recipient (stages ``deal`` and ``finish``), and any ``t`` of them decrypt. A round sums
the uploads of at least ``t`` devices; the server then broadcasts the sum (``decrypt``), fixes
the round's active set among the contributors that answered (``t`` of them), and asks only
them, once (``share``). Devices that die mid-round cost nothing while ``t`` are left: no
re-key, and a device restarted from its durable save (a node ``state-dir``) resumes with the
same key. With fewer than ``t`` the round fails with an error naming the count and is
abandoned (never asked about again: the next round is a fresh encryption); before the next
round the devices still present re-key. ``eezofl.threshold`` at or above the device count
gives the paper's N-of-N key: a device missing from any stage fails the round and the rest
re-key without it. A client that joins with no key (new, or restarted without its save) is set
up and keyed in before the next round."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from privopt import ckks
from privopt.ckks import multiparty
from privopt.errors import PrivoptError
from privopt.protocols import eezofl

from .. import problems
from ..config import EezoflParams, Settings, method_params
from ..node import Node, State
from ..results import EezoflOutcome, Report
from ..transport import Exchange, Federation, Payload

STATE = "eezofl"
KEY_ID = "eezofl-key"  # which key the saved device holds (a restarted device reports it)
# The stages the server sends, in order; each travels as Flower message type "query.<stage>".
STAGES: tuple[str, ...] = ("setup", "key", "deal", "finish", "encrypt", "decrypt", "share")
# A ring of the HE standard's 128-bit table: n = 4096, log Q = 109.
PRIME_BITS = (37, 36, 36)


def _settings(s: Settings) -> EezoflParams:
    return method_params(s, EezoflParams)


def _params(s: Settings) -> ckks.Params:
    base = ckks.Params(4096, list(PRIME_BITS))
    distance = _settings(s).distance_bits
    if not distance:
        return base
    # Sized for the configured device count (an upper bound on the members of any key).
    bits = multiparty.smudging_bits(base, s.clients, s.clients, distance)
    return ckks.Params(4096, list(PRIME_BITS), smudging_bits=bits)


def _crs(s: Settings, params: ckks.Params) -> multiparty.CommonPoly:
    # Public: every party derives the common polynomial from the run seed.
    return multiparty.CommonPoly(
        params, hashlib.sha256(f"privopt-eezofl-crs/{s.seed}".encode()).digest()
    )


def direction(s: Settings, round_: int, d: int) -> np.ndarray:
    """The round's perturbation φ ~ N(0, I), from the public run seed: privopt's stream, the
    one ``privopt.torch.EezoflDevice`` moves a module along in place."""
    return eezofl.direction(s.seed, round_, d)


@dataclass
class _Key:
    """The server's current collective key: its members and its id (what a device restarted
    from its save reports to resume without a re-key)."""

    server: eezofl.Server | None = None
    members: list[int] = field(default_factory=list)
    key_id: str = ""
    generation: int = 0
    keyings: int = 0  # collective keys made so far


@dataclass
class _Traffic:
    up: int = 0
    down: int = 0

    def add(self, ex: Exchange) -> Exchange:
        self.up += ex.up_bytes
        self.down += ex.down_bytes
        return ex


def serve(fed: Federation, s: Settings, report: Report) -> EezoflOutcome:
    cfg = _settings(s)
    p = problems.problem(s)
    schedule = cfg.schedule()
    params = _params(s)
    crs = _crs(s, params)
    x = p.init_params(s.seed)
    shares: dict[int, bytes] = {}  # every set-up device's key share
    key = _Key()
    absent: set[int] = set()  # members that missed a stage, until they come back
    traffic = _Traffic()
    failed = 0
    newcomers = set(fed.present())  # greeted before the method started
    for r in range(s.rounds):
        for c, hi in fed.refresh({"method": s.method}, s.stage_timeout).items():
            if key.server is not None and c in key.members and hi.get("key") == key.key_id:
                absent.discard(c)
                report.event(f"round {r}: device {c} resumed from its save (no re-key)")
            else:
                newcomers.add(c)
        rekey = bool(newcomers)
        if newcomers:  # set up the newcomers (their fresh secrets)
            ex = traffic.add(
                fed.exchange("setup", {c: {"round": r} for c in newcomers}, s.stage_timeout)
            )
            for c, reply in ex.replies.items():
                shares[c] = reply["key_share"]
            absent -= set(ex.replies)
            key.members = sorted(set(key.members) | set(ex.replies))
            newcomers = set()
        live = [c for c in key.members if c not in absent]
        t = key.server.threshold if key.server is not None else None
        if rekey or key.server is None or len(live) < (t or len(key.members)):
            key = _rekey(
                fed, s, report, traffic, params, crs, live, shares, r, key.generation, key.keyings
            )
            absent = set()
            if key.server is None:
                break
        server = key.server
        assert server is not None
        phi = direction(s, r, len(x))
        model = np.ascontiguousarray(x, dtype="<f8").tobytes()
        # The key's own round counter (it restarts at every re-keying) binds the uploads.
        req = {"round": r, "key_round": server.round, "model": model}
        live = [c for c in key.members if c not in absent]
        value, contributors = None, 0
        try:
            ex = traffic.add(fed.exchange("encrypt", {c: dict(req) for c in live}, s.stage_timeout))
            absent |= set(ex.missing)
            total = server.sum([ex.replies[c]["upload"] for c in live if c in ex.replies])
            summed = server.contributors or []
            contributors = len(summed)
            value = _decrypt(fed, s, traffic, params, server, r, total, key.members, summed, absent)
        except PrivoptError as e:
            failed += 1
            if server.threshold is None:  # N-of-N: the rest re-key without the missing
                report.event(
                    f"round {r}: failed ({type(e).__name__}: {e}); excluding {sorted(absent)}"
                )
                key.members = [c for c in key.members if c not in absent]
                key.server = None
            else:
                server.abandon()
                report.event(f"round {r}: failed ({type(e).__name__}: {e}); abandoned")
        if value is not None:
            x = x - schedule.eta(r) * (value / contributors) * phi
        row: dict[str, Any] = {
            "round": r + 1,
            "members": len(key.members),
            "up_bytes": traffic.up,
            "down_bytes": traffic.down,
        }
        if value is not None:
            row.update(sum=value, contributors=contributors)
        if s.evaluates(r + 1):
            loss, acc = p.evaluate(x)
            row.update(test_loss=loss, accuracy=acc)
        report.round(**row)
    loss, acc = p.evaluate(x)
    return EezoflOutcome(
        test_loss=loss,
        accuracy=acc,
        up_bytes=traffic.up,
        down_bytes=traffic.down,
        failed_rounds=failed,
        members=key.members,
        threshold=key.server.threshold or len(key.members) if key.server else 0,
        keyings=key.keyings,
    )


def _decrypt(
    fed: Federation,
    s: Settings,
    traffic: _Traffic,
    params: ckks.Params,
    server: eezofl.Server,
    r: int,
    total: bytes,
    members: list[int],
    summed: list[int],
    absent: set[int],
) -> float:
    """The round's sum, decrypted by every member (N-of-N) or by an active set of ``t``
    contributors still present once the sum exists; marks who went missing."""
    if server.threshold is None:
        ex = traffic.add(
            fed.exchange(
                "decrypt", {c: {"round": r, "sum": total} for c in members}, s.stage_timeout
            )
        )
        absent |= set(ex.missing)
        return server.fuse([ex.replies[c]["share"] for c in members if c in ex.replies])
    ex = traffic.add(
        fed.exchange("decrypt", {c: {"round": r, "sum": total} for c in summed}, s.stage_timeout)
    )
    absent |= set(ex.missing)
    active = server.active_set(sorted(ex.replies))
    asked = multiparty.ActiveSet.from_bytes(params, active).members
    req = {"round": r, "sum": total, "active": active}
    ex = traffic.add(fed.exchange("share", {c: dict(req) for c in asked}, s.stage_timeout))
    absent |= set(ex.missing)
    return server.fuse([ex.replies[c]["share"] for c in asked if c in ex.replies])


def _rekey(
    fed: Federation,
    s: Settings,
    report: Report,
    traffic: _Traffic,
    params: ckks.Params,
    crs: multiparty.CommonPoly,
    members: list[int],
    shares: dict[int, bytes],
    r: int,
    generation: int,
    keyings: int,
) -> _Key:
    """The collective key of ``members``, aggregated by the server and by each of them, then
    re-shared for the run's threshold; a member that misses a step is left out and the rest
    key again."""
    cfg = _settings(s)
    while len(members) >= 2:
        generation += 1
        server = eezofl.Server(params, crs, members, [shares[c] for c in members])
        key_id = f"{generation}:{hashlib.sha256(server.relay).hexdigest()[:16]}"
        t = cfg.threshold_for(len(members))
        threshold = t if t < len(members) else 0  # 0: N-of-N, nothing to re-share
        req = {"round": r, "relay": server.relay, "key_id": key_id, "threshold": threshold}
        ex = traffic.add(fed.exchange("key", {c: dict(req) for c in members}, s.stage_timeout))
        if threshold and not ex.missing:
            keys = [ex.replies[c]["sealing_key"] for c in members]
            ex = traffic.add(
                fed.exchange(
                    "deal", {c: {"round": r, "keys": keys} for c in members}, s.stage_timeout
                )
            )
            if not ex.missing:
                dealt = {c: ex.replies[c]["sealed"] for c in members}
                # Drawn now that every dealing is in: no dealer could tune its shares to it.
                check = server.dealing_check(threshold, generation, members)
                ex = traffic.add(
                    fed.exchange(
                        "finish",
                        {
                            c: {
                                "round": r,
                                "sealed": [dealt[d][i] for d in members],
                                "check": check,
                            }
                            for i, c in enumerate(members)
                        },
                        s.stage_timeout,
                    )
                )
                if not ex.missing:
                    answers = [ex.replies[c]["dealing"] for c in members]
                    try:
                        bad = server.failed_dealers(threshold, check, answers)
                    except PrivoptError as e:  # a malformed or false answer: no dealer named
                        report.event(f"round {r}: dealing check not completed ({e})")
                        bad = []
                    if bad:
                        report.event(
                            f"round {r}: the dealings of devices {bad} fail the dealing check "
                            "(shares of no single secret of their key); excluding them"
                        )
                        members = [c for c in members if c not in bad]
                        continue
        if not ex.missing:
            if threshold:
                server.use_threshold(threshold)
            if r > 0:  # a re-key is news; the first keying is not
                report.event(
                    f"round {r}: re-keyed devices {members}; any {threshold or len(members)} "
                    f"of {len(members)} decrypt"
                )
            return _Key(server, members, key_id, generation, keyings + 1)
        report.event(f"round {r}: keying failed for {sorted(ex.missing)}; excluding them")
        members = [c for c in members if c not in ex.missing]
    report.event(f"round {r}: fewer than 2 devices left ({members}): stop")
    return _Key(None, members, "", generation, keyings)


def hello(state: State, node: Node, s: Settings) -> Payload:
    # A device restarted from its durable save reports its key, so the server resumes it
    # without a re-key; any other (re)joining device is set up afresh.
    key_id = state.get(KEY_ID)
    if key_id is not None and state.get(STATE) is not None:
        return {"key": key_id.decode()}
    state.drop(STATE)
    return {}


def handle(stage: str, req: Payload, state: State, node: Node, s: Settings) -> Payload:
    cfg = _settings(s)
    params = _params(s)
    crs = _crs(s, params)
    reply: Payload = {}
    if stage == "setup":
        device = eezofl.Device(node.party, params, crs)
        reply["key_share"] = device.key_share
    else:
        device = eezofl.Device.restore(params, crs, state.require(STATE, stage, "this device"))
    if stage == "key":
        device.set_key(req["relay"])
        threshold = int(req["threshold"])
        if threshold:
            # The session is the key's generation: fresh for every setup.
            session = int(str(req["key_id"]).split(":")[0])
            reply["sealing_key"] = device.start_threshold(threshold, session)
        state.put(KEY_ID, str(req["key_id"]).encode(), durable=True)
    elif stage == "deal":
        sealed = device.deal_threshold(list(req["keys"]))
        reply["sealed"] = [sealed[m] for m in sorted(sealed)]
    elif stage == "finish":
        device.finish_threshold(list(req["sealed"]))
        reply["dealing"] = device.answer_dealing_check(req["check"])
    elif stage == "encrypt":
        p = problems.problem(s)
        r = int(req["round"])
        x = np.frombuffer(req["model"], dtype="<f8")
        phi = direction(s, r, len(x))
        mu = cfg.schedule().gamma(r)
        batch = problems.batch(p, s, node.party, r, 0, cfg.batch_size)
        b = (p.loss(x + mu * phi, batch) - p.loss(x - mu * phi, batch)) / (2 * mu)
        reply["upload"] = device.encrypt(int(req["key_round"]), b)
    elif stage == "decrypt":
        if device.threshold is None:
            reply["share"] = device.decryption_share(req["sum"])
        else:
            reply["ready"] = True  # present: the server may put this device in the active set
    elif stage == "share":
        reply["share"] = device.threshold_share(req["sum"], req["active"])
    elif stage != "setup":
        raise ValueError(f"eezofl has no stage {stage!r}")
    # Saved (durably, where the node has a state-dir) before the reply leaves: a share is
    # given once, and a restarted device resumes from here.
    state.put(STATE, device.save(), durable=True)
    return reply
