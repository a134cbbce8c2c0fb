/* Deterministic byte fill (xoshiro256**) and CRC32C: see fill.h. */
#include "dlio_core/fill.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core_int.h"

static inline uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static inline uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

struct xoshiro {
	uint64_t s[4];
};

static void xo_seed(struct xoshiro *x, uint64_t seed)
{
	for (int i = 0; i < 4; i++)
		x->s[i] = splitmix64(&seed);
}

static inline uint64_t xo_next(struct xoshiro *x)
{
	uint64_t *s = x->s;
	uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return r;
}

static void xo_fill(struct xoshiro *x, unsigned char *p, size_t len)
{
	while (len >= 8) {
		uint64_t v = xo_next(x);
		memcpy(p, &v, 8);
		p += 8;
		len -= 8;
	}
	if (len) {
		uint64_t v = xo_next(x);
		memcpy(p, &v, len);
	}
}

void dc_fill_random(void *buf, size_t len, uint64_t seed)
{
	struct xoshiro x;
	xo_seed(&x, seed);
	xo_fill(&x, buf, len);
}

int dc_write_random(int fd, uint64_t offset, uint64_t len, uint64_t seed, size_t chunk)
{
	if (chunk == 0)
		chunk = 1u << 20;
	if (chunk > len && len > 0)
		chunk = (size_t)len;
	/* Whole 64-bit words per chunk, so that the stream equals dc_fill_random(seed) byte for byte
	 * (xo_fill drops the unused tail of a chunk's last word). */
	if (chunk >= 8)
		chunk &= ~(size_t)7;
	unsigned char *buf = NULL;
	if (posix_memalign((void **)&buf, 4096, chunk ? chunk : 1))
		return -ENOMEM;
	struct xoshiro x;
	xo_seed(&x, seed);
	int rc = 0;
	while (len > 0) {
		size_t n = len < chunk ? (size_t)len : chunk;
		xo_fill(&x, buf, n);
		rc = dc_pwrite_full(fd, buf, n, offset);
		if (rc)
			goto out;
		offset += n;
		len -= n;
	}
out:
	free(buf);
	return rc;
}

/* CRC32C, slicing-by-8 tables built once (TFRecord needs it for every record it frames). */
