"""Result files read back (`report`, `check`) are input: parsed with bounds and checked against the
Result types (dlio.report.result) before any figure is computed from them. A file another tool or a
hand edit made (NaN, a string where a number goes, a list nested a thousand deep) is one line naming the
file and the field, never a traceback or a silently wrong figure.
"""

from __future__ import annotations

import json
import math
import typing
from typing import Any, Dict, List, Union

from dlio.base import inputs
from dlio.base.errors import DlioError
from dlio.report.result import IoPoint, RunResult


def loads(text: Union[str, bytes], where: str, what: str) -> Any:
    """A result document read back: JSON within dlio.base.inputs' bounds (no NaN, bounded nesting)."""
    return inputs.loads_json(text, where, what)


def check_run(doc: Dict[str, Any], where: str) -> None:
    """A dlio-fast.run document's declared fields have their declared types."""
    _check(doc, RunResult, where, "")


def check_points(points: List[Any], where: str, field: str = "points") -> None:
    """An io / ceiling document's points are IoPoints."""
    for i, p in enumerate(points):
        _check(p, IoPoint, where, f"{field}[{i}]")


def _check(value: Any, typ: Any, where: str, path: str) -> None:
    """DlioError at the first field of `value` that is not of `typ` (a TypedDict, Optional, List, Dict,
    a scalar, or Any). Fields a type does not declare are not checked: newer writers may add some."""
    origin, args = typing.get_origin(typ), typing.get_args(typ)
    if typ is Any:
        return
    if origin is Union:
        if value is None and type(None) in args:
            return
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return _check(value, options[0], where, path)
        return
    if _is_typed_dict(typ):
        if not isinstance(value, dict):
            _wrong(where, path, value, "an object")
        # (with postponed annotations __required_keys__ counts NotRequired fields as required: read the hints)
        hints = typing.get_type_hints(typ, include_extras=True)
        for key, sub in hints.items():
            optional = not getattr(typ, "__total__", True) or _not_required(sub)
            if key not in value and not optional:
                raise DlioError(f"{where}: field {_join(path, key)} is missing; not a complete dlio-fast document")
            if key in value:
                _check(value[key], _unwrap_not_required(sub), where, _join(path, key))
        return
    if origin in (list, List):
        if not isinstance(value, list):
            _wrong(where, path, value, "a list")
        for i, item in enumerate(value):
            _check(item, args[0] if args else Any, where, f"{path}[{i}]")
        return
    if origin in (dict, Dict):
        if not isinstance(value, dict):
            _wrong(where, path, value, "an object")
        if args:
            for k, item in value.items():
                _check(item, args[1], where, _join(path, str(k)))
        return
    if typ is bool:
        if not isinstance(value, bool):
            _wrong(where, path, value, "true or false")
    elif typ is int:
        if isinstance(value, bool) or not isinstance(value, int):
            _wrong(where, path, value, "a whole number")
    elif typ is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            _wrong(where, path, value, "a number")
    elif typ is str:
        if not isinstance(value, str):
            _wrong(where, path, value, "text")


def _is_typed_dict(typ: Any) -> bool:
    return isinstance(typ, type) and issubclass(typ, dict) and hasattr(typ, "__annotations__")


def _not_required(typ: Any) -> bool:
    return getattr(typing.get_origin(typ), "_name", "") == "NotRequired"


def _unwrap_not_required(typ: Any) -> Any:
    origin = typing.get_origin(typ)
    if origin is not None and getattr(origin, "_name", "") in ("NotRequired", "Required"):
        return typing.get_args(typ)[0]
    return typ


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _wrong(where: str, path: str, value: Any, expected: str) -> None:
    shown = json.dumps(value)[:40] if not isinstance(value, (dict, list)) else type(value).__name__
    raise DlioError(f"{where}: field {path or '(document)'} is {shown}, expected {expected}")
