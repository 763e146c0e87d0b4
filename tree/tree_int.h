/*
 * tree_int.h — private to tree/: the znode storage shared by tree.c (storage,
 * read side, digest), prep.c (PrepRequestProcessor), txn.c (apply) and
 * session.c. Nothing outside tree/ includes this file.
 *
 * Storage model (DESIGN.md invariant 1):
 *  - Every path has one stable `struct znode` in a global cds_lfht keyed by
 *    the full path. A znode points at its current `struct zver`.
 *  - A zver is immutable once published. It holds the stat, a refcounted
 *    data blob, the ACL (tree_acl refcount) and a refcounted copy-on-write
 *    array of child znodes. A change builds a new zver that shares the
 *    unchanged parts by reference, publishes it with a release store and
 *    retires the old one with call_rcu. The callback drops the references,
 *    on liburcu's call_rcu thread, hence the atomic refcounts.
 *  - A reader loads znode->ver once (acquire) and takes every field from that
 *    one version, so it never sees a mix of two versions.
 *
 * Stat inside a zver is ZooKeeper's StatPersisted, not the client Stat:
 * cversion counts child creations (what sequential names and CreateTxn's
 * parentCVersion use) and ephemeral_owner keeps the container/TTL encodings.
 * zver_client_stat() converts to what ZooKeeper's DataNode.copyStat reports.
 *
 * Threads: the lfht and znode->ver are read under rcu_read_lock by any
 * registered thread; everything else in struct tree (the tmaps, the pending
 * overlay) belongs to the sequencer thread.
 */
#ifndef LARCH_TREE_INT_H
#define LARCH_TREE_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <urcu.h>
#include <urcu/rculfhash.h>

#include "tree/tree.h"

/* ---- ThreadSanitizer annotations -----------------------------------------
 * liburcu 0.13 is not instrumented, so TSan cannot see that a call_rcu
 * callback runs after every reader left its read-side section, nor that the
 * callback runs after the call_rcu that queued it. We tell it: read functions
 * release a global grace token (tree_tsan_reader_done) and retire paths
 * release the retired object; callbacks acquire both before freeing.
 * Compiles to nothing without -fsanitize=thread. */
#if defined(__SANITIZE_THREAD__)
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define TREE_TSAN_RELEASE(p) __tsan_release((void *)(p))
#define TREE_TSAN_ACQUIRE(p) __tsan_acquire((void *)(p))
#else
#define TREE_TSAN_RELEASE(p) ((void)(p))
#define TREE_TSAN_ACQUIRE(p) ((void)(p))
#endif
void tree_tsan_reader_done(void);   /* end of every read function */
void tree_tsan_grace_acquire(void); /* start of every call_rcu callback */

/* Leaves a read-side section the tree code entered itself (the sequencer
 * is a reader too: apply reads a removed znode until it unlocks). */
static inline void tree_read_unlock(void)
{
    tree_tsan_reader_done();
    rcu_read_unlock();
}

/* cds_lfht_for_each_entry applies container_of to the NULL that ends the
 * walk (undefined behaviour UBSan reports); walk the nodes instead. */
#define TREE_LFHT_FOREACH(ht, iter, node)                                                  \
    for (cds_lfht_first((ht), (iter)); ((node) = cds_lfht_iter_get_node(iter)) != NULL;    \
         cds_lfht_next((ht), (iter)))

/* ---- hashing ---------------------------------------------------------------- */
uint64_t tree_hash_bytes(const void *p, size_t len);
uint64_t tree_hash_mix(uint64_t h, uint64_t v);
/* The node table's (not the digest's) hash of a path. */
uint64_t tree_path_hash(const char *path, size_t len);

/* ---- tmap: a small open-addressing map, sequencer-private ------------------
 * Keys are byte strings copied into the map; values are opaque pointers the
 * caller owns. Linear probing with backward-shift deletion (no tombstones). */
struct tmap_ent {
    char *key; /* NULL: empty slot; NUL-terminated copy of the key */
    size_t len;
    uint64_t hash;
    void *val;
};
struct tmap {
    struct tmap_ent *slots;
    size_t cap; /* 0 or a power of two */
    size_t count;
};
/* A pointer to the value slot of key, or NULL when absent. */
void **tmap_get(const struct tmap *m, const void *key, size_t len);
/* Inserts or replaces. On replace *old (when not NULL) receives the previous
 * value; on insert *old is NULL. Returns 0, or -1 on allocation failure. */
int tmap_put(struct tmap *m, const void *key, size_t len, void *val, void **old);
/* Removes key; returns its value through *val. False when absent. */
bool tmap_del(struct tmap *m, const void *key, size_t len, void **val);
/* Empties the map, calling free_val(val) for each entry when not NULL. */
void tmap_clear(struct tmap *m, void (*free_val)(void *));
/* Keys of the map, sorted bytewise, in a new array of borrowed pointers
 * (valid until the map changes). NULL with *n = 0 when empty or on OOM
 * (*oom says which). */
const char **tmap_sorted_keys(const struct tmap *m, size_t *n, bool *oom);

/* ---- node storage ----------------------------------------------------------- */
struct zdata {
    atomic_long refs;
    int32_t len;
    uint8_t bytes[];
};
/* A version's children: the first count entries of a store that lists of
 * the same parent share (tree.c, "children"). Immutable once published. */
struct zkids_store;
struct zkids {
    atomic_long refs;
    uint32_t count;
    struct znode **items; /* the store's; items[0..count) are this list */
    struct zkids_store *store;
};
struct zver {
    struct zk_stat st;  /* StatPersisted semantics, see the top of this file */
    struct zdata *data; /* NULL: null data */
    struct tree_acl *acl;
    struct zkids *kids; /* NULL: no children */
    struct rcu_head rcu;
};
struct znode {
    struct cds_lfht_node hnode;
    struct zver *ver; /* release-stored by the sequencer, acquire-loaded by readers */
    struct rcu_head rcu;
    size_t path_len;
    size_t name_off; /* the name is path + name_off */
    char path[];     /* NUL-terminated full path */
};

/* Sequencer-private record of what the batch being prepared will have done
 * to one path (ZooKeeper's ChangeRecord). */
struct prec {
    bool exists;
    struct zk_stat st;    /* StatPersisted, num_children kept current */
    struct tree_acl *acl; /* one reference owned (NULL when !exists) */
};
struct undo_ent {
    char *path;
    size_t len;
    struct prec *old; /* NULL: the path had no pending record */
};

struct tree {
    /* Replaced as a whole by tree_replace (a snapshot from the leader):
     * read them through tree_nodes_ht / tree_sessions_ht. */
    struct cds_lfht *nodes;    /* path -> struct znode */
    struct cds_lfht *sessions; /* id -> struct sess */
    /* Even; odd while tree_replace swaps the contents, and 2 higher after
     * each swap: a fuzzy snapshot walk that saw it change mixed two trees. */
    _Atomic uint64_t generation;
    /* The sum of every node's digest, kept up by tree_insert, tree_remove
     * and znode_publish (sequencer only; any thread reads it). */
    _Atomic uint64_t digest_sum;
    _Atomic int64_t last_zxid;
    _Atomic int64_t node_count;
    _Atomic int64_t data_bytes;
    _Atomic int64_t ephemeral_count;
    _Atomic int64_t session_count;

    /* Hints: a direct-mapped table from a path's hash to the node last
     * inserted with it, sized with the node table. A lookup tries its
     * hint first (one load and a compare, where the table's bucket walk
     * is a cache miss in a large tree) and the table when the hint names
     * another path or a removed node. A removal clears its node's hint
     * before the node's grace period starts, so a reader only ever finds
     * a node it may dereference. Replaced as a whole (release) by the
     * sequencer; the old one freed after a grace period. */
    struct tree_hints *hints;

    /* sequencer only */
    unsigned long index_buckets; /* what tree_grow_index last sized t->nodes to */
    struct tmap ephemerals; /* owner session id (8 bytes) -> struct tmap * of paths */
    struct tmap containers; /* set of container paths */
    struct tmap ttls;       /* set of TTL node paths */
    struct tmap pending;    /* path -> struct prec * (the prep overlay) */
    struct tmap pending_sessions; /* id -> (void *)PS_LIVE or PS_CLOSED */
    struct undo_ent *undo;  /* the multi being prepared: overlay entries to restore */
    size_t undo_len, undo_cap;
    bool undo_active;
};

enum pending_session_state { PS_LIVE = 1, PS_CLOSED = 2 };

/* The hash tables as of now. Acquire pairs with tree_replace's release
 * store: a reader that sees the new table sees it built. A reader keeps
 * the table it loaded for its whole read-side section (tree_replace frees
 * the old one only after a grace period). */
static inline struct cds_lfht *tree_nodes_ht(const struct tree *t)
{
    return __atomic_load_n(&t->nodes, __ATOMIC_ACQUIRE);
}
static inline struct cds_lfht *tree_sessions_ht(const struct tree *t)
{
    return __atomic_load_n(&t->sessions, __ATOMIC_ACQUIRE);
}

/* A session as stored: the public part plus its hash node. */
struct sess_auth; /* session.c: what tree_session_publish_auth copied */

struct sess {
    struct tree_session pub;
    struct cds_lfht_node hnode;
    struct rcu_head rcu;
    _Atomic(struct sess_auth *) auth; /* NULL: nothing published */
};

/* ---- zver / znode helpers (tree.c) ------------------------------------------ */
static inline struct zver *znode_ver(const struct znode *n)
{
    /* Acquire pairs with znode_publish's release: everything the sequencer
     * wrote into the version (and into the znode before its first publish)
     * is visible. Same guarantee as rcu_dereference, and visible to TSan. */
    return __atomic_load_n(&n->ver, __ATOMIC_ACQUIRE);
}
static inline const char *znode_name(const struct znode *n) { return n->path + n->name_off; }

/* rcu_read_lock held. The znode for path or NULL. */
struct znode *tree_lookup(const struct tree *t, const char *path, size_t len);
/* Length of the parent of path ("/" for top-level names and for "/" itself). */
size_t tree_parent_len(const char *path, size_t len);
bool tree_owner_is_session(int64_t owner);
bool tree_owner_is_ttl(int64_t owner);

struct zdata *zdata_new(const uint8_t *p, int32_t len); /* len -1: returns NULL (null data) */
struct zdata *zdata_ref(struct zdata *d);
void zdata_unref(struct zdata *d);
struct zkids *zkids_ref(struct zkids *k);
void zkids_unref(struct zkids *k);
/* A list of count children in a store of its own, for the caller to fill
 * (items[0..count)); NULL on OOM. */
struct zkids *zkids_new(uint32_t count);
/* k with child added (amortised O(1): in place at the end of k's store
 * when k is its longest list) / removed (a copy); NULL on OOM (*oom set) or, for
 * remove, when the result is empty (*oom false). Removing a child k does not
 * list returns another reference to k. */
struct zkids *zkids_with(const struct zkids *k, struct znode *child, bool *oom);
struct zkids *zkids_without(const struct zkids *k, const struct znode *child, bool *oom);

/* A new unpublished version copying v's parts (taking references). */
struct zver *zver_clone(const struct zver *v);
/* Frees a version that was never published (drops its references). */
void zver_free_now(struct zver *v);
/* Publishes nv as n's version (n is in t's table) and retires the old one
 * after a grace period; t's running digest follows. */
void znode_publish(struct tree *t, struct znode *n, struct zver *nv);
/* A new znode for path holding v (not yet in the table). NULL on OOM. */
struct znode *znode_new(const char *path, size_t len, struct zver *v);
/* Adds n to the table (rcu_read_lock held). */
void tree_insert(struct tree *t, struct znode *n);
/* Removes n from the table and frees it and its version after a grace period. */
void tree_remove(struct tree *t, struct znode *n);
/* The client-visible Stat of a version (DataNode.copyStat). */
void zver_client_stat(const struct zver *v, struct zk_stat *out);
int64_t zver_data_len(const struct zver *v);

/* ---- sequencer-side indexes (tree.c) --------------------------------------- */
/* Records a node's owner in the ephemeral/container/TTL indexes. 0 or -1 (OOM). */
int tree_index_add(struct tree *t, const char *path, size_t len, int64_t owner);
void tree_index_del(struct tree *t, const char *path, size_t len, int64_t owner);
/* The set of paths a session owns, or NULL. */
struct tmap *tree_owned_paths(const struct tree *t, int64_t owner);

/* ---- sessions (session.c) --------------------------------------------------- */
struct sess *tree_sess_lookup(const struct tree *t, int64_t id);
/* Adds a session (no-op when present) with passwd, TREE_PASSWD_BYTES bytes,
 * or NULL when no password was recorded (format-1 records). 0 or -1 (OOM).
 * rcu_read_lock held. */
int tree_sess_add(struct tree *t, int64_t id, int32_t timeout_ms, int64_t now_ms,
                  const uint8_t *passwd);
/* Removes and frees after a grace period (no-op when absent). rcu_read_lock held. */
void tree_sess_remove(struct tree *t, int64_t id);
/* Frees every session at once (tree_free: no readers). */
void tree_sess_free_all(struct tree *t);

/* ---- prep overlay (prep.c) -------------------------------------------------- */
void tree_pending_free(struct tree *t);

/* ---- txns (txn.c) ------------------------------------------------------------- */
/* Frees what op owns and zeroes it. */
void tree_txn_op_clear(struct txn_op *op);

/* ---- snapshots (tree.c) ---------------------------------------------------------- */
/* The per-node term of tree_digest over loose parts (st.num_children as given). */
uint64_t tree_digest_parts(const char *path, size_t path_len, const struct zk_stat *st,
                           const struct zdata *data, const struct tree_acl *acl);

#endif /* LARCH_TREE_INT_H */
