"""privopt's Python API beside the Python libraries people use, in one run, printing ratios.

    pip install ./python tenseal phe gmpy2 dp-accounting
    python python/bench/compare_peers.py            # everything (about 2 minutes on 2 cores)
    python python/bench/compare_peers.py --only ckks

Peers that are not installed are reported as skipped. Every timing is the median of
``--repeats`` runs of the whole Python call (argument conversion and results included), so the
ratios include each library's call overhead. CKKS runs single-threaded on both sides (TenSEAL
``n_threads=1``, privopt ``threads=1``); the Paillier batch calls use every core on privopt's
side, which is what its batch API is for, and python-paillier has no batch API.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np

import privopt
from privopt import ckks, dp, paillier

ROWS: list[tuple[str, float | None, float | None, str]] = []


def median_seconds(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def record(name: str, ours: float | None, peer: float | None, note: str = "") -> None:
    ROWS.append((name, ours, peer, note))
    print(
        f"  {name:<44} {fmt(ours):>10} {fmt(peer):>10} {ratio(ours, peer):>8}  {note}", flush=True
    )


def fmt(s: float | None) -> str:
    if s is None:
        return "-"
    return f"{s * 1e3:.3f} ms" if s < 1 else f"{s:.2f} s"


def ratio(ours: float | None, peer: float | None) -> str:
    return f"{peer / ours:.1f}x" if ours and peer else "-"


def have(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def bench_ckks(repeats: int) -> None:
    print("CKKS, n = 8192, primes [60, 40, 40, 60], scale 2^40, 4096 slots, one thread")
    rng = np.random.default_rng(0)
    a, b = rng.uniform(-1, 1, 4096), rng.uniform(-1, 1, 4096)
    ctx = ckks.Context(ckks.Params.leveled(8192, 60, 40, 2))
    sk = ckks.SecretKey.generate(ctx)
    ev = ckks.Evaluator(
        ctx,
        relin_key=sk.relin_key(),
        galois_keys=sk.galois_keys([1 << i for i in range(12)]),
        threads=1,
    )
    pk = sk.public_key()
    ca, cb = pk.encrypt(a), pk.encrypt(b)
    ours = {
        "encrypt (public key)": median_seconds(lambda: pk.encrypt(a), repeats),
        "decrypt": median_seconds(lambda: sk.decrypt(ca), repeats),
        "add": median_seconds(lambda: ev.add(ca, cb), repeats),
        "mul + relin + rescale": median_seconds(lambda: ev.multiply(ca, cb), repeats),
        "rotate by 1": median_seconds(lambda: ev.rotate(ca, 1), repeats),
        "sum of 4096 slots": median_seconds(lambda: ev.sum(ca), repeats),
        "dot product of 4096 slots": median_seconds(lambda: ev.dot(ca, cb), repeats),
    }
    got = sk.decrypt(ev.multiply(ca, cb))
    assert np.abs(got - a * b).max() < 1e-4, "privopt's product is wrong"
    peer: dict[str, float] = {}
    if have("tenseal"):
        import tenseal as ts

        tctx = ts.context(
            ts.SCHEME_TYPE.CKKS, 8192, coeff_mod_bit_sizes=[60, 40, 40, 60], n_threads=1
        )
        tctx.global_scale = 2**40
        tctx.generate_galois_keys()
        ta, tb = ts.ckks_vector(tctx, a), ts.ckks_vector(tctx, b)
        assert np.abs(np.array((ta * tb).decrypt()) - a * b).max() < 1e-4
        peer["encrypt (public key)"] = median_seconds(lambda: ts.ckks_vector(tctx, a), repeats)
        peer["decrypt"] = median_seconds(lambda: ta.decrypt(), repeats)
        peer["add"] = median_seconds(lambda: ta + tb, repeats)
        peer["mul + relin + rescale"] = median_seconds(lambda: ta * tb, repeats)
        peer["sum of 4096 slots"] = median_seconds(lambda: ta.sum(), repeats)
        peer["dot product of 4096 slots"] = median_seconds(lambda: ta.dot(tb), repeats)
        # TenSEAL's vectors expose no rotation; its SEAL binding does, on the same ciphertext.
        import tenseal.sealapi as sealapi

        seal_ev = sealapi.Evaluator(tctx.seal_context().data)
        galois = tctx.galois_keys().data
        raw = ta.ciphertext()[0]
        out = sealapi.Ciphertext()
        peer["rotate by 1"] = median_seconds(
            lambda: seal_ev.rotate_vector(raw, 1, galois, out), repeats
        )
        label = "TenSEAL " + ts.__version__
    else:
        label = "TenSEAL not installed"
    print(f"  {'operation':<44} {'privopt':>10} {'peer':>10} {'speed-up':>8}  ({label})")
    for name, t in ours.items():
        record(f"ckks {name}", t, peer.get(name))


def bench_paillier(repeats: int, count: int) -> None:
    print(f"Paillier-2048, {count} values (privopt batch calls on every core)")
    rng = np.random.default_rng(1)
    values = rng.integers(-(2**40), 2**40, count)
    kp = paillier.KeyPair.generate(2048)
    pk = kp.public_key
    enc = pk.encrypt(values)
    assert (kp.decrypt(enc) == values).all()
    ours = {
        f"encrypt {count} (public key)": median_seconds(lambda: pk.encrypt(values), repeats),
        f"encrypt {count} (key owner)": median_seconds(lambda: kp.encrypt(values), repeats),
        f"decrypt {count}": median_seconds(lambda: kp.decrypt(enc), repeats),
        f"add {count} + {count}": median_seconds(lambda: enc + enc, repeats),
        f"multiply {count} by an int": median_seconds(lambda: enc * 12345, repeats),
    }
    peer: dict[str, float] = {}
    if have("phe"):
        from phe import paillier as phe

        ppk, psk = phe.generate_paillier_keypair(n_length=2048)
        ints = [int(v) for v in values]
        penc = [ppk.encrypt(v) for v in ints]
        assert [psk.decrypt(c) for c in penc[:5]] == ints[:5]
        peer[f"encrypt {count} (public key)"] = median_seconds(
            lambda: [ppk.encrypt(v) for v in ints], max(1, repeats // 3)
        )
        peer[f"decrypt {count}"] = median_seconds(
            lambda: [psk.decrypt(c) for c in penc], max(1, repeats // 3)
        )
        peer[f"add {count} + {count}"] = median_seconds(
            lambda: [x + y for x, y in zip(penc, penc)], repeats
        )
        peer[f"multiply {count} by an int"] = median_seconds(
            lambda: [x * 12345 for x in penc], repeats
        )
        gmp = "with gmpy2" if have("gmpy2") else "WITHOUT gmpy2"
        label = f"python-paillier ({gmp})"
    else:
        label = "python-paillier not installed"
    print(f"  {'operation':<44} {'privopt':>10} {'peer':>10} {'speed-up':>8}  ({label})")
    for name, t in ours.items():
        record(f"paillier {name}", t, peer.get(name))


DP_TABLE = [
    # (sigma, q, steps, delta)
    (0.5, 0.001, 10_000, 1e-5),
    (0.8, 0.01, 1_000, 1e-5),
    (1.0, 0.01, 10_000, 1e-5),
    (1.1, 0.004, 50_000, 1e-6),
    (2.0, 0.05, 2_000, 1e-5),
    (4.0, 0.1, 500, 1e-6),
    (1.0, 1.0, 10, 1e-5),
    (10.0, 1.0, 1_000, 1e-5),
]


def bench_dp() -> float | None:
    print("DP accountant: ε of Poisson-subsampled Gaussian runs (RDP), privopt vs dp-accounting")
    if not have("dp_accounting"):
        print("  dp-accounting not installed: skipped")
        return None
    import dp_accounting
    from dp_accounting import rdp

    worst = 0.0
    print(
        f"  {'sigma':>6} {'q':>6} {'steps':>7} {'delta':>7} {'privopt ε':>11} {'dp-acc ε':>11} {'rel diff':>9}"
    )
    for sigma, q, steps, delta in DP_TABLE:
        ours = dp.epsilon(sigma, steps, delta, q=q)
        acc = rdp.RdpAccountant()  # its default orders; neighbouring relation add/remove
        event = dp_accounting.GaussianDpEvent(sigma)
        if q < 1.0:
            event = dp_accounting.PoissonSampledDpEvent(q, event)
        acc.compose(event, steps)
        theirs = acc.get_epsilon(delta)
        rel = abs(ours - theirs) / theirs
        worst = max(worst, rel)
        print(
            f"  {sigma:>6} {q:>6} {steps:>7} {delta:>7.0e} {ours:>11.5f} {theirs:>11.5f} {rel:>8.3%}"
        )
    print(f"  largest relative difference: {worst:.3%}")
    return worst


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--only", choices=["ckks", "paillier", "dp"], action="append")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--count", type=int, default=1000, help="Paillier batch size")
    args = ap.parse_args()
    only = set(args.only or ["ckks", "paillier", "dp"])
    print(f"privopt {privopt.__version__}, Python {sys.version.split()[0]}, numpy {np.__version__}")
    if "ckks" in only:
        bench_ckks(args.repeats)
    if "paillier" in only:
        bench_paillier(max(3, args.repeats // 2), args.count)
    if "dp" in only:
        bench_dp()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
