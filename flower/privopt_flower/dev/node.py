"""One SuperNode and :mod:`privopt_flower.superexec` beside it, as one process group (so a
``kill -9`` of the group takes the node, its SuperExec and its ClientApps, as it does with
Flower's default isolation)::

    python -m privopt_flower.dev.node flower-supernode ... --isolation process -- \\
        --runtime-api-address 127.0.0.1:PORT

starts the SuperNode command (everything before ``--``) as a child, then becomes the SuperExec
(the arguments after ``--``, with ``--parent-pid`` the SuperNode's, so it ends with it)."""

from __future__ import annotations

import os
import subprocess
import sys


def main() -> None:
    argv = sys.argv[1:]
    if "--" not in argv or argv.index("--") == 0:
        sys.exit("usage: python -m privopt_flower.dev.node SUPERNODE_CMD... -- SUPEREXEC_ARGS...")
    cut = argv.index("--")
    node = subprocess.Popen(argv[:cut])
    superexec = [sys.executable, "-m", "privopt_flower.superexec", *argv[cut + 1 :]]
    os.execv(sys.executable, [*superexec, "--parent-pid", str(node.pid)])


if __name__ == "__main__":
    main()
