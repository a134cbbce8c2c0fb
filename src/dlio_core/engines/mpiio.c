/* mpiio: MPI_File_read_at / write_at (independent) and MPI_File_read_at_all / write_at_all
 * (collective) on files opened with MPI_File_open (IOR's aiori-MPIIO.c, without its MPI_Abort).
 * Synchronous: every request completes inside submit().
 *
 * Built into its own extension (dlio._mpiio), never into the core, so that the core does not link
 * libmpi; dlio.mpi hands this table to the core with dc_engine_register().
 *
 * Rules this file keeps:
 *   - MPI is initialised by mpi4py; this file never calls MPI_Init or MPI_Finalize.
 *   - The runner calls the engine from its own threads, not the main one. MPI_THREAD_MULTIPLE
 *     allows any number of instances; MPI_THREAD_SERIALIZED allows one at a time (one I/O
 *     thread); below that the engine is unavailable. A second instance where MPI does not allow
 *     it is refused with -ENOTSUP.
 *   - Independent I/O (opts->mpi_comm NULL) opens each file on MPI_COMM_SELF. Collective I/O opens
 *     on the given communicator: every rank opens the same files in the same order and issues the
 *     same number of requests of the same lengths (the plan makes sure), and only one instance
 *     per process may exist (collective calls from two threads on one communicator are erroneous).
 *   - MPI counts are int: a request larger than DC_MPIIO_CHUNK is split into several calls (on
 *     every rank alike, since the lengths match in collective mode).
 *   - Errors come back as -errno (MPI error classes mapped to the nearest errno); file handles use
 *     MPI_ERRORS_RETURN (the default for files), so nothing aborts the job from inside here.
 *
 * Stopping collective I/O: a rank that stops (a signal, an I/O error) while the others go on would
 * leave them in an MPI_File_*_at_all it never joins, forever (and MPI_File_close is collective too).
 * So on a communicator of more than one rank, every request ends with a vote of all ranks (an
 * MPI_Iallreduce on a communicator of the engine's own): go on, stop (dc_mpiio_request_stop was
 * called on some rank), or fail (some rank's request failed). Every rank then stops after the
 * same request: the failing rank with its error, the others with -ECANCELED; after a stop vote the
 * next request of every rank returns -EINTR without an MPI call. The runner's own stop must not be
 * used for such runs (dlio.fsbench.ior stops them here). While it waits for the vote a rank polls
 * its stop flag: stopped and still waiting after DC_MPIIO_GRACE_NS, it gives up (another rank
 * hangs or is gone), returns -EINTR and leaves its files open (closing is collective).
 *
 * The MPI_File handle lives in dc_file.map; dc_file.fd is 0 while the file is open (the runner
 * only tests fd >= 0), -1 when closed.
 *
 * Also here: the per-step barrier for the trainer (dc_mpi_step_barrier), a C function the runner
 * calls after each step without the GIL: MPI_Ibarrier, then MPI_Test until done or stopped.
 */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>

#include "../core_int.h"
#include "engines.h"

_Static_assert(sizeof(MPI_File) <= sizeof(void *), "MPI_File must fit in dc_file.map");

/* Largest single MPI call: below INT_MAX and a multiple of 4 KiB. */
#define DC_MPIIO_CHUNK (1u << 30)

/* How long a stopped rank waits for the other ranks' vote before it gives up on them. */
#define DC_MPIIO_GRACE_NS 1000000000ull

enum vote { VOTE_GO = 0, VOTE_STOP = 1, VOTE_FAIL = 2 };

struct dc_engine {
	MPI_Comm comm; /* MPI_COMM_SELF (independent) or the collective communicator */
	int collective;
	MPI_Comm vote; /* the per-request vote's own communicator, or MPI_COMM_NULL (one rank) */
	int stopping;  /* the ranks voted to stop: every further request returns -EINTR */
	int abandoned; /* gave up waiting for the others: the files stay open (close is collective) */
	MPI_Info info; /* MPI_INFO_NULL when no hints */
	int counted;   /* holds a slot in live/live_collective */
};

static unsigned live;         /* engine instances alive in this process (atomic) */
static volatile int stop_req; /* dc_mpiio_request_stop() (atomic) */
static volatile int gave_up;  /* an engine of this process abandoned its files (atomic) */

static int mpi_errno(int rc)
{
	int cls = MPI_ERR_OTHER;

	if (rc == MPI_SUCCESS)
		return 0;
	MPI_Error_class(rc, &cls);
	switch (cls) {
	case MPI_ERR_NO_SUCH_FILE:
	case MPI_ERR_BAD_FILE:
		return ENOENT;
	case MPI_ERR_ACCESS:
		return EACCES;
	case MPI_ERR_NO_SPACE:
		return ENOSPC;
	case MPI_ERR_QUOTA:
		return EDQUOT;
	case MPI_ERR_READ_ONLY:
		return EROFS;
	case MPI_ERR_FILE_EXISTS:
		return EEXIST;
	case MPI_ERR_FILE_IN_USE:
		return EBUSY;
	case MPI_ERR_AMODE:
	case MPI_ERR_ARG:
	case MPI_ERR_COUNT:
	case MPI_ERR_INFO_KEY:
	case MPI_ERR_INFO_VALUE:
		return EINVAL;
	case MPI_ERR_UNSUPPORTED_OPERATION:
	case MPI_ERR_UNSUPPORTED_DATAREP:
		return ENOTSUP;
	case MPI_ERR_NO_MEM:
		return ENOMEM;
	default:
		return EIO;
	}
}

static const char *level_name(int level)
{
	switch (level) {
	case MPI_THREAD_SINGLE:
		return "MPI_THREAD_SINGLE";
	case MPI_THREAD_FUNNELED:
		return "MPI_THREAD_FUNNELED";
	case MPI_THREAD_SERIALIZED:
		return "MPI_THREAD_SERIALIZED";
	default:
		return "MPI_THREAD_MULTIPLE";
	}
}

/* 0 and the thread level if MPI is usable from a runner thread; else -errno and why. */
static int mpi_ready(int *level, char *why, size_t whylen)
{
	int init = 0, fin = 0;

	MPI_Initialized(&init);
	MPI_Finalized(&fin);
	if (!init || fin) {
		snprintf(why, whylen,
			 "MPI is %s in this process: run under mpiexec with mpi4py "
			 "installed (mpiexec -n N dlio-fast io --engine mpiio ...)",
			 fin ? "already finalised" : "not initialised");
		return -ENXIO;
	}
	MPI_Query_thread(level);
	if (*level < MPI_THREAD_SERIALIZED) {
		snprintf(why, whylen,
			 "MPI was initialised with %s, but the runner does its I/O on its "
			 "own threads: it needs MPI_THREAD_MULTIPLE (mpi4py's default; see "
			 "mpi4py.rc.thread_level), or MPI_THREAD_SERIALIZED with one thread",
			 level_name(*level));
		return -ENOTSUP;
	}
	return 0;
}

static int mpiio_available(char *why, size_t whylen)
{
	int level;

	return mpi_ready(&level, why, whylen);
}

static void mpiio_cleanup(struct dc_engine *e)
{
	if (!e)
		return;
	if (e->info != MPI_INFO_NULL)
		MPI_Info_free(&e->info);
	if (e->vote != MPI_COMM_NULL && !e->abandoned)
		MPI_Comm_free(&e->vote); /* collective: not when another rank is gone */
	if (e->counted)
		__atomic_fetch_sub(&live, 1, __ATOMIC_RELAXED);
	free(e);
}

static int mpiio_init(struct dc_engine **out, const struct dc_engine_opts *opts,
		      struct dc_io *slots, unsigned nslots)
{
	struct dc_engine *e;
	char why[256];
	int level, ret;
	unsigned before;

	(void)slots;
	(void)nslots;
	*out = NULL;
	ret = mpi_ready(&level, why, sizeof(why));
	if (ret < 0)
		return ret;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->info = MPI_INFO_NULL;
	e->comm = MPI_COMM_SELF;
	e->vote = MPI_COMM_NULL;
	if (opts->mpi_comm) {
		int size = 1;

		e->comm = *(const MPI_Comm *)opts->mpi_comm;
		e->collective = 1;
		MPI_Comm_size(e->comm, &size);
		if (size > 1 && (ret = MPI_Comm_dup(e->comm, &e->vote)) != MPI_SUCCESS) {
			e->vote = MPI_COMM_NULL;
			free(e);
			return -mpi_errno(ret);
		}
	}
	/* One instance at a time unless MPI_THREAD_MULTIPLE; always one for collective I/O. */
	before = __atomic_fetch_add(&live, 1, __ATOMIC_RELAXED);
	e->counted = 1;
	if (before > 0 && (level < MPI_THREAD_MULTIPLE || e->collective)) {
		mpiio_cleanup(e);
		return -ENOTSUP;
	}
	if (opts->hints && opts->hints[0]) {
		if (MPI_Info_create(&e->info) != MPI_SUCCESS) {
			e->info = MPI_INFO_NULL;
			mpiio_cleanup(e);
			return -ENOMEM;
		}
		for (const char *const *h = opts->hints; h[0] && h[1]; h += 2) {
			ret = MPI_Info_set(e->info, h[0], h[1]);
			if (ret != MPI_SUCCESS) {
				mpiio_cleanup(e);
				return -mpi_errno(ret);
			}
		}
	}
	*out = e;
	return 0;
}

static MPI_File file_handle(const struct dc_file *f)
{
	MPI_File fh;

	memcpy(&fh, &f->map, sizeof(fh));
	return fh;
}

static int mpiio_open(struct dc_engine *e, struct dc_file *f, int write)
{
	int amode = write ? (MPI_MODE_RDWR | MPI_MODE_CREATE) : MPI_MODE_RDONLY;
	MPI_File fh = MPI_FILE_NULL;
	MPI_Offset size = 0;
	int rc;

	rc = MPI_File_open(e->comm, f->path, amode, e->info, &fh);
	if (rc != MPI_SUCCESS)
		return -mpi_errno(rc);
	rc = MPI_File_get_size(fh, &size);
	if (rc != MPI_SUCCESS) {
		MPI_File_close(&fh);
		return -mpi_errno(rc);
	}
	f->map = NULL;
	memcpy(&f->map, &fh, sizeof(fh));
	f->fd = 0;
	f->size = (uint64_t)size;
	f->reg_index = -1;
	f->mem_align = 1;
	f->off_align = 1;
	return 0;
}

static int mpiio_close(struct dc_engine *e, struct dc_file *f)
{
	MPI_File fh;
	int rc;

	if (f->fd < 0)
		return 0;
	if (e->abandoned) { /* MPI_File_close would wait for the ranks that are gone */
		f->fd = -1;
		f->map = NULL;
		return 0;
	}
	fh = file_handle(f);
	rc = MPI_File_close(&fh);
	f->fd = -1;
	f->map = NULL;
	return rc == MPI_SUCCESS ? 0 : -mpi_errno(rc);
}

/* One MPI call of at most DC_MPIIO_CHUNK bytes. Returns the bytes moved or -errno. */
static int64_t xfer_once(struct dc_engine *e, MPI_File fh, int write, char *buf, uint64_t off,
			 int n)
{
	MPI_Status st;
	int rc, got = 0;

	if (write)
		rc = e->collective
			     ? MPI_File_write_at_all(fh, (MPI_Offset)off, buf, n, MPI_BYTE, &st)
			     : MPI_File_write_at(fh, (MPI_Offset)off, buf, n, MPI_BYTE, &st);
	else
		rc = e->collective
			     ? MPI_File_read_at_all(fh, (MPI_Offset)off, buf, n, MPI_BYTE, &st)
			     : MPI_File_read_at(fh, (MPI_Offset)off, buf, n, MPI_BYTE, &st);
	if (rc != MPI_SUCCESS)
		return -mpi_errno(rc);
	if (MPI_Get_count(&st, MPI_BYTE, &got) != MPI_SUCCESS || got == MPI_UNDEFINED || got < 0)
		return -EIO;
	return got;
}

/* Moves io->len bytes in calls of at most DC_MPIIO_CHUNK. In collective mode every call is made
 * even after a short one, so the ranks stay in step (lengths are equal on all ranks). */
static int64_t mpiio_xfer(struct dc_engine *e, struct dc_io *io)
{
	MPI_File fh = file_handle(io->file);
	int write = io->op == DC_OP_WRITE;
	uint64_t done = 0, pos = 0;
	int64_t err = 0;

	io->buf_off = write ? 0 : dc_read_land(io); /* where posix reads land (engine.h) */
	while (pos < io->len) {
		uint64_t left = io->len - pos;
		int n = (int)(left < DC_MPIIO_CHUNK ? left : DC_MPIIO_CHUNK);
		int64_t got = xfer_once(e, fh, write, (char *)io->buf + io->buf_off + pos,
					io->offset + pos, n);

		pos += (uint64_t)n;
		if (got < 0) {
			if (!err)
				err = got;
		} else if (!err) {
			done += (uint64_t)got;
			if (got < n)
				err = write ? -EIO : -ENODATA; /* short: end of file (read) */
		}
		if (err && !e->collective)
			break;
	}
	return err ? err : (int64_t)done;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Every rank's vote after a request: the largest (fail > stop > go), or -1 when this rank gave up
 * waiting (stopped, and the others did not vote within the grace). */
static int vote_all(struct dc_engine *e, int mine)
{
	MPI_Request req;
	uint64_t stopped_at = 0;
	unsigned spins = 0;
	int all = VOTE_GO, flag = 0;

	if (MPI_Iallreduce(&mine, &all, 1, MPI_INT, MPI_MAX, e->vote, &req) != MPI_SUCCESS)
		return VOTE_FAIL;
	for (;;) {
		if (MPI_Test(&req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS)
			return VOTE_FAIL;
		if (flag)
			return all;
		if (__atomic_load_n(&stop_req, __ATOMIC_RELAXED)) {
			uint64_t t = now_ns();

			if (!stopped_at)
				stopped_at = t;
			else if (t - stopped_at > DC_MPIIO_GRACE_NS)
				return -1; /* leave the request behind: the job is ending */
		}
		if (++spins > 1000)
			sched_yield();
	}
}

static int mpiio_submit(struct dc_engine *e, struct dc_io *io)
{
	int all;

	if (e->stopping) {
		io->res = -EINTR;
		return 1;
	}
	io->res = mpiio_xfer(e, io);
	if (e->vote == MPI_COMM_NULL)
		return 1;
	all = vote_all(e, io->res < 0                                    ? VOTE_FAIL
			  : __atomic_load_n(&stop_req, __ATOMIC_RELAXED) ? VOTE_STOP
									 : VOTE_GO);
	if (all < 0) {
		e->abandoned = e->stopping = 1;
		__atomic_store_n(&gave_up, 1, __ATOMIC_RELAXED);
		io->res = -EINTR;
	} else if (all == VOTE_FAIL && io->res >= 0) {
		io->res = -ECANCELED; /* another rank's request failed: stop with it */
	} else if (all == VOTE_STOP) {
		e->stopping = 1; /* this request counts; the next ends the run on every rank */
	}
	return 1;
}

void dc_mpiio_request_stop(int on)
{
	__atomic_store_n(&stop_req, on, __ATOMIC_RELAXED);
	if (!on)
		__atomic_store_n(&gave_up, 0, __ATOMIC_RELAXED);
}

int dc_mpiio_gave_up(void)
{
	return __atomic_load_n(&gave_up, __ATOMIC_RELAXED);
}

DC_ENGINE_OPS(mpiio, "mpiio", DC_CAP_WRITE, NULL);

/* ---- the trainer's per-step barrier ---------------------------------------------------------- */

struct dc_mpi_barrier {
	MPI_Comm comm;
	volatile int stop; /* set from another thread: give up waiting (Ctrl-C, a failed rank) */
	int nonblocking;   /* MPI_Ibarrier + MPI_Test (stoppable) instead of MPI_Barrier */
};

/* The step hook (struct dc_run_config.step_hook): 0, or -EINTR when stopped while waiting (the
 * runner then records the failure and stops), or -errno on an MPI error. */
int dc_mpi_step_barrier(void *ctx, uint64_t step)
{
	struct dc_mpi_barrier *b = ctx;
	MPI_Request req;
	unsigned spins = 0;
	int rc, flag = 0;

	(void)step;
	if (!b->nonblocking) {
		rc = MPI_Barrier(b->comm);
		return rc == MPI_SUCCESS ? 0 : -mpi_errno(rc);
	}
	rc = MPI_Ibarrier(b->comm, &req);
	if (rc != MPI_SUCCESS)
		return -mpi_errno(rc);
	for (;;) {
		rc = MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
		if (rc != MPI_SUCCESS)
			return -mpi_errno(rc);
		if (flag)
			return 0;
		if (b->stop) {
			/* The other ranks may be gone: leave the request behind (the job is ending). */
			return -EINTR;
		}
		/* Spin a little for latency, then give the CPU away (oversubscribed nodes). */
		if (++spins > 1000)
			sched_yield();
	}
}

/* A barrier context for comm (a copy of the handle; the communicator must outlive it). */
struct dc_mpi_barrier *dc_mpi_barrier_new(const void *comm, int nonblocking)
{
	struct dc_mpi_barrier *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	b->comm = *(const MPI_Comm *)comm;
	b->nonblocking = nonblocking;
	return b;
}

void dc_mpi_barrier_stop(struct dc_mpi_barrier *b)
{
	__atomic_store_n(&b->stop, 1, __ATOMIC_RELAXED);
}

void dc_mpi_barrier_free(struct dc_mpi_barrier *b)
{
	free(b);
}

/* The MPI library this engine was built against, for a mismatch check against mpi4py's. */
int dc_mpi_library_version(char *buf, size_t len)
{
	char v[MPI_MAX_LIBRARY_VERSION_STRING];
	int n = 0;

	if (MPI_Get_library_version(v, &n) != MPI_SUCCESS)
		return -EIO;
	snprintf(buf, len, "%.*s", n, v);
	return 0;
}

/* MPI_Query_thread, or -1 when MPI is not initialised. */
int dc_mpi_thread_level(void)
{
	int init = 0, level = -1;

	MPI_Initialized(&init);
	if (init)
		MPI_Query_thread(&level);
	return level;
}
