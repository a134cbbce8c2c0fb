/* Private to the KV-cache engine (run.c, cache.c): the run's shared state. */
#ifndef DLIO_CORE_KVCACHE_INT_H
#define DLIO_CORE_KVCACHE_INT_H
#include <pthread.h>
#include <stdint.h>

#include "../run_base.h"
#include "dlio_core/kvcache.h"

#define KV_NIL UINT32_MAX
#define KV_HUGE_PAGE                                                                               \
	(2u << 20) /* buffers that O_DIRECT moves: THP-aligned (bufpool.c does the same) */

/* Which of the reference's hit counters a read adds to (its cache_type). */
enum kv_ctype { KV_CT_USER = 0, KV_CT_SYSTEM = 1, KV_CT_MULTI_TURN = 2 };

struct kv_entry {
	pthread_mutex_t lock; /* held across a read, a demotion or a delete of the entry: the
			       * reference's entry lock */
	void *ram;            /* the RAM tier's copy */
	uint64_t last;        /* last access (ns): the LRU order */
	uint32_t prev, next;  /* its tier's LRU list, oldest first */
	uint8_t loc;          /* enum dc_kv_tier */
	uint8_t listed;       /* on its tier's list (an evictor takes it off first) */
	uint8_t writing;      /* a write of it is under way */
	uint8_t pad;
};

struct kv_tier {
	uint64_t cap;      /* capacity in bytes */
	uint64_t used;     /* reserved bytes: the reference's *_memory_used */
	uint64_t held;     /* bytes of the entries in it */
	uint64_t inflight; /* bytes reserved for writes into it not yet landed (counted in used) */
	uint64_t count;    /* entries in it */
	uint32_t head, tail;
	int last;      /* the bottom tier: evicting deletes */
	int unlimited; /* storage without a capacity: only counted */
};

/* The reference's conversation window (conv.c): an LRU list over the conversation ids, written by
 * the dispatcher alone (the reference touches a conversation when a user sends a request), read by
 * the workers (in[] with atomic loads). */
struct kv_conv_window {
	uint32_t cap;             /* max_conversations (0: no window) */
	uint32_t len, head, tail; /* head: the least recently touched */
	uint32_t *prev, *next;
	uint8_t *in;           /* in the window now (once out, never back: ids are not reused) */
	uint8_t *user_stopped; /* the reference's user thread died (add_turn raised) */
	uint64_t evictions, users_stopped, unsent;
};

struct kv_run {
	const struct dc_kv_config *cfg;
	struct dc_kv_result *res;
	struct kv_entry *e;
	struct kv_tier tier[3]; /* [DC_KV_CPU], [DC_KV_STORAGE] */
	int ram_noop;           /* null store: the RAM tier is counted, not held */
	pthread_mutex_t tier_lock;
	pthread_cond_t written; /* an entry became cached (trace-replay reads wait for it) */
	pthread_mutex_t stats_lock;
	/* the first error, the stop flag (no new request starts), the start gate and t0; its lock and
	 * cond guard the request queues too */
	struct run_base b;
	int halt; /* atomic: requests in flight stop between steps (the drain is over, or a stop) */
	/* the request queues, one FIFO per priority (intrusive lists over the request index) */
	uint32_t *qnext;
	uint32_t qhead[4], qtail[4];
	uint64_t qlen;
	unsigned active;    /* workers inside a request */
	int dispatched;     /* every request is queued */
	uint32_t *conv_enq; /* turns of each conversation enqueued so far */
	struct kv_conv_window win;
	/* allocation slots: the reference's max_concurrent_allocs semaphore */
	pthread_mutex_t slot_lock;
	pthread_cond_t slot_cond;
	unsigned *free_slots;
	unsigned nfree;
	/* staging: stage_regions x stage_len bytes, a region per worker when there are fewer workers
	 * than slots (a worker writes one entry at a time), else per slot (cache.c stage_for) */
	unsigned char *stage;
	uint64_t stage_len;
	unsigned stage_regions;
	int stage_by_worker;
	uint64_t *stage_filled; /* bytes of each region filled with random bytes so far */
	struct dc_kv_store *store;
};

struct kv_worker {
	struct kv_run *r;
	unsigned id;
	struct dc_kv_worker *sw;
	pthread_t th;
	int started;
	int busy;            /* it runs a request (under r->b.lock): the drain waits for it */
	uint64_t arrival_ns; /* the request it runs: the time of its operations in virtual time */
	unsigned char *scratch; /* where its RAM-tier reads copy to */
};

/* Requests in flight stop between their steps and transfers: the drain after the duration is
 * over, the caller asked to stop (a signal), or an error was recorded. */
static inline int kv_halted(const struct kv_run *r)
{
	return __atomic_load_n(&r->halt, __ATOMIC_RELAXED) || *r->cfg->stop || run_failed(&r->b);
}

/* cache.c: the tiers. Each returns 1/0 (hit or done / miss or nothing to do) and adds the
 * storage latency the reference counts to *lat; an I/O error stops the run (run_fail, the entry as its file). */
int kv_cache_init(struct kv_run *r);
void kv_cache_free(struct kv_run *r);
int kv_access(struct kv_worker *w, uint32_t ent, int ctype, uint64_t *lat);
int kv_allocate(struct kv_worker *w, uint32_t ent, int tier, int prefill, uint64_t *lat);
int kv_demote_forced(struct kv_worker *w, uint32_t ent);
int kv_is_cached(struct kv_run *r, uint32_t ent);
int kv_worker_scratch(struct kv_worker *w);
/* trace replay: wait until the entry is cached (or the run stops). */
void kv_wait_written(struct kv_run *r, uint32_t ent);

/* conv.c: the conversation window. */
int kv_conv_init(struct kv_run *r);
void kv_conv_free(struct kv_run *r);
int kv_conv_arrive(struct kv_run *r, const struct dc_kv_req *q);
int kv_conv_remembered(const struct kv_run *r, uint32_t conv);
void kv_conv_counts(const struct kv_run *r, uint64_t *count);

#endif
