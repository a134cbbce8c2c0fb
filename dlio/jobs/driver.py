"""One lifecycle for every workload family's run (dlio.family):

  plan (the config checked, the backend made once) -> --dry-run prints the plan and stops -> every
  rank checks what the host cannot honour -> rank 0 checks the storage's settings and places -> every
  rank claims the folders it writes (dlio.storage.places: a real filesystem, locked, only the run's own
  files) -> the output folder is made and locked -> prepare -> measure, with Ctrl-C / SIGTERM deferred
  to a check between steps, other ranks' stops and signs of life watched -> gather and write on rank 0
  (a run that measured nothing is a failure, its files marked incomplete; or, when a rank failed in a
  multi-rank job, each rank keeps its own records and tells the others; when
  a host is lost, each survivor keeps what it measured so far and exits 1: dlio.system.liveness) -> the
  folder unlocked and the places released -> the failure re-raised (the CLI makes it the exit status).

A run refused before it measured leaves no output folder behind."""

from __future__ import annotations

import os
import signal
import sys
from typing import Any, Callable, Dict, List, Optional, Tuple

from dlio.base.errors import DlioRunError, Interrupted
from dlio.config import Config
from dlio.family import Family, Run, RunContext
from dlio.jobs.folder import output_folder, prepare_output
from dlio.jobs.registry import FAMILIES
from dlio.jobs.runlock import remove_unused, unlock_output_folder
from dlio.storage.places import Claimed, claim
from dlio.system import liveness
from dlio.system.execute import late_signal_note, pending, stop_signals_deferred, watch_peers
from dlio.system.mpi import Comm

ResultDoc = Callable[[Dict[str, Any], str], None]


def run(
    ctx: RunContext, family: Family, dry_run: bool = False, result_doc: Optional[ResultDoc] = None
) -> Optional[str]:
    """The whole run of `family` on this rank. Returns the output folder on rank 0, else None.
    result_doc(doc, folder) gets the run's dlio-fast.json document on rank 0 once it is written (also when
    the run failed or was stopped: what was measured)."""
    from dlio.train.samecfg import check_same_config

    cfg, comm = ctx.cfg, ctx.comm
    check_same_config(cfg, comm)  # ranks that disagree would deadlock in a collective
    job = family.plan(ctx)
    if dry_run:
        lines = job.describe()
        if comm.rank == 0:
            for line in [cfg.to_yaml(shown_sections(cfg, family)).rstrip(), "---", *lines]:
                ctx.echo(line)
        return None
    job.check()

    def check_storage() -> None:
        note = ctx.backend.addressing_note()  # the first use of the storage's settings: a missing key refused
        if note:
            ctx.warn("warning: " + note)
        job.check_access()

    comm.agree(check_storage)
    # Every check above runs before the output folder exists: a refused run leaves nothing in a results
    # tree (MLPerf's `check run/*` would stop at a folder holding only a lock).
    held = claim_places(ctx, job)
    try:
        return _run(ctx, job, result_doc)
    finally:
        held.release()


def claim_places(ctx: RunContext, job: Run) -> Claimed:
    """Every rank claims the places it writes (dlio.storage.places.claim); a refusal on any rank is every
    rank's, and nothing stays claimed on the others."""
    held = Claimed()

    def take() -> None:
        claim(ctx.backend, job.places(), held)

    try:
        ctx.comm.agree_all(take)
    except BaseException:
        held.release()
        raise
    for line in held.notes:  # a stale lock taken over (dlio.storage.s3.lease)
        ctx.warn(line)
    return held


def _run(ctx: RunContext, job: Run, result_doc: Optional[ResultDoc]) -> Optional[str]:
    """The run from its output folder on (see the module's docstring)."""
    cfg, comm = ctx.cfg, ctx.comm
    folder = output_folder(cfg, ctx.output, comm)
    made = prepare_output(folder, comm)
    live = None
    try:
        try:
            job.prepare(folder)
        except BaseException:
            if comm.rank == 0 and made:
                remove_unused(folder)  # refused before measuring: nothing to keep
            raise
        live = liveness.start(comm, lambda why, lost: keep_and_leave(ctx, job, folder, why, lost))
        unwatch = watch_peers(comm.peer_stopped) if comm.size > 1 else (lambda: None)
        try:
            with stop_signals_deferred():
                records, failure = job.measure()
        finally:
            unwatch()
        if failure is None and pending() is not None:
            ctx.warn(late_signal_note())
        if failure is not None and comm.size > 1:
            # Another rank may be gone or stuck: no collective from here on. The others are told (they
            # stop within a tick and keep what they measured); each rank keeps its own records.
            tell_peers(comm, failure)
            job.keep_partial(folder, records, failure)
            raise failure
        gathered = comm.gather(records)
        if comm.rank == 0:
            assert gathered is not None  # rank 0 gathers
            failure = failure or measured_nothing(job, gathered)
            written = job.write(folder, gathered, failure)
            if written is not None and result_doc is not None:
                result_doc(*written)
        if failure is not None:
            raise failure
    finally:
        if live is not None:
            live.close()  # gathered (or kept its own): the others need not watch this rank any more
        if comm.rank == 0:
            unlock_output_folder(folder)  # the folder holds no lock file after the run
    return folder if comm.rank == 0 else None


def measured_nothing(job: Run, gathered: List[Any]) -> Optional[DlioRunError]:
    """A run that measured nothing (no request, read, load or step completed) is no result: a failure, so
    that its files are marked incomplete with the reason and the run exits 1 (a figure of zero requests
    or of the node cache alone reported as complete is a silent wrong result)."""
    why = job.nothing_measured(gathered)
    return None if why is None else DlioRunError(f"the run measured nothing: {why}")


def keep_and_leave(ctx: RunContext, job: Any, folder: str, why: str, lost: Tuple[int, ...]) -> None:
    """A host was lost (dlio.system.liveness; called from its thread): this survivor keeps what it measured so
    far, marked incomplete and naming the host, and exits 1 at once, without MPI (a call that touches the lost
    ranks may block for good, and MPI_Finalize with them). The first survivor says so."""
    comm = ctx.comm
    failure = DlioRunError(f"stopped because {why}")
    kept = "the results measured so far were written (marked incomplete)"
    try:
        so_far = getattr(job, "so_far", None)
        if so_far is None:
            kept = "this workload keeps no results of a run cut short"
        else:
            job.keep_partial(folder, so_far(), failure)
    except Exception as e:  # noqa: BLE001 -- leaving is what matters: say what was not kept
        kept = f"rank {comm.rank}'s results could not be kept ({e})"
        ctx.warn(f"warning: {kept}")
    if comm.rank == 0:
        unlock_output_folder(folder)
    if comm.rank == min(set(range(comm.size)) - set(lost)):
        ctx.warn(f"dlio-fast: {failure}; {kept}")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(DlioRunError.exit_code)


def shown_sections(cfg: Config, family: Family) -> List[str]:
    """The config sections --dry-run prints: the family's own list, else every section but the other
    families' (a family's section is named as its workflow flag)."""
    if family.sections is not None:
        return list(family.sections)
    return [s for s in cfg.to_dict() if s == family.name or s not in FAMILIES]


def tell_peers(comm: Comm, failure: BaseException) -> None:
    """The other ranks hear that this one stops, unless it stopped because one of them did."""
    if isinstance(failure, Interrupted):
        if not failure.origin:
            comm.notify_stop(failure.signum, f"was interrupted by {signal.Signals(failure.signum).name}")
    else:
        comm.notify_stop(signal.SIGTERM, "failed")  # it says why itself
