"""A user's PyTorch model and data as the task the methods train: the same interface as
privopt's built-in :class:`privopt.problem.Problem` (flat ``float64`` parameter vectors, minibatch
indices per party), so every method's Flower driver runs on it unchanged.

The model comes from ``model_fn()`` (called under ``torch.manual_seed(run seed)``, so every
party and the server build the same initial weights), the data of party ``i`` from
``data_fn(i, num_partitions, run_config)``, the test set (for evaluation) from
``test_fn(run_config)``. Batches are indices into a party's own data; a party's index ``j`` is
carried as ``i·2^40 + j`` so one index type serves every party of an in-process run.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt
import torch
from privopt.torch import ParameterSet, Selection
from privopt.torch.losses import evaluate_loss, loss_and_gradient

from .config import ConfigError

#: A dataset: a ``TensorDataset``, a tuple of tensors of one length (features, labels), or any
#: map-style ``torch.utils.data.Dataset``.
Data: TypeAlias = torch.utils.data.Dataset[Any] | Sequence[torch.Tensor]
ModelFn = Callable[[], torch.nn.Module]
DataFn = Callable[[int, int, Mapping[str, Any]], Data]
TestFn = Callable[[Mapping[str, Any]], Data]
LossFn = Callable[[torch.nn.Module, Any], torch.Tensor]
EvaluateFn = Callable[[torch.nn.Module], tuple[float, float | None]]

STRIDE = 1 << 40
EVAL_BATCH = 1000


def cross_entropy(module: torch.nn.Module, batch: Any) -> torch.Tensor:
    """The default loss: cross-entropy of the module's logits on ``(features, labels)``."""
    x, y = batch
    return torch.nn.functional.cross_entropy(module(x), y)


def _tensors(data: Data, where: str) -> tuple[torch.Tensor, ...] | torch.utils.data.Dataset[Any]:
    if isinstance(data, torch.utils.data.TensorDataset):
        return tuple(data.tensors)
    if isinstance(data, (tuple, list)) and data and all(isinstance(t, torch.Tensor) for t in data):
        sizes = {len(t) for t in data}
        if len(sizes) != 1:
            raise ConfigError(f"{where}: the tensors have different lengths {sorted(sizes)}")
        return tuple(data)
    if isinstance(data, torch.utils.data.Dataset) and hasattr(data, "__len__"):
        return data
    raise ConfigError(
        f"{where} must return a TensorDataset, a tuple of tensors or a map-style Dataset, "
        f"not {type(data).__name__}"
    )


def _length(data: tuple[torch.Tensor, ...] | torch.utils.data.Dataset[Any]) -> int:
    return len(data[0]) if isinstance(data, tuple) else len(data)  # type: ignore[arg-type]


def _rows(data: tuple[torch.Tensor, ...] | torch.utils.data.Dataset[Any], idx: Any) -> Any:
    if isinstance(data, tuple):
        rows = torch.as_tensor(np.asarray(idx, dtype=np.int64))
        return tuple(t[rows] for t in data)
    items = [data[int(i)] for i in idx]
    return torch.utils.data.default_collate(items)


class TorchTask:
    """A PyTorch model and data in the shape the methods' drivers train (see the module doc)."""

    def __init__(
        self,
        model_fn: ModelFn,
        *,
        data_fn: DataFn | None = None,
        test_fn: TestFn | None = None,
        loss_fn: LossFn = cross_entropy,
        evaluate_fn: EvaluateFn | None = None,
        params: Selection = None,
        clients: int,
        run_config: Mapping[str, Any],
        seed: int,
    ) -> None:
        if not callable(model_fn):
            raise ConfigError("model_fn must be a callable returning a torch.nn.Module")
        self.model_fn, self.data_fn, self.test_fn = model_fn, data_fn, test_fn
        self.loss_fn, self.evaluate_fn = loss_fn, evaluate_fn
        self.select, self.clients, self.run_config, self.seed = params, clients, run_config, seed
        self.module = self._fresh()
        self.params = ParameterSet(self.module, params)

    def _fresh(self) -> torch.nn.Module:
        with torch.random.fork_rng():
            torch.manual_seed(self.seed)
            module = self.model_fn()
        if not isinstance(module, torch.nn.Module):
            raise ConfigError(f"model_fn returned {type(module).__name__}, not a torch.nn.Module")
        return module

    @property
    def num_params(self) -> int:
        return len(self.params)

    def init_params(self, seed: int) -> npt.NDArray[np.float64]:
        """The parameters ``model_fn`` builds under ``torch.manual_seed(seed)``."""
        if seed == self.seed:
            return ParameterSet(self._fresh(), self.select).to_numpy()
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            return ParameterSet(self.model_fn(), self.select).to_numpy()

    @functools.cache  # noqa: B019 (one task per run; the data is the point)
    def _party_data(self, party: int) -> tuple[torch.Tensor, ...] | torch.utils.data.Dataset[Any]:
        if self.data_fn is None:
            raise ConfigError("this side of the app has no data_fn (clients need one)")
        where = f"data_fn({party}, {self.clients})"
        data = _tensors(self.data_fn(party, self.clients, self.run_config), where)
        if _length(data) == 0:
            raise ConfigError(f"{where} returned no examples")
        if _length(data) >= STRIDE:
            raise ConfigError(f"{where} returned more than 2^40 examples")
        return data

    @functools.lru_cache(maxsize=1)  # noqa: B019
    def _test_data(self) -> tuple[torch.Tensor, ...] | torch.utils.data.Dataset[Any] | None:
        if self.test_fn is None:
            return None
        return _tensors(self.test_fn(self.run_config), "test_fn")

    def client_indices(self, party: int) -> npt.NDArray[np.uint64]:
        n = _length(self._party_data(party))
        return (np.uint64(party) * np.uint64(STRIDE) + np.arange(n, dtype=np.uint64)).astype(
            np.uint64
        )

    def _batch(self, idx: npt.ArrayLike) -> Any:
        codes = np.asarray(idx, dtype=np.uint64)
        parties = np.unique(codes // np.uint64(STRIDE))
        if parties.size != 1:
            raise ValueError(f"a batch spans parties {parties.tolist()}")
        data = self._party_data(int(parties[0]))
        return _rows(data, codes % np.uint64(STRIDE))

    def _at(self, w: npt.ArrayLike) -> torch.nn.Module:
        self.params.load(w)
        return self.module

    def loss(self, w: npt.ArrayLike, idx: npt.ArrayLike) -> float:
        return evaluate_loss(self.loss_fn, self._at(w), self._batch(idx))

    def loss_grad(
        self, w: npt.ArrayLike, idx: npt.ArrayLike
    ) -> tuple[float, npt.NDArray[np.float64]]:
        return loss_and_gradient(self.loss_fn, self._at(w), self.params, self._batch(idx))

    def evaluate(self, w: npt.ArrayLike) -> tuple[float, float | None]:
        """``(test loss, accuracy)``: ``evaluate_fn(module)`` if given, else the mean loss on
        ``test_fn``'s data and, for 2-D outputs and integer labels, the argmax accuracy."""
        module = self._at(w)
        if self.evaluate_fn is not None:
            loss, acc = self.evaluate_fn(module)
            return float(loss), None if acc is None else float(acc)
        data = self._test_data()
        if data is None:
            return math.nan, None
        n = _length(data)
        total = correct = 0.0
        counted = True
        was_training = module.training
        module.eval()
        with torch.no_grad():
            for start in range(0, n, EVAL_BATCH):
                batch = _rows(data, range(start, min(n, start + EVAL_BATCH)))
                size = min(n, start + EVAL_BATCH) - start
                total += evaluate_loss(self.loss_fn, module, batch) * size
                x, y = batch[0], batch[-1]
                out = module(x)
                if out.dim() == 2 and not y.is_floating_point():
                    correct += float((out.argmax(dim=1) == y).sum())
                else:
                    counted = False
        module.train(was_training)
        return total / n, (correct / n if counted else None)
