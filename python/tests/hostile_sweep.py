"""Calls every public function, constructor and method of privopt with hostile values, one
argument at a time (the others plausible), and prints one JSON line per violation: a
``PanicException``, an exception of another kind than privopt's own errors, ``TypeError`` or
``OverflowError`` (what PyO3 raises for an int that does not fit the parameter's machine
type), a call slower than the time limit, or one that grew the peak memory by more than the
memory limit. Run by ``test_hostile.py`` in a child process, so that a hang or an abort is
caught there; ``START`` lines name the call in progress.
"""

from __future__ import annotations

import inspect
import json
import resource
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from privopt import ckks, dp, paillier, secagg
from privopt.ckks import multiparty as mk
from privopt.errors import PrivoptError
from privopt.protocols import dome, dpfhe, eezofl, pdsgd, scalar_fl

SECONDS = 10.0
MEMORY_KB = 1 << 20  # 1 GiB, in ru_maxrss's kilobytes

HOSTILE: list[tuple[str, Any]] = [
    ("nan", float("nan")),
    ("inf", float("inf")),
    ("-inf", float("-inf")),
    ("-1", -1),
    ("0", 0),
    ("1e5", 10**5),
    ("1e6", 10**6),
    ("1e9", 10**9),
    ("2**40", 2**40),
    ("2**64", 2**64),
    ("10**30", 10**30),
    ("empty bytes", b""),
    ("junk bytes", b"\xff" * 64),
    ("empty array", np.array([], dtype=np.float64)),
    ("nan array", np.array([1.0, np.nan, 2.0])),
    ("inf array", np.array([np.inf, 1.0])),
    ("huge array values", np.full(4, 1e308)),
    ("strings", np.array(["a", "b"])),
    ("0-d", np.array(1.5)),
    ("non-contiguous", np.arange(12, dtype=np.float64)[::3]),
    ("uint32 array", np.arange(4, dtype=np.uint32)),
    ("object", object()),
    ("str", "x"),
    ("None", None),
]

ALLOWED = (PrivoptError, TypeError, OverflowError)


def plausible() -> dict[str, Any]:
    """One workable value per parameter name used across the API."""
    params = ckks.Params(4096, [40, 30], special_bits=[40], scale_bits=30, insecure=True)
    ctx = ckks.Context(params)
    sk = ckks.SecretKey.generate(ctx)
    crs = mk.CommonPoly(params, bytes(32))
    device = eezofl.Device(0, params, crs)
    pair = paillier.KeyPair.generate(1024, insecure=True)
    graph = secagg.Graph.complete(3)
    spec = scalar_fl.Spec(0.1)
    return {
        "n": 8,
        "prime_bits": [30, 30],
        "special_bits": [30],
        "scale_bits": 25,
        "insecure": True,
        "params": params,
        "ctx": ctx,
        "crs": crs,
        "seed": bytes(32),
        "id": 0,
        "members": [0],
        "key_shares": [device.key_share],
        "values": np.array([0.5, -0.25]),
        "x": np.array([0.5, -0.25]),
        "length": 2,
        "level": 0,
        "rotations": [1],
        "clip": 1.0,
        "max_summands": 4,
        "session": bytes(16),
        "round": 0,
        "neighbours": [1, 2],
        "threshold": 2,
        "vector_len": 4,
        "graph": graph,
        "degree": 2,
        "clients": 3,
        "dropout_rate": 0.1,
        "corrupt_rate": 0.1,
        "sigma": 1.0,
        "steps": 10,
        "delta": 1e-5,
        "epsilon": 1.0,
        "q": 0.1,
        "bits": 1024,
        "spec": spec,
        "x0": np.zeros(3),
        "w0": np.zeros(4),
        "k": 2,
        "noise_total": 1.0,
        "lr": 0.1,
        "d": 2,
        "batch": 2,
        "frac_bits": 8,
        "per_round": 2,
        "summands": 2,
        "threads": 1,
        "public_key": pair.public_key,
        "secret": sk,
    }


def instances() -> Iterator[tuple[str, Any]]:
    """A live object of every public class, built small."""
    p = plausible()
    params, ctx, crs = p["params"], p["ctx"], p["crs"]
    sk = p["secret"]
    pk = sk.public_key()
    yield "ckks.Params", params
    yield "ckks.Context", ctx
    yield "ckks.SecretKey", sk
    yield "ckks.PublicKey", pk
    yield "ckks.RelinKey", sk.relin_key()
    yield "ckks.GaloisKeys", sk.galois_keys([1])
    yield "ckks.Ciphertext", pk.encrypt([1.0, 2.0])
    yield "ckks.Evaluator", ckks.Evaluator(ctx, relin_key=sk.relin_key(), threads=1)
    parties = [mk.Party(i, params, crs) for i in range(2)]
    key = mk.CollectivePublicKey.aggregate(
        params, crs, [0, 1], 0, [q.public_key_share(0) for q in parties]
    )
    yield "mk.CommonPoly", crs
    yield "mk.Party", parties[0]
    yield "mk.CollectivePublicKey", key
    yield "mk.Ciphertext", key.encrypt_vector([1.0, 2.0])
    pair = paillier.KeyPair.generate(1024, insecure=True)
    yield "paillier.KeyPair", pair
    yield "paillier.PublicKey", pair.public_key
    yield "paillier.EncryptedArray", pair.public_key.encrypt(np.array([1, 2]))
    yield "secagg.GraphParameters", secagg.parameters(10)
    yield "secagg.Graph", p["graph"]
    yield "secagg.Quantizer", secagg.Quantizer(1.0, 4)
    yield "secagg.Client", secagg.Client(bytes(16), 0, 0, [1, 2], 2, 4)
    yield "secagg.Server", secagg.Server(bytes(16), 0, p["graph"], 2, 4)
    dev = eezofl.Device(0, params, crs)
    yield "eezofl.Device", dev
    yield "eezofl.Server", eezofl.Server(params, crs, [0], [dev.key_share])
    yield "dome.Server", dome.Server(np.zeros(4), 2, 1.0, 1.0)
    spec = p["spec"]
    yield "scalar_fl.Spec", spec
    yield "scalar_fl.Server", scalar_fl.Server(spec, np.zeros(3), 3)
    yield "scalar_fl.Client", scalar_fl.Client(0, spec, np.zeros(3))
    yield "pdsgd.Agent", pdsgd.Agent(0, bits=1024, insecure=True)
    yield "dpfhe.Circuit", dpfhe.Circuit(ctx, 2, 2, 0.1)


def parameters(fn: Callable[..., Any]) -> list[tuple[str, Any]] | None:
    """The parameters of a callable (PyO3 gives ``__text_signature__``), each with its default
    (``inspect.Parameter.empty`` if it has none, or none Python can show)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    return [
        (name, q.default)
        for name, q in sig.parameters.items()
        if name not in ("self", "cls") and q.kind in (q.POSITIONAL_ONLY, q.POSITIONAL_OR_KEYWORD)
    ]


def targets() -> Iterator[tuple[str, Callable[..., Any]]]:
    """Module functions, constructors, static methods, and methods of the live instances."""
    for module in (ckks, mk, paillier, secagg, dp, dome, dpfhe, eezofl, pdsgd, scalar_fl):
        for name, obj in sorted(vars(module).items()):
            if name.startswith("_"):
                continue
            if inspect.isbuiltin(obj) or (
                inspect.isfunction(obj) and obj.__module__.startswith("privopt")
            ):
                yield f"{module.__name__}.{name}", obj
            elif inspect.isclass(obj) and obj.__module__.startswith("privopt"):
                yield f"{module.__name__}.{name}", obj
                for attr, member in vars(obj).items():
                    if not attr.startswith("_") and isinstance(member, staticmethod | classmethod):
                        yield f"{module.__name__}.{name}.{attr}", getattr(obj, attr)
    for label, inst in instances():
        for attr in sorted(dir(type(inst))):
            if attr.startswith("_") and attr not in (
                "__add__",
                "__mul__",
                "__sub__",
                "__getitem__",
            ):
                continue
            member = inspect.getattr_static(type(inst), attr)
            if isinstance(member, staticmethod | classmethod | property) or not callable(member):
                continue
            yield f"{label}.{attr}", getattr(inst, attr)


def sweep() -> Iterator[dict[str, Any]]:
    base = plausible()
    for label, fn in targets():
        params = parameters(fn)
        if params is None:
            params = [("arg", inspect.Parameter.empty)]
        for i, (name, _) in enumerate(params):
            for hostile_name, hostile in HOSTILE:
                # The others: a workable value, else the default, else hostile too.
                args = [
                    base.get(n, hostile if d is inspect.Parameter.empty else d) for n, d in params
                ]
                args[i] = hostile
                call = f"{label}({name}={hostile_name})"
                print("START", call, flush=True)
                before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                start = time.monotonic()
                outcome = "ok"
                try:
                    fn(*args)
                except ALLOWED:
                    outcome = "refused"
                except IndexError:
                    # Python's own contract for an index out of range.
                    if not label.endswith("__getitem__"):
                        raise
                    outcome = "refused"
                except BaseException as e:  # the point is to see every kind
                    if isinstance(e, KeyboardInterrupt):
                        raise
                    yield {"call": call, "problem": f"{type(e).__module__}.{type(e).__name__}: {e}"}
                    continue
                elapsed = time.monotonic() - start
                grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
                if elapsed > SECONDS:
                    yield {"call": call, "problem": f"took {elapsed:.1f} s ({outcome})"}
                if grown > MEMORY_KB:
                    yield {"call": call, "problem": f"grew peak memory by {grown // 1024} MB"}


def main() -> None:
    # An unbounded allocation fails here (an abort the parent reports with the call in
    # progress) instead of exhausting the machine.
    limit = 6 << 30
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    for violation in sweep():
        print("VIOLATION", json.dumps(violation), flush=True)
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
