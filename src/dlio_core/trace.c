/* Trace buffers and the .pfw writer: see trace.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dlio_core/trace.h"

#define PFW_CHUNK (1u << 20) /* bytes formatted before each write() */
#define PFW_LINE  320        /* longest line without its file name */

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

/* ns as microseconds with three decimals. */
static char *put_us(char *o, uint64_t ns)
{
	uint64_t frac = ns % 1000;

	o = put_u64(o, ns / 1000);
	*o++ = '.';
	*o++ = (char)('0' + frac / 100);
	*o++ = (char)('0' + frac / 10 % 10);
	*o++ = (char)('0' + frac % 10);
	return o;
}

static int write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t w = write(fd, buf, len);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		buf += w;
		len -= (size_t)w;
	}
	return 0;
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
		int ret = write_all(w->fd, w->buf, w->len);

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

int dc_trace_write_pfw(int fd, const struct dc_trace_event *ev, size_t n, const char *const *paths,
		       int pid, uint64_t t0_ns, uint64_t *id_base)
{
	static const char *const names[] = { "read", "write", "sample", "fetch", "compute" };
	static const char *const cats[] = { "POSIX", "POSIX", "reader", "data_loader",
					    "ai_framework" };
	struct pfw w = { .fd = fd };
	char **esc = NULL; /* escaped file names, made on first use */
	uint32_t *hash = NULL;
	uint32_t nfiles = 0;
	uint64_t id = id_base ? *id_base : 0;

	for (size_t i = 0; i < n; i++)
		if (ev[i].file != DC_TRACE_NONE32 && ev[i].file >= nfiles)
			nfiles = ev[i].file + 1;
	if (nfiles && !paths)
		return -EINVAL;
	w.buf = malloc(PFW_CHUNK + 2 * PFW_LINE);
	if (nfiles) {
		esc = calloc(nfiles, sizeof(*esc));
		hash = calloc(nfiles, sizeof(*hash));
	}
	if (!w.buf || (nfiles && (!esc || !hash))) {
		free(w.buf);
		free(esc);
		free(hash);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n && !w.err; i++) {
		const struct dc_trace_event *e = &ev[i];
		unsigned kind = e->kind < 5 ? e->kind : 0;
		const char *fname = NULL;
		size_t flen = 0;
		char *o;

		if (e->file != DC_TRACE_NONE32) {
			uint32_t f = e->file;

			if (!esc[f]) {
				const char *p = paths[f] ? paths[f] : "";
				size_t plen = strlen(p);

				if (plen > PFW_CHUNK / 8) { /* no real path is this long */
					w.err = -ENAMETOOLONG;
					break;
				}
				esc[f] = malloc(plen * 6 + 1);
				if (!esc[f]) {
					w.err = -ENOMEM;
					break;
				}
				flen = escape_into(p, esc[f]);
				hash[f] = dc_trace_fhash(p);
				/* DFTracer's file-hash metadata line, once per file per call. */
				o = pfw_room(&w, PFW_LINE + flen);
				o = put_head(o, id++, "FH", "dftracer", pid, 0);
				o = put_str(o, ",\"ph\":\"M\",\"args\":{\"name\":\"");
				memcpy(o, esc[f], flen);
				o += flen;
				o = put_str(o, "\",\"value\":");
				o = put_u64(o, hash[f]);
				o = put_str(o, "}}\n");
				w.len = (size_t)(o - w.buf);
			}
			fname = esc[f];
			flen = strlen(fname);
		}
		o = pfw_room(&w, PFW_LINE + flen);
		o = put_head(o, id++, names[kind], cats[kind], pid, e->tid);
		o = put_str(o, ",\"ts\":");
		o = put_us(o, e->t_start + t0_ns);
		o = put_str(o, ",\"dur\":");
		o = put_us(o, e->dur);
		o = put_str(o, ",\"ph\":\"X\",\"args\":{");
		if (fname) {
			o = put_str(o, "\"fname\":\"");
			memcpy(o, fname, flen);
			o += flen;
			o = put_str(o, "\",\"fhash\":");
			o = put_u64(o, hash[e->file]);
			*o++ = ',';
		}
		if (kind == DC_TR_READ || kind == DC_TR_WRITE) {
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
		int ret = write_all(fd, w.buf, w.len);

		if (ret < 0)
			w.err = ret;
	}
	for (uint32_t f = 0; esc && f < nfiles; f++)
		free(esc[f]);
	free(esc);
	free(hash);
	free(w.buf);
	if (id_base)
		*id_base = id;
	return w.err;
}
