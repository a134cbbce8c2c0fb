"""What `dlio-fast run` and `dlio-fast generate` do, start to end, on every rank."""

import importlib
import os
import signal
import socket
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional

from dlio import _core
from dlio.base.errors import ConfigError, DlioError, DlioRunError, Interrupted
from dlio.base.units import dlio_line, fmt_bytes, fmt_num
from dlio.checkpoint.only_mode import run_checkpoint_only
from dlio.checkpoint.summary import plan_summary, summary_lines
from dlio.config.engines import check_qd
from dlio.dataset import stored
from dlio.dataset.gen_rate import estimate_text
from dlio.dataset.spec import dataset_bytes, dataset_spec
from dlio.report import exact, interference, run_files
from dlio.report.dlio import files as dlio_files
from dlio.report.dlio import host as dlio_host
from dlio.report.result import build_result, new_rank_record
from dlio.storage import backend_for
from dlio.storage.base import FILE_ENGINES, PAGE_CACHE
from dlio.system import host
from dlio.system.execute import late_signal_note, pending, stop_signals_deferred, watch_peers
from dlio.system.host import host_info, iso
from dlio.system.results_out import write_with_fallback
from dlio.train import loop
from dlio.train.runlock import lock_output_folder, remove_unused, unlock_output_folder

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


# The workload families beside training (a workflow flag each): their module's
#   run(cfg, comm, echo, warn, progress, make_output, dry_run) -> output folder (rank 0) or None
# where make_output() makes and locks the run's output folder, called once the family has checked what it
# was asked and is about to measure; listing(cfg) -> its columns in `dlio-fast workloads`; and REPORT, the
# dlio.report.family.FamilyReport through which `dlio-fast report` reads its dlio-fast.json.
FAMILIES: Dict[str, str] = {"vdb": "dlio.vdb.job", "model_load": "dlio.modelload.run", "kvcache": "dlio.kvcache.job"}


def family_reports() -> Dict[str, Any]:
    """{schema: FamilyReport} of every workload family (for dlio.report.source.load)."""
    reports = [importlib.import_module(m).REPORT for m in FAMILIES.values()]
    return {r.schema: r for r in reports}


def family_of(cfg) -> Optional[str]:
    """The workload family a config runs (workflow.vdb, ...), or None for training / checkpoints."""
    chosen = [f for f in FAMILIES if getattr(cfg.workflow, f, False)]
    if len(chosen) > 1:
        raise ConfigError(
            f"workflow.{chosen[0]} and workflow.{chosen[1]} are both true: one workload family per run",
            f"workflow.{chosen[1]}",
            True,
        )
    return chosen[0] if chosen else None


def make_output(cfg, given, comm) -> str:
    """The run's output folder, made, tested and locked (output_folder, prepare_output)."""
    folder = output_folder(cfg, given, comm)
    prepare_output(folder, comm)
    return folder


def prepare_output(folder, comm) -> bool:
    """Create, test and lock the output folder before measuring anything. True when this run made it."""
    problem, made = None, False
    if comm.rank == 0:
        try:
            made = not os.path.isdir(folder)
            os.makedirs(folder, exist_ok=True)
            probe = os.path.join(folder, f".write-test-{os.getpid()}")
            with open(probe, "w") as f:
                f.write("x")
            os.unlink(probe)
            lock_output_folder(folder)
        except DlioError as e:
            problem = str(e)
        except OSError as e:
            problem = f"{folder}: output folder is not writable ({e.strerror}); choose another with --output"
    problem = comm.bcast(problem)
    if problem:
        raise DlioError(problem)
    return made


def check_buffers(cfg, spec):
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


def describe(cfg, spec, comm_size):
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
        lines += summary_lines(plan_summary(cfg, ranks, ranks))
    return lines


def _dataset_lines(cfg, spec, comm_size):
    ds = stored.stored(cfg, spec)
    nbytes = dataset_bytes(spec)
    total = spec.num_files_train * spec.num_samples_per_file
    # a dry run sends no request: an object store is not listed, and a rate measured here is not its rate
    if ds.local:
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
        f"generation time     {eta}",
    ]


def generate(cfg, spec, comm, echo, progress, threads=None, checksum=False, direct=False):
    """`dlio-fast generate`: the dataset where its backend keeps it, after the storage checks."""
    ds = prepare_storage(cfg, spec, comm, echo, checkpoints=False)
    stored.generate(ds, comm, echo, progress, threads, checksum, direct)


def prepare_storage(cfg, spec, comm, warn, checkpoints=True) -> stored.StoredDataset:
    """The dataset's backend, with what the config asks of it checked, and one cheap request per place
    the run uses (dataset, checkpoints) before any work: a one-line error, exit status 2."""
    backend = backend_for(cfg)
    backend.check_config(cfg)
    ds = stored.stored(cfg, spec, backend)
    roots = [ds.root]
    if checkpoints and cfg.workflow.checkpoint:
        roots.append(backend.checkpoint_root(cfg))  # no place named: refused now, not at the save
    note = backend.addressing_note()
    if note and comm.rank == 0:
        warn("warning: " + note)
    problem = None
    if comm.rank == 0:
        try:
            backend.check_access(roots, create=cfg.dlio_fast.create_bucket)
        except DlioError as e:
            problem = str(e)
    problem = comm.bcast(problem)
    if problem:
        raise DlioError(problem)
    return ds


def cache_warning(cfg, nbytes, warn):
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


def _result(cfg, spec, comm_size, records, start, end, complete, reason, nbytes):
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


def balloon_warning(cfg, warn):
    """Buffered checkpoint writes on a VM that hands free memory back to its host: say why their
    GB/s move from one save to the next (measured: 0.3-1.5 GB/s into returned memory, 3.5-4 GB/s
    into memory still backed, bench/README.md)."""
    if not backend_for(cfg).engine_spec(cfg, checkpoint=True)[1] and host.free_page_reporting():
        warn(
            "note: this VM returns free memory to its host (virtio-balloon free page reporting): a "
            "buffered checkpoint write into returned memory pays a host fault per page, so save GiB/s "
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
    data: Any = None  # dlio.dataset.stored.StoredDataset: the dataset where its backend keeps it
    folder: str = ""
    made_folder: bool = False  # this run made its output folder (removed again when the run is refused)
    tracer: Any = None
    nbytes: int = 0
    start: str = ""
    proc_info: Any = None  # DLIO's host_cpuinfo / host_meminfo, read at the start as DLIO does
    result_doc: Optional[Callable[[Dict[str, Any], str], None]] = None  # `run --json`: (dlio-fast.json, folder)


def run(cfg, comm, echo, warn, progress=None, output=None, dry_run=False, verbose=False, result_doc=None):
    """The whole `dlio-fast run` on this rank. Returns the output folder (rank 0) or None.
    With dlio_fast.trace, this rank's trace-{rank}-of-{size}.pfw.gz is written in the output folder.
    result_doc(doc, folder) gets the run's dlio-fast.json document on rank 0 once it is written (also
    when the run failed or was stopped: what was measured)."""
    from dlio.train.samecfg import check_same_config

    check_same_config(cfg, comm)  # ranks that disagree would deadlock in a collective
    family = family_of(cfg)
    if family is not None:  # a workload family of its own: it makes the output folder when it measures
        job = importlib.import_module(FAMILIES[family])
        made = []

        def make() -> str:
            made.append(make_output(cfg, output, comm))
            return made[-1]

        try:
            return job.run(cfg, comm, echo, warn, progress, make, dry_run)
        finally:
            if made and comm.rank == 0:
                if result_doc is not None:
                    _family_doc(made[-1], result_doc)
                unlock_output_folder(made[-1])
    s = Session(cfg, comm, echo, warn, progress, verbose, spec=dataset_spec(cfg), result_doc=result_doc)
    if dry_run:
        lines = describe(cfg, s.spec, comm.size)
        if comm.rank == 0:
            for line in [cfg.to_yaml().rstrip(), "---", *lines]:
                echo(line)
        return None
    try:
        _start(s, output)
    except BaseException:
        if comm.rank == 0 and s.made_folder:
            remove_unused(s.folder)  # failed before measuring (refused, a generation out of room): nothing to keep
        raise
    unwatch = watch_peers(comm.peer_stopped) if comm.size > 1 else (lambda: None)
    try:
        with stop_signals_deferred():
            rank_rec, failure = _measure(s)
    finally:
        unwatch()
    if failure is None and pending() is not None:
        s.warn(late_signal_note())
    _finish(s, rank_rec, failure)
    return s.folder if comm.rank == 0 else None


def _family_doc(folder: str, result_doc: Callable[[Dict[str, Any], str], None]) -> None:
    """A workload family's dlio-fast.json, as it wrote it, to result_doc."""
    import json

    try:
        with open(os.path.join(folder, "dlio-fast.json")) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return  # stopped before it wrote one: nothing to hand on
    result_doc(doc, folder)


def _start(s: Session, output) -> None:
    """Output folder, tracer, the banner, the dataset (generated when missing) and the warnings."""
    cfg, comm, wf = s.cfg, s.comm, s.cfg.workflow
    s.data = ds = prepare_storage(cfg, s.spec, comm, s.warn)
    if ds.backend.has(FILE_ENGINES):  # on S3, qd x read threads requests are in flight whatever the engine
        check_qd(ds.backend.engine_spec(cfg)[0], cfg.dlio_fast.qd)
    check_buffers(cfg, s.spec)
    if cfg.dlio_fast.cache == "drop-all" and os.geteuid() != 0:
        raise DlioError(
            "dlio_fast.cache = drop-all drops the whole host's page cache and needs root; use "
            "--cache drop (each file's pages, no root needed)"
        )
    if wf.train and cfg.dlio_fast.mlperf_rules != "off":  # MLPerf Rules 3.1.2, before any folder or data
        from dlio.mlperf.datasize import shortfall

        hosts = len(set(comm.allgather(socket.gethostname())))
        problem = comm.bcast(shortfall(cfg, comm.size, hosts, host_info()["memory_bytes"]) if comm.rank == 0 else None)
        if problem and cfg.dlio_fast.mlperf_rules == "enforce":
            raise DlioError(problem)
        if problem and comm.rank == 0:
            s.warn(f"warning: {problem}")
    # Every check above runs before the output folder exists: a refused run leaves nothing in a results
    # tree (MLPerf's `check run/*` would stop at a folder holding only a lock).
    s.folder = output_folder(cfg, output, comm)
    s.made_folder = prepare_output(s.folder, comm)
    if cfg.dlio_fast.trace:
        from dlio.report.trace import Tracer

        s.tracer = Tracer(s.folder, comm.rank, comm.size, ai_root=True)
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
    if (wf.generate_data and needs_data) or (
        needs_data and not comm.bcast(stored.present(ds) if comm.rank == 0 else None)
    ):
        from dlio.report.trace import maybe_phase

        with maybe_phase(s.tracer, "generate"):
            stored.generate(ds, comm, s.echo, s.progress)
    comm.barrier()
    if wf.train:
        for split in ("train", "valid"):
            stored.check_matches(ds, split)  # generated with another config: wrong figures
    s.nbytes = dataset_bytes(s.spec) if needs_data else 0
    if comm.rank == 0 and wf.train and ds.backend.has(PAGE_CACHE):
        cache_warning(cfg, s.nbytes, s.warn)
    if comm.rank == 0 and wf.checkpoint and ds.backend.has(PAGE_CACHE):
        balloon_warning(cfg, s.warn)
    s.start = iso()
    s.proc_info = dlio_host.proc_info() if comm.rank == 0 else None


def _measure(s: Session):
    """Training (with its checkpoints) or checkpoint-only saves and loads. Returns (rank record, failure)."""
    cfg, comm, failure = s.cfg, s.comm, None
    rank_rec = new_rank_record(comm.rank)
    if cfg.workflow.train:
        try:
            rank_rec, failure = loop.run_training(
                cfg,
                comm,
                s.echo,
                s.progress,
                tracer=s.tracer,
                verbose=s.verbose,
                data=s.data,
            )
        finally:
            if s.progress is not None:
                s.progress.done()
    if cfg.is_checkpoint_only():
        ck = run_checkpoint_only(cfg, comm, s.echo, progress=s.progress)
        failure = ck["failure"]
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


def tell_peers(comm, failure) -> None:
    """The other ranks hear that this one stops, unless it stopped because one of them did."""
    if isinstance(failure, Interrupted):
        if not failure.origin:
            comm.notify_stop(failure.signum, f"was interrupted by {signal.Signals(failure.signum).name}")
    else:
        comm.notify_stop(signal.SIGTERM, "failed")  # it says why itself


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
        # Another rank may be gone or stuck: no collective operation from here on. The others are told
        # (they stop within a tick and keep what they measured); each rank keeps what it measured in
        # its own files; a failed rank's error then ends the job.
        tell_peers(comm, failure)
        partial = _result(cfg, s.spec, comm.size, [rank_rec], s.start, end, False, reason, s.nbytes)
        _, lost = write_with_fallback(lambda d: run_files.write_rank_files(partial, d, comm.rank), s.folder)
        if lost:
            s.warn(f"warning: rank {comm.rank}: {lost}")
        raise failure
    records = comm.gather(rank_rec)
    lost = None
    if comm.rank == 0:
        from dlio.report import verdict
        from dlio.report.dlio import hydra as hydra_files

        direct = backend_for(cfg).engine_spec(cfg)[1]  # the verdicts' advice leaves out what is in effect
        verdicts = verdict.annotate_run(records, verdict.run_context(cfg, direct))  # sets each epoch's "verdict"
        result = _result(cfg, s.spec, comm.size, records, s.start, end, failure is None, reason, s.nbytes)
        # + DLIO's host_cpuinfo / host_meminfo / host_processor_name, read at the start (dlio.report.dlio.system.host)
        result["host"].update(s.proc_info or dlio_host.proc_info())
        result["verdicts"] = verdicts
        where, lost = write_with_fallback(
            lambda d: run_files.write_all(
                result, d, cfg.to_yaml(), hydra_files.documents(cfg, d), hydra_files.subdir(cfg)
            ),
            s.folder,
        )
        if s.result_doc is not None:
            s.result_doc(exact.dlio_fast_doc(result), where)
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
        lines = (
            [dlio_line(x) for x in dlio_files.metric_lines(result)]
            if any(r["epochs"] or r.get("checkpoints") for r in records)
            else []
        )
        lines += exact.exact_table(result) if any(r["epochs"] for r in records) else []
        lines += interference.lines(dlio_files.checkpoint_records(result))  # checkpoint.async_save
        for line in lines:
            s.echo(line)
        for line in verdict.run_lines(verdicts):
            s.echo(line)
        s.echo(f"Saved outputs in {where}{'' if failure is None else f' (partial: {reason})'}")
        unlock_output_folder(s.folder)  # the results are written: the folder holds no lock file after the run
    if failure is not None:
        if lost:
            s.warn(f"warning: {lost}")
        raise failure
    if lost:
        raise DlioRunError(lost)
