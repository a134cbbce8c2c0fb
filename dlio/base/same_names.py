"""Building one record from another that holds most of its values under the same names.

The resolved settings of a config section (kvcache, vdb) keep most of the section's keys as they are,
and a C engine takes most of those settings as they are. Spelled ``name=source.name`` one a line,
the few values that are derived hide among the many that are copied; here the copied ones are taken by
name, and only the derived ones are written out.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Iterable, Type, TypeVar

T = TypeVar("T")


def same_named(source: Any, names: Iterable[str]) -> Dict[str, Any]:
    """``{name: source.name}`` for each name (an AttributeError names the one source lacks)."""
    return {name: getattr(source, name) for name in names}


def build_from(cls: Type[T], source: Any, **given: Any) -> T:
    """The dataclass ``cls`` with the values given, and each other field of its ``__init__`` set to the
    attribute of ``source`` that has the field's name."""
    rest = [f.name for f in dataclasses.fields(cls) if f.init and f.name not in given]  # type: ignore[arg-type]
    return cls(**given, **same_named(source, rest))
