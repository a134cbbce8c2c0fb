/* posix: pread/pwrite through libc (so LD_PRELOAD profilers such as Darshan see them), buffered
 * or O_DIRECT. Synchronous: every request completes inside submit().
 *
 * O_DIRECT wants the file offset and length aligned (statx STATX_DIOALIGN, else 4096). A read at
 * an unaligned offset or of an unaligned length reads the aligned superset into the slot buffer
 * (capacity len + 2 * off_align) and reports where the wanted bytes start in io->buf_off, so the
 * bytes are really read and nothing is copied. A buffered read lands dc_buffered_land() bytes into
 * the buffer (engine.h: the page cache's copy is slower into a cache-line-aligned destination).
 * Writes must be aligned under O_DIRECT (-EINVAL otherwise): the planner aligns them, and a
 * read-modify-write would measure something else.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "../core_int.h"
#include "engines.h"

struct dc_engine {
	unsigned long reqs; /* only so the instance is not empty */
};

static int posix_available(char *why, size_t whylen)
{
	(void)why;
	(void)whylen;
	return 0;
}

static int posix_init(struct dc_engine **out, const struct dc_engine_opts *opts,
		      struct dc_io *slots, unsigned nslots)
{
	(void)opts;
	(void)slots;
	(void)nslots;
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

static void posix_cleanup(struct dc_engine *e)
{
	free(e);
}

static int posix_open(struct dc_engine *e, struct dc_file *f, int write)
{
	(void)e;
	return dc_fd_open(f, write);
}

static int posix_close(struct dc_engine *e, struct dc_file *f)
{
	(void)e;
	return dc_fd_close(f);
}

/* pread until want bytes are in, EOF, or an error. Returns bytes read or -errno. Under O_DIRECT
 * a short read that ends off the alignment can only be the end of the file (the next pread at that
 * offset would be refused), so it ends the loop like EOF does. */
static int64_t read_full(const struct dc_file *f, char *buf, uint64_t want, uint64_t off)
{
	uint64_t done = 0;

	while (done < want) {
		ssize_t r = pread(f->fd, buf + done, want - done, (off_t)(off + done));

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			break;
		done += (uint64_t)r;
		if (f->off_align > 1 && done % f->off_align)
			break;
	}
	return (int64_t)done;
}

static int64_t posix_read(struct dc_io *io)
{
	struct dc_span s;
	int64_t got;

	dc_dio_span(io, &s);
	io->buf_off = s.skip;
	if (unlikely(s.land + s.total > dc_io_cap(io)))
		return -EINVAL;
	got = read_full(io->file, (char *)io->buf + s.land, s.total, s.start);
	if (got < 0)
		return got;
	/* Short at the end of the file is fine as long as the wanted bytes arrived (the aligned
	 * superset of a tail may reach past EOF). */
	if ((uint64_t)got < s.need)
		return -ENODATA;
	return (int64_t)io->len;
}

static int64_t posix_write(struct dc_io *io)
{
	const struct dc_file *f = io->file;

	io->buf_off = 0;
	if (f->off_align > 1 && (io->offset % f->off_align || io->len % f->off_align))
		return -EINVAL;
	int rc = dc_pwrite_full(f->fd, io->buf, io->len, io->offset);
	return rc ? rc : (int64_t)io->len;
}

static int posix_submit(struct dc_engine *e, struct dc_io *io)
{
	(void)e;
	io->res = io->op == DC_OP_WRITE ? posix_write(io) : posix_read(io);
	return 1;
}

DC_ENGINE_OPS(posix, "posix", DC_CAP_DIRECT | DC_CAP_WRITE, NULL);
