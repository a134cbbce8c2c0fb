/* Compute emulation: achieved >= set, always; overshoot printed (mean, median, worst).
 *
 * The overshoot bound is asserted on the best and the median run, not the mean: on a shared or
 * overloaded machine a spinning thread is descheduled now and then and the mean says more about
 * the neighbours than about us. If even the median is off, the machine is so loaded that the
 * numbers mean nothing; that is printed, not failed.
 */
#include "t_helpers.h"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void run(int mode, uint64_t ns, int reps, const char *name)
{
	uint64_t over[256], sum = 0;
	double bound = 0.05 * (double)ns + 50000.0;

	for (int i = 0; i < reps; i++) {
		uint64_t got = dc_compute(ns, mode);

		T_CHECK(got >= ns, "%s: achieved %llu < set %llu", name, (unsigned long long)got,
			(unsigned long long)ns);
		over[i] = got >= ns ? got - ns : 0;
		sum += over[i];
	}
	qsort(over, (size_t)reps, sizeof(over[0]), cmp_u64);
	printf("%-6s set %8llu ns: overshoot min %6llu  median %8llu  mean %9.0f  worst %9llu ns\n",
	       name, (unsigned long long)ns, (unsigned long long)over[0],
	       (unsigned long long)over[reps / 2], (double)sum / reps,
	       (unsigned long long)over[reps - 1]);
	T_CHECK((double)over[0] < bound, "%s: best overshoot %llu ns", name,
		(unsigned long long)over[0]);
	if ((double)over[reps / 2] >= bound)
		printf("note: median overshoot above %.0f ns: the machine is overloaded\n", bound);
}

int main(void)
{
	uint64_t t0, t1;

	T_CHECK(dc_compute(0, DC_COMPUTE_SPIN) == 0, "zero compute");
	run(DC_COMPUTE_SPIN, 10000, 200, "spin");
	run(DC_COMPUTE_SPIN, 1000000, 50, "spin");
	run(DC_COMPUTE_HYBRID, 1000000, 50, "hybrid");
	run(DC_COMPUTE_HYBRID, 20000000, 5, "hybrid");
	t0 = dc_now_ns();
	t1 = dc_compute_until(t0 + 2000000, DC_COMPUTE_HYBRID);
	T_CHECK(t1 >= t0 + 2000000, "compute_until returned early");
	T_CHECK(dc_compute_until(t0, DC_COMPUTE_SPIN) >= t0, "past deadline returns at once");
	return t_exit();
}
