/*
 * raft — the quorum protocol core: Raft (Ongaro & Ousterhout) with log
 * positions that are ZooKeeper zxids. replication/README.md states the
 * protocol, its messages and the invariants it keeps.
 *
 * Pure: no sockets, clocks, files, threads or rand(). Time arrives as
 * raft_tick calls, randomness comes from a generator seeded through the
 * config, messages arrive through raft_step, and everything the core wants
 * done comes back out of raft_ready. The same core therefore runs under the
 * sequencer thread, in unit tests, and in the deterministic simulator
 * (tests/sim), where a failing seed replays exactly.
 *
 * Threading: none. A struct raft belongs to one thread at a time; nothing in
 * it is shared.
 *
 * Zxids: zxid = term << 32 | counter. The log is a sequence of entries with
 * strictly increasing zxids; two logs that hold the same zxid hold the same
 * entry there and the same entries before it (one leader per term assigns
 * each counter once). A new leader's first entry is a no-op at counter 0 of
 * its term. Terms stay below 2^31 so that zxids stay positive.
 *
 * The Ready contract (as etcd raft's Ready): the driver calls raft_ready
 * when raft_has_ready says there is work, and then does, in this order:
 *   1. persist rd.hard_state if rd.hard_state_changed (term and vote:
 *      write, fsync, rename, fsync the directory);
 *   2. install rd.snapshot if present (it replaces the state machine and the
 *      whole log; persist it before anything later);
 *   3. drop every log entry with zxid > rd.truncate_after if rd.truncate;
 *   4. append rd.entries to the log, then make them durable (fdatasync);
 *   5. only now send rd.msgs: no message leaves before the state it
 *      depends on is durable. The exception: a leader's APPEND and SNAP
 *      may leave before step 4 (the Raft thesis, §10.2.1: a leader writes
 *      its log in parallel with replicating it). They promise nothing
 *      about the leader's disk, and the core counts the leader's own
 *      entries toward commit only once raft_advance says they are durable;
 *   6. apply rd.committed, in order, to the state machine;
 *   7. hand out rd.reads (a read for ctx may be served once the state
 *      machine has applied through its zxid);
 *   8. call raft_advance(r, &rd).
 * Between raft_ready and raft_advance the driver calls nothing else on r.
 *
 * With cfg.async_log, steps 3 and 4 may finish after raft_advance, on
 * another thread (the Raft thesis, 10.2.1; etcd's asynchronous storage
 * writes): a ready with entries or a truncation is a log batch, and the
 * driver carries out batches in the order it got them, each truncation
 * before the appends after it. The core counts nothing in a batch as
 * durable until raft_log_synced says it is: no entry commits on this
 * node's ack. rd.committed may hold entries this node has not made
 * durable yet: a quorum holds them, so applying them is safe, and a
 * leader must apply what it committed before it preps requests that
 * depend on it (a client may have seen the commit through a follower).
 * Step 5's late messages (raft_msg_early false) still depend on
 * the disk: the driver sends them only once every batch handed out up to
 * and including their ready is durable. Step 1 (term and vote) and step 2
 * (a snapshot, once the batches before it are durable) stay synchronous.
 * Everything rd points at is owned by the core and stays valid until
 * raft_advance. If a step fails (EIO, ENOSPC), the driver must not call
 * raft_advance: it stops the server (a real one restarts from its disk; the
 * simulator crashes the node), since the core's view of its log is then
 * ahead of the disk's.
 */
#ifndef LARCH_RAFT_H
#define LARCH_RAFT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RAFT_MEMBERS_MAX 32 /* voters plus observers */
#define RAFT_TERM_MAX 0x7fffffffu

static inline uint32_t raft_zxid_term(int64_t zxid)
{
    return (uint32_t)((uint64_t)zxid >> 32);
}
static inline uint32_t raft_zxid_counter(int64_t zxid)
{
    return (uint32_t)((uint64_t)zxid & 0xffffffffu);
}
static inline int64_t raft_make_zxid(uint32_t term, uint32_t counter)
{
    return (int64_t)(((uint64_t)term << 32) | counter);
}

/* Errors returned by the calls below (negative). */
enum raft_err {
    RAFT_OK = 0,
    RAFT_ENOTLEADER = -1, /* propose / read_index: not the leader (read_index on a
                           * follower that knows no leader) */
    RAFT_ELIMIT = -2,     /* propose: the term's counter is used up; the leader
                           * stepped down so that a new term starts */
    RAFT_ENOMEM = -3,
    RAFT_EINVAL = -4,     /* a message or argument the core cannot accept
                           * (unknown sender, wrong recipient, bad zxid order);
                           * nothing changed */
    RAFT_EBUSY = -5,      /* propose_config: a membership change is under way, or
                           * this leader has not committed an entry of its term */
};

enum raft_role {
    RAFT_FOLLOWER = 1,
    RAFT_PRE_CANDIDATE = 2, /* pre-vote round: asks without raising its term */
    RAFT_CANDIDATE = 3,
    RAFT_LEADER = 4,
    RAFT_OBSERVER = 5, /* a non-voting member: follows, never campaigns */
};

enum raft_entry_type {
    RAFT_ENTRY_NOOP = 1,   /* a new leader's first entry (counter 0); apply ignores it */
    RAFT_ENTRY_DATA = 2,   /* opaque to the core: an encoded txn */
    RAFT_ENTRY_CONFIG = 3, /* a membership (raft_config_encode): the core acts on it
                            * when it is appended; apply ignores it */
};

struct raft_entry {
    int64_t zxid;
    uint8_t type; /* enum raft_entry_type */
    const uint8_t *data;
    size_t len;
};

struct raft_member {
    uint32_t id; /* ZooKeeper's server id (myid), 1..255 */
    bool voter;  /* false: observer */
};

/* A membership. Every server uses the newest one in its log, committed or
 * not (the Raft paper, section 6). While a change is under way (joint
 * consensus) n_old > 0: old is the membership being left, and every
 * decision (commit, election, CheckQuorum, ReadIndex) needs a majority of
 * the voters of members and a majority of the voters of old. */
#define RAFT_CONFIG_EXTRA_MAX 4096
struct raft_config {
    uint32_t n_members;
    struct raft_member members[RAFT_MEMBERS_MAX];
    uint32_t n_old; /* 0: not joint */
    struct raft_member old[RAFT_MEMBERS_MAX];
    /* The driver's description of the members (larchd: their server.N
     * lines, addresses included), carried with the membership wherever it
     * goes: entries, compaction, snapshots, SNAP, status. The final entry
     * of a change carries the joint one's. The core never reads it. */
    uint32_t extra_len;
    uint8_t extra[RAFT_CONFIG_EXTRA_MAX];
};
#define RAFT_CONFIG_BYTES_MAX (5 + 4 * RAFT_MEMBERS_MAX + RAFT_CONFIG_EXTRA_MAX)
/* A CONFIG entry's data: u8 version (1), u8 n_members, n_members x (u8 id,
 * u8 voter), u8 n_old, n_old x (u8 id, u8 voter), u16 extra_len
 * (big-endian), extra. Returns the length. */
size_t raft_config_encode(const struct raft_config *c, uint8_t out[RAFT_CONFIG_BYTES_MAX]);
/* RAFT_OK, or RAFT_EINVAL when data is not one (bad length or version, an
 * id of 0 or above 255, an id twice in one list, a list without a voter,
 * more than RAFT_MEMBERS_MAX in a list). */
int raft_config_decode(const void *data, size_t len, struct raft_config *out);

struct raft_cfg {
    uint32_t self_id;
    const struct raft_member *members; /* copied; must include self_id */
    uint32_t n_members;
    /* A follower that hears nothing from a leader for a random number of
     * ticks in [election_ticks, 2 * election_ticks) campaigns; a leader
     * that has not heard from a quorum within election_ticks steps down
     * (CheckQuorum). The leader sends heartbeats every heartbeat_ticks. */
    uint32_t election_ticks;
    uint32_t heartbeat_ticks;
    /* A server that has just started campaigns after a random number of
     * ticks in [first_election_ticks, 2 * first_election_ticks) instead, so
     * that a new ensemble serves soon after it starts (ZooKeeper's first
     * election is quick too). Safe with pre-vote: a server restarting into
     * an ensemble that has a leader loses its pre-vote and disturbs no one.
     * 0: election_ticks; at most election_ticks. */
    uint32_t first_election_ticks;
    /* The leader steps down instead of assigning a counter above this
     * (ZOOKEEPER-1277 at 0xffffffff; the simulator sets it tiny). 0 means
     * 0xfffffffe. */
    uint32_t counter_limit;
    uint32_t max_append_entries;  /* per APPEND message; 0 means 64 */
    size_t max_append_bytes;      /* per APPEND message (at least one entry); 0 means 1 MiB */
    uint64_t seed;                /* the election jitter's generator */
    /* Tests only (tests/sim --break): faults put in on purpose to show
     * that the simulator's checks catch them. 0 in every real server. */
    uint32_t break_on_purpose; /* RAFT_BREAK_* bits */
    /* The driver makes log batches durable after raft_advance (the Ready
     * contract above) and reports them with raft_log_synced. */
    bool async_log;
};

/* With cfg.async_log: how many log batches may be handed out and not yet
 * synced. The driver waits for its disk before a raft_ready that could
 * exceed it (raft_log_unsynced). */
#define RAFT_LOG_BATCHES_MAX 256u

/* Faults for break_on_purpose. */
#define RAFT_BREAK_COMMIT_MINORITY 0x1u /* the leader commits on its own ack */
#define RAFT_BREAK_VOTE_LOG_CHECK 0x2u  /* votes ignore whose log is newer */
#define RAFT_BREAK_CONFIG_NO_JOINT 0x4u /* a membership change skips the joint
                                         * phase: straight to the new one */

/* What must be durable across restarts. commit_zxid is advisory: any value
 * not above the true commit point, nor above this node's durable log
 * (raft_status.durable_zxid), is safe, so the driver may write it lazily
 * (with the next term/vote write, say); raft_new trusts it, and a restart
 * replays the log up to it. rd.hard_state's is always safe. With async_log
 * the second bound matters: a node applies committed entries before its
 * own disk has them, and a truncation still on its way may leave stale
 * entries below the zxids it applied. */
struct raft_hard_state {
    uint32_t term;
    uint32_t vote; /* server id voted for in term; 0: none */
    int64_t commit_zxid;
};

/* A node's durable state at start: its hard state, the zxid its snapshot
 * reaches (0: none; the state machine the driver loaded is at that zxid
 * plus log entries up to hard_state.commit_zxid, which the driver has
 * re-applied itself), and the log entries after the snapshot, in zxid
 * order (copied). */
struct raft_boot {
    struct raft_hard_state hard_state;
    int64_t snap_zxid;
    const struct raft_entry *entries;
    size_t n_entries;
    /* the membership at snap_zxid, as raft_config_at gave it when the
     * snapshot was taken (or the SNAP's snapshot carried); NULL: cfg's
     * members (a membership that never changed) */
    const struct raft_config *snap_config;
};

enum raft_msg_type {
    RAFT_MSG_VOTE_REQ = 1,   /* term, pre_vote, last_zxid */
    RAFT_MSG_VOTE_RESP = 2,  /* term, pre_vote, reject */
    RAFT_MSG_APPEND = 3,     /* term, prev_zxid, commit_zxid, entries (none: heartbeat), read_ctx,
                              * no_ack (an empty one that only says the commit
                              * moved: a follower that holds prev_zxid does
                              * not answer it) */
    RAFT_MSG_APPEND_RESP = 4, /* term, reject, match_zxid (accepted: the follower
                               * holds the leader's log through it), hint_zxid
                               * (rejected: the follower's last zxid not above
                               * prev_zxid), read_ctx echoed, snap_zxid (> 0:
                               * raft_request_snapshot: send a SNAP at or
                               * above it) */
    RAFT_MSG_SNAP = 5,       /* term, snap_zxid; the driver attaches the snapshot
                              * bytes (leader side) and hands them in (follower) */
    RAFT_MSG_READ_INDEX = 6, /* follower -> leader: read_ctx is the follower's ctx */
    RAFT_MSG_READ_INDEX_RESP = 7, /* leader -> follower: read_ctx, commit_zxid;
                                   * reject: the leader could not confirm */
};

struct raft_msg {
    uint8_t type; /* enum raft_msg_type */
    uint32_t from;
    uint32_t to;
    uint32_t term;
    bool pre_vote;
    bool reject;
    bool no_ack; /* APPEND: a commit notice (see RAFT_MSG_APPEND) */
    int64_t last_zxid;
    int64_t prev_zxid;
    int64_t commit_zxid;
    int64_t match_zxid;
    int64_t hint_zxid;
    int64_t snap_zxid;
    uint64_t read_ctx;
    /* APPEND: borrowed (out of raft_ready: valid until raft_advance; into
     * raft_step: for the duration of the call, copied if kept). */
    const struct raft_entry *entries;
    uint32_t n_entries;
    /* SNAP: the snapshot at snap_zxid. Out of raft_ready these are NULL/0
     * and the driver attaches its snapshot for snap_zxid; into raft_step
     * they are borrowed and copied into rd.snapshot. */
    const uint8_t *snap_data;
    size_t snap_len;
    /* SNAP: the membership at snap_zxid. Out of raft_ready the core sets it
     * (valid until raft_advance: the driver sends it with the snapshot);
     * into raft_step it is borrowed, and NULL means cfg's members. */
    const struct raft_config *snap_config;
    /* The driver's own, carried with the message and never set or read by
     * the core: larchd's APPENDs carry the sender's tree digest at
     * digest_zxid (0: none), so followers find a diverged tree. */
    uint64_t digest;
    int64_t digest_zxid;
};

struct raft_snapshot {
    int64_t zxid;
    const uint8_t *data;
    size_t len;
    struct raft_config config; /* the membership at zxid: kept with the snapshot,
                                * given back as raft_boot.snap_config */
    /* false: the snapshot replaced the log (this node was behind the
     * leader's compacted log). true: a resync (raft_request_snapshot): the
     * log after zxid stays, and the committed entries after zxid come out
     * again for the state machine to apply on top of the snapshot. */
    bool keeps_log;
};

/* A ReadIndex result: ok means the state machine may serve the read for
 * ctx once it has applied through zxid (linearizable); !ok means leadership
 * could not be confirmed (lost leadership, no leader known): retry or fail. */
struct raft_read {
    uint64_t ctx;
    int64_t zxid;
    bool ok;
};

struct raft_ready {
    bool hard_state_changed;
    struct raft_hard_state hard_state;
    const struct raft_snapshot *snapshot; /* NULL: none */
    bool truncate;
    int64_t truncate_after;
    const struct raft_entry *entries;
    size_t n_entries;
    const struct raft_msg *msgs;
    size_t n_msgs;
    const struct raft_entry *committed;
    size_t n_committed;
    const struct raft_read *reads;
    size_t n_reads;
};

struct raft_peer_status {
    uint32_t id;
    bool voter;
    int64_t match_zxid;   /* leader only: highest zxid known replicated there */
    bool recently_active; /* leader only: heard from within the election timeout */
    /* leader only: > 0 when the peer asked for a snapshot at or above this
     * zxid (raft_request_snapshot) and the leader holds none that new: the
     * driver takes one, raft_compact makes it known, the SNAP follows */
    int64_t snap_wanted;
};

struct raft_status {
    enum raft_role role;
    uint32_t term;
    uint32_t vote;
    uint32_t leader_id; /* 0: unknown */
    /* This node leads, or heard its leader within election_ticks (the
     * CheckQuorum lease): what it serves is at most that stale. */
    bool leader_lease;
    int64_t commit_zxid;
    int64_t applied_zxid; /* committed entries handed out and advanced past */
    int64_t last_zxid;    /* last entry in the log (snap_zxid if none) */
    int64_t durable_zxid; /* last entry the driver has made durable */
    int64_t snap_zxid;    /* the log holds entries after this */
    uint32_t n_peers;
    struct raft_peer_status peers[RAFT_MEMBERS_MAX];
    /* the membership this node uses: the newest in its log (or its
     * snapshot's, or cfg's), and the zxid of the entry that set it (0: not
     * an entry of the log) */
    struct raft_config config;
    int64_t config_zxid;
    /* not a leader: > 0 while a raft_request_snapshot waits for its SNAP,
     * and until the ready that hands the snapshot out */
    int64_t snap_wanted;
};

struct raft;

/* A core for cfg and boot (both copied). NULL: bad config (self not a
 * member, duplicate ids, no voter, election_ticks <= heartbeat_ticks,
 * boot entries out of order or not above snap_zxid) or no memory. */
struct raft *raft_new(const struct raft_cfg *cfg, const struct raft_boot *boot);
void raft_free(struct raft *r);

/* One unit of time (the driver's tickTime / N). */
void raft_tick(struct raft *r);

/* Takes one message addressed to this node. Stale or duplicated messages
 * are absorbed, and so are answers from a server outside the membership
 * (it may have been removed with them on the way); RAFT_EINVAL (nothing
 * changed) for a message to someone else, from an id no server has, or
 * claiming to lead a term another leads, entries not in zxid order or a
 * CONFIG entry that does not decode. */
int raft_step(struct raft *r, const struct raft_msg *m);

/* Leader only: appends one DATA entry (data copied) and returns its zxid
 * in *zxid. RAFT_ENOTLEADER, RAFT_ELIMIT (stepped down), RAFT_ENOMEM. The
 * entries proposed between two raft_ready calls go to followers together,
 * in the APPEND messages of the next ready. */
int raft_propose(struct raft *r, const void *data, size_t len, int64_t *zxid);
/* Leader only: starts a change to the membership members (n of them: the
 * whole new membership, voters and observers), described by extra
 * (extra_len bytes, at most RAFT_CONFIG_EXTRA_MAX; see struct raft_config:
 * it should describe the old members too, since the joint entry carries
 * it). Appends the joint entry
 * (old: the current members) and returns its zxid; once that commits, the
 * leader appends the final entry itself, and the change is done when that
 * commits. A leader the new membership does not count as a voter steps
 * down then. RAFT_ENOTLEADER; RAFT_EBUSY (a change is under way, or no
 * entry of this term has committed yet); RAFT_EINVAL (n is 0 or above
 * RAFT_MEMBERS_MAX, an id is 0, above 255 or twice, no voter, extra too
 * long, or the membership and its description are the current ones);
 * RAFT_ELIMIT (stepped down); RAFT_ENOMEM. */
int raft_propose_config(struct raft *r, const struct raft_member *members, uint32_t n,
                        const void *extra, size_t extra_len, int64_t *zxid);
/* The membership in effect at zxid (the newest CONFIG entry at or below it,
 * else the one at the log's base), for a driver that takes a snapshot at
 * zxid. RAFT_EINVAL when zxid is below what the core still knows (the
 * log's base). */
int raft_config_at(const struct raft *r, int64_t zxid, struct raft_config *out);
/* The zxid the next raft_propose would assign, or 0 when it would fail
 * (not the leader, or the term's counter is used up). The sequencer preps
 * writes against it: a txn carries its own zxid before it is proposed. */
int64_t raft_next_zxid(const struct raft *r);

/* Starts a ReadIndex for ctx; its result comes out of a later raft_ready.
 * On the leader: once it has committed an entry of its own term and a
 * quorum has answered a heartbeat sent after this call. On a follower:
 * asks the leader (RAFT_MSG_READ_INDEX); the driver times the answer out
 * itself if messages are lost. RAFT_ENOTLEADER: no leader known. */
int raft_read_index(struct raft *r, uint64_t ctx);

/* Not a leader: the driver found its state machine diverged from the
 * leader's (their digests differ at a zxid both applied). Asks the leader
 * for a snapshot this node can rebuild from without losing a log entry it
 * holds: one at or above its snapshot point (the driver may have dropped
 * its durable log below it). It comes as rd.snapshot with
 * keeps_log set, and the committed entries after it follow in
 * rd.committed, to be applied again. The driver must not take snapshots of
 * its own state meanwhile. RAFT_OK, or RAFT_EINVAL on a leader. */
int raft_request_snapshot(struct raft *r);

/* The driver holds a snapshot at zxid (<= applied): entries up to zxid may
 * go, and a follower that needs them gets RAFT_MSG_SNAP instead. The core
 * keeps the newest keep_entries of them for followers just behind. */
void raft_compact(struct raft *r, int64_t zxid, size_t keep_entries);

bool raft_has_ready(const struct raft *r);
void raft_ready(struct raft *r, struct raft_ready *rd);
void raft_advance(struct raft *r, const struct raft_ready *rd);

/* cfg.async_log only. The oldest n log batches not yet synced are durable
 * (truncations and appends done, fdatasync returned), in the order they
 * were handed out. Not between raft_ready and raft_advance. */
void raft_log_synced(struct raft *r, size_t n);
/* cfg.async_log: the log batches handed out and not yet synced (a ready
 * may add one; at most RAFT_LOG_BATCHES_MAX). 0 without async_log. */
size_t raft_log_unsynced(const struct raft *r);

void raft_status(const struct raft *r, struct raft_status *st);

/* raft_status's first fields alone, for the driver's per-message paths:
 * raft_status also copies the peers and the membership (kilobytes). */
struct raft_brief {
    enum raft_role role;
    uint32_t term;
    uint32_t leader_id; /* 0: unknown */
    bool leader_lease;
    int64_t applied_zxid;
    int64_t snap_zxid;
};
struct raft_brief raft_brief(const struct raft *r);

/* The zxid-ordered log the core holds (after snap_zxid), for checkers:
 * entry i of n, or NULL past the end. */
size_t raft_log_len(const struct raft *r);
const struct raft_entry *raft_log_at(const struct raft *r, size_t i);

const char *raft_role_name(enum raft_role role);
const char *raft_msg_type_name(uint8_t type);
/* Whether m may leave before the Ready's entries are durable (the Ready
 * contract, step 5): a leader's APPEND and SNAP. */
bool raft_msg_early(const struct raft_msg *m);

#endif
