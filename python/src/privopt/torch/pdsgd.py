"""Paillier decentralized SGD (the Paillier D-SGD paper) on a PyTorch module: the agent's state is the
module's parameters, its gradient step comes from autograd, and its exchanges with neighbours
are :class:`privopt.protocols.pdsgd.Agent`'s."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from ..errors import ParameterError, ProtocolError
from ..protocols import pdsgd
from ._params import ParameterSet, Selection
from .losses import LossFn, loss_and_gradient

# Algorithm 1's attenuation and private random stepsizes (the paper's §4 values by default).
Schedule = pdsgd.Schedule


class PdsgdAgent:
    """Agent ``agent`` of Paillier D-SGD training ``module`` (the selected parameters).

    Per iteration ``k`` (from 1): :meth:`quantized` state → one :meth:`initiate` per
    neighbour → :meth:`respond` to the neighbours' requests → :meth:`finish` each response →
    :meth:`step` with the minibatch: ``x ← x + γ^k·Σ_j mix_j − Λ^k·∇f(x)``. Each exchange costs
    one Paillier encryption per parameter, so keep the trained parameter set small (a head,
    or a name filter).
    """

    def __init__(
        self,
        module: torch.nn.Module,
        agent: pdsgd.Agent,
        *,
        loss_fn: LossFn,
        delta: float = 1e-3,
        schedule: Schedule | None = None,
        params: Selection | ParameterSet = None,
    ) -> None:
        if not delta > 0:
            raise ParameterError(f"delta must be > 0, got {delta!r}")
        self.module = module
        self.agent = agent
        self.delta = float(delta)
        self.schedule = schedule or Schedule()
        self.params = params if isinstance(params, ParameterSet) else ParameterSet(module, params)
        self.loss_fn = loss_fn
        self._mix = np.zeros(len(self.params))
        self._q: npt.NDArray[np.int64] | None = None

    def quantized(self) -> npt.NDArray[np.int64]:
        """The state quantized to multiples of ``delta`` (what the exchanges of this
        iteration carry, encrypted)."""
        x = self.params.to_numpy()
        self._q = np.round(x / self.delta).astype(np.int64)
        self._mix[:] = 0.0
        return self._q

    def _held(self) -> npt.NDArray[np.int64]:
        if self._q is None:
            raise ProtocolError("call quantized() at the start of the iteration first")
        return self._q

    def initiate(self, to: int, iteration: int) -> bytes:
        return self.agent.initiate(to, iteration, self._held())

    def respond(self, request: bytes) -> bytes:
        return self.agent.respond(request, self._held())

    def finish(self, response: bytes) -> None:
        self._mix += self.agent.finish(response, self.delta)

    def step(self, k: int, batch: Any) -> float:
        """The iteration's update of the module; returns the minibatch loss."""
        if k < 1:
            raise ParameterError(f"iterations count from 1, got {k}")
        loss, g = loss_and_gradient(self.loss_fn, self.module, self.params, batch)
        gamma = self.schedule.attenuation(k)
        lam = self.schedule.stepsizes(k, g.size)
        mix, self._q = self._mix, None

        def move(off: int, x: npt.NDArray[np.float64]) -> None:
            window = slice(off, off + x.size)
            x += gamma * mix[window] - lam[window] * g[window]

        self.params.update(move)
        self._mix = np.zeros_like(mix)
        return loss
