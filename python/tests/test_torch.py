"""privopt.torch: the methods on PyTorch modules give the Rust engine's numbers, perturb and
restore models in place, and refuse bad models, selections, losses and batches clearly."""

from __future__ import annotations

import csv
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from privopt import secagg
from privopt.errors import ComputationError, ParameterError, ProtocolError
from privopt.problem import Problem
from privopt.protocols import dome, pdsgd, scalar_fl
from privopt.torch import (
    DomeClient,
    DomeServer,
    EezoflDevice,
    ParameterSet,
    PdsgdAgent,
    ZerothOrderClient,
    ZerothOrderServer,
)

CLIENTS = 4


@pytest.fixture(scope="module")
def problem() -> Problem:
    return Problem(
        {
            "dataset": "synthetic_logistic",
            "clients": CLIENTS,
            "n_train": 400,
            "n_test": 100,
            "dim": 8,
        },
        {"kind": "logistic", "l2": 0.0},
        seed=3,
    )


class TorchLogistic(torch.nn.Module):
    """The engine's logistic model in PyTorch: d weights then one bias, softplus(z) − y·z."""

    def __init__(self, d: int, dtype: torch.dtype = torch.float64) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(d, 1, dtype=dtype)
        with torch.no_grad():
            self.linear.weight.zero_()
            self.linear.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x).squeeze(-1)


def rows_loss(problem: Problem):
    def loss(module: torch.nn.Module, idx: np.ndarray) -> torch.Tensor:
        x, y = problem.rows(idx)
        p = next(module.parameters())
        z = module(torch.from_numpy(x).to(p.dtype))
        t = torch.from_numpy(y).to(p.dtype)
        return (torch.nn.functional.softplus(z) - t * z).mean()

    return loss


def batches(
    problem: Problem, rng: np.random.Generator, client: int, steps: int
) -> list[np.ndarray]:
    own = problem.client_indices(client)
    return [
        np.sort(rng.choice(own, size=16, replace=False)).astype(np.uint64) for _ in range(steps)
    ]


def run_scalar_fl(problem, spec, rounds, difference, dtype=torch.float64, seed=11, restore="auto"):
    """One server; each client both as the engine's Client (numpy, the Rust model's loss) and
    as privopt.torch's (a PyTorch module). The engine's replies drive the server; the torch
    client's replies must be the same bytes."""
    d = problem.num_params
    server = scalar_fl.Server(spec, np.zeros(d), clients=CLIENTS, seed=seed)
    engine = [
        scalar_fl.Client(i, spec, np.zeros(d), mu=1e-3, difference=difference)
        for i in range(CLIENTS)
    ]
    modules = [TorchLogistic(d - 1, dtype) for _ in range(CLIENTS)]
    loss = rows_loss(problem)
    torch_clients = [
        ZerothOrderClient(
            m, spec, id=i, loss_fn=loss, mu=1e-3, difference=difference, restore=restore
        )
        for i, m in enumerate(modules)
    ]
    rng = np.random.default_rng(seed)
    equal = total = 0
    for _ in range(rounds):
        plan, who = server.begin_round(per_round=2)
        for i in who:
            catch = server.catch_up(i)
            engine[i].receive(catch)
            torch_clients[i].receive(catch)
            steps = batches(problem, rng, i, spec.local_steps)
            reply = engine[i].local_update(
                plan, lambda k, x, steps=steps: problem.loss(x, steps[k])
            )
            ours = torch_clients[i].local_update(plan, steps)
            equal += reply == ours
            total += 1
            server.receive(reply)
        server.finish_round()
    return server, engine, torch_clients, equal, total


@pytest.mark.parametrize("restore", ["copy", "regenerate"])
@pytest.mark.parametrize(
    "rule,steps,perturbations,difference",
    [
        ("decomfl", 1, 1, "forward"),
        ("hiso", 2, 2, "central"),
        ("decomfl", 3, 2, "forward"),
    ],
)
def test_zeroth_order_on_a_torch_model_gives_the_engines_scalars_and_model(
    problem, rule, steps, perturbations, difference, restore
):
    spec = scalar_fl.Spec(lr=0.5, local_steps=steps, perturbations=perturbations, rule=rule)
    server, engine, clients, equal, total = run_scalar_fl(
        problem, spec, 25, difference, restore=restore
    )
    # Scalars cross as float32: the replies are the same bytes, reply for reply.
    assert equal == total
    for e, c in zip(engine, clients):
        assert c.round == e.round
        # The module, replayed in place window by window, is the engine's model.
        np.testing.assert_allclose(c.params.to_numpy(), e.x, rtol=1e-12, atol=1e-14)
    start, end = problem.loss(np.zeros(problem.num_params)), problem.loss(server.x)
    assert end < 0.97 * start  # it trained


REPO = Path(__file__).resolve().parents[2]


def privopt_cli() -> Path:
    """The `privopt` binary of this checkout (`cargo build --release`), or $PRIVOPT_CLI."""
    cli = Path(os.environ.get("PRIVOPT_CLI", REPO / "target" / "release" / "privopt"))
    if not cli.is_file():
        message = f"no privopt CLI at {cli}: run `cargo build --release` or set PRIVOPT_CLI"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return cli


@pytest.mark.parametrize("rule", ["decomfl", "hiso"])
def test_a_torch_model_trained_as_privopt_run_trains_ends_where_privopt_run_ends(tmp_path, rule):
    """`privopt run` on a config (the Rust logistic model) against the same config and seed
    replayed from Python with a PyTorch module: the server seeded with the run's seed draws
    the run's plans, `Problem.scalar_fl_batches` gives the run's minibatches."""
    seed, rounds, steps, perturbations, batch = 5, 30, 2, 2, 16
    data = {
        "dataset": "synthetic_logistic",
        "clients": CLIENTS,
        "n_train": 400,
        "n_test": 100,
        "dim": 8,
    }
    config = tmp_path / "run.toml"
    config.write_text(
        f'name = "torch-{rule}"\nseed = {seed}\n'
        '[data]\ndataset = "synthetic_logistic"\nclients = 4\nn_train = 400\n'
        "n_test = 100\ndim = 8\n"
        '[model]\nkind = "logistic"\nl2 = 0.0\n'
        f'[method]\nname = "scalar_fl"\nalgorithm = "{rule}"\nrounds = {rounds}\n'
        f"lr = 0.5\nclients_per_round = 2\nlocal_steps = {steps}\n"
        f"perturbations = {perturbations}\nmu = 0.001\nbatch_size = {batch}\n"
        "eval_every = 1\n"
    )
    out = tmp_path / "out"
    subprocess.run(
        [privopt_cli(), "run", config, "--out", out, "--quiet"],
        check=True,
        capture_output=True,
    )
    with open(out / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [int(float(r["round"])) for r in rows] == list(range(rounds + 1))
    theirs = np.array([float(r["test_loss"]) for r in rows])

    problem = Problem(data, {"kind": "logistic", "l2": 0.0}, seed=seed)
    d = problem.num_params
    spec = scalar_fl.Spec(lr=0.5, local_steps=steps, perturbations=perturbations, rule=rule)
    # The engine's logistic model starts at zero, as TorchLogistic does.
    server = ZerothOrderServer(TorchLogistic(d - 1), spec, clients=CLIENTS, seed=seed)
    loss = rows_loss(problem)
    clients = [
        ZerothOrderClient(TorchLogistic(d - 1), spec, id=i, loss_fn=loss, mu=1e-3)
        for i in range(CLIENTS)
    ]
    ours = [problem.evaluate(ParameterSet(server.sync()).to_numpy())[0]]
    for r in range(rounds):
        plan, who = server.begin_round(per_round=2)
        for i in who:
            clients[i].receive(server.catch_up(i))
            minibatches = problem.scalar_fl_batches(
                i, r, local_steps=steps, batch_size=batch, seed=seed
            )
            server.receive(clients[i].local_update(plan, minibatches))
        server.finish_round()
        ours.append(problem.evaluate(ParameterSet(server.sync()).to_numpy())[0])
    # After the first round (a function of its scalars) and at the end: the 1e-9
    # and 1e-4 are met with room (the scalars cross as the same float32 words).
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-9)
    np.testing.assert_allclose(ours, theirs, rtol=1e-9)
    assert theirs[-1] < 0.97 * theirs[0]  # the run trained


def test_the_run_seeded_server_and_batches_are_privopt_runs_and_refuse_bad_clients(
    problem,
):
    spec = scalar_fl.Spec(lr=0.5)
    servers = [
        scalar_fl.Server(spec, np.zeros(problem.num_params), clients=CLIENTS, seed=s)
        for s in (9, 9, 10)
    ]
    # A round's participants and seeds are a function of the seed and the round (the plan's
    # bytes are not: each server has a session of its own).
    drawn = []
    for server in servers:
        plan, who = server.begin_round(2)
        first = scalar_fl.Participant(who[0], spec, problem.num_params)
        first.receive(server.catch_up(who[0]))
        drawn.append((who, first.accept(plan)))
    assert drawn[0] == drawn[1] != drawn[2]
    first = problem.scalar_fl_batches(1, 0, local_steps=3, batch_size=16, seed=9)
    assert len(first) == 3 and all(len(x) == 16 for x in first)
    own = set(problem.client_indices(1).tolist())
    assert all(set(x.tolist()) <= own for x in first)
    assert not np.array_equal(first[0], first[1])
    everything = problem.scalar_fl_batches(1, 0, local_steps=1, batch_size=0, seed=9)
    np.testing.assert_array_equal(everything[0], problem.client_indices(1))
    with pytest.raises(ParameterError, match="client 4 is not below the 4 clients"):
        problem.scalar_fl_batches(4, 0, local_steps=1, batch_size=16, seed=9)
    with pytest.raises(ParameterError, match="local_steps must be in"):
        problem.scalar_fl_batches(0, 0, local_steps=0, batch_size=16, seed=9)


def test_a_float32_module_tracks_the_float64_engine(problem):
    spec = scalar_fl.Spec(lr=0.5)
    _, engine, clients, _, _ = run_scalar_fl(problem, spec, 20, "forward", torch.float32)
    for e, c in zip(engine, clients):
        if c.round:
            np.testing.assert_allclose(c.params.to_numpy(), e.x, rtol=1e-3, atol=1e-4)


def test_the_server_adapter_starts_from_the_module_and_writes_the_global_model_back(
    problem,
):
    d = problem.num_params
    spec = scalar_fl.Spec(lr=0.5)
    module = TorchLogistic(d - 1)
    with torch.no_grad():
        module.linear.bias.fill_(0.25)
    server = ZerothOrderServer(module, spec, clients=2, seed=1)
    np.testing.assert_array_equal(server.server.x[-1], 0.25)
    clients = [
        ZerothOrderClient(TorchLogistic(d - 1), spec, id=i, loss_fn=rows_loss(problem))
        for i in range(2)
    ]
    for _ in range(3):
        plan, who = server.begin_round(per_round=2)
        for i in who:
            clients[i].receive(server.catch_up(i))  # a full catch-up: the clients start at 0
            server.receive(clients[i].local_update(plan, [problem.client_indices(i)[:16]]))
        assert server.finish_round() == who
    assert server.round == 3
    assert server.sync() is module
    np.testing.assert_array_equal(ParameterSet(module).to_numpy(), server.server.x)


@pytest.mark.parametrize("restore", ["copy", "regenerate"])
def test_perturbing_in_place_restores_the_module_and_a_failing_loss_leaves_it_intact(
    problem, restore
):
    d = problem.num_params
    spec = scalar_fl.Spec(lr=0.1, local_steps=3, perturbations=2)
    server = scalar_fl.Server(spec, np.zeros(d), clients=1, seed=2)
    module = TorchLogistic(d - 1)
    with torch.no_grad():
        module.linear.weight.normal_()
    before = ParameterSet(module).to_numpy()
    calls = []

    def flaky(m, idx):
        calls.append(1)
        if len(calls) == 7:  # mid-way through step 2's perturbations
            raise RuntimeError("data loader died")
        return rows_loss(problem)(m, idx)

    client = ZerothOrderClient(module, spec, id=0, loss_fn=flaky, restore=restore)
    plan, _ = server.begin_round(per_round=1)
    client.receive(server.catch_up(0))
    idx = [problem.client_indices(0)[:16]] * 3
    with pytest.raises(RuntimeError, match="data loader died"):
        client.local_update(plan, idx)
    np.testing.assert_allclose(client.params.to_numpy(), before, rtol=0, atol=1e-15)
    calls.clear()
    calls.extend([1] * 100)  # no more failures
    client.local_update(plan, idx)  # the plan can still be answered
    np.testing.assert_allclose(client.params.to_numpy(), before, rtol=0, atol=1e-15)


def test_a_nan_or_non_scalar_loss_is_refused_and_the_module_restored(problem):
    d = problem.num_params
    spec = scalar_fl.Spec(lr=0.1)
    server = scalar_fl.Server(spec, np.zeros(d), clients=1, seed=2)
    module = TorchLogistic(d - 1)
    plan, _ = server.begin_round(per_round=1)
    for bad, err, what in [
        (lambda m, b: m(torch.ones(3, d - 1, dtype=torch.float64)), TypeError, "shape"),
        (lambda m, b: torch.tensor(float("nan")), ComputationError, "nan"),
        (lambda m, b: "0.5", TypeError, "str"),
    ]:
        client = ZerothOrderClient(module, spec, id=0, loss_fn=bad)
        client.receive(server.catch_up(0))
        with pytest.raises(err, match=what):
            client.local_update(plan, [None])
        assert not ParameterSet(module).to_numpy().any()


def test_bad_modules_selections_and_batches_are_named():
    class Frozen(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("b", torch.zeros(3))
            self.w = torch.nn.Parameter(torch.zeros(3), requires_grad=False)

    with pytest.raises(ParameterError, match="Frozen has no trainable parameters"):
        ParameterSet(Frozen())
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    with pytest.raises(ParameterError, match="selects none of the 4 trainable parameters"):
        ParameterSet(net, "attention")
    assert ParameterSet(net, r"^2\.").names == ["2.weight", "2.bias"]
    assert len(ParameterSet(net, ["0.bias"])) == 4
    assert len(ParameterSet(net, lambda name, p: p.dim() == 2)) == 16
    complex_net = torch.nn.Module()
    complex_net.w = torch.nn.Parameter(torch.zeros(3, dtype=torch.complex64))
    with pytest.raises(ParameterError, match="'w' is torch.complex64"):
        ParameterSet(complex_net)
    with pytest.raises(TypeError, match="torch.nn.Module"):
        ParameterSet(np.zeros(3))  # type: ignore[arg-type]
    spec = scalar_fl.Spec(lr=0.1, local_steps=2)
    server = scalar_fl.Server(spec, np.zeros(21), clients=1, seed=0)
    client = ZerothOrderClient(net, spec, id=0, loss_fn=lambda m, b: m(b).pow(2).mean())
    plan, _ = server.begin_round(per_round=1)
    client.receive(server.catch_up(0))
    with pytest.raises(ParameterError, match="got 1 batches for 2 local steps"):
        client.local_update(plan, [torch.ones(2, 3)])
    with pytest.raises(ParameterError, match="ran out at local step 1 of 2"):
        client.local_update(plan, iter([torch.ones(2, 3)]))
    client.local_update(plan, lambda k: torch.ones(2, 3))  # a callable per step works


def test_a_model_of_another_size_is_refused_before_anything_is_applied():
    spec = scalar_fl.Spec(lr=0.1)
    server = scalar_fl.Server(spec, np.zeros(10), clients=1, seed=0)
    net = torch.nn.Linear(3, 2)  # 8 parameters, the server's model has 10
    before = ParameterSet(net).to_numpy()
    client = ZerothOrderClient(net, spec, id=0, loss_fn=lambda m, b: m(b).sum())
    server.begin_round(per_round=1)
    with pytest.raises(ParameterError, match="server's model has 10 parameters; client 0's has 8"):
        client.receive(server.catch_up(0))
    np.testing.assert_array_equal(ParameterSet(net).to_numpy(), before)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_the_in_place_path_and_the_window_by_window_path_agree_bit_for_bit(dtype):
    """A model past one 2^20-coordinate chunk, HiSo: the whole-model call on views of the
    tensors and the fallback over float64 copies of small windows (what bfloat16 or GPU
    parameters take) give the same replies and leave the same parameters and Hessian."""

    def make() -> torch.nn.Module:
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(700, 1500), torch.nn.Linear(1500, 3)).to(dtype)

    spec = scalar_fl.Spec(lr=0.05, local_steps=2, perturbations=2, rule="hiso")
    x0 = ParameterSet(make()).to_numpy()
    assert x0.size > 1 << 20
    server = scalar_fl.Server(spec, x0, clients=2, seed=4)
    data = 0.01 * torch.randn(8, 700, dtype=dtype)

    def loss(m, b):
        return m(data).pow(2).mean()

    # Regenerating restores (the path of models too large to copy), on both sides.
    views = ZerothOrderClient(make(), spec, id=0, loss_fn=loss, restore="regenerate")
    windows = ZerothOrderClient(
        make(), spec, id=1, loss_fn=loss, chunk=1 << 16, restore="regenerate"
    )
    windows.params.views = lambda: None  # force the fallback
    for _ in range(3):
        plan, _ = server.begin_round(per_round=2)
        replies = []
        for c in (views, windows):
            c.receive(server.catch_up(c.id))
            replies.append(c.local_update(plan, [None, None]))
        # The same scalars (client ids and tickets differ): the 16 bytes before the checksum.
        assert replies[0][-24:-8] == replies[1][-24:-8]
        for r in replies:
            server.receive(r)
        server.finish_round()
    np.testing.assert_array_equal(views.params.to_numpy(), windows.params.to_numpy())
    np.testing.assert_array_equal(views.h, windows.h)


DIRECTION_SCRIPT = r"""
import pickle, sys
import numpy as np, torch
from privopt.protocols import scalar_fl
from privopt.torch import ZerothOrderClient
catch, plan = pickle.loads(sys.stdin.buffer.read())
torch.manual_seed(5)
net = torch.nn.Sequential(torch.nn.Linear(20, 30), torch.nn.Tanh(), torch.nn.Linear(30, 1))
data = torch.linspace(-1, 1, 100).reshape(5, 20)
client = ZerothOrderClient(net, scalar_fl.Spec(lr=0.1, perturbations=3), id=0,
                           loss_fn=lambda m, b: m(data).pow(2).mean(), chunk=100)
client.receive(catch)
sys.stdout.buffer.write(client.local_update(plan, [None]))
"""


def test_the_direction_of_a_seed_is_the_same_in_another_process():
    torch.manual_seed(5)
    net = torch.nn.Sequential(torch.nn.Linear(20, 30), torch.nn.Tanh(), torch.nn.Linear(30, 1))
    data = torch.linspace(-1, 1, 100).reshape(5, 20)
    spec = scalar_fl.Spec(lr=0.1, perturbations=3)
    server = scalar_fl.Server(spec, ParameterSet(net).to_numpy(), clients=1, seed=9)
    plan, _ = server.begin_round(per_round=1)
    catch = server.catch_up(0)
    here = ZerothOrderClient(net, spec, id=0, loss_fn=lambda m, b: m(data).pow(2).mean())
    here.receive(catch)
    ours = here.local_update(plan, [None])
    there = subprocess.run(
        [sys.executable, "-c", DIRECTION_SCRIPT],
        input=pickle.dumps((catch, plan)),
        capture_output=True,
        check=True,
    ).stdout
    assert there == ours


def test_dome_on_a_torch_model_releases_the_engines_vectors_and_trains(problem):
    d = problem.num_params
    n = CLIENTS
    loss = rows_loss(problem)
    engine = dome.Server(np.zeros(d), k=4, clip=5.0, noise_total=0.0, lr=0.1, seed=1)
    module = TorchLogistic(d - 1)
    server = DomeServer(module, k=4, clip=5.0, noise_total=0.0, lr=0.1, seed=1)
    clients = [DomeClient(TorchLogistic(d - 1), loss_fn=loss) for _ in range(n)]
    rng = np.random.default_rng(0)
    for r in range(15):
        b1, c1 = engine.open_round(r, n)
        b2, c2 = server.open_round(r, n)
        assert (b1, c1) == (b2, c2)
        w = engine.model
        theirs, ours = [], []
        for i, c in enumerate(clients):
            idx = batches(problem, rng, i, 1)[0]
            _, g = problem.loss_grad(w, idx)
            theirs.append(dome.release(b1, c1, g))
            ours.append(c.release(b2, c2, idx, model=server.model))
        # The released vectors: the same quantized words up to the last one's rounding.
        for a, b in zip(theirs, ours):
            assert np.abs(a.astype(np.int64) - b.astype(np.int64)).max() <= 1
        total = np.sum(theirs, axis=0, dtype=np.uint32)  # what SecAgg+ returns: the sum mod 2^32
        g1 = engine.close_round(total, n)
        g2 = server.close_round(total, n)
        np.testing.assert_array_equal(g1, g2)
    # The module holds the server's model; the run trained.
    np.testing.assert_array_equal(ParameterSet(module).to_numpy(), engine.model)
    assert problem.loss(engine.model) < 0.9 * problem.loss(np.zeros(d))


def test_dome_through_secagg_with_a_cnn():
    torch.manual_seed(0)

    def make() -> torch.nn.Module:
        torch.manual_seed(0)
        return torch.nn.Sequential(
            torch.nn.Conv2d(1, 4, 3),
            torch.nn.ReLU(),
            torch.nn.Flatten(),
            torch.nn.Linear(4 * 6 * 6, 3),
        )

    x = torch.randn(60, 1, 8, 8)
    y = (x.mean(dim=(1, 2, 3)) > 0).long() + (x[:, 0, 0, 0] > 1).long()

    def loss(m, idx):
        return torch.nn.functional.cross_entropy(m(x[idx]), y[idx])

    server_model = make()
    server = DomeServer(server_model, k=16, clip=10.0, noise_total=0.0, lr=0.02, seed=3)
    n = 3
    clients = [DomeClient(make(), loss_fn=loss) for _ in range(n)]
    start = float(loss(server_model, slice(None)).detach())
    for r in range(30):
        broadcast, chunks = server.open_round(r, n)
        words = {
            i: c.release(broadcast, chunks, slice(20 * i, 20 * i + 20), model=server.model)
            for i, c in enumerate(clients)
        }
        session = bytes(16)
        graph = secagg.Graph.complete(n)
        agg = secagg.Server(session, r, graph, 2, server.dim)
        parts = [secagg.Client(session, r, i, graph.neighbours(i), 2, server.dim) for i in range(n)]
        for p in parts:
            agg.receive(p.advertisement)
        for _ in range(3):
            for i, msg in agg.close_stage().items():
                agg.receive(parts[i].handle(msg, words[i]))
        total, contributors = agg.finish()
        server.close_round(total, len(contributors))
    assert float(loss(server_model, slice(None)).detach()) < 0.8 * start


def test_pdsgd_agents_train_torch_models_on_a_ring(problem):
    d = problem.num_params
    loss = rows_loss(problem)
    n = 3
    keys = [pdsgd.Agent(i, bits=1024, insecure=True) for i in range(n)]
    rng = np.random.default_rng(1)
    edges = [(0, 1), (1, 2), (2, 0)]
    for i, j in edges:
        keys[i].add_neighbour(keys[j].announcement, int(rng.integers(200, 400)))
        keys[j].add_neighbour(keys[i].announcement, int(rng.integers(200, 400)))
    from privopt.torch import Schedule

    modules = [TorchLogistic(d - 1) for _ in range(n)]
    agents = [
        PdsgdAgent(m, a, loss_fn=loss, schedule=Schedule(lambda0=0.5))
        for m, a in zip(modules, keys)
    ]
    start = problem.loss(np.zeros(d))
    for k in range(1, 16):
        for a in agents:
            a.quantized()
        for i, j in edges + [(j, i) for i, j in edges]:
            agents[i].finish(agents[j].respond(agents[i].initiate(j, k)))
        for i, a in enumerate(agents):
            a.step(k, batches(problem, rng, i, 1)[0])
    xs = [a.params.to_numpy() for a in agents]
    mean = np.mean(xs, axis=0)
    assert problem.loss(mean) < 0.95 * start
    # Consensus: the agents' models are close to their mean.
    assert max(np.abs(x - mean).max() for x in xs) < 0.5 * np.abs(mean).max()


def test_eezofl_devices_on_torch_models_train_under_xmk_ckks(problem):
    """The in-place two-point scalar is the numpy one along eezofl.direction; four devices'
    encrypted scalars sum to the plain sum; stepping every device by the fused update keeps
    them on the numpy model, and the loss falls."""
    import os

    from privopt import ckks
    from privopt.ckks import multiparty as mk
    from privopt.protocols import eezofl

    d, seed, mu, lr = problem.num_params, 5, 1e-2, 0.5
    params = ckks.Params(4096, [37, 36, 36])
    crs = mk.CommonPoly(params, os.urandom(32))
    keys = [eezofl.Device(i, params, crs) for i in range(CLIENTS)]
    server = eezofl.Server(params, crs, list(range(CLIENTS)), [k.key_share for k in keys])
    for k in keys:
        k.set_key(server.relay)
    loss = rows_loss(problem)
    devices = [EezoflDevice(TorchLogistic(d - 1), k, loss_fn=loss, seed=seed, mu=mu) for k in keys]
    x = np.zeros(d)
    rng = np.random.default_rng(0)
    for r in range(30):
        phi = eezofl.direction(seed, r, d)
        batches_r = [batches(problem, rng, i, 1)[0] for i in range(CLIENTS)]
        plain = [
            (problem.loss(x + mu * phi, b) - problem.loss(x - mu * phi, b)) / (2 * mu)
            for b in batches_r
        ]
        ours = [dev.scalar(r, b) for dev, b in zip(devices, batches_r)]
        np.testing.assert_allclose(ours, plain, rtol=1e-6, atol=1e-9)
        total = server.sum([dev.upload(r, r, b) for dev, b in zip(devices, batches_r)])
        value = server.fuse([k.decryption_share(total) for k in keys])
        assert abs(value - sum(ours)) < 1e-3
        coefficient = lr * value / CLIENTS
        x = x - coefficient * phi
        for dev in devices:
            dev.step(r, coefficient)
    for dev in devices:
        np.testing.assert_allclose(dev.params.to_numpy(), x, rtol=1e-12, atol=1e-14)
    assert problem.loss(x) < 0.97 * problem.loss(np.zeros(d))


def test_bfloat16_parameters_and_buffers():
    """bfloat16 parameters go through float64 windows and round once per write; buffers
    (batch-norm statistics) are not parameters and stay untouched."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.BatchNorm1d(5), torch.nn.Linear(5, 1))
    net = net.to(torch.bfloat16)
    params = ParameterSet(net, chunk=3)
    assert params.views() is None  # not float32/float64: the window path
    assert params.names == [
        "0.weight",
        "0.bias",
        "1.weight",
        "1.bias",
        "2.weight",
        "2.bias",
    ]
    x = params.to_numpy()
    params.update(lambda off, w: np.add(w, 1.0, out=w))
    np.testing.assert_array_equal(
        params.to_numpy(), (torch.tensor(x + 1.0).to(torch.bfloat16)).double().numpy()
    )
    params.load(x)
    np.testing.assert_array_equal(params.to_numpy(), x)
    running = net[1].running_mean.clone()
    spec = scalar_fl.Spec(lr=0.01)
    server = scalar_fl.Server(spec, x, clients=1, seed=0)
    net.eval()
    data = torch.randn(4, 6).to(torch.bfloat16)
    client = ZerothOrderClient(
        net, spec, id=0, loss_fn=lambda m, b: m(data).float().pow(2).mean(), mu=0.05
    )
    plan, _ = server.begin_round(per_round=1)
    client.receive(server.catch_up(0))
    server.receive(client.local_update(plan, [None]))
    server.finish_round()
    torch.testing.assert_close(net[1].running_mean, running, rtol=0, atol=0)
    np.testing.assert_array_equal(client.params.to_numpy(), x)  # restored exactly (copy)


def test_a_restarted_client_resumes_from_its_saved_module_and_state(problem):
    """A HiSo client saved (module state_dict + state_dict()) and restored after missing
    rounds catches up by replay and answers exactly as one that never stopped."""
    d = problem.num_params
    spec = scalar_fl.Spec(lr=0.5, perturbations=2, rule="hiso")
    server = scalar_fl.Server(spec, np.zeros(d), clients=2, seed=3)
    loss = rows_loss(problem)
    steady = ZerothOrderClient(TorchLogistic(d - 1), spec, id=0, loss_fn=loss)
    flaky = ZerothOrderClient(TorchLogistic(d - 1), spec, id=1, loss_fn=loss)
    saved = None
    for r in range(8):
        plan, _ = server.begin_round(per_round=2)
        if r == 5:  # client 1 restarts from the save it made after round 2
            module = TorchLogistic(d - 1)
            module.load_state_dict(saved[0])
            flaky = ZerothOrderClient(module, spec, id=1, loss_fn=loss, state=saved[1])
            server.rewind(1, flaky.round)
        replies = []
        for c in (steady, flaky):
            c.receive(server.catch_up(c.id))
            replies.append(c.local_update(plan, [problem.client_indices(c.id)[:16]]))
        assert flaky.round == steady.round
        np.testing.assert_allclose(flaky.params.to_numpy(), steady.params.to_numpy(), rtol=1e-12)
        np.testing.assert_allclose(flaky.h, steady.h, rtol=1e-12)
        for rep in replies:
            server.receive(rep)
        server.finish_round()
        if r == 2:
            saved = (
                {k: v.clone() for k, v in flaky.module.state_dict().items()},
                flaky.state_dict(),
            )
    with pytest.raises(ParameterError, match="positive values"):
        ZerothOrderClient(
            TorchLogistic(d - 1),
            spec,
            id=1,
            loss_fn=loss,
            state={"round": 3, "h": [1.0]},
        )


def test_a_catch_up_that_fails_part_way_leaves_a_client_that_refuses_to_go_on(problem):
    d = problem.num_params
    spec = scalar_fl.Spec(lr=0.5)
    server = scalar_fl.Server(spec, np.zeros(d), clients=1, seed=0)
    client = ZerothOrderClient(TorchLogistic(d - 1), spec, id=0, loss_fn=rows_loss(problem))
    batch = [problem.client_indices(0)[:16]]
    for _ in range(2):
        plan, _ = server.begin_round(per_round=1)
        client.receive(server.catch_up(0))
        server.receive(client.local_update(plan, batch))
        server.finish_round()
    # The client holds round 1's start; the next catch-up replays round 1.

    def fail(op):
        raise RuntimeError("device lost")

    client._apply = fail  # type: ignore[method-assign]
    plan, _ = server.begin_round(per_round=1)
    with pytest.raises(RuntimeError, match="device lost"):
        client.receive(server.catch_up(0))
    with pytest.raises(ProtocolError, match="failed part-way .*device lost"):
        client.local_update(plan, batch)
