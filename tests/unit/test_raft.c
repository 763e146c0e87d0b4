/*
 * test_raft — the Raft core (replication/raft.h) driven as a small cluster
 * inside the test: an array of cores, a message queue delivered by hand
 * (deterministic; optionally shuffled and duplicated by a seeded generator),
 * and a driver that carries out each ready in the contract's order over a
 * per-node fake disk. The "state machine" records the zxid and payload of
 * each applied entry, so agreement is checked entry by entry.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replication/raft.h"

#define N_MAX 5
#define LOG_MAX 512
#define DATA_MAX 136 /* a CONFIG entry's data fits (RAFT_CONFIG_BYTES_MAX) */
#define READS_MAX 32
#define ELECTION 10
#define HEARTBEAT 2

struct applied {
    int64_t zxid;
    uint8_t type;
    size_t len;
    char data[DATA_MAX];
};

struct node {
    struct raft *r;
    bool up;
    /* the fake disk */
    struct raft_hard_state hs;
    int64_t snap_zxid;
    struct applied snap_sm[LOG_MAX];
    size_t n_snap_sm;
    struct applied disk[LOG_MAX]; /* log entries after snap_zxid */
    size_t n_disk;
    /* the state machine */
    struct applied sm[LOG_MAX];
    size_t n_sm;
    struct raft_read reads[READS_MAX];
    size_t n_reads;
    int64_t max_commit_seen;
    /* the membership kept with the snapshot (raft_boot.snap_config) */
    struct raft_config snap_conf;
    bool has_snap_conf;
    struct raft_member cfg_members[N_MAX + 1]; /* what node_cfg gave it */
};

struct qmsg {
    struct raft_msg m;
    struct raft_entry *ents;
    uint8_t *snap;
    struct raft_config *conf; /* a SNAP's membership, copied */
};

struct cluster;
typedef bool (*drop_fn)(const struct cluster *c, const struct raft_msg *m);

struct cluster {
    uint32_t n;
    uint32_t n_members; /* the first membership: nodes [0, n_members); the
                         * rest are spares a membership change may add */
    struct raft_member members[N_MAX];
    struct raft_cfg cfg;
    struct node nodes[N_MAX];
    bool cut[N_MAX][N_MAX]; /* cut[a][b]: messages from a to b are lost */
    drop_fn drop;
    uint32_t drop_term; /* for drop functions that look at a term */
    bool shuffle, duplicate;
    /* called between a delivered message's raft_step and its ready */
    void (*after_step)(struct cluster *c, const struct raft_msg *m);
    uint64_t rng;
    struct qmsg *q;
    size_t n_q, cap_q;
    uint64_t delivered;
};

/* ---- the harness -------------------------------------------------------- */

static uint64_t test_rng(struct cluster *c)
{
    c->rng ^= c->rng << 13;
    c->rng ^= c->rng >> 7;
    c->rng ^= c->rng << 17;
    return c->rng;
}

static struct node *node_of(struct cluster *c, uint32_t id)
{
    assert_true(id >= 1 && id <= c->n);
    return &c->nodes[id - 1];
}

/* A spare starts knowing the first membership and itself as an observer
 * (its config must hold it); it learns the real one from a leader's log. */
static struct raft_cfg node_cfg(struct cluster *c, uint32_t i)
{
    struct raft_cfg cfg = c->cfg;
    struct node *nd = &c->nodes[i];
    memcpy(nd->cfg_members, c->members, c->n_members * sizeof c->members[0]);
    cfg.self_id = i + 1;
    cfg.members = nd->cfg_members;
    cfg.n_members = c->n_members;
    if (i >= c->n_members)
        nd->cfg_members[cfg.n_members++] = (struct raft_member){i + 1, false};
    return cfg;
}

static struct cluster *cluster_new(uint32_t voters, uint32_t observers, uint64_t seed)
{
    struct cluster *c = calloc(1, sizeof *c);
    assert_non_null(c);
    c->n = c->n_members = voters + observers;
    assert_true(c->n <= N_MAX);
    for (uint32_t i = 0; i < c->n; i++)
        c->members[i] = (struct raft_member){i + 1, i < voters};
    c->cfg = (struct raft_cfg){.election_ticks = ELECTION, .heartbeat_ticks = HEARTBEAT,
                               .seed = seed};
    c->rng = seed * 2654435761u + 1;
    return c;
}

static void cluster_start(struct cluster *c)
{
    for (uint32_t i = 0; i < c->n; i++) {
        struct raft_cfg cfg = node_cfg(c, i);
        c->nodes[i].r = raft_new(&cfg, NULL);
        assert_non_null(c->nodes[i].r);
        c->nodes[i].up = true;
    }
}

static void qmsg_free(struct qmsg *q)
{
    for (uint32_t i = 0; q->ents && i < q->m.n_entries; i++)
        free((void *)q->ents[i].data);
    free(q->ents);
    free(q->snap);
    free(q->conf);
}

static void snapshot_bytes(const struct node *nd, const uint8_t **data, size_t *len)
{
    *data = (const uint8_t *)nd->snap_sm;
    *len = nd->n_snap_sm * sizeof nd->snap_sm[0];
}

/* Queues a deep copy of m (the ready's pointers die at raft_advance); a
 * SNAP gets the sender's snapshot attached, as the driver would. */
static void enqueue(struct cluster *c, const struct raft_msg *m)
{
    assert_true(c->n_q < 100000);
    if (c->n_q == c->cap_q) {
        c->cap_q = c->cap_q ? c->cap_q * 2 : 64;
        c->q = realloc(c->q, c->cap_q * sizeof *c->q);
        assert_non_null(c->q);
    }
    struct qmsg *q = &c->q[c->n_q++];
    memset(q, 0, sizeof *q);
    q->m = *m;
    if (m->n_entries) {
        q->ents = calloc(m->n_entries, sizeof *q->ents);
        for (uint32_t i = 0; i < m->n_entries; i++) {
            q->ents[i] = m->entries[i];
            q->ents[i].data = NULL;
            if (m->entries[i].len) {
                uint8_t *d = malloc(m->entries[i].len);
                memcpy(d, m->entries[i].data, m->entries[i].len);
                q->ents[i].data = d;
            }
        }
        q->m.entries = q->ents;
    }
    if (m->type == RAFT_MSG_SNAP) {
        const struct node *from = node_of(c, m->from);
        assert_int_equal(from->snap_zxid, m->snap_zxid);
        const uint8_t *data;
        size_t len;
        snapshot_bytes(from, &data, &len);
        q->snap = malloc(len ? len : 1);
        memcpy(q->snap, data, len);
        q->m.snap_data = q->snap;
        q->m.snap_len = len;
        q->m.snap_config = NULL;
        if (m->snap_config) {
            q->conf = malloc(sizeof *q->conf);
            assert_non_null(q->conf);
            *q->conf = *m->snap_config;
            q->m.snap_config = q->conf;
        }
    }
}

static void apply(struct node *nd, const struct raft_entry *e)
{
    assert_true(nd->n_sm < LOG_MAX);
    if (nd->n_sm)
        assert_true(e->zxid > nd->sm[nd->n_sm - 1].zxid); /* zxid order */
    struct applied *a = &nd->sm[nd->n_sm++];
    memset(a, 0, sizeof *a);
    a->zxid = e->zxid;
    a->type = e->type;
    a->len = e->len < DATA_MAX ? e->len : DATA_MAX;
    if (a->len)
        memcpy(a->data, e->data, a->len);
}

static void persist(struct node *nd, const struct raft_ready *rd)
{
    if (rd->hard_state_changed)
        nd->hs = rd->hard_state;
    if (rd->snapshot) {
        nd->snap_zxid = rd->snapshot->zxid;
        nd->n_snap_sm = rd->snapshot->len / sizeof nd->snap_sm[0];
        memcpy(nd->snap_sm, rd->snapshot->data, rd->snapshot->len);
        memcpy(nd->sm, nd->snap_sm, rd->snapshot->len);
        nd->n_sm = nd->n_snap_sm;
        size_t keep = 0;
        if (rd->snapshot->keeps_log) { /* a resync: the log after it stays */
            size_t k = 0;
            while (k < nd->n_disk && nd->disk[k].zxid <= rd->snapshot->zxid)
                k++;
            keep = nd->n_disk - k;
            memmove(nd->disk, nd->disk + k, keep * sizeof nd->disk[0]);
        }
        nd->n_disk = keep;
        nd->snap_conf = rd->snapshot->config;
        nd->has_snap_conf = true;
    }
    if (rd->truncate) {
        /* an applied (committed) entry is never truncated */
        if (nd->n_sm)
            assert_true(rd->truncate_after >= nd->sm[nd->n_sm - 1].zxid);
        while (nd->n_disk && nd->disk[nd->n_disk - 1].zxid > rd->truncate_after)
            nd->n_disk--;
    }
    for (size_t i = 0; i < rd->n_entries; i++) {
        const struct raft_entry *e = &rd->entries[i];
        assert_true(nd->n_disk < LOG_MAX);
        if (nd->n_disk)
            assert_true(e->zxid > nd->disk[nd->n_disk - 1].zxid);
        struct applied *d = &nd->disk[nd->n_disk++];
        memset(d, 0, sizeof *d);
        d->zxid = e->zxid;
        d->type = e->type;
        d->len = e->len < DATA_MAX ? e->len : DATA_MAX;
        if (d->len)
            memcpy(d->data, e->data, d->len);
    }
}

/* Carries out every ready of node i in the contract's order. */
static void node_ready(struct cluster *c, uint32_t i)
{
    struct node *nd = &c->nodes[i];
    while (nd->up && raft_has_ready(nd->r)) {
        struct raft_ready rd;
        raft_ready(nd->r, &rd);
        persist(nd, &rd);
        for (size_t k = 0; k < rd.n_msgs; k++) {
            assert_int_equal(rd.msgs[k].from, i + 1);
            enqueue(c, &rd.msgs[k]);
            if (c->duplicate && test_rng(c) % 3 == 0)
                enqueue(c, &rd.msgs[k]);
        }
        for (size_t k = 0; k < rd.n_committed; k++)
            apply(nd, &rd.committed[k]);
        for (size_t k = 0; k < rd.n_reads; k++) {
            assert_true(nd->n_reads < READS_MAX);
            nd->reads[nd->n_reads++] = rd.reads[k];
        }
        raft_advance(nd->r, &rd);
        struct raft_status st;
        raft_status(nd->r, &st);
        assert_true(st.commit_zxid >= nd->max_commit_seen); /* commit never regresses */
        nd->max_commit_seen = st.commit_zxid;
    }
}

static bool deliver_one(struct cluster *c)
{
    if (c->n_q == 0)
        return false;
    size_t k = c->shuffle ? (size_t)(test_rng(c) % c->n_q) : 0;
    struct qmsg q = c->q[k];
    memmove(&c->q[k], &c->q[k + 1], (c->n_q - k - 1) * sizeof *c->q);
    c->n_q--;
    struct node *to = node_of(c, q.m.to);
    struct node *from = node_of(c, q.m.from);
    (void)from;
    bool lost = !to->up || c->cut[q.m.from - 1][q.m.to - 1] || (c->drop && c->drop(c, &q.m));
    if (!lost) {
        int rc = raft_step(to->r, &q.m);
        if (rc != RAFT_OK)
            fprintf(stderr, "raft_step %s %u->%u term %u: %d\n", raft_msg_type_name(q.m.type),
                    q.m.from, q.m.to, q.m.term, rc);
        assert_true(rc == RAFT_OK);
        c->delivered++;
        if (c->after_step)
            c->after_step(c, &q.m);
        node_ready(c, q.m.to - 1);
    }
    qmsg_free(&q);
    return true;
}

static void settle(struct cluster *c)
{
    for (int guard = 0; deliver_one(c); guard++)
        assert_true(guard < 200000);
}

static void tick_all(struct cluster *c, int ticks)
{
    for (int t = 0; t < ticks; t++) {
        for (uint32_t i = 0; i < c->n; i++) {
            if (!c->nodes[i].up)
                continue;
            raft_tick(c->nodes[i].r);
            node_ready(c, i);
        }
        settle(c);
    }
}

static void tick_node(struct cluster *c, uint32_t i, int ticks)
{
    for (int t = 0; t < ticks; t++) {
        raft_tick(c->nodes[i].r);
        node_ready(c, i);
        settle(c);
    }
}

static struct raft_status status_of(struct cluster *c, uint32_t i)
{
    struct raft_status st;
    raft_status(c->nodes[i].r, &st);
    return st;
}

/* The leader with the highest term among running nodes, or -1; never two
 * leaders of one term. */
static int leader_of(struct cluster *c)
{
    int best = -1;
    uint32_t best_term = 0;
    for (uint32_t i = 0; i < c->n; i++) {
        if (!c->nodes[i].up)
            continue;
        struct raft_status st = status_of(c, i);
        if (st.role != RAFT_LEADER)
            continue;
        assert_true(best < 0 || st.term != best_term);
        if (best < 0 || st.term > best_term) {
            best = (int)i;
            best_term = st.term;
        }
    }
    return best;
}

static int wait_leader(struct cluster *c)
{
    for (int t = 0; t < 50 * ELECTION; t++) {
        int l = leader_of(c);
        if (l >= 0)
            return l;
        tick_all(c, 1);
    }
    fail_msg("no leader elected");
    return -1;
}

static void crash(struct cluster *c, uint32_t i)
{
    raft_free(c->nodes[i].r);
    c->nodes[i].r = NULL;
    c->nodes[i].up = false;
    c->nodes[i].n_reads = 0;
}

/* Starts node i from its disk: hard state, snapshot and log; the state
 * machine is the snapshot plus the entries through the persisted commit. */
static void restart(struct cluster *c, uint32_t i)
{
    struct node *nd = &c->nodes[i];
    struct raft_entry ents[LOG_MAX];
    for (size_t k = 0; k < nd->n_disk; k++)
        ents[k] = (struct raft_entry){nd->disk[k].zxid, nd->disk[k].type,
                                      (const uint8_t *)nd->disk[k].data, nd->disk[k].len};
    struct raft_boot boot = {nd->hs, nd->snap_zxid, ents, nd->n_disk,
                             nd->has_snap_conf ? &nd->snap_conf : NULL};
    struct raft_cfg cfg = node_cfg(c, i);
    nd->r = raft_new(&cfg, &boot);
    assert_non_null(nd->r);
    nd->up = true;
    memcpy(nd->sm, nd->snap_sm, nd->n_snap_sm * sizeof nd->sm[0]);
    nd->n_sm = nd->n_snap_sm;
    for (size_t k = 0; k < nd->n_disk && nd->disk[k].zxid <= nd->hs.commit_zxid; k++)
        apply(nd, &ents[k]);
    nd->max_commit_seen = status_of(c, i).commit_zxid;
    assert_int_equal(status_of(c, i).applied_zxid,
                     nd->n_sm ? nd->sm[nd->n_sm - 1].zxid : nd->snap_zxid);
}

/* Takes a snapshot of node i at its applied zxid and compacts. */
static void compact(struct cluster *c, uint32_t i, size_t keep)
{
    struct node *nd = &c->nodes[i];
    int64_t at = status_of(c, i).applied_zxid;
    memcpy(nd->snap_sm, nd->sm, nd->n_sm * sizeof nd->sm[0]);
    nd->n_snap_sm = nd->n_sm;
    nd->snap_zxid = at;
    size_t k = 0;
    while (k < nd->n_disk && nd->disk[k].zxid <= at)
        k++;
    memmove(nd->disk, nd->disk + k, (nd->n_disk - k) * sizeof nd->disk[0]);
    nd->n_disk -= k;
    assert_int_equal(raft_config_at(nd->r, at, &nd->snap_conf), RAFT_OK);
    nd->has_snap_conf = true;
    raft_compact(nd->r, at, keep);
}

static int64_t propose(struct cluster *c, uint32_t i, const char *s)
{
    int64_t z = -1;
    assert_int_equal(raft_propose(c->nodes[i].r, s, strlen(s), &z), RAFT_OK);
    node_ready(c, i);
    return z;
}

static void isolate(struct cluster *c, uint32_t i, bool on)
{
    for (uint32_t j = 0; j < c->n; j++)
        c->cut[i][j] = c->cut[j][i] = on && i != j;
}

static void assert_same_sm(const struct node *a, const struct node *b)
{
    assert_int_equal(a->n_sm, b->n_sm);
    for (size_t k = 0; k < a->n_sm; k++) {
        assert_int_equal(a->sm[k].zxid, b->sm[k].zxid);
        assert_int_equal(a->sm[k].type, b->sm[k].type);
        assert_int_equal(a->sm[k].len, b->sm[k].len);
        assert_memory_equal(a->sm[k].data, b->sm[k].data, DATA_MAX);
    }
}

static void assert_all_agree(struct cluster *c)
{
    for (uint32_t i = 1; i < c->n; i++)
        if (c->nodes[i].up && c->nodes[0].up)
            assert_same_sm(&c->nodes[0], &c->nodes[i]);
}

static bool sm_has(const struct node *nd, int64_t zxid)
{
    for (size_t k = 0; k < nd->n_sm; k++)
        if (nd->sm[k].zxid == zxid)
            return true;
    return false;
}

static bool log_has(const struct raft *r, int64_t zxid)
{
    for (size_t k = 0; k < raft_log_len(r); k++)
        if (raft_log_at(r, k)->zxid == zxid)
            return true;
    return false;
}

static void cluster_free(struct cluster *c)
{
    for (uint32_t i = 0; i < c->n; i++)
        raft_free(c->nodes[i].r);
    for (size_t k = 0; k < c->n_q; k++)
        qmsg_free(&c->q[k]);
    free(c->q);
    free(c);
}

/* A three-voter cluster with a leader whose no-op every node applied. */
static struct cluster *stable_cluster(uint32_t voters, uint32_t observers, uint64_t seed, int *leader)
{
    struct cluster *c = cluster_new(voters, observers, seed);
    cluster_start(c);
    *leader = wait_leader(c);
    tick_all(c, 2 * HEARTBEAT);
    return c;
}

/* ---- elections and commit ------------------------------------------------ */

static void test_single_voter_commits_immediately(void **state)
{
    (void)state;
    struct cluster *c = cluster_new(1, 0, 1);
    cluster_start(c);
    assert_int_equal(wait_leader(c), 0);
    struct raft_status st = status_of(c, 0);
    assert_int_equal(st.term, 1);
    assert_int_equal(st.commit_zxid, raft_make_zxid(1, 0)); /* the no-op */
    int64_t z = -1;
    assert_int_equal(raft_propose(c->nodes[0].r, "a", 1, &z), RAFT_OK);
    assert_int_equal(z, raft_make_zxid(1, 1));
    assert_int_equal(status_of(c, 0).commit_zxid, raft_make_zxid(1, 0)); /* not durable yet */
    node_ready(c, 0);
    st = status_of(c, 0);
    assert_int_equal(st.commit_zxid, z);
    assert_int_equal(st.applied_zxid, z);
    struct node *nd = &c->nodes[0];
    assert_int_equal(nd->n_sm, 2);
    assert_int_equal(nd->sm[0].type, RAFT_ENTRY_NOOP);
    assert_memory_equal(nd->sm[1].data, "a", 1);
    /* a lone voter confirms a read with nobody else */
    assert_int_equal(raft_read_index(nd->r, 42), RAFT_OK);
    node_ready(c, 0);
    assert_int_equal(nd->n_reads, 1);
    assert_int_equal(nd->reads[0].ctx, 42);
    assert_int_equal(nd->reads[0].zxid, z);
    assert_true(nd->reads[0].ok);
    cluster_free(c);
}

static void test_three_nodes_elect_one_leader(void **state)
{
    (void)state;
    int l;
    struct cluster *c = stable_cluster(3, 0, 7, &l);
    struct raft_status ls = status_of(c, (uint32_t)l);
    int64_t noop = raft_make_zxid(ls.term, 0);
    int leaders = 0;
    for (uint32_t i = 0; i < 3; i++) {
        struct raft_status st = status_of(c, i);
        leaders += st.role == RAFT_LEADER;
        assert_int_equal(st.term, ls.term);
        assert_int_equal(st.leader_id, l + 1);
        assert_int_equal(st.commit_zxid, noop);
        assert_int_equal(c->nodes[i].n_sm, 1);
        assert_int_equal(c->nodes[i].sm[0].zxid, noop);
        assert_int_equal(c->nodes[i].sm[0].type, RAFT_ENTRY_NOOP);
        if (st.role != RAFT_LEADER)
            assert_int_equal(st.role, RAFT_FOLLOWER);
    }
    assert_int_equal(leaders, 1);
    assert_int_equal(ls.vote, l + 1);
    cluster_free(c);
}

static void test_proposals_apply_in_zxid_order(void **state)
{
    (void)state;
    int l;
    struct cluster *c = stable_cluster(3, 0, 3, &l);
    uint32_t term = status_of(c, (uint32_t)l).term;
    char buf[16];
    for (int k = 0; k < 10; k++) {
        snprintf(buf, sizeof buf, "v%d", k);
        assert_int_equal(propose(c, (uint32_t)l, buf), raft_make_zxid(term, (uint32_t)k + 1));
    }
    settle(c);
    tick_all(c, 2 * HEARTBEAT);
    assert_all_agree(c);
    for (uint32_t i = 0; i < 3; i++) {
        struct node *nd = &c->nodes[i];
        assert_int_equal(nd->n_sm, 11);
        for (int k = 0; k < 10; k++) {
            snprintf(buf, sizeof buf, "v%d", k);
            assert_int_equal(nd->sm[k + 1].zxid, raft_make_zxid(term, (uint32_t)k + 1));
            assert_memory_equal(nd->sm[k + 1].data, buf, strlen(buf));
        }
        assert_int_equal(status_of(c, i).commit_zxid, raft_make_zxid(term, 10));
    }
    cluster_free(c);
}

static void test_leader_crash_truncates_uncommitted_tail(void **state)
{
    (void)state;
    int l;
    struct cluster *c = stable_cluster(3, 0, 11, &l);
    uint32_t old = (uint32_t)l;
    uint32_t term = status_of(c, old).term;
    isolate(c, old, true);
    int64_t tail[3];
    for (int k = 0; k < 3; k++)
        tail[k] = propose(c, old, "tail");
    settle(c);
    assert_int_equal(c->nodes[old].n_disk, 4); /* durable there, and nowhere else */
    crash(c, old);
    isolate(c, old, false);
    int l2 = wait_leader(c);
    assert_true((uint32_t)l2 != old);
    uint32_t term2 = status_of(c, (uint32_t)l2).term;
    assert_true(term2 > term);
    int64_t after = propose(c, (uint32_t)l2, "after");
    settle(c);
    restart(c, old);
    tick_all(c, 3 * HEARTBEAT);
    for (int k = 0; k < 3; k++) {
        assert_false(log_has(c->nodes[old].r, tail[k]));
        assert_false(sm_has(&c->nodes[old], tail[k]));
    }
    assert_true(sm_has(&c->nodes[old], after));
    assert_int_equal(status_of(c, old).commit_zxid, after);
    assert_int_equal(status_of(c, old).term, term2);
    assert_all_agree(c);
    cluster_free(c);
}

static bool drop_appends_of_term(const struct cluster *c, const struct raft_msg *m)
{
    if (m->type != RAFT_MSG_APPEND)
        return false;
    for (uint32_t i = 0; i < m->n_entries; i++)
        if (raft_zxid_term(m->entries[i].zxid) == c->drop_term)
            return true;
    return false;
}

/* Boots node i from the given disk state. */
static void boot_node(struct cluster *c, uint32_t i, uint32_t term, uint32_t vote,
                      int64_t commit, const int64_t *zxids, size_t n)
{
    struct node *nd = &c->nodes[i];
    memset(nd, 0, sizeof *nd);
    nd->hs = (struct raft_hard_state){term, vote, commit};
    for (size_t k = 0; k < n; k++) {
        nd->disk[k].zxid = zxids[k];
        nd->disk[k].type = raft_zxid_counter(zxids[k]) == 0 ? RAFT_ENTRY_NOOP : RAFT_ENTRY_DATA;
        nd->disk[k].len = nd->disk[k].type == RAFT_ENTRY_DATA ? 1 : 0;
        nd->disk[k].data[0] = 'x';
    }
    nd->n_disk = n;
    restart(c, i);
}

/* Raft Figure 8: an entry of an older term that sits on a majority is not
 * committed by counting; it commits once an entry of the leader's own term
 * does. */
static void test_fig8_old_term_entry_commits_only_under_current_term(void **state)
{
    (void)state;
    struct cluster *c = cluster_new(3, 0, 5);
    c->cfg.max_append_entries = 1;
    int64_t noop1 = raft_make_zxid(1, 0), x = raft_make_zxid(1, 1);
    int64_t long_log[] = {noop1, x}, short_log[] = {noop1};
    boot_node(c, 0, 1, 1, noop1, long_log, 2);
    boot_node(c, 1, 1, 1, noop1, short_log, 1);
    boot_node(c, 2, 1, 1, noop1, short_log, 1);
    c->drop = drop_appends_of_term;
    c->drop_term = 2;
    for (int t = 0; t < 2 * ELECTION && status_of(c, 0).role != RAFT_LEADER; t++)
        tick_node(c, 0, 1); /* only node 1 runs its timer: it campaigns */
    assert_int_equal(status_of(c, 0).role, RAFT_LEADER);
    assert_int_equal(status_of(c, 0).term, 2);
    tick_node(c, 0, 2 * HEARTBEAT);
    struct raft_status st = status_of(c, 0);
    assert_int_equal(st.peers[0].match_zxid, x); /* x is on all three */
    assert_int_equal(st.peers[1].match_zxid, x);
    assert_true(log_has(c->nodes[1].r, x));
    assert_int_equal(st.commit_zxid, noop1); /* ...but not committed */
    assert_false(sm_has(&c->nodes[0], x));
    c->drop = NULL;
    tick_node(c, 0, 2 * HEARTBEAT);
    assert_int_equal(status_of(c, 0).commit_zxid, raft_make_zxid(2, 0));
    assert_true(sm_has(&c->nodes[0], x));
    assert_all_agree(c);
    cluster_free(c);
}

static void test_prevote_rejoin_keeps_term_and_leader(void **state)
{
    (void)state;
    int l;
    struct cluster *c = stable_cluster(3, 0, 21, &l);
    uint32_t f = ((uint32_t)l + 1) % 3;
    uint32_t term = status_of(c, (uint32_t)l).term;
    isolate(c, f, true);
    tick_all(c, 6 * ELECTION);
    assert_int_equal(status_of(c, f).term, term); /* pre-votes never raised it */
    assert_int_not_equal(status_of(c, f).role, RAFT_LEADER);
    assert_int_equal(status_of(c, f).role, RAFT_PRE_CANDIDATE);
    isolate(c, f, false);
    tick_all(c, 2 * ELECTION);
    assert_int_equal(leader_of(c), l);
    for (uint32_t i = 0; i < 3; i++) {
        assert_int_equal(status_of(c, i).term, term);
        assert_int_equal(status_of(c, i).leader_id, l + 1);
    }
    assert_int_equal(status_of(c, f).role, RAFT_FOLLOWER);
    cluster_free(c);
}

static void test_check_quorum_isolated_leader_steps_down(void **state)
{
    (void)state;
    int l;
    struct cluster *c = stable_cluster(3, 0, 23, &l);
    isolate(c, (uint32_t)l, true);
    int t = 0;
    while (status_of(c, (uint32_t)l).role == RAFT_LEADER && t < 4 * ELECTION) {
        tick_all(c, 1);
        t++;
    }
    assert_true(t <= 2 * ELECTION);
    assert_int_equal(status_of(c, (uint32_t)l).role, RAFT_FOLLOWER);
    assert_int_equal(status_of(c, (uint32_t)l).leader_id, 0);
    /* it no longer confirms reads */
    assert_int_equal(raft_read_index(c->nodes[l].r, 1), RAFT_ENOTLEADER);
    cluster_free(c);
}

static void test_lease_ignores_higher_term_vote(void **state)
{
    (void)state;
    int l;
    struct cluster *c = stable_cluster(3, 0, 25, &l);
    uint32_t f1 = ((uint32_t)l + 1) % 3, f2 = ((uint32_t)l + 2) % 3;
    uint32_t term = status_of(c, f2).term;
    uint32_t vote = status_of(c, f2).vote;
    struct raft_msg m = {.type = RAFT_MSG_VOTE_REQ, .from = f1 + 1, .to = f2 + 1,
                         .term = term + 1, .last_zxid = raft_make_zxid(term + 5, 0)};
    assert_int_equal(raft_step(c->nodes[f2].r, &m), RAFT_OK);
    assert_int_equal(status_of(c, f2).term, term);
    assert_int_equal(status_of(c, f2).vote, vote);
    assert_int_equal(status_of(c, f2).leader_id, l + 1);
    assert_false(raft_has_ready(c->nodes[f2].r)); /* not even an answer */
    m.to = (uint32_t)l + 1;
    assert_int_equal(raft_step(c->nodes[l].r, &m), RAFT_OK);
    assert_int_equal(status_of(c, (uint32_t)l).role, RAFT_LEADER);
    assert_int_equal(status_of(c, (uint32_t)l).term, term);
    /* once f2 has not heard the leader for an election timeout, it votes */
    isolate(c, f2, true);
    tick_node(c, f2, ELECTION);
    m.to = f2 + 1;
    assert_int_equal(raft_step(c->nodes[f2].r, &m), RAFT_OK);
    assert_int_equal(status_of(c, f2).term, term + 1);
    assert_int_equal(status_of(c, f2).vote, f1 + 1);
    cluster_free(c);
}

static void test_counter_limit_steps_down_and_next_term_restarts(void **state)
{
    (void)state;
    struct cluster *c = cluster_new(3, 0, 27);
    c->cfg.counter_limit = 3;
    cluster_start(c);
    uint32_t l = (uint32_t)wait_leader(c);
    tick_all(c, 2 * HEARTBEAT);
    uint32_t term = status_of(c, l).term;
    for (uint32_t k = 1; k <= 3; k++)
        assert_int_equal(propose(c, l, "c"), raft_make_zxid(term, k));
    settle(c);
    int64_t z = 0;
    assert_int_equal(raft_propose(c->nodes[l].r, "d", 1, &z), RAFT_ELIMIT);
    struct raft_status st = status_of(c, l);
    assert_int_equal(st.role, RAFT_FOLLOWER);
    assert_int_equal(st.leader_id, 0);
    assert_int_equal(st.term, term);
    assert_int_equal(st.last_zxid, raft_make_zxid(term, 3));
    int l2 = wait_leader(c);
    uint32_t term2 = status_of(c, (uint32_t)l2).term;
    assert_true(term2 > term);
    tick_all(c, 2 * HEARTBEAT);
    assert_int_equal(propose(c, (uint32_t)l2, "e"), raft_make_zxid(term2, 1));
    settle(c);
    tick_all(c, 2 * HEARTBEAT);
    for (uint32_t i = 0; i < 3; i++) {
        assert_true(sm_has(&c->nodes[i], raft_make_zxid(term, 3)));
        assert_true(sm_has(&c->nodes[i], raft_make_zxid(term2, 0)));
        assert_true(sm_has(&c->nodes[i], raft_make_zxid(term2, 1)));
    }
    assert_all_agree(c);
    cluster_free(c);
}

/* ---- ReadIndex ------------------------------------------------------------ */

/* Runs the cluster one delivered message at a time until a leader appears,
 * leaving its no-op's APPENDs undelivered. */
static int catch_new_leader(struct cluster *c)
{
    for (int t = 0; t < 50 * ELECTION; t++) {
        for (uint32_t i = 0; i < c->n; i++) {
            raft_tick(c->nodes[i].r);
            node_ready(c, i);
        }
        while (leader_of(c) < 0 && deliver_one(c))
            ;
        if (leader_of(c) >= 0)
            return leader_of(c);
    }
    fail_msg("no leader");
    return -1;
}

static bool drop_append_resp(const struct cluster *c, const struct raft_msg *m)
{
    (void)c;
    return m->type == RAFT_MSG_APPEND_RESP;
}

static void test_read_index_on_leader_waits_for_noop_and_quorum(void **state)
{
    (void)state;
    struct cluster *c = cluster_new(3, 0, 31);
    cluster_start(c);
    uint32_t l = (uint32_t)catch_new_leader(c);
    struct node *nd = &c->nodes[l];
    uint32_t term = status_of(c, l).term;
    assert_true(status_of(c, l).commit_zxid < raft_make_zxid(term, 0));
    assert_int_equal(raft_read_index(nd->r, 11), RAFT_OK);
    node_ready(c, l);
    assert_int_equal(nd->n_reads, 0); /* held: nothing of this term committed */
    settle(c);
    assert_int_equal(nd->n_reads, 1);
    assert_int_equal(nd->reads[0].ctx, 11);
    assert_int_equal(nd->reads[0].zxid, raft_make_zxid(term, 0));
    assert_true(nd->reads[0].ok);
    /* a read after a commit waits for a quorum to answer a heartbeat */
    int64_t z = propose(c, l, "r");
    settle(c);
    c->drop = drop_append_resp;
    assert_int_equal(raft_read_index(nd->r, 12), RAFT_OK);
    node_ready(c, l);
    settle(c);
    assert_int_equal(nd->n_reads, 1);
    c->drop = NULL;
    tick_all(c, HEARTBEAT);
    assert_int_equal(nd->n_reads, 2);
    assert_int_equal(nd->reads[1].ctx, 12);
    assert_int_equal(nd->reads[1].zxid, z);
    assert_true(nd->reads[1].ok);
    cluster_free(c);
}

static void test_read_index_through_follower_and_failure_on_step_down(void **state)
{
    (void)state;
    int li;
    struct cluster *c = stable_cluster(3, 0, 33, &li);
    uint32_t l = (uint32_t)li, f = (l + 1) % 3;
    int64_t z = propose(c, l, "w");
    settle(c);
    assert_int_equal(raft_read_index(c->nodes[f].r, 21), RAFT_OK);
    node_ready(c, f);
    settle(c);
    assert_int_equal(c->nodes[f].n_reads, 1);
    assert_int_equal(c->nodes[f].reads[0].ctx, 21);
    assert_int_equal(c->nodes[f].reads[0].zxid, z);
    assert_true(c->nodes[f].reads[0].ok);
    /* the leader stops hearing acks: its pending reads fail as it steps down */
    c->drop = drop_append_resp;
    assert_int_equal(raft_read_index(c->nodes[l].r, 31), RAFT_OK);
    node_ready(c, l);
    assert_int_equal(raft_read_index(c->nodes[f].r, 32), RAFT_OK);
    node_ready(c, f);
    settle(c);
    assert_int_equal(c->nodes[l].n_reads, 0);
    assert_int_equal(c->nodes[f].n_reads, 1);
    for (int t = 0; t < 3 * ELECTION && status_of(c, l).role == RAFT_LEADER; t++)
        tick_all(c, 1);
    assert_int_not_equal(status_of(c, l).role, RAFT_LEADER);
    assert_int_equal(c->nodes[l].n_reads, 1);
    assert_int_equal(c->nodes[l].reads[0].ctx, 31);
    assert_false(c->nodes[l].reads[0].ok);
    assert_int_equal(c->nodes[f].n_reads, 2);
    assert_int_equal(c->nodes[f].reads[1].ctx, 32);
    assert_false(c->nodes[f].reads[1].ok);
    cluster_free(c);
}

static void test_read_index_without_leader(void **state)
{
    (void)state;
    struct cluster *c = cluster_new(3, 0, 35);
    cluster_start(c);
    assert_int_equal(raft_read_index(c->nodes[0].r, 1), RAFT_ENOTLEADER);
    assert_int_equal(raft_propose(c->nodes[0].r, "x", 1, NULL), RAFT_ENOTLEADER);
    assert_false(raft_has_ready(c->nodes[0].r));
    cluster_free(c);
}

/* ---- snapshots and observers ------------------------------------------------ */

static void test_compaction_and_snap_catch_up(void **state)
{
    (void)state;
    int li;
    struct cluster *c = stable_cluster(3, 0, 41, &li);
    uint32_t l = (uint32_t)li, f = (l + 1) % 3, g = (l + 2) % 3;
    crash(c, f);
    int64_t last = 0;
    for (int k = 0; k < 30; k++) {
        last = propose(c, l, "s");
        settle(c);
    }
    tick_all(c, 2 * HEARTBEAT);
    assert_int_equal(status_of(c, l).applied_zxid, last);
    compact(c, l, 2);
    compact(c, g, 0);
    assert_int_equal(raft_log_len(c->nodes[l].r), 2);
    assert_int_equal(raft_log_len(c->nodes[g].r), 0);
    assert_int_equal(status_of(c, l).snap_zxid, last);
    restart(c, f);
    tick_all(c, 4 * HEARTBEAT);
    struct raft_status fs = status_of(c, f);
    assert_int_equal(fs.snap_zxid, last); /* caught up by SNAP, not by entries */
    assert_int_equal(fs.commit_zxid, last);
    assert_int_equal(c->nodes[f].snap_zxid, last);
    assert_same_sm(&c->nodes[l], &c->nodes[f]);
    /* and it follows the log again afterwards */
    int64_t z = propose(c, l, "t");
    settle(c);
    tick_all(c, HEARTBEAT);
    assert_int_equal(status_of(c, f).commit_zxid, z);
    assert_true(log_has(c->nodes[f].r, z));
    assert_all_agree(c);
    cluster_free(c);
}

static void test_observer_follows_but_never_counts_or_campaigns(void **state)
{
    (void)state;
    int li;
    struct cluster *c = stable_cluster(2, 1, 43, &li);
    uint32_t l = (uint32_t)li, v = 1 - l, o = 2;
    assert_true(l < 2);
    assert_int_equal(status_of(c, o).role, RAFT_OBSERVER);
    int64_t z = propose(c, l, "o");
    settle(c);
    tick_all(c, HEARTBEAT);
    assert_same_sm(&c->nodes[l], &c->nodes[o]);
    assert_true(sm_has(&c->nodes[o], z));
    assert_int_equal(raft_read_index(c->nodes[o].r, 5), RAFT_OK);
    node_ready(c, o);
    settle(c);
    assert_int_equal(c->nodes[o].n_reads, 1);
    assert_true(c->nodes[o].reads[0].ok);
    /* with the other voter down, the observer's ack does not commit */
    crash(c, v);
    int64_t z2 = propose(c, l, "lost");
    settle(c);
    tick_all(c, HEARTBEAT);
    struct raft_status st = status_of(c, l);
    assert_int_equal(st.commit_zxid, z);
    assert_int_equal(st.peers[1].id, o + 1);
    assert_int_equal(st.peers[1].match_zxid, z2);
    /* and it never campaigns, whatever happens to the voters */
    uint32_t term = status_of(c, o).term;
    crash(c, l);
    tick_all(c, 10 * ELECTION);
    assert_int_equal(status_of(c, o).role, RAFT_OBSERVER);
    assert_int_equal(status_of(c, o).term, term);
    cluster_free(c);
}

/* The driver compacts again between the step that queues a SNAP and the
 * ready that hands it out: the SNAP names the snapshot the driver now holds
 * (enqueue checks this against the sender's disk). */
static void compact_leader_after_reject(struct cluster *c, const struct raft_msg *m)
{
    if (m->type != RAFT_MSG_APPEND_RESP || !m->reject)
        return;
    uint32_t l = m->to - 1;
    if (status_of(c, l).applied_zxid > c->nodes[l].snap_zxid)
        compact(c, l, 0);
}

static void test_snap_names_the_newest_snapshot(void **state)
{
    (void)state;
    int li;
    struct cluster *c = stable_cluster(3, 0, 45, &li);
    uint32_t l = (uint32_t)li, f = (l + 1) % 3;
    crash(c, f);
    for (int k = 0; k < 10; k++)
        propose(c, l, "a");
    settle(c);
    tick_all(c, HEARTBEAT);
    compact(c, l, 0);
    int64_t first_snap = c->nodes[l].snap_zxid;
    int64_t last = 0;
    for (int k = 0; k < 5; k++)
        last = propose(c, l, "b");
    settle(c);
    tick_all(c, HEARTBEAT);
    assert_int_equal(status_of(c, l).applied_zxid, last);
    c->after_step = compact_leader_after_reject;
    restart(c, f);
    tick_all(c, 4 * HEARTBEAT);
    assert_true(first_snap < last);
    assert_int_equal(c->nodes[l].snap_zxid, last);
    assert_int_equal(status_of(c, f).snap_zxid, last);
    assert_same_sm(&c->nodes[l], &c->nodes[f]);
    cluster_free(c);
}

/* ---- restart ---------------------------------------------------------------- */

static void test_restart_from_boot_keeps_term_vote_and_log(void **state)
{
    (void)state;
    int li;
    struct cluster *c = stable_cluster(3, 0, 51, &li);
    int64_t zs[3];
    for (int k = 0; k < 3; k++)
        zs[k] = propose(c, (uint32_t)li, "p");
    settle(c);
    tick_all(c, HEARTBEAT);
    struct raft_status before[3];
    for (uint32_t i = 0; i < 3; i++) {
        before[i] = status_of(c, i);
        crash(c, i);
    }
    for (uint32_t i = 0; i < 3; i++) {
        restart(c, i);
        struct raft_status st = status_of(c, i);
        assert_int_equal(st.term, before[i].term);
        assert_int_equal(st.vote, before[i].vote);
        assert_int_equal(st.last_zxid, before[i].last_zxid);
        assert_int_equal(st.role, RAFT_FOLLOWER);
        assert_true(st.commit_zxid <= before[i].commit_zxid);
    }
    int l2 = wait_leader(c);
    assert_true(status_of(c, (uint32_t)l2).term > before[0].term);
    tick_all(c, HEARTBEAT);
    int64_t z = propose(c, (uint32_t)l2, "post");
    settle(c);
    tick_all(c, HEARTBEAT);
    for (uint32_t i = 0; i < 3; i++) {
        for (int k = 0; k < 3; k++)
            assert_true(sm_has(&c->nodes[i], zs[k]));
        assert_true(sm_has(&c->nodes[i], z));
    }
    assert_all_agree(c);
    cluster_free(c);
}

static void test_restart_keeps_one_vote_per_term(void **state)
{
    (void)state;
    struct cluster *c = cluster_new(3, 0, 53);
    int64_t log1[] = {raft_make_zxid(4, 0)};
    boot_node(c, 0, 5, 2, 0, log1, 1);
    struct raft_msg m = {.type = RAFT_MSG_VOTE_REQ, .from = 3, .to = 1, .term = 5,
                         .last_zxid = raft_make_zxid(5, 9)};
    struct raft_ready rd;
    assert_int_equal(raft_step(c->nodes[0].r, &m), RAFT_OK);
    raft_ready(c->nodes[0].r, &rd);
    assert_int_equal(rd.n_msgs, 1);
    assert_true(rd.msgs[0].reject); /* it voted for 2 in term 5 before the restart */
    assert_false(rd.hard_state_changed);
    raft_advance(c->nodes[0].r, &rd);
    m.from = 2;
    assert_int_equal(raft_step(c->nodes[0].r, &m), RAFT_OK);
    raft_ready(c->nodes[0].r, &rd);
    assert_int_equal(rd.n_msgs, 1);
    assert_false(rd.msgs[0].reject); /* the same candidate may ask again */
    assert_int_equal(rd.msgs[0].term, 5);
    raft_advance(c->nodes[0].r, &rd);
    assert_int_equal(status_of(c, 0).vote, 2);
    cluster_free(c);
}

/* A follower commits no further than the APPEND proves it holds (a stale
 * heartbeat's prev), and hands out committed entries only once durable. */
static void test_follower_commit_bounded_by_match_and_durable(void **state)
{
    (void)state;
    struct cluster *c = cluster_new(3, 0, 55);
    int64_t z0 = raft_make_zxid(1, 0), z1 = raft_make_zxid(1, 1), z2 = raft_make_zxid(1, 2);
    int64_t log1[] = {z0, z1, raft_make_zxid(1, 7)};
    boot_node(c, 1, 1, 1, z0, log1, 3);
    struct raft *r = c->nodes[1].r;
    struct raft_msg hb = {.type = RAFT_MSG_APPEND, .from = 1, .to = 2, .term = 1,
                          .prev_zxid = z0, .commit_zxid = z2};
    assert_int_equal(raft_step(r, &hb), RAFT_OK);
    assert_int_equal(status_of(c, 1).commit_zxid, z0);
    struct raft_ready rd;
    raft_ready(r, &rd);
    assert_int_equal(rd.n_committed, 0);
    assert_int_equal(rd.msgs[0].match_zxid, z0);
    raft_advance(r, &rd);
    /* entries arrive with a commit that covers them: durable first, then applied */
    struct raft_entry e = {z2, RAFT_ENTRY_DATA, (const uint8_t *)"q", 1};
    struct raft_msg app = hb;
    app.prev_zxid = z1, app.entries = &e, app.n_entries = 1;
    assert_int_equal(raft_step(r, &app), RAFT_OK);
    assert_int_equal(status_of(c, 1).commit_zxid, z2);
    assert_int_equal(status_of(c, 1).durable_zxid, z1);
    raft_ready(r, &rd);
    assert_true(rd.truncate);
    assert_int_equal(rd.truncate_after, z1); /* the stray (1,7) goes */
    assert_int_equal(rd.n_entries, 1);
    assert_int_equal(rd.entries[0].zxid, z2);
    assert_int_equal(rd.n_committed, 1);
    assert_int_equal(rd.committed[0].zxid, z1); /* z2 is not durable yet */
    assert_int_equal(rd.hard_state.commit_zxid, z1);
    raft_advance(r, &rd);
    raft_ready(r, &rd);
    assert_int_equal(rd.n_committed, 1);
    assert_int_equal(rd.committed[0].zxid, z2);
    raft_advance(r, &rd);
    assert_int_equal(status_of(c, 1).applied_zxid, z2);
    assert_false(raft_has_ready(r));
    cluster_free(c);
}

/* ---- bad, stale, duplicated and reordered messages ------------------------- */

static void assert_step_einval(struct cluster *c, uint32_t i, const struct raft_msg *m)
{
    struct raft_status before = status_of(c, i), after;
    assert_int_equal(raft_step(c->nodes[i].r, m), RAFT_EINVAL);
    after = status_of(c, i);
    assert_memory_equal(&before, &after, sizeof before);
    assert_false(raft_has_ready(c->nodes[i].r));
}

static void test_step_rejects_invalid_messages(void **state)
{
    (void)state;
    int li;
    struct cluster *c = stable_cluster(3, 0, 61, &li);
    uint32_t l = (uint32_t)li, f = (l + 1) % 3;
    propose(c, l, "a");
    settle(c);
    tick_all(c, HEARTBEAT);
    uint32_t term = status_of(c, f).term;
    int64_t commit = status_of(c, f).commit_zxid;
    assert_true(commit > raft_make_zxid(term, 0));
    struct raft_entry ents[2] = {{raft_make_zxid(term, 5), RAFT_ENTRY_DATA, (const uint8_t *)"x", 1},
                                 {raft_make_zxid(term, 4), RAFT_ENTRY_DATA, (const uint8_t *)"y", 1}};
    const struct raft_msg ok = {.type = RAFT_MSG_APPEND, .from = l + 1, .to = f + 1, .term = term,
                                .prev_zxid = commit, .commit_zxid = commit};
    struct raft_msg m;
    m = ok, m.to = l + 1;                 assert_step_einval(c, f, &m); /* to someone else */
    m = ok, m.from = 9;                   assert_step_einval(c, f, &m); /* not the term's leader */
    m = ok, m.from = 300;                 assert_step_einval(c, f, &m); /* no server's id */
    m = ok, m.from = f + 1;               assert_step_einval(c, f, &m); /* from itself */
    m = ok, m.type = 0;                   assert_step_einval(c, f, &m);
    m = ok, m.type = 99;                  assert_step_einval(c, f, &m);
    m = ok, m.term = RAFT_TERM_MAX + 1;   assert_step_einval(c, f, &m);
    m = ok, m.prev_zxid = -1;             assert_step_einval(c, f, &m);
    m = ok, m.entries = ents, m.n_entries = 2; assert_step_einval(c, f, &m); /* not increasing */
    m = ok, m.entries = ents + 1, m.n_entries = 1, m.prev_zxid = raft_make_zxid(term, 4);
    assert_step_einval(c, f, &m); /* not above prev */
    m = ok, m.entries = NULL, m.n_entries = 1; assert_step_einval(c, f, &m);
    struct raft_entry future = {raft_make_zxid(term + 1, 1), RAFT_ENTRY_DATA, (const uint8_t *)"z", 1};
    m = ok, m.entries = &future, m.n_entries = 1; assert_step_einval(c, f, &m); /* term above msg */
    struct raft_entry bad_type = {raft_make_zxid(term, 9), 7, NULL, 0};
    m = ok, m.entries = &bad_type, m.n_entries = 1; assert_step_einval(c, f, &m);
    /* an APPEND that would cut committed entries is refused, not obeyed */
    struct raft_entry other = {raft_make_zxid(0, 5), RAFT_ENTRY_DATA, (const uint8_t *)"w", 1};
    m = ok, m.prev_zxid = 0, m.entries = &other, m.n_entries = 1;
    assert_step_einval(c, f, &m);
    /* a second leader in the leader's own term */
    m = ok, m.from = f + 1, m.to = l + 1; assert_step_einval(c, l, &m);
    /* garbage-but-valid fields are absorbed without harm */
    struct raft_msg resp = {.type = RAFT_MSG_APPEND_RESP, .from = f + 1, .to = l + 1, .term = term,
                            .match_zxid = INT64_MAX, .read_ctx = UINT64_MAX};
    assert_int_equal(raft_step(c->nodes[l].r, &resp), RAFT_OK);
    assert_int_equal(status_of(c, l).commit_zxid, commit);
    node_ready(c, l);
    settle(c);
    assert_all_agree(c);
    cluster_free(c);
}

static void test_stale_duplicates_do_not_regress_or_truncate(void **state)
{
    (void)state;
    int li;
    struct cluster *c = stable_cluster(3, 0, 63, &li);
    uint32_t l = (uint32_t)li, f = (l + 1) % 3;
    uint32_t term = status_of(c, l).term;
    int64_t first = propose(c, l, "1");
    for (int k = 0; k < 4; k++)
        propose(c, l, "n");
    settle(c);
    tick_all(c, HEARTBEAT);
    int64_t commit = status_of(c, f).commit_zxid;
    assert_int_equal(commit, raft_make_zxid(term, 5));
    /* the first APPEND again, long after: held entries, nothing cut */
    struct raft_entry e = {first, RAFT_ENTRY_DATA, (const uint8_t *)"1", 1};
    struct raft_msg m = {.type = RAFT_MSG_APPEND, .from = l + 1, .to = f + 1, .term = term,
                         .prev_zxid = raft_make_zxid(term, 0), .commit_zxid = raft_make_zxid(term, 0),
                         .entries = &e, .n_entries = 1};
    assert_int_equal(raft_step(c->nodes[f].r, &m), RAFT_OK);
    struct raft_ready rd;
    raft_ready(c->nodes[f].r, &rd);
    assert_false(rd.truncate);
    assert_int_equal(rd.n_entries, 0);
    assert_int_equal(rd.n_msgs, 1);
    assert_int_equal(rd.msgs[0].type, RAFT_MSG_APPEND_RESP);
    assert_int_equal(rd.msgs[0].match_zxid, first);
    raft_advance(c->nodes[f].r, &rd);
    assert_int_equal(status_of(c, f).commit_zxid, commit);
    assert_int_equal(status_of(c, f).last_zxid, commit);
    /* stale answers at the leader: an old ack and an old reject */
    struct raft_msg ack = {.type = RAFT_MSG_APPEND_RESP, .from = f + 1, .to = l + 1, .term = term,
                           .match_zxid = first};
    assert_int_equal(raft_step(c->nodes[l].r, &ack), RAFT_OK);
    struct raft_msg rej = ack;
    rej.reject = true, rej.match_zxid = 0, rej.hint_zxid = 0;
    assert_int_equal(raft_step(c->nodes[l].r, &rej), RAFT_OK);
    assert_int_equal(status_of(c, l).commit_zxid, commit);
    assert_int_equal(status_of(c, l).peers[0].match_zxid >= commit ||
                         status_of(c, l).peers[1].match_zxid >= commit, 1);
    node_ready(c, l);
    settle(c);
    tick_all(c, HEARTBEAT);
    assert_int_equal(status_of(c, f).commit_zxid, commit);
    assert_all_agree(c);
    cluster_free(c);
}

/* Everything shuffled and a third of it duplicated, with leader changes:
 * node_ready's checks (commit never regresses, applied entries never cut,
 * apply in zxid order) run at every step; all agree in the end. */
static void test_shuffled_duplicated_delivery_converges(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 8; seed++) {
        struct cluster *c = cluster_new(3, 0, seed);
        c->shuffle = c->duplicate = true;
        cluster_start(c);
        int proposed = 0;
        for (int round = 0; round < 60; round++) {
            int l = leader_of(c);
            if (l >= 0 && raft_propose(c->nodes[l].r, "d", 1, NULL) == RAFT_OK) {
                node_ready(c, (uint32_t)l);
                proposed++;
            }
            if (round == 30 && l >= 0)
                isolate(c, (uint32_t)l, true); /* force a new term mid-way */
            if (round == 45)
                memset(c->cut, 0, sizeof c->cut);
            tick_all(c, 1);
        }
        c->shuffle = c->duplicate = false;
        tick_all(c, 4 * ELECTION);
        assert_true(proposed > 10);
        assert_all_agree(c);
        assert_true(c->nodes[0].n_sm > 5);
        cluster_free(c);
    }
}

/* ---- faults put in on purpose ---------------------------------------------- */

static int64_t isolated_leader_commit(uint32_t breaks, int64_t *proposed)
{
    struct cluster *c = cluster_new(3, 0, 71);
    c->cfg.break_on_purpose = breaks;
    cluster_start(c);
    uint32_t l = (uint32_t)wait_leader(c);
    tick_all(c, 2 * HEARTBEAT);
    isolate(c, l, true);
    *proposed = propose(c, l, "alone");
    settle(c);
    int64_t commit = status_of(c, l).commit_zxid;
    cluster_free(c);
    return commit;
}

static void test_break_commit_minority(void **state)
{
    (void)state;
    int64_t z;
    assert_true(isolated_leader_commit(0, &z) < z);
    assert_int_equal(isolated_leader_commit(RAFT_BREAK_COMMIT_MINORITY, &z), z);
}

static bool vote_granted_to_short_log(uint32_t breaks)
{
    struct cluster *c = cluster_new(3, 0, 73);
    c->cfg.break_on_purpose = breaks;
    int64_t log1[] = {raft_make_zxid(1, 0), raft_make_zxid(1, 1)};
    boot_node(c, 0, 1, 0, 0, log1, 2);
    bool granted = true;
    for (int pre = 1; pre >= 0; pre--) {
        struct raft_msg m = {.type = RAFT_MSG_VOTE_REQ, .from = 2, .to = 1, .term = 2,
                             .pre_vote = pre, .last_zxid = raft_make_zxid(1, 0)};
        assert_int_equal(raft_step(c->nodes[0].r, &m), RAFT_OK);
        struct raft_ready rd;
        raft_ready(c->nodes[0].r, &rd);
        assert_int_equal(rd.n_msgs, 1);
        assert_int_equal(rd.msgs[0].type, RAFT_MSG_VOTE_RESP);
        assert_int_equal(rd.msgs[0].pre_vote, pre);
        granted &= !rd.msgs[0].reject;
        raft_advance(c->nodes[0].r, &rd);
    }
    assert_int_equal(status_of(c, 0).vote, granted ? 2 : 0);
    cluster_free(c);
    return granted;
}

static void test_break_vote_log_check(void **state)
{
    (void)state;
    assert_false(vote_granted_to_short_log(0));
    assert_true(vote_granted_to_short_log(RAFT_BREAK_VOTE_LOG_CHECK));
}

/* ---- construction ------------------------------------------------------------- */

static void test_new_rejects_bad_config_and_boot(void **state)
{
    (void)state;
    struct raft_member ms[3] = {{1, true}, {2, true}, {3, false}};
    struct raft_cfg cfg = {.self_id = 1, .members = ms, .n_members = 3, .election_ticks = 10,
                           .heartbeat_ticks = 2};
    struct raft *r = raft_new(&cfg, NULL);
    assert_non_null(r);
    raft_free(r);
    struct raft_cfg bad = cfg;
    bad.self_id = 4;
    assert_null(raft_new(&bad, NULL));
    bad = cfg, bad.election_ticks = 2;
    assert_null(raft_new(&bad, NULL));
    struct raft_member dup[2] = {{1, true}, {1, true}};
    bad = cfg, bad.members = dup, bad.n_members = 2;
    assert_null(raft_new(&bad, NULL));
    struct raft_member none[2] = {{1, false}, {2, false}};
    bad = cfg, bad.members = none, bad.n_members = 2;
    assert_null(raft_new(&bad, NULL));
    struct raft_entry es[2] = {{raft_make_zxid(1, 2), RAFT_ENTRY_DATA, NULL, 0},
                               {raft_make_zxid(1, 1), RAFT_ENTRY_DATA, NULL, 0}};
    struct raft_boot boot = {{1, 0, 0}, 0, es, 2, NULL};
    assert_null(raft_new(&cfg, &boot)); /* out of order */
    boot = (struct raft_boot){{1, 0, 0}, raft_make_zxid(1, 1), es + 1, 1, NULL};
    assert_null(raft_new(&cfg, &boot)); /* not above the snapshot */
    boot = (struct raft_boot){{1, 256, 0}, 0, NULL, 0, NULL};
    assert_null(raft_new(&cfg, &boot)); /* a vote for an id no server has */
    /* a vote for a server this membership does not hold: one a later
     * (or earlier) membership did */
    boot = (struct raft_boot){{1, 9, 0}, 0, NULL, 0, NULL};
    r = raft_new(&cfg, &boot);
    assert_non_null(r);
    raft_free(r);
    boot = (struct raft_boot){{1, 2, raft_make_zxid(1, 2)}, 0, es, 1, NULL};
    r = raft_new(&cfg, &boot);
    assert_non_null(r);
    struct raft_status st;
    raft_status(r, &st);
    assert_int_equal(st.term, 1);
    assert_int_equal(st.vote, 2);
    assert_int_equal(st.commit_zxid, raft_make_zxid(1, 2));
    assert_int_equal(st.applied_zxid, raft_make_zxid(1, 2));
    assert_false(raft_has_ready(r)); /* booted state is already durable */
    raft_free(r);
    assert_string_equal(raft_role_name(RAFT_PRE_CANDIDATE), "pre-candidate");
    assert_string_equal(raft_msg_type_name(RAFT_MSG_SNAP), "SNAP");
}

/* A round of proposals reaches each follower as one APPEND, and each
 * proposal gets the zxid raft_next_zxid announced (the sequencer preps a
 * txn with it before proposing). */
static void test_proposals_between_readies_share_one_append(void **state)
{
    (void)state;
    int l;
    struct cluster *c = stable_cluster(3, 0, 7, &l);
    settle(c);
    assert_int_equal(raft_next_zxid(c->nodes[(l + 1) % 3].r), 0); /* a follower */
    size_t queued = c->n_q;
    int64_t first = 0;
    for (int k = 0; k < 10; k++) {
        int64_t want = raft_next_zxid(c->nodes[l].r);
        assert_true(want > 0);
        int64_t z = -1;
        assert_int_equal(raft_propose(c->nodes[l].r, "x", 1, &z), RAFT_OK);
        assert_true(z == want);
        if (k == 0)
            first = z;
        else
            assert_true(z == first + k);
    }
    assert_int_equal(c->n_q, queued); /* nothing sent before the ready */
    node_ready(c, (uint32_t)l);
    size_t appends = 0;
    for (size_t k = queued; k < c->n_q; k++) {
        if (c->q[k].m.type != RAFT_MSG_APPEND)
            continue;
        appends++;
        assert_int_equal(c->q[k].m.n_entries, 10);
        assert_true(c->q[k].m.entries[0].zxid == first);
    }
    assert_int_equal(appends, 2);
    settle(c);
    for (uint32_t i = 0; i < 3; i++)
        assert_true(sm_has(&c->nodes[i], first + 9));
    cluster_free(c);
}

/* A started server campaigns after first_election_ticks, not a whole
 * election timeout; restarting into an ensemble with a leader, the early
 * campaign loses its pre-vote and the leader's term stands. */
static void test_first_election_is_early_and_harmless(void **state)
{
    (void)state;
    struct cluster *c = cluster_new(3, 0, 11);
    c->cfg.first_election_ticks = 3;
    cluster_start(c);
    tick_all(c, ELECTION - 2); /* below ELECTION: only the early timer can fire */
    assert_true(leader_of(c) >= 0);
    int l = wait_leader(c);
    tick_all(c, 2 * HEARTBEAT);
    uint32_t term = status_of(c, (uint32_t)l).term;
    uint32_t f = (uint32_t)(l + 1) % 3;
    crash(c, f);
    restart(c, f);
    /* it hears no heartbeat, so it campaigns within six ticks; the other
     * follower, which does, refuses the pre-vote */
    c->cut[l][f] = true;
    tick_all(c, 8);
    assert_true(status_of(c, f).role == RAFT_PRE_CANDIDATE);
    c->cut[l][f] = false;
    tick_all(c, 4 * HEARTBEAT);
    assert_int_equal(leader_of(c), l);
    assert_int_equal(status_of(c, f).role, RAFT_FOLLOWER);
    assert_int_equal(status_of(c, (uint32_t)l).term, term);
    cluster_free(c);
    /* more than election_ticks is a configuration error */
    struct raft_member m = {1, true};
    struct raft_cfg bad = {.self_id = 1, .members = &m, .n_members = 1,
                           .election_ticks = ELECTION, .heartbeat_ticks = HEARTBEAT,
                           .first_election_ticks = ELECTION + 1};
    assert_null(raft_new(&bad, NULL));
}

/* ---- membership changes (joint consensus) ---------------------------------- */

/* voters in the first membership, then spares outside it */
static struct cluster *cluster_with_spares(uint32_t voters, uint32_t spares, uint64_t seed,
                                           int *leader)
{
    struct cluster *c = cluster_new(voters + spares, 0, seed);
    c->n_members = voters;
    cluster_start(c);
    *leader = wait_leader(c);
    tick_all(c, 2 * HEARTBEAT);
    return c;
}

static bool config_is(const struct raft_config *cf, const struct raft_member *m, uint32_t n)
{
    if (cf->n_old != 0 || cf->n_members != n)
        return false;
    for (uint32_t i = 0; i < n; i++) {
        bool found = false;
        for (uint32_t k = 0; k < cf->n_members; k++)
            found |= cf->members[k].id == m[i].id && cf->members[k].voter == m[i].voter;
        if (!found)
            return false;
    }
    return true;
}

/* Node l proposes the membership m (described by extra, NULL: none) and
 * the cluster runs until its final entry has committed on l; returns the
 * joint entry's zxid. */
static int64_t change_membership_described(struct cluster *c, uint32_t l,
                                           const struct raft_member *m, uint32_t n,
                                           const char *extra)
{
    int64_t joint = 0;
    size_t elen = extra ? strlen(extra) : 0;
    assert_int_equal(raft_propose_config(c->nodes[l].r, m, n, extra, elen, &joint), RAFT_OK);
    struct raft_status st = status_of(c, l);
    assert_int_equal(st.config_zxid, joint);
    assert_true(st.config.n_old > 0); /* joint until it commits */
    node_ready(c, l);
    for (int t = 0; t < 20 * ELECTION; t++) {
        st = status_of(c, l);
        if (st.config.n_old == 0 && st.config_zxid > joint && st.config_zxid <= st.commit_zxid)
            return joint;
        tick_all(c, 1);
    }
    fail_msg("the membership change did not complete");
    return 0;
}

static int64_t change_membership(struct cluster *c, uint32_t l, const struct raft_member *m,
                                 uint32_t n)
{
    return change_membership_described(c, l, m, n, NULL);
}

static void test_config_codec(void **state)
{
    (void)state;
    struct raft_config c = {.n_members = 3, .members = {{1, true}, {2, true}, {7, false}},
                            .n_old = 2, .old = {{1, true}, {2, true}}};
    static uint8_t buf[RAFT_CONFIG_BYTES_MAX];
    size_t n = raft_config_encode(&c, buf);
    assert_int_equal(n, 3 + 2 * 3 + 2 * 2 + 2);
    struct raft_config d;
    assert_int_equal(raft_config_decode(buf, n, &d), RAFT_OK);
    assert_int_equal(d.n_members, 3);
    assert_int_equal(d.n_old, 2);
    assert_int_equal(d.members[2].id, 7);
    assert_false(d.members[2].voter);
    assert_int_equal(d.extra_len, 0);
    /* the driver's description travels with it, byte for byte */
    c.extra_len = 300;
    for (uint32_t i = 0; i < c.extra_len; i++)
        c.extra[i] = (uint8_t)(i * 7);
    size_t ne = raft_config_encode(&c, buf);
    assert_int_equal(ne, n + 300);
    assert_int_equal(raft_config_decode(buf, ne, &d), RAFT_OK);
    assert_int_equal(d.extra_len, 300);
    assert_memory_equal(d.extra, c.extra, 300);
    assert_int_equal(raft_config_decode(buf, ne - 1, &d), RAFT_EINVAL); /* extra cut */
    buf[n - 2] = (uint8_t)((RAFT_CONFIG_EXTRA_MAX + 1) >> 8);
    buf[n - 1] = (uint8_t)(RAFT_CONFIG_EXTRA_MAX + 1);
    assert_int_equal(raft_config_decode(buf, ne, &d), RAFT_EINVAL); /* too long */
    c.extra_len = 0;
    n = raft_config_encode(&c, buf);
    assert_int_equal(raft_config_decode(buf, n - 1, &d), RAFT_EINVAL); /* short */
    static uint8_t longer[RAFT_CONFIG_BYTES_MAX + 1];
    memcpy(longer, buf, n);
    longer[n] = 0;
    assert_int_equal(raft_config_decode(longer, n + 1, &d), RAFT_EINVAL); /* trailing byte */
    static uint8_t bad[RAFT_CONFIG_BYTES_MAX];
    memcpy(bad, buf, n);
    bad[0] = 2;
    assert_int_equal(raft_config_decode(bad, n, &d), RAFT_EINVAL); /* version */
    memcpy(bad, buf, n);
    bad[2] = 0;
    assert_int_equal(raft_config_decode(bad, n, &d), RAFT_EINVAL); /* id 0 */
    memcpy(bad, buf, n);
    bad[4] = 1;
    assert_int_equal(raft_config_decode(bad, n, &d), RAFT_EINVAL); /* id twice */
    memcpy(bad, buf, n);
    bad[3] = 2;
    assert_int_equal(raft_config_decode(bad, n, &d), RAFT_EINVAL); /* voter not 0/1 */
    struct raft_config nov = {.n_members = 1, .members = {{1, false}}};
    n = raft_config_encode(&nov, buf);
    assert_int_equal(raft_config_decode(buf, n, &d), RAFT_EINVAL); /* no voter */
    /* both halves together may hold at most RAFT_MEMBERS_MAX servers */
    struct raft_config big = {.n_members = RAFT_MEMBERS_MAX, .n_old = 1, .old = {{200, true}}};
    for (uint32_t i = 0; i < RAFT_MEMBERS_MAX; i++)
        big.members[i] = (struct raft_member){i + 1, true};
    n = raft_config_encode(&big, buf);
    assert_int_equal(raft_config_decode(buf, n, &d), RAFT_EINVAL);
    big.old[0].id = 1;
    n = raft_config_encode(&big, buf);
    assert_int_equal(raft_config_decode(buf, n, &d), RAFT_OK);
    assert_int_equal(raft_config_decode(NULL, 0, &d), RAFT_EINVAL);
}

/* A voter and an observer join a three-voter ensemble: afterwards every
 * node uses the new membership, the new ones hold the whole log, and the
 * quorum is the new one's (3 of 4 voters). */
static void test_add_voter_and_observer(void **state)
{
    (void)state;
    int li;
    struct cluster *c = cluster_with_spares(3, 2, 71, &li);
    uint32_t l = (uint32_t)li;
    assert_int_equal(status_of(c, 3).role, RAFT_OBSERVER); /* a spare never campaigns */
    int64_t before = propose(c, l, "before");
    const struct raft_member next[] = {{1, true}, {2, true}, {3, true}, {4, true}, {5, false}};
    const char *desc = "1 2 3 4 5:observer";
    change_membership_described(c, l, next, 5, desc);
    int64_t after = propose(c, l, "after");
    settle(c);
    tick_all(c, 2 * HEARTBEAT);
    for (uint32_t i = 0; i < 5; i++) {
        struct raft_status st = status_of(c, i);
        assert_true(config_is(&st.config, next, 5));
        /* the final entry, which the leader made, carries the description */
        assert_int_equal(st.config.extra_len, strlen(desc));
        assert_memory_equal(st.config.extra, desc, strlen(desc));
        assert_true(sm_has(&c->nodes[i], before));
        assert_true(sm_has(&c->nodes[i], after));
    }
    assert_int_equal(status_of(c, 3).role, RAFT_FOLLOWER); /* a voter now */
    assert_int_equal(status_of(c, 4).role, RAFT_OBSERVER);
    assert_all_agree(c);
    /* 3 of the 4 voters commit; 2 do not */
    uint32_t f[3], nf = 0;
    for (uint32_t i = 0; i < 4; i++)
        if (i != l)
            f[nf++] = i;
    isolate(c, f[0], true);
    int64_t three = propose(c, l, "three");
    settle(c);
    tick_all(c, HEARTBEAT);
    assert_true(status_of(c, l).commit_zxid >= three);
    isolate(c, f[1], true);
    int64_t two = propose(c, l, "two");
    settle(c);
    tick_all(c, HEARTBEAT);
    assert_true(status_of(c, l).commit_zxid < two);
    cluster_free(c);
}

/* The leader removes itself: it leads through the joint phase, steps down
 * once the final membership commits, and never campaigns again; the rest
 * elect a leader among themselves and go on. */
static void test_leader_removes_itself(void **state)
{
    (void)state;
    int li;
    struct cluster *c = cluster_with_spares(3, 0, 73, &li);
    uint32_t l = (uint32_t)li;
    struct raft_member next[2];
    uint32_t n = 0;
    for (uint32_t i = 0; i < 3; i++)
        if (i != l)
            next[n++] = (struct raft_member){i + 1, true};
    change_membership(c, l, next, n);
    struct raft_status st = status_of(c, l);
    assert_int_equal(st.role, RAFT_OBSERVER);
    uint32_t term = st.term;
    tick_all(c, 6 * ELECTION);
    int nl = leader_of(c);
    assert_true(nl >= 0 && (uint32_t)nl != l);
    assert_int_equal(status_of(c, l).role, RAFT_OBSERVER);
    int64_t z = propose(c, (uint32_t)nl, "on");
    settle(c);
    tick_all(c, HEARTBEAT);
    for (uint32_t i = 0; i < 3; i++)
        if (i != l)
            assert_true(sm_has(&c->nodes[i], z));
    /* the removed server heard none of it, and raised no term of its own */
    assert_false(sm_has(&c->nodes[l], z));
    assert_true(status_of(c, l).term <= status_of(c, (uint32_t)nl).term);
    assert_true(status_of(c, l).term == term || status_of(c, l).term == status_of(c, (uint32_t)nl).term);
    cluster_free(c);
}

/* In the joint phase a majority of the old voters is not enough: with the
 * new members cut off, the joint entry does not commit (and the final one
 * is never appended); once they are back, the change completes. */
static void test_joint_needs_both_majorities(void **state)
{
    (void)state;
    int li;
    struct cluster *c = cluster_with_spares(3, 2, 75, &li);
    uint32_t l = (uint32_t)li;
    /* {1,2,3} -> {l, 4, 5}: the new majority needs a spare */
    const struct raft_member next[] = {{l + 1, true}, {4, true}, {5, true}};
    isolate(c, 3, true);
    isolate(c, 4, true);
    int64_t joint = 0;
    assert_int_equal(raft_propose_config(c->nodes[l].r, next, 3, NULL, 0, &joint), RAFT_OK);
    assert_int_equal(raft_propose_config(c->nodes[l].r, next, 3, NULL, 0, NULL), RAFT_EBUSY);
    node_ready(c, l);
    settle(c);
    /* the old voters all hold it, yet it does not commit; CheckQuorum
     * needs both halves too, so the leader steps down, and nobody can be
     * elected without a new voter */
    tick_all(c, 4 * ELECTION);
    for (uint32_t i = 0; i < 3; i++) {
        assert_true(log_has(c->nodes[i].r, joint));
        assert_true(status_of(c, i).commit_zxid < joint);
        assert_true(status_of(c, i).config.n_old > 0);
    }
    assert_true(leader_of(c) < 0);
    isolate(c, 3, false);
    isolate(c, 4, false);
    for (int t = 0; t < 50 * ELECTION; t++) {
        struct raft_status st = status_of(c, l);
        if (st.config.n_old == 0 && st.config_zxid > joint && st.config_zxid <= st.commit_zxid)
            break;
        tick_all(c, 1);
    }
    struct raft_status st = status_of(c, l);
    assert_true(config_is(&st.config, next, 3));
    assert_true(st.config_zxid <= st.commit_zxid);
    cluster_free(c);
}

static void test_propose_config_rules(void **state)
{
    (void)state;
    int li;
    struct cluster *c = cluster_with_spares(3, 1, 77, &li);
    uint32_t l = (uint32_t)li, f = (l + 1) % 3;
    const struct raft_member same[] = {{1, true}, {2, true}, {3, true}};
    const struct raft_member add[] = {{1, true}, {2, true}, {3, true}, {4, false}};
    const struct raft_member nov[] = {{1, false}, {2, false}};
    const struct raft_member dup[] = {{1, true}, {1, true}};
    const struct raft_member zero[] = {{0, true}};
    assert_int_equal(raft_propose_config(c->nodes[f].r, add, 4, NULL, 0, NULL), RAFT_ENOTLEADER);
    assert_int_equal(raft_propose_config(c->nodes[l].r, same, 3, NULL, 0, NULL), RAFT_EINVAL);
    assert_int_equal(raft_propose_config(c->nodes[l].r, nov, 2, NULL, 0, NULL), RAFT_EINVAL);
    assert_int_equal(raft_propose_config(c->nodes[l].r, dup, 2, NULL, 0, NULL), RAFT_EINVAL);
    assert_int_equal(raft_propose_config(c->nodes[l].r, zero, 1, NULL, 0, NULL), RAFT_EINVAL);
    assert_int_equal(raft_propose_config(c->nodes[l].r, add, 0, NULL, 0, NULL), RAFT_EINVAL);
    assert_int_equal(raft_propose_config(c->nodes[l].r, add, 4, NULL, 1, NULL), RAFT_EINVAL);
    static char longer[RAFT_CONFIG_EXTRA_MAX + 1];
    assert_int_equal(raft_propose_config(c->nodes[l].r, add, 4, longer, sizeof longer, NULL),
                     RAFT_EINVAL);
    int64_t joint = 0;
    assert_int_equal(raft_propose_config(c->nodes[l].r, add, 4, NULL, 0, &joint), RAFT_OK);
    assert_int_equal(raft_propose_config(c->nodes[l].r, same, 3, NULL, 0, NULL), RAFT_EBUSY);
    node_ready(c, l);
    settle(c);
    tick_all(c, 4 * HEARTBEAT);
    struct raft_status st = status_of(c, l);
    assert_true(config_is(&st.config, add, 4));
    /* done: the next change may start; the same members described anew
     * (a member's new address) are a change too, the same description not */
    assert_int_equal(raft_propose_config(c->nodes[l].r, add, 4, "moved", 5, NULL), RAFT_OK);
    node_ready(c, l);
    settle(c);
    tick_all(c, 4 * HEARTBEAT);
    st = status_of(c, l);
    assert_true(config_is(&st.config, add, 4) && st.config.extra_len == 5);
    assert_int_equal(raft_propose_config(c->nodes[l].r, add, 4, "moved", 5, NULL), RAFT_EINVAL);
    assert_int_equal(raft_propose_config(c->nodes[l].r, same, 3, NULL, 0, NULL), RAFT_OK);
    cluster_free(c);
}

/* A joint entry that never committed is truncated with the rest of a
 * deposed leader's tail, and the follower that held it goes back to the
 * membership before it. */
static void test_truncated_config_rewinds(void **state)
{
    (void)state;
    int li;
    struct cluster *c = stable_cluster(5, 0, 79, &li);
    uint32_t l = (uint32_t)li, f = (l + 1) % 5;
    struct raft_status before = status_of(c, f);
    /* only f hears the leader's joint entry */
    for (uint32_t i = 0; i < 5; i++)
        if (i != l && i != f)
            c->cut[l][i] = true;
    const struct raft_member next[] = {{1, true}, {2, true}, {3, true}, {4, true}};
    int64_t joint = 0;
    assert_int_equal(raft_propose_config(c->nodes[l].r, next, 4, NULL, 0, &joint), RAFT_OK);
    node_ready(c, l);
    settle(c);
    assert_true(log_has(c->nodes[f].r, joint));
    assert_true(status_of(c, f).config.n_old > 0);
    /* the leader dies; f is cut off while the other three elect a leader
     * whose log lacks the entry, and write */
    crash(c, l);
    isolate(c, f, true);
    int nl = -1;
    for (int t = 0; t < 50 * ELECTION && nl < 0; t++) {
        tick_all(c, 1);
        nl = leader_of(c);
    }
    assert_true(nl >= 0 && (uint32_t)nl != f);
    int64_t z = propose(c, (uint32_t)nl, "new");
    settle(c);
    tick_all(c, HEARTBEAT);
    isolate(c, f, false);
    for (uint32_t i = 0; i < 5; i++)
        if (i != l)
            c->cut[l][i] = c->cut[i][l] = false;
    tick_all(c, 4 * HEARTBEAT);
    assert_false(log_has(c->nodes[f].r, joint));
    assert_true(sm_has(&c->nodes[f], z));
    struct raft_status st = status_of(c, f);
    assert_int_equal(st.config.n_old, 0);
    assert_int_equal(st.config.n_members, before.config.n_members);
    assert_int_equal(st.config_zxid, 0);
    cluster_free(c);
}

/* The membership travels with snapshots: a node that restarts behind the
 * leader's compacted log gets a SNAP carrying the new membership, and one
 * that restarts from its own snapshot boots with it. */
static void test_membership_in_snapshots(void **state)
{
    (void)state;
    int li;
    struct cluster *c = cluster_with_spares(3, 1, 81, &li);
    uint32_t l = (uint32_t)li, f = (l + 1) % 3;
    crash(c, f);
    const struct raft_member next[] = {{1, true}, {2, true}, {3, true}, {4, true}};
    change_membership(c, l, next, 4);
    for (int k = 0; k < 4; k++)
        propose(c, l, "x");
    settle(c);
    tick_all(c, HEARTBEAT);
    compact(c, l, 0); /* the CONFIG entries are gone from the leader's log */
    restart(c, f);
    tick_all(c, 4 * HEARTBEAT);
    struct raft_status st = status_of(c, f);
    assert_true(config_is(&st.config, next, 4));
    assert_true(c->nodes[f].has_snap_conf);
    assert_true(config_is(&c->nodes[f].snap_conf, next, 4));
    /* the spare compacts too and restarts from its snapshot */
    tick_all(c, HEARTBEAT);
    compact(c, 3, 0);
    crash(c, 3);
    restart(c, 3);
    st = status_of(c, 3);
    assert_true(config_is(&st.config, next, 4));
    assert_int_equal(st.role, RAFT_FOLLOWER);
    assert_all_agree(c);
    cluster_free(c);
}


/* ---- resync: a diverged state machine rebuilt from the leader's snapshot -- */

/* Node i's state machine goes wrong at its k-th entry (as a bug or a bad
 * disk would make it): the driver would see the digests differ. */
static void corrupt_sm(struct cluster *c, uint32_t i, size_t k)
{
    struct node *nd = &c->nodes[i];
    assert_true(k < nd->n_sm);
    nd->sm[k].data[0] ^= 0x5a;
}

static bool sm_equal(const struct node *a, const struct node *b)
{
    if (a->n_sm != b->n_sm)
        return false;
    for (size_t k = 0; k < a->n_sm; k++)
        if (a->sm[k].zxid != b->sm[k].zxid || memcmp(a->sm[k].data, b->sm[k].data, DATA_MAX))
            return false;
    return true;
}

static void test_resync_rebuilds_from_leaders_snapshot_keeping_the_log(void **state)
{
    (void)state;
    int li;
    struct cluster *c = stable_cluster(3, 0, 57, &li);
    uint32_t l = (uint32_t)li, f = (l + 1) % 3;
    for (int k = 0; k < 10; k++)
        propose(c, l, "a");
    settle(c);
    tick_all(c, 2 * HEARTBEAT);
    compact(c, l, 4);
    int64_t snap = status_of(c, l).snap_zxid;
    int64_t last = 0;
    for (int k = 0; k < 3; k++)
        last = propose(c, l, "b");
    settle(c);
    tick_all(c, 2 * HEARTBEAT);
    assert_int_equal(status_of(c, f).applied_zxid, last);
    corrupt_sm(c, f, 2);
    assert_false(sm_equal(&c->nodes[l], &c->nodes[f]));
    assert_int_equal(raft_request_snapshot(c->nodes[l].r), RAFT_EINVAL);
    assert_int_equal(raft_request_snapshot(c->nodes[f].r), RAFT_OK);
    assert_true(status_of(c, f).snap_wanted > 0);
    tick_all(c, 2 * HEARTBEAT);
    /* rebuilt from the leader's snapshot, then the entries after it applied
     * again from its own log, which it kept */
    assert_int_equal(c->nodes[f].snap_zxid, snap);
    assert_true(sm_equal(&c->nodes[l], &c->nodes[f]));
    assert_true(log_has(c->nodes[f].r, last));
    struct raft_status fs = status_of(c, f);
    assert_int_equal(fs.snap_wanted, 0);
    assert_int_equal(fs.applied_zxid, last);
    assert_int_equal(fs.commit_zxid, last);
    assert_int_equal(fs.snap_zxid, snap);
    /* and it goes on following */
    int64_t z = propose(c, l, "c");
    settle(c);
    tick_all(c, HEARTBEAT);
    assert_int_equal(status_of(c, f).applied_zxid, z);
    assert_all_agree(c);
    cluster_free(c);
}

static void test_resync_waits_for_a_snapshot_above_its_log_base(void **state)
{
    (void)state;
    int li;
    struct cluster *c = stable_cluster(3, 0, 58, &li);
    uint32_t l = (uint32_t)li, f = (l + 1) % 3;
    for (int k = 0; k < 5; k++)
        propose(c, l, "a");
    settle(c);
    tick_all(c, 2 * HEARTBEAT);
    compact(c, l, 0); /* the leader's snapshot: 5 entries in */
    int64_t old_snap = status_of(c, l).snap_zxid;
    for (int k = 0; k < 5; k++)
        propose(c, l, "b");
    settle(c);
    tick_all(c, 2 * HEARTBEAT);
    compact(c, f, 0); /* the follower's own, newer: its log starts after it */
    int64_t f_base = status_of(c, f).snap_zxid;
    assert_true(f_base > old_snap);
    corrupt_sm(c, f, 7);
    assert_int_equal(raft_request_snapshot(c->nodes[f].r), RAFT_OK);
    tick_all(c, 3 * HEARTBEAT);
    /* the leader's snapshot would lose entries the follower holds: none is
     * sent, and the leader says what it needs */
    assert_int_equal(c->nodes[f].snap_zxid, f_base);
    assert_false(sm_equal(&c->nodes[l], &c->nodes[f]));
    struct raft_status ls = status_of(c, l);
    bool wanted = false;
    for (uint32_t k = 0; k < ls.n_peers; k++)
        if (ls.peers[k].id == f + 1)
            wanted = ls.peers[k].snap_wanted == f_base;
    assert_true(wanted);
    /* a new snapshot on the leader ends the wait */
    int64_t last = propose(c, l, "c");
    settle(c);
    tick_all(c, HEARTBEAT);
    compact(c, l, 0);
    tick_all(c, 3 * HEARTBEAT);
    assert_int_equal(c->nodes[f].snap_zxid, last);
    assert_true(sm_equal(&c->nodes[l], &c->nodes[f]));
    assert_int_equal(status_of(c, f).snap_wanted, 0);
    ls = status_of(c, l);
    for (uint32_t k = 0; k < ls.n_peers; k++)
        assert_int_equal(ls.peers[k].snap_wanted, 0);
    cluster_free(c);
}

/* ---- commit notices ------------------------------------------------------ */

static unsigned NOTICES, APPEND_ANSWERS;
static int64_t LAST_NOTICE_PREV;

static bool count_appends(const struct cluster *c, const struct raft_msg *m)
{
    (void)c;
    if (m->type == RAFT_MSG_APPEND && m->no_ack) {
        assert_int_equal(m->n_entries, 0); /* only an empty APPEND is a notice */
        NOTICES++;
        LAST_NOTICE_PREV = m->prev_zxid;
    }
    if (m->type == RAFT_MSG_APPEND_RESP)
        APPEND_ANSWERS++;
    return false;
}

/* The leader tells followers of a commit with an APPEND they need not
 * answer: a round costs one ack per follower, not two. Heartbeats are still
 * answered (CheckQuorum, probing), and so is a notice whose prev a follower
 * lacks. */
static void test_commit_notice_is_not_answered(void **state)
{
    (void)state;
    int li;
    struct cluster *c = stable_cluster(3, 0, 91, &li);
    uint32_t l = (uint32_t)li;
    c->drop = count_appends;
    NOTICES = APPEND_ANSWERS = 0;
    int64_t z = propose(c, l, "one");
    settle(c);
    /* the entries' APPENDs are answered (2), the notices (2) are not */
    assert_int_equal(NOTICES, 2);
    assert_int_equal(LAST_NOTICE_PREV, z);
    assert_int_equal(APPEND_ANSWERS, 2);
    for (uint32_t i = 0; i < 3; i++)
        assert_true(sm_has(&c->nodes[i], z)); /* and the followers applied it */
    /* heartbeats are answered */
    APPEND_ANSWERS = 0;
    tick_node(c, l, HEARTBEAT);
    settle(c);
    assert_int_equal(APPEND_ANSWERS, 2);
    /* a follower that lost the entries rejects the notice, answering it */
    uint32_t f = (l + 1) % 3;
    c->cut[l][f] = true;
    propose(c, l, "two");
    settle(c);
    c->cut[l][f] = false;
    APPEND_ANSWERS = NOTICES = 0;
    int64_t z3 = propose(c, l, "three");
    settle(c);
    assert_true(NOTICES >= 1);
    tick_all(c, 2 * HEARTBEAT);
    assert_true(sm_has(&c->nodes[f], z3));
    assert_all_agree(c);
    cluster_free(c);
}

/* ---- cfg.async_log: the log is made durable after raft_advance ---------- */

static struct raft *async_follower(void)
{
    static const struct raft_member members[] = { { 1, true }, { 2, true }, { 3, true } };
    struct raft_cfg cfg = { .self_id = 2, .members = members, .n_members = 3,
                            .election_ticks = ELECTION, .heartbeat_ticks = HEARTBEAT,
                            .seed = 7, .async_log = true };
    struct raft *r = raft_new(&cfg, NULL);
    assert_non_null(r);
    return r;
}

/* Steps an APPEND of entries at zxids zs (no-ops) after prev from the
 * leader of term, then runs the ready without touching the disk: returns
 * how many messages it would send (the ack among them). */
static size_t async_append(struct raft *r, uint32_t leader, uint32_t term, int64_t prev,
                           const int64_t *zs, uint32_t n, int64_t commit)
{
    struct raft_entry ents[4];
    assert_true(n <= 4);
    for (uint32_t i = 0; i < n; i++)
        ents[i] = (struct raft_entry){ .zxid = zs[i], .type = RAFT_ENTRY_NOOP };
    struct raft_msg m = { .type = RAFT_MSG_APPEND, .from = leader, .to = 2, .term = term,
                          .prev_zxid = prev, .commit_zxid = commit, .entries = ents,
                          .n_entries = n };
    assert_int_equal(raft_step(r, &m), RAFT_OK);
    struct raft_ready rd;
    raft_ready(r, &rd);
    size_t n_msgs = rd.n_msgs;
    for (size_t i = 0; i < rd.n_msgs; i++)
        assert_false(raft_msg_early(&rd.msgs[i])); /* a follower's acks wait for the disk */
    raft_advance(r, &rd);
    return n_msgs;
}

static int64_t durable_of(const struct raft *r)
{
    struct raft_status st;
    raft_status(r, &st);
    return st.durable_zxid;
}

/* Batches become durable in order, as the driver reports them; a
 * truncation cuts what a batch still on its way makes durable, even when
 * the entries that replace the cut ones have lower zxids than the batch's
 * last (they come from an older term than the ones truncated). */
static void test_async_log_batches_and_truncation(void **state)
{
    (void)state;
    struct raft *r = async_follower();
    const int64_t z10 = raft_make_zxid(1, 0), z11 = raft_make_zxid(1, 1);
    const int64_t z20 = raft_make_zxid(2, 0), z21 = raft_make_zxid(2, 1);
    const int64_t z30 = raft_make_zxid(3, 0);
    /* term 2's leader (3) sends (1,0) (2,0) (2,1): one batch, not durable */
    const int64_t first[] = { z10, z20, z21 };
    assert_int_equal(async_append(r, 3, 2, 0, first, 3, 0), 1);
    assert_int_equal(raft_log_unsynced(r), 1);
    assert_true(durable_of(r) == 0);
    /* term 3's leader (1) holds (1,0) (1,1) (3,0): the tail after (1,0) goes */
    const int64_t second[] = { z11, z30 };
    assert_int_equal(async_append(r, 1, 3, z10, second, 2, 0), 1);
    assert_int_equal(raft_log_unsynced(r), 2);
    /* the first batch on disk holds (1,0) of this log, nothing more: (2,1)
     * is above (1,1) but (1,1) is not on the disk yet */
    raft_log_synced(r, 1);
    assert_true(durable_of(r) == z10);
    assert_int_equal(raft_log_unsynced(r), 1);
    raft_log_synced(r, 1);
    assert_true(durable_of(r) == z30);
    assert_int_equal(raft_log_unsynced(r), 0);
    raft_free(r);
}

/* Runs r's ready without a disk: returns the type of its first message
 * (0: none) and, in *committed, how many entries it hands out to apply. */
static uint8_t async_ready(struct raft *r, size_t *committed)
{
    struct raft_ready rd;
    raft_ready(r, &rd);
    uint8_t type = rd.n_msgs ? rd.msgs[0].type : 0;
    if (committed)
        *committed = rd.n_committed;
    raft_advance(r, &rd);
    return type;
}

/* A leader whose own disk is slow commits on its followers' acks, hands
 * the entry out to apply at once (a client may have seen the commit
 * through a follower already), and counts its own ack once synced. */
static void test_async_log_leader_commits_on_followers(void **state)
{
    (void)state;
    static const struct raft_member members[] = { { 1, true }, { 2, true }, { 3, true } };
    struct raft_cfg cfg = { .self_id = 1, .members = members, .n_members = 3,
                            .election_ticks = ELECTION, .heartbeat_ticks = HEARTBEAT,
                            .seed = 3, .async_log = true };
    struct raft *r = raft_new(&cfg, NULL);
    assert_non_null(r);
    /* pre-vote, then the vote, each granted by server 2 */
    for (int round = 0; round < 2; round++) {
        uint8_t type = 0;
        for (int t = 0; t < 4 * ELECTION && type != RAFT_MSG_VOTE_REQ; t++) {
            raft_tick(r);
            type = raft_has_ready(r) ? async_ready(r, NULL) : 0;
        }
        assert_int_equal(type, RAFT_MSG_VOTE_REQ);
        struct raft_status st;
        raft_status(r, &st);
        struct raft_msg grant = { .type = RAFT_MSG_VOTE_RESP, .from = 2, .to = 1,
                                  .term = round == 0 ? st.term + 1 : st.term,
                                  .pre_vote = round == 0 };
        assert_int_equal(raft_step(r, &grant), RAFT_OK);
    }
    struct raft_status st;
    raft_status(r, &st);
    assert_int_equal(st.role, RAFT_LEADER);
    size_t committed = 0;
    assert_int_equal(async_ready(r, &committed), RAFT_MSG_APPEND); /* the no-op goes out */
    raft_status(r, &st);
    int64_t noop = st.last_zxid;
    assert_true(st.durable_zxid < noop);
    assert_int_equal(raft_log_unsynced(r), 1);
    /* one follower's ack is not a quorum without the leader's own disk */
    struct raft_msg ack = { .type = RAFT_MSG_APPEND_RESP, .from = 2, .to = 1, .term = st.term,
                            .match_zxid = noop };
    assert_int_equal(raft_step(r, &ack), RAFT_OK);
    raft_status(r, &st);
    assert_true(st.commit_zxid < noop);
    /* the second follower's is */
    ack.from = 3;
    assert_int_equal(raft_step(r, &ack), RAFT_OK);
    raft_status(r, &st);
    assert_true(st.commit_zxid == noop);
    (void)async_ready(r, &committed);
    assert_int_equal(committed, 1);
    raft_status(r, &st);
    assert_true(st.applied_zxid == noop && st.durable_zxid < noop);
    raft_log_synced(r, 1);
    raft_status(r, &st);
    assert_true(st.durable_zxid == noop);
    assert_int_equal(raft_log_unsynced(r), 0);
    raft_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_voter_commits_immediately),
        cmocka_unit_test(test_three_nodes_elect_one_leader),
        cmocka_unit_test(test_first_election_is_early_and_harmless),
        cmocka_unit_test(test_proposals_apply_in_zxid_order),
        cmocka_unit_test(test_proposals_between_readies_share_one_append),
        cmocka_unit_test(test_leader_crash_truncates_uncommitted_tail),
        cmocka_unit_test(test_fig8_old_term_entry_commits_only_under_current_term),
        cmocka_unit_test(test_prevote_rejoin_keeps_term_and_leader),
        cmocka_unit_test(test_check_quorum_isolated_leader_steps_down),
        cmocka_unit_test(test_lease_ignores_higher_term_vote),
        cmocka_unit_test(test_counter_limit_steps_down_and_next_term_restarts),
        cmocka_unit_test(test_read_index_on_leader_waits_for_noop_and_quorum),
        cmocka_unit_test(test_read_index_through_follower_and_failure_on_step_down),
        cmocka_unit_test(test_read_index_without_leader),
        cmocka_unit_test(test_compaction_and_snap_catch_up),
        cmocka_unit_test(test_snap_names_the_newest_snapshot),
        cmocka_unit_test(test_observer_follows_but_never_counts_or_campaigns),
        cmocka_unit_test(test_restart_from_boot_keeps_term_vote_and_log),
        cmocka_unit_test(test_restart_keeps_one_vote_per_term),
        cmocka_unit_test(test_follower_commit_bounded_by_match_and_durable),
        cmocka_unit_test(test_step_rejects_invalid_messages),
        cmocka_unit_test(test_stale_duplicates_do_not_regress_or_truncate),
        cmocka_unit_test(test_shuffled_duplicated_delivery_converges),
        cmocka_unit_test(test_break_commit_minority),
        cmocka_unit_test(test_break_vote_log_check),
        cmocka_unit_test(test_new_rejects_bad_config_and_boot),
        cmocka_unit_test(test_config_codec),
        cmocka_unit_test(test_add_voter_and_observer),
        cmocka_unit_test(test_leader_removes_itself),
        cmocka_unit_test(test_joint_needs_both_majorities),
        cmocka_unit_test(test_propose_config_rules),
        cmocka_unit_test(test_truncated_config_rewinds),
        cmocka_unit_test(test_membership_in_snapshots),
        cmocka_unit_test(test_resync_rebuilds_from_leaders_snapshot_keeping_the_log),
        cmocka_unit_test(test_resync_waits_for_a_snapshot_above_its_log_base),
        cmocka_unit_test(test_commit_notice_is_not_answered),
        cmocka_unit_test(test_async_log_batches_and_truncation),
        cmocka_unit_test(test_async_log_leader_commits_on_followers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
