"""MLPerf Storage rules as data: which rules version and division each built-in workload belongs to,
its AU threshold, and the numbered rules that `datasize`, `check --rules` and `run` apply.

Figures and rule numbers come from dlio-fast's field review, section 2 (MLPerf Storage v3.0 Rules and
training README) and docs/peers.md section 4.5 (v2.0 Submission_guidelines). Nothing here runs I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional

from dlio.base.errors import DlioError
from dlio.config.workloads import ALIASES

VERSIONS = ("v2.0", "v3.0")

# Rules 3.1.2 (unchanged from v2.0): min samples = max(500 steps x batch x accelerators,
# hosts x RAM x 5 / record length).
MIN_STEPS = 500
RAM_FACTOR = 5
# Rules 2.1.17 / 2.1.18: a result is 1 warm-up run then 5 runs, consecutive, with the same settings.
WARMUP_RUNS = 1
MEASURED_RUNS = 5
# Rules 4.x (checkpointing): 10 writes then 10 reads; the cache is flushed when the data written per
# client is under 3x its RAM (4.3.1); the read starts within 30 s of the write ending (4.7.1).
CKPT_WRITES = 10
CKPT_READS = 10
CKPT_CACHE_FACTOR = 3
CKPT_READ_GAP_S = 30.0


# Rules v3.0 3.6.2 (trainingClosedSubmissionParameters), the table "Training Workload Tunable Parameters
# for CLOSED": the only keys a CLOSED training run may set to other values than its workload's; any
# other change fails the run. storage.* (where the data is: storage_root, storage_type and the
# storage_options such as prefetch_window) counts as the table's storage parameters. reader.odirect is
# listed for unet3d only. Not workload parameters: dlio-fast's own section (how the I/O is issued and
# reported), output.* and hydra.* (where results go), the seeds (6.6.3: they change between runs) and
# workflow.generate_data (mlpstorage's datagen / run split).
CLOSED_TUNABLE = (
    "dataset.num_files_train",
    "dataset.num_subfolders_train",
    "dataset.data_folder",
    "reader.read_threads",
    "reader.computation_threads",
    "reader.transfer_size",
    "reader.prefetch_size",
    "storage.",
    "checkpoint.checkpoint_folder",
)
CLOSED_TUNABLE_UNET3D = ("reader.odirect",)
CLOSED_NOT_WORKLOAD = ("dlio_fast.", "output.", "hydra.", "train.seed", "workflow.generate_data")


@dataclass(frozen=True)
class WorkloadRule:
    """One built-in workload under one rules version."""

    workload: str
    version: str
    division: str  # "closed" (CLOSED and OPEN may submit it) or "whatif"
    model: str
    accelerator: str
    au: Optional[float]  # minimum AU as a fraction; None: not public (the workload's metric.au applies)
    source: str
    figures_public: bool = True  # False: the accelerator's compute time is a stand-in (see the YAML)


# v2.0's CLOSED workloads and AU thresholds (v3.0 keeps them as whatif)
_V2_AU = (
    ("unet3d_h100", 0.90),
    ("unet3d_a100", 0.90),
    ("resnet50_h100", 0.90),
    ("resnet50_a100", 0.90),
    ("cosmoflow_h100", 0.70),
    ("cosmoflow_a100", 0.70),
)


def _v3() -> List[WorkloadRule]:
    src = "Rules v3.0 2.1.11, training README Table 1"
    closed = [
        WorkloadRule("unet3d_b200", "v3.0", "closed", "unet3d", "b200", 0.90, src),
        WorkloadRule("unet3d_mi355", "v3.0", "closed", "unet3d", "mi355", 0.90, src, figures_public=False),
        WorkloadRule("retinanet_b200", "v3.0", "closed", "retinanet", "b200", 0.85, src + ", st#513"),
        WorkloadRule("retinanet_mi355", "v3.0", "closed", "retinanet", "mi355", 0.85, src, figures_public=False),
    ]
    # whatif only in v3.0: h100/a100 and the models CLOSED dropped; thresholds are v2.0's (none for dlrm)
    whatif = [
        WorkloadRule(w, "v3.0", "whatif", w.split("_")[0], w.split("_")[1], au, "Rules v3.0 2.1.11 (whatif)")
        for w, au in _V2_AU
    ]
    whatif.append(WorkloadRule("dlrm", "v3.0", "whatif", "dlrm", "-", None, "Rules v3.0 2.1.11 (whatif)"))
    return closed + whatif


def _v2() -> List[WorkloadRule]:
    src = "v2.0 Submission_guidelines"
    return [WorkloadRule(w, "v2.0", "closed", w.split("_")[0], w.split("_")[1], au, src) for w, au in _V2_AU]


RULES: Dict[str, Dict[str, WorkloadRule]] = {
    "v3.0": {r.workload: r for r in _v3()},
    "v2.0": {r.workload: r for r in _v2()},
}


def check_version(version: str) -> str:
    """The version, or a one-line error naming the choices."""
    if version not in RULES:
        raise DlioError(f"unknown MLPerf Storage rules version {version!r}; choose one of {', '.join(VERSIONS)}")
    return version


def rule(workload: Optional[str], version: str) -> Optional[WorkloadRule]:
    """The workload's rule under one version (aliases resolved), or None when it is not part of it."""
    if not workload:
        return None
    return RULES[check_version(version)].get(ALIASES.get(workload, workload))


def memberships(workload: str) -> List[WorkloadRule]:
    """Every version's rule for a workload, newest first."""
    return [r for v in reversed(VERSIONS) if (r := rule(workload, v)) is not None]


def claimed(workload: Optional[str]) -> Optional[WorkloadRule]:
    """The rule a run of this workload claims to follow: the current version's (v3.0) when the workload
    is CLOSED there (unet3d_b200, retinanet_mi355 ...), None for the others (unet3d_h100 is whatif in
    v3.0; a v2.0 run is checked with `check --rules v2.0`, never refused)."""
    r = rule(workload, VERSIONS[-1])
    return r if r is not None and r.division == "closed" else None


def label(workload: str) -> str:
    """'v3.0 whatif, v2.0 closed'-style text for `dlio-fast workloads`; '-' when MLPerf has no such workload."""
    parts = [
        f"{r.version} {r.division}" + ("" if r.figures_public else " (compute not public)")
        for r in memberships(workload)
    ]
    return ", ".join(parts) or "-"
