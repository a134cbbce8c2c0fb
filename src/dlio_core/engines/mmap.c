/* mmap: map the whole file and touch every page of each request, as frameworks that mmap their
 * data (numpy mmap_mode, LMDB) pay for it: page faults and readahead, no copy. Reads only.
 *
 * A file that shrinks under its mapping (truncated by another process) turns the touch of a page
 * past its new end into SIGBUS, which would kill the whole process. The touch is guarded: a SIGBUS
 * handler, armed per thread only around the touch, jumps back and the request fails with
 * -ENODATA (the file is now shorter) or -EIO (a device error under the mapping), so the run
 * reports the file and offset like any short read. Faults outside a touch go to the previous
 * handler (the default one: a real crash stays a crash).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "../core_int.h"
#include "engines.h"

#define DC_MMAP_PAGE 4096u

struct dc_engine {
	/* The touched bytes go here so that the loads cannot be optimised out. */
	volatile uint64_t sink;
};

static int mmap_available(char *why, size_t whylen)
{
	(void)why;
	(void)whylen;
	return 0;
}

/* Set only while this thread touches a mapping: where a SIGBUS jumps back to. initial-exec: a plain
 * %fs access per request, not a __tls_get_addr call (costs one pointer of static TLS). */
static _Thread_local sigjmp_buf *touch_jmp __attribute__((tls_model("initial-exec")));
static struct sigaction old_bus;
static pthread_once_t bus_once = PTHREAD_ONCE_INIT;
static int bus_ret;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	sigjmp_buf *j = touch_jmp;

	(void)sig;
	(void)si;
	(void)uc;
	if (j) {
		touch_jmp = NULL;
		siglongjmp(*j, 1); /* SA_NODEFER: SIGBUS is not left blocked */
	}
	/* Not a guarded touch: restore the previous disposition; the fault repeats under it. */
	sigaction(SIGBUS, &old_bus, NULL);
}

static void install_sigbus(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigbus;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	bus_ret = sigaction(SIGBUS, &sa, &old_bus) < 0 ? -errno : 0;
}

static int mmap_init(struct dc_engine **out, const struct dc_engine_opts *opts, struct dc_io *slots,
		     unsigned nslots)
{
	(void)opts;
	(void)slots;
	(void)nslots;
	pthread_once(&bus_once, install_sigbus);
	if (bus_ret < 0)
		return bus_ret;
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

static void mmap_cleanup(struct dc_engine *e)
{
	free(e);
}

static int mmap_open(struct dc_engine *e, struct dc_file *f, int write)
{
	int ret;

	(void)e;
	if (write || f->direct)
		return -EOPNOTSUPP;
	ret = dc_fd_open(f, 0);
	if (ret < 0)
		return ret;
	f->map = NULL;
	if (f->size) {
		void *p = mmap(NULL, (size_t)f->size, PROT_READ, MAP_SHARED, f->fd, 0);

		if (p == MAP_FAILED) {
			ret = -errno;
			dc_fd_close(f);
			return ret;
		}
		f->map = p;
	}
	return 0;
}

static int mmap_close(struct dc_engine *e, struct dc_file *f)
{
	int ret = 0, r;

	(void)e;
	if (f->map && munmap(f->map, (size_t)f->size) < 0)
		ret = -errno;
	f->map = NULL;
	r = dc_fd_close(f);
	return ret ? ret : r;
}

/* One load per page faults each page in; the last byte covers a partial tail page. Not inlined:
 * its locals stay out of the sigsetjmp caller's frame. */
static __attribute__((noinline)) uint64_t touch_pages(const volatile unsigned char *p,
						      const volatile unsigned char *end)
{
	uint64_t acc = 0;

	for (; p < end; p += DC_MMAP_PAGE)
		acc += *p;
	return acc + end[-1];
}

/* After a SIGBUS: is the file now shorter than the request's end? */
static int shrunk(const struct dc_file *f, const struct dc_io *io)
{
	struct stat st;

	return fstat(f->fd, &st) == 0 && (uint64_t)st.st_size < io->offset + io->len;
}

static int mmap_submit(struct dc_engine *e, struct dc_io *io)
{
	const struct dc_file *f = io->file;
	const unsigned char *p;
	sigjmp_buf jb;

	io->buf_off = 0;
	if (io->op != DC_OP_READ) {
		io->res = -EOPNOTSUPP;
		return 1;
	}
	if (io->offset > f->size || io->len > f->size - io->offset) {
		io->res = -ENODATA;
		return 1;
	}
	if (!io->len) {
		io->res = 0;
		return 1;
	}
	p = (const unsigned char *)f->map + io->offset;
	/* Nothing this function changes after sigsetjmp is read after a jump back: no volatile needed. */
	if (sigsetjmp(jb, 0)) {
		io->res = shrunk(f, io) ? -ENODATA : -EIO;
		return 1;
	}
	touch_jmp = &jb;
	e->sink += touch_pages(p, p + io->len);
	touch_jmp = NULL;
	io->res = (int64_t)io->len;
	return 1;
}

DC_ENGINE_OPS(mmap, "mmap", 0, NULL);
