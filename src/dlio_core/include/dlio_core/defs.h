/* Definitions every public header shares. */
#ifndef DLIO_CORE_DEFS_H
#define DLIO_CORE_DEFS_H
#include <stdint.h>

/* On functions that return 0 (or a count) or -errno: an ignored failure is a compiler warning. */
#if defined(__GNUC__)
#define DC_MUST_CHECK __attribute__((warn_unused_result))
#else
#define DC_MUST_CHECK
#endif

/* Where and why a run failed (every run kind's result holds one: the first error). */
struct dc_error {
	int err;       /* errno, 0 if none */
	uint32_t file; /* index into paths, UINT32_MAX if none */
	uint64_t offset;
	char what[32]; /* "open", "read", "write", "short read", "engine init" ... */
};

#endif
