/*
 * hist — latency histogram with bounded relative error (HdrHistogram-style).
 *
 * Values are nanoseconds. Below 256 ns every value has its own bucket; above,
 * each power-of-two range [2^k, 2^(k+1)) is split into 128 equal buckets, so a
 * bucket is at most 1/128 of its lower bound wide and the midpoint that
 * bench_hist_value_at() reports is within 0.4 % of any value in the bucket —
 * two significant decimal digits, as HdrHistogram's "2 significant digits".
 * The top bucket ends at 2^36 ns (68.7 s), which covers the 1 µs..60 s range a
 * benchmark needs; larger values are counted in the top bucket and still
 * reported exactly by bench_hist_max().
 *
 * A histogram is a plain fixed-size struct (30 KiB) with no allocation inside;
 * each thread records into its own and the reporter merges them afterwards
 * (bench_hist_merge). Nothing here is thread-safe by itself.
 */
#ifndef LARCH_BENCH_HIST_H
#define LARCH_BENCH_HIST_H

#include <stdint.h>

#define BENCH_HIST_SUB_BITS 7                          /* 128 buckets per octave */
#define BENCH_HIST_EXACT_MAX (1u << (BENCH_HIST_SUB_BITS + 1)) /* 256: exact below */
#define BENCH_HIST_TOP_BIT 36                          /* values < 2^36 ns */
#define BENCH_HIST_BUCKETS \
    ((BENCH_HIST_TOP_BIT - BENCH_HIST_SUB_BITS) * (1u << BENCH_HIST_SUB_BITS) + \
     (1u << BENCH_HIST_SUB_BITS))
#define BENCH_HIST_VALUE_MAX_NS ((UINT64_C(1) << BENCH_HIST_TOP_BIT) - 1)

struct bench_hist {
    uint64_t count;
    uint64_t min_ns;     /* exact smallest value recorded (UINT64_MAX when empty) */
    uint64_t max_ns;     /* exact largest value recorded (0 when empty) */
    double sum_ns;       /* for the mean; double so 2^64 ns sums cannot wrap */
    uint64_t buckets[BENCH_HIST_BUCKETS];
};

/* Empties h. A zero-filled struct is not empty-valid: call this first. */
void bench_hist_reset(struct bench_hist *h);
/* Counts one value; values above BENCH_HIST_VALUE_MAX_NS land in the top bucket. */
void bench_hist_record(struct bench_hist *h, uint64_t value_ns);
/* Adds every count of src to dst (src unchanged). */
void bench_hist_merge(struct bench_hist *dst, const struct bench_hist *src);

/* The value at percentile pct (0..100) by nearest rank: the smallest recorded
 * value v such that at least pct % of the values are <= v, to within the
 * bucket error above. pct 0 gives the minimum, pct 100 the exact maximum.
 * Returns 0 for an empty histogram. */
uint64_t bench_hist_value_at(const struct bench_hist *h, double pct);
uint64_t bench_hist_min(const struct bench_hist *h); /* 0 when empty */
uint64_t bench_hist_max(const struct bench_hist *h);
double bench_hist_mean(const struct bench_hist *h);  /* 0 when empty */

/* Bucket arithmetic, exposed for the unit test: the bucket index of a value and
 * the [lower, lower + width) range a bucket covers. */
uint32_t bench_hist_index(uint64_t value_ns);
uint64_t bench_hist_bucket_lower(uint32_t index);
uint64_t bench_hist_bucket_width(uint32_t index);

#endif /* LARCH_BENCH_HIST_H */
