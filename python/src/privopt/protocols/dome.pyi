from collections.abc import Sequence
from typing import Literal, final

import numpy as np
import numpy.typing as npt

__all__ = ["DEFAULTS", "Server", "check_broadcast", "release"]

DEFAULTS: dict[str, float]

@final
class Server:
    def __new__(
        cls,
        w0: npt.ArrayLike,
        k: int,
        clip: float,
        noise_total: float,
        lr: float = 1e-3,
        beta1: float = 0.9,
        beta2: float = 0.999,
        gamma_prime: float = 1e-6,
        sketch: Literal["learned", "learned_no_probes", "random", "identity"] = "learned",
        energy: float = 0.9,
        seed: int | None = None,
        noise_floor: float | None = None,
    ) -> Server: ...
    @property
    def model(self) -> npt.NDArray[np.float64]: ...
    @property
    def dim(self) -> int: ...
    def open_round(self, round: int, participants: int) -> tuple[bytes, list[bytes]]: ...
    def abort_round(self) -> bool: ...
    @property
    def required_contributors(self) -> int | None: ...
    def close_round(
        self, total: npt.NDArray[np.uint32], contributors: int
    ) -> npt.NDArray[np.float64]: ...

def release(
    broadcast: bytes, chunks: Sequence[bytes], grad: npt.ArrayLike
) -> npt.NDArray[np.uint32]: ...
def check_broadcast(
    broadcast: bytes, *, clip: float, noise_total: float, noise_floor: float | None = None
) -> tuple[int, int]: ...
