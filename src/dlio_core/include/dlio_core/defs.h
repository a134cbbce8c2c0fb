/* Definitions every public header shares. */
#ifndef DLIO_CORE_DEFS_H
#define DLIO_CORE_DEFS_H

/* On functions that return 0 (or a count) or -errno: an ignored failure is a compiler warning. */
#if defined(__GNUC__)
#define DC_MUST_CHECK __attribute__((warn_unused_result))
#else
#define DC_MUST_CHECK
#endif

#endif
