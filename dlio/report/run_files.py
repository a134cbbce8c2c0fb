"""A run's output folder written from its Result (rank 0), or one rank's own files when the ranks
cannot gather: DLIO's files (dlio.report.dlio), dlio-fast.json (dlio.report.exact), config.yaml and
Hydra's folder. Every file is written atomically (dlio.system.output)."""

from __future__ import annotations

import os
from typing import Any, Dict, Optional

from dlio.base import tmpclaim
from dlio.report.dlio import files as dlio_files
from dlio.report.dlio import log as dlio_log
from dlio.report.exact import dlio_fast_doc
from dlio.report.result import RunResult
from dlio.system import output


def write_rank_files(result: RunResult, folder: str, rank: int) -> None:
    """One rank's own output files (its DLIO files and dlio-fast.rank{rank}.json), for a multi-rank run
    that failed or was interrupted: the ranks cannot gather, so each keeps what it measured."""
    os.makedirs(folder, exist_ok=True)
    output.write_json(os.path.join(folder, f"{rank}_output.json"), dlio_files.rank_output(result, 0))
    name = dlio_files.per_epoch_file(result, rank)
    if name:
        output.write_json(os.path.join(folder, name), dlio_files.per_epoch_stats(result, 0))
    output.write_json(os.path.join(folder, f"dlio-fast.rank{rank}.json"), dlio_fast_doc(result))


def write_all(
    result: RunResult,
    folder: str,
    resolved_config_yaml: Optional[str] = None,
    hydra: Optional[Dict[str, str]] = None,
    hydra_subdir: Optional[str] = ".hydra",
    doc: Optional[Dict[str, Any]] = None,
) -> None:
    """Write every output file of a run into folder (each atomically). Rank 0 calls this.
    hydra: dlio.report.dlio.hydra.documents(cfg) ({file name: text}), written into the folder's
    hydra_subdir (Hydra's hydra.output_subdir: MLPerf Storage's benchmark.sh sets it to "configs";
    None writes none, as hydra.output_subdir=null does). doc: dlio-fast.json's document when the caller
    made it already (exact.dlio_fast_doc(result))."""
    os.makedirs(folder, exist_ok=True)
    with tmpclaim.claimed(folder):  # one claim for every file (made and removed once, not once per rank file)
        output.write_json(os.path.join(folder, "summary.json"), dlio_files.summary(result))
        data_gib = dlio_files.per_host_gib(result)  # once: it counts every rank's host (N^2 per rank at 8,192 ranks)
        for r in range(len(result["ranks"])):
            rank = result["ranks"][r]["rank"]
            output.write_json(os.path.join(folder, f"{rank}_output.json"), dlio_files.rank_output(result, r, data_gib))
            name = dlio_files.per_epoch_file(result, rank)
            if name:
                output.write_json(os.path.join(folder, name), dlio_files.per_epoch_stats(result, r))
        output.write_json(os.path.join(folder, "dlio-fast.json"), doc if doc is not None else dlio_fast_doc(result))
        if resolved_config_yaml is not None:
            output.atomic_write_text(os.path.join(folder, "config.yaml"), resolved_config_yaml)
        if hydra and hydra_subdir:
            os.makedirs(os.path.join(folder, hydra_subdir), exist_ok=True)
            for name, text in hydra.items():
                output.atomic_write_text(os.path.join(folder, hydra_subdir, name), text)
        output.atomic_write_text(os.path.join(folder, "dlio.log"), dlio_log.render(result, folder))
