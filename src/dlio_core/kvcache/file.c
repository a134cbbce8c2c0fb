/* The KV file store: one .npy file per object in the rank's cache folder.
 *
 * compat mode issues the reference benchmark's system calls (numpy's np.save + fsync, and
 * fadvise(DONTNEED) + np.load, as strace shows them on the reference):
 *   write: openat(O_WRONLY|O_CREAT|O_TRUNC) - write(128 B header) - fallocate(KEEP_SIZE) - one
 *          write() of the payload - fsync - close
 *   read:  stat - openat - fadvise64(DONTNEED) - close - openat - read(4 KiB) - read(128 B) -
 *          read(4 KiB) - one read() of the rest of the payload - read(4 KiB) of the tail - close
 *   evict: unlink
 * A payload larger than the staging buffer is written in staging-sized write() calls (counted as
 * split_writes). Timing follows the reference: a write's device time is the fsync, its host time
 * the rest; a read's device time is the second open to its close, its host time the drop.
 * direct mode is in direct.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core_int.h"
#include "dlio_core/timer.h"
#include "kv_file.h"

/* The memory behind compat's read window: about a core's L2 cache. The kernel's copy out of the page
 * cache then writes into lines the core holds instead of streaming them to DRAM and back: cached
 * 256 MiB reads ran at 6 GB/s into a 1 MiB window against 3.4 GB/s into 8 MiB here (EPYC, 512 KiB
 * L2 per core); the reference copies into fresh arrays, which costs it more still. */
#define KV_SINK_PHYS     (1ull << 20)
#define KV_SINK_SPREAD   (64u << 10)  /* workers' places in the window are this far apart */
#define KV_DIRECT_SPREAD (256u << 10) /* direct mode's (O_DIRECT: page aligned, own memory) */
#define KV_DROP_CHECK    (4u << 20)   /* the drop check looks at the first 4 MiB of a file */

static uint64_t round_up(uint64_t x, uint64_t a)
{
	return (x + a - 1) / a * a;
}

/* ---- the read window ---- */

/* direct mode: transfers are at most qd chunks per worker, so the window is plain anonymous
 * memory, in huge pages (an O_DIRECT read into 4 KiB pages is split into more device requests);
 * workers start KV_DIRECT_SPREAD apart in it, 64 places, and share it. */
static int sink_make_direct(struct dc_kv_store *s)
{
	uint64_t len = (uint64_t)s->cfg.qd * s->cfg.chunk + 64ull * KV_DIRECT_SPREAD;
	void *p;

	len = round_up(len, 2u << 20);
	if (posix_memalign(&p, 2u << 20, len))
		return -ENOMEM;
#ifdef MADV_HUGEPAGE
	(void)madvise(p, len, MADV_HUGEPAGE);
#endif
	memset(p, 0, len); /* no page fault in a measured read */
	s->sink = p;
	s->sink_len = len;
	s->sink_phys = 64ull * KV_DIRECT_SPREAD;
	s->sink_anon = 1;
	return 0;
}

static int sink_make(struct dc_kv_store *s, uint64_t need)
{
	uint64_t phys = KV_SINK_PHYS, len;
	unsigned char *base;
	int fd;

	if (round_up(need, 4096) < phys)
		phys = round_up(need, 4096);
	len = round_up(need + phys, phys);
	fd = memfd_create("dlio-kv-sink", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)phys) < 0) {
		int e = -errno;

		close(fd);
		return e;
	}
	base = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (base == MAP_FAILED) {
		int e = -errno;

		close(fd);
		return e;
	}
	for (uint64_t off = 0; off < len; off += phys) {
		/* Populated now: no page fault lands in a measured read. */
		void *p = mmap(base + off, phys, PROT_READ | PROT_WRITE,
			       MAP_SHARED | MAP_FIXED | MAP_POPULATE, fd, 0);

		if (p == MAP_FAILED) {
			int e = -errno;

			munmap(base, len);
			close(fd);
			return e;
		}
	}
	close(fd); /* the mappings keep the memory */
	s->sink = base;
	s->sink_len = len;
	s->sink_phys = phys;
	return 0;
}

/* ---- the store ---- */

static int file_open(struct dc_kv_store **out, const struct dc_kv_store_cfg *cfg, char *why,
		     size_t whylen)
{
	struct dc_kv_store *s;
	struct stat st;
	uint64_t need;
	int ret, dirfd;

	if (!cfg->dir || strlen(cfg->dir) + 32 >= PATH_MAX)
		return -ENAMETOOLONG;
	dirfd = open(cfg->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dirfd < 0 || fstat(dirfd, &st) < 0) {
		ret = -errno;
		if (ret == -ELOOP ||
		    (ret == -ENOTDIR && lstat(cfg->dir, &st) == 0 && S_ISLNK(st.st_mode)))
			snprintf(why, whylen,
				 "%s: a symbolic link, not a folder of the run's own: entries are "
				 "written and removed only there",
				 cfg->dir);
		else
			snprintf(why, whylen, "%s: %s", cfg->dir, strerror(-ret));
		if (dirfd >= 0)
			close(dirfd);
		return ret;
	}
	if (cfg->direct) {
		ret = (!cfg->chunk || cfg->chunk % 4096 || !cfg->qd)
			      ? -EINVAL
			      : kv_direct_check(cfg->dir, why, whylen);
		if (ret < 0) {
			close(dirfd);
			return ret;
		}
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		close(dirfd);
		return -ENOMEM;
	}
	s->dirfd = dirfd;
	s->cfg = *cfg;
	snprintf(s->dir, sizeof(s->dir), "%s", cfg->dir);
	s->cfg.dir = s->dir;
	pthread_mutex_init(&s->lock, NULL);
	need = cfg->max_obj + 2 * 4096 + KV_DIRECT_HDR;
	ret = cfg->direct ? sink_make_direct(s) : sink_make(s, need);
	if (ret < 0) {
		snprintf(why, whylen, "read window of %llu bytes: %s", (unsigned long long)need,
			 strerror(-ret));
		pthread_mutex_destroy(&s->lock);
		close(dirfd);
		free(s);
		return ret;
	}
	*out = s;
	return 0;
}

static int file_worker_open(struct dc_kv_store *s, unsigned worker, struct dc_kv_worker **out)
{
	struct dc_kv_worker *w = calloc(1, sizeof(*w));
	int ret;

	if (!w)
		return -ENOMEM;
	if (posix_memalign((void **)&w->blk, 4096, 4096)) {
		free(w);
		return -ENOMEM;
	}
	memset(w->blk, 0, 4096);
	w->s = s;
	w->id = worker;
	w->dst = s->sink + ((uint64_t)worker * (s->sink_anon ? KV_DIRECT_SPREAD : KV_SINK_SPREAD)) %
				   s->sink_phys;
	if (s->cfg.direct) {
		ret = kv_direct_worker_open(w);
		if (ret < 0) {
			free(w->blk);
			free(w);
			return ret;
		}
	}
	*out = w;
	return 0;
}

static void file_worker_close(struct dc_kv_worker *w)
{
	struct dc_kv_store *s = w->s;
	struct dc_kv_store_stats *a = &s->st, *b = &w->st;

	if (s->cfg.direct)
		kv_direct_worker_close(w);
	pthread_mutex_lock(&s->lock);
	a->fsyncs += b->fsyncs;
	a->fsync_ns += b->fsync_ns;
	a->fadvises += b->fadvises;
	a->drop_checks += b->drop_checks;
	a->drop_pages += b->drop_pages;
	a->drop_resident += b->drop_resident;
	a->split_writes += b->split_writes;
	a->syscall_writes += b->syscall_writes;
	pthread_mutex_unlock(&s->lock);
	free(w->blk);
	free(w);
}

static void file_close(struct dc_kv_store *s, struct dc_kv_store_stats *stats)
{
	*stats = s->st;
	if (s->sink_anon)
		free(s->sink);
	else
		munmap(s->sink, s->sink_len);
	pthread_mutex_destroy(&s->lock);
	close(s->dirfd);
	free(s);
}

/* ---- compat ---- */

/* One read() of up to len bytes, retried only when interrupted. Bytes read, or -errno. */
static int64_t read_once(int fd, void *buf, uint64_t len)
{
	ssize_t n;

	do {
		n = read(fd, buf, len);
	} while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : n;
}

static int64_t read_full(int fd, void *buf, uint64_t len)
{
	unsigned char *p = buf;
	uint64_t got = 0;

	while (got < len) {
		int64_t n = read_once(fd, p + got, len - got);

		if (n < 0)
			return n;
		if (n == 0)
			break;
		got += (uint64_t)n;
	}
	return (int64_t)got;
}

static int compat_put(struct dc_kv_worker *w, const struct dc_kv_obj *o,
		      const struct dc_kv_src *src, struct dc_kv_timing *t)
{
	char hdr[KV_COMPAT_HDR];
	unsigned char *buf = src->buf;
	uint64_t t0, t1, t2, seed = w->s->cfg.seed;
	int fd, ret;

	ret = dc_kv_npy_header(&w->s->cfg.model, o, KV_COMPAT_HDR, hdr);
	if (ret == 0)
		ret = kv_file_path(w, o);
	if (ret < 0)
		return ret;
	t0 = dc_now_ns();
	fd = openat(w->s->dirfd, w->name, KV_CREATE, 0666);
	if (fd < 0)
		return -errno;
	ret = dc_write_full(fd, hdr, KV_COMPAT_HDR, DC_AT_POS, NULL);
	/* numpy reserves the payload's blocks before its write; only ENOSPC is an error to it. */
	if (ret == 0 && o->bytes &&
	    fallocate(fd, FALLOC_FL_KEEP_SIZE, KV_COMPAT_HDR, (off_t)o->bytes) < 0 &&
	    errno == ENOSPC)
		ret = -ENOSPC;
	if (ret == 0 && src->whole) {
		dc_kv_stamp(o, seed, KV_COMPAT_HDR, 0, buf, o->bytes);
		ret = dc_write_full(fd, buf, o->bytes, DC_AT_POS, &w->st.syscall_writes);
	} else if (ret == 0) {
		if (o->bytes > src->len)
			w->st.split_writes++;
		for (uint64_t off = 0; off < o->bytes && ret == 0; off += src->len) {
			uint64_t n = o->bytes - off < src->len ? o->bytes - off : src->len;

			dc_kv_stamp(o, seed, KV_COMPAT_HDR, off, buf, n);
			ret = dc_write_full(fd, buf, n, DC_AT_POS, &w->st.syscall_writes);
		}
	}
	t1 = dc_now_ns();
	if (ret == 0) {
		if (fsync(fd) < 0)
			ret = -errno;
		else
			w->st.fsyncs++;
	}
	t2 = dc_now_ns();
	w->st.fsync_ns += t2 - t1;
	if (close(fd) < 0 && ret == 0 && errno != EINTR)
		ret = -errno;
	t->host_ns = t1 - t0;
	t->device_ns = t2 - t1;
	return ret;
}

/* Were the file's first pages dropped? mincore on a mapping of them (attestation: a shim that
 * turns posix_fadvise into a no-op leaves them cached). */
static void drop_check(struct dc_kv_worker *w, int fd, uint64_t size)
{
	unsigned char vec[KV_DROP_CHECK / 4096];
	uint64_t len = size < KV_DROP_CHECK ? size : KV_DROP_CHECK;
	void *p;

	if (!len)
		return;
	p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return;
	if (mincore(p, len, vec) == 0) {
		uint64_t pages = (len + 4095) / 4096;

		w->st.drop_checks++;
		w->st.drop_pages += pages;
		for (uint64_t i = 0; i < pages; i++)
			w->st.drop_resident += vec[i] & 1;
	}
	munmap(p, len);
}

static int compat_get(struct dc_kv_worker *w, const struct dc_kv_obj *o, struct dc_kv_timing *t)
{
	unsigned every = w->s->cfg.drop_check;
	struct stat st;
	uint64_t t0, t1, t2, size, big, got = 0;
	int64_t n;
	int fd, ret = kv_file_path(w, o);

	if (ret < 0)
		return ret;
	t0 = dc_now_ns();
	if (fstatat(w->s->dirfd, w->name, &st, AT_SYMLINK_NOFOLLOW) <
	    0) /* the reference's path.exists() */
		return -errno;
	size = (uint64_t)st.st_size;
	fd = openat(w->s->dirfd, w->name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0)
		w->st.fadvises++;
	if (every && w->reads++ % every == 0)
		drop_check(w, fd, size);
	close(fd);
	t1 = dc_now_ns();
	fd = openat(w->s->dirfd, w->name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* np.load: the magic through a buffered reader, the header again, then the array. */
	n = read_once(fd, w->blk, 4096);
	if (n >= 0 && lseek(fd, 0, SEEK_SET) == 0)
		n = read_once(fd, w->blk, KV_COMPAT_HDR);
	if (n >= 0 && lseek(fd, 0, SEEK_SET) == 0) {
		n = read_once(fd, w->blk, 4096);
		got = n > 0 ? (uint64_t)n : 0;
	}
	big = size > 4096 + KV_COMPAT_HDR ? size - KV_COMPAT_HDR - 4096 : 0;
	if (n >= 0 && big) {
		n = read_full(fd, w->dst + dc_buffered_land(), big);
		got += n > 0 ? (uint64_t)n : 0;
	}
	if (n >= 0 && got < size) { /* the payload's tail through the reader's buffer */
		n = read_once(fd, w->blk, 4096);
		got += n > 0 ? (uint64_t)n : 0;
	}
	ret = n < 0 ? (int)n : got != size ? -ENODATA : 0;
	close(fd);
	t2 = dc_now_ns();
	t->host_ns = t1 - t0;
	t->device_ns = t2 - t1;
	(void)o;
	return ret;
}

static int file_put(struct dc_kv_worker *w, const struct dc_kv_obj *o, const struct dc_kv_src *src,
		    struct dc_kv_timing *t)
{
	return w->s->cfg.direct ? kv_direct_put(w, o, src, t) : compat_put(w, o, src, t);
}

static int file_get(struct dc_kv_worker *w, const struct dc_kv_obj *o, struct dc_kv_timing *t)
{
	return w->s->cfg.direct ? kv_direct_get(w, o, t) : compat_get(w, o, t);
}

static int file_del(struct dc_kv_worker *w, const struct dc_kv_obj *o)
{
	int ret = kv_file_path(w, o);

	if (ret < 0)
		return ret;
	return unlinkat(w->s->dirfd, w->name, 0) < 0 ? -errno : 0;
}

const struct dc_kv_store_ops dc_kv_store_file = {
	.name = "file",
	.open = file_open,
	.worker_open = file_worker_open,
	.put = file_put,
	.get = file_get,
	.del = file_del,
	.worker_close = file_worker_close,
	.close = file_close,
};
