/* Private to the C core: the engines' ops tables (one file each in this folder), for the registry
 * (engine.c). Which ones exist is decided here and nowhere else.
 */
#ifndef DLIO_CORE_ENGINES_H
#define DLIO_CORE_ENGINES_H
#include "dlio_core/engine.h"

/* io_uring is spoken through raw system calls (uring_ring.c), so it is built on every Linux unless
 * the build opts out (DLIO_FAST_NO_URING=1 for pip, -DDLIO_NO_URING=ON for cmake: DC_NO_URING). */
#if defined(__linux__) && !defined(DC_NO_URING)
#define DC_URING 1
#endif

extern const struct dc_engine_ops dc_posix_ops;
extern const struct dc_engine_ops dc_mmap_ops;
extern const struct dc_engine_ops dc_null_ops;
#ifdef DC_URING
extern const struct dc_engine_ops dc_uring_ops;
#endif
/* Never in the core's table: built into the dlio._mpiio extension, handed in with
 * dc_engine_register(). */
extern const struct dc_engine_ops dc_mpiio_ops;

#endif
