"""MLPerf Storage's dataset-size rule (Rules 3.1.2, the same in v2.0 and v3.0): the smallest number of
samples a run may read, and from it the number of files, the bytes on disk and the commands.

    samples >= max(500 steps x batch x accelerators, the hosts' RAM summed x 5 / record length)

Each host's RAM is what is given (--host-memory, every host alike) or what each host has (measured_hosts: under
an MPI launcher with a rank on every host, each host's MemTotal or its control group's limit, the tighter). The
record length is the workload's `dataset.record_length_bytes` (the mean, as MLPerf's datasize
uses it), not the size on disk. The sample count is rounded up, and so is the file count.
"""

from __future__ import annotations

import math
import socket
from dataclasses import dataclass, replace
from typing import Any, List, Optional, Sequence, Tuple, Union

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
    hosts_memory_bytes: Tuple[int, ...]  # each host's RAM
    batch: int
    record_bytes: float
    samples_per_file: int
    samples_by_steps: int  # 500 x batch x accelerators
    samples_by_memory: int  # ceil(hosts x RAM x 5 / record)
    samples: int  # the larger of the two
    files: int  # ceil(samples / samples per file)
    bytes_on_disk: Optional[int] = None  # the generated dataset's size (set by plan())

    @property
    def memory_bytes(self) -> int:
        """The hosts' RAM summed (the rule's)."""
        return sum(self.hosts_memory_bytes)


# RAM per host: one number for every host alike, or one per host
HostsMemory = Union[int, Sequence[int]]


def per_host(hosts: int, host_memory_bytes: HostsMemory) -> Tuple[int, ...]:
    """Each host's RAM, from one number for all or a list of one per host."""
    if isinstance(host_memory_bytes, int):
        return (host_memory_bytes,) * hosts
    if len(host_memory_bytes) != hosts:
        raise DlioError(f"memory of {len(host_memory_bytes)} host(s) for {hosts} hosts: give one figure per host")
    return tuple(int(m) for m in host_memory_bytes)


def minimum(
    batch: int,
    accelerators: int,
    hosts: int,
    host_memory_bytes: HostsMemory,
    record_bytes: float,
    samples_per_file: int = 1,
    workload: str = "-",
) -> DataSize:
    """Rules 3.1.2 on plain numbers (host_memory_bytes: every host's RAM, or each host's)."""
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
    memory = per_host(hosts, host_memory_bytes)
    by_memory = math.ceil(sum(memory) * rules.RAM_FACTOR / record_bytes)
    samples = max(by_steps, by_memory)
    return DataSize(
        workload,
        accelerators,
        hosts,
        memory,
        batch,
        record_bytes,
        samples_per_file,
        by_steps,
        by_memory,
        samples,
        math.ceil(samples / samples_per_file),
    )


def for_config(cfg: Config, accelerators: int, hosts: int, host_memory_bytes: HostsMemory) -> DataSize:
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


def plan(
    workload: str, accelerators: int, hosts: int, host_memory_bytes: HostsMemory, sets: Sequence[str] = ()
) -> DataSize:
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


def shortfall(cfg: Config, accelerators: int, hosts: int, host_memory_bytes: HostsMemory) -> Optional[str]:
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
        f"with {memory_text(ds)}; this run has {have}. Generate the size "
        f"`dlio-fast datasize` prints, or --set dlio_fast.mlperf_rules=warn to run anyway"
    )


def memory_text(ds: DataSize) -> str:
    """The hosts' RAM in words: "512 GiB RAM per host", or each host's."""
    mem = ds.hosts_memory_bytes
    if len(set(mem)) == 1:
        return f"{fmt_bytes(mem[0])} RAM per host"
    return "RAM " + " + ".join(fmt_bytes(m) for m in mem)


def memory_sum(ds: DataSize) -> str:
    """The hosts' RAM summed, as the rule writes it: "2 x 512 GiB", or "(1 GiB + 3 GiB)"."""
    mem = ds.hosts_memory_bytes
    if len(set(mem)) == 1:
        return f"{len(mem)} x {fmt_bytes(mem[0])}"
    return "(" + " + ".join(fmt_bytes(m) for m in mem) + ")"


@dataclass(frozen=True)
class HostMemory:
    """One host's RAM as measured on it (dlio.system.host.usable_memory) and where the figure comes from."""

    host: str
    bytes: int
    source: str  # "MemTotal" or the control group's limit file


def measured_hosts(comm: Any) -> List[HostMemory]:
    """Every host's RAM, each measured by its own ranks (a collective: every rank calls it), in the order of the
    hosts' first ranks. A host whose ranks disagree (ranks in different control groups) counts the most any of
    them has: the most its page cache could hold for them."""
    from dlio.system.host import usable_memory

    found: dict = {}
    for host, nbytes, source in comm.allgather((socket.gethostname(), *usable_memory())):
        if host not in found or nbytes > found[host].bytes:
            found[host] = HostMemory(host, int(nbytes), source)
    return list(found.values())


def recorded_hosts_memory(doc: Any) -> Optional[List[int]]:
    """Each host's RAM as a run's ranks measured it (their records' host_memory_usable_bytes; a host counts the
    most of its ranks'), in the order of the hosts' first ranks; None when a rank did not record it (an older
    run, a DLIO folder)."""
    found: dict = {}
    for r in doc.get("ranks") or []:
        nbytes = r.get("host_memory_usable_bytes")
        if not nbytes:
            return None
        found[r["hostname"]] = max(found.get(r["hostname"], 0), int(nbytes))
    return list(found.values()) or None
