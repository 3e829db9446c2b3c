"""The data and model every role builds from the run config, once per process."""

from __future__ import annotations

import functools
import json
from typing import Any

import numpy as np
import numpy.typing as npt
from privopt.problem import Problem

from .config import Settings


@functools.lru_cache(maxsize=4)
def _build(data: str, model: str, data_dir: str, seed: int) -> Problem:
    return Problem(json.loads(data), json.loads(model), data_dir, seed)


def problem(s: Settings) -> Any:
    """The run's problem: the user's model and data when the app was built with them
    (:class:`privopt_flower.task.TorchTask`, the same interface), else ``[data]`` split into
    one partition per client and ``[model]``."""
    if s.task is not None:
        return s.task
    data, model = s.problem_tables()
    return _build(
        json.dumps(data, sort_keys=True), json.dumps(model, sort_keys=True), s.data_dir, s.seed
    )


def batch(
    p: Any, s: Settings, party: int, round_: int, step: int, size: int
) -> npt.NDArray[np.uint64]:
    """Party ``party``'s minibatch of ``size`` examples for (round, step), drawn from the run
    seed so every transport draws the same one (all its examples if it has fewer)."""
    own: npt.NDArray[np.uint64] = p.client_indices(party)
    if size >= len(own):
        return own
    rng = np.random.default_rng([s.seed, round_, party, step])
    return np.sort(rng.choice(own, size=size, replace=False))
