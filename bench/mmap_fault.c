/* The mmap peer of bench/model_load_vs_fio.py: map each file and fault its pages in, no copy out of
 * the mapping (fio's mmap engine copies every block out of it, so it is no peer of a load that only
 * faults pages). Compiled by the bench (cc -O2) into its temporary folder.
 *
 *   mmap_fault touch|populate BS FILE...
 *
 * Files one after the other, each mapped whole (PROT_READ, MAP_SHARED, no hint: as dlio-fast's mmap
 * engine and a safetensors mmap), walked in BS requests:
 *   touch     one load per 4 KiB page (vmtouch -t's loop, dlio-fast's engine's);
 *   populate  madvise(MADV_POPULATE_READ) per request: the kernel faults the range in itself (Linux
 *             5.14+), no trap per page; the fastest way to fault a mapping in without copying.
 * Prints {"bytes": N, "secs": S}: the clock runs from before the first open to after the last close. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#define PAGE 4096u

static volatile uint64_t sink;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	int populate;
	size_t bs;
	uint64_t total = 0;
	double t0;

	if (argc < 4 || (strcmp(argv[1], "touch") && strcmp(argv[1], "populate"))) {
		fprintf(stderr, "usage: mmap_fault touch|populate BS FILE...\n");
		return 2;
	}
	populate = !strcmp(argv[1], "populate");
	bs = strtoull(argv[2], NULL, 10);
	t0 = now();
	for (int i = 3; i < argc; i++) {
		struct stat st;
		int fd = open(argv[i], O_RDONLY);
		const unsigned char *m;
		size_t size;

		if (fd < 0 || fstat(fd, &st) < 0) {
			perror(argv[i]);
			return 1;
		}
		size = (size_t)st.st_size;
		m = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
		if (m == MAP_FAILED) {
			perror("mmap");
			return 1;
		}
		for (size_t off = 0; off < size; off += bs) {
			size_t len = size - off < bs ? size - off : bs;

			if (populate) {
				if (madvise((void *)(m + off), len, MADV_POPULATE_READ) < 0) {
					perror("madvise(MADV_POPULATE_READ)");
					return 3;
				}
			} else {
				uint64_t acc = 0;

				for (size_t p = off; p < off + len; p += PAGE)
					acc += m[p];
				sink += acc + m[off + len - 1];
			}
		}
		munmap((void *)m, size);
		close(fd);
		total += size;
	}
	printf("{\"bytes\": %llu, \"secs\": %.9f}\n", (unsigned long long)total, now() - t0);
	return 0;
}
