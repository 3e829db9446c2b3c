"""Where a DOME round's time goes in a deployment on this machine: a SuperLink and N SuperNodes
as processes (TLS, SuperNode authentication), privopt's DOME with the identity sketch at
dimension d, and for each stage the party the stage waited for, split into the way to its
handler (the SuperNode's pull of the message, the task's launch), the ClientApp process's age
when the handler began (a fresh process's start-up), the handler, and the way back.

    python flower/bench/round_latency.py [--nodes 5] [--rounds 6] [--dim 1000] [--cold] [--out FILE]

``--cold``: Flower's default isolation (a ``flwr-clientapp`` process started per message)
instead of privopt's fork-server SuperExec.

The first round is left out of the medians (each SuperNode's first task)."""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from privopt_flower.dev.localhost import Localhost

APP = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--dim", type=int, default=1000)
    ap.add_argument("--cold", action="store_true", help="Flower's default isolation")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    cfg = {
        "method": "dome",
        "rounds": args.rounds,
        "clients": args.nodes,
        "eval-every": args.rounds,
        "stage-timeout": 120.0,
        "dome.sketch": "identity",
        "data.dim": args.dim - 1,
        "dome.epsilon": 0.0,
        "debug.stage-timing": True,
    }
    stages: list[dict[str, Any]] = []

    def grab(line: str) -> None:
        if "[privopt] stage-timing " in line:
            stages.append(json.loads(line.split("[privopt] stage-timing ", 1)[1]))

    with (
        tempfile.TemporaryDirectory() as tmp,
        Localhost(tmp, args.nodes, warm=not args.cold) as fed,
    ):
        result = fed.run(APP, cfg, on_line=grab, timeout=1800)
    rounds = result["round_seconds"]
    per_round = len(stages) // max(1, len(rounds))
    steady = stages[per_round:] or stages
    keys = ("seconds", "to_task", "task_to_handler", "handler", "to_server")
    mode = "cold ClientApp processes" if args.cold else "fork-server SuperExec"
    print(f"DOME, {args.nodes} SuperNodes, d = {args.dim}, {mode}: seconds per round {rounds}")
    print(f"median round (after the first): {statistics.median(rounds[1:] or rounds):.2f} s")
    print(f"{'stage':10}" + "".join(f"{k:>13}" for k in keys))
    for name in dict.fromkeys(s["stage"] for s in steady):
        rows = [s for s in steady if s["stage"] == name]
        med = [statistics.median(r[k] for r in rows) for k in keys]
        print(f"{name:10}" + "".join(f"{v:>13.2f}" for v in med))
    if args.out:
        Path(args.out).write_text(
            json.dumps(
                {"when": time.strftime("%Y-%m-%d %H:%M"), "rounds": rounds, "stages": stages},
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
