/* Vector search on storage: DiskANN / AISAQ searches as hop chains (MLPerf Storage v3 §5).
 *
 * A search of one index segment is a chain of hops. A hop reads up to W graph nodes (beam width) with
 * O_DIRECT, all submitted together and all awaited, then spins the hop's CPU (distance computations);
 * the next hop's nodes are known only then. Nodes in the node cache (RAM) are not read. AISAQ scale mode
 * adds pq_reads_per_hop 4 KiB reads of the segment's PQ file to each hop.
 *
 * The load is Milvus's: `clients` query processes each send a batch of `batch` queries and wait for it;
 * each query searches every segment, and the segment searches run on `search_threads` threads (the query
 * node's search pool), each search on one thread start to end. A query's latency runs from its batch's
 * send to its last segment search's end.
 *
 * Python plans the chains (a pool of searches: the model's, or a captured trace's) as flat arrays; the
 * run takes them in turn, one per segment search, from first_search on. The GIL is released once around
 * dc_vdb_run; nothing is allocated per read.
 */
#ifndef DLIO_CORE_VDB_H
#define DLIO_CORE_VDB_H
#include "dlio_core/defs.h"
#include <stdint.h>
#include "dlio_core/engine.h"
#include "dlio_core/hist.h"
#include "dlio_core/run.h"

#define DC_VDB_SECTOR 4096u

struct dc_vdb_config {
	const char *engine;        /* registry name (io_uring, posix, null) */
	struct dc_engine_opts eng; /* qd is set here from the beam width */
	int direct;                /* open the index files with O_DIRECT */
	unsigned segments;
	const char *const *index_paths; /* segments entries: each segment's _disk.index */
	const char *const *pq_paths;    /* aisaq_scale: each segment's PQ file; else NULL */
	const uint64_t *seg_nodes;      /* segments entries: nodes in each segment */
	const uint64_t *pq_pages; /* segments entries: 4 KiB pages of each PQ file (or NULL) */
	/* Layout: node i is read at sector 1 + i / nodes_per_sector, or 1 + i * (read_bytes / 4096) when a
	 * node spans sectors (nodes_per_sector 0); read_bytes bytes from there. */
	uint32_t nodes_per_sector;
	uint32_t read_bytes;
	/* The pool of chains: search s has hops hop_first[s] .. hop_first[s+1]; hop h reads nodes
	 * nodes[read_first[h] .. read_first[h+1]) (at most beam_width of them). A node id past a segment's
	 * count wraps around it. */
	const uint64_t *hop_first;
	const uint64_t *read_first;
	const uint32_t *nodes;
	uint64_t nsearches;
	uint64_t
		first_search; /* the run's first segment search takes chain first_search % nsearches */
	const uint8_t *cached; /* bitmap over node ids: set = in the node cache; NULL = no cache */
	uint64_t cached_bits;  /* bits in the bitmap */
	unsigned beam_width;
	unsigned pq_reads_per_hop;
	uint64_t cpu_per_hop_ns;
	int compute_mode; /* enum dc_compute_mode */
	uint64_t seed;    /* PQ pages */
	unsigned clients, batch, search_threads;
	uint64_t queries;    /* stop after this many queries; 0 = after runtime_ns */
	uint64_t runtime_ns; /* claim no batch after this much time (0 = not time-based) */
	volatile int *stop;
	struct dc_progress *progress; /* ops = reads, bytes, steps = queries (may be NULL) */
};

struct dc_vdb_result {
	uint64_t t_start, t_end;
	uint64_t queries, batches, searches, hops;
	uint64_t reads, bytes; /* node reads that reached the engine (PQ pages included) */
	uint64_t pq_reads;     /* of which PQ page reads */
	uint64_t cache_hits;   /* node reads served by the node cache */
	uint64_t
		io_wait_ns; /* summed over searches: time from a hop's submit to its last completion */
	uint64_t cpu_hop_ns;      /* summed: achieved per-hop compute */
	uint64_t search_ns;       /* summed: segment search durations */
	uint64_t search_cpu_ns;   /* CPU time of the search threads */
	struct dc_hist query_lat; /* per query: batch send .. its last segment search's end */
	struct dc_hist batch_lat; /* per batch */
	struct dc_hist hop_lat;   /* per hop with reads: submit .. last completion */
	struct dc_hist read_lat;  /* per read */
	int stopped;
	unsigned eng_flags_used;
	struct dc_error error; /* file: segment index (PQ files: segments + index) */
};

/* 0, or -errno with result->error set; what was measured up to a failure is kept. */
DC_MUST_CHECK int dc_vdb_run(const struct dc_vdb_config *cfg, struct dc_vdb_result *result);

#endif
