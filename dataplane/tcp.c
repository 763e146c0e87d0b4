/*
 * tcp.c — the epoll front end: accept, framing, handshake, per-session FIFO,
 * sequencer outputs (events, replies, connects, closes) and flushing.
 *
 * Each loop pass, redis-style: wait; read and dispatch every ready socket;
 * drain the sequencer queue; run connections whose write was answered; then
 * flush every connection that has output, so replies produced in one pass go
 * out in one write per connection.
 */
#include "dataplane/dp_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <urcu.h>

#define EV_LISTEN 0xFFFFFFFFFFFFFF01ULL
#define EV_SEQ 0xFFFFFFFFFFFFFF02ULL
#define EV_STOP 0xFFFFFFFFFFFFFF03ULL
#define READ_CHUNK 65536

static const char *const fourlw_words[] = {
    "ruok", "srvr", "stat", "mntr", "conf", "cons", "crst", "srst", "envi",
    "wchs", "wchc", "wchp", "dump", "isro", "dirs", NULL,
};

int64_t dp_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- per-IP connection limit (maxClientCnxns) ---------------------------- */

static bool ip_acquire(struct dp *dp, const char *ip)
{
    bool ok = true;
    pthread_mutex_lock(&dp->ip_lock);
    size_t i;
    for (i = 0; i < dp->nips && strcmp(dp->ips[i].ip, ip) != 0; i++)
        ;
    if (i == dp->nips) {
        if (dp->nips == dp->cap_ips) {
            size_t ncap = dp->cap_ips ? dp->cap_ips * 2 : 16;
            struct ip_count *n = realloc(dp->ips, ncap * sizeof(*n));
            if (!n) {
                pthread_mutex_unlock(&dp->ip_lock);
                return false;
            }
            dp->ips = n;
            dp->cap_ips = ncap;
        }
        snprintf(dp->ips[i].ip, sizeof(dp->ips[i].ip), "%s", ip);
        dp->ips[i].n = 0;
        dp->nips++;
    }
    if (dp->cfg.max_client_cnxns > 0 && dp->ips[i].n >= dp->cfg.max_client_cnxns)
        ok = false;
    else
        dp->ips[i].n++;
    pthread_mutex_unlock(&dp->ip_lock);
    return ok;
}

static void ip_release(struct dp *dp, const char *ip)
{
    pthread_mutex_lock(&dp->ip_lock);
    for (size_t i = 0; i < dp->nips; i++) {
        if (strcmp(dp->ips[i].ip, ip) == 0) {
            if (--dp->ips[i].n == 0)
                dp->ips[i] = dp->ips[--dp->nips];
            break;
        }
    }
    pthread_mutex_unlock(&dp->ip_lock);
}

/* ---- connection table ------------------------------------------------------- */

struct conn *worker_conn(struct worker *w, uint64_t token)
{
    uint32_t slot = (uint32_t)token;
    if (slot >= w->nslots || !w->slots[slot] || w->slots[slot]->token != token)
        return NULL;
    return w->slots[slot];
}

static int slot_take(struct worker *w, uint32_t *out)
{
    if (w->nfree == 0) {
        uint32_t ncap = w->nslots ? w->nslots * 2 : 64;
        struct conn **s = realloc(w->slots, ncap * sizeof(*s));
        if (!s)
            return -1;
        w->slots = s;
        uint32_t *g = realloc(w->gens, ncap * sizeof(*g));
        if (!g)
            return -1;
        w->gens = g;
        uint32_t *f = realloc(w->free_slots, ncap * sizeof(*f));
        if (!f)
            return -1;
        w->free_slots = f;
        for (uint32_t i = w->nslots; i < ncap; i++) {
            w->slots[i] = NULL;
            w->gens[i] = 0;
        }
        for (uint32_t i = ncap; i > w->nslots; i--)
            w->free_slots[w->nfree++] = i - 1;
        w->nslots = ncap;
    }
    *out = w->free_slots[--w->nfree];
    return 0;
}

/* The epoll interest follows the connection's state: no input while paused
 * (backpressure) or closing (only the last replies are flushed), output only
 * while a send would block. Level-triggered, so interest must be exact. */
static void conn_update_events(struct conn *c)
{
    uint32_t ev = 0;
    if (!c->epollin_paused && !c->closing)
        ev |= EPOLLIN | EPOLLRDHUP;
    if (c->epollout)
        ev |= EPOLLOUT;
    struct epoll_event e = { .events = ev, .data.u64 = c->token };
    epoll_ctl(c->w->epfd, EPOLL_CTL_MOD, c->fd, &e);
}

static void mark_dirty(struct conn *c)
{
    if (c->dirty)
        return;
    c->dirty = true;
    c->next_dirty = c->w->dirty;
    c->w->dirty = c;
}

static void mark_resume(struct conn *c)
{
    if (c->resume)
        return;
    c->resume = true;
    c->next_resume = c->w->resume;
    c->w->resume = c;
}

static void conn_stats_init(struct conn *c)
{
    atomic_store(&c->lat_min_us, INT64_MAX);
    c->established_ms = wall_ms();
}

static void accept_one(struct worker *w, int fd, const struct sockaddr_storage *ss)
{
    struct dp *dp = w->dp;
    char ip[64] = "?";
    int port = 0;
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
        inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
        port = ntohs(a->sin_port);
    } else if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
        inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip));
        port = ntohs(a->sin6_port);
    }
    if (!ip_acquire(dp, ip)) {
        /* ZooKeeper: "Too many connections from <ip> - max is N": drop. */
        fprintf(stderr, "larchd: too many connections from %s - max is %d\n", ip,
                dp->cfg.max_client_cnxns);
        close(fd);
        return;
    }
    uint32_t slot;
    struct conn *c = calloc(1, sizeof(*c));
    pthread_mutex_lock(&w->conns_lock);
    if (!c || slot_take(w, &slot) != 0) {
        pthread_mutex_unlock(&w->conns_lock);
        free(c);
        ip_release(dp, ip);
        close(fd);
        return;
    }
    c->token = ((uint64_t)++w->gens[slot] << 32) | slot;
    w->slots[slot] = c;
    pthread_mutex_unlock(&w->conns_lock);
    c->fd = fd;
    c->w = w;
    c->state = CONN_NEW;
    zk_wbuf_init(&c->out);
    zk_wbuf_init(&c->deferred);
    c->fence_zxid = INT64_MAX;
    snprintf(c->peer_ip, sizeof(c->peer_ip), "%s", ip);
    snprintf(c->peer, sizeof(c->peer), "%s:%d", ip, port);
    conn_stats_init(c);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.u64 = c->token };
    if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev) != 0)
        conn_close(c, true);
}

static void accept_all(struct worker *w)
{
    for (int i = 0; i < 64; i++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        int fd = accept4(w->dp->listen_fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return; /* EAGAIN: another worker took it, or the backlog is empty */
        accept_one(w, fd, &ss);
    }
}

static void qframes_free(struct conn *c)
{
    while (c->q_head) {
        struct qframe *f = c->q_head;
        c->q_head = f->next;
        free(f);
    }
    c->q_tail = NULL;
    c->queued = 0;
}

/* Releases everything of c. Called only at the end of a loop pass (from
 * reap_closed) so no handler still holds c. */
static void conn_destroy(struct conn *c)
{
    struct worker *w = c->w;
    struct dp *dp = w->dp;
    if (c->state == CONN_ACTIVE && c->session_id != 0) {
        struct seq_req *r = seq_req_new(SEQ_REQ_DISCONNECT, NULL, 0, NULL, 0);
        if (r) {
            r->worker = w->id;
            r->conn = c->token;
            r->session_id = c->session_id;
            seq_submit(dp->seq, r);
            w->submitted = true;
        }
    }
    pthread_mutex_lock(&w->watch_lock);
    watch_remove_conn(w->wt, c->token);
    atomic_store_explicit(&w->nwatches, watch_count(w->wt), memory_order_relaxed);
    pthread_mutex_unlock(&w->watch_lock);
    epoll_ctl(w->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    ip_release(dp, c->peer_ip);
    uint32_t slot = (uint32_t)c->token;
    pthread_mutex_lock(&w->conns_lock);
    w->slots[slot] = NULL;
    w->free_slots[w->nfree++] = slot;
    pthread_mutex_unlock(&w->conns_lock);
    qframes_free(c);
    for (int32_t i = 0; i < c->nauth; i++) {
        free((char *)c->auth[i].scheme);
        free((char *)c->auth[i].id);
    }
    zk_wbuf_free(&c->out);
    zk_wbuf_free(&c->deferred);
    free(c->in);
    free(c);
}

/* Marks c for closing. hard: drop unsent output; otherwise flush first. The
 * connection is destroyed at the end of the pass (mark_dirty gets it there). */
void conn_close(struct conn *c, bool hard)
{
    bool was_closing = c->closing;
    c->closing = true;
    c->hard_close = c->hard_close || hard;
    if (!was_closing && !c->hard_close)
        conn_update_events(c);
    mark_dirty(c);
}

/* ---- output -------------------------------------------------------------- */

/* Bookkeeping after a frame was added to c->out (by out_append, or encoded
 * there directly by a read): limits, counters, the flush list. */
void conn_frame_added(struct conn *c)
{
    if (c->out.err || c->out.len - c->out_off > DP_OUT_MAX) {
        fprintf(stderr, "larchd: dropping %s: %zu bytes unsent\n", c->peer, c->out.len - c->out_off);
        conn_close(c, true);
        return;
    }
    COUNTER_ADD(c->tx, 1);
    COUNTER_ADD(c->w->st_tx, 1);
    mark_dirty(c);
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
static void put_event(struct zk_wbuf *w, int32_t type, const char *path)
{
    size_t mark = zk_frame_begin(w);
    struct zk_reply_header h = { .xid = ZK_XID_NOTIFICATION, .zxid = -1, .err = ZK_OK };
    zk_put_reply_header(w, &h);
    struct zk_watcher_event ev = { .type = type, .state = ZK_STATE_SYNC_CONNECTED, .path = zk_str_c(path) };
    zk_put_watcher_event(w, &ev);
    zk_frame_end(w, mark);
}

void conn_send_event(struct conn *c, int32_t type, const char *path)
{
    struct zk_wbuf *w = &c->w->aux;
    size_t keep = w->len;
    put_event(w, type, path);
    if (!w->err)
        out_append(c, w->p + keep, w->len - keep);
    w->len = keep;
}

void worker_fire(void *arg, uint64_t token, int32_t type, const char *path)
{
    struct worker *w = arg;
    struct conn *c = worker_conn(w, token);
    if (c == NULL || c->closing)
        return;
    if (w->firing_zxid > c->fence_zxid)
        put_event(&c->deferred, type, path); /* after the fenced reply */
    else
        conn_send_event(c, type, path);
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

static void flush_conn(struct conn *c)
{
    while (c->out_off < c->out.len && !c->hard_close) {
        ssize_t n = send(c->fd, c->out.p + c->out_off, c->out.len - c->out_off, MSG_NOSIGNAL);
        if (n > 0) {
            c->out_off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (!c->epollout) {
                c->epollout = true;
                conn_update_events(c);
            }
            return;
        }
        conn_close(c, true);
        return;
    }
    if (c->out_off == c->out.len) {
        zk_wbuf_reset(&c->out);
        c->out_off = 0;
        if (c->epollout) {
            c->epollout = false;
            conn_update_events(c);
        }
    }
}

/* ---- requests ----------------------------------------------------------------- */

struct tree_auth conn_auth(const struct conn *c)
{
    return (struct tree_auth){ .ids = c->auth, .count = c->nauth, .peer_ip = c->peer_ip, .super = c->super };
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

/* ZooKeeper answers a failed auth with AUTHFAILED (xid -4) and closes. */
static void auth_failed(struct conn *c)
{
    reply_header_only(c, ZK_XID_AUTH, ZK_EAUTHFAILED);
    conn_close(c, false);
}

/* Adds the identity "digest:user:base64(sha1(user:password))" to c, once;
 * the super digest marks the connection as the super user. */
static bool add_digest_identity(struct conn *c, const char *user_pw, size_t len)
{
    const char *colon = memchr(user_pw, ':', len);
    char hash[29];
    zk_digest_of(user_pw, len, hash);
    char *id = NULL;
    if (asprintf(&id, "%.*s:%s", (int)(colon - user_pw), user_pw, hash) < 0)
        return false;
    for (int32_t i = 0; i < c->nauth; i++) {
        if (strcmp(c->auth[i].id, id) == 0) {
            free(id);
            return true;
        }
    }
    char *scheme = strdup("digest");
    if (!scheme) {
        free(id);
        return false;
    }
    c->auth[c->nauth].scheme = scheme;
    c->auth[c->nauth].id = id;
    c->nauth++;
    if (c->w->dp->super_digest[0] && strcmp(id, c->w->dp->super_digest) == 0)
        c->super = true;
    return true;
}

/* AuthPacket: only "digest" is an auth provider here, as in a stock server
 * without SASL. */
static void handle_auth(struct conn *c, const uint8_t *body, size_t len)
{
    struct zk_rbuf r;
    struct zk_auth_packet a;
    zk_rbuf_init(&r, body, len);
    bool ok = zk_get_auth_packet(&r, &a) && a.scheme.len == 6 && memcmp(a.scheme.ptr, "digest", 6) == 0 &&
              a.auth.len > 0 && memchr(a.auth.ptr, ':', (size_t)a.auth.len) && c->nauth < DP_AUTH_MAX &&
              add_digest_identity(c, a.auth.ptr, (size_t)a.auth.len);
    if (!ok) {
        auth_failed(c);
        return;
    }
    reply_header_only(c, ZK_XID_AUTH, ZK_OK);
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
    if (c->pending == 0)
        c->pending_since_us = arrived_us;
    c->pending++;
    COUNTER_ADD(c->w->st_writes, 1);
    seq_submit(c->w->dp->seq, r);
    c->w->submitted = true;
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

/* Runs one request of an active connection. The caller guarantees nothing
 * of this connection is pending at the sequencer. */
static void dispatch(struct conn *c, const uint8_t *frame, size_t len, int64_t arrived_us)
{
    struct zk_rbuf r;
    struct zk_request_header h;
    zk_rbuf_init(&r, frame, len);
    if (!zk_get_request_header(&r, &h)) {
        conn_close(c, true);
        return;
    }
    const uint8_t *body = frame + r.off;
    size_t blen = len - r.off;
    atomic_store_explicit(&c->last_op, h.type, memory_order_relaxed);
    if (op_goes_to_sequencer(h.type)) {
        forward_to_sequencer(c, h.xid, h.type, body, blen, arrived_us);
        return;
    }
    if (h.type == ZK_OP_AUTH) {
        handle_auth(c, body, blen);
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
    return true;
}

static void pause_reading(struct conn *c, bool pause)
{
    if (c->epollin_paused == pause)
        return;
    c->epollin_paused = pause;
    conn_update_events(c);
}

/* Runs queued frames in order until one goes to the sequencer (invariant 2). */
static void run_queued(struct conn *c)
{
    while (c->q_head && c->pending == 0 && !c->closing) {
        struct qframe *f = c->q_head;
        c->q_head = f->next;
        if (!c->q_head)
            c->q_tail = NULL;
        c->queued--;
        dispatch(c, f->bytes, f->len, f->arrived_us);
        free(f);
    }
    if (c->epollin_paused && c->queued < (uint32_t)c->w->dp->cfg.max_outstanding / 2)
        pause_reading(c, false);
}

static void handle_request_frame(struct conn *c, const uint8_t *frame, size_t len)
{
    int64_t now = c->w->now_us;
    COUNTER_ADD(c->rx, 1);
    COUNTER_ADD(c->w->st_rx, 1);
    touch_session(c);
    if (c->pending > 0 || c->q_head) {
        if (!enqueue_frame(c, frame, len, now)) {
            conn_close(c, true);
            return;
        }
        if (c->queued >= (uint32_t)c->w->dp->cfg.max_outstanding)
            pause_reading(c, true);
        return;
    }
    dispatch(c, frame, len, now);
}

/* ---- handshake and four-letter words -------------------------------------- */

static void handle_connect(struct conn *c, const uint8_t *frame, size_t len)
{
    struct zk_rbuf r;
    struct zk_connect_req req;
    zk_rbuf_init(&r, frame, len);
    if (!zk_get_connect_req(&r, &req) || (req.passwd.len > 16)) {
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
    if (q->passwd_len)
        memcpy(q->passwd, req.passwd.ptr, (size_t)q->passwd_len);
    c->client_sent_ro = req.has_read_only;
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

static void handle_fourlw(struct conn *c, const uint8_t *p)
{
    struct dp *dp = c->w->dp;
    char word[5];
    memcpy(word, p, 4);
    word[4] = '\0';
    struct zk_wbuf out;
    zk_wbuf_init(&out);
    if (dp->cfg.fourlw_allowed && !dp->cfg.fourlw_allowed(dp->cfg.fourlw_arg, word)) {
        char msg[96];
        int n = snprintf(msg, sizeof(msg), "%s is not executed because it is not in the whitelist.\n", word);
        zk_put_raw(&out, msg, (size_t)n);
    } else if (dp->cfg.fourlw) {
        dp->cfg.fourlw(dp->cfg.fourlw_arg, dp, word, &out);
    }
    if (!out.err && out.len)
        out_append(c, out.p, out.len);
    zk_wbuf_free(&out);
    conn_close(c, false);
}

/* ---- reading --------------------------------------------------------------- */

static void parse_frames(struct conn *c)
{
    struct dp *dp = c->w->dp;
    size_t off = 0;
    while (!c->closing && c->in_len - off >= 4 && !c->epollin_paused) {
        const uint8_t *p = c->in + off;
        if (c->state == CONN_NEW && is_fourlw(p)) {
            handle_fourlw(c, p);
            return;
        }
        int32_t flen = (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
        if (flen < 0 || flen > dp->cfg.max_buffer_bytes) {
            /* ZooKeeper: "Len error" -> the connection is closed. */
            fprintf(stderr, "larchd: closing %s: frame length %d outside 0..%d (jute.maxbuffer)\n", c->peer,
                    flen, dp->cfg.max_buffer_bytes);
            conn_close(c, true);
            return;
        }
        if (c->in_len - off - 4 < (size_t)flen)
            break;
        const uint8_t *frame = p + 4;
        off += 4 + (size_t)flen;
        switch (c->state) {
        case CONN_NEW:
            handle_connect(c, frame, (size_t)flen);
            break;
        case CONN_HANDSHAKE:
            /* Requests pipelined behind the ConnectRequest wait for the session. */
            if (!enqueue_frame(c, frame, (size_t)flen, c->w->now_us))
                conn_close(c, true);
            break;
        case CONN_ACTIVE:
            handle_request_frame(c, frame, (size_t)flen);
            break;
        }
    }
    if (off) {
        memmove(c->in, c->in + off, c->in_len - off);
        c->in_len -= off;
    }
}

static void read_conn(struct conn *c)
{
    for (int rounds = 0; rounds < 16 && !c->closing && !c->epollin_paused; rounds++) {
        if (c->in_cap - c->in_len < READ_CHUNK) {
            size_t ncap = c->in_cap ? c->in_cap * 2 : READ_CHUNK * 2;
            while (ncap - c->in_len < READ_CHUNK)
                ncap *= 2;
            uint8_t *n = realloc(c->in, ncap);
            if (!n) {
                conn_close(c, true);
                return;
            }
            c->in = n;
            c->in_cap = ncap;
        }
        size_t room = c->in_cap - c->in_len;
        ssize_t n = recv(c->fd, c->in + c->in_len, room, 0);
        if (n > 0) {
            c->in_len += (size_t)n;
            parse_frames(c);
            /* A short read drained the socket: asking again would only
             * return EAGAIN (half of all recv calls, measured); the
             * level-triggered epoll reports whatever arrives next. */
            bool drained = (size_t)n < room;
            /* Shrink a buffer a large frame blew up once it is empty again. */
            if (c->in_len == 0 && c->in_cap > 4 * READ_CHUNK) {
                free(c->in);
                c->in = NULL;
                c->in_cap = 0;
            }
            if (drained)
                return;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        conn_close(c, true); /* EOF or error */
        return;
    }
}

/* ---- sequencer outputs --------------------------------------------------- */

static void deliver_events(struct worker *w, const struct seq_events *ev)
{
    if (atomic_load_explicit(&w->nwatches, memory_order_relaxed) > 0) {
        pthread_mutex_lock(&w->watch_lock);
        for (uint32_t i = 0; i < ev->count; i++) {
            struct tree_event te = { .type = ev->items[i].type, .path = ev->items[i].path, .zxid = ev->items[i].zxid };
            w->firing_zxid = te.zxid;
            watch_fire(w->wt, &te, worker_fire, w);
        }
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
        .read_only = false,
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
    c->state = CONN_ACTIVE;
    c->last_touch_ms = 0;
    touch_session(c);
    /* Frames pipelined behind the handshake run now, in order. */
    mark_resume(c);
}

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
        if (o->frame) {
            out_append(c, o->frame, o->frame_len);
            atomic_store_explicit(&c->last_zxid, tree_last_zxid(w->dp->tree), memory_order_relaxed);
        }
        if (o->pending_done && c->pending > 0) {
            conn_note_latency(c, c->pending_since_us);
            if (--c->pending == 0)
                mark_resume(c);
            else
                c->pending_since_us = w->now_us;
        }
        if (o->kind == SEQ_OUT_CLOSE) {
            if (c->session_id == o->session_id || o->session_id == 0)
                c->session_id = 0; /* the sequencer already dropped our ownership */
            conn_close(c, false);
        }
        break;
    case SEQ_OUT_CONNECT:
        on_connect_result(c, o);
        break;
    }
    seq_out_free(o);
}

static void drain_sequencer(struct worker *w)
{
    w->draining = true;
    seq_worker_drain(w->dp->seq, w->id, on_seq_out, w);
    w->draining = false;
}

/* Invariant 3: before a read reply leaves, every watch event of every txn the
 * read could have observed must be delivered. need_zxid was read after the
 * tree lookup; events arrive on our queue right after their round applies. */
/* One wake-up for every request this pass handed over. */
static void kick_sequencer(struct worker *w)
{
    if (w->submitted) {
        w->submitted = false;
        seq_kick(w->dp->seq);
    }
}

void worker_wait_events(struct worker *w, int64_t need_zxid)
{
    kick_sequencer(w);
    for (int spins = 0; w->events_through < need_zxid; spins++) {
        drain_sequencer(w);
        if (w->events_through >= need_zxid)
            return;
        if (atomic_load(&w->dp->stop) || spins > 1000000) {
            fprintf(stderr, "larchd: worker %d: events through 0x%llx never arrived\n", w->id,
                    (unsigned long long)need_zxid);
            w->events_through = need_zxid;
            return;
        }
        sched_yield();
    }
}

/* ---- the loop ------------------------------------------------------------------ */

static void run_resumed(struct worker *w)
{
    while (w->resume) {
        struct conn *c = w->resume;
        w->resume = c->next_resume;
        c->resume = false;
        if (!c->closing && c->state == CONN_ACTIVE)
            run_queued(c);
    }
}

/* Flat combining: when this pass handed writes over and the sequencer role
 * is free, run the rounds here and answer them in the same pass: no wake-up
 * and no context switch (the win when the sequencer has no core of its own).
 * Replies can release queued requests that submit more: a few turns at most. */
static void run_rounds_inline(struct worker *w)
{
    for (int turns = 0; turns < 4 && w->submitted; turns++) {
        if (!seq_run_inline(w->dp->seq))
            return; /* role busy or inline off: kick_sequencer wakes the thread */
        w->submitted = false;
        drain_sequencer(w);
        run_resumed(w);
    }
}

static void flush_and_reap(struct worker *w)
{
    while (w->dirty) {
        struct conn *c = w->dirty;
        w->dirty = c->next_dirty;
        c->dirty = false;
        flush_conn(c);
        /* A closing connection with output left waits for EPOLLOUT. */
        if (c->closing && (c->hard_close || c->out_off == c->out.len))
            conn_destroy(c);
    }
}

static void handle_conn_event(struct worker *w, uint64_t token, uint32_t events)
{
    struct conn *c = worker_conn(w, token);
    if (!c)
        return;
    if (events & EPOLLOUT)
        mark_dirty(c);
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
        read_conn(c);
    if ((events & (EPOLLHUP | EPOLLERR)) && !c->closing)
        conn_close(c, true);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct epoll_event evs[128];
    rcu_register_thread();
    while (!atomic_load(&w->dp->stop)) {
        int timeout_ms = seq_worker_idle_begin(w->dp->seq, w->id) ? 200 : 0;
        int n = epoll_wait(w->epfd, evs, 128, timeout_ms);
        seq_worker_idle_end(w->dp->seq, w->id);
        w->now_us = dp_now_us();
        w->now_ms = w->now_us / 1000;
        for (int i = 0; i < n; i++) {
            uint64_t key = evs[i].data.u64;
            if (key == EV_LISTEN)
                accept_all(w);
            else if (key == EV_SEQ)
                seq_worker_ack(w->dp->seq, w->id); /* drained below, once per pass */
            else if (key != EV_STOP)
                handle_conn_event(w, key, evs[i].events);
        }
        drain_sequencer(w);
        run_resumed(w);
        run_rounds_inline(w);
        flush_and_reap(w);
        kick_sequencer(w); /* after reaping: closes submit DISCONNECTs too */
    }
    pthread_mutex_lock(&w->conns_lock);
    uint32_t nslots = w->nslots;
    pthread_mutex_unlock(&w->conns_lock);
    for (uint32_t i = 0; i < nslots; i++)
        if (w->slots[i])
            conn_close(w->slots[i], true);
    flush_and_reap(w);
    kick_sequencer(w);
    rcu_unregister_thread();
    return NULL;
}

/* ---- setup -------------------------------------------------------------------- */

static int open_listener(struct dp *dp, char *err, size_t errlen)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
    struct addrinfo *res = NULL;
    char port[16];
    snprintf(port, sizeof(port), "%d", dp->cfg.port);
    int rc = getaddrinfo(dp->bind_addr[0] ? dp->bind_addr : NULL, port, &hints, &res);
    if (rc != 0) {
        snprintf(err, errlen, "cannot resolve client address '%s': %s", dp->bind_addr, gai_strerror(rc));
        return -1;
    }
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        freeaddrinfo(res);
        return -1;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
        snprintf(err, errlen, "cannot listen on %s:%d: %s", dp->bind_addr, dp->cfg.port, strerror(errno));
        close(fd);
        freeaddrinfo(res);
        return -1;
    }
    freeaddrinfo(res);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    dp->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                               : ((struct sockaddr_in *)&ss)->sin_port);
    dp->listen_fd = fd;
    return 0;
}

static int worker_init(struct dp *dp, struct worker *w, int id)
{
    w->id = id;
    w->dp = dp;
    w->epfd = -1;
    w->events_through = tree_last_zxid(dp->tree);
    atomic_store(&w->st_lat_min, UINT64_MAX);
    zk_wbuf_init(&w->scratch);
    zk_wbuf_init(&w->aux);
    pthread_mutex_init(&w->conns_lock, NULL);
    pthread_mutex_init(&w->watch_lock, NULL);
    w->wt = watch_table_new();
    w->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (!w->wt || w->epfd < 0)
        return -1;
    struct epoll_event ev = { .events = EPOLLIN | EPOLLEXCLUSIVE, .data.u64 = EV_LISTEN };
    if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, dp->listen_fd, &ev) != 0)
        return -1;
    struct epoll_event sev = { .events = EPOLLIN, .data.u64 = EV_SEQ };
    if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, seq_worker_fd(dp->seq, id), &sev) != 0)
        return -1;
    struct epoll_event xev = { .events = EPOLLIN, .data.u64 = EV_STOP };
    if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, dp->stop_efd, &xev) != 0)
        return -1;
    return 0;
}

struct dp *dp_new(const struct dp_cfg *cfg, struct tree *t, struct seq *s, char *err, size_t errlen)
{
    struct dp *dp = calloc(1, sizeof(*dp));
    if (!dp) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    dp->cfg = *cfg;
    snprintf(dp->bind_addr, sizeof(dp->bind_addr), "%s", cfg->bind_addr ? cfg->bind_addr : "");
    snprintf(dp->super_digest, sizeof(dp->super_digest), "%s", cfg->super_digest ? cfg->super_digest : "");
    dp->cfg.bind_addr = dp->bind_addr;
    dp->cfg.super_digest = dp->super_digest;
    if (dp->cfg.max_outstanding <= 0)
        dp->cfg.max_outstanding = 1000;
    dp->tree = t;
    dp->seq = s;
    dp->listen_fd = -1;
    dp->stop_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    pthread_mutex_init(&dp->ip_lock, NULL);
    dp->nworkers = cfg->workers;
    dp->workers = calloc((size_t)cfg->workers, sizeof(*dp->workers));
    if (dp->stop_efd < 0 || !dp->workers) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    if (open_listener(dp, err, errlen) != 0)
        goto fail;
    for (int i = 0; i < dp->nworkers; i++) {
        if (worker_init(dp, &dp->workers[i], i) != 0) {
            snprintf(err, errlen, "worker %d setup: %s", i, strerror(errno));
            goto fail;
        }
    }
    return dp;
fail:
    dp_free(dp);
    return NULL;
}

int dp_port(const struct dp *dp)
{
    return dp->port;
}

int dp_start(struct dp *dp)
{
    for (int i = 0; i < dp->nworkers; i++) {
        int rc = pthread_create(&dp->workers[i].thread, NULL, worker_main, &dp->workers[i]);
        if (rc != 0)
            return -rc;
        dp->workers[i].started = true;
    }
    return 0;
}

void dp_stop(struct dp *dp)
{
    atomic_store(&dp->stop, true);
    uint64_t one = 1;
    ssize_t n = write(dp->stop_efd, &one, sizeof(one));
    (void)n;
    for (int i = 0; i < dp->nworkers; i++) {
        if (dp->workers[i].started) {
            pthread_join(dp->workers[i].thread, NULL);
            dp->workers[i].started = false;
        }
    }
}

void dp_free(struct dp *dp)
{
    if (!dp)
        return;
    dp_stop(dp);
    for (int i = 0; dp->workers && i < dp->nworkers; i++) {
        struct worker *w = &dp->workers[i];
        if (w->epfd >= 0)
            close(w->epfd);
        watch_table_free(w->wt);
        zk_wbuf_free(&w->scratch);
        zk_wbuf_free(&w->aux);
        free(w->slots);
        free(w->gens);
        free(w->free_slots);
        pthread_mutex_destroy(&w->conns_lock);
        pthread_mutex_destroy(&w->watch_lock);
    }
    free(dp->workers);
    if (dp->listen_fd >= 0)
        close(dp->listen_fd);
    if (dp->stop_efd >= 0)
        close(dp->stop_efd);
    pthread_mutex_destroy(&dp->ip_lock);
    free(dp->ips);
    free(dp);
}

/* ---- introspection (any thread) ------------------------------------------------ */

void dp_get_stats(struct dp *dp, struct dp_stats *out)
{
    memset(out, 0, sizeof(*out));
    out->latency_min_us = UINT64_MAX;
    for (int i = 0; i < dp->nworkers; i++) {
        struct worker *w = &dp->workers[i];
        out->packets_received += atomic_load_explicit(&w->st_rx, memory_order_relaxed);
        out->packets_sent += atomic_load_explicit(&w->st_tx, memory_order_relaxed);
        out->reads += atomic_load_explicit(&w->st_reads, memory_order_relaxed);
        out->writes += atomic_load_explicit(&w->st_writes, memory_order_relaxed);
        out->watches += atomic_load_explicit(&w->nwatches, memory_order_relaxed);
        uint64_t mn = atomic_load_explicit(&w->st_lat_min, memory_order_relaxed);
        uint64_t mx = atomic_load_explicit(&w->st_lat_max, memory_order_relaxed);
        if (mn < out->latency_min_us)
            out->latency_min_us = mn;
        if (mx > out->latency_max_us)
            out->latency_max_us = mx;
        out->latency_sum_us += atomic_load_explicit(&w->st_lat_sum, memory_order_relaxed);
        out->latency_count += atomic_load_explicit(&w->st_lat_count, memory_order_relaxed);
        pthread_mutex_lock(&w->conns_lock);
        for (uint32_t s = 0; s < w->nslots; s++) {
            if (!w->slots[s])
                continue;
            out->connections++;
            out->outstanding += w->slots[s]->pending;
        }
        pthread_mutex_unlock(&w->conns_lock);
    }
    if (out->latency_min_us == UINT64_MAX)
        out->latency_min_us = 0;
}

void dp_reset_stats(struct dp *dp)
{
    for (int i = 0; i < dp->nworkers; i++) {
        struct worker *w = &dp->workers[i];
        atomic_store(&w->st_rx, 0);
        atomic_store(&w->st_tx, 0);
        atomic_store(&w->st_lat_min, UINT64_MAX);
        atomic_store(&w->st_lat_max, 0);
        atomic_store(&w->st_lat_sum, 0);
        atomic_store(&w->st_lat_count, 0);
    }
}

static void conn_info(const struct conn *c, struct dp_conn_info *ci)
{
    memset(ci, 0, sizeof(*ci));
    snprintf(ci->peer, sizeof(ci->peer), "%s", c->peer);
    ci->session_id = c->session_id;
    ci->timeout_ms = c->timeout_ms;
    ci->received = atomic_load_explicit(&c->rx, memory_order_relaxed);
    ci->sent = atomic_load_explicit(&c->tx, memory_order_relaxed);
    ci->queued = c->queued;
    ci->established_ms = c->established_ms;
    ci->last_zxid = atomic_load_explicit(&c->last_zxid, memory_order_relaxed);
    ci->last_op = atomic_load_explicit(&c->last_op, memory_order_relaxed);
    ci->last_latency_us = atomic_load_explicit(&c->lat_last_us, memory_order_relaxed);
    int64_t cnt = atomic_load_explicit(&c->lat_count, memory_order_relaxed);
    ci->min_latency_us = cnt ? atomic_load_explicit(&c->lat_min_us, memory_order_relaxed) : 0;
    ci->max_latency_us = atomic_load_explicit(&c->lat_max_us, memory_order_relaxed);
    ci->avg_latency_us = cnt ? atomic_load_explicit(&c->lat_sum_us, memory_order_relaxed) / cnt : 0;
}

void dp_each_conn(struct dp *dp, dp_conn_fn fn, void *arg)
{
    for (int i = 0; i < dp->nworkers; i++) {
        struct worker *w = &dp->workers[i];
        pthread_mutex_lock(&w->conns_lock);
        for (uint32_t s = 0; s < w->nslots; s++) {
            if (!w->slots[s] || w->slots[s]->state != CONN_ACTIVE)
                continue;
            struct dp_conn_info ci;
            conn_info(w->slots[s], &ci);
            fn(arg, &ci);
        }
        pthread_mutex_unlock(&w->conns_lock);
    }
}

struct watch_visit {
    struct worker *w;
    dp_watch_fn fn;
    void *arg;
};

static void visit_watch(void *arg, uint64_t token, enum watch_kind kind, const char *path)
{
    struct watch_visit *v = arg;
    struct conn *c = worker_conn(v->w, token);
    v->fn(v->arg, c ? c->session_id : 0, kind, path);
}

void dp_each_watch(struct dp *dp, dp_watch_fn fn, void *arg)
{
    for (int i = 0; i < dp->nworkers; i++) {
        struct worker *w = &dp->workers[i];
        struct watch_visit v = { .w = w, .fn = fn, .arg = arg };
        /* conns_lock keeps connections (and their session ids) alive meanwhile. */
        pthread_mutex_lock(&w->conns_lock);
        pthread_mutex_lock(&w->watch_lock);
        watch_each(w->wt, visit_watch, &v);
        pthread_mutex_unlock(&w->watch_lock);
        pthread_mutex_unlock(&w->conns_lock);
    }
}
