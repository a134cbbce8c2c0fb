"""What `dlio-fast run` and `dlio-fast generate` do, start to end, on every rank."""
import os
import socket
import time


from dlio.checkpoint import io as ckpt_io
from dlio.dataset.generate import generate as generate_dataset, estimate_text
from dlio.dataset.spec import dataset_bytes, file_paths
from dlio.report import dlio_files
from dlio.train import loop
from dlio.errors import DlioError, DlioRunError
from dlio.execute import Interrupted

RAM_FACTOR = 5   # MLPerf Storage: the dataset should be at least 5x the hosts' RAM


def output_folder(cfg, given, comm):
    """--output, else output.folder, else output/{workload}/{timestamp} (the same on every rank)."""
    folder = given or cfg.output.folder
    if not folder:
        stamp = comm.bcast(time.strftime("%Y%m%d-%H%M%S"))
        folder = os.path.join("output", cfg.workload or cfg.model.name or "run", stamp)
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
        except OSError as e:
            problem = f"{folder}: output folder is not writable ({e.strerror}); choose another with --output"
    problem = comm.bcast(problem)
    if problem:
        raise DlioError(problem)


def describe(cfg, spec, comm_size):
    """The --dry-run report: resolved settings, size on disk, files/samples per rank, steps."""
    nbytes = dataset_bytes(spec)
    present = data_present(spec)
    total = spec.num_files_train * spec.num_samples_per_file
    lines = [
        f"workload            {cfg.workload or cfg.config_file or '-'} (scale {cfg.scale:g})",
        f"data folder         {spec.data_folder} ({'present' if present else 'missing: run generates it'})",
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
    return lines, nbytes, present


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


def generate(cfg, spec, comm, echo, progress, threads=None, checksum=False):
    total_bytes = dataset_bytes(spec)
    total_files = spec.num_files_train + spec.num_files_eval
    echo(f"Starting data generation: {total_files} files, {total_bytes / 2**30:.2f} GiB in {spec.data_folder}")
    t0 = time.monotonic()
    cb = None
    if progress is not None and comm.rank == 0:
        cb = lambda b, f: progress.generation(b * comm.size, f * comm.size, total_bytes, total_files)  # noqa: E731
    res = generate_dataset(spec, threads=threads or max(2, os.cpu_count() or 2), rank=comm.rank,
                           size=comm.size, progress=cb, barrier=comm.barrier, checksum=checksum)
    if progress is not None:
        progress.done()
    written = sum(comm.allgather(res.bytes_written))
    dt = time.monotonic() - t0
    echo(f"Generation done: {written / 2**30:.2f} GiB written in {dt:.1f} s "
         f"({written / 2**20 / max(dt, 1e-9):.0f} MiB/s), {sum(comm.allgather(res.files_skipped))} files already complete")


def cache_warning(spec, nbytes, echo, warn):
    host = loop.host_info()
    if nbytes < RAM_FACTOR * host["memory_bytes"]:
        warn(f"warning: the dataset ({nbytes / 2**30:.2f} GiB) is smaller than {RAM_FACTOR}x this host's RAM "
             f"({host['memory_GB']:.1f} GiB): reads after the first epoch may come from the page cache, "
             "not storage (use --cache drop, O_DIRECT, or a larger dataset)")


def build_result(cfg, spec, comm, rank_records, start, end, complete, reason, nbytes):
    host = loop.host_info()
    engine, direct = loop.engine_choice(cfg)
    return {
        "schema": dlio_files.SCHEMA, "complete": complete, "reason": reason,
        "workload": cfg.workload, "config_file": cfg.config_file, "scale": cfg.scale,
        "model": cfg.model.name, "start": start, "end": end,
        "comm_size": comm.size, "hostnames": [r["hostname"] for r in rank_records],
        "host": host,
        "settings": {
            "engine": engine, "direct": direct, "qd": cfg.dlio_fast.qd, "cache": cfg.dlio_fast.cache,
            "read_threads": cfg.reader.read_threads, "prefetch_size": cfg.reader.prefetch_size,
            "batch_size": cfg.reader.batch_size, "batch_size_eval": cfg.reader.batch_size_eval,
            "compute_mode": cfg.dlio_fast.compute_mode,
            "computation_time_mean_s": cfg.train.computation_time.mean(),
            "record_length_bytes": float(cfg.record_bytes()), "metric_au": cfg.metric.au,
            "exclude_start_steps": cfg.output.metric.exclude_start_steps,
            "exclude_end_steps": cfg.output.metric.exclude_end_steps,
        },
        "dataset": {"folder": spec.data_folder, "format": spec.format,
                    "num_files_train": spec.num_files_train, "num_files_eval": spec.num_files_eval,
                    "num_samples_per_file": spec.num_samples_per_file, "bytes_on_disk": nbytes},
        "environment": __import__("dlio.output", fromlist=["environment"]).environment(),
        "ranks": rank_records,
    }


def write_rank_partial(cfg, spec, comm, rank_rec, folder, start, end, reason, nbytes):
    """This rank's own output files of an interrupted or failed multi-rank run."""
    result = build_result(cfg, spec, comm, [rank_rec], start, end, False, reason, nbytes)
    os.makedirs(folder, exist_ok=True)
    from dlio import output as out
    out.write_json(os.path.join(folder, f"{comm.rank}_output.json"), dlio_files.rank_output(result, 0))
    out.write_json(os.path.join(folder, f"{comm.rank}_per_epoch_stats.json"), dlio_files.per_epoch_stats(result, 0))
    out.write_json(os.path.join(folder, f"dlio-fast.rank{comm.rank}.json"), dlio_files.dlio_fast_doc(result))


def balloon_warning(cfg, warn):
    """Buffered checkpoint writes on a VM that hands free memory back to its host: say why their
    GB/s move from one save to the next (measured: 0.3-1.5 GB/s into returned memory, 3.5-4 GB/s
    into memory still backed, bench/README.md)."""
    if not ckpt_io.engine_for(cfg)[1] and loop.free_page_reporting():
        warn("note: this VM returns free memory to its host (virtio-balloon free page reporting): a "
             "buffered checkpoint write into returned memory pays a host fault per page, so save GB/s "
             "depend on what was freed how long before; O_DIRECT (dlio_fast.engine=odirect) avoids it")


def run(cfg, comm, echo, warn, progress=None, output=None, dry_run=False, trace=False, verbose=False):
    """The whole `dlio-fast run` on this rank. Returns the output folder (rank 0) or None.
    trace: write this rank's trace-{rank}-of-{size}.pfw in the output folder (dlio.trace)."""
    spec = loop.dataset_spec(cfg)
    if dry_run:
        lines, _, _ = describe(cfg, spec, comm.size)
        if comm.rank == 0:
            echo(cfg.to_yaml().rstrip())
            echo("---")
            for line in lines:
                echo(line)
        return None
    folder = output_folder(cfg, output, comm)
    prepare_output(folder, comm)
    tracer = None
    if trace:
        from dlio.report.trace import Tracer
        tracer = Tracer(folder, comm.rank, comm.size)
    wf = cfg.workflow
    phases = [name for name, on in (("Generating data", wf.generate_data), ("Training", wf.train),
                                     ("Evaluation", wf.train and wf.evaluation), ("Checkpointing", wf.checkpoint)) if on]
    echo(f"Running dlio-fast [{' & '.join(phases)}] with {comm.size} process(es)")
    needs_data = cfg.workflow.train or cfg.workflow.generate_data
    if cfg.workflow.generate_data or (needs_data and not comm.bcast(data_present(spec))):
        from dlio.report.trace import maybe_phase
        with maybe_phase(tracer, "generate"):
            generate(cfg, spec, comm, echo, progress)
    comm.barrier()
    nbytes = dataset_bytes(spec) if needs_data else 0
    if comm.rank == 0 and cfg.workflow.train:
        cache_warning(spec, nbytes, echo, warn)
    if comm.rank == 0 and cfg.workflow.checkpoint:
        balloon_warning(cfg, warn)
    start = loop.iso_now()
    complete, reason, rank_rec, failure = True, None, None, None
    if cfg.workflow.train:
        try:
            rank_rec = loop.run_training(cfg, comm, echo, progress.training if progress else None,
                                             tracer=tracer, verbose=verbose)
        except (Interrupted, DlioRunError) as e:
            complete, reason, failure = False, str(e), e
            rank_rec = getattr(e, "rank_record", None) or {"rank": comm.rank, "hostname": socket.gethostname(), "epochs": []}
        finally:
            if progress is not None:
                progress.done()
    else:
        rank_rec = {"rank": comm.rank, "hostname": socket.gethostname(), "epochs": []}
    if cfg.is_checkpoint_only():
        try:
            ck = ckpt_io.run_checkpoint_only(cfg, comm, echo)
            rank_rec["checkpoints"] = ck["records"]
            if tracer is not None:   # records carry wall-clock times: map them to the trace clock
                import time as _time
                from dlio import _core
                wall_to_mono = _core.now_ns() - _time.time_ns()
                for c in ck["records"]:
                    tracer.span(f"checkpoint.{c['kind']}", c["wall_start_ns"] + wall_to_mono,
                                c["wall_end_ns"] - c["wall_start_ns"], epoch=c["epoch"], step=c["step"],
                                bytes=c["bytes"])
        except Interrupted as e:
            complete, reason, failure = False, str(e), e
    end = loop.iso_now()
    if tracer is not None:
        tracer.close()
        echo(f"Trace: {tracer.path} ({tracer.events} events"
             f"{f', {tracer.dropped} dropped: buffers full' if tracer.dropped else ''})")
    if failure is not None and comm.size > 1:
        # Another rank may be gone or stuck: no collective operation from here on. Each rank
        # keeps what it measured in its own files; a failed rank's error then aborts the job.
        write_rank_partial(cfg, spec, comm, rank_rec, folder, start, end, reason, nbytes)
        raise failure
    records = comm.gather(rank_rec)
    if comm.rank == 0:
        result = build_result(cfg, spec, comm, records, start, end, complete, reason, nbytes)
        dlio_files.write_all(result, folder, cfg.to_yaml())
        if cfg.dlio_fast.plots:
            from dlio.report import plots
            made = plots.make_all(result, folder, summary=dlio_files.summary(result))
            echo(f"Plots: {', '.join(os.path.basename(p) for p in made)}")
        if any(r["epochs"] or r.get("checkpoints") for r in records):
            for line in dlio_files.metric_lines(result):
                echo(line)
        if any(r["epochs"] for r in records):
            for line in dlio_files.exact_table(result):
                echo(line)
        echo(f"Saved outputs in {folder}{'' if complete else ' (partial: ' + str(reason) + ')'}")
    if failure is not None:
        raise failure
    return folder if comm.rank == 0 else None
