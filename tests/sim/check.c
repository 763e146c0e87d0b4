/* check — see check.h. */
#include "tests/sim/check.h"

#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "tests/sim/hash.h"
#include "tests/sim/reconfig.h"

#define CHECK_TERMS_MAX (1u << 24) /* far above any run; bounds the table */

void check_init(struct check *c, const struct raft_member *initial, uint32_t n)
{
    memset(c, 0, sizeof(*c));
    BASE_ASSERT(n >= 1 && n <= RAFT_MEMBERS_MAX);
    c->initial.n_members = n;
    memcpy(c->initial.members, initial, n * sizeof(*initial));
}

void check_free(struct check *c)
{
    free(c->leader_of_term);
    free(c->committed);
    free(c->chain_zxid);
    free(c->chain_hash);
    free(c->chain_node);
    free(c->configs);
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

static void trace_config(struct sim *s, struct sim_node *n, const struct raft_status *st)
{
    int64_t b, c;
    reconfig_trace_words(&st->config, &b, &c);
    if (st->config_zxid == n->seen_conf_zxid && b == n->seen_conf_b && c == n->seen_conf_c)
        return;
    n->seen_conf_zxid = st->config_zxid;
    n->seen_conf_b = b;
    n->seen_conf_c = c;
    struct trace_event ev = {.step = s->now, .kind = TR_CONFIG, .node = (uint8_t)n->id,
                             .a = st->config_zxid, .b = b, .c = c};
    trace_add(&s->trace, &ev);
}

/* Only a voter of its own membership campaigns or leads, once that
 * membership is known committed. Before, a server the newest membership
 * leaves out may still be needed: a leader leads on until it commits
 * (raft.h, raft_propose_config), and the Raft thesis (4.2.2) has such a
 * server still campaign, lest the only up-to-date log belong to a server
 * that never will. A spare that was never added uses its cfg (zxid 0):
 * never. False: the check failed. */
static bool check_role_allowed(struct sim *s, const struct sim_node *n,
                               const struct raft_status *st)
{
    char z1[24], z2[24];
    bool campaigns = st->role == RAFT_PRE_CANDIDATE || st->role == RAFT_CANDIDATE;
    if ((campaigns || st->role == RAFT_LEADER) && !reconfig_votes(&st->config, n->id) &&
        st->config_zxid <= st->commit_zxid) {
        sim_fail(s, n->id, "n%u is %s in term %u, but its membership (of %s, commit %s) has it "
                           "as no voter", n->id, raft_role_name(st->role), st->term,
                 trace_zxid(st->config_zxid, z1), trace_zxid(st->commit_zxid, z2));
        return false;
    }
    return true;
}

void check_leader(struct sim *s, struct sim_node *n)
{
    struct check *c = &s->check;
    struct raft_status st;
    raft_status(n->r, &st);
    trace_role(s, n, &st);
    trace_config(s, n, &st);
    if (!check_role_allowed(s, n, &st) || st.role != RAFT_LEADER)
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
    struct raft_config conf;
    if (de->type == RAFT_ENTRY_CONFIG && raft_config_decode(de->data, de->len, &conf) != RAFT_OK) {
        sim_fail(s, n->id, "n%u appends a CONFIG entry at %s that does not decode", n->id,
                 trace_zxid(de->zxid, z));
        return;
    }
    if (de->type != RAFT_ENTRY_NOOP && de->type != RAFT_ENTRY_DATA &&
        de->type != RAFT_ENTRY_CONFIG) {
        sim_fail(s, n->id, "n%u appends an entry of type %u at %s", n->id, de->type,
                 trace_zxid(de->zxid, z));
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

/* e extends the committed sequence: a CONFIG entry's membership joins
 * the committed ones (it decodes: check_log_entry saw it appended). */
static void configs_push(struct check *c, const struct raft_entry *e)
{
    if (e->type != RAFT_ENTRY_CONFIG)
        return;
    if (c->n_configs == c->cap_configs) {
        size_t cap = c->cap_configs ? 2 * c->cap_configs : 16;
        struct check_config *v = realloc(c->configs, cap * sizeof(*v));
        BASE_ASSERT(v != NULL);
        c->configs = v;
        c->cap_configs = cap;
    }
    struct check_config *cc = &c->configs[c->n_configs++];
    cc->zxid = e->zxid;
    int rc = raft_config_decode(e->data, e->len, &cc->conf);
    BASE_ASSERT(rc == RAFT_OK);
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
        committed_push(c, (struct check_commit){e->zxid, h, chain, digest_after, n->id, s->now});
        configs_push(c, e);
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

static bool same_entry(const struct raft_entry *a, const struct raft_entry *b)
{
    return a->zxid == b->zxid && a->type == b->type && a->len == b->len &&
           (a->len == 0 || memcmp(a->data, b->data, a->len) == 0);
}

/* --async-log: the entry at zxid as n's log will hold it once its log
 * thread is through: the newest queued batch that appends zxid has it,
 * unless a batch after that one truncates below it. NULL if no batch has
 * it; *cut: a queued batch truncates below zxid without appending it
 * again (so the disk's copy, if any, goes too). */
static const struct raft_entry *queued_entry(const struct sim_node *n, int64_t zxid, bool *cut)
{
    *cut = false;
    for (uint32_t i = n->n_batches; i > 0; i--) {
        const struct sim_batch *b = &n->batches[(n->batch_head + i - 1) % RAFT_LOG_BATCHES_MAX];
        for (size_t j = 0; j < b->n_entries; j++)
            if (b->entries[j].zxid == zxid)
                return *cut ? NULL : &b->entries[j];
        if (b->truncate && b->truncate_after < zxid)
            *cut = true;
    }
    return NULL;
}

bool check_apply(struct sim *s, const struct sim_node *n, const struct raft_entry *e,
                 uint64_t digest_after)
{
    char z1[24];
    long at = committed_successor(s, n, n->kv.applied_zxid, e, digest_after);
    if (at < 0)
        return false;
    /* With the async log a committed entry may be applied before this
     * node's log thread made it durable (raft.h): it must be on its way. */
    bool cut;
    const struct raft_entry *queued = queued_entry(n, e->zxid, &cut);
    if (queued != NULL && same_entry(queued, e))
        return true;
    const struct disk_entry *de = cut ? NULL : disk_find(&n->disk, e->zxid);
    if (queued != NULL || de == NULL) {
        sim_fail(s, n->id, "n%u applies %s, which %s", n->id, trace_zxid(e->zxid, z1),
                 queued != NULL ? "differs from the entry its log thread is to write there"
                 : n->n_batches > 0 ? "is neither in its durable log nor queued for it"
                                    : "is not in its durable log");
        return false;
    }
    if (de->chain != s->check.committed[at].chain) {
        sim_fail(s, n->id, "n%u's log through %s differs from the committed sequence", n->id,
                 trace_zxid(e->zxid, z1));
        return false;
    }
    return true;
}

const struct raft_config *check_committed_config(const struct check *c, int64_t *zxid)
{
    if (c->n_configs == 0) {
        *zxid = 0;
        return &c->initial;
    }
    *zxid = c->configs[c->n_configs - 1].zxid;
    return &c->configs[c->n_configs - 1].conf;
}

/* The committed membership at zxid (its CONFIG entries through zxid are
 * all in the sequence once zxid is), or NULL: the initial one. */
static const struct raft_config *committed_config_at(const struct check *c, int64_t zxid)
{
    size_t lo = 0, hi = c->n_configs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->configs[mid].zxid <= zxid)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo ? &c->configs[lo - 1].conf : NULL;
}

/* conf without the spares it lists as observers: a spare boots with
 * itself as an observer in cfg (sim_cfg_members), and until a CONFIG
 * entry sets the membership, that cfg is what its core goes by. */
static struct raft_config without_spare_observers(const struct sim *s,
                                                  const struct raft_config *conf)
{
    struct raft_config out = *conf;
    out.n_members = 0;
    for (uint32_t i = 0; i < conf->n_members; i++)
        if (conf->members[i].voter || conf->members[i].id <= s->n_members)
            out.members[out.n_members++] = conf->members[i];
    return out;
}

bool check_config_at(struct sim *s, const struct sim_node *n, int64_t zxid,
                     const struct raft_config *conf, const char *what)
{
    const struct raft_config *want = committed_config_at(&s->check, zxid);
    char z[24];
    bool ok;
    if (want != NULL) {
        ok = reconfig_equal(conf, want);
    } else {
        struct raft_config bare = without_spare_observers(s, conf);
        ok = reconfig_equal(&bare, &s->check.initial);
        want = &s->check.initial;
    }
    if (ok)
        return true;
    int64_t b, cw;
    char got[180], committed[180];
    reconfig_trace_words(conf, &b, &cw);
    trace_membership(b, cw, got, sizeof(got));
    reconfig_trace_words(want, &b, &cw);
    trace_membership(b, cw, committed, sizeof(committed));
    sim_fail(s, n->id, "n%u's %s at %s has membership %s; the committed one there is %s", n->id,
             what, trace_zxid(zxid, z), got, committed);
    return false;
}

bool check_snapshot(struct sim *s, const struct sim_node *n, int64_t zxid, uint64_t digest,
                    const struct raft_config *conf, bool keeps_log, uint64_t *chain)
{
    char z1[24], z2[24];
    if (zxid < n->kv.applied_zxid && !keeps_log) {
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
    if (!check_config_at(s, n, zxid, conf, "installed snapshot"))
        return false;
    *chain = cc->chain;
    return true;
}

bool check_truncate_applied(struct sim *s, const struct sim_node *n, int64_t after)
{
    char z1[24], z2[24];
    if (after >= n->kv.applied_zxid)
        return true;
    sim_fail(s, n->id, "n%u truncates after %s, below its applied %s", n->id,
             trace_zxid(after, z1), trace_zxid(n->kv.applied_zxid, z2));
    return false;
}

void check_truncate(struct sim *s, const struct sim_node *n, int64_t after, int64_t decided_by)
{
    char z1[24], z2[24];
    /* The log as the disk has it now: with the async log, entries that
     * batches of the same group commit wrote are cut too. */
    for (size_t i = disk_view_len(&n->disk); i > 0; i--) {
        const struct disk_entry *de = disk_view_at(&n->disk, i - 1);
        if (de->zxid <= after)
            break;
        const struct check_commit *cc = check_committed_at(&s->check, de->zxid);
        /* An entry committed once the truncation was decided counted none
         * of this node's acks that the truncation takes back; one committed
         * before must never go (Raft truncates none of those). */
        if (cc != NULL && cc->chain == de->chain && cc->step < decided_by) {
            sim_fail(s, n->id, "n%u truncates after %s, dropping committed entry %s "
                     "(committed by step %lld; the truncation was decided from step %lld)",
                     n->id, trace_zxid(after, z1), trace_zxid(cc->zxid, z2),
                     (long long)cc->step, (long long)decided_by);
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
    return match <= d->snap_zxid || (!disk_has_pending(d) && disk_find(d, match) != NULL);
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

/* The core's log after snap_zxid, through `through`, equals the disk's
 * (zxid, type, data), except for a leader's tail past what it has made
 * durable: raft_advance may commit a joint membership and append its final
 * one at once (the next ready hands it out). */
static void check_core_log(struct sim *s, const struct sim_node *n, const struct raft_status *st,
                           int64_t through)
{
    int64_t core_snap = st->snap_zxid;
    const struct disk_log *log = &n->disk.log;
    int64_t from = core_snap > n->disk.snap_zxid ? core_snap : n->disk.snap_zxid;
    size_t di = 0, len = raft_log_len(n->r);
    char z[24], z2[24];
    while (di < log->n && log->v[di].zxid <= from)
        di++;
    for (size_t i = 0; i < len; i++) {
        const struct raft_entry *e = raft_log_at(n->r, i);
        if (e == NULL || e->zxid <= from)
            continue;
        if (e->zxid > through)
            break;
        if (di == log->n && st->role == RAFT_LEADER && e->zxid > st->durable_zxid)
            break;
        const struct disk_entry *de = di < log->n ? &log->v[di++] : NULL;
        if (de == NULL || de->zxid != e->zxid || de->type != e->type || de->len != e->len ||
            (e->len && memcmp(de->data, e->data, e->len) != 0)) {
            sim_fail(s, n->id, "n%u's core holds %s, which differs from its disk (the core "
                               "says durable through %s)", n->id, trace_zxid(e->zxid, z),
                     trace_zxid(st->durable_zxid, z2));
            return;
        }
    }
    if (di != log->n && log->v[di].zxid <= through)
        sim_fail(s, n->id, "n%u's disk holds %s, which its core does not (the core says "
                           "durable through %s)", n->id, trace_zxid(log->v[di].zxid, z),
                 trace_zxid(st->durable_zxid, z2));
}

void check_core_durable(struct sim *s, const struct sim_node *n)
{
    struct raft_status st;
    raft_status(n->r, &st);
    check_core_log(s, n, &st, st.durable_zxid);
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
    /* With the async log, batches still on their way to the disk hold
     * the rest; what the core counts as durable must be there already. */
    check_core_log(s, n, &st, n->n_batches > 0 ? st.durable_zxid : INT64_MAX);
}

/* The newest CONFIG entry in n's core log into *out, its zxid into *zxid.
 * False: none (or one that does not decode: then the check failed). */
static bool newest_log_config(struct sim *s, const struct sim_node *n, struct raft_config *out,
                              int64_t *zxid)
{
    char z[24];
    for (size_t i = raft_log_len(n->r); i-- > 0;) {
        const struct raft_entry *e = raft_log_at(n->r, i);
        if (e == NULL || e->type != RAFT_ENTRY_CONFIG)
            continue;
        if (raft_config_decode(e->data, e->len, out) != RAFT_OK) {
            sim_fail(s, n->id, "n%u's core holds a CONFIG entry at %s that does not decode",
                     n->id, trace_zxid(e->zxid, z));
            return false;
        }
        *zxid = e->zxid;
        return true;
    }
    return false;
}

void check_membership(struct sim *s, const struct sim_node *n)
{
    struct raft_status st;
    raft_status(n->r, &st);
    struct raft_config want;
    int64_t want_zxid = 0;
    bool found = newest_log_config(s, n, &want, &want_zxid);
    if (s->failed)
        return;
    if (!found && n->disk.snap_has_config) {
        want = n->disk.snap_config;
    } else if (!found) {
        memset(&want, 0, sizeof(want));
        want.n_members = sim_cfg_members(s, n->id, want.members);
    }
    /* The entry that set a membership may be compacted away: the core may
     * keep its zxid (below its log) or say 0, as after a restart. */
    const struct raft_entry *first = raft_log_at(n->r, 0);
    int64_t log_start = first != NULL ? first->zxid : st.snap_zxid + 1;
    bool zxid_ok = st.config_zxid == want_zxid || (!found && st.config_zxid < log_start);
    if (zxid_ok && reconfig_equal(&st.config, &want))
        return;
    char from[64], z1[24], z2[24];
    if (found)
        snprintf(from, sizeof(from), "its log's CONFIG entry at %s", trace_zxid(want_zxid, z2));
    else
        snprintf(from, sizeof(from), "%s (no CONFIG entry in its log)",
                 n->disk.snap_has_config ? "its snapshot's" : "its cfg's");
    sim_fail(s, n->id, "n%u uses the membership of %s%s, but it should be %s", n->id,
             st.config_zxid ? "the CONFIG entry at " : "zxid ", trace_zxid(st.config_zxid, z1),
             from);
}

bool check_converged(struct sim *s, int64_t min_zxid, uint32_t *odd)
{
    const struct check *c = &s->check;
    *odd = 0;
    if (c->n_committed == 0 || c->committed[c->n_committed - 1].zxid < min_zxid)
        return false;
    int64_t conf_zxid;
    const struct raft_config *conf = check_committed_config(c, &conf_zxid);
    if (conf->n_old > 0)
        return false; /* the leader has the final half still to commit */
    const struct check_commit *last = &c->committed[c->n_committed - 1];
    uint32_t differs = 0;
    for (uint32_t i = 0; i < s->n_nodes; i++) {
        const struct sim_node *n = &s->nodes[i];
        if (!reconfig_has(conf, n->id))
            continue;
        if (!n->up || n->kv.applied_zxid != last->zxid)
            return false;
        struct raft_status st;
        raft_status(n->r, &st);
        if (st.commit_zxid != last->zxid)
            return false;
        if (kv_digest(&n->kv) != last->digest && differs == 0)
            differs = n->id;
    }
    *odd = differs;
    return differs == 0;
}
