"""`dlio-fast report` and `dlio-fast check`: standalone Click commands (the CLI group adds them).

Parsing and printing only; the work is in dlio.report (compare, tables, plots, html, checks).
Bad input raises DlioError with one line naming the file or folder.
"""

import os
import shutil
import sys
import tempfile
from typing import Optional, Tuple

import click

from dlio.base.errors import DlioError
from dlio.base.units import parse_size


def _write(dest: str, text: str, what: str) -> None:
    """Write text to dest ('-' = stdout), atomically."""
    if dest == "-":
        click.echo(text, nl=False)
        return
    from dlio.system import output  # numpy and the C core: only when a file is written

    output.check_output_path(dest)
    if os.path.isdir(dest):
        raise DlioError(f"{dest}: is a folder; give a file name for {what}")
    try:
        output.atomic_write_text(dest, text)
    except OSError as e:
        raise DlioError(f"{dest}: cannot write {what} ({e.strerror or e})") from None


def _ram(value: Optional[str]) -> Optional[int]:
    if value is None:
        return None
    try:
        return parse_size(value)
    except ValueError as e:
        raise DlioError(f"--ram: {e}") from None


@click.command(
    "report",
    epilog=(
        "\b\nExamples:\n"
        "  dlio-fast report output/unet3d/2026-01-02-03-04-05           # one run\n"
        "  dlio-fast report runA runB runC --plots-dir cmp              # side by side, settings that differ marked\n"
        "  dlio-fast report hydra_log/unet3d/2026-01-02 runB            # a DLIO output folder next to dlio-fast's\n"
        "  dlio-fast report io_buffered.json io_direct.json --csv -\n"
        "  dlio-fast report runA runB --html report.html"
    ),
)
@click.argument("paths", nargs=-1, required=True, metavar="RUN_DIR|RESULT.json ...")
@click.option("--csv", "csv_path", metavar="FILE", help="Write the table(s) as CSV ('-' for stdout).")
@click.option("--json", "json_path", metavar="FILE", help="Write the report as JSON ('-' for stdout).")
@click.option("--markdown", "md_path", metavar="FILE", help="Write Markdown tables ('-' for stdout).")
@click.option(
    "--html",
    "html_path",
    metavar="FILE",
    help="Write a self-contained HTML page with the tables and the plots ('-' for stdout).",
)
@click.option("--plots", is_flag=True, help="Draw PNG plots (into each run folder unless --plots-dir).")
@click.option(
    "--plots-dir", type=click.Path(file_okay=False), default=None, help="Folder for the plots (implies --plots)."
)
@click.option(
    "--ram",
    default=None,
    metavar="SIZE",
    help="One host's RAM for the checks in --html (default: what the run recorded).",
)
def report(
    paths: Tuple[str, ...],
    csv_path: Optional[str],
    json_path: Optional[str],
    md_path: Optional[str],
    html_path: Optional[str],
    plots: bool,
    plots_dir: Optional[str],
    ram: Optional[str],
) -> None:
    """Summarise one run, or compare several side by side (ratios to the first).

    RUN_DIR is a run's output folder (with dlio-fast.json); a dlio-fast io or ceiling --json
    file is compared point by point (same rw, bs, engine, qd, threads).
    """
    # the job's modules load when the command runs: --help and completion stay fast
    from dlio.jobs.registry import reports
    from dlio.report import compare, source, stragglers, tables

    dests = [d for d in (csv_path, json_path, md_path, html_path) if d]
    if sum(d == "-" for d in dests) > 1:
        raise DlioError("only one of --csv, --json, --markdown, --html can write to stdout ('-')")
    ram_bytes = _ram(ram)
    sources = source.load_all(paths, reports())
    rep = compare.build(sources)
    if "-" not in dests:
        for line in tables.table_lines(rep) + tables.verdict_lines(rep) + stragglers.report_lines(sources):
            click.echo(line)
    if csv_path:
        _write(csv_path, tables.csv_text(rep), "the CSV report")
    if json_path:
        _write(json_path, tables.json_text(rep), "the JSON report")
    if md_path:
        _write(md_path, "\n".join(tables.markdown_lines(rep)) + "\n", "the Markdown report")
    written = []
    if plots or plots_dir:
        from dlio.report import plots_compare as plots_mod  # matplotlib: ~2 s to import, only for plots

        written = plots_mod.make_for_sources(sources, plots_dir)
        for p in written:
            click.echo(f"plot: {p}", err=True)
    if html_path:
        # the job's modules load when the command runs: --help and completion stay fast
        from dlio.mlperf import checks_v2
        from dlio.report import html as html_report

        if written:
            images = html_report.images_from(written)
        else:
            from dlio.report import plots_compare as plots_mod  # matplotlib: ~2 s to import, only for plots

            tmp = tempfile.mkdtemp(prefix=html_report.TMP_PREFIX)
            try:
                images = html_report.images_from(plots_mod.make_for_sources(sources, tmp))
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        runs = [s for s in sources if s.kind == "run"]
        chk = checks_v2.run_checks([s.doc for s in runs], ram_bytes, [s.label for s in runs]) if runs else None
        title = "dlio-fast report: " + ", ".join(s.label for s in sources)
        _write(html_path, html_report.render(rep, images, chk, title), "the HTML report")


@click.command(
    "check",
    epilog=(
        "\b\nExamples:\n"
        "  dlio-fast check run1 run2 run3              # repeats of one setting: within 5 %?\n"
        "  dlio-fast check hydra_log/unet3d/2026-01-02 --ram 512g"
    ),
)
@click.argument("paths", nargs=-1, required=True, metavar="RUN_DIR ...")
@click.option(
    "--ram", default=None, metavar="SIZE", help="One host's RAM (e.g. 512g) instead of what the run recorded."
)
@click.option(
    "--rules",
    "rules_version",
    default=None,
    type=click.Choice(["v2.0", "v3.0"]),
    help="MLPerf Storage rules version (default: v3.0 when every run's workload is v3.0 CLOSED, "
    "else v2.0); v3.0 prints a table with the rules' numbers.",
)
def check(paths: Tuple[str, ...], ram: Optional[str], rules_version: Optional[str]) -> None:
    """MLPerf Storage style checks: dataset >= 5x RAM, >= 500 steps per epoch, AU >= the
    workload's threshold, and several runs of one workload within 5 % (samples/s).

    Prints PASS or FAIL with the figure for each; exit status 1 if any fails.
    """
    # the job's modules load when the command runs: --help and completion stay fast
    from dlio.jobs.registry import FAMILIES, reports
    from dlio.mlperf import checks
    from dlio.report import source

    for family in (load() for load in FAMILIES.values()):  # a family's runs: its own checks
        if family.checks is not None and all(family.checks.load(p) is not None for p in paths):
            sys.exit(family.checks.main(paths, click.echo))
    ram_bytes = _ram(ram)
    sources = source.load_all(paths, reports())
    for s in sources:
        if s.kind == "family":
            title = s.family_parts()[0].title
            raise DlioError(
                f"{s.path}: a {title} run; check applies MLPerf Storage's training and checkpoint rules "
                "(and a family's own, given only that family's runs): use `dlio-fast report` for its figures"
            )
        if s.kind != "run":
            raise DlioError(f"{s.path}: an {s.kind} result; check needs run folders")
    if rules_version is None:
        from dlio.mlperf.rules import claimed

        rules_version = "v3.0" if all(claimed(s.doc.get("workload")) for s in sources) else "v2.0"
    labels = [s.label for s in sources]
    res = checks.run_checks([s.doc for s in sources], rules_version, ram_bytes, labels)
    if rules_version == "v3.0":
        click.echo(f"MLPerf Storage {rules_version} rules")
    for line in checks.lines(res, rules_version, labels):
        click.echo(line)
    real = [ok for _, ok, _ in res if ok is not None]  # notes (ok None) are not checks
    failed = sum(not ok for ok in real)
    click.echo(f"checks: {len(real) - failed} of {len(real)} passed" if real else "checks: none apply")
    if failed:
        sys.exit(1)
