"""privopt's drop-in SecAgg+ beside Flower's own, in one run, on the same ClientApp.

    python flower/bench/secagg_vs_flower.py --clients 50 --dim 100000

Both workflows run one round of FedAvg with SecAgg+ through Flower's ClientApp and workflow
machinery, every node in this process (an in-process Grid: the seconds are the protocol's
compute on one core, clients and server together, no network). Prints seconds per round for
each, the largest difference of each result from the plain weighted average, and the
speed-up; then the same round without secure aggregation (Flower's default fit workflow, no
mod), the floor both pay for Flower's messages, and the ratio of what each adds above it.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time
from typing import Any

import numpy as np
from flwr.app import ConfigRecord, Context, RecordDict
from flwr.client import ClientApp, NumPyClient
from flwr.client.mod import secaggplus_mod as flower_mod
from flwr.common import ndarrays_to_parameters
from flwr.compat.common.recorddict_compat import parameters_to_arrayrecord
from flwr.server.compat.legacy_context import LegacyContext
from flwr.server.strategy import FedAvg
from flwr.server.workflow import SecAggPlusWorkflow as FlowerWorkflow
from flwr.server.workflow.constant import MAIN_CONFIGS_RECORD, MAIN_PARAMS_RECORD
from flwr.server.workflow.default_workflows import default_fit_workflow

from privopt_flower import secagg

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
from loopback import LoopbackGrid, set_task_identity, static_client_manager


def one_round(
    workflow: Any,
    mod: Any | None,
    updates: dict[int, np.ndarray],
    weights: dict[int, int],
    kill: dict[str, set[int]] | None = None,
) -> tuple[float, float, np.ndarray]:
    """One FedAvg round with ``workflow`` and ``mod``: wall seconds, seconds inside the
    ClientApps, and the aggregated model."""

    class Fixed(NumPyClient):
        def __init__(self, node: int) -> None:
            self.node = node

        def fit(self, parameters: Any, config: Any) -> Any:
            return [updates[self.node]], weights[self.node], {}

    app = ClientApp(client_fn=lambda ctx: Fixed(ctx.node_id).to_client(), mods=[mod] if mod else [])
    grid = LoopbackGrid({n: app for n in updates}, kill=kill, keep_replies=False)
    n = len(updates)
    context = LegacyContext(
        Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config={}),
        strategy=FedAvg(fraction_fit=1.0, min_fit_clients=n, min_available_clients=n),
        client_manager=static_client_manager(updates),
    )
    dim = next(iter(updates.values())).shape[0]
    context.state.array_records[MAIN_PARAMS_RECORD] = parameters_to_arrayrecord(
        ndarrays_to_parameters([np.zeros(dim)]), True
    )
    context.state.config_records[MAIN_CONFIGS_RECORD] = ConfigRecord({"current_round": 1})
    start = time.perf_counter()
    workflow(grid, context)
    seconds = time.perf_counter() - start
    result = context.state.array_records[MAIN_PARAMS_RECORD].to_numpy_ndarrays()[0]
    return seconds, grid.client_seconds, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[10, 50])
    parser.add_argument("--dims", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--num-shares", type=int, default=11)
    parser.add_argument("--threshold", type=int, default=7)
    parser.add_argument("--only", choices=["flower", "privopt"], default=None)
    args = parser.parse_args()
    set_task_identity()
    print(f"num_shares = {args.num_shares}, threshold = {args.threshold}: one FedAvg round with "
          "SecAgg+, every node in this process; seconds: wall (clients' compute + server's)")  # fmt: skip
    print(f"{'N':>4} {'d':>9} | {'Flower wall':>11} {'clients':>8} {'server':>8} | "
          f"{'privopt wall':>12} {'clients':>8} {'server':>8} | {'ratio':>6} | "
          f"{'plain':>6} | {'ratio above plain':>17} | max err F / p")  # fmt: skip
    for n in args.clients:
        for dim in args.dims:
            rng = np.random.default_rng(0)
            updates = {10 + i: rng.uniform(-1, 1, dim) for i in range(n)}
            weights = {c: int(rng.integers(10, 100)) for c in updates}
            mean = sum(weights[c] * updates[c] for c in updates) / sum(weights.values())
            common = {"num_shares": args.num_shares, "reconstruction_threshold": args.threshold}
            row = {}
            for name, workflow, mod in (
                ("flower", FlowerWorkflow(**common), flower_mod),
                ("privopt", secagg.SecAggPlusWorkflow(**common), secagg.secaggplus_mod),
                ("plain", default_fit_workflow, None),
            ):
                if name != "plain" and args.only not in (None, name):
                    row[name] = (float("nan"), float("nan"), float("nan"))
                    continue
                wall, clients, avg = one_round(workflow, mod, updates, weights)
                row[name] = (wall, clients, float(np.abs(avg - mean).max()))
            f, p, b = row["flower"], row["privopt"], row["plain"]
            above = (f[0] - b[0]) / (p[0] - b[0])
            print(f"{n:>4} {dim:>9} | {f[0]:>11.2f} {f[1]:>8.2f} {f[0] - f[1]:>8.2f} | "
                  f"{p[0]:>12.2f} {p[1]:>8.2f} {p[0] - p[1]:>8.2f} | {f[0] / p[0]:>5.1f}x | "
                  f"{b[0]:>6.2f} | {above:>16.1f}x | {f[2]:.1e} / {p[2]:.1e}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
