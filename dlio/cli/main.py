"""The command line's root: the `dlio-fast` group, its global options, the commands registered on it,
and main(), which turns every error into one line and an exit status."""

import atexit
import errno
import os
import signal
import sys
import threading
from typing import Callable, List, NoReturn, Optional, Tuple

import click

from dlio.base.errors import DlioError, DlioRunError, Interrupted, os_error_message
from dlio.cli import fsbench, mlperf, profile, report, train, version
from dlio.system import mpi


def err(msg: str) -> None:
    click.echo(msg, err=True)


@click.group(
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=(
        "\b\nExamples:\n"
        "  dlio-fast workloads                         # what can be emulated\n"
        "  dlio-fast run --workload unet3d --scale 0.01\n"
        "  dlio-fast io /scratch --bs 4k,1m --engine posix,io_uring --qd 1,32\n"
        "  dlio-fast report runA runB\n"
        "  dlio-fast COMMAND --help                    # each command's options and examples\n"
        '\b\nShell completion (bash; zsh and fish alike): eval "$(_DLIO_FAST_COMPLETE=bash_source dlio-fast)"'
    ),
)
@version.version_option()
@click.option("--debug", is_flag=True, help="Show Python tracebacks on errors.")
@click.option("-q", "--quiet", is_flag=True, help="No progress output on stderr.")
@click.option("-v", "--verbose", is_flag=True, help="Per-step lines (DLIO's INFO level) after each epoch.")
@click.pass_context
def cli(ctx: click.Context, debug: bool, quiet: bool, verbose: bool) -> None:
    """dlio-fast: deep-learning training I/O emulation and filesystem microbenchmarks."""
    obj = ctx.ensure_object(dict)
    obj["debug"] = debug
    obj["quiet"] = obj.get("quiet") or quiet
    obj["verbose"] = obj.get("verbose") or verbose


for command in (
    train.run,
    train.generate,
    train.verify,
    train.workloads,
    fsbench.engines,
    fsbench.io,
    fsbench.ceiling,
    report.report,
    report.check,
    mlperf.datasize,
    mlperf.maxacc,
    profile.profile,
):
    cli.add_command(command)


def _rank_and_size() -> Tuple[int, int, Optional[mpi.Comm]]:
    w = mpi.current_world()
    return (w.rank, w.size, w) if w is not None else (0, 1, None)


# How long the ranks of an interrupted job wait for each other before leaving without MPI_Finalize.
INTERRUPTED_WAIT_S = 5.0


def _fail(message: str, code: int, rank_specific: bool = False, interrupted: bool = False) -> NoReturn:
    """Print an error once and exit. Under MPI: an error every rank hits (bad config) is printed by
    rank 0 only; an error of one rank (its file, its I/O) is printed by that rank, which then aborts
    the job so that the other ranks do not wait for it forever. An interrupted rank (its partial
    results written) waits a few seconds for the others, then leaves: MPI_Finalize would wait
    forever for a rank that hangs."""
    rank, size, world = _rank_and_size()
    if size > 1 and rank_specific and world is not None:  # (a world whenever size > 1)
        err(f"dlio-fast: rank {rank}: {message}")
        sys.stderr.flush()
        world.all_arrive(INTERRUPTED_WAIT_S)  # the others, told, write what they measured first
        world.abort(code)
    if rank == 0:
        err(f"dlio-fast: {message}")
    if size > 1 and interrupted and world is not None and not world.all_arrive(INTERRUPTED_WAIT_S):
        if rank == 0:
            err(f"dlio-fast: not every rank stopped within {INTERRUPTED_WAIT_S:.0f} s; leaving without them")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    if interrupted and _WHOLE_PROCESS:
        # The results are written: a further Ctrl-C / SIGTERM while the interpreter shuts down (it
        # resets Python handlers to the defaults then, but keeps SIG_IGN) would turn exit 128+n
        # into death by signal.
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, signal.SIG_IGN)
        _leave(code)
    sys.exit(code)


def _leave(code: int) -> None:
    """A stopped run's process ends as soon as its results are written: the exit handlers run (MPI's
    finalize among them), the streams are flushed, and the interpreter's teardown is skipped. That teardown
    (garbage collections over every module) took 0.3-0.5 s of CPU, and a busy host's CPUs stretch it past the
    second a stop may take. Not under MPI (mpi4py finalizes MPI in the interpreter's teardown, and a rank that
    leaves without MPI_Finalize is an error to the launcher), nor while a thread of ours that is not a daemon
    still runs (a checkpoint being written): sys.exit waits for it."""
    if "mpi4py.MPI" in sys.modules:
        return
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        return
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


_WHOLE_PROCESS = False  # main() runs the process (python -m dlio), not an in-process call


def main(argv: Optional[List[str]] = None, rewrite: Optional[Callable[[str], str]] = None) -> None:
    """Entry point: bad input is one line on stderr and exit 2, never a traceback (unless --debug).
    rewrite(text): what every console line goes through (dlio_benchmark: its grammar, dlio.cli.grammar)."""
    args = sys.argv[1:] if argv is None else argv
    debug = "--debug" in args
    global _WHOLE_PROCESS
    _WHOLE_PROCESS = argv is None
    if _WHOLE_PROCESS:  # a reader that closes stdout (`| head`) costs its lines, not the run
        from dlio.cli.stdout import guard_stdout

        guard_stdout()
    streams = sys.stdout, sys.stderr
    if rewrite is not None:
        from dlio.cli.grammar import Rewriting

        sys.stdout, sys.stderr = Rewriting(sys.stdout, rewrite), Rewriting(sys.stderr, rewrite)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        _main(args, debug)
    finally:
        sys.stdout, sys.stderr = streams
        # A stopped run leaves the "already stopping" handlers until the process exits (a late
        # Ctrl-C must not turn exit 130 into a KeyboardInterrupt); an in-process caller gets its own back.
        if argv is not None and threading.current_thread() is threading.main_thread():
            for s, h in handlers.items():
                signal.signal(s, h)


# What the system says of a path the user gave (a missing folder, a file where a folder goes, a symlink
# loop, no permission): bad input, exit 2 like every other. Anything else (EIO, ENOSPC...) failed the run.
INPUT_ERRNOS = frozenset(
    {errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.ELOOP, errno.ENAMETOOLONG, errno.EACCES, errno.EPERM, errno.EROFS}
)


def os_exit_code(e: OSError) -> int:
    """2 for an OSError about a path the user gave, 1 for one of a run's I/O (the C core's, or any other)."""
    core = sys.modules.get("dlio._core")  # a RunError exists only once the C core was loaded
    return 2 if e.errno in INPUT_ERRNOS and not (core is not None and isinstance(e, core.RunError)) else 1


def _main(args: List[str], debug: bool) -> None:
    try:
        rc = cli.main(args=args, prog_name="dlio-fast", standalone_mode=False)
        if isinstance(rc, int) and rc:
            sys.exit(rc)
    except KeyboardInterrupt:  # Ctrl-C outside a measured run (config, planning): no traceback
        _fail("interrupted by SIGINT", 130)
    except click.exceptions.Abort:
        _fail("aborted", 130)
    except click.ClickException as e:
        # one line, no usage block: the message names the option and the value
        path = getattr(getattr(e, "ctx", None), "command_path", "")
        cmd = path.split(" ", 1)[1] + ": " if " " in path else ""
        _fail(f"{cmd}error: {e.format_message()}", e.exit_code)
    except Interrupted as e:
        _fail(f"{e}; the results measured so far were written (marked incomplete)", 128 + e.signum, interrupted=True)
    except DlioError as e:
        if debug:
            raise
        _fail(f"error: {e}", e.exit_code, rank_specific=isinstance(e, DlioRunError))
    except OSError as e:
        if debug:
            raise
        _fail(f"error: {os_error_message(e)}", os_exit_code(e), rank_specific=True)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)


if __name__ == "__main__":
    main()
