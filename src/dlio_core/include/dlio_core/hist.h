/* Log-linear latency histogram (fio's "plat" scheme, extended to minutes).
 *
 * EXECUTIVE SUMMARY
 *   Values (ns) below 2^(DC_HIST_BITS+1) = 128 are stored exactly. Above that, a value v with most
 *   significant bit m (v in [2^m, 2^(m+1))) goes to group (m - DC_HIST_BITS + 1); inside the group
 *   the DC_HIST_BITS bits below the MSB pick one of 64 sub-buckets, and the lower bits are dropped.
 *   A bucket therefore spans 2^(m-6) ns and its midpoint is within 2^(m-7) of any value in it:
 *   relative error <= 2^(m-7) / 2^m = 1/128 < 0.8 %.
 *
 * DETAILS
 *   DC_HIST_GROUPS = 33 groups x 64 buckets = 2112 counters (16.5 KiB) cover 0 .. 2^38 ns
 *   (about 275 s, i.e. minutes); larger values land in the last bucket and are still counted in
 *   max/sum exactly. Index math is one clz, a shift and a mask (dc_hist_index).
 *
 *     group   value range (ns)         bucket width
 *     0-1     0 .. 127                 1 (exact)
 *     2       128 .. 255               2
 *     11      65,536 .. 131,071        1,024 (65 us .. 131 us)
 *     21      67 ms .. 134 ms          1 ms
 *     32      137 s .. 275 s           2.1 s
 *
 *   Histograms of threads and ranks merge by adding counters (dc_hist_merge, or an MPI SUM on the
 *   bucket array). Percentiles come from one cumulative walk and return the bucket midpoint,
 *   clamped to [min, max] so that p0 / p100 are exact.
 */
#ifndef DLIO_CORE_HIST_H
#define DLIO_CORE_HIST_H
#include <stdint.h>

#define DC_HIST_BITS   6
#define DC_HIST_VAL    (1u << DC_HIST_BITS) /* 64 sub-buckets per group */
#define DC_HIST_GROUPS 33
#define DC_HIST_NR     (DC_HIST_GROUPS * DC_HIST_VAL) /* 2112 */

struct dc_hist {
	uint64_t count;
	uint64_t min; /* UINT64_MAX when empty */
	uint64_t max;
	double sum;   /* for the mean */
	double sumsq; /* for the standard deviation */
	uint64_t bucket[DC_HIST_NR];
};

void dc_hist_init(struct dc_hist *h);
unsigned dc_hist_index(uint64_t ns);
uint64_t dc_hist_value(unsigned idx); /* midpoint of bucket idx */
void dc_hist_add(struct dc_hist *h, uint64_t ns);
void dc_hist_merge(struct dc_hist *dst, const struct dc_hist *src);
/* p in [0, 100]. Returns 0 for an empty histogram. */
uint64_t dc_hist_percentile(const struct dc_hist *h, double p);
double dc_hist_mean(const struct dc_hist *h);
double dc_hist_stdev(const struct dc_hist *h);

#endif
