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
};

static void trace_node(struct sim *s, const struct sim_node *n, uint16_t kind, int64_t a,
                       int64_t b, int64_t c)
{
    struct trace_event ev = {.step = s->now, .kind = kind, .node = (uint8_t)n->id, .a = a,
                             .b = b, .c = c};
    trace_add(&s->trace, &ev);
}

/* Applies e to n's state machine after the checks pass. False: a check
 * failed or e does not decode (nothing applied). */
static bool apply_entry(struct sim *s, struct sim_node *n, const struct raft_entry *e,
                        struct kv_result *res)
{
    char z[24];
    if (!check_apply_order(s, n, e))
        return false;
    struct kv next = n->kv;
    if (!kv_apply(&next, e, res)) {
        sim_fail(s, n->id, "n%u applies %s: type %u, %zu bytes, not an op this run wrote", n->id,
                 trace_zxid(e->zxid, z), e->type, e->len);
        return false;
    }
    uint64_t digest = kv_digest(&next);
    if (!check_apply(s, n, e, digest))
        return false;
    n->kv = next;
    trace_node(s, n, TR_APPLY, e->zxid, (int64_t)digest, 0);
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
}

bool node_boot(struct sim *s, struct sim_node *n)
{
    BASE_ASSERT(!n->up && n->r == NULL);
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
    n->disk_fault = DISK_FAULT_NONE;
    n->crash_in_ready = false;
    n->seen_role = 0;
    struct trace_event ev = {.step = s->now, .kind = TR_RESTART, .node = (uint8_t)n->id,
                             .term = n->disk.hard.term, .a = n->disk.snap_zxid,
                             .b = n->kv.applied_zxid, .c = (int64_t)n->disk.log.n};
    trace_add(&s->trace, &ev);
    check_leader(s, n);
    check_membership(s, n);
    return !s->failed;
}

void node_crash(struct sim *s, struct sim_node *n, int why, unsigned stage)
{
    BASE_ASSERT(n->up);
    long pending = (long)n->disk.pend.n;
    long keep = -1;
    if (pending > 0 || n->disk.pend_truncate)
        keep = (long)rng_range(&s->rng, -1, pending);
    disk_crash(&n->disk, keep);
    raft_free(n->r);
    n->r = NULL;
    n->up = false;
    n->restart_at = s->now + (s->faults_on ? rng_range(&s->rng, 5, 300) : 1);
    struct trace_event ev = {.step = s->now, .kind = TR_CRASH, .node = (uint8_t)n->id,
                             .mtype = (uint8_t)stage, .a = why, .b = keep < 0 ? 0 : keep,
                             .c = pending};
    trace_add(&s->trace, &ev);
    clients_on_crash(s, n);
}

void node_tick(struct sim *s, struct sim_node *n)
{
    raft_tick(n->r);
    check_leader(s, n);
}

void node_receive(struct sim *s, struct sim_node *n, const struct raft_msg *m)
{
    int rc = raft_step(n->r, m);
    if (rc == RAFT_EINVAL)
        sim_fail(s, n->id, "n%u refuses %s from n%u (term %u) with RAFT_EINVAL, a message its "
                           "peer's core produced", n->id, raft_msg_type_name(m->type), m->from,
                 m->term);
    BASE_ASSERT(rc != RAFT_ENOMEM);
    check_leader(s, n);
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

static void stage_snapshot(struct sim *s, struct sim_node *n, const struct raft_ready *rd)
{
    const struct raft_snapshot *snap = rd->snapshot;
    if (snap == NULL)
        return;
    char z[24];
    struct kv next;
    kv_init(&next);
    if (!kv_load(&next, snap->data, snap->len) || next.applied_zxid != snap->zxid) {
        sim_fail(s, n->id, "n%u is handed a snapshot at %s whose bytes are not one", n->id,
                 trace_zxid(snap->zxid, z));
        return;
    }
    uint64_t chain;
    if (!check_snapshot(s, n, snap->zxid, kv_digest(&next), &snap->config, &chain))
        return;
    disk_install_snapshot(&n->disk, snap->zxid, chain, snap->data, snap->len, &snap->config);
    n->kv = next;
    trace_node(s, n, TR_SNAP_INSTALL, snap->zxid, 0, 0);
    clients_on_snapshot(s, n, snap->zxid);
}

static void stage_truncate(struct sim *s, struct sim_node *n, const struct raft_ready *rd)
{
    if (!rd->truncate)
        return;
    check_truncate(s, n, rd->truncate_after);
    disk_truncate(&n->disk, rd->truncate_after);
    trace_node(s, n, TR_TRUNCATE, rd->truncate_after, 0, 0);
    clients_on_truncate(s, n, rd->truncate_after);
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
    char z1[24], z2[24];
    for (size_t i = 0; i < rd->n_entries; i++) {
        int64_t last;
        uint64_t chain;
        disk_last(&n->disk, &last, &chain);
        if (!disk_append(&n->disk, &rd->entries[i])) {
            sim_fail(s, n->id, "n%u is told to append %s after %s: zxids must increase", n->id,
                     trace_zxid(rd->entries[i].zxid, z1), trace_zxid(last, z2));
            return false;
        }
        check_log_entry(s, n, &n->disk.pend.v[n->disk.pend.n - 1]);
    }
    trace_node(s, n, TR_APPEND, rd->entries[0].zxid, rd->entries[rd->n_entries - 1].zxid,
               (int64_t)rd->n_entries);
    return !s->failed;
}

/* False: the node crashed (EIO on fdatasync). */
static bool stage_sync(struct sim *s, struct sim_node *n)
{
    if (n->disk.pend.n == 0 && !n->disk.pend_truncate)
        return true;
    if (n->disk_fault == DISK_FAULT_SYNC) {
        n->disk_fault = DISK_FAULT_NONE;
        node_crash(s, n, TR_CRASH_SYNC_ERR, STAGE_SYNC);
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

/* Sends the messages that may leave before the entries are durable
 * (early), or the rest. */
static void stage_send(struct sim *s, struct sim_node *n, const struct raft_ready *rd, bool early)
{
    for (size_t i = 0; i < rd->n_msgs && !s->failed; i++) {
        struct raft_msg m = rd->msgs[i];
        if (raft_msg_early(&m) != early)
            continue;
        if (m.type == RAFT_MSG_SNAP && !attach_snapshot(s, n, &m))
            return;
        check_send(s, n, &m);
        if (!s->failed)
            net_send(s, &m);
    }
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
     * then, so that restarts re-apply from varied points. */
    if (rd->n_committed > 0 && rng_below(&s->rng, 4) == 0 &&
        n->kv.applied_zxid > n->disk.hard.commit_zxid)
        n->disk.hard.commit_zxid = n->kv.applied_zxid;
}

/* Runs one stage; false if the node crashed or a check failed. */
static bool run_stage(struct sim *s, struct sim_node *n, struct raft_ready *rd, unsigned stage)
{
    switch (stage) {
    case STAGE_HARD:
        stage_hard(s, n, rd);
        break;
    case STAGE_SNAPSHOT:
        stage_snapshot(s, n, rd);
        break;
    case STAGE_TRUNCATE:
        stage_truncate(s, n, rd);
        break;
    case STAGE_APPEND:
        return stage_append(s, n, rd) && !s->failed;
    case STAGE_SYNC:
        return stage_sync(s, n) && !s->failed;
    case STAGE_SEND_EARLY:
        stage_send(s, n, rd, true);
        break;
    case STAGE_SEND:
        stage_send(s, n, rd, false);
        break;
    case STAGE_APPLY:
        stage_apply(s, n, rd);
        break;
    case STAGE_READS:
        for (size_t i = 0; i < rd->n_reads; i++)
            clients_on_read_index(s, n, &rd->reads[i]);
        break;
    case STAGE_ADVANCE:
        raft_advance(n->r, rd);
        check_core_matches_disk(s, n);
        check_leader(s, n);
        if (!s->failed)
            check_membership(s, n);
        break;
    }
    return !s->failed;
}

void node_process_ready(struct sim *s, struct sim_node *n)
{
    if (s->failed || !n->up || s->now < n->slow_until || !raft_has_ready(n->r))
        return;
    struct raft_ready rd;
    raft_ready(n->r, &rd);
    unsigned crash_before = 0;
    if (n->crash_in_ready) {
        n->crash_in_ready = false;
        crash_before = (unsigned)rng_range(&s->rng, STAGE_HARD, STAGE_ADVANCE);
    }
    for (unsigned stage = STAGE_HARD; stage <= STAGE_ADVANCE; stage++) {
        if (stage == crash_before) {
            node_crash(s, n, TR_CRASH_IN_READY, stage);
            return;
        }
        if (!run_stage(s, n, &rd, stage))
            return;
    }
}

void node_maybe_compact(struct sim *s, struct sim_node *n)
{
    if (s->failed || !n->up || n->kv.applied_zxid <= n->disk.snap_zxid ||
        !rng_chance(&s->rng, s->prof.compact))
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
        struct raft_status st;
        raft_status(n->r, &st);
        if (st.snap_zxid <= n->kv.applied_zxid)
            sim_fail(s, n->id, "n%u's core has no membership at its applied %s", n->id,
                     trace_zxid(n->kv.applied_zxid, z));
        return;
    }
    if (!check_config_at(s, n, n->kv.applied_zxid, &conf, "snapshot"))
        return;
    if (!disk_compact(&n->disk, n->kv.applied_zxid, bytes, sizeof(bytes), &conf)) {
        sim_fail(s, n->id, "n%u applied %s, which is not in its durable log", n->id,
                 trace_zxid(n->kv.applied_zxid, z));
        return;
    }
    raft_compact(n->r, n->kv.applied_zxid, keep);
    trace_node(s, n, TR_COMPACT, n->kv.applied_zxid, (int64_t)keep, 0);
}

void node_free(struct sim_node *n)
{
    if (n->r != NULL)
        raft_free(n->r);
    n->r = NULL;
    n->up = false;
    disk_free(&n->disk);
}
