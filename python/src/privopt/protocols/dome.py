"""DOME (the DOME paper): DP federated Adam on a learned low-rank sketch, summed with SecAgg+.

A round: the :class:`Server` opens it (a broadcast and the sketch's chunks, as bytes); each
participant computes its gradient with its own model code and calls :func:`release`, whose
``uint32`` output is its SecAgg+ input (:mod:`privopt.secagg`, vector length
:attr:`Server.dim`); the server closes the round with the SecAgg+ sum. The server sees only the
noised sum of sketched, clipped gradients.
"""

from __future__ import annotations

from .._native import dome as _native

Server = _native.Server
release = _native.client_release
check_broadcast = _native.check_broadcast
# The method's defaults, from the Rust crate (the same the simulation and the Flower app use).
DEFAULTS: dict[str, float] = dict(_native.DEFAULTS)

__all__ = ["DEFAULTS", "Server", "check_broadcast", "release"]
