/* check — see check.h. */
#include "tests/sim/check.h"

#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "tests/sim/hash.h"

#define CHECK_TERMS_MAX (1u << 24) /* far above any run; bounds the table */

void check_init(struct check *c)
{
    memset(c, 0, sizeof(*c));
}

void check_free(struct check *c)
{
    free(c->leader_of_term);
    free(c->committed);
    free(c->chain_zxid);
    free(c->chain_hash);
    free(c->chain_node);
    memset(c, 0, sizeof(*c));
}

static void trace_role(struct sim *s, struct sim_node *n, const struct raft_status *st)
{
    if (st->role == n->seen_role && st->term == n->seen_term)
        return;
    n->seen_role = (uint8_t)st->role;
    n->seen_term = st->term;
    struct trace_event ev = {.step = s->now, .kind = TR_ROLE, .node = (uint8_t)n->id,
                             .mtype = (uint8_t)st->role, .term = st->term, .a = st->leader_id};
    trace_add(&s->trace, &ev);
}

void check_leader(struct sim *s, struct sim_node *n)
{
    struct check *c = &s->check;
    struct raft_status st;
    raft_status(n->r, &st);
    trace_role(s, n, &st);
    if (!n->voter && st.role != RAFT_OBSERVER && st.role != RAFT_FOLLOWER) {
        sim_fail(s, n->id, "observer n%u became %s in term %u", n->id, raft_role_name(st.role),
                 st.term);
        return;
    }
    if (st.role != RAFT_LEADER)
        return;
    if (st.term >= CHECK_TERMS_MAX) {
        sim_fail(s, n->id, "n%u leads in term %u: terms run away", n->id, st.term);
        return;
    }
    if (st.term >= c->n_terms) {
        size_t n_terms = c->n_terms ? c->n_terms : 64;
        while (n_terms <= st.term)
            n_terms *= 2;
        uint32_t *t = realloc(c->leader_of_term, n_terms * sizeof(*t));
        BASE_ASSERT(t != NULL);
        memset(t + c->n_terms, 0, (n_terms - c->n_terms) * sizeof(*t));
        c->leader_of_term = t;
        c->n_terms = n_terms;
    }
    uint32_t *leader = &c->leader_of_term[st.term];
    if (*leader == 0)
        *leader = n->id;
    else if (*leader != n->id)
        sim_fail(s, n->id, "election safety: two leaders in term %u: n%u and n%u", st.term,
                 *leader, n->id);
}

/* The slot for zxid in the chain map (its own or the empty one to fill). */
static size_t chain_slot(const struct check *c, int64_t zxid)
{
    size_t i = (size_t)hash_u64(HASH_FNV_OFFSET, (uint64_t)zxid) & (c->chain_cap - 1);
    for (size_t probe = 0; probe < c->chain_cap; probe++) {
        if (c->chain_zxid[i] == 0 || c->chain_zxid[i] == zxid)
            return i;
        i = (i + 1) & (c->chain_cap - 1);
    }
    BASE_ASSERT(!"chain map full"); /* never: it grows at half load */
    return 0;
}

static void chain_grow(struct check *c)
{
    struct check old = *c;
    c->chain_cap = old.chain_cap ? 2 * old.chain_cap : 1024;
    c->chain_zxid = calloc(c->chain_cap, sizeof(*c->chain_zxid));
    c->chain_hash = calloc(c->chain_cap, sizeof(*c->chain_hash));
    c->chain_node = calloc(c->chain_cap, sizeof(*c->chain_node));
    BASE_ASSERT(c->chain_zxid && c->chain_hash && c->chain_node);
    for (size_t i = 0; i < old.chain_cap; i++) {
        if (old.chain_zxid[i] == 0)
            continue;
        size_t j = chain_slot(c, old.chain_zxid[i]);
        c->chain_zxid[j] = old.chain_zxid[i];
        c->chain_hash[j] = old.chain_hash[i];
        c->chain_node[j] = old.chain_node[i];
    }
    free(old.chain_zxid);
    free(old.chain_hash);
    free(old.chain_node);
}

void check_log_entry(struct sim *s, const struct sim_node *n, const struct disk_entry *de)
{
    struct check *c = &s->check;
    char z[24];
    if (de->zxid <= 0) {
        sim_fail(s, n->id, "n%u appends an entry at zxid %s", n->id, trace_zxid(de->zxid, z));
        return;
    }
    if (2 * (c->chain_n + 1) > c->chain_cap)
        chain_grow(c);
    size_t i = chain_slot(c, de->zxid);
    if (c->chain_zxid[i] == 0) {
        c->chain_zxid[i] = de->zxid;
        c->chain_hash[i] = de->chain;
        c->chain_node[i] = (uint8_t)n->id;
        c->chain_n++;
    } else if (c->chain_hash[i] != de->chain) {
        sim_fail(s, n->id,
                 "log matching: n%u holds zxid %s with a log (chain %016llx) that differs from "
                 "the one n%u held there (chain %016llx)",
                 n->id, trace_zxid(de->zxid, z), (unsigned long long)de->chain,
                 c->chain_node[i], (unsigned long long)c->chain_hash[i]);
    }
}

/* Index of zxid in the committed sequence, or -1. */
static long committed_index(const struct check *c, int64_t zxid)
{
    size_t lo = 0, hi = c->n_committed;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->committed[mid].zxid < zxid)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (lo < c->n_committed && c->committed[lo].zxid == zxid) ? (long)lo : -1;
}

const struct check_commit *check_committed_at(const struct check *c, int64_t zxid)
{
    long i = committed_index(c, zxid);
    return i < 0 ? NULL : &c->committed[i];
}

static void committed_push(struct check *c, struct check_commit cc)
{
    if (c->n_committed == c->cap_committed) {
        size_t cap = c->cap_committed ? 2 * c->cap_committed : 256;
        struct check_commit *v = realloc(c->committed, cap * sizeof(*v));
        BASE_ASSERT(v != NULL);
        c->committed = v;
        c->cap_committed = cap;
    }
    c->committed[c->n_committed++] = cc;
}

/* e, applied after prev, must be the committed successor of prev (or
 * extend the sequence); returns the successor's index, or -1 on failure. */
static long committed_successor(struct sim *s, const struct sim_node *n, int64_t prev,
                                const struct raft_entry *e, uint64_t digest_after)
{
    struct check *c = &s->check;
    char z1[24], z2[24], z3[24];
    long at = prev == 0 ? -1 : committed_index(c, prev);
    if (prev != 0 && at < 0) {
        sim_fail(s, n->id, "n%u is at %s, which no node applied as committed", n->id,
                 trace_zxid(prev, z1));
        return -1;
    }
    uint64_t h = hash_entry(e->type, e->data, e->len);
    size_t next = (size_t)(at + 1);
    if (next == c->n_committed) {
        uint64_t chain = hash_chain(at < 0 ? 0 : c->committed[at].chain, e->zxid, h);
        committed_push(c, (struct check_commit){e->zxid, h, chain, digest_after, n->id});
        return (long)next;
    }
    const struct check_commit *cc = &c->committed[next];
    if (cc->zxid != e->zxid || cc->entry_hash != h) {
        sim_fail(s, n->id,
                 "committed prefix: n%u applies %s after %s, but n%u applied %s after it%s", n->id,
                 trace_zxid(e->zxid, z1), trace_zxid(prev, z2), cc->first_node,
                 trace_zxid(cc->zxid, z3), cc->zxid == e->zxid ? " (a different entry)" : "");
        return -1;
    }
    if (cc->digest != digest_after) {
        sim_fail(s, n->id, "digest: n%u has %016llx after applying %s, n%u had %016llx", n->id,
                 (unsigned long long)digest_after, trace_zxid(e->zxid, z1), cc->first_node,
                 (unsigned long long)cc->digest);
        return -1;
    }
    return (long)next;
}

bool check_apply_order(struct sim *s, const struct sim_node *n, const struct raft_entry *e)
{
    char z1[24], z2[24];
    if (e->zxid > n->kv.applied_zxid)
        return true;
    sim_fail(s, n->id, "n%u applies %s after %s: applied zxids must increase", n->id,
             trace_zxid(e->zxid, z1), trace_zxid(n->kv.applied_zxid, z2));
    return false;
}

bool check_apply(struct sim *s, const struct sim_node *n, const struct raft_entry *e,
                 uint64_t digest_after)
{
    char z1[24];
    long at = committed_successor(s, n, n->kv.applied_zxid, e, digest_after);
    if (at < 0)
        return false;
    const struct disk_entry *de = disk_find(&n->disk, e->zxid);
    if (de == NULL) {
        sim_fail(s, n->id, "n%u applies %s, which is not in its durable log", n->id,
                 trace_zxid(e->zxid, z1));
        return false;
    }
    if (de->chain != s->check.committed[at].chain) {
        sim_fail(s, n->id, "n%u's log through %s differs from the committed sequence", n->id,
                 trace_zxid(e->zxid, z1));
        return false;
    }
    return true;
}

bool check_snapshot(struct sim *s, const struct sim_node *n, int64_t zxid, uint64_t digest,
                    uint64_t *chain)
{
    char z1[24], z2[24];
    if (zxid < n->kv.applied_zxid) {
        sim_fail(s, n->id, "n%u installs a snapshot at %s, behind its applied %s", n->id,
                 trace_zxid(zxid, z1), trace_zxid(n->kv.applied_zxid, z2));
        return false;
    }
    const struct check_commit *cc = check_committed_at(&s->check, zxid);
    if (cc == NULL) {
        sim_fail(s, n->id, "n%u installs a snapshot at %s, which no node applied", n->id,
                 trace_zxid(zxid, z1));
        return false;
    }
    if (cc->digest != digest) {
        sim_fail(s, n->id, "digest: n%u's snapshot at %s has %016llx, n%u had %016llx", n->id,
                 trace_zxid(zxid, z1), (unsigned long long)digest, cc->first_node,
                 (unsigned long long)cc->digest);
        return false;
    }
    *chain = cc->chain;
    return true;
}

void check_truncate(struct sim *s, const struct sim_node *n, int64_t after)
{
    char z1[24], z2[24];
    if (after < n->kv.applied_zxid) {
        sim_fail(s, n->id, "n%u truncates after %s, below its applied %s", n->id,
                 trace_zxid(after, z1), trace_zxid(n->kv.applied_zxid, z2));
        return;
    }
    const struct disk_log *log = &n->disk.log;
    for (size_t i = log->n; i > 0 && log->v[i - 1].zxid > after; i--) {
        const struct check_commit *cc = check_committed_at(&s->check, log->v[i - 1].zxid);
        if (cc != NULL && cc->chain == log->v[i - 1].chain) {
            sim_fail(s, n->id, "n%u truncates after %s, dropping committed entry %s", n->id,
                     trace_zxid(after, z1), trace_zxid(cc->zxid, z2));
            return;
        }
    }
}

void check_hard_state(struct sim *s, const struct sim_node *n, const struct raft_hard_state *hs)
{
    const struct raft_hard_state *old = &n->disk.hard;
    if (hs->term < old->term)
        sim_fail(s, n->id, "n%u persists term %u after term %u", n->id, hs->term, old->term);
    else if (hs->term == old->term && old->vote != 0 && hs->vote != old->vote)
        sim_fail(s, n->id, "n%u changes its vote in term %u from n%u to n%u", n->id, hs->term,
                 old->vote, hs->vote);
}

/* An accepted APPEND_RESP claims the log through match_zxid is durable. */
static bool match_is_durable(const struct disk *d, int64_t match)
{
    return match <= d->snap_zxid || (d->pend.n == 0 && disk_find(d, match) != NULL);
}

/* A vote for `to` in term is settled on disk: either the disk's term is
 * past it (the node can never vote in that term again) or the disk holds
 * that very vote. */
static bool vote_is_durable(const struct raft_hard_state *hs, uint32_t term, uint32_t to)
{
    return hs->term > term || (hs->term == term && hs->vote == to);
}

void check_send(struct sim *s, const struct sim_node *n, const struct raft_msg *m)
{
    const struct raft_hard_state *hs = &n->disk.hard;
    const char *name = raft_msg_type_name(m->type);
    char z[24];
    if (m->from != n->id || m->to == n->id || sim_node(s, m->to) == NULL) {
        sim_fail(s, n->id, "n%u sends %s from n%u to n%u", n->id, name, m->from, m->to);
    } else if (!m->pre_vote && m->term > hs->term) {
        sim_fail(s, n->id, "durable before send: n%u sends %s in term %u, its disk has term %u",
                 n->id, name, m->term, hs->term);
    } else if (m->type == RAFT_MSG_VOTE_REQ && !m->pre_vote &&
               !vote_is_durable(hs, m->term, n->id)) {
        sim_fail(s, n->id, "durable before send: n%u asks for votes in term %u, disk vote n%u",
                 n->id, m->term, hs->vote);
    } else if (m->type == RAFT_MSG_VOTE_RESP && !m->pre_vote && !m->reject &&
               !vote_is_durable(hs, m->term, m->to)) {
        sim_fail(s, n->id, "durable before send: n%u grants n%u its vote in term %u, disk has "
                           "term %u vote n%u", n->id, m->to, m->term, hs->term, hs->vote);
    } else if (m->type == RAFT_MSG_APPEND_RESP && !m->reject && m->term == hs->term &&
               !match_is_durable(&n->disk, m->match_zxid)) {
        /* Only in the disk's term: an ack queued in an older term may name
         * entries a later leader has since had truncated (they were not
         * committed, Leader Completeness), and its stale term is harmless. */
        sim_fail(s, n->id, "durable before send: n%u acks %s, which is not on its disk", n->id,
                 trace_zxid(m->match_zxid, z));
    }
}

/* The core's log after snap_zxid equals the disk's (zxid, type, data). */
static void check_core_log(struct sim *s, const struct sim_node *n, int64_t core_snap)
{
    const struct disk_log *log = &n->disk.log;
    int64_t from = core_snap > n->disk.snap_zxid ? core_snap : n->disk.snap_zxid;
    size_t di = 0, len = raft_log_len(n->r);
    char z[24];
    while (di < log->n && log->v[di].zxid <= from)
        di++;
    for (size_t i = 0; i < len; i++) {
        const struct raft_entry *e = raft_log_at(n->r, i);
        if (e == NULL || e->zxid <= from)
            continue;
        const struct disk_entry *de = di < log->n ? &log->v[di++] : NULL;
        if (de == NULL || de->zxid != e->zxid || de->type != e->type || de->len != e->len ||
            (e->len && memcmp(de->data, e->data, e->len) != 0)) {
            sim_fail(s, n->id, "n%u's core holds %s, which differs from its disk", n->id,
                     trace_zxid(e->zxid, z));
            return;
        }
    }
    if (di != log->n)
        sim_fail(s, n->id, "n%u's disk holds %s, which its core does not", n->id,
                 trace_zxid(log->v[di].zxid, z));
}

void check_core_matches_disk(struct sim *s, const struct sim_node *n)
{
    struct raft_status st;
    raft_status(n->r, &st);
    char z1[24], z2[24];
    if (st.applied_zxid != n->kv.applied_zxid) {
        sim_fail(s, n->id, "n%u's core says applied %s, its state machine is at %s", n->id,
                 trace_zxid(st.applied_zxid, z1), trace_zxid(n->kv.applied_zxid, z2));
        return;
    }
    check_core_log(s, n, st.snap_zxid);
}

bool check_converged(struct sim *s, int64_t min_zxid)
{
    const struct check *c = &s->check;
    if (c->n_committed == 0 || c->committed[c->n_committed - 1].zxid < min_zxid)
        return false;
    const struct check_commit *last = &c->committed[c->n_committed - 1];
    for (uint32_t i = 0; i < s->n_nodes; i++) {
        const struct sim_node *n = &s->nodes[i];
        if (!n->up || n->kv.applied_zxid != last->zxid || kv_digest(&n->kv) != last->digest)
            return false;
        struct raft_status st;
        raft_status(n->r, &st);
        if (st.commit_zxid != last->zxid)
            return false;
    }
    return true;
}
