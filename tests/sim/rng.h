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

struct rng {
    uint64_t s[4];
};

/* splitmix64: spreads a small seed over 64 bits; also used to derive the
 * seeds handed to each core so they do not depend on the main stream's
 * position more than they must. */
static inline uint64_t rng_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline void rng_seed(struct rng *g, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        g->s[i] = rng_splitmix64(&x);
}

static inline uint64_t rng_rotl(uint64_t v, int k)
{
    return (v << k) | (v >> (64 - k));
}

static inline uint64_t rng_next(struct rng *g)
{
    uint64_t *s = g->s;
    uint64_t result = rng_rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rng_rotl(s[3], 45);
    return result;
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
