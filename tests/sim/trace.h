/*
 * trace — what happened in a run, as compact records: the last
 * TRACE_RING of them are kept for the failure report, and --trace prints
 * each one as it happens. Records are formatted only when printed, so an
 * untraced run pays a struct copy per event.
 *
 * Threading: a struct trace belongs to one run.
 */
#ifndef LARCH_SIM_TRACE_H
#define LARCH_SIM_TRACE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define TRACE_RING 64  /* kept for the failure report */
#define TRACE_SHOWN 40 /* of which the report prints the last */

enum trace_kind {
    TR_SEND = 1,   /* node -> peer: msg fields */
    TR_DELIVER,    /* peer -> node */
    TR_DROP,       /* why: enum trace_drop */
    TR_DUP,        /* the network duplicated a message */
    TR_ROLE,       /* node: mtype = role, term, a = leader */
    TR_HARD,       /* node persisted term, a = vote, b = commit */
    TR_APPEND,     /* node appended a..b (zxids), c = count */
    TR_SYNC,       /* node synced through a */
    TR_TRUNCATE,   /* node drops entries after a */
    TR_APPLY,      /* node applied a (zxid), b = digest */
    TR_SNAP_SEND,  /* node attached its snapshot at a for peer */
    TR_SNAP_INSTALL, /* node installed a snapshot at a */
    TR_COMPACT,    /* node snapshotted at a, b = entries kept, c = 1: a peer wanted it */
    TR_CRASH,      /* node crashed: a = why (enum trace_crash), b = entries kept of c pending */
    TR_RESTART,    /* node restarted: term, a = snap, b = re-applied through, c = log entries */
    TR_SLOW_DISK,  /* node's disk stalls until step a */
    TR_DISK_FAULT, /* node will fail its next append (a = 0) or sync (a = 1) */
    TR_PARTITION,  /* a: enum trace_partition, b: bitmask of one side, c: middle/peer */
    TR_HEAL,       /* every link works again */
    TR_PROPOSE,    /* client a proposes op b on node: zxid c, or error if c < 0 */
    TR_OP_DONE,    /* op a finished on node: b = result (read value / cas ok), c = zxid */
    TR_OP_LOST,    /* op a's outcome is unknown (node crashed, zxid lost, timeout) */
    TR_READ_START, /* op a: read_index on node, b = ret */
    TR_READ_INDEX, /* op a: node's read index b, c = ok */
    TR_PHASE,      /* a: 1 faults stop, 2 final write done, 3 converged */
    TR_FAIL,       /* a failed check: see the failure message */
    TR_RECONFIG,   /* node asked to change the membership: a = zxid, or error if a < 0;
                    * b = voters mask | observers mask << 16 (bit id) */
    TR_CONFIG,     /* node's membership is now the one set at zxid a (0: not a log entry);
                    * b, c: reconfig_trace_words */
    TR_CORRUPT,    /* node's state machine goes wrong: key a flipped, at applied b */
    TR_CORRUPT_GONE, /* node's corruption (since step b) is gone: a = enum trace_gone */
    TR_MISMATCH,   /* node's digest at a is b, leader peer's is c; flags bit 2: ignored */
    TR_RESYNC,     /* node rebuilt from the leader's snapshot at a (keeps_log), having
                    * applied c; b = the step its corruption began, or -1: none */
    TR_LOG_QUEUE,  /* --async-log: node handed a batch to its log thread: flags bit 0:
                    * it truncates after a; entries b..c, term = how many */
    TR_LOG_SYNCED, /* --async-log: node's log thread made its oldest a batches durable,
                    * b still queued; c late messages go out */
    TR_KINDS,      /* the number of kinds, for counting */
};

enum trace_drop {
    TR_DROP_RANDOM = 1,
    TR_DROP_LINK = 2,
    TR_DROP_DOWN = 3,
    TR_DROP_POOL_FULL = 4,
};

enum trace_crash {
    TR_CRASH_RANDOM = 1,     /* between steps */
    TR_CRASH_IN_READY = 2,   /* mid-ready, before stage b... see c */
    TR_CRASH_APPEND_ERR = 3, /* ENOSPC on append */
    TR_CRASH_SYNC_ERR = 4,   /* EIO on fdatasync */
};

enum trace_gone {
    TR_GONE_WRITE = 1, /* a write overwrote the wrong value */
    TR_GONE_CRASH = 2, /* it was in memory only, and the node crashed */
    TR_GONE_LED = 3,   /* the node became leader undetected: the run takes it back */
    TR_GONE_SNAP = 4,  /* a snapshot from the leader replaced the state (behind) */
};

enum trace_partition {
    TR_PART_SPLIT = 1,
    TR_PART_ONE_WAY = 2,
    TR_PART_BRIDGE = 3,
    TR_PART_ISOLATE = 4,
};

struct trace_event {
    int64_t step;
    uint16_t kind;   /* enum trace_kind */
    uint8_t node;
    uint8_t peer;
    uint8_t mtype;   /* message type or role */
    uint8_t flags;   /* bit 0 reject, bit 1 pre_vote */
    uint8_t why;     /* TR_DROP: enum trace_drop */
    uint32_t term;
    int64_t a, b, c;
};

struct trace {
    struct trace_event ring[TRACE_RING];
    uint64_t n; /* events ever recorded */
    uint64_t count[TR_KINDS]; /* events recorded, by kind: the run's statistics */
    bool print; /* --trace: print as recorded */
    FILE *out;
};

void trace_init(struct trace *t, bool print, FILE *out);
void trace_add(struct trace *t, const struct trace_event *ev);

/* Prints the last up-to-`last` events, oldest first. */
void trace_dump(const struct trace *t, FILE *out, unsigned last);

struct raft_msg;
/* A TR_SEND / TR_DELIVER / TR_DROP / TR_DUP record of message m; why is
 * the enum trace_drop for TR_DROP, 0 otherwise. */
void trace_msg(struct trace *t, int64_t step, uint16_t kind, const struct raft_msg *m, uint8_t why);

/* A membership from its two trace words (reconfig_trace_words), e.g.
 * "voters {1,2} observers {4}" or "JOINT new voters {4}, old voters {1}". */
const char *trace_membership(int64_t b, int64_t c, char *buf, size_t len);

/* "term:counter", the way zxids read best in a trace. buf: 24 bytes. */
const char *trace_zxid(int64_t zxid, char buf[24]);

#endif
