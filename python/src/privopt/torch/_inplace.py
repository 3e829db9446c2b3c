"""What the zeroth-order adapters share: a module's selected parameters moved in place along a
direction privopt generates, evaluated, and put back."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import torch

from ..errors import ComputationError, ParameterError
from ._params import DEFAULT_CHUNK, ParameterSet, Selection
from .losses import LossFn, evaluate_loss

#: ``restore="auto"`` copies parameter sets up to this size (two copies: 64 MiB at most).
COPY_RESTORE_BYTES = 32 << 20

Restore = Literal["auto", "copy", "regenerate"]


class InPlaceModel:
    """``module``'s selected parameters, perturbed in place and restored.

    ``restore`` says how a perturbation is undone. ``"copy"`` keeps copies of the selected
    parameters and copies them back: exact, and each direction is generated once.
    ``"regenerate"`` moves back along the direction generated again: no copy; a ``float64``
    parameter returns to within an ulp, a ``float32`` one to within its rounding (MeZO's
    drift, far below the training noise). ``"auto"`` copies parameter sets up to 32 MiB and
    regenerates above, so memory stays that of inference. In ``float16``/``bfloat16`` a step
    ``mu`` below the parameters' spacing is lost: use ``float32`` parameters or a larger
    ``mu``. Keep the forward pass deterministic (dropout off, ``module.eval()``): both sides of
    a difference must see the same function.
    """

    def __init__(
        self,
        module: torch.nn.Module,
        loss_fn: LossFn,
        params: Selection | ParameterSet,
        mu: float,
        chunk: int = DEFAULT_CHUNK,
        restore: Restore = "auto",
    ) -> None:
        if not callable(loss_fn):
            raise TypeError("loss_fn must be a callable (module, batch) -> loss")
        if not (isinstance(mu, (int, float)) and mu > 0 and math.isfinite(mu)):
            raise ParameterError(f"mu must be > 0, got {mu!r}")
        if restore not in ("auto", "copy", "regenerate"):
            raise ParameterError(f"restore must be 'auto', 'copy' or 'regenerate', got {restore!r}")
        self.module = module
        self.loss_fn = loss_fn
        self.mu = float(mu)
        self.params = (
            params
            if isinstance(params, ParameterSet)
            else ParameterSet(module, params, chunk=chunk)
        )
        model_bytes = sum(p.numel() * p.element_size() for p in self.params.parameters)
        #: Whether a perturbation is undone by copying the parameters back rather than by
        #: moving back along the regenerated direction.
        self.copy_restore = restore == "copy" or (
            restore == "auto" and model_bytes <= COPY_RESTORE_BYTES
        )

    def _apply(self, op: Callable[[list[npt.NDArray[Any]], int], None]) -> None:
        """``op(arrays, offset)`` over the whole model: in one call on views of the tensors
        (CPU ``float64``/``float32``), else window by window on ``float64`` copies."""
        views = self.params.views()
        if views is not None:
            with torch.no_grad():
                op(views, 0)
        else:
            self.params.update(lambda off, x: op([x], off))

    def _snapshot(self) -> list[torch.Tensor] | None:
        """A copy of the selected parameters, if this model restores by copying."""
        if not self.copy_restore:
            return None
        return [p.detach().clone() for p in self.params.parameters]

    def _restore(self, snapshot: list[torch.Tensor]) -> None:
        with torch.no_grad():
            for p, saved in zip(self.params.parameters, snapshot):
                p.copy_(saved)

    def _loss(self, batch: Any, where: str) -> float:
        value = evaluate_loss(self.loss_fn, self.module, batch)
        if not math.isfinite(value):
            raise ComputationError(f"{where}: loss_fn returned {value}")
        return value

    def _probe(
        self,
        move: Callable[[float], None],
        t: float,
        batch: Any,
        where: str,
        here: list[torch.Tensor] | None,
    ) -> float:
        """The loss at the point ``move(t)`` reaches; the module is put back after (from
        ``here``, a copy of where it was, or by ``move(-t)``), also when the loss fails."""
        move(t)
        try:
            return self._loss(batch, where)
        finally:
            if here is None:
                move(-t)
            else:
                self._restore(here)


def as_float32(value: float, where: str) -> float:
    """``value`` rounded to the ``float32`` the wire carries; one that overflows raises."""
    g = float(np.float32(value))
    if not math.isfinite(g):
        raise ComputationError(f"{where}: a directional derivative overflowed float32")
    return g
