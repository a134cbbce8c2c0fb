# Included by _core.pyx: the vector-search run (src/dlio_core/vdb.c). Declarations are in _core.pxd.


cdef class VdbRun:
    """One vector-search run (dc_vdb_run): hop chains on the search pool, queries from client threads.

    index_paths (and pq_paths for AISAQ scale mode): one file per segment; seg_nodes / pq_pages: per
    segment. The chains: hop_first (searches + 1), read_first (hops + 1), nodes (uint32). cached: a
    uint8 bitmap over node ids (the node cache) or None. execute() releases the GIL for the whole run;
    request_stop() and progress() may be called from another thread meanwhile."""
    cdef dc_vdb_config cfg
    cdef dc_vdb_result res
    cdef dc_progress prog
    cdef volatile int stop_flag
    cdef const char **cidx
    cdef const char **cpq
    cdef object keep
    cdef readonly list index_paths
    cdef readonly list pq_paths
    cdef bint executed

    def __cinit__(self):
        self.cidx = NULL
        self.cpq = NULL
        memset(&self.cfg, 0, sizeof(self.cfg))
        memset(&self.res, 0, sizeof(self.res))
        memset(&self.prog, 0, sizeof(self.prog))

    def __init__(self, str engine, index_paths, seg_nodes, hop_first, read_first, nodes, *,
                 unsigned beam_width, unsigned read_bytes, unsigned nodes_per_sector, bint direct=True,
                 pq_paths=None, pq_pages=None, unsigned pq_reads_per_hop=0, cached=None, uint64_t cached_bits=0,
                 uint64_t first_search=0, uint64_t cpu_per_hop_ns=0, int compute_mode=0, uint64_t seed=0,
                 unsigned clients=1, unsigned batch=1, unsigned search_threads=1, uint64_t queries=0,
                 uint64_t runtime_ns=0, uint64_t delay_ns=0, unsigned eng_flags=0):
        cdef cnp.ndarray a_seg, a_hf, a_rf, a_nodes, a_pq, a_cache
        self.index_paths = [str(p) for p in index_paths]
        self.pq_paths = [str(p) for p in pq_paths] if pq_paths is not None else []
        if not self.index_paths or (self.pq_paths and len(self.pq_paths) != len(self.index_paths)):
            raise ValueError("one index path per segment (and one PQ path each, when given)")
        a_seg = np.ascontiguousarray(seg_nodes, dtype=np.uint64)
        a_hf = np.ascontiguousarray(hop_first, dtype=np.uint64)
        a_rf = np.ascontiguousarray(read_first, dtype=np.uint64)
        a_nodes = np.ascontiguousarray(nodes, dtype=np.uint32)
        if len(a_seg) != len(self.index_paths) or len(a_hf) < 2 or len(a_rf) != int(a_hf[len(a_hf) - 1]) + 1:
            raise ValueError("seg_nodes: one per segment; hop_first: searches + 1; read_first: hops + 1")
        if len(a_nodes) != int(a_rf[len(a_rf) - 1]) or len(a_nodes) == 0:
            raise ValueError("nodes: one per read of the chains (at least one)")
        eb = engine.encode()
        bidx = [os.fsencode(p) for p in self.index_paths]
        bpq = [os.fsencode(p) for p in self.pq_paths]
        self.keep = [eb, bidx, bpq, a_seg, a_hf, a_rf, a_nodes]
        self.cidx = <const char **>malloc(len(bidx) * sizeof(char *))
        self.cpq = <const char **>malloc(max(1, len(bpq)) * sizeof(char *))
        if self.cidx == NULL or self.cpq == NULL:
            raise MemoryError()
        for i, b in enumerate(bidx):
            self.cidx[i] = b
        for i, b in enumerate(bpq):
            self.cpq[i] = b
        self.cfg.engine = eb
        self.cfg.eng.qd = 1
        self.cfg.eng.flags = eng_flags
        self.cfg.eng.delay_ns = delay_ns
        self.cfg.direct = direct
        self.cfg.segments = len(bidx)
        self.cfg.index_paths = self.cidx
        self.cfg.pq_paths = self.cpq if bpq else NULL
        self.cfg.seg_nodes = <const uint64_t *>cnp.PyArray_DATA(a_seg)
        if pq_pages is not None:
            a_pq = np.ascontiguousarray(pq_pages, dtype=np.uint64)
            if len(a_pq) != len(bidx):
                raise ValueError("pq_pages: one per segment")
            self.keep.append(a_pq)
            self.cfg.pq_pages = <const uint64_t *>cnp.PyArray_DATA(a_pq)
        self.cfg.nodes_per_sector = nodes_per_sector
        self.cfg.read_bytes = read_bytes
        self.cfg.hop_first = <const uint64_t *>cnp.PyArray_DATA(a_hf)
        self.cfg.read_first = <const uint64_t *>cnp.PyArray_DATA(a_rf)
        self.cfg.nodes = <const uint32_t *>cnp.PyArray_DATA(a_nodes)
        self.cfg.nsearches = len(a_hf) - 1
        self.cfg.first_search = first_search
        if cached is not None:
            a_cache = np.ascontiguousarray(cached, dtype=np.uint8)
            if cached_bits > 8 * len(a_cache):
                raise ValueError("cached_bits is larger than the bitmap")
            self.keep.append(a_cache)
            self.cfg.cached = <const uint8_t *>cnp.PyArray_DATA(a_cache)
            self.cfg.cached_bits = cached_bits
        self.cfg.beam_width = beam_width
        self.cfg.pq_reads_per_hop = pq_reads_per_hop
        self.cfg.cpu_per_hop_ns = cpu_per_hop_ns
        self.cfg.compute_mode = compute_mode
        self.cfg.seed = seed
        self.cfg.clients = clients
        self.cfg.batch = batch
        self.cfg.search_threads = search_threads
        self.cfg.queries = queries
        self.cfg.runtime_ns = runtime_ns
        self.cfg.stop = &self.stop_flag
        self.cfg.progress = &self.prog

    def __dealloc__(self):
        free(self.cidx)
        free(self.cpq)

    def request_stop(self):
        self.stop_flag = 1

    def progress(self):
        """(reads, bytes, queries) so far."""
        return (dc_load_relaxed_u64(&self.prog.ops), dc_load_relaxed_u64(&self.prog.bytes),
                dc_load_relaxed_u64(&self.prog.steps))

    def execute(self):
        """Run (GIL released throughout). Returns the result dict; raises RunError with it on a failure."""
        if self.executed:
            raise RuntimeError("a VdbRun executes once")
        self.executed = True
        cdef int rc
        with nogil:
            rc = dc_vdb_run(&self.cfg, &self.res)
        r = self.res
        out = {"t_start": r.t_start, "t_end": r.t_end, "queries": r.queries, "batches": r.batches,
               "searches": r.searches, "hops": r.hops, "reads": r.reads, "bytes": r.bytes, "pq_reads": r.pq_reads,
               "cache_hits": r.cache_hits, "io_wait_ns": r.io_wait_ns, "cpu_hop_ns": r.cpu_hop_ns,
               "search_ns": r.search_ns, "search_cpu_ns": r.search_cpu_ns, "stopped": bool(r.stopped),
               "eng_flags_used": r.eng_flags_used, "query_lat": _hist_dict(&self.res.query_lat),
               "batch_lat": _hist_dict(&self.res.batch_lat), "hop_lat": _hist_dict(&self.res.hop_lat),
               "read_lat": _hist_dict(&self.res.read_lat)}
        if rc < 0:
            e = r.error
            err = e.err if e.err else -rc
            n = len(self.index_paths)
            path = (self.index_paths[e.file] if e.file < n else
                    self.pq_paths[e.file - n] if e.file < n + len(self.pq_paths) else None)
            what = e.what.decode(errors="replace") or "run"
            msg = f"{what} failed: {os.strerror(err)}"
            if path is not None:
                msg += f" ({path} at offset {e.offset})"
            raise RunError(err, msg, path=path, offset=e.offset, what=what, result=out)
        return out
