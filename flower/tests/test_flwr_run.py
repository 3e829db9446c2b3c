"""Flower's own command, ``flwr run .`` in the app's folder, as a Flower user types it: Flower
starts its managed local SuperLink (simulation runtime, 2 SuperNodes), installs the app's
dependencies with ``uv sync`` (privopt itself comes from this environment), and the run must
complete. Flower keeps that SuperLink running after the run by design; the test stops the one
it started (found by its Flower home) and checks nothing of it is left."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip(
    "ray", reason='needs Flower\'s simulation runtime: pip install "flwr[simulation]"'
)

APP = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.localhost


def processes_mentioning(text: str) -> list[int]:
    """Pids whose command line contains ``text``."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if text in cmd:
                out.append(int(d.name))
    return out


def test_flwr_run_dot_completes_in_the_app_folder(tmp_path):
    home = tmp_path / "flwr-home"
    env = {
        **os.environ,
        "FLWR_HOME": str(home),
        "FLWR_DISABLE_UPDATE_CHECK": "1",
        "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
    }
    flwr = str(Path(sys.executable).parent / "flwr")
    try:
        done = subprocess.run(
            [flwr, "run", ".", "--stream", "--run-config", "rounds=2"],
            cwd=APP,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        out = done.stdout + done.stderr
        assert done.returncode == 0, out[-3000:]
        assert "[privopt] summary" in out, out[-3000:]
        assert "participants=2 replies=2" in out, out[-3000:]
    finally:
        for pid in processes_mentioning(str(home)):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        end = time.monotonic() + 30
        while processes_mentioning(str(home)) and time.monotonic() < end:
            time.sleep(0.5)
    assert processes_mentioning(str(home)) == []
