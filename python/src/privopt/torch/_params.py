"""The flat view of a module's parameters that every adapter shares."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Union

import numpy as np
import numpy.typing as npt
import torch

from ..errors import ParameterError

#: Which parameters a method trains: ``None`` (every trainable parameter), a regular
#: expression searched in each parameter's name, a list of names, or a predicate
#: ``(name, parameter) -> bool``.
Selection = Union[None, str, Sequence[str], Callable[[str, torch.nn.Parameter], bool]]

#: Elements per window: 2^20 (8 MiB of float64 scratch for a window of a non-float64 tensor).
DEFAULT_CHUNK = 1 << 20

CARRIED = (torch.float64, torch.float32, torch.bfloat16, torch.float16)

Window = Callable[[int, npt.NDArray[np.float64]], None]


def _chooser(select: Selection) -> Callable[[str, torch.nn.Parameter], bool]:
    if select is None:
        return lambda _name, _p: True
    if isinstance(select, str):
        pattern = re.compile(select)
        return lambda name, _p: pattern.search(name) is not None
    if callable(select):
        return select
    names = set(select)
    return lambda name, _p: name in names


class ParameterSet:
    """The parameters of ``module`` a method trains, as one flat vector: the selected trainable
    parameters in ``named_parameters()`` order, each flattened (buffers are left alone).

    Nothing is copied: :meth:`update` hands out windows of at most ``chunk`` elements as
    ``float64`` numpy arrays (views of a CPU ``float64`` tensor's storage, otherwise a copy of
    the window written back afterwards), so a model of 10^8 parameters streams through a few
    MiB of scratch. Parameters may be ``float64``, ``float32``, ``float16`` or ``bfloat16``;
    arithmetic is in ``float64`` and rounds once per write to the parameter's dtype.
    """

    def __init__(
        self,
        module: torch.nn.Module,
        select: Selection = None,
        *,
        chunk: int = DEFAULT_CHUNK,
    ) -> None:
        if not isinstance(module, torch.nn.Module):
            raise TypeError(f"expected a torch.nn.Module, got {type(module).__name__}")
        if not isinstance(chunk, int) or chunk < 1:
            raise ParameterError(f"chunk must be a positive number of elements, got {chunk!r}")
        trainable = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        if not trainable:
            raise ParameterError(
                f"{type(module).__name__} has no trainable parameters (requires_grad=True)"
            )
        wanted = _chooser(select)
        chosen = [(n, p) for n, p in trainable if wanted(n, p)]
        if not chosen:
            shown = ", ".join(n for n, _ in trainable[:6]) + (", ..." if len(trainable) > 6 else "")
            raise ParameterError(
                f"the parameter selection {select!r} selects none of the "
                f"{len(trainable)} trainable parameters ({shown})"
            )
        for name, p in chosen:
            if p.dtype not in CARRIED:
                raise ParameterError(
                    f"parameter {name!r} is {p.dtype}; privopt trains float64, float32, "
                    "float16 and bfloat16 parameters"
                )
            if not p.is_contiguous():
                raise ParameterError(
                    f"parameter {name!r} is not contiguous; make it so "
                    "(p.data = p.data.contiguous()) before training"
                )
        self.module = module
        self.chunk = chunk
        self.names: list[str] = [n for n, _ in chosen]
        self.parameters: list[torch.nn.Parameter] = [p for _, p in chosen]
        sizes = [p.numel() for p in self.parameters]
        self.offsets: list[int] = [int(o) for o in np.cumsum([0, *sizes[:-1]])]
        self.numel: int = int(sum(sizes))

    def __len__(self) -> int:
        return self.numel

    def __repr__(self) -> str:
        return f"ParameterSet({len(self.names)} tensors, {self.numel} values)"

    def windows(self) -> Iterator[tuple[int, torch.Tensor]]:
        """``(offset, view)`` for every window: flat views of the parameters' storage."""
        for offset, p in zip(self.offsets, self.parameters):
            flat = p.detach().view(-1)
            for start in range(0, flat.numel(), self.chunk):
                yield offset + start, flat[start : start + self.chunk]

    def views(self) -> list[npt.NDArray[Any]] | None:
        """Flat numpy views of every parameter's storage, when all are CPU ``float64`` or
        ``float32`` (what Rust works on in place); else ``None`` (use :meth:`update`)."""
        if not all(
            p.device.type == "cpu" and p.dtype in (torch.float64, torch.float32)
            for p in self.parameters
        ):
            return None
        return [p.detach().view(-1).numpy() for p in self.parameters]

    def update(self, fn: Window) -> None:
        """Calls ``fn(offset, x)`` on every window as a ``float64`` array and keeps what ``fn``
        writes into ``x``."""
        with torch.no_grad():
            for offset, view in self.windows():
                if view.dtype == torch.float64 and view.device.type == "cpu":
                    fn(offset, view.numpy())
                else:
                    buf = view.to(device="cpu", dtype=torch.float64)
                    fn(offset, buf.numpy())
                    view.copy_(buf)

    def to_numpy(self) -> npt.NDArray[np.float64]:
        """The parameters as one new ``float64`` vector (a full copy)."""
        out = np.empty(self.numel)
        for offset, view in self.windows():
            out[offset : offset + view.numel()] = view.to(device="cpu", dtype=torch.float64)
        return out

    def load(self, x: npt.ArrayLike) -> None:
        """Writes the flat vector ``x`` (``len(self)`` finite values) into the parameters."""
        v = np.asarray(x, dtype=np.float64).reshape(-1)
        if v.size != self.numel:
            raise ParameterError(
                f"the model has {self.numel} selected parameters; got a vector of {v.size}"
            )
        if not np.isfinite(v).all():
            raise ParameterError("the parameter vector has non-finite values")
        if not v.flags.writeable:  # torch.from_numpy wants a writable array
            v = v.copy()
        with torch.no_grad():
            for offset, view in self.windows():
                view.copy_(torch.from_numpy(v[offset : offset + view.numel()]))

    def grad(self) -> npt.NDArray[np.float64]:
        """The parameters' ``.grad`` as one ``float64`` vector (zeros where a parameter got
        no gradient)."""
        out = np.zeros(self.numel)
        for offset, p in zip(self.offsets, self.parameters):
            if p.grad is not None:
                out[offset : offset + p.numel()] = (
                    p.grad.detach().reshape(-1).to(device="cpu", dtype=torch.float64)
                )
        return out

    def zero_grad(self) -> None:
        """Drops the parameters' gradients."""
        for p in self.parameters:
            p.grad = None
