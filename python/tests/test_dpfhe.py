from __future__ import annotations

import numpy as np
import pytest

from privopt import ckks
from privopt.errors import MalformedMessage, ParameterError, ProtocolError
from privopt.protocols import dpfhe


@pytest.fixture(scope="module")
def ctx():
    # Algorithm 5's depth at a small ring (fast tests); the real runs use 2^15 (128-bit).
    return ckks.Context(ckks.Params.leveled(4096, 50, 40, 16, [44, 44, 44, 44], insecure=True))


def sigmoid(z):
    return 1 / (1 + np.exp(-z))


def test_encrypted_steps_follow_the_plaintext_update(ctx, rng):
    d, batch, lr, steps = 4, 8, 0.5, 3
    lam, theta, kappa = 0.05, 4.0, 0.1
    circuit = dpfhe.Circuit(ctx, d, batch, lr, sigmoid_degree=9, barrier=(lam, theta, kappa, 9))
    owner = dpfhe.DataOwner(ctx, circuit)
    relin, galois = owner.evaluation_keys()
    server = dpfhe.ComputeServer(ctx, circuit, relin, galois)
    w_plain = np.zeros(d)
    w = owner.encrypt_weights(w_plain)
    for t in range(steps):
        x = np.hstack([rng.uniform(-1, 1, (batch, d - 1)), np.ones((batch, 1))])
        y = (x @ np.array([1.5, -2.0, 1.0, 0.3]) > 0).astype(float)
        noise = 0.01 * rng.normal(size=d)
        server.begin_step(w, owner.encrypt_step(t, x, y, lr * noise))
        while True:
            kind, payload = server.advance()
            if kind == "done":
                w = payload
                break
            server.resume(owner.refresh(payload))
        # The same update in the clear, with the exact sigmoid and 1/x.
        grad = ((sigmoid(x @ w_plain) - y)[:, None] * x).mean(axis=0)
        barrier = 2 * lam * w_plain / (theta - w_plain @ w_plain)
        w_plain = w_plain - lr * grad - lr * barrier - lr * noise
    got = owner.decrypt_weights(w)
    assert np.abs(w_plain).max() > 0.2  # the model moved
    np.testing.assert_allclose(got, w_plain, atol=0.02)
    assert owner.refreshes >= 1  # 16 levels do not last three steps


def test_bad_messages_and_orders_are_refused(ctx):
    circuit = dpfhe.Circuit(ctx, 3, 4, 0.1, clip=(1.0, 16.0))
    owner = dpfhe.DataOwner(ctx, circuit)
    relin, galois = owner.evaluation_keys()
    with pytest.raises(MalformedMessage):
        dpfhe.ComputeServer(ctx, circuit, relin[:-1], galois)
    server = dpfhe.ComputeServer(ctx, circuit, relin, galois)
    with pytest.raises(ProtocolError):
        server.advance()
    w = owner.encrypt_weights(np.zeros(3))
    with pytest.raises(ParameterError):
        owner.encrypt_step(0, np.zeros((5, 3)), np.zeros(5), np.zeros(3))  # batch is 4
    step = owner.encrypt_step(0, np.ones((4, 3)), np.zeros(4), np.zeros(3))
    with pytest.raises(MalformedMessage):
        server.begin_step(step, w)  # swapped
    with pytest.raises(ParameterError):
        dpfhe.Circuit(ctx, 3, 4, 0.1, barrier=(0.1, 1.0, 0.1, 7), clip=(1.0, 16.0))
    with pytest.raises(ParameterError):
        dpfhe.Circuit(ctx, 3, 10_000, 0.1)  # does not fit in the slots


def test_a_restored_owner_decrypts_what_the_original_encrypted(ctx):
    circuit = dpfhe.Circuit(ctx, 3, 4, 0.1, clip=(1.0, 16.0))
    owner = dpfhe.DataOwner(ctx, circuit)
    w = owner.encrypt_weights(np.array([0.5, -0.25, 1.0]))
    back = dpfhe.DataOwner.restore(ctx, circuit, owner.save())
    np.testing.assert_allclose(back.decrypt_weights(w), [0.5, -0.25, 1.0], atol=1e-6)
    with pytest.raises(MalformedMessage):
        dpfhe.DataOwner.restore(ctx, circuit, owner.save()[:-2])
