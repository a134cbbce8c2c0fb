"""`--trace`: one DFTracer .pfw trace per rank, `trace-{rank}-of-{size}.pfw.gz` in the output folder
(the name DLIO's DFTracer integration gives it; gzip, which DFTracer's tools and Perfetto read), or
any file name given (`io --trace FILE`: FILE.pfw is written plain, FILE.pfw.gz compressed).

The file is DFTracer's .pfw layout: a line "[", then one JSON object per line, then a line "]".
Each line parses on its own (DFTracer's DFAnalyzer reads the file line by line); Perfetto opens
the file as it is (commas between events are optional to it, and it unpacks gzip). There are no
commas, so the whole file is not one strict JSON document: read it with read_pfw().

What is in it: DFTracer's AI events (pydftracer's `dft_ai`, with the category and name DLIO's runs
give them, so that DFAnalyzer's AI views read a dlio-fast trace as a DLIO one), and the I/O requests:
  cat <ENGINE>      "read"/"write": one per request (args fhash, offset, size, ret, step); the
                    category is the engine: POSIX (as DFTracer), IO_URING, MMAP, NULL, MPIIO
                    (DFAnalyzer's default I/O filter is cat == "POSIX": give it a condition
                    function that takes the engine's category too)
  cat data          "item": open .. reads .. close of one sample (args fhash, size, step)
  cat dataloader    "fetch.iter": the trainer waiting for batch `step` (args size = its bytes)
  cat compute       "compute": the emulated accelerator time of step `step`
  cat pipeline      "train" / "evaluate" (one C run), "epoch.block" (an epoch)
  cat checkpoint    "capture" / "restart": a checkpoint's save / load
  cat ai_root       "ai_root": the whole run, from the trace's start to its close
  cat dlio_benchmark  "generate": generating the dataset (no dft_ai event of DLIO's covers it)
  "ph":"M" lines    FH (file hash -> name, as DFTracer: once per file), process_name / thread_name,
                    clock_offset (a run of many ranks: the rank's host, and its wall clock's offset
                    against rank 0's with that estimate's round trip: dlio.report.trace_merge uses it)
DLIO's `data.preprocess` (its per-sample preprocess sleep) and `checkpoint.init` (allocating the
checkpoint's tensors) have nothing to time here and are not written.
The code names phases by what they are (AI_EVENTS maps "train", "eval", "epoch", "checkpoint.save",
"checkpoint.load" to their events).
Per-request events are recorded by the C runner in per-thread buffers (no Python per event) and
written by the C writer in bulk; the few Python-side spans are written here.

ts/dur are integer microseconds (as DFTracer); ts is on the epoch clock (one CLOCK_REALTIME anchor
per file). Both ends of every span are rounded down to the microsecond, so nested spans stay nested
and back-to-back spans never overlap. With several requests in flight, a thread's spans are spread
over lanes, one track each: tid = thread * TRACE_LANES + lane, named "reader 0 slot 3"; on a track
spans are disjoint or nested (a request inside its sample), which is what Perfetto needs to draw
them. Thread 0 lane 0 (tid 0) is the trainer (train) or worker 0 (io), where the phases are.
"""

import contextlib
import gzip
import json
import os
import re
import shutil
import tempfile
from decimal import Decimal
from typing import IO, Any, Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple

import numpy as np

from dlio import _core
from dlio.base.errors import os_error_message
from dlio.system import clock_offset

# A phase the code names -> the (cat, name) of DFTracer's AI event for it (pydftracer's dft_ai).
AI_EVENTS = {
    "train": ("pipeline", "train"),
    "eval": ("pipeline", "evaluate"),
    "epoch": ("pipeline", "epoch.block"),
    "checkpoint.save": ("checkpoint", "capture"),
    "checkpoint.load": ("checkpoint", "restart"),
}
ROOT_EVENT = ("ai_root", "ai_root")
CLOCK_META = "clock_offset"
TRACE_LANES = _core.TRACE_LANES
GZIP_LEVEL = 6  # zlib's default: ~10x smaller than the text here, at ~100 MB/s of text


def trace_path(folder: str, rank: int, size: int, compress: bool = True) -> str:
    return os.path.join(folder, f"trace-{rank}-of-{size}.pfw" + (".gz" if compress else ""))


def io_category(engine: str) -> str:
    """The "cat" of an engine's read/write events: its name in capitals (posix -> POSIX, the
    category DFTracer gives POSIX calls; io_uring -> IO_URING)."""
    return re.sub(r"[^A-Za-z0-9]+", "_", engine or "posix").upper()


def _us(ns: int) -> int:
    """An instant in ns -> the writer's integer microsecond (rounded down, as the C writer)."""
    return int(ns) // 1000


class Tracer:
    """This rank's trace file. add_run() appends a C run's events; span()/phase() add Python-side
    phases; close() ends the file (after the run's ai_root event, with ai_root). Times given to span()
    are _core.now_ns() times. The file is
    gzip when its name ends in .gz (the default name does)."""

    def __init__(
        self,
        folder: Optional[str],  # None when path is given
        rank: int = 0,
        size: int = 1,
        thread_names: Optional[Callable[[int], str]] = None,
        path: Optional[str] = None,
        ai_root: bool = False,
        clock: Optional[Dict[str, Any]] = None,
    ) -> None:
        if path is None and folder is None:
            raise ValueError("Tracer needs a folder or a path")
        self.path = path or trace_path(str(folder), rank, size)
        self.compressed = self.path.endswith(".gz")
        self.pid = rank
        self.t0_ns = clock_offset.wall_minus_mono_ns()  # epoch ns = now_ns() + t0_ns
        self.t_open = _core.now_ns() if ai_root else None  # a training run's ai_root event starts here
        self.next_id = 0
        self.dropped = 0
        self.events = 0
        self._named: Set[int] = set()  # output tids with a thread_name line
        self._seen = np.zeros(0, dtype=np.uint32)  # file hashes with an FH line, sorted
        self._thread_names = thread_names or (lambda tid: "trainer" if tid == 0 else f"reader {tid - 1}")
        self.failed: Optional[str] = None  # why the trace was dropped (a full disk): the run goes on without it
        self._gz: Optional[gzip.GzipFile] = None
        with self._guard():
            self._gz = gzip.open(self.path, "wb", compresslevel=GZIP_LEVEL) if self.compressed else None
            if self._gz is None:
                with open(self.path, "w") as f:
                    f.write("[\n")
            else:
                self._gz.write(b"[\n")
        self._lines([self._meta("process_name", 0, {"name": f"rank {rank}"})])
        if clock is not None:  # this rank's host and clock offset against rank 0 (dlio.system.clock_offset)
            self._lines([self._meta(CLOCK_META, 0, {"rank": rank, **clock})])

    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        """A write of the trace that fails drops the trace (file removed), never the run."""
        try:
            yield
        except OSError as e:
            self.failed = os_error_message(e, e.filename or self.path)
            gz, self._gz = getattr(self, "_gz", None), None
            try:
                if gz is not None:
                    gz.close()
            except OSError:
                pass
            try:
                os.unlink(self.path)
            except OSError:
                pass

    def _meta(self, name: str, tid: int, args: Dict[str, Any]) -> str:
        line = {
            "id": self.next_id,
            "name": name,
            "cat": "dftracer",
            "pid": self.pid,
            "tid": tid,
            "ph": "M",
            "args": args,
        }
        self.next_id += 1
        return json.dumps(line, separators=(",", ":"))

    def _lines(self, lines: Sequence[str]) -> None:
        if not lines or self.failed:
            return
        text = "\n".join(lines) + "\n"
        with self._guard():
            if self._gz is not None:
                self._gz.write(text.encode())
            else:
                with open(self.path, "a") as f:
                    f.write(text)

    def _write_events(self, ev: np.ndarray, paths: Sequence[str], cat: str) -> Tuple[int, np.ndarray, np.ndarray]:
        """The C writer formats the events; a gzip file gets them through a scratch file next to
        it (the text can be large: not held in memory), compressed by zlib in C."""
        args = (ev, paths, self.pid, self.t0_ns, self.next_id, cat, self._seen)
        if self._gz is None:
            return _core.write_trace(self.path, *args)
        with tempfile.TemporaryFile(dir=os.path.dirname(os.path.abspath(self.path))) as tmp:
            out = _core.write_trace(tmp.fileno(), *args)
            tmp.seek(0)
            shutil.copyfileobj(tmp, self._gz, 1 << 20)
        self._gz.flush()  # a reader sees every finished run even if the process dies later
        return out

    def add_run(self, res: Dict[str, Any], paths: Sequence[str], name: Optional[str] = None, **args: Any) -> None:
        """Append the events of one C run (res from Run(..., trace=True).execute()), and a span
        `name` over its measured window when name is given."""
        ev = res.get("trace")
        if ev is None:
            return
        self.dropped += int(res.get("trace_dropped", 0))
        if len(ev) and not self.failed:
            with self._guard():
                self.next_id, new, lanes = self._write_events(ev, paths, io_category(res.get("trace_engine", "posix")))
                self._seen = np.union1d(self._seen, new).astype(np.uint32)
                self.events += len(ev)
            meta: List[str] = []
            for t in np.flatnonzero(lanes) if not self.failed else []:
                base = self._thread_names(int(t))
                for lane in range(int(lanes[t])):
                    tid = int(t) * TRACE_LANES + lane
                    if tid not in self._named:
                        self._named.add(tid)
                        meta.append(
                            self._meta("thread_name", tid, {"name": base if lane == 0 else f"{base} slot {lane}"})
                        )
            self._lines(meta)
        if name is not None and res["t_end"] >= res["t_start"]:
            self.span(name, res["t_start"], res["t_end"] - res["t_start"], **args)

    def span(
        self, name: str, t_start_ns: int, dur_ns: int, cat: Optional[str] = None, tid: int = 0, **args: Any
    ) -> None:
        """One complete event of a Python-side phase (times from _core.now_ns()) on thread tid's
        first lane."""
        if cat is None:
            cat, name = AI_EVENTS.get(name, ("dlio_benchmark", name))
        t = int(t_start_ns) + self.t0_ns
        ts, te = _us(t), _us(t + int(dur_ns))
        line = (
            f'{{"id":{self.next_id},"name":{json.dumps(name)},"cat":{json.dumps(cat)},'
            f'"pid":{self.pid},"tid":{int(tid) * TRACE_LANES},"ts":{ts},'
            f'"dur":{te - ts},"ph":"X","args":{json.dumps(args, separators=(",", ":"))}}}'
        )
        self.next_id += 1
        self.events += 1
        self._lines([line])

    @contextlib.contextmanager
    def phase(self, name: str, cat: Optional[str] = None, **args: Any) -> Iterator[None]:
        """with tracer.phase("checkpoint.save", epoch=1): ... -> one span around the block."""
        t = _core.now_ns()
        try:
            yield
        finally:
            self.span(name, t, _core.now_ns() - t, cat=cat, **args)

    def close(self) -> None:
        if self.dropped:
            self.span("trace_dropped", _core.now_ns(), 0, cat="dftracer", dropped=self.dropped)
        if self.t_open is not None:
            self.span(ROOT_EVENT[1], self.t_open, _core.now_ns() - self.t_open, cat=ROOT_EVENT[0])
        if self.failed:
            return
        with self._guard():
            if self._gz is not None:
                self._gz.write(b"]\n")
                self._gz.close()
                self._gz = None
                return
            with open(self.path, "a") as f:
                f.write("]\n")


@contextlib.contextmanager
def maybe_phase(tracer: Optional[Tracer], name: str, **args: Any) -> Iterator[None]:
    """tracer.phase(...) when tracing, else nothing."""
    if tracer is None:
        yield
    else:
        with tracer.phase(name, **args):
            yield


def open_pfw(path: str) -> IO[str]:
    """A .pfw or .pfw.gz file as text (gzip told by its first bytes, whatever its name)."""
    with open(path, "rb") as f:
        magic = f.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def read_pfw(path: str) -> List[Dict[str, Any]]:
    """The events of a .pfw or .pfw.gz file (list of dicts): every line but "[" / "]", a trailing
    comma allowed. Fractional ts/dur (older files) are parsed as Decimal so that sums are exact."""
    out: List[Dict[str, Any]] = []
    with open_pfw(path) as f:
        for line in f:
            line = line.strip()
            if not line or line in ("[", "]"):
                continue
            out.append(json.loads(line.rstrip(","), parse_float=Decimal))
    return out
