from __future__ import annotations

from typing import Any

import pytest

BASE: dict[str, Any] = {
    "seed": 0,
    "clients": 5,
    "eval-every": 1,
    # A stage on localhost costs a few seconds per message (the SuperNode polls every 3 s when
    # idle, and each message starts a fresh ClientApp process), more with two tests sharing 2
    # cores: at 15 s a live party was sometimes reported missing. Killed parties cost one
    # deadline each.
    "stage-timeout": 45.0,
    "join-timeout": 60.0,
    "data.dataset": "synthetic_logistic",
    "data.n_train": 1000,
    "data.n_test": 300,
    "data.dim": 10,
    "model.kind": "logistic",
}


@pytest.fixture
def scalar_config() -> dict[str, Any]:
    return {
        **BASE,
        "method": "scalar_fl",
        "rounds": 12,
        "scalar_fl.lr": 0.05,
        "scalar_fl.local_steps": 2,
        "scalar_fl.perturbations": 4,
    }


@pytest.fixture
def dome_config() -> dict[str, Any]:
    return {**BASE, "method": "dome", "rounds": 6, "dome.lr": 0.05, "debug.reveal-inputs": True}


@pytest.fixture
def eezofl_config() -> dict[str, Any]:
    return {**BASE, "method": "eezofl", "rounds": 10}


@pytest.fixture
def pdsgd_config() -> dict[str, Any]:
    return {**BASE, "method": "pdsgd", "clients": 3, "rounds": 8, "eval-every": 4}


@pytest.fixture
def dpfhe_config() -> dict[str, Any]:
    # A 2^12 ring (insecure, opted in) keeps tests fast; the default is the 128-bit 2^15 ring.
    return {
        **BASE,
        "method": "dpfhe",
        "clients": 1,
        "rounds": 4,
        "eval-every": 2,
        "dpfhe.ring_n": 4096,
        "dpfhe.insecure": True,
        "dpfhe.batch": 32,
    }
