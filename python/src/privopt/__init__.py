"""privopt: private, communication-efficient distributed optimization, in Rust.

Submodules:

- :mod:`privopt.ckks` — CKKS (leveled, 128-bit parameters) and :mod:`privopt.ckks.multiparty`
  (xMK-CKKS: per-party keys, encrypted sums, partial decryption and fusion).
- :mod:`privopt.paillier` — Paillier with batch operations on numpy arrays.
- :mod:`privopt.secagg` — SecAgg+ client and server state machines driven by bytes.
- :mod:`privopt.dp` — the privacy accountant (ε from σ and back).
- :mod:`privopt.ledger` — a per-client privacy ledger (ε of each client over a run).
- :mod:`privopt.dpfhe` — DP logistic regression, plaintext or trained on CKKS ciphertexts
  (``LogisticRegression`` with ``fit`` / ``predict``).
- :mod:`privopt.protocols` — the federated methods' roles (scalar-only FL …) driven by bytes.
- :mod:`privopt.problem` — the data, client partition and model of a config's tables.
- :mod:`privopt.text` — the WordPiece tokenizer of privopt's MiniLM runs.
- :mod:`privopt.torch` — the methods on any PyTorch model (optional extra ``[torch]``).
- :mod:`privopt.errors` — the exceptions.
"""

from __future__ import annotations

from types import ModuleType

from . import errors  # noqa: F401  (the native module raises these classes)
from ._native import __version__

__all__ = [
    "__version__",
    "errors",
    "ckks",
    "paillier",
    "secagg",
    "dp",
    "ledger",
    "dpfhe",
    "protocols",
    "problem",
    "text",
]


def __getattr__(name: str) -> ModuleType:  # lazy submodules: `import privopt` stays cheap
    import importlib

    # `torch` is not in __all__: `from privopt import *` must not import PyTorch.
    if name in {
        "ckks",
        "paillier",
        "secagg",
        "dp",
        "ledger",
        "dpfhe",
        "protocols",
        "problem",
        "text",
        "torch",
    }:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
