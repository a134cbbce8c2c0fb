/* Private to the runner (runner.c: setup, results (run_base.c: the gate, the first error); runner_io.c: dc_run_io;
 * runner_train.c: dc_run_train).
 */
#ifndef DLIO_CORE_RUNNER_INT_H
#define DLIO_CORE_RUNNER_INT_H
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "bufpool.h"
#include "core_int.h"
#include "dlio_core/run.h"
#include "run_base.h"

#define RUN_PROGRESS_EVERY 64 /* completions between updates of the shared progress counters */

struct dc_run;

/* train: one sample in flight (open .. all its ops done .. close). */
struct dc_sample {
	struct dc_file file;
	uint64_t t_open;
	uint32_t file_idx;    /* index into the run's paths */
	unsigned outstanding; /* ops issued and not completed */
	int closing;          /* its last op was issued: close when outstanding reaches 0 */
	int failed;
	uint64_t bytes; /* traced: bytes read for this sample */
	struct dc_sample *next_free;
};

/* One thread's state: its engine instance, slots and buffers, counters and histograms. */
struct dc_worker {
	struct dc_run *run;
	unsigned id;
	pthread_t tid;
	int created;
	struct dc_engine *eng;
	struct dc_engine_opts eo; /* writable copy: the engine reports used_flags in it */
	struct dc_io *slots;
	unsigned nslots;     /* queue depth in use (1 for synchronous engines) */
	struct dc_io **free; /* stack of idle slots */
	unsigned nfree;
	struct dc_io **done; /* reap() output */
	struct dc_bufpool pool;
	struct dc_hist *lat;   /* io: reads (writes in wlat); train: every request */
	struct dc_hist *wlat;  /* io: writes */
	struct dc_hist *slat;  /* train: sample latency */
	struct dc_file *files; /* io: one per path; train: files used outside samples */
	/* train */
	struct dc_sample *samples;
	struct dc_sample *free_samples;
	struct dc_sample **io_sample; /* per slot: the sample its request belongs to */
	unsigned step_samples;        /* samples closed in the current step */
	uint64_t step_bytes;
	/* counters (measured window) */
	uint64_t ops, bytes, errors;
	uint64_t skipped;            /* train: samples left out (cfg->bad_files) */
	int skipping;                /* train: the rest of a sample whose open failed is left out */
	uint64_t wops, wbytes;       /* io: the writes among ops and bytes */
	uint64_t pub_ops, pub_bytes; /* already added to cfg->progress */
	unsigned since_pub;
	uint64_t cpu_ns;
	uint64_t fsync_ns;       /* io: time spent in DC_OPF_FSYNC fsyncs */
	uint64_t minflt, majflt; /* io: page faults while running the requests */
	uint64_t t_end;
	/* tracing (NULL = off) */
	struct dc_trace_buf *tb;
	uint16_t trace_tid;
	uint64_t cur_step; /* train: the step being read */
	/* writes with cfg->file_fill: the pattern each slot buffer holds (+1; 0 = random content) */
	uint64_t *slot_fill;
};

struct dc_run {
	const struct dc_run_config *cfg;
	struct dc_run_result *res;
	const struct dc_engine_ops *ops;
	struct dc_worker *w;
	unsigned nworkers; /* threads created (io: threads; train: readers, or 1) */
	uint32_t dio_align;
	int has_writes;
	int need_files; /* train: some ops lie outside an OPEN..CLOSE sample */

	/* the lock, the first error, the stop flag, the start gate and the clock (t0, t_ramp_end,
	 * t_stop); b.cond is the gate's and, in train, says a step became ready */
	struct run_base b;
	pthread_cond_t space; /* train: the trainer consumed a step */

	int loop;         /* io: cycle through the ops */
	int quit;         /* atomic: train: the trainer is done */
	uint64_t claimed; /* atomic: io: bytes_limit handed out */

	/* train */
	uint8_t *ready;           /* per step, under lock */
	uint64_t *step_bytes;     /* per step, written by its reader before ready */
	uint64_t consumed;        /* steps the trainer has taken, under lock */
	struct dc_trace_buf *ttb; /* train: the trainer's trace buffer (NULL = off) */
};

static inline int run_should_stop(const struct dc_run *r)
{
	return run_stop_asked(&r->b) || __atomic_load_n(&r->quit, __ATOMIC_RELAXED);
}

/* runner.c */
/* Set up a run (train: the train shape) and its workers' shells. 0, or -errno with the error
 * recorded and the run already destroyed. */
int run_prepare(struct dc_run *r, const struct dc_run_config *cfg, struct dc_run_result *res,
		int train);
void run_destroy(struct dc_run *r);
/* A thread per worker on fn(worker), up to the first that cannot start (run_start records it);
 * run_join_workers waits for those that started. */
void run_start_workers(struct dc_run *r, void *(*fn)(void *));
void run_join_workers(struct dc_run *r);
void worker_io_error(struct dc_worker *w, const struct dc_io *io);
int worker_setup(struct dc_worker *w);
void worker_teardown(struct dc_worker *w);
void worker_publish(struct dc_worker *w);
void run_collect(struct dc_run *r);
uint64_t thread_cpu_ns(void);
/* This thread's minor and major page faults so far (0 where getrusage cannot tell). */
void thread_faults(uint64_t *minflt, uint64_t *majflt);
int run_finish(struct dc_run *r);

/* Writes: make every 4 KiB block of the request unique before it is issued (its file offset and
 * the issue time in the block's first 16 bytes). The slot buffers are filled with random bytes
 * once, so without this a checkpoint or a write test would repeat threads x qd distinct buffers,
 * which a deduplicating or compressing store keeps once; real tensors are all different. Costs
 * one 16-byte store per 4 KiB, outside the request's latency. */
static inline void dc_stamp_unique(struct dc_io *io, uint64_t now)
{
	unsigned char *p = (unsigned char *)io->buf;

	for (uint64_t k = 0; k + 16 <= io->len; k += 4096) {
		uint64_t v[2] = { io->offset + k, now };

		memcpy(p + k, v, sizeof(v));
	}
}

/* Copy the file's literal ranges (cfg->overlays) that the request covers into its buffer; returns
 * whether there were any. A binary search, then one memcpy per range: a few per file. */
static inline int dc_apply_overlays(const struct dc_run_config *cfg, struct dc_io *io,
				    uint32_t file)
{
	const struct dc_overlay *ov = cfg->overlays;
	uint64_t lo, hi, last, end = io->offset + io->len;
	int hit = 0;

	if (!cfg->overlay_first)
		return 0;
	lo = cfg->overlay_first[file];
	hi = last = cfg->overlay_first[file + 1];
	while (lo < hi) { /* the first range that ends after the request starts */
		uint64_t mid = lo + (hi - lo) / 2;

		if (ov[mid].offset + ov[mid].len <= io->offset)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < last && ov[lo].offset < end; lo++) {
		uint64_t a = ov[lo].offset > io->offset ? ov[lo].offset : io->offset;
		uint64_t b = ov[lo].offset + ov[lo].len < end ? ov[lo].offset + ov[lo].len : end;

		memcpy((unsigned char *)io->buf + (a - io->offset),
		       cfg->overlay_data + ov[lo].data + (a - ov[lo].offset), b - a);
		hit = 1;
	}
	return hit;
}

/* Ready a write request's buffer: stamped unique (random content), or holding the file's pattern
 * (cfg->file_fill), refilled only when the slot last held another pattern (a thread writes its
 * files one after another, so that is once per file); then the file's literal ranges over it. */
static inline void dc_prepare_write(struct dc_worker *w, struct dc_io *io, uint32_t file,
				    uint64_t now)
{
	const struct dc_run_config *cfg = w->run->cfg;
	const uint64_t *fill = cfg->file_fill;

	if (!fill) {
		dc_stamp_unique(io, now);
		dc_apply_overlays(cfg, io, file);
		return;
	}
	if (w->slot_fill[io->index] != fill[file] + 1 || !w->slot_fill[io->index]) {
		uint64_t *p = (uint64_t *)io->buf, n = io->cap / sizeof(uint64_t);

		for (uint64_t k = 0; k < n; k++)
			p[k] = fill[file];
		w->slot_fill[io->index] = fill[file] + 1;
	}
	/* The literal bytes broke the pattern: refill this slot before its next request. */
	if (dc_apply_overlays(cfg, io, file))
		w->slot_fill[io->index] = 0;
}

#endif
