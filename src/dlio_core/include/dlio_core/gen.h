/* Dataset file generation: many files written from C, each from a small program of segments.
 *
 * A program is a list of segments: literal bytes (from a blob shared by all files, computed once
 * per shape by the format code), stamped random content, and checksums over ranges of the file
 * (TFRecord's masked CRC32C, PNG's and zip's CRC32). Each file is written unnamed in its directory
 * (O_TMPFILE), optionally fsync'ed, and linked under its final name (linkat), or, where the
 * filesystem has no unnamed files, written under its temporary name and renamed: a file under its
 * final name is always complete.
 *
 * Random content. Byte o of a file with seed s comes from one 1 MiB pool of random bytes (the same
 * on every host), at pool offset (o + 4096 * (s mod 256)) mod 1 MiB, except for a 16-byte stamp
 * (s, o) at the start of every file-aligned 4 KiB block and at the start of every random segment:
 * every 4 KiB block of every file is unique (a deduplicating store cannot shortcut it) and no
 * compression window up to 1 MiB (a ZFS record, a btrfs extent) finds a repeat, while writing costs
 * what fio's reused 1 MiB buffer costs: the bytes go to the kernel straight from the pool (pwritev,
 * no copy; a 4 MiB pool, which no longer fits the L2 cache with fio's, wrote 0.6-0.9x fio's
 * bandwidth where 1 MiB wrote 1.0x), and checksums over random content are combined from per-block
 * checksums of the pool (no pass over the data). Like fio's buffer, the content repeats every 1 MiB
 * but for the stamps: a compressor with a window over 1 MiB (zstd --long, xz) would find that.
 */
#ifndef DLIO_CORE_GEN_H
#define DLIO_CORE_GEN_H
#include <stddef.h>
#include <stdint.h>

enum dc_seg_kind {
	DC_SEG_LIT = 0,       /* a = offset in the blob, b = length */
	DC_SEG_INLINE = 1,    /* a = up to 8 bytes (first byte = lowest), arg = length (<= 8) */
	DC_SEG_RAND = 2,      /* b = length of stamped random content */
	DC_SEG_CRC_BEGIN = 3, /* arg = DC_CRC_*: checksum the bytes that follow */
	DC_SEG_CRC_END = 4,   /* stop the checksum; its value is kept for PUT and PATCH */
	DC_SEG_PUT = 5,       /* arg = DC_PUT_*: append the kept checksum (4 bytes) */
	DC_SEG_PATCH =
		6, /* arg = DC_PUT_*: write the kept checksum at file offset a (earlier bytes) */
	DC_SEG_REPEAT = 7, /* a = count, b = number of following segments repeated (not nested) */
};

enum dc_crc_kind { DC_CRC_32C = 0, DC_CRC_32 = 1 };
enum dc_put_kind { DC_PUT_MASKED_LE = 0, DC_PUT_BE = 1, DC_PUT_LE = 2 };

struct dc_gen_seg {
	uint32_t kind;
	uint32_t arg;
	uint64_t a;
	uint64_t b;
};

struct dc_gen_file {
	const char
		*tmp; /* without O_TMPFILE: written here, then renamed to path (NULL: see below) */
	const char *path;
	uint64_t seed;
	uint64_t first_seg; /* its program: segs[first_seg .. first_seg + nsegs) */
	uint64_t nsegs;
	/* With tmp NULL, the temporary name is path's directory + "." + path's name + tmp_suffix,
	 * made only when needed (the filesystem has no O_TMPFILE). */
	const char *tmp_suffix;
};

struct dc_gen_error {
	int err;       /* errno */
	uint64_t file; /* index into files */
	char what[32];
};

/* Write files[0..n) in order. done_bytes/done_files (may be NULL) are advanced with relaxed atomics
 * after each file; stop (may be NULL) is polled between files. flags: DC_GEN_FSYNC (fsync each
 * file before it is named), DC_GEN_DIRECT (open with O_DIRECT: the content is copied into an
 * aligned buffer and written in whole 4 KiB blocks of up to 1 MiB; a file's last partial block and
 * patched checksums go through the page cache, as dd's oflag=direct does; open fails with EINVAL
 * where the filesystem refuses O_DIRECT), DC_GEN_RENAME (temporary name + rename even where
 * O_TMPFILE works: what other filesystems get; for the tests).
 * 0, -ECANCELED when stopped, or -errno (err describes it; the failed file's temp is removed). */
enum { DC_GEN_FSYNC = 1, DC_GEN_DIRECT = 2, DC_GEN_RENAME = 4 };
int dc_gen_files(const struct dc_gen_file *files, uint64_t n, const struct dc_gen_seg *segs,
		 const unsigned char *blob, unsigned flags, volatile int *stop,
		 uint64_t *done_bytes, uint64_t *done_files, struct dc_gen_error *err);

/* The bytes a program produces at [0, len) (len = its size) into buf: the reference the tests
 * compare files with, and how small files are checked without writing them. 0 or -EINVAL. */
int dc_gen_render(const struct dc_gen_seg *segs, uint64_t nsegs, const unsigned char *blob,
		  uint64_t seed, unsigned char *buf, uint64_t len);

/* Size in bytes of a program's output. */
uint64_t dc_gen_size(const struct dc_gen_seg *segs, uint64_t nsegs);

/* CRC-32 (IEEE, zlib's) for the tests and the format code. */
uint32_t dc_crc32(uint32_t crc, const void *buf, size_t len);
/* The same by table (dc_crc32 folds with PCLMULQDQ when the CPU has it): for the tests. */
uint32_t dc_crc32_table(uint32_t crc, const void *buf, size_t len);
/* 1 when dc_crc32 uses PCLMULQDQ on this CPU, else 0. */
int dc_crc32_clmul(void);

#endif
