/*
 * test_master_worker — the master-worker example of seed 004 against a
 * live server (env LARCH_HOSTS). Every master, worker and client has its
 * own handle. Checks: every task completes exactly once with one
 * execution; the tasks of a worker that dies (its handle detached, its
 * session left to expire) are reassigned and completed by the survivors;
 * exactly one of two masters leads and the other takes over when it
 * resigns; submits under dropped connections create each task once.
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

#include "client/recipes/master_worker.h"
#include "tests/recipes/rt.h"

#define TASKS_MAX 40
#define WORKERS 3

/* Executions per task index, shared by every worker of a test. */
struct ledger {
    pthread_mutex_t mu;
    int runs[TASKS_MAX];
};

struct worker_ctx {
    struct ledger *ledger;
    const char *id;
};

/* The task data is "t<index>"; the result names the worker. */
static void execute(const char *task, const char *data, int32_t len, char **result,
                    int32_t *result_len, void *ctx)
{
    struct worker_ctx *w = ctx;
    int idx = -1;
    if (data != NULL && sscanf(data, "t%d", &idx) == 1 && idx >= 0 && idx < TASKS_MAX) {
        pthread_mutex_lock(&w->ledger->mu);
        w->ledger->runs[idx]++;
        pthread_mutex_unlock(&w->ledger->mu);
    }
    *result_len = asprintf(result, "done %.*s by %s", (int)(len < 0 ? 0 : len), data ? data : "",
                           w->id);
    if (*result_len < 0)
        *result = NULL;
}

struct world {
    struct larch *lh; /* the test's own */
    char *root;
    struct ledger ledger;
    struct larch *client_lh;
    struct mw_client *client;
    char *tasks[TASKS_MAX];
};

static void world_open(struct world *w)
{
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->ledger.mu, NULL);
    w->lh = rt_open();
    w->root = rt_root(w->lh, "mw");
    w->client_lh = rt_open();
    assert_int_equal(mw_client_open(w->client_lh, w->root, RT_WAIT_MS, &w->client), ZK_OK);
}

static void world_close(struct world *w)
{
    for (int i = 0; i < TASKS_MAX; i++)
        free(w->tasks[i]);
    mw_client_free(w->client);
    larch_close(w->client_lh);
    rt_finish(w->lh, w->root);
    pthread_mutex_destroy(&w->ledger.mu);
}

static void submit(struct world *w, int from, int to)
{
    for (int i = from; i < to; i++) {
        char data[16];
        int n = snprintf(data, sizeof data, "t%d", i);
        assert_int_equal(mw_submit(w->client, data, n, &w->tasks[i], RT_WAIT_MS), ZK_OK);
    }
}

/* Waits for tasks [0, n) and checks each result names a worker in
 * `allowed` (NULL: any), then that each task ran exactly once and that
 * R/status holds exactly n results while R/tasks is empty. */
static void check_completed(struct world *w, int n, const char *allowed, int32_t timeout_ms)
{
    for (int i = 0; i < n; i++) {
        char *result = NULL;
        int32_t len = -1;
        assert_int_equal(mw_wait_status(w->client, w->tasks[i], &result, &len, timeout_ms), ZK_OK);
        char want[32];
        snprintf(want, sizeof want, "done t%d by ", i);
        assert_int_equal(strncmp(result, want, strlen(want)), 0);
        if (allowed != NULL)
            assert_string_equal(result + strlen(want), allowed);
        free(result);
    }
    for (int i = 0; i < n; i++)
        assert_int_equal(w->ledger.runs[i], 1);
    /* other sessions' writes, read after a sync (rt_count_children) */
    char path[256];
    snprintf(path, sizeof path, "%s/status", w->root);
    assert_int_equal(rt_count_children(w->lh, path), n);
    snprintf(path, sizeof path, "%s/tasks", w->root);
    assert_int_equal(rt_count_children(w->lh, path), 0);
}

struct member {
    struct larch *lh;
    struct mw_worker *w;
    struct worker_ctx ctx;
    char id[16];
};

static void start_worker(struct world *w, struct member *m, const char *id)
{
    m->lh = rt_open();
    snprintf(m->id, sizeof m->id, "%s", id);
    m->ctx = (struct worker_ctx){ .ledger = &w->ledger, .id = m->id };
    assert_int_equal(mw_worker_start(m->lh, w->root, m->id, execute, &m->ctx, RT_WAIT_MS, &m->w),
                     ZK_OK);
}

static int64_t stop_worker(struct member *m)
{
    assert_int_equal(mw_worker_error(m->w), ZK_OK);
    int64_t n = mw_worker_completed(m->w);
    mw_worker_stop(m->w);
    larch_close(m->lh);
    return n;
}

static void test_every_task_once(void **state)
{
    struct world w;
    world_open(&w);
    struct larch *mlh = rt_open();
    struct mw_master *m = NULL;
    assert_int_equal(mw_master_start(mlh, w.root, "m1", RT_WAIT_MS, &m), ZK_OK);
    assert_int_equal(mw_master_wait_leader(m, RT_WAIT_MS), ZK_OK);
    struct member workers[WORKERS];
    char id[16];
    for (int i = 0; i < WORKERS; i++) {
        snprintf(id, sizeof id, "w%d", i);
        start_worker(&w, &workers[i], id);
    }
    struct mw_worker *dup = NULL;
    struct larch *dlh = rt_open();
    assert_int_equal(mw_worker_start(dlh, w.root, "w0", execute, NULL, RT_WAIT_MS, &dup),
                     ZK_ENODEEXISTS);
    larch_close(dlh);

    submit(&w, 0, 30);
    check_completed(&w, 30, NULL, RT_WAIT_MS);
    int64_t total = 0;
    for (int i = 0; i < WORKERS; i++)
        total += stop_worker(&workers[i]);
    assert_int_equal(total, 30);
    mw_master_stop(m);
    larch_close(mlh);
    world_close(&w);
}

/* A worker that registered and got tasks, then hangs and loses its
 * session (detached handle: no close, the session expires), has its tasks
 * moved back and completed by the survivor, each exactly once. */
static void test_dead_worker_tasks_reassigned(void **state)
{
    struct world w;
    world_open(&w);
    /* the doomed worker: registered by hand, as a worker process would,
     * but never executing anything */
    struct larch *dead = rt_open();
    char path[256];
    snprintf(path, sizeof path, "%s/assign/dead", w.root);
    assert_int_equal(rt_create(dead, path, NULL, -1, NULL, ZK_PERSISTENT, NULL, NULL), ZK_OK);
    snprintf(path, sizeof path, "%s/workers/dead", w.root);
    assert_int_equal(rt_create(dead, path, NULL, -1, NULL, ZK_EPHEMERAL, NULL, NULL), ZK_OK);

    struct larch *mlh = rt_open();
    struct mw_master *m = NULL;
    assert_int_equal(mw_master_start(mlh, w.root, "m1", RT_WAIT_MS, &m), ZK_OK);
    submit(&w, 0, 6);
    /* all six go to the only worker there is */
    snprintf(path, sizeof path, "%s/assign/dead", w.root);
    int32_t assigned = 0;
    for (int64_t end = base_mono_ms() + RT_WAIT_MS; assigned < 6 && base_mono_ms() < end;
         rt_sleep_ms(20))
        RT_EXPECT(w.lh, larch_get_all_children_number(w.lh, path, &assigned), ZK_OK);
    assert_int_equal(assigned, 6);

    struct member live;
    start_worker(&w, &live, "live");
    larch_detach(dead); /* crash: the session lives on until it expires */
    check_completed(&w, 6, "live", RT_SESSION_TIMEOUT_MS * 3);
    assert_int_equal(stop_worker(&live), 6);
    assert_int_equal(rt_exists(w.lh, path, NULL), ZK_ENONODE); /* the master's delete */
    mw_master_stop(m);
    larch_close(mlh);
    world_close(&w);
}

/* Two masters: one leads; when it resigns the other takes over and keeps
 * assigning. */
static void test_master_failover(void **state)
{
    struct world w;
    world_open(&w);
    struct larch *alh = rt_open(), *blh = rt_open();
    struct mw_master *a = NULL, *b = NULL;
    assert_int_equal(mw_master_start(alh, w.root, "a", RT_WAIT_MS, &a), ZK_OK);
    assert_int_equal(mw_master_wait_leader(a, RT_WAIT_MS), ZK_OK);
    assert_int_equal(mw_master_start(blh, w.root, "b", RT_WAIT_MS, &b), ZK_OK);
    assert_int_equal(mw_master_wait_leader(b, 300), ZK_EOPERATIONTIMEOUT);
    assert_false(mw_master_is_leader(b));

    struct member worker;
    start_worker(&w, &worker, "w0");
    submit(&w, 0, 5);
    check_completed(&w, 5, "w0", RT_WAIT_MS);
    mw_master_stop(a);
    larch_close(alh);
    assert_int_equal(mw_master_wait_leader(b, RT_WAIT_MS), ZK_OK);
    submit(&w, 5, 10);
    check_completed(&w, 10, "w0", RT_WAIT_MS);
    assert_int_equal(stop_worker(&worker), 10);
    mw_master_stop(b);
    larch_close(blh);
    world_close(&w);
}

struct chaos {
    struct larch *lh;
    atomic_bool stop;
    int drops;
};

static void *drop_connections(void *arg)
{
    struct chaos *c = arg;
    for (int i = 0; !atomic_load(&c->stop) && i < RT_WAIT_MS / 15; i++) {
        larch_disconnect(c->lh);
        c->drops++;
        rt_sleep_ms(15);
    }
    return NULL;
}

/* Submits while the client's connection keeps dropping: the receipt and
 * guid let a submit whose reply was lost find its task instead of
 * submitting it twice. */
static void test_submit_under_dropped_connections(void **state)
{
    struct world w;
    world_open(&w);
    struct larch *mlh = rt_open();
    struct mw_master *m = NULL;
    assert_int_equal(mw_master_start(mlh, w.root, "m1", RT_WAIT_MS, &m), ZK_OK);
    struct member workers[2];
    start_worker(&w, &workers[0], "w0");
    start_worker(&w, &workers[1], "w1");

    struct chaos ch = { .lh = w.client_lh };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, drop_connections, &ch), 0);
    submit(&w, 0, 20);
    atomic_store(&ch.stop, true);
    pthread_join(t, NULL);
    assert_true(ch.drops > 0);
    check_completed(&w, 20, NULL, RT_WAIT_MS);
    assert_int_equal(stop_worker(&workers[0]) + stop_worker(&workers[1]), 20);
    mw_master_stop(m);
    larch_close(mlh);
    world_close(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_task_once),
        cmocka_unit_test(test_dead_worker_tasks_reassigned),
        cmocka_unit_test(test_master_failover),
        cmocka_unit_test(test_submit_under_dropped_connections),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
