/*
 * keys.c — which key and which kind of op the next request uses.
 *
 * xoshiro256** (Blackman & Vigna) seeded through splitmix64: fast, per-session
 * state, reproducible from --seed. Zipf follows Gray et al. (SIGMOD '94), the
 * generator YCSB uses, with zeta(n) computed once at start (O(keys)).
 */
#include "bench/bench.h"

#include <assert.h>
#include <math.h>
#include <string.h>

void bench_rng_seed(struct bench_rng *r, uint64_t seed)
{
    base_rng_seed(&r->b, seed);
}

uint64_t bench_rng_next(struct bench_rng *r)
{
    return base_rng_next(&r->b);
}

double bench_rng_unit(struct bench_rng *r)
{
    return (double)(bench_rng_next(r) >> 11) * 0x1.0p-53;
}

static double zeta(uint32_t n, double theta)
{
    double sum = 0;
    for (uint32_t i = 1; i <= n; i++)
        sum += 1.0 / pow((double)i, theta);
    return sum;
}

void bench_zipf_init(struct bench_zipf *z, uint32_t n, double theta)
{
    assert(n >= 1 && theta > 0 && theta < 1);
    z->n = n;
    z->theta = theta;
    z->alpha = 1.0 / (1.0 - theta);
    z->zetan = zeta(n, theta);
    double zeta2 = zeta(n < 2 ? n : 2, theta);
    /* eta is only used for n > 2 (the first two ranks are answered directly). */
    z->eta = n > 2 ? (1.0 - pow(2.0 / n, 1.0 - theta)) / (1.0 - zeta2 / z->zetan) : 0.0;
}

uint32_t bench_zipf_next(const struct bench_zipf *z, struct bench_rng *r)
{
    double u = bench_rng_unit(r);
    double uz = u * z->zetan;
    if (uz < 1.0 || z->n == 1)
        return 0;
    if (uz < 1.0 + pow(0.5, z->theta) || z->n == 2)
        return 1;
    double v = (double)z->n * pow(z->eta * u - z->eta + 1.0, z->alpha);
    uint32_t rank = v >= (double)z->n ? z->n - 1 : (uint32_t)v;
    return rank;
}

void bench_keys_init(struct bench_keys *k, const struct bench_cfg *cfg)
{
    k->cfg = cfg;
    if (cfg->dist == BENCH_DIST_ZIPF)
        bench_zipf_init(&k->zipf, cfg->keys, cfg->zipf_theta);
}

uint32_t bench_keys_pick(const struct bench_keys *k, struct bench_rng *r)
{
    if (k->cfg->dist == BENCH_DIST_ZIPF)
        return bench_zipf_next(&k->zipf, r);
    return (uint32_t)(bench_rng_next(r) % k->cfg->keys);
}

/* 100 % reads never draws a write and 0 % never a read, whatever the rng says. */
bool bench_pick_read(double read_pct, struct bench_rng *r)
{
    return bench_rng_unit(r) * 100.0 < read_pct;
}

/* BENCH_KEY_FMT by hand: the UDP and DPDK drivers format a path for every
 * read, and snprintf was a tenth of the DPDK driver's time. */
size_t bench_key_path(char *buf, size_t len, uint32_t key)
{
    static const char prefix[] = BENCH_ROOT "/k";
    char digits[10]; /* UINT32_MAX has 10, least significant first */
    size_t nd = 0;
    do {
        digits[nd++] = (char)('0' + key % 10);
        key /= 10;
    } while (key != 0);
    char path[sizeof prefix + 10];
    size_t n = sizeof prefix - 1;
    memcpy(path, prefix, n);
    for (size_t pad = nd; pad < 8; pad++) /* %08u */
        path[n++] = '0';
    while (nd > 0)
        path[n++] = digits[--nd];
    if (len > 0) { /* as snprintf: cut to fit, always terminated */
        size_t copy = n < len ? n : len - 1;
        memcpy(buf, path, copy);
        buf[copy] = '\0';
    }
    return n;
}
