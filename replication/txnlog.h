/*
 * txnlog — the write-ahead log of txns (DESIGN.md invariant 4: a write is
 * acknowledged only after its txn is durable), and the storage interface it
 * does all its I/O through.
 *
 * Layout (modelled on ZooKeeper's FileTxnLog): a log directory holds
 * segments named "log.<zxid of their first record, lower-case hex>". Each
 * segment opens with a 16-byte header (magic "LRCH", u32 version, u64 db id)
 * followed by records [u32 payload length][u32 CRC-32C of payload][payload],
 * big-endian, CRC by base_crc32c, payload = txn_encode() of one txn in the
 * segment's version (TXNLOG_VERSION for every segment written now; older
 * ones are read, see txn_decode_version). An ensemble member's log is its
 * Raft log: every entry is one record (txnlog_append_entry), no-ops and
 * membership changes included, so recovery rebuilds the core's log as it
 * was. Segments are preallocated
 * in chunks (ZooKeeper's FilePadding) so that fdatasync does not have to
 * write file-size metadata on every group commit; the zeros after the last
 * record mark the end of the data. A payload may itself end in zeros (every
 * closeSession does), so recovery frames records against the whole file,
 * never against its last nonzero byte.
 *
 * Recovery: a torn tail (a partial record or a CRC mismatch in the last
 * record(s) of the last segment, followed only by zeros or garbage) is
 * truncated, never replayed. Damage followed by a valid record, or damage in
 * any other segment, is refused with TXNLOG_ECORRUPT and nothing is deleted.
 * Replay also cuts the preallocated zeros after a segment's last record:
 * the writer never appends to an existing segment, so they would only make
 * every later recovery read them (each restart starts a new segment).
 *
 * Threading: a struct txnlog is owned by one thread (the sequencer or its log
 * flusher); nothing here locks. Replay (recovery) must run before a writer
 * opens the directory, never beside one: it may truncate bytes the writer
 * has written but not yet synced. Purge may run beside the writer on another
 * thread: it never touches the last segment. A struct storage may be shared
 * only if its implementation says so: the POSIX one may, the in-memory one
 * is single-threaded.
 *
 * Errors are negative: -errno from storage, TXNLOG_ECORRUPT / TXNLOG_EORDER
 * for log contents, which are outside the errno range.
 */
#ifndef LARCH_TXNLOG_H
#define LARCH_TXNLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "replication/raft.h"
#include "tree/tree.h"

/* ---- storage interface (SQLite test6.c style) -------------------------- */
struct storage;
struct storage_file {
    struct storage *st; /* set by the implementation's open */
};

#define STORAGE_CREATE 1  /* open: create when missing and truncate to zero bytes */
#define STORAGE_PRIVATE 2 /* open: owner-only permissions (0600): the file holds a secret */

/* list: called once per directory entry name (not "." or ".."); a nonzero
 * return stops the listing and is returned by storage_list. */
typedef int (*storage_name_fn)(void *arg, const char *name);

/* Every function returns 0 (or a count where stated) or -errno. */
struct storage_ops {
    int (*open)(struct storage *s, const char *path, int flags, struct storage_file **out);
    int (*pwrite)(struct storage_file *f, const void *buf, size_t len, uint64_t off);
    int (*pread)(struct storage_file *f, void *buf, size_t len, uint64_t off, size_t *got);
    int (*datasync)(struct storage_file *f);
    int (*truncate)(struct storage_file *f, uint64_t size);
    int (*preallocate)(struct storage_file *f, uint64_t off, uint64_t len);
    int (*size)(struct storage_file *f, uint64_t *out);
    int (*close)(struct storage_file *f);
    int (*list)(struct storage *s, const char *dir, storage_name_fn fn, void *arg);
    int (*unlink)(struct storage *s, const char *path);
    int (*rename)(struct storage *s, const char *from, const char *to);
    int (*sync_dir)(struct storage *s, const char *dir);
    int (*mkdirs)(struct storage *s, const char *dir); /* mkdir -p */
    void (*destroy)(struct storage *s);
};
struct storage {
    const struct storage_ops *ops;
};

/* Thin dispatchers over s->ops / f->st->ops. pwrite writes all of buf or
 * fails (a failed pwrite may have written a prefix). pread sets *got to the
 * bytes read, short only at end of file. preallocate makes [off, off+len)
 * allocated, reading as zeros where the file did not reach; it never changes
 * bytes already in the file. close releases f even when it fails. */
int storage_open(struct storage *s, const char *path, int flags, struct storage_file **out);
int storage_pwrite(struct storage_file *f, const void *buf, size_t len, uint64_t off);
int storage_pread(struct storage_file *f, void *buf, size_t len, uint64_t off, size_t *got);
int storage_datasync(struct storage_file *f);
int storage_truncate(struct storage_file *f, uint64_t size);
int storage_preallocate(struct storage_file *f, uint64_t off, uint64_t len);
int storage_size(struct storage_file *f, uint64_t *out);
int storage_close(struct storage_file *f);
int storage_list(struct storage *s, const char *dir, storage_name_fn fn, void *arg);
int storage_unlink(struct storage *s, const char *path);
int storage_rename(struct storage *s, const char *from, const char *to);
int storage_sync_dir(struct storage *s, const char *dir);
int storage_mkdirs(struct storage *s, const char *dir);
/* Replaces the file path (in dir) with buf as a whole: writes path.tmp
 * (opened with flags | STORAGE_CREATE), syncs it, renames it over path and
 * syncs dir, so a crash leaves the old contents or the new, never a mix.
 * 0, or -errno with the old file (if any) still in place. */
int storage_write_whole(struct storage *s, const char *dir, const char *path, const void *buf,
                        size_t len, int flags);
void storage_destroy(struct storage *s);

/* Real files (open/pwrite/fdatasync/posix_fallocate...). Thread-safe: it
 * holds no state. NULL on allocation failure. */
struct storage *storage_posix_new(void);

/* An in-memory file system for tests. Each file keeps its durable bytes and
 * the writes/resizes issued since its last datasync ("pending", in issue
 * order across all files). Creating, renaming and unlinking names is
 * durable at once (directory durability is not simulated); directories
 * exist implicitly (mkdirs succeeds). Single-threaded. */
struct storage *storage_mem_new(void);
/* Simulates power loss: pending operations are applied to the durable image
 * in the order they were issued until keep_bytes written bytes have been
 * applied; the write crossing that point is torn (its prefix lands, the
 * rest keeps the old bytes, or becomes garbage when garbage is true), every
 * later operation is lost. Then every file's contents become its durable
 * image. SIZE_MAX keeps everything, 0 drops every pending write. Open
 * handles stay valid and see the post-crash contents. */
void storage_mem_crash(struct storage *s, size_t keep_bytes, bool garbage);
/* Total size of all files; writes and preallocations that would take it
 * past bytes_max fail with -ENOSPC (a write lands up to the limit first).
 * UINT64_MAX removes the limit. */
void storage_mem_set_space(struct storage *s, uint64_t bytes_max);
uint64_t storage_mem_used(const struct storage *s);
/* The next count datasync calls fail with err (for example -EIO) and leave
 * the file's pending operations pending. */
void storage_mem_fail_sync(struct storage *s, int err, unsigned count);

/* ---- txn codec ------------------------------------------------------------ */
#define TXNLOG_ECORRUPT (-100001) /* damaged log contents other than a torn tail */
#define TXNLOG_EORDER (-100002)   /* zxids not strictly increasing */

/* Segment versions, which are the versions of the txn encoding: 3 adds
 * TXN_CONFIG records (a Raft membership; nothing else changed, so a
 * version-2 segment reads the same as version 3 and may precede one); 2
 * records a createSession's password (16 bytes after the op's fields); 1
 * had none. A TXN_CONFIG in a segment older than 3 is corruption, and a
 * binary of version 2 refuses a version-3 segment instead of misreading it. */
#define TXNLOG_VERSION 3u     /* what the writer writes */
#define TXNLOG_VERSION_MIN 1u /* the oldest replay reads */
#define TXNLOG_VERSION_CONFIG 3u /* the first that holds TXN_CONFIG records */

#define TXNLOG_RECORD_BYTES_MAX (32u << 20) /* payload bound, far above jute.maxbuffer */
#define TXNLOG_TXN_HEADER_BYTES 36u /* zxid, session, cxid, time, type, nops */
/* What a record leaves for a txn's ops: the bound the sequencer hands prep
 * (tree_prep_cfg.max_txn_bytes, counted with txn_op_encoded_bytes), so that
 * every txn prep accepts fits one record. The frame (length, CRC) is not
 * part of the payload bound and costs nothing here. */
#define TXNLOG_TXN_OPS_BYTES_MAX (TXNLOG_RECORD_BYTES_MAX - TXNLOG_TXN_HEADER_BYTES)

/* Appends the encoding of x (version TXNLOG_VERSION) to b, a base_buf the
 * caller owns and frees with base_buf_free. Big-endian. An op is its type,
 * client type and a u8 mask of the txn_op fields that differ from their
 * empty value, then those fields; a createSession op ends with its 16-byte
 * password (passwd, which other ops do not carry), so decode(encode(x))
 * equals x field by field. 0, -ENOMEM, -EMSGSIZE past a max the caller set
 * on b, or -EINVAL when x breaks a bound (ACL > TREE_ACL_MAX, encoding >
 * TXNLOG_RECORD_BYTES_MAX) or holds a createSession whose password is not
 * known (a format-1 txn: this format cannot say "none"); b is then left as
 * it was. Paths, data and ACL
 * scheme/id strings have no bound of their own: the record's covers them,
 * here and in txn_decode. A txn takes exactly TXNLOG_TXN_HEADER_BYTES plus
 * txn_op_encoded_bytes of each op (asserted on every encode). */
int txn_encode(struct base_buf *b, const struct txn *x);
/* The exact bytes txn_encode writes for op: the one place that knows the
 * encoding's per-field sizes. Pure, any thread; prep counts txns with it
 * (tree_prep_cfg.op_bytes) so that no txn it accepts is refused here. */
size_t txn_op_encoded_bytes(const struct txn_op *op);
/* Decodes exactly len bytes of version TXNLOG_VERSION into *out, which
 * then owns what txn_free frees (paths and data malloc'd, ACLs with one
 * reference; an ACL equal to world:anyone ALL is the shared
 * tree_acl_open()). 0, -ENOMEM, or -EBADMSG for malformed or out-of-bounds
 * input (*out is then empty). A TXN_CONFIG txn is well formed only as
 * txnlog_append_entry writes it: one TXN_CONFIG op holding nothing but data
 * that raft_config_decode accepts (txn_encode refuses any other with
 * -EINVAL, decode with -EBADMSG); a TXN_CONFIG op in any other txn, like a
 * TXN_NOOP op, is malformed. */
int txn_decode(const uint8_t *p, size_t len, struct txn *out);
/* The same for a record of the given version (TXNLOG_VERSION_MIN to
 * TXNLOG_VERSION, asserted), as a segment's header says. A version-1
 * createSession decodes with passwd_known false: tree_apply then stores a
 * session without a known password, for recovery to fill in
 * (tree_sessions_fill_passwd). */
int txn_decode_version(const uint8_t *p, size_t len, uint32_t version, struct txn *out);

/* ---- writer ---------------------------------------------------------------- */
struct txnlog_opts {
    uint64_t db_id;               /* written into segment headers */
    uint64_t segment_bytes_max;   /* roll to a new segment once a segment has this many bytes */
    uint64_t prealloc_bytes;      /* preallocation chunk */
};
#define TXNLOG_SEGMENT_BYTES_DEFAULT (64u << 20)
#define TXNLOG_PREALLOC_BYTES_DEFAULT (64u << 20)

struct txnlog;

/* Opens the log in dir (which must exist) through st, which must outlive
 * the log. Checks the last segment (and earlier ones while those hold no
 * record) as txnlog_replay does, without decoding: truncates a torn tail,
 * refuses damage with TXNLOG_ECORRUPT/TXNLOG_EORDER, and remembers the last
 * durable zxid. Like replay, it repairs only once every segment it read was
 * accepted, so it needs no replay before it; recovery replays the whole log
 * first, which checks the rest. Like ZooKeeper after a restart, the first
 * sync starts a new segment. opts NULL (or zero fields) means defaults. */
int txnlog_open(struct storage *st, const char *dir, const struct txnlog_opts *opts,
                struct txnlog **out);
/* Frees the log without any I/O: records appended but not synced are lost,
 * as on a crash. */
void txnlog_close(struct txnlog *log);
/* Buffers x (encoded now, so x may be freed on return). x->zxid must be
 * greater than every zxid appended before (TXNLOG_EORDER otherwise). 0,
 * -ENOMEM or -EINVAL (see txn_encode; never for a txn tree_prep accepted
 * under TXNLOG_TXN_OPS_BYTES_MAX). Nothing is durable until sync. */
int txnlog_append(struct txnlog *log, const struct txn *x);
/* Buffers a record whose body p[0..len) is already a txn_encode encoding
 * (an ensemble follower logs the leader's entries as they arrived). The
 * zxid is the encoding's first field and must exceed every zxid appended
 * before (TXNLOG_EORDER). The caller has checked that the bytes decode
 * (txn_decode): the log checks only the length (-EINVAL outside
 * [TXNLOG_TXN_HEADER_BYTES, TXNLOG_RECORD_BYTES_MAX]). 0, -ENOMEM, -EIO. */
int txnlog_append_encoded(struct txnlog *log, const uint8_t *p, size_t len);
/* Buffers one Raft log entry (the ensemble driver's one call; e is
 * borrowed). Each type has its own record, so that recovery gives the
 * entry back as it was (txnlog_entry_type):
 *   RAFT_ENTRY_NOOP    a TXN_NOOP txn (no data allowed);
 *   RAFT_ENTRY_DATA    data as txnlog_append_encoded; its zxid must be
 *                      e->zxid, and its txn type neither TXN_NOOP nor
 *                      TXN_CONFIG (those would come back as another type);
 *   RAFT_ENTRY_CONFIG  a TXN_CONFIG txn (zxid e->zxid, no session, cxid or
 *                      time; client type ZK_OP_RECONFIG) whose one op
 *                      carries data, which must decode (raft_config_decode).
 * 0, TXNLOG_EORDER, -ENOMEM, -EIO (the log is broken), or -EINVAL for an
 * entry that breaks the rules above (nothing is buffered then). */
int txnlog_append_entry(struct txnlog *log, const struct raft_entry *e);
/* The type of the entry a logged txn stands for, as txnlog_append_entry
 * wrote it: RAFT_ENTRY_NOOP for TXN_NOOP (no data), RAFT_ENTRY_CONFIG for
 * TXN_CONFIG (data: x->ops[0].data, x->ops[0].data_len bytes, the entry's
 * exactly), RAFT_ENTRY_DATA for every other (data: txn_encode of x). */
uint8_t txnlog_entry_type(const struct txn *x);
/* Group commit: writes every buffered record (rolling segments as needed)
 * and fdatasyncs. 0 when all of them are durable. On error (-errno) none of
 * this call's records is reported durable, they stay buffered, and the next
 * sync rewrites them from the last durable offset, so retrying after the
 * cause is gone yields each record exactly once. The caller must not reply
 * to (or reuse the zxids of) records whose sync failed. */
int txnlog_sync(struct txnlog *log);
/* How long the successful syncs took, writes and fdatasync together
 * (ZooKeeper's fsynctime): added into out. Any thread. */
void txnlog_sync_latency(const struct txnlog *log, struct base_latency_snapshot *out);
/* Highest zxid appended (buffered or durable); 0 for an empty log. */
int64_t txnlog_last_zxid(const struct txnlog *log);
/* Highest zxid known durable (after open's scan or a successful sync). */
int64_t txnlog_durable_zxid(const struct txnlog *log);
/* Drops every record with a zxid above zxid, buffered or durable: a Raft
 * follower cutting an uncommitted tail its new leader does not have. The
 * cut is durable when this returns 0: segments named above zxid are
 * unlinked newest first and the directory synced, then the segment holding
 * the cut is truncated and synced, so a crash at any point leaves a prefix
 * of the old log (still in order) and, once 0 is returned, no dropped
 * record can come back under the records appended next. The next sync
 * starts a new segment. On an error (-errno, or TXNLOG_ECORRUPT for a
 * segment that no longer checks) the log refuses appends and syncs with
 * -EIO from then on: what is on disk is some prefix of the old log, and
 * only a restart (open, which scans it) may say which. */
int txnlog_truncate_after(struct txnlog *log, int64_t zxid);

/* ---- reader / recovery -------------------------------------------------- */
/* Called once per record with zxid > from_zxid, in zxid order. x is freed by
 * replay after the call unless the callback takes its ops (sets x->ops to
 * NULL and x->nops to 0, then owning and txn_free'ing them). A nonzero
 * return stops replay and is returned. */
typedef int (*txnlog_replay_fn)(void *arg, struct txn *x);
struct txnlog_replay_stats {
    uint64_t records;     /* callbacks made */
    uint64_t torn_bytes;  /* nonzero bytes of torn tail removed (0: clean end) */
    int64_t last_zxid;    /* highest zxid in the log (0 when empty) */
};
/* Replays dir. Truncates a torn tail of the last segment (or removes a last
 * segment whose header never became durable, even an empty one) and reports
 * its nonzero bytes in stats->torn_bytes; refuses damage anywhere else with
 * TXNLOG_ECORRUPT and non-increasing zxids with TXNLOG_EORDER, deleting
 * nothing. Segments wholly before from_zxid are skipped unread. stats may
 * be NULL. */
int txnlog_replay(struct storage *st, const char *dir, int64_t from_zxid, txnlog_replay_fn fn,
                  void *arg, struct txnlog_replay_stats *stats);

/* Removes the segments whose records all precede keep_from_zxid (a later
 * segment starts at or before it); never the one holding it, never the
 * last. Returns how many were removed, or -errno. */
int txnlog_purge(struct storage *st, const char *dir, int64_t keep_from_zxid);

/* ---- term and vote (Raft's hard state) ---------------------------------- */
/* The file "raftstate" in dir: term, vote and a commit zxid (struct
 * raft_hard_state), 28 bytes with a CRC-32C. Written as a whole: a temporary
 * file is written and synced, renamed over the old one, and the directory
 * synced, so a crash leaves the old state or the new one, never a mix. */
#define TXNLOG_HARD_STATE_FILE "raftstate"
/* 0 once the new state is durable, else -errno (the old state, if any, is
 * still the one in place). */
int txnlog_hard_state_write(struct storage *st, const char *dir, const struct raft_hard_state *hs);
/* 0 and *hs, -ENOENT when there is no state yet (a new server), or
 * TXNLOG_ECORRUPT when the file is not one this code wrote. */
int txnlog_hard_state_read(struct storage *st, const char *dir, struct raft_hard_state *hs);

/* ---- a membership kept beside a snapshot ------------------------------------ */
/* The membership in effect at a snapshot's zxid (server/durability.c names
 * the file <snapshot>.config): "LRCF", u32 version (1), u64 zxid, u32
 * length, that many bytes of raft_config_encode, u32 CRC-32C of everything
 * before it; big-endian, written as a whole (storage_write_whole) like the
 * hard state. */
#define TXNLOG_CONFIG_FILE_SUFFIX ".config"
#define TXNLOG_CONFIG_FILE_BYTES_MAX (24u + RAFT_CONFIG_BYTES_MAX)
/* Encodes (zxid, c) into out; returns the length. */
size_t txnlog_config_file_encode(int64_t zxid, const struct raft_config *c,
                                 uint8_t out[TXNLOG_CONFIG_FILE_BYTES_MAX]);
/* 0 and *zxid, *out; TXNLOG_ECORRUPT when p is not such a file. */
int txnlog_config_file_decode(const uint8_t *p, size_t len, int64_t *zxid,
                              struct raft_config *out);
/* Replaces path (in dir) with (zxid, c), durably once 0 is returned; the
 * old file, if any, stays on failure (-errno). */
int txnlog_config_file_write(struct storage *st, const char *dir, const char *path, int64_t zxid,
                             const struct raft_config *c);
/* 0, -ENOENT (no file), -errno, or TXNLOG_ECORRUPT. */
int txnlog_config_file_read(struct storage *st, const char *path, int64_t *zxid,
                            struct raft_config *out);

#endif /* LARCH_TXNLOG_H */
