# cython: language_level=3, boundscheck=False, wraparound=False
"""The MPI-IO engine (src/dlio_core/engines/mpiio.c) and the trainer's C step barrier.

A separate extension from dlio._core, linked to libmpi, so that dlio._core imports on machines
without MPI. It never initialises MPI (mpi4py does). dlio.system.mpi imports it and hands the engine's ops
table to the core with dlio._core.register_engine(engine_capsule()).

Communicators cross as the address of an MPI_Comm handle (mpi4py's MPI._addressof(comm)).
"""
from cpython.pycapsule cimport PyCapsule_New, PyCapsule_GetContext, PyCapsule_SetContext
from cpython.ref cimport Py_INCREF, Py_DECREF, PyObject
from libc.stdint cimport uint8_t, uint32_t, uint64_t, int64_t
from libc.stdlib cimport malloc, free
from libc.string cimport memset

import os

from dlio._core cimport dc_file, dc_io, dc_engine, dc_engine_opts, dc_engine_ops

cdef extern from "engines/engines.h" nogil:
    const dc_engine_ops dc_mpiio_ops

cdef extern from *:
    """
    #include <stddef.h>
    #include <stdint.h>
    struct dc_mpi_barrier;
    int dc_mpi_step_barrier(void *ctx, uint64_t step);
    struct dc_mpi_barrier *dc_mpi_barrier_new(const void *comm, int nonblocking);
    void dc_mpi_barrier_stop(struct dc_mpi_barrier *b);
    void dc_mpi_barrier_free(struct dc_mpi_barrier *b);
    int dc_mpi_library_version(char *buf, size_t len);
    int dc_mpi_thread_level(void);
    void dc_mpiio_request_stop(int on);
    int dc_mpiio_gave_up(void);
    """
    struct dc_mpi_barrier:
        pass
    int dc_mpi_step_barrier(void *ctx, uint64_t step) noexcept nogil
    dc_mpi_barrier *dc_mpi_barrier_new(const void *comm, int nonblocking) nogil
    void dc_mpi_barrier_stop(dc_mpi_barrier *b) nogil
    void dc_mpi_barrier_free(dc_mpi_barrier *b) nogil
    int dc_mpi_library_version(char *buf, size_t len) nogil
    int dc_mpi_thread_level() nogil
    void dc_mpiio_request_stop(int on) nogil
    int dc_mpiio_gave_up() nogil


# Same layout as dlio._core's c_step_hook_pair: the "dlio_core.step_hook" capsule contract.
cdef struct step_hook_pair:
    int (*fn)(void *ctx, uint64_t step) noexcept nogil
    void *ctx


THREAD_LEVELS = {0: "single", 1: "funneled", 2: "serialized", 3: "multiple"}


def engine_capsule():
    """The engine's ops table for dlio._core.register_engine()."""
    return PyCapsule_New(<void *>&dc_mpiio_ops, "dlio_core.engine_ops", NULL)


def library_version():
    """MPI_Get_library_version() of the MPI this extension is linked to."""
    cdef char buf[8192]
    if dc_mpi_library_version(buf, sizeof(buf)) < 0:
        return ""
    return buf.decode(errors="replace")


def thread_level():
    """MPI_Query_thread() as 'single' / 'funneled' / 'serialized' / 'multiple', None before MPI_Init."""
    lv = dc_mpi_thread_level()
    return None if lv < 0 else THREAD_LEVELS.get(lv, "multiple")


def available():
    """(ok, why) of the engine here (MPI initialised, thread level)."""
    cdef char why[512]
    why[0] = 0
    rc = dc_mpiio_ops.available(why, sizeof(why))
    return rc == 0, why.decode(errors="replace")


def request_stop(bint on=True):
    """Ask the collective runs of this process to stop: at the next request's vote every rank stops
    after the same request (mpiio.c). request_stop(False) before a run clears it."""
    dc_mpiio_request_stop(on)


def gave_up():
    """True when a run of this process stopped without the other ranks (they did not vote within
    the grace: hung or gone); its files were left open and no collective call may follow."""
    return dc_mpiio_gave_up() != 0


def comm_address(comm):
    """Address of the MPI_Comm handle inside an mpi4py communicator (valid while comm lives)."""
    from mpi4py import MPI
    return MPI._addressof(comm)


cdef void _release_owner(object capsule) noexcept:
    cdef void *ctx = PyCapsule_GetContext(capsule)
    if ctx != NULL:
        Py_DECREF(<object>ctx)


cdef class StepBarrier:
    """The trainer's per-step barrier on comm, as a C hook the runner calls without the GIL.

    nonblocking (default): MPI_Ibarrier then MPI_Test until done, giving up when stop() is called
    from another thread (Ctrl-C while another rank is gone); else a plain MPI_Barrier.
    """
    cdef dc_mpi_barrier *b
    cdef step_hook_pair pair
    cdef object comm

    def __cinit__(self, comm, bint nonblocking=True):
        cdef size_t addr = comm_address(comm)
        self.comm = comm          # the handle lives inside it
        self.b = dc_mpi_barrier_new(<const void *>addr, nonblocking)
        if self.b == NULL:
            raise MemoryError()
        self.pair.fn = dc_mpi_step_barrier
        self.pair.ctx = <void *>self.b

    def __dealloc__(self):
        if self.b != NULL:
            dc_mpi_barrier_free(self.b)

    def capsule(self):
        """A "dlio_core.step_hook" capsule for dlio._core.Run(c_step_hook=...); it keeps self alive."""
        cap = PyCapsule_New(<void *>&self.pair, "dlio_core.step_hook", _release_owner)
        Py_INCREF(self)
        PyCapsule_SetContext(cap, <void *>self)
        return cap

    def stop(self):
        dc_mpi_barrier_stop(self.b)

    def __call__(self, uint64_t step=0):
        """Run the barrier once from Python (GIL released). Raises InterruptedError when stopped."""
        cdef int rc
        with nogil:
            rc = dc_mpi_step_barrier(<void *>self.b, step)
        if rc == -4:
            raise InterruptedError("stopped while waiting for the other ranks")
        if rc < 0:
            raise OSError(-rc, f"MPI barrier: {os.strerror(-rc)}")


def read_range(path, uint64_t offset, uint64_t length, comm=None, hints=None):
    """Read [offset, offset + length) of path through the engine itself (its open, submit and
    close), independent or, with comm, collective on comm (every rank of it must call this with
    the same path and length). Returns bytes. For tests and checks: the runner does the real work."""
    cdef dc_engine_opts opts
    cdef dc_engine *e = NULL
    cdef dc_file f
    cdef dc_io io
    cdef int rc
    cdef size_t caddr = comm_address(comm) if comm is not None else 0
    cdef const char **ch = NULL
    memset(&opts, 0, sizeof(opts))
    memset(&f, 0, sizeof(f))
    memset(&io, 0, sizeof(io))
    bpath = os.fsencode(path)
    bh = [os.fsencode(str(x)) for kv in (hints or ()) for x in kv]
    out = bytearray(length)
    cdef char *buf = out
    try:
        if bh:
            ch = <const char **>malloc((len(bh) + 2) * sizeof(char *))
            for i, b in enumerate(bh):
                ch[i] = b
            ch[len(bh)] = NULL
            ch[len(bh) + 1] = NULL
            opts.hints = ch
        opts.qd = 1
        opts.mpi_comm = <void *>caddr
        f.path = bpath
        f.fd = -1
        rc = dc_mpiio_ops.init(&e, &opts, &io, 1)
        if rc < 0:
            raise OSError(-rc, f"mpiio engine init: {os.strerror(-rc)}")
        with nogil:
            rc = dc_mpiio_ops.open(e, &f, 0)
        if rc < 0:
            raise OSError(-rc, f"MPI_File_open: {os.strerror(-rc)}", path)
        io.file = &f
        io.buf = buf
        io.offset = offset
        io.len = length
        io.op = 0
        with nogil:
            dc_mpiio_ops.submit(e, &io)
            dc_mpiio_ops.close(e, &f)
        if io.res < 0:
            raise OSError(<int>-io.res, f"MPI_File_read_at: {os.strerror(<int>-io.res)}", path)
        return bytes(out)
    finally:
        if e != NULL:
            dc_mpiio_ops.cleanup(e)
        free(ch)
