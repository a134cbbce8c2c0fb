/* The KV-cache engine on a known three-request plan: counters against hand-computed values, the
 * files compat and direct leave (size, .npy header, every 4 KiB block different), eviction by
 * deletion when storage is full, and demotion from a small RAM tier. */
#include <dirent.h>
#include <sys/stat.h>

#include "t_helpers.h"
#include "dlio_core/kvcache.h"

#define BPT 8192u

static struct dc_kv_req reqs[3];
static struct dc_kv_step steps[3];
static struct dc_kv_entry_spec ents[3];
static const uint32_t conv_first[3] = { 0, 2, 3 };
static const uint32_t conv_reqs[3] = { 0, 1, 2 };

static void plan(void)
{
	/* conv 0: turn 0 (10 tokens, gen 64: 1 + 2 decode reads), turn 1 (20 tokens, gen 32: reads
	 * turn 0, then 1 + 1 decode reads); conv 1: turn 0, prefill only (30 tokens). */
	static const uint32_t tokens[3] = { 10, 20, 30 }, gen[3] = { 64, 32, 5 };

	for (int i = 0; i < 3; i++) {
		reqs[i] = (struct dc_kv_req){ .arrival_ns = (uint64_t)i * 1000,
					      .first_step = (uint32_t)i,
					      .nsteps = 1,
					      .conv = i < 2 ? 0 : 1,
					      .turn = i == 1,
					      .gen = gen[i],
					      .prio = 1,
					      .flags = i == 2 ? DC_KV_PREFILL_ONLY : 0 };
		steps[i] = (struct dc_kv_step){ .entry = (uint32_t)i, .kind = DC_KV_SYNTH };
		ents[i] = (struct dc_kv_entry_spec){ .bytes = (uint64_t)tokens[i] * BPT,
						     .tokens = tokens[i] };
	}
}

static volatile int stop_flag;

static void config(struct dc_kv_config *c, struct dc_kv_store_cfg *sc, const char *dir,
		   const struct dc_kv_store_ops *ops, int direct)
{
	memset(c, 0, sizeof(*c));
	memset(sc, 0, sizeof(*sc));
	sc->dir = dir;
	sc->direct = direct;
	sc->max_obj = 30 * BPT;
	sc->chunk = 64 * 1024;
	sc->qd = 2;
	sc->drop_check = 1;
	sc->workers = 1;
	sc->seed = 7;
	sc->model = (struct dc_kv_model){ 2, 1, 1024, 2 }; /* 2 x 2 x 1 x 1024 x 2 = 8192 B/token */
	c->reqs = reqs;
	c->nreqs = 3;
	c->steps = steps;
	c->nsteps = 3;
	c->entries = ents;
	c->nentries = 3;
	c->conv_first = conv_first;
	c->conv_reqs = conv_reqs;
	c->nconv = 2;
	c->workers = 1; /* one worker: the requests run in order */
	c->alloc_slots = 1;
	c->bytes_per_token = BPT;
	c->decode_batch = 32;
	c->storage_bytes = UINT64_MAX;
	c->target_ratio = 0.8;
	c->skip_ratio = 0.95;
	c->flags = DC_KV_ASAP | DC_KV_DRAIN;
	c->seed = 7;
	c->stage_bytes = 128 * 1024;
	c->store = ops;
	c->store_cfg = sc;
	c->stop = &stop_flag;
}

static uint64_t file_size(const char *dir, const char *name)
{
	char p[512];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return stat(p, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* Every 4 KiB block of the payloads of all files differs from every other (no dedup). */
static void check_unique(const char *dir, int n, uint64_t hdr)
{
	static unsigned char *blocks;
	int nb = 0;

	blocks = t_aligned_alloc(4096, 64 * 4096 * 3);
	for (int i = 0; i < n; i++) {
		char p[512];
		int fd;

		snprintf(p, sizeof(p), "%s/kv_%08x.npy", dir, i);
		fd = open(p, O_RDONLY);
		T_CHECK(fd >= 0, "%s", p);
		if (fd < 0)
			continue;
		char magic[8];
		T_CHECK(pread(fd, magic, 8, 0) == 8 && memcmp(magic, "\x93NUMPY", 6) == 0,
			"npy magic");
		for (uint64_t off = hdr; nb < 64 * 3; off += 4096) {
			ssize_t got = pread(fd, blocks + (size_t)nb * 4096, 4096, (off_t)off);

			if (got < 4096)
				break;
			nb++;
		}
		close(fd);
	}
	for (int a = 0; a < nb; a++)
		for (int b = a + 1; b < nb; b++)
			T_CHECK(memcmp(blocks + (size_t)a * 4096, blocks + (size_t)b * 4096, 4096),
				"blocks %d and %d are equal", a, b);
	free(blocks);
}

static void check_counts(const struct dc_kv_result *r, int storage)
{
	/* reads: req0 1 + 2 decode; req1 1 multi-turn + 1 + 1 decode; req2 none */
	uint64_t rb = 3 * 10 * BPT + 10 * BPT + 2 * 20 * BPT;

	T_CHECK(r->count[DC_KV_C_REQUESTS] == 3, "%llu", (unsigned long long)r->count[0]);
	T_CHECK(r->count[DC_KV_C_WRITE_OPS] == 3, "writes");
	T_CHECK(r->count[DC_KV_C_READ_OPS] == 6, "reads %llu",
		(unsigned long long)r->count[DC_KV_C_READ_OPS]);
	T_CHECK(r->count[DC_KV_C_READ_BYTES] == rb, "read bytes");
	T_CHECK(r->count[DC_KV_C_WRITE_BYTES] == 60 * BPT, "write bytes");
	T_CHECK(r->count[DC_KV_C_MT_HITS] == 1, "multi-turn hits");
	T_CHECK(r->count[DC_KV_C_TOKENS] == 64 + 32 + 5, "tokens");
	if (storage) {
		T_CHECK(r->count[DC_KV_C_STORAGE_READ_BYTES] == rb, "storage read bytes");
		T_CHECK(r->count[DC_KV_C_STORAGE_WRITE_BYTES] == 60 * BPT, "storage write bytes");
		T_CHECK(r->hist[DC_KV_H_STORAGE_READ].count == 6, "read samples");
		T_CHECK(r->hist[DC_KV_H_STORAGE_WRITE].count == 3, "write samples");
		T_CHECK(r->storage_entries == 3, "entries");
	}
}

static void clean(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char p[512];

	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.') {
			snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
			unlink(p);
		}
	if (d)
		closedir(d);
}

int main(void)
{
	char dir[] = "/tmp/dlio_t_kvXXXXXX";
	struct dc_kv_config c;
	struct dc_kv_store_cfg sc;
	static struct dc_kv_result r;
	char why[256];
	int ret;

	if (!mkdtemp(dir))
		return T_EXIT_FAIL;
	plan();

	/* null store: the decisions only */
	config(&c, &sc, dir, &dc_kv_store_null, 0);
	ret = dc_kv_run(&c, &r);
	T_CHECK(ret == 0, "null run %d", ret);
	check_counts(&r, 1);

	/* compat: files of 128 + bytes, a valid header, every block different */
	config(&c, &sc, dir, &dc_kv_store_file, 0);
	ret = dc_kv_run(&c, &r);
	T_CHECK(ret == 0, "compat run %d (%s)", ret, r.why);
	check_counts(&r, 1);
	T_CHECK(file_size(dir, "kv_00000000.npy") == 128 + 10 * BPT, "size 0");
	T_CHECK(file_size(dir, "kv_00000002.npy") == 128 + 30 * BPT, "size 2");
	T_CHECK(r.store.fsyncs == 3 && r.store.fadvises == 6, "fsyncs %llu fadvises %llu",
		(unsigned long long)r.store.fsyncs, (unsigned long long)r.store.fadvises);
	T_CHECK(r.store.drop_checks == 6 && r.store.drop_resident == 0,
		"drop checks %llu, resident %llu", (unsigned long long)r.store.drop_checks,
		(unsigned long long)r.store.drop_resident);
	T_CHECK(r.store.split_writes == 2, "entries over the 128 KiB staging: %llu",
		(unsigned long long)r.store.split_writes);
	check_unique(dir, 3, 128);
	clean(dir);

	/* storage full: 50 tokens' room, so the prefill-only entry (30) evicts the LRU ones */
	config(&c, &sc, dir, &dc_kv_store_file, 0);
	c.storage_bytes = 50 * BPT;
	ret = dc_kv_run(&c, &r);
	T_CHECK(ret == 0, "evict run %d", ret);
	T_CHECK(r.count[DC_KV_C_DELETES] >= 1, "deletes %llu",
		(unsigned long long)r.count[DC_KV_C_DELETES]);
	T_CHECK(file_size(dir, "kv_00000000.npy") == 0, "entry 0 deleted");
	T_CHECK(file_size(dir, "kv_00000002.npy") == 128 + 30 * BPT, "entry 2 kept");
	clean(dir);

	/* RAM tier of 35 tokens (target 28): entry 1 (20) pushes entry 0 (10) down to storage, entry 2
	 * (30) entry 1; then the tier is empty and takes entry 2 (the reference's near-empty rule) */
	config(&c, &sc, dir, &dc_kv_store_file, 0);
	c.cpu_bytes = 35 * BPT;
	ret = dc_kv_run(&c, &r);
	T_CHECK(ret == 0, "ram run %d", ret);
	T_CHECK(r.count[DC_KV_C_DEMOTIONS] == 2, "demotions %llu",
		(unsigned long long)r.count[DC_KV_C_DEMOTIONS]);
	T_CHECK(r.count[DC_KV_C_CPU_WRITE_BYTES] == 60 * BPT, "RAM writes");
	T_CHECK(file_size(dir, "kv_00000000.npy") == 128 + 10 * BPT, "entry 0 demoted");
	T_CHECK(r.hist[DC_KV_H_DEMOTE_WRITE].count == r.count[DC_KV_C_DEMOTIONS], "demote samples");
	clean(dir);

	/* direct: 4 KiB header, payload block aligned; skipped where io_uring or O_DIRECT is not */
	config(&c, &sc, dir, &dc_kv_store_file, 1);
	if (dc_kv_store_check(&dc_kv_store_file, &sc, why, sizeof(why)) < 0) {
		printf("direct mode skipped: %s\n", why);
	} else {
		ret = dc_kv_run(&c, &r);
		T_CHECK(ret == 0, "direct run %d (%s)", ret, r.why);
		check_counts(&r, 1);
		T_CHECK(file_size(dir, "kv_00000001.npy") == 4096 + 20 * BPT, "direct size");
		check_unique(dir, 3, 4096);
		clean(dir);
	}
	rmdir(dir);
	return t_exit();
}
