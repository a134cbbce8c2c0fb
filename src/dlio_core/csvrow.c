/* csv rows of integers: see csvrow.h. A value's decimal text comes from a 2-digit table, written
 * right to left into a scratch and copied; uint8 values (DLIO's default element type) by a table of
 * "v," texts stored 4 bytes at a time whatever their length (a 64 Ki-value row in well under a
 * millisecond, where numpy's table lookup and boolean mask took 2.5 ms). */
#include "dlio_core/csvrow.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

static const char digits2[201] =
	"00010203040506070809101112131415161718192021222324252627282930313233343536373839"
	"40414243444546474849505152535455565758596061626364656667686970717273747576777879"
	"8081828384858687888990919293949596979899";

/* Decimal text of v ending at end (exclusive); returns its first byte. */
static char *utoa_back(uint64_t v, char *end)
{
	while (v >= 100) {
		unsigned r = (unsigned)(v % 100);
		v /= 100;
		end -= 2;
		memcpy(end, digits2 + 2 * r, 2);
	}
	if (v >= 10) {
		end -= 2;
		memcpy(end, digits2 + 2 * v, 2);
	} else
		*--end = (char)('0' + v);
	return end;
}

static char u8_text[256][4];
static unsigned char u8_len[256];
static pthread_once_t u8_once = PTHREAD_ONCE_INIT;

static void u8_init(void)
{
	for (unsigned v = 0; v < 256; v++) {
		char tmp[8];
		char *s = utoa_back(v, tmp + 7);
		tmp[7] = ',';
		u8_len[v] = (unsigned char)(tmp + 8 - s);
		memcpy(u8_text[v], s, u8_len[v]);
	}
}

size_t dc_csv_row_cap(size_t n, unsigned itemsize)
{
	size_t per = itemsize == 1 ? 5 : itemsize == 2 ? 7 : itemsize == 4 ? 12 : 21;
	return n * per + 1;
}

int dc_csv_row(const void *values, size_t n, unsigned itemsize, int is_signed, char *out,
	       size_t cap, size_t *len)
{
	if (itemsize != 1 && itemsize != 2 && itemsize != 4 && itemsize != 8)
		return -EINVAL;
	if (cap < dc_csv_row_cap(n, itemsize))
		return -ENOSPC;
	const unsigned char *p = values;
	char *o = out;
	if (itemsize == 1 && !is_signed) {
		pthread_once(&u8_once, u8_init);
		for (size_t i = 0; i < n; i++) {
			memcpy(o, u8_text[p[i]], 4); /* cap has 5 bytes a value: the 4 always fit */
			o += u8_len[p[i]];
		}
		goto end;
	}
	const unsigned shift = 64 - 8 * itemsize; /* sign extension of a narrower value */
	for (size_t i = 0; i < n; i++) {
		/* the value's bytes, low first: little-endian hosts (x86-64, arm64) */
		uint64_t u = 0;
		memcpy(&u, p + (size_t)itemsize * i, itemsize);
		int neg = 0;
		if (is_signed) {
			int64_t v = shift ? (int64_t)(u << shift) >> shift : (int64_t)u;
			neg = v < 0;
			u = neg ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
		}
		char tmp[24];
		char *s = utoa_back(u, tmp + sizeof(tmp));
		if (neg)
			*--s = '-';
		size_t k = (size_t)(tmp + sizeof(tmp) - s);
		memcpy(o, s, k);
		o += k;
		*o++ = ',';
	}
end:
	if (n)
		o[-1] = '\n';
	else
		*o++ = '\n';
	*len = (size_t)(o - out);
	return 0;
}
