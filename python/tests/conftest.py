"""Shared fixtures: one CKKS context (building one takes a moment) and small keys."""

from __future__ import annotations

import numpy as np
import pytest

from privopt import ckks, paillier


@pytest.fixture(scope="session")
def ctx() -> ckks.Context:
    # TenSEAL's default chain: a 60-bit base prime, two 40-bit levels, one 60-bit special prime.
    return ckks.Context(ckks.Params.leveled(8192, 60, 40, 2))


@pytest.fixture(scope="session")
def keys(ctx: ckks.Context):
    sk = ckks.SecretKey.generate(ctx)
    rotations = [1, 2, 4, 8, -3]
    ev = ckks.Evaluator(ctx, relin_key=sk.relin_key(), galois_keys=sk.galois_keys(rotations))
    return sk, sk.public_key(), ev


@pytest.fixture(scope="session")
def small_pair() -> paillier.KeyPair:
    # 1024-bit keys keep the tests fast; the 2048-bit path is exercised once in its own test.
    return paillier.KeyPair.generate(1024, insecure=True)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(7)
