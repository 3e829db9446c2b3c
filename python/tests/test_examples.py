"""Every example in python/examples runs and passes its own assertions."""

from __future__ import annotations

import pathlib
import runpy

import pytest

EXAMPLES = sorted((pathlib.Path(__file__).parent.parent / "examples").glob("*.py"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_runs(path: pathlib.Path, capsys, monkeypatch):
    if path.stem.startswith("torch_"):
        pytest.importorskip("torch")  # the optional extra
    monkeypatch.setattr("sys.argv", [str(path)])  # an example's defaults, not pytest's flags
    runpy.run_path(str(path), run_name="__main__")
    assert capsys.readouterr().out.strip()


def test_there_are_examples():
    assert len(EXAMPLES) >= 5
