"""`dlio_benchmark`: DLIO's own command, for what runs DLIO by name (MLPerf Storage's mlpstorage with
`--dlio-bin-path`, scripts, `mpirun -n N dlio_benchmark ...`).

It takes DLIO's whole Hydra command line (dlio.config.hydra_compose: `workload=NAME`, `++`/`+`/`~`
overrides of `workload.*` and `hydra.*`, `--config-dir` / `--config-path` / `--config-name`, `--cfg
job|hydra|all`, `--help`) and runs it as `dlio-fast run` does: the same measurement, console and files
(DLIO's summary.json, {rank}_output.json, per-epoch stats, dlio.log, and Hydra's config.yaml /
overrides.yaml / hydra.yaml in hydra.output_subdir). Exit statuses are Hydra's: 0, or 1 for any error
(dlio-fast's own commands use 2 for bad input); a run stopped by a signal exits 128 + its number.
"""

from __future__ import annotations

import sys
from typing import List, Optional, Tuple

import yaml

from dlio.base.errors import DlioError
from dlio.config import Config, load_config
from dlio.config.hydra_compose import (
    JOB_NAME,
    Composed,
    HydraArgs,
    compose,
    parse_argv,
    resolve_run_dir,
    run_arguments,
    search_path,
    workload_files,
)

HELP = """\
=========================== dlio_benchmark ===========================

dlio-fast's drop-in for DLIO - an IO benchmark for deep learning applications.
The same command line, workload files and output files as DLIO; the I/O is timed in C.

Running the benchmark: dlio_benchmark workload=unet3d_h100

Select the workload with workload={{WORKLOAD}}: the file workload/{{WORKLOAD}}.yaml of a --config-dir
(or --config-path) folder, else a built-in one. Override any key on the command line:
  dlio_benchmark workload=unet3d_h100 ++workload.dataset.num_files_train=16 ++hydra.run.dir=results/x
Under MPI: mpirun -n 8 dlio_benchmark workload=...

Available workloads: {workloads}

Flags: --config-dir DIR (-cd)  --config-path DIR (-cp)  --config-name NAME (-cn)
       --cfg job|hydra|all (-c: print the composed config, run nothing)  --help (-h)  --version

By default the output files are saved in hydra.run.dir
(./hydra_log/${{workload.model.name}}/${{now:%Y-%m-%d}}-${{now:%H-%M-%S}}).
dlio-fast's own commands and options: dlio-fast --help
"""


def _composed(argv: List[str]) -> Tuple[HydraArgs, Optional[Composed]]:
    args = parse_argv(argv)
    return args, (compose(args) if not (args.help or args.hydra_help or args.version) else None)


def _config(c: Composed) -> Tuple[Config, List[str]]:
    """The resolved config of a composed command line (run folder resolved), and `run`'s arguments."""
    extra = run_arguments(c, None)
    cfg = _load(extra)
    run_dir = resolve_run_dir(c.run_dir, cfg) if c.run_dir else None
    if run_dir is not None:
        extra = run_arguments(c, run_dir)
        cfg = _load(extra)
    return cfg, extra


def _load(extra: List[str]) -> Config:
    """load_config of `run`'s arguments (the few `run_arguments` produces: --config/--workload, overrides)."""
    workload = config_file = None
    overrides = []
    it = iter(extra)
    for word in it:
        if word == "--config":
            config_file = next(it)
        elif word == "--workload":
            workload = next(it)
        else:
            overrides.append(word)
    return load_config(workload=workload, config_file=config_file, dlio_overrides=overrides)


def print_cfg(which: str, c: Composed) -> None:
    """--cfg: the config as Hydra would compose it (job: the workload; hydra: Hydra's settings)."""
    from dlio.report.dlio import hydra as hydra_files

    cfg, _ = _config(c)
    docs = {}
    if which in ("job", "all"):
        docs["workload"] = hydra_files.workload_tree(cfg)
    if which in ("hydra", "all"):
        docs["hydra"] = hydra_files.hydra_tree(cfg, cfg.output.folder)
    sys.stdout.write(yaml.safe_dump(docs, sort_keys=False, default_flow_style=False))


def main(argv: Optional[List[str]] = None) -> None:
    """The `dlio_benchmark` console script."""
    from dlio.cli.main import main as dlio_fast_main

    whole_process = argv is None
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args, c = _composed(argv)
        if args.version:
            from dlio import __version__

            print(f"{JOB_NAME} (dlio-fast {__version__})")
            return
        if args.help or args.hydra_help:
            print(HELP.format(workloads=", ".join(workload_files(search_path(args)))))
            return
        assert c is not None  # composed: neither --help nor --version
        if args.cfg:
            print_cfg(args.cfg, c)
            return
        _, run_args = _config(c)
    except DlioError as e:
        print(f"{JOB_NAME}: error: {e}", file=sys.stderr)
        sys.exit(1)
    from dlio.cli import grammar
    from dlio.cli.train import run

    # every hint the run prints, in this command's grammar (++workload.KEY=VALUE), not run's options
    rewrite = grammar.translator(grammar.key_flags(run))
    try:
        if whole_process:  # dlio-fast's main() then runs the process (its signal handling at exit)
            sys.argv = [sys.argv[0], "run", *run_args]
            dlio_fast_main(rewrite=rewrite)
        else:
            dlio_fast_main(["run", *run_args], rewrite=rewrite)
    except SystemExit as e:
        # Hydra's statuses: 1 for every error (dlio-fast says 2 for bad input); signals keep 128 + n
        if e.code == 2:
            sys.exit(1)
        raise


if __name__ == "__main__":
    main()
