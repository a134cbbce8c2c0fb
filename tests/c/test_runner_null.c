/* The runner on the null engine (no disk): exact counts, byte and time limits, ramp, fault
 * injection with its error record, harness overhead, stop flag; and dc_run_train's steps,
 * compute, bytes, waits, readers 0/1/2, prefetch 1/4, step hook, errors and stop. */
#include <pthread.h>

#include "t_helpers.h"

static const char *paths[2] = { "/nonexistent/dlio-null-a", "/nonexistent/dlio-null-b" };

struct plan {
	struct dc_op *ops;
	uint64_t nops;
	uint64_t first[9];
};

static void make_plan(struct plan *p, uint64_t nops, uint64_t len, unsigned threads)
{
	p->ops = calloc(nops, sizeof(*p->ops));
	p->nops = nops;
	for (uint64_t i = 0; i < nops; i++) {
		p->ops[i].file = (uint32_t)(i & 1);
		p->ops[i].op = DC_OP_READ;
		p->ops[i].offset = i * len;
		p->ops[i].length = len;
	}
	for (unsigned t = 0; t <= threads; t++)
		p->first[t] = nops * t / threads;
}

static void base_cfg(struct dc_run_config *c, struct plan *p, unsigned threads, uint64_t len)
{
	memset(c, 0, sizeof(*c));
	c->engine = "null";
	c->eng.qd = 1;
	c->threads = threads;
	c->paths = paths;
	c->npaths = 2;
	c->ops = p->ops;
	c->nops = p->nops;
	c->max_len = len;
	c->thread_first_op = p->first;
}

static struct dc_run_result *new_result(unsigned threads, uint64_t nsteps)
{
	struct dc_run_result *r = calloc(1, sizeof(*r));

	r->threads = calloc(threads ? threads : 1, sizeof(*r->threads));
	if (nsteps)
		r->step_times = calloc(nsteps, sizeof(*r->step_times));
	return r;
}

static void free_result(struct dc_run_result *r)
{
	free(r->threads);
	free(r->step_times);
	free(r);
}

static void test_counts(void)
{
	for (unsigned threads = 1; threads <= 3; threads += 2) {
		for (unsigned qd = 1; qd <= 8; qd *= 8) {
			struct plan p;
			struct dc_run_config c;
			struct dc_run_result *r = new_result(threads, 0);
			struct dc_progress prog = { 0, 0, 0 };
			uint64_t tops = 0;
			int ret;

			make_plan(&p, 1000, 4096, threads);
			base_cfg(&c, &p, threads, 4096);
			c.eng.qd = qd;
			c.progress = &prog;
			ret = dc_run_io(&c, r);
			T_CHECK(ret == 0, "run: %d %s", ret, r->error.what);
			T_CHECK(r->ops == 1000 && r->bytes == 4096000 && r->errors == 0,
				"threads %u qd %u: ops %llu bytes %llu", threads, qd,
				(unsigned long long)r->ops, (unsigned long long)r->bytes);
			T_CHECK(r->lat.count == 1000, "lat count %llu",
				(unsigned long long)r->lat.count);
			for (unsigned t = 0; t < threads; t++)
				tops += r->threads[t].ops;
			T_CHECK(tops == 1000, "per-thread ops sum %llu", (unsigned long long)tops);
			T_CHECK(prog.ops == 1000 && prog.bytes == 4096000, "progress %llu",
				(unsigned long long)prog.ops);
			T_CHECK(r->qd_used == 1, "null is synchronous: qd_used %u", r->qd_used);
			T_CHECK(r->t_end >= r->t_start && r->error.err == 0, "window/error");
			free(p.ops);
			free_result(r);
		}
	}
}

/* A mixed read/write plan: every request counted in its direction (ops, bytes, latency), the
 * totals their sums. Every fourth request is an 8 KiB write, the others 4 KiB reads. */
static void test_mixed_directions(void)
{
	for (unsigned threads = 1; threads <= 3; threads += 2) {
		struct plan p;
		struct dc_run_config c;
		struct dc_run_result *r = new_result(threads, 0);
		int ret;

		make_plan(&p, 1000, 4096, threads);
		for (uint64_t i = 0; i < p.nops; i += 4) {
			p.ops[i].op = DC_OP_WRITE;
			p.ops[i].length = 8192;
		}
		base_cfg(&c, &p, threads, 8192);
		ret = dc_run_io(&c, r);
		T_CHECK(ret == 0, "mixed run: %d %s", ret, r->error.what);
		T_CHECK(r->ops == 1000 && r->ops_write == 250, "threads %u: ops %llu writes %llu",
			threads, (unsigned long long)r->ops, (unsigned long long)r->ops_write);
		T_CHECK(r->bytes_write == 250 * 8192 && r->bytes == 750 * 4096 + 250 * 8192,
			"bytes %llu written %llu", (unsigned long long)r->bytes,
			(unsigned long long)r->bytes_write);
		T_CHECK(r->lat_write.count == 250 && r->lat_read.count == 750 &&
				r->lat.count == 1000,
			"latency counts read %llu write %llu all %llu",
			(unsigned long long)r->lat_read.count,
			(unsigned long long)r->lat_write.count, (unsigned long long)r->lat.count);
		T_CHECK(r->lat.max == (r->lat_read.max > r->lat_write.max ? r->lat_read.max
									  : r->lat_write.max),
			"the whole max is the larger direction's");
		free(p.ops);
		free_result(r);
	}
}

static void test_bytes_limit(void)
{
	for (unsigned threads = 1; threads <= 2; threads++) {
		struct plan p;
		struct dc_run_config c;
		struct dc_run_result *r = new_result(threads, 0);
		const uint64_t limit = 10u << 20;

		make_plan(&p, 100, 4096, threads);
		base_cfg(&c, &p, threads, 4096);
		c.loop = 1;
		c.bytes_limit = limit;
		T_CHECK(dc_run_io(&c, r) == 0, "run");
		if (threads == 1)
			T_CHECK(r->bytes == limit, "1 thread: bytes %llu != limit",
				(unsigned long long)r->bytes);
		T_CHECK(r->bytes >= limit && r->bytes < limit + threads * 4096,
			"bytes %llu limit %llu", (unsigned long long)r->bytes,
			(unsigned long long)limit);
		free(p.ops);
		free_result(r);
	}
}

static void test_runtime_and_ramp(void)
{
	struct plan p;
	struct dc_run_config c;
	struct dc_run_result *r = new_result(1, 0);
	uint64_t t0 = dc_now_ns(), wall;

	make_plan(&p, 100, 4096, 1);
	base_cfg(&c, &p, 1, 4096);
	c.loop = 1;
	c.eng.delay_ns = 100000;  /* 100 us per request */
	c.ramp_ns = 150000000;    /* 150 ms not counted */
	c.runtime_ns = 200000000; /* 200 ms counted */
	T_CHECK(dc_run_io(&c, r) == 0, "run");
	wall = dc_now_ns() - t0;
	printf("ramp+runtime: %llu ops counted in %.1f ms window, wall %.1f ms\n",
	       (unsigned long long)r->ops, (r->t_end - r->t_start) / 1e6, wall / 1e6);
	/* At most runtime/delay requests fit in the window: the ramp's ~1500 must not be there. */
	T_CHECK(r->ops <= 2000 + 5 && r->ops > 200, "ops %llu", (unsigned long long)r->ops);
	T_CHECK(r->t_end - r->t_start >= 200000000 && r->t_end - r->t_start < 400000000,
		"window %llu ns", (unsigned long long)(r->t_end - r->t_start));
	T_CHECK(wall >= 350000000, "ramp was not run (wall %llu)", (unsigned long long)wall);
	T_CHECK(r->lat.min >= 100000, "latency %llu below the injected delay",
		(unsigned long long)r->lat.min);
	free(p.ops);
	free_result(r);
}

static void test_fault(int fail_errno)
{
	struct plan p;
	struct dc_run_config c;
	struct dc_run_result *r = new_result(1, 0);
	int ret;

	make_plan(&p, 100, 4096, 1);
	base_cfg(&c, &p, 1, 4096);
	c.eng.fail_nth = 5;
	c.eng.fail_errno = fail_errno;
	ret = dc_run_io(&c, r);
	if (fail_errno == -1) {
		T_CHECK(ret == -EIO && !strcmp(r->error.what, "short read"),
			"short: ret %d what '%s'", ret, r->error.what);
	} else {
		int e = fail_errno ? fail_errno : EIO;

		T_CHECK(ret == -e && r->error.err == e && !strcmp(r->error.what, "read"),
			"fault: ret %d err %d what '%s'", ret, r->error.err, r->error.what);
	}
	/* Op 4 (0-based) is the 5th: file 0, offset 4 * 4096. */
	T_CHECK(r->error.file == 0 && r->error.offset == 4 * 4096, "error at file %u offset %llu",
		r->error.file, (unsigned long long)r->error.offset);
	T_CHECK(r->ops == 4 && r->bytes == 4 * 4096 && r->errors == 1, "kept %llu ops, %llu errors",
		(unsigned long long)r->ops, (unsigned long long)r->errors);
	free(p.ops);
	free_result(r);
}

static void test_overhead(void)
{
	struct plan p;
	struct dc_run_config c;
	struct dc_run_result *r = new_result(1, 0);
	double per;

	make_plan(&p, 2000000, 4096, 1);
	base_cfg(&c, &p, 1, 4096);
	T_CHECK(dc_run_io(&c, r) == 0, "run");
	per = (double)(r->t_end - r->t_start) / (double)r->ops;
	printf("null engine qd1: %.1f ns per request (both timestamps included; target < 100), "
	       "p50 latency %llu ns\n",
	       per, (unsigned long long)dc_hist_percentile(&r->lat, 50));
	T_CHECK(per < 2000, "harness overhead %.1f ns per request is far off", per);
	free(p.ops);
	free_result(r);
}

struct stopper {
	volatile int *flag;
	uint64_t after_ns;
};

static void *stop_later(void *arg)
{
	struct stopper *s = arg;

	dc_compute(s->after_ns, DC_COMPUTE_HYBRID);
	*s->flag = 1;
	return NULL;
}

static void test_stop_io(void)
{
	struct plan p;
	struct dc_run_config c;
	struct dc_run_result *r = new_result(2, 0);
	volatile int stop = 0;
	struct stopper s = { &stop, 100000000 };
	pthread_t th;
	uint64_t t0;

	make_plan(&p, 10, 4096, 2);
	base_cfg(&c, &p, 2, 4096);
	c.loop = 1;
	c.runtime_ns = 60ull * 1000000000;
	c.eng.delay_ns = 20000000; /* slow I/O: 20 ms a request */
	c.stop = &stop;
	t0 = dc_now_ns();
	pthread_create(&th, NULL, stop_later, &s);
	T_CHECK(dc_run_io(&c, r) == 0, "run");
	pthread_join(th, NULL);
	printf("io stop: returned %.1f ms after start (stop at 100 ms)\n",
	       (dc_now_ns() - t0) / 1e6);
	T_CHECK(dc_now_ns() - t0 < 1000000000ull, "stop took too long");
	T_CHECK(r->stopped == 1, "stopped flag");
	free(p.ops);
	free_result(r);
}

/* ---- train ---- */

#define SPS            4 /* samples per step */
#define OPS_PER_SAMPLE 2

struct tplan {
	struct dc_op *ops;
	struct dc_step *steps;
	uint64_t nops, nsteps;
	uint64_t *step_bytes;
};

static void make_tplan(struct tplan *t, uint64_t nsteps, uint64_t compute_ns)
{
	uint64_t k, i = 0;

	t->nsteps = nsteps;
	t->nops = nsteps * SPS * OPS_PER_SAMPLE;
	t->ops = calloc(t->nops, sizeof(*t->ops));
	t->steps = calloc(nsteps, sizeof(*t->steps));
	t->step_bytes = calloc(nsteps, sizeof(*t->step_bytes));
	for (k = 0; k < nsteps; k++) {
		t->steps[k].first_op = i;
		t->steps[k].nops = SPS * OPS_PER_SAMPLE;
		t->steps[k].nsamples = SPS;
		t->steps[k].compute_ns = compute_ns;
		for (int s = 0; s < SPS; s++) {
			for (int o = 0; o < OPS_PER_SAMPLE; o++, i++) {
				struct dc_op *op = &t->ops[i];

				op->file = (uint32_t)((k + s) & 1);
				op->op = DC_OP_READ;
				op->flags = (o == 0 ? DC_OPF_OPEN : 0) |
					    (o == OPS_PER_SAMPLE - 1 ? DC_OPF_CLOSE : 0);
				op->offset = (uint64_t)o * 8192;
				op->length = 1000 + (uint64_t)((k * 7 + s * 3 + o) % 5) * 1000;
				t->step_bytes[k] += op->length;
			}
		}
	}
}

static void free_tplan(struct tplan *t)
{
	free(t->ops);
	free(t->steps);
	free(t->step_bytes);
}

static void tcfg(struct dc_run_config *c, struct tplan *t, unsigned readers, unsigned prefetch)
{
	memset(c, 0, sizeof(*c));
	c->engine = "null";
	c->eng.qd = 1;
	c->threads = readers;
	c->paths = paths;
	c->npaths = 2;
	c->ops = t->ops;
	c->nops = t->nops;
	c->max_len = 8192;
	c->steps = t->steps;
	c->nsteps = t->nsteps;
	c->prefetch = prefetch;
	c->compute_mode = DC_COMPUTE_SPIN;
}

struct hookctx {
	uint64_t calls;
	uint64_t fail_at; /* UINT64_MAX: never */
	uint64_t last;
};

static int hook(void *ctx, uint64_t step)
{
	struct hookctx *h = ctx;

	h->calls++;
	h->last = step;
	return step == h->fail_at ? -EIO : 0;
}

static void test_train_shapes(void)
{
	const uint64_t nsteps = 30, compute = 2000000, delay = 100000;

	for (unsigned readers = 0; readers <= 2; readers++) {
		for (unsigned prefetch = 1; prefetch <= 4; prefetch *= 4) {
			struct tplan t;
			struct dc_run_config c;
			struct dc_run_result *r = new_result(readers, nsteps);
			struct hookctx h = { 0, UINT64_MAX, 0 };
			struct dc_progress prog = { 0, 0, 0 };
			double wait_sum = 0;
			int ret;

			make_tplan(&t, nsteps, compute);
			tcfg(&c, &t, readers, prefetch);
			c.eng.delay_ns = delay;
			c.step_hook = hook;
			c.hook_ctx = &h;
			c.progress = &prog;
			ret = dc_run_train(&c, r);
			T_CHECK(ret == 0, "readers %u prefetch %u: ret %d (%s)", readers, prefetch,
				ret, r->error.what);
			T_CHECK(r->steps_done == nsteps, "steps_done %llu",
				(unsigned long long)r->steps_done);
			T_CHECK(h.calls == nsteps && h.last == nsteps - 1, "hook calls %llu",
				(unsigned long long)h.calls);
			T_CHECK(prog.steps == nsteps, "progress steps %llu",
				(unsigned long long)prog.steps);
			T_CHECK(r->ops == t.nops && r->lat.count == t.nops, "ops %llu",
				(unsigned long long)r->ops);
			T_CHECK(r->sample_lat.count == nsteps * SPS, "samples %llu",
				(unsigned long long)r->sample_lat.count);
			for (uint64_t k = 0; k < nsteps; k++) {
				struct dc_step_times *s = &r->step_times[k];

				T_CHECK(s->compute_ns >= compute, "step %llu compute %llu",
					(unsigned long long)k, (unsigned long long)s->compute_ns);
				T_CHECK(s->bytes == t.step_bytes[k], "step %llu bytes %llu != %llu",
					(unsigned long long)k, (unsigned long long)s->bytes,
					(unsigned long long)t.step_bytes[k]);
				T_CHECK(s->t_fetch <= s->t_ready &&
						s->t_ready + s->compute_ns <= s->t_end,
					"step %llu times out of order", (unsigned long long)k);
				if (k)
					T_CHECK(s->t_fetch >= r->step_times[k - 1].t_end,
						"steps overlap");
				/* Reading a step takes >= 8 x 100 us; with no reader it is all wait. */
				if (!readers)
					T_CHECK(s->t_ready - s->t_fetch >=
							SPS * OPS_PER_SAMPLE * delay,
						"step %llu wait %llu below its read time",
						(unsigned long long)k,
						(unsigned long long)(s->t_ready - s->t_fetch));
				if (k)
					wait_sum += (double)(s->t_ready - s->t_fetch);
			}
			printf("train readers %u prefetch %u: mean wait %.0f us (read 800 us, compute 2000 us), "
			       "AU %.3f\n",
			       readers, prefetch, wait_sum / (nsteps - 1) / 1e3,
			       (double)(nsteps * compute) / (double)(r->t_end - r->t_start));
			free_tplan(&t);
			free_result(r);
		}
	}
}

static void test_train_preprocess(void)
{
	struct tplan t;
	struct dc_run_config c;
	struct dc_run_result *r = new_result(0, 5);

	make_tplan(&t, 5, 0);
	tcfg(&c, &t, 0, 1);
	c.preprocess_ns_per_sample = 200000;
	T_CHECK(dc_run_train(&c, r) == 0, "run");
	for (int k = 0; k < 5; k++)
		T_CHECK(r->step_times[k].t_ready - r->step_times[k].t_fetch >= SPS * 200000,
			"preprocess not spun in step %d", k);
	free_tplan(&t);
	free_result(r);
}

static void test_train_hook_error(void)
{
	for (unsigned readers = 0; readers <= 2; readers += 2) {
		struct tplan t;
		struct dc_run_config c;
		struct dc_run_result *r = new_result(readers, 20);
		struct hookctx h = { 0, 5, 0 };
		uint64_t t0 = dc_now_ns();
		int ret;

		make_tplan(&t, 20, 100000);
		tcfg(&c, &t, readers, 2);
		c.step_hook = hook;
		c.hook_ctx = &h;
		ret = dc_run_train(&c, r);
		T_CHECK(ret == -EIO && !strcmp(r->error.what, "step hook"),
			"hook error: ret %d what '%s'", ret, r->error.what);
		T_CHECK(h.calls == 6 && r->steps_done == 5, "calls %llu steps_done %llu",
			(unsigned long long)h.calls, (unsigned long long)r->steps_done);
		T_CHECK(dc_now_ns() - t0 < 1000000000ull, "slow stop after a hook error");
		free_tplan(&t);
		free_result(r);
	}
}

static void test_train_reader_error(void)
{
	for (unsigned readers = 0; readers <= 2; readers++) {
		struct tplan t;
		struct dc_run_config c;
		struct dc_run_result *r = new_result(readers, 50);
		uint64_t t0 = dc_now_ns();
		int ret;

		make_tplan(&t, 50, 1000000);
		tcfg(&c, &t, readers, 2);
		/* 11th request of a reader: step (2 * readers), sample 1, op 0 */
		c.eng.fail_nth = 11;
		c.eng.fail_errno = EIO;
		ret = dc_run_train(&c, r);
		T_CHECK(ret == -EIO && r->error.err == EIO && !strcmp(r->error.what, "read"),
			"readers %u: ret %d err %d what '%s'", readers, ret, r->error.err,
			r->error.what);
		T_CHECK(r->error.file < 2 && r->error.offset == 8192 * 0,
			"error file %u offset %llu", r->error.file,
			(unsigned long long)r->error.offset);
		T_CHECK(r->steps_done < 50, "should stop early");
		T_CHECK(r->ops >= 10, "kept the completed ops: %llu", (unsigned long long)r->ops);
		T_CHECK(dc_now_ns() - t0 < 1000000000ull, "slow stop after a read error");
		free_tplan(&t);
		free_result(r);
	}
}

/* --skip-bad-files: the same failing request leaves its sample out, marks its file, and the run goes
 * on to its last step with no error. */
static void test_train_skip_bad(void)
{
	for (unsigned readers = 0; readers <= 2; readers++) {
		struct tplan t;
		struct dc_run_config c;
		struct dc_run_result *r = new_result(readers, 50);
		unsigned char bad[2] = { 0, 0 };
		int ret;

		make_tplan(&t, 50, 100000);
		tcfg(&c, &t, readers, 2);
		c.eng.fail_nth = 11;
		c.eng.fail_errno = EIO;
		c.bad_files = bad;
		ret = dc_run_train(&c, r);
		T_CHECK(ret == 0 && r->error.err == 0, "readers %u: ret %d err %d", readers, ret,
			r->error.err);
		T_CHECK(r->steps_done == 50, "all steps: %llu", (unsigned long long)r->steps_done);
		/* the null engine fails each reader's 11th request: one sample per reader */
		T_CHECK(r->skipped == (readers ? readers : 1) && r->errors == 0,
			"skipped %llu errors %llu", (unsigned long long)r->skipped,
			(unsigned long long)r->errors);
		T_CHECK(bad[0] + bad[1] >= 1, "files marked: %u %u", bad[0], bad[1]);
		free_tplan(&t);
		free_result(r);
	}
}

static void test_train_stop(void)
{
	for (unsigned readers = 0; readers <= 1; readers++) {
		struct tplan t;
		struct dc_run_config c;
		struct dc_run_result *r = new_result(readers, 10);
		volatile int stop = 0;
		struct stopper s = { &stop, 200000000 };
		pthread_t th;
		uint64_t t0;

		make_tplan(&t, 10, 1000000000); /* 1 s of compute per step */
		tcfg(&c, &t, readers, 1);
		c.stop = &stop;
		c.compute_mode = DC_COMPUTE_HYBRID;
		t0 = dc_now_ns();
		pthread_create(&th, NULL, stop_later, &s);
		T_CHECK(dc_run_train(&c, r) == 0, "stopped run returns 0: %s", r->error.what);
		pthread_join(th, NULL);
		printf("train stop (readers %u): returned %.1f ms after start (stop at 200 ms)\n",
		       readers, (dc_now_ns() - t0) / 1e6);
		T_CHECK(dc_now_ns() - t0 < 1000000000ull, "stop took too long");
		T_CHECK(r->stopped == 1 && r->steps_done == 0, "stopped %d steps %llu", r->stopped,
			(unsigned long long)r->steps_done);
		free_tplan(&t);
		free_result(r);
	}
}

static void test_bad_config(void)
{
	struct plan p;
	struct dc_run_config c;
	struct dc_run_result *r = new_result(1, 0);

	make_plan(&p, 10, 4096, 1);
	base_cfg(&c, &p, 1, 4096);
	c.engine = "nope";
	T_CHECK(dc_run_io(&c, r) == -ENOENT && !strcmp(r->error.what, "engine"), "unknown engine");
	base_cfg(&c, &p, 1, 1000); /* ops longer than max_len */
	T_CHECK(dc_run_io(&c, r) == -EINVAL && !strcmp(r->error.what, "config"), "max_len check");
	base_cfg(&c, &p, 1, 4096);
	c.eng.qd = 0;
	T_CHECK(dc_run_io(&c, r) == -EINVAL, "qd 0");
	free(p.ops);
	free_result(r);
}

int main(void)
{
	char why[256];

	T_CHECK(dc_engine_available("null", why, sizeof(why)) == 0, "null available");
	T_CHECK(dc_engine_available("nope", why, sizeof(why)) == -ENOENT, "unknown engine");
	printf("unknown engine message: %s\n", why);
	test_counts();
	test_mixed_directions();
	test_bytes_limit();
	test_runtime_and_ramp();
	test_fault(EIO);
	test_fault(0);
	test_fault(-1);
	test_overhead();
	test_stop_io();
	test_bad_config();
	test_train_shapes();
	test_train_preprocess();
	test_train_hook_error();
	test_train_reader_error();
	test_train_skip_bad();
	test_train_stop();
	return t_exit();
}
