"""The accuracy-vs-privacy grid of docs/scalar-fl.md: DeComFL and HiSo, LoRA and every weight,
without DP and at each ε, for each seed; one ``private_lm.py`` run per cell, then one report.

    python python/repro/private_lm_grid.py --out out/private-lm --jobs 2
    python python/repro/private_lm_grid.py --out out/private-lm --report-only

A cell whose ``summary.json`` exists is not run again, so an interrupted grid resumes where it
stopped (``--dry-run`` lists what would run). Each cell's settings are the documented ones:

- without DP, the rates and participants the clear runs chose: LoRA η = 1e-2 (DeComFL) and
  5e-3 (HiSo: at 1e-2 it destabilized after round 250) with 3 per round, every weight
  η = 3e-4 with 2 per round (the Rust engine's ``hiso-minilm-full``);
- under DP, 3 per round (SecAgg+'s least), clip C (LoRA 1.5, every weight 3.5: about the
  median norm of a round's 5 scalars), ``noise_floor`` 1 and a rate scaled so that the update's
  variance matches the clear run's: ``η = η_clear · s / √(s² + (σC/m)²)``, with ``s`` the spread
  of the mean of m clipped scalars measured in clear runs (LoRA 0.36, every weight 0.87) and σ
  the accountant's. This rule is our choice, not the paper's; it sets the private runs' speed.

Writes ``report.md`` (one row per cell: final accuracy, mean over the seeds that finished,
loss, ε spent, σ, rate, seconds per round, peak memory, bytes) and ``loss-<params>.svg`` /
``accuracy-<params>.svg`` (the evaluations over the rounds, seed-mean) in ``--out``.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privopt._svg import line_chart

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import private_lm  # noqa: E402  (the script beside this one)

# private_lm.py's own defaults: the federation and δ every cell shares.
DEFAULTS = private_lm.parse(["--out", "."])
# Without DP: (participants per round, rounds between evaluations), and each method's rate.
CLEAR = {"lora": (3, 25), "full": (2, 50)}
CLEAR_RATE = {
    ("decomfl", "lora"): 1e-2,
    ("hiso", "lora"): 5e-3,
    ("decomfl", "full"): 3e-4,
    ("hiso", "full"): 3e-4,
}
# Under DP: (clip C, spread s of the mean of 3 clipped scalars in clear runs).
PRIVATE = {"lora": (1.5, 0.36), "full": (3.5, 0.87)}
PRIVATE_PER_ROUND = 3
NAMES = {"decomfl": "DeComFL", "hiso": "HiSo", "lora": "LoRA", "full": "every weight"}


@dataclass(frozen=True)
class Cell:
    method: str
    params: str
    epsilon: float  # inf: no DP
    seed: int

    @property
    def name(self) -> str:
        eps = "clear" if math.isinf(self.epsilon) else f"eps{self.epsilon:g}"
        return f"{self.method}-{self.params}-{eps}-seed{self.seed}"

    @property
    def label(self) -> str:
        eps = "no DP" if math.isinf(self.epsilon) else f"ε = {self.epsilon:g}"
        return f"{NAMES[self.method]}, {NAMES[self.params]}, {eps}"


def private_rate(method: str, params: str, epsilon: float, rounds: int) -> tuple[float, float]:
    """(η, σ) of a private cell: σ the accountant's for ε over a budget of 1.2× the expected
    participations (as ``private_lm.py`` computes it), η by the variance-matching rule,
    rounded to two significant digits."""
    budget = private_lm.participation_budget(rounds, PRIVATE_PER_ROUND, DEFAULTS.clients)
    sigma = private_lm.client_noise_multiplier(epsilon, DEFAULTS.delta, budget)
    clip, spread = PRIVATE[params]
    lr = CLEAR_RATE[method, params] * spread / math.hypot(spread, sigma * clip / PRIVATE_PER_ROUND)
    return float(f"{lr:.2g}"), sigma


def cell_args(cell: Cell, rounds: int, threads: int, extra: list[str]) -> list[str]:
    args = ["--method", cell.method, "--params", cell.params, "--rounds", str(rounds)]
    args += ["--seed", str(cell.seed), "--threads", str(threads)]
    lr = CLEAR_RATE[cell.method, cell.params]
    per_round, eval_every = CLEAR[cell.params]
    if not math.isinf(cell.epsilon):
        lr, _ = private_rate(cell.method, cell.params, cell.epsilon, rounds)
        per_round = PRIVATE_PER_ROUND
        clip, _ = PRIVATE[cell.params]
        # Repeatable noise, distinct per seed and ε.
        noise_seed = 1000 * cell.seed + round(cell.epsilon)
        args += ["--epsilon", f"{cell.epsilon:g}", "--clip", f"{clip:g}", "--noise-floor", "1"]
        args += ["--noise-seed", str(noise_seed)]
    args += ["--lr", f"{lr:g}", "--per-round", str(per_round)]
    args += ["--eval-every", str(min(eval_every, rounds))]
    return args + extra


def run_cell(cell: Cell, out: Path, args: list[str]) -> tuple[Cell, int, float]:
    folder = out / cell.name
    folder.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with open(folder / "run.log", "w") as log:
        rc = subprocess.call(
            [sys.executable, str(HERE / "private_lm.py"), *args, "--out", str(folder)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    return cell, rc, time.perf_counter() - started


def load(out: Path, cell: Cell) -> tuple[dict[str, Any], list[dict[str, float]]] | None:
    folder = out / cell.name
    try:
        summary = json.loads((folder / "summary.json").read_text())
        with open(folder / "metrics.csv", newline="") as f:
            metrics = [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]
    except FileNotFoundError:
        return None
    return summary, metrics


def mean_curve(runs: list[list[dict[str, float]]], key: str) -> list[tuple[float, float]]:
    """The mean of ``key`` over the runs at each round all of them evaluated."""
    rounds = sorted(set.intersection(*({m["round"] for m in run} for run in runs)))
    by_round = [{m["round"]: m[key] for m in run} for run in runs]
    return [(r, statistics.fmean(b[r] for b in by_round)) for r in rounds]


def report(out: Path, cells: list[Cell]) -> str:
    groups: dict[tuple[str, str, float], list[Cell]] = {}
    for cell in cells:
        groups.setdefault((cell.method, cell.params, cell.epsilon), []).append(cell)
    lines = [
        "| cell | seeds done | final accuracy (mean; each) | loss at the end | ε spent (max) | σ "
        "| η | s / round | peak RSS GB | B up / down per participant-round |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    curves: dict[str, dict[str, dict[str, list[tuple[float, float]]]]] = {}
    for (_, params, eps), members in groups.items():
        done = [(c, r) for c in members if (r := load(out, c)) is not None]
        label = members[0].label
        if not done:
            lines.append(f"| {label} | 0 of {len(members)} | – | – | – | – | – | – | – | – |")
            continue
        summaries = [s for _, (s, _) in done]
        finals = [s["final_accuracy"] for s in summaries]
        each = ", ".join(f"{100 * a:.1f}%" for a in finals)
        last_loss = statistics.fmean(m[-1]["test_loss"] for _, (_, m) in done)
        spent = max((max(s.get("epsilon_per_client") or [0.0]) for s in summaries), default=0.0)
        eps_text = "–" if math.isinf(eps) else f"{spent:.2f} of {eps:g}"
        sigma = summaries[0]["noise_multiplier"]
        lr = summaries[0]["settings"]["lr"]
        per_round = statistics.median(s["seconds_per_round_median"] for s in summaries)
        rss = max(s["peak_rss_gb"] for s in summaries)
        up = statistics.fmean(s["bytes_up_per_participant_round"] for s in summaries)
        down = statistics.fmean(s["bytes_down_per_participant_round"] for s in summaries)
        lines.append(
            f"| {label} | {len(done)} of {len(members)} | {100 * statistics.fmean(finals):.1f}% "
            f"({each}) | {last_loss:.4f} | {eps_text} | {sigma:.3f} | {lr:g} | {per_round:.1f} "
            f"| {rss:.2f} | {up:.0f} / {down:.0f} |"
        )
        metrics = [m for _, (_, m) in done]
        for key in ("test_loss", "test_accuracy"):
            curve = mean_curve(metrics, key)
            curves.setdefault(params, {}).setdefault(key, {})[label] = curve
    for params, by_key in curves.items():
        for key, series in by_key.items():
            name = "loss" if key == "test_loss" else "accuracy"
            chart = line_chart(
                series,
                y_label=f"test {name} on the evaluation snippets",
                from_zero=False,
            )
            (out / f"{name}-{params}.svg").write_text(chart)
    text = "\n".join(lines) + "\n"
    (out / "report.md").write_text(text)
    return text


def parse(argv: list[str] | None = None) -> tuple[argparse.Namespace, list[str]]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--methods", default="decomfl,hiso")
    p.add_argument("--params", default="lora,full")
    p.add_argument("--epsilons", default="inf,8,2", help="comma-separated; inf: no DP")
    p.add_argument("--seeds", default="0", help="comma-separated")
    p.add_argument("--rounds", type=int, default=300)
    p.add_argument("--jobs", type=int, default=1, help="cells at once (one thread each if > 1)")
    p.add_argument("--dry-run", action="store_true", help="list the cells and their commands")
    p.add_argument("--report-only", action="store_true")
    args, extra = p.parse_known_args(argv)
    if args.jobs < 1 or args.rounds < 1:
        p.error("--jobs and --rounds must be at least 1")
    return args, extra


def main(argv: list[str] | None = None) -> int:
    args, extra = parse(argv)
    try:
        cells = [
            Cell(m, p, float(e), int(s))
            for m in args.methods.split(",")
            for p in args.params.split(",")
            for e in args.epsilons.split(",")
            for s in args.seeds.split(",")
        ]
    except ValueError as e:
        sys.exit(f"private_lm_grid: {e}")
    bad = [c for c in cells if (c.method, c.params) not in CLEAR_RATE or not c.epsilon > 0]
    if bad:
        sys.exit(
            f"private_lm_grid: unknown cell {bad[0].name} (methods decomfl, hiso; params "
            "lora, full; ε > 0 or inf)"
        )
    threads = 1 if args.jobs > 1 else 2
    todo = [c for c in cells if load(args.out, c) is None]
    if args.dry_run or not args.report_only:
        for c in todo:
            command = " ".join(cell_args(c, args.rounds, threads, extra))
            print(f"{c.name}: {'would run' if args.dry_run else 'runs'} private_lm.py {command}")
    failed = []
    if todo and not (args.dry_run or args.report_only):
        with ThreadPoolExecutor(args.jobs) as pool:
            jobs = [
                pool.submit(run_cell, c, args.out, cell_args(c, args.rounds, threads, extra))
                for c in todo
            ]
            for job in as_completed(jobs):
                cell, rc, seconds = job.result()
                state = "done" if rc == 0 else f"FAILED (exit {rc}; see its run.log)"
                print(f"{cell.name}: {state} in {seconds / 60:.1f} min", flush=True)
                if rc != 0:
                    failed.append(cell.name)
    if not args.dry_run:
        print(report(args.out, cells), end="")
    if failed:
        print(f"private_lm_grid: {len(failed)} cell(s) failed: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
