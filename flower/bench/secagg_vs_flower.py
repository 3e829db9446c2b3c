"""privopt's drop-in SecAgg+ beside Flower's own, in one run, on the same ClientApp.

    python flower/bench/secagg_vs_flower.py --clients 50 --dim 100000

Both workflows run one round of FedAvg with SecAgg+ through Flower's ClientApp and workflow
machinery, every node in this process (an in-process Grid: the seconds are the protocol's
compute on one core, clients and server together, no network). Prints seconds per round for
each, the largest difference of each result from the plain weighted average, and the
speed-up.
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
from flwr.server import ClientManager
from flwr.server.client_proxy import ClientProxy
from flwr.server.compat.legacy_context import LegacyContext
from flwr.server.strategy import FedAvg
from flwr.server.workflow import SecAggPlusWorkflow as FlowerWorkflow
from flwr.server.workflow.constant import MAIN_CONFIGS_RECORD, MAIN_PARAMS_RECORD

from privopt_flower import secagg

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
from loopback import LoopbackGrid, set_task_identity  # noqa: E402


class _Proxy(ClientProxy):
    def get_properties(self, *a: Any, **k: Any) -> Any: ...
    def get_parameters(self, *a: Any, **k: Any) -> Any: ...
    def fit(self, *a: Any, **k: Any) -> Any: ...
    def evaluate(self, *a: Any, **k: Any) -> Any: ...
    def reconnect(self, *a: Any, **k: Any) -> Any: ...


class _Manager(ClientManager):
    def __init__(self, nodes: list[int]) -> None:
        self.proxies: dict[str, ClientProxy] = {}
        for n in nodes:
            p = _Proxy(str(n))
            p.node_id = n
            self.proxies[str(n)] = p

    def num_available(self) -> int:
        return len(self.proxies)

    def register(self, client: ClientProxy) -> bool:
        return True

    def unregister(self, client: ClientProxy) -> None: ...

    def all(self) -> dict[str, ClientProxy]:
        return self.proxies

    def wait_for(self, num_clients: int, timeout: int) -> bool:
        return True

    def sample(self, num_clients: int, min_num_clients: int | None = None, criterion: Any = None):
        return list(self.proxies.values())[:num_clients]


def one_round(workflow: Any, mod: Any, updates: dict[int, np.ndarray], weights: dict[int, int]):
    class Fixed(NumPyClient):
        def __init__(self, node: int) -> None:
            self.node = node

        def fit(self, parameters: Any, config: Any) -> Any:
            return [updates[self.node]], weights[self.node], {}

    app = ClientApp(client_fn=lambda ctx: Fixed(ctx.node_id).to_client(), mods=[mod])
    grid = LoopbackGrid({n: app for n in updates})
    n = len(updates)
    context = LegacyContext(
        Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config={}),
        strategy=FedAvg(fraction_fit=1.0, min_fit_clients=n, min_available_clients=n),
        client_manager=_Manager(list(updates)),
    )
    dim = next(iter(updates.values())).shape[0]
    context.state.array_records[MAIN_PARAMS_RECORD] = parameters_to_arrayrecord(
        ndarrays_to_parameters([np.zeros(dim)]), True
    )
    context.state.config_records[MAIN_CONFIGS_RECORD] = ConfigRecord({"current_round": 1})
    start = time.perf_counter()
    workflow(grid, context)
    seconds = time.perf_counter() - start
    return seconds, context.state.array_records[MAIN_PARAMS_RECORD].to_numpy_ndarrays()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--dim", type=int, default=100_000)
    parser.add_argument("--num-shares", type=int, default=11)
    parser.add_argument("--threshold", type=int, default=7)
    args = parser.parse_args()
    set_task_identity()
    rng = np.random.default_rng(0)
    updates = {10 + i: rng.uniform(-1, 1, args.dim) for i in range(args.clients)}
    weights = {n: int(rng.integers(10, 100)) for n in updates}
    mean = sum(weights[n] * updates[n] for n in updates) / sum(weights.values())
    common = {"num_shares": args.num_shares, "reconstruction_threshold": args.threshold}
    print(f"{args.clients} clients, d = {args.dim}, num_shares = {args.num_shares}, "
          f"threshold = {args.threshold}: one FedAvg round with SecAgg+, all in one process")  # fmt: skip
    results = {}
    for name, workflow, mod in (
        ("Flower", FlowerWorkflow(**common), flower_mod),
        ("privopt", secagg.SecAggPlusWorkflow(**common), secagg.secaggplus_mod),
    ):
        seconds, avg = one_round(workflow, mod, updates, weights)
        results[name] = seconds
        print(f"  {name:<8} {seconds:8.2f} s   max |result - weighted mean| = "
              f"{np.abs(avg - mean).max():.2e}")  # fmt: skip
    print(f"  speed-up: {results['Flower'] / results['privopt']:.1f}x")


if __name__ == "__main__":
    main()
