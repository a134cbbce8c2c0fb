/* Dataset file generation from segment programs: see gen.h. */
#include "dlio_core/gen.h"
#include "dlio_core/fill.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core_int.h"

#ifndef POOL
#define POOL (1u << 20) /* random bytes every file's content is drawn from (see gen.h) */
#endif
#ifndef MIRROR
#define MIRROR                                                                                     \
	(256u << 10) /* the pool's start again after it: any window <= MIRROR is contiguous */
#endif
#define NBLK  (POOL / 4096)
#define STAMP 16
#define BATCH (1u << 20) /* bytes per pwritev */
_Static_assert(BATCH <= POOL, "the windows of one batch must not overlap in the pool");
#define NIOV      256
#define NSMALL    512 /* 8-byte slots for inline/checksum bytes of one batch */
#define NRESTORE  1024
#define NPATCH    8
#define DIO       4096u /* O_DIRECT offset and memory alignment (a page: any device's block size) */
#define POOL_SEED 0x6c696f2d66617374ull

static unsigned char *pristine;    /* POOL + MIRROR bytes, never written after init */
static uint32_t tail_crc[2][NBLK]; /* crc of bytes [16, 4096) of each pool block, per kind */
static uint32_t poly[2] = { 0x82f63b78u, 0xedb88320u };
static uint32_t x2n[2][32];
static uint32_t op_tail[2]; /* x^(8*4080) mod p: shifts a crc over a block's tail */
/* op_tail times a crc, by byte (the product is linear in the crc): 4 lookups instead of a 32-step
 * multiplication for every whole 4 KiB block a checksum covers. */
static uint32_t tail_tab[2][4][256];
static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_key_t work_key;
static int init_failed;

/* GF(2) polynomial arithmetic on reflected CRCs (as zlib's crc32_combine): a*b mod p. */
static uint32_t multmodp(uint32_t a, uint32_t b, uint32_t p)
{
	uint32_t m = 1u << 31, r = 0;
	for (;;) {
		if (a & m) {
			r ^= b;
			if ((a & (m - 1)) == 0)
				break;
		}
		m >>= 1;
		b = b & 1 ? (b >> 1) ^ p : b >> 1;
	}
	return r;
}

static uint32_t x8nmodp(int kind, uint64_t n)
{
	uint32_t r = 1u << 31;
	unsigned k = 3;
	while (n) {
		if (n & 1)
			r = multmodp(x2n[kind][k & 31], r, poly[kind]);
		n >>= 1;
		k++;
	}
	return r;
}

static uint32_t crc_update(int kind, uint32_t crc, const void *p, size_t len)
{
	return kind == DC_CRC_32C ? dc_crc32c(crc, p, len) : dc_crc32(crc, p, len);
}

static void free_work(void *p)
{
	free(p);
}

static void init(void)
{
	for (int k = 0; k < 2; k++) {
		x2n[k][0] = 1u << 30; /* x^1 */
		for (int n = 1; n < 32; n++)
			x2n[k][n] = multmodp(x2n[k][n - 1], x2n[k][n - 1], poly[k]);
		op_tail[k] = x8nmodp(k, 4096 - STAMP);
		for (int j = 0; j < 4; j++)
			for (uint32_t v = 0; v < 256; v++)
				tail_tab[k][j][v] = multmodp(op_tail[k], v << (8 * j), poly[k]);
	}
	if (posix_memalign((void **)&pristine, 4096, POOL + MIRROR) ||
	    pthread_key_create(&work_key, free_work)) {
		init_failed = 1;
		return;
	}
	dc_fill_random(pristine, POOL, POOL_SEED);
	memcpy(pristine + POOL, pristine, MIRROR);
	for (int k = 0; k < 2; k++)
		for (unsigned b = 0; b < NBLK; b++)
			tail_crc[k][b] =
				crc_update(k, 0, pristine + (size_t)b * 4096 + STAMP, 4096 - STAMP);
}

/* This thread's writable copy of the pool (stamps go in, are written out, and are undone). */
static unsigned char *work_pool(void)
{
	unsigned char *w = pthread_getspecific(work_key);
	if (w)
		return w;
	if (posix_memalign((void **)&w, 4096, POOL + MIRROR))
		return NULL;
	memcpy(w, pristine, POOL + MIRROR);
	if (pthread_setspecific(work_key, w)) {
		free(w);
		return NULL;
	}
	return w;
}

static inline uint64_t pool_pos(uint64_t seed, uint64_t off)
{
	return (off + 4096 * (seed % NBLK)) % POOL;
}

static inline void stamp_bytes(unsigned char s[STAMP], uint64_t seed, uint64_t pos)
{
	memcpy(s, &seed, 8);
	memcpy(s + 8, &pos, 8);
}

/* Apply the stamps of random segment [s0, s1) that fall in [x, y) to dst (dst[0] is byte x). The
 * segment's own start is stamped first, so a block-aligned stamp overlapping it wins. Calls
 * note(dst offset, length) for each byte range it wrote (to undo them in the work pool). */
struct stamped {
	uint32_t at[2 + BATCH / 4096 + 1];
	uint32_t len[2 + BATCH / 4096 + 1];
	unsigned n;
};

static void put_stamp(unsigned char *dst, uint64_t x, uint64_t y, uint64_t sp, uint64_t s1,
		      uint64_t seed, struct stamped *out)
{
	unsigned char s[STAMP];
	uint64_t end = sp + STAMP < s1 ? sp + STAMP : s1;
	uint64_t a = sp > x ? sp : x, b = end < y ? end : y;
	if (a >= b)
		return;
	stamp_bytes(s, seed, sp);
	memcpy(dst + (a - x), s + (a - sp), b - a);
	if (out) {
		out->at[out->n] = (uint32_t)(a - x);
		out->len[out->n++] = (uint32_t)(b - a);
	}
}

static void apply_stamps(unsigned char *dst, uint64_t x, uint64_t y, uint64_t s0, uint64_t s1,
			 uint64_t seed, struct stamped *out)
{
	if (out)
		out->n = 0;
	if (s0 & 4095)
		put_stamp(dst, x, y, s0, s1, seed, out);
	uint64_t b = x & ~(uint64_t)4095;
	if (b < s0)
		b += 4096;
	for (; b < y; b += 4096)
		put_stamp(dst, x, y, b, s1, seed, out);
}

/* Random bytes [x, y) (y - x <= MIRROR) of segment [s0, s1) into dst. */
static void render_rand(unsigned char *dst, uint64_t x, uint64_t y, uint64_t s0, uint64_t s1,
			uint64_t seed)
{
	memcpy(dst, pristine + pool_pos(seed, x), y - x);
	apply_stamps(dst, x, y, s0, s1, seed, NULL);
}

/* crc over random bytes [x, y) of segment [s0, s1): whole blocks combined from the pool's block
 * checksums, the ragged ends rendered and checksummed. */
static uint32_t crc_rand(int kind, uint32_t crc, uint64_t x, uint64_t y, uint64_t s0, uint64_t s1,
			 uint64_t seed)
{
	unsigned char tmp[4096];
	uint64_t pos = x;
	while (pos < y) {
		uint64_t b = pos & ~(uint64_t)4095;
		if (pos == b && b + 4096 <= y) {
			unsigned char s[STAMP];
			stamp_bytes(s, seed, b);
			crc = crc_update(kind, crc, s, STAMP);
			crc = tail_tab[kind][0][crc & 0xff] ^ tail_tab[kind][1][(crc >> 8) & 0xff] ^
			      tail_tab[kind][2][(crc >> 16) & 0xff] ^ tail_tab[kind][3][crc >> 24] ^
			      tail_crc[kind][pool_pos(seed, b) / 4096];
			pos += 4096;
			continue;
		}
		uint64_t e = b + 4096 < y ? b + 4096 : y;
		render_rand(tmp, pos, e, s0, s1, seed);
		crc = crc_update(kind, crc, tmp, e - pos);
		pos = e;
	}
	return crc;
}

struct emit {
	int fd;
	unsigned char *buf; /* render mode: the output (no fd) */
	uint64_t buflen;
	unsigned char *work;
	uint64_t seed, off;
	uint64_t pend_off, pending;
	struct iovec iov[NIOV];
	unsigned niov;
	unsigned char small[NSMALL][8];
	unsigned nsmall;
	uint32_t rs_at[NRESTORE], rs_len[NRESTORE];
	unsigned nrs;
	int crc_on, crc_kind;
	uint32_t crc, kept;
	uint64_t patch_off[NPATCH];
	unsigned char patch_val[NPATCH][4];
	unsigned npatch;
	struct stamped st;
	/* O_DIRECT (DC_GEN_DIRECT): the batch is copied here and written in whole DIO blocks from
	 * stage_off; the last carry bytes (< DIO, not yet written) wait for the next batch. */
	unsigned char *stage;
	uint64_t stage_off, carry;
	/* Files are created unnamed in their directory (O_TMPFILE) and linked under their final name
	 * once complete: no rename, and a crash leaves nothing behind. tmpfile: 1 while that works here
	 * (0 after the filesystem refused it: temp name + rename); flink: 1 while linkat(AT_EMPTY_PATH)
	 * is allowed (else through /proc/self/fd). dirfd: the directory of the last file. */
	int tmpfile, flink, dirfd;
	size_t dirlen;
	char dir[PATH_MAX];
	char tmpname[PATH_MAX]; /* a temporary name made from tmp_suffix */
};

/* Leave O_DIRECT for what cannot be written in whole aligned blocks (a file's last partial block,
 * the checksums patched into earlier bytes): written through the page cache, as dd does. */
static int buffered(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || ((fl & O_DIRECT) && fcntl(fd, F_SETFL, fl & ~O_DIRECT)))
		return -errno;
	return 0;
}

/* O_DIRECT: append the batch to the staging buffer and write its whole blocks (all of it when
 * last: the tail through the page cache). */
static int flush_direct(struct emit *e, int last)
{
	unsigned char *p = e->stage + e->carry;
	for (unsigned i = 0; i < e->niov; i++) {
		memcpy(p, e->iov[i].iov_base, e->iov[i].iov_len);
		p += e->iov[i].iov_len;
	}
	uint64_t have = e->carry + e->pending, whole = have & ~(uint64_t)(DIO - 1);
	int rc = whole ? dc_pwrite_full(e->fd, e->stage, whole, e->stage_off) : 0;
	if (!rc && last && have > whole && !(rc = buffered(e->fd)))
		rc = dc_pwrite_full(e->fd, e->stage + whole, have - whole, e->stage_off + whole);
	if (rc)
		return rc;
	if (last) {
		e->stage_off += have;
		e->carry = 0;
	} else {
		memmove(e->stage, e->stage + whole, have - whole);
		e->stage_off += whole;
		e->carry = have - whole;
	}
	return 0;
}

static int flush_to(struct emit *e, int last)
{
	if (e->stage) {
		int rc = flush_direct(e, last);
		if (rc)
			return rc;
		goto done;
	}
	struct iovec *iov = e->iov;
	unsigned n = e->niov;
	uint64_t off = e->pend_off;
	while (n) {
		ssize_t w = dc_wrote(pwritev(e->fd, iov, (int)n, (off_t)off));
		if (w < 0)
			return (int)w;
		off += (uint64_t)w;
		while (n && (size_t)w >= iov->iov_len) {
			w -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n) {
			iov->iov_base = (char *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
done:
	for (unsigned i = 0; i < e->nrs;
	     i++) /* undo the stamps: the pool is the same for the next file */
		memcpy(e->work + e->rs_at[i], pristine + e->rs_at[i], e->rs_len[i]);
	e->nrs = 0;
	e->niov = 0;
	e->nsmall = 0;
	e->pend_off = e->off;
	e->pending = 0;
	return 0;
}

static int flush(struct emit *e)
{
	return flush_to(e, 0);
}

/* Make room for one more iovec of up to len bytes; returns the bytes that fit (> 0) or -errno. */
static int64_t room(struct emit *e, uint64_t len, unsigned stamps)
{
	if (e->niov == NIOV || e->pending >= BATCH || e->nsmall == NSMALL ||
	    e->nrs + stamps > NRESTORE) {
		int rc = flush(e);
		if (rc)
			return rc;
	}
	uint64_t space = BATCH - e->pending;
	return (int64_t)(len < space ? len : space);
}

static int emit_bytes(struct emit *e, const unsigned char *p, uint64_t len)
{
	if (e->crc_on)
		e->crc = crc_update(e->crc_kind, e->crc, p, len);
	if (e->buf) {
		if (e->off + len > e->buflen)
			return -EINVAL;
		memcpy(e->buf + e->off, p, len);
		e->off += len;
		return 0;
	}
	while (len) {
		int64_t n = room(e, len, 0);
		if (n < 0)
			return (int)n;
		e->iov[e->niov].iov_base = (void *)p;
		e->iov[e->niov++].iov_len = (size_t)n;
		e->pending += (uint64_t)n;
		e->off += (uint64_t)n;
		p += n;
		len -= (uint64_t)n;
	}
	return 0;
}

/* Up to 8 bytes that must live until the batch is written. */
static int emit_small(struct emit *e, const unsigned char *p, unsigned len)
{
	if (!e->buf && (e->nsmall == NSMALL || e->niov == NIOV)) {
		int rc = flush(e);
		if (rc)
			return rc;
	}
	unsigned char *slot = e->buf ? (unsigned char *)p : memcpy(e->small[e->nsmall++], p, len);
	return emit_bytes(e, slot, len);
}

static int emit_rand(struct emit *e, uint64_t len)
{
	uint64_t s0 = e->off, s1 = e->off + len;
	if (e->crc_on)
		e->crc = crc_rand(e->crc_kind, e->crc, s0, s1, s0, s1, e->seed);
	if (e->buf) {
		if (s1 > e->buflen)
			return -EINVAL;
		for (uint64_t x = s0; x < s1; x += MIRROR)
			render_rand(e->buf + x, x, x + MIRROR < s1 ? x + MIRROR : s1, s0, s1,
				    e->seed);
		e->off = s1;
		return 0;
	}
	while (e->off < s1) {
		int64_t n = room(e, s1 - e->off, 2 + BATCH / 4096 + 1);
		if (n < 0)
			return (int)n;
		if (n > MIRROR)
			n = MIRROR;
		uint64_t x = e->off, y = x + (uint64_t)n;
		uint64_t q = pool_pos(e->seed, x);
		unsigned char *win = e->work + q;
		apply_stamps(win, x, y, s0, s1, e->seed, &e->st);
		for (unsigned i = 0; i < e->st.n; i++) {
			e->rs_at[e->nrs] = (uint32_t)(q + e->st.at[i]);
			e->rs_len[e->nrs++] = e->st.len[i];
		}
		e->iov[e->niov].iov_base = win;
		e->iov[e->niov++].iov_len = (size_t)n;
		e->pending += (uint64_t)n;
		e->off = y;
	}
	return 0;
}

static void put_value(unsigned char out[4], uint32_t c, unsigned how)
{
	if (how == DC_PUT_MASKED_LE)
		c = ((c >> 15) | (c << 17)) + 0xa282ead8u;
	for (int i = 0; i < 4; i++)
		out[i] = how == DC_PUT_BE ? (unsigned char)(c >> (24 - 8 * i))
					  : (unsigned char)(c >> (8 * i));
}

static int exec_seg(struct emit *e, const struct dc_gen_seg *s, const unsigned char *blob)
{
	unsigned char v[8];
	switch (s->kind) {
	case DC_SEG_LIT:
		return emit_bytes(e, blob + s->a, s->b);
	case DC_SEG_INLINE:
		if (s->arg > 8)
			return -EINVAL;
		for (unsigned i = 0; i < s->arg; i++)
			v[i] = (unsigned char)(s->a >> (8 * i));
		return emit_small(e, v, s->arg);
	case DC_SEG_RAND:
		return emit_rand(e, s->b);
	case DC_SEG_CRC_BEGIN:
		if (s->arg > DC_CRC_32)
			return -EINVAL;
		e->crc_on = 1;
		e->crc_kind = (int)s->arg;
		e->crc = 0;
		return 0;
	case DC_SEG_CRC_END:
		e->crc_on = 0;
		e->kept = e->crc;
		return 0;
	case DC_SEG_PUT:
		put_value(v, e->kept, s->arg);
		return emit_small(e, v, 4);
	case DC_SEG_PATCH:
		if (e->npatch == NPATCH)
			return -EINVAL;
		e->patch_off[e->npatch] = s->a;
		put_value(e->patch_val[e->npatch++], e->kept, s->arg);
		return 0;
	default:
		return -EINVAL;
	}
}

static int run_program(struct emit *e, const struct dc_gen_seg *segs, uint64_t n,
		       const unsigned char *blob)
{
	for (uint64_t i = 0; i < n; i++) {
		if (segs[i].kind == DC_SEG_REPEAT) {
			uint64_t k = segs[i].b;
			if (i + 1 + k > n)
				return -EINVAL;
			for (uint64_t c = 0; c < segs[i].a; c++)
				for (uint64_t j = 0; j < k; j++) {
					int rc = exec_seg(e, &segs[i + 1 + j], blob);
					if (rc)
						return rc;
				}
			i += k;
			continue;
		}
		int rc = exec_seg(e, &segs[i], blob);
		if (rc)
			return rc;
	}
	return 0;
}

uint64_t dc_gen_size(const struct dc_gen_seg *segs, uint64_t n)
{
	uint64_t total = 0;
	for (uint64_t i = 0; i < n; i++) {
		uint64_t mult = 1, k = 1;
		if (segs[i].kind == DC_SEG_REPEAT) {
			mult = segs[i].a;
			k = segs[i].b;
			i++;
		}
		for (uint64_t j = 0; j < k && i + j < n; j++) {
			const struct dc_gen_seg *s = &segs[i + j];
			uint64_t len = s->kind == DC_SEG_LIT || s->kind == DC_SEG_RAND ? s->b
				       : s->kind == DC_SEG_INLINE                      ? s->arg
				       : s->kind == DC_SEG_PUT                         ? 4
										       : 0;
			total += mult * len;
		}
		i += k - 1;
	}
	return total;
}

int dc_gen_render(const struct dc_gen_seg *segs, uint64_t nsegs, const unsigned char *blob,
		  uint64_t seed, unsigned char *buf, uint64_t len)
{
	pthread_once(&once, init);
	if (init_failed)
		return -ENOMEM;
	struct emit *e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->fd = -1;
	e->buf = buf;
	e->buflen = len;
	e->seed = seed;
	int rc = run_program(e, segs, nsegs, blob);
	for (unsigned i = 0; !rc && i < e->npatch; i++) {
		if (e->patch_off[i] + 4 > len)
			rc = -EINVAL;
		else
			memcpy(buf + e->patch_off[i], e->patch_val[i], 4);
	}
	free(e);
	return rc;
}

/* The directory of path (before its last '/') as an fd, kept while consecutive files share it;
 * *base gets the name within it. Returns the fd or -errno. */
static int dir_of(struct emit *e, const char *path, const char **base)
{
	const char *slash = strrchr(path, '/');
	size_t len = slash ? (size_t)(slash - path) : 0;
	*base = slash ? slash + 1 : path;
	if (e->dirfd >= 0 && len == e->dirlen && !memcmp(e->dir, path, len))
		return e->dirfd;
	if (e->dirfd >= 0)
		close(e->dirfd);
	e->dirfd = -1;
	if (len >= sizeof(e->dir))
		return -ENAMETOOLONG;
	memcpy(e->dir, path, len);
	e->dir[len] = 0;
	e->dirlen = len;
	e->dirfd = open(!slash ? "." : len ? e->dir : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return e->dirfd >= 0 ? e->dirfd : -errno;
}

/* Give the complete unnamed file fd its final name (replacing a file of that name, which is
 * removed first: for a moment there is no file under the name, never a partial one). Returns 0,
 * -errno, or 1 when this system cannot link unnamed files (the caller writes the file again the
 * classic way). */
static int link_final(struct emit *e, int fd, int dirfd, const char *base)
{
	char proc[64];
	int replaced = 0;
	for (;;) {
		int rc;
		if (e->flink) {
			rc = linkat(fd, "", dirfd, base, AT_EMPTY_PATH);
		} else {
			snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
			rc = linkat(AT_FDCWD, proc, dirfd, base, AT_SYMLINK_FOLLOW);
		}
		if (!rc)
			return 0;
		/* AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH before Linux 6.10: go through /proc */
		if (errno == ENOENT && e->flink) {
			e->flink = 0;
			continue;
		}
		if (errno == ENOENT) /* no /proc either */
			return 1;
		if (errno != EEXIST || replaced)
			return -errno;
		if (unlinkat(dirfd, base, 0) && errno != ENOENT)
			return -errno;
		replaced = 1;
	}
}

/* The temporary name of file f (given, or made from its suffix), or NULL when too long. */
static const char *tmp_of(struct emit *e, const struct dc_gen_file *f)
{
	if (f->tmp)
		return f->tmp;
	const char *slash = strrchr(f->path, '/');
	int head = slash ? (int)(slash - f->path + 1) : 0;
	int n = snprintf(e->tmpname, sizeof(e->tmpname), "%.*s.%s%s", head, f->path, f->path + head,
			 f->tmp_suffix ? f->tmp_suffix : ".tmp");
	return n > 0 && (size_t)n < sizeof(e->tmpname) ? e->tmpname : NULL;
}

static int write_one(struct emit *e, const struct dc_gen_file *f, const struct dc_gen_seg *segs,
		     const unsigned char *blob, unsigned flags, uint64_t *bytes, const char **what)
{
	const char *tmp = NULL;
	*what = "create";
	int direct = (flags & DC_GEN_DIRECT) ? O_DIRECT : 0;
	const char *base = NULL;
	int dirfd = -1;
again:
	if (e->tmpfile) {
		dirfd = dir_of(e, f->path, &base);
		if (dirfd < 0)
			return dirfd;
		e->fd = openat(dirfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC | direct, 0644);
		/* this filesystem (or kernel) has no unnamed files: temp name + rename */
		if (e->fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
			e->tmpfile = 0;
			goto again;
		}
	} else {
		if (!(tmp = tmp_of(e, f)))
			return -ENAMETOOLONG;
		e->fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | direct, 0644);
	}
	if (e->fd < 0)
		return -errno;
	e->seed = f->seed;
	e->off = e->pend_off = e->pending = 0;
	e->niov = e->nsmall = e->nrs = e->npatch = 0;
	e->crc_on = 0;
	e->stage_off = e->carry = 0;
	*what = "write";
	int rc = run_program(e, segs + f->first_seg, f->nsegs, blob);
	if (!rc)
		rc = flush_to(e, 1);
	if (!rc && e->npatch && e->stage)
		rc = buffered(e->fd);
	for (unsigned i = 0; !rc && i < e->npatch; i++)
		if (pwrite(e->fd, e->patch_val[i], 4, (off_t)e->patch_off[i]) != 4)
			rc = errno ? -errno : -EIO;
	if (!rc && (flags & DC_GEN_FSYNC)) {
		*what = "fsync";
		if (fsync(e->fd))
			rc = -errno;
	}
	if (!rc && e->tmpfile) {
		*what = "link";
		rc = link_final(e, e->fd, dirfd, base);
		/* cannot name an unnamed file here: write it again under a temp name */
		if (rc == 1) {
			close(e->fd);
			e->tmpfile = 0;
			goto again;
		}
	}
	if (close(e->fd) && !rc) {
		*what = "close";
		rc = -errno;
	}
	if (!rc && !e->tmpfile) {
		*what = "rename";
		if (rename(tmp, f->path))
			rc = -errno;
	}
	if (rc && !e->tmpfile)
		unlink(tmp);
	*bytes = e->off;
	return rc;
}

int dc_gen_files(const struct dc_gen_file *files, uint64_t n, const struct dc_gen_seg *segs,
		 const unsigned char *blob, unsigned flags, volatile int *stop,
		 uint64_t *done_bytes, uint64_t *done_files, struct dc_gen_error *err)
{
	pthread_once(&once, init);
	unsigned char *work = init_failed ? NULL : work_pool();
	struct emit *e = work ? calloc(1, sizeof(*e)) : NULL;
	if (e && (flags & DC_GEN_DIRECT) && posix_memalign((void **)&e->stage, DIO, BATCH + DIO)) {
		free(e);
		e = NULL;
	}
	if (!e) {
		if (err) {
			err->err = ENOMEM;
			err->file = 0;
			snprintf(err->what, sizeof(err->what), "allocate");
		}
		return -ENOMEM;
	}
	e->work = work;
	e->tmpfile = !(flags & DC_GEN_RENAME);
	e->flink = 1;
	e->dirfd = -1;
	int rc = 0;
	for (uint64_t i = 0; i < n; i++) {
		if (stop && *stop) {
			rc = -ECANCELED;
			break;
		}
		uint64_t bytes = 0;
		const char *what = "";
		rc = write_one(e, &files[i], segs, blob, flags, &bytes, &what);
		if (rc) {
			if (err) {
				err->err = -rc;
				err->file = i;
				snprintf(err->what, sizeof(err->what), "%s", what);
			}
			/* The work pool may hold stamps of the failed batch: undo them. */
			for (unsigned j = 0; j < e->nrs; j++)
				memcpy(work + e->rs_at[j], pristine + e->rs_at[j], e->rs_len[j]);
			break;
		}
		if (done_bytes)
			__atomic_fetch_add(done_bytes, bytes, __ATOMIC_RELAXED);
		if (done_files)
			__atomic_fetch_add(done_files, 1, __ATOMIC_RELAXED);
	}
	if (e->dirfd >= 0)
		close(e->dirfd);
	free(e->stage);
	free(e);
	return rc;
}
