"""Every example in python/examples runs and passes its own assertions."""

from __future__ import annotations

import pathlib
import runpy

import pytest

EXAMPLES = sorted((pathlib.Path(__file__).parent.parent / "examples").glob("*.py"))
# Smaller settings where an example's default is a demonstration rather than a check (CI's
# 30-minute budget): one encrypted step shows the same agreement as four.
SMOKE_ARGS = {"dpfhe_logistic": ["--encrypted-steps", "1"]}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_runs(path: pathlib.Path, capsys, monkeypatch):
    if path.stem.startswith("torch_"):
        pytest.importorskip("torch")  # the optional extra
    # The example's own arguments, not pytest's.
    monkeypatch.setattr("sys.argv", [str(path), *SMOKE_ARGS.get(path.stem, [])])
    runpy.run_path(str(path), run_name="__main__")
    assert capsys.readouterr().out.strip()


def test_there_are_examples():
    assert len(EXAMPLES) >= 5
