from __future__ import annotations

import os

import numpy as np
import pytest

from privopt import secagg
from privopt.errors import (
    MalformedMessage,
    ParameterError,
    PeerMisbehaved,
    ProtocolError,
)

N, LEN = 12, 50


def start_round(rng, n=N, round_=0, session=None, complete=False):
    """A round on SecAgg+'s Harary graph (a random ring order), or on the complete graph."""
    session = session or os.urandom(16)
    params = secagg.parameters(n, dropout_rate=0.2, corrupt_rate=0.2)
    threshold = params.threshold
    if complete or params.degree == n - 1:
        graph = secagg.Graph.complete(n)
        # The threshold must exceed half the degree: a majority of the n − 1 neighbours.
        threshold = max(threshold, (n - 1) // 2 + 1)
    else:
        graph = secagg.Graph.harary(n, params.degree, os.urandom(32))
    server = secagg.Server(session, round_, graph, threshold, LEN)
    clients = {
        i: secagg.Client(session, round_, i, graph.neighbours(i), threshold, LEN) for i in range(n)
    }
    inputs = {i: rng.integers(0, 2**32, LEN, dtype=np.uint32) for i in range(n)}
    return server, clients, inputs


def run(server, clients, inputs, drop_at):
    """One round; clients in drop_at[stage] stop answering at that stage (stages 1–4)."""
    alive = dict(clients)
    for c in list(alive):
        if c in drop_at.get(1, ()):
            del alive[c]
        else:
            server.receive(alive[c].advertisement)
    for stage in (2, 3, 4):
        outbox = server.close_stage()
        for c, msg in outbox.items():
            if c in drop_at.get(stage, ()):
                alive.pop(c, None)
                continue
            client = alive[c]
            reply = client.handle(msg, inputs[c]) if stage == 3 else client.handle(msg)
            server.receive(reply)
    return server.finish()


def test_a_round_with_dropouts_at_every_stage_sums_the_survivors_exactly(rng):
    # The complete graph: four dropouts leave every survivor above the threshold whatever the
    # order (on a random Harary graph of degree 4 they may not, and the round rightly aborts).
    server, clients, inputs = start_round(rng, complete=True)
    total, contributors = run(server, clients, inputs, {1: {0}, 2: {3}, 3: {5}, 4: {7}})
    # Client 7 dropped after masking: its input is in the sum; 0, 3 and 5 are not.
    assert contributors == [c for c in range(N) if c not in (0, 3, 5)]
    expected = np.zeros(LEN, dtype=np.uint64)
    for c in contributors:
        expected += inputs[c]
    np.testing.assert_array_equal(total, (expected % 2**32).astype(np.uint32))


def test_quantized_floats_sum_within_the_bound(rng):
    server, clients, _ = start_round(rng)
    q = secagg.Quantizer(clip=1.0, max_summands=N)
    xs = {i: rng.uniform(-1, 1, LEN) for i in range(N)}
    total, contributors = run(server, clients, {i: q.encode(x) for i, x in xs.items()}, {2: {4}})
    want = sum(xs[c] for c in contributors)
    assert np.abs(q.decode_sum(total) - want).max() <= q.sum_error_bound(len(contributors))


def test_too_many_dropouts_abort_the_round(rng):
    server, clients, inputs = start_round(rng)
    with pytest.raises(ProtocolError, match="threshold"):
        run(server, clients, inputs, {2: set(range(2, N))})


def test_bad_bytes_and_foreign_messages_are_refused_without_changing_state(rng):
    session = os.urandom(16)
    server, clients, inputs = start_round(rng, session=session)
    ad = clients[0].advertisement
    for bad in (b"", ad[:-1], ad + b"\0", b"XXXX" + ad[4:]):
        with pytest.raises(MalformedMessage):
            server.receive(bad)
    flipped = bytearray(ad)
    flipped[20] ^= 1
    with pytest.raises(MalformedMessage, match="checksum"):
        server.receive(bytes(flipped))
    # A client of the next round, and a client of another session.
    _, later, _ = start_round(rng, round_=1, session=session)
    with pytest.raises(PeerMisbehaved, match="round"):
        server.receive(later[1].advertisement)
    _, stranger, _ = start_round(rng)
    with pytest.raises(PeerMisbehaved, match="session"):
        server.receive(stranger[1].advertisement)
    server.receive(ad)
    with pytest.raises(PeerMisbehaved, match="duplicate"):
        server.receive(ad)
    # Nothing above left a trace: the round still completes exactly.
    for c in range(1, N):
        server.receive(clients[c].advertisement)
    outbox = server.close_stage()
    with pytest.raises(MalformedMessage, match="kind"):
        clients[0].mask_input(outbox[0], inputs[0])  # a stage-2 message handed to stage 3
    for c, msg in outbox.items():
        server.receive(clients[c].share_keys(msg))
    for c, msg in server.close_stage().items():
        server.receive(clients[c].mask_input(msg, inputs[c]))
    for c, msg in server.close_stage().items():
        server.receive(clients[c].unmask(msg))
    total, contributors = server.finish()
    assert contributors == list(range(N))
    expected = sum(inputs[c].astype(np.uint64) for c in range(N)) % 2**32
    np.testing.assert_array_equal(total, expected.astype(np.uint32))
    with pytest.raises(ProtocolError):
        server.close_stage()
    with pytest.raises(ParameterError):
        secagg.Client(b"short", 0, 0, [1, 2], 2, LEN)
    with pytest.raises(ParameterError):
        secagg.Server(session, 0, secagg.Graph.complete(4), 2, 0)


def test_clients_resumed_from_snapshots_between_stages_sum_exactly(rng):
    # A Flower ClientApp runs each message in a fresh process: the client must survive as bytes.
    server, clients, inputs = start_round(rng, complete=True)
    states = {}
    for c, client in clients.items():
        server.receive(client.advertisement)
        states[c] = client.snapshot()
    for stage in (2, 3, 4):
        for c, msg in server.close_stage().items():
            client = secagg.Client.restore(states[c])
            reply = client.handle(msg, inputs[c]) if stage == 3 else client.handle(msg)
            server.receive(reply)
            states[c] = client.snapshot()
    total, contributors = server.finish()
    assert contributors == list(range(N))
    expected = sum(inputs[c].astype(np.uint64) for c in contributors) % 2**32
    np.testing.assert_array_equal(total, expected.astype(np.uint32))


def test_a_damaged_snapshot_is_refused(rng):
    _, clients, _ = start_round(rng, n=5, complete=True)
    state = bytearray(clients[0].snapshot())
    state[40] ^= 1
    with pytest.raises(MalformedMessage):
        secagg.Client.restore(bytes(state))
    with pytest.raises(MalformedMessage):
        secagg.Client.restore(clients[0].advertisement)


def test_a_snapshot_restored_twice_answers_one_survivor_list(rng):
    # Finding 1 of the third adversarial pass: two servers of one round (a server forking its
    # state) ask every client, restored twice from its masked-input snapshot, to unmask once
    # with the victim alive and once with it dropped; the two sums differ by its input.
    n, victim, session = 5, 4, os.urandom(16)
    graph = secagg.Graph.complete(n)
    servers = [secagg.Server(session, 0, graph, 3, LEN) for _ in range(2)]
    clients = {i: secagg.Client(session, 0, i, graph.neighbours(i), 3, LEN) for i in range(n)}
    inputs = {i: rng.integers(0, 2**32, LEN, dtype=np.uint32) for i in range(n)}
    for c in clients.values():
        for s in servers:
            s.receive(c.advertisement)
    outbox, _ = (s.close_stage() for s in servers)  # both servers relay the same keys
    for c, msg in outbox.items():
        reply = clients[c].share_keys(msg)
        for s in servers:
            s.receive(reply)
    outbox, _ = (s.close_stage() for s in servers)
    for c, msg in outbox.items():
        masked = clients[c].mask_input(msg, inputs[c])
        servers[0].receive(masked)
        if c != victim:
            servers[1].receive(masked)
    snapshots = {c: client.snapshot() for c, client in clients.items()}
    alive, dropped = (s.close_stage() for s in servers)
    refused = 0
    for c, snap in snapshots.items():
        servers[0].receive(secagg.Client.restore(snap).unmask(alive[c]))
        if c in dropped:
            with pytest.raises(PeerMisbehaved, match="another survivor list"):
                secagg.Client.restore(snap).unmask(dropped[c])
            refused += 1
    assert refused == n - 1
    _, contributors = servers[0].finish()
    assert contributors == list(range(n))
    with pytest.raises(ProtocolError):
        servers[1].finish()  # no unmask shares: the sum without the victim never exists
    # The same list again gets the same answer (a lost reply may be resent).
    again = secagg.Client.restore(snapshots[0])
    assert again.unmask(alive[0]) == secagg.Client.restore(snapshots[0]).unmask(alive[0])


def test_non_finite_values_are_refused_by_the_quantizer():
    q = secagg.Quantizer(clip=1.0, max_summands=4)
    for bad in (np.nan, np.inf, -np.inf):
        with pytest.raises(ParameterError, match="value 2"):
            q.encode(np.array([0.0, 0.5, bad]))
    with pytest.raises(ParameterError):
        secagg.Quantizer(clip=1.0, max_summands=2**40)


def test_the_stochastic_quantizer_rounds_as_flowers_does_and_without_bias():
    """Flower's SecAgg+ encoding: exact where the scaled value is an integer, otherwise one of
    the two neighbours, up with probability the fractional part; clipped at both ends."""
    q = secagg.StochasticQuantizer(clipping_range=2.0, quantization_range=1000)
    # (x + 2)·250 is an integer for these x: no randomness reaches the words.
    exact = np.array([-2.0, -1.0, 0.0, 0.3, 2.0, 5.0, -7.0])
    assert q.encode(exact).tolist() == [0, 250, 500, 575, 1000, 1000, 0]
    # The multiplier applies before the clip (Flower's ``dq_ratio``).
    assert q.encode(np.array([0.3]), multiplier=2.0).tolist() == [650]
    words = q.encode(np.full(100_000, 0.3013))
    assert set(np.unique(words).tolist()) <= {575, 576}
    up = float(np.mean(words == 576))
    assert abs(up - 0.325) < 5 * np.sqrt(0.325 * 0.675 / words.size)
    # Two encodings draw independent rounding.
    assert not np.array_equal(words, q.encode(np.full(100_000, 0.3013)))
    with pytest.raises(ParameterError, match="value 1"):
        q.encode(np.array([0.0, np.nan]))
    with pytest.raises(ParameterError):
        secagg.StochasticQuantizer(clipping_range=0.0, quantization_range=10)


def test_a_client_unmasks_no_sum_of_fewer_survivors_than_its_floor(rng):
    # Five clients whose inputs assume all five contribute; one drops after sharing keys.
    server, clients, inputs = start_round(rng, n=5, complete=True)
    for c in clients.values():
        server.receive(c.advertisement)
    for c, msg in server.close_stage().items():
        server.receive(clients[c].share_keys(msg))
    for c, msg in server.close_stage().items():
        if c != 4:
            server.receive(clients[c].mask_input(msg, inputs[c]))
    requests = server.close_stage()
    assert sorted(requests) == [0, 1, 2, 3]
    for c, msg in requests.items():
        with pytest.raises(ProtocolError, match="sum of 4 inputs: its input assumes at least 5"):
            clients[c].unmask(msg, min_survivors=5)
    # The refusal answered nothing: the same list at a floor it meets is answered (the
    # single-use record saw no other list), and the sum is the four survivors'.
    for c, msg in requests.items():
        server.receive(clients[c].unmask(msg, min_survivors=4))
    total, contributors = server.finish()
    assert contributors == [0, 1, 2, 3]
    np.testing.assert_array_equal(total, sum(inputs[c] for c in range(4)))
