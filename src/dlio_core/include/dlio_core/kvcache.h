/* The KV-cache offload emulation (MLPerf Storage v3 KVCache, rules section 6): the request engine.
 *
 * Python plans (dlio/kvcache/plan.py: users, conversations, sizes, priorities, arrival times, all
 * drawn from the seed) and hands over flat arrays; dc_kv_run() executes them with no GIL and no
 * callback:
 *
 *   dispatcher thread -- at each request's arrival time (open loop: it never waits for the
 *   workers) --> three FIFO queues, one per priority --> `workers` threads take the highest
 *   priority first and run the request's steps.
 *
 * A synthetic request (DC_KV_SYNTH, what the reference benchmark's users send) is, in order: the
 * system-prompt probe (a lookup that always misses, as the reference's does), a read of every
 * earlier turn of its conversation enqueued so far, the write of its own entry (prefill), then,
 * unless it is prefill-only, 1 + ceil(gen / decode_batch) reads of that entry (decode).
 *
 * The cache: a RAM tier (cpu_bytes, entries held in memory) over the storage tier (the store).
 * A new entry goes to the first tier with room; a tier is kept under target_ratio of its capacity
 * by waterfall LRU: the RAM tier demotes its least recently used entry (read from RAM, written to
 * storage) and the storage tier deletes its own, in the requesting thread and while it holds one of
 * alloc_slots allocation slots (the reference's max_concurrent_allocs semaphore). An entry over
 * skip_ratio of a non-last tier skips it.
 *
 * Storage is reached only through a store (struct dc_kv_store_ops): put/get/delete of an object
 * (an entry, or one chunk of it in the chunked layout). dc_kv_store_file (compat: the reference's
 * buffered syscalls; direct: O_DIRECT through io_uring) and dc_kv_store_null (no I/O: the
 * reference's trace mode) are built in; an object store plugs in the same way.
 */
#ifndef DLIO_CORE_KVCACHE_H
#define DLIO_CORE_KVCACHE_H
#include "dlio_core/defs.h"
#include "dlio_core/hist.h"
#include <stddef.h>
#include <stdint.h>

/* ---- the plan (numpy dtypes in dlio/_kvcache.pxi mirror these) ---- */

enum dc_kv_step_kind {
	DC_KV_SYNTH = 0,         /* the reference's request (above); entry = its own entry */
	DC_KV_READ = 1,          /* read the entry if it is cached (trace replay) */
	DC_KV_WRITE = 2,         /* write the entry (trace replay) */
	DC_KV_READ_OR_WRITE = 3, /* read it if cached, else write it (a Mooncake block) */
	DC_KV_DEMOTE = 4,        /* move it from the RAM tier to storage (trace replay) */
};

enum dc_kv_tier { DC_KV_NONE = 0, DC_KV_CPU = 1, DC_KV_STORAGE = 2 };

/* Request flags. */
#define DC_KV_PROBE        (1u << 0) /* starts with the system-prompt probe */
#define DC_KV_PREFILL_ONLY (1u << 1) /* no decode reads (the reference: context >= 10,000 tokens) */

/* Entry flags. */
#define DC_KV_WRITTEN_LATER (1u << 0) /* a later step writes it: a read step waits for that */

struct dc_kv_req {
	uint64_t arrival_ns; /* from the run's start, when its user enqueues it */
	uint32_t first_step; /* its steps: steps[first_step .. first_step + nsteps) */
	uint32_t nsteps;
	uint32_t conv; /* DC_KV_SYNTH: its conversation (conv_first/conv_reqs) */
	uint32_t turn; /* DC_KV_SYNTH: its 0-based place in the conversation */
	uint32_t gen;  /* tokens it generates */
	uint8_t prio;  /* 3 interactive, 2 responsive, 1 batch (highest first) */
	uint8_t flags; /* DC_KV_PROBE, DC_KV_PREFILL_ONLY */
	uint16_t pad;
};

struct dc_kv_step {
	uint32_t entry;
	uint8_t kind; /* enum dc_kv_step_kind */
	uint8_t tier; /* DC_KV_NONE: the cache decides; else the tier a trace recorded */
	uint16_t pad;
};

struct dc_kv_entry_spec {
	uint64_t bytes;  /* the entry's KV bytes */
	uint32_t tokens; /* its tokens (the .npy shape) */
	uint32_t flags;  /* DC_KV_WRITTEN_LATER */
};

/* ---- the store: the one place that knows where objects live ---- */

/* One stored object: an entry, or chunk `chunk` of it (chunked layout). */
struct dc_kv_obj {
	uint64_t entry;
	uint32_t chunk;  /* 0 .. nchunks - 1 */
	uint32_t tokens; /* tokens in this object */
	uint64_t bytes;  /* its payload bytes */
};

/* What a put writes. whole: buf holds the object's payload [0, bytes) (a RAM-tier copy being
 * demoted). Else buf is a staging buffer of len bytes (len >= 4096, random bytes) for the store to
 * fill piece by piece with dc_kv_stamp() and write. */
struct dc_kv_src {
	void *buf;
	uint64_t len;
	int whole;
};

/* The store's own timing of one operation, on dc_now_ns()'s clock (the engine times the whole
 * call): device_ns is the span that is the storage's (compat: the fsync of a write, the open-read-
 * close of a read; direct: the transfers), host_ns the rest the reference counts as host time. */
struct dc_kv_timing {
	uint64_t device_ns;
	uint64_t host_ns;
};

/* What the store did, for the attestation (summed over its workers at close). */
struct dc_kv_store_stats {
	uint64_t fsyncs;      /* fsync calls that returned 0 */
	uint64_t fsync_ns;    /* time in them */
	uint64_t fadvises;    /* posix_fadvise(DONTNEED) calls that returned 0 */
	uint64_t drop_checks; /* reads whose first pages were checked with mincore after the drop */
	uint64_t drop_pages;  /* pages checked */
	uint64_t drop_resident;  /* of which still in the page cache */
	uint64_t split_writes;   /* payloads larger than the staging buffer (written in pieces) */
	uint64_t syscall_writes; /* write() calls of payload bytes */
};

struct dc_kv_model {
	uint32_t layers, kv_heads,
		head_dim;     /* .npy shape (layers, 2, tokens, kv_heads, head_dim) */
	uint32_t dtype_bytes; /* 2 (<f2) or 4 (<f4); 0: shape (tokens, bytes/token) u1 */
};

struct dc_kv_store_cfg {
	const char *dir;     /* the rank's cache folder (created by the caller) */
	int direct;          /* file store: 0 compat (buffered), 1 O_DIRECT through io_uring */
	uint64_t max_obj;    /* the largest object's payload bytes */
	uint64_t chunk;      /* direct: bytes per transfer (a multiple of 4096) */
	unsigned qd;         /* direct: transfers in flight per worker */
	unsigned drop_check; /* compat: check the drop with mincore every Nth read (0: never) */
	unsigned workers;    /* worker threads that will call worker_open */
	uint64_t seed;       /* of the content stamps (dc_kv_stamp) */
	struct dc_kv_model model;
	const void
		*opts; /* a store's own settings (an object store's endpoint ...); NULL for file */
};

struct dc_kv_store;  /* private to each store */
struct dc_kv_worker; /* one worker thread's state in a store */

struct dc_kv_store_ops {
	const char *name;
	/* Before the clock: check the folder, make buffers. 0, or -errno with a reason in why. */
	int (*open)(struct dc_kv_store **out, const struct dc_kv_store_cfg *cfg, char *why,
		    size_t whylen);
	/* Per worker thread, before the clock; called from that thread. */
	int (*worker_open)(struct dc_kv_store *s, unsigned worker, struct dc_kv_worker **out);
	/* Write, read, delete one object; 0 or -errno. Called concurrently by the workers (each with
	 * its own dc_kv_worker), never twice at once for one object. */
	int (*put)(struct dc_kv_worker *w, const struct dc_kv_obj *o, const struct dc_kv_src *src,
		   struct dc_kv_timing *t);
	int (*get)(struct dc_kv_worker *w, const struct dc_kv_obj *o, struct dc_kv_timing *t);
	int (*del)(struct dc_kv_worker *w, const struct dc_kv_obj *o);
	void (*worker_close)(struct dc_kv_worker *w);
	void (*close)(struct dc_kv_store *s, struct dc_kv_store_stats *stats);
};

extern const struct dc_kv_store_ops dc_kv_store_file;
extern const struct dc_kv_store_ops dc_kv_store_null;

/* The relay store (kvcache/relay.c): objects in a store the core has no client for (S3). Each
 * worker hands its put/get/del to a helper process as one fixed-size record on its own AF_UNIX
 * SOCK_SEQPACKET connection and waits for the reply; the payload travels in the worker's slot of
 * a shared-memory file (the put's bytes stamped there, the get's bytes landed there). The helper
 * (dlio/storage/s3/worker_kv.py) issues the request and times it on the same clock. */
extern const struct dc_kv_store_ops dc_kv_store_relay;

struct dc_kv_relay_opts {      /* store_cfg.opts of the relay store */
	const char *sock_path; /* the helper's listening socket */
	const char *shm_path;  /* the slots: workers x slot_len bytes, made by the helper */
	uint64_t slot_len;     /* >= max_obj, a multiple of 4096 */
};

enum dc_kv_relay_op {
	DC_KV_RELAY_HELLO = 0, /* entry: the worker's slot (first record of a connection) */
	DC_KV_RELAY_PUT = 1,   /* the object's bytes are in the slot [0, len) */
	DC_KV_RELAY_GET = 2,   /* land its len bytes in the slot */
	DC_KV_RELAY_DEL = 3,
};

struct dc_kv_relay_req { /* worker -> helper, 32 bytes */
	uint32_t op;     /* enum dc_kv_relay_op */
	uint32_t chunk;  /* the object: entry, chunk (its name) */
	uint64_t entry;
	uint64_t len; /* its bytes */
	uint64_t seq; /* echoed in the reply */
};

struct dc_kv_relay_rep { /* helper -> worker, 32 bytes */
	int32_t status;  /* 0 or -errno */
	uint32_t pad;
	uint64_t seq;
	uint64_t t0_ns; /* the helper's request, on dc_now_ns()'s clock (CLOCK_MONOTONIC) */
	uint64_t t1_ns;
};

/* Stamp the 4 KiB blocks of payload bytes [off, off + len) of object o, which buf holds (buf[0] is
 * payload byte off), so that no two blocks of any objects are equal: 16 bytes (seed, object,
 * block) at the start of each block of the file, whose payload begins hdr bytes in, and at the
 * payload's first byte. The rest of the bytes are the buffer's (random). */
void dc_kv_stamp(const struct dc_kv_obj *o, uint64_t seed, uint64_t hdr, uint64_t off, void *buf,
		 uint64_t len);

/* The .npy header of an object, hdr_len bytes (a multiple of 64, >= 128), into out. 0, or
 * -ENOSPC when the shape does not fit. */
int dc_kv_npy_header(const struct dc_kv_model *m, const struct dc_kv_obj *o, unsigned hdr_len,
		     char *out);

/* ---- the run ---- */

/* One recorded operation (cfg.log): what the reference's --io-trace-log writes, per row. */
enum dc_kv_log_op { DC_KV_LOG_READ = 0, DC_KV_LOG_WRITE = 1 };
enum dc_kv_log_phase { DC_KV_PH_PREFILL = 0, DC_KV_PH_DECODE = 1, DC_KV_PH_EVICT = 2 };

struct dc_kv_logrec {
	uint64_t t_ns; /* from the run's start, when the operation ended */
	uint64_t bytes;
	uint32_t entry;
	uint8_t op;    /* enum dc_kv_log_op */
	uint8_t tier;  /* enum dc_kv_tier */
	uint8_t phase; /* enum dc_kv_log_phase */
	uint8_t pad;
};

struct dc_kv_log {
	struct dc_kv_logrec *rec; /* cap records, the caller's */
	uint64_t cap;
	uint64_t n; /* OUT: records taken (n > cap: the rest were dropped) */
};

/* Progress, read by another thread while the run goes (relaxed loads). */
struct dc_kv_progress {
	uint64_t requests_done;
	uint64_t storage_read_bytes;
	uint64_t storage_write_bytes;
	uint64_t queued; /* enqueued so far */
};

#define DC_KV_ASAP (1u << 0) /* ignore arrival times: every request is queued at the start */
#define DC_KV_DRAIN                                                                                \
	(1u << 1) /* run until every request is done (duration_ns then only bounds the wait) */
/* Virtual time (the null store): every request runs in arrival order, one FIFO, each done before
 * the next arrives; the log stamps operations with their request's arrival. Decisions only. */
#define DC_KV_VIRTUAL (1u << 2)

struct dc_kv_config {
	const struct dc_kv_req *reqs;
	uint64_t nreqs;
	const struct dc_kv_step *steps;
	uint64_t nsteps;
	const struct dc_kv_entry_spec *entries;
	uint64_t nentries;
	const uint32_t *conv_first; /* nconv + 1 offsets into conv_reqs */
	const uint32_t *conv_reqs;  /* request indexes, each conversation's in turn order */
	uint32_t nconv;
	/* The reference's conversation window (ConversationManager, max_conversations): the most
	 * recently touched conversations it remembers; a request served after its conversation left
	 * makes no earlier-turn reads. 0: no window, every earlier turn is read. */
	uint32_t max_conversations;
	const uint32_t *conv_user; /* each conversation's user (NULL: users never stop) */
	uint32_t nusers;
	unsigned workers;     /* request-processing threads, >= 1 */
	unsigned alloc_slots; /* concurrent allocations (writes, demotions, evictions), >= 1 */
	uint64_t duration_ns; /* no request starts after this */
	uint64_t drain_ns; /* then requests in flight may finish: each worker in turn is waited for
			    * this long at most (the reference's join(timeout)); after the last (or
			    * at once on *stop) they stop between steps and transfers */
	uint64_t bytes_per_token;
	uint32_t decode_batch;     /* tokens per decode read */
	uint64_t chunk_bytes;      /* chunked layout: bytes per stored object (0: one per entry) */
	uint64_t gen_ns_per_token; /* the generation sleep (0: none, as v3 runs) */
	uint64_t cpu_bytes;        /* RAM tier capacity (0: no RAM tier) */
	uint64_t storage_bytes;    /* storage tier capacity (UINT64_MAX: unlimited) */
	double target_ratio;       /* keep a non-last tier under this share of its capacity */
	double skip_ratio;         /* an entry over this share of a non-last tier skips it */
	unsigned flags;            /* DC_KV_ASAP, DC_KV_DRAIN */
	uint64_t seed;             /* of the content stamps */
	uint64_t stage_bytes; /* staging buffer per allocation slot (random, stamped per write) */
	const struct dc_kv_store_ops *store;
	const struct dc_kv_store_cfg *store_cfg;
	volatile int *stop; /* set by another thread: no new request starts, and the ones in flight
			     * stop between their steps and transfers */
	struct dc_kv_progress *progress; /* may be NULL */
	struct dc_kv_log *log;           /* may be NULL */
};

/* Latency histograms of a run (ns). */
enum dc_kv_hist_id {
	DC_KV_H_STORAGE_READ = 0, /* whole read, as the reference's storage_read (total) */
	DC_KV_H_STORAGE_READ_DEV,
	DC_KV_H_STORAGE_READ_HOST,
	DC_KV_H_STORAGE_WRITE, /* prefill writes to storage (the reference's storage_write) */
	DC_KV_H_STORAGE_WRITE_DEV,
	DC_KV_H_STORAGE_WRITE_HOST,
	DC_KV_H_DEMOTE_WRITE, /* demotion writes to storage: the reference drops these */
	DC_KV_H_DEMOTE_WRITE_DEV,
	DC_KV_H_CPU_READ,
	DC_KV_H_CPU_WRITE,
	DC_KV_H_REQ_STORAGE, /* per request: the sum of its storage latencies (the reference's) */
	DC_KV_H_E2E_BATCH,   /* per request, enqueue to done, by priority 1..3 */
	DC_KV_H_E2E_RESPONSIVE,
	DC_KV_H_E2E_INTERACTIVE,
	DC_KV_H_GENERATION, /* per request, the emulated generation time */
	DC_KV_NHIST
};

/* Counters of a run (the reference's names where it has one: cache.py's stats). */
enum dc_kv_count_id {
	DC_KV_C_REQUESTS = 0,     /* requests completed */
	DC_KV_C_REQUESTS_DROPPED, /* dequeued after the stop, not run (the reference drops them) */
	DC_KV_C_TOKENS,           /* tokens generated by the completed requests */
	DC_KV_C_STORAGE_NS,       /* sum over requests of their storage latency */
	DC_KV_C_HITS,
	DC_KV_C_MISSES,
	DC_KV_C_SYSTEM_HITS,
	DC_KV_C_USER_HITS,
	DC_KV_C_MULTI_TURN_HITS,
	DC_KV_C_MT_HITS, /* the request loop's multi-turn hits and misses (results.multi_turn_*) */
	DC_KV_C_MT_MISSES,
	DC_KV_C_PROBES,
	DC_KV_C_PREFILL_WRITES,
	DC_KV_C_DECODE_READS,
	DC_KV_C_READ_OPS,
	DC_KV_C_WRITE_OPS,
	DC_KV_C_READ_BYTES,
	DC_KV_C_WRITE_BYTES,
	DC_KV_C_CPU_READ_BYTES,
	DC_KV_C_CPU_WRITE_BYTES,
	DC_KV_C_STORAGE_READ_BYTES,
	DC_KV_C_STORAGE_WRITE_BYTES, /* prefill writes to storage (the reference's) */
	DC_KV_C_STORAGE_READS,
	DC_KV_C_STORAGE_WRITES,
	DC_KV_C_DEMOTIONS, /* RAM -> storage moves */
	DC_KV_C_DEMOTE_BYTES,
	DC_KV_C_EVICTIONS, /* the reference's: demotions + deletes */
	DC_KV_C_DELETES,   /* storage objects deleted */
	DC_KV_C_DELETE_BYTES,
	DC_KV_C_OFFLOADS_CPU,
	DC_KV_C_OFFLOADS_STORAGE,
	DC_KV_C_STORAGE_TOKENS_X1000, /* the reference's storage_tokens_processed, x 1000 */
	DC_KV_C_FAILED_ALLOCS,        /* writes that found no room in any tier */
	DC_KV_C_WAITS,                /* trace replay: reads that waited for their entry's write */
	DC_KV_C_CONV_EVICTIONS,       /* conversations pushed out of the window by a new one */
	DC_KV_C_MT_CONV_GONE,  /* later turns served after their conversation left: no lookups */
	DC_KV_C_USERS_STOPPED, /* users whose conversation left the window while they continued it */
	DC_KV_C_REQUESTS_UNSENT, /* the later requests of those users, never sent */
	DC_KV_C_REQUESTS_CUT,   /* in flight when the run halted: stopped between steps, not counted
				  * as completed (their bytes that moved are counted) */
	DC_KV_C_CAPACITY_WAITS, /* storage writes that waited for room (entries in flight or being
				 * deleted), so that the tier stays within its capacity (an entry
				 * larger than it alone) */
	DC_KV_NCOUNT
};

struct dc_kv_result {
	uint64_t count[DC_KV_NCOUNT];
	struct dc_hist hist[DC_KV_NHIST];
	uint64_t start_ns; /* dc_now_ns() at the start gate */
	uint64_t stop_ns;  /* when no new request could start (deadline, stop, or drained) */
	uint64_t halt_ns;  /* when requests in flight were told to stop (0: they all finished) */
	uint64_t end_ns;   /* when the last worker finished */
	uint64_t enqueued; /* requests the dispatcher queued */
	uint64_t cpu_entries, storage_entries; /* entries per tier at the end */
	uint64_t cpu_used, storage_used; /* bytes per tier at the end (the reference's *_used) */
	struct dc_kv_store_stats store;
	struct dc_error error; /* first error; file: the entry (UINT32_MAX if none) */
	char why[256];         /* the store's reason when it could not open */
};

/* Run the plan. 0, or -errno: the first error, which stopped the run (res keeps what it
 * measured, error says where; why the store's reason). */
DC_MUST_CHECK int dc_kv_run(const struct dc_kv_config *cfg, struct dc_kv_result *res);

/* Can the store run here, for this folder? 0, or -errno with the reason in why (direct: io_uring
 * refused by the kernel, or O_DIRECT refused by the filesystem). */
DC_MUST_CHECK int dc_kv_store_check(const struct dc_kv_store_ops *ops,
				    const struct dc_kv_store_cfg *cfg, char *why, size_t whylen);

#endif
