"""privopt_flower.secagg: the drop-in SecAgg+ workflow and mod, driven through Flower's own
ClientApp and workflow machinery with an in-process grid (no processes)."""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from flwr.app import ArrayRecord, Context, RecordDict
from flwr.client import ClientApp, NumPyClient
from flwr.clientapp import ClientApp as MessageClientApp
from loopback import (  # noqa: F401  (task_identity: an autouse fixture)
    LoopbackGrid,
    bare_train,
    fixed_update_app,
    global_model,
    legacy_context,
    task_identity,
)
from privopt.errors import ProtocolError

from privopt_flower import secagg


def legacy_app(values: dict[int, np.ndarray], weights: dict[int, int]) -> ClientApp:
    """A legacy ClientApp (NumPyClient) that returns a fixed update per node, behind the mod."""

    class Fixed(NumPyClient):
        def __init__(self, node: int) -> None:
            self.node = node

        def fit(self, parameters, config):
            return (
                [values[self.node][:6].reshape(2, 3), values[self.node][6:]],
                weights[self.node],
                {"node": self.node},
            )

    return ClientApp(
        client_fn=lambda ctx: Fixed(ctx.node_id).to_client(), mods=[secagg.secaggplus_mod]
    )


def message_app(values: dict[int, np.ndarray], weights: dict[int, int]) -> MessageClientApp:
    """A Message-API ClientApp behind the mod, replying with a fixed update per node."""
    return fixed_update_app(values, weights, secagg.secaggplus_mod)


def make_values(n: int, dim: int, seed: int = 0) -> dict[int, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {100 + i: rng.uniform(-2, 2, dim) for i in range(n)}


def weighted_mean_error_bound(clients: int, total_weight: float) -> float:
    """The most a weighted mean through Flower's encoding (the defaults: max_weight 1000,
    [-8, 8] in 2^22 levels) can be off: each client's stochastic rounding moves each entry
    of ``w·params`` by less than a step, and the sum is divided by ``Σ w``."""
    step = 2 * 8.0 / (4194304 - 1)
    return clients * step / (total_weight / 1000.0)


def test_secure_sum_equals_the_plain_sum_and_never_shows_an_input():
    values = make_values(7, 50)
    weights = {n: 1 for n in values}
    grid = LoopbackGrid({n: message_app(values, weights) for n in values})
    template = ArrayRecord([np.zeros(50)])
    out = secagg.secure_sum(
        grid, values, RecordDict({"arrays": template}), server_round=1, num_shares=5,
        reconstruction_threshold=3,
    )  # fmt: skip
    want = sum(values.values())
    got = out.arrays.to_numpy_ndarrays()[0]
    # Stochastic quantization to 2^22 levels over [-8, 8]: 4e-6 per entry per client.
    assert np.abs(got - want).max() < 7 * 4e-6
    assert out.weight == pytest.approx(7.0) and sorted(out.replies) == sorted(values)
    # What crossed the wire from the clients: no reply carries an input in the clear.
    for _, content in grid.seen:
        for record in content.array_records.values():
            assert len(record) == 0
        for v in content.config_records[secagg.RECORD].values():
            if isinstance(v, bytes):
                for x in values.values():
                    assert x.astype("<f8").tobytes()[:16] not in v


@pytest.mark.parametrize(
    "stage", [secagg.Stage.SHARE_KEYS, secagg.Stage.COLLECT_MASKED_VECTORS, secagg.Stage.UNMASK]
)
def test_a_client_that_dies_at_any_stage_is_handled_as_secagg_plus_handles_it(stage):
    values = make_values(7, 20, seed=1)
    weights = {n: 1 for n in values}
    victim = 103
    grid = LoopbackGrid({n: message_app(values, weights) for n in values}, kill={stage: {victim}})
    out = secagg.secure_sum(
        grid, values, RecordDict({"arrays": ArrayRecord([np.zeros(20)])}), server_round=4,
        num_shares=5, reconstruction_threshold=3,
    )  # fmt: skip
    counted = set(out.replies)
    # Dying before its masked input arrived leaves it out; dying after (at unmask) keeps it in.
    assert (victim in counted) == (stage == secagg.Stage.UNMASK)
    assert victim in out.dropped or victim in counted
    want = sum(values[n] for n in counted)
    assert np.abs(out.arrays.to_numpy_ndarrays()[0] - want).max() < 7 * 4e-6


def test_too_many_dropouts_stop_the_round_without_unmasking():
    values = make_values(5, 10, seed=2)
    weights = {n: 1 for n in values}
    grid = LoopbackGrid(
        {n: message_app(values, weights) for n in values},
        kill={secagg.Stage.COLLECT_MASKED_VECTORS: {100, 101, 102}},
    )
    with pytest.raises(ProtocolError):
        secagg.secure_sum(
            grid, values, RecordDict({"arrays": ArrayRecord([np.zeros(10)])}), server_round=2,
            num_shares=5, reconstruction_threshold=3,
        )  # fmt: skip


def test_a_tampered_masked_vector_is_refused_naming_the_node():
    values = make_values(6, 10, seed=3)
    weights = {n: 1 for n in values}

    def flip(content: RecordDict) -> None:
        rec = content.config_records[secagg.RECORD]
        msg = bytearray(rec["msg"])
        msg[-5] ^= 0xFF
        rec["msg"] = bytes(msg)

    grid = LoopbackGrid(
        {n: message_app(values, weights) for n in values},
        tamper={secagg.Stage.SHARE_KEYS: (104, flip)},
    )
    out = secagg.secure_sum(
        grid, values, RecordDict({"arrays": ArrayRecord([np.zeros(10)])}), server_round=3,
        num_shares=5, reconstruction_threshold=3,
    )  # fmt: skip
    assert 104 in out.dropped and "refused" in out.dropped[104]
    want = sum(values[n] for n in out.replies)
    assert 104 not in out.replies
    assert np.abs(out.arrays.to_numpy_ndarrays()[0] - want).max() < 6 * 4e-6


def test_weighted_mean_is_flowers_fedavg():
    values = make_values(4, 8, seed=4)
    weights = {100: 10, 101: 30, 102: 50, 103: 110}
    grid = LoopbackGrid({n: message_app(values, weights) for n in values})
    out = secagg.secure_sum(
        grid, values, RecordDict({"arrays": ArrayRecord([np.zeros(8)])}), server_round=1,
        weighted=True, num_shares=3, reconstruction_threshold=2,
    )  # fmt: skip
    total = sum(weights.values())
    mean = sum(weights[n] * values[n] for n in values) / total
    assert out.weight == pytest.approx(total, rel=1e-3)
    got = out.arrays.to_numpy_ndarrays()[0] / out.weight
    assert np.abs(got - mean).max() < weighted_mean_error_bound(len(values), total)


def test_the_workflow_gives_fedavg_of_the_sampled_clients_through_flowers_legacy_strategy():
    from flwr.server.strategy import FedAvg

    values = make_values(5, 9, seed=5)
    weights = {100: 5, 101: 15, 102: 20, 103: 40, 104: 20}
    grid = LoopbackGrid({n: legacy_app(values, weights) for n in values})
    strategy = FedAvg(fraction_fit=1.0, min_fit_clients=5, min_available_clients=5)
    context = legacy_context(values, [np.zeros((2, 3)), np.zeros(3)], strategy)
    workflow = secagg.SecAggPlusWorkflow(num_shares=3, reconstruction_threshold=2)
    workflow(grid, context)
    result = global_model(context)
    total = sum(weights.values())
    mean = sum(weights[n] * values[n] for n in values) / total
    assert result[0].shape == (2, 3) and result[1].shape == (3,)
    flat = np.concatenate([result[0].ravel(), result[1]])
    # Up to 1.9e-4 here (five clients, Σ w = 100): a fixed 1e-4 failed once, at 1.09e-4.
    assert np.abs(flat - mean).max() < weighted_mean_error_bound(len(values), total)


def test_a_train_message_without_secagg_configuration_is_refused():
    values = make_values(2, 4)
    app = message_app(values, {n: 1 for n in values})
    with pytest.raises(ValueError, match="without SecAgg\\+ configuration"):
        bare_train(app)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"num_shares": 2, "reconstruction_threshold": 1}, "greater than 2"),
        ({"num_shares": 5, "reconstruction_threshold": 5}, "less than `num_shares`"),
        ({"num_shares": 5, "reconstruction_threshold": 2}, "exceed half the neighbours"),
        ({"num_shares": 3, "reconstruction_threshold": 2, "modulus_range": 3 * 2**22},
         "power of 2"),
        ({"num_shares": 3, "reconstruction_threshold": 2, "modulus_range": 2**33},
         "at most 2\\*\\*32"),
        ({"num_shares": 3, "reconstruction_threshold": 2, "clipping_range": 0.0}, "clipping"),
    ],
)  # fmt: skip
def test_bad_settings_are_one_clear_error(kwargs, match):
    values = make_values(5, 4)
    grid = LoopbackGrid({n: message_app(values, {m: 1 for m in values}) for n in values})
    with pytest.raises(ValueError, match=match):
        secagg.secure_sum(
            grid, values, RecordDict({"arrays": ArrayRecord([np.zeros(4)])}), server_round=1,
            **kwargs,
        )  # fmt: skip


EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "secagg-drop-in"
RESULT = "[secagg-drop-in] result "


def example_config() -> dict[str, Any]:
    with open(EXAMPLE / "pyproject.toml", "rb") as f:
        return dict(tomllib.load(f)["tool"]["flwr"]["app"]["config"])


def plain_fedavg(cfg: dict[str, Any]) -> list[float]:
    """The example's FedAvg without SecAgg+: the test loss after each round."""
    sys.path.insert(0, str(EXAMPLE))
    from secagg_drop_in.task import local_train, problem

    clients = int(cfg["clients"])
    p = problem(clients)
    w = np.zeros(p.num_params)
    losses = []
    for _ in range(int(cfg["num-server-rounds"])):
        updates = [
            local_train(w, clients, i, int(cfg["local-steps"]), float(cfg["learning-rate"]))
            for i in range(clients)
        ]
        w = sum(n * u for u, n in updates) / sum(n for _, n in updates)
        losses.append(p.evaluate(w)[0])
    return losses


def test_the_drop_in_example_is_fedavg_in_process():
    sys.path.insert(0, str(EXAMPLE))
    from secagg_drop_in.client_app import app as client_app
    from secagg_drop_in.server_app import app as server_app

    cfg = example_config()
    clients = int(cfg["clients"])
    grid = LoopbackGrid(
        {100 + i: client_app for i in range(clients)},
        node_configs={
            100 + i: {"partition-id": i, "num-partitions": clients} for i in range(clients)
        },
        run_config=cfg,
    )
    ctx = Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config=cfg)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        server_app(grid, ctx)
    line = next(x for x in out.getvalue().splitlines() if x.startswith(RESULT))
    history = json.loads(line[len(RESULT) :])["history"]
    got = [h["loss"] for h in history[1:]]
    want = plain_fedavg(cfg)
    # Quantization to 2^22 levels over [-8, 8], weighted by n/1000: ~1e-5 on the weights.
    assert got == pytest.approx(want, rel=1e-4)
    assert history[-1]["accuracy"] > 0.8


@pytest.mark.localhost
def test_the_drop_in_example_runs_across_authenticated_supernodes(tmp_path):
    from privopt_flower.dev.localhost import Localhost

    cfg = example_config()
    # One round on three nodes keeps CI's budget; the in-process test covers more rounds.
    run = {"num-server-rounds": 1, "clients": 3, "timeout": 120.0}
    with Localhost(tmp_path, 3) as fed:
        assert fed.credentials is not None  # TLS and SuperNode authentication
        got = fed.run(EXAMPLE, run, until=RESULT, timeout=900)
    history = json.loads(got["line"])["history"]
    want = plain_fedavg({**cfg, **run})
    assert [h["loss"] for h in history[1:]] == pytest.approx(want, rel=1e-4)


@pytest.mark.parametrize("killed", [0, 2])
def test_flowers_secagg_plus_and_the_drop_in_give_the_same_model(killed):
    """The same legacy app run twice, with Flower's imports and with privopt's: the same
    aggregate within the quantization error, also with clients killed mid-round."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    from flwr.client.mod import secaggplus_mod as flower_mod
    from flwr.server.workflow import SecAggPlusWorkflow as FlowerWorkflow
    from secagg_vs_flower import one_round

    rng = np.random.default_rng(7)
    updates = {10 + i: rng.uniform(-1, 1, 300) for i in range(8)}
    weights = {n: int(rng.integers(10, 100)) for n in updates}
    # Two clients die after sharing their keys, before their masked inputs arrive. Seven
    # shares (six neighbours), threshold 4: every client keeps 4 live neighbours whichever
    # two die (privopt's threshold counts neighbours only: see the module docs).
    dead = set(list(updates)[:killed])
    results = []
    for workflow, mod in (
        (FlowerWorkflow(num_shares=7, reconstruction_threshold=4), flower_mod),
        (
            secagg.SecAggPlusWorkflow(num_shares=7, reconstruction_threshold=4),
            secagg.secaggplus_mod,
        ),
    ):
        _, _, avg = one_round(
            workflow, mod, updates, weights, kill={"collect_masked_vectors": dead}
        )
        results.append(avg)
    alive = [n for n in updates if n not in dead]
    mean = sum(weights[n] * updates[n] for n in alive) / sum(weights[n] for n in alive)
    for avg in results:
        assert np.abs(avg - mean).max() < 1e-4
    assert np.abs(results[0] - results[1]).max() < 1e-4


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        (lambda v: np.where(np.arange(v.size) == 3, np.nan, v), "not finite at index 3"),
        (lambda v: np.where(np.arange(v.size) == 5, np.inf, v), "not finite at index 5"),
        (lambda v: np.concatenate([v, v]), "has 20 values, the round sums 10"),
    ],
)
def test_a_bad_update_drops_its_client_by_name_and_the_round_completes(bad, why):
    values = make_values(6, 10, seed=8)
    weights = {n: 1 for n in values}
    liar = 102
    sent = {n: (bad(v) if n == liar else v) for n, v in values.items()}
    grid = LoopbackGrid({n: message_app(sent, weights) for n in values})
    out = secagg.secure_sum(
        grid, values, RecordDict({"arrays": ArrayRecord([np.zeros(10)])}), server_round=5,
        num_shares=5, reconstruction_threshold=3,
    )  # fmt: skip
    assert liar in out.dropped and why in out.dropped[liar]
    assert sorted(out.replies) == sorted(n for n in values if n != liar)
    want = sum(values[n] for n in out.replies)
    assert np.abs(out.arrays.to_numpy_ndarrays()[0] - want).max() < 6 * 4e-6


def test_entries_outside_the_clipping_range_are_clipped_as_flowers_are():
    values = {100: np.full(4, 20.0), 101: np.full(4, -0.5), 102: np.full(4, 0.25)}
    grid = LoopbackGrid({n: message_app(values, {m: 1 for m in values}) for n in values})
    out = secagg.secure_sum(
        grid, values, RecordDict({"arrays": ArrayRecord([np.zeros(4)])}), server_round=1,
        num_shares=3, reconstruction_threshold=2, clipping_range=8.0,
    )  # fmt: skip
    np.testing.assert_allclose(out.arrays.to_numpy_ndarrays()[0], 8.0 - 0.5 + 0.25, atol=2e-5)
