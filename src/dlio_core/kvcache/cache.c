/* The KV cache's tiers (see kvcache.h): reads, writes, the waterfall LRU, demotion and eviction,
 * as the reference's MultiTierCache (kv_cache/cache.py) does them, in the requesting thread.
 *
 * Locks, in the order they nest: an entry's lock (held across its read, demotion or delete, so a
 * delete waits for a read), then tier_lock (the LRU lists and the usage counters), then
 * stats_lock. No lock is held across a wait for an allocation slot.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core_int.h"
#include "dlio_core/fill.h"
#include "dlio_core/timer.h"
#include "kv_int.h"

#define KV_SCRATCH     (256u << 10) /* RAM-tier reads copy the entry out through this, per worker */
#define KV_MAX_DEPTH   10           /* the reference's eviction.max_recursion_depth */
#define KV_NEAR_EMPTY  0.05         /* a tier under this share of its capacity takes any entry */
#define KV_FEW_ENTRIES 0.2          /* ... and one holding under this share bails out early */

/* ---- objects of an entry (the chunked layout stores each chunk as its own object) ---- */

static uint32_t nobjs(const struct kv_run *r, uint64_t bytes)
{
	uint64_t c = r->cfg->chunk_bytes;

	return c && bytes > c ? (uint32_t)((bytes + c - 1) / c) : 1;
}

static void obj_at(const struct kv_run *r, uint32_t ent, uint32_t k, struct dc_kv_obj *o,
		   uint64_t *off)
{
	const struct dc_kv_entry_spec *s = &r->cfg->entries[ent];
	uint64_t c = r->cfg->chunk_bytes, bpt = r->cfg->bytes_per_token;

	o->entry = ent;
	o->chunk = k;
	*off = c ? (uint64_t)k * c : 0;
	o->bytes = c && s->bytes - *off > c ? c : s->bytes - *off;
	o->tokens = c == 0 ? s->tokens : (uint32_t)(bpt ? o->bytes / bpt : 0);
}

/* ---- LRU lists (tier_lock held) ---- */

static void lru_unlink(struct kv_run *r, struct kv_tier *t, uint32_t i)
{
	struct kv_entry *e = &r->e[i];

	if (e->prev != KV_NIL)
		r->e[e->prev].next = e->next;
	else
		t->head = e->next;
	if (e->next != KV_NIL)
		r->e[e->next].prev = e->prev;
	else
		t->tail = e->prev;
	e->prev = e->next = KV_NIL;
	e->listed = 0;
}

/* Into the list by last access time, searched from the newest end: a new or touched entry is the
 * newest; a demoted one keeps its access time, as in the reference, and lands among its peers. */
static void lru_insert(struct kv_run *r, struct kv_tier *t, uint32_t i)
{
	struct kv_entry *e = &r->e[i];
	uint32_t after = t->tail;

	while (after != KV_NIL && r->e[after].last > e->last)
		after = r->e[after].prev;
	e->prev = after;
	e->next = after == KV_NIL ? t->head : r->e[after].next;
	if (e->next != KV_NIL)
		r->e[e->next].prev = i;
	else
		t->tail = i;
	if (after != KV_NIL)
		r->e[after].next = i;
	else
		t->head = i;
	e->listed = 1;
}

/* ---- statistics ---- */

static void count_add(struct kv_run *r, int id, uint64_t v)
{
	r->res->count[id] += v; /* stats_lock held */
}

static void progress_add(struct kv_run *r, int write, uint64_t bytes)
{
	struct dc_kv_progress *p = r->cfg->progress;

	if (p)
		__atomic_fetch_add(write ? &p->storage_write_bytes : &p->storage_read_bytes, bytes,
				   __ATOMIC_RELAXED);
}

/* The operation log (cfg->log): one record per tier read or write, when the caller asked for it. */
static void kv_log(struct kv_worker *w, uint32_t entry, uint64_t bytes, int op, int tier, int phase)
{
	struct kv_run *r = w->r;
	struct dc_kv_log *l = r->cfg->log;
	uint64_t i;

	if (!l)
		return;
	i = __atomic_fetch_add(&l->n, 1, __ATOMIC_RELAXED);
	if (i < l->cap) {
		struct dc_kv_logrec *x = &l->rec[i];

		x->t_ns = r->cfg->flags & DC_KV_VIRTUAL ? w->arrival_ns : dc_now_ns() - r->b.t0;
		x->bytes = bytes;
		x->entry = entry;
		x->op = (uint8_t)op;
		x->tier = (uint8_t)tier;
		x->phase = (uint8_t)phase;
	}
}

/* ---- the two tiers' I/O ---- */

/* An entry's objects to storage (put 1: from a staging buffer, src_ram NULL, or from its RAM copy)
 * or back (put 0), one store call each, timed. One loop for both directions, made twice (always
 * inline with put constant), so that neither pays a test per object. */
static inline __attribute__((always_inline)) int storage_xfer(struct kv_worker *w, uint32_t ent,
							      unsigned char *stage,
							      unsigned char *src_ram,
							      uint64_t *total,
							      struct dc_kv_timing *t, const int put)
{
	struct kv_run *r = w->r;
	uint64_t bytes = r->cfg->entries[ent].bytes;
	uint32_t n = nobjs(r, bytes);

	for (uint32_t k = 0; k < n; k++) {
		struct dc_kv_obj o;
		struct dc_kv_timing ct = { 0, 0 };
		uint64_t off, t0;
		int ret;

		if (kv_halted(r)) /* between transfers: the run is stopping */
			return -ECANCELED;
		obj_at(r, ent, k, &o, &off);
		if (put) {
			struct dc_kv_src src;

			if (src_ram) {
				src.buf = src_ram + off;
				src.len = o.bytes;
				src.whole = 1;
			} else {
				src.buf = stage;
				src.len = r->stage_len;
				src.whole = 0;
			}
			t0 = dc_now_ns();
			ret = r->cfg->store->put(w->sw, &o, &src, &ct);
		} else {
			t0 = dc_now_ns();
			ret = r->cfg->store->get(w->sw, &o, &ct);
		}
		*total += dc_now_ns() - t0;
		t->device_ns += ct.device_ns;
		t->host_ns += ct.host_ns;
		if (ret < 0) {
			run_fail(&r->b, -ret, ent, 0, put ? "write" : "read");
			return ret;
		}
	}
	return 0;
}

static int storage_get(struct kv_worker *w, uint32_t ent, uint64_t *total, struct dc_kv_timing *t)
{
	return storage_xfer(w, ent, NULL, NULL, total, t, 0);
}

/* Write the entry to storage from a staging buffer (src_ram NULL) or from its RAM copy. */
static int storage_put(struct kv_worker *w, uint32_t ent, unsigned char *stage,
		       unsigned char *src_ram, uint64_t *total, struct dc_kv_timing *t)
{
	return storage_xfer(w, ent, stage, src_ram, total, t, 1);
}

static void storage_del(struct kv_worker *w, uint32_t ent)
{
	struct kv_run *r = w->r;
	uint32_t n = nobjs(r, r->cfg->entries[ent].bytes);

	for (uint32_t k = 0; k < n; k++) {
		struct dc_kv_obj o;
		uint64_t off;
		int ret;

		obj_at(r, ent, k, &o, &off);
		ret = r->cfg->store->del(w->sw, &o);
		if (ret < 0 && ret != -ENOENT) {
			run_fail(&r->b, -ret, ent, 0, "delete");
			return;
		}
	}
}

/* The RAM tier holds a real copy of each entry (the reference's np.copy into a dict). */
static int ram_put(struct kv_run *r, struct kv_entry *e, uint32_t ent, const unsigned char *stage)
{
	uint64_t bytes = r->cfg->entries[ent].bytes;
	unsigned char *p;

	if (r->ram_noop)
		return 0;
	/* Whole blocks: direct mode writes a demoted entry straight from here. */
	if (posix_memalign((void **)&p, 4096, (bytes + 4095) / 4096 * 4096 + (bytes ? 0 : 4096)))
		return -ENOMEM;
	for (uint64_t off = 0; off < bytes; off += r->stage_len) {
		uint64_t n = bytes - off < r->stage_len ? bytes - off : r->stage_len;

		memcpy(p + off, stage, n);
	}
	e->ram = p;
	return 0;
}

static void ram_get(struct kv_worker *w, const struct kv_entry *e, uint64_t bytes)
{
	if (w->r->ram_noop || !e->ram || !w->scratch)
		return;
	for (uint64_t off = 0; off < bytes; off += KV_SCRATCH) {
		uint64_t n = bytes - off < KV_SCRATCH ? bytes - off : KV_SCRATCH;

		memcpy(w->scratch, (const unsigned char *)e->ram + off, n);
	}
}

int kv_worker_scratch(struct kv_worker *w)
{
	if (!w->r->cfg->cpu_bytes || w->r->ram_noop)
		return 0;
	w->scratch = malloc(KV_SCRATCH);
	if (!w->scratch)
		return -ENOMEM;
	memset(w->scratch, 0, KV_SCRATCH); /* no page fault in the measured loop */
	return 0;
}

/* ---- allocation slots (the reference's max_concurrent_allocs semaphore) ---- */

#define KV_NO_SLOT UINT32_MAX

/* A slot, or KV_NO_SLOT when the run halts while this waits for one (drain() wakes it). */
static unsigned slot_get(struct kv_run *r)
{
	unsigned s = KV_NO_SLOT;

	pthread_mutex_lock(&r->slot_lock);
	while (!r->nfree && !kv_halted(r))
		pthread_cond_wait(&r->slot_cond, &r->slot_lock);
	if (r->nfree && !kv_halted(r))
		s = r->free_slots[--r->nfree];
	pthread_mutex_unlock(&r->slot_lock);
	return s;
}

/* Reserve bytes in a tier for a write (tier_lock held): counted as used, and as in flight until
 * the write lands (landed) or fails (unreserve). */
static void reserve(struct kv_tier *t, uint64_t bytes)
{
	t->used += bytes;
	t->inflight += bytes;
}

static void landed(struct kv_tier *t, uint64_t bytes)
{
	t->inflight = t->inflight > bytes ? t->inflight - bytes : 0;
}

static void unreserve(struct kv_tier *t, uint64_t bytes)
{
	t->used = t->used > bytes ? t->used - bytes : 0;
	landed(t, bytes);
}

/* Wait (tier_lock held) until an entry lands or is deleted, the run halts, or 20 ms pass. */
static void wait_landing(struct kv_run *r)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_nsec += 20 * 1000 * 1000;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(&r->written, &r->tier_lock, &ts);
}

static void slot_put(struct kv_run *r, unsigned s)
{
	pthread_mutex_lock(&r->slot_lock);
	r->free_slots[r->nfree++] = s;
	pthread_cond_signal(&r->slot_cond);
	pthread_mutex_unlock(&r->slot_lock);
}

/* ---- eviction ---- */

static int ensure_space(struct kv_worker *w, int tier, uint64_t need, int depth);

/* The bottom tier's eviction: delete the entry's objects. The victim is off its list already. */
static void evict_delete(struct kv_worker *w, uint32_t v)
{
	struct kv_run *r = w->r;
	struct kv_entry *e = &r->e[v];
	uint64_t bytes = r->cfg->entries[v].bytes;
	struct kv_tier *t = &r->tier[DC_KV_STORAGE];

	pthread_mutex_lock(&e->lock); /* waits for a read of it */
	storage_del(w, v);
	pthread_mutex_lock(&r->tier_lock);
	e->loc = DC_KV_NONE;
	t->held -= bytes;
	t->used = t->used > bytes ? t->used - bytes : 0;
	t->count--;
	pthread_cond_broadcast(&r->written); /* room: a write waiting for it (ensure_space) */
	pthread_mutex_unlock(&r->tier_lock);
	pthread_mutex_unlock(&e->lock);
	pthread_mutex_lock(&r->stats_lock);
	count_add(r, DC_KV_C_EVICTIONS, 1);
	count_add(r, DC_KV_C_DELETES, 1);
	count_add(r, DC_KV_C_DELETE_BYTES, bytes);
	pthread_mutex_unlock(&r->stats_lock);
}

/* Move an entry from the RAM tier to storage (its room there is reserved): the write goes from
 * its RAM copy, in this thread. The reference neither counts these bytes as written nor times
 * them; they are counted and timed here on their own. */
static int demote(struct kv_worker *w, uint32_t v)
{
	struct kv_run *r = w->r;
	struct kv_entry *e = &r->e[v];
	const struct dc_kv_entry_spec *s = &r->cfg->entries[v];
	struct dc_kv_timing t = { 0, 0 };
	uint64_t total = 0;
	int ret = 0;

	pthread_mutex_lock(&e->lock);
	if (e->loc == DC_KV_CPU) {
		if (!r->ram_noop)
			ret = storage_put(w, v, NULL, e->ram, &total, &t);
		else
			ret = storage_put(w, v, r->stage, NULL, &total, &t);
	}
	if (ret < 0 || e->loc != DC_KV_CPU) { /* not moved: its room in storage is given back */
		pthread_mutex_lock(&r->tier_lock);
		unreserve(&r->tier[DC_KV_STORAGE], s->bytes);
		pthread_mutex_unlock(&r->tier_lock);
	}
	if (ret == 0 && e->loc == DC_KV_CPU) {
		struct kv_tier *c = &r->tier[DC_KV_CPU], *st = &r->tier[DC_KV_STORAGE];

		free(e->ram);
		e->ram = NULL;
		pthread_mutex_lock(&r->tier_lock);
		c->used = c->used > s->bytes ? c->used - s->bytes : 0;
		c->held -= s->bytes;
		c->count--;
		e->loc = DC_KV_STORAGE;
		landed(st, s->bytes);
		st->held += s->bytes;
		st->count++;
		lru_insert(r, st, v);
		pthread_mutex_unlock(&r->tier_lock);
		pthread_mutex_lock(&r->stats_lock);
		count_add(r, DC_KV_C_EVICTIONS, 1);
		count_add(r, DC_KV_C_OFFLOADS_STORAGE, 1);
		count_add(r, DC_KV_C_DEMOTIONS, 1);
		count_add(r, DC_KV_C_DEMOTE_BYTES, s->bytes);
		if (r->cfg->bytes_per_token)
			count_add(r, DC_KV_C_STORAGE_TOKENS_X1000,
				  s->bytes / r->cfg->bytes_per_token * 1000);
		dc_hist_add_inline(&r->res->hist[DC_KV_H_DEMOTE_WRITE], total);
		dc_hist_add_inline(&r->res->hist[DC_KV_H_DEMOTE_WRITE_DEV], t.device_ns);
		pthread_mutex_unlock(&r->stats_lock);
		progress_add(r, 1, s->bytes);
		kv_log(w, v, s->bytes, DC_KV_LOG_READ, DC_KV_CPU, DC_KV_PH_EVICT);
		kv_log(w, v, s->bytes, DC_KV_LOG_WRITE, DC_KV_STORAGE, DC_KV_PH_EVICT);
	}
	pthread_mutex_unlock(&e->lock);
	return ret;
}

/* Make room for need bytes in tier and reserve them: 1, or 0 when the tier cannot take them (the
 * reference's _ensure_space_in_tier, evicting the LRU entry at a time). */
static int ensure_space(struct kv_worker *w, int tier, uint64_t need, int depth)
{
	struct kv_run *r = w->r;
	struct kv_tier *t = &r->tier[tier];
	double limit = (double)t->cap, target = limit * r->cfg->target_ratio;
	double eff = t->last ? limit : target;
	uint64_t max_ev;
	int first = 1, waited = 0;

	if (t->unlimited) {
		pthread_mutex_lock(&r->tier_lock);
		reserve(t, need);
		pthread_mutex_unlock(&r->tier_lock);
		return 1;
	}
	if (depth > KV_MAX_DEPTH)
		return 0;
	if (!t->last && (double)need > limit * r->cfg->skip_ratio)
		return 0;
	pthread_mutex_lock(&r->tier_lock);
	max_ev = t->count + 100 > 1000 ? t->count + 100 : 1000;
	max_ev = max_ev < 5000 ? max_ev : 5000;
	pthread_mutex_unlock(&r->tier_lock);
	for (uint64_t n = 0; n < max_ev && !kv_halted(r); n++) {
		uint32_t v;
		uint64_t vbytes;

		pthread_mutex_lock(&r->tier_lock);
		if ((double)(t->used + need) <= eff || (double)t->used < limit * KV_NEAR_EMPTY) {
			reserve(t, need);
			pthread_mutex_unlock(&r->tier_lock);
			return 1;
		}
		if (t->head == KV_NIL) {
			/* Nothing left to evict: recount (the reference corrects drift here), keeping
			 * the bottom tier's writes in flight: the reference forgets them, and its
			 * folder grew to several times its capacity under concurrent writes. */
			t->used = t->held + (t->last ? t->inflight : 0);
			if ((double)(t->used + need) <= eff || (t->last && !t->used)) {
				reserve(t,
					need); /* over the capacity only as this one entry alone */
				pthread_mutex_unlock(&r->tier_lock);
				return 1;
			}
			/* The bottom tier: what it holds is in flight, or being deleted by other
			 * evictions (a delete waits for a read of its entry): wait for it. */
			if (t->last) {
				wait_landing(r);
				pthread_mutex_unlock(&r->tier_lock);
				pthread_mutex_lock(&r->stats_lock);
				count_add(r, DC_KV_C_CAPACITY_WAITS, !waited);
				pthread_mutex_unlock(&r->stats_lock);
				waited = 1;
				n--; /* a wait is not an eviction (n wraps to n + 1 - 1) */
				continue;
			}
			pthread_mutex_unlock(&r->tier_lock);
			return 0;
		}
		if (first && !t->last && (double)t->held < limit * KV_FEW_ENTRIES &&
		    (double)need > target * 0.5) {
			pthread_mutex_unlock(&r->tier_lock);
			return 0;
		}
		first = 0;
		v = t->head;
		lru_unlink(r, t, v);
		vbytes = r->cfg->entries[v].bytes;
		pthread_mutex_unlock(&r->tier_lock);
		if (t->last) {
			evict_delete(w, v);
			continue;
		}
		if (!ensure_space(w, DC_KV_STORAGE, vbytes, depth + 1)) {
			pthread_mutex_lock(&r->tier_lock);
			if (r->e[v].loc == (uint8_t)tier)
				lru_insert(r, t, v);
			pthread_mutex_unlock(&r->tier_lock);
			return 0;
		}
		if (demote(w, v) < 0)
			return 0;
	}
	if (t->last && !kv_halted(r)) {
		pthread_mutex_lock(&r->tier_lock);
		reserve(t, need);
		pthread_mutex_unlock(&r->tier_lock);
		return 1;
	}
	return 0;
}

/* ---- what the requests call ---- */

int kv_access(struct kv_worker *w, uint32_t ent, int ctype, uint64_t *lat)
{
	struct kv_run *r = w->r;
	struct kv_entry *e = &r->e[ent];
	uint64_t bytes = r->cfg->entries[ent].bytes, total = 0;
	struct dc_kv_timing t = { 0, 0 };
	int loc;

	pthread_mutex_lock(&e->lock);
	loc = e->loc;
	if (loc == DC_KV_NONE) {
		pthread_mutex_unlock(&e->lock);
		pthread_mutex_lock(&r->stats_lock);
		count_add(r, DC_KV_C_MISSES, 1);
		pthread_mutex_unlock(&r->stats_lock);
		return 0;
	}
	pthread_mutex_lock(&r->tier_lock);
	e->last = dc_now_ns();
	if (e->listed) {
		lru_unlink(r, &r->tier[loc], ent);
		lru_insert(r, &r->tier[loc], ent);
	}
	pthread_mutex_unlock(&r->tier_lock);
	if (loc == DC_KV_CPU) {
		uint64_t t0 = dc_now_ns();

		ram_get(w, e, bytes);
		total = dc_now_ns() - t0;
	} else if (storage_get(w, ent, &total, &t) < 0) {
		pthread_mutex_unlock(&e->lock);
		return -1;
	}
	pthread_mutex_lock(&r->stats_lock);
	count_add(r, DC_KV_C_HITS, 1);
	count_add(r,
		  ctype == KV_CT_SYSTEM       ? DC_KV_C_SYSTEM_HITS
		  : ctype == KV_CT_MULTI_TURN ? DC_KV_C_MULTI_TURN_HITS
					      : DC_KV_C_USER_HITS,
		  1);
	count_add(r, DC_KV_C_DECODE_READS, 1);
	count_add(r, DC_KV_C_READ_OPS, 1);
	count_add(r, DC_KV_C_READ_BYTES, bytes);
	if (loc == DC_KV_CPU) {
		count_add(r, DC_KV_C_CPU_READ_BYTES, bytes);
		dc_hist_add_inline(&r->res->hist[DC_KV_H_CPU_READ], total);
	} else {
		count_add(r, DC_KV_C_STORAGE_READ_BYTES, bytes);
		count_add(r, DC_KV_C_STORAGE_READS, 1);
		dc_hist_add_inline(&r->res->hist[DC_KV_H_STORAGE_READ], total);
		dc_hist_add_inline(&r->res->hist[DC_KV_H_STORAGE_READ_DEV], t.device_ns);
		dc_hist_add_inline(&r->res->hist[DC_KV_H_STORAGE_READ_HOST], t.host_ns);
		if (r->cfg->bytes_per_token)
			count_add(r, DC_KV_C_STORAGE_TOKENS_X1000,
				  bytes * 1000 / r->cfg->bytes_per_token);
	}
	pthread_mutex_unlock(&r->stats_lock);
	if (loc == DC_KV_STORAGE)
		progress_add(r, 0, bytes);
	kv_log(w, ent, bytes, DC_KV_LOG_READ, loc, DC_KV_PH_DECODE);
	pthread_mutex_unlock(&e->lock);
	*lat += total;
	return 1;
}

static int pick_tier(struct kv_worker *w, uint64_t bytes)
{
	struct kv_run *r = w->r;

	if (r->tier[DC_KV_CPU].cap && ensure_space(w, DC_KV_CPU, bytes, 0))
		return DC_KV_CPU;
	if (ensure_space(w, DC_KV_STORAGE, bytes, 0))
		return DC_KV_STORAGE;
	if (kv_halted(r))
		return DC_KV_NONE;
	/* Every tier full and nothing evictable: the reference forces the write to storage. */
	pthread_mutex_lock(&r->tier_lock);
	reserve(&r->tier[DC_KV_STORAGE], bytes);
	pthread_mutex_unlock(&r->tier_lock);
	pthread_mutex_lock(&r->stats_lock);
	count_add(r, DC_KV_C_FAILED_ALLOCS, 1);
	pthread_mutex_unlock(&r->stats_lock);
	return DC_KV_STORAGE;
}

static void count_write(struct kv_run *r, uint32_t ent, int tier, uint64_t total,
			const struct dc_kv_timing *t)
{
	const struct dc_kv_entry_spec *s = &r->cfg->entries[ent];

	pthread_mutex_lock(&r->stats_lock);
	if (tier == DC_KV_CPU) {
		count_add(r, DC_KV_C_CPU_WRITE_BYTES, s->bytes);
		count_add(r, DC_KV_C_OFFLOADS_CPU, 1);
		dc_hist_add_inline(&r->res->hist[DC_KV_H_CPU_WRITE], total);
	} else {
		count_add(r, DC_KV_C_STORAGE_WRITE_BYTES, s->bytes);
		count_add(r, DC_KV_C_STORAGE_WRITES, 1);
		count_add(r, DC_KV_C_OFFLOADS_STORAGE, 1);
		count_add(r, DC_KV_C_STORAGE_TOKENS_X1000, (uint64_t)s->tokens * 1000);
		dc_hist_add_inline(&r->res->hist[DC_KV_H_STORAGE_WRITE], total);
		dc_hist_add_inline(&r->res->hist[DC_KV_H_STORAGE_WRITE_DEV], t->device_ns);
		dc_hist_add_inline(&r->res->hist[DC_KV_H_STORAGE_WRITE_HOST], t->host_ns);
	}
	pthread_mutex_unlock(&r->stats_lock);
	if (tier == DC_KV_STORAGE)
		progress_add(r, 1, s->bytes);
}

/* The staging a write of `bytes` stamps and sends: its worker's region, or its slot's. A region is
 * filled with random bytes as far as the writes in it reach, when they reach it, rather than all of
 * it at the start: the regions are sized for the largest entry, most writes are smaller, and a first
 * touch of memory is costly (in compat mode with tiny-1b, 16 regions of 379 MiB filled up front were
 * a third of the run's CPU: 1.41 CPU-s per GiB moved; 0.91 with 8). The bytes need only be
 * incompressible: dc_kv_stamp makes every 4 KiB block unique at write time. */
static unsigned char *stage_for(struct kv_worker *w, unsigned slot, uint64_t bytes)
{
	struct kv_run *r = w->r;
	unsigned i = r->stage_by_worker ? w->id : slot;
	unsigned char *p = r->stage + (uint64_t)i * r->stage_len;
	uint64_t want = bytes < r->stage_len ? (bytes + 4095) / 4096 * 4096 : r->stage_len;

	if (want > r->stage_filled[i]) { /* the region is this worker's or this slot's alone */
		dc_fill_random(p + r->stage_filled[i], want - r->stage_filled[i],
			       r->cfg->seed * 0x9e3779b97f4a7c15ull + ((uint64_t)i << 40) +
				       r->stage_filled[i]);
		r->stage_filled[i] = want;
	}
	return p;
}

int kv_allocate(struct kv_worker *w, uint32_t ent, int forced, int prefill, uint64_t *lat)
{
	struct kv_run *r = w->r;
	struct kv_entry *e = &r->e[ent];
	uint64_t bytes = r->cfg->entries[ent].bytes, total = 0;
	struct dc_kv_timing t = { 0, 0 };
	unsigned slot;
	unsigned char *stage;
	int tier, ret = 0;

	pthread_mutex_lock(&e->lock);
	if (e->loc != DC_KV_NONE || e->writing) { /* cached, or another request writes it */
		pthread_mutex_unlock(&e->lock);
		return 0;
	}
	e->writing = 1;
	pthread_mutex_unlock(&e->lock);
	slot = slot_get(r);
	if (slot == KV_NO_SLOT) { /* the run halted while this waited */
		pthread_mutex_lock(&e->lock);
		e->writing = 0;
		pthread_mutex_unlock(&e->lock);
		return -1;
	}
	stage = r->stage ? stage_for(w, slot, bytes) : NULL;
	pthread_mutex_lock(&r->stats_lock);
	count_add(r, DC_KV_C_WRITE_OPS, 1);
	count_add(r, DC_KV_C_WRITE_BYTES, bytes);
	if (prefill)
		count_add(r, DC_KV_C_PREFILL_WRITES, 1);
	pthread_mutex_unlock(&r->stats_lock);
	if (forced) { /* a trace's recorded decision: no eviction */
		tier = forced;
		pthread_mutex_lock(&r->tier_lock);
		reserve(&r->tier[tier], bytes);
		pthread_mutex_unlock(&r->tier_lock);
	} else {
		tier = pick_tier(w, bytes);
	}
	if (tier != DC_KV_NONE && !kv_halted(r)) {
		if (tier == DC_KV_CPU) {
			uint64_t t0 = dc_now_ns();

			ret = ram_put(r, e, ent, stage);
			total = dc_now_ns() - t0;
			if (ret < 0)
				run_fail(&r->b, -ret, ent, 0, "RAM tier");
		} else {
			ret = storage_put(w, ent, stage, NULL, &total, &t);
		}
	} else {
		ret = -ECANCELED;
	}
	pthread_mutex_lock(&e->lock);
	pthread_mutex_lock(&r->tier_lock);
	if (ret == 0) {
		struct kv_tier *tt = &r->tier[tier];

		e->loc = (uint8_t)tier;
		e->last = dc_now_ns();
		landed(tt, bytes);
		tt->held += bytes;
		tt->count++;
		lru_insert(r, tt, ent);
		pthread_cond_broadcast(&r->written);
	} else if (tier != DC_KV_NONE) {
		unreserve(&r->tier[tier], bytes);
	}
	e->writing = 0;
	pthread_mutex_unlock(&r->tier_lock);
	pthread_mutex_unlock(&e->lock);
	slot_put(r, slot);
	if (ret < 0)
		return -1;
	count_write(r, ent, tier, total, &t);
	kv_log(w, ent, bytes, DC_KV_LOG_WRITE, tier, DC_KV_PH_PREFILL);
	*lat += total;
	return 1;
}

int kv_demote_forced(struct kv_worker *w, uint32_t ent)
{
	struct kv_run *r = w->r;
	uint64_t bytes = r->cfg->entries[ent].bytes;
	unsigned slot;
	int ret = 0;

	pthread_mutex_lock(&r->tier_lock);
	if (r->e[ent].loc != DC_KV_CPU) {
		pthread_mutex_unlock(&r->tier_lock);
		return 0;
	}
	if (r->e[ent].listed)
		lru_unlink(r, &r->tier[DC_KV_CPU], ent);
	reserve(&r->tier[DC_KV_STORAGE], bytes);
	pthread_mutex_unlock(&r->tier_lock);
	slot = slot_get(r);
	if (slot == KV_NO_SLOT) {
		pthread_mutex_lock(&r->tier_lock);
		unreserve(&r->tier[DC_KV_STORAGE], bytes);
		pthread_mutex_unlock(&r->tier_lock);
		return -1;
	}
	ret = demote(w, ent);
	slot_put(r, slot);
	return ret < 0 ? -1 : 1;
}

int kv_is_cached(struct kv_run *r, uint32_t ent)
{
	int loc;

	pthread_mutex_lock(&r->e[ent].lock);
	loc = r->e[ent].loc != DC_KV_NONE || r->e[ent].writing;
	pthread_mutex_unlock(&r->e[ent].lock);
	return loc;
}

void kv_wait_written(struct kv_run *r, uint32_t ent)
{
	pthread_mutex_lock(&r->tier_lock);
	while (r->e[ent].loc == DC_KV_NONE && !run_stopped(&r->b)) {
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec +=
			50 * 1000 * 1000; /* the stop is not signalled here: look again soon */
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&r->written, &r->tier_lock, &ts);
	}
	pthread_mutex_unlock(&r->tier_lock);
}

/* ---- setup ---- */

int kv_cache_init(struct kv_run *r)
{
	const struct dc_kv_config *cfg = r->cfg;
	pthread_condattr_t ca;

	r->e = calloc(cfg->nentries ? cfg->nentries : 1, sizeof(*r->e));
	if (!r->e)
		return -ENOMEM;
	for (uint64_t i = 0; i < cfg->nentries; i++) {
		pthread_mutex_init(&r->e[i].lock, NULL);
		r->e[i].prev = r->e[i].next = KV_NIL;
	}
	for (int i = 0; i < 3; i++)
		r->tier[i].head = r->tier[i].tail = KV_NIL;
	r->tier[DC_KV_CPU].cap = cfg->cpu_bytes;
	r->tier[DC_KV_STORAGE].cap = cfg->storage_bytes;
	r->tier[DC_KV_STORAGE].last = 1;
	r->tier[DC_KV_STORAGE].unlimited = cfg->storage_bytes == UINT64_MAX;
	r->ram_noop = cfg->store == &dc_kv_store_null;
	pthread_mutex_init(&r->tier_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->written, &ca);
	pthread_condattr_destroy(&ca);
	return 0;
}

void kv_cache_free(struct kv_run *r)
{
	if (!r->e)
		return;
	for (uint64_t i = 0; i < r->cfg->nentries; i++) {
		free(r->e[i].ram);
		pthread_mutex_destroy(&r->e[i].lock);
	}
	free(r->e);
	r->e = NULL;
	pthread_cond_destroy(&r->written);
	pthread_mutex_destroy(&r->tier_lock);
}
