"""The accuracy-vs-privacy grid driver (python/repro/private_lm_grid.py) at smoke size: it runs
each cell with the documented settings, the private cell's noise and rate are the
accountant's and the rule's, the report and plots cover what ran, and a second call resumes
instead of running a finished cell again."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("torch")

REPRO = Path(__file__).resolve().parents[1] / "repro"


def grid_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("private_lm_grid", REPRO / "private_lm_grid.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


SMOKE = ["--rounds", "2", "--eval-size", "16", "--final-size", "24", "--progress-every", "0"]


def test_the_grid_runs_its_cells_reports_them_and_resumes(
    minilm_fetched: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    grid = grid_module()
    argv = ["--out", str(tmp_path), "--methods", "decomfl", "--params", "lora"]
    argv += ["--epsilons", "inf,8", "--jobs", "2", *SMOKE]
    assert grid.main(argv) == 0

    clear = json.loads((tmp_path / "decomfl-lora-clear-seed0" / "summary.json").read_text())
    private = json.loads((tmp_path / "decomfl-lora-eps8-seed0" / "summary.json").read_text())
    assert clear["noise_multiplier"] == 0.0 and clear["settings"]["per_round"] == 3
    assert clear["settings"]["lr"] == 1e-2 and clear["test_snippets"] == 24
    lr, sigma = grid.private_rate("decomfl", "lora", 8.0, 2)
    assert private["noise_multiplier"] == pytest.approx(sigma) and sigma > 0
    assert private["settings"]["lr"] == lr < 1e-2
    assert private["settings"]["clip"] == 1.5 and private["settings"]["noise_seed"] == 8
    # Every client's ε is within the budget, and some client spent some.
    eps = private["epsilon_per_client"]
    assert max(eps) <= 8.0 + 1e-9 and max(eps) > 0
    # SecAgg+ costs bytes the clear channel does not.
    assert private["bytes_up_per_participant_round"] > clear["bytes_up_per_participant_round"]

    report = (tmp_path / "report.md").read_text()
    assert "| DeComFL, LoRA, no DP | 1 of 1 |" in report
    assert "| DeComFL, LoRA, ε = 8 | 1 of 1 |" in report
    for name in ("loss-lora.svg", "accuracy-lora.svg"):
        svg = (tmp_path / name).read_text()
        assert svg.count("<polyline") == 2 and "ε = 8" in svg

    # Resumes: nothing runs again, and a cell not run yet is listed as missing.
    log = tmp_path / "decomfl-lora-clear-seed0" / "run.log"
    before = log.stat().st_mtime_ns
    capsys.readouterr()
    more = ["--out", str(tmp_path), "--methods", "decomfl", "--params", "lora"]
    more += ["--epsilons", "inf,8,2", "--report-only", *SMOKE]
    assert grid.main(more) == 0
    out = capsys.readouterr().out
    assert log.stat().st_mtime_ns == before and " runs " not in out
    assert "| DeComFL, LoRA, ε = 2 | 0 of 1 |" in out


def test_the_private_rate_follows_the_variance_rule() -> None:
    grid = grid_module()
    lr8, sigma8 = grid.private_rate("decomfl", "lora", 8.0, 300)
    lr2, sigma2 = grid.private_rate("decomfl", "lora", 2.0, 300)
    # The documented runs: σ 8.555 and 28.83 over 180 participations, η 8.4e-4 and 2.5e-4.
    assert sigma8 == pytest.approx(8.555, abs=1e-3) and sigma2 == pytest.approx(28.83, abs=1e-2)
    assert (lr8, lr2) == (8.4e-4, 2.5e-4)
    # More noise, smaller steps; never above the clear rate.
    full8, _ = grid.private_rate("hiso", "full", 8.0, 300)
    assert full8 < 3e-4 and lr2 < lr8 < 1e-2 and math.isfinite(full8)
    # HiSo's LoRA cells scale its own clear rate, half DeComFL's.
    hiso8, _ = grid.private_rate("hiso", "lora", 8.0, 300)
    assert hiso8 == pytest.approx(lr8 / 2, rel=0.02)


def test_unknown_cells_are_refused_by_name(tmp_path: Path) -> None:
    grid = grid_module()
    with pytest.raises(SystemExit, match="unknown cell decomfl-bitfit"):
        grid.main(["--out", str(tmp_path), "--params", "bitfit", "--dry-run"])
    with pytest.raises(SystemExit, match="unknown cell lora-lora"):
        grid.main(["--out", str(tmp_path), "--methods", "lora", "--dry-run"])
    with pytest.raises(SystemExit, match="could not convert"):
        grid.main(["--out", str(tmp_path), "--epsilons", "eight", "--dry-run"])


def test_a_chart_leaves_out_a_diverged_runs_values_and_keeps_its_range() -> None:
    from privopt._svg import line_chart

    svg = line_chart(
        {
            "stable": [(0, 0.61), (50, 0.58)],
            "diverged": [(0, 0.61), (50, math.nan), (75, math.inf)],
        },
        y_label="test loss",
        from_zero=False,
    )
    assert "nan" not in svg and "inf" not in svg and svg.count("<polyline") == 2
    # The axis spans the finite values only.
    assert ">0.61</text>" in svg and ">0.58</text>" in svg
