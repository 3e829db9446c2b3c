"""An in-process Flower Grid for tests and benchmarks: every node a ClientApp in this
process, with its own persistent Context, so server workflows and ClientApp mods run through
Flower's own Message and ClientApp machinery without a SuperLink."""

from __future__ import annotations

import copy
import time
import uuid
from collections.abc import Iterable
from typing import Any

import pytest
from flwr.app import Context, Message, RecordDict
from flwr.app.error import Error


def set_task_identity() -> None:
    """What a Flower process sets before a ServerApp runs (a Message needs the run id)."""
    from flwr.supercore.task_identity import TaskIdentity

    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1


@pytest.fixture(autouse=True)
def task_identity() -> None:
    set_task_identity()


def stage_of(msg: Message) -> str:
    """The stage a message carries (privopt's SecAgg+ or encrypted-averaging record, or
    Flower's SecAgg+)."""
    for key in ("privopt.secaggplus", "secaggplus_configs", "privopt.heavg"):
        record = msg.content.config_records.get(key)
        if record is not None and "stage" in record:
            return str(record["stage"])
    return ""


class LoopbackGrid:
    """A Grid whose nodes are ClientApps in this process, each with its own persistent
    Context (as a SuperNode keeps one per run). ``kill`` maps a stage name to nodes that stop
    answering from that stage on; ``tamper`` maps a stage to a function applied to one node's
    reply content."""

    def __init__(
        self,
        apps: dict[int, Any],
        kill: dict[str, set[int]] | None = None,
        tamper: dict[str, tuple[int, Any]] | None = None,
        node_configs: dict[int, dict[str, Any]] | None = None,
        run_config: dict[str, Any] | None = None,
        keep_replies: bool = True,
    ) -> None:
        self.apps = apps
        self.contexts = {
            n: Context(
                run_id=1,
                node_id=n,
                node_config=(node_configs or {}).get(n, {}),
                state=RecordDict(),
                run_config=dict(run_config or {}),
            )
            for n in apps
        }
        self.kill = kill or {}
        self.tamper = tamper or {}
        self.dead: set[int] = set()
        self.keep_replies = keep_replies
        self.client_seconds = 0.0  # time spent inside the ClientApps (their compute)
        self.seen: list[tuple[int, RecordDict]] = []

    @property
    def run(self) -> Any:
        from flwr.supercore.run import Run

        return Run.create_empty(run_id=1)

    def get_node_ids(self) -> Iterable[int]:
        return [n for n in self.apps if n not in self.dead]

    def send_and_receive(
        self, messages: Iterable[Message], *, timeout: float | None = None
    ) -> list[Message]:
        replies = []
        for msg in messages:
            msg.metadata.__dict__["_message_id"] = uuid.uuid4().hex
            node = msg.metadata.dst_node_id
            stage = stage_of(msg)
            if node in self.kill.get(str(stage), set()):
                self.dead.add(node)
            if node in self.dead:
                continue
            try:
                # Each node gets its own copy, as over the wire (a mod may edit what it got).
                delivered = copy.deepcopy(msg)
                start = time.perf_counter()
                try:
                    reply = self.apps[node](delivered, self.contexts[node])
                finally:
                    self.client_seconds += time.perf_counter() - start
            except Exception as e:  # noqa: BLE001  (a SuperNode turns it into an error reply)
                reply = Message(Error(code=0, reason=f"{type(e).__name__}: {e}"), reply_to=msg)
            if not reply.has_error():
                if self.keep_replies:
                    self.seen.append((node, reply.content))
                who, change = self.tamper.get(str(stage), (None, None))
                if who == node:
                    change(reply.content)
            replies.append(reply)
        return replies


def static_client_manager(nodes: Iterable[int]) -> Any:
    """A legacy ``ClientManager`` over fixed node ids (what a legacy workflow samples from),
    sampling the first ``k`` — for driving a legacy strategy without a SuperLink."""
    from flwr.server import ClientManager
    from flwr.server.client_proxy import ClientProxy

    class Proxy(ClientProxy):
        def get_properties(self, *a: Any, **k: Any) -> Any: ...
        def get_parameters(self, *a: Any, **k: Any) -> Any: ...
        def fit(self, *a: Any, **k: Any) -> Any: ...
        def evaluate(self, *a: Any, **k: Any) -> Any: ...
        def reconnect(self, *a: Any, **k: Any) -> Any: ...

    class Manager(ClientManager):
        def __init__(self) -> None:
            self.proxies: dict[str, ClientProxy] = {}
            for n in nodes:
                proxy = Proxy(str(n))
                proxy.node_id = n
                self.proxies[str(n)] = proxy

        def num_available(self) -> int:
            return len(self.proxies)

        def register(self, client: ClientProxy) -> bool:
            return True

        def unregister(self, client: ClientProxy) -> None: ...

        def all(self) -> dict[str, ClientProxy]:
            return self.proxies

        def wait_for(self, num_clients: int, timeout: int) -> bool:
            return True

        def sample(
            self, num_clients: int, min_num_clients: int | None = None, criterion: Any = None
        ) -> Any:
            return list(self.proxies.values())[:num_clients]

    return Manager()


def legacy_context(nodes: Iterable[int], initial: list[Any], strategy: Any) -> Any:
    """A round-1 ``LegacyContext`` over ``nodes`` with the global model ``initial`` (what
    Flower's ``DefaultWorkflow`` hands a fit workflow)."""
    from flwr.app import ConfigRecord
    from flwr.common import ndarrays_to_parameters
    from flwr.compat.common.recorddict_compat import parameters_to_arrayrecord
    from flwr.server.compat.legacy_context import LegacyContext
    from flwr.server.workflow.constant import MAIN_CONFIGS_RECORD, MAIN_PARAMS_RECORD

    context = LegacyContext(
        Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config={}),
        strategy=strategy,
        client_manager=static_client_manager(nodes),
    )
    context.state.array_records[MAIN_PARAMS_RECORD] = parameters_to_arrayrecord(
        ndarrays_to_parameters(initial), True
    )
    context.state.config_records[MAIN_CONFIGS_RECORD] = ConfigRecord({"current_round": 1})
    return context


def global_model(context: Any) -> list[Any]:
    """The global model a fit workflow left in ``context``."""
    from flwr.server.workflow.constant import MAIN_PARAMS_RECORD

    return list(context.state.array_records[MAIN_PARAMS_RECORD].to_numpy_ndarrays())


def bare_train(app: Any) -> None:
    """Calls ``app`` with a train message that carries no protocol configuration (what a
    misconfigured or malicious server would send); the mod must raise."""
    import numpy as np
    from flwr.app import ArrayRecord

    msg = Message(RecordDict({"arrays": ArrayRecord([np.zeros(4)])}), dst_node_id=100,
                  message_type="train")  # fmt: skip
    msg.metadata.__dict__["_message_id"] = "m"
    app(msg, Context(run_id=1, node_id=100, node_config={}, state=RecordDict(), run_config={}))


def fixed_update_app(values: dict[int, Any], weights: dict[int, int], mod: Any) -> Any:
    """A Message-API ClientApp (``@app.train()``) behind ``mod`` that replies with a fixed
    update per node and its weight as the ``num-examples`` metric."""
    from flwr.app import ArrayRecord, MetricRecord
    from flwr.clientapp import ClientApp as MessageClientApp

    app = MessageClientApp(mods=[mod])

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        update = ArrayRecord([values[context.node_id]])
        metrics = MetricRecord({"num-examples": weights[context.node_id]})
        return Message(RecordDict({"arrays": update, "metrics": metrics}), reply_to=msg)

    return app
