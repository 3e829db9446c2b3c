"""EEZOFL's digital path (the EEZOFL paper): each round every device sends one scalar encrypted under
a multi-key CKKS key nobody holds whole; the server sums the ciphertexts, every device sends a
decryption share of the sum, and the server learns the sum of the scalars only.

Setup::

    crs = privopt.ckks.multiparty.CommonPoly(params, seed)   # the server's public seed
    devices = [Device(i, params, crs) for i in ids]
    server = Server(params, crs, ids, [d.key_share for d in devices])
    for d in devices: d.set_key(server.relay)

Each round ``r``::

    total = server.sum([d.encrypt(r, x_d) for d in devices])
    value = server.fuse([d.decryption_share(total) for d in devices])

On this N-of-N key every member's upload and share is needed: a missing one fails the round
with a :class:`~privopt.errors.ProtocolError` naming the device. A **threshold key** survives
``N − t`` dropouts without re-keying: after ``set_key``, the devices re-share their secrets
(each share sealed to its recipient; the server relays bytes it cannot open)::

    t = default_threshold(len(devices))                  # two thirds, rounded up
    keys = [d.start_threshold(t, session) for d in devices]
    sealed = [d.deal_threshold(keys) for d in devices]   # {recipient: bytes} each
    for d in devices: d.finish_threshold([s[d.id] for s in sealed])
    server.use_threshold(t)

and each round sums any ``t`` uploads, fixes the ``t`` devices that decrypt among those still
present, and asks only them, once::

    total = server.sum(uploads)
    active = server.active_set(present)                  # fewer than t: abandon the round
    value = server.fuse([d.threshold_share(total, active) for d in asked])

A device answers for a ciphertext once, whatever the set or server asking; a failed round is
``server.abandon()``-ed and the next is a fresh encryption. With :class:`Schedule` ``s``, a device's scalar of round ``r`` is its two-point
difference along ``direction(seed, r)`` at radius ``s.gamma(r)``, and every party moves the
model by ``−s.eta(r)·value/devices`` along it. The over-the-air variant (sums formed by a
fading channel) is simulated by the ``privopt`` CLI and not exposed here.
"""

from __future__ import annotations

from .._native import eezofl as _native

Device = _native.Device
Server = _native.Server
Schedule = _native.Schedule
direction = _native.direction
perturb = _native.perturb
default_threshold = _native.default_threshold
DEFAULTS: dict[str, float] = dict(_native.DEFAULTS)

__all__ = [
    "DEFAULTS",
    "Device",
    "Schedule",
    "Server",
    "default_threshold",
    "direction",
    "perturb",
]
