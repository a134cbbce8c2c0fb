"""DLIO's postprocessor report of a run folder (`dlio_postprocessor --output-folder DIR`):
DLIO_{name}_report.txt, from the folder's DLIO files (dlio-fast's or DLIO's own).

What it holds, as DLIO's postprocessor writes it: "Overall" (run name, start, end, duration, ranks,
batch size, and the evaluation batch size when evaluation ran), then per epoch its start, end and
duration and per phase (Block i, Eval i, Checkpoint i) the same three, and for blocks and evaluations
the average loading and processing time per rank: the sum of every rank's per-step `load` / `proc`
times of that phase, divided by the ranks. DLIO's statistics tables (samples/s, MB/s, disks, CPU) need
its iostat trace (iostat.json, `profiling.profiler: iostat`); like DLIO without one, they are left out.

Where this reads more than DLIO's does: the per-epoch stats of rank 0 are `0_per_epoch_stats.json`
(current DLIO's name) or `per_epoch_stats.json` (2.0.0's, the only one DLIO's postprocessor reads), the
epochs are those the file records (DLIO's takes --epochs, 1 unless overrides.yaml says otherwise), the
record size is `record_length_bytes` or 2.0.0's `record_length`, and checkpoint phases are current
DLIO's `save_ckptN` / `load_ckptN` as well as 2.0.0's `ckptN`.
"""

from __future__ import annotations

import glob
import os
import re
from datetime import datetime
from typing import Any, Dict, List, Optional, Tuple

from dlio.base import inputs
from dlio.base.errors import DlioError


def _json(path: str) -> Any:
    """A DLIO per-rank or stats file, read within dlio.base.inputs' bounds."""
    return inputs.loads_json(inputs.read_regular(path, inputs.JSON_CAP, "DLIO result file"), path, "DLIO result")


def _workload(folder: str, hydra_folder: str) -> Dict[str, Any]:
    path = os.path.join(folder, hydra_folder, "config.yaml")
    if not os.path.lexists(path):
        raise DlioError(f"{path}: no such file; give the Hydra folder with --hydra-folder")
    doc = inputs.loads_yaml(inputs.read_regular(path, inputs.YAML_CAP, "Hydra config (YAML)"), path, "YAML file") or {}
    w = doc.get("workload") if isinstance(doc, dict) else None
    if not isinstance(w, dict):
        raise DlioError(f"{path}: no workload: section (not a DLIO run's Hydra config)")
    return w


def _stamp(text: str) -> str:
    """A DLIO timestamp as pandas prints it: 2026-01-01 10:00:00.123456."""
    return str(datetime.fromisoformat(text))


def _duration(start: str, end: str) -> str:
    return f"{(datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds():.2f}"


def _rows(content: Dict[str, Any], indent: int) -> List[str]:
    """DLIO's format_print: names left-aligned in (longest + 8) columns, then a blank line."""
    pad = " " * 4 * indent
    width = max(len(k) for k in content) + 8
    return [f"{pad}{k:<{width}}{v}" for k, v in content.items()] + [""]


def _phase_label(phase: str, counters: Dict[str, int]) -> Tuple[str, bool]:
    """(the report's heading of a phase, whether it has loading times)."""
    for kind, pattern, loading in (
        ("Block", r"block\d+$", True),
        ("Eval", r"eval\d*$", True),
        ("Checkpoint", r"(save_|load_)?ckpt\d+$", False),
    ):
        if re.match(pattern, phase):
            counters[kind] = counters.get(kind, 0) + 1
            return f"{kind} {counters[kind]}", loading
    return phase, False


def report(
    folder: str,
    hydra_folder: str = ".hydra",
    name: Optional[str] = None,
    batch_size: Optional[int] = None,
    batch_size_eval: Optional[int] = None,
    epochs: Optional[int] = None,
    do_eval: Optional[bool] = None,
) -> Tuple[str, str]:
    """(file name, text) of DLIO's report of the run in `folder`; `epochs` reports the first that many,
    `do_eval` says whether evaluation ran (default: the config's workflow.evaluation)."""
    w = _workload(folder, hydra_folder)
    model = w.get("model")
    name = name or (model.get("name") if isinstance(model, dict) else model) or "default"
    reader = w.get("reader") or w.get("data_reader") or {}
    cfg_path = os.path.join(folder, hydra_folder, "config.yaml")
    bs = batch_size or inputs.field_int(reader.get("batch_size", 1), cfg_path, "workload.reader.batch_size", 1)
    bs_eval = batch_size_eval or inputs.field_int(
        reader.get("batch_size_eval", 1), cfg_path, "workload.reader.batch_size_eval", 1
    )
    if do_eval is None:
        do_eval = bool((w.get("workflow") or {}).get("evaluation", False))
    outputs = sorted(glob.glob(os.path.join(folder, "*_output.json")))
    if not outputs:
        raise DlioError(f"{folder}: no {{rank}}_output.json: not a DLIO run's output folder")
    ranks = len(outputs)
    candidates = [os.path.join(folder, n) for n in ("per_epoch_stats.json", "0_per_epoch_stats.json")]
    stats_path = next((p for p in candidates if os.path.isfile(p)), None)
    if stats_path is None:
        raise DlioError(f"{folder}: no per_epoch_stats.json or 0_per_epoch_stats.json")
    per_epoch = _json(stats_path)
    keys = sorted((k for k in per_epoch if k.isdigit()), key=int)[:epochs]
    if not keys:
        raise DlioError(f"{stats_path}: no epoch recorded")
    # kind -> epoch -> phase -> summed seconds over ranks
    times: Dict[str, Dict[str, Dict[str, float]]] = {"load": {}, "proc": {}}
    for path in outputs:
        out = _json(path)
        for e in keys:
            for kind in ("load", "proc"):
                for phase, values in (out.get(e, {}).get(kind) or {}).items():
                    if not isinstance(values, list):
                        raise DlioError(f"{path}: {e}.{kind}.{phase}: not a list of times; not a DLIO rank file")
                    field = f"{e}.{kind}.{phase}"
                    per = times[kind].setdefault(e, {})
                    per[phase] = per.get(phase, 0.0) + sum(inputs.field_real(v, path, field, 0.0, 1e9) for v in values)
    start, end = per_epoch[keys[0]]["start"], per_epoch[keys[-1]]["end"]
    overall = {
        "Run name:": name,
        "Started:": _stamp(start),
        "Ended:": _stamp(end),
        "Duration (s):": _duration(start, end),
        "Num Ranks:": ranks,
        "Batch size (per rank):": bs,
    }
    if do_eval:
        overall["Eval batch size:"] = bs_eval
    lines = [
        "DLIO v1.0 Report",
        "",
        "Note: Training phases lasting less than 2 seconds, will show 'n/a' values, as there is not enough data "
        "to compute statistics.",
        "",
        "Overall",
        "",
        *_rows(overall, 1),
        "",
        "Detailed Report",
        "",
    ]
    counters: Dict[str, int] = {}
    for e in keys:
        data = per_epoch[e]
        lines.append(f"Epoch {e}")
        lines += _rows(
            {"Started:": _stamp(data["start"]), "Ended:": _stamp(data["end"]), "Duration (s):": data["duration"]}, 1
        )
        for phase, pdata in data.items():
            if not isinstance(pdata, dict):
                continue
            label, loading = _phase_label(phase, counters)
            lines.append(f"    {label}")
            desc = {
                "Started:": _stamp(pdata["start"]),
                "Ended:": _stamp(pdata["end"]),
                "Duration (s):": pdata["duration"],
            }
            if loading:
                load = times["load"].get(e, {}).get(phase, 0.0)
                proc = times["proc"].get(e, {}).get(phase, 0.0)
                desc["Avg loading time / rank (s):"] = f"{load / ranks:.2f}"
                desc["Avg processing time / rank (s):"] = f"{proc / ranks:.2f}"
            lines += _rows(desc, 2)
    file_name = f"DLIO_{name}_report.txt" if name else "DLIO_report.txt"
    return file_name, "\n".join(lines) + "\n"
