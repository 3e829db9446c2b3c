from __future__ import annotations

import os

import numpy as np
import pytest

from privopt import secagg
from privopt.errors import MalformedMessage, ParameterError, PeerMisbehaved, ProtocolError
from privopt.protocols import dome


def secagg_sum(inputs: dict[int, np.ndarray], length: int, round_: int) -> np.ndarray:
    """One complete-graph SecAgg+ round over the participants' uint32 inputs."""
    n = len(inputs)
    session = os.urandom(16)
    graph = secagg.Graph.complete(n)
    threshold = n // 2 + 1
    server = secagg.Server(session, round_, graph, threshold, length)
    clients = [
        secagg.Client(session, round_, i, graph.neighbours(i), threshold, length) for i in range(n)
    ]
    ids = sorted(inputs)
    for c in clients:
        server.receive(c.advertisement)
    for _ in range(3):
        for i, msg in server.close_stage().items():
            server.receive(clients[i].handle(msg, inputs[ids[i]]))
    total, contributors = server.finish()
    assert contributors == list(range(n))
    return total


def test_without_noise_or_sketch_the_round_returns_the_mean_gradient(rng):
    d, n = 12, 5
    server = dome.Server(np.zeros(d), k=d, clip=100.0, noise_total=0.0, sketch="identity", seed=0)
    assert server.dim == d
    grads = {i: rng.normal(size=d) for i in range(n)}
    broadcast, chunks = server.open_round(0, n)
    assert chunks == []
    words = {i: dome.release(broadcast, chunks, g) for i, g in grads.items()}
    g_hat = server.close_round(secagg_sum(words, d, 0), n)
    # Quantization only: the quantizer's bound is clip + 10·0 over n summands.
    np.testing.assert_allclose(g_hat, np.mean(list(grads.values()), axis=0), atol=1e-6)


def test_the_mean_is_over_contributors_and_the_noise_floor_refuses_thin_rounds(rng):
    d, n = 12, 6
    server = dome.Server(
        np.zeros(d), k=d, clip=100.0, noise_total=0.0, sketch="identity", seed=0, noise_floor=0.5
    )
    assert server.required_contributors is None  # no round open
    broadcast, chunks = server.open_round(0, n)
    assert server.required_contributors == 3  # ceil(0.5 * 6)
    grads = {i: rng.normal(size=d) for i in range(4)}  # two of six dropped before masking
    words = {i: dome.release(broadcast, chunks, g) for i, g in grads.items()}
    total = secagg_sum(words, d, 0)
    with pytest.raises(ProtocolError):
        server.close_round(total, 2)
    g_hat = server.close_round(total, 4)
    np.testing.assert_allclose(g_hat, np.mean(list(grads.values()), axis=0), atol=1e-5)


def test_dp_training_of_a_numpy_model_through_secagg(rng):
    d, n, k = 30, 6, 6
    x_true = rng.normal(size=d)
    data = []
    for _ in range(n):
        a = rng.normal(size=(50, d))
        data.append((a, a @ x_true))

    def grad(w, a, b):
        return 2 * a.T @ (a @ w - b) / len(b)

    def loss(w):
        return np.mean([np.mean((a @ w - b) ** 2) for a, b in data])

    server = dome.Server(np.zeros(d), k=k, clip=50.0, noise_total=1.0, lr=0.05, seed=1)
    start = loss(server.model)
    for r in range(60):
        broadcast, chunks = server.open_round(r, n)
        w = server.model
        words = {i: dome.release(broadcast, chunks, grad(w, *data[i])) for i in range(n)}
        server.close_round(secagg_sum(words, server.dim, r), n)
    assert loss(server.model) < 0.5 * start


def test_bad_inputs_are_refused():
    server = dome.Server(np.zeros(8), k=3, clip=1.0, noise_total=0.1, seed=2)
    broadcast, chunks = server.open_round(0, 4)
    with pytest.raises(ProtocolError):
        server.open_round(1, 4)  # round 0 is still open
    with pytest.raises(MalformedMessage):
        dome.release(broadcast[:-1], chunks, np.zeros(8))
    with pytest.raises(ParameterError):
        dome.release(broadcast, chunks, np.zeros(7))
    with pytest.raises(PeerMisbehaved):
        dome.release(broadcast, chunks + chunks, np.zeros(8))  # repeated sketch columns
    with pytest.raises(ParameterError):
        server.close_round(np.zeros(5, dtype=np.uint32), 4)
    with pytest.raises(ParameterError):
        dome.Server(np.zeros(8), k=9, clip=1.0, noise_total=0.0)
    with pytest.raises(ParameterError):
        dome.Server(np.zeros(8), k=3, clip=1.0, noise_total=0.0, sketch="pca")
