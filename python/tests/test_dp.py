from __future__ import annotations

import math

import pytest

from privopt import dp
from privopt.errors import ParameterError
from privopt.ledger import PrivacyLedger


def test_full_batch_gaussian_matches_the_closed_form():
    # One full-batch Gaussian step: RDP of order α is α/(2σ²); the classic conversion
    # minimises α/(2σ²) + log(1/δ)/(α − 1) over the order grid, bounded below by the optimum.
    sigma, delta = 4.0, 1e-5
    eps = dp.epsilon(sigma, 1, delta, accountant="rdp_classic")
    best = 1 / (2 * sigma**2) + math.sqrt(2 * math.log(1 / delta)) / sigma
    assert best <= eps <= best * 1.05
    # zCDP agrees to within the conversions' slack.
    assert abs(dp.epsilon(sigma, 1, delta, accountant="zcdp") - eps) / eps < 0.1


def test_epsilon_is_monotone_and_calibration_inverts_it():
    base = dict(steps=1000, delta=1e-5, q=0.01)
    eps = [dp.epsilon(s, **base) for s in (0.8, 1.0, 1.5, 3.0)]
    assert all(a > b for a, b in zip(eps, eps[1:]))
    assert dp.epsilon(1.0, 2000, 1e-5, q=0.01) > dp.epsilon(1.0, 1000, 1e-5, q=0.01)
    # Replace-one adjacency (fixed-size batches) costs more than add/remove (Poisson).
    assert dp.epsilon(1.0, 1000, 1e-5, q=0.01, sampling="without_replacement") > eps[1]
    sigma = dp.noise_multiplier(2.0, **base)
    assert dp.epsilon(sigma, **base) <= 2.0 < dp.epsilon(sigma * 0.99, **base)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(sigma=1.0, steps=10, delta=1e-5, q=0.0),
        dict(sigma=1.0, steps=10, delta=1e-5, q=0.1, sampling="shuffle"),
        dict(sigma=1.0, steps=10, delta=1e-5, q=1.0, sampling="shuffle"),
        dict(sigma=1.0, steps=10, delta=1e-5, accountant="pld"),
        dict(sigma=1.0, steps=0, delta=1e-5),
        dict(sigma=1.0, steps=10, delta=1e-5, q=0.1, accountant="zcdp"),
        dict(sigma=-1.0, steps=10, delta=1e-5),
    ],
)
def test_bad_arguments_raise_parameter_errors(kwargs):
    with pytest.raises(ParameterError):
        dp.epsilon(**kwargs)


def test_the_ledger_admits_within_budget_counting_releases_still_pending():
    sigma, delta = 2.0, 1e-5
    after = [dp.epsilon(sigma / math.sqrt(k), 1, delta, sampling="full") for k in (1, 2, 3)]
    ledger = PrivacyLedger(3, delta, max_epsilon=(after[1] + after[2]) / 2)  # room for 2
    ledger.record(1, [0, 1], sigma)
    # Client 1 was admitted to a release not yet recorded: one more would be its third.
    admitted, stopped = ledger.admit([0, 1, 2], sigma, pending=[1])
    assert (admitted, stopped) == ([0, 2], [1])
    assert "dome.max_epsilon" in ledger.stop_reason(1, "dome.max_epsilon")
    assert f"{after[0]:.4g}" in ledger.stop_reason(1)
    # A client stopped once is in neither list from then on.
    assert ledger.admit([0, 1, 2], sigma) == ([0, 2], [])
    ledger.record(2, [0, 2], sigma)
    assert ledger.admit([0, 1, 2], sigma) == ([2], [0])  # 0 at 2 releases, 2 at 1
