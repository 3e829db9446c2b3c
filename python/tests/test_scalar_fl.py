from __future__ import annotations

import numpy as np
import pytest

from privopt.errors import MalformedMessage, ParameterError, PeerMisbehaved, ProtocolError
from privopt.protocols import scalar_fl


def make_problem(rng, clients=8, d=10, m=40):
    """Least squares split across clients: client i holds (A_i, b_i)."""
    x_true = rng.normal(size=d)
    data = []
    for _ in range(clients):
        a = rng.normal(size=(m, d))
        data.append((a, a @ x_true + 0.01 * rng.normal(size=m)))
    return data, x_true


def global_loss(data, x):
    return float(np.mean([np.mean((a @ x - b) ** 2) for a, b in data]))


def loss_of(a, b):
    return lambda step, x: float(np.mean((a @ x - b) ** 2))


@pytest.mark.parametrize("rule", ["decomfl", "hiso"])
def test_scalar_only_training_of_a_numpy_model_converges(rng, rule):
    data, _ = make_problem(rng)
    x0 = np.zeros(10)
    spec = scalar_fl.Spec(lr=0.01, local_steps=2, perturbations=2, rule=rule)
    server = scalar_fl.Server(spec, x0, clients=len(data), seed=3)
    clients = [scalar_fl.Client(i, spec, x0) for i in range(len(data))]
    start = global_loss(data, x0)
    traffic = 0
    for _ in range(300):
        plan, who = server.begin_round(per_round=3)
        for i in who:
            catch = server.catch_up(i)
            clients[i].receive(catch)
            reply = clients[i].local_update(plan, loss_of(*data[i]))
            traffic += len(reply)
            server.receive(reply)
        assert server.finish_round() == who
    assert global_loss(data, server.x) < 0.05 * start
    # Only scalars went up: 4 per reply plus framing, far below a 10-float model.
    assert traffic / (300 * 3) < 80
    # Every client that took part holds exactly the model of the round it last joined.
    for c in clients:
        assert c.round <= server.round


def test_a_client_that_missed_rounds_catches_up_bit_for_bit(rng):
    data, _ = make_problem(rng, clients=4)
    x0 = np.zeros(10)
    spec = scalar_fl.Spec(lr=0.01)
    server = scalar_fl.Server(spec, x0, clients=4, seed=1)
    clients = [scalar_fl.Client(i, spec, x0) for i in range(4)]
    for r in range(20):
        plan, who = server.begin_round(per_round=2)
        for i in who:
            clients[i].receive(server.catch_up(i))
            if (r, i) == (5, who[0]):
                continue  # this reply is lost: the client dropped mid-round
            server.receive(clients[i].local_update(plan, loss_of(*data[i])))
        server.finish_round()
    late = scalar_fl.Client(9, spec, x0)  # a newcomer with the initial model...
    plan, who = server.begin_round(per_round=4)
    for i in who:
        clients[i].receive(server.catch_up(i))
        # ...and every participant now holds the server's model exactly.
        np.testing.assert_array_equal(clients[i].x, server.x)
    assert late.round == 0


def test_bad_replies_are_refused_and_the_round_goes_on(rng):
    data, _ = make_problem(rng, clients=3)
    x0 = np.zeros(10)
    spec = scalar_fl.Spec(lr=0.01)
    server = scalar_fl.Server(spec, x0, clients=3, seed=2)
    clients = [scalar_fl.Client(i, spec, x0) for i in range(3)]
    plan, who = server.begin_round(per_round=3)
    replies = {}
    for i in who:
        clients[i].receive(server.catch_up(i))
        replies[i] = clients[i].local_update(plan, loss_of(*data[i]))
    with pytest.raises(MalformedMessage):
        server.receive(replies[0][:-1])
    server.receive(replies[0])
    with pytest.raises(PeerMisbehaved, match="twice"):
        server.receive(replies[0])

    def broken(step, x):
        raise RuntimeError("my model failed")

    with pytest.raises(RuntimeError, match="my model failed"):
        clients[1].local_update(plan, broken)
    with pytest.raises(MalformedMessage):
        clients[1].receive(b"garbage")
    server.receive(replies[1])
    assert server.finish_round() == [0, 1]
    with pytest.raises(ProtocolError):
        server.finish_round()  # no round open
    # A reply from the closed round is refused in the next one.
    server.begin_round(per_round=3)
    with pytest.raises(PeerMisbehaved, match="round"):
        server.receive(replies[2])


@pytest.mark.parametrize("rule", ["decomfl", "hiso"])
def test_a_client_resumed_from_its_state_bytes_replies_identically(rng, rule):
    data, _ = make_problem(rng, clients=3)
    x0 = np.zeros(10)
    spec = scalar_fl.Spec(lr=0.01, local_steps=2, rule=rule)
    server = scalar_fl.Server(spec, x0, clients=3, seed=5)
    client = scalar_fl.Client(0, spec, x0)
    for _ in range(4):
        plan, who = server.begin_round(per_round=3)
        for i in who:
            catch = server.catch_up(i)
            if i == 0:
                client.receive(catch)
                resumed = scalar_fl.Client(0, spec, x0)
                resumed.receive(client.state)
                assert resumed.round == client.round
                a = client.local_update(plan, loss_of(*data[0]))
                assert resumed.local_update(plan, loss_of(*data[0])) == a
                server.receive(a)
        server.finish_round()


def test_a_participant_trains_a_model_held_in_pieces_as_the_client_does(rng):
    """Participant (the client for a model held elsewhere) on a model split in two pieces,
    perturbed and stepped in place and back, holds Client's model after every catch-up (to
    the rounding of moving back and forth), and refuses arrays it cannot work on."""
    data, _ = make_problem(rng, clients=2)
    d = 10
    spec = scalar_fl.Spec(lr=0.01, local_steps=2, perturbations=2, rule="hiso")
    server = scalar_fl.Server(spec, np.zeros(d), clients=2, seed=5)
    client = scalar_fl.Client(0, spec, np.zeros(d), mu=1e-3, difference="central")
    part = scalar_fl.Participant(1, spec, d)
    x = [np.zeros(4), np.zeros(6)]  # the model as two pieces
    h = np.ones(d)
    a, b = data[0]
    mu = 1e-3

    def loss_at(v):
        return float(np.mean((a @ v - b) ** 2))

    for _ in range(5):
        plan, _ = server.begin_round(per_round=2)
        client.receive(server.catch_up(0))
        catch = part.receive(server.catch_up(1))
        part.replay(catch, x, h)
        np.testing.assert_allclose(np.concatenate(x), client.x, rtol=1e-12, atol=1e-15)
        seeds = part.accept(plan)
        scalars = []
        for k in range(len(seeds)):
            step = []
            for p in range(2):
                part.perturb(k, p, mu, x, h)
                plus = loss_at(np.concatenate(x))
                part.perturb(k, p, -2 * mu, x, h)
                minus = loss_at(np.concatenate(x))
                part.perturb(k, p, mu, x, h)
                step.append((plus - minus) / (2 * mu))
            scalars += step
            if k == 0:
                part.local_step(k, step, x, h)
        part.local_step(0, scalars[:2], x, h, undo=True)
        server.receive(client.local_update(plan, lambda k, v: loss_at(v)))
        server.receive(part.reply(scalars))
        server.finish_round()
    plan, _ = server.begin_round(per_round=2)
    part.replay(part.receive(server.catch_up(1)), x, h)
    part.accept(plan)
    with pytest.raises(ParameterError, match="float64 or float32"):
        part.perturb(0, 0, mu, [np.zeros(10, dtype=np.float16)], h)
    with pytest.raises(ParameterError, match="outside the model's 10 parameters"):
        part.perturb(0, 0, mu, [np.zeros(11)], h)
    with pytest.raises(ParameterError, match="needs h"):
        part.perturb(0, 0, mu, x)
    with pytest.raises(ParameterError, match="h has 3 values"):
        part.perturb(0, 0, mu, x, np.ones(3))
    with pytest.raises(ProtocolError, match="no plan accepted"):
        scalar_fl.Participant(0, spec, d).perturb(0, 0, mu, x, h)
