/* Fill and CRC32C: the standard check value; generation programs (test_gen); deterministic per seed; dc_write_random writes exactly
 * dc_fill_random's stream whatever the chunk size. */
#include "t_helpers.h"
#include "dlio_core/gen.h"
#include <sys/stat.h>

/* Bitwise reference CRCs (reflected polynomials), independent of the library's tables and combines. */
static uint32_t ref_crc(uint32_t poly, const unsigned char *p, size_t n)
{
	uint32_t c = 0xffffffffu;
	while (n--) {
		c ^= *p++;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ poly : c >> 1;
	}
	return ~c;
}

/* Segment programs: the file dc_gen_files writes equals dc_gen_render's bytes; checksums over random
 * content (combined from the pool's block checksums) equal a bitwise CRC of the bytes; every 4 KiB
 * block of random content differs from every other, across seeds. */
static void test_gen(void)
{
	static const unsigned char blob[] = "0123456789abcdefghijklmnopqrstuvwxyz";
	struct dc_gen_seg prog[] = {
		{ DC_SEG_LIT, 0, 0, 10 },
		{ DC_SEG_CRC_BEGIN, DC_CRC_32, 0, 0 },
		{ DC_SEG_RAND, 0, 0, 3 * 4096 + 100 },
		{ DC_SEG_LIT, 0, 10, 5 },
		{ DC_SEG_CRC_END, 0, 0, 0 },
		{ DC_SEG_PUT, DC_PUT_BE, 0, 0 },
		{ DC_SEG_PATCH, DC_PUT_LE, 0, 0 },
		{ DC_SEG_REPEAT, 0, 3, 5 },
		{ DC_SEG_INLINE, 3, 0x434241, 0 },
		{ DC_SEG_CRC_BEGIN, DC_CRC_32C, 0, 0 },
		{ DC_SEG_RAND, 0, 0, 70000 },
		{ DC_SEG_CRC_END, 0, 0, 0 },
		{ DC_SEG_PUT, DC_PUT_MASKED_LE, 0, 0 },
	};
	uint64_t n = sizeof(prog) / sizeof(prog[0]);
	uint64_t len = dc_gen_size(prog, n);
	T_CHECK(len == 10 + 3 * 4096 + 100 + 5 + 4 + 3 * (3 + 70000 + 4), "program size %llu",
		(unsigned long long)len);
	unsigned char *a = malloc(len), *b = malloc(len), *c = malloc(len);
	T_CHECK(dc_gen_render(prog, n, blob, 42, a, len) == 0, "render");
	uint32_t crc = ref_crc(0xedb88320u, a + 10, 3 * 4096 + 100 + 5);
	uint64_t at = 10 + 3 * 4096 + 100 + 5;
	T_CHECK(a[at] == (crc >> 24) && a[at + 3] == (crc & 0xff), "crc32 put big-endian");
	T_CHECK(a[0] == (crc & 0xff) && a[3] == (crc >> 24), "crc32 patched little-endian at 0");
	T_CHECK(dc_crc32(0, a + 10, 3 * 4096 + 105) == crc, "table crc32 == bitwise");
	for (int r = 0; r < 3; r++) {
		uint64_t rec = at + 4 + (uint64_t)r * (3 + 70000 + 4);
		uint32_t c32 = ref_crc(0x82f63b78u, a + rec + 3, 70000);
		uint32_t m = ((c32 >> 15) | (c32 << 17)) + 0xa282ead8u, got;
		memcpy(&got, a + rec + 3 + 70000, 4);
		T_CHECK(got == m && !memcmp(a + rec, "ABC", 3), "record %d: masked crc32c", r);
	}
	T_CHECK(dc_gen_render(prog, n, blob, 43, b, len) == 0, "render seed 43");
	for (uint64_t x = 0; x + 4096 <= len; x += 4096)
		for (uint64_t y = 0; y + 4096 <= len; y += 4096) {
			if (!memcmp(a + x, b + y, 4096) ||
			    (x != y && !memcmp(a + x, a + y, 4096))) {
				T_CHECK(0, "4 KiB blocks at %llu and %llu repeat",
					(unsigned long long)x, (unsigned long long)y);
				x = len;
				break;
			}
		}

	char dir[128], tmp[160], path[160];
	snprintf(dir, sizeof(dir), "/tmp/dlio_t_%d_gen", (int)getpid());
	mkdir(dir, 0755);
	snprintf(tmp, sizeof(tmp), "%s/.f.tmp", dir);
	snprintf(path, sizeof(path), "%s/f", dir);
	struct dc_gen_file f = { tmp, path, 42, 0, n, NULL };
	struct dc_gen_error err;
	uint64_t bytes = 0, files = 0;
	T_CHECK(dc_gen_files(&f, 1, prog, blob, 0, NULL, &bytes, &files, &err) == 0, "gen_files");
	T_CHECK(bytes == len && files == 1, "counters %llu %llu", (unsigned long long)bytes,
		(unsigned long long)files);
	T_CHECK(access(tmp, F_OK) != 0, "temp renamed");
	int fd = open(path, O_RDONLY);
	T_CHECK(fd >= 0 && pread(fd, c, len, 0) == (ssize_t)len && !memcmp(a, c, len),
		"file == render");
	if (fd >= 0)
		close(fd);
	/* Twice in a row from the same thread: stamps of the first file were undone in the pool. */
	T_CHECK(dc_gen_files(&f, 1, prog, blob, 0, NULL, NULL, NULL, &err) == 0, "gen_files again");
	fd = open(path, O_RDONLY);
	T_CHECK(fd >= 0 && pread(fd, c, len, 0) == (ssize_t)len && !memcmp(a, c, len),
		"same file again");
	if (fd >= 0)
		close(fd);
	/* O_DIRECT: whole aligned blocks over several batches (carry between them), the last partial
	 * block and the patched checksum through the page cache: the same bytes as the render. */
	struct dc_gen_seg big[] = {
		{ DC_SEG_LIT, 0, 0, 10 },
		{ DC_SEG_CRC_BEGIN, DC_CRC_32, 0, 0 },
		{ DC_SEG_RAND, 0, 0, 3 * (1u << 20) + 123 },
		{ DC_SEG_CRC_END, 0, 0, 0 },
		{ DC_SEG_PATCH, DC_PUT_LE, 2, 0 },
		{ DC_SEG_LIT, 0, 10, 5 },
	};
	uint64_t blen = dc_gen_size(big, 6);
	unsigned char *d = malloc(blen), *e = malloc(blen);
	struct dc_gen_file fb = { tmp, path, 7, 0, 6, NULL };
	T_CHECK(dc_gen_render(big, 6, blob, 7, d, blen) == 0, "render big");
	int rc = dc_gen_files(&fb, 1, big, blob, DC_GEN_DIRECT, NULL, NULL, NULL, &err);
	if (rc == -EINVAL && !strcmp(err.what, "create")) {
		printf("# O_DIRECT refused by the filesystem of %s: direct generation not checked\n",
		       dir);
	} else {
		T_CHECK(rc == 0, "gen_files O_DIRECT: %s %d", err.what, rc);
		fd = open(path, O_RDONLY);
		T_CHECK(fd >= 0 && pread(fd, e, blen, 0) == (ssize_t)blen && !memcmp(d, e, blen),
			"O_DIRECT file == render");
		if (fd >= 0)
			close(fd);
	}
	free(d);
	free(e);
	/* A failure names the step and leaves no temp: the final name is a directory (linkat finds
	 * it taken and will not remove a directory; rename where there are no unnamed files). */
	/* Temporary name + rename (filesystems without O_TMPFILE), the name made from a suffix. */
	struct dc_gen_file fs = { NULL, path, 42, 0, n, ".tmp-x" };
	unlink(path);
	T_CHECK(dc_gen_files(&fs, 1, prog, blob, DC_GEN_RENAME, NULL, NULL, NULL, &err) == 0,
		"rename path: %s", err.what);
	fd = open(path, O_RDONLY);
	T_CHECK(fd >= 0 && pread(fd, c, len, 0) == (ssize_t)len && !memcmp(a, c, len),
		"renamed file == render");
	if (fd >= 0)
		close(fd);
	char made[200];
	snprintf(made, sizeof(made), "%s/.f.tmp-x", dir);
	unlink(path);
	mkdir(path, 0755); /* fails at the rename: the temporary made from the suffix is removed */
	T_CHECK(dc_gen_files(&fs, 1, prog, blob, DC_GEN_RENAME, NULL, NULL, NULL, &err) ==
				-EISDIR &&
			!strcmp(err.what, "rename"),
		"rename onto a directory: %s", err.what);
	T_CHECK(access(made, F_OK) != 0, "temp from the suffix removed");
	rmdir(path);
	unlink(path);
	mkdir(path, 0755);
	rc = dc_gen_files(&f, 1, prog, blob, 0, NULL, NULL, NULL, &err);
	T_CHECK(rc == -EISDIR && (!strcmp(err.what, "link") || !strcmp(err.what, "rename")),
		"name a directory: %s %d", err.what, rc);
	T_CHECK(!access(path, F_OK), "the directory is kept");
	/* A file under the final name (an incomplete one being redone) is replaced. */
	rmdir(path);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	T_CHECK(fd >= 0 && write(fd, "partial", 7) == 7, "a partial file");
	if (fd >= 0)
		close(fd);
	T_CHECK(dc_gen_files(&f, 1, prog, blob, 0, NULL, NULL, NULL, &err) == 0, "replace: %s",
		err.what);
	fd = open(path, O_RDONLY);
	T_CHECK(fd >= 0 && pread(fd, c, len, 0) == (ssize_t)len && !memcmp(a, c, len),
		"replaced file == render");
	if (fd >= 0)
		close(fd);
	unlink(path);
	mkdir(path, 0755);
	T_CHECK(access(tmp, F_OK) != 0, "failed temp removed");
	volatile int stop = 1;
	T_CHECK(dc_gen_files(&f, 1, prog, blob, 0, &stop, NULL, NULL, &err) == -ECANCELED, "stop");
	rmdir(path);
	rmdir(dir);
	free(a);
	free(b);
	free(c);
}

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
	/* The crc32 instruction path (when the CPU has it) agrees with the table at every alignment
	 * and ragged length, and with the bitwise definition. */
	dc_fill_random(a, 9000, 7);
	for (size_t off = 0; off < 9; off++)
		for (size_t n = 0; n < 40; n++)
			T_CHECK(dc_crc32c(5, a + off, n) == dc_crc32c_table(5, a + off, n),
				"crc32c hw == table at %zu+%zu", off, n);
	T_CHECK(dc_crc32c(0, a + 3, 8000) == dc_crc32c_table(0, a + 3, 8000), "crc32c 8000 bytes");
	T_CHECK(dc_crc32c(0, a + 1, 4099) == ref_crc(0x82f63b78u, a + 1, 4099),
		"crc32c == bitwise");

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
	test_gen();
	free(a);
	free(b);
	free(c);
	return t_exit();
}
