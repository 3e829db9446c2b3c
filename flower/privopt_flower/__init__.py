"""privopt on Flower: the ServerApp and ClientApp that run privopt's protocol roles across
processes and machines, with privopt's messages carried as bytes in Flower messages.

The method logic lives in :mod:`privopt_flower.methods` and talks to a
:class:`~privopt_flower.transport.Federation`: Flower's Grid in deployment and simulation, or an
in-process loopback (:mod:`privopt_flower.inprocess`) that runs the very same client code
without Flower, for tests and for the in-process reference time.

Your own app on the methods (PyTorch model, your data): :class:`privopt_flower.apps.Task`,
:func:`client_app`, :func:`server_app` (they need ``torch``; imported on first use). A run
returns a :class:`RunResult`, whose ``outcome`` is the method's own :class:`Outcome`.
"""

from __future__ import annotations

from typing import Any

from .results import (
    DomeOutcome,
    DpfheOutcome,
    EezoflOutcome,
    Outcome,
    PdsgdOutcome,
    RunResult,
    ScalarFlOutcome,
)

_APPS = ("Task", "client_app", "server_app")
__all__ = [
    *_APPS,
    "DomeOutcome",
    "DpfheOutcome",
    "EezoflOutcome",
    "Outcome",
    "PdsgdOutcome",
    "RunResult",
    "ScalarFlOutcome",
]


def __getattr__(name: str) -> Any:
    if name in _APPS:
        try:
            from . import apps
        except AttributeError as e:  # else `from privopt_flower import x` hides the cause
            raise ImportError(f"privopt_flower.apps could not be imported: {e}") from e
        return getattr(apps, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
