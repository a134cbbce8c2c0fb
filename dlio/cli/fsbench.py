"""`dlio-fast engines`, `io` and `ceiling`: the filesystem microbenchmarks' commands."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, FrozenSet, Optional, Tuple

import click

from dlio.cli.fio_names import FioNamesCommand
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
from dlio.fsbench.request import RW_ALIASES, RW_MODES, CeilingRequest, IoRequest

if TYPE_CHECKING:
    from dlio.fsbench.request import Console


@click.command(epilog=examples("dlio-fast engines", "mpiexec -n 1 dlio-fast engines   # with the MPI-IO engine"))
@console_options
def engines() -> None:
    """List the I/O engines, whether each can run here, and why not."""
    from dlio import _core
    from dlio.system import mpi

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


def s3_options(f: Callable) -> Callable:
    """--timeout / --create-bucket: an object store's deadline and its bucket (s3:// paths only)."""
    f = click.option(
        "--create-bucket",
        is_flag=True,
        help="s3:// paths: create the bucket when it does not exist.",
    )(f)
    return click.option(
        "--timeout",
        type=Duration(),
        default=None,
        help="s3:// paths: how long the server may go without answering (each request's deadline; a worker "
        "with no reply for this long is stopped and the points measured so far are kept).  [default: 60s]",
    )(f)


@click.command(
    cls=FioNamesCommand,
    epilog=examples(
        "dlio-fast io /scratch               # 4 KiB reads, posix, qd 1, 1 thread, one pass, pages dropped first",
        "dlio-fast io /scratch --rw read,randread --bs 4k,1m --engine posix,io_uring --qd 1,32 --json g.json",
        "dlio-fast io /scratch --rw write --bs 1m --threads 1,2,4 --size 1g --csv - > w.csv",
        "dlio-fast io /scratch --direct --runtime 10s --engine io_uring --qd 32   # O_DIRECT, 10 s per point",
        "dlio-fast io /scratch --cache keep --runtime 5s          # the page cache, on purpose",
        "dlio-fast io /scratch --rw randrw --rwmixread 70 --direct --engine io_uring --qd 16 --runtime 10s",
        "mpiexec -n 4 dlio-fast io /scratch --engine mpiio --layout segmented --collective",
    ),
)
@click.argument("paths", nargs=-1, required=True)
@click.option(
    "--rw",
    "rw",
    multiple=True,
    type=ChoiceList(RW_MODES, RW_ALIASES),
    default=["read"],
    show_default=True,
    help=f"Access pattern(s): {', '.join(RW_MODES)} (readwrite and randrw mix reads and writes, as fio's).",
)
@click.option(
    "--rwmixread",
    type=click.IntRange(0, 100),
    default=50,
    show_default=True,
    help="readwrite / randrw: the share of requests that read, in % (fio's rwmixread).",
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
@s3_options
@progress_options
@console_options
@click.pass_context
def io(ctx: click.Context, paths: Tuple[str, ...], **options: Any) -> None:
    """Microbenchmark a grid of transfer size x pattern x engine x queue depth x threads on PATH.

    PATH is a folder (test files are created in it, fully written, and removed afterwards unless
    --keep) or one or more existing files (read as they are), or s3://BUCKET/PREFIX: GET (read),
    PUT (write) and range-GET (randread) points on test objects created under the prefix.
    """
    from dlio.fsbench.backends import io_backend

    values = {IO_FIELDS.get(k, k): flatten(v) if k in LIST_OPTIONS else v for k, v in options.items()}
    req = IoRequest.from_options(paths, _given(ctx, options, IO_FIELDS), **values)
    backend = io_backend(req.paths, req.engines)
    backend.check_io(req)
    backend.run_io(req, _console(ctx, req.json_path, req.csv_path))


# click's parameter names -> IoRequest's fields, where they differ; the options given as lists
IO_FIELDS = {
    "rw": "rws",
    "bs": "bss",
    "engine": "engines",
    "qd": "qds",
    "runtime": "runtime_ns",
    "ramp": "ramp_ns",
    "layout": "layouts",
    "timeout": "timeout_ns",
}
LIST_OPTIONS = ("rw", "bs", "engine", "qd", "threads", "layout")


def _given(ctx: click.Context, options: Dict[str, Any], fields: Dict[str, str]) -> FrozenSet[str]:
    """The request fields whose options the user typed (not click's defaults)."""
    from click.core import ParameterSource

    return frozenset(
        fields.get(k, k) for k in options if ctx.get_parameter_source(k) not in (ParameterSource.DEFAULT, None)
    )


def _console(ctx: click.Context, *dests: Optional[str]) -> Console:
    """The table's echo (stderr when a document goes to stdout), warnings, and the live display."""
    from dlio.fsbench.request import Console

    warn = lambda m: click.echo(m, err=True)  # noqa: E731
    return Console(table=_table_echo(*dests), warn=warn, progress=make_progress(ctx))


def _table_echo(*dests: Optional[str]) -> Callable[[str], None]:
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
@s3_options
@progress_options
@console_options
@click.pass_context
def ceiling(ctx: click.Context, path: str, **options: Any) -> None:
    """Find the best sequential read/write bandwidth and 4 KiB random-read IOPS of PATH's filesystem,
    or an object store's GET/PUT bandwidth and small-object GETs per second (s3://BUCKET/PREFIX)."""
    from dlio.fsbench.backends import io_backend

    fields = {"runtime": "runtime_ns", "timeout": "timeout_ns"}
    values = {fields.get(k, k): v for k, v in options.items()}
    req = CeilingRequest(path=path, given=_given(ctx, options, fields), **values)
    backend = io_backend([path])
    backend.check_ceiling(req)
    backend.run_ceiling(req, _console(ctx, req.json_path))
