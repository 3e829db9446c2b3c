"""Paillier decentralized SGD (the Paillier D-SGD paper): the agents' pairwise encrypted exchange.

Agents on a connected graph each own a Paillier key pair. For an edge (i, j) in an iteration,
i sends its negated quantized state encrypted under its own key, j raises the sum with its own
state to its private weight under i's key, and i decrypts ``w_ij·w_ji·(x_j − x_i)``: neither
side learns the other's state or weight, and a relay (a server, a Flower link) sees only
ciphertexts. The consensus step of an iteration adds these terms over i's neighbours, and each
agent then moves by :class:`Schedule`'s attenuated mixing term and private random stepsize.
"""

from __future__ import annotations

from .._native import pdsgd as _native

Agent = _native.Agent
Schedule = _native.Schedule
DEFAULTS: dict[str, float] = dict(_native.DEFAULTS)

__all__ = ["DEFAULTS", "Agent", "Schedule"]
