/*
 * test_twopc — two-phase commit (seed 000) against a live server (env
 * LARCH_HOSTS): every site (own handle, own thread or process) reads the
 * same decision; all commit votes commit; one abort vote aborts; a site
 * process killed with SIGKILL before voting aborts (its liveness node
 * expires); a site that never votes aborts at the vote timeout; deciding
 * again returns the decision written.
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

#include "client/recipes/twopc.h"
#include "tests/recipes/rt.h"

#define SITES_MAX 4
#define TX "tx1"

struct site {
    struct larch *lh;
    struct twopc_site *s;
    const char *root;
    char name[16];
    enum twopc_decision vote; /* TWOPC_UNDECIDED: never vote */
    pthread_t thread;
    int vote_rc, await_rc;
    enum twopc_decision decision;
};

/* A site's life: vote (if it votes), then wait for the decision. */
static void *site_main(void *arg)
{
    struct site *s = arg;
    s->vote_rc = s->vote != TWOPC_UNDECIDED ? twopc_site_vote(s->s, TX, s->vote, RT_WAIT_MS)
                                            : ZK_OK;
    s->await_rc = twopc_site_await(s->s, TX, RT_WAIT_MS, &s->decision);
    return NULL;
}

static void open_sites(struct site *sites, int n, const char *root,
                       const enum twopc_decision *votes)
{
    for (int i = 0; i < n; i++) {
        sites[i] = (struct site){ .lh = rt_open(), .root = root, .vote = votes[i] };
        snprintf(sites[i].name, sizeof sites[i].name, "site%d", i);
        assert_int_equal(twopc_site_open(sites[i].lh, root, sites[i].name, RT_WAIT_MS, &sites[i].s),
                         ZK_OK);
        assert_int_equal(pthread_create(&sites[i].thread, NULL, site_main, &sites[i]), 0);
    }
}

/* Joins the site threads; each must have read `want`. A vote may find the
 * transaction decided already (ZK_EBADVERSION) only when it was aborted. */
static void close_sites(struct site *sites, int n, enum twopc_decision want)
{
    for (int i = 0; i < n; i++) {
        pthread_join(sites[i].thread, NULL);
        if (!(want == TWOPC_ABORT && sites[i].vote_rc == ZK_EBADVERSION))
            assert_int_equal(sites[i].vote_rc, ZK_OK);
        assert_int_equal(sites[i].await_rc, ZK_OK);
        assert_int_equal(sites[i].decision, want);
        twopc_site_free(sites[i].s);
        larch_close(sites[i].lh);
    }
}

/* twopc_coord_decide, called again while it fails for want of time: the
 * decision write's time (one more vote timeout) may run out while the
 * ensemble elects a leader, and twopc.h lets a later call try again. */
static int decide(struct twopc_coord *c, int32_t vote_timeout_ms, enum twopc_decision *d,
                  enum twopc_reason *why)
{
    int rc = ZK_EOPERATIONTIMEOUT;
    for (int64_t end = base_mono_ms() + RT_WAIT_MS;
         rc == ZK_EOPERATIONTIMEOUT && base_mono_ms() < end;)
        rc = twopc_coord_decide(c, vote_timeout_ms, d, why);
    return rc;
}

/* Runs one transaction over sites voting `votes` and checks the outcome. */
static void run_transaction(const enum twopc_decision *votes, int n, int32_t vote_timeout_ms,
                            enum twopc_decision want, enum twopc_reason want_reason)
{
    struct larch *lh = rt_open();
    char *root = rt_root(lh, "twopc");
    struct site sites[SITES_MAX];
    open_sites(sites, n, root, votes);
    const char *names[SITES_MAX];
    for (int i = 0; i < n; i++)
        names[i] = sites[i].name;

    struct twopc_coord *c = NULL;
    assert_int_equal(twopc_coord_begin(lh, root, TX, names, n, RT_WAIT_MS, &c), ZK_OK);
    enum twopc_decision d = TWOPC_UNDECIDED;
    enum twopc_reason why = TWOPC_TIMED_OUT;
    assert_int_equal(decide(c, vote_timeout_ms, &d, &why), ZK_OK);
    assert_int_equal(d, want);
    assert_int_equal(why, want_reason);
    close_sites(sites, n, want);
    /* deciding again, as after an error whose decision may have been
     * written with its reply lost, returns the decision written */
    d = TWOPC_UNDECIDED;
    assert_int_equal(twopc_coord_decide(c, vote_timeout_ms, &d, NULL), ZK_OK);
    assert_int_equal(d, want);

    /* the decision is in the transaction node, once */
    char *tx = larch_path_join(root, TX);
    char *data = NULL;
    int32_t len = -1;
    struct zk_stat st;
    assert_int_equal(rt_get(lh, tx, &data, &len, &st), ZK_OK);
    assert_string_equal(data, want == TWOPC_COMMIT ? "commit" : "abort");
    assert_int_equal(st.version, 1);
    free(data);
    free(tx);
    twopc_coord_free(c);
    rt_finish(lh, root);
}

static void test_all_commit_commits(void **state)
{
    const enum twopc_decision votes[] = { TWOPC_COMMIT, TWOPC_COMMIT, TWOPC_COMMIT };
    run_transaction(votes, 3, RT_WAIT_MS, TWOPC_COMMIT, TWOPC_ALL_COMMITTED);
}

static void test_one_abort_aborts(void **state)
{
    const enum twopc_decision votes[] = { TWOPC_COMMIT, TWOPC_ABORT, TWOPC_COMMIT };
    run_transaction(votes, 3, RT_WAIT_MS, TWOPC_ABORT, TWOPC_VOTED_ABORT);
}

static void test_silent_site_times_out(void **state)
{
    const enum twopc_decision votes[] = { TWOPC_COMMIT, TWOPC_UNDECIDED };
    run_transaction(votes, 2, 500, TWOPC_ABORT, TWOPC_TIMED_OUT);
}

/* The doomed site's process (an rt_child_fn): registers on its own
 * session and never votes. */
static const char *doomed_child(struct larch *lh, void *root)
{
    struct twopc_site *s = NULL;
    return twopc_site_open(lh, root, "doomed", RT_WAIT_MS, &s) == ZK_OK ? "registered" : NULL;
}

/* A site process dies (SIGKILL) before voting: its liveness node vanishes
 * when its session expires, the coordinator aborts for that reason well
 * before the vote timeout, and the surviving sites read abort. */
static void test_dead_site_aborts(void **state)
{
    struct larch *lh = rt_open();
    char *root = rt_root(lh, "twopc");
    larch_close(lh); /* fork with no handle open in this process */
    pid_t pid = rt_spawn(doomed_child, root, NULL, 0);
    lh = rt_open();

    const enum twopc_decision votes[] = { TWOPC_COMMIT, TWOPC_COMMIT };
    struct site sites[2];
    open_sites(sites, 2, root, votes);
    const char *names[] = { sites[0].name, sites[1].name, "doomed" };
    struct twopc_coord *c = NULL;
    assert_int_equal(twopc_coord_begin(lh, root, TX, names, 3, RT_WAIT_MS, &c), ZK_OK);
    rt_kill(pid);

    enum twopc_decision d = TWOPC_UNDECIDED;
    enum twopc_reason why = TWOPC_TIMED_OUT;
    assert_int_equal(decide(c, RT_SESSION_TIMEOUT_MS * 3, &d, &why), ZK_OK);
    assert_int_equal(d, TWOPC_ABORT);
    assert_int_equal(why, TWOPC_SITE_FAILED);
    close_sites(sites, 2, TWOPC_ABORT);

    twopc_coord_free(c);
    rt_finish(lh, root);
}

static void test_bad_arguments(void **state)
{
    struct larch *lh = rt_open();
    char *root = rt_root(lh, "twopc");
    struct twopc_coord *c = NULL;
    const char *dup[] = { "a", "a" };
    const char *slash[] = { "a/b" };
    const char *ok[] = { "a" };
    assert_int_equal(twopc_coord_begin(lh, root, TX, dup, 2, RT_WAIT_MS, &c), ZK_EBADARGUMENTS);
    assert_int_equal(twopc_coord_begin(lh, root, TX, slash, 1, RT_WAIT_MS, &c), ZK_EBADARGUMENTS);
    assert_int_equal(twopc_coord_begin(lh, root, "alive", ok, 1, RT_WAIT_MS, &c), ZK_EBADARGUMENTS);
    assert_int_equal(twopc_coord_begin(lh, root, TX, ok, 0, RT_WAIT_MS, &c), ZK_EBADARGUMENTS);
    assert_int_equal(twopc_coord_begin(lh, root, TX, ok, 1, RT_WAIT_MS, &c), ZK_OK);
    struct twopc_coord *again = NULL;
    assert_int_equal(twopc_coord_begin(lh, root, TX, ok, 1, RT_WAIT_MS, &again), ZK_ENODEEXISTS);
    twopc_coord_free(c);
    rt_finish(lh, root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_commit_commits),
        cmocka_unit_test(test_one_abort_aborts),
        cmocka_unit_test(test_silent_site_times_out),
        cmocka_unit_test(test_dead_site_aborts),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
