/* test_lock.c — the exclusive lock (client/recipes/lock.h, seed 000 "Locks")
 * against a live server (LARCH_HOSTS): mutual exclusion under contention,
 * trylock and timeouts, herd-free hand-over, a killed holder, and the GUID
 * rule under repeated connection loss. Worker threads never call cmocka;
 * they record what they saw and the main thread asserts. */
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

#include "client/recipes/lock.h"
#include "tests/recipes/rt.h"

/* ---- mutual exclusion: N threads x M acquisitions ----------------------- */

#define MX_THREADS 4
#define MX_ROUNDS 15

struct mx_shared {
    const char *dir;
    atomic_int holders;     /* threads inside the critical section now */
    atomic_int max_holders; /* the most ever seen at once */
    atomic_int acquired;
    atomic_int failures;
};

struct mx_arg {
    struct mx_shared *s;
    struct larch *lh;
};

static void critical_section(struct mx_shared *s)
{
    int now = atomic_fetch_add(&s->holders, 1) + 1;
    int seen = atomic_load(&s->max_holders);
    while (now > seen && !atomic_compare_exchange_weak(&s->max_holders, &seen, now))
        ;
    rt_sleep_ms(1); /* widen the window another holder would fall into */
    atomic_fetch_sub(&s->holders, 1);
    atomic_fetch_add(&s->acquired, 1);
}

static void *mx_worker(void *p)
{
    struct mx_arg *a = p;
    struct larch_lock *l = NULL;
    if (larch_lock_create(a->lh, a->s->dir, &l) != ZK_OK) {
        atomic_fetch_add(&a->s->failures, 1);
        return NULL;
    }
    for (int i = 0; i < MX_ROUNDS; i++) {
        if (larch_lock_lock(l, RT_WAIT_MS) != ZK_OK) {
            atomic_fetch_add(&a->s->failures, 1);
            break;
        }
        critical_section(a->s);
        if (larch_lock_unlock(l) != ZK_OK)
            atomic_fetch_add(&a->s->failures, 1);
    }
    larch_lock_free(l);
    return NULL;
}

static void test_mutual_exclusion(void **state)
{
    struct larch *lh = rt_open();
    char *root = rt_root(lh, "lock-mx");
    char *dir = rt_path(root, "lock");
    struct mx_shared s = { .dir = dir };
    struct mx_arg args[MX_THREADS];
    pthread_t th[MX_THREADS];
    for (int i = 0; i < MX_THREADS; i++) {
        args[i] = (struct mx_arg){ .s = &s, .lh = rt_open() };
        assert_int_equal(pthread_create(&th[i], NULL, mx_worker, &args[i]), 0);
    }
    for (int i = 0; i < MX_THREADS; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(atomic_load(&s.failures), 0);
    assert_int_equal(atomic_load(&s.max_holders), 1);
    assert_int_equal(atomic_load(&s.acquired), MX_THREADS * MX_ROUNDS);
    assert_int_equal(rt_count_children(lh, dir), 0); /* every node was deleted */
    for (int i = 0; i < MX_THREADS; i++)
        larch_close(args[i].lh);
    free(dir);
    rt_finish(lh, root);
}

/* ---- trylock, timeouts, node names -------------------------------------- */

static void test_trylock_and_timeout(void **state)
{
    struct larch *lha = rt_open(), *lhb = rt_open();
    char *root = rt_root(lha, "lock-try");
    char *dir = rt_path(root, "lock");
    struct larch_lock *a, *b;
    assert_int_equal(larch_lock_create(lha, dir, &a), ZK_OK);
    assert_int_equal(larch_lock_create(lhb, dir, &b), ZK_OK);
    assert_null(larch_lock_node(a));

    bool got = false;
    assert_int_equal(larch_lock_trylock(a, &got), ZK_OK);
    assert_true(got);
    assert_true(larch_lock_held(a));
    const char *node = larch_lock_node(a);
    assert_non_null(node);
    assert_true(rt_has_prefix(node, "lock-"));
    assert_true(larch_sequence_of(node) >= 0);
    char *node_path = rt_path(dir, node);
    assert_int_equal(rt_exists(lhb, node_path, NULL), ZK_OK); /* a's node: after a sync */

    /* A busy lock: trylock neither gets it nor stays queued. */
    assert_int_equal(larch_lock_trylock(b, &got), ZK_OK);
    assert_false(got);
    assert_null(larch_lock_node(b));
    assert_int_equal(rt_count_children(lha, dir), 1);
    /* A timed-out waiter gives its node up. */
    assert_int_equal(larch_lock_lock(b, 0), ZK_EOPERATIONTIMEOUT);
    assert_int_equal(larch_lock_lock(b, 300), ZK_EOPERATIONTIMEOUT);
    assert_false(larch_lock_held(b));
    assert_int_equal(rt_count_children(lha, dir), 1);
    /* Not re-entrant; unlock of a lock not held is refused. */
    assert_int_equal(larch_lock_lock(a, 100), ZK_EBADARGUMENTS);
    assert_int_equal(larch_lock_unlock(b), ZK_EBADARGUMENTS);

    assert_int_equal(larch_lock_unlock(a), ZK_OK);
    assert_false(larch_lock_held(a));
    assert_null(larch_lock_node(a));
    assert_int_equal(rt_exists(lhb, node_path, NULL), ZK_ENONODE);
    assert_int_equal(larch_lock_trylock(b, &got), ZK_OK);
    assert_true(got);
    assert_int_equal(larch_lock_unlock(b), ZK_OK);
    assert_int_equal(rt_count_children(lha, dir), 0);

    free(node_path);
    larch_lock_free(a);
    larch_lock_free(b);
    larch_close(lhb);
    free(dir);
    rt_finish(lha, root);
}

/* ---- herd-free hand-over ------------------------------------------------ */

#define HERD_N 5

struct herd {
    struct larch_lock *locks[HERD_N];
    atomic_int order[HERD_N];   /* 1-based acquisition rank, 0 until acquired */
    atomic_bool release[HERD_N];
    atomic_int rank;
    atomic_int failures;
};

struct herd_arg {
    struct herd *h;
    int i;
};

static void *herd_waiter(void *p)
{
    struct herd_arg *a = p;
    struct herd *h = a->h;
    if (larch_lock_lock(h->locks[a->i], RT_WAIT_MS) != ZK_OK) {
        atomic_fetch_add(&h->failures, 1);
        return NULL;
    }
    atomic_store(&h->order[a->i], atomic_fetch_add(&h->rank, 1) + 1);
    if (!rt_await_flag(&h->release[a->i]))
        atomic_fetch_add(&h->failures, 1);
    if (larch_lock_unlock(h->locks[a->i]) != ZK_OK)
        atomic_fetch_add(&h->failures, 1);
    return NULL;
}

struct count_cond {
    struct larch *lh;
    const char *dir;
    int32_t want;
};

static bool has_children(void *p)
{
    struct count_cond *c = p;
    return rt_count_children(c->lh, c->dir) == c->want;
}

static bool all_watching(void *p)
{
    struct herd *h = p;
    for (int i = 1; i < HERD_N; i++) {
        struct larch_wake_stats st;
        larch_lock_stats(h->locks[i], &st);
        if (st.watches_set < 1)
            return false;
    }
    return true;
}

static bool acquired_by(void *p)
{
    atomic_int *order = p;
    return atomic_load(order) != 0;
}

static uint64_t wakeups_of(struct larch_lock *l)
{
    struct larch_wake_stats st;
    larch_lock_stats(l, &st);
    return st.wakeups;
}

static void test_herd_free(void **state)
{
    struct larch *lhs[HERD_N];
    for (int i = 0; i < HERD_N; i++)
        lhs[i] = rt_open();
    char *root = rt_root(lhs[0], "lock-herd");
    char *dir = rt_path(root, "lock");
    struct herd h = { 0 };
    for (int i = 0; i < HERD_N; i++)
        assert_int_equal(larch_lock_create(lhs[i], dir, &h.locks[i]), ZK_OK);
    assert_int_equal(larch_lock_lock(h.locks[0], RT_WAIT_MS), ZK_OK);
    atomic_store(&h.order[0], atomic_fetch_add(&h.rank, 1) + 1);

    /* Queue the waiters one by one so sequence order is index order. */
    pthread_t th[HERD_N];
    struct herd_arg args[HERD_N];
    for (int i = 1; i < HERD_N; i++) {
        args[i] = (struct herd_arg){ .h = &h, .i = i };
        assert_int_equal(pthread_create(&th[i], NULL, herd_waiter, &args[i]), 0);
        struct count_cond c = { lhs[0], dir, i + 1 };
        assert_true(rt_eventually(has_children, &c));
    }
    assert_true(rt_eventually(all_watching, &h));
    for (int i = 1; i < HERD_N; i++)
        assert_int_equal(wakeups_of(h.locks[i]), 0);

    /* Each release wakes exactly the next waiter and nobody else. */
    for (int s = 0; s + 1 < HERD_N; s++) {
        if (s == 0)
            assert_int_equal(larch_lock_unlock(h.locks[0]), ZK_OK);
        else
            atomic_store(&h.release[s], true);
        assert_true(rt_eventually(acquired_by, &h.order[s + 1]));
        assert_int_equal(atomic_load(&h.order[s + 1]), s + 2);
        assert_int_equal(wakeups_of(h.locks[s + 1]), 1);
        for (int j = s + 2; j < HERD_N; j++) {
            assert_int_equal(wakeups_of(h.locks[j]), 0);
            assert_int_equal(atomic_load(&h.order[j]), 0);
        }
    }
    atomic_store(&h.release[HERD_N - 1], true);
    for (int i = 1; i < HERD_N; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(atomic_load(&h.failures), 0);
    for (int i = 1; i < HERD_N; i++) {
        struct larch_wake_stats st;
        larch_lock_stats(h.locks[i], &st);
        assert_int_equal(st.watches_set, 1); /* one watch, on its predecessor */
        assert_int_equal(st.wakeups, 1);
    }
    for (int i = 0; i < HERD_N; i++)
        larch_lock_free(h.locks[i]);
    for (int i = 1; i < HERD_N; i++)
        larch_close(lhs[i]);
    free(dir);
    rt_finish(lhs[0], root);
}

/* ---- a killed holder's lock passes on ----------------------------------- */

/* The child (an rt_child_fn): takes the lock on its own session and
 * reports its node. */
static const char *holder_child(struct larch *lh, void *dir)
{
    static char node[256];
    struct larch_lock *l = NULL;
    if (larch_lock_create(lh, dir, &l) != ZK_OK || larch_lock_lock(l, RT_WAIT_MS) != ZK_OK)
        return NULL;
    snprintf(node, sizeof node, "%s", larch_lock_node(l));
    return node;
}

static void test_killed_holder(void **state)
{
    /* No handle (and so no thread) may live across fork(). */
    struct larch *lh = rt_open();
    char *root = rt_root(lh, "lock-kill");
    char *dir = rt_path(root, "lock");
    larch_close(lh);

    char child_node[256];
    pid_t pid = rt_spawn(holder_child, dir, child_node, sizeof child_node);
    assert_true(rt_has_prefix(child_node, "lock-"));

    lh = rt_open();
    struct larch_lock *l;
    assert_int_equal(larch_lock_create(lh, dir, &l), ZK_OK);
    bool got = true;
    assert_int_equal(larch_lock_trylock(l, &got), ZK_OK);
    assert_false(got); /* the child really holds it */

    rt_kill(pid);
    /* The child's session expires on the server; its node goes and the
     * waiter, watching exactly that node, takes over. */
    assert_int_equal(larch_lock_lock(l, RT_SESSION_TIMEOUT_MS * 3), ZK_OK);
    char *child_path = rt_path(dir, child_node);
    assert_int_equal(rt_exists(lh, child_path, NULL), ZK_ENONODE);
    assert_int_equal(rt_count_children(lh, dir), 1);
    assert_int_equal(wakeups_of(l), 1);
    assert_int_equal(larch_lock_unlock(l), ZK_OK);

    free(child_path);
    larch_lock_free(l);
    free(dir);
    rt_finish(lh, root);
}

/* ---- the GUID rule under repeated connection loss ------------------------ */

#define FLAP_ROUNDS 30

struct flapper {
    struct larch *lh;
    atomic_bool stop;
    atomic_int drops;
};

static void *flap(void *p)
{
    struct flapper *f = p;
    for (int i = 0; i < 2000 && !atomic_load(&f->stop); i++) {
        larch_disconnect(f->lh);
        atomic_fetch_add(&f->drops, 1);
        rt_sleep_ms(i % 4); /* 0-3 ms: often enough to cut a create short */
    }
    return NULL;
}

static void test_connection_loss(void **state)
{
    struct larch *lh = rt_open(), *observer = rt_open();
    char *root = rt_root(observer, "lock-flap");
    char *dir = rt_path(root, "lock");
    struct larch_lock *l;
    assert_int_equal(larch_lock_create(lh, dir, &l), ZK_OK);
    struct flapper f = { .lh = lh };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, flap, &f), 0);
    int failures = 0, max_nodes = 0;
    for (int i = 0; i < FLAP_ROUNDS; i++) {
        if (larch_lock_lock(l, RT_WAIT_MS) != ZK_OK) {
            failures++;
            continue;
        }
        /* A create whose reply was lost must not leave a second node. */
        int n = rt_count_children(observer, dir);
        max_nodes = n > max_nodes ? n : max_nodes;
        if (larch_lock_unlock(l) != ZK_OK)
            failures++;
    }
    atomic_store(&f.stop, true);
    pthread_join(th, NULL);
    assert_int_equal(failures, 0);
    assert_int_equal(max_nodes, 1);
    assert_true(atomic_load(&f.drops) > 0);
    assert_int_equal(larch_wait_connected(lh, RT_WAIT_MS), ZK_OK);
    assert_int_equal(rt_count_children(observer, dir), 0);
    larch_lock_free(l);
    larch_close(lh);
    free(dir);
    rt_finish(observer, root);
}

/* ---- the GUID rule against a member that lags ---------------------------- */

/* Only with env RT_LAGGING_HOSTS="<leader>,<member>" of an ensemble whose
 * <member> lags behind its leader (its links delayed: set up by
 * tests/integration/test_recipes_failover.py). A lock request whose create
 * reached the leader but whose reply was lost moves to the next host, the
 * lagging member, which may not have applied that create yet: the recipe
 * must sync before it looks for its node there (the GUID rule, seed 004),
 * else it creates a second node and waits behind its own first one. */
#define LAG_ROUNDS 15
#define LAG_IDLE_MS 150 /* more than the member's lag: it has all the handle saw */
#define LAG_LOCK_MS 5000

struct cutter {
    struct larch *lh;
    const char *leader; /* "host:port" */
    atomic_int armed;   /* 1 + microseconds to wait before the cut; 0: idle */
    atomic_bool stop;
    atomic_int cuts;
};

static bool on_server(struct larch *lh, const char *server)
{
    char now[300];
    return larch_server(lh, now, sizeof now) == ZK_OK && strcmp(now, server) == 0;
}

/* Cuts lh's connection once per arming, a few microseconds after, when it
 * is connected to the leader: the lock's create is then often in flight. */
static void *cut_on_leader(void *p)
{
    struct cutter *c = p;
    for (int64_t end = base_mono_ms() + 10 * RT_WAIT_MS;
         !atomic_load(&c->stop) && base_mono_ms() < end;) {
        int armed = atomic_exchange(&c->armed, 0);
        if (armed == 0) {
            struct timespec idle = { .tv_nsec = 100000 };
            nanosleep(&idle, NULL);
            continue;
        }
        struct timespec wait = { .tv_nsec = (long)(armed - 1) * 1000 };
        nanosleep(&wait, NULL);
        if (on_server(c->lh, c->leader)) {
            larch_disconnect(c->lh);
            atomic_fetch_add(&c->cuts, 1);
        }
    }
    return NULL;
}

static void test_guid_rule_on_a_lagging_member(void **state)
{
    const char *hosts = getenv("RT_LAGGING_HOSTS");
    char leader[300];
    const char *comma = strchr(hosts, ',');
    assert_non_null(comma);
    snprintf(leader, sizeof leader, "%.*s", (int)(comma - hosts), hosts);
    struct larch_options opt = { .session_timeout_ms = RT_SESSION_TIMEOUT_MS, .no_shuffle = true };
    struct larch *lh = NULL, *observer = NULL;
    assert_int_equal(larch_open(&lh, hosts, &opt), ZK_OK);
    assert_int_equal(larch_wait_connected(lh, RT_WAIT_MS), ZK_OK);
    assert_int_equal(larch_open(&observer, leader, &opt), ZK_OK);
    assert_int_equal(larch_wait_connected(observer, RT_WAIT_MS), ZK_OK);
    char *root = rt_root(observer, "lock-lag");
    char *dir = rt_path(root, "lock");
    struct larch_lock *l;
    assert_int_equal(larch_lock_create(lh, dir, &l), ZK_OK);
    assert_int_equal(larch_lock_lock(l, RT_WAIT_MS), ZK_OK); /* makes dir */
    assert_int_equal(larch_lock_unlock(l), ZK_OK);

    struct cutter c = { .lh = lh, .leader = leader };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, cut_on_leader, &c), 0);
    int failures = 0, max_nodes = 0, rounds = 0;
    for (; rounds < LAG_ROUNDS && failures == 0; rounds++) {
        /* back to the leader (nothing in flight), then idle past the lag */
        for (int i = 0; i < 10 && !on_server(lh, leader); i++) {
            char was[300];
            if (larch_server(lh, was, sizeof was) == ZK_OK) {
                /* the I/O thread drops it in a moment: wait for that, so
                 * the wait below is for the next connection */
                larch_disconnect(lh);
                for (int64_t end = base_mono_ms() + RT_WAIT_MS;
                     on_server(lh, was) && base_mono_ms() < end;)
                    rt_sleep_ms(1);
            }
            assert_int_equal(larch_wait_connected(lh, RT_WAIT_MS), ZK_OK);
        }
        assert_true(on_server(lh, leader));
        rt_sleep_ms(LAG_IDLE_MS);
        atomic_store(&c.armed, 1 + (rounds * 397) % 3000); /* 0-3 ms */
        int rc = larch_lock_lock(l, LAG_LOCK_MS);
        if (rc != ZK_OK) {
            print_message("round %d: lock: %s, %d nodes left in the queue\n", rounds,
                          larch_error(rc), rt_count_children(observer, dir));
            failures++;
            break;
        }
        int n = rt_count_children(observer, dir);
        max_nodes = n > max_nodes ? n : max_nodes;
        if (larch_lock_unlock(l) != ZK_OK)
            failures++;
    }
    atomic_store(&c.stop, true);
    pthread_join(th, NULL);
    print_message("%d rounds, %d cuts\n", rounds, atomic_load(&c.cuts));
    assert_int_equal(failures, 0);
    assert_int_equal(max_nodes, 1);
    assert_true(atomic_load(&c.cuts) > 0);
    larch_lock_free(l);
    larch_close(lh);
    free(dir);
    rt_finish(observer, root);
}

int main(void)
{
    if (getenv("RT_LAGGING_HOSTS") != NULL) {
        const struct CMUnitTest lagging[] = {
            cmocka_unit_test(test_guid_rule_on_a_lagging_member),
        };
        return cmocka_run_group_tests(lagging, NULL, NULL);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trylock_and_timeout),
        cmocka_unit_test(test_mutual_exclusion),
        cmocka_unit_test(test_herd_free),
        cmocka_unit_test(test_connection_loss),
        cmocka_unit_test(test_killed_holder),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
