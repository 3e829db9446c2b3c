"""The clients' updates: a public function of (seed, partition, round), so the server can
check the encrypted average against the plain one in this example (a real app's updates
come from training and are never seen)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


def update(
    seed: int, partition: int, rnd: int, length: int, clip: float
) -> npt.NDArray[np.float32]:
    """A model update: small weight deltas, as a round of SGD produces."""
    rng = np.random.default_rng([seed, partition, rnd])
    return rng.normal(0.0, 0.01, length).clip(-clip, clip).astype(np.float32)
