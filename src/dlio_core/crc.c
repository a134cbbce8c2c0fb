/* CRC-32C (Castagnoli: TFRecord, the manifest's checksums) and CRC-32 (zlib's: zip, PNG), one
 * slice-by-8 routine over a table per polynomial, built once. */
#include "dlio_core/fill.h"
#include "dlio_core/gen.h"

#include <pthread.h>
#include <string.h>

static uint32_t tab32c[8][256], tab32[8][256];
static pthread_once_t once = PTHREAD_ONCE_INIT;

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
}

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
	return slice8((const uint32_t(*)[256])tab32c, crc, data, len);
}

uint32_t dc_crc32(uint32_t crc, const void *data, size_t len)
{
	pthread_once(&once, init);
	return slice8((const uint32_t(*)[256])tab32, crc, data, len);
}
