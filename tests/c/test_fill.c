/* Fill and CRC32C: the standard check value; deterministic per seed; dc_write_random writes exactly
 * dc_fill_random's stream whatever the chunk size. */
#include "t_helpers.h"

int main(void)
{
	const size_t len = (1u << 20) + 13;
	unsigned char *a = malloc(len), *b = malloc(len), *c = malloc(len);
	char path[256];
	int fd;

	T_CHECK(dc_crc32c(0, "123456789", 9) == 0xE3069283u, "crc32c check value 0x%08x",
		dc_crc32c(0, "123456789", 9));
	T_CHECK(dc_crc32c(0, "", 0) == 0, "crc of nothing");
	/* Incremental == one shot. */
	T_CHECK(dc_crc32c(dc_crc32c(0, "12345", 5), "6789", 4) == 0xE3069283u, "incremental crc");

	dc_fill_random(a, len, 1);
	dc_fill_random(b, len, 1);
	dc_fill_random(c, len, 2);
	T_CHECK(!memcmp(a, b, len), "same seed, same bytes");
	T_CHECK(memcmp(a, c, len), "different seeds differ");
	dc_fill_random(b, 1000, 1);
	T_CHECK(!memcmp(a, b, 1000), "a prefix is the same stream");

	snprintf(path, sizeof(path), "/tmp/dlio_t_%d_fill", (int)getpid());
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	T_CHECK(fd >= 0, "create %s: %s", path, strerror(errno));
	if (fd >= 0) {
		size_t chunks[] = { 0, 4093, 4096, 65536 + 7, len * 2 };

		for (unsigned i = 0; i < sizeof(chunks) / sizeof(chunks[0]); i++) {
			memset(c, 0, len);
			T_CHECK(dc_write_random(fd, 0, len, 1, chunks[i]) == 0, "write chunk %zu",
				chunks[i]);
			T_CHECK(pread(fd, c, len, 0) == (ssize_t)len, "read back");
			T_CHECK(!memcmp(a, c, len), "file content != dc_fill_random (chunk %zu)",
				chunks[i]);
		}
		T_CHECK(dc_write_random(fd, 0, 0, 1, 0) == 0, "zero length");
		close(fd);
		unlink(path);
	}
	T_CHECK(dc_write_random(-1, 0, 10, 1, 0) == -EBADF, "bad fd");
	free(a);
	free(b);
	free(c);
	return t_exit();
}
