/*
 * test_ensemble.c — three (or five) sequencers in ensemble mode, each over
 * its own tree, joined by an in-memory peer transport and driven in one
 * thread by seq_ens_step on a clock the test moves. Checks what ZooKeeper
 * clients see: writes through any server answered by that server in order,
 * failures answered too (error txns), sessions created through a follower
 * and reattached through another server, sync, expiry by the leader only,
 * and a leader's loss: unanswered writes fail (their connections close),
 * a new leader takes over, and the surviving trees agree (digests).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pthread.h>
#include <urcu.h>

#include "replication/replication.h"

#define N_MAX 5
#define TICK_MS 10
#define ELECTION_TICKS 10
#define HEARTBEAT_TICKS 2
#define WALL0 1700000000000LL
#define STEP_LIMIT 20000 /* passes per wait: every loop is bounded */

/* One queued peer frame (deep copy: the sender's buffers die with its ready). */
struct item {
    uint8_t kind; /* 1 msg, 2 forward, 3 touch */
    uint32_t from, to;
    struct raft_msg m;
    struct raft_entry *ents;
    uint8_t **datas;
    struct peer_forward f;
    uint8_t *body;
    struct peer_auth *auth;
    char **strs;
    uint32_t n_strs;
    int64_t *ids;
    uint32_t n_ids;
};

struct node;
struct net {
    struct node *nodes;
    uint32_t n;
    struct item *q;
    size_t n_q, cap_q;
    bool down[N_MAX + 1]; /* server id: crashed, gets and sends nothing */
    bool paused[N_MAX + 1]; /* server id: not stepped; what is sent to it waits */
    bool hold_forwards[N_MAX + 1]; /* server id: its forwards wait in the queue */
    bool refuse_forwards[N_MAX + 1]; /* server id: its forwards are dropped at send */
    /* [from][to]: the link's generation (peer_link_gen); a test bumps it to
     * stand for a link that dropped and came back */
    uint64_t gen[N_MAX + 1][N_MAX + 1];
    uint64_t forwards, touches;
};

struct node {
    uint32_t id;
    struct net *net;
    struct tree *t;
    struct seq *s;
};

struct outs {
    struct seq_out *v[256];
    size_t n;
};

static void outs_free(struct outs *os);

/* A txn log whose fdatasync waits at a gate the test opens: a disk that is
 * slow for as long as the test wants. The log writer's thread blocks in
 * it; everything else passes through to an in-memory storage, used by that
 * thread alone while the log is open. */
struct gated {
    struct storage base;
    struct storage *inner;
    pthread_mutex_t lock;
    pthread_cond_t opened;
    bool open;
    unsigned syncs; /* datasyncs that went through */
};
struct gated_file {
    struct storage_file base;
    struct storage_file *in;
};

static struct gated *gated_of(struct storage *s)
{
    return (struct gated *)s;
}

static struct storage_file *inner_file(struct storage_file *f)
{
    return ((struct gated_file *)f)->in;
}

static int g_open(struct storage *s, const char *path, int flags, struct storage_file **out)
{
    struct gated_file *f = calloc(1, sizeof *f);
    if (!f)
        return -ENOMEM;
    int rc = storage_open(gated_of(s)->inner, path, flags, &f->in);
    if (rc != 0) {
        free(f);
        return rc;
    }
    f->base.st = s;
    *out = &f->base;
    return 0;
}

static int g_pwrite(struct storage_file *f, const void *buf, size_t len, uint64_t off)
{
    return storage_pwrite(inner_file(f), buf, len, off);
}

static int g_pread(struct storage_file *f, void *buf, size_t len, uint64_t off, size_t *got)
{
    return storage_pread(inner_file(f), buf, len, off, got);
}

static int g_datasync(struct storage_file *f)
{
    struct gated *g = gated_of(f->st);
    pthread_mutex_lock(&g->lock);
    while (!g->open)
        pthread_cond_wait(&g->opened, &g->lock);
    g->syncs++;
    pthread_mutex_unlock(&g->lock);
    return storage_datasync(inner_file(f));
}

static int g_truncate(struct storage_file *f, uint64_t size)
{
    return storage_truncate(inner_file(f), size);
}

static int g_preallocate(struct storage_file *f, uint64_t off, uint64_t len)
{
    return storage_preallocate(inner_file(f), off, len);
}

static int g_size(struct storage_file *f, uint64_t *out)
{
    return storage_size(inner_file(f), out);
}

static int g_close(struct storage_file *f)
{
    int rc = storage_close(inner_file(f));
    free(f);
    return rc;
}

static int g_list(struct storage *s, const char *dir, storage_name_fn fn, void *arg)
{
    return storage_list(gated_of(s)->inner, dir, fn, arg);
}

static int g_unlink(struct storage *s, const char *path)
{
    return storage_unlink(gated_of(s)->inner, path);
}

static int g_rename(struct storage *s, const char *from, const char *to)
{
    return storage_rename(gated_of(s)->inner, from, to);
}

static int g_sync_dir(struct storage *s, const char *dir)
{
    return storage_sync_dir(gated_of(s)->inner, dir);
}

static int g_mkdirs(struct storage *s, const char *dir)
{
    return storage_mkdirs(gated_of(s)->inner, dir);
}

static void g_destroy(struct storage *s)
{
    struct gated *g = gated_of(s);
    storage_destroy(g->inner);
    pthread_cond_destroy(&g->opened);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

static const struct storage_ops GATED_OPS = {
    .open = g_open, .pwrite = g_pwrite, .pread = g_pread, .datasync = g_datasync,
    .truncate = g_truncate, .preallocate = g_preallocate, .size = g_size, .close = g_close,
    .list = g_list, .unlink = g_unlink, .rename = g_rename, .sync_dir = g_sync_dir,
    .mkdirs = g_mkdirs, .destroy = g_destroy,
};

static struct gated *gated_new(void)
{
    struct gated *g = calloc(1, sizeof *g);
    assert_non_null(g);
    g->base.ops = &GATED_OPS;
    g->inner = storage_mem_new();
    assert_non_null(g->inner);
    assert_int_equal(pthread_mutex_init(&g->lock, NULL), 0);
    assert_int_equal(pthread_cond_init(&g->opened, NULL), 0);
    g->open = true;
    return g;
}

static void gate_set(struct gated *g, bool open)
{
    pthread_mutex_lock(&g->lock);
    g->open = open;
    pthread_cond_broadcast(&g->opened);
    pthread_mutex_unlock(&g->lock);
}

static unsigned gate_syncs(struct gated *g)
{
    pthread_mutex_lock(&g->lock);
    unsigned n = g->syncs;
    pthread_mutex_unlock(&g->lock);
    return n;
}

static struct net NET;
/* Outputs drained from a server's worker but not yet looked at, in order
 * (event batches are dropped: these tests look at answers). */
static struct outs STASH[N_MAX];
static struct node NODES[N_MAX];
static bool RO_MODE; /* cluster_up: readonlymode.enabled */
/* cluster_up: the servers (by id) whose txn log is on a gated storage;
 * the others keep none */
static bool GATED[N_MAX + 1];
static struct gated *GATE[N_MAX + 1];
static struct txnlog *LOG[N_MAX + 1];
static int64_t NOW = 1000000;

static void item_free(struct item *it)
{
    for (uint32_t i = 0; it->datas && i < it->m.n_entries; i++)
        free(it->datas[i]);
    free(it->datas);
    free(it->ents);
    free(it->body);
    free(it->auth);
    for (uint32_t i = 0; i < it->n_strs; i++)
        free(it->strs[i]);
    free(it->strs);
    free(it->ids);
}

static struct item *push_item(struct net *net, uint8_t kind, uint32_t from, uint32_t to)
{
    if (net->n_q == net->cap_q) {
        net->cap_q = net->cap_q ? 2 * net->cap_q : 64;
        net->q = realloc(net->q, net->cap_q * sizeof *net->q);
        assert_non_null(net->q);
    }
    struct item *it = &net->q[net->n_q++];
    memset(it, 0, sizeof *it);
    it->kind = kind;
    it->from = from;
    it->to = to;
    return it;
}

static uint8_t *dup_bytes(const void *p, size_t n)
{
    uint8_t *d = malloc(n ? n : 1);
    assert_non_null(d);
    if (n)
        memcpy(d, p, n);
    return d;
}

static int t_send_msg(void *arg, const struct raft_msg *m)
{
    struct node *nd = arg;
    if (nd->net->down[nd->id] || nd->net->down[m->to])
        return -1;
    struct item *it = push_item(nd->net, 1, nd->id, m->to);
    it->m = *m;
    if (m->n_entries) {
        it->ents = calloc(m->n_entries, sizeof *it->ents);
        it->datas = calloc(m->n_entries, sizeof *it->datas);
        for (uint32_t i = 0; i < m->n_entries; i++) {
            it->ents[i] = m->entries[i];
            it->datas[i] = dup_bytes(m->entries[i].data, m->entries[i].len);
            it->ents[i].data = it->datas[i];
        }
        it->m.entries = it->ents;
    }
    return 0;
}

static int t_send_forward(void *arg, uint32_t to, const struct peer_forward *f)
{
    struct node *nd = arg;
    if (nd->net->down[nd->id] || nd->net->down[to] || nd->net->refuse_forwards[nd->id])
        return -1;
    struct item *it = push_item(nd->net, 2, nd->id, to);
    it->f = *f;
    it->body = dup_bytes(f->body, f->body_len);
    it->f.body = it->body;
    it->auth = calloc(f->n_auth ? f->n_auth : 1, sizeof *it->auth);
    it->strs = calloc(2 * f->n_auth + 1, sizeof *it->strs);
    for (uint32_t i = 0; i < f->n_auth; i++) {
        it->strs[it->n_strs++] = (char *)dup_bytes(f->auth[i].scheme, f->auth[i].scheme_len);
        it->strs[it->n_strs++] = (char *)dup_bytes(f->auth[i].id, f->auth[i].id_len);
        it->auth[i] = (struct peer_auth){ it->strs[it->n_strs - 2], f->auth[i].scheme_len,
                                          it->strs[it->n_strs - 1], f->auth[i].id_len };
    }
    it->f.auth = it->auth;
    nd->net->forwards++;
    return 0;
}

static int t_send_touch(void *arg, uint32_t to, const int64_t *ids, uint32_t n)
{
    struct node *nd = arg;
    if (nd->net->down[nd->id] || nd->net->down[to])
        return -1;
    struct item *it = push_item(nd->net, 3, nd->id, to);
    it->ids = (int64_t *)dup_bytes(ids, n * sizeof *ids);
    it->n_ids = n;
    nd->net->touches++;
    return 0;
}

static uint64_t t_link_gen(void *arg, uint32_t to)
{
    struct node *nd = arg;
    return nd->net->down[to] ? 0 : nd->net->gen[nd->id][to];
}

/* A link from `from` to `to` that dropped and came back: the forwards
 * queued on it are lost, and a new generation starts. */
static void link_bounce(uint32_t from, uint32_t to)
{
    size_t keep = 0;
    for (size_t i = 0; i < NET.n_q; i++) {
        if (NET.q[i].from == from && NET.q[i].to == to)
            item_free(&NET.q[i]);
        else
            NET.q[keep++] = NET.q[i];
    }
    NET.n_q = keep;
    NET.gen[from][to]++;
}

static void t_flush(void *arg)
{
    (void)arg;
}

/* Delivers, in order, what was queued for this node before the call. */
static size_t t_drain(void *arg, struct seq *s)
{
    struct node *nd = arg;
    struct net *net = nd->net;
    size_t delivered = 0, keep = 0, end = net->n_q;
    struct item *mine = calloc(end ? end : 1, sizeof *mine);
    size_t n_mine = 0;
    for (size_t i = 0; i < end; i++) {
        bool held = net->q[i].kind == 2 && net->hold_forwards[net->q[i].from];
        if (net->q[i].to == nd->id && !held)
            mine[n_mine++] = net->q[i];
        else
            net->q[keep++] = net->q[i];
    }
    net->n_q = keep; /* nothing is queued while we sort: one thread */
    for (size_t i = 0; i < n_mine; i++) {
        struct item *it = &mine[i];
        if (!net->down[nd->id] && !net->down[it->from]) {
            if (it->kind == 1)
                seq_peer_msg(s, &it->m);
            else if (it->kind == 2)
                seq_peer_forward(s, it->from, &it->f);
            else
                seq_peer_touch(s, it->from, it->ids, it->n_ids);
            delivered++;
        }
        item_free(it);
    }
    free(mine);
    return delivered;
}

/* Each server's snapshot store (what durability keeps on disk): the newest
 * snapshot's zxid and bytes. Empty until a test takes one, so the log is
 * compacted only in the tests that want it. */
struct store {
    int64_t zxid;
    uint8_t *p;
    size_t len, cap;
    int persists;
};
static struct store STORE[N_MAX];

static int64_t s_newest(void *arg)
{
    return STORE[((struct node *)arg)->id - 1].zxid;
}

static int s_read(void *arg, int64_t zxid, uint8_t **data, size_t *len)
{
    struct store *st = &STORE[((struct node *)arg)->id - 1];
    if (st->zxid == 0 || zxid != st->zxid)
        return -ENOENT;
    *data = dup_bytes(st->p, st->len);
    *len = st->len;
    return 0;
}

static void store_set(struct store *st, int64_t zxid, const uint8_t *p, size_t len)
{
    free(st->p);
    st->p = dup_bytes(p, len);
    st->len = st->cap = len;
    st->zxid = zxid;
}

static bool SNAP_HELD[N_MAX];

static int s_persist(void *arg, int64_t zxid, const uint8_t *data, size_t len,
                     const struct raft_config *conf)
{
    (void)conf;
    struct store *st = &STORE[((struct node *)arg)->id - 1];
    store_set(st, zxid, data, len);
    st->persists++;
    SNAP_HELD[((struct node *)arg)->id - 1] = false;
    return 0;
}

/* want: the snapshot thread is asked for one (the test takes it, outside
 * the driver's pass); hold: snapshots of the tree are not taken */
static bool SNAP_WANTED[N_MAX];

static void s_want(void *arg)
{
    SNAP_WANTED[((struct node *)arg)->id - 1] = true;
}

static void s_hold(void *arg)
{
    SNAP_HELD[((struct node *)arg)->id - 1] = true;
}

static void s_hold_end(void *arg)
{
    SNAP_HELD[((struct node *)arg)->id - 1] = false;
}

static const struct seq_snap_ops S_OPS = { .newest = s_newest, .read = s_read,
                                           .persist = s_persist, .want = s_want,
                                           .hold = s_hold, .hold_end = s_hold_end };

static int store_out(void *arg, const void *bytes, size_t len)
{
    struct store *st = arg;
    if (base_grow(&st->p, &st->cap, st->len + len, 1) != 0)
        return -ENOMEM;
    memcpy(st->p + st->len, bytes, len);
    st->len += len;
    return 0;
}

/* What the snapshot thread does on server id (outside any read section). */
static int64_t take_snapshot(uint32_t id)
{
    struct store *st = &STORE[id - 1];
    free(st->p);
    *st = (struct store){ .persists = st->persists };
    struct tree_snap_info info;
    assert_int_equal(tree_snapshot_write(NODES[id - 1].t, store_out, st, &info), 0);
    st->zxid = info.zxid_start;
    return st->zxid;
}

static const struct seq_peer_ops T_OPS = { .send_msg = t_send_msg, .send_forward = t_send_forward,
                                           .link_gen = t_link_gen,
                                           .send_touch = t_send_touch, .flush = t_flush,
                                           .drain = t_drain };

static int64_t clock_of_test(bool wall)
{
    return wall ? WALL0 + NOW : NOW;
}

static void cluster_up(uint32_t n)
{
    memset(&NET, 0, sizeof NET);
    NET.nodes = NODES;
    NET.n = n;
    for (uint32_t i = 0; i <= N_MAX; i++)
        for (uint32_t j = 0; j <= N_MAX; j++)
            NET.gen[i][j] = 1;
    struct raft_member members[N_MAX];
    for (uint32_t i = 0; i < n; i++)
        members[i] = (struct raft_member){ .id = i + 1, .voter = true };
    for (uint32_t i = 0; i < n; i++) {
        struct node *nd = &NODES[i];
        nd->id = i + 1;
        nd->net = &NET;
        nd->t = tree_new();
        assert_non_null(nd->t);
        struct seq_ensemble_cfg ecfg = {
            .raft = { .self_id = i + 1, .members = members, .n_members = n,
                      .election_ticks = ELECTION_TICKS, .heartbeat_ticks = HEARTBEAT_TICKS,
                      .seed = 100 + i },
            .raft_tick_ms = TICK_MS,
            .peer = &T_OPS,
            .peer_arg = nd,
            .snap = &S_OPS,
            .snap_arg = nd,
            .commit_log_count = 5,
            .read_only_mode = RO_MODE,
        };
        struct seq_cfg cfg = { .min_session_timeout_ms = 400, .max_session_timeout_ms = 40000,
                               .container_check_ms = 60000, .ttl_enabled = true,
                               .tick_ms = 50, .clock_ms = clock_of_test,
                               .passwd_key_set = true, .ensemble = &ecfg };
        if (GATED[i + 1]) {
            GATE[i + 1] = gated_new();
            struct txnlog_opts lo = { .db_id = 1, .prealloc_bytes = 4096 };
            assert_int_equal(txnlog_open(&GATE[i + 1]->base, "log", &lo, &LOG[i + 1]), 0);
            cfg.log = LOG[i + 1];
        }
        memset(cfg.passwd_key, 0x5a, sizeof cfg.passwd_key); /* one key: see README */
        nd->s = seq_new(nd->t, &cfg, 1);
        assert_non_null(nd->s);
    }
}

static void cluster_down(void)
{
    for (uint32_t i = 0; i < N_MAX; i++) {
        outs_free(&STASH[i]);
        free(STORE[i].p);
        STORE[i] = (struct store){ 0 };
        SNAP_WANTED[i] = SNAP_HELD[i] = false;
    }
    for (uint32_t i = 1; i <= N_MAX; i++)
        if (GATE[i])
            gate_set(GATE[i], true); /* the log writer finishes what it holds */
    for (uint32_t i = 0; i < NET.n; i++) {
        seq_free(NODES[i].s);
        NODES[i].s = NULL;
    }
    for (uint32_t i = 1; i <= N_MAX; i++) {
        if (LOG[i])
            txnlog_close(LOG[i]);
        if (GATE[i])
            storage_destroy(&GATE[i]->base);
        LOG[i] = NULL;
        GATE[i] = NULL;
        GATED[i] = false;
    }
    rcu_barrier();
    for (uint32_t i = 0; i < NET.n; i++)
        tree_free(NODES[i].t);
    RO_MODE = false;
    for (size_t i = 0; i < NET.n_q; i++)
        item_free(&NET.q[i]);
    free(NET.q);
    memset(&NET, 0, sizeof NET);
}

static bool gate_is_open(struct gated *g)
{
    pthread_mutex_lock(&g->lock);
    bool open = g->open;
    pthread_mutex_unlock(&g->lock);
    return open;
}

static struct seq_ens_status status_of(uint32_t id);

/* A server whose txn log is gated but open: its log writer's thread runs
 * in real time while the clock here is the test's, so the pass waits for
 * it (a fast disk), lest elections time out while it writes. */
static void wait_log_writer(uint32_t id)
{
    if (!GATE[id] || !gate_is_open(GATE[id]))
        return;
    for (int k = 0; k < 100000; k++) {
        struct seq_ens_status st = status_of(id);
        if (st.raft.durable_zxid == st.raft.last_zxid)
            return;
        struct timespec pause = { .tv_sec = 0, .tv_nsec = 20000 };
        nanosleep(&pause, NULL);
        (void)seq_ens_step(NODES[id - 1].s, NOW, WALL0 + NOW); /* takes what it synced */
    }
    fail_msg("server %u: its log writer never caught up", id);
}

/* One pass of every live server, then the clock moves one millisecond. */
static void step_all(void)
{
    rcu_read_lock();
    for (uint32_t i = 0; i < NET.n; i++) {
        if (!NET.down[i + 1] && !NET.paused[i + 1]) {
            (void)seq_ens_step(NODES[i].s, NOW, WALL0 + NOW);
            wait_log_writer(i + 1);
        }
    }
    rcu_read_unlock();
    for (uint32_t i = 0; i < NET.n; i++)
        seq_ens_release(NODES[i].s); /* old trees a snapshot replaced */
    NOW += 1;
}

static struct seq_ens_status status_of(uint32_t id)
{
    struct seq_ens_status st;
    assert_true(seq_ens_status(NODES[id - 1].s, &st));
    return st;
}

/* The one live leader all live servers agree on, after stepping. */
static uint32_t wait_leader(void)
{
    for (int k = 0; k < STEP_LIMIT; k++) {
        step_all();
        uint32_t leader = 0;
        bool agree = true;
        for (uint32_t i = 1; i <= NET.n; i++) {
            if (NET.down[i])
                continue;
            struct seq_ens_status st = status_of(i);
            if (st.raft.role == RAFT_LEADER)
                leader = i;
            if (leader && st.raft.leader_id != leader)
                agree = false;
        }
        if (leader) {
            for (uint32_t i = 1; i <= NET.n; i++)
                if (!NET.down[i] && status_of(i).raft.leader_id != leader)
                    agree = false;
            /* and it has applied its no-op: it takes writes */
            struct seq_ens_status st = status_of(leader);
            if (agree && st.raft.applied_zxid == st.raft.last_zxid && st.raft.commit_zxid > 0)
                return leader;
        }
    }
    fail_msg("no leader after %d passes", STEP_LIMIT);
    return 0;
}

static void collect(void *arg, struct seq_out *o)
{
    struct outs *os = arg;
    assert_true(os->n < 256);
    os->v[os->n++] = o;
}

static void outs_free(struct outs *os)
{
    for (size_t i = 0; i < os->n; i++)
        seq_out_free(os->v[i]);
    os->n = 0;
}


static void stash_drain(uint32_t id)
{
    struct outs os = { 0 };
    seq_worker_drain(NODES[id - 1].s, 0, collect, &os);
    for (size_t i = 0; i < os.n; i++) {
        if (os.v[i]->kind == SEQ_OUT_EVENTS) {
            seq_out_free(os.v[i]);
            continue;
        }
        assert_true(STASH[id - 1].n < 256);
        STASH[id - 1].v[STASH[id - 1].n++] = os.v[i];
    }
}

static struct seq_out *stash_take(uint32_t id, int32_t kind, uint64_t conn)
{
    struct outs *st = &STASH[id - 1];
    for (size_t i = 0; i < st->n; i++) {
        if (st->v[i]->kind == kind && st->v[i]->conn == conn) {
            struct seq_out *o = st->v[i];
            memmove(st->v + i, st->v + i + 1, (st->n - i - 1) * sizeof *st->v);
            st->n--;
            return o;
        }
    }
    return NULL;
}

/* Steps until server id's worker has an output of kind for conn (the
 * oldest such); returns it (the caller frees it). */
static struct seq_out *wait_out(uint32_t id, int32_t kind, uint64_t conn)
{
    for (int k = 0; k < STEP_LIMIT; k++) {
        stash_drain(id);
        struct seq_out *hit = stash_take(id, kind, conn);
        if (hit)
            return hit;
        step_all();
    }
    fail_msg("server %u: no output of kind %d for conn %llu", id, kind, (unsigned long long)conn);
    return NULL;
}

/* A ConnectRequest to server id on conn (worker 0, 30 s): a new session
 * (sid 0) or a reattach with the password pw (NULL: 16 zero bytes),
 * having seen last_zxid; read_only_ok: the client allows read-only. */
static void submit_connect(uint32_t id, uint64_t conn, int64_t sid, const uint8_t *pw,
                           int64_t last_zxid, bool read_only_ok)
{
    struct seq_req *r = seq_req_new(SEQ_REQ_CONNECT, NULL, 0, NULL, 0);
    assert_non_null(r);
    r->worker = 0;
    r->conn = conn;
    r->session_id = sid;
    r->timeout_ms = 30000;
    r->last_zxid_seen = last_zxid;
    r->read_only_ok = read_only_ok;
    if (pw)
        memcpy(r->passwd, pw, 16);
    r->passwd_len = 16;
    seq_submit(NODES[id - 1].s, r);
}

static int64_t connect_via(uint32_t id, uint64_t conn, int32_t timeout_ms, uint8_t pw[16])
{
    struct seq_req *r = seq_req_new(SEQ_REQ_CONNECT, NULL, 0, NULL, 0);
    r->worker = 0;
    r->conn = conn;
    r->timeout_ms = timeout_ms;
    seq_submit(NODES[id - 1].s, r);
    struct seq_out *o = wait_out(id, SEQ_OUT_CONNECT, conn);
    assert_true(o->timeout_ms > 0);
    int64_t sid = o->session_id;
    if (pw)
        memcpy(pw, o->passwd, 16);
    seq_out_free(o);
    return sid;
}

static void submit_write(uint32_t id, uint64_t conn, int64_t session, int32_t xid, int32_t op,
                         const struct zk_wbuf *body)
{
    struct seq_req *r = seq_req_new(SEQ_REQ_WRITE, body ? body->p : NULL, body ? body->len : 0,
                                    NULL, 0);
    r->worker = 0;
    r->conn = conn;
    r->session_id = session;
    r->xid = xid;
    r->op = op;
    snprintf(r->peer_ip, sizeof r->peer_ip, "127.0.0.1");
    seq_submit(NODES[id - 1].s, r);
}

static void create_body(struct zk_wbuf *b, const char *path, int32_t flags)
{
    static struct zk_acl open_acl = { .perms = ZK_PERM_ALL,
                                      .id = { { "world", 5 }, { "anyone", 6 } } };
    zk_wbuf_init(b);
    struct zk_create_req q = { .path = zk_str_c(path), .data = zk_str_c("v"),
                               .acl = { .count = 1, .items = &open_acl }, .flags = flags };
    zk_put_create_req(b, &q, false);
}

static struct zk_reply_header reply_header(const struct seq_out *o, struct base_rd *r)
{
    assert_non_null(o->frame);
    base_rd_init(r, o->frame, o->frame_len);
    int32_t len;
    assert_true(zk_get_i32(r, &len));
    struct zk_reply_header h;
    assert_true(zk_get_reply_header(r, &h));
    return h;
}

/* A create through server id; returns the reply's error. */
static int32_t create_via(uint32_t id, uint64_t conn, int64_t session, int32_t xid,
                          const char *path, int32_t flags)
{
    struct zk_wbuf b;
    create_body(&b, path, flags);
    submit_write(id, conn, session, xid, ZK_OP_CREATE, &b);
    zk_wbuf_free(&b);
    struct seq_out *o = wait_out(id, SEQ_OUT_REPLY, conn);
    struct base_rd r;
    struct zk_reply_header h = reply_header(o, &r);
    assert_int_equal(h.xid, xid);
    assert_true(o->pending_done);
    seq_out_free(o);
    return h.err;
}

static bool exists_on(uint32_t id, const char *path)
{
    rcu_read_lock();
    struct tree_view v;
    bool yes = tree_get(NODES[id - 1].t, path, strlen(path), &v) == ZK_OK;
    rcu_read_unlock();
    return yes;
}

/* Steps until every live server has applied as far as the leader. */
static void settle(uint32_t leader)
{
    for (int k = 0; k < STEP_LIMIT; k++) {
        step_all();
        int64_t want = tree_last_zxid(NODES[leader - 1].t);
        bool all = true;
        for (uint32_t i = 1; i <= NET.n; i++)
            if (!NET.down[i] && tree_last_zxid(NODES[i - 1].t) != want)
                all = false;
        if (all && status_of(leader).raft.commit_zxid == want)
            return;
    }
    fail_msg("servers did not converge");
}

static void assert_live_trees_agree(void)
{
    uint64_t d = 0;
    int64_t z = -1;
    for (uint32_t i = 1; i <= NET.n; i++) {
        if (NET.down[i])
            continue;
        rcu_read_lock();
        uint64_t di = tree_digest(NODES[i - 1].t);
        int64_t zi = tree_last_zxid(NODES[i - 1].t);
        rcu_read_unlock();
        assert_true(tree_digest_running(NODES[i - 1].t) == di);
        if (z < 0) {
            d = di;
            z = zi;
        }
        assert_true(di == d);
        assert_true(zi == z);
    }
}

static uint32_t a_follower(uint32_t leader, uint32_t skip)
{
    for (uint32_t i = 1; i <= NET.n; i++)
        if (i != leader && i != skip && !NET.down[i])
            return i;
    fail_msg("no follower");
    return 0;
}

static int setup(void **state)
{
    (void)state;
    rcu_register_thread();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    rcu_unregister_thread();
    return 0;
}

/* ---- tests ----------------------------------------------------------------- */

/* A session made through a follower carries that follower's id in its top
 * byte; writes through the follower are answered by it, in order, failures
 * included; every tree ends the same; the leader's worker hears nothing. */
static void test_writes_through_a_follower(void **state)
{
    (void)state;
    cluster_up(3);
    uint32_t leader = wait_leader();
    uint32_t f = a_follower(leader, 0);
    int64_t sid = connect_via(f, 11, 10000, NULL);
    assert_int_equal((uint64_t)sid >> 56, f);
    assert_int_equal(create_via(f, 11, sid, 1, "/a", ZK_PERSISTENT), ZK_OK);
    int64_t z1 = tree_last_zxid(NODES[f - 1].t);
    assert_int_equal(create_via(f, 11, sid, 2, "/a", ZK_PERSISTENT), ZK_ENODEEXISTS);
    /* the failure is a txn too: it took the next zxid on the follower */
    assert_true(tree_last_zxid(NODES[f - 1].t) == z1 + 1);
    /* a burst of pipelined writes comes back in request order */
    for (int32_t x = 3; x < 13; x++) {
        struct zk_wbuf b;
        char path[16];
        snprintf(path, sizeof path, "/p%d", x);
        create_body(&b, path, x == 7 ? ZK_EPHEMERAL : ZK_PERSISTENT);
        submit_write(f, 11, sid, x, ZK_OP_CREATE, &b);
        zk_wbuf_free(&b);
    }
    for (int32_t x = 3; x < 13; x++) {
        struct seq_out *o = wait_out(f, SEQ_OUT_REPLY, 11);
        struct base_rd r;
        struct zk_reply_header h = reply_header(o, &r);
        assert_int_equal(h.xid, x);
        assert_int_equal(h.err, ZK_OK);
        seq_out_free(o);
    }
    settle(leader);
    for (uint32_t i = 1; i <= 3; i++) {
        assert_true(exists_on(i, "/a"));
        assert_true(exists_on(i, "/p12"));
    }
    assert_live_trees_agree();
    struct outs os = { 0 };
    seq_worker_drain(NODES[leader - 1].s, 0, collect, &os);
    for (size_t i = 0; i < os.n; i++)
        assert_int_equal(os.v[i]->kind, SEQ_OUT_EVENTS); /* no replies, no connects */
    outs_free(&os);
    assert_true(NET.forwards >= 13);
    cluster_down();
}

/* A client that reattaches through another server keeps its session and
 * its ephemerals; a wrong password is refused and changes nothing. */
static void test_session_moves_between_servers(void **state)
{
    (void)state;
    cluster_up(3);
    uint32_t leader = wait_leader();
    uint32_t f = a_follower(leader, 0);
    uint8_t pw[16];
    int64_t sid = connect_via(f, 21, 10000, pw);
    assert_int_equal(create_via(f, 21, sid, 1, "/eph", ZK_EPHEMERAL), ZK_OK);
    settle(leader);
    /* reattach through the leader with the right password */
    struct seq_req *r = seq_req_new(SEQ_REQ_CONNECT, NULL, 0, NULL, 0);
    r->worker = 0;
    r->conn = 22;
    r->session_id = sid;
    r->timeout_ms = 10000;
    memcpy(r->passwd, pw, 16);
    r->passwd_len = 16;
    seq_submit(NODES[leader - 1].s, r);
    struct seq_out *o = wait_out(leader, SEQ_OUT_CONNECT, 22);
    assert_true(o->session_id == sid);
    assert_int_equal(o->timeout_ms, 10000);
    seq_out_free(o);
    /* and writes through it as that session */
    assert_int_equal(create_via(leader, 22, sid, 2, "/eph2", ZK_EPHEMERAL), ZK_OK);
    settle(leader);
    rcu_read_lock();
    struct tree_view v;
    for (uint32_t i = 1; i <= 3; i++) {
        assert_int_equal(tree_get(NODES[i - 1].t, "/eph2", 5, &v), ZK_OK);
        assert_true(v.stat.ephemeral_owner == sid);
    }
    rcu_read_unlock();
    /* a wrong password through the third server: timeout 0, nothing changes */
    uint32_t g = a_follower(leader, f);
    r = seq_req_new(SEQ_REQ_CONNECT, NULL, 0, NULL, 0);
    r->worker = 0;
    r->conn = 23;
    r->session_id = sid;
    r->timeout_ms = 10000;
    memcpy(r->passwd, pw, 16);
    r->passwd[0] ^= 1;
    r->passwd_len = 16;
    seq_submit(NODES[g - 1].s, r);
    o = wait_out(g, SEQ_OUT_CONNECT, 23);
    assert_int_equal(o->timeout_ms, 0);
    seq_out_free(o);
    assert_true(exists_on(g, "/eph"));
    /* closeSession through the leader removes the ephemerals everywhere */
    submit_write(leader, 22, sid, 3, ZK_OP_CLOSESESSION, NULL);
    o = wait_out(leader, SEQ_OUT_CLOSE, 22);
    seq_out_free(o);
    settle(leader);
    for (uint32_t i = 1; i <= 3; i++) {
        assert_false(exists_on(i, "/eph"));
        assert_false(exists_on(i, "/eph2"));
    }
    assert_live_trees_agree();
    cluster_down();
}

/* sync through a follower answers after the follower has applied what the
 * leader had committed, and after the session's earlier write. */
static void test_sync_through_a_follower(void **state)
{
    (void)state;
    cluster_up(3);
    uint32_t leader = wait_leader();
    uint32_t f = a_follower(leader, 0);
    int64_t sid = connect_via(f, 31, 10000, NULL);
    int64_t lsid = connect_via(leader, 32, 10000, NULL);
    assert_int_equal(create_via(leader, 32, lsid, 1, "/from-leader", ZK_PERSISTENT), ZK_OK);
    struct zk_wbuf b;
    create_body(&b, "/mine", ZK_PERSISTENT);
    submit_write(f, 31, sid, 1, ZK_OP_CREATE, &b);
    zk_wbuf_free(&b);
    zk_wbuf_init(&b);
    struct zk_path_req q = { .path = zk_str_c("/") };
    zk_put_path_req(&b, &q);
    submit_write(f, 31, sid, 2, ZK_OP_SYNC, &b);
    zk_wbuf_free(&b);
    struct seq_out *o = wait_out(f, SEQ_OUT_REPLY, 31);
    struct base_rd r;
    assert_int_equal(reply_header(o, &r).xid, 1); /* the write first */
    seq_out_free(o);
    o = wait_out(f, SEQ_OUT_REPLY, 31);
    struct zk_reply_header h = reply_header(o, &r);
    assert_int_equal(h.xid, 2);
    assert_int_equal(h.err, ZK_OK);
    struct zk_str path;
    assert_true(zk_get_str(&r, &path));
    assert_int_equal(path.len, 1);
    seq_out_free(o);
    assert_true(exists_on(f, "/from-leader"));
    assert_true(exists_on(f, "/mine"));
    cluster_down();
}

/* Only the leader expires sessions: a session whose client pings a
 * follower is touched and lives; one that went quiet expires, and its
 * ephemerals go on every server. */
static void test_leader_expires_followers_touch(void **state)
{
    (void)state;
    cluster_up(3);
    uint32_t leader = wait_leader();
    uint32_t f = a_follower(leader, 0);
    int64_t kept = connect_via(f, 41, 500, NULL);
    int64_t gone = connect_via(f, 42, 500, NULL);
    assert_int_equal(create_via(f, 41, kept, 1, "/kept", ZK_EPHEMERAL), ZK_OK);
    assert_int_equal(create_via(f, 42, gone, 1, "/gone", ZK_EPHEMERAL), ZK_OK);
    /* the second client goes away */
    struct seq_req *d = seq_req_new(SEQ_REQ_DISCONNECT, NULL, 0, NULL, 0);
    d->worker = 0;
    d->conn = 42;
    d->session_id = gone;
    seq_submit(NODES[f - 1].s, d);
    for (int k = 0; k < 3000; k++) { /* 3 s: six timeouts */
        if (k % 100 == 0) {
            /* the first client pings: its worker moves last_seen_ms */
            rcu_read_lock();
            struct tree_session *ts = tree_session_find(NODES[f - 1].t, kept);
            assert_non_null(ts);
            atomic_store_explicit(&ts->last_seen_ms, NOW, memory_order_relaxed);
            rcu_read_unlock();
        }
        step_all();
    }
    settle(leader);
    for (uint32_t i = 1; i <= 3; i++) {
        assert_true(exists_on(i, "/kept"));
        assert_false(exists_on(i, "/gone"));
    }
    assert_true(NET.touches > 0);
    assert_live_trees_agree();
    cluster_down();
}

/* The leader dies with writes in flight: the follower's unanswered writes
 * fail (their connections close), a new leader is elected, the client's
 * session still works through the survivors, and their trees agree. */
static void test_leader_loss_fails_pending_and_moves_on(void **state)
{
    (void)state;
    cluster_up(3);
    uint32_t leader = wait_leader();
    uint32_t f = a_follower(leader, 0);
    int64_t sid = connect_via(f, 51, 30000, NULL);
    assert_int_equal(create_via(f, 51, sid, 1, "/before", ZK_PERSISTENT), ZK_OK);
    settle(leader);
    NET.down[leader] = true; /* crash: nothing in or out */
    struct zk_wbuf b;
    create_body(&b, "/during", ZK_PERSISTENT);
    submit_write(f, 51, sid, 2, ZK_OP_CREATE, &b);
    zk_wbuf_free(&b);
    struct seq_out *o = wait_out(f, SEQ_OUT_CLOSE, 51);
    seq_out_free(o);
    uint32_t next = wait_leader();
    assert_true(next != leader);
    assert_int_equal(create_via(f, 52, sid, 3, "/after", ZK_PERSISTENT), ZK_OK);
    settle(next);
    for (uint32_t i = 1; i <= 3; i++) {
        if (i == leader)
            continue;
        assert_true(exists_on(i, "/before"));
        assert_true(exists_on(i, "/after"));
    }
    assert_live_trees_agree();
    assert_true(status_of(f).pending_failed >= 1);
    cluster_down();
}

/* Five servers, writes through every one of them at once. */
static void test_five_servers_all_take_writes(void **state)
{
    (void)state;
    cluster_up(5);
    uint32_t leader = wait_leader();
    int64_t sids[6];
    for (uint32_t i = 1; i <= 5; i++)
        sids[i] = connect_via(i, 60 + i, 10000, NULL);
    for (int32_t x = 1; x <= 5; x++) {
        for (uint32_t i = 1; i <= 5; i++) {
            struct zk_wbuf b;
            char path[32];
            snprintf(path, sizeof path, "/s%u-%d", i, x);
            create_body(&b, path, ZK_PERSISTENT);
            submit_write(i, 60 + i, sids[i], x, ZK_OP_CREATE, &b);
            zk_wbuf_free(&b);
        }
    }
    for (uint32_t i = 1; i <= 5; i++) {
        for (int32_t x = 1; x <= 5; x++) {
            struct seq_out *o = wait_out(i, SEQ_OUT_REPLY, 60 + i);
            struct base_rd r;
            struct zk_reply_header h = reply_header(o, &r);
            assert_int_equal(h.xid, x);
            assert_int_equal(h.err, ZK_OK);
            seq_out_free(o);
        }
    }
    settle(leader);
    assert_true(exists_on(1, "/s5-5"));
    assert_live_trees_agree();
    cluster_down();
}

/* A follower down while the leader compacted its log past it comes back
 * through a snapshot: it persists it (before acknowledging), replaces its
 * tree, closes its clients' connections (their watches saw the old tree)
 * and keeps their sessions, and then follows by entries again. */
static void test_follower_behind_compacted_log_gets_snapshot(void **state)
{
    (void)state;
    cluster_up(3);
    uint32_t leader = wait_leader();
    uint32_t f = a_follower(leader, 0);
    uint8_t pw[16];
    int64_t fsid = connect_via(f, 71, 30000, pw);
    int64_t sid = connect_via(leader, 72, 30000, NULL);
    assert_int_equal(create_via(leader, 72, sid, 1, "/before", ZK_PERSISTENT), ZK_OK);
    settle(leader);
    NET.down[f] = true;
    int32_t xid = 2;
    char path[16];
    for (int i = 0; i < 40; i++) {
        snprintf(path, sizeof path, "/n%d", i);
        assert_int_equal(create_via(leader, 72, sid, xid++, path, ZK_PERSISTENT), ZK_OK);
    }
    int64_t snap = take_snapshot(leader);
    for (int i = 40; i < 50; i++) {
        snprintf(path, sizeof path, "/n%d", i);
        assert_int_equal(create_via(leader, 72, sid, xid++, path, ZK_PERSISTENT), ZK_OK);
    }
    step_all();
    assert_true(status_of(leader).raft.snap_zxid == snap); /* compacted */
    assert_int_equal(status_of(leader).snapshots_sent, 0);

    NET.down[f] = false;
    settle(leader);
    assert_int_equal(STORE[f - 1].persists, 1);
    assert_true(STORE[f - 1].zxid == snap);
    assert_int_equal(status_of(f).snapshots_installed, 1);
    assert_true(status_of(leader).snapshots_sent >= 1);
    assert_true(exists_on(f, "/before") && exists_on(f, "/n39") && exists_on(f, "/n49"));
    assert_live_trees_agree();
    struct seq_out *o = wait_out(f, SEQ_OUT_CLOSE, 71);
    assert_true(o->session_id == fsid);
    seq_out_free(o);

    /* the session lives on the replaced tree: it reattaches there */
    submit_connect(f, 73, fsid, pw, 0, false);
    o = wait_out(f, SEQ_OUT_CONNECT, 73);
    assert_true(o->session_id == fsid && o->timeout_ms > 0);
    seq_out_free(o);
    /* and it follows by entries again: a write through it lands everywhere */
    assert_int_equal(create_via(f, 73, fsid, 1, "/after", ZK_PERSISTENT), ZK_OK);
    settle(leader);
    assert_true(exists_on(leader, "/after"));
    assert_live_trees_agree();
    assert_int_equal(status_of(f).snapshots_installed, 1);
    cluster_down();
}


/* A follower's tree goes wrong without its log doing so (a bug in apply, or
 * memory or a disk fault no checksum caught): here a setData of /before
 * applied to it alone, at a zxid it already passed. The leader's next
 * APPEND carries its digest; the follower finds its own differs, stops
 * serving, asks for the leader's snapshot (the leader has none yet and
 * takes one), rebuilds from it and applies the log after it again. */
static void test_diverged_follower_resyncs_from_leaders_snapshot(void **state)
{
    (void)state;
    cluster_up(3);
    uint32_t leader = wait_leader();
    uint32_t f = a_follower(leader, 0);
    int64_t sid = connect_via(leader, 81, 30000, NULL);
    int64_t fsid = connect_via(f, 82, 30000, NULL);
    assert_int_equal(create_via(leader, 81, sid, 1, "/before", ZK_PERSISTENT), ZK_OK);
    assert_int_equal(create_via(leader, 81, sid, 2, "/b2", ZK_PERSISTENT), ZK_OK);
    settle(leader);
    assert_live_trees_agree();
    assert_true(status_of(f).digest_checks > 0); /* it compares all along */
    assert_int_equal(status_of(f).digest_mismatches, 0);

    struct txn_op op = { .type = TXN_SETDATA, .path = "/before", .data = (uint8_t *)"bad",
                         .data_len = 3, .version = 1 };
    struct txn x = { .zxid = tree_last_zxid(NODES[f - 1].t), .session_id = sid, .cxid = 99,
                     .time_ms = WALL0, .type = TXN_SETDATA, .nops = 1, .ops = &op };
    assert_int_equal(tree_apply(NODES[f - 1].t, &x, NULL, NULL, NULL), ZK_OK);
    assert_true(tree_digest_running(NODES[f - 1].t) !=
                tree_digest_running(NODES[leader - 1].t));

    /* a write, so the leader's digest names a zxid the follower has yet to
     * apply (the check that waits), and heartbeats */
    assert_int_equal(create_via(leader, 81, sid, 3, "/n1", ZK_PERSISTENT), ZK_OK);
    bool resynced = false;
    for (int k = 0; k < STEP_LIMIT && !resynced; k++) {
        step_all();
        for (uint32_t i = 0; i < 3; i++) {
            if (SNAP_WANTED[i]) {
                assert_false(SNAP_HELD[i]);
                SNAP_WANTED[i] = false;
                (void)take_snapshot(i + 1);
            }
        }
        resynced = status_of(f).snapshots_installed == 1 && !status_of(f).resyncing;
    }
    assert_true(resynced);
    assert_int_equal(status_of(f).digest_mismatches, 1);
    assert_int_equal(STORE[f - 1].persists, 1);
    assert_false(SNAP_HELD[f - 1]);
    /* the follower stopped serving its clients when it found out */
    struct seq_out *o = wait_out(f, SEQ_OUT_CLOSE, 82);
    assert_true(o->session_id == fsid);
    seq_out_free(o);
    settle(leader);
    assert_live_trees_agree();
    assert_true(exists_on(f, "/n1"));
    /* and it goes on, comparing again, without another mismatch */
    assert_int_equal(create_via(leader, 81, sid, 4, "/n2", ZK_PERSISTENT), ZK_OK);
    uint64_t checks = status_of(f).digest_checks;
    settle(leader);
    for (int k = 0; k < 20 * TICK_MS * HEARTBEAT_TICKS; k++)
        step_all();
    assert_true(status_of(f).digest_checks > checks);
    assert_int_equal(status_of(f).digest_mismatches, 1);
    assert_true(status_of(f).serving);
    assert_live_trees_agree();
    cluster_down();
}

/* A server cut off from its leader stops serving: after an election
 * timeout without a word from a leader it closes its clients' connections
 * and refuses new ones (ZooKeeper's behaviour, and its timeliness
 * guarantee: a partitioned server must not serve stale data indefinitely).
 * Once a leader is back it serves again, and the session reattaches. */
static void test_no_leader_no_clients(void **state)
{
    (void)state;
    cluster_up(3);
    uint32_t leader = wait_leader();
    uint32_t f = a_follower(leader, 0);
    uint32_t g = a_follower(leader, f);
    uint8_t pw[16];
    int64_t sid = connect_via(f, 81, 30000, pw);
    assert_true(status_of(f).serving);
    NET.down[leader] = true;
    NET.down[g] = true;
    struct seq_out *o = wait_out(f, SEQ_OUT_CLOSE, 81);
    assert_true(o->session_id == sid);
    seq_out_free(o);
    assert_false(status_of(f).serving);
    /* a new client, and the old one reattaching, are both refused once
     * they have waited two election timeouts for a leader */
    submit_connect(f, 82, 0, NULL, 0, false);
    seq_out_free(wait_out(f, SEQ_OUT_CLOSE, 82));
    submit_connect(f, 83, sid, pw, 0, false);
    seq_out_free(wait_out(f, SEQ_OUT_CLOSE, 83));

    /* a connect that comes while no leader is known is held, not refused,
     * and answered as soon as one is elected: the client need not retry */
    submit_connect(f, 85, sid, pw, 0, false);
    step_all();
    NET.down[g] = false; /* a quorum again: f or g leads */
    (void)wait_leader();
    assert_true(status_of(f).serving);
    o = wait_out(f, SEQ_OUT_CONNECT, 85);
    assert_true(o->session_id == sid && o->timeout_ms > 0);
    seq_out_free(o);
    submit_connect(f, 84, sid, pw, 0, false);
    o = wait_out(f, SEQ_OUT_CONNECT, 84);
    assert_true(o->session_id == sid && o->timeout_ms > 0);
    seq_out_free(o);
    cluster_down();
}

static struct seq_out *connect_req(uint32_t id, uint64_t conn, int64_t sid, const uint8_t *pw,
                                   bool read_only_ok)
{
    submit_connect(id, conn, sid, pw, 0, read_only_ok);
    stash_drain(id);
    struct seq_out *o = stash_take(id, SEQ_OUT_CONNECT, conn);
    if (!o)
        o = stash_take(id, SEQ_OUT_CLOSE, conn);
    for (int k = 0; !o && k < STEP_LIMIT; k++) {
        step_all();
        stash_drain(id);
        o = stash_take(id, SEQ_OUT_CONNECT, conn);
        if (!o)
            o = stash_take(id, SEQ_OUT_CLOSE, conn);
    }
    assert_non_null(o);
    return o;
}

/* readonlymode.enabled: a server without a leader serves the clients that
 * allow read-only (new sessions of its own, and sessions it knows), refuses
 * the others, and closes the read-only connections once a leader is back. */
static void test_read_only_mode_without_a_leader(void **state)
{
    (void)state;
    RO_MODE = true;
    cluster_up(3);
    uint32_t leader = wait_leader();
    uint32_t f = a_follower(leader, 0);
    uint32_t g = a_follower(leader, f);
    uint8_t pw[16];
    int64_t known = connect_via(f, 90, 30000, pw);
    assert_false(status_of(f).read_only);
    NET.down[leader] = true;
    NET.down[g] = true;
    seq_out_free(wait_out(f, SEQ_OUT_CLOSE, 90));
    assert_true(status_of(f).read_only);

    struct seq_out *o = connect_req(f, 91, 0, NULL, false);
    assert_int_equal(o->kind, SEQ_OUT_CLOSE); /* it did not allow read-only */
    seq_out_free(o);
    o = connect_req(f, 92, 0, NULL, true);
    assert_int_equal(o->kind, SEQ_OUT_CONNECT);
    assert_true(o->read_only && o->timeout_ms > 0);
    assert_int_equal((uint64_t)o->session_id >> 56, f);
    int64_t ro_sid = o->session_id;
    uint8_t ro_pw[16];
    memcpy(ro_pw, o->passwd, 16);
    seq_out_free(o);
    /* it reattaches here with its password, and not with another */
    o = connect_req(f, 93, ro_sid, ro_pw, true);
    assert_true(o->kind == SEQ_OUT_CONNECT && o->read_only && o->session_id == ro_sid);
    seq_out_free(o);
    uint8_t wrong[16];
    memcpy(wrong, ro_pw, 16);
    wrong[0] ^= 1;
    o = connect_req(f, 94, ro_sid, wrong, true);
    assert_true(o->kind == SEQ_OUT_CONNECT && o->timeout_ms == 0);
    seq_out_free(o);
    /* a session the tree holds reattaches read-only too */
    o = connect_req(f, 95, known, pw, true);
    assert_true(o->kind == SEQ_OUT_CONNECT && o->read_only && o->session_id == known);
    seq_out_free(o);

    NET.down[g] = false;
    (void)wait_leader();
    assert_false(status_of(f).read_only);
    for (uint64_t conn = 92; conn <= 95; conn++) {
        if (conn == 94)
            continue; /* refused: never a read-only connection */
        seq_out_free(wait_out(f, SEQ_OUT_CLOSE, conn));
    }
    cluster_down();
}

/* A session committed an instant ago through the leader reattaches to a
 * follower that has not applied it yet: the follower must not call it
 * expired (it lives), nor turn away a client that saw a newer zxid; it
 * catches up to the leader's commit (ReadIndex) and then judges. */
static void test_reattach_to_a_follower_behind(void **state)
{
    (void)state;
    cluster_up(3);
    uint32_t leader = wait_leader();
    uint32_t f = a_follower(leader, 0);
    NET.paused[f] = true;
    uint8_t pw[16];
    int64_t sid = connect_via(leader, 101, 30000, pw);
    assert_int_equal(create_via(leader, 101, sid, 1, "/seen", ZK_PERSISTENT), ZK_OK);
    int64_t seen = tree_last_zxid(NODES[leader - 1].t);
    assert_null(tree_session_find(NODES[f - 1].t, sid)); /* f has not applied it */
    NET.paused[f] = false;
    submit_connect(f, 102, sid, pw, seen, false);
    struct seq_out *o = wait_out(f, SEQ_OUT_CONNECT, 102);
    assert_true(o->session_id == sid);
    assert_true(o->timeout_ms > 0);
    seq_out_free(o);
    assert_true(exists_on(f, "/seen"));
    /* a session that never existed is still expired, after the same wait */
    submit_connect(f, 103, sid + 1000, NULL, 0, false);
    o = wait_out(f, SEQ_OUT_CONNECT, 103);
    assert_int_equal(o->timeout_ms, 0);
    seq_out_free(o);
    cluster_down();
}

/* A client's session moves to another member while a write it sent through
 * its old one is still on the way to the leader. The leader takes the move
 * first, so it refuses the late write (SESSIONMOVED): the write never
 * applies after what the client then does through its new member. The old
 * member closes its connection when the move applies there. */
static void test_write_left_behind_by_a_move_is_refused(void **state)
{
    (void)state;
    cluster_up(3);
    uint32_t leader = wait_leader();
    uint32_t f = a_follower(leader, 0);
    uint32_t g = a_follower(leader, f);
    uint8_t pw[16];
    int64_t sid = connect_via(f, 41, 30000, pw);
    settle(leader);
    NET.hold_forwards[f] = true;
    struct zk_wbuf b;
    create_body(&b, "/late", ZK_PERSISTENT);
    submit_write(f, 41, sid, 7, ZK_OP_CREATE, &b);
    zk_wbuf_free(&b);
    for (int k = 0; k < 20; k++)
        step_all();
    assert_int_equal(NET.forwards > 0, true);
    submit_connect(g, 42, sid, pw, tree_last_zxid(NODES[f - 1].t), false);
    struct seq_out *o = wait_out(g, SEQ_OUT_CONNECT, 42);
    assert_true(o->session_id == sid);
    assert_true(o->timeout_ms > 0);
    seq_out_free(o);
    seq_out_free(wait_out(f, SEQ_OUT_CLOSE, 41)); /* the old member lets go */
    assert_int_equal(create_via(g, 42, sid, 8, "/after", ZK_PERSISTENT), ZK_OK);
    NET.hold_forwards[f] = false;
    o = wait_out(f, SEQ_OUT_REPLY, 41);
    struct base_rd r;
    struct zk_reply_header h = reply_header(o, &r);
    assert_int_equal(h.xid, 7);
    assert_int_equal(h.err, ZK_ESESSIONMOVED);
    seq_out_free(o);
    settle(leader);
    for (uint32_t i = 1; i <= 3; i++) {
        assert_false(exists_on(i, "/late"));
        assert_true(exists_on(i, "/after"));
    }
    /* the session writes on through its new member */
    assert_int_equal(create_via(g, 42, sid, 9, "/after2", ZK_PERSISTENT), ZK_OK);
    settle(leader);
    assert_live_trees_agree();
    cluster_down();
}

static void submit_create(uint32_t id, uint64_t conn, int64_t session, int32_t xid,
                          const char *path)
{
    struct zk_wbuf b;
    create_body(&b, path, ZK_PERSISTENT);
    submit_write(id, conn, session, xid, ZK_OP_CREATE, &b);
    zk_wbuf_free(&b);
}

static void submit_disconnect(uint32_t id, uint64_t conn)
{
    struct seq_req *r = seq_req_new(SEQ_REQ_DISCONNECT, NULL, 0, NULL, 0);
    assert_non_null(r);
    r->worker = 0;
    r->conn = conn;
    seq_submit(NODES[id - 1].s, r);
}

/* A session's writes pipeline through a follower, so the second may be
 * forwarded before the first is answered. When the link to the leader
 * drops in between, the first is lost with it; the second must not go on
 * the link that came back, or it would commit without the first. */
static void test_pipelined_write_stays_on_its_link(void **state)
{
    (void)state;
    cluster_up(3);
    uint32_t leader = wait_leader();
    uint32_t f = a_follower(leader, 0);
    int64_t sid = connect_via(f, 61, 30000, NULL);
    settle(leader);
    NET.hold_forwards[f] = true;
    submit_create(f, 61, sid, 1, "/first");
    for (int k = 0; k < 5; k++)
        step_all();
    link_bounce(f, leader); /* /first is gone with the old link */
    NET.hold_forwards[f] = false;
    submit_create(f, 61, sid, 2, "/second");
    seq_out_free(wait_out(f, SEQ_OUT_CLOSE, 61)); /* its fate is the client's to find out */
    /* the same connection's next write fails too, until the worker's
     * DISCONNECT ends the connection */
    submit_create(f, 61, sid, 3, "/third");
    for (int k = 0; k < 50; k++)
        step_all();
    settle(leader);
    for (uint32_t i = 1; i <= 3; i++) {
        assert_false(exists_on(i, "/first"));
        assert_false(exists_on(i, "/second"));
        assert_false(exists_on(i, "/third"));
    }
    /* the session goes on over a new connection */
    submit_disconnect(f, 61);
    assert_int_equal(create_via(f, 62, sid, 4, "/fourth", ZK_PERSISTENT), ZK_OK);
    settle(leader);
    assert_true(exists_on(leader, "/fourth"));
    assert_live_trees_agree();
    cluster_down();
}

/* A write that could not be forwarded fails (its connection closes); the
 * writes its connection pipelined behind it fail with it, even once the
 * leader can be reached again, until the worker says the connection is
 * gone. */
static void test_writes_behind_a_failed_one_fail(void **state)
{
    (void)state;
    cluster_up(3);
    uint32_t leader = wait_leader();
    uint32_t f = a_follower(leader, 0);
    int64_t sid = connect_via(f, 71, 30000, NULL);
    settle(leader);
    NET.refuse_forwards[f] = true;
    submit_create(f, 71, sid, 1, "/lost");
    seq_out_free(wait_out(f, SEQ_OUT_CLOSE, 71));
    NET.refuse_forwards[f] = false;
    submit_create(f, 71, sid, 2, "/behind");
    for (int k = 0; k < 50; k++)
        step_all();
    settle(leader);
    for (uint32_t i = 1; i <= 3; i++)
        assert_false(exists_on(i, "/behind"));
    submit_disconnect(f, 71);
    assert_int_equal(create_via(f, 72, sid, 3, "/later", ZK_PERSISTENT), ZK_OK);
    settle(leader);
    assert_live_trees_agree();
    cluster_down();
}

/* A forward names the term of the leader it was sent to; a leader takes
 * it only in that term. Taken in another, it could commit after writes of
 * its session that were lost with the leadership it was meant for. */
static void test_forward_for_another_term_is_dropped(void **state)
{
    (void)state;
    cluster_up(3);
    uint32_t leader = wait_leader();
    uint32_t f = a_follower(leader, 0);
    int64_t sid = connect_via(f, 91, 30000, NULL);
    settle(leader);
    uint32_t term = status_of(leader).raft.term;
    const uint32_t terms[] = { term - 1, term + 1, term };
    const char *paths[] = { "/older", "/newer", "/this" };
    for (int i = 0; i < 3; i++) {
        struct zk_wbuf b;
        create_body(&b, paths[i], ZK_PERSISTENT);
        struct peer_forward fw = { .session_id = sid, .cxid = 900 + i, .op = ZK_OP_CREATE,
                                   .body = b.p, .body_len = b.len, .term = terms[i] };
        rcu_read_lock();
        seq_peer_forward(NODES[leader - 1].s, f, &fw);
        rcu_read_unlock();
        zk_wbuf_free(&b);
    }
    for (int k = 0; k < 100; k++)
        step_all();
    settle(leader);
    for (uint32_t i = 1; i <= 3; i++) {
        assert_false(exists_on(i, "/older"));
        assert_false(exists_on(i, "/newer"));
        assert_true(exists_on(i, "/this"));
    }
    cluster_down();
}

/* Followers whose disks are slow: with the txn log on its own thread, a
 * follower's pass goes on while its log syncs, but its ack of the entries
 * waits for the sync, so nothing commits on an ack a crash could take
 * back. Once the disks catch up, the write commits and is answered. */
static void test_follower_acks_only_what_its_disk_holds(void **state)
{
    (void)state;
    GATED[1] = GATED[2] = GATED[3] = true;
    cluster_up(3);
    uint32_t leader = wait_leader();
    int64_t sid = connect_via(leader, 81, 30000, NULL);
    settle(leader);
    int64_t before = status_of(leader).raft.commit_zxid;
    for (uint32_t i = 1; i <= 3; i++)
        if (i != leader)
            gate_set(GATE[i], false);
    submit_create(leader, 81, sid, 1, "/slow");
    /* long enough for acks to come back, well within an election timeout
     * (the followers' heartbeat answers wait behind their disks too) */
    for (int k = 0; k < 4 * HEARTBEAT_TICKS * TICK_MS; k++)
        step_all();
    /* the leader's own disk is quick, but it is one of three */
    assert_true(status_of(leader).raft.durable_zxid > before);
    assert_true(status_of(leader).raft.commit_zxid == before);
    assert_false(exists_on(leader, "/slow"));
    stash_drain(leader);
    assert_null(stash_take(leader, SEQ_OUT_REPLY, 81));
    uint32_t f = a_follower(leader, 0);
    unsigned synced = gate_syncs(GATE[f]);
    gate_set(GATE[f], true);
    struct seq_out *o = wait_out(leader, SEQ_OUT_REPLY, 81);
    struct base_rd r;
    struct zk_reply_header h = reply_header(o, &r);
    assert_int_equal(h.xid, 1);
    assert_int_equal(h.err, ZK_OK);
    seq_out_free(o);
    assert_true(gate_syncs(GATE[f]) > synced);
    for (uint32_t i = 1; i <= 3; i++)
        gate_set(GATE[i], true);
    settle(leader);
    assert_live_trees_agree();
    cluster_down();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_writes_through_a_follower, setup, teardown),
        cmocka_unit_test_setup_teardown(test_session_moves_between_servers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sync_through_a_follower, setup, teardown),
        cmocka_unit_test_setup_teardown(test_leader_expires_followers_touch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_leader_loss_fails_pending_and_moves_on, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_five_servers_all_take_writes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_diverged_follower_resyncs_from_leaders_snapshot,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_follower_behind_compacted_log_gets_snapshot, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_no_leader_no_clients, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_only_mode_without_a_leader, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reattach_to_a_follower_behind, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_left_behind_by_a_move_is_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_pipelined_write_stays_on_its_link, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_writes_behind_a_failed_one_fail, setup, teardown),
        cmocka_unit_test_setup_teardown(test_forward_for_another_term_is_dropped, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_follower_acks_only_what_its_disk_holds, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
