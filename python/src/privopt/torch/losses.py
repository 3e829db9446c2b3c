"""The user's loss as the adapters call it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Union

import numpy as np
import torch

#: ``loss_fn(module, batch)``: the loss of ``batch`` under the module's current parameters,
#: a scalar tensor or a float.
LossFn = Callable[[torch.nn.Module, Any], Union[torch.Tensor, float]]


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
    if isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(
        value, bool
    ):
        return float(value)
    raise TypeError(
        f"loss_fn must return a scalar tensor or a float, not {type(value).__name__}"
    )
