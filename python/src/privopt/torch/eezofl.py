"""EEZOFL (the EEZOFL paper, digital path) on a PyTorch module: a device's one scalar per round, the
two-point difference of its loss along the round's public direction, taken in place."""

from __future__ import annotations

from typing import Any

import torch

from ..protocols import eezofl
from ._inplace import InPlaceModel, Restore, as_float32
from ._params import DEFAULT_CHUNK, ParameterSet, Selection
from .losses import LossFn


class EezoflDevice(InPlaceModel):
    """An EEZOFL device training ``module`` (the selected parameters ``params``).

    Each round ``r``: :meth:`scalar` is ``(f(x + μφ) − f(x − μφ)) / 2μ`` on the device's
    batch, ``φ`` the round's direction (:func:`privopt.protocols.eezofl.direction`, privopt's
    stream under the run's public ``seed``, generated in Rust as it is applied: no copy of the
    model); :meth:`upload` encrypts it with the device's xMK-CKKS key; after the server fuses
    the sum, :meth:`step` moves the module by ``−coefficient·φ`` (``coefficient = η_r ·
    sum / devices``), the update every device and the server apply. See
    :class:`~privopt.torch._inplace.InPlaceModel` for ``restore`` and ``mu``.
    """

    def __init__(
        self,
        module: torch.nn.Module,
        device: eezofl.Device | None = None,
        *,
        loss_fn: LossFn,
        seed: int,
        params: Selection | ParameterSet = None,
        mu: float = 1e-2,
        chunk: int = DEFAULT_CHUNK,
        restore: Restore = "auto",
    ) -> None:
        super().__init__(module, loss_fn, params, mu, chunk, restore)
        self.device = device
        self.seed = seed

    def _move(self, round: int, t: float) -> None:
        self._apply(lambda xs, off: eezofl.perturb(self.seed, round, t, xs, offset=off))

    def scalar(self, round: int, batch: Any) -> float:
        """The round's two-point scalar on ``batch`` (rounded to ``float32``); the module ends
        where it started, also when ``loss_fn`` fails."""
        where = f"EEZOFL round {round}"
        here = self._snapshot()

        def move(t: float) -> None:
            self._move(round, t)

        plus = self._probe(move, self.mu, batch, where, here)
        minus = self._probe(move, -self.mu, batch, where, here)
        return as_float32((plus - minus) / (2 * self.mu), where)

    def upload(self, key_round: int, round: int, batch: Any) -> bytes:
        """The round's scalar, encrypted by the device (``device`` must be given)."""
        if self.device is None:
            raise TypeError("this EezoflDevice has no xMK-CKKS device to encrypt with")
        return self.device.encrypt(key_round, self.scalar(round, batch))

    def step(self, round: int, coefficient: float) -> None:
        """``x ← x − coefficient · φ_round`` in place."""
        self._move(round, -coefficient)
