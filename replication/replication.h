/*
 * replication — the sequencer: the one thread that orders, validates, (later:
 * logs and replicates) and applies every write, and owns sessions.
 *
 * Single writer: only the holder of the sequencer role mutates the tree. The
 * sequencer thread holds it while it runs a round; with cfg.inline_rounds a
 * worker may take it instead (seq_run_inline). Either way rounds never overlap.
 *
 * Threading: seq_submit may be called from any worker thread (wait-free
 * enqueue on an intrusive MPSC queue built on C11 atomics, so ThreadSanitizer
 * sees every hand-off, then an eventfd kick). Each worker drains its
 * own outbound queue with seq_worker_drain from its own thread; the queue
 * delivers, in order, watch-event batches, write replies, connect results and
 * close orders. Everything else runs on the sequencer thread.
 *
 * Write path per round (DESIGN.md, STYLE.md "persist before reply"): drain the
 * inbound queue -> tree_prep every request (pending-change overlay) -> make the
 * round durable (standalone, not yet durable: quorum of one, nothing to wait
 * for) -> tree_apply each txn -> push one event batch to every worker -> push
 * replies. Because a worker sees the events of a round before any reply of that
 * round, a client is notified of a watched change before it sees a reply that
 * reflects it (invariant 3).
 */
#ifndef LARCH_REPLICATION_H
#define LARCH_REPLICATION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "replication/peer.h"
#include "replication/raft.h"
#include "replication/txnlog.h"
#include "tree/tree.h"

#define SEQ_WORKERS_MAX 64
#define SEQ_ROUND_MAX 512 /* requests prepared and applied per round */
#define SEQ_PASSWD_BYTES TREE_PASSWD_BYTES /* a session password, as ConnectResponse carries it */
#define SEQ_PASSWD_KEY_BYTES 32 /* the HMAC-SHA-256 key new passwords derive from */

struct seq;


struct seq_cfg {
    int32_t min_session_timeout_ms;
    int32_t max_session_timeout_ms;
    int64_t container_check_ms; /* reaper period for containers and TTL nodes */
    bool ttl_enabled;
    /* The x509 provider is registered: x509 ACLs are valid (tree_prep_cfg
     * acl_providers TREE_ACL_X509). On a leader, its own setting decides. */
    bool x509_acls;
    int32_t tick_ms; /* expiry scan period */
    bool inline_rounds; /* workers may run rounds themselves (seq_run_inline) */
    /* The password of a session created here is HMAC-SHA-256(passwd_key,
     * session id as 8 big-endian bytes), first 16 bytes (seq_passwd_derive).
     * Its createSession txn records it, and every reattach is checked
     * against the recorded password (struct tree_session), so a session
     * keeps its password across restarts and servers whatever their keys.
     * Unset: a random key per process. A durable server keeps its key in its
     * data dir, which also derives the passwords of sessions recovered from
     * format-1 files that did not record them (server/durability.c). seq_new
     * copies it. */
    uint8_t passwd_key[SEQ_PASSWD_KEY_BYTES];
    bool passwd_key_set;
    /* The sequencer's clocks, in ms: monotonic (timeouts) or, with wall,
     * the epoch (mtime, session ids). NULL: CLOCK_MONOTONIC and
     * CLOCK_REALTIME; tests and fuzzers pass their own to replay a run. */
    int64_t (*clock_ms)(bool wall);
    /* Failed writes become txns (ZooKeeper's ErrorTxn): they take a zxid,
     * are logged and applied (changing nothing but the tree's zxid), so that
     * a server that has only the log can answer them in order. An ensemble
     * needs it (a follower answers its clients from committed txns); a
     * standalone server may leave it off (a failed write then answers with
     * the current zxid and costs no log write). */
    bool error_txns;
    /* ZooKeeper's SASLAuthenticationProvider is configured: prep checks
     * and builds ACLs with "sasl" served (tree_auth.sasl_provider). */
    bool sasl_provider;
    /* Ensemble mode (see "ensembles" below); NULL: standalone. seq_new
     * copies what it needs. Implies error_txns, and no inline rounds. */
    const struct seq_ensemble_cfg *ensemble;
    struct txnlog *log; /* NULL: not durable. Else every round's txns are
                         * synced before apply (group commit), and rounds
                         * are never run inline (workers never wait on disk) */
};

/* What a worker sends. Owned by the sequencer once submitted (it frees it). */
enum seq_req_kind {
    SEQ_REQ_WRITE = 1,      /* a client request the sequencer answers (writes, sync, getEphemerals, closeSession) */
    SEQ_REQ_CONNECT = 2,    /* ConnectRequest: new session or reattach */
    SEQ_REQ_DISCONNECT = 3, /* the connection holding session_id went away */
};
struct seq_req {
    struct base_mpsc_node node; /* the queue that carries it (base.h) */
    int32_t kind;
    int32_t worker;
    uint64_t conn;
    int64_t session_id;
    /* WRITE */
    int32_t xid;
    int32_t op;
    /* CONNECT: the password's first (up to) 16 bytes and the length the
     * client sent, which may be anything: a reattach with any length but 16
     * is a wrong password (timeout 0), never a reason to drop the owner */
    int32_t timeout_ms;
    uint8_t passwd[SEQ_PASSWD_BYTES];
    int32_t passwd_len;
    int64_t last_zxid_seen;
    /* CONNECT in an ensemble: a new session whose id the server the client
     * is on has already chosen (session_id), forwarded to the leader */
    bool new_session;
    /* CONNECT: the client said it may be served read-only (canBeReadOnly) */
    bool read_only_ok;
    /* caller's identity (WRITE): owned copies */
    struct tree_authid *auth_ids;
    int32_t auth_count;
    char peer_ip[64];
    bool super;
    /* WRITE: the request body after the RequestHeader, owned */
    uint8_t *body;
    size_t body_len;
    /* Ensemble, at the leader: the member whose client sent it (the
     * leader's own id for its own clients; 0 standalone). A session's
     * writes are taken only from the member it is attached through. */
    uint32_t origin;
};
/* The op of a session's move to another member (ensemble.c "Sessions
 * move"): internal, never a client's (workers pass only ZooKeeper's write
 * ops to the sequencer). Its body is the session's password; its txn, the
 * move marker, is an ErrorTxn whose one op has this client_type and
 * err ZK_OK, or the reason the move was refused. */
#define SEQ_OP_REATTACH (-200)
/* Allocates a request with room for body_len bytes of body (copied from body
 * when not NULL) and auth_count ids (copied). NULL on allocation failure. */
struct seq_req *seq_req_new(int32_t kind, const void *body, size_t body_len,
                            const struct tree_authid *ids, int32_t auth_count);
void seq_req_free(struct seq_req *r);

/* What a worker receives, in order. */
enum seq_out_kind {
    SEQ_OUT_EVENTS = 1,  /* watch events of one round, through_zxid */
    SEQ_OUT_REPLY = 2,   /* a ready frame for conn; pending_done says a queued write finished */
    SEQ_OUT_CONNECT = 3, /* connect result: frame is the ConnectResponse */
    SEQ_OUT_CLOSE = 4,   /* close conn (expired, moved or closed session) after flushing frame */
};
/* One watch event as tree_apply reported it (struct tree_event). The worker
 * delivers it to a watcher only when the watcher's connection has READ on
 * acl (tree_acl_permits; NULL permits everyone), as ZooKeeper does. */
struct seq_event {
    int32_t type;
    int64_t zxid;
    char *path;
    /* One reference, owned by the batch: taken by the sequencer while the
     * event's node version was alive, dropped when the batch is freed. That
     * drop happens on whichever worker frees the batch last, with no grace
     * period, and that is safe: a node version drops its own reference only
     * in a call_rcu callback, so when the batch's is the last one no reader
     * can still hold the pointer (tree.h, struct tree_acl). */
    struct tree_acl *acl;
};
struct seq_events {
    unsigned long refs; /* shared by all workers; the last seq_out_free frees it */
    int64_t through_zxid;
    uint32_t count;
    struct seq_event *items;
};
struct seq_out {
    struct base_mpsc_node node; /* the queue that carries it (base.h) */
    int32_t kind;
    uint64_t conn;
    int64_t session_id;
    int32_t timeout_ms;     /* CONNECT: negotiated, 0 = session expired/invalid */
    uint8_t passwd[SEQ_PASSWD_BYTES]; /* CONNECT: the session password (zeros when refused) */
    bool read_only;         /* CONNECT: a read-only session: writes answer NOTREADONLY */
    bool pending_done;      /* REPLY: answers a request counted as pending */
    struct seq_events *events; /* EVENTS */
    uint8_t *frame;         /* REPLY/CONNECT/CLOSE: a complete length-prefixed frame, or NULL */
    size_t frame_len;
};
void seq_out_free(struct seq_out *o);

/* Creates the sequencer over tree t (which it will mutate) for nworkers
 * workers. Does not start the thread. NULL on failure. */
struct seq *seq_new(struct tree *t, const struct seq_cfg *cfg, int nworkers);
/* Starts the sequencer thread. 0 or -errno. */
int seq_start(struct seq *s);
/* Stops and joins the thread; pending requests are dropped. */
void seq_stop(struct seq *s);
void seq_free(struct seq *s);

/* Any thread: hands r to the sequencer (ownership moves). Does not wake
 * the sequencer: call seq_kick once after a batch of submits (a worker does it
 * once per loop pass), so one wake-up serves the whole batch. */
void seq_submit(struct seq *s, struct seq_req *r);
/* Wakes the sequencer if it is asleep; free when it is already running. */
void seq_kick(struct seq *s);
/* Flat combining (cfg.inline_rounds): the sequencer is a role, held by one
 * thread at a time, not necessarily the sequencer thread. A worker that has
 * just submitted writes calls this to take the role and run the queued rounds
 * itself, saving the two context switches of a hand-off when the sequencer
 * thread has no core of its own. Returns false, having done nothing, when
 * inline rounds are off or another thread holds the role (then seq_kick).
 * The caller must be a registered RCU thread outside a read-side section. */
bool seq_run_inline(struct seq *s);

/* eventfd that becomes readable when worker w has output while it sleeps. */
int seq_worker_fd(const struct seq *s, int w);
/* Worker w's sleep protocol (the same on both sides of every queue): call
 * seq_worker_idle_begin before blocking; when it returns false output is
 * already queued and the worker must not block. Call seq_worker_idle_end
 * after waking, and seq_worker_ack when the eventfd was readable. The
 * sequencer writes the eventfd only for a worker that announced sleep, and
 * for a round's watch events (SEQ_OUT_EVENTS) only when it announced
 * wants_events (it holds watches): a worker without watches finds the
 * batches queued when it next wakes, and a write costs no wake-up of every
 * idle worker on every server. */
bool seq_worker_idle_begin(struct seq *s, int w, bool wants_events);
void seq_worker_idle_end(struct seq *s, int w);
void seq_worker_ack(struct seq *s, int w);
/* Worker w's thread: takes every queued output in order and calls fn for
 * each; fn takes ownership of o (free with seq_out_free). Returns the count.
 * No system call when nothing is queued. */
typedef void (*seq_out_fn)(void *arg, struct seq_out *o);
size_t seq_worker_drain(struct seq *s, int w, seq_out_fn fn, void *arg);
/* The zxid of the txn the sequencer is applying or last applied (seq_cst).
 * A reader that observed tree state and then reads this value knows every
 * txn it could have seen is <= it (DESIGN.md invariant 3). */
int64_t seq_applying_zxid(const struct seq *s);
/* Whether this server's tree may be served to clients now: always when
 * standalone; a member only while it has a live leader and is not
 * resyncing (the state in which its TCP clients are served). Paths that
 * answer without a session (UDP reads) check it per request. Any thread. */
bool seq_serving(const struct seq *s);

/* The password a server with key gives the session id: HMAC-SHA-256(key,
 * id as 8 big-endian bytes), first SEQ_PASSWD_BYTES bytes. Without the key,
 * knowing ids and other sessions' passwords does not give a password
 * (ZooKeeper's java.util.Random seeded by sessionId ^ secret is
 * invertible; this is not). Pure, any thread. False only when libcrypto
 * fails (out is then untouched). */
bool seq_passwd_derive(const uint8_t key[SEQ_PASSWD_KEY_BYTES], int64_t id,
                       uint8_t out[SEQ_PASSWD_BYTES]);

/* Counters for mntr/srvr (relaxed reads, any thread). */
struct seq_stats {
    uint64_t writes;          /* requests answered */
    uint64_t rounds;
    uint64_t sessions_expired;
    uint64_t max_round;
    uint64_t outstanding;     /* submitted, not yet answered */
    int64_t log_error;        /* -errno of the failing log sync, 0 when writes flow */
    uint64_t log_syncs;       /* successful group commits */
};
void seq_get_stats(const struct seq *s, struct seq_stats *out);

/* ---- the digest log (the "hash" four-letter word) ------------------------
 * ZooKeeper's DataTree logs the tree digest after each txn whose zxid is a
 * multiple of DIGEST_LOG_INTERVAL (128), keeps the last DIGEST_LOG_LIMIT
 * (1024) of them, and its "hash" word prints them. The sequencer keeps the
 * same log of larchd's digest (tree_digest_running: a function of its own,
 * so the values are not ZooKeeper's; the zxids they are taken at are).
 * Only txns applied live are logged. The ones recovery replays over a
 * fuzzy snapshot may meet nodes already newer than they are (and so may
 * the first ones a member applies after installing a snapshot): the digest
 * then is not the tree's at that zxid. A member whose tree is replaced
 * (a snapshot from the leader, a resync after a digest mismatch) forgets
 * its log, as ZooKeeper starts a new DataTree. */
#define SEQ_DIGEST_LOG_INTERVAL 128
#define SEQ_DIGEST_LOG_MAX 1024
struct seq_digest {
    int64_t zxid;
    uint64_t digest; /* tree_digest_running once zxid was applied */
};
/* Copies the digest log (its newest max entries), oldest first, into out
 * and returns how many it copied. Any thread: it takes the log's lock,
 * which the sequencer takes once per SEQ_DIGEST_LOG_INTERVAL txns. */
size_t seq_digest_log(struct seq *s, struct seq_digest *out, size_t max);

/* ---- the round in steps (also used by tests without the thread) ---------
 * A round is prepared, made durable (and, in an ensemble, committed by a
 * quorum) and then finished, like etcd raft's Ready: preparing does no I/O
 * and changes nothing readers see; it hands out the txns to persist; the
 * caller persists them however it does (the txn log here, a simulator's
 * storage in tests) and only then finishes the round, which applies the
 * txns, pushes watch events and answers every request in order. No reply,
 * no event and no tree change goes out before the txns it depends on are
 * durable (DESIGN.md invariant 4). One round at a time: prepare the next
 * only after finishing this one (prep sees the txns of the round in flight
 * until tree_prep_reset, which finish calls). All of it runs on the thread
 * holding the sequencer role, inside rcu_read_lock. */
struct seq_round;
/* Prepares reqs (taking ownership) at now_ms (monotonic) and wall_ms
 * (ctime/mtime): validates each request, assigns zxids, builds txns. NULL
 * when out of memory; the requests are then dropped unanswered. */
struct seq_round *seq_round_prepare(struct seq *s, struct seq_req **reqs, size_t n,
                                    int64_t now_ms, int64_t wall_ms);
/* Entry i's txn, to persist before finishing (zxids increase with i), or
 * NULL when entry i changes nothing: sync and getEphemerals, and, without
 * cfg.error_txns, a failed write. */
size_t seq_round_len(const struct seq_round *r);
const struct txn *seq_round_txn(const struct seq_round *r, size_t i);
/* Applies r, pushes its events and replies to the worker queues, frees r. */
void seq_round_finish(struct seq *s, struct seq_round *r);
/* Drops r unanswered (shutdown). */
void seq_round_free(struct seq *s, struct seq_round *r);

/* The reply frame body (ReplyHeader and record, without the length prefix)
 * a client gets for a write of op with xid, built from the txn that answers
 * it and from tree_apply's results for it (NULL is fine when the txn is an
 * error, a failed multi or an empty multi): the same bytes on every server
 * that applies the txn. zxid goes into the header. Any thread; appends to w
 * (w->err on allocation failure). */
struct zk_wbuf;
void seq_put_txn_reply(struct zk_wbuf *w, int32_t op, int32_t xid, int64_t zxid,
                       const struct txn *x, const struct tree_op_result *results);

/* The standalone driver over cfg.log: one round over reqs (taking
 * ownership), prepared, appended and synced, finished. A round whose sync
 * fails (disk full, I/O error) is held: nothing of it is applied or
 * answered until seq_retry_held succeeds, and no new round may start. */
void seq_run_round(struct seq *s, struct seq_req **reqs, size_t n, int64_t now_ms, int64_t wall_ms);
/* True when no round is held; otherwise retries its sync and, on success,
 * finishes it (apply, events, replies) and returns true. */
bool seq_retry_held(struct seq *s);
/* Expires idle sessions and reaps containers/TTL nodes due at now_ms. */
void seq_tick(struct seq *s, int64_t now_ms, int64_t wall_ms);

/* ---- ensembles (ensemble.c) ----------------------------------------------
 * With cfg.ensemble the sequencer is one server of a Raft ensemble
 * (replication/README.md, "The replicated sequencer"). Every server serves
 * reads from its own tree; writes go to the leader (forwarded by followers
 * over the peer transport), which preps them against its tree plus the
 * round in flight, proposes one txn per request (failures as error txns),
 * and every server applies committed entries in zxid order and answers its
 * OWN clients from its own apply result, in the order they asked. Sessions
 * are created by txns (the server the client is on picks the id, myid in
 * its top byte), touched by followers and expired by the leader only.
 *
 * The peer transport is given as operations so that tests can run several
 * sequencers in one thread; larchd uses the peer link (peer_link.h). All
 * of them are called on the sequencer thread only. */
struct seq_peer_ops {
    /* Queue one frame for m->to / to; 0, or <0 when it was dropped (no
     * link, queue full): Raft retransmits, a forward's writer times out. */
    int (*send_msg)(void *arg, const struct raft_msg *m);
    int (*send_forward)(void *arg, uint32_t to, const struct peer_forward *f);
    /* The generation of the link to `to` a frame sent now travels on (0:
     * none up): frames of one generation arrive in order, or from the
     * first loss on not at all (peer_link_gen). A session's write may
     * follow its unanswered one only on the same generation. NULL: the
     * transport never loses a frame it accepted (tests). */
    uint64_t (*link_gen)(void *arg, uint32_t to);
    int (*send_touch)(void *arg, uint32_t to, const int64_t *ids, uint32_t n);
    /* After a batch of sends. */
    void (*flush)(void *arg);
    /* Delivers what has arrived, in order, by calling seq_peer_msg /
     * seq_peer_forward / seq_peer_touch / seq_peer_down on s. Returns the
     * number of items. */
    size_t (*drain)(void *arg, struct seq *s);
    /* Whether anything waits to be drained (the thread's last check before
     * it sleeps); NULL: the thread relies on seq_kick alone. */
    bool (*has_input)(void *arg);
    /* A transport without a thread of its own (peer_link's inline_io): the
     * sequencer thread calls pump before each step (it moves bytes between
     * sockets and queues and returns the ms until it is due again, 0: at
     * once) and sleeps on io_fd (readable: pump has work) beside its own.
     * Sends then go out from the step itself, in flush. NULL: none. */
    int (*pump)(void *arg);
    int (*io_fd)(void *arg);
    /* The membership this server uses changed (a CONFIG entry appended or
     * truncated, a snapshot installed): links to every member of either
     * half, described by c->extra (larchd: server.N lines), and none to
     * servers that left. c is borrowed. NULL: the membership is fixed. */
    void (*membership)(void *arg, const struct raft_config *c);
};

/* Snapshots for catch-up: the leader sends one to a follower that needs
 * entries its log no longer holds, and the follower installs it
 * (replication/README.md, "Catch-up"). Called on the sequencer thread. */
struct seq_snap_ops {
    /* The zxid (zxid_start) of the newest snapshot this server holds
     * durably, 0 for none. The driver compacts its in-memory log to it. */
    int64_t (*newest)(void *arg);
    /* The bytes of the snapshot at zxid, as tree_snapshot_write wrote them:
     * *data is malloc'ed and the caller's. 0 or -errno (-ENOENT: purged). */
    int (*read)(void *arg, int64_t zxid, uint8_t **data, size_t *len);
    /* Makes data (a snapshot from the leader, zxid_start zxid, already
     * checked by loading it) this server's only snapshot, durably: newer
     * ones (of a tree that diverged: a resync) go, and so do the older
     * ones and the log segments before zxid: the log below zxid may hold
     * entries the leader never committed. Segments after zxid stay. conf
     * is the membership at zxid that came with it: kept with it, as
     * membership below says. 0 or -errno. */
    int (*persist)(void *arg, int64_t zxid, const uint8_t *data, size_t len,
                   const struct raft_config *conf);
    /* The membership in effect from zxid on (a CONFIG entry applied, i.e.
     * committed): snapshots taken at zxid or later keep it, and give it
     * back at start (raft_boot.snap_config). Any membership that changed
     * is reported before the snapshot thread can take a snapshot past it. */
    void (*membership)(void *arg, int64_t zxid, const struct raft_config *conf);
    /* A follower asked for a newer snapshot than newest(): take one soon
     * (returns at once; the driver compacts to it when newest() shows it). */
    void (*want)(void *arg);
    /* This server's tree diverged from the leader's (a digest mismatch):
     * take no snapshot of it until persist installs the leader's, or
     * hold_end says its tree is the ensemble's after all (it was elected
     * leader before the snapshot came). */
    void (*hold)(void *arg);
    void (*hold_end)(void *arg);
};

/* ZooKeeper's dynamic reconfig (opcode 16; replication/README.md,
 * "Reconfig"). The driver runs the protocol; the server, which knows the
 * configuration's format, decides requests and renders /zookeeper/config.
 * Called on the sequencer thread. */
struct seq_reconfig_plan {
    struct raft_member members[RAFT_MEMBERS_MAX]; /* the new membership */
    uint32_t n_members;
    /* the CONFIG entry's description: every member of the old and the new
     * membership (a kept member as the new one names it); malloc'd, the
     * caller frees it */
    uint8_t *extra;
    size_t extra_len;
};
struct seq_reconfig_ops {
    /* Decides a reconfig request: body is its ReconfigRequest record, super
     * whether its session is a superuser's (reconfig is theirs only), cur
     * the membership now (its description in cur->extra; none: the
     * configured one), version what /zookeeper/config's version says now
     * (0 for the configured one), synced the voters heard from lately.
     * ZK_OK with *out filled, or a ZooKeeper error code (ZK_ENOAUTH,
     * ZK_ERECONFIGDISABLED, ZK_EBADVERSION, ZK_EBADARGUMENTS,
     * ZK_ENEWCONFIGNOQUORUM, ...), with out->extra NULL. */
    int (*plan)(void *arg, const uint8_t *body, size_t len, bool super,
                const struct raft_config *cur, int64_t version, uint32_t leader_id,
                const uint32_t *synced, uint32_t n_synced, struct seq_reconfig_plan *out);
    /* /zookeeper/config's text for c's members (the final half) with its
     * version line: malloc'd and NUL-terminated; NULL without memory. */
    char *(*text)(void *arg, const struct raft_config *c, int64_t version);
    /* A reconfig applied here: /zookeeper/config now reads text (len
     * bytes), e.g. for dynamicConfigFile. */
    void (*applied)(void *arg, const char *text, size_t len);
};

struct seq_ensemble_cfg {
    struct raft_cfg raft;   /* self, members, ticks, seed (raft_new copies) */
    struct raft_boot boot;  /* durable state at start (raft_new copies) */
    int32_t raft_tick_ms;   /* one raft_tick per this many ms */
    const struct seq_peer_ops *peer;
    void *peer_arg;
    /* Where term and vote live (txnlog_hard_state_write); st NULL: nowhere
     * (tests of the driver only: a real server must persist them). */
    struct storage *hard_state_st;
    const char *hard_state_dir;
    /* A write this server forwarded and has not seen committed after this
     * long fails: its connection closes and the client reconnects (0: four
     * election timeouts). */
    int64_t pending_timeout_ms;
    /* Committed entries up to this zxid may already be in the tree (it was
     * recovered from a fuzzy snapshot): applying one again is idempotent and
     * a txn that no longer fits is skipped, as recovery's replay does. Past
     * it, a txn that does not apply means this replica diverged: fatal. */
    int64_t tolerate_repeats_until;
    /* readonlymode.enabled: while this server has no leader it serves
     * clients that allow it read-only (ZooKeeper's ReadOnlyZooKeeperServer);
     * off, it serves nobody then. */
    bool read_only_mode;
    /* NULL: the log is never compacted and a snapshot from the leader is
     * fatal (tests of the driver that need neither). */
    const struct seq_snap_ops *snap;
    void *snap_arg;
    /* Entries kept in memory before the newest snapshot's zxid, so that a
     * follower just behind gets a DIFF rather than a snapshot (ZooKeeper's
     * commitLogCount; 0: 500). */
    uint32_t commit_log_count;
    /* NULL: reconfig (opcode 16) answers RECONFIGDISABLED */
    const struct seq_reconfig_ops *reconfig;
    void *reconfig_arg;
};

/* The transport's drain calls these (sequencer thread). m is a raft
 * message with from/to set by the link; f and ids are borrowed. */
void seq_peer_msg(struct seq *s, const struct raft_msg *m);
void seq_peer_forward(struct seq *s, uint32_t from, const struct peer_forward *f);
void seq_peer_touch(struct seq *s, uint32_t from, const int64_t *ids, uint32_t n);
/* The link to id went down: frames sent to it may be lost. */
void seq_peer_down(struct seq *s, uint32_t id);

/* One pass of the ensemble driver at now_ms (monotonic) and wall_ms: takes
 * local requests and peer input, ticks the core, runs a leader's round,
 * persists, sends, applies and answers. The sequencer thread runs it in a
 * loop; tests drive it directly (inside rcu_read_lock, holding no other
 * role). Returns how many ms it may sleep if nothing arrives. */
int64_t seq_ens_step(struct seq *s, int64_t now_ms, int64_t wall_ms);
/* Frees what the last passes retired (a tree's old contents after a
 * snapshot replaced them): waits for a grace period, so call it after
 * seq_ens_step OUTSIDE rcu_read_lock. Cheap when there is nothing. */
void seq_ens_release(struct seq *s);

/* What mntr/srvr show (any thread; a copy made at the end of each pass). */
struct seq_ens_status {
    struct raft_status raft;
    uint64_t forwards_sent;     /* writes this server forwarded to a leader */
    uint64_t forwards_received; /* as leader: writes other servers forwarded */
    uint64_t pending;           /* own clients' writes and syncs not yet answered */
    uint64_t pending_failed;    /* ... whose connection was closed instead (leader lost) */
    uint64_t proposals;         /* as leader: txns proposed */
    uint64_t applied;           /* committed entries applied */
    uint64_t snapshots_sent;      /* as leader: snapshots sent to followers behind its log */
    uint64_t snapshots_installed; /* snapshots from a leader installed here */
    bool serving;   /* clients are served: this server has a live leader */
    bool read_only; /* no leader, and read-only clients are served (readonlymode) */
    /* The tree's digest (tree_digest_running) when this server had applied
     * through digest_zxid: servers at the same zxid must agree. */
    uint64_t digest;
    int64_t digest_zxid;
    /* Digests compared with the leader's (one per zxid a leader's APPEND
     * named and this server applied), and how many differed: each makes
     * this server resync from the leader's snapshot, not serving meanwhile. */
    uint64_t digest_checks;
    uint64_t digest_mismatches;
    bool resyncing;
};
/* False when the sequencer is standalone. */
bool seq_ens_status(struct seq *s, struct seq_ens_status *out);

#endif /* LARCH_REPLICATION_H */
