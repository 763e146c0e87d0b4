/*
 * ensemble.c — the replicated driver: the sequencer as one server of a Raft
 * ensemble (replication.h "ensembles", replication/README.md "The
 * replicated sequencer").
 *
 * The Raft core (raft.c) decides what is committed; this file does what its
 * Ready asks (persist, send, apply) and everything around it that makes a
 * ZooKeeper server: forwarding writes to the leader, running the leader's
 * rounds, answering each server's own clients from committed txns, sessions
 * created by txns and expired by the leader only, and sync.
 *
 * Replies: every server answers only its own clients. It remembers their
 * writes, syncs and getEphemerals in one FIFO (the pending list), in the
 * order they arrived. A write is answered when its txn (session, cxid)
 * is applied here. The cxid a write carries to the leader, and so its
 * txn's, is not the client's xid but a routing id this server draws for it
 * (the reply still carries the client's xid): a client reuses xids on
 * every connection, so a write that failed here, reached the leader
 * anyway and committed later must not answer a new request that happens
 * to carry the same xid. A routing id names the member that drew it in its
 * top bits, so a session's txns from two members (it moved) never match
 * each other's requests. This server's writes reach the log in the order it sent
 * them (one FIFO link to the leader, which preps in arrival order), so the
 * first unanswered write is the one a committed txn of ours must match; a
 * commit that matches a later one proves the earlier ones were lost, and
 * their connections close (the client reconnects and keeps its session, as
 * when a ZooKeeper server loses its leader). A leader change, or a
 * forward unanswered for pending_timeout_ms, fails every unanswered write
 * the same way: its txn may still commit under the next leader, but nobody
 * waits for it any more.
 *
 * The leader pipelines its rounds: it preps the queued requests against its
 * tree plus the pending-change overlay (which holds every change proposed
 * and not yet applied), proposes one txn per request, and may prepare the
 * next round while earlier ones are still being replicated, up to
 * ENS_PIPELINE_MAX rounds. The overlay is reset once everything proposed
 * has been applied: on the leader only its own proposals change the tree,
 * so an overlay entry for an applied change says what the tree says. It
 * preps nothing before it has applied its whole log: a new leader's state
 * is only right once its no-op has committed everything before it.
 *
 * Everything here runs on the thread holding the sequencer role.
 */
#include "replication/seq_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <urcu.h>

#define ENS_WORKER_REMOTE INT32_MAX /* seq_req.worker of a forwarded request */
#define ENS_READ_RETRIES 3          /* a sync's ReadIndex is retried this often */
#define ENS_READY_MAX 64            /* Ready cycles per pass (more waits for the next) */
#define ENS_LOCAL_MAX (4 * SEQ_ROUND_MAX) /* local requests taken per pass */
#define ENS_COMMIT_LOG_COUNT 500           /* seq_ensemble_cfg.commit_log_count's default */
/* Rounds a leader keeps in flight. Each waits for a quorum's fsync; more
 * of them overlap those waits. Then the pipeline drains, and the overlay
 * is reset, before the next round: that bounds the overlay. */
#define ENS_PIPELINE_MAX 8
#define ENS_HELD_CONNECTS_MAX 4096 /* connects held while no leader is known */
/* A routing id is (member id << ENS_CXID_BITS) | counter: positive for
 * every member id up to 255, the counter wraps after 8 M requests. */
#define ENS_CXID_BITS 23
#define ENS_CXID_MASK ((1u << ENS_CXID_BITS) - 1)

/* The digests after the last applies this server remembers, to compare
 * with a leader's for a zxid it has already passed. The leader's is never
 * far behind: it sends the digest of what it applied last. */
#define ENS_DIGEST_RING 256u

/* A snapshot travels as a 16-byte header and the snapshot file's bytes:
 * "LRSX", u32 version (1), i64 repeats_until, little-endian. The snapshot
 * is fuzzy (tree.h): it may already hold txns after its zxid_start, up to
 * the sender's applied zxid, which is repeats_until. The receiver applies
 * those again and must tolerate that they no longer fit. */
#define ENS_SNAP_MAGIC "LRSX"
#define ENS_SNAP_VERSION 1u
#define ENS_SNAP_HEADER 16u

#define ENS_CONFIG_PATH "/zookeeper/config"

/* Pseudo auth schemes a FORWARD uses to carry the client's address and
 * super flag. A client can never hold them: addauth with an unknown scheme
 * fails and closes the connection. */
#define ENS_AUTH_PEER_IP "larch:peer-ip"
#define ENS_AUTH_SUPER "larch:super"

enum pend_kind {
    PEND_DONE = 0,    /* answered or failed: popped when it reaches the head */
    PEND_WRITE = 1,   /* a write: answered from its committed txn */
    PEND_CONNECT = 2, /* a new session: answered from its createSession txn */
    PEND_SYNC = 3,    /* sync: answered after a ReadIndex and the applies it asks for */
    PEND_LOCAL = 4,   /* getEphemerals: answered from this tree, in session order */
    PEND_ATTACH = 5,  /* a new session's connect this server is too far behind to
                       * judge: after a ReadIndex and the applies it asks for, it is */
    PEND_REATTACH = 6, /* a session moving here: answered from its move marker */
};

enum read_state { READ_WAIT = 0, READ_OK = 1, READ_FAILED = 2 };

struct pend {
    uint8_t kind;
    uint8_t read_state;
    uint8_t read_tries;
    int32_t worker;
    uint64_t conn;
    int64_t session_id;
    int32_t xid;  /* the client's xid (0 for CONNECT): the reply's */
    int32_t cxid; /* WRITE, REATTACH: the routing id its txn carries as cxid; CONNECT: 0 */
    int32_t op;
    int64_t since_ms;
    uint64_t read_ctx;
    int64_t read_zxid;
    struct seq_req *req; /* SYNC/LOCAL: the request (its path); ATTACH/REATTACH: the
                          * connect; else NULL */
    /* WRITE: where it went (see write_dest) */
    uint32_t dest_id, dest_term;
    uint64_t dest_gen;
};

/* A reply waiting for its apply batch's events to go out first. */
struct staged {
    int32_t worker;
    struct seq_out *out;
};

struct seq_ens {
    struct raft *raft;
    uint32_t self_id;
    int64_t tick_ms;
    int64_t next_tick_ms;
    bool ticking; /* next_tick_ms is set */
    const struct seq_peer_ops *peer;
    void *peer_arg;
    struct storage *hs_st;
    char *hs_dir;
    int64_t pending_timeout_ms;
    int64_t tolerate_repeats_until;

    /* what the core last said about leadership */
    uint32_t known_term;
    uint32_t known_leader;
    bool was_leader;
    /* Clients are served only while this server has a leader's lease
     * (watch_serving); ever_served quiets the first transition's log line. */
    bool serving, ever_served;
    /* readonlymode.enabled: without a leader, read-only clients are served;
     * their connections close when a leader is back (they look for one) */
    bool ro_enabled;
    struct ro_conn {
        int32_t worker;
        uint64_t conn;
    } *ro_conns;
    size_t n_ro_conns, cap_ro_conns;
    /* connects that arrived without a leader: held (not refused, so the
     * client need not back off and retry) until one is elected, for at
     * most half the forwarded-request timeout (two election timeouts) */
    struct held_connect {
        struct seq_req *req;
        int64_t since_ms;
    } *held;
    size_t n_held, cap_held;

    /* leader: requests for the next round, and the round in flight */
    struct seq_req **input;
    size_t n_input, cap_input;
    uint32_t rounds_in_flight; /* proposed since the overlay was last reset */
    int64_t round_last_zxid;   /* the last txn proposed: the overlay resets once it applies */
    int64_t last_expiry_ms, last_reap_ms, last_touch_ms;

    /* Connections whose write failed (closed, its fate unknown): writes
     * they pipelined behind it fail too, until the worker's DISCONNECT says
     * nothing more comes (sooner is not safe: the session's order) */
    struct dead_conn {
        int32_t worker;
        uint64_t conn;
        int64_t since_ms;
    } *dead;
    size_t n_dead, cap_dead;
    int64_t now_ms; /* the pass's */

    /* this server's clients' unanswered requests, oldest first */
    struct pend *pend;
    size_t pend_head, pend_len, pend_cap; /* live entries: [head, len) */
    size_t pend_live;                     /* entries not DONE */
    uint64_t next_read_ctx;
    uint32_t next_cxid; /* routing ids' counter, from a seeded start */

    struct staged *staged;
    size_t n_staged, cap_staged;
    struct base_buf enc; /* txn encodings for proposals */
    bool kicked[SEQ_WORKERS_MAX];

    /* stats, copied to status under status_lock at the end of each pass */
    uint64_t forwards_sent, forwards_received, pending_failed, proposals, applied;
    pthread_mutex_t status_lock;
    struct seq_ens_status status;

    /* catch-up by snapshot (NULL snap: never compacts, cannot install) */
    const struct seq_snap_ops *snap;
    void *snap_arg;
    uint32_t commit_log_count;
    struct base_buf snap_out; /* leader: header + the snapshot at snap_out_zxid */
    int64_t snap_out_zxid;
    int64_t snap_unreadable_zxid; /* a snapshot that could not be read (said once) */
    struct tree **retired;        /* old tree contents, freed by seq_ens_release */
    size_t n_retired, cap_retired;
    uint64_t snaps_sent, snaps_installed;

    /* Digests (replication/README.md, "Digests"): the tree's digest after
     * each recent apply (exact ones only: past tolerate_repeats_until), and
     * a leader's digest for a zxid this server has not applied yet. */
    struct digest_at {
        int64_t zxid;
        uint64_t digest;
    } digests[ENS_DIGEST_RING];
    uint32_t n_digests, digest_head; /* head: the next slot written */
    struct digest_at check;          /* zxid 0: none */
    uint32_t check_from;
    /* a mismatch: not serving, waiting for the leader's snapshot (asked:
     * the core was told, which cannot happen inside a ready) */
    bool resyncing, resync_asked;
    uint64_t digest_checks, digest_mismatches;

    /* Reconfig (NULL ops: opcode 16 is RECONFIGDISABLED, in prep), and the
     * membership the peer link was last told about (its entry's zxid) */
    const struct seq_reconfig_ops *reconfig;
    void *reconfig_arg;
    int64_t links_config_zxid;
    bool links_told;
    /* leader: the membership and /zookeeper/config version last found to
     * agree (leader_config_node_current), so it compares once per change */
    int64_t node_checked_config_zxid, node_checked_mzxid;

    /* The log writer (with a txn log): each Ready's truncation and entries
     * go to its thread as batch number batches_submitted (counted from 1);
     * the messages that depend on the disk wait in late, oldest first,
     * until the batch before them is durable (raft.h, cfg.async_log). */
    struct logw *logw;
    uint64_t batches_submitted, batches_synced;
    struct late_msg {
        uint64_t batch;
        struct raft_msg m;
    } *late;
    size_t late_head, n_late, cap_late;
};

static bool is_leader(const struct seq_ens *e)
{
    struct raft_brief st = raft_brief(e->raft);
    return st.role == RAFT_LEADER;
}

_Noreturn void sq_ens_fatal(const char *what, int err)
{
    base_log(BASE_LOG_ERROR,
             "larchd: ensemble: %s (%s); stopping: this server restarts from its disk",
             what, err ? strerror(err < 0 ? -err : err) : "invariant");
    abort();
}

/* ---- the pending list ------------------------------------------------------ */

static struct pend *pend_add(struct seq_ens *e, uint8_t kind, const struct seq_req *r,
                             int64_t session_id, int32_t xid, int64_t now_ms)
{
    if (e->pend_head > 0 && e->pend_len == e->pend_cap) {
        /* slide the live entries down before growing */
        memmove(e->pend, e->pend + e->pend_head, (e->pend_len - e->pend_head) * sizeof *e->pend);
        e->pend_len -= e->pend_head;
        e->pend_head = 0;
    }
    if (base_grow(&e->pend, &e->pend_cap, e->pend_len + 1, sizeof *e->pend) != 0)
        return NULL;
    struct pend *p = &e->pend[e->pend_len++];
    *p = (struct pend){ .kind = kind, .worker = r->worker, .conn = r->conn,
                        .session_id = session_id, .xid = xid, .op = r->op,
                        .since_ms = now_ms };
    e->pend_live++;
    return p;
}

static void pend_pop_done(struct seq_ens *e)
{
    while (e->pend_head < e->pend_len && e->pend[e->pend_head].kind == PEND_DONE)
        e->pend_head++;
    if (e->pend_head == e->pend_len)
        e->pend_head = e->pend_len = 0;
}

static void stage(struct seq *s, int32_t worker, struct seq_out *o)
{
    struct seq_ens *e = s->ens;
    if (!o)
        return;
    if (base_grow(&e->staged, &e->cap_staged, e->n_staged + 1, sizeof *e->staged) != 0) {
        /* cannot keep it for after the events: send it now (the connection
         * still gets its answer, possibly before a notification) */
        sq_out_push(s, worker, o);
        if (worker >= 0 && worker < SEQ_WORKERS_MAX)
            e->kicked[worker] = true;
        return;
    }
    e->staged[e->n_staged++] = (struct staged){ worker, o };
}

/* Marks p answered: the request leaves the sequencer's custody. */
static void pend_finish(struct seq *s, struct pend *p)
{
    struct seq_ens *e = s->ens;
    if (p->worker >= 0 && p->worker < SEQ_WORKERS_MAX)
        e->kicked[p->worker] = true;
    seq_req_free(p->req);
    p->req = NULL;
    p->kind = PEND_DONE;
    e->pend_live--;
    atomic_fetch_sub_explicit(&s->st_outstanding, 1, memory_order_relaxed);
}

static size_t dead_find(const struct seq_ens *e, int32_t worker, uint64_t conn)
{
    for (size_t i = 0; i < e->n_dead; i++)
        if (e->dead[i].worker == worker && e->dead[i].conn == conn)
            return i;
    return SIZE_MAX;
}

static void dead_add(struct seq_ens *e, int32_t worker, uint64_t conn)
{
    if (dead_find(e, worker, conn) != SIZE_MAX)
        return;
    if (base_grow(&e->dead, &e->cap_dead, e->n_dead + 1, sizeof *e->dead) != 0)
        return; /* the worker closes the connection all the same */
    e->dead[e->n_dead++] = (struct dead_conn){ worker, conn, e->now_ms };
}

static void dead_forget(struct seq_ens *e, int32_t worker, uint64_t conn)
{
    size_t i = dead_find(e, worker, conn);
    if (i != SIZE_MAX)
        e->dead[i] = e->dead[--e->n_dead];
}

/* Entries whose DISCONNECT never came (it found no memory, or the
 * connection had gone before its write failed): by now no request of
 * theirs can still be on its way. */
static void dead_expire(struct seq_ens *e)
{
    int64_t keep_ms = 16 * e->pending_timeout_ms;
    for (size_t i = 0; i < e->n_dead;) {
        if (e->now_ms - e->dead[i].since_ms > keep_ms)
            e->dead[i] = e->dead[--e->n_dead];
        else
            i++;
    }
}

/* The client is not answered: its connection closes, and it reconnects
 * (to any server) with its session. */
static void pend_fail(struct seq *s, struct pend *p)
{
    if (p->kind == PEND_WRITE)
        dead_add(s->ens, p->worker, p->conn);
    struct seq_out *o = sq_out_new(SEQ_OUT_CLOSE, p->conn);
    if (o) {
        o->session_id = p->session_id;
        stage(s, p->worker, o);
    }
    s->ens->pending_failed++;
    pend_finish(s, p);
}

/* Fails every unanswered write, connect and sync (a leader change: what was
 * sent to the old leader may never commit). getEphemerals stays: it is
 * answered from this tree. */
static void pend_fail_all(struct seq *s)
{
    struct seq_ens *e = s->ens;
    for (size_t i = e->pend_head; i < e->pend_len; i++) {
        struct pend *p = &e->pend[i];
        if (p->kind != PEND_DONE && p->kind != PEND_LOCAL)
            pend_fail(s, p);
    }
    pend_pop_done(e);
}

/* Whether p waits for a txn of its own (a write, a new session, a move). */
static bool pend_has_txn(const struct pend *p)
{
    return p->kind == PEND_WRITE || p->kind == PEND_CONNECT || p->kind == PEND_REATTACH;
}

/* The pending request a committed txn (session, cxid) answers, or NULL.
 * Ours commit in the order we sent them, so it is the first one; if a
 * later one matches, the ones before it were lost and fail. */
static struct pend *pend_match(struct seq *s, int64_t session_id, int32_t cxid)
{
    struct seq_ens *e = s->ens;
    size_t at = e->pend_len;
    for (size_t i = e->pend_head; i < e->pend_len; i++) {
        struct pend *p = &e->pend[i];
        if (pend_has_txn(p) && p->session_id == session_id && p->cxid == cxid) {
            at = i;
            break;
        }
    }
    if (at == e->pend_len)
        return NULL;
    for (size_t i = e->pend_head; i < at; i++) {
        struct pend *p = &e->pend[i];
        if (pend_has_txn(p))
            pend_fail(s, p);
    }
    return &e->pend[at];
}

/* Whether an entry before index i is still waiting for the same session:
 * a session's answers go out in the order it asked (DESIGN.md invariant 2). */
static bool pend_session_waits(const struct seq_ens *e, size_t i, int64_t session_id)
{
    for (size_t k = e->pend_head; k < i; k++)
        if (e->pend[k].kind != PEND_DONE && e->pend[k].session_id == session_id)
            return true;
    return false;
}

/* ---- replies ---------------------------------------------------------------- */

static struct seq_out *reply_frame(int32_t kind, const struct pend *p, struct zk_wbuf *w)
{
    struct seq_out *o = sq_out_with_frame(kind, p->conn, w);
    if (!o)
        o = sq_out_new(SEQ_OUT_CLOSE, p->conn); /* no reply can be built: close */
    if (o) {
        o->pending_done = true;
        o->session_id = p->session_id;
    }
    return o;
}

static void answer_write(struct seq *s, struct pend *p, const struct txn *x,
                         const struct tree_op_result *res)
{
    struct zk_wbuf w;
    zk_wbuf_init(&w);
    size_t mark = zk_frame_begin(&w);
    seq_put_txn_reply(&w, p->op, p->xid, x->zxid, x, res);
    zk_frame_end(&w, mark);
    bool closing = p->op == ZK_OP_CLOSESESSION && x->type != TXN_ERROR;
    stage(s, p->worker, reply_frame(closing ? SEQ_OUT_CLOSE : SEQ_OUT_REPLY, p, &w));
    zk_wbuf_free(&w);
    atomic_fetch_add_explicit(&s->st_writes, 1, memory_order_relaxed);
    pend_finish(s, p);
}

static void answer_connect(struct seq *s, struct pend *p, int64_t now_ms)
{
    struct seq_out *o = sq_out_new(SEQ_OUT_CONNECT, p->conn);
    struct tree_session *ts = tree_session_find(s->tree, p->session_id);
    if (o && ts && !ts->closing && ts->passwd_known) {
        /* the password the leader recorded in the createSession txn: the
         * one every member checks a reattach against */
        sq_take_ownership(s, ts, p->worker, p->conn, now_ms);
        o->session_id = p->session_id;
        o->timeout_ms = ts->timeout_ms;
        memcpy(o->passwd, ts->passwd, sizeof o->passwd);
    } else if (o) {
        o->timeout_ms = 0; /* as ZooKeeper answers a session it cannot give */
        memset(o->passwd, 0, sizeof o->passwd);
    }
    stage(s, p->worker, o);
    pend_finish(s, p);
}

/* sync's reply: the path back, after this server applied what the leader
 * had committed when the sync arrived (ZooKeeper's sync, made linearizable
 * by the ReadIndex). getEphemerals: this server's view, in session order. */
static void answer_local(struct seq *s, struct pend *p)
{
    struct base_rd rb;
    base_rd_init(&rb, p->req->body, p->req->body_len);
    struct zk_path_req q;
    bool ok = zk_get_path_req(&rb, &q);
    struct zk_wbuf w;
    zk_wbuf_init(&w);
    size_t mark = zk_frame_begin(&w);
    sq_put_reply_header(&w, p->xid, tree_last_zxid(s->tree), ok ? ZK_OK : ZK_EMARSHALLINGERROR);
    if (ok && p->kind == PEND_SYNC)
        zk_put_str(&w, q.path);
    else if (ok)
        sq_put_ephemerals(s, &w, p->session_id, &q.path);
    zk_frame_end(&w, mark);
    stage(s, p->worker, reply_frame(SEQ_OUT_REPLY, p, &w));
    zk_wbuf_free(&w);
    atomic_fetch_add_explicit(&s->st_writes, 1, memory_order_relaxed);
    pend_finish(s, p);
}

/* Hands the staged replies to workers after the events of the txns they
 * answer, then wakes the workers that got something. */
static void flush_staged(struct seq *s, bool applied_any)
{
    struct seq_ens *e = s->ens;
    if (applied_any || s->evb->count)
        sq_push_events(s, s->evb, tree_last_zxid(s->tree));
    for (size_t i = 0; i < e->n_staged; i++) {
        int32_t w = e->staged[i].worker;
        sq_out_push(s, w, e->staged[i].out);
        if (w >= 0 && w < s->nworkers)
            e->kicked[w] = true;
    }
    e->n_staged = 0;
    for (int w = 0; w < s->nworkers; w++) {
        if (e->kicked[w] || applied_any)
            sq_wake_worker(s, w, e->kicked[w]);
        e->kicked[w] = false;
    }
}

/* ---- applying committed entries ------------------------------------------- */

/* The local connection of session id, to close when its closeSession
 * applies (expiry, or a close through another server). */
static bool local_owner(struct seq *s, int64_t id, int32_t *worker, uint64_t *conn)
{
    struct tree_session *ts = tree_session_find(s->tree, id);
    if (!ts)
        return false;
    *worker = atomic_load(&ts->owner_worker);
    *conn = atomic_load(&ts->owner_conn);
    return *worker >= 0 && *worker < s->nworkers;
}

static bool closes_session(const struct txn *x)
{
    for (uint32_t i = 0; i < x->nops; i++)
        if (x->ops[i].type == TXN_CLOSE_SESSION)
            return true;
    return false;
}

/* A move marker the leader took (replication.h SEQ_OP_REATTACH). */
static bool moves_session(const struct txn *x)
{
    return x->type == TXN_ERROR && x->nops == 1 && x->ops[0].client_type == SEQ_OP_REATTACH &&
           x->ops[0].err == ZK_OK;
}

static void answer_reattach(struct seq *s, struct pend *p, bool moved, int64_t now_ms);

/* ---- digests ---------------------------------------------------------------- */

static struct digest_at *digest_newest(struct seq_ens *e)
{
    if (e->n_digests == 0)
        return NULL;
    return &e->digests[(e->digest_head + ENS_DIGEST_RING - 1) % ENS_DIGEST_RING];
}

static const struct digest_at *digest_find(const struct seq_ens *e, int64_t zxid)
{
    for (uint32_t i = 1; i <= e->n_digests; i++) {
        const struct digest_at *d =
            &e->digests[(e->digest_head + ENS_DIGEST_RING - i) % ENS_DIGEST_RING];
        if (d->zxid == zxid)
            return d;
        if (d->zxid < zxid)
            break;
    }
    return NULL;
}

/* The tree was replaced, or is about to be: the digests taken so far,
 * here and in "hash"'s log, are not of the tree this server will have. */
static void digests_forget(struct seq *s)
{
    struct seq_ens *e = s->ens;
    sq_digest_log_forget(&s->digest_log);
    e->n_digests = e->digest_head = 0;
    e->check = (struct digest_at){ 0 };
}

/* This replica's tree differs from its leader's at the same zxid: it
 * diverged (a bug, or a disk or memory fault no checksum caught), and
 * every read it serves and every txn it applies builds on that. It stops
 * serving, takes no snapshot of the diverged tree, and asks the leader for
 * its snapshot; the log it holds stays (its votes and acks still count). */
static void digest_mismatch(struct seq *s, int64_t zxid, uint64_t mine, uint64_t leaders,
                            uint32_t leader)
{
    struct seq_ens *e = s->ens;
    e->digest_mismatches++;
    base_log(BASE_LOG_ERROR, "larchd: ensemble: DIGEST MISMATCH at zxid 0x%llx: this server's tree "
                             "hashes to %016llx, the leader's (server %u) to %016llx. This replica "
                             "diverged: it stops serving and rebuilds from the leader's snapshot",
             (unsigned long long)zxid, (unsigned long long)mine, leader,
             (unsigned long long)leaders);
    if (!e->snap)
        sq_ens_fatal("replica diverged and this server has no snapshot store to resync", 0);
    e->snap->hold(e->snap_arg);
    e->resyncing = true;
    e->resync_asked = false;
    digests_forget(s);
}

/* Between readies: the core asks the leader for its snapshot; a leader
 * asked for one by a follower has one taken. */
static void resync_requests(struct seq *s)
{
    struct seq_ens *e = s->ens;
    if (e->resyncing && !e->resync_asked) {
        int rc = raft_request_snapshot(e->raft);
        BASE_ASSERT(rc == RAFT_OK); /* a leader stops resyncing (watch_leadership) */
        e->resync_asked = true;
    }
    if (!e->snap || !e->was_leader)
        return;
    struct raft_status st;
    raft_status(e->raft, &st);
    for (uint32_t i = 0; i < st.n_peers; i++)
        if (st.peers[i].snap_wanted > 0)
            e->snap->want(e->snap_arg); /* compact_log makes it the SNAP's */
}

static void digest_compare(struct seq *s, int64_t zxid, uint64_t mine, uint64_t leaders,
                           uint32_t leader)
{
    struct seq_ens *e = s->ens;
    e->digest_checks++;
    if (mine != leaders)
        digest_mismatch(s, zxid, mine, leaders, leader);
}

/* The tree hashes to digest after applying zxid (exactly: no repeats of a
 * fuzzy snapshot are still to come). */
static void digest_note(struct seq *s, int64_t zxid, uint64_t digest)
{
    struct seq_ens *e = s->ens;
    e->digests[e->digest_head] = (struct digest_at){ zxid, digest };
    e->digest_head = (e->digest_head + 1) % ENS_DIGEST_RING;
    if (e->n_digests < ENS_DIGEST_RING)
        e->n_digests++;
    if (e->check.zxid != 0 && zxid >= e->check.zxid) {
        struct digest_at c = e->check;
        e->check = (struct digest_at){ 0 };
        if (zxid == c.zxid)
            digest_compare(s, zxid, digest, c.digest, e->check_from);
    }
}

/* The leader's APPEND said its tree hashes to digest at zxid. Compared at
 * once if this server has applied zxid, else when it does: one check waits
 * at a time, so a follower always a little behind still gets there. */
static void digest_offer(struct seq *s, int64_t zxid, uint64_t digest, uint32_t leader)
{
    struct seq_ens *e = s->ens;
    if (zxid <= 0 || e->resyncing)
        return;
    const struct digest_at *newest = digest_newest(e);
    if (newest && zxid <= newest->zxid) {
        const struct digest_at *d = digest_find(e, zxid);
        if (d)
            digest_compare(s, zxid, d->digest, digest, leader);
        return;
    }
    if (e->check.zxid == 0 && zxid > e->tolerate_repeats_until) {
        e->check = (struct digest_at){ zxid, digest };
        e->check_from = leader;
    }
}

/* A membership entry committed: snapshots from its zxid on keep it, so it
 * is reported before the tree reaches that zxid (a snapshot could start
 * there at once). */
static void note_membership(struct seq *s, const struct raft_entry *ent)
{
    struct seq_ens *e = s->ens;
    if (ent->type != RAFT_ENTRY_CONFIG || !e->snap || !e->snap->membership)
        return;
    static struct raft_config c; /* 4 KB: off the stack; sequencer thread only */
    int rc = raft_config_decode(ent->data, ent->len, &c);
    BASE_ASSERT(rc == RAFT_OK); /* the core took it */
    e->snap->membership(e->snap_arg, ent->zxid, &c);
}

/* A reconfig's txn applied: /zookeeper/config changed (dynamicConfigFile). */
static void note_config_node(struct seq *s, const struct txn *x)
{
    struct seq_ens *e = s->ens;
    if (e->reconfig && x->nops == 1 && x->ops[0].type == TXN_SETDATA &&
        strcmp(x->ops[0].path, ENS_CONFIG_PATH) == 0 && x->ops[0].data_len > 0)
        e->reconfig->applied(e->reconfig_arg, (const char *)x->ops[0].data,
                             (size_t)x->ops[0].data_len);
}

static void apply_entry(struct seq *s, const struct raft_entry *ent, int64_t now_ms)
{
    struct seq_ens *e = s->ens;
    struct txn x = { .zxid = ent->zxid, .type = TXN_NOOP };
    if (ent->type == RAFT_ENTRY_DATA) {
        int rc = txn_decode(ent->data, ent->len, &x);
        if (rc != 0)
            sq_ens_fatal("a committed entry does not decode", rc);
        BASE_ASSERT(x.zxid == ent->zxid); /* the leader encoded the entry's own zxid */
    }
    /* a session that closes, or moves to another member, leaves the
     * connection this server holds for it */
    int32_t owner_w = -1;
    uint64_t owner_c = 0;
    bool moves = moves_session(&x);
    bool close_owner = (closes_session(&x) || moves) &&
                       local_owner(s, x.session_id, &owner_w, &owner_c);
    struct tree_op_result *res = x.nops ? calloc(x.nops, sizeof *res) : NULL;
    note_membership(s, ent);
    atomic_store(&s->applying_zxid, x.zxid);
    int rc = tree_apply(s->tree, &x, sq_collect_event, s->evb, res);
    if (rc != ZK_OK && x.zxid > e->tolerate_repeats_until) {
        /* every server applies the same txns to the same tree: a txn that
         * does not fit means this replica diverged; serving on would spread it */
        base_log(BASE_LOG_ERROR, "larchd: ensemble: committed txn 0x%llx does not apply (%s)",
                 (unsigned long long)x.zxid, zk_err_name(rc));
        sq_ens_fatal("replica diverged", 0);
    }
    e->applied++;
    if (x.zxid > e->tolerate_repeats_until) {
        uint64_t digest = tree_digest_running(s->tree);
        digest_note(s, x.zxid, digest);
        sq_digest_log_note(&s->digest_log, x.zxid, digest);
    }
    note_config_node(s, &x);
    if (x.nops == 1 && x.ops[0].type == TXN_CREATE_SESSION) {
        /* the txn carries the leader's wall clock; expiry runs on this
         * server's monotonic one, from now */
        struct tree_session *ts = tree_session_find(s->tree, x.session_id);
        if (ts)
            atomic_store_explicit(&ts->last_seen_ms, now_ms, memory_order_relaxed);
    }
    struct pend *p = x.type == TXN_NOOP ? NULL : pend_match(s, x.session_id, x.cxid);
    if (p && p->kind == PEND_CONNECT) {
        answer_connect(s, p, now_ms);
    } else if (p && p->kind == PEND_REATTACH) {
        answer_reattach(s, p, moves, now_ms); /* it closes the old connection itself */
        close_owner = false;
    } else if (p) {
        if (x.nops > 0 && !res && x.type != TXN_ERROR)
            pend_fail(s, p); /* no memory for the results the reply needs */
        else
            answer_write(s, p, &x, res);
        if (p->op == ZK_OP_CLOSESESSION)
            close_owner = false; /* its reply closes the connection */
    }
    if (close_owner) {
        struct seq_out *o = sq_out_new(SEQ_OUT_CLOSE, owner_c);
        if (o) {
            o->session_id = x.session_id;
            stage(s, owner_w, o);
        }
    }
    if (e->rounds_in_flight && x.zxid >= e->round_last_zxid) {
        tree_prep_reset(s->tree); /* the rounds' overlay is now the tree */
        e->rounds_in_flight = 0;
    }
    tree_results_free(res, x.nops);
    free(res);
    txn_free(&x);
}

/* ---- persisting what the core asks -------------------------------------- */

static void persist_entries(struct seq *s, const struct raft_ready *rd)
{
    struct seq_ens *e = s->ens;
    struct txnlog *log = s->cfg.log;
    if (!log || (rd->n_entries == 0 && !rd->truncate))
        return;
    if (e->logw) {
        int rc = logw_submit(e->logw, rd->truncate, rd->truncate_after, rd->entries,
                             rd->n_entries);
        if (rc != 0)
            sq_ens_fatal("no memory to queue the txn log's writes", rc);
        e->batches_submitted++;
        return;
    }
    if (rd->truncate) {
        int rc = txnlog_truncate_after(log, rd->truncate_after);
        if (rc != 0)
            sq_ens_fatal("truncating the txn log failed", rc);
    }
    for (size_t i = 0; i < rd->n_entries; i++) {
        const struct raft_entry *ent = &rd->entries[i];
        int rc = txnlog_append_entry(log, ent);
        if (rc != 0)
            sq_ens_fatal("appending to the txn log failed", rc);
    }
    int rc = txnlog_sync(log);
    if (rc != 0)
        sq_ens_fatal("syncing the txn log failed", rc);
    atomic_fetch_add_explicit(&s->log_syncs, 1, memory_order_relaxed);
}

/* A message that may leave only once the batches submitted so far are
 * durable: queued behind them, or sent now when they are. */
static void send_after_log(struct seq *s, const struct raft_msg *m)
{
    struct seq_ens *e = s->ens;
    if (e->batches_submitted == e->batches_synced) {
        (void)e->peer->send_msg(e->peer_arg, m); /* a drop is a loss Raft repairs */
        return;
    }
    /* a follower's and a candidate's messages borrow nothing from the core */
    BASE_ASSERT(m->n_entries == 0 && !m->snap_data && !m->snap_config);
    if (e->late_head > 0 && e->late_head == e->n_late)
        e->late_head = e->n_late = 0;
    if (base_grow(&e->late, &e->cap_late, e->n_late + 1, sizeof *e->late) != 0)
        return; /* without memory it is lost, as a dropped message is */
    e->late[e->n_late++] = (struct late_msg){ .batch = e->batches_submitted, .m = *m };
}

/* Tells the core which batches the log writer made durable and sends what
 * waited for them. Not inside a ready. */
static void log_collect(struct seq *s)
{
    struct seq_ens *e = s->ens;
    if (!e->logw)
        return;
    uint64_t n = logw_take_done(e->logw);
    if (n == 0)
        return;
    raft_log_synced(e->raft, (size_t)n);
    e->batches_synced += n;
    BASE_ASSERT(e->batches_synced <= e->batches_submitted);
    while (e->late_head < e->n_late && e->late[e->late_head].batch <= e->batches_synced)
        (void)e->peer->send_msg(e->peer_arg, &e->late[e->late_head++].m);
}

/* Waits for the log writer to finish everything submitted: the txn log is
 * then this thread's (a snapshot install), or the core has room for the
 * next ready's batch. */
static void log_drain(struct seq *s)
{
    struct seq_ens *e = s->ens;
    if (e->logw)
        logw_wait_idle(e->logw);
}

/* The SNAP payload for the snapshot at zxid, read once and kept for
 * resends and other followers until the log is compacted further. NULL
 * when this server cannot read it (said once per zxid). */
static const struct base_buf *snap_payload(struct seq *s, int64_t zxid)
{
    struct seq_ens *e = s->ens;
    if (!e->snap || zxid == e->snap_unreadable_zxid)
        return NULL;
    if (e->snap_out_zxid != zxid) {
        e->snap_out.len = 0;
        e->snap_out_zxid = 0;
        uint8_t *data = NULL;
        size_t len = 0;
        int rc = e->snap->read(e->snap_arg, zxid, &data, &len);
        uint8_t head[ENS_SNAP_HEADER] = { 0 };
        if (rc == 0 && (base_buf_append(&e->snap_out, head, sizeof head) != 0 ||
                        base_buf_append(&e->snap_out, data, len) != 0))
            rc = -ENOMEM;
        free(data);
        if (rc != 0) {
            base_log(BASE_LOG_WARN, "larchd: ensemble: cannot read snapshot 0x%llx for a follower "
                                    "(%s); it stays behind until a newer snapshot is taken",
                     (unsigned long long)zxid, strerror(-rc));
            e->snap_out.len = 0;
            e->snap_unreadable_zxid = zxid;
            return NULL;
        }
        memcpy(e->snap_out.data, ENS_SNAP_MAGIC, 4);
        base_put_le32(e->snap_out.data + 4, ENS_SNAP_VERSION);
        e->snap_out_zxid = zxid;
    }
    /* what this server has applied now bounds what the fuzzy walk caught */
    base_put_le64(e->snap_out.data + 8, (uint64_t)tree_last_zxid(s->tree));
    return &e->snap_out;
}

/* Sends the Ready's messages that may leave before (early) or only after
 * (!early) its entries are durable. A leader's APPENDs go early, so its
 * fsync overlaps its followers' (raft.h, the Ready contract). */
static void send_msgs(struct seq *s, const struct raft_ready *rd, bool early)
{
    struct seq_ens *e = s->ens;
    for (size_t i = 0; i < rd->n_msgs; i++) {
        const struct raft_msg *m = &rd->msgs[i];
        if (raft_msg_early(m) != early)
            continue;
        if (m->type == RAFT_MSG_SNAP) {
            const struct base_buf *b = snap_payload(s, m->snap_zxid);
            if (!b)
                continue; /* the core sends it again after an election timeout */
            struct raft_msg full = *m;
            full.snap_data = b->data;
            full.snap_len = b->len;
            if (e->peer->send_msg(e->peer_arg, &full) == 0) {
                e->snaps_sent++;
                base_log(BASE_LOG_INFO,
                         "larchd: ensemble: sending snapshot 0x%llx (%zu bytes) to "
                         "server %u", (unsigned long long)m->snap_zxid, b->len, m->to);
            }
            continue;
        }
        if (m->type == RAFT_MSG_APPEND) {
            /* followers compare their tree with this one's (digest_offer) */
            struct raft_msg with = *m;
            const struct digest_at *d = digest_newest(e);
            if (d) {
                with.digest = d->digest;
                with.digest_zxid = d->zxid;
            }
            (void)e->peer->send_msg(e->peer_arg, &with);
            continue;
        }
        if (early)
            (void)e->peer->send_msg(e->peer_arg, m); /* a drop is a loss Raft repairs */
        else
            send_after_log(s, m);
    }
}

/* ---- installing the leader's snapshot ----------------------------------- */

static void input_drop_all(struct seq_ens *e);

static void rearm_session(void *arg, struct tree_session *ts)
{
    int64_t now = *(const int64_t *)arg;
    atomic_store_explicit(&ts->last_seen_ms, now, memory_order_relaxed);
}


struct close_scan {
    struct seq *s;
    size_t closed;
};

static void close_local_session(void *arg, struct tree_session *ts)
{
    struct close_scan *c = arg;
    int32_t w = atomic_load(&ts->owner_worker);
    if (w < 0 || w >= c->s->nworkers)
        return;
    struct seq_out *o = sq_out_new(SEQ_OUT_CLOSE, atomic_load(&ts->owner_conn));
    if (o) {
        o->session_id = ts->id;
        stage(c->s, w, o);
        c->closed++;
    }
}

/* The core replaced its log with the leader's snapshot: this server was
 * behind the leader's compacted log. As the Ready contract says, the
 * snapshot is durable before anything later (the ack among it). Its
 * clients' watches were set on a tree that now jumps ahead without
 * events, so their connections close: they reconnect, here or elsewhere,
 * and setWatches from their last zxid fires what changed (a ZooKeeper
 * follower that resyncs drops its clients too). */
static void install_snapshot(struct seq *s, const struct raft_snapshot *snap, int64_t now_ms)
{
    struct seq_ens *e = s->ens;
    if (!e->snap)
        sq_ens_fatal("the leader sent a snapshot and this server has no snapshot store", 0);
    if (snap->len < ENS_SNAP_HEADER || memcmp(snap->data, ENS_SNAP_MAGIC, 4) != 0 ||
        base_get_le32(snap->data + 4) != ENS_SNAP_VERSION)
        sq_ens_fatal("the leader's snapshot has an unknown header", 0);
    int64_t repeats_until = (int64_t)base_get_le64(snap->data + 8);
    const uint8_t *body = snap->data + ENS_SNAP_HEADER;
    size_t body_len = snap->len - ENS_SNAP_HEADER;
    struct tree *fresh = tree_new();
    if (!fresh)
        sq_ens_fatal("no memory for the leader's snapshot", -ENOMEM);
    struct tree_snap_info info;
    int rc = tree_snapshot_load(fresh, body, body_len, &info);
    if (rc != 0) {
        base_log(BASE_LOG_ERROR,
                 "larchd: ensemble: the leader's snapshot 0x%llx does not load (%d)",
                 (unsigned long long)snap->zxid, rc);
        sq_ens_fatal("a snapshot from the leader does not load", 0);
    }
    if (info.zxid_start != snap->zxid)
        sq_ens_fatal("the leader's snapshot is not at the zxid it was sent for", 0);
    int64_t old_applied = tree_last_zxid(s->tree);
    rc = e->snap->persist(e->snap_arg, snap->zxid, body, body_len, &snap->config);
    if (rc != 0)
        sq_ens_fatal("persisting the leader's snapshot failed", rc);
    /* what the log holds after this server's own applied state was never
     * committed (or is in the snapshot): it goes, durably. A resync keeps
     * its log: the core holds every entry after the snapshot and hands the
     * committed ones out again. */
    if (s->cfg.log && !snap->keeps_log) {
        rc = txnlog_truncate_after(s->cfg.log, old_applied);
        if (rc != 0)
            sq_ens_fatal("truncating the txn log after a snapshot failed", rc);
    }
    struct close_scan c = { .s = s };
    tree_session_each(s->tree, close_local_session, &c);
    for (size_t i = e->pend_head; i < e->pend_len; i++)
        if (e->pend[i].kind != PEND_DONE)
            pend_fail(s, &e->pend[i]);
    pend_pop_done(e);
    input_drop_all(e);
    e->rounds_in_flight = 0;
    if (base_grow(&e->retired, &e->cap_retired, e->n_retired + 1, sizeof *e->retired) != 0)
        sq_ens_fatal("no memory to retire the old tree", -ENOMEM);
    tree_replace(s->tree, fresh);
    e->retired[e->n_retired++] = fresh; /* now the old contents */
    tree_session_each(s->tree, rearm_session, &now_ms);
    if (repeats_until > e->tolerate_repeats_until)
        e->tolerate_repeats_until = repeats_until;
    e->snaps_installed++;
    digests_forget(s);
    if (e->resyncing)
        base_log(BASE_LOG_INFO, "larchd: ensemble: resynced from the leader's snapshot 0x%llx; the "
                                "log after it applies again", (unsigned long long)snap->zxid);
    e->resyncing = e->resync_asked = false;
    base_log(BASE_LOG_INFO, "larchd: ensemble: installed the leader's snapshot 0x%llx: %llu nodes, "
                            "%llu sessions; %zu client connections closed to resync",
             (unsigned long long)snap->zxid, (unsigned long long)info.node_count,
             (unsigned long long)info.session_count, c.closed);
}

/* Compacts the core's log to the newest snapshot this server holds,
 * keeping commit_log_count entries before it for followers just behind. */
static void compact_log(struct seq *s)
{
    struct seq_ens *e = s->ens;
    if (!e->snap)
        return;
    int64_t newest = e->snap->newest(e->snap_arg);
    struct raft_brief st = raft_brief(e->raft);
    if (newest > st.applied_zxid)
        newest = st.applied_zxid;
    if (newest <= st.snap_zxid)
        return;
    raft_compact(e->raft, newest, e->commit_log_count);
    if (e->snap_out_zxid != 0 && e->snap_out_zxid < newest) {
        base_buf_free(&e->snap_out); /* a newer snapshot will be sent */
        e->snap_out_zxid = 0;
    }
}

void seq_ens_release(struct seq *s)
{
    struct seq_ens *e = s->ens;
    if (!e || e->n_retired == 0)
        return;
    synchronize_rcu(); /* readers that loaded the old tables are done with them */
    for (size_t i = 0; i < e->n_retired; i++)
        tree_free(e->retired[i]);
    e->n_retired = 0;
}

/* A sync's ReadIndex came back. */
static void take_read(struct seq *s, const struct raft_read *rd)
{
    struct seq_ens *e = s->ens;
    for (size_t i = e->pend_head; i < e->pend_len; i++) {
        struct pend *p = &e->pend[i];
        if ((p->kind != PEND_SYNC && p->kind != PEND_ATTACH) || p->read_ctx != rd->ctx)
            continue;
        p->read_state = rd->ok ? READ_OK : READ_FAILED;
        p->read_zxid = rd->zxid;
        return;
    }
}

static void run_ready(struct seq *s, int64_t now_ms)
{
    struct seq_ens *e = s->ens;
    for (int cycle = 0; cycle < ENS_READY_MAX; cycle++) {
        log_collect(s);
        if (raft_log_unsynced(e->raft) >= RAFT_LOG_BATCHES_MAX) {
            log_drain(s); /* the core has no room for another batch */
            log_collect(s);
        }
        if (!raft_has_ready(e->raft))
            break;
        struct raft_ready rd;
        raft_ready(e->raft, &rd);
        if (rd.hard_state_changed && e->hs_st) {
            int rc = txnlog_hard_state_write(e->hs_st, e->hs_dir, &rd.hard_state);
            if (rc != 0)
                sq_ens_fatal("writing term and vote failed", rc);
        }
        if (rd.snapshot) {
            log_drain(s); /* the batches before it are durable first (raft.h) */
            install_snapshot(s, rd.snapshot, now_ms);
        }
        send_msgs(s, &rd, true);
        if (rd.n_entries > 0)
            e->peer->flush(e->peer_arg); /* on the wire while this server fsyncs */
        persist_entries(s, &rd);
        send_msgs(s, &rd, false);
        for (size_t i = 0; i < rd.n_committed; i++)
            apply_entry(s, &rd.committed[i], now_ms);
        for (size_t i = 0; i < rd.n_reads; i++)
            take_read(s, &rd.reads[i]);
        raft_advance(e->raft, &rd);
        flush_staged(s, rd.n_committed > 0);
    }
}

/* ---- requests ------------------------------------------------------------- */

static void input_push(struct seq *s, struct seq_req *r)
{
    struct seq_ens *e = s->ens;
    /* A leader that loses a write cannot go on: the session's next write,
     * pipelined behind it, would commit without it. It restarts instead,
     * which fails every write in flight, in order. */
    if (base_grow(&e->input, &e->cap_input, e->n_input + 1, sizeof *e->input) != 0)
        sq_ens_fatal("no memory for the leader's input", -ENOMEM);
    e->input[e->n_input++] = r;
}

static void input_drop_all(struct seq_ens *e)
{
    for (size_t i = 0; i < e->n_input; i++)
        seq_req_free(e->input[i]);
    e->n_input = 0;
}

/* The FORWARD for r: its body as the client sent it, its identities, and
 * the two facts ACLs also need (address, super) as pseudo identities. */
static int forward(struct seq *s, uint32_t leader, uint32_t term, const struct seq_req *r)
{
    struct seq_ens *e = s->ens;
    struct peer_auth auth[PEER_FORWARD_AUTH_MAX];
    uint32_t n = 0;
    for (int32_t i = 0; i < r->auth_count && n < PEER_FORWARD_AUTH_MAX - 2; i++)
        auth[n++] = (struct peer_auth){ r->auth_ids[i].scheme, strlen(r->auth_ids[i].scheme),
                                        r->auth_ids[i].id, strlen(r->auth_ids[i].id) };
    if (r->peer_ip[0])
        auth[n++] = (struct peer_auth){ ENS_AUTH_PEER_IP, strlen(ENS_AUTH_PEER_IP), r->peer_ip,
                                        strlen(r->peer_ip) };
    if (r->super)
        auth[n++] = (struct peer_auth){ ENS_AUTH_SUPER, strlen(ENS_AUTH_SUPER), "", 0 };
    uint8_t tbody[4];
    struct peer_forward f = { .session_id = r->session_id, .cxid = r->xid, .op = r->op,
                              .body = r->body, .body_len = r->body_len, .auth = auth,
                              .n_auth = n, .term = term };
    if (r->kind == SEQ_REQ_CONNECT) {
        base_put_be32(tbody, (uint32_t)r->timeout_ms);
        f = (struct peer_forward){ .session_id = r->session_id, .cxid = 0,
                                   .op = ZK_OP_CREATESESSION, .body = tbody, .body_len = 4,
                                   .term = term };
    }
    e->forwards_sent++;
    return e->peer->send_forward(e->peer_arg, leader, &f);
}

/* Sends r (a write or a new session) where rounds run: into this server's
 * own next round when it leads, else to the leader. False when there is no
 * leader to send it to. Takes r. */
static bool route(struct seq *s, struct seq_req *r)
{
    struct seq_ens *e = s->ens;
    struct raft_brief st = raft_brief(e->raft);
    if (st.role == RAFT_LEADER) {
        r->origin = e->self_id;
        input_push(s, r);
        return true;
    }
    bool sent = st.leader_id != 0 && forward(s, st.leader_id, st.term, r) == 0;
    seq_req_free(r);
    return sent;
}

/* Where a write goes now: this server's own round (its term), or the
 * leader over the link's current generation. False: nowhere. A session's
 * writes pipeline (the worker sends the next before the last is
 * answered), so one may follow the session's unanswered write only where
 * that one went: the same leader, on the same link generation, or the
 * first could be lost and the second commit (peer_link_gen). */
static bool write_dest(struct seq *s, struct pend *d)
{
    struct seq_ens *e = s->ens;
    struct raft_brief st = raft_brief(e->raft);
    d->dest_term = st.term; /* a leader takes a forward only in this term */
    if (st.role == RAFT_LEADER) {
        d->dest_id = e->self_id;
        d->dest_gen = 0;
        return true;
    }
    if (st.leader_id == 0)
        return false;
    d->dest_id = st.leader_id;
    d->dest_gen = e->peer->link_gen ? e->peer->link_gen(e->peer_arg, st.leader_id) : 1;
    return d->dest_gen != 0;
}

static bool same_dest(const struct pend *a, const struct pend *b)
{
    return a->dest_id == b->dest_id && a->dest_term == b->dest_term &&
           a->dest_gen == b->dest_gen;
}

/* The destination of the newest unanswered write of connection (worker,
 * conn), if there is one, in *d. */
static bool last_write_dest(const struct seq_ens *e, int32_t worker, uint64_t conn,
                            struct pend *d)
{
    for (size_t i = e->pend_len; i-- > e->pend_head;) {
        const struct pend *p = &e->pend[i];
        if (p->kind == PEND_WRITE && p->worker == worker && p->conn == conn) {
            *d = *p;
            return true;
        }
    }
    return false;
}

/* The next routing id (see the top). */
static int32_t draw_cxid(struct seq_ens *e)
{
    uint32_t n = e->next_cxid++ & ENS_CXID_MASK;
    return (int32_t)((e->self_id << ENS_CXID_BITS) | n);
}

/* Answers the connect r with o (CONNECT or CLOSE; NULL, out of memory: the
 * client times out) and lets r go. The answer goes out after the events of
 * what this server has applied, as every reply does. */
static void connect_done(struct seq *s, struct seq_req *r, struct seq_out *o)
{
    stage(s, r->worker, o);
    atomic_fetch_sub_explicit(&s->st_outstanding, 1, memory_order_relaxed);
    seq_req_free(r);
}

/* Takes the connect p holds back from the pending list, to answer it; p is
 * retired (the connect's outstanding count goes with the connect). */
static struct seq_req *pend_take_connect(struct seq_ens *e, struct pend *p)
{
    struct seq_req *r = p->req;
    p->req = NULL;
    p->kind = PEND_DONE;
    e->pend_live--;
    return r;
}

/* readonlymode without a leader: a new session is this server's alone (no
 * txn can create it): its id comes from this server's range and its
 * password from this server's key, so the client can reattach here while
 * the partition lasts. A session the tree holds reattaches read-only with
 * its own password. Nothing in the tree changes. */
static void read_only_connect(struct seq *s, struct seq_req *r, struct seq_out *o)
{
    struct seq_ens *e = s->ens;
    struct tree_session *ts = r->session_id ? tree_session_find(s->tree, r->session_id) : NULL;
    uint8_t derived[SEQ_PASSWD_BYTES];
    int64_t id = r->session_id ? r->session_id : (int64_t)(s->next_session_id++);
    bool ok = seq_passwd_derive(s->passwd_key, id, derived);
    if (ts && !ts->closing && sq_passwd_matches(ts, r)) {
        o->timeout_ms = ts->timeout_ms;
        memcpy(o->passwd, ts->passwd, sizeof o->passwd);
    } else if (ok && !ts && (r->session_id == 0 ||
                             (r->passwd_len == SEQ_PASSWD_BYTES &&
                              memcmp(r->passwd, derived, sizeof derived) == 0))) {
        o->timeout_ms = sq_clamp_timeout(s, r->timeout_ms);
        memcpy(o->passwd, derived, sizeof o->passwd);
    } else {
        o->timeout_ms = 0; /* an unknown session, or a wrong password */
        memset(o->passwd, 0, sizeof o->passwd);
        return;
    }
    o->session_id = id;
    o->read_only = true;
    if (base_grow(&e->ro_conns, &e->cap_ro_conns, e->n_ro_conns + 1, sizeof *e->ro_conns) == 0)
        e->ro_conns[e->n_ro_conns++] = (struct ro_conn){ r->worker, r->conn };
    else
        o->timeout_ms = 0; /* it could not be closed when a leader is back */
}

static bool attach_wait(struct seq *s, struct seq_req *r, int64_t now_ms);
static void reattach_begin(struct seq *s, struct seq_req *r, int64_t now_ms);
static void new_session(struct seq *s, struct seq_req *r, int64_t now_ms);

static void local_connect(struct seq *s, struct seq_req *r, int64_t now_ms)
{
    struct seq_ens *e = s->ens;
    if (!e->serving && e->ro_enabled && !e->resyncing && r->read_only_ok &&
        r->last_zxid_seen <= tree_last_zxid(s->tree)) {
        struct seq_out *o = sq_out_new(SEQ_OUT_CONNECT, r->conn);
        if (o)
            read_only_connect(s, r, o);
        connect_done(s, r, o);
        return;
    }
    if (!e->serving && e->n_held < ENS_HELD_CONNECTS_MAX &&
        base_grow(&e->held, &e->cap_held, e->n_held + 1, sizeof *e->held) == 0) {
        e->held[e->n_held++] = (struct held_connect){ r, now_ms };
        return;
    }
    if (!e->serving) {
        /* no leader, and too many held: the client tries another server */
        connect_done(s, r, sq_out_new(SEQ_OUT_CLOSE, r->conn));
        return;
    }
    if (r->session_id != 0)
        reattach_begin(s, r, now_ms);
    else if (!attach_wait(s, r, now_ms))
        new_session(s, r, now_ms);
}

/* Whether a new session's connect waits for this server to catch up before
 * it is judged, and if so, takes it: a client that has seen a newer zxid
 * than this tree would otherwise be turned away. A ReadIndex from the
 * leader says how far this server must apply, and then it judges. */
static bool attach_wait(struct seq *s, struct seq_req *r, int64_t now_ms)
{
    struct seq_ens *e = s->ens;
    if (r->last_zxid_seen <= tree_last_zxid(s->tree))
        return false;
    struct pend *p = pend_add(e, PEND_ATTACH, r, 0, 0, now_ms);
    if (!p)
        return false; /* judged now, as before */
    p->req = r;
    p->read_ctx = ++e->next_read_ctx;
    if (raft_read_index(e->raft, p->read_ctx) != RAFT_OK)
        p->read_state = READ_FAILED;
    return true;
}

/* A new session's connect once this server is as far as the leader was
 * when it asked. */
static void attach_judge(struct seq *s, struct pend *p, int64_t now_ms)
{
    new_session(s, pend_take_connect(s->ens, p), now_ms);
}

/* A new session: its id is drawn here, its createSession txn answers it. */
static void new_session(struct seq *s, struct seq_req *r, int64_t now_ms)
{
    struct seq_ens *e = s->ens;
    if (r->last_zxid_seen > tree_last_zxid(s->tree)) {
        /* ZooKeeper refuses a client that has seen a newer state: it tries another server */
        connect_done(s, r, sq_out_new(SEQ_OUT_CLOSE, r->conn));
        return;
    }
    r->session_id = (int64_t)(s->next_session_id++);
    r->timeout_ms = sq_clamp_timeout(s, r->timeout_ms);
    r->new_session = true;
    r->last_zxid_seen = 0; /* checked here: the leader's prep must not refuse it */
    r->xid = 0;
    struct pend *p = pend_add(e, PEND_CONNECT, r, r->session_id, 0, now_ms);
    if (!p) {
        struct seq_out *o = sq_out_new(SEQ_OUT_CLOSE, r->conn);
        connect_done(s, r, o);
        return;
    }
    if (!route(s, r))
        pend_fail(s, &e->pend[e->pend_len - 1]);
}

/* ---- sessions move --------------------------------------------------------
 *
 * A client that reattaches through this server may have left writes in
 * flight on its old connection, to another member. Were one of them taken
 * after what the client then does here, the session's requests would apply
 * out of the order it sent them (and a sync here would not cover it). So a
 * reattach is a txn, as ZooKeeper's is a round trip to its leader: the move
 * marker (SEQ_OP_REATTACH) goes to the leader, which from then on takes
 * the session's writes from this server only and answers the others
 * SESSIONMOVED. The client is answered when the marker has applied here:
 * every write the leader took from the old connection is in the log before
 * it, so this server has applied it too. Every other member closes the
 * connection it held for the session when the marker applies. */

/* Answers a reattach: the session is attached here when the leader moved
 * it and it still lives with that password; otherwise timeout 0 tells the
 * client it is gone, exactly as ZooKeeper answers. */
static void reattach_answer(struct seq *s, struct seq_req *r, bool moved, int64_t now_ms)
{
    struct seq_out *o = sq_out_new(SEQ_OUT_CONNECT, r->conn);
    struct tree_session *ts = tree_session_find(s->tree, r->session_id);
    if (moved && r->last_zxid_seen > tree_last_zxid(s->tree)) {
        /* the client saw more than the leader had when it took the move: it
         * was served by a member with another history; it tries another */
        seq_out_free(o);
        o = sq_out_new(SEQ_OUT_CLOSE, r->conn);
    } else if (o && moved && ts && !ts->closing && sq_passwd_matches(ts, r)) {
        sq_take_ownership(s, ts, r->worker, r->conn, now_ms);
        o->session_id = r->session_id;
        o->timeout_ms = ts->timeout_ms;
        memcpy(o->passwd, ts->passwd, sizeof o->passwd);
    } else if (o) {
        o->timeout_ms = 0;
        memset(o->passwd, 0, sizeof o->passwd);
    }
    connect_done(s, r, o);
}

static void answer_reattach(struct seq *s, struct pend *p, bool moved, int64_t now_ms)
{
    reattach_answer(s, pend_take_connect(s->ens, p), moved, now_ms);
}

/* Sends the move marker for the reattach r. A password this server can
 * already tell is wrong (a session's password never changes) is answered
 * at once, and nothing moves. */
static void reattach_begin(struct seq *s, struct seq_req *r, int64_t now_ms)
{
    struct seq_ens *e = s->ens;
    struct tree_session *ts = tree_session_find(s->tree, r->session_id);
    if (r->passwd_len != SEQ_PASSWD_BYTES || (ts && !sq_passwd_matches(ts, r))) {
        reattach_answer(s, r, false, now_ms);
        return;
    }
    struct pend *p = pend_add(e, PEND_REATTACH, r, r->session_id, 0, now_ms);
    if (!p) {
        connect_done(s, r, sq_out_new(SEQ_OUT_CLOSE, r->conn));
        return;
    }
    p->req = r;
    struct seq_req *m = seq_req_new(SEQ_REQ_WRITE, r->passwd, SEQ_PASSWD_BYTES, NULL, 0);
    if (!m) {
        pend_fail(s, p);
        return;
    }
    m->worker = r->worker;
    m->conn = r->conn;
    m->session_id = r->session_id;
    m->op = SEQ_OP_REATTACH;
    p->cxid = draw_cxid(e);
    m->xid = p->cxid;
    if (!route(s, m))
        pend_fail(s, p);
}

static void local_write(struct seq *s, struct seq_req *r, int64_t now_ms)
{
    struct seq_ens *e = s->ens;
    struct pend prev = { 0 };
    bool has_prev = r->kind == SEQ_REQ_WRITE && zk_op_is_write(r->op) &&
                    last_write_dest(e, r->worker, r->conn, &prev);
    if (zk_op_is_write(r->op) && dead_find(e, r->worker, r->conn) != SIZE_MAX) {
        seq_req_free(r); /* behind a write that failed: the connection is closing */
        atomic_fetch_sub_explicit(&s->st_outstanding, 1, memory_order_relaxed);
        return;
    }
    uint8_t kind = r->op == ZK_OP_SYNC ? PEND_SYNC
                   : r->op == ZK_OP_GETEPHEMERALS ? PEND_LOCAL
                                                  : PEND_WRITE;
    struct pend *p = pend_add(e, kind, r, r->session_id, r->xid, now_ms);
    if (!p) {
        connect_done(s, r, sq_out_new(SEQ_OUT_CLOSE, r->conn));
        return;
    }
    if (kind == PEND_LOCAL) {
        p->req = r;
        return;
    }
    if (kind == PEND_SYNC) {
        p->req = r;
        p->read_ctx = ++e->next_read_ctx;
        if (raft_read_index(e->raft, p->read_ctx) != RAFT_OK)
            p->read_state = READ_FAILED;
        return;
    }
    /* from here on the write is known by its routing id (see the top) */
    p->cxid = draw_cxid(e);
    r->xid = p->cxid;
    if (!e->serving || !write_dest(s, p) || (has_prev && !same_dest(&prev, p))) {
        seq_req_free(r);
        pend_fail(s, p);
    } else if (!route(s, r)) {
        pend_fail(s, p);
    }
}

static void take_local(struct seq *s, int64_t now_ms)
{
    struct seq_req *reqs[SEQ_ROUND_MAX];
    for (size_t taken = 0; taken < ENS_LOCAL_MAX;) {
        size_t n = sq_take_round(s, reqs);
        if (n == 0)
            break;
        taken += n;
        for (size_t i = 0; i < n; i++) {
            struct seq_req *r = reqs[i];
            switch (r->kind) {
            case SEQ_REQ_CONNECT:
                local_connect(s, r, now_ms);
                break;
            case SEQ_REQ_WRITE:
                local_write(s, r, now_ms);
                break;
            default:
                sq_handle_disconnect(s, r);
                dead_forget(s->ens, r->worker, r->conn);
                atomic_fetch_sub_explicit(&s->st_outstanding, 1, memory_order_relaxed);
                seq_req_free(r);
                break;
            }
        }
    }
}

/* ---- peer input ------------------------------------------------------------ */

void seq_peer_msg(struct seq *s, const struct raft_msg *m)
{
    if (!s->ens)
        return;
    int rc = raft_step(s->ens->raft, m);
    if (rc == RAFT_EINVAL)
        base_log(BASE_LOG_WARN, "larchd: ensemble: ignored a %s from server %u that does not fit",
                 raft_msg_type_name(m->type), m->from);
    if (rc != RAFT_OK || m->type != RAFT_MSG_APPEND || m->digest_zxid <= 0)
        return;
    struct raft_brief st = raft_brief(s->ens->raft);
    if (st.role != RAFT_LEADER && st.leader_id == m->from && st.term == m->term)
        digest_offer(s, m->digest_zxid, m->digest, m->from);
}

/* A leader takes another server's write into its next round. */
void seq_peer_forward(struct seq *s, uint32_t from, const struct peer_forward *f)
{
    struct seq_ens *e = s->ens;
    if (!e)
        return;
    struct raft_brief st = raft_brief(e->raft);
    /* Not for this leadership: the forwarder's pending write fails on its
     * leader change. Taking it in a later term could commit it after writes
     * of its session that were lost with the term it was sent for. */
    if (st.role != RAFT_LEADER || f->term != st.term)
        return;
    struct tree_authid ids[PEER_FORWARD_AUTH_MAX];
    char *strs[2 * PEER_FORWARD_AUTH_MAX];
    int32_t n = 0, nstr = 0;
    bool super = false, ok = true;
    char peer_ip[64] = "";
    for (uint32_t i = 0; i < f->n_auth && ok; i++) {
        const struct peer_auth *a = &f->auth[i];
        if (a->scheme_len == strlen(ENS_AUTH_SUPER) &&
            memcmp(a->scheme, ENS_AUTH_SUPER, a->scheme_len) == 0) {
            super = true;
        } else if (a->scheme_len == strlen(ENS_AUTH_PEER_IP) &&
                   memcmp(a->scheme, ENS_AUTH_PEER_IP, a->scheme_len) == 0) {
            if (a->id_len < sizeof peer_ip) {
                memcpy(peer_ip, a->id, a->id_len);
                peer_ip[a->id_len] = '\0';
            }
        } else {
            char *sc = strndup(a->scheme, a->scheme_len), *id = strndup(a->id, a->id_len);
            if (sc)
                strs[nstr++] = sc;
            if (id)
                strs[nstr++] = id;
            ok = sc && id;
            ids[n++] = (struct tree_authid){ sc, id };
        }
    }
    bool create = f->op == ZK_OP_CREATESESSION;
    struct seq_req *r = NULL;
    if (ok && create && f->body_len == 4) {
        r = seq_req_new(SEQ_REQ_CONNECT, NULL, 0, NULL, 0);
        if (r) {
            r->new_session = true;
            r->timeout_ms = (int32_t)base_get_be32(f->body);
        }
    } else if (ok && !create) {
        r = seq_req_new(SEQ_REQ_WRITE, f->body, f->body_len, ids, n);
    }
    for (int32_t i = 0; i < nstr; i++)
        free(strs[i]);
    if (create && f->body_len != 4)
        return; /* malformed: the new session's connect times out */
    if (!r)
        sq_ens_fatal("no memory for a forwarded write", -ENOMEM); /* see input_push */
    r->worker = ENS_WORKER_REMOTE;
    r->session_id = f->session_id;
    r->xid = f->cxid;
    r->op = create ? 0 : f->op;
    r->super = super;
    memcpy(r->peer_ip, peer_ip, sizeof r->peer_ip);
    r->origin = from;
    e->forwards_received++;
    input_push(s, r);
}

/* Followers report the sessions their clients kept alive; only the leader
 * expires sessions, so only its clock matters. */
void seq_peer_touch(struct seq *s, uint32_t from, const int64_t *ids, uint32_t n)
{
    (void)from;
    if (!s->ens || !is_leader(s->ens))
        return;
    int64_t now = sq_clock(s, false);
    for (uint32_t i = 0; i < n; i++) {
        struct tree_session *ts = tree_session_find(s->tree, ids[i]);
        if (ts)
            atomic_store_explicit(&ts->last_seen_ms, now, memory_order_relaxed);
    }
}

void seq_peer_down(struct seq *s, uint32_t id)
{
    struct seq_ens *e = s->ens;
    if (!e)
        return;
    struct raft_status st;
    raft_status(e->raft, &st);
    if (st.role != RAFT_LEADER && st.leader_id == id)
        pend_fail_all(s); /* forwards in flight on that link may be gone */
}

/* ---- leadership, sessions, rounds ---------------------------------------- */

static void watch_leadership(struct seq *s, int64_t now_ms)
{
    struct seq_ens *e = s->ens;
    struct raft_brief st = raft_brief(e->raft);
    bool leader = st.role == RAFT_LEADER;
    if (st.term == e->known_term && st.leader_id == e->known_leader && leader == e->was_leader)
        return;
    if (e->was_leader && !leader) {
        input_drop_all(e);
        if (e->rounds_in_flight) {
            tree_prep_reset(s->tree);
            e->rounds_in_flight = 0;
        }
    }
    if (e->known_leader != 0 || e->known_term != st.term)
        pend_fail_all(s);
    if (leader && e->resyncing) {
        /* its log won the election; its tree is what the ensemble has */
        base_log(BASE_LOG_WARN, "larchd: ensemble: leading with a tree that differed from the last "
                                "leader's; followers that disagree resync from it");
        e->resyncing = e->resync_asked = false;
        e->snap->hold_end(e->snap_arg);
    }
    if (leader && !e->was_leader) {
        /* a new leader cannot know when followers last heard from each
         * session: every session gets its whole timeout again */
        tree_session_each(s->tree, rearm_session, &now_ms);
        e->last_expiry_ms = now_ms;
    }
    e->known_term = st.term;
    e->known_leader = st.leader_id;
    e->was_leader = leader;
}

/* A server without a live leader stops serving clients, as a ZooKeeper
 * server that loses its leader does: it closes every client connection and
 * refuses new ones until a leader is elected. Its clients move to servers
 * that have one; if it kept answering them from its tree, a partitioned
 * server would serve stale data for as long as the partition lasts, past
 * even the expiry of the sessions it serves (ZooKeeper's timeliness
 * guarantee). The lease is the CheckQuorum one: a leader that cannot hear
 * a quorum steps down within an election timeout, a follower or observer
 * gives its leader up after one without a word from it. */
static void local_connect(struct seq *s, struct seq_req *r, int64_t now_ms);

/* Held connects: judged once a leader is known, refused (closed) when they
 * waited too long, so the client tries another server. */
static void release_held(struct seq *s, int64_t now_ms)
{
    struct seq_ens *e = s->ens;
    size_t keep = 0;
    for (size_t i = 0; i < e->n_held; i++) {
        struct seq_req *r = e->held[i].req;
        if (e->serving) {
            local_connect(s, r, now_ms); /* serving: it is never held again */
        } else if (now_ms - e->held[i].since_ms > e->pending_timeout_ms / 2) {
            connect_done(s, r, sq_out_new(SEQ_OUT_CLOSE, r->conn));
        } else {
            e->held[keep++] = e->held[i];
        }
    }
    e->n_held = keep;
}

static void watch_serving(struct seq *s)
{
    struct seq_ens *e = s->ens;
    struct raft_brief st = raft_brief(e->raft);
    bool serving = st.leader_id != 0 && st.leader_lease && !e->resyncing;
    if (serving == e->serving)
        return;
    e->serving = serving;
    atomic_store_explicit(&s->serving, serving, memory_order_release);
    if (serving) {
        /* read-only clients go: they reconnect to a server with a quorum,
         * as ZooKeeper's read-only server drops them when it rejoins */
        for (size_t i = 0; i < e->n_ro_conns; i++) {
            struct seq_out *o = sq_out_new(SEQ_OUT_CLOSE, e->ro_conns[i].conn);
            stage(s, e->ro_conns[i].worker, o);
        }
        if (e->n_ro_conns)
            base_log(BASE_LOG_INFO, "larchd: ensemble: leaving read-only mode: %zu read-only "
                                    "connections closed", e->n_ro_conns);
        e->n_ro_conns = 0;
        if (e->ever_served)
            base_log(BASE_LOG_INFO, "larchd: ensemble: serving clients again (leader %u)",
                     st.leader_id);
        e->ever_served = true;
        return;
    }
    struct close_scan c = { .s = s };
    tree_session_each(s->tree, close_local_session, &c);
    pend_fail_all(s);
    if (e->resyncing)
        base_log(BASE_LOG_INFO,
                 "larchd: ensemble: resyncing: %zu client connections closed, new ones "
                 "held until this server holds the leader's tree", c.closed);
    else
        base_log(BASE_LOG_INFO,
                 "larchd: ensemble: no leader: %zu client connections closed, new ones "
                 "%s until one is elected", c.closed,
                 e->ro_enabled ? "served read-only if they allow it" : "refused");
}

struct due_scan {
    struct seq_ens *e;
    struct seq *s;
    int64_t now_ms;
    size_t count;
};

static void expire_one(void *arg, struct tree_session *ts)
{
    struct due_scan *d = arg;
    struct seq_req *r = d->count < SEQ_ROUND_MAX ? sq_expiry_req(ts, d->now_ms) : NULL;
    if (!r)
        return;
    input_push(d->s, r);
    d->count++;
    atomic_fetch_add_explicit(&d->s->st_expired, 1, memory_order_relaxed);
}

static void reap_one(void *arg, const char *path)
{
    struct due_scan *d = arg;
    struct seq_req *r = d->count < SEQ_ROUND_MAX ? sq_reap_req(path) : NULL;
    if (!r)
        return;
    input_push(d->s, r);
    d->count++;
}

/* Expiry and the reaper scan only between rounds (below); while one is
 * due, no new round starts, so the pipeline drains and they run on the
 * next pass even under a steady load. */
static bool housekeeping_due(const struct seq *s, int64_t now_ms)
{
    const struct seq_ens *e = s->ens;
    return now_ms - e->last_expiry_ms >= s->cfg.tick_ms ||
           now_ms - e->last_reap_ms >= s->cfg.container_check_ms;
}

static void leader_housekeeping(struct seq *s, int64_t now_ms, int64_t wall_ms)
{
    struct seq_ens *e = s->ens;
    struct due_scan d = { .e = e, .s = s, .now_ms = now_ms };
    /* Only between rounds: a closeSession in flight marks its session
     * closing (prep), so a scan now cannot queue the same one twice. */
    if (e->rounds_in_flight)
        return;
    if (now_ms - e->last_expiry_ms >= s->cfg.tick_ms) {
        e->last_expiry_ms = now_ms;
        tree_session_each(s->tree, expire_one, &d);
    }
    if (now_ms - e->last_reap_ms >= s->cfg.container_check_ms) {
        e->last_reap_ms = now_ms;
        tree_reapable(s->tree, wall_ms, reap_one, &d);
    }
}

struct touch_scan {
    struct base_buf ids;
    int64_t since_ms;
};

/* A session this server's workers saw traffic from (a request or a ping
 * moves last_seen_ms) since the last report: a connection alone is not
 * activity, so a client that stops pinging expires, as in ZooKeeper. */
static void touch_active(void *arg, struct tree_session *ts)
{
    struct touch_scan *t = arg;
    if (atomic_load_explicit(&ts->last_seen_ms, memory_order_relaxed) >= t->since_ms)
        (void)base_buf_append(&t->ids, &ts->id, sizeof ts->id);
}

static void follower_touch(struct seq *s, int64_t now_ms, uint32_t leader)
{
    struct seq_ens *e = s->ens;
    if (leader == 0 || now_ms - e->last_touch_ms < s->cfg.tick_ms)
        return;
    struct touch_scan t = { .since_ms = e->last_touch_ms };
    e->last_touch_ms = now_ms;
    tree_session_each(s->tree, touch_active, &t);
    struct base_buf b = t.ids;
    size_t n = b.len / sizeof(int64_t);
    for (size_t off = 0; off < n; off += 4096) {
        uint32_t k = (uint32_t)(n - off < 4096 ? n - off : 4096);
        (void)e->peer->send_touch(e->peer_arg, leader, (const int64_t *)b.data + off, k);
    }
    base_buf_free(&b);
}

/* The leader's round: prep everything queued, propose one txn per request. */
/* ---- reconfig ------------------------------------------------------------- */

static bool is_reconfig(const struct seq_ens *e, const struct seq_req *r)
{
    return e->reconfig && r->kind == SEQ_REQ_WRITE && r->op == ZK_OP_RECONFIG;
}

/* What /zookeeper/config's version line says: the zxid of the reconfig
 * that set it last, 0 while it is the configured membership. */
static int64_t config_version(struct seq *s)
{
    struct tree_view v;
    if (tree_get(s->tree, ENS_CONFIG_PATH, strlen(ENS_CONFIG_PATH), &v) != ZK_OK)
        return 0;
    return v.stat.mzxid;
}

/* Proposes one txn built here rather than by prep; false if the core
 * refused it (the requester's member fails it on the leader change). */
static bool propose_txn(struct seq *s, const struct txn *x)
{
    struct seq_ens *e = s->ens;
    e->enc.len = 0;
    int64_t z = 0;
    if (txn_encode(&e->enc, x) != 0 || raft_propose(e->raft, e->enc.data, e->enc.len, &z) != 0)
        return false;
    BASE_ASSERT(z == x->zxid);
    e->proposals++;
    return true;
}

/* A refused reconfig is an error txn like any failed write: its member
 * answers it when it applies. */
static void reconfig_refuse(struct seq *s, const struct seq_req *r, int32_t err, int64_t wall_ms)
{
    struct txn_op op = { .type = TXN_ERROR, .client_type = ZK_OP_RECONFIG, .data_len = -1,
                         .err = err };
    struct txn x = { .zxid = raft_next_zxid(s->ens->raft), .session_id = r->session_id,
                     .cxid = r->xid, .time_ms = wall_ms, .type = TXN_ERROR, .nops = 1,
                     .ops = &op };
    if (x.zxid != 0)
        (void)propose_txn(s, &x);
}

/* The reconfig's own txn: /zookeeper/config set to the new membership with
 * the txn's zxid as its version (as ZooKeeper logs a reconfig: a setData of
 * it, version -1). It follows the joint CONFIG entry in the log, so when it
 * applies the change is committed, and the core completes it. session 0:
 * no client waits (a new leader bringing the node up to date). */
static bool propose_config_node(struct seq *s, const struct raft_config *next, int64_t session,
                                int32_t cxid, int64_t wall_ms)
{
    struct seq_ens *e = s->ens;
    int64_t zxid = raft_next_zxid(e->raft);
    if (zxid == 0)
        return false;
    char *text = e->reconfig->text(e->reconfig_arg, next, zxid);
    if (!text)
        return false;
    struct txn_op op = { .type = TXN_SETDATA, .client_type = ZK_OP_RECONFIG,
                         .path = ENS_CONFIG_PATH, .data = (uint8_t *)text,
                         .data_len = (int32_t)strlen(text), .version = -1 };
    struct txn x = { .zxid = zxid, .session_id = session, .cxid = cxid, .time_ms = wall_ms,
                     .type = TXN_SETDATA, .nops = 1, .ops = &op };
    bool ok = propose_txn(s, &x);
    free(text);
    return ok;
}

/* The voters this leader heard from in the last election timeout: the
 * ones ZooKeeper's leader would count as synced followers. */
static uint32_t synced_voters(const struct raft_status *st, uint32_t *ids)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < st->n_peers; i++)
        if (st->peers[i].voter && st->peers[i].recently_active)
            ids[n++] = st->peers[i].id;
    return n;
}

/* A reconfig request at the head of the leader's input (ZooKeeper's
 * PrepRequestProcessor, case reconfig): checked, decided by the server's
 * plan, then the joint CONFIG entry and the txn that answers it are
 * proposed together, in the request's place in its session's order. */
static void leader_reconfig(struct seq *s, struct seq_req *r, int64_t wall_ms)
{
    struct seq_ens *e = s->ens;
    int32_t err = sq_write_session_check(s, r);
    struct raft_status st;
    raft_status(e->raft, &st);
    /* one change at a time: the last one's final entry must have committed */
    if (err == ZK_OK && (st.config.n_old > 0 || st.config_zxid > st.commit_zxid))
        err = ZK_ERECONFIGINPROGRESS;
    struct seq_reconfig_plan plan = { 0 };
    if (err == ZK_OK) {
        uint32_t synced[RAFT_MEMBERS_MAX];
        uint32_t n_synced = synced_voters(&st, synced);
        err = e->reconfig->plan(e->reconfig_arg, r->body, r->body_len, r->super, &st.config,
                                config_version(s), e->self_id, synced, n_synced, &plan);
    }
    if (err != ZK_OK) {
        reconfig_refuse(s, r, err, wall_ms);
        return;
    }
    struct raft_config next = { .n_members = plan.n_members };
    memcpy(next.members, plan.members, plan.n_members * sizeof *plan.members);
    memcpy(next.extra, plan.extra, plan.extra_len);
    next.extra_len = (uint32_t)plan.extra_len;
    int rc = raft_propose_config(e->raft, plan.members, plan.n_members, plan.extra,
                                 plan.extra_len, NULL);
    free(plan.extra);
    /* the same members as described now: nothing for the core to change,
     * but ZooKeeper still commits the request under a new version */
    if (rc == RAFT_EBUSY)
        reconfig_refuse(s, r, ZK_ERECONFIGINPROGRESS, wall_ms);
    else if (rc == RAFT_OK || rc == RAFT_EINVAL)
        (void)propose_config_node(s, rc == RAFT_OK ? &next : &st.config, r->session_id,
                                  r->xid, wall_ms);
}

/* A leader whose committed membership is not what /zookeeper/config says
 * (its predecessor's reconfig txn never made it, or was cut with its
 * tail) sets the node itself. */
static void leader_config_node_current(struct seq *s, int64_t wall_ms)
{
    struct seq_ens *e = s->ens;
    if (!e->reconfig || e->rounds_in_flight > 0)
        return;
    struct raft_status st;
    raft_status(e->raft, &st);
    if (st.role != RAFT_LEADER || st.config.n_old > 0 || st.config_zxid > st.commit_zxid ||
        st.config.extra_len == 0 || st.applied_zxid != st.last_zxid ||
        raft_zxid_term(st.commit_zxid) != st.term)
        return;
    struct tree_view v;
    if (tree_get(s->tree, ENS_CONFIG_PATH, strlen(ENS_CONFIG_PATH), &v) != ZK_OK)
        return;
    if (st.config_zxid == e->node_checked_config_zxid && v.stat.mzxid == e->node_checked_mzxid)
        return;
    char *want = e->reconfig->text(e->reconfig_arg, &st.config, -1);
    if (!want)
        return;
    size_t n = strlen(want);
    /* the node's text is the lines, then "version=..." */
    bool same = v.data_len >= 0 && (size_t)v.data_len >= n && memcmp(v.data, want, n) == 0 &&
                ((size_t)v.data_len == n || memcmp(v.data + n, "version=", 8) == 0);
    free(want);
    if (same) {
        e->node_checked_config_zxid = st.config_zxid;
        e->node_checked_mzxid = v.stat.mzxid;
    } else {
        (void)propose_config_node(s, &st.config, 0, 0, wall_ms);
    }
}

/* The peer link follows the membership this server uses. */
static void links_follow_membership(struct seq *s)
{
    struct seq_ens *e = s->ens;
    if (!e->peer->membership)
        return;
    struct raft_status st;
    raft_status(e->raft, &st);
    if (e->links_told && st.config_zxid == e->links_config_zxid)
        return;
    e->links_told = true;
    e->links_config_zxid = st.config_zxid;
    e->peer->membership(e->peer_arg, &st.config);
}

static void leader_round(struct seq *s, int64_t now_ms, int64_t wall_ms)
{
    struct seq_ens *e = s->ens;
    struct raft_status st;
    raft_status(e->raft, &st);
    if (e->n_input == 0 || e->rounds_in_flight >= ENS_PIPELINE_MAX ||
        (e->rounds_in_flight == 0 && st.applied_zxid != st.last_zxid) ||
        housekeeping_due(s, now_ms))
        return;
    int64_t next = raft_next_zxid(e->raft);
    if (next == 0) {
        /* The term's counter is used up (ZOOKEEPER-1277). A proposal is
         * what makes the core step down so that a new term starts; without
         * it this leader would sit on its queue for good. */
        int rc = raft_propose(e->raft, NULL, 0, NULL);
        BASE_ASSERT(rc == RAFT_ELIMIT);
        return;
    }
    if (is_reconfig(e, e->input[0])) {
        /* alone, once the rounds before it have applied: it reads the
         * committed membership and /zookeeper/config's version */
        if (e->rounds_in_flight > 0)
            return;
        struct seq_req *r = e->input[0];
        memmove(e->input, e->input + 1, (e->n_input - 1) * sizeof *e->input);
        e->n_input--;
        leader_reconfig(s, r, wall_ms);
        seq_req_free(r);
        return;
    }
    size_t n = e->n_input < SEQ_ROUND_MAX ? e->n_input : SEQ_ROUND_MAX;
    for (size_t i = 1; i < n; i++)
        if (is_reconfig(e, e->input[i]))
            n = i; /* a round ends before a reconfig */
    s->next_zxid_counter = next;
    struct seq_round *r = seq_round_prepare(s, e->input, n, now_ms, wall_ms);
    memmove(e->input, e->input + n, (e->n_input - n) * sizeof *e->input);
    e->n_input -= n;
    if (!r)
        sq_ens_fatal("no memory for a round", -ENOMEM); /* see input_push */
    int64_t last = 0;
    bool stalled = false;
    for (size_t i = 0; i < seq_round_len(r); i++) {
        const struct txn *x = seq_round_txn(r, i);
        if (!x)
            continue;
        e->enc.len = 0;
        int64_t z = 0;
        int rc = txn_encode(&e->enc, x) != 0 ? RAFT_ENOMEM
                                              : raft_propose(e->raft, e->enc.data, e->enc.len, &z);
        if (rc == RAFT_ENOMEM)
            sq_ens_fatal("no memory to propose a write", -ENOMEM); /* see input_push */
        if (rc != RAFT_OK) {
            /* No longer leading (or the term's counter is used up): the
             * rest never commits, and nothing more of this term does
             * (their writers fail on the leader change or time out), yet
             * the overlay holds them: no round may prep against it before
             * it is reset, once the pipeline has drained. */
            stalled = true;
            break;
        }
        BASE_ASSERT(z == x->zxid); /* prep numbered the txns as the core does */
        last = z;
        e->proposals++;
    }
    sq_round_discard(r);
    if (last) {
        e->rounds_in_flight = stalled ? ENS_PIPELINE_MAX : e->rounds_in_flight + 1;
        e->round_last_zxid = last;
    } else if (e->rounds_in_flight == 0) {
        tree_prep_reset(s->tree);
    } else {
        e->rounds_in_flight = ENS_PIPELINE_MAX; /* as above: drain, then reset */
    }
}

/* Answers syncs and getEphemerals whose turn has come, fails what waited
 * too long. */
static void pump_pending(struct seq *s, int64_t now_ms)
{
    struct seq_ens *e = s->ens;
    int64_t applied = tree_last_zxid(s->tree);
    bool timed_out = false;
    for (size_t i = e->pend_head; i < e->pend_len; i++) {
        struct pend *p = &e->pend[i];
        if (pend_has_txn(p)) {
            if (now_ms - p->since_ms > e->pending_timeout_ms)
                timed_out = true;
            continue;
        }
        if ((p->kind == PEND_SYNC || p->kind == PEND_ATTACH) && p->read_state == READ_WAIT &&
            now_ms - p->since_ms > e->pending_timeout_ms) {
            /* the ReadIndex or its answer was lost (a one-way partition):
             * the client goes elsewhere rather than wait for good */
            pend_fail(s, p);
            continue;
        }
        if ((p->kind == PEND_SYNC || p->kind == PEND_ATTACH) && p->read_state == READ_FAILED) {
            if (p->read_tries++ < ENS_READ_RETRIES) {
                p->read_state = READ_WAIT;
                p->read_ctx = ++e->next_read_ctx;
                if (raft_read_index(e->raft, p->read_ctx) != RAFT_OK)
                    p->read_state = READ_FAILED;
            } else {
                pend_fail(s, p);
            }
            continue;
        }
        if ((p->kind == PEND_SYNC || p->kind == PEND_ATTACH) &&
            (p->read_state != READ_OK || applied < p->read_zxid))
            continue;
        if (p->kind == PEND_ATTACH) {
            attach_judge(s, p, now_ms);
            continue;
        }
        if (p->kind == PEND_SYNC || p->kind == PEND_LOCAL) {
            if (!pend_session_waits(e, i, p->session_id))
                answer_local(s, p);
        }
    }
    if (timed_out) {
        base_log(BASE_LOG_WARN,
                 "larchd: ensemble: forwarded writes unanswered for %lld ms: closing "
                 "their connections", (long long)e->pending_timeout_ms);
        pend_fail_all(s);
    }
    pend_pop_done(e);
}

static void publish_status(struct seq *s)
{
    struct seq_ens *e = s->ens;
    if (pthread_mutex_trylock(&e->status_lock) != 0)
        return; /* a reader is copying: the next pass publishes */
    raft_status(e->raft, &e->status.raft);
    e->status.forwards_sent = e->forwards_sent;
    e->status.forwards_received = e->forwards_received;
    e->status.pending = e->pend_live;
    e->status.pending_failed = e->pending_failed;
    e->status.proposals = e->proposals;
    e->status.applied = e->applied;
    e->status.snapshots_sent = e->snaps_sent;
    e->status.snapshots_installed = e->snaps_installed;
    e->status.serving = e->serving;
    e->status.read_only = !e->serving && e->ro_enabled && !e->resyncing;
    e->status.resyncing = e->resyncing;
    e->status.digest_checks = e->digest_checks;
    e->status.digest_mismatches = e->digest_mismatches;
    e->status.digest = tree_digest_running(s->tree); /* between applies: exact */
    e->status.digest_zxid = tree_last_zxid(s->tree);
    pthread_mutex_unlock(&e->status_lock);
}

int64_t seq_ens_step(struct seq *s, int64_t now_ms, int64_t wall_ms)
{
    struct seq_ens *e = s->ens;
    BASE_ASSERT(e);
    if (!e->ticking) {
        e->next_tick_ms = now_ms + e->tick_ms;
        e->ticking = true;
    }
    e->now_ms = now_ms;
    take_local(s, now_ms);
    e->peer->drain(e->peer_arg, s);
    if (now_ms - e->next_tick_ms > 100 * e->tick_ms)
        e->next_tick_ms = now_ms; /* a long stall: tick once, not a burst */
    while (now_ms >= e->next_tick_ms) {
        raft_tick(e->raft);
        e->next_tick_ms += e->tick_ms;
    }
    watch_leadership(s, now_ms);
    watch_serving(s);
    if (e->was_leader)
        leader_housekeeping(s, now_ms, wall_ms);
    else
        follower_touch(s, now_ms, e->known_leader);
    leader_round(s, now_ms, wall_ms);
    run_ready(s, now_ms);
    watch_leadership(s, now_ms);
    watch_serving(s);
    /* a round that finished in this pass lets the next one start at once */
    leader_round(s, now_ms, wall_ms);
    if (e->was_leader)
        leader_config_node_current(s, wall_ms);
    run_ready(s, now_ms);
    compact_log(s);
    dead_expire(e);
    resync_requests(s);
    links_follow_membership(s);
    release_held(s, now_ms);
    pump_pending(s, now_ms);
    flush_staged(s, false);
    e->peer->flush(e->peer_arg);
    publish_status(s);
    return e->next_tick_ms > now_ms ? e->next_tick_ms - now_ms : 0;
}

int64_t sq_ens_pump(struct seq *s)
{
    const struct seq_ens *e = s->ens;
    return e->peer->pump ? e->peer->pump(e->peer_arg) : INT64_MAX;
}

int sq_ens_io_fd(const struct seq *s)
{
    const struct seq_ens *e = s->ens;
    return e->peer->io_fd ? e->peer->io_fd(e->peer_arg) : -1;
}

bool sq_ens_has_input(const struct seq *s)
{
    if (s->ens->logw && logw_has_done(s->ens->logw))
        return true;
    const struct seq_ens *e = s->ens;
    return e->peer->has_input && e->peer->has_input(e->peer_arg);
}

bool seq_ens_status(struct seq *s, struct seq_ens_status *out)
{
    struct seq_ens *e = s->ens;
    if (!e)
        return false;
    pthread_mutex_lock(&e->status_lock);
    *out = e->status;
    pthread_mutex_unlock(&e->status_lock);
    return true;
}

/* ---- lifecycle (called by seq_new / seq_free) ------------------------------ */

/* The log writer made batches durable (its thread). */
static void log_written(void *arg)
{
    seq_kick(arg);
}

int sq_ens_new(struct seq *s, const struct seq_ensemble_cfg *cfg)
{
    if (!cfg->peer || !cfg->peer->send_msg || !cfg->peer->send_forward ||
        !cfg->peer->send_touch || !cfg->peer->flush || !cfg->peer->drain ||
        cfg->raft_tick_ms <= 0 || cfg->raft.self_id < 1 || cfg->raft.self_id > 255)
        return -EINVAL;
    struct seq_ens *e = calloc(1, sizeof *e);
    if (!e)
        return -ENOMEM;
    /* with a txn log the core leaves the disk to the log writer */
    struct raft_cfg rc = cfg->raft;
    rc.async_log = s->cfg.log != NULL;
    e->raft = raft_new(&rc, &cfg->boot);
    e->hs_dir = cfg->hard_state_dir ? strdup(cfg->hard_state_dir) : NULL;
    if (!e->raft || (cfg->hard_state_dir && !e->hs_dir) ||
        pthread_mutex_init(&e->status_lock, NULL) != 0) {
        raft_free(e->raft);
        free(e->hs_dir);
        free(e);
        return -EINVAL;
    }
    e->self_id = cfg->raft.self_id;
    e->tick_ms = cfg->raft_tick_ms;
    e->peer = cfg->peer;
    e->peer_arg = cfg->peer_arg;
    e->hs_st = cfg->hard_state_st;
    e->pending_timeout_ms = cfg->pending_timeout_ms > 0
                                ? cfg->pending_timeout_ms
                                : 4 * (int64_t)cfg->raft.election_ticks * cfg->raft_tick_ms;
    e->last_reap_ms = INT64_MIN / 2;
    e->tolerate_repeats_until = cfg->tolerate_repeats_until;
    e->snap = cfg->snap;
    e->snap_arg = cfg->snap_arg;
    e->commit_log_count = cfg->commit_log_count ? cfg->commit_log_count : ENS_COMMIT_LOG_COUNT;
    e->ro_enabled = cfg->read_only_mode;
    e->reconfig = cfg->reconfig;
    e->reconfig_arg = cfg->reconfig_arg;
    /* a restarted server starts elsewhere: its old forwards may still commit */
    e->next_cxid = (uint32_t)(cfg->raft.seed >> 17);
    if (s->cfg.log) {
        int err = logw_start(&e->logw, s->cfg.log, &s->log_syncs, log_written, s);
        if (err != 0) {
            raft_free(e->raft);
            free(e->hs_dir);
            pthread_mutex_destroy(&e->status_lock);
            free(e);
            return err;
        }
    }
    s->ens = e;
    publish_status(s);
    return 0;
}

void sq_ens_free(struct seq *s)
{
    struct seq_ens *e = s->ens;
    if (!e)
        return;
    logw_stop(e->logw); /* what it holds reaches the disk */
    free(e->late);
    free(e->dead);
    input_drop_all(e);
    free(e->input);
    for (size_t i = e->pend_head; i < e->pend_len; i++)
        seq_req_free(e->pend[i].req);
    free(e->pend);
    for (size_t i = 0; i < e->n_staged; i++)
        seq_out_free(e->staged[i].out);
    free(e->staged);
    base_buf_free(&e->enc);
    base_buf_free(&e->snap_out);
    free(e->ro_conns);
    for (size_t i = 0; i < e->n_held; i++)
        seq_req_free(e->held[i].req);
    free(e->held);
    if (e->n_retired > 0)
        synchronize_rcu(); /* the caller holds no read-side section (seq_free) */
    for (size_t i = 0; i < e->n_retired; i++)
        tree_free(e->retired[i]);
    free(e->retired);
    raft_free(e->raft);
    free(e->hs_dir);
    pthread_mutex_destroy(&e->status_lock);
    free(e);
    s->ens = NULL;
}
