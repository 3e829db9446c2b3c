"""DeComFL / HiSo: scalar-only rounds. The server sends each participant the round plan (step
seeds) and its catch-up (a replay of the rounds it missed, or the full model past the staleness
bound); the client replays, runs its local zeroth-order steps on its own minibatches and returns
only scalars. Clients save their replicated state durably, so one killed and restarted resumes
by replay."""

from __future__ import annotations

from typing import Any

from privopt.errors import PrivoptError
from privopt.protocols import scalar_fl

from .. import problems
from ..config import ConfigError, ScalarFlParams, Settings, method_params
from ..node import Node, State
from ..results import Report, ScalarFlOutcome
from ..transport import Federation, Payload

STATE = "scalar_fl"
# The stages the server sends, in order; each travels as Flower message type "query.<stage>".
STAGES: tuple[str, ...] = ("round",)


def _params(s: Settings) -> ScalarFlParams:
    return method_params(s, ScalarFlParams)


def _spec(s: Settings) -> scalar_fl.Spec:
    cfg = _params(s)
    return scalar_fl.Spec(
        lr=cfg.lr,
        local_steps=cfg.local_steps,
        perturbations=cfg.perturbations,
        rule=cfg.rule,
        nu=cfg.nu,
        eps=cfg.eps,
        weight_decay=cfg.weight_decay,
    )


def serve(fed: Federation, s: Settings, report: Report) -> ScalarFlOutcome:
    cfg = _params(s)
    spec = _spec(s)
    p = problems.problem(s)
    per_round = cfg.per_round or s.clients
    if not 1 <= per_round <= s.clients:
        raise ConfigError(f"scalar_fl.per_round must be in 1..={s.clients}, got {per_round}")
    bound = cfg.staleness_bound
    server = scalar_fl.Server(
        spec, p.init_params(s.seed), s.clients, None if bound < 0 else bound, seed=s.seed
    )
    up = down = 0
    for r in range(s.rounds):
        for party, hello in fed.refresh({"method": s.method}, s.stage_timeout).items():
            held = int(hello.get("round", 0))
            try:
                server.rewind(party, held)
            except PrivoptError as e:
                report.event(f"round {r}: party {party} rejoined at round {held}: {e}")
        plan, who = server.begin_round(per_round)
        requests = {c: {"round": r, "plan": plan, "catch_up": server.catch_up(c)} for c in who}
        ex = fed.exchange("round", requests, s.stage_timeout)
        for c in sorted(ex.replies):
            try:
                server.receive(ex.replies[c]["reply"])
            except (PrivoptError, KeyError) as e:
                ex.missing[c] = f"reply refused: {e}"
        for c, why in sorted(ex.missing.items()):
            report.event(f"round {r}: party {c} dropped ({why})")
        kept = server.finish_round()
        up += ex.up_bytes
        down += ex.down_bytes + len(plan) * len(who)
        row: dict[str, Any] = {
            "round": r + 1,
            "participants": len(who),
            "replies": len(kept),
            "stage_s": round(ex.seconds, 3),
            "up_bytes": up,
            "down_bytes": down,
        }
        if s.evaluates(r + 1):
            loss, acc = p.evaluate(server.x)
            row.update(test_loss=loss, accuracy=acc)
        report.round(**row)
    loss, acc = p.evaluate(server.x)
    return ScalarFlOutcome(
        test_loss=loss,
        accuracy=acc,
        up_bytes=up,
        down_bytes=down,
        full_downloads=server.full_downloads,
        model_sha=_digest(server.x),
    )


def hello(state: State, node: Node, s: Settings) -> Payload:
    saved = state.get(STATE)
    if saved is None:
        return {"round": 0}
    client = _client(node, s)
    client.receive(saved)
    return {"round": client.round}


def _client(node: Node, s: Settings) -> scalar_fl.Client:
    cfg = _params(s)
    p = problems.problem(s)
    return scalar_fl.Client(
        node.party,
        _spec(s),
        p.init_params(s.seed),
        mu=cfg.mu,
        difference=cfg.difference,
    )


def handle(stage: str, req: Payload, state: State, node: Node, s: Settings) -> Payload:
    cfg = _params(s)
    if stage != "round":
        raise ValueError(f"scalar_fl has no stage {stage!r}")
    p = problems.problem(s)
    client = _client(node, s)
    saved = state.get(STATE)
    if saved is not None:
        client.receive(saved)
    client.receive(req["catch_up"])
    # Saved before the local steps: what the client holds is the round's start.
    state.put(STATE, client.state, durable=True)
    size = cfg.batch_size
    r = int(req["round"])
    batches = [problems.batch(p, s, node.party, r, k, size) for k in range(cfg.local_steps)]
    reply = client.local_update(req["plan"], lambda k, x: p.loss(x, batches[k]))
    return {"reply": reply, "round": client.round}


def _digest(x: Any) -> str:
    import hashlib

    import numpy as np

    return hashlib.sha256(np.ascontiguousarray(x, dtype="<f8").tobytes()).hexdigest()[:16]
