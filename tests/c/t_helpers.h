/* Helpers for the C tests (liburing's test/helpers.h style): each test is one program that exits
 * T_EXIT_PASS, T_EXIT_FAIL or T_EXIT_SKIP (CTest SKIP_RETURN_CODE 77), printing what failed.
 */
#ifndef T_HELPERS_H
#define T_HELPERS_H
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dlio_core/dlio_core.h"

#define T_EXIT_PASS 0
#define T_EXIT_FAIL 1
#define T_EXIT_SKIP 77

static int t_failures;

#define T_CHECK(cond, ...)                                                                         \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: FAIL: %s: ", __FILE__, __LINE__, #cond);           \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			t_failures++;                                                              \
		}                                                                                  \
	} while (0)

static inline int t_exit(void)
{
	if (t_failures) {
		fprintf(stderr, "%d check(s) failed\n", t_failures);
		return T_EXIT_FAIL;
	}
	return T_EXIT_PASS;
}

static inline void *t_aligned_alloc(size_t align, size_t size)
{
	void *p = NULL;

	if (posix_memalign(&p, align, size ? size : 1)) {
		fprintf(stderr, "out of memory (%zu bytes)\n", size);
		exit(T_EXIT_FAIL);
	}
	return p;
}

/* A fresh file of size bytes of dc_fill_random(seed) content under dir; path returned in buf. */
static inline int t_create_file(const char *dir, const char *name, uint64_t size, uint64_t seed,
				char *path, size_t pathlen)
{
	int fd, ret;

	snprintf(path, pathlen, "%s/dlio_t_%d_%s", dir, (int)getpid(), name);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return -errno;
	ret = dc_write_random(fd, 0, size, seed, 1u << 16);
	if (!ret && fsync(fd) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

/* Can this directory's filesystem do O_DIRECT? 1 yes, 0 no (reason printed). */
static inline int t_direct_ok(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECT);

	if (fd < 0) {
		printf("skip O_DIRECT on %s: %s\n", path, strerror(errno));
		return 0;
	}
	close(fd);
	return 1;
}

/* Expected content of a t_create_file file. */
static inline unsigned char *t_expected(uint64_t size, uint64_t seed)
{
	unsigned char *p = t_aligned_alloc(4096, (size_t)size);

	dc_fill_random(p, (size_t)size, seed);
	return p;
}

struct t_range {
	uint64_t offset, len;
};

/*
 * Drive an engine through its ops table with our own slots: read every range with up to qd
 * requests in flight and check each one's bytes (at buf + buf_off) against the expected file
 * content by CRC32C. Returns the number of mismatches/errors (0 = all good).
 */
static inline int t_engine_read_check(const struct dc_engine_ops *ops, struct dc_engine_opts *eo,
				      const char *path, int direct, const unsigned char *expect,
				      const struct t_range *rg, unsigned nrg, unsigned qd,
				      const char *label)
{
	unsigned nslots = (ops->caps & DC_CAP_ASYNC) ? qd : 1;
	struct dc_io *slots = calloc(nslots, sizeof(*slots));
	struct dc_io **freel = calloc(nslots, sizeof(*freel)),
		     **done = calloc(nslots, sizeof(*done));
	struct dc_file f = { .path = path, .fd = -1, .direct = direct, .reg_index = -1 };
	struct dc_engine *e = NULL;
	uint64_t maxlen = 0, cap;
	unsigned nfree = nslots, inflight = 0, next = 0, completed = 0;
	int bad = 0, ret;

	for (unsigned i = 0; i < nrg; i++)
		if (rg[i].len > maxlen)
			maxlen = rg[i].len;
	cap = (maxlen + 4095) / 4096 * 4096 + 2 * 65536;
	for (unsigned i = 0; i < nslots; i++) {
		slots[i].buf = t_aligned_alloc(4096, (size_t)cap);
		slots[i].cap = cap;
		slots[i].index = i;
		freel[i] = &slots[nslots - 1 - i];
	}
	ret = ops->init(&e, eo, slots, nslots);
	if (ret) {
		fprintf(stderr, "%s: init: %s\n", label, strerror(-ret));
		bad++;
		goto out_free;
	}
	ret = ops->open(e, &f, 0);
	if (ret) {
		fprintf(stderr, "%s: open %s: %s\n", label, path, strerror(-ret));
		bad++;
		goto out;
	}
	while (completed < nrg) {
		unsigned n = 0;

		while (next < nrg && nfree) {
			struct dc_io *io = freel[--nfree];

			io->file = &f;
			io->offset = rg[next].offset;
			io->len = rg[next].len;
			io->op = DC_OP_READ;
			io->user = next++;
			memset(io->buf, 0xa5, 64);
			ret = ops->submit(e, io);
			if (ret < 0) {
				fprintf(stderr, "%s: submit: %s\n", label, strerror(-ret));
				bad++;
				goto out_close;
			}
			if (ret == 1)
				done[n++] = io;
			else
				inflight++;
			if (n)
				break;
		}
		if (!n && inflight) {
			int r = ops->reap(e, 1, done, nslots);

			if (r < 0) {
				fprintf(stderr, "%s: reap: %s\n", label, strerror(-r));
				bad++;
				goto out_close;
			}
			n = (unsigned)r;
			inflight -= n;
		}
		for (unsigned i = 0; i < n; i++) {
			struct dc_io *io = done[i];
			const struct t_range *g = &rg[io->user];

			completed++;
			if (io->res != (int64_t)g->len) {
				fprintf(stderr, "%s: range %llu+%llu: res %lld (%s)\n", label,
					(unsigned long long)g->offset, (unsigned long long)g->len,
					(long long)io->res,
					io->res < 0 ? strerror((int)-io->res) : "short");
				bad++;
			} else if (dc_crc32c(0, (char *)io->buf + io->buf_off, g->len) !=
				   dc_crc32c(0, expect + g->offset, g->len)) {
				fprintf(stderr, "%s: range %llu+%llu: data mismatch (buf_off %u)\n",
					label, (unsigned long long)g->offset,
					(unsigned long long)g->len, io->buf_off);
				bad++;
			}
			freel[nfree++] = io;
		}
	}
out_close:
	/* Drain anything still queued after an error before tearing down. */
	while (inflight) {
		int r = ops->reap(e, 1, done, nslots);

		if (r <= 0)
			break;
		inflight -= (unsigned)r;
	}
	ops->close(e, &f);
out:
	ops->cleanup(e);
out_free:
	for (unsigned i = 0; i < nslots; i++)
		free(slots[i].buf);
	free(slots);
	free(freel);
	free(done);
	return bad;
}

/* One request that must fail with -want (e.g. ENODATA past EOF). 0 if it did. */
static inline int t_engine_expect_err(const struct dc_engine_ops *ops, struct dc_engine_opts *eo,
				      const char *path, int direct, uint64_t off, uint64_t len,
				      int want, const char *label)
{
	struct dc_io io;
	struct dc_file f = { .path = path, .fd = -1, .direct = direct, .reg_index = -1 };
	struct dc_engine *e = NULL;
	struct dc_io *done[1];
	uint64_t cap = (len + 4095) / 4096 * 4096 + 2 * 65536;
	int bad = 0, ret;

	memset(&io, 0, sizeof(io));
	io.buf = t_aligned_alloc(4096, (size_t)cap);
	io.cap = cap;
	if (ops->init(&e, eo, &io, 1) || ops->open(e, &f, 0)) {
		fprintf(stderr, "%s: init/open failed\n", label);
		free(io.buf);
		if (e)
			ops->cleanup(e);
		return 1;
	}
	io.file = &f;
	io.offset = off;
	io.len = len;
	io.op = DC_OP_READ;
	ret = ops->submit(e, &io);
	if (ret == 0)
		ret = ops->reap(e, 1, done, 1) == 1 ? 1 : -1;
	if (ret != 1 || io.res != -want) {
		fprintf(stderr, "%s: %llu+%llu: want -%d got ret %d res %lld\n", label,
			(unsigned long long)off, (unsigned long long)len, want, ret,
			(long long)io.res);
		bad = 1;
	}
	ops->close(e, &f);
	ops->cleanup(e);
	free(io.buf);
	return bad;
}

/* The standard range set for a file of size bytes: aligned, unaligned, unaligned tail, whole. */
static inline unsigned t_standard_ranges(struct t_range *rg, unsigned max, uint64_t size,
					 uint64_t seed)
{
	unsigned n = 0;
	uint64_t s = seed | 1;

	rg[n++] = (struct t_range){ 0, 4096 };
	rg[n++] = (struct t_range){ 4096, 65536 };
	rg[n++] = (struct t_range){ 100, 5000 };
	rg[n++] = (struct t_range){ 4095, 3 };
	rg[n++] = (struct t_range){ 8192 - 1, 4096 + 2 };
	rg[n++] = (struct t_range){ size - 1234, 1234 }; /* unaligned tail, to EOF */
	rg[n++] = (struct t_range){ size - 5000 - 7, 5000 + 7 };
	rg[n++] = (struct t_range){ size - 1, 1 };
	rg[n++] = (struct t_range){ 0, size }; /* whole file, unaligned length */
	while (n < max) {
		uint64_t off, len;

		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		off = s % size;
		len = 1 + (s >> 20) % 70000;
		if (len > size - off)
			len = size - off;
		if ((s >> 40) & 1) { /* half of them aligned */
			off &= ~4095ull;
			len = (len + 4095) & ~4095ull;
			if (len > size - off)
				len = (size - off) & ~4095ull;
			if (!len)
				continue;
		}
		rg[n++] = (struct t_range){ off, len };
	}
	return n;
}

/* dc_run_io over the ranges of one file: every op counted once, right bytes, no errors. */
static inline int t_run_io_check(const char *engine, const char *path, const struct t_range *rg,
				 unsigned nrg, unsigned threads, unsigned qd, int direct,
				 unsigned flags, const char *label)
{
	struct dc_op *ops = calloc(nrg, sizeof(*ops));
	uint64_t *first = calloc(threads + 1, sizeof(*first));
	struct dc_thread_stats *ts = calloc(threads, sizeof(*ts));
	struct dc_run_result *res = calloc(1, sizeof(*res));
	struct dc_run_config cfg;
	const char *paths[1] = { path };
	uint64_t bytes = 0, maxlen = 0;
	int bad = 0, ret;

	for (unsigned i = 0; i < nrg; i++) {
		ops[i].file = 0;
		ops[i].op = DC_OP_READ;
		ops[i].offset = rg[i].offset;
		ops[i].length = rg[i].len;
		bytes += rg[i].len;
		if (rg[i].len > maxlen)
			maxlen = rg[i].len;
	}
	for (unsigned t = 0; t <= threads; t++)
		first[t] = (uint64_t)nrg * t / threads;
	memset(&cfg, 0, sizeof(cfg));
	cfg.engine = engine;
	cfg.eng.qd = qd;
	cfg.eng.flags = flags;
	cfg.threads = threads;
	cfg.direct = direct;
	cfg.paths = paths;
	cfg.npaths = 1;
	cfg.ops = ops;
	cfg.nops = nrg;
	cfg.max_len = maxlen;
	cfg.thread_first_op = first;
	res->threads = ts;
	ret = dc_run_io(&cfg, res);
	if (ret) {
		fprintf(stderr, "%s: dc_run_io: %s (what %s, file %u, offset %llu)\n", label,
			strerror(-ret), res->error.what, res->error.file,
			(unsigned long long)res->error.offset);
		bad++;
	} else {
		uint64_t tops = 0;

		for (unsigned t = 0; t < threads; t++)
			tops += ts[t].ops;
		if (res->ops != nrg || res->bytes != bytes || res->errors ||
		    res->lat.count != nrg || tops != nrg) {
			fprintf(stderr, "%s: ops %llu/%u bytes %llu/%llu errors %llu lat %llu\n",
				label, (unsigned long long)res->ops, nrg,
				(unsigned long long)res->bytes, (unsigned long long)bytes,
				(unsigned long long)res->errors,
				(unsigned long long)res->lat.count);
			bad++;
		}
		printf("%s: %u ops, qd_used %u, flags 0x%x, p50 %llu ns\n", label, nrg,
		       res->qd_used, res->eng_flags_used,
		       (unsigned long long)dc_hist_percentile(&res->lat, 50));
	}
	free(ops);
	free(first);
	free(ts);
	free(res);
	return bad;
}

/* dc_run_io with one op past the end of the file: -ENODATA, "read", file 0, that offset. */
static inline int t_run_io_eof(const char *engine, const char *path, uint64_t size, int direct,
			       const char *label)
{
	struct dc_op ops[2] = {
		{ .file = 0, .op = DC_OP_READ, .offset = 0, .length = 4096 },
		{ .file = 0, .op = DC_OP_READ, .offset = size - 10, .length = 4096 },
	};
	uint64_t first[2] = { 0, 2 };
	struct dc_run_result *res = calloc(1, sizeof(*res));
	struct dc_run_config cfg;
	const char *paths[1] = { path };
	int bad = 0, ret;

	memset(&cfg, 0, sizeof(cfg));
	cfg.engine = engine;
	cfg.eng.qd = 1;
	cfg.threads = 1;
	cfg.direct = direct;
	cfg.paths = paths;
	cfg.npaths = 1;
	cfg.ops = ops;
	cfg.nops = 2;
	cfg.max_len = 4096;
	cfg.thread_first_op = first;
	ret = dc_run_io(&cfg, res);
	if (ret != -ENODATA || res->error.err != ENODATA || strcmp(res->error.what, "read") ||
	    res->error.file != 0 || res->error.offset != size - 10 || res->ops != 1) {
		fprintf(stderr, "%s: EOF: ret %d err %d what '%s' file %u off %llu ops %llu\n",
			label, ret, res->error.err, res->error.what, res->error.file,
			(unsigned long long)res->error.offset, (unsigned long long)res->ops);
		bad = 1;
	}
	free(res);
	return bad;
}

/* dc_run_train on a real file: steps of 4 samples of 3 ops each (OPEN, middle, CLOSE) at mixed
 * aligned/unaligned ranges; every step's bytes, every op and every sample accounted for. */
static inline int t_run_train_check(const char *engine, const char *path, uint64_t size,
				    unsigned readers, unsigned qd, int direct, unsigned flags,
				    const char *label)
{
	enum { NSTEPS = 8, SPS = 4, OPS = 3 };
	struct dc_op ops[NSTEPS * SPS * OPS];
	struct dc_step steps[NSTEPS];
	uint64_t want[NSTEPS] = { 0 }, s = 0x9e3779b97f4a7c15ull, maxlen = 0;
	struct dc_run_result *res = calloc(1, sizeof(*res));
	struct dc_run_config cfg;
	const char *paths[2] = { path, path };
	unsigned i = 0;
	int bad = 0, ret;

	res->threads = calloc(readers ? readers : 1, sizeof(*res->threads));
	res->step_times = calloc(NSTEPS, sizeof(*res->step_times));
	for (unsigned k = 0; k < NSTEPS; k++) {
		steps[k] = (struct dc_step){
			.first_op = i, .nops = SPS * OPS, .nsamples = SPS, .compute_ns = 100000
		};
		for (unsigned j = 0; j < SPS * OPS; j++, i++) {
			uint64_t off, len;

			s ^= s << 13;
			s ^= s >> 7;
			s ^= s << 17;
			off = s % (size - 1);
			len = 1 + (s >> 24) % 40000;
			if ((s >> 50) & 1)
				off &= ~4095ull;
			if (len > size - off)
				len = size - off;
			ops[i] = (struct dc_op){ .file = (k + j / OPS) & 1,
						 .op = DC_OP_READ,
						 .flags = (j % OPS == 0 ? DC_OPF_OPEN : 0) |
							  (j % OPS == OPS - 1 ? DC_OPF_CLOSE : 0),
						 .offset = off,
						 .length = len };
			want[k] += len;
			if (len > maxlen)
				maxlen = len;
		}
	}
	memset(&cfg, 0, sizeof(cfg));
	cfg.engine = engine;
	cfg.eng.qd = qd;
	cfg.eng.flags = flags;
	cfg.threads = readers;
	cfg.direct = direct;
	cfg.paths = paths;
	cfg.npaths = 2;
	cfg.ops = ops;
	cfg.nops = i;
	cfg.max_len = maxlen;
	cfg.steps = steps;
	cfg.nsteps = NSTEPS;
	cfg.prefetch = 2;
	ret = dc_run_train(&cfg, res);
	if (ret || res->steps_done != NSTEPS || res->ops != i || res->errors ||
	    res->sample_lat.count != NSTEPS * SPS) {
		fprintf(stderr,
			"%s: train ret %d (%s, file %u off %llu) steps %llu ops %llu/%u "
			"samples %llu\n",
			label, ret, res->error.what, res->error.file,
			(unsigned long long)res->error.offset, (unsigned long long)res->steps_done,
			(unsigned long long)res->ops, i, (unsigned long long)res->sample_lat.count);
		bad++;
	}
	for (unsigned k = 0; k < NSTEPS && !bad; k++)
		if (res->step_times[k].bytes != want[k] || res->step_times[k].compute_ns < 100000) {
			fprintf(stderr, "%s: step %u bytes %llu want %llu\n", label, k,
				(unsigned long long)res->step_times[k].bytes,
				(unsigned long long)want[k]);
			bad++;
		}
	free(res->threads);
	free(res->step_times);
	free(res);
	return bad;
}

#endif
