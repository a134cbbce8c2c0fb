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


def buffers_reused():
    """Request-buffer pools the C core's runs took from the ones earlier runs of this process left
    parked (dlio_core/run.h), instead of faulting fresh pages in."""
    return dc_bufpool_reused()


def trim_buffers():
    """Free the request buffers parked for the next run."""
    dc_bufpool_trim()


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


# The rest of the binding, one file per part of the core (dlio/_core_parts/): one module, one namespace.
include "_core_parts/run.pxi"
include "_core_parts/gen.pxi"
include "_core_parts/vdb.pxi"
include "_core_parts/kvcache.pxi"
