"""DeComFL and HiSo (the HiSo paper) on a PyTorch module: the client perturbs the module in place
from the round's seeds and restores it, so training costs forward passes and no copy of the
model; only scalars leave the client."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal, Union

import numpy as np
import numpy.typing as npt
import torch

from ..errors import ParameterError, ProtocolError
from ..protocols import scalar_fl
from ._inplace import InPlaceModel, Restore, as_float32
from ._params import DEFAULT_CHUNK, ParameterSet, Selection
from .losses import LossFn

#: The minibatch of each local step: a callable ``step -> batch``, or an iterable (a list of
#: ``local_steps`` batches, a ``DataLoader``) whose next batches are taken in order.
Batches = Union[Callable[[int], Any], Iterable[Any]]


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
            raise ParameterError(f"the batches ran out at local step {k} of {steps}") from None

    return take


class ZerothOrderClient(InPlaceModel):
    """A DeComFL/HiSo client whose model is ``module`` (the selected parameters ``params``).

    Per round: :meth:`receive` the server's catch-up (a replay of the rounds missed, applied to
    the module in place, or the full model) → :meth:`local_update` with the plan and the local
    steps' batches → send the returned reply. The scalars are finite differences of
    ``loss_fn`` along directions drawn from privopt's counter-based stream under the round's
    seed (generated in Rust as they are applied), so the server and every client see the same
    direction for a seed on any machine.

    Memory: the module, one chunk of scratch (2^20 values), HiSo's Hessian diagonal
    (``float64``, one value per parameter), and with ``restore="copy"`` two copies of the
    selected parameters (the round's start and the current iterate); see
    :class:`~privopt.torch._inplace.InPlaceModel` for ``restore`` and ``mu``.
    """

    def __init__(
        self,
        module: torch.nn.Module,
        spec: scalar_fl.Spec,
        *,
        id: int,
        loss_fn: LossFn,
        params: Selection | ParameterSet = None,
        mu: float = scalar_fl.DEFAULTS["mu"],
        difference: Literal["forward", "central"] = "forward",
        chunk: int = DEFAULT_CHUNK,
        restore: Restore = "auto",
        state: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(module, loss_fn, params, mu, chunk, restore)
        if difference not in ("forward", "central"):
            raise ParameterError(f"difference must be 'forward' or 'central', got {difference!r}")
        self.spec = spec
        self.difference = difference
        d = len(self.params)
        self.h: npt.NDArray[np.float64] | None = np.ones(d) if spec.rule == "hiso" else None
        round_ = 0
        if state is not None:  # a restart: the module holds the start of state["round"]
            round_ = int(state["round"])
            if self.h is not None:
                h = np.asarray(state.get("h"), dtype=np.float64)
                if h.shape != (d,) or not (h > 0).all():
                    raise ParameterError(f"state['h'] must be {d} positive values (HiSo)")
                self.h[:] = h
        self.participant = scalar_fl.Participant(id, spec, d, round_)
        self._broken: str | None = None
        #: The scalars of the last local update, for the client's own diagnostics (in a
        #: private run they never leave it).
        self.last_scalars: list[float] = []

    def state_dict(self) -> dict[str, Any]:
        """What to save beside the module's own ``state_dict()`` to resume this client: the
        round whose start the module holds, and HiSo's Hessian diagonal. Pass it back as
        ``state=`` to a new client over the restored module, and tell the server
        (:meth:`~privopt.protocols.scalar_fl.Server.rewind`) if it is behind."""
        out: dict[str, Any] = {"round": self.round}
        if self.h is not None:
            out["h"] = self.h.copy()
        return out

    @property
    def id(self) -> int:
        return self.participant.id

    @property
    def round(self) -> int:
        """The round whose starting model the module holds."""
        return self.participant.round

    def receive(self, message: bytes) -> None:
        """Applies the server's catch-up to the module (and HiSo's Hessian). A message the
        protocol refuses changes nothing; if applying an accepted one fails part-way, the
        module no longer matches any round and this client refuses all further work."""
        self._check_usable()
        catch = self.participant.receive(message)
        try:
            if catch.kind == "replay":
                self._apply(lambda xs, off: self.participant.replay(catch, xs, self.h, offset=off))
            elif catch.kind == "full":
                assert catch.x is not None
                self.params.load(catch.x)
                if self.h is not None and catch.h is not None:
                    self.h[:] = catch.h
        except BaseException as e:
            self._broken = f"{type(e).__name__}: {e}"
            raise

    def _check_usable(self) -> None:
        if self._broken is not None:
            raise ProtocolError(
                f"client {self.id}: a catch-up failed part-way ({self._broken}); the module "
                "matches no round: rebuild the client from a saved module and state"
            )

    def _local_step(self, step: int, scalars: list[float], undo: bool) -> None:
        self._apply(
            lambda xs, off: self.participant.local_step(
                step, scalars, xs, self.h, offset=off, undo=undo
            )
        )

    def _derivative(
        self,
        batch: Any,
        step: int,
        p: int,
        base: float,
        here: list[torch.Tensor] | None,
    ) -> float:
        """The finite difference along perturbation ``p`` of local step ``step``."""
        where = f"client {self.id}, round {self.round}, local step {step}"

        def move(t: float) -> None:
            self._apply(
                lambda xs, off: self.participant.perturb(step, p, t, xs, self.h, offset=off)
            )

        plus = self._probe(move, self.mu, batch, where, here)
        if self.difference == "forward":
            return (plus - base) / self.mu
        return (plus - self._probe(move, -self.mu, batch, where, here)) / (2 * self.mu)

    def local_update(self, plan: bytes, batches: Batches) -> bytes:
        """Runs the plan's local steps on the module and returns the reply (the scalars).

        The module ends where it started (the local iterate is discarded, Alg. 1 line 13);
        the next catch-up moves it. If ``loss_fn`` raises or returns a non-finite value, the
        module is restored and the exception propagates: the client drops out of the round as
        a killed client would.
        """
        return self.participant.reply(self._scalars(plan, batches))

    def private_update(
        self,
        plan: bytes,
        batches: Batches,
        privacy: scalar_fl.Privacy,
        *,
        noise_seed: int | None = None,
    ) -> npt.NDArray[np.uint32]:
        """:meth:`local_update` for a private run: the round's scalars clipped, noised with
        this client's share and quantized (:meth:`Participant.private_reply
        <privopt.protocols.scalar_fl.Participant.private_reply>`), the input of the round's
        SecAgg+; the scalars themselves never leave. ``noise_seed``: reproducible noise, for
        experiments only."""
        scalars = self._scalars(plan, batches)
        return self.participant.private_reply(scalars, privacy, noise_seed=noise_seed)

    def _scalars(self, plan: bytes, batches: Batches) -> list[float]:
        self._check_usable()
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
                where = f"client {self.id}, round {self.round}, local step {k}"
                base = self._loss(batch, where) if self.difference == "forward" else 0.0
                step_scalars = [
                    as_float32(self._derivative(batch, k, p, base, here), where)
                    for p in range(perturbations)
                ]
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
        self.last_scalars = scalars
        return scalars


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
        privacy: scalar_fl.Privacy | None = None,
    ) -> None:
        self.module = module
        self.params = params if isinstance(params, ParameterSet) else ParameterSet(module, params)
        self.spec = spec
        self.server = scalar_fl.Server(
            spec,
            self.params.to_numpy(),
            clients,
            staleness_bound=staleness_bound,
            seed=seed,
            privacy=privacy,
        )

    @property
    def round(self) -> int:
        return self.server.round

    @property
    def privacy(self) -> scalar_fl.Privacy | None:
        return self.server.privacy

    def begin_round(
        self, per_round: int, eligible: Sequence[int] | None = None
    ) -> tuple[bytes, list[int]]:
        return self.server.begin_round(per_round, eligible)

    def catch_up(self, client: int) -> bytes:
        return self.server.catch_up(client)

    def receive(self, message: bytes) -> None:
        self.server.receive(message)

    def finish_round(self) -> list[int]:
        return self.server.finish_round()

    def finish_round_secure(
        self, sum: npt.NDArray[np.uint32], contributors: Sequence[int]
    ) -> list[int]:
        """Closes a private round with SecAgg+'s sum of the contributors' private updates."""
        return self.server.finish_round_secure(sum, contributors)

    def skip_round(self) -> None:
        """Closes the open round without moving the model (its secure sum failed)."""
        self.server.skip_round()

    def sync(self) -> torch.nn.Module:
        """Writes the global model into the module and returns the module."""
        self.params.load(self.server.x)
        return self.module
