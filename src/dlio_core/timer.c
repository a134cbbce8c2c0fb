/* The one clock: see timer.h. */
#include "dlio_core/timer.h"

double dc_timer_overhead_ns(unsigned n)
{
	if (n == 0)
		n = 1;
	uint64_t t0 = dc_now_ns(), sink = 0;
	for (unsigned i = 0; i < n; i++)
		sink += dc_now_ns();
	uint64_t t1 = dc_now_ns();
	(void)sink;
	return (double)(t1 - t0) / n;
}

const char *dc_timer_source(void)
{
	return "clock_gettime(CLOCK_MONOTONIC)";
}
