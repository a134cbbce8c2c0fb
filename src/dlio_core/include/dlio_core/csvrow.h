/* A csv dataset file's row: integer values as comma-separated decimal text (what Python's
 * ",".join(map(str, values)) + "\n" gives), rendered in C instead of per value in Python. */
#ifndef DLIO_CORE_CSVROW_H
#define DLIO_CORE_CSVROW_H
#include <stddef.h>

/* Bytes a row of n values of itemsize bytes may need at most (sign, digits, comma each). */
size_t dc_csv_row_cap(size_t n, unsigned itemsize);

/* Render n native-endian integers (itemsize 1, 2, 4 or 8; is_signed 0 or 1) at values as
 * "v0,v1,...,vn-1\n" into out (cap bytes); *len gets the bytes written. n == 0 gives "\n".
 * Returns 0, -EINVAL (bad itemsize) or -ENOSPC (cap too small). */
int dc_csv_row(const void *values, size_t n, unsigned itemsize, int is_signed, char *out,
	       size_t cap, size_t *len);

#endif
