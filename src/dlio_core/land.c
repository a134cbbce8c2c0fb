/* Where a buffered read lands in its page-aligned buffer: dc_buffered_land() (engine.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <pthread.h>

#include "dlio_core/engine.h"
#include "dlio_core/timer.h"

#define PROBE_LEN    (256u << 10) /* a copy long enough to time, short enough to be free */
#define PROBE_ROUNDS 8

static uint32_t land;
static pthread_once_t land_once = PTHREAD_ONCE_INIT;

/* Fastest of PROBE_ROUNDS copies of the probe file into buf + off, in ns. */
static uint64_t best_copy(int fd, unsigned char *buf, uint32_t off)
{
	uint64_t best = UINT64_MAX;

	for (int r = 0; r < PROBE_ROUNDS; r++) {
		uint64_t t0 = dc_now_ns();

		if (pread(fd, buf + off, PROBE_LEN, 0) != (ssize_t)PROBE_LEN)
			return UINT64_MAX;
		uint64_t dt = dc_now_ns() - t0;

		best = dt < best ? dt : best;
	}
	return best;
}

/* Land DC_BUFFERED_LAND bytes in, where glibc's malloc puts a large buffer (so where a loader's
 * reads land), unless the kernel's copy out of the page cache is far slower there than into a
 * page-aligned destination. The probe copies a memfd's pages (the same copy routine as any file's)
 * while they sit in the CPU's caches, which is the only regime a probe this short can time; it tells
 * the two CPUs measured apart (engine.h): on AMD EPYC the offset copy is 6x slower in any regime,
 * while on Intel FSRM it is ~7 % slower in cache yet 7-10 % faster streaming from memory, as a
 * cached read of a file larger than the caches does (128 KiB from a 128 MiB-1 GiB file: 8.5 vs
 * 7.8 GiB/s; a 32 MiB file: equal). Any failure keeps the page-aligned landing. */
static void probe(void)
{
	unsigned char *buf = NULL;
	int fd = memfd_create("dlio-fast-land", MFD_CLOEXEC);

	land = 0;
	if (fd < 0)
		return;
	if (posix_memalign((void **)&buf, 4096, PROBE_LEN + 4096) == 0) {
		memset(buf, 0xa5, PROBE_LEN + 4096);
		if (pwrite(fd, buf, PROBE_LEN, 0) == (ssize_t)PROBE_LEN) {
			uint64_t at0 = UINT64_MAX, at16 = UINT64_MAX;

			/* Interleaved, so a burst of noise hits both. */
			for (int i = 0; i < 2; i++) {
				uint64_t a = best_copy(fd, buf, 0),
					 b = best_copy(fd, buf, DC_BUFFERED_LAND);

				at0 = a < at0 ? a : at0;
				at16 = b < at16 ? b : at16;
			}
			if (at16 != UINT64_MAX && at16 * 2 < at0 * 3) /* at most 1.5x slower */
				land = DC_BUFFERED_LAND;
		}
		free(buf);
	}
	close(fd);
}

uint32_t dc_buffered_land(void)
{
	pthread_once(&land_once, probe);
	return land;
}
