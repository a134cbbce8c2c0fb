"""The Hydra folder DLIO's Hydra writes into every output folder (``.hydra/``, or ``hydra.output_subdir``:
MLPerf Storage's mlpstorage sets ``dlio_config``), for a dlio-fast run.

config.yaml: ``workload:`` and the workload as Hydra composes it: the keys the workload file (built-in
or --config) and the command line set, resolved, in the spellings of the config's DLIO dialect
(2.0.0: ``dataset.record_length``, ``checkpoint.model_size``), schema defaults left out as Hydra leaves
them out. Two keys are written for the tools that read the file rather than as one DLIO release
spells them: ``model`` is always a mapping with ``name`` (mlpstorage's report and rules read
``workload.model.name``: 2.0.0's ``model: unet3d`` string breaks them, and current DLIO's postprocessor
reads it too), and a 2.0.0 config also gets ``dataset.record_length_bytes`` next to
``record_length`` (mlpstorage's dataset-size rule reads the current name). ``output.log_file`` is
always there: DLIO's postprocessor (LoadConfig on its argparse namespace) stops without it.
overrides.yaml: the command-line overrides as a YAML list, the way Hydra lists them
(``workload=NAME``, ``++workload.KEY=VALUE``); dlio-fast's ``--set KEY=VALUE`` is listed as
``++workload.KEY=VALUE``. A ``~workload.KEY`` deletion is not recorded by the config loader and is not
listed. hydra.yaml: Hydra's own settings of the run as Hydra records them (``hydra.run.dir``,
``output_subdir``, the hydra and task overrides, the job's name and config name, the workload chosen,
the config sources, the output folder); MLPerf Storage's rules require the file. The ``dlio_benchmark``
command (dlio.cli.dlio_benchmark) gives the facts only it knows through ``cfg.hydra``
(``hydra.job.name``, ``hydra.job.config_name``, ``hydra.runtime.config_sources``,
``hydra.overrides.hydra``); a ``dlio-fast run`` records itself.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional

import yaml

from dlio.config import Config
from dlio.config.layers import HYDRA_OUTPUT_SUBDIR, HYDRA_RUN_DIR
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


def _set_keys(cfg: Config) -> Dict[str, Any]:
    """{dotted current name: resolved value} of the keys a workload file or the command line set."""
    flat = _flatten(cfg.to_dict())
    out = {}
    for path, value in flat.items():
        origin = cfg.sources.get(path, "default")
        if not origin.startswith(DLIO_FAST_ONLY_ORIGINS):
            out[path] = value
    out["output.log_file"] = flat.get("output.log_file", "dlio.log")
    return out


def workload_tree(cfg: Config) -> Dict[str, Any]:
    """The workload section of .hydra/config.yaml in the config's dialect (model always a mapping)."""
    keys = _set_keys(cfg)
    if cfg.dlio_fast.dialect == "2.0.0":
        legacy: Dict[str, Any] = {}
        for path, v in keys.items():
            if path == "model.name":
                legacy["model.name"] = v  # a mapping, not 2.0.0's `model: unet3d`: what mlpstorage reads
            elif path in _TO_LEGACY:
                legacy[_TO_LEGACY[path]] = v
                if path == "dataset.record_length_bytes":
                    legacy[path] = v  # also the current name: mlpstorage's dataset-size rule reads it
            elif not path.startswith("model."):  # other model.* keys are current DLIO's only
                legacy[path] = v
        keys = legacy
    return _nest(keys)


def overrides(cfg: Config) -> List[str]:
    """The command line as Hydra's overrides.yaml lists it: the overrides as typed (deletions too), led by
    workload=NAME when the workload was named another way (--workload)."""
    out = list(cfg.overrides)
    if cfg.workload and not any(o.split("=", 1)[0] == "workload" for o in out):
        out.insert(0, f"workload={cfg.workload}")
    return out


def subdir(cfg: Config) -> Optional[str]:
    """The folder (inside the output folder) Hydra's files go to: hydra.output_subdir, default .hydra;
    None when it is null (no files, as Hydra does). load.py has checked that it stays inside."""
    return cfg.hydra.get("hydra.output_subdir", ".hydra")


def hydra_tree(cfg: Config, folder: Optional[str] = None) -> Dict[str, Any]:
    """hydra.yaml's `hydra:` section: the run's Hydra settings as Hydra records them. `folder` is the
    output folder the files go to (runtime.output_dir; hydra.run.dir when none was given)."""
    given = cfg.hydra
    out_dir = os.path.abspath(folder) if folder else None
    task = overrides(cfg)
    hydra_overrides = list(given.get("hydra.overrides.hydra") or [])
    if not hydra_overrides:  # dlio-fast run: the hydra.* settings it was given, as Hydra lists them
        hydra_overrides = [f"++{k}={_text(given[k])}" for k in (HYDRA_RUN_DIR, HYDRA_OUTPUT_SUBDIR) if k in given]
    choices = {"workload": cfg.workload} if cfg.workload else {}
    return {
        "run": {"dir": given.get(HYDRA_RUN_DIR) or out_dir},
        "mode": "RUN",
        "output_subdir": subdir(cfg),
        "overrides": {"hydra": hydra_overrides + ["hydra.mode=RUN"], "task": task},
        "job": {
            "name": given.get("hydra.job.name", "dlio-fast"),
            "chdir": None,
            # Hydra's: the task overrides sorted, joined with ','
            "override_dirname": ",".join(sorted(task)),
            "config_name": given.get("hydra.job.config_name", "config"),
        },
        "runtime": {
            "cwd": os.getcwd(),
            "config_sources": list(given.get("hydra.runtime.config_sources") or _sources(cfg)),
            "output_dir": out_dir,
            "choices": choices,
        },
        "verbose": False,
    }


def _text(v: Any) -> str:
    return "null" if v is None else str(v)


def _sources(cfg: Config) -> List[Dict[str, str]]:
    """Where a dlio-fast run's workload came from, as Hydra's config_sources list them."""
    out = [{"path": "dlio.config.workloads", "schema": "pkg", "provider": "main"}]
    if cfg.config_file:
        out.insert(0, {"path": os.path.dirname(os.path.abspath(cfg.config_file)), "schema": "file", "provider": "main"})
    return out


def documents(cfg: Config, folder: Optional[str] = None) -> Dict[str, str]:
    """{file name in .hydra/: text} for a run of `cfg` whose output folder is `folder`."""
    dump = lambda tree: yaml.safe_dump(tree, sort_keys=False, default_flow_style=False)  # noqa: E731
    return {
        "config.yaml": dump({"workload": workload_tree(cfg)}),
        "hydra.yaml": HYDRA_YAML_HEAD + dump({"hydra": hydra_tree(cfg, folder)}),
        "overrides.yaml": yaml.safe_dump(overrides(cfg), default_flow_style=False) if overrides(cfg) else "[]\n",
    }


# hydra.yaml says who wrote it: Hydra itself did not run (no sweeper, launcher or logging settings).
HYDRA_YAML_HEAD = "# written by dlio-fast in Hydra's layout (Hydra's own settings of this run)\n"
