"""The example's in-process runs behind docs/torch.md's figures.

    python compare.py methods              # every method, 5 clients, as the deployment table
    python compare.py dome --rounds 60     # DOME beside full-dimension DP-FedAdam, 100 clients

Run from this folder with MNIST fetched (`privopt data fetch mnist`; PRIVOPT_DATA or
--data-dir says where).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from pytorch_mnist.task import Net, load_partition, load_test

from privopt_flower import Task, config

HERE = Path(__file__).resolve().parent
METHODS: list[dict[str, Any]] = [
    {"method": "dome", "rounds": 3},
    {"method": "scalar_fl", "rounds": 3},
    {"method": "scalar_fl", "scalar_fl.rule": "hiso", "rounds": 3},
    {"method": "eezofl", "rounds": 3},
    {"method": "pdsgd", "rounds": 2, "train-params": "fc"},
]


def run(task: Task, run_config: dict[str, Any]) -> None:
    t0 = time.perf_counter()
    out = task.run_inprocess(run_config)
    keys = ("accuracy", "test_loss", "epsilon_spent", "round_seconds", "model_sha", "events")
    row = {k: out[k] for k in keys if k in out}
    print(json.dumps({"run": run_config, **row, "seconds": round(time.perf_counter() - t0, 1)}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["methods", "dome"])
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--data-dir", default=os.environ.get("PRIVOPT_DATA", "data"))
    args = ap.parse_args()
    task = Task(model_fn=Net, data_fn=load_partition, test_fn=load_test)
    base = {**config.defaults(HERE / "pyproject.toml"), "data-dir": args.data_dir}
    if args.what == "methods":
        for m in METHODS:
            run(task, {**base, "clients": 5, "eval-every": m["rounds"], **m})
        return
    for extra in (
        {"dome.epsilon": 8.0},
        {"dome.epsilon": 8.0, "dome.sketch": "identity"},
        {"dome.epsilon": 0.0},
        {"dome.epsilon": 0.0, "dome.sketch": "identity"},
    ):
        run(
            task,
            {
                **base,
                "method": "dome",
                "rounds": args.rounds,
                "clients": args.clients,
                "examples-per-client": 50_000 // args.clients,
                "eval-every": args.rounds,
                **extra,
            },
        )


if __name__ == "__main__":
    main()
