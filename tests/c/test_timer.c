/* Timer: monotonic over 1e6 calls; overhead printed (sanity bound only, no flaky timing). */
#include "t_helpers.h"

int main(void)
{
	uint64_t prev = dc_now_ns(), back = 0;
	double ov;

	for (int i = 0; i < 1000000; i++) {
		uint64_t t = dc_now_ns();

		if (t < prev)
			back++;
		prev = t;
	}
	T_CHECK(back == 0, "clock went backwards %llu times", (unsigned long long)back);
	ov = dc_timer_overhead_ns(1000000);
	printf("dc_now_ns overhead %.1f ns (%s)\n", ov, dc_timer_source());
	T_CHECK(ov > 0 && ov < 1000, "overhead %.1f ns is not sane", ov);
	T_CHECK(dc_timer_source() && dc_timer_source()[0], "source name");
	return t_exit();
}
