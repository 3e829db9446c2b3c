"""Per-round metrics: printed as they come (Flower streams the ServerApp's output to ``flwr run
--stream`` and ``flwr log``) and written as privopt's result files at the end."""

from __future__ import annotations

import csv
import json
import math
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, fields, is_dataclass
from pathlib import Path
from typing import Any

from .config import ConfigError, Settings


@dataclass(frozen=True)
class Outcome:
    """What every method's server knows at the end of a run. ``test_loss`` and ``accuracy``
    are the last evaluation's (``None`` if there was none, or no accuracy for the model)."""

    test_loss: float | None
    accuracy: float | None
    up_bytes: int
    down_bytes: int


@dataclass(frozen=True)
class ScalarFlOutcome(Outcome):
    full_downloads: int  # clients too stale to replay, sent the whole model
    model_sha: str  # a digest of the final model (equal runs, equal digests)
    # With scalar_fl.epsilon > 0: the noise multiplier, every client's ε after the run (from
    # the rounds it contributed to), the rounds skipped (their secure sum failed) and who
    # reached its budget.
    sigma: float = 0.0
    epsilon_per_client: list[float] | None = None
    skipped_rounds: int = 0
    clients_at_budget: list[int] | None = None


@dataclass(frozen=True)
class DomeOutcome(Outcome):
    epsilon_target: float
    epsilon_spent: float
    delta: float
    sigma: float
    completed_rounds: int
    aborted_rounds: int
    # With a privacy ledger: every client's ε after the run, and who reached max-epsilon.
    epsilon_per_client: list[float] | None = None
    clients_at_budget: list[int] | None = None


@dataclass(frozen=True)
class EezoflOutcome(Outcome):
    failed_rounds: int
    members: list[int]
    threshold: int  # how many of the members decrypt (= len(members): N-of-N)
    keyings: int  # collective keys made (1: never re-keyed)


@dataclass(frozen=True)
class PdsgdOutcome(Outcome):
    agents: list[int]  # the agents still running at the end


@dataclass(frozen=True)
class DpfheOutcome(Outcome):
    sigma: float
    epsilon_spent: float
    refreshes: int


@dataclass(frozen=True)
class RunResult(Mapping[str, Any]):
    """A finished run: how it went, the method's :class:`Outcome`, and its settings. It reads
    as the flat mapping ``summary.json`` holds too (``result["test_loss"]``)."""

    method: str
    mode: str
    seconds: float
    rounds: int
    events: list[str]
    round_seconds: list[float]
    outcome: Outcome
    settings: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """The flat form: the run's fields, the outcome's, then ``settings``."""
        run = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "outcome"}
        settings = run.pop("settings")
        return {**run, **asdict(self.outcome), "settings": settings}

    def __getitem__(self, key: str) -> Any:
        return self.to_dict()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_dict())

    def __len__(self) -> int:
        return len(self.to_dict())


class Report:
    """Rows of per-round metrics, a run summary, and the files they go to."""

    def __init__(self, s: Settings, mode: str) -> None:
        self.settings = s
        self.mode = mode
        self.rows: list[dict[str, Any]] = []
        self.events: list[str] = []
        self.start = time.monotonic()
        self._last = self.start
        if s.out_dir:  # a result file that cannot be written fails now, not after the run
            d = Path(s.out_dir)
            try:
                d.mkdir(parents=True, exist_ok=True)
                probe = d / ".privopt-write-check"
                probe.write_text("")
                probe.unlink()
            except OSError as e:
                raise ConfigError(f"out-dir {str(d)!r} cannot be written: {e}") from e

    def event(self, text: str) -> None:
        """Something a reader of the run must know (a dropout, an aborted round)."""
        self.events.append(text)
        print(f"[privopt] {text}", flush=True)

    def round(self, **row: Any) -> None:
        now = time.monotonic()
        row["round_s"] = round(now - self._last, 3)  # wall time since the previous row
        self._last = now
        self.rows.append(row)
        shown = " ".join(f"{k}={_fmt(v)}" for k, v in row.items())
        print(f"[privopt] {shown}", flush=True)

    def finish(self, outcome: Outcome) -> RunResult:
        """Writes ``metrics.csv`` and ``summary.json`` to the run's out-dir (if set) and
        returns the result."""
        result = RunResult(
            method=self.settings.method,
            mode=self.mode,
            seconds=time.monotonic() - self.start,
            rounds=len(self.rows),
            events=self.events,
            round_seconds=[r["round_s"] for r in self.rows],
            outcome=outcome,
            settings={
                f.name: _plain(getattr(self.settings, f.name))
                for f in fields(self.settings)
                if f.name != "task"  # a user's model and data: not a setting, not JSON
            },
        )
        out = result.to_dict()
        shown = {k: v for k, v in out.items() if k != "settings"}
        print(f"[privopt] summary {json.dumps(_finite(shown))}", flush=True)
        if self.settings.out_dir:
            d = Path(self.settings.out_dir)
            d.mkdir(parents=True, exist_ok=True)
            keys: list[str] = []
            for r in self.rows:
                keys += [k for k in r if k not in keys]
            with open(d / "metrics.csv", "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=keys)
                w.writeheader()
                w.writerows(self.rows)
            (d / "summary.json").write_text(json.dumps(_finite(out), indent=2) + "\n")
        return result


def _plain(v: Any) -> Any:
    """A settings value as JSON has it (the method's typed settings as a table)."""
    return asdict(v) if is_dataclass(v) and not isinstance(v, type) else v


def _fmt(v: Any) -> str:
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def _finite(v: Any) -> Any:
    """JSON has no NaN: write null."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_finite(x) for x in v]
    return v
