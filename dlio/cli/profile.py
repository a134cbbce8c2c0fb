"""`dlio-fast profile`: capture a job's file I/O (or read a trace), infer its DLIO workload, write
workload.yaml + report.txt; `--compare TRACE RUN_DIR` scores a replay against the original."""

import os
import shlex
import sys

import click

from dlio.errors import DlioError
from dlio.output import atomic_path


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
@click.argument("cmd", nargs=-1, type=click.UNPROCESSED)
def profile(output, trace_in, data_folder, compare_pair, cmd):
    """Capture CMD's file I/O (after `--`) and write the DLIO workload it implies."""
    # the job's modules load when the command runs: --help and completion stay fast
    from dlio.profile import analyze, emit, parsers

    if compare_pair:
        from dlio.profile import compare

        rows = compare.compare(parsers.load_trace(compare_pair[0]), parsers.load_trace(compare_pair[1]))
        click.echo(compare.table(rows), nl=False)
        sys.exit(0 if all(r["ok"] for r in rows) else 1)
    job = None
    if trace_in:
        src = trace_in
    else:
        from dlio.profile.capture import run_captured

        rc, secs, src = run_captured(list(cmd), output)
        job = shlex.join(cmd)
        click.echo(f"Captured `{job}`: exit status {rc}, {secs:.2f} s, records in {src}", err=True)
    tr = parsers.load_trace(src)
    inf = analyze.infer(tr)
    if not inf["files"].value:
        raise DlioError(f"{src}: no dataset reads found ({inf['files'].evidence})")
    os.makedirs(output, exist_ok=True)
    wl = emit.workload(inf, data_folder or os.path.join(os.path.abspath(output), "data"))
    yml = os.path.join(output, "workload.yaml")
    with atomic_path(yml) as tmp, open(tmp, "w") as f:
        f.write(emit.to_yaml(wl))
    emit.validate(yml)
    rep = emit.report(inf, tr.source, job)
    with atomic_path(os.path.join(output, "report.txt")) as tmp, open(tmp, "w") as f:
        f.write(rep)
    click.echo(rep, nl=False)
    click.echo(f"Workload: {yml} (replay: dlio-fast run --config {yml} --trace)")
