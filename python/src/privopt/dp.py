"""The privacy accountant of Gaussian-mechanism training: ε from σ, and σ from ε.

>>> from privopt import dp
>>> round(dp.epsilon(sigma=1.1, steps=10_000, delta=1e-5, q=0.01), 3)  # doctest: +SKIP
"""

from __future__ import annotations

from ._native import dp as _native

epsilon = _native.epsilon
noise_multiplier = _native.noise_multiplier

__all__ = ["epsilon", "noise_multiplier"]
