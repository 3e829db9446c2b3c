from collections.abc import Callable, Sequence
from typing import Literal, final

import numpy as np
import numpy.typing as npt

__all__ = [
    "DEFAULTS",
    "Spec",
    "Server",
    "Client",
    "Catch",
    "Participant",
    "Privacy",
    "round_participants",
]

DEFAULTS: dict[str, float]

def round_participants(plan: bytes) -> list[int]: ...

@final
class Spec:
    def __new__(
        cls,
        lr: float,
        local_steps: int = 1,
        perturbations: int = 1,
        rule: Literal["decomfl", "hiso"] = "decomfl",
        nu: float = 0.01,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ) -> Spec: ...
    @property
    def scalars_per_round(self) -> int: ...
    @property
    def lr(self) -> float: ...
    @property
    def local_steps(self) -> int: ...
    @property
    def perturbations(self) -> int: ...
    @property
    def rule(self) -> Literal["decomfl", "hiso"]: ...

@final
class Privacy:
    def __new__(cls, clip: float, noise_multiplier: float, noise_floor: float = 0.5) -> Privacy: ...
    @property
    def clip(self) -> float: ...
    @property
    def noise_multiplier(self) -> float: ...
    @property
    def noise_floor(self) -> float: ...
    def required_contributors(self, participants: int) -> int: ...
    def effective_multiplier(self, participants: int, contributors: int) -> float: ...

@final
class Server:
    def __new__(
        cls,
        spec: Spec,
        x0: npt.ArrayLike,
        clients: int,
        staleness_bound: int | None = None,
        seed: int | None = None,
        privacy: Privacy | None = None,
    ) -> Server: ...
    @property
    def privacy(self) -> Privacy | None: ...
    @property
    def x(self) -> npt.NDArray[np.float64]: ...
    @property
    def round(self) -> int: ...
    @property
    def full_downloads(self) -> int: ...
    def begin_round(
        self, per_round: int, eligible: Sequence[int] | None = None
    ) -> tuple[bytes, list[int]]: ...
    def rewind(self, client: int, round: int) -> None: ...
    def catch_up(self, client: int) -> bytes: ...
    def receive(self, message: bytes) -> None: ...
    def finish_round(self) -> list[int]: ...
    def finish_round_secure(
        self, sum: npt.NDArray[np.uint32], contributors: Sequence[int]
    ) -> list[int]: ...
    def skip_round(self) -> None: ...

@final
class Client:
    def __new__(
        cls,
        id: int,
        spec: Spec,
        x0: npt.ArrayLike,
        mu: float = 1e-3,
        difference: Literal["forward", "central"] = "forward",
    ) -> Client: ...
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
    def private_update(
        self,
        plan: bytes,
        loss: Callable[[int, npt.NDArray[np.float64]], float],
        privacy: Privacy,
        *,
        noise_seed: int | None = None,
    ) -> npt.NDArray[np.uint32]: ...

@final
class Catch:
    @property
    def kind(self) -> Literal["up_to_date", "replay", "full"]: ...
    @property
    def rounds(self) -> int: ...
    @property
    def x(self) -> npt.NDArray[np.float64] | None: ...
    @property
    def h(self) -> npt.NDArray[np.float64] | None: ...

@final
class Participant:
    def __new__(cls, id: int, spec: Spec, dim: int, round: int = 0) -> Participant: ...
    @property
    def id(self) -> int: ...
    @property
    def round(self) -> int: ...
    @property
    def dim(self) -> int: ...
    def receive(self, message: bytes) -> Catch: ...
    def replay(
        self,
        catch: Catch,
        xs: Sequence[npt.NDArray[np.float64] | npt.NDArray[np.float32]],
        h: npt.NDArray[np.float64] | None = None,
        offset: int = 0,
    ) -> None: ...
    def accept(self, plan: bytes) -> list[int]: ...
    def perturb(
        self,
        step: int,
        p: int,
        t: float,
        xs: Sequence[npt.NDArray[np.float64] | npt.NDArray[np.float32]],
        h: npt.NDArray[np.float64] | None = None,
        offset: int = 0,
    ) -> None: ...
    def local_step(
        self,
        step: int,
        scalars: Sequence[float],
        xs: Sequence[npt.NDArray[np.float64] | npt.NDArray[np.float32]],
        h: npt.NDArray[np.float64] | None = None,
        offset: int = 0,
        undo: bool = False,
    ) -> None: ...
    def reply(self, scalars: Sequence[float]) -> bytes: ...
    def private_reply(
        self, scalars: Sequence[float], privacy: Privacy, *, noise_seed: int | None = None
    ) -> npt.NDArray[np.uint32]: ...
