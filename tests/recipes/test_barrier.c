/* test_barrier.c — the barriers of client/recipes/barrier.h against a live
 * server (LARCH_HOSTS): the node barrier (seeds 000/001) holds waiters
 * while its node exists and releases all of them when it goes; the count
 * barrier (seed 003) lets nobody through before `count` participants have
 * joined, then everyone, and leave completes for all. Worker threads never
 * call cmocka; the main thread asserts. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "client/recipes/barrier.h"
#include "tests/recipes/rt.h"

static struct larch_wake_stats stats_of(struct larch_barrier *b)
{
    struct larch_wake_stats st;
    larch_barrier_stats(b, &st);
    return st;
}

/* ---- node barrier --------------------------------------------------------- */

#define NB_WAITERS 4

struct nb_waiter {
    struct larch *lh;
    struct larch_barrier *b;
    atomic_int *passed;
    atomic_int rc;
};

static void *nb_wait(void *p)
{
    struct nb_waiter *w = p;
    int rc = larch_barrier_wait(w->b, RT_WAIT_MS);
    atomic_fetch_add(w->passed, 1);
    atomic_store(&w->rc, rc);
    return NULL;
}

static bool nb_all_watching(void *p)
{
    struct nb_waiter *ws = p;
    for (int i = 0; i < NB_WAITERS; i++) {
        if (stats_of(ws[i].b).watches_set < 1)
            return false;
    }
    return true;
}

static void test_node_barrier(void **state)
{
    struct larch *lh = rt_open();
    char *root = rt_root(lh, "bar-node");
    char *path = rt_path(root, "gate/b"); /* parents created by set */
    struct larch_barrier *b;
    assert_int_equal(larch_barrier_create(lh, path, &b), ZK_OK);

    /* No node: no barrier; the creation watch exists() left is removed. */
    assert_int_equal(larch_barrier_wait(b, RT_WAIT_MS), ZK_OK);
    assert_int_equal(stats_of(b).watches_set, 0);
    assert_int_equal(larch_barrier_set(b, RT_WAIT_MS), ZK_OK);
    assert_int_equal(larch_barrier_set(b, RT_WAIT_MS), ZK_OK); /* idempotent */
    assert_int_equal(larch_barrier_wait(b, 200), ZK_EOPERATIONTIMEOUT);

    atomic_int passed = 0;
    struct nb_waiter ws[NB_WAITERS];
    pthread_t th[NB_WAITERS];
    for (int i = 0; i < NB_WAITERS; i++) {
        ws[i] = (struct nb_waiter){ .lh = rt_open(), .passed = &passed };
        assert_int_equal(larch_barrier_create(ws[i].lh, path, &ws[i].b), ZK_OK);
        assert_int_equal(pthread_create(&th[i], NULL, nb_wait, &ws[i]), 0);
    }
    assert_true(rt_eventually(nb_all_watching, ws));
    assert_int_equal(atomic_load(&passed), 0); /* all held while the node exists */

    assert_int_equal(larch_barrier_remove(b, RT_WAIT_MS), ZK_OK);
    for (int i = 0; i < NB_WAITERS; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(atomic_load(&passed), NB_WAITERS);
    for (int i = 0; i < NB_WAITERS; i++) {
        assert_int_equal(atomic_load(&ws[i].rc), ZK_OK);
        assert_int_equal(stats_of(ws[i].b).wakeups, 1); /* released by the removal */
        larch_barrier_free(ws[i].b);
        larch_close(ws[i].lh);
    }
    assert_int_equal(larch_barrier_remove(b, RT_WAIT_MS), ZK_OK); /* already gone */
    assert_int_equal(rt_exists(lh, path, NULL), ZK_ENONODE);

    larch_barrier_free(b);
    free(path);
    rt_finish(lh, root);
}

/* ---- count barrier -------------------------------------------------------- */

#define CB_N 4

struct cb_shared {
    const char *path;
    atomic_int arrived; /* participants that have started enter */
    atomic_int passed;  /* participants that returned from enter */
};

struct cb_part {
    struct cb_shared *s;
    struct larch *lh;
    struct larch_barrier *b;
    atomic_int enter_rc, leave_rc;
    atomic_int arrived_seen; /* s->arrived when enter returned */
    atomic_int left_seen;    /* participant nodes when leave returned */
};

static void *cb_run(void *p)
{
    struct cb_part *c = p;
    atomic_fetch_add(&c->s->arrived, 1);
    int rc = larch_barrier_enter(c->b, CB_N, RT_WAIT_MS);
    atomic_store(&c->arrived_seen, atomic_load(&c->s->arrived));
    atomic_fetch_add(&c->s->passed, 1);
    atomic_store(&c->enter_rc, rc);
    if (rc != ZK_OK)
        return NULL;
    rc = larch_barrier_leave(c->b, RT_WAIT_MS);
    atomic_store(&c->leave_rc, rc);
    /* -1 (an error) fails the check as the count of a node left would */
    atomic_store(&c->left_seen, rt_count_prefixed(c->lh, c->s->path, "p-"));
    return NULL;
}

struct cb_wait {
    struct larch *lh;
    const char *path;
    struct cb_part *parts;
    int n;
};

static bool cb_joined_and_watching(void *p)
{
    struct cb_wait *w = p;
    if (rt_count_prefixed(w->lh, w->path, "p-") != w->n)
        return false;
    for (int i = 0; i < w->n; i++) {
        if (stats_of(w->parts[i].b).watches_set < 1)
            return false;
    }
    return true;
}

static void test_count_barrier(void **state)
{
    struct larch *lh = rt_open();
    char *root = rt_root(lh, "bar-count");
    char *path = rt_path(root, "round1");
    struct cb_shared s = { .path = path };
    struct cb_part parts[CB_N];
    pthread_t th[CB_N];
    for (int i = 0; i < CB_N; i++) {
        parts[i] = (struct cb_part){ .s = &s, .lh = rt_open(), .left_seen = -1 };
        assert_int_equal(larch_barrier_create(parts[i].lh, path, &parts[i].b), ZK_OK);
    }
    /* All but one join; nobody passes. */
    for (int i = 0; i + 1 < CB_N; i++)
        assert_int_equal(pthread_create(&th[i], NULL, cb_run, &parts[i]), 0);
    struct cb_wait w = { lh, path, parts, CB_N - 1 };
    assert_true(rt_eventually(cb_joined_and_watching, &w));
    assert_int_equal(atomic_load(&s.passed), 0);

    /* The last one arrives: everyone passes, then everyone leaves. */
    assert_int_equal(pthread_create(&th[CB_N - 1], NULL, cb_run, &parts[CB_N - 1]), 0);
    for (int i = 0; i < CB_N; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(atomic_load(&s.passed), CB_N);
    for (int i = 0; i < CB_N; i++) {
        assert_int_equal(atomic_load(&parts[i].enter_rc), ZK_OK);
        assert_int_equal(atomic_load(&parts[i].arrived_seen), CB_N); /* none early */
        assert_int_equal(atomic_load(&parts[i].leave_rc), ZK_OK);
        assert_int_equal(atomic_load(&parts[i].left_seen), 0); /* all had left */
        larch_barrier_free(parts[i].b);
        larch_close(parts[i].lh);
    }
    assert_int_equal(rt_count_prefixed(lh, path, "p-"), 0);

    free(path);
    rt_finish(lh, root);
}

static void test_count_barrier_timeout(void **state)
{
    struct larch *lh = rt_open();
    char *root = rt_root(lh, "bar-short");
    char *path = rt_path(root, "round1");
    struct larch_barrier *b;
    assert_int_equal(larch_barrier_create(lh, path, &b), ZK_OK);
    assert_int_equal(larch_barrier_enter(b, 0, 100), ZK_EBADARGUMENTS);
    assert_int_equal(larch_barrier_enter(b, 2, 200), ZK_EOPERATIONTIMEOUT);
    /* A participant that gave up takes its node back: no "ready" either. */
    assert_int_equal(rt_count_children(lh, path), 0);
    /* Alone against a count of one, it passes at once. */
    assert_int_equal(larch_barrier_enter(b, 1, RT_WAIT_MS), ZK_OK);
    assert_int_equal(larch_barrier_enter(b, 1, RT_WAIT_MS), ZK_EBADARGUMENTS);
    assert_int_equal(rt_count_prefixed(lh, path, "p-"), 1);
    assert_int_equal(rt_count_prefixed(lh, path, "ready"), 1);
    assert_int_equal(larch_barrier_leave(b, RT_WAIT_MS), ZK_OK);
    assert_int_equal(rt_count_prefixed(lh, path, "p-"), 0);

    larch_barrier_free(b);
    free(path);
    rt_finish(lh, root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_node_barrier),
        cmocka_unit_test(test_count_barrier),
        cmocka_unit_test(test_count_barrier_timeout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
