from __future__ import annotations

import numpy as np
import pytest

from privopt.errors import ParameterError
from privopt.problem import Problem

DATA = {"dataset": "synthetic_logistic", "clients": 4, "n_train": 400, "n_test": 100, "dim": 6}


def test_partition_covers_the_training_set_and_the_seed_fixes_it():
    p = Problem(DATA, {"kind": "logistic"}, seed=1)
    assert p.clients == 4 and p.n_features == 6 and p.sizes == (400, 100)
    parts = [p.client_indices(c) for c in range(p.clients)]
    joined = np.sort(np.concatenate(parts))
    np.testing.assert_array_equal(joined, np.arange(400))
    q = Problem(DATA, {"kind": "logistic"}, seed=1)
    np.testing.assert_array_equal(q.client_indices(2), parts[2])
    r = Problem(DATA, {"kind": "logistic"}, seed=2)
    assert not np.array_equal(r.client_indices(2), parts[2])


def test_gradient_matches_finite_differences_and_descent_learns():
    p = Problem(DATA, {"kind": "logistic", "l2": 1e-3})
    w = p.init_params(0)
    idx = p.client_indices(0)[:50]
    loss, g = p.loss_grad(w, idx)
    assert loss == pytest.approx(p.loss(w, idx))
    e = np.zeros_like(w)
    for j in range(len(w)):
        e[:] = 0
        e[j] = 1e-6
        fd = (p.loss(w + e, idx) - p.loss(w - e, idx)) / 2e-6
        assert g[j] == pytest.approx(fd, rel=1e-4, abs=1e-7)
    _, acc0 = p.evaluate(w)
    for _ in range(200):
        w = w - 0.5 * p.loss_grad(w)[1]
    _, acc = p.evaluate(w)
    assert acc > max(acc0, 0.8)


def test_bad_tables_and_inputs_raise_one_line_errors():
    with pytest.raises(ParameterError, match="data"):
        Problem({"dataset": "synthetic_logistic", "clinets": 3}, {"kind": "logistic"})
    with pytest.raises(ParameterError, match="unknown dataset"):
        Problem({"dataset": "nope"}, {"kind": "logistic"})
    with pytest.raises(ParameterError, match="model"):
        Problem(DATA, {"kind": "forest"})
    p = Problem(DATA, {"kind": "logistic"})
    with pytest.raises(ParameterError, match="finite"):
        p.loss(np.zeros(3))
    with pytest.raises(ParameterError, match="outside"):
        p.loss(p.init_params(0), np.array([10**6], dtype=np.uint64))
    with pytest.raises(ParameterError, match="client 9"):
        p.client_indices(9)
