/* The runner: executes a flat plan with T threads, Q requests in flight each.
 *
 * Python decides what is read (the plan); the runner decides how fast. The caller releases the GIL
 * once around dc_run_io / dc_run_train; nothing here calls back into Python. The hot loop
 * allocates nothing: slots and aligned buffers are made before the clock starts.
 *
 * Two shapes of run share the machinery:
 *   dc_run_io     fio-like: each thread owns a contiguous range of ops and cycles through it until
 *                 a runtime or a byte budget is spent (or once through); a ramp period is run but
 *                 not counted. Files are opened once per thread.
 *   dc_run_train  DLIO-like: the plan is split into steps (batches). Reader threads take steps
 *                 k = t, t+T, t+2T ... (as PyTorch hands batch k to worker k mod T), read them and
 *                 publish them; at most `prefetch` finished-but-unconsumed steps may exist beyond the
 *                 one the trainer waits for. The calling thread is the trainer: for each step in
 *                 order it waits for the batch (I/O exposed to the accelerator), spins the step's
 *                 compute time, calls the step hook (MPI barrier), and records the times. Each
 *                 sample's file is opened for that sample and closed after it (what framework
 *                 readers do), unless the ops say otherwise. read_threads == 0: the trainer reads
 *                 each batch itself, with no overlap (PyTorch num_workers=0).
 */
#ifndef DLIO_CORE_RUN_H
#define DLIO_CORE_RUN_H
#include "dlio_core/defs.h"
#include <stdint.h>
#include "dlio_core/engine.h"
#include "dlio_core/hist.h"
#include "dlio_core/trace.h"

/* Op flags (struct dc_op.flags). */
#define DC_OPF_OPEN  (1u << 0) /* train: open the file before this op (first op of a sample) */
#define DC_OPF_CLOSE (1u << 1) /* train: close it after this op completes (last op of a sample) */
/* io: fsync the file once this op and all before it completed (a checkpoint file's last write),
 * timed in the window */
#define DC_OPF_FSYNC (1u << 2)

/* One plan record: 24 bytes, numpy dtype
 * [('file','<u4'),('op','u1'),('flags','u1'),('pad','<u2'),('offset','<u8'),('length','<u8')]. */
struct dc_op {
	uint32_t file; /* index into the run's path table */
	uint8_t op;    /* enum dc_op_kind */
	uint8_t flags; /* DC_OPF_* */
	uint16_t pad;
	uint64_t offset;
	uint64_t length;
};

/* One training step: 24 bytes, numpy dtype
 * [('first_op','<u8'),('nops','<u4'),('nsamples','<u4'),('compute_ns','<u8')]. */
struct dc_step {
	uint64_t first_op;
	uint32_t nops;
	uint32_t nsamples;
	uint64_t compute_ns; /* emulated accelerator time of this step */
};

/* Live counters a watcher thread may read while the run goes on (relaxed atomics). */
struct dc_progress {
	uint64_t ops;
	uint64_t bytes;
	uint64_t steps;
	uint64_t
		t_first_fetch; /* dc_now_ns() when a train run's first step began fetching; 0 before */
	uint64_t
		t_last_end; /* dc_now_ns() when its latest step ended (stored before steps counts it) */
};

/* A literal byte range of a written file: overlay_data[data .. data + len) goes to [offset, offset + len). */
struct dc_overlay {
	uint64_t offset;
	uint64_t len;
	uint64_t data;
};

struct dc_run_config {
	const char *engine;        /* registry name */
	struct dc_engine_opts eng; /* eng.qd is the queue depth per thread */
	unsigned threads;          /* io: worker threads (>= 1); train: reader threads (>= 0) */
	int direct;                /* open with O_DIRECT */
	const char *const *paths;  /* file table */
	uint32_t npaths;

	const struct dc_op *ops;
	uint64_t nops;
	uint64_t max_len; /* largest op length (sizes the slot buffers) */

	/* dc_run_io only */
	const uint64_t *thread_first_op; /* threads+1 entries: thread t runs ops [f[t], f[t+1]) */
	uint64_t runtime_ns;  /* stop after this much measured time (0 = not time-based) */
	uint64_t ramp_ns;     /* run this long first without counting */
	uint64_t bytes_limit; /* stop after this many measured bytes in all (0 = no limit) */
	int loop;             /* cycle through the ops until runtime/bytes are spent */

	/* dc_run_train only */
	const struct dc_step *steps;
	uint64_t nsteps;
	unsigned prefetch; /* finished batches that may wait for the trainer (>= 1) */
	int compute_mode;  /* enum dc_compute_mode */
	/* Spun by the reader after each sample (DLIO preprocess_time). */
	uint64_t preprocess_ns_per_sample;
	/* Called after each step's compute (MPI barrier): 0 or -errno. */
	int (*step_hook)(void *ctx, uint64_t step);
	void *hook_ctx;
	/* NULL: a sample that cannot be opened or read fails the run. Else npaths zeroed bytes: such a
	 * sample (its file truncated, removed or replaced during the run: --skip-bad-files) is left out,
	 * counted in result->skipped, and its file's byte set to 1. */
	unsigned char *bad_files;

	volatile int *stop;           /* set non-zero (e.g. from another thread) to stop early */
	struct dc_progress *progress; /* may be NULL */
	/* Writes: per file index, an 8-byte pattern repeated over the request buffer instead of random
	 * bytes (DLIO's randomize_tensor: false writes tensors of ones: compressible, dedupable on
	 * purpose, so such writes are not stamped unique either). NULL = random content. */
	const uint64_t *file_fill;
	/* Writes: literal byte ranges of the files (a container's headers and index, e.g. the zip
	 * records torch.save puts around the tensor bytes). A write request that covers part of a
	 * range carries those bytes there, over its random or patterned content, so a file with a
	 * format is still written in the plan's requests. File f's ranges are
	 * overlays[overlay_first[f] .. overlay_first[f + 1]), sorted by offset, not overlapping; their
	 * bytes are in overlay_data. overlay_first NULL = none. */
	const struct dc_overlay *overlays;
	const uint64_t *overlay_first; /* npaths + 1 entries */
	const unsigned char *overlay_data;
	struct dc_trace *trace; /* NULL = no tracing; else zeroed (cap may be set): the run
	                              * allocates its per-thread buffers before the clock starts and
	                              * records every request, sample, fetch and compute (trace.h).
	                              * train: buffer 0 is the trainer, 1 + t reader t (one buffer
	                              * when threads == 0); io: buffer t is worker t. */
};

struct dc_thread_stats {
	uint64_t ops, bytes, errors;
	uint64_t cpu_ns;   /* thread CPU time (user + sys) during the run */
	uint64_t fsync_ns; /* time in fsync (DC_OPF_FSYNC ops) */
	/* io: the thread's page faults while it ran its requests (getrusage RUSAGE_THREAD): the
	 * mmap engine's touches fault the file's pages in */
	uint64_t minflt, majflt;
};

/* Per-step record of dc_run_train (caller allocates nsteps of them). */
struct dc_step_times {
	uint64_t t_fetch;    /* trainer starts waiting for the batch */
	uint64_t t_ready;    /* batch in hand: wait = t_ready - t_fetch */
	uint64_t t_end;      /* compute (and step hook) done */
	uint64_t compute_ns; /* achieved compute */
	uint64_t bytes;      /* bytes read for this batch */
};

struct dc_run_result {
	uint64_t t_start, t_end;     /* measured window (after ramp) on dc_now_ns() */
	uint64_t ops, bytes, errors; /* measured window only */
	uint64_t skipped;          /* train with cfg->bad_files: samples left out, their file bad */
	uint64_t steps_done;       /* train: steps completed */
	int stopped;               /* stopped early by *stop */
	struct dc_hist lat;        /* per-request latency (submit to completion), all threads */
	struct dc_hist sample_lat; /* train: per-sample open..close latency */
	/* io: the writes among ops / bytes / lat, and the reads' latency alone (a mixed read/write
	 * plan reports each direction apart, as fio's read and write sections) */
	uint64_t ops_write, bytes_write;
	struct dc_hist lat_read, lat_write;
	struct dc_thread_stats *threads;  /* caller's, one per thread (train: max(1, threads)) */
	struct dc_step_times *step_times; /* caller-provided, nsteps entries (train) */
	struct dc_error error;            /* first error, if any */
	unsigned qd_used;                 /* queue depth actually used */
	unsigned eng_flags_used;          /* engine flags actually used */
	uint64_t trainer_cpu_ns; /* train: the trainer thread's CPU time (the compute spin, the step
				  * hook, and the reads when there are no reader threads) */
};

/* Both return 0, or -errno (with result->error filled) on the first failure. Results up to the
 * failure are kept in result. */
DC_MUST_CHECK int dc_run_io(const struct dc_run_config *cfg, struct dc_run_result *result);

/* A run's threads leave their request buffers parked (up to 1 GiB in all) for the process's next
 * run, which takes a pool of its size instead of having fresh pages faulted in before it starts
 * (a model load's repeats: qd 8 x 16 MiB is 128 MiB the kernel would zero every load).
 * dc_bufpool_reused: pools taken from the park so far; dc_bufpool_trim: free what is parked. */
uint64_t dc_bufpool_reused(void);
void dc_bufpool_trim(void);
DC_MUST_CHECK int dc_run_train(const struct dc_run_config *cfg, struct dc_run_result *result);

#endif
