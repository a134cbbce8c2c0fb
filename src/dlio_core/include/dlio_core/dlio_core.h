/* dlio_core: the C core of dlio-fast. Umbrella header.
 *
 * Conventions (all headers):
 *  - every function that can fail returns 0 (or a count) on success and -errno on failure;
 *  - nothing here prints, exits or allocates per I/O;
 *  - times are uint64_t nanoseconds on one monotonic clock (timer.h).
 */
#ifndef DLIO_CORE_H
#define DLIO_CORE_H

#define DC_VERSION_MAJOR 0
#define DC_VERSION_MINOR 1

#include "dlio_core/defs.h"
#include "dlio_core/timer.h"
#include "dlio_core/hist.h"
#include "dlio_core/compute.h"
#include "dlio_core/engine.h"
#include "dlio_core/fill.h"
#include "dlio_core/fsutil.h"
#include "dlio_core/run.h"
#include "dlio_core/trace.h"

#endif
