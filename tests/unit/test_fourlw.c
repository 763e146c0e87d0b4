/*
 * test_fourlw.c — the four-letter-word formatting of server/fourlw.c, with
 * the dataplane replaced by stubs (no sockets): wchp and wchc must print
 * every watched path whole, however long; dirs measures the data dirs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <urcu.h>

#include "replication/seq_int.h"
#include "server/server.h"

/* ---- stubs for what fourlw.c calls outside the formatting ----------------- */

struct stub_watch {
    int64_t session;
    const char *path;
};
static const struct stub_watch *stub_watches;
static size_t stub_nwatches;

void dp_each_watch(struct dp *dp, dp_watch_fn fn, void *arg)
{
    (void)dp;
    for (size_t i = 0; i < stub_nwatches; i++)
        fn(arg, stub_watches[i].session, WATCH_DATA, stub_watches[i].path);
}

static struct dp_stats stub_stats;

void dp_get_stats(struct dp *dp, struct dp_stats *out)
{
    (void)dp;
    *out = stub_stats;
}

void dp_reset_stats(struct dp *dp)
{
    (void)dp;
}

void dp_reset_conn_stats(struct dp *dp)
{
    (void)dp;
}

int dp_udp_port(const struct dp *dp)
{
    (void)dp;
    return 0;
}

void dp_each_conn(struct dp *dp, dp_conn_fn fn, void *arg)
{
    (void)dp, (void)fn, (void)arg;
}

void durability_get_stats(struct durability *d, struct durability_stats *out)
{
    (void)d;
    memset(out, 0, sizeof *out);
}

static const char *stub_snap_dir, *stub_log_dir;

const char *durability_state_dir(const struct durability *d)
{
    (void)d;
    return stub_snap_dir;
}

const char *durability_log_dir(const struct durability *d)
{
    (void)d;
    return stub_log_dir;
}

/* ---- tests ------------------------------------------------------------------ */

static char *long_path(size_t len, char fill)
{
    char *p = malloc(len + 1);
    assert_non_null(p);
    memset(p, fill, len);
    p[0] = '/';
    p[len] = '\0';
    return p;
}

/* Runs word (with word_arg, stmk's) on srv and returns its output as a
 * NUL-terminated string. */
static char *answer_arg(struct server *srv, const char *word, int64_t word_arg)
{
    struct zk_wbuf out;
    zk_wbuf_init(&out);
    fourlw_answer(srv, NULL, word, word_arg, &out);
    assert_false(out.err);
    char *s = malloc(out.len + 1);
    assert_non_null(s);
    if (out.len) /* an empty answer may have no buffer at all */
        memcpy(s, out.p, out.len);
    s[out.len] = '\0';
    zk_wbuf_free(&out);
    return s;
}

static char *answer_on(struct server *srv, const char *word)
{
    return answer_arg(srv, word, 0);
}

static char *answer(const char *word)
{
    struct server srv = { 0 };
    return answer_on(&srv, word);
}

static char *concat(const char *const *parts, size_t n)
{
    size_t len = 0;
    for (size_t i = 0; i < n; i++)
        len += strlen(parts[i]);
    char *s = malloc(len + 1);
    assert_non_null(s);
    s[0] = '\0';
    for (size_t i = 0; i < n; i++)
        strcat(s, parts[i]);
    return s;
}

static void test_watch_dumps_print_long_paths_whole(void **state)
{
    (void)state;
    static const size_t lens[] = { 1023, 1024, 5000, 200000 };
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        char *p = long_path(lens[i], 'x');
        const struct stub_watch w[] = { { 0x2, p }, { 0x1, "/short" }, { 0x1, p } };
        stub_watches = w;
        stub_nwatches = 3;

        /* by path ("/short" sorts before "/xxx..."), then by session */
        const char *const wchp[] = { "/short\n\t0x1\n", p, "\n\t0x1\n\t0x2\n" };
        char *want = concat(wchp, 3);
        char *got = answer("wchp");
        assert_int_equal(strlen(got), strlen(want));
        assert_string_equal(got, want);
        free(want);
        free(got);

        /* by session, then by path */
        const char *const wchc[] = { "0x1\n\t/short\n\t", p, "\n0x2\n\t", p, "\n" };
        want = concat(wchc, 5);
        got = answer("wchc");
        assert_int_equal(strlen(got), strlen(want));
        assert_string_equal(got, want);
        free(want);
        free(got);

        got = answer("wchs");
        assert_string_equal(got, "2 connections watching 2 paths\nTotal watches:3\n");
        free(got);
        free(p);
    }
    stub_nwatches = 0;
}

static void write_bytes(const char *dir, const char *name, size_t len)
{
    char path[1024];
    assert_true((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) < sizeof path);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (size_t i = 0; i < len; i++)
        assert_int_not_equal(fputc('x', f), EOF);
    assert_int_equal(fclose(f), 0);
}

/* dirs sums the regular files of each directory, the log directory as
 * datadir_size and the snapshot directory as logdir_size (ZooKeeper's
 * names); a subdirectory is not a file; without a dataDir both are 0. */
static void test_dirs_sums_the_files(void **state)
{
    (void)state;
    char snap[] = "/tmp/test_fourlw_snap_XXXXXX", log[] = "/tmp/test_fourlw_log_XXXXXX";
    assert_non_null(mkdtemp(snap));
    assert_non_null(mkdtemp(log));
    stub_snap_dir = snap;
    stub_log_dir = log;
    write_bytes(snap, "snapshot.0", 457);
    write_bytes(snap, "secret", 32);
    write_bytes(log, "log.1", 4096);
    char sub[128];
    assert_true((size_t)snprintf(sub, sizeof sub, "%s/sub", log) < sizeof sub);
    assert_int_equal(mkdir(sub, 0700), 0);
    write_bytes(sub, "ignored", 10);

    static int token;
    struct server srv = { .dur = (struct durability *)&token };
    char *got = answer_on(&srv, "dirs");
    assert_string_equal(got, "datadir_size: 4096\nlogdir_size: 489\n");
    free(got);

    stub_log_dir = snap; /* no dataLogDir: one directory, both lines its total */
    got = answer_on(&srv, "dirs");
    assert_string_equal(got, "datadir_size: 489\nlogdir_size: 489\n");
    free(got);

    got = answer("dirs");
    assert_string_equal(got, "datadir_size: 0\nlogdir_size: 0\n");
    free(got);

    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", snap, log);
    assert_int_equal(system(cmd), 0);
    got = answer_on(&srv, "dirs"); /* gone: 0, as ZooKeeper answers for a directory it cannot list */
    assert_string_equal(got, "datadir_size: 0\nlogdir_size: 0\n");
    free(got);
}

/* gtmk prints the mask, stmk sets it and echoes it: decimal, signed (a
 * Java long), no newline, as ZooKeeper's TraceMaskCommand and
 * SetTraceMaskCommand print them. */
static void test_trace_mask_set_and_read_back(void **state)
{
    (void)state;
    struct server srv = { 0 };
    atomic_init(&srv.trace_mask, LARCH_TRACE_MASK_DEFAULT);
    char *got = answer_on(&srv, "gtmk");
    assert_string_equal(got, "306");
    free(got);
    static const struct {
        int64_t mask;
        const char *text;
    } cases[] = { { 4095, "4095" }, { -1, "-1" }, { INT64_MIN, "-9223372036854775808" }, { 0, "0" } };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        got = answer_arg(&srv, "stmk", cases[i].mask);
        assert_string_equal(got, cases[i].text);
        free(got);
        got = answer_on(&srv, "gtmk");
        assert_string_equal(got, cases[i].text);
        free(got);
    }
}

/* hash prints the digest log as ZooKeeper's DigestCommand does: the zxid
 * in bare lowercase hex, the digest as a signed Java long, oldest first;
 * nothing while the log is empty. */
static void test_hash_prints_the_digest_log(void **state)
{
    (void)state;
    rcu_register_thread();
    struct tree *t = tree_new();
    assert_non_null(t);
    struct seq_cfg cfg = { .min_session_timeout_ms = 4000, .max_session_timeout_ms = 40000 };
    struct server srv = { .tree = t, .seq = seq_new(t, &cfg, 0) };
    assert_non_null(srv.seq);
    char *got = answer_on(&srv, "hash");
    assert_string_equal(got, "");
    free(got);
    sq_digest_log_note(&srv.seq->digest_log, 0x80, 271085424225u);
    sq_digest_log_note(&srv.seq->digest_log, 0x500000100, 0xffffffffffffffffu);
    sq_digest_log_note(&srv.seq->digest_log, 0x500000180, 0x8000000000000000u);
    got = answer_on(&srv, "hash");
    assert_string_equal(got, "80: 271085424225\n"
                             "500000100: -1\n"
                             "500000180: -9223372036854775808\n");
    free(got);
    seq_free(srv.seq);
    rcu_barrier();
    tree_free(t);
    rcu_unregister_thread();
}

/* srvr's average latency is printed as ZooKeeper prints its double:
 * rounded half up to 4 decimals, then Java's Double.toString. */
static void test_avg_latency_prints_as_java_double(void **state)
{
    (void)state;
    rcu_register_thread();
    struct server srv = { .tree = tree_new() };
    assert_non_null(srv.tree);
    static const struct {
        uint64_t sum_us, count;
        const char *avg;
    } cases[] = {
        { 0, 0, "0.0" },                  /* nothing measured (after srst) */
        { 3000, 2, "1.5" },               /* trailing zeros go */
        { 2000, 1, "2.0" },
        { 20565, 10, "2.0565" },
        { 1234565, 1000, "1.2346" },      /* 1.234565: half up */
        { 1234564, 1000, "1.2346" },      /* 1.234564 */
        { 1234549, 1000, "1.2345" },
        { 10, 10, "0.001" },              /* 10^-3 is still plain */
        { 1, 2, "5.0E-4" },               /* below: Java's scientific form */
        { 1, 10, "1.0E-4" },
        { 1, 100, "0.0" },                /* 10^-5 rounds to nothing */
        { 10000000000ull, 1, "1.0E7" },   /* from 10^7 on, scientific too */
        { 12345678900ull, 1, "1.23456789E7" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        stub_stats = (struct dp_stats){ .latency_sum_us = cases[i].sum_us,
                                         .latency_count = cases[i].count };
        char *got = answer_on(&srv, "srvr");
        char want[96];
        snprintf(want, sizeof want, "\nLatency min/avg/max: 0/%s/0\n", cases[i].avg);
        if (!strstr(got, want))
            fail_msg("sum %llu count %llu: want %s in\n%s", (unsigned long long)cases[i].sum_us,
                     (unsigned long long)cases[i].count, cases[i].avg, got);
        free(got);
    }
    stub_stats = (struct dp_stats){ 0 };
    rcu_barrier();
    tree_free(srv.tree);
    rcu_unregister_thread();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_watch_dumps_print_long_paths_whole),
        cmocka_unit_test(test_dirs_sums_the_files),
        cmocka_unit_test(test_trace_mask_set_and_read_back),
        cmocka_unit_test(test_hash_prints_the_digest_log),
        cmocka_unit_test(test_avg_latency_prints_as_java_double),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
