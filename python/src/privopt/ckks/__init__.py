"""CKKS: approximate arithmetic on encrypted real vectors.

>>> from privopt import ckks
>>> ctx = ckks.Context(ckks.Params.leveled(8192, 60, 40, 2))
>>> sk = ckks.SecretKey.generate(ctx)
>>> ctx.set_keys(relin_key=sk.relin_key())
>>> ct = sk.public_key().encrypt([1.0, 2.0, 3.0])
>>> sk.decrypt(ct * ct + 1.0).round(4)
array([ 2.,  5., 10.])

A ciphertext holds as many values as were encrypted (``len(ct)``) and ``decrypt`` returns
them; its operators (``+``, ``-``, ``*`` with a ciphertext, a number or an array of its
length, ``dot``, ``sum``) use the keys given to its context by ``set_keys``. An
:class:`Evaluator` does the same with keys and threads of its own.

:class:`Bootstrapper` refreshes a ciphertext that ran out of levels (128-bit presets
``"n15"`` and ``"n16"``); its keys, :class:`BootstrapKeys`, come from the secret key's owner.

Parameters are checked against the homomorphic-encryption standard's 128-bit table;
``insecure=True`` turns the check off for tests. Every object is tied to the parameters it
was made under, and mixing sets raises :class:`~privopt.errors.ParameterError`.
"""

from __future__ import annotations

from .._native import ckks as _native
from . import multiparty  # noqa: E402  (re-exported as privopt.ckks.multiparty)

Params = _native.Params
Context = _native.Context
SecretKey = _native.SecretKey
PublicKey = _native.PublicKey
RelinKey = _native.RelinKey
GaloisKeys = _native.GaloisKeys
Ciphertext = _native.Ciphertext
Evaluator = _native.Evaluator
Bootstrapper = _native.Bootstrapper
BootstrapKeys = _native.BootstrapKeys

__all__ = [
    "multiparty",
    "Params",
    "Context",
    "SecretKey",
    "PublicKey",
    "RelinKey",
    "GaloisKeys",
    "Ciphertext",
    "Evaluator",
    "Bootstrapper",
    "BootstrapKeys",
]
