"""Deployment mode on localhost: one SuperLink and N SuperNodes as separate processes, the
run started by ``flwr run``; its results must equal the in-process run's for the same seed, and
clients killed mid-round (``kill -9`` of the SuperNode and its ClientApp processes) must leave
what the protocols promise."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from privopt_flower import inprocess
from privopt_flower.dev.localhost import Localhost

APP = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.localhost


def same_results(got: dict, want: dict, keys: list[str]) -> None:
    for k in keys:
        assert got[k] == want[k], k


# CI runs the deployments that show what only a deployment can (authentication, a user's
# PyTorch model, SecAgg+ as a drop-in, threshold decryption with devices killed, the launcher);
# the rest, each a few minutes of mostly waiting for a killed node's stage deadline, run with
# PRIVOPT_FULL_DEPLOYMENT=1 (their protocols' dropout handling is tested in process).
FULL = os.environ.get("PRIVOPT_FULL_DEPLOYMENT") == "1"
full_only = pytest.mark.skipif(
    not FULL, reason="CI's 30-minute budget: run with PRIVOPT_FULL_DEPLOYMENT=1"
)


@full_only
def test_scalar_fl_client_killed_then_restarted_catches_up_by_replay(tmp_path, scalar_config):
    cfg = {**scalar_config, "clients": 3, "rounds": 6}
    cfg["debug.kill"] = "2:1:round"
    replies: dict[int, int] = {}
    restarted: list[int] = []
    # Plaintext: with SuperNode authentication the node id belongs to the key, and Flower 1.41
    # refuses a second session for it until the first misses two heartbeats (60 s at its fixed
    # 30 s interval), so an immediate restart is refused (docs/flower.md).
    with Localhost(tmp_path, 3, insecure=True) as fed:

        def watch(line: str) -> None:
            # Once: the summary line repeats the event.
            if "round 1: party 2 dropped" in line and not restarted:
                restarted.append(2)
                fed.start_node(2)  # the node comes back, with its saved state
            m = re.search(r"round=(\d+) participants=\d+ replies=(\d+)", line)
            if m:
                replies[int(m[1])] = int(m[2])

        got = fed.run(APP, cfg, on_line=watch)
    assert any("round 1: party 2 dropped" in e for e in got["events"])
    assert replies[2] == 2  # round index 1 is row 2: the killed client is missing
    assert replies[6] == 3  # back by the last round ...
    assert got["full_downloads"] == 0  # ... caught up by replay, not by the full model
    # The same run in process, with the node back in the round it rejoined here (round index
    # r is row r + 1): the deployment's model, loss and uplink exactly.
    back = min(r for r in range(2, 6) if replies[r + 1] == 3)
    want = inprocess.run({**cfg, "debug.kill": ""}, kill={(1, "round"): {2}}, restart={back: {2}})
    same_results(got, want, ["model_sha", "test_loss", "up_bytes"])
    # Deployment also counts a request addressed to the node while it was down or restarting.
    assert got["down_bytes"] >= want["down_bytes"]


@full_only
def test_dome_deployment_with_a_client_killed_mid_round(tmp_path, dome_config):
    # Without DP noise DOME is deterministic given the SecAgg+ sums: the model must be the
    # in-process one exactly (the accountant under dropouts is tested in process).
    # Killed on receiving round 2's masked-input request (which carries round 3's key
    # advertisement: SecAgg+'s stages of consecutive rounds overlap).
    kill = "3:2:mask_advertise"
    cfg = {**dome_config, "clients": 4, "rounds": 3, "dome.epsilon": 0.0, "debug.kill": kill}
    with Localhost(tmp_path, 4) as fed:
        got = fed.run(APP, cfg)
    ev = got["events"]
    assert "round 1: SecAgg+ sum equals the sum of 4 inputs" in ev
    assert any(e.startswith("round 2: party 3 dropped at mask") for e in ev)
    assert "round 2: SecAgg+ sum equals the sum of 3 inputs" in ev
    want = inprocess.run({**cfg, "debug.kill": ""}, kill={(2, "mask_advertise"): {3}})
    same_results(got, want, ["test_loss", "accuracy", "completed_rounds"])


# Issue 50's must-show is 10 SuperNodes, t = 7, three killed, 3 rounds (208 s here); CI runs
# the same test at 4 SuperNodes, t = 3, one killed, 2 rounds (CI's 30-minute budget).
# PRIVOPT_FULL_DEPLOYMENT=1 runs the full size.
NODES, THRESHOLD, KILLED, ROUNDS = (10, 7, "2,5,9", 3) if FULL else (4, 3, "3", 2)


def test_eezofl_threshold_deployment_finishes_rounds_with_devices_killed_mid_round(
    tmp_path, eezofl_config
):
    # Devices are killed (kill -9) in the last round once their ciphertexts are in. The round
    # completes without them and every round sums all the scalars: the model of the run
    # without kills.
    cfg = {**eezofl_config, "clients": NODES, "rounds": ROUNDS, "eezofl.threshold": THRESHOLD}
    cfg["debug.kill"] = f"{KILLED}:{ROUNDS - 1}:decrypt"
    with Localhost(tmp_path, NODES) as fed:
        got = fed.run(APP, cfg)
    assert got["failed_rounds"] == 0 and got["members"] == list(range(NODES))
    assert got["threshold"] == THRESHOLD and got["keyings"] == 1 and not got["events"]
    want = inprocess.run({**cfg, "debug.kill": ""})
    # Fresh encryption and smudging noise each run: the sums agree to ~1e-6.
    assert abs(got["test_loss"] - want["test_loss"]) < 1e-5
    assert got["accuracy"] == want["accuracy"]


@full_only
def test_private_scalar_fl_deployment_finishes_with_a_supernode_killed_mid_round(
    tmp_path, scalar_config
):
    # 5 SuperNodes (TLS and SuperNode authentication, the launcher's default), DP on the
    # scalars summed by SecAgg+; party 3 is killed (kill -9) in round 2 after its key shares,
    # before its masked input: shares sized for 4 of 5 keep the released sum's noise.
    cfg = {
        **scalar_config,
        "rounds": 3,
        "scalar_fl.epsilon": 8.0,
        "scalar_fl.clip": 1.0,
        "scalar_fl.noise_floor": 0.8,
        "debug.kill": "3:1:mask",
        "out-dir": str(tmp_path / "out"),
    }
    with Localhost(tmp_path, 5) as fed:
        got = fed.run(APP, cfg)
    assert any(e.startswith("round 2: party 3 dropped at mask") for e in got["events"])
    assert got["skipped_rounds"] == 0
    eps = got["epsilon_per_client"]
    assert max(eps) <= 8.0 and eps[3] < max(eps)
    assert (tmp_path / "out" / "privacy.csv").is_file()


@full_only
def test_pdsgd_deployment_relays_only_ciphertexts_and_survives_a_killed_agent(
    tmp_path, pdsgd_config
):
    cfg = {**pdsgd_config, "clients": 3, "rounds": 2, "eval-every": 1}
    cfg["debug.kill"] = "2:2:respond"
    with Localhost(tmp_path, 3) as fed:
        got = fed.run(APP, cfg)
    assert got["events"][0].startswith("respond: party 2 missing")
    assert got["agents"] == [0, 1]
    # Private weights and stepsizes: no two runs alike; the model still moved from chance.
    assert got["accuracy"] > 0.6


@full_only
def test_dpfhe_deployment_trains_on_ciphertexts_the_owner_refreshes(tmp_path, dpfhe_config):
    cfg = {**dpfhe_config, "rounds": 2}
    with Localhost(tmp_path, 1) as fed:
        got = fed.run(APP, cfg)
    want = inprocess.run(cfg)
    # Batches and noise are the owner's secret draws; the circuit's depth and the privacy are not.
    same_results(got, want, ["refreshes", "epsilon_spent", "sigma"])
    assert got["up_bytes"] > 10_000_000  # the evaluation keys crossed Flower
