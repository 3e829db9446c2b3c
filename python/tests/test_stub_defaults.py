"""The binding takes some keyword defaults from Rust constants (PyO3 shows them as ``...``);
the stubs, which are what editors show, must say the same numbers."""

from __future__ import annotations

import ast
import pathlib

import pytest

from privopt.protocols import dome, eezofl, pdsgd, scalar_fl

SRC = pathlib.Path(__file__).parent.parent / "src/privopt"


def stub_defaults(stub: str, cls: str) -> dict[str, object]:
    """The keyword defaults of ``cls.__new__`` as the stub file writes them."""
    tree = ast.parse((SRC / stub).read_text())
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    new = next(n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__new__")
    args = new.args.args[-len(new.args.defaults) :]
    return {a.arg: ast.literal_eval(d) for a, d in zip(args, new.args.defaults)}


@pytest.mark.parametrize(
    "stub,cls,keys,defaults",
    [
        (
            "protocols/dome.pyi",
            "Server",
            ("lr", "beta1", "beta2", "gamma_prime", "energy"),
            dome.DEFAULTS,
        ),
        ("protocols/scalar_fl.pyi", "Spec", ("nu", "eps", "weight_decay"), scalar_fl.DEFAULTS),
        ("protocols/scalar_fl.pyi", "Client", ("mu",), scalar_fl.DEFAULTS),
        ("protocols/pdsgd.pyi", "Schedule", tuple(pdsgd.DEFAULTS), pdsgd.DEFAULTS),
        ("protocols/eezofl.pyi", "Schedule", tuple(eezofl.DEFAULTS), eezofl.DEFAULTS),
    ],
)
def test_the_stub_shows_the_rust_defaults(stub, cls, keys, defaults):
    shown = stub_defaults(stub, cls)
    for key in keys:
        assert shown[key] == defaults[key], (cls, key)
