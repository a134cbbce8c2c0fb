/* Aligned request buffers: one per slot, carved from one allocation made before the clock starts. */
#ifndef DLIO_CORE_BUFPOOL_H
#define DLIO_CORE_BUFPOOL_H
#include <stddef.h>
#include <stdint.h>
#include "dlio_core/engine.h"
#include "dlio_core/run.h"

struct dc_bufpool {
	void *mem;
	size_t size;
	uint64_t cap; /* bytes per slot */
};

/* Capacity of one slot buffer for requests up to max_len bytes at O_DIRECT alignment dio_align:
 * max_len rounded up to the page plus 2 * dio_align (the aligned superset of an unaligned read);
 * from a huge page up, rounded up to whole huge pages (every slot starts on one). */
uint64_t dc_bufpool_slot_cap(uint64_t max_len, uint32_t dio_align);

/* Allocate n buffers of dc_bufpool_slot_cap() bytes, aligned to DC_BUF_ALIGN, and hang them on
 * slots[i].buf / .cap / .index. fill != 0: fill with dc_fill_random(seed + i) (write data), else
 * zero them (so no page fault lands in the measured loop); a parked pool of the size is taken
 * instead of a fresh one when there is one (its pages are in). 0 or -ENOMEM. */
int dc_bufpool_init(struct dc_bufpool *bp, struct dc_io *slots, unsigned n, uint64_t max_len,
		    uint32_t dio_align, int fill, uint64_t seed);
/* Park the buffers for the process's next run (bufpool.c; dlio_core/run.h: dc_bufpool_reused,
 * dc_bufpool_trim), or free them when the park is full. */
void dc_bufpool_free(struct dc_bufpool *bp);

/* Release what a thread's engine instance stands on, as every run's thread leaves: the instance
 * (ops->cleanup, where init made one), the slots' buffers and the slots (calloc'ed). *eng and
 * *slots are NULL after. */
void dc_bufpool_release(const struct dc_engine_ops *ops, struct dc_engine **eng,
			struct dc_bufpool *bp, struct dc_io **slots);

#endif
