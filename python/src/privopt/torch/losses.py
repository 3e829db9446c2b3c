"""The user's loss as the adapters call it."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from ..errors import ComputationError
from ._params import ParameterSet

#: ``loss_fn(module, batch)``: the loss of ``batch`` under the module's current parameters,
#: a scalar tensor or a float.
LossFn = Callable[[torch.nn.Module, Any], torch.Tensor | float]


def evaluate_loss(loss_fn: LossFn, module: torch.nn.Module, batch: Any) -> float:
    """``loss_fn(module, batch)`` without autograd, as a float; a loss that is not one number
    raises ``TypeError`` naming what it returned."""
    with torch.no_grad():
        value = loss_fn(module, batch)
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise TypeError(
                f"loss_fn must return one number; it returned a tensor of shape "
                f"{tuple(value.shape)}"
            )
        return float(value.item())
    if isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool):
        return float(value)
    raise TypeError(f"loss_fn must return a scalar tensor or a float, not {type(value).__name__}")


def loss_and_gradient(
    loss_fn: LossFn, module: torch.nn.Module, params: ParameterSet, batch: Any
) -> tuple[float, npt.NDArray[np.float64]]:
    """``(loss, gradient)`` of ``loss_fn(module, batch)`` over ``params`` by autograd, as a
    float and one ``float64`` vector; the parameters' ``.grad`` are left cleared. A loss that
    is not one number with a graph raises ``TypeError``; a non-finite loss or gradient raises
    :class:`~privopt.errors.ComputationError`."""
    params.zero_grad()
    value = loss_fn(module, batch)
    if not isinstance(value, torch.Tensor) or value.numel() != 1:
        what = (
            f"a tensor of shape {tuple(value.shape)}"
            if isinstance(value, torch.Tensor)
            else type(value).__name__
        )
        raise TypeError(f"loss_fn must return a scalar tensor with a graph, not {what}")
    loss = float(value.item())
    if not math.isfinite(loss):
        raise ComputationError(f"loss_fn returned {loss}")
    value.backward()  # type: ignore[no-untyped-call]
    grad = params.grad()
    params.zero_grad()
    if not np.isfinite(grad).all():
        raise ComputationError("the gradient has non-finite values")
    return loss, grad
