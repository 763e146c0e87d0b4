/* test_double_barrier.c — the double barrier (client/recipes/double_barrier.h,
 * seeds 000/001 "Double Barriers") against a live server (LARCH_HOSTS):
 * nobody enters before `count` participants have joined, then all do; no
 * one leaves before everyone has finished computing; leave completes for
 * all and leaves no participant node; on leave every participant but the
 * lowest is woken at most once. Worker threads never call cmocka; the main
 * thread asserts. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/recipes/double_barrier.h"
#include "tests/recipes/rt.h"

static struct larch_wake_stats stats_of(struct larch_double_barrier *d)
{
    struct larch_wake_stats st;
    larch_double_barrier_stats(d, &st);
    return st;
}

#define DB_N 4

struct db_shared {
    const char *path;
    atomic_int arrived;    /* started enter */
    atomic_int computing;  /* between enter and leave */
    atomic_int finished;   /* done computing */
    atomic_int passed;     /* returned from enter */
};

struct db_part {
    struct db_shared *s;
    struct larch *lh;
    struct larch_double_barrier *d;
    int compute_ms;
    atomic_int enter_rc, leave_rc;
    atomic_int arrived_seen;  /* s->arrived when enter returned */
    atomic_int finished_seen; /* s->finished when leave returned */
    atomic_int left_seen;     /* participant nodes when leave returned */
    atomic_uint_fast64_t wakeups_after_enter;
    char node[64];            /* our node's name, written before passed++ */
};

static void *db_run(void *p)
{
    struct db_part *c = p;
    atomic_fetch_add(&c->s->arrived, 1);
    int rc = larch_double_barrier_enter(c->d, RT_WAIT_MS);
    atomic_store(&c->arrived_seen, atomic_load(&c->s->arrived));
    if (rc == ZK_OK)
        snprintf(c->node, sizeof c->node, "%s", larch_double_barrier_node(c->d));
    struct larch_wake_stats st;
    larch_double_barrier_stats(c->d, &st);
    atomic_store(&c->wakeups_after_enter, st.wakeups);
    atomic_fetch_add(&c->s->passed, 1);
    atomic_store(&c->enter_rc, rc);
    if (rc != ZK_OK)
        return NULL;
    atomic_fetch_add(&c->s->computing, 1);
    rt_sleep_ms(c->compute_ms);
    atomic_fetch_sub(&c->s->computing, 1);
    atomic_fetch_add(&c->s->finished, 1);
    rc = larch_double_barrier_leave(c->d, RT_WAIT_MS);
    atomic_store(&c->finished_seen, atomic_load(&c->s->finished));
    atomic_store(&c->left_seen, rt_count_prefixed(c->lh, c->s->path, "p-"));
    atomic_store(&c->leave_rc, rc);
    return NULL;
}

struct db_wait {
    struct larch *lh;
    const char *path;
    struct db_part *parts;
    int n;
};

static bool joined_and_watching(void *p)
{
    struct db_wait *w = p;
    if (rt_count_prefixed(w->lh, w->path, "p-") != w->n)
        return false;
    for (int i = 0; i < w->n; i++) {
        if (stats_of(w->parts[i].d).watches_set < 1) /* the ready watch */
            return false;
    }
    return true;
}

static void test_enter_compute_leave(void **state)
{
    struct larch *lh = rt_open();
    char *root = rt_root(lh, "dbar");
    char *path = rt_path(root, "round1");
    struct db_shared s = { .path = path };
    struct db_part parts[DB_N];
    pthread_t th[DB_N];
    for (int i = 0; i < DB_N; i++) {
        /* Different computing times, so leaves overlap in every order. */
        parts[i] = (struct db_part){ .s = &s, .lh = rt_open(), .compute_ms = 10 + 15 * i,
                                     .left_seen = -1 };
        assert_int_equal(larch_double_barrier_create(parts[i].lh, path, DB_N, &parts[i].d),
                         ZK_OK);
    }
    for (int i = 0; i + 1 < DB_N; i++)
        assert_int_equal(pthread_create(&th[i], NULL, db_run, &parts[i]), 0);
    struct db_wait w = { lh, path, parts, DB_N - 1 };
    assert_true(rt_eventually(joined_and_watching, &w));
    assert_int_equal(atomic_load(&s.passed), 0); /* one short: nobody enters */

    assert_int_equal(pthread_create(&th[DB_N - 1], NULL, db_run, &parts[DB_N - 1]), 0);
    for (int i = 0; i < DB_N; i++)
        pthread_join(th[i], NULL);

    int lowest = 0;
    for (int i = 1; i < DB_N; i++) {
        if (strcmp(parts[i].node, parts[lowest].node) < 0)
            lowest = i;
    }
    for (int i = 0; i < DB_N; i++) {
        struct db_part *c = &parts[i];
        assert_int_equal(atomic_load(&c->enter_rc), ZK_OK);
        assert_int_equal(atomic_load(&c->arrived_seen), DB_N); /* none entered early */
        assert_int_equal(atomic_load(&c->leave_rc), ZK_OK);
        assert_int_equal(atomic_load(&c->finished_seen), DB_N); /* none left early */
        assert_int_equal(atomic_load(&c->left_seen), 0);
        assert_null(larch_double_barrier_node(c->d));
        /* Leave wakes a non-lowest participant only when the lowest goes. */
        uint64_t on_leave = stats_of(c->d).wakeups - atomic_load(&c->wakeups_after_enter);
        if (i != lowest)
            assert_true(on_leave <= 1);
    }
    assert_int_equal(atomic_load(&s.computing), 0);
    assert_int_equal(rt_count_prefixed(lh, path, "p-"), 0);
    for (int i = 0; i < DB_N; i++) {
        larch_double_barrier_free(parts[i].d);
        larch_close(parts[i].lh);
    }
    free(path);
    rt_finish(lh, root);
}

static void test_enter_timeout(void **state)
{
    struct larch *lh = rt_open();
    char *root = rt_root(lh, "dbar-short");
    char *path = rt_path(root, "round1");
    struct larch_double_barrier *d;
    assert_int_equal(larch_double_barrier_create(lh, path, 0, &d), ZK_EBADARGUMENTS);
    assert_int_equal(larch_double_barrier_create(lh, path, 2, &d), ZK_OK);
    assert_int_equal(larch_double_barrier_enter(d, 200), ZK_EOPERATIONTIMEOUT);
    assert_null(larch_double_barrier_node(d));
    assert_int_equal(rt_count_prefixed(lh, path, "p-"), 0); /* gave its node back */
    char *ready = rt_path(path, "ready");
    assert_int_equal(rt_exists(lh, ready, NULL), ZK_ENONODE);
    free(ready);
    larch_double_barrier_free(d);

    /* A single participant against a count of one goes straight through. */
    assert_int_equal(larch_double_barrier_create(lh, path, 1, &d), ZK_OK);
    assert_int_equal(larch_double_barrier_enter(d, RT_WAIT_MS), ZK_OK);
    assert_non_null(larch_double_barrier_node(d));
    assert_int_equal(larch_double_barrier_enter(d, RT_WAIT_MS), ZK_EBADARGUMENTS);
    assert_int_equal(rt_count_prefixed(lh, path, "p-"), 1);
    assert_int_equal(larch_double_barrier_leave(d, RT_WAIT_MS), ZK_OK);
    assert_int_equal(rt_count_prefixed(lh, path, "p-"), 0);
    larch_double_barrier_free(d);

    free(path);
    rt_finish(lh, root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_enter_compute_leave),
        cmocka_unit_test(test_enter_timeout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
