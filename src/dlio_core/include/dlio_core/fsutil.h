/* Filesystem helpers: O_DIRECT alignment, page-cache control. */
#ifndef DLIO_CORE_FSUTIL_H
#define DLIO_CORE_FSUTIL_H
#include "dlio_core/defs.h"
#include <stdint.h>

/* O_DIRECT alignment for path: memory and offset alignment from statx(STATX_DIOALIGN) where the
 * kernel and filesystem report it, else 4096 for both. *from_statx says which. 0 or -errno. */
DC_MUST_CHECK int dc_dio_align(const char *path, uint32_t *mem_align, uint32_t *offset_align,
			       int *from_statx);

/* Drop the cached pages of one file (posix_fadvise DONTNEED after fdatasync). 0 or -errno. */
DC_MUST_CHECK int dc_drop_file_cache(const char *path);

/* Drop the whole page cache (sync; echo 3 > /proc/sys/vm/drop_caches). Needs root: -EPERM/-EACCES
 * otherwise. */
DC_MUST_CHECK int dc_drop_all_caches(void);

#endif
