"""Shared fixtures: one CKKS context (building one takes a moment) and small keys."""

from __future__ import annotations

import os

import numpy as np
import pytest

from privopt import ckks, paillier
from privopt.text import data_dir


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


@pytest.fixture(scope="session")
def minilm_fetched() -> None:
    """Skips without the fetched model and snippets (CI fetches them: there it fails)."""
    missing = [n for n in ("minilm", "movie-snippets") if not (data_dir() / n).is_dir()]
    if missing:
        message = f"run `privopt data fetch {' '.join(missing)}` (PRIVOPT_DATA={data_dir()})"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
