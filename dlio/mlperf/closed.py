"""Rules v3.0 3.6.2: which parameters a CLOSED training run changed from its workload's, found by
comparing the run's resolved config (the run folder's config.yaml) key by key with the built-in
workload's (dlio.config), less the keys the Rules let a CLOSED run tune (dlio.mlperf.rules.CLOSED_TUNABLE).

A run recorded without its config (an older run folder, a dlio-fast.json alone) is compared on the
settings its result recorded: record length, batch size, compute time, format, samples per file, the
AU threshold and the excluded steps.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import yaml

from dlio.config.load import load_config
from dlio.mlperf import rules

Change = Tuple[str, Any, Any]  # (dotted key, the run's value, the workload's)
_MISSING = "(not set)"

# The settings a run's result records (dlio.report.result.build_result) and the config keys they come
# from: what a run without its config.yaml is compared on.
_RECORDED = (
    ("settings", "record_length_bytes", "dataset.record_length_bytes"),
    ("settings", "batch_size", "reader.batch_size"),
    ("settings", "computation_time_mean_s", "train.computation_time"),
    ("settings", "metric_au", "metric.au"),
    ("settings", "exclude_start_steps", "output.metric.exclude_start_steps"),
    ("dataset", "format", "dataset.format"),
    ("dataset", "num_samples_per_file", "dataset.num_samples_per_file"),
)


def flatten(tree: Any, prefix: str = "") -> Dict[str, Any]:
    """{dotted key: value} of a nested config (lists are values)."""
    if not isinstance(tree, dict):
        return {prefix: tree}
    out: Dict[str, Any] = {}
    for k, v in tree.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        out.update(flatten(v, key) if isinstance(v, dict) else {key: v})
    return out


def tunable(key: str, workload: str) -> bool:
    """A key a CLOSED run may set (or that is not a workload parameter at all)."""
    allowed: Tuple[str, ...] = rules.CLOSED_TUNABLE + rules.CLOSED_NOT_WORKLOAD
    r = rules.rule(workload, "v3.0")
    if r is not None and r.model == "unet3d":
        allowed += rules.CLOSED_TUNABLE_UNET3D
    return any(key == a or (a.endswith(".") and key.startswith(a)) for a in allowed)


def workload_config(workload: str) -> Dict[str, Any]:
    """The built-in workload's resolved config, as a run folder's config.yaml holds it."""
    return yaml.safe_load(load_config(workload=workload, env={}).to_yaml())


def changes(doc: Dict[str, Any]) -> Tuple[List[Change], str]:
    """The non-tunable parameters a run changed from its workload's, and what they were read from."""
    wl = str(doc.get("workload") or "")
    base = flatten(workload_config(wl))
    cfg = doc.get("config")
    if isinstance(cfg, dict):
        run = flatten(cfg)
        keys = sorted(set(run) | set(base))
        found = [(k, run.get(k, _MISSING), base.get(k, _MISSING)) for k in keys if not tunable(k, wl)]
        return [c for c in found if not _same(c[1], c[2])], "config.yaml"
    out = []
    for section, field, key in _RECORDED:
        have = (doc.get(section) or {}).get(field)
        want = base.get(key, _MISSING)
        if key == "train.computation_time" and isinstance(want, dict):
            want = want.get("mean", want)
        if have is not None and not _same(have, want):
            out.append((key, have, want))
    return out, "the settings its result recorded (no config.yaml)"


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return abs(float(a) - float(b)) <= 1e-9 * max(1.0, abs(float(b)))
    return a == b


def describe(found: List[Change], limit: Optional[int] = 4) -> str:
    """'dataset.record_length_bytes 524288 (workload: 146600628); ...'."""
    parts = [f"{k} {_show(v)} (workload: {_show(w)})" for k, v, w in found]
    if limit is not None and len(parts) > limit:
        parts = parts[:limit] + [f"and {len(found) - limit} more"]
    return "; ".join(parts)


def _show(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v)
