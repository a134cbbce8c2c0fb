/* dc_vdb_run: the vector-search run (vdb.h). Query clients send batches and wait for them; the
 * search pool (search.c) runs the segment searches. This file holds the config checks, the
 * task queue, the clients and the result (the start gate and the first error: run_base.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dlio_core/fsutil.h"
#include "dlio_core/timer.h"
#include "vdb_int.h"

#define VDB_MAX_BEAM   512u
#define VDB_MAX_PQ     64u
#define VDB_MAX_THREAD 4096u

int vdb_take(struct vdb_run *r, struct vdb_task *t)
{
	pthread_mutex_lock(&r->b.lock);
	while (r->qhead == r->qtail && !r->closing)
		pthread_cond_wait(&r->work, &r->b.lock);
	if (r->qhead == r->qtail) {
		pthread_mutex_unlock(&r->b.lock);
		return 0;
	}
	*t = r->queue[r->qhead++ % r->qcap];
	pthread_mutex_unlock(&r->b.lock);
	return 1;
}

void vdb_task_done(struct vdb_run *r, const struct vdb_task *t, uint64_t now)
{
	struct vdb_client *cl = &r->clients[t->client];

	/* The query's end is written before the batch count drops (release); the client reads it after
	 * seeing the count at 0 (acquire, under its lock). */
	if (__atomic_sub_fetch(&cl->query_left[t->query], 1, __ATOMIC_ACQ_REL) == 0)
		cl->query_end[t->query] = now;
	if (__atomic_sub_fetch(&cl->left, 1, __ATOMIC_ACQ_REL) == 0) {
		pthread_mutex_lock(&cl->lock);
		pthread_cond_signal(&cl->done);
		pthread_mutex_unlock(&cl->lock);
	}
}

/* How many queries the next batch holds: the batch size, fewer at the end of a query budget, 0 = done. */
static uint32_t claim(struct vdb_run *r)
{
	const struct dc_vdb_config *cfg = r->cfg;
	uint64_t prev;

	if (run_stop_asked(&r->b) || dc_now_ns() >= r->b.t_stop)
		return 0;
	if (!cfg->queries)
		return cfg->batch;
	prev = __atomic_fetch_add(&r->claimed, cfg->batch, __ATOMIC_RELAXED);
	if (prev >= cfg->queries)
		return 0;
	return (uint32_t)(cfg->queries - prev < cfg->batch ? cfg->queries - prev : cfg->batch);
}

static void *client_main(void *arg)
{
	struct vdb_client *cl = arg;
	struct vdb_run *r = cl->run;
	const struct dc_vdb_config *cfg = r->cfg;
	uint32_t nb;

	if (run_gate_wait(&r->b) < 0)
		return NULL;
	cl->t_end = r->b.t0;
	while ((nb = claim(r)) > 0) {
		uint64_t t0, t1;

		__atomic_store_n(&cl->left, nb * cfg->segments, __ATOMIC_RELAXED);
		for (uint32_t q = 0; q < nb; q++)
			__atomic_store_n(&cl->query_left[q], cfg->segments, __ATOMIC_RELAXED);
		t0 = dc_now_ns();
		pthread_mutex_lock(&r->b.lock);
		for (uint32_t q = 0; q < nb; q++)
			for (uint32_t s = 0; s < cfg->segments; s++) {
				struct vdb_task *t = &r->queue[r->qtail++ % r->qcap];

				t->client = cl->id;
				t->query = q;
				t->segment = s;
			}
		pthread_cond_broadcast(&r->work);
		pthread_mutex_unlock(&r->b.lock);

		pthread_mutex_lock(&cl->lock);
		while (__atomic_load_n(&cl->left, __ATOMIC_ACQUIRE))
			pthread_cond_wait(&cl->done, &cl->lock);
		pthread_mutex_unlock(&cl->lock);
		t1 = dc_now_ns();
		if (__atomic_load_n(&cl->cut, __ATOMIC_RELAXED))
			break; /* stopped part way: its latencies are not the queries' */
		dc_hist_add_inline(cl->batch_lat, t1 - t0);
		for (uint32_t q = 0; q < nb; q++)
			dc_hist_add_inline(cl->query_lat, cl->query_end[q] - t0);
		cl->queries += nb;
		cl->batches++;
		cl->t_end = t1;
		if (cfg->progress)
			__atomic_fetch_add(&cfg->progress->steps, nb, __ATOMIC_RELAXED);
	}
	return NULL;
}

/* Refuse what would crash or hang later (O(hops), before the clock). */
static int check_config(const struct dc_vdb_config *cfg)
{
	if (!cfg->engine || !cfg->segments || !cfg->index_paths || !cfg->seg_nodes ||
	    !cfg->hop_first || !cfg->read_first || !cfg->nodes || !cfg->nsearches)
		return -EINVAL;
	if (cfg->beam_width < 1 || cfg->beam_width > VDB_MAX_BEAM ||
	    cfg->pq_reads_per_hop > VDB_MAX_PQ || (cfg->pq_reads_per_hop && !cfg->pq_paths))
		return -EINVAL;
	if (cfg->clients < 1 || cfg->clients > VDB_MAX_THREAD || cfg->batch < 1 ||
	    cfg->search_threads < 1 || cfg->search_threads > VDB_MAX_THREAD)
		return -EINVAL;
	if (!cfg->read_bytes || cfg->read_bytes % DC_VDB_SECTOR)
		return -EINVAL;
	if (cfg->pq_paths && !cfg->pq_pages)
		return -EINVAL;
	for (unsigned s = 0; s < cfg->segments; s++)
		if (!cfg->seg_nodes[s] || !cfg->index_paths[s] ||
		    (cfg->pq_paths && !cfg->pq_paths[s]))
			return -EINVAL;
	if (cfg->hop_first[0] != 0)
		return -EINVAL;
	for (uint64_t s = 0; s < cfg->nsearches; s++)
		if (cfg->hop_first[s + 1] < cfg->hop_first[s])
			return -EINVAL;
	for (uint64_t h = 0; h < cfg->hop_first[cfg->nsearches]; h++)
		if (cfg->read_first[h + 1] < cfg->read_first[h] ||
		    cfg->read_first[h + 1] - cfg->read_first[h] > cfg->beam_width)
			return -EINVAL;
	return 0;
}

static int prepare(struct vdb_run *r, const struct dc_vdb_config *cfg, struct dc_vdb_result *res)
{
	char why[256];
	int ret;

	memset(r, 0, sizeof(*r));
	r->cfg = cfg;
	r->res = res;
	memset(res, 0, sizeof(*res));
	run_base_init(&r->b, &res->error, NULL, cfg->stop);
	pthread_cond_init(&r->work, NULL);
	dc_hist_init(&res->query_lat);
	dc_hist_init(&res->batch_lat);
	dc_hist_init(&res->hop_lat);
	dc_hist_init(&res->read_lat);
	ret = check_config(cfg);
	if (ret < 0) {
		run_fail(&r->b, -ret, UINT32_MAX, 0, "config");
		return ret;
	}
	r->ops = dc_engine_find(cfg->engine);
	if (!r->ops) {
		run_fail(&r->b, ENOENT, UINT32_MAX, 0, "engine");
		return -ENOENT;
	}
	ret = dc_engine_available(cfg->engine, why, sizeof(why));
	if (ret < 0 || (cfg->direct && !(r->ops->caps & DC_CAP_DIRECT))) {
		ret = ret < 0 ? ret : -EOPNOTSUPP;
		run_fail(&r->b, -ret, UINT32_MAX, 0, "engine");
		return ret;
	}
	r->dio_align = DC_VDB_SECTOR;
	if (cfg->direct && !(r->ops->caps & DC_CAP_NOIO)) {
		uint32_t mem, off;

		if (dc_dio_align(cfg->index_paths[0], &mem, &off, NULL) == 0 && off > r->dio_align)
			r->dio_align = off;
	}
	r->qcap = (uint64_t)cfg->clients * cfg->batch * cfg->segments;
	r->queue = calloc(r->qcap, sizeof(*r->queue));
	r->clients = calloc(cfg->clients, sizeof(*r->clients));
	r->searchers = calloc(cfg->search_threads, sizeof(*r->searchers));
	if (!r->queue || !r->clients || !r->searchers) {
		run_fail(&r->b, ENOMEM, UINT32_MAX, 0, "memory");
		return -ENOMEM;
	}
	for (unsigned c = 0; c < cfg->clients; c++) {
		struct vdb_client *cl = &r->clients[c];

		cl->run = r;
		cl->id = c;
		pthread_mutex_init(&cl->lock, NULL);
		pthread_cond_init(&cl->done, NULL);
		cl->query_left = calloc(cfg->batch, sizeof(*cl->query_left));
		cl->query_end = calloc(cfg->batch, sizeof(*cl->query_end));
		cl->query_lat = malloc(sizeof(*cl->query_lat));
		cl->batch_lat = malloc(sizeof(*cl->batch_lat));
		if (!cl->query_left || !cl->query_end || !cl->query_lat || !cl->batch_lat) {
			run_fail(&r->b, ENOMEM, UINT32_MAX, 0, "memory");
			return -ENOMEM;
		}
		dc_hist_init(cl->query_lat);
		dc_hist_init(cl->batch_lat);
	}
	for (unsigned t = 0; t < cfg->search_threads; t++) {
		r->searchers[t].run = r;
		r->searchers[t].id = t;
	}
	return 0;
}

static void collect(struct vdb_run *r)
{
	const struct dc_vdb_config *cfg = r->cfg;
	struct dc_vdb_result *res = r->res;

	res->t_start = res->t_end = r->b.t0;
	for (unsigned c = 0; c < cfg->clients; c++) {
		struct vdb_client *cl = &r->clients[c];

		res->queries += cl->queries;
		res->batches += cl->batches;
		if (cl->t_end > res->t_end)
			res->t_end = cl->t_end;
		dc_hist_merge(&res->query_lat, cl->query_lat);
		dc_hist_merge(&res->batch_lat, cl->batch_lat);
	}
	for (unsigned t = 0; t < cfg->search_threads; t++) {
		struct vdb_searcher *s = &r->searchers[t];

		res->searches += s->searches;
		res->hops += s->hops;
		res->reads += s->reads;
		res->bytes += s->bytes;
		res->pq_reads += s->pq_reads;
		res->cache_hits += s->cache_hits;
		res->io_wait_ns += s->io_wait_ns;
		res->cpu_hop_ns += s->cpu_hop_ns;
		res->search_ns += s->search_ns;
		res->search_cpu_ns += s->cpu_ns;
		if (s->hop_lat)
			dc_hist_merge(&res->hop_lat, s->hop_lat);
		if (s->read_lat)
			dc_hist_merge(&res->read_lat, s->read_lat);
	}
	if (cfg->search_threads)
		res->eng_flags_used = r->searchers[0].eo.used_flags;
	res->stopped = cfg->stop && *cfg->stop;
}

static void destroy(struct vdb_run *r)
{
	if (r->clients)
		for (unsigned c = 0; c < r->cfg->clients; c++) {
			struct vdb_client *cl = &r->clients[c];

			free(cl->query_left);
			free(cl->query_end);
			free(cl->query_lat);
			free(cl->batch_lat);
			if (cl->run) {
				pthread_mutex_destroy(&cl->lock);
				pthread_cond_destroy(&cl->done);
			}
		}
	if (r->searchers)
		for (unsigned t = 0; t < r->cfg->search_threads; t++) {
			free(r->searchers[t].hop_lat);
			free(r->searchers[t].read_lat);
		}
	free(r->clients);
	free(r->searchers);
	free(r->queue);
	pthread_cond_destroy(&r->work);
	run_base_destroy(&r->b);
}

int dc_vdb_run(const struct dc_vdb_config *cfg, struct dc_vdb_result *res)
{
	struct vdb_run r;
	int ret = prepare(&r, cfg, res);

	if (ret < 0) {
		destroy(&r);
		return ret;
	}
	for (unsigned t = 0; t < cfg->search_threads; t++)
		r.searchers[t].created = !run_start(&r.b, &r.searchers[t].tid, NULL,
						    vdb_searcher_main, &r.searchers[t]);
	for (unsigned c = 0; c < cfg->clients; c++)
		r.clients[c].created =
			!run_start(&r.b, &r.clients[c].tid, NULL, client_main, &r.clients[c]);
	run_gate_open(&r.b, 0, cfg->runtime_ns);
	for (unsigned c = 0; c < cfg->clients; c++)
		if (r.clients[c].created)
			pthread_join(r.clients[c].tid, NULL);
	pthread_mutex_lock(&r.b.lock);
	r.closing = 1;
	pthread_cond_broadcast(&r.work);
	pthread_mutex_unlock(&r.b.lock);
	for (unsigned t = 0; t < cfg->search_threads; t++)
		if (r.searchers[t].created)
			pthread_join(r.searchers[t].tid, NULL);
	collect(&r);
	ret = res->error.err ? -res->error.err : 0;
	destroy(&r);
	return ret;
}
