from __future__ import annotations

import numpy as np
import pytest

from privopt import paillier
from privopt.errors import (
    ComputationError,
    InsecureParameters,
    MalformedMessage,
    ParameterError,
)


def test_small_keys_need_an_explicit_opt_in():
    with pytest.raises(InsecureParameters):
        paillier.KeyPair.generate(1024)
    with pytest.raises(ParameterError):
        paillier.KeyPair.generate(1000, insecure=True)


def test_homomorphic_identities_match_numpy(small_pair, rng):
    pk = small_pair.public_key
    a = rng.integers(-(10**9), 10**9, 64)
    b = rng.integers(-(10**9), 10**9, 64)
    k = rng.integers(-1000, 1000, 64)
    ea, eb = pk.encrypt(a), small_pair.encrypt(b)
    np.testing.assert_array_equal(small_pair.decrypt(ea), a)
    np.testing.assert_array_equal(small_pair.decrypt(ea + eb), a + b)
    np.testing.assert_array_equal(small_pair.decrypt(ea - eb), a - b)
    np.testing.assert_array_equal(small_pair.decrypt(-ea), -a)
    np.testing.assert_array_equal(small_pair.decrypt(ea * k), a * k)
    np.testing.assert_array_equal(small_pair.decrypt(3 * ea), 3 * a)
    np.testing.assert_array_equal(small_pair.decrypt(ea.sum()), [a.sum()])
    np.testing.assert_array_equal(small_pair.decrypt(ea[5:10]), a[5:10])
    np.testing.assert_array_equal(small_pair.decrypt(ea + eb[0]), a + b[0])  # broadcast
    big = [2**200, -(2**300)]
    assert small_pair.decrypt_ints(pk.encrypt_ints(big)) == big
    with pytest.raises(ComputationError, match="int64"):
        small_pair.decrypt(pk.encrypt_ints(big))


def test_fixed_point_reals(small_pair, rng):
    x = rng.normal(size=32)
    w = rng.normal(size=32)
    ex = small_pair.public_key.encrypt_floats(x)
    assert ex.exponent == 32
    np.testing.assert_allclose(small_pair.decrypt_floats(ex), x, atol=2**-31)
    prod = ex.mul_floats(w)
    assert prod.exponent == 64
    np.testing.assert_allclose(small_pair.decrypt_floats(prod), x * w, atol=1e-8)
    # Sums of different exponents align exactly.
    mixed = prod + small_pair.encrypt(np.arange(32))
    np.testing.assert_allclose(small_pair.decrypt_floats(mixed), x * w + np.arange(32), atol=1e-8)
    with pytest.raises(ParameterError, match="decrypt_floats"):
        small_pair.decrypt(ex)


def test_keys_and_arrays_round_trip_and_tampering_is_refused(small_pair):
    pk = small_pair.public_key
    pair2 = paillier.KeyPair.from_bytes(small_pair.to_bytes())
    pk2 = paillier.PublicKey.from_bytes(pk.to_bytes())
    assert pk2 == pk and pk2.bits == 1024
    data = pk2.encrypt(np.array([5, -6, 7])).to_bytes()
    np.testing.assert_array_equal(
        pair2.decrypt(paillier.EncryptedArray.from_bytes(pk, data)), [5, -6, 7]
    )
    for bad in (data[:-1], data + b"\0", b"XXXX" + data[4:], data[:12] + b"\0" * (len(data) - 12)):
        with pytest.raises(MalformedMessage):
            paillier.EncryptedArray.from_bytes(pk, bad)
    other = paillier.KeyPair.generate(1024, insecure=True)
    with pytest.raises(ParameterError, match="another key"):
        other.decrypt(pk.encrypt(np.array([1])))
    with pytest.raises(ParameterError, match="different keys"):
        pk.encrypt(np.array([1])) + other.public_key.encrypt(np.array([1]))
    with pytest.raises(TypeError):
        pk.encrypt(np.array([1.5]))  # reals go through encrypt_floats, never truncated


def test_a_2048_bit_key_end_to_end():
    pair = paillier.KeyPair.generate(2048)
    x = np.arange(-50, 50)
    np.testing.assert_array_equal(pair.decrypt(pair.public_key.encrypt(x) * 2), 2 * x)


def test_products_are_rerandomized_and_factors_bounded(small_pair):
    # Finding 6 of the third adversarial pass: ``(enc * 0).to_bytes()`` held the ciphertext 1,
    # which shows the zero to anyone; factors of n/2 or more wrapped silently; a flipped bit
    # of an array's bytes decrypted to a wrong value.
    pk = small_pair.public_key
    enc = pk.encrypt(np.array([7, -3]))
    zero = enc * 0
    width = (pk.bits * 2 + 7) // 8
    one = (1).to_bytes(width, "big")
    body = zero.to_bytes()
    assert one not in body, "a product by 0 must not serialize as the ciphertext 1"
    assert one in zero.to_bytes(rerandomize=False), "the opt-out keeps the raw product"
    np.testing.assert_array_equal(
        small_pair.decrypt(paillier.EncryptedArray.from_bytes(pk, body)), [0, 0]
    )
    # Two serializations of one product differ; a fresh encryption is written as it is.
    assert (enc * 5).to_bytes() != (enc * 5).to_bytes()
    assert enc.to_bytes() == enc.to_bytes()
    with pytest.raises(ParameterError, match="below n/2"):
        enc * (pk.n // 2 + 1)
    with pytest.raises(ParameterError, match="below n/2"):
        enc * -(pk.n // 2 + 1)
    for i in range(0, len(body), 37):
        flipped = bytearray(body)
        flipped[i] ^= 0x10
        with pytest.raises(MalformedMessage):
            paillier.EncryptedArray.from_bytes(pk, bytes(flipped))
    other = paillier.KeyPair.generate(1024, insecure=True).public_key
    with pytest.raises(MalformedMessage, match="another public key"):
        paillier.EncryptedArray.from_bytes(other, body)
