"""A stop signal between C runs (while a rank does its Python bookkeeping) is kept, not lost: the
next run or barrier returns its Interrupted (dlio.system.execute.stop_signals_deferred)."""

import json
import os
import signal
import threading

import pytest

from dlio.base.errors import Interrupted
from dlio.fsbench.grid import Sinks, run_grid
from dlio.system import execute


@pytest.fixture(autouse=True)
def own_handlers():
    """Each test leaves the process's signal handlers as it found them."""
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    for s, h in before.items():
        signal.signal(s, h)


class CountingRun:
    """Stands in for a C run: counts how often it is started."""

    def __init__(self):
        self.started = 0

    def execute(self):
        self.started += 1
        return {"steps_done": 0}

    def request_stop(self):
        pass


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_between_runs_stops_the_next_run_before_it_starts(sig):
    run = CountingRun()
    with execute.stop_signals_deferred():
        os.kill(os.getpid(), sig)  # default handlers: KeyboardInterrupt / death of the process
        res, failure = execute.execute_partial(run)
        assert res is None and isinstance(failure, Interrupted) and failure.signum == sig
        assert run.started == 0
        # the epoch barrier does not wait either, and names the same signal
        waited = []
        got = execute.interruptible(lambda stop: waited.append(1) or True)
        assert isinstance(got, Interrupted) and got.signum == sig and not waited
        assert execute.pending().signum == sig
    # afterwards a second signal is only reported (the results are being written)
    assert signal.getsignal(sig) is execute.shutdown_handler


def test_the_first_of_two_signals_decides():
    with execute.stop_signals_deferred():
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)
        assert execute.pending().signum == signal.SIGTERM


def test_without_a_signal_runs_go_on_and_handlers_come_back():
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    run = CountingRun()
    with execute.stop_signals_deferred():
        assert execute.execute_partial(run) == ({"steps_done": 0}, None) and run.started == 1
        assert execute.interruptible(lambda stop: True) is None and execute.pending() is None
    assert {s: signal.getsignal(s) for s in before} == before


def test_off_the_main_thread_it_changes_nothing():
    # signal.signal() raises ValueError off the main thread: the guard must not
    errors = []

    def body():
        try:
            with execute.stop_signals_deferred():
                pass
        except Exception as e:
            errors.append(e)

    t = threading.Thread(target=body)
    t.start()
    t.join()
    assert errors == []


def test_io_grid_keeps_its_points_when_a_signal_falls_between_two(tmp_path):
    """As `dlio-fast io`: a SIGTERM while the next point is prepared (no C run going) stops that point
    before it starts; the points measured are written and the exit names the signal."""
    run = CountingRun()

    def records():
        yield {"point": 1}
        os.kill(os.getpid(), signal.SIGTERM)  # the default would kill the process here
        res, failure = execute.execute_partial(run)  # the next point (as points.run_point)
        if failure is not None:
            raise failure
        yield {"point": 2}

    doc, lines = {}, []
    with pytest.raises(Interrupted) as e:
        run_grid(records(), doc, "header", str, Sinks(json_path=str(tmp_path / "io.json")), lines.append)
    assert e.value.signum == signal.SIGTERM and run.started == 0
    written = json.loads((tmp_path / "io.json").read_text())
    assert written["points"] == [{"point": 1}] and "SIGTERM" in written["reason"] and "complete" not in written


def test_a_signal_after_the_last_point_keeps_the_grid_complete(tmp_path):
    def records():
        yield {"point": 1, "ops": 1}  # a point that measured something
        os.kill(os.getpid(), signal.SIGINT)

    lines = []
    doc = run_grid(records(), {}, "header", str, Sinks(), lines.append)
    assert doc["complete"] is True and doc["points"] == [{"point": 1, "ops": 1}]
    assert "SIGINT arrived after the last measurement" in lines[-1]


# A second stop signal whose handler runs *inside* the first one's, at every line of it in turn (a
# tracer sends it): the handlers take no lock, so none of them can wait for a lock the interrupted
# one holds. With a threading.Event as the stop flag this hung for ever (Event.set() holds its lock
# while it notifies), as a user hammering Ctrl-C or a supervisor repeating SIGTERM could make it.
NESTED = """
import os, signal, sys, threading
from dlio.system import execute

depth, sent = [0], [0]
plain_stop = execute._stop

def counted_stop(signum):
    depth[0] += 1
    try:
        plain_stop(signum)
    finally:
        depth[0] -= 1

execute._stop = counted_stop

def tracer(frame, event, arg):
    if event == "line" and depth[0] == 1 and sent[0] < 200:
        sent[0] += 1
        os.kill(os.getpid(), signal.SIGTERM)
    return tracer

class WaitingRun:  # a C run that returns once asked to stop
    def __init__(self):
        self.asked = threading.Event()
    def execute(self):
        self.asked.wait(30)
        return {"steps_done": 1}
    def request_stop(self):
        self.asked.set()

with execute.stop_signals_deferred():
    sys.settrace(tracer)
    if sys.argv[1] == "between-runs":
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):  # the pending handlers run at the loop's checks
            pass
        failure = execute.pending()
    else:
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
        _, failure = execute.execute_partial(WaitingRun(), tick_s=0.01)
    sys.settrace(None)
print(failure.signum, sent[0])
"""


@pytest.mark.parametrize("when", ["between-runs", "during-a-run"])
def test_a_signal_inside_another_signals_handler_never_hangs(when):
    import subprocess
    import sys

    try:
        p = subprocess.run([sys.executable, "-c", NESTED, when], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("the main thread hung in a signal handler")
    assert p.returncode == 0, p.stderr
    signum, nested = map(int, p.stdout.split())
    assert nested > 0, "no second signal was sent inside the first handler"
    assert signum in (signal.SIGINT, signal.SIGTERM)  # either may be noted first
