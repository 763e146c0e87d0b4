/*
 * test_tree_concurrency.c — DESIGN.md invariants 1 and 3 under real threads.
 * Run it under -fsanitize=thread and -fsanitize=address.
 *
 * The main thread plays the sequencer: it preps and applies thousands of
 * setData/create/delete txns. Reader threads (rcu-registered, like workers)
 * hammer tree_get/tree_get_children on a few hot nodes and check:
 *
 *  invariant 1 — every view is one version: a hot node's data spells the
 *  version it was written at, so data and stat.version must agree; a
 *  listing of /dir has exactly stat.num_children names.
 *
 *  invariant 3 — no missed watch, with the dataplane's scheme: each reader
 *  owns a watch_table; the sequencer, after applying a txn, copies its
 *  events onto every reader's queue; a reader looks a node up, registers a
 *  watch with seen_zxid = the observed mzxid (pzxid for children), then
 *  drains its queue through watch_fire. A watch registered at version v must
 *  be fired by exactly the event that produced version v+1, and a watch
 *  still pending at the end must have seen the node's final state.
 *
 * Threads cannot use cmocka's asserts (they longjmp); readers count
 * failures and print the first few, the main thread asserts on the counts.
 * The run is bounded by TXNS_MAX and RUN_MS_MAX. Seed: TREE_CONC_SEED.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <urcu.h>

#include "tree/tree.h"

#define READERS 3
#define HOT 4
#define TXNS_MAX 200000
#define RUN_MS_MAX 2500
#define DIR_MAX_CHILDREN 64
#define FAIL_PRINT_MAX 5

struct qev {
    int32_t type;
    int64_t zxid;
    char path[32];
};

struct queue {
    pthread_mutex_t mu;
    atomic_size_t queued; /* lets a reader skip the lock when empty */
    struct qev *v;
    size_t n, cap;
};

/* The current watch a reader holds on one node (at most one: watch_add
 * merges duplicates, so the reader never registers twice). */
struct wstate {
    bool pending;
    int64_t seen_zxid;
    int32_t seen_version; /* hot nodes */
};

struct reader {
    pthread_t thread;
    int id;
    struct queue q;
    struct watch_table *wt;
    struct wstate hot[HOT];
    struct wstate dir;
    const struct qev *firing; /* the event watch_fire is delivering */
    uint64_t rng;
    long views, fired, failures;
};

struct world {
    struct tree *t;
    struct reader readers[READERS];
    atomic_bool done;
    /* written by the sequencer before it applies the txn (so before the
     * event is queued); readers read them after dequeuing the event */
    int64_t *hot_zxid[HOT]; /* [node][version] = zxid that produced it */
    int64_t *dir_zxids;     /* zxids of /dir child changes, in order */
    atomic_long dir_nchanges;
};

static struct world W;

#if defined(__SANITIZE_THREAD__)
/* liburcu 0.13 is not instrumented: its worker threads free completion
 * objects the main thread allocated, synchronised by futexes TSan cannot
 * see. Ignore allocations made and freed *by the library itself*; our own
 * frees in call_rcu callbacks are still checked (tree_int.h annotates the
 * grace period for TSan). */
const char *__tsan_default_suppressions(void);
const char *__tsan_default_suppressions(void)
{
    return "called_from_lib:liburcu.so\ncalled_from_lib:liburcu-cds.so\n";
}
#endif

static const char *hot_path(int i)
{
    static const char *const p[HOT] = { "/hot0", "/hot1", "/hot2", "/hot3" };
    return p[i];
}

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void failf(struct reader *r, const char *fmt, long a, long b)
{
    if (r->failures++ < FAIL_PRINT_MAX) {
        fprintf(stderr, "reader %d: ", r->id);
        fprintf(stderr, fmt, a, b);
        fputc('\n', stderr);
    }
}

/* ---- queues ------------------------------------------------------------------ */

static void queue_push(struct queue *q, const struct tree_event *ev)
{
    pthread_mutex_lock(&q->mu);
    int rc = base_grow(&q->v, &q->cap, q->n + 1, sizeof *q->v);
    BASE_ASSERT(rc == 0); /* a test out of memory cannot go on */
    struct qev *e = &q->v[q->n++];
    e->type = ev->type;
    e->zxid = ev->zxid;
    snprintf(e->path, sizeof e->path, "%s", ev->path);
    atomic_store_explicit(&q->queued, q->n, memory_order_relaxed);
    pthread_mutex_unlock(&q->mu);
}

/* Takes everything queued so far (the caller frees *out). */
static size_t queue_take(struct queue *q, struct qev **out)
{
    *out = NULL;
    /* a stale zero only delays the drain to the next pass (or the final one) */
    if (atomic_load_explicit(&q->queued, memory_order_relaxed) == 0)
        return 0;
    pthread_mutex_lock(&q->mu);
    size_t n = q->n;
    *out = q->v;
    q->v = NULL;
    q->n = q->cap = 0;
    atomic_store_explicit(&q->queued, 0, memory_order_relaxed);
    pthread_mutex_unlock(&q->mu);
    return n;
}

/* The sequencer's event sink: the change is already published. */
static void fan_out(void *arg, const struct tree_event *ev)
{
    (void)arg;
    for (int i = 0; i < READERS; i++)
        queue_push(&W.readers[i].q, ev);
}

/* ---- reader side -------------------------------------------------------------- */

static int hot_index(const char *path)
{
    for (int i = 0; i < HOT; i++) {
        if (strcmp(path, hot_path(i)) == 0)
            return i;
    }
    return -1;
}

/* The first /dir child change after zxid (the one a CHILD watch set at
 * pzxid = zxid must be fired by). */
static int64_t dir_change_after(int64_t zxid)
{
    long n = atomic_load_explicit(&W.dir_nchanges, memory_order_acquire);
    for (long i = 0; i < n; i++) {
        if (W.dir_zxids[i] > zxid)
            return W.dir_zxids[i];
    }
    return -1;
}

static void on_fire(void *arg, uint64_t conn, int32_t type, const char *path)
{
    struct reader *r = arg;
    const struct qev *ev = r->firing;
    r->fired++;
    if (conn != (uint64_t)r->id)
        failf(r, "fired for conn %ld, expected %ld", (long)conn, r->id);
    int i = hot_index(path);
    if (i >= 0) {
        struct wstate *w = &r->hot[i];
        int64_t want = W.hot_zxid[i][w->seen_version + 1];
        if (!w->pending || type != ZK_EVENT_DATA_CHANGED || ev->zxid != want)
            failf(r, "data watch fired by zxid %ld, version v+1 has zxid %ld", (long)ev->zxid,
                  (long)want);
        w->pending = false;
    } else if (strcmp(path, "/dir") == 0) {
        int64_t want = dir_change_after(r->dir.seen_zxid);
        if (!r->dir.pending || type != ZK_EVENT_CHILD_CHANGED || ev->zxid != want)
            failf(r, "child watch fired by zxid %ld, next change is %ld", (long)ev->zxid,
                  (long)want);
        r->dir.pending = false;
    } else {
        failf(r, "fired for an unwatched path (type %ld, len %ld)", type, (long)strlen(path));
    }
}

static void drain(struct reader *r)
{
    struct qev *evs;
    size_t n = queue_take(&r->q, &evs);
    for (size_t i = 0; i < n; i++) {
        struct tree_event ev = { .type = evs[i].type, .path = evs[i].path, .zxid = evs[i].zxid };
        r->firing = &evs[i];
        watch_fire(r->wt, &ev, on_fire, r);
    }
    r->firing = NULL;
    free(evs);
}

/* Parses the "v<version>" the sequencer wrote; -1 when malformed. */
static long data_version(const uint8_t *p, int32_t len)
{
    if (p == NULL || len < 2 || len > 12 || p[0] != 'v')
        return -1;
    long v = 0;
    for (int32_t i = 1; i < len; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        v = v * 10 + (p[i] - '0');
    }
    return v;
}

static void look_at_hot(struct reader *r, int i)
{
    struct tree_view v;
    rcu_read_lock();
    int err = tree_get(W.t, hot_path(i), strlen(hot_path(i)), &v);
    long dv = err == ZK_OK ? data_version(v.data, v.data_len) : -2;
    struct zk_stat st = v.stat;
    bool len_ok = err == ZK_OK && v.stat.data_length == v.data_len;
    /* a tree call after the last use of tree memory: under TSan it tells the
     * checker this thread is done with what a grace period will free */
    (void)tree_last_zxid(W.t);
    rcu_read_unlock();
    r->views++;
    if (err != ZK_OK || dv != st.version || !len_ok) {
        failf(r, "hot view mixes versions: data says %ld, stat.version %ld", dv, st.version);
        return;
    }
    if (!r->hot[i].pending) {
        r->hot[i] = (struct wstate){ .pending = true, .seen_zxid = st.mzxid,
                                     .seen_version = st.version };
        if (watch_add(r->wt, hot_path(i), strlen(hot_path(i)), WATCH_DATA, (uint64_t)r->id,
                      st.mzxid) != ZK_OK)
            failf(r, "watch_add failed on hot node %ld%ld", i, 0);
    }
}

struct listing {
    long names;
    long bad;
};

static void count_child(void *arg, const char *name, size_t len)
{
    struct listing *l = arg;
    l->names++;
    if (len < 2 || name[0] != 'c')
        l->bad++;
}

static void look_at_dir(struct reader *r)
{
    struct tree_view v;
    struct listing l = { 0, 0 };
    rcu_read_lock();
    int err = tree_get_children(W.t, "/dir", 4, &v, count_child, &l);
    (void)tree_last_zxid(W.t);
    rcu_read_unlock();
    r->views++;
    if (err != ZK_OK || l.names != v.stat.num_children || l.bad != 0) {
        failf(r, "listing has %ld names, stat.num_children %ld", l.names, v.stat.num_children);
        return;
    }
    if (!r->dir.pending) {
        r->dir = (struct wstate){ .pending = true, .seen_zxid = v.stat.pzxid };
        if (watch_add(r->wt, "/dir", 4, WATCH_CHILD, (uint64_t)r->id, v.stat.pzxid) != ZK_OK)
            failf(r, "watch_add failed on /dir %ld%ld", 0, 0);
    }
}

static void *reader_main(void *arg)
{
    struct reader *r = arg;
    rcu_register_thread();
    while (!atomic_load_explicit(&W.done, memory_order_acquire)) {
        int pick = (int)(rng_next(&r->rng) % (HOT + 1));
        if (pick < HOT)
            look_at_hot(r, pick);
        else
            look_at_dir(r);
        drain(r);
    }
    drain(r); /* the sequencer has stopped: everything is queued */
    rcu_unregister_thread();
    return NULL;
}

/* ---- sequencer side ----------------------------------------------------------- */

struct seq {
    int64_t zxid;
    int32_t version[HOT];
    int children[DIR_MAX_CHILDREN]; /* suffixes of /dir's children */
    int nchildren;
    int next_child;
    long sets, creates, deletes;
};

static void run_txn(struct seq *s, const struct tree_req *r, bool child_change)
{
    static const struct tree_prep_cfg cfg = { .ttl_enabled = false };
    static const struct tree_auth auth = { 0 };
    struct txn x = { .zxid = ++s->zxid, .session_id = 0, .time_ms = 1000 + s->zxid };
    assert_int_equal(tree_prep(W.t, &cfg, r, &auth, &x), ZK_OK);
    if (child_change) {
        long n = atomic_load_explicit(&W.dir_nchanges, memory_order_relaxed);
        W.dir_zxids[n] = x.zxid;
        atomic_store_explicit(&W.dir_nchanges, n + 1, memory_order_release);
    }
    assert_int_equal(tree_apply(W.t, &x, fan_out, NULL, NULL), ZK_OK);
    txn_free(&x);
    tree_prep_reset(W.t);
}

static struct zk_acl world_all = { ZK_PERM_ALL, { { "world", 5 }, { "anyone", 6 } } };

static void seq_create(struct seq *s, const char *path, const char *data)
{
    struct tree_req r = { .type = ZK_OP_CREATE };
    r.u.create.path = (struct zk_str){ path, (int32_t)strlen(path) };
    r.u.create.data = (struct zk_str){ data, (int32_t)strlen(data) };
    r.u.create.acl = (struct zk_aclvec){ 1, &world_all };
    r.u.create.ttl = -1;
    bool under_dir = strncmp(path, "/dir/", 5) == 0;
    run_txn(s, &r, under_dir);
}

static void seq_set_hot(struct seq *s, int i)
{
    char data[16];
    int32_t next = s->version[i] + 1;
    snprintf(data, sizeof data, "v%d", next);
    struct tree_req r = { .type = ZK_OP_SETDATA };
    r.u.setdata.path = (struct zk_str){ hot_path(i), (int32_t)strlen(hot_path(i)) };
    r.u.setdata.data = (struct zk_str){ data, (int32_t)strlen(data) };
    r.u.setdata.version = s->version[i];
    W.hot_zxid[i][next] = s->zxid + 1; /* the zxid run_txn will assign */
    run_txn(s, &r, false);
    s->version[i] = next;
    s->sets++;
}

static void seq_create_child(struct seq *s)
{
    char path[32];
    int c = s->next_child++;
    snprintf(path, sizeof path, "/dir/c%d", c);
    seq_create(s, path, "x");
    s->children[s->nchildren++] = c;
    s->creates++;
}

static void seq_delete_child(struct seq *s, uint64_t *rng)
{
    int k = (int)(rng_next(rng) % (uint64_t)s->nchildren);
    char path[32];
    snprintf(path, sizeof path, "/dir/c%d", s->children[k]);
    struct tree_req r = { .type = ZK_OP_DELETE };
    r.u.del.path = (struct zk_str){ path, (int32_t)strlen(path) };
    r.u.del.version = -1;
    run_txn(s, &r, true);
    s->children[k] = s->children[--s->nchildren];
    s->deletes++;
}

static long sequence(struct seq *s, uint64_t seed)
{
    uint64_t rng = seed;
    int64_t start = base_mono_ms();
    long n = 0;
    for (; n < TXNS_MAX; n++) {
        uint64_t roll = rng_next(&rng) % 10;
        if (roll < 6)
            seq_set_hot(s, (int)(rng_next(&rng) % HOT));
        else if ((roll < 8 && s->nchildren < DIR_MAX_CHILDREN) || s->nchildren == 0)
            seq_create_child(s);
        else
            seq_delete_child(s, &rng);
        if ((n & 255) == 0 && base_mono_ms() - start > RUN_MS_MAX)
            break;
    }
    return n;
}

/* ---- the test ------------------------------------------------------------------- */

static void check_final_watches(const struct reader *r, long *misses)
{
    for (int i = 0; i < HOT; i++) {
        if (!r->hot[i].pending)
            continue;
        struct tree_view v;
        rcu_read_lock();
        int err = tree_get(W.t, hot_path(i), strlen(hot_path(i)), &v);
        rcu_read_unlock();
        /* still pending is fine only if nothing changed after it was set */
        if (err != ZK_OK || v.stat.mzxid != r->hot[i].seen_zxid)
            (*misses)++;
    }
    if (r->dir.pending) {
        struct tree_view v;
        rcu_read_lock();
        int err = tree_get(W.t, "/dir", 4, &v);
        rcu_read_unlock();
        if (err != ZK_OK || v.stat.pzxid != r->dir.seen_zxid)
            (*misses)++;
    }
}

static void setup_world(struct seq *s)
{
    memset(&W, 0, sizeof W);
    W.t = tree_new();
    assert_non_null(W.t);
    for (int i = 0; i < HOT; i++) {
        W.hot_zxid[i] = calloc(TXNS_MAX + 2, sizeof(int64_t));
        assert_non_null(W.hot_zxid[i]);
    }
    W.dir_zxids = calloc(TXNS_MAX + 2, sizeof(int64_t));
    assert_non_null(W.dir_zxids);
    memset(s, 0, sizeof *s);
    seq_create(s, "/dir", "");
    for (int i = 0; i < HOT; i++) {
        W.hot_zxid[i][0] = s->zxid + 1;
        seq_create(s, hot_path(i), "v0");
    }
}

static void teardown_world(void)
{
    for (int i = 0; i < READERS; i++) {
        watch_table_free(W.readers[i].wt);
        free(W.readers[i].q.v);
        pthread_mutex_destroy(&W.readers[i].q.mu);
    }
    tree_free(W.t);
    for (int i = 0; i < HOT; i++)
        free(W.hot_zxid[i]);
    free(W.dir_zxids);
}

static void test_readers_and_watches_under_writes(void **state)
{
    (void)state;
    const char *env = getenv("TREE_CONC_SEED");
    uint64_t seed = env != NULL ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) | 1u;
    fprintf(stderr, "seed %llu (replay: TREE_CONC_SEED=%llu)\n", (unsigned long long)seed,
            (unsigned long long)seed);
    struct seq s;
    setup_world(&s);
    for (int i = 0; i < READERS; i++) {
        struct reader *r = &W.readers[i];
        r->id = i + 1;
        r->rng = seed * 2654435761u + (uint64_t)i + 1;
        r->wt = watch_table_new();
        assert_non_null(r->wt);
        assert_int_equal(pthread_mutex_init(&r->q.mu, NULL), 0);
    }
    for (int i = 0; i < READERS; i++)
        assert_int_equal(pthread_create(&W.readers[i].thread, NULL, reader_main, &W.readers[i]), 0);
    long txns = sequence(&s, seed);
    atomic_store_explicit(&W.done, true, memory_order_release);
    for (int i = 0; i < READERS; i++)
        assert_int_equal(pthread_join(W.readers[i].thread, NULL), 0);

    long views = 0, fired = 0, failures = 0, misses = 0;
    for (int i = 0; i < READERS; i++) {
        const struct reader *r = &W.readers[i];
        views += r->views;
        fired += r->fired;
        failures += r->failures;
        check_final_watches(r, &misses);
        assert_true(r->views > 0);
    }
    fprintf(stderr, "txns %ld (setData %ld, create %ld, delete %ld), views %ld, watches fired %ld\n",
            txns, s.sets, s.creates, s.deletes, views, fired);
    assert_int_equal(failures, 0);
    assert_int_equal(misses, 0);
    assert_true(txns > 1000);
    assert_true(fired > 0);
    assert_int_equal(tree_last_zxid(W.t), s.zxid);
    teardown_world();
}

/* ---- tree_replace under readers and a snapshot writer ------------------------
 * An ensemble member installs the leader's snapshot with tree_replace while
 * workers read and the snapshot thread walks. Two trees alternate: "A" has
 * /k = "A" and /a0../a<REPL_NODES-1>, "B" the same with B. A reader's one
 * getData or getChildren must come from one of them whole (and its prefetch
 * pass, tree_prefetch_paths, run against both); a snapshot the
 * writer completes must be exactly one of them (a walk crossing a replace
 * returns -EAGAIN), never a mix. */
#define REPL_NODES 9000 /* past tree_prefetch_pays: readers' prefetch passes run */
#define REPL_ROUNDS_MIN 4
#define REPL_ROUNDS_MAX 400
#define REPL_MS_MAX 1500

struct membuf {
    uint8_t *p;
    size_t len, cap;
};

static int membuf_out(void *arg, const void *bytes, size_t len)
{
    struct membuf *m = arg;
    if (m->len + len > m->cap) {
        size_t cap = m->cap ? m->cap : 4096;
        while (cap < m->len + len)
            cap *= 2;
        uint8_t *p = realloc(m->p, cap);
        if (p == NULL)
            return -ENOMEM;
        m->p = p;
        m->cap = cap;
    }
    memcpy(m->p + m->len, bytes, len);
    m->len += len;
    return 0;
}

struct repl {
    struct tree *t;
    atomic_bool done;
    uint64_t digest[2];
    long views, mixed, snapshots, refused, bad_snapshots;
};

static void repl_create(struct tree *t, int64_t zxid, const char *path, const char *data)
{
    static const struct tree_prep_cfg cfg = { .ttl_enabled = false };
    static const struct tree_auth auth = { 0 };
    struct tree_req r = { .type = ZK_OP_CREATE };
    r.u.create.path = (struct zk_str){ path, (int32_t)strlen(path) };
    r.u.create.data = (struct zk_str){ data, (int32_t)strlen(data) };
    r.u.create.acl = (struct zk_aclvec){ 1, &world_all };
    r.u.create.ttl = -1;
    struct txn x = { .zxid = zxid, .time_ms = 1000 + zxid };
    assert_int_equal(tree_prep(t, &cfg, &r, &auth, &x), ZK_OK);
    assert_int_equal(tree_apply(t, &x, NULL, NULL, NULL), ZK_OK);
    txn_free(&x);
    tree_prep_reset(t);
}

static struct membuf snapshot_of_letter(char letter, uint64_t *digest)
{
    struct tree *t = tree_new();
    assert_non_null(t);
    char data[2] = { letter, 0 };
    int64_t zxid = 1;
    repl_create(t, zxid++, "/k", data);
    for (int i = 0; i < REPL_NODES; i++) {
        char path[16];
        snprintf(path, sizeof path, "/%c%d", letter + 32, i);
        repl_create(t, zxid++, path, data);
    }
    struct membuf m = { 0 };
    assert_int_equal(tree_snapshot_write(t, membuf_out, &m, NULL), 0);
    *digest = tree_digest(t);
    tree_free(t);
    return m;
}

struct kids_check {
    char first;
    long names, odd;
};

static void kids_letter(void *arg, const char *name, size_t len)
{
    struct kids_check *k = arg;
    if ((len == 1 && name[0] == 'k') || (len == 9 && memcmp(name, "zookeeper", 9) == 0))
        return;
    if (k->names++ == 0)
        k->first = name[0];
    else if (name[0] != k->first)
        k->odd++;
}

static void *repl_reader(void *arg)
{
    struct repl *R = arg;
    rcu_register_thread();
    long views = 0, mixed = 0;
    while (!atomic_load_explicit(&R->done, memory_order_acquire)) {
        struct tree_view v;
        rcu_read_lock();
        if (tree_get(R->t, "/k", 2, &v) != ZK_OK || v.data_len != 1 ||
            (v.data[0] != 'A' && v.data[0] != 'B'))
            mixed++;
        /* the UDP path's prefetch pass, racing the replaces: /k in both
         * trees, /a7 in A only, /b7 in B only (found through hints of
         * either tree, or the table) */
        static const struct tree_path_ref refs[] = { { "/k", 2 }, { "/a7", 3 }, { "/b7", 3 } };
        unsigned found = tree_prefetch_paths(R->t, refs, 3);
        if (found < 1 || found > 3)
            mixed++;
        struct kids_check k = { 0 };
        if (tree_get_children(R->t, "/", 1, &v, kids_letter, &k) != ZK_OK ||
            k.names != REPL_NODES || k.odd != 0 || v.stat.num_children != REPL_NODES + 2)
            mixed++;
        rcu_read_unlock();
        views++;
    }
    rcu_unregister_thread();
    __atomic_fetch_add(&R->views, views, __ATOMIC_RELAXED);
    __atomic_fetch_add(&R->mixed, mixed, __ATOMIC_RELAXED);
    return NULL;
}

static void *repl_snapshotter(void *arg)
{
    struct repl *R = arg;
    rcu_register_thread();
    while (!atomic_load_explicit(&R->done, memory_order_acquire)) {
        struct membuf m = { 0 };
        int rc = tree_snapshot_write(R->t, membuf_out, &m, NULL);
        if (rc == -EAGAIN) {
            R->refused++;
        } else if (rc == 0) {
            struct tree *t = tree_new();
            if (t == NULL || tree_snapshot_load(t, m.p, m.len, NULL) != 0) {
                R->bad_snapshots++;
            } else {
                uint64_t d = tree_digest(t);
                if (d != R->digest[0] && d != R->digest[1])
                    R->bad_snapshots++;
                R->snapshots++;
            }
            tree_free(t);
        } else {
            R->bad_snapshots++;
        }
        free(m.p);
    }
    rcu_unregister_thread();
    return NULL;
}

static void test_replace_under_readers_and_snapshots(void **state)
{
    (void)state;
    static struct repl R;
    memset(&R, 0, sizeof R);
    struct membuf snap[2];
    snap[0] = snapshot_of_letter('A', &R.digest[0]);
    snap[1] = snapshot_of_letter('B', &R.digest[1]);
    R.t = tree_new();
    assert_non_null(R.t);
    assert_int_equal(tree_snapshot_load(R.t, snap[0].p, snap[0].len, NULL), 0);
    pthread_t readers[READERS], writer;
    for (int i = 0; i < READERS; i++)
        assert_int_equal(pthread_create(&readers[i], NULL, repl_reader, &R), 0);
    assert_int_equal(pthread_create(&writer, NULL, repl_snapshotter, &R), 0);
    int64_t start = base_mono_ms();
    int rounds = 0;
    /* at least REPL_ROUNDS_MIN replaces however slow the build (TSan), then
     * as many as REPL_MS_MAX allows */
    for (; rounds < REPL_ROUNDS_MIN ||
           (rounds < REPL_ROUNDS_MAX && base_mono_ms() - start < REPL_MS_MAX);
         rounds++) {
        const struct membuf *m = &snap[(rounds + 1) & 1];
        struct tree *fresh = tree_new();
        assert_non_null(fresh);
        assert_int_equal(tree_snapshot_load(fresh, m->p, m->len, NULL), 0);
        tree_replace(R.t, fresh);
        synchronize_rcu(); /* as seq_ens_release does */
        tree_free(fresh);
    }
    atomic_store_explicit(&R.done, true, memory_order_release);
    for (int i = 0; i < READERS; i++)
        assert_int_equal(pthread_join(readers[i], NULL), 0);
    assert_int_equal(pthread_join(writer, NULL), 0);
    fprintf(stderr, "replaces %d, views %ld, snapshots %ld whole, %ld refused\n", rounds,
            R.views, R.snapshots, R.refused);
    assert_int_equal(R.mixed, 0);
    assert_int_equal(R.bad_snapshots, 0);
    assert_true(rounds >= REPL_ROUNDS_MIN && R.views > 0);
    assert_int_equal(tree_digest(R.t), R.digest[rounds & 1]);
    assert_int_equal(tree_digest_running(R.t), R.digest[rounds & 1]);
    tree_free(R.t);
    free(snap[0].p);
    free(snap[1].p);
}

int main(void)
{
    rcu_register_thread();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_readers_and_watches_under_writes),
        cmocka_unit_test(test_replace_under_readers_and_snapshots),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    rcu_unregister_thread();
    return failed;
}
