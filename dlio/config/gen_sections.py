"""Writes dlio/config/sections.py, the typed section classes of ``Config``, from the schema rows.

    python -m dlio.config.gen_sections

Run it after changing a row's type, choices or nullability, or adding or removing a key; the unit test
``tests/unit/config/test_sections.py`` fails with this command while the committed file is stale.

Each section (``dataset``, ``model.parallelism``, ...) is one frozen dataclass named as the loader always
named it (``DatasetConfig``, ``ModelParallelismConfig``): its keys in ``KEYS`` order, then its child
sections in name order, each field named as the last word of its row's path or of its child section's, so
that the loader finds a field's value by ``section.name`` alone.
A field's type is what ``dlio.config.validate.coerce`` (or ``parse_time``) makes of the row's type.
"""

from __future__ import annotations

import os
import sys
from typing import Dict, List, Tuple

from dlio.config import schema
from dlio.config.families import KEY_MODULES
from dlio.config.keys import dlio, dlio_fast
from dlio.config.keys.row import Key

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sections.py")
COMMAND = "python -m dlio.config.gen_sections"
WIDTH = 120  # ruff's line length (pyproject.toml)

# Key.type -> the type of the value the loader stores (validate.coerce, timespec.parse_time).
TYPES: Dict[str, str] = {
    "int": "int",
    "bytes": "int",  # coerce: a size as typed, in bytes
    "float": "float",  # coerce: float(v)
    "num": "Number",  # coerce keeps an int an int and a float a float (Number, defined in sections.py)
    "bool": "bool",
    "str": "str",
    "ints": "Tuple[int, ...]",
    "strs": "Tuple[str, ...]",
    "map": "Mapping[Any, Any]",  # a read-only copy of the YAML mapping: keys and values as written
    "records": "Tuple[Mapping[Any, Any], ...]",
    "time": "TimeSpec",  # parse_time: never None (no value is a constant 0)
}

_HOMES = (dlio, dlio_fast, *KEY_MODULES)  # every module of rows


def class_name(section: str) -> str:
    """The class of a section: ``model.parallelism`` -> ``ModelParallelismConfig``."""
    return "".join(p.title().replace("_", "") for p in section.split(".")) + "Config"


def _literal(choices: Tuple[str, ...], nullable: bool) -> str:
    return "Literal[" + ", ".join([f'"{c}"' for c in choices] + (["None"] if nullable else [])) + "]"


def field_type(k: Key) -> str:
    """The annotation of a key's field (a null enum is ``Literal[..., None]``, Optional's equal)."""
    if k.type == "enum":
        return _literal(k.choices, k.nullable)
    return f"Optional[{TYPES[k.type]}]" if k.nullable and k.type != "time" else TYPES[k.type]


def _children(section: str) -> List[str]:
    return [s for s in sorted(schema.SECTIONS) if s.rpartition(".")[0] == section]


def _homes(section: str) -> str:
    """The modules of dlio that hold a section's rows: 'config.keys.dlio, vdb.keys'."""
    paths = {k.path for k in schema.KEYS if k.section == section}
    rows = [m.__name__.removeprefix("dlio.") for m in _HOMES if any(k.path in paths for k in _module_rows(m))]
    return ", ".join(rows)


def _module_rows(module: object) -> Tuple[Key, ...]:
    rows: Tuple[Key, ...] = ()
    for name in ("KEYS", "CHECKPOINT_KEYS"):
        v = getattr(module, name, ())
        rows += (v,) if isinstance(v, Key) else tuple(v)
    return rows


def _field(name: str, annotation: str) -> List[str]:
    """One field, wrapped the way ruff formats it when it is too long."""
    line = f"    {name}: {annotation}"
    if len(line) <= WIDTH:
        return [line]
    if not (annotation.startswith("Literal[") and annotation.endswith("]")):  # pragma: no cover
        raise ValueError(f"{name}: {annotation} does not fit in {WIDTH} characters")
    inner = annotation[len("Literal[") : -1]
    if len(f"        {inner}") <= WIDTH:
        return [f"    {name}: Literal[", f"        {inner}", "    ]"]
    return [f"    {name}: Literal["] + [f"        {c}," for c in inner.split(", ")] + ["    ]"]


def _class(section: str) -> List[str]:
    lines = [
        "",
        "",
        "@dataclass(frozen=True)",
        f"class {class_name(section)}:",
        f'    """The {section} section (its rows in dlio: {_homes(section)})."""',
        "",
    ]
    for k in schema.KEYS:
        if k.section == section and not k.hidden:
            lines += _field(k.name, field_type(k))
    for child in _children(section):
        name = child.rpartition(".")[2]
        kind = class_name(child)
        kind = f"Optional[{kind}]" if child in schema.OPTIONAL_SECTIONS else kind
        lines += _field(name, kind)
    return lines


def _ordered() -> List[str]:
    """Every section, a child before its parent (the class it names must exist)."""
    out: List[str] = []

    def visit(s: str) -> None:
        for c in _children(s):
            visit(c)
        out.append(s)

    for s in schema.sections():
        if "." not in s:
            visit(s)
    return out


def source() -> str:
    """The text of sections.py for the schema as it is."""
    lines = [
        '"""The section classes of ``Config``, generated from the schema rows: do not edit; after changing a row,',
        f"run ``{COMMAND}``.",
        "",
        "One frozen dataclass per section, its fields typed from the rows' types (dlio.config.gen_sections.TYPES),",
        "in the order the loader fills them; a field is named as its row (section.name) or its child section.",
        '"""',
        "",
        "from dataclasses import dataclass",
        "from typing import Any, Dict, Literal, Mapping, Optional, Tuple, Union",
        "",
        "from dlio.config.timespec import TimeSpec",
        "",
        "# a num row's value: an int stays an int, a float a float",
        "Number = Union[int, float]",
    ]
    top = [k for k in schema.KEYS if not k.section]
    for k in top:
        lines += ["", f"# the top-level {k.path} key", f"{class_name(k.path)[: -len('Config')]} = {field_type(k)}"]
    for s in _ordered():
        lines += _class(s)
    lines += ["", "", "# section path -> its class", "CLASSES: Dict[str, type] = {"]
    lines += [f'    "{s}": {class_name(s)},' for s in schema.sections()]
    lines += ["}", ""]
    return "\n".join(lines)


def main() -> int:
    text = source()
    with open(PATH, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {PATH}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
