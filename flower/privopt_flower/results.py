"""Per-round metrics: printed as they come (Flower streams the ServerApp's output to ``flwr run
--stream`` and ``flwr log``) and written as privopt's result files at the end."""

from __future__ import annotations

import csv
import json
import math
import time
from dataclasses import asdict, fields, is_dataclass
from pathlib import Path
from typing import Any

from .config import ConfigError, Settings


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

    def finish(self, **summary: Any) -> dict[str, Any]:
        """Writes ``metrics.csv`` and ``summary.json`` to the run's out-dir (if set) and
        returns the summary."""
        out = {
            "method": self.settings.method,
            "mode": self.mode,
            "seconds": time.monotonic() - self.start,
            "rounds": len(self.rows),
            "events": self.events,
            "round_seconds": [r["round_s"] for r in self.rows],
            **summary,
            "settings": {
                f.name: _plain(getattr(self.settings, f.name))
                for f in fields(self.settings)
                if f.name != "task"  # a user's model and data: not a setting, not JSON
            },
        }
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
        return out


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
