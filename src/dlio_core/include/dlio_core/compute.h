/* Emulated accelerator: hold the CPU until a deadline, like fio's thinktime_spin.
 *
 * DLIO sleeps (time.sleep), which oversleeps by timer slack and wake-up latency. We spin on the
 * monotonic clock with a pause instruction to an absolute deadline; the hybrid mode first sleeps
 * (clock_nanosleep, absolute, 1 ns timer slack) until DC_COMPUTE_SPIN_NS before the deadline and spins the rest, to
 * give the core back to reader threads on long steps. Both return the time actually spent: on a VM
 * a descheduled vCPU can overrun, and the report shows set and achieved time side by side.
 */
#ifndef DLIO_CORE_COMPUTE_H
#define DLIO_CORE_COMPUTE_H
#include <stdint.h>

enum dc_compute_mode {
	DC_COMPUTE_SPIN = 0,   /* busy-spin the whole time */
	DC_COMPUTE_HYBRID = 1, /* sleep all but the last DC_COMPUTE_SPIN_NS, then spin */
};

/* Wake-up latency of clock_nanosleep on a VM is 100-200 us: the hybrid mode wakes this early. */
#define DC_COMPUTE_SPIN_NS 500000ull /* 500 us */

/* Spin (or sleep+spin) until dc_now_ns() >= deadline_ns. Returns the clock at return. */
uint64_t dc_compute_until(uint64_t deadline_ns, int mode);

/* Emulate ns of compute starting now; returns the achieved duration in ns. */
uint64_t dc_compute(uint64_t ns, int mode);

#endif
