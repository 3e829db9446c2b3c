"""The same run with no Flower and no processes: every client's handler is called directly,
its state kept as bytes exactly as in deployment. Gives the reference results a Flower run
must match, the in-process time per round, and a place to inject faults."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from . import config, roles
from .node import MemoryState, Node
from .results import Report, RunResult
from .transport import Exchange, Federation, Payload, payload_bytes


class LoopbackFederation(Federation):
    """Clients in this process. ``kill`` maps (round, stage) to parties that die on receiving
    that stage's request (no reply; memory state lost, durable state kept); ``restart`` maps a
    round to parties that come back before it."""

    def __init__(
        self,
        s: config.Settings,
        state_dir: str | None = None,
        kill: Mapping[tuple[int, str], set[int]] | None = None,
        restart: Mapping[int, set[int]] | None = None,
    ) -> None:
        self._s = s
        self._dir = state_dir
        self._kill = dict(kill or {})
        self._restart = dict(restart or {})
        self._states = {p: MemoryState(self._node(p)) for p in range(s.clients)}
        self._greeted: set[int] = set()
        self._last_round = -1

    def _node(self, party: int) -> Node:
        return Node(party, self._s.clients, self._dir)

    def present(self) -> list[int]:
        return sorted(self._states)

    def refresh(self, hello: Payload, timeout: float) -> dict[int, Payload]:
        # Restarts due before the next round come back now, as a restarted node would join.
        for p in self._restart.pop(self._last_round + 1, set()):
            if p not in self._states:
                self._states[p] = MemoryState(self._node(p))
                self._greeted.discard(p)
        out = {}
        for p in sorted(set(self._states) - self._greeted):
            out[p] = roles.client_handle(
                {**hello, "stage": "hello"}, self._states[p], self._node(p), self._s
            )
            self._greeted.add(p)
        return out

    def exchange(self, stage: str, requests: Mapping[int, Payload], timeout: float) -> Exchange:
        out = Exchange()
        start = time.monotonic()
        round_ = next((int(r["round"]) for r in requests.values() if "round" in r), -1)
        self._last_round = max(self._last_round, round_)
        for party, req in requests.items():
            if party not in self._states:
                out.missing[party] = "not connected"
                continue
            out.down_bytes += payload_bytes(req)
            if party in self._kill.get((round_, stage), set()):
                del self._states[party]
                out.missing[party] = "killed"
                continue
            try:
                reply = roles.client_handle(
                    {**req, "stage": stage, "party": party},
                    self._states[party],
                    self._node(party),
                    self._s,
                )
            except Exception as e:
                out.missing[party] = f"party {party}: {type(e).__name__}: {e}"
                continue
            out.replies[party] = reply
            out.up_bytes += payload_bytes(reply)
        out.seconds = time.monotonic() - start
        return out


def run(run_config: Mapping[str, Any], **faults: Any) -> RunResult:
    """Runs the method of ``run_config`` (Flower's flat keys, over the app's defaults) in this
    process."""
    unknown = sorted(set(run_config) - set(config.defaults()))
    if unknown:  # as `flwr run` refuses them
        raise config.ConfigError(f"unknown run-config key(s): {', '.join(unknown)}")
    return run_settings(config.parse({**config.defaults(), **run_config}), **faults)


def run_settings(s: config.Settings, **faults: Any) -> RunResult:
    """Runs the method of parsed settings in this process."""
    fed = LoopbackFederation(s, **faults)
    return roles.serve(fed, s, Report(s, mode="in-process"))
