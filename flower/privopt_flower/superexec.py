"""A SuperExec whose ClientApp processes start warm.

A SuperNode runs each message's ClientApp in a fresh ``flwr-clientapp`` process, launched by its
SuperExec once the message is there. Starting Python, Flower, numpy and privopt costs about
1.8 s of CPU per message; with five SuperNodes on a 2-core machine that is most of a stage
(``flower/bench/round_latency.py``). This is Flower's own SuperExec (``flower-superexec``, same
arguments, run beside a SuperNode started with ``--isolation process``) with one change: a
fork server, a process that has done those imports once, forks each ClientApp task's process.
Each task still runs in a process of its own that serves no other (Flower's isolation is
unchanged) and starts from the same state a fresh import gives (numpy's global random state is
reseeded in each); the start-up costs a fork. Task types other than ClientApps launch as
Flower launches them::

    flower-supernode --isolation process --port 9094 ...      # its Runtime API on 9094
    python -m privopt_flower.superexec --runtime-api-address 127.0.0.1:9094 \\
        --parent-pid <the SuperNode's pid> [--preload torch]

``--preload`` names further modules (comma-separated) for the fork server to import once:
an app's heavy libraries, such as ``torch`` (3.7 s of CPU per import here, otherwise paid by
every task of a PyTorch app). Never the app's own package: Flower loads it from the installed
FAB and would take the preloaded copy instead.

(The Runtime API on the SuperNode's own loopback is plaintext, as Flower's own SuperExec
reaches it in the default subprocess isolation; the SuperNode's link to the SuperLink keeps its
TLS and authentication.) ``privopt_flower.dev.localhost`` starts its SuperNodes this way.

Written against Flower 1.41 (the version the app pins): it replaces the executor that
``flwr.supercore.superexec.run_superexec`` builds for subprocess isolation. POSIX only (fork)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

# What the fork server always imports once, besides Flower's ClientApp runner (the slowest):
# the libraries of privopt's apps. ``--preload`` adds to them.
PRELOAD = ("numpy", "privopt")
PRELOAD_FLAG = "--preload"
# Set in a forked task process when it starts (wall-clock seconds; debug.stage-timing).
TASK_STARTED_ENV = "PRIVOPT_TASK_STARTED"
# Longest token line the fork server accepts (Flower's tokens are a few dozen characters).
MAX_TOKEN_BYTES = 4096


def take_preload(argv: list[str]) -> tuple[list[str], tuple[str, ...]]:
    """``argv`` without its ``--preload A,B`` options, and the module names they gave."""
    rest: list[str] = []
    modules: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] == PRELOAD_FLAG:
            if i + 1 == len(argv):
                sys.exit(f"privopt_flower.superexec: {PRELOAD_FLAG} needs module names")
            modules += [m.strip() for m in argv[i + 1].split(",") if m.strip()]
            i += 2
        else:
            rest.append(argv[i])
            i += 1
    return rest, tuple(modules)


def fork_server_command(spec: Any, preload: tuple[str, ...] = ()) -> list[str]:
    """The fork server for tasks like the one ``spec`` describes (all but the token), importing
    ``preload`` besides :data:`PRELOAD`."""
    args = [
        sys.executable,
        "-m",
        "privopt_flower.superexec",
        "--fork-server",
    ]
    if preload:
        args += [PRELOAD_FLAG, ",".join(preload)]
    args += ["--runtime-api-address", spec.runtime_api_address]
    if spec.insecure:
        args.append("--insecure")
    elif spec.root_certificates_path is not None:
        args += ["--root-certificates", spec.root_certificates_path]
    if spec.parent_pid is not None:
        args += ["--parent-pid", str(spec.parent_pid)]
    if spec.runtime_dependency_install:
        args.append("--allow-runtime-dependency-installation")
    return args


class ForkServerExecutor:
    """Flower's subprocess executor, but ClientApp tasks are forked by a fork server."""

    def __init__(self, preload: tuple[str, ...] = ()) -> None:
        from flwr.supercore.superexec.executor import SubprocessExecutor

        self._cold = SubprocessExecutor()
        self._preload = preload
        # The fork server and the command it runs (tasks with other settings get a new one).
        self._server: tuple[list[str], subprocess.Popen[bytes]] | None = None

    def get_eligible_capacity(self, *args: Any, **kwargs: Any) -> Any:
        return self._cold.get_eligible_capacity(*args, **kwargs)

    def wait_for_capacity(self, *args: Any, **kwargs: Any) -> None:
        self._cold.wait_for_capacity(*args, **kwargs)

    def reconcile(self) -> None:
        self._cold.reconcile()

    def launch(self, spec: Any) -> Any:
        from flwr.supercore.constant import TaskType
        from flwr.supercore.superexec.executor import LaunchResult

        if spec.task_type != TaskType.CLIENT_APP:
            return self._cold.launch(spec)
        line = spec.token.encode("ascii", errors="replace") + b"\n"
        for _ in range(2):  # a dead server is replaced once
            server = self._server_for(
                fork_server_command(spec, self._preload), spec.suppress_output
            )
            try:
                assert server.stdin is not None
                server.stdin.write(line)
                server.stdin.flush()
                return LaunchResult.accepted()
            except OSError:
                self.close_server()
        return LaunchResult.failed("the ClientApp fork server is not accepting tasks")

    def _server_for(self, command: list[str], quiet: bool) -> subprocess.Popen[bytes]:
        if self._server is not None:
            running_for, proc = self._server
            if running_for == command and proc.poll() is None:
                return proc
            self.close_server()
        out = subprocess.DEVNULL if quiet else None
        proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=out, stderr=out)
        self._server = (command, proc)
        return proc

    def close_server(self) -> None:
        """Ends the fork server (closing its input ends it; running tasks go on)."""
        server, self._server = self._server, None
        if server is None:
            return
        proc = server[1]
        if proc.stdin is not None:
            try:
                proc.stdin.close()
            except OSError:
                pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def close(self) -> None:
        self.close_server()
        self._cold.close()


def fork_server(args: list[str], run: Callable[[], None] | None = None) -> None:
    """Imports once (:data:`PRELOAD` and ``--preload``'s modules in ``args``), then forks one
    process per token line on standard input, until the input closes; each runs ``run``
    (Flower's ``flwr-clientapp`` entry point) with ``sys.argv`` set to the rest of ``args``
    and the token."""
    import importlib

    if run is None:
        from flwr.supernode.cli import flwr_clientapp

        run = flwr_clientapp

    args, preload = take_preload(args)
    for name in (*PRELOAD, *preload):
        try:
            importlib.import_module(name)
        except ImportError as e:
            if name in preload:  # asked for by name: a typo or a missing package says so
                print(f"privopt_flower.superexec: cannot preload {name}: {e}", file=sys.stderr)
    # Finished tasks are reaped by the kernel (a task process resets this for its own children).
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    while line := sys.stdin.buffer.readline(MAX_TOKEN_BYTES + 1):
        token = line.decode("ascii", errors="replace").strip()
        if len(line) > MAX_TOKEN_BYTES or not token or not token.isprintable():
            print("privopt_flower.superexec: malformed task token ignored", file=sys.stderr)
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        if os.fork() == 0:
            _run_task(run, [*args, "--token", token])


def _run_task(run: Callable[[], None], args: list[str]) -> None:
    """In a forked process: one ClientApp task as ``flwr-clientapp args`` runs it; never
    returns."""
    code = 1
    try:
        os.environ[TASK_STARTED_ENV] = repr(time.time())
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)  # the token pipe (and what the server read ahead) is the server's
        os.close(devnull)
        sys.stdin = open(os.devnull)  # noqa: SIM115 (the task's, for its life)
        if "numpy" in sys.modules:  # its global random state would be every task's
            sys.modules["numpy"].random.seed()
        sys.argv = ["flwr-clientapp", *args]
        run()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


LOOPBACK = ("127.0.0.1", "localhost", "[::1]")


def loopback_plaintext(argv: list[str]) -> list[str]:
    """``argv`` with ``--insecure`` added when the Runtime API address is the node's own
    loopback and no TLS setting is given: the SuperNode serves that API in plaintext unless
    given a certificate, and Flower's own SuperNode starts its SuperExec the same way. Any
    other address keeps Flower's rule (TLS settings required)."""
    if "--insecure" in argv or "--root-certificates" in argv:
        return argv
    for flag in ("--runtime-api-address", "--appio-api-address"):
        if flag in argv and argv.index(flag) + 1 < len(argv):
            host = argv[argv.index(flag) + 1].rsplit(":", 1)[0]
            if host in LOOPBACK:
                return [*argv, "--insecure"]
    return argv


def superexec() -> None:
    """Flower's ``flower-superexec`` (same arguments; on a loopback Runtime API without TLS
    settings, plaintext as Flower's default isolation uses) with :class:`ForkServerExecutor`
    for subprocess isolation."""
    from flwr.supercore.cli import flower_superexec
    from flwr.supercore.constant import ExecutorType
    from flwr.supercore.superexec import run_superexec

    flower_get_executor = getattr(run_superexec, "get_executor", None)
    if flower_get_executor is None:
        sys.exit(
            "privopt_flower.superexec: this Flower has no SuperExec executor factory to extend "
            "(written for Flower 1.41); run flower-superexec instead"
        )

    argv, preload = take_preload(sys.argv[1:])

    def get_executor(executor_type: Any, executor_config: Any = None, **kwargs: Any) -> Any:
        if executor_type == ExecutorType.SUBPROCESS:
            return ForkServerExecutor(preload)
        return flower_get_executor(executor_type, executor_config, **kwargs)

    setattr(run_superexec, "get_executor", get_executor)  # noqa: B010 (not exported)
    sys.argv = [sys.argv[0], *loopback_plaintext(argv)]
    flower_superexec()


def main() -> None:
    if sys.argv[1:2] == ["--fork-server"]:
        fork_server(sys.argv[2:])
    else:
        superexec()


if __name__ == "__main__":
    main()
