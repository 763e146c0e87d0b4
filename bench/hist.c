/*
 * hist.c — log-linear latency histogram; see hist.h for the error bound.
 */
#include "bench/hist.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#define SUB_COUNT (1u << BENCH_HIST_SUB_BITS) /* 128 buckets per octave */

void bench_hist_reset(struct bench_hist *h)
{
    memset(h, 0, sizeof(*h));
    h->min_ns = UINT64_MAX;
}

/* Values below 256 index themselves. Above, with k the top set bit, the value
 * shifted right by k-7 lies in [128, 256): that is the linear sub-bucket, and
 * octave k starts at index (k-7)*128, which continues the exact range. */
uint32_t bench_hist_index(uint64_t value_ns)
{
    if (value_ns > BENCH_HIST_VALUE_MAX_NS)
        value_ns = BENCH_HIST_VALUE_MAX_NS;
    if (value_ns < BENCH_HIST_EXACT_MAX)
        return (uint32_t)value_ns;
    unsigned top_bit = 63u - (unsigned)__builtin_clzll(value_ns);
    unsigned shift = top_bit - BENCH_HIST_SUB_BITS;
    uint32_t index = shift * SUB_COUNT + (uint32_t)(value_ns >> shift);
    assert(index < BENCH_HIST_BUCKETS);
    return index;
}

uint64_t bench_hist_bucket_lower(uint32_t index)
{
    assert(index < BENCH_HIST_BUCKETS);
    if (index < BENCH_HIST_EXACT_MAX)
        return index;
    unsigned shift = index / SUB_COUNT - 1u;
    uint64_t sub = index % SUB_COUNT + SUB_COUNT;
    return sub << shift;
}

uint64_t bench_hist_bucket_width(uint32_t index)
{
    assert(index < BENCH_HIST_BUCKETS);
    if (index < BENCH_HIST_EXACT_MAX)
        return 1;
    return UINT64_C(1) << (index / SUB_COUNT - 1u);
}

void bench_hist_record(struct bench_hist *h, uint64_t value_ns)
{
    h->buckets[bench_hist_index(value_ns)]++;
    h->count++;
    h->sum_ns += (double)value_ns;
    if (value_ns < h->min_ns)
        h->min_ns = value_ns;
    if (value_ns > h->max_ns)
        h->max_ns = value_ns;
}

void bench_hist_merge(struct bench_hist *dst, const struct bench_hist *src)
{
    if (src->count == 0)
        return;
    for (uint32_t i = 0; i < BENCH_HIST_BUCKETS; i++)
        dst->buckets[i] += src->buckets[i];
    dst->count += src->count;
    dst->sum_ns += src->sum_ns;
    if (src->min_ns < dst->min_ns)
        dst->min_ns = src->min_ns;
    if (src->max_ns > dst->max_ns)
        dst->max_ns = src->max_ns;
}

/* Nearest rank, 1-based: ceil(pct/100 * count). The small tolerance keeps
 * 99.9 % of 1000 at rank 999 although 99.9 * 1000 / 100 is 999.0000000000001
 * in binary floating point. */
static uint64_t rank_of(double pct, uint64_t count)
{
    double exact = pct * (double)count / 100.0;
    double rank = ceil(exact - 1e-9 * (exact > 1.0 ? exact : 1.0));
    if (rank < 1.0)
        return 1;
    if (rank > (double)count)
        return count;
    return (uint64_t)rank;
}

uint64_t bench_hist_value_at(const struct bench_hist *h, double pct)
{
    if (h->count == 0)
        return 0;
    if (pct <= 0.0)
        return h->min_ns;
    if (pct >= 100.0)
        return h->max_ns;
    uint64_t rank = rank_of(pct, h->count);
    uint64_t seen = 0;
    for (uint32_t i = 0; i < BENCH_HIST_BUCKETS; i++) {
        seen += h->buckets[i];
        if (seen < rank)
            continue;
        /* The middle of the bucket halves the worst-case error; the exact
         * extremes are tighter bounds where the bucket straddles them. */
        uint64_t mid = bench_hist_bucket_lower(i) + (bench_hist_bucket_width(i) - 1) / 2;
        if (mid < h->min_ns)
            mid = h->min_ns;
        if (mid > h->max_ns)
            mid = h->max_ns;
        return mid;
    }
    return h->max_ns; /* unreachable while count equals the sum of buckets */
}

uint64_t bench_hist_min(const struct bench_hist *h)
{
    return h->count ? h->min_ns : 0;
}

uint64_t bench_hist_max(const struct bench_hist *h)
{
    return h->max_ns;
}

double bench_hist_mean(const struct bench_hist *h)
{
    return h->count ? h->sum_ns / (double)h->count : 0.0;
}
