"""Two hosts on one machine: the SuperLink (and the ``flwr`` CLI) in one Linux network
namespace, the SuperNodes in another, joined by a virtual Ethernet link and nothing else. The
SuperLink listens on its link address with a certificate for that address; the run is the
docs' two-host recipe (docs/flower.md) and gives the in-process result."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator

import pytest

from privopt_flower import inprocess
from privopt_flower.dev.localhost import Localhost, stage_app

pytestmark = pytest.mark.localhost

SUPERLINK_ADDRESS = "10.231.0.1"
SUPERNODE_ADDRESS = "10.231.0.2"


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


@pytest.fixture
def two_hosts() -> Iterator[tuple[str, str]]:
    """Namespaces ``a`` (the SuperLink's host) and ``b`` (the SuperNodes'), each with only
    its loopback and one end of a veth pair."""
    if os.environ.get("CI") == "true" and os.environ.get("PRIVOPT_TEST_NETNS") != "1":
        pytest.skip("CI's 30-minute budget: run with PRIVOPT_TEST_NETNS=1")
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and iproute2 to make network namespaces")
    tag = f"po{os.getpid() % 100000}"
    a, b = f"{tag}a", f"{tag}b"
    try:
        ip("netns", "add", a)
    except subprocess.CalledProcessError as e:
        pytest.skip(f"cannot create network namespaces here: {e.stderr.strip()}")
    try:
        ip("netns", "add", b)
        ip("link", "add", f"{tag}va", "type", "veth", "peer", "name", f"{tag}vb")
        ip("link", "set", f"{tag}va", "netns", a)
        ip("link", "set", f"{tag}vb", "netns", b)
        for ns, dev, addr in (
            (a, f"{tag}va", SUPERLINK_ADDRESS),
            (b, f"{tag}vb", SUPERNODE_ADDRESS),
        ):
            ip("-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
            ip("-n", ns, "link", "set", dev, "up")
            ip("-n", ns, "link", "set", "lo", "up")
        yield a, b
    finally:
        for ns in (a, b):
            subprocess.run(["ip", "netns", "del", ns], check=False, capture_output=True)


def test_a_supernode_host_reaches_the_superlink_host_only_over_tls(
    tmp_path, two_hosts, dome_config
):
    a, b = two_hosts
    # The two namespaces share nothing but the link: the SuperNodes' host has no route to
    # this machine's loopback SuperLink address space, and vice versa.
    reach = subprocess.run(
        ["ip", "netns", "exec", b, "ping", "-c", "1", "-W", "1", SUPERLINK_ADDRESS],
        capture_output=True,
        check=False,
    )
    if shutil.which("ping") is not None:
        assert reach.returncode == 0, reach.stdout
    # No DP noise: the clients draw it from the OS, so only a noise-free run is reproducible.
    run = {**dome_config, "rounds": 1, "clients": 3, "dome.epsilon": 0.0}
    with Localhost(
        tmp_path / "fed", 3, host=SUPERLINK_ADDRESS, superlink_netns=a, supernode_netns=b
    ) as fed:
        assert fed.credentials is not None  # TLS and SuperNode authentication
        got = fed.run(stage_app(tmp_path / "app"), run, timeout=900)
    want = inprocess.run(run)
    assert got["events"] == want["events"]
    assert got["test_loss"] == pytest.approx(want["test_loss"], rel=1e-9)
