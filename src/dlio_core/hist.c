/* Log-linear latency histogram (fio plat scheme): see hist.h for the error derivation. */
#include "dlio_core/hist.h"

#include <math.h>
#include <string.h>

#include "core_int.h"

void dc_hist_init(struct dc_hist *h)
{
	memset(h, 0, sizeof(*h));
	h->min = UINT64_MAX;
}

unsigned dc_hist_index(uint64_t ns)
{
	return dc_hist_index_inline(ns);
}

uint64_t dc_hist_value(unsigned idx)
{
	unsigned error_bits;
	uint64_t base, k;

	if (idx < 2u * DC_HIST_VAL)
		return idx;
	if (idx >= DC_HIST_NR)
		idx = DC_HIST_NR - 1;
	error_bits = (idx >> DC_HIST_BITS) - 1;
	base = 1ull << (error_bits + DC_HIST_BITS);
	k = idx % DC_HIST_VAL;
	/* Midpoint of [base + k * 2^e, base + (k + 1) * 2^e). */
	return base + k * (1ull << error_bits) + (1ull << error_bits) / 2;
}

void dc_hist_add(struct dc_hist *h, uint64_t ns)
{
	dc_hist_add_inline(h, ns);
}

void dc_hist_merge(struct dc_hist *dst, const struct dc_hist *src)
{
	if (!src->count)
		return;
	dst->count += src->count;
	if (src->min < dst->min)
		dst->min = src->min;
	if (src->max > dst->max)
		dst->max = src->max;
	dst->sum += src->sum;
	dst->sumsq += src->sumsq;
	for (unsigned i = 0; i < DC_HIST_NR; i++)
		dst->bucket[i] += src->bucket[i];
}

uint64_t dc_hist_percentile(const struct dc_hist *h, double p)
{
	uint64_t rank, cum = 0;

	if (!h->count)
		return 0;
	if (!(p > 0.0))
		return h->min;
	if (p >= 100.0)
		return h->max;
	/* Nearest rank: the smallest value with at least p% of the samples at or below it. */
	rank = (uint64_t)ceil(p / 100.0 * (double)h->count);
	if (rank < 1)
		rank = 1;
	if (rank > h->count)
		rank = h->count;
	for (unsigned i = 0; i < DC_HIST_NR; i++) {
		cum += h->bucket[i];
		if (cum >= rank) {
			uint64_t v = dc_hist_value(i);

			if (v < h->min)
				v = h->min;
			if (v > h->max)
				v = h->max;
			return v;
		}
	}
	return h->max; /* not reached unless the counters disagree with count */
}

double dc_hist_mean(const struct dc_hist *h)
{
	return h->count ? h->sum / (double)h->count : 0.0;
}

/* Sample standard deviation from the running sums (mergeable by addition, unlike Welford's
 * state); the cancellation error is negligible at latency magnitudes (< 2^53 ns^2 relative). */
double dc_hist_stdev(const struct dc_hist *h)
{
	double n = (double)h->count, var;

	if (h->count < 2)
		return 0.0;
	var = (h->sumsq - h->sum * h->sum / n) / (n - 1.0);
	return var > 0.0 ? sqrt(var) : 0.0;
}
