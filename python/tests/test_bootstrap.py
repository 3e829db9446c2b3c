"""privopt.ckks.Bootstrapper on small insecure parameters (n = 2^12, a sparse secret): quick
enough for every test run; the 128-bit presets run in examples/ckks_bootstrap.py."""

from __future__ import annotations

import numpy as np
import pytest

from privopt import ckks
from privopt.errors import ComputationError, MalformedMessage, ParameterError


@pytest.fixture(scope="module")
def setup():
    params = ckks.Params.leveled(4096, 60, 50, 19, [60, 60, 60], insecure=True, secret_weight=64)
    boot = ckks.Bootstrapper.with_params(params)
    sk = ckks.SecretKey.generate(boot.context)
    return boot, sk, boot.keys(sk)


def values(n: int, seed: float = 0.0) -> np.ndarray:
    return np.sin((np.arange(n) + seed) * 0.731)


def test_a_ciphertext_out_of_levels_comes_back_with_its_slots(setup):
    boot, sk, keys = setup
    v = values(boot.slots)
    ct = sk.encrypt(v, level=0)
    fresh = boot.bootstrap(ct, keys)
    assert ct.level == 0 and fresh.level == boot.output_level >= 1
    err = np.abs(sk.decrypt(fresh) - v).max()
    assert -np.log2(err) >= 14, err
    # It computes again: a product by a constant at the new level.
    np.testing.assert_allclose(sk.decrypt(fresh * 2.0), 2 * v, atol=4 * err)


def test_the_output_modulus_and_failure_probability_are_the_parameters(setup):
    boot, _, _ = setup
    # 19 levels of 50-bit primes above q_0: the output keeps `output_level` of them.
    assert boot.output_bits == pytest.approx(50 * boot.output_level, abs=0.01 * boot.output_level)
    # Weight 64: ModRaise's overflow is a sum of 65 uniforms, K = ceil(6·sqrt(65/12)) = 14;
    # P(|sum| > 14.5) = 1.3249915557e-10 by exact rationals, over n = 4096 coefficients.
    assert boot.failure_probability == pytest.approx(4096 * 1.3249915557073874e-10, rel=1e-6)
    sparse = ckks.Bootstrapper.with_params(boot.context.params, slots=64)
    assert sparse.failure_probability == pytest.approx(128 * 1.3249915557073874e-10, rel=1e-6)


def test_a_failure_target_widens_evalmod_and_still_bootstraps(setup):
    boot, sk, _ = setup
    safe = ckks.Bootstrapper.with_params(boot.context.params, failure_bits=40)
    assert safe.failure_probability <= 2.0**-40 < boot.failure_probability
    v = values(safe.slots, 5.0)
    fresh = safe.bootstrap(sk.encrypt(v, level=0), safe.keys(sk))
    assert -np.log2(np.abs(sk.decrypt(fresh) - v).max()) >= 13
    for bad in (0.0, -5.0, 1e9, float("nan")):
        with pytest.raises(ParameterError, match="failure_bits"):
            ckks.Bootstrapper.with_params(boot.context.params, failure_bits=bad)


def test_keys_round_trip_through_bytes_and_refuse_damage(setup):
    boot, sk, keys = setup
    data = keys.to_bytes()
    again = ckks.BootstrapKeys.from_bytes(boot, data)
    assert again.nbytes == keys.nbytes and again.key_id == keys.key_id == sk.key_id
    ct = sk.encrypt(values(boot.slots, 1.0), level=0)
    np.testing.assert_array_equal(
        sk.decrypt(boot.bootstrap(ct, again)), sk.decrypt(boot.bootstrap(ct, keys))
    )
    with pytest.raises(MalformedMessage):
        ckks.BootstrapKeys.from_bytes(boot, data[:-10])
    with pytest.raises(MalformedMessage):
        ckks.BootstrapKeys.from_bytes(boot, b"not keys" + data[8:])


def test_another_secrets_keys_or_parameters_are_refused(setup):
    boot, _, keys = setup
    other = ckks.SecretKey.generate(boot.context)
    ct = other.encrypt(values(boot.slots), level=0)
    with pytest.raises(ParameterError):
        boot.bootstrap(ct, keys)
    plain = ckks.Context(ckks.Params.leveled(8192, 60, 40, 2))
    with pytest.raises(ParameterError, match="other parameters"):
        boot.keys(ckks.SecretKey.generate(plain))


def test_sparse_packing_bootstraps_repeated_slots(setup):
    boot, sk, _ = setup
    sparse = ckks.Bootstrapper.with_params(boot.context.params, slots=64)
    keys = sparse.keys(sk)
    v = np.tile(values(64, 2.0), boot.context.slots // 64)
    fresh = sparse.bootstrap(sk.encrypt(v, level=0), keys)
    assert -np.log2(np.abs(sk.decrypt(fresh) - v).max()) >= 12


def test_bad_presets_and_shallow_parameters_are_one_clear_error():
    with pytest.raises(ParameterError, match="'n15', 'n16', 'n16-stc-first'"):
        ckks.Bootstrapper("n17")  # type: ignore[arg-type]
    shallow = ckks.Params.leveled(4096, 60, 50, 5, [60, 60], insecure=True, secret_weight=64)
    with pytest.raises(ParameterError, match="level"):
        ckks.Bootstrapper.with_params(shallow)


def test_one_thread_and_two_give_the_same_bits(setup):
    boot, sk, _ = setup
    ct = sk.encrypt(values(boot.slots, 3.0), level=0)
    data = boot.keys(sk).to_bytes()
    one = ckks.BootstrapKeys.from_bytes(boot, data, threads=1)
    two = ckks.BootstrapKeys.from_bytes(boot, data, threads=2)
    assert boot.bootstrap(ct, one).to_bytes() == boot.bootstrap(ct, two).to_bytes()
    with pytest.raises(ParameterError, match="threads"):
        ckks.BootstrapKeys.from_bytes(boot, data, threads=0)


def test_slots_to_coeffs_first_takes_inputs_at_its_input_level(setup):
    usual, sk, _ = setup
    boot = ckks.Bootstrapper.with_params(usual.context.params, slots_to_coeffs_first=True)
    assert usual.input_level == 0 and boot.input_level == 3
    # No arcsine in these defaults: EvalMod's output factor costs the one level.
    assert boot.output_level - boot.input_level == usual.output_level - 1
    assert boot.output_bits == pytest.approx(50 * (usual.output_level - 1), rel=1e-3)
    keys = boot.keys(sk)
    v = values(boot.slots, 4.0)
    fresh = boot.bootstrap(sk.encrypt(v, level=boot.input_level + 1), keys)
    assert fresh.level == boot.output_level
    assert -np.log2(np.abs(sk.decrypt(fresh) - v).max()) >= 14
    with pytest.raises(ComputationError, match="level 3 or above"):
        boot.bootstrap(sk.encrypt(v, level=0), keys)
    # Sparse packing too: one EvalMod, the mask folded into its last polynomial.
    sparse = ckks.Bootstrapper.with_params(
        usual.context.params, slots=64, slots_to_coeffs_first=True
    )
    assert sparse.input_level == 3 and sparse.output_level == boot.output_level
    w = np.tile(values(64, 2.0), boot.context.slots // 64)
    out = sparse.bootstrap(sk.encrypt(w, level=sparse.input_level), sparse.keys(sk))
    assert -np.log2(np.abs(sk.decrypt(out) - w).max()) >= 14
