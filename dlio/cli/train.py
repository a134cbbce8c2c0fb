"""`dlio-fast run`, `generate`, `verify` and `workloads`: the training emulation's commands."""

from __future__ import annotations

import difflib
import os
import sys
from typing import Any, Callable, Dict, Optional, Sequence

import click

from dlio.cli.params import console_options, key_option, key_values
from dlio.errors import DlioError
from dlio.units import fmt_bytes


def workload_options(f: Callable) -> Callable:
    """Which workload, and how to change it: --workload / --config / --set / --scale / DLIO's ++key=value."""
    f = click.option("--scale", type=float, default=None,
                     help="Shrink (or grow) the dataset: number of files x F, same sample size, batch and compute.")(f)
    f = click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
                     help="Override a config key, e.g. --set dataset.num_files_train=16 (repeatable).")(f)
    f = click.option("--config", "config_file", type=click.Path(dir_okay=False), help="A DLIO workload YAML file.")(f)
    f = click.option("--workload", "-w", "workload_name", help="A built-in workload (dlio-fast workloads).")(f)
    f = click.argument("overrides", nargs=-1)(f)
    return f


def load(workload_name: Optional[str], config_file: Optional[str], sets: Sequence[str], overrides: Sequence[str],
         scale: Optional[float], keys: Optional[Dict[str, Any]] = None, what: str = "") -> Any:
    """The resolved config of a command's workload options; `keys` are {dotted key: value} from key options."""
    from dlio.config import load_config
    if workload_name is None and config_file is None and not any("workload=" in o for o in overrides):
        raise DlioError(f"say which workload{what}: --workload NAME (see dlio-fast workloads) or --config FILE.yaml")
    options = {k: (v, f"--{k.rpartition('.')[2].replace('_', '-')}") for k, v in (keys or {}).items()}
    return load_config(workload=workload_name, config_file=config_file, sets=list(sets),
                       dlio_overrides=list(overrides), scale=scale, options=options)


def _rank0_console(ctx: click.Context, comm: Any):
    """(echo, progress) of this rank: rank 0 prints, the others keep quiet."""
    from dlio.progress import Progress
    progress = Progress() if comm.rank == 0 and not ctx.obj.get("quiet") else None
    echo = click.echo if comm.rank == 0 else (lambda *a, **k: None)
    return echo, progress


@click.command(context_settings={"ignore_unknown_options": True})
@workload_options
@click.option("--output", "-o", type=click.Path(file_okay=False), help="Output folder (default output/{workload}/{time}).")
@key_option("dlio_fast.engine", "--engine", help="I/O engine of the readers (posix is what framework readers use).")
@key_option("dlio_fast.qd", "--qd", help="Reads in flight per reader thread.")
@key_option("dlio_fast.cache", "--cache", help="drop: drop the dataset's cached pages before each epoch.")
@key_option("dlio_fast.plots", "--plots", help="Write PNG plots into the output folder.")
@key_option("dlio_fast.skip_bad_files", "--skip-bad-files",
            help="Leave out missing / unreadable / changed files (counted in the results) instead of stopping.")
@key_option("dlio_fast.trace", "--trace",
            help="Write trace-{rank}-of-{size}.pfw (DFTracer / Perfetto JSON lines: every read, fetch, compute) "
                 "in the output folder.")
@click.option("--dry-run", is_flag=True, help="Print the resolved config and the dataset plan; touch nothing.")
@console_options
@click.pass_context
def run(ctx: click.Context, overrides, workload_name, config_file, sets, scale, output, dry_run, **keys) -> None:
    """Emulate a training workload: generate the data if missing, train, report (DLIO-compatible).

    OVERRIDES in DLIO's spelling are accepted too: ++workload.dataset.num_files_train=16
    """
    from dlio import mpi
    from dlio.train import session
    cfg = load(workload_name, config_file, sets, overrides, scale, key_values(keys))
    comm = mpi.world()
    echo, progress = _rank0_console(ctx, comm)
    session.run(cfg, comm, echo, _err, progress, output, dry_run, verbose=ctx.obj.get("verbose", False))


@click.command(context_settings={"ignore_unknown_options": True})
@workload_options
@click.option("--threads", type=click.IntRange(1, 256), default=None, help="Writer threads per rank (default: CPUs).")
@click.option("--checksum", is_flag=True, help="Record CRC32C of every file and sample (for dlio-fast verify).")
@console_options
@click.pass_context
def generate(ctx: click.Context, overrides, workload_name, config_file, sets, scale, threads, checksum) -> None:
    """Generate a workload's dataset (DLIO's layout and formats); complete files are kept."""
    from dlio import mpi
    from dlio.dataset.spec import dataset_spec
    from dlio.train import session
    cfg = load(workload_name, config_file, sets, overrides, scale)
    comm = mpi.world()
    echo, progress = _rank0_console(ctx, comm)
    session.generate(cfg, dataset_spec(cfg), comm, echo, progress, threads, checksum=checksum)


@click.command(context_settings={"ignore_unknown_options": True})
@click.option("--data", "data_folder", type=click.Path(file_okay=False), default=None,
              help="The dataset folder (default: the workload's dataset.data_folder).")
@workload_options
@console_options
def verify(data_folder, overrides, workload_name, config_file, sets, scale) -> None:
    """Check a dataset against its format (and its checksums when generated with --checksum)."""
    from dlio.dataset import verify as verify_mod
    from dlio.dataset.spec import dataset_spec
    extra = [f"dataset.data_folder={data_folder}"] if data_folder else []
    cfg = load(workload_name, config_file, extra + list(sets), overrides, scale, what=" the data belongs to")
    spec = dataset_spec(cfg)
    if not os.path.isdir(spec.data_folder):
        raise DlioError(f"{spec.data_folder}: no such dataset folder")
    checked, problems = verify_mod.verify(spec)
    for path, what in problems:
        click.echo(f"BAD  {path}: {what}")
    sums = "with content checksums" if verify_mod.has_checksums(spec) else "no checksums recorded"
    click.echo(f"{checked} files checked ({spec.format}, {sums}): {len(problems)} bad")
    if problems:
        sys.exit(1)


@click.group(invoke_without_command=True)
@click.pass_context
def workloads(ctx: click.Context) -> None:
    """List the built-in workloads (format, files, sample size, dataset size, batch, compute)."""
    if ctx.invoked_subcommand is not None:
        return
    from dlio.config import load_config
    from dlio.config.workloads import list_workloads
    from dlio.dataset.spec import dataset_bytes, dataset_spec
    from dlio.mlperf.rules import label
    width = max(len(n) for n in list_workloads()) + 1
    click.echo(f"{'workload':<{width}} {'format':<20} {'files':>9} {'spf':>9} {'sample':>10} {'dataset':>10} "
               f"{'batch':>6} {'compute s':>10}  MLPerf Storage rules")
    for name in list_workloads():
        cfg = load_config(workload=name, env={})
        d = cfg.dataset
        if cfg.is_checkpoint_only():
            click.echo(f"{name:<{width}} {'(checkpoint only)':<20}")
            continue
        size = dataset_bytes(dataset_spec(cfg))
        click.echo(f"{name:<{width}} {d.format:<20} {d.num_files_train:>9} {d.num_samples_per_file:>9} "
                   f"{fmt_bytes(cfg.record_bytes(), ''):>10} {fmt_bytes(size, ''):>10} {cfg.reader.batch_size:>6} "
                   f"{cfg.train.computation_time.mean():>10.4g}  {label(name)}")


@workloads.command("show")
@click.argument("name")
def workloads_show(name: str) -> None:
    """Print a built-in workload's YAML."""
    from dlio.config.workloads import list_workloads, workload_text
    if name not in list_workloads():
        near = difflib.get_close_matches(name, list_workloads(), n=1)
        raise DlioError(f"unknown workload {name!r}" + (f"; did you mean {near[0]}?" if near else ""))
    click.echo(workload_text(name).rstrip())


def _err(msg: str) -> None:
    click.echo(msg, err=True)
