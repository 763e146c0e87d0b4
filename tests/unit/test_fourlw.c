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

/* the data dirs "dirs" measures (durability's larch/ subdirectories) */
static const char *stub_snap_dir = "", *stub_log_dir = "";

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

/* Runs word for srv and returns its output as a NUL-terminated string. */
static char *answer_for(struct server *srv, const char *word)
{
    struct zk_wbuf out;
    zk_wbuf_init(&out);
    fourlw_answer(srv, NULL, word, &out);
    assert_false(out.err);
    char *s = malloc(out.len + 1);
    assert_non_null(s);
    memcpy(s, out.p, out.len);
    s[out.len] = '\0';
    zk_wbuf_free(&out);
    return s;
}

static char *answer(const char *word)
{
    struct server srv = { 0 };
    return answer_for(&srv, word);
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

static void write_bytes(const char *path, size_t n)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(fputc('x', f), 'x');
    assert_int_equal(fclose(f), 0);
}

/* dirs: the bytes of the regular files in the snapshot and log dirs, not
 * counting subdirectories or what symbolic links point at; 0 and 0
 * without a dataDir. */
static void test_dirs_measures_the_data_dirs(void **state)
{
    (void)state;
    char *got = answer("dirs");
    assert_string_equal(got, "datadir_size: 0\nlogdir_size: 0\n");
    free(got);

    char snap[] = "/tmp/test_fourlw_snapXXXXXX", log[] = "/tmp/test_fourlw_logXXXXXX";
    char path[128];
    assert_non_null(mkdtemp(snap));
    assert_non_null(mkdtemp(log));
    snprintf(path, sizeof path, "%s/snapshot.0", snap);
    write_bytes(path, 1000);
    snprintf(path, sizeof path, "%s/secret", snap);
    write_bytes(path, 32);
    snprintf(path, sizeof path, "%s/sub", snap);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(path, sizeof path, "%s/log.1", log);
    write_bytes(path, 70000);
    snprintf(path, sizeof path, "%s/link", log);
    assert_int_equal(symlink("/etc/passwd", path), 0);
    stub_snap_dir = snap;
    stub_log_dir = log;
    struct server srv = { .dur = (struct durability *)&srv }; /* only tested for NULL */
    got = answer_for(&srv, "dirs");
    assert_string_equal(got, "datadir_size: 1032\nlogdir_size: 70000\n");
    free(got);
    stub_log_dir = snap; /* one directory: one number twice */
    got = answer_for(&srv, "dirs");
    assert_string_equal(got, "datadir_size: 1032\nlogdir_size: 1032\n");
    free(got);

    const char *const rm[] = { "snapshot.0", "secret", "sub" };
    for (size_t i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", snap, rm[i]);
        assert_int_equal(remove(path), 0);
    }
    snprintf(path, sizeof path, "%s/log.1", log);
    assert_int_equal(remove(path), 0);
    snprintf(path, sizeof path, "%s/link", log);
    assert_int_equal(remove(path), 0);
    assert_int_equal(rmdir(snap), 0);
    assert_int_equal(rmdir(log), 0);
    stub_snap_dir = stub_log_dir = "";
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_watch_dumps_print_long_paths_whole),
        cmocka_unit_test(test_dirs_measures_the_data_dirs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
