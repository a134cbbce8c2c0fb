"""The warnings a workload's keys give: keys DLIO ignores (a file may carry them, DLIO runs it), Hydra
settings, and keys DLIO honours that dlio-fast does not emulate, each on one line naming where the value
came from.  Checked against the code: a key dlio-fast reads (or follows as DLIO does) has no row here.

Not emulated, and when a warning says so (only when the value changes what DLIO does):
  * ``workflow.profiling`` true with a profiler: DLIO runs iostat / darshan / tensorboard.
  * ``reader.shuffle_size`` given, with the tensorflow or DALI loader and sample_shuffle: their buffer.
  * ``reader.read_type: memory``: dlio-fast reads the same way for both values.
  * ``dataset.keep_files: false``: DLIO deletes the dataset at the end.
  * ``output.log_file`` other than dlio.log: DLIO's log file name.
  * ``*_classname``: DLIO plugin classes.
  * ``checkpoint.ksm``: DLIO's wait for KSM to merge the checkpoint tensors' pages.
``checkpoint.type`` is honoured for 2.0.0 configs (``rank_zero``: only rank 0 writes, dlio.checkpoint.layout)
and current DLIO never reads it, so it has no row.
"""

from __future__ import annotations

import re
from typing import Any, Callable, List, Mapping, Optional, Tuple

from dlio.config.layers import nearest_key
from dlio.config.problem import show

IGNORED = "ignored (DLIO ignores it too)"

# Hydra settings dlio-fast follows (Config.hydra has them all): no warning for these. The job's facts
# that `dlio_benchmark` records in hydra.yaml (dlio.config.hydra_compose -> dlio.report.dlio.hydra) too.
HYDRA_HONOURED = frozenset(
    {
        "hydra.run.dir",
        "hydra.output_subdir",
        "hydra.job.name",
        "hydra.job.config_name",
        "hydra.runtime.config_sources",
        "hydra.overrides.hydra",
    }
)


def where(origin: str) -> str:
    """`FILE:LINE` for a file origin ("FILE line N"), the origin as it is otherwise (--set ..., env ...)."""
    m = re.fullmatch(r"(.*) line (\d+)", origin)
    return f"{m.group(1)}:{m.group(2)}" if m else origin


def unknown_key_warning(spelled: str, canon: str, origin: str) -> str:
    return f"warning: {where(origin)}: {spelled} is not a DLIO key: {IGNORED}; nearest valid key: {nearest_key(canon)}"


def hydra_warning(spelled: str, origin: str) -> str:
    return f"warning: {where(origin)}: {spelled}: a Hydra setting, not emulated (dlio-fast does not run Hydra); ignored"


def _profiling(v: Mapping[str, Any]) -> Optional[str]:
    p = v["profiling.profiler"]
    if v["workflow.profiling"] and p != "none":
        return f"DLIO runs its profiler (profiling.profiler = {p}) during the run; dlio-fast runs none (see --trace)"
    return None


def _shuffle_size(v: Mapping[str, Any]) -> Optional[str]:
    if v["reader.data_loader"] in ("tensorflow", "dali", "native_dali") and v["reader.sample_shuffle"] != "off":
        return (
            f"DLIO's {v['reader.data_loader']} reader shuffles the samples it has read in a shuffle buffer of this "
            "many; dlio-fast has no such buffer (reader.sample_shuffle alone decides its order)"
        )
    return None


def _classname(what: str) -> Callable[[Mapping[str, Any]], Optional[str]]:
    return lambda _v: f"DLIO loads this plugin class; dlio-fast emulates DLIO's own {what} only"


# (key, when given: what DLIO does that is not emulated, or None when the value changes nothing)
NOT_EMULATED: Tuple[Tuple[str, Callable[[Mapping[str, Any]], Optional[str]]], ...] = (
    ("workflow.profiling", _profiling),
    ("reader.shuffle_size", _shuffle_size),
    (
        "reader.read_type",
        lambda v: (
            "dlio-fast reads the same way for memory and on_demand" if v["reader.read_type"] == "memory" else None
        ),
    ),
    (
        "dataset.keep_files",
        lambda v: None if v["dataset.keep_files"] else "DLIO deletes the dataset after the run; dlio-fast keeps it",
    ),
    (
        "output.log_file",
        lambda v: (
            None
            if v["output.log_file"] == "dlio.log"
            else f"DLIO logs to {v['output.log_file']} in the output folder; dlio-fast does not use this name"
        ),
    ),
    ("reader.reader_classname", _classname("readers")),
    ("reader.data_loader_classname", _classname("data loaders")),
    ("checkpoint.checkpoint_mechanism_classname", _classname("checkpointing")),
    (
        "checkpoint.ksm",
        lambda _v: (
            "DLIO marks the checkpoint tensors MADV_MERGEABLE and waits for KSM to merge them; dlio-fast does not"
        ),
    ),
)


def not_emulated(values: Mapping[str, Any], sources: Mapping[str, str]) -> List[str]:
    """One warning per key that was given (not a default) whose value DLIO acts on and dlio-fast does not."""
    out = []
    for key, what in NOT_EMULATED:
        if key not in sources or values.get(key) is None:
            continue
        text = what(values)
        if text:
            shown = key if key == "checkpoint.ksm" else f"{key} = {show(values[key])}"
            out.append(f"warning: {where(sources[key])}: {shown}: not emulated: {text}")
    return out
