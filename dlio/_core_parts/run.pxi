# Included by _core.pyx: a plan executed by the C runner (src/dlio_core/runner*.c): Run, and the step hooks
# it calls between steps. Declarations are in _core.pxd.


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

    def last_end_ns(self):
        """now_ns() when the latest step ended, 0 before: where the exact figures' window ends once the
        last step is done (a display tick comes later)."""
        return dc_load_relaxed_u64(&self.prog.t_last_end)

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
