"""Seconds per round of each method on Flower with N SuperNodes on this machine (deployment
mode: separate processes, loopback), next to the same run in one process, and privopt's DOME
round (SecAgg+ of privopt) next to Flower's own SecAgg+ at the same N and vector length.

    python flower/bench/round_times.py [--nodes 5] [--rounds 3] [--dim 1000] [--out FILE]

The first round of a deployment includes no setup (setup stages are before it) but does include
each SuperNode's first ClientApp start; the table reports the median round."""

from __future__ import annotations

import argparse
import json
import re
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from privopt_flower import inprocess
from privopt_flower.dev.localhost import Localhost

APP = Path(__file__).resolve().parent.parent
PEER = Path(__file__).resolve().parent / "flower_secaggplus"


def configs(nodes: int, rounds: int, dim: int) -> dict[str, dict[str, Any]]:
    base = {"rounds": rounds, "clients": nodes, "eval-every": rounds, "stage-timeout": 120.0}
    return {
        "scalar_fl": {**base, "method": "scalar_fl"},
        "dome": {**base, "method": "dome"},
        f"dome (identity, d={dim})": {
            **base,
            "method": "dome",
            "dome.sketch": "identity",
            "data.dim": dim - 1,
            "dome.epsilon": 0.0,
        },
        "eezofl": {**base, "method": "eezofl"},
        "pdsgd": {**base, "method": "pdsgd"},
        "dpfhe (2^12, insecure)": {
            **base,
            "method": "dpfhe",
            "clients": 1,
            "dpfhe.ring_n": 4096,
            "dpfhe.insecure": True,
            "dpfhe.batch": 32,
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dim", type=int, default=1000)
    ap.add_argument("--out", default="")
    ap.add_argument(
        "--secagg-only",
        action="store_true",
        help="only Flower's SecAgg+ app, with Flower's SecAgg+ and with privopt's drop-in",
    )
    args = ap.parse_args()
    rows = []
    methods = {} if args.secagg_only else configs(args.nodes, args.rounds, args.dim)
    for name, cfg in methods.items():
        local = inprocess.run(cfg)
        with tempfile.TemporaryDirectory() as tmp, Localhost(tmp, cfg["clients"]) as fed:
            flwr = fed.run(APP, cfg, timeout=1800)
        rows.append(
            {
                "method": name,
                "nodes": cfg["clients"],
                "in_process_s": statistics.median(local["round_seconds"]),
                "flower_s": statistics.median(flwr["round_seconds"]),
            }
        )
        print(rows[-1], flush=True)
    for impl in ("flower", "privopt"):
        peer: list[float] = []
        with tempfile.TemporaryDirectory() as tmp, Localhost(tmp, args.nodes) as fed:
            cfg = {"rounds": args.rounds, "clients": args.nodes, "dim": args.dim, "impl": impl}

            def grab(line: str, into: list[float] = peer) -> None:
                m = re.search(r"\[peer\] round=\d+ seconds=([0-9.]+)", line)
                if m:
                    into.append(float(m[1]))

            fed.run(PEER, cfg, on_line=grab, until="[peer] done", timeout=1800)
        label = "Flower SecAgg+" if impl == "flower" else "privopt drop-in SecAgg+"
        rows.append(
            {
                "method": f"{label} (d={args.dim})",
                "nodes": args.nodes,
                "in_process_s": None,
                "flower_s": statistics.median(peer),
                "rounds_s": peer,
            }
        )
        print(rows[-1], flush=True)
    print(f"{'method':36} {'nodes':>5} {'in-process s/round':>19} {'Flower s/round':>15}")
    for r in rows:
        ip = "-" if r["in_process_s"] is None else f"{r['in_process_s']:.3f}"
        print(f"{r['method']:36} {r['nodes']:>5} {ip:>19} {r['flower_s']:>15.2f}")
    if args.out:
        Path(args.out).write_text(
            json.dumps({"when": time.strftime("%Y-%m-%d %H:%M"), "rows": rows}, indent=2)
        )


if __name__ == "__main__":
    main()
