# The only place that declares the C API (src/dlio_core/include/dlio_core/*.h).
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t, int64_t

cdef extern from "dlio_core/dlio_core.h" nogil:
    uint64_t dc_now_ns()
    double dc_timer_overhead_ns(unsigned n)
    const char *dc_timer_source()

    enum: DC_HIST_NR
    struct dc_hist:
        uint64_t count
        uint64_t min
        uint64_t max
        double sum
        double sumsq
        uint64_t bucket[1]
    void dc_hist_init(dc_hist *h)
    unsigned dc_hist_index(uint64_t ns)
    uint64_t dc_hist_value(unsigned idx)
    void dc_hist_add(dc_hist *h, uint64_t ns)
    uint64_t dc_hist_percentile(const dc_hist *h, double p)

    uint64_t dc_compute(uint64_t ns, int mode)
    enum: DC_COMPUTE_SPIN_NS

    void dc_fill_random(void *buf, size_t len, uint64_t seed)
    int dc_write_random(int fd, uint64_t offset, uint64_t len, uint64_t seed, size_t chunk)
    uint32_t dc_crc32c(uint32_t crc, const void *buf, size_t len)

    int dc_dio_align(const char *path, uint32_t *mem_align, uint32_t *offset_align, int *from_statx)
    int dc_drop_files_cache(const char *const *paths, size_t n, int durable, size_t *failed)
    int dc_drop_all_caches()

    uint64_t dc_bufpool_reused()
    void dc_bufpool_trim()

    enum:
        DC_CAP_ASYNC
        DC_CAP_DIRECT
        DC_CAP_WRITE
        DC_CAP_NOIO
        DC_ENG_REGBUFS
        DC_ENG_REGFILES
        DC_ENG_SQPOLL
        DC_ENG_FADV_RANDOM
        DC_ENG_FADV_SEQ
    enum:
        DC_OP_READ
        DC_OP_WRITE
    struct dc_file:
        const char *path
        int fd
        int direct
        uint64_t size
        void *map
        int reg_index
        uint32_t mem_align
        uint32_t off_align
    struct dc_io:
        dc_file *file
        void *buf
        uint64_t offset
        uint64_t len
        int64_t res
        uint64_t t_issue
        uint32_t index
        uint8_t op
        uint64_t user
        uint64_t cap
        uint32_t buf_off
    struct dc_engine_opts:
        unsigned qd
        unsigned flags
        uint64_t delay_ns
        uint64_t fail_nth
        int fail_errno
        unsigned used_flags
        void *mpi_comm
        const char *const *hints
    struct dc_engine:
        pass
    struct dc_engine_ops:
        const char *name
        unsigned caps
        int (*available)(char *why, size_t whylen) noexcept nogil
        int (*init)(dc_engine **out, const dc_engine_opts *opts, dc_io *slots, unsigned nslots) noexcept nogil
        int (*open)(dc_engine *e, dc_file *f, int write) noexcept nogil
        int (*close)(dc_engine *e, dc_file *f) noexcept nogil
        int (*submit)(dc_engine *e, dc_io *io) noexcept nogil
        int (*reap)(dc_engine *e, unsigned min, dc_io **done, unsigned max) noexcept nogil
        void (*cleanup)(dc_engine *e) noexcept nogil
    unsigned dc_engine_count()
    const dc_engine_ops *dc_engine_at(unsigned i)
    int dc_engine_available(const char *name, char *why, size_t whylen)
    int dc_engine_register(const dc_engine_ops *ops)

    struct dc_op:
        uint32_t file
        uint8_t op
        uint8_t flags
        uint16_t pad
        uint64_t offset
        uint64_t length

    struct dc_overlay:
        uint64_t offset
        uint64_t len
        uint64_t data

    struct dc_step:
        uint64_t first_op
        uint32_t nops
        uint32_t nsamples
        uint64_t compute_ns

    struct dc_progress:
        uint64_t ops
        uint64_t bytes
        uint64_t steps
        uint64_t t_first_fetch
        uint64_t t_last_end

    enum:
        DC_TR_READ
        DC_TR_WRITE
        DC_TR_SAMPLE
        DC_TR_FETCH
        DC_TR_COMPUTE
    struct dc_trace_event:
        uint64_t t_start
        uint64_t dur
        uint64_t offset
        uint64_t bytes
        uint64_t step
        uint32_t file
        uint16_t tid
        uint8_t kind
        uint8_t pad
    struct dc_trace_buf:
        dc_trace_event *ev
        uint64_t n
        uint64_t cap
        uint64_t dropped
    struct dc_trace:
        uint64_t cap
        dc_trace_buf *bufs
        unsigned nbufs
    int dc_trace_alloc(dc_trace *tr, unsigned nbufs, const uint64_t *caps, uint64_t cap)
    void dc_trace_free(dc_trace *tr)
    uint64_t dc_trace_count(const dc_trace *tr)
    uint64_t dc_trace_dropped(const dc_trace *tr)
    unsigned DC_TRACE_LANES
    struct dc_pfw_opts:
        int pid
        uint64_t t0_ns
        const char *io_cat
        const uint32_t *fh_seen
        size_t nseen
        uint32_t *fh_new
        size_t *nnew
        uint32_t *lanes
        unsigned ntids
    int dc_trace_write_pfw(int fd, const dc_trace_event *ev, size_t n, const char *const *paths,
                           const dc_pfw_opts *opt, uint64_t *id_base)
    int dc_json_escape(const char *s, char *out, size_t outlen)
    uint32_t dc_trace_fhash(const char *path)

    struct dc_run_config:
        const char *engine
        dc_engine_opts eng
        unsigned threads
        int direct
        const char *const *paths
        uint32_t npaths
        const dc_op *ops
        uint64_t nops
        uint64_t max_len
        const uint64_t *thread_first_op
        uint64_t runtime_ns
        uint64_t ramp_ns
        uint64_t bytes_limit
        int loop
        const dc_step *steps
        uint64_t nsteps
        unsigned prefetch
        int compute_mode
        uint64_t preprocess_ns_per_sample
        int (*step_hook)(void *ctx, uint64_t step) noexcept
        void *hook_ctx
        unsigned char *bad_files
        volatile int *stop
        dc_progress *progress
        const uint64_t *file_fill
        const dc_overlay *overlays
        const uint64_t *overlay_first
        const unsigned char *overlay_data
        dc_trace *trace

    struct dc_error:
        int err
        uint32_t file
        uint64_t offset
        char what[32]

    struct dc_thread_stats:
        uint64_t ops
        uint64_t bytes
        uint64_t errors
        uint64_t cpu_ns
        uint64_t fsync_ns
        uint64_t minflt
        uint64_t majflt

    struct dc_step_times:
        uint64_t t_fetch
        uint64_t t_ready
        uint64_t t_end
        uint64_t compute_ns
        uint64_t bytes

    struct dc_run_result:
        uint64_t t_start
        uint64_t t_end
        uint64_t ops
        uint64_t bytes
        uint64_t errors
        uint64_t skipped
        uint64_t steps_done
        int stopped
        dc_hist lat
        dc_hist sample_lat
        uint64_t ops_write
        uint64_t bytes_write
        dc_hist lat_read
        dc_hist lat_write
        dc_thread_stats *threads
        dc_step_times *step_times
        dc_error error
        unsigned qd_used
        unsigned eng_flags_used
        uint64_t trainer_cpu_ns

    int dc_run_io(const dc_run_config *cfg, dc_run_result *result)
    int dc_run_train(const dc_run_config *cfg, dc_run_result *result)


# A relaxed atomic load, for reading the C runner's live progress counters while it runs.
cdef extern from *:
    """
    #include <stdint.h>
    static inline uint64_t dc_load_relaxed_u64(uint64_t *p)
    { return __atomic_load_n(p, __ATOMIC_RELAXED); }
    """
    uint64_t dc_load_relaxed_u64(uint64_t *p) nogil


# ---- dataset generation from segment programs (gen.h) ----
cdef extern from "dlio_core/csvrow.h" nogil:
    size_t dc_csv_row_cap(size_t n, unsigned itemsize)
    int dc_csv_row(const void *values, size_t n, unsigned itemsize, int is_signed, char *out, size_t cap,
                   size_t *len)


cdef extern from "dlio_core/gen.h" nogil:
    struct dc_gen_seg:
        uint32_t kind
        uint32_t arg
        uint64_t a
        uint64_t b
    struct dc_gen_file:
        const char *tmp
        const char *path
        uint64_t seed
        uint64_t first_seg
        uint64_t nsegs
        const char *tmp_suffix
    struct dc_gen_error:
        int err
        uint64_t file
        char what[32]
    enum: DC_GEN_FSYNC
    enum: DC_GEN_DIRECT
    int dc_gen_files(const dc_gen_file *files, uint64_t n, const dc_gen_seg *segs, const unsigned char *blob,
                     unsigned flags, volatile int *stop, uint64_t *done_bytes, uint64_t *done_files,
                     dc_gen_error *err)
    int dc_gen_render(const dc_gen_seg *segs, uint64_t nsegs, const unsigned char *blob, uint64_t seed,
                      unsigned char *buf, uint64_t len)
    uint64_t dc_gen_size(const dc_gen_seg *segs, uint64_t nsegs)
    uint32_t dc_crc32(uint32_t crc, const void *buf, size_t len)


# ---- vector search: DiskANN / AISAQ hop chains (vdb.h) ----
cdef extern from "dlio_core/vdb.h" nogil:
    struct dc_vdb_config:
        const char *engine
        dc_engine_opts eng
        int direct
        unsigned segments
        const char *const *index_paths
        const char *const *pq_paths
        const uint64_t *seg_nodes
        const uint64_t *pq_pages
        uint32_t nodes_per_sector
        uint32_t read_bytes
        const uint64_t *hop_first
        const uint64_t *read_first
        const uint32_t *nodes
        uint64_t nsearches
        uint64_t first_search
        const uint8_t *cached
        uint64_t cached_bits
        unsigned beam_width
        unsigned pq_reads_per_hop
        uint64_t cpu_per_hop_ns
        int compute_mode
        uint64_t seed
        unsigned clients
        unsigned batch
        unsigned search_threads
        uint64_t queries
        uint64_t runtime_ns
        volatile int *stop
        dc_progress *progress
    struct dc_vdb_result:
        uint64_t t_start
        uint64_t t_end
        uint64_t queries
        uint64_t batches
        uint64_t searches
        uint64_t hops
        uint64_t reads
        uint64_t bytes
        uint64_t pq_reads
        uint64_t cache_hits
        uint64_t io_wait_ns
        uint64_t cpu_hop_ns
        uint64_t search_ns
        uint64_t search_cpu_ns
        dc_hist query_lat
        dc_hist batch_lat
        dc_hist hop_lat
        dc_hist read_lat
        int stopped
        unsigned eng_flags_used
        dc_error error
    int dc_vdb_run(const dc_vdb_config *cfg, dc_vdb_result *result)
# ---- the KV-cache request engine (kvcache.h; bound in _kvcache.pxi) ----
cdef extern from "dlio_core/kvcache.h" nogil:
    struct dc_kv_req:
        pass
    struct dc_kv_step:
        pass
    struct dc_kv_entry_spec:
        pass
    struct dc_kv_logrec:
        pass
    struct dc_kv_model:
        uint32_t layers, kv_heads, head_dim, dtype_bytes
    struct dc_kv_store_cfg:
        const char *dir
        int direct
        uint64_t max_obj
        uint64_t chunk
        unsigned qd
        unsigned drop_check
        unsigned workers
        uint64_t seed
        dc_kv_model model
        const void *opts
    struct dc_kv_store_ops:
        const char *name
    struct dc_kv_store_stats:
        uint64_t fsyncs, fsync_ns, fadvises, drop_checks, drop_pages, drop_resident, split_writes
        uint64_t syscall_writes
    struct dc_kv_log:
        dc_kv_logrec *rec
        uint64_t cap
        uint64_t n
    struct dc_kv_progress:
        uint64_t requests_done, storage_read_bytes, storage_write_bytes, queued
    struct dc_kv_config:
        const dc_kv_req *reqs
        uint64_t nreqs
        const dc_kv_step *steps
        uint64_t nsteps
        const dc_kv_entry_spec *entries
        uint64_t nentries
        const uint32_t *conv_first
        const uint32_t *conv_reqs
        uint32_t nconv
        uint32_t max_conversations
        const uint32_t *conv_user
        uint32_t nusers
        unsigned workers, alloc_slots
        uint64_t duration_ns, drain_ns, bytes_per_token
        uint32_t decode_batch
        uint64_t chunk_bytes, gen_ns_per_token, cpu_bytes, storage_bytes
        double target_ratio, skip_ratio
        unsigned flags
        uint64_t seed, stage_bytes
        const dc_kv_store_ops *store
        const dc_kv_store_cfg *store_cfg
        volatile int *stop
        dc_kv_progress *progress
        dc_kv_log *log
    enum:
        DC_KV_NHIST
        DC_KV_NCOUNT
        DC_KV_ASAP
        DC_KV_DRAIN
        DC_KV_VIRTUAL
    struct dc_kv_result:
        uint64_t count[1]
        dc_hist hist[1]
        uint64_t start_ns, stop_ns, halt_ns, end_ns, enqueued
        uint64_t cpu_entries, storage_entries, cpu_used, storage_used
        dc_kv_store_stats store
        dc_error error
        char why[256]
    const dc_kv_store_ops dc_kv_store_file
    const dc_kv_store_ops dc_kv_store_null
    const dc_kv_store_ops dc_kv_store_relay
    struct dc_kv_relay_opts:
        const char *sock_path
        const char *shm_path
        uint64_t slot_len
    int dc_kv_run(const dc_kv_config *cfg, dc_kv_result *res)
    int dc_kv_store_check(const dc_kv_store_ops *ops, const dc_kv_store_cfg *cfg, char *why, size_t whylen)
