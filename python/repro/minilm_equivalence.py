"""The PyTorch MiniLM against the Rust engine's, round for round: the same seeds, plans,
batches and initial vector; each client's scalars from both, and the global models after.

    python python/repro/minilm_equivalence.py --params full --rounds 10

Prints each participant's scalars from both engines, the largest absolute and relative
difference, the largest difference between the two global models at the end, and the seconds
each engine spent in its clients' local updates.
"""

from __future__ import annotations

import argparse
import copy
import time

import numpy as np
import torch

from privopt.problem import Problem
from privopt.protocols import scalar_fl
from privopt.text import data_dir
from privopt.torch import ParameterSet, ZerothOrderClient, ZerothOrderServer
from privopt.torch.text import BITFIT, MiniLMClassifier, batch_from_rows, classification_loss


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--params", choices=["full", "bitfit"], default="full")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--perturbations", type=int, default=5)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--float64", action="store_true", help="the PyTorch model in float64")
    args = p.parse_args()
    torch.set_num_threads(2)
    trainable = "all" if args.params == "full" else "bitfit"
    problem = Problem(
        {"dataset": "movie-snippets", "clients": 6},
        {"kind": "minilm", "trainable": trainable},
        data_dir=data_dir(),
        seed=args.seed,
    )
    w0 = problem.init_params(args.seed)
    sel = None if args.params == "full" else BITFIT
    lr = 3e-4 if args.params == "full" else 1e-3
    spec = scalar_fl.Spec(lr=lr, perturbations=args.perturbations)
    base = MiniLMClassifier.from_pretrained(
        zero_shot=False, dtype=torch.float64 if args.float64 else torch.float32
    )
    ParameterSet(base, sel).load(w0)
    engine = scalar_fl.Server(spec, w0, clients=6, seed=args.seed)
    ours = ZerothOrderServer(base, spec, clients=6, params=sel, seed=args.seed)
    engine_clients: dict[int, scalar_fl.Client] = {}
    torch_clients: dict[int, ZerothOrderClient] = {}
    worst_abs = worst_rel = 0.0
    seconds = {"rust": 0.0, "torch": 0.0}
    k = args.perturbations
    for r in range(args.rounds):
        plan_e, who = engine.begin_round(2)
        plan_t, who_t = ours.begin_round(2)
        assert who == who_t, "the two servers drew different participants"
        for i in who:
            idx = problem.scalar_fl_batches(
                i, r, local_steps=1, batch_size=args.batch, seed=args.seed
            )
            if i not in engine_clients:
                engine_clients[i] = scalar_fl.Client(i, spec, w0)
                torch_clients[i] = ZerothOrderClient(
                    copy.deepcopy(base), spec, id=i, loss_fn=classification_loss, params=sel
                )
            e, t = engine_clients[i], torch_clients[i]
            e.receive(engine.catch_up(i))
            t.receive(ours.catch_up(i))
            start = time.perf_counter()

            def loss(step: int, x: np.ndarray, idx: list[np.ndarray] = idx) -> float:
                return problem.loss(x, idx[step])

            reply = e.local_update(plan_e, loss)
            seconds["rust"] += time.perf_counter() - start
            batches = [batch_from_rows(*problem.rows(b)) for b in idx]
            start = time.perf_counter()
            ours.receive(t.local_update(plan_t, batches))
            seconds["torch"] += time.perf_counter() - start
            engine.receive(reply)
            # A reply ends with its scalars as float32, then an 8-byte trailer.
            rust = np.frombuffer(reply[-4 * k - 8 : -8], "<f4").astype(np.float64)
            mine = np.asarray(t.last_scalars, dtype=np.float32).astype(np.float64)
            diff = np.abs(rust - mine)
            worst_abs = max(worst_abs, float(diff.max()))
            worst_rel = max(worst_rel, float((diff / np.abs(rust)).max()))
            print(f"round {r} client {i}: rust {np.round(rust, 5)} torch {np.round(mine, 5)}")
        engine.finish_round()
        ours.finish_round()
    gap = float(np.abs(engine.x - ours.server.x).max())
    print(
        f"largest scalar difference: {worst_abs:.2e} absolute, {worst_rel:.2e} relative; "
        f"global models differ by at most {gap:.2e} after {args.rounds} rounds; local updates "
        f"took {seconds['rust']:.1f} s (Rust) and {seconds['torch']:.1f} s (PyTorch)"
    )


if __name__ == "__main__":
    main()
