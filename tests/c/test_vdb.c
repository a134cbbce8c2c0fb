/* dc_vdb_run on the null engine: every count follows the chains it was given (2 segments, 3 clients x
 * batch 2, 2 search threads, a query budget that cuts the last batch), the node cache, a bad config.
 * Runs under the sanitizer build too (threads, the task queue, the clients' hand-over). */
#include "t_helpers.h"
#include "dlio_core/vdb.h"

/* Two chains: [m] [a b c] [d]  and  [m] [e f]  (m = node 0, the medoid). */
static const uint64_t hop_first[] = { 0, 3, 5 };
static const uint64_t read_first[] = { 0, 1, 4, 5, 6, 8 };
static const uint32_t nodes[] = { 0, 11, 12, 13, 14, 0, 15, 16 };
static const uint64_t seg_nodes[] = { 100, 99 };
static const char *const paths[] = { "seg0", "seg1" };

static void base(struct dc_vdb_config *c)
{
	memset(c, 0, sizeof(*c));
	c->engine = "null";
	c->segments = 2;
	c->index_paths = paths;
	c->seg_nodes = seg_nodes;
	c->nodes_per_sector = 0;
	c->read_bytes = 8192;
	c->hop_first = hop_first;
	c->read_first = read_first;
	c->nodes = nodes;
	c->nsearches = 2;
	c->beam_width = 3;
	c->clients = 3;
	c->batch = 2;
	c->search_threads = 2;
	c->queries = 11;
}

int main(void)
{
	struct dc_vdb_config c;
	struct dc_vdb_result *r = calloc(1, sizeof(*r));
	uint8_t cache[13] = { 0 };
	int ret;

	if (!r)
		return T_EXIT_FAIL;
	base(&c);
	ret = dc_vdb_run(&c, r);
	T_CHECK(ret == 0, "run: %d", ret);
	/* 11 queries x 2 segments = 22 searches, chains 0,1,0,1...: 11 of each, 5 + 3 reads, 3 + 2 hops */
	T_CHECK(r->queries == 11 && r->searches == 22, "queries %llu searches %llu",
		(unsigned long long)r->queries, (unsigned long long)r->searches);
	T_CHECK(r->reads == 11 * 8 && r->hops == 11 * 5, "reads %llu hops %llu",
		(unsigned long long)r->reads, (unsigned long long)r->hops);
	T_CHECK(r->bytes == r->reads * 8192, "bytes %llu", (unsigned long long)r->bytes);
	T_CHECK(r->query_lat.count == 11 && r->batch_lat.count == r->batches, "latency counts");
	T_CHECK(r->batches >= 6 && r->batches <= 8, "batches %llu", (unsigned long long)r->batches);

	/* The node cache holds the medoid and node 15: 22 + 11 reads served from RAM. */
	base(&c);
	cache[0] = 1;
	cache[15 >> 3] |= 1 << (15 & 7);
	c.cached = cache;
	c.cached_bits = 100;
	ret = dc_vdb_run(&c, r);
	T_CHECK(ret == 0 && r->cache_hits == 33 && r->reads == 88 - 33,
		"cache: hits %llu reads %llu", (unsigned long long)r->cache_hits,
		(unsigned long long)r->reads);

	/* A hop wider than the beam is refused before anything runs. */
	base(&c);
	c.beam_width = 2;
	ret = dc_vdb_run(&c, r);
	T_CHECK(ret == -EINVAL && r->error.err == EINVAL && r->queries == 0, "beam check: %d", ret);
	free(r);
	return t_exit();
}
