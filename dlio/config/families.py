"""The workload families' keys, found where the families live: every package of dlio/ with a ``keys.py``
that names its ``SECTION`` and holds its ``KEYS`` (the rows of its ``SECTION.*`` keys and of its
``workflow.SECTION`` flag).

They are found by looking, not listed, so that adding a family is its package and one line in
dlio.jobs.registry (docs/design.md, "Add a workload family"). A keys module is data: it imports the row
type and nothing else of dlio, and the layer test places it with config (tests/unit/test_layers.py)."""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Tuple

_DLIO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _key_modules() -> Tuple[ModuleType, ...]:
    names = sorted(n for n in os.listdir(_DLIO) if os.path.isfile(os.path.join(_DLIO, n, "keys.py")))
    modules = tuple(importlib.import_module(f"dlio.{name}.keys") for name in names)
    for m in modules:
        section = getattr(m, "SECTION", None)
        if not isinstance(section, str) or not any(k.path == f"workflow.{section}" for k in m.KEYS):
            raise ImportError(f"{m.__file__}: a family's keys module names its SECTION and a workflow.SECTION row")
    return modules


KEY_MODULES: Tuple[ModuleType, ...] = _key_modules()
SECTIONS: Tuple[str, ...] = tuple(m.SECTION for m in KEY_MODULES)
