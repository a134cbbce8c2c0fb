"""MLPerf Storage's dataset-size rule (Rules 3.1.2, the same in v2.0 and v3.0): the smallest number of
samples a run may read, and from it the number of files, the bytes on disk and the commands.

    samples >= max(500 steps x batch x accelerators, hosts x host RAM x 5 / record length)

The record length is the workload's `dataset.record_length_bytes` (the mean, as MLPerf's datasize
uses it), not the size on disk. The sample count is rounded up, and so is the file count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import List, Optional, Sequence

from dlio.base.errors import DlioError
from dlio.base.units import fmt_bytes, fmt_num
from dlio.config import Config, load_config
from dlio.dataset.spec import dataset_bytes, dataset_spec
from dlio.mlperf import rules


@dataclass(frozen=True)
class DataSize:
    """The rule's minimum for one workload on one system."""

    workload: str
    accelerators: int
    hosts: int
    host_memory_bytes: int
    batch: int
    record_bytes: float
    samples_per_file: int
    samples_by_steps: int  # 500 x batch x accelerators
    samples_by_memory: int  # ceil(hosts x RAM x 5 / record)
    samples: int  # the larger of the two
    files: int  # ceil(samples / samples per file)
    bytes_on_disk: Optional[int] = None  # the generated dataset's size (set by plan())


def minimum(
    batch: int,
    accelerators: int,
    hosts: int,
    host_memory_bytes: int,
    record_bytes: float,
    samples_per_file: int = 1,
    workload: str = "-",
) -> DataSize:
    """Rules 3.1.2 on plain numbers."""
    if accelerators < 1 or hosts < 1:
        raise DlioError(f"accelerators ({accelerators}) and hosts ({hosts}) must be at least 1")
    if accelerators % hosts:
        raise DlioError(
            f"{accelerators} accelerators on {hosts} hosts: every host runs the same number of "
            f"accelerators (Rules 3.3.4); choose a multiple of {hosts}"
        )
    if record_bytes <= 0:
        raise DlioError(f"{workload}: record_length_bytes is {fmt_num(record_bytes)}; the rule divides by it")
    by_steps = rules.MIN_STEPS * batch * accelerators
    by_memory = math.ceil(hosts * host_memory_bytes * rules.RAM_FACTOR / record_bytes)
    samples = max(by_steps, by_memory)
    return DataSize(
        workload,
        accelerators,
        hosts,
        host_memory_bytes,
        batch,
        record_bytes,
        samples_per_file,
        by_steps,
        by_memory,
        samples,
        math.ceil(samples / samples_per_file),
    )


def for_config(cfg: Config, accelerators: int, hosts: int, host_memory_bytes: int) -> DataSize:
    """The rule for a resolved config (its batch, record length and samples per file)."""
    d = cfg.dataset
    return minimum(
        cfg.reader.batch_size,
        accelerators,
        hosts,
        host_memory_bytes,
        float(d.record_length_bytes),
        int(d.num_samples_per_file),
        cfg.workload or cfg.config_file or "-",
    )


def plan(workload: str, accelerators: int, hosts: int, host_memory_bytes: int, sets: Sequence[str] = ()) -> DataSize:
    """The rule for a built-in workload, with the bytes on disk of the dataset it asks for."""
    cfg = load_config(workload=workload, sets=list(sets), env={})
    if not cfg.workflow.train:
        raise DlioError(
            f"{workload}: reads no dataset (a checkpoint-only or inference workload); the dataset-size rule "
            "(Rules 3.1.2) is for training workloads such as unet3d, resnet50, cosmoflow, retinanet"
        )
    ds = for_config(cfg, accelerators, hosts, host_memory_bytes)
    sized = load_config(workload=workload, sets=list(sets) + [f"dataset.num_files_train={ds.files}"], env={})
    return replace(ds, bytes_on_disk=dataset_bytes(dataset_spec(sized)))


def commands(ds: DataSize, data_folder: str = "DATA_DIR", rules_version: Optional[str] = None) -> List[str]:
    """The generate and run commands for a planned dataset (hosts > 1: mpiexec over a host list)."""
    sets = f"--set dataset.num_files_train={ds.files} --set dataset.data_folder={data_folder}"
    per_host = ds.accelerators // ds.hosts
    launch = f"mpiexec -n {ds.accelerators}"
    if ds.hosts > 1:
        launch += f" -ppn {per_host} -hosts HOST1,...,HOST{ds.hosts}"
    gen = f"{launch} dlio-fast generate --workload {ds.workload} {sets}"
    run = f"{launch} dlio-fast run --workload {ds.workload} {sets}"
    if rules_version:
        run += f"  # then: dlio-fast check --rules {rules_version} OUTPUT_DIRS"
    return [gen, run]


def shortfall(cfg: Config, accelerators: int, hosts: int, host_memory_bytes: int) -> Optional[str]:
    """None when the config's dataset meets the rule it claims (rules.claimed), else the reason."""
    r = rules.claimed(cfg.workload)
    if r is None or accelerators % hosts:
        return None
    ds = for_config(cfg, accelerators, hosts, host_memory_bytes)
    have = int(cfg.dataset.num_files_train) * int(cfg.dataset.num_samples_per_file)
    if have >= ds.samples:
        return None
    return (
        f"{cfg.workload} claims MLPerf Storage {r.version} {r.division.upper()}, whose dataset rule (Rules 3.1.2) "
        f"needs >= {ds.samples} samples ({ds.files} files) for {accelerators} accelerator(s) on {hosts} host(s) "
        f"with {fmt_bytes(host_memory_bytes)} RAM each; this run has {have}. Generate the size "
        f"`dlio-fast datasize` prints, or --set dlio_fast.mlperf_rules=warn to run anyway"
    )
