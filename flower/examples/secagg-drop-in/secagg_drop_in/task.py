"""The learning task: logistic regression on privopt's built-in synthetic data (nothing is
downloaded), each SuperNode training on its partition."""

from __future__ import annotations

from functools import cache

import numpy as np
from privopt.problem import Problem


@cache
def problem(clients: int) -> Problem:
    """The data and model every node and the server build alike (same seed)."""
    return Problem(
        {"dataset": "synthetic_logistic", "clients": clients, "dim": 20},
        {"kind": "logistic"},
        seed=0,
    )


def local_train(
    w: np.ndarray, clients: int, partition: int, steps: int, lr: float
) -> tuple[np.ndarray, int]:
    """``steps`` full-batch gradient steps on the partition; the new weights and its size."""
    p = problem(clients)
    idx = p.client_indices(partition)
    for _ in range(steps):
        _, grad = p.loss_grad(w, idx)
        w = w - lr * np.asarray(grad)
    return w, len(idx)
