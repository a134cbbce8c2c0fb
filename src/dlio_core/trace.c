/* Trace buffers and the .pfw writer: see trace.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dlio_core/trace.h"
#include "core_int.h"

#define PFW_CHUNK (1u << 20) /* bytes formatted before each write() */
#define PFW_LINE  320        /* longest line without a file name */

int dc_trace_alloc(struct dc_trace *tr, unsigned nbufs, const uint64_t *caps, uint64_t cap)
{
	tr->bufs = calloc(nbufs ? nbufs : 1, sizeof(*tr->bufs));
	tr->nbufs = 0;
	if (!tr->bufs)
		return -ENOMEM;
	tr->nbufs = nbufs;
	for (unsigned i = 0; i < nbufs; i++) {
		uint64_t c = caps ? caps[i] : cap;

		tr->bufs[i].cap = c;
		tr->bufs[i].ev = malloc((c ? c : 1) * sizeof(struct dc_trace_event));
		if (!tr->bufs[i].ev) {
			dc_trace_free(tr);
			return -ENOMEM;
		}
		/* Touch the pages now, so the first events do not page-fault inside the run. */
		memset(tr->bufs[i].ev, 0, (c ? c : 1) * sizeof(struct dc_trace_event));
	}
	return 0;
}

void dc_trace_free(struct dc_trace *tr)
{
	if (tr->bufs)
		for (unsigned i = 0; i < tr->nbufs; i++)
			free(tr->bufs[i].ev);
	free(tr->bufs);
	tr->bufs = NULL;
	tr->nbufs = 0;
}

uint64_t dc_trace_count(const struct dc_trace *tr)
{
	uint64_t n = 0;

	for (unsigned i = 0; tr->bufs && i < tr->nbufs; i++)
		n += tr->bufs[i].n;
	return n;
}

uint64_t dc_trace_dropped(const struct dc_trace *tr)
{
	uint64_t n = 0;

	for (unsigned i = 0; tr->bufs && i < tr->nbufs; i++)
		n += tr->bufs[i].dropped;
	return n;
}

uint32_t dc_trace_fhash(const char *path)
{
	uint32_t h = 2166136261u;

	for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
		h ^= *p;
		h *= 16777619u;
	}
	return h;
}

/* JSON string escaping: quote, backslash and control characters. Bytes >= 0x80 are copied (a
 * UTF-8 file name stays UTF-8). \uXXXX only for the control characters without a short form. */
static size_t escape_into(const char *s, char *out)
{
	static const char hex[] = "0123456789abcdef";
	char *o = out;

	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		unsigned char c = *p;

		switch (c) {
		case '"':
			*o++ = '\\';
			*o++ = '"';
			break;
		case '\\':
			*o++ = '\\';
			*o++ = '\\';
			break;
		case '\n':
			*o++ = '\\';
			*o++ = 'n';
			break;
		case '\r':
			*o++ = '\\';
			*o++ = 'r';
			break;
		case '\t':
			*o++ = '\\';
			*o++ = 't';
			break;
		case '\b':
			*o++ = '\\';
			*o++ = 'b';
			break;
		case '\f':
			*o++ = '\\';
			*o++ = 'f';
			break;
		default:
			if (c < 0x20 || c == 0x7f) {
				memcpy(o, "\\u00", 4);
				o[4] = hex[c >> 4];
				o[5] = hex[c & 15];
				o += 6;
			} else {
				*o++ = (char)c;
			}
		}
	}
	*o = '\0';
	return (size_t)(o - out);
}

int dc_json_escape(const char *s, char *out, size_t outlen)
{
	size_t need = 1;

	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		need += (*p < 0x20 || *p == 0x7f) ? 6 : (*p == '"' || *p == '\\') ? 2 : 1;
	if (need > outlen)
		return -ENOSPC;
	return (int)escape_into(s, out);
}

static char *put_str(char *o, const char *s)
{
	size_t n = strlen(s);

	memcpy(o, s, n);
	return o + n;
}

static char *put_u64(char *o, uint64_t v)
{
	char tmp[24];
	int n = 0;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		*o++ = tmp[--n];
	return o;
}

struct pfw {
	int fd;
	char *buf;
	size_t len;
	int err;
};

static char *pfw_room(struct pfw *w, size_t need)
{
	if (w->len + need > PFW_CHUNK + PFW_LINE) {
		int ret = dc_write_full(w->fd, w->buf, w->len, DC_AT_POS, NULL);

		if (ret < 0 && !w->err)
			w->err = ret;
		w->len = 0;
	}
	return w->buf + w->len;
}

static char *put_head(char *o, uint64_t id, const char *name, const char *cat, int pid,
		      unsigned tid)
{
	o = put_str(o, "{\"id\":");
	o = put_u64(o, id);
	o = put_str(o, ",\"name\":\"");
	o = put_str(o, name);
	o = put_str(o, "\",\"cat\":\"");
	o = put_str(o, cat);
	o = put_str(o, "\",\"pid\":");
	o = put_u64(o, (uint64_t)(pid < 0 ? 0 : pid));
	o = put_str(o, ",\"tid\":");
	return put_u64(o, tid);
}

/* One event's place in the output order, its times in output microseconds and its lane. */
struct ev_key {
	uint64_t ts, te; /* floor((t + t0_ns) / 1000) of its start and end */
	uint32_t i;      /* index into the events */
	uint16_t tid;
	uint8_t rank; /* among equal spans, the outer first: fetch 0, sample 1, the rest 2 */
	uint8_t pad;
};

static int key_cmp(const void *pa, const void *pb)
{
	const struct ev_key *a = pa, *b = pb;

	if (a->tid != b->tid)
		return a->tid < b->tid ? -1 : 1;
	if (a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	/* An instant (a span shorter than 1 us) first: it ends where it starts, so the spans that
	 * start in the same microsecond close it instead of holding it. */
	if ((a->te == a->ts) != (b->te == b->ts))
		return a->te == a->ts ? -1 : 1;
	if (a->te != b->te) /* the longer span first: a parent before its children */
		return a->te > b->te ? -1 : 1;
	if (a->rank != b->rank)
		return a->rank < b->rank ? -1 : 1;
	return a->i < b->i ? -1 : a->i > b->i;
}

/* A lane: the stack of its open spans (each nested in the one below). */
#define LANE_DEPTH 4
struct lane {
	uint64_t end[LANE_DEPTH];
	uint32_t file[LANE_DEPTH];
	uint8_t kind[LANE_DEPTH];
	unsigned depth;
};

static int is_io(unsigned kind)
{
	return kind == DC_TR_READ || kind == DC_TR_WRITE;
}

/* Can event e (key k) go on lane l? Spans that ended by k->ts are closed first (keys come in start
 * order, so they stay closed). It can when the lane is idle, or when the open span on top holds it
 * entirely and is its parent: its own sample (same file) for a request, a fetch for anything the
 * trainer does while waiting for its batch (threads = 0) but the next fetch or a compute. */
static int lane_fits(struct lane *l, const struct ev_key *k, const struct dc_trace_event *e)
{
	unsigned top;

	while (l->depth && l->end[l->depth - 1] <= k->ts)
		l->depth--;
	if (!l->depth)
		return 1;
	top = l->depth - 1;
	if (l->depth == LANE_DEPTH || k->te > l->end[top])
		return 0;
	if (l->kind[top] == DC_TR_SAMPLE)
		return is_io(e->kind) && l->file[top] == e->file;
	return l->kind[top] == DC_TR_FETCH && e->kind != DC_TR_FETCH && e->kind != DC_TR_COMPUTE;
}

static void lane_push(struct lane *l, const struct ev_key *k, const struct dc_trace_event *e)
{
	l->end[l->depth] = k->te;
	l->file[l->depth] = e->file;
	l->kind[l->depth] = e->kind;
	l->depth++;
}

/* Sort the events by thread and start, and give each a lane (first fit): lane_of[j] is the lane of
 * key[j]. The lanes each thread used are raised into opt->lanes. 0 or -errno. */
static int assign_lanes(const struct dc_trace_event *ev, size_t n, uint64_t t0_ns,
			struct ev_key *key, uint16_t *lane_of, const struct dc_pfw_opts *opt)
{
	struct lane *lanes = NULL;
	unsigned cap = 0, used = 0;

	for (size_t i = 0; i < n; i++) {
		uint64_t t = ev[i].t_start + t0_ns;

		key[i] = (struct ev_key){ .ts = t / 1000,
					  .te = (t + ev[i].dur) / 1000,
					  .i = (uint32_t)i,
					  .tid = ev[i].tid,
					  .rank = ev[i].kind == DC_TR_FETCH    ? 0
						  : ev[i].kind == DC_TR_SAMPLE ? 1
									       : 2 };
	}
	qsort(key, n, sizeof(*key), key_cmp);
	for (size_t j = 0; j < n; j++) {
		const struct dc_trace_event *e = &ev[key[j].i];
		unsigned l;

		if (j == 0 || key[j].tid != key[j - 1].tid) {
			if (j && opt->lanes && key[j - 1].tid < opt->ntids &&
			    opt->lanes[key[j - 1].tid] < used)
				opt->lanes[key[j - 1].tid] = used;
			used = 0;
		}
		for (l = 0; l < used && !lane_fits(&lanes[l], &key[j], e); l++)
			;
		if (l == used) {
			if (used == DC_TRACE_LANES) {
				free(lanes);
				return -E2BIG;
			}
			if (used == cap) {
				unsigned ncap = cap ? 2 * cap : 16;
				struct lane *nl = realloc(lanes, ncap * sizeof(*lanes));

				if (!nl) {
					free(lanes);
					return -ENOMEM;
				}
				lanes = nl;
				cap = ncap;
			}
			lanes[used++].depth = 0;
		}
		lane_push(&lanes[l], &key[j], e);
		lane_of[j] = (uint16_t)l;
	}
	if (n && opt->lanes && key[n - 1].tid < opt->ntids && opt->lanes[key[n - 1].tid] < used)
		opt->lanes[key[n - 1].tid] = used;
	free(lanes);
	return 0;
}

static int hash_seen(const struct dc_pfw_opts *opt, uint32_t h)
{
	size_t lo = 0, hi = opt->nseen;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (opt->fh_seen[mid] == h)
			return 1;
		if (opt->fh_seen[mid] < h)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

int dc_trace_write_pfw(int fd, const struct dc_trace_event *ev, size_t n, const char *const *paths,
		       const struct dc_pfw_opts *opt, uint64_t *id_base)
{
	/* DFTracer's AI events (pydftracer's dft_ai, as DLIO emits them): a sample is data.item, the
	 * trainer's wait for a batch dataloader's fetch.iter, a step's compute compute. */
	static const char *const names[] = { "read", "write", "item", "fetch.iter", "compute" };
	static const char *const cats[] = { "POSIX", "POSIX", "data", "dataloader", "compute" };
	struct pfw w = { .fd = fd };
	uint8_t *named = NULL; /* per file: FH line checked (and written when new) */
	uint32_t *hash = NULL;
	struct ev_key *key = NULL;
	uint16_t *lane_of = NULL;
	uint32_t nfiles = 0;
	uint64_t id = id_base ? *id_base : 0;
	const char *io_cat = opt->io_cat ? opt->io_cat : "POSIX";
	size_t nnew = 0;
	int pid = opt->pid < 0 ? 0 : opt->pid;

	if (opt->nnew)
		*opt->nnew = 0;
	if (n > UINT32_MAX)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (ev[i].file != DC_TRACE_NONE32 && ev[i].file >= nfiles)
			nfiles = ev[i].file + 1;
	if (nfiles && !paths)
		return -EINVAL;
	w.buf = malloc(PFW_CHUNK + 2 * PFW_LINE);
	key = malloc((n ? n : 1) * sizeof(*key));
	lane_of = malloc((n ? n : 1) * sizeof(*lane_of));
	if (nfiles) {
		named = calloc(nfiles, sizeof(*named));
		hash = calloc(nfiles, sizeof(*hash));
	}
	if (!w.buf || !key || !lane_of || (nfiles && (!named || !hash))) {
		w.err = -ENOMEM;
		goto out;
	}
	w.err = assign_lanes(ev, n, opt->t0_ns, key, lane_of, opt);
	for (size_t j = 0; j < n && !w.err; j++) {
		const struct ev_key *k = &key[j];
		const struct dc_trace_event *e = &ev[k->i];
		unsigned kind = e->kind < 5 ? e->kind : 0;
		char *o;

		if (e->file != DC_TRACE_NONE32 && !named[e->file]) {
			uint32_t f = e->file;
			const char *p = paths[f] ? paths[f] : "";
			size_t plen = strlen(p);

			named[f] = 1;
			hash[f] = dc_trace_fhash(p);
			if (plen > PFW_CHUNK / 8) { /* no real path is this long */
				w.err = -ENAMETOOLONG;
				break;
			}
			if (!hash_seen(opt, hash[f])) {
				/* DFTracer's file-hash metadata line, once per file per trace file. */
				o = pfw_room(&w, PFW_LINE + 6 * plen);
				o = put_head(o, id++, "FH", "dftracer", pid, 0);
				o = put_str(o, ",\"ph\":\"M\",\"args\":{\"name\":\"");
				o += escape_into(p, o);
				o = put_str(o, "\",\"value\":");
				o = put_u64(o, hash[f]);
				o = put_str(o, "}}\n");
				w.len = (size_t)(o - w.buf);
				if (opt->fh_new)
					opt->fh_new[nnew++] = hash[f];
			}
		}
		o = pfw_room(&w, PFW_LINE);
		o = put_head(o, id++, names[kind], is_io(kind) ? io_cat : cats[kind], pid,
			     (unsigned)e->tid * DC_TRACE_LANES + lane_of[j]);
		o = put_str(o, ",\"ts\":");
		o = put_u64(o, k->ts);
		o = put_str(o, ",\"dur\":");
		o = put_u64(o, k->te - k->ts);
		o = put_str(o, ",\"ph\":\"X\",\"args\":{");
		if (e->file != DC_TRACE_NONE32) {
			o = put_str(o, "\"fhash\":");
			o = put_u64(o, hash[e->file]);
			*o++ = ',';
		}
		if (is_io(kind)) {
			o = put_str(o, "\"offset\":");
			o = put_u64(o, e->offset);
			o = put_str(o, ",\"ret\":");
			o = put_u64(o, e->bytes);
			*o++ = ',';
		}
		if (kind != DC_TR_COMPUTE) {
			o = put_str(o, "\"size\":");
			o = put_u64(o, e->bytes);
			*o++ = ',';
		}
		o = put_str(o, "\"step\":");
		if (e->step == DC_TRACE_NONE64)
			o = put_str(o, "-1");
		else
			o = put_u64(o, e->step);
		o = put_str(o, "}}\n");
		w.len = (size_t)(o - w.buf);
	}
	if (!w.err && w.len) {
		int ret = dc_write_full(fd, w.buf, w.len, DC_AT_POS, NULL);

		if (ret < 0)
			w.err = ret;
	}
	if (opt->nnew)
		*opt->nnew = nnew;
out:
	free(named);
	free(hash);
	free(key);
	free(lane_of);
	free(w.buf);
	if (id_base)
		*id_base = id;
	return w.err;
}
