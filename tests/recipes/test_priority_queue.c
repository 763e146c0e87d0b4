/*
 * test_priority_queue — the priority queue of seed 000 against a live
 * server (env LARCH_HOSTS): items leave by priority, FIFO within one; an
 * urgent item overtakes older ones; several producers and consumers on
 * their own handles get every item exactly once, each consumer seeing each
 * producer's items of one priority in order; bad priorities are refused.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "client/recipes/priority_queue.h"
#include "tests/recipes/rt.h"

#define PRODUCERS 3
#define CONSUMERS 3
#define ITEMS 30 /* per producer */
#define LEVELS 3 /* priorities used by the concurrent test */

static void put_item(struct pq *q, int priority, const char *s)
{
    assert_int_equal(pq_put(q, priority, s, (int32_t)strlen(s), RT_WAIT_MS), ZK_OK);
}

static void take_expect(struct pq *q, int want_priority, const char *want)
{
    char *data = NULL;
    int32_t len = -1;
    int priority = -1;
    assert_int_equal(pq_take(q, &priority, &data, &len, RT_WAIT_MS), ZK_OK);
    assert_int_equal(priority, want_priority);
    assert_string_equal(data, want);
    free(data);
}

/* Items put in mixed priorities come out sorted by priority, and in put
 * order within a priority. */
static void test_priority_then_fifo_order(void **state)
{
    struct larch *lh = rt_open();
    char *root = rt_root(lh, "pq");
    char *path = rt_path(root, "pq");
    struct pq *q = NULL;
    assert_int_equal(pq_open(lh, path, RT_WAIT_MS, &q), ZK_OK);
    static const struct { int prio; const char *name; } in[] = {
        { 5, "e1" }, { 1, "b1" }, { 9, "z1" }, { 1, "b2" }, { 0, "a1" },
        { 5, "e2" }, { 99, "last" }, { 1, "b3" }, { 0, "a2" }, { 9, "z2" },
    };
    static const char *const out[] = { "a1", "a2", "b1", "b2", "b3",
                                       "e1", "e2", "z1", "z2", "last" };
    static const int out_prio[] = { 0, 0, 1, 1, 1, 5, 5, 9, 9, 99 };
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++)
        put_item(q, in[i].prio, in[i].name);
    for (size_t i = 0; i < sizeof out / sizeof out[0]; i++)
        take_expect(q, out_prio[i], out[i]);
    char *data = NULL;
    int32_t len = -1;
    assert_int_equal(pq_take(q, NULL, &data, &len, 200), ZK_EOPERATIONTIMEOUT);
    assert_int_equal(pq_put(q, -1, "x", 1, RT_WAIT_MS), ZK_EBADARGUMENTS);
    assert_int_equal(pq_put(q, PQ_PRIORITY_MAX + 1, "x", 1, RT_WAIT_MS), ZK_EBADARGUMENTS);
    pq_free(q);
    free(path);
    rt_finish(lh, root);
}

/* Seed 000's second change: the consumer's list is up to date, so an
 * urgent item put by another client while the consumer works through a
 * backlog is the next one it takes. */
static void test_urgent_item_overtakes_backlog(void **state)
{
    struct larch *lh = rt_open();
    char *root = rt_root(lh, "pq");
    char *path = rt_path(root, "pq");
    struct pq *consumer = NULL;
    assert_int_equal(pq_open(lh, path, RT_WAIT_MS, &consumer), ZK_OK);
    struct larch *plh = rt_open();
    struct pq *producer = NULL;
    assert_int_equal(pq_open(plh, path, RT_WAIT_MS, &producer), ZK_OK);
    put_item(producer, 50, "n1");
    put_item(producer, 50, "n2");
    put_item(producer, 50, "n3");
    take_expect(consumer, 50, "n1");
    put_item(producer, 0, "urgent");
    take_expect(consumer, 0, "urgent");
    take_expect(consumer, 50, "n2");
    take_expect(consumer, 50, "n3");
    pq_free(producer);
    larch_close(plh);
    pq_free(consumer);
    free(path);
    rt_finish(lh, root);
}

/* ---- concurrent producers and consumers ------------------------------ */

static int pq_open_any(struct larch *lh, const char *path, void **out)
{
    struct pq *q = NULL;
    int rc = pq_open(lh, path, RT_WAIT_MS, &q);
    *out = q;
    return rc;
}

static void pq_free_any(void *q)
{
    pq_free(q);
}

static int pq_put_any(void *q, int priority, const char *item, int32_t len)
{
    return pq_put(q, priority, item, len, RT_WAIT_MS);
}

static int pq_take_any(void *q, int *priority, char **data, int32_t *len, int32_t timeout_ms)
{
    return pq_take(q, priority, data, len, timeout_ms);
}

/* Every item of one producer and one priority arrives in put order, each
 * item exactly once (rt_check_delivery), over LEVELS priorities. */
static void test_concurrent_exactly_once(void **state)
{
    static const struct rt_queue_ops ops = { pq_open_any, pq_free_any, pq_put_any, pq_take_any,
                                             LEVELS };
    struct larch *lh = rt_open();
    char *root = rt_root(lh, "pq");
    char *path = rt_path(root, "pq");
    rt_check_delivery(&ops, path, PRODUCERS, CONSUMERS, ITEMS, false);
    free(path);
    rt_finish(lh, root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_priority_then_fifo_order),
        cmocka_unit_test(test_urgent_item_overtakes_backlog),
        cmocka_unit_test(test_concurrent_exactly_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
