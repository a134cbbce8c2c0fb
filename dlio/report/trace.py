"""`--trace`: one DFTracer / Chrome-trace file per rank, `trace-{rank}-of-{size}.pfw` in the output
folder (the name DLIO's DFTracer integration gives it).

The file is DFTracer's .pfw layout: a line "[", then one JSON object per line, then a line "]".
Each line parses on its own (DFTracer's DFAnalyzer reads the file line by line); Perfetto's JSON
loader opens the file as it is (commas between events are optional to it). There are no commas, so
the whole file is not one strict JSON document: read it with read_pfw().

What is in it:
  cat POSIX         "read"/"write": one per request (args fname, fhash, offset, size, ret, step)
  cat reader        "sample": open .. reads .. close of one sample (args fname, size, step)
  cat data_loader   "fetch": the trainer waiting for batch `step` (args size = its bytes)
  cat ai_framework  "compute": the emulated accelerator time of step `step`
  cat dlio_benchmark  "train"/"eval" (one C run), "epoch", "generate": Python-side phases
  cat checkpoint    "checkpoint.save"/"checkpoint.load" (span() / phase() for the checkpoint code)
  "ph":"M" lines    FH (file hash -> name, as DFTracer), process_name / thread_name (Perfetto)
Per-request events are recorded by the C runner in per-thread buffers (no Python per event) and
written by the C writer in bulk; the few Python-side spans are written here. ts/dur are
microseconds with three decimals; ts is on the epoch clock (one CLOCK_REALTIME anchor per file).
"""
import contextlib
import json
import os
import time

import numpy as np

from dlio import _core

KIND_NAMES = {_core.TR_READ: "read", _core.TR_WRITE: "write", _core.TR_SAMPLE: "sample",
              _core.TR_FETCH: "fetch", _core.TR_COMPUTE: "compute"}


def trace_path(folder, rank, size):
    return os.path.join(folder, f"trace-{rank}-of-{size}.pfw")


def _us(ns):
    """ns -> the writer's microsecond text (three decimals), exact."""
    ns = int(ns)
    return f"{ns // 1000}.{ns % 1000:03d}"


class Tracer:
    """This rank's trace file. add_run() appends a C run's events; span()/phase() add Python-side
    phases; close() ends the file. Times given to span() are _core.now_ns() times."""

    def __init__(self, folder, rank=0, size=1, thread_names=None, path=None):
        self.path = path or trace_path(folder, rank, size)
        self.pid = rank
        self.t0_ns = time.time_ns() - _core.now_ns()   # epoch ns = now_ns() + t0_ns
        self.next_id = 0
        self.dropped = 0
        self.events = 0
        self._named = set()
        self._thread_names = thread_names or (lambda tid: "trainer" if tid == 0 else f"reader {tid - 1}")
        self.failed = None   # why the trace was dropped (a full disk): the run goes on without it
        with self._guard():
            with open(self.path, "w") as f:
                f.write("[\n")
        self._lines([self._meta("process_name", 0, {"name": f"rank {rank}"})])

    @contextlib.contextmanager
    def _guard(self):
        """A write of the trace that fails drops the trace (file removed), never the run."""
        try:
            yield
        except OSError as e:
            from dlio.errors import os_error_message
            self.failed = os_error_message(e, e.filename or self.path)
            try:
                os.unlink(self.path)
            except OSError:
                pass

    def _meta(self, name, tid, args):
        line = {"id": self.next_id, "name": name, "cat": "dftracer", "pid": self.pid, "tid": tid,
                "ph": "M", "args": args}
        self.next_id += 1
        return json.dumps(line, separators=(",", ":"))

    def _lines(self, lines):
        if lines and not self.failed:
            with self._guard(), open(self.path, "a") as f:
                f.write("\n".join(lines) + "\n")

    def add_run(self, res, paths, name=None, **args):
        """Append the events of one C run (res from Run(..., trace=True).execute()), and a span
        `name` over its measured window when name is given."""
        ev = res.get("trace")
        if ev is None:
            return
        self.dropped += int(res.get("trace_dropped", 0))
        meta = [self._meta("thread_name", int(t), {"name": self._thread_names(int(t))})
                for t in np.unique(ev["tid"]) if int(t) not in self._named]
        self._named.update(int(t) for t in np.unique(ev["tid"]))
        self._lines(meta)
        if len(ev) and not self.failed:
            with self._guard():
                self.next_id = _core.write_trace(self.path, ev, paths, self.pid, self.t0_ns, self.next_id)
                self.events += len(ev)
        if name is not None and res["t_end"] >= res["t_start"]:
            self.span(name, res["t_start"], res["t_end"] - res["t_start"], **args)

    def span(self, name, t_start_ns, dur_ns, cat=None, tid=0, **args):
        """One complete event of a Python-side phase (times from _core.now_ns())."""
        if cat is None:
            cat = "checkpoint" if name.startswith("checkpoint") else "dlio_benchmark"
        line = (f'{{"id":{self.next_id},"name":{json.dumps(name)},"cat":{json.dumps(cat)},'
                f'"pid":{self.pid},"tid":{int(tid)},"ts":{_us(int(t_start_ns) + self.t0_ns)},'
                f'"dur":{_us(dur_ns)},"ph":"X","args":{json.dumps(args, separators=(",", ":"))}}}')
        self.next_id += 1
        self.events += 1
        self._lines([line])

    @contextlib.contextmanager
    def phase(self, name, cat=None, **args):
        """with tracer.phase("checkpoint.save", epoch=1): ... -> one span around the block."""
        t = _core.now_ns()
        try:
            yield
        finally:
            self.span(name, t, _core.now_ns() - t, cat=cat, **args)

    def close(self):
        if self.dropped:
            self.span("trace_dropped", _core.now_ns(), 0, cat="dftracer", dropped=self.dropped)
        if not self.failed:
            with self._guard(), open(self.path, "a") as f:
                f.write("]\n")


@contextlib.contextmanager
def maybe_phase(tracer, name, **args):
    """tracer.phase(...) when tracing, else nothing."""
    if tracer is None:
        yield
    else:
        with tracer.phase(name, **args):
            yield


def read_pfw(path):
    """The events of a .pfw file (list of dicts): every line but "[" / "]", a trailing comma
    allowed. ts/dur are parsed as Decimal so that sums of durations are exact."""
    from decimal import Decimal
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line in ("[", "]"):
                continue
            out.append(json.loads(line.rstrip(","), parse_float=Decimal))
    return out
