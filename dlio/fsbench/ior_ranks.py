"""How the ranks of an `io --engine mpiio` point stay in step when one of them fails or is stopped.

Every rank must make the same collective calls: a rank that raises alone, while the others go on to
the next barrier or MPI_File_*_at_all, leaves them waiting forever. So a step that may fail on one rank
is followed by a vote (every_rank), a run's end is shared with the others (outcome, agreed_stop) and
every rank raises the same exception; a collective run on a shared file stops by the engine's vote
after the same request on every rank (VotedStop, src/dlio_core/engines/mpiio.c).
"""

from __future__ import annotations

import errno
import signal
import time
from typing import Any, Callable, Optional, Sequence, Tuple, TypeVar, cast

from dlio.base.errors import DlioError, Interrupted, os_error_message
from dlio.system.execute import pending
from dlio.system.mpi import Comm

T = TypeVar("T")
# how a rank's run ended, for the others (outcome): None, ("signal", signum), ("voted",), ("failed", text)
Outcome = Optional[Tuple[Any, ...]]

# How long a stopped rank waits for the others: the engine's vote gives up after GRACE_S
# (DC_MPIIO_GRACE_NS); a rank stuck inside an MPI_File_*_at_all whose peer froze is given up on a
# little later, from the main thread.
GRACE_S = 1
GIVE_UP_S = GRACE_S + 0.5


class VotedStop:
    """A collective run on a shared file, as execute_partial drives it: a stop request goes to the
    engine's vote (every rank stops after the same request), not to the runner, which would stop this
    rank alone and leave the others in a collective call it never joins. tick() (execute_partial's
    on_tick) gives up on the run when it has not ended GIVE_UP_S after the stop."""

    def __init__(self, run: Any, engine: Any) -> None:
        self.run, self.engine = run, engine
        self.stopped_at: Optional[float] = None

    def execute(self) -> Any:
        return self.run.execute()

    def request_stop(self) -> None:
        self.engine.request_stop(True)
        if self.stopped_at is None:
            self.stopped_at = time.monotonic()

    def tick(self, _run: Any) -> None:
        if self.stopped_at is not None and time.monotonic() - self.stopped_at > GIVE_UP_S:
            signalled = pending()
            raise LeftAlone(signalled.signum if signalled else signal.SIGTERM)


class LeftAlone(Interrupted):
    """This rank stops without the others (they hang or are gone): no collective call may follow."""

    alone = True

    def __init__(self, signum: int) -> None:
        super().__init__(
            signum,
            f"the other ranks did not answer within {GRACE_S} s (a rank hangs, is stopped or is "
            "gone); this rank left without them",
        )


class RanksError(DlioError):
    """A failure every rank raises together (one rank's, named): rank 0 says it; exit status 1."""

    exit_code = 1


def every_rank(comm: Comm, step: Callable[[], T]) -> T:
    """step() on every rank; its value, or on every rank the first failing rank's error (named), so
    that no rank goes on to a collective call the others left."""
    value: Optional[T] = None
    problem: Optional[str] = None
    try:
        value = step()
    except DlioError as e:
        problem = str(e)
    except OSError as e:
        problem = os_error_message(e)
    problems = [(r, p) for r, p in enumerate(comm.allgather(problem)) if p]
    if problems:
        r, p = problems[0]
        raise RanksError(f"rank {r}: {p}" if comm.size > 1 else p)
    return cast(T, value)  # step() returned it: no rank failed


def outcome(failure: Optional[BaseException]) -> Outcome:
    """How a rank's run ended, for the others: None, ("signal", signum), ("voted",) (stopped by
    the engine's vote or another rank's failure) or ("failed", message)."""
    if failure is None:
        return None
    if isinstance(failure, Interrupted):
        return ("signal", int(failure.signum))
    if getattr(failure, "errno", None) in (errno.EINTR, errno.ECANCELED):
        return ("voted",)
    return ("failed", os_error_message(failure) if isinstance(failure, OSError) else str(failure))


def agreed_stop(rank: int, outcomes: Sequence[Outcome]) -> Optional[BaseException]:
    """The same exception on every rank from every rank's outcome (None: all went well): a signal
    anywhere stops all (Interrupted, naming the rank for the others), else the first failure."""
    signalled = [(r, o[1]) for r, o in enumerate(outcomes) if o and o[0] == "signal"]
    if signalled:
        r, signum = signalled[0]
        mine = outcomes[rank]
        if mine and mine[0] == "signal":
            return Interrupted(mine[1])
        return Interrupted(signum, f"rank {r} was interrupted by {signal.Signals(signum).name}")
    failed = [(r, o[1]) for r, o in enumerate(outcomes) if o and o[0] == "failed"]
    if failed:
        r, message = failed[0]
        return RanksError(f"rank {r}: {message}")
    if any(outcomes):
        return RanksError("the ranks stopped without a reason (a vote with no failure nor signal)")
    return None
