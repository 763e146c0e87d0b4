/*
 * test_config — configuration with watch-driven refresh (seeds 000/002)
 * against a live server (env LARCH_HOSTS): versioned writes, readers (each
 * with its own handle) converging on the last of many writes, and a reader
 * that follows the znode's creation and deletion.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/recipes/config.h"
#include "tests/recipes/rt.h"

#define READERS 3
#define WRITES 25

/* What a reader's callback saw. */
struct seen {
    pthread_mutex_t mu;
    int calls;
    int32_t last_version;
    bool versions_increase; /* while present, each call's version > the previous */
    bool saw_absent;
    char last[32];
};

static void seen_init(struct seen *s)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    s->last_version = -1;
    s->versions_increase = true;
}

static void on_change(const char *data, int32_t len, int32_t version, void *ctx)
{
    struct seen *s = ctx;
    pthread_mutex_lock(&s->mu);
    s->calls++;
    if (version < 0) {
        s->saw_absent = true;
    } else {
        if (s->last_version >= 0 && version <= s->last_version)
            s->versions_increase = false;
        snprintf(s->last, sizeof s->last, "%.*s", (int)(len < 0 ? 0 : len), data ? data : "");
    }
    s->last_version = version;
    pthread_mutex_unlock(&s->mu);
}

static void assert_cached(struct conf *c, const char *want, int32_t want_version)
{
    char *data = NULL;
    int32_t len = -1, version = -2;
    assert_int_equal(conf_get(c, &data, &len, &version), ZK_OK);
    assert_int_equal(version, want_version);
    assert_int_equal(len, (int32_t)strlen(want));
    assert_string_equal(data, want);
    free(data);
}

static void test_versioned_writes(void **state)
{
    struct larch *lh = rt_open();
    char *root = rt_root(lh, "cfg");
    char *path = rt_path(root, "port");
    int32_t v = -1;
    assert_int_equal(conf_write(lh, path, "8090", 4, -1, &v, RT_WAIT_MS), ZK_OK);
    assert_int_equal(v, 0);

    struct larch *rlh = rt_open();
    struct conf *c = NULL;
    assert_int_equal(conf_open(rlh, path, NULL, NULL, RT_WAIT_MS, &c), ZK_OK);
    assert_cached(c, "8090", 0);

    assert_int_equal(conf_write(lh, path, "8091", 4, 0, &v, RT_WAIT_MS), ZK_OK);
    assert_int_equal(v, 1);
    assert_int_equal(conf_write(lh, path, "9999", 4, 0, &v, RT_WAIT_MS), ZK_EBADVERSION);
    assert_int_equal(conf_wait_version(c, 1, RT_WAIT_MS), ZK_OK);
    assert_cached(c, "8091", 1);
    assert_int_equal(conf_wait_version(c, 2, 200), ZK_EOPERATIONTIMEOUT);

    conf_close(c);
    larch_close(rlh);
    free(path);
    rt_finish(lh, root);
}

struct writer {
    struct larch *lh;
    const char *path;
    int32_t last_version;
    int rc;
};

static void *write_many(void *arg)
{
    struct writer *w = arg;
    for (int i = 0; i < WRITES && w->rc == ZK_OK; i++) {
        char value[16];
        int n = snprintf(value, sizeof value, "value-%d", i);
        w->rc = conf_write(w->lh, w->path, value, n, -1, &w->last_version, RT_WAIT_MS);
    }
    return NULL;
}

/* Readers on their own handles follow a burst of writes from another
 * handle and end on the last value; their callbacks see versions rise. */
static void test_readers_converge_on_last_write(void **state)
{
    struct larch *lh = rt_open();
    char *root = rt_root(lh, "cfg");
    char *path = rt_path(root, "port");
    assert_int_equal(conf_write(lh, path, "initial", 7, -1, NULL, RT_WAIT_MS), ZK_OK);

    struct larch *rlh[READERS];
    struct conf *c[READERS];
    /* on the heap: if an assertion ends the test early, the refreshers
     * still running write into leaked memory, not a later test's stack */
    struct seen *seen = calloc(READERS, sizeof *seen);
    assert_non_null(seen);
    for (int i = 0; i < READERS; i++) {
        rlh[i] = rt_open();
        seen_init(&seen[i]);
        assert_int_equal(conf_open(rlh[i], path, on_change, &seen[i], RT_WAIT_MS, &c[i]), ZK_OK);
    }
    struct writer w = { .lh = rt_open(), .path = path, .rc = ZK_OK };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, write_many, &w), 0);
    pthread_join(t, NULL);
    assert_int_equal(w.rc, ZK_OK);
    /* WRITES versions past the initial 0, or more: an unconditional write
     * whose reply was lost is sent again, and both may apply */
    assert_true(w.last_version >= WRITES);

    char want[16];
    snprintf(want, sizeof want, "value-%d", WRITES - 1);
    for (int i = 0; i < READERS; i++) {
        assert_int_equal(conf_wait_version(c[i], w.last_version, RT_WAIT_MS), ZK_OK);
        assert_cached(c[i], want, w.last_version);
        conf_close(c[i]);
        /* after close the callback no longer runs: its record is final */
        assert_true(seen[i].calls >= 2); /* the initial value and at least one more */
        assert_true(seen[i].versions_increase);
        assert_int_equal(seen[i].last_version, w.last_version);
        assert_string_equal(seen[i].last, want);
        assert_false(seen[i].saw_absent);
        pthread_mutex_destroy(&seen[i].mu);
        larch_close(rlh[i]);
    }
    free(seen);
    larch_close(w.lh);
    free(path);
    rt_finish(lh, root);
}

/* Waits (bounded) until the reader's callback has seen the node absent. */
static bool wait_absent(struct seen *s)
{
    for (int64_t end = base_mono_ms() + RT_WAIT_MS; base_mono_ms() < end; rt_sleep_ms(20)) {
        pthread_mutex_lock(&s->mu);
        bool absent = s->saw_absent && s->last_version < 0;
        pthread_mutex_unlock(&s->mu);
        if (absent)
            return true;
    }
    return false;
}

/* A reader opened before the znode exists follows its creation (exists
 * watch), later writes, and its deletion. */
static void test_reader_follows_create_and_delete(void **state)
{
    struct larch *lh = rt_open();
    char *root = rt_root(lh, "cfg");
    char *path = rt_path(root, "port");

    struct larch *rlh = rt_open();
    struct seen *seen = calloc(1, sizeof *seen); /* heap: see above */
    assert_non_null(seen);
    seen_init(seen);
    struct conf *c = NULL;
    assert_int_equal(conf_open(rlh, path, on_change, seen, RT_WAIT_MS, &c), ZK_OK);
    char *data = NULL;
    int32_t len = 0, version = 0;
    assert_int_equal(conf_get(c, &data, &len, &version), ZK_ENONODE);
    assert_true(seen->saw_absent);

    assert_int_equal(conf_write(lh, path, "created", 7, -1, NULL, RT_WAIT_MS), ZK_OK);
    assert_int_equal(conf_wait_version(c, 0, RT_WAIT_MS), ZK_OK);
    assert_cached(c, "created", 0);
    assert_int_equal(conf_write(lh, path, "updated", 7, 0, NULL, RT_WAIT_MS), ZK_OK);
    assert_int_equal(conf_wait_version(c, 1, RT_WAIT_MS), ZK_OK);
    assert_cached(c, "updated", 1);

    pthread_mutex_lock(&seen->mu);
    seen->saw_absent = false;
    pthread_mutex_unlock(&seen->mu);
    assert_int_equal(rt_delete(lh, path, -1), ZK_OK);
    assert_true(wait_absent(seen));
    assert_int_equal(conf_get(c, &data, &len, &version), ZK_ENONODE);

    conf_close(c);
    pthread_mutex_destroy(&seen->mu);
    free(seen);
    larch_close(rlh);
    free(path);
    rt_finish(lh, root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_versioned_writes),
        cmocka_unit_test(test_readers_converge_on_last_write),
        cmocka_unit_test(test_reader_follows_create_and_delete),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
