/* Private to the C core: helpers shared by the engines, the registry and the runner.
 * Nothing here is part of the public API (include/dlio_core/ is).
 */
#ifndef DLIO_CORE_INT_H
#define DLIO_CORE_INT_H
#include <errno.h>
#include <stdint.h>
#include <unistd.h>
#include "dlio_core/engine.h"
#include "dlio_core/hist.h"

#define likely(x)   __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

#define DC_BUF_ALIGN         4096u /* slot buffers: page aligned, enough for any O_DIRECT */
#define DC_DIO_DEFAULT_ALIGN 4096u /* when statx cannot tell */

/* hist.c's index math, inline for the runner's per-request path. */
static inline unsigned dc_hist_index_inline(uint64_t ns)
{
	unsigned msb, error_bits, idx;

	/* Below 2^(BITS+1) every value has its own bucket. */
	if (ns < (2u * DC_HIST_VAL))
		return (unsigned)ns;
	msb = 63u - (unsigned)__builtin_clzll(ns);
	error_bits = msb - DC_HIST_BITS;
	idx = ((error_bits + 1) << DC_HIST_BITS) +
	      (unsigned)((ns >> error_bits) & (DC_HIST_VAL - 1));
	/* Past 2^38 ns everything saturates into the last bucket (max/sum stay exact). */
	return idx < DC_HIST_NR - 1 ? idx : DC_HIST_NR - 1;
}

static inline void dc_hist_add_inline(struct dc_hist *h, uint64_t ns)
{
	double v = (double)ns;

	h->count++;
	if (unlikely(ns < h->min))
		h->min = ns;
	if (unlikely(ns > h->max))
		h->max = ns;
	h->sum += v;
	h->sumsq += v * v;
	h->bucket[dc_hist_index_inline(ns)]++;
}

/* fsutil.c: open and close for the fd-based engines (posix, io_uring, mmap). Fills fd, size and
 * the alignments; write opens O_RDWR|O_CREAT. 0 or -errno. */
int dc_fd_open(struct dc_file *f, int write);
int dc_fd_close(struct dc_file *f);

/* The one rule of every write-it-all loop (write, pwrite, pwritev) for what one call returned: w
 * bytes written (> 0), 0 when the call was interrupted (call again), or -errno; a call that wrote
 * nothing is -EIO, since calling again would spin. Inline: on the per-request write paths the
 * compiler folds the caller's own tests of the result into these. */
static inline ssize_t dc_wrote(ssize_t w)
{
	if (likely(w > 0))
		return w;
	if (w == 0)
		return -EIO;
	return errno == EINTR ? 0 : -errno;
}

/* Where dc_write_full writes with write() at the file position instead of pwrite(). */
#define DC_AT_POS (-1)

/* Write all len bytes of buf: with pwrite() at off, or with write() at the file position when off
 * is DC_AT_POS (a pipe, or the sequence of calls the KV-cache's compat mode copies). Short writes
 * go on where they stopped. *calls, where not NULL, counts the calls that wrote. 0 or -errno.
 * Inline: the posix engine and the KV-cache's compat put call it per request, with off's kind and
 * calls fixed at the call site, so neither costs a test. */
static inline int dc_write_full(int fd, const void *buf, uint64_t len, int64_t off, uint64_t *calls)
{
	const unsigned char *p = buf;

	while (len) {
		ssize_t w = dc_wrote(off < 0 ? write(fd, p, len) : pwrite(fd, p, len, (off_t)off));

		if (w < 0)
			return (int)w;
		if (w == 0)
			continue; /* interrupted */
		if (calls)
			(*calls)++;
		p += w;
		len -= (uint64_t)w;
		if (off >= 0)
			off += w;
	}
	return 0;
}

/* Write all len bytes at off (dc_write_full with pwrite). 0 or -errno. */
static inline int dc_pwrite_full(int fd, const void *buf, uint64_t len, uint64_t off)
{
	return dc_write_full(fd, buf, len, (int64_t)off, NULL);
}

/* Capacity of io->buf: the runner sets cap; 0 means the header's promise, len + 2 * off_align. */
static inline uint64_t dc_io_cap(const struct dc_io *io)
{
	return io->cap ? io->cap : io->len + 2ull * io->file->off_align;
}

/* Where a read of a buffered file lands in io->buf: dc_buffered_land() when the buffer has the
 * room, else its start; O_DIRECT reads (off_align > 1) land at the start. */
static inline uint32_t dc_read_land(const struct dc_io *io)
{
	return io->file->off_align <= 1 && dc_io_cap(io) >= io->len + DC_BUFFERED_LAND
		       ? dc_buffered_land()
		       : 0;
}

/* Where a read really goes. O_DIRECT wants offset and length aligned to off_align, so we read the
 * aligned superset [start, start + total) into the buffer's start and the wanted bytes begin skip
 * bytes in. A buffered file (off_align 1) reads [offset, offset + len) to dc_buffered_land() bytes
 * in, when the buffer has the room. */
struct dc_span {
	uint64_t start; /* file offset of the read */
	uint64_t total; /* its length */
	uint64_t need;  /* bytes that must arrive for the request to succeed */
	uint32_t land;  /* the read's bytes go to buf + land */
	uint32_t skip;  /* the wanted bytes start at buf + skip (io->buf_off) */
};

static inline void dc_dio_span(const struct dc_io *io, struct dc_span *s)
{
	uint64_t a = io->file->off_align;

	if (a <= 1) {
		s->start = io->offset;
		s->total = io->len;
		s->land = dc_read_land(io);
		s->skip = s->land;
		s->need = io->len;
	} else {
		uint64_t end = io->offset + io->len;

		s->start = io->offset - io->offset % a;
		end += (a - end % a) % a;
		s->total = end - s->start;
		s->land = 0;
		s->skip = (uint32_t)(io->offset - s->start);
		s->need = s->skip + io->len;
	}
}

#endif
