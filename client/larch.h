/*
 * liblarch — the Larch C client for larchd and any ZooKeeper 3.5+ server.
 *
 * A handle (struct larch) is one ZooKeeper session. larch_open() parses the
 * connect string ("h1:2181,h2:2181/app" — hosts tried in a random order, an
 * optional chroot suffix) and returns at once; two threads owned by the
 * handle do the rest:
 *   - the I/O thread connects, handshakes, sends requests, reads replies and
 *     notifications, pings, and on connection loss moves to the next host
 *     and re-attaches the same session (id + password), re-sending auth and
 *     re-arming every watch with setWatches;
 *   - the event thread runs every callback — asynchronous completions and
 *     watchers — one at a time, in the order the server sent them. So a
 *     watch event is always seen before the completion of a later request
 *     that observed the change (ZooKeeper's ordering guarantee).
 *
 * API. Every operation has a synchronous form (larch_get, ...), which blocks
 * the calling thread until the reply and returns the ZooKeeper error code,
 * and an asynchronous form (larch_aget, ...), which queues the request and
 * calls `done` on the event thread exactly once. Synchronous calls may be
 * made from callbacks (the I/O thread completes them, not the event thread);
 * larch_close() may not. Every function is thread-safe; there is no global
 * state. Paths are absolute and relative to the chroot.
 *
 * Errors are ZooKeeper's codes (enum zk_err in proto/proto.h, plus
 * LARCH_ECLOSING). Seed 004 ("watches and notifications in depth") is the
 * contract for failures:
 *   ZK_ECONNECTIONLOSS  the connection broke before the reply came; the
 *                       request may or may not have been applied. Every
 *                       request sent or queued at that moment fails with it
 *                       (a recipe re-checks and retries). The handle
 *                       reconnects by itself; watchers get a
 *                       ZK_STATE_DISCONNECTED session event, then
 *                       ZK_STATE_SYNC_CONNECTED once re-attached.
 *   ZK_ESESSIONEXPIRED  the server has expired the session: ephemerals and
 *                       watches are gone. Terminal for the handle: every
 *                       watcher gets one ZK_STATE_EXPIRED event, and every
 *                       later call fails with this code; open a new handle.
 *   ZK_ESESSIONMOVED    the server saw this request on a connection the
 *                       session has left (another connection re-attached it).
 *                       Like CONNECTIONLOSS the outcome is unknown; the handle
 *                       drops that connection and re-attaches.
 *   ZK_EAUTHFAILED      an auth packet was refused; the server closes the
 *                       connection and the handle becomes terminal
 *                       (ZK_STATE_AUTH_FAILED).
 *
 * Watches are one-shot (exists/get/get_children with a watcher), persistent
 * or persistent-recursive (larch_add_watch). A watcher is (fn, ctx); pass
 * fn = NULL for no watch, or LARCH_DEFAULT_WATCHER for the handle's default
 * watcher (larch_options.watcher). Like ZooKeeper's client, the same (fn,
 * ctx) on the same path and kind is registered once and fires once. Session
 * events go to the default watcher and to every registered watcher.
 */
#ifndef LARCH_CLIENT_H
#define LARCH_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/proto.h"

/* ZooKeeper's C client code for "the handle is closing" (ZCLOSING). */
#define LARCH_ECLOSING (-116)
/* Handle state while it looks for a server (ZOO_CONNECTING_STATE). */
#define LARCH_STATE_CONNECTING 1

#define LARCH_PASSWD_LEN 16

struct larch;

/* ---- ACLs --------------------------------------------------------------- */
struct larch_acl {
    int32_t perms; /* ZK_PERM_* bits */
    char *scheme;  /* "world", "auth", "digest", "ip", ... */
    char *id;
};
struct larch_acl_list {
    int32_t count;
    struct larch_acl *items;
};
/* ZooDefs.Ids: world:anyone all; world:anyone read; auth (creator) all. */
extern const struct larch_acl_list LARCH_OPEN_ACL_UNSAFE;
extern const struct larch_acl_list LARCH_READ_ACL_UNSAFE;
extern const struct larch_acl_list LARCH_CREATOR_ALL_ACL;

/* The digest ACL id of user:password, "user:base64(sha1(user:password))"
 * (DigestAuthenticationProvider.generateDigest). ZK_EBADARGUMENTS when
 * cred has no ':' or out is too small (needs strlen(user) + 30). */
int larch_digest_id(const char *cred, char *out, size_t cap);
/* "rwcda" letters (any order, zkCli's) to ZK_PERM_* bits; -1 on another letter. */
int32_t larch_perms_parse(const char *letters);
/* ZK_PERM_* bits to letters in zkCli's order "cdrwa"; out needs 6 bytes. */
void larch_perms_format(int32_t perms, char out[6]);
/* Parses zkCli's ACL syntax "scheme:id:perms[,scheme:id:perms...]"
 * ("world:anyone:cdrwa", "digest:bob:HASH=:r", "ip:10.0.0.0/8:rw",
 * "auth::cdrwa"). ZK_EBADARGUMENTS names nothing; the caller reports. */
int larch_acl_parse(const char *text, struct larch_acl_list *out);
/* Deep copy; free with larch_acl_list_free. */
int larch_acl_copy(const struct larch_acl_list *in, struct larch_acl_list *out);
void larch_acl_list_free(struct larch_acl_list *acl);

/* ---- strings ------------------------------------------------------------ */
struct larch_strings {
    int32_t count;
    char **items; /* each NUL-terminated, owned by the list */
};
void larch_strings_free(struct larch_strings *s);
/* The sequence number ZooKeeper appended to a sequential node's name (the
 * last 10 digits, "%010d"), or -1 when name does not end in one. Works on a
 * full path or a bare child name. */
int64_t larch_sequence_of(const char *name);
/* Sorts names by their sequence suffix (names without one go last, by name). */
void larch_sort_by_sequence(struct larch_strings *s);

/* ---- events and watchers ------------------------------------------------ */
struct larch_event {
    int32_t type;     /* ZK_EVENT_*; ZK_EVENT_NONE for a session event */
    int32_t state;    /* ZK_STATE_* (or LARCH_STATE_CONNECTING) */
    const char *path; /* chroot-relative; "" for session events */
};
typedef void (*larch_watch_fn)(struct larch *lh, const struct larch_event *ev, void *ctx);
/* Stands for the handle's default watcher (larch_options.watcher). */
void larch_default_watcher(struct larch *lh, const struct larch_event *ev, void *ctx);
#define LARCH_DEFAULT_WATCHER larch_default_watcher

/* ---- results of asynchronous calls -------------------------------------- */
struct larch_op_result {
    int32_t err;
    char *path;          /* create: the created path (chroot-relative) */
    struct zk_stat stat; /* create and set */
};
/* Everything a completion may carry; pointers are valid during the callback
 * only. Fields an operation does not produce are NULL / 0. */
struct larch_result {
    int32_t err;
    const struct zk_stat *stat;            /* create exists get set children acl */
    const char *data;                      /* get (NULL for a null value) */
    int32_t data_len;                      /* -1 for a null value */
    const char *path;                      /* create */
    const struct larch_strings *strings;   /* get_children, get_ephemerals */
    const struct larch_acl_list *acl;      /* get_acl */
    const struct larch_op_result *results; /* multi, one per op */
    int32_t nresults;
    int32_t number; /* get_all_children_number */
};
typedef void (*larch_done_fn)(struct larch *lh, const struct larch_result *r, void *ctx);

/* ---- handle ------------------------------------------------------------- */
struct larch_options {
    int32_t session_timeout_ms; /* requested; the server negotiates (default 10000) */
    larch_watch_fn watcher;     /* default watcher: session events, default watches */
    void *watcher_ctx;
    int64_t session_id; /* re-attach this session (0: a new one) */
    uint8_t passwd[LARCH_PASSWD_LEN];
    bool read_only;  /* allow a read-only server (ZooKeeper's canBeReadOnly) */
    uint64_t seed;   /* host order shuffle; 0 picks one from the clock */
    bool no_shuffle; /* try hosts in the order given (tests) */
};

/* Creates a handle and starts connecting; returns ZK_OK, ZK_EBADARGUMENTS
 * (connect string or chroot malformed) or ZK_ESYSTEMERROR. opt may be NULL. */
int larch_open(struct larch **out, const char *connect_string, const struct larch_options *opt);
/* Closes the session (closeSession, waiting a bounded time for the reply),
 * stops both threads, fails what is still queued with LARCH_ECLOSING
 * (callbacks still run), and frees the handle. Returns the closeSession
 * result (ZK_ECONNECTIONLOSS when not connected). Never from a callback. */
int larch_close(struct larch *lh);
/* Like larch_close but leaves the session open on the server (its
 * ephemerals stay until it expires) — for handing a session to another
 * handle or process, and for tests that simulate a crash. */
void larch_detach(struct larch *lh);

/* Blocks until connected (ZK_OK), timeout (ZK_EOPERATIONTIMEOUT) or a
 * terminal state (ZK_ESESSIONEXPIRED, ZK_EAUTHFAILED, LARCH_ECLOSING). */
int larch_wait_connected(struct larch *lh, int32_t timeout_ms);
int32_t larch_state(struct larch *lh);
int64_t larch_session_id(struct larch *lh);
void larch_session_passwd(struct larch *lh, uint8_t out[LARCH_PASSWD_LEN]);
int32_t larch_session_timeout(struct larch *lh); /* negotiated, 0 before the first connect */
int64_t larch_last_zxid(struct larch *lh);
/* "host:port" of the connected server into out; ZK_ECONNECTIONLOSS when none. */
int larch_server(struct larch *lh, char *out, size_t cap);
/* Drops the current connection as a network failure would (for tests and
 * for callers that know a server is bad): pending requests fail with
 * ZK_ECONNECTIONLOSS and the handle re-attaches via the next host. */
void larch_disconnect(struct larch *lh);

/* ---- synchronous operations --------------------------------------------- */
/* mode: enum zk_create_mode. acl NULL means LARCH_OPEN_ACL_UNSAFE. ttl_ms only
 * for the TTL modes (else 0). *created (malloc'd, may be NULL) gets the name
 * the server gave (sequential suffix); stat may be NULL. */
int larch_create(struct larch *lh, const char *path, const void *data, int32_t len,
                 const struct larch_acl_list *acl, int32_t mode, int64_t ttl_ms, char **created,
                 struct zk_stat *stat);
int larch_delete(struct larch *lh, const char *path, int32_t version);
/* ZK_ENONODE when absent; a watcher is still set then (an exists watch). */
int larch_exists(struct larch *lh, const char *path, larch_watch_fn w, void *wctx,
                 struct zk_stat *stat);
/* *data is malloc'd with a NUL after the last byte (NULL for a null value,
 * *len -1); the caller frees it. data, len and stat may be NULL. */
int larch_get(struct larch *lh, const char *path, larch_watch_fn w, void *wctx, char **data,
              int32_t *len, struct zk_stat *stat);
int larch_set(struct larch *lh, const char *path, const void *data, int32_t len, int32_t version,
              struct zk_stat *stat);
/* Children names (not paths), in the server's order; free with larch_strings_free. */
int larch_get_children(struct larch *lh, const char *path, larch_watch_fn w, void *wctx,
                       struct larch_strings *children, struct zk_stat *stat);
int larch_get_acl(struct larch *lh, const char *path, struct larch_acl_list *acl,
                  struct zk_stat *stat);
int larch_set_acl(struct larch *lh, const char *path, int32_t version,
                  const struct larch_acl_list *acl);
/* Waits until the server this handle talks to has applied every write the
 * quorum had committed when sync was issued (ZooKeeper's sync). */
int larch_sync(struct larch *lh, const char *path);
/* Adds credentials to the session ("digest", "user:password") and waits for
 * the server's verdict. Remembered and re-sent on every reconnect. */
int larch_add_auth(struct larch *lh, const char *scheme, const void *cred, int32_t len);
/* mode: ZK_ADD_WATCH_PERSISTENT or ZK_ADD_WATCH_PERSISTENT_RECURSIVE. */
int larch_add_watch(struct larch *lh, const char *path, int32_t mode, larch_watch_fn w,
                    void *wctx);
/* Removes watchers of type (ZK_WATCHER_CHILDREN / DATA / ANY) on path: the one
 * (w, wctx), or all when w is NULL. Each removed watcher gets a
 * *_WATCH_REMOVED event. The server is asked to drop its watch once no local
 * watcher of that kind remains, unless local is true (works offline).
 * ZK_ENOWATCHER when nothing matched. */
int larch_remove_watches(struct larch *lh, const char *path, int32_t type, larch_watch_fn w,
                         void *wctx, bool local);
/* Paths (chroot-relative) of the session's ephemerals under prefix. */
int larch_get_ephemerals(struct larch *lh, const char *prefix, struct larch_strings *paths);
int larch_get_all_children_number(struct larch *lh, const char *path, int32_t *number);

/* ---- multi (Transaction) ------------------------------------------------ */
struct larch_op {
    int32_t type; /* ZK_OP_CREATE, ZK_OP_DELETE, ZK_OP_SETDATA, ZK_OP_CHECK */
    const char *path;
    const void *data;
    int32_t len;
    const struct larch_acl_list *acl; /* create; NULL means open */
    int32_t mode;                     /* create */
    int64_t ttl_ms;                   /* create with a TTL mode */
    int32_t version;                  /* delete, setData, check (-1: any) */
};
struct larch_op larch_op_create(const char *path, const void *data, int32_t len,
                                const struct larch_acl_list *acl, int32_t mode);
struct larch_op larch_op_delete(const char *path, int32_t version);
struct larch_op larch_op_set(const char *path, const void *data, int32_t len, int32_t version);
struct larch_op larch_op_check(const char *path, int32_t version);
/* All ops or none. results (n entries, may be NULL) get each op's code: the
 * failing op its error, ops before it ZK_OK, ops after it
 * ZK_ERUNTIMEINCONSISTENCY. Returns ZK_OK or the first op's error. Free the
 * results' paths with larch_op_results_free. */
int larch_multi(struct larch *lh, const struct larch_op *ops, int32_t n,
                struct larch_op_result *results);
void larch_op_results_free(struct larch_op_result *results, int32_t n);

/* ---- asynchronous operations -------------------------------------------- */
/* Each returns ZK_OK when queued, then calls done(lh, result, ctx) exactly
 * once on the event thread; or returns an error at once (bad arguments, a
 * terminal handle) and never calls done. done may be NULL. */
int larch_acreate(struct larch *lh, const char *path, const void *data, int32_t len,
                  const struct larch_acl_list *acl, int32_t mode, int64_t ttl_ms,
                  larch_done_fn done, void *ctx);
int larch_adelete(struct larch *lh, const char *path, int32_t version, larch_done_fn done,
                  void *ctx);
int larch_aexists(struct larch *lh, const char *path, larch_watch_fn w, void *wctx,
                  larch_done_fn done, void *ctx);
int larch_aget(struct larch *lh, const char *path, larch_watch_fn w, void *wctx,
               larch_done_fn done, void *ctx);
int larch_aset(struct larch *lh, const char *path, const void *data, int32_t len,
               int32_t version, larch_done_fn done, void *ctx);
int larch_aget_children(struct larch *lh, const char *path, larch_watch_fn w, void *wctx,
                        larch_done_fn done, void *ctx);
int larch_aget_acl(struct larch *lh, const char *path, larch_done_fn done, void *ctx);
int larch_aset_acl(struct larch *lh, const char *path, int32_t version,
                   const struct larch_acl_list *acl, larch_done_fn done, void *ctx);
int larch_async(struct larch *lh, const char *path, larch_done_fn done, void *ctx);
int larch_amulti(struct larch *lh, const struct larch_op *ops, int32_t n, larch_done_fn done,
                 void *ctx);

/* ---- reads over UDP (larchd's UDP read path: dataplane/UDP.md) ----------- */
/* A UDP read transport to one larchd, at the address its --udp flag (zoo.cfg
 * larch.udp) gives: exists, get, get_children and get_all_children_number
 * only; writes, watches and sessions stay on a handle's TCP connection.
 *
 * With a handle (lh), every read is signed with lh's session (so it reads
 * with the identities lh's connection authenticated with on that server) and
 * carries the highest zxid lh and this transport have seen: a server that has
 * not applied it answers BEHIND and the read is retried, so a read sees lh's
 * own earlier writes over any transport and through any server. Paths are
 * relative to lh's chroot. Without a handle, reads are anonymous (world and
 * the client's address) and the address may carry a chroot ("ip:port/app").
 *
 * A lost datagram is sent again every retry_ms until timeout_ms has passed
 * (then ZK_ECONNECTIONLOSS). "Not yet" answers are retried until then too:
 * BEHIND (then ZK_EOPERATIONTIMEOUT) and NOT_SERVING, a member without a
 * leader (then ZK_ECONNECTIONLOSS). A reply too large for a datagram is asked for
 * again with a padded request (UDP.md, "Size"); when even that cannot fit,
 * the read goes over lh's TCP connection, or fails with LARCH_ETOOBIG on an
 * anonymous transport. Other UDP statuses: NO_SESSION is
 * ZK_ESESSIONEXPIRED (after retrying until the deadline while lh's session
 * is alive: a new session reaches a follower a moment later), BAD_MAC
 * ZK_EAUTHFAILED, BAD_REQUEST ZK_EBADARGUMENTS, BAD_VERSION (or a
 * status a newer server added) LARCH_EUDPVERSION. Before lh has a session (it is still connecting)
 * a read fails at once with ZK_ECONNECTIONLOSS; on a terminal lh, with
 * lh's terminal code.
 *
 * Thread-safe: calls on one transport take turns (one request in flight);
 * open one per thread to read in parallel. lh must outlive the transport. */
#define LARCH_ETOOBIG (-1001) /* the reply does not fit a UDP datagram */
/* The server speaks another version of the UDP read protocol (BAD_VERSION,
 * or a status this client does not know): read over TCP. */
#define LARCH_EUDPVERSION (-1002)
#define LARCH_UDP_TIMEOUT_MS_DEFAULT 5000
#define LARCH_UDP_RETRY_MS_DEFAULT 200

struct larch_udp;
struct larch_udp_options {
    int32_t timeout_ms; /* per read; 0: LARCH_UDP_TIMEOUT_MS_DEFAULT */
    int32_t retry_ms;   /* re-send after; 0: LARCH_UDP_RETRY_MS_DEFAULT */
};
/* address: "ip:port", "[ipv6]:port" or "host:port" (one host), with an
 * optional chroot only when lh is NULL. ZK_OK, ZK_EBADARGUMENTS (address
 * malformed or unresolvable) or ZK_ESYSTEMERROR. opt may be NULL. */
int larch_udp_open(struct larch_udp **out, const char *address, struct larch *lh,
                   const struct larch_udp_options *opt);
void larch_udp_close(struct larch_udp *u);
/* As larch_exists, larch_get, larch_get_children (with the node's Stat) and
 * larch_get_all_children_number, without watches. */
int larch_udp_exists(struct larch_udp *u, const char *path, struct zk_stat *stat);
int larch_udp_get(struct larch_udp *u, const char *path, char **data, int32_t *len,
                  struct zk_stat *stat);
int larch_udp_get_children(struct larch_udp *u, const char *path, struct larch_strings *children,
                           struct zk_stat *stat);
int larch_udp_get_all_children_number(struct larch_udp *u, const char *path, int32_t *number);
/* The highest zxid a reply on this transport has carried. */
int64_t larch_udp_last_zxid(struct larch_udp *u);

/* ---- path helpers ------------------------------------------------------- */
/* ZooKeeper's PathUtils.validatePath; sequential allows a trailing '/'. */
bool larch_path_valid(const char *path, bool sequential);
/* Joins parent and child name into a new malloc'd path ("/" + "a" -> "/a"). */
char *larch_path_join(const char *parent, const char *child);

/* The text name of an error code ("NONODE", "CONNECTIONLOSS", ...). */
const char *larch_error(int err);

#endif
