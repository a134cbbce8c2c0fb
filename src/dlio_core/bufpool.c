/* Aligned request buffers: see bufpool.h. */
#include "bufpool.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core_int.h"
#include "dlio_core/fill.h"

#define DC_HUGE_PAGE (2u << 20)

/* Pools parked by the runs that ended, for the next run of the process to take: a model load's
 * repeats, a job's phases and epochs each start a run whose threads want the same buffers. Getting
 * them fresh costs the kernel's zeroing of every page (128 MiB for qd 8 x 16 MiB: ~40-60 ms on a
 * VM, a fifth of a 512 MiB load's time to ready, where fio sets its buffers up before its clock).
 * Bounded, so a big run's buffers do not stay held: what does not fit is freed. */
#define DC_PARK_SLOTS 64
#define DC_PARK_BYTES (1ull << 30)

static struct {
	pthread_mutex_t lock;
	void *mem[DC_PARK_SLOTS];
	size_t size[DC_PARK_SLOTS];
	uint64_t bytes;  /* parked */
	uint64_t reused; /* pools handed out again (dc_bufpool_reused) */
} park = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* A parked allocation of at least size bytes and alignment align, no more than twice the size
 * (a small run does not take a big run's pool), its size in *got; NULL if none. */
static void *unpark(size_t size, size_t align, size_t *got)
{
	void *mem = NULL;
	int best = -1;

	pthread_mutex_lock(&park.lock);
	for (int i = 0; i < DC_PARK_SLOTS; i++)
		if (park.mem[i] && park.size[i] >= size && park.size[i] / 2 <= size &&
		    (uintptr_t)park.mem[i] % align == 0 &&
		    (best < 0 || park.size[i] < park.size[best]))
			best = i;
	if (best >= 0) {
		mem = park.mem[best];
		*got = park.size[best];
		park.bytes -= park.size[best];
		park.mem[best] = NULL;
		park.reused++;
	}
	pthread_mutex_unlock(&park.lock);
	return mem;
}

/* Park mem for the next run, or free it when the park is full. */
static void park_or_free(void *mem, size_t size)
{
	pthread_mutex_lock(&park.lock);
	if (park.bytes + size <= DC_PARK_BYTES) {
		for (int i = 0; i < DC_PARK_SLOTS; i++) {
			if (!park.mem[i]) {
				park.mem[i] = mem;
				park.size[i] = size;
				park.bytes += size;
				mem = NULL;
				break;
			}
		}
	}
	pthread_mutex_unlock(&park.lock);
	free(mem);
}

uint64_t dc_bufpool_reused(void)
{
	uint64_t n;

	pthread_mutex_lock(&park.lock);
	n = park.reused;
	pthread_mutex_unlock(&park.lock);
	return n;
}

void dc_bufpool_trim(void)
{
	pthread_mutex_lock(&park.lock);
	for (int i = 0; i < DC_PARK_SLOTS; i++) {
		free(park.mem[i]);
		park.mem[i] = NULL;
	}
	park.bytes = 0;
	pthread_mutex_unlock(&park.lock);
}

uint64_t dc_bufpool_slot_cap(uint64_t max_len, uint32_t dio_align)
{
	uint64_t a = DC_BUF_ALIGN;

	if (dio_align < DC_DIO_DEFAULT_ALIGN)
		dio_align = DC_DIO_DEFAULT_ALIGN;
	if (max_len == 0)
		max_len = 1;
	/* Round the extra up to the page too, so every slot buffer stays page aligned; a slot of a
	 * huge page or more to whole huge pages, so every slot starts on one, as the first does: an
	 * O_DIRECT read into a slot that starts 8 KiB into a huge page was split into more device
	 * requests (183 vs fio's 157 for 512 MiB in 16 MiB reads on virtio; fio --iomem_align=2m). */
	uint64_t cap = (max_len + a - 1) / a * a + ((2ull * dio_align + a - 1) / a * a);

	return max_len >= DC_HUGE_PAGE ? (cap + DC_HUGE_PAGE - 1) / DC_HUGE_PAGE * DC_HUGE_PAGE
				       : cap;
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

	size_t size = (size_t)cap * n;
	int fresh = 0;

	mem = unpark(size, align, &size);
	if (!mem) {
		if (posix_memalign((void **)&mem, align, size))
			return -ENOMEM;
		fresh = 1;
	}
#ifdef MADV_HUGEPAGE
	if (fresh && align == DC_HUGE_PAGE)
		(void)madvise(mem, size, MADV_HUGEPAGE); /* a hint: failure is fine */
#endif
	for (unsigned i = 0; i < n; i++) {
		unsigned char *b = mem + (size_t)cap * i;

		/* Touch every page now: a first-touch fault inside the timed loop would be
		 * charged to the storage. A parked pool's pages are in already. */
		if (fill)
			dc_fill_random(b, (size_t)cap, seed + i);
		else if (fresh)
			memset(b, 0, (size_t)cap);
		slots[i].buf = b;
		slots[i].cap = cap;
		slots[i].index = i;
	}
	bp->mem = mem;
	bp->size = size;
	bp->cap = cap;
	return 0;
}

void dc_bufpool_free(struct dc_bufpool *bp)
{
	if (bp->mem)
		park_or_free(bp->mem, bp->size);
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
