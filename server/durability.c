/*
 * durability.c — recovery, snapshots and purge over the storage interface.
 * See durability.h for the layout and the rules.
 */
#include "server/durability.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>

#include <urcu.h>

#define SUBDIR "larch"
#define SNAP_PREFIX "snapshot."
#define SNAP_WRITE_CHUNK (1u << 20)
#define SNAPS_MAX 4096
/* Memberships kept for the snapshots to come (see memb_note): the one in
 * effect at the oldest zxid a snapshot may still be taken at, and those
 * reported after it, which are the changes the tree has not reached yet
 * (a driver reports one as it applies it): one or two at a time. */
#define MEMB_MAX 8

/* A membership in effect from zxid on. */
struct memb {
    int64_t zxid;
    struct raft_config conf;
};

struct durability {
    char snap_dir[4200];
    char log_dir[4200];
    int32_t snap_count;
    int32_t retain;
    int32_t purge_interval_h;
    struct storage *st; /* the caller's */
    struct txnlog *log;
    struct tree *tree;
    uint8_t passwd_key[SEQ_PASSWD_KEY_BYTES];
    pthread_t thread;
    bool running;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    /* Held while a snapshot file is renamed into place or purged: a
     * snapshot from the leader and the snapshot thread's own never cross. */
    pthread_mutex_t files_lock;
    bool stop;
    /* A follower asked for a newer snapshot than the newest: take one now. */
    _Atomic bool wanted;
    /* This server's tree diverged from the leader's (a digest mismatch):
     * no snapshot of it is published until the leader's is installed. */
    _Atomic bool held;
    /* Snapshots installed from the leader: one taken across an install is
     * of the tree the install replaced, and is discarded. */
    _Atomic uint64_t installs;
    _Atomic int64_t last_snap_zxid;
    _Atomic uint64_t snapshots;
    struct base_latency snap_us; /* how long each kept snapshot took */
    _Atomic int64_t snap_error;
    /* Memberships reported (durability_note_membership, on the sequencer
     * thread) for the snapshot thread: memb[0..n_memb) in zxid order. lost:
     * one that a snapshot below memb[0] would need was dropped (MEMB_MAX),
     * so such a snapshot is not kept. pinned: a snapshot is being taken at
     * a zxid of at least pin, so the membership in effect at pin stays. */
    pthread_mutex_t memb_lock;
    struct memb *memb;
    size_t n_memb;
    bool memb_lost;
    bool memb_pinned;
    int64_t memb_pin;
};

static void dirs_of(const struct config *c, char *snap_dir, char *log_dir, size_t len)
{
    snprintf(snap_dir, len, "%s/" SUBDIR, c->data_dir);
    snprintf(log_dir, len, "%s/" SUBDIR, c->data_log_dir[0] ? c->data_log_dir : c->data_dir);
}

/* ---- files through the storage interface ------------------------------- */

static int read_file(struct storage *st, const char *path, uint8_t **out, size_t *len)
{
    struct storage_file *f;
    int rc = storage_open(st, path, 0, &f);
    if (rc != 0)
        return rc;
    uint64_t size = 0;
    rc = storage_size(f, &size);
    uint8_t *buf = rc == 0 ? malloc(size ? size : 1) : NULL;
    size_t got = 0;
    if (rc == 0 && !buf)
        rc = -ENOMEM;
    if (rc == 0)
        rc = storage_pread(f, buf, size, 0, &got);
    storage_close(f);
    if (rc == 0 && got != size)
        rc = -EIO;
    if (rc != 0) {
        free(buf);
        return rc;
    }
    *out = buf;
    *len = size;
    return 0;
}

/* Writes the key to path as a whole (a crash leaves the old file or the new
 * one, never a torn key), owner-only before the key goes in: whoever reads
 * it can forge every session's password. */
static int write_key(struct durability *d, const char *path)
{
    return storage_write_whole(d->st, d->snap_dir, path, d->passwd_key, sizeof d->passwd_key,
                               STORAGE_PRIVATE);
}

static int random_key(uint8_t *key, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = getrandom(key + got, len - got, 0);
        if (n < 0 && errno != EINTR)
            return -errno;
        got += n > 0 ? (size_t)n : 0;
    }
    return 0;
}

/* The session-password key (HMAC-SHA-256, 32 bytes): created once, kept
 * forever. New sessions' passwords derive from it (and are recorded), and
 * so do those of sessions from format-1 files, which recorded none: for
 * their clients the key must stay the same. A file of any other size is
 * replaced: the 8-byte secret of older versions (whose passwords could be
 * forged) or a damaged one. Only a missing file or a good one is read
 * without a log line; a read error refuses the start rather than replacing
 * a key that may be fine. */
static int load_secret(struct durability *d)
{
    char path[4300];
    snprintf(path, sizeof(path), "%s/secret", d->snap_dir);
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = read_file(d->st, path, &buf, &len);
    if (rc == 0 && len == sizeof d->passwd_key) {
        memcpy(d->passwd_key, buf, len);
        explicit_bzero(buf, len);
        free(buf);
        return 0;
    }
    if (rc != 0 && rc != -ENOENT)
        return rc;
    if (rc == 0) {
        base_log(BASE_LOG_WARN,
                 "larchd: %s holds %zu bytes, not a %zu-byte key%s: replacing it; "
                 "sessions without a recorded password cannot reattach (their clients "
                 "get a new session)",
                 path, len, sizeof d->passwd_key, len == 8 ? " (the old format)" : "");
        explicit_bzero(buf, len);
    }
    free(buf);
    rc = random_key(d->passwd_key, sizeof d->passwd_key);
    return rc != 0 ? rc : write_key(d, path);
}

/* ---- snapshot files ------------------------------------------------------- */

struct snap_list {
    int64_t zxid[SNAPS_MAX];
    size_t n;
};

/* Adds the zxid of a file named "snapshot.<hex><suffix>" to l. */
static void collect_named(struct snap_list *l, const char *name, const char *suffix)
{
    size_t plen = strlen(SNAP_PREFIX);
    if (strncmp(name, SNAP_PREFIX, plen) != 0 || l->n == SNAPS_MAX)
        return;
    char *end = NULL;
    unsigned long long z = strtoull(name + plen, &end, 16);
    if (end == name + plen || strcmp(end, suffix) != 0)
        return;
    l->zxid[l->n++] = (int64_t)z;
}

/* ".tmp" leftovers of a crash and membership files are not snapshots */
static int collect_snapshot(void *arg, const char *name)
{
    collect_named(arg, name, "");
    return 0;
}

static int by_zxid_desc(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

static int list_snapshots(struct storage *st, const char *dir, struct snap_list *l)
{
    l->n = 0;
    int rc = storage_list(st, dir, collect_snapshot, l);
    if (rc == 0 && l->n > 1)
        qsort(l->zxid, l->n, sizeof(l->zxid[0]), by_zxid_desc);
    return rc;
}

static void snap_path(const char *dir, int64_t zxid, char *out, size_t len)
{
    snprintf(out, len, "%s/" SNAP_PREFIX "%" PRIx64, dir, (uint64_t)zxid);
}

/* snapshot.<zxid>.config: the membership in effect at the snapshot's zxid
 * (txnlog.h has the format). collect_snapshot skips the name: nothing
 * follows the hex of a snapshot's own. */
static void sidecar_path(const char *dir, int64_t zxid, char *out, size_t len)
{
    snprintf(out, len, "%s/" SNAP_PREFIX "%" PRIx64 TXNLOG_CONFIG_FILE_SUFFIX, dir,
             (uint64_t)zxid);
}

/* The snapshot at zxid and then its membership file (missing is fine): in
 * this order, so that a crash between the two leaves a file without a
 * snapshot (purged later), never a snapshot without its membership. */
static int remove_snapshot(struct storage *st, const char *dir, int64_t zxid, bool verbose)
{
    char path[4400];
    snap_path(dir, zxid, path, sizeof(path));
    int rc = storage_unlink(st, path);
    if (rc != 0)
        return rc;
    if (verbose)
        printf("removed %s\n", path);
    sidecar_path(dir, zxid, path, sizeof(path));
    rc = storage_unlink(st, path);
    if (rc == 0 && verbose)
        printf("removed %s\n", path);
    return rc == -ENOENT ? 0 : rc;
}

/* ---- memberships for the snapshots to come ------------------------------- */

/* memb_lock held. Drops what no snapshot to come can need: memb[i] once
 * memb[i + 1] is in effect at the lowest zxid a snapshot may still be
 * taken at (the tree's zxid, or the pin of the one under way if lower). */
static void memb_prune(struct durability *d)
{
    int64_t floor = tree_last_zxid(d->tree);
    if (d->memb_pinned && d->memb_pin < floor)
        floor = d->memb_pin;
    size_t drop = 0;
    while (drop + 1 < d->n_memb && d->memb[drop + 1].zxid <= floor)
        drop++;
    if (drop == 0)
        return;
    memmove(d->memb, d->memb + drop, (d->n_memb - drop) * sizeof *d->memb);
    d->n_memb -= drop;
    d->memb_lost = true; /* below memb[0] nothing is known any more */
}

/* memb_lock held. Puts (zxid, conf) in zxid order; one already there for
 * zxid is replaced (the same committed entry reported again). */
static void memb_insert(struct durability *d, int64_t zxid, const struct raft_config *conf)
{
    size_t i = d->n_memb;
    while (i > 0 && d->memb[i - 1].zxid > zxid)
        i--;
    if (i > 0 && d->memb[i - 1].zxid == zxid) {
        d->memb[i - 1].conf = *conf;
        return;
    }
    if (d->n_memb == MEMB_MAX) {
        /* MEMB_MAX changes ahead of the tree (or of a snapshot under way):
         * the oldest goes, and a snapshot that needed it is not kept */
        d->memb_lost = true;
        if (i == 0)
            return; /* older than all of them: it is the one that goes */
        memmove(d->memb, d->memb + 1, (i - 1) * sizeof *d->memb);
        d->n_memb--;
        i--;
    }
    memmove(d->memb + i + 1, d->memb + i, (d->n_memb - i) * sizeof *d->memb);
    d->memb[i].zxid = zxid;
    d->memb[i].conf = *conf;
    d->n_memb++;
}

void durability_note_membership(struct durability *d, int64_t zxid, const struct raft_config *conf)
{
    BASE_ASSERT(zxid >= 0 && conf != NULL && conf->n_members > 0);
    pthread_mutex_lock(&d->memb_lock);
    memb_prune(d);
    memb_insert(d, zxid, conf);
    BASE_ASSERT(d->n_memb > 0 && d->n_memb <= MEMB_MAX);
    pthread_mutex_unlock(&d->memb_lock);
}

/* A snapshot of the leader's replaced the tree: its membership (NULL: the
 * configured one) is all that is known now. */
static void memb_reset(struct durability *d, int64_t zxid, const struct raft_config *conf)
{
    pthread_mutex_lock(&d->memb_lock);
    d->n_memb = 0;
    d->memb_lost = false;
    if (conf)
        memb_insert(d, zxid, conf);
    pthread_mutex_unlock(&d->memb_lock);
}

/* A snapshot is about to be taken: its zxid_start will be at least the
 * tree's zxid now, so the membership in effect there stays until
 * memb_unpin. One snapshot at a time (durability_snapshot's .tmp name). */
static void memb_pin(struct durability *d)
{
    pthread_mutex_lock(&d->memb_lock);
    BASE_ASSERT(!d->memb_pinned);
    d->memb_pinned = true;
    d->memb_pin = tree_last_zxid(d->tree);
    pthread_mutex_unlock(&d->memb_lock);
}

/* Ends the pin. zxid >= 0: the membership in effect at zxid (the newest
 * reported at or below it) into *out: 1; 0 when none was reported (the
 * configured one holds); -EAGAIN when the one it needs was dropped, or
 * zxid is below the pin (the tree was replaced meanwhile). */
static int memb_unpin(struct durability *d, int64_t zxid, struct raft_config *out)
{
    pthread_mutex_lock(&d->memb_lock);
    BASE_ASSERT(d->memb_pinned);
    d->memb_pinned = false;
    int rc = 0;
    if (zxid >= 0 && zxid < d->memb_pin) {
        rc = -EAGAIN;
    } else if (zxid >= 0) {
        size_t i = d->n_memb;
        while (i > 0 && d->memb[i - 1].zxid > zxid)
            i--;
        if (i > 0)
            *out = d->memb[i - 1].conf;
        rc = i > 0 ? 1 : d->memb_lost ? -EAGAIN : 0;
    }
    pthread_mutex_unlock(&d->memb_lock);
    return rc;
}

/* The membership kept with the snapshot at zxid: 0 and *out (malloc'd, the
 * caller's), or NULL when it has none (taken before memberships were kept,
 * or none was ever reported: the configured one holds); TXNLOG_ECORRUPT
 * when the file is damaged or names another zxid; -errno. */
static int read_sidecar(struct durability *d, int64_t zxid, struct raft_config **out)
{
    char path[4400];
    sidecar_path(d->snap_dir, zxid, path, sizeof(path));
    *out = NULL;
    struct raft_config *c = malloc(sizeof(*c));
    if (!c)
        return -ENOMEM;
    int64_t at = -1;
    int rc = txnlog_config_file_read(d->st, path, &at, c);
    if (rc == 0 && at != zxid)
        rc = TXNLOG_ECORRUPT;
    if (rc != 0) {
        free(c);
        return rc == -ENOENT ? 0 : rc;
    }
    *out = c;
    return 0;
}

/* Loads the snapshot at path (zxid from its name) and its membership into
 * *conf. The membership file is checked first: a snapshot whose
 * membership is damaged is not loaded (the tree stays as it was). */
static int load_snapshot(struct durability *d, const char *path, int64_t zxid,
                         struct tree_snap_info *info, struct raft_config **conf)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = read_sidecar(d, zxid, conf);
    if (rc == 0)
        rc = read_file(d->st, path, &buf, &len);
    if (rc == 0)
        rc = tree_snapshot_load(d->tree, buf, len, info);
    free(buf);
    if (rc != 0) {
        free(*conf);
        *conf = NULL;
    }
    return rc;
}

/* Loads the newest snapshot that validates, with the membership kept with
 * it (*conf, malloc'd, NULL when none). No snapshot at all is a fresh
 * start; snapshots of which none validates refuse the start (nothing is
 * deleted: an operator decides). */
static int load_newest_snapshot(struct durability *d, int64_t *zxid, struct raft_config **conf,
                                char *err, size_t errlen)
{
    struct snap_list *l = malloc(sizeof(*l));
    if (!l)
        return -ENOMEM;
    int rc = list_snapshots(d->st, d->snap_dir, l);
    *zxid = 0;
    *conf = NULL;
    for (size_t i = 0; rc == 0 && i < l->n; i++) {
        char path[4300];
        snap_path(d->snap_dir, l->zxid[i], path, sizeof(path));
        int64_t t0 = base_mono_ms();
        struct tree_snap_info info;
        int lrc = load_snapshot(d, path, l->zxid[i], &info, conf);
        if (lrc == 0) {
            base_log(BASE_LOG_INFO,
                     "larchd: loaded %s: %" PRIu64 " nodes, %" PRIu64 " sessions in %" PRId64
                     " ms%s",
                     path, info.node_count, info.session_count, base_mono_ms() - t0,
                     *conf ? " (with its membership)" : "");
            *zxid = info.zxid_start;
            free(l);
            return 0;
        }
        if (lrc == -ENOMEM) {
            rc = lrc;
            break;
        }
        base_log(BASE_LOG_WARN,
                 "larchd: snapshot %s (or its membership file) is not valid (error %d); "
                 "trying an older one", path, lrc);
    }
    if (rc == 0 && l->n > 0) {
        snprintf(err, errlen, "none of the %zu snapshots in %s is valid; refusing to start (nothing was deleted)",
                 l->n, d->snap_dir);
        rc = -EINVAL;
    }
    free(l);
    return rc;
}

/* What a replay does with each txn after the snapshot. Standalone: apply
 * all. In an ensemble (boot set): apply only what is known committed (up
 * to apply_until: the log may end in entries no quorum holds, which the
 * Raft core may yet truncate), and hand every entry to the core as its log. */
struct replay_ctx {
    struct durability *d;
    struct tree *tree;
    struct durability_boot *boot;
    int64_t apply_until;
    size_t cap;
    int err;
};

static int boot_add(struct replay_ctx *c, struct txn *x)
{
    struct durability_boot *b = c->boot;
    if (base_grow(&b->entries, &c->cap, b->n_entries + 1, sizeof *b->entries) != 0)
        return -ENOMEM;
    struct raft_entry e = { .zxid = x->zxid, .type = RAFT_ENTRY_NOOP };
    /* a format-1 createSession recorded no password: give it the one its
     * client holds (derived from this data dir's key, as format 1 did), so
     * that the entry can be encoded for the core like any other */
    for (uint32_t i = 0; i < x->nops; i++) {
        struct txn_op *op = &x->ops[i];
        if (op->type == TXN_CREATE_SESSION && !op->passwd_known) {
            if (!seq_passwd_derive(c->d->passwd_key, x->session_id, op->passwd))
                return -EIO;
            op->passwd_known = true;
        }
    }
    e.type = txnlog_entry_type(x);
    if (e.type == RAFT_ENTRY_CONFIG) {
        /* the entry's bytes exactly, as txnlog_append_entry logged them */
        uint8_t *p = malloc((size_t)x->ops[0].data_len);
        if (!p)
            return -ENOMEM;
        memcpy(p, x->ops[0].data, (size_t)x->ops[0].data_len);
        e.data = p; /* owned by the boot: durability_boot_free */
        e.len = (size_t)x->ops[0].data_len;
    } else if (e.type == RAFT_ENTRY_DATA) {
        struct base_buf enc = { 0 };
        int rc = txn_encode(&enc, x);
        if (rc != 0) {
            base_buf_free(&enc);
            return rc;
        }
        e.data = enc.data; /* owned by the boot: durability_boot_free */
        e.len = enc.len;
    }
    BASE_ASSERT((e.type == RAFT_ENTRY_NOOP) == (e.len == 0));
    b->entries[b->n_entries++] = e;
    return 0;
}

/* A membership change the tree has applied on recovery (committed): the
 * snapshots taken from now on keep it. */
static int note_applied_config(struct durability *d, const struct txn *x)
{
    struct raft_config *c = malloc(sizeof(*c));
    if (!c)
        return -ENOMEM;
    int rc = raft_config_decode(x->ops[0].data, (size_t)x->ops[0].data_len, c);
    BASE_ASSERT(rc == RAFT_OK); /* txn_decode checked it */
    durability_note_membership(d, x->zxid, c);
    free(c);
    return 0;
}

static int replay_one(void *arg, struct txn *x)
{
    struct replay_ctx *c = arg;
    /* Idempotent: txns the fuzzy snapshot already holds change nothing. */
    if (!c->boot || x->zxid <= c->apply_until) {
        (void)tree_apply(c->tree, x, NULL, NULL, NULL);
        tree_grow_index(c->tree); /* a log of creates fills the table fast */
    }
    if (c->boot) {
        int rc = 0;
        if (x->zxid <= c->apply_until && txnlog_entry_type(x) == RAFT_ENTRY_CONFIG)
            rc = note_applied_config(c->d, x);
        if (rc == 0)
            rc = boot_add(c, x);
        if (rc != 0) {
            c->err = rc;
            return rc;
        }
    }
    return 0;
}

void durability_boot_free(struct durability_boot *b)
{
    for (size_t i = 0; b->entries && i < b->n_entries; i++)
        free((void *)b->entries[i].data);
    free(b->entries);
    free(b->snap_config);
    *b = (struct durability_boot){ 0 };
}

/* An ensemble member's term and vote; none yet on a new member. */
static int read_hard_state(struct durability *d, struct durability_boot *boot, char *err,
                           size_t errlen)
{
    int rc = txnlog_hard_state_read(d->st, d->snap_dir, &boot->hard_state);
    if (rc == -ENOENT) {
        boot->hard_state = (struct raft_hard_state){ 0 };
        return 0;
    }
    if (rc != 0)
        snprintf(err, errlen, "reading term and vote (%s/%s): %s; refusing to start "
                 "(nothing was deleted)", d->snap_dir, TXNLOG_HARD_STATE_FILE,
                 rc == TXNLOG_ECORRUPT ? "the file is damaged" : strerror(-rc));
    return rc;
}

/* Sessions recovered from format-1 snapshots and log records have no
 * recorded password: those versions derived it from this data dir's key
 * whenever it was needed. Deriving it once more, now, gives each the
 * password its client holds, so clients of the old version reattach. */
static int derive_old_passwd(void *arg, int64_t id, uint8_t out[TREE_PASSWD_BYTES])
{
    const struct durability *d = arg;
    return seq_passwd_derive(d->passwd_key, id, out) ? 0 : -EIO;
}

static int fill_old_passwords(struct durability *d, char *err, size_t errlen)
{
    uint64_t filled = 0;
    int rc = tree_sessions_fill_passwd(d->tree, derive_old_passwd, d, &filled);
    if (rc != 0) {
        snprintf(err, errlen, "deriving the passwords of sessions from format-1 files failed");
        return rc;
    }
    if (filled > 0)
        base_log(BASE_LOG_INFO,
                 "larchd: %" PRIu64 " sessions came from format-1 files without a recorded "
                 "password: derived from the key in %s, as before", filled, d->snap_dir);
    return 0;
}

static void restart_session_clock(void *arg, struct tree_session *s)
{
    /* ZooKeeper's SessionTracker restarts every timeout at recovery. */
    atomic_store_explicit(&s->last_seen_ms, *(int64_t *)arg, memory_order_relaxed);
}

static int recover(struct durability *d, struct durability_boot *boot, char *err, size_t errlen)
{
    int64_t t0 = base_mono_ms();
    int64_t snap_zxid = 0;
    struct raft_config *snap_config = NULL;
    int rc = load_newest_snapshot(d, &snap_zxid, &snap_config, err, errlen);
    if (rc != 0) {
        if (!err[0])
            snprintf(err, errlen, "loading snapshots from %s: %s", d->snap_dir, strerror(-rc));
        return rc;
    }
    struct replay_ctx ctx = { .d = d, .tree = d->tree, .boot = boot };
    if (!boot)
        free(snap_config); /* standalone: one server, no membership to keep */
    if (boot) {
        boot->snap_config = snap_config; /* owned by the boot */
        if (snap_config)
            durability_note_membership(d, snap_zxid, snap_config);
        rc = read_hard_state(d, boot, err, errlen);
        if (rc != 0)
            return rc;
        boot->snap_zxid = snap_zxid;
        ctx.apply_until = boot->hard_state.commit_zxid > snap_zxid ? boot->hard_state.commit_zxid
                                                                   : snap_zxid;
    }
    struct txnlog_replay_stats rs;
    rc = txnlog_replay(d->st, d->log_dir, snap_zxid, replay_one, &ctx, &rs);
    if (rc != 0 && ctx.err != 0) {
        snprintf(err, errlen, "collecting the txn log in %s for the ensemble: %s", d->log_dir,
                 strerror(-ctx.err));
        return rc;
    }
    if (boot)
        boot->log_end_zxid = rs.last_zxid;
    if (rc != 0) {
        snprintf(err, errlen, "replaying the txn log in %s: %s; refusing to start (nothing was deleted)",
                 d->log_dir, rc == TXNLOG_ECORRUPT ? "corrupt record before the end of the log"
                             : rc == TXNLOG_EORDER ? "zxids out of order" : strerror(-rc));
        return rc;
    }
    if (rs.torn_bytes)
        base_log(BASE_LOG_WARN,
                 "larchd: txn log had a torn tail: dropped %" PRIu64 " bytes after zxid 0x%" PRIx64,
                 rs.torn_bytes, (uint64_t)rs.last_zxid);
    rc = fill_old_passwords(d, err, errlen);
    if (rc != 0)
        return rc;
    int64_t now = base_mono_ms();
    tree_session_each(d->tree, restart_session_clock, &now);
    atomic_store(&d->last_snap_zxid, snap_zxid);
    base_log(BASE_LOG_INFO,
             "larchd: recovered to zxid 0x%" PRIx64 " (snapshot 0x%" PRIx64 " + %" PRIu64
             " txns) in %" PRId64 " ms",
             (uint64_t)tree_last_zxid(d->tree), (uint64_t)snap_zxid, rs.records, now - t0);
    return 0;
}

static int open_dirs(const struct config *c, struct storage *st, struct tree *t,
                     struct durability_boot *boot, struct durability **out, char *err,
                     size_t errlen);

int durability_open(const struct config *c, struct storage *st, struct tree *t,
                    struct durability **out, char *err, size_t errlen)
{
    return open_dirs(c, st, t, NULL, out, err, errlen);
}

int durability_open_member(const struct config *c, struct storage *st, struct tree *t,
                           struct durability **out, struct durability_boot *boot, char *err,
                           size_t errlen)
{
    *boot = (struct durability_boot){ 0 };
    int rc = open_dirs(c, st, t, boot, out, err, errlen);
    if (rc != 0)
        durability_boot_free(boot);
    return rc;
}

const char *durability_state_dir(const struct durability *d)
{
    return d->snap_dir;
}

const char *durability_log_dir(const struct durability *d)
{
    return d->log_dir;
}

int durability_last_snapshot(struct durability *d, int64_t *zxid, int64_t *mtime_s)
{
    char path[4300];
    struct stat st;
    int64_t z = atomic_load(&d->last_snap_zxid);
    snap_path(d->snap_dir, z, path, sizeof path);
    if (stat(path, &st) != 0)
        return -errno;
    *zxid = z;
    *mtime_s = (int64_t)st.st_mtime;
    return 0;
}

static int open_dirs(const struct config *c, struct storage *st, struct tree *t,
                     struct durability_boot *boot, struct durability **out, char *err,
                     size_t errlen)
{
    err[0] = '\0';
    struct durability *d = calloc(1, sizeof(*d));
    if (!d) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    d->tree = t;
    d->st = st;
    d->snap_count = c->snap_count;
    d->retain = c->autopurge_snap_retain < 3 ? 3 : c->autopurge_snap_retain;
    d->purge_interval_h = c->autopurge_interval_h;
    pthread_mutex_init(&d->lock, NULL);
    pthread_mutex_init(&d->files_lock, NULL);
    pthread_mutex_init(&d->memb_lock, NULL);
    pthread_cond_init(&d->wake, NULL);
    dirs_of(c, d->snap_dir, d->log_dir, sizeof(d->snap_dir));
    d->memb = calloc(MEMB_MAX, sizeof(*d->memb));
    int rc = d->memb ? storage_mkdirs(st, d->snap_dir) : -ENOMEM;
    if (rc == 0)
        rc = storage_mkdirs(st, d->log_dir);
    if (rc != 0) {
        snprintf(err, errlen, "cannot create %s / %s: %s", d->snap_dir, d->log_dir, strerror(-rc));
        goto fail;
    }
    rc = load_secret(d);
    if (rc != 0) {
        snprintf(err, errlen, "cannot keep the session key in %s: %s", d->snap_dir, strerror(-rc));
        goto fail;
    }
    rc = recover(d, boot, err, errlen);
    if (rc != 0)
        goto fail;
    struct txnlog_opts opts = { .prealloc_bytes = (uint64_t)c->prealloc_kb * 1024 };
    rc = txnlog_open(d->st, d->log_dir, &opts, &d->log);
    if (rc != 0) {
        snprintf(err, errlen, "opening the txn log in %s: error %d", d->log_dir, rc);
        goto fail;
    }
    *out = d;
    return 0;
fail:
    durability_free(d);
    return rc;
}

struct txnlog *durability_log(struct durability *d)
{
    return d->log;
}

void durability_passwd_key(const struct durability *d, uint8_t out[SEQ_PASSWD_KEY_BYTES])
{
    memcpy(out, d->passwd_key, SEQ_PASSWD_KEY_BYTES);
}

/* ---- writing a snapshot --------------------------------------------------- */

struct snap_writer {
    struct storage_file *f;
    uint64_t off;
    uint8_t *buf;
    size_t len;
};

static int writer_flush(struct snap_writer *w)
{
    if (w->len == 0)
        return 0;
    int rc = storage_pwrite(w->f, w->buf, w->len, w->off);
    w->off += w->len;
    w->len = 0;
    return rc;
}

static int writer_out(void *arg, const void *bytes, size_t len)
{
    struct snap_writer *w = arg;
    const uint8_t *p = bytes;
    while (len) {
        size_t n = SNAP_WRITE_CHUNK - w->len < len ? SNAP_WRITE_CHUNK - w->len : len;
        memcpy(w->buf + w->len, p, n);
        w->len += n;
        p += n;
        len -= n;
        if (w->len == SNAP_WRITE_CHUNK) {
            int rc = writer_flush(w);
            if (rc != 0)
                return rc;
        }
    }
    return 0;
}

/* files_lock held. Makes the membership file of the snapshot at zxid say
 * conf, durably. conf NULL: none was ever reported (the configured
 * membership holds), and a file an earlier try left goes. */
static int put_sidecar(struct durability *d, int64_t zxid, const struct raft_config *conf)
{
    char path[4400];
    sidecar_path(d->snap_dir, zxid, path, sizeof(path));
    if (conf)
        return txnlog_config_file_write(d->st, d->snap_dir, path, zxid, conf);
    int rc = storage_unlink(d->st, path);
    if (rc == -ENOENT)
        return 0;
    return rc != 0 ? rc : storage_sync_dir(d->st, d->snap_dir);
}

/* files_lock held. When rc (the write so far) is 0: writes the membership
 * file (conf), then renames the written and synced tmp to snapshot.<zxid>
 * and syncs the directory, so a crash leaves the old set or the new file
 * whole, and a published snapshot never lacks its membership. On any
 * failure tmp goes. 0 or -errno. */
static int publish_snapshot(struct durability *d, int rc, const char *tmp, int64_t zxid,
                            const struct raft_config *conf)
{
    char path[4300];
    snap_path(d->snap_dir, zxid, path, sizeof(path));
    if (rc == 0)
        rc = put_sidecar(d, zxid, conf);
    if (rc == 0)
        rc = storage_rename(d->st, tmp, path);
    if (rc == 0)
        rc = storage_sync_dir(d->st, d->snap_dir);
    if (rc != 0)
        storage_unlink(d->st, tmp);
    return rc;
}

/* Writes the tree to tmp and datasyncs it. 0 or -errno. */
static int write_snapshot_tmp(struct durability *d, const char *tmp, struct tree_snap_info *info)
{
    struct snap_writer w = { .buf = malloc(SNAP_WRITE_CHUNK) };
    if (!w.buf)
        return -ENOMEM;
    /* private: a snapshot holds every session's password */
    int rc = storage_open(d->st, tmp, STORAGE_CREATE | STORAGE_PRIVATE, &w.f);
    if (rc != 0) {
        free(w.buf);
        return rc;
    }
    rc = tree_snapshot_write(d->tree, writer_out, &w, info);
    if (rc == 0)
        rc = writer_flush(&w);
    if (rc == 0)
        rc = storage_datasync(w.f);
    storage_close(w.f);
    free(w.buf);
    return rc;
}

/* Writes snapshot.<zxid_start> through a .tmp file: datasync, the
 * membership file (the one in effect at zxid_start), rename, sync the
 * directory, so a crash leaves either the old set or the new file whole. */
int durability_snapshot(struct durability *d)
{
    char tmp[4300];
    snprintf(tmp, sizeof(tmp), "%s/" SNAP_PREFIX "tmp", d->snap_dir);
    struct tree_snap_info info = { 0 };
    int64_t t0 = base_mono_ms();
    uint64_t installs = atomic_load(&d->installs);
    memb_pin(d);
    int rc = write_snapshot_tmp(d, tmp, &info);
    pthread_mutex_lock(&d->files_lock);
    /* a snapshot from the leader installed meanwhile replaced what this one
     * holds; a diverged tree is never kept */
    if (rc == 0 && (atomic_load(&d->installs) != installs || atomic_load(&d->held) ||
                    atomic_load(&d->last_snap_zxid) > info.zxid_start))
        rc = -EAGAIN;
    struct raft_config conf;
    int have = memb_unpin(d, rc == 0 ? info.zxid_start : -1, &conf);
    if (rc == 0 && have < 0)
        rc = have; /* its membership is not known: not kept, the next one is */
    rc = publish_snapshot(d, rc, tmp, info.zxid_start, have > 0 ? &conf : NULL);
    if (rc != 0) {
        pthread_mutex_unlock(&d->files_lock);
        return rc;
    }
    atomic_store(&d->last_snap_zxid, info.zxid_start);
    atomic_store(&d->wanted, false);
    pthread_mutex_unlock(&d->files_lock);
    base_latency_add(&d->snap_us, (uint64_t)(base_mono_ms() - t0) * 1000);
    atomic_fetch_add(&d->snapshots, 1);
    base_log(BASE_LOG_INFO,
             "larchd: snapshot 0x%" PRIx64 ": %" PRIu64 " nodes, %" PRIu64
             " bytes in %" PRId64 " ms",
             (uint64_t)info.zxid_start, info.node_count, info.size_bytes, base_mono_ms() - t0);
    return 0;
}

static int purge_dirs(struct storage *st, const char *snap_dir, const char *log_dir, int32_t retain, bool verbose);

int64_t durability_newest_snapshot(struct durability *d)
{
    return atomic_load(&d->last_snap_zxid);
}

int durability_read_snapshot(struct durability *d, int64_t zxid, uint8_t **data, size_t *len)
{
    char path[4300];
    snap_path(d->snap_dir, zxid, path, sizeof(path));
    return read_file(d->st, path, data, len);
}

/* files_lock held. Removes the snapshots above zxid: this server's own,
 * of a tree that diverged from the leader's (a resync installs an older
 * snapshot of the leader's than the newest it had). */
static int remove_snapshots_after(struct durability *d, int64_t zxid)
{
    struct snap_list *l = malloc(sizeof(*l));
    if (!l)
        return -ENOMEM;
    int rc = list_snapshots(d->st, d->snap_dir, l);
    for (size_t i = 0; rc == 0 && i < l->n && l->zxid[i] > zxid; i++) {
        rc = remove_snapshot(d->st, d->snap_dir, l->zxid[i], false);
        if (rc == 0)
            base_log(BASE_LOG_INFO, "larchd: removed snapshot 0x%" PRIx64 " of the diverged tree",
                     (uint64_t)l->zxid[i]);
    }
    if (rc == 0)
        rc = storage_sync_dir(d->st, d->snap_dir);
    free(l);
    return rc;
}

/* Written through its own temporary name (the snapshot thread's may be in
 * use), its membership file written, then renamed into place and the
 * directory synced: once this returns 0 a restart recovers from it, with
 * conf. Newer snapshots (a resync's) go first, then the older ones and the
 * log segments before it: the log below zxid may hold entries this server
 * took from a leader that lost, so no older snapshot may be replayed
 * through it. */
int durability_install_snapshot(struct durability *d, int64_t zxid, const uint8_t *data,
                                size_t len, const struct raft_config *conf)
{
    char tmp[4300];
    snprintf(tmp, sizeof(tmp), "%s/" SNAP_PREFIX "leader.tmp", d->snap_dir);
    struct storage_file *f;
    int rc = storage_open(d->st, tmp, STORAGE_CREATE | STORAGE_PRIVATE, &f);
    if (rc != 0)
        return rc;
    for (size_t off = 0; rc == 0 && off < len; off += SNAP_WRITE_CHUNK) {
        size_t n = len - off < SNAP_WRITE_CHUNK ? len - off : SNAP_WRITE_CHUNK;
        rc = storage_pwrite(f, data + off, n, off);
    }
    if (rc == 0)
        rc = storage_datasync(f);
    storage_close(f);
    pthread_mutex_lock(&d->files_lock);
    atomic_fetch_add(&d->installs, 1);
    if (rc == 0)
        rc = remove_snapshots_after(d, zxid);
    rc = publish_snapshot(d, rc, tmp, zxid, conf);
    if (rc != 0) {
        pthread_mutex_unlock(&d->files_lock);
        return rc;
    }
    /* the tree is the leader's at zxid now: what was reported for the old
     * one is no longer what the snapshots to come start from */
    memb_reset(d, zxid, conf);
    atomic_store(&d->last_snap_zxid, zxid);
    atomic_store(&d->held, false);
    atomic_fetch_add(&d->snapshots, 1);
    int prc = purge_dirs(d->st, d->snap_dir, d->log_dir, 1, false);
    pthread_mutex_unlock(&d->files_lock);
    base_log(BASE_LOG_INFO, "larchd: snapshot 0x%" PRIx64 " from the leader: %zu bytes, durable",
             (uint64_t)zxid, len);
    if (prc != 0) /* the snapshot is in place; what is left over only takes space */
        base_log(BASE_LOG_WARN, "larchd: removing the snapshots and log before it failed: %s",
                 strerror(-prc));
    return 0;
}

static int64_t ops_newest(void *arg)
{
    return durability_newest_snapshot(arg);
}

static int ops_read(void *arg, int64_t zxid, uint8_t **data, size_t *len)
{
    return durability_read_snapshot(arg, zxid, data, len);
}

static int ops_persist(void *arg, int64_t zxid, const uint8_t *data, size_t len,
                       const struct raft_config *conf)
{
    return durability_install_snapshot(arg, zxid, data, len, conf);
}

static void ops_membership(void *arg, int64_t zxid, const struct raft_config *conf)
{
    durability_note_membership(arg, zxid, conf);
}

void durability_want_snapshot(struct durability *d)
{
    if (atomic_exchange(&d->wanted, true))
        return;
    pthread_mutex_lock(&d->lock);
    pthread_cond_signal(&d->wake);
    pthread_mutex_unlock(&d->lock);
}

void durability_hold_snapshots(struct durability *d, bool hold)
{
    atomic_store(&d->held, hold);
}

static void ops_want(void *arg)
{
    durability_want_snapshot(arg);
}

static void ops_hold(void *arg)
{
    durability_hold_snapshots(arg, true);
}

static void ops_hold_end(void *arg)
{
    durability_hold_snapshots(arg, false);
}

const struct seq_snap_ops *durability_snap_ops(void)
{
    static const struct seq_snap_ops ops = {
        .newest = ops_newest,
        .read = ops_read,
        .persist = ops_persist,
        .membership = ops_membership,
        .want = ops_want,
        .hold = ops_hold,
        .hold_end = ops_hold_end,
    };
    return &ops;
}

static int collect_sidecar(void *arg, const char *name)
{
    collect_named(arg, name, TXNLOG_CONFIG_FILE_SUFFIX);
    return 0;
}

/* Membership files below the oldest snapshot kept whose snapshot is gone
 * (a crash between the two unlinks of remove_snapshot, or between a
 * membership file and its snapshot's rename). Only below it: one above
 * may belong to a snapshot about to be renamed into place. */
static int remove_orphan_sidecars(struct storage *st, const char *dir, int64_t below,
                                  bool verbose)
{
    struct snap_list *l = malloc(sizeof(*l));
    if (!l)
        return -ENOMEM;
    l->n = 0;
    int rc = storage_list(st, dir, collect_sidecar, l);
    for (size_t i = 0; rc == 0 && i < l->n; i++) {
        if (l->zxid[i] >= below)
            continue;
        char path[4400];
        sidecar_path(dir, l->zxid[i], path, sizeof(path));
        rc = storage_unlink(st, path);
        if (rc == 0 && verbose)
            printf("removed %s\n", path);
        rc = rc == -ENOENT ? 0 : rc;
    }
    free(l);
    return rc;
}

/* Keeps the newest `retain` snapshots (with their membership files) and
 * the log segments they need. */
static int purge_dirs(struct storage *st, const char *snap_dir, const char *log_dir, int32_t retain, bool verbose)
{
    struct snap_list *l = malloc(sizeof(*l));
    if (!l)
        return -ENOMEM;
    int rc = list_snapshots(st, snap_dir, l);
    size_t removed = 0;
    for (size_t i = (size_t)retain; rc == 0 && i < l->n; i++) {
        rc = remove_snapshot(st, snap_dir, l->zxid[i], verbose);
        removed += rc == 0;
    }
    size_t kept = l->n < (size_t)retain ? l->n : (size_t)retain;
    if (rc == 0 && kept > 0)
        rc = remove_orphan_sidecars(st, snap_dir, l->zxid[kept - 1], verbose);
    int logs = 0;
    if (rc == 0 && l->n >= (size_t)retain) {
        /* Replay from the oldest kept snapshot needs the txns after it. */
        logs = txnlog_purge(st, log_dir, l->zxid[(size_t)retain - 1] + 1);
        if (logs < 0)
            rc = logs;
    }
    if (rc == 0 && verbose)
        printf("kept %zu snapshots; removed %zu snapshots and %d log segments\n",
               l->n < (size_t)retain ? l->n : (size_t)retain, removed, logs);
    free(l);
    return rc;
}

/* About how many txns lie between zxids from and to. A zxid's high word is
 * the epoch (an ensemble's term), so across epochs only the counter of the
 * newer one counts: a new term must not look like 2^32 txns and trigger a
 * snapshot by itself. */
static int64_t txns_since(int64_t from, int64_t to)
{
    if ((to >> 32) == (from >> 32))
        return to - from;
    return to & 0xffffffff;
}

static void *snapshot_thread(void *arg)
{
    struct durability *d = arg;
    pthread_setname_np(pthread_self(), "larch-snap");
    rcu_register_thread();
    int64_t last_purge = base_mono_ms();
    pthread_mutex_lock(&d->lock);
    while (!d->stop) {
        struct timespec until = base_deadline(CLOCK_REALTIME, 1000);
        pthread_cond_timedwait(&d->wake, &d->lock, &until);
        if (d->stop)
            break;
        pthread_mutex_unlock(&d->lock);
        int64_t applied = tree_last_zxid(d->tree);
        bool due = txns_since(atomic_load(&d->last_snap_zxid), applied) >= d->snap_count ||
                   (atomic_load(&d->wanted) && applied > atomic_load(&d->last_snap_zxid));
        if (due && !atomic_load(&d->held)) {
            int rc = durability_snapshot(d);
            if (rc == -EAGAIN) /* not a failure: the tree is the leader's snapshot now */
                base_log(BASE_LOG_INFO,
                         "larchd: snapshot discarded: the leader's snapshot replaced the "
                         "tree while it was taken, the tree diverged, or the membership "
                         "at its zxid is not known");
            else
                atomic_store(&d->snap_error, rc);
            if (rc != 0 && rc != -EAGAIN)
                base_log(BASE_LOG_ERROR, "larchd: snapshot failed: %s (retrying later)",
                         strerror(-rc));
        }
        int64_t interval_ms = (int64_t)d->purge_interval_h * 3600 * 1000;
        if (interval_ms > 0 && base_mono_ms() - last_purge >= interval_ms) {
            last_purge = base_mono_ms();
            pthread_mutex_lock(&d->files_lock);
            int rc = purge_dirs(d->st, d->snap_dir, d->log_dir, d->retain, false);
            pthread_mutex_unlock(&d->files_lock);
            if (rc != 0)
                base_log(BASE_LOG_ERROR, "larchd: autopurge failed: %s", strerror(-rc));
        }
        pthread_mutex_lock(&d->lock);
    }
    pthread_mutex_unlock(&d->lock);
    rcu_unregister_thread();
    return NULL;
}

int durability_start(struct durability *d)
{
    int rc = pthread_create(&d->thread, NULL, snapshot_thread, d);
    if (rc != 0)
        return -rc;
    d->running = true;
    return 0;
}

void durability_stop(struct durability *d)
{
    if (!d || !d->running)
        return;
    pthread_mutex_lock(&d->lock);
    d->stop = true;
    pthread_cond_signal(&d->wake);
    pthread_mutex_unlock(&d->lock);
    pthread_join(d->thread, NULL);
    d->running = false;
}

void durability_free(struct durability *d)
{
    if (!d)
        return;
    durability_stop(d);
    if (d->log)
        txnlog_close(d->log);
    pthread_mutex_destroy(&d->lock);
    pthread_mutex_destroy(&d->files_lock);
    pthread_mutex_destroy(&d->memb_lock);
    pthread_cond_destroy(&d->wake);
    free(d->memb);
    free(d);
}

void durability_get_stats(struct durability *d, struct durability_stats *out)
{
    out->last_snapshot_zxid = atomic_load(&d->last_snap_zxid);
    out->snapshots = atomic_load(&d->snapshots);
    out->last_snapshot_error = atomic_load(&d->snap_error);
    memset(&out->snapshot_time, 0, sizeof out->snapshot_time);
    base_latency_read(&d->snap_us, &out->snapshot_time);
}

int durability_purge(const struct config *c, struct storage *st)
{
    if (!c->data_dir[0]) {
        base_log(BASE_LOG_ERROR, "larchd: --purge needs dataDir (--data-dir or zoo.cfg)");
        return -1;
    }
    char snap_dir[4200], log_dir[4200];
    dirs_of(c, snap_dir, log_dir, sizeof(snap_dir));
    int32_t retain = c->autopurge_snap_retain < 3 ? 3 : c->autopurge_snap_retain;
    int rc = purge_dirs(st, snap_dir, log_dir, retain, true);
    if (rc != 0) {
        base_log(BASE_LOG_ERROR, "larchd: purge of %s failed: %s", snap_dir, strerror(-rc));
        return -1;
    }
    return 0;
}
