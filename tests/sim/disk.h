/*
 * disk — one simulated node's storage, modelled on what raft.h's Ready
 * contract asks of a real one (SQLite's test6.c idea: buffer writes until
 * the sync, and on a crash keep, drop or tear what was not synced):
 *   - the hard state (term, vote, commit) is written atomically (write,
 *     fsync, rename): durable as soon as it is saved;
 *   - the snapshot (state-machine bytes at a zxid, with the membership in
 *     effect there: raft.h's raft_boot.snap_config) likewise;
 *   - the log: a truncation and an append are one pending write that only
 *     becomes durable at disk_sync; a crash before that keeps nothing of it
 *     or the truncation plus a prefix of the appended entries (a torn tail).
 * Each entry also carries its log chain hash (hash.h), which the log
 * matching check compares across nodes.
 *
 * Threading: a struct disk belongs to one simulated node.
 */
#ifndef LARCH_SIM_DISK_H
#define LARCH_SIM_DISK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "replication/raft.h"
#include "tests/sim/kv.h"

struct disk_entry {
    int64_t zxid;
    uint8_t type;
    uint8_t *data; /* owned */
    size_t len;
    uint64_t chain; /* hash_chain through this entry */
};

struct disk_log {
    struct disk_entry *v;
    size_t n;
    size_t cap;
};

struct disk {
    struct raft_hard_state hard;
    int64_t snap_zxid; /* 0: no snapshot (the empty state at zxid 0) */
    uint64_t snap_chain;
    uint8_t snap[KV_SNAP_BYTES];
    /* The membership at snap_zxid (raft_config_at, or what the installed
     * snapshot carried); none for the empty state at zxid 0, where the
     * core takes cfg's members. */
    bool snap_has_config;
    struct raft_config snap_config;
    struct disk_log log; /* durable, zxid order, all above snap_zxid */
    /* The write not yet synced: an optional truncation, then entries. */
    bool pend_truncate;
    int64_t pend_truncate_after;
    struct disk_log pend;
};

/* An empty disk: term 0, no vote, no snapshot (its bytes are the empty
 * state machine at zxid 0), no log. */
void disk_init(struct disk *d);
void disk_free(struct disk *d);

void disk_save_hard(struct disk *d, const struct raft_hard_state *hs);

/* The last entry of the log as a reader would see it now (durable cut by
 * the pending truncation, then the pending entries): its zxid and chain,
 * or the snapshot's when the log is empty. */
void disk_last(const struct disk *d, int64_t *zxid, uint64_t *chain);

/* Replaces the snapshot, the whole log and any pending write (raft.h
 * step 2); chain is the log chain at zxid, conf the membership there.
 * Durable at once. */
void disk_install_snapshot(struct disk *d, int64_t zxid, uint64_t chain,
                           const uint8_t *data, size_t len, const struct raft_config *conf);

/* A resync snapshot (raft_snapshot.keeps_log): replaces the snapshot like
 * disk_install_snapshot, but the log after zxid stays (only the entries
 * at or below zxid go). No pending write may exist. False (nothing
 * changed): zxid is below the disk's own snapshot, whose log through it
 * was dropped (raft_request_snapshot asks for none that old). Durable at
 * once. */
bool disk_install_snapshot_keep(struct disk *d, int64_t zxid, uint64_t chain,
                                const uint8_t *data, size_t len, const struct raft_config *conf);

/* Pending: drop entries above after (raft.h step 3). Only before the
 * ready's entries are appended. */
void disk_truncate(struct disk *d, int64_t after);

/* Pending: appends a copy of e with its chain computed from the last entry.
 * False (nothing changed): e's zxid is not above the last zxid. */
bool disk_append(struct disk *d, const struct raft_entry *e);

/* Makes the pending write durable (fdatasync). */
void disk_sync(struct disk *d);

/* A crash: the pending write keeps nothing (keep < 0) or its truncation
 * plus its first keep entries (a torn tail). */
void disk_crash(struct disk *d, long keep);

/* The driver's snapshot: the state machine at zxid (bytes) and the
 * membership there (conf), at the snapshot's zxid or a durable log entry;
 * drops the log through zxid. False (nothing changed): zxid is in neither. */
bool disk_compact(struct disk *d, int64_t zxid, const uint8_t *data, size_t len,
                  const struct raft_config *conf);

/* The durable log entry at zxid, or NULL. */
const struct disk_entry *disk_find(const struct disk *d, int64_t zxid);

/* Fills boot from the durable state (no pending write may exist). The
 * entries are written to *entries (malloc'd, caller frees; their data
 * and boot->snap_config point into d). boot->hard_state.commit_zxid is
 * left as stored. */
bool disk_boot(const struct disk *d, struct raft_boot *boot, struct raft_entry **entries);

#endif
