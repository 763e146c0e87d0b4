/*
 * tree — the replicated state machine: znode tree, sessions, ACLs, txns, watches.
 *
 * Threading (DESIGN.md invariants 1 and 3):
 *  - Read functions (tree_get_*, tree_exists_*, tree_session_find, tree_acl_*)
 *    may run on any thread that is registered with liburcu (urcu-memb flavour,
 *    <urcu.h>) and holds rcu_read_lock(). Pointers they hand out stay valid
 *    until that thread calls rcu_read_unlock().
 *  - Write functions (tree_prep_*, tree_apply, tree_session_* that mutate) run
 *    on exactly one thread, the sequencer. They never block readers: every
 *    change publishes a new immutable node version with rcu_assign_pointer and
 *    retires the old one with call_rcu, so a reader sees either the old or the
 *    new version of a znode, never a mix.
 *  - A watch_table is owned by one thread (a dataplane worker) and is not
 *    shared: no locks.
 *
 * Writes follow ZooKeeper's PrepRequestProcessor/FinalRequestProcessor split:
 * tree_prep validates a client request against the tree plus the changes of
 * earlier ops in the same batch (the "pending changes" overlay) and produces a
 * txn; tree_apply makes a txn visible. Apply of a txn that prep accepted
 * cannot fail, and applying the same txn twice has no further effect on a
 * tree that already holds it (replay from the log is idempotent).
 *
 * This module does no I/O and reads no clock: times arrive in arguments.
 */
#ifndef LARCH_TREE_H
#define LARCH_TREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/proto.h"

/* ---- limits ----------------------------------------------------------- */
/* Paths have no length limit of their own (ZooKeeper has none but the frame
 * size, jute.maxbuffer): every function here takes any length, keeps paths
 * in heap copies, and walks them without recursion. */
#define TREE_ACL_MAX 1024           /* entries in one ACL list */
#define TREE_MULTI_OPS_MAX 10000    /* ops in one multi */
#define TREE_TTL_MAX 0xFFFFFFFFFFLL /* ZooKeeper's EphemeralType.MAX_TTL */
#define TREE_PASSWD_BYTES 16        /* a session password, as a ConnectResponse carries it */

/* ephemeralOwner encodings for non-session owners (ZooKeeper's EphemeralType). */
#define TREE_OWNER_CONTAINER ((int64_t)INT64_MIN)           /* 0x8000000000000000 */
#define TREE_OWNER_TTL_MASK ((int64_t)0xFF00000000000000ULL) /* | ttl in low 40 bits */

struct tree;

/* ---- ACLs -------------------------------------------------------------- */
/* An immutable, reference-counted ACL list. Shared by node versions.
 *
 * Lifetime rule that lets any thread drop a reference without waiting for a
 * grace period: a published node version (struct zver) drops its reference
 * only in the call_rcu callback that frees the retired version (tree.c,
 * zver_free_cb / znode_free_cb), never while readers may still load it.
 * Readers hold ACL pointers without a reference, but only ones they loaded
 * from a version inside their rcu_read_lock section. So when a holder of a
 * counted reference (a snapshot frame, an event batch, a txn) drops the last
 * one, every version that held the list was retired a grace period ago and
 * no reader can still see the pointer: freeing at once is safe. */
struct tree_acl {
    int32_t count;
    struct tree_acl_entry {
        int32_t perms;
        char *scheme; /* NUL-terminated, owned */
        char *id;     /* NUL-terminated, owned */
    } *items;
    /* private */
    unsigned long refs_;
};

/* What a connection has proven about itself: (scheme, id) pairs added by
 * addauth ("digest") or a SASL login ("sasl"), plus its peer address (for
 * the "ip" scheme). */
struct tree_authid {
    const char *scheme;
    const char *id;
};
/* A peer's address as bytes (network order), for "ip" ACLs where it comes
 * as bytes and formatting it per request would cost more than the check. */
struct tree_addr {
    uint8_t len; /* 4 (IPv4) or 16 (IPv6); 0: no address */
    uint8_t b[16];
};
struct tree_auth {
    const struct tree_authid *ids;
    int32_t count;
    const char *peer_ip; /* dotted quad or IPv6 text, for "ip" ACLs (or see peer_addr) */
    bool super;          /* authenticated as the super user: every check passes */
    /* The server runs ZooKeeper's SASLAuthenticationProvider (authProvider.N):
     * without it, as in ZooKeeper, "sasl" ACLs are invalid and match no one,
     * and "auth" does not expand to sasl identities. A server setting the
     * caller copies into every tree_auth it builds. */
    bool sasl_provider;
    const struct tree_addr *peer_addr; /* the peer's address as bytes, when peer_ip is NULL */
};

/* Authentication providers beyond world, ip and digest (ZooKeeper's
 * ProviderRegistry): an ACL of a scheme without one is invalid. */
#define TREE_ACL_X509 1u /* X509AuthenticationProvider: ids are subjects' RFC 2253 text */

/* Validates and normalises a client ACL the way ZooKeeper's fixupACL does:
 * "auth" entries become one entry per digest, sasl (with sasl_provider) or
 * x509 id the caller has (none -> ZK_EINVALIDACL; the entry's own id is
 * ignored, null included, as kazoo's CREATOR_ALL_ACL sends it), "world"
 * needs id "anyone", "digest" ids must be user:hash, "ip" ids must parse as
 * an address or CIDR, "sasl" ids (sasl_provider only) must be what Kerberos
 * would take as a principal (no '@', or name[/host]@REALM), "x509" ids
 * (with TREE_ACL_X509 in providers) must parse as Java's X500Principal
 * does; a null scheme, a scheme without a provider or an empty list is
 * ZK_EINVALIDACL. Where ZooKeeper 3.8
 * dereferences a null string (a null id for world/digest/ip; in its
 * duplicate removal, a null scheme or id compared with an earlier entry of
 * the same perms) it answers MARSHALLINGERROR, and so does this:
 * ZK_EMARSHALLINGERROR. Entries are checked in order, duplicates first.
 * On success *out is a new list with one reference owned by the caller. */
int tree_acl_from_request(const struct zk_aclvec *req, const struct tree_auth *auth,
                          uint32_t providers, struct tree_acl **out);
/* True when auth grants perm on a node with this ACL (a NULL ACL allows all). */
bool tree_acl_permits(const struct tree_acl *acl, int32_t perm, const struct tree_auth *auth);
/* Encodes acl as a jute ACL vector. */
void tree_acl_put(struct zk_wbuf *w, const struct tree_acl *acl);
struct tree_acl *tree_acl_ref(struct tree_acl *acl);
/* Any thread. Frees at zero, at once: safe for any counted reference by the
 * lifetime rule above (a list a reader could still hold has a version's
 * reference left). Dropping a reference the caller never took is a bug. */
void tree_acl_unref(struct tree_acl *acl);
/* The open ACL (world:anyone, ALL). A shared static list: ref/unref are no-ops on it. */
struct tree_acl *tree_acl_open(void);

/* ---- paths -------------------------------------------------------------- */

/* ---- lifecycle ------------------------------------------------------------- */
/* A new tree holding "/" and "/zookeeper" (and "/zookeeper/quota", "/zookeeper/config")
 * as stock ZooKeeper has them. Returns NULL on allocation failure. */
struct tree *tree_new(void);
/* Frees everything. No reader may be inside a read-side section on this tree. */
void tree_free(struct tree *t);
/* Gives t the whole contents of src (nodes, sessions, indexes, counters,
 * last zxid) and src the old contents of t: an ensemble member installing
 * the leader's snapshot (loaded into src with tree_snapshot_load) under
 * readers that keep reading t. Sequencer thread; src unshared; t's prep
 * overlay is dropped. Readers see the old contents or the new, per table:
 * one that is inside a read-side section may still be reading the old
 * ones, so src may be freed (tree_free) only after a grace period
 * (synchronize_rcu, outside any read-side section). Cannot fail. */
void tree_replace(struct tree *t, struct tree *src);
/* Grows the path index when the nodes have outrun it (to twice their
 * number, at each doubling), and the prefetch hints with it (a pointer
 * per bucket, filled from the index: tree_prefetch_paths); cheap when they
 * have not (a load and a compare). The writer (the sequencer role) calls
 * it outside any read-side section: resizing waits for grace periods. */
void tree_grow_index(struct tree *t);
/* The same for nodes about to be added (a snapshot being loaded); a
 * no-op inside a read-side section. */
void tree_reserve_index(struct tree *t, int64_t nodes);
/* Changes whenever tree_replace runs (odd while it runs): a fuzzy
 * snapshot walk that sees it change has mixed two trees. */
uint64_t tree_generation(const struct tree *t);

/* ---- read side (rcu_read_lock held) ------------------------------------- */
/* A node as a reader sees it: every pointer belongs to one immutable version. */
struct tree_view {
    struct zk_stat stat;
    const uint8_t *data; /* NULL when data_len == -1 (null data) */
    int32_t data_len;
    const struct tree_acl *acl;
};
/* ZK_OK and *out filled, or ZK_ENONODE. */
int tree_get(const struct tree *t, const char *path, size_t len, struct tree_view *out);
/* Calls fn once per child name (not NUL-terminated), in the order stock
 * ZooKeeper would list them is not promised; the set is one consistent version.
 * Returns ZK_OK (view filled as by tree_get) or ZK_ENONODE. */
typedef void (*tree_child_fn)(void *arg, const char *name, size_t len);
int tree_get_children(const struct tree *t, const char *path, size_t len, struct tree_view *out,
                      tree_child_fn fn, void *arg);
/* Prefetching for a batch of reads (the UDP path's bursts). When the tree
 * is much larger than the cache, a read waits on about four dependent
 * cache misses (the table's bucket, the node, its version, its data), one
 * read after another. tree_prefetch_paths takes the paths of a batch of
 * reads about to be served and starts loading those lines stage by stage
 * over the whole batch, so the misses of different reads overlap; the
 * reads that follow (tree_get ...) find their lines in cache or on the
 * way. A hint only: it changes nothing a read returns. Returns how many
 * of the paths name a node. Does nothing (returns 0) below the size at
 * which it pays (tree_prefetch_pays). A NULL path is skipped. The caller
 * keeps rcu_read_lock from the prefetch to the last read it helps. */
#define TREE_PREFETCH_MAX 64
struct tree_path_ref {
    const char *path;
    size_t len;
};
unsigned tree_prefetch_paths(const struct tree *t, const struct tree_path_ref *paths, unsigned n);
/* Whether the tree is large enough for prefetching to pay: below, every
 * line a read touches is in cache anyway and the extra lookup only costs. */
bool tree_prefetch_pays(const struct tree *t);

/* Number of all descendants (not counting the node), ZK_ENONODE if absent. */
int tree_count_descendants(const struct tree *t, const char *path, size_t len, int64_t *out);
/* Totals for mntr/stat: node count, approximate data bytes, ephemerals, watches are not here. */
struct tree_stats {
    int64_t node_count;
    int64_t data_bytes;
    int64_t ephemeral_count;
    int64_t session_count;
    int64_t last_zxid; /* highest applied zxid */
};
void tree_stats(const struct tree *t, struct tree_stats *out);
/* The highest zxid applied and published so far (acquire load). Any thread. */
int64_t tree_last_zxid(const struct tree *t);
/* A digest of the whole tree (paths, data, stats, ACLs), equal on every
 * server after the same txns. Sequencer thread only (walks without RCU churn). */
uint64_t tree_digest(const struct tree *t);
/* The same digest, kept up by every change instead of walked: O(1), so an
 * ensemble can publish it with every zxid. Read on the sequencer thread
 * between applies it is the digest at tree_last_zxid; elsewhere it may be
 * a moment ahead of or behind the zxid read next to it. */
uint64_t tree_digest_running(const struct tree *t);

/* ---- sessions ------------------------------------------------------------ */
/* Session state that is part of the replicated tree. last_seen_ms is written
 * by whichever worker owns the session's connection (relaxed atomic) and read
 * by the sequencer for expiry. Freed after a grace period once closed.
 *
 * passwd is what a reattach must bring. The server that created the session
 * chose it and its createSession txn records it, so every server that
 * applies the txn (or loads a snapshot holding the session) checks the same
 * one, whatever its own key. It is immutable once the session is visible:
 * readers may read it under rcu_read_lock. The one exception comes before
 * the tree is shared: a session loaded from a record that carried no
 * password (snapshot or txn log format 1) has passwd_known false and zeros
 * until tree_sessions_fill_passwd gives it one. A session whose password is
 * not known must never be reattached to. */
struct tree_session {
    int64_t id;
    int32_t timeout_ms;
    uint8_t passwd[TREE_PASSWD_BYTES];
    bool passwd_known;
    _Atomic int64_t last_seen_ms;
    _Atomic int32_t owner_worker; /* -1 when no connection holds it */
    _Atomic uint64_t owner_conn;  /* worker-local connection token */
    bool closing;                 /* sequencer only: closeSession is in flight */
    /* sequencer only, an ensemble leader's: the member the session is
     * attached through (0: not known yet, e.g. under a new leader) */
    uint32_t owner_server;
};
/* rcu_read_lock held, any thread. NULL when no such session. */
struct tree_session *tree_session_find(const struct tree *t, int64_t id);

/* The identities a session's connection on this server authenticated with
 * (addauth), published for reads that name the session without coming
 * over that connection: the UDP read path (dataplane/UDP.md). */
struct tree_session_auth {
    const struct tree_authid *ids;
    int32_t count;
    bool super;
};
/* The worker of the session's connection (worker, conn): publishes a copy
 * of ids[0..count) and super for session id, replacing whatever was
 * published. 0, -ENOENT (no such session) or -ENOMEM (nothing changed).
 * A registered RCU thread outside a read-side section. */
int tree_session_publish_auth(struct tree *t, int64_t id, const struct tree_authid *ids,
                              int32_t count, bool super, int32_t worker, uint64_t conn);
/* Withdraws what (worker, conn) published for session id, if that is
 * still what is published (a newer connection's stays). Same thread rules. */
void tree_session_withdraw_auth(struct tree *t, int64_t id, int32_t worker, uint64_t conn);
/* rcu_read_lock held, s from tree_session_find: what is published, valid
 * until rcu_read_unlock; false when nothing is. */
bool tree_session_auth(const struct tree_session *s, struct tree_session_auth *out);
/* Calls fn for every live session (expiry scans, the dump 4lw). An RCU walk:
 * any registered thread; only the sequencer may change what fn is given. */
typedef void (*tree_session_fn)(void *arg, struct tree_session *s);
void tree_session_each(struct tree *t, tree_session_fn fn, void *arg);
/* Recovery only, while no other thread can see t: gives every session whose
 * password is not known (loaded from a format-1 snapshot or log record) the
 * one fn writes into out for its id. The tree holds no key: the layer that
 * owns the key the password used to be derived from supplies fn (for larchd,
 * durability, with the data dir's key: server/durability.c). fn returns 0
 * or an error, which stops the walk and is returned; the sessions not
 * reached keep passwd_known false. *filled (when not NULL) counts the
 * sessions given a password. */
typedef int (*tree_passwd_fn)(void *arg, int64_t id, uint8_t out[TREE_PASSWD_BYTES]);
int tree_sessions_fill_passwd(struct tree *t, tree_passwd_fn fn, void *arg, uint64_t *filled);
/* Calls fn(arg, owner session, path) for every session-owned ephemeral node,
 * in no particular order. An RCU walk of the whole tree for admin dumps (the
 * dump 4lw): any registered thread, rcu_read_lock held. */
typedef void (*tree_ephemeral_fn)(void *arg, int64_t session_id, const char *path);
void tree_each_ephemeral(const struct tree *t, tree_ephemeral_fn fn, void *arg);
/* Sequencer: paths of the ephemerals a session owns that start with prefix
 * (NULL or "/" for all). fn gets NUL-terminated paths. */
typedef void (*tree_path_fn)(void *arg, const char *path);
void tree_session_ephemerals(const struct tree *t, int64_t id, const char *prefix, tree_path_fn fn,
                             void *arg);

/* ---- txns ---------------------------------------------------------------- */
enum txn_type {
    TXN_CREATE = ZK_OP_CREATE,
    TXN_DELETE = ZK_OP_DELETE,
    TXN_SETDATA = ZK_OP_SETDATA,
    TXN_SETACL = ZK_OP_SETACL,
    TXN_CHECK = ZK_OP_CHECK,
    TXN_MULTI = ZK_OP_MULTI,
    TXN_CREATE_CONTAINER = ZK_OP_CREATECONTAINER,
    TXN_CREATE_TTL = ZK_OP_CREATETTL,
    TXN_CREATE_SESSION = ZK_OP_CREATESESSION,
    TXN_CLOSE_SESSION = ZK_OP_CLOSESESSION,
    TXN_ERROR = ZK_OP_ERROR,
    /* Larch's own (no ZooKeeper opcode): a new leader's first log entry
     * (replication/README.md, "Zxids are log positions"). No ops; applying
     * it changes nothing but the tree's zxid. */
    TXN_NOOP = -100,
    /* Larch's own: a membership change (a Raft CONFIG entry), logged as a
     * txn as ZooKeeper logs a reconfig. One op of this type whose data is
     * the entry's bytes exactly (raft_config_encode); no other field is
     * set. Applying it changes nothing but the tree's zxid: the membership
     * is the Raft core's, not the tree's. Txn log format 3 on
     * (replication/txnlog.h). */
    TXN_CONFIG = -101,
};
/* One op of a txn. Everything is owned by the op (free with txn_free). */
struct txn_op {
    int32_t type;            /* enum txn_type */
    int32_t client_type;     /* request op that produced it (create vs create2 decides the reply) */
    char *path;              /* final path (sequence suffix applied), NUL-terminated */
    uint8_t *data;           /* create/setData payload; NULL when data_len == -1 */
    int32_t data_len;
    struct tree_acl *acl;    /* create/setACL: one reference owned */
    int64_t ephemeral_owner; /* create: session id, TREE_OWNER_CONTAINER, TTL encoding, or 0 */
    int32_t version;         /* setData/setACL: the node's version after the txn; check: expected */
    int32_t parent_cversion; /* create/delete: the parent's cversion after the txn */
    int32_t timeout_ms;      /* createSession */
    int32_t err;             /* TXN_ERROR: the error this op reports */
    /* createSession: the session's password (struct tree_session), which
     * tree_apply stores. passwd_known is false only for a createSession
     * decoded from a record that carried none (txn log format 1); apply
     * then stores a session without a known password. Zero in other ops. */
    uint8_t passwd[TREE_PASSWD_BYTES];
    bool passwd_known;
};
struct txn {
    int64_t zxid;
    int64_t session_id;
    int32_t cxid;
    int64_t time_ms; /* wall clock of the leader when proposed: ctime/mtime */
    int32_t type;    /* TXN_MULTI when nops may be != 1 */
    uint32_t nops;
    struct txn_op *ops;
};
void txn_free(struct txn *x); /* frees ops and what they own, not x itself */

/* ---- write side (sequencer thread only) ---------------------------------- */
/* One write request as the sequencer hands it to prep. For multi, ops/nops
 * list the sub-requests (type + decoded body), in order. */
struct tree_req {
    int32_t type; /* client op: create, create2, createContainer, createTTL, delete,
                     setData, setACL, check, multi, deleteContainer, createSession,
                     closeSession */
    union {
        struct zk_create_req create;
        struct zk_path_version_req del; /* delete and check */
        struct zk_setdata_req setdata;
        struct zk_setacl_req setacl;
        struct zk_path_req path;        /* deleteContainer */
        struct {                        /* createSession */
            int32_t timeout_ms;
            uint8_t passwd[TREE_PASSWD_BYTES]; /* chosen by the caller (the sequencer) */
        } session;
    } u;
    const struct tree_req *ops; /* multi */
    uint32_t nops;
};
/* Settings prep honours. */
struct tree_prep_cfg {
    bool ttl_enabled; /* zookeeper.extendedTypesEnabled */
    uint32_t acl_providers; /* TREE_ACL_*: the schemes ACLs may name beyond world, ip, digest */
    /* The txn size bound: prep refuses, with ZK_EBADARGUMENTS and before it
     * records any pending change, an op that would take the sum of
     * op_bytes over the txn's ops past max_txn_bytes. A request is small
     * (jute.maxbuffer) but its txn need not be: an "auth" ACL entry becomes
     * one digest entry per identity of the caller, and a closeSession
     * deletes every ephemeral of the session. 0 (or op_bytes NULL): no
     * bound. op_bytes is how many bytes the txn log spends on one op; it is
     * a callback because the log's format belongs to replication/, which
     * sits above tree/. The sequencer passes txn_op_encoded_bytes and
     * TXNLOG_TXN_OPS_BYTES_MAX (txnlog.h), which makes the guarantee: every
     * txn tree_prep accepts can be logged (txnlog_append never answers
     * -EINVAL for it). Pure, called on the sequencer thread. */
    size_t max_txn_bytes;
    size_t (*op_bytes)(const struct txn_op *op);
};
/* Validates req for session (with auth) and fills x (zxid, session, cxid and
 * time must be set by the caller beforehand). Returns ZK_OK when x should be
 * applied, or the error to reply with (x then holds nothing to apply, except
 * for multi, where a failed multi yields ZK_OK-free TXN_ERROR ops: each op
 * before the failing one reports ZK_OK, the failing one its error, the ones
 * after ZK_ERUNTIMEINCONSISTENCY, and the return value is the failing op's
 * error). ZK_EMARSHALLINGERROR is never an op's error: it fails a multi as a
 * whole (x then holds no ops), as ZooKeeper does for a null path in any op
 * or a null it dereferences while preparing one (tree_acl_from_request).
 * A null path is MARSHALLINGERROR for create and delete, BADARGUMENTS for
 * setData, setACL, check and deleteContainer (ZooKeeper 3.8's answers).
 * Paths may have any length; a txn's size is bounded by cfg (see struct
 * tree_prep_cfg): an op past it fails as any failing op does, so a multi
 * then fails with the per-op results above and leaves no pending change.
 * Prep never changes what readers see; it records pending changes so that
 * a later prep in the same batch sees the effect of earlier ones. */
int tree_prep(struct tree *t, const struct tree_prep_cfg *cfg, const struct tree_req *req,
              const struct tree_auth *auth, struct txn *x);
/* Forgets pending changes (after the batch they belong to was applied or dropped). */
void tree_prep_reset(struct tree *t);

/* A change a txn made, for watches (DESIGN.md invariant 3). */
struct tree_event {
    int32_t type;     /* ZK_EVENT_CREATED / DELETED / DATA_CHANGED / CHILD_CHANGED */
    const char *path; /* the node (CHILD_CHANGED: the parent); valid during the callback */
    int64_t zxid;
    /* The ACL a watcher must have READ on to be told (ZooKeeper passes it
     * with every triggerWatch, CVE-2024-23944): the node's own ACL for
     * CREATED, DELETED (the deleted node's) and DATA_CHANGED, the parent's
     * for CHILD_CHANGED, as that version had it when the event happened.
     * NULL means none (everyone may read). Valid during the callback only:
     * a callback that keeps it takes a reference (tree_acl_ref), which it may
     * drop on any thread (see struct tree_acl). */
    const struct tree_acl *acl;
};
typedef void (*tree_event_fn)(void *arg, const struct tree_event *ev);
/* Per-op result for the reply: the final path of creates and the stat of
 * creates/setData (ZK_OK or the op's error for multi). */
struct tree_op_result {
    int32_t err;
    char *path;          /* create: final path, owned by the result array (txn_results_free) */
    struct zk_stat stat; /* create2/setData: the new stat */
};
/* Applies x, publishing every change with RCU, calling ev for each watch
 * event in the order ZooKeeper triggers them, and filling results[nops] when
 * results is not NULL. Returns ZK_OK, or an internal inconsistency error when
 * x does not fit the tree (never for a txn prep accepted in order). Sets the
 * tree's last zxid to x->zxid. */
int tree_apply(struct tree *t, const struct txn *x, tree_event_fn ev, void *ev_arg,
               struct tree_op_result *results);
void tree_results_free(struct tree_op_result *r, uint32_t n);

/* Nodes the reaper should delete now (ZooKeeper's ContainerManager): empty
 * containers that once had a child (cversion > 0) and TTL nodes without
 * children whose mtime + ttl <= now_ms. fn gets NUL-terminated paths. */
void tree_reapable(const struct tree *t, int64_t now_ms, tree_path_fn fn, void *arg);

/* ---- watches (one table per worker thread) ----------------------------- */
enum watch_kind {
    WATCH_DATA = 1,                 /* getData, or exists on an existing node */
    WATCH_EXIST = 2,                /* exists on a missing node */
    WATCH_CHILD = 3,                /* getChildren */
    WATCH_PERSISTENT = 4,           /* addWatch PERSISTENT */
    WATCH_PERSISTENT_RECURSIVE = 5, /* addWatch PERSISTENT_RECURSIVE */
};
struct watch_table;
struct watch_table *watch_table_new(void);
void watch_table_free(struct watch_table *wt);
/* Registers a watch of kind on path for conn. seen_zxid is the zxid of the
 * state the client observed (the node's mzxid for DATA, pzxid for CHILD, the
 * tree's last zxid read before the lookup for EXIST and persistent kinds):
 * events with zxid <= seen_zxid do not fire it. Registering the same
 * (path, kind, conn) twice keeps one watch. ZK_OK or ZK_ESYSTEMERROR (OOM). */
int watch_add(struct watch_table *wt, const char *path, size_t len, enum watch_kind kind,
              uint64_t conn, int64_t seen_zxid);
/* Delivers ev: calls fire(arg, conn, event_type, path) once per connection
 * whose watches it triggers (ZooKeeper's rules: created/deleted/data fire
 * DATA+EXIST watches on the path; deleted also fires CHILD watches there;
 * child-changed fires CHILD watches on the parent; persistent watches on the
 * path fire for all four; recursive watches on the path or an ancestor fire
 * for all but child-changed). One-shot watches fired are removed. */
typedef void (*watch_fire_fn)(void *arg, uint64_t conn, int32_t event_type, const char *path);
void watch_fire(struct watch_table *wt, const struct tree_event *ev, watch_fire_fn fire, void *arg);
/* removeWatches/checkWatches for conn on path, type enum zk_watcher_type.
 * When remove is true the matching watches are dropped. Returns ZK_OK when
 * at least one matched, else ZK_ENOWATCHER. For each removed watch calls
 * fire(arg, conn, ZK_EVENT_DATA_WATCH_REMOVED / CHILD_WATCH_REMOVED /
 * PERSISTENT_WATCH_REMOVED, path) when fire is not NULL. */
int watch_remove(struct watch_table *wt, const char *path, size_t len, uint64_t conn, int32_t type,
                 bool remove, watch_fire_fn fire, void *arg);
/* Drops every watch of conn (connection closed). */
void watch_remove_conn(struct watch_table *wt, uint64_t conn);
/* Visits every watch (for wchc/wchp/wchs and tests). */
typedef void (*watch_visit_fn)(void *arg, uint64_t conn, enum watch_kind kind, const char *path);
void watch_each(const struct watch_table *wt, watch_visit_fn fn, void *arg);
size_t watch_count(const struct watch_table *wt);

/* ---- snapshots ------------------------------------------------------------
 * A snapshot is the tree's nodes and sessions as bytes (tree/snapshot.c; no
 * file I/O here: bytes go out through a callback and come back in a buffer).
 *
 * It is FUZZY, as ZooKeeper's: tree_snapshot_write may run on any thread
 * registered with liburcu while the sequencer keeps applying txns. It reads
 * tree_last_zxid first (zxid_start), then walks the tree taking
 * rcu_read_lock once per node, so no grace period waits on the walk. Each
 * node is captured as of some moment at or after zxid_start; recovery loads
 * the snapshot and replays the log from zxid_start + 1, which converges
 * because tree_apply is idempotent. The digest in the trailer is the digest
 * of the snapshot's content (what tree_digest gives for the loaded tree), not
 * of the live tree at any one moment.
 *
 * Format (little-endian, version 2):
 *   header   "LRSN", u32 version, i64 zxid_start
 *   nodes    in post-order (children before their parent, "/" last):
 *            'N', u32 path_len, path, i64 czxid mzxid ctime mtime
 *            ephemeral_owner pzxid, i32 version cversion aversion,
 *            u32 children (how many child records precede it as its
 *            children: the node's num_children), i32 data_len (-1: null
 *            data), data, i32 acl_count (0: the shared open ACL, -1: no ACL),
 *            acl_count x (i32 perms, u32 len, scheme, u32 len, id)
 *   sessions 'S', i64 id, i32 timeout_ms, u8 flags (bit 0: the password
 *            is known; no other bit is set), 16 bytes password (zeros when
 *            not known)
 *   trailer  'T', u64 node_count, u64 session_count, u64 digest,
 *            u32 CRC-32C of every byte before this field
 * Stats are ZooKeeper's StatPersisted (cversion counts creations, the owner
 * keeps the container/TTL encodings), not the client-adjusted Stat.
 *
 * Version 1 (read, never written) is the same but for its session records,
 * 'S', i64 id, i32 timeout_ms: passwords were derived from a server key
 * then, not recorded. Its sessions load with passwd_known false (struct
 * tree_session), for the key's owner to fill in (tree_sessions_fill_passwd).
 * A version-2 snapshot of such a tree says so with flags 0, so loading and
 * writing round-trip every tree. Sessions are not part of the digest. */
#define TREE_SNAP_MAGIC "LRSN"
#define TREE_SNAP_VERSION 2u     /* what tree_snapshot_write writes */
#define TREE_SNAP_VERSION_MIN 1u /* the oldest tree_snapshot_load reads */

/* Errors of tree_snapshot_load besides -ENOMEM (each distinct, all < 0). */
enum tree_snap_err {
    TREE_SNAP_ETRUNC = -2001,   /* shorter than a header plus a trailer */
    TREE_SNAP_EMAGIC = -2002,   /* not "LRSN" */
    TREE_SNAP_EVERSION = -2003, /* not a version from TREE_SNAP_VERSION_MIN to TREE_SNAP_VERSION */
    TREE_SNAP_ECRC = -2004,     /* CRC-32C mismatch (corruption or truncation) */
    TREE_SNAP_EFORMAT = -2005,  /* CRC fine but the content does not parse */
    TREE_SNAP_EDIGEST = -2006,  /* loaded content does not hash to the trailer's digest */
    TREE_SNAP_ENOTFRESH = -2007 /* target tree is not as tree_new made it */
};

struct tree_snap_info {
    int64_t zxid_start;    /* replay the log from the txn after this zxid */
    uint64_t node_count;   /* nodes in the snapshot */
    uint64_t session_count;
    uint64_t digest;       /* tree_digest of the snapshot's content */
    uint64_t size_bytes;   /* bytes written / read */
};

/* Receives the next len bytes of a snapshot. Returns 0 or -errno (which
 * stops the write and is returned by tree_snapshot_write). */
typedef int (*tree_snap_out_fn)(void *arg, const void *bytes, size_t len);

/* Writes a fuzzy snapshot of t through out (see above). Any thread
 * registered with liburcu, NOT holding rcu_read_lock (the walk takes and
 * releases it per node). out is never called with the lock held. Returns 0
 * with info filled (when not NULL), -ENOMEM, out's error, or -EAGAIN when
 * tree_replace ran during the walk (what went out mixes two trees: discard
 * it and take another). */
int tree_snapshot_write(const struct tree *t, tree_snap_out_fn out, void *arg,
                        struct tree_snap_info *info);

/* Loads a snapshot into t, which must be as tree_new returned it (else
 * TREE_SNAP_ENOTFRESH). Sequencer thread (or before the tree is shared),
 * not holding rcu_read_lock. Checks magic, version and CRC, then parses and
 * builds everything off to the side and verifies node count and digest
 * against the trailer; any failure up to there returns its error and leaves
 * t unchanged. Then it publishes the nodes, the ephemeral/container/TTL
 * indexes and the sessions, and sets the last zxid to zxid_start (not to
 * anything newer a fuzzy walk captured, so replay starts early enough).
 * Returns 0 with info filled (when not NULL). -ENOMEM during publishing
 * leaves t partly loaded: free it. Loaded sessions have last_seen_ms 0 and no
 * owner; the caller restarts their timeouts (ZooKeeper's SessionTracker does
 * the same at recovery) before expiry runs. Sessions of a version-1
 * snapshot have no known password: the caller fills them in
 * (tree_sessions_fill_passwd) before serving. */
int tree_snapshot_load(struct tree *t, const void *buf, size_t len, struct tree_snap_info *info);

#endif /* LARCH_TREE_H */
