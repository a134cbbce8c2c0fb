/* A minimal io_uring ring over the raw system calls, as fio's engines/io_uring.c does, so that the
 * io_uring engine needs only <linux/io_uring.h> (linux-libc-dev, which every libc6-dev pulls in)
 * and never liburing. Private to the core; the engine is engines/uring.c.
 *
 * The SQ array maps slot i to SQE i once at setup (as liburing does), so publishing SQEs is a
 * store of the tail. Ordering with the kernel: our SQE writes are released by the SQ tail store,
 * the kernel's CQE writes are acquired by the CQ tail load, and the CQ head store releases the
 * CQEs back to the kernel.
 *
 * Single-threaded per ring: each runner thread owns one (the engine contract), so no locking.
 */
#ifndef DLIO_CORE_URING_RING_H
#define DLIO_CORE_URING_RING_H
#include <linux/io_uring.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

/* Headers older than the running kernel lack the newer names; the values are the kernel ABI, so
 * defining them here lets one build use what the kernel offers (setup falls back on -EINVAL). */
#ifndef IORING_FEAT_SINGLE_MMAP
#define IORING_FEAT_SINGLE_MMAP (1U << 0)
#endif
#ifndef IORING_SETUP_COOP_TASKRUN
#define IORING_SETUP_COOP_TASKRUN (1U << 8)
#endif
#ifndef IORING_SETUP_TASKRUN_FLAG
#define IORING_SETUP_TASKRUN_FLAG (1U << 9)
#endif
#ifndef IORING_SETUP_SINGLE_ISSUER
#define IORING_SETUP_SINGLE_ISSUER (1U << 12)
#endif
#ifndef IORING_SETUP_DEFER_TASKRUN
#define IORING_SETUP_DEFER_TASKRUN (1U << 13)
#endif
#ifndef IORING_SQ_CQ_OVERFLOW
#define IORING_SQ_CQ_OVERFLOW (1U << 1)
#endif
#ifndef IORING_SQ_TASKRUN
#define IORING_SQ_TASKRUN (1U << 2)
#endif
#ifndef IORING_ENTER_SQ_WAIT
#define IORING_ENTER_SQ_WAIT (1U << 2)
#endif
#ifndef IORING_RSRC_REGISTER_SPARSE
#define IORING_RSRC_REGISTER_SPARSE (1U << 0)
#endif

/* Opcodes and register codes are enum members in the header (no #ifndef possible) and appeared
 * over several releases: use our own names with the kernel's values. */
#define DC_IORING_OP_READ_FIXED         4
#define DC_IORING_OP_WRITE_FIXED        5
#define DC_IORING_OP_READ               22 /* 5.6 */
#define DC_IORING_OP_WRITE              23 /* 5.6 */
#define DC_IORING_REGISTER_BUFFERS      0
#define DC_IORING_REGISTER_FILES_UPDATE 6  /* 5.5 */
#define DC_IORING_REGISTER_PROBE        8  /* 5.6 */
#define DC_IORING_REGISTER_FILES2       13 /* 5.13 */
#define DC_IO_URING_OP_SUPPORTED        (1U << 0)

struct dc_ring {
	int fd;
	unsigned setup; /* IORING_SETUP_* the kernel accepted */
	/* SQ: kernel-shared words, then our own copies */
	unsigned *sq_khead, *sq_ktail, *sq_kflags;
	unsigned sq_mask, sq_entries;
	unsigned sqe_head; /* first SQE not yet published to the kernel */
	unsigned sqe_tail; /* next SQE to hand out */
	struct io_uring_sqe *sqes;
	/* CQ */
	unsigned *cq_khead, *cq_ktail;
	unsigned cq_mask;
	struct io_uring_cqe *cqes;
	/* mappings */
	void *sq_ring, *cq_ring;
	size_t sq_ring_sz, cq_ring_sz, sqes_sz;
};

/* io_uring_setup + the three mappings. p->flags and p->sq_thread_idle are the caller's; the rest
 * is filled by the kernel. 0 or -errno (r untouched on failure). */
int dc_ring_init(struct dc_ring *r, unsigned entries, struct io_uring_params *p);
void dc_ring_exit(struct dc_ring *r);

/* Publish queued SQEs and enter the kernel when needed (liburing's io_uring_submit and
 * io_uring_submit_and_wait): SQEs consumed, or -errno. */
int dc_ring_submit_and_wait(struct dc_ring *r, unsigned wait_nr);
/* Run deferred completion work (DEFER_TASKRUN) without submitting or waiting. */
int dc_ring_get_events(struct dc_ring *r);
/* SQPOLL: wait until the kernel thread has made room in the SQ ring. */
int dc_ring_sqring_wait(struct dc_ring *r);

/* io_uring_register(opcode, arg, nr): the kernel's return value, or -errno. */
int dc_ring_register(struct dc_ring *r, unsigned opcode, const void *arg, unsigned nr);
int dc_ring_register_buffers(struct dc_ring *r, const struct iovec *iov, unsigned nr);
/* A table of nr empty registered-file slots (IORING_REGISTER_FILES2, sparse). */
int dc_ring_register_files_sparse(struct dc_ring *r, unsigned nr);
/* Put fd (or -1: empty) into registered-file slot idx: 1 (slots updated) or -errno. */
int dc_ring_register_file_at(struct dc_ring *r, unsigned idx, int fd);
/* 0 if the kernel knows every opcode in ops[0..n), -EOPNOTSUPP if not, -errno if it cannot tell
 * (-EINVAL: no IORING_REGISTER_PROBE, a kernel before 5.6). */
int dc_ring_probe_ops(struct dc_ring *r, const unsigned char *ops, unsigned n);

/* A zeroed SQE to fill, or NULL when the SQ ring is full (only possible under SQPOLL: otherwise
 * every submit empties it). */
static inline struct io_uring_sqe *dc_ring_get_sqe(struct dc_ring *r)
{
	unsigned head = __atomic_load_n(r->sq_khead, __ATOMIC_ACQUIRE);
	struct io_uring_sqe *sqe;

	if (r->sqe_tail - head >= r->sq_entries)
		return NULL;
	sqe = &r->sqes[r->sqe_tail & r->sq_mask];
	r->sqe_tail++;
	/* The kernel reads every field (buf_index, personality, file_index ...): start clean. */
	memset(sqe, 0, sizeof(*sqe));
	return sqe;
}

/* SQEs handed out and not yet consumed by the kernel (liburing's io_uring_sq_ready). */
static inline unsigned dc_ring_sq_ready(const struct dc_ring *r)
{
	return r->sqe_tail - __atomic_load_n(r->sq_khead, __ATOMIC_ACQUIRE);
}

/* The CQ: head is ours to read plainly (only we move it); the tail is the kernel's. */
static inline unsigned dc_ring_cq_head(const struct dc_ring *r)
{
	return *r->cq_khead;
}

static inline struct io_uring_cqe *dc_ring_cqe_at(const struct dc_ring *r, unsigned head)
{
	if (head == __atomic_load_n(r->cq_ktail, __ATOMIC_ACQUIRE))
		return NULL;
	return &r->cqes[head & r->cq_mask];
}

/* Hand n consumed CQEs back to the kernel; the release orders our reads of them before it. */
static inline void dc_ring_cq_advance(struct dc_ring *r, unsigned n)
{
	__atomic_store_n(r->cq_khead, *r->cq_khead + n, __ATOMIC_RELEASE);
}

#endif
