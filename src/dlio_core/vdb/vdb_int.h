/* Private to the vector-search run: run.c (clients, the task queue, the result) and search.c (the
 * search threads: one hop chain at a time on their own engine instance). */
#ifndef DLIO_CORE_VDB_INT_H
#define DLIO_CORE_VDB_INT_H
#include <pthread.h>
#include <stdint.h>

#include "../bufpool.h"
#include "../core_int.h"
#include "../run_base.h"
#include "dlio_core/vdb.h"

/* One segment search waiting for a search thread. */
struct vdb_task {
	uint32_t client;
	uint32_t query; /* slot in the client's batch */
	uint32_t segment;
	uint32_t pad;
};

/* A query process: sends a batch, waits for all of its segment searches. */
struct vdb_client {
	struct vdb_run *run;
	unsigned id;
	pthread_t tid;
	int created;
	uint32_t left;        /* atomic: segment searches of the batch not done */
	uint32_t *query_left; /* per query of the batch: segment searches not done (atomic) */
	uint64_t *query_end;  /* per query: when its last segment search ended */
	pthread_mutex_t lock;
	pthread_cond_t done;
	struct dc_hist *query_lat, *batch_lat;
	uint64_t queries, batches, t_end;
	int cut; /* atomic: a search of its batch stopped between hops (the batch is not counted) */
};

/* A search-pool thread. */
struct vdb_searcher {
	struct vdb_run *run;
	unsigned id;
	pthread_t tid;
	int created;
	struct dc_engine *eng;
	struct dc_engine_opts eo;
	struct dc_io *slots;
	struct dc_io **done;
	unsigned nslots;
	struct dc_bufpool pool;
	struct dc_file *files; /* segments index files, then segments PQ files */
	struct dc_hist *hop_lat, *read_lat;
	uint64_t rng;
	uint64_t searches, hops, reads, bytes, pq_reads, cache_hits;
	uint64_t io_wait_ns, cpu_hop_ns, search_ns, cpu_ns;
};

struct vdb_run {
	const struct dc_vdb_config *cfg;
	struct dc_vdb_result *res;
	const struct dc_engine_ops *ops;
	struct vdb_client *clients;
	struct vdb_searcher *searchers;
	uint32_t dio_align;

	struct run_base b;   /* its lock guards the queue too; the clock: t0, t_stop */
	pthread_cond_t work; /* a task was queued, or the run ends */
	struct vdb_task *queue;
	uint64_t qhead, qtail, qcap;
	int closing; /* no more tasks: search threads leave when the queue is empty */

	uint64_t claimed;     /* atomic: queries handed to clients */
	uint64_t next_search; /* atomic: chains taken */
};

/* run.c */
/* The next task, or 0 when the run is over (the queue closed and empty). */
int vdb_take(struct vdb_run *r, struct vdb_task *t);
/* A segment search of task t ended at now. */
void vdb_task_done(struct vdb_run *r, const struct vdb_task *t, uint64_t now);

/* search.c */
void *vdb_searcher_main(void *arg);
uint64_t vdb_thread_cpu_ns(void);

#endif
