/*
 * durability — larchd's data directories: recovery at start, the txn log the
 * sequencer makes durable, fuzzy snapshots every snapCount txns, and purge.
 *
 * Layout: snapshots in <dataDir>/larch/snapshot.<zxid hex>, each with the
 * ensemble membership in effect at its zxid beside it in
 * snapshot.<zxid hex>.config (txnlog.h: the format; none when no
 * membership was ever reported: standalone, or a snapshot of older code),
 * the log in <dataLogDir>/larch/log.<zxid hex> (a subdirectory of our own,
 * so a ZooKeeper data dir is never misread), and <dataDir>/larch/secret, the
 * 32-byte HMAC key this server derives new sessions' passwords from (an
 * 8-byte secret from older versions is replaced, with a log line).
 * Passwords are recorded in createSession txns and snapshots, so a client
 * reattaches after a restart (or, in an ensemble, through another server)
 * with the password it was given; only sessions recovered from format-1
 * files, which did not record them, get theirs from this key again.
 *
 * Recovery (durability_open): load the newest snapshot that validates, then
 * replay the log after its zxid (apply is idempotent, so the fuzzy snapshot
 * converges); a torn log tail is truncated with a log line saying how many
 * bytes went; corruption in the middle of the log, or snapshots none of
 * which validates, refuse the start with a message and delete nothing.
 * Last, sessions that came without a password (a format-1 snapshot or log
 * segment) are given the one the key derives, before anything is served.
 *
 * Memberships: the ensemble driver reports each membership change as it
 * applies it (durability_note_membership); a snapshot keeps the newest one
 * reported at or below its zxid, written and synced before the snapshot is
 * renamed into place, so no published snapshot lacks it. A snapshot whose
 * membership file is damaged is not valid (an older one is tried).
 *
 * Threading: durability_open runs on main before any thread starts; the
 * snapshot/purge thread (durability_start) reads the tree under RCU only;
 * the membership reports come from the sequencer thread, under a lock of
 * their own.
 */
#ifndef LARCH_SERVER_DURABILITY_H
#define LARCH_SERVER_DURABILITY_H

#include <stdbool.h>
#include <stdint.h>

#include "replication/replication.h"
#include "replication/txnlog.h"
#include "server/config.h"
#include "tree/tree.h"

struct durability;

/* Recovers t (fresh from tree_new) from c's data dirs in st and opens the
 * log there. st is the caller's and outlives d (storage_posix_new for
 * larchd, the in-memory, fault-injecting storage in tests); everything
 * durability reads or writes goes through it. Writes the reason to err on
 * failure. */
int durability_open(const struct config *c, struct storage *st, struct tree *t,
                    struct durability **out, char *err, size_t errlen);
/* What an ensemble member's Raft core starts from (raft_boot), recovered
 * by durability_open_member: term and vote (none on a new member), the
 * snapshot's zxid and membership, and every log entry after it, committed
 * or not, of the type it was logged as (txnlog_append_entry): DATA entries'
 * data are txn_encode bytes, CONFIG entries' the raft_config_encode bytes
 * logged, both owned here; no-ops have none. */
struct durability_boot {
    struct raft_hard_state hard_state;
    int64_t snap_zxid;
    /* the membership kept with the snapshot (raft_boot.snap_config; owned
     * here); NULL: the snapshot has none (no snapshot, one from older code,
     * or no membership was ever reported: the configured one holds) */
    struct raft_config *snap_config;
    struct raft_entry *entries;
    size_t n_entries;
    /* the last zxid in the log: the tree may already hold txns up to here
     * (a fuzzy snapshot), so applying them again must be tolerated */
    int64_t log_end_zxid;
};
/* As durability_open, for a member of an ensemble: the tree gets the
 * snapshot plus only the log entries known committed (up to the larger of
 * the snapshot's zxid and the hard state's commit zxid); the rest is for
 * the Raft core, which commits or truncates it. The snapshot's membership
 * and the CONFIG entries the tree applied count as reported
 * (durability_note_membership): the driver need not report them again.
 * Free *boot with durability_boot_free once the core has copied it. */
int durability_open_member(const struct config *c, struct storage *st, struct tree *t,
                           struct durability **out, struct durability_boot *boot, char *err,
                           size_t errlen);
void durability_boot_free(struct durability_boot *b);
/* The directory of the term/vote file (<dataDir>/larch), which holds the
 * snapshots too. */
const char *durability_state_dir(const struct durability *d);
/* The directory of the txn log (<dataLogDir>/larch). */
const char *durability_log_dir(const struct durability *d);
/* The newest snapshot as ZooKeeper's lsnp reports it: its zxid, and its
 * file's modification time in seconds since the epoch (at start, the
 * snapshot recovered from; then the last one taken or installed). -ENOENT
 * when there is none, or it was purged between the two reads. Any thread:
 * a stat(2) outside the storage interface, for reporting only. */
int durability_last_snapshot(struct durability *d, int64_t *zxid, int64_t *mtime_s);
struct txnlog *durability_log(struct durability *d);
/* Copies the session-password key (seq_cfg.passwd_key). */
void durability_passwd_key(const struct durability *d, uint8_t out[SEQ_PASSWD_KEY_BYTES]);
/* Takes a snapshot now, on the calling thread (a registered RCU thread),
 * with the membership in effect at its zxid: 0 or -errno (-EAGAIN: not
 * kept, see the snapshot thread's log line; the next one may be). One
 * caller at a time: the snapshot thread calls it every snapCount txns;
 * tests over single-threaded storage call it instead of starting the
 * thread. */
int durability_snapshot(struct durability *d);
/* For the ensemble driver (struct seq_snap_ops), on the sequencer thread:
 * the zxid of the newest snapshot on disk (0: none); the bytes of the one
 * at zxid (malloc'ed, the caller's); and a snapshot from the leader made
 * this server's newest, durably, with its membership conf (NULL: the
 * configured one) and with the older snapshots and log segments removed.
 * 0 or -errno. */
int64_t durability_newest_snapshot(struct durability *d);
int durability_read_snapshot(struct durability *d, int64_t zxid, uint8_t **data, size_t *len);
int durability_install_snapshot(struct durability *d, int64_t zxid, const uint8_t *data,
                                size_t len, const struct raft_config *conf);
/* The membership conf (copied) is in effect from zxid on: a CONFIG entry
 * at zxid committed. Report it before the tree applies that entry: every
 * snapshot taken at zxid or later keeps it (or a newer one), and one taken
 * below keeps the one before. Only committed memberships: a report is a
 * fact no later report contradicts (one for a zxid already reported
 * replaces it). Keeps what a snapshot to come may need, at most a handful
 * (MEMB_MAX in durability.c: past that a snapshot that would need a
 * dropped one is discarded and retried, never kept with the wrong one).
 * Sequencer thread (any thread: it locks). */
void durability_note_membership(struct durability *d, int64_t zxid,
                                const struct raft_config *conf);
/* A follower needs a newer snapshot than the newest: the snapshot thread
 * takes one at once (returns at once; any thread). */
void durability_want_snapshot(struct durability *d);
/* hold: this server's tree diverged from the leader's: no snapshot of it
 * is published (one under way is discarded) until install_snapshot puts
 * the leader's in place or this is called with !hold. */
void durability_hold_snapshots(struct durability *d, bool hold);
/* The ones above as the driver takes them (arg: the struct durability). */
const struct seq_snap_ops *durability_snap_ops(void);
/* Starts the snapshot/purge thread (0 or -errno); stop joins it. */
int durability_start(struct durability *d);
void durability_stop(struct durability *d);
/* Frees d; the log must no longer be in use (the sequencer is stopped). */
void durability_free(struct durability *d);

struct durability_stats {
    int64_t last_snapshot_zxid;
    uint64_t snapshots;
    int64_t last_snapshot_error; /* -errno, 0 when the last one succeeded */
    struct base_latency_snapshot snapshot_time; /* of the snapshots kept (ZooKeeper's snapshottime) */
};
void durability_get_stats(struct durability *d, struct durability_stats *out);

/* larchd --purge: keeps autopurge.snapRetainCount snapshots (at least 3) and
 * the log they need, removes the rest, prints what it did. 0 or -1. */
int durability_purge(const struct config *c, struct storage *st);

#endif /* LARCH_SERVER_DURABILITY_H */
