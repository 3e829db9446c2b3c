"""The federated methods' roles, driven by bytes: each role takes the bytes a peer sent and
returns the bytes to send back, so any transport (sockets, Flower messages, files) carries them.

- :mod:`privopt.protocols.scalar_fl` — DeComFL / HiSo (paper 003): only seeds and scalars
  travel; the client's loss is a Python callable.
- :mod:`privopt.protocols.pdsgd` — Paillier decentralized SGD (paper 001): the agents'
  pairwise encrypted exchange of quantized states.
"""

from __future__ import annotations

from . import pdsgd, scalar_fl

__all__ = ["pdsgd", "scalar_fl"]
