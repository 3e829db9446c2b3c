"""EEZOFL, digital path: each round every member device sends one xMK-CKKS-encrypted scalar
(its two-point directional derivative along the round's direction), the server sums the
ciphertexts, every member sends its decryption share of the sum, and the server fuses them
into the sum alone and steps the model along the direction.

Failures: xMK-CKKS needs every member's decryption share, so a round with a device missing
(no upload or no share) fails with the error naming it; that device is excluded and the
remaining members re-key (the collective key is re-aggregated from their key shares) before
the next round. A client that joins or rejoins (a restarted SuperNode lost its secret) is set up
and keyed in before the next round."""

from __future__ import annotations

import hashlib
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
from ..transport import Federation, Payload

STATE = "eezofl"
# The stages the server sends, in order; each travels as Flower message type "query.<stage>".
STAGES: tuple[str, ...] = ("setup", "key", "encrypt", "decrypt")
# A ring of the HE standard's 128-bit table: n = 4096, log Q = 109.
PRIME_BITS = (37, 36, 36)


def _settings(s: Settings) -> EezoflParams:
    return method_params(s, EezoflParams)


def _params() -> ckks.Params:
    return ckks.Params(4096, list(PRIME_BITS))


def _crs(s: Settings, params: ckks.Params) -> multiparty.CommonPoly:
    # Public: every party derives the common polynomial from the run seed.
    return multiparty.CommonPoly(
        params, hashlib.sha256(f"privopt-eezofl-crs/{s.seed}".encode()).digest()
    )


def direction(s: Settings, round_: int, d: int) -> np.ndarray:
    """The round's perturbation φ ~ N(0, I), from the public run seed: privopt's stream, the
    one ``privopt.torch.EezoflDevice`` moves a module along in place."""
    return eezofl.direction(s.seed, round_, d)


def serve(fed: Federation, s: Settings, report: Report) -> EezoflOutcome:
    cfg = _settings(s)
    p = problems.problem(s)
    schedule = cfg.schedule()
    params = _params()
    crs = _crs(s, params)
    x = p.init_params(s.seed)
    shares: dict[int, bytes] = {}  # every keyed device's key share
    members: list[int] = []
    server: eezofl.Server | None = None
    up = down = 0
    failed = 0
    joined = fed.present()  # greeted before the method started
    for r in range(s.rounds):
        joined = sorted(set(joined) | set(fed.refresh({"method": s.method}, s.stage_timeout)))
        if joined:
            # Set up the newcomers (their fresh secrets), then key every member.
            ex = fed.exchange("setup", {c: {"round": r} for c in joined}, s.stage_timeout)
            up, down = up + ex.up_bytes, down + ex.down_bytes
            for c, reply in ex.replies.items():
                shares[c] = reply["key_share"]
            members = sorted(set(members) | set(ex.replies))
            server, members = _rekey(fed, s, report, params, crs, members, shares, r)
            joined = []
            if server is None:
                break
        assert server is not None
        phi = direction(s, r, len(x))
        model = np.ascontiguousarray(x, dtype="<f8").tobytes()
        # The key's own round counter (it restarts at every re-keying) binds the uploads.
        req = {"round": r, "key_round": server.round, "model": model}
        ex = fed.exchange("encrypt", {c: dict(req) for c in members}, s.stage_timeout)
        up, down = up + ex.up_bytes, down + ex.down_bytes
        missing = set(ex.missing)
        value = None
        try:
            total = server.sum([ex.replies[c]["upload"] for c in members if c in ex.replies])
            ex2 = fed.exchange(
                "decrypt", {c: {"round": r, "sum": total} for c in members}, s.stage_timeout
            )
            up, down = up + ex2.up_bytes, down + ex2.down_bytes
            missing |= set(ex2.missing)
            value = server.fuse([ex2.replies[c]["share"] for c in members if c in ex2.replies])
        except PrivoptError as e:
            failed += 1
            report.event(
                f"round {r}: failed ({type(e).__name__}: {e}); excluding {sorted(missing)}"
            )
        if value is not None:
            x = x - schedule.eta(r) * (value / len(members)) * phi
        row: dict[str, Any] = {
            "round": r + 1,
            "members": len(members),
            "up_bytes": up,
            "down_bytes": down,
        }
        if value is not None:
            row["sum"] = value
        if s.evaluates(r + 1):
            loss, acc = p.evaluate(x)
            row.update(test_loss=loss, accuracy=acc)
        report.round(**row)
        if missing:
            members = [c for c in members if c not in missing]
            server, members = _rekey(fed, s, report, params, crs, members, shares, r)
            if server is None:
                break
    loss, acc = p.evaluate(x)
    return EezoflOutcome(
        test_loss=loss,
        accuracy=acc,
        up_bytes=up,
        down_bytes=down,
        failed_rounds=failed,
        members=members,
    )


def _rekey(
    fed: Federation,
    s: Settings,
    report: Report,
    params: ckks.Params,
    crs: multiparty.CommonPoly,
    members: list[int],
    shares: dict[int, bytes],
    r: int,
) -> tuple[eezofl.Server | None, list[int]]:
    """The collective key of ``members``, aggregated by the server and by each of them; a
    member that does not confirm is left out and the rest key again."""
    while len(members) >= 2:
        server = eezofl.Server(params, crs, members, [shares[c] for c in members])
        ex = fed.exchange(
            "key", {c: {"round": r, "relay": server.relay} for c in members}, s.stage_timeout
        )
        if not ex.missing:
            return server, members
        report.event(f"round {r}: keying failed for {sorted(ex.missing)}; excluding them")
        members = [c for c in members if c not in ex.missing]
    report.event(f"round {r}: fewer than 2 devices left ({members}): stop")
    return None, members


def hello(state: State, node: Node, s: Settings) -> Payload:
    state.drop(STATE)  # a (re)joining device is set up afresh
    return {}


def handle(stage: str, req: Payload, state: State, node: Node, s: Settings) -> Payload:
    cfg = _settings(s)
    params = _params()
    crs = _crs(s, params)
    if stage == "setup":
        device = eezofl.Device(node.party, params, crs)
        state.put(STATE, device.save())
        return {"key_share": device.key_share}
    device = eezofl.Device.restore(params, crs, state.require(STATE, stage, "this device"))
    reply: Payload = {}
    if stage == "key":
        device.set_key(req["relay"])
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
        reply["share"] = device.decryption_share(req["sum"])
    else:
        raise ValueError(f"eezofl has no stage {stage!r}")
    state.put(STATE, device.save())
    return reply
