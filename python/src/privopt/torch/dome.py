"""DOME (paper 005) on a PyTorch module: the client's gradient from autograd, released through
the server's sketch (and summed by SecAgg+); the server's debiased Adam writes the module."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import torch

from ..protocols import dome
from ._params import ParameterSet, Selection
from .losses import LossFn, loss_and_gradient


class DomeClient:
    """A DOME participant training ``module`` (the selected parameters ``params``).

    :meth:`release` loads the round's model into the module, takes the gradient of
    ``loss_fn(module, batch)`` by autograd and hands it to :func:`privopt.protocols.dome.release`
    (mean removed, projected on the sketch, clipped to the broadcast's ``C``, the client's share
    of the noise added, quantized): the ``uint32`` vector to feed to the round's SecAgg+.
    The clipping is the paper's, of the projected update; the module's own gradient is never
    sent.
    """

    def __init__(
        self,
        module: torch.nn.Module,
        *,
        loss_fn: LossFn,
        params: Selection | ParameterSet = None,
    ) -> None:
        if not callable(loss_fn):
            raise TypeError("loss_fn must be a callable (module, batch) -> loss")
        self.module = module
        self.params = params if isinstance(params, ParameterSet) else ParameterSet(module, params)
        self.loss_fn = loss_fn

    def gradient(self, batch: Any) -> tuple[float, npt.NDArray[np.float64]]:
        """``(loss, gradient)`` of ``loss_fn`` on ``batch`` at the module's parameters."""
        return loss_and_gradient(self.loss_fn, self.module, self.params, batch)

    def release(
        self,
        broadcast: bytes,
        chunks: Sequence[bytes],
        batch: Any,
        model: npt.ArrayLike | None = None,
    ) -> npt.NDArray[np.uint32]:
        """The round's SecAgg+ input; ``model`` (the server's, as a flat vector) is loaded
        into the module first when given."""
        if model is not None:
            self.params.load(model)
        _, grad = self.gradient(batch)
        return dome.release(broadcast, chunks, grad)


class DomeServer:
    """The DOME server (:class:`privopt.protocols.dome.Server`) over ``module``'s parameters:
    it starts from the module's values, and every :meth:`close_round` writes the new model
    into the module. Arguments after ``params`` are :class:`~privopt.protocols.dome.Server`'s."""

    def __init__(
        self,
        module: torch.nn.Module,
        *,
        k: int,
        clip: float,
        noise_total: float,
        params: Selection | ParameterSet = None,
        lr: float = 1e-3,
        beta1: float = 0.9,
        beta2: float = 0.999,
        gamma_prime: float = 1e-6,
        sketch: Literal["learned", "learned_no_probes", "random", "identity"] = "learned",
        energy: float = 0.9,
        seed: int | None = None,
        noise_floor: float | None = None,
    ) -> None:
        self.module = module
        self.params = params if isinstance(params, ParameterSet) else ParameterSet(module, params)
        self.server = dome.Server(
            self.params.to_numpy(),
            k=k,
            clip=clip,
            noise_total=noise_total,
            lr=lr,
            beta1=beta1,
            beta2=beta2,
            gamma_prime=gamma_prime,
            sketch=sketch,
            energy=energy,
            seed=seed,
            noise_floor=noise_floor,
        )

    @property
    def model(self) -> npt.NDArray[np.float64]:
        """The global model as a flat ``float64`` vector (what clients load)."""
        return self.server.model

    @property
    def dim(self) -> int:
        """The SecAgg+ vector length."""
        return self.server.dim

    @property
    def required_contributors(self) -> int | None:
        return self.server.required_contributors

    def open_round(self, round: int, participants: int) -> tuple[bytes, list[bytes]]:
        return self.server.open_round(round, participants)

    def abort_round(self) -> bool:
        return self.server.abort_round()

    def close_round(
        self, total: npt.NDArray[np.uint32], contributors: int
    ) -> npt.NDArray[np.float64]:
        """Takes the Adam step on the SecAgg+ sum, writes the model into the module, and
        returns the decompressed mean gradient."""
        g = self.server.close_round(total, contributors)
        self.params.load(self.server.model)
        return g
