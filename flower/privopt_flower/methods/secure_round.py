"""One SecAgg+ sum across Flower messages (privopt's SecAgg+, four stages: advertise keys, share
keys, masked input, unmask), shared by the methods that sum their clients' vectors securely
(DOME's sketches, DeComFL/HiSo's private scalars).

Server side, :class:`SumRound` holds a round's :class:`privopt.secagg.Server` over its parties
(SecAgg ids 0..B-1 in party order); a stage's replies may arrive inside another round's
message. Client side, :func:`client_part` runs one stage on the node's SecAgg+ client, kept in
the node's state under ``secagg/<round>`` between stages (at most two rounds live).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from typing import Literal

import numpy as np
from privopt import dp, secagg
from privopt.errors import PrivoptError, ProtocolError
from privopt.ledger import PrivacyLedger

from ..config import Settings
from ..node import State
from ..results import Report
from ..transport import Exchange, Payload

# The SecAgg+ client of round t lives in the node's state under f"{STATE}/{t}".
STATE = "secagg"
# SecAgg+'s four stages, in order.
PARTS: tuple[str, ...] = ("advertise", "share", "mask", "unmask")
# Fewest clients a SecAgg+ round can have (its threshold must be ≥ 2 and above half of each
# client's neighbours).
MIN_CLIENTS = 3


@functools.cache
def noise_multiplier(epsilon: float, releases: int, delta: float) -> float:
    """σ for ``releases`` full-participation releases per client at (ε, δ) (0 for ε = 0);
    cached, since every client of a run derives it from the same run config."""
    return dp.noise_multiplier(epsilon, releases, delta, sampling="full") if epsilon else 0.0


def round_setup(
    label: str,
    seed: int,
    t: int,
    n: int,
    graph: Literal["complete", "auto"],
    rates: tuple[float, float],
) -> tuple[secagg.Graph, int, bytes]:
    """Round ``t``'s SecAgg+ graph, threshold and session for ``n`` parties: a function of the
    run config alone, so a client can check the server's (:func:`check_setup`)."""
    digest = hashlib.sha256(f"privopt-{label}-graph/{seed}/{t}".encode()).digest()
    g, threshold = secagg.round_graph(
        n,
        sparse=graph == "auto",
        dropout_rate=rates[0],
        corrupt_rate=rates[1],
        seed=digest,
    )
    session = hashlib.sha256(f"privopt-{label}-session/{seed}/{t}".encode() + digest).digest()
    return g, threshold, session[:16]


def check_setup(advertised: Payload, setup: tuple[secagg.Graph, int, bytes], id: int) -> None:
    """A client's check of the server's SecAgg+ round (``advertised``: the advertise stage's
    session, id, neighbours and threshold) against :func:`round_setup`'s for the participants
    its noise share is sized for, in which it is ``id``. A server that claims more participants
    than it runs the sum among (so that the shares come out thinner) must then also give this
    client those neighbours and threshold."""
    g, threshold, session = setup
    got = (bytes(advertised["session"]), int(advertised["id"]), list(advertised["neighbours"]))
    if got != (session, id, g.neighbours(id)) or int(advertised["threshold"]) != threshold:
        raise ProtocolError(
            f"the server's SecAgg+ setup (session, id, neighbours, threshold) is not the one "
            f"the run config gives for the {len(g)} participants the noise share is sized for"
        )


class SumRound:
    """One round's SecAgg+ sum on the server's side, over ``parties``, of ``dim``-word vectors.
    ``graph`` is ``"complete"`` (every pair masks, a majority threshold: the server never holds
    both the self-mask and the masking-key shares of one client, the original SecAgg's bound)
    or ``"auto"`` (SecAgg+'s sparse graph sized for the dropout and corruption ``rates``).
    ``label`` and ``seed`` name the run, so each round's session and graph are its own."""

    def __init__(
        self,
        label: str,
        seed: int,
        t: int,
        parties: list[int],
        dim: int,
        graph: Literal["complete", "auto"],
        rates: tuple[float, float],
        report: Report,
        reveal: bool,
    ) -> None:
        self.t, self.parties, self.dim, self.report, self.reveal = t, parties, dim, report, reveal
        self.graph, self.threshold, self.session = round_setup(
            label, seed, t, len(parties), graph, rates
        )
        self.server = secagg.Server(self.session, t, self.graph, self.threshold, dim)
        self.party_of = dict(enumerate(parties))
        self.sid_of = {p: i for i, p in self.party_of.items()}
        self.inputs: dict[int, np.ndarray] = {}
        # Extra payload of each party's masked-input request (DOME's model and sketch), set
        # when the round opens; or per party, in ``extra_for``.
        self.release: Payload = {}
        self.extra_for: dict[int, Payload] = {}
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
                    **self.extra_for.get(p, {}),
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
            if f"{part}_error" in reply:  # the client refused this part of its message
                self.report.event(
                    f"round {t}: party {p} dropped at {part} ({reply[f'{part}_error']})"
                )
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


LIVE = f"{STATE}/live"  # the rounds whose SecAgg+ clients the state holds


def _live(state: State) -> list[int]:
    raw = state.get(LIVE)
    return [int(x) for x in raw.decode().split(",") if x] if raw else []


def drop_rounds(state: State, keep: tuple[int, ...] = ()) -> None:
    """Forgets every round's SecAgg+ client but ``keep``'s (a SecAgg+ client never outlives
    its round)."""
    for t in _live(state):
        if t not in keep:
            state.drop(f"{STATE}/{t}")
            state.drop(f"{STATE}/{t}/floor")
    state.put(LIVE, ",".join(str(t) for t in keep).encode())


#: The client's input for the masked-input stage from that stage's request: the ``uint32``
#: vector and anything to add to the reply.
InputFn = Callable[[Payload], tuple[np.ndarray, Payload]]


def set_floor(state: State, t: int, min_survivors: int) -> None:
    """Round ``t``'s fewest survivors this client helps unmask a sum of."""
    state.put(f"{STATE}/{t}/floor", str(min_survivors).encode())


def client_part(
    part: str,
    t: int,
    req: Payload,
    state: State,
    make_input: InputFn,
    reveal: bool,
    *,
    min_survivors: int = 0,
) -> Payload:
    """Stage ``part`` of round ``t`` on this node's SecAgg+ client; ``make_input`` gives the
    vector the masked-input stage masks. ``min_survivors`` (at the advertise stage, or later
    with :func:`set_floor`): the fewest inputs this client helps unmask a sum of (its input's
    noise share assumes that many contributors)."""
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
        drop_rounds(state, keep=tuple(r for r in _live(state) if r == t - 1) + (t,))
        state.put(key, client.snapshot())
        set_floor(state, t, min_survivors)
        return {"msg": client.advertisement}
    client = secagg.Client.restore(state.require(key, part, f"round {t}'s SecAgg+ client"))
    reply: Payload = {}
    if part == "share":
        reply["msg"] = client.share_keys(req["msg"])
    elif part == "mask":
        q, extra = make_input(req)
        reply.update(msg=client.mask_input(req["msg"], q), **extra)
        if reveal:
            reply["input"] = np.ascontiguousarray(q, dtype="<u4").tobytes()
    else:  # unmask
        floor = int(state.get(f"{key}/floor") or b"0")
        reply["msg"] = client.unmask(req["msg"], min_survivors=floor)
        drop_rounds(state, keep=tuple(r for r in _live(state) if r != t))
        return reply
    state.put(key, client.snapshot())
    return reply


def close_ledger(
    ledger: PrivacyLedger | None, s: Settings
) -> tuple[list[float] | None, list[int] | None]:
    """At the end of a run: the ledger's line, its files in the out-dir, and every client's ε
    and the clients at budget (``None`` without a ledger)."""
    if ledger is None:
        return None, None
    print(f"[privopt] {ledger.summary()}", flush=True)
    if s.out_dir:
        ledger.write(s.out_dir)
    return [ledger.epsilon(c) for c in range(s.clients)], sorted(ledger.exhausted)
