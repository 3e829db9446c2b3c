"""Encrypted averaging of a whole model in a Flower deployment (issue 50): the he-average
example app on a localhost SuperLink with 5 SuperNodes (TLS and SuperNode authentication),
one of them killed mid-round, beside TenSEAL done NVFlare's way on the same updates, in one
script and run.

- privopt: ``privopt_flower.he.encrypted_mean`` (threshold xMK-CKKS, no shared secret), the
  round's wall time in the deployment and its bytes per client, and the same round's compute
  in process (``python/bench/he_model_vs_tenseal.py``'s ``privopt_round``);
- TenSEAL: one shared secret context, ``CKKSVector`` chunks of 4096 slots (NVFlare's
  ``he_context`` settings), the round's compute in process (``tenseal_round``): its bytes per
  client are what would cross the network.

Run (about 3 minutes at 11 M values)::

    python flower/bench/he_vs_tenseal.py                    # 11 M values, node 4 killed
    python flower/bench/he_vs_tenseal.py --values 1e6 --kill-after 1.0
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np

from privopt_flower.dev.localhost import Localhost

HERE = Path(__file__).resolve().parent
EXAMPLE = HERE.parent / "examples" / "he-average"
PEER_BENCH = HERE.parent.parent / "python" / "bench" / "he_model_vs_tenseal.py"
RESULT = "[he-average] result "


def _load(path: Path, name: str):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--values", type=float, default=11e6)
    ap.add_argument("--nodes", type=int, default=5)
    ap.add_argument("--kill", type=int, default=4, help="the node killed mid-round (-1: none)")
    ap.add_argument("--kill-after", type=float, default=4.0, help="seconds after the round starts")
    ap.add_argument("--workdir", help="logs and Flower homes (default: a temporary folder)")
    a = ap.parse_args()
    d = int(a.values)
    workdir = Path(a.workdir or tempfile.mkdtemp(prefix="privopt-he-"))
    run = {"values": d, "clients": a.nodes, "clip": 1.0, "timeout": 600.0, "seed": 0}

    with Localhost(workdir, a.nodes) as fed:

        def watch(line: str) -> None:
            print(line.rstrip(), flush=True)
            if a.kill >= 0 and "[he-average] round 1 start" in line:
                threading.Timer(a.kill_after, fed.kill, [a.kill]).start()

        got = fed.run(EXAMPLE, run, on_line=watch, until=RESULT, timeout=3600)
    deployed = json.loads(got["line"])["rounds"][0]

    sys.path.insert(0, str(EXAMPLE))
    task = _load(EXAMPLE / "he_average" / "task.py", "he_average_task")
    peers = _load(PEER_BENCH, "he_model_vs_tenseal")
    parts = deployed["contributors"]
    updates = [task.update(0, q, 1, d, 1.0) for q in parts]
    mine, _ = peers.privopt_round(updates, gone=-1)
    theirs, avg = peers.tenseal_round(updates)
    want = np.mean(np.stack(updates).astype(np.float64), axis=0)
    theirs_error = float(np.max(np.abs(avg[:d] - want)) / np.max(np.abs(want)))

    print(f"\n{a.nodes} SuperNodes (TLS, authenticated), {d:,} float32 values per update; ")
    print(f"contributors {parts}, dropped {deployed['dropped'] or 'none'}\n")
    print("| per round | privopt (threshold xMK-CKKS) | TenSEAL, NVFlare's way | ratio |")
    print("|---|---|---|---|")
    print(
        f"| compute, critical path (s) | {mine.round_s:.2f} | {theirs.round_s:.2f} | "
        f"{theirs.round_s / mine.round_s:.1f}× |"
    )
    print(f"| wall time in the Flower deployment (s) | {deployed['seconds']:.1f} | — | |")
    mb_mine = (deployed["up_bytes"] + deployed["down_bytes"]) / 1e6
    mb_theirs = (theirs.up_bytes + theirs.down_bytes) / 1e6
    print(
        f"| bytes per client, up + down (MB) | {mb_mine:.1f} "
        f"({deployed['up_bytes'] / 1e6:.1f} + {deployed['down_bytes'] / 1e6:.1f}) | "
        f"{mb_theirs:.1f} | {mb_theirs / mb_mine:.1f}× |"
    )
    print(
        f"| max error / max abs(average) | {deployed['max_rel_error']:.1e} | {theirs_error:.1e} | |"
    )
    print("| a key that decrypts one client's update | nobody holds one | every client | |")


if __name__ == "__main__":
    main()
