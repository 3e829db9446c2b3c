"""DeComFL and HiSo (paper 003) on a PyTorch module: the client perturbs the module in place
from the round's seeds and restores it, so training costs forward passes and no copy of the
model; only scalars leave the client."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Literal, Union

import numpy as np
import numpy.typing as npt
import torch

from ..errors import ComputationError, ParameterError
from ..protocols import scalar_fl
from ._params import DEFAULT_CHUNK, ParameterSet, Selection

#: ``loss_fn(module, batch)``: the loss of ``batch`` under the module's current parameters,
#: a scalar tensor or a float.
LossFn = Callable[[torch.nn.Module, Any], Union[torch.Tensor, float]]

#: The minibatch of each local step: a callable ``step -> batch``, or an iterable (a list of
#: ``local_steps`` batches, a ``DataLoader``) whose next batches are taken in order.
Batches = Union[Callable[[int], Any], Iterable[Any]]


#: ``restore="auto"`` copies parameters sets up to this size (two copies: 64 MiB at most).
COPY_RESTORE_BYTES = 32 << 20


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


def _batch_source(batches: Batches, steps: int) -> Callable[[int], Any]:
    if callable(batches):
        return batches
    if isinstance(batches, Sequence) and not isinstance(batches, (str, bytes)):
        if len(batches) != steps:
            raise ParameterError(
                f"got {len(batches)} batches for {steps} local steps (wrap a single batch "
                "in a list)"
            )
        return lambda k: batches[k]
    it: Iterator[Any] = iter(batches)

    def take(k: int) -> Any:
        try:
            return next(it)
        except StopIteration:
            raise ParameterError(
                f"the batches ran out at local step {k} of {steps}"
            ) from None

    return take


class ZerothOrderClient:
    """A DeComFL/HiSo client whose model is ``module`` (the selected parameters ``params``).

    Per round: :meth:`receive` the server's catch-up (a replay of the rounds missed, applied to
    the module in place, or the full model) → :meth:`local_update` with the plan and the local
    steps' batches → send the returned reply. The scalars are finite differences of
    ``loss_fn`` along directions drawn from privopt's counter-based stream under the round's
    seed (:func:`privopt.protocols.scalar_fl` directions, generated window by window in Rust),
    so the server and every client see the same direction for a seed on any machine.

    Memory: the module, plus one chunk of scratch (2^20 values), plus HiSo's Hessian diagonal
    (``float64``, one value per parameter). The module is perturbed in place; ``restore``
    says how it goes back. ``"copy"`` keeps two copies of the selected parameters (the
    round's start and the current iterate) and copies them back: exact, and each direction is
    generated once. ``"regenerate"`` perturbs back with the direction generated again: no copy,
    and a ``float64`` parameter returns to within an ulp, a ``float32`` one to within its
    rounding (MeZO's drift, far below the training noise). ``"auto"`` copies parameter sets of
    up to 32 MiB and regenerates above, so memory stays that of inference.
    In ``float16``/``bfloat16`` a step ``mu`` below the parameters' spacing is lost: use
    ``float32`` parameters or a larger ``mu``. Keep the forward pass deterministic (dropout
    off, ``module.eval()``): both sides of a difference must see the same function.
    """

    def __init__(
        self,
        module: torch.nn.Module,
        spec: scalar_fl.Spec,
        *,
        id: int,
        loss_fn: LossFn,
        params: Selection | ParameterSet = None,
        mu: float = 1e-3,
        difference: Literal["forward", "central"] = "forward",
        chunk: int = DEFAULT_CHUNK,
        restore: Literal["auto", "copy", "regenerate"] = "auto",
    ) -> None:
        if not callable(loss_fn):
            raise TypeError("loss_fn must be a callable (module, batch) -> loss")
        if not (isinstance(mu, (int, float)) and mu > 0 and math.isfinite(mu)):
            raise ParameterError(f"mu must be > 0, got {mu!r}")
        if difference not in ("forward", "central"):
            raise ParameterError(
                f"difference must be 'forward' or 'central', got {difference!r}"
            )
        self.module = module
        self.params = (
            params
            if isinstance(params, ParameterSet)
            else ParameterSet(module, params, chunk=chunk)
        )
        self.spec = spec
        self.loss_fn = loss_fn
        self.mu = float(mu)
        self.difference = difference
        if restore not in ("auto", "copy", "regenerate"):
            raise ParameterError(
                f"restore must be 'auto', 'copy' or 'regenerate', got {restore!r}"
            )
        model_bytes = sum(p.numel() * p.element_size() for p in self.params.parameters)
        #: Whether perturbations are undone by copying the parameters back (exact, one
        #: generation of each direction instead of two, two copies of the parameters in
        #: memory) rather than by perturbing back (no copy; restores to rounding).
        self.copy_restore = restore == "copy" or (
            restore == "auto" and model_bytes <= COPY_RESTORE_BYTES
        )
        self.participant = scalar_fl.Participant(id, spec, len(self.params))
        self.h: npt.NDArray[np.float64] | None = (
            np.ones(len(self.params)) if spec.rule == "hiso" else None
        )

    @property
    def id(self) -> int:
        return self.participant.id

    @property
    def round(self) -> int:
        """The round whose starting model the module holds."""
        return self.participant.round

    def _apply(self, op: Callable[[list[npt.NDArray[Any]], int], None]) -> None:
        """``op(arrays, offset)`` over the whole model: in one call on views of the tensors
        (CPU ``float64``/``float32``), else window by window on ``float64`` copies."""
        views = self.params.views()
        if views is not None:
            with torch.no_grad():
                op(views, 0)
        else:
            self.params.update(lambda off, x: op([x], off))

    def receive(self, message: bytes) -> None:
        """Applies the server's catch-up to the module (and HiSo's Hessian)."""
        catch = self.participant.receive(message)
        if catch.kind == "replay":
            self._apply(
                lambda xs, off: self.participant.replay(catch, xs, self.h, offset=off)
            )
        elif catch.kind == "full":
            assert catch.x is not None
            self.params.load(catch.x)
            if self.h is not None and catch.h is not None:
                self.h[:] = catch.h

    def _perturb(self, step: int, p: int, t: float) -> None:
        self._apply(
            lambda xs, off: self.participant.perturb(step, p, t, xs, self.h, offset=off)
        )

    def _local_step(self, step: int, scalars: list[float], undo: bool) -> None:
        self._apply(
            lambda xs, off: self.participant.local_step(
                step, scalars, xs, self.h, offset=off, undo=undo
            )
        )

    def _loss(self, batch: Any, step: int) -> float:
        value = evaluate_loss(self.loss_fn, self.module, batch)
        if not math.isfinite(value):
            raise ComputationError(
                f"client {self.id}: loss_fn returned {value} at local step {step} of round "
                f"{self.round}"
            )
        return value

    def _snapshot(self) -> list[torch.Tensor] | None:
        """A copy of the selected parameters, if this client restores by copying."""
        if not self.copy_restore:
            return None
        return [p.detach().clone() for p in self.params.parameters]

    def _restore(self, snapshot: list[torch.Tensor]) -> None:
        with torch.no_grad():
            for p, saved in zip(self.params.parameters, snapshot):
                p.copy_(saved)

    def _derivative(
        self,
        batch: Any,
        step: int,
        p: int,
        base: float,
        here: list[torch.Tensor] | None,
    ) -> float:
        """The finite difference along perturbation ``p``; ``here`` is a copy of the current
        iterate to restore from (else each perturbation is undone by regenerating it)."""

        def probe(t: float) -> float:
            self._perturb(step, p, t)
            try:
                return self._loss(batch, step)
            finally:
                if here is None:
                    self._perturb(step, p, -t)
                else:
                    self._restore(here)

        plus = probe(self.mu)
        if self.difference == "forward":
            return (plus - base) / self.mu
        return (plus - probe(-self.mu)) / (2 * self.mu)

    def local_update(self, plan: bytes, batches: Batches) -> bytes:
        """Runs the plan's local steps on the module and returns the reply (the scalars).

        The module ends where it started (the local iterate is discarded, Alg. 1 line 13);
        the next catch-up moves it. If ``loss_fn`` raises or returns a non-finite value, the
        module is restored and the exception propagates: the client drops out of the round as
        a killed client would.
        """
        seeds = self.participant.accept(plan)
        steps, perturbations = self.spec.local_steps, self.spec.perturbations
        batch_of = _batch_source(batches, steps)
        scalars: list[float] = []
        taken: list[tuple[int, list[float]]] = []
        start = self._snapshot() if steps > 1 else None
        here = self._snapshot()
        try:
            for k in range(len(seeds)):
                batch = batch_of(k)
                base = self._loss(batch, k) if self.difference == "forward" else 0.0
                step_scalars = [
                    float(np.float32(self._derivative(batch, k, p, base, here)))
                    for p in range(perturbations)
                ]
                if not all(math.isfinite(g) for g in step_scalars):
                    raise ComputationError(
                        f"client {self.id}: a directional derivative of round {self.round} "
                        "overflowed float32"
                    )
                scalars.extend(step_scalars)
                if k + 1 < len(seeds):  # the last step's iterate is discarded at once
                    self._local_step(k, step_scalars, undo=False)
                    taken.append((k, step_scalars))
                    here = self._snapshot()
        finally:
            if start is not None:
                self._restore(start)
            else:
                for k, step_scalars in reversed(taken):
                    self._local_step(k, step_scalars, undo=True)
        return self.participant.reply(scalars)


class ZerothOrderServer:
    """The DeComFL/HiSo server (:class:`privopt.protocols.scalar_fl.Server`) over ``module``'s
    parameters: it starts from the module's values and :meth:`sync` writes the global model
    back into the module (to evaluate it, save it, serve it). It holds the model as one
    ``float64`` vector."""

    def __init__(
        self,
        module: torch.nn.Module,
        spec: scalar_fl.Spec,
        *,
        clients: int,
        params: Selection | ParameterSet = None,
        staleness_bound: int | None = None,
        seed: int | None = None,
    ) -> None:
        self.module = module
        self.params = (
            params if isinstance(params, ParameterSet) else ParameterSet(module, params)
        )
        self.spec = spec
        self.server = scalar_fl.Server(
            spec,
            self.params.to_numpy(),
            clients,
            staleness_bound=staleness_bound,
            seed=seed,
        )

    @property
    def round(self) -> int:
        return self.server.round

    def begin_round(self, per_round: int) -> tuple[bytes, list[int]]:
        return self.server.begin_round(per_round)

    def catch_up(self, client: int) -> bytes:
        return self.server.catch_up(client)

    def receive(self, message: bytes) -> None:
        self.server.receive(message)

    def finish_round(self) -> list[int]:
        return self.server.finish_round()

    def sync(self) -> torch.nn.Module:
        """Writes the global model into the module and returns the module."""
        self.params.load(self.server.x)
        return self.module
