"""The model and the data: a small CNN, and MNIST read from the IDX files `privopt data fetch
mnist` downloads (nothing is downloaded at run time)."""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn


class Net(nn.Module):
    """Two 5×5 convolutions with max-pooling, then a linear layer: 5 994 parameters."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 5)
        self.conv2 = nn.Conv2d(8, 16, 5)
        self.fc = nn.Linear(16 * 4 * 4, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = nn.functional.max_pool2d(nn.functional.relu(self.conv1(x)), 2)
        x = nn.functional.max_pool2d(nn.functional.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def _data_dir(run_config: Mapping[str, Any]) -> Path:
    return Path(os.environ.get("PRIVOPT_DATA") or str(run_config.get("data-dir", "data")))


@functools.lru_cache(maxsize=4)
def _mnist(folder: str, split: str) -> tuple[torch.Tensor, torch.Tensor]:
    base = Path(folder) / "mnist"
    images, labels = base / f"{split}-images-idx3-ubyte", base / f"{split}-labels-idx1-ubyte"
    if not images.is_file() or not labels.is_file():
        raise FileNotFoundError(
            f"MNIST is not in {base}: run `privopt data fetch mnist` (or set data-dir / PRIVOPT_DATA)"
        )
    x = np.frombuffer(images.read_bytes(), dtype=np.uint8, offset=16).reshape(-1, 1, 28, 28)
    y = np.frombuffer(labels.read_bytes(), dtype=np.uint8, offset=8)
    features = (torch.from_numpy(x.astype(np.float32)) / 255.0 - 0.1307) / 0.3081
    return features, torch.from_numpy(y.astype(np.int64))


def load_partition(
    partition_id: int, num_partitions: int, run_config: Mapping[str, Any]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Client ``partition_id``'s ``examples-per-client`` training examples: a disjoint slice of
    a seeded shuffle of the 60 000."""
    x, y = _mnist(str(_data_dir(run_config)), "train")
    n = int(run_config.get("examples-per-client", 2000))
    if n * num_partitions > len(x):
        raise ValueError(f"{num_partitions} clients × {n} examples exceed MNIST's {len(x)}")
    order = np.random.default_rng(int(run_config.get("seed", 0))).permutation(len(x))
    mine = torch.from_numpy(order[partition_id * n : (partition_id + 1) * n])
    return x[mine], y[mine]


def load_test(run_config: Mapping[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``test-examples`` of MNIST's test set."""
    x, y = _mnist(str(_data_dir(run_config)), "t10k")
    n = int(run_config.get("test-examples", 2000))
    return x[:n], y[:n]
