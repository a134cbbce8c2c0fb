"""dlio/_core.pyi, the binding's types for the type checker (mypy in .ci/run reads it instead of the built
module), against the built module: every public name the module has is declared, nothing declared is
missing, and the module's functions take the parameters the stub gives them."""

from __future__ import annotations

import ast
import inspect
import os
import types
from typing import Dict, List

from dlio import _core

STUB = os.path.join(os.path.dirname(_core.__file__), "_core.pyi")


def _stub() -> ast.Module:
    with open(STUB) as f:
        return ast.parse(f.read())


def _declared(body: List[ast.stmt]) -> Dict[str, ast.stmt]:
    out: Dict[str, ast.stmt] = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = node
    return out


def _public(obj: object) -> set:
    return {n for n in vars(obj) if not n.startswith("_") and not isinstance(getattr(obj, n), types.ModuleType)}


def test_stub_declares_every_public_name():
    declared = _declared(_stub().body)
    public = _public(_core)
    assert sorted(public - set(declared)) == [], "in dlio._core but not in _core.pyi"
    assert sorted(set(declared) - public) == [], "in _core.pyi but not in dlio._core"


def test_stub_classes_declare_their_members():
    declared = _declared(_stub().body)
    for name in ("Run", "VdbRun", "KvRun"):
        node = declared[name]
        assert isinstance(node, ast.ClassDef)
        members = set(_declared(node.body)) - {"__init__"}
        assert members == _public(getattr(_core, name)), name


def test_stub_functions_take_the_modules_parameters():
    checked = 0
    for name, node in _declared(_stub().body).items():
        if not isinstance(node, ast.FunctionDef):
            continue
        a = node.args
        stub_params = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs]
        real = list(inspect.signature(getattr(_core, name)).parameters)
        assert stub_params == real, name
        checked += 1
    assert checked > 20
