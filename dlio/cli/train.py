"""`dlio-fast run`, `generate`, `verify` and `workloads`: the training emulation's commands."""

from __future__ import annotations

import contextlib
import difflib
import functools
import os
import sys
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import click

from dlio import config  # its loader (YAML, numpy) loads at the first load_config: --help stays light
from dlio.base.errors import DlioError
from dlio.base.limits import usable_cpus
from dlio.cli.params import (
    complete_workload,
    console_options,
    examples,
    key_option,
    key_values,
    make_progress,
    progress_options,
)
from dlio.config.schema import KEYS_BY_PATH
from dlio.config.workloads import list_workloads, workload_text
from dlio.system import mpi

if TYPE_CHECKING:
    from dlio.progress import Progress


class Workload(NamedTuple):
    """A command's workload options as given: which workload, and how to change it."""

    name: Optional[str]  # --workload
    config_file: Optional[str]  # --config
    sets: Tuple[str, ...]  # --set KEY=VALUE
    overrides: Tuple[str, ...]  # DLIO's ++key=value words
    scale: Optional[float]  # --scale


def workload_options(f: Callable) -> Callable:
    """Which workload, and how to change it: --workload / --config / --set / --scale / DLIO's ++key=value,
    handed to the command as one argument, ``workload`` (a Workload)."""

    @functools.wraps(f)
    def command(
        *args: Any,
        workload_name: Optional[str],
        config_file: Optional[str],
        sets: Tuple[str, ...],
        overrides: Tuple[str, ...],
        scale: Optional[float],
        **kw: Any,
    ) -> Any:
        return f(*args, workload=Workload(workload_name, config_file, sets, overrides, scale), **kw)

    for option in (
        click.option(
            "--scale",
            type=float,
            default=None,
            help="Shrink (or grow) the dataset: number of files x F, same sample size, batch and compute "
            "(a checkpoint's model and a vector collection too; the KV cache and model loading refuse it).",
        ),
        click.option(
            "--set",
            "sets",
            multiple=True,
            metavar="KEY=VALUE",
            help="Override a config key, e.g. --set dataset.num_files_train=16 (repeatable).",
        ),
        click.option("--config", "config_file", type=click.Path(dir_okay=False), help="A DLIO workload YAML file."),
        click.option(
            "--workload",
            "-w",
            "workload_name",
            shell_complete=complete_workload,
            help="A built-in workload (dlio-fast workloads).",
        ),
        click.argument("overrides", nargs=-1),
    ):
        command = option(command)
    return command


def load(w: Workload, keys: Optional[Dict[str, Any]] = None, what: str = "") -> Any:
    """The resolved config of a command's workload options; `keys` are {dotted key: value} from key options."""
    reject_unknown_options(w.overrides)
    if w.name is None and w.config_file is None and not any("workload=" in o for o in w.overrides):
        raise DlioError(f"say which workload{what}: --workload NAME (see dlio-fast workloads) or --config FILE.yaml")
    options = {k: (v, f"--{k.rpartition('.')[2].replace('_', '-')}") for k, v in (keys or {}).items()}
    cfg = config.load_config(
        workload=w.name,
        config_file=w.config_file,
        sets=list(w.sets),
        dlio_overrides=list(w.overrides),
        scale=w.scale,
        options=options,
    )
    if cfg.warnings:
        if mpi.world().rank == 0:  # once per job, not once per rank
            for line in cfg.warnings:
                _err(line)
    return cfg


def reject_unknown_options(overrides: Sequence[str]) -> None:
    """The OVERRIDES argument takes DLIO's ++/+/~ words; a word starting with '-' is a mistyped or
    misplaced option (`--dryrun`, `--epochs 3`): said as such, with the nearest option or key."""
    bad = next((o for o in overrides if o.startswith("-")), None)
    if bad is None:
        return
    word = bad.split("=", 1)[0]
    ctx = click.get_current_context(silent=True)
    names = sorted(
        {
            n
            for p in (ctx.command.params if ctx else ())
            for n in [*getattr(p, "opts", ()), *getattr(p, "secondary_opts", ())]
            if n.startswith("--")
        }
    )
    near = difflib.get_close_matches(word, names, n=1, cutoff=0.6)
    leaf = word.lstrip("-").replace("-", "_")
    keys = [k for k in KEYS_BY_PATH if k.rpartition(".")[2] == leaf]
    cmd = ctx.info_name if ctx else "run"
    hint = f"; to set the config key: --set {keys[0]}=VALUE" if keys else f"; did you mean {near[0]}?" if near else ""
    raise DlioError(f"{cmd}: unknown option {word}{hint} (see dlio-fast {cmd} --help)")


def _rank0_console(ctx: click.Context, comm: Any) -> Tuple[Callable[[str], None], Optional[Progress]]:
    """(echo, progress) of this rank: rank 0 prints (above the live display), the others keep quiet."""
    if comm.rank != 0:
        return (lambda *a, **k: None), None
    progress = make_progress(ctx)
    return (progress.echo if progress else click.echo), progress


def _warn_to(progress: Any) -> Callable[[str], None]:
    """Warnings on stderr, above the live display when one is shown."""
    return (lambda m: progress.echo(m, err=True)) if progress else _err


CREATE_BUCKET_HELP = "S3: create the bucket (storage.storage_root) when it does not exist."


@click.command(
    context_settings={"ignore_unknown_options": True},
    epilog=examples(
        "dlio-fast run --workload unet3d --scale 0.01   # a small unet3d, data generated if missing",
        "dlio-fast run -w resnet50 --engine io_uring --qd 4 --cache drop --plots",
        "dlio-fast run workload=bert ++workload.train.epochs=2    # DLIO's spelling",
        "mpiexec -n 8 dlio-fast run -w unet3d -o results/unet3d   # 8 simulated accelerators",
        "dlio-fast run -w llama_8b_zero3 --scale 0.001 --status-interval 10 > run.log 2>&1   # a batch log",
    ),
)
@workload_options
@click.option(
    "--output", "-o", type=click.Path(file_okay=False), help="Output folder (default output/{workload}/{time})."
)
@key_option("dlio_fast.engine", "--engine", help="I/O engine of the readers (posix is what framework readers use).")
@key_option("dlio_fast.qd", "--qd", help="Reads in flight per reader thread.")
@key_option("dlio_fast.cache", "--cache", help="drop: drop the dataset's cached pages before each epoch.")
@key_option("dlio_fast.plots", "--plots", help="Write PNG plots into the output folder.")
@key_option(
    "dlio_fast.skip_bad_files",
    "--skip-bad-files",
    help="Leave out missing / unreadable / changed files (counted in the results) instead of stopping.",
)
@key_option(
    "dlio_fast.trace",
    "--trace",
    help="Write trace-{rank}-of-{size}.pfw.gz in the output folder: a DFTracer .pfw trace, gzip (JSON "
    "lines, one event per line: every read, sample, fetch, compute); opens in Perfetto.",
)
@click.option("--dry-run", is_flag=True, help="Print the resolved config and the dataset plan; touch nothing.")
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False),
    help="Also write the run's dlio-fast.json document to FILE ('-' for stdout: every other line then goes to stderr).",
)
@key_option("dlio_fast.create_bucket", "--create-bucket", help=CREATE_BUCKET_HELP)
@progress_options
@console_options
@click.pass_context
def run(
    ctx: click.Context,
    workload: Workload,
    output: Optional[str],
    dry_run: bool,
    json_path: Optional[str],
    **keys: Any,
) -> None:
    """Emulate a training workload: generate the data if missing, train, report (DLIO-compatible).

    OVERRIDES in DLIO's spelling are accepted too: ++workload.dataset.num_files_train=16
    """
    # the job's modules load when the command runs: --help and completion stay fast
    from dlio.family import RunContext
    from dlio.jobs import driver, registry
    from dlio.storage import backend_for

    cfg = load(workload, key_values(keys))
    comm = mpi.world()
    echo, progress = _rank0_console(ctx, comm)
    family = registry.family_of(cfg)
    with _document_out(json_path, progress) as result_doc:
        verbose = ctx.obj.get("verbose", False)
        run_ctx = RunContext(cfg, comm, echo, _warn_to(progress), backend_for(cfg), progress, output, verbose)
        driver.run(run_ctx, family, dry_run, result_doc)


@contextlib.contextmanager
def _document_out(
    json_path: Optional[str], progress: Any = None
) -> Iterator[Optional[Callable[[Dict[str, Any], str], None]]]:
    """`run --json FILE`: the writer of the run's document. With '-' the document is the only thing on
    stdout: every other line (DLIO's, the figures, a library's print) goes to stderr meanwhile (the live
    display, which may hold sys.stdout, is closed before stdout is given back)."""
    from dlio.cli import stdout as guarded
    from dlio.system import output

    if not json_path:
        yield None
        return
    output.check_output_path(json_path)
    doc_out = sys.stdout

    def write(doc: Dict[str, Any], folder: str) -> None:
        if json_path != output.STDOUT:
            output.write_json(json_path, doc)
            return
        saved, sys.stdout = sys.stdout, doc_out  # the one write that goes to the real stdout
        try:
            output.write_json(output.STDOUT, doc)
        finally:
            sys.stdout = saved
        if guarded.lost():
            _err(f"warning: stdout was closed: the JSON document is in {os.path.join(folder, 'dlio-fast.json')}")

    if json_path == output.STDOUT:
        sys.stdout = sys.stderr
    try:
        yield write
    finally:
        if json_path == output.STDOUT:
            if progress is not None:
                progress.done()
            sys.stdout = doc_out


@click.command(
    context_settings={"ignore_unknown_options": True},
    epilog=examples(
        "dlio-fast generate --workload unet3d --scale 0.1 --set dataset.data_folder=/scratch/unet3d",
        "mpiexec -n 4 dlio-fast generate -w resnet50 --checksum   # 4 writers, CRC32C recorded",
        "dlio-fast generate -w cosmoflow --live-csv gen.csv --status-interval 5 > gen.log 2>&1",
        "dlio-fast generate -w resnet50 --scale 0.01 && dlio-fast generate -w resnet50 --dry-run   # full-size ETA",
        "dlio-fast generate -w unet3d --direct   # O_DIRECT: the page cache is bypassed",
    ),
)
@workload_options
@click.option("--threads", type=click.IntRange(1, 256), default=None, help="Writer threads per rank (default: CPUs).")
@click.option("--checksum", is_flag=True, help="Record CRC32C of every file and sample (for dlio-fast verify).")
@click.option(
    "--direct",
    is_flag=True,
    help="Write with O_DIRECT (whole 4 KiB-aligned blocks; each file's last partial block through the page "
    "cache, as dd oflag=direct). hdf5 with chunks or compression is written by h5py, buffered.",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print what would be generated and how long it would take at the rate an earlier generation measured "
    "in the same data folder (e.g. one at --scale 0.01); write nothing.",
)
@key_option("dlio_fast.create_bucket", "--create-bucket", help=CREATE_BUCKET_HELP)
@progress_options
@console_options
@click.pass_context
def generate(
    ctx: click.Context,
    workload: Workload,
    threads: Optional[int],
    checksum: bool,
    direct: bool,
    dry_run: bool,
    **keys: Any,
) -> None:
    """Generate a workload's dataset (DLIO's layout and formats); complete files are kept."""
    # the job's modules load when the command runs: --help and completion stay fast
    from dlio.dataset.spec import dataset_spec
    from dlio.train import session

    cfg = load(workload, key_values(keys))
    comm = mpi.world()
    echo, progress = _rank0_console(ctx, comm)
    if dry_run:
        from dlio.dataset.gen_rate import dry_run_lines

        for line in dry_run_lines(dataset_spec(cfg), comm.size, threads or max(2, round(usable_cpus())), direct):
            echo(line)
        return
    session.generate(cfg, dataset_spec(cfg), comm, echo, progress, threads, checksum=checksum, direct=direct)


@click.command(
    context_settings={"ignore_unknown_options": True},
    epilog=examples(
        "dlio-fast verify --workload unet3d --scale 0.1", "dlio-fast verify -w resnet50 --data /scratch/resnet50"
    ),
)
@click.option(
    "--data",
    "data_folder",
    type=click.Path(file_okay=False),
    default=None,
    help="The dataset folder (default: the workload's dataset.data_folder).",
)
@workload_options
@console_options
def verify(data_folder: Optional[str], workload: Workload) -> None:
    """Check a dataset against its format (and its checksums when generated with --checksum)."""
    # the job's modules load when the command runs: --help and completion stay fast
    from dlio.dataset import stored
    from dlio.dataset import verify as verify_mod
    from dlio.dataset.spec import dataset_spec
    from dlio.storage import staging
    from dlio.storage.base import SCAN
    from dlio.train import session

    extra = (f"dataset.data_folder={data_folder}",) if data_folder else ()
    cfg = load(workload._replace(sets=extra + workload.sets), what=" the data belongs to")
    spec = dataset_spec(cfg)
    comm = mpi.world()
    ds = session.prepare_storage(cfg, spec, comm, _err, checkpoints=False)
    folder, found = staging.local_copy(ds.backend, ds.root, stored.manifest_names(spec))
    if not os.path.isdir(folder):
        raise DlioError(f"{spec.data_folder}: no such dataset folder")
    if not ds.backend.has(SCAN) and not all(found):  # files made elsewhere can be scanned, objects not
        raise DlioError(f"{ds.root}: no dataset there (no manifest): generate it first")
    checked, problems, note = verify_mod.verify_stored(ds)
    if note:
        click.echo(f"note: {note}", err=True)
    for path, what in problems:
        click.echo(f"BAD  {path}: {what}")
    made = verify_mod.as_generated(stored.planning_spec(ds))[0]
    sums = "with content checksums" if verify_mod.has_checksums(made) else "no checksums recorded"
    click.echo(f"{checked} files checked ({made.format} in {ds.root}, {sums}): {len(problems)} bad")
    if problems:
        sys.exit(1)


@click.group(
    invoke_without_command=True,
    epilog=examples(
        "dlio-fast workloads", "dlio-fast workloads show unet3d > my_unet3d.yaml   # then: dlio-fast run --config ..."
    ),
)
@click.pass_context
def workloads(ctx: click.Context) -> None:
    """List the built-in workloads, a table per workload family with the family's own columns."""
    if ctx.invoked_subcommand is not None:
        return
    # the job's modules load when the command runs: --help and completion stay fast
    from dlio.jobs.registry import FAMILIES, family_of
    from dlio.mlperf.rules import label

    tables: Dict[str, List[Dict[str, str]]] = {name: [] for name in FAMILIES}
    titles: Dict[str, str] = {}
    for name in list_workloads():
        cfg = config.load_config(workload=name, env={})
        family = family_of(cfg)
        titles[family.name] = family.title
        # each family says what its columns hold (a KV cache's users, a model's shards, ...)
        row = {"workload": name, **family.listing(cfg)}
        row.setdefault("MLPerf Storage rules", label(name))
        tables[family.name].append(row)
    for fam, rows in tables.items():
        if rows:
            click.echo(f"{titles[fam]}:" if fam == next(iter(tables)) else f"\n{titles[fam]}:")
            for line in table_lines(rows):
                click.echo(line)


def table_lines(rows: List[Dict[str, str]]) -> List[str]:
    """Rows as aligned text: the columns every row named, in the order they came; a missing cell '-'."""
    cols: List[str] = []
    for r in rows:
        cols += [c for c in r if c not in cols]
    width = {c: max(len(c), *(len(r.get(c, "-")) for r in rows)) for c in cols}

    def text(r: Dict[str, str]) -> str:
        return "  ".join(r.get(c, "-").ljust(width[c]) for c in cols).rstrip()

    return [text({c: c for c in cols}), *(text(r) for r in rows)]


@workloads.command("show", epilog=examples("dlio-fast workloads show llama_8b_zero3"))
@click.argument("name", shell_complete=complete_workload)
def workloads_show(name: str) -> None:
    """Print a built-in workload's YAML."""
    if name not in list_workloads():
        near = difflib.get_close_matches(name, list_workloads(), n=1)
        raise DlioError(f"unknown workload {name!r}" + (f"; did you mean {near[0]}?" if near else ""))
    click.echo(workload_text(name).rstrip())


def _err(msg: str) -> None:
    click.echo(msg, err=True)
