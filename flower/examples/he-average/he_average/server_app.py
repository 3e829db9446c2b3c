"""The ServerApp (Message API): each round, the encrypted mean of the clients' updates with
:func:`privopt_flower.he.encrypted_mean`, checked here against the plain mean (possible only
because this example's updates are a public function of the partition)."""

from __future__ import annotations

import json
import time

import numpy as np
from flwr.app import ArrayRecord, Context, RecordDict
from flwr.serverapp import Grid, ServerApp

from privopt_flower.he import encrypted_mean

from .task import update

RESULT = "[he-average] result "
ROUND = "[he-average] round "

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    cfg = context.run_config
    length, clip, seed = int(cfg["values"]), float(cfg["clip"]), int(cfg["seed"])
    timeout = float(cfg["timeout"])
    end = time.monotonic() + timeout
    while len(list(grid.get_node_ids())) < int(cfg["clients"]) and time.monotonic() < end:
        time.sleep(0.5)
    rounds = []
    for rnd in range(1, int(cfg["num-server-rounds"]) + 1):
        nodes = list(grid.get_node_ids())
        print(f"{ROUND}{rnd} start: {len(nodes)} clients", flush=True)
        start = time.monotonic()
        template = ArrayRecord([np.zeros(length, dtype=np.float32)])
        out = encrypted_mean(
            grid, nodes, RecordDict({"arrays": template}), server_round=rnd, clip=clip,
            timeout=timeout,
        )  # fmt: skip
        seconds = time.monotonic() - start
        parts = sorted(
            int(m.content.metric_records["metrics"]["partition"]) for m in out.replies.values()
        )
        got = out.arrays.to_numpy_ndarrays()[0]
        want = np.mean(
            [update(seed, q, rnd, length, clip).astype(np.float64) for q in parts], axis=0
        )
        error = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
        rounds.append(
            {
                "round": rnd,
                "seconds": round(seconds, 2),
                "contributors": parts,
                "dropped": {str(k): v for k, v in out.dropped.items()},
                "max_rel_error": error,
                "up_bytes": max(out.up_bytes.values()),
                "down_bytes": max(out.down_bytes.values()),
            }
        )
        print(f"{ROUND}{rnd} done in {seconds:.1f} s, max relative error {error:.2e}", flush=True)
    print(RESULT + json.dumps({"rounds": rounds}), flush=True)
