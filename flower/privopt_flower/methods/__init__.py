"""One module per method, each a :class:`Method`: ``serve`` (the server side, over a
Federation), ``hello`` (what a client reports when it joins) and ``handle`` (a client's reply
to one stage)."""

from __future__ import annotations

from typing import Protocol

from ..config import Settings
from ..node import Node, State
from ..results import Outcome, Report
from ..transport import Federation, Payload
from . import dome, dpfhe, eezofl, pdsgd, scalar_fl


class Method(Protocol):
    """What the app needs of a method's module."""

    # The stages its server sends (each a Flower message type ``query.<stage>``).
    STAGES: tuple[str, ...]

    def serve(self, fed: Federation, s: Settings, report: Report) -> Outcome:
        """Runs the server side to the end; returns what it found."""
        ...

    def hello(self, state: State, node: Node, s: Settings) -> Payload:
        """What a client reports when it joins (e.g. the round it holds)."""
        ...

    def handle(self, stage: str, req: Payload, state: State, node: Node, s: Settings) -> Payload:
        """A client's reply to one stage's request."""
        ...


MODULES: dict[str, Method] = {
    "scalar_fl": scalar_fl,
    "dome": dome,
    "eezofl": eezofl,
    "pdsgd": pdsgd,
    "dpfhe": dpfhe,
}

# Every stage a client may be sent: the greeting, then each method's own.
STAGES: tuple[str, ...] = ("hello", *sorted({st for m in MODULES.values() for st in m.STAGES}))
