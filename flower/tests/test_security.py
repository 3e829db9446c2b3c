"""A deployment lets no one in: with the launcher's defaults (TLS, SuperNode authentication), a
SuperNode whose key was never registered, one that lacks the CA certificate, and one that
speaks plaintext all fail to connect, while the registered node joins and the run completes
with it alone."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from privopt_flower import credentials
from privopt_flower.dev.localhost import Localhost, flower_env, free_port, tool

APP = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.localhost


def online_nodes(fed: Localhost) -> list[dict[str, object]]:
    done = subprocess.run(
        [tool("flwr"), "supernode", "ls", "privopt", "--format", "json"],
        env=flower_env(fed.home),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    nodes = json.loads(done.stdout)["nodes"]
    return [n for n in nodes if n.get("status") == "online"]


def test_unregistered_keys_missing_ca_and_plaintext_are_refused(tmp_path, scalar_config):
    with Localhost(tmp_path / "fed", 1) as fed:
        assert fed.credentials is not None
        stranger = credentials.make(tmp_path / "stranger", 1, ["127.0.0.1"])
        attempts = {
            "unregistered key": [
                "--root-certificates",
                str(fed.credentials.ca),
                "--auth-supernode-private-key",
                str(stranger.supernode_keys[0]),
            ],
            # The registered node's own key, but no CA to check the SuperLink against.
            "no CA certificate": [
                "--auth-supernode-private-key",
                str(fed.credentials.supernode_keys[0]),
            ],
            "plaintext": ["--insecure"],
        }
        intruders = {}
        for name, security in attempts.items():
            log = open(tmp_path / f"{name}.log", "wb")  # noqa: SIM115 (closed below)
            intruders[name] = (
                subprocess.Popen(
                    [
                        tool("flower-supernode"),
                        *security,
                        "--superlink",
                        f"127.0.0.1:{fed.port}",
                        "--port",
                        str(free_port()),
                        "--node-config",
                        "partition-id=0 num-partitions=1",
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=flower_env(tmp_path / f"{name}-home"),
                ),
                log,
            )
        try:
            # Each intruder retries with backoff; none may get in within 20 s. The registered
            # node may take longer than that to come online on a busy machine: waited for, so
            # that the count is about the intruders.
            started = time.monotonic()
            while not online_nodes(fed) and time.monotonic() < started + 120:
                time.sleep(2)
            time.sleep(max(0.0, started + 20 - time.monotonic()))
            assert len(online_nodes(fed)) == 1
            out = fed.run(APP, {**scalar_config, "clients": 1, "rounds": 1})
            assert out["rounds"] == 1
        finally:
            for proc, log in intruders.values():
                proc.kill()
                proc.wait()
                log.close()
