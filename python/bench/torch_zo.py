"""Zeroth-order training through privopt.torch beside plain PyTorch, in one run:

- speed: one DeComFL step of a CNN (privopt.torch: perturb in place, two forward passes,
  perturb back, the reply) against two forward passes of the same model in plain PyTorch;
- memory: the peak resident memory of a process that trains a model by zeroth-order rounds
  (catch-up by replay included) against one that only runs the model's inference, for the CNN
  and for a 10^8-parameter MLP with random weights. Each side runs in its own process, so
  both peaks include the same interpreter and torch; the server runs in this process;
- a language model of OPT-125M's size (``--encoder``): privopt.torch.text's encoder at
  OPT-125M's shape (vocabulary 50 272, width 768, 12 layers, 12 heads, 3 072 hidden; random
  weights: the machine cannot download pretrained ones), 124.1M parameters, a batch of 16
  texts of 64 tokens: the same speed and memory comparisons.

    pip install "./python[torch]"
    python python/bench/torch_zo.py                 # about 2 minutes on 2 cores
    python python/bench/torch_zo.py --skip-large    # the CNN only
    python python/bench/torch_zo.py --encoder --skip-large --repeats 5   # the 125M model
"""

from __future__ import annotations

import argparse
import resource
import struct
import subprocess
import sys
import time
from typing import Any

import torch
from compare_peers import median_seconds  # this folder's timing helper

from privopt.protocols import scalar_fl
from privopt.torch import ParameterSet, ZerothOrderClient
from privopt.torch.text import MiniLMClassifier, TextBatch, classification_loss

BATCH = 64


def cnn() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 32, 5),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(32, 64, 5),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(64 * 4 * 4, 128),
        torch.nn.ReLU(),
        torch.nn.Linear(128, 10),
    )


def mlp_1e8() -> torch.nn.Module:
    """10 000 × 10 000 weights and biases, twice over half the width: 100 020 000 parameters."""
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(10_000, 5_000), torch.nn.ReLU(), torch.nn.Linear(5_000, 10_000)
    )


def encoder_125m() -> torch.nn.Module:
    """privopt.torch.text's encoder at OPT-125M's shape, random weights (124.1M parameters)."""
    torch.manual_seed(0)
    return MiniLMClassifier(
        classes=2, vocab=50_272, positions=512, hidden=768, layers=12, heads=12, ffn=3072
    ).eval()


MODELS = {
    "cnn": (cnn, (BATCH, 1, 28, 28)),
    "mlp_1e8": (mlp_1e8, (8, 10_000)),
    "encoder_125m": (encoder_125m, (16, 64)),
}


def batch_for(shape: tuple[int, ...]) -> Any:
    g = torch.Generator().manual_seed(1)
    if len(shape) == 2 and shape[1] == 64:  # token ids for the encoder
        ids = torch.randint(0, 50_272, shape, generator=g)
        labels = torch.randint(0, 2, (shape[0],), generator=g)
        return TextBatch(ids, torch.full((shape[0],), shape[1]), labels)
    x = torch.randn(*shape, generator=g)
    return x, torch.randint(0, 10, (shape[0],), generator=g)


def loss_fn(module: torch.nn.Module, batch: Any) -> torch.Tensor:
    if isinstance(batch, TextBatch):
        return classification_loss(module, batch)
    x, y = batch
    out = module(x)
    return torch.nn.functional.cross_entropy(out[:, :10], y)


def spec() -> scalar_fl.Spec:
    return scalar_fl.Spec(lr=1e-4, local_steps=1, perturbations=1)


def speed(repeats: int, name: str = "cnn") -> None:
    make, shape = MODELS[name]
    module = make()
    batch = batch_for(shape)
    d = len(ParameterSet(module))

    def two_forward() -> None:
        with torch.no_grad():
            loss_fn(module, batch)
            loss_fn(module, batch)

    server = scalar_fl.Server(spec(), ParameterSet(module).to_numpy(), clients=1, seed=0)
    client = ZerothOrderClient(module, spec(), id=0, loss_fn=loss_fn)
    plan, _ = server.begin_round(per_round=1)
    client.receive(server.catch_up(0))

    def zo_step() -> None:
        client.local_update(plan, [batch])

    # Interleave so both see the same machine state.
    plain, ours = [], []
    for _ in range(3):
        plain.append(median_seconds(two_forward, repeats))
        ours.append(median_seconds(zo_step, repeats))
    p, o = min(plain), min(ours)
    print(f"speed: {name} of {d} parameters, batch {shape[0]}, {torch.get_num_threads()} threads")
    print(f"  two forward passes, plain PyTorch   {p * 1e3:8.2f} ms")
    print(f"  one DeComFL step via privopt.torch   {o * 1e3:8.2f} ms   ratio {o / p:.3f}")


# -- memory: one child process per side --------------------------------------------------


def send(out: Any, data: bytes) -> None:
    out.write(struct.pack("<I", len(data)) + data)
    out.flush()


def recv(inp: Any) -> bytes:
    (n,) = struct.unpack("<I", inp.read(4))
    return bytes(inp.read(n))


def child(kind: str, name: str) -> None:
    make, shape = MODELS[name]
    module = make()
    batch = batch_for(shape)
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    if kind == "inference":
        with torch.no_grad():
            loss_fn(module, batch)
    else:
        client = ZerothOrderClient(module, spec(), id=0, loss_fn=loss_fn)
        for _ in range(3):  # round 0 (up to date), then replays of the round before
            catch, plan = recv(inp), recv(inp)
            client.receive(catch)
            send(out, client.local_update(plan, [batch]))
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    send(out, str(peak_kib).encode())


def memory(name: str) -> None:
    make, _ = MODELS[name]
    params = ParameterSet(make())
    d = len(params)
    model_mib = sum(p.numel() * p.element_size() for p in params.parameters) / 2**20
    peaks = {}
    for kind in ("inference", "zeroth-order"):
        proc = subprocess.Popen(
            [sys.executable, __file__, "--child", kind, name],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert proc.stdin is not None and proc.stdout is not None
        seconds = 0.0
        if kind == "zeroth-order":
            server = scalar_fl.Server(spec(), params.to_numpy(), clients=1, seed=0)
            for _ in range(3):
                plan, _ = server.begin_round(per_round=1)
                send(proc.stdin, server.catch_up(0))
                t0 = time.perf_counter()
                send(proc.stdin, plan)
                server.receive(recv(proc.stdout))
                seconds = time.perf_counter() - t0
                server.finish_round()
        peaks[kind] = int(recv(proc.stdout)) / 1024
        proc.wait()
        if kind == "zeroth-order":
            print(f"  last round (catch-up by replay, step, reply): {seconds:.2f} s")
    inf, zo = peaks["inference"], peaks["zeroth-order"]
    print(f"memory: {name}, {d} parameters ({model_mib:.0f} MiB)")
    print(f"  peak RSS, inference only            {inf:8.0f} MiB")
    print(f"  peak RSS, zeroth-order training     {zo:8.0f} MiB   ratio {zo / inf:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--skip-large", action="store_true", help="no 10^8-parameter model")
    ap.add_argument("--encoder", action="store_true", help="the 125M-parameter encoder too")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return
    speed(args.repeats)
    memory("cnn")
    if not args.skip_large:
        memory("mlp_1e8")
    if args.encoder:
        speed(args.repeats, "encoder_125m")
        memory("encoder_125m")


if __name__ == "__main__":
    main()
