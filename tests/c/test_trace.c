/* Tracing: a full buffer counts what it drops; JSON escaping of hostile file names; the .pfw
 * writer's lines (integer us, engine category, one FH line per file); in-flight spans on lanes that
 * never cross; a traced train run (null engine) records exactly one event per op, sample,
 * fetch and compute, and a traced io run one per request. */
#include "t_helpers.h"

static void test_full_buffer(void)
{
	struct dc_trace tr = { 0 };

	T_CHECK(dc_trace_alloc(&tr, 2, NULL, 3) == 0, "alloc");
	for (int i = 0; i < 5; i++)
		dc_trace_add(&tr.bufs[0], DC_TR_READ, 1, 100 + i, 10, 0, 4096 * i, 4096, 0);
	dc_trace_add(&tr.bufs[1], DC_TR_COMPUTE, 0, 1, 2, DC_TRACE_NONE32, 0, 0, 7);
	T_CHECK(tr.bufs[0].n == 3 && tr.bufs[0].dropped == 2, "n %llu dropped %llu",
		(unsigned long long)tr.bufs[0].n, (unsigned long long)tr.bufs[0].dropped);
	T_CHECK(tr.bufs[0].ev[2].t_start == 102 && tr.bufs[0].ev[2].offset == 8192,
		"3rd event kept");
	T_CHECK(dc_trace_count(&tr) == 4 && dc_trace_dropped(&tr) == 2, "totals");
	dc_trace_free(&tr);
	T_CHECK(tr.bufs == NULL && tr.nbufs == 0, "freed");
}

static void test_escape(void)
{
	char out[256];
	int n;

	n = dc_json_escape("a\"b\\c/d", out, sizeof(out));
	T_CHECK(n == 9 && strcmp(out, "a\\\"b\\\\c/d") == 0, "quote/backslash: %d %s", n, out);
	n = dc_json_escape("x\ny\tz\x01", out, sizeof(out));
	T_CHECK(strcmp(out, "x\\ny\\tz\\u0001") == 0, "control chars: %s", out);
	n = dc_json_escape("caf\xc3\xa9", out, sizeof(out));
	T_CHECK(strcmp(out, "caf\xc3\xa9") == 0, "utf-8 copied: %s", out);
	T_CHECK(dc_json_escape("\"\"\"", out, 6) == -ENOSPC, "too small");
	T_CHECK(dc_json_escape("\"\"\"", out, 7) == 6, "just fits");
}

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	long len;
	char *buf;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = calloc(1, (size_t)len + 1);
	if (fread(buf, 1, (size_t)len, f) != (size_t)len)
		len = 0;
	fclose(f);
	return buf;
}

static int count_lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

static void test_write(void)
{
	const char *paths[2] = { "/data/plain.npz", "/data/we\"ird\\name\n.npz" };
	struct dc_trace_event ev[3];
	char tmpl[] = "/tmp/dlio_t_trace_XXXXXX";
	int fd = mkstemp(tmpl);
	uint64_t id = 10;
	uint32_t fh_new[2] = { 0 }, lanes[3] = { 0 }, h = dc_trace_fhash(paths[1]);
	size_t nnew = 9;
	struct dc_pfw_opts o = { .pid = 4,
				 .t0_ns = 1000000000ull,
				 .io_cat = "IO_URING",
				 .fh_new = fh_new,
				 .nnew = &nnew,
				 .lanes = lanes,
				 .ntids = 3 };
	char *text, want[512];

	memset(ev, 0, sizeof(ev));
	ev[0] = (struct dc_trace_event){ .t_start = 1000,
					 .dur = 2500,
					 .offset = 4096,
					 .bytes = 512,
					 .step = 3,
					 .file = 1,
					 .tid = 2,
					 .kind = DC_TR_READ };
	ev[1] = (struct dc_trace_event){ .t_start = 5000,
					 .dur = 1000000,
					 .step = 3,
					 .file = DC_TRACE_NONE32,
					 .kind = DC_TR_COMPUTE };
	ev[2] = (struct dc_trace_event){ .t_start = 7,
					 .dur = 1,
					 .bytes = 512,
					 .step = DC_TRACE_NONE64,
					 .file = 1,
					 .kind = DC_TR_SAMPLE };
	T_CHECK(fd >= 0, "mkstemp");
	T_CHECK(dc_trace_write_pfw(fd, ev, 3, paths, &o, &id) == 0, "write");
	T_CHECK(id == 14, "ids: one FH line + 3 events, next id %llu", (unsigned long long)id);
	T_CHECK(nnew == 1 && fh_new[0] == h, "one new file hash: %zu", nnew);
	T_CHECK(lanes[0] == 1 && lanes[1] == 0 && lanes[2] == 1, "lanes %u %u %u", lanes[0],
		lanes[1], lanes[2]);
	/* A second batch into the same file: its FH line is there already. */
	o.fh_seen = fh_new;
	o.nseen = 1;
	T_CHECK(dc_trace_write_pfw(fd, ev, 1, paths, &o, &id) == 0 && nnew == 0, "second write");
	close(fd);
	text = read_file(tmpl);
	unlink(tmpl);
	T_CHECK(text != NULL, "read back");
	if (!text)
		return;
	T_CHECK(count_lines(text) == 5, "5 lines: %s", text);
	snprintf(want, sizeof(want),
		 "{\"id\":10,\"name\":\"FH\",\"cat\":\"dftracer\",\"pid\":4,\"tid\":0,\"ph\":\"M\","
		 "\"args\":{\"name\":\"/data/we\\\"ird\\\\name\\n.npz\",\"value\":%u}}\n"
		 "{\"id\":11,\"name\":\"item\",\"cat\":\"data\",\"pid\":4,\"tid\":0,"
		 "\"ts\":1000000,\"dur\":0,\"ph\":\"X\",\"args\":{\"fhash\":%u,\"size\":512,"
		 "\"step\":-1}}\n",
		 h, h);
	T_CHECK(strncmp(text, want, strlen(want)) == 0, "FH line once, then the sample: %s", text);
	/* integer us, both ends rounded down: 1000001.000 .. 1000003.500 -> 1000001 + 2 */
	snprintf(want, sizeof(want),
		 "{\"id\":13,\"name\":\"read\",\"cat\":\"IO_URING\",\"pid\":4,\"tid\":%u,"
		 "\"ts\":1000001,\"dur\":2,\"ph\":\"X\",\"args\":{\"fhash\":%u,\"offset\":4096,"
		 "\"ret\":512,\"size\":512,\"step\":3}}\n",
		 2 * DC_TRACE_LANES, h);
	T_CHECK(strstr(text, want) != NULL, "read line (engine category, thread 2): %s", text);
	T_CHECK(strstr(text,
		       "{\"id\":12,\"name\":\"compute\",\"cat\":\"compute\",\"pid\":4,\"tid\":0,"
		       "\"ts\":1000005,\"dur\":1000,\"ph\":\"X\",\"args\":{\"step\":3}}\n") != NULL,
		"compute line: %s", text);
	T_CHECK(strstr(text, "plain") == NULL, "no FH line for an unused file");
	T_CHECK(strstr(text, "\"id\":14,\"name\":\"read\"") != NULL, "second batch's read");
	T_CHECK(strstr(text, "fname") == NULL, "file names only in FH lines");
	free(text);
	T_CHECK(dc_trace_write_pfw(-1, ev, 3, paths, &o, NULL) == -EBADF, "bad fd reported");
}

/* One span read back from a .pfw line. */
struct span {
	unsigned long long tid, ts, te;
};

static size_t parse_spans(const char *text, struct span *out, size_t max)
{
	size_t n = 0;

	for (const char *l = text; l && *l && n < max; l = strchr(l, '\n'), l = l ? l + 1 : l) {
		unsigned long long tid, ts, dur;
		const char *t = strstr(l, "\"tid\":"), *nl = strchr(l, '\n');

		if (!strstr(l, "\"ph\":\"X\"") || (nl && strstr(l, "\"ph\":\"X\"") > nl) || !t)
			continue;
		if (sscanf(t, "\"tid\":%llu,\"ts\":%llu,\"dur\":%llu", &tid, &ts, &dur) == 3)
			out[n++] = (struct span){ tid, ts, ts + dur };
	}
	return n;
}

/* Spans on one track that cross (overlap without one holding the other), given spans in start
 * order per track, longest first among equal starts (the writer's order). */
static unsigned crossings(const struct span *sp, size_t n)
{
	enum { MAXT = 64, DEPTH = 8 };
	unsigned long long tids[MAXT], stack[MAXT][DEPTH];
	unsigned depth[MAXT], ntids = 0, bad = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned t;

		for (t = 0; t < ntids && tids[t] != sp[i].tid; t++)
			;
		if (t == ntids) {
			if (ntids == MAXT)
				return 1000000;
			tids[ntids] = sp[i].tid;
			depth[ntids++] = 0;
		}
		while (depth[t] && stack[t][depth[t] - 1] <= sp[i].ts)
			depth[t]--;
		if (depth[t] && sp[i].te > stack[t][depth[t] - 1])
			bad++;
		else if (depth[t] < DEPTH)
			stack[t][depth[t]++] = sp[i].te;
	}
	return bad;
}

/* Eight samples in flight on thread 1, each with two overlapping reads and a third after them (as
 * io_uring at qd 8 does), and back-to-back reads on thread 2 that end and start inside the same
 * microsecond: no track has crossing spans, the requests nest in their own sample, and thread 2
 * stays on one track whose spans do not overlap. */
static void test_lanes(void)
{
	enum { NS = 64, NB = 50 };
	static struct dc_trace_event ev[NS * 4 + NB];
	static struct span sp[NS * 4 + NB];
	static const char *paths[NS];
	static char names[NS][16];
	char tmpl[] = "/tmp/dlio_t_trace_XXXXXX";
	int fd = mkstemp(tmpl);
	uint32_t lanes[3] = { 0 };
	struct dc_pfw_opts o = { .lanes = lanes, .ntids = 3 };
	size_t n = 0, ns;
	char *text;

	for (unsigned k = 0; k < NS; k++) {
		uint64_t t = 10000ull * k + 333; /* a sample every 10 us, 75 us long */

		snprintf(names[k], sizeof(names[k]), "/d/%u", k);
		paths[k] = names[k];
		ev[n++] = (struct dc_trace_event){
			.t_start = t, .dur = 75000, .file = k, .tid = 1, .kind = DC_TR_SAMPLE
		};
		ev[n++] = (struct dc_trace_event){
			.t_start = t + 1000, .dur = 39000, .file = k, .tid = 1, .kind = DC_TR_READ
		};
		ev[n++] = (struct dc_trace_event){
			.t_start = t + 5000, .dur = 65000, .file = k, .tid = 1, .kind = DC_TR_READ
		};
		ev[n++] = (struct dc_trace_event){
			.t_start = t + 41000, .dur = 33000, .file = k, .tid = 1, .kind = DC_TR_READ
		};
	}
	for (unsigned k = 0; k < NB; k++) /* 1.7 us each, back to back */
		ev[n++] = (struct dc_trace_event){ .t_start = 1700ull * k,
						   .dur = 1700,
						   .file = 0,
						   .tid = 2,
						   .step = DC_TRACE_NONE64,
						   .kind = DC_TR_READ };
	T_CHECK(fd >= 0, "mkstemp");
	T_CHECK(dc_trace_write_pfw(fd, ev, n, paths, &o, NULL) == 0, "write");
	close(fd);
	text = read_file(tmpl);
	unlink(tmpl);
	if (!text)
		return;
	ns = parse_spans(text, sp, n);
	T_CHECK(ns == n, "%zu spans of %zu", ns, n);
	T_CHECK(crossings(sp, ns) == 0, "%u crossing spans", crossings(sp, ns));
	/* 8 samples in flight, and each one's second read on a lane of its own */
	T_CHECK(lanes[1] >= 8 && lanes[1] <= 16 && lanes[2] == 1, "lanes %u %u", lanes[1],
		lanes[2]);
	for (size_t i = 0; i < ns; i++) {
		T_CHECK(sp[i].tid / DC_TRACE_LANES == (i < NS * 4 ? 1 : 2), "thread of span %zu",
			i);
		if (i > NS * 4)
			T_CHECK(sp[i].tid == 2 * DC_TRACE_LANES && sp[i].ts >= sp[i - 1].te,
				"back-to-back span %zu: %llu after %llu", i, sp[i].ts,
				sp[i - 1].te);
	}
	free(text);
}

/* A run's events, written: every one comes back, and no track has crossing spans. */
static void check_written(const struct dc_trace *tr, const char *const *paths)
{
	size_t n = dc_trace_count(tr), at = 0, ns;
	struct dc_trace_event *ev = malloc(n * sizeof(*ev));
	struct span *sp = malloc(n * sizeof(*sp));
	struct dc_pfw_opts o = { .t0_ns = 1234567 };
	char tmpl[] = "/tmp/dlio_t_trace_XXXXXX";
	int fd = mkstemp(tmpl);
	char *text;

	T_CHECK(ev && sp && fd >= 0, "alloc");
	for (unsigned b = 0; b < tr->nbufs; b++) {
		memcpy(ev + at, tr->bufs[b].ev, tr->bufs[b].n * sizeof(*ev));
		at += tr->bufs[b].n;
	}
	T_CHECK(dc_trace_write_pfw(fd, ev, n, paths, &o, NULL) == 0, "write");
	close(fd);
	text = read_file(tmpl);
	unlink(tmpl);
	ns = text ? parse_spans(text, sp, n) : 0;
	T_CHECK(ns == n && crossings(sp, ns) == 0, "%zu of %zu spans, %u crossing", ns, n,
		crossings(sp, ns));
	free(text);
	free(sp);
	free(ev);
}

static void test_traced_train(void)
{
	static const char *paths[2] = { "/nonexistent/a", "/nonexistent/b" };
	enum { NSTEPS = 6, SPS = 4, OPS_PER_SAMPLE = 2 };
	struct dc_op ops[NSTEPS * SPS * OPS_PER_SAMPLE];
	struct dc_step steps[NSTEPS];
	struct dc_step_times times[NSTEPS];
	struct dc_thread_stats ts[3];

	for (unsigned threads = 0; threads <= 2; threads += 2) {
		struct dc_run_config c;
		struct dc_run_result r;
		struct dc_trace tr = { 0 };
		uint64_t kinds[5] = { 0 }, bytes = 0, comp = 0, comp_ev = 0;
		int ret;

		memset(ops, 0, sizeof(ops));
		for (unsigned i = 0; i < NSTEPS * SPS * OPS_PER_SAMPLE; i++) {
			ops[i].file = i / 2 % 2;
			ops[i].offset = (i % 2) * 1000;
			ops[i].length = 1000;
			ops[i].flags = i % 2 == 0 ? DC_OPF_OPEN : DC_OPF_CLOSE;
		}
		for (unsigned k = 0; k < NSTEPS; k++)
			steps[k] = (struct dc_step){ .first_op = k * SPS * OPS_PER_SAMPLE,
						     .nops = SPS * OPS_PER_SAMPLE,
						     .nsamples = SPS,
						     .compute_ns = 200000 };
		memset(&c, 0, sizeof(c));
		memset(&r, 0, sizeof(r));
		c.engine = "null";
		c.eng.qd = 2;
		c.threads = threads;
		c.paths = paths;
		c.npaths = 2;
		c.ops = ops;
		c.nops = NSTEPS * SPS * OPS_PER_SAMPLE;
		c.max_len = 1000;
		c.steps = steps;
		c.nsteps = NSTEPS;
		c.prefetch = 2;
		c.trace = &tr;
		r.threads = ts;
		r.step_times = times;
		ret = dc_run_train(&c, &r);
		T_CHECK(ret == 0, "train run: %d %s", ret, r.error.what);
		T_CHECK(tr.nbufs == (threads ? threads + 1 : 1), "buffers %u", tr.nbufs);
		T_CHECK(dc_trace_dropped(&tr) == 0, "nothing dropped");
		for (unsigned b = 0; b < tr.nbufs; b++)
			for (uint64_t i = 0; i < tr.bufs[b].n; i++) {
				const struct dc_trace_event *e = &tr.bufs[b].ev[i];

				kinds[e->kind]++;
				T_CHECK(e->t_start >= r.t_start && e->t_start + e->dur <= r.t_end,
					"event inside the run");
				T_CHECK(e->tid == b, "tid %u in buffer %u", e->tid, b);
				if (e->kind == DC_TR_READ)
					bytes += e->bytes;
				if (e->kind == DC_TR_COMPUTE) {
					comp += e->dur;
					comp_ev++;
				}
			}
		T_CHECK(kinds[DC_TR_READ] == r.ops && bytes == r.bytes, "reads %llu of %llu",
			(unsigned long long)kinds[DC_TR_READ], (unsigned long long)r.ops);
		T_CHECK(kinds[DC_TR_SAMPLE] == NSTEPS * SPS, "samples %llu",
			(unsigned long long)kinds[DC_TR_SAMPLE]);
		T_CHECK(kinds[DC_TR_FETCH] == NSTEPS && comp_ev == NSTEPS,
			"fetch/compute per step");
		{
			uint64_t want = 0;

			for (unsigned k = 0; k < NSTEPS; k++)
				want += times[k].compute_ns;
			T_CHECK(comp == want, "compute sum %llu vs %llu", (unsigned long long)comp,
				(unsigned long long)want);
		}
		check_written(&tr, paths);
		dc_trace_free(&tr);
	}
}

static void test_traced_io_cap(void)
{
	static const char *paths[1] = { "/nonexistent/a" };
	struct dc_op ops[100];
	uint64_t first[2] = { 0, 100 };
	struct dc_thread_stats ts[1];
	struct dc_run_config c;
	struct dc_run_result r;
	struct dc_trace tr = { .cap = 40 };

	memset(ops, 0, sizeof(ops));
	for (unsigned i = 0; i < 100; i++) {
		ops[i].offset = i * 512;
		ops[i].length = 512;
	}
	memset(&c, 0, sizeof(c));
	memset(&r, 0, sizeof(r));
	c.engine = "null";
	c.eng.qd = 1;
	c.threads = 1;
	c.paths = paths;
	c.npaths = 1;
	c.ops = ops;
	c.nops = 100;
	c.max_len = 512;
	c.thread_first_op = first;
	c.trace = &tr;
	r.threads = ts;
	T_CHECK(dc_run_io(&c, &r) == 0, "io run");
	T_CHECK(r.ops == 100 && tr.nbufs == 1 && tr.bufs[0].n == 40 && tr.bufs[0].dropped == 60,
		"cap 40 of 100: n %llu dropped %llu", (unsigned long long)tr.bufs[0].n,
		(unsigned long long)tr.bufs[0].dropped);
	T_CHECK(tr.bufs[0].ev[39].offset == 39 * 512 && tr.bufs[0].ev[39].step == DC_TRACE_NONE64,
		"events in order");
	dc_trace_free(&tr);
}

int main(void)
{
	test_full_buffer();
	test_escape();
	test_write();
	test_lanes();
	test_traced_train();
	test_traced_io_cap();
	return t_exit();
}
