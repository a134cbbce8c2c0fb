/* dc_run_train: the DLIO/PyTorch shape. Reader threads read steps k = t, t+T, ... and publish
 * them; the calling thread is the trainer, which takes the steps in order, records how long it
 * waited, spins the step's compute time and calls the step hook. At most `prefetch` finished
 * steps may wait beyond the one the trainer is about to take (bounded prefetch).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dlio_core/compute.h"
#include "dlio_core/timer.h"
#include "runner_int.h"

#define TRAIN_POLL_NS 50000000ull /* timed waits and compute chunks: stop checks this often */

static void wait_a_while(struct dc_run *r, pthread_cond_t *cv)
{
	struct timespec ts;
	uint64_t t = dc_now_ns() + TRAIN_POLL_NS;

	ts.tv_sec = (time_t)(t / 1000000000ull);
	ts.tv_nsec = (long)(t % 1000000000ull);
	pthread_cond_timedwait(cv, &r->b.lock, &ts);
}

static struct dc_sample *sample_get(struct dc_worker *w)
{
	struct dc_sample *s = w->free_samples;

	/* Cannot run out: a live sample holds an in-flight op, or is the one being issued. */
	w->free_samples = s->next_free;
	s->outstanding = 0;
	s->closing = 0;
	s->failed = 0;
	s->bytes = 0;
	return s;
}

/* A sample's file failed under --skip-bad-files: the sample is left out (counted once) and its file
 * marked; the run goes on. */
static void sample_skip(struct dc_worker *w, struct dc_sample *s, uint32_t file)
{
	w->run->cfg->bad_files[file] = 1;
	if (!s || !s->failed) {
		w->skipped++;
		if (s)
			s->failed = 1;
	}
}

/* Close a sample once its last op was issued and all its ops completed. */
static void sample_maybe_finish(struct dc_worker *w, struct dc_sample *s)
{
	struct dc_run *r = w->run;
	int ret;

	if (!s->closing || s->outstanding)
		return;
	ret = r->ops->close(w->eng, &s->file);
	if (ret < 0 && !s->failed) {
		s->failed = 1;
		run_fail(&r->b, -ret, s->file_idx, 0, "close");
	}
	if (!s->failed) {
		uint64_t now = dc_now_ns();

		dc_hist_add(w->slat, now - s->t_open);
		if (unlikely(w->tb))
			dc_trace_add(w->tb, DC_TR_SAMPLE, w->trace_tid, s->t_open, now - s->t_open,
				     s->file_idx, 0, s->bytes, w->cur_step);
		w->step_samples++;
		if (r->cfg->preprocess_ns_per_sample && !run_should_stop(r))
			dc_compute(r->cfg->preprocess_ns_per_sample, DC_COMPUTE_SPIN);
	}
	s->file.fd = -1;
	s->next_free = w->free_samples;
	w->free_samples = s;
}

static void train_complete(struct dc_worker *w, struct dc_io *io, uint64_t now)
{
	struct dc_sample *s = w->io_sample[io->index];

	if (likely(io->res == (int64_t)io->len)) {
		w->ops++;
		w->bytes += io->len;
		w->step_bytes += io->len;
		dc_hist_add(w->lat, now - io->t_issue);
		if (unlikely(w->tb)) {
			dc_trace_add(w->tb, io->op, w->trace_tid, io->t_issue, now - io->t_issue,
				     w->run->cfg->ops[io->user].file, io->offset, io->len,
				     w->cur_step);
			if (s)
				s->bytes += io->len;
		}
		if (unlikely(++w->since_pub >= RUN_PROGRESS_EVERY))
			worker_publish(w);
	} else if (w->run->cfg->bad_files) {
		sample_skip(w, s, w->run->cfg->ops[io->user].file);
	} else {
		worker_io_error(w, io);
		if (s)
			s->failed = 1;
	}
	w->free[w->nfree++] = io;
	if (s) {
		s->outstanding--;
		sample_maybe_finish(w, s);
	}
}

/* A file used outside an OPEN..CLOSE sample: opened on first use, kept until the end. 0 or -errno
 * (recorded). */
static int persistent_file(struct dc_worker *w, const struct dc_op *op, struct dc_file **out)
{
	struct dc_run *r = w->run;
	struct dc_file *f = &w->files[op->file];
	int ret;

	*out = f;
	if (f->fd >= 0)
		return 0;
	f->path = r->cfg->paths[op->file];
	f->direct = r->cfg->direct;
	ret = r->ops->open(w->eng, f, op->op == DC_OP_WRITE);
	if (ret < 0) {
		f->fd = -1;
		if (r->cfg->bad_files) {
			sample_skip(w, NULL, op->file);
			return 1; /* the op is left out */
		}
		run_fail(&r->b, -ret, op->file, op->offset, "open");
	}
	return ret;
}

/* Start the sample that op opens, ending *cur first if it had no CLOSE. 0 or -errno (recorded;
 * *cur is then NULL). */
static int sample_open(struct dc_worker *w, const struct dc_op *op, struct dc_sample **cur)
{
	struct dc_run *r = w->run;
	struct dc_sample *s;
	int ret;

	if (*cur) {
		(*cur)->closing = 1;
		sample_maybe_finish(w, *cur);
	}
	s = sample_get(w);
	s->file.path = r->cfg->paths[op->file];
	s->file.direct = r->cfg->direct;
	s->file_idx = op->file;
	s->t_open = dc_now_ns();
	ret = r->ops->open(w->eng, &s->file, op->op == DC_OP_WRITE);
	if (ret < 0) {
		s->file.fd = -1;
		s->next_free = w->free_samples;
		w->free_samples = s;
		s = NULL;
		if (r->cfg->bad_files) { /* the sample's ops up to its CLOSE are left out */
			sample_skip(w, NULL, op->file);
			w->skipping = 1;
			ret = 0;
		} else {
			run_fail(&r->b, -ret, op->file, op->offset, "open");
		}
	}
	*cur = s;
	return ret;
}

/* Issue op i into a free slot; *cur is the sample being read (NULL outside samples). 1 = in
 * flight, 0 = completed inside submit (accounted), -errno = failed (recorded: the step halts).
 * Inline: this is the per-request path. */
static inline int issue_op(struct dc_worker *w, uint64_t i, struct dc_sample **cur)
{
	struct dc_run *r = w->run;
	const struct dc_op *op = &r->cfg->ops[i];
	struct dc_sample *s;
	struct dc_file *f;
	struct dc_io *io;
	int ret;

	if (op->flags & DC_OPF_OPEN) {
		w->skipping = 0;
		ret = sample_open(w, op, cur);
		if (ret < 0)
			return ret;
	}
	if (unlikely(w->skipping)) { /* a sample whose file would not open (--skip-bad-files) */
		if (op->flags & DC_OPF_CLOSE)
			w->skipping = 0;
		return 0;
	}
	if (*cur) {
		f = &(*cur)->file;
	} else {
		ret = persistent_file(w, op, &f);
		if (ret != 0)
			return ret < 0 ? ret : 0;
	}
	s = *cur;
	io = w->free[--w->nfree];
	io->file = f;
	io->offset = op->offset;
	io->len = op->length;
	io->op = op->op;
	io->user = i;
	w->io_sample[io->index] = s;
	if (s) {
		s->outstanding++;
		if (op->flags & DC_OPF_CLOSE) {
			s->closing = 1;
			*cur = NULL;
		}
	}
	io->t_issue = dc_now_ns();
	ret = r->ops->submit(w->eng, io);
	if (likely(ret == 1)) {
		train_complete(w, io, dc_now_ns());
		return 0;
	}
	if (ret == 0)
		return 1;
	w->free[w->nfree++] = io;
	if (r->cfg->bad_files) {
		sample_skip(w, s, op->file);
		ret = 0;
	} else {
		w->errors++;
		run_fail(&r->b, -ret, op->file, op->offset, "submit");
		if (s)
			s->failed = 1;
	}
	if (s) {
		s->outstanding--;
		sample_maybe_finish(w, s);
	}
	return ret;
}

/* Read step k with up to qd requests in flight; samples may overlap. 0, or -1 when stopped or
 * failed (the error is recorded). Everything in flight is drained before returning. */
static int read_step(struct dc_worker *w, uint64_t k)
{
	struct dc_run *r = w->run;
	const struct dc_run_config *cfg = r->cfg;
	const struct dc_step *st = &cfg->steps[k];
	uint64_t i = st->first_op, end = st->first_op + st->nops;
	struct dc_sample *cur = NULL;
	unsigned inflight = 0, qd = w->nslots;
	int halt = 0;

	w->step_bytes = 0;
	w->step_samples = 0;
	w->cur_step = k;
	for (;;) {
		while (!halt && i < end && inflight < qd) {
			int ret;

			if (run_should_stop(r)) {
				halt = 1;
				break;
			}
			ret = issue_op(w, i++, &cur);
			if (ret > 0)
				inflight++;
			else if (ret < 0)
				halt = 1;
		}
		if (!inflight)
			break;
		{
			int n = r->ops->reap(w->eng, 1, w->done, qd);
			uint64_t now = dc_now_ns();

			if (unlikely(n < 0)) {
				run_fail(&r->b, -n, UINT32_MAX, 0, "reap");
				return -1;
			}
			for (int j = 0; j < n; j++)
				train_complete(w, w->done[j], now);
			inflight -= (unsigned)n;
		}
	}
	if (cur) { /* the step ended inside a sample: close it */
		cur->closing = 1;
		sample_maybe_finish(w, cur);
	}
	if (halt || run_should_stop(r))
		return -1;
	/* Samples the plan did not mark (no OPEN/CLOSE) still get their preprocessing. */
	if (cfg->preprocess_ns_per_sample && w->step_samples < st->nsamples)
		dc_compute(cfg->preprocess_ns_per_sample * (st->nsamples - w->step_samples),
			   DC_COMPUTE_SPIN);
	r->step_bytes[k] = w->step_bytes;
	return 0;
}

static void close_persistent(struct dc_worker *w)
{
	const struct dc_run_config *cfg = w->run->cfg;

	if (!w->files || !w->eng)
		return;
	for (uint32_t i = 0; i < cfg->npaths; i++)
		if (w->files[i].fd >= 0)
			w->run->ops->close(w->eng, &w->files[i]);
}

static int train_worker_setup(struct dc_worker *w)
{
	struct dc_run *r = w->run;
	int ret = worker_setup(w);

	if (ret < 0) {
		run_fail(&r->b, -ret, UINT32_MAX, 0, ret == -ENOMEM ? "memory" : "engine init");
		return ret;
	}
	if (r->need_files && r->cfg->npaths) {
		w->files = calloc(r->cfg->npaths, sizeof(*w->files));
		if (!w->files) {
			run_fail(&r->b, ENOMEM, UINT32_MAX, 0, "memory");
			return -ENOMEM;
		}
		for (uint32_t i = 0; i < r->cfg->npaths; i++) {
			w->files[i].fd = -1;
			w->files[i].reg_index = -1;
		}
	}
	return 0;
}

static void *reader(void *arg)
{
	struct dc_worker *w = arg;
	struct dc_run *r = w->run;
	const struct dc_run_config *cfg = r->cfg;
	const uint64_t prefetch = cfg->prefetch ? cfg->prefetch : 1;

	/* A setup failure is recorded in the run, which makes the gate abort for everyone. */
	train_worker_setup(w);
	if (run_gate_wait(&r->b) == 0) {
		uint64_t cpu0 = thread_cpu_ns();

		for (uint64_t k = w->id; k < cfg->nsteps; k += r->nworkers) {
			int ok;

			/* Bounded prefetch: step k may be read once the trainer has taken k - prefetch. */
			pthread_mutex_lock(&r->b.lock);
			while (k > r->consumed + prefetch && !run_should_stop(r))
				wait_a_while(r, &r->space);
			pthread_mutex_unlock(&r->b.lock);
			if (run_should_stop(r))
				break;
			ok = read_step(w, k) == 0;
			if (!ok)
				break;
			pthread_mutex_lock(&r->b.lock);
			r->ready[k] = 1;
			pthread_cond_broadcast(&r->b.cond);
			pthread_mutex_unlock(&r->b.lock);
		}
		w->cpu_ns = thread_cpu_ns() - cpu0;
	}
	worker_publish(w);
	close_persistent(w);
	worker_teardown(w);
	return NULL;
}

/* The step's compute from t0 (when the batch was in hand) in chunks, so a stop or a reader's
 * failure ends it within TRAIN_POLL_NS. */
static uint64_t train_compute(struct dc_run *r, uint64_t t0, uint64_t ns)
{
	uint64_t deadline = t0 + ns, now = dc_now_ns();

	if (!ns)
		return 0;
	for (;;) {
		uint64_t until = now + TRAIN_POLL_NS < deadline ? now + TRAIN_POLL_NS : deadline;

		now = dc_compute_until(until, r->cfg->compute_mode);
		if (now >= deadline || run_should_stop(r))
			break;
	}
	return now - t0;
}

static void trainer(struct dc_run *r)
{
	const struct dc_run_config *cfg = r->cfg;
	struct dc_run_result *res = r->res;
	struct dc_worker *self = cfg->threads ? NULL : &r->w[0];

	for (uint64_t k = 0; k < cfg->nsteps; k++) {
		struct dc_step_times *st = &res->step_times[k];
		uint64_t want = cfg->steps[k].compute_ns;
		int ready;

		if (run_should_stop(r))
			break;
		st->t_fetch = dc_now_ns();
		if (k == 0 && cfg->progress)
			__atomic_store_n(&cfg->progress->t_first_fetch, st->t_fetch,
					 __ATOMIC_RELAXED);
		if (self) {
			/* No readers (num_workers=0): the whole read is exposed wait. */
			ready = read_step(self, k) == 0;
			st->t_ready = dc_now_ns();
		} else {
			pthread_mutex_lock(&r->b.lock);
			while (!r->ready[k] && !run_should_stop(r))
				wait_a_while(r, &r->b.cond);
			ready = r->ready[k];
			if (ready)
				r->consumed = k + 1;
			pthread_mutex_unlock(&r->b.lock);
			st->t_ready = dc_now_ns();
			/* Waking a reader costs a futex syscall (10-20 us on a VM). It is done after the
			 * batch is in hand and inside the step's compute window (the compute deadline is
			 * absolute from t_ready), as a real loader's refill overlaps the accelerator. */
			if (ready)
				pthread_cond_broadcast(&r->space);
		}
		if (!ready)
			break;
		st->bytes = r->step_bytes[k];
		if (r->ttb)
			dc_trace_add(r->ttb, DC_TR_FETCH, 0, st->t_fetch, st->t_ready - st->t_fetch,
				     DC_TRACE_NONE32, 0, st->bytes, k);
		st->compute_ns = train_compute(r, st->t_ready, want);
		if (r->ttb && st->compute_ns >= want)
			dc_trace_add(r->ttb, DC_TR_COMPUTE, 0, st->t_ready, st->compute_ns,
				     DC_TRACE_NONE32, 0, 0, k);
		if (st->compute_ns < want) { /* cut short by a stop or a failure */
			st->t_end = dc_now_ns();
			break;
		}
		if (cfg->step_hook) {
			int ret = cfg->step_hook(cfg->hook_ctx, k);

			if (ret) {
				run_fail(&r->b, ret < 0 ? -ret : ret, UINT32_MAX, 0, "step hook");
				st->t_end = dc_now_ns();
				break;
			}
		}
		st->t_end = dc_now_ns();
		res->steps_done++;
		if (cfg->progress) {
			__atomic_store_n(&cfg->progress->t_last_end, st->t_end, __ATOMIC_RELAXED);
			__atomic_fetch_add(&cfg->progress->steps, 1, __ATOMIC_RELEASE);
		}
	}
	/* Readers still waiting for room or reading ahead leave now. */
	pthread_mutex_lock(&r->b.lock);
	__atomic_store_n(&r->quit, 1, __ATOMIC_RELAXED);
	pthread_cond_broadcast(&r->space);
	pthread_cond_broadcast(&r->b.cond);
	pthread_mutex_unlock(&r->b.lock);
}

int dc_run_train(const struct dc_run_config *cfg, struct dc_run_result *res)
{
	struct dc_run r;
	int ret = run_prepare(&r, cfg, res, 1);

	if (ret < 0)
		return ret;
	if (!cfg->threads) {
		struct dc_worker *w = &r.w[0];

		/* The trainer reads: its engine instance lives on this thread. */
		if (train_worker_setup(w) == 0) {
			uint64_t cpu0 = thread_cpu_ns();

			r.b.t0 = dc_now_ns();
			trainer(&r);
			res->t_end = dc_now_ns();
			w->cpu_ns = thread_cpu_ns() - cpu0;
			res->trainer_cpu_ns = w->cpu_ns;
		}
		worker_publish(w);
		close_persistent(w);
		worker_teardown(w);
	} else {
		run_start_workers(&r, reader);
		if (run_gate_open(&r.b, cfg->ramp_ns, cfg->runtime_ns) == 0) {
			uint64_t cpu0 = thread_cpu_ns();

			trainer(&r);
			res->t_end = dc_now_ns();
			res->trainer_cpu_ns = thread_cpu_ns() - cpu0;
		} else {
			__atomic_store_n(&r.quit, 1, __ATOMIC_RELAXED);
		}
		run_join_workers(&r);
	}
	res->t_start = r.b.t0;
	if (res->t_end < res->t_start)
		res->t_end = res->t_start;
	run_collect(&r);
	return run_finish(&r);
}
