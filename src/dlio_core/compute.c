/* Emulated accelerator: spin (or sleep, then spin) to an absolute deadline. See compute.h. */
#include "dlio_core/compute.h"

#include <errno.h>
#include <sys/prctl.h>
#include <time.h>

#include "dlio_core/timer.h"

/* Tell the core we are spinning: frees the sibling hyperthread and saves power. */
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

uint64_t dc_compute_until(uint64_t deadline_ns, int mode)
{
	uint64_t now = dc_now_ns();

	if (mode == DC_COMPUTE_HYBRID && deadline_ns > now + DC_COMPUTE_SPIN_NS) {
		static __thread int slack_set;
		uint64_t wake = deadline_ns - DC_COMPUTE_SPIN_NS;

		/* The default 50 us timer slack would make every sleep late by up to that much. */
		if (!slack_set) {
			(void)prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
			slack_set = 1;
		}
		struct timespec ts = {
			.tv_sec = (time_t)(wake / 1000000000ull),
			.tv_nsec = (long)(wake % 1000000000ull),
		};

		/* Absolute, on the same clock as dc_now_ns(): a signal cannot stretch it. */
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
		now = dc_now_ns();
	}
	while (now < deadline_ns) {
		cpu_relax();
		now = dc_now_ns();
	}
	return now;
}

uint64_t dc_compute(uint64_t ns, int mode)
{
	uint64_t t0;

	if (!ns)
		return 0;
	t0 = dc_now_ns();
	return dc_compute_until(t0 + ns, mode) - t0;
}
