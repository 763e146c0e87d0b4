/*
 * conn.c — the handle's I/O thread: finds a server, attaches the session,
 * moves requests onto the wire and replies and notifications off it, pings,
 * and on any failure drops the connection and starts over with the next
 * host, until the session expires, auth fails or the handle closes.
 *
 * Timing follows ZooKeeper's ClientCnxn: a connect attempt gets
 * session_timeout / host_count; once connected, a ping goes out after
 * timeout/3 without a send, and a connection that has been silent for 2/3
 * of the negotiated timeout is dead. After a full round of failed hosts the
 * thread waits up to a second before the next round.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "client/lc_int.h"

#define SETWATCHES_BYTES_MAX (128 * 1024) /* ZooKeeper's SET_WATCHES_MAX_LENGTH */
#define ROUND_BACKOFF_MS 1000
#define CONNECT_TIMEOUT_MIN_MS 500
#define READ_CHUNK 65536

struct conn {
    int fd;
    struct zk_wbuf out; /* bytes not yet written */
    size_t out_off;
    struct base_buf in; /* bytes received, not yet parsed */
    int64_t last_send_ms, last_recv_ms;
    int32_t internal_auths; /* resent auth replies still to come */
};

static bool state_terminal(int32_t s)
{
    return s == ZK_STATE_EXPIRED || s == ZK_STATE_AUTH_FAILED || s == ZK_STATE_CLOSED;
}

/* ---- dialing -------------------------------------------------------------- */

static int wait_fd(int fd, short events, int64_t deadline_ms)
{
    for (int i = 0; i < 1000; i++) { /* bounded: EINTR retries only */
        int64_t left = deadline_ms - base_mono_ms();
        if (left <= 0)
            return -1;
        struct pollfd p = { .fd = fd, .events = events };
        int n = poll(&p, 1, (int)left);
        if (n > 0)
            return 0;
        if (n == 0 || errno != EINTR)
            return -1;
    }
    return -1;
}

static int dial_addr(const struct addrinfo *ai, int64_t deadline_ms)
{
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0)
        return -1;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    int err = 0;
    socklen_t len = sizeof err;
    if (wait_fd(fd, POLLOUT, deadline_ms) != 0 ||
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
        close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); /* latency over batching */
    return fd;
}

/* A connected non-blocking socket to h, or -1. */
static int dial(const struct lc_host *h, int64_t deadline_ms)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
    struct addrinfo *res = NULL;
    if (getaddrinfo(h->name, h->port, &hints, &res) != 0)
        return -1;
    int fd = -1;
    for (struct addrinfo *ai = res; ai != NULL && fd < 0; ai = ai->ai_next)
        fd = dial_addr(ai, deadline_ms);
    freeaddrinfo(res);
    return fd;
}

/* ---- blocking frame I/O for the handshake --------------------------------------- */

static int write_all(int fd, const uint8_t *p, size_t n, int64_t deadline_ms)
{
    size_t off = 0;
    for (int i = 0; off < n && i < 100000; i++) {
        ssize_t w = send(fd, p + off, n - off, MSG_NOSIGNAL);
        if (w > 0) {
            off += (size_t)w;
        } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
            return -1;
        } else if (wait_fd(fd, POLLOUT, deadline_ms) != 0) {
            return -1;
        }
    }
    return off == n ? 0 : -1;
}

/* Reads what the socket has into b: >0 bytes, 0 nothing now, -1 closed/error. */
static ssize_t read_some(int fd, struct base_buf *b)
{
    if (base_buf_reserve(b, READ_CHUNK) != 0)
        return -1;
    ssize_t r = recv(fd, b->data + b->len, b->cap - b->len, 0);
    if (r > 0) {
        b->len += (size_t)r;
        return r;
    }
    if (r < 0 && (errno == EAGAIN || errno == EINTR))
        return 0;
    return -1;
}

/* The length of the first complete frame in b (payload bytes), 0 when it is
 * incomplete, -1 when its length is out of range. */
static int64_t frame_ready(const struct base_buf *b)
{
    if (b->len < 4)
        return 0;
    uint32_t n = base_get_be32(b->data);
    if (n > ZK_MAX_BUFFER_DEFAULT + 1024)
        return -1;
    return b->len >= 4 + (size_t)n ? (int64_t)n : 0;
}

static void inbuf_consume(struct base_buf *b, size_t n)
{
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
}

static int read_frame_blocking(int fd, struct base_buf *b, int64_t deadline_ms, size_t *len)
{
    for (int i = 0; i < 100000; i++) {
        int64_t n = frame_ready(b);
        if (n < 0)
            return -1;
        if (n > 0) {
            *len = (size_t)n;
            return 0;
        }
        ssize_t r = read_some(fd, b);
        if (r < 0 || (r == 0 && wait_fd(fd, POLLIN, deadline_ms) != 0))
            return -1;
    }
    return -1;
}

/* ---- the session handshake ------------------------------------------------------- */

enum attach_result { ATTACH_OK, ATTACH_FAILED, ATTACH_EXPIRED };

static enum attach_result handshake(struct larch *lh, struct conn *c, int64_t deadline_ms)
{
    pthread_mutex_lock(&lh->mu);
    struct zk_connect_req req = {
        .protocol_version = 0, .last_zxid_seen = lh->last_zxid,
        .timeout_ms = lh->requested_timeout_ms, .session_id = lh->session_id,
        .passwd = { (const char *)lh->passwd, LARCH_PASSWD_LEN },
        .read_only = lh->read_only, .has_read_only = true,
    };
    struct zk_wbuf w;
    zk_wbuf_init(&w);
    size_t mark = zk_frame_begin(&w);
    zk_put_connect_req(&w, &req);
    zk_frame_end(&w, mark);
    pthread_mutex_unlock(&lh->mu);
    int rc = w.err ? -1 : write_all(c->fd, w.p, w.len, deadline_ms);
    zk_wbuf_free(&w);
    size_t len = 0;
    if (rc != 0 || read_frame_blocking(c->fd, &c->in, deadline_ms, &len) != 0)
        return ATTACH_FAILED;
    struct base_rd r;
    struct zk_connect_resp resp;
    base_rd_init(&r, c->in.data + 4, len);
    if (!zk_get_connect_resp(&r, &resp) || (resp.passwd.len != LARCH_PASSWD_LEN && resp.timeout_ms > 0))
        return ATTACH_FAILED;
    if (resp.timeout_ms <= 0)
        return ATTACH_EXPIRED; /* the server no longer knows the session */
    pthread_mutex_lock(&lh->mu);
    lh->session_id = resp.session_id;
    memcpy(lh->passwd, resp.passwd.ptr, LARCH_PASSWD_LEN);
    lh->timeout_ms = resp.timeout_ms;
    lh->state = resp.read_only ? ZK_STATE_CONNECTED_READONLY : ZK_STATE_SYNC_CONNECTED;
    pthread_mutex_unlock(&lh->mu);
    inbuf_consume(&c->in, 4 + len);
    return ATTACH_OK;
}

/* ---- the preamble: auth and setWatches after every (re)attach --------------------- */

static void put_header(struct zk_wbuf *w, int32_t xid, int32_t op)
{
    struct zk_request_header h = { .xid = xid, .type = op };
    zk_put_request_header(w, &h);
}

static void queue_auths(struct larch *lh, struct conn *c)
{
    for (struct lc_auth *a = lh->auths; a != NULL; a = a->next) {
        size_t mark = zk_frame_begin(&c->out);
        put_header(&c->out, ZK_XID_AUTH, ZK_OP_AUTH);
        struct zk_auth_packet p = { .type = 0, .scheme = zk_str_c(a->scheme),
                                    .auth = { (const char *)a->cred, a->len } };
        zk_put_auth_packet(&c->out, &p);
        zk_frame_end(&c->out, mark);
        c->internal_auths++;
    }
}

struct path_list {
    struct zk_str *items;
    size_t count, cap;
    const char *chroot;
    char **owned; /* owned[i] backs items[i] */
    size_t owned_cap;
};

static int path_list_add(void *arg, const char *path)
{
    struct path_list *l = arg;
    if (base_grow(&l->items, &l->cap, l->count + 1, sizeof *l->items) != 0 ||
        base_grow(&l->owned, &l->owned_cap, l->count + 1, sizeof *l->owned) != 0)
        return -1;
    char *full = lc_chroot_add(l->chroot, path);
    if (full == NULL)
        return -1;
    l->owned[l->count] = full;
    l->items[l->count++] = zk_str_c(full);
    return 0;
}

static void path_list_free(struct path_list *l)
{
    for (size_t i = 0; i < l->count; i++)
        free(l->owned[i]);
    free(l->owned);
    free(l->items);
}

/* setWatches (or setWatches2 when persistent watches exist), in requests
 * of at most SETWATCHES_BYTES_MAX so none hits the server's jute.maxbuffer. */
static int queue_set_watches(struct larch *lh, struct conn *c)
{
    struct path_list lists[LC_W_KINDS];
    int rc = 0;
    for (int k = 0; k < LC_W_KINDS; k++) {
        lists[k] = (struct path_list){ .chroot = lh->hosts.chroot };
        if (rc == 0)
            rc = lc_watches_each_path(&lh->watches, (enum lc_wkind)k, path_list_add, &lists[k]);
    }
    bool v2 = lists[LC_W_PERSISTENT].count > 0 || lists[LC_W_RECURSIVE].count > 0;
    size_t next[LC_W_KINDS] = { 0 };
    for (int round = 0; rc == 0 && round < 1000000; round++) {
        struct zk_strvec v[LC_W_KINDS];
        size_t bytes = 0, total = 0;
        for (int k = 0; k < LC_W_KINDS; k++) {
            size_t start = next[k];
            while (next[k] < lists[k].count && bytes < SETWATCHES_BYTES_MAX)
                bytes += 4 + (size_t)lists[k].items[next[k]++].len;
            v[k] = (struct zk_strvec){ (int32_t)(next[k] - start), lists[k].items + start };
            total += next[k] - start;
        }
        if (total == 0)
            break;
        struct zk_setwatches_req req = { .relative_zxid = lh->last_zxid, .data = v[LC_W_DATA],
                                         .exist = v[LC_W_EXIST], .child = v[LC_W_CHILD],
                                         .persistent = v[LC_W_PERSISTENT],
                                         .persistent_recursive = v[LC_W_RECURSIVE] };
        size_t mark = zk_frame_begin(&c->out);
        put_header(&c->out, ZK_XID_SETWATCHES, v2 ? ZK_OP_SETWATCHES2 : ZK_OP_SETWATCHES);
        zk_put_setwatches_req(&c->out, &req, v2);
        zk_frame_end(&c->out, mark);
    }
    for (int k = 0; k < LC_W_KINDS; k++)
        path_list_free(&lists[k]);
    return rc;
}

/* ---- the serving loop -------------------------------------------------------------- */

/* Moves queued requests to pending and their frames to the output. mu held. */
static void take_sends(struct larch *lh, struct conn *c)
{
    while (lh->send_head != NULL) {
        struct lc_req *r = lh->send_head;
        lh->send_head = r->next;
        if (lh->send_head == NULL)
            lh->send_tail = NULL;
        r->next = NULL;
        zk_put_raw(&c->out, r->frame.p, r->frame.len);
        if (lh->pend_tail != NULL)
            lh->pend_tail->next = r;
        else
            lh->pend_head = r;
        lh->pend_tail = r;
    }
}

static void queue_ping(struct conn *c)
{
    size_t mark = zk_frame_begin(&c->out);
    put_header(&c->out, ZK_XID_PING, ZK_OP_PING);
    zk_frame_end(&c->out, mark);
}

/* Unlinks and returns the pending request a reply with xid answers: the one
 * with that xid, or for auth (xid -4, answered out of order by ZooKeeper)
 * the oldest pending auth. NULL when there is none. mu held. */
static struct lc_req *take_pending(struct larch *lh, int32_t xid)
{
    struct lc_req **p = &lh->pend_head, *prev = NULL;
    while (*p != NULL && (*p)->xid != xid) {
        prev = *p;
        p = &(*p)->next;
    }
    struct lc_req *r = *p;
    if (r == NULL)
        return NULL;
    *p = r->next;
    if (lh->pend_tail == r)
        lh->pend_tail = prev;
    r->next = NULL;
    return r;
}

static void register_watch(struct larch *lh, struct lc_req *r)
{
    enum lc_wkind kind = r->wkind;
    if (kind == LC_W_NONE || r->wfn == NULL)
        return;
    if (r->kind == LC_EXISTS && r->err == ZK_ENONODE)
        kind = LC_W_EXIST; /* exists on a missing node watches for its creation */
    else if (r->err != ZK_OK)
        return;
    if (lc_watches_add(&lh->watches, kind, r->wpath, r->wfn, r->wctx) != 0)
        r->err = ZK_ESYSTEMERROR;
}

static void on_notification(struct larch *lh, struct base_rd *r)
{
    struct zk_watcher_event ev;
    if (!zk_get_watcher_event(r, &ev) || ev.path.len < 0)
        return;
    char *full = strndup(ev.path.ptr, (size_t)ev.path.len);
    if (full == NULL)
        return;
    const char *path = lc_chroot_strip(lh->hosts.chroot, full);
    struct lc_wset set = { 0 };
    if (lc_watches_trigger(&lh->watches, ev.type, path, &set) == 0 && set.count > 0)
        lc_queue_event(lh, &set, ev.type, ev.state, path);
    lc_wset_free(&set);
    free(full);
}

enum frame_verdict { FRAME_OK, FRAME_DROP, FRAME_STOP };

static enum frame_verdict on_auth_reply(struct larch *lh, struct conn *c, int32_t err)
{
    if (err == ZK_EAUTHFAILED) {
        lh->state = ZK_STATE_AUTH_FAILED;
        lc_session_event(lh, ZK_STATE_AUTH_FAILED, false);
        lc_fail_all(lh, ZK_EAUTHFAILED);
        return FRAME_STOP;
    }
    if (c->internal_auths > 0) {
        c->internal_auths--;
        return FRAME_OK;
    }
    struct lc_req *r = take_pending(lh, ZK_XID_AUTH);
    if (r == NULL)
        return FRAME_DROP;
    r->err = err;
    lc_complete(lh, r);
    return FRAME_OK;
}

static enum frame_verdict on_reply(struct larch *lh, struct zk_reply_header *h, struct base_rd *r)
{
    struct lc_req *req = take_pending(lh, h->xid);
    if (req == NULL)
        return FRAME_DROP; /* a reply to nothing we sent: the stream is not ours */
    req->err = h->err;
    size_t left = base_rd_left(r);
    if (left > 0) {
        req->body = malloc(left);
        if (req->body == NULL)
            req->err = ZK_ESYSTEMERROR;
        else
            memcpy(req->body, r->ptr + r->pos, left);
        req->body_len = req->body != NULL ? left : 0;
    }
    register_watch(lh, req);
    bool closed = req->kind == LC_CLOSE;
    bool moved = h->err == ZK_ESESSIONMOVED;
    lc_complete(lh, req);
    if (closed) {
        lh->state = ZK_STATE_CLOSED;
        return FRAME_STOP;
    }
    /* SESSIONMOVED: this connection no longer owns the session */
    return moved ? FRAME_DROP : FRAME_OK;
}

static enum frame_verdict on_frame(struct larch *lh, struct conn *c, const uint8_t *p, size_t len)
{
    struct base_rd r;
    struct zk_reply_header h;
    base_rd_init(&r, p, len);
    if (!zk_get_reply_header(&r, &h))
        return FRAME_DROP;
    if (h.zxid > 0 && h.zxid > lh->last_zxid)
        lh->last_zxid = h.zxid;
    switch (h.xid) {
    case ZK_XID_NOTIFICATION:
        on_notification(lh, &r);
        return FRAME_OK;
    case ZK_XID_PING:
    case ZK_XID_SETWATCHES:
        return FRAME_OK;
    case ZK_XID_AUTH:
        return on_auth_reply(lh, c, h.err);
    default:
        return on_reply(lh, &h, &r);
    }
}

static enum frame_verdict read_frames(struct larch *lh, struct conn *c)
{
    ssize_t n = read_some(c->fd, &c->in);
    if (n < 0)
        return FRAME_DROP;
    if (n > 0)
        c->last_recv_ms = base_mono_ms();
    enum frame_verdict v = FRAME_OK;
    pthread_mutex_lock(&lh->mu);
    for (int i = 0; v == FRAME_OK && i < 100000; i++) {
        int64_t flen = frame_ready(&c->in);
        if (flen < 0)
            v = FRAME_DROP;
        if (flen <= 0)
            break;
        v = on_frame(lh, c, c->in.data + 4, (size_t)flen);
        inbuf_consume(&c->in, 4 + (size_t)flen);
    }
    pthread_mutex_unlock(&lh->mu);
    return v;
}

static int write_some(struct conn *c)
{
    while (c->out_off < c->out.len) {
        ssize_t w = send(c->fd, c->out.p + c->out_off, c->out.len - c->out_off, MSG_NOSIGNAL);
        if (w < 0)
            return errno == EAGAIN || errno == EINTR ? 0 : -1;
        c->out_off += (size_t)w;
        c->last_send_ms = base_mono_ms();
    }
    zk_wbuf_reset(&c->out);
    c->out_off = 0;
    return 0;
}

static void drain_wake(struct larch *lh)
{
    char buf[64];
    while (read(lh->wake[0], buf, sizeof buf) > 0)
        ;
}

/* Serves one attached connection until it fails or the handle stops. */
static enum frame_verdict serve(struct larch *lh, struct conn *c)
{
    c->last_send_ms = c->last_recv_ms = base_mono_ms();
    for (;;) {
        pthread_mutex_lock(&lh->mu);
        bool stop = lh->stop_io, drop = lh->drop_conn;
        lh->drop_conn = false;
        int32_t timeout = lh->timeout_ms;
        if (!stop && !drop)
            take_sends(lh, c);
        pthread_mutex_unlock(&lh->mu);
        if (stop)
            return FRAME_STOP;
        if (drop || c->out.err)
            return FRAME_DROP;
        int64_t now = base_mono_ms();
        int64_t ping_at = c->last_send_ms + timeout / 3;
        int64_t dead_at = c->last_recv_ms + timeout * 2 / 3;
        if (now >= dead_at)
            return FRAME_DROP;
        if (now >= ping_at && c->out.len == 0) {
            queue_ping(c);
            ping_at = now + timeout / 3;
        }
        int64_t wait = (ping_at < dead_at ? ping_at : dead_at) - now;
        struct pollfd p[2] = {
            { .fd = c->fd, .events = POLLIN | (c->out.len > c->out_off ? POLLOUT : 0) },
            { .fd = lh->wake[0], .events = POLLIN },
        };
        int n = poll(p, 2, wait > 0 ? (int)wait : 0);
        if (n < 0 && errno != EINTR)
            return FRAME_DROP;
        if (n > 0 && (p[1].revents & POLLIN))
            drain_wake(lh);
        if (n > 0 && (p[0].revents & POLLOUT) && write_some(c) != 0)
            return FRAME_DROP;
        if (n > 0 && (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
            enum frame_verdict v = read_frames(lh, c);
            if (v != FRAME_OK)
                return v;
        }
        if (c->out.len > c->out_off && write_some(c) != 0)
            return FRAME_DROP;
    }
}

/* ---- the thread ------------------------------------------------------------------------ */

static void conn_reset(struct conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    zk_wbuf_reset(&c->out);
    c->out.err = false;
    c->out_off = 0;
    c->in.len = 0;
    c->internal_auths = 0;
}

/* After attaching: auth and watches first, then the SyncConnected event. */
static void on_attached(struct larch *lh, struct conn *c, const struct lc_host *h)
{
    pthread_mutex_lock(&lh->mu);
    snprintf(lh->server, sizeof lh->server, "%s:%s", h->name, h->port);
    queue_auths(lh, c);
    if (queue_set_watches(lh, c) != 0)
        c->out.err = true; /* out of memory: drop and try again */
    lc_session_event(lh, lh->state, false);
    pthread_cond_broadcast(&lh->cv);
    pthread_mutex_unlock(&lh->mu);
}

/* A connection ended: everything in flight fails, watchers hear of it. */
static void on_lost(struct larch *lh, bool was_attached)
{
    pthread_mutex_lock(&lh->mu);
    lh->server[0] = '\0';
    if (!state_terminal(lh->state))
        lh->state = LARCH_STATE_CONNECTING;
    if (was_attached && !state_terminal(lh->state) && !lh->stop_io)
        lc_session_event(lh, ZK_STATE_DISCONNECTED, false);
    lc_fail_all(lh, state_terminal(lh->state) && lh->state == ZK_STATE_CLOSED ? LARCH_ECLOSING
                                                                              : ZK_ECONNECTIONLOSS);
    pthread_cond_broadcast(&lh->cv);
    pthread_mutex_unlock(&lh->mu);
}

static void on_expired(struct larch *lh)
{
    pthread_mutex_lock(&lh->mu);
    lh->state = ZK_STATE_EXPIRED;
    lc_session_event(lh, ZK_STATE_EXPIRED, true);
    lc_fail_all(lh, ZK_ESESSIONEXPIRED);
    pthread_cond_broadcast(&lh->cv);
    pthread_mutex_unlock(&lh->mu);
}

/* Sleeps up to ms unless the handle stops first. mu held. */
static void backoff(struct larch *lh, int64_t ms)
{
    struct timespec ts = base_deadline(CLOCK_MONOTONIC, ms);
    if (!lh->stop_io)
        pthread_cond_timedwait(&lh->cv, &lh->mu, &ts);
}

/* One attempt on the next host. Returns false when the thread should end. */
static bool attempt(struct larch *lh, struct conn *c, size_t *failed_in_row)
{
    pthread_mutex_lock(&lh->mu);
    if (lh->stop_io || state_terminal(lh->state)) {
        pthread_mutex_unlock(&lh->mu);
        return false;
    }
    const struct lc_host *h = &lh->hosts.items[lh->host_next];
    lh->host_next = (lh->host_next + 1) % lh->hosts.count;
    int32_t t = lh->timeout_ms > 0 ? lh->timeout_ms : lh->requested_timeout_ms;
    int64_t budget = t / (int32_t)lh->hosts.count;
    pthread_mutex_unlock(&lh->mu);
    if (budget < CONNECT_TIMEOUT_MIN_MS)
        budget = CONNECT_TIMEOUT_MIN_MS;
    int64_t deadline = base_mono_ms() + budget;
    c->fd = dial(h, deadline);
    enum attach_result a = c->fd >= 0 ? handshake(lh, c, deadline) : ATTACH_FAILED;
    if (a == ATTACH_EXPIRED) {
        conn_reset(c);
        on_expired(lh);
        return false;
    }
    if (a == ATTACH_FAILED) {
        conn_reset(c);
        on_lost(lh, false);
        pthread_mutex_lock(&lh->mu);
        if (++*failed_in_row % lh->hosts.count == 0)
            backoff(lh, ROUND_BACKOFF_MS);
        pthread_mutex_unlock(&lh->mu);
        return true;
    }
    *failed_in_row = 0;
    on_attached(lh, c, h);
    enum frame_verdict v = serve(lh, c);
    conn_reset(c);
    on_lost(lh, true);
    return v != FRAME_STOP;
}

void *lc_io_main(void *arg)
{
    struct larch *lh = arg;
    struct conn c = { .fd = -1 };
    zk_wbuf_init(&c.out);
    size_t failed_in_row = 0;
    for (uint64_t i = 0; i < UINT64_MAX && attempt(lh, &c, &failed_in_row); i++)
        ;
    conn_reset(&c);
    zk_wbuf_free(&c.out);
    base_buf_free(&c.in);
    pthread_mutex_lock(&lh->mu);
    lc_fail_all(lh, lh->state == ZK_STATE_EXPIRED     ? ZK_ESESSIONEXPIRED
                    : lh->state == ZK_STATE_AUTH_FAILED ? ZK_EAUTHFAILED
                                                        : LARCH_ECLOSING);
    pthread_cond_broadcast(&lh->cv);
    pthread_mutex_unlock(&lh->mu);
    return NULL;
}

void lc_wake_io(struct larch *lh)
{
    char b = 1;
    ssize_t w = write(lh->wake[1], &b, 1);
    (void)w; /* a full pipe already holds a wake-up */
}
