/* Fast deterministic byte fill for generated datasets and write buffers.
 *
 * xoshiro256** seeded by splitmix64(seed): several GB/s per core, so generating a dataset is bound
 * by the disk, not by the fill (DLIO fills with numpy per sample). Same seed, same bytes.
 */
#ifndef DLIO_CORE_FILL_H
#define DLIO_CORE_FILL_H
#include "dlio_core/defs.h"
#include <stddef.h>
#include <stdint.h>

void dc_fill_random(void *buf, size_t len, uint64_t seed);

/* Write len bytes of dc_fill_random(seed) content to fd at offset, in chunks of chunk bytes from
 * one internal buffer (no len-sized allocation). Short writes are retried. 0 or -errno. */
DC_MUST_CHECK int dc_write_random(int fd, uint64_t offset, uint64_t len, uint64_t seed,
				  size_t chunk);

/* CRC32C (Castagnoli), as TFRecord framing uses it. */
uint32_t dc_crc32c(uint32_t crc, const void *buf, size_t len);
/* The same by table (dc_crc32c uses the CPU's crc32 instruction when it has one): for the tests. */
uint32_t dc_crc32c_table(uint32_t crc, const void *buf, size_t len);

#endif
