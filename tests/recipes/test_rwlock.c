/* test_rwlock.c — the shared lock (client/recipes/rwlock.h, seed 000
 * "Shared Locks") against a live server (LARCH_HOSTS): readers share,
 * writers exclude, readers wait only on write nodes, writers on the node
 * just below, and exclusion holds under contention. Worker threads never
 * call cmocka; the main thread asserts. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "client/recipes/rwlock.h"
#include "tests/recipes/rt.h"

static struct larch_wake_stats stats_of(struct larch_rwlock *rw)
{
    struct larch_wake_stats st;
    larch_rwlock_stats(rw, &st);
    return st;
}

/* ---- a holder thread: take the lock, note what it saw, hold until told -- */

struct holder {
    struct larch_rwlock *rw;
    bool write;
    atomic_int *readers_holding; /* maintained by the test's readers */
    atomic_bool acquired;
    atomic_int readers_seen;     /* *readers_holding when it got the lock */
    atomic_bool release;
    atomic_int rc;
};

static void *hold(void *p)
{
    struct holder *h = p;
    int rc = h->write ? larch_rwlock_wrlock(h->rw, RT_WAIT_MS)
                      : larch_rwlock_rdlock(h->rw, RT_WAIT_MS);
    if (rc == ZK_OK) {
        atomic_store(&h->readers_seen, atomic_load(h->readers_holding));
        atomic_store(&h->acquired, true);
        (void)rt_await_flag(&h->release); /* the test sets it, or we give up */
        rc = larch_rwlock_unlock(h->rw);
    }
    atomic_store(&h->rc, rc);
    return NULL;
}

static bool holder_acquired(void *p)
{
    return atomic_load(&((struct holder *)p)->acquired);
}

static bool holder_watching(void *p)
{
    return stats_of(((struct holder *)p)->rw).watches_set >= 1;
}

static void test_readers_share_writer_excludes(void **state)
{
    struct larch *lh1 = rt_open(), *lh2 = rt_open(), *lh3 = rt_open(), *lhw = rt_open();
    char *root = rt_root(lh1, "rw-share");
    char *dir = rt_path(root, "rw");
    struct larch_rwlock *r1, *r2, *r3, *w;
    assert_int_equal(larch_rwlock_create(lh1, dir, &r1), ZK_OK);
    assert_int_equal(larch_rwlock_create(lh2, dir, &r2), ZK_OK);
    assert_int_equal(larch_rwlock_create(lh3, dir, &r3), ZK_OK);
    assert_int_equal(larch_rwlock_create(lhw, dir, &w), ZK_OK);
    atomic_int readers_holding = 0;

    /* Two readers hold at the same time, without waiting on each other. */
    assert_int_equal(larch_rwlock_rdlock(r1, RT_WAIT_MS), ZK_OK);
    atomic_fetch_add(&readers_holding, 1);
    assert_int_equal(larch_rwlock_rdlock(r2, RT_WAIT_MS), ZK_OK);
    atomic_fetch_add(&readers_holding, 1);
    assert_int_equal(larch_rwlock_mode(r1), LARCH_RWLOCK_READ);
    assert_int_equal(larch_rwlock_mode(r2), LARCH_RWLOCK_READ);
    assert_true(rt_has_prefix(larch_rwlock_node(r1), "read-"));
    assert_int_equal(stats_of(r2).watches_set, 0); /* no write node: no wait */

    /* A writer queues behind them. */
    struct holder hw = { .rw = w, .write = true, .readers_holding = &readers_holding };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, hold, &hw), 0);
    assert_true(rt_eventually(holder_watching, &hw));
    assert_false(atomic_load(&hw.acquired));
    assert_int_equal(rt_count_children(lh1, dir), 3);
    /* A reader arriving after a waiting writer waits too (seed read lock
     * step 3: a lower "write-" node blocks it), and gives its node up. */
    assert_int_equal(larch_rwlock_rdlock(r3, 300), ZK_EOPERATIONTIMEOUT);
    assert_int_equal(rt_count_children(lh1, dir), 3);

    /* The writer gets the lock only once both readers are gone, and the
     * first release (not its predecessor) does not wake it. */
    atomic_fetch_sub(&readers_holding, 1);
    assert_int_equal(larch_rwlock_unlock(r1), ZK_OK);
    atomic_fetch_sub(&readers_holding, 1);
    assert_int_equal(larch_rwlock_unlock(r2), ZK_OK);
    assert_true(rt_eventually(holder_acquired, &hw));
    assert_int_equal(atomic_load(&hw.readers_seen), 0);
    assert_int_equal(stats_of(w).wakeups, 1);
    assert_true(rt_has_prefix(larch_rwlock_node(w), "write-"));

    /* While the writer holds, no reader gets in. */
    assert_int_equal(larch_rwlock_rdlock(r3, 300), ZK_EOPERATIONTIMEOUT);
    atomic_store(&hw.release, true);
    pthread_join(th, NULL);
    assert_int_equal(atomic_load(&hw.rc), ZK_OK);
    assert_int_equal(larch_rwlock_rdlock(r3, RT_WAIT_MS), ZK_OK);
    assert_int_equal(larch_rwlock_rdlock(r3, 100), ZK_EBADARGUMENTS); /* one hold each */
    assert_int_equal(larch_rwlock_unlock(r3), ZK_OK);
    assert_int_equal(larch_rwlock_unlock(r3), ZK_EBADARGUMENTS);
    assert_int_equal(rt_count_children(lh1, dir), 0);

    larch_rwlock_free(r1);
    larch_rwlock_free(r2);
    larch_rwlock_free(r3);
    larch_rwlock_free(w);
    free(dir);
    rt_finish(lh1, root);
    larch_close(lh2);
    larch_close(lh3);
    larch_close(lhw);
}

/* Readers blocked by one write node all go when it goes (the seed's note:
 * not a herd, they all may proceed); each is woken exactly once. */
static void test_readers_released_together(void **state)
{
    enum { READERS = 3 };
    struct larch *lhw = rt_open();
    char *root = rt_root(lhw, "rw-release");
    char *dir = rt_path(root, "rw");
    struct larch_rwlock *w;
    assert_int_equal(larch_rwlock_create(lhw, dir, &w), ZK_OK);
    assert_int_equal(larch_rwlock_wrlock(w, RT_WAIT_MS), ZK_OK);

    atomic_int readers_holding = 0;
    struct larch *lhs[READERS];
    struct holder hs[READERS];
    pthread_t th[READERS];
    for (int i = 0; i < READERS; i++) {
        lhs[i] = rt_open();
        hs[i] = (struct holder){ .write = false, .readers_holding = &readers_holding };
        assert_int_equal(larch_rwlock_create(lhs[i], dir, &hs[i].rw), ZK_OK);
        assert_int_equal(pthread_create(&th[i], NULL, hold, &hs[i]), 0);
    }
    for (int i = 0; i < READERS; i++)
        assert_true(rt_eventually(holder_watching, &hs[i]));
    for (int i = 0; i < READERS; i++)
        assert_false(atomic_load(&hs[i].acquired));

    assert_int_equal(larch_rwlock_unlock(w), ZK_OK);
    for (int i = 0; i < READERS; i++)
        assert_true(rt_eventually(holder_acquired, &hs[i]));
    /* All hold at once: none has been told to release yet. */
    for (int i = 0; i < READERS; i++) {
        assert_int_equal(larch_rwlock_mode(hs[i].rw), LARCH_RWLOCK_READ);
        assert_int_equal(stats_of(hs[i].rw).watches_set, 1); /* on the write node */
        assert_int_equal(stats_of(hs[i].rw).wakeups, 1);
    }
    for (int i = 0; i < READERS; i++)
        atomic_store(&hs[i].release, true);
    for (int i = 0; i < READERS; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(atomic_load(&hs[i].rc), ZK_OK);
        larch_rwlock_free(hs[i].rw);
        larch_close(lhs[i]);
    }
    larch_rwlock_free(w);
    free(dir);
    rt_finish(lhw, root);
}

/* ---- contention: readers and writers never overlap wrongly --------------- */

#define CT_WRITERS 2
#define CT_READERS 3
#define CT_ROUNDS 10

struct ct_shared {
    const char *dir;
    atomic_int readers_in, writers_in;
    atomic_int violations, failures, done;
};

struct ct_arg {
    struct ct_shared *s;
    struct larch *lh;
    bool write;
};

static void ct_section(struct ct_shared *s, bool write)
{
    atomic_int *mine = write ? &s->writers_in : &s->readers_in;
    atomic_fetch_add(mine, 1);
    bool bad = atomic_load(&s->writers_in) > (write ? 1 : 0) ||
               (write && atomic_load(&s->readers_in) > 0);
    if (bad)
        atomic_fetch_add(&s->violations, 1);
    rt_sleep_ms(1);
    atomic_fetch_sub(mine, 1);
    atomic_fetch_add(&s->done, 1);
}

static void *ct_worker(void *p)
{
    struct ct_arg *a = p;
    struct larch_rwlock *rw;
    if (larch_rwlock_create(a->lh, a->s->dir, &rw) != ZK_OK) {
        atomic_fetch_add(&a->s->failures, 1);
        return NULL;
    }
    for (int i = 0; i < CT_ROUNDS; i++) {
        int rc = a->write ? larch_rwlock_wrlock(rw, RT_WAIT_MS)
                          : larch_rwlock_rdlock(rw, RT_WAIT_MS);
        if (rc != ZK_OK) {
            atomic_fetch_add(&a->s->failures, 1);
            break;
        }
        ct_section(a->s, a->write);
        if (larch_rwlock_unlock(rw) != ZK_OK)
            atomic_fetch_add(&a->s->failures, 1);
    }
    larch_rwlock_free(rw);
    return NULL;
}

static void test_contention(void **state)
{
    enum { N = CT_WRITERS + CT_READERS };
    struct larch *lh = rt_open();
    char *root = rt_root(lh, "rw-contend");
    char *dir = rt_path(root, "rw");
    struct ct_shared s = { .dir = dir };
    struct ct_arg args[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        args[i] = (struct ct_arg){ .s = &s, .lh = rt_open(), .write = i < CT_WRITERS };
        assert_int_equal(pthread_create(&th[i], NULL, ct_worker, &args[i]), 0);
    }
    for (int i = 0; i < N; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(atomic_load(&s.failures), 0);
    assert_int_equal(atomic_load(&s.violations), 0);
    assert_int_equal(atomic_load(&s.done), N * CT_ROUNDS);
    assert_int_equal(rt_count_children(lh, dir), 0);
    for (int i = 0; i < N; i++)
        larch_close(args[i].lh);
    free(dir);
    rt_finish(lh, root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_readers_share_writer_excludes),
        cmocka_unit_test(test_readers_released_together),
        cmocka_unit_test(test_contention),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
