/* dc_run_io: the fio-like shape. Each worker thread owns ops [f[t], f[t+1]), opens their files
 * once, and cycles through them keeping up to qd requests in flight until the runtime or the
 * byte budget is spent (or once through). Requests issued during the ramp are run, not counted.
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "dlio_core/timer.h"
#include "runner_int.h"

/* Open, once, every file this worker's op range touches (read-write if it writes to it). */
/* The access-pattern advice of the run's flags on a buffered file. Advice is a hint: a filesystem
 * that ignores it changes nothing that is measured, so its failure is not an error. */
static void advise(const struct dc_file *f, unsigned flags)
{
	int advice = flags & DC_ENG_FADV_RANDOM ? POSIX_FADV_RANDOM
		     : flags & DC_ENG_FADV_SEQ  ? POSIX_FADV_SEQUENTIAL
						: POSIX_FADV_NORMAL;

	if (f->fd >= 0 && !f->direct && advice != POSIX_FADV_NORMAL)
		(void)posix_fadvise(f->fd, 0, 0, advice);
}

static int io_open_files(struct dc_worker *w)
{
	struct dc_run *r = w->run;
	const struct dc_run_config *cfg = r->cfg;
	uint64_t first = cfg->thread_first_op[w->id], last = cfg->thread_first_op[w->id + 1];
	uint8_t *use;
	int ret = 0;

	if (!cfg->npaths)
		return 0;
	w->files = calloc(cfg->npaths, sizeof(*w->files));
	use = calloc(cfg->npaths, 1);
	if (!w->files || !use) {
		free(use);
		run_fail(&r->b, ENOMEM, UINT32_MAX, 0, "memory");
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < cfg->npaths; i++) {
		w->files[i].path = cfg->paths[i];
		w->files[i].fd = -1;
		w->files[i].direct = cfg->direct;
		w->files[i].reg_index = -1;
	}
	for (uint64_t i = first; i < last; i++)
		use[cfg->ops[i].file] |= 1 | (cfg->ops[i].op == DC_OP_WRITE ? 2 : 0);
	for (uint32_t i = 0; i < cfg->npaths && !ret; i++) {
		if (!use[i])
			continue;
		ret = r->ops->open(w->eng, &w->files[i], use[i] & 2);
		if (ret < 0) {
			w->files[i].fd = -1;
			run_fail(&r->b, -ret, i, 0, "open");
		} else {
			advise(&w->files[i], cfg->eng.flags);
		}
	}
	free(use);
	return ret;
}

static void io_close_files(struct dc_worker *w)
{
	const struct dc_run_config *cfg = w->run->cfg;

	if (!w->files || !w->eng)
		return;
	for (uint32_t i = 0; i < cfg->npaths; i++) {
		if (w->files[i].fd < 0)
			continue;
		if (w->run->ops->close(w->eng, &w->files[i]) < 0)
			w->files[i].fd = -1;
	}
}

/* bytes_limit is shared by all threads: claim it in chunks so the common counter is touched once
 * per ~64 requests, not per request. Returns the bytes granted (0 = budget spent). */
static int64_t io_claim(struct dc_run *r)
{
	uint64_t limit = r->cfg->bytes_limit;
	uint64_t chunk = 64 * (r->cfg->max_len ? r->cfg->max_len : 1);
	uint64_t prev = __atomic_fetch_add(&r->claimed, chunk, __ATOMIC_RELAXED);

	if (prev >= limit)
		return 0;
	return (int64_t)(limit - prev < chunk ? limit - prev : chunk);
}

static inline void io_complete(struct dc_worker *w, struct dc_io *io, uint64_t now, uint64_t t_ramp)
{
	if (likely(io->res == (int64_t)io->len)) {
		/* Only requests issued after the ramp count. */
		if (likely(io->t_issue >= t_ramp)) {
			const int wr = io->op == DC_OP_WRITE;

			w->ops++;
			w->bytes += io->len;
			w->wops += (uint64_t)wr;
			w->wbytes += wr ? io->len : 0;
			dc_hist_add_inline(wr ? w->wlat : w->lat, now - io->t_issue);
			if (unlikely(w->tb))
				dc_trace_add(w->tb, io->op, w->trace_tid, io->t_issue,
					     now - io->t_issue, w->run->cfg->ops[io->user].file,
					     io->offset, io->len, DC_TRACE_NONE64);
			if (unlikely(++w->since_pub >= RUN_PROGRESS_EVERY))
				worker_publish(w);
		}
	} else {
		worker_io_error(w, io);
	}
}

/* DC_OPF_FSYNC: flush the file now that its writes completed (the caller drained them). A file
 * without a descriptor (null engine, MPI-IO) has nothing to flush. 0 or -errno. */
static int io_fsync(struct dc_worker *w, uint32_t file)
{
	struct dc_file *f = &w->files[file];
	uint64_t t0 = dc_now_ns();
	int ret = 0;

	if (f->fd >= 0 && w->run->ops->caps & DC_CAP_WRITE && !(w->run->ops->caps & DC_CAP_NOIO))
		ret = fsync(f->fd) < 0 ? -errno : 0;
	w->fsync_ns += dc_now_ns() - t0;
	if (ret < 0)
		run_fail(&w->run->b, -ret, file, 0, "fsync");
	return ret;
}

/* Where a worker is in its share of the plan, and what ends it: the synchronous and the
 * asynchronous loop walk it alike. */
struct io_cursor {
	const struct dc_op *ops;
	uint64_t idx, first, last; /* the next request; the worker's share is [first, last) */
	uint64_t t_ramp, t_stop;
	const volatile int *stop;
	int64_t budget; /* bytes claimed from the run's byte limit and not issued yet */
	int loop, limited;
};

static inline __attribute__((always_inline)) void io_cursor_init(struct io_cursor *c,
								 const struct dc_worker *w)
{
	const struct dc_run *r = w->run;
	const struct dc_run_config *cfg = r->cfg;

	c->ops = cfg->ops;
	c->first = cfg->thread_first_op[w->id];
	c->last = cfg->thread_first_op[w->id + 1];
	c->idx = c->first;
	c->t_ramp = r->b.t_ramp_end;
	c->t_stop = r->b.t_stop;
	c->stop = cfg->stop;
	c->budget = 0;
	c->loop = r->loop;
	c->limited = cfg->bytes_limit != 0;
}

/* The next request to issue, *now its time; NULL when the worker is done: its pass is over (no
 * loop), the run is stopped, its time is up or the byte budget spent. Checked between requests,
 * so a stop lands within one request. Always inline: on the loops' per-request path the cursor
 * stays in registers and the tests are the ones each loop had. */
static inline __attribute__((always_inline)) const struct dc_op *io_next(struct io_cursor *c,
									 struct dc_run *r,
									 uint64_t *now)
{
	const struct dc_op *op;

	if (unlikely(c->idx == c->last)) {
		if (!c->loop)
			return NULL;
		c->idx = c->first;
	}
	if (unlikely((c->stop && *c->stop) || run_stopped(&r->b)))
		return NULL;
	*now = dc_now_ns();
	if (unlikely(*now >= c->t_stop))
		return NULL;
	op = &c->ops[c->idx];
	if (c->limited && *now >= c->t_ramp) {
		if (c->budget <= 0 && (c->budget = io_claim(r)) <= 0)
			return NULL;
		c->budget -= (int64_t)op->length;
	}
	return op;
}

/* Fill a slot with request idx (op, on file f) and, for a write, its data, whose making is not the
 * request's time: returns the issue time. One for the synchronous and the asynchronous loop;
 * always inline, so it adds neither a call nor a test to their per-request path. */
static inline __attribute__((always_inline)) uint64_t io_prepare(struct dc_worker *w,
								 struct dc_io *io,
								 struct dc_file *f,
								 const struct dc_op *op,
								 uint64_t idx, uint64_t now)
{
	io->file = f;
	io->offset = op->offset;
	io->len = op->length;
	io->op = op->op;
	io->user = idx;
	if (io->op == DC_OP_WRITE) {
		dc_prepare_write(w, io, op->file, now);
		now = dc_now_ns();
	}
	io->t_issue = now;
	return now;
}

/*
 * Synchronous engines (posix, mmap, null): one slot, the request completes inside submit(). This
 * is the loop whose cost the null engine measures, so it is kept flat: the counters live in
 * registers, one indirect call per request, two timestamps, no atomics but a relaxed load.
 * It is compiled twice (traced = 0 / 1), so that with tracing off it has no tracing code at all.
 */
static inline __attribute__((always_inline)) void io_loop_sync_impl(struct dc_worker *w,
								    const int traced)
{
	struct dc_run *r = w->run;
	int (*submit)(struct dc_engine *, struct dc_io *) = r->ops->submit;
	struct dc_engine *eng = w->eng;
	struct dc_file *files = w->files;
	struct dc_hist *lat = w->lat, *wlat = w->wlat; /* reads, writes */
	struct dc_trace_buf *const tb = w->tb;
	struct dc_io *io = &w->slots[0];
	struct io_cursor c;
	uint64_t nops = 0, nbytes = 0, nwops = 0, nwbytes = 0;
	unsigned since = 0;

	io_cursor_init(&c, w);
	if (c.first >= c.last)
		goto out;
	for (;;) {
		const struct dc_op *op;
		uint64_t now, done;
		int ret;

		op = io_next(&c, r, &now);
		if (!op)
			break;
		now = io_prepare(w, io, &files[op->file], op, c.idx++, now);
		ret = submit(eng, io);
		done = dc_now_ns();
		if (likely(ret == 1 && io->res == (int64_t)io->len)) {
			if (likely(now >= c.t_ramp)) {
				const int wr = io->op == DC_OP_WRITE;

				nops++;
				nbytes += io->len;
				nwops += (uint64_t)wr;
				nwbytes += wr ? io->len : 0;
				dc_hist_add_inline(wr ? wlat : lat, done - now);
				if (traced)
					dc_trace_add(tb, io->op, w->trace_tid, now, done - now,
						     op->file, op->offset, io->len,
						     DC_TRACE_NONE64);
				if (unlikely(++since >= RUN_PROGRESS_EVERY)) {
					since = 0;
					w->ops = nops;
					w->bytes = nbytes;
					worker_publish(w);
				}
			}
			if (unlikely(op->flags & DC_OPF_FSYNC) && io_fsync(w, op->file) < 0)
				break;
		} else if (ret == 1) {
			w->ops = nops;
			w->bytes = nbytes;
			w->wops = nwops;
			w->wbytes = nwbytes;
			worker_io_error(w, io);
			break;
		} else {
			w->errors++;
			run_fail(&r->b, ret < 0 ? -ret : EIO, op->file, op->offset, "submit");
			break;
		}
	}
out:
	w->ops = nops;
	w->bytes = nbytes;
	w->wops = nwops;
	w->wbytes = nwbytes;
	w->t_end = dc_now_ns();
	worker_publish(w);
}

static __attribute__((noinline)) void io_loop_sync(struct dc_worker *w)
{
	io_loop_sync_impl(w, 0);
}

static __attribute__((noinline)) void io_loop_sync_traced(struct dc_worker *w)
{
	io_loop_sync_impl(w, 1);
}

static void io_loop(struct dc_worker *w)
{
	struct dc_run *r = w->run;
	int (*submit)(struct dc_engine *, struct dc_io *) = r->ops->submit;
	const unsigned qd = w->nslots;
	struct io_cursor c;
	unsigned inflight = 0;
	int issuing;
	int64_t fsync_file = -1; /* a DC_OPF_FSYNC op was issued: drain, flush, then go on */

	io_cursor_init(&c, w);
	issuing = c.first < c.last;
	while (issuing || inflight) {
		while (issuing && inflight < qd && fsync_file < 0) {
			const struct dc_op *op;
			struct dc_io *io;
			uint64_t now;
			int ret;

			op = io_next(&c, r, &now);
			if (!op) {
				issuing = 0;
				break;
			}
			io = w->free[--w->nfree];
			io_prepare(w, io, &w->files[op->file], op, c.idx++, now);
			if (unlikely(op->flags & DC_OPF_FSYNC))
				fsync_file = op->file;
			ret = submit(w->eng, io);
			if (likely(ret == 1)) {
				io_complete(w, io, dc_now_ns(), c.t_ramp);
				w->free[w->nfree++] = io;
			} else if (ret == 0) {
				inflight++;
			} else {
				w->free[w->nfree++] = io;
				w->errors++;
				run_fail(&r->b, -ret, op->file, op->offset, "submit");
				issuing = 0;
			}
		}
		if (inflight) {
			int n = r->ops->reap(w->eng, 1, w->done, qd);
			uint64_t now = dc_now_ns();

			if (unlikely(n < 0)) {
				/* The ring is unusable; cleanup cancels what is still in flight. */
				run_fail(&r->b, -n, UINT32_MAX, 0, "reap");
				break;
			}
			for (int i = 0; i < n; i++) {
				io_complete(w, w->done[i], now, c.t_ramp);
				w->free[w->nfree++] = w->done[i];
			}
			inflight -= (unsigned)n;
		}
		if (unlikely(fsync_file >= 0 && !inflight)) {
			if (io_fsync(w, (uint32_t)fsync_file) < 0)
				break;
			fsync_file = -1;
		}
	}
	w->t_end = dc_now_ns();
	worker_publish(w);
}

static void *io_worker(void *arg)
{
	struct dc_worker *w = arg;
	struct dc_run *r = w->run;
	int ret = worker_setup(w);

	if (ret < 0)
		run_fail(&r->b, -ret, UINT32_MAX, 0, ret == -ENOMEM ? "memory" : "engine init");
	else
		io_open_files(w); /* a failure is recorded and aborts the gate */
	if (run_gate_wait(&r->b) == 0) {
		uint64_t cpu0 = thread_cpu_ns(), min0, maj0;

		thread_faults(&min0, &maj0);
		if (r->ops->caps & DC_CAP_ASYNC)
			io_loop(w);
		else if (w->tb)
			io_loop_sync_traced(w);
		else
			io_loop_sync(w);
		w->cpu_ns = thread_cpu_ns() - cpu0;
		thread_faults(&w->minflt, &w->majflt);
		w->minflt -= min0;
		w->majflt -= maj0;
	}
	io_close_files(w);
	worker_teardown(w);
	return NULL;
}

int dc_run_io(const struct dc_run_config *cfg, struct dc_run_result *res)
{
	struct dc_run r;
	int ret = run_prepare(&r, cfg, res, 0);

	if (ret < 0)
		return ret;
	/* Without a runtime or a byte budget, "loop" would never end: one pass. */
	r.loop = cfg->loop && (cfg->runtime_ns || cfg->bytes_limit);
	run_start_workers(&r, io_worker);
	run_gate_open(&r.b, cfg->ramp_ns, cfg->runtime_ns);
	run_join_workers(&r);

	res->t_start = r.b.t_ramp_end;
	res->t_end = r.b.t_ramp_end;
	for (unsigned t = 0; t < r.nworkers; t++)
		if (r.w[t].t_end > res->t_end)
			res->t_end = r.w[t].t_end;
	run_collect(&r);
	return run_finish(&r);
}
