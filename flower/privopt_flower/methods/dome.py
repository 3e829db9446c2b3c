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

import math
from typing import Any

import numpy as np
from privopt import dp
from privopt.errors import PrivoptError
from privopt.protocols import dome

from .. import problems
from ..config import ConfigError, DomeParams, Settings, method_params
from ..ledger import PrivacyLedger
from ..node import Node, State
from ..results import DomeOutcome, Report
from ..transport import Federation, Payload
from .secure_round import (
    MIN_CLIENTS,
    PARTS,
    SumRound,
    client_part,
    close_ledger,
    drop_rounds,
    noise_multiplier,
    set_floor,
)

LABEL = "dome"  # names the run's SecAgg+ sessions and graphs

# SecAgg+'s four stages (advertise keys, share keys, masked input, unmask) of consecutive
# rounds overlap: round t+1's advertisement rides with round t's masked input and its key
# shares with round t's unmask, so a round costs two messages per client after the first.
# Each message carries one or two *parts*; its Flower message type is "query.<stage>".
STAGES: tuple[str, ...] = (*PARTS, "mask_advertise", "unmask_share")


def stage_name(parts: list[str]) -> str:
    """The message's stage: its parts joined (``mask_advertise``)."""
    return "_".join(parts)


def _params(s: Settings) -> DomeParams:
    return method_params(s, DomeParams)


def _sum_round(s: Settings, t: int, parties: list[int], dim: int, report: Report) -> SumRound:
    cfg = _params(s)
    reveal = bool(s.debug.get("reveal-inputs", False))
    rates = (cfg.dropout_rate, cfg.corrupt_rate)
    return SumRound(LABEL, s.seed, t, parties, dim, cfg.graph, rates, report, reveal)


def _terms(s: Settings) -> tuple[float, float, float]:
    """The run's clip, noise multiplier σ and noise floor (0: off), checked."""
    cfg = _params(s)
    if not (cfg.clip > 0 and cfg.epsilon >= 0 and 0 < cfg.delta < 1):
        raise ConfigError("dome: need clip > 0, epsilon >= 0 (0: no DP noise), 0 < delta < 1")
    if not 0 <= cfg.noise_floor <= 1:
        raise ConfigError(f"dome.noise_floor must be in [0, 1] (0: off), got {cfg.noise_floor}")
    return cfg.clip, noise_multiplier(cfg.epsilon, s.rounds, cfg.delta), cfg.noise_floor


def serve(fed: Federation, s: Settings, report: Report) -> DomeOutcome:
    cfg = _params(s)
    p = problems.problem(s)
    epsilon = cfg.epsilon
    delta = cfg.delta
    clip, sigma, floor = _terms(s)
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
    min_sigma = math.inf
    up = down = 0
    completed = aborted = 0
    spent = math.nan

    def participants(t: int, pending: list[int]) -> list[int] | None:
        """Round ``t``'s parties (``None``: too few, the run stops). Chosen while round t−1
        (``pending``) is still open, so a budget check counts that round's release too."""
        fed.refresh({"method": s.method}, s.stage_timeout)
        parties = fed.present()
        if ledger is not None:
            # A client whose next release (at the planned noise) would pass its budget sits
            # out from now on.
            parties, stopped = ledger.admit(parties, sigma, pending)
            for c in stopped:
                report.event(f"round {t}: {ledger.stop_reason(c, 'dome.max_epsilon')}")
        if len(parties) < MIN_CLIENTS:
            report.event(f"round {t}: {len(parties)} clients connected, below {MIN_CLIENTS}: stop")
            return None
        return parties

    def send(parts: dict[str, SumRound]) -> float:
        """One message to each party of the parts' rounds, carrying its part of each (the
        message's round is the first part's); a round whose sum fails is marked so."""
        nonlocal up, down
        if not parts:
            return 0.0
        round_ = next(iter(parts.values())).t
        requests: dict[int, Payload] = {}
        for part, r in list(parts.items()):
            try:
                outgoing = r.requests(part)
            except PrivoptError as e:
                r.failure = e
                del parts[part]
                continue
            for party, req in outgoing.items():
                requests.setdefault(party, {"round": round_, "parts": []})
                requests[party]["parts"].append(part)
                requests[party].update({f"{part}_{k}": v for k, v in req.items()})
                requests[party][f"{part}_round"] = r.t
        if not parts:
            return 0.0
        ex = fed.exchange(stage_name(list(parts)), requests, s.stage_timeout)
        up, down = up + ex.up_bytes, down + ex.down_bytes
        for part, r in parts.items():
            r.receive(part, ex)
        return ex.seconds

    first = participants(1, [])
    current = _sum_round(s, 1, first, server.dim, report) if first else None
    if current is not None:
        send({"advertise": current})
        send({"share": current})
    while current is not None:
        t = current.t
        row: dict[str, Any] = {"round": t, "participants": len(current.parties)}
        # The round's noise is split over the parties through the key stages (those that
        # get a masked-input request); a sum that failed at those stages never opens.
        try:
            maskers = len(current.recipients("mask")) if current.failure is None else 0
        except PrivoptError as e:
            current.failure, maskers = e, 0
        opened = current.failure is None
        if opened:
            model = np.ascontiguousarray(server.model, dtype="<f8").tobytes()
            broadcast, chunks = server.open_round(t, maskers)
            current.release = {"broadcast": broadcast, "chunks": chunks, "model": model}
        later = participants(t + 1, current.parties) if t < s.rounds else None
        following = _sum_round(s, t + 1, later, server.dim, report) if later else None
        mask = {"mask": current} if opened else {}
        times = [send({**mask, **({"advertise": following} if following else {})})]
        if current.failure is None:
            try:
                current.check_unmaskable(server.required_contributors or 1)
            except PrivoptError as e:
                current.failure = e
        unmask = {"unmask": current} if current.failure is None else {}
        share = {"share": following} if following and following.failure is None else {}
        times.append(send({**unmask, **share}))
        total: np.ndarray | None = None
        contributors: list[int] = []
        if current.failure is None:
            try:
                total, contributors = current.finish()
            except PrivoptError as e:
                current.failure = e
        if current.failure is not None:
            if opened:
                server.abort_round()
            aborted += 1
            report.event(
                f"round {t}: aborted cleanly ({type(current.failure).__name__}: {current.failure})"
            )
        else:
            assert total is not None
            server.close_round(total, len(contributors))
            completed += 1
            row.update(survivors=len(contributors), stages_s=[round(x, 3) for x in times])
            if sigma:
                shares = maskers if not floor else math.ceil(floor * maskers)
                sigma_t = sigma * math.sqrt(len(contributors) / shares)
                min_sigma = min(min_sigma, sigma_t)
                if ledger is not None:
                    ledger.record(t, contributors, sigma_t)
        if current.failure is not None and ledger is not None:
            # Aborted: counted as a release, at the weakest noise so far.
            ledger.record(t, current.parties, min(min_sigma, sigma))
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
        current = following
    loss, acc = p.evaluate(server.model)
    per_client, at_budget = close_ledger(ledger, s)
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


def hello(state: State, node: Node, s: Settings) -> Payload:
    drop_rounds(state)  # a SecAgg+ client never outlives its round
    return {}


def handle(stage: str, req: Payload, state: State, node: Node, s: Settings) -> Payload:
    parts = list(req.get("parts", []))
    allowed = stage.split("_") if stage in STAGES else []
    if not parts or [p for p in allowed if p in parts] != parts:
        raise ValueError(f"dome has no stage {stage!r} with parts {parts!r}")
    reply: Payload = {}
    for part in parts:
        mine = {k[len(part) + 1 :]: v for k, v in req.items() if k.startswith(f"{part}_")}
        try:
            out = _part(part, int(mine["round"]), mine, state, node, s)
        except PrivoptError as e:
            if len(parts) == 1:
                raise
            # A refusal of one round's part (e.g. a sum below this client's floor) leaves
            # the other round's part of the message standing.
            out = {"error": f"party {node.party}: {type(e).__name__}: {e}"}
        reply.update({f"{part}_{k}": v for k, v in out.items()})
    return reply


def _part(part: str, t: int, req: Payload, state: State, node: Node, s: Settings) -> Payload:
    def release(req: Payload) -> tuple[np.ndarray, Payload]:
        check(req)
        p = problems.problem(s)
        w = np.frombuffer(req["model"], dtype="<f8")
        batch = problems.batch(p, s, node.party, t, 0, _params(s).batch_size)
        loss, grad = p.loss_grad(w, batch)
        q = dome.release(req["broadcast"], list(req["chunks"]), grad)
        return q, {"train_loss": loss}

    def check(req: Payload) -> None:
        # The noise share is the client's to size: the broadcast must ask for the run's clip
        # and at least the run's noise for its B participants, and the client unmasks no sum
        # of fewer inputs than the share assumes (⌈f·B⌉ under a floor): a server that claims
        # more participants gets thinner shares but must then release more of them.
        clip, sigma, floor = _terms(s)
        _, fewest = dome.check_broadcast(
            req["broadcast"], clip=clip, noise_total=(sigma * clip) ** 2, noise_floor=floor or None
        )
        set_floor(state, t, fewest)

    reveal = bool(s.debug.get("reveal-inputs", False))
    return client_part(part, t, req, state, release, reveal)

    reveal = bool(s.debug.get("reveal-inputs", False))
    return client_part(part, t, req, state, release, reveal)
