/*
 * sequencer.c — orders, validates and applies every write; owns sessions.
 *
 * One round (seq_run_round) is the unit of work: prep every request against
 * the tree plus the pending changes of earlier requests in the round, make
 * the round durable (standalone without a log: nothing to wait for; the log
 * issue inserts the fdatasync here), apply, then hand outputs to workers:
 * first one event batch per worker, then the replies in request order. That
 * order is what keeps per-session FIFO and "notification before the reply
 * that shows the change" (DESIGN.md invariants 2 and 3).
 */
#include "replication/seq_int.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <urcu.h>

/* ---- small helpers ------------------------------------------------------ */

/* cfg.clock_ms, or the system's clocks. */
int64_t sq_clock(const struct seq *s, bool wall)
{
    if (s->cfg.clock_ms != NULL)
        return s->cfg.clock_ms(wall);
    return wall ? base_wall_ms() : base_mono_ms();
}

/* A new session's password, chosen here and then recorded in its
 * createSession txn (replication.h, seq_passwd_derive): a MAC of the id
 * under the server's key rather than fresh random bytes, so that a run with
 * a fixed key (tests, fuzzers) hands out the same passwords every time. */
bool seq_passwd_derive(const uint8_t key[SEQ_PASSWD_KEY_BYTES], int64_t id,
                       uint8_t out[SEQ_PASSWD_BYTES])
{
    uint8_t msg[8], mac[EVP_MAX_MD_SIZE];
    unsigned int mac_len = 0;
    base_put_be64(msg, (uint64_t)id);
    bool ok = HMAC(EVP_sha256(), key, SEQ_PASSWD_KEY_BYTES, msg, sizeof msg, mac, &mac_len) !=
                  NULL &&
              mac_len >= SEQ_PASSWD_BYTES;
    if (ok)
        memcpy(out, mac, SEQ_PASSWD_BYTES);
    OPENSSL_cleanse(mac, sizeof mac);
    return ok;
}

/* Checks a reattach against the password the session's createSession
 * recorded, never against one derived from this server's key: in an
 * ensemble the session may come from another server, with another key.
 * Constant time, so a client probing passwords learns nothing from how long
 * a refusal takes. Any length but 16 is wrong (ZooKeeper's Arrays.equals),
 * and so is anything when no password is known (a format-1 session the
 * recovery did not fill in): zeros must never open a session. */
bool sq_passwd_matches(const struct tree_session *ts, const struct seq_req *r)
{
    if (r->passwd_len != SEQ_PASSWD_BYTES || !ts->passwd_known)
        return false;
    return CRYPTO_memcmp(ts->passwd, r->passwd, SEQ_PASSWD_BYTES) == 0;
}

/* Wake-ups follow one protocol on every queue. The consumer stores
 * sleeping = true and re-checks its queue's head before it blocks; the
 * producer exchanges the head (its push) and writes the eventfd only if it
 * then sees sleeping. All four accesses are seq_cst, so in their single total
 * order one side sees the other (Dekker): no push is missed, and a busy
 * consumer costs its producers no syscall. (No fences: GCC's TSan lacks them.) */
static void kick(int efd)
{
    uint64_t one = 1;
    ssize_t n = write(efd, &one, sizeof(one));
    (void)n; /* EAGAIN means the counter is already non-zero: the reader will wake */
}

void sq_wake_if_sleeping(atomic_bool *sleeping, int efd)
{
    if (atomic_load_explicit(sleeping, memory_order_seq_cst))
        kick(efd);
}

void sq_wake_worker(struct seq *s, int w, bool addressed)
{
    struct seq_outq *o = &s->out[w];
    /* the seq_cst load that sees the announcement also sees wants_events,
     * stored before it */
    if (atomic_load_explicit(&o->sleeping, memory_order_seq_cst) &&
        (addressed || atomic_load_explicit(&o->wants_events, memory_order_relaxed)))
        kick(o->efd);
}

int32_t sq_clamp_timeout(const struct seq *s, int32_t want)
{
    if (want < s->cfg.min_session_timeout_ms)
        return s->cfg.min_session_timeout_ms;
    if (want > s->cfg.max_session_timeout_ms)
        return s->cfg.max_session_timeout_ms;
    return want;
}

/* ---- requests and outputs ------------------------------------------------ */

struct seq_req *seq_req_new(int32_t kind, const void *body, size_t body_len,
                            const struct tree_authid *ids, int32_t auth_count)
{
    struct seq_req *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->kind = kind;
    r->worker = -1;
    if (body_len) {
        r->body = malloc(body_len);
        if (!r->body)
            goto fail;
        if (body)
            memcpy(r->body, body, body_len);
        r->body_len = body_len;
    }
    if (auth_count > 0) {
        r->auth_ids = calloc((size_t)auth_count, sizeof(*r->auth_ids));
        if (!r->auth_ids)
            goto fail;
        for (int32_t i = 0; i < auth_count; i++) {
            r->auth_ids[i].scheme = strdup(ids[i].scheme);
            r->auth_ids[i].id = strdup(ids[i].id);
            r->auth_count = i + 1;
            if (!r->auth_ids[i].scheme || !r->auth_ids[i].id)
                goto fail;
        }
    }
    return r;
fail:
    seq_req_free(r);
    return NULL;
}

void seq_req_free(struct seq_req *r)
{
    if (!r)
        return;
    for (int32_t i = 0; i < r->auth_count; i++) {
        free((char *)r->auth_ids[i].scheme);
        free((char *)r->auth_ids[i].id);
    }
    free(r->auth_ids);
    free(r->body);
    free(r);
}

/* The last worker to drop the batch frees it and drops its ACL references,
 * on that worker's thread with no grace period: safe by tree.h's lifetime
 * rule (struct tree_acl), since no reader can hold a list whose last
 * reference is this batch's. */
static void events_unref(struct seq_events *ev)
{
    if (!ev || __atomic_sub_fetch(&ev->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    for (uint32_t i = 0; i < ev->count; i++)
        tree_acl_unref(ev->items[i].acl);
    free(ev); /* items and paths live in the same block (push_events) */
}

void seq_out_free(struct seq_out *o)
{
    if (!o)
        return;
    events_unref(o->events);
    free(o->frame);
    free(o);
}

struct seq_out *sq_out_new(int32_t kind, uint64_t conn)
{
    struct seq_out *o = calloc(1, sizeof(*o));
    if (!o)
        return NULL;
    o->kind = kind;
    o->conn = conn;
    return o;
}

/* Queues o for worker w. A worker of -1 (internal requests) drops it. */
void sq_out_push(struct seq *s, int w, struct seq_out *o)
{
    if (w < 0 || w >= s->nworkers) {
        seq_out_free(o);
        return;
    }
    base_mpsc_push(&s->out[w].q, &o->node);
}

/* Takes ownership of w's frame buffer (the zk_wbuf is left empty). */
struct seq_out *sq_out_with_frame(int32_t kind, uint64_t conn, struct zk_wbuf *w)
{
    if (w->err)
        return NULL;
    struct seq_out *o = sq_out_new(kind, conn);
    if (!o)
        return NULL;
    o->frame = w->p;
    o->frame_len = w->len;
    zk_wbuf_init(w);
    return o;
}

/* ---- decoding a write request into a tree_req --------------------------- */

static bool decode_one(struct base_rd *r, int32_t op, struct tree_req *q)
{
    memset(q, 0, sizeof(*q));
    q->type = op;
    switch (op) {
    case ZK_OP_CREATE:
    case ZK_OP_CREATE2:
    case ZK_OP_CREATECONTAINER:
        return zk_get_create_req(r, &q->u.create, false);
    case ZK_OP_CREATETTL:
        return zk_get_create_req(r, &q->u.create, true);
    case ZK_OP_DELETE:
    case ZK_OP_CHECK:
        return zk_get_path_version_req(r, &q->u.del);
    case ZK_OP_SETDATA:
        return zk_get_setdata_req(r, &q->u.setdata);
    case ZK_OP_SETACL:
        return zk_get_setacl_req(r, &q->u.setacl);
    case ZK_OP_DELETECONTAINER:
        return zk_get_path_req(r, &q->u.path);
    default:
        return false;
    }
}

static void tree_req_release(struct tree_req *q)
{
    if (q->type == ZK_OP_CREATE || q->type == ZK_OP_CREATE2 || q->type == ZK_OP_CREATECONTAINER ||
        q->type == ZK_OP_CREATETTL)
        zk_create_req_free(&q->u.create);
    else if (q->type == ZK_OP_SETACL)
        zk_setacl_req_free(&q->u.setacl);
}

/* MultiRequest: (MultiHeader, op body)* terminated by a header with done set. */
static bool decode_multi(struct base_rd *r, struct seq_entry *e)
{
    size_t cap = 0;
    for (;;) {
        struct zk_multi_header h;
        if (!zk_get_multi_header(r, &h))
            return false;
        if (h.done)
            return true;
        if (e->treq.nops == TREE_MULTI_OPS_MAX)
            return false;
        if (base_grow(&e->subs, &cap, (size_t)e->treq.nops + 1, sizeof *e->subs) != 0)
            return false;
        if (!decode_one(r, h.type, &e->subs[e->treq.nops]))
            return false;
        e->treq.nops++;
        e->treq.ops = e->subs;
    }
}

static void entry_release(struct seq_entry *e)
{
    for (uint32_t i = 0; i < e->treq.nops; i++)
        tree_req_release(&e->subs[i]);
    free(e->subs);
    if (e->treq.type != ZK_OP_MULTI)
        tree_req_release(&e->treq);
    if (e->results) {
        tree_results_free(e->results, e->txn.nops);
        free(e->results);
    }
    txn_free(&e->txn);
    seq_req_free(e->req);
}

/* ---- phase 1: prep ------------------------------------------------------- */

static struct tree_auth entry_auth(const struct seq *s, const struct seq_req *r)
{
    return (struct tree_auth){ .ids = r->auth_ids,
                               .count = r->auth_count,
                               .peer_ip = r->peer_ip,
                               .super = r->super,
                               .sasl_provider = s->cfg.sasl_provider };
}

static void prep_txn(struct seq *s, struct seq_entry *e, int64_t wall_ms)
{
    /* Every txn prep accepts fits one log record: a request whose txn would
     * not (an "auth" ACL expanded into many long digest ids) is answered
     * BADARGUMENTS here instead of failing txnlog_append and holding every
     * later round (round_persist aborts if it ever does). Bounded with or
     * without a log, so a request gets the same answer on every server. */
    struct tree_prep_cfg pcfg = { .ttl_enabled = s->cfg.ttl_enabled,
                                  .acl_providers = s->cfg.x509_acls ? TREE_ACL_X509 : 0,
                                  .max_txn_bytes = TXNLOG_TXN_OPS_BYTES_MAX,
                                  .op_bytes = txn_op_encoded_bytes };
    struct tree_auth auth = entry_auth(s, e->req);
    e->txn.zxid = s->next_zxid_counter;
    e->txn.session_id = e->req->session_id;
    e->txn.cxid = e->req->xid;
    e->txn.time_ms = wall_ms;
    e->err = tree_prep(s->tree, &pcfg, &e->treq, &auth, &e->txn);
    /* A failed multi still yields error ops the reply needs, but nothing that
     * changes the tree; only successful txns consume a zxid (unless failed
     * writes are txns too: see finish_write_txn). */
    e->has_txn = e->err == ZK_OK && e->txn.nops > 0;
    if (e->has_txn)
        s->next_zxid_counter++;
}

/* sync and getEphemerals are answered by the server the client is on, from
 * its own state: they never become txns. */
static bool op_is_local(int32_t op)
{
    return op == ZK_OP_SYNC || op == ZK_OP_GETEPHEMERALS;
}

/* Every write a client gets an answer for is described by its txn, so the
 * reply can be built from the txn and the apply results alone (seq_put_txn_reply)
 * — on this server, or on a follower that only has the log. A write that
 * failed before or in prep gets ZooKeeper's ErrorTxn: one TXN_ERROR op with
 * the error (a failed multi already holds its per-op TXN_ERROR ops). With
 * cfg.error_txns the error txn, like an empty multi, is a real txn: it takes
 * a zxid, is logged and applied (a no-op on the tree), as ZooKeeper does. */
static void finish_write_txn(struct seq *s, struct seq_entry *e, int64_t wall_ms)
{
    struct seq_req *r = e->req;
    int32_t err = e->marshalling_error ? ZK_EMARSHALLINGERROR : e->err;
    /* a move marker is an ErrorTxn even when the move was taken */
    if ((err != ZK_OK || r->op == SEQ_OP_REATTACH) && e->txn.nops == 0) {
        txn_free(&e->txn);
        e->txn.ops = calloc(1, sizeof *e->txn.ops);
        if (e->txn.ops) {
            e->txn.ops[0] = (struct txn_op){ .type = TXN_ERROR, .client_type = r->op,
                                             .data_len = -1, .err = err };
            e->txn.nops = 1;
        }
        /* without memory for the op, reply_write answers from e->err */
        e->txn.type = TXN_ERROR;
        e->err = err;
    }
    if (!s->cfg.error_txns || e->has_txn)
        return;
    if (e->txn.type == TXN_ERROR && e->txn.nops == 0)
        return; /* no memory for the error op: answered, but not replicated */
    e->txn.zxid = s->next_zxid_counter;
    e->txn.session_id = r->session_id;
    e->txn.cxid = r->xid;
    e->txn.time_ms = wall_ms;
    e->has_txn = true;
    s->next_zxid_counter++;
}

/* ZooKeeper's session check (ZooKeeperServer.checkSession): a request of a
 * session that is gone or closing is answered SESSIONEXPIRED. Internal
 * requests (worker -1: expiry, reaper) are the server's own. */
static bool session_live(struct seq *s, const struct seq_req *r)
{
    if (r->worker < 0)
        return true;
    struct tree_session *ts = tree_session_find(s->tree, r->session_id);
    return ts && !ts->closing;
}

/* ZooKeeper's session owner check (SessionTrackerImpl.checkSession): in an
 * ensemble a session's writes come through the member it is attached to.
 * One that arrives from another member was sent on a connection the client
 * has left: were it taken, it could apply after what the client did on its
 * new connection. The first member heard from owns a session a new leader
 * knows no owner for (as ZooKeeper's leader does); a move marker moves it. */
static bool session_owned_by_origin(struct seq *s, const struct seq_req *r)
{
    if (r->origin == 0 || r->worker < 0)
        return true;
    struct tree_session *ts = tree_session_find(s->tree, r->session_id);
    if (ts->owner_server == 0)
        ts->owner_server = r->origin;
    return ts->owner_server == r->origin;
}

/* A session moving to the member r came from, with the password its client
 * brought (the body). A wrong one moves nothing: it is refused AUTHFAILED
 * and the member answers its client as ZooKeeper does (timeout 0). */
static void prep_reattach(struct seq *s, struct seq_entry *e)
{
    struct seq_req *r = e->req;
    struct tree_session *ts = tree_session_find(s->tree, r->session_id);
    if (r->origin == 0 || r->body_len != SEQ_PASSWD_BYTES || !ts->passwd_known ||
        CRYPTO_memcmp(ts->passwd, r->body, SEQ_PASSWD_BYTES) != 0) {
        e->err = ZK_EAUTHFAILED;
        return;
    }
    ts->owner_server = r->origin;
}

int32_t sq_write_session_check(struct seq *s, const struct seq_req *r)
{
    if (!session_live(s, r))
        return ZK_ESESSIONEXPIRED;
    if (r->op != SEQ_OP_REATTACH && !session_owned_by_origin(s, r))
        return ZK_ESESSIONMOVED;
    return ZK_OK;
}

static void prep_write_request(struct seq *s, struct seq_entry *e, int64_t wall_ms)
{
    struct seq_req *r = e->req;
    struct base_rd rb;
    base_rd_init(&rb, r->body, r->body_len);
    e->err = sq_write_session_check(s, r);
    if (e->err != ZK_OK)
        return;
    if (r->op == SEQ_OP_REATTACH) {
        prep_reattach(s, e);
        return;
    }
    switch (r->op) {
    case ZK_OP_SYNC:
    case ZK_OP_GETEPHEMERALS:
        if (!zk_get_path_req(&rb, &e->treq.u.path))
            e->marshalling_error = true;
        e->treq.type = r->op;
        return;
    case ZK_OP_RECONFIG:
        e->err = ZK_ERECONFIGDISABLED; /* standalone: reconfigEnabled=false */
        return;
    case ZK_OP_CLOSESESSION:
        e->treq.type = ZK_OP_CLOSESESSION;
        break;
    case ZK_OP_MULTI:
        e->treq.type = ZK_OP_MULTI;
        if (!decode_multi(&rb, e)) {
            e->marshalling_error = true;
            return;
        }
        break;
    default:
        if (!decode_one(&rb, r->op, &e->treq)) {
            e->marshalling_error = true;
            return;
        }
        break;
    }
    prep_txn(s, e, wall_ms);
}

static void prep_write(struct seq *s, struct seq_entry *e, int64_t wall_ms)
{
    prep_write_request(s, e, wall_ms);
    if (!op_is_local(e->req->op))
        finish_write_txn(s, e, wall_ms);
}

static void prep_connect(struct seq *s, struct seq_entry *e, int64_t wall_ms)
{
    struct seq_req *r = e->req;
    if (r->last_zxid_seen > s->next_zxid_counter - 1) {
        /* ZooKeeper refuses a client that has seen a newer state than ours. */
        e->err = ZK_ESESSIONMOVED;
        return;
    }
    if (r->session_id != 0 && !r->new_session)
        return; /* reattach: decided after apply, against the current session table */
    if (!r->new_session)
        r->session_id = (int64_t)(s->next_session_id++);
    r->timeout_ms = sq_clamp_timeout(s, r->timeout_ms);
    e->treq.type = ZK_OP_CREATESESSION;
    e->treq.u.session.timeout_ms = r->timeout_ms;
    if (!seq_passwd_derive(s->passwd_key, r->session_id, e->treq.u.session.passwd)) {
        /* no txn: reply_connect finds no session and answers timeout 0 */
        e->err = ZK_ESYSTEMERROR;
        return;
    }
    prep_txn(s, e, wall_ms);
}

/* ---- phase 3: apply -------------------------------------------------------- */

static bool evbuf_grow(struct seq_evbuf *b, size_t path_bytes)
{
    return base_grow(&b->items, &b->cap, (size_t)b->count + 1, sizeof *b->items) == 0 &&
           path_bytes <= SIZE_MAX - b->plen &&
           base_grow(&b->paths, &b->pcap, b->plen + path_bytes, 1) == 0;
}

/* Runs inside tree_apply, whose read-side section keeps ev->acl alive
 * (even a deleted node's): the reference taken here keeps it for workers. */
void sq_collect_event(void *arg, const struct tree_event *ev)
{
    struct seq_evbuf *b = arg;
    size_t len = strlen(ev->path) + 1;
    if (b->oom || !evbuf_grow(b, len)) {
        b->oom = true;
        return;
    }
    memcpy(b->paths + b->plen, ev->path, len);
    b->items[b->count++] = (struct seq_evrec){
        .type = ev->type, .zxid = ev->zxid, .path_off = b->plen,
        .acl = tree_acl_ref((struct tree_acl *)ev->acl),
    };
    b->plen += len;
}

/* Drops the records' ACL references (a batch that could not be built). */
void sq_evbuf_drop(struct seq_evbuf *b)
{
    for (uint32_t i = 0; i < b->count; i++)
        tree_acl_unref(b->items[i].acl);
    b->count = 0;
    b->plen = 0;
}

static void apply_entry(struct seq *s, struct seq_entry *e, struct seq_evbuf *evb)
{
    if (!e->has_txn)
        return;
    e->results = calloc(e->txn.nops, sizeof(*e->results));
    atomic_store(&s->applying_zxid, e->txn.zxid);
    int rc = tree_apply(s->tree, &e->txn, sq_collect_event, evb, e->results);
    if (rc != ZK_OK) {
        /* Prep accepted it against this very tree: a mismatch is a bug that
         * would make replicas diverge. Stop rather than serve a wrong tree. */
        base_log(BASE_LOG_ERROR, "larchd: sequencer: txn 0x%llx does not apply (%s); aborting",
                 (unsigned long long)e->txn.zxid, zk_err_name(rc));
        abort();
    }
    sq_digest_log_note(&s->digest_log, e->txn.zxid, tree_digest_running(s->tree));
    e->reply_zxid = e->txn.zxid;
}

/* ---- phase 4: replies ------------------------------------------------------ */

void sq_put_reply_header(struct zk_wbuf *w, int32_t xid, int64_t zxid, int32_t err)
{
    struct zk_reply_header h = { .xid = xid, .zxid = zxid, .err = err };
    zk_put_reply_header(w, &h);
}

static void put_op_body(struct zk_wbuf *w, int32_t client_type, const struct tree_op_result *res)
{
    switch (client_type) {
    case ZK_OP_CREATE:
        zk_put_str(w, zk_str_c(res->path));
        break;
    case ZK_OP_CREATE2:
    case ZK_OP_CREATECONTAINER:
    case ZK_OP_CREATETTL:
        zk_put_str(w, zk_str_c(res->path));
        zk_put_stat(w, &res->stat);
        break;
    case ZK_OP_SETDATA:
    case ZK_OP_SETACL:
        zk_put_stat(w, &res->stat);
        break;
    default: /* delete, deleteContainer, check, closeSession: header only */
        break;
    }
}

/* A MultiResponse from a multi txn: a failed multi's ops are all TXN_ERROR
 * (each with its own error), a successful one's are read from results. */
static void put_multi_body(struct zk_wbuf *w, const struct txn *x,
                           const struct tree_op_result *results)
{
    for (uint32_t i = 0; i < x->nops; i++) {
        const struct txn_op *op = &x->ops[i];
        if (op->type == TXN_ERROR) {
            struct zk_multi_header h = { .type = ZK_OP_ERROR, .done = false, .err = op->err };
            zk_put_multi_header(w, &h);
            zk_put_i32(w, op->err); /* ErrorResponse */
            continue;
        }
        /* ZooKeeper reports a create2 inside a multi as a plain create
         * (type 1, path only): its multi txn records create2 as create. */
        int32_t type = op->client_type == ZK_OP_CREATE2 ? ZK_OP_CREATE : op->client_type;
        struct zk_multi_header h = { .type = type, .done = false, .err = 0 };
        zk_put_multi_header(w, &h);
        put_op_body(w, type, &results[i]);
    }
    zk_put_multi_end(w);
}

void seq_put_txn_reply(struct zk_wbuf *w, int32_t op, int32_t xid, int64_t zxid,
                       const struct txn *x, const struct tree_op_result *results)
{
    if (x->type == TXN_ERROR) {
        int32_t err = x->nops > 0 ? x->ops[0].err : ZK_ESYSTEMERROR;
        sq_put_reply_header(w, xid, zxid, err);
        if (op == ZK_OP_MULTI && err == ZK_EMARSHALLINGERROR)
            zk_put_multi_end(w); /* ZooKeeper sends an empty MultiResponse with it */
        return;
    }
    /* ZooKeeper answers a failed multi with err 0 in the header and the
     * errors in the per-op results (kazoo and the C client read them there). */
    sq_put_reply_header(w, xid, zxid, ZK_OK);
    if (op == ZK_OP_MULTI) {
        put_multi_body(w, x, results);
    } else if (op == ZK_OP_RECONFIG && x->nops == 1) {
        /* GetDataResponse: the new configuration and its node's stat */
        zk_put_bytes(w, x->ops[0].data, x->ops[0].data_len);
        zk_put_stat(w, &results[0].stat);
    } else {
        put_op_body(w, op, &results[0]);
    }
}

static void collect_path(void *arg, const char *path)
{
    struct zk_wbuf *w = arg;
    zk_put_str(w, zk_str_c(path));
}

/* GetEphemeralsResponse: a string vector; count patched after the walk. */
void sq_put_ephemerals(struct seq *s, struct zk_wbuf *w, int64_t session_id,
                       const struct zk_str *p)
{
    size_t n = p->len > 0 && p->ptr ? (size_t)p->len : 0;
    /* a heap copy: the prefix may be as long as the frame */
    char *prefix = n ? strndup(p->ptr, n) : NULL;
    if (n && !prefix) {
        w->err = true; /* no reply can be built: the connection closes */
        return;
    }
    size_t count_at = w->len;
    zk_put_i32(w, 0);
    size_t before = w->len;
    int32_t count = 0;
    tree_session_ephemerals(s->tree, session_id, prefix, collect_path, w);
    free(prefix);
    /* Count the strings written: walk the lengths back. */
    struct base_rd rb;
    base_rd_init(&rb, w->p + before, w->len - before);
    struct zk_str tmp;
    while (base_rd_left(&rb) > 0 && zk_get_str(&rb, &tmp))
        count++;
    if (!w->err) {
        base_put_be32(w->p + count_at, (uint32_t)count);
    }
}

static void reply_write(struct seq *s, struct seq_entry *e)
{
    struct seq_req *r = e->req;
    struct zk_wbuf w;
    zk_wbuf_init(&w);
    size_t mark = zk_frame_begin(&w);
    int64_t zxid = e->has_txn ? e->reply_zxid : tree_last_zxid(s->tree);
    int32_t err = e->marshalling_error ? ZK_EMARSHALLINGERROR : e->err;
    if (op_is_local(r->op)) {
        sq_put_reply_header(&w, r->xid, zxid, err);
        if (err == ZK_OK && r->op == ZK_OP_SYNC)
            zk_put_str(&w, e->treq.u.path.path);
        else if (err == ZK_OK)
            sq_put_ephemerals(s, &w, r->session_id, &e->treq.u.path.path);
    } else if (e->txn.type == TXN_ERROR && e->txn.nops == 0) {
        sq_put_reply_header(&w, r->xid, zxid, err); /* no memory for its error op */
    } else if (err == ZK_OK && e->txn.nops > 0 && !e->results) {
        w.err = true; /* no memory for the apply results: the connection closes */
    } else {
        seq_put_txn_reply(&w, r->op, r->xid, zxid, &e->txn, e->results);
    }
    zk_frame_end(&w, mark);
    bool closing = r->op == ZK_OP_CLOSESESSION && err == ZK_OK;
    struct seq_out *o = sq_out_with_frame(closing ? SEQ_OUT_CLOSE : SEQ_OUT_REPLY, r->conn, &w);
    zk_wbuf_free(&w);
    if (!o) {
        /* Out of memory for the reply: the client cannot be answered in
         * order any more, so its connection must go (it will retry). */
        o = sq_out_new(SEQ_OUT_CLOSE, r->conn);
        if (!o)
            return;
    }
    o->pending_done = true;
    o->session_id = r->session_id;
    sq_out_push(s, r->worker, o);
    atomic_fetch_add_explicit(&s->st_writes, 1, memory_order_relaxed);
}

/* Points the session at (worker, conn) and tells the previous holder to close:
 * ZooKeeper closes the old connection when a session moves. */
void sq_take_ownership(struct seq *s, struct tree_session *ts, int worker, uint64_t conn,
                           int64_t now_ms)
{
    int ow = atomic_load(&ts->owner_worker);
    uint64_t oc = atomic_load(&ts->owner_conn);
    if (ow >= 0 && !(ow == worker && oc == conn)) {
        struct seq_out *o = sq_out_new(SEQ_OUT_CLOSE, oc);
        if (o) {
            o->session_id = ts->id;
            sq_out_push(s, ow, o);
        }
    }
    atomic_store(&ts->owner_conn, conn);
    atomic_store(&ts->owner_worker, worker);
    atomic_store_explicit(&ts->last_seen_ms, now_ms, memory_order_relaxed);
}

static void reply_connect(struct seq *s, struct seq_entry *e, int64_t now_ms)
{
    struct seq_req *r = e->req;
    if (e->err == ZK_ESESSIONMOVED) {
        sq_out_push(s, r->worker, sq_out_new(SEQ_OUT_CLOSE, r->conn));
        return;
    }
    struct seq_out *o = sq_out_new(SEQ_OUT_CONNECT, r->conn);
    if (!o)
        return;
    o->session_id = r->session_id;
    struct tree_session *ts = tree_session_find(s->tree, r->session_id);
    /* a new session (its createSession txn) needs no password; a reattach
     * must bring the right one, else nothing changes for the owner. Either
     * way the client gets the recorded password, the one every server
     * checks. */
    bool ok = ts && !ts->closing && ts->passwd_known && (e->has_txn || sq_passwd_matches(ts, r));
    if (ok) {
        sq_take_ownership(s, ts, r->worker, r->conn, now_ms);
        o->timeout_ms = ts->timeout_ms;
        memcpy(o->passwd, ts->passwd, sizeof o->passwd);
    } else {
        /* Unknown, expired or wrong password: timeout 0 tells the client its
         * session is gone, exactly as ZooKeeper answers. */
        o->timeout_ms = 0;
        o->session_id = 0;
        memset(o->passwd, 0, sizeof o->passwd);
    }
    sq_out_push(s, r->worker, o);
}

void sq_handle_disconnect(struct seq *s, const struct seq_req *r)
{
    struct tree_session *ts = tree_session_find(s->tree, r->session_id);
    if (ts && atomic_load(&ts->owner_worker) == r->worker && atomic_load(&ts->owner_conn) == r->conn)
        atomic_store(&ts->owner_worker, -1);
}

/* One event batch per worker, shared by reference. Pushed even when empty so
 * workers learn through_zxid and stop waiting (invariant 3 fast path). */
void sq_push_events(struct seq *s, struct seq_evbuf *evb, int64_t through)
{
    /* One block: the header, the events, then their paths. */
    size_t items_bytes = (size_t)evb->count * sizeof(struct seq_event);
    struct seq_events *ev = malloc(sizeof(*ev) + items_bytes + evb->plen);
    if (!ev) {
        /* Workers waiting on through_zxid give up after a bounded spin and
         * say so; events lost to OOM cannot be recovered here. */
        base_log(BASE_LOG_ERROR, "larchd: sequencer: out of memory for %u watch events",
                 evb->count);
        sq_evbuf_drop(evb);
        return;
    }
    ev->through_zxid = through;
    ev->count = evb->count;
    ev->items = (struct seq_event *)(ev + 1);
    char *paths = (char *)ev->items + items_bytes;
    if (evb->plen)
        memcpy(paths, evb->paths, evb->plen);
    /* the records' ACL references move to the batch */
    for (uint32_t i = 0; i < evb->count; i++)
        ev->items[i] = (struct seq_event){ .type = evb->items[i].type,
                                           .zxid = evb->items[i].zxid,
                                           .path = paths + evb->items[i].path_off,
                                           .acl = evb->items[i].acl };
    evb->count = 0;
    evb->plen = 0;
    if (s->nworkers == 0) {
        ev->refs = 1;
        events_unref(ev);
        return;
    }
    ev->refs = (unsigned long)s->nworkers;
    for (int w = 0; w < s->nworkers; w++) {
        struct seq_out *o = sq_out_new(SEQ_OUT_EVENTS, 0);
        if (!o) {
            events_unref(ev);
            continue;
        }
        o->events = ev;
        sq_out_push(s, w, o);
    }
}

/* Invariant 4: the round's txns reach the log and one fdatasync covers them
 * all (group commit: while the sequencer syncs, the next round accumulates
 * in the inbound queue). Each txn is appended once; a retry after a failed
 * sync only syncs again (the log rewrites from its last durable offset). */
static int round_persist(struct seq *s, struct seq_round *r)
{
    if (!s->cfg.log)
        return 0;
    struct seq_entry *es = r->es;
    for (size_t i = 0; i < r->n; i++) {
        if (!es[i].has_txn || es[i].logged)
            continue;
        int rc = txnlog_append(s->cfg.log, &es[i].txn);
        if (rc == -EINVAL) {
            /* prep bounds every txn by the record (prep_txn): one it
             * accepted that the log refuses is a bug, not a disk problem,
             * and holding the round for it would stall every write. */
            base_log(BASE_LOG_ERROR,
                     "larchd: sequencer: txn 0x%llx does not fit a log record; aborting",
                     (unsigned long long)es[i].txn.zxid);
            abort();
        }
        if (rc != 0)
            return rc;
        es[i].logged = true;
    }
    int rc = txnlog_sync(s->cfg.log);
    if (rc == 0)
        atomic_fetch_add_explicit(&s->log_syncs, 1, memory_order_relaxed);
    return rc;
}

/* Apply, one event batch per worker, then the replies in request order. */
void seq_round_finish(struct seq *s, struct seq_round *r)
{
    struct seq_entry *es = r->es;
    size_t n = r->n;
    int64_t before = r->before_zxid, now_ms = r->now_ms;
    free(r);
    struct seq_evbuf *evb = s->evb;
    sq_evbuf_drop(evb); /* a no-op: push_events took or dropped the last round's records */
    evb->oom = false;
    for (size_t i = 0; i < n; i++)
        apply_entry(s, &es[i], evb);
    tree_prep_reset(s->tree);
    int64_t after = tree_last_zxid(s->tree);
    if (after != before || evb->count)
        sq_push_events(s, evb, after);
    bool kicked[SEQ_WORKERS_MAX] = { false };
    for (size_t i = 0; i < n; i++) {
        struct seq_entry *e = &es[i];
        switch (e->req->kind) {
        case SEQ_REQ_WRITE:
            reply_write(s, e);
            break;
        case SEQ_REQ_CONNECT:
            reply_connect(s, e, now_ms);
            break;
        case SEQ_REQ_DISCONNECT:
            sq_handle_disconnect(s, e->req);
            break;
        }
        if (e->req->worker >= 0 && e->req->worker < s->nworkers)
            kicked[e->req->worker] = true;
        entry_release(e);
    }
    free(es);
    for (int w = 0; w < s->nworkers; w++)
        if (kicked[w] || after != before)
            sq_wake_worker(s, w, kicked[w]);
    atomic_fetch_add_explicit(&s->st_rounds, 1, memory_order_relaxed);
    if (n > atomic_load_explicit(&s->st_max_round, memory_order_relaxed))
        atomic_store_explicit(&s->st_max_round, n, memory_order_relaxed);
    atomic_fetch_sub_explicit(&s->st_outstanding, n, memory_order_relaxed);
}

struct seq_round *seq_round_prepare(struct seq *s, struct seq_req **reqs, size_t n,
                                    int64_t now_ms, int64_t wall_ms)
{
    struct seq_round *r = calloc(1, sizeof(*r));
    struct seq_entry *es = calloc(n ? n : 1, sizeof(*es));
    if (!r || !es) {
        free(r);
        free(es);
        for (size_t i = 0; i < n; i++)
            seq_req_free(reqs[i]);
        atomic_fetch_sub_explicit(&s->st_outstanding, n, memory_order_relaxed);
        return NULL;
    }
    *r = (struct seq_round){ .es = es, .n = n, .before_zxid = tree_last_zxid(s->tree),
                             .now_ms = now_ms };
    for (size_t i = 0; i < n; i++) {
        es[i].req = reqs[i];
        if (reqs[i]->kind == SEQ_REQ_WRITE)
            prep_write(s, &es[i], wall_ms);
        else if (reqs[i]->kind == SEQ_REQ_CONNECT)
            prep_connect(s, &es[i], wall_ms);
    }
    return r;
}

size_t seq_round_len(const struct seq_round *r)
{
    return r->n;
}

const struct txn *seq_round_txn(const struct seq_round *r, size_t i)
{
    BASE_ASSERT(i < r->n); /* a caller's bug: indexes run below seq_round_len */
    return r->es[i].has_txn ? &r->es[i].txn : NULL;
}

void sq_round_discard(struct seq_round *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++)
        entry_release(&r->es[i]);
    free(r->es);
    free(r);
}

void seq_round_free(struct seq *s, struct seq_round *r)
{
    if (!r)
        return;
    atomic_fetch_sub_explicit(&s->st_outstanding, r->n, memory_order_relaxed);
    sq_round_discard(r);
}

/* The standalone driver: prepare, make durable, finish. */
void seq_run_round(struct seq *s, struct seq_req **reqs, size_t n, int64_t now_ms, int64_t wall_ms)
{
    struct seq_round *r = seq_round_prepare(s, reqs, n, now_ms, wall_ms);
    if (!r)
        return;
    int rc = round_persist(s, r);
    if (rc != 0) {
        /* Not durable: keep everything, answer nothing, serve reads on. */
        base_log(BASE_LOG_ERROR, "larchd: txn log sync failed (%s): writes wait until it succeeds",
                 strerror(-rc));
        atomic_store(&s->log_error, rc);
        s->held = r;
        return;
    }
    seq_round_finish(s, r);
}

bool seq_retry_held(struct seq *s)
{
    if (!s->held)
        return true;
    int rc = round_persist(s, s->held);
    if (rc != 0) {
        atomic_store(&s->log_error, rc);
        return false;
    }
    base_log(BASE_LOG_INFO, "larchd: txn log sync succeeded again: %zu held requests proceed",
             s->held->n);
    atomic_store(&s->log_error, 0);
    struct seq_round *r = s->held;
    s->held = NULL;
    seq_round_finish(s, r);
    return true;
}

/* ---- ticks: session expiry and the container/TTL reaper ------------------ */

struct expiry_scan {
    int64_t now_ms;
    struct seq_req **reqs;
    size_t count;
    size_t cap, owners_cap; /* reqs and owners grow together, a slot each */
    struct {
        int worker;
        uint64_t conn;
        int64_t session;
    } *owners;
};

static bool scan_push(struct expiry_scan *x, struct seq_req *r)
{
    if (base_grow(&x->reqs, &x->cap, x->count + 1, sizeof *x->reqs) != 0 ||
        base_grow(&x->owners, &x->owners_cap, x->count + 1, sizeof *x->owners) != 0)
        return false;
    x->reqs[x->count++] = r;
    return true;
}

/* ZooKeeper's SessionTracker: a session with no traffic for its timeout
 * expires; its closeSession txn deletes its ephemerals. */
struct seq_req *sq_expiry_req(const struct tree_session *ts, int64_t now_ms)
{
    int64_t seen = atomic_load_explicit(&ts->last_seen_ms, memory_order_relaxed);
    if (ts->closing || now_ms - seen <= ts->timeout_ms)
        return NULL;
    struct seq_req *r = seq_req_new(SEQ_REQ_WRITE, NULL, 0, NULL, 0);
    if (!r)
        return NULL;
    r->op = ZK_OP_CLOSESESSION;
    r->session_id = ts->id;
    r->super = true;
    r->worker = -1; /* the server's own request: nobody to answer */
    return r;
}

static void scan_session(void *arg, struct tree_session *ts)
{
    struct expiry_scan *x = arg;
    if (x->count >= SEQ_ROUND_MAX)
        return;
    struct seq_req *r = sq_expiry_req(ts, x->now_ms);
    if (!r)
        return;
    if (!scan_push(x, r)) {
        seq_req_free(r);
        return;
    }
    x->owners[x->count - 1].worker = atomic_load(&ts->owner_worker);
    x->owners[x->count - 1].conn = atomic_load(&ts->owner_conn);
    x->owners[x->count - 1].session = ts->id;
}

static void expire_sessions(struct seq *s, int64_t now_ms, int64_t wall_ms)
{
    struct expiry_scan x = { .now_ms = now_ms };
    tree_session_each(s->tree, scan_session, &x);
    if (x.count == 0)
        goto out;
    size_t n = x.count;
    atomic_fetch_add_explicit(&s->st_outstanding, n, memory_order_relaxed);
    seq_run_round(s, x.reqs, n, now_ms, wall_ms);
    for (size_t i = 0; i < n; i++) {
        struct seq_out *o = sq_out_new(SEQ_OUT_CLOSE, x.owners[i].conn);
        if (o) {
            o->session_id = x.owners[i].session;
            sq_out_push(s, x.owners[i].worker, o);
            if (x.owners[i].worker >= 0 && x.owners[i].worker < s->nworkers)
                sq_wake_if_sleeping(&s->out[x.owners[i].worker].sleeping, s->out[x.owners[i].worker].efd);
        }
    }
    atomic_fetch_add_explicit(&s->st_expired, n, memory_order_relaxed);
out:
    free(x.reqs);
    free(x.owners);
}


struct seq_req *sq_reap_req(const char *path)
{
    struct zk_wbuf w;
    zk_wbuf_init(&w);
    zk_put_str(&w, zk_str_c(path));
    struct seq_req *r = w.err ? NULL : seq_req_new(SEQ_REQ_WRITE, w.p, w.len, NULL, 0);
    zk_wbuf_free(&w);
    if (!r)
        return NULL;
    /* ZooKeeper's ContainerManager deletes both containers and expired TTL
     * nodes with deleteContainer, as the server itself (no ACL applies). */
    r->op = ZK_OP_DELETECONTAINER;
    r->super = true;
    r->worker = -1;
    return r;
}

static void collect_reapable(void *arg, const char *path)
{
    struct expiry_scan *x = arg;
    if (x->count >= SEQ_ROUND_MAX)
        return;
    struct seq_req *r = sq_reap_req(path);
    if (r && !scan_push(x, r))
        seq_req_free(r);
}

static void reap_nodes(struct seq *s, int64_t now_ms, int64_t wall_ms)
{
    struct expiry_scan x = { .now_ms = now_ms };
    tree_reapable(s->tree, wall_ms, collect_reapable, &x);
    if (x.count) {
        atomic_fetch_add_explicit(&s->st_outstanding, x.count, memory_order_relaxed);
        seq_run_round(s, x.reqs, x.count, now_ms, wall_ms);
    }
    free(x.reqs);
    free(x.owners);
}

void seq_tick(struct seq *s, int64_t now_ms, int64_t wall_ms)
{
    if (s->held)
        return; /* no new rounds while one waits for the disk */
    if (now_ms - s->last_expiry_scan_ms >= s->cfg.tick_ms) {
        s->last_expiry_scan_ms = now_ms;
        expire_sessions(s, now_ms, wall_ms);
    }
    if (now_ms - s->last_reap_ms >= s->cfg.container_check_ms && !s->held) {
        s->last_reap_ms = now_ms;
        reap_nodes(s, now_ms, wall_ms);
    }
}

/* ---- the sequencer role ----------------------------------------------------
 * Whoever holds the role is the single writer: it consumes the in-queue, runs
 * rounds and ticks. Acquire/release on the flag orders one holder's tree
 * changes before the next holder's. */
static bool role_try(struct seq *s)
{
    bool free_ = false;
    return atomic_compare_exchange_strong_explicit(&s->role, &free_, true, memory_order_acquire,
                                                   memory_order_relaxed);
}

static void role_take(struct seq *s)
{
    while (!role_try(s))
        sched_yield(); /* a worker is finishing a round inline: microseconds */
}

static void role_release(struct seq *s)
{
    atomic_store_explicit(&s->role, false, memory_order_release);
}

/* ---- the thread ------------------------------------------------------------ */

size_t sq_take_round(struct seq *s, struct seq_req **reqs)
{
    size_t n = 0;
    while (n < SEQ_ROUND_MAX) {
        struct base_mpsc_node *node = base_mpsc_take(&s->in);
        if (!node)
            break;
        reqs[n++] = caa_container_of(node, struct seq_req, node);
    }
    return n;
}

/* Blocks until a producer kicks or a tick is due. The emptiness re-check
 * after announcing sleep needs the role (it reads the queue's tail); if a
 * worker holds it, that worker drains the queue and producers that come
 * after see us asleep and kick. */
static void sleep_until_work(struct seq *s, int64_t wait_ms)
{
    struct pollfd pfd[2] = { { .fd = s->in_efd, .events = POLLIN },
                             { .fd = s->ens ? sq_ens_io_fd(s) : -1, .events = POLLIN } };
    atomic_store(&s->sleeping, true); /* seq_cst */
    bool empty = true;
    if (role_try(s)) {
        empty = base_mpsc_empty(&s->in);
        role_release(s);
    }
    /* the peer link wakes us with seq_kick too; this closes the window
     * between its push and our announcement */
    if (empty && s->ens)
        empty = !sq_ens_has_input(s); /* fields fixed since seq_new: no role needed */
    if (wait_ms <= 0)
        empty = false;
    /* a negative fd is skipped; the transport's is cleared by its pump */
    if (empty && poll(pfd, 2, (int)wait_ms) > 0 && (pfd[0].revents & POLLIN)) {
        uint64_t v;
        ssize_t r = read(s->in_efd, &v, sizeof(v));
        (void)r;
    }
    atomic_store(&s->sleeping, false);
}

bool seq_run_inline(struct seq *s)
{
    if (!s->cfg.inline_rounds || !role_try(s))
        return false;
    struct seq_req *reqs[SEQ_ROUND_MAX];
    int64_t now_ms = sq_clock(s, false);
    int64_t wall_ms = sq_clock(s, true);
    rcu_read_lock();
    /* Bounded: a worker serves its own connections too. What is left is the
     * sequencer thread's (the producers kick it). */
    for (int rounds = 0; rounds < 4; rounds++) {
        size_t n = sq_take_round(s, reqs);
        if (n == 0)
            break;
        seq_run_round(s, reqs, n, now_ms, wall_ms);
    }
    rcu_read_unlock();
    tree_grow_index(s->tree);
    bool more = !base_mpsc_empty(&s->in);
    role_release(s);
    if (more)
        kick(s->in_efd);
    return true;
}

static void *seq_thread(void *arg)
{
    struct seq *s = arg;
    pthread_setname_np(pthread_self(), "larch-seq");
    struct seq_req **reqs = calloc(SEQ_ROUND_MAX, sizeof(*reqs));
    if (!reqs) {
        base_log(BASE_LOG_ERROR, "larchd: sequencer: out of memory at start");
        abort();
    }
    rcu_register_thread();
    role_take(s);
    tree_grow_index(s->tree); /* a recovered tree may hold millions of nodes */
    role_release(s);
    while (s->ens && !atomic_load(&s->stop)) {
        int64_t io_ms = sq_ens_pump(s);
        role_take(s);
        rcu_read_lock();
        int64_t wait_ms = seq_ens_step(s, sq_clock(s, false), sq_clock(s, true));
        rcu_read_unlock();
        tree_grow_index(s->tree);
        seq_ens_release(s);
        role_release(s);
        if (io_ms < wait_ms)
            wait_ms = io_ms;
        sleep_until_work(s, wait_ms < 100 ? wait_ms : 100);
    }
    while (!s->ens && !atomic_load(&s->stop)) {
        role_take(s);
        int64_t now_ms = sq_clock(s, false);
        int64_t wall_ms = sq_clock(s, true);
        rcu_read_lock(); /* tree_session_find in reply_connect/disconnect */
        bool flowing = seq_retry_held(s);
        if (flowing) {
            size_t n = sq_take_round(s, reqs);
            if (n)
                seq_run_round(s, reqs, n, now_ms, wall_ms);
            if (!s->held)
                seq_tick(s, now_ms, wall_ms);
        }
        rcu_read_unlock();
        tree_grow_index(s->tree);
        bool more = flowing && !s->held && !base_mpsc_empty(&s->in);
        role_release(s);
        if (!flowing || s->held) {
            /* Disk full or failing: retry the held round every tick. */
            struct timespec pause = { .tv_sec = 0, .tv_nsec = 100 * 1000000L };
            nanosleep(&pause, NULL);
        } else if (!more) {
            sleep_until_work(s, s->cfg.tick_ms < 100 ? s->cfg.tick_ms : 100);
        }
    }
    rcu_unregister_thread();
    free(reqs);
    return NULL;
}

/* ---- lifecycle ----------------------------------------------------------- */

/* The configured key, or 32 fresh random bytes (a server without a data dir
 * loses its sessions on restart anyway). It only derives the passwords of
 * sessions created here; checks use the recorded ones. 0, or -1 when the
 * kernel gives no randomness. */
static int passwd_key_init(struct seq *s, const struct seq_cfg *cfg)
{
    if (cfg->passwd_key_set) {
        memcpy(s->passwd_key, cfg->passwd_key, sizeof s->passwd_key);
        return 0;
    }
    size_t got = 0;
    while (got < sizeof s->passwd_key) {
        ssize_t n = getrandom(s->passwd_key + got, sizeof s->passwd_key - got, 0);
        if (n < 0 && errno != EINTR)
            return -1;
        got += n > 0 ? (size_t)n : 0;
    }
    return 0;
}

struct seq *seq_new(struct tree *t, const struct seq_cfg *cfg, int nworkers)
{
    if (nworkers < 0 || nworkers > SEQ_WORKERS_MAX)
        return NULL;
    struct seq *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    if (sq_digest_log_init(&s->digest_log) != 0) {
        free(s);
        return NULL;
    }
    s->tree = t;
    s->cfg = *cfg;
    if (s->cfg.tick_ms <= 0)
        s->cfg.tick_ms = 100;
    if (s->cfg.container_check_ms <= 0)
        s->cfg.container_check_ms = 60000;
    s->nworkers = nworkers;
    if (s->cfg.log || s->cfg.ensemble)
        s->cfg.inline_rounds = false; /* a worker must never wait on fdatasync */
    if (s->cfg.ensemble)
        s->cfg.error_txns = true; /* followers answer from committed txns */
    s->in_efd = -1;
    atomic_init(&s->serving, !s->cfg.ensemble); /* a member serves once it has a leader */
    s->evb = calloc(1, sizeof(*s->evb));
    if (!s->evb) {
        sq_digest_log_destroy(&s->digest_log);
        free(s);
        return NULL;
    }
    for (int w = 0; w < SEQ_WORKERS_MAX; w++)
        s->out[w].efd = -1;
    base_mpsc_init(&s->in);
    s->in_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (s->in_efd < 0)
        goto fail;
    for (int w = 0; w < nworkers; w++) {
        base_mpsc_init(&s->out[w].q);
        s->out[w].efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (s->out[w].efd < 0)
            goto fail;
    }
    if (passwd_key_init(s, cfg) != 0)
        goto fail;
    /* ZooKeeper's SessionTrackerImpl.initializeNextSessionId: time in the
     * middle bits, server id (0 standalone) in the top byte. */
    s->next_session_id = ((uint64_t)sq_clock(s, true) << 24) >> 8;
    if (cfg->ensemble) {
        s->next_session_id |= (uint64_t)cfg->ensemble->raft.self_id << 56;
        if (sq_ens_new(s, cfg->ensemble) != 0)
            goto fail;
        s->cfg.ensemble = NULL; /* copied into s->ens; the caller's may go */
    }
    s->next_zxid_counter = tree_last_zxid(t) + 1;
    atomic_store(&s->applying_zxid, tree_last_zxid(t));
    /* Scans start due: the first tick runs both (harmless on an empty tree). */
    s->last_expiry_scan_ms = INT64_MIN / 2;
    s->last_reap_ms = INT64_MIN / 2;
    return s;
fail:
    seq_free(s);
    return NULL;
}

int seq_start(struct seq *s)
{
    int rc = pthread_create(&s->thread, NULL, seq_thread, s);
    if (rc != 0)
        return -rc;
    s->running = true;
    return 0;
}

void seq_stop(struct seq *s)
{
    if (!s->running)
        return;
    atomic_store(&s->stop, true);
    kick(s->in_efd); /* unconditionally: it may be between its checks */
    pthread_join(s->thread, NULL);
    s->running = false;
}

static void drain_free_in(struct seq *s)
{
    struct base_mpsc_node *node;
    while ((node = base_mpsc_take(&s->in)) != NULL)
        seq_req_free(caa_container_of(node, struct seq_req, node));
}

void seq_free(struct seq *s)
{
    if (!s)
        return;
    seq_stop(s);
    sq_ens_free(s);
    seq_round_free(s, s->held);
    s->held = NULL;
    drain_free_in(s);
    for (int w = 0; w < s->nworkers; w++) {
        struct base_mpsc_node *node;
        while ((node = base_mpsc_take(&s->out[w].q)) != NULL)
            seq_out_free(caa_container_of(node, struct seq_out, node));
        if (s->out[w].efd >= 0)
            close(s->out[w].efd);
    }
    if (s->in_efd >= 0)
        close(s->in_efd);
    sq_evbuf_drop(s->evb);
    free(s->evb->items);
    free(s->evb->paths);
    free(s->evb);
    OPENSSL_cleanse(s->passwd_key, sizeof s->passwd_key);
    sq_digest_log_destroy(&s->digest_log);
    free(s);
}

/* ---- worker-facing API ------------------------------------------------- */

void seq_submit(struct seq *s, struct seq_req *r)
{
    atomic_fetch_add_explicit(&s->st_outstanding, 1, memory_order_relaxed);
    base_mpsc_push(&s->in, &r->node);
}

void seq_kick(struct seq *s)
{
    sq_wake_if_sleeping(&s->sleeping, s->in_efd);
}

bool seq_worker_idle_begin(struct seq *s, int w, bool wants_events)
{
    /* before the announcement: whoever sees it asleep sees this too */
    atomic_store_explicit(&s->out[w].wants_events, wants_events, memory_order_relaxed);
    atomic_store(&s->out[w].sleeping, true); /* seq_cst */
    if (base_mpsc_empty(&s->out[w].q))
        return true;
    atomic_store(&s->out[w].sleeping, false);
    return false;
}

void seq_worker_idle_end(struct seq *s, int w)
{
    atomic_store_explicit(&s->out[w].sleeping, false, memory_order_relaxed);
}

void seq_worker_ack(struct seq *s, int w)
{
    uint64_t v;
    ssize_t r = read(s->out[w].efd, &v, sizeof(v));
    (void)r; /* EAGAIN: another pass already consumed the signal */
}

int seq_worker_fd(const struct seq *s, int w)
{
    return s->out[w].efd;
}

size_t seq_worker_drain(struct seq *s, int w, seq_out_fn fn, void *arg)
{
    size_t n = 0;
    struct base_mpsc_node *node;
    while ((node = base_mpsc_take(&s->out[w].q)) != NULL) {
        fn(arg, caa_container_of(node, struct seq_out, node));
        n++;
    }
    return n;
}

int64_t seq_applying_zxid(const struct seq *s)
{
    return atomic_load((_Atomic int64_t *)&s->applying_zxid);
}

bool seq_serving(const struct seq *s)
{
    return atomic_load_explicit((atomic_bool *)&s->serving, memory_order_acquire);
}

size_t seq_digest_log(struct seq *s, struct seq_digest *out, size_t max)
{
    return sq_digest_log_copy(&s->digest_log, out, max);
}

void seq_get_stats(const struct seq *s, struct seq_stats *out)
{
    struct seq *m = (struct seq *)s;
    out->writes = atomic_load_explicit(&m->st_writes, memory_order_relaxed);
    out->rounds = atomic_load_explicit(&m->st_rounds, memory_order_relaxed);
    out->sessions_expired = atomic_load_explicit(&m->st_expired, memory_order_relaxed);
    out->max_round = atomic_load_explicit(&m->st_max_round, memory_order_relaxed);
    out->outstanding = atomic_load_explicit(&m->st_outstanding, memory_order_relaxed);
    out->log_error = atomic_load_explicit(&m->log_error, memory_order_relaxed);
    out->log_syncs = atomic_load_explicit(&m->log_syncs, memory_order_relaxed);
}
