/* CRC-32C (Castagnoli: TFRecord, the manifest's checksums) and CRC-32 (zlib's: zip, PNG), one
 * slice-by-8 routine over a table per polynomial, built once. On x86-64 CPUs with SSE4.2 (checked at
 * run time), CRC-32C uses the crc32 instruction instead: about 4x the table's speed, which matters
 * for TFRecord, whose every record's ragged blocks are checksummed while it is written. CRC-32 has
 * no instruction; on CPUs with PCLMULQDQ it folds 64 bytes at a time by carry-less multiplication
 * (Intel's "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ", the constants zlib's
 * Chromium fork and Linux use), for PNG's padding chunks whose ragged blocks are checksummed per
 * file. */
#include "dlio_core/fill.h"
#include "dlio_core/gen.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#include <wmmintrin.h>
#define HAVE_HW_CRC32C 1
#endif

static uint32_t tab32c[8][256], tab32[8][256];
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int hw32c;   /* the CPU has SSE4.2's crc32 instruction */
static int clmul32; /* the CPU has PCLMULQDQ and SSE4.1 (the folding CRC-32) */

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
	clmul32 = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
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

#ifdef HAVE_HW_CRC32C
/* CRC-32 of len bytes (len >= 64, a multiple of 16) on the reflected register (no pre/post
 * inversion: crc is the running value as the table routine holds it after its ~). Four 128-bit
 * lanes fold 64 bytes per step, then fold to one lane, 16 bytes per step, and Barrett-reduce. */
__attribute__((target("sse4.1,pclmul"))) static uint32_t clmul_crc32(uint32_t crc,
								     const unsigned char *p,
								     size_t len)
{
	const __m128i k1k2 = _mm_set_epi64x(0x01c6e41596, 0x0154442bd4);
	const __m128i k3k4 = _mm_set_epi64x(0x00ccaa009e, 0x01751997d0);
	const __m128i k5k0 = _mm_set_epi64x(0, 0x0163cd6124);
	const __m128i poly = _mm_set_epi64x(0x01f7011641, 0x01db710641);
	const __m128i low32 = _mm_setr_epi32(~0, 0, ~0, 0);
	__m128i x1 = _mm_loadu_si128((const __m128i *)(p + 0x00));
	__m128i x2 = _mm_loadu_si128((const __m128i *)(p + 0x10));
	__m128i x3 = _mm_loadu_si128((const __m128i *)(p + 0x20));
	__m128i x4 = _mm_loadu_si128((const __m128i *)(p + 0x30));
	x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)crc));
	p += 64;
	len -= 64;
	while (len >= 64) {
		__m128i x5 = _mm_clmulepi64_si128(x1, k1k2, 0x00);
		__m128i x6 = _mm_clmulepi64_si128(x2, k1k2, 0x00);
		__m128i x7 = _mm_clmulepi64_si128(x3, k1k2, 0x00);
		__m128i x8 = _mm_clmulepi64_si128(x4, k1k2, 0x00);
		x1 = _mm_clmulepi64_si128(x1, k1k2, 0x11);
		x2 = _mm_clmulepi64_si128(x2, k1k2, 0x11);
		x3 = _mm_clmulepi64_si128(x3, k1k2, 0x11);
		x4 = _mm_clmulepi64_si128(x4, k1k2, 0x11);
		x1 = _mm_xor_si128(_mm_xor_si128(x1, x5),
				   _mm_loadu_si128((const __m128i *)(p + 0x00)));
		x2 = _mm_xor_si128(_mm_xor_si128(x2, x6),
				   _mm_loadu_si128((const __m128i *)(p + 0x10)));
		x3 = _mm_xor_si128(_mm_xor_si128(x3, x7),
				   _mm_loadu_si128((const __m128i *)(p + 0x20)));
		x4 = _mm_xor_si128(_mm_xor_si128(x4, x8),
				   _mm_loadu_si128((const __m128i *)(p + 0x30)));
		p += 64;
		len -= 64;
	}
	const __m128i fold[3] = { x2, x3, x4 };
	for (int i = 0; i < 3; i++) {
		__m128i x5 = _mm_clmulepi64_si128(x1, k3k4, 0x00);
		x1 = _mm_clmulepi64_si128(x1, k3k4, 0x11);
		x1 = _mm_xor_si128(_mm_xor_si128(x1, fold[i]), x5);
	}
	while (len >= 16) {
		__m128i x5 = _mm_clmulepi64_si128(x1, k3k4, 0x00);
		x1 = _mm_clmulepi64_si128(x1, k3k4, 0x11);
		x1 = _mm_xor_si128(_mm_xor_si128(x1, _mm_loadu_si128((const __m128i *)p)), x5);
		p += 16;
		len -= 16;
	}
	/* 128 -> 64 bits, then 64 -> 32 by Barrett reduction */
	__m128i x2b = _mm_clmulepi64_si128(x1, k3k4, 0x10);
	x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), x2b);
	x2b = _mm_srli_si128(x1, 4);
	x1 = _mm_and_si128(x1, low32);
	x1 = _mm_xor_si128(_mm_clmulepi64_si128(x1, k5k0, 0x00), x2b);
	x2b = _mm_and_si128(x1, low32);
	x2b = _mm_clmulepi64_si128(x2b, poly, 0x10);
	x2b = _mm_and_si128(x2b, low32);
	x2b = _mm_clmulepi64_si128(x2b, poly, 0x00);
	x1 = _mm_xor_si128(x1, x2b);
	return (uint32_t)_mm_extract_epi32(x1, 1);
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
#ifdef HAVE_HW_CRC32C
	if (clmul32 && len >= 64) {
		size_t whole = len & ~(size_t)15;
		crc = ~clmul_crc32(~crc, data, whole);
		data = (const unsigned char *)data + whole;
		len -= whole;
	}
#endif
	return slice8((const uint32_t(*)[256])tab32, crc, data, len);
}

/* The table routine, whatever the CPU has (for the tests: both must agree). */
uint32_t dc_crc32_table(uint32_t crc, const void *data, size_t len)
{
	pthread_once(&once, init);
	return slice8((const uint32_t(*)[256])tab32, crc, data, len);
}

/* 1 when dc_crc32 folds by carry-less multiplication on this CPU (tests say which path they ran). */
int dc_crc32_clmul(void)
{
	pthread_once(&once, init);
	return clmul32;
}
