"""Private scalar-only fine-tuning of MiniLM (DeComFL / HiSo) on the movie snippets, in PyTorch.

Only seeds and scalars travel. With ``--epsilon`` each participant clips its round's scalars to
``--clip``, adds its share of Gaussian noise (calibrated by privopt's accountant for the
target over the rounds a client may take part in) and the round's scalars are summed by
SecAgg+, so the server sees neither a clear nor an un-noised scalar; a per-client ledger
records ε from the rounds each client actually contributed to and the noise each sum carried,
and stops a client at its budget.

The data, split, client partition, batches, round plans and initial model are the Rust
engine's (``privopt run configs/hiso-minilm-full.toml``): :class:`privopt.problem.Problem`
builds them, and the PyTorch module holds the Rust parameter vector coordinate for coordinate.

    python python/repro/private_lm.py --method decomfl --params lora --epsilon 8 \\
        --rounds 300 --out out/private-lm/decomfl-lora-eps8

Writes ``metrics.csv`` (round, test loss and accuracy on the first ``--eval-size`` test
snippets), ``summary.json`` (settings, final accuracy on all 2 114 test snippets, bytes per
participant-round, seconds per round, peak memory, dropped clients) and, when private, the
ledger's ``privacy.csv`` / ``privacy.json`` / ``privacy.svg``. Needs ``privopt data fetch
minilm movie-snippets`` (or ``PRIVOPT_DATA``) and PyTorch.
"""

from __future__ import annotations

import argparse
import copy
import csv
import json
import math
import resource
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from privopt import dp, secagg
from privopt.errors import PrivoptError
from privopt.ledger import PrivacyLedger
from privopt.problem import Problem
from privopt.protocols import scalar_fl
from privopt.text import data_dir
from privopt.torch import ParameterSet, ZerothOrderClient, ZerothOrderServer
from privopt.torch.text import (
    BITFIT,
    LORA,
    MiniLMClassifier,
    TextBatch,
    accuracy,
    batch_from_rows,
    classification_loss,
)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--method", choices=["decomfl", "hiso"], default="decomfl")
    p.add_argument("--params", choices=["full", "bitfit", "lora"], default="lora")
    p.add_argument("--epsilon", type=float, default=math.inf, help="client-level ε (inf: none)")
    p.add_argument("--delta", type=float, default=1e-5)
    p.add_argument("--secagg", action="store_true", help="SecAgg+ without DP (bytes, checks)")
    p.add_argument("--clip", type=float, default=2.0, help="L2 bound C on a round's scalars")
    p.add_argument("--noise-floor", type=float, default=0.6)
    p.add_argument(
        "--participations",
        type=int,
        default=None,
        help="rounds a client may contribute to (the accountant's count; default 1.2× the "
        "expected rounds per client)",
    )
    p.add_argument("--rounds", type=int, default=300)
    p.add_argument("--clients", type=int, default=6)
    p.add_argument("--per-round", type=int, default=3)
    p.add_argument("--perturbations", type=int, default=5)
    p.add_argument("--local-steps", type=int, default=1)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--lr", type=float, default=None, help="default: by --params")
    p.add_argument("--mu", type=float, default=1e-3)
    p.add_argument("--lora-rank", type=int, default=8)
    p.add_argument("--drop", type=float, default=0.0, help="chance a participant vanishes")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--noise-seed",
        type=int,
        default=None,
        help="draw the DP noise from this seed (per round and client) so a run can be "
        "repeated exactly; for experiments only (default: OS randomness, as deployed)",
    )
    p.add_argument("--eval-every", type=int, default=25)
    p.add_argument("--eval-size", type=int, default=500)
    p.add_argument(
        "--final-size",
        type=int,
        default=None,
        help="score the final model on the first N test snippets (default: all 2 114)",
    )
    p.add_argument("--progress-every", type=int, default=10, help="rounds between ETA lines")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    if args.lr is None:
        args.lr = {"full": 3e-4, "bitfit": 1e-3, "lora": 1e-3}[args.params]
    if not args.epsilon > 0:
        p.error(f"--epsilon must be > 0 (inf for no DP), got {args.epsilon}")
    return args


def participation_budget(rounds: int, per_round: int, clients: int) -> int:
    """Releases a client's budget covers: 1.2× the expected participations, so that the
    server's uneven choices rarely stop a client early."""
    return math.ceil(1.2 * rounds * per_round / clients)


def client_noise_multiplier(epsilon: float, delta: float, budget: int) -> float:
    """σ for client-level (ε, δ) over ``budget`` releases: no subsampling amplification, the
    server picks the participants."""
    return dp.noise_multiplier(epsilon, budget, delta, sampling="full")


def first(batch: TextBatch, k: int | None) -> TextBatch:
    """The first ``k`` examples of ``batch`` (all of them for ``None``)."""
    return TextBatch(batch.ids[:k], batch.lengths[:k], batch.labels[:k])


def write_metrics(out: Path, metrics: list[dict[str, float]]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "metrics.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["round", "test_loss", "test_accuracy"])
        w.writeheader()
        w.writerows(metrics)


def build_model(args: argparse.Namespace, w0: np.ndarray, *, lora_seed: int) -> MiniLMClassifier:
    """The Rust engine's initial model in PyTorch (and LoRA adapters when asked); every party
    gets a copy."""
    model = MiniLMClassifier.from_pretrained(zero_shot=False)
    ParameterSet(model).load(w0)
    if args.params == "lora":
        model.add_lora(args.lora_rank, seed=lora_seed)
    return model


def selection(args: argparse.Namespace) -> str | None:
    return {"full": None, "bitfit": BITFIT, "lora": LORA}[args.params]


def run(args: argparse.Namespace) -> dict[str, Any]:
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    problem = Problem(
        {"dataset": "movie-snippets", "clients": args.clients},
        {"kind": "minilm", "trainable": "all"},
        data_dir=data_dir(),
        seed=args.seed,
    )
    w0 = problem.init_params(args.seed)
    test = batch_from_rows(*problem.test_rows())
    probe = first(test, args.eval_size)
    rule = args.method
    spec = scalar_fl.Spec(
        lr=args.lr,
        local_steps=args.local_steps,
        perturbations=args.perturbations,
        rule=rule,
    )
    private = math.isfinite(args.epsilon)
    privacy = None
    ledger = None
    sigma = 0.0
    if private:
        budget = args.participations or participation_budget(
            args.rounds, args.per_round, args.clients
        )
        sigma = client_noise_multiplier(args.epsilon, args.delta, budget)
        privacy = scalar_fl.Privacy(args.clip, sigma, args.noise_floor)
        ledger = PrivacyLedger(args.clients, args.delta, max_epsilon=args.epsilon)
        print(
            f"client-level (ε = {args.epsilon:g}, δ = {args.delta:g}) over {budget} "
            f"participations: noise multiplier σ = {sigma:.3f}, clip C = {args.clip:g}, "
            f"{privacy.required_contributors(args.per_round)} of {args.per_round} "
            "contributors needed per round",
            flush=True,
        )
    elif args.secagg:
        privacy = scalar_fl.Privacy(args.clip, 0.0, args.noise_floor)
    sel = selection(args)
    initial = build_model(args, w0, lora_seed=args.seed)
    server = ZerothOrderServer(
        copy.deepcopy(initial),
        spec,
        clients=args.clients,
        params=sel,
        seed=args.seed,
        privacy=privacy,
    )
    clients = [
        ZerothOrderClient(
            copy.deepcopy(initial),
            spec,
            id=i,
            loss_fn=classification_loss,
            params=sel,
            mu=args.mu,
        )
        for i in range(args.clients)
    ]
    print(
        f"{rule}, {args.params}: {len(server.params):,} trained parameters; {args.clients} "
        f"clients, {args.per_round} per round, P = {args.perturbations}, batch {args.batch}, "
        f"lr {args.lr:g}",
        flush=True,
    )
    drops = np.random.default_rng([args.seed, 7])
    metrics: list[dict[str, float]] = []
    up: list[int] = []
    down: list[int] = []
    dropped: list[tuple[int, int, str]] = []
    norms: list[float] = []
    round_seconds: list[float] = []

    def evaluate(r: int) -> None:
        model = server.sync()
        with torch.no_grad():
            loss = float(classification_loss(model, probe))
        acc = accuracy(model, probe)
        metrics.append({"round": r, "test_loss": loss, "test_accuracy": acc})
        line = f"round {r:4d}: loss {loss:.4f}, accuracy {acc:.3f} on {len(probe)}"
        if ledger is not None:
            line += f"; {ledger.summary()}"
        print(line, flush=True)
        # Written at every evaluation, so a run stopped early keeps its curve.
        write_metrics(args.out, metrics)

    evaluate(0)
    started = time.perf_counter()
    for r in range(args.rounds):
        t0 = time.perf_counter()
        eligible = None
        if ledger is not None:
            eligible, _ = ledger.admit(range(args.clients), sigma)
            if len(eligible) < args.per_round:
                print(f"round {r}: only {len(eligible)} clients within budget; the run stops")
                break
        plan, who = server.begin_round(args.per_round, eligible)
        words: dict[int, np.ndarray] = {}
        sent: dict[int, int] = {}
        received: dict[int, int] = {}
        for i in who:
            catch_up = server.catch_up(i)
            received[i] = len(plan) + len(catch_up)
            idx = problem.scalar_fl_batches(
                i, r, local_steps=args.local_steps, batch_size=args.batch, seed=args.seed
            )
            batches = [batch_from_rows(*problem.rows(b)) for b in idx]
            try:
                if drops.random() < args.drop:
                    raise ConnectionError("vanished (simulated dropout)")
                clients[i].receive(catch_up)
                if privacy is None:
                    reply = clients[i].local_update(plan, batches)
                    server.receive(reply)
                    sent[i] = len(reply)
                else:
                    noise_seed = None
                    if args.noise_seed is not None:
                        noise_seed = (args.noise_seed * 1_000_003 + r) * 1_009 + i
                    words[i] = clients[i].private_update(
                        plan, batches, privacy, noise_seed=noise_seed
                    )
                norms.append(float(np.linalg.norm(clients[i].last_scalars)))
            except (PrivoptError, ConnectionError) as e:
                dropped.append((r, i, str(e)))
                print(f"round {r}: client {i} dropped ({e})", flush=True)
        if privacy is None:
            server.finish_round()
        else:
            try:
                result = secagg.secure_sum(words, round=r)
                server.finish_round_secure(result.total, result.contributors)
            except PrivoptError as e:
                print(f"round {r}: no sum released ({e}); the model stays", flush=True)
                server.skip_round()
            else:
                for i in result.contributors:
                    sent[i] = result.sent[i]
                for i, b in result.received.items():
                    received[i] += b
                if ledger is not None:
                    m = privacy.effective_multiplier(len(who), len(result.contributors))
                    ledger.record_each(r, dict.fromkeys(result.contributors, m))
        up.extend(sent.values())
        down.extend(received.values())
        round_seconds.append(time.perf_counter() - t0)
        if args.progress_every and (r + 1) % args.progress_every == 0 and r + 1 < args.rounds:
            per_round = float(np.median(round_seconds[-args.progress_every :]))
            left = (args.rounds - r - 1) * per_round / 60
            print(
                f"round {r + 1}/{args.rounds}: {per_round:.1f} s per round, "
                f"about {left:.0f} min left",
                flush=True,
            )
        if (r + 1) % args.eval_every == 0 or r + 1 == args.rounds:
            evaluate(r + 1)
    elapsed = time.perf_counter() - started
    model = server.sync()
    scored = first(test, args.final_size)
    final = accuracy(model, scored)
    summary: dict[str, Any] = {
        # Strict JSON: no Infinity (ε = inf is "no DP", written as null).
        "settings": {
            k: str(v) if isinstance(v, Path) else None if v == math.inf else v
            for k, v in vars(args).items()
        },
        "trained_parameters": len(server.params),
        "rounds_run": len(round_seconds),
        "final_accuracy": final,
        "test_snippets": len(scored),
        "seconds_per_round_median": float(np.median(round_seconds)),
        "seconds": elapsed,
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
        "bytes_up_per_participant_round": float(np.mean(up)) if up else 0.0,
        "bytes_down_per_participant_round": float(np.mean(down)) if down else 0.0,
        "dropped": dropped,
        "noise_multiplier": sigma,
        "scalar_norms": norms,
    }
    if ledger is not None:
        eps = [ledger.epsilon(c) for c in range(args.clients)]
        summary["epsilon_per_client"] = eps
        ledger.write(args.out)
    write_metrics(args.out, metrics)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(
        f"final accuracy on {len(scored)} test snippets: {final:.4f}; "
        f"{summary['seconds_per_round_median']:.2f} s per round; up "
        f"{summary['bytes_up_per_participant_round']:.0f} B, down "
        f"{summary['bytes_down_per_participant_round']:.0f} B per participant-round",
        flush=True,
    )
    return summary


if __name__ == "__main__":
    try:
        run(parse())
    except PrivoptError as e:
        sys.exit(f"private_lm: {e}")
