/* The request-buffer pool: every slot of a pool of huge-page-sized slots starts on a huge page (an
 * O_DIRECT read into a slot that starts inside one was split into more device requests: 183 vs
 * 130 for 512 MiB in 16 MiB reads on virtio); a freed pool is parked and the next pool of its size
 * takes it (its pages already in, not faulted in again: issue 42); one of another size does not;
 * dc_bufpool_trim empties the park. */
#include "t_helpers.h"

#include "../../src/dlio_core/bufpool.h"

#define MiB (1ull << 20)

int main(void)
{
	struct dc_io slots[8], small[8];
	struct dc_bufpool bp, sp;
	uint64_t reused;
	void *mem;

	dc_bufpool_trim();
	reused = dc_bufpool_reused();
	memset(slots, 0, sizeof(slots));
	T_CHECK(dc_bufpool_init(&bp, slots, 8, 16 * MiB, 4096, 0, 0) == 0, "init");
	for (unsigned i = 0; i < 8; i++) {
		T_CHECK((uintptr_t)slots[i].buf % (2 * MiB) == 0,
			"slot %u at %p: not on a huge page", i, slots[i].buf);
		T_CHECK(slots[i].cap >= 16 * MiB + 2 * 4096, "slot %u: cap %llu", i,
			(unsigned long long)slots[i].cap);
	}
	T_CHECK(dc_bufpool_reused() == reused, "a fresh pool counted as reused");
	mem = bp.mem;
	dc_bufpool_free(&bp);

	/* A pool of small slots is not rounded to huge pages, and does not take the big one. */
	memset(small, 0, sizeof(small));
	T_CHECK(dc_bufpool_init(&sp, small, 8, 64 * 1024, 4096, 0, 0) == 0, "init small");
	T_CHECK(small[0].cap == 64 * 1024 + 2 * 4096, "small cap %llu",
		(unsigned long long)small[0].cap);
	T_CHECK(dc_bufpool_reused() == reused, "a small pool took the 128 MiB one");

	/* The same geometry again: the parked pool, pages in, counted. */
	T_CHECK(dc_bufpool_init(&bp, slots, 8, 16 * MiB, 4096, 0, 0) == 0, "init again");
	T_CHECK(bp.mem == mem, "not the parked pool: %p vs %p", bp.mem, mem);
	T_CHECK(dc_bufpool_reused() == reused + 1, "reused %llu",
		(unsigned long long)(dc_bufpool_reused() - reused));
	dc_bufpool_free(&bp);
	dc_bufpool_free(&sp);

	/* Trimmed: nothing to take. */
	dc_bufpool_trim();
	T_CHECK(dc_bufpool_init(&bp, slots, 8, 16 * MiB, 4096, 0, 0) == 0, "init after trim");
	T_CHECK(dc_bufpool_reused() == reused + 1, "took a pool from an emptied park");
	dc_bufpool_free(&bp);
	dc_bufpool_trim();
	return t_exit();
}
