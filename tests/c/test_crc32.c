/* CRC-32 (zlib's polynomial: zip, PNG) against zlib's own crc32: the folding path (PCLMULQDQ, when
 * the CPU has it) and the table path, every length 0..300 at unaligned starts, long runs, and
 * incremental use across the 64-byte and 16-byte folding boundaries. */
#include "t_helpers.h"

#include <zlib.h>

#include "dlio_core/gen.h"

int main(void)
{
	enum { LEN = 1 << 20 };
	unsigned char *a = malloc(LEN + 64);
	if (!a)
		return T_EXIT_FAIL;
	dc_fill_random(a, LEN + 64, 11);
	printf("dc_crc32 folds with PCLMULQDQ: %s\n", dc_crc32_clmul() ? "yes" : "no (table only)");

	T_CHECK(dc_crc32(0, "123456789", 9) == 0xCBF43926u, "check value 0x%08x",
		dc_crc32(0, "123456789", 9));
	T_CHECK(dc_crc32(0, "", 0) == 0, "crc of nothing");
	for (size_t off = 0; off < 17; off++)
		for (size_t n = 0; n <= 300; n++) {
			uint32_t z = (uint32_t)crc32(0x1234u, a + off, (uInt)n);
			T_CHECK(dc_crc32(0x1234u, a + off, n) == z, "fold vs zlib at %zu+%zu", off,
				n);
			T_CHECK(dc_crc32_table(0x1234u, a + off, n) == z,
				"table vs zlib at %zu+%zu", off, n);
		}
	size_t longs[] = { 4096, 4096 - 41, 4080, 65533, 114688 - 57, LEN };
	for (unsigned i = 0; i < sizeof(longs) / sizeof(longs[0]); i++)
		for (size_t off = 0; off < 3; off++) {
			size_t n = longs[i] - off;
			T_CHECK(dc_crc32(0, a + off, n) == (uint32_t)crc32(0, a + off, (uInt)n),
				"fold vs zlib, %zu bytes at +%zu", n, off);
		}
	/* Incremental: any split gives the one-shot value. */
	uint32_t whole = (uint32_t)crc32(0, a + 5, 1000);
	for (size_t cut = 0; cut <= 1000; cut += 7)
		T_CHECK(dc_crc32(dc_crc32(0, a + 5, cut), a + 5 + cut, 1000 - cut) == whole,
			"split at %zu", cut);
	free(a);
	return t_exit();
}
