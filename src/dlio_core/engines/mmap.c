/* mmap: map the whole file and touch every page of each request, as frameworks that mmap their
 * data (numpy mmap_mode, LMDB) pay for it: page faults and readahead, no copy. Reads only.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "../core_int.h"
#include "engines.h"

#define DC_MMAP_PAGE 4096u

struct dc_engine {
	/* The touched bytes go here so that the loads cannot be optimised out. */
	volatile uint64_t sink;
};

static int mmap_available(char *why, size_t whylen)
{
	(void)why;
	(void)whylen;
	return 0;
}

static int mmap_init(struct dc_engine **out, const struct dc_engine_opts *opts, struct dc_io *slots,
		     unsigned nslots)
{
	(void)opts;
	(void)slots;
	(void)nslots;
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

static void mmap_cleanup(struct dc_engine *e)
{
	free(e);
}

static int mmap_open(struct dc_engine *e, struct dc_file *f, int write)
{
	int ret;

	(void)e;
	if (write || f->direct)
		return -EOPNOTSUPP;
	ret = dc_fd_open(f, 0);
	if (ret < 0)
		return ret;
	f->map = NULL;
	if (f->size) {
		void *p = mmap(NULL, (size_t)f->size, PROT_READ, MAP_SHARED, f->fd, 0);

		if (p == MAP_FAILED) {
			ret = -errno;
			dc_fd_close(f);
			return ret;
		}
		f->map = p;
	}
	return 0;
}

static int mmap_close(struct dc_engine *e, struct dc_file *f)
{
	int ret = 0, r;

	(void)e;
	if (f->map && munmap(f->map, (size_t)f->size) < 0)
		ret = -errno;
	f->map = NULL;
	r = dc_fd_close(f);
	return ret ? ret : r;
}

static int mmap_submit(struct dc_engine *e, struct dc_io *io)
{
	const struct dc_file *f = io->file;
	const volatile unsigned char *p, *end;
	uint64_t acc = 0;

	io->buf_off = 0;
	if (io->op != DC_OP_READ) {
		io->res = -EOPNOTSUPP;
		return 1;
	}
	if (io->offset > f->size || io->len > f->size - io->offset) {
		io->res = -ENODATA;
		return 1;
	}
	if (!io->len) {
		io->res = 0;
		return 1;
	}
	p = (const unsigned char *)f->map + io->offset;
	end = p + io->len;
	/* One load per page faults each page in; the last byte covers a partial tail page. */
	for (; p < end; p += DC_MMAP_PAGE)
		acc += *p;
	acc += end[-1];
	e->sink += acc;
	io->res = (int64_t)io->len;
	return 1;
}

const struct dc_engine_ops dc_mmap_ops = {
	.name = "mmap",
	.caps = 0,
	.available = mmap_available,
	.init = mmap_init,
	.open = mmap_open,
	.close = mmap_close,
	.submit = mmap_submit,
	.reap = NULL,
	.cleanup = mmap_cleanup,
};
