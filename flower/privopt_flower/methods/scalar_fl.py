"""DeComFL / HiSo: scalar-only rounds. The server sends each participant the round plan (step
seeds) and its catch-up (a replay of the rounds it missed, or the full model past the staleness
bound); the client replays, runs its local zeroth-order steps on its own minibatches and returns
only scalars. Clients save their replicated state durably, so one killed and restarted resumes
by replay.

With ``scalar_fl.epsilon > 0`` (client-level DP) or ``scalar_fl.secagg``, no scalar travels in
the clear: a round is four messages, the SecAgg+ stages of :mod:`.secure_round`. The first
carries the plan and catch-up; the client trains, clips its scalars to ``clip``, adds its share
of the Gaussian noise (:class:`privopt.protocols.scalar_fl.Privacy`) and returns its SecAgg+ key
advertisement; its masked scalars go in the third. The server closes the round with the sum
(or skips it, the model unmoved, when the sum fails or falls below the noise floor). A
per-client ledger (``privacy.csv``/``.json``/``.svg`` in the out-dir) records each client's ε
from the rounds its scalars were in a released sum, at the noise that sum carried, and no
client is chosen once its next round would pass ``epsilon``."""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
from privopt.errors import PrivoptError, ProtocolError
from privopt.ledger import PrivacyLedger
from privopt.protocols import scalar_fl

from .. import problems
from ..config import ConfigError, ScalarFlParams, Settings, method_params
from ..node import Node, State
from ..results import Report, ScalarFlOutcome
from ..transport import Federation, Payload
from .secure_round import (
    MIN_CLIENTS,
    PARTS,
    SumRound,
    check_setup,
    client_part,
    close_ledger,
    drop_rounds,
    noise_multiplier,
    round_setup,
)

STATE = "scalar_fl"
# The run's SecAgg+ sums: every pair of a round's participants masks (rounds are small).
LABEL = "scalar_fl"
GRAPH: Literal["complete"] = "complete"
RATES = (0.0, 0.0)  # the dropout and corruption rates a sparse graph would be sized for
# The client's private scalars of the round it trained, until its masked-input stage.
WORDS = "scalar_fl/words"
# The stages the server sends, in order; each travels as Flower message type "query.<stage>".
# "round" carries a clear round; a private round is SecAgg+'s four.
STAGES: tuple[str, ...] = ("round", *PARTS)


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


def _privacy(s: Settings, per_round: int) -> tuple[scalar_fl.Privacy | None, float, int]:
    """The run's privacy settings (``None``: clear scalars), σ and the accountant's count of
    participations per client."""
    cfg = _params(s)
    if not cfg.epsilon >= 0 or not 0 < cfg.delta < 1:
        raise ConfigError(
            f"scalar_fl: need epsilon >= 0 (0: no DP) and 0 < delta < 1, got {cfg.epsilon} "
            f"and {cfg.delta}"
        )
    if cfg.participations < 0:
        raise ConfigError(f"scalar_fl.participations must be >= 0, got {cfg.participations}")
    count = cfg.participations or math.ceil(1.2 * s.rounds * per_round / s.clients)
    if not (cfg.epsilon or cfg.secagg):
        return None, 0.0, count
    if per_round < MIN_CLIENTS:
        raise ConfigError(
            f"scalar_fl with SecAgg+ needs per_round >= {MIN_CLIENTS}, got {per_round}"
        )
    sigma = noise_multiplier(cfg.epsilon, count, cfg.delta)
    try:
        privacy = scalar_fl.Privacy(cfg.clip, sigma, cfg.noise_floor)
    except PrivoptError as e:
        raise ConfigError(f"scalar_fl: {e}") from None
    return privacy, sigma, count


def serve(fed: Federation, s: Settings, report: Report) -> ScalarFlOutcome:
    cfg = _params(s)
    spec = _spec(s)
    p = problems.problem(s)
    per_round = cfg.per_round or s.clients
    if not 1 <= per_round <= s.clients:
        raise ConfigError(f"scalar_fl.per_round must be in 1..={s.clients}, got {per_round}")
    privacy, sigma, count = _privacy(s, per_round)
    ledger = PrivacyLedger(s.clients, cfg.delta, cfg.epsilon) if privacy and cfg.epsilon else None
    if ledger is not None:
        print(
            f"[privopt] client-level (ε = {cfg.epsilon:g}, δ = {cfg.delta:g}) over {count} "
            f"participations per client: σ = {sigma:.4g}, clip {cfg.clip:g}",
            flush=True,
        )
    bound = cfg.staleness_bound
    server = scalar_fl.Server(
        spec,
        p.init_params(s.seed),
        s.clients,
        None if bound < 0 else bound,
        seed=s.seed,
        privacy=privacy,
    )
    up = down = skipped = 0
    for r in range(s.rounds):
        for party, hello in fed.refresh({"method": s.method}, s.stage_timeout).items():
            held = int(hello.get("round", 0))
            try:
                server.rewind(party, held)
            except PrivoptError as e:
                report.event(f"round {r}: party {party} rejoined at round {held}: {e}")
        eligible = None
        size = per_round
        if privacy is not None:
            # A secure round samples among the connected clients (a dead one would fail its
            # sum), and with DP among those whose next release stays within their budget.
            eligible = fed.present()
            if ledger is not None:
                eligible, stopped = ledger.admit(eligible, sigma)
                for c in stopped:
                    report.event(f"round {r + 1}: {ledger.stop_reason(c, 'scalar_fl.epsilon')}")
            size = min(per_round, len(eligible))
            if size < MIN_CLIENTS:
                report.event(f"round {r + 1}: {len(eligible)} clients can take part: stop")
                break
        plan, who = server.begin_round(size, eligible)
        requests = {c: {"round": r, "plan": plan, "catch_up": server.catch_up(c)} for c in who}
        row: dict[str, Any] = {"round": r + 1, "participants": len(who)}
        if privacy is None:
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
            row.update(replies=len(kept), stage_s=round(ex.seconds, 3))
        else:
            contributors, seconds, traffic = _secure_round(
                fed, s, r, who, requests, privacy, server, report
            )
            up, down = up + traffic[0], down + traffic[1]
            if contributors is None:
                skipped += 1
            else:
                row.update(replies=len(contributors), stage_s=round(seconds, 3))
                if ledger is not None:
                    m = privacy.effective_multiplier(len(who), len(contributors))
                    ledger.record_each(r + 1, dict.fromkeys(contributors, m))
                    eps = [ledger.epsilon(c) for c in range(s.clients)]
                    row.update(epsilon_client_min=min(eps), epsilon_client_max=max(eps))
        row.update(up_bytes=up, down_bytes=down)
        if s.evaluates(r + 1):
            loss, acc = p.evaluate(server.x)
            row.update(test_loss=loss, accuracy=acc)
        report.round(**row)
    loss, acc = p.evaluate(server.x)
    per_client, at_budget = close_ledger(ledger, s)
    return ScalarFlOutcome(
        test_loss=loss,
        accuracy=acc,
        up_bytes=up,
        down_bytes=down,
        full_downloads=server.full_downloads,
        model_sha=_digest(server.x),
        sigma=sigma,
        epsilon_per_client=per_client,
        skipped_rounds=skipped,
        clients_at_budget=at_budget,
    )


def _secure_round(
    fed: Federation,
    s: Settings,
    r: int,
    who: list[int],
    requests: dict[int, Payload],
    privacy: scalar_fl.Privacy,
    server: scalar_fl.Server,
    report: Report,
) -> tuple[list[int] | None, float, tuple[int, int]]:
    """Round ``r``'s four SecAgg+ stages (the first also carries each participant's plan and
    catch-up): the contributors (``None``: the round was skipped), the stages' seconds and the
    bytes up and down."""
    reveal = bool(s.debug.get("reveal-inputs", False))
    dim = _spec(s).scalars_per_round
    # A complete graph with a majority threshold: a round has few participants.
    sr = SumRound(LABEL, s.seed, r + 1, who, dim, GRAPH, RATES, report, reveal)
    sr.extra_for = requests
    seconds, up, down = 0.0, 0, 0
    try:
        for part in PARTS:
            if part == "unmask":
                sr.check_unmaskable(privacy.required_contributors(len(who)))
            outgoing = {
                party: {"round": r, "parts": [part], **{f"{part}_{k}": v for k, v in req.items()}}
                for party, req in sr.requests(part).items()
            }
            ex = fed.exchange(part, outgoing, s.stage_timeout)
            seconds += ex.seconds
            up, down = up + ex.up_bytes, down + ex.down_bytes
            sr.receive(part, ex)
        total, contributors = sr.finish()
        server.finish_round_secure(total, contributors)
    except PrivoptError as e:
        report.event(f"round {r + 1}: no sum released, the model stays ({type(e).__name__}: {e})")
        server.skip_round()
        return None, seconds, (up, down)
    return contributors, seconds, (up, down)


def hello(state: State, node: Node, s: Settings) -> Payload:
    drop_rounds(state)  # a SecAgg+ client never outlives its round
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


def _train(req: Payload, state: State, node: Node, s: Settings) -> tuple[scalar_fl.Client, Any]:
    """Catches up with the request's catch-up and returns the client and its loss on the
    round's minibatches (the client's state saved durably at the round's start)."""
    cfg = _params(s)
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
    return client, lambda k, x: p.loss(x, batches[k])


def handle(stage: str, req: Payload, state: State, node: Node, s: Settings) -> Payload:
    if stage == "round":
        client, loss = _train(req, state, node, s)
        reply = client.local_update(req["plan"], loss)
        return {"reply": reply, "round": client.round}
    if stage not in PARTS or req.get("parts") != [stage]:
        raise ValueError(f"scalar_fl has no stage {stage!r}")
    mine = {k[len(stage) + 1 :]: v for k, v in req.items() if k.startswith(f"{stage}_")}
    t = int(req["round"]) + 1
    reveal = bool(s.debug.get("reveal-inputs", False))
    floor = 0
    if stage == "advertise":
        privacy, _, _ = _privacy(s, _params(s).per_round or s.clients)
        if privacy is None:
            raise ValueError("a SecAgg+ stage reached a client of a run without it")
        # The noise share is sized for the plan's participants: the SecAgg+ round must be
        # among that many, and unmask no sum of fewer than the noise assumes.
        parties = scalar_fl.round_participants(mine["plan"])
        if node.party not in parties:
            raise ProtocolError(f"the round's plan does not name this party ({node.party})")
        setup = round_setup(LABEL, s.seed, t, len(parties), GRAPH, RATES)
        check_setup(mine, setup, parties.index(node.party))
        floor = privacy.required_contributors(len(parties))
        client, loss = _train(mine, state, node, s)
        words = client.private_update(mine["plan"], loss, privacy)
        state.put(WORDS, np.ascontiguousarray(words, dtype="<u4").tobytes())

    def masked_input(_req: Payload) -> tuple[np.ndarray, Payload]:
        raw = state.require(WORDS, stage, f"round {t}'s private scalars")
        return np.frombuffer(raw, dtype="<u4").copy(), {}

    out = client_part(stage, t, mine, state, masked_input, reveal, min_survivors=floor)
    if stage == "mask":
        state.drop(WORDS)
    return {f"{stage}_{k}": v for k, v in out.items()}


def _digest(x: Any) -> str:
    import hashlib

    import numpy as np

    return hashlib.sha256(np.ascontiguousarray(x, dtype="<f8").tobytes()).hexdigest()[:16]
