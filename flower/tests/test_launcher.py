"""The README's launcher, ``python -m privopt_flower.dev.localhost``, as a user runs it: from
inside the app's folder, then again from ``/``, in a git checkout of the app that must be left
as it was (no work folder inside the app, nothing for git to see; a first run's leftovers would
break the second). CI runs the first only; PRIVOPT_FULL_DEPLOYMENT=1 runs both."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.localhost

# The smallest run that goes through every stage: two SuperNodes, one round.
RUN = ["--nodes", "2", "rounds=1", "eval-every=1", "data.n_train=200", "data.n_test=50"]


def launch(cwd: Path, tmp: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "privopt_flower.dev.localhost", *RUN],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "TMPDIR": str(tmp)},
    )


def test_the_launcher_runs_again_and_again_from_any_folder_and_leaves_the_app_clean(tmp_path):
    checkout = tmp_path / "checkout"
    ignore = shutil.ignore_patterns("__pycache__", ".pytest_cache", "*.egg-info")
    shutil.copytree(APP, checkout / "flower", ignore=ignore)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(checkout)]
    subprocess.run(["git", "init", "-q", str(checkout)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "app"], check=True)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    # Inside the app's folder (where leftovers would land), then, with
    # PRIVOPT_FULL_DEPLOYMENT=1, again from / (CI's 30-minute budget: 48 s a run).
    folders = [checkout / "flower"]
    if os.environ.get("PRIVOPT_FULL_DEPLOYMENT") == "1":
        folders.append(Path("/"))
    for cwd in folders:
        done = launch(cwd, scratch)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        # The launcher ends with the run's summary, as indented JSON.
        summary = json.loads(done.stdout[done.stdout.rindex("\n{\n") :])
        assert summary["rounds"] == 1 and summary["method"] == "scalar_fl", summary
    status = subprocess.run([*git, "status", "--porcelain"], capture_output=True, text=True)
    assert status.stdout == "", status.stdout
    # Each run kept its logs in a work folder of its own, outside the app, and said where.
    assert len(list(scratch.glob("privopt-flower-*"))) == len(folders)
