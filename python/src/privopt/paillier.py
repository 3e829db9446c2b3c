"""Paillier encryption with batch operations on numpy arrays, on every core.

>>> from privopt import paillier
>>> import numpy as np
>>> kp = paillier.KeyPair.generate(2048)
>>> enc = kp.public_key.encrypt(np.array([1, -2, 3]))
>>> kp.decrypt(enc * 5 + enc)
array([  6, -12,  18])

Reals travel as fixed-point integers (:meth:`PublicKey.encrypt_floats`): an
:class:`EncryptedArray` carries an exponent ``e`` and its plaintexts stand for ``m / 2**e``.
Plaintexts live modulo ``n``: results outside ``(-n/2, n/2)`` wrap around.
"""

from __future__ import annotations

from ._native import paillier as _native

KeyPair = _native.KeyPair
PublicKey = _native.PublicKey
EncryptedArray = _native.EncryptedArray

__all__ = ["KeyPair", "PublicKey", "EncryptedArray"]
