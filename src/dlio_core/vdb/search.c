/* The search pool of a vector-search run: each thread takes segment searches from the queue and runs
 * each one's hop chain on its own engine instance (W slots, or 1 for a synchronous engine, whose hop
 * then reads its nodes one after another). Files are opened once per thread, before the clock starts.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dlio_core/compute.h"
#include "dlio_core/timer.h"
#include "vdb_int.h"

uint64_t vdb_thread_cpu_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) < 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static unsigned nfiles(const struct dc_vdb_config *cfg)
{
	return cfg->segments * (cfg->pq_paths ? 2u : 1u);
}

static int open_files(struct vdb_searcher *s)
{
	const struct dc_vdb_config *cfg = s->run->cfg;
	unsigned n = nfiles(cfg);

	s->files = calloc(n, sizeof(*s->files));
	if (!s->files)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		s->files[i].fd = -1;
		s->files[i].reg_index = -1;
		s->files[i].direct = cfg->direct;
		s->files[i].path =
			i < cfg->segments ? cfg->index_paths[i] : cfg->pq_paths[i - cfg->segments];
	}
	for (unsigned i = 0; i < n; i++) {
		int ret = s->run->ops->open(s->eng, &s->files[i], 0);

		if (ret < 0) {
			s->files[i].fd = -1;
			run_fail(&s->run->b, -ret, i, 0, "open");
			return ret;
		}
	}
	return 0;
}

static int setup(struct vdb_searcher *s)
{
	struct vdb_run *r = s->run;
	const struct dc_vdb_config *cfg = r->cfg;
	unsigned n = (r->ops->caps & DC_CAP_ASYNC) ? cfg->beam_width + cfg->pq_reads_per_hop : 1;
	uint64_t max_len = cfg->read_bytes > DC_VDB_SECTOR ? cfg->read_bytes : DC_VDB_SECTOR;
	int ret;

	s->nslots = n;
	s->slots = calloc(n, sizeof(*s->slots));
	s->done = calloc(n, sizeof(*s->done));
	s->hop_lat = malloc(sizeof(*s->hop_lat));
	s->read_lat = malloc(sizeof(*s->read_lat));
	if (!s->slots || !s->done || !s->hop_lat || !s->read_lat)
		return -ENOMEM;
	dc_hist_init(s->hop_lat);
	dc_hist_init(s->read_lat);
	s->rng = cfg->seed * 0x9E3779B97F4A7C15ull + s->id + 1;
	ret = dc_bufpool_init(&s->pool, s->slots, n, max_len, r->dio_align, 0, 0);
	if (ret < 0)
		return ret;
	s->eo = cfg->eng;
	s->eo.qd = n;
	s->eo.used_flags = 0;
	ret = r->ops->init(&s->eng, &s->eo, s->slots, n);
	if (ret < 0) {
		s->eng = NULL;
		return ret;
	}
	return open_files(s);
}

static void teardown(struct vdb_searcher *s)
{
	if (s->eng && s->files)
		for (unsigned i = 0; i < nfiles(s->run->cfg); i++)
			if (s->files[i].fd >= 0)
				(void)s->run->ops->close(s->eng, &s->files[i]);
	dc_bufpool_release(s->run->ops, &s->eng, &s->pool, &s->slots);
	free(s->done);
	free(s->files);
	s->done = NULL;
	s->files = NULL;
}

static inline uint64_t node_offset(const struct dc_vdb_config *cfg, uint64_t node)
{
	uint64_t sector = cfg->nodes_per_sector ? node / cfg->nodes_per_sector
						: node * (cfg->read_bytes / DC_VDB_SECTOR);

	return (sector + 1) * DC_VDB_SECTOR;
}

static inline uint64_t next_rand(uint64_t *x)
{
	/* xorshift64*: the PQ page of a scale-mode hop (no quality needed, only spread) */
	*x ^= *x >> 12;
	*x ^= *x << 25;
	*x ^= *x >> 27;
	return *x * 0x2545F4914F6CDD1Dull;
}

/* A completed read: counted, or the run's first error. 0 or -EIO. */
static inline int complete(struct vdb_searcher *s, struct dc_io *io, uint64_t now, uint32_t file)
{
	if (unlikely(io->res != (int64_t)io->len)) {
		if (io->res < 0)
			run_fail(&s->run->b, (int)-io->res, file, io->offset, "read");
		else
			run_fail(&s->run->b, EIO, file, io->offset, "short read");
		return -EIO;
	}
	s->reads++;
	s->bytes += io->len;
	dc_hist_add_inline(s->read_lat, now - io->t_issue);
	return 0;
}

/* Issue one read; a synchronous engine completes it here. Returns 1 when it is in flight, 0 when
 * done, < 0 on failure. */
static inline int issue(struct vdb_searcher *s, unsigned slot, uint32_t file, uint64_t off,
			uint64_t len)
{
	struct dc_io *io = &s->slots[slot];
	int ret;

	io->file = &s->files[file];
	io->offset = off;
	io->len = len;
	io->op = DC_OP_READ;
	io->user = file;
	io->t_issue = dc_now_ns();
	ret = s->run->ops->submit(s->eng, io);
	if (ret == 1)
		return complete(s, io, dc_now_ns(), file);
	if (ret < 0) {
		run_fail(&s->run->b, -ret, file, off, "submit");
		return ret;
	}
	return 1;
}

/* One hop: submit its reads (the cached nodes skipped, PQ pages added), wait for all. 0 or < 0. */
static int run_hop(struct vdb_searcher *s, uint32_t seg, const uint32_t *nodes, unsigned n)
{
	const struct dc_vdb_config *cfg = s->run->cfg;
	const int async = (s->run->ops->caps & DC_CAP_ASYNC) != 0;
	uint64_t t0 = dc_now_ns(), segn = cfg->seg_nodes[seg];
	unsigned inflight = 0, issued = 0;
	int ret, bad = 0;

	for (unsigned i = 0; i < n; i++) {
		uint64_t node = nodes[i] < segn ? nodes[i] : nodes[i] % segn;

		if (cfg->cached && node < cfg->cached_bits &&
		    (cfg->cached[node >> 3] >> (node & 7) & 1)) {
			s->cache_hits++;
			continue;
		}
		ret = issue(s, async ? issued : 0, seg, node_offset(cfg, node), cfg->read_bytes);
		if (ret < 0)
			return ret;
		issued++;
		inflight += (unsigned)ret;
	}
	for (unsigned k = 0; k < cfg->pq_reads_per_hop && cfg->pq_pages && cfg->pq_pages[seg];
	     k++) {
		uint64_t page = next_rand(&s->rng) % cfg->pq_pages[seg];

		ret = issue(s, async ? issued : 0, cfg->segments + seg, page * DC_VDB_SECTOR,
			    DC_VDB_SECTOR);
		if (ret < 0)
			return ret;
		issued++;
		s->pq_reads++;
		inflight += (unsigned)ret;
	}
	while (inflight) {
		int got = s->run->ops->reap(s->eng, inflight, s->done, s->nslots);
		uint64_t now = dc_now_ns();

		if (got < 0) {
			run_fail(&s->run->b, -got, UINT32_MAX, 0, "reap");
			return got;
		}
		for (int i = 0; i < got; i++)
			if (complete(s, s->done[i], now, (uint32_t)s->done[i]->user) < 0)
				bad = 1;
		inflight -= (unsigned)got;
	}
	if (issued) {
		uint64_t dt = dc_now_ns() - t0;

		s->io_wait_ns += dt;
		dc_hist_add_inline(s->hop_lat, dt);
	}
	return bad ? -EIO : 0;
}

/* One segment search: the next chain of the pool, hop after hop, each followed by its CPU. */
static void run_search(struct vdb_searcher *s, const struct vdb_task *t)
{
	struct vdb_run *r = s->run;
	const struct dc_vdb_config *cfg = r->cfg;
	uint64_t k = __atomic_fetch_add(&r->next_search, 1, __ATOMIC_RELAXED);
	uint64_t c = (cfg->first_search + k) % cfg->nsearches, t0 = dc_now_ns();
	uint64_t reads0 = s->reads, bytes0 = s->bytes;

	for (uint64_t h = cfg->hop_first[c]; h < cfg->hop_first[c + 1]; h++) {
		uint64_t a = cfg->read_first[h], b = cfg->read_first[h + 1];

		if (run_stop_asked(&r->b)) { /* a signal: between hops, however long the chain */
			__atomic_store_n(&r->clients[t->client].cut, 1, __ATOMIC_RELAXED);
			break;
		}
		if (run_hop(s, t->segment, cfg->nodes + a, (unsigned)(b - a)) < 0)
			break;
		s->hops++;
		if (cfg->cpu_per_hop_ns)
			s->cpu_hop_ns += dc_compute(cfg->cpu_per_hop_ns, cfg->compute_mode);
	}
	uint64_t now = dc_now_ns();

	s->search_ns += now - t0;
	s->searches++;
	if (cfg->progress) { /* once per search, not per read */
		__atomic_fetch_add(&cfg->progress->ops, s->reads - reads0, __ATOMIC_RELAXED);
		__atomic_fetch_add(&cfg->progress->bytes, s->bytes - bytes0, __ATOMIC_RELAXED);
	}
	vdb_task_done(r, t, now);
}

void *vdb_searcher_main(void *arg)
{
	struct vdb_searcher *s = arg;
	struct vdb_run *r = s->run;
	struct vdb_task t;
	int ret = setup(s);

	if (ret < 0 && !run_stopped(&r->b))
		run_fail(&r->b, -ret, UINT32_MAX, 0, ret == -ENOMEM ? "memory" : "engine init");
	if (run_gate_wait(&r->b) == 0) {
		uint64_t cpu0 = vdb_thread_cpu_ns();

		/* After a failure the tasks are still taken (and end at once), so that every client's
		 * batch completes and the run winds down. */
		while (vdb_take(r, &t)) {
			if (run_stop_asked(&r->b)) {
				__atomic_store_n(&r->clients[t.client].cut, 1, __ATOMIC_RELAXED);
				vdb_task_done(r, &t, dc_now_ns());
			} else
				run_search(s, &t);
		}
		s->cpu_ns = vdb_thread_cpu_ns() - cpu0;
	}
	teardown(s);
	return NULL;
}
