/* The KV file store's direct mode: each object is a .npy file with a 4 KiB header (numpy accepts
 * any header length that is a multiple of 64), so the payload starts block aligned; it is moved
 * with O_DIRECT in `chunk`-byte transfers, `qd` in flight per worker through the worker's own
 * io_uring ring (uring_ring.c). A write ends with fsync (the device's cache flushed, as compat's
 * fsync does); its device time is the transfers and the fsync, its host time the open. The
 * page cache never sees these bytes, so the figures are the device's.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core_int.h"
#include "dlio_core/engine.h"
#include "dlio_core/timer.h"
#include "../engines/engines.h"
#include "kv_file.h"

#ifdef DC_URING

/* One transfer in flight. */
struct kv_xfer {
	unsigned char *buf;
	uint64_t off; /* file offset */
	uint64_t len;
	uint64_t done;
	int piece; /* the staging piece it uses, -1 if none */
};

struct kv_direct {
	struct kv_xfer *x; /* qd + 1 (the header rides along) */
	int *free_x;
	unsigned nfree_x;
	int *free_piece;
	unsigned nfree_piece;
};

static uint64_t round_up(uint64_t x, uint64_t a)
{
	return (x + a - 1) / a * a;
}

int kv_direct_check(const char *dir, char *why, size_t whylen)
{
	char path[PATH_MAX];
	void *blk;
	int fd, ret = dc_engine_available("io_uring", why, whylen);

	if (ret < 0)
		return ret; /* why says what refused it (seccomp, io_uring_disabled, the kernel) */
	if (snprintf(path, sizeof(path), "%s/.dlio-kv-direct-%d", dir, (int)getpid()) >=
	    (int)sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_DIRECT | O_CLOEXEC, 0600);
	if (fd < 0) {
		ret = -errno;
		snprintf(
			why, whylen,
			"%s: O_DIRECT refused (%s): this filesystem has no direct I/O (tmpfs?); use "
			"kvcache.io_mode=compat",
			dir, strerror(-ret));
		return ret;
	}
	if (posix_memalign(&blk, 4096, 4096) == 0) {
		memset(blk, 0, 4096);
		if (pwrite(fd, blk, 4096, 0) != 4096) {
			ret = -errno;
			snprintf(why, whylen,
				 "%s: an aligned 4 KiB O_DIRECT write failed (%s); use "
				 "kvcache.io_mode=compat",
				 dir, strerror(-ret));
		}
		free(blk);
	}
	close(fd);
	unlink(path);
	return ret;
}

int kv_direct_worker_open(struct dc_kv_worker *w)
{
	static const unsigned tries[] = { IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
					  IORING_SETUP_COOP_TASKRUN, 0 };
	unsigned qd = w->s->cfg.qd, entries = 1, pieces;
	struct kv_direct *d;
	int ret = -EINVAL;

	while (entries < qd + 1)
		entries <<= 1;
	/* Setup flags best first, dropped when the kernel does not know them. */
	for (unsigned i = 0; i < sizeof(tries) / sizeof(tries[0]); i++) {
		struct io_uring_params p;

		memset(&p, 0, sizeof(p));
		p.flags = tries[i];
		ret = dc_ring_init(&w->ring, entries, &p);
		if (ret != -EINVAL)
			break;
	}
	if (ret < 0)
		return ret;
	w->ring_ok = 1;
	pieces = qd; /* staging pieces per allocation slot: stage_bytes / chunk, at least qd */
	d = calloc(1, sizeof(*d));
	if (d) {
		d->x = calloc(qd + 1, sizeof(*d->x));
		d->free_x = calloc(qd + 1, sizeof(*d->free_x));
		d->free_piece = calloc(pieces, sizeof(*d->free_piece));
	}
	if (!d || !d->x || !d->free_x || !d->free_piece) {
		if (d) {
			free(d->x);
			free(d->free_x);
			free(d->free_piece);
		}
		free(d);
		dc_ring_exit(&w->ring);
		w->ring_ok = 0;
		return -ENOMEM;
	}
	w->direct = d;
	return 0;
}

void kv_direct_worker_close(struct dc_kv_worker *w)
{
	struct kv_direct *d = w->direct;

	if (w->ring_ok)
		dc_ring_exit(&w->ring);
	w->ring_ok = 0;
	if (d) {
		free(d->x);
		free(d->free_x);
		free(d->free_piece);
		free(d);
	}
	w->direct = NULL;
}

static void queue_xfer(struct dc_kv_worker *w, int fd, int write, int i)
{
	struct kv_xfer *x = &w->direct->x[i];
	struct io_uring_sqe *sqe;

	while (!(sqe = dc_ring_get_sqe(&w->ring)))
		dc_ring_submit_and_wait(&w->ring, 0);
	sqe->opcode = write ? DC_IORING_OP_WRITE : DC_IORING_OP_READ;
	sqe->fd = fd;
	sqe->off = x->off + x->done;
	sqe->addr = (uint64_t)(uintptr_t)(x->buf + x->done);
	sqe->len = (uint32_t)(x->len - x->done);
	sqe->user_data = (uint64_t)i;
}

/* Reap at least one completion. Returns the transfer index finished (>= 0), -EAGAIN when the
 * completion only requeued a short transfer, or -errno. *got: bytes of a finished read. */
static int reap_one(struct dc_kv_worker *w, int fd, int write, uint64_t eof, uint64_t *got)
{
	struct io_uring_cqe *cqe;
	struct kv_xfer *x;
	unsigned head;
	int i, res, ret;

	for (;;) {
		head = dc_ring_cq_head(&w->ring);
		cqe = dc_ring_cqe_at(&w->ring, head);
		if (cqe)
			break;
		ret = dc_ring_submit_and_wait(&w->ring, 1);
		if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY)
			return ret;
	}
	i = (int)cqe->user_data;
	res = cqe->res;
	dc_ring_cq_advance(&w->ring, 1);
	x = &w->direct->x[i];
	if (res == -EAGAIN || res == -EINTR) {
		queue_xfer(w, fd, write, i);
		return -EAGAIN;
	}
	if (res < 0)
		return res;
	x->done += (uint64_t)res;
	if (x->done < x->len && res > 0 && x->off + x->done < eof) {
		queue_xfer(w, fd, write, i); /* short: the rest */
		return -EAGAIN;
	}
	if (write && x->done < x->len)
		return -EIO;
	*got = x->done;
	return i;
}

/* Move [0, end) of the file in chunk transfers, up to qd in flight (plus the header block first,
 * for a write). Writes take their bytes from src (staging pieces refilled as they free, or the
 * RAM copy); reads land in the worker's part of the sink. Returns bytes moved or -errno. */
static int64_t transfer(struct dc_kv_worker *w, int fd, int write, const struct dc_kv_obj *o,
			const struct dc_kv_src *src, uint64_t end, uint64_t eof)
{
	struct kv_direct *d = w->direct;
	uint64_t chunk = w->s->cfg.chunk, next = 0, moved = 0, seed = w->s->cfg.seed;
	unsigned qd = w->s->cfg.qd, inflight = 0, npieces = 0;
	int ret = 0;

	d->nfree_x = 0;
	for (unsigned i = 0; i <= qd; i++)
		d->free_x[d->nfree_x++] = (int)(qd - i);
	d->nfree_piece = 0;
	if (write && !src->whole) {
		npieces = (unsigned)(src->len / chunk);
		npieces = npieces < qd ? npieces : qd;
		for (unsigned p = 0; p < npieces; p++)
			d->free_piece[d->nfree_piece++] = (int)p;
	}
	if (write) { /* the header block, from w->blk */
		int i = d->free_x[--d->nfree_x];

		d->x[i] = (struct kv_xfer){ w->blk, 0, KV_DIRECT_HDR, 0, -1 };
		queue_xfer(w, fd, 1, i);
		inflight++;
		next = KV_DIRECT_HDR;
	}
	while ((next < end || inflight) && ret == 0) {
		while (next < end && inflight < qd + (write ? 1u : 0u) && d->nfree_x &&
		       (!write || src->whole || d->nfree_piece)) {
			int i = d->free_x[--d->nfree_x], piece = -1;
			uint64_t n = end - next < chunk ? end - next : chunk;
			unsigned char *buf;

			if (!write) {
				buf = w->dst + (uint64_t)i * chunk;
			} else if (src->whole) {
				buf = (unsigned char *)src->buf + (next - KV_DIRECT_HDR);
			} else {
				piece = d->free_piece[--d->nfree_piece];
				buf = (unsigned char *)src->buf + (uint64_t)piece * chunk;
			}
			if (write) {
				uint64_t poff = next - KV_DIRECT_HDR;
				uint64_t real = poff < o->bytes ? o->bytes - poff : 0;

				dc_kv_stamp(o, seed, KV_DIRECT_HDR, poff, buf, real < n ? real : n);
			}
			d->x[i] = (struct kv_xfer){ buf, next, n, 0, piece };
			queue_xfer(w, fd, write, i);
			inflight++;
			next += n;
		}
		dc_ring_submit_and_wait(&w->ring, 0);
		{
			uint64_t got = 0;
			int i = reap_one(w, fd, write, eof, &got);

			if (i == -EAGAIN)
				continue;
			if (i < 0) {
				ret = i;
				break;
			}
			moved += got;
			inflight--;
			if (d->x[i].piece >= 0)
				d->free_piece[d->nfree_piece++] = d->x[i].piece;
			d->free_x[d->nfree_x++] = i;
		}
	}
	while (ret < 0 && inflight) { /* drain what is in flight before the buffers are reused */
		uint64_t got;
		int i = reap_one(w, fd, write, eof, &got);

		if (i != -EAGAIN)
			inflight--;
	}
	return ret < 0 ? ret : (int64_t)moved;
}

int kv_direct_put(struct dc_kv_worker *w, const struct dc_kv_obj *o, const struct dc_kv_src *src,
		  struct dc_kv_timing *t)
{
	uint64_t size = KV_DIRECT_HDR + o->bytes, t0, t1, t2;
	int64_t n;
	int fd, ret = dc_kv_npy_header(&w->s->cfg.model, o, KV_DIRECT_HDR, (char *)w->blk);

	if (ret == 0)
		ret = kv_file_path(w, o);
	if (ret < 0)
		return ret;
	if (!src->whole && src->len < w->s->cfg.chunk)
		return -EINVAL;
	t0 = dc_now_ns();
	fd = openat(w->s->dirfd, w->name, KV_CREATE | O_DIRECT, 0666);
	if (fd < 0)
		return -errno;
	t1 = dc_now_ns();
	n = transfer(w, fd, 1, o, src, round_up(size, 4096), UINT64_MAX);
	ret = n < 0 ? (int)n : 0;
	/* The last block went out whole: cut the file to the payload's end. */
	if (ret == 0 && size % 4096 && ftruncate(fd, (off_t)size) < 0)
		ret = -errno;
	if (ret == 0) {
		uint64_t f0 = dc_now_ns();

		if (fsync(fd) < 0) {
			ret = -errno;
		} else {
			w->st.fsyncs++;
			w->st.fsync_ns += dc_now_ns() - f0;
		}
	}
	t2 = dc_now_ns();
	close(fd);
	w->st.syscall_writes++;
	t->host_ns = t1 - t0;
	t->device_ns = t2 - t1;
	return ret;
}

int kv_direct_get(struct dc_kv_worker *w, const struct dc_kv_obj *o, struct dc_kv_timing *t)
{
	uint64_t size = KV_DIRECT_HDR + o->bytes, t0, t1, t2;
	struct dc_kv_src none = { NULL, 0, 0 };
	int64_t n;
	int fd, ret = kv_file_path(w, o);

	if (ret < 0)
		return ret;
	t0 = dc_now_ns();
	fd = openat(w->s->dirfd, w->name, O_RDONLY | O_NOFOLLOW | O_DIRECT | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	t1 = dc_now_ns();
	n = transfer(w, fd, 0, o, &none, round_up(size, 4096), size);
	ret = n < 0 ? (int)n : (uint64_t)n != size ? -ENODATA : 0;
	t2 = dc_now_ns();
	close(fd);
	t->host_ns = t1 - t0;
	t->device_ns = t2 - t1;
	return ret;
}

#else /* built without io_uring */

int kv_direct_check(const char *dir, char *why, size_t whylen)
{
	(void)dir;
	snprintf(why, whylen,
		 "built without io_uring (DLIO_FAST_NO_URING); use kvcache.io_mode=compat");
	return -EOPNOTSUPP;
}

int kv_direct_worker_open(struct dc_kv_worker *w)
{
	(void)w;
	return -EOPNOTSUPP;
}

void kv_direct_worker_close(struct dc_kv_worker *w)
{
	(void)w;
}

int kv_direct_put(struct dc_kv_worker *w, const struct dc_kv_obj *o, const struct dc_kv_src *src,
		  struct dc_kv_timing *t)
{
	(void)w;
	(void)o;
	(void)src;
	(void)t;
	return -EOPNOTSUPP;
}

int kv_direct_get(struct dc_kv_worker *w, const struct dc_kv_obj *o, struct dc_kv_timing *t)
{
	(void)w;
	(void)o;
	(void)t;
	return -EOPNOTSUPP;
}

#endif
