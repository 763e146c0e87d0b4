/*
 * lc_int.h — liblarch internals shared by its files (not installed).
 *
 * Locking: one mutex per handle (lh->mu) guards every field below that is
 * not marked otherwise: the send and pending queues, the watch registry,
 * the event queue, session state. The I/O thread holds it while it moves
 * requests and dispatches replies, never across a blocking syscall.
 */
#ifndef LARCH_CLIENT_INT_H
#define LARCH_CLIENT_INT_H

#include <pthread.h>

#include "client/larch.h"

/* ---- hosts.c: connect string and chroot ---------------------------------- */
struct lc_host {
    char *name; /* host name or address, without brackets */
    char *port; /* decimal port */
};
struct lc_hosts {
    struct lc_host *items;
    size_t count;
    char *chroot; /* NULL, or a valid path other than "/" */
};
/* "h1:p1,h2,[::1]:p3/chroot" (a host without a port gets 2181). */
int lc_hosts_parse(const char *s, struct lc_hosts *out);
void lc_hosts_shuffle(struct lc_hosts *h, uint64_t seed);
void lc_hosts_free(struct lc_hosts *h);
/* chroot + path as sent to the server (malloc'd), NULL on OOM. */
char *lc_chroot_add(const char *chroot, const char *path);
/* The client's view of a server path: path without the chroot ("/" for the
 * chroot itself); path unchanged when it lies outside the chroot. */
const char *lc_chroot_strip(const char *chroot, const char *path);

/* ---- watch.c: the client's watch registry -------------------------------- */
enum lc_wkind { LC_W_NONE = -1, LC_W_DATA, LC_W_EXIST, LC_W_CHILD, LC_W_PERSISTENT,
                LC_W_RECURSIVE, LC_W_KINDS };
struct lc_watcher {
    larch_watch_fn fn;
    void *ctx;
};
struct lc_wentry; /* one path's watchers of one kind */
struct lc_watches {
    struct lc_wentry **buckets[LC_W_KINDS];
    size_t nbuckets[LC_W_KINDS];
    size_t count[LC_W_KINDS]; /* paths with at least one watcher */
};
/* A set of watchers to call for one event (deduplicated). */
struct lc_wset {
    struct lc_watcher *items;
    size_t count, cap;
};
void lc_watches_init(struct lc_watches *w);
void lc_watches_free(struct lc_watches *w);
/* Adds (fn, ctx) on path for kind; no-op if already there. 0 or -1 (OOM). */
int lc_watches_add(struct lc_watches *w, enum lc_wkind kind, const char *path, larch_watch_fn fn,
                   void *ctx);
/* Watchers an event of type on path triggers (ZKWatchManager.materialize):
 * one-shot ones are removed from the registry. 0 or -1 (OOM). */
int lc_watches_trigger(struct lc_watches *w, int32_t type, const char *path, struct lc_wset *out);
/* Every registered watcher (session events); with clear, the registry empties. */
int lc_watches_all(struct lc_watches *w, struct lc_wset *out, bool clear);
/* Removes matching watchers (fn NULL: all) of the kinds in mask (1 << kind)
 * on path into out. */
int lc_watches_remove(struct lc_watches *w, unsigned mask, const char *path, larch_watch_fn fn,
                      void *ctx, struct lc_wset *out);
/* How many watchers of kind on path match (fn, ctx); fn NULL counts all. */
size_t lc_watches_count(const struct lc_watches *w, enum lc_wkind kind, const char *path,
                        larch_watch_fn fn, void *ctx);
/* Whether any watcher of kind remains on path. */
bool lc_watches_has(const struct lc_watches *w, enum lc_wkind kind, const char *path);
/* Calls fn for every path with a watcher of kind (setWatches on reconnect). */
typedef int (*lc_path_fn)(void *arg, const char *path);
int lc_watches_each_path(const struct lc_watches *w, enum lc_wkind kind, lc_path_fn fn, void *arg);
int lc_wset_add(struct lc_wset *s, larch_watch_fn fn, void *ctx);
void lc_wset_free(struct lc_wset *s);

/* ---- requests ------------------------------------------------------------ */
enum lc_kind {
    LC_CREATE, LC_DELETE, LC_EXISTS, LC_GET, LC_SET, LC_CHILDREN, LC_GETACL, LC_SETACL,
    LC_SYNC, LC_MULTI, LC_AUTH, LC_ADDWATCH, LC_REMOVEWATCHES, LC_EPHEMERALS, LC_CHILDCOUNT,
    LC_CLOSE, LC_INTERNAL /* resent auth, setWatches: nobody waits */
};
struct lc_sync {
    bool done;
};
struct lc_req {
    struct lc_req *next;
    enum lc_kind kind;
    int32_t xid;
    int32_t op;
    struct zk_wbuf frame; /* the whole frame, length prefix included */
    /* the watch a successful reply registers */
    enum lc_wkind wkind;
    char *wpath; /* chroot-relative */
    larch_watch_fn wfn;
    void *wctx;
    /* completion: done on the event thread, or a synchronous waiter */
    larch_done_fn done;
    void *ctx;
    struct lc_sync *sync;
    /* the reply: error code and the body after the reply header */
    int32_t err;
    uint8_t *body;
    size_t body_len;
};
void lc_req_free(struct lc_req *r);

/* ---- codec.c: request bodies and reply decoding (pure) ------------------- */
/* Decoded reply in a form larch_result can point into; owned by the holder. */
struct lc_reply {
    int32_t err;
    struct zk_stat stat;
    bool has_stat;
    char *data;
    int32_t data_len;
    char *path;
    struct larch_strings strings;
    struct larch_acl_list acl;
    struct larch_op_result *results;
    int32_t nresults;
    int32_t number;
};
/* Decodes req's reply body for its kind into out (chroot stripped from
 * paths). A malformed body gives err ZK_EMARSHALLINGERROR. */
void lc_reply_decode(const struct lc_req *req, const char *chroot, struct lc_reply *out);
void lc_reply_free(struct lc_reply *r);
/* Move a successful get's value and Stat, or get_children's names and
 * Stat, to a synchronous caller's outputs (each may be NULL) and free the
 * rest of rep. Return rc, the call's result: nothing moves unless it is ZK_OK. */
int lc_reply_take_data(struct lc_reply *rep, int rc, char **data, int32_t *len,
                       struct zk_stat *stat);
int lc_reply_take_children(struct lc_reply *rep, int rc, struct larch_strings *children,
                           struct zk_stat *stat);
/* Points a larch_result at out's fields. */
void lc_reply_result(const struct lc_reply *rep, struct larch_result *res);
/* The opcode that creates a node of mode outside a multi (create2,
 * createContainer or createTTL: all reply with path and Stat). */
int32_t lc_create_op(int32_t mode);
/* Appends a jute ACL vector built from a client list (NULL = open). */
void lc_put_acl(struct zk_wbuf *w, const struct larch_acl_list *acl);
/* Appends one multi op body (after its multi header). chroot applied. */
int lc_put_multi_op(struct zk_wbuf *w, const struct larch_op *op, const char *chroot);

/* ---- the handle ---------------------------------------------------------- */
struct lc_item; /* an event-thread work item (larch.c) */
struct lc_auth {
    struct lc_auth *next;
    char *scheme;
    uint8_t *cred;
    int32_t len;
};
struct larch {
    pthread_mutex_t mu;
    pthread_cond_t cv;    /* sync completions, state changes */
    pthread_cond_t ev_cv; /* event queue */
    pthread_t io_thread, ev_thread;
    int wake[2]; /* pipe: wakes the I/O thread */
    struct lc_hosts hosts;
    size_t host_next;
    uint64_t rng;

    int32_t state;
    bool stop_io, stop_ev, drop_conn;
    bool io_joined; /* close already joined the I/O thread */
    int64_t session_id;
    uint8_t passwd[LARCH_PASSWD_LEN];
    int32_t requested_timeout_ms, timeout_ms;
    int64_t last_zxid;
    bool read_only;
    int32_t next_xid;
    char server[300];

    struct lc_req *send_head, *send_tail; /* queued, not yet written */
    struct lc_req *pend_head, *pend_tail; /* written, awaiting a reply */
    struct lc_item *ev_head, *ev_tail;
    struct lc_watches watches;
    struct lc_auth *auths;
    larch_watch_fn default_fn;
    void *default_ctx;
};

/* larch.c, for conn.c: completes req with err (queues it to the event
 * thread or wakes its waiter); takes ownership. mu held. */
void lc_complete(struct larch *lh, struct lc_req *req);
/* Queues a watch event for the watchers in set (consumed). mu held. */
void lc_queue_event(struct larch *lh, const struct lc_wset *set, int32_t type, int32_t state,
                    const char *path);
/* Sends a session event to every watcher and the default one. mu held. */
void lc_session_event(struct larch *lh, int32_t state, bool clear_watches);
/* Fails every queued and pending request with err. mu held. */
void lc_fail_all(struct larch *lh, int32_t err);
/* The I/O thread's body (conn.c). */
void *lc_io_main(void *arg);
/* Wakes the I/O thread (any thread). */
void lc_wake_io(struct larch *lh);

#endif
