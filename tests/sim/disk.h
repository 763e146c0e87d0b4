/*
 * disk — one simulated node's storage, modelled on what raft.h's Ready
 * contract asks of a real one (SQLite's test6.c idea: buffer writes until
 * the sync, and on a crash keep, drop or tear what was not synced):
 *   - the hard state (term, vote, commit) is written atomically (write,
 *     fsync, rename): durable as soon as it is saved;
 *   - the snapshot (state-machine bytes at a zxid, with the membership in
 *     effect there: raft.h's raft_boot.snap_config) likewise;
 *   - the log: truncations and appends are one pending write that only
 *     becomes durable at disk_sync; a crash before that keeps a prefix of
 *     it: nothing, or its leading truncation plus the operations after it
 *     up to some point (a torn tail). A synchronous driver writes one
 *     ready's truncation and entries; the async log thread (--async-log)
 *     may write several batches before one fdatasync (group commit), so a
 *     truncation can also follow pending entries.
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

/* A truncation in the pending write, made after its first `at` pending
 * entries. */
struct disk_cut {
    size_t at;
    int64_t after;
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
    /* The write not yet synced, in the order it was made: the appended
     * entries (pend, every one of them, even those a later truncation
     * removed) and the truncations between them (cuts, by position). */
    struct disk_log pend;
    struct disk_cut *cuts;
    size_t n_cuts, cap_cuts;
    /* The log as a reader sees it now: the durable log cut after
     * pend_truncate_after (if pend_truncate), then the pending entries
     * view[0..n_view) (indices into pend) that no later truncation removed. */
    bool pend_truncate;
    int64_t pend_truncate_after;
    size_t *view;
    size_t n_view, cap_view;
};

/* An empty disk: term 0, no vote, no snapshot (its bytes are the empty
 * state machine at zxid 0), no log. */
void disk_init(struct disk *d);
void disk_free(struct disk *d);

void disk_save_hard(struct disk *d, const struct raft_hard_state *hs);

/* The last entry of the log as a reader would see it now (durable cut by
 * the pending truncations, then the pending entries they left): its zxid
 * and chain, or the snapshot's when the log is empty. */
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

/* Pending: drop entries above after (raft.h step 3), durable or pending. */
void disk_truncate(struct disk *d, int64_t after);

/* Pending: appends a copy of e with its chain computed from the last entry.
 * False (nothing changed): e's zxid is not above the last zxid. */
bool disk_append(struct disk *d, const struct raft_entry *e);

/* Makes the pending write durable (fdatasync). */
void disk_sync(struct disk *d);

/* Whether a write is pending (entries or a truncation). */
bool disk_has_pending(const struct disk *d);

/* How many operations of the pending write follow its leading truncation
 * (if it has one): its entries and the truncations between them. With
 * one truncation at most, in front (a synchronous ready's write), that is
 * the number of pending entries. */
size_t disk_pending_len(const struct disk *d);

/* A crash: the pending write keeps nothing (keep < 0) or its leading
 * truncation (if any) plus its next keep operations, in the order they
 * were made (a torn tail). Returns how many pending entries reached the
 * durable log. */
size_t disk_crash(struct disk *d, long keep);

/* The log as a reader sees it now (disk_last's): n entries, durable and
 * pending, zxid-ordered; entry i by disk_view_at. */
size_t disk_view_len(const struct disk *d);
const struct disk_entry *disk_view_at(const struct disk *d, size_t i);

/* The driver's snapshot: the state machine at zxid (bytes) and the
 * membership there (conf), at the snapshot's zxid or a durable log entry;
 * drops the log through zxid. False (nothing changed): zxid is in neither. */
bool disk_compact(struct disk *d, int64_t zxid, const uint8_t *data, size_t len,
                  const struct raft_config *conf);

/* Likewise at a zxid the durable log does not hold yet, whose log chain
 * is chain (with the async log a state machine may have applied entries
 * the log thread has still to write; entries at or below the snapshot
 * are then not appended). zxid is not below the snapshot's; no write
 * pending. */
void disk_compact_ahead(struct disk *d, int64_t zxid, uint64_t chain, const uint8_t *data,
                        size_t len, const struct raft_config *conf);

/* The durable log entry at zxid, or NULL. */
const struct disk_entry *disk_find(const struct disk *d, int64_t zxid);

/* Fills boot from the durable state (no pending write may exist). The
 * entries are written to *entries (malloc'd, caller frees; their data
 * and boot->snap_config point into d). boot->hard_state.commit_zxid is
 * left as stored. */
bool disk_boot(const struct disk *d, struct raft_boot *boot, struct raft_entry **entries);

#endif
