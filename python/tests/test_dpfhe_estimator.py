"""privopt.dpfhe.LogisticRegression: the estimator over the plan and the encrypted trainer."""

from __future__ import annotations

import numpy as np
import pytest

from privopt.dpfhe import LogisticRegression, load_task
from privopt.errors import ParameterError


@pytest.fixture(scope="module")
def task():
    # The built-in planted logistic task (15 features in [-1, 1]): no download.
    return load_task("synthetic", seed=3)


def test_load_task_gives_features_in_the_unit_box_without_the_bias(task):
    x_train, y_train, x_test, y_test = task
    assert x_train.shape == (4000, 15) and x_test.shape == (1000, 15)
    assert np.abs(x_train).max() <= 1.0 and not np.all(x_train[:, -1] == 1.0)
    assert set(np.unique(y_train)) == {0.0, 1.0} and y_test.shape == (1000,)
    again = load_task("synthetic", seed=3)
    assert all(np.array_equal(a, b) for a, b in zip(task, again))


@pytest.mark.parametrize("algorithm", ["noclip", "dpgd", "output"])
def test_each_algorithm_learns_the_planted_model_and_is_reproducible(task, algorithm):
    x_train, y_train, x_test, y_test = task
    clf = LogisticRegression(epsilon=1.0, algorithm=algorithm, steps=300, random_state=5)
    assert clf.fit(x_train, y_train) is clf
    # The majority class is ~half: a model that learned nothing scores ~0.5.
    assert clf.score(x_test, y_test) > 0.7, clf.score(x_test, y_test)
    assert clf.coef_.shape == (1, 15) and clf.intercept_.shape == (1,)
    assert clf.plan_["noclip_certified"] and clf.plan_["features"] == 16
    again = LogisticRegression(epsilon=1.0, algorithm=algorithm, steps=300, random_state=5)
    again.fit(x_train, y_train)
    np.testing.assert_array_equal(again.coef_, clf.coef_)
    other = LogisticRegression(epsilon=1.0, algorithm=algorithm, steps=300, random_state=6)
    assert not np.array_equal(other.fit(x_train, y_train).coef_, clf.coef_)


def test_more_privacy_budget_means_less_noise(task):
    x_train, y_train, *_ = task
    plans = [
        LogisticRegression(epsilon=eps, steps=200, random_state=0).fit(x_train, y_train).plan_
        for eps in (0.5, 4.0)
    ]
    assert plans[1]["sigma_dpgd"] < plans[0]["sigma_dpgd"]
    assert plans[1]["noise_std_noclip"] < plans[0]["noise_std_noclip"]


def test_predictions_follow_the_margins_and_keep_the_user_labels(task):
    x_train, y_train, x_test, _ = task
    labels = np.where(y_train == 1.0, "spam", "ham")
    clf = LogisticRegression(algorithm="dpgd", steps=200, random_state=0).fit(x_train, labels)
    assert list(clf.classes_) == ["ham", "spam"]
    margins = clf.decision_function(x_test)
    np.testing.assert_allclose(margins, x_test @ clf.coef_[0] + clf.intercept_[0])
    proba = clf.predict_proba(x_test)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_allclose(proba[:, 1], 1 / (1 + np.exp(-margins)))
    assert set(clf.predict(x_test)) <= {"ham", "spam"}
    assert np.array_equal(clf.predict(x_test) == "spam", margins > 0)


def test_encrypted_fit_follows_the_plaintext_fit_from_the_same_seed(task):
    x_train, y_train, x_test, _ = task
    # A short calibrated run: the certified step is larger, so three steps move the weights.
    common = {"epsilon": 1.0, "steps": 10, "batch_size": 100, "stop_after": 3, "random_state": 1}
    plain = LogisticRegression(**common).fit(x_train, y_train)
    enc = LogisticRegression(encrypted=True, threads=2, **common).fit(x_train, y_train)
    assert enc.plan_ == plain.plan_ and enc.n_iter_ == plain.n_iter_ == 3
    size = np.abs(plain.coef_).max()
    assert size > 5e-4, "the weights must move"
    # CKKS's error (scale 2^40, the polynomial sigmoid's leaves) is ~1e-6 on these weights.
    np.testing.assert_allclose(enc.coef_, plain.coef_, atol=size / 50)
    np.testing.assert_allclose(enc.intercept_, plain.intercept_, atol=size / 50)
    agree = np.mean(enc.predict(x_test) == plain.predict(x_test))
    assert agree >= 0.99, agree
    report = enc.encrypted_
    assert report is not None and plain.encrypted_ is None
    assert report["ring_dim"] == 1 << 15 and report["seconds_per_step"] > 0
    assert report["depth"] >= 5 and report["bootstraps"] == 0


def test_pandas_frames(task):
    pd = pytest.importorskip("pandas")
    x_train, y_train, x_test, _ = task
    frame = pd.DataFrame(x_train, columns=[f"f{i}" for i in range(15)])
    clf = LogisticRegression(steps=100, random_state=0).fit(frame, pd.Series(y_train))
    assert list(clf.feature_names_in_) == list(frame.columns)
    plain = LogisticRegression(steps=100, random_state=0).fit(x_train, y_train)
    np.testing.assert_array_equal(clf.coef_, plain.coef_)
    np.testing.assert_array_equal(clf.predict(pd.DataFrame(x_test)), plain.predict(x_test))


def test_sklearn_clone(task):
    base = pytest.importorskip("sklearn.base")
    x_train, y_train, *_ = task
    clf = LogisticRegression(epsilon=3.0, steps=100, random_state=0).fit(x_train, y_train)
    copy = base.clone(clf)
    assert copy.get_params() == clf.get_params() and not hasattr(copy, "coef_")


def test_params_round_trip():
    clf = LogisticRegression(epsilon=2.0)
    assert clf.get_params()["epsilon"] == 2.0
    assert clf.set_params(algorithm="dpgd", lr=0.5) is clf
    assert clf.algorithm == "dpgd" and "lr=0.5" in repr(clf)
    with pytest.raises(ParameterError, match="no parameter 'epsilom'"):
        clf.set_params(epsilom=1.0)


def test_bad_input_is_one_clear_error(task):
    x_train, y_train, *_ = task
    small = {"steps": 50, "random_state": 0}
    outside = x_train.copy()
    outside[7, 3] = 1.5
    with pytest.raises(ParameterError, match=r"feature 3 of example 7 is 1.5.*\[-1, 1\]"):
        LogisticRegression(**small).fit(outside, y_train)
    with pytest.raises(ParameterError, match="exactly two values"):
        LogisticRegression(**small).fit(x_train, np.arange(len(y_train)) % 3)
    with pytest.raises(ParameterError, match="one label per row"):
        LogisticRegression(**small).fit(x_train, y_train[:-1])
    with pytest.raises(ParameterError, match="2-D"):
        LogisticRegression(**small).fit(x_train[0], y_train[:1])
    with pytest.raises(ParameterError, match="epsilon must be > 0"):
        LogisticRegression(epsilon=0.0, **small).fit(x_train, y_train)
    with pytest.raises(ParameterError, match="algorithm must be"):
        LogisticRegression(algorithm="sgd", **small).fit(x_train, y_train)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="plaintext only"):
        LogisticRegression(algorithm="output", encrypted=True, **small).fit(x_train, y_train)
    with pytest.raises(ParameterError, match="bootstrap must be"):
        LogisticRegression(encrypted=True, bootstrap="n17", **small).fit(  # type: ignore[arg-type]
            x_train, y_train
        )
    with pytest.raises(ParameterError, match="stop_after must be >= 1"):
        LogisticRegression(stop_after=0, **small).fit(x_train, y_train)
    # A batch the encrypted layout cannot pack in one ciphertext.
    with pytest.raises(ParameterError, match="slots|batch"):
        LogisticRegression(encrypted=True, batch_size=4000, **small).fit(x_train, y_train)
    fitted = LogisticRegression(**small).fit(x_train, y_train)
    with pytest.raises(ParameterError, match="X has 14 features, but this model was fitted on 15"):
        fitted.predict(x_train[:, :14])
    with pytest.raises(AttributeError, match="not fitted yet"):
        LogisticRegression().predict(x_train)
