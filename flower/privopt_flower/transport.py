"""How the server side reaches the clients: stages of request/reply by party.

A *party* is privopt's client id: the SuperNode's ``partition-id``, which also picks its data
partition, so a run is the same whatever random node ids Flower assigns. Each stage sends one
request per party and waits for the replies until a per-stage deadline; a party that does not
answer in time, or answers with an error, is *missing* from that stage with the reason.
"""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

Payload = dict[str, Any]
"""A request or reply: str keys, values a Flower ConfigRecord holds (bytes, numbers, str,
lists of them)."""

RECORD = "privopt"


def payload_bytes(p: Mapping[str, Any]) -> int:
    """Bytes of a payload's byte strings (what privopt's messages weigh on the wire)."""
    total = 0
    for v in p.values():
        if isinstance(v, bytes):
            total += len(v)
        elif isinstance(v, list):
            total += sum(len(x) for x in v if isinstance(x, bytes))
    return total


@dataclass
class Exchange:
    """One stage's outcome."""

    replies: dict[int, Payload] = field(default_factory=dict)
    missing: dict[int, str] = field(default_factory=dict)
    seconds: float = 0.0
    down_bytes: int = 0
    up_bytes: int = 0


class Federation(ABC):
    """The clients as the server sees them."""

    @abstractmethod
    def present(self) -> list[int]:
        """Parties currently connected, increasing."""

    @abstractmethod
    def refresh(self, hello: Payload, timeout: float) -> dict[int, Payload]:
        """Greets clients that joined (or rejoined after a restart) since the last call and
        returns their replies to ``hello`` by party."""

    def refusals(self) -> dict[int, str]:
        """Why clients that answered the last greeting with an error did not join (by node)."""
        return {}

    @abstractmethod
    def exchange(self, stage: str, requests: Mapping[int, Payload], timeout: float) -> Exchange:
        """Sends each party its request and collects the replies until ``timeout`` seconds."""


class FlowerFederation(Federation):
    """Parties behind a Flower :class:`~flwr.serverapp.Grid` (deployment or simulation)."""

    def __init__(self, grid: Any, poll_interval: float = 0.05, timing: bool = False) -> None:
        self._grid = grid
        self._poll = poll_interval
        self._timing = timing
        self._party_node: dict[int, int] = {}
        self._node_party: dict[int, int] = {}
        self._refused: dict[int, str] = {}

    def present(self) -> list[int]:
        live = set(self._grid.get_node_ids())
        return sorted(p for p, n in self._party_node.items() if n in live)

    def wait_for(self, count: int, timeout: float) -> None:
        """Waits until ``count`` nodes are connected (or the timeout passes)."""
        end = time.monotonic() + timeout
        while len(list(self._grid.get_node_ids())) < count and time.monotonic() < end:
            time.sleep(0.2)

    def refresh(self, hello: Payload, timeout: float) -> dict[int, Payload]:
        new = [n for n in self._grid.get_node_ids() if n not in self._node_party]
        if not new:
            return {}
        replies, errors = self._send("hello", {n: dict(hello) for n in new}, timeout)
        self._refused = errors
        greeted: dict[int, Payload] = {}
        for node, reply in replies.items():
            party = reply.get("party")
            if not isinstance(party, int) or party < 0:
                continue
            old = self._party_node.get(party)
            if old is not None:  # the party restarted on a new node: the old one is gone
                self._node_party.pop(old, None)
            self._party_node[party] = node
            self._node_party[node] = party
            greeted[party] = reply
        return greeted

    def refusals(self) -> dict[int, str]:
        return dict(self._refused)

    def exchange(self, stage: str, requests: Mapping[int, Payload], timeout: float) -> Exchange:
        out = Exchange()
        by_node: dict[int, Payload] = {}
        for party, req in requests.items():
            node = self._party_node.get(party)
            if node is None:
                out.missing[party] = "not connected"
                continue
            by_node[node] = {**req, "party": party}
            out.down_bytes += payload_bytes(req)
        start = time.monotonic()
        replies, errors = self._send(stage, by_node, timeout)
        out.seconds = time.monotonic() - start
        for node, reply in replies.items():
            party = self._node_party[node]
            out.replies[party] = reply
            out.up_bytes += payload_bytes(reply)
        for node, why in errors.items():
            out.missing[self._node_party.get(node, -1)] = why
        return out

    def _send(
        self, stage: str, by_node: Mapping[int, Payload], timeout: float
    ) -> tuple[dict[int, Payload], dict[int, str]]:
        from flwr.app import ConfigRecord, Message, RecordDict

        extra = {"timing": True} if self._timing else {}
        messages = [
            Message(
                RecordDict({RECORD: ConfigRecord({**req, "stage": stage, **extra})}),
                dst_node_id=node,
                message_type=message_type(stage),
                # A request nobody picked up in time must not run later, out of its stage.
                ttl=max(timeout, 1.0),
            )
            for node, req in by_node.items()
        ]
        # Not Grid.send_and_receive: on a deployment's Grid (Flower 1.41) it pulls every 3 s,
        # which would add up to 3 s to every stage; this loop pulls every `poll_interval`.
        pushed = time.time()
        ids = dict(zip(self._grid.push_messages(messages), by_node, strict=True))
        pending = {i for i in ids if i}
        replies: dict[int, Payload] = {}
        arrived: dict[int, float] = {}
        errors: dict[int, str] = {node: "not delivered" for i, node in ids.items() if not i}
        end = time.monotonic() + timeout
        while pending and time.monotonic() < end:
            for msg in self._grid.pull_messages(list(pending)):
                mid = msg.metadata.reply_to_message_id
                if mid not in pending:
                    continue
                pending.discard(mid)
                node = ids[mid]
                if msg.has_error():
                    errors[node] = msg.error.reason or f"error {msg.error.code}"
                else:
                    replies[node] = dict(msg.content[RECORD])
                    arrived[node] = time.time()
            if pending:
                time.sleep(self._poll)
        for mid in pending:
            errors[ids[mid]] = f"no reply within {timeout:g} s"
        if self._timing and arrived:
            print(f"[privopt] stage-timing {stage_timing(stage, pushed, replies, arrived)}")
        return replies, errors


def stage_timing(
    stage: str, pushed: float, replies: Mapping[int, Payload], arrived: Mapping[int, float]
) -> str:
    """Where the stage's time went for the node that answered last (the one the stage waited
    for), as JSON: seconds from the push to the start of its ClientApp task (the SuperNode's
    pull of the message, the SuperExec's pick-up; a fresh process's start counts as the task's
    start), from there to privopt's handler (Flower's task start-up: the task's input, the
    app's install and import), the handler, and from its return to the server."""
    last = max(arrived, key=lambda n: arrived[n])
    r = replies[last]
    if not {"t_in", "t_out", "t_task"} <= set(r):
        return json.dumps({"stage": stage, "seconds": round(arrived[last] - pushed, 3)})
    t_task, t_in, t_out = float(r["t_task"]), float(r["t_in"]), float(r["t_out"])
    return json.dumps(
        {
            "stage": stage,
            "seconds": round(arrived[last] - pushed, 3),
            "to_task": round(t_task - pushed, 3),
            "task_to_handler": round(t_in - t_task, 3),
            "handler": round(t_out - t_in, 3),
            "to_server": round(arrived[last] - t_out, 3),
        }
    )


def message_type(stage: str) -> str:
    """The Flower message type of a stage's request: ``query.<stage>`` (so Flower's logs and a
    ClientApp's mods see which stage a message is)."""
    return f"query.{stage}"
