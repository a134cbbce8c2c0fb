"""What `dlio-fast run` and `dlio-fast generate` do, start to end, on every rank."""

import os
import socket
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable

from dlio import _core, host
from dlio.checkpoint.only_mode import run_checkpoint_only
from dlio.checkpoint.summary import plan_summary, summary_lines
from dlio.config.engines import check_qd, engine_spec
from dlio.dataset.gen_rate import estimate_text
from dlio.dataset.generate import generate as generate_dataset
from dlio.dataset.spec import dataset_bytes, dataset_spec, file_paths
from dlio.errors import ConfigError, DlioError, DlioRunError
from dlio.execute import Interrupted, late_signal_note, pending, stop_signals_deferred
from dlio.host import host_info, iso
from dlio.report import dlio_files, dlio_host, exact
from dlio.report.result import build_result, new_rank_record
from dlio.train import loop
from dlio.train.results_out import write_with_fallback

RAM_FACTOR = 5  # MLPerf Storage: the dataset should be at least 5x the hosts' RAM


def output_folder(cfg, given, comm):
    """--output, else output.folder, else output/{workload}/{timestamp} (the same on every rank)."""
    folder = given or cfg.output.folder
    if not folder:
        # the pid keeps two runs started in the same second apart
        stamp = comm.bcast(time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}")
        folder = os.path.join("output", cfg.workload or cfg.model.name or "run", stamp)
        if cfg.dlio_fast.results_dir:  # MLPerf Storage's results tree (dlio.mlperf.provenance)
            from dlio.mlperf.provenance import run_folder

            folder = run_folder(cfg, stamp)
    return folder


def prepare_output(folder, comm):
    """Create and test the output folder before measuring anything."""
    problem = None
    if comm.rank == 0:
        try:
            os.makedirs(folder, exist_ok=True)
            probe = os.path.join(folder, f".write-test-{os.getpid()}")
            with open(probe, "w") as f:
                f.write("x")
            os.unlink(probe)
            from dlio.train.runlock import lock_output_folder

            lock_output_folder(folder)
        except DlioError as e:
            problem = str(e)
        except OSError as e:
            problem = f"{folder}: output folder is not writable ({e.strerror}); choose another with --output"
    problem = comm.bcast(problem)
    if problem:
        raise DlioError(problem)


def check_buffers(cfg, spec):
    """Each reader thread keeps qd buffers of a sample's size: refuse what memory cannot hold."""
    from dlio.memcheck import check_fits

    if not cfg.workflow.train:
        return
    sample = float(spec.record_length_bytes) + 3 * float(spec.record_length_bytes_stdev or 0)
    t, q = max(1, cfg.reader.read_threads), cfg.dlio_fast.qd
    check_fits(
        t * q * sample,
        f"the read buffers of reader.read_threads {t} x dlio_fast.qd {q} x dataset.record_length_bytes {int(sample)}",
        "use fewer threads, a lower qd or smaller records",
    )


def describe(cfg, spec, comm_size):
    """The --dry-run report: the dataset (size on disk, files/samples per rank, steps) when the run
    reads one, and the checkpoint plan when it writes checkpoints."""
    lines = [f"workload            {cfg.workload or cfg.config_file or '-'} (scale {cfg.scale:g})"]
    if not cfg.is_checkpoint_only():
        lines += _dataset_lines(cfg, spec, comm_size)
    if cfg.workflow.checkpoint:
        par = cfg.model.parallelism
        ranks = max(comm_size, par.tensor * par.pipeline) if cfg.checkpoint.mode != "subset" else comm_size
        if ranks > comm_size:
            lines.append(f"(this run has {comm_size} rank(s); the checkpoint needs {ranks}: the plan is for {ranks})")
        lines += summary_lines(plan_summary(cfg, ranks, ranks))
    return lines


def _dataset_lines(cfg, spec, comm_size):
    nbytes = dataset_bytes(spec)
    if cfg.storage.storage_type == "s3":
        from dlio.objstore.dataset import location

        bucket, prefix = location(cfg)
        where, present = f"s3://{bucket}/{prefix}", None
    else:
        where, present = spec.data_folder, data_present(spec)
    total = spec.num_files_train * spec.num_samples_per_file
    return [
        f"data folder         {where} "
        f"({'not checked: on S3' if present is None else 'present' if present else 'missing: run generates it'})",
        f"format              {spec.format}, {spec.num_files_train} train + {spec.num_files_eval} eval files, "
        f"{spec.num_samples_per_file} samples per file",
        f"size on disk        {nbytes / 2**30:.2f} GiB (record {cfg.record_bytes():g} bytes)",
        f"ranks               {comm_size}: {spec.num_files_train / comm_size:g} files and "
        f"{total // comm_size} samples per rank",
        f"steps per epoch     {cfg.steps_per_epoch(comm_size)} (batch {cfg.reader.batch_size}), "
        f"{cfg.train.epochs} epochs, compute {cfg.train.computation_time.mean():g} s per step",
        f"reader              {cfg.reader.read_threads} threads, prefetch {cfg.reader.prefetch_size}, "
        f"engine {cfg.dlio_fast.engine} qd {cfg.dlio_fast.qd}, cache {cfg.dlio_fast.cache}",
        f"generation time     {estimate_text(spec, nbytes, spec.num_files_train + spec.num_files_eval)}",
    ]


def data_present(spec):
    """Every file of both splits is there with the expected count (a cheap listing check)."""
    for split in ("train", "valid"):
        n = spec.num_files(split)
        if n == 0:
            continue
        paths = file_paths(spec, split)
        if not (os.path.exists(paths[0]) and os.path.exists(paths[-1])):
            return False
    return True


def generate(cfg, spec, comm, echo, progress, threads=None, checksum=False, direct=False):
    if cfg.storage.storage_type == "s3":
        from dlio.objstore import dataset as s3_dataset

        if direct:
            raise DlioError("--direct has no meaning on S3 (objects are PUT, not written through a page cache)")
        ds = s3_dataset.resolve_dataset(cfg)
        s3_dataset.check(ds)  # keys, bucket, endpoint: before any work
        return s3_dataset.generate(ds, spec, comm, echo, progress, threads, checksum)
    total_bytes = dataset_bytes(spec)
    total_files = spec.num_files_train + spec.num_files_eval
    echo(f"Starting data generation: {total_files} files, {total_bytes / 2**30:.2f} GiB in {spec.data_folder}")
    t0 = time.monotonic()
    cb = None
    if progress is not None and comm.rank == 0:
        cb = lambda b, f: progress.generation(b * comm.size, f * comm.size, total_bytes, total_files)  # noqa: E731
        cb(0, 0)  # the display's clock starts now, not when the first file is written
    res = generate_dataset(
        spec,
        threads=threads or max(2, os.cpu_count() or 2),
        rank=comm.rank,
        size=comm.size,
        progress=cb,
        barrier=comm.barrier,
        checksum=checksum,
        direct=direct,
    )
    if progress is not None:
        progress.done()
    written = sum(comm.allgather(res.bytes_written))
    dt = time.monotonic() - t0
    echo(
        f"Generation done: {written / 2**30:.2f} GiB written in {dt:.1f} s "
        f"({written / 2**20 / max(dt, 1e-9):.0f} MiB/s), "
        f"{sum(comm.allgather(res.files_skipped))} files already complete"
    )


def cache_warning(cfg, nbytes, warn):
    """A dataset that fits in RAM, read buffered with the cache kept: later epochs may not touch storage."""
    host = host_info()
    if cfg.dlio_fast.cache == "keep" and not engine_spec(cfg)[1] and nbytes < RAM_FACTOR * host["memory_bytes"]:
        warn(
            f"warning: the dataset ({nbytes / 2**30:.2f} GiB) is smaller than {RAM_FACTOR}x this host's RAM "
            f"({host['memory_GiB']:.1f} GiB): reads after the first epoch may come from the page cache, "
            "not storage (use --cache drop, O_DIRECT, or a larger dataset)"
        )


def _result(cfg, spec, comm_size, records, start, end, complete, reason, nbytes):
    engine, direct = engine_spec(cfg) if cfg.storage.storage_type != "s3" else ("s3dlio", False)
    result = build_result(
        cfg, spec, comm_size, records, start, end, complete, reason, nbytes, host_info(), engine, direct
    )
    if cfg.warnings:  # what the config loader warned about (dlio.config.emulation), as printed
        result["config_warnings"] = list(cfg.warnings)
    if cfg.workflow.checkpoint:
        per_node = max(Counter(r["hostname"] for r in records).values())
        result["checkpoint_plan"] = plan_summary(cfg, comm_size, per_node)
    return result


def balloon_warning(cfg, warn):
    """Buffered checkpoint writes on a VM that hands free memory back to its host: say why their
    GB/s move from one save to the next (measured: 0.3-1.5 GB/s into returned memory, 3.5-4 GB/s
    into memory still backed, bench/README.md)."""
    if not engine_spec(cfg, checkpoint=True)[1] and host.free_page_reporting():
        warn(
            "note: this VM returns free memory to its host (virtio-balloon free page reporting): a "
            "buffered checkpoint write into returned memory pays a host fault per page, so save GB/s "
            "depend on what was freed how long before; O_DIRECT (dlio_fast.engine=odirect) avoids it"
        )


@dataclass
class Session:
    """One rank's `dlio-fast run`: the config, the communicator, the console (rank 0 prints), and
    what the phases share (output folder, tracer, dataset size, start time)."""

    cfg: Any
    comm: Any
    echo: Callable[[str], None]
    warn: Callable[[str], None]
    progress: Any = None
    verbose: bool = False
    spec: Any = None
    folder: str = ""
    tracer: Any = None
    nbytes: int = 0
    start: str = ""
    proc_info: Any = None  # DLIO's host_cpuinfo / host_meminfo, read at the start as DLIO does


def run(cfg, comm, echo, warn, progress=None, output=None, dry_run=False, verbose=False):
    """The whole `dlio-fast run` on this rank. Returns the output folder (rank 0) or None.
    With dlio_fast.trace, this rank's trace-{rank}-of-{size}.pfw.gz is written in the output folder."""
    from dlio.train.samecfg import check_same_config

    if cfg.workflow.kvcache:  # the KV-cache offload workload is its own family (dlio.kvcache)
        from dlio.kvcache import job

        return job.run(cfg, comm, echo, warn, progress, output, dry_run, verbose)
    check_same_config(cfg, comm)  # ranks that disagree would deadlock in a collective
    s = Session(cfg, comm, echo, warn, progress, verbose, spec=dataset_spec(cfg))
    if dry_run:
        lines = describe(cfg, s.spec, comm.size)
        if comm.rank == 0:
            for line in [cfg.to_yaml().rstrip(), "---", *lines]:
                echo(line)
        return None
    _start(s, output)
    with stop_signals_deferred():
        rank_rec, failure = _measure(s)
    if failure is None and pending() is not None:
        s.warn(late_signal_note())
    _finish(s, rank_rec, failure)
    return s.folder if comm.rank == 0 else None


def _start(s: Session, output) -> None:
    """Output folder, tracer, the banner, the dataset (generated when missing) and the warnings."""
    cfg, comm, wf = s.cfg, s.comm, s.cfg.workflow
    s3 = _check_storage(cfg, comm, s.warn)
    if s3 is None:  # on S3, qd x read threads requests are in flight whatever the file engine
        check_qd(engine_spec(cfg)[0], cfg.dlio_fast.qd)
    check_buffers(cfg, s.spec)
    if cfg.dlio_fast.cache == "drop-all" and os.geteuid() != 0:
        raise DlioError(
            "dlio_fast.cache = drop-all drops the whole host's page cache and needs root; use "
            "--cache drop (each file's pages, no root needed)"
        )
    s.folder = output_folder(cfg, output, comm)
    prepare_output(s.folder, comm)
    if wf.train and cfg.dlio_fast.mlperf_rules != "off":  # MLPerf Rules 3.1.2, before generating anything
        from dlio.mlperf.datasize import shortfall

        hosts = len(set(comm.allgather(socket.gethostname())))
        problem = comm.bcast(shortfall(cfg, comm.size, hosts, host_info()["memory_bytes"]) if comm.rank == 0 else None)
        if problem and cfg.dlio_fast.mlperf_rules == "enforce":
            raise DlioError(problem)
        if problem and comm.rank == 0:
            s.warn(f"warning: {problem}")
    if cfg.dlio_fast.trace:
        from dlio.report.trace import Tracer

        s.tracer = Tracer(s.folder, comm.rank, comm.size)
    phases = [
        name
        for name, on in (
            ("Generating data", wf.generate_data),
            ("Training", wf.train),
            ("Evaluation", wf.train and wf.evaluation),
            ("Checkpointing", wf.checkpoint),
        )
        if on
    ]
    s.echo(f"Running dlio-fast [{' & '.join(phases)}] with {comm.size} process(es)")
    needs_data = wf.train or (wf.generate_data and not cfg.is_checkpoint_only())  # never a dataset nobody reads
    present = (lambda: s3_present(s3, s.spec)) if s3 is not None else (lambda: data_present(s.spec))
    if (wf.generate_data and needs_data) or (needs_data and not comm.bcast(present() if comm.rank == 0 else None)):
        from dlio.report.trace import maybe_phase

        with maybe_phase(s.tracer, "generate"):
            generate(cfg, s.spec, comm, s.echo, s.progress)
    comm.barrier()
    if wf.train:
        for split in ("train", "valid"):
            check_dataset_matches(s.spec, split, s3)  # generated with another config: wrong figures
    s.nbytes = dataset_bytes(s.spec) if needs_data else 0
    if comm.rank == 0 and wf.train and s3 is None:
        cache_warning(cfg, s.nbytes, s.warn)
    if comm.rank == 0 and wf.checkpoint and s3 is None:
        balloon_warning(cfg, s.warn)
    s.start = iso()
    s.proc_info = dlio_host.proc_info() if comm.rank == 0 else None


def _check_storage(cfg, comm, warn):
    """local_fs: None. s3: the dataset's S3Dataset, after one request that proves the endpoint,
    the keys and the bucket (a one-line error, exit status 2, before any work)."""
    if cfg.storage.storage_type == "local_fs":
        return None
    if cfg.storage.storage_type != "s3":
        raise ConfigError(
            f"storage.storage_type = {cfg.storage.storage_type!r}: not emulated (use s3 through AIStore's "
            "S3 API, or local_fs with a mounted folder)",
            "storage.storage_type",
            cfg.storage.storage_type,
        )
    if cfg.dlio_fast.trace:
        raise ConfigError(
            "dlio_fast.trace: the trace records the C core's file requests; S3 runs do not write one yet "
            "(leave --trace out)",
            "dlio_fast.trace",
            True,
        )
    from dlio.objstore import dataset as s3_dataset

    ds = s3_dataset.resolve_dataset(cfg)
    if comm.rank == 0 and ds.settings.addressing_note():
        warn("warning: " + ds.settings.addressing_note())
    if cfg.workflow.checkpoint:
        from dlio.objstore import checkpoint as s3_checkpoint

        ck_bucket, ck_prefix = s3_checkpoint.location(cfg)  # no bucket named: refused now, not at the save
    problem = None
    if comm.rank == 0:
        try:
            s3_dataset.check(ds)
            if cfg.workflow.checkpoint and ck_bucket != ds.bucket:
                from dlio.objstore import client

                client.check_access(ds.settings, ck_bucket, ck_prefix)
        except DlioError as e:
            problem = str(e)
    problem = comm.bcast(problem)
    if problem:
        raise DlioError(problem)
    return ds


def s3_present(ds, spec):
    from dlio.objstore import dataset as s3_dataset

    return s3_dataset.present(ds, spec)


def check_dataset_matches(spec, split, s3=None):
    """dlio.dataset.mismatch's check; on S3 against the fetched manifest, named by its s3:// URI."""
    from dlio.dataset.mismatch import check_dataset_matches as check

    if s3 is None:
        return check(spec, split)
    from dlio.objstore import dataset as s3_dataset

    local = s3_dataset.local_spec(spec, s3)
    try:
        check(local, split)
    except DlioError as e:
        raise type(e)(str(e).replace(local.data_folder, s3.uri().rstrip("/"))) from None


def _measure(s: Session):
    """Training (with its checkpoints) or checkpoint-only saves and loads. Returns (rank record, failure)."""
    cfg, comm, failure = s.cfg, s.comm, None
    rank_rec = new_rank_record(comm.rank)
    if cfg.workflow.train:
        try:
            rank_rec, failure = loop.run_training(
                cfg, comm, s.echo, s.progress.training if s.progress else None, tracer=s.tracer, verbose=s.verbose
            )
        finally:
            if s.progress is not None:
                s.progress.done()
    if cfg.is_checkpoint_only():
        try:
            ck = run_checkpoint_only(cfg, comm, s.echo)
        except Interrupted as e:
            return rank_rec, e
        rank_rec["checkpoints"] = ck["records"]
        rank_rec["checkpoint_phase"] = {"start": ck["start"], "end": ck["end"]}  # DLIO's per_epoch_stats
        if s.tracer is not None:  # records carry wall-clock times: map them to the trace clock
            wall_to_mono = _core.now_ns() - time.time_ns()
            for c in ck["records"]:
                s.tracer.span(
                    f"checkpoint.{c['kind']}",
                    c["wall_start_ns"] + wall_to_mono,
                    c["wall_end_ns"] - c["wall_start_ns"],
                    epoch=c["epoch"],
                    step=c["step"],
                    bytes=c["bytes"],
                )
    return rank_rec, failure


def _finish(s: Session, rank_rec, failure) -> None:
    """Close the trace, gather the ranks' records, write the result files and print the figures;
    then re-raise the failure (the CLI turns it into the exit status)."""
    cfg, comm = s.cfg, s.comm
    end, reason = iso(), (None if failure is None else str(failure))
    if s.tracer is not None:
        s.tracer.close()
        if s.tracer.failed:
            s.warn(f"warning: the trace was dropped ({s.tracer.failed}); the results are kept")
        else:
            s.echo(
                f"Trace: {s.tracer.path} ({s.tracer.events} events"
                f"{f', {s.tracer.dropped} dropped: buffers full' if s.tracer.dropped else ''})"
            )
    if failure is not None and comm.size > 1:
        # Another rank may be gone or stuck: no collective operation from here on. Each rank
        # keeps what it measured in its own files; a failed rank's error then aborts the job.
        partial = _result(cfg, s.spec, comm.size, [rank_rec], s.start, end, False, reason, s.nbytes)
        _, lost = write_with_fallback(lambda d: dlio_files.write_rank_files(partial, d, comm.rank), s.folder)
        if lost:
            s.warn(f"warning: rank {comm.rank}: {lost}")
        raise failure
    records = comm.gather(rank_rec)
    lost = None
    if comm.rank == 0:
        from dlio.report import hydra_files, verdict

        verdicts = verdict.annotate_run(records)  # sets each epoch's "verdict" (per host)
        result = _result(cfg, s.spec, comm.size, records, s.start, end, failure is None, reason, s.nbytes)
        # + DLIO's host_cpuinfo / host_meminfo / host_processor_name, read at the start (dlio.report.dlio_host)
        result["host"].update(s.proc_info or dlio_host.proc_info())
        result["verdicts"] = verdicts
        where, lost = write_with_fallback(
            lambda d: dlio_files.write_all(
                result, d, cfg.to_yaml(), hydra_files.documents(cfg), hydra_files.subdir(cfg)
            ),
            s.folder,
        )
        if cfg.dlio_fast.results_dir and not lost:
            from dlio.mlperf import provenance

            provenance.write(where, provenance.provenance(cfg, result["hostnames"]))
        if cfg.dlio_fast.plots and not lost:
            from dlio.report import plots

            try:
                made = plots.make_all(result, s.folder, summary=dlio_files.summary(result))
                s.echo(f"Plots: {', '.join(os.path.basename(p) for p in made)}")
            except DlioError as e:  # a full disk costs the plots, not the results
                s.warn(f"warning: plots not written: {e}")
        lines = dlio_files.metric_lines(result) if any(r["epochs"] or r.get("checkpoints") for r in records) else []
        lines += exact.exact_table(result) if any(r["epochs"] for r in records) else []
        for line in lines:
            s.echo(line)
        for line in verdict.run_lines(verdicts):
            s.echo(line)
        s.echo(f"Saved outputs in {where}{'' if failure is None else ' (partial: ' + reason + ')'}")
    if failure is not None:
        if lost:
            s.warn(f"warning: {lost}")
        raise failure
    if lost:
        raise DlioRunError(lost)
