/* posix engine: buffered and O_DIRECT reads at aligned and unaligned offsets/sizes (including an
 * unaligned tail) checked byte for byte, writes, EOF, and dc_run_io counts. */
#include "t_helpers.h"

#define FSIZE ((1u << 20) + 1234) /* unaligned size: the tail is partial */

/* Write aligned blocks through the engine, read them back with pread. */
static int write_check(const char *dir, int direct)
{
	const struct dc_engine_ops *ops = dc_engine_find("posix");
	struct dc_engine_opts eo = { .qd = 1 };
	struct dc_file f = { .fd = -1, .direct = direct, .reg_index = -1 };
	struct dc_engine *e;
	struct dc_io io;
	char path[256];
	unsigned char *want = t_aligned_alloc(4096, 65536), *got = t_aligned_alloc(4096, 65536);
	int bad = 0, fd;

	snprintf(path, sizeof(path), "%s/dlio_t_%d_write", dir, (int)getpid());
	f.path = path;
	memset(&io, 0, sizeof(io));
	io.buf = want;
	io.cap = 65536;
	dc_fill_random(want, 65536, 42);
	if (ops->init(&e, &eo, &io, 1) || ops->open(e, &f, 1)) {
		fprintf(stderr, "write_check: open %s failed\n", path);
		bad = 1;
		goto out;
	}
	io.file = &f;
	io.op = DC_OP_WRITE;
	io.offset = 8192;
	io.len = 65536;
	T_CHECK(ops->submit(e, &io) == 1 && io.res == 65536, "write res %lld", (long long)io.res);
	if (direct) { /* unaligned O_DIRECT writes are refused, not half done */
		io.offset = 100;
		T_CHECK(ops->submit(e, &io) == 1 && io.res == -EINVAL,
			"unaligned direct write res %lld", (long long)io.res);
	}
	ops->close(e, &f);
	ops->cleanup(e);
	fd = open(path, O_RDONLY);
	T_CHECK(fd >= 0 && pread(fd, got, 65536, 8192) == 65536, "read back");
	T_CHECK(!memcmp(want, got, 65536), "written data differs (direct=%d)", direct);
	if (fd >= 0)
		close(fd);
out:
	unlink(path);
	free(want);
	free(got);
	return bad;
}

/* A buffered read lands dc_buffered_land() bytes into its buffer when the buffer has the room (0 or
 * DC_BUFFERED_LAND, whichever this CPU copies faster into), else at its start. */
static int landing_check(const char *path, const unsigned char *expect)
{
	const struct dc_engine_ops *ops = dc_engine_find("posix");
	struct dc_engine_opts eo = { .qd = 1 };
	struct dc_file f = { .path = path, .fd = -1, .direct = 0, .reg_index = -1 };
	unsigned char *buf = t_aligned_alloc(4096, 65536);
	struct dc_engine *e;
	struct dc_io io;
	int bad = 0;

	memset(&io, 0, sizeof(io));
	io.buf = buf;
	if (ops->init(&e, &eo, &io, 1) || ops->open(e, &f, 0)) {
		free(buf);
		return 1;
	}
	io.file = &f;
	io.op = DC_OP_READ;
	io.offset = 4096;
	io.len = 8192;
	for (int tight = 0; tight <= 1; tight++) {
		uint32_t want_off = tight ? 0 : dc_buffered_land();

		io.cap = tight ? 8192 : 65536;
		memset(buf, 0xa5, 65536);
		T_CHECK(ops->submit(e, &io) == 1 && io.res == 8192, "landing read res %lld",
			(long long)io.res);
		T_CHECK(io.buf_off == want_off, "buffered read landed at %u, not %u (cap %llu)",
			io.buf_off, want_off, (unsigned long long)io.cap);
		T_CHECK(!memcmp(buf + io.buf_off, expect + 4096, 8192), "landed bytes differ");
		bad |= io.buf_off != want_off;
	}
	ops->close(e, &f);
	ops->cleanup(e);
	free(buf);
	return bad;
}

static void run_dir(const char *dir)
{
	const struct dc_engine_ops *ops = dc_engine_find("posix");
	struct dc_engine_opts eo = { .qd = 1 };
	struct t_range rg[300];
	char path[256], label[128];
	unsigned n;
	unsigned char *expect;
	int direct_ok;

	if (t_create_file(dir, "posix", FSIZE, 7, path, sizeof(path))) {
		printf("skip %s: cannot create a test file\n", dir);
		return;
	}
	expect = t_expected(FSIZE, 7);
	{
		uint32_t mem = 0, off = 0;
		int from = -1;

		T_CHECK(dc_dio_align(path, &mem, &off, &from) == 0 && mem && off, "dio_align %s",
			path);
		printf("%s: O_DIRECT alignment mem %u offset %u (%s)\n", dir, mem, off,
		       from ? "statx STATX_DIOALIGN" : "default");
		T_CHECK(dc_dio_align("/nonexistent/x", &mem, &off, &from) == -ENOENT,
			"dio_align ENOENT");
		const char *both[] = { path, "/nonexistent/x" };
		size_t failed = 0;

		T_CHECK(dc_drop_files_cache(both, 1, 0, NULL) == 0, "drop_files_cache %s", path);
		T_CHECK(dc_drop_files_cache(both, 1, 1, NULL) == 0, "drop_files_cache durable %s",
			path);
		T_CHECK(dc_drop_files_cache(both, 2, 0, &failed) == -ENOENT && failed == 1,
			"drop_files_cache ENOENT names the second file");
	}
	T_CHECK(!landing_check(path, expect), "landing %s", dir);
	n = t_standard_ranges(rg, 300, FSIZE, 99);
	direct_ok = t_direct_ok(path);
	for (int direct = 0; direct <= direct_ok; direct++) {
		for (unsigned qd = 1; qd <= 64; qd *= 64) {
			snprintf(label, sizeof(label), "posix %s direct=%d qd=%u", dir, direct, qd);
			eo.qd = qd;
			T_CHECK(!t_engine_read_check(ops, &eo, path, direct, expect, rg, n, qd,
						     label),
				"%s", label);
			T_CHECK(!t_run_io_check("posix", path, rg, n, 1, qd, direct, 0, label),
				"%s", label);
			T_CHECK(!t_run_io_check("posix", path, rg, n, 2, qd, direct, 0, label),
				"%s", label);
		}
		for (unsigned readers = 0; readers <= 2; readers++) {
			snprintf(label, sizeof(label), "posix %s direct=%d train readers=%u", dir,
				 direct, readers);
			T_CHECK(!t_run_train_check("posix", path, FSIZE, readers, 1, direct, 0,
						   label),
				"%s", label);
		}
		snprintf(label, sizeof(label), "posix %s direct=%d EOF", dir, direct);
		T_CHECK(!t_engine_expect_err(ops, &eo, path, direct, FSIZE - 10, 100, ENODATA,
					     label),
			"%s", label);
		T_CHECK(!t_engine_expect_err(ops, &eo, path, direct, FSIZE + 8192, 4096, ENODATA,
					     label),
			"%s", label);
		T_CHECK(!t_run_io_eof("posix", path, FSIZE, direct, label), "%s", label);
		T_CHECK(!write_check(dir, direct), "write %s direct=%d", dir, direct);
	}
	free(expect);
	unlink(path);
}

int main(void)
{
	char why[256];

	T_CHECK(dc_engine_available("posix", why, sizeof(why)) == 0, "posix available: %s", why);
	run_dir("/tmp");
	run_dir("/dev/shm");
	return t_exit();
}
