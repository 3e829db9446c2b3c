"""The Flower ClientApp: one privopt client per SuperNode, its party id the node config's
``partition-id``. Each message may run in a fresh process, so the role's state lives in the
Context's state between messages (see docs/flower.md on what that exposes)."""

from __future__ import annotations

import math
import os
import signal
import time
from collections.abc import Callable, Mapping

from flwr.app import ConfigRecord, Context, Error, Message, RecordDict
from flwr.clientapp import ClientApp

from . import config, roles
from .methods import STAGES
from .node import Node, State
from .transport import RECORD, message_type

app = ClientApp()

STATE_RECORD = "privopt-state"
# Flower's code for an error raised by the app itself.
APP_ERROR = 1


class ContextState(State):
    """Bytes in the Context's state, which the SuperNode keeps between messages."""

    def __init__(self, context: Context, node: Node) -> None:
        super().__init__(node)
        if STATE_RECORD not in context.state:
            context.state[STATE_RECORD] = ConfigRecord()
        self._record = context.state.config_records[STATE_RECORD]

    def _load(self, key: str) -> bytes | None:
        value = self._record.get(key)
        return value if isinstance(value, bytes) else None

    def _store(self, key: str, value: bytes | None) -> None:
        if value is None:
            self._record.pop(key, None)
        else:
            self._record[key] = value


def node_of(context: Context) -> Node:
    nc = context.node_config
    try:
        party, parties = int(nc["partition-id"]), int(nc["num-partitions"])
    except (KeyError, ValueError) as e:
        raise config.ConfigError(
            "the SuperNode needs --node-config 'partition-id=I num-partitions=N'"
        ) from e
    state_dir = nc.get("state-dir")
    return Node(party, parties, str(state_dir) if state_dir else None)


def die_if_told(s: config.Settings, node: Node, request: Mapping[str, object]) -> None:
    """Test-only fault: ``debug.kill = "PARTIES:ROUND:STAGE"`` (parties comma-separated) makes
    those parties ``kill -9`` their own SuperNode and ClientApp processes on receiving that
    stage's request. Honoured only where the SuperNode runs with PRIVOPT_FLOWER_TEST_KILL=1
    (the localhost harness)."""
    target = s.debug.get("kill")
    if not target or os.environ.get("PRIVOPT_FLOWER_TEST_KILL") != "1":
        return
    parties, round_, stage = str(target).split(":")
    doomed = {int(p) for p in parties.split(",")}
    if (
        node.party in doomed
        and request.get("round") == int(round_)
        and request.get("stage") == stage
    ):
        os.killpg(os.getpgid(0), signal.SIGKILL)


def task_started() -> float:
    """When this process got its task (wall clock): set by a started-ahead process
    (:mod:`privopt_flower.superexec`); else the process's own start (Linux: from /proc, in
    clock ticks since boot; elsewhere NaN)."""
    from .superexec import TASK_STARTED_ENV

    if TASK_STARTED_ENV in os.environ:
        return float(os.environ[TASK_STARTED_ENV])
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22 of proc(5)
        return time.time() - (time.clock_gettime(time.CLOCK_BOOTTIME) - started)
    except (OSError, ValueError, IndexError, AttributeError):
        return math.nan


def query(msg: Message, context: Context) -> Message:
    return answer(msg, context, lambda c: config.parse(c.run_config))


def register_stages(client_app: ClientApp, handler: Callable[[Message, Context], Message]) -> None:
    """Routes every stage's message type (``query.<stage>``) to ``handler``."""
    for stage in STAGES:
        client_app.query(stage)(handler)


register_stages(app, query)


def answer(
    msg: Message, context: Context, settings_of: Callable[[Context], config.Settings]
) -> Message:
    """The reply to one server request, with the run's settings from ``settings_of``."""
    t_in = time.time()
    try:
        node = node_of(context)
        s = settings_of(context)
        request = dict(msg.content[RECORD])
        if msg.metadata.message_type != message_type(str(request.get("stage"))):
            raise ValueError(
                f"a {msg.metadata.message_type} message carries stage {request.get('stage')!r}"
            )
        die_if_told(s, node, request)
        reply = roles.client_handle(request, ContextState(context, node), node, s)
        if request.get("timing"):  # debug.stage-timing: where the stage's time goes
            reply.update(t_in=t_in, t_task=task_started(), t_out=time.time())
        return Message(RecordDict({RECORD: ConfigRecord(reply)}), reply_to=msg)
    except Exception as e:  # the server gets one line naming the party and the cause
        where = context.node_config.get("partition-id", "?")
        return Message(Error(APP_ERROR, f"party {where}: {type(e).__name__}: {e}"), reply_to=msg)
