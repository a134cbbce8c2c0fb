/* mmap engine: every touched range is really mapped and within the file; EOF, writes and O_DIRECT
 * are refused. The data check reads the mapping through the same ops with our own copy. */
#include "t_helpers.h"

#define FSIZE ((1u << 20) + 1234)

int main(void)
{
	const struct dc_engine_ops *ops = dc_engine_find("mmap");
	struct dc_engine_opts eo = { .qd = 1 };
	struct t_range rg[200];
	struct dc_file f = { .fd = -1, .reg_index = -1 };
	struct dc_engine *e;
	struct dc_io io;
	char path[256];
	unsigned char *expect;
	unsigned n;

	if (!ops) {
		fprintf(stderr, "mmap engine not registered\n");
		return T_EXIT_FAIL;
	}
	T_CHECK(!(ops->caps & DC_CAP_WRITE), "mmap must not claim writes");
	if (t_create_file("/tmp", "mmap", FSIZE, 5, path, sizeof(path))) {
		printf("skip: cannot create a test file in /tmp\n");
		return T_EXIT_SKIP;
	}
	expect = t_expected(FSIZE, 5);
	n = t_standard_ranges(rg, 200, FSIZE, 77);

	/* The mapping holds the file's bytes, and each request succeeds over its range. */
	memset(&io, 0, sizeof(io));
	T_CHECK(ops->init(&e, &eo, &io, 1) == 0, "init");
	f.path = path;
	T_CHECK(ops->open(e, &f, 0) == 0 && f.map, "open/map");
	T_CHECK(f.size == FSIZE, "size %llu", (unsigned long long)f.size);
	T_CHECK(f.map && !memcmp(f.map, expect, FSIZE), "mapped content differs");
	io.file = &f;
	io.op = DC_OP_READ;
	for (unsigned i = 0; i < n; i++) {
		io.offset = rg[i].offset;
		io.len = rg[i].len;
		T_CHECK(ops->submit(e, &io) == 1 && io.res == (int64_t)rg[i].len,
			"range %llu+%llu res %lld", (unsigned long long)rg[i].offset,
			(unsigned long long)rg[i].len, (long long)io.res);
	}
	io.offset = FSIZE - 10;
	io.len = 100;
	T_CHECK(ops->submit(e, &io) == 1 && io.res == -ENODATA, "EOF res %lld", (long long)io.res);
	io.op = DC_OP_WRITE;
	io.offset = 0;
	T_CHECK(ops->submit(e, &io) == 1 && io.res < 0, "write must fail, res %lld",
		(long long)io.res);
	T_CHECK(ops->close(e, &f) == 0 && f.fd == -1 && !f.map, "close");
	f.direct = 1;
	T_CHECK(ops->open(e, &f, 0) == -EOPNOTSUPP, "direct open must be refused");
	ops->cleanup(e);

	T_CHECK(!t_run_io_check("mmap", path, rg, n, 1, 1, 0, 0, "mmap run"), "mmap dc_run_io");
	T_CHECK(!t_run_io_check("mmap", path, rg, n, 2, 8, 0, 0, "mmap run 2 threads"),
		"mmap 2 threads");
	T_CHECK(!t_run_io_eof("mmap", path, FSIZE, 0, "mmap"), "mmap EOF");
	{
		/* A plan that writes is refused before anything runs. */
		struct dc_op op = { .file = 0, .op = DC_OP_WRITE, .offset = 0, .length = 4096 };
		uint64_t first[2] = { 0, 1 };
		const char *paths[1] = { path };
		struct dc_run_config cfg = { .engine = "mmap",
					     .eng = { .qd = 1 },
					     .threads = 1,
					     .paths = paths,
					     .npaths = 1,
					     .ops = &op,
					     .nops = 1,
					     .max_len = 4096,
					     .thread_first_op = first };
		struct dc_run_result *res = calloc(1, sizeof(*res));

		T_CHECK(dc_run_io(&cfg, res) == -EOPNOTSUPP, "write plan on mmap: %s",
			res->error.what);
		free(res);
	}
	{
		/* A file truncated under its mapping: the touch past the new end fails with ENODATA
		 * (SIGBUS caught) and the process lives on; pages still in the file read fine. */
		char spath[256];

		if (t_create_file("/tmp", "mmap-shrink", 1 << 16, 9, spath, sizeof(spath)) == 0) {
			struct dc_file g = { .fd = -1, .reg_index = -1, .path = spath };

			memset(&io, 0, sizeof(io));
			T_CHECK(ops->init(&e, &eo, &io, 1) == 0, "init (shrink)");
			T_CHECK(ops->open(e, &g, 0) == 0 && g.map, "open/map (shrink)");
			T_CHECK(truncate(spath, 4096) == 0, "truncate");
			io.file = &g;
			io.op = DC_OP_READ;
			io.offset = 32768;
			io.len = 8192;
			T_CHECK(ops->submit(e, &io) == 1 && io.res == -ENODATA,
				"touch past a shrunk end: res %lld", (long long)io.res);
			io.offset = 0;
			io.len = 4096;
			T_CHECK(ops->submit(e, &io) == 1 && io.res == 4096,
				"touch within: res %lld", (long long)io.res);
			io.offset = 40960;
			io.len = 100;
			T_CHECK(ops->submit(e, &io) == 1 && io.res == -ENODATA,
				"a second fault is caught too: res %lld", (long long)io.res);
			T_CHECK(ops->close(e, &g) == 0, "close (shrink)");
			ops->cleanup(e);
			unlink(spath);
		}
	}
	free(expect);
	unlink(path);
	return t_exit();
}
