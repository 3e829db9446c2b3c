"""The federated methods' roles, driven by bytes: each role takes the bytes a peer sent and
returns the bytes to send back, so any transport (sockets, Flower messages, files) carries them.

- :mod:`privopt.protocols.scalar_fl` — DeComFL / HiSo (the HiSo paper): only seeds and scalars
  travel; the client's loss is a Python callable.
- :mod:`privopt.protocols.dome` — DOME (the DOME paper): the server's debiased Adam on a learned
  sketch and a client's private release; the sum between them is a SecAgg+ round.
- :mod:`privopt.protocols.dpfhe` — DP training under FHE (the FHE paper): data owner and compute
  server of encrypted logistic-regression training.
- :mod:`privopt.protocols.eezofl` — EEZOFL's digital path (the EEZOFL paper): one xMK-CKKS-encrypted
  scalar per device per round, summed and fused.
- :mod:`privopt.protocols.pdsgd` — Paillier decentralized SGD (the Paillier D-SGD paper): the agents'
  pairwise encrypted exchange of quantized states.
"""

from __future__ import annotations

from . import dome, dpfhe, eezofl, pdsgd, scalar_fl

__all__ = ["dome", "dpfhe", "eezofl", "pdsgd", "scalar_fl"]
