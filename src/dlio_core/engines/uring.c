/* io_uring over the raw kernel interface (uring_ring.h; no liburing): up to qd requests in flight
 * per thread, optional registered (fixed) buffers and files, SQPOLL on request.
 *
 * submit() prepares an SQE in the slot's name (user_data = the slot) and submits it at once (see
 * uring_submit for why); reap() waits for completions in one io_uring_enter. Ring setup asks for
 * the best flags first and drops them on -EINVAL, so one binary runs on old and new kernels; what
 * the kernel accepted goes to opts->used_flags. Short transfers (and requests over 1 GiB, the SQE
 * length limit we use) are requeued from where they stopped. O_DIRECT reads at unaligned offsets
 * read the aligned superset, as in posix.c.
 */
#include "../core_int.h"
#include "engines.h"

#ifdef DC_URING
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../uring_ring.h"

#define URING_NFILES   1024u        /* registered-file table (sparse) per instance */
#define URING_MAX_XFER (1ull << 30) /* bytes per SQE; the rest follows as a requeue */

struct uslot {
	uint64_t start; /* file offset of the (aligned) transfer */
	uint64_t total; /* its length */
	uint64_t need;  /* bytes that must arrive (dc_span.need) */
	uint64_t done;  /* bytes that did */
	uint32_t land;  /* the transfer goes to buf + land (dc_span) */
};

struct dc_engine {
	struct dc_ring ring;
	struct uslot *us;
	unsigned nslots;
	unsigned flags;  /* DC_ENG_* actually in use */
	unsigned setup;  /* IORING_SETUP_* actually in use */
	int *free_files; /* stack of free registered-file indexes */
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

/* Why io_uring_setup failed, in words a person can act on: "io_uring_setup: <error> (<cause>):
 * <fix>, or use --engine posix". */
static void setup_failure(int ret, char *why, size_t whylen)
{
	const char *cause = NULL, *fix = NULL;
	int disabled = 0;

	if (read_int_file("/proc/sys/kernel/io_uring_disabled", &disabled) < 0)
		disabled = 0; /* before 6.6 the knob does not exist: enabled */
	switch (ret) {
	case -EPERM:
		if (disabled == 2) {
			cause = "kernel.io_uring_disabled=2";
			fix = "sysctl -w kernel.io_uring_disabled=0 as root";
		} else if (disabled == 1) {
			cause = "kernel.io_uring_disabled=1 and this user is not in "
				"kernel.io_uring_group";
			fix = "put one of the user's groups in kernel.io_uring_group as root";
		} else {
			cause = "a seccomp filter, as container runtimes install by default";
			fix = "allow io_uring_setup/enter/register in the seccomp profile";
		}
		break;
	case -ENOSYS:
		cause = "a kernel without io_uring (before 5.1, or CONFIG_IO_URING=n), or a seccomp "
			"filter";
		break;
	case -ENOMEM:
		/* Kernels before 5.12 charge the rings to RLIMIT_MEMLOCK. */
		cause = "RLIMIT_MEMLOCK too low for the ring";
		fix = "raise ulimit -l";
		break;
	}
	if (!cause)
		snprintf(why, whylen, "io_uring_setup: %s: use --engine posix", strerror(-ret));
	else if (!fix)
		snprintf(why, whylen, "io_uring_setup: %s (%s): use --engine posix", strerror(-ret),
			 cause);
	else
		snprintf(why, whylen, "io_uring_setup: %s (%s): %s, or use --engine posix",
			 strerror(-ret), cause, fix);
}

/* The run-time probe: set up and tear down a tiny ring, and check that the kernel knows the
 * opcodes we issue (IORING_OP_READ/WRITE came in 5.6, after io_uring itself). Once per process:
 * the answer cannot change under us, and `engines` asks for every engine. */
static int probe_ret;
static char probe_why[320];
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;

static void probe(void)
{
	static const unsigned char ops[] = { DC_IORING_OP_READ, DC_IORING_OP_WRITE,
					     DC_IORING_OP_READ_FIXED, DC_IORING_OP_WRITE_FIXED };
	struct io_uring_params p;
	struct dc_ring ring;
	int ret;

	memset(&p, 0, sizeof(p));
	ret = dc_ring_init(&ring, 1, &p);
	if (ret < 0) {
		setup_failure(ret, probe_why, sizeof(probe_why));
		probe_ret = ret;
		return;
	}
	ret = dc_ring_probe_ops(&ring, ops, sizeof(ops));
	dc_ring_exit(&ring);
	if (ret == -EINVAL || ret == -EOPNOTSUPP) {
		snprintf(probe_why, sizeof(probe_why),
			 "io_uring lacks IORING_OP_READ/WRITE here "
			 "(kernel before 5.6): upgrade the kernel, or use --engine posix");
		probe_ret = -EOPNOTSUPP;
	} else if (ret < 0) {
		snprintf(probe_why, sizeof(probe_why),
			 "io_uring_register(PROBE): %s: use --engine posix", strerror(-ret));
		probe_ret = ret;
	}
}

static int uring_available(char *why, size_t whylen)
{
	pthread_once(&probe_once, probe);
	if (probe_ret)
		snprintf(why, whylen, "%s", probe_why);
	return probe_ret;
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
			p.sq_thread_idle = 100; /* ms before the kernel thread sleeps */
		ret = dc_ring_init(&e->ring, entries, &p);
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
	if (dc_ring_register_buffers(&e->ring, iov, nslots) == 0)
		e->flags |= DC_ENG_REGBUFS;
	free(iov);
}

static void setup_regfiles(struct dc_engine *e)
{
	e->free_files = calloc(URING_NFILES, sizeof(*e->free_files));
	if (!e->free_files)
		return;
	if (dc_ring_register_files_sparse(&e->ring, URING_NFILES) != 0) {
		free(e->free_files);
		e->free_files = NULL;
		return;
	}
	for (unsigned i = 0; i < URING_NFILES; i++)
		e->free_files[i] = (int)(URING_NFILES - 1 - i);
	e->nfree_files = URING_NFILES;
	e->flags |= DC_ENG_REGFILES;
}

static int uring_init(struct dc_engine **out, const struct dc_engine_opts *opts,
		      struct dc_io *slots, unsigned nslots)
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
	dc_ring_exit(&e->ring);
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

		if (dc_ring_register_file_at(&e->ring, (unsigned)idx, f->fd) == 1) {
			e->nfree_files--;
			f->reg_index = idx;
		}
	}
	return 0;
}

static int uring_close(struct dc_engine *e, struct dc_file *f)
{
	if (f->reg_index >= 0) {
		dc_ring_register_file_at(&e->ring, (unsigned)f->reg_index, -1);
		e->free_files[e->nfree_files++] = f->reg_index;
		f->reg_index = -1;
	}
	return dc_fd_close(f);
}

static struct io_uring_sqe *get_sqe(struct dc_engine *e)
{
	struct io_uring_sqe *sqe;

	/* Only with SQPOLL can the ring be full here: the kernel thread has not consumed yet. */
	while (!(sqe = dc_ring_get_sqe(&e->ring))) {
		dc_ring_submit_and_wait(&e->ring, 0);
		dc_ring_sqring_wait(&e->ring);
	}
	return sqe;
}

/* Queue (the rest of) the transfer of slot io. */
static void uring_prep(struct dc_engine *e, struct dc_io *io)
{
	const struct uslot *u = &e->us[io->index];
	struct io_uring_sqe *sqe = get_sqe(e);
	char *buf = (char *)io->buf + u->land + u->done;
	uint64_t n = u->total - u->done, off = u->start + u->done;
	int fd = io->file->fd;
	int fixed_file = io->file->reg_index >= 0;

	if (n > URING_MAX_XFER)
		n = URING_MAX_XFER;
	if (fixed_file)
		fd = io->file->reg_index;
	/* dc_ring_get_sqe zeroed the rest (ioprio, rw_flags, personality ...). */
	if (e->flags & DC_ENG_REGBUFS) {
		sqe->opcode =
			io->op == DC_OP_WRITE ? DC_IORING_OP_WRITE_FIXED : DC_IORING_OP_READ_FIXED;
		sqe->buf_index = (uint16_t)io->index;
	} else {
		sqe->opcode = io->op == DC_OP_WRITE ? DC_IORING_OP_WRITE : DC_IORING_OP_READ;
	}
	sqe->fd = fd;
	sqe->off = off;
	sqe->addr = (uint64_t)(uintptr_t)buf;
	sqe->len = (uint32_t)n;
	if (fixed_file)
		sqe->flags = IOSQE_FIXED_FILE;
	sqe->user_data = (uint64_t)(uintptr_t)io;
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
		u->land = 0;
	} else {
		struct dc_span s;

		dc_dio_span(io, &s);
		io->buf_off = s.skip;
		if (unlikely(s.land + s.total > dc_io_cap(io))) {
			io->res = -EINVAL;
			return 1;
		}
		u->start = s.start;
		u->total = s.total;
		u->need = s.need;
		u->land = s.land;
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
	dc_ring_submit_and_wait(&e->ring, 0);
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
	if (res == 0) { /* a write that moves nothing would loop forever */
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
	struct dc_ring *r = &e->ring;
	unsigned n = 0;

	for (;;) {
		unsigned want = n < min ? min - n : 0;
		struct io_uring_cqe *cqe;
		unsigned head, seen = 0;
		int ret;

		/* Submit what is queued and wait in the same io_uring_enter. */
		if (want || dc_ring_sq_ready(r))
			ret = dc_ring_submit_and_wait(r, want);
		else if (e->setup & IORING_SETUP_DEFER_TASKRUN)
			ret = dc_ring_get_events(r); /* completions only run when we enter */
		else
			ret = 0;
		if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY && ret != -ETIME)
			return n ? (int)n : ret;

		/* Take every CQE that is there, then advance the head once. */
		for (head = dc_ring_cq_head(r); n < max && (cqe = dc_ring_cqe_at(r, head));
		     head++) {
			struct dc_io *io = (struct dc_io *)(uintptr_t)cqe->user_data;

			seen++;
			if (uring_complete(e, io, cqe->res))
				done[n++] = io;
		}
		if (seen)
			dc_ring_cq_advance(r, seen);
		if (n >= min || n >= max)
			break;
	}
	/* Requeued short transfers go out now, not at the next call. */
	if (dc_ring_sq_ready(r))
		dc_ring_submit_and_wait(r, 0);
	return (int)n;
}

DC_ENGINE_OPS(uring, "io_uring", DC_CAP_ASYNC | DC_CAP_DIRECT | DC_CAP_WRITE, uring_reap);

#else
typedef int dc_uring_not_built; /* ISO C wants a non-empty translation unit */
#endif /* DC_URING */
