"""Differentially private logistic regression, trained in the clear or by a server that sees
only CKKS ciphertexts (the FHE paper's Algorithms 3–5), as a scikit-learn style estimator::

    from privopt.dpfhe import LogisticRegression, load_task

    x_train, y_train, x_test, y_test = load_task("credit")   # features in [-1, 1]
    clf = LogisticRegression(epsilon=1.0, delta=1e-5).fit(x_train, y_train)
    clf.score(x_test, y_test)
    clf.plan_["noclip_eta"]        # the certified step size, as `privopt run` reports it

    enc = LogisticRegression(epsilon=1.0, encrypted=True, stop_after=5, verbose=True)
    enc.fit(x_train, y_train)      # the data owner's keys and the compute server, in-process

The privacy plan is the one ``privopt run`` makes for the paper's Table 4: the noise of every
algorithm is calibrated to (ε, δ) over its ``steps`` (exact Gaussian composition for full
batches, RDP with sampling without replacement for mini-batches), and the no-clip method's
step, barrier and polynomial sigmoid are certified by the paper's Theorem 3 (App. D.3's
search), or the fit raises. With ``random_state=s`` a fit equals ``privopt run`` of the
``dpfhe`` ``encrypted`` suite on the same data with ``seed = s``.

Features must lie in [-1, 1] (the sensitivity assumes it; scale with a data-independent
bound or, as the paper does, min-max scaling) and the labels must take two values.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from ._native import dpfhe_fit as _native
from .errors import ParameterError

__all__ = ["LogisticRegression", "load_task"]

Algorithm = Literal["noclip", "dpgd", "output"]
Bootstrap = Literal["n15", "n16", "n16-stc-first"]
FloatArray = npt.NDArray[np.float64]


def load_task(
    name: str, data_dir: str | os.PathLike[str] | None = None, seed: int = 0
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """One of the paper's tasks (``"mnist"`` 3-vs-8 on 49 PCA components, ``"adult"``,
    ``"compas"``, ``"credit"``, or the built-in ``"synthetic"``) preprocessed exactly as
    ``privopt run`` does for ``seed``: ``(x_train, y_train, x_test, y_test)``, features in
    [-1, 1] without a bias column, labels 0/1. Catalog datasets are read from ``data_dir``
    (default ``$PRIVOPT_DATA``, else ``data``) after ``privopt data fetch NAME``."""
    path = None if data_dir is None else os.fspath(data_dir)
    result: tuple[FloatArray, FloatArray, FloatArray, FloatArray] = _native.load_task(
        name, path, seed
    )
    return result


class LogisticRegression:
    """(ε, δ)-DP binary logistic regression; ``encrypted=True`` trains on CKKS ciphertexts.

    Parameters
    ----------
    epsilon, delta:
        The privacy target of the whole run (replace-one adjacency).
    algorithm:
        ``"noclip"`` (default): the paper's no-clip method with a barrier term (Algorithm 3;
        Algorithm 5 encrypted). ``"dpgd"``: DP-GD with per-example clipping at ``clip``
        (Algorithm 4 encrypted, with polynomial clipping). ``"output"``: output
        perturbation (plaintext only).
    encrypted:
        Train on ciphertexts: a data owner (secret key, in this process) encrypts each
        step's batch and pre-sampled noise, a compute server (evaluation keys only) runs the
        step. Without ``bootstrap`` the owner refreshes ciphertexts that run out of levels
        (n = 2^15, 128-bit); with ``bootstrap="n16"`` (or ``"n15"``, or
        ``"n16-stc-first"``: SlotsToCoeffs first, faster at the same levels) the server
        bootstraps and never asks the owner.
    steps, steps_noclip:
        The number of steps T the noise is calibrated for (``steps_noclip`` for the no-clip
        method, default ``steps``).
    batch_size:
        Examples per step, sampled without replacement; ``None``: full batches. ``"auto"``:
        full batches in plaintext, 100 encrypted (one ciphertext holds the batch).
    lr:
        DP-GD's learning rate (the no-clip method's is certified by the plan).
    clip:
        DP-GD's clipping bound C.
    stop_after:
        Run only the first ``stop_after`` of the calibrated steps (for timing a slow
        encrypted fit; the privacy guarantee still holds, fewer noisy steps release less).
    fit_intercept:
        Append a constant feature 1 (the paper's bias).
    bootstrap, sparse_weights, threads:
        Encrypted server settings: preset, sparse-packed bootstrapping of the weights, and
        server threads.
    sigmoid_degrees, e_f_target, barrier, release_d:
        The no-clip plan's search space (App. D.3) and Remark 5.3's released ``d``.
    random_state:
        ``None`` (default) draws batches, noise and keys from the operating system. An
        integer makes the fit reproducible, and its noise known to anyone with the seed:
        use it for experiments, never for a release.
    verbose:
        Progress lines on stderr during encrypted fits.

    Attributes after :meth:`fit`: ``coef_`` (1, n_features), ``intercept_`` (1,),
    ``classes_``, ``n_features_in_``, ``feature_names_in_`` (from a pandas DataFrame),
    ``n_iter_`` (steps run), ``plan_`` (the privacy plan's numbers, as ``privopt run``'s
    summary names them), ``encrypted_`` (seconds per step, refreshes, bootstraps, depth,
    ring dimension; ``None`` in plaintext).
    """

    coef_: FloatArray
    intercept_: FloatArray
    classes_: npt.NDArray[Any]
    n_features_in_: int
    feature_names_in_: npt.NDArray[np.object_]
    n_iter_: int
    plan_: dict[str, Any]
    encrypted_: dict[str, Any] | None

    def __init__(
        self,
        *,
        epsilon: float = 1.0,
        delta: float = 1e-5,
        algorithm: Algorithm = "noclip",
        encrypted: bool = False,
        steps: int = 1000,
        steps_noclip: int | None = None,
        batch_size: int | None | Literal["auto"] = "auto",
        lr: float = 2.0,
        clip: float = 1.0,
        stop_after: int | None = None,
        fit_intercept: bool = True,
        bootstrap: Bootstrap | None = None,
        sparse_weights: bool = True,
        threads: int = 1,
        sigmoid_degrees: Sequence[int] = (7, 9),
        e_f_target: float = 0.05,
        barrier: Literal["least_squares", "wall"] = "least_squares",
        release_d: bool = False,
        random_state: int | None = None,
        verbose: bool = False,
    ) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.algorithm = algorithm
        self.encrypted = encrypted
        self.steps = steps
        self.steps_noclip = steps_noclip
        self.batch_size = batch_size
        self.lr = lr
        self.clip = clip
        self.stop_after = stop_after
        self.fit_intercept = fit_intercept
        self.bootstrap = bootstrap
        self.sparse_weights = sparse_weights
        self.threads = threads
        self.sigmoid_degrees = sigmoid_degrees
        self.e_f_target = e_f_target
        self.barrier = barrier
        self.release_d = release_d
        self.random_state = random_state
        self.verbose = verbose

    @classmethod
    def _param_names(cls) -> list[str]:
        """The constructor's keyword arguments (scikit-learn's protocol reads them the same
        way: clone, grid search)."""
        return [p for p in inspect.signature(cls.__init__).parameters if p != "self"]

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor's parameters."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: Any) -> LogisticRegression:
        """Sets constructor parameters; an unknown name raises."""
        for name, value in params.items():
            if name not in self._param_names():
                raise ParameterError(f"LogisticRegression has no parameter {name!r}")
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        defaults = LogisticRegression().get_params()
        changed = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items() if v != defaults[k])
        return f"LogisticRegression({changed})"

    def fit(self, X: Any, y: Any) -> LogisticRegression:
        """Trains on ``X`` (n × features, every entry in [-1, 1]; a numpy array, a pandas
        DataFrame or anything ``np.asarray`` takes) and ``y`` (two distinct labels)."""
        x = self._features(X, fitting=True)
        labels = np.asarray(y)
        if labels.ndim != 1 or labels.shape[0] != x.shape[0]:
            raise ParameterError(
                f"y must be 1-D with one label per row of X ({x.shape[0]}), "
                f"got shape {labels.shape}"
            )
        classes, y01 = np.unique(labels, return_inverse=True)
        if classes.shape[0] != 2:
            raise ParameterError(
                f"y must take exactly two values (binary classification), got {classes.shape[0]}"
            )
        batch = self.batch_size
        if batch == "auto":
            batch = 100 if self.encrypted else None
        if self.stop_after is not None and self.stop_after < 1:
            raise ParameterError(f"stop_after must be >= 1, got {self.stop_after}")
        w, report = _native.fit_logistic(
            self._with_bias(x),
            y01.astype(np.float64),
            algorithm=self.algorithm,
            epsilon=float(self.epsilon),
            delta=float(self.delta),
            clip=float(self.clip),
            steps=int(self.steps),
            steps_noclip=None if self.steps_noclip is None else int(self.steps_noclip),
            batch_size=batch,
            lr=float(self.lr),
            sigmoid_degrees=[int(d) for d in self.sigmoid_degrees],
            e_f_target=float(self.e_f_target),
            barrier=self.barrier,
            release_d=bool(self.release_d),
            stop_after=self.stop_after,
            encrypted=bool(self.encrypted),
            bootstrap=self.bootstrap,
            sparse_weights=bool(self.sparse_weights),
            threads=int(self.threads),
            seed=self.random_state,
            verbose=bool(self.verbose),
        )
        weights = np.asarray(w, dtype=np.float64)
        if self.fit_intercept:
            self.coef_, self.intercept_ = weights[None, :-1].copy(), weights[-1:].copy()
        else:
            self.coef_, self.intercept_ = weights[None, :].copy(), np.zeros(1)
        self.classes_ = classes
        self.plan_ = dict(report["plan"])
        self.n_iter_ = int(report["steps_run"])
        self.encrypted_ = report.get("encrypted")
        self.diverged_ = bool(report["diverged"])
        return self

    def decision_function(self, X: Any) -> FloatArray:
        """The margins ``X @ coef_.T + intercept_``."""
        self._check_fitted()
        x = self._features(X, fitting=False)
        margins: FloatArray = x @ self.coef_[0] + self.intercept_[0]
        return margins

    def predict_proba(self, X: Any) -> FloatArray:
        """Probabilities of ``classes_[0]`` and ``classes_[1]``, one row per example."""
        p1 = 1.0 / (1.0 + np.exp(-self.decision_function(X)))
        return np.column_stack([1.0 - p1, p1])

    def predict(self, X: Any) -> npt.NDArray[Any]:
        """The more probable class of each row."""
        self._check_fitted()
        picked: npt.NDArray[Any] = self.classes_[(self.decision_function(X) > 0).astype(int)]
        return picked

    def score(self, X: Any, y: Any) -> float:
        """Accuracy on ``(X, y)``."""
        return float(np.mean(self.predict(X) == np.asarray(y)))

    def _check_fitted(self) -> None:
        if not hasattr(self, "coef_"):
            raise AttributeError("this LogisticRegression is not fitted yet: call fit(X, y) first")

    def _features(self, X: Any, *, fitting: bool) -> FloatArray:
        columns = getattr(X, "columns", None)
        try:
            x = np.asarray(X, dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise ParameterError(f"X must be numeric: {e}") from None
        if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
            raise ParameterError(f"X must be a non-empty 2-D array, got shape {x.shape}")
        if fitting:
            self.n_features_in_ = x.shape[1]
            if columns is not None:
                self.feature_names_in_ = np.asarray([str(c) for c in columns], dtype=object)
        elif x.shape[1] != self.n_features_in_:
            raise ParameterError(
                f"X has {x.shape[1]} features, but this model was fitted on {self.n_features_in_}"
            )
        return x

    def _with_bias(self, x: FloatArray) -> FloatArray:
        if not self.fit_intercept:
            return np.ascontiguousarray(x)
        return np.hstack([x, np.ones((x.shape[0], 1))])
