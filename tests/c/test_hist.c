/* Histogram: percentiles against exact sorted values (lognormal-ish, ns .. seconds) within 1%,
 * index/value round trip < 1/128, merge == single, empty histogram. */
#include <math.h>

#include "t_helpers.h"

#define N 200000

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static uint64_t rng = 88172645463325252ull;

static double uniform(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return ((rng >> 11) + 0.5) / 9007199254740992.0;
}

/* Lognormal with median ~100 us and a wide spread: ns to seconds. */
static uint64_t lognormal(void)
{
	double z = sqrt(-2.0 * log(uniform())) * cos(2.0 * M_PI * uniform());

	return (uint64_t)exp(log(1e5) + 2.5 * z);
}

int main(void)
{
	static uint64_t v[N];
	static struct dc_hist h, a, b, m, e;
	const double ps[] = { 0.1, 1, 10, 25, 50, 75, 90, 99, 99.9, 99.99 };
	double maxerr = 0;

	/* Round trip: every value comes back within 1/128 from its bucket's midpoint. */
	for (uint64_t x = 0; x < 4096; x++)
		T_CHECK(dc_hist_index(x) < 128 ? dc_hist_value(dc_hist_index(x)) == x : 1,
			"exact region %llu", (unsigned long long)x);
	for (int i = 0; i < 1000000; i++) {
		uint64_t x = (uint64_t)(exp(uniform() * log(2.5e11)));
		uint64_t y = dc_hist_value(dc_hist_index(x));
		double err = fabs((double)y - (double)x) / (double)(x ? x : 1);

		if (err > maxerr)
			maxerr = err;
	}
	/* <= : a value at the bottom of a bucket is exactly half a bucket (2^(m-7)) from the midpoint. */
	T_CHECK(maxerr <= 1.0 / 128, "round-trip error %g", maxerr);
	printf("round-trip max relative error %.5f%% (bound %.5f%%)\n", maxerr * 100, 100.0 / 128);
	T_CHECK(dc_hist_index(UINT64_MAX) == DC_HIST_NR - 1, "saturation");
	for (unsigned i = 1; i < DC_HIST_NR; i++)
		T_CHECK(dc_hist_value(i) > dc_hist_value(i - 1), "monotone at %u", i);

	/* Percentiles vs exact nearest-rank values. */
	dc_hist_init(&h);
	dc_hist_init(&a);
	dc_hist_init(&b);
	for (int i = 0; i < N; i++) {
		v[i] = lognormal();
		dc_hist_add(&h, v[i]);
		dc_hist_add(i & 1 ? &a : &b, v[i]);
	}
	qsort(v, N, sizeof(v[0]), cmp_u64);
	T_CHECK(h.min == v[0] && h.max == v[N - 1], "min/max");
	T_CHECK(dc_hist_percentile(&h, 0) == v[0], "p0");
	T_CHECK(dc_hist_percentile(&h, 100) == v[N - 1], "p100");
	for (unsigned i = 0; i < sizeof(ps) / sizeof(ps[0]); i++) {
		uint64_t rank = (uint64_t)ceil(ps[i] / 100.0 * N);
		uint64_t exact = v[rank - 1], got = dc_hist_percentile(&h, ps[i]);
		double err = fabs((double)got - (double)exact) / (double)exact;

		printf("p%-6g exact %12llu hist %12llu err %.4f%%\n", ps[i],
		       (unsigned long long)exact, (unsigned long long)got, err * 100);
		T_CHECK(err < 0.01, "p%g: exact %llu got %llu", ps[i], (unsigned long long)exact,
			(unsigned long long)got);
	}
	{
		double mean = 0, var = 0;

		for (int i = 0; i < N; i++)
			mean += (double)v[i];
		mean /= N;
		for (int i = 0; i < N; i++)
			var += ((double)v[i] - mean) * ((double)v[i] - mean);
		var /= N - 1;
		T_CHECK(fabs(dc_hist_mean(&h) - mean) / mean < 1e-9, "mean %g vs %g",
			dc_hist_mean(&h), mean);
		T_CHECK(fabs(dc_hist_stdev(&h) - sqrt(var)) / sqrt(var) < 1e-6, "stdev %g vs %g",
			dc_hist_stdev(&h), sqrt(var));
	}

	/* Merge == single. */
	dc_hist_init(&m);
	dc_hist_merge(&m, &a);
	dc_hist_merge(&m, &b);
	T_CHECK(m.count == h.count && m.min == h.min && m.max == h.max, "merge header");
	T_CHECK(!memcmp(m.bucket, h.bucket, sizeof(h.bucket)), "merge buckets");
	for (unsigned i = 0; i < sizeof(ps) / sizeof(ps[0]); i++)
		T_CHECK(dc_hist_percentile(&m, ps[i]) == dc_hist_percentile(&h, ps[i]),
			"merged p%g", ps[i]);

	/* Empty. */
	dc_hist_init(&e);
	T_CHECK(e.count == 0 && e.min == UINT64_MAX && e.max == 0, "empty init");
	T_CHECK(dc_hist_percentile(&e, 50) == 0 && dc_hist_mean(&e) == 0 && dc_hist_stdev(&e) == 0,
		"empty stats");
	dc_hist_merge(&m, &e);
	T_CHECK(m.count == h.count && m.min == h.min, "merging an empty one changes nothing");
	dc_hist_add(&e, 12345);
	T_CHECK(dc_hist_percentile(&e, 50) == 12345, "single value is exact (clamped)");
	return t_exit();
}
