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

/* An engine's ops table, dc_<prefix>_ops, over its hooks <prefix>_available, _init, _open, _close,
 * _submit and _cleanup; reap is NULL for a synchronous engine, else its hook. Every engine names
 * its hooks so: one list of them here keeps the five tables from drifting apart. */
#define DC_ENGINE_OPS(prefix, engine_name, engine_caps, reap_hook)                                 \
	const struct dc_engine_ops dc_##prefix##_ops = {                                           \
		.name = engine_name,                                                               \
		.caps = engine_caps,                                                               \
		.available = prefix##_available,                                                   \
		.init = prefix##_init,                                                             \
		.open = prefix##_open,                                                             \
		.close = prefix##_close,                                                           \
		.submit = prefix##_submit,                                                         \
		.reap = reap_hook,                                                                 \
		.cleanup = prefix##_cleanup,                                                       \
	}

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
