from collections.abc import Callable
from typing import Literal

import numpy as np
import numpy.typing as npt

class Spec:
    def __init__(
        self,
        lr: float,
        local_steps: int = 1,
        perturbations: int = 1,
        rule: Literal["decomfl", "hiso"] = "decomfl",
        nu: float = 0.01,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ) -> None: ...
    @property
    def scalars_per_round(self) -> int: ...

class Server:
    def __init__(
        self,
        spec: Spec,
        x0: npt.ArrayLike,
        clients: int,
        staleness_bound: int | None = None,
        seed: int | None = None,
    ) -> None: ...
    @property
    def x(self) -> npt.NDArray[np.float64]: ...
    @property
    def round(self) -> int: ...
    @property
    def full_downloads(self) -> int: ...
    def begin_round(self, per_round: int) -> tuple[bytes, list[int]]: ...
    def rewind(self, client: int, round: int) -> None: ...
    def catch_up(self, client: int) -> bytes: ...
    def receive(self, message: bytes) -> None: ...
    def finish_round(self) -> list[int]: ...

class Client:
    def __init__(
        self,
        id: int,
        spec: Spec,
        x0: npt.ArrayLike,
        mu: float = 1e-3,
        difference: Literal["forward", "central"] = "forward",
    ) -> None: ...
    @property
    def id(self) -> int: ...
    @property
    def x(self) -> npt.NDArray[np.float64]: ...
    @property
    def round(self) -> int: ...
    @property
    def state(self) -> bytes: ...
    def receive(self, message: bytes) -> None: ...
    def local_update(
        self, plan: bytes, loss: Callable[[int, npt.NDArray[np.float64]], float]
    ) -> bytes: ...
