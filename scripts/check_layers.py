"""Checks that dependence between the workspace's crates points down only, and the rules
docs/architecture.md states about what each layer may link: a crate's normal dependencies
(build and dev dependencies are not part of what it ships) on another privopt crate must go to
a lower layer, and the listed crates must not reach the listed packages at all. Reads
``cargo metadata`` (the resolved graph, offline). Exit status 1 naming each violation.

    python3 scripts/check_layers.py
"""

from __future__ import annotations

import json
import subprocess
import sys

# Lowest first; a crate may depend only on crates in earlier layers.
LAYERS: list[set[str]] = [
    {"privopt-math", "privopt-approx"},
    {"privopt-ml", "privopt-channel", "privopt-secagg", "privopt-paillier", "privopt-ckks",
     "privopt-dp"},
    {"privopt-protocols", "privopt-data"},
    {"privopt-dpfhe"},
    {"privopt-sim"},
    {"privopt-experiments", "privopt-py"},
    {"privopt-cli", "privopt-fuzz"},
]

# Packages a crate must not reach through its normal dependencies, with why.
FORBIDDEN: dict[str, dict[str, str]] = {
    "privopt-protocols": {
        **{p: "the sans-IO roles read no archives, CSV or temp files"
           for p in ("tar", "zip", "flate2", "csv", "tempfile")},
        "privopt-sim": "the roles sit below the simulator",
        "privopt-data": "the roles need datasets in memory only (privopt-ml)",
    },
    "privopt-py": {"privopt-sim": "the binding drives the roles, not the simulator"},
    "privopt-dpfhe": {"privopt-sim": "dpfhe's fit sits below the simulator"},
}

# Direct edges a crate must not have (it may still reach them through a lower crate).
NO_DIRECT: dict[str, dict[str, str]] = {
    "privopt-experiments": {"privopt-ckks": "suites configure runs; the drivers own the crypto"},
}


def main() -> int:
    meta = json.loads(subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--offline"],
        check=True, capture_output=True, text=True).stdout)
    names = {p["id"]: p["name"] for p in meta["packages"]}
    normal: dict[str, set[str]] = {}
    for node in meta["resolve"]["nodes"]:
        normal[names[node["id"]]] = {
            names[d["pkg"]] for d in node["deps"]
            if any(k["kind"] is None for k in d["dep_kinds"])
        }
    layer = {name: i for i, group in enumerate(LAYERS) for name in group}
    members = {names[m] for m in meta["workspace_members"]}
    errors = [f"{m}: not placed in a layer of scripts/check_layers.py"
              for m in sorted(members - layer.keys())]
    for crate in sorted(members & layer.keys()):
        for dep in sorted(normal[crate] & members):
            if layer.get(dep, -1) >= layer[crate]:
                errors.append(f"{crate} depends on {dep}, which is not below it")
        for dep, why in NO_DIRECT.get(crate, {}).items():
            if dep in normal[crate]:
                errors.append(f"{crate} depends on {dep} directly: {why}")
        reach, todo = set(), list(normal[crate])
        while todo:
            d = todo.pop()
            if d not in reach:
                reach.add(d)
                todo.extend(normal.get(d, ()))
        for dep, why in FORBIDDEN.get(crate, {}).items():
            if dep in reach:
                errors.append(f"{crate} reaches {dep}: {why}")
    for e in errors:
        print(e, file=sys.stderr)
    if not errors:
        print(f"{len(members)} crates, dependence points down")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
