"""Your own Flower app on privopt's methods: a :class:`Task` (your PyTorch model factory, data
and loss) gives the ClientApp and ServerApp, and an in-process run of the same thing. The
method is picked by name in the run config (``method = "dome"``, ``"scalar_fl"`` for
DeComFL/HiSo, ``"eezofl"``, ``"pdsgd"``), with privopt's defaults for every setting the app's
``pyproject.toml`` does not list::

    task = Task(model_fn=Net, data_fn=load_partition, test_fn=load_test)
    clientapp = task.client_app()        # client_app.py
    serverapp = task.server_app()        # server_app.py
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from flwr.app import Context, Message
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from . import config, inprocess
from .clientapp import answer, register_stages
from .results import RunResult
from .serverapp import run as run_server
from .task import DataFn, EvaluateFn, LossFn, ModelFn, TestFn, TorchTask, cross_entropy

# dpfhe trains privopt's own logistic regression on encrypted data; a user model has no
# encrypted path.
TASK_METHODS = ("scalar_fl", "dome", "eezofl", "pdsgd")


@dataclasses.dataclass(frozen=True)
class Task:
    """What the methods need from your app. ``model_fn()`` builds the model (called under
    ``torch.manual_seed(seed)`` on every party, so all start from the same weights);
    ``data_fn(partition_id, num_partitions, run_config)`` a client's training data;
    ``test_fn(run_config)`` the test set the server (and Paillier D-SGD's agents) evaluate on,
    or ``evaluate_fn(module) -> (loss, accuracy or None)``; ``loss_fn(module, batch)`` a
    scalar tensor (default: cross-entropy on ``(features, labels)``); ``params`` which
    parameters to train (:data:`privopt.torch.Selection`; default all trainable; the run
    config's ``train-params``, a regular expression, overrides it); ``method``
    fixes the method instead of reading it from the run config."""

    model_fn: ModelFn
    data_fn: DataFn | None = None
    test_fn: TestFn | None = None
    loss_fn: LossFn = cross_entropy
    evaluate_fn: EvaluateFn | None = None
    params: Any = None
    method: str | None = None
    # One TorchTask per run config in this process: the data is loaded once, not per message.
    _cache: dict[str, TorchTask] = dataclasses.field(
        default_factory=dict, repr=False, compare=False
    )

    def settings(self, run_config: Mapping[str, Any]) -> config.Settings:
        """The run's settings: privopt's defaults under ``run_config``, with this task."""
        flat = {**config.defaults(), **run_config}
        if self.method is not None:
            flat["method"] = self.method
        s = config.parse(flat)
        if s.method not in TASK_METHODS:
            raise config.ConfigError(
                f"method {s.method!r} does not train a user model; use one of "
                f"{', '.join(TASK_METHODS)}"
            )
        return dataclasses.replace(s, task=self._task(s, flat))

    def _task(self, s: config.Settings, flat: dict[str, Any]) -> TorchTask:
        cache = self._cache
        key = json.dumps(flat, sort_keys=True)
        if key not in cache:
            cache[key] = TorchTask(
                self.model_fn,
                data_fn=self.data_fn,
                test_fn=self.test_fn,
                loss_fn=self.loss_fn,
                evaluate_fn=self.evaluate_fn,
                params=flat.get("train-params") or self.params,
                clients=s.clients,
                run_config=flat,
                seed=s.seed,
            )
        return cache[key]

    def client_app(self) -> ClientApp:
        """The ClientApp: one privopt client per SuperNode, party = ``partition-id``."""
        app = ClientApp()

        def query(msg: Message, context: Context) -> Message:
            return answer(msg, context, lambda c: self.settings(c.run_config))

        register_stages(app, query)
        return app

    def server_app(self) -> ServerApp:
        """The ServerApp: waits for ``clients`` SuperNodes and runs the method."""
        app = ServerApp()

        @app.main()
        def main(grid: Grid, context: Context) -> None:
            run_server(grid, self.settings(context.run_config))

        return app

    def run_inprocess(self, run_config: Mapping[str, Any], **faults: Any) -> RunResult:
        """The same run with every client in this process (no Flower): the reference a
        deployment must match."""
        return inprocess.run_settings(self.settings(run_config), **faults)


def client_app(**task: Any) -> ClientApp:
    """``Task(**task).client_app()``."""
    return Task(**task).client_app()


def server_app(**task: Any) -> ServerApp:
    """``Task(**task).server_app()``."""
    return Task(**task).server_app()
