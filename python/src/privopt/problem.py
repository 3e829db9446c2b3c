"""The data, client partition and model of a privopt experiment config, from Python.

A :class:`Problem` is built from the ``[data]`` and ``[model]`` tables of a privopt config
(as dicts) by the same loaders, subsetting, PCA and partitioners ``privopt run`` uses, so a
Python driver — the Flower app in ``flower/``, a notebook — trains each client on exactly its
share::

    problem = Problem({"dataset": "synthetic_logistic", "clients": 5}, {"kind": "logistic"})
    w = problem.init_params(seed=0)
    idx = problem.client_indices(2)             # client 2's training examples
    loss, grad = problem.loss_grad(w, idx[:32])  # a minibatch
    test_loss, accuracy = problem.evaluate(w)

Catalog datasets (``mnist``, ``adult`` …) are read from ``data_dir`` after ``privopt data
fetch NAME``; a missing or bad table raises :class:`~privopt.errors.ParameterError` naming it.
"""

from __future__ import annotations

from ._native import problem as _native

Problem = _native.Problem

__all__ = ["Problem"]
