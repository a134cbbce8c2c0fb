"""Adding a storage backend: every operation the protocol leaves abstract (dlio.storage.base.Backend's
methods that raise NotImplementedError) is implemented by every backend, and every backend is reachable
from its storage type. What each operation does, the same on every backend, is tests/cli/test_storage_contract.py."""

import ast
import inspect

from dlio import storage
from dlio.storage import base


def abstract_operations():
    """Backend's methods whose body (after the docstring) is only `raise NotImplementedError`."""
    tree = ast.parse(inspect.getsource(base))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Backend")
    out = []
    for fn in cls.body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        if len(body) == 1 and isinstance(body[0], ast.Raise) and "NotImplementedError" in ast.unparse(body[0]):
            out.append(fn.name)
    return out


def backend_classes():
    seen, todo = [], list(base.Backend.__subclasses__())
    while todo:
        c = todo.pop()
        seen.append(c)
        todo += c.__subclasses__()
    return seen


def test_the_protocol_has_abstract_operations():
    ops = abstract_operations()
    for op in ("join", "names", "local_path", "exist", "list", "remove_tree", "write_set", "read_set", "read_ranges"):
        assert op in ops
    assert "engine_for" in ops and "local_view" in ops and "upload_files" in ops


def test_every_backend_implements_every_abstract_operation():
    ops = abstract_operations()
    for cls in backend_classes():
        missing = [op for op in ops if getattr(cls, op) is getattr(base.Backend, op)]
        assert not missing, f"{cls.__name__} does not implement {missing}"
        for attr in ("name", "label", "caps"):
            assert hasattr(cls, attr), f"{cls.__name__} has no {attr}"
        assert cls.caps <= {v for k, v in vars(base).items() if k.isupper() and isinstance(v, str)}


def test_every_backend_is_made_by_its_storage_type():
    for cls in backend_classes():
        assert cls.name in storage.BACKENDS, f"{cls.__name__}: add it to dlio.storage.BACKENDS"
        assert type(storage.make(cls.name)) is cls


def test_a_refusal_of_an_unimplemented_relay_is_the_one_message_shape():
    files = storage.make("local_fs")
    try:
        files.kv_relay("/tmp/x", 1, 4096)
    except Exception as e:
        assert str(e).startswith("storage.storage_type = local_fs: not available on files (")
    else:
        raise AssertionError("files have no relay")
