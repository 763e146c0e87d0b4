/*
 * rng — the simulator's only source of randomness: xoshiro256** seeded
 * through splitmix64 (Blackman & Vigna), so a run is a pure function of
 * --seed and a failing seed replays exactly on any machine.
 *
 * Threading: a struct rng belongs to one run; nothing is shared.
 */
#ifndef LARCH_SIM_RNG_H
#define LARCH_SIM_RNG_H

#include <stdbool.h>
#include <stdint.h>

#include "base/base.h"

struct rng {
    struct base_rng b;
};

/* splitmix64 also derives the seeds handed to each core, so they do not
 * depend on the main stream's position more than they must. */
static inline uint64_t rng_splitmix64(uint64_t *x)
{
    return base_splitmix64(x);
}

static inline void rng_seed(struct rng *g, uint64_t seed)
{
    base_rng_seed(&g->b, seed);
}

static inline uint64_t rng_next(struct rng *g)
{
    return base_rng_next(&g->b);
}

/* Uniform in [0, n); n > 0. Lemire's multiply-shift: the bias for the
 * small n used here is far below anything a test could notice, and it
 * costs no division and no rejection loop (every loop is bounded). */
static inline uint64_t rng_below(struct rng *g, uint64_t n)
{
    return (uint64_t)(((unsigned __int128)rng_next(g) * n) >> 64);
}

/* Uniform in [lo, hi]; lo <= hi. */
static inline int64_t rng_range(struct rng *g, int64_t lo, int64_t hi)
{
    return lo + (int64_t)rng_below(g, (uint64_t)(hi - lo) + 1);
}

/* True with probability per_million / 1e6. */
static inline bool rng_chance(struct rng *g, uint32_t per_million)
{
    return rng_below(g, 1000000) < per_million;
}

#endif
