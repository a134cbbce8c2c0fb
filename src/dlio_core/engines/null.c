/* null: moves no bytes, for testing the runner and measuring the harness itself (fio's null, IOR's
 * DUMMY). Options: a busy-wait per request (deterministic latency) and fault injection on the
 * fail_nth request of the instance (an errno, or a short read when fail_errno == -1).
 * It never touches the paths, so it runs without any dataset.
 */
#include <errno.h>
#include <stdlib.h>

#include "../core_int.h"
#include "engines.h"
#include "dlio_core/compute.h"

struct dc_engine {
	uint64_t count; /* requests seen by this instance */
	uint64_t delay_ns;
	uint64_t fail_nth;
	int fail_errno;
};

static int null_available(char *why, size_t whylen)
{
	(void)why;
	(void)whylen;
	return 0;
}

static int null_init(struct dc_engine **out, const struct dc_engine_opts *opts, struct dc_io *slots,
		     unsigned nslots)
{
	struct dc_engine *e = calloc(1, sizeof(*e));

	(void)slots;
	(void)nslots;
	if (!e)
		return -ENOMEM;
	e->delay_ns = opts->delay_ns;
	e->fail_nth = opts->fail_nth;
	e->fail_errno = opts->fail_errno ? opts->fail_errno : EIO;
	*out = e;
	return 0;
}

static void null_cleanup(struct dc_engine *e)
{
	free(e);
}

static int null_open(struct dc_engine *e, struct dc_file *f, int write)
{
	(void)e;
	(void)write;
	/* "Open" without a descriptor: fd 0 marks it open; nothing ever uses it. */
	f->fd = 0;
	f->map = NULL;
	f->size = 0;
	f->reg_index = -1;
	f->mem_align = 1;
	f->off_align = 1;
	return 0;
}

static int null_close(struct dc_engine *e, struct dc_file *f)
{
	(void)e;
	f->fd = -1;
	return 0;
}

static int null_submit(struct dc_engine *e, struct dc_io *io)
{
	io->buf_off = 0;
	/* Hybrid: a long delay sleeps and spins only its last 500 us, so an emulated slow storage (many
	 * probes of `dlio-fast maxacc --launcher model`) does not need a free CPU per reader thread to
	 * keep its latency; delays up to 500 us spin as before. */
	if (e->delay_ns)
		dc_compute(e->delay_ns, DC_COMPUTE_HYBRID);
	if (unlikely(++e->count == e->fail_nth)) {
		if (e->fail_errno == -1)
			io->res = (int64_t)(io->len / 2);
		else
			io->res = -(int64_t)e->fail_errno;
		return 1;
	}
	io->res = (int64_t)io->len;
	return 1;
}

DC_ENGINE_OPS(null, "null", DC_CAP_NOIO | DC_CAP_WRITE | DC_CAP_DIRECT, NULL);
