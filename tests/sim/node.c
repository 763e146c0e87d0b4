/* node — see node.h. */
#include "tests/sim/node.h"

#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "tests/sim/check.h"
#include "tests/sim/client.h"
#include "tests/sim/net.h"
#include "tests/sim/reconfig.h"

/* The stages of one ready, in raft.h's order; a crash may strike before
 * any of them. */
enum ready_stage {
    STAGE_HARD = 1,
    STAGE_SNAPSHOT,
    STAGE_TRUNCATE,
    STAGE_SEND_EARLY, /* a leader's APPEND and SNAP: before its own fsync */
    STAGE_APPEND,
    STAGE_SYNC,
    STAGE_SEND,
    STAGE_APPLY,
    STAGE_READS,
    STAGE_ADVANCE,
    STAGE_QUEUE, /* --async-log: the truncation and entries go to the log thread */
    STAGE_LOG,   /* --async-log: not a ready's; the log thread's own writes */
};

/* A synchronous driver's ready, and one with the async log, whose steps 3
 * and 4 the log thread does after raft_advance (raft.h). Early messages
 * go before the batch is queued: a crash between leaves followers with
 * entries their leader never wrote. */
static const unsigned sync_stages[] = {
    STAGE_HARD, STAGE_SNAPSHOT, STAGE_TRUNCATE, STAGE_SEND_EARLY, STAGE_APPEND,
    STAGE_SYNC, STAGE_SEND,     STAGE_APPLY,    STAGE_READS,      STAGE_ADVANCE,
};
static const unsigned async_stages[] = {
    STAGE_HARD, STAGE_SNAPSHOT, STAGE_SEND_EARLY, STAGE_QUEUE,
    STAGE_SEND, STAGE_APPLY,    STAGE_READS,      STAGE_ADVANCE,
};
#define STAGES_LEN(a) ((unsigned)(sizeof(a) / sizeof((a)[0])))

static void trace_node(struct sim *s, const struct sim_node *n, uint16_t kind, int64_t a,
                       int64_t b, int64_t c)
{
    struct trace_event ev = {.step = s->now, .kind = kind, .node = (uint8_t)n->id, .a = a,
                             .b = b, .c = c};
    trace_add(&s->trace, &ev);
}

/* ---- the digest exchange (larchd's driver does the same) -------------
 * A leader puts its state machine's digest at its applied zxid on every
 * APPEND it sends (raft_msg.digest, digest_zxid: the core never looks at
 * them). A follower keeps its own digest after each of its last
 * SIM_DIGESTS applied zxids; an APPEND whose digest_zxid it has applied is
 * compared at once, and the lowest one it has not applied yet is kept and
 * compared when it gets there. A mismatch means this node's state machine
 * went wrong (a leader is authoritative): raft_request_snapshot, and the
 * leader's snapshot comes back as rd.snapshot with keeps_log. */

static void digests_reset(struct sim_node *n)
{
    n->mismatch_ignored = false;
    n->n_digests = 0;
    n->digest_head = 0;
    n->claim = (struct sim_digest){0, 0};
    n->claim_from = 0;
    n->resync_due = false;
}

static void digest_push(struct sim_node *n, int64_t zxid, uint64_t digest)
{
    n->digests[n->digest_head] = (struct sim_digest){zxid, digest};
    n->digest_head = (n->digest_head + 1) % SIM_DIGESTS;
    if (n->n_digests < SIM_DIGESTS)
        n->n_digests++;
}

/* n's digest after applying zxid, if it is still in the window. */
static const struct sim_digest *digest_at(const struct sim_node *n, int64_t zxid)
{
    for (uint32_t i = 0; i < n->n_digests; i++) {
        const struct sim_digest *d =
            &n->digests[(n->digest_head + SIM_DIGESTS - 1 - i) % SIM_DIGESTS];
        if (d->zxid == zxid)
            return d;
        if (d->zxid < zxid)
            return NULL; /* newest first: it is not there */
    }
    return NULL;
}

/* The state machine is known good again (or replaced): the digests of the
 * old one go; zxid/digest is where it is now. */
static void digests_restart(struct sim_node *n)
{
    digests_reset(n);
    digest_push(n, n->kv.applied_zxid, kv_digest(&n->kv));
}

static void request_resync(struct sim_node *n)
{
    /* RAFT_EINVAL: n leads now, and what it applied is the state machine */
    int rc = raft_request_snapshot(n->r);
    BASE_ASSERT(rc == RAFT_OK || rc == RAFT_EINVAL);
}

/* n's digest at zxid is mine, leader `from` had theirs there. in_ready:
 * between raft_ready and raft_advance (the request waits for advance). */
static void digest_compared(struct sim *s, struct sim_node *n, uint32_t from, int64_t zxid,
                            uint64_t mine, uint64_t theirs, bool in_ready)
{
    if (mine == theirs || n->resync_due)
        return;
    struct raft_status st;
    raft_status(n->r, &st);
    if (st.snap_wanted > 0 || st.role == RAFT_LEADER)
        return; /* already asked; or it leads (its state is authoritative) */
    bool ignore = (s->opts.sim_break & SIM_BREAK_NO_RESYNC) != 0;
    if (ignore && n->mismatch_ignored)
        return; /* traced once per state machine */
    n->mismatch_ignored = ignore;
    struct trace_event ev = {.step = s->now, .kind = TR_MISMATCH, .node = (uint8_t)n->id,
                             .peer = (uint8_t)from, .flags = ignore ? 4 : 0, .a = zxid,
                             .b = (int64_t)mine, .c = (int64_t)theirs};
    trace_add(&s->trace, &ev);
    if (ignore)
        return;
    if (in_ready)
        n->resync_due = true;
    else
        request_resync(n);
}

/* After raft_step took m: a leader's digest to compare with n's own. */
static void digest_receive(struct sim *s, struct sim_node *n, const struct raft_msg *m)
{
    if (m->type != RAFT_MSG_APPEND || m->digest_zxid <= 0 || n->seen_role == RAFT_LEADER)
        return;
    if (m->digest_zxid > n->kv.applied_zxid) {
        if (n->claim.zxid == 0 || m->digest_zxid < n->claim.zxid) {
            n->claim = (struct sim_digest){m->digest_zxid, m->digest};
            n->claim_from = m->from;
        }
        return;
    }
    /* A resync SNAP the core took replaces the state machine in the next
     * ready: until then snap_wanted stays set, and what the driver holds
     * is what that snapshot repairs (FINDINGS.txt, finding 5) */
    struct raft_status st;
    raft_status(n->r, &st);
    if (st.snap_wanted > 0)
        return;
    const struct sim_digest *d = digest_at(n, m->digest_zxid);
    if (d != NULL)
        digest_compared(s, n, m->from, d->zxid, d->digest, m->digest, false);
}

/* n applied zxid and has digest now: the window, and a kept leader digest
 * that n has now reached. */
static void digest_applied(struct sim *s, struct sim_node *n, int64_t zxid, uint64_t digest)
{
    digest_push(n, zxid, digest);
    if (n->r == NULL || n->claim.zxid == 0 || zxid < n->claim.zxid)
        return;
    struct sim_digest claim = n->claim;
    n->claim = (struct sim_digest){0, 0};
    if (claim.zxid == zxid)
        digest_compared(s, n, n->claim_from, zxid, digest, claim.digest, true);
}

/* ---- corruption (--corrupt): the checker's side ---------------------- */

static bool kv_same(const struct kv *a, const struct kv *b)
{
    return a->applied_zxid == b->applied_zxid &&
           memcmp(a->values, b->values, sizeof(a->values)) == 0;
}

static void trace_gone(struct sim *s, const struct sim_node *n, int why, int64_t since)
{
    s->corrupt_gone[why]++;
    struct trace_event ev = {.step = s->now, .kind = TR_CORRUPT_GONE, .node = (uint8_t)n->id,
                             .a = why, .b = since};
    trace_add(&s->trace, &ev);
}

/* A corrupted node that becomes leader before a digest showed it would
 * make every follower resync to its wrong state: the leader is
 * authoritative (as in ZooKeeper), and that is out of this fault's scope.
 * The run takes the corruption back, in memory and in the disk's
 * snapshot, as if it had not happened. */
static void corruption_check_leader(struct sim *s, struct sim_node *n)
{
    check_leader(s, n);
    if (n->seen_role != RAFT_LEADER || (!n->diverged && !n->snap_diverged))
        return;
    int64_t since = n->diverged ? n->diverged_step : n->snap_diverged_step;
    if (n->diverged)
        n->kv = n->truth;
    if (n->snap_diverged)
        memcpy(n->disk.snap, n->snap_truth, KV_SNAP_BYTES);
    n->diverged = n->snap_diverged = false;
    digests_restart(n);
    trace_gone(s, n, TR_GONE_LED, since);
}

void node_corrupt(struct sim *s, struct sim_node *n)
{
    BASE_ASSERT(n->up && n->seen_role != RAFT_LEADER);
    int64_t key = rng_below(&s->rng, 2) ? KV_LOAD_KEY : KV_STILL_KEY;
    uint64_t bit = (uint64_t)1 << rng_below(&s->rng, 64);
    if (!n->diverged) {
        n->truth = n->kv;
        n->diverged = true;
        n->diverged_step = s->now;
    }
    n->kv.values[key] = (int64_t)((uint64_t)n->kv.values[key] ^ bit);
    struct trace_event ev = {.step = s->now, .kind = TR_CORRUPT, .node = (uint8_t)n->id,
                             .a = key, .b = n->kv.applied_zxid};
    trace_add(&s->trace, &ev);
    if (kv_same(&n->kv, &n->truth)) { /* a second flip undid the first */
        n->diverged = false;
        trace_gone(s, n, TR_GONE_WRITE, n->diverged_step);
    }
}

/* Applies e to n's state machine after the checks pass. False: a check
 * failed or e does not decode (nothing applied). A corrupted node applies
 * e to its truth too, and the checks see the truth's digest: nothing is
 * relaxed for it but that its own state may differ. */
static bool apply_entry(struct sim *s, struct sim_node *n, const struct raft_entry *e,
                        struct kv_result *res)
{
    char z[24];
    if (!check_apply_order(s, n, e))
        return false;
    struct kv next = n->kv, truth = n->truth;
    if (!kv_apply(&next, e, res)) {
        sim_fail(s, n->id, "n%u applies %s: type %u, %zu bytes, not an op this run wrote", n->id,
                 trace_zxid(e->zxid, z), e->type, e->len);
        return false;
    }
    uint64_t digest = kv_digest(&next);
    uint64_t checked = digest;
    if (n->diverged) {
        struct kv_result tres;
        BASE_ASSERT(kv_apply(&truth, e, &tres));
        checked = kv_digest(&truth);
    }
    if (!check_apply(s, n, e, checked))
        return false;
    n->kv = next;
    trace_node(s, n, TR_APPLY, e->zxid, (int64_t)digest, 0);
    if (n->diverged) {
        n->truth = truth;
        if (kv_same(&n->kv, &n->truth)) {
            n->diverged = false;
            trace_gone(s, n, TR_GONE_WRITE, n->diverged_step);
        }
    }
    digest_applied(s, n, e->zxid, digest);
    return true;
}

/* The state machine from the snapshot plus the durable log through the
 * stored commit zxid; returns false if a check failed. */
static bool rebuild_state(struct sim *s, struct sim_node *n)
{
    kv_init(&n->kv);
    if (!kv_load(&n->kv, n->disk.snap, KV_SNAP_BYTES) || n->kv.applied_zxid != n->disk.snap_zxid) {
        sim_fail(s, n->id, "n%u's snapshot bytes do not match its snapshot zxid", n->id);
        return false;
    }
    /* A corruption in memory died with the node; one its own snapshot
     * took along comes back from the disk. */
    if (n->diverged && !n->snap_diverged)
        trace_gone(s, n, TR_GONE_CRASH, n->diverged_step);
    n->diverged = n->snap_diverged;
    if (n->diverged) {
        n->diverged_step = n->snap_diverged_step;
        kv_init(&n->truth);
        BASE_ASSERT(kv_load(&n->truth, n->snap_truth, KV_SNAP_BYTES));
    }
    digests_restart(n);
    const struct disk_log *log = &n->disk.log;
    for (size_t i = 0; i < log->n && log->v[i].zxid <= n->disk.hard.commit_zxid; i++) {
        const struct disk_entry *de = &log->v[i];
        struct raft_entry e = {de->zxid, de->type, de->data, de->len};
        struct kv_result res;
        if (!apply_entry(s, n, &e, &res))
            return false;
    }
    return true;
}

/* members: room for SIM_NODES_MAX; cfg points into it. */
static void fill_cfg(const struct sim *s, const struct sim_node *n, struct raft_cfg *cfg,
                     struct raft_member *members)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->self_id = n->id;
    cfg->members = members;
    cfg->n_members = sim_cfg_members(s, n->id, members);
    cfg->election_ticks = s->election_ticks;
    cfg->heartbeat_ticks = s->heartbeat_ticks;
    cfg->counter_limit = s->counter_limit;
    cfg->max_append_entries = s->max_append_entries;
    cfg->max_append_bytes = s->max_append_bytes;
    cfg->break_on_purpose = s->opts.break_bits;
    cfg->async_log = s->opts.async_log;
}

bool node_boot(struct sim *s, struct sim_node *n)
{
    BASE_ASSERT(!n->up && n->r == NULL && n->n_batches == 0);
    if (!rebuild_state(s, n))
        return false;
    struct raft_boot boot;
    struct raft_entry *entries;
    BASE_ASSERT(disk_boot(&n->disk, &boot, &entries));
    /* The core starts applied where the driver's re-apply stopped: the
     * stored commit may name entries a torn tail lost (raft.h: any value
     * not above the true commit point is safe, so lower is fine). */
    boot.hard_state.commit_zxid = n->kv.applied_zxid;
    struct raft_cfg cfg;
    struct raft_member members[SIM_NODES_MAX];
    fill_cfg(s, n, &cfg, members);
    cfg.seed = rng_next(&s->rng);
    n->r = raft_new(&cfg, &boot);
    free(entries);
    if (n->r == NULL) {
        sim_fail(s, n->id, "raft_new refused n%u's durable state", n->id);
        return false;
    }
    n->up = true;
    n->boots++;
    n->next_tick = s->now + 1;
    n->slow_until = 0;
    n->slow_since = 0;
    n->disk_fault = DISK_FAULT_NONE;
    n->crash_in_ready = false;
    n->seen_role = 0;
    struct trace_event ev = {.step = s->now, .kind = TR_RESTART, .node = (uint8_t)n->id,
                             .term = n->disk.hard.term, .a = n->disk.snap_zxid,
                             .b = n->kv.applied_zxid, .c = (int64_t)n->disk.log.n};
    trace_add(&s->trace, &ev);
    corruption_check_leader(s, n);
    check_membership(s, n);
    return !s->failed;
}

static bool batch_write(struct sim *s, struct sim_node *n, const struct sim_batch *b,
                        bool io_faults);
static void batches_drop(struct sim_node *n);

/* A crash stops the log thread wherever it was: it may have written any
 * of its queued batches, unsynced (the torn tail then keeps a prefix of
 * them). After an I/O error it wrote no more. */
static void log_thread_stops(struct sim *s, struct sim_node *n, int why)
{
    s->log_lost += n->n_batches;
    bool wrote = why == TR_CRASH_RANDOM || why == TR_CRASH_IN_READY;
    for (uint32_t i = 0; wrote && i < n->n_batches && !s->failed; i++)
        batch_write(s, n, &n->batches[(n->batch_head + i) % RAFT_LOG_BATCHES_MAX], false);
    batches_drop(n); /* their late messages with them; and what a ready drained */
}

void node_crash(struct sim *s, struct sim_node *n, int why, unsigned stage)
{
    BASE_ASSERT(n->up);
    log_thread_stops(s, n, why);
    long pending = (long)disk_pending_len(&n->disk);
    size_t pending_entries = n->disk.pend.n;
    long keep = -1;
    if (disk_has_pending(&n->disk))
        keep = (long)rng_range(&s->rng, -1, pending);
    size_t kept = disk_crash(&n->disk, keep);
    raft_free(n->r);
    n->r = NULL;
    n->up = false;
    n->restart_at = s->now + (s->faults_on ? rng_range(&s->rng, 5, 300) : 1);
    struct trace_event ev = {.step = s->now, .kind = TR_CRASH, .node = (uint8_t)n->id,
                             .mtype = (uint8_t)stage, .a = why, .b = (int64_t)kept,
                             .c = (int64_t)pending_entries};
    trace_add(&s->trace, &ev);
    clients_on_crash(s, n);
}

void node_tick(struct sim *s, struct sim_node *n)
{
    raft_tick(n->r);
    corruption_check_leader(s, n);
}

void node_receive(struct sim *s, struct sim_node *n, const struct raft_msg *m)
{
    int rc = raft_step(n->r, m);
    if (rc == RAFT_EINVAL)
        sim_fail(s, n->id, "n%u refuses %s from n%u (term %u) with RAFT_EINVAL, a message its "
                           "peer's core produced", n->id, raft_msg_type_name(m->type), m->from,
                 m->term);
    BASE_ASSERT(rc != RAFT_ENOMEM);
    corruption_check_leader(s, n);
    if (rc == RAFT_OK && !s->failed)
        digest_receive(s, n, m);
}

static void stage_hard(struct sim *s, struct sim_node *n, const struct raft_ready *rd)
{
    if (!rd->hard_state_changed)
        return;
    check_hard_state(s, n, &rd->hard_state);
    struct raft_hard_state hs = rd->hard_state;
    /* The driver may have stored a later commit lazily (stage_apply). */
    if (hs.commit_zxid < n->disk.hard.commit_zxid)
        hs.commit_zxid = n->disk.hard.commit_zxid;
    disk_save_hard(&n->disk, &hs);
    struct trace_event ev = {.step = s->now, .kind = TR_HARD, .node = (uint8_t)n->id,
                             .term = hs.term, .a = hs.vote, .b = hs.commit_zxid};
    trace_add(&s->trace, &ev);
}

/* rd.snapshot: the state machine becomes the snapshot. keeps_log false:
 * the whole log goes too (this node was behind the leader's compacted
 * log). keeps_log true: a resync (raft_request_snapshot) — the log after
 * the snapshot stays on disk, and the committed entries after it come
 * out again in rd.committed, to be applied on top. */
static void stage_snapshot(struct sim *s, struct sim_node *n, const struct raft_ready *rd)
{
    const struct raft_snapshot *snap = rd->snapshot;
    if (snap == NULL)
        return;
    char z[24], z2[24];
    struct kv next;
    kv_init(&next);
    if (!kv_load(&next, snap->data, snap->len) || next.applied_zxid != snap->zxid) {
        sim_fail(s, n->id, "n%u is handed a snapshot at %s whose bytes are not one", n->id,
                 trace_zxid(snap->zxid, z));
        return;
    }
    if (snap->keeps_log && snap->zxid < n->disk.snap_zxid) {
        /* the driver dropped its log through its own snapshot: the
         * entries between would be gone (FINDINGS.txt, finding 4) */
        sim_fail(s, n->id, "n%u is handed a resync snapshot at %s that keeps the log after it, "
                           "but its disk's log starts after its own snapshot at %s", n->id,
                 trace_zxid(snap->zxid, z), trace_zxid(n->disk.snap_zxid, z2));
        return;
    }
    uint64_t chain;
    if (!check_snapshot(s, n, snap->zxid, kv_digest(&next), &snap->config, snap->keeps_log,
                        &chain))
        return;
    int64_t was_applied = n->kv.applied_zxid;
    int64_t since = n->diverged ? n->diverged_step : -1;
    if (snap->keeps_log) {
        bool kept = disk_install_snapshot_keep(&n->disk, snap->zxid, chain, snap->data,
                                               snap->len, &snap->config);
        BASE_ASSERT(kept); /* not below its own snapshot: checked above */
    } else {
        disk_install_snapshot(&n->disk, snap->zxid, chain, snap->data, snap->len,
                              &snap->config);
    }
    n->kv = next;
    if (n->diverged && !snap->keeps_log)
        trace_gone(s, n, TR_GONE_SNAP, since);
    n->diverged = n->snap_diverged = false;
    digests_restart(n);
    trace_node(s, n, TR_SNAP_INSTALL, snap->zxid, 0, 0);
    if (snap->keeps_log)
        trace_node(s, n, TR_RESYNC, snap->zxid, since, was_applied);
    clients_on_snapshot(s, n, snap->zxid);
}

/* Whether rd installs a resync snapshot (keeps_log): the log after it
 * stays, and the ready's truncation and entries meet it (truncate_point,
 * write_entries). */
static bool ready_resyncs(const struct raft_ready *rd)
{
    return rd->snapshot != NULL && rd->snapshot->keeps_log;
}

/* Where the disk truncates for a truncation after `after`. below_snap:
 * the disk's snapshot may be past `after` (a resync snapshot in the same
 * ready may be at an entry that the ready appends after the truncation;
 * with the async log the driver may have snapshotted an applied state the
 * log thread has not written yet); the log holds nothing at or below the
 * snapshot, so the truncation starts there. */
static int64_t truncate_point(const struct sim_node *n, int64_t after, bool below_snap)
{
    return below_snap && after < n->disk.snap_zxid ? n->disk.snap_zxid : after;
}

/* Pending: the log drops what is after `after` (the core decided it from
 * step decided_by). */
static void write_truncate(struct sim *s, struct sim_node *n, int64_t after, int64_t decided_by)
{
    check_truncate(s, n, after, decided_by);
    disk_truncate(&n->disk, after);
    trace_node(s, n, TR_TRUNCATE, after, 0, 0);
}

/* Where a ready's truncation was decided from: a stalled disk may have
 * held the ready back (slow_since; with the async log only a full log
 * thread does). */
static int64_t decided_from(const struct sim *s, const struct sim_node *n)
{
    return n->slow_since ? n->slow_since : s->now;
}

static void stage_truncate(struct sim *s, struct sim_node *n, const struct raft_ready *rd)
{
    if (!rd->truncate)
        return;
    int64_t after = truncate_point(n, rd->truncate_after, ready_resyncs(rd));
    if (!check_truncate_applied(s, n, after))
        return;
    write_truncate(s, n, after, decided_from(s, n));
    clients_on_truncate(s, n, after);
}

/* Pending: appends count entries (count > 0). below_snap: those at or
 * below the disk's snapshot are in it already (see truncate_point).
 * False: a check failed. */
static bool write_entries(struct sim *s, struct sim_node *n, const struct raft_entry *entries,
                          size_t count, bool below_snap)
{
    char z1[24], z2[24];
    for (size_t i = 0; i < count; i++) {
        int64_t last;
        uint64_t chain;
        if (below_snap && entries[i].zxid <= n->disk.snap_zxid)
            continue;
        disk_last(&n->disk, &last, &chain);
        if (!disk_append(&n->disk, &entries[i])) {
            sim_fail(s, n->id, "n%u is told to append %s after %s: zxids must increase", n->id,
                     trace_zxid(entries[i].zxid, z1), trace_zxid(last, z2));
            return false;
        }
        check_log_entry(s, n, &n->disk.pend.v[n->disk.pend.n - 1]);
    }
    trace_node(s, n, TR_APPEND, entries[0].zxid, entries[count - 1].zxid, (int64_t)count);
    return !s->failed;
}

/* False: the node crashed (ENOSPC) or a check failed. */
static bool stage_append(struct sim *s, struct sim_node *n, const struct raft_ready *rd)
{
    if (rd->n_entries == 0)
        return true;
    if (n->disk_fault == DISK_FAULT_APPEND) {
        n->disk_fault = DISK_FAULT_NONE;
        node_crash(s, n, TR_CRASH_APPEND_ERR, STAGE_APPEND);
        return false;
    }
    return write_entries(s, n, rd->entries, rd->n_entries, ready_resyncs(rd));
}

/* fdatasync of the pending write, in a ready's stage (or the log
 * thread's). False: the node crashed (EIO on fdatasync). */
static bool sync_disk(struct sim *s, struct sim_node *n, unsigned stage)
{
    if (!disk_has_pending(&n->disk))
        return true;
    if (n->disk_fault == DISK_FAULT_SYNC) {
        n->disk_fault = DISK_FAULT_NONE;
        node_crash(s, n, TR_CRASH_SYNC_ERR, stage);
        return false;
    }
    disk_sync(&n->disk);
    int64_t last;
    uint64_t chain;
    disk_last(&n->disk, &last, &chain);
    trace_node(s, n, TR_SYNC, last, 0, 0);
    return true;
}

/* A SNAP out of the core: the core names the zxid and lends the
 * membership there; the bytes are the driver's, and its snapshot must be
 * at that zxid with that membership. False: a check failed. */
static bool attach_snapshot(struct sim *s, struct sim_node *n, struct raft_msg *m)
{
    char z1[24], z2[24];
    if (m->snap_zxid != n->disk.snap_zxid) {
        sim_fail(s, n->id, "n%u's core sends a snapshot at %s, its disk holds one at %s", n->id,
                 trace_zxid(m->snap_zxid, z1), trace_zxid(n->disk.snap_zxid, z2));
        return false;
    }
    if (m->snap_config == NULL || !n->disk.snap_has_config ||
        !reconfig_equal(m->snap_config, &n->disk.snap_config)) {
        sim_fail(s, n->id, "n%u's core sends a snapshot at %s with %s membership than the one "
                           "its disk keeps with it", n->id, trace_zxid(m->snap_zxid, z1),
                 m->snap_config == NULL ? "no" : "another");
        return false;
    }
    m->snap_data = n->disk.snap;
    m->snap_len = KV_SNAP_BYTES;
    struct trace_event ev = {.step = s->now, .kind = TR_SNAP_SEND, .node = (uint8_t)n->id,
                             .peer = (uint8_t)m->to, .a = m->snap_zxid};
    trace_add(&s->trace, &ev);
    return true;
}

/* Sends one of n's messages (a copy: SNAP gets the driver's snapshot,
 * APPEND the leader's digest). False: a check failed. */
static bool send_one(struct sim *s, struct sim_node *n, struct raft_msg m)
{
    if (m.type == RAFT_MSG_SNAP && !attach_snapshot(s, n, &m))
        return false;
    /* The leader's digest at its applied zxid (see digest_receive). */
    if (m.type == RAFT_MSG_APPEND && n->kv.applied_zxid > 0) {
        m.digest = kv_digest(&n->kv);
        m.digest_zxid = n->kv.applied_zxid;
    }
    check_send(s, n, &m);
    if (!s->failed)
        net_send(s, &m);
    return !s->failed;
}

/* Sends the messages that may leave before the entries are durable
 * (early), or the rest. */
static void stage_send(struct sim *s, struct sim_node *n, const struct raft_ready *rd, bool early)
{
    for (size_t i = 0; i < rd->n_msgs && !s->failed; i++)
        if (raft_msg_early(&rd->msgs[i]) == early && !send_one(s, n, rd->msgs[i]))
            return;
}

static void stage_apply(struct sim *s, struct sim_node *n, const struct raft_ready *rd)
{
    for (size_t i = 0; i < rd->n_committed; i++) {
        struct kv_result res;
        if (!apply_entry(s, n, &rd->committed[i], &res))
            return;
        clients_on_apply(s, n, rd->committed[i].zxid, &res);
    }
    /* raft.h lets the driver store the commit zxid lazily: do so now and
     * then, so that restarts re-apply from varied points. Not past the
     * durable log: with --async-log this node applies entries its disk may
     * not hold yet, and a restart replays the disk's log up to it. */
    struct raft_status st;
    raft_status(n->r, &st);
    int64_t safe = n->kv.applied_zxid < st.durable_zxid ? n->kv.applied_zxid : st.durable_zxid;
    if (rd->n_committed > 0 && rng_below(&s->rng, 4) == 0 && safe > n->disk.hard.commit_zxid)
        n->disk.hard.commit_zxid = safe;
}

/* ---- the async log (--async-log) ---------------------------------------
 * With cfg.async_log a driver hands each ready's truncation and entries to
 * a log thread and goes on to raft_advance; the thread writes them and
 * syncs, and only then do the ready's late messages leave and the core
 * hear of it (raft_log_synced). Here the thread is sim_node.batches, a
 * FIFO that node_log_step works off now and then, several batches to one
 * fdatasync at times (group commit), never while the disk stalls. */

static struct sim_batch *batch_at(struct sim_node *n, uint32_t i)
{
    BASE_ASSERT(i < n->n_batches);
    return &n->batches[(n->batch_head + i) % RAFT_LOG_BATCHES_MAX];
}

static void batch_free(struct sim_batch *b)
{
    free(b->entries);
    free(b->late);
    memset(b, 0, sizeof(*b));
}

/* The oldest batch is done with. */
static void batch_pop(struct sim_node *n)
{
    batch_free(batch_at(n, 0));
    n->batch_head = (n->batch_head + 1) % RAFT_LOG_BATCHES_MAX;
    n->n_batches--;
}

static void batches_drop(struct sim_node *n)
{
    for (uint32_t i = 0; i < RAFT_LOG_BATCHES_MAX && n->n_batches > 0; i++)
        batch_pop(n);
    n->batch_head = 0;
    n->synced_in_ready = 0;
}

/* Copies of count entries and their data, in one block (NULL for none). */
static struct raft_entry *entries_copy(const struct raft_entry *entries, size_t count)
{
    if (count == 0)
        return NULL;
    size_t size = count * sizeof(struct raft_entry);
    for (size_t i = 0; i < count; i++)
        size += entries[i].len;
    struct raft_entry *copy = malloc(size);
    BASE_ASSERT(copy != NULL);
    uint8_t *data = (uint8_t *)(copy + count);
    for (size_t i = 0; i < count; i++) {
        copy[i] = entries[i];
        copy[i].data = entries[i].len ? data : NULL;
        if (entries[i].len)
            memcpy(data, entries[i].data, entries[i].len);
        data += entries[i].len;
    }
    return copy;
}

/* A late message waits with batch b (those are votes, acks and reads: no
 * APPEND or SNAP, so nothing the core lends goes with them). */
static void batch_add_late(struct sim_batch *b, const struct raft_msg *m)
{
    BASE_ASSERT(m->n_entries == 0 && m->snap_config == NULL && m->snap_len == 0);
    if (b->n_late == b->cap_late) {
        size_t cap = b->cap_late ? 2 * b->cap_late : 4;
        struct raft_msg *v = realloc(b->late, cap * sizeof(*v));
        BASE_ASSERT(v != NULL);
        b->late = v;
        b->cap_late = cap;
    }
    b->late[b->n_late] = *m;
    b->late[b->n_late].entries = NULL;
    b->n_late++;
}

/* Carries batch b out on the disk, unsynced: its truncation, then its
 * entries; none at or below the disk's snapshot (the driver may have
 * snapshotted an applied state that was not durable yet). io_faults: an
 * armed ENOSPC strikes (not while a crash writes out what the thread had
 * queued). False: the node crashed or a check failed. */
static bool batch_write(struct sim *s, struct sim_node *n, const struct sim_batch *b,
                        bool io_faults)
{
    if (b->truncate)
        write_truncate(s, n, truncate_point(n, b->truncate_after, true), b->decided_by);
    if (b->n_entries == 0 || s->failed)
        return !s->failed;
    if (io_faults && n->disk_fault == DISK_FAULT_APPEND) {
        n->disk_fault = DISK_FAULT_NONE;
        node_crash(s, n, TR_CRASH_APPEND_ERR, STAGE_LOG);
        return false;
    }
    return write_entries(s, n, b->entries, b->n_entries, true);
}

/* The log thread makes the oldest k batches durable (their writes in
 * order, one fdatasync), then their late messages leave, in order. The
 * caller tells the core. False: the node crashed (ENOSPC, EIO) or a
 * check failed. */
static bool log_complete(struct sim *s, struct sim_node *n, uint32_t k)
{
    BASE_ASSERT(k >= 1 && k <= n->n_batches);
    for (uint32_t i = 0; i < k; i++)
        if (!batch_write(s, n, batch_at(n, i), true))
            return false;
    if (!sync_disk(s, n, STAGE_LOG))
        return false;
    size_t late = 0;
    for (uint32_t i = 0; i < k; i++)
        late += batch_at(n, i)->n_late;
    struct trace_event ev = {.step = s->now, .kind = TR_LOG_SYNCED, .node = (uint8_t)n->id,
                             .a = k, .b = n->n_batches - k, .c = (int64_t)late};
    trace_add(&s->trace, &ev);
    if (k > 1)
        s->log_grouped++;
    for (uint32_t i = 0; i < k && !s->failed; i++) {
        const struct sim_batch *b = batch_at(n, 0);
        for (size_t j = 0; j < b->n_late && !s->failed; j++)
            send_one(s, n, b->late[j]);
        batch_pop(n);
    }
    return !s->failed;
}

/* Between readies: k batches become durable, and the core hears of it. */
static void log_synced(struct sim *s, struct sim_node *n, uint32_t k)
{
    if (!log_complete(s, n, k))
        return;
    raft_log_synced(n->r, k);
    /* The core may have stepped messages since its last ready (a SNAP
     * among them, whose membership the disk gets only at the next ready,
     * which is where check_membership looks); what it counts as durable
     * must be on the disk all the same. */
    check_core_durable(s, n);
    corruption_check_leader(s, n); /* a commit may end a leadership */
}

void node_log_step(struct sim *s, struct sim_node *n)
{
    if (!s->opts.async_log || s->failed || !n->up || n->n_batches == 0 ||
        s->now < n->slow_until || !rng_chance(&s->rng, s->prof.log_sync))
        return;
    uint32_t k = 1;
    if (n->n_batches > 1 && rng_chance(&s->rng, s->prof.log_group))
        k = (uint32_t)rng_range(&s->rng, 2, n->n_batches);
    log_synced(s, n, k);
}

/* raft_ready may add a batch, and the core takes at most
 * RAFT_LOG_BATCHES_MAX unsynced: at the limit the driver waits for its
 * log thread (while the disk stalls, the ready waits with it). False: no
 * ready now. */
static bool log_room(struct sim *s, struct sim_node *n)
{
    if (raft_log_unsynced(n->r) != n->n_batches) {
        sim_fail(s, n->id, "n%u's core counts %zu log batches unsynced, its driver %u", n->id,
                 raft_log_unsynced(n->r), n->n_batches);
        return false;
    }
    if (n->n_batches < RAFT_LOG_BATCHES_MAX)
        return true;
    if (s->now < n->slow_until) {
        if (n->slow_since == 0)
            n->slow_since = s->now; /* the core decides what the ready will carry */
        return false;
    }
    s->log_full++;
    log_synced(s, n, 1);
    return !s->failed && n->up;
}

/* raft.h step 2 with the async log: a snapshot goes in once the batches
 * before it are durable (the core hears of them after raft_advance).
 * False: the node crashed or a check failed. */
static bool stage_drain(struct sim *s, struct sim_node *n, const struct raft_ready *rd)
{
    if (rd->snapshot == NULL || n->n_batches == 0)
        return true;
    uint32_t k = n->n_batches;
    if (!log_complete(s, n, k))
        return false;
    n->synced_in_ready += k;
    return true;
}

/* The ready's truncation and entries become one batch for the log
 * thread (copied: the core lends them until raft_advance). False: a check
 * failed. */
static bool stage_queue(struct sim *s, struct sim_node *n, const struct raft_ready *rd)
{
    if (!rd->truncate && rd->n_entries == 0)
        return true;
    /* Judged now, against what the state machine has applied: by the time
     * the log thread truncates, it may have applied committed entries that
     * the batch appends after the truncation (raft.h). */
    int64_t after = truncate_point(n, rd->truncate_after, true);
    if (rd->truncate && !check_truncate_applied(s, n, after))
        return false;
    BASE_ASSERT(n->n_batches < RAFT_LOG_BATCHES_MAX); /* log_room */
    n->n_batches++;
    struct sim_batch *b = batch_at(n, n->n_batches - 1);
    *b = (struct sim_batch){.truncate = rd->truncate, .truncate_after = rd->truncate_after,
                            .decided_by = decided_from(s, n),
                            .entries = entries_copy(rd->entries, rd->n_entries),
                            .n_entries = rd->n_entries};
    if (n->n_batches > s->log_depth_max)
        s->log_depth_max = n->n_batches;
    struct trace_event ev = {.step = s->now, .kind = TR_LOG_QUEUE, .node = (uint8_t)n->id,
                             .flags = rd->truncate ? 1 : 0, .term = (uint32_t)rd->n_entries,
                             .a = rd->truncate_after};
    if (rd->n_entries > 0) {
        ev.b = rd->entries[0].zxid;
        ev.c = rd->entries[rd->n_entries - 1].zxid;
    }
    trace_add(&s->trace, &ev);
    /* The core's log lost what is after it now, whenever the disk does. */
    if (rd->truncate)
        clients_on_truncate(s, n, after);
    return true;
}

/* Late messages (raft_msg_early false) leave once the disk holds what
 * they depend on: at once if no batch is queued, else with the newest
 * batch, when it and every one before it are durable. */
static void stage_send_late(struct sim *s, struct sim_node *n, const struct raft_ready *rd)
{
    bool early_ack = (s->opts.sim_break & SIM_BREAK_ASYNC_EARLY_ACK) != 0;
    if (n->n_batches == 0 || early_ack) {
        stage_send(s, n, rd, false);
        return;
    }
    struct sim_batch *newest = batch_at(n, n->n_batches - 1);
    for (size_t i = 0; i < rd->n_msgs; i++)
        if (!raft_msg_early(&rd->msgs[i]))
            batch_add_late(newest, &rd->msgs[i]);
}

static void stage_advance(struct sim *s, struct sim_node *n, const struct raft_ready *rd)
{
    raft_advance(n->r, rd);
    n->slow_since = 0; /* what waited for the disk is through */
    if (n->synced_in_ready > 0) {
        raft_log_synced(n->r, n->synced_in_ready);
        n->synced_in_ready = 0;
    }
    check_core_matches_disk(s, n);
    corruption_check_leader(s, n);
    if (n->resync_due) {
        n->resync_due = false;
        request_resync(n);
    }
    if (!s->failed)
        check_membership(s, n);
}

/* Runs one stage; false if the node crashed or a check failed. */
static bool run_stage(struct sim *s, struct sim_node *n, struct raft_ready *rd, unsigned stage)
{
    switch (stage) {
    case STAGE_HARD:
        stage_hard(s, n, rd);
        break;
    case STAGE_SNAPSHOT:
        if (!stage_drain(s, n, rd))
            return false;
        stage_snapshot(s, n, rd);
        break;
    case STAGE_TRUNCATE:
        stage_truncate(s, n, rd);
        break;
    case STAGE_APPEND:
        return stage_append(s, n, rd) && !s->failed;
    case STAGE_SYNC:
        return sync_disk(s, n, STAGE_SYNC) && !s->failed;
    case STAGE_SEND_EARLY:
        stage_send(s, n, rd, true);
        break;
    case STAGE_QUEUE:
        return stage_queue(s, n, rd) && !s->failed;
    case STAGE_SEND:
        stage_send_late(s, n, rd);
        break;
    case STAGE_APPLY:
        stage_apply(s, n, rd);
        break;
    case STAGE_READS:
        for (size_t i = 0; i < rd->n_reads; i++)
            clients_on_read_index(s, n, &rd->reads[i]);
        break;
    case STAGE_ADVANCE:
        stage_advance(s, n, rd);
        break;
    }
    return !s->failed;
}

void node_process_ready(struct sim *s, struct sim_node *n)
{
    if (s->failed || !n->up || !raft_has_ready(n->r))
        return;
    /* A stalled disk holds a synchronous driver's ready back; with the
     * async log only a log thread that is full does. */
    if (s->opts.async_log ? !log_room(s, n) : s->now < n->slow_until)
        return;
    struct raft_ready rd;
    raft_ready(n->r, &rd);
    const unsigned *stages = s->opts.async_log ? async_stages : sync_stages;
    unsigned n_stages = s->opts.async_log ? STAGES_LEN(async_stages) : STAGES_LEN(sync_stages);
    unsigned crash_before = 0; /* a position in stages, from 1 */
    if (n->crash_in_ready) {
        n->crash_in_ready = false;
        crash_before = (unsigned)rng_range(&s->rng, 1, n_stages);
    }
    for (unsigned i = 0; i < n_stages; i++) {
        if (i + 1 == crash_before) {
            node_crash(s, n, TR_CRASH_IN_READY, stages[i]);
            return;
        }
        if (!run_stage(s, n, &rd, stages[i]))
            return;
    }
}

/* Whether n's core, leading, has a follower waiting for a snapshot at or
 * below n's applied zxid that n does not hold yet (raft_request_snapshot
 * on that follower). */
static bool peer_wants_snapshot(const struct sim_node *n, const struct raft_status *st)
{
    if (st->role != RAFT_LEADER)
        return false;
    for (uint32_t i = 0; i < st->n_peers; i++)
        if (st->peers[i].snap_wanted > 0 && st->peers[i].snap_wanted <= n->kv.applied_zxid)
            return true;
    return false;
}

/* The snapshot of n's state machine (bytes, at its applied zxid, with
 * membership conf) goes to disk. With the async log the applied zxid may
 * not be durable in the log yet (raft.h lets a node apply what a quorum
 * holds before its own log thread has written it): the log chain there is
 * then the committed sequence's. False: a check failed. */
static bool snapshot_to_disk(struct sim *s, struct sim_node *n, const uint8_t *bytes,
                             const struct raft_config *conf)
{
    int64_t zxid = n->kv.applied_zxid;
    if (disk_compact(&n->disk, zxid, bytes, KV_SNAP_BYTES, conf))
        return true;
    const struct check_commit *cc = check_committed_at(&s->check, zxid);
    if (!s->opts.async_log || cc == NULL) {
        char z[24];
        sim_fail(s, n->id, "n%u applied %s, which is not in its durable log", n->id,
                 trace_zxid(zxid, z));
        return false;
    }
    disk_compact_ahead(&n->disk, zxid, cc->chain, bytes, KV_SNAP_BYTES, conf);
    return true;
}

void node_maybe_compact(struct sim *s, struct sim_node *n)
{
    if (s->failed || !n->up || n->kv.applied_zxid <= n->disk.snap_zxid)
        return;
    struct raft_status st;
    raft_status(n->r, &st);
    /* Waiting for the leader's snapshot, and until the ready that hands it
     * out (snap_wanted covers both): its own state machine is the diverged
     * one, not to be kept (FINDINGS.txt, finding 5). */
    if (st.snap_wanted > 0)
        return;
    /* A follower waits for a snapshot: take one now. (No draw otherwise,
     * so runs without a resync keep their schedules.) */
    bool wanted = peer_wants_snapshot(n, &st);
    if (!wanted && !rng_chance(&s->rng, s->prof.compact))
        return;
    char z[24];
    uint8_t bytes[KV_SNAP_BYTES];
    kv_save(&n->kv, bytes);
    size_t keep = (size_t)rng_range(&s->rng, 0, 6);
    /* The membership goes with the snapshot: a restart from it, or a
     * follower it is sent to, must know who the members are there. */
    struct raft_config conf;
    if (raft_config_at(n->r, n->kv.applied_zxid, &conf) != RAFT_OK) {
        /* Fine only if the core took a SNAP past applied since its last
         * ready: it forgot what lies below, and hands the driver the newer
         * snapshot in its next ready, which makes this one moot. */
        if (st.snap_zxid <= n->kv.applied_zxid)
            sim_fail(s, n->id, "n%u's core has no membership at its applied %s", n->id,
                     trace_zxid(n->kv.applied_zxid, z));
        return;
    }
    if (!check_config_at(s, n, n->kv.applied_zxid, &conf, "snapshot"))
        return;
    if (!snapshot_to_disk(s, n, bytes, &conf))
        return;
    /* The checker remembers what a snapshot of a corrupted state machine
     * should have held. */
    n->snap_diverged = n->diverged;
    if (n->diverged) {
        n->snap_diverged_step = n->diverged_step;
        kv_save(&n->truth, n->snap_truth);
    }
    raft_compact(n->r, n->kv.applied_zxid, keep);
    trace_node(s, n, TR_COMPACT, n->kv.applied_zxid, (int64_t)keep, wanted);
}

void node_free(struct sim_node *n)
{
    batches_drop(n);
    if (n->r != NULL)
        raft_free(n->r);
    n->r = NULL;
    n->up = false;
    disk_free(&n->disk);
}
