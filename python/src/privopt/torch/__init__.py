"""privopt's methods on any PyTorch model (``pip install "privopt[torch]"``).

One adapter per method takes a :class:`torch.nn.Module` and a choice of its parameters to that
method's client role; the protocol underneath is unchanged (the same messages, the same Rust
roles as :mod:`privopt.protocols`):

- :class:`ZerothOrderClient` — DeComFL and HiSo: the module is perturbed in place from the
  round's seeds and restored (MeZO-style: no copy of the model); only scalars leave.
- :class:`EezoflDevice` — EEZOFL's device: the two-point scalar along the round's public
  direction, taken in place, encrypted by its xMK-CKKS device.
- :class:`DomeClient` / :class:`DomeServer` — DOME: the client's gradient from autograd,
  released through the sketch (and SecAgg+); the server's debiased Adam writes the module.
- :class:`PdsgdAgent` — Paillier decentralized SGD: the agent's state is the module's
  parameters, its gradient step comes from autograd.
- :class:`ParameterSet` — the flat view all of them share: which parameters, in what order,
  read and written window by window so a large model never needs a second full copy.
"""

from __future__ import annotations

import importlib.util

if importlib.util.find_spec("torch") is None:  # pragma: no cover - only without the extra
    raise ImportError(
        'privopt.torch needs PyTorch: pip install "privopt[torch]" (or pip install torch)'
    )

from ._params import ParameterSet, Selection
from .dome import DomeClient, DomeServer
from .eezofl import EezoflDevice
from .losses import LossFn, evaluate_loss
from .pdsgd import PdsgdAgent, Schedule
from .zeroth_order import ZerothOrderClient, ZerothOrderServer

__all__ = [
    "DomeClient",
    "DomeServer",
    "EezoflDevice",
    "LossFn",
    "ParameterSet",
    "PdsgdAgent",
    "Schedule",
    "Selection",
    "ZerothOrderClient",
    "ZerothOrderServer",
    "evaluate_loss",
]
