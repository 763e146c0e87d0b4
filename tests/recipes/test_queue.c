/*
 * test_queue — the FIFO queue of seed 000 against a live server (env
 * LARCH_HOSTS): single-consumer order, several producers and consumers on
 * their own handles (every item delivered exactly once, each consumer
 * receiving each producer's items in order), items outliving their
 * producer, exactly-once delivery while connections are dropped under
 * producers and consumers (the GUID rule's recovery paths), and a short
 * take whose claim's reply is lost.
 */
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
#include <time.h>

#include "client/recipes/queue.h"
#include "tests/recipes/rt.h"

#define PRODUCERS 3
#define CONSUMERS 3
#define ITEMS 40 /* per producer */

static void put_str(struct queue *q, const char *s)
{
    assert_int_equal(queue_put(q, s, (int32_t)strlen(s), RT_WAIT_MS), ZK_OK);
}

static void take_expect(struct queue *q, const char *want)
{
    char *data = NULL;
    int32_t len = -1;
    assert_int_equal(queue_take(q, &data, &len, RT_WAIT_MS), ZK_OK);
    assert_int_equal(len, (int32_t)strlen(want));
    assert_string_equal(data, want);
    free(data);
}

static void test_fifo_order_and_empty_timeout(void **state)
{
    struct larch *lh = rt_open();
    char *root = rt_root(lh, "queue");
    char *path = rt_path(root, "q");
    struct queue *q = NULL;
    assert_int_equal(queue_open(lh, path, RT_WAIT_MS, &q), ZK_OK);
    char *data = (char *)"unchanged";
    int32_t len = 0;
    assert_int_equal(queue_take(q, &data, &len, 0), ZK_EOPERATIONTIMEOUT);
    assert_null(data);
    for (int i = 0; i < 10; i++) {
        char item[16];
        snprintf(item, sizeof item, "item-%d", i);
        put_str(q, item);
    }
    for (int i = 0; i < 10; i++) {
        char item[16];
        snprintf(item, sizeof item, "item-%d", i);
        take_expect(q, item);
    }
    assert_int_equal(queue_take(q, &data, &len, 200), ZK_EOPERATIONTIMEOUT);
    queue_free(q);
    free(path);
    rt_finish(lh, root);
}

/* ---- several producers and consumers -------------------------------- */

static int q_open(struct larch *lh, const char *path, void **out)
{
    struct queue *q = NULL;
    int rc = queue_open(lh, path, RT_WAIT_MS, &q);
    *out = q;
    return rc;
}

static void q_free(void *q)
{
    queue_free(q);
}

static int q_put(void *q, int priority, const char *item, int32_t len)
{
    return queue_put(q, item, len, RT_WAIT_MS);
}

static int q_take(void *q, int *priority, char **data, int32_t *len, int32_t timeout_ms)
{
    *priority = 0;
    return queue_take(q, data, len, timeout_ms);
}

static const struct rt_queue_ops QUEUE_OPS = { q_open, q_free, q_put, q_take, 1 };

/* Runs producers and consumers (each on its own handle), optionally with
 * connections dropped under them, and checks exactly-once, in-order
 * delivery (rt_check_delivery). */
static void run_queue(int producers, int consumers, int items, bool chaos)
{
    struct larch *lh = rt_open();
    char *root = rt_root(lh, "queue");
    char *path = rt_path(root, "q");
    rt_check_delivery(&QUEUE_OPS, path, producers, consumers, items, chaos);
    free(path);
    rt_finish(lh, root);
}

static void test_producers_consumers_exactly_once(void **state)
{
    run_queue(PRODUCERS, CONSUMERS, ITEMS, false);
}

static void test_exactly_once_with_dropped_connections(void **state)
{
    run_queue(2, 2, 25, true);
}

/* Items are persistent: a producer that goes away does not take them. */
static void test_items_outlive_producer(void **state)
{
    struct larch *lh = rt_open();
    char *root = rt_root(lh, "queue");
    char *path = rt_path(root, "q");
    struct larch *plh = rt_open();
    struct queue *pq = NULL;
    assert_int_equal(queue_open(plh, path, RT_WAIT_MS, &pq), ZK_OK);
    put_str(pq, "first");
    put_str(pq, "second");
    queue_free(pq);
    larch_close(plh);

    struct queue *q = NULL;
    assert_int_equal(queue_open(lh, path, RT_WAIT_MS, &q), ZK_OK);
    take_expect(q, "first");
    take_expect(q, "second");
    queue_free(q);
    free(path);
    rt_finish(lh, root);
}

/* ---- a take whose claim's reply is lost ------------------------------------ */

#define LOST_CLAIM_ROUNDS 20
#define LOST_CLAIM_TAKE_MS 5 /* less than a reconnect takes */

struct cutter {
    struct larch *lh;
    atomic_int armed; /* 1 + microseconds to wait before the cut; 0: idle */
    atomic_bool stop;
    atomic_int cuts;
};

/* Drops lh's connection once per arming, a few microseconds after it. */
static void *cut(void *p)
{
    struct cutter *c = p;
    for (int64_t end = base_mono_ms() + 4 * RT_WAIT_MS;
         !atomic_load(&c->stop) && base_mono_ms() < end;) {
        int armed = atomic_exchange(&c->armed, 0);
        struct timespec wait = { .tv_nsec = armed == 0 ? 100000 : (long)(armed - 1) * 1000 };
        nanosleep(&wait, NULL);
        if (armed != 0) {
            larch_disconnect(c->lh);
            atomic_fetch_add(&c->cuts, 1);
        }
    }
    return NULL;
}

/* A take deletes the item in a multi with its claim. When that multi's
 * reply is lost the item may already be the consumer's alone: finding out
 * (our claim exists?) must not stop at the take's timeout, here shorter
 * than a reconnect, or the item is gone and never delivered (queue.h:
 * every item is delivered once; ZK_EOPERATIONTIMEOUT means the queue
 * stayed empty). Each round puts one item and takes it with short takes
 * while the consumer's connection is cut a moment after each take starts. */
static void test_take_with_lost_claim_reply(void **state)
{
    struct larch *lh = rt_open(), *clh = rt_open();
    char *root = rt_root(lh, "queue");
    char *path = rt_path(root, "q");
    struct queue *pq = NULL, *cq = NULL;
    assert_int_equal(queue_open(lh, path, RT_WAIT_MS, &pq), ZK_OK);
    assert_int_equal(queue_open(clh, path, RT_WAIT_MS, &cq), ZK_OK);
    struct cutter c = { .lh = clh };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, cut, &c), 0);
    int lost = 0;
    for (int round = 0; round < LOST_CLAIM_ROUNDS; round++) {
        char item[16];
        snprintf(item, sizeof item, "item-%d", round);
        put_str(pq, item);
        int got = 0;
        for (int t = 0; t < 1000 && got == 0; t++) {
            atomic_store(&c.armed, 1 + (round * 397 + t * 131) % 3000); /* 0-3 ms */
            char *data = NULL;
            int32_t len = -1;
            int rc = queue_take(cq, &data, &len, LOST_CLAIM_TAKE_MS);
            if (rc == ZK_OK) {
                assert_string_equal(data, item);
                got++;
            } else {
                assert_int_equal(rc, ZK_EOPERATIONTIMEOUT);
                /* nothing taken: then the item must still be there */
                if (rt_count_prefixed(lh, path, "qn-") == 0) {
                    print_message("round %d: %s gone, not delivered\n", round, item);
                    lost++;
                    break;
                }
            }
            free(data);
        }
        if (lost > 0)
            break;
    }
    atomic_store(&c.stop, true);
    pthread_join(th, NULL);
    assert_int_equal(lost, 0);
    assert_true(atomic_load(&c.cuts) > 0);
    queue_free(cq);
    queue_free(pq);
    larch_close(clh);
    free(path);
    rt_finish(lh, root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fifo_order_and_empty_timeout),
        cmocka_unit_test(test_producers_consumers_exactly_once),
        cmocka_unit_test(test_exactly_once_with_dropped_connections),
        cmocka_unit_test(test_items_outlive_producer),
        cmocka_unit_test(test_take_with_lost_claim_reply),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
