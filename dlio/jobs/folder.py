"""A run's output folder: named the same on every rank, made, tested and locked before anything is
measured (one run per folder: dlio.jobs.runlock)."""

from __future__ import annotations

import os
import time
from typing import Optional

from dlio.base.errors import DlioError
from dlio.config import Config
from dlio.jobs.runlock import lock_output_folder
from dlio.storage.places import check_real_fs
from dlio.system.mpi import Comm

RESULT = "dlio-fast.json"  # every family's result document: a folder holding one holds a finished run


def output_folder(cfg: Config, given: Optional[str], comm: Comm) -> str:
    """--output, else output.folder, else output/{workload}/{timestamp} (the same on every rank)."""
    folder = given or cfg.output.folder
    if not folder:
        # the pid keeps two runs started in the same second apart
        stamp = comm.bcast(time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}")
        folder = os.path.join("output", cfg.workload or cfg.model.name or "run", stamp)
        if cfg.dlio_fast.results_dir:  # MLPerf Storage's results tree (dlio.mlperf.provenance)
            from dlio.mlperf.provenance import run_folder

            folder = run_folder(cfg, stamp)
    return folder


def prepare_output(folder: str, comm: Comm) -> bool:
    """Create, test and lock the output folder before measuring anything. True when this run made it.
    Refused: a folder on a kernel filesystem (before anything is made), and a folder holding a finished
    run's results (a second run would replace them)."""

    def make() -> bool:
        check_real_fs(folder, "--output")
        made = not os.path.isdir(folder)
        if not made and os.path.lexists(os.path.join(folder, RESULT)):
            raise DlioError(
                f"{folder}: holds a finished run's results ({RESULT}); a run never replaces them: choose "
                "another folder with --output, or move that one away"
            )
        try:
            os.makedirs(folder, exist_ok=True)
            probe = os.path.join(folder, f".write-test-{os.getpid()}")
            with open(probe, "w") as f:
                f.write("x")
            os.unlink(probe)
        except OSError as e:
            raise DlioError(
                f"{folder}: output folder is not writable ({e.strerror}); choose another with --output"
            ) from None
        lock_output_folder(folder)
        return made

    return comm.agree(make)
