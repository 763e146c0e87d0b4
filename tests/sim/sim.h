/*
 * sim — the world of one simulated run: N Raft cores (replication/raft.h)
 * with their disks and state machines, the network between them, the
 * clients, the fault schedule and the checkers. Everything derives from
 * the seed: one thread, no clocks, sockets or files, so a seed replays
 * exactly. The modules that act on the world take a struct sim:
 *   net.c     the message pool: delay, drop, duplicate, partitions
 *   node.c    a node's life: boot from disk, the Ready contract, crash
 *   client.c  clients and the operation history
 *   fault.c   the fault schedule
 *   check.c   the per-step invariants
 *   reconfig.c membership changes (--reconfig) and membership helpers
 *   sim.c     one run: set-up, the step loop, the end phase
 * Standalone pieces: rng.h, hash.h, kv.c, disk.c, lin.c, trace.c.
 *
 * Threading: a struct sim belongs to one thread; runs share nothing.
 */
#ifndef LARCH_SIM_SIM_H
#define LARCH_SIM_SIM_H

#include <stdbool.h>
#include <stdint.h>

#include "replication/raft.h"
#include "tests/sim/disk.h"
#include "tests/sim/kv.h"
#include "tests/sim/lin.h"
#include "tests/sim/rng.h"
#include "tests/sim/trace.h"

#define SIM_VOTERS_MAX 5
#define SIM_OBSERVERS_MAX 1
#define SIM_SPARES_MAX 3 /* nodes outside the initial membership (--spares) */
#define SIM_SPARES_DRAWN_MAX 2 /* --reconfig without --spares: 0..2 per seed */
#define SIM_NODES_MAX (SIM_VOTERS_MAX + SIM_OBSERVERS_MAX + SIM_SPARES_MAX)
#define SIM_CLIENTS 3
#define SIM_OPS_MAX 150       /* history length: keeps the checker fast */
#define SIM_FINAL_TRIES 8     /* history slots kept for the end phase's write */
#define SIM_END_STEPS_MAX 6000 /* the end phase must converge within this */
#define SIM_DIVERGED_STEPS 1000 /* and a lone differing digest must go within this */
#define NET_POOL_MAX 4096     /* messages in flight */

struct sim_opts {
    uint64_t seed;
    uint32_t servers;   /* voters: 3 or 5 */
    uint32_t observers; /* 0 or 1 */
    uint32_t spares;    /* with spares_given: nodes outside the initial membership */
    bool spares_given;  /* false: 0, or 0..2 drawn per seed with reconfig */
    bool reconfig;      /* membership changes during the run (--reconfig) */
    uint32_t steps;
    uint32_t break_bits;    /* RAFT_BREAK_* for every core */
    uint32_t sim_break;     /* SIM_BREAK_*: the driver's own deliberate faults */
    bool corrupt;           /* --corrupt: state machines of followers go wrong */
    bool async_log;         /* --async-log: cfg.async_log, a log thread in each driver */
    uint32_t counter_limit; /* 0: chosen per seed */
    bool trace;             /* print every event */
    bool verbose_failure;   /* print the trace ring and replay line on failure */
    const char *argv0;      /* for the replay command */
    const char *break_name; /* for the replay command, or NULL */
};

/* Deliberate driver faults (--break), the simulator's own: the core is
 * untouched. */
enum sim_break {
    SIM_BREAK_NO_RESYNC = 1,       /* a follower ignores digest mismatches */
    SIM_BREAK_ASYNC_EARLY_ACK = 2, /* --async-log: late messages leave before their batch
                                    * is durable */
};

/* Per-seed fault rates, in events per million per step (or per message):
 * each seed draws its own, so some runs are calm and some are storms. */
struct sim_profile {
    uint32_t drop, dup, reorder, long_delay; /* per message */
    uint32_t crash, crash_in_ready, disk_fault, slow_disk;
    uint32_t partition, heal;
    uint32_t compact; /* per node per step: take a snapshot */
    uint32_t tick_skip; /* per tick: clock drift */
    uint32_t load;      /* per step: a background write on the leader */
    uint32_t reconfig;  /* per step: a membership change on the leader (--reconfig) */
    uint32_t corrupt;   /* per step: a follower's state machine goes wrong (--corrupt) */
    /* --async-log, per node per step: the log thread makes queued batches
     * durable; and of those times, how often several at once (group
     * commit) */
    uint32_t log_sync, log_group;
};

/* --async-log: a log batch the driver handed to its log thread and that
 * is not durable yet (node.c): one ready's truncation and entries, copied
 * (the core lends them only until raft_advance), and the late messages
 * that wait for it (its ready's, and those of later readies that had no
 * batch of their own). */
struct sim_batch {
    bool truncate;
    int64_t truncate_after;
    int64_t decided_by; /* the step from which the core had decided the truncation */
    struct raft_entry *entries; /* the entries, then their data: one malloc'd block */
    size_t n_entries;
    struct raft_msg *late; /* plain copies: a late message borrows nothing */
    size_t n_late, cap_late;
};

/* The digests a node had after applying its recent zxids: what it
 * compares a leader's APPEND digest with (node.c). */
#define SIM_DIGESTS 64

struct sim_digest {
    int64_t zxid;
    uint64_t digest;
};

struct sim_node {
    uint32_t id;
    bool up;
    struct raft *r;   /* NULL while down */
    struct disk disk; /* survives crashes */
    struct kv kv;     /* rebuilt from disk on restart */
    int64_t restart_at;
    int64_t slow_until;  /* ready processing waits until this step */
    int64_t slow_since;  /* ... since this step (0: not waiting) */
    int64_t next_tick;
    uint8_t disk_fault;  /* enum node_disk_fault armed for the next write */
    bool crash_in_ready; /* armed: crash part-way through the next ready */
    uint32_t boots;
    /* --async-log: the batches queued for the log thread, oldest first
     * (a ring from batch_head), as many as raft_log_unsynced counts; and
     * how many a ready with a snapshot made durable, to report with
     * raft_log_synced once raft_advance is through. */
    struct sim_batch batches[RAFT_LOG_BATCHES_MAX];
    uint32_t batch_head, n_batches;
    uint32_t synced_in_ready;
    /* The checker's memory of the core, for role-change traces. */
    uint8_t seen_role;
    uint32_t seen_term;
    int64_t seen_conf_zxid; /* and of the membership, for membership traces */
    int64_t seen_conf_b, seen_conf_c;
    /* The driver's digest exchange: a ring of its recent (zxid, digest)
     * pairs, the lowest leader digest above its applied zxid (zxid 0:
     * none) to compare once it gets there, a mismatch found in a ready,
     * to act on after raft_advance. */
    struct sim_digest digests[SIM_DIGESTS];
    uint32_t n_digests, digest_head;
    struct sim_digest claim;
    uint32_t claim_from;
    bool resync_due;
    bool mismatch_ignored; /* --break no-resync: one was traced already */
    /* The checker's knowledge of a corrupted state machine (--corrupt):
     * while diverged, kv is wrong and truth is what it should be (every
     * entry is applied to both, and truth is checked as kv would be);
     * snap_diverged: the disk's snapshot was taken from a wrong kv, and
     * snap_truth holds the bytes it should have. */
    bool diverged;
    int64_t diverged_step;
    struct kv truth;
    bool snap_diverged;
    int64_t snap_diverged_step;
    uint8_t snap_truth[KV_SNAP_BYTES];
};

enum node_disk_fault {
    DISK_FAULT_NONE = 0,
    DISK_FAULT_APPEND = 1, /* ENOSPC on the next append */
    DISK_FAULT_SYNC = 2,   /* EIO on the next fdatasync */
};

struct net_msg {
    int64_t deliver_at;
    uint64_t seq;
    struct raft_msg m; /* entries and snapshot bytes point into blob */
    void *blob;
};

struct net {
    struct net_msg *pool;
    size_t n;
    struct net_msg *due; /* scratch for one step's deliveries */
    uint64_t seq;
    bool blocked[SIM_NODES_MAX][SIM_NODES_MAX]; /* [from][to], by index */
    uint64_t sent, delivered, dropped, duplicated;
};

struct check_commit {
    int64_t zxid;
    uint64_t entry_hash;
    uint64_t chain;  /* log chain through this entry */
    uint64_t digest; /* state-machine digest after applying it */
    uint32_t first_node; /* who handed it out first */
    int64_t step;        /* when it was first applied (it committed by then) */
};

struct check_config {
    int64_t zxid; /* the CONFIG entry's */
    struct raft_config conf;
};

struct check {
    uint32_t *leader_of_term; /* [term]: 0 or the one leader seen */
    size_t n_terms;
    struct check_commit *committed; /* the global committed sequence */
    size_t n_committed, cap_committed;
    /* zxid -> log chain (first holder): the log matching map. */
    int64_t *chain_zxid;
    uint64_t *chain_hash;
    uint8_t *chain_node;
    size_t chain_cap, chain_n;
    /* The memberships of the committed sequence: the initial one, then
     * each committed CONFIG entry's, in zxid order. */
    struct raft_config initial;
    struct check_config *configs;
    size_t n_configs, cap_configs;
};

enum client_state {
    CLIENT_IDLE = 0,
    CLIENT_WRITE_WAIT = 1, /* proposed: waits for its node to apply the zxid */
    CLIENT_READ_INDEX = 2, /* waits for the node's read index */
    CLIENT_READ_APPLY = 3, /* waits for the node to apply through the index */
};

/* One recorded op; reads and writes that failed with no effect stay out
 * of the history (recorded false). */
struct client_op {
    struct lin_op lin;
    uint8_t key;
    bool recorded;
    bool finished; /* returned, or given up as unknown */
    uint32_t client;
    uint32_t node;
    int64_t zxid; /* write: the zxid it was given; read: the index */
};

struct client {
    uint32_t id;
    enum client_state state;
    uint32_t op;
    uint32_t node; /* the server it talks to for op */
    uint64_t read_ctx; /* the ctx its read_index carries */
    int64_t deadline;
    int64_t next_at;
    uint32_t leader_hint; /* 0: none */
};

struct clients {
    struct client c[SIM_CLIENTS];
    struct client_op ops[SIM_OPS_MAX];
    uint32_t n_ops;
    uint32_t per_key[KV_KEYS];
    int64_t last_value[KV_KEYS]; /* the newest value a client saw: cas targets */
    int64_t next_value;
    int64_t gap_steps; /* mean pause between one client's ops */
    bool issuing;      /* false in the end phase */
    uint32_t final_op; /* the end phase's write, or UINT32_MAX */
    uint32_t final_tries;
    uint64_t read_ctx_seq;
    int bad_key; /* the key whose history failed the check, or -1 */
};

/* What a run did, for the summary lines (and to see that runs do reach
 * the interesting paths). */
struct sim_stats {
    uint64_t runs;
    uint64_t steps;
    uint64_t max_term;
    uint64_t committed; /* entries in the committed sequence */
    uint64_t ops_done, ops_unknown;
    uint64_t crashes, snap_installs, truncations, compactions;
    uint64_t msgs_sent, msgs_dropped, msgs_duplicated;
    uint64_t reconfigs;      /* raft_propose_config calls the leader took */
    uint64_t configs_done;   /* final (non-joint) CONFIG entries committed */
    uint64_t corruptions;    /* --corrupt: state machines made wrong */
    uint64_t mismatches;     /* digest mismatches a follower found */
    uint64_t resyncs;        /* snapshots installed keeping the log (raft_request_snapshot) */
    uint64_t corrupt_gone[5]; /* corruptions gone otherwise, by enum trace_gone */
    /* --async-log */
    uint64_t log_batches;    /* batches handed to the log threads */
    uint64_t log_syncs;      /* log thread fdatasyncs that made batches durable */
    uint64_t log_grouped;    /* of which several batches at once */
    uint64_t log_full;       /* readies that waited for the disk (RAFT_LOG_BATCHES_MAX) */
    uint64_t log_lost;       /* batches a crash caught queued */
    uint64_t log_depth_max;  /* the most batches one node had queued */
};

struct sim {
    struct sim_opts opts;
    struct rng rng;
    int64_t now;   /* the step */
    int64_t clock; /* logical time of client calls and returns */
    uint32_t n_nodes;   /* members, then spares: ids 1..n_nodes */
    uint32_t n_members; /* the initial membership: ids 1..n_members */
    struct raft_member members[SIM_NODES_MAX];
    struct sim_node nodes[SIM_NODES_MAX];
    uint32_t counter_limit;
    uint32_t election_ticks, heartbeat_ticks;
    uint32_t max_append_entries;
    size_t max_append_bytes;
    struct sim_profile prof;
    bool faults_on;
    uint64_t reconfigs; /* membership changes the leader took */
    struct net net;
    struct check check;
    struct clients clients;
    struct trace trace;
    uint64_t corrupt_gone[5]; /* by enum trace_gone, for the summary */
    /* --async-log: group commits, readies that waited for room, batches
     * a crash caught queued, the most batches one node had queued */
    uint64_t log_grouped, log_full, log_lost, log_depth_max;
    bool failed;
    char fail_msg[1024];
};

/* Records the first failed check (later ones are ignored: the run stops
 * at the end of the current step) and traces it. */
void sim_fail(struct sim *s, uint32_t node, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static inline struct sim_node *sim_node(struct sim *s, uint32_t id)
{
    return (id >= 1 && id <= s->n_nodes) ? &s->nodes[id - 1] : NULL;
}

/* A node that believes it leads (there may be a stale one too: any will
 * do, starting from a random node, drawn from the run's generator), or
 * NULL. */
struct sim_node *sim_any_leader(struct sim *s);

/* The raft_cfg.members node id boots with into out (SIM_NODES_MAX):
 * the initial membership, and a spare adds itself as an observer (raft.h
 * wants self in cfg; it learns the real membership from the leader's log
 * once it is added). Returns how many. */
uint32_t sim_cfg_members(const struct sim *s, uint32_t id, struct raft_member *out);

/* One run of opts; true if every check passed. On failure, the message is
 * in s->fail_msg (the caller prints the report). The world is freed
 * before returning except s->trace, s->clients and s->fail_msg. The
 * run's figures are added to *stats. */
bool sim_run(struct sim *s, const struct sim_opts *opts, struct sim_stats *stats);

/* One line of figures. */
void sim_print_stats(const struct sim_stats *st, FILE *out);

/* Prints the failure report: seed, the failed check, the trace ring's
 * last events and the replay command. */
void sim_report(const struct sim *s, FILE *out);

/* The exact command that replays opts (argv0 --seed ...). */
void sim_replay_cmd(const struct sim_opts *opts, char *buf, size_t len);

#endif
