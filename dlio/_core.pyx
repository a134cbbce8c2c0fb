# cython: language_level=3, boundscheck=False, wraparound=False
"""The binding to the C core (src/dlio_core). Declarations live in _core.pxd only.

The GIL is released once around a whole run (Run.execute); nothing in the C core calls back into
Python except the optional per-step hook (an MPI barrier), once per step, never per read.
A C status (-errno) becomes an OSError subclass (errno picks FileNotFoundError, PermissionError ...)
carrying the path and offset; RunError keeps the partial results of a failed run.
"""
from libc.stdint cimport uint8_t, uint32_t, uint64_t
from libc.stdlib cimport malloc, calloc, free
from libc.string cimport memset, memcpy
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_WRITABLE, PyBUF_SIMPLE, PyBUF_ANY_CONTIGUOUS
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_IsValid

import errno
import os
import numpy as np
cimport numpy as cnp

from dlio._core cimport *

cnp.import_array()

HIST_NR = DC_HIST_NR
COMPUTE_SPIN_NS = DC_COMPUTE_SPIN_NS
CAP_ASYNC = DC_CAP_ASYNC
CAP_DIRECT = DC_CAP_DIRECT
CAP_WRITE = DC_CAP_WRITE
CAP_NOIO = DC_CAP_NOIO
ENG_REGBUFS = DC_ENG_REGBUFS
ENG_REGFILES = DC_ENG_REGFILES
ENG_SQPOLL = DC_ENG_SQPOLL
ENG_FADV_RANDOM = DC_ENG_FADV_RANDOM
ENG_FADV_SEQ = DC_ENG_FADV_SEQ

OP_DTYPE = np.dtype([("file", "<u4"), ("op", "u1"), ("flags", "u1"), ("pad", "<u2"),
                     ("offset", "<u8"), ("length", "<u8")])
OVERLAY_DTYPE = np.dtype([("offset", "<u8"), ("len", "<u8"), ("data", "<u8")])
STEP_DTYPE = np.dtype([("first_op", "<u8"), ("nops", "<u4"), ("nsamples", "<u4"), ("compute_ns", "<u8")])
TRACE_DTYPE = np.dtype([("t_start", "<u8"), ("dur", "<u8"), ("offset", "<u8"), ("bytes", "<u8"),
                        ("step", "<u8"), ("file", "<u4"), ("tid", "<u2"), ("kind", "u1"), ("pad", "u1")])
TR_READ, TR_WRITE, TR_SAMPLE, TR_FETCH, TR_COMPUTE = DC_TR_READ, DC_TR_WRITE, DC_TR_SAMPLE, DC_TR_FETCH, DC_TR_COMPUTE
TRACE_LANES = DC_TRACE_LANES   # a written event's tid = thread * TRACE_LANES + its in-flight lane
OP_READ = 0
OP_WRITE = 1
OPF_OPEN = 1
OPF_CLOSE = 2
OPF_FSYNC = 4


class RunError(OSError):
    """A run stopped on an error. .result holds what was measured up to it; .path/.offset/.what say where."""

    def __init__(self, err, message, path=None, offset=None, what=None, result=None):
        super().__init__(err, message)
        self.filename = path
        self.offset = offset
        self.what = what
        self.result = result

    def __str__(self):
        return self.strerror


cdef int _check(int rc, what, path=None) except -1:
    if rc < 0:
        raise OSError(-rc, f"{what}: {os.strerror(-rc)}", path)
    return rc


def now_ns():
    return dc_now_ns()


def timer_overhead_ns(unsigned n=1000000):
    return dc_timer_overhead_ns(n)


def timer_source():
    return dc_timer_source().decode()


def compute(uint64_t ns, int mode=0):
    """Emulate ns of compute (0 = spin, 1 = hybrid); returns the achieved ns."""
    cdef uint64_t got
    with nogil:
        got = dc_compute(ns, mode)
    return got


def fill_random(buf, uint64_t seed):
    """Fill a writable contiguous buffer with deterministic pseudo-random bytes (GIL released)."""
    cdef Py_buffer view
    PyObject_GetBuffer(buf, &view, PyBUF_WRITABLE | PyBUF_ANY_CONTIGUOUS)
    try:
        with nogil:
            dc_fill_random(view.buf, <size_t>view.len, seed)
    finally:
        PyBuffer_Release(&view)


def write_random(int fd, uint64_t offset, uint64_t length, uint64_t seed, size_t chunk=1 << 20):
    """Write length pseudo-random bytes (the stream of seed) to fd at offset (GIL released)."""
    cdef int rc
    with nogil:
        rc = dc_write_random(fd, offset, length, seed, chunk)
    _check(rc, "write")


# dc_crc32c and dc_crc32: the checksum of a buffer, continued from crc
ctypedef uint32_t (*_crc_fn)(uint32_t crc, const void *buf, size_t len) noexcept nogil


cdef object _crc_of(_crc_fn fn, data, uint32_t crc):
    """fn over the bytes of data (any contiguous buffer), with the GIL released."""
    cdef Py_buffer view
    cdef uint32_t out
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE | PyBUF_ANY_CONTIGUOUS)
    try:
        with nogil:
            out = fn(crc, view.buf, <size_t>view.len)
    finally:
        PyBuffer_Release(&view)
    return out


def crc32c(data, uint32_t crc=0):
    return _crc_of(dc_crc32c, data, crc)


def copy_timed(dst, src, uint64_t nbytes):
    """Copy nbytes out of src into dst with the GIL released: a checkpoint's snapshot into host memory
    (dlio.checkpoint.async_save). A buffer smaller than nbytes is a staging buffer: min(len(dst),
    len(src)) bytes are copied over and over until nbytes went. Returns the copy's ns."""
    cdef Py_buffer d, s
    cdef uint64_t left = nbytes, n, chunk, t0
    PyObject_GetBuffer(dst, &d, PyBUF_WRITABLE | PyBUF_ANY_CONTIGUOUS)
    try:
        PyObject_GetBuffer(src, &s, PyBUF_SIMPLE | PyBUF_ANY_CONTIGUOUS)
    except BaseException:
        PyBuffer_Release(&d)
        raise
    try:
        chunk = <uint64_t>min(d.len, s.len)
        if chunk == 0 and nbytes:
            raise ValueError("copy_timed: empty buffer")
        with nogil:
            t0 = dc_now_ns()
            while left:
                n = chunk if left > chunk else left
                memcpy(d.buf, s.buf, n)
                left -= n
            t0 = dc_now_ns() - t0
    finally:
        PyBuffer_Release(&s)
        PyBuffer_Release(&d)
    return t0


def dio_align(path):
    """(memory alignment, offset alignment, from_statx) for O_DIRECT on path."""
    cdef uint32_t mem = 0, off = 0
    cdef int from_statx = 0
    b = os.fsencode(path)
    _check(dc_dio_align(b, &mem, &off, &from_statx), "statx", path)
    return mem, off, bool(from_statx)


def drop_files_cache(paths, durable=False):
    """Drop the cached pages of every file of paths in one call without the GIL (dc_drop_files_cache);
    durable: write dirty pages back with fdatasync. OSError naming the file that failed."""
    names = [os.fsencode(p) for p in paths]
    cdef size_t n = len(names), failed = 0
    cdef const char **c = <const char **>malloc(max(n, 1) * sizeof(char *))
    cdef int rc, d = 1 if durable else 0
    if c == NULL:
        raise MemoryError()
    try:
        for i in range(n):
            c[i] = names[i]
        with nogil:
            rc = dc_drop_files_cache(c, n, d, &failed)
    finally:
        free(c)
    _check(rc, "posix_fadvise(DONTNEED)", paths[failed] if rc else "")


def drop_all_caches():
    cdef int rc
    with nogil:
        rc = dc_drop_all_caches()
    _check(rc, "drop_caches", "/proc/sys/vm/drop_caches")


def engines():
    """[(name, caps, available, why)] for every engine the registry knows, compiled in or not."""
    cdef char why[256]
    cdef const dc_engine_ops *ops
    out = []
    names = []
    for i in range(dc_engine_count()):
        ops = dc_engine_at(i)
        names.append((ops.name.decode(), ops.caps))
    if "io_uring" not in [n for n, _ in names]:
        names.insert(1, ("io_uring", DC_CAP_ASYNC | DC_CAP_DIRECT | DC_CAP_WRITE))
    mpiio_why = None
    if "mpiio" not in [n for n, _ in names]:
        # The MPI-IO engine is a separate extension (dlio._mpiio); dlio.system.mpi registers it, or says why not.
        from dlio.system import mpi
        mpiio_why = mpi.register_mpiio()
        if mpiio_why is None:
            return engines()
    for name, caps in names:
        why[0] = 0
        rc = dc_engine_available(name.encode(), why, sizeof(why))
        out.append((name, caps, rc == 0, why.decode(errors="replace") if rc != 0 else ""))
    if mpiio_why is not None:
        out.append(("mpiio", DC_CAP_WRITE, False, mpiio_why))
    return out


def register_engine(capsule):
    """Add an engine built outside the core: a PyCapsule named "dlio_core.engine_ops" holding a
    const struct dc_engine_ops * that lives as long as the process. The same name twice is a no-op."""
    cdef const dc_engine_ops *ops = <const dc_engine_ops *>PyCapsule_GetPointer(capsule, "dlio_core.engine_ops")
    _check(dc_engine_register(ops), "register engine")


def hist_bucket_values():
    """Midpoint in ns of each histogram bucket (numpy uint64, length HIST_NR)."""
    out = np.empty(DC_HIST_NR, dtype=np.uint64)
    cdef uint64_t[::1] v = out
    for i in range(DC_HIST_NR):
        v[i] = dc_hist_value(i)
    return out


def hist_index(uint64_t ns):
    return dc_hist_index(ns)


cdef dict _hist_dict(const dc_hist *h):
    buckets = np.empty(DC_HIST_NR, dtype=np.uint64)
    cdef uint64_t[::1] b = buckets
    memcpy(&b[0], &h.bucket[0], DC_HIST_NR * sizeof(uint64_t))
    return {"count": h.count, "min": h.min if h.count else 0, "max": h.max,
            "sum": h.sum, "sumsq": h.sumsq, "buckets": buckets}


def hist_from_values(values):
    """Histogram (the dict Run returns) of the given ns values, built by the C code (for tests)."""
    cdef dc_hist *h = <dc_hist *>malloc(sizeof(dc_hist))
    if h == NULL:
        raise MemoryError()
    try:
        dc_hist_init(h)
        for v in values:
            dc_hist_add(h, <uint64_t>v)
        d = _hist_dict(h)
        d["c_percentiles"] = {p: dc_hist_percentile(h, p) for p in (0.0, 50.0, 90.0, 99.0, 99.9, 100.0)}
        return d
    finally:
        free(h)


cdef int _py_step_hook(void *ctx, uint64_t step) noexcept with gil:
    try:
        (<object>ctx)(step)
        return 0
    except BaseException:
        return -5  # -EIO: the hook (an MPI barrier) failed; the runner stops


# A C step hook handed over as a PyCapsule named "dlio_core.step_hook" (e.g. dlio._mpiio's MPI
# barrier): it points to this pair, which must live as long as the capsule.
cdef struct c_step_hook_pair:
    int (*fn)(void *ctx, uint64_t step) noexcept nogil
    void *ctx


cdef class Run:
    """One execution of a plan by the C runner. Holds (pins) every buffer C touches.

    kind: "io" or "train". Call execute() from any thread (it releases the GIL for the whole run);
    request_stop() and progress() may be called from another thread meanwhile.
    """
    cdef dc_run_config cfg
    cdef dc_run_result res
    cdef dc_progress prog
    cdef dc_trace tr          # tracing buffers (allocated by the C run when cfg.trace is set)
    cdef volatile int stop_flag
    cdef const char **cpaths
    cdef const char **chints
    cdef object keep          # Python objects whose memory C reads
    cdef object bad_files     # skip_bad_files: per path, 1 once its file failed during the run
    cdef object step_hook
    cdef readonly str kind
    cdef readonly list paths
    cdef readonly object nthreads_stats
    cdef dc_thread_stats *tstats
    cdef dc_step_times *stimes
    cdef bint executed

    def __cinit__(self):
        self.cpaths = NULL
        self.chints = NULL
        self.tstats = NULL
        self.stimes = NULL
        memset(&self.cfg, 0, sizeof(self.cfg))
        memset(&self.res, 0, sizeof(self.res))
        memset(&self.prog, 0, sizeof(self.prog))
        memset(&self.tr, 0, sizeof(self.tr))

    def __init__(self, str kind, str engine, paths, ops, *, unsigned threads=1, unsigned qd=1,
                 bint direct=False, thread_first_op=None, uint64_t runtime_ns=0, uint64_t ramp_ns=0,
                 uint64_t bytes_limit=0, bint loop=False, steps=None, unsigned prefetch=2,
                 int compute_mode=0, uint64_t preprocess_ns=0, unsigned eng_flags=0,
                 uint64_t delay_ns=0, uint64_t fail_nth=0, int fail_errno=0, step_hook=None,
                 c_step_hook=None, size_t mpi_comm=0, hints=None, trace=False, file_fill=None,
                 file_overlay=None, bint skip_bad_files=False):
        """c_step_hook: a "dlio_core.step_hook" capsule, called by the trainer without the GIL
        (instead of step_hook). mpi_comm: address of an MPI_Comm (mpi4py's MPI._addressof(comm))
        for collective MPI-IO, 0 for independent. hints: [(key, value)] MPI-IO hints.
        trace: True = record every request, sample, batch fetch and compute in per-thread C
        buffers sized from the plan (an int: that many events per thread); the result then has
        "trace" (numpy TRACE_DTYPE) and "trace_dropped".
        file_fill: one uint64 per path: writes to that file carry the 8-byte pattern repeated
        (randomize_tensor: false) instead of unique random bytes.
        file_overlay: one entry per path, None or [(offset, bytes), ...] sorted and not overlapping:
        literal bytes (a file format's headers) that the writes covering them carry.
        skip_bad_files (train): a sample whose file fails to open or read during the run is left out,
        not a failure; the result then has "skipped" (samples) and "bad_files" (path indices)."""
        if kind not in ("io", "train"):
            raise ValueError(f"kind must be 'io' or 'train', not {kind!r}")
        self.kind = kind
        self.paths = list(paths)
        ops = np.ascontiguousarray(ops, dtype=OP_DTYPE)
        self.keep = [ops]
        self._set_files(ops)
        self._set_engine(engine, qd, eng_flags, delay_ns, fail_nth, fail_errno, mpi_comm, hints)
        self.cfg.threads = threads
        self.cfg.direct = direct
        self.cfg.stop = &self.stop_flag
        self.cfg.progress = &self.prog
        if kind == "io":
            self._set_io(len(ops), threads, thread_first_op, runtime_ns, ramp_ns, bytes_limit, loop)
        else:
            self._set_train(threads, steps, prefetch, compute_mode, preprocess_ns, step_hook, c_step_hook)
        self.tstats = <dc_thread_stats *>calloc(max(1, self.nthreads_stats), sizeof(dc_thread_stats))
        if self.tstats == NULL:
            raise MemoryError()
        self.res.threads = self.tstats
        self.res.step_times = self.stimes
        cdef cnp.ndarray fills
        if file_fill is not None:
            fills = np.ascontiguousarray(file_fill, dtype=np.uint64)
            if len(fills) != len(self.paths):
                raise ValueError("file_fill needs one pattern per path")
            self.keep.append(fills)
            self.cfg.file_fill = <const uint64_t *>cnp.PyArray_DATA(fills)
        if file_overlay is not None:
            self._set_overlay(file_overlay)
        if trace:
            self.tr.cap = 0 if trace is True else <uint64_t>int(trace)
            self.cfg.trace = &self.tr
        cdef cnp.ndarray bad
        self.bad_files = None
        if skip_bad_files and kind == "train":
            bad = np.zeros(max(1, len(self.paths)), dtype=np.uint8)
            self.keep.append(bad)
            self.bad_files = bad
            self.cfg.bad_files = <unsigned char *>cnp.PyArray_DATA(bad)

    cdef _set_overlay(self, file_overlay):
        """Pack the literal ranges per file into the C table (pinned in self.keep)."""
        cdef cnp.ndarray first, table, blob
        per = list(file_overlay)
        if len(per) != len(self.paths):
            raise ValueError("file_overlay needs one entry per path")
        first = np.zeros(len(per) + 1, dtype=np.uint64)
        rows, chunks, at = [], [], 0
        for i, segs in enumerate(per):
            end = 0
            for off, data in (segs or ()):
                if off < end:
                    raise ValueError(f"file_overlay of path {i}: ranges unsorted or overlapping at {off}")
                rows.append((off, len(data), at))
                chunks.append(bytes(data))
                at += len(data)
                end = off + len(data)
            first[i + 1] = len(rows)
        table = np.array(rows, dtype=OVERLAY_DTYPE) if rows else np.zeros(1, dtype=OVERLAY_DTYPE)
        blob = np.frombuffer(b"".join(chunks) or b"\0", dtype=np.uint8)
        self.keep.extend([first, table, blob])
        self.cfg.overlay_first = <const uint64_t *>cnp.PyArray_DATA(first)
        self.cfg.overlays = <const dc_overlay *>cnp.PyArray_DATA(table)
        self.cfg.overlay_data = <const unsigned char *>cnp.PyArray_DATA(blob)

    cdef _set_files(self, cnp.ndarray ops):
        """The path table and the plan's requests (both pinned in self.keep)."""
        bpaths = [os.fsencode(p) for p in self.paths]
        self.cpaths = <const char **>malloc(max(1, len(bpaths)) * sizeof(char *))
        if self.cpaths == NULL:
            raise MemoryError()
        for i, b in enumerate(bpaths):
            self.cpaths[i] = b
        self.keep.append(bpaths)
        self.cfg.paths = self.cpaths
        self.cfg.npaths = len(bpaths)
        self.cfg.ops = <const dc_op *>cnp.PyArray_DATA(ops) if len(ops) else NULL
        self.cfg.nops = len(ops)
        self.cfg.max_len = int(ops["length"].max()) if len(ops) else 0

    cdef _set_engine(self, str engine, unsigned qd, unsigned eng_flags, uint64_t delay_ns, uint64_t fail_nth,
                     int fail_errno, size_t mpi_comm, hints):
        eb = engine.encode()
        self.keep.append(eb)
        self.cfg.engine = eb
        self.cfg.eng.qd = qd
        self.cfg.eng.flags = eng_flags
        self.cfg.eng.delay_ns = delay_ns
        self.cfg.eng.fail_nth = fail_nth
        self.cfg.eng.fail_errno = fail_errno
        self.cfg.eng.mpi_comm = <void *>mpi_comm
        if hints:
            bh = [os.fsencode(str(x)) for kv in hints for x in kv]
            self.chints = <const char **>malloc((len(bh) + 2) * sizeof(char *))
            if self.chints == NULL:
                raise MemoryError()
            for i, b in enumerate(bh):
                self.chints[i] = b
            self.chints[len(bh)] = NULL
            self.chints[len(bh) + 1] = NULL
            self.keep.append(bh)
            self.cfg.eng.hints = self.chints

    cdef _set_io(self, size_t nops, unsigned threads, thread_first_op, uint64_t runtime_ns, uint64_t ramp_ns,
                 uint64_t bytes_limit, bint loop):
        """An io run: each thread's share of the requests, and the time or byte budget."""
        cdef cnp.ndarray tfo
        if thread_first_op is None:
            thread_first_op = np.linspace(0, nops, threads + 1).astype(np.uint64)
        tfo = np.ascontiguousarray(thread_first_op, dtype=np.uint64)
        if len(tfo) != threads + 1:
            raise ValueError("thread_first_op needs threads + 1 entries")
        self.keep.append(tfo)
        self.cfg.thread_first_op = <const uint64_t *>cnp.PyArray_DATA(tfo)
        self.cfg.runtime_ns = runtime_ns
        self.cfg.ramp_ns = ramp_ns
        self.cfg.bytes_limit = bytes_limit
        self.cfg.loop = loop
        self.nthreads_stats = threads

    cdef _set_train(self, unsigned threads, steps, unsigned prefetch, int compute_mode, uint64_t preprocess_ns,
                    step_hook, c_step_hook):
        """A train run: its steps, the prefetch and compute emulation, and the per-step hook."""
        cdef cnp.ndarray sta
        if steps is None:
            raise ValueError("a train run needs steps")
        sta = np.ascontiguousarray(steps, dtype=STEP_DTYPE)
        self.keep.append(sta)
        self.cfg.steps = <const dc_step *>cnp.PyArray_DATA(sta) if len(sta) else NULL
        self.cfg.nsteps = len(sta)
        self.cfg.prefetch = prefetch
        self.cfg.compute_mode = compute_mode
        self.cfg.preprocess_ns_per_sample = preprocess_ns
        if step_hook is not None and c_step_hook is not None:
            raise ValueError("give step_hook or c_step_hook, not both")
        self.step_hook = step_hook
        if step_hook is not None:
            self.cfg.step_hook = _py_step_hook
            self.cfg.hook_ctx = <void *>step_hook
        elif c_step_hook is not None:
            pair = <c_step_hook_pair *>PyCapsule_GetPointer(c_step_hook, "dlio_core.step_hook")
            self.cfg.step_hook = pair.fn
            self.cfg.hook_ctx = pair.ctx
            self.keep.append(c_step_hook)
        self.nthreads_stats = threads if threads > 0 else 1
        self.stimes = <dc_step_times *>calloc(max(1, len(sta)), sizeof(dc_step_times))
        if self.stimes == NULL:
            raise MemoryError()

    def __dealloc__(self):
        free(self.cpaths)
        free(self.chints)
        free(self.tstats)
        free(self.stimes)
        dc_trace_free(&self.tr)

    def request_stop(self):
        self.stop_flag = 1

    def progress(self):
        """(ops, bytes, steps) so far: relaxed reads of counters the C threads update."""
        return (dc_load_relaxed_u64(&self.prog.ops), dc_load_relaxed_u64(&self.prog.bytes),
                dc_load_relaxed_u64(&self.prog.steps))

    def started_ns(self):
        """now_ns() when the first step began fetching (a train run's), 0 before: where the exact
        figures' window starts, so the live display measures over the same time."""
        return dc_load_relaxed_u64(&self.prog.t_first_fetch)

    def execute(self):
        """Run the plan (GIL released throughout). Returns the result dict; raises RunError."""
        if self.executed:
            raise RuntimeError("a Run executes once")
        self.executed = True
        cdef int rc
        if self.kind == "io":
            with nogil:
                rc = dc_run_io(&self.cfg, &self.res)
        else:
            with nogil:
                rc = dc_run_train(&self.cfg, &self.res)
        result = self._result()
        if rc < 0:
            e = self.res.error
            err = e.err if e.err else -rc
            path = self.paths[e.file] if e.file < len(self.paths) else None
            what = e.what.decode(errors="replace") or "run"
            reason = ("unexpected end of file (the file is shorter than the plan expects)" if err == errno.ENODATA
                      else "not a regular file (a FIFO, socket or device)" if err == errno.ESPIPE
                      else os.strerror(err))
            msg = f"{what} failed: {reason}"
            if path is not None:
                msg += f" ({path} at offset {e.offset})"
            raise RunError(err, msg, path=path, offset=e.offset, what=what, result=result)
        return result

    cdef dict _result(self):
        threads = [{"ops": self.tstats[i].ops, "bytes": self.tstats[i].bytes,
                    "errors": self.tstats[i].errors, "cpu_ns": self.tstats[i].cpu_ns,
                    "fsync_ns": self.tstats[i].fsync_ns, "minflt": self.tstats[i].minflt,
                    "majflt": self.tstats[i].majflt}
                   for i in range(self.nthreads_stats)]
        out = {"t_start": self.res.t_start, "t_end": self.res.t_end, "ops": self.res.ops,
               "bytes": self.res.bytes, "errors": self.res.errors, "steps_done": self.res.steps_done,
               "stopped": bool(self.res.stopped), "lat": _hist_dict(&self.res.lat),
               "threads": threads, "qd_used": self.res.qd_used,
               "eng_flags_used": self.res.eng_flags_used, "skipped": self.res.skipped,
               "bad_files": [] if self.bad_files is None else np.flatnonzero(self.bad_files).tolist()}
        cdef uint64_t[:, ::1] st
        if self.kind == "io":  # each direction apart, for a mixed plan (fio's read and write sections)
            out["ops_write"] = self.res.ops_write
            out["bytes_write"] = self.res.bytes_write
            out["lat_read"] = _hist_dict(&self.res.lat_read)
            out["lat_write"] = _hist_dict(&self.res.lat_write)
        if self.kind == "train":
            out["sample_lat"] = _hist_dict(&self.res.sample_lat)
            out["trainer_cpu_ns"] = self.res.trainer_cpu_ns
            n = self.cfg.nsteps
            arr = np.zeros((n, 5), dtype=np.uint64)
            if n:
                st = arr
                memcpy(&st[0, 0], self.stimes, n * sizeof(dc_step_times))
            out["step_times"] = {"t_fetch": arr[:, 0], "t_ready": arr[:, 1], "t_end": arr[:, 2],
                                 "compute_ns": arr[:, 3], "bytes": arr[:, 4]}
        if self.cfg.trace != NULL:
            out["trace_dropped"] = dc_trace_dropped(&self.tr)
            out["trace"] = self._trace_events()
            out["trace_engine"] = (<bytes>self.cfg.engine).decode()
        return out

    cdef object _trace_events(self):
        """The recorded events of every thread, in one TRACE_DTYPE array (buffers then freed)."""
        cdef uint64_t n = dc_trace_count(&self.tr), at = 0
        cdef unsigned b
        cdef cnp.ndarray ev = np.empty(n, dtype=TRACE_DTYPE)
        cdef char *dst = <char *>cnp.PyArray_DATA(ev)
        for b in range(self.tr.nbufs):
            if self.tr.bufs[b].n:
                memcpy(dst + at * sizeof(dc_trace_event), self.tr.bufs[b].ev,
                       self.tr.bufs[b].n * sizeof(dc_trace_event))
                at += self.tr.bufs[b].n
        dc_trace_free(&self.tr)
        return ev



def write_trace(dest, events, paths, int pid, uint64_t t0_ns, uint64_t id_base=0, cat="POSIX", seen=None):
    """Append events (TRACE_DTYPE) to dest (a .pfw path, or an open fd) as DFTracer JSON lines,
    formatted and written in bulk by the C writer with the GIL released. paths: the run's path
    table; pid: the rank; t0_ns: added to every time (epoch ns - dc_now_ns()); cat: the category of
    read/write events (the engine, "POSIX" for posix); seen: sorted uint32 file hashes whose "FH"
    line the file already has. Returns (next line id, hashes of the FH lines written, lanes used
    per input tid (uint32, one per tid up to the largest))."""
    if sizeof(dc_trace_event) != TRACE_DTYPE.itemsize:
        raise RuntimeError("TRACE_DTYPE does not match struct dc_trace_event")
    cdef cnp.ndarray ev = np.ascontiguousarray(events, dtype=TRACE_DTYPE)
    cdef cnp.ndarray seen_a = np.ascontiguousarray(np.zeros(0) if seen is None else seen, dtype=np.uint32)
    cdef cnp.ndarray new_a = np.zeros(max(1, len(paths)), dtype=np.uint32)
    cdef cnp.ndarray lanes_a = np.zeros(int(ev["tid"].max()) + 1 if len(ev) else 0, dtype=np.uint32)
    bpaths = [os.fsencode(p) for p in paths]
    bcat = cat.encode()
    cdef const char **cp = <const char **>malloc(max(1, len(bpaths)) * sizeof(char *))
    if cp == NULL:
        raise MemoryError()
    cdef size_t n = len(ev), nnew = 0
    cdef const dc_trace_event *evp = <const dc_trace_event *>cnp.PyArray_DATA(ev)
    cdef uint64_t next_id = id_base
    cdef dc_pfw_opts opt
    cdef int rc, fd
    memset(&opt, 0, sizeof(opt))
    opt.pid = pid
    opt.t0_ns = t0_ns
    opt.io_cat = bcat
    opt.fh_seen = <const uint32_t *>cnp.PyArray_DATA(seen_a)
    opt.nseen = len(seen_a)
    opt.fh_new = <uint32_t *>cnp.PyArray_DATA(new_a)
    opt.nnew = &nnew
    opt.lanes = <uint32_t *>cnp.PyArray_DATA(lanes_a)
    opt.ntids = len(lanes_a)
    try:
        for i, b in enumerate(bpaths):
            cp[i] = b
        if n and len(bpaths) == 0 and (ev["file"] != 0xFFFFFFFF).any():
            raise ValueError("events name files but no paths were given")
        if n and len(bpaths) and int(ev["file"][ev["file"] != 0xFFFFFFFF].max(initial=0)) >= len(bpaths):
            raise ValueError("an event's file index is outside the path table")
        fd = dest if isinstance(dest, int) else os.open(dest, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC,
                                                        0o644)
        try:
            with nogil:
                rc = dc_trace_write_pfw(fd, evp, n, cp, &opt, &next_id)
        finally:
            if not isinstance(dest, int):
                os.close(fd)
        _check(rc, "write trace", str(dest))
    finally:
        free(cp)
    return next_id, new_a[:nnew].copy(), lanes_a


def json_escape(s):
    """The C writer's JSON escaping of s (bytes or str), for tests."""
    b = os.fsencode(s) if isinstance(s, str) else bytes(s)
    cdef size_t cap = len(b) * 6 + 1
    cdef char *out = <char *>malloc(cap)
    if out == NULL:
        raise MemoryError()
    try:
        n = dc_json_escape(b, out, cap)
        _check(n, "json escape")
        return out[:n].decode("utf-8", errors="surrogateescape")
    finally:
        free(out)


def trace_fhash(path):
    return dc_trace_fhash(os.fsencode(path))


# --- Histograms of latencies measured outside the C core (S3 requests timed by the client library) ---

def hist_from_array(ns):
    """Histogram (the dict Run returns) of a numpy array of latencies in ns, filled by the C code with
    the GIL released: requests timed elsewhere (dlio.storage.s3) land in the same buckets as file reads."""
    arr = np.ascontiguousarray(ns, dtype=np.uint64)
    cdef const uint64_t[::1] v = arr
    cdef Py_ssize_t i, n = v.shape[0]
    cdef dc_hist *h = <dc_hist *>malloc(sizeof(dc_hist))
    if h == NULL:
        raise MemoryError()
    try:
        with nogil:
            dc_hist_init(h)
            for i in range(n):
                dc_hist_add(h, v[i])
        return _hist_dict(h)
    finally:
        free(h)


# ---- dataset generation from segment programs (gen.h) ----
# A program's segments as numpy records, in dc_gen_seg's layout.
GEN_SEG_DTYPE = np.dtype([("kind", "<u4"), ("arg", "<u4"), ("a", "<u8"), ("b", "<u8")])


def _gen_segs(segs):
    a = np.ascontiguousarray(segs, dtype=GEN_SEG_DTYPE)
    if a.ndim != 1:
        raise ValueError("a program is a 1-d array of GEN_SEG_DTYPE")
    return a


def gen_size(segs):
    """Bytes a program writes."""
    cdef cnp.ndarray a = _gen_segs(segs)
    return dc_gen_size(<const dc_gen_seg *>cnp.PyArray_DATA(a), <uint64_t>a.shape[0])


def gen_render(segs, blob, uint64_t seed):
    """The bytes a program writes for a file of this seed (what gen_files writes), as bytes."""
    cdef cnp.ndarray a = _gen_segs(segs)
    cdef const unsigned char[::1] bl = np.frombuffer(bytes(blob) or b"\0", np.uint8)
    cdef uint64_t n = dc_gen_size(<const dc_gen_seg *>cnp.PyArray_DATA(a), <uint64_t>a.shape[0])
    cdef cnp.ndarray out = np.empty(n, np.uint8)
    cdef int rc
    with nogil:
        rc = dc_gen_render(<const dc_gen_seg *>cnp.PyArray_DATA(a), <uint64_t>a.shape[0], &bl[0], seed,
                           <unsigned char *>cnp.PyArray_DATA(out), n)
    _check(rc, "render")
    return out.tobytes()


def gen_files(tmps, finals, seeds, first, counts, segs, blob, bint fsync=False, stop=None, counters=None,
              bint direct=False):
    """Write files (each created unnamed and linked as finals[i] once complete; where the filesystem
    has no unnamed files, written as tmps[i] and renamed; tmps may be one suffix: the temporary name
    is then "." + the final name + suffix, beside it) from the programs
    segs[first[i]:first[i]+counts[i]] and seeds[i], in order, with the GIL released (direct: O_DIRECT,
    whole aligned blocks, each file's last partial block through the page cache).
    stop: int32 array of 1 (non-zero stops between files); counters: uint64 array [bytes, files]
    advanced after each file (read by another thread for progress). Raises OSError naming the file."""
    cdef Py_ssize_t n = len(finals), i
    cdef cnp.ndarray a = _gen_segs(segs)
    cdef cnp.ndarray sd = np.ascontiguousarray(seeds, dtype=np.uint64)
    cdef cnp.ndarray fi = np.ascontiguousarray(first, dtype=np.uint64)
    cdef cnp.ndarray ct = np.ascontiguousarray(counts, dtype=np.uint64)
    suffix = os.fsencode(tmps) if isinstance(tmps, str) else None
    if (suffix is None and len(tmps) != n) or sd.shape[0] != n or fi.shape[0] != n or ct.shape[0] != n:
        raise ValueError("gen_files: one tmp, final, seed, first and count per file")
    if n and int((fi + ct).max()) > a.shape[0]:
        raise ValueError("gen_files: a program runs past the segments")
    bl = np.frombuffer(bytes(blob) or b"\0", np.uint8)
    cdef const unsigned char[::1] blv = bl
    cdef cnp.ndarray st = np.zeros(1, np.int32) if stop is None else stop
    cdef cnp.ndarray cn = np.zeros(2, np.uint64) if counters is None else counters
    if st.dtype != np.int32 or cn.dtype != np.uint64 or cn.shape[0] < 2:
        raise ValueError("gen_files: stop is int32[1], counters uint64[2]")
    enc_t = [os.fsencode(p) for p in tmps] if suffix is None else None
    enc_f = [os.fsencode(p) for p in finals]
    cdef dc_gen_file *files = <dc_gen_file *>calloc(max(n, 1), sizeof(dc_gen_file))
    cdef dc_gen_error err
    cdef int rc
    cdef unsigned flags = (DC_GEN_FSYNC if fsync else 0) | (DC_GEN_DIRECT if direct else 0)
    if files == NULL:
        raise MemoryError()
    try:
        for i in range(n):
            if suffix is None:
                files[i].tmp = enc_t[i]
            else:
                files[i].tmp_suffix = suffix
            files[i].path = enc_f[i]
            files[i].seed = (<uint64_t *>cnp.PyArray_DATA(sd))[i]
            files[i].first_seg = (<uint64_t *>cnp.PyArray_DATA(fi))[i]
            files[i].nsegs = (<uint64_t *>cnp.PyArray_DATA(ct))[i]
        memset(&err, 0, sizeof(err))
        with nogil:
            rc = dc_gen_files(files, <uint64_t>n, <const dc_gen_seg *>cnp.PyArray_DATA(a), &blv[0], flags,
                              <volatile int *>cnp.PyArray_DATA(st), <uint64_t *>cnp.PyArray_DATA(cn),
                              <uint64_t *>cnp.PyArray_DATA(cn) + 1, &err)
    finally:
        free(files)
    if rc == -125:  # ECANCELED: stopped between files
        return False
    if rc < 0:
        what = err.what.decode(errors="replace")
        raise OSError(-rc, f"{what}: {os.strerror(-rc)}", os.fsdecode(enc_f[err.file]) if n else None)
    return True


def csv_row(values):
    """A csv row of a 1-d integer array: b"v0,v1,...\\n" (",".join(map(str, values)) + "\\n"), in C."""
    cdef cnp.ndarray v = np.ascontiguousarray(values)
    if v.dtype.kind not in "iu" or not v.dtype.isnative:
        raise ValueError(f"csv_row: native integers only, not {v.dtype}")
    cdef size_t n = v.size, got = 0
    cdef unsigned item = v.dtype.itemsize
    cdef int signed = v.dtype.kind == "i"
    cdef size_t cap = dc_csv_row_cap(n, item)
    cdef cnp.ndarray out = np.empty(cap, np.uint8)
    cdef int rc
    with nogil:
        rc = dc_csv_row(cnp.PyArray_DATA(v), n, item, signed, <char *>cnp.PyArray_DATA(out), cap, &got)
    _check(rc, "csv_row")
    return out[:got].tobytes()


def crc32(data, uint32_t crc=0):
    """CRC-32 (IEEE, as zlib.crc32), as the generator computes it."""
    return _crc_of(dc_crc32, data, crc)


include "_core_vdb.pxi"
# The KV-cache request engine (dlio.kvcache): its own file, one binding.
include "_kvcache.pxi"
