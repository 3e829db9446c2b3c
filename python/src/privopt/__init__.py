"""privopt: private, communication-efficient distributed optimization, in Rust.

Submodules:

- :mod:`privopt.ckks` — CKKS (leveled, 128-bit parameters) and :mod:`privopt.ckks.multiparty`
  (xMK-CKKS: per-party keys, encrypted sums, partial decryption and fusion).
- :mod:`privopt.paillier` — Paillier with batch operations on numpy arrays.
- :mod:`privopt.secagg` — SecAgg+ client and server state machines driven by bytes.
- :mod:`privopt.dp` — the privacy accountant (ε from σ and back).
- :mod:`privopt.protocols` — the federated methods' roles (scalar-only FL …) driven by bytes.
- :mod:`privopt.problem` — the data, client partition and model of a config's tables.
- :mod:`privopt.errors` — the exceptions.
"""

from __future__ import annotations

from . import errors  # noqa: F401  (the native module raises these classes)
from ._native import __version__

__all__ = ["__version__", "errors", "ckks", "paillier", "secagg", "dp", "protocols", "problem"]


def __getattr__(name: str):  # lazy submodules: `import privopt` stays cheap
    import importlib

    if name in {"ckks", "paillier", "secagg", "dp", "protocols", "problem"}:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
