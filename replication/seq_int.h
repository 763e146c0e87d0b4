/*
 * seq_int.h — private to replication/: the sequencer's state, shared by
 * sequencer.c (standalone rounds, sessions, replies, the thread) and
 * ensemble.c (the replicated driver: Raft, forwarding, pending replies).
 *
 * Everything here runs on the thread holding the sequencer role, except
 * where a field or function says otherwise (the queues' producers, relaxed
 * stats reads). Functions named sq_* are the sequencer's own helpers that
 * both files use; nothing outside replication/ may call them.
 */
#ifndef LARCH_SEQ_INT_H
#define LARCH_SEQ_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "proto/proto.h"
#include "replication/replication.h"

/* The digest log (replication.h): a ring of the last SEQ_DIGEST_LOG_MAX
 * entries under a lock (digest_log.c). The role holder notes, any thread
 * copies. */
struct sq_digest_log {
    pthread_mutex_t lock;
    struct seq_digest ring[SEQ_DIGEST_LOG_MAX];
    uint32_t head; /* the slot written next */
    uint32_t n;    /* entries held, up to SEQ_DIGEST_LOG_MAX */
};
/* 0 or a pthread error; destroy undoes init. */
int sq_digest_log_init(struct sq_digest_log *l);
void sq_digest_log_destroy(struct sq_digest_log *l);
/* The tree hashes to digest once zxid is applied: logged when zxid is one
 * ZooKeeper logs (a multiple of SEQ_DIGEST_LOG_INTERVAL), the oldest entry
 * dropped when the ring is full. zxids increase from call to call (until
 * a forget). */
void sq_digest_log_note(struct sq_digest_log *l, int64_t zxid, uint64_t digest);
/* Empties the log (the tree was replaced). */
void sq_digest_log_forget(struct sq_digest_log *l);
/* seq_digest_log's copy. */
size_t sq_digest_log_copy(struct sq_digest_log *l, struct seq_digest *out, size_t max);

struct seq_outq {
    struct base_mpsc q;
    int efd;
    atomic_bool sleeping; /* the worker announced it may block in epoll_wait */
    atomic_bool wants_events; /* ... and to be woken for watch events (it has watches) */
};

struct seq {
    struct tree *tree;
    struct seq_cfg cfg;
    int nworkers;

    struct base_mpsc in;
    int in_efd;
    atomic_bool sleeping; /* the sequencer announced it may block in poll */
    atomic_bool role;     /* the sequencer role is held (rounds, ticks, the in-queue's tail) */
    struct seq_outq out[SEQ_WORKERS_MAX];

    pthread_t thread;
    bool running;
    atomic_bool stop;

    _Atomic int64_t applying_zxid;
    /* seq_serving: true standalone; a member's ensemble.c keeps it equal
     * to its serving state (a live leader, not resyncing) */
    atomic_bool serving;
    int64_t next_zxid_counter;
    uint64_t next_session_id;
    uint8_t passwd_key[SEQ_PASSWD_KEY_BYTES];
    int64_t last_expiry_scan_ms;
    int64_t last_reap_ms;

    _Atomic uint64_t st_writes, st_rounds, st_expired, st_max_round, st_outstanding;
    struct seq_evbuf *evb; /* the role holder's event buffer (see struct seq_evbuf) */
    /* A round prepared but not durable (its log sync failed): retried on
     * ticks; while it is held no other round starts. */
    struct seq_round *held;
    _Atomic int64_t log_error;
    _Atomic uint64_t log_syncs;
    /* Ensemble mode (cfg.ensemble): the Raft core and what the replicated
     * driver keeps (ensemble.c). NULL when standalone. */
    struct seq_ens *ens;
    struct sq_digest_log digest_log; /* what "hash" prints */
};

/* One request of a round and what it turned into. */
struct seq_entry {
    struct seq_req *req;
    struct txn txn;
    struct tree_req treq;
    struct tree_req *subs; /* multi sub-requests (decoded views into req->body) */
    int32_t err;           /* prep or decode error to reply with */
    bool has_txn;          /* txn.ops must be applied */
    bool logged;           /* appended to the txn log (exactly once) */
    bool marshalling_error;
    struct tree_op_result *results;
    int64_t reply_zxid;
};

/* A prepared round (replication.h): its entries in request order, the
 * tree's zxid before it, and the monotonic time it was prepared at. */
struct seq_round {
    struct seq_entry *es;
    size_t n;
    int64_t before_zxid;
    int64_t now_ms;
};

/* Events of the round being applied (tree_apply callback target). Reused
 * round after round: the paths go into one arena, so a round costs a single
 * allocation, the batch itself (push_events), however many events it has.
 * Each record holds one ACL reference, which push_events hands to the batch
 * (or drops, when the batch cannot be built). */
struct seq_evbuf {
    struct seq_evrec {
        int32_t type;
        int64_t zxid;
        size_t path_off; /* into paths */
        struct tree_acl *acl; /* one reference, or NULL */
    } *items;
    uint32_t count;
    size_t cap;
    char *paths;
    size_t plen, pcap;
    bool oom;
};

struct seq_ens;

/* cfg.clock_ms, or the system's clocks (monotonic, or wall with wall). */
int64_t sq_clock(const struct seq *s, bool wall);
/* Whether a reattach request r brings the password session ts recorded
 * (constant time; never when none is known). */
bool sq_passwd_matches(const struct tree_session *ts, const struct seq_req *r);
/* ZooKeeper's session checks on a write (checkSession): ZK_OK, or
 * ZK_ESESSIONEXPIRED (gone or closing) or ZK_ESESSIONMOVED (sent through a
 * member the session has left; a session no member owns yet becomes the
 * sender's). Sequencer thread. */
int32_t sq_write_session_check(struct seq *s, const struct seq_req *r);
/* Writes efd when the consumer announced sleep (the Dekker pairing with
 * base_mpsc_push's seq_cst exchange). */
void sq_wake_if_sleeping(atomic_bool *sleeping, int efd);
/* Wakes worker w if it sleeps and the output is for it (addressed: a reply,
 * a close) or it wants a round's watch events. */
void sq_wake_worker(struct seq *s, int w, bool addressed);
/* A session timeout within [minSessionTimeout, maxSessionTimeout]. */
int32_t sq_clamp_timeout(const struct seq *s, int32_t want);
/* Outputs for workers: a new one (NULL on OOM), one taking w's frame (NULL
 * on OOM or w->err), and the push (worker -1 or out of range: freed). */
struct seq_out *sq_out_new(int32_t kind, uint64_t conn);
struct seq_out *sq_out_with_frame(int32_t kind, uint64_t conn, struct zk_wbuf *w);
void sq_out_push(struct seq *s, int w, struct seq_out *o);
void sq_put_reply_header(struct zk_wbuf *w, int32_t xid, int64_t zxid, int32_t err);
/* tree_apply's event callback (arg: a struct seq_evbuf), dropping a
 * buffer's records, and handing one batch to every worker. */
void sq_collect_event(void *arg, const struct tree_event *ev);
void sq_evbuf_drop(struct seq_evbuf *b);
void sq_push_events(struct seq *s, struct seq_evbuf *evb, int64_t through);
/* Points session ts at (worker, conn), closing its previous connection. */
void sq_take_ownership(struct seq *s, struct tree_session *ts, int worker, uint64_t conn,
                       int64_t now_ms);
void sq_handle_disconnect(struct seq *s, const struct seq_req *r);
/* A GetEphemeralsResponse body for session_id's ephemerals under prefix p. */
void sq_put_ephemerals(struct seq *s, struct zk_wbuf *w, int64_t session_id,
                       const struct zk_str *p);
/* Frees a round's entries and requests without touching the stats. */
void sq_round_discard(struct seq_round *r);
/* Says what failed and aborts: a member whose disk or memory failed under
 * it restarts from its disk (ensemble.c; the log writer's thread too). */
_Noreturn void sq_ens_fatal(const char *what, int err);

/* The log writer (log_writer.c): an ensemble member's txn log on a thread
 * of its own, so that the sequencer never waits for fdatasync (raft.h,
 * cfg.async_log). The sequencer submits one batch per Ready that has a
 * truncation or entries (copied: the caller's may go at once); the writer
 * carries them out in order, syncs once per group, counts the sync in
 * *syncs and calls on_done(arg) from its thread. Everything else is for
 * the sequencer thread. Failures of the disk are fatal (abort), as they
 * are on the sequencer. */
struct logw;
struct txnlog;
int logw_start(struct logw **out, struct txnlog *log, _Atomic uint64_t *syncs,
               void (*on_done)(void *arg), void *arg);
/* 0 or -ENOMEM (nothing queued then). */
int logw_submit(struct logw *w, bool truncate, int64_t after, const struct raft_entry *entries,
                size_t n);
/* Batches made durable since the last call (for raft_log_synced). */
uint64_t logw_take_done(struct logw *w);
/* Whether logw_take_done has something (any thread: the sleep check). */
bool logw_has_done(const struct logw *w);
/* Blocks until every submitted batch is durable; the txn log is then the
 * caller's until the next submit. */
void logw_wait_idle(struct logw *w);
/* Writes and syncs what is queued, then ends the thread and frees w. NULL
 * is ignored. */
void logw_stop(struct logw *w);

/* The ensemble driver's state (ensemble.c): 0 or -EINVAL / -ENOMEM. */
int sq_ens_new(struct seq *s, const struct seq_ensemble_cfg *cfg);
void sq_ens_free(struct seq *s);
/* Whether the peer transport holds input (any thread: reads only what
 * seq_new fixed). */
bool sq_ens_has_input(const struct seq *s);
/* The transport's pump and descriptor when it has no thread of its own
 * (seq_peer_ops.pump): ms until due again (INT64_MAX: no pump), and the fd
 * to sleep on (-1: none). Sequencer thread. */
int64_t sq_ens_pump(struct seq *s);
int sq_ens_io_fd(const struct seq *s);
/* The server's own requests (worker -1, super): the closeSession of ts when
 * it has been silent past its timeout at now_ms (else NULL), and the
 * deleteContainer of a node the reaper found (NULL without memory). */
struct seq_req *sq_expiry_req(const struct tree_session *ts, int64_t now_ms);
struct seq_req *sq_reap_req(const char *path);
/* Takes up to SEQ_ROUND_MAX requests off the in-queue (role holder). */
size_t sq_take_round(struct seq *s, struct seq_req **reqs);

#endif
