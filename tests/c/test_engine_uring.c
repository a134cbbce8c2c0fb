/* io_uring engine: the posix checks at qd 1 and 64, with registered buffers and files on and off.
 * Skips (77) when io_uring is not compiled in or refused here. */
#include "t_helpers.h"

#define FSIZE ((1u << 20) + 1234)

static void run_dir(const char *dir)
{
	const struct dc_engine_ops *ops = dc_engine_find("io_uring");
	struct t_range rg[400];
	char path[256], label[160];
	unsigned char *expect;
	unsigned n;
	int direct_ok;

	if (t_create_file(dir, "uring", FSIZE, 11, path, sizeof(path))) {
		printf("skip %s: cannot create a test file\n", dir);
		return;
	}
	expect = t_expected(FSIZE, 11);
	n = t_standard_ranges(rg, 400, FSIZE, 1234);
	direct_ok = t_direct_ok(path);
	for (int direct = 0; direct <= direct_ok; direct++) {
		for (unsigned flags = 0; flags < 4; flags++) {
			for (unsigned qd = 1; qd <= 64; qd *= 64) {
				struct dc_engine_opts eo = { .qd = qd, .flags = flags };

				snprintf(label, sizeof(label),
					 "io_uring %s direct=%d qd=%u regbufs=%d regfiles=%d", dir,
					 direct, qd, !!(flags & DC_ENG_REGBUFS),
					 !!(flags & DC_ENG_REGFILES));
				T_CHECK(!t_engine_read_check(ops, &eo, path, direct, expect, rg, n,
							     qd, label),
					"%s", label);
				if ((eo.used_flags & flags) != flags)
					printf("%s: kernel refused some of 0x%x (got 0x%x)\n",
					       label, flags, eo.used_flags);
				T_CHECK(!t_run_io_check("io_uring", path, rg, n, 2, qd, direct,
							flags, label),
					"%s", label);
			}
		}
		for (unsigned readers = 0; readers <= 2; readers++) {
			for (unsigned qd = 1; qd <= 16; qd *= 4) {
				snprintf(label, sizeof(label),
					 "io_uring %s direct=%d train readers=%u qd=%u", dir,
					 direct, readers, qd);
				T_CHECK(!t_run_train_check(
						"io_uring", path, FSIZE, readers, qd, direct,
						readers == 1 ? DC_ENG_REGBUFS | DC_ENG_REGFILES : 0,
						label),
					"%s", label);
			}
		}
		/* SQPOLL may need privileges; the engine falls back, the data must be right. */
		{
			struct dc_engine_opts eo = { .qd = 8,
						     .flags = DC_ENG_SQPOLL | DC_ENG_REGBUFS };

			snprintf(label, sizeof(label), "io_uring %s direct=%d sqpoll", dir, direct);
			T_CHECK(!t_engine_read_check(ops, &eo, path, direct, expect, rg, n, 8,
						     label),
				"%s", label);
			printf("%s: used flags 0x%x\n", label, eo.used_flags);
		}
		{
			struct dc_engine_opts eo = { .qd = 4 };

			snprintf(label, sizeof(label), "io_uring %s direct=%d EOF", dir, direct);
			T_CHECK(!t_engine_expect_err(ops, &eo, path, direct, FSIZE - 10, 100,
						     ENODATA, label),
				"%s", label);
			T_CHECK(!t_engine_expect_err(ops, &eo, path, direct, FSIZE + 8192, 4096,
						     ENODATA, label),
				"%s", label);
			T_CHECK(!t_run_io_eof("io_uring", path, FSIZE, direct, label), "%s", label);
		}
	}
	free(expect);
	unlink(path);
}

int main(void)
{
	char why[256];
	int ret = dc_engine_available("io_uring", why, sizeof(why));

	if (ret) {
		printf("skip: io_uring unavailable: %s\n", why);
		return T_EXIT_SKIP;
	}
	run_dir("/tmp");
	run_dir("/dev/shm");
	return t_exit();
}
