"""The ClientApp: a NumPyClient behind the SecAgg+ mod.

The one line that differs from Flower's secure-aggregation example is the mod's import:
``from flwr.client.mod import secaggplus_mod`` becomes the line below.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from flwr.app import Context
from flwr.client import Client, ClientApp, NumPyClient

from privopt_flower.secagg import secaggplus_mod

from .task import local_train


class LogisticClient(NumPyClient):
    def __init__(self, context: Context) -> None:
        self.partition = int(context.node_config["partition-id"])
        self.clients = int(context.node_config["num-partitions"])
        self.steps = int(context.run_config["local-steps"])
        self.lr = float(context.run_config["learning-rate"])

    def fit(self, parameters: list[np.ndarray], config: dict[str, Any]) -> Any:
        w, n = local_train(parameters[0], self.clients, self.partition, self.steps, self.lr)
        return [w], n, {}


def client_fn(context: Context) -> Client:
    return LogisticClient(context).to_client()


app = ClientApp(client_fn=client_fn, mods=[secaggplus_mod])
