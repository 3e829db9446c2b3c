"""The ServerApp: FedAvg in Flower's legacy workflow, the fit stage run by SecAgg+.

The one line that differs from Flower's secure-aggregation example is the workflow's import:
``from flwr.server.workflow import SecAggPlusWorkflow`` becomes the line below.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from flwr.app import Context
from flwr.common import ndarrays_to_parameters
from flwr.server import Grid, LegacyContext, ServerApp, ServerConfig
from flwr.server.strategy import FedAvg
from flwr.server.workflow import DefaultWorkflow

from privopt_flower.secagg import SecAggPlusWorkflow

from .task import problem

RESULT = "[secagg-drop-in] result "

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    cfg = context.run_config
    clients = int(cfg["clients"])
    p = problem(clients)
    history: list[dict[str, float]] = []

    def evaluate(rnd: int, parameters: list[np.ndarray], config: dict[str, Any]) -> Any:
        loss, accuracy = p.evaluate(parameters[0])
        history.append({"round": rnd, "loss": loss, "accuracy": accuracy or 0.0})
        return loss, {"accuracy": accuracy or 0.0}

    strategy = FedAvg(
        fraction_fit=1.0,
        fraction_evaluate=0.0,
        min_fit_clients=clients,
        min_available_clients=clients,
        initial_parameters=ndarrays_to_parameters([np.zeros(p.num_params)]),
        evaluate_fn=evaluate,
    )
    legacy = LegacyContext(
        context=context,
        config=ServerConfig(num_rounds=int(cfg["num-server-rounds"])),
        strategy=strategy,
    )
    fit_workflow = SecAggPlusWorkflow(
        num_shares=int(cfg["num-shares"]),
        reconstruction_threshold=int(cfg["reconstruction-threshold"]),
        timeout=float(cfg["timeout"]),
    )
    DefaultWorkflow(fit_workflow=fit_workflow)(grid, legacy)
    print(RESULT + json.dumps({"history": history}), flush=True)
