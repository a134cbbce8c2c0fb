/* The runner's common machinery: config checks, per-thread setup before the clock starts and the
 * result (the start gate and the first-error record are run_base.c's). The two hot loops are in runner_io.c
 * (dc_run_io) and runner_train.c (dc_run_train).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "dlio_core/fill.h"
#include "dlio_core/fsutil.h"
#include "dlio_core/timer.h"
#include "runner_int.h"

uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) < 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void thread_faults(uint64_t *minflt, uint64_t *majflt)
{
	struct rusage ru;

	if (getrusage(RUSAGE_THREAD, &ru) < 0) {
		*minflt = *majflt = 0;
		return;
	}
	*minflt = (uint64_t)ru.ru_minflt;
	*majflt = (uint64_t)ru.ru_majflt;
}

void worker_io_error(struct dc_worker *w, const struct dc_io *io)
{
	struct dc_run *r = w->run;
	const struct dc_op *op = &r->cfg->ops[io->user];
	int wr = io->op == DC_OP_WRITE;

	w->errors++;
	if (io->res < 0)
		run_fail(&r->b, (int)-io->res, op->file, op->offset, wr ? "write" : "read");
	else
		run_fail(&r->b, EIO, op->file, op->offset, wr ? "short write" : "short read");
}

/* Refuse what would crash or hang later; these checks are O(nops) and run before the clock. */
static int check_config(struct dc_run *r, int train)
{
	const struct dc_run_config *cfg = r->cfg;
	unsigned caps;

	if (!cfg->engine || (cfg->nops && !cfg->ops) || (cfg->npaths && !cfg->paths))
		return -EINVAL;
	if (cfg->eng.qd < 1 || cfg->eng.qd > 1024)
		return -EINVAL;
	r->ops = dc_engine_find(cfg->engine);
	if (!r->ops)
		return -ENOENT;
	caps = r->ops->caps;
	for (uint64_t i = 0; i < cfg->nops; i++) {
		const struct dc_op *op = &cfg->ops[i];

		if (op->file >= cfg->npaths || op->length > cfg->max_len || op->op > DC_OP_WRITE)
			return -EINVAL;
		if (op->op == DC_OP_WRITE)
			r->has_writes = 1;
	}
	if (r->has_writes && !(caps & DC_CAP_WRITE))
		return -EOPNOTSUPP;
	if (cfg->direct && !(caps & DC_CAP_DIRECT))
		return -EOPNOTSUPP;
	if (!train) {
		const uint64_t *f = cfg->thread_first_op;

		if (cfg->threads < 1 || !f)
			return -EINVAL;
		for (unsigned t = 0; t < cfg->threads; t++)
			if (f[t] > f[t + 1] || f[t + 1] > cfg->nops)
				return -EINVAL;
		return 0;
	}
	if (cfg->nsteps && (!cfg->steps || !r->res->step_times))
		return -EINVAL;
	for (uint64_t k = 0; k < cfg->nsteps; k++) {
		const struct dc_step *st = &cfg->steps[k];
		int in_sample = 0;

		if (st->first_op > cfg->nops || st->nops > cfg->nops - st->first_op)
			return -EINVAL;
		/* Ops outside an OPEN..CLOSE pair use files the reader keeps open. */
		for (uint64_t i = st->first_op; i < st->first_op + st->nops; i++) {
			uint8_t fl = cfg->ops[i].flags;

			if (fl & DC_OPF_OPEN)
				in_sample = 1;
			if (!in_sample)
				r->need_files = 1;
			if (fl & DC_OPF_CLOSE)
				in_sample = 0;
		}
	}
	return 0;
}

static void init_result(struct dc_run_result *res, unsigned nthreads, uint64_t nsteps)
{
	res->t_start = res->t_end = 0;
	res->ops = res->bytes = res->errors = res->skipped = 0;
	res->steps_done = 0;
	res->stopped = 0;
	dc_hist_init(&res->lat);
	dc_hist_init(&res->sample_lat);
	dc_hist_init(&res->lat_read);
	dc_hist_init(&res->lat_write);
	res->qd_used = 0;
	res->eng_flags_used = 0;
	res->trainer_cpu_ns = 0;
	if (res->threads)
		memset(res->threads, 0, sizeof(*res->threads) * nthreads);
	if (res->step_times && nsteps)
		memset(res->step_times, 0, sizeof(*res->step_times) * nsteps);
}

/* Per-thread trace buffers, sized from the plan and allocated (and touched) before the clock. */
#define TRACE_MARGIN      16
#define TRACE_IO_LOOP_MIN (1ull << 20)
static int trace_setup(struct dc_run *r, int train)
{
	const struct dc_run_config *cfg = r->cfg;
	struct dc_trace *tr = cfg->trace;
	unsigned nbufs = train ? (cfg->threads ? 1 + r->nworkers : 1) : r->nworkers;
	uint64_t *caps = calloc(nbufs, sizeof(*caps));
	int ret;

	if (!caps)
		return -ENOMEM;
	if (train) {
		/* One event per op and per sample of a reader's steps; two per step for the trainer. */
		for (uint64_t k = 0; k < cfg->nsteps; k++) {
			const struct dc_step *st = &cfg->steps[k];
			unsigned b = cfg->threads ? 1 + (unsigned)(k % r->nworkers) : 0;
			uint64_t opens = 0;

			for (uint64_t i = st->first_op; i < st->first_op + st->nops; i++)
				opens += (cfg->ops[i].flags & DC_OPF_OPEN) != 0;
			caps[b] += st->nops + opens;
			caps[0] += 2;
		}
	} else {
		for (unsigned t = 0; t < nbufs; t++) {
			uint64_t n = cfg->thread_first_op[t + 1] - cfg->thread_first_op[t];

			if (cfg->loop && (cfg->runtime_ns || cfg->bytes_limit) &&
			    n < TRACE_IO_LOOP_MIN)
				n = TRACE_IO_LOOP_MIN;
			caps[t] = n;
		}
	}
	for (unsigned b = 0; b < nbufs; b++)
		caps[b] = tr->cap ? tr->cap : caps[b] + TRACE_MARGIN;
	dc_trace_free(tr);
	ret = dc_trace_alloc(tr, nbufs, caps, 0);
	free(caps);
	if (ret < 0)
		return ret;
	for (unsigned t = 0; t < r->nworkers; t++) {
		unsigned b = train ? (cfg->threads ? 1 + t : 0) : t;

		r->w[t].tb = &tr->bufs[b];
		r->w[t].trace_tid = (uint16_t)b;
	}
	if (train)
		r->ttb = &tr->bufs[0];
	return 0;
}

static int prepare(struct dc_run *r, const struct dc_run_config *cfg, struct dc_run_result *res,
		   int train)
{
	pthread_condattr_t ca;
	int ret;

	memset(r, 0, sizeof(*r));
	r->cfg = cfg;
	r->res = res;
	run_base_init(&r->b, &res->error, &r->space, cfg->stop);
	/* Timed waits on the monotonic clock, as the gate's (run_base.c). */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->space, &ca);
	pthread_condattr_destroy(&ca);

	r->nworkers = train ? (cfg->threads ? cfg->threads : 1) : cfg->threads;
	init_result(res, r->nworkers, train ? cfg->nsteps : 0);

	ret = check_config(r, train);
	if (ret < 0) {
		run_fail(&r->b, -ret, UINT32_MAX, 0, ret == -ENOENT ? "engine" : "config");
		return ret;
	}
	{
		char why[256];

		ret = dc_engine_available(cfg->engine, why, sizeof(why));
		if (ret < 0) {
			run_fail(&r->b, -ret, UINT32_MAX, 0, "engine");
			return ret;
		}
	}
	/* O_DIRECT buffers need room for the aligned superset of an unaligned read. */
	r->dio_align = DC_DIO_DEFAULT_ALIGN;
	if (cfg->direct && cfg->npaths && !(r->ops->caps & DC_CAP_NOIO)) {
		uint32_t mem, off;

		if (dc_dio_align(cfg->paths[0], &mem, &off, NULL) == 0 && off > r->dio_align)
			r->dio_align = off;
	}
	r->w = calloc(r->nworkers, sizeof(*r->w));
	if (train) {
		r->ready = calloc(cfg->nsteps ? cfg->nsteps : 1, 1);
		r->step_bytes = calloc(cfg->nsteps ? cfg->nsteps : 1, sizeof(*r->step_bytes));
	}
	if (!r->w || (train && (!r->ready || !r->step_bytes))) {
		run_fail(&r->b, ENOMEM, UINT32_MAX, 0, "memory");
		return -ENOMEM;
	}
	for (unsigned t = 0; t < r->nworkers; t++) {
		r->w[t].run = r;
		r->w[t].id = t;
	}
	if (cfg->trace) {
		ret = trace_setup(r, train);
		if (ret < 0) {
			run_fail(&r->b, -ret, UINT32_MAX, 0, "memory");
			return ret;
		}
	}
	return 0;
}

int run_prepare(struct dc_run *r, const struct dc_run_config *cfg, struct dc_run_result *res,
		int train)
{
	int ret = prepare(r, cfg, res, train);

	if (ret < 0)
		run_destroy(r);
	return ret;
}

void run_start_workers(struct dc_run *r, void *(*fn)(void *))
{
	for (unsigned t = 0; t < r->nworkers; t++) {
		if (run_start(&r->b, &r->w[t].tid, NULL, fn, &r->w[t]))
			break;
		r->w[t].created = 1;
	}
}

void run_join_workers(struct dc_run *r)
{
	for (unsigned t = 0; t < r->nworkers; t++)
		if (r->w[t].created)
			pthread_join(r->w[t].tid, NULL);
}

void run_destroy(struct dc_run *r)
{
	if (r->w) {
		for (unsigned t = 0; t < r->nworkers; t++) {
			free(r->w[t].lat);
			free(r->w[t].wlat);
			free(r->w[t].slat);
		}
	}
	free(r->w);
	free(r->ready);
	free(r->step_bytes);
	pthread_cond_destroy(&r->space);
	run_base_destroy(&r->b);
}

/* Everything a worker needs, made before the clock starts: slots, their buffers (written once
 * with random data when the plan writes), the engine instance, histograms, sample table. */
int worker_setup(struct dc_worker *w)
{
	struct dc_run *r = w->run;
	const struct dc_run_config *cfg = r->cfg;
	unsigned n = (r->ops->caps & DC_CAP_ASYNC) ? cfg->eng.qd : 1;
	int ret;

	w->nslots = n;
	w->lat = malloc(sizeof(*w->lat));
	w->wlat = malloc(sizeof(*w->wlat));
	w->slat = malloc(sizeof(*w->slat));
	w->slots = calloc(n, sizeof(*w->slots));
	w->free = calloc(n, sizeof(*w->free));
	w->done = calloc(n, sizeof(*w->done));
	w->io_sample = calloc(n, sizeof(*w->io_sample));
	w->samples = calloc(n + 2, sizeof(*w->samples));
	w->slot_fill = calloc(n, sizeof(*w->slot_fill));
	if (!w->lat || !w->wlat || !w->slat || !w->slots || !w->free || !w->done || !w->io_sample ||
	    !w->samples || !w->slot_fill)
		return -ENOMEM;
	dc_hist_init(w->lat);
	dc_hist_init(w->wlat);
	dc_hist_init(w->slat);
	ret = dc_bufpool_init(&w->pool, w->slots, n, cfg->max_len, r->dio_align, r->has_writes,
			      0x5eed0000ull + ((uint64_t)w->id << 16));
	if (ret < 0)
		return ret;
	for (unsigned i = 0; i < n; i++)
		w->free[i] = &w->slots[n - 1 - i];
	w->nfree = n;
	for (unsigned i = 0; i < n + 2; i++) {
		w->samples[i].file.fd = -1;
		w->samples[i].next_free = i + 1 < n + 2 ? &w->samples[i + 1] : NULL;
	}
	w->free_samples = &w->samples[0];
	w->eo = cfg->eng;
	w->eo.used_flags = 0;
	ret = r->ops->init(&w->eng, &w->eo, w->slots, n);
	if (ret < 0) {
		w->eng = NULL;
		return ret;
	}
	return 0;
}

void worker_teardown(struct dc_worker *w)
{
	dc_bufpool_release(w->run->ops, &w->eng, &w->pool, &w->slots);
	free(w->free);
	free(w->done);
	free(w->io_sample);
	free(w->samples);
	free(w->slot_fill);
	free(w->files);
	w->free = w->done = NULL;
	w->io_sample = NULL;
	w->samples = NULL;
	w->files = NULL;
}

/* Push this worker's new completions to the live progress counters (relaxed: a watcher only
 * needs eventually-right numbers). */
void worker_publish(struct dc_worker *w)
{
	struct dc_progress *p = w->run->cfg->progress;

	w->since_pub = 0;
	if (!p)
		return;
	__atomic_fetch_add(&p->ops, w->ops - w->pub_ops, __ATOMIC_RELAXED);
	__atomic_fetch_add(&p->bytes, w->bytes - w->pub_bytes, __ATOMIC_RELAXED);
	w->pub_ops = w->ops;
	w->pub_bytes = w->bytes;
}

/* Merge the per-thread numbers into the result (after every worker has been joined). */
void run_collect(struct dc_run *r)
{
	struct dc_run_result *res = r->res;

	for (unsigned t = 0; t < r->nworkers; t++) {
		struct dc_worker *w = &r->w[t];

		res->ops += w->ops;
		res->bytes += w->bytes;
		res->errors += w->errors;
		res->skipped += w->skipped;
		res->ops_write += w->wops;
		res->bytes_write += w->wbytes;
		if (w->lat) {
			dc_hist_merge(&res->lat, w->lat);
			dc_hist_merge(&res->lat_read, w->lat);
		}
		if (w->wlat) {
			dc_hist_merge(&res->lat, w->wlat);
			dc_hist_merge(&res->lat_write, w->wlat);
		}
		if (w->slat)
			dc_hist_merge(&res->sample_lat, w->slat);
		if (res->threads) {
			res->threads[t].ops = w->ops;
			res->threads[t].bytes = w->bytes;
			res->threads[t].errors = w->errors;
			res->threads[t].cpu_ns = w->cpu_ns;
			res->threads[t].fsync_ns = w->fsync_ns;
			res->threads[t].minflt = w->minflt;
			res->threads[t].majflt = w->majflt;
		}
	}
	if (r->nworkers) {
		res->qd_used = r->w[0].nslots;
		res->eng_flags_used = r->w[0].eo.used_flags;
	}
	res->stopped = r->cfg->stop && *r->cfg->stop;
}

int run_finish(struct dc_run *r)
{
	int err = r->res->error.err;

	run_destroy(r);
	return err ? -err : 0;
}
