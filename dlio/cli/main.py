"""The command line. Parsing and printing only: the work is in the modules each command calls."""
import os
import sys

import click

import dlio
from dlio.errors import DlioError
from dlio.fsbench.table import IO_COLUMNS, POINT_HEADER, flat_point, point_line
from dlio.units import fmt_size, parse_duration_ns, parse_size


class SizeList(click.ParamType):
    """'4k,1m' -> [4096, 1048576]; repeated options add up."""
    name = "SIZE[,SIZE...]"

    def convert(self, value, param, ctx):
        if isinstance(value, list):
            return value
        try:
            return [parse_size(v) for v in str(value).split(",") if v.strip()]
        except ValueError as e:
            self.fail(str(e), param, ctx)


class IntList(click.ParamType):
    name = "N[,N...]"

    def __init__(self, lo=1, hi=None):
        self.lo, self.hi = lo, hi

    def convert(self, value, param, ctx):
        if isinstance(value, list):
            return value
        out = []
        for v in str(value).split(","):
            v = v.strip()
            if not v:
                continue
            try:
                n = int(v)
            except ValueError:
                self.fail(f"{v!r} is not a whole number", param, ctx)
            if n < self.lo or (self.hi is not None and n > self.hi):
                self.fail(f"{n} is out of range {self.lo}..{self.hi if self.hi else 'inf'}", param, ctx)
            out.append(n)
        return out


class ChoiceList(click.ParamType):
    name = "CHOICE[,CHOICE...]"

    def __init__(self, choices):
        self.choices = choices

    def convert(self, value, param, ctx):
        if isinstance(value, list):
            return value
        out = []
        for v in str(value).split(","):
            v = v.strip()
            if v and v not in self.choices:
                self.fail(f"{v!r} is not one of {', '.join(self.choices)}", param, ctx)
            if v:
                out.append(v)
        return out


class Size(click.ParamType):
    name = "SIZE"

    def convert(self, value, param, ctx):
        try:
            return parse_size(value)
        except ValueError as e:
            self.fail(str(e), param, ctx)


class Duration(click.ParamType):
    name = "DURATION"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        try:
            return parse_duration_ns(value)
        except ValueError as e:
            self.fail(str(e), param, ctx)


def flatten(lists):
    return [x for sub in lists for x in sub]


def err(msg):
    click.echo(msg, err=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(dlio.__version__, prog_name="dlio-fast")
@click.option("--debug", is_flag=True, help="Show Python tracebacks on errors.")
@click.option("-q", "--quiet", is_flag=True, help="No progress output on stderr.")
@click.option("-v", "--verbose", is_flag=True, help="Per-step lines (DLIO's INFO level) after each epoch.")
@click.pass_context
def cli(ctx, debug, quiet, verbose):
    """dlio-fast: deep-learning training I/O emulation and filesystem microbenchmarks."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug
    ctx.obj["quiet"] = quiet
    ctx.obj["verbose"] = verbose


@cli.command()
def engines():
    """List the I/O engines, whether each can run here, and why not."""
    from dlio import _core
    for name, caps, ok, why in _core.engines():
        flags = []
        if caps & _core.CAP_ASYNC:
            flags.append("async")
        if caps & _core.CAP_DIRECT:
            flags.append("O_DIRECT")
        if caps & _core.CAP_WRITE:
            flags.append("write")
        if caps & _core.CAP_NOIO:
            flags.append("no I/O")
        state = "available" if ok else f"unavailable: {why}"
        click.echo(f"{name:<10} {','.join(flags):<24} {state}")


@cli.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("--rw", "rw", multiple=True, type=ChoiceList(["read", "randread", "write", "randwrite"]),
              default=["read"], help="Access pattern(s): read, randread, write, randwrite.")
@click.option("--bs", multiple=True, type=SizeList(), default=["4k"], help="Transfer size(s), 4k..64m.")
@click.option("--engine", multiple=True, type=ChoiceList(["posix", "io_uring", "mmap", "null", "mpiio"]),
              default=["posix"], help="Engine(s): posix, io_uring, mmap, null; or mpiio alone, under mpiexec.")
@click.option("--qd", multiple=True, type=IntList(1, 1024), default=["1"], help="Queue depth(s) per thread.")
@click.option("--threads", multiple=True, type=IntList(1, 1024), default=["1"], help="Thread count(s).")
@click.option("--direct/--buffered", default=False, help="O_DIRECT (page cache bypassed) or buffered.")
@click.option("--file-size", type=Size(), default="256m", show_default=True,
              help="Size of each test file created in a folder (one per thread).")
@click.option("--runtime", type=Duration(), default=None, help="Measured time per point (default 5s).")
@click.option("--size", type=Size(), default=None, help="Bytes per point instead of a runtime.")
@click.option("--ramp", type=Duration(), default="0", help="Warm-up per point, run but not counted.")
@click.option("--cache", type=click.Choice(["keep", "drop"]), default="keep", show_default=True,
              help="drop: posix_fadvise(DONTNEED) each file before each point (and the whole page cache as root).")
@click.option("--fixedbufs", is_flag=True, help="io_uring: registered buffers.")
@click.option("--regfiles", is_flag=True, help="io_uring: registered files.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write results as JSON.")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False), help="Write results as CSV.")
@click.option("--keep", is_flag=True, help="Keep the test files created in the folder.")
@click.option("--layout", multiple=True, type=ChoiceList(["fpp", "segmented", "strided"]), default=["fpp"],
              help="mpiio: file per process, or one shared file in segments or strided (IOR -F / -s).")
@click.option("--collective/--independent", default=False,
              help="mpiio: MPI_File_read_at_all / write_at_all, or read_at / write_at (default).")
@click.option("--reorder", is_flag=True, help="mpiio: each rank reads what another rank wrote (IOR -C).")
@click.option("--mpiio-hint", "mpiio_hints", multiple=True, metavar="KEY=VALUE",
              help="mpiio: an MPI-IO hint for MPI_File_open, e.g. romio_cb_read=enable (repeatable).")
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False),
              help="Write every request as a span (Chrome-trace / DFTracer .pfw, opens in Perfetto).")
@click.pass_context
def io(ctx, paths, rw, bs, engine, qd, threads, direct, file_size, runtime, size, ramp, cache,
       fixedbufs, regfiles, json_path, csv_path, keep, layout, collective, reorder, mpiio_hints, trace_path):
    """Microbenchmark a grid of transfer size x pattern x engine x queue depth x threads on PATH.

    PATH is a folder (test files are created in it, fully written, and removed afterwards unless
    --keep) or one or more existing files (read as they are).
    """
    from dlio.fsbench import points
    from dlio.fsbench import testfiles
    from dlio import output
    from dlio._core import ENG_REGBUFS, ENG_REGFILES
    rws, bss, engs = flatten(rw), flatten(bs), flatten(engine)
    qds, thrs = flatten(qd), flatten(threads)
    for b in bss:
        if b < 512 or b > 64 << 20:
            raise DlioError(f"--bs {fmt_size(b)}: transfer size must be between 512 bytes and 64 MiB")
    if runtime is not None and size is not None:
        raise DlioError("give --runtime or --size, not both")
    if "mpiio" in engs:
        # IOR-style points under mpiexec (dlio/ior.py): a fixed amount of work unless --runtime.
        if engs != ["mpiio"] or direct or flatten(qd) != [1]:
            raise DlioError("--engine mpiio runs alone, buffered, at queue depth 1 (one MPI call at a time)")
        from dlio.fsbench import ior
        for p in (json_path, csv_path):
            if p:
                __import__("dlio.output", fromlist=["x"]).check_output_path(p)
        ior.main(list(paths), rws, bss, flatten(layout), collective, reorder, mpiio_hints, thrs,
                 file_size, runtime or 0, ramp, size or 0, cache, json_path, csv_path, keep, click.echo)
        return
    if runtime is None and size is None:
        runtime = 5_000_000_000
    budget = points.Budget(runtime_ns=runtime or 0, ramp_ns=ramp, size=size or 0)
    for e in engs:
        points.check_engine(e, direct)
    writes = any(r in ("write", "randwrite") for r in rws)
    for p in (json_path, csv_path, trace_path):
        if p:
            output.check_output_path(p)
    if direct:
        points.check_direct(paths[0])
    if writes and not (len(paths) == 1 and os.path.isdir(paths[0])):
        raise DlioError("write tests run only on files dlio-fast creates: give a folder, not files")
    fileset = testfiles.prepare(list(paths), max(thrs), file_size)
    flags = (ENG_REGBUFS if fixedbufs else 0) | (ENG_REGFILES if regfiles else 0)
    from dlio.progress import Progress
    progress = None if ctx.obj["quiet"] else Progress()
    tracer = None
    if trace_path:
        from dlio.report.trace import Tracer
        tracer = Tracer(None, path=trace_path, thread_names=lambda tid: f"worker {tid}")
    records = []
    doc = {"schema": "dlio-fast.io/1", "environment": output.environment(),
           "paths": list(paths), "files": fileset.paths, "complete": False, "points": records}
    click.echo(POINT_HEADER)
    try:
        for r in rws:
            for b in bss:
                for e in engs:
                    for q in qds:
                        for t in thrs:
                            pt = points.Point(r, b, e, q, t, direct)
                            tick = progress.io_point(pt, budget) if progress else None
                            rec = points.run_point(pt, fileset, budget, cache, on_tick=tick, eng_flags=flags,
                                                    tracer=tracer)
                            if progress:
                                progress.done()
                            records.append(rec)
                            click.echo(point_line(rec))
        doc["complete"] = True
    finally:
        if json_path:
            output.write_json(json_path, doc)
        if csv_path:
            output.write_csv(csv_path, [flat_point(r) for r in records], IO_COLUMNS)
        if not keep:
            fileset.cleanup()
        if tracer is not None:
            tracer.close()


@cli.command()
@click.argument("path")
@click.option("--runtime", type=Duration(), default="2s", show_default=True, help="Measured time per probe.")
@click.option("--file-size", type=Size(), default="512m", show_default=True, help="Size of each test file.")
@click.option("--max-threads", type=click.IntRange(1, 256), default=None, help="Upper bound of the thread search (default: CPUs).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write results as JSON.")
@click.option("--keep", is_flag=True, help="Keep the test files.")
@click.pass_context
def ceiling(ctx, path, runtime, file_size, max_threads, json_path, keep):
    """Find the best sequential read/write bandwidth and 4 KiB random-read IOPS of PATH's filesystem."""
    from dlio.fsbench import ceiling as ceil_mod
    from dlio import output
    if json_path:
        output.check_output_path(json_path)
    ceil_mod.run(path, runtime, file_size, max_threads or os.cpu_count() or 1, json_path, keep,
                 echo=click.echo)


def _load(workload_name, config_file, sets, overrides, scale, extra=()):
    from dlio.config import load_config
    return load_config(workload=workload_name, config_file=config_file, sets=list(extra) + list(sets),
                       dlio_overrides=list(overrides), scale=scale)


def workload_options(f):
    f = click.option("--scale", type=float, default=None,
                     help="Shrink (or grow) the dataset: number of files x F, same sample size, batch and compute.")(f)
    f = click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
                     help="Override a config key, e.g. --set dataset.num_files_train=16 (repeatable).")(f)
    f = click.option("--config", "config_file", type=click.Path(dir_okay=False),
                     help="A DLIO workload YAML file.")(f)
    f = click.option("--workload", "-w", "workload_name", help="A built-in workload (dlio-fast workloads).")(f)
    f = click.argument("overrides", nargs=-1)(f)
    return f


@cli.command(context_settings={"ignore_unknown_options": True})
@workload_options
@click.option("--output", "-o", type=click.Path(file_okay=False), help="Output folder (default output/{workload}/{time}).")
@click.option("--engine", type=click.Choice(["posix", "odirect", "io_uring", "mmap", "null"]), default=None,
              help="I/O engine of the readers (default posix, what framework readers use).")
@click.option("--qd", type=click.IntRange(1, 1024), default=None, help="Reads in flight per reader thread.")
@click.option("--cache", type=click.Choice(["keep", "drop"]), default=None,
              help="drop: drop the dataset's cached pages before each epoch.")
@click.option("--plots", is_flag=True, default=None, help="Write PNG plots into the output folder.")
@click.option("--skip-bad-files", is_flag=True, default=None,
              help="Leave out missing / unreadable / changed files (counted in the results) instead of stopping.")
@click.option("--dry-run", is_flag=True, help="Print the resolved config and the dataset plan; touch nothing.")
@click.option("--trace", is_flag=True,
              help="Write trace-{rank}-of-{size}.pfw (DFTracer / Perfetto JSON lines: every read, fetch, compute) in the output folder.")
@click.pass_context
def run(ctx, overrides, workload_name, config_file, sets, scale, output, engine, qd, cache, plots, skip_bad_files, dry_run,
        trace):
    """Emulate a training workload: generate the data if missing, train, report (DLIO-compatible).

    OVERRIDES in DLIO's spelling are accepted too: ++workload.dataset.num_files_train=16
    """
    from dlio import mpi
    from dlio.train import session
    from dlio.progress import Progress
    extra = [f"dlio_fast.{k}={v}" for k, v in (("engine", engine), ("qd", qd), ("cache", cache),
                                               ("skip_bad_files", skip_bad_files), ("plots", plots))
             if v is not None]
    if workload_name is None and config_file is None and not any("workload=" in o for o in overrides):
        raise DlioError("say which workload: --workload NAME (see dlio-fast workloads) or --config FILE.yaml")
    cfg = _load(workload_name, config_file, sets, overrides, scale, extra)
    comm = mpi.world()
    quiet = ctx.obj["quiet"]
    progress = Progress() if comm.rank == 0 and not quiet else None
    echo = click.echo if comm.rank == 0 else (lambda *a, **k: None)
    session.run(cfg, comm, echo, err, progress, output, dry_run, trace=trace, verbose=ctx.obj["verbose"])


@cli.command(context_settings={"ignore_unknown_options": True})
@workload_options
@click.option("--threads", type=click.IntRange(1, 256), default=None, help="Writer threads per rank (default: CPUs).")
@click.option("--checksum", is_flag=True, help="Record CRC32C of every file and sample (for dlio-fast verify).")
@click.pass_context
def generate(ctx, overrides, workload_name, config_file, sets, scale, threads, checksum):
    """Generate a workload's dataset (DLIO's layout and formats); complete files are kept."""
    from dlio import mpi
    from dlio.train import session
    from dlio.train import loop
    from dlio.progress import Progress
    if workload_name is None and config_file is None and not any("workload=" in o for o in overrides):
        raise DlioError("say which workload: --workload NAME (see dlio-fast workloads) or --config FILE.yaml")
    cfg = _load(workload_name, config_file, sets, overrides, scale)
    comm = mpi.world()
    progress = Progress() if comm.rank == 0 and not ctx.obj["quiet"] else None
    echo = click.echo if comm.rank == 0 else (lambda *a, **k: None)
    session.generate(cfg, loop.dataset_spec(cfg), comm, echo, progress, threads, checksum=checksum)


@cli.command(context_settings={"ignore_unknown_options": True})
@click.option("--data", "data_folder", type=click.Path(file_okay=False), default=None,
              help="The dataset folder (default: the workload's dataset.data_folder).")
@workload_options
def verify(data_folder, overrides, workload_name, config_file, sets, scale):
    """Check a dataset against its format (and its checksums when generated with --checksum)."""
    from dlio.dataset import verify as verify_mod
    from dlio.train import loop
    if workload_name is None and config_file is None and not any("workload=" in o for o in overrides):
        raise DlioError("say which workload the data belongs to: --workload NAME or --config FILE.yaml")
    extra = [f"dataset.data_folder={data_folder}"] if data_folder else []
    cfg = _load(workload_name, config_file, sets, overrides, scale, extra)
    spec = loop.dataset_spec(cfg)
    if not os.path.isdir(spec.data_folder):
        raise DlioError(f"{spec.data_folder}: no such dataset folder")
    checked, problems = verify_mod.verify(spec)
    for path, what in problems:
        click.echo(f"BAD  {path}: {what}")
    sums = "with content checksums" if verify_mod.has_checksums(spec) else "no checksums recorded"
    click.echo(f"{checked} files checked ({spec.format}, {sums}): {len(problems)} bad")
    if problems:
        sys.exit(1)


@cli.group(invoke_without_command=True)
@click.pass_context
def workloads(ctx):
    """List the built-in workloads (format, files, sample size, dataset size, batch, compute)."""
    if ctx.invoked_subcommand is not None:
        return
    from dlio.dataset.spec import dataset_bytes
    from dlio.train import loop
    from dlio.config import load_config
    from dlio.config.workloads import list_workloads
    click.echo(f"{'workload':<20} {'format':<20} {'files':>9} {'spf':>9} {'sample':>10} {'dataset':>10} "
               f"{'batch':>6} {'compute s':>10}")
    for name in list_workloads():
        cfg = load_config(workload=name, env={})
        d = cfg.dataset
        if cfg.is_checkpoint_only():
            click.echo(f"{name:<20} {'(checkpoint only)':<20}")
            continue
        size = dataset_bytes(loop.dataset_spec(cfg))
        click.echo(f"{name:<20} {d.format:<20} {d.num_files_train:>9} {d.num_samples_per_file:>9} "
                   f"{_human(cfg.record_bytes()):>10} {_human(size):>10} {cfg.reader.batch_size:>6} "
                   f"{cfg.train.computation_time.mean():>10.4g}")


def _human(n):
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.0f}{unit}" if unit == "B" else f"{n:.1f}{unit}"
        n /= 1024


@workloads.command("show")
@click.argument("name")
def workloads_show(name):
    """Print a built-in workload's YAML."""
    from dlio.config.workloads import list_workloads, workload_text
    if name not in list_workloads():
        import difflib
        near = difflib.get_close_matches(name, list_workloads(), n=1)
        raise DlioError(f"unknown workload {name!r}" + (f"; did you mean {near[0]}?" if near else ""))
    click.echo(workload_text(name).rstrip())


def _register_report_commands():
    from dlio.cli.report import check, report
    cli.add_command(report)
    cli.add_command(check)


_register_report_commands()
cli.add_command(__import__("dlio.cli.profile", fromlist=["profile"]).profile)


def _rank_and_size():
    from dlio import mpi
    w = mpi._WORLD
    return (w.rank, w.size, w) if w is not None else (0, 1, None)


# How long the ranks of an interrupted job wait for each other before leaving without MPI_Finalize.
INTERRUPTED_WAIT_S = 5.0


def _fail(message, code, rank_specific=False, interrupted=False):
    """Print an error once and exit. Under MPI: an error every rank hits (bad config) is printed by
    rank 0 only; an error of one rank (its file, its I/O) is printed by that rank, which then aborts
    the job so that the other ranks do not wait for it forever. An interrupted rank (its partial
    results written) waits a few seconds for the others, then leaves: MPI_Finalize would wait
    forever for a rank that hangs."""
    rank, size, world = _rank_and_size()
    if size > 1 and rank_specific:
        err(f"dlio-fast: rank {rank}: {message}")
        sys.stderr.flush()
        world.abort(code)
    if rank == 0:
        err(f"dlio-fast: {message}")
    if size > 1 and interrupted and not world.all_arrive(INTERRUPTED_WAIT_S):
        if rank == 0:
            err(f"dlio-fast: not every rank stopped within {INTERRUPTED_WAIT_S:.0f} s; leaving without them")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def main(argv=None):
    """Entry point: bad input is one line on stderr and exit 2, never a traceback (unless --debug)."""
    from dlio.errors import DlioRunError, Interrupted, os_error_message
    args = sys.argv[1:] if argv is None else argv
    debug = "--debug" in args
    try:
        rc = cli.main(args=args, prog_name="dlio-fast", standalone_mode=False)
        if isinstance(rc, int) and rc:
            sys.exit(rc)
    except click.exceptions.Abort:
        _fail("aborted", 130)
    except click.ClickException as e:
        # one line, no usage block: the message names the option and the value
        cmd = e.ctx.command_path.split(" ", 1)[1] + ": " if getattr(e, "ctx", None) and " " in e.ctx.command_path else ""
        _fail(f"{cmd}error: {e.format_message()}", e.exit_code)
    except Interrupted as e:
        _fail(f"{e}; the results measured so far were written (marked incomplete)", 128 + e.signum,
              interrupted=True)
    except DlioError as e:
        if debug:
            raise
        _fail(f"error: {e}", e.exit_code, rank_specific=isinstance(e, DlioRunError))
    except OSError as e:
        if debug:
            raise
        _fail(f"error: {os_error_message(e)}", 1, rank_specific=True)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)


if __name__ == "__main__":
    main()
