"""CKKS bootstrapping from Python: a ciphertext that has used up its levels comes back to a
fresh level with its slots, at 128-bit security (the "n15" preset: n = 2^15, 16 384 slots).

    python examples/ckks_bootstrap.py            # n15: about 15 s and 2.8 GB in all
    python examples/ckks_bootstrap.py --preset n16   # n = 2^16: about a minute and 6 GB
    python examples/ckks_bootstrap.py --preset n16-stc-first   # SlotsToCoeffs first: inputs at level 3

The secret key's owner makes the keys; whoever bootstraps needs only those keys (bytes).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from privopt import ckks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", choices=["n15", "n16", "n16-stc-first"], default="n15")
    args = parser.parse_args()

    start = time.perf_counter()
    boot = ckks.Bootstrapper(args.preset)
    print(f"{boot} (transforms ready in {time.perf_counter() - start:.1f} s)")
    ctx = boot.context

    # The key owner: a secret key and the bootstrapping keys (``keys.to_bytes()`` and
    # ``BootstrapKeys.from_bytes(boot, data)`` carry them to whoever bootstraps).
    sk = ckks.SecretKey.generate(ctx)
    start = time.perf_counter()
    keys = boot.keys(sk)
    print(f"keys: {keys.nbytes / 2**30:.2f} GiB in memory, {time.perf_counter() - start:.1f} s")

    # A computation that has used up its levels: encrypt at the bootstrapper's input level
    # (0, or 3 when SlotsToCoeffs runs first and needs those levels).
    values = np.cos(np.linspace(0.0, 6.0, boot.slots))
    ct = sk.encrypt(values, level=boot.input_level)
    start = time.perf_counter()
    fresh = boot.bootstrap(ct, keys)
    seconds = time.perf_counter() - start
    error = float(np.abs(sk.decrypt(fresh) - values).max())
    print(
        f"bootstrap: level {ct.level} -> {fresh.level} in {seconds:.2f} s, "
        f"max error {error:.1e} ({-np.log2(error):.1f} bits)"
    )
    assert fresh.level == boot.output_level and -np.log2(error) > 12

    # It computes again at the new level.
    doubled = sk.decrypt(fresh * 2.0 + 1.0)
    assert np.abs(doubled - (2 * values + 1)).max() < 4 * error
    print(f"and computes again: 2x + 1 at level {(fresh * 2.0).level}")


if __name__ == "__main__":
    main()
