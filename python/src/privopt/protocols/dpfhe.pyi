from collections.abc import Sequence
from typing import Literal, final

import numpy as np
import numpy.typing as npt

from ..ckks import Context

__all__ = ["Circuit", "DataOwner", "ComputeServer"]

@final
class Circuit:
    def __new__(
        cls,
        ctx: Context,
        d: int,
        batch: int,
        lr: float,
        sigmoid_degree: int = 7,
        sigmoid_bound: float = 8.0,
        barrier: tuple[float, float, float, int] | None = None,
        clip: tuple[float, float] | None = None,
    ) -> Circuit: ...
    @property
    def block(self) -> int: ...

@final
class DataOwner:
    def __new__(cls, ctx: Context, circuit: Circuit) -> DataOwner: ...
    def save(self) -> bytes: ...
    @staticmethod
    def restore(ctx: Context, circuit: Circuit, state: bytes) -> DataOwner: ...
    def evaluation_keys(self) -> tuple[bytes, list[bytes]]: ...
    def encrypt_weights(self, w0: npt.ArrayLike) -> bytes: ...
    def encrypt_step(
        self, step: int, x: npt.NDArray[np.float64], y: npt.ArrayLike, scaled_noise: npt.ArrayLike
    ) -> bytes: ...
    def refresh(self, request: bytes) -> bytes: ...
    def decrypt_weights(self, weights: bytes) -> npt.NDArray[np.float64]: ...
    @property
    def refreshes(self) -> int: ...

@final
class ComputeServer:
    def __new__(
        cls,
        ctx: Context,
        circuit: Circuit,
        relin_key: bytes,
        galois_keys: Sequence[bytes],
        threads: int = 1,
    ) -> ComputeServer: ...
    def begin_step(self, weights: bytes, step: bytes) -> None: ...
    def advance(self) -> tuple[Literal["refresh", "done"], bytes]: ...
    def resume(self, reply: bytes) -> None: ...
