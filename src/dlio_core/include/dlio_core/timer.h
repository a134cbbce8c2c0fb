/* The one clock of dlio-fast.
 *
 * Every timestamp (request issue, completion, step boundaries, compute deadlines) comes from
 * dc_now_ns(), taken by the runner and never by an engine, so that all engines are measured the
 * same way. It is CLOCK_MONOTONIC through the vDSO: about 20 ns a call on x86-64, no syscall.
 */
#ifndef DLIO_CORE_TIMER_H
#define DLIO_CORE_TIMER_H
#include <stdint.h>
#include <time.h>

static inline uint64_t dc_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Mean cost of one dc_now_ns() call in ns, measured over n calls (for reports and tests). */
double dc_timer_overhead_ns(unsigned n);

/* Name of the clock source, for the results' environment record. */
const char *dc_timer_source(void);

#endif
