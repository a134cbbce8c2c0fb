"""Runs in an MLPerf-Storage-shaped results tree (dlio_fast.results_dir), each with a provenance.json that
ties the run to the code and settings that made it (Rules 2.1.6 asks for the code's commit and a
SHA-256 of the workload-defining config): config_sha256 covers the whole resolved config,
core_config_sha256 the config without the folders (PLACE_KEYS).

Layout: RESULTS_DIR/training/MODEL/run/YYYYMMDD_HHMMSS for training runs, RESULTS_DIR/checkpointing/
MODEL/run/... for checkpoint-only runs (mlpstorage's results-dir shape: benchmark, model, command, time).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
from typing import TYPE_CHECKING, Any, Dict, List, Optional

import dlio
from dlio.mlperf import rules
from dlio.system.host import host_info
from dlio.system.output import atomic_path

if TYPE_CHECKING:  # the loader (YAML, numpy) only where a config is loaded: not for `io` or --version
    from dlio.config import Config

SCHEMA = "dlio-fast.provenance/1"


def run_folder(cfg: Config, stamp: str) -> str:
    """The leaf folder of one run under dlio_fast.results_dir; stamp is YYYYMMDD-HHMMSS (or _)."""
    bench = "checkpointing" if cfg.is_checkpoint_only() else "training"
    model = cfg.model.name or cfg.workload or "model"
    root = cfg.dlio_fast.results_dir
    assert root, "called when dlio_fast.results_dir is set (dlio.jobs.folder)"
    return os.path.join(root, bench, model, "run", stamp.replace("-", "_"))


# Where things go and what is written beside the results: not part of what the workload is, so two runs
# of one workload into other folders have the same core config hash (Rules 2.1.6's core_config idea).
PLACE_KEYS = (
    ("dataset", "data_folder"),
    ("checkpoint", "checkpoint_folder"),
    ("output", "folder"),
    ("output", "log_file"),
    ("dlio_fast", "results_dir"),
    ("dlio_fast", "plots"),
    ("dlio_fast", "trace"),
)


def core_config(config: Dict[str, Any]) -> Dict[str, Any]:
    """The resolved config without the PLACE_KEYS."""
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in config.items()}
    for section, key in PLACE_KEYS:
        if isinstance(out.get(section), dict):
            out[section].pop(key, None)
    return out


def config_sha256(config: Dict[str, Any]) -> str:
    """SHA-256 of the resolved config as canonical JSON (sorted keys, no spaces): equal settings, equal hash."""
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def git_commit(path: Optional[str] = None) -> Optional[Dict[str, Any]]:
    """{commit, dirty} of the git checkout holding dlio-fast's source, None when it is not one (a wheel)."""
    here = path or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        head = subprocess.run(["git", "-C", here, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "-C", here, "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        return {"commit": head.stdout.strip(), "dirty": bool(dirty.stdout.strip())}
    except (OSError, subprocess.TimeoutExpired):
        return None


def provenance(cfg: Config, hostnames: List[str], argv: Optional[List[str]] = None) -> Dict[str, Any]:
    """The provenance document of a run."""
    config = cfg.to_dict()
    claimed = rules.claimed(cfg.workload)
    return {
        "schema": SCHEMA,
        "dlio_fast_version": dlio.__version__,
        "git": git_commit(),
        "command": list(sys.argv if argv is None else argv),
        "workload": cfg.workload,
        "rules": {"version": claimed.version, "division": claimed.division} if claimed else None,
        "config": config,
        "config_sha256": config_sha256(config),
        "core_config_sha256": config_sha256(core_config(config)),
        "host": dict(host_info(), python=platform.python_version(), platform=platform.platform()),
        "hostnames": sorted(set(hostnames)),
        "ranks": len(hostnames),
    }


def write(folder: str, doc: Dict[str, Any]) -> str:
    path = os.path.join(folder, "provenance.json")
    with atomic_path(path) as tmp, open(tmp, "w") as f:
        json.dump(doc, f, indent=1, default=str)
    return path
