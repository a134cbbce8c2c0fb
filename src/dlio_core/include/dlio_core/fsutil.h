/* Filesystem helpers: O_DIRECT alignment, page-cache control. */
#ifndef DLIO_CORE_FSUTIL_H
#define DLIO_CORE_FSUTIL_H
#include "dlio_core/defs.h"
#include <stddef.h>
#include <stdint.h>

/* O_DIRECT alignment for path: memory and offset alignment from statx(STATX_DIOALIGN) where the
 * kernel and filesystem report it, else 4096 for both. *from_statx says which. 0 or -errno. */
DC_MUST_CHECK int dc_dio_align(const char *path, uint32_t *mem_align, uint32_t *offset_align,
			       int *from_statx);

/* Drop the cached pages of n files (posix_fadvise DONTNEED after writing their dirty pages back:
 * sync_file_range, or fdatasync with durable or where the filesystem lacks it). 0, or -errno with
 * *failed (if not NULL) the index of the file that failed. */
DC_MUST_CHECK int dc_drop_files_cache(const char *const *paths, size_t n, int durable,
				      size_t *failed);

/* Drop the whole page cache (sync; echo 3 > /proc/sys/vm/drop_caches). Needs root: -EPERM/-EACCES
 * otherwise. */
DC_MUST_CHECK int dc_drop_all_caches(void);

#endif
