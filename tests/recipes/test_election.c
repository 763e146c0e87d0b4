/* test_election.c — leader election (client/recipes/election.h, seed 000
 * "Leader Election") against a live server (LARCH_HOSTS): one leader at a
 * time, succession in sequence order, each resignation wakes exactly one
 * candidate, a candidate whose predecessor (not the leader) resigns watches
 * the next one down, and a timed-out wait keeps the candidacy. Worker
 * threads never call cmocka; the main thread asserts. */
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

#include "client/recipes/election.h"
#include "tests/recipes/rt.h"

static struct larch_wake_stats stats_of(struct larch_election *e)
{
    struct larch_wake_stats st;
    larch_election_stats(e, &st);
    return st;
}

static void assert_leader_id(struct larch_election *e, const char *want)
{
    char *id = NULL;
    assert_int_equal(larch_election_leader(e, &id), ZK_OK);
    assert_string_equal(id, want);
    free(id);
}

/* ---- succession ---------------------------------------------------------- */

#define SUCC_N 4

struct succession {
    struct larch_election *cands[SUCC_N];
    char ids[SUCC_N][8];
    atomic_int leaders_now;  /* candidates that believe they lead */
    atomic_int violations;   /* a second leader, or a wrong leader id */
    atomic_int order[SUCC_N]; /* 1-based rank of becoming leader */
    atomic_int rank;
    atomic_int failures;
};

struct succ_arg {
    struct succession *s;
    int i;
};

/* A term: count ourselves in, check nobody else leads and that the
 * election reports us, hold briefly, step down. */
static void serve_term(struct succession *s, int i)
{
    if (atomic_fetch_add(&s->leaders_now, 1) != 0)
        atomic_fetch_add(&s->violations, 1);
    atomic_store(&s->order[i], atomic_fetch_add(&s->rank, 1) + 1);
    char *id = NULL;
    if (larch_election_leader(s->cands[i], &id) != ZK_OK || strcmp(id, s->ids[i]) != 0)
        atomic_fetch_add(&s->violations, 1);
    free(id);
    rt_sleep_ms(20); /* a window for a second leader to show up in */
    atomic_fetch_sub(&s->leaders_now, 1);
    if (larch_election_resign(s->cands[i]) != ZK_OK)
        atomic_fetch_add(&s->failures, 1);
}

static void *candidate(void *p)
{
    struct succ_arg *a = p;
    if (larch_election_wait_leader(a->s->cands[a->i], RT_WAIT_MS) != ZK_OK) {
        atomic_fetch_add(&a->s->failures, 1);
        return NULL;
    }
    serve_term(a->s, a->i);
    return NULL;
}

static bool waiters_watching(void *p)
{
    struct succession *s = p;
    for (int i = 1; i < SUCC_N; i++) {
        if (stats_of(s->cands[i]).watches_set < 1)
            return false;
    }
    return true;
}

static void test_succession(void **state)
{
    struct larch *lhs[SUCC_N];
    for (int i = 0; i < SUCC_N; i++)
        lhs[i] = rt_open();
    char *root = rt_root(lhs[0], "el-succ");
    char *dir = rt_path(root, "election");
    struct succession s = { 0 };
    int64_t prev_seq = -1;
    for (int i = 0; i < SUCC_N; i++) {
        snprintf(s.ids[i], sizeof s.ids[i], "c%d", i);
        assert_int_equal(larch_election_create(lhs[i], dir, s.ids[i], &s.cands[i]), ZK_OK);
        assert_int_equal(larch_election_join(s.cands[i], RT_WAIT_MS), ZK_OK);
        const char *node = larch_election_node(s.cands[i]);
        assert_true(rt_has_prefix(node, "n-"));
        assert_true(larch_sequence_of(node) > prev_seq);
        prev_seq = larch_sequence_of(node);
    }
    /* Exactly one leader: the lowest node. */
    for (int i = 0; i < SUCC_N; i++) {
        bool leader = false;
        assert_int_equal(larch_election_is_leader(s.cands[i], &leader), ZK_OK);
        assert_int_equal(leader, i == 0);
    }
    assert_leader_id(s.cands[SUCC_N - 1], "c0");

    pthread_t th[SUCC_N];
    struct succ_arg args[SUCC_N];
    for (int i = 1; i < SUCC_N; i++) {
        args[i] = (struct succ_arg){ .s = &s, .i = i };
        assert_int_equal(pthread_create(&th[i], NULL, candidate, &args[i]), 0);
    }
    assert_true(rt_eventually(waiters_watching, &s));
    for (int i = 1; i < SUCC_N; i++)
        assert_int_equal(stats_of(s.cands[i]).wakeups, 0);

    assert_int_equal(larch_election_wait_leader(s.cands[0], RT_WAIT_MS), ZK_OK);
    serve_term(&s, 0);
    for (int i = 1; i < SUCC_N; i++)
        pthread_join(th[i], NULL);

    assert_int_equal(atomic_load(&s.failures), 0);
    assert_int_equal(atomic_load(&s.violations), 0);
    for (int i = 0; i < SUCC_N; i++)
        assert_int_equal(atomic_load(&s.order[i]), i + 1); /* sequence order */
    /* Each resignation woke exactly one candidate: the next in line, which
     * watched only its predecessor. */
    for (int i = 1; i < SUCC_N; i++) {
        assert_int_equal(stats_of(s.cands[i]).watches_set, 1);
        assert_int_equal(stats_of(s.cands[i]).wakeups, 1);
    }
    assert_int_equal(stats_of(s.cands[0]).watches_set, 0);
    char *id = NULL;
    /* the others resigned through their own sessions: read after a sync */
    assert_int_equal(rt_sync(lhs[0], dir), ZK_OK);
    assert_int_equal(larch_election_leader(s.cands[0], &id), ZK_ENONODE); /* nobody left */

    for (int i = 0; i < SUCC_N; i++)
        larch_election_free(s.cands[i]);
    for (int i = 1; i < SUCC_N; i++)
        larch_close(lhs[i]);
    free(dir);
    rt_finish(lhs[0], root);
}

/* ---- a resignation in the middle of the line ---------------------------- */

struct waiter {
    struct larch_election *e;
    atomic_bool leader;
    atomic_int rc;
};

static void *wait_to_lead(void *p)
{
    struct waiter *w = p;
    int rc = larch_election_wait_leader(w->e, RT_WAIT_MS);
    atomic_store(&w->leader, rc == ZK_OK);
    atomic_store(&w->rc, rc);
    return NULL;
}

struct watch_count {
    struct larch_election *e;
    uint64_t want;
};

static bool has_watches(void *p)
{
    struct watch_count *c = p;
    return stats_of(c->e).watches_set >= c->want;
}

static bool is_leading(void *p)
{
    return atomic_load(&((struct waiter *)p)->leader);
}

static void test_middle_resigns(void **state)
{
    struct larch *lha = rt_open(), *lhb = rt_open(), *lhc = rt_open();
    char *root = rt_root(lha, "el-middle");
    char *dir = rt_path(root, "election");
    struct larch_election *a, *b, *c;
    assert_int_equal(larch_election_create(lha, dir, "A", &a), ZK_OK);
    assert_int_equal(larch_election_create(lhb, dir, "B", &b), ZK_OK);
    assert_int_equal(larch_election_create(lhc, dir, "C", &c), ZK_OK);
    assert_int_equal(larch_election_join(a, RT_WAIT_MS), ZK_OK);
    assert_int_equal(larch_election_join(b, RT_WAIT_MS), ZK_OK);
    assert_int_equal(larch_election_join(c, RT_WAIT_MS), ZK_OK);
    assert_int_equal(larch_election_join(c, RT_WAIT_MS), ZK_EBADARGUMENTS);

    struct waiter wc = { .e = c };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, wait_to_lead, &wc), 0);
    struct watch_count one = { c, 1 }, two = { c, 2 };
    assert_true(rt_eventually(has_watches, &one)); /* C watches B */

    /* B goes: C wakes, is not the lowest, and watches A instead. */
    assert_int_equal(larch_election_resign(b), ZK_OK);
    assert_null(larch_election_node(b));
    assert_true(rt_eventually(has_watches, &two));
    assert_int_equal(stats_of(c).wakeups, 1);
    assert_false(atomic_load(&wc.leader));
    assert_leader_id(b, "A");

    /* A goes: C leads. */
    assert_int_equal(larch_election_resign(a), ZK_OK);
    assert_true(rt_eventually(is_leading, &wc));
    pthread_join(th, NULL);
    assert_int_equal(atomic_load(&wc.rc), ZK_OK);
    assert_int_equal(stats_of(c).wakeups, 2);
    assert_int_equal(stats_of(c).watches_set, 2);
    assert_leader_id(a, "C");

    larch_election_free(a);
    larch_election_free(b);
    larch_election_free(c);
    free(dir);
    rt_finish(lha, root);
    larch_close(lhb);
    larch_close(lhc);
}

/* ---- timeouts and unjoined calls ---------------------------------------- */

static void test_wait_timeout_keeps_candidacy(void **state)
{
    struct larch *lha = rt_open(), *lhb = rt_open();
    char *root = rt_root(lha, "el-timeout");
    char *dir = rt_path(root, "election");
    struct larch_election *a, *b;
    assert_int_equal(larch_election_create(lha, dir, "A", &a), ZK_OK);
    assert_int_equal(larch_election_create(lhb, dir, "B", &b), ZK_OK);
    bool leader = true;
    assert_int_equal(larch_election_is_leader(b, &leader), ZK_EBADARGUMENTS);
    assert_false(leader);
    assert_int_equal(larch_election_wait_leader(b, 10), ZK_EBADARGUMENTS);
    char *id = NULL;
    assert_int_equal(larch_election_leader(b, &id), ZK_ENONODE); /* no candidate yet */

    assert_int_equal(larch_election_join(a, RT_WAIT_MS), ZK_OK);
    assert_int_equal(larch_election_join(b, RT_WAIT_MS), ZK_OK);
    assert_int_equal(larch_election_wait_leader(b, 200), ZK_EOPERATIONTIMEOUT);
    assert_non_null(larch_election_node(b)); /* still a candidate */
    assert_int_equal(larch_election_is_leader(b, &leader), ZK_OK);
    assert_false(leader);

    assert_int_equal(larch_election_resign(a), ZK_OK);
    /* A's resignation is another session's change: B reads after a sync */
    assert_int_equal(rt_sync(lhb, dir), ZK_OK);
    assert_int_equal(larch_election_is_leader(b, &leader), ZK_OK);
    assert_true(leader);
    /* The timed-out wait removed its watch: A's deletion, which B's server
     * would have notified before answering the listing above, woke nobody. */
    assert_int_equal(stats_of(b).wakeups, 0);
    assert_int_equal(larch_election_wait_leader(b, 0), ZK_OK);
    assert_leader_id(a, "B");

    larch_election_free(a);
    larch_election_free(b);
    free(dir);
    rt_finish(lha, root);
    larch_close(lhb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_succession),
        cmocka_unit_test(test_middle_resigns),
        cmocka_unit_test(test_wait_timeout_keeps_candidacy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
