"""The .hydra/ folder DLIO's Hydra writes into every output folder, for a dlio-fast run.

config.yaml: ``workload:`` and the workload as Hydra composes it: the keys the workload file (built-in
or --config) and the command line set, resolved, in the spellings of the config's DLIO dialect
(2.0.0: ``dataset.record_length``, ``checkpoint.model_size``, ``model: <name>``), schema defaults
left out as Hydra leaves them out. ``output.log_file`` is always there: DLIO's postprocessor
(LoadConfig on its argparse namespace) stops without it. overrides.yaml: the command-line overrides
as a YAML list, the way Hydra lists them (``workload=NAME``, ``++workload.KEY=VALUE``); dlio-fast's
``--set KEY=VALUE`` is listed as ``++workload.KEY=VALUE``. A ``~workload.KEY`` deletion is not
recorded by the config loader and is not listed. hydra.yaml (Hydra's own settings) is not written:
nothing of DLIO's reads it.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import yaml

from dlio.config.schema import LEGACY

# current dotted name -> DLIO 2.0.0's (schema.LEGACY maps the other way; model.model_size is current's too)
_TO_LEGACY = {new: old for old, new in LEGACY.items() if old != "model.model_size"}
DLIO_FAST_ONLY_ORIGINS = ("default", "auto:")


def _flatten(tree: Any, prefix: str = "") -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    if isinstance(tree, dict):
        for k, v in tree.items():
            path = f"{prefix}.{k}" if prefix else k
            if isinstance(v, dict) and v:
                out.update(_flatten(v, path))
            else:
                out[path] = v
    return out


def _nest(flat: Dict[str, Any]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for path, v in flat.items():
        node = out
        parts = path.split(".")
        for p in parts[:-1]:
            nxt = node.setdefault(p, {})
            if not isinstance(nxt, dict):  # 2.0.0's `model: name` next to model.* keys: keep the name
                break
            node = nxt
        else:
            node[parts[-1]] = v
    return out


def _set_keys(cfg: Any) -> Dict[str, Any]:
    """{dotted current name: resolved value} of the keys a workload file or the command line set."""
    flat = _flatten(cfg.to_dict())
    out = {}
    for path, value in flat.items():
        origin = cfg.sources.get(path, "default")
        if not origin.startswith(DLIO_FAST_ONLY_ORIGINS):
            out[path] = value
    out["output.log_file"] = flat.get("output.log_file", "dlio.log")
    return out


def workload_tree(cfg: Any) -> Dict[str, Any]:
    """The workload section of .hydra/config.yaml in the config's dialect."""
    keys = _set_keys(cfg)
    if cfg.dlio_fast.dialect == "2.0.0":
        legacy: Dict[str, Any] = {}
        for path, v in keys.items():
            if path == "model.name":
                legacy["model"] = v  # 2.0.0: `model: unet3d`
            elif path in _TO_LEGACY:
                legacy[_TO_LEGACY[path]] = v
            elif not path.startswith("model."):  # other model.* keys are current DLIO's only
                legacy[path] = v
        keys = legacy
    return _nest(keys)


def overrides(cfg: Any) -> List[str]:
    """The command line as Hydra's overrides.yaml lists it: the overrides as typed (deletions too), led by
    workload=NAME when the workload was named another way (--workload)."""
    out = list(cfg.overrides)
    if cfg.workload and not any(o.split("=", 1)[0] == "workload" for o in out):
        out.insert(0, f"workload={cfg.workload}")
    return out


def subdir(cfg: Any) -> Optional[str]:
    """The folder (inside the output folder) Hydra's files go to: hydra.output_subdir, default .hydra;
    None when it is null (no files, as Hydra does). load.py has checked that it stays inside."""
    return cfg.hydra.get("hydra.output_subdir", ".hydra")


def documents(cfg: Any) -> Dict[str, str]:
    """{file name in .hydra/: text} for a run of `cfg`."""
    return {
        "config.yaml": yaml.safe_dump({"workload": workload_tree(cfg)}, sort_keys=False, default_flow_style=False),
        "overrides.yaml": yaml.safe_dump(overrides(cfg), default_flow_style=False) if overrides(cfg) else "[]\n",
    }
