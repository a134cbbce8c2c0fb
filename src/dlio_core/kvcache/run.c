/* dc_kv_run: the KV-cache request engine (see kvcache.h). The calling thread is the dispatcher:
 * it queues each request at its arrival time, open loop, into one FIFO per priority; `workers`
 * threads take the highest priority first and run the request's steps (cache.c does the
 * tiers). Everything is allocated before the start gate; a request allocates only the RAM tier's
 * copy of an entry, as the reference does.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "../core_int.h"
#include "dlio_core/fill.h"
#include "dlio_core/timer.h"
#include "kv_int.h"

#define KV_POLL_NS (20 * 1000 * 1000ull) /* the dispatcher looks at the stop flag this often */
#define KV_STACK   (256u << 10)          /* worker stacks: they recurse only 10 deep */
#define KV_NPRIO   4                     /* queues 1..3 */

/* ---- one request ---- */

static void sleep_until(uint64_t t);

static uint32_t own_entry(const struct kv_run *r, uint32_t req)
{
	return r->cfg->steps[r->cfg->reqs[req].first_step].entry;
}

/* The reference's request (benchmark.py process_requests): probe, earlier turns, prefill, decode. */
static void run_synth(struct kv_worker *w, const struct dc_kv_req *q, uint32_t own, uint64_t *lat)
{
	struct kv_run *r = w->r;
	const struct dc_kv_config *cfg = r->cfg;
	int ctype = q->flags & DC_KV_PROBE ? KV_CT_SYSTEM : KV_CT_USER;

	if (q->flags & DC_KV_PROBE) { /* its key is never written: a miss, no I/O */
		pthread_mutex_lock(&r->stats_lock);
		r->res->count[DC_KV_C_MISSES]++;
		r->res->count[DC_KV_C_PROBES]++;
		pthread_mutex_unlock(&r->stats_lock);
	}
	if (q->turn > 0 && q->conv < cfg->nconv) {
		uint32_t first = cfg->conv_first[q->conv], n = cfg->conv_first[q->conv + 1] - first;
		uint32_t enq = __atomic_load_n(&r->conv_enq[q->conv], __ATOMIC_ACQUIRE);

		/* Virtual time serves each request as it arrives: its own arrival has just touched
		 * its conversation (the window's newest), and only its earlier turns were sent. */
		int gone = !(cfg->flags & DC_KV_VIRTUAL) && !kv_conv_remembered(r, q->conv);

		if (cfg->flags & DC_KV_VIRTUAL)
			enq = q->turn + 1;
		if (gone) { /* the reference's get_all_previous_turn_keys returns no key */
			pthread_mutex_lock(&r->stats_lock);
			r->res->count[DC_KV_C_MT_CONV_GONE]++;
			pthread_mutex_unlock(&r->stats_lock);
			enq = 0;
		}
		/* Every turn enqueued so far but this one: later turns not yet written miss. */
		for (uint32_t j = 0; j < enq && j < n && !kv_halted(r); j++) {
			int hit;

			if (j == q->turn)
				continue;
			hit = kv_access(w, own_entry(r, cfg->conv_reqs[first + j]),
					KV_CT_MULTI_TURN, lat);
			pthread_mutex_lock(&r->stats_lock);
			r->res->count[hit > 0 ? DC_KV_C_MT_HITS : DC_KV_C_MT_MISSES]++;
			pthread_mutex_unlock(&r->stats_lock);
		}
	}
	if (kv_halted(r) || kv_allocate(w, own, DC_KV_NONE, 1, lat) < 0)
		return;
	if (q->flags & DC_KV_PREFILL_ONLY)
		return;
	if (kv_access(w, own, ctype, lat) == 0) { /* evicted already: written again, no decode */
		kv_allocate(w, own, DC_KV_NONE, 1, lat);
		return;
	}
	{
		uint32_t b = cfg->decode_batch ? cfg->decode_batch : 32;
		uint32_t reads = (q->gen + b - 1) / b;

		for (uint32_t k = 0; k < (reads ? reads : 1) && !kv_halted(r); k++)
			kv_access(w, own, ctype, lat);
	}
}

static void run_step(struct kv_worker *w, const struct dc_kv_req *q, const struct dc_kv_step *s,
		     uint64_t *lat)
{
	struct kv_run *r = w->r;

	switch (s->kind) {
	case DC_KV_SYNTH:
		run_synth(w, q, s->entry, lat);
		break;
	case DC_KV_READ:
		if (r->cfg->entries[s->entry].flags & DC_KV_WRITTEN_LATER &&
		    !kv_is_cached(r, s->entry)) {
			pthread_mutex_lock(&r->stats_lock);
			r->res->count[DC_KV_C_WAITS]++;
			pthread_mutex_unlock(&r->stats_lock);
		}
		if (r->cfg->entries[s->entry].flags & DC_KV_WRITTEN_LATER)
			kv_wait_written(r, s->entry);
		kv_access(w, s->entry, KV_CT_USER, lat);
		break;
	case DC_KV_WRITE:
		kv_allocate(w, s->entry, s->tier, 1, lat);
		break;
	case DC_KV_READ_OR_WRITE:
		if (!kv_is_cached(r, s->entry) || kv_access(w, s->entry, KV_CT_USER, lat) == 0)
			kv_allocate(w, s->entry, DC_KV_NONE, 1, lat);
		break;
	case DC_KV_DEMOTE:
		kv_demote_forced(w, s->entry);
		break;
	}
}

static void run_request(struct kv_worker *w, uint32_t i, uint64_t t_enq)
{
	struct kv_run *r = w->r;
	const struct dc_kv_config *cfg = r->cfg;
	const struct dc_kv_req *q = &cfg->reqs[i];
	uint64_t lat = 0, gen_ns = (uint64_t)q->gen * cfg->gen_ns_per_token, done;
	int h = q->prio >= 3   ? DC_KV_H_E2E_INTERACTIVE
		: q->prio == 2 ? DC_KV_H_E2E_RESPONSIVE
			       : DC_KV_H_E2E_BATCH;

	w->arrival_ns = q->arrival_ns;
	for (uint32_t k = 0; k < q->nsteps && !kv_halted(r); k++)
		run_step(w, q, &cfg->steps[q->first_step + k], &lat);
	/* the emulated token generation (generation_mode fast / realistic), in slices that look
	 * at the halt: 800 tokens at 30 ms are 24 s */
	for (uint64_t t_end = dc_now_ns() + gen_ns; gen_ns && !kv_halted(r);) {
		uint64_t now = dc_now_ns();

		if (now >= t_end)
			break;
		sleep_until(t_end);
	}
	if (kv_halted(r)) { /* stopped between its steps: not a completed request */
		if (!run_failed(&r->b)) {
			pthread_mutex_lock(&r->stats_lock);
			r->res->count[DC_KV_C_REQUESTS_CUT]++;
			pthread_mutex_unlock(&r->stats_lock);
		}
		return;
	}
	done = dc_now_ns();
	pthread_mutex_lock(&r->stats_lock);
	r->res->count[DC_KV_C_REQUESTS]++;
	r->res->count[DC_KV_C_TOKENS] += q->gen;
	r->res->count[DC_KV_C_STORAGE_NS] += lat;
	dc_hist_add_inline(&r->res->hist[DC_KV_H_REQ_STORAGE], lat);
	dc_hist_add_inline(&r->res->hist[h], done - t_enq);
	dc_hist_add_inline(&r->res->hist[DC_KV_H_GENERATION], gen_ns);
	pthread_mutex_unlock(&r->stats_lock);
	if (cfg->progress)
		__atomic_fetch_add(&cfg->progress->requests_done, 1, __ATOMIC_RELAXED);
}

/* ---- the queues ---- */

static void q_push(struct kv_run *r, uint32_t i)
{
	unsigned p = r->cfg->flags & DC_KV_VIRTUAL ? 1 : r->cfg->reqs[i].prio;

	p = p < 1 ? 1 : p > 3 ? 3 : p;
	r->qnext[i] = KV_NIL;
	if (r->qtail[p] == KV_NIL)
		r->qhead[p] = i;
	else
		r->qnext[r->qtail[p]] = i;
	r->qtail[p] = i;
	r->qlen++;
}

static uint32_t q_pop(struct kv_run *r)
{
	for (unsigned p = 3; p >= 1; p--) {
		uint32_t i = r->qhead[p];

		if (i == KV_NIL)
			continue;
		r->qhead[p] = r->qnext[i];
		if (r->qhead[p] == KV_NIL)
			r->qtail[p] = KV_NIL;
		r->qlen--;
		return i;
	}
	return KV_NIL;
}

struct kv_worker_arg {
	struct kv_worker *w;
	uint64_t *t_enq; /* when each request was queued: written before the push, read after the
			  * pop, both under the run's lock */
};

/* Take requests, highest priority first, until the run stops or every request is done. */
static void serve(struct kv_worker *w, const uint64_t *t_enq)
{
	struct kv_run *r = w->r;

	for (;;) {
		uint32_t i;
		uint64_t t;

		pthread_mutex_lock(&r->b.lock);
		while (!run_stopped(&r->b) && !r->qlen && !r->dispatched)
			pthread_cond_wait(&r->b.cond, &r->b.lock);
		if (run_stopped(&r->b) || !r->qlen) {
			pthread_mutex_unlock(&r->b.lock);
			break;
		}
		i = q_pop(r);
		t = t_enq[i];
		r->active++;
		w->busy = 1;
		pthread_mutex_unlock(&r->b.lock);
		if (*r->cfg->stop) { /* dequeued after the stop: not started, as in the reference */
			pthread_mutex_lock(&r->stats_lock);
			r->res->count[DC_KV_C_REQUESTS_DROPPED]++;
			pthread_mutex_unlock(&r->stats_lock);
		} else {
			run_request(w, i, t);
		}
		pthread_mutex_lock(&r->b.lock);
		w->busy = 0;
		r->active--;
		if (!r->active && !r->qlen)
			pthread_cond_broadcast(&r->b.cond);
		pthread_mutex_unlock(&r->b.lock);
	}
}

/* A worker opens its store state and its scratch before the start gate. */
static void *worker_main(void *arg)
{
	struct kv_worker_arg *a = arg;
	struct kv_worker *w = a->w;
	struct kv_run *r = w->r;
	int ret = r->cfg->store->worker_open(r->store, w->id, &w->sw);

	if (ret < 0)
		run_fail(&r->b, -ret, UINT32_MAX, 0, "store worker");
	else if (kv_worker_scratch(w) < 0)
		run_fail(&r->b, ENOMEM, UINT32_MAX, 0, "memory");
	if (run_gate_wait(&r->b) == 0)
		serve(w, a->t_enq);
	if (w->sw)
		r->cfg->store->worker_close(w->sw);
	free(w->scratch);
	return NULL;
}

/* Sleep until the absolute time t (CLOCK_MONOTONIC ns), at most KV_POLL_NS. */
static void sleep_until(uint64_t t)
{
	uint64_t now = dc_now_ns();
	struct timespec ts;

	if (t > now + KV_POLL_NS)
		t = now + KV_POLL_NS;
	ts.tv_sec = (time_t)(t / 1000000000ull);
	ts.tv_nsec = (long)(t % 1000000000ull);
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

static int worker_busy(struct kv_run *r, const struct kv_worker *w)
{
	int busy;

	pthread_mutex_lock(&r->b.lock);
	busy = w->busy;
	pthread_mutex_unlock(&r->b.lock);
	return busy;
}

/* After the stop: the requests in flight may finish as in the reference, which joins its worker
 * threads one after the other, each for up to 2 s (benchmark.py run: thread.join(timeout=2.0)), and
 * takes its figures when the last join returns: here each worker in turn is waited for until it is
 * idle or drain_ns have passed since its wait began, while every worker goes on. A saturated run
 * has every worker busy at the stop, so its drain lasts up to workers x drain_ns, and most requests
 * in flight finish their reads (one drain_ns for the whole run cut them after their write). Not at
 * all after the caller's stop or an error. Then requests still in flight stop between their steps
 * and transfers (halt), and every wait a worker may be in is woken to see it. */
static void drain(struct kv_run *r, const struct kv_worker *ws, unsigned nws)
{
	int busy;

	for (unsigned i = 0; i < nws; i++) {
		uint64_t end = dc_now_ns() + r->cfg->drain_ns;

		while (worker_busy(r, &ws[i]) && !*r->cfg->stop && !run_failed(&r->b) &&
		       dc_now_ns() < end)
			sleep_until(end);
		if (*r->cfg->stop || run_failed(&r->b))
			break;
	}
	pthread_mutex_lock(&r->b.lock);
	busy = r->active != 0;
	pthread_mutex_unlock(&r->b.lock);
	if (!busy && !*r->cfg->stop && !run_failed(&r->b))
		return; /* every request in flight finished */
	__atomic_store_n(&r->halt, 1, __ATOMIC_RELAXED);
	r->res->halt_ns = dc_now_ns();
	pthread_mutex_lock(&r->slot_lock);
	pthread_cond_broadcast(&r->slot_cond);
	pthread_mutex_unlock(&r->slot_lock);
	pthread_mutex_lock(&r->tier_lock);
	pthread_cond_broadcast(&r->written);
	pthread_mutex_unlock(&r->tier_lock);
}

static void set_stopping(struct kv_run *r)
{
	pthread_mutex_lock(&r->b.lock);
	if (!run_stopped(&r->b)) {
		__atomic_store_n(&r->b.stop, 1, __ATOMIC_RELAXED);
		r->res->stop_ns = dc_now_ns();
	}
	pthread_cond_broadcast(&r->b.cond);
	pthread_mutex_unlock(&r->b.lock);
}

/* The open-loop arrivals, then the wait for the deadline (or for the last request, DRAIN). */
static void dispatch(struct kv_run *r, uint64_t *t_enq)
{
	const struct dc_kv_config *cfg = r->cfg;
	uint64_t t0 = r->b.t0;
	uint64_t deadline = cfg->duration_ns ? t0 + cfg->duration_ns : UINT64_MAX;
	int asap = !!(cfg->flags & (DC_KV_ASAP | DC_KV_VIRTUAL));

	for (uint64_t i = 0; i < cfg->nreqs; i++) {
		uint64_t due = asap ? t0 : t0 + cfg->reqs[i].arrival_ns, now;
		int synth = cfg->steps[cfg->reqs[i].first_step].kind == DC_KV_SYNTH;

		while ((now = dc_now_ns()) < due && now < deadline && !*cfg->stop &&
		       !run_stopped(&r->b))
			sleep_until(due < deadline ? due : deadline);
		if ((now >= deadline && !(cfg->flags & DC_KV_VIRTUAL)) || *cfg->stop ||
		    run_stopped(&r->b))
			break;
		if (synth && kv_conv_arrive(r, &cfg->reqs[i]) < 0)
			continue; /* its user has stopped */
		pthread_mutex_lock(&r->b.lock);
		t_enq[i] = dc_now_ns();
		/* the reference adds the turn as it enqueues */
		if (synth && cfg->reqs[i].conv < cfg->nconv)
			__atomic_fetch_add(&r->conv_enq[cfg->reqs[i].conv], 1, __ATOMIC_RELEASE);
		q_push(r, (uint32_t)i);
		r->res->enqueued++;
		pthread_cond_signal(&r->b.cond);
		pthread_mutex_unlock(&r->b.lock);
		if (cfg->progress)
			__atomic_store_n(&cfg->progress->queued, r->res->enqueued,
					 __ATOMIC_RELAXED);
	}
	pthread_mutex_lock(&r->b.lock);
	r->dispatched = 1;
	pthread_cond_broadcast(&r->b.cond);
	pthread_mutex_unlock(&r->b.lock);
	for (;;) {
		uint64_t now = dc_now_ns();
		int idle;

		pthread_mutex_lock(&r->b.lock);
		idle = !r->qlen && !r->active;
		pthread_mutex_unlock(&r->b.lock);
		if ((now >= deadline && !(cfg->flags & DC_KV_VIRTUAL)) || *cfg->stop ||
		    run_stopped(&r->b) ||
		    ((cfg->flags & (DC_KV_DRAIN | DC_KV_VIRTUAL) || deadline == UINT64_MAX) &&
		     idle))
			break;
		sleep_until(deadline);
	}
	set_stopping(r);
}

/* ---- setup and teardown ---- */

static int check_config(const struct dc_kv_config *cfg)
{
	if (!cfg->reqs && cfg->nreqs)
		return -EINVAL;
	if (!cfg->workers || !cfg->alloc_slots || !cfg->store || !cfg->stop || !cfg->store_cfg)
		return -EINVAL;
	if (cfg->nentries >= KV_NIL || cfg->nreqs >= KV_NIL)
		return -E2BIG;
	for (uint64_t i = 0; i < cfg->nreqs; i++) {
		const struct dc_kv_req *q = &cfg->reqs[i];

		if (!q->nsteps || (uint64_t)q->first_step + q->nsteps > cfg->nsteps)
			return -EINVAL;
		if (i && q->arrival_ns < cfg->reqs[i - 1].arrival_ns)
			return -EINVAL; /* the dispatcher walks them in arrival order */
	}
	for (uint64_t i = 0; i < cfg->nsteps; i++)
		if (cfg->steps[i].entry >= cfg->nentries || cfg->steps[i].kind > DC_KV_DEMOTE ||
		    cfg->steps[i].tier > DC_KV_STORAGE)
			return -EINVAL;
	for (uint32_t c = 0; c < cfg->nconv; c++)
		if (cfg->conv_first[c + 1] < cfg->conv_first[c] ||
		    cfg->conv_first[c + 1] > cfg->nreqs)
			return -EINVAL;
	for (uint64_t i = 0; cfg->nconv && i < cfg->conv_first[cfg->nconv]; i++)
		if (cfg->conv_reqs[i] >= cfg->nreqs)
			return -EINVAL;
	if (cfg->max_conversations && cfg->conv_user && !cfg->nusers)
		return -EINVAL;
	if (cfg->store != &dc_kv_store_null && cfg->stage_bytes < 4096)
		return -EINVAL;
	return 0;
}

static int setup(struct kv_run *r)
{
	const struct dc_kv_config *cfg = r->cfg;
	int ret = kv_cache_init(r);

	if (ret < 0)
		return ret;
	pthread_mutex_init(&r->stats_lock, NULL);
	pthread_mutex_init(&r->slot_lock, NULL);
	pthread_cond_init(&r->slot_cond, NULL);
	for (int p = 0; p < KV_NPRIO; p++)
		r->qhead[p] = r->qtail[p] = KV_NIL;
	r->qnext = malloc((cfg->nreqs ? cfg->nreqs : 1) * sizeof(*r->qnext));
	r->conv_enq = calloc(cfg->nconv ? cfg->nconv : 1, sizeof(*r->conv_enq));
	r->free_slots = malloc(cfg->alloc_slots * sizeof(*r->free_slots));
	if (!r->qnext || !r->conv_enq || !r->free_slots || kv_conv_init(r) < 0)
		return -ENOMEM;
	for (unsigned s = 0; s < cfg->alloc_slots; s++)
		r->free_slots[r->nfree++] = cfg->alloc_slots - 1 - s;
	r->stage_len = cfg->stage_bytes;
	if (r->stage_len) {
		size_t len;

		r->stage_by_worker = cfg->workers < cfg->alloc_slots;
		r->stage_regions = r->stage_by_worker ? cfg->workers : cfg->alloc_slots;
		len = (size_t)r->stage_regions * r->stage_len;
		/* Huge pages where THP is in madvise mode, as bufpool.c's: an O_DIRECT transfer from
		 * 4 KiB pages is split into more device requests (max_segments), and a copy into the
		 * page cache takes more TLB misses. The random bytes come as writes reach them
		 * (stage_for). */
		if (posix_memalign((void **)&r->stage, KV_HUGE_PAGE, len))
			return -ENOMEM;
#ifdef MADV_HUGEPAGE
		(void)madvise(r->stage, len, MADV_HUGEPAGE); /* a hint: failure is fine */
#endif
		r->stage_filled = calloc(r->stage_regions, sizeof(*r->stage_filled));
		if (!r->stage_filled)
			return -ENOMEM;
	}
	for (int i = 0; i < DC_KV_NHIST; i++)
		dc_hist_init(&r->res->hist[i]);
	return 0;
}

static void teardown(struct kv_run *r)
{
	kv_cache_free(r);
	free(r->qnext);
	free(r->conv_enq);
	kv_conv_free(r);
	free(r->free_slots);
	free(r->stage);
	free(r->stage_filled);
	pthread_mutex_destroy(&r->stats_lock);
	pthread_mutex_destroy(&r->slot_lock);
	pthread_cond_destroy(&r->slot_cond);
}

int dc_kv_run(const struct dc_kv_config *cfg, struct dc_kv_result *res)
{
	struct kv_run r;
	struct kv_worker *ws = NULL;
	struct kv_worker_arg *args = NULL;
	uint64_t *t_enq = NULL;
	pthread_attr_t attr;
	int ret;

	memset(res, 0, sizeof(*res));
	ret = check_config(cfg);
	if (ret < 0)
		return ret;
	memset(&r, 0, sizeof(r));
	r.cfg = cfg;
	r.res = res;
	run_base_init(&r.b, &res->error, NULL, cfg->stop);
	ret = setup(&r);
	if (ret == 0)
		ret = cfg->store->open(&r.store, cfg->store_cfg, res->why, sizeof(res->why));
	t_enq = calloc(cfg->nreqs ? cfg->nreqs : 1, sizeof(*t_enq));
	ws = calloc(cfg->workers, sizeof(*ws));
	args = calloc(cfg->workers, sizeof(*args));
	if (ret == 0 && (!t_enq || !ws || !args))
		ret = -ENOMEM;
	if (ret < 0) {
		if (r.store)
			cfg->store->close(r.store, &res->store);
		goto out;
	}
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, KV_STACK);
	for (unsigned i = 0; i < cfg->workers; i++) {
		ws[i].r = &r;
		ws[i].id = i;
		args[i].w = &ws[i];
		args[i].t_enq = t_enq;
		if (run_start(&r.b, &ws[i].th, &attr, worker_main, &args[i]))
			break;
		ws[i].started = 1;
	}
	pthread_attr_destroy(&attr);
	if (run_gate_open(&r.b, 0, 0) == 0)
		dispatch(&r, t_enq);
	else
		r.b.t0 = dc_now_ns(); /* it never started: its times still in order */
	res->start_ns = r.b.t0;
	set_stopping(&r);
	drain(&r, ws, cfg->workers);
	for (unsigned i = 0; i < cfg->workers; i++)
		if (ws[i].started)
			pthread_join(ws[i].th, NULL);
	res->end_ns = dc_now_ns();
	kv_conv_counts(&r, res->count);
	cfg->store->close(r.store, &res->store);
	res->cpu_entries = r.tier[DC_KV_CPU].count;
	res->storage_entries = r.tier[DC_KV_STORAGE].count;
	res->cpu_used = r.tier[DC_KV_CPU].used;
	res->storage_used = r.tier[DC_KV_STORAGE].used;
	ret = res->error.err ? -res->error.err : 0;
out:
	free(args);
	free(ws);
	free(t_enq);
	teardown(&r);
	run_base_destroy(&r.b);
	return ret;
}

int dc_kv_store_check(const struct dc_kv_store_ops *ops, const struct dc_kv_store_cfg *cfg,
		      char *why, size_t whylen)
{
	struct dc_kv_store *s = NULL;
	struct dc_kv_store_stats st;
	int ret = ops->open(&s, cfg, why, whylen);

	if (ret == 0)
		ops->close(s, &st);
	return ret;
}
