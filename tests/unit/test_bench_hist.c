/*
 * test_bench_hist.c — larch-bench's latency histogram against a sorted
 * reference, the command-line parser's refusals, and its key paths against
 * snprintf.
 *
 * The histogram promises the nearest-rank percentile to within 1/256 of the
 * true value (half a bucket of 1/128 relative width), exact below 256 ns and
 * at the extremes. Every distribution below is checked at percentiles from
 * 0.01 % to 100 % against sorted samples, with ranks computed here in integer
 * arithmetic so the histogram's own rank rounding is tested too.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "bench/hist.h"

#define SAMPLES 200000

/* ---- a reproducible sample source (splitmix64) -------------------------- */

static uint64_t rng_state;

static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static double rng_unit(void)
{
    return (double)(rng_next() >> 11) * 0x1.0p-53;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Records values into a fresh histogram and checks every percentile in the
 * list against the sorted copy. */
static void check_against_reference(uint64_t *values, size_t n)
{
    /* percentiles in parts per million so the reference rank is exact */
    static const uint64_t ppm[] = { 100,    1000,   10000,  100000, 250000,  500000, 750000,
                                    900000, 950000, 990000, 999000, 999900, 1000000 };
    struct bench_hist *h = malloc(sizeof(*h));
    assert_non_null(h);
    bench_hist_reset(h);
    for (size_t i = 0; i < n; i++)
        bench_hist_record(h, values[i]);
    qsort(values, n, sizeof(values[0]), cmp_u64);
    assert_int_equal(h->count, n);
    assert_int_equal(bench_hist_min(h), values[0]);
    assert_int_equal(bench_hist_max(h), values[n - 1]);
    assert_int_equal(bench_hist_value_at(h, 0), values[0]);
    for (size_t i = 0; i < sizeof(ppm) / sizeof(ppm[0]); i++) {
        uint64_t rank = (ppm[i] * n + 999999) / 1000000; /* ceil(p * n) */
        if (rank == 0)
            rank = 1;
        uint64_t want = values[rank - 1];
        uint64_t got = bench_hist_value_at(h, (double)ppm[i] / 10000.0);
        uint64_t diff = got > want ? got - want : want - got;
        if (want < BENCH_HIST_EXACT_MAX) {
            assert_int_equal(got, want);
        } else if (diff * 256 > want) {
            fail_msg("p%.4f: got %llu, reference %llu (error %.3f %% > 0.39 %%)",
                     (double)ppm[i] / 10000.0, (unsigned long long)got,
                     (unsigned long long)want, 100.0 * (double)diff / (double)want);
        }
    }
    assert_int_equal(bench_hist_value_at(h, 100), values[n - 1]);
    free(h);
}

static uint64_t *sample_buffer(void)
{
    uint64_t *v = malloc(sizeof(uint64_t) * SAMPLES);
    assert_non_null(v);
    return v;
}

/* ---- distributions ------------------------------------------------------ */

static void test_uniform(void **state)
{
    rng_state = 1;
    uint64_t *v = sample_buffer();
    for (size_t i = 0; i < SAMPLES; i++) /* 1 us .. 10 ms */
        v[i] = 1000 + rng_next() % 10000000;
    check_against_reference(v, SAMPLES);
    free(v);
}

static void test_exponential(void **state)
{
    rng_state = 2;
    uint64_t *v = sample_buffer();
    for (size_t i = 0; i < SAMPLES; i++) /* mean 100 us, long tail */
        v[i] = (uint64_t)(-log(1.0 - rng_unit()) * 100000.0);
    check_against_reference(v, SAMPLES);
    free(v);
}

static void test_bimodal(void **state)
{
    rng_state = 3;
    uint64_t *v = sample_buffer();
    for (size_t i = 0; i < SAMPLES; i++) {
        /* 95 % cache-hit-like reads near 40 us, 5 % fsync-like writes near 4 ms */
        if (rng_unit() < 0.95)
            v[i] = 30000 + rng_next() % 20000;
        else
            v[i] = 3000000 + rng_next() % 2000000;
    }
    check_against_reference(v, SAMPLES);
    free(v);
}

static void test_heavy_tail_up_to_minutes(void **state)
{
    rng_state = 4;
    uint64_t *v = sample_buffer();
    for (size_t i = 0; i < SAMPLES; i++) /* log-uniform 1 us .. 60 s */
        v[i] = (uint64_t)(1000.0 * pow(6e7, rng_unit()));
    check_against_reference(v, SAMPLES);
    free(v);
}

static void test_small_values_are_exact(void **state)
{
    rng_state = 5;
    uint64_t v[5000];
    for (size_t i = 0; i < 5000; i++)
        v[i] = rng_next() % 256;
    check_against_reference(v, 5000);
}

static void test_few_samples(void **state)
{
    /* nearest rank with 3 samples: p33.3 -> 1st, p50 -> 2nd, p66.7 -> 3rd
     * (ceil(0.5 * 3) = 2), p99.9 -> 3rd */
    struct bench_hist h;
    bench_hist_reset(&h);
    bench_hist_record(&h, 10);
    bench_hist_record(&h, 20);
    bench_hist_record(&h, 30);
    assert_int_equal(bench_hist_value_at(&h, 33.3), 10);
    assert_int_equal(bench_hist_value_at(&h, 50), 20);
    assert_int_equal(bench_hist_value_at(&h, 66.7), 30);
    assert_int_equal(bench_hist_value_at(&h, 99.9), 30);
    /* 99.9 % of 1000 is rank 999 exactly, despite floating point */
    bench_hist_reset(&h);
    for (uint64_t i = 1; i <= 1000; i++)
        bench_hist_record(&h, i < 1000 ? 100 : 200);
    assert_int_equal(bench_hist_value_at(&h, 99.9), 100);
    assert_int_equal(bench_hist_value_at(&h, 99.95), 200);
    /* 0.0085 % of 200000 is rank 17, but 0.0085 * 200000 / 100 computes as
     * 17.000000000000004 in doubles; a plain ceil() would answer 18. */
    bench_hist_reset(&h);
    for (uint64_t i = 1; i <= 200000; i++)
        bench_hist_record(&h, i);
    assert_int_equal(bench_hist_value_at(&h, 0.0085), 17);
    assert_int_equal(bench_hist_value_at(&h, 0.068), 136);
}

/* ---- bucket arithmetic -------------------------------------------------- */

static void test_buckets_cover_values(void **state)
{
    uint32_t prev = 0;
    for (uint64_t v = 0; v < (UINT64_C(1) << 37); v = v < 4096 ? v + 1 : v + v / 997) {
        uint32_t i = bench_hist_index(v);
        assert_true(i < BENCH_HIST_BUCKETS);
        assert_true(i >= prev); /* monotone in the value */
        prev = i;
        if (v > BENCH_HIST_VALUE_MAX_NS) {
            assert_int_equal(i, BENCH_HIST_BUCKETS - 1);
            continue;
        }
        uint64_t lo = bench_hist_bucket_lower(i), w = bench_hist_bucket_width(i);
        assert_true(lo <= v && v < lo + w);
        assert_true(w == 1 || w * 128 <= lo); /* relative width <= 1/128 */
    }
    /* consecutive buckets tile the range without gaps */
    for (uint32_t i = 0; i + 1 < BENCH_HIST_BUCKETS; i++)
        assert_int_equal(bench_hist_bucket_lower(i) + bench_hist_bucket_width(i),
                         bench_hist_bucket_lower(i + 1));
    assert_int_equal(bench_hist_bucket_lower(BENCH_HIST_BUCKETS - 1) +
                         bench_hist_bucket_width(BENCH_HIST_BUCKETS - 1) - 1,
                     BENCH_HIST_VALUE_MAX_NS);
}

static void test_out_of_range_value_keeps_exact_max(void **state)
{
    struct bench_hist h;
    bench_hist_reset(&h);
    uint64_t huge = UINT64_C(1) << 40; /* 18 minutes */
    bench_hist_record(&h, 5000);
    bench_hist_record(&h, huge);
    assert_int_equal(h.buckets[BENCH_HIST_BUCKETS - 1], 1);
    assert_int_equal(bench_hist_max(&h), huge);
    assert_int_equal(bench_hist_value_at(&h, 100), huge);
    assert_true(bench_hist_value_at(&h, 50) >= 4980 && bench_hist_value_at(&h, 50) <= 5020);
}

static void test_empty(void **state)
{
    struct bench_hist h;
    bench_hist_reset(&h);
    assert_int_equal(bench_hist_value_at(&h, 50), 0);
    assert_int_equal(bench_hist_min(&h), 0);
    assert_int_equal(bench_hist_max(&h), 0);
    assert_true(bench_hist_mean(&h) == 0.0);
}

static void test_merge_equals_single_histogram(void **state)
{
    struct bench_hist *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b)), *all = malloc(sizeof(*all));
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(all);
    bench_hist_reset(a);
    bench_hist_reset(b);
    bench_hist_reset(all);
    rng_state = 6;
    for (int i = 0; i < 50000; i++) {
        uint64_t v = rng_next() % 50000000;
        bench_hist_record(i % 3 ? a : b, v);
        bench_hist_record(all, v);
    }
    bench_hist_merge(a, b);
    assert_int_equal(a->count, all->count);
    assert_int_equal(a->min_ns, all->min_ns);
    assert_int_equal(a->max_ns, all->max_ns);
    assert_memory_equal(a->buckets, all->buckets, sizeof(a->buckets));
    assert_true(fabs(bench_hist_mean(a) - bench_hist_mean(all)) < 1e-6 * bench_hist_mean(all));
    /* merging an empty histogram changes nothing, min included */
    bench_hist_reset(b);
    bench_hist_merge(a, b);
    assert_int_equal(a->min_ns, all->min_ns);
    assert_int_equal(a->count, all->count);
    free(a);
    free(b);
    free(all);
}

static void test_mean(void **state)
{
    struct bench_hist h;
    bench_hist_reset(&h);
    bench_hist_record(&h, 1000);
    bench_hist_record(&h, 3000);
    assert_true(bench_hist_mean(&h) == 2000.0);
}

/* ---- argument parsing --------------------------------------------------- */

/* Parses a NULL-terminated argument list; returns the parser's code. */
static int parse(struct bench_cfg *cfg, char *err, size_t err_len, ...)
{
    char *argv[64] = { "larch-bench" };
    int argc = 1;
    va_list ap;
    va_start(ap, err_len);
    for (char *a = va_arg(ap, char *); a && argc < 63; a = va_arg(ap, char *))
        argv[argc++] = a;
    va_end(ap);
    bench_cfg_defaults(cfg);
    err[0] = '\0';
    return bench_args_parse(cfg, argc, argv, err, err_len);
}

static void expect_error(const char *message, ...)
{
    struct bench_cfg cfg;
    char err[256];
    char *argv[64] = { "larch-bench" };
    int argc = 1;
    va_list ap;
    va_start(ap, message);
    for (char *a = va_arg(ap, char *); a && argc < 63; a = va_arg(ap, char *))
        argv[argc++] = a;
    va_end(ap);
    bench_cfg_defaults(&cfg);
    assert_int_equal(bench_args_parse(&cfg, argc, argv, err, sizeof(err)), BENCH_ARGS_ERROR);
    assert_string_equal(err, message);
}

static void test_args_defaults(void **state)
{
    struct bench_cfg cfg;
    char err[256];
    assert_int_equal(parse(&cfg, err, sizeof(err), NULL), BENCH_ARGS_OK);
    assert_string_equal(cfg.host, "127.0.0.1");
    assert_int_equal(cfg.port, 2181);
    assert_int_equal(cfg.read_pct_count, 4);
    assert_true(cfg.read_pcts[0] == 90 && cfg.read_pcts[1] == 95 && cfg.read_pcts[2] == 99 &&
                cfg.read_pcts[3] == 100);
    assert_int_equal(cfg.timeout_ms, 30000);
    assert_true(cfg.setup);
    assert_false(cfg.json);
    assert_true(cfg.rate_per_s == 0);
}

static void test_args_full(void **state)
{
    struct bench_cfg cfg;
    char err[256];
    int rc = parse(&cfg, err, sizeof(err), "--server", "localhost:2999", "--sessions=32",
                   "--outstanding", "4", "--threads", "2", "--read-ratio", "50,99.5",
                   "--read-op", "exists", "--write-op", "create-delete", "--keys", "5000",
                   "--value-size", "0", "--zipf-theta", "0.8", "--watch", "--warmup", "0",
                   "--duration", "1.5", "--server-pid", "42", "--label", "zk-3.8", "--json",
                   "--no-setup", "--cleanup", "--client", "c", "--seed", "7", NULL);
    assert_int_equal(rc, BENCH_ARGS_OK);
    assert_string_equal(cfg.host, "localhost");
    assert_int_equal(cfg.port, 2999);
    assert_int_equal(cfg.sessions, 32);
    assert_int_equal(cfg.outstanding, 4);
    assert_int_equal(cfg.threads, 2);
    assert_int_equal(cfg.read_pct_count, 2);
    assert_true(cfg.read_pcts[0] == 50 && cfg.read_pcts[1] == 99.5);
    assert_int_equal(cfg.read_op, BENCH_READ_EXISTS);
    assert_int_equal(cfg.write_op, BENCH_WRITE_CREATE_DELETE);
    assert_int_equal(cfg.keys, 5000);
    assert_int_equal(cfg.value_size_bytes, 0);
    assert_int_equal(cfg.dist, BENCH_DIST_ZIPF);
    assert_true(cfg.zipf_theta == 0.8);
    assert_true(cfg.watch && cfg.json && cfg.cleanup && !cfg.setup);
    assert_true(cfg.warmup_s == 0 && cfg.duration_s == 1.5);
    assert_int_equal(cfg.server_pid, 42);
    assert_string_equal(cfg.label, "zk-3.8");
    assert_int_equal(cfg.client, BENCH_CLIENT_C);
    assert_int_equal(cfg.seed, 7);
}

static void test_args_open_loop_defaults_outstanding(void **state)
{
    struct bench_cfg cfg;
    char err[256];
    assert_int_equal(parse(&cfg, err, sizeof(err), "--rate", "20000", NULL), BENCH_ARGS_OK);
    assert_true(cfg.rate_per_s == 20000);
    assert_int_equal(cfg.outstanding, BENCH_OPEN_LOOP_OUTSTANDING);
    assert_int_equal(parse(&cfg, err, sizeof(err), "--rate", "100", "--outstanding", "3", NULL),
                     BENCH_ARGS_OK);
    assert_int_equal(cfg.outstanding, 3);
}

static void test_args_ipv6_and_help(void **state)
{
    struct bench_cfg cfg;
    char err[256];
    assert_int_equal(parse(&cfg, err, sizeof(err), "--server", "[::1]:2182", NULL), BENCH_ARGS_OK);
    assert_string_equal(cfg.host, "::1");
    assert_int_equal(cfg.port, 2182);
    assert_int_equal(parse(&cfg, err, sizeof(err), "--server", "db1", NULL), BENCH_ARGS_OK);
    assert_string_equal(cfg.host, "db1");
    assert_int_equal(cfg.port, 2181);
    assert_int_equal(parse(&cfg, err, sizeof(err), "--sessions", "x", "--help", NULL),
                     BENCH_ARGS_ERROR);
    assert_int_equal(parse(&cfg, err, sizeof(err), "--help", "--sessions", "x", NULL),
                     BENCH_ARGS_HELP);
    assert_int_equal(parse(&cfg, err, sizeof(err), "--version", NULL), BENCH_ARGS_VERSION);
    assert_non_null(strstr(bench_usage(), "--read-ratio"));
    assert_non_null(strstr(bench_usage(), "--server-pid"));
}

/* --udp: an address literal and a port; closed loop, a mix's writes as
 * setData, TCP's options refused with a reason. */
static void test_args_udp(void **state)
{
    struct bench_cfg cfg;
    char err[256];
    assert_int_equal(parse(&cfg, err, sizeof(err), "--udp", "127.0.0.1:2182", "--read-ratio",
                           "100", NULL),
                     BENCH_ARGS_OK);
    assert_string_equal(cfg.udp_host, "127.0.0.1");
    assert_int_equal(cfg.udp_port, 2182);
    assert_int_equal(parse(&cfg, err, sizeof(err), "--udp", "[::1]:7", "--read-ratio", "100",
                           NULL),
                     BENCH_ARGS_OK);
    assert_string_equal(cfg.udp_host, "::1");
    expect_error("--udp: 'db1' is not an IPv4 address literal", "--udp", "db1:5",
                 "--read-ratio", "100", NULL);
    expect_error("--udp: '127.0.0.1' is not IP:PORT", "--udp", "127.0.0.1", NULL);
    expect_error("--udp: '0' is not in 1..65535", "--udp", "127.0.0.1:0", NULL);
    /* a mix: its writes go over TCP, as setData */
    assert_int_equal(parse(&cfg, err, sizeof(err), "--udp", "127.0.0.1:5", "--read-ratio",
                           "90,100", NULL),
                     BENCH_ARGS_OK);
    expect_error("--udp: a mix's writes go over TCP as setData only (--write-op setData)",
                 "--udp", "127.0.0.1:5", "--write-op", "create-delete", NULL);
    expect_error("--udp: the kernel-socket UDP driver is closed loop (no --rate; the --dpdk "
                 "driver has an open loop)",
                 "--udp", "127.0.0.1:5", "--read-ratio", "100", "--rate", "1000", NULL);
    assert_int_equal(parse(&cfg, err, sizeof(err), "--udp", "198.18.0.1:5", "--dpdk",
                           "-l 0 --vdev net_null0", "--dpdk-src", "198.18.0.2", "--rate", "1000",
                           NULL),
                     BENCH_ARGS_OK);
    assert_true(cfg.rate_per_s == 1000);
    expect_error("--udp: watches need TCP", "--udp", "127.0.0.1:5", "--read-ratio", "100",
                 "--watch", NULL);
}

static void test_args_errors(void **state)
{
    expect_error("--read-ratio: '120' is not in 0..100", "--read-ratio", "120", NULL);
    expect_error("--read-ratio: '-1' is not in 0..100", "--read-ratio", "90,-1", NULL);
    expect_error("--read-ratio: 'abc' is not a number", "--read-ratio", "abc", NULL);
    expect_error("--read-ratio: ',' has no value", "--read-ratio", ",", NULL);
    expect_error("--sessions: '0' is not in 1..20000", "--sessions", "0", NULL);
    expect_error("--sessions: '12x' is not an integer", "--sessions=12x", NULL);
    expect_error("--sessions: needs a value", "--sessions", NULL);
    expect_error("--outstanding: '' is not an integer", "--outstanding=", NULL);
    expect_error("--keys: '0' is not in 1..10000000", "--keys", "0", NULL);
    expect_error("--value-size: '2000000' is not in 0..1000000", "--value-size", "2000000",
                 NULL);
    expect_error("--duration: '0' is not in 0.001..86400", "--duration", "0", NULL);
    expect_error("--rate: 'nan' is not a number", "--rate", "nan", NULL);
    expect_error("--zipf-theta: '1' is not in 0.01..0.999", "--zipf-theta", "1", NULL);
    expect_error("--read-op: 'get' is not one of getData, exists, getChildren", "--read-op",
                 "get", NULL);
    expect_error("--write-op: 'delete' is not one of setData, create-delete", "--write-op",
                 "delete", NULL);
    expect_error("--client: 'java' is not one of raw, c", "--client", "java", NULL);
    expect_error("--server: '70000' is not in 1..65535", "--server", "h:70000", NULL);
    expect_error("--server: ':2181' has no usable host", "--server", ":2181", NULL);
    expect_error("--label: 'a b' may hold only letters, digits and -_.+", "--label", "a b", NULL);
    expect_error("--frobnicate: unknown option", "--frobnicate", NULL);
    expect_error("--json: takes no value", "--json=yes", NULL);
    expect_error("'extra': unexpected argument (options start with --)", "extra", NULL);
    expect_error("--threads: '4' is more than --sessions (2)", "--sessions", "2", "--threads",
                 "4", NULL);
    expect_error("--rate: open loop needs --client raw (the C client driver is closed loop)",
                 "--client", "c", "--rate", "1000", NULL);
}

/* bench_key_path formats by hand what BENCH_KEY_FMT says, and cuts as
 * snprintf does: the paths the setup created are the ones the reads ask for. */
static void test_key_paths_match_the_format(void **state)
{
    const uint32_t keys[] = { 0, 7, 42, 99999999, 100000000, 1234567890, UINT32_MAX };
    const size_t sizes[] = { 64, 22, 21, 20, 1, 0 };
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
            char want[64], got[64];
            memset(want, '#', sizeof want);
            memset(got, '#', sizeof got);
            int n = snprintf(want, sizes[z], BENCH_KEY_FMT, keys[k]);
            assert_int_equal(bench_key_path(got, sizes[z], keys[k]), (size_t)n);
            assert_memory_equal(got, want, sizeof got);
        }
    }
    char p[64];
    bench_key_path(p, sizeof p, 5);
    assert_string_equal(p, "/larch-bench/k00000005");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uniform),
        cmocka_unit_test(test_exponential),
        cmocka_unit_test(test_bimodal),
        cmocka_unit_test(test_heavy_tail_up_to_minutes),
        cmocka_unit_test(test_small_values_are_exact),
        cmocka_unit_test(test_few_samples),
        cmocka_unit_test(test_buckets_cover_values),
        cmocka_unit_test(test_out_of_range_value_keeps_exact_max),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_merge_equals_single_histogram),
        cmocka_unit_test(test_mean),
        cmocka_unit_test(test_args_defaults),
        cmocka_unit_test(test_args_full),
        cmocka_unit_test(test_args_open_loop_defaults_outstanding),
        cmocka_unit_test(test_args_ipv6_and_help),
        cmocka_unit_test(test_args_errors),
        cmocka_unit_test(test_args_udp),
        cmocka_unit_test(test_key_paths_match_the_format),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
