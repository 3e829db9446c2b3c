"""Flower's SecAgg+ workflow over FedAvg: each client returns a random vector of ``dim``
floats; the server prints the seconds of each round (the workflow's four SecAgg+ stages plus
the fit round trip), as ``[peer] round=K seconds=S``. With ``impl = "privopt"`` the same app
runs privopt's drop-in (``privopt_flower.secagg``): the two imports an app changes, picked by
the run config so one app times both."""

from __future__ import annotations

import time

import numpy as np
from flwr.app import Context
from flwr.client import NumPyClient
from flwr.client.mod import secaggplus_mod as flower_mod
from flwr.clientapp import ClientApp
from flwr.common import ndarrays_to_parameters
from flwr.server import ServerConfig
from flwr.server.compat import LegacyContext
from flwr.server.strategy import FedAvg
from flwr.server.workflow import DefaultWorkflow
from flwr.server.workflow import SecAggPlusWorkflow as FlowerWorkflow
from flwr.serverapp import Grid, ServerApp


class Timed(FedAvg):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.last = time.monotonic()

    def aggregate_fit(self, server_round, results, failures):
        out = super().aggregate_fit(server_round, results, failures)
        now = time.monotonic()
        print(
            f"[peer] round={server_round} seconds={now - self.last:.3f} results={len(results)}",
            flush=True,
        )
        self.last = now
        return out


server = ServerApp()


@server.main()
def main(grid: Grid, context: Context) -> None:
    n, d = int(context.run_config["clients"]), int(context.run_config["dim"])
    while len(list(grid.get_node_ids())) < n:
        time.sleep(0.2)
    strategy = Timed(
        fraction_fit=1.0,
        fraction_evaluate=0.0,
        min_fit_clients=n,
        min_available_clients=n,
        initial_parameters=ndarrays_to_parameters([np.zeros(d, dtype=np.float32)]),
    )
    legacy = LegacyContext(
        context, ServerConfig(num_rounds=int(context.run_config["rounds"])), strategy
    )
    if context.run_config.get("impl", "flower") == "privopt":
        from privopt_flower.secagg import SecAggPlusWorkflow
    else:
        SecAggPlusWorkflow = FlowerWorkflow
    # Shares to every other client, majority threshold: the privopt app's default graph.
    workflow = DefaultWorkflow(
        fit_workflow=SecAggPlusWorkflow(num_shares=n, reconstruction_threshold=n // 2 + 1)
    )
    workflow(grid, legacy)
    print("[peer] done", flush=True)


class Random(NumPyClient):
    def __init__(self, d: int) -> None:
        self.d = d

    def fit(self, parameters, config):
        return [np.random.default_rng().uniform(-1, 1, self.d).astype(np.float32)], 1, {}


def client_fn(context: Context):
    return Random(int(context.run_config["dim"])).to_client()


def secaggplus_mod(msg, ctxt, call_next):
    """The SecAgg+ mod of the run's ``impl``."""
    if ctxt.run_config.get("impl", "flower") == "privopt":
        from privopt_flower.secagg import secaggplus_mod as privopt_mod

        return privopt_mod(msg, ctxt, call_next)
    return flower_mod(msg, ctxt, call_next)


client = ClientApp(client_fn=client_fn, mods=[secaggplus_mod])
