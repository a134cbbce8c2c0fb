"""Execute a C run off the main thread, so that Ctrl-C / SIGTERM and a progress display keep working.

The C runner holds no GIL for the whole run, so Python's signal handlers can only run in the main
thread while it waits here. On SIGINT/SIGTERM we ask the runner to stop (it returns within a
second, keeping what it measured) and hand back the partial result with an Interrupted.
"""

import contextlib
import errno
import os
import signal
import threading
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from dlio import _core
from dlio.base.errors import Interrupted


class StopFlag:
    """A flag that signal handlers set and waits outside the C runner poll (is_set). Not a
    threading.Event: Event.set() takes a lock, and a second signal whose handler runs while the
    first handler holds that lock (Ctrl-C hammered, SIGTERM repeated) deadlocks the main thread, so
    that the run neither stops nor writes its results."""

    __slots__ = ("_on",)

    def __init__(self) -> None:
        self._on = False

    def set(self) -> None:
        self._on = True

    def clear(self) -> None:
        self._on = False

    def is_set(self) -> bool:
        return self._on


# Set when a stop signal arrived: code that waits outside the C runner (an MPI barrier) checks it.
STOP = StopFlag()
# The stop signals that arrived during a guarded measured phase (stop_signals_deferred), first first.
_SIGNALLED: List[int] = []
_GUARDS = [0]  # stop_signals_deferred() blocks open (an inner one leaves the outer's handlers be)


_ORIGIN: List[str] = []  # another rank's stop that stopped this one, when that is why
# Pollers of the other ranks' stop notices (dlio.system.mpi.Comm.peer_stopped): polled where a stop signal is
# looked for, so that a rank whose peer stopped or failed stops too, within a tick, and keeps its results.
_PEERS: List[Callable[[], Optional[Tuple[int, str]]]] = []


def _stop(signum: int) -> None:
    if _GUARDS[0]:  # noted for the guarded phase only: nothing stale outlives it
        _SIGNALLED.append(signum)
    STOP.set()


def watch_peers(poll: Callable[[], Optional[Tuple[int, str]]]) -> Callable[[], None]:
    """Poll ``poll`` (-> (signum, what the other rank said) or None) wherever stop signals are looked
    for; returns the function that stops watching."""
    _PEERS.append(poll)

    def unwatch() -> None:  # idempotent: a claim released on refusal and again at the run's end
        if poll in _PEERS:
            _PEERS.remove(poll)

    return unwatch


def peer_stop() -> Optional[Interrupted]:
    """The Interrupted of another rank's stop notice, noted as if its signal had arrived here."""
    if _ORIGIN:
        return Interrupted(_SIGNALLED[0] if _SIGNALLED else signal.SIGTERM, _ORIGIN[0])
    for poll in list(_PEERS):
        got = poll()
        if got is not None:
            _ORIGIN.append(got[1])
            _stop(got[0])
            return Interrupted(got[0], got[1])
    return None


def pending() -> Optional[Interrupted]:
    """The Interrupted of a stop signal (or another rank's stop notice) that arrived between C runs and
    barriers, or None."""
    if not _SIGNALLED and not _ORIGIN:
        peer_stop()
    if _SIGNALLED:
        return Interrupted(_SIGNALLED[0], _ORIGIN[0] if _ORIGIN else "")
    return None


def late_signal_note() -> str:
    """What to say when a stop signal arrived after the last measurement (nothing was cut short)."""
    return (
        f"note: {signal.Signals(_SIGNALLED[0]).name} arrived after the last measurement: the results are "
        "complete and written"
    )


@contextlib.contextmanager
def stop_signals_deferred() -> Iterator[None]:
    """For a whole measured phase: a SIGINT / SIGTERM that arrives between C runs and barriers (while
    a rank writes an epoch's record, say) is noted, and the next run or barrier returns its
    Interrupted at once. Without this, Ctrl-C there raised KeyboardInterrupt and SIGTERM killed the
    process, and that rank's measured results were lost. Main thread only."""
    if threading.current_thread() is not threading.main_thread() or _GUARDS[0]:
        yield
        return
    _SIGNALLED.clear()
    _ORIGIN.clear()
    STOP.clear()
    _GUARDS[0] += 1
    old = {sig: signal.signal(sig, lambda signum, frame: _stop(signum)) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        _GUARDS[0] -= 1
        for sig, h in old.items():
            # once stopping, a second Ctrl-C / SIGTERM must not cut the writing of the results
            signal.signal(sig, shutdown_handler if _SIGNALLED else h)


def shutdown_handler(signum: int, frame: Any) -> None:
    """A stop signal while the results of a stopped run are written: said on stderr, not obeyed
    (a KeyboardInterrupt there would lose them); SIGKILL still ends the process at once."""
    try:
        os.write(
            2,
            f"dlio-fast: {signal.Signals(signum).name} again: already stopping, writing the results "
            "measured so far (SIGKILL stops at once)\n".encode(),
        )
    except OSError:
        pass


def execute(run: Any, on_tick: Optional[Callable[[Any], None]] = None, tick_s: float = 0.25) -> Dict[str, Any]:
    """Run run.execute() in a thread and return its result; a stop signal raises Interrupted, an
    I/O error the run's RunError (their partial results are dropped: see execute_partial)."""
    result, failure = execute_partial(run, on_tick, tick_s)
    if failure is not None:
        raise failure
    assert result is not None  # None only with a failure (a stop signal noted before the run)
    return result


def execute_partial(
    run: Any, on_tick: Optional[Callable[[Any], None]] = None, tick_s: float = 0.25
) -> Tuple[Optional[Dict[str, Any]], Optional[BaseException]]:
    """Run run.execute() in a thread; on_tick(run) is called every tick_s from the main thread.

    Returns (result, None), or (what was measured, the failure) when a stop signal (Interrupted) or
    an I/O error (_core.RunError) ended the run. Anything else is raised. A stop signal already
    noted (pending) returns (None, its Interrupted) without starting the run."""
    if pending() is not None:
        return None, pending()
    box: Dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = run.execute()
        except BaseException as e:  # handed to the main thread
            box["error"] = e

    caught = []

    def handler(signum: int, frame: Any) -> None:
        caught.append(signum)
        _stop(signum)
        run.request_stop()

    main = threading.current_thread() is threading.main_thread()
    old = {}
    if main:
        for sig in (signal.SIGINT, signal.SIGTERM):
            old[sig] = signal.signal(sig, handler)
    t = threading.Thread(target=target, name="dlio-fast-run", daemon=True)
    if on_tick is not None:  # the display's clock starts with the run, not at its first tick
        on_tick(run)
    t.start()
    try:
        while t.is_alive():
            t.join(tick_s)
            if not caught and t.is_alive():
                peer = peer_stop()  # another rank stopped or failed: stop as if signalled
                if peer is not None:
                    caught.append(peer.signum)
                    run.request_stop()
                elif not main and STOP.is_set():  # a run beside the main thread's (a prefetch) stops with it
                    caught.append(_SIGNALLED[0] if _SIGNALLED else signal.SIGTERM)
                    run.request_stop()
            if on_tick is not None and t.is_alive():
                on_tick(run)
        if on_tick is not None and "error" not in box:  # the last state is drawn (N/N)
            on_tick(run)
    finally:
        if main:
            for sig, h in old.items():
                # once stopping, a second Ctrl-C / SIGTERM must not cut the writing of the results
                signal.signal(sig, shutdown_handler if caught else h)
    if "error" in box:
        err = box["error"]
        partial = getattr(err, "result", None)  # a RunError keeps what the run measured
        if caught and getattr(err, "errno", None) == errno.EINTR:
            # The stop released a wait the run cannot finish (the C step barrier): that is the
            # signal's doing, not an I/O error.
            return partial, _interrupted(caught[0])
        if isinstance(err, _core.RunError):
            return partial, err
        raise err
    if caught:
        return box.get("result"), _interrupted(caught[0])
    return box["result"], None


def _interrupted(signum: int) -> Interrupted:
    return Interrupted(signum, _ORIGIN[0] if _ORIGIN else "")


class _StopOrPeer:
    """The stop event as a wait polls it, that also sees another rank's stop notice."""

    def is_set(self) -> bool:
        return STOP.is_set() or peer_stop() is not None


def interruptible(wait: Callable[[Any], bool]) -> Optional[Interrupted]:
    """Run wait(STOP) (a wait that polls the event, as mpi.Comm.barrier_or_stop does) with SIGINT and
    SIGTERM setting the event; returns the Interrupted when a signal ended the wait, else None.
    Between C runs a plain MPI barrier would hold a rank whose peer is stopped or frozen forever."""
    if pending() is not None:
        return pending()
    caught = []

    def handler(signum: int, frame: Any) -> None:
        caught.append(signum)
        _stop(signum)

    main = threading.current_thread() is threading.main_thread()
    old = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)} if main else {}
    try:
        arrived = wait(_StopOrPeer())
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)
    if caught:
        return Interrupted(caught[0])
    return None if arrived else (pending() or Interrupted(signal.SIGINT))  # stopped by an earlier signal
