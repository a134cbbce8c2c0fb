/* What every KV store shares: the content stamps, the .npy header of an object, and the null
 * store (no I/O: the reference's trace mode, where only the decisions are wanted). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlio_core/kvcache.h"

#define KV_STAMP 16u

static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void dc_kv_stamp(const struct dc_kv_obj *o, uint64_t seed, uint64_t hdr, uint64_t off, void *buf,
		 uint64_t len)
{
	unsigned char *b = buf;
	uint64_t key = mix64(seed ^ mix64(o->entry * 0x9e3779b97f4a7c15ull + o->chunk + 1));
	uint64_t fs = hdr + off, fe = fs + len; /* the buffer's bytes, in file offsets */
	uint64_t q = fs & ~4095ull;             /* a stamp that began before fs may reach into it */

	if (q < hdr)
		q = hdr;
	/* Stamps sit at the payload's first byte (hdr) and at every 4 KiB boundary after it. */
	for (; q < fe; q = (q & ~4095ull) + 4096) {
		unsigned char s[KV_STAMP];
		uint64_t a = q > fs ? q : fs, e = q + KV_STAMP < fe ? q + KV_STAMP : fe;

		if (a >= e)
			continue;
		memcpy(s, &key, 8);
		memcpy(s + 8, &q, 8);
		memcpy(b + (a - fs), s + (a - q), e - a);
	}
}

int dc_kv_npy_header(const struct dc_kv_model *m, const struct dc_kv_obj *o, unsigned hdr_len,
		     char *out)
{
	uint64_t per = (uint64_t)m->layers * 2 * m->kv_heads * m->head_dim * m->dtype_bytes;
	char dict[256];
	int n;

	/* The reference's tensor shape when the bytes are a whole number of tokens of the model;
	 * else (a trace's sizes, a chunk's remainder) the bytes as a flat uint8 array. */
	if (per && (m->dtype_bytes == 2 || m->dtype_bytes == 4) && o->bytes == per * o->tokens)
		n = snprintf(dict, sizeof(dict),
			     "{'descr': '<f%u', 'fortran_order': False, 'shape': (%u, 2, %u, %u, "
			     "%u), }",
			     m->dtype_bytes, m->layers, o->tokens, m->kv_heads, m->head_dim);
	else
		n = snprintf(dict, sizeof(dict),
			     "{'descr': '|u1', 'fortran_order': False, 'shape': (%llu,), }",
			     (unsigned long long)o->bytes);
	if (n < 0 || hdr_len % 64 || hdr_len < 128 || hdr_len > 65535 || (unsigned)n + 11 > hdr_len)
		return -ENOSPC;
	/* numpy's format 1.0: magic, version, little-endian header length, the dict padded with
	 * spaces to the length and ended by a newline. */
	memcpy(out, "\x93NUMPY\x01\x00", 8);
	out[8] = (char)((hdr_len - 10) & 0xff);
	out[9] = (char)((hdr_len - 10) >> 8);
	memcpy(out + 10, dict, (size_t)n);
	memset(out + 10 + n, ' ', hdr_len - 10 - (unsigned)n - 1);
	out[hdr_len - 1] = '\n';
	return 0;
}

/* ---- the null store ---- */

struct dc_kv_store {
	int unused;
};

static struct dc_kv_store null_store;

static int null_open(struct dc_kv_store **out, const struct dc_kv_store_cfg *cfg, char *why,
		     size_t whylen)
{
	(void)cfg;
	(void)why;
	(void)whylen;
	*out = &null_store;
	return 0;
}

static int null_worker_open(struct dc_kv_store *s, unsigned worker, struct dc_kv_worker **out)
{
	(void)worker;
	*out = (struct dc_kv_worker *)s;
	return 0;
}

static int null_put(struct dc_kv_worker *w, const struct dc_kv_obj *o, const struct dc_kv_src *src,
		    struct dc_kv_timing *t)
{
	(void)w;
	(void)o;
	(void)src;
	t->device_ns = t->host_ns = 0;
	return 0;
}

static int null_get(struct dc_kv_worker *w, const struct dc_kv_obj *o, struct dc_kv_timing *t)
{
	(void)w;
	(void)o;
	t->device_ns = t->host_ns = 0;
	return 0;
}

static int null_del(struct dc_kv_worker *w, const struct dc_kv_obj *o)
{
	(void)w;
	(void)o;
	return 0;
}

static void null_worker_close(struct dc_kv_worker *w)
{
	(void)w;
}

static void null_close(struct dc_kv_store *s, struct dc_kv_store_stats *stats)
{
	(void)s;
	memset(stats, 0, sizeof(*stats));
}

const struct dc_kv_store_ops dc_kv_store_null = {
	.name = "null",
	.open = null_open,
	.worker_open = null_worker_open,
	.put = null_put,
	.get = null_get,
	.del = null_del,
	.worker_close = null_worker_close,
	.close = null_close,
};
