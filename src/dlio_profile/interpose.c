/* dlio._interpose: an LD_PRELOAD library that records the file I/O of a process tree for
 * `dlio-fast profile`. Never imported: dlio/profile/capture.py puts it in LD_PRELOAD and sets
 * DLIO_PROFILE_DIR. Without that variable every wrapper is a plain pass-through.
 *
 * Why an interposer (not strace/ptrace): a ptrace stop costs tens of microseconds per system
 * call, which changes a job that reads small files; a wrapper costs two vDSO clock reads and a
 * store into a per-thread buffer (the scheme of Darshan and DFTracer).
 *
 * Output, per process (exec gives a new file too, the name carries the start time):
 *   ev-<pid>-<t0>.bin    fixed 56-byte records (struct rec) in per-thread blocks; a record's t is
 *                        0 where a block was reserved but not written
 *   files-<pid>-<t0>.txt "<id>\t<path>" per successful open; a first line "parent\t<name>"
 *                        when the process was forked (its inherited ids are the parent's); NUL
 *                        padding where a chunk was not filled; "stopped\t<why>" if it had to stop
 * Both files are written as the job goes, through shared mappings of blocks reserved with
 * fallocate: the records are in the page cache the moment they are stored, so a job killed by
 * SIGKILL, a crash (abort, SIGSEGV) or an exec leaves every record it made, with no signal
 * handler and no flush at exit. A record's t is stored last, a path line's newline last, so a
 * record or line cut by the job's death is told apart (left out) by the reader.
 * File ids are per open (a reopened path gets a new id); reads on fds we did not see opened
 * (pipes, sockets, stdin) are not recorded. Offsets of read()/write() come from a position we
 * track per fd (open, lseek, read, write), so they cost no extra system call.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

enum { OP_OPEN = 0, OP_CLOSE = 1, OP_READ = 2, OP_WRITE = 3, OP_MMAP = 4, OP_SCHED = 5 };

struct rec {           /* 56 bytes; mirrored by dlio/profile/parsers.py NATIVE_DTYPE */
	uint64_t t;    /* CLOCK_MONOTONIC ns at the call */
	uint64_t dur;  /* ns in the call */
	int64_t off;   /* file offset (-1 unknown); OP_SCHED: ns the thread ran */
	int64_t req;   /* bytes asked for (mmap: length); OP_SCHED: ns it waited for a CPU */
	int64_t ret;   /* bytes done, the fd for open, or -errno; OP_SCHED: its time slices */
	uint32_t file; /* file id (files-*.txt); OP_SCHED: the thread sampled */
	uint32_t tid;
	uint32_t pid;
	uint16_t op;
	uint16_t pad;
};

#define MAXFD      65536
#define MAX_GROW   16 /* a thread's blocks grow from 7 pages to 16 x 7 pages */
#define NAMES_GROW 16 /* a process's name chunks grow from 1 page to 16 */

struct tbuf {
	struct tbuf *next;
	struct rec *r;  /* the mapped block, NULL: none yet */
	uint32_t n;     /* records stored in it */
	uint32_t cap;   /* records it holds */
	uint32_t grow;  /* the next block is grow x 7 pages */
	int sfd;        /* the thread's /proc schedstat, -1: not open yet, -2: none */
	uint64_t slast; /* when it was last sampled */
};

struct fdent {
	uint32_t id; /* 0: not tracked */
	int64_t pos;
};

static struct fdent fds[MAXFD];
static char outdir[3072];
static int active;
static int ev_fd = -1, names_fd = -1;
static uint32_t my_pid;
static uint64_t next_id = 1;
static char my_name[128];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t key;
static struct tbuf *all_bufs;
static size_t page;
static off_t ev_end, names_end; /* where the next block / name chunk starts in the file */
static char *names_map;         /* the current name chunk, NULL: none */
static size_t names_len, names_cap, names_grow = 1;
static __thread struct tbuf *tb;
static __thread uint32_t my_tid;
static __thread int busy;  /* inside our own code: do not record */
static uint32_t root_pid;  /* this process at exec, kept across fork */
static int root_fd = -1;   /* the root's main thread's schedstat; -2: none */
static uint64_t root_last; /* when it was last sampled */

#define REAL(ret, name, args) static ret(*real_##name) args
REAL(int, open, (const char *, int, ...));
REAL(int, open64, (const char *, int, ...));
REAL(int, openat, (int, const char *, int, ...));
REAL(int, openat64, (int, const char *, int, ...));
REAL(int, __open_2, (const char *, int));
REAL(int, __open64_2, (const char *, int));
REAL(int, __openat_2, (int, const char *, int));
REAL(int, creat, (const char *, mode_t));
REAL(int, close, (int));
REAL(ssize_t, read, (int, void *, size_t));
REAL(ssize_t, write, (int, const void *, size_t));
REAL(ssize_t, pread, (int, void *, size_t, off_t));
REAL(ssize_t, pread64, (int, void *, size_t, off_t));
REAL(ssize_t, pwrite, (int, const void *, size_t, off_t));
REAL(ssize_t, pwrite64, (int, const void *, size_t, off_t));
REAL(ssize_t, readv, (int, const struct iovec *, int));
REAL(ssize_t, writev, (int, const struct iovec *, int));
REAL(ssize_t, preadv, (int, const struct iovec *, int, off_t));
REAL(ssize_t, preadv64, (int, const struct iovec *, int, off_t));
REAL(ssize_t, preadv2, (int, const struct iovec *, int, off_t, int));
REAL(off_t, lseek, (int, off_t, int));
REAL(off_t, lseek64, (int, off_t, int));
REAL(void *, mmap, (void *, size_t, int, int, int, off_t));
REAL(void *, mmap64, (void *, size_t, int, int, int, off_t));
REAL(int, dup, (int));
REAL(int, dup2, (int, int));
REAL(int, dup3, (int, int, int));
REAL(int, fcntl, (int, int, ...));
REAL(int, fcntl64, (int, int, ...));
REAL(FILE *, fopen, (const char *, const char *));
REAL(FILE *, fopen64, (const char *, const char *));
REAL(size_t, fread, (void *, size_t, size_t, FILE *));
REAL(size_t, fread_unlocked, (void *, size_t, size_t, FILE *));
REAL(char *, fgets, (char *, int, FILE *));
REAL(char *, fgets_unlocked, (char *, int, FILE *));
REAL(ssize_t, getdelim, (char **, size_t *, int, FILE *));
REAL(ssize_t, getline, (char **, size_t *, FILE *));
REAL(int, fclose, (FILE *));

#define RESOLVE(name)                                                                              \
	do {                                                                                       \
		if (!real_##name)                                                                  \
			real_##name = dlsym(RTLD_NEXT, #name);                                     \
	} while (0)

static void resolve_all(void)
{
	RESOLVE(open);
	RESOLVE(open64);
	RESOLVE(openat);
	RESOLVE(openat64);
	RESOLVE(__open_2);
	RESOLVE(__open64_2);
	RESOLVE(__openat_2);
	RESOLVE(creat);
	RESOLVE(close);
	RESOLVE(read);
	RESOLVE(write);
	RESOLVE(pread);
	RESOLVE(pread64);
	RESOLVE(pwrite);
	RESOLVE(pwrite64);
	RESOLVE(readv);
	RESOLVE(writev);
	RESOLVE(preadv);
	RESOLVE(preadv64);
	RESOLVE(preadv2);
	RESOLVE(lseek);
	RESOLVE(lseek64);
	RESOLVE(mmap);
	RESOLVE(mmap64);
	RESOLVE(dup);
	RESOLVE(dup2);
	RESOLVE(dup3);
	RESOLVE(fcntl);
	RESOLVE(fcntl64);
	RESOLVE(fopen);
	RESOLVE(fopen64);
	RESOLVE(fread);
	RESOLVE(fread_unlocked);
	RESOLVE(fgets);
	RESOLVE(fgets_unlocked);
	RESOLVE(getdelim);
	RESOLVE(getline);
	RESOLVE(fclose);
}

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		ssize_t w = real_write(fd, c, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		c += w;
		n -= (size_t)w;
	}
}

static void open_outputs(void);
static void add_name(const char *line, size_t n);

/* Stop recording in this process (the disk is full, a mapping failed): say why in the names
 * file if it can be written. Lock held. */
static void stop(int err)
{
	char line[160];
	int n = snprintf(line, sizeof(line), "stopped\t%s\n", strerror(err));

	active = 0;
	if (names_fd >= 0 && n > 0)
		write_all(names_fd, line, (size_t)n); /* O_APPEND: after what is mapped */
}

/* A new len-byte chunk of fd at *end, reserved on the disk (so that storing into the mapping can
 * never raise SIGBUS on a full disk) and mapped shared; NULL and errno on failure. Lock held. */
static void *map_chunk(int fd, off_t *end, size_t len)
{
	void *p;
	int err = posix_fallocate(fd, *end, (off_t)len);

	if (err == EOPNOTSUPP || err == ENOSYS || err == EINVAL) /* no fallocate here: sparse */
		err = ftruncate(fd, *end + (off_t)len) ? errno : 0;
	if (err) {
		errno = err;
		return NULL;
	}
	p = real_mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, *end);
	if (p == MAP_FAILED)
		return NULL;
#ifdef MADV_POPULATE_WRITE
	/* The block's pages made writable in one call: a write fault per page on a shared file
	 * mapping (page_mkwrite) would cost the job a trap every 73 records. Best effort. */
	madvise(p, len, MADV_POPULATE_WRITE);
#endif
	*end += (off_t)len;
	return p;
}

/* The thread's next block of records. Lock held. */
static int next_block(struct tbuf *b)
{
	size_t len = 7 * page * b->grow; /* 7 pages: a whole number of 56-byte records */

	if (b->r)
		munmap(b->r, (size_t)b->cap * sizeof(struct rec));
	b->r = NULL;
	b->n = 0;
	if (!active)
		return -1;
	if (ev_fd < 0)
		open_outputs();
	if (ev_fd < 0)
		return -1;
	b->r = map_chunk(ev_fd, &ev_end, len);
	if (!b->r) {
		stop(errno);
		return -1;
	}
	b->cap = (uint32_t)(len / sizeof(struct rec));
	if (b->grow < MAX_GROW)
		b->grow *= 2;
	return 0;
}

/* Open this process's two files on first use (processes that touch no file leave none);
 * parent_name names the forking process's names file, if any. Lock held. */
static char parent_name[128];
static int outputs_tried;

static void open_outputs(void)
{
	char path[3300];
	char line[300];
	uint64_t t0 = now_ns();

	if (outputs_tried)
		return;
	outputs_tried = 1;
	snprintf(my_name, sizeof(my_name), "%u-%llu", my_pid, (unsigned long long)t0);
	snprintf(path, sizeof(path), "%s/ev-%s.bin", outdir, my_name);
	ev_fd = real_open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	snprintf(path, sizeof(path), "%s/files-%s.txt", outdir, my_name);
	names_fd = real_open(path, O_RDWR | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
	ev_end = names_end = 0;
	if (ev_fd < 0 || names_fd < 0) {
		active = 0;
		return;
	}
	if (parent_name[0]) {
		int n = snprintf(line, sizeof(line), "parent\t%s\n", parent_name);

		add_name(line, (size_t)n);
	}
}

/* One "<id>\t<path>\n" line into the mapped names file, its newline stored last. Lock held. */
static void add_name(const char *line, size_t n)
{
	if (!n || !active)
		return;
	if (names_fd < 0)
		open_outputs();
	if (names_fd < 0)
		return;
	if (!names_map || names_len + n > names_cap) {
		size_t len = page * names_grow;

		if (len < n) /* a path near PATH_MAX is longer than one page */
			len = (n + page - 1) / page * page;

		if (names_map)
			munmap(names_map, names_cap);
		names_map = map_chunk(names_fd, &names_end, len);
		if (!names_map) {
			stop(errno);
			return;
		}
		names_len = 0;
		names_cap = len;
		if (names_grow < NAMES_GROW)
			names_grow *= 2;
	}
	memcpy(names_map + names_len, line, n - 1);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	names_map[names_len + n - 1] = line[n - 1];
	names_len += n;
}

static void thread_gone(void *p)
{
	struct tbuf *b = p, **pp;

	pthread_mutex_lock(&lock);
	for (pp = &all_bufs; *pp; pp = &(*pp)->next)
		if (*pp == b) {
			*pp = b->next;
			break;
		}
	pthread_mutex_unlock(&lock);
	if (b->r)
		munmap(b->r,
		       (size_t)b->cap * sizeof(struct rec)); /* its records stay in the file */
	if (b->sfd >= 0)
		real_close(b->sfd);
	free(b);
	tb = NULL;
}

static void before_fork(void)
{
	pthread_mutex_lock(&lock);
}

static void after_fork_parent(void)
{
	pthread_mutex_unlock(&lock);
}

static void after_fork_child(void)
{
	/* The blocks mapped here are the parent's file: unmap them all (only the forking thread
	 * exists here), the child records into its own files. */
	for (struct tbuf *b = all_bufs; b; b = b->next) {
		if (b->r)
			munmap(b->r, (size_t)b->cap * sizeof(struct rec));
		b->r = NULL;
		b->n = 0;
		b->grow = 1;
		if (b->sfd >= 0) /* the parent's threads: this child samples its own */
			real_close(b->sfd);
		b->sfd = -1;
		b->slast = 0;
	}
	if (names_map)
		munmap(names_map, names_cap);
	names_map = NULL;
	names_len = names_cap = 0;
	names_grow = 1;
	pthread_mutex_unlock(&lock);
	my_tid = 0;
	if (!active)
		return;
	snprintf(parent_name, sizeof(parent_name), "%s", my_name);
	my_name[0] = 0;
	my_pid = (uint32_t)getpid();
	if (ev_fd >= 0)
		real_close(ev_fd);
	if (names_fd >= 0)
		real_close(names_fd);
	ev_fd = names_fd = -1;
	outputs_tried = 0;
}

__attribute__((constructor)) static void init(void)
{
	const char *d = getenv("DLIO_PROFILE_DIR");

	resolve_all();
	page = (size_t)sysconf(_SC_PAGESIZE);
	if (!d || !*d || strlen(d) >= sizeof(outdir) || !page)
		return;
	snprintf(outdir, sizeof(outdir), "%s", d);
	if (pthread_key_create(&key, thread_gone))
		return;
	pthread_atfork(before_fork, after_fork_parent, after_fork_child);
	my_pid = (uint32_t)getpid();
	root_pid =
		my_pid; /* an exec'd process is a fork tree's root; a forked one keeps its parent's */
	active = 1;
}

static struct tbuf *my_buf(void)
{
	if (tb)
		return tb;
	tb = calloc(1, sizeof(*tb));
	if (!tb)
		return NULL;
	tb->grow = 1;
	tb->sfd = -1;
	pthread_mutex_lock(&lock);
	tb->next = all_bufs;
	all_bufs = tb;
	pthread_mutex_unlock(&lock);
	pthread_setspecific(key, tb);
	return tb;
}

/* The job's thread timeline, so that `profile` tells a step's compute from the time other
 * processes took the CPUs (a busy host stretches every wall-clock gap): at a thread's I/O, at most
 * once a millisecond, its /proc schedstat (ns on a CPU, ns runnable but waiting for one, slices),
 * and likewise for the main thread of the first process of this fork tree (the trainer of a loader
 * whose readers are threads or forked workers: it may do no I/O of its own). One pread of a procfs
 * file, a few microseconds per millisecond of I/O; an OP_SCHED record holds it (file: the thread
 * sampled; the root's pid is its main thread's id). */
#define SAMPLE_NS 1000000ull
static int sched_open(uint32_t pid, uint32_t tid)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/%u/task/%u/schedstat", pid, tid);
	fd = real_open(path, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -2 : fd;
}

static int sched_read(int fd, int64_t v[3])
{
	char buf[128], *p = buf, *e;
	ssize_t n = real_pread(fd, buf, sizeof(buf) - 1, 0);

	if (n <= 0)
		return -1;
	buf[n] = 0;
	for (int i = 0; i < 3; i++) {
		v[i] = (int64_t)strtoull(p, &e, 10);
		if (e == p)
			return -1;
		p = e;
	}
	return 0;
}

static void record(int op, uint32_t file, uint64_t t, uint64_t t1, int64_t off, int64_t req,
		   int64_t ret);

static void sample_sched(struct tbuf *b, uint64_t now)
{
	int64_t v[3];
	uint64_t last;
	int fd;

	if (now - b->slast >= SAMPLE_NS) {
		b->slast = now;
		if (b->sfd == -1)
			b->sfd = sched_open(my_pid, my_tid);
		if (b->sfd >= 0 && !sched_read(b->sfd, v))
			record(OP_SCHED, my_tid, now, now, v[0], v[1], v[2]);
	}
	if (my_tid == root_pid || !root_pid) /* the root's main thread samples itself above */
		return;
	last = __atomic_load_n(&root_last, __ATOMIC_RELAXED);
	if (now - last < SAMPLE_NS ||
	    !__atomic_compare_exchange_n(&root_last, &last, now, 0, __ATOMIC_RELAXED,
					 __ATOMIC_RELAXED))
		return;
	fd = __atomic_load_n(&root_fd, __ATOMIC_ACQUIRE);
	if (fd == -1) { /* one thread at a time gets here (the exchange above) */
		fd = sched_open(root_pid, root_pid);
		__atomic_store_n(&root_fd, fd, __ATOMIC_RELEASE);
	}
	if (fd >= 0 && !sched_read(fd, v))
		record(OP_SCHED, root_pid, now, now, v[0], v[1], v[2]);
}

static void record(int op, uint32_t file, uint64_t t, uint64_t t1, int64_t off, int64_t req,
		   int64_t ret)
{
	struct tbuf *b = my_buf();
	struct rec *r;

	if (!b)
		return;
	if (!my_tid)
		my_tid = (uint32_t)syscall(SYS_gettid);
	if (!b->r || b->n == b->cap) {
		int err;

		pthread_mutex_lock(&lock);
		err = next_block(b);
		pthread_mutex_unlock(&lock);
		if (err)
			return;
	}
	r = &b->r[b->n++];
	r->dur = t1 - t;
	r->off = off;
	r->req = req;
	r->ret = ret;
	r->file = file;
	r->tid = my_tid;
	r->pid = my_pid;
	r->op = (uint16_t)op;
	r->pad = 0;
	__atomic_store_n(&r->t, t ? t : 1,
			 __ATOMIC_RELEASE); /* last: t != 0 marks a whole record */
	if (op != OP_SCHED)
		sample_sched(b, t1);
}

static inline uint32_t tracked(int fd)
{
	return (active && !busy && fd >= 0 && fd < MAXFD) ? fds[fd].id : 0;
}

/* A successful open: give it an id, write its absolute path, record it. */
static void opened(int dirfd, const char *path, int fd, int flags, uint64_t t, uint64_t t1)
{
	char abs[4200], line[4300];
	uint32_t id;
	int n;

	if (!active || busy || fd < 0 || fd >= MAXFD || !path || (flags & O_DIRECTORY))
		return;
	busy = 1;
	if (path[0] == '/') {
		snprintf(abs, sizeof(abs), "%s", path);
	} else {
		char base[4096];
		ssize_t k = -1;

		if (dirfd == AT_FDCWD) {
			k = getcwd(base, sizeof(base)) ? (ssize_t)strlen(base) : -1;
		} else {
			char link[64];

			snprintf(link, sizeof(link), "/proc/self/fd/%d", dirfd);
			k = readlink(link, base, sizeof(base) - 1);
		}
		if (k < 0)
			k = 0;
		base[k] = 0;
		snprintf(abs, sizeof(abs), "%s/%s", base, path);
	}
	pthread_mutex_lock(&lock);
	id = (uint32_t)next_id++;
	n = snprintf(line, sizeof(line), "%u\t%s\n", id, abs);
	if (n > 0)
		add_name(line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
	pthread_mutex_unlock(&lock);
	fds[fd].id = id;
	fds[fd].pos = (flags & O_APPEND) ? -1 : 0;
	record(OP_OPEN, id, t, t1, 0, flags, fd);
	busy = 0;
}

static int mode_arg(int flags, va_list ap)
{
	return (flags & (O_CREAT | __O_TMPFILE)) ? va_arg(ap, int) : 0;
}

/* The wrappers of one family differ only in the function they stand for and its arguments, so
 * each family's body is written once, in a macro (the usual way of an interposer). */

/* The open family: time the call; a successful open gets an id, its path and a record. */
#define OPEN_BODY(call, dirfd)                                                                     \
	uint64_t t = now_ns();                                                                     \
	int fd = call;                                                                             \
	if (active && fd >= 0)                                                                     \
		opened(dirfd, path, fd, flags, t, now_ns());                                       \
	return fd;

/* open, openat and their 64 forms take the mode as a variadic argument, present with O_CREAT or
 * O_TMPFILE only. */
#define WRAP_OPEN_VA(name, params, args, dirfd)                                                    \
	int name params                                                                            \
	{                                                                                          \
		va_list ap;                                                                        \
		va_start(ap, flags);                                                               \
		int mode = mode_arg(flags, ap);                                                    \
		va_end(ap);                                                                        \
		RESOLVE(name);                                                                     \
		OPEN_BODY(real_##name args, dirfd)                                                 \
	}

/* The _FORTIFY_SOURCE forms: no mode. */
#define WRAP_OPEN_2(name, params, args, dirfd)                                                     \
	int name params                                                                            \
	{                                                                                          \
		RESOLVE(name);                                                                     \
		OPEN_BODY(real_##name args, dirfd)                                                 \
	}

WRAP_OPEN_VA(open, (const char *path, int flags, ...), (path, flags, mode), AT_FDCWD)
WRAP_OPEN_VA(open64, (const char *path, int flags, ...), (path, flags, mode), AT_FDCWD)
WRAP_OPEN_VA(openat, (int dirfd, const char *path, int flags, ...), (dirfd, path, flags, mode),
	     dirfd)
WRAP_OPEN_VA(openat64, (int dirfd, const char *path, int flags, ...), (dirfd, path, flags, mode),
	     dirfd)
WRAP_OPEN_2(__open_2, (const char *path, int flags), (path, flags), AT_FDCWD)
WRAP_OPEN_2(__open64_2, (const char *path, int flags), (path, flags), AT_FDCWD)
WRAP_OPEN_2(__openat_2, (int dirfd, const char *path, int flags), (dirfd, path, flags), dirfd)

int creat(const char *path, mode_t mode)
{
	int flags = O_CREAT | O_WRONLY | O_TRUNC;

	RESOLVE(creat);
	OPEN_BODY(real_creat(path, mode), AT_FDCWD)
}

int close(int fd)
{
	uint32_t id = tracked(fd);
	uint64_t t = now_ns();
	int ret;

	RESOLVE(close);
	ret = real_close(fd);
	if (id) {
		fds[fd].id = 0;
		record(OP_CLOSE, id, t, now_ns(), -1, 0, ret < 0 ? -errno : 0);
	}
	return ret;
}

/* One read or write at the tracked position (pos < 0: unknown, e.g. O_APPEND). */
static void io_at_pos(int op, int fd, uint32_t id, uint64_t t, int64_t req, ssize_t ret)
{
	int64_t off = fds[fd].pos;

	if (ret > 0 && off >= 0)
		fds[fd].pos = off + ret;
	record(op, id, t, now_ns(), off, req, ret < 0 ? -errno : ret);
}

/* read, write, readv, writev: at the tracked position; req is the bytes asked for, worked out only
 * for a tracked fd. */
#define WRAP_AT_POS(name, params, args, op, req)                                                   \
	ssize_t name params                                                                        \
	{                                                                                          \
		uint32_t id = tracked(fd);                                                         \
		uint64_t t = id ? now_ns() : 0;                                                    \
		ssize_t ret;                                                                       \
                                                                                                   \
		RESOLVE(name);                                                                     \
		ret = real_##name args;                                                            \
		if (id)                                                                            \
			io_at_pos(op, fd, id, t, (int64_t)(req), ret);                             \
		return ret;                                                                        \
	}

WRAP_AT_POS(read, (int fd, void *buf, size_t n), (fd, buf, n), OP_READ, n)
WRAP_AT_POS(write, (int fd, const void *buf, size_t n), (fd, buf, n), OP_WRITE, n)

static size_t iov_len(const struct iovec *iov, int cnt)
{
	size_t n = 0;

	for (int i = 0; i < cnt; i++)
		n += iov[i].iov_len;
	return n;
}

WRAP_AT_POS(readv, (int fd, const struct iovec *iov, int cnt), (fd, iov, cnt), OP_READ,
	    iov_len(iov, cnt))
WRAP_AT_POS(writev, (int fd, const struct iovec *iov, int cnt), (fd, iov, cnt), OP_WRITE,
	    iov_len(iov, cnt))

/* The pread/pwrite family: at the offset the call names. */
#define WRAP_AT_OFF(name, params, args, op, req)                                                   \
	ssize_t name params                                                                        \
	{                                                                                          \
		RESOLVE(name);                                                                     \
		uint32_t id = tracked(fd);                                                         \
		uint64_t t = id ? now_ns() : 0;                                                    \
		ssize_t ret = real_##name args;                                                    \
		if (id)                                                                            \
			record(op, id, t, now_ns(), (int64_t)off, (int64_t)(req),                  \
			       ret < 0 ? -errno : ret);                                            \
		return ret;                                                                        \
	}

WRAP_AT_OFF(pread, (int fd, void *buf, size_t n, off_t off), (fd, buf, n, off), OP_READ, n)
WRAP_AT_OFF(pread64, (int fd, void *buf, size_t n, off_t off), (fd, buf, n, off), OP_READ, n)
WRAP_AT_OFF(pwrite, (int fd, const void *buf, size_t n, off_t off), (fd, buf, n, off), OP_WRITE, n)
WRAP_AT_OFF(pwrite64, (int fd, const void *buf, size_t n, off_t off), (fd, buf, n, off), OP_WRITE,
	    n)
WRAP_AT_OFF(preadv, (int fd, const struct iovec *iov, int cnt, off_t off), (fd, iov, cnt, off),
	    OP_READ, iov_len(iov, cnt))
WRAP_AT_OFF(preadv64, (int fd, const struct iovec *iov, int cnt, off_t off), (fd, iov, cnt, off),
	    OP_READ, iov_len(iov, cnt))
WRAP_AT_OFF(preadv2, (int fd, const struct iovec *iov, int cnt, off_t off, int flags),
	    (fd, iov, cnt, off, flags), OP_READ, iov_len(iov, cnt))

static off_t seek_common(off_t (*fn)(int, off_t, int), int fd, off_t off, int whence)
{
	off_t ret = fn(fd, off, whence);

	if (ret >= 0 && fd >= 0 && fd < MAXFD && fds[fd].id)
		fds[fd].pos = ret;
	return ret;
}

off_t lseek(int fd, off_t off, int whence)
{
	RESOLVE(lseek);
	return seek_common(real_lseek, fd, off, whence);
}

off_t lseek64(int fd, off_t off, int whence)
{
	RESOLVE(lseek64);
	return seek_common(real_lseek64, fd, off, whence);
}

/* mmap: the mapping is recorded (file, offset, length); page faults on it are not visible. */
#define WRAP_MMAP(name)                                                                            \
	void *name(void *addr, size_t n, int prot, int flags, int fd, off_t off)                   \
	{                                                                                          \
		RESOLVE(name);                                                                     \
		uint32_t id = tracked(fd);                                                         \
		uint64_t t = id ? now_ns() : 0;                                                    \
		void *p = real_##name(addr, n, prot, flags, fd, off);                              \
                                                                                                   \
		if (id)                                                                            \
			record(OP_MMAP, id, t, now_ns(), (int64_t)off, (int64_t)n,                 \
			       p == MAP_FAILED ? -errno : (int64_t)n);                             \
		return p;                                                                          \
	}

WRAP_MMAP(mmap)
WRAP_MMAP(mmap64)

static int dup_common(int from, int to)
{
	if (to >= 0 && to < MAXFD && from >= 0 && from < MAXFD) {
		fds[to].id = fds[from].id;
		fds[to].pos = fds[from].pos;
	}
	return to;
}

int dup(int fd)
{
	RESOLVE(dup);
	return dup_common(fd, real_dup(fd));
}

int dup2(int fd, int to)
{
	RESOLVE(dup2);
	return dup_common(fd, real_dup2(fd, to));
}

int dup3(int fd, int to, int flags)
{
	RESOLVE(dup3);
	RESOLVE(fcntl);
	RESOLVE(fcntl64);
	return dup_common(fd, real_dup3(fd, to, flags));
}

/* fcntl's F_DUPFD forms duplicate too: CPython's os.dup() is fcntl(fd, F_DUPFD_CLOEXEC, 0), and
 * numpy's fromfile (np.load of a .npy) reads through such a duplicate, opened as a FILE* with
 * fdopen. The third argument is read as a pointer whatever the command (the usual way of a
 * wrapper: on x86-64 and aarch64 an int or a pointer is passed in the same register). */
#define WRAP_FCNTL(name)                                                                           \
	int name(int fd, int cmd, ...)                                                             \
	{                                                                                          \
		va_list ap;                                                                        \
		va_start(ap, cmd);                                                                 \
		void *arg = va_arg(ap, void *);                                                    \
		va_end(ap);                                                                        \
		RESOLVE(name);                                                                     \
		int ret = real_##name(fd, cmd, arg);                                               \
		if (ret >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC))                        \
			dup_common(fd, ret);                                                       \
		return ret;                                                                        \
	}

WRAP_FCNTL(fcntl)
WRAP_FCNTL(fcntl64)

/* stdio: glibc's fopen/fread call its internal open/read, which no wrapper sees. */
static FILE *fopen_common(FILE *(*fn)(const char *, const char *), const char *path,
			  const char *mode)
{
	uint64_t t = now_ns();
	FILE *f = fn(path, mode);

	if (f && active)
		opened(AT_FDCWD, path, fileno(f), strchr(mode, 'a') ? O_APPEND : 0, t, now_ns());
	return f;
}

FILE *fopen(const char *path, const char *mode)
{
	RESOLVE(fopen);
	return fopen_common(real_fopen, path, mode);
}

FILE *fopen64(const char *path, const char *mode)
{
	RESOLVE(fopen64);
	return fopen_common(real_fopen64, path, mode);
}

/* A stream's reads: at the stream's own position (ftello: no system call once it has read), not
 * the descriptor's, which the stream moves in buffer-sized reads no wrapper sees (nor does it
 * move the tracked position: the stream's next seek or the job's lseek sets that). */
#undef fread_unlocked /* glibc's inline forms, when optimising */
#undef fgets_unlocked
#define STDIO_READ(name, ret_t, params, args, req, got)                                            \
	ret_t name params                                                                          \
	{                                                                                          \
		RESOLVE(name);                                                                     \
		int fd = f ? fileno(f) : -1;                                                       \
		uint32_t id = tracked(fd);                                                         \
		uint64_t t = id ? now_ns() : 0;                                                    \
		off_t off = id ? ftello(f) : -1;                                                   \
		ret_t ret = real_##name args;                                                      \
		if (id)                                                                            \
			record(OP_READ, id, t, now_ns(), (int64_t)off, (int64_t)(req),             \
			       (int64_t)(got));                                                    \
		return ret;                                                                        \
	}

STDIO_READ(fread, size_t, (void *buf, size_t size, size_t nmemb, FILE *f), (buf, size, nmemb, f),
	   size *nmemb, ret *size)
STDIO_READ(fread_unlocked, size_t, (void *buf, size_t size, size_t nmemb, FILE *f),
	   (buf, size, nmemb, f), size *nmemb, ret *size)
STDIO_READ(fgets, char *, (char *buf, int n, FILE *f), (buf, n, f), n > 0 ? n - 1 : 0,
	   ret ? strlen(ret) : 0)
STDIO_READ(fgets_unlocked, char *, (char *buf, int n, FILE *f), (buf, n, f), n > 0 ? n - 1 : 0,
	   ret ? strlen(ret) : 0)
STDIO_READ(getdelim, ssize_t, (char **line, size_t *n, int delim, FILE *f), (line, n, delim, f),
	   ret > 0 ? ret : 0, ret > 0 ? ret : 0)
STDIO_READ(getline, ssize_t, (char **line, size_t *n, FILE *f), (line, n, f), ret > 0 ? ret : 0,
	   ret > 0 ? ret : 0)

int fclose(FILE *f)
{
	RESOLVE(fclose);
	int fd = f ? fileno(f) : -1;
	uint32_t id = tracked(fd);
	uint64_t t = id ? now_ns() : 0;
	int ret = real_fclose(f);

	if (id) {
		fds[fd].id = 0;
		record(OP_CLOSE, id, t, now_ns(), -1, 0, ret);
	}
	return ret;
}
