"""CKKS bootstrapping, privopt beside OpenFHE-Python: one table, one run, this machine
(issue 52).

For each setting, on one thread and on two: seconds per bootstrap (median of ``--runs`` after
a warm-up), the mean and the minimum precision in bits over the slots (values uniform in
[-1, 1]; ``-log2`` of the mean and of the largest absolute error), the failure probability of
one bootstrap (ModRaise's overflow beyond EvalMod's range in some coefficient), levels and bits
of modulus left, evaluation-key bytes (in memory where the library says, and serialized), peak
memory, and the setup and key-generation seconds. Each (setting, threads) pair runs in a
process of its own, so its peak memory (``ru_maxrss``) is its own.

privopt (``privopt.ckks.Bootstrapper``): ``n15``, ``n16``, ``n16-stc-first`` (SlotsToCoeffs
first: inputs at level 3, the same 9 levels between bootstraps), ``n16-compact`` (seeded key
halves, diagonals rebuilt at use) and ``n16-s1024`` (sparse packing of 1 024 slots); 128-bit,
dense secret, weight-32 encapsulation.

OpenFHE: ``openfhe-n16``, the setting the issue names: ring 2^16, ``SPARSE_ENCAPSULATED``
(weight 32), level budget [3, 3], 4 large digits (hybrid key switching), ``FLEXIBLEAUTO`` with
50-bit scaling and a 58-bit first modulus (60 is refused at 2^16: ``first − scale`` must not
exceed OpenFHE's correction factor, 8 there), 9 levels left after bootstrapping,
``HEStd_128_classic``. Its wheels are CPython 3.10 only: give that interpreter with
``--openfhe-python`` (without one the OpenFHE rows are skipped, with the command that makes
it)::

    python3.10 -m venv /tmp/ofhe && /tmp/ofhe/bin/pip install openfhe numpy
    python python/bench/bootstrap_vs_openfhe.py --openfhe-python /tmp/ofhe/bin/python

About 30 minutes with every setting on 2 cores (OpenFHE's rows peak at 12 GB, privopt's at 6);
``--settings n15,openfhe-n16`` for fewer.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

PRIVOPT_SETTINGS: dict[str, dict[str, Any]] = {
    "n15": {"preset": "n15"},
    "n16": {"preset": "n16"},
    "n16-stc-first": {"preset": "n16-stc-first"},
    "n16-compact": {"preset": "n16", "compact": True},
    "n16-s1024": {"preset": "n16", "slots": 1024},
}
OPENFHE_SETTINGS: dict[str, dict[str, Any]] = {
    # ring, level budget, levels after, scaling bits, first modulus bits, large digits
    "openfhe-n16": {
        "ring": 1 << 16,
        "budget": [3, 3],
        "after": 9,
        "scale": 50,
        # ModRaise needs first − scale ≤ the correction factor OpenFHE derives from the
        # ring and slots (8 at 2^16 full slots: 60/50 is refused as "Degree [10]").
        "first": 58,
        "digits": 4,
    },
}
SEED = 52


def peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def precision(decrypted: np.ndarray, values: np.ndarray) -> tuple[float, float]:
    err = np.abs(decrypted[: len(values)] - values)
    return float(-np.log2(err.mean())), float(-np.log2(err.max()))


def timed_runs(step: Any, runs: int) -> tuple[float, Any]:
    out = step()  # warm-up (first-touch of pages, caches)
    seconds = []
    for _ in range(runs):
        start = time.perf_counter()
        out = step()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), out


def privopt_worker(setting: str, threads: int, runs: int) -> dict[str, Any]:
    from privopt import ckks

    opts = PRIVOPT_SETTINGS[setting]
    start = time.perf_counter()
    boot = ckks.Bootstrapper(
        opts["preset"], compact=opts.get("compact", False), slots=opts.get("slots")
    )
    setup_s = time.perf_counter() - start
    sk = ckks.SecretKey.generate(boot.context)
    start = time.perf_counter()
    keys = boot.keys(sk, threads=threads)
    keygen_s = time.perf_counter() - start
    period = np.random.default_rng(SEED).uniform(-1.0, 1.0, boot.slots)
    values = np.tile(period, boot.context.slots // boot.slots)
    ct = sk.encrypt(values, level=boot.input_level)
    seconds, out = timed_runs(lambda: boot.bootstrap(ct, keys), runs)
    mean_bits, min_bits = precision(sk.decrypt(out), period)
    peak = peak_gb()  # before serializing: the bytes are a copy the bootstrap never needs
    serialized = len(keys.to_bytes())
    return {
        "library": "privopt",
        "setting": setting,
        "threads": threads,
        "seconds": seconds,
        "mean_bits": mean_bits,
        "min_bits": min_bits,
        "failure": f"2^{math.log2(boot.failure_probability):.1f}"
        if boot.failure_probability > 0
        else "0",
        # Levels a circuit has between two bootstraps (inputs come at `input_level`).
        "levels_left": out.level - boot.input_level,
        "bits_left": boot.output_bits,
        "key_gb_memory": keys.nbytes / 1e9,
        "key_gb_serialized": serialized / 1e9,
        "peak_gb": peak,
        "setup_s": setup_s,
        "keygen_s": keygen_s,
        "slots": boot.slots,
    }


def openfhe_worker(setting: str, threads: int, runs: int) -> dict[str, Any]:
    import openfhe as o  # CPython 3.10; threads set by OMP_NUM_THREADS at process start

    s = OPENFHE_SETTINGS[setting]
    dist = o.SecretKeyDist.SPARSE_ENCAPSULATED
    p = o.CCParamsCKKSRNS()
    p.SetSecretKeyDist(dist)
    p.SetSecurityLevel(o.SecurityLevel.HEStd_128_classic)
    p.SetRingDim(s["ring"])
    p.SetScalingModSize(s["scale"])
    p.SetFirstModSize(s["first"])
    p.SetScalingTechnique(o.ScalingTechnique.FLEXIBLEAUTO)
    p.SetNumLargeDigits(s["digits"])
    p.SetKeySwitchTechnique(o.KeySwitchTechnique.HYBRID)
    depth = s["after"] + o.CryptoContext.GetBootstrapDepth(s["budget"], dist)
    p.SetMultiplicativeDepth(depth)
    start = time.perf_counter()
    cc = o.GenCryptoContext(p)
    for feature in ("PKE", "KEYSWITCH", "LEVELEDSHE", "ADVANCEDSHE", "FHE"):
        cc.Enable(getattr(o.PKESchemeFeature, feature))
    slots = cc.GetRingDimension() // 2
    cc.EvalBootstrapSetup(s["budget"])
    setup_s = time.perf_counter() - start
    start = time.perf_counter()
    kp = cc.KeyGen()
    cc.EvalMultKeyGen(kp.secretKey)
    cc.EvalBootstrapKeyGen(kp.secretKey, slots)
    keygen_s = time.perf_counter() - start
    values = np.random.default_rng(SEED).uniform(-1.0, 1.0, slots)
    pt = cc.MakeCKKSPackedPlaintext(values.tolist(), 1, depth - 1)
    pt.SetLength(slots)
    ct = cc.Encrypt(kp.publicKey, pt)
    seconds, out = timed_runs(lambda: cc.EvalBootstrap(ct), runs)
    result = cc.Decrypt(kp.secretKey, out)
    result.SetLength(slots)
    mean_bits, min_bits = precision(np.array(result.GetRealPackedValue()), values)
    levels_left = depth - out.GetLevel() - (out.GetNoiseScaleDeg() - 1)
    peak = peak_gb()
    with tempfile.TemporaryDirectory() as d:
        # The automorphism keys include the bootstrap's (SerializeEvalBootstrapKey writes the
        # same bytes); the relinearization key beside them.
        cc.SerializeEvalMultKey(f"{d}/mult", o.BINARY)
        cc.SerializeEvalAutomorphismKey(f"{d}/rot", o.BINARY)
        serialized = sum(os.path.getsize(f"{d}/{f}") for f in os.listdir(d))
    return {
        "library": f"OpenFHE {o.__version__}" if hasattr(o, "__version__") else "OpenFHE",
        "setting": setting,
        "threads": threads,
        "seconds": seconds,
        "mean_bits": mean_bits,
        "min_bits": min_bits,
        # K = 16 for SPARSE_ENCAPSULATED (weight 32): |I| <= 16 always (a sum of 33 terms of
        # at most 1/2), so the uniform-sum model gives 0; OpenFHE states below 2^-137.
        # Not computed here: OpenFHE's own statement, printed as such.
        "failure": "< 2^-137 (stated)",
        "levels_left": levels_left,
        # FLEXIBLEAUTO's primes are about the scaling size each.
        "bits_left": float(levels_left * s["scale"]),
        "key_gb_memory": None,
        "key_gb_serialized": serialized / 1e9,
        "peak_gb": peak,
        "setup_s": setup_s,
        "keygen_s": keygen_s,
        "slots": slots,
    }


def run_worker(python: str, library: str, setting: str, threads: int, runs: int) -> dict[str, Any]:
    env = dict(os.environ)
    env.update({"OMP_NUM_THREADS": str(threads), "RAYON_NUM_THREADS": str(threads)})
    cmd = [python, __file__, "--worker", library, "--setting", setting]
    cmd += ["--threads", str(threads), "--runs", str(runs)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"{library} {setting} on {threads} thread(s) failed: {tail}")
    row: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return row


def find_openfhe_python(given: str | None) -> str | None:
    candidates = [given] if given else [shutil.which("python3.10")]
    for py in candidates:
        if py and subprocess.run([py, "-c", "import openfhe"], capture_output=True).returncode == 0:
            return py
    return None


def fmt(row: dict[str, Any], one: dict[str, Any] | None) -> str:
    speedup = f"{one['seconds'] / row['seconds']:.2f}x" if one and row is not one else ""
    mem = row["key_gb_memory"]
    return (
        f"| {row['library']} {row['setting']} | {row['slots']} | {row['threads']} | "
        f"{row['seconds']:.2f} {speedup} | {row['mean_bits']:.1f} / {row['min_bits']:.1f} | "
        f"{row['failure']} | {row['levels_left']} / {row['bits_left']:.0f} | "
        f"{'-' if mem is None else f'{mem:.2f}'} / {row['key_gb_serialized']:.2f} | "
        f"{row['peak_gb']:.2f} | {row['setup_s']:.1f} / {row['keygen_s']:.1f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", default=",".join([*PRIVOPT_SETTINGS, *OPENFHE_SETTINGS]))
    parser.add_argument("--threads", default="1,2", help="thread counts, comma-separated")
    parser.add_argument("--runs", type=int, default=3, help="timed bootstraps after the warm-up")
    parser.add_argument("--openfhe-python", help="a CPython 3.10 that imports openfhe")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--worker", choices=["privopt", "openfhe"], help=argparse.SUPPRESS)
    parser.add_argument("--setting", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")

    if args.worker:
        worker = privopt_worker if args.worker == "privopt" else openfhe_worker
        print(json.dumps(worker(args.setting, int(args.threads), args.runs)))
        return

    settings = [s.strip() for s in args.settings.split(",") if s.strip()]
    unknown = [s for s in settings if s not in PRIVOPT_SETTINGS and s not in OPENFHE_SETTINGS]
    if unknown:
        parser.error(f"unknown settings {unknown}; known: {[*PRIVOPT_SETTINGS, *OPENFHE_SETTINGS]}")
    threads = [int(t) for t in args.threads.split(",")]
    if any(t < 1 for t in threads):
        parser.error("--threads must be positive")
    ofhe = find_openfhe_python(args.openfhe_python)
    if ofhe is None and any(s in OPENFHE_SETTINGS for s in settings):
        print(
            "OpenFHE skipped: no CPython 3.10 that imports openfhe (python3.10 -m venv /tmp/ofhe "
            "&& /tmp/ofhe/bin/pip install openfhe numpy, then --openfhe-python /tmp/ofhe/bin/python)",
            file=sys.stderr,
        )
        settings = [s for s in settings if s not in OPENFHE_SETTINGS]

    print(
        f"{os.cpu_count()} cores; {args.runs} timed bootstraps per row after a warm-up", flush=True
    )
    print(
        "| setting | slots | threads | s / bootstrap (vs 1 thread) | bits mean / min | failure | "
        "levels / bits left | keys GB memory / serialized | peak GB | setup / keygen s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|", flush=True)
    rows = []
    for setting in settings:
        library, python = (
            ("openfhe", ofhe) if setting in OPENFHE_SETTINGS else ("privopt", sys.executable)
        )
        first = None
        for t in threads:
            row = run_worker(str(python), library, setting, t, args.runs)
            first = first or row
            rows.append(row)
            print(fmt(row, first), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
