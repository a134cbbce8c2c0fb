"""`dlio-fast profile`: capture a job's file I/O (or read a trace), infer its DLIO workload, write
workload.yaml + report.txt; `--compare TRACE RUN_DIR` scores a replay against the original."""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
from typing import TYPE_CHECKING, NoReturn, Optional, Tuple

import click

from dlio.base.errors import DlioError, DlioRunError, Interrupted

if TYPE_CHECKING:
    from dlio.profile.capture import Captured
    from dlio.profile.events import Trace


@click.command(
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
    epilog=(
        "\b\nExamples:\n"
        "  dlio-fast profile -o prof -- python train.py --epochs 1    # capture, then prof/workload.yaml\n"
        "  dlio-fast profile --trace trace-0-of-8.pfw.gz -o prof       # from a DFTracer trace\n"
        "  dlio-fast run --config prof/workload.yaml --trace -o replay\n"
        "  dlio-fast profile --compare prof/raw replay                  # how close the replay is"
    ),
)
@click.option(
    "--output",
    "-o",
    type=click.Path(file_okay=False),
    default="profile",
    show_default=True,
    help="Folder for raw/ (the capture), workload.yaml and report.txt.",
)
@click.option(
    "--trace",
    "trace_in",
    type=click.Path(exists=True),
    help="Infer from an existing trace (capture folder, .pfw[.gz], Darshan DXT text, strace -f -tt -T log) "
    "instead of running a command.",
)
@click.option("--data-folder", default=None, help="data_folder of the emitted workload (default OUTPUT/data).")
@click.option(
    "--compare",
    "compare_pair",
    nargs=2,
    type=click.Path(exists=True),
    metavar="TRACE RUN_DIR",
    help="Score the trace of a replay (RUN_DIR of `dlio-fast run --trace`) against TRACE.",
)
@click.option(
    "--max-events",
    type=click.IntRange(1, 2**40),
    default=None,
    help="Read at most this many events of a trace (default 20,000,000: about 1.3 GB of memory); "
    "a trace with more is cut there and the report says so.",
)
@click.argument("cmd", nargs=-1, type=click.UNPROCESSED)
def profile(
    output: str,
    trace_in: Optional[str],
    data_folder: Optional[str],
    compare_pair: Optional[Tuple[str, str]],
    max_events: Optional[int],
    cmd: Tuple[str, ...],
) -> None:
    """Capture CMD's file I/O (after `--`) and write the DLIO workload it implies."""
    # the job's modules load when the command runs: --help and completion stay fast
    from dlio.profile import analyze, emit, parsers, tracein

    cap = max_events or tracein.MAX_EVENTS

    def load(path: str) -> Trace:
        tr = parsers.load_trace(path, cap)
        for note in tr.notes:
            click.echo(f"note: {note}", err=True)
        return tr

    if compare_pair:
        from dlio.profile import compare

        rows = compare.compare(load(compare_pair[0]), load(compare_pair[1]))
        click.echo(compare.table(rows), nl=False)
        sys.exit(0 if all(r["ok"] for r in rows) else 1)
    job, got = None, None
    if trace_in:
        src = trace_in
    else:
        from dlio.profile.capture import run_captured

        got = run_captured(list(cmd), output)
        src, job = got.raw, shlex.join(cmd)
        how = got.failure() or "exit status 0"
        click.echo(f"Captured `{job}`: {how}, {got.seconds:.2f} s, records in {src}", err=True)
    failed = got if got is not None and (got.interrupted or got.failure()) else None  # the failed capture
    try:
        tr = load(src)
        inf = analyze.infer(tr)
        if not inf["files"].value:
            raise DlioError(f"{src}: no dataset reads found ({inf['files'].evidence})")
    except DlioError as e:
        if not failed:
            raise
        _job_failed(failed, f"the capture is kept in {src}, but {e}")
    from dlio.system.output import atomic_path  # numpy and the C core: only once there is a capture to write

    os.makedirs(output, exist_ok=True)
    wl = emit.workload(inf, data_folder or os.path.join(os.path.abspath(output), "data"))
    yml = os.path.join(output, "workload.yaml")
    with atomic_path(yml) as tmp, open(tmp, "w") as f:
        f.write(emit.to_yaml(wl, inf))
    emit.validate(yml)
    rep = emit.report(inf, tr.source, job)
    if failed:
        rep += f"  capture incomplete: {_how_it_ended(failed)}; inferred from what was captured before\n"
    rep += "".join(f"  note: {n}\n" for n in tr.notes)
    with atomic_path(os.path.join(output, "report.txt")) as tmp, open(tmp, "w") as f:
        f.write(rep)
    with atomic_path(os.path.join(output, "profile.json")) as tmp, open(tmp, "w") as f:
        json.dump(emit.to_json(inf), f, indent=1)
    click.echo(rep, nl=False)
    if "unread" in inf:
        click.echo(f"warning: {inf['unread'].evidence.removeprefix('WARNING: ')}", err=True)
    sure = inf.get("compute_confidence")
    if sure is not None and sure.value != "confident":
        click.echo(f"warning: computation_time is {sure.value}: {sure.evidence}", err=True)
    click.echo(f"Workload: {yml} (replay: dlio-fast run --config {yml} --trace)")
    if failed:
        _job_failed(failed, f"the workload above is from what was captured before, in {src}")


def _how_it_ended(got: Captured) -> Optional[str]:
    if got.interrupted:
        return f"profile was interrupted by {signal.Signals(got.interrupted).name} and stopped the job"
    return got.failure()


def _job_failed(got: Captured, what: str) -> NoReturn:
    """Exit as the job ended: 128 + N when profile itself was stopped by signal N, else 1 (the
    job failed or died), with one line naming how."""
    if got.interrupted:
        name = signal.Signals(got.interrupted).name
        raise Interrupted(got.interrupted, f"of {name}: the job was stopped and {what}")
    raise DlioRunError(f"{got.failure()}; {what}")
