"""Scalar-only federated learning (DeComFL and HiSo, the HiSo paper).

The server sends each round's plan (participants and one seed per local step) and, to each
participant, a catch-up (nothing, a replay of the rounds it missed, or the full model); the
participant answers with one scalar per local step and perturbation. The model never travels
after the start unless a client falls further behind than the staleness bound.

>>> spec = Spec(lr=1e-3, local_steps=1, perturbations=1)
>>> server = Server(spec, x0, clients=10)
>>> plan, who = server.begin_round(per_round=3)
>>> for i in who:
...     clients[i].receive(server.catch_up(i))
...     server.receive(clients[i].local_update(plan, loss_of_client[i]))
>>> server.finish_round()

With :class:`Privacy` (client-level DP), participants send :meth:`Participant.private_reply`
(clipped, noised, quantized scalars) into a SecAgg+ round instead of a reply, and the server
closes the round with the secure sum (:meth:`Server.finish_round_secure`): no one sees an
individual scalar, and the released sum carries the noise the settings call for.

:class:`Client` holds its model as a numpy vector. :class:`Participant` is the same client
for a model held elsewhere, e.g. a PyTorch module's tensors (``privopt.torch``): it checks
the messages and does the arithmetic window by window, in place.
"""

from __future__ import annotations

from .._native import scalar_fl as _native

Spec = _native.Spec
Server = _native.Server
Client = _native.Client
Catch = _native.Catch
Participant = _native.Participant
Privacy = _native.Privacy
round_participants = _native.round_participants
# The algorithm's constants (mu, nu, eps, weight_decay), from the Rust crate: the same the
# simulation and the Flower app use.
DEFAULTS: dict[str, float] = dict(_native.DEFAULTS)

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
