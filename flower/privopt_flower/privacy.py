"""A per-client privacy ledger for any Flower app that uses Flower's central-DP wrappers.

Wrap one of Flower's four central-DP strategies, ``DifferentialPrivacy{Server,Client}Side
{Fixed,Adaptive}Clipping`` (with SecAgg+ or without)::

    dp = DifferentialPrivacyClientSideFixedClipping(FedAvg(...), noise_multiplier=1.0,
                                                    clipping_norm=1.0, num_sampled_clients=10)
    strategy = PrivacyLedgerStrategy(dp, delta=1e-5, max_epsilon=8.0, out_dir="results")

After each round that released a model, every contributor's ε is updated from the noise that
model carried over that client's share of it: Flower's wrappers add noise of standard deviation
``σ·C/m`` (``m = num_sampled_clients``) to the weighted average, in which client ``i`` moves
the result by at most ``C·w_i/Σw`` (``w`` its ``num_examples``), so its noise multiplier for the
round is ``σ·Σw/(m·w_i)`` (``σ`` exactly when the ``m`` sampled clients weigh alike). A client
that sat a round out, or whose update was not in a released model (a round Flower's wrapper
discarded because a client failed), is not charged. ε composes by Rényi DP with no
amplification by sampling (:mod:`privopt_flower.ledger`), and is logged as one line per round,
written to ``privacy.csv`` / ``privacy.json`` in ``out_dir``.

The adaptive-clipping wrappers (Andrew et al., 2021) also release each round the count of
clients whose update the clipping norm clipped, with Gaussian noise of standard deviation
``clipped_count_stddev`` (σ_b); one client moves that count by at most 1, so a round charges each
contributor the update's mechanism (at the wrapper's update noise, σ_Δ = (σ⁻² − (2σ_b)⁻²)^−½,
over the client's share as above) composed with a Gaussian mechanism at σ_b. This is
conservative: Andrew et al. count the bits centred at ½ (sensitivity ½, multiplier 2σ_b), which
gives back the nominal σ at equal weights; their count of ``num_sampled_clients`` is public in
that analysis, not under add/remove of a client.

``max_epsilon`` stops a client from taking part once one more round at the nominal ``σ`` would
take it over its budget (it is left out of the sample, with a log line naming it); when no
sampled client is left, the round is skipped. The admission check assumes the client weighs
``1/m`` of the round (its weight is not known before it trains): a client that then claims a
larger share of the examples is charged what it actually spent, which can pass the budget by
that margin; it takes no further part.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from flwr.common import FitIns, FitRes, Parameters, Scalar
from flwr.server.client_manager import ClientManager
from flwr.server.client_proxy import ClientProxy
from flwr.server.strategy import (
    DifferentialPrivacyClientSideAdaptiveClipping,
    DifferentialPrivacyClientSideFixedClipping,
    DifferentialPrivacyServerSideAdaptiveClipping,
    DifferentialPrivacyServerSideFixedClipping,
    Strategy,
)

from .ledger import PrivacyLedger

__all__ = ["PrivacyLedgerStrategy"]

log = logging.getLogger("privopt_flower.privacy")

ADAPTIVE = (
    DifferentialPrivacyServerSideAdaptiveClipping,
    DifferentialPrivacyClientSideAdaptiveClipping,
)
SUPPORTED = (
    DifferentialPrivacyServerSideFixedClipping,
    DifferentialPrivacyClientSideFixedClipping,
    *ADAPTIVE,
)


def _combined(*sigmas: float) -> float:
    """The one Gaussian noise multiplier whose Rényi DP equals the composition of Gaussian
    mechanisms at ``sigmas`` (their precisions add)."""
    return float(sum(s**-2 for s in sigmas) ** -0.5)


class PrivacyLedgerStrategy(Strategy):
    """Flower's central-DP strategy wrappers, with each client's ε kept (module docs)."""

    def __init__(
        self,
        strategy: Strategy,
        *,
        delta: float,
        max_epsilon: float | None = None,
        out_dir: str | Path | None = None,
    ) -> None:
        if not isinstance(strategy, SUPPORTED):
            raise TypeError(
                "PrivacyLedgerStrategy wraps Flower's DifferentialPrivacy{Server,Client}Side"
                f"{{Fixed,Adaptive}}Clipping, got {type(strategy).__name__}"
            )
        if not strategy.noise_multiplier > 0:
            raise ValueError(
                f"the wrapped strategy's noise_multiplier is {strategy.noise_multiplier}: "
                "without noise there is no ε to keep"
            )
        # The adaptive wrappers' noise on the clipped count (None: no count is released).
        self.count_sigma: float | None = None
        if isinstance(strategy, ADAPTIVE):
            self.count_sigma = float(strategy.clipped_count_stddev)
            if not self.count_sigma > 0:
                raise ValueError(
                    "the wrapped strategy's clipped_count_stddev is "
                    f"{strategy.clipped_count_stddev}: the clipped count is released without "
                    "noise, so ε is unbounded"
                )
        self.strategy = strategy
        self.ledger = PrivacyLedger([], delta, max_epsilon)
        self.out_dir = None if out_dir is None else Path(out_dir)
        if self.out_dir is not None:  # an unwritable folder fails now, not after round 1
            self.out_dir.mkdir(parents=True, exist_ok=True)
            probe = self.out_dir / ".privopt-write-test"
            probe.write_text("")
            probe.unlink()

    @property
    def sigma(self) -> float:
        """A round's noise multiplier for a client weighing ``1/num_sampled_clients`` (the
        update's, composed with the clipped count's for the adaptive wrappers)."""
        return self._client_sigma(1.0)

    def _client_sigma(self, share: float) -> float:
        """A round's noise multiplier for a client whose weight is ``share`` times the
        uniform ``1/num_sampled_clients``."""
        update = float(self.strategy.noise_multiplier) / share if share > 0 else float("inf")
        return update if self.count_sigma is None else _combined(update, self.count_sigma)

    def __repr__(self) -> str:
        return f"PrivacyLedgerStrategy({self.strategy!r})"

    def initialize_parameters(self, client_manager: ClientManager) -> Parameters | None:
        return self.strategy.initialize_parameters(client_manager)

    def configure_fit(
        self, server_round: int, parameters: Parameters, client_manager: ClientManager
    ) -> list[tuple[ClientProxy, FitIns]]:
        chosen = self.strategy.configure_fit(server_round, parameters, client_manager)
        admitted = []
        for proxy, ins in chosen:
            if self.ledger.admits(proxy.node_id, self.sigma):
                admitted.append((proxy, ins))
            else:
                log.warning("round %s: %s", server_round, self.ledger.stop_reason(proxy.node_id))
        if chosen and not admitted:
            log.warning("round %s skipped: every sampled node is at its budget", server_round)
        return admitted

    def aggregate_fit(
        self,
        server_round: int,
        results: list[tuple[ClientProxy, FitRes]],
        failures: list[tuple[ClientProxy, FitRes] | BaseException],
    ) -> tuple[Parameters | None, dict[str, Scalar]]:
        params, metrics = self.strategy.aggregate_fit(server_round, results, failures)
        if params is not None and results:
            total = sum(res.num_examples for _, res in results)
            m = self.strategy.num_sampled_clients
            sigmas = {
                proxy.node_id: self._client_sigma(m * res.num_examples / total if total else 0.0)
                for proxy, res in results
            }
            self.ledger.record_each(server_round, sigmas)
            for node in sigmas:
                budget = self.ledger.max_epsilon
                if budget is not None and self.ledger.epsilon(node) > budget:
                    log.warning(
                        "round %s: node %s spent ε = %.4g, over its budget %g (its share of "
                        "the examples exceeded 1/%s); it takes no further part",
                        server_round,
                        node,
                        self.ledger.epsilon(node),
                        budget,
                        m,
                    )
                    self.ledger.exhausted.add(node)
            log.info("round %s: %s", server_round, self.ledger.summary())
            if self.out_dir is not None:
                self.ledger.write(self.out_dir)
        return params, metrics

    def configure_evaluate(
        self, server_round: int, parameters: Parameters, client_manager: ClientManager
    ) -> Any:
        return self.strategy.configure_evaluate(server_round, parameters, client_manager)

    def aggregate_evaluate(self, server_round: int, results: Any, failures: Any) -> Any:
        return self.strategy.aggregate_evaluate(server_round, results, failures)

    def evaluate(self, server_round: int, parameters: Parameters) -> Any:
        return self.strategy.evaluate(server_round, parameters)
