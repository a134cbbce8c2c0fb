"""`dlio-fast engines`, `io` and `ceiling`: the filesystem microbenchmarks' commands."""

from __future__ import annotations

import os

import click

from dlio.cli.params import (
    ChoiceList,
    Duration,
    IntList,
    Size,
    SizeList,
    console_options,
    examples,
    flatten,
    make_progress,
    progress_options,
)
from dlio.config.engines import IO_ENGINES, MPIIO
from dlio.errors import DlioError
from dlio.fsbench.points import RW_MODES
from dlio.units import fmt_size


@click.command(epilog=examples("dlio-fast engines", "mpiexec -n 1 dlio-fast engines   # with the MPI-IO engine"))
@console_options
def engines() -> None:
    """List the I/O engines, whether each can run here, and why not."""
    from dlio import _core, mpi

    mpi.world()  # under mpiexec, MPI is initialised here: the MPI-IO engine is then available
    for name, caps, ok, why in _core.engines():
        flags = [
            word
            for bit, word in (
                (_core.CAP_ASYNC, "async"),
                (_core.CAP_DIRECT, "O_DIRECT"),
                (_core.CAP_WRITE, "write"),
                (_core.CAP_NOIO, "no I/O"),
            )
            if caps & bit
        ]
        state = "available" if ok else f"unavailable: {why}"
        click.echo(f"{name:<10} {','.join(flags):<24} {state}")


@click.command(
    epilog=examples(
        "dlio-fast io /scratch               # 4 KiB reads, posix, qd 1, 1 thread, one pass, pages dropped first",
        "dlio-fast io /scratch --rw read,randread --bs 4k,1m --engine posix,io_uring --qd 1,32 --json g.json",
        "dlio-fast io /scratch --rw write --bs 1m --threads 1,2,4 --size 1g --csv - > w.csv",
        "dlio-fast io /scratch --direct --runtime 10s --engine io_uring --qd 32   # O_DIRECT, 10 s per point",
        "dlio-fast io /scratch --cache keep --runtime 5s          # the page cache, on purpose",
        "mpiexec -n 4 dlio-fast io /scratch --engine mpiio --layout segmented --collective",
    )
)
@click.argument("paths", nargs=-1, required=True)
@click.option(
    "--rw",
    "rw",
    multiple=True,
    type=ChoiceList(RW_MODES),
    default=["read"],
    show_default=True,
    help=f"Access pattern(s): {', '.join(RW_MODES)}.",
)
@click.option(
    "--bs", multiple=True, type=SizeList(), default=["4k"], show_default=True, help="Transfer size(s), 512..64m."
)
@click.option(
    "--engine",
    multiple=True,
    type=ChoiceList(IO_ENGINES),
    default=["posix"],
    show_default=True,
    help=f"Engine(s): {', '.join(e for e in IO_ENGINES if e != MPIIO)}; or {MPIIO} alone, under mpiexec.",
)
@click.option(
    "--qd", multiple=True, type=IntList(1, 1024), default=["1"], show_default=True, help="Queue depth(s) per thread."
)
@click.option(
    "--threads", multiple=True, type=IntList(1, 1024), default=["1"], show_default=True, help="Thread count(s)."
)
@click.option(
    "--direct/--buffered",
    default=None,
    help="O_DIRECT (page cache bypassed) or buffered (the default, as fio's: with --cache drop, "
    "each file's pages are dropped before each point).",
)
@click.option(
    "--file-size",
    type=Size(),
    default="256m",
    show_default=True,
    help="Size of each test file created in a folder (one per thread).",
)
@click.option(
    "--runtime",
    type=Duration(),
    default=None,
    help="Measured time per point, the files read over and over (default: one pass over the files, "
    "as fio's default: nothing is read twice).",
)
@click.option("--size", type=Size(), default=None, help="Bytes per point instead of one pass or a runtime.")
@click.option("--ramp", type=Duration(), default="0", help="Warm-up per point, run but not counted.")
@click.option(
    "--cache",
    type=click.Choice(["keep", "drop", "drop-all"]),
    default=None,
    help="Buffered points: drop (default) each file's pages before each point (no root needed); "
    "keep: measure the page cache; drop-all: the whole host's page cache (root).",
)
@click.option("--fixedbufs", is_flag=True, help="io_uring: registered buffers.")
@click.option("--regfiles", is_flag=True, help="io_uring: registered files.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write results as JSON ('-' for stdout).")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False), help="Write results as CSV ('-' for stdout).")
@click.option("--keep", is_flag=True, help="Keep the test files created in the folder.")
@click.option(
    "--layout",
    multiple=True,
    type=ChoiceList(["fpp", "segmented", "strided"]),
    default=["fpp"],
    help="mpiio: file per process, or one shared file in segments or strided (IOR -F / -s).",
)
@click.option(
    "--collective/--independent",
    default=False,
    help="mpiio: MPI_File_read_at_all / write_at_all, or read_at / write_at (default).",
)
@click.option("--reorder", is_flag=True, help="mpiio: each rank reads what another rank wrote (IOR -C).")
@click.option(
    "--mpiio-hint",
    "mpiio_hints",
    multiple=True,
    metavar="KEY=VALUE",
    help="mpiio: an MPI-IO hint for MPI_File_open, e.g. romio_cb_read=enable (repeatable).",
)
@click.option(
    "--trace",
    "trace_path",
    type=click.Path(dir_okay=False),
    help="Write every request as a span to FILE: DFTracer .pfw (JSON lines, one event per line; "
    "gzip when FILE ends in .gz); opens in Perfetto.",
)
@click.option("--endpoint", help="s3:// paths: the S3 endpoint URL (default: AWS_ENDPOINT_URL).")
@progress_options
@console_options
@click.pass_context
def io(
    ctx: click.Context,
    paths,
    rw,
    bs,
    engine,
    qd,
    threads,
    direct,
    file_size,
    runtime,
    size,
    ramp,
    cache,
    fixedbufs,
    regfiles,
    json_path,
    csv_path,
    keep,
    layout,
    collective,
    reorder,
    mpiio_hints,
    trace_path,
    endpoint,
) -> None:
    """Microbenchmark a grid of transfer size x pattern x engine x queue depth x threads on PATH.

    PATH is a folder (test files are created in it, fully written, and removed afterwards unless
    --keep) or one or more existing files (read as they are), or s3://BUCKET/PREFIX: GET (read),
    PUT (write) and range-GET (randread) points on test objects created under the prefix.
    """
    if json_path == "-" and csv_path == "-":
        raise DlioError("--json - and --csv -: only one of them can write to stdout")
    table_echo = _table_echo(json_path, csv_path)
    if any(p.startswith("s3://") for p in paths):
        from dlio.fsbench.s3_io import refuse_file_options, run_io

        refuse_file_options(
            engine=flatten(engine) != ["posix"],
            direct=bool(direct),
            fixedbufs=fixedbufs,
            regfiles=regfiles,
            layout=flatten(layout) != ["fpp"],
            collective=collective,
            reorder=reorder,
            mpiio_hint=bool(mpiio_hints),
            trace=bool(trace_path),
        )
        return run_io(
            list(paths),
            flatten(rw),
            flatten(bs),
            flatten(qd),
            flatten(threads),
            file_size,
            runtime,
            size,
            ramp,
            cache,
            endpoint,
            json_path,
            csv_path,
            keep,
            table_echo,
        )
    if endpoint:
        raise DlioError("--endpoint is for s3:// paths only")
    from dlio.fsbench import grid, ior, points
    from dlio.fsbench.grid import Sinks

    rws, bss, engs, qds, thrs = flatten(rw), flatten(bs), flatten(engine), flatten(qd), flatten(threads)
    for b in bss:
        if b < 512 or b > 64 << 20:
            raise DlioError(f"--bs {fmt_size(b)}: transfer size must be between 512 bytes and 64 MiB")
    if runtime is not None and size is not None:
        raise DlioError("give --runtime or --size, not both")
    sinks = Sinks(json_path, csv_path)
    sinks.check()
    if MPIIO in engs:
        # IOR-style points under mpiexec: a fixed amount of work unless --runtime.
        if engs != [MPIIO] or direct or qds != [1]:
            raise DlioError("--engine mpiio runs alone, buffered, at queue depth 1 (one MPI call at a time)")
        ior.main(
            list(paths),
            rws,
            bss,
            flatten(layout),
            collective,
            reorder,
            mpiio_hints,
            thrs,
            file_size,
            runtime or 0,
            ramp,
            size or 0,
            cache or "drop",
            json_path,
            csv_path,
            keep,
            table_echo,
        )
        return
    if trace_path:
        from dlio import output

        output.check_output_path(trace_path)
    # Neither --runtime nor --size: one pass over the files (Budget of zeros), so a buffered point
    # reads each byte once, after its pages were dropped: no pass is served by the page cache.
    spec = grid.Grid(
        rws,
        bss,
        engs,
        qds,
        thrs,
        direct,
        cache,
        fixedbufs,
        regfiles,
        points.Budget(runtime_ns=runtime or 0, ramp_ns=ramp, size=size or 0),
    )
    progress = make_progress(ctx)
    to_err = table_echo is not click.echo
    echo = (lambda m: progress.echo(m, err=to_err)) if progress else table_echo
    grid.run_local(
        list(paths),
        spec,
        sinks,
        file_size,
        keep,
        trace_path,
        progress,
        echo,
        lambda m: (progress.echo if progress else click.echo)(m, err=True),
    )


def _table_echo(*dests):
    """Where the console table goes: stdout, or stderr when a result document is written to stdout ('-')."""
    return (lambda m: click.echo(m, err=True)) if "-" in dests else click.echo


@click.command(
    epilog=examples(
        "dlio-fast ceiling /scratch",
        "dlio-fast ceiling /scratch --max-threads 16 --runtime 5s --json ceiling.json",
        "dlio-fast ceiling s3://bucket/bench --endpoint http://rgw:8080   # GET/PUT MiB/s and GETs/s",
    )
)
@click.argument("path")
@click.option("--runtime", type=Duration(), default="2s", show_default=True, help="Measured time per probe.")
@click.option("--file-size", type=Size(), default=None, help="Size of each test file.  [default: 512m]")
@click.option(
    "--object-size",
    type=Size(),
    default=None,
    help="s3:// paths: object size of the GET and PUT bandwidth targets.  [default: 16m]",
)
@click.option(
    "--max-threads", type=click.IntRange(1, 256), default=None, help="Upper bound of the thread search (default: CPUs)."
)
@click.option(
    "--max-qd",
    type=click.IntRange(1, 1024),
    default=None,
    help="Upper bound of the queue-depth search (files: 256; s3://: requests in flight per thread, 64).",
)
@click.option("--endpoint", help="s3:// paths: the S3 endpoint URL (default: AWS_ENDPOINT_URL).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write results as JSON ('-' for stdout).")
@click.option("--keep", is_flag=True, help="Keep the test files (objects).")
@console_options
def ceiling(path, runtime, file_size, object_size, max_threads, max_qd, endpoint, json_path, keep) -> None:
    """Find the best sequential read/write bandwidth and 4 KiB random-read IOPS of PATH's filesystem,
    or an object store's GET/PUT bandwidth and small-object GETs per second (s3://BUCKET/PREFIX)."""
    from dlio import output

    threads = max_threads or os.cpu_count() or 1
    if path.startswith("s3://"):
        from dlio.fsbench import s3_ceiling

        if file_size is not None:
            raise DlioError("--file-size is for filesystem paths; on s3:// give --object-size")
        s3_ceiling.run(
            path,
            runtime,
            object_size or 16 << 20,
            threads,
            max_qd or s3_ceiling.MAX_QD,
            endpoint,
            json_path,
            keep,
            echo=_table_echo(json_path),
        )
        return
    from dlio.fsbench import ceiling as ceiling_search

    for flag, given in (("--object-size", object_size), ("--endpoint", endpoint)):
        if given is not None:
            raise DlioError(f"{flag} is for s3:// paths only")
    if json_path:
        output.check_output_path(json_path)
    ceiling_search.run(
        path,
        runtime,
        file_size or 512 << 20,
        threads,
        json_path,
        keep,
        echo=_table_echo(json_path),
        warn=lambda m: click.echo(m, err=True),
        max_qd=max_qd or ceiling_search.MAX_QD,
    )
