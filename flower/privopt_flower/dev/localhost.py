"""A Flower federation on this machine: one SuperLink and N SuperNodes as separate processes
(deployment mode), or a SuperLink running the simulation runtime, with the run started by
``flwr run``. Used by the tests and by ``python -m privopt_flower.dev.localhost``; the commands it
runs are the ones docs/flower.md gives.

A deployment is secure by default: TLS on every API (a CA and a SuperLink certificate made for
the run, :mod:`privopt_flower.credentials`) and Flower's SuperNode authentication (each SuperNode
signs with its own key, registered with the SuperLink before it starts; any other process that
reaches the SuperLink is refused). ``insecure=True`` (``--insecure``) turns both off.

Each SuperNode runs with ``--isolation process`` beside :mod:`privopt_flower.superexec`, which
keeps the next ClientApp process started ahead (``warm=False``: Flower's default, a cold
``flwr-clientapp`` per message), and SuperExecs look for tasks every 0.1 s instead of Flower's
1 s (``FLWR_SUPEREXEC_TASK_POLL_INTERVAL``). A SuperNode and its SuperExec share a process
group, so :meth:`Localhost.kill` is a ``kill -9`` of the node and every ClientApp process it
started."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .. import config, credentials

SUMMARY = "[privopt] summary "
# How often a SuperExec asks its SuperNode for a task (Flower's default: 1 s, a stage's wait).
SUPEREXEC_POLL_SECONDS = "0.1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    return json.dumps(str(v))  # a TOML basic string


def flower_env(home: Path) -> dict[str, str]:
    """The environment of a Flower process: its FLWR_HOME, and this interpreter's scripts
    first on PATH (the SuperLink and SuperNode start ``flower-superexec`` and
    ``flwr-clientapp`` by name)."""
    bin_dir = str(Path(sys.executable).parent)
    return {
        **os.environ,
        "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
        "FLWR_HOME": str(home),
        "FLWR_DISABLE_UPDATE_CHECK": "1",
        "FLWR_SUPEREXEC_TASK_POLL_INTERVAL": SUPEREXEC_POLL_SECONDS,
    }


def tool(name: str) -> str:
    """A Flower command from this interpreter's environment (or PATH)."""
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else (shutil.which(name) or name)


def stage_app(dest: Path) -> Path:
    """A copy of the app (the package and its pyproject.toml) in ``dest``, which ``flwr run``
    packages: the launcher then works from any directory and with an installed package, and
    never packages its own work folder (``flwr run`` refuses an app that has grown past ten
    folders deep)."""
    package, pyproject = Path(__file__).resolve().parents[1], config.app_pyproject()
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(
        package,
        dest / package.name,
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "pyproject.toml"),
    )
    shutil.copy2(pyproject, dest / "pyproject.toml")
    return dest


class Localhost:
    """SuperLink + SuperNodes under ``workdir`` (logs, FLWR_HOMEs, node state)."""

    def __init__(
        self,
        workdir: str | os.PathLike[str],
        nodes: int,
        simulation: bool = False,
        insecure: bool = False,
        host: str = "127.0.0.1",
        warm: bool = True,
        superlink_netns: str | None = None,
        supernode_netns: str | None = None,
        preload: Sequence[str] = (),
    ):
        """``host`` is the address the SuperLink listens on and is reached at (its certificate
        names it). ``superlink_netns`` / ``supernode_netns`` run the SuperLink (with the
        ``flwr`` CLI) and the SuperNodes inside those Linux network namespaces (``ip netns
        exec``): two hosts on one machine, joined only by the network between them.
        ``preload`` names modules each warm SuperNode's fork server imports once (an app's
        heavy libraries, such as ``torch``; :mod:`privopt_flower.superexec`)."""
        self.workdir = Path(workdir)
        self.host = host
        self.superlink_netns = superlink_netns
        self.supernode_netns = supernode_netns
        self.nodes = nodes
        self.simulation = simulation
        self.warm = warm
        self.preload = tuple(preload)
        # The simulation runtime has no SuperNodes to authenticate; TLS still applies.
        self.insecure = insecure
        self.credentials: credentials.Credentials | None = None
        self.port = free_port()
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        # Every process ever started (a restarted node's predecessor too), for stop().
        self._started: list[subprocess.Popen[bytes]] = []
        self.home = self.workdir / "flwr-home"

    # -- processes ---------------------------------------------------------------------
    @staticmethod
    def _in(netns: str | None, cmd: list[str]) -> list[str]:
        """``cmd`` run inside ``netns`` (as is without one)."""
        return cmd if netns is None else ["ip", "netns", "exec", netns, *cmd]

    def _spawn(self, name: str, cmd: list[str], home: Path, test_kill: bool = False) -> None:
        home.mkdir(parents=True, exist_ok=True)
        env = flower_env(home)
        if test_kill:  # lets the run config's debug.kill fault fire (see clientapp.py)
            env["PRIVOPT_FLOWER_TEST_KILL"] = "1"
        running = self.procs.get(name)
        if running is not None and running.poll() is None:
            raise RuntimeError(f"{name} is already running (pid {running.pid})")
        log = open(self.workdir / f"{name}.log", "ab")  # noqa: SIM115 (closed with the process)
        self.procs[name] = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        self._started.append(self.procs[name])
        log.close()

    def start(self, timeout: float = 60.0) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        cmd = [tool("flower-superlink"), "--host", self.host, "--port", str(self.port)]
        cmd += ["--disable-runtime-dependency-installation"]
        if self.insecure:
            print(
                "[privopt] WARNING: insecure deployment: no TLS and no SuperNode "
                "authentication; any process that reaches the SuperLink can join the "
                "federation and read its messages",
                file=sys.stderr,
                flush=True,
            )
            cmd += ["--insecure"]
        else:
            names = [self.host] + (["localhost"] if self.host == "127.0.0.1" else [])
            self.credentials = credentials.make(self.workdir / "credentials", self.nodes, names)
            c = self.credentials
            cmd += ["--ssl-ca-certfile", str(c.ca), "--ssl-certfile", str(c.superlink_cert)]
            cmd += ["--ssl-keyfile", str(c.superlink_key)]
            if not self.simulation:
                cmd += ["--enable-supernode-auth"]
        if self.simulation:
            cmd += ["--simulation"]
        self._spawn(
            "superlink", self._in(self.superlink_netns, cmd), self.workdir / "superlink-home"
        )
        self._wait_health(timeout)
        self.home.mkdir(parents=True, exist_ok=True)
        security = (
            "insecure = true"
            if self.credentials is None
            else f"root-certificates = {toml_value(str(self.credentials.ca))}"
        )
        (self.home / "config.toml").write_text(
            '[superlink]\ndefault = "privopt"\n\n[superlink.privopt]\n'
            f'address = "{self.host}:{self.port}"\n{security}\n'
        )
        if not self.simulation:
            if self.credentials is not None:
                c = self.credentials
                self.register(*(c.supernode_public(i) for i in range(self.nodes)))
            for i in range(self.nodes):
                self.start_node(i)

    def register(self, *public_keys: Path) -> None:
        """``flwr supernode register`` of each key, all at once: the SuperLink admits their
        holders."""
        procs = [
            subprocess.Popen(
                self._in(
                    self.superlink_netns,
                    [tool("flwr"), "supernode", "register", str(key), "privopt"],
                ),
                env=flower_env(self.home),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for key in public_keys
        ]
        failed = []
        for key, p in zip(public_keys, procs, strict=True):
            try:
                out, _ = p.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                out, _ = p.communicate()
            if p.returncode != 0:
                failed.append(f"registering {key.name} failed: {out}")
        if failed:
            raise RuntimeError("; ".join(failed))

    def _wait_health(self, timeout: float) -> None:
        scheme, context = "http", None
        if self.credentials is not None:
            scheme, context = "https", ssl.create_default_context(cafile=str(self.credentials.ca))
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.procs["superlink"].poll() is not None:
                raise RuntimeError(f"the SuperLink exited; see {self.workdir / 'superlink.log'}")
            url = f"{scheme}://{self.host}:{self.port}/health"
            if self.superlink_netns is not None:  # only reachable from inside its namespace
                ca = "None" if self.credentials is None else repr(str(self.credentials.ca))
                probe = (
                    "import ssl, urllib.request; urllib.request.urlopen("
                    f"{url!r}, timeout=1, context=ssl.create_default_context(cafile={ca}) "
                    f"if {ca} else None)"
                )
                done = subprocess.run(
                    self._in(self.superlink_netns, [sys.executable, "-c", probe]),
                    capture_output=True,
                    check=False,
                )
                if done.returncode == 0:
                    return
                time.sleep(0.2)
                continue
            try:
                with urllib.request.urlopen(url, timeout=1, context=context):
                    return
            except OSError:
                time.sleep(0.2)
        raise TimeoutError(f"the SuperLink was not healthy within {timeout:g} s")

    def start_node(self, i: int) -> None:
        """Starts (or restarts) SuperNode ``i``: partition ``i``, state under ``state/``."""
        if self.credentials is None:
            security = ["--insecure"]
        else:
            key = self.credentials.supernode_keys[i]
            security = ["--root-certificates", str(self.credentials.ca)]
            security += ["--auth-supernode-private-key", str(key)]
        runtime_port = free_port()
        cmd = [
            tool("flower-supernode"),
            *security,
            "--superlink",
            f"{self.host}:{self.port}",
            "--port",
            str(runtime_port),
            "--node-config",
            f'partition-id={i} num-partitions={self.nodes} state-dir="{self.workdir / "state"}"',
        ]
        if self.warm:
            # The SuperNode and privopt's SuperExec as one process group; the SuperNode's
            # Runtime API is on its own loopback (plaintext, as with Flower's default
            # isolation: privopt_flower.superexec's loopback rule).
            cmd = [
                sys.executable,
                "-m",
                "privopt_flower.dev.node",
                *cmd,
                "--isolation",
                "process",
                "--",
                "--runtime-api-address",
                f"127.0.0.1:{runtime_port}",
            ]
            if self.preload:
                cmd += ["--preload", ",".join(self.preload)]
        self._spawn(
            f"supernode-{i}",
            self._in(self.supernode_netns, cmd),
            self.workdir / f"supernode-{i}-home",
            test_kill=True,
        )

    def kill(self, i: int) -> None:
        """``kill -9`` of SuperNode ``i``, its SuperExec and its ClientApp processes."""
        p = self.procs.get(f"supernode-{i}")
        if p is not None and p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()

    def stop(self) -> None:
        """Terminates every process group started (a dead leader may leave members behind),
        all at once, gives them 10 s in all to exit, then kills what is left of each."""
        for p in self._started:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        for p in self._started:
            try:
                p.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()

    def __enter__(self) -> Localhost:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- runs --------------------------------------------------------------------------
    def run(
        self,
        app: str | os.PathLike[str],
        run_config: Mapping[str, Any],
        on_line: Callable[[str], None] | None = None,
        timeout: float = 600.0,
        until: str = SUMMARY,
    ) -> dict[str, Any]:
        """``flwr run APP privopt --stream`` with ``run_config`` overrides; returns the run's
        summary (the ServerApp's ``[privopt] summary`` line). ``on_line`` sees every line of
        the stream as it arrives (to kill a node at a given stage). Another app ends its run
        with the line marker ``until``."""
        overrides = " ".join(f"{k}={toml_value(v)}" for k, v in run_config.items())
        cmd = [tool("flwr"), "run", str(app), "privopt", "--stream", "--run-config", overrides]
        if self.simulation:
            cmd += ["--federation-config", f"num-supernodes={self.nodes}"]
        cmd = self._in(self.superlink_netns, cmd)
        env = flower_env(self.home)
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True
        )
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        summary: dict[str, Any] | None = None
        lines: list[str] = []
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line.rstrip())
                if on_line is not None:
                    on_line(line)
                at = line.find(until)
                if at >= 0:
                    rest = line[at + len(until) :]
                    summary = json.loads(rest) if until == SUMMARY else {"line": rest.strip()}
                    break
        finally:
            timer.cancel()
            proc.kill()
            proc.wait()
        (self.workdir / "flwr-run.log").write_text("\n".join(lines) + "\n")
        if summary is None:
            tail = "\n".join(lines[-15:])
            raise RuntimeError(f"the run ended without a summary; last lines:\n{tail}")
        return summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=5)
    ap.add_argument("--simulation", action="store_true", help="simulation runtime instead")
    ap.add_argument(
        "--insecure",
        action="store_true",
        help="no TLS and no SuperNode authentication: any process that reaches the port can "
        "join and read the traffic (default: both on)",
    )
    ap.add_argument(
        "--cold",
        action="store_true",
        help="Flower's default isolation: a ClientApp process started per message, after it "
        "arrives (default: privopt_flower.superexec starts the next one ahead)",
    )
    ap.add_argument(
        "--preload",
        default="",
        help="modules (comma-separated) each SuperNode imports once for all its ClientApp "
        "processes, e.g. torch for a PyTorch app (not with --cold)",
    )
    ap.add_argument(
        "--workdir",
        help="logs, Flower homes and node state (default: a new folder under the system's "
        "temporary directory, printed at the start)",
    )
    ap.add_argument(
        "--app",
        help="the Flower app to run (default: a copy of privopt's, staged in the workdir)",
    )
    ap.add_argument("overrides", nargs="*", help="run-config overrides key=value")
    args = ap.parse_args()
    if args.cold and args.preload:
        ap.error("--preload needs privopt's fork server, which --cold turns off")
    config: dict[str, Any] = {"clients": args.nodes}
    for kv in args.overrides:
        k, _, v = kv.partition("=")
        try:
            config[k] = json.loads(v)
        except json.JSONDecodeError:
            config[k] = v
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="privopt-flower-"))
    print(f"[privopt] work folder (logs, node state): {workdir}", flush=True)
    app = args.app or stage_app(workdir / "app")
    with Localhost(
        workdir,
        args.nodes,
        args.simulation,
        insecure=args.insecure,
        warm=not args.cold,
        preload=[m for m in args.preload.split(",") if m],
    ) as fed:
        summary = fed.run(app, config, on_line=lambda s: print(s, end=""))
    print(json.dumps({k: v for k, v in summary.items() if k != "settings"}, indent=2))


if __name__ == "__main__":
    main()
