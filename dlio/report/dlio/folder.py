"""A DLIO output folder read as a run: summary.json, {rank}_output.json and .hydra/config.yaml
(dlio-facts.md section 7), so that `report` and `check` put DLIO's runs beside dlio-fast's.

The document built here has the fields of a dlio-fast run document that the reports and checks
read. DLIO records no per-read timing, so the dlio-fast-only figures (exact AU and samples/s, read
latency, benchmark CPU) are None; the DLIO-formula figures come from summary.json, and the I/O wait
per step from the per-step `load` lists of the rank files.
"""

from __future__ import annotations

import glob
import os
import re
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from dlio.base import inputs
from dlio.base.errors import DlioError
from dlio.report import validate

TOOL = "DLIO"


def is_dlio_folder(path: str) -> bool:
    """A folder DLIO wrote: summary.json, and no dlio-fast.json (dlio-fast writes both)."""
    return (
        os.path.isdir(path)
        and os.path.isfile(os.path.join(path, "summary.json"))
        and not os.path.isfile(os.path.join(path, "dlio-fast.json"))
    )


def _json(path: str) -> Any:
    """A DLIO result file: a regular file of bounded size, JSON with no NaN and bounded nesting."""
    return validate.loads(inputs.read_regular(path, inputs.JSON_CAP, "DLIO result file"), path, "DLIO result")


# Where Hydra put the run's config: its default, and MLPerf Storage's hydra.output_subdir (configs in
# v1's benchmark.sh, dlio_config in mlpstorage).
HYDRA_SUBDIRS = (".hydra", "configs", "dlio_config")


def _config(folder: str) -> Dict[str, Any]:
    """The workload section of .hydra/config.yaml (or configs/config.yaml; {} without either)."""
    paths = [os.path.join(folder, d, "config.yaml") for d in HYDRA_SUBDIRS]
    path = next((p for p in paths if os.path.isfile(p)), None)
    if path is None:
        return {}
    doc = inputs.loads_yaml(inputs.read_regular(path, inputs.YAML_CAP, "Hydra config (YAML)"), path, "YAML file") or {}
    return doc.get("workload", doc) if isinstance(doc, dict) else {}


def _model_name(cfg: Dict[str, Any]) -> str:
    """The workload's model: current DLIO's model.name, 2.0.0's `model: <name>`."""
    model = cfg.get("model")
    if isinstance(model, str):
        return model
    return (model or {}).get("name") or cfg.get("name") or "-"


def _first(v: Any) -> Any:
    """DLIO writes per-node lists for host fields ([x] on one node)."""
    return v[0] if isinstance(v, list) and v else v


def _rank_files(folder: str) -> List[Dict[str, Any]]:
    out = []
    for p in glob.glob(os.path.join(folder, "*_output.json")):
        m = re.match(r"(\d+)_output\.json$", os.path.basename(p))
        if m:
            out.append((int(m.group(1)), _json(p)))
    return [doc for _, doc in sorted(out, key=lambda t: t[0])]


def _epochs(rank_doc: Dict[str, Any]) -> List[Dict[str, Any]]:
    """A rank file's epochs as dlio-fast epoch records: {'train': {'steps', 'load'}} (block lists joined)."""
    out = []
    for key in sorted((k for k in rank_doc if str(k).isdigit()), key=int):
        ep = rank_doc[key]
        loads = ep.get("load", {}) if isinstance(ep, dict) else {}
        train = [float(x) for blk, vals in sorted(loads.items()) if blk.startswith("block") for x in vals or []]
        out.append({"epoch": int(key), "train": {"steps": len(train), "load": train} if train else None})
    return out


def load_dlio_folder(folder: str) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """(run document, summary.json) of a DLIO output folder."""
    summary = _json(os.path.join(folder, "summary.json"))
    if not isinstance(summary, dict) or not isinstance(summary.get("metric"), dict):
        raise DlioError(f"{folder}/summary.json: not DLIO's summary (no 'metric' section)")
    cfg = _config(folder)
    ds, rd, tr = cfg.get("dataset") or {}, cfg.get("reader") or {}, cfg.get("train") or {}
    ranks: List[Dict[str, Any]] = [{"rank": i, "epochs": _epochs(d)} for i, d in enumerate(_rank_files(folder))]
    nhosts = int(summary.get("num_hosts") or 1)
    mem_gib = _first(summary.get("host_memory_GB"))  # DLIO's "GB" are GiB (psutil total / 1024^3)
    size_gib = _first(summary.get("data_size_per_host_GB"))
    loads = np.array([x for r in ranks for ep in r["epochs"] if ep["train"] for x in ep["train"]["load"]])
    m = summary["metric"]
    comp = tr.get("computation_time")
    doc = {
        "schema": "dlio.output",
        "tool": TOOL,
        "complete": True,  # DLIO writes summary.json only at the end of a run
        "workload": _model_name(cfg),
        "start": summary.get("start"),
        "end": summary.get("end"),
        "comm_size": int(summary.get("num_accelerators") or max(1, len(ranks))),
        "hostnames": [summary.get("hostname")] * nhosts
        if nhosts == 1
        else [f"{summary.get('hostname')}#{i}" for i in range(nhosts)],
        "host": {
            "memory_bytes": int(float(mem_gib) * 2**30) if mem_gib else 0,
            "cpu_count": _first(summary.get("host_cpu_count")),
        },
        "settings": {
            "engine": f"{rd.get('data_loader', 'framework')} reader",
            "qd": None,
            "read_threads": rd.get("read_threads"),
            "direct": bool(rd.get("odirect", False)),
            "cache": "not managed",
            "batch_size": rd.get("batch_size"),
            "computation_time_mean_s": comp.get("mean") if isinstance(comp, dict) else comp,
            "metric_au": (cfg.get("metric") or {}).get("au", 0.9),
        },
        "dataset": {
            "folder": ds.get("data_folder") or "-",
            "format": ds.get("format"),
            "num_files_train": summary.get("num_files_train", ds.get("num_files_train")),
            # DLIO records no bytes on disk: its samples x record length per host is the nearest figure
            "bytes_on_disk": int(float(size_gib) * 2**30 * nhosts) if size_gib else 0,
        },
        "metrics": {
            "au_mean_percentage": None,
            "samples_per_second_mean": None,
            "MiB_per_second_mean": None,
            "au_percentage": m.get("train_au_percentage") or [],
            "dlio_samples_per_second_mean": m.get("train_throughput_mean_samples_per_second"),
            "io_wait_per_step_s": (
                {"mean": float(loads.mean()), "p99": float(np.percentile(loads, 99))} if loads.size else {}
            ),
        },
        "ranks": ranks,
        "checkpoints": [],
    }
    return doc, summary


def dlio_summary(doc: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The summary.json of a DLIO source (None for a dlio-fast run: its summary is computed)."""
    return doc.get("dlio_summary") if doc.get("tool") == TOOL else None
