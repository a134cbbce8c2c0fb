"""What `dlio-fast run` and `dlio-fast generate` do, start to end, on every rank."""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable, List, Optional, Sequence

from dlio.base.units import fmt_bytes, fmt_num
from dlio.checkpoint.summary import plan_summary, summary_lines
from dlio.config import Config
from dlio.dataset import stored
from dlio.dataset.gen_rate import estimate_text
from dlio.dataset.spec import DatasetSpec, dataset_bytes
from dlio.report.result import RankRecord, RunResult, build_result
from dlio.storage import backend_for
from dlio.storage.base import STAT, Backend
from dlio.system import host
from dlio.system.host import host_info
from dlio.system.mpi import Comm

Echo = Callable[[str], None]

RAM_FACTOR = 5  # MLPerf Storage: the dataset should be at least 5x the hosts' RAM


def check_buffers(cfg: Config, spec: DatasetSpec) -> None:
    """Each reader thread keeps qd buffers of a sample's size: refuse what memory cannot hold."""
    from dlio.system.memcheck import THREAD_MARGIN, check_fits, check_threads

    if not cfg.workflow.train:
        return
    sample = float(spec.record_length_bytes) + 3 * float(spec.record_length_bytes_stdev or 0)
    t, q = max(1, cfg.reader.read_threads), cfg.dlio_fast.qd
    check_fits(
        t * q * sample,
        f"the read buffers of reader.read_threads {t} x dlio_fast.qd {q} x dataset.record_length_bytes {int(sample)}",
        "use fewer threads, a lower qd or smaller records",
    )
    check_threads(t + THREAD_MARGIN, f"reader.read_threads {t}", "use fewer reader threads")


def check_plan(cfg: Config, spec: DatasetSpec, comm_size: int) -> None:
    """A rank's plan of one epoch must fit in memory (dlio.train.plan_size)."""
    from dlio.train.plan_size import check_plan_fits

    check_plan_fits(cfg, spec, comm_size)


def plan_line(cfg: Config, spec: DatasetSpec, comm_size: int) -> str:
    """The --dry-run line of what a rank plans per training epoch: samples, reads, peak memory."""
    from dlio.train.plan_size import plan_bytes, reads_per_sample

    samples = cfg.steps_per_epoch(comm_size) * cfg.reader.batch_size
    return (
        f"{samples:,} samples, about {samples * reads_per_sample(spec):,} reads a training epoch, "
        f"planned in about {fmt_bytes(plan_bytes(samples, spec))} of memory"
    )


def describe(cfg: Config, spec: DatasetSpec, comm_size: int) -> List[str]:
    """The --dry-run report: the dataset (size on disk, files/samples per rank, steps) when the run
    reads one, and the checkpoint plan when it writes checkpoints."""
    lines = [f"workload            {cfg.workload or cfg.config_file or '-'} (scale {fmt_num(cfg.scale)})"]
    if not cfg.is_checkpoint_only():
        lines += _dataset_lines(cfg, spec, comm_size)
    if cfg.workflow.checkpoint:
        par = cfg.model.parallelism
        ranks = max(comm_size, par.tensor * par.pipeline) if cfg.checkpoint.mode != "subset" else comm_size
        if ranks > comm_size:
            lines.append(f"(this run has {comm_size} rank(s); the checkpoint needs {ranks}: the plan is for {ranks})")
        lines.append(f"checkpoint folder   {backend_for(cfg).checkpoint_root(cfg)}")
        lines += summary_lines(plan_summary(cfg, ranks, ranks))
    return lines


def _dataset_lines(cfg: Config, spec: DatasetSpec, comm_size: int) -> List[str]:
    check_plan(cfg, spec, comm_size)  # what the run would refuse, the dry run refuses
    ds = stored.stored(cfg, spec)
    nbytes = dataset_bytes(spec)
    total = spec.num_files_train * spec.num_samples_per_file
    # a dry run sends no request: an object store is not listed, and a rate measured here is not its rate
    if ds.backend.has(STAT):
        present = "present" if stored.present(ds) else "missing: run generates it"
        eta = estimate_text(spec, nbytes, spec.num_files_train + spec.num_files_eval)
    else:
        present, eta = f"not checked: on {ds.backend.label}", f"not estimated (on {ds.backend.label})"
    return [
        f"data folder         {ds.root} ({present})",
        f"format              {spec.format}, {spec.num_files_train} train + {spec.num_files_eval} eval files, "
        f"{spec.num_samples_per_file} samples per file",
        f"size on disk        {fmt_bytes(nbytes)} (record {fmt_bytes(cfg.record_bytes())}, "
        f"{fmt_num(cfg.record_bytes())} bytes)",
        f"ranks               {comm_size}: {fmt_num(spec.num_files_train / comm_size)} files and "
        f"{total // comm_size:,} samples per rank",
        f"steps per epoch     {cfg.steps_per_epoch(comm_size):,} (batch {cfg.reader.batch_size}), "
        f"{cfg.train.epochs} epochs, compute {fmt_num(cfg.train.computation_time.mean())} s per step",
        f"reader              {cfg.reader.read_threads} threads, prefetch {cfg.reader.prefetch_size}, "
        f"engine {ds.backend.engine_spec(cfg)[0]} qd {cfg.dlio_fast.qd}, cache {cfg.dlio_fast.cache}",
        f"plan per rank       {plan_line(cfg, spec, comm_size)}",
        f"generation time     {eta}",
    ]


def generate(
    cfg: Config,
    spec: DatasetSpec,
    comm: Comm,
    echo: Echo,
    progress: Any,
    threads: Optional[int] = None,
    checksum: bool = False,
    direct: bool = False,
) -> None:
    """`dlio-fast generate`: the dataset where its backend keeps it, after the storage checks."""
    ds = prepare_storage(cfg, spec, comm, echo, checkpoints=False)
    stored.generate(ds, comm, echo, progress, threads, checksum, direct)


def prepare_storage(
    cfg: Config,
    spec: DatasetSpec,
    comm: Comm,
    warn: Echo,
    checkpoints: bool = True,
    backend: Optional[Backend] = None,
) -> stored.StoredDataset:
    """The dataset's backend, with what the config asks of it checked, and one cheap request per place
    the run uses (dataset, checkpoints) before any work: a one-line error, exit status 2."""
    ds = stored_dataset(cfg, spec, backend)
    places = storage_places(cfg, ds, checkpoints)

    def check() -> None:
        note = ds.backend.addressing_note()  # the first use of the storage's settings: a missing key refused
        if note:
            warn("warning: " + note)
        ds.backend.check_access(places, create=cfg.dlio_fast.create_bucket)

    comm.agree(check)
    return ds


def stored_dataset(cfg: Config, spec: DatasetSpec, backend: Optional[Backend] = None) -> stored.StoredDataset:
    """The dataset where the config's backend keeps it, the config checked against that backend."""
    backend = backend or backend_for(cfg)
    backend.check_config(cfg)
    return stored.stored(cfg, spec, backend)  # a place the backend cannot name: refused before any request


def storage_places(cfg: Config, ds: stored.StoredDataset, checkpoints: bool = True) -> List[str]:
    """The places a run uses: the dataset's root, and the checkpoints' when it writes them (no place
    named is refused now, not at the save)."""
    return [ds.root] + ([ds.backend.checkpoint_root(cfg)] if checkpoints and cfg.workflow.checkpoint else [])


def cache_warning(cfg: Config, nbytes: int, warn: Echo) -> None:
    """A dataset that fits in RAM, read buffered with the cache kept: later epochs may not touch storage."""
    host = host_info()
    if (
        cfg.dlio_fast.cache == "keep"
        and not backend_for(cfg).engine_spec(cfg)[1]
        and nbytes < RAM_FACTOR * host["memory_bytes"]
    ):
        warn(
            f"warning: the dataset ({fmt_bytes(nbytes)}) is smaller than {RAM_FACTOR}x this host's RAM "
            f"({fmt_bytes(host['memory_bytes'])}): reads after the first epoch may come from the page cache, "
            "not storage (use --cache drop, O_DIRECT, or a larger dataset)"
        )


def _result(
    cfg: Config,
    spec: DatasetSpec,
    comm_size: int,
    records: Sequence[RankRecord],
    start: str,
    end: str,
    complete: bool,
    reason: Optional[str],
    nbytes: int,
) -> RunResult:
    engine, direct = backend_for(cfg).engine_spec(cfg)
    result = build_result(
        cfg, spec, comm_size, records, start, end, complete, reason, nbytes, host_info(), engine, direct
    )
    if cfg.warnings:  # what the config loader warned about (dlio.config.emulation), as printed
        result["config_warnings"] = list(cfg.warnings)
    if cfg.workflow.checkpoint:
        per_node = max(Counter(r["hostname"] for r in records).values())
        result["checkpoint_plan"] = plan_summary(cfg, comm_size, per_node)
    return result


def balloon_warning(cfg: Config, warn: Echo) -> None:
    """Buffered checkpoint writes on a VM that hands free memory back to its host: say why their
    GB/s move from one save to the next (measured: 0.3-1.5 GB/s into returned memory, 3.5-4 GB/s
    into memory still backed, bench/README.md)."""
    if not backend_for(cfg).engine_spec(cfg, checkpoint=True)[1] and host.free_page_reporting():
        warn(
            "note: this VM returns free memory to its host (virtio-balloon free page reporting): a "
            "buffered checkpoint write into returned memory pays a host fault per page, so save GiB/s "
            "depend on what was freed how long before; O_DIRECT (dlio_fast.engine=odirect) avoids it"
        )
