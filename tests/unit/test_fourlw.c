/*
 * test_fourlw.c — the four-letter-word formatting of server/fourlw.c, with
 * the dataplane replaced by stubs (no sockets): wchp and wchc must print
 * every watched path whole, however long.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include <urcu.h>

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

void dp_get_stats(struct dp *dp, struct dp_stats *out)
{
    (void)dp;
    memset(out, 0, sizeof *out);
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

/* Runs word and returns its output as a NUL-terminated string. */
static char *answer(const char *word)
{
    struct server srv = { 0 };
    struct zk_wbuf out;
    zk_wbuf_init(&out);
    fourlw_answer(&srv, NULL, word, &out);
    assert_false(out.err);
    char *s = malloc(out.len + 1);
    assert_non_null(s);
    memcpy(s, out.p, out.len);
    s[out.len] = '\0';
    zk_wbuf_free(&out);
    return s;
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_watch_dumps_print_long_paths_whole),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
