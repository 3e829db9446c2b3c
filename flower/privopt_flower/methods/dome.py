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

# The SecAgg+ client of round t lives in the node's state under f"{STATE}/{t}".
STATE = "secagg"
# SecAgg+'s four stages (advertise keys, share keys, masked input, unmask) of consecutive
# rounds overlap: round t+1's advertisement rides with round t's masked input and its key
# shares with round t's unmask, so a round costs two messages per client after the first.
# Each message carries one or two *parts*; its Flower message type is "query.<stage>".
PARTS: tuple[str, ...] = ("advertise", "share", "mask", "unmask")
STAGES: tuple[str, ...] = (*PARTS, "mask_advertise", "unmask_share")
MIN_CLIENTS = 3


def stage_name(parts: list[str]) -> str:
    """The message's stage: its parts joined (``mask_advertise``)."""
    return "_".join(parts)


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
    rates = (cfg.dropout_rate, cfg.corrupt_rate)
    reveal = bool(s.debug.get("reveal-inputs", False))
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
            fresh = [c for c in parties if c not in ledger.exhausted]
            parties = [c for c in fresh if ledger.admits(c, sigma, 1 + (c in pending))]
            for c in sorted(set(fresh) - set(parties)):
                report.event(
                    f"round {t}: party {c} reached dome.max_epsilon = {budget:g} "
                    f"(ε = {ledger.epsilon(c):.4g}) and takes no further part"
                )
        if len(parties) < MIN_CLIENTS:
            report.event(f"round {t}: {len(parties)} clients connected, below {MIN_CLIENTS}: stop")
            return None
        return parties

    def send(parts: dict[str, _SumRound]) -> float:
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
    current = _SumRound(s, 1, first, server.dim, rates, report, reveal) if first else None
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
        following = _SumRound(s, t + 1, later, server.dim, rates, report, reveal) if later else None
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


class _SumRound:
    """One round's SecAgg+ sum on the server's side, over ``parties`` (SecAgg ids 0..B-1 in
    party order); a stage's replies may arrive inside another round's message."""

    def __init__(
        self,
        s: Settings,
        t: int,
        parties: list[int],
        dim: int,
        rates: tuple[float, float],
        report: Report,
        reveal: bool,
    ) -> None:
        self.t, self.parties, self.dim, self.report, self.reveal = t, parties, dim, report, reveal
        b = len(parties)
        seed = hashlib.sha256(f"privopt-dome-graph/{s.seed}/{t}".encode()).digest()
        if _params(s).graph == "complete":
            # Every pair masks; a majority threshold keeps the server from ever holding both
            # the self-mask and the masking-key shares of one client (the original SecAgg's
            # bound).
            graph, threshold = secagg.Graph.complete(b), (b - 1) // 2 + 1
        else:  # SecAgg+'s sparse graph, sized for the dropout and corruption rates
            gp = secagg.parameters(b, dropout_rate=rates[0], corrupt_rate=rates[1])
            threshold = gp.threshold
            graph = (
                secagg.Graph.complete(b)
                if gp.degree >= b - 1
                else secagg.Graph.harary(b, gp.degree, seed)
            )
        self.graph, self.threshold = graph, threshold
        self.session = hashlib.sha256(
            f"privopt-dome-session/{s.seed}/{t}".encode() + seed
        ).digest()[:16]
        self.server = secagg.Server(self.session, t, graph, threshold, dim)
        self.party_of = dict(enumerate(parties))
        self.sid_of = {p: i for i, p in self.party_of.items()}
        self.inputs: dict[int, np.ndarray] = {}
        # DOME's model and sketch for the masked-input stage (set when the round opens).
        self.release: Payload = {}
        self.failure: PrivoptError | None = None
        # A stage's requests, when closed before they are sent (to count their recipients).
        self._outbox: tuple[str, dict[int, bytes]] | None = None
        # The parties asked for each stage (a message may carry no part of this round).
        self._asked: dict[str, set[int]] = {}

    def requests(self, part: str) -> dict[int, Payload]:
        """Each party's request of stage ``part``."""
        out = self._requests(part)
        self._asked[part] = set(out)
        return out

    def _requests(self, part: str) -> dict[int, Payload]:
        if part == "advertise":
            return {
                p: {
                    "session": self.session,
                    "id": i,
                    "neighbours": self.graph.neighbours(i),
                    "threshold": self.threshold,
                    "vector_len": self.dim,
                }
                for i, p in self.party_of.items()
            }
        extra = self.release if part == "mask" else {}
        outbox = self.recipients(part)
        self._outbox = None
        return {self.party_of[i]: {"msg": m, **extra} for i, m in outbox.items()}

    def receive(self, part: str, ex: Exchange) -> None:
        """Stage ``part``'s replies from the message ``ex`` (parties of other rounds skipped)."""
        t, asked = self.t, self._asked.get(part, set())
        for p, why in sorted(ex.missing.items()):
            if p in asked:
                self.report.event(f"round {t}: party {p} dropped at {part} ({why})")
        for p in sorted(ex.replies):
            reply = ex.replies[p]
            if p not in asked:
                continue
            try:
                self.server.receive(reply[f"{part}_msg"])
            except (PrivoptError, KeyError) as e:
                self.report.event(f"round {t}: party {p}'s {part} reply refused ({e})")
            if self.reveal and f"{part}_input" in reply:
                self.inputs[self.sid_of[p]] = np.frombuffer(reply[f"{part}_input"], dtype="<u4")

    def recipients(self, part: str) -> dict[int, bytes]:
        """Stage ``part``'s requests by SecAgg id: the previous stage closed (once)."""
        if self._outbox is None or self._outbox[0] != part:
            self._outbox = (part, self.server.close_stage())
        return self._outbox[1]

    def check_unmaskable(self, required: int) -> None:
        """Refuses to unmask a sum of fewer than ``required`` masked inputs (before any
        unmask request goes out: each goes to a client whose masked input arrived)."""
        masked = len(self.recipients("unmask"))
        if masked < required:
            raise ProtocolError(
                f"{masked} masked inputs, below the {required} the noise floor needs"
            )

    def finish(self) -> tuple[np.ndarray, list[int]]:
        total, contributors = self.server.finish()
        if self.reveal:  # test-only: the clients also sent their inputs in the clear
            want = np.zeros(self.dim, dtype=np.uint64)
            for c in contributors:
                want += self.inputs[c]
            if not np.array_equal(total, (want % 2**32).astype(np.uint32)):
                raise AssertionError(
                    f"round {self.t}: SecAgg+ sum differs from the survivors' inputs"
                )
            self.report.event(
                f"round {self.t}: SecAgg+ sum equals the sum of {len(contributors)} inputs"
            )
        return total, [self.party_of[c] for c in contributors]


def hello(state: State, node: Node, s: Settings) -> Payload:
    _drop_rounds(state, keep=())  # a SecAgg+ client never outlives its round
    return {}


LIVE = f"{STATE}/live"  # the rounds whose SecAgg+ clients the state holds


def _live(state: State) -> list[int]:
    raw = state.get(LIVE)
    return [int(x) for x in raw.decode().split(",") if x] if raw else []


def _drop_rounds(state: State, keep: tuple[int, ...]) -> None:
    """Forgets every round's SecAgg+ client but ``keep``'s."""
    for t in _live(state):
        if t not in keep:
            state.drop(f"{STATE}/{t}")
    state.put(LIVE, ",".join(str(t) for t in keep).encode())


def handle(stage: str, req: Payload, state: State, node: Node, s: Settings) -> Payload:
    parts = list(req.get("parts", []))
    allowed = stage.split("_") if stage in STAGES else []
    if not parts or [p for p in allowed if p in parts] != parts:
        raise ValueError(f"dome has no stage {stage!r} with parts {parts!r}")
    reply: Payload = {}
    for part in parts:
        mine = {k[len(part) + 1 :]: v for k, v in req.items() if k.startswith(f"{part}_")}
        out = _part(part, int(mine["round"]), mine, state, node, s)
        reply.update({f"{part}_{k}": v for k, v in out.items()})
    return reply


def _part(part: str, t: int, req: Payload, state: State, node: Node, s: Settings) -> Payload:
    key = f"{STATE}/{t}"
    if part == "advertise":
        client = secagg.Client(
            req["session"],
            t,
            int(req["id"]),
            list(req["neighbours"]),
            int(req["threshold"]),
            int(req["vector_len"]),
        )
        # At most the previous round (still unmasking) and this one are open.
        _drop_rounds(state, keep=tuple(r for r in _live(state) if r == t - 1) + (t,))
        state.put(key, client.snapshot())
        return {"msg": client.advertisement}
    client = secagg.Client.restore(state.require(key, part, f"round {t}'s SecAgg+ client"))
    reply: Payload = {}
    if part == "share":
        reply["msg"] = client.share_keys(req["msg"])
    elif part == "mask":
        p = problems.problem(s)
        w = np.frombuffer(req["model"], dtype="<f8")
        batch = problems.batch(p, s, node.party, t, 0, _params(s).batch_size)
        loss, grad = p.loss_grad(w, batch)
        q = dome.release(req["broadcast"], list(req["chunks"]), grad)
        reply.update(msg=client.mask_input(req["msg"], q), train_loss=loss)
        if s.debug.get("reveal-inputs", False):
            reply["input"] = np.ascontiguousarray(q, dtype="<u4").tobytes()
    else:  # unmask
        reply["msg"] = client.unmask(req["msg"])
        _drop_rounds(state, keep=tuple(r for r in _live(state) if r != t))
        return reply
    state.put(key, client.snapshot())
    return reply
