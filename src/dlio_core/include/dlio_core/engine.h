/* The engine boundary: one ops table per engine, one file per engine (engines/<name>.c).
 *
 * An engine moves bytes; it never takes timestamps (the runner does, so every engine is measured
 * the same way) and never allocates per request (the runner owns the request slots and their
 * aligned buffers). Each runner thread has its own engine instance (struct dc_engine, private to
 * the engine file), so engines need no locking.
 *
 * Request life: the runner fills a slot (file, op, offset, len, buf) and calls submit().
 *   - A synchronous engine completes the request inside submit() and returns 1.
 *   - An asynchronous engine queues it and returns 0; the request comes back from reap().
 *   - submit() < 0 is a failure to queue (the request did not happen).
 * On completion io->res is the number of bytes transferred (== io->len, short transfers having
 * been retried by the engine) or -errno; an unexpected end of file is -ENODATA.
 */
#ifndef DLIO_CORE_ENGINE_H
#define DLIO_CORE_ENGINE_H
#include "dlio_core/defs.h"
#include <stddef.h>
#include <stdint.h>

enum dc_op_kind { DC_OP_READ = 0, DC_OP_WRITE = 1 };

/* Capability flags. */
#define DC_CAP_ASYNC  (1u << 0) /* submit() queues; completions come from reap() */
#define DC_CAP_DIRECT (1u << 1) /* supports O_DIRECT */
#define DC_CAP_WRITE  (1u << 2) /* supports writes */
#define DC_CAP_NOIO   (1u << 3) /* moves no bytes (null) */

/* Engine option flags (struct dc_engine_opts.flags). */
#define DC_ENG_REGBUFS       (1u << 0) /* io_uring: register the slot buffers (fixed buffers) */
#define DC_ENG_REGFILES      (1u << 1) /* io_uring: register file descriptors */
#define DC_ENG_SQPOLL        (1u << 2) /* io_uring: kernel submission thread */
/* Access-pattern advice on buffered files (fio's fadvise_hint): random reads then get no readahead,
 * whose neighbouring pages would serve later random reads from the page cache. */
#define DC_ENG_FADV_RANDOM   (1u << 3) /* posix_fadvise(POSIX_FADV_RANDOM) at open */
#define DC_ENG_FADV_SEQ      (1u << 4) /* posix_fadvise(POSIX_FADV_SEQUENTIAL) at open */
/* Reported only (dc_engine_opts.used_flags, dc_run_result.eng_flags_used): ring setup flags the
 * kernel accepted after the best-first fallbacks. */
#define DC_ENG_SINGLE_ISSUER (1u << 8)  /* IORING_SETUP_SINGLE_ISSUER */
#define DC_ENG_DEFER_TASKRUN (1u << 9)  /* IORING_SETUP_DEFER_TASKRUN */
#define DC_ENG_COOP_TASKRUN  (1u << 10) /* IORING_SETUP_COOP_TASKRUN */

/* One open file as the runner sees it. Engines fill fd/map on open and release them on close. */
struct dc_file {
	const char *path;
	int fd;                        /* -1 when closed */
	int direct;                    /* opened with O_DIRECT */
	uint64_t size;                 /* st_size at open */
	void *map;                     /* mmap engine: the mapping */
	int reg_index;                 /* io_uring registered-file index, -1 if none */
	uint32_t mem_align, off_align; /* O_DIRECT alignment (1 when buffered) */
};

/* One request slot. The runner owns slots and buffers; index is the slot number. */
/* Where a buffered read lands in its (page-aligned) buffer when the buffer has the room:
 * dc_buffered_land() is DC_BUFFERED_LAND, where glibc's malloc puts a large buffer, unless the
 * kernel's copy out of the page cache is far slower there on this CPU (0 then), probed once per
 * process (land.c). It matters: on the Xeons measured (FSRM rep movsb) a destination 16 bytes into
 * its page is 7-10 % faster than a cache-line-aligned one when the file's pages stream from memory
 * (1 MiB cached reads 9.6 vs 8.7 GiB/s; 128 KiB 8.5 vs 7.8); on an AMD EPYC (FSRM too) the same
 * 16-byte offset is 6x slower (1 MiB: 2.1 vs 13 GiB/s). Either way that cost is the harness's
 * buffer, not the storage. */
#define DC_BUFFERED_LAND 16u
uint32_t dc_buffered_land(void);

struct dc_io {
	struct dc_file *file;
	void *buf; /* aligned to at least 4096; capacity >= len + 2 * off_align */
	uint64_t offset;
	uint64_t len;     /* bytes wanted */
	int64_t res;      /* bytes transferred or -errno, set at completion */
	uint64_t t_issue; /* runner's timestamp at submit */
	uint32_t index;   /* slot number (io_uring user_data, registered buffer index) */
	uint8_t op;       /* enum dc_op_kind */
	uint8_t pad[3];
	uint64_t user;    /* runner's bookkeeping (e.g. sample number) */
	uint64_t cap;     /* capacity of buf, set by the runner (0 = len + 2 * off_align) */
	uint32_t buf_off; /* OUT: the wanted bytes start at buf + buf_off: the skip into the aligned
	                     * superset an O_DIRECT read at an unaligned offset reads, or
	                     * dc_buffered_land() for a buffered read with the room; else 0 */
	uint32_t pad2;
};

struct dc_engine_opts {
	unsigned qd;         /* requests in flight per thread, 1..1024 */
	unsigned flags;      /* DC_ENG_* */
	uint64_t delay_ns;   /* null engine: busy-wait this long per request */
	uint64_t fail_nth;   /* null engine fault injection: fail request number fail_nth
	                       * (1-based; 0 = never) */
	int fail_errno;      /* ... with this errno (EIO by default); -1 = a short read instead */
	unsigned used_flags; /* OUT: what the engine actually got (io_uring setup fallbacks) */
	/* The MPI-IO engine's (NULL for the others): */
	void *mpi_comm; /* mpiio: pointer to an MPI_Comm. NULL = independent I/O (files opened on
	                       * MPI_COMM_SELF, MPI_File_read_at); else every rank of it opens the same
	                       * files and calls MPI_File_read_at_all / write_at_all the same number of
	                       * times (collective) */
	const char *const *hints; /* mpiio: MPI_Info hints as key, value, key, value ..., NULL */
};

struct dc_engine; /* private to each engine file */

struct dc_engine_ops {
	const char *name;
	unsigned caps;
	/* Can this engine run here? 0, or -errno with a reason a person can act on in why. */
	int (*available)(char *why, size_t whylen);
	/* Per-thread instance over the thread's slots (which stay valid until cleanup). */
	int (*init)(struct dc_engine **out, const struct dc_engine_opts *opts, struct dc_io *slots,
		    unsigned nslots);
	/* Open f->path for reading (or writing when write != 0) with O_DIRECT when f->direct. */
	int (*open)(struct dc_engine *e, struct dc_file *f, int write);
	int (*close)(struct dc_engine *e, struct dc_file *f);
	/* 1 = completed now (io->res set), 0 = queued, < 0 = -errno (not queued). */
	int (*submit)(struct dc_engine *e, struct dc_io *io);
	/* Wait for at least min completions (0 = do not block); store up to max into done[].
	 * Returns the count, or -errno. Sync engines leave it NULL. */
	int (*reap)(struct dc_engine *e, unsigned min, struct dc_io **done, unsigned max);
	void (*cleanup)(struct dc_engine *e);
};

/* Registry (engine.c): the compiled-in engines in a fixed order, then the registered ones. */
unsigned dc_engine_count(void);
const struct dc_engine_ops *dc_engine_at(unsigned i);
/* NULL if no engine of that name is compiled in. */
const struct dc_engine_ops *dc_engine_find(const char *name);
/* 0 if usable here, else -errno with the reason in why, found out at run time where it can be
 * ("io_uring_setup: Operation not permitted (kernel.io_uring_disabled=2 ...): use --engine posix").
 * Unknown names: -ENOENT. */
DC_MUST_CHECK int dc_engine_available(const char *name, char *why, size_t whylen);
/* Add an engine built outside the core (the MPI-IO engine lives in its own extension so that the
 * core never links libmpi). The table must outlive the process's use of it. 0 = added (or that name
 * is already known: a no-op); -EINVAL = a mandatory hook is missing; -ENOSPC = table full. */
DC_MUST_CHECK int dc_engine_register(const struct dc_engine_ops *ops);

#endif
