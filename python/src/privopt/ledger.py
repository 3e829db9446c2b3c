"""A per-client privacy ledger: each client's (ε, δ) from the rounds its update was in a
released sum and the noise that sum carried.

Each release is a Gaussian mechanism on the client's clipped contribution with noise
multiplier ``σ_r`` (noise standard deviation over the clip norm). Gaussian mechanisms compose
exactly in Rényi DP (order α costs ``α / 2σ²`` each), so the rounds a client took part in are
one Gaussian mechanism with ``1/σ² = Σ_r 1/σ_r²``, and its ε is that mechanism's (the RDP
accountant of :func:`privopt.dp.epsilon`, no subsampling: every round's participants are
chosen by the server, not sampled secretly).
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Container, Iterable, Mapping
from pathlib import Path

from . import dp
from ._svg import line_chart


class PrivacyLedger:
    """Per-client ε over a run. ``max_epsilon`` (``None``: no limit) is each client's budget:
    :meth:`admits` says whether one more release at ``σ`` keeps a client within it."""

    def __init__(
        self, clients: int | Iterable[int], delta: float, max_epsilon: float | None = None
    ) -> None:
        """``clients``: their ids (or their count, for ids 0 … n−1); a client first seen in
        :meth:`record` joins the ledger then."""
        if not 0 < delta < 1:
            raise ValueError(f"delta must be in (0, 1), got {delta}")
        if max_epsilon is not None and not max_epsilon > 0:
            raise ValueError(f"max_epsilon must be > 0, got {max_epsilon}")
        self.delta, self.max_epsilon = delta, max_epsilon
        ids = range(clients) if isinstance(clients, int) else clients
        self._precision = dict.fromkeys(ids, 0.0)  # Σ 1/σ_r² per client
        self._releases = dict.fromkeys(self._precision, 0)
        self.rows: list[tuple[int, int, int, float]] = []  # (round, client, releases, ε)
        #: Clients a release was refused to because it would exceed their budget.
        self.exhausted: set[int] = set()

    def _epsilon(self, precision: float) -> float:
        if precision == 0:
            return 0.0
        return dp.epsilon(1 / math.sqrt(precision), 1, self.delta, sampling="full")

    def epsilon(self, client: int) -> float:
        """Client ``client``'s ε so far."""
        return self._epsilon(self._precision.get(client, 0.0))

    def admits(self, client: int, sigma: float, releases: int = 1) -> bool:
        """Whether ``releases`` more releases at noise multiplier ``sigma`` (the next one, and
        any admitted but not yet recorded) keep the client within budget (a client refused
        once is refused from then on)."""
        if client in self.exhausted:
            return False
        if self.max_epsilon is None or sigma == math.inf:
            return True
        ahead = releases * sigma**-2
        if self._epsilon(self._precision.get(client, 0.0) + ahead) <= self.max_epsilon:
            return True
        self.exhausted.add(client)
        return False

    def admit(
        self, candidates: Iterable[int], sigma: float, pending: Container[int] = ()
    ) -> tuple[list[int], list[int]]:
        """``candidates`` split into those :meth:`admits` to one more release at ``sigma`` (two
        for those in ``pending``, admitted to a release not yet recorded) and those it stops
        now; clients stopped before are in neither list."""
        admitted: list[int] = []
        stopped: list[int] = []
        for c in candidates:
            if c not in self.exhausted:
                (admitted if self.admits(c, sigma, 1 + (c in pending)) else stopped).append(c)
        return admitted, stopped

    def stop_reason(self, client: int, budget_name: str = "max_epsilon") -> str:
        """The line that says why ``client`` takes no further part (``budget_name``: the
        setting that holds the budget)."""
        return (
            f"party {client} reached {budget_name} = {self.max_epsilon:g} "
            f"(ε = {self.epsilon(client):.4g}) and takes no further part"
        )

    def record(self, round_: int, clients: list[int], sigma: float) -> None:
        """Round ``round_`` released a sum containing ``clients``' updates at noise
        multiplier ``sigma`` (``inf``: no release reached them)."""
        self.record_each(round_, dict.fromkeys(clients, sigma))

    def record_each(self, round_: int, sigmas: Mapping[int, float]) -> None:
        """Round ``round_`` released a sum containing each listed client's update at its own
        noise multiplier (the noise over that client's sensitivity in the sum)."""
        for c, sigma in sigmas.items():
            self._precision.setdefault(c, 0.0)
            self._releases.setdefault(c, 0)
            if sigma < math.inf:
                self._precision[c] += sigma**-2
                self._releases[c] += 1
        for c in self._precision:
            self.rows.append((round_, c, self._releases[c], self.epsilon(c)))

    def summary(self) -> str:
        """One progress line: the spread of ε over clients, and how many are at budget."""
        eps = sorted(self.epsilon(c) for c in self._precision) or [0.0]
        line = f"ε per client: min {eps[0]:.3g}, median {eps[len(eps) // 2]:.3g}, max {eps[-1]:.3g}"
        if self.max_epsilon is not None:
            line += f"; budget {self.max_epsilon:g}, {len(self.exhausted)} client(s) stopped"
        return line

    def write(self, out_dir: str | Path) -> None:
        """``privacy.csv`` (round, client, releases, epsilon per row), ``privacy.json`` (the
        final ε of each client, δ, the budget) and ``privacy.svg`` (ε over the rounds) in
        ``out_dir``."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        with open(out / "privacy.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["round", "client", "releases", "epsilon"])
            w.writerows(self.rows)
        final = {
            "delta": self.delta,
            "max_epsilon": self.max_epsilon,
            "clients": list(self._precision),
            "epsilon": [self.epsilon(c) for c in self._precision],
            "releases": list(self._releases.values()),
        }
        (out / "privacy.json").write_text(json.dumps(final, indent=2) + "\n")
        (out / "privacy.svg").write_text(self.plot())

    def plot(self) -> str:
        """ε over the rounds as an SVG: one line per client (with up to 12 clients), else the
        minimum, median and maximum over clients; the budget as a dashed line."""
        rounds = sorted({r for r, _, _, _ in self.rows})
        by_client: dict[int, dict[int, float]] = {}
        for r, c, _, eps in self.rows:
            by_client.setdefault(c, {})[r] = eps
        if len(by_client) <= 12:
            series = {f"client {c}": [v.get(r, 0.0) for r in rounds] for c, v in by_client.items()}
        else:
            columns = [sorted(v.get(r, 0.0) for v in by_client.values()) for r in rounds]
            series = {
                "max": [col[-1] for col in columns],
                "median": [col[len(col) // 2] for col in columns],
                "min": [col[0] for col in columns],
            }
        budget = None if self.max_epsilon is None else ("budget", self.max_epsilon)
        points = {name: list(zip(rounds, ys, strict=True)) for name, ys in series.items()}
        return line_chart(points, y_label="ε", reference=budget)
