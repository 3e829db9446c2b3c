"""privopt_flower.superexec's fork server: one fresh process per task token, each with the
token as Flower passes it and its own random state; bad tokens are skipped and a closed input
ends the server. (The deployment tests run every SuperNode with it.)"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

TASK = textwrap.dedent(
    """
    import json, os, sys
    import numpy as np
    from privopt_flower.superexec import TASK_STARTED_ENV, fork_server

    def run():
        path = os.path.join(sys.argv[-3], f"task-{os.getpid()}.json")
        with open(path + ".tmp", "w") as f:
            json.dump({"argv": sys.argv, "draw": float(np.random.random()),
                       "stdin": sys.stdin.read(), "started": TASK_STARTED_ENV in os.environ,
                       "preloaded": "json.tool" in sys.modules}, f)
        os.replace(path + ".tmp", path)

    args = ["--preload", "json.tool,no_such_module", "--runtime-api-address", "127.0.0.1:1"]
    fork_server([*args, sys.argv[1]], run=run)
    """
)


def test_each_token_gets_a_forked_process_of_its_own(tmp_path: Path) -> None:
    out = tmp_path / "tasks"
    out.mkdir()
    tokens = b"tok-one\n" + b"bad token \x01\n" + b"tok-two\n" + b"tok-three\n"
    proc = subprocess.run(
        [sys.executable, "-c", TASK, str(out)],
        input=tokens,
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert b"malformed task token ignored" in proc.stderr
    assert b"cannot preload no_such_module" in proc.stderr
    # The server exits when its input closes; its forked tasks may still be finishing.
    deadline = time.monotonic() + 30
    while len(list(out.glob("*.json"))) < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    tasks = [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))]
    assert sorted(t["argv"][-1] for t in tasks) == ["tok-one", "tok-three", "tok-two"]
    for t in tasks:
        assert t["argv"][:5] == [
            "flwr-clientapp",
            "--runtime-api-address",
            "127.0.0.1:1",
            str(out),
            "--token",
        ]
        assert t["stdin"] == ""  # the token pipe is the server's, not the task's
        assert t["started"]
        assert t["preloaded"]  # imported once by the server, before the fork
    # numpy's global random state is reseeded per task, not copied from the server.
    assert len({t["draw"] for t in tasks}) == 3


def test_a_loopback_runtime_api_without_tls_settings_is_reached_in_plaintext() -> None:
    from privopt_flower.superexec import loopback_plaintext

    local = ["--runtime-api-address", "127.0.0.1:9094", "--parent-pid", "7"]
    assert loopback_plaintext(local) == [*local, "--insecure"]
    # Another host keeps Flower's rule; explicit TLS settings are left as given.
    remote = ["--runtime-api-address", "10.0.0.2:9094"]
    assert loopback_plaintext(remote) == remote
    tls = [*local, "--root-certificates", "ca.crt"]
    assert loopback_plaintext(tls) == tls
