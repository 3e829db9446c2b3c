"""The type stubs name only what exists: every class, function and method a .pyi declares is
there at runtime (a renamed binding fails here)."""

from __future__ import annotations

import ast
import importlib
import pathlib

import pytest

SRC = pathlib.Path(__file__).parent.parent / "src"
STUBS = sorted(p for p in (SRC / "privopt").rglob("*.pyi") if p.name != "_native.pyi")


@pytest.mark.parametrize("stub", STUBS, ids=lambda p: str(p.relative_to(SRC)))
def test_stub_names_exist(stub: pathlib.Path):
    parts = stub.relative_to(SRC).with_suffix("").parts
    module = importlib.import_module(".".join(p for p in parts if p != "__init__"))
    for node in ast.parse(stub.read_text()).body:
        if not isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            continue
        obj = getattr(module, node.name, None)
        assert obj is not None, f"{module.__name__}.{node.name} is in the stub only"
        if isinstance(node, ast.ClassDef):
            for member in node.body:
                if isinstance(member, ast.FunctionDef) and not member.name.startswith("__"):
                    assert hasattr(obj, member.name), (
                        f"{node.name}.{member.name} is in the stub only"
                    )
