"""Execute a C run off the main thread, so that Ctrl-C / SIGTERM and a progress display keep working.

The C runner holds no GIL for the whole run, so Python's signal handlers can only run in the main
thread while it waits here. On SIGINT/SIGTERM we ask the runner to stop (it returns within a
second, keeping what it measured) and re-raise as Interrupted with the partial result.
"""
import errno
import signal
import threading

from dlio.errors import Interrupted

# Set when a stop signal arrived: code that waits outside the C runner (an MPI barrier) checks it.
STOP = threading.Event()



def execute(run, on_tick=None, tick_s=0.25):
    """Run run.execute() in a thread; on_tick(run) is called every tick_s from the main thread."""
    box = {}

    def target():
        try:
            box["result"] = run.execute()
        except BaseException as e:  # handed to the main thread
            box["error"] = e

    caught = []

    def handler(signum, frame):
        caught.append(signum)
        STOP.set()
        run.request_stop()

    main = threading.current_thread() is threading.main_thread()
    old = {}
    if main:
        for sig in (signal.SIGINT, signal.SIGTERM):
            old[sig] = signal.signal(sig, handler)
    t = threading.Thread(target=target, name="dlio-fast-run", daemon=True)
    t.start()
    try:
        while t.is_alive():
            t.join(tick_s)
            if on_tick is not None and t.is_alive():
                on_tick(run)
    finally:
        if main:
            for sig, h in old.items():
                signal.signal(sig, h)
    if "error" in box:
        err = box["error"]
        if caught and getattr(err, "errno", None) == errno.EINTR:
            # The stop released a wait the run cannot finish (the C step barrier): that is the
            # signal's doing, not an I/O error, and the run's partial result comes with it.
            raise Interrupted(caught[0], getattr(err, "result", None)) from None
        raise err
    if caught:
        raise Interrupted(caught[0], box.get("result"))
    return box["result"]
