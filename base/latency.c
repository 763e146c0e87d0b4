/*
 * latency.c — latency distributions with fixed bounds (base.h): what
 * /metrics exports as histograms and as ZooKeeper's summary quantiles.
 */
#include "base/base.h"

#include <stdatomic.h>

/* 10 µs to 60 s in roughly 1-2.5-5 steps: an fsync on an SSD, a snapshot of
 * a large tree, a read on a busy worker all land inside. */
const uint64_t base_latency_bound_us[BASE_LATENCY_BUCKETS] = {
    10,     25,     50,      100,     250,     500,      1000,     2500,     5000,     10000,
    25000,  50000,  100000,  250000,  500000,  1000000,  5000000,  10000000, 60000000, UINT64_MAX,
};

static size_t bucket_of(uint64_t us)
{
    size_t i = 0;
    while (us > base_latency_bound_us[i])
        i++; /* the last bound is UINT64_MAX: the loop ends */
    return i;
}

void base_latency_add(struct base_latency *l, uint64_t us)
{
    atomic_fetch_add_explicit(&l->bucket[bucket_of(us)], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&l->sum_us, us, memory_order_relaxed);
    uint64_t max = atomic_load_explicit(&l->max_us, memory_order_relaxed);
    while (us > max && !atomic_compare_exchange_weak_explicit(&l->max_us, &max, us,
                                                            memory_order_relaxed,
                                                            memory_order_relaxed))
        ; /* another add raised it: max is reloaded, try again while ours is larger */
}

void base_latency_read(const struct base_latency *l, struct base_latency_snapshot *out)
{
    uint64_t count = 0;
    for (size_t i = 0; i < BASE_LATENCY_BUCKETS; i++) {
        uint64_t b = atomic_load_explicit(&l->bucket[i], memory_order_relaxed);
        out->bucket[i] += b;
        count += b;
    }
    /* the count is the buckets' total, so a histogram's +Inf bucket always
     * equals its _count */
    out->count += count;
    out->sum_us += atomic_load_explicit(&l->sum_us, memory_order_relaxed);
    uint64_t max = atomic_load_explicit(&l->max_us, memory_order_relaxed);
    if (max > out->max_us)
        out->max_us = max;
}

double base_latency_quantile(const struct base_latency_snapshot *s, double q)
{
    if (s->count == 0)
        return 0;
    q = q < 0 ? 0 : q > 1 ? 1 : q;
    double rank = q * (double)s->count;
    uint64_t below = 0;
    for (size_t i = 0; i < BASE_LATENCY_BUCKETS; i++) {
        uint64_t in = s->bucket[i];
        if (in > 0 && (double)(below + in) >= rank) {
            double lo = i == 0 ? 0 : (double)base_latency_bound_us[i - 1];
            double hi = i == BASE_LATENCY_BUCKETS - 1 ? (double)s->max_us
                                                     : (double)base_latency_bound_us[i];
            double at = lo + (hi - lo) * ((rank - (double)below) / (double)in);
            return at > (double)s->max_us ? (double)s->max_us : at;
        }
        below += in;
    }
    return (double)s->max_us;
}
