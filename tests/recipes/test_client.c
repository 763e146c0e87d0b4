/*
 * test_client — liblarch's API against a live server (LARCH_HOSTS): the
 * same program runs against larchd and stock ZooKeeper
 * (tests/integration/test_recipes.py), and against a larchd ensemble named
 * member by member, also while its leader is killed
 * (tests/integration/test_recipes_failover.py). So the test's calls do
 * what a ZooKeeper client must there (rt.h): reads of another session's
 * writes after a sync, calls whose connection dropped retried. A scenario
 * whose checks a dropped connection makes moot (what a persistent watch
 * missed while away, a pipeline of asynchronous calls, a multi's results)
 * runs again instead (ATTEMPTS).
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

#include "tests/recipes/rt.h"

/* ---- an event recorder usable as a watcher ---------------------------------------- */

#define REC_MAX 64

struct rec {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool sessions;   /* record session events too (else node events only) */
    int disconnects; /* ZK_STATE_DISCONNECTED session events, recorded or not */
    int n;
    struct larch_event ev[REC_MAX];
    char path[REC_MAX][128];
    int order[REC_MAX]; /* sequence number shared with completions */
    int *clock;
};

static void rec_init(struct rec *r)
{
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
}

/* A recorder of session events as well (a default watcher's). */
static void rec_init_sessions(struct rec *r)
{
    rec_init(r);
    r->sessions = true;
}

static void rec_watch(struct larch *lh, const struct larch_event *ev, void *ctx)
{
    (void)lh;
    struct rec *r = ctx;
    pthread_mutex_lock(&r->mu);
    bool session = ev->type == ZK_EVENT_NONE;
    if (session && ev->state == ZK_STATE_DISCONNECTED)
        r->disconnects++;
    if (r->n < REC_MAX && (r->sessions || !session)) {
        r->ev[r->n] = *ev;
        snprintf(r->path[r->n], sizeof r->path[r->n], "%s", ev->path);
        r->ev[r->n].path = r->path[r->n];
        r->order[r->n] = r->clock != NULL ? (*r->clock)++ : 0;
        r->n++;
    }
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

/* Waits until r holds at least n events; returns how many it holds. */
static int rec_wait(struct rec *r, int n, int64_t timeout_ms)
{
    int64_t end = base_mono_ms() + timeout_ms;
    pthread_mutex_lock(&r->mu);
    while (r->n < n && base_mono_ms() < end) {
        pthread_mutex_unlock(&r->mu);
        rt_sleep_ms(5);
        pthread_mutex_lock(&r->mu);
    }
    int got = r->n;
    pthread_mutex_unlock(&r->mu);
    return got;
}

/* Waits until r holds at least n events, or (undisturbed) its handle lost
 * its connection: whether it holds n. */
static bool rec_wait_undisturbed(struct rec *r, int n)
{
    int64_t end = base_mono_ms() + RT_WAIT_MS;
    pthread_mutex_lock(&r->mu);
    while (r->n < n && r->disconnects == 0 && base_mono_ms() < end) {
        pthread_mutex_unlock(&r->mu);
        rt_sleep_ms(5);
        pthread_mutex_lock(&r->mu);
    }
    bool got = r->n >= n;
    pthread_mutex_unlock(&r->mu);
    return got;
}

/* The index of r's first event of type on path, waiting up to RT_WAIT_MS
 * for it; -1 when none came. */
static int rec_find(struct rec *r, int32_t type, const char *path)
{
    int64_t end = base_mono_ms() + RT_WAIT_MS;
    for (int seen = 0;;) {
        pthread_mutex_lock(&r->mu);
        int n = r->n;
        pthread_mutex_unlock(&r->mu);
        for (; seen < n; seen++) {
            if (r->ev[seen].type == type && strcmp(r->ev[seen].path, path) == 0)
                return seen;
        }
        if (base_mono_ms() >= end || n == REC_MAX)
            return -1;
        rt_sleep_ms(5);
    }
}

/* Scenarios that a dropped connection can make moot run up to this often:
 * with a leader's election taking a second or two, the next try meets a
 * quiet ensemble. */
#define ATTEMPTS 10

/* Whether rc leaves a call's outcome unknown: the scenario has no verdict. */
static bool moot(int rc)
{
    return rc == ZK_ECONNECTIONLOSS || rc == ZK_ESESSIONMOVED;
}

static char *join(const char *a, const char *b)
{
    char *p = larch_path_join(a, b);
    assert_non_null(p);
    return p;
}

/* ---- basic operations --------------------------------------------------------------- */

static void test_crud_and_stat(void **state)
{
    (void)state;
    struct larch *lh = rt_open();
    char *root = rt_root(lh, "crud");
    char *a = join(root, "a");
    char *created = NULL;
    struct zk_stat st;
    assert_int_equal(rt_create(lh, a, "v1", 2, NULL, ZK_PERSISTENT, &created, &st), ZK_OK);
    assert_string_equal(created, a);
    free(created);
    assert_int_equal(st.version, 0);
    assert_int_equal(st.data_length, 2);
    assert_true(st.czxid > 0);
    RT_EXPECT(lh, larch_create(lh, a, NULL, -1, NULL, ZK_PERSISTENT, 0, NULL, NULL),
              ZK_ENODEEXISTS);

    char *data = NULL;
    int32_t len = 0;
    RT_EXPECT(lh, larch_get(lh, a, NULL, NULL, &data, &len, &st), ZK_OK);
    assert_int_equal(len, 2);
    assert_string_equal(data, "v1");
    free(data);
    RT_EXPECT(lh, larch_set(lh, a, "v2", 2, 5, NULL), ZK_EBADVERSION);
    assert_int_equal(rt_set(lh, a, "v2", 2, 0, &st), ZK_OK);
    assert_int_equal(st.version, 1);
    assert_int_equal(rt_set(lh, a, NULL, -1, -1, &st), ZK_OK);
    RT_EXPECT(lh, larch_get(lh, a, NULL, NULL, &data, &len, NULL), ZK_OK);
    assert_null(data);
    assert_int_equal(len, -1);

    char *b = join(a, "b");
    assert_int_equal(rt_create(lh, b, "", 0, NULL, ZK_PERSISTENT, NULL, NULL), ZK_OK);
    RT_EXPECT(lh, larch_delete(lh, a, -1), ZK_ENOTEMPTY);
    struct larch_strings kids;
    RT_EXPECT(lh, larch_get_children(lh, a, NULL, NULL, &kids, &st), ZK_OK);
    assert_int_equal(kids.count, 1);
    assert_string_equal(kids.items[0], "b");
    assert_int_equal(st.num_children, 1);
    larch_strings_free(&kids);
    int32_t number = -1;
    RT_EXPECT(lh, larch_get_all_children_number(lh, root, &number), ZK_OK);
    assert_int_equal(number, 2);
    RT_EXPECT(lh, larch_delete(lh, b, 3), ZK_EBADVERSION);
    assert_int_equal(rt_delete(lh, b, 0), ZK_OK);
    RT_EXPECT(lh, larch_exists(lh, b, NULL, NULL, NULL), ZK_ENONODE);
    RT_EXPECT(lh, larch_sync(lh, a), ZK_OK);
    assert_int_equal(rt_delete_tree(lh, root), ZK_OK);
    free(b);
    free(a);
    free(root);
    assert_int_equal(rt_close(lh), ZK_OK);
}

static void test_sequential_names_and_bad_paths(void **state)
{
    (void)state;
    struct larch *lh = rt_open();
    char *root = rt_root(lh, "seq");
    int64_t last = -1;
    for (int i = 0; i < 5; i++) {
        /* a prefix of its own: after a lost reply the create is found by
         * it rather than made twice (the GUID rule, rt_create) */
        char name[16];
        snprintf(name, sizeof name, "n%d-", i);
        char *prefix = join(root, name);
        char *created = NULL;
        assert_int_equal(rt_create(lh, prefix, NULL, -1, NULL, ZK_PERSISTENT_SEQUENTIAL, &created,
                                   NULL),
                         ZK_OK);
        assert_int_equal(strncmp(created, prefix, strlen(prefix)), 0);
        assert_int_equal(strlen(created), strlen(prefix) + 10);
        int64_t seq = larch_sequence_of(created);
        assert_true(seq > last);
        last = seq;
        free(created);
        free(prefix);
    }
    struct larch_strings kids;
    RT_EXPECT(lh, larch_get_children(lh, root, NULL, NULL, &kids, NULL), ZK_OK);
    larch_sort_by_sequence(&kids);
    assert_int_equal(kids.count, 5);
    for (int32_t i = 1; i < kids.count; i++)
        assert_true(larch_sequence_of(kids.items[i - 1]) < larch_sequence_of(kids.items[i]));
    larch_strings_free(&kids);
    /* refused before anything is sent */
    assert_int_equal(larch_create(lh, "no-slash", NULL, -1, NULL, 0, 0, NULL, NULL),
                     ZK_EBADARGUMENTS);
    assert_int_equal(larch_get(lh, "/a//b", NULL, NULL, NULL, NULL, NULL), ZK_EBADARGUMENTS);
    assert_int_equal(larch_delete(lh, "/a/", -1), ZK_EBADARGUMENTS);
    assert_int_equal(larch_create(lh, "/x", NULL, -1, NULL, 42, 0, NULL, NULL), ZK_EBADARGUMENTS);
    assert_int_equal(rt_delete_tree(lh, root), ZK_OK);
    free(root);
    larch_close(lh);
}

/* ---- watches ------------------------------------------------------------------------- */

static void test_one_shot_watches_fire_once(void **state)
{
    (void)state;
    struct larch *lh = rt_open();
    struct larch *other = rt_open();
    char *root = rt_root(lh, "watch");
    char *a = join(root, "a");
    struct rec r; /* node events: one-shot watches are re-armed, and fire, across reconnects */
    rec_init(&r);
    /* exists on a missing node watches for its creation */
    RT_EXPECT(lh, larch_exists(lh, a, rec_watch, &r, NULL), ZK_ENONODE);
    assert_int_equal(rt_create(other, a, "1", 1, NULL, ZK_PERSISTENT, NULL, NULL), ZK_OK);
    assert_int_equal(rec_wait(&r, 1, RT_WAIT_MS), 1);
    assert_int_equal(r.ev[0].type, ZK_EVENT_CREATED);
    assert_string_equal(r.ev[0].path, a);
    /* the same watcher twice on one path fires once */
    RT_EXPECT(lh, larch_get(lh, a, rec_watch, &r, NULL, NULL, NULL), ZK_OK);
    RT_EXPECT(lh, larch_get(lh, a, rec_watch, &r, NULL, NULL, NULL), ZK_OK);
    RT_EXPECT(lh, larch_get_children(lh, root, rec_watch, &r, NULL, NULL), ZK_OK);
    assert_int_equal(rt_set(other, a, "2", 1, -1, NULL), ZK_OK);
    assert_int_equal(rt_set(other, a, "3", 1, -1, NULL), ZK_OK);
    char *b = join(root, "b");
    assert_int_equal(rt_create(other, b, NULL, -1, NULL, ZK_PERSISTENT, NULL, NULL), ZK_OK);
    assert_int_equal(rec_wait(&r, 3, RT_WAIT_MS), 3);
    RT_EXPECT(lh, larch_sync(lh, root), ZK_OK);
    rt_sleep_ms(200);
    assert_int_equal(r.n, 3);
    assert_int_equal(r.ev[1].type, ZK_EVENT_DATA_CHANGED);
    assert_int_equal(r.ev[2].type, ZK_EVENT_CHILD_CHANGED);
    assert_string_equal(r.ev[2].path, root);
    assert_int_equal(rt_delete_tree(lh, root), ZK_OK);
    free(a);
    free(b);
    free(root);
    larch_close(other);
    larch_close(lh);
}

/* One try: false when it has no verdict (a call's outcome unknown, or lh
 * lost its connection before every event came: ZooKeeper does not replay
 * what happened to a persistent watch's nodes while the client was away). */
static bool try_persistent_and_recursive_watches(void)
{
    struct larch *lh = rt_open();
    struct larch *other = rt_open();
    char *root = rt_root(lh, "pwatch");
    char *a = join(root, "a");
    char *ab = join(a, "b");
    struct rec p, rr;
    rec_init(&p);
    rec_init(&rr);
    bool verdict = false;
    int rc = larch_add_watch(lh, a, ZK_ADD_WATCH_PERSISTENT, rec_watch, &p);
    if (moot(rc))
        goto out;
    assert_int_equal(rc, ZK_OK);
    rc = larch_add_watch(lh, root, ZK_ADD_WATCH_PERSISTENT_RECURSIVE, rec_watch, &rr);
    if (moot(rc))
        goto out;
    assert_int_equal(rc, ZK_OK);
    /* versioned: a retried write applies once, so each makes one event */
    assert_int_equal(rt_create(other, a, NULL, -1, NULL, ZK_PERSISTENT, NULL, NULL), ZK_OK);
    assert_int_equal(rt_set(other, a, "x", 1, 0, NULL), ZK_OK);
    assert_int_equal(rt_set(other, a, "y", 1, 1, NULL), ZK_OK);
    assert_int_equal(rt_create(other, ab, NULL, -1, NULL, ZK_PERSISTENT, NULL, NULL), ZK_OK);
    /* persistent on a: created, changed, changed, child changed */
    if (!rec_wait_undisturbed(&p, 4) || !rec_wait_undisturbed(&rr, 4))
        goto out;
    assert_int_equal(p.n, 4);
    assert_int_equal(p.ev[0].type, ZK_EVENT_CREATED);
    assert_int_equal(p.ev[1].type, ZK_EVENT_DATA_CHANGED);
    assert_int_equal(p.ev[2].type, ZK_EVENT_DATA_CHANGED);
    assert_int_equal(p.ev[3].type, ZK_EVENT_CHILD_CHANGED);
    /* recursive on root: no child events, but the grandchild's creation */
    assert_int_equal(rr.n, 4);
    assert_int_equal(rr.ev[3].type, ZK_EVENT_CREATED);
    assert_string_equal(rr.ev[3].path, ab);
    for (int i = 0; i < 4; i++)
        assert_int_not_equal(rr.ev[i].type, ZK_EVENT_CHILD_CHANGED);
    /* removing the persistent watch tells its watcher, then it stays quiet */
    rc = larch_remove_watches(lh, a, ZK_WATCHER_ANY, rec_watch, &p, false);
    if (moot(rc))
        goto out;
    assert_int_equal(rc, ZK_OK);
    assert_int_equal(rec_wait(&p, 5, RT_WAIT_MS), 5);
    assert_int_equal(p.ev[4].type, ZK_EVENT_PERSISTENT_WATCH_REMOVED);
    assert_int_equal(larch_remove_watches(lh, a, ZK_WATCHER_ANY, rec_watch, &p, false),
                     ZK_ENOWATCHER);
    assert_int_equal(rt_set(other, a, "z", 1, 2, NULL), ZK_OK);
    if (!rec_wait_undisturbed(&rr, 5))
        goto out;
    RT_EXPECT(lh, larch_sync(lh, a), ZK_OK);
    rt_sleep_ms(100);
    assert_int_equal(p.n, 5);
    verdict = true;
out:
    assert_int_equal(rt_delete_tree(other, root), ZK_OK);
    free(ab);
    free(a);
    free(root);
    larch_close(other);
    larch_close(lh);
    return verdict;
}

static void test_persistent_and_recursive_watches(void **state)
{
    (void)state;
    bool verdict = false;
    for (int i = 0; i < ATTEMPTS && !verdict; i++)
        verdict = try_persistent_and_recursive_watches();
    assert_true(verdict);
}

static void test_default_watcher_and_session_events(void **state)
{
    (void)state;
    struct rec def;
    rec_init_sessions(&def);
    struct larch_options opt = { .session_timeout_ms = RT_SESSION_TIMEOUT_MS,
                                 .watcher = rec_watch, .watcher_ctx = &def };
    struct larch *lh = NULL;
    assert_int_equal(larch_open(&lh, rt_hosts(), &opt), ZK_OK);
    assert_int_equal(larch_wait_connected(lh, RT_WAIT_MS), ZK_OK);
    assert_true(rec_wait(&def, 1, RT_WAIT_MS) >= 1);
    assert_int_equal(def.ev[0].type, ZK_EVENT_NONE);
    assert_int_equal(def.ev[0].state, ZK_STATE_SYNC_CONNECTED);
    char *root = rt_root(lh, "defw");
    RT_EXPECT(lh, larch_get(lh, root, LARCH_DEFAULT_WATCHER, NULL, NULL, NULL, NULL), ZK_OK);
    assert_int_equal(rt_set(lh, root, "x", 1, 0, NULL), ZK_OK);
    /* after the connected event; session events may come between */
    assert_true(rec_find(&def, ZK_EVENT_DATA_CHANGED, root) >= 1);
    assert_int_equal(rt_delete(lh, root, -1), ZK_OK);
    free(root);
    larch_close(lh);
}

/* ---- reconnect, moved and expired sessions ---------------------------------------------- */

static void test_reconnect_keeps_session_and_watches(void **state)
{
    (void)state;
    struct rec def, w;
    rec_init_sessions(&def);
    rec_init_sessions(&w);
    struct larch_options opt = { .session_timeout_ms = RT_SESSION_TIMEOUT_MS * 2,
                                 .watcher = rec_watch, .watcher_ctx = &def };
    struct larch *lh = NULL, *other = rt_open();
    assert_int_equal(larch_open(&lh, rt_hosts(), &opt), ZK_OK);
    assert_int_equal(larch_wait_connected(lh, RT_WAIT_MS), ZK_OK);
    char *root = rt_root(other, "reconn");
    char *e = join(root, "eph");
    assert_int_equal(rt_create(lh, e, NULL, -1, NULL, ZK_EPHEMERAL, NULL, NULL), ZK_OK);
    RT_EXPECT(lh, larch_get(lh, root, rec_watch, &w, NULL, NULL, NULL), ZK_OK);
    int64_t sid = larch_session_id(lh);
    larch_disconnect(lh);
    /* the change lands while lh may be away: setWatches re-arms and fires it */
    assert_int_equal(rt_set(other, root, "x", 1, 0, NULL), ZK_OK);
    assert_int_equal(larch_wait_connected(lh, RT_WAIT_MS), ZK_OK);
    /* session events reach every watcher (seed 004); then the data change */
    int64_t end = base_mono_ms() + RT_WAIT_MS;
    int changed = -1;
    for (int seen = 0; changed < 0 && base_mono_ms() < end;) {
        seen = rec_wait(&w, seen + 1, 100);
        for (int i = 0; i < seen && changed < 0; i++)
            changed = w.ev[i].type == ZK_EVENT_DATA_CHANGED ? i : -1;
    }
    assert_true(changed >= 0);
    for (int i = 0; i < changed; i++)
        assert_int_equal(w.ev[i].type, ZK_EVENT_NONE);
    assert_int_equal(larch_session_id(lh), sid);
    struct zk_stat st;
    assert_int_equal(rt_exists(other, e, &st), ZK_OK); /* another session's: after a sync */
    assert_int_equal(st.ephemeral_owner, sid);
    /* the default watcher saw the connection go and come back (once lh is
     * connected, its last session event says so) */
    assert_true(rec_wait(&def, 3, RT_WAIT_MS) >= 3);
    bool saw_disconnected = false;
    for (int i = 0; i < def.n; i++)
        saw_disconnected |= def.ev[i].state == ZK_STATE_DISCONNECTED;
    assert_true(saw_disconnected);
    int32_t last = -1;
    for (end = base_mono_ms() + RT_WAIT_MS; base_mono_ms() < end; rt_sleep_ms(5)) {
        assert_int_equal(larch_wait_connected(lh, RT_WAIT_MS), ZK_OK);
        pthread_mutex_lock(&def.mu);
        last = def.ev[def.n - 1].state;
        pthread_mutex_unlock(&def.mu);
        if (last == ZK_STATE_SYNC_CONNECTED)
            break;
    }
    assert_int_equal(last, ZK_STATE_SYNC_CONNECTED);
    assert_int_equal(rt_close(lh), ZK_OK); /* the session, and its ephemeral, end */
    /* another session's change: sync, in case other's server lags */
    assert_int_equal(rt_exists(other, e, NULL), ZK_ENONODE);
    assert_int_equal(rt_delete_tree(other, root), ZK_OK);
    free(e);
    free(root);
    larch_close(other);
}

static void test_session_handover_and_expiry(void **state)
{
    (void)state;
    struct larch *a = rt_open();
    char *root = rt_root(a, "expire");
    char *e = join(root, "eph");
    assert_int_equal(rt_create(a, e, NULL, -1, NULL, ZK_EPHEMERAL, NULL, NULL), ZK_OK);
    /* a second handle re-attaches the same session (id + password) */
    struct larch_options opt = { .session_timeout_ms = RT_SESSION_TIMEOUT_MS };
    opt.session_id = larch_session_id(a);
    larch_session_passwd(a, opt.passwd);
    larch_detach(a);
    struct larch *b = NULL;
    assert_int_equal(larch_open(&b, rt_hosts(), &opt), ZK_OK);
    assert_int_equal(larch_wait_connected(b, RT_WAIT_MS), ZK_OK);
    assert_int_equal(larch_session_id(b), opt.session_id);
    /* a new handle knows no zxid yet: its server may not have applied a's
     * create (against an ensemble), so sync first (rt_exists) */
    struct zk_stat st;
    assert_int_equal(rt_exists(b, e, &st), ZK_OK);
    assert_int_equal(st.ephemeral_owner, opt.session_id);
    larch_detach(b); /* leave it to expire */

    struct larch *c = rt_open();
    int64_t end = base_mono_ms() + RT_SESSION_TIMEOUT_MS * 4;
    while (rt_exists(c, e, NULL) == ZK_OK && base_mono_ms() < end)
        rt_sleep_ms(100);
    assert_int_equal(rt_exists(c, e, NULL), ZK_ENONODE);

    /* attaching an expired session: an EXPIRED event, then SESSIONEXPIRED */
    struct rec def;
    rec_init_sessions(&def);
    opt.watcher = rec_watch;
    opt.watcher_ctx = &def;
    struct larch *d = NULL;
    assert_int_equal(larch_open(&d, rt_hosts(), &opt), ZK_OK);
    assert_int_equal(larch_wait_connected(d, RT_WAIT_MS), ZK_ESESSIONEXPIRED);
    assert_int_equal(larch_state(d), ZK_STATE_EXPIRED);
    assert_int_equal(rec_wait(&def, 1, RT_WAIT_MS), 1);
    assert_int_equal(def.ev[0].state, ZK_STATE_EXPIRED);
    assert_int_equal(larch_get(d, "/", NULL, NULL, NULL, NULL, NULL), ZK_ESESSIONEXPIRED);
    larch_close(d);
    assert_int_equal(rt_delete_tree(c, root), ZK_OK);
    free(e);
    free(root);
    larch_close(c);
}

/* ---- multi, connect strings, chroot ------------------------------------------------------ */

/* One try: false when the first multi's outcome is unknown (its results
 * are what this checks). */
static bool try_multi_all_or_nothing(void)
{
    struct larch *lh = rt_open();
    char *root = rt_root(lh, "multi");
    char *a = join(root, "a"), *b = join(root, "b"), *c = join(root, "c");
    struct larch_op ok_ops[] = { larch_op_create(a, "1", 1, NULL, ZK_PERSISTENT),
                                 larch_op_create(b, NULL, -1, NULL, ZK_PERSISTENT_SEQUENTIAL),
                                 larch_op_set(a, "2", 1, 0), larch_op_check(root, 0) };
    struct larch_op_result res[4];
    bool verdict = false;
    int rc = larch_multi(lh, ok_ops, 4, res);
    if (moot(rc)) {
        larch_op_results_free(res, 4);
        goto out;
    }
    assert_int_equal(rc, ZK_OK);
    for (int i = 0; i < 4; i++)
        assert_int_equal(res[i].err, ZK_OK);
    assert_string_equal(res[0].path, a);
    /* the suffix is the parent's cversion: a was created first */
    assert_int_equal(larch_sequence_of(res[1].path), 1);
    assert_int_equal(res[2].stat.version, 1);
    larch_op_results_free(res, 4);

    struct larch_op bad_ops[] = { larch_op_create(c, NULL, -1, NULL, ZK_PERSISTENT),
                                  larch_op_delete(a, 7), larch_op_set(a, "3", 1, -1) };
    /* it fails and changes nothing: a retry answers the same */
    RT_CALL(rc, lh, larch_multi(lh, bad_ops, 3, res));
    assert_int_equal(rc, ZK_EBADVERSION);
    assert_int_equal(res[0].err, ZK_OK);
    assert_int_equal(res[1].err, ZK_EBADVERSION);
    assert_int_equal(res[2].err, ZK_ERUNTIMEINCONSISTENCY);
    larch_op_results_free(res, 3);
    RT_EXPECT(lh, larch_exists(lh, c, NULL, NULL, NULL), ZK_ENONODE);
    char *data = NULL;
    RT_EXPECT(lh, larch_get(lh, a, NULL, NULL, &data, NULL, NULL), ZK_OK);
    assert_string_equal(data, "2");
    free(data);
    verdict = true;
out:
    assert_int_equal(rt_delete_tree(lh, root), ZK_OK);
    free(a);
    free(b);
    free(c);
    free(root);
    larch_close(lh);
    return verdict;
}

static void test_multi_all_or_nothing(void **state)
{
    (void)state;
    bool verdict = false;
    for (int i = 0; i < ATTEMPTS && !verdict; i++)
        verdict = try_multi_all_or_nothing();
    assert_true(verdict);
}

static void test_multi_host_and_chroot(void **state)
{
    (void)state;
    struct larch *plain = rt_open();
    char *root = rt_root(plain, "chroot");
    /* a dead host first (port 1 refuses), then the real one, then the chroot */
    char cs[512];
    snprintf(cs, sizeof cs, "127.0.0.1:1,%s%s", rt_hosts(), root);
    struct larch_options opt = { .session_timeout_ms = RT_SESSION_TIMEOUT_MS, .no_shuffle = true };
    struct larch *ch = NULL;
    assert_int_equal(larch_open(&ch, cs, &opt), ZK_OK);
    char server[300];
    RT_EXPECT(ch, larch_server(ch, server, sizeof server), ZK_OK); /* once connected */
    assert_string_not_equal(server, "127.0.0.1:1");

    char *created = NULL;
    assert_int_equal(rt_create(ch, "/x", "in", 2, NULL, ZK_PERSISTENT, &created, NULL), ZK_OK);
    assert_string_equal(created, "/x");
    free(created);
    char *full = join(root, "x");
    /* another session's write: sync, in case plain's server lags */
    assert_int_equal(rt_exists(plain, full, NULL), ZK_OK);
    struct rec r;
    rec_init(&r);
    RT_EXPECT(ch, larch_get(ch, "/x", rec_watch, &r, NULL, NULL, NULL), ZK_OK);
    assert_int_equal(rt_set(plain, full, "out", 3, 0, NULL), ZK_OK);
    assert_int_equal(rec_wait(&r, 1, RT_WAIT_MS), 1);
    assert_string_equal(r.ev[0].path, "/x");
    struct larch_strings kids;
    RT_EXPECT(ch, larch_get_children(ch, "/", NULL, NULL, &kids, NULL), ZK_OK);
    assert_int_equal(kids.count, 1);
    assert_string_equal(kids.items[0], "x");
    larch_strings_free(&kids);
    larch_close(ch);

    struct larch *bad = NULL;
    assert_int_equal(larch_open(&bad, "", NULL), ZK_EBADARGUMENTS);
    assert_int_equal(larch_open(&bad, "127.0.0.1:99999", NULL), ZK_EBADARGUMENTS);
    assert_int_equal(larch_open(&bad, "127.0.0.1:2181/bad//chroot", NULL), ZK_EBADARGUMENTS);
    assert_null(bad);
    assert_int_equal(rt_delete_tree(plain, root), ZK_OK);
    free(full);
    free(root);
    larch_close(plain);
}

/* ---- auth and ACLs ---------------------------------------------------------------------- */

/* larch_set_acl at an ACL version, retried: after a lost try, BADVERSION
 * with the node's ACL ours at version + 1 means that try applied. */
static int set_acl_at(struct larch *lh, const char *path, int32_t version,
                      const struct larch_acl_list *acl)
{
    int64_t deadline = 0;
    for (bool lost = false;; lost = true) {
        int rc = larch_set_acl(lh, path, version, acl);
        if (rc == ZK_EBADVERSION && lost) {
            struct larch_acl_list now;
            struct zk_stat st;
            RT_CALL(rc, lh, larch_get_acl(lh, path, &now, &st));
            if (rc != ZK_OK)
                return rc;
            bool ours = st.aversion == version + 1 && now.count == acl->count;
            for (int32_t i = 0; ours && i < now.count; i++)
                ours = now.items[i].perms == acl->items[i].perms &&
                       strcmp(now.items[i].scheme, acl->items[i].scheme) == 0 &&
                       strcmp(now.items[i].id, acl->items[i].id) == 0;
            larch_acl_list_free(&now);
            return ours ? ZK_OK : ZK_EBADVERSION;
        }
        if (!rt_retry(lh, rc, &deadline))
            return rc;
    }
}

static void test_digest_auth_and_acls(void **state)
{
    (void)state;
    struct larch *owner = rt_open();
    struct larch *stranger = rt_open();
    char *root = rt_root(owner, "auth");
    char *secret = join(root, "secret");
    RT_EXPECT(owner, larch_add_auth(owner, "digest", "alice:pw", 8), ZK_OK);
    assert_int_equal(rt_create(owner, secret, "s", 1, &LARCH_CREATOR_ALL_ACL, ZK_PERSISTENT, NULL,
                               NULL),
                     ZK_OK);
    /* owner's node, read by another session: after a sync (rt_get), else
     * stranger's server may not have it yet (NONODE) */
    assert_int_equal(rt_get(stranger, secret, NULL, NULL, NULL), ZK_ENOAUTH);
    struct larch_acl_list acl;
    /* reading an ACL needs READ or ADMIN (ZOOKEEPER-1392) */
    RT_EXPECT(stranger, larch_get_acl(stranger, secret, &acl, NULL), ZK_ENOAUTH);
    RT_EXPECT(owner, larch_get_acl(owner, secret, &acl, NULL), ZK_OK);
    assert_int_equal(acl.count, 1);
    char id[128];
    assert_int_equal(larch_digest_id("alice:pw", id, sizeof id), ZK_OK);
    assert_string_equal(acl.items[0].scheme, "digest");
    assert_string_equal(acl.items[0].id, id);
    assert_int_equal(acl.items[0].perms, ZK_PERM_ALL);
    larch_acl_list_free(&acl);

    /* the owner grants read to everyone with zkCli's syntax */
    char text[256];
    snprintf(text, sizeof text, "digest:%s:cdrwa,world:anyone:r", id);
    assert_int_equal(larch_acl_parse(text, &acl), ZK_OK);
    RT_EXPECT(stranger, larch_set_acl(stranger, secret, -1, &acl), ZK_ENOAUTH);
    assert_int_equal(set_acl_at(owner, secret, 0, &acl), ZK_OK);
    larch_acl_list_free(&acl);
    char *data = NULL;
    /* the new ACL is owner's change: stranger reads it after a sync */
    assert_int_equal(rt_get(stranger, secret, &data, NULL, NULL), ZK_OK);
    assert_string_equal(data, "s");
    free(data);
    RT_EXPECT(stranger, larch_set(stranger, secret, "x", 1, -1, NULL), ZK_ENOAUTH);
    /* auth survives a reconnect */
    larch_disconnect(owner);
    assert_int_equal(larch_wait_connected(owner, RT_WAIT_MS), ZK_OK);
    assert_int_equal(rt_set(owner, secret, "y", 1, -1, NULL), ZK_OK);
    assert_int_equal(rt_delete(owner, secret, -1), ZK_OK);
    assert_int_equal(rt_delete_tree(owner, root), ZK_OK);
    free(secret);
    free(root);
    larch_close(stranger);
    larch_close(owner);
}

static void test_unknown_auth_scheme_is_terminal(void **state)
{
    (void)state;
    struct larch *lh = rt_open();
    RT_EXPECT(lh, larch_add_auth(lh, "nosuchscheme", "x", 1), ZK_EAUTHFAILED);
    assert_int_equal(larch_state(lh), ZK_STATE_AUTH_FAILED);
    assert_int_equal(larch_exists(lh, "/", NULL, NULL, NULL), ZK_EAUTHFAILED);
    larch_close(lh);
}

/* ---- asynchronous API and ordering -------------------------------------------------------- */

struct async_log {
    pthread_mutex_t mu;
    int n;
    int err[16];
    int order[16];
    char data[16][16];
    int clock;
};

static void async_done(struct larch *lh, const struct larch_result *r, void *ctx)
{
    (void)lh;
    struct async_log *l = ctx;
    pthread_mutex_lock(&l->mu);
    if (l->n < 16) {
        l->err[l->n] = r->err;
        l->order[l->n] = l->clock++;
        snprintf(l->data[l->n], sizeof l->data[l->n], "%s", r->data != NULL ? r->data : "");
        l->n++;
    }
    pthread_mutex_unlock(&l->mu);
}

/* One try: false when a call failed with its outcome unknown (the checks
 * are on one pipeline of calls that a dropped connection cuts). */
static bool try_async_order_and_watch_before_reply(void)
{
    struct larch *lh = rt_open();
    char *root = rt_root(lh, "async");
    char *a = join(root, "a");
    struct async_log log = { .n = 0 };
    pthread_mutex_init(&log.mu, NULL);
    struct rec w;
    rec_init(&w);
    w.clock = &log.clock; /* one clock: events and completions share the event thread */
    assert_int_equal(larch_acreate(lh, a, "0", 1, NULL, ZK_PERSISTENT, 0, async_done, &log),
                     ZK_OK);
    assert_int_equal(larch_aget(lh, a, rec_watch, &w, async_done, &log), ZK_OK);
    assert_int_equal(larch_aset(lh, a, "1", 1, -1, async_done, &log), ZK_OK);
    assert_int_equal(larch_aget(lh, a, NULL, NULL, async_done, &log), ZK_OK);
    assert_int_equal(larch_adelete(lh, a, 99, async_done, &log), ZK_OK);
    assert_int_equal(larch_aexists(lh, "bad path", NULL, NULL, async_done, &log),
                     ZK_EBADARGUMENTS);
    int64_t end = base_mono_ms() + RT_WAIT_MS;
    int n = 0;
    while (base_mono_ms() < end) {
        pthread_mutex_lock(&log.mu);
        n = log.n;
        pthread_mutex_unlock(&log.mu);
        if (n == 5)
            break;
        rt_sleep_ms(5);
    }
    assert_int_equal(n, 5);
    bool verdict = true;
    for (int i = 0; i < 5; i++)
        verdict &= !moot(log.err[i]);
    if (verdict) {
        assert_int_equal(log.err[0], ZK_OK);
        assert_int_equal(log.err[1], ZK_OK);
        assert_string_equal(log.data[1], "0");
        assert_int_equal(log.err[2], ZK_OK);
        assert_int_equal(log.err[3], ZK_OK);
        assert_string_equal(log.data[3], "1");
        assert_int_equal(log.err[4], ZK_EBADVERSION);
        /* the data watch fired before the completion of the read that saw "1" */
        assert_int_equal(rec_wait(&w, 1, RT_WAIT_MS), 1);
        assert_int_equal(w.ev[0].type, ZK_EVENT_DATA_CHANGED);
        assert_true(w.order[0] < log.order[3]);
    }
    assert_int_equal(rt_delete_tree(lh, root), ZK_OK);
    free(a);
    free(root);
    larch_close(lh); /* no callback runs after this: log and w may go */
    pthread_mutex_destroy(&log.mu);
    return verdict;
}

static void test_async_order_and_watch_before_reply(void **state)
{
    (void)state;
    bool verdict = false;
    for (int i = 0; i < ATTEMPTS && !verdict; i++)
        verdict = try_async_order_and_watch_before_reply();
    assert_true(verdict);
}

/* ---- one handle, many threads ------------------------------------------------------------ */

#define THREADS 4
#define OPS_PER_THREAD 100

struct worker {
    struct larch *lh;
    char path[128];
    int failures;
};

static void *hammer(void *arg)
{
    struct worker *w = arg;
    for (int i = 0; i < OPS_PER_THREAD; i++) {
        char v[16];
        int n = snprintf(v, sizeof v, "%d", i);
        struct zk_stat st;
        char *data = NULL;
        if (rt_set(w->lh, w->path, v, n, i, &st) != ZK_OK || st.version != i + 1)
            w->failures++;
        int rc;
        RT_CALL(rc, w->lh, larch_get(w->lh, w->path, NULL, NULL, &data, NULL, NULL));
        if (rc != ZK_OK || strcmp(data, v) != 0)
            w->failures++;
        free(data);
    }
    return NULL;
}

static void test_threads_share_a_handle(void **state)
{
    (void)state;
    struct larch *lh = rt_open();
    char *root = rt_root(lh, "threads");
    struct worker w[THREADS];
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (struct worker){ .lh = lh };
        snprintf(w[i].path, sizeof w[i].path, "%s/t%d", root, i);
        assert_int_equal(rt_create(lh, w[i].path, NULL, -1, NULL, ZK_PERSISTENT, NULL, NULL),
                         ZK_OK);
    }
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, hammer, &w[i]), 0);
    for (int i = 0; i < THREADS; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        assert_int_equal(w[i].failures, 0);
    }
    assert_int_equal(rt_delete_tree(lh, root), ZK_OK);
    free(root);
    larch_close(lh);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crud_and_stat),
        cmocka_unit_test(test_sequential_names_and_bad_paths),
        cmocka_unit_test(test_one_shot_watches_fire_once),
        cmocka_unit_test(test_persistent_and_recursive_watches),
        cmocka_unit_test(test_default_watcher_and_session_events),
        cmocka_unit_test(test_reconnect_keeps_session_and_watches),
        cmocka_unit_test(test_session_handover_and_expiry),
        cmocka_unit_test(test_multi_all_or_nothing),
        cmocka_unit_test(test_multi_host_and_chroot),
        cmocka_unit_test(test_digest_auth_and_acls),
        cmocka_unit_test(test_unknown_auth_scheme_is_terminal),
        cmocka_unit_test(test_async_order_and_watch_before_reply),
        cmocka_unit_test(test_threads_share_a_handle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
