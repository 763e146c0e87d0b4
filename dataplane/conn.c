/*
 * conn.c — what a client connection does with the bytes it receives, over
 * any byte-stream transport: framing, the handshake, four-letter words,
 * per-session FIFO (invariant 2), dispatch to reads.c or the sequencer,
 * addauth, the sequencer's outputs, and the memory budget (invariant 6).
 * Nothing here touches a socket: tcp.c reads, writes and closes.
 *
 * The memory budget. A connection holds bytes in four places, each bounded:
 *   unparsed input + queued requests   <= conn_max_buffer_bytes: reading
 *       pauses there and resumes once half of it is free (so one frame of
 *       jute.maxbuffer always fits: config requires the limit >= 2 frames);
 *   requests at the sequencer          one frame, or a session's writes in a
 *                                      row (at most DP_PIPELINE_MAX) holding
 *                                      <= conn_max_buffer_bytes;
 *   unsent output                      above conn_out_high_water_bytes the
 *       connection is neither read nor runs queued requests (a small request
 *       can ask for a 1 MiB reply); only watch notifications can push it
 *       further, and past conn_max_unsent_bytes the client is not reading
 *       at all: it is closed as a slow consumer.
 * Server-wide, the sum over all connections is held to max_buffered_bytes:
 * above it (memory pressure) connections holding more than DP_HEAVY_BYTES
 * are neither read nor run their queued requests, and a notification for a
 * connection already over its high-water mark closes it, until the total is
 * back under 7/8 of the limit. The total may pass the limit by what the
 * requests running when it was crossed produce: one reply per connection.
 * globalOutstandingLimit bounds requests read but not answered, server-wide,
 * as in ZooKeeper: above it connections with requests waiting are not read.
 * Reading resumes by itself: every change that may lift a pause marks the
 * connection dirty, and the transport asks conn_wants_input again.
 */
#include "dataplane/dp_int.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <urcu.h>

#define IN_CAP_MIN_BYTES 256u /* first input allocation */

static const char *const fourlw_words[] = {
    "ruok", "srvr", "stat", "mntr", "conf", "cons", "crst", "srst", "envi",
    "wchs", "wchc", "wchp", "dump", "isro", "dirs", "gtmk", "stmk", "hash", NULL,
};
/* stmk's request is the word and its argument, an 8-byte big-endian long. */
#define FOURLW_STMK_BYTES 12u

/* ---- the budget ------------------------------------------------------------ */

size_t conn_unsent(const struct conn *c)
{
    return c->out.len - c->out_off;
}

/* Bytes of memory c holds on its own behalf: allocations, not just content,
 * since an output buffer keeps its size until it is freed after a flush. */
static size_t conn_mem(const struct conn *c)
{
    return c->in_cap + c->q_bytes + c->seq_bytes + c->out.cap + c->deferred.cap;
}

void conn_account(struct conn *c)
{
    struct worker *w = c->w;
    size_t mem = conn_mem(c);
    uint32_t reqs = c->queued + c->pending;
    w->mem_bytes = w->mem_bytes - c->mem_accounted + mem;
    c->mem_accounted = mem;
    w->outstanding = w->outstanding - c->outstanding_accounted + reqs;
    c->outstanding_accounted = reqs;
}

/* Server-wide totals: this worker's live numbers plus what the others
 * published at their last pass (at most one pass old). */
static size_t global_mem(const struct worker *w)
{
    const struct dp *dp = w->dp;
    size_t total = 0;
    for (int i = 0; i < dp->nworkers; i++)
        total += i == w->id ? w->mem_bytes
                            : atomic_load_explicit(&dp->workers[i].st_mem_bytes, memory_order_relaxed);
    return total;
}

static uint64_t global_outstanding(const struct worker *w)
{
    const struct dp *dp = w->dp;
    uint64_t total = 0;
    for (int i = 0; i < dp->nworkers; i++)
        total += i == w->id ? w->outstanding
                            : atomic_load_explicit(&dp->workers[i].st_outstanding, memory_order_relaxed);
    return total;
}

/* Memory pressure with hysteresis: on above the limit, off below 7/8 of it.
 * The transitions are logged at most once a second per worker. */
static bool budget_pressure(struct worker *w)
{
    struct dp *dp = w->dp;
    size_t limit = (size_t)dp->cfg.max_buffered_bytes;
    size_t total = global_mem(w);
    bool on = atomic_load_explicit(&dp->pressure, memory_order_relaxed);
    bool now = on ? total >= limit - limit / 8 : total > limit;
    if (now == on)
        return on;
    atomic_store_explicit(&dp->pressure, now, memory_order_relaxed);
    if (w->now_ms >= w->next_pressure_log_ms) {
        w->next_pressure_log_ms = w->now_ms + 1000;
        base_log(now ? BASE_LOG_WARN : BASE_LOG_INFO,
                 "larchd: memory pressure %s: connections hold %zu bytes "
                 "(larch.maxBufferedBytes=%zu)%s",
                 now ? "on" : "off", total, limit, now ? ": heavy connections are not read" : "");
    }
    return now;
}

static void set_throttled(struct conn *c, bool throttled)
{
    if (c->throttled == throttled)
        return;
    c->throttled = throttled;
    struct worker *w = c->w;
    atomic_store_explicit(&w->st_throttled,
                          atomic_load_explicit(&w->st_throttled, memory_order_relaxed) + (throttled ? 1 : -1),
                          memory_order_relaxed);
    if (throttled)
        COUNTER_ADD(w->st_throttle_events, 1);
}

/* Input bound with hysteresis (see the top of the file). */
static bool input_full(struct conn *c)
{
    size_t held = c->in_len + c->q_bytes;
    size_t limit = (size_t)c->w->dp->cfg.conn_max_buffer_bytes;
    if (c->input_full && held <= limit / 2)
        c->input_full = false;
    else if (!c->input_full && held >= limit)
        c->input_full = true;
    return c->input_full;
}

static bool over_high_water(const struct conn *c)
{
    return conn_unsent(c) >= (size_t)c->w->dp->cfg.conn_out_high_water_bytes;
}

bool conn_wants_input(struct conn *c)
{
    if (c->closing || c->dead) {
        set_throttled(c, false);
        return false;
    }
    struct worker *w = c->w;
    bool own = input_full(c) || over_high_water(c);
    bool global = !own && ((c->queued + c->pending > 0 &&
                            global_outstanding(w) >= (uint64_t)w->dp->cfg.max_outstanding) ||
                           (conn_mem(c) > DP_HEAVY_BYTES && budget_pressure(w)));
    /* A connection's own pause ends by its own progress (a reply, a flush),
     * which marks it dirty; a global one is re-examined by the budget pass. */
    if (global)
        w->global_paused = true;
    set_throttled(c, own || global);
    return !(own || global);
}

/* Runs requests only while the client keeps up with their replies, and,
 * under memory pressure, only while the connection is light: a request's
 * reply size is unknown before it runs, so each connection may overshoot
 * by one reply, never more. */
static bool can_run(const struct conn *c)
{
    return !c->closing && !over_high_water(c) &&
           !(conn_mem(c) > DP_HEAVY_BYTES && budget_pressure(c->w));
}

void worker_budget_pass(struct worker *w)
{
    atomic_store_explicit(&w->st_mem_bytes, w->mem_bytes, memory_order_relaxed);
    atomic_store_explicit(&w->st_outstanding, w->outstanding, memory_order_relaxed);
    if (!w->global_paused || budget_pressure(w) ||
        global_outstanding(w) >= (uint64_t)w->dp->cfg.max_outstanding)
        return;
    /* Every global pause has lifted: the connections paused for one are
     * asked again (and pause again if their own bounds say so). */
    w->global_paused = false;
    for (uint32_t i = 0; i < w->nslots; i++)
        if (w->slots[i] && w->slots[i]->throttled)
            conn_mark_dirty(w->slots[i]);
}

/* ---- output -------------------------------------------------------------- */

static void slow_consumer(struct conn *c, const char *why)
{
    base_log(BASE_LOG_WARN, "larchd: closing %s (session 0x%llx): %s, %zu bytes unsent", c->peer,
             (unsigned long long)c->session_id, why, conn_unsent(c));
    COUNTER_ADD(c->w->st_slow_closes, 1);
    conn_close(c, true);
}

/* Bookkeeping after a frame was added to c->out (by out_append, or encoded
 * there directly by a read): limits, counters, the flush list. */
void conn_frame_added(struct conn *c)
{
    if (c->out.err) {
        base_log(BASE_LOG_ERROR, "larchd: closing %s: out of memory for its output", c->peer);
        conn_close(c, true);
        return;
    }
    if (conn_unsent(c) > (size_t)c->w->dp->cfg.conn_max_unsent_bytes) {
        slow_consumer(c, "the client does not read its replies");
        return;
    }
    COUNTER_ADD(c->tx, 1);
    COUNTER_ADD(c->w->st_tx, 1);
    conn_mark_dirty(c);
}

static void out_append(struct conn *c, const void *p, size_t len)
{
    if (c->closing && c->hard_close)
        return;
    zk_put_raw(&c->out, p, len);
    conn_frame_added(c);
}

void conn_queue_reply(struct conn *c, const struct zk_wbuf *frame)
{
    if (frame->err) {
        conn_close(c, true);
        return;
    }
    out_append(c, frame->p, frame->len);
}

/* A watch notification: xid -1, zxid -1, then WatcherEvent(type, SyncConnected, path). */
static void put_event(struct zk_wbuf *w, int32_t type, struct zk_str path)
{
    size_t mark = zk_frame_begin(w);
    struct zk_reply_header h = { .xid = ZK_XID_NOTIFICATION, .zxid = -1, .err = ZK_OK };
    zk_put_reply_header(w, &h);
    struct zk_watcher_event ev = { .type = type, .state = ZK_STATE_SYNC_CONNECTED, .path = path };
    zk_put_watcher_event(w, &ev);
    zk_frame_end(w, mark);
}

/* ZooKeeper's ServerCnxn.process(event, acl): no READ, no event. */
static bool may_hear(const struct conn *c, const struct tree_acl *acl)
{
    if (acl == NULL)
        return true;
    struct tree_auth a = conn_auth(c);
    return tree_acl_permits(acl, ZK_PERM_READ, &a);
}

static void send_event_now(struct conn *c, int32_t type, struct zk_str path)
{
    /* Notifications are the one output a connection's own pause cannot
     * hold back; under memory pressure a client that is not keeping up
     * loses its connection (it re-arms its watches with setWatches). */
    if (over_high_water(c) && budget_pressure(c->w)) {
        slow_consumer(c, "notifications pile up under memory pressure");
        return;
    }
    struct zk_wbuf *w = &c->w->aux;
    size_t keep = w->len;
    put_event(w, type, path);
    if (!w->err)
        out_append(c, w->p + keep, w->len - keep);
    w->len = keep;
}

void conn_send_event(struct conn *c, int32_t type, struct zk_str path, const struct tree_acl *acl)
{
    if (!c->closing && may_hear(c, acl))
        send_event_now(c, type, path);
}

void worker_fire(void *arg, uint64_t token, int32_t type, const char *path)
{
    struct worker *w = arg;
    struct conn *c = worker_conn(w, token);
    if (c == NULL || c->closing || !may_hear(c, w->firing_acl))
        return;
    if (w->firing_zxid > c->fence_zxid)
        put_event(&c->deferred, type, zk_str_c(path)); /* after the fenced reply */
    else
        send_event_now(c, type, zk_str_c(path));
}

void conn_fence_release(struct conn *c)
{
    c->fence_zxid = INT64_MAX;
    if (c->deferred.len == 0)
        return;
    if (c->deferred.err)
        conn_close(c, true); /* a notification was lost to OOM: the client must resync */
    else
        out_append(c, c->deferred.p, c->deferred.len);
    zk_wbuf_reset(&c->deferred);
    c->deferred.err = false;
}

void reply_header_only(struct conn *c, int32_t xid, int32_t err)
{
    struct zk_wbuf *w = &c->w->aux;
    zk_wbuf_reset(w);
    size_t mark = zk_frame_begin(w);
    struct zk_reply_header h = { .xid = xid, .zxid = tree_last_zxid(c->w->dp->tree), .err = err };
    zk_put_reply_header(w, &h);
    zk_frame_end(w, mark);
    conn_queue_reply(c, w);
    zk_wbuf_reset(w);
}

/* ---- requests ----------------------------------------------------------------- */

struct tree_auth conn_auth(const struct conn *c)
{
    return (struct tree_auth){ .ids = c->auth, .count = c->nauth, .peer_ip = c->peer_ip,
                               .super = c->super, .sasl_provider = c->w->dp->cfg.sasl_provider };
}

/* Latency bookkeeping for stat/cons/mntr, which report milliseconds: the
 * pass's clock is precise enough and saves two clock reads per request. */
void conn_note_latency(struct conn *c, int64_t arrived_us)
{
    int64_t us = c->w->now_us - arrived_us;
    if (us < 0)
        us = 0;
    struct worker *w = c->w;
    atomic_store_explicit(&c->lat_last_us, us, memory_order_relaxed);
    if (us < atomic_load_explicit(&c->lat_min_us, memory_order_relaxed))
        atomic_store_explicit(&c->lat_min_us, us, memory_order_relaxed);
    if (us > atomic_load_explicit(&c->lat_max_us, memory_order_relaxed))
        atomic_store_explicit(&c->lat_max_us, us, memory_order_relaxed);
    COUNTER_ADD(c->lat_sum_us, us);
    COUNTER_ADD(c->lat_count, 1);
    if ((uint64_t)us < atomic_load_explicit(&w->st_lat_min, memory_order_relaxed))
        atomic_store_explicit(&w->st_lat_min, (uint64_t)us, memory_order_relaxed);
    if ((uint64_t)us > atomic_load_explicit(&w->st_lat_max, memory_order_relaxed))
        atomic_store_explicit(&w->st_lat_max, (uint64_t)us, memory_order_relaxed);
    COUNTER_ADD(w->st_lat_sum, (uint64_t)us);
    COUNTER_ADD(w->st_lat_count, 1);
}

/* Keeps the session alive: the sequencer expires sessions whose last_seen
 * is older than their timeout. At most one store per millisecond. */
static void touch_session(struct conn *c)
{
    if (c->session_id == 0 || c->last_touch_ms == c->w->now_ms)
        return;
    c->last_touch_ms = c->w->now_ms;
    rcu_read_lock();
    struct tree_session *s = tree_session_find(c->w->dp->tree, c->session_id);
    if (s)
        atomic_store_explicit(&s->last_seen_ms, c->w->now_ms, memory_order_relaxed);
    rcu_read_unlock();
}

/* ZooKeeper answers a failed auth with AUTHFAILED (xid -4) and closes. */
static void auth_failed(struct conn *c)
{
    reply_header_only(c, ZK_XID_AUTH, ZK_EAUTHFAILED);
    conn_close(c, false);
}

/* Adds (scheme, id) to c's identities unless c holds it already, as
 * ZooKeeper's ServerCnxn.addAuthInfo does. Takes id (malloc'd): kept, or
 * freed. False when c has DP_AUTH_MAX identities already, or no memory. */
static bool add_identity(struct conn *c, const char *scheme, char *id)
{
    for (int32_t i = 0; i < c->nauth; i++) {
        if (strcmp(c->auth[i].scheme, scheme) == 0 && strcmp(c->auth[i].id, id) == 0) {
            free(id);
            return true;
        }
    }
    char *s = c->nauth < DP_AUTH_MAX ? strdup(scheme) : NULL;
    if (!s) {
        free(id);
        return false;
    }
    c->auth[c->nauth].scheme = s;
    c->auth[c->nauth].id = id;
    c->nauth++;
    return true;
}

/* add_identity with a copy of id. */
static bool add_identity_copy(struct conn *c, const char *scheme, const char *id)
{
    char *copy = strdup(id);
    return copy != NULL && add_identity(c, scheme, copy);
}

/* Adds the identity "digest:user:base64(sha1(credential))" to c, once, as
 * DigestAuthenticationProvider does: the user is the credential up to its
 * first ':' (all of it when there is none: "" and "bob" are credentials
 * too); the super digest marks the connection as the super user. */
static bool add_digest_identity(struct conn *c, const char *cred, size_t len)
{
    const char *colon = memchr(cred, ':', len);
    size_t user = colon ? (size_t)(colon - cred) : len;
    char hash[29];
    zk_digest_of(cred, len, hash);
    char *id = NULL;
    if (asprintf(&id, "%.*s:%s", (int)user, cred, hash) < 0)
        return false;
    bool super = c->w->dp->super_digest[0] && strcmp(id, c->w->dp->super_digest) == 0;
    if (!add_identity(c, "digest", id))
        return false;
    c->super = c->super || super;
    return true;
}

/* The TLS handshake of c completed. As ZooKeeper's CertificateVerifier with
 * its X509AuthenticationProvider (registered wherever there is a secure
 * port: QuorumPeerConfig.configureSSLAuth): a client that presented a
 * certificate (OpenSSL verified its chain against the trust store) holds
 * ("x509", its subject as X500Principal.getName() writes it), preceded by
 * ("super", subject) when that is X509AuthenticationProvider.superUser. A
 * client without one (clientAuth want or none) holds nothing more. */
bool conn_tls_established(struct conn *c)
{
    char dn[TLS_DN_MAX];
    int rc = tls_conn_peer_dn(c->tls, dn, sizeof dn);
    if (rc == 0)
        return true;
    const char *super_user = c->w->dp->x509_super_user;
    bool super = rc > 0 && super_user[0] != '\0' && strcmp(dn, super_user) == 0;
    if (rc < 0 || (super && !add_identity_copy(c, "super", dn)) ||
        !add_identity_copy(c, "x509", dn)) {
        base_log(BASE_LOG_WARN, "larchd: closing %s: x509 authentication failed: %s", c->peer,
                 rc < 0 ? "its certificate's subject cannot be written" : "out of memory");
        conn_close(c, true);
        return false;
    }
    c->super = c->super || super;
    return true;
}

/* The identities the UDP path reads with for this connection's session
 * (dataplane/UDP.md). A failure to publish (no memory, the session just
 * closed) leaves the older, smaller list or none: UDP reads then see less,
 * never more, than this connection may. */
static void publish_session_auth(struct conn *c)
{
    if (c->session_id != 0)
        (void)tree_session_publish_auth(c->w->dp->tree, c->session_id, c->auth, c->nauth,
                                        c->super, c->w->id, c->token);
}

static void withdraw_session_auth(struct conn *c)
{
    if (c->session_id != 0)
        tree_session_withdraw_auth(c->w->dp->tree, c->session_id, c->w->id, c->token);
}

static bool str_is(struct zk_str s, const char *lit)
{
    size_t n = strlen(lit);
    return s.len >= 0 && (size_t)s.len == n && memcmp(s.ptr, lit, n) == 0;
}

/* AuthPacket, as a stock server without SASL or x509 answers it: "digest"
 * adds user:hash; "ip" succeeds whatever the data (IPAuthenticationProvider
 * adds the peer address, which every connection already carries for ip
 * ACLs); any other scheme fails. */
static void handle_auth(struct conn *c, const uint8_t *body, size_t len)
{
    struct base_rd r;
    struct zk_auth_packet a;
    base_rd_init(&r, body, len);
    bool ok = zk_get_auth_packet(&r, &a);
    if (ok && str_is(a.scheme, "ip")) {
        reply_header_only(c, ZK_XID_AUTH, ZK_OK);
        return;
    }
    /* A credential with a NUL could not be a C-string identity: refused. */
    ok = ok && str_is(a.scheme, "digest") && a.auth.len >= 0 &&
         (a.auth.len == 0 || !memchr(a.auth.ptr, '\0', (size_t)a.auth.len)) &&
         add_digest_identity(c, a.auth.ptr, (size_t)a.auth.len);
    if (!ok) {
        auth_failed(c);
        return;
    }
    publish_session_auth(c);
    reply_header_only(c, ZK_XID_AUTH, ZK_OK);
}

/* ---- SASL (ZooKeeperServer.processSasl) ------------------------------------ */

/* A SASL reply: the request's xid, zxid 0 and err as ZooKeeper sends them,
 * then a SetSASLResponse with the token (len -1: null). */
static void reply_sasl(struct conn *c, int32_t xid, int32_t err, const void *token, int32_t len)
{
    struct zk_wbuf *w = &c->w->aux;
    zk_wbuf_reset(w);
    size_t mark = zk_frame_begin(w);
    struct zk_reply_header h = { .xid = xid, .zxid = 0, .err = err };
    zk_put_reply_header(w, &h);
    zk_put_sasl_response(w, &(struct zk_sasl_response){ { token, len } });
    zk_frame_end(w, mark);
    conn_queue_reply(c, w);
    zk_wbuf_reset(w);
}

static void sasl_end(struct conn *c)
{
    saslsrv_conn_free(c->sasl);
    c->sasl = NULL;
    c->sasl_done = true;
}

/* A failed exchange: AUTHFAILED, or SESSIONCLOSEDREQUIRESASLAUTH where the
 * server requires SASL, with a null token; then the connection closes and
 * the session is left to expire (sendCloseSession closes the socket). */
static void sasl_failed(struct conn *c, int32_t xid, const char *why)
{
    bool required = (c->w->dp->cfg.enforce_auth & DP_AUTH_SASL) != 0;
    base_log(BASE_LOG_WARN, "larchd: closing %s (session 0x%llx): SASL login failed: %s", c->peer,
             (unsigned long long)c->session_id, why);
    sasl_end(c);
    reply_sasl(c, xid, required ? ZK_ESESSIONCLOSEDREQUIRESASL : ZK_EAUTHFAILED, NULL, -1);
    conn_close(c, false);
}

/* The identity of a login, ("sasl", user), and ZooKeeper's super user rule
 * for SASL: a user named by zookeeper.superUser[.X] passes every ACL. */
static bool add_sasl_identity(struct conn *c, const char *user)
{
    const struct dp_cfg *cfg = &c->w->dp->cfg;
    char *id = strdup(user);
    if (!id || !add_identity(c, "sasl", id))
        return false;
    for (int32_t i = 0; i < cfg->n_sasl_super_users; i++)
        c->super = c->super || strcmp(cfg->sasl_super_users[i], user) == 0;
    return true;
}

/* One GetSASLRequest: the next step of the connection's exchange, begun
 * on its first token. A record that does not decode, or a null token
 * (ZooKeeper dereferences it), closes the connection; a login answers its
 * last token (rspauth) with OK, and the identity is there for every
 * request after it, the UDP path's included. */
static void handle_sasl(struct conn *c, int32_t xid, const uint8_t *body, size_t len)
{
    struct base_rd r;
    struct zk_sasl_request q;
    base_rd_init(&r, body, len);
    if (!zk_get_sasl_request(&r, &q) || q.token.len < 0) {
        conn_close(c, true);
        return;
    }
    if (c->sasl_done) {
        sasl_failed(c, xid, "a SASL request after the login ended");
        return;
    }
    if (!c->sasl && !(c->sasl = saslsrv_conn_new())) {
        sasl_failed(c, xid, "no memory for a SASL exchange");
        return;
    }
    const void *out = NULL;
    size_t out_len = 0;
    enum saslsrv_result res = saslsrv_step(c->sasl, q.token.ptr, (size_t)q.token.len, &out,
                                           &out_len);
    if (res == SASLSRV_FAILED) {
        char why[192];
        snprintf(why, sizeof why, "%s", saslsrv_error(c->sasl));
        sasl_failed(c, xid, why);
        return;
    }
    if (res == SASLSRV_DONE && !add_sasl_identity(c, saslsrv_user(c->sasl))) {
        sasl_failed(c, xid, "no room for another identity");
        return;
    }
    reply_sasl(c, xid, ZK_OK, out, (int32_t)out_len); /* out lives in c->sasl until here */
    if (res == SASLSRV_DONE) {
        publish_session_auth(c);
        sasl_end(c);
    }
}

static void forward_to_sequencer(struct conn *c, int32_t xid, int32_t op, const uint8_t *body,
                                 size_t len, int64_t arrived_us)
{
    struct seq_req *r = seq_req_new(SEQ_REQ_WRITE, body, len, c->auth, c->nauth);
    if (!r) {
        reply_header_only(c, xid, ZK_ESYSTEMERROR);
        return;
    }
    r->worker = c->w->id;
    r->conn = c->token;
    r->session_id = c->session_id;
    r->xid = xid;
    r->op = op;
    r->super = c->super;
    snprintf(r->peer_ip, sizeof(r->peer_ip), "%s", c->peer_ip);
    BASE_ASSERT(c->pending < DP_PIPELINE_MAX && !c->pending_barrier);
    c->pending_barrier = !zk_op_is_write(op);
    c->pending_arrived_us[(c->pending_head + c->pending) % DP_PIPELINE_MAX] = arrived_us;
    c->pending++;
    c->seq_bytes += sizeof(*r) + len;
    COUNTER_ADD(c->w->st_writes, 1);
    seq_submit(c->w->dp->seq, r);
    c->w->submitted = true;
}

bool dp_auth_enforced_ok(const struct dp *dp, const struct tree_authid *ids, int32_t count)
{
    uint32_t want = dp->cfg.enforce_auth;
    if (want == 0 || (want & DP_AUTH_IP))
        return true;
    for (int32_t i = 0; i < count; i++) {
        const char *scheme = ids[i].scheme ? ids[i].scheme : "";
        if (((want & DP_AUTH_DIGEST) && strcmp(scheme, "digest") == 0) ||
            ((want & DP_AUTH_SASL) && strcmp(scheme, "sasl") == 0) ||
            ((want & DP_AUTH_X509) && strcmp(scheme, "x509") == 0))
            return true;
    }
    return false;
}

static bool op_goes_to_sequencer(int32_t op)
{
    return zk_op_is_write(op) || op == ZK_OP_SYNC || op == ZK_OP_GETEPHEMERALS;
}

static bool op_is_known(int32_t op)
{
    return op_goes_to_sequencer(op) || op == ZK_OP_PING || op == ZK_OP_AUTH || op == ZK_OP_SETWATCHES ||
           op == ZK_OP_SETWATCHES2 || op == ZK_OP_EXISTS || op == ZK_OP_GETDATA || op == ZK_OP_GETCHILDREN ||
           op == ZK_OP_GETCHILDREN2 || op == ZK_OP_GETACL || op == ZK_OP_GETALLCHILDRENNUMBER ||
           op == ZK_OP_MULTIREAD || op == ZK_OP_WHOAMI || op == ZK_OP_ADDWATCH || op == ZK_OP_CHECKWATCHES ||
           op == ZK_OP_REMOVEWATCHES;
}

/* Runs one request of an active connection. The caller guarantees that
 * nothing of this connection is pending at the sequencer, or that this
 * request goes there behind what is (may_pipeline). */
static void dispatch(struct conn *c, const uint8_t *frame, size_t len, int64_t arrived_us)
{
    struct base_rd r;
    struct zk_request_header h;
    base_rd_init(&r, frame, len);
    if (!zk_get_request_header(&r, &h)) {
        conn_close(c, true);
        return;
    }
    const uint8_t *body = frame + r.pos;
    size_t blen = len - r.pos;
    atomic_store_explicit(&c->last_op, h.type, memory_order_relaxed);
    if (h.type != ZK_OP_AUTH && h.type != ZK_OP_SASL &&
        !dp_auth_enforced_ok(c->w->dp, c->auth, c->nauth)) {
        /* ZooKeeper's AuthenticationHelper: the error, then the connection
         * closes (the session is left to expire, as there) */
        reply_header_only(c, h.xid, ZK_ESESSIONCLOSEDREQUIRESASL);
        conn_close(c, false);
        return;
    }
    if (c->read_only && h.type == ZK_OP_CLOSESESSION) {
        /* the session is this server's alone while it has no quorum: no txn */
        reply_header_only(c, h.xid, ZK_OK);
        conn_close(c, false);
        return;
    }
    if (c->read_only && op_goes_to_sequencer(h.type) && h.type != ZK_OP_GETEPHEMERALS) {
        /* ZooKeeper's ReadOnlyRequestProcessor: writes and sync */
        reply_header_only(c, h.xid, ZK_ENOTREADONLY);
        return;
    }
    if (op_goes_to_sequencer(h.type)) {
        forward_to_sequencer(c, h.xid, h.type, body, blen, arrived_us);
        return;
    }
    if (h.type == ZK_OP_AUTH) {
        handle_auth(c, body, blen);
        return;
    }
    if (h.type == ZK_OP_SASL && c->w->dp->cfg.sasl) {
        handle_sasl(c, h.xid, body, blen);
        return;
    }
    if (h.type == ZK_OP_SASL || !op_is_known(h.type)) {
        /* ZooKeeper's UnimplementedRequestProcessor: error reply, then close. */
        reply_header_only(c, h.xid, ZK_EUNIMPLEMENTED);
        conn_close(c, false);
        return;
    }
    COUNTER_ADD(c->w->st_reads, 1);
    if (!dp_serve_read(c, h.xid, h.type, body, blen, arrived_us))
        conn_close(c, true);
}

/* Whether the request in frame may follow the connection's requests at
 * the sequencer at once: the sequencer answers a session's writes in the
 * order they came, and a sync or getEphemerals after them, so these need
 * not wait. A read must (it has to see that write), and so must everything
 * a worker answers itself, a read-only session's writes (answered here
 * too), and anything after a pending sync or getEphemerals. */
static bool may_pipeline(const struct conn *c, const uint8_t *frame, size_t len)
{
    if (c->pending == 0)
        return true;
    if (c->pending >= DP_PIPELINE_MAX || c->pending_barrier || c->read_only || len < 8 ||
        c->seq_bytes + len > (size_t)c->w->dp->cfg.conn_max_buffer_bytes)
        return false;
    return op_goes_to_sequencer((int32_t)base_get_be32(frame + 4)); /* after the xid */
}

static bool enqueue_frame(struct conn *c, const uint8_t *frame, size_t len, int64_t arrived_us)
{
    struct qframe *f = malloc(sizeof(*f) + len);
    if (!f)
        return false;
    f->next = NULL;
    f->len = len;
    f->arrived_us = arrived_us;
    memcpy(f->bytes, frame, len);
    if (c->q_tail)
        c->q_tail->next = f;
    else
        c->q_head = f;
    c->q_tail = f;
    c->queued++;
    c->q_bytes += sizeof(*f) + len;
    return true;
}

static struct qframe *dequeue_frame(struct conn *c)
{
    struct qframe *f = c->q_head;
    c->q_head = f->next;
    if (!c->q_head)
        c->q_tail = NULL;
    c->queued--;
    c->q_bytes -= sizeof(*f) + f->len;
    return f;
}

static void qframes_free(struct conn *c)
{
    while (c->q_head)
        free(dequeue_frame(c));
}

/* Runs queued frames in order until one must wait for the sequencer's
 * answers (invariant 2) or the client falls behind on its replies. */
static void run_queued(struct conn *c)
{
    while (c->q_head && may_pipeline(c, c->q_head->bytes, c->q_head->len) && can_run(c)) {
        struct qframe *f = dequeue_frame(c);
        dispatch(c, f->bytes, f->len, f->arrived_us);
        free(f);
    }
}

static void handle_request_frame(struct conn *c, const uint8_t *frame, size_t len)
{
    int64_t now = c->w->now_us;
    COUNTER_ADD(c->rx, 1);
    COUNTER_ADD(c->w->st_rx, 1);
    touch_session(c);
    if (c->q_head || !may_pipeline(c, frame, len)) {
        if (!enqueue_frame(c, frame, len, now))
            conn_close(c, true);
        return;
    }
    dispatch(c, frame, len, now);
}

/* ---- handshake and four-letter words -------------------------------------- */

/* ZooKeeper accepts a password of any length in a ConnectRequest; one that
 * is not 16 bytes can only be wrong. The sequencer sees the length sent. */
static void handle_connect(struct conn *c, const uint8_t *frame, size_t len)
{
    struct base_rd r;
    struct zk_connect_req req;
    base_rd_init(&r, frame, len);
    if (!zk_get_connect_req(&r, &req)) {
        conn_close(c, true);
        return;
    }
    struct seq_req *q = seq_req_new(SEQ_REQ_CONNECT, NULL, 0, NULL, 0);
    if (!q) {
        conn_close(c, true);
        return;
    }
    q->worker = c->w->id;
    q->conn = c->token;
    q->session_id = req.session_id;
    q->timeout_ms = req.timeout_ms;
    q->last_zxid_seen = req.last_zxid_seen;
    q->passwd_len = req.passwd.len > 0 ? req.passwd.len : 0;
    size_t copy = q->passwd_len < (int32_t)sizeof(q->passwd) ? (size_t)q->passwd_len : sizeof(q->passwd);
    if (copy)
        memcpy(q->passwd, req.passwd.ptr, copy);
    c->client_sent_ro = req.has_read_only;
    q->read_only_ok = req.has_read_only && req.read_only;
    c->state = CONN_HANDSHAKE;
    COUNTER_ADD(c->rx, 1);
    seq_submit(c->w->dp->seq, q);
    c->w->submitted = true;
}

static bool is_fourlw(const uint8_t *p)
{
    for (int i = 0; fourlw_words[i]; i++)
        if (memcmp(p, fourlw_words[i], 4) == 0)
            return true;
    return false;
}

static bool fourlw_allowed(const struct dp *dp, const char *word)
{
    return !dp->cfg.fourlw_allowed || dp->cfg.fourlw_allowed(dp->cfg.fourlw_arg, word);
}

/* The bytes of the four-letter-word request that begins at p (4 of them
 * there), or 0 when p does not begin one. An allowed stmk carries its
 * argument too; ZooKeeper answers one that is not allowed after the word. */
static size_t fourlw_request_len(const struct conn *c, const uint8_t *p)
{
    if (!is_fourlw(p))
        return 0;
    if (memcmp(p, "stmk", 4) == 0 && fourlw_allowed(c->w->dp, "stmk"))
        return FOURLW_STMK_BYTES;
    return 4;
}

/* Answers the four-letter-word request at p (len bytes, fourlw_request_len)
 * and closes the connection once the answer is out. */
static void handle_fourlw(struct conn *c, const uint8_t *p, size_t len)
{
    struct dp *dp = c->w->dp;
    char word[5];
    memcpy(word, p, 4);
    word[4] = '\0';
    int64_t word_arg = len == FOURLW_STMK_BYTES ? (int64_t)base_get_be64(p + 4) : 0;
    struct zk_wbuf out;
    zk_wbuf_init(&out);
    if (!fourlw_allowed(dp, word)) {
        char msg[96];
        int n = snprintf(msg, sizeof(msg), "%s is not executed because it is not in the whitelist.\n", word);
        zk_put_raw(&out, msg, (size_t)n);
    } else if (dp->cfg.fourlw) {
        dp->cfg.fourlw(dp->cfg.fourlw_arg, dp, word, word_arg, &out);
    }
    /* The answer is the last thing sent: no slow-consumer bound applies. */
    if (!out.err && out.len)
        zk_put_raw(&c->out, out.p, out.len);
    zk_wbuf_free(&out);
    conn_close(c, false);
}

/* ---- framing ------------------------------------------------------------------- */

static void handle_frame(struct conn *c, const uint8_t *frame, size_t len)
{
    switch (c->state) {
    case CONN_NEW:
        handle_connect(c, frame, len);
        break;
    case CONN_HANDSHAKE:
        /* Requests pipelined behind the ConnectRequest wait for the session. */
        if (!enqueue_frame(c, frame, len, c->w->now_us))
            conn_close(c, true);
        break;
    case CONN_ACTIVE:
        handle_request_frame(c, frame, len);
        break;
    }
}

/* Runs the complete frames at the start of p[0..n) while c can run them.
 * Returns the bytes consumed; the rest (a partial frame, or frames left
 * while the client is behind on its replies) is the caller's to keep. */
static size_t parse_frames(struct conn *c, const uint8_t *p, size_t n)
{
    int32_t max = c->w->dp->cfg.max_buffer_bytes;
    size_t off = 0;
    while (can_run(c) && n - off >= 4) {
        const uint8_t *f = p + off;
        size_t word_len = c->state == CONN_NEW ? fourlw_request_len(c, f) : 0;
        if (word_len > n - off)
            break; /* stmk's argument is still to come (or the deadline closes it) */
        if (word_len > 0) {
            handle_fourlw(c, f, word_len);
            return n;
        }
        int32_t flen = (int32_t)base_get_be32(f);
        if (flen < 0 || flen > max) {
            /* ZooKeeper: "Len error" -> the connection is closed. */
            base_log(BASE_LOG_WARN,
                     "larchd: closing %s: frame length %d outside 0..%d (jute.maxbuffer)",
                     c->peer, flen, max);
            conn_close(c, true);
            return n;
        }
        if (n - off - 4 < (size_t)flen)
            break;
        off += 4 + (size_t)flen;
        handle_frame(c, f + 4, (size_t)flen);
    }
    return c->closing ? n : off;
}

/* Makes room for extra more bytes of input: grown by need (doubling from a
 * small start), never to a frame's declared length ahead of its bytes. */
static bool input_reserve(struct conn *c, size_t extra)
{
    if (extra <= c->in_cap - c->in_len)
        return true;
    if (extra > SIZE_MAX - c->in_len)
        return false;
    /* the first allocation is IN_CAP_MIN_BYTES: the memory budget counts
     * in_cap, so its steps stay what they were */
    size_t need = c->in_len + extra;
    return base_grow(&c->in, &c->in_cap, need > IN_CAP_MIN_BYTES ? need : IN_CAP_MIN_BYTES, 1) == 0;
}

/* Drops the first used bytes of c->in; an empty buffer is freed. */
static void input_consume(struct conn *c, size_t used)
{
    if (used == 0)
        return;
    c->in_len -= used;
    if (c->in_len == 0) {
        free(c->in);
        c->in = NULL;
        c->in_cap = 0;
        return;
    }
    memmove(c->in, c->in + used, c->in_len);
}

static void parse_kept_input(struct conn *c)
{
    if (c->in_len >= 4)
        input_consume(c, parse_frames(c, c->in, c->in_len));
}

void conn_input(struct conn *c, const uint8_t *p, size_t n)
{
    if (c->closing || n == 0)
        return;
    if (c->in_len == 0) {
        /* The common case: frames straight from the receive buffer. */
        size_t used = parse_frames(c, p, n);
        p += used;
        n -= used;
        if (n == 0 || c->closing)
            return;
    }
    if (!input_reserve(c, n)) {
        base_log(BASE_LOG_ERROR, "larchd: closing %s: out of memory for its input", c->peer);
        conn_close(c, true);
        return;
    }
    memcpy(c->in + c->in_len, p, n);
    c->in_len += n;
    parse_kept_input(c);
}

void conn_progress(struct conn *c)
{
    if (c->state == CONN_ACTIVE)
        run_queued(c);
    if (!c->q_head || c->state != CONN_ACTIVE)
        parse_kept_input(c);
}

/* A complete frame (or something parse_frames acts on at once) in c->in. */
static bool input_has_frame(const struct conn *c)
{
    if (c->in_len < 4)
        return false;
    size_t word_len = c->state == CONN_NEW ? fourlw_request_len(c, c->in) : 0;
    if (word_len > 0)
        return c->in_len >= word_len;
    uint32_t flen = base_get_be32(c->in);
    return flen > (uint32_t)INT32_MAX ||
           (int32_t)flen > c->w->dp->cfg.max_buffer_bytes || c->in_len - 4 >= flen;
}

bool conn_has_runnable_work(const struct conn *c)
{
    if (!can_run(c))
        return false;
    if (c->state == CONN_ACTIVE && c->q_head && may_pipeline(c, c->q_head->bytes, c->q_head->len))
        return true;
    return (!c->q_head || c->state != CONN_ACTIVE) && input_has_frame(c);
}

/* ---- lifetime -------------------------------------------------------------------- */

void conn_init(struct conn *c, struct worker *w, int fd, const char *ip, int port)
{
    c->fd = fd;
    c->w = w;
    c->state = CONN_NEW;
    zk_wbuf_init(&c->out);
    zk_wbuf_init(&c->deferred);
    c->fence_zxid = INT64_MAX;
    c->accepted_ms = w->now_ms;
    snprintf(c->peer_ip, sizeof(c->peer_ip), "%s", ip);
    snprintf(c->peer, sizeof(c->peer), "%s:%d", ip, port);
    atomic_store(&c->lat_min_us, INT64_MAX);
    c->established_ms = base_wall_ms();
}

void conn_release(struct conn *c)
{
    struct worker *w = c->w;
    /* Also when the sequencer closed it (session_id is 0 then): this is the
     * last request of the connection it sees, and it ends what the
     * sequencer remembers of it. */
    if (c->state == CONN_ACTIVE) {
        struct seq_req *r = seq_req_new(SEQ_REQ_DISCONNECT, NULL, 0, NULL, 0);
        if (r) {
            r->worker = w->id;
            r->conn = c->token;
            r->session_id = c->session_id;
            seq_submit(w->dp->seq, r);
            w->submitted = true;
        }
    }
    withdraw_session_auth(c);
    pthread_mutex_lock(&w->watch_lock);
    watch_remove_conn(w->wt, c->token);
    atomic_store_explicit(&w->nwatches, watch_count(w->wt), memory_order_relaxed);
    pthread_mutex_unlock(&w->watch_lock);
    qframes_free(c);
    saslsrv_conn_free(c->sasl);
    c->sasl = NULL;
    for (int32_t i = 0; i < c->nauth; i++) {
        free((char *)c->auth[i].scheme);
        free((char *)c->auth[i].id);
    }
    c->nauth = 0;
    zk_wbuf_free(&c->out);
    zk_wbuf_free(&c->deferred);
    c->out_off = 0;
    free(c->in);
    c->in = NULL;
    c->in_len = c->in_cap = 0;
    c->pending = 0; /* a reply still coming names a stale token and is dropped */
    c->seq_bytes = 0;
    set_throttled(c, false);
    conn_account(c);
}

/* ---- sequencer outputs --------------------------------------------------- */

static void deliver_events(struct worker *w, const struct seq_events *ev)
{
    if (atomic_load_explicit(&w->nwatches, memory_order_relaxed) > 0) {
        pthread_mutex_lock(&w->watch_lock);
        for (uint32_t i = 0; i < ev->count; i++) {
            const struct seq_event *e = &ev->items[i];
            struct tree_event te = { .type = e->type, .path = e->path, .zxid = e->zxid, .acl = e->acl };
            w->firing_zxid = te.zxid;
            w->firing_acl = e->acl;
            watch_fire(w->wt, &te, worker_fire, w);
        }
        w->firing_acl = NULL;
        atomic_store_explicit(&w->nwatches, watch_count(w->wt), memory_order_relaxed);
        pthread_mutex_unlock(&w->watch_lock);
    }
    if (ev->through_zxid > w->events_through)
        w->events_through = ev->through_zxid;
}

static void send_connect_response(struct conn *c, const struct seq_out *o)
{
    struct zk_wbuf *w = &c->w->aux;
    zk_wbuf_reset(w);
    size_t mark = zk_frame_begin(w);
    struct zk_connect_resp resp = {
        .protocol_version = 0,
        .timeout_ms = o->timeout_ms,
        .session_id = o->session_id,
        .passwd = { (const char *)o->passwd, 16 },
        .read_only = o->read_only && o->timeout_ms != 0,
        .has_read_only = c->client_sent_ro,
    };
    static const uint8_t zeros[16];
    if (o->timeout_ms == 0)
        resp.passwd.ptr = (const char *)zeros;
    zk_put_connect_resp(w, &resp);
    zk_frame_end(w, mark);
    conn_queue_reply(c, w);
    zk_wbuf_reset(w);
}

static void on_connect_result(struct conn *c, const struct seq_out *o)
{
    send_connect_response(c, o);
    if (o->timeout_ms == 0) {
        conn_close(c, false); /* session expired or invalid: answer, then close */
        return;
    }
    c->session_id = o->session_id;
    c->timeout_ms = o->timeout_ms;
    c->read_only = o->read_only;
    c->state = CONN_ACTIVE;
    c->last_touch_ms = 0;
    publish_session_auth(c);
    touch_session(c);
    /* Frames pipelined behind the handshake run now, in order. */
    conn_mark_resume(c);
}

static void on_reply(struct worker *w, struct conn *c, const struct seq_out *o)
{
    if (o->frame) {
        out_append(c, o->frame, o->frame_len);
        atomic_store_explicit(&c->last_zxid, tree_last_zxid(w->dp->tree), memory_order_relaxed);
    }
    if (o->pending_done && c->pending > 0) {
        /* answers come in request order: this is the oldest's */
        conn_note_latency(c, c->pending_arrived_us[c->pending_head]);
        c->pending_head = (c->pending_head + 1) % DP_PIPELINE_MAX;
        c->seq_bytes -= c->seq_bytes / c->pending; /* the requests' average */
        if (--c->pending == 0) {
            c->seq_bytes = 0;
            c->pending_barrier = false;
        }
        if (c->q_head)
            conn_mark_resume(c); /* the queue's head may go now */
        conn_mark_dirty(c); /* the budget changed: reading may resume */
    }
    if (o->kind == SEQ_OUT_CLOSE) {
        if (c->session_id == o->session_id || o->session_id == 0) {
            withdraw_session_auth(c);
            c->session_id = 0; /* the sequencer already dropped our ownership */
        }
        conn_close(c, false);
    }
}

/* Never runs requests: whatever an output unblocks goes on the resume list,
 * so nothing re-enters the parser while it may be on the stack. */
static void on_seq_out(void *arg, struct seq_out *o)
{
    struct worker *w = arg;
    if (o->kind == SEQ_OUT_EVENTS) {
        deliver_events(w, o->events);
        seq_out_free(o);
        return;
    }
    struct conn *c = worker_conn(w, o->conn);
    if (!c || (c->closing && c->hard_close)) {
        seq_out_free(o);
        return;
    }
    switch (o->kind) {
    case SEQ_OUT_REPLY:
    case SEQ_OUT_CLOSE:
        on_reply(w, c, o);
        break;
    case SEQ_OUT_CONNECT:
        on_connect_result(c, o);
        break;
    }
    seq_out_free(o);
}

void worker_drain_sequencer(struct worker *w)
{
    w->draining = true;
    seq_worker_drain(w->dp->seq, w->id, on_seq_out, w);
    w->draining = false;
}

/* One wake-up for every request this pass handed over. */
void worker_kick_sequencer(struct worker *w)
{
    if (w->submitted) {
        w->submitted = false;
        seq_kick(w->dp->seq);
    }
}

/* Invariant 3: before a read reply leaves, every watch event of every txn the
 * read could have observed must be delivered. need_zxid was read after the
 * tree lookup; events arrive on our queue right after their round applies. */
void worker_wait_events(struct worker *w, int64_t need_zxid)
{
    worker_kick_sequencer(w);
    for (int spins = 0; w->events_through < need_zxid; spins++) {
        worker_drain_sequencer(w);
        if (w->events_through >= need_zxid)
            return;
        if (atomic_load(&w->dp->stop) || spins > 1000000) {
            base_log(BASE_LOG_WARN, "larchd: worker %d: events through 0x%llx never arrived", w->id,
                     (unsigned long long)need_zxid);
            w->events_through = need_zxid;
            return;
        }
        sched_yield();
    }
}
