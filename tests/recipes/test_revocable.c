/* test_revocable.c — the revocable shared lock (client/recipes/revocable.h,
 * seed 000 "Revocable Shared Locks") against a live server (LARCH_HOSTS):
 * a waiting writer asks the holder to release and then gets the lock, an
 * explicit revoke reaches a holder, a request to a waiting node is kept,
 * and a writer that does not revoke leaves holders alone. Worker threads
 * never call cmocka; the main thread asserts. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "client/recipes/revocable.h"
#include "tests/recipes/rt.h"

static struct larch_wake_stats stats_of(struct larch_revocable *r)
{
    struct larch_wake_stats st;
    larch_revocable_stats(r, &st);
    return st;
}

/* on_revoke: counts calls (event thread). */
static void count_revoke(void *ctx)
{
    atomic_fetch_add((atomic_int *)ctx, 1);
}

/* The data of dir/node as the server has it (malloc'd, "" for empty). */
static char *node_data(struct larch *lh, const char *dir, const char *node)
{
    char *path = rt_path(dir, node), *data = NULL;
    int32_t len = -1;
    assert_int_equal(rt_get(lh, path, &data, &len, NULL), ZK_OK); /* another session's node */
    free(path);
    if (data == NULL)
        data = strdup("");
    assert_non_null(data);
    return data;
}

/* ---- a lock taker thread ------------------------------------------------- */

struct taker {
    struct larch_revocable *r;
    bool write, revoke_holders;
    atomic_int *holders; /* maintained by the test's other holders */
    atomic_bool acquired;
    atomic_int holders_seen;
    atomic_int rc;
    atomic_bool release;
};

static void *take(void *p)
{
    struct taker *t = p;
    int rc = t->write ? larch_revocable_wrlock(t->r, t->revoke_holders, RT_WAIT_MS)
                      : larch_revocable_rdlock(t->r, RT_WAIT_MS);
    if (rc == ZK_OK) {
        atomic_store(&t->holders_seen, atomic_load(t->holders));
        atomic_store(&t->acquired, true);
        (void)rt_await_flag(&t->release); /* the test sets it, or we give up */
        rc = larch_revocable_unlock(t->r);
    }
    atomic_store(&t->rc, rc);
    return NULL;
}

static bool taker_acquired(void *p)
{
    return atomic_load(&((struct taker *)p)->acquired);
}

static bool taker_watching(void *p)
{
    /* Two watches once queued and blocked: its own node's data, and the
     * exists watch on what it waits for. */
    return stats_of(((struct taker *)p)->r).watches_set >= 2;
}

static void test_waiting_writer_revokes_holder(void **state)
{
    struct larch *lhh = rt_open(), *lhw = rt_open();
    char *root = rt_root(lhh, "rv-writer");
    char *dir = rt_path(root, "rv");
    atomic_int h_calls = 0, w_calls = 0, holders = 0;
    struct larch_revocable *h, *w;
    assert_int_equal(larch_revocable_create(lhh, dir, count_revoke, &h_calls, &h), ZK_OK);
    assert_int_equal(larch_revocable_create(lhw, dir, count_revoke, &w_calls, &w), ZK_OK);
    assert_int_equal(larch_revocable_wait_revoked(h, 0), ZK_EBADARGUMENTS); /* no node */

    assert_int_equal(larch_revocable_rdlock(h, RT_WAIT_MS), ZK_OK);
    atomic_fetch_add(&holders, 1);
    assert_false(larch_revocable_revoked(h));
    assert_int_equal(larch_revocable_wait_revoked(h, 100), ZK_EOPERATIONTIMEOUT);

    struct taker tw = { .r = w, .write = true, .revoke_holders = true, .holders = &holders };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, take, &tw), 0);
    /* The holder hears the request through its data watch. */
    assert_int_equal(larch_revocable_wait_revoked(h, RT_WAIT_MS), ZK_OK);
    assert_true(larch_revocable_revoked(h));
    assert_int_equal(atomic_load(&h_calls), 1);
    char *data = node_data(lhh, dir, larch_revocable_node(h));
    assert_string_equal(data, LARCH_REVOCABLE_UNLOCK);
    free(data);
    /* Release is the holder's: the writer still waits. */
    assert_false(atomic_load(&tw.acquired));
    assert_int_equal(larch_revocable_mode(h), LARCH_RWLOCK_READ);

    atomic_fetch_sub(&holders, 1);
    assert_int_equal(larch_revocable_unlock(h), ZK_OK);
    assert_false(larch_revocable_revoked(h));
    assert_true(rt_eventually(taker_acquired, &tw));
    assert_int_equal(atomic_load(&tw.holders_seen), 0);
    assert_false(larch_revocable_revoked(w)); /* nobody asked the writer */
    assert_int_equal(atomic_load(&w_calls), 0);
    atomic_store(&tw.release, true);
    pthread_join(th, NULL);
    assert_int_equal(atomic_load(&tw.rc), ZK_OK);
    assert_int_equal(atomic_load(&h_calls), 1);

    larch_revocable_free(h);
    larch_revocable_free(w);
    free(dir);
    rt_finish(lhh, root);
    larch_close(lhw);
}

static void test_explicit_revoke(void **state)
{
    struct larch *lhh = rt_open(), *lho = rt_open();
    char *root = rt_root(lhh, "rv-explicit");
    char *dir = rt_path(root, "rv");
    atomic_int calls = 0;
    struct larch_revocable *h;
    assert_int_equal(larch_revocable_create(lhh, dir, count_revoke, &calls, &h), ZK_OK);
    assert_int_equal(larch_revocable_wrlock(h, false, RT_WAIT_MS), ZK_OK);
    assert_true(rt_has_prefix(larch_revocable_node(h), "write-"));
    char *node = strdup(larch_revocable_node(h));
    assert_non_null(node);

    /* Anyone may ask, through the node alone. */
    assert_int_equal(larch_revocable_revoke(lho, dir, node), ZK_OK);
    assert_int_equal(larch_revocable_wait_revoked(h, RT_WAIT_MS), ZK_OK);
    assert_int_equal(atomic_load(&calls), 1);
    assert_true(stats_of(h).wakeups >= 1);
    assert_int_equal(larch_revocable_unlock(h), ZK_OK);
    assert_int_equal(larch_revocable_revoke(lho, dir, node), ZK_ENONODE);

    /* The next hold starts unrevoked. */
    assert_int_equal(larch_revocable_rdlock(h, RT_WAIT_MS), ZK_OK);
    assert_false(larch_revocable_revoked(h));
    assert_int_equal(larch_revocable_wait_revoked(h, 100), ZK_EOPERATIONTIMEOUT);
    assert_int_equal(larch_revocable_unlock(h), ZK_OK);
    assert_int_equal(atomic_load(&calls), 1);

    free(node);
    larch_revocable_free(h);
    free(dir);
    rt_finish(lhh, root);
    larch_close(lho);
}

/* A request that reaches a node still waiting is kept: that client is
 * revoked as soon as it holds. A writer that does not revoke leaves the
 * holder's node untouched. */
static void test_request_to_waiter_is_kept(void **state)
{
    struct larch *lhh = rt_open(), *lhr = rt_open(), *lho = rt_open();
    char *root = rt_root(lhh, "rv-waiter");
    char *dir = rt_path(root, "rv");
    atomic_int h_calls = 0, r_calls = 0, holders = 0;
    struct larch_revocable *h, *r;
    assert_int_equal(larch_revocable_create(lhh, dir, count_revoke, &h_calls, &h), ZK_OK);
    assert_int_equal(larch_revocable_create(lhr, dir, count_revoke, &r_calls, &r), ZK_OK);
    assert_int_equal(larch_revocable_wrlock(h, false, RT_WAIT_MS), ZK_OK);
    atomic_fetch_add(&holders, 1);

    struct taker tr = { .r = r, .write = false, .holders = &holders };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, take, &tr), 0);
    assert_true(rt_eventually(taker_watching, &tr));
    /* A waiting reader never asks the writer ahead of it to release. */
    char *data = node_data(lho, dir, larch_revocable_node(h));
    assert_string_equal(data, "");
    free(data);
    assert_false(larch_revocable_revoked(h));

    /* Ask the waiting reader; its node is found by listing the directory. */
    struct larch_strings kids = { 0 };
    assert_int_equal(rt_children(lho, dir, &kids, NULL), ZK_OK);
    assert_int_equal(kids.count, 2);
    larch_sort_by_sequence(&kids);
    assert_true(rt_has_prefix(kids.items[1], "read-"));
    assert_int_equal(larch_revocable_revoke(lho, dir, kids.items[1]), ZK_OK);
    larch_strings_free(&kids);
    for (int64_t end = base_mono_ms() + RT_WAIT_MS;
         atomic_load(&r_calls) == 0 && base_mono_ms() < end;)
        rt_sleep_ms(5);
    assert_int_equal(atomic_load(&r_calls), 1);
    assert_false(atomic_load(&tr.acquired));

    atomic_fetch_sub(&holders, 1);
    assert_int_equal(larch_revocable_unlock(h), ZK_OK);
    assert_true(rt_eventually(taker_acquired, &tr));
    assert_int_equal(atomic_load(&tr.holders_seen), 0);
    assert_true(larch_revocable_revoked(r)); /* holds, and must give it back */
    atomic_store(&tr.release, true);
    pthread_join(th, NULL);
    assert_int_equal(atomic_load(&tr.rc), ZK_OK);
    assert_int_equal(atomic_load(&h_calls), 0);

    larch_revocable_free(h);
    larch_revocable_free(r);
    free(dir);
    rt_finish(lhh, root);
    larch_close(lhr);
    larch_close(lho);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_waiting_writer_revokes_holder),
        cmocka_unit_test(test_explicit_revoke),
        cmocka_unit_test(test_request_to_waiter_is_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
