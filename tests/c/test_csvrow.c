/* dc_csv_row against snprintf's decimal text, for every integer width and sign, the extremes,
 * every uint8 value, and the errors (bad width, too small a buffer). */
#include "t_helpers.h"

#include <inttypes.h>

#include "dlio_core/csvrow.h"

/* The expected row by snprintf. */
static size_t ref_row(const void *v, size_t n, unsigned item, int sgn, char *out)
{
	const unsigned char *p = v;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		int64_t s = 0;
		uint64_t u = 0;
		memcpy(sgn ? (void *)&s : (void *)&u, p + i * item, item);
		if (sgn && item < 8 && (s >> (8 * item - 1)) & 1) /* sign-extend */
			s |= (int64_t)(~(uint64_t)0 << (8 * item));
		k += sgn ? (size_t)sprintf(out + k, "%" PRId64 ",", s)
			 : (size_t)sprintf(out + k, "%" PRIu64 ",", u);
	}
	if (n)
		out[k - 1] = '\n';
	else
		out[k++] = '\n';
	return k;
}

int main(void)
{
	enum { N = 4096 };
	unsigned char *v = malloc(N * 8);
	char *want = malloc(N * 22 + 2), *got = malloc(N * 22 + 2);
	if (!v || !want || !got)
		return T_EXIT_FAIL;
	dc_fill_random(v, N * 8, 3);
	memset(v, 0xff, 8);  /* all ones: -1 signed, the maximum unsigned */
	memset(v + 8, 0, 8); /* zero */
	v[23] = 0x80;        /* the minimum of an 8-byte signed value at [16, 24) */
	memset(v + 16, 0, 7);
	for (unsigned item = 1; item <= 8; item *= 2)
		for (int sgn = 0; sgn < 2; sgn++)
			for (size_t n = 0; n <= N; n = n ? n * 4 : 1) {
				size_t len = 0, ref = ref_row(v, n, item, sgn, want);
				int rc = dc_csv_row(v, n, item, sgn, got, dc_csv_row_cap(n, item),
						    &len);
				T_CHECK(rc == 0 && len == ref && !memcmp(got, want, ref),
					"item %u signed %d n %zu: rc %d len %zu want %zu", item,
					sgn, n, rc, len, ref);
			}
	unsigned char all[256];
	for (unsigned i = 0; i < 256; i++)
		all[i] = (unsigned char)i;
	size_t len = 0, ref = ref_row(all, 256, 1, 0, want);
	T_CHECK(!dc_csv_row(all, 256, 1, 0, got, dc_csv_row_cap(256, 1), &len) && len == ref &&
			!memcmp(got, want, ref),
		"every uint8 value");
	T_CHECK(dc_csv_row(v, 4, 3, 0, got, 1000, &len) == -EINVAL, "itemsize 3 refused");
	T_CHECK(dc_csv_row(v, 4, 1, 0, got, dc_csv_row_cap(4, 1) - 1, &len) == -ENOSPC,
		"small buffer");
	free(v);
	free(want);
	free(got);
	return t_exit();
}
