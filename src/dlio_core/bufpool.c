/* Aligned request buffers: see bufpool.h. */
#include "bufpool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core_int.h"
#include "dlio_core/fill.h"

#define DC_HUGE_PAGE (2u << 20)

uint64_t dc_bufpool_slot_cap(uint64_t max_len, uint32_t dio_align)
{
	uint64_t a = DC_BUF_ALIGN;

	if (dio_align < DC_DIO_DEFAULT_ALIGN)
		dio_align = DC_DIO_DEFAULT_ALIGN;
	if (max_len == 0)
		max_len = 1;
	/* Round the extra up to the page too, so every slot buffer stays page aligned. */
	return (max_len + a - 1) / a * a + ((2ull * dio_align + a - 1) / a * a);
}

int dc_bufpool_init(struct dc_bufpool *bp, struct dc_io *slots, unsigned n, uint64_t max_len,
		    uint32_t dio_align, int fill, uint64_t seed)
{
	uint64_t cap = dc_bufpool_slot_cap(max_len, dio_align);
	unsigned char *mem;

	memset(bp, 0, sizeof(*bp));
	if (n == 0)
		return -EINVAL;
	if (cap > SIZE_MAX / n)
		return -ENOMEM;
	/* Large pools are aligned to 2 MiB and asked to be backed by transparent huge pages (when
	 * THP is in madvise mode): a copy from the page cache into a buffer then takes fewer TLB
	 * misses, and an O_DIRECT transfer is split into fewer device requests. (Where in a page a
	 * buffered read lands matters more on some CPUs: land.c.) */
	size_t align = (size_t)cap * n >= DC_HUGE_PAGE ? DC_HUGE_PAGE : DC_BUF_ALIGN;

	if (posix_memalign((void **)&mem, align, (size_t)cap * n))
		return -ENOMEM;
#ifdef MADV_HUGEPAGE
	if (align == DC_HUGE_PAGE)
		(void)madvise(mem, (size_t)cap * n, MADV_HUGEPAGE); /* a hint: failure is fine */
#endif
	for (unsigned i = 0; i < n; i++) {
		unsigned char *b = mem + (size_t)cap * i;

		/* Touch every page now: a first-touch fault inside the timed loop would be
		 * charged to the storage. */
		if (fill)
			dc_fill_random(b, (size_t)cap, seed + i);
		else
			memset(b, 0, (size_t)cap);
		slots[i].buf = b;
		slots[i].cap = cap;
		slots[i].index = i;
	}
	bp->mem = mem;
	bp->size = (size_t)cap * n;
	bp->cap = cap;
	return 0;
}

void dc_bufpool_free(struct dc_bufpool *bp)
{
	free(bp->mem);
	bp->mem = NULL;
	bp->size = 0;
}

void dc_bufpool_release(const struct dc_engine_ops *ops, struct dc_engine **eng,
			struct dc_bufpool *bp, struct dc_io **slots)
{
	if (*eng)
		ops->cleanup(*eng);
	*eng = NULL;
	dc_bufpool_free(bp);
	free(*slots);
	*slots = NULL;
}
