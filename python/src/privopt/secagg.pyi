from collections.abc import Mapping, Sequence
from typing import NamedTuple, final

import numpy as np
import numpy.typing as npt

__all__ = [
    "GraphParameters",
    "Graph",
    "Quantizer",
    "StochasticQuantizer",
    "Client",
    "Server",
    "parameters",
    "round_graph",
    "secure_sum",
    "SecureSum",
    "SMALL_ROUND",
]

@final
class GraphParameters:
    clients: int
    degree: int
    threshold: int

def parameters(
    clients: int, dropout_rate: float = 0.1, corrupt_rate: float = 0.1
) -> GraphParameters: ...

@final
class Graph:
    @staticmethod
    def complete(n: int) -> Graph: ...
    @staticmethod
    def harary(n: int, degree: int, seed: bytes | None = None) -> Graph: ...
    @property
    def degree(self) -> int: ...
    def __len__(self) -> int: ...
    def neighbours(self, client: int) -> list[int]: ...

@final
class Quantizer:
    def __new__(cls, clip: float, max_summands: int) -> Quantizer: ...
    @property
    def clip(self) -> float: ...
    @property
    def max_summands(self) -> int: ...
    def encode(self, values: npt.ArrayLike) -> npt.NDArray[np.uint32]: ...
    def decode_sum(self, total: npt.NDArray[np.uint32]) -> npt.NDArray[np.float64]: ...
    def sum_error_bound(self, summands: int) -> float: ...

@final
class StochasticQuantizer:
    def __new__(cls, clipping_range: float, quantization_range: int) -> StochasticQuantizer: ...
    def encode(self, values: npt.ArrayLike, multiplier: float = 1.0) -> npt.NDArray[np.uint32]: ...

@final
class Client:
    def __new__(
        cls,
        session: bytes,
        round: int,
        id: int,
        neighbours: Sequence[int],
        threshold: int,
        vector_len: int,
    ) -> Client: ...
    @property
    def advertisement(self) -> bytes: ...
    @property
    def id(self) -> int: ...
    @property
    def stage(self) -> str: ...
    def snapshot(self) -> bytes: ...
    @staticmethod
    def restore(state: bytes) -> Client: ...
    def share_keys(self, message: bytes) -> bytes: ...
    def mask_input(self, message: bytes, input: npt.NDArray[np.uint32]) -> bytes: ...
    def unmask(self, message: bytes, *, min_survivors: int = 0) -> bytes: ...
    def handle(self, message: bytes, input: npt.NDArray[np.uint32] | None = None) -> bytes: ...

@final
class Server:
    def __new__(
        cls, session: bytes, round: int, graph: Graph, threshold: int, vector_len: int
    ) -> Server: ...
    @property
    def stage(self) -> str: ...
    def receive(self, message: bytes) -> None: ...
    def close_stage(self) -> dict[int, bytes]: ...
    def finish(self) -> tuple[npt.NDArray[np.uint32], list[int]]: ...

SMALL_ROUND: int

def round_graph(
    n: int,
    *,
    sparse: bool,
    dropout_rate: float = 0.1,
    corrupt_rate: float = 0.1,
    seed: bytes,
) -> tuple[Graph, int]: ...

class SecureSum(NamedTuple):
    total: npt.NDArray[np.uint32]
    contributors: list[int]
    sent: dict[int, int]
    received: dict[int, int]

def secure_sum(
    inputs: Mapping[int, npt.NDArray[np.uint32]],
    *,
    drop: Mapping[int, int] | None = None,
    dropout_rate: float = 0.1,
    corrupt_rate: float = 0.1,
    round: int = 0,
) -> SecureSum: ...
