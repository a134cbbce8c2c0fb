/* CRC-32C (Castagnoli: TFRecord, the manifest's checksums) and CRC-32 (zlib's: zip, PNG), one
 * slice-by-8 routine over a table per polynomial, built once. On x86-64 CPUs with SSE4.2 (checked at
 * run time), CRC-32C uses the crc32 instruction instead: about 4x the table's speed, which matters
 * for TFRecord, whose every record's ragged blocks are checksummed while it is written. */
#include "dlio_core/fill.h"
#include "dlio_core/gen.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define HAVE_HW_CRC32C 1
#endif

static uint32_t tab32c[8][256], tab32[8][256];
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int hw32c; /* the CPU has SSE4.2's crc32 instruction */

static void table(uint32_t t[8][256], uint32_t poly)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ poly : c >> 1;
		t[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int k = 1; k < 8; k++)
			t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xff];
}

static void init(void)
{
	table(tab32c, 0x82f63b78u);
	table(tab32, 0xedb88320u);
#ifdef HAVE_HW_CRC32C
	__builtin_cpu_init();
	hw32c = __builtin_cpu_supports("sse4.2");
#endif
}

#ifdef HAVE_HW_CRC32C
__attribute__((target("sse4.2"))) static uint32_t hw_crc32c(uint32_t crc, const void *data,
							    size_t len)
{
	const unsigned char *p = data;
	uint64_t c = ~crc;
	while (len && ((uintptr_t)p & 7)) {
		c = _mm_crc32_u8((uint32_t)c, *p++);
		len--;
	}
	while (len >= 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		c = _mm_crc32_u64(c, v);
		p += 8;
		len -= 8;
	}
	while (len--)
		c = _mm_crc32_u8((uint32_t)c, *p++);
	return ~(uint32_t)c;
}
#endif

static uint32_t slice8(const uint32_t t[8][256], uint32_t crc, const void *data, size_t len)
{
	const unsigned char *p = data;

	crc = ~crc;
	while (len >= 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		v ^= crc;
		crc = t[7][v & 0xff] ^ t[6][(v >> 8) & 0xff] ^ t[5][(v >> 16) & 0xff] ^
		      t[4][(v >> 24) & 0xff] ^ t[3][(v >> 32) & 0xff] ^ t[2][(v >> 40) & 0xff] ^
		      t[1][(v >> 48) & 0xff] ^ t[0][v >> 56];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = (crc >> 8) ^ t[0][(crc ^ *p++) & 0xff];
	return ~crc;
}

uint32_t dc_crc32c(uint32_t crc, const void *data, size_t len)
{
	pthread_once(&once, init);
#ifdef HAVE_HW_CRC32C
	if (hw32c)
		return hw_crc32c(crc, data, len);
#endif
	return slice8((const uint32_t(*)[256])tab32c, crc, data, len);
}

/* The table routine, whatever the CPU has (for the tests: both must agree). */
uint32_t dc_crc32c_table(uint32_t crc, const void *data, size_t len)
{
	pthread_once(&once, init);
	return slice8((const uint32_t(*)[256])tab32c, crc, data, len);
}

uint32_t dc_crc32(uint32_t crc, const void *data, size_t len)
{
	pthread_once(&once, init);
	return slice8((const uint32_t(*)[256])tab32, crc, data, len);
}
