from typing import Literal

__all__ = ["epsilon", "noise_multiplier"]

Sampling = Literal["poisson", "without_replacement", "full"]
AccountantName = Literal["rdp", "rdp_classic", "zcdp"]

def epsilon(
    sigma: float,
    steps: int,
    delta: float,
    q: float = 1.0,
    sampling: Sampling = "poisson",
    accountant: AccountantName = "rdp",
) -> float: ...
def noise_multiplier(
    epsilon: float,
    steps: int,
    delta: float,
    q: float = 1.0,
    sampling: Sampling = "poisson",
    accountant: AccountantName = "rdp",
) -> float: ...
