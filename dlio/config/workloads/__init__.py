"""Built-in workloads: DLIO workload YAML files shipped as package data, here and in each workload
family's own ``workloads/`` folder (``dlio/<family>/workloads/*.yaml``: a family is its package).

A workload file holds the content of DLIO's ``workload`` Hydra group (no ``workload:`` root key), so
``dlio_benchmark --config-dir DIR workload=NAME`` reads the same file.  A few names are aliases of a
specific accelerator's variant (``resnet50`` is ``resnet50_h100``), as in MLPerf Storage.
"""

from __future__ import annotations

import difflib
import os
import re
from typing import Dict, List

from dlio.base.errors import ConfigError

ALIASES = {
    "resnet50": "resnet50_h100",
    "unet3d": "unet3d_h100",
    "bert": "bert_v100",
    "cosmoflow": "cosmoflow_h100",
    "megatron_deepspeed_LLNL": "megatron_deepspeed",
}

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


_HERE = os.path.dirname(os.path.abspath(__file__))
_DLIO = os.path.dirname(os.path.dirname(_HERE))


def _paths() -> Dict[str, str]:
    """{name: YAML file} of this folder and of every dlio/<package>/workloads/ folder."""
    folders = [_HERE] + sorted(
        p for n in os.listdir(_DLIO) if os.path.isdir(p := os.path.join(_DLIO, n, "workloads")) and p != _HERE
    )
    return {f[:-5]: os.path.join(d, f) for d in folders for f in sorted(os.listdir(d)) if f.endswith(".yaml")}


def _files() -> List[str]:
    return sorted(_paths())


def list_workloads() -> List[str]:
    """Names of all built-in workloads, aliases included, sorted."""
    return sorted(set(_files()) | set(ALIASES))


def resolve(name: str) -> str:
    """The file name (without .yaml) behind a workload name; ConfigError naming the choices if unknown."""
    real = ALIASES.get(name, name)
    if not isinstance(name, str) or not _NAME.match(real) or real not in _files():
        names = list_workloads()
        near = difflib.get_close_matches(str(name), names, n=1)
        hint = f"did you mean {near[0]}? " if near else ""
        # one line: the names are a command away, not 45 of them on the error's line
        raise ConfigError(
            f"unknown workload {name!r}: {hint}`dlio-fast workloads` lists the {len(names)} built-in ones"
        )
    return real


def workload_text(name: str) -> str:
    """The YAML text of a built-in workload."""
    with open(_paths()[resolve(name)], encoding="utf-8") as f:
        return f.read()
