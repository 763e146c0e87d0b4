/*
 * test_name_service — the name service (seed 000) against a live server
 * (env LARCH_HOSTS): bind/resolve/unbind/list, one winner among racing
 * binders, ephemeral bindings that go with their session, and await.
 * Every thread has its own handle.
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

#include "client/recipes/name_service.h"
#include "tests/recipes/rt.h"

#define RACERS 4

static void assert_resolves(struct ns *ns, const char *name, const char *want)
{
    char *value = NULL;
    int32_t len = -1;
    assert_int_equal(ns_resolve(ns, name, &value, &len, RT_WAIT_MS), ZK_OK);
    assert_int_equal(len, (int32_t)strlen(want));
    assert_string_equal(value, want);
    free(value);
}

static void test_bind_resolve_unbind_list(void **state)
{
    struct larch *lh = rt_open();
    char *root = rt_root(lh, "ns");
    char *dir = rt_path(root, "names");
    struct ns *ns = NULL;
    assert_int_equal(ns_open(lh, dir, RT_WAIT_MS, &ns), ZK_OK);

    assert_int_equal(ns_bind(ns, "beta", "b1", 2, false, RT_WAIT_MS), ZK_OK);
    assert_int_equal(ns_bind(ns, "alpha", "a1", 2, false, RT_WAIT_MS), ZK_OK);
    assert_resolves(ns, "alpha", "a1");
    /* the same value again is fine; another value is refused */
    assert_int_equal(ns_bind(ns, "alpha", "a1", 2, false, RT_WAIT_MS), ZK_OK);
    assert_int_equal(ns_bind(ns, "alpha", "a2", 2, false, RT_WAIT_MS), ZK_ENODEEXISTS);
    assert_resolves(ns, "alpha", "a1");

    struct larch_strings names;
    assert_int_equal(ns_list(ns, &names, RT_WAIT_MS), ZK_OK);
    assert_int_equal(names.count, 2);
    assert_string_equal(names.items[0], "alpha");
    assert_string_equal(names.items[1], "beta");
    larch_strings_free(&names);

    assert_int_equal(ns_unbind(ns, "alpha", RT_WAIT_MS), ZK_OK);
    char *value = NULL;
    int32_t len = 0;
    assert_int_equal(ns_resolve(ns, "alpha", &value, &len, RT_WAIT_MS), ZK_ENONODE);
    assert_int_equal(ns_unbind(ns, "alpha", RT_WAIT_MS), ZK_ENONODE);
    assert_int_equal(ns_list(ns, &names, RT_WAIT_MS), ZK_OK);
    assert_int_equal(names.count, 1);
    assert_string_equal(names.items[0], "beta");
    larch_strings_free(&names);

    assert_int_equal(ns_bind(ns, "a/b", "x", 1, false, RT_WAIT_MS), ZK_EBADARGUMENTS);
    assert_int_equal(ns_bind(ns, "", "x", 1, false, RT_WAIT_MS), ZK_EBADARGUMENTS);
    assert_int_equal(ns_resolve(ns, "..", &value, &len, RT_WAIT_MS), ZK_EBADARGUMENTS);

    ns_free(ns);
    free(dir);
    rt_finish(lh, root);
}

struct racer {
    struct larch *lh;
    const char *dir;
    char value[16];
    pthread_t thread;
    int rc;
};

static void *race_bind(void *arg)
{
    struct racer *r = arg;
    struct ns *ns = NULL;
    r->rc = ns_open(r->lh, r->dir, RT_WAIT_MS, &ns);
    if (r->rc == ZK_OK)
        r->rc = ns_bind(ns, "leader", r->value, (int32_t)strlen(r->value), false, RT_WAIT_MS);
    ns_free(ns);
    return NULL;
}

/* Several sessions bind the same name at once: exactly one wins and the
 * name resolves to the winner's value. */
static void test_racing_binders_one_winner(void **state)
{
    struct larch *lh = rt_open();
    char *root = rt_root(lh, "ns");
    char *dir = rt_path(root, "names");
    struct racer r[RACERS];
    for (int i = 0; i < RACERS; i++) {
        r[i] = (struct racer){ .lh = rt_open(), .dir = dir };
        snprintf(r[i].value, sizeof r[i].value, "host-%d", i);
    }
    for (int i = 0; i < RACERS; i++)
        assert_int_equal(pthread_create(&r[i].thread, NULL, race_bind, &r[i]), 0);
    int winners = 0, winner = -1;
    for (int i = 0; i < RACERS; i++) {
        pthread_join(r[i].thread, NULL);
        if (r[i].rc == ZK_OK) {
            winners++;
            winner = i;
        } else {
            assert_int_equal(r[i].rc, ZK_ENODEEXISTS);
        }
    }
    assert_int_equal(winners, 1);
    struct ns *ns = NULL;
    assert_int_equal(ns_open(lh, dir, RT_WAIT_MS, &ns), ZK_OK);
    /* the winner's binding, read by another session: after a sync */
    assert_int_equal(rt_sync(lh, dir), ZK_OK);
    assert_resolves(ns, "leader", r[winner].value);
    ns_free(ns);
    for (int i = 0; i < RACERS; i++)
        larch_close(r[i].lh);
    free(dir);
    rt_finish(lh, root);
}

struct awaiter {
    struct larch *lh;
    const char *dir;
    pthread_t thread;
    int rc;
    char *value;
    int32_t len;
};

static void *await_name(void *arg)
{
    struct awaiter *a = arg;
    struct ns *ns = NULL;
    a->rc = ns_open(a->lh, a->dir, RT_WAIT_MS, &ns);
    if (a->rc == ZK_OK)
        a->rc = ns_await(ns, "svc", &a->value, &a->len, RT_WAIT_MS);
    ns_free(ns);
    return NULL;
}

/* An awaiting reader wakes when a service binds its name ephemerally; the
 * binding blocks other sessions while it lives and goes with its session. */
static void test_ephemeral_binding_and_await(void **state)
{
    struct larch *lh = rt_open();
    char *root = rt_root(lh, "ns");
    char *dir = rt_path(root, "names");
    struct ns *ns = NULL;
    assert_int_equal(ns_open(lh, dir, RT_WAIT_MS, &ns), ZK_OK);

    struct awaiter a = { .lh = rt_open(), .dir = dir };
    assert_int_equal(pthread_create(&a.thread, NULL, await_name, &a), 0);
    rt_sleep_ms(200); /* let it wait; correctness does not depend on this */

    struct larch *svc_lh = rt_open();
    struct ns *svc = NULL;
    assert_int_equal(ns_open(svc_lh, dir, RT_WAIT_MS, &svc), ZK_OK);
    assert_int_equal(ns_bind(svc, "svc", "10.0.0.1:80", 11, true, RT_WAIT_MS), ZK_OK);
    pthread_join(a.thread, NULL);
    assert_int_equal(a.rc, ZK_OK);
    assert_int_equal(a.len, 11);
    assert_string_equal(a.value, "10.0.0.1:80");
    free(a.value);

    /* held by the service's session: same value from another session is
     * still someone else's ephemeral */
    assert_int_equal(ns_bind(ns, "svc", "10.0.0.1:80", 11, true, RT_WAIT_MS), ZK_ENODEEXISTS);
    assert_int_equal(ns_bind(svc, "svc", "10.0.0.1:80", 11, true, RT_WAIT_MS), ZK_OK);

    ns_free(svc);
    assert_int_equal(rt_close(svc_lh), ZK_OK); /* surely ended, its binding with it */
    /* another session's change: sync, in case lh's server has not applied it */
    assert_int_equal(rt_sync(lh, dir), ZK_OK);
    char *value = NULL;
    int32_t len = 0;
    assert_int_equal(ns_resolve(ns, "svc", &value, &len, RT_WAIT_MS), ZK_ENONODE);
    assert_int_equal(ns_await(ns, "svc", &value, &len, 300), ZK_EOPERATIONTIMEOUT);
    assert_null(value);

    ns_free(ns);
    larch_close(a.lh);
    free(dir);
    rt_finish(lh, root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bind_resolve_unbind_list),
        cmocka_unit_test(test_racing_binders_one_winner),
        cmocka_unit_test(test_ephemeral_binding_and_await),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
