"""Encrypted averaging of a whole model update, privopt against TenSEAL done NVFlare's way,
in one run on this machine (issue 50).

- **privopt**: threshold xMK-CKKS, ``n = 4096`` with one 60-bit prime (log Q = 60, within the
  HE standard's 128-bit bound of 109), Λ = 2^49, ``n`` values per ciphertext in the
  coefficients, each client's update encrypted under its own secret with ``c1`` expanded from
  the round's seed (one polynomial per chunk on the wire). Every client holds only its own
  secret and Shamir shares of the others'; any ``t`` of them (default two thirds) decrypt the
  sum, so one client dropping after its upload costs nothing. No party, the server
  included, holds a key that decrypts one client's update.
- **TenSEAL, NVFlare's way**: one CKKS context whose secret key every client shares (NVFlare's
  ``he_context`` provisioning: ``poly_modulus_degree = 8192``, ``coeff_mod_bit_sizes = [60, 40,
  40]``, scale 2^40), each client's update encrypted as ``CKKSVector`` chunks of 4096 slots and
  serialized; the server deserializes and adds them; a client decrypts the sum with the shared
  secret key.

Per round, with ``--clients`` clients and one of them gone after uploading: seconds per role and
the round's critical path (clients work in parallel in a deployment: one client's encryption,
the server's sum, one member's share, the server's decryption), bytes per client up and down,
and the largest error of the average against its largest entry. Run::

    python python/bench/he_model_vs_tenseal.py                # 11 M values (ResNet-18's size)
    python python/bench/he_model_vs_tenseal.py --values 1e6   # quicker
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from privopt import ckks
from privopt.ckks import multiparty as mk
from privopt.protocols import eezofl


@dataclass
class Result:
    name: str
    client_s: float = 0.0  # one client's encryption (mean)
    server_sum_s: float = 0.0
    share_s: float = 0.0  # one member's decryption share (mean); 0 for TenSEAL
    decrypt_s: float = 0.0  # the server's fusion (privopt) or a client's decryption (TenSEAL)
    up_bytes: int = 0  # per client: upload (+ its share)
    down_bytes: int = 0  # per client: what it receives back
    max_rel_error: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def round_s(self) -> float:
        return self.client_s + self.server_sum_s + self.share_s + self.decrypt_s


def privopt_round(
    updates: list[npt.NDArray[np.float32]], gone: int, distance_bits: float | None = None
) -> tuple[Result, np.ndarray]:
    n = len(updates)
    if distance_bits is None:
        params = ckks.Params(4096, [60], scale_bits=49)
        name = "60-bit Q, σ* = 2^20"
    else:
        bits = mk.model_smudging_bits(
            ckks.Params(4096, [60, 45], scale_bits=49), len(updates[0]), n, distance_bits
        )
        params = ckks.Params(4096, [60, 45], scale_bits=49, smudging_bits=bits)
        name = f"105-bit Q, σ* = 2^{bits:.1f} for 2^-{distance_bits:g}"
    crs = mk.CommonPoly(params, os.urandom(32))
    ids = list(range(n))
    parties = [mk.Party(i, params, crs) for i in ids]
    t = eezofl.default_threshold(n)
    committee = mk.Committee(t, ids)
    dealt = [p.deal(committee, 0) for p in parties]
    members = [
        mk.ThresholdParty.from_shares(p, committee, 0, [d[p.id] for d in dealt]) for p in parties
    ]
    codec = mk.ModelCodec(params, len(updates[0]), clip=1.0)
    r = Result(f"privopt threshold xMK-CKKS ({t} of {n}, n=4096, {name})")
    total: mk.EncryptedModel | None = None
    for p, u in zip(parties, updates, strict=True):
        start = time.perf_counter()
        blob = codec.encrypt_secret(p, committee, 0, u).to_bytes()
        r.client_s += (time.perf_counter() - start) / n
        r.up_bytes = len(blob)
        start = time.perf_counter()
        m = mk.EncryptedModel.from_bytes(params, blob)
        total = m if total is None else total + m
        r.server_sum_s += time.perf_counter() - start
    assert total is not None
    start = time.perf_counter()
    alive = [i for i in ids if i != gone]
    active = mk.ActiveSet.for_model(committee, total, alive[:t])
    sum_bytes = total.to_bytes()
    r.server_sum_s += time.perf_counter() - start
    shares = []
    for j in active.members:
        start = time.perf_counter()
        received = mk.EncryptedModel.from_bytes(params, sum_bytes)
        shares.append(members[j].partial_decrypt_model(received, active))
        r.share_s += (time.perf_counter() - start) / t
    r.up_bytes += len(shares[0])
    r.down_bytes = len(sum_bytes) + len(active.to_bytes(params))
    start = time.perf_counter()
    average = codec.average(total, active, shares)
    r.decrypt_s = time.perf_counter() - start
    r.notes.append(f"client {gone} gone after uploading; {t} of {n} decrypt")
    return r, average


def tenseal_round(updates: list[npt.NDArray[np.float32]]) -> tuple[Result, np.ndarray]:
    import tenseal as ts

    n = len(updates)
    ctx = ts.context(
        ts.SCHEME_TYPE.CKKS, poly_modulus_degree=8192, coeff_mod_bit_sizes=[60, 40, 40]
    )
    ctx.global_scale = 2**40
    server_ctx = ts.context_from(ctx.serialize(save_secret_key=False))
    slots = 4096
    length = len(updates[0])
    r = Result("TenSEAL CKKSVector chunks, one shared secret (NVFlare's way)")
    total: list[ts.CKKSVector] | None = None
    for u in updates:
        start = time.perf_counter()
        blobs = [
            ts.ckks_vector(ctx, u[i : i + slots].tolist()).serialize()
            for i in range(0, length, slots)
        ]
        r.client_s += (time.perf_counter() - start) / n
        r.up_bytes = sum(len(b) for b in blobs)
        start = time.perf_counter()
        vecs = [ts.ckks_vector_from(server_ctx, b) for b in blobs]
        if total is None:
            total = vecs
        else:
            for acc, v in zip(total, vecs, strict=True):
                acc.add_(v)
        r.server_sum_s += time.perf_counter() - start
    assert total is not None
    start = time.perf_counter()
    sums = [v.serialize() for v in total]
    r.server_sum_s += time.perf_counter() - start
    r.down_bytes = sum(len(b) for b in sums)
    start = time.perf_counter()
    parts = [np.asarray(ts.ckks_vector_from(ctx, b).decrypt()) for b in sums]
    average = np.concatenate(parts) / n
    r.decrypt_s = time.perf_counter() - start
    r.notes.append("every client holds the secret key: any client decrypts any other's upload")
    return r, average


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--values", type=float, default=11e6, help="values per update (11e6: ResNet-18)"
    )
    ap.add_argument("--clients", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--distance-bits",
        type=float,
        default=40.0,
        help="also run privopt with smudging sized for 2^-λ statistical distance (0: skip)",
    )
    a = ap.parse_args()
    d = int(a.values)
    rng = np.random.default_rng(a.seed)
    # Model updates: small weight deltas, as a round of SGD produces.
    updates = [rng.normal(0.0, 0.01, d).clip(-1, 1).astype(np.float32) for _ in range(a.clients)]
    want = np.mean(np.stack(updates).astype(np.float64), axis=0)
    scale = float(np.max(np.abs(want)))
    runs = [lambda: privopt_round(updates, gone=a.clients - 1)]
    if a.distance_bits > 0:
        runs.append(lambda: privopt_round(updates, a.clients - 1, a.distance_bits))
    runs.append(lambda: tenseal_round(updates))
    rows = []
    for run in runs:
        r, avg = run()
        r.max_rel_error = float(np.max(np.abs(avg[:d] - want))) / scale
        rows.append(r)
        print(f"[{r.name}] done in {r.round_s:.2f} s", flush=True)
    print(f"\n{a.clients} clients, {d:,} float32 values per update\n")
    ours, t = rows[:-1], rows[-1]
    heads = ["privopt, σ* = 2^20"] + [f"privopt, 2^-{a.distance_bits:g}"] * (len(ours) - 1)
    print(f"| | {' | '.join(heads)} | TenSEAL (NVFlare's way) | ratio{'s' * (len(ours) > 1)} |")
    print("|---|" + "---|" * (len(ours) + 2))

    def line(what: str, xs: list[float], y: float | None, fmt: str) -> None:
        cells = " | ".join(f"{x:{fmt}}" for x in xs)
        if y is None:
            print(f"| {what} | {cells} | — | |")
            return
        ratios = " / ".join(f"{y / x:.1f}×" for x in xs)
        print(f"| {what} | {cells} | {y:{fmt}} | {ratios} |")

    line("one client's encryption (s)", [p.client_s for p in ours], t.client_s, ".2f")
    line("server: deserialize and sum (s)", [p.server_sum_s for p in ours], t.server_sum_s, ".2f")
    line("one member's decryption share (s)", [p.share_s for p in ours], None, ".2f")
    line("decryption of the sum (s)", [p.decrypt_s for p in ours], t.decrypt_s, ".2f")
    line("**round, critical path (s)**", [p.round_s for p in ours], t.round_s, ".2f")
    line("bytes up per client (MB)", [p.up_bytes / 1e6 for p in ours], t.up_bytes / 1e6, ".1f")
    line(
        "bytes down per client (MB)", [p.down_bytes / 1e6 for p in ours], t.down_bytes / 1e6, ".1f"
    )
    line(
        "**bytes per client per round (MB)**",
        [(p.up_bytes + p.down_bytes) / 1e6 for p in ours],
        (t.up_bytes + t.down_bytes) / 1e6,
        ".1f",
    )
    errors = " | ".join(f"{p.max_rel_error:.1e}" for p in ours)
    print(f"| max error / max |average| | {errors} | {t.max_rel_error:.1e} | |")
    for r in rows:
        for note in r.notes:
            print(f"\n- {r.name}: {note}")


if __name__ == "__main__":
    main()
