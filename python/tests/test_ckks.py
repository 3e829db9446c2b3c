from __future__ import annotations

import numpy as np
import pytest

from privopt import ckks
from privopt.errors import ComputationError, InsecureParameters, MalformedMessage, ParameterError

TOL = 1e-4


def test_parameters_are_checked_against_the_128_bit_table():
    with pytest.raises(InsecureParameters, match="insecure=True"):
        ckks.Params(4096, [60, 60, 60])
    weak = ckks.Params(4096, [60, 60, 60], insecure=True)
    assert weak.is_insecure
    secure = ckks.Params.leveled(8192, 60, 40, 2)
    assert not secure.is_insecure and secure.log_qp <= 218
    assert secure.slots == 4096 and secure.max_level == 2
    with pytest.raises(ParameterError):
        ckks.Params(0, [40])


def test_encrypt_decrypt_and_arithmetic_match_numpy(ctx, keys, rng):
    sk, pk, ev = keys
    a, b = rng.uniform(-2, 2, 4096), rng.uniform(-2, 2, 4096)
    ca, cb = pk.encrypt(a), sk.encrypt(b)
    np.testing.assert_allclose(sk.decrypt(ca), a, atol=TOL)
    np.testing.assert_allclose(sk.decrypt(ev.add(ca, cb)), a + b, atol=TOL)
    np.testing.assert_allclose(sk.decrypt(ev.sub(ca, cb)), a - b, atol=TOL)
    np.testing.assert_allclose(sk.decrypt(ev.negate(ca)), -a, atol=TOL)
    prod = ev.multiply(ca, cb)
    assert prod.level == ca.level - 1
    np.testing.assert_allclose(sk.decrypt(prod), a * b, atol=TOL)
    np.testing.assert_allclose(sk.decrypt(ev.square(ca)), a * a, atol=TOL)
    np.testing.assert_allclose(sk.decrypt(ev.mul_plain(ca, b)), a * b, atol=TOL)
    np.testing.assert_allclose(sk.decrypt(ev.add_plain(ca, b)), a + b, atol=TOL)
    np.testing.assert_allclose(sk.decrypt(ev.mul_scalar(ca, -0.5)), -0.5 * a, atol=TOL)
    np.testing.assert_allclose(sk.decrypt(ev.add_scalar(ca, 3.0)), a + 3.0, atol=TOL)
    # Depth two: (a·b)·a uses both levels.
    np.testing.assert_allclose(
        sk.decrypt(ev.multiply(prod, ev.drop_to_level(ca, prod.level))), a * b * a, atol=1e-3
    )


def test_rotations_sums_and_dot_products(keys, rng):
    sk, pk, ev = keys
    a, b = rng.uniform(-1, 1, 4096), rng.uniform(-1, 1, 4096)
    ca, cb = pk.encrypt(a), pk.encrypt(b)
    np.testing.assert_allclose(sk.decrypt(ev.rotate(ca, 1)), np.roll(a, -1), atol=TOL)
    np.testing.assert_allclose(sk.decrypt(ev.rotate(ca, -3)), np.roll(a, 3), atol=TOL)
    windows = sk.decrypt(ev.sum(ca, width=16))
    np.testing.assert_allclose(windows[::16], a.reshape(-1, 16).sum(axis=1), atol=1e-3)
    dots = sk.decrypt(ev.dot(ca, cb, width=16))
    np.testing.assert_allclose(dots[::16], (a * b).reshape(-1, 16).sum(axis=1), atol=1e-3)
    with pytest.raises(ComputationError, match="rotation by 5"):
        ev.rotate(ca, 5)


def test_polynomials_in_power_and_chebyshev_bases(keys, rng):
    sk, pk, ev = keys
    x = rng.uniform(-1, 1, 4096)
    cx = pk.encrypt(x)
    got = sk.decrypt(ev.polynomial(cx, [0.5, -1.0, 0.25]))
    np.testing.assert_allclose(got, 0.5 - x + 0.25 * x**2, atol=1e-3)
    coeffs = [0.1, 0.2, 0.3]  # 0.1·T0 + 0.2·T1 + 0.3·T2 on [-1, 1]
    got = sk.decrypt(ev.polynomial(cx, coeffs, domain=(-1.0, 1.0)))
    np.testing.assert_allclose(got, np.polynomial.chebyshev.chebval(x, coeffs), atol=1e-3)
    with pytest.raises(ComputationError):
        ev.polynomial(cx, np.ones(40))  # degree 39 needs more than two levels
    with pytest.raises(ParameterError):
        ev.polynomial(cx, [1.0, 2.0], domain=(1.0, -1.0))


def test_keys_and_ciphertexts_round_trip_through_bytes(ctx, keys, rng):
    sk, pk, ev = keys
    x = rng.uniform(-1, 1, 100)
    sk2 = ckks.SecretKey.from_bytes(ctx, sk.to_bytes())
    pk2 = ckks.PublicKey.from_bytes(ctx, pk.to_bytes())
    ct = ckks.Ciphertext.from_bytes(ctx, pk2.encrypt(x).to_bytes())
    np.testing.assert_allclose(sk2.decrypt(ct, length=100), x, atol=TOL)
    rk = ckks.RelinKey.from_bytes(ctx, sk.relin_key().to_bytes())
    gk = ckks.GaloisKeys.from_bytes(ctx, sk.galois_keys([1]).to_bytes())
    ev2 = ckks.Evaluator(ctx, relin_key=rk, galois_keys=gk, threads=1)
    np.testing.assert_allclose(
        sk.decrypt(ev2.rotate(ev2.multiply(ct, ct), 1), length=99), (x * x)[1:], atol=TOL
    )


def test_ciphertexts_and_keys_of_another_secret_are_refused(ctx, keys):
    sk, pk, ev = keys
    stranger = ckks.SecretKey.generate(ctx)
    assert stranger.key_id != sk.key_id
    mine = pk.encrypt([1.0, 2.0])
    theirs = stranger.public_key().encrypt([1.0, 2.0])
    assert mine.key_id == sk.key_id
    # The id survives the bytes, so a reloaded ciphertext is still refused.
    theirs = ckks.Ciphertext.from_bytes(ctx, theirs.to_bytes())
    assert theirs.key_id == stranger.key_id
    with pytest.raises(ParameterError, match="another secret key"):
        ev.add(mine, theirs)
    with pytest.raises(ParameterError, match="another secret key"):
        ev.multiply(theirs, theirs)
    with pytest.raises(ParameterError, match="another secret key"):
        sk.decrypt(theirs)
    with pytest.raises(ParameterError, match="two secrets"):
        ckks.Evaluator(ctx, relin_key=stranger.relin_key(), galois_keys=sk.galois_keys([1]))


def test_bad_bytes_and_mixed_parameters_are_refused(ctx, keys):
    sk, pk, ev = keys
    data = pk.encrypt([1.0]).to_bytes()
    for bad in (b"", data[:-1], data + b"\0", b"XXXX" + data[4:]):
        with pytest.raises(MalformedMessage):
            ckks.Ciphertext.from_bytes(ctx, bad)
    flipped = bytearray(data)
    flipped[-1] ^= 0xFF  # a residue pushed out of range
    with pytest.raises(MalformedMessage):
        ckks.Ciphertext.from_bytes(ctx, bytes(flipped))
    other = ckks.Context(ckks.Params.leveled(8192, 50, 40, 2, special_bits=[50]))
    with pytest.raises(MalformedMessage, match="other parameters"):
        ckks.Ciphertext.from_bytes(other, data)
    foreign = ckks.SecretKey.generate(other).public_key().encrypt([1.0])
    with pytest.raises(ParameterError, match="other parameters"):
        ev.add(foreign, pk.encrypt([1.0]))
    with pytest.raises(ParameterError):
        sk.decrypt(foreign)
    with pytest.raises(ParameterError, match="slots"):
        pk.encrypt(np.zeros(4097))
    with pytest.raises(ParameterError):
        ckks.Evaluator(ctx, threads=0)


@pytest.fixture(scope="module")
def keyed() -> tuple[ckks.Context, ckks.SecretKey]:
    ctx = ckks.Context(ckks.Params.leveled(8192, 60, 40, 2))
    sk = ckks.SecretKey.generate(ctx)
    rotations = [1 << i for i in range(ctx.slots.bit_length() - 1)]
    ctx.set_keys(relin_key=sk.relin_key(), galois_keys=sk.galois_keys(rotations), threads=1)
    return ctx, sk


def test_operators_match_numpy(keyed, rng):
    ctx, sk = keyed
    x, y = rng.uniform(-1, 1, 50), rng.uniform(-1, 1, 50)
    a, b = sk.encrypt(x), ckks.Ciphertext.from_bytes(ctx, sk.public_key().encrypt(y).to_bytes())
    assert len(a) == 50 and len(b) == 50
    cases = {
        "a + b": (a + b, x + y),
        "a - b": (a - b, x - y),
        "a * b": (a * b, x * y),
        "a * 2.5": (a * 2.5, x * 2.5),
        "3 * a": (3 * a, 3 * x),
        "a + 1": (a + 1, x + 1),
        "1 - a": (1 - a, 1 - x),
        "a - y": (a - y, x - y),
        "y - a": (y - a, y - x),
        "a * y": (a * y, x * y),
        "y * a": (y * a, y * x),
        "x + a (ndarray first)": (x + a, 2 * x),
        "a + list": (a + list(y), x + y),
        "a * [2.0] broadcasts": (a * np.array([2.0]), 2 * x),
        "-a": (-a, -x),
        "(a * b) * 0.5 + a": ((a * b) * 0.5 + a, x * y * 0.5 + x),
    }
    for name, (ct, want) in cases.items():
        assert isinstance(ct, ckks.Ciphertext), name
        got = sk.decrypt(ct)
        assert got.shape == want.shape, name
        np.testing.assert_allclose(got, want, atol=TOL, err_msg=name)
    # Inner products and sums land in slot 0 and have length 1.
    for name, (ct, want) in {
        "a.dot(b)": (a.dot(b), x @ y),
        "a.dot(y)": (a.dot(y), x @ y),
        "ev.dot(a, y)": (ctx.evaluator.dot(a, y), x @ y),
        "a.sum()": (a.sum(), x.sum()),
    }.items():
        assert len(ct) == 1, name
        np.testing.assert_allclose(sk.decrypt(ct), [want], atol=1e-3, err_msg=name)
    # The evaluator's explicit methods agree with the operators, and decrypt's length= still
    # reads any number of slots.
    np.testing.assert_allclose(sk.decrypt(ctx.evaluator.multiply(a, b)), x * y, atol=TOL)
    assert sk.decrypt(a, length=ctx.slots).shape == (ctx.slots,)


def test_operators_refuse_what_numpy_would(keyed, rng):
    ctx, sk = keyed
    a = sk.encrypt(rng.uniform(-1, 1, 8))
    with pytest.raises(ParameterError, match="broadcast"):
        _ = a + np.ones(3)
    with pytest.raises(TypeError):
        _ = a + "one"
    with pytest.raises(TypeError):
        _ = a * np.ones((2, 4))
    with pytest.raises(TypeError):
        a.dot("x")
    # A context without keys: sums and plain products work, a ciphertext product names the key.
    bare = ckks.Context(ckks.Params.leveled(8192, 60, 40, 2))
    bare_sk = ckks.SecretKey.generate(bare)
    c = bare_sk.encrypt([1.0, 2.0])
    np.testing.assert_allclose(bare_sk.decrypt(c * 2.0 + c), [3.0, 6.0], atol=TOL)
    with pytest.raises(ComputationError, match="relinearization"):
        _ = c * c
    # Levels run out as products are taken: an error, not a wrong value.
    d = c * 1.0
    d = d * 1.0
    with pytest.raises(ComputationError):
        _ = d * 1.0
    # The length travels with the bytes, and a length beyond the slots is refused.
    back = ckks.Ciphertext.from_bytes(ctx, a.to_bytes())
    assert len(back) == 8
    assert repr(back).startswith("Ciphertext(len=8")
