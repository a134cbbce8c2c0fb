/* The io_uring system calls and ring mappings behind uring_ring.h. */
#include "engines/engines.h"

#ifdef DC_URING
#include "uring_ring.h"

#include <errno.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The numbers are the same on every architecture since 5.1 except alpha; old libc headers may
 * not name them. */
#ifndef __NR_io_uring_setup
#if defined(__alpha__)
#define __NR_io_uring_setup    535
#define __NR_io_uring_enter    536
#define __NR_io_uring_register 537
#else
#define __NR_io_uring_setup    425
#define __NR_io_uring_enter    426
#define __NR_io_uring_register 427
#endif
#endif

/* Our own copies of structs that newer headers define, laid out as the kernel ABI has them. */
struct dc_rsrc_register {
	uint32_t nr;
	uint32_t flags;
	uint64_t resv2;
	uint64_t data;
	uint64_t tags;
};

struct dc_files_update {
	uint32_t offset;
	uint32_t resv;
	uint64_t fds; /* pointer to __s32[] */
};

struct dc_probe_op {
	uint8_t op;
	uint8_t resv;
	uint16_t flags;
	uint32_t resv2;
};

struct dc_probe {
	uint8_t last_op;
	uint8_t ops_len;
	uint16_t resv;
	uint32_t resv2[3];
	struct dc_probe_op ops[256];
};

static int sys_setup(unsigned entries, struct io_uring_params *p)
{
	long ret = syscall(__NR_io_uring_setup, entries, p);

	return ret < 0 ? -errno : (int)ret;
}

static int sys_enter(int fd, unsigned to_submit, unsigned min_complete, unsigned flags)
{
	long ret =
		syscall(__NR_io_uring_enter, fd, to_submit, min_complete, flags, NULL, (size_t)0);

	return ret < 0 ? -errno : (int)ret;
}

int dc_ring_register(struct dc_ring *r, unsigned opcode, const void *arg, unsigned nr)
{
	long ret = syscall(__NR_io_uring_register, r->fd, opcode, arg, nr);

	return ret < 0 ? -errno : (int)ret;
}

static void unmap_rings(struct dc_ring *r)
{
	if (r->sqes)
		munmap(r->sqes, r->sqes_sz);
	if (r->cq_ring && r->cq_ring != r->sq_ring)
		munmap(r->cq_ring, r->cq_ring_sz);
	if (r->sq_ring)
		munmap(r->sq_ring, r->sq_ring_sz);
}

static void *map_ring(int fd, size_t len, off_t off)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, off);

	return p == MAP_FAILED ? NULL : p;
}

int dc_ring_init(struct dc_ring *r, unsigned entries, struct io_uring_params *p)
{
	struct dc_ring t;
	unsigned *array;
	int fd = sys_setup(entries, p), ret;

	if (fd < 0)
		return fd;
	memset(&t, 0, sizeof(t));
	t.fd = fd;
	t.setup = p->flags;
	t.sq_ring_sz = p->sq_off.array + p->sq_entries * sizeof(unsigned);
	t.cq_ring_sz = p->cq_off.cqes + p->cq_entries * sizeof(struct io_uring_cqe);
	/* Since 5.4 both rings live in one mapping: map it once, at the larger size. */
	if (p->features & IORING_FEAT_SINGLE_MMAP) {
		if (t.cq_ring_sz > t.sq_ring_sz)
			t.sq_ring_sz = t.cq_ring_sz;
		t.cq_ring_sz = t.sq_ring_sz;
	}
	t.sq_ring = map_ring(fd, t.sq_ring_sz, IORING_OFF_SQ_RING);
	if (!t.sq_ring)
		goto fail;
	if (p->features & IORING_FEAT_SINGLE_MMAP)
		t.cq_ring = t.sq_ring;
	else if (!(t.cq_ring = map_ring(fd, t.cq_ring_sz, IORING_OFF_CQ_RING)))
		goto fail;
	t.sqes_sz = p->sq_entries * sizeof(struct io_uring_sqe);
	t.sqes = map_ring(fd, t.sqes_sz, IORING_OFF_SQES);
	if (!t.sqes)
		goto fail;

	t.sq_khead = (unsigned *)((char *)t.sq_ring + p->sq_off.head);
	t.sq_ktail = (unsigned *)((char *)t.sq_ring + p->sq_off.tail);
	t.sq_kflags = (unsigned *)((char *)t.sq_ring + p->sq_off.flags);
	t.sq_mask = *(unsigned *)((char *)t.sq_ring + p->sq_off.ring_mask);
	t.sq_entries = *(unsigned *)((char *)t.sq_ring + p->sq_off.ring_entries);
	array = (unsigned *)((char *)t.sq_ring + p->sq_off.array);
	t.cq_khead = (unsigned *)((char *)t.cq_ring + p->cq_off.head);
	t.cq_ktail = (unsigned *)((char *)t.cq_ring + p->cq_off.tail);
	t.cq_mask = *(unsigned *)((char *)t.cq_ring + p->cq_off.ring_mask);
	t.cqes = (struct io_uring_cqe *)((char *)t.cq_ring + p->cq_off.cqes);
	/* Slot i always holds SQE i: SQEs are handed out in ring order, so publishing is a tail store. */
	for (unsigned i = 0; i < t.sq_entries; i++)
		array[i] = i;
	t.sqe_head = t.sqe_tail = *t.sq_khead;
	*r = t;
	return 0;
fail:
	ret = -errno;
	unmap_rings(&t);
	close(fd);
	return ret;
}

void dc_ring_exit(struct dc_ring *r)
{
	/* Closing the ring fd also drops the registered buffers and files. */
	unmap_rings(r);
	close(r->fd);
	r->fd = -1;
}

/* Make handed-out SQEs visible to the kernel: the release store orders our SQE writes before the
 * new tail. Returns how many the kernel has not consumed yet. */
static unsigned flush_sq(struct dc_ring *r)
{
	unsigned tail = r->sqe_tail;

	if (r->sqe_head != tail) {
		r->sqe_head = tail;
		__atomic_store_n(r->sq_ktail, tail, __ATOMIC_RELEASE);
	}
	return tail - __atomic_load_n(r->sq_khead, __ATOMIC_ACQUIRE);
}

int dc_ring_submit_and_wait(struct dc_ring *r, unsigned wait_nr)
{
	unsigned submit = flush_sq(r), flags = 0;
	int need = 1;

	if (r->setup & IORING_SETUP_SQPOLL) {
		/* The kernel thread submits; enter only to wake it. The full barrier orders our tail
		 * store before the flag load (the thread sets NEED_WAKEUP, then rechecks the tail). */
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		need = 0;
		if (__atomic_load_n(r->sq_kflags, __ATOMIC_RELAXED) & IORING_SQ_NEED_WAKEUP) {
			flags |= IORING_ENTER_SQ_WAKEUP;
			need = 1;
		}
	}
	/* Waiting, an overflowed CQ, or task work the kernel flagged: those need GETEVENTS. */
	if (wait_nr || (__atomic_load_n(r->sq_kflags, __ATOMIC_RELAXED) &
			(IORING_SQ_CQ_OVERFLOW | IORING_SQ_TASKRUN))) {
		flags |= IORING_ENTER_GETEVENTS;
		need = 1;
	}
	if (!need)
		return (int)submit;
	return sys_enter(r->fd, submit, wait_nr, flags);
}

int dc_ring_get_events(struct dc_ring *r)
{
	return sys_enter(r->fd, 0, 0, IORING_ENTER_GETEVENTS);
}

int dc_ring_sqring_wait(struct dc_ring *r)
{
	if (!(r->setup & IORING_SETUP_SQPOLL) || dc_ring_sq_ready(r) < r->sq_entries)
		return 0;
	return sys_enter(r->fd, 0, 0, IORING_ENTER_SQ_WAIT);
}

int dc_ring_register_buffers(struct dc_ring *r, const struct iovec *iov, unsigned nr)
{
	int ret = dc_ring_register(r, DC_IORING_REGISTER_BUFFERS, iov, nr);

	return ret < 0 ? ret : 0;
}

int dc_ring_register_files_sparse(struct dc_ring *r, unsigned nr)
{
	struct dc_rsrc_register reg = { .nr = nr, .flags = IORING_RSRC_REGISTER_SPARSE };
	int ret = dc_ring_register(r, DC_IORING_REGISTER_FILES2, &reg, sizeof(reg));

	/* The table counts against RLIMIT_NOFILE: raise the soft limit once, as liburing does. */
	if (ret == -EMFILE) {
		struct rlimit rl;

		if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < nr) {
			rl.rlim_cur += nr;
			if (rl.rlim_cur > rl.rlim_max)
				rl.rlim_cur = rl.rlim_max;
			if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
				ret = dc_ring_register(r, DC_IORING_REGISTER_FILES2, &reg,
						       sizeof(reg));
		}
	}
	return ret < 0 ? ret : 0;
}

int dc_ring_register_file_at(struct dc_ring *r, unsigned idx, int fd)
{
	int32_t fds[1] = { fd };
	struct dc_files_update up = { .offset = idx, .fds = (uint64_t)(uintptr_t)fds };

	return dc_ring_register(r, DC_IORING_REGISTER_FILES_UPDATE, &up, 1);
}

int dc_ring_probe_ops(struct dc_ring *r, const unsigned char *ops, unsigned n)
{
	struct dc_probe probe;
	int ret;

	memset(&probe, 0, sizeof(probe));
	ret = dc_ring_register(r, DC_IORING_REGISTER_PROBE, &probe, 256);
	if (ret < 0)
		return ret;
	for (unsigned i = 0; i < n; i++)
		if (ops[i] > probe.last_op || !(probe.ops[ops[i]].flags & DC_IO_URING_OP_SUPPORTED))
			return -EOPNOTSUPP;
	return 0;
}

#else
typedef int dc_uring_ring_not_built; /* ISO C wants a non-empty translation unit */
#endif /* DC_URING */
