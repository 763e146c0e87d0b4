/*
 * test_rendezvous — the rendezvous znode of seed 002 against a live server
 * (env LARCH_HOSTS): workers started before the manager sleep on the node
 * and all receive the manager's details; a worker may even start before
 * the scheduler creates the node; a late worker gets the details at once;
 * nobody publishing means a timeout.
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

#include "client/recipes/rendezvous.h"
#include "tests/recipes/rt.h"

#define WORKERS 4
#define MANAGER_INFO "10.0.0.1:8080"

struct worker {
    struct larch *lh;
    const char *path;
    pthread_t thread;
    int rc;
    char *info;
    int32_t len;
};

static void *worker_wait(void *arg)
{
    struct worker *w = arg;
    struct rdv *r = NULL;
    w->rc = rdv_open(w->lh, w->path, &r);
    if (w->rc == ZK_OK)
        w->rc = rdv_wait(r, &w->info, &w->len, RT_WAIT_MS);
    rdv_free(r);
    return NULL;
}

static void start_workers(struct worker *w, int n, const char *path)
{
    for (int i = 0; i < n; i++) {
        w[i] = (struct worker){ .lh = rt_open(), .path = path };
        assert_int_equal(pthread_create(&w[i].thread, NULL, worker_wait, &w[i]), 0);
    }
}

static void join_workers(struct worker *w, int n)
{
    for (int i = 0; i < n; i++) {
        pthread_join(w[i].thread, NULL);
        assert_int_equal(w[i].rc, ZK_OK);
        assert_int_equal(w[i].len, (int32_t)strlen(MANAGER_INFO));
        assert_string_equal(w[i].info, MANAGER_INFO);
        free(w[i].info);
        larch_close(w[i].lh);
    }
}

/* Seed 002 steps 1-4: scheduler creates the node, workers sleep on it,
 * the manager writes its details, every worker wakes with them. */
static void test_workers_before_manager(void **state)
{
    struct larch *lh = rt_open();
    char *root = rt_root(lh, "rdv");
    char *path = rt_path(root, "candidateOne");
    struct rdv *sched = NULL;
    assert_int_equal(rdv_open(lh, path, &sched), ZK_OK);
    assert_int_equal(rdv_create(sched, false, RT_WAIT_MS), ZK_OK);
    assert_int_equal(rdv_create(sched, false, RT_WAIT_MS), ZK_OK); /* already there */

    struct worker w[WORKERS];
    start_workers(w, WORKERS, path);
    rt_sleep_ms(200); /* workers first, as in the seed; not needed for correctness */

    struct larch *mlh = rt_open();
    struct rdv *manager = NULL;
    assert_int_equal(rdv_open(mlh, path, &manager), ZK_OK);
    assert_int_equal(rdv_publish(manager, "", 0, RT_WAIT_MS), ZK_EBADARGUMENTS);
    assert_int_equal(rdv_publish(manager, MANAGER_INFO, (int32_t)strlen(MANAGER_INFO), RT_WAIT_MS),
                     ZK_OK);
    join_workers(w, WORKERS);

    /* a worker that comes late reads the details without waiting */
    struct worker late[1];
    start_workers(late, 1, path);
    join_workers(late, 1);

    rdv_free(manager);
    larch_close(mlh);
    rdv_free(sched);
    free(path);
    rt_finish(lh, root);
}

/* A worker waiting before the node exists follows its creation (exists
 * watch) and then its data; publishing before creation is refused; an
 * ephemeral rendezvous goes with the scheduler's session. */
static void test_worker_before_scheduler(void **state)
{
    struct larch *lh = rt_open();
    char *root = rt_root(lh, "rdv");
    char *path = rt_path(root, "candidateOne");
    struct worker w[2];
    start_workers(w, 2, path);

    struct larch *mlh = rt_open();
    struct rdv *manager = NULL;
    assert_int_equal(rdv_open(mlh, path, &manager), ZK_OK);
    assert_int_equal(rdv_publish(manager, MANAGER_INFO, 13, RT_WAIT_MS), ZK_ENONODE);

    struct larch *slh = rt_open();
    struct rdv *sched = NULL;
    assert_int_equal(rdv_open(slh, path, &sched), ZK_OK);
    assert_int_equal(rdv_create(sched, true, RT_WAIT_MS), ZK_OK);
    assert_int_equal(rdv_publish(manager, MANAGER_INFO, 13, RT_WAIT_MS), ZK_OK);
    join_workers(w, 2);

    rdv_free(sched);
    /* the ephemeral rendezvous goes with it (rt_close: surely ended) */
    assert_int_equal(rt_close(slh), ZK_OK);
    /* another session's change: sync, in case lh's server has not applied it */
    assert_int_equal(rt_exists(lh, path, NULL), ZK_ENONODE);

    rdv_free(manager);
    larch_close(mlh);
    free(path);
    rt_finish(lh, root);
}

/* Without a manager the wait ends at its timeout, empty-handed. */
static void test_no_manager_times_out(void **state)
{
    struct larch *lh = rt_open();
    char *root = rt_root(lh, "rdv");
    char *path = rt_path(root, "candidateOne");
    struct rdv *r = NULL;
    assert_int_equal(rdv_open(lh, path, &r), ZK_OK);
    assert_int_equal(rdv_create(r, false, RT_WAIT_MS), ZK_OK);
    char *info = (char *)"unchanged";
    int32_t len = 7;
    assert_int_equal(rdv_wait(r, &info, &len, 300), ZK_EOPERATIONTIMEOUT);
    assert_null(info);
    assert_int_equal(len, -1);
    rdv_free(r);
    free(path);
    rt_finish(lh, root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_workers_before_manager),
        cmocka_unit_test(test_worker_before_scheduler),
        cmocka_unit_test(test_no_manager_times_out),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
