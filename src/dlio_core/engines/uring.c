/* io_uring through liburing: up to qd requests in flight per thread, batched submission,
 * optional registered (fixed) buffers and files, SQPOLL on request.
 *
 * submit() only prepares an SQE in the slot's name (user_data = the slot); the SQEs go to the
 * kernel in one io_uring_enter from reap(), which the runner calls once it has filled the queue
 * (fio's prep/commit split). Ring setup asks for the best flags first and drops them on -EINVAL,
 * so one binary runs on old and new kernels; what the kernel accepted goes to opts->used_flags.
 * Short transfers (and requests over 1 GiB, the SQE length limit we use) are requeued from where
 * they stopped. O_DIRECT reads at unaligned offsets read the aligned superset, as in posix.c.
 */
#ifdef DC_HAVE_LIBURING
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../core_int.h"

#define URING_NFILES   1024u        /* registered-file table (sparse) per instance */
#define URING_MAX_XFER (1ull << 30) /* bytes per SQE; the rest follows as a requeue */

struct uslot {
	uint64_t start;  /* file offset of the (aligned) transfer */
	uint64_t total;  /* its length */
	uint64_t need;   /* bytes that must arrive (skip + len) */
	uint64_t done;   /* bytes that did */
};

struct dc_engine {
	struct io_uring ring;
	struct uslot *us;
	unsigned nslots;
	unsigned flags;       /* DC_ENG_* actually in use */
	unsigned setup;       /* IORING_SETUP_* actually in use */
	int *free_files;      /* stack of free registered-file indexes */
	unsigned nfree_files;
};

static int read_int_file(const char *path, int *val)
{
	char buf[32];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
	*val = atoi(buf);
	return 0;
}

static int uring_available(char *why, size_t whylen)
{
	struct io_uring ring;
	int disabled = 0, ret;

	if (read_int_file("/proc/sys/kernel/io_uring_disabled", &disabled) < 0)
		disabled = 0;  /* before 6.6 the knob does not exist: enabled */
	if (disabled == 2) {
		snprintf(why, whylen, "kernel.io_uring_disabled=2: io_uring is switched off on this "
			 "machine (sysctl -w kernel.io_uring_disabled=0 as root), or use --engine posix");
		return -EPERM;
	}
	ret = io_uring_queue_init(1, &ring, 0);
	if (ret == 0) {
		io_uring_queue_exit(&ring);
		return 0;
	}
	if (ret == -EPERM && disabled == 1)
		snprintf(why, whylen, "kernel.io_uring_disabled=1 and this user is not in "
			 "kernel.io_uring_group: io_uring refused (EPERM): use --engine posix");
	else if (ret == -EPERM)
		snprintf(why, whylen, "io_uring refused by the kernel or container seccomp (EPERM): "
			 "use --engine posix");
	else if (ret == -ENOSYS)
		snprintf(why, whylen, "io_uring not supported by this kernel (ENOSYS): use --engine posix");
	else
		snprintf(why, whylen, "io_uring setup failed (%s): use --engine posix", strerror(-ret));
	return ret;
}

/* Best first. SINGLE_ISSUER and DEFER_TASKRUN hold because each runner thread creates, feeds and
 * reaps its own ring; DEFER_TASKRUN runs completion work only when we enter to wait, which is
 * exactly when we want it. */
static int setup_ring(struct dc_engine *e, unsigned entries, int sqpoll)
{
	static const struct {
		unsigned setup, dc, sqpoll;
	} tries[] = {
		{ IORING_SETUP_SQPOLL | IORING_SETUP_SINGLE_ISSUER,
		  DC_ENG_SQPOLL | DC_ENG_SINGLE_ISSUER, 1 },
		{ IORING_SETUP_SQPOLL, DC_ENG_SQPOLL, 1 },
		{ IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
		  DC_ENG_SINGLE_ISSUER | DC_ENG_DEFER_TASKRUN, 0 },
		{ IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG, DC_ENG_COOP_TASKRUN, 0 },
		{ 0, 0, 0 },
	};
	int ret = -EINVAL;

	for (unsigned i = 0; i < sizeof(tries) / sizeof(tries[0]); i++) {
		struct io_uring_params p;

		if (tries[i].sqpoll && !sqpoll)
			continue;
		memset(&p, 0, sizeof(p));
		p.flags = tries[i].setup;
		if (tries[i].sqpoll)
			p.sq_thread_idle = 100;  /* ms before the kernel thread sleeps */
		ret = io_uring_queue_init_params(entries, &e->ring, &p);
		if (ret == 0) {
			e->setup = tries[i].setup;
			e->flags |= tries[i].dc;
			return 0;
		}
		/* Unknown flag: try the next set. SQPOLL may also need privileges (EPERM). */
		if (ret != -EINVAL && !(tries[i].sqpoll && ret == -EPERM))
			return ret;
	}
	return ret;
}

static void setup_regbufs(struct dc_engine *e, struct dc_io *slots, unsigned nslots)
{
	struct iovec *iov = calloc(nslots, sizeof(*iov));

	if (!iov)
		return;
	for (unsigned i = 0; i < nslots; i++) {
		iov[i].iov_base = slots[i].buf;
		iov[i].iov_len = (size_t)slots[i].cap;
	}
	/* Refused (memlock limit, buffers over 1 GiB, old kernel): plain buffers still work. */
	if (io_uring_register_buffers(&e->ring, iov, nslots) == 0)
		e->flags |= DC_ENG_REGBUFS;
	free(iov);
}

static void setup_regfiles(struct dc_engine *e)
{
	e->free_files = calloc(URING_NFILES, sizeof(*e->free_files));
	if (!e->free_files)
		return;
	if (io_uring_register_files_sparse(&e->ring, URING_NFILES) != 0) {
		free(e->free_files);
		e->free_files = NULL;
		return;
	}
	for (unsigned i = 0; i < URING_NFILES; i++)
		e->free_files[i] = (int)(URING_NFILES - 1 - i);
	e->nfree_files = URING_NFILES;
	e->flags |= DC_ENG_REGFILES;
}

static int uring_init(struct dc_engine **out, const struct dc_engine_opts *opts, struct dc_io *slots,
		      unsigned nslots)
{
	struct dc_engine *e;
	unsigned entries = 1;
	int ret;

	if (!nslots || nslots > 1024)
		return -EINVAL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->us = calloc(nslots, sizeof(*e->us));
	if (!e->us) {
		free(e);
		return -ENOMEM;
	}
	e->nslots = nslots;
	/* One SQE per slot at most is ever waiting in the SQ ring. */
	while (entries < nslots)
		entries <<= 1;
	ret = setup_ring(e, entries, !!(opts->flags & DC_ENG_SQPOLL));
	if (ret < 0) {
		free(e->us);
		free(e);
		return ret;
	}
	if ((opts->flags & DC_ENG_REGBUFS) && slots[0].cap)
		setup_regbufs(e, slots, nslots);
	if (opts->flags & DC_ENG_REGFILES)
		setup_regfiles(e);
	/* used_flags is the documented OUT field; the runner passes its own writable copy. */
	((struct dc_engine_opts *)opts)->used_flags = e->flags;
	*out = e;
	return 0;
}

static void uring_cleanup(struct dc_engine *e)
{
	/* Exiting the ring also drops the registered buffers and files. */
	io_uring_queue_exit(&e->ring);
	free(e->free_files);
	free(e->us);
	free(e);
}

static int uring_open(struct dc_engine *e, struct dc_file *f, int write)
{
	int ret = dc_fd_open(f, write);

	if (ret < 0 || !(e->flags & DC_ENG_REGFILES) || !e->nfree_files)
		return ret;
	{
		int idx = e->free_files[e->nfree_files - 1];

		if (io_uring_register_files_update(&e->ring, (unsigned)idx, &f->fd, 1) == 1) {
			e->nfree_files--;
			f->reg_index = idx;
		}
	}
	return 0;
}

static int uring_close(struct dc_engine *e, struct dc_file *f)
{
	if (f->reg_index >= 0) {
		int none = -1;

		io_uring_register_files_update(&e->ring, (unsigned)f->reg_index, &none, 1);
		e->free_files[e->nfree_files++] = f->reg_index;
		f->reg_index = -1;
	}
	return dc_fd_close(f);
}

static struct io_uring_sqe *get_sqe(struct dc_engine *e)
{
	struct io_uring_sqe *sqe;

	/* Only with SQPOLL can the ring be full here: the kernel thread has not consumed yet. */
	while (!(sqe = io_uring_get_sqe(&e->ring))) {
		io_uring_submit(&e->ring);
		if (e->setup & IORING_SETUP_SQPOLL)
			io_uring_sqring_wait(&e->ring);
	}
	return sqe;
}

/* Queue (the rest of) the transfer of slot io. */
static void uring_prep(struct dc_engine *e, struct dc_io *io)
{
	const struct uslot *u = &e->us[io->index];
	struct io_uring_sqe *sqe = get_sqe(e);
	char *buf = (char *)io->buf + u->done;
	uint64_t n = u->total - u->done, off = u->start + u->done;
	int fd = io->file->fd;
	int fixed_file = io->file->reg_index >= 0;

	if (n > URING_MAX_XFER)
		n = URING_MAX_XFER;
	if (fixed_file)
		fd = io->file->reg_index;
	if (io->op == DC_OP_WRITE) {
		if (e->flags & DC_ENG_REGBUFS)
			io_uring_prep_write_fixed(sqe, fd, buf, (unsigned)n, off, (int)io->index);
		else
			io_uring_prep_write(sqe, fd, buf, (unsigned)n, off);
	} else {
		if (e->flags & DC_ENG_REGBUFS)
			io_uring_prep_read_fixed(sqe, fd, buf, (unsigned)n, off, (int)io->index);
		else
			io_uring_prep_read(sqe, fd, buf, (unsigned)n, off);
	}
	if (fixed_file)
		sqe->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data(sqe, io);
}

static int uring_submit(struct dc_engine *e, struct dc_io *io)
{
	const struct dc_file *f = io->file;
	struct uslot *u = &e->us[io->index];

	if (unlikely(io->index >= e->nslots))
		return -EINVAL;
	if (io->op == DC_OP_WRITE) {
		io->buf_off = 0;
		if (f->off_align > 1 && (io->offset % f->off_align || io->len % f->off_align)) {
			io->res = -EINVAL;
			return 1;
		}
		u->start = io->offset;
		u->total = u->need = io->len;
	} else {
		struct dc_span s;

		dc_dio_span(io, &s);
		io->buf_off = s.skip;
		if (unlikely(s.total > dc_io_cap(io))) {
			io->res = -EINVAL;
			return 1;
		}
		u->start = s.start;
		u->total = s.total;
		u->need = s.need;
	}
	u->done = 0;
	if (unlikely(!u->total)) {
		io->res = 0;
		return 1;
	}
	uring_prep(e, io);
	/* Submit now, as fio does by default (iodepth_batch_submit=1): a request waiting in the SQ for
	 * the next reap leaves the device's queue short. Batching the refills into the reap's
	 * io_uring_enter saved a syscall per ~10 requests but cost 15-20 % of 4 KiB random-read IOPS
	 * at qd 32 on virtio here (p50 725 us vs 550 us); submitting each costs ~1 us of CPU. */
	io_uring_submit(&e->ring);
	return 0;
}

/* One CQE for io: 1 if the request is finished (io->res set), 0 if it was requeued. */
static int uring_complete(struct dc_engine *e, struct dc_io *io, int res)
{
	struct uslot *u = &e->us[io->index];
	uint32_t a = io->file->off_align;

	if (res < 0) {
		if (res == -EAGAIN || res == -EINTR) {
			uring_prep(e, io);
			return 0;
		}
		io->res = res;
		return 1;
	}
	u->done += (uint64_t)res;
	if (u->done >= u->total)
		goto finished;
	/* Short. A read that stops off the O_DIRECT alignment, or returns 0, hit the end of
	 * the file: fine if the wanted bytes are in (aligned superset of a tail). */
	if (io->op == DC_OP_READ && (res == 0 || (a > 1 && u->done % a)))
		goto finished;
	if (res == 0) {  /* a write that moves nothing would loop forever */
		io->res = -EIO;
		return 1;
	}
	uring_prep(e, io);
	return 0;
finished:
	io->res = u->done >= u->need ? (int64_t)io->len : -ENODATA;
	return 1;
}

static int uring_reap(struct dc_engine *e, unsigned min, struct dc_io **done, unsigned max)
{
	unsigned n = 0;

	for (;;) {
		unsigned want = n < min ? min - n : 0;
		struct io_uring_cqe *cqe;
		unsigned head, seen = 0;
		int ret;

		/* Submit what is queued and wait in the same io_uring_enter. */
		if (want || io_uring_sq_ready(&e->ring))
			ret = io_uring_submit_and_wait(&e->ring, want);
		else if (e->setup & IORING_SETUP_DEFER_TASKRUN)
			ret = io_uring_get_events(&e->ring);  /* completions only run when we enter */
		else
			ret = 0;
		if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY && ret != -ETIME)
			return n ? (int)n : ret;

		/* Take every CQE that is there, then advance the head once. */
		io_uring_for_each_cqe(&e->ring, head, cqe) {
			struct dc_io *io;

			if (n >= max)
				break;
			seen++;
			io = io_uring_cqe_get_data(cqe);
			if (uring_complete(e, io, cqe->res))
				done[n++] = io;
		}
		if (seen)
			io_uring_cq_advance(&e->ring, seen);
		if (n >= min || n >= max)
			break;
	}
	/* Requeued short transfers go out now, not at the next call. */
	if (io_uring_sq_ready(&e->ring))
		io_uring_submit(&e->ring);
	return (int)n;
}

const struct dc_engine_ops dc_uring_ops = {
	.name = "io_uring",
	.caps = DC_CAP_ASYNC | DC_CAP_DIRECT | DC_CAP_WRITE,
	.available = uring_available,
	.init = uring_init,
	.open = uring_open,
	.close = uring_close,
	.submit = uring_submit,
	.reap = uring_reap,
	.cleanup = uring_cleanup,
};

#else
typedef int dc_uring_not_built;  /* ISO C wants a non-empty translation unit */
#endif /* DC_HAVE_LIBURING */
