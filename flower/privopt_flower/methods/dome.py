"""DOME: each round every connected client sends a clipped, noised, quantized sketch of its
minibatch gradient, summed by a SecAgg+ round (privopt's, four stages: advertise keys, share
keys, masked input, unmask); the server runs debiased Adam on the sketch and learns the sketch.

Privacy: client-level (ε, δ)-DP under add/remove of one client's whole data, by the Gaussian
mechanism on the sum: each round's released sum has noise of standard deviation σ·C split across
the round's participants (each adds variance σ²C²/B), σ chosen by the accountant for ``rounds``
full-participation releases. Clients that drop after the key stages but before masking take
their noise share with them, so the round's σ shrinks to σ·√(survivors/B) (Lemma A.1 of the
paper): the ε reported each round composes the smallest σ seen so far, an upper bound on what
was spent. Aborted rounds are counted as releases. With ``noise_floor = f`` each participant
adds noise for ⌈f·B⌉ contributors instead, and a round whose masked inputs number fewer aborts
before the unmask stage, so every revealed sum carries at least σ·C.

Per client (:class:`~privopt_flower.ledger.PrivacyLedger`): each client's ε composes only the
rounds its input was in the sum, each at the noise that sum carried (aborted rounds count, at
the weakest noise so far); ``privacy.csv``/``privacy.json`` go to the out-dir. With
``max_epsilon`` a client whose next round at the planned noise would pass that budget takes no
further part (one event line names it); the check assumes the round completes, so a dropout
that thins the noise (no ``noise_floor``) can take a client past the budget by that round."""

from __future__ import annotations

import hashlib
import math
from typing import Any

import numpy as np
from privopt import dp, secagg
from privopt.errors import PrivoptError, ProtocolError
from privopt.protocols import dome

from .. import problems
from ..config import ConfigError, DomeParams, Settings, method_params
from ..ledger import PrivacyLedger
from ..node import Node, State
from ..results import DomeOutcome, Report
from ..transport import Exchange, Federation, Payload

STATE = "secagg"
# The stages the server sends, in order; each travels as Flower message type "query.<stage>".
STAGES: tuple[str, ...] = ("advertise", "share", "mask", "unmask")
MIN_CLIENTS = 3


def _params(s: Settings) -> DomeParams:
    return method_params(s, DomeParams)


def serve(fed: Federation, s: Settings, report: Report) -> DomeOutcome:
    cfg = _params(s)
    p = problems.problem(s)
    clip = cfg.clip
    epsilon = cfg.epsilon
    delta = cfg.delta
    if not (clip > 0 and epsilon >= 0 and 0 < delta < 1):
        raise ConfigError("dome: need clip > 0, epsilon >= 0 (0: no DP noise), 0 < delta < 1")
    sigma = dp.noise_multiplier(epsilon, s.rounds, delta, sampling="full") if epsilon else 0.0
    floor = cfg.noise_floor
    if not 0 <= floor <= 1:
        raise ConfigError(f"dome.noise_floor must be in [0, 1] (0: off), got {floor}")
    budget = cfg.max_epsilon
    if budget < 0:
        raise ConfigError(f"dome.max_epsilon must be >= 0 (0: no budget), got {budget}")
    ledger = PrivacyLedger(s.clients, delta, budget or None) if sigma else None
    server = dome.Server(
        p.init_params(s.seed),
        k=cfg.k,
        clip=clip,
        noise_total=(sigma * clip) ** 2,
        lr=cfg.lr,
        beta1=cfg.beta1,
        beta2=cfg.beta2,
        gamma_prime=cfg.gamma_prime,
        sketch=cfg.sketch,
        energy=cfg.energy,
        seed=s.seed,
        noise_floor=floor or None,
    )
    dropout = cfg.dropout_rate
    corrupt = cfg.corrupt_rate
    reveal = bool(s.debug.get("reveal-inputs", False))
    min_sigma = math.inf
    up = down = 0
    completed = aborted = 0
    spent = math.nan
    for t in range(1, s.rounds + 1):
        fed.refresh({"method": s.method}, s.stage_timeout)
        parties = fed.present()
        if ledger is not None:
            # A client whose next release (at the planned noise) would pass its budget sits
            # out from now on.
            fresh = [c for c in parties if c not in ledger.exhausted]
            parties = [c for c in fresh if ledger.admits(c, sigma)]
            for c in sorted(set(fresh) - set(parties)):
                report.event(
                    f"round {t}: party {c} reached dome.max_epsilon = {budget:g} "
                    f"(ε = {ledger.epsilon(c):.4g}) and takes no further part"
                )
        if len(parties) < MIN_CLIENTS:
            report.event(f"round {t}: {len(parties)} clients connected, below {MIN_CLIENTS}: stop")
            break
        model = np.ascontiguousarray(server.model, dtype="<f8").tobytes()
        broadcast, chunks = server.open_round(t, len(parties))
        row: dict[str, Any] = {"round": t, "participants": len(parties)}
        try:
            total, contributors, traffic, times = _secure_sum(
                fed,
                s,
                t,
                parties,
                server.dim,
                (dropout, corrupt),
                report,
                {"broadcast": broadcast, "chunks": chunks, "model": model},
                reveal,
                server.required_contributors or 1,
            )
        except PrivoptError as e:
            server.abort_round()
            aborted += 1
            report.event(f"round {t}: aborted cleanly ({type(e).__name__}: {e})")
            total = None
            traffic, times = (0, 0), []
        up, down = up + traffic[0], down + traffic[1]
        if total is not None:
            server.close_round(total, len(contributors))
            completed += 1
            row.update(survivors=len(contributors), stages_s=[round(x, 3) for x in times])
            if sigma:
                shares = len(parties) if not floor else math.ceil(floor * len(parties))
                sigma_t = sigma * math.sqrt(len(contributors) / shares)
                min_sigma = min(min_sigma, sigma_t)
                if ledger is not None:
                    ledger.record(t, contributors, sigma_t)
        elif ledger is not None:  # aborted: counted as a release, at the weakest noise so far
            ledger.record(t, parties, min(min_sigma, sigma))
        if sigma:
            spent = dp.epsilon(
                min_sigma if min_sigma < math.inf else sigma, t, delta, sampling="full"
            )
            row["epsilon"] = spent
        if ledger is not None:
            eps = [ledger.epsilon(c) for c in range(s.clients)]
            row.update(epsilon_client_min=min(eps), epsilon_client_max=max(eps))
        row.update(up_bytes=up, down_bytes=down)
        if s.evaluates(t):
            loss, acc = p.evaluate(server.model)
            row.update(test_loss=loss, accuracy=acc)
        report.round(**row)
    loss, acc = p.evaluate(server.model)
    per_client: list[float] | None = None
    at_budget: list[int] | None = None
    if ledger is not None:
        print(f"[privopt] {ledger.summary()}", flush=True)
        if s.out_dir:
            ledger.write(s.out_dir)
        per_client = [ledger.epsilon(c) for c in range(s.clients)]
        at_budget = sorted(ledger.exhausted)
    return DomeOutcome(
        test_loss=loss,
        accuracy=acc,
        up_bytes=up,
        down_bytes=down,
        epsilon_target=epsilon,
        epsilon_spent=spent,
        delta=delta,
        sigma=sigma,
        completed_rounds=completed,
        aborted_rounds=aborted,
        epsilon_per_client=per_client,
        clients_at_budget=at_budget,
    )


def _secure_sum(
    fed: Federation,
    s: Settings,
    t: int,
    parties: list[int],
    dim: int,
    rates: tuple[float, float],
    report: Report,
    release: Payload,
    reveal: bool,
    required: int,
) -> tuple[np.ndarray, list[int], tuple[int, int], list[float]]:
    """One SecAgg+ round over ``parties`` (SecAgg ids 0..B-1 in party order); it aborts
    before unmasking when fewer than ``required`` masked inputs arrived."""
    b = len(parties)
    seed = hashlib.sha256(f"privopt-dome-graph/{s.seed}/{t}".encode()).digest()
    if _params(s).graph == "complete":
        # Every pair masks; a majority threshold keeps the server from ever holding both the
        # self-mask and the masking-key shares of one client (the original SecAgg's bound).
        graph, threshold = secagg.Graph.complete(b), (b - 1) // 2 + 1
    else:  # SecAgg+'s sparse graph, sized for the dropout and corruption rates
        gp = secagg.parameters(b, dropout_rate=rates[0], corrupt_rate=rates[1])
        threshold = gp.threshold
        graph = (
            secagg.Graph.complete(b)
            if gp.degree >= b - 1
            else secagg.Graph.harary(b, gp.degree, seed)
        )
    session = hashlib.sha256(f"privopt-dome-session/{s.seed}/{t}".encode() + seed).digest()[:16]
    server = secagg.Server(session, t, graph, threshold, dim)
    party_of = dict(enumerate(parties))
    sid_of = {p: i for i, p in party_of.items()}
    up = down = 0
    times: list[float] = []
    inputs: dict[int, np.ndarray] = {}

    def stage(name: str, requests: dict[int, Payload]) -> Exchange:
        nonlocal up, down
        ex = fed.exchange(name, requests, s.stage_timeout)
        up, down, times[len(times) :] = up + ex.up_bytes, down + ex.down_bytes, [ex.seconds]
        for p, why in sorted(ex.missing.items()):
            report.event(f"round {t}: party {p} dropped at {name} ({why})")
        for p in sorted(ex.replies):
            try:
                server.receive(ex.replies[p]["msg"])
            except (PrivoptError, KeyError) as e:
                report.event(f"round {t}: party {p}'s {name} reply refused ({e})")
            if reveal and "input" in ex.replies[p]:
                inputs[sid_of[p]] = np.frombuffer(ex.replies[p]["input"], dtype="<u4")
        return ex

    stage(
        "advertise",
        {
            p: {
                "round": t,
                "session": session,
                "id": i,
                "neighbours": graph.neighbours(i),
                "threshold": threshold,
                "vector_len": dim,
            }
            for i, p in party_of.items()
        },
    )
    for name in ("share", "mask", "unmask"):
        outbox = server.close_stage()
        if name == "unmask" and len(outbox) < required:
            # Each unmask request goes to a client whose masked input arrived.
            raise ProtocolError(
                f"{len(outbox)} masked inputs, below the {required} the noise floor needs"
            )
        extra = release if name == "mask" else {}
        stage(name, {party_of[i]: {"round": t, "msg": m, **extra} for i, m in outbox.items()})
    total, contributors = server.finish()
    if reveal:  # test-only: the clients also sent their inputs in the clear
        want = np.zeros(dim, dtype=np.uint64)
        for c in contributors:
            want += inputs[c]
        if not np.array_equal(total, (want % 2**32).astype(np.uint32)):
            raise AssertionError(f"round {t}: SecAgg+ sum differs from the survivors' inputs")
        report.event(f"round {t}: SecAgg+ sum equals the sum of {len(contributors)} inputs")
    return total, [party_of[c] for c in contributors], (up, down), times


def hello(state: State, node: Node, s: Settings) -> Payload:
    state.drop(STATE)  # a SecAgg+ client never outlives its round
    return {}


def handle(stage: str, req: Payload, state: State, node: Node, s: Settings) -> Payload:
    if stage == "advertise":
        client = secagg.Client(
            req["session"],
            int(req["round"]),
            int(req["id"]),
            list(req["neighbours"]),
            int(req["threshold"]),
            int(req["vector_len"]),
        )
        state.put(STATE, client.snapshot())
        return {"msg": client.advertisement}
    client = secagg.Client.restore(state.require(STATE, stage, "this round's SecAgg+ client"))
    reply: Payload = {}
    if stage == "share":
        reply["msg"] = client.share_keys(req["msg"])
    elif stage == "mask":
        p = problems.problem(s)
        w = np.frombuffer(req["model"], dtype="<f8")
        batch = problems.batch(p, s, node.party, int(req["round"]), 0, _params(s).batch_size)
        loss, grad = p.loss_grad(w, batch)
        q = dome.release(req["broadcast"], list(req["chunks"]), grad)
        reply.update(msg=client.mask_input(req["msg"], q), train_loss=loss)
        if s.debug.get("reveal-inputs", False):
            reply["input"] = np.ascontiguousarray(q, dtype="<u4").tobytes()
    elif stage == "unmask":
        reply["msg"] = client.unmask(req["msg"])
        state.drop(STATE)
        return reply
    else:
        raise ValueError(f"dome has no stage {stage!r}")
    state.put(STATE, client.snapshot())
    return reply
