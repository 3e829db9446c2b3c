"""privopt_flower.privacy: each client's ε under Flower's own DP wrappers, through Flower's
legacy workflow (in process), with privopt's SecAgg+ drop-in or without it."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from flwr.app import Context, RecordDict
from flwr.client import ClientApp, NumPyClient
from flwr.client.mod import fixedclipping_mod
from flwr.common import ndarrays_to_parameters
from flwr.server import LegacyContext, ServerConfig
from flwr.server.strategy import (
    DifferentialPrivacyClientSideAdaptiveClipping,
    DifferentialPrivacyClientSideFixedClipping,
    DifferentialPrivacyServerSideAdaptiveClipping,
    DifferentialPrivacyServerSideFixedClipping,
    FedAvg,
)
from flwr.server.workflow import DefaultWorkflow
from loopback import LoopbackGrid, task_identity  # noqa: F401  (an autouse fixture)

from privopt_flower import secagg
from privopt_flower.privacy import PrivacyLedgerStrategy

NODES = [100, 101, 102, 103, 104]
DIM = 6


def app(weights: dict[int, int], mods: list[Any]) -> ClientApp:
    class Step(NumPyClient):
        def __init__(self, node: int) -> None:
            self.node = node

        def fit(self, parameters: list[np.ndarray], config: dict[str, Any]) -> Any:
            rng = np.random.default_rng(self.node)
            return [parameters[0] + rng.normal(0, 0.3, DIM)], weights[self.node], {}

    return ClientApp(client_fn=lambda ctx: Step(ctx.node_id).to_client(), mods=mods)


def run(
    strategy: PrivacyLedgerStrategy,
    weights: dict[int, int],
    rounds: int,
    mods: list[Any] | None = None,
    fit_workflow: Any = None,
) -> list[set[int]]:
    """Runs ``rounds`` rounds; returns the nodes sampled each round."""
    sampled: list[set[int]] = []
    inner = strategy.strategy.strategy
    configure = inner.configure_fit

    def spy(rnd: int, parameters: Any, manager: Any) -> Any:
        chosen = configure(rnd, parameters, manager)
        sampled.append({p.node_id for p, _ in chosen})
        return chosen

    inner.configure_fit = spy
    grid = LoopbackGrid({n: app(weights, mods or []) for n in NODES})
    ctx = Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config={})
    legacy = LegacyContext(context=ctx, config=ServerConfig(num_rounds=rounds), strategy=strategy)
    DefaultWorkflow(fit_workflow=fit_workflow)(grid, legacy)
    return sampled


def fedavg(fraction: float) -> FedAvg:
    return FedAvg(
        fraction_fit=fraction,
        fraction_evaluate=0.0,
        min_fit_clients=1,
        min_available_clients=len(NODES),
        initial_parameters=ndarrays_to_parameters([np.zeros(DIM)]),
    )


def rdp_epsilon(sigmas: list[float], delta: float) -> float:
    dp_accounting = pytest.importorskip("dp_accounting")
    acc = dp_accounting.rdp.RdpAccountant()
    acc.compose(dp_accounting.ComposedDpEvent([dp_accounting.GaussianDpEvent(s) for s in sigmas]))
    return float(acc.get_epsilon(delta))


def test_each_clients_epsilon_is_dp_accountings_for_the_rounds_it_was_in(tmp_path):
    weights = {100: 10, 101: 10, 102: 30, 103: 20, 104: 30}
    sigma, m = 1.5, 3
    dp = DifferentialPrivacyServerSideFixedClipping(
        fedavg(0.6), noise_multiplier=sigma, clipping_norm=1.0, num_sampled_clients=m
    )
    strategy = PrivacyLedgerStrategy(dp, delta=1e-5, out_dir=tmp_path)
    sampled = run(strategy, weights, rounds=6)
    assert len(sampled) == 6 and all(len(s) == m for s in sampled)
    for node in NODES:
        # The noise over this node's share of each released average it was in.
        sigmas = [
            sigma * sum(weights[n] for n in s) / (m * weights[node]) for s in sampled if node in s
        ]
        want = rdp_epsilon(sigmas, 1e-5) if sigmas else 0.0
        assert strategy.ledger.epsilon(node) == pytest.approx(want, rel=0.01), node
    # More rounds at the same weight, more ε; a node never sampled spent nothing.
    counts = {n: sum(n in s for s in sampled) for n in NODES}
    a, b = 100, 101  # the same weight
    if counts[a] != counts[b]:
        more, fewer = (a, b) if counts[a] > counts[b] else (b, a)
        assert strategy.ledger.epsilon(more) > strategy.ledger.epsilon(fewer)
    written = json.loads((tmp_path / "privacy.json").read_text())
    assert written["clients"] == sorted(written["clients"], key=written["clients"].index)
    assert dict(zip(written["clients"], written["epsilon"], strict=True)) == pytest.approx(
        {n: strategy.ledger.epsilon(n) for n in written["clients"]}
    )
    assert (tmp_path / "privacy.csv").read_text().startswith("round,client,releases,epsilon")
    svg = (tmp_path / "privacy.svg").read_text()
    assert svg.startswith("<svg") and svg.count("<polyline") == len(written["clients"])


def test_the_adaptive_wrappers_charge_the_update_and_the_clipped_count(tmp_path):
    weights = {100: 10, 101: 10, 102: 30, 103: 20, 104: 30}
    sigma, m, count_stddev = 1.5, 3, 2.0
    dp = DifferentialPrivacyServerSideAdaptiveClipping(
        fedavg(0.6),
        noise_multiplier=sigma,
        num_sampled_clients=m,
        clipped_count_stddev=count_stddev,
    )
    # Flower's split of the budget: the update gets (σ⁻² − (2σ_b)⁻²)^−½.
    update = (sigma**-2 - (2 * count_stddev) ** -2) ** -0.5
    assert dp.noise_multiplier == pytest.approx(update)
    strategy = PrivacyLedgerStrategy(dp, delta=1e-5)
    sampled = run(strategy, weights, rounds=5)
    for node in NODES:
        events = []
        for s in sampled:
            if node in s:  # the update over this node's share, and the clipped count
                events += [update * sum(weights[n] for n in s) / (m * weights[node]), count_stddev]
        want = rdp_epsilon(events, 1e-5) if events else 0.0
        assert strategy.ledger.epsilon(node) == pytest.approx(want, rel=0.01), node
    # The count charged at sensitivity 1 costs more than the nominal σ alone would.
    assert strategy.sigma < sigma
    # Flower refuses a noiseless count when the update is noised; a wrapper changed after
    # construction is refused here too.
    bare = DifferentialPrivacyClientSideAdaptiveClipping(
        fedavg(1.0), noise_multiplier=1.0, num_sampled_clients=5, clipped_count_stddev=1.0
    )
    bare.clipped_count_stddev = 0.0
    with pytest.raises(ValueError, match="clipped count is released without noise"):
        PrivacyLedgerStrategy(bare, delta=1e-5)


def test_max_epsilon_stops_a_client_and_then_the_run():
    weights = dict.fromkeys(NODES, 10)
    dp = DifferentialPrivacyServerSideFixedClipping(
        fedavg(1.0), noise_multiplier=2.0, clipping_norm=1.0, num_sampled_clients=5
    )
    budget = rdp_epsilon([2.0] * 3, 1e-5) * 1.001  # room for exactly three rounds
    strategy = PrivacyLedgerStrategy(dp, delta=1e-5, max_epsilon=budget)
    run(strategy, weights, rounds=5)
    for node in NODES:
        assert strategy.ledger.epsilon(node) <= budget
        assert strategy.ledger.epsilon(node) == pytest.approx(rdp_epsilon([2.0] * 3, 1e-5))
    assert strategy.ledger.exhausted == set(NODES)


def test_with_the_secagg_drop_in_and_client_side_clipping():
    weights = dict.fromkeys(NODES, 10)
    dp = DifferentialPrivacyClientSideFixedClipping(
        fedavg(1.0), noise_multiplier=1.0, clipping_norm=0.5, num_sampled_clients=5
    )
    strategy = PrivacyLedgerStrategy(dp, delta=1e-5)
    workflow = secagg.SecAggPlusWorkflow(num_shares=5, reconstruction_threshold=3)
    run(strategy, weights, rounds=2, mods=[secagg.secaggplus_mod, fixedclipping_mod],
        fit_workflow=workflow)  # fmt: skip
    for node in NODES:
        assert strategy.ledger.epsilon(node) == pytest.approx(rdp_epsilon([1.0, 1.0], 1e-5))


def test_bad_settings_are_one_clear_error(tmp_path):
    with pytest.raises(TypeError, match="wraps Flower's DifferentialPrivacy"):
        PrivacyLedgerStrategy(fedavg(1.0), delta=1e-5)
    dp = DifferentialPrivacyServerSideFixedClipping(
        fedavg(1.0), noise_multiplier=1.0, clipping_norm=1.0, num_sampled_clients=5
    )
    with pytest.raises(ValueError, match="max_epsilon must be > 0"):
        PrivacyLedgerStrategy(dp, delta=1e-5, max_epsilon=0.0)
    with pytest.raises(ValueError, match="delta must be in"):
        PrivacyLedgerStrategy(dp, delta=0.0)
    blocked = tmp_path / "file"
    blocked.write_text("")
    with pytest.raises(OSError):
        PrivacyLedgerStrategy(dp, delta=1e-5, out_dir=blocked / "run")
