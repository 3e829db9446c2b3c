from __future__ import annotations

import numpy as np
import pytest

from privopt.errors import InsecureParameters, MalformedMessage, PeerMisbehaved, ProtocolError
from privopt.protocols import pdsgd


@pytest.fixture(scope="module")
def triangle():
    agents = [pdsgd.Agent(i, bits=1024, insecure=True) for i in range(3)]
    weights = {(0, 1): 3, (1, 0): 2, (1, 2): 1, (2, 1): 4, (0, 2): 2, (2, 0): 2}
    for (i, j), k in weights.items():
        agents[i].add_neighbour(agents[j].announcement, k)
    return agents, weights


def test_an_exchange_yields_the_weighted_difference_and_nothing_else(triangle, rng):
    agents, weights = triangle
    delta = 0.01
    x = [rng.normal(size=16) for _ in range(3)]
    q = [np.round(v / delta).astype(np.int64) for v in x]
    for it, (i, j) in enumerate([(0, 1), (1, 2), (2, 0)]):
        request = agents[i].initiate(j, it, q[i])  # bytes: ciphertexts under i's key
        response = agents[j].respond(request, q[j])
        got = agents[i].finish(response, delta)
        # w_ij · w_ji · (x̃_j − x̃_i) with w = k·δ and x̃ = δ·q.
        want = weights[i, j] * delta * weights[j, i] * delta * delta * (q[j] - q[i])
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_bad_exchanges_are_refused_and_the_exchange_stays_open(triangle):
    agents, _ = triangle
    q = np.arange(4, dtype=np.int64)
    request = agents[0].initiate(1, 100, q)
    with pytest.raises(ProtocolError):
        agents[0].initiate(1, 100, q)  # one open exchange per neighbour
    with pytest.raises(MalformedMessage):
        agents[1].respond(request[:-1], q)
    with pytest.raises(PeerMisbehaved, match="dimension") as wrong_size:
        agents[1].respond(request, np.arange(5, dtype=np.int64))
    assert wrong_size.value.kind == "malformed"
    with pytest.raises(PeerMisbehaved, match="meant for") as elsewhere:
        agents[2].respond(request, q)  # addressed to agent 1
    assert elsewhere.value.kind == "misaddressed"
    assert str(elsewhere.value).startswith("party 0 misbehaved"), str(elsewhere.value)
    stray = agents[2].respond(agents[0].initiate(2, 100, q), q)
    # Meant for agent 0, under its key: agent 1 refuses it as unreadable under its own key
    # (when a ciphertext exceeds its n²) or as addressed to someone else.
    with pytest.raises((MalformedMessage, PeerMisbehaved)):
        agents[1].finish(stray, 0.01)
    good = agents[1].respond(request, q)
    np.testing.assert_allclose(agents[0].finish(good, 0.01), np.zeros(4))
    with pytest.raises(PeerMisbehaved, match="asked it nothing") as replayed:
        agents[0].finish(good, 0.01)  # a replayed response
    assert replayed.value.kind == "unsolicited"
    agents[0].finish(stray, 0.01)  # closes the exchange with agent 2
    with pytest.raises(InsecureParameters):
        pdsgd.Agent(9, bits=1024)


def test_agents_resume_from_saved_bytes_mid_exchange():
    a, b = pdsgd.Agent(0, bits=2048), pdsgd.Agent(1, bits=2048)
    a.add_neighbour(b.announcement, 3)
    b.add_neighbour(a.announcement, 2)
    request = a.initiate(1, 0, np.array([-3, 7], dtype=np.int64))
    a = pdsgd.Agent.restore(a.save())
    b = pdsgd.Agent.restore(b.save())
    response = b.respond(request, np.array([5, -12], dtype=np.int64))
    out = pdsgd.Agent.restore(a.save()).finish(response, 0.1)
    np.testing.assert_allclose(out, [0.3 * 0.2 * 0.1 * 8, 0.3 * 0.2 * 0.1 * -19], atol=1e-12)
    with pytest.raises(MalformedMessage):
        pdsgd.Agent.restore(a.save()[:-1])


def test_the_schedule_is_algorithm_1s_and_its_stepsizes_are_private_draws():
    s = pdsgd.Schedule(lambda0=0.5)
    assert s == pdsgd.Schedule(0.5) and s != pdsgd.Schedule()
    assert pdsgd.Schedule().lambda0 == pdsgd.DEFAULTS["lambda0"] == 0.005
    k = 9
    assert s.attenuation(k) == pytest.approx(1 / (1 + 0.1 * k**0.81), rel=1e-15)
    low, high = s.stepsize(k, 0.0), s.stepsize(k, 1.0)
    assert low == pytest.approx(0.5 / k**0.6, rel=1e-15)
    assert high == pytest.approx(low * (1 + k**-1.2), rel=1e-15)
    steps = s.stepsizes(k, 4096)
    assert steps.shape == (4096,) and steps.dtype == np.float64
    assert np.all((low <= steps) & (steps <= high))
    # ζ ~ U[0, 1]: the draws spread over the range, and two calls differ.
    zeta = (steps - low) / (high - low)
    assert abs(zeta.mean() - 0.5) < 0.03 and zeta.min() < 0.01 and zeta.max() > 0.99
    assert not np.array_equal(steps, s.stepsizes(k, 4096))


def test_a_bad_schedule_or_iteration_is_refused_by_name():
    from privopt.errors import ParameterError

    with pytest.raises(ParameterError, match="lambda0 must be finite and > 0"):
        pdsgd.Schedule(lambda0=0.0)
    with pytest.raises(ParameterError, match="zeta_decay"):
        pdsgd.Schedule(zeta_decay=float("nan"))
    with pytest.raises(ParameterError, match="iterations count from 1"):
        pdsgd.Schedule().attenuation(0)
    with pytest.raises(ParameterError, match="zeta must be in"):
        pdsgd.Schedule().stepsize(1, 1.5)
    with pytest.raises(ParameterError, match="size must be at most"):
        pdsgd.Schedule().stepsizes(1, 10**12)
