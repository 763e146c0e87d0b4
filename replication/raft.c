/*
 * raft.c — the Raft core behind replication/raft.h, on zxid log positions.
 * replication/README.md describes the protocol as built; this file is laid
 * out in the order a message travels: the log, the outbox, elections,
 * replication (leader then follower), ReadIndex, then Ready/advance.
 *
 * Ownership: the core owns copies of every log entry's data, of the
 * snapshot bytes a SNAP carried, and the arrays raft_ready points into.
 * Queued APPEND messages do not hold entry pointers until raft_ready,
 * because the log array may move (realloc) or shrink (compaction,
 * truncation) between the step that queued them and the ready.
 */
#include "replication/raft.h"

#include <stdlib.h>
#include <string.h>

#include "base/base.h"

#define RAFT_DEFAULT_COUNTER_LIMIT 0xfffffffeu
#define RAFT_DEFAULT_APPEND_ENTRIES 64u
#define RAFT_DEFAULT_APPEND_BYTES ((size_t)1 << 20)
#define RAFT_ELECTION_TICKS_MAX (1u << 30) /* 2 * election_ticks fits in 32 bits */
#define RAFT_NOT_FOUND ((size_t)-1)
#define RAFT_TICKS_SATURATE (1u << 31)
#define RAFT_ID_MAX 255u /* myid's range: ids fit one byte in a CONFIG entry */
#define RAFT_CONFIG_VERSION 1u

/* What the core knows about one member (self included, at index r->self,
 * even when the membership does not hold it). */
struct raft_peer {
    uint32_t id;
    bool member;    /* in the membership (either half of a joint one) */
    bool voter;     /* votes in the membership: vnew || vold */
    bool vnew;      /* a voter of conf.members */
    bool vold;      /* a voter of conf.old (a joint membership) */
    uint8_t ballot; /* this campaign: BALLOT_* */
    int64_t match;         /* leader: highest zxid known held there */
    int64_t prev;          /* leader: prev_zxid of the next APPEND (optimistic) */
    bool active;           /* leader: heard from in this CheckQuorum window */
    bool snap_pending;     /* leader: a SNAP is out, entries wait for its ack */
    int64_t snap_sent;     /* leader: the snap_zxid that SNAP carried */
    uint32_t snap_elapsed; /* leader: ticks since that SNAP left */
    uint64_t read_ack;     /* leader: highest read_ctx echoed this term */
    int64_t snap_wanted;   /* leader: it asked for a SNAP at or above this (0: no) */
    int64_t resync_sent;   /* leader: the SNAP sent for that ask (0: none yet) */
    uint32_t resync_elapsed; /* leader: ticks since it left */
};

/* A ReadIndex request the leader holds until a quorum confirms it. */
struct raft_pending_read {
    uint64_t ctx;
    uint32_t from; /* 0: local (raft_read_index); else a forwarding member */
    int64_t zxid;  /* the commit zxid recorded when its round started */
    uint64_t seq;  /* its heartbeat round's read_ctx; 0: not started yet */
};

enum { BALLOT_NONE = 0, BALLOT_GRANTED = 1, BALLOT_REJECTED = 2 };

struct raft {
    struct raft_cfg cfg; /* members pointer cleared: peers[] holds them */
    /* the union of both halves of a joint membership (at most
     * RAFT_MEMBERS_MAX: config_valid), and self */
    struct raft_peer peers[RAFT_MEMBERS_MAX + 1];
    uint32_t n_peers;
    uint32_t self;
    uint64_t rng;

    /* Membership (Raft section 6): conf is the newest CONFIG entry in the
     * log (conf_zxid), else base_conf, the one in effect at log_base
     * (a compacted entry's, the snapshot's, or cfg's). */
    struct raft_config conf, base_conf, cfg_conf;
    int64_t conf_zxid;
    /* this node voted in the membership before conf: until conf commits it
     * may still be needed to elect the leader that commits it (the Raft
     * thesis, 4.2.2), so it campaigns even when conf leaves it out */
    bool voted_before;
    struct raft_config snap_conf; /* what this ready's SNAPs carry */

    enum raft_role role;
    uint32_t term;
    uint32_t vote;
    uint32_t leader_id;
    struct raft_hard_state persisted;

    /* The log after log_base; entries [0, n_stable) have been handed out
     * for persistence; log_base <= snap_zxid (compaction keeps a tail). */
    struct raft_entry *log;
    size_t n_log, cap_log, n_stable;
    int64_t log_base, snap_zxid;
    int64_t commit, applied, durable;
    /* cfg.async_log: the log batches handed out and not yet synced, oldest
     * first, each as the zxid through which it leaves the log durable
     * (lowered when a later truncation cuts into it) */
    int64_t batch_last[RAFT_LOG_BATCHES_MAX];
    size_t batch_head, n_batches;

    uint32_t election_elapsed, election_timeout, lease_elapsed;
    uint32_t heartbeat_elapsed, quorum_elapsed;

    struct raft_msg *msgs;
    int64_t *msg_first; /* APPEND with entries: zxid of its first entry */
    size_t n_msgs, cap_msgs;
    struct raft_read *reads;
    size_t n_reads, cap_reads;
    struct raft_pending_read *pending;
    size_t n_pending, cap_pending;
    uint64_t read_seq;

    bool truncate;
    int64_t truncate_after;
    bool snap_ready;
    struct raft_snapshot snap;
    /* not leading: > 0 while this node waits for the leader's snapshot to
     * rebuild its state machine from (raft_request_snapshot); it is the
     * lowest snapshot zxid that keeps every log entry this node holds */
    int64_t want_snap_from;
    /* a resync's snapshot is in r->snap, not yet handed out: the state
     * machine is still the diverged one until the ready installs it */
    bool resync_handing;

    bool in_ready; /* between raft_ready and raft_advance */
    struct raft_ready handed;
    /* raft_propose appended entries not yet offered to followers: the next
     * raft_ready sends them, so a round of N proposals costs one APPEND per
     * follower, not N */
    bool append_pending;
};

/* ---- small helpers ---------------------------------------------------- */

/* A copy of len bytes at data in *out (NULL for none). RAFT_OK, or
 * RAFT_ENOMEM with *out NULL. */
static int copy_bytes(const void *data, size_t len, uint8_t **out)
{
    *out = NULL;
    if (len == 0)
        return RAFT_OK;
    *out = malloc(len);
    if (!*out)
        return RAFT_ENOMEM;
    memcpy(*out, data, len);
    return RAFT_OK;
}

static uint64_t rng_next(struct raft *r)
{
    return base_splitmix64(&r->rng); /* one word of state: election jitter */
}

static struct raft_peer *peer_by_id(struct raft *r, uint32_t id)
{
    for (uint32_t i = 0; i < r->n_peers; i++)
        if (r->peers[i].id == id)
            return &r->peers[i];
    return NULL;
}

static uint32_t self_id(const struct raft *r)
{
    return r->cfg.self_id;
}

static bool self_voter(const struct raft *r)
{
    return r->peers[r->self].voter;
}

/* Whether this node may campaign: it votes in its membership, or did in
 * the one before while this one is not known committed. */
static bool may_campaign(const struct raft *r)
{
    return self_voter(r) || (r->voted_before && r->conf_zxid > r->commit);
}

static void reset_election_timer(struct raft *r);

/* A node that is not leading follows when it may campaign, else observes
 * (a campaign it may no longer run ends). A leader leads on until its final
 * membership commits (leader_after_commit). */
static void settle_role(struct raft *r)
{
    if (r->role == RAFT_LEADER || r->role == 0)
        return;
    if (!may_campaign(r)) {
        r->role = RAFT_OBSERVER;
    } else if (r->role == RAFT_OBSERVER) {
        r->role = RAFT_FOLLOWER;
        reset_election_timer(r);
    }
}

/* Whether peer i votes in the old half (old) or the new one (!old). */
static bool votes_in(const struct raft_peer *p, bool old)
{
    return old ? p->vold : p->vnew;
}

/* Whether the peers yes() holds for are a majority of the voters of the
 * membership and, while it is joint, of the old one's too. */
typedef bool (*peer_pred)(const struct raft *r, uint32_t i);
static bool majority_in(const struct raft *r, bool old, peer_pred yes)
{
    uint32_t voters = 0, n = 0;
    for (uint32_t i = 0; i < r->n_peers; i++) {
        if (!votes_in(&r->peers[i], old))
            continue;
        voters++;
        n += yes(r, i);
    }
    BASE_ASSERT(voters > 0); /* every membership has a voter (config_valid) */
    return n >= voters / 2 + 1;
}

static bool has_quorum(const struct raft *r, peer_pred yes)
{
    return majority_in(r, false, yes) && (r->conf.n_old == 0 || majority_in(r, true, yes));
}

/* The largest value v such that a majority of each half's voters have
 * value(i) >= v: what a quorum holds (commit, ReadIndex acks). */
typedef int64_t (*peer_value)(const struct raft *r, uint32_t i);
static int64_t quorum_value_in(const struct raft *r, bool old, peer_value value)
{
    int64_t v[RAFT_MEMBERS_MAX + 1];
    uint32_t n = 0;
    for (uint32_t i = 0; i < r->n_peers; i++)
        if (votes_in(&r->peers[i], old))
            v[n++] = value(r, i);
    BASE_ASSERT(n > 0);
    uint32_t k = n / 2 + 1;
    /* the k-th largest, by selection: n is at most 33 */
    for (uint32_t a = 0; a < k; a++)
        for (uint32_t b = a + 1; b < n; b++)
            if (v[b] > v[a]) {
                int64_t t = v[a];
                v[a] = v[b];
                v[b] = t;
            }
    return v[k - 1];
}

static int64_t quorum_value(const struct raft *r, peer_value value)
{
    int64_t x = quorum_value_in(r, false, value);
    if (r->conf.n_old > 0) {
        int64_t y = quorum_value_in(r, true, value);
        if (y < x)
            x = y;
    }
    return x;
}

static void tick_up(uint32_t *ticks)
{
    if (*ticks < RAFT_TICKS_SATURATE)
        (*ticks)++;
}

/* ---- the log ---------------------------------------------------------- */

static int64_t log_last(const struct raft *r)
{
    return r->n_log ? r->log[r->n_log - 1].zxid : r->log_base;
}

/* Index of the first entry with zxid > z (n_log if none). */
static size_t log_upper(const struct raft *r, int64_t z)
{
    size_t lo = 0, hi = r->n_log;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->log[mid].zxid <= z)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static size_t log_find(const struct raft *r, int64_t z)
{
    size_t i = log_upper(r, z);
    return i > 0 && r->log[i - 1].zxid == z ? i - 1 : RAFT_NOT_FOUND;
}

/* The largest zxid this node holds that is <= z (log_base if none). */
static int64_t log_largest_le(const struct raft *r, int64_t z)
{
    size_t i = log_upper(r, z);
    return i > 0 ? r->log[i - 1].zxid : r->log_base;
}

static void entry_free(struct raft_entry *e)
{
    free((void *)e->data);
    e->data = NULL;
}

static void conf_take(struct raft *r, const struct raft_entry *e);

/* Appends a copy of e (data copied). RAFT_ENOMEM leaves the log as it was.
 * A CONFIG entry is in effect from here on (the Raft paper, section 6). */
static int log_append(struct raft *r, const struct raft_entry *e)
{
    BASE_ASSERT(e->zxid > log_last(r)); /* log zxids strictly increase */
    BASE_ASSERT(e->type == RAFT_ENTRY_NOOP || e->type == RAFT_ENTRY_DATA ||
                e->type == RAFT_ENTRY_CONFIG);
    if (base_grow(&r->log, &r->cap_log, r->n_log + 1, sizeof *r->log) != 0)
        return RAFT_ENOMEM;
    uint8_t *copy;
    if (copy_bytes(e->data, e->len, &copy) != RAFT_OK)
        return RAFT_ENOMEM;
    r->log[r->n_log++] = (struct raft_entry){e->zxid, e->type, copy, e->len};
    if (e->type == RAFT_ENTRY_CONFIG)
        conf_take(r, &r->log[r->n_log - 1]);
    return RAFT_OK;
}

/* Queued APPENDs that refer to log index keep or later are dropped before
 * those entries go: they were built by a leadership this node has lost,
 * and a dropped message is one the network could have lost anyway. */
static void drop_msgs_beyond(struct raft *r, size_t keep)
{
    size_t k = 0;
    for (size_t i = 0; i < r->n_msgs; i++) {
        const struct raft_msg *m = &r->msgs[i];
        if (m->type == RAFT_MSG_APPEND && m->n_entries > 0) {
            size_t at = log_find(r, r->msg_first[i]);
            BASE_ASSERT(at != RAFT_NOT_FOUND);
            if (at + m->n_entries > keep)
                continue;
        }
        r->msgs[k] = r->msgs[i];
        r->msg_first[k] = r->msg_first[i];
        k++;
    }
    r->n_msgs = k;
}

static void conf_rewind(struct raft *r);

/* A batch still on its way to the disk makes the log durable only up to
 * what the log holds now: a truncation cuts it back to after. */
static void batches_cap(struct raft *r, int64_t after)
{
    for (size_t i = 0; i < r->n_batches; i++) {
        int64_t *last = &r->batch_last[(r->batch_head + i) % RAFT_LOG_BATCHES_MAX];
        if (*last > after)
            *last = after;
    }
}

/* Drops every entry with zxid > after and reports it in the next ready.
 * Committed entries are never dropped: that would lose acknowledged data.
 * A membership they held goes with them. */
static void log_truncate_after(struct raft *r, int64_t after)
{
    BASE_ASSERT(after >= r->commit);
    BASE_ASSERT(after >= r->log_base);
    size_t keep = log_upper(r, after);
    drop_msgs_beyond(r, keep);
    for (size_t i = keep; i < r->n_log; i++)
        entry_free(&r->log[i]);
    r->n_log = keep;
    if (r->n_stable > keep)
        r->n_stable = keep;
    if (r->durable > after)
        r->durable = after;
    batches_cap(r, after);
    if (!r->truncate || after < r->truncate_after)
        r->truncate_after = after;
    r->truncate = true;
    if (r->conf_zxid > after)
        conf_rewind(r);
}

/* ---- membership ------------------------------------------------------- */

static bool list_valid(const struct raft_member *m, uint32_t n)
{
    if (n == 0 || n > RAFT_MEMBERS_MAX)
        return false;
    bool voter = false;
    for (uint32_t i = 0; i < n; i++) {
        if (m[i].id == 0 || m[i].id > RAFT_ID_MAX)
            return false;
        for (uint32_t j = 0; j < i; j++)
            if (m[j].id == m[i].id)
                return false;
        voter |= m[i].voter;
    }
    return voter;
}

static const struct raft_member *member_in(const struct raft_member *m, uint32_t n, uint32_t id)
{
    for (uint32_t i = 0; i < n; i++)
        if (m[i].id == id)
            return &m[i];
    return NULL;
}

/* Both halves valid, and together at most RAFT_MEMBERS_MAX servers. */
static bool config_valid(const struct raft_config *c)
{
    if (!list_valid(c->members, c->n_members) || (c->n_old && !list_valid(c->old, c->n_old)))
        return false;
    uint32_t n = c->n_members;
    for (uint32_t i = 0; i < c->n_old; i++)
        n += member_in(c->members, c->n_members, c->old[i].id) == NULL;
    return n <= RAFT_MEMBERS_MAX;
}

size_t raft_config_encode(const struct raft_config *c, uint8_t out[RAFT_CONFIG_BYTES_MAX])
{
    BASE_ASSERT(c->n_members <= RAFT_MEMBERS_MAX && c->n_old <= RAFT_MEMBERS_MAX);
    size_t n = 0;
    out[n++] = RAFT_CONFIG_VERSION;
    out[n++] = (uint8_t)c->n_members;
    for (uint32_t i = 0; i < c->n_members; i++) {
        out[n++] = (uint8_t)c->members[i].id;
        out[n++] = c->members[i].voter;
    }
    out[n++] = (uint8_t)c->n_old;
    for (uint32_t i = 0; i < c->n_old; i++) {
        out[n++] = (uint8_t)c->old[i].id;
        out[n++] = c->old[i].voter;
    }
    BASE_ASSERT(c->extra_len <= RAFT_CONFIG_EXTRA_MAX);
    out[n++] = (uint8_t)(c->extra_len >> 8);
    out[n++] = (uint8_t)c->extra_len;
    memcpy(out + n, c->extra, c->extra_len);
    return n + c->extra_len;
}

static bool decode_list(const uint8_t *p, size_t len, size_t *at, struct raft_member *m,
                        uint32_t *n)
{
    if (*at >= len)
        return false;
    *n = p[(*at)++];
    if (*n > RAFT_MEMBERS_MAX || len - *at < 2 * (size_t)*n)
        return false;
    for (uint32_t i = 0; i < *n; i++, *at += 2) {
        if (p[*at + 1] > 1)
            return false;
        m[i] = (struct raft_member){p[*at], p[*at + 1] == 1};
    }
    return true;
}

int raft_config_decode(const void *data, size_t len, struct raft_config *out)
{
    const uint8_t *p = data;
    size_t at = 1;
    memset(out, 0, sizeof *out);
    if (!data || len < 5 || p[0] != RAFT_CONFIG_VERSION ||
        !decode_list(p, len, &at, out->members, &out->n_members) ||
        !decode_list(p, len, &at, out->old, &out->n_old) || len - at < 2 ||
        !config_valid(out))
        return RAFT_EINVAL;
    size_t extra = (size_t)p[at] << 8 | p[at + 1];
    at += 2;
    if (extra > RAFT_CONFIG_EXTRA_MAX || len - at != extra)
        return RAFT_EINVAL;
    memcpy(out->extra, p + at, extra);
    out->extra_len = (uint32_t)extra;
    return RAFT_OK;
}

static bool entry_config_valid(const struct raft_entry *e)
{
    struct raft_config c;
    return raft_config_decode(e->data, e->len, &c) == RAFT_OK;
}

/* Whether id votes in either half of c. */
static bool votes_in_config(const struct raft_config *c, uint32_t id)
{
    const struct raft_member *mn = member_in(c->members, c->n_members, id);
    const struct raft_member *mo = member_in(c->old, c->n_old, id);
    return (mn && mn->voter) || (mo && mo->voter);
}

/* Makes c the membership in use, set by the entry at zxid (0: not a log
 * entry, so committed), this node having voted in the one before it
 * (voted_before). peers[] becomes both halves' members plus self; a member
 * that stays keeps what the leader knew of it, a new one starts as a
 * leader's peers do (probed just after the log's end, backed up by its
 * reject). */
static void conf_use(struct raft *r, const struct raft_config *c, int64_t zxid,
                     bool voted_before)
{
    struct raft_peer was[RAFT_MEMBERS_MAX + 1];
    uint32_t n_was = r->n_peers;
    memcpy(was, r->peers, n_was * sizeof *was);
    r->conf = *c;
    r->conf_zxid = zxid;
    r->voted_before = zxid != 0 && voted_before;
    uint32_t ids[RAFT_MEMBERS_MAX + 1], n = 0;
    for (uint32_t i = 0; i < c->n_members; i++)
        ids[n++] = c->members[i].id;
    for (uint32_t i = 0; i < c->n_old; i++)
        if (!member_in(c->members, c->n_members, c->old[i].id))
            ids[n++] = c->old[i].id;
    bool self_in = false;
    for (uint32_t i = 0; i < n; i++)
        self_in |= ids[i] == self_id(r);
    if (!self_in)
        ids[n++] = self_id(r); /* removed, or not added yet: still itself */
    BASE_ASSERT(n <= RAFT_MEMBERS_MAX + 1);
    for (uint32_t i = 0; i < n; i++) {
        struct raft_peer p = {.id = ids[i], .prev = log_last(r)};
        for (uint32_t k = 0; k < n_was; k++)
            if (was[k].id == ids[i])
                p = was[k];
        const struct raft_member *mn = member_in(c->members, c->n_members, ids[i]);
        const struct raft_member *mo = member_in(c->old, c->n_old, ids[i]);
        p.member = mn || mo;
        p.vnew = mn && mn->voter;
        p.vold = mo && mo->voter;
        p.voter = p.vnew || p.vold;
        r->peers[i] = p;
        if (ids[i] == self_id(r))
            r->self = i;
    }
    r->n_peers = n;
    settle_role(r);
}

/* A CONFIG entry just appended (validated before it got here). */
static void conf_take(struct raft *r, const struct raft_entry *e)
{
    struct raft_config c;
    int rc = raft_config_decode(e->data, e->len, &c);
    BASE_ASSERT(rc == RAFT_OK);
    conf_use(r, &c, e->zxid, self_voter(r));
}

/* The membership in effect at z (>= log_base) into *out; the zxid of the
 * entry that set it, or 0 for base_conf. */
static int64_t conf_at(const struct raft *r, int64_t z, struct raft_config *out)
{
    for (size_t i = log_upper(r, z); i-- > 0;) {
        if (r->log[i].type != RAFT_ENTRY_CONFIG)
            continue;
        int rc = raft_config_decode(r->log[i].data, r->log[i].len, out);
        BASE_ASSERT(rc == RAFT_OK);
        return r->log[i].zxid;
    }
    *out = r->base_conf;
    return 0;
}

/* After a truncation took the membership's entry away. */
static void conf_rewind(struct raft *r)
{
    struct raft_config c;
    int64_t at = conf_at(r, log_last(r), &c);
    bool voted = false;
    if (at != 0) {
        struct raft_config before;
        (void)conf_at(r, at - 1, &before);
        voted = votes_in_config(&before, self_id(r));
    }
    conf_use(r, &c, at, voted);
}

int raft_config_at(const struct raft *r, int64_t zxid, struct raft_config *out)
{
    if (zxid < r->log_base)
        return RAFT_EINVAL;
    (void)conf_at(r, zxid, out);
    return RAFT_OK;
}

/* ---- the outbox ------------------------------------------------------- */

/* Queues m (from and term filled in). A message that cannot be queued for
 * lack of memory is dropped, as the network may drop any message. */
static void send(struct raft *r, struct raft_msg m, int64_t first_zxid)
{
    m.from = self_id(r);
    if (m.term == 0)
        m.term = r->term;
    size_t cap = r->cap_msgs;
    if (base_grow(&r->msgs, &cap, r->n_msgs + 1, sizeof *r->msgs) != 0)
        return;
    size_t cap2 = r->cap_msgs;
    if (base_grow(&r->msg_first, &cap2, r->n_msgs + 1, sizeof *r->msg_first) != 0)
        return;
    r->cap_msgs = cap < cap2 ? cap : cap2;
    r->msgs[r->n_msgs] = m;
    r->msg_first[r->n_msgs] = first_zxid;
    r->n_msgs++;
}

static bool push_read(struct raft *r, uint64_t ctx, int64_t zxid, bool ok)
{
    if (base_grow(&r->reads, &r->cap_reads, r->n_reads + 1, sizeof *r->reads) != 0)
        return false;
    r->reads[r->n_reads++] = (struct raft_read){ctx, zxid, ok};
    return true;
}

/* ---- roles and elections ---------------------------------------------- */

static void reset_election_timer(struct raft *r)
{
    uint32_t e = r->cfg.election_ticks;
    r->election_elapsed = 0;
    r->election_timeout = e + (uint32_t)(rng_next(r) % e);
}

/* Within election_ticks of hearing a live leader (or being one), a node
 * ignores vote requests for higher terms: etcd's CheckQuorum lease. It
 * keeps a partitioned node that rejoins from deposing a healthy leader. */
static bool in_lease(const struct raft *r)
{
    if (r->role == RAFT_LEADER)
        return true;
    return r->leader_id != 0 && r->lease_elapsed < r->cfg.election_ticks;
}

static void set_term(struct raft *r, uint32_t term)
{
    BASE_ASSERT(term > r->term); /* terms never decrease */
    BASE_ASSERT(term <= RAFT_TERM_MAX);
    r->term = term;
    r->vote = 0;
}

static void cast_vote(struct raft *r, uint32_t id)
{
    BASE_ASSERT(r->vote == 0 || r->vote == id); /* one vote per term */
    r->vote = id;
}

static void fail_pending_reads(struct raft *r);

/* Leaves whatever role this node had for follower (observer if it does not
 * vote) of term, following leader (0: none known). */
static void become_follower(struct raft *r, uint32_t term, uint32_t leader)
{
    if (term > r->term)
        set_term(r, term);
    if (r->role == RAFT_LEADER)
        fail_pending_reads(r);
    r->role = may_campaign(r) ? RAFT_FOLLOWER : RAFT_OBSERVER;
    r->leader_id = leader;
    if (leader)
        r->lease_elapsed = 0;
    reset_election_timer(r);
}

static bool granted(const struct raft *r, uint32_t i)
{
    return r->peers[i].ballot == BALLOT_GRANTED;
}

static bool not_rejected(const struct raft *r, uint32_t i)
{
    return r->peers[i].ballot != BALLOT_REJECTED;
}

/* A campaign starts with this node's own ballot only. */
static void ballots_reset(struct raft *r)
{
    for (uint32_t i = 0; i < r->n_peers; i++)
        r->peers[i].ballot = BALLOT_NONE;
    r->peers[r->self].ballot = BALLOT_GRANTED;
}

static void send_vote_reqs(struct raft *r, uint32_t term, bool pre_vote)
{
    for (uint32_t i = 0; i < r->n_peers; i++) {
        if (i == r->self || !r->peers[i].voter)
            continue;
        struct raft_msg m = {.type = RAFT_MSG_VOTE_REQ, .to = r->peers[i].id, .term = term,
                             .pre_vote = pre_vote, .last_zxid = log_last(r)};
        send(r, m, 0);
    }
}

static void become_leader(struct raft *r);

/* A real campaign: raise the term and vote for self. The VOTE_REQs leave
 * only after the new term and vote are durable (Ready step 1 before 5). */
static void become_candidate(struct raft *r)
{
    BASE_ASSERT(may_campaign(r));
    set_term(r, r->term + 1);
    cast_vote(r, self_id(r));
    r->role = RAFT_CANDIDATE;
    r->leader_id = 0;
    ballots_reset(r);
    reset_election_timer(r);
    if (has_quorum(r, granted)) {
        become_leader(r);
        return;
    }
    send_vote_reqs(r, r->term, false);
}

/* Pre-vote (Raft thesis 9.6): ask at term + 1 without changing the hard
 * state, so a node that cannot win never raises the cluster's term. */
static void start_pre_vote(struct raft *r)
{
    BASE_ASSERT(may_campaign(r) && r->role != RAFT_LEADER);
    if (r->term >= RAFT_TERM_MAX) {
        reset_election_timer(r); /* no term is left to campaign for */
        return;
    }
    r->role = RAFT_PRE_CANDIDATE;
    r->leader_id = 0;
    ballots_reset(r);
    reset_election_timer(r);
    if (has_quorum(r, granted)) {
        become_candidate(r);
        return;
    }
    send_vote_reqs(r, r->term + 1, true);
}

static bool log_up_to_date(const struct raft *r, int64_t last_zxid)
{
    if (r->cfg.break_on_purpose & RAFT_BREAK_VOTE_LOG_CHECK)
        return true;
    /* term-major zxid order is Raft's (lastTerm, lastIndex) order, §5.4.1 */
    return last_zxid >= log_last(r);
}

/* Whose votes count is the candidate's business (its membership's voters),
 * so this node answers whatever its own membership says of it: a server
 * just added, that has not seen the entry making it a voter yet, must
 * still be able to help elect the leader that will tell it. */
static void on_vote_req(struct raft *r, const struct raft_msg *m)
{
    bool up = log_up_to_date(r, m->last_zxid);
    bool grant;
    if (m->pre_vote)
        grant = m->term > r->term && up;
    else
        grant = m->term == r->term && up &&
                (r->vote == m->from || (r->vote == 0 && r->leader_id == 0));
    if (grant && !m->pre_vote) {
        cast_vote(r, m->from);
        reset_election_timer(r);
    }
    struct raft_msg resp = {.type = RAFT_MSG_VOTE_RESP, .to = m->from,
                            .term = grant && m->pre_vote ? m->term : r->term,
                            .pre_vote = m->pre_vote, .reject = !grant};
    send(r, resp, 0);
}

static void on_vote_resp(struct raft *r, const struct raft_msg *m)
{
    bool counts = m->pre_vote
                      ? r->role == RAFT_PRE_CANDIDATE &&
                            (m->reject ? m->term <= r->term : m->term == r->term + 1)
                      : r->role == RAFT_CANDIDATE && m->term == r->term;
    if (!counts)
        return;
    struct raft_peer *p = peer_by_id(r, m->from);
    if (p->ballot != BALLOT_NONE)
        return; /* a duplicate: the first answer stands */
    p->ballot = m->reject ? BALLOT_REJECTED : BALLOT_GRANTED;
    if (has_quorum(r, granted)) {
        if (r->role == RAFT_PRE_CANDIDATE)
            become_candidate(r);
        else
            become_leader(r);
    } else if (!has_quorum(r, not_rejected)) {
        become_follower(r, r->term, 0); /* lost: too many said no */
    }
}

/* ---- leader: replication ---------------------------------------------- */

static void send_snap(struct raft *r, struct raft_peer *p)
{
    BASE_ASSERT(r->snap_zxid >= r->log_base && r->snap_zxid > 0);
    struct raft_msg m = {.type = RAFT_MSG_SNAP, .to = p->id, .snap_zxid = r->snap_zxid};
    send(r, m, 0);
    p->snap_pending = true;
    p->snap_sent = r->snap_zxid;
    p->snap_elapsed = 0;
}

/* How many entries from log index first go in one APPEND: at most
 * max_append_entries and max_append_bytes, but always one if any. */
static uint32_t append_batch(const struct raft *r, size_t first)
{
    uint32_t n = 0;
    size_t bytes = 0;
    for (size_t i = first; i < r->n_log && n < r->cfg.max_append_entries; i++) {
        if (n > 0 && bytes + r->log[i].len > r->cfg.max_append_bytes)
            break;
        bytes += r->log[i].len;
        n++;
    }
    return n;
}

enum append_kind {
    APPEND_ENTRIES = 0, /* entries waiting, else nothing */
    APPEND_HEARTBEAT,   /* entries waiting, else an empty APPEND to answer */
    APPEND_NOTICE,      /* entries waiting, else an empty APPEND that says the
                         * commit moved and wants no answer (no_ack) */
};

/* Sends p the entries after p->prev (optimistically: prev moves to the
 * last one sent), or an empty APPEND (kind), or a SNAP when the entries p
 * needs are compacted away. */
static void send_append(struct raft *r, struct raft_peer *p, enum append_kind kind)
{
    bool heartbeat = kind != APPEND_ENTRIES;
    if (p->snap_pending) {
        if (!heartbeat)
            return;
        if (p->snap_elapsed >= r->cfg.election_ticks) {
            send_snap(r, p); /* the SNAP or its ack was lost */
            return;
        }
        /* a probe at the snapshot point: its ack also ends the wait */
        struct raft_msg m = {.type = RAFT_MSG_APPEND, .to = p->id, .prev_zxid = p->snap_sent,
                             .commit_zxid = r->commit, .read_ctx = r->read_seq};
        send(r, m, 0);
        return;
    }
    if (p->prev < r->log_base) {
        send_snap(r, p);
        return;
    }
    BASE_ASSERT(p->prev <= log_last(r));
    size_t first = log_upper(r, p->prev);
    uint32_t n = append_batch(r, first);
    if (n == 0 && !heartbeat)
        return;
    struct raft_msg m = {.type = RAFT_MSG_APPEND, .to = p->id, .prev_zxid = p->prev,
                         .commit_zxid = r->commit, .read_ctx = r->read_seq, .n_entries = n,
                         .no_ack = n == 0 && kind == APPEND_NOTICE};
    send(r, m, n ? r->log[first].zxid : 0);
    if (n)
        p->prev = r->log[first + n - 1].zxid;
}

static void broadcast_append(struct raft *r, enum append_kind kind)
{
    for (uint32_t i = 0; i < r->n_peers; i++)
        if (i != r->self && r->peers[i].member)
            send_append(r, &r->peers[i], kind);
}

static int leader_append(struct raft *r, const struct raft_entry *e)
{
    BASE_ASSERT(r->role == RAFT_LEADER);
    BASE_ASSERT(raft_zxid_term(e->zxid) == r->term); /* a leader appends its own term */
    return log_append(r, e);
}

static void become_leader(struct raft *r)
{
    BASE_ASSERT(r->vote == self_id(r) && r->role == RAFT_CANDIDATE);
    r->role = RAFT_LEADER;
    r->leader_id = self_id(r);
    r->heartbeat_elapsed = 0;
    r->quorum_elapsed = 0;
    int64_t last = log_last(r);
    for (uint32_t i = 0; i < r->n_peers; i++) {
        struct raft_peer *p = &r->peers[i];
        p->match = 0;
        p->prev = last;
        p->active = false;
        p->snap_pending = false;
        p->read_ack = 0;
        p->snap_wanted = 0;
        p->resync_sent = 0;
    }
    /* a leader has no one to resync from: what it applied is the state
     * machine now, and followers that disagree resync from it */
    r->want_snap_from = 0;
    /* the no-op at counter 0 lets this term commit, and with it every
     * older entry before it (Raft §5.4.2, §8) */
    struct raft_entry noop = {raft_make_zxid(r->term, 0), RAFT_ENTRY_NOOP, NULL, 0};
    if (leader_append(r, &noop) != RAFT_OK) {
        become_follower(r, r->term, 0); /* retry the election later */
        return;
    }
    broadcast_append(r, APPEND_ENTRIES);
}

static int64_t durable_match(const struct raft *r, uint32_t i)
{
    return i == r->self ? r->durable : r->peers[i].match;
}

/* The zxid a quorum of voters (of both halves of a joint membership) holds
 * durably; the leader counts its own entries only once the driver made
 * them durable. */
static int64_t quorum_match(const struct raft *r)
{
    return quorum_value(r, durable_match);
}

static bool start_read_round(struct raft *r);
static void release_reads(struct raft *r);
static void leader_after_commit(struct raft *r);

static void commit_to(struct raft *r, int64_t z)
{
    BASE_ASSERT(z > r->commit); /* commit never decreases */
    BASE_ASSERT(z <= log_last(r));
    r->commit = z;
    settle_role(r); /* a membership that left this node out is committed now */
}

/* Only an entry of the current term commits by counting replicas (Raft
 * §5.4.2, Figure 8); older ones commit under it. */
static void leader_maybe_commit(struct raft *r)
{
    if (r->role != RAFT_LEADER)
        return;
    int64_t z = (r->cfg.break_on_purpose & RAFT_BREAK_COMMIT_MINORITY) ? r->durable
                                                                       : quorum_match(r);
    if (z <= r->commit || raft_zxid_term(z) != r->term)
        return;
    commit_to(r, z);
    /* followers learn the commit now: a read round's heartbeat tells them,
     * else a notice they need not answer (the acks would only repeat what
     * their acks of the entries said, and cost a message each) */
    if (!start_read_round(r))
        broadcast_append(r, APPEND_NOTICE);
    release_reads(r);
    leader_after_commit(r);
}

static void on_accept(struct raft *r, struct raft_peer *p, int64_t match)
{
    if (match > log_last(r))
        return; /* not a zxid this leader ever sent: garbage */
    if (match > p->match)
        p->match = match;
    if (p->snap_pending && match >= p->snap_sent)
        p->snap_pending = false;
    if (match > p->prev)
        p->prev = match;
    uint32_t id = p->id;
    if (p->voter)
        leader_maybe_commit(r);
    /* a commit may have moved the membership on (the final entry: peers[]
     * is rebuilt) or ended this leadership */
    p = peer_by_id(r, id);
    if (r->role == RAFT_LEADER && p && p->member && p != &r->peers[r->self])
        send_append(r, p, APPEND_ENTRIES);
}

/* The follower lacks p->prev (or an older prev): back up to just after our
 * largest zxid <= its hint. prev strictly decreases and never goes below
 * match, so the search ends. */
static void on_reject(struct raft *r, struct raft_peer *p, int64_t hint)
{
    if (p->snap_pending) {
        if (p->snap_elapsed >= r->cfg.election_ticks)
            send_snap(r, p);
        return;
    }
    if (hint < p->match) {
        /* The follower no longer holds what it acknowledged: its data dir
         * was lost or replaced, and ZooKeeper lets such a server rejoin and
         * sync. Over one FIFO link a reject cannot overtake the ack before
         * it, so this is not a stale message; where messages are reordered
         * (the simulator), taking one for this only costs a resend. A lower
         * match is always safe: commit never decreases. */
        p->match = hint;
    }
    int64_t target = hint >= r->log_base ? log_largest_le(r, hint) : hint;
    if (target < p->match)
        target = p->match;
    if (target >= p->prev)
        return; /* stale: a later APPEND already went out from lower */
    p->prev = target;
    send_append(r, p, APPEND_HEARTBEAT);
}

/* The follower asked for a snapshot at or above want (0: it no longer
 * does). One this leader holds goes now; else the driver sees snap_wanted
 * in the status, takes one, and the next answer gets it. */
static void snap_if_wanted(struct raft *r, struct raft_peer *p, int64_t want)
{
    p->snap_wanted = want;
    if (want == 0) {
        p->resync_sent = 0;
        return;
    }
    /* one SNAP per ask and election timeout: the asker's acks keep asking
     * until it has installed the one on its way */
    if (p->snap_pending || r->snap_zxid < want || r->snap_zxid == 0 ||
        (p->resync_sent >= want && p->resync_elapsed < r->cfg.election_ticks))
        return;
    send_snap(r, p);
    p->resync_sent = r->snap_zxid;
    p->resync_elapsed = 0;
}

static void on_append_resp(struct raft *r, const struct raft_msg *m)
{
    if (r->role != RAFT_LEADER || m->term != r->term)
        return;
    struct raft_peer *p = peer_by_id(r, m->from);
    if (m->read_ctx > p->read_ack && m->read_ctx <= r->read_seq)
        p->read_ack = m->read_ctx;
    if (m->reject)
        on_reject(r, p, m->hint_zxid);
    else
        on_accept(r, p, m->match_zxid);
    release_reads(r);
    /* on_accept may have moved the membership on or ended this leadership */
    p = peer_by_id(r, m->from);
    if (r->role == RAFT_LEADER && p && p->member)
        snap_if_wanted(r, p, m->snap_zxid);
}

static bool heard_from(const struct raft *r, uint32_t i)
{
    return i == r->self || r->peers[i].active;
}

/* CheckQuorum (Raft thesis 6.2): a leader that cannot hear a quorum of
 * voters within an election timeout steps down, so a partitioned leader
 * stops serving ReadIndex and its lease on votes ends. */
static void check_quorum(struct raft *r)
{
    bool heard = has_quorum(r, heard_from);
    for (uint32_t i = 0; i < r->n_peers; i++)
        r->peers[i].active = false;
    if (!heard)
        become_follower(r, r->term, 0);
}

static void leader_tick(struct raft *r)
{
    for (uint32_t i = 0; i < r->n_peers; i++) {
        if (r->peers[i].snap_pending)
            tick_up(&r->peers[i].snap_elapsed);
        if (r->peers[i].resync_sent)
            tick_up(&r->peers[i].resync_elapsed);
    }
    tick_up(&r->quorum_elapsed);
    if (r->quorum_elapsed >= r->cfg.election_ticks) {
        r->quorum_elapsed = 0;
        check_quorum(r);
        if (r->role != RAFT_LEADER)
            return;
    }
    tick_up(&r->heartbeat_elapsed);
    if (r->heartbeat_elapsed >= r->cfg.heartbeat_ticks) {
        r->heartbeat_elapsed = 0;
        broadcast_append(r, APPEND_HEARTBEAT);
        leader_after_commit(r); /* a final entry that could not be appended */
    }
}

/* ---- follower: APPEND and SNAP ---------------------------------------- */

/* What an APPEND from the current leader would do to this log, worked out
 * before anything changes so that a bad one changes nothing. */
struct append_plan {
    bool holds_prev;
    uint32_t first_new;     /* index in m->entries of the first entry to append */
    bool truncate;
    int64_t truncate_after;
};

/* Whether this node holds the leader's log through prev. Anything at or
 * below commit is held: the leader of the current term holds every
 * committed entry (Leader Completeness, Raft §5.4), so they agree there,
 * even where this node has compacted. */
static bool holds_prev(const struct raft *r, int64_t prev)
{
    if (prev <= r->log_base || prev == r->snap_zxid)
        return true;
    if (log_find(r, prev) != RAFT_NOT_FOUND)
        return true;
    return false;
}

static bool plan_append(const struct raft *r, const struct raft_msg *m, struct append_plan *p)
{
    *p = (struct append_plan){.holds_prev = holds_prev(r, m->prev_zxid),
                              .first_new = m->n_entries};
    if (!p->holds_prev)
        return true;
    uint32_t i = 0;
    for (; i < m->n_entries; i++) {
        int64_t z = m->entries[i].zxid;
        if (z > r->log_base && log_find(r, z) == RAFT_NOT_FOUND)
            break; /* same zxid means same entry (one leader per term) */
    }
    p->first_new = i;
    if (i == m->n_entries)
        return true;
    int64_t after = i == 0 ? m->prev_zxid : m->entries[i - 1].zxid;
    if (log_last(r) <= after)
        return true;
    p->truncate = true;
    p->truncate_after = after;
    /* a leader asking to drop committed entries breaks the protocol: a
     * refused message, never a lost commit */
    return after >= r->commit;
}

static void hear_leader(struct raft *r, uint32_t leader)
{
    if (r->role == RAFT_PRE_CANDIDATE || r->role == RAFT_CANDIDATE)
        become_follower(r, r->term, leader);
    r->leader_id = leader;
    r->lease_elapsed = 0;
    reset_election_timer(r);
}

static void send_append_resp(struct raft *r, const struct raft_msg *m, bool reject,
                             int64_t match, int64_t hint)
{
    struct raft_msg resp = {.type = RAFT_MSG_APPEND_RESP, .to = m->from, .reject = reject,
                            .match_zxid = match, .hint_zxid = hint, .read_ctx = m->read_ctx,
                            .snap_zxid = r->want_snap_from};
    send(r, resp, 0);
}

static int on_append(struct raft *r, const struct raft_msg *m, const struct append_plan *plan)
{
    BASE_ASSERT(m->term == r->term && r->role != RAFT_LEADER);
    hear_leader(r, m->from);
    if (!plan->holds_prev) {
        int64_t hint = log_largest_le(r, m->prev_zxid);
        send_append_resp(r, m, true, 0, hint);
        return RAFT_OK;
    }
    if (plan->truncate)
        log_truncate_after(r, plan->truncate_after);
    for (uint32_t i = plan->first_new; i < m->n_entries; i++) {
        int err = log_append(r, &m->entries[i]);
        if (err != RAFT_OK)
            return err; /* no ack: the leader's heartbeat retries */
    }
    int64_t matched = m->n_entries ? m->entries[m->n_entries - 1].zxid : m->prev_zxid;
    int64_t c = m->commit_zxid < matched ? m->commit_zxid : matched;
    if (c > r->commit)
        commit_to(r, c);
    /* a commit notice is not answered, unless this node has something to
     * ask (a resync); a reject always is */
    if (m->no_ack && m->n_entries == 0 && r->want_snap_from == 0)
        return RAFT_OK;
    send_append_resp(r, m, false, matched, 0);
    return RAFT_OK;
}

/* Replaces the whole log with the leader's snapshot at zxid z. Entries
 * after z are dropped too: this node lacks z, so by Log Matching none of
 * its later entries is the leader's, and none is committed. */
static int install_snapshot(struct raft *r, const struct raft_msg *m)
{
    uint8_t *copy;
    if (copy_bytes(m->snap_data, m->snap_len, &copy) != RAFT_OK)
        return RAFT_ENOMEM;
    int64_t z = m->snap_zxid;
    BASE_ASSERT(z > r->commit);
    drop_msgs_beyond(r, 0);
    for (size_t i = 0; i < r->n_log; i++)
        entry_free(&r->log[i]);
    /* what the disk holds stays trustworthy only up to the old commit
     * until the snapshot is persisted */
    if (r->durable > r->commit)
        r->durable = r->commit;
    batches_cap(r, r->commit);
    r->n_log = r->n_stable = 0;
    r->truncate = false;
    r->log_base = r->snap_zxid = z;
    r->commit = r->applied = z;
    if (r->snap_ready)
        free((void *)r->snap.data);
    /* the membership comes with the snapshot (NULL: it never changed) */
    r->base_conf = m->snap_config ? *m->snap_config : r->cfg_conf;
    conf_use(r, &r->base_conf, 0, false);
    r->snap = (struct raft_snapshot){z, copy, m->snap_len, r->base_conf, false};
    r->snap_ready = true;
    return RAFT_OK;
}

/* A resync (raft_request_snapshot): the state machine is rebuilt from the
 * leader's snapshot at z, and the log (which holds every entry after z:
 * z >= log_base) stays. The committed entries after z are handed out again
 * on top of it. */
static int resync_from_snapshot(struct raft *r, const struct raft_msg *m)
{
    int64_t z = m->snap_zxid;
    BASE_ASSERT(z >= r->log_base && z <= log_last(r));
    uint8_t *copy;
    if (copy_bytes(m->snap_data, m->snap_len, &copy) != RAFT_OK)
        return RAFT_ENOMEM;
    if (z > r->commit)
        commit_to(r, z); /* it holds z, so its log matches through z */
    if (r->snap_ready)
        free((void *)r->snap.data);
    struct raft_config at;
    (void)conf_at(r, z, &at);
    r->snap = (struct raft_snapshot){z, copy, m->snap_len, at, true};
    r->snap_ready = true;
    r->applied = z;
    r->snap_zxid = z; /* the driver's own newer snapshots were of the diverged state */
    r->want_snap_from = 0;
    r->resync_handing = true;
    return RAFT_OK;
}

static int on_snap(struct raft *r, const struct raft_msg *m)
{
    BASE_ASSERT(m->term == r->term && r->role != RAFT_LEADER);
    hear_leader(r, m->from);
    int64_t z = m->snap_zxid;
    if (r->want_snap_from > 0 && z >= r->want_snap_from && z >= r->log_base &&
        (z <= r->commit || log_find(r, z) != RAFT_NOT_FOUND)) {
        int err = resync_from_snapshot(r, m);
        if (err != RAFT_OK)
            return err;
        send_append_resp(r, m, false, r->commit, 0);
        return RAFT_OK;
    }
    if (z <= r->commit) {
        send_append_resp(r, m, false, r->commit, 0); /* already past it */
        return RAFT_OK;
    }
    if (log_find(r, z) != RAFT_NOT_FOUND) {
        commit_to(r, z); /* it holds z, so its log matches through z */
    } else {
        int err = install_snapshot(r, m);
        if (err != RAFT_OK)
            return err;
        r->want_snap_from = 0; /* the state machine is replaced all the same */
    }
    send_append_resp(r, m, false, z, 0);
    return RAFT_OK;
}

/* ---- ReadIndex (Raft thesis 6.4) -------------------------------------- */

static void answer_read(struct raft *r, const struct raft_pending_read *pr, bool ok)
{
    if (pr->from == 0) {
        push_read(r, pr->ctx, ok ? pr->zxid : 0, ok);
        return;
    }
    struct raft_msg m = {.type = RAFT_MSG_READ_INDEX_RESP, .to = pr->from, .reject = !ok,
                         .read_ctx = pr->ctx, .commit_zxid = ok ? pr->zxid : 0};
    send(r, m, 0);
}

/* Starts one heartbeat round for every read not yet started, once this
 * term has committed an entry (before that the commit zxid may be behind
 * what an earlier leader committed). */
static bool start_read_round(struct raft *r)
{
    if (r->role != RAFT_LEADER || raft_zxid_term(r->commit) != r->term)
        return false;
    bool any = false;
    for (size_t i = 0; i < r->n_pending; i++) {
        if (r->pending[i].seq)
            continue;
        if (!any)
            r->read_seq++;
        any = true;
        r->pending[i].zxid = r->commit;
        r->pending[i].seq = r->read_seq;
    }
    if (any)
        broadcast_append(r, APPEND_HEARTBEAT); /* nothing to send in a one-member ensemble */
    return any;
}

static int64_t read_acked(const struct raft *r, uint32_t i)
{
    /* read_seq counts heartbeat rounds: far below 2^63 */
    return (int64_t)(i == r->self ? r->read_seq : r->peers[i].read_ack);
}

/* The highest read_ctx a quorum of voters has echoed (self counts as
 * having echoed everything it sent). */
static uint64_t read_quorum_seq(const struct raft *r)
{
    return (uint64_t)quorum_value(r, read_acked);
}

static void release_reads(struct raft *r)
{
    if (r->role != RAFT_LEADER || r->n_pending == 0)
        return;
    uint64_t confirmed = read_quorum_seq(r);
    size_t k = 0;
    while (k < r->n_pending && r->pending[k].seq && r->pending[k].seq <= confirmed) {
        answer_read(r, &r->pending[k], true);
        k++;
    }
    memmove(r->pending, r->pending + k, (r->n_pending - k) * sizeof *r->pending);
    r->n_pending -= k;
}

static void fail_pending_reads(struct raft *r)
{
    for (size_t i = 0; i < r->n_pending; i++)
        answer_read(r, &r->pending[i], false);
    r->n_pending = 0;
}

/* Queues a read on the leader; room for its local answer is reserved now
 * so that releasing it later cannot fail. */
static int leader_add_read(struct raft *r, uint64_t ctx, uint32_t from)
{
    if (base_grow(&r->pending, &r->cap_pending, r->n_pending + 1, sizeof *r->pending) != 0)
        return RAFT_ENOMEM;
    if (base_grow(&r->reads, &r->cap_reads, r->n_reads + r->n_pending + 1,
                  sizeof *r->reads) != 0)
        return RAFT_ENOMEM;
    r->pending[r->n_pending++] = (struct raft_pending_read){ctx, from, 0, 0};
    start_read_round(r);
    release_reads(r);
    return RAFT_OK;
}

static void on_read_index(struct raft *r, const struct raft_msg *m)
{
    if (r->role == RAFT_LEADER && leader_add_read(r, m->read_ctx, m->from) == RAFT_OK)
        return;
    struct raft_msg resp = {.type = RAFT_MSG_READ_INDEX_RESP, .to = m->from, .reject = true,
                            .read_ctx = m->read_ctx};
    send(r, resp, 0);
}

/* ---- raft_step ---------------------------------------------------------- */

static bool entries_valid(const struct raft_msg *m)
{
    if (m->n_entries && !m->entries)
        return false;
    int64_t prev = m->prev_zxid;
    for (uint32_t i = 0; i < m->n_entries; i++) {
        const struct raft_entry *e = &m->entries[i];
        if (e->zxid <= prev || raft_zxid_term(e->zxid) > m->term)
            return false;
        if (e->type != RAFT_ENTRY_NOOP && e->type != RAFT_ENTRY_DATA &&
            e->type != RAFT_ENTRY_CONFIG)
            return false;
        if (e->len && !e->data)
            return false;
        if (e->type == RAFT_ENTRY_CONFIG && !entry_config_valid(e))
            return false;
        prev = e->zxid;
    }
    return true;
}

enum msg_verdict { MSG_OK, MSG_IGNORE, MSG_BAD };

/* A leader's messages are taken from any server, even one this node's
 * membership does not hold or calls an observer: this node's membership
 * may be the stale one (a server added to the ensemble learns it from its
 * leader's log). A candidate is answered whoever it is: whose vote counts
 * is its own membership's business. The rest must come from a member; from
 * anyone else they are ignored, not refused: a server removed from the
 * ensemble may still have had them on the way. */
static enum msg_verdict msg_check(struct raft *r, const struct raft_msg *m)
{
    if (!m || m->to != self_id(r) || m->from == self_id(r) || m->from == 0 ||
        m->from > RAFT_ID_MAX || m->term > RAFT_TERM_MAX)
        return MSG_BAD;
    if (m->last_zxid < 0 || m->prev_zxid < 0 || m->commit_zxid < 0 || m->match_zxid < 0 ||
        m->hint_zxid < 0 || m->snap_zxid < 0)
        return MSG_BAD;
    const struct raft_peer *p = peer_by_id(r, m->from);
    if (p && !p->member)
        p = NULL; /* this node itself is never a sender here */
    bool leader_ok = true;
    /* one leader per term: another sender of this term's leader messages
     * is garbage, whoever it claims to be */
    if (m->term == r->term && r->leader_id != 0 && r->leader_id != self_id(r) &&
        m->from != r->leader_id)
        leader_ok = false;
    bool ok;
    switch (m->type) {
    case RAFT_MSG_VOTE_REQ:
        ok = true;
        break;
    case RAFT_MSG_VOTE_RESP:
        return p && p->voter ? MSG_OK : MSG_IGNORE;
    case RAFT_MSG_READ_INDEX_RESP: /* a refusal comes from whoever was asked */
        ok = true;
        break;
    case RAFT_MSG_APPEND:
        ok = leader_ok && entries_valid(m);
        break;
    case RAFT_MSG_SNAP:
        ok = leader_ok && m->snap_zxid > 0 && (m->snap_len == 0 || m->snap_data) &&
             (!m->snap_config || config_valid(m->snap_config));
        break;
    case RAFT_MSG_APPEND_RESP:
    case RAFT_MSG_READ_INDEX:
        return p ? MSG_OK : MSG_IGNORE;
    default:
        ok = false;
        break;
    }
    return ok ? MSG_OK : MSG_BAD;
}

/* A message of a higher term. Returns false when it is to be ignored. */
static bool step_higher_term(struct raft *r, const struct raft_msg *m)
{
    if (m->type == RAFT_MSG_VOTE_REQ) {
        if (in_lease(r))
            return false;
        if (m->pre_vote)
            return true; /* a pre-vote changes no term */
    }
    if (m->type == RAFT_MSG_VOTE_RESP && m->pre_vote && !m->reject)
        return true; /* a grant at our term + 1 */
    bool from_leader = m->type == RAFT_MSG_APPEND || m->type == RAFT_MSG_SNAP;
    become_follower(r, m->term, from_leader ? m->from : 0);
    return true;
}

/* A message of a lower term: a stale leader hears the current term so it
 * steps down (with pre-vote and CheckQuorum it may never hear a vote
 * request); everything else stale is dropped. */
static bool step_lower_term(struct raft *r, const struct raft_msg *m)
{
    switch (m->type) {
    case RAFT_MSG_APPEND:
    case RAFT_MSG_SNAP:
        send_append_resp(r, m, true, 0, 0);
        return false;
    case RAFT_MSG_VOTE_REQ:
    case RAFT_MSG_READ_INDEX:
    case RAFT_MSG_READ_INDEX_RESP:
        return true;
    default:
        return false;
    }
}

static int step_dispatch(struct raft *r, const struct raft_msg *m,
                         const struct append_plan *plan)
{
    switch (m->type) {
    case RAFT_MSG_VOTE_REQ:
        on_vote_req(r, m);
        return RAFT_OK;
    case RAFT_MSG_VOTE_RESP:
        on_vote_resp(r, m);
        return RAFT_OK;
    case RAFT_MSG_APPEND:
        return on_append(r, m, plan);
    case RAFT_MSG_APPEND_RESP:
        on_append_resp(r, m);
        return RAFT_OK;
    case RAFT_MSG_SNAP:
        return on_snap(r, m);
    case RAFT_MSG_READ_INDEX:
        on_read_index(r, m);
        return RAFT_OK;
    default: /* RAFT_MSG_READ_INDEX_RESP: a leader's answer, of any term */
        push_read(r, m->read_ctx, m->reject ? 0 : m->commit_zxid, !m->reject);
        return RAFT_OK;
    }
}

int raft_step(struct raft *r, const struct raft_msg *m)
{
    BASE_ASSERT(r && !r->in_ready);
    enum msg_verdict v = msg_check(r, m);
    if (v != MSG_OK)
        return v == MSG_IGNORE ? RAFT_OK : RAFT_EINVAL;
    bool leads_this_term = r->role == RAFT_LEADER && m->term == r->term;
    bool from_leader = m->type == RAFT_MSG_APPEND || m->type == RAFT_MSG_SNAP;
    if (from_leader && leads_this_term)
        return RAFT_EINVAL; /* a second leader in one term: impossible */
    struct append_plan plan = {0};
    if (m->type == RAFT_MSG_APPEND && m->term >= r->term && !plan_append(r, m, &plan))
        return RAFT_EINVAL;
    if (m->term > r->term && !step_higher_term(r, m))
        return RAFT_OK;
    if (m->term < r->term && !step_lower_term(r, m))
        return RAFT_OK;
    struct raft_peer *sender = peer_by_id(r, m->from);
    if (r->role == RAFT_LEADER && m->term == r->term && sender)
        sender->active = true;
    return step_dispatch(r, m, &plan);
}

/* ---- the other events ------------------------------------------------- */

void raft_tick(struct raft *r)
{
    BASE_ASSERT(r && !r->in_ready);
    if (r->role == RAFT_LEADER) {
        leader_tick(r);
        return;
    }
    tick_up(&r->lease_elapsed);
    if (r->role == RAFT_OBSERVER)
        return; /* observers never campaign */
    tick_up(&r->election_elapsed);
    if (r->election_elapsed >= r->election_timeout)
        start_pre_vote(r);
}

/* Appends one entry of this leader's at the next counter. */
static int leader_propose(struct raft *r, uint8_t type, const void *data, size_t len,
                          int64_t *zxid)
{
    int64_t last = log_last(r);
    BASE_ASSERT(raft_zxid_term(last) == r->term); /* the no-op came first */
    uint64_t next = (uint64_t)raft_zxid_counter(last) + 1;
    if (next > r->cfg.counter_limit) {
        /* ZOOKEEPER-1277: never wrap the counter; a new term restarts it */
        become_follower(r, r->term, 0);
        return RAFT_ELIMIT;
    }
    struct raft_entry e = {raft_make_zxid(r->term, (uint32_t)next), type, data, len};
    int err = leader_append(r, &e);
    if (err != RAFT_OK)
        return err;
    if (zxid)
        *zxid = e.zxid;
    r->append_pending = true;
    return RAFT_OK;
}

int raft_propose(struct raft *r, const void *data, size_t len, int64_t *zxid)
{
    BASE_ASSERT(r && !r->in_ready);
    if (r->role != RAFT_LEADER)
        return RAFT_ENOTLEADER;
    if (len && !data)
        return RAFT_EINVAL;
    return leader_propose(r, RAFT_ENTRY_DATA, data, len, zxid);
}

static int leader_propose_config(struct raft *r, const struct raft_config *c, int64_t *zxid)
{
    uint8_t buf[RAFT_CONFIG_BYTES_MAX];
    size_t len = raft_config_encode(c, buf);
    return leader_propose(r, RAFT_ENTRY_CONFIG, buf, len, zxid);
}

/* After the commit moved (or a heartbeat, to retry): once this leader has
 * committed an entry of its term, a committed joint membership is followed
 * by its final one, and a committed final membership that does not count
 * this leader as a voter ends its leadership (the Raft paper, section 6).
 * A membership from a snapshot or the log's base (conf_zxid 0) is
 * committed. */
static void leader_after_commit(struct raft *r)
{
    if (r->role != RAFT_LEADER || raft_zxid_term(r->commit) != r->term ||
        r->conf_zxid > r->commit)
        return;
    if (r->conf.n_old > 0) {
        struct raft_config fin = r->conf;
        fin.n_old = 0;
        memset(fin.old, 0, sizeof fin.old);
        (void)leader_propose_config(r, &fin, NULL); /* failed: the next tick retries */
        return;
    }
    if (!r->peers[r->self].vnew)
        become_follower(r, r->term, 0);
}

static bool same_members(const struct raft_member *a, uint32_t na, const struct raft_member *b,
                         uint32_t nb)
{
    if (na != nb)
        return false;
    for (uint32_t i = 0; i < na; i++) {
        const struct raft_member *m = member_in(b, nb, a[i].id);
        if (!m || m->voter != a[i].voter)
            return false;
    }
    return true;
}

int raft_propose_config(struct raft *r, const struct raft_member *members, uint32_t n,
                        const void *extra, size_t extra_len, int64_t *zxid)
{
    BASE_ASSERT(r && !r->in_ready);
    if (r->role != RAFT_LEADER)
        return RAFT_ENOTLEADER;
    /* one change at a time, and only once this term has committed an
     * entry, so that no membership of an earlier term is still pending */
    if (r->conf.n_old > 0 || r->conf_zxid > r->commit || raft_zxid_term(r->commit) != r->term)
        return RAFT_EBUSY;
    if (!members || !list_valid(members, n) || extra_len > RAFT_CONFIG_EXTRA_MAX ||
        (extra_len && !extra))
        return RAFT_EINVAL;
    if (same_members(members, n, r->conf.members, r->conf.n_members) &&
        extra_len == r->conf.extra_len && (extra_len == 0 || !memcmp(extra, r->conf.extra, extra_len)))
        return RAFT_EINVAL;
    struct raft_config c = {.n_members = n, .extra_len = (uint32_t)extra_len};
    memcpy(c.members, members, n * sizeof *members);
    if (extra_len)
        memcpy(c.extra, extra, extra_len);
    if (!(r->cfg.break_on_purpose & RAFT_BREAK_CONFIG_NO_JOINT)) {
        c.n_old = r->conf.n_members;
        memcpy(c.old, r->conf.members, c.n_old * sizeof *c.old);
    }
    if (!config_valid(&c))
        return RAFT_EINVAL; /* both halves together hold too many servers */
    return leader_propose_config(r, &c, zxid);
}

int64_t raft_next_zxid(const struct raft *r)
{
    if (r->role != RAFT_LEADER)
        return 0;
    int64_t last = log_last(r);
    uint64_t next = (uint64_t)raft_zxid_counter(last) + 1;
    if (raft_zxid_term(last) != r->term || next > r->cfg.counter_limit)
        return 0;
    return raft_make_zxid(r->term, (uint32_t)next);
}

int raft_read_index(struct raft *r, uint64_t ctx)
{
    BASE_ASSERT(r && !r->in_ready);
    if (r->role == RAFT_LEADER)
        return leader_add_read(r, ctx, 0);
    if (r->leader_id == 0)
        return RAFT_ENOTLEADER;
    struct raft_msg m = {.type = RAFT_MSG_READ_INDEX, .to = r->leader_id, .read_ctx = ctx};
    send(r, m, 0);
    return RAFT_OK;
}

/* The oldest log zxid a queued APPEND still refers to (INT64_MAX: none). */
static int64_t oldest_queued_zxid(const struct raft *r)
{
    int64_t oldest = INT64_MAX;
    for (size_t i = 0; i < r->n_msgs; i++)
        if (r->msgs[i].type == RAFT_MSG_APPEND && r->msgs[i].n_entries > 0 &&
            r->msg_first[i] < oldest)
            oldest = r->msg_first[i];
    return oldest;
}

int raft_request_snapshot(struct raft *r)
{
    BASE_ASSERT(r && !r->in_ready);
    if (r->role == RAFT_LEADER)
        return RAFT_EINVAL;
    /* not below the snapshot point: the driver may have dropped its durable
     * log up to there, and a snapshot below it would leave a hole in it */
    r->want_snap_from = r->snap_zxid > 0 ? r->snap_zxid : 1;
    return RAFT_OK;
}

void raft_compact(struct raft *r, int64_t zxid, size_t keep_entries)
{
    BASE_ASSERT(r && !r->in_ready);
    BASE_ASSERT(zxid >= 0 && zxid <= r->applied); /* only applied state is snapshotted */
    if (zxid <= r->snap_zxid)
        return;
    r->snap_zxid = zxid;
    size_t upto = log_upper(r, zxid);
    size_t drop = upto > keep_entries ? upto - keep_entries : 0;
    size_t referenced = log_upper(r, oldest_queued_zxid(r) - 1);
    if (drop > referenced)
        drop = referenced;
    if (drop == 0)
        return;
    int64_t base = drop == upto ? zxid : r->log[drop - 1].zxid;
    for (size_t i = drop; i-- > 0;) {
        if (r->log[i].type != RAFT_ENTRY_CONFIG)
            continue;
        /* the membership in effect at the new base goes with the entries */
        int rc = raft_config_decode(r->log[i].data, r->log[i].len, &r->base_conf);
        BASE_ASSERT(rc == RAFT_OK);
        break;
    }
    for (size_t i = 0; i < drop; i++)
        entry_free(&r->log[i]);
    memmove(r->log, r->log + drop, (r->n_log - drop) * sizeof *r->log);
    r->n_log -= drop;
    BASE_ASSERT(r->n_stable >= drop); /* applied entries are durable */
    r->n_stable -= drop;
    r->log_base = base;
}

/* ---- Ready ------------------------------------------------------------ */

static bool hard_state_changed(const struct raft *r)
{
    return r->term != r->persisted.term || r->vote != r->persisted.vote;
}

/* Log indices [*first, *end) of the entries committed and not yet
 * applied; without async_log, only the durable ones (raft.h). */
static void committed_range(const struct raft *r, size_t *first, size_t *end)
{
    int64_t upto = r->cfg.async_log || r->commit < r->durable ? r->commit : r->durable;
    *first = log_upper(r, r->applied);
    *end = upto > r->applied ? log_upper(r, upto) : *first;
}

bool raft_has_ready(const struct raft *r)
{
    size_t first, end;
    committed_range(r, &first, &end);
    return hard_state_changed(r) || r->snap_ready || r->truncate ||
           r->n_stable < r->n_log || r->n_msgs > 0 || end > first || r->n_reads > 0;
}

/* Messages name log entries and snapshots as of this ready: the log may
 * have moved since an APPEND was queued, and the driver may have compacted
 * to a newer snapshot since a SNAP was (the driver attaches the snapshot it
 * holds now, so the zxid must be that one). */
static void resolve_msgs(struct raft *r)
{
    for (size_t i = 0; i < r->n_msgs; i++) {
        struct raft_msg *m = &r->msgs[i];
        if (m->type == RAFT_MSG_APPEND && m->n_entries > 0) {
            size_t at = log_find(r, r->msg_first[i]);
            BASE_ASSERT(at != RAFT_NOT_FOUND && at + m->n_entries <= r->n_log);
            m->entries = &r->log[at];
        } else if (m->type == RAFT_MSG_SNAP) {
            BASE_ASSERT(r->snap_zxid >= m->snap_zxid);
            m->snap_zxid = r->snap_zxid;
            (void)conf_at(r, r->snap_zxid, &r->snap_conf);
            m->snap_config = &r->snap_conf;
            struct raft_peer *p = peer_by_id(r, m->to);
            if (p && p->snap_pending)
                p->snap_sent = r->snap_zxid;
        }
    }
}

void raft_ready(struct raft *r, struct raft_ready *rd)
{
    BASE_ASSERT(r && rd && !r->in_ready);
    BASE_ASSERT(r->n_batches < RAFT_LOG_BATCHES_MAX); /* room for this ready's batch */
    if (r->append_pending && r->role == RAFT_LEADER)
        broadcast_append(r, APPEND_ENTRIES);
    r->append_pending = false;
    memset(rd, 0, sizeof *rd);
    rd->hard_state_changed = hard_state_changed(r);
    /* commit_zxid is written lazily with term and vote, so it must already
     * be safe against the disk before this ready's truncation and appends */
    int64_t safe_commit = r->commit < r->durable ? r->commit : r->durable;
    rd->hard_state = (struct raft_hard_state){r->term, r->vote, safe_commit};
    rd->snapshot = r->snap_ready ? &r->snap : NULL;
    rd->truncate = r->truncate;
    rd->truncate_after = r->truncate_after;
    rd->entries = r->log + r->n_stable;
    rd->n_entries = r->n_log - r->n_stable;
    resolve_msgs(r);
    rd->msgs = r->msgs;
    rd->n_msgs = r->n_msgs;
    size_t first, end;
    committed_range(r, &first, &end);
    rd->committed = r->log + first;
    rd->n_committed = end - first;
    rd->reads = r->reads;
    rd->n_reads = r->n_reads;
    r->handed = *rd;
    r->in_ready = true;
}

static bool same_ready(const struct raft_ready *a, const struct raft_ready *b)
{
    return a->hard_state_changed == b->hard_state_changed && a->snapshot == b->snapshot &&
           a->truncate == b->truncate && a->entries == b->entries &&
           a->n_entries == b->n_entries && a->msgs == b->msgs && a->n_msgs == b->n_msgs &&
           a->committed == b->committed && a->n_committed == b->n_committed &&
           a->reads == b->reads && a->n_reads == b->n_reads;
}

void raft_advance(struct raft *r, const struct raft_ready *rd)
{
    BASE_ASSERT(r && rd && r->in_ready);
    BASE_ASSERT(same_ready(&r->handed, rd)); /* the rd raft_ready filled */
    r->in_ready = false;
    if (rd->hard_state_changed)
        r->persisted = rd->hard_state;
    if (r->snap_ready) {
        free((void *)r->snap.data);
        r->snap = (struct raft_snapshot){0};
        r->snap_ready = false;
        r->resync_handing = false;
    }
    r->truncate = false;
    r->n_stable = r->n_log;
    if (!r->cfg.async_log) {
        r->durable = log_last(r);
    } else {
        /* a snapshot is persisted before the ready advances (step 2) */
        if (rd->snapshot && !rd->snapshot->keeps_log && rd->snapshot->zxid > r->durable)
            r->durable = rd->snapshot->zxid;
        if (rd->n_entries > 0 || rd->truncate) {
            BASE_ASSERT(r->n_batches < RAFT_LOG_BATCHES_MAX);
            size_t at = (r->batch_head + r->n_batches++) % RAFT_LOG_BATCHES_MAX;
            r->batch_last[at] = log_last(r);
        }
    }
    if (rd->n_committed)
        r->applied = rd->committed[rd->n_committed - 1].zxid;
    BASE_ASSERT(r->applied <= r->commit && r->commit <= log_last(r));
    r->n_msgs = 0;
    r->n_reads = 0;
    leader_maybe_commit(r); /* the leader's own entries now count */
}

void raft_log_synced(struct raft *r, size_t n)
{
    BASE_ASSERT(r && !r->in_ready && r->cfg.async_log);
    BASE_ASSERT(n <= r->n_batches);
    for (; n > 0; n--) {
        int64_t last = r->batch_last[r->batch_head];
        r->batch_head = (r->batch_head + 1) % RAFT_LOG_BATCHES_MAX;
        r->n_batches--;
        if (last > r->durable)
            r->durable = last;
    }
    BASE_ASSERT(r->durable <= log_last(r));
    leader_maybe_commit(r);
}

size_t raft_log_unsynced(const struct raft *r)
{
    return r->n_batches;
}

/* ---- construction and inspection -------------------------------------- */

static bool cfg_valid(const struct raft_cfg *cfg)
{
    if (!cfg || !cfg->members || cfg->n_members == 0 || cfg->n_members > RAFT_MEMBERS_MAX)
        return false;
    if (cfg->heartbeat_ticks == 0 || cfg->election_ticks <= cfg->heartbeat_ticks ||
        cfg->election_ticks > RAFT_ELECTION_TICKS_MAX ||
        cfg->first_election_ticks > cfg->election_ticks)
        return false;
    bool self = false, voter = false;
    for (uint32_t i = 0; i < cfg->n_members; i++) {
        const struct raft_member *m = &cfg->members[i];
        if (m->id == 0 || m->id > RAFT_ID_MAX)
            return false;
        for (uint32_t j = 0; j < i; j++)
            if (cfg->members[j].id == m->id)
                return false;
        self |= m->id == cfg->self_id;
        voter |= m->voter;
    }
    return self && voter;
}

static bool boot_valid(const struct raft_cfg *cfg, const struct raft_boot *b)
{
    const struct raft_hard_state *hs = &b->hard_state;
    if (hs->term > RAFT_TERM_MAX || hs->commit_zxid < 0 || b->snap_zxid < 0)
        return false;
    if (b->n_entries && !b->entries)
        return false;
    /* a vote may be for a server a later membership added */
    if (hs->vote > RAFT_ID_MAX || raft_zxid_term(b->snap_zxid) > hs->term)
        return false;
    if (b->snap_config && !config_valid(b->snap_config))
        return false;
    int64_t prev = b->snap_zxid;
    for (size_t i = 0; i < b->n_entries; i++) {
        const struct raft_entry *e = &b->entries[i];
        /* an entry's term was persisted (step 1) before the entry (step 4) */
        if (e->zxid <= prev || raft_zxid_term(e->zxid) > hs->term)
            return false;
        if ((e->type != RAFT_ENTRY_NOOP && e->type != RAFT_ENTRY_DATA &&
             e->type != RAFT_ENTRY_CONFIG) || (e->len && !e->data))
            return false;
        if (e->type == RAFT_ENTRY_CONFIG && !entry_config_valid(e))
            return false;
        prev = e->zxid;
    }
    return true;
}

static bool load_boot(struct raft *r, const struct raft_boot *b)
{
    r->term = b->hard_state.term;
    r->vote = b->hard_state.vote;
    r->persisted = b->hard_state;
    r->log_base = r->snap_zxid = b->snap_zxid;
    if (b->snap_config) {
        r->base_conf = *b->snap_config;
        conf_use(r, &r->base_conf, 0, false);
    }
    for (size_t i = 0; i < b->n_entries; i++)
        if (log_append(r, &b->entries[i]) != RAFT_OK)
            return false;
    r->n_stable = r->n_log;
    r->durable = log_last(r);
    /* the snapshot is committed; a commit past the log (a torn tail) is
     * cut back to what the disk holds */
    int64_t c = b->hard_state.commit_zxid > b->snap_zxid ? b->hard_state.commit_zxid
                                                         : b->snap_zxid;
    r->commit = r->applied = c < log_last(r) ? c : log_last(r);
    return true;
}

struct raft *raft_new(const struct raft_cfg *cfg, const struct raft_boot *boot)
{
    if (!cfg_valid(cfg) || (boot && !boot_valid(cfg, boot)))
        return NULL;
    struct raft *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->cfg = *cfg;
    r->cfg.members = NULL;
    if (r->cfg.counter_limit == 0)
        r->cfg.counter_limit = RAFT_DEFAULT_COUNTER_LIMIT;
    if (r->cfg.max_append_entries == 0)
        r->cfg.max_append_entries = RAFT_DEFAULT_APPEND_ENTRIES;
    if (r->cfg.max_append_bytes == 0)
        r->cfg.max_append_bytes = RAFT_DEFAULT_APPEND_BYTES;
    r->cfg_conf.n_members = cfg->n_members;
    memcpy(r->cfg_conf.members, cfg->members, cfg->n_members * sizeof *cfg->members);
    r->base_conf = r->cfg_conf;
    conf_use(r, &r->cfg_conf, 0, false);
    r->rng = cfg->seed ^ ((uint64_t)cfg->self_id * 0x9e3779b97f4a7c15ull);
    if (boot && !load_boot(r, boot)) {
        raft_free(r);
        return NULL;
    }
    r->role = may_campaign(r) ? RAFT_FOLLOWER : RAFT_OBSERVER;
    reset_election_timer(r);
    if (cfg->first_election_ticks > 0) {
        /* a server that just started knows no leader; pre-vote keeps an
         * early campaign from disturbing one that exists */
        uint32_t f = cfg->first_election_ticks;
        r->election_timeout = f + (uint32_t)(rng_next(r) % f);
    }
    return r;
}

void raft_free(struct raft *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n_log; i++)
        entry_free(&r->log[i]);
    free(r->log);
    free(r->msgs);
    free(r->msg_first);
    free(r->reads);
    free(r->pending);
    free((void *)r->snap.data);
    free(r);
}

struct raft_brief raft_brief(const struct raft *r)
{
    return (struct raft_brief){ .role = r->role, .term = r->term, .leader_id = r->leader_id,
                                .leader_lease = in_lease(r), .applied_zxid = r->applied,
                                .snap_zxid = r->snap_zxid };
}

void raft_status(const struct raft *r, struct raft_status *st)
{
    memset(st, 0, sizeof *st);
    st->role = r->role;
    st->term = r->term;
    st->vote = r->vote;
    st->leader_id = r->leader_id;
    st->leader_lease = in_lease(r);
    st->commit_zxid = r->commit;
    st->applied_zxid = r->applied;
    st->last_zxid = log_last(r);
    st->durable_zxid = r->durable;
    st->snap_zxid = r->snap_zxid;
    bool leader = r->role == RAFT_LEADER;
    st->config = r->conf;
    st->config_zxid = r->conf_zxid;
    /* until the resync's snapshot is handed out, the state machine is the
     * diverged one: a driver keeps from snapshotting it till then */
    st->snap_wanted = r->want_snap_from > 0 ? r->want_snap_from
                      : r->resync_handing   ? r->snap.zxid
                                            : 0;
    for (uint32_t i = 0; i < r->n_peers; i++) {
        if (i == r->self)
            continue;
        const struct raft_peer *p = &r->peers[i];
        st->peers[st->n_peers++] = (struct raft_peer_status){
            p->id, p->voter, leader ? p->match : 0, leader && p->active,
            leader && p->snap_wanted > r->snap_zxid ? p->snap_wanted : 0};
    }
}

size_t raft_log_len(const struct raft *r)
{
    return r->n_log;
}

const struct raft_entry *raft_log_at(const struct raft *r, size_t i)
{
    return i < r->n_log ? &r->log[i] : NULL;
}

const char *raft_role_name(enum raft_role role)
{
    switch (role) {
    case RAFT_FOLLOWER: return "follower";
    case RAFT_PRE_CANDIDATE: return "pre-candidate";
    case RAFT_CANDIDATE: return "candidate";
    case RAFT_LEADER: return "leader";
    case RAFT_OBSERVER: return "observer";
    }
    return "unknown";
}

bool raft_msg_early(const struct raft_msg *m)
{
    return m->type == RAFT_MSG_APPEND || m->type == RAFT_MSG_SNAP;
}

const char *raft_msg_type_name(uint8_t type)
{
    switch (type) {
    case RAFT_MSG_VOTE_REQ: return "VOTE_REQ";
    case RAFT_MSG_VOTE_RESP: return "VOTE_RESP";
    case RAFT_MSG_APPEND: return "APPEND";
    case RAFT_MSG_APPEND_RESP: return "APPEND_RESP";
    case RAFT_MSG_SNAP: return "SNAP";
    case RAFT_MSG_READ_INDEX: return "READ_INDEX";
    case RAFT_MSG_READ_INDEX_RESP: return "READ_INDEX_RESP";
    }
    return "unknown";
}
