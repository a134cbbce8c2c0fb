# The binding of the KV-cache request engine (src/dlio_core/kvcache*.c, kvcache.h), included into
# _core.pyx (declarations in _core.pxd). One KvRun is one trial of one rank: the plan's arrays are
# pinned, dc_kv_run() runs with the GIL released once, and the result comes back as a dict.

KV_REQ_DTYPE = np.dtype([("arrival_ns", "<u8"), ("first_step", "<u4"), ("nsteps", "<u4"), ("conv", "<u4"),
                         ("turn", "<u4"), ("gen", "<u4"), ("prio", "u1"), ("flags", "u1"), ("pad", "<u2")])
KV_STEP_DTYPE = np.dtype([("entry", "<u4"), ("kind", "u1"), ("tier", "u1"), ("pad", "<u2")])
KV_ENTRY_DTYPE = np.dtype([("bytes", "<u8"), ("tokens", "<u4"), ("flags", "<u4")])
KV_LOG_DTYPE = np.dtype([("t_ns", "<u8"), ("bytes", "<u8"), ("entry", "<u4"), ("op", "u1"), ("tier", "u1"),
                         ("phase", "u1"), ("pad", "u1")])
KV_SYNTH, KV_READ, KV_WRITE, KV_READ_OR_WRITE, KV_DEMOTE = 0, 1, 2, 3, 4
KV_TIER_NONE, KV_TIER_CPU, KV_TIER_STORAGE = 0, 1, 2
KV_PROBE, KV_PREFILL_ONLY = 1, 2
KV_WRITTEN_LATER = 1
KV_LOG_READ, KV_LOG_WRITE = 0, 1
KV_PH_PREFILL, KV_PH_DECODE, KV_PH_EVICT = 0, 1, 2
# The names of kvcache.h's counters and histograms, in their enum order.
KV_COUNTS = ("requests", "requests_dropped", "tokens", "storage_ns", "hits", "misses", "system_hits", "user_hits",
             "multi_turn_hits", "mt_hits", "mt_misses", "probes", "prefill_writes", "decode_reads", "read_ops",
             "write_ops", "read_bytes", "write_bytes", "cpu_read_bytes", "cpu_write_bytes", "storage_read_bytes",
             "storage_write_bytes", "storage_reads", "storage_writes", "demotions", "demote_bytes", "evictions",
             "deletes", "delete_bytes", "offloads_cpu", "offloads_storage", "storage_tokens_x1000", "failed_allocs",
             "waits", "conv_evictions", "mt_conv_gone", "users_stopped", "requests_unsent", "requests_cut",
             "capacity_waits")
KV_HISTS = ("storage_read", "storage_read_dev", "storage_read_host", "storage_write", "storage_write_dev",
            "storage_write_host", "demote_write", "demote_write_dev", "cpu_read", "cpu_write", "req_storage",
            "e2e_batch", "e2e_responsive", "e2e_interactive", "generation")
assert len(KV_COUNTS) == DC_KV_NCOUNT and len(KV_HISTS) == DC_KV_NHIST
assert sizeof(dc_kv_req) == KV_REQ_DTYPE.itemsize and sizeof(dc_kv_step) == KV_STEP_DTYPE.itemsize
assert sizeof(dc_kv_entry_spec) == KV_ENTRY_DTYPE.itemsize and sizeof(dc_kv_logrec) == KV_LOG_DTYPE.itemsize


cdef const dc_kv_store_ops *_kv_store(store) except NULL:
    """compat / direct (the file store), null, relay (objects through a helper process), or a store built outside the core: a PyCapsule named
    "dlio_core.kv_store_ops" holding a const struct dc_kv_store_ops * that outlives the run."""
    if store == "null":
        return &dc_kv_store_null
    if store == "relay":
        return &dc_kv_store_relay
    if store in ("compat", "direct"):
        return &dc_kv_store_file
    if PyCapsule_IsValid(store, "dlio_core.kv_store_ops"):
        return <const dc_kv_store_ops *>PyCapsule_GetPointer(store, "dlio_core.kv_store_ops")
    raise ValueError(f"unknown kv store {store!r} (compat, direct, null, relay, or a dlio_core.kv_store_ops capsule)")


cdef void _kv_store_cfg(dc_kv_store_cfg *c, bytes folder, store, uint64_t max_obj, uint64_t chunk, unsigned qd,
                        unsigned drop_check, unsigned workers, uint64_t seed, model):
    c.dir = folder
    c.direct = isinstance(store, str) and store == "direct"
    c.max_obj = max_obj
    c.chunk = chunk
    c.qd = qd
    c.drop_check = drop_check
    c.workers = workers
    c.seed = seed
    c.model.layers, c.model.kv_heads, c.model.head_dim, c.model.dtype_bytes = model


def kv_store_check(store, folder, uint64_t max_obj=4096, uint64_t chunk=8 << 20, unsigned qd=4):
    """None if the store can run in folder, else the reason (direct: io_uring or O_DIRECT refused)."""
    cdef dc_kv_store_cfg c
    cdef char why[256]
    memset(&c, 0, sizeof(c))
    bfolder = os.fsencode(folder)
    _kv_store_cfg(&c, bfolder, store, max_obj, chunk, qd, 0, 1, 0, (0, 0, 0, 0))
    why[0] = 0
    rc = dc_kv_store_check(_kv_store(store), &c, why, sizeof(why))
    if rc == 0:
        return None
    return why.decode(errors="replace") or os.strerror(-rc)


cdef class KvRun:
    """One trial of one rank: the plan (numpy arrays of the dtypes above) and its settings; execute() runs it
    with the GIL released and returns the result dict (raises RunError, carrying it, on an I/O error)."""
    cdef dc_kv_config cfg
    cdef dc_kv_store_cfg scfg
    cdef dc_kv_relay_opts ropts
    cdef dc_kv_result *res
    cdef dc_kv_progress prog
    cdef dc_kv_log log
    cdef volatile int stop_flag
    cdef object keep
    cdef bint executed
    cdef readonly object oplog

    def __cinit__(self):
        self.res = <dc_kv_result *>calloc(1, sizeof(dc_kv_result))
        if self.res == NULL:
            raise MemoryError()
        memset(&self.cfg, 0, sizeof(self.cfg))
        memset(&self.scfg, 0, sizeof(self.scfg))
        memset(&self.prog, 0, sizeof(self.prog))
        memset(&self.log, 0, sizeof(self.log))

    def __dealloc__(self):
        free(self.res)

    def __init__(self, reqs, steps, entries, conv_first, conv_reqs, *, store, folder="", unsigned workers=1,
                 unsigned alloc_slots=1, double duration_s=0, double drain_s=2.0, uint64_t bytes_per_token=0, unsigned decode_batch=32,
                 uint64_t chunk_bytes=0, uint64_t gen_ns_per_token=0, uint64_t cpu_bytes=0, storage_bytes=None,
                 double target_ratio=0.8, double skip_ratio=0.95, bint asap=False, bint drain=False,
                 uint64_t seed=0, uint64_t stage_bytes=0, uint64_t direct_chunk=8 << 20, unsigned direct_qd=4,
                 unsigned drop_check=16, model=(0, 0, 0, 0), uint64_t log_cap=0, bint virtual=False,
                 store_opts=None, relay=None, conv_user=None, uint32_t max_conversations=0):
        """store: compat, direct, null, or a "dlio_core.kv_store_ops" capsule (an object store); store_opts: a
        capsule named "dlio_core.kv_store_opts" with that store's settings (store_cfg.opts).
        drain_s: after the duration (or a DRAIN plan's end), how long requests in flight may finish before they
        stop between steps; request_stop() stops them at once. storage_bytes None: unlimited. log_cap: record up to that many operations (.oplog, KV_LOG_DTYPE).
        virtual: run in virtual time (null store: requests in arrival order, one at a time, no waiting).
        relay: store "relay"'s helper, (socket path, slots file path, bytes per worker's slot).
        max_conversations: the reference's conversation window (0: none, every earlier turn is read);
        conv_user: each conversation's user, whose later requests stop when its conversation leaves the
        window while the user continues it (None: users never stop)."""
        cdef cnp.ndarray a_r = np.ascontiguousarray(reqs, dtype=KV_REQ_DTYPE)
        cdef cnp.ndarray a_s = np.ascontiguousarray(steps, dtype=KV_STEP_DTYPE)
        cdef cnp.ndarray a_e = np.ascontiguousarray(entries, dtype=KV_ENTRY_DTYPE)
        cdef cnp.ndarray a_cf = np.ascontiguousarray(conv_first, dtype=np.uint32)
        cdef cnp.ndarray a_cr = np.ascontiguousarray(conv_reqs, dtype=np.uint32)
        cdef cnp.ndarray a_log
        cdef cnp.ndarray a_cu
        if len(a_cf) < 1:
            raise ValueError("conv_first needs nconv + 1 offsets")
        bfolder = os.fsencode(folder)
        self.keep = [a_r, a_s, a_e, a_cf, a_cr, bfolder]
        self.cfg.reqs = <const dc_kv_req *>cnp.PyArray_DATA(a_r)
        self.cfg.nreqs = len(a_r)
        self.cfg.steps = <const dc_kv_step *>cnp.PyArray_DATA(a_s)
        self.cfg.nsteps = len(a_s)
        self.cfg.entries = <const dc_kv_entry_spec *>cnp.PyArray_DATA(a_e)
        self.cfg.nentries = len(a_e)
        self.cfg.conv_first = <const uint32_t *>cnp.PyArray_DATA(a_cf)
        self.cfg.conv_reqs = <const uint32_t *>cnp.PyArray_DATA(a_cr)
        self.cfg.nconv = len(a_cf) - 1
        self.cfg.max_conversations = max_conversations
        if conv_user is not None:
            a_cu = np.ascontiguousarray(conv_user, dtype=np.uint32)
            if len(a_cu) != self.cfg.nconv:
                raise ValueError("conv_user needs one user per conversation")
            self.keep.append(a_cu)
            self.cfg.conv_user = <const uint32_t *>cnp.PyArray_DATA(a_cu)
            self.cfg.nusers = int(a_cu.max()) + 1 if len(a_cu) else 1
        self.cfg.workers = workers
        self.cfg.alloc_slots = alloc_slots
        self.cfg.duration_ns = <uint64_t>(duration_s * 1e9)
        self.cfg.drain_ns = <uint64_t>(drain_s * 1e9)
        self.cfg.bytes_per_token = bytes_per_token
        self.cfg.decode_batch = decode_batch
        self.cfg.chunk_bytes = chunk_bytes
        self.cfg.gen_ns_per_token = gen_ns_per_token
        self.cfg.cpu_bytes = cpu_bytes
        self.cfg.storage_bytes = 0xFFFFFFFFFFFFFFFF if storage_bytes is None else <uint64_t>storage_bytes
        self.cfg.target_ratio = target_ratio
        self.cfg.skip_ratio = skip_ratio
        self.cfg.flags = (DC_KV_ASAP if asap else 0) | (DC_KV_DRAIN if drain else 0) | (DC_KV_VIRTUAL if virtual else 0)
        self.cfg.seed = seed
        self.cfg.stage_bytes = stage_bytes
        self.cfg.store = _kv_store(store)
        self.cfg.store_cfg = &self.scfg
        self.cfg.stop = &self.stop_flag
        self.cfg.progress = &self.prog
        max_obj = int(a_e["bytes"].max()) if len(a_e) else 0
        if chunk_bytes:
            max_obj = min(max_obj, chunk_bytes)
        _kv_store_cfg(&self.scfg, bfolder, store, max_obj, direct_chunk, direct_qd, drop_check, workers, seed, model)
        if store_opts is not None:
            self.scfg.opts = PyCapsule_GetPointer(store_opts, "dlio_core.kv_store_opts")
            self.keep.append(store_opts)
        if relay is not None:
            bsock, bshm = os.fsencode(relay[0]), os.fsencode(relay[1])
            self.keep += [bsock, bshm]
            self.ropts.sock_path = bsock
            self.ropts.shm_path = bshm
            self.ropts.slot_len = relay[2]
            self.scfg.opts = &self.ropts
        self.keep.append(store)
        self.oplog = None
        if log_cap:
            a_log = np.zeros(log_cap, dtype=KV_LOG_DTYPE)
            self.keep.append(a_log)
            self.log.rec = <dc_kv_logrec *>cnp.PyArray_DATA(a_log)
            self.log.cap = log_cap
            self.cfg.log = &self.log
            self.oplog = a_log

    def request_stop(self):
        self.stop_flag = 1

    def progress(self):
        return {"requests_done": dc_load_relaxed_u64(&self.prog.requests_done),
                "storage_read_bytes": dc_load_relaxed_u64(&self.prog.storage_read_bytes),
                "storage_write_bytes": dc_load_relaxed_u64(&self.prog.storage_write_bytes),
                "queued": dc_load_relaxed_u64(&self.prog.queued)}

    def execute(self):
        cdef int rc
        if self.executed:
            raise RuntimeError("a KvRun executes once")
        self.executed = True
        with nogil:
            rc = dc_kv_run(&self.cfg, self.res)
        out = self._result()
        if rc < 0:
            what = self.res.error.what.decode(errors="replace")
            why = self.res.why.decode(errors="replace")
            msg = why or f"{what or 'kv run'}: {os.strerror(-rc)}"
            # the entry the error is about (file UINT32_MAX: none)
            entry = self.res.error.file if self.res.error.err and self.res.error.file != 0xFFFFFFFF else None
            raise RunError(-rc, msg, path=self.scfg.dir.decode() if self.scfg.dir else None, offset=entry,
                           what=what or None, result=out)
        return out

    cdef dict _result(self):
        cdef dc_kv_result *r = self.res
        counts = {name: r.count[i] for i, name in enumerate(KV_COUNTS)}
        hists = {name: _hist_dict(&r.hist[i]) for i, name in enumerate(KV_HISTS)}
        st = r.store
        n_log = min(self.log.n, self.log.cap)
        return {
            "counts": counts,
            "hists": hists,
            "start_ns": r.start_ns, "stop_ns": r.stop_ns, "halt_ns": r.halt_ns, "end_ns": r.end_ns, "enqueued": r.enqueued,
            "cpu_entries": r.cpu_entries, "storage_entries": r.storage_entries,
            "cpu_used": r.cpu_used, "storage_used": r.storage_used,
            "store": {"fsyncs": st.fsyncs, "fsync_ns": st.fsync_ns, "fadvises": st.fadvises,
                      "drop_checks": st.drop_checks, "drop_pages": st.drop_pages,
                      "drop_resident": st.drop_resident, "split_writes": st.split_writes,
                      "syscall_writes": st.syscall_writes},
            "oplog_n": n_log, "oplog_dropped": self.log.n - n_log if self.log.n > self.log.cap else 0,
            "err": r.error.err, "err_what": r.error.what.decode(errors="replace") if r.error.err else None,
        }
