/*
 * test_dataplane.c — the TCP front end's connection handling, driven
 * deterministically through the test seam (dp_int.h): a dataplane that is
 * created but not started, one worker run pass by pass on this thread, the
 * sequencer's rounds run inline by that worker, and clients on socketpairs.
 *
 * Each test is a hostile or heavy client from issue 8: pipelined writes
 * followed by a close (the use-after-free in the flush loop), more requests
 * in one send than globalOutstandingLimit, a stalled partial frame (the
 * sessionless deadline and the by-need input buffer), a client that does
 * not read (output high-water mark, slow-consumer close), memory pressure,
 * and the ACL check on watch notifications; a TLS connection whose
 * socket takes little at a time. Every test ends by closing everything
 * and checking the budget returns to zero.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <sys/epoll.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <urcu.h>

#include "dataplane/dp_int.h"
#include "tls_pki.h"

#define PASSES_MAX 20000 /* bound on every wait loop */

struct env {
    struct tree *t;
    struct seq *s;
    struct dp *dp;
    int next_port;
};

static struct env *env_new(const struct dp_cfg *over)
{
    struct env *e = calloc(1, sizeof(*e));
    assert_non_null(e);
    e->t = tree_new();
    assert_non_null(e->t);
    struct seq_cfg scfg = { .min_session_timeout_ms = 4000, .max_session_timeout_ms = 40000,
                            .container_check_ms = 60000, .ttl_enabled = true, .tick_ms = 1000,
                            .inline_rounds = true };
    e->s = seq_new(e->t, &scfg, 1);
    assert_non_null(e->s);
    struct dp_cfg cfg = over ? *over : (struct dp_cfg){ 0 };
    cfg.bind_addr = "127.0.0.1";
    cfg.port = 0;
    cfg.workers = 1;
    if (cfg.max_buffer_bytes == 0)
        cfg.max_buffer_bytes = ZK_MAX_BUFFER_DEFAULT;
    if (cfg.super_digest == NULL)
        cfg.super_digest = "";
    char err[256];
    e->dp = dp_new(&cfg, e->t, e->s, err, sizeof(err));
    if (!e->dp)
        fail_msg("dp_new: %s", err);
    e->next_port = 40000;
    return e;
}

static void env_free(struct env *e)
{
    dp_test_close_all(e->dp, 0);
    struct dp_stats st;
    dp_get_stats(e->dp, &st);
    assert_int_equal(st.connections, 0);
    assert_int_equal(st.buffered_bytes, 0);
    assert_int_equal(st.outstanding, 0);
    assert_int_equal(st.throttled_connections, 0);
    dp_free(e->dp);
    seq_free(e->s);
    rcu_barrier();
    tree_free(e->t);
    free(e);
}

/* A pass of the worker, then what the sequencer thread would do: run the
 * rounds the worker's own inline turns left queued. */
static void pump(struct env *e, int passes)
{
    for (int i = 0; i < passes; i++) {
        dp_test_pass(e->dp, 0);
        seq_run_inline(e->s);
    }
}

static struct dp_stats stats(struct env *e)
{
    struct dp_stats st;
    dp_get_stats(e->dp, &st);
    return st;
}

/* A client socket; the server end becomes a connection of worker 0. */
static int client_open(struct env *e, const char *ip)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    dp_test_adopt(e->dp, 0, sv[1], ip, e->next_port++);
    return sv[0];
}

/* Sends everything, running the server while the socket is full (the
 * replies it produces meanwhile stay unread in the client's socket). */
static void send_all(struct env *e, int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (int tries = 0; n > 0 && tries < PASSES_MAX; tries++) {
        ssize_t k = send(fd, b, n, MSG_NOSIGNAL);
        if (k > 0) {
            b += k;
            n -= (size_t)k;
        } else if (k < 0 && errno != EAGAIN && errno != EINTR) {
            fail_msg("send: %s", strerror(errno));
        } else {
            pump(e, 1);
        }
    }
    assert_int_equal(n, 0);
}

/* Client-side input, with the frames read so far. */
struct rx {
    uint8_t *buf;
    size_t len, cap;
    bool eof;
};

static void rx_poll(int fd, struct rx *r)
{
    for (;;) {
        assert_int_equal(base_grow(&r->buf, &r->cap, r->len + 65536, 1), 0);
        ssize_t k = recv(fd, r->buf + r->len, r->cap - r->len, 0);
        if (k > 0) {
            r->len += (size_t)k;
            continue;
        }
        if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR))
            r->eof = true;
        return;
    }
}

/* Takes the next whole frame (without its length) into *body, or false. */
static bool rx_frame(struct rx *r, struct base_rd *body, uint8_t **owned)
{
    if (r->len < 4)
        return false;
    uint32_t n = base_get_be32(r->buf);
    if (r->len - 4 < n)
        return false;
    *owned = malloc(n ? n : 1);
    memcpy(*owned, r->buf + 4, n);
    memmove(r->buf, r->buf + 4 + n, r->len - 4 - n);
    r->len -= 4 + n;
    base_rd_init(body, *owned, n);
    return true;
}

/* Pumps the server until the client has a frame; fails after the bound. */
static uint8_t *wait_frame(struct env *e, int fd, struct rx *r, struct base_rd *body)
{
    uint8_t *owned = NULL;
    for (int i = 0; i < PASSES_MAX; i++) {
        if (rx_frame(r, body, &owned))
            return owned;
        pump(e, 1);
        rx_poll(fd, r);
    }
    fail_msg("no frame from the server");
    return NULL;
}

static bool wait_eof(struct env *e, int fd, struct rx *r, int64_t max_ms)
{
    int64_t t0_ms = base_mono_ms();
    for (;;) {
        pump(e, 1);
        rx_poll(fd, r);
        if (r->eof)
            return true;
        if (base_mono_ms() - t0_ms > max_ms)
            return false;
        usleep(1000);
    }
}

/* ---- frames ------------------------------------------------------------- */

static void frame_connect(struct zk_wbuf *w)
{
    size_t m = zk_frame_begin(w);
    static const char pw[16];
    struct zk_connect_req q = { .timeout_ms = 10000, .passwd = { pw, 16 } };
    zk_put_connect_req(w, &q);
    zk_frame_end(w, m);
}

static void frame_request(struct zk_wbuf *w, int32_t xid, int32_t op, const struct zk_wbuf *body)
{
    size_t m = zk_frame_begin(w);
    struct zk_request_header h = { .xid = xid, .type = op };
    zk_put_request_header(w, &h);
    if (body)
        zk_put_raw(w, body->p, body->len);
    zk_frame_end(w, m);
}

static void frame_path_watch(struct zk_wbuf *w, int32_t xid, int32_t op, const char *path, bool watch)
{
    struct zk_wbuf b;
    zk_wbuf_init(&b);
    struct zk_path_watch_req q = { .path = zk_str_c(path), .watch = watch };
    zk_put_path_watch_req(&b, &q);
    frame_request(w, xid, op, &b);
    zk_wbuf_free(&b);
}

static void frame_set_data(struct zk_wbuf *w, int32_t xid, const char *path, size_t len)
{
    struct zk_wbuf b;
    zk_wbuf_init(&b);
    char *data = calloc(1, len ? len : 1);
    struct zk_setdata_req q = { .path = zk_str_c(path), .data = { data, (int32_t)len }, .version = -1 };
    zk_put_setdata_req(&b, &q);
    frame_request(w, xid, ZK_OP_SETDATA, &b);
    free(data);
    zk_wbuf_free(&b);
}

static void frame_create(struct zk_wbuf *w, int32_t xid, const char *path, size_t len,
                         const struct zk_aclvec *acl)
{
    struct zk_wbuf b;
    zk_wbuf_init(&b);
    char *data = calloc(1, len ? len : 1);
    static struct zk_acl open_items[1] = { { ZK_PERM_ALL, { { "world", 5 }, { "anyone", 6 } } } };
    static const struct zk_aclvec open_acl = { 1, open_items };
    struct zk_create_req q = { .path = zk_str_c(path), .data = { data, (int32_t)len },
                               .acl = acl ? *acl : open_acl, .flags = ZK_PERSISTENT };
    zk_put_create_req(&b, &q, false);
    frame_request(w, xid, ZK_OP_CREATE, &b);
    free(data);
    zk_wbuf_free(&b);
}

static void frame_add_watch(struct zk_wbuf *w, int32_t xid, const char *path, int32_t mode)
{
    struct zk_wbuf b;
    zk_wbuf_init(&b);
    struct zk_path_mode_req q = { .path = zk_str_c(path), .mode = mode };
    zk_put_path_mode_req(&b, &q);
    frame_request(w, xid, ZK_OP_ADDWATCH, &b);
    zk_wbuf_free(&b);
}

static void frame_auth(struct zk_wbuf *w, const char *scheme, const char *cred)
{
    struct zk_wbuf b;
    zk_wbuf_init(&b);
    struct zk_auth_packet a = { .type = 0, .scheme = zk_str_c(scheme), .auth = zk_str_c(cred) };
    zk_put_auth_packet(&b, &a);
    frame_request(w, ZK_XID_AUTH, ZK_OP_AUTH, &b);
    zk_wbuf_free(&b);
}

static void send_wbuf(struct env *e, int fd, struct zk_wbuf *w)
{
    assert_false(w->err);
    send_all(e, fd, w->p, w->len);
    zk_wbuf_reset(w);
}

/* A client with an open session; its id and password into *sid and pw
 * when they are not NULL. */
static int session_open_as(struct env *e, struct rx *r, int64_t *sid, uint8_t pw[16])
{
    int fd = client_open(e, "127.0.0.1");
    struct zk_wbuf w;
    zk_wbuf_init(&w);
    frame_connect(&w);
    send_wbuf(e, fd, &w);
    zk_wbuf_free(&w);
    struct base_rd body;
    uint8_t *f = wait_frame(e, fd, r, &body);
    struct zk_connect_resp resp;
    assert_true(zk_get_connect_resp(&body, &resp));
    assert_true(resp.timeout_ms > 0);
    if (sid)
        *sid = resp.session_id;
    if (pw) {
        assert_int_equal(resp.passwd.len, 16);
        memcpy(pw, resp.passwd.ptr, 16);
    }
    free(f);
    return fd;
}

static int session_open(struct env *e, struct rx *r)
{
    return session_open_as(e, r, NULL, NULL);
}

/* Reads the next reply (skipping notifications when skip_events). */
static struct zk_reply_header next_reply(struct env *e, int fd, struct rx *r, bool skip_events)
{
    for (;;) {
        struct base_rd body;
        uint8_t *f = wait_frame(e, fd, r, &body);
        struct zk_reply_header h;
        assert_true(zk_get_reply_header(&body, &h));
        free(f);
        if (!skip_events || h.xid != ZK_XID_NOTIFICATION)
            return h;
    }
}

/* ---- tests --------------------------------------------------------------- */

/* Issue 8 defect 1: a send error inside the flush loop closed the connection,
 * which put it back on the list being walked, and the loop freed it twice. */
static void test_pipelined_writes_then_close(void **state)
{
    struct env *e = env_new(NULL);
    for (int round = 0; round < 6; round++) {
        struct rx r = { 0 };
        int fd = session_open(e, &r);
        struct zk_wbuf w;
        zk_wbuf_init(&w);
        for (int i = 0; i < 8; i++)
            frame_set_data(&w, i + 1, "/", 100000);
        send_wbuf(e, fd, &w);
        if (round % 2 == 1) {
            struct linger lg = { .l_onoff = 1, .l_linger = 0 };
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        }
        close(fd); /* before reading any reply */
        zk_wbuf_free(&w);
        free(r.buf);
        pump(e, 50);
        assert_int_equal(stats(e).connections, 0);
    }
    env_free(e);
}

/* Defect 5: a send of more requests than the pause threshold stalled, as
 * resuming never parsed the bytes already read. All must be answered. */
static void test_more_pipelined_than_outstanding_limit(void **state)
{
    struct dp_cfg cfg = { .max_outstanding = 100 };
    struct env *e = env_new(&cfg);
    struct rx r = { 0 };
    int fd = session_open(e, &r);
    struct zk_wbuf w;
    zk_wbuf_init(&w);
    enum { N = 2000 };
    for (int i = 0; i < N; i++) {
        if (i % 2)
            frame_set_data(&w, i + 1, "/", 8);
        else
            frame_path_watch(&w, i + 1, ZK_OP_EXISTS, "/zookeeper", false);
    }
    /* one send: the server must not need more bytes to answer everything */
    size_t off = 0;
    for (int pass = 0; pass < PASSES_MAX && off < w.len; pass++) {
        ssize_t k = send(fd, w.p + off, w.len - off, MSG_NOSIGNAL);
        if (k > 0)
            off += (size_t)k;
        pump(e, 1);
        rx_poll(fd, &r);
    }
    assert_int_equal(off, w.len);
    for (int i = 0; i < N; i++) {
        struct zk_reply_header h = next_reply(e, fd, &r, false);
        assert_int_equal(h.xid, i + 1);
        assert_int_equal(h.err, ZK_OK);
    }
    assert_true(stats(e).throttle_events > 0);
    zk_wbuf_free(&w);
    close(fd);
    free(r.buf);
    env_free(e);
}

/* Defect 7: a partial ConnectRequest claiming 1 MiB holds only the bytes
 * that arrived, and the connection goes after the sessionless timeout. */
static void test_stalled_handshake_is_closed(void **state)
{
    struct dp_cfg cfg = { .sessionless_timeout_ms = 100 };
    struct env *e = env_new(&cfg);
    int fds[20];
    for (int i = 0; i < 20; i++) {
        fds[i] = client_open(e, "127.0.0.1");
        uint8_t partial[14] = { 0x00, 0x0f, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 };
        send_all(e, fds[i], partial, sizeof(partial));
    }
    pump(e, 5);
    struct dp_stats st = stats(e);
    assert_int_equal(st.connections, 20);
    assert_true(st.buffered_bytes <= 20 * 1024); /* not 20 x 1 MiB */
    for (int i = 0; i < 20; i++) {
        struct rx r = { 0 };
        assert_true(wait_eof(e, fds[i], &r, 3000));
        free(r.buf);
        close(fds[i]);
    }
    pump(e, 5);
    st = stats(e);
    assert_int_equal(st.connections, 0);
    assert_int_equal(st.sessionless_timeouts, 20);
    env_free(e);
}

/* A client that asks for big replies and does not read holds at most its
 * high-water mark of output (plus one reply); reading it all back later
 * gets every reply, in order. */
static void test_output_high_water_pauses_requests(void **state)
{
    struct dp_cfg cfg = { .conn_out_high_water_bytes = 64 << 10 };
    struct env *e = env_new(&cfg);
    struct rx r = { 0 };
    int fd = session_open(e, &r);
    struct zk_wbuf w;
    zk_wbuf_init(&w);
    frame_create(&w, 1, "/big", 32 << 10, NULL);
    send_wbuf(e, fd, &w);
    assert_int_equal(next_reply(e, fd, &r, false).err, ZK_OK);
    enum { N = 300 };
    for (int i = 0; i < N; i++)
        frame_path_watch(&w, i + 2, ZK_OP_GETDATA, "/big", false);
    send_wbuf(e, fd, &w);
    pump(e, 200);
    struct dp_stats st = stats(e);
    /* the kernel holds some of it; larchd holds at most ~2 high-water marks */
    assert_true(st.buffered_bytes < 4 * (64 << 10) + 32 * 1024);
    assert_true(st.throttle_events > 0);
    for (int i = 0; i < N; i++) {
        struct zk_reply_header h = next_reply(e, fd, &r, false);
        assert_int_equal(h.xid, i + 2);
        assert_int_equal(h.err, ZK_OK);
    }
    zk_wbuf_free(&w);
    close(fd);
    free(r.buf);
    env_free(e);
}

/* A watcher that never reads its notifications is closed once its unsent
 * output passes conn_max_unsent_bytes. */
static void test_slow_consumer_is_closed(void **state)
{
    struct dp_cfg cfg = { .conn_out_high_water_bytes = 16 << 10, .conn_max_unsent_bytes = 64 << 10 };
    struct env *e = env_new(&cfg);
    struct rx rw = { 0 }, rs = { 0 };
    int watcher = session_open(e, &rw);
    struct zk_wbuf w;
    zk_wbuf_init(&w);
    frame_add_watch(&w, 1, "/", ZK_ADD_WATCH_PERSISTENT_RECURSIVE);
    send_wbuf(e, watcher, &w);
    assert_int_equal(next_reply(e, watcher, &rw, false).err, ZK_OK);
    int writer = session_open(e, &rs);
    char path[64];
    /* long paths make long notifications: the watcher's socket buffer fills */
    for (int i = 0; i < 3000 && stats(e).slow_consumer_closes == 0; i++) {
        snprintf(path, sizeof(path), "/n%04d%0*d", i, 40, 0);
        frame_create(&w, i + 10, path, 0, NULL);
        send_wbuf(e, writer, &w);
        assert_int_equal(next_reply(e, writer, &rs, true).err, ZK_OK);
    }
    assert_int_equal(stats(e).slow_consumer_closes, 1);
    assert_true(wait_eof(e, watcher, &rw, 2000));
    assert_int_equal(stats(e).connections, 1);
    zk_wbuf_free(&w);
    close(watcher);
    close(writer);
    free(rw.buf);
    free(rs.buf);
    env_free(e);
}

/* Memory pressure: many connections each holding big unsent replies push
 * the total over max_buffered_bytes; heavy ones stop being read, the total
 * stays bounded, and everything is answered once the clients read. */
static void test_memory_pressure_bounds_total(void **state)
{
    struct dp_cfg cfg = { .max_buffered_bytes = 4 << 20, .conn_out_high_water_bytes = 1 << 20 };
    struct env *e = env_new(&cfg);
    struct rx r0 = { 0 };
    int setup_fd = session_open(e, &r0);
    struct zk_wbuf w;
    zk_wbuf_init(&w);
    frame_create(&w, 1, "/big", 500 << 10, NULL);
    send_wbuf(e, setup_fd, &w);
    assert_int_equal(next_reply(e, setup_fd, &r0, false).err, ZK_OK);
    enum { CONNS = 16, REQS = 6 };
    int fds[CONNS];
    struct rx rx[CONNS];
    memset(rx, 0, sizeof(rx));
    for (int c = 0; c < CONNS; c++) {
        fds[c] = session_open(e, &rx[c]);
        for (int i = 0; i < REQS; i++)
            frame_path_watch(&w, i + 1, ZK_OP_GETDATA, "/big", false);
        send_wbuf(e, fds[c], &w);
    }
    size_t peak = 0;
    for (int i = 0; i < 300; i++) {
        pump(e, 1);
        size_t b = stats(e).buffered_bytes;
        peak = b > peak ? b : peak;
    }
    struct dp_stats st = stats(e);
    assert_true(st.memory_pressure || st.throttle_events > 0);
    /* the limit, plus one reply (and its buffer's doubling slack) per connection */
    assert_true(peak < (size_t)(4 << 20) + CONNS * (size_t)(1 << 20));
    for (int c = 0; c < CONNS; c++)
        for (int i = 0; i < REQS; i++)
            assert_int_equal(next_reply(e, fds[c], &rx[c], false).xid, i + 1);
    pump(e, 10);
    assert_false(stats(e).memory_pressure);
    for (int c = 0; c < CONNS; c++) {
        close(fds[c]);
        free(rx[c].buf);
    }
    zk_wbuf_free(&w);
    close(setup_fd);
    free(r0.buf);
    env_free(e);
}

/* CVE-2024-23944 class: a recursive watch on "/" hears of nodes the
 * watcher may read, never of nodes under a parent whose ACL hides them. */
static void test_watch_events_respect_acl(void **state)
{
    struct env *e = env_new(NULL);
    struct rx ra = { 0 }, rb = { 0 };
    int anon = session_open(e, &ra);
    int owner = session_open(e, &rb);
    struct zk_wbuf w;
    zk_wbuf_init(&w);
    frame_add_watch(&w, 1, "/", ZK_ADD_WATCH_PERSISTENT_RECURSIVE);
    send_wbuf(e, anon, &w);
    assert_int_equal(next_reply(e, anon, &ra, false).err, ZK_OK);

    frame_auth(&w, "digest", "user:pw");
    send_wbuf(e, owner, &w);
    assert_int_equal(next_reply(e, owner, &rb, false).err, ZK_OK);
    char digest[29];
    zk_digest_of("user:pw", 7, digest);
    char id[64];
    snprintf(id, sizeof(id), "user:%s", digest);
    struct zk_acl items[1] = { { ZK_PERM_ALL, { zk_str_c("digest"), zk_str_c(id) } } };
    struct zk_aclvec secret = { 1, items };
    frame_create(&w, 2, "/secret", 1, &secret);
    frame_create(&w, 3, "/secret/child", 1, &secret);
    frame_set_data(&w, 4, "/secret/child", 3);
    frame_create(&w, 5, "/open", 1, NULL);
    send_wbuf(e, owner, &w);
    for (int i = 0; i < 4; i++)
        assert_int_equal(next_reply(e, owner, &rb, true).err, ZK_OK);
    /* The anonymous watcher hears of /open (and of / gaining children, as
     * "/" is open), never of anything under /secret or of /secret itself. */
    bool heard_open = false;
    for (int i = 0; i < 200 && !heard_open; i++) {
        pump(e, 1);
        rx_poll(anon, &ra);
        struct base_rd body;
        uint8_t *f;
        while (rx_frame(&ra, &body, &f)) {
            struct zk_reply_header h;
            struct zk_watcher_event ev;
            assert_true(zk_get_reply_header(&body, &h));
            assert_int_equal(h.xid, ZK_XID_NOTIFICATION);
            assert_true(zk_get_watcher_event(&body, &ev));
            assert_false(ev.path.len >= 7 && memcmp(ev.path.ptr, "/secret", 7) == 0);
            heard_open = heard_open || (ev.path.len == 5 && memcmp(ev.path.ptr, "/open", 5) == 0);
            free(f);
        }
    }
    assert_true(heard_open);
    zk_wbuf_free(&w);
    close(anon);
    close(owner);
    free(ra.buf);
    free(rb.buf);
    env_free(e);
}

/* addauth ip is accepted (ZooKeeper's IPAuthenticationProvider), and a
 * ConnectRequest with a 40-byte password gets an answer, not a close. */
static void test_auth_ip_and_long_password(void **state)
{
    struct env *e = env_new(NULL);
    struct rx r = { 0 };
    int fd = session_open(e, &r);
    struct zk_wbuf w;
    zk_wbuf_init(&w);
    frame_auth(&w, "ip", "anything");
    frame_path_watch(&w, 7, ZK_OP_EXISTS, "/", false);
    send_wbuf(e, fd, &w);
    struct zk_reply_header h = next_reply(e, fd, &r, false);
    assert_int_equal(h.xid, ZK_XID_AUTH);
    assert_int_equal(h.err, ZK_OK);
    assert_int_equal(next_reply(e, fd, &r, false).xid, 7);

    struct rx r2 = { 0 };
    int fd2 = client_open(e, "127.0.0.1");
    size_t m = zk_frame_begin(&w);
    char pw[40] = { 0 };
    struct zk_connect_req q = { .timeout_ms = 10000, .session_id = 12345, .passwd = { pw, 40 } };
    zk_put_connect_req(&w, &q);
    zk_frame_end(&w, m);
    send_wbuf(e, fd2, &w);
    struct base_rd body;
    uint8_t *f = wait_frame(e, fd2, &r2, &body);
    struct zk_connect_resp resp;
    assert_true(zk_get_connect_resp(&body, &resp));
    assert_int_equal(resp.timeout_ms, 0);
    free(f);
    assert_true(wait_eof(e, fd2, &r2, 2000));
    zk_wbuf_free(&w);
    close(fd);
    close(fd2);
    free(r.buf);
    free(r2.buf);
    env_free(e);
}

/* maxCnxns refuses the connection over the server-wide count. */
static void test_max_cnxns(void **state)
{
    struct dp_cfg cfg = { .max_cnxns = 3 };
    struct env *e = env_new(&cfg);
    int fds[4];
    for (int i = 0; i < 4; i++)
        fds[i] = client_open(e, i % 2 ? "127.0.0.2" : "127.0.0.1");
    struct dp_stats st = stats(e);
    assert_int_equal(st.connections, 3);
    assert_int_equal(st.connections_refused, 1);
    struct rx r = { 0 };
    assert_true(wait_eof(e, fds[3], &r, 1000));
    free(r.buf);
    for (int i = 0; i < 4; i++)
        close(fds[i]);
    pump(e, 5);
    env_free(e);
}

/* ---- the UDP read path's packet handler (dataplane/UDP.md) --------------- */

#define UDP_MAX 65507

/* A request datagram: the header, record, pad zero bytes; signed with pw
 * (the session's password) when pw is not NULL. */
static size_t udp_request(uint8_t *buf, uint64_t rid, int64_t min_zxid, int64_t sid,
                          const uint8_t *pw, int32_t op, const struct zk_wbuf *record, size_t pad)
{
    memset(buf, 0, ZK_UDP_REQUEST_HEADER_BYTES);
    base_put_be32(buf, ZK_UDP_MAGIC);
    buf[4] = ZK_UDP_VERSION;
    buf[5] = pw ? ZK_UDP_FLAG_SESSION : 0;
    base_put_be16(buf + 6, ZK_UDP_REQUEST_HEADER_BYTES);
    base_put_be64(buf + 8, rid);
    base_put_be64(buf + 16, (uint64_t)min_zxid);
    base_put_be64(buf + 24, (uint64_t)sid);
    base_put_be32(buf + 32, (uint32_t)op);
    size_t n = ZK_UDP_REQUEST_HEADER_BYTES;
    if (record) {
        memcpy(buf + n, record->p, record->len);
        n += record->len;
    }
    memset(buf + n, 0, pad);
    n += pad;
    if (pw) /* the MAC field is still zero: what the MAC covers */
        base_put_be64(buf + 40, base_siphash24(pw, buf, n));
    return n;
}

static size_t udp_path_request(uint8_t *buf, uint64_t rid, int32_t op, const char *path, bool watch,
                               int64_t sid, const uint8_t *pw)
{
    struct zk_wbuf b;
    zk_wbuf_init(&b);
    if (op == ZK_OP_GETALLCHILDRENNUMBER) {
        zk_put_str(&b, zk_str_c(path));
    } else {
        struct zk_path_watch_req q = { .path = zk_str_c(path), .watch = watch };
        zk_put_path_watch_req(&b, &q);
    }
    size_t n = udp_request(buf, rid, 0, sid, pw, op, &b, 0);
    zk_wbuf_free(&b);
    return n;
}

struct udp_reply {
    uint64_t rid;
    uint8_t flags;
    int32_t status;
    uint32_t detail;
    struct zk_reply_header h;
    struct base_rd rec; /* the record, if any */
};

/* One datagram through the handler from ip (an IPv4 or IPv6 literal), as a
 * back end calls it: the address as bytes, inside a read-side section. */
static size_t udp_call(struct env *e, const uint8_t *req, size_t n, const char *ip, size_t max,
                       struct zk_wbuf *out, struct dp_udp_counters *ctr)
{
    struct tree_addr peer = { .len = 4 };
    if (inet_pton(AF_INET, ip, peer.b) != 1) {
        peer.len = 16;
        assert_int_equal(inet_pton(AF_INET6, ip, peer.b), 1);
    }
    rcu_read_lock();
    size_t len = dp_udp_handle(e->dp, req, n, &peer, max, out, ctr);
    rcu_read_unlock();
    return len;
}

/* Sends req through the handler; fails the test when it is dropped. */
static struct udp_reply udp_ask(struct env *e, const uint8_t *req, size_t n, const char *ip,
                                size_t max, struct zk_wbuf *out, struct dp_udp_counters *ctr)
{
    size_t len = udp_call(e, req, n, ip, max, out, ctr);
    assert_true(len > 0);
    assert_int_equal(len, out->len);
    assert_true(len <= max);
    assert_true(len <= 3 * n);
    struct base_rd r;
    base_rd_init(&r, out->p, len);
    struct udp_reply u;
    assert_int_equal(base_rd_be32(&r), ZK_UDP_MAGIC);
    assert_int_equal(base_rd_u8(&r), ZK_UDP_VERSION);
    u.flags = base_rd_u8(&r);
    assert_true(u.flags & ZK_UDP_FLAG_REPLY);
    assert_int_equal(base_rd_be16(&r), ZK_UDP_REPLY_HEADER_BYTES);
    u.rid = base_rd_be64(&r);
    u.status = (int32_t)base_rd_be32(&r);
    u.detail = base_rd_be32(&r);
    assert_true(zk_get_reply_header(&r, &u.h));
    assert_false(r.err);
    u.rec = r;
    if (u.status != ZK_UDP_OK || u.h.err != ZK_OK)
        assert_int_equal(base_rd_left(&r), 0); /* only a successful read has a record */
    return u;
}

static int64_t last_zxid(struct env *e)
{
    rcu_read_lock();
    int64_t z = tree_last_zxid(e->t);
    rcu_read_unlock();
    return z;
}

/* Every read op over UDP, anonymously, against nodes made over TCP. */
static void test_udp_every_read_op(void **state)
{
    struct env *e = env_new(NULL);
    struct rx r = { 0 };
    int fd = session_open(e, &r);
    struct zk_wbuf w, out;
    zk_wbuf_init(&w);
    zk_wbuf_init(&out);
    frame_create(&w, 1, "/u", 5, NULL);
    frame_create(&w, 2, "/u/a", 0, NULL);
    frame_create(&w, 3, "/u/b", 0, NULL);
    send_wbuf(e, fd, &w);
    for (int i = 0; i < 3; i++)
        assert_int_equal(next_reply(e, fd, &r, true).err, ZK_OK);
    struct dp_udp_counters ctr = { 0 };
    uint8_t req[512];

    struct udp_reply u = udp_ask(e, req, udp_path_request(req, 77, ZK_OP_GETDATA, "/u", false, 0, NULL),
                                 "127.0.0.1", UDP_MAX, &out, &ctr);
    assert_int_equal(u.rid, 77);
    assert_int_equal(u.status, ZK_UDP_OK);
    assert_int_equal(u.h.err, ZK_OK);
    assert_int_equal(u.h.zxid, last_zxid(e));
    struct zk_str data;
    struct zk_stat st;
    assert_true(zk_get_str(&u.rec, &data));
    assert_int_equal(data.len, 5);
    assert_true(zk_get_stat(&u.rec, &st));
    assert_int_equal(st.num_children, 2);
    assert_int_equal(base_rd_left(&u.rec), 0);

    u = udp_ask(e, req, udp_path_request(req, 78, ZK_OP_EXISTS, "/u", false, 0, NULL), "127.0.0.1",
                UDP_MAX, &out, &ctr);
    assert_int_equal(u.h.err, ZK_OK);
    assert_true(zk_get_stat(&u.rec, &st));
    assert_int_equal(st.data_length, 5);
    u = udp_ask(e, req, udp_path_request(req, 79, ZK_OP_EXISTS, "/nope", false, 0, NULL),
                "127.0.0.1", UDP_MAX, &out, &ctr);
    assert_int_equal(u.status, ZK_UDP_OK);
    assert_int_equal(u.h.err, ZK_ENONODE);

    u = udp_ask(e, req, udp_path_request(req, 80, ZK_OP_GETCHILDREN2, "/u", false, 0, NULL),
                "127.0.0.1", UDP_MAX, &out, &ctr);
    assert_int_equal(u.h.err, ZK_OK);
    struct zk_strvec kids;
    assert_true(zk_get_strvec(&u.rec, &kids));
    assert_int_equal(kids.count, 2);
    zk_strvec_free(&kids);
    assert_true(zk_get_stat(&u.rec, &st));
    assert_int_equal(base_rd_left(&u.rec), 0);
    u = udp_ask(e, req, udp_path_request(req, 81, ZK_OP_GETCHILDREN, "/u", false, 0, NULL),
                "127.0.0.1", UDP_MAX, &out, &ctr);
    assert_true(zk_get_strvec(&u.rec, &kids));
    assert_int_equal(kids.count, 2);
    zk_strvec_free(&kids);
    assert_int_equal(base_rd_left(&u.rec), 0);

    u = udp_ask(e, req, udp_path_request(req, 82, ZK_OP_GETALLCHILDRENNUMBER, "/u", false, 0, NULL),
                "127.0.0.1", UDP_MAX, &out, &ctr);
    assert_int_equal(u.h.err, ZK_OK);
    assert_int_equal((int32_t)base_rd_be32(&u.rec), 2);

    /* multiRead: a getData that works and a getChildren that does not */
    struct zk_wbuf m;
    zk_wbuf_init(&m);
    struct zk_multi_header mh = { .type = ZK_OP_GETDATA, .done = false, .err = -1 };
    zk_put_multi_header(&m, &mh);
    struct zk_path_watch_req q = { .path = zk_str_c("/u"), .watch = false };
    zk_put_path_watch_req(&m, &q);
    mh.type = ZK_OP_GETCHILDREN;
    zk_put_multi_header(&m, &mh);
    q.path = zk_str_c("/nope");
    zk_put_path_watch_req(&m, &q);
    zk_put_multi_end(&m);
    u = udp_ask(e, req, udp_request(req, 83, 0, 0, NULL, ZK_OP_MULTIREAD, &m, 0), "127.0.0.1",
                UDP_MAX, &out, &ctr);
    assert_int_equal(u.status, ZK_UDP_OK);
    assert_int_equal(u.h.err, ZK_OK);
    assert_true(zk_get_multi_header(&u.rec, &mh));
    assert_int_equal(mh.type, ZK_OP_GETDATA);
    assert_true(zk_get_str(&u.rec, &data));
    assert_true(zk_get_stat(&u.rec, &st));
    assert_true(zk_get_multi_header(&u.rec, &mh));
    assert_int_equal(mh.type, ZK_OP_ERROR);
    assert_int_equal((int32_t)base_rd_be32(&u.rec), ZK_ENONODE);
    assert_true(zk_get_multi_header(&u.rec, &mh));
    assert_true(mh.done);
    zk_wbuf_free(&m);

    assert_int_equal(ctr.datagrams, 7);
    assert_int_equal(ctr.answered[ZK_UDP_OK], 7);
    zk_wbuf_free(&w);
    zk_wbuf_free(&out);
    close(fd);
    free(r.buf);
    env_free(e);
}

/* Whose identity a read has: world and the source address without a
 * session; a signed session adds what its connection authenticated with,
 * for as long as that connection is attached. A wrong MAC or an unknown
 * session gets nothing. */
static void test_udp_identity_and_mac(void **state)
{
    struct env *e = env_new(NULL);
    struct rx r = { 0 };
    int64_t sid;
    uint8_t pw[16];
    int fd = session_open_as(e, &r, &sid, pw);
    struct zk_wbuf w, out;
    zk_wbuf_init(&w);
    zk_wbuf_init(&out);
    frame_auth(&w, "digest", "user:pw");
    send_wbuf(e, fd, &w);
    assert_int_equal(next_reply(e, fd, &r, false).err, ZK_OK);
    char digest[29], id[64];
    zk_digest_of("user:pw", 7, digest);
    snprintf(id, sizeof id, "user:%s", digest);
    struct zk_acl mine[1] = { { ZK_PERM_READ, { zk_str_c("digest"), zk_str_c(id) } } };
    struct zk_aclvec secret = { 1, mine };
    struct zk_acl local[1] = { { ZK_PERM_READ, { zk_str_c("ip"), zk_str_c("198.18.0.0/15") } } };
    struct zk_aclvec by_ip = { 1, local };
    frame_create(&w, 1, "/secret", 2, &secret);
    frame_create(&w, 2, "/lab", 2, &by_ip);
    send_wbuf(e, fd, &w);
    for (int i = 0; i < 2; i++)
        assert_int_equal(next_reply(e, fd, &r, true).err, ZK_OK);
    struct dp_udp_counters ctr = { 0 };
    uint8_t req[512];
    size_t n;

    n = udp_path_request(req, 1, ZK_OP_GETDATA, "/secret", false, 0, NULL);
    assert_int_equal(udp_ask(e, req, n, "127.0.0.1", UDP_MAX, &out, &ctr).h.err, ZK_ENOAUTH);
    n = udp_path_request(req, 2, ZK_OP_GETDATA, "/secret", false, sid, pw);
    struct udp_reply u = udp_ask(e, req, n, "127.0.0.1", UDP_MAX, &out, &ctr);
    assert_int_equal(u.status, ZK_UDP_OK);
    assert_int_equal(u.h.err, ZK_OK);
    assert_true(u.flags & ZK_UDP_FLAG_SESSION);
    n = udp_path_request(req, 3, ZK_OP_GETDATA, "/lab", false, 0, NULL);
    assert_int_equal(udp_ask(e, req, n, "127.0.0.1", UDP_MAX, &out, &ctr).h.err, ZK_ENOAUTH);
    assert_int_equal(udp_ask(e, req, n, "198.18.7.9", UDP_MAX, &out, &ctr).h.err, ZK_OK);

    /* every byte counts: a flipped record bit, a wrong key */
    n = udp_path_request(req, 4, ZK_OP_GETDATA, "/secret", false, sid, pw);
    req[n - 1] ^= 1;
    assert_int_equal(udp_ask(e, req, n, "127.0.0.1", UDP_MAX, &out, &ctr).status, ZK_UDP_BAD_MAC);
    uint8_t other[16];
    memcpy(other, pw, 16);
    other[15] ^= 0x80;
    n = udp_path_request(req, 5, ZK_OP_GETDATA, "/secret", false, sid, other);
    assert_int_equal(udp_ask(e, req, n, "127.0.0.1", UDP_MAX, &out, &ctr).status, ZK_UDP_BAD_MAC);
    n = udp_path_request(req, 6, ZK_OP_GETDATA, "/secret", false, sid + 1, pw);
    u = udp_ask(e, req, n, "127.0.0.1", UDP_MAX, &out, &ctr);
    assert_int_equal(u.status, ZK_UDP_NO_SESSION);
    assert_int_equal(u.h.zxid, last_zxid(e));

    /* the connection goes (the session lives on): its identities go with it */
    close(fd);
    for (int i = 0; i < 50; i++)
        pump(e, 1);
    n = udp_path_request(req, 7, ZK_OP_GETDATA, "/secret", false, sid, pw);
    u = udp_ask(e, req, n, "127.0.0.1", UDP_MAX, &out, &ctr);
    assert_int_equal(u.status, ZK_UDP_OK);
    assert_int_equal(u.h.err, ZK_ENOAUTH);

    assert_int_equal(ctr.answered[ZK_UDP_BAD_MAC], 2);
    assert_int_equal(ctr.answered[ZK_UDP_NO_SESSION], 1);
    zk_wbuf_free(&w);
    zk_wbuf_free(&out);
    free(r.buf);
    env_free(e);
}

/* Datagrams that are not requests are dropped; requests this path does not
 * serve get the status UDP.md names, and nothing is read. */
static void test_udp_bad_datagrams(void **state)
{
    struct env *e = env_new(NULL);
    struct zk_wbuf out;
    zk_wbuf_init(&out);
    struct dp_udp_counters ctr = { 0 };
    uint8_t req[512];
    size_t n = udp_path_request(req, 9, ZK_OP_GETDATA, "/", false, 0, NULL);

    for (size_t cut = 0; cut < ZK_UDP_REQUEST_HEADER_BYTES; cut++)
        assert_int_equal(udp_call(e, req, cut, "127.0.0.1", UDP_MAX, &out, &ctr), 0);
    assert_int_equal(ctr.dropped[DP_UDP_DROP_SHORT], ZK_UDP_REQUEST_HEADER_BYTES);
    req[0] ^= 0xff;
    assert_int_equal(udp_call(e, req, n, "127.0.0.1", UDP_MAX, &out, &ctr), 0);
    req[0] ^= 0xff;
    assert_int_equal(ctr.dropped[DP_UDP_DROP_MAGIC], 1);
    req[5] = ZK_UDP_FLAG_REPLY;
    assert_int_equal(udp_call(e, req, n, "127.0.0.1", UDP_MAX, &out, &ctr), 0);
    assert_int_equal(ctr.dropped[DP_UDP_DROP_REPLY], 1);
    req[5] = 0;
    base_put_be16(req + 6, 50);
    assert_int_equal(udp_call(e, req, n, "127.0.0.1", UDP_MAX, &out, &ctr), 0);
    assert_int_equal(ctr.dropped[DP_UDP_DROP_HEADER], 1);
    base_put_be16(req + 6, ZK_UDP_REQUEST_HEADER_BYTES);

    req[4] = 2;
    assert_int_equal(udp_ask(e, req, n, "127.0.0.1", UDP_MAX, &out, &ctr).status, ZK_UDP_BAD_VERSION);
    req[4] = ZK_UDP_VERSION;
    req[5] = 0x02;
    assert_int_equal(udp_ask(e, req, n, "127.0.0.1", UDP_MAX, &out, &ctr).status, ZK_UDP_BAD_VERSION);
    req[5] = 0;
    req[39] = 1; /* reserved */
    assert_int_equal(udp_ask(e, req, n, "127.0.0.1", UDP_MAX, &out, &ctr).status, ZK_UDP_BAD_REQUEST);
    req[39] = 0;
    req[31] = 1; /* a session id without the flag */
    assert_int_equal(udp_ask(e, req, n, "127.0.0.1", UDP_MAX, &out, &ctr).status, ZK_UDP_BAD_REQUEST);
    req[31] = 0;
    assert_int_equal(udp_ask(e, req, n, "127.0.0.1", UDP_MAX, &out, &ctr).status, ZK_UDP_OK);

    /* ops and flags only TCP serves, records that do not parse, padding */
    size_t m = udp_path_request(req, 10, ZK_OP_SETDATA, "/", false, 0, NULL);
    assert_int_equal(udp_ask(e, req, m, "127.0.0.1", UDP_MAX, &out, &ctr).status, ZK_UDP_BAD_REQUEST);
    m = udp_path_request(req, 11, ZK_OP_GETDATA, "/", true, 0, NULL);
    assert_int_equal(udp_ask(e, req, m, "127.0.0.1", UDP_MAX, &out, &ctr).status, ZK_UDP_BAD_REQUEST);
    m = udp_path_request(req, 12, ZK_OP_EXISTS, "/", true, 0, NULL);
    assert_int_equal(udp_ask(e, req, m, "127.0.0.1", UDP_MAX, &out, &ctr).status, ZK_UDP_BAD_REQUEST);
    m = udp_path_request(req, 13, ZK_OP_GETDATA, "/", false, 0, NULL);
    assert_int_equal(udp_ask(e, req, m - 1, "127.0.0.1", UDP_MAX, &out, &ctr).status,
                     ZK_UDP_BAD_REQUEST);
    req[m] = 0;
    req[m + 1] = 0;
    assert_int_equal(udp_ask(e, req, m + 2, "127.0.0.1", UDP_MAX, &out, &ctr).status, ZK_UDP_OK);
    req[m + 1] = 7;
    assert_int_equal(udp_ask(e, req, m + 2, "127.0.0.1", UDP_MAX, &out, &ctr).status,
                     ZK_UDP_BAD_REQUEST);
    struct zk_wbuf mw;
    zk_wbuf_init(&mw);
    struct zk_multi_header mh = { .type = ZK_OP_GETDATA, .done = false, .err = -1 };
    zk_put_multi_header(&mw, &mh);
    struct zk_path_watch_req q = { .path = zk_str_c("/"), .watch = true };
    zk_put_path_watch_req(&mw, &q);
    zk_put_multi_end(&mw);
    m = udp_request(req, 14, 0, 0, NULL, ZK_OP_MULTIREAD, &mw, 0);
    assert_int_equal(udp_ask(e, req, m, "127.0.0.1", UDP_MAX, &out, &ctr).status, ZK_UDP_BAD_REQUEST);
    zk_wbuf_free(&mw);

    assert_int_equal(ctr.answered[ZK_UDP_BAD_VERSION], 2);
    assert_int_equal(ctr.answered[ZK_UDP_BAD_REQUEST], 8);
    assert_int_equal(ctr.answered[ZK_UDP_OK], 2);
    zk_wbuf_free(&out);
    env_free(e);
}

/* A reply is at most three times its request and never above the
 * datagram limit: TOO_BIG says the size, and a padded request gets it. A
 * server behind the client's zxid says BEHIND. */
static void test_udp_size_and_min_zxid(void **state)
{
    struct env *e = env_new(NULL);
    struct rx r = { 0 };
    int fd = session_open(e, &r);
    struct zk_wbuf w, out;
    zk_wbuf_init(&w);
    zk_wbuf_init(&out);
    frame_create(&w, 1, "/big", 1000, NULL);
    send_wbuf(e, fd, &w);
    assert_int_equal(next_reply(e, fd, &r, true).err, ZK_OK);
    struct dp_udp_counters ctr = { 0 };
    static uint8_t req[4096];
    size_t n = udp_path_request(req, 1, ZK_OP_GETDATA, "/big", false, 0, NULL);
    struct udp_reply u = udp_ask(e, req, n, "127.0.0.1", UDP_MAX, &out, &ctr);
    assert_int_equal(u.status, ZK_UDP_TOO_BIG);
    uint32_t need = u.detail;
    assert_true(need > 1000 && need < 1200);
    size_t pad = (need + 2) / 3 - n;
    u = udp_ask(e, req, n + pad, "127.0.0.1", UDP_MAX, &out, &ctr);
    assert_int_equal(u.status, ZK_UDP_OK);
    assert_int_equal(u.h.err, ZK_OK);
    assert_int_equal(out.len, need);
    /* an Ethernet frame's payload cannot hold it, padded or not */
    u = udp_ask(e, req, n + pad, "127.0.0.1", 1000, &out, &ctr);
    assert_int_equal(u.status, ZK_UDP_TOO_BIG);
    assert_int_equal(u.detail, need);

    int64_t z = last_zxid(e);
    struct zk_wbuf b;
    zk_wbuf_init(&b);
    struct zk_path_watch_req q = { .path = zk_str_c("/"), .watch = false };
    zk_put_path_watch_req(&b, &q);
    n = udp_request(req, 2, z + 1, 0, NULL, ZK_OP_EXISTS, &b, 0);
    u = udp_ask(e, req, n, "127.0.0.1", UDP_MAX, &out, &ctr);
    assert_int_equal(u.status, ZK_UDP_BEHIND);
    assert_int_equal(u.h.zxid, z);
    n = udp_request(req, 3, z, 0, NULL, ZK_OP_EXISTS, &b, 0);
    assert_int_equal(udp_ask(e, req, n, "127.0.0.1", UDP_MAX, &out, &ctr).status, ZK_UDP_OK);
    zk_wbuf_free(&b);

    assert_int_equal(ctr.answered[ZK_UDP_TOO_BIG], 2);
    assert_int_equal(ctr.answered[ZK_UDP_BEHIND], 1);
    zk_wbuf_free(&w);
    zk_wbuf_free(&out);
    close(fd);
    free(r.buf);
    env_free(e);
}

/* zookeeper.enforce.auth with the digest scheme: a connection without a
 * digest identity gets SESSIONCLOSEDREQUIRESASLAUTH for its first request
 * and is closed; auth itself is served; after addauth everything is. Over
 * UDP an anonymous read gets the same code, a read signed by the
 * authenticated session is served. With "ip" every connection qualifies. */
static void test_enforce_auth(void **state)
{
    struct dp_cfg cfg = { .enforce_auth = DP_AUTH_DIGEST };
    struct env *e = env_new(&cfg);
    struct rx r = { 0 }, r2 = { 0 };
    struct zk_wbuf w, out;
    zk_wbuf_init(&w);
    zk_wbuf_init(&out);

    int fd = session_open(e, &r);
    frame_path_watch(&w, 7, ZK_OP_EXISTS, "/", false);
    send_wbuf(e, fd, &w);
    struct zk_reply_header h = next_reply(e, fd, &r, false);
    assert_int_equal(h.xid, 7);
    assert_int_equal(h.err, ZK_ESESSIONCLOSEDREQUIRESASL);
    assert_true(wait_eof(e, fd, &r, 2000));
    close(fd);

    int64_t sid;
    uint8_t pw[16];
    int fd2 = session_open_as(e, &r2, &sid, pw);
    frame_auth(&w, "ip", "x"); /* served, and not enough */
    frame_auth(&w, "digest", "user:pw");
    frame_path_watch(&w, 8, ZK_OP_EXISTS, "/", false);
    send_wbuf(e, fd2, &w);
    assert_int_equal(next_reply(e, fd2, &r2, false).err, ZK_OK);
    assert_int_equal(next_reply(e, fd2, &r2, false).err, ZK_OK);
    h = next_reply(e, fd2, &r2, false);
    assert_int_equal(h.xid, 8);
    assert_int_equal(h.err, ZK_OK);

    struct dp_udp_counters ctr = { 0 };
    uint8_t req[512];
    size_t n = udp_path_request(req, 1, ZK_OP_EXISTS, "/", false, 0, NULL);
    assert_int_equal(udp_ask(e, req, n, "127.0.0.1", UDP_MAX, &out, &ctr).h.err,
                     ZK_ESESSIONCLOSEDREQUIRESASL);
    n = udp_path_request(req, 2, ZK_OP_EXISTS, "/", false, sid, pw);
    struct udp_reply u = udp_ask(e, req, n, "127.0.0.1", UDP_MAX, &out, &ctr);
    assert_int_equal(u.status, ZK_UDP_OK);
    assert_int_equal(u.h.err, ZK_OK);
    close(fd2);
    free(r.buf);
    free(r2.buf);
    env_free(e);

    struct dp_cfg by_ip = { .enforce_auth = DP_AUTH_IP | DP_AUTH_DIGEST };
    e = env_new(&by_ip);
    struct rx r3 = { 0 };
    int fd3 = session_open(e, &r3);
    frame_path_watch(&w, 9, ZK_OP_EXISTS, "/", false);
    send_wbuf(e, fd3, &w);
    assert_int_equal(next_reply(e, fd3, &r3, false).err, ZK_OK);
    close(fd3);
    free(r3.buf);
    zk_wbuf_free(&w);
    zk_wbuf_free(&out);
    env_free(e);
}

/* cons's counters of the only connection (dp_each_conn). */
static void one_conn(void *arg, const struct dp_conn_info *ci)
{
    struct dp_conn_info *out = arg;
    assert_int_equal(out->peer[0], '\0'); /* one connection only */
    *out = *ci;
}

static struct dp_conn_info conn_stats(struct env *e)
{
    struct dp_conn_info ci = { 0 };
    dp_each_conn(e->dp, one_conn, &ci);
    assert_int_not_equal(ci.peer[0], '\0');
    return ci;
}

/* crst resets what cons shows of each connection and nothing of srvr's;
 * srst the reverse. Each shows at once, before the worker has run a pass
 * (it carries the reset out then), and counting goes on from zero. */
static void test_crst_and_srst_reset_their_own_counters(void **state)
{
    struct env *e = env_new(NULL);
    struct rx r = { 0 };
    struct zk_wbuf w;
    zk_wbuf_init(&w);
    int fd = session_open(e, &r);
    frame_create(&w, 1, "/a", 3, NULL);
    frame_path_watch(&w, 2, ZK_OP_EXISTS, "/a", false);
    send_wbuf(e, fd, &w);
    assert_int_equal(next_reply(e, fd, &r, false).xid, 1);
    assert_int_equal(next_reply(e, fd, &r, false).xid, 2);
    struct dp_conn_info ci = conn_stats(e);
    assert_int_equal(ci.received, 3); /* connect, create, exists */
    assert_int_equal(ci.sent, 3);
    assert_int_equal(ci.last_op, ZK_OP_EXISTS);
    struct dp_stats st = stats(e);
    assert_int_equal(st.packets_received, 2); /* the connect counts for the connection only */
    assert_int_equal(st.latency_count, 2);
    uint64_t sent = st.packets_sent;

    for (int pass = 0; pass < 2; pass++) { /* pending, then carried out */
        dp_reset_conn_stats(e->dp);
        ci = conn_stats(e);
        assert_int_equal(ci.received, 0);
        assert_int_equal(ci.sent, 0);
        assert_int_equal(ci.last_op, DP_CONN_NO_OP);
        assert_int_equal(ci.last_zxid, -1);
        assert_int_equal(ci.max_latency_us, 0);
        st = stats(e);
        assert_int_equal(st.packets_received, 2);
        assert_int_equal(st.packets_sent, sent);
        assert_int_equal(st.latency_count, 2);
        pump(e, 1);
    }
    frame_path_watch(&w, 3, ZK_OP_EXISTS, "/a", false);
    send_wbuf(e, fd, &w);
    assert_int_equal(next_reply(e, fd, &r, false).xid, 3);
    ci = conn_stats(e);
    assert_int_equal(ci.received, 1);
    assert_int_equal(ci.sent, 1);
    assert_int_equal(ci.last_op, ZK_OP_EXISTS);
    assert_true(ci.last_zxid >= 0);

    dp_reset_stats(e->dp);
    st = stats(e);
    assert_int_equal(st.packets_received, 0);
    assert_int_equal(st.packets_sent, 0);
    assert_int_equal(st.latency_count, 0);
    assert_int_equal(st.latency_max_us, 0);
    assert_int_equal(conn_stats(e).received, 1);
    pump(e, 1);
    frame_path_watch(&w, 4, ZK_OP_EXISTS, "/a", false);
    send_wbuf(e, fd, &w);
    assert_int_equal(next_reply(e, fd, &r, false).xid, 4);
    st = stats(e);
    assert_int_equal(st.packets_received, 1);
    assert_int_equal(st.packets_sent, 1);
    assert_int_equal(st.latency_count, 1);
    assert_int_equal(conn_stats(e).received, 2);
    close(fd);
    free(r.buf);
    zk_wbuf_free(&w);
    env_free(e);
}

/* A four-letter-word handler that records what it was asked. */
struct fourlw_log {
    int calls;
    char word[5];
    int64_t word_arg;
    bool allow_stmk;
};

static void fourlw_record(void *arg, struct dp *dp, const char *word, int64_t word_arg,
                          struct zk_wbuf *out)
{
    struct fourlw_log *l = arg;
    (void)dp;
    l->calls++;
    snprintf(l->word, sizeof l->word, "%s", word);
    l->word_arg = word_arg;
    zk_put_raw(out, "ok", 2);
}

static bool fourlw_allow(void *arg, const char *word)
{
    const struct fourlw_log *l = arg;
    return strcmp(word, "stmk") != 0 || l->allow_stmk;
}

/* Pumps until the client reads EOF; what came before it into r. */
static void read_to_eof(struct env *e, int fd, struct rx *r)
{
    for (int i = 0; i < PASSES_MAX && !r->eof; i++) {
        pump(e, 1);
        rx_poll(fd, r);
    }
    assert_true(r->eof);
}

/* One four-letter-word request: bytes, then, with half_close, the end of
 * the client's output. Returns the answer (NUL-terminated, the caller's). */
static char *fourlw_ask(struct env *e, const void *bytes, size_t n, bool half_close)
{
    struct rx r = { 0 };
    int fd = client_open(e, "127.0.0.1");
    send_all(e, fd, bytes, n);
    if (half_close)
        assert_int_equal(shutdown(fd, SHUT_WR), 0);
    read_to_eof(e, fd, &r);
    close(fd);
    char *s = malloc(r.len + 1);
    assert_non_null(s);
    memcpy(s, r.buf, r.len);
    s[r.len] = '\0';
    free(r.buf);
    return s;
}

/* stmk's 8-byte argument is read with the word, however the bytes arrive;
 * a connection waiting for it holds no worker (nothing to run, nothing
 * resumed) and one that ends first gets no answer; the other words, and a
 * stmk the whitelist refuses, are answered after four bytes. */
static void test_stmk_reads_its_argument(void **state)
{
    struct fourlw_log log = { .allow_stmk = true };
    struct dp_cfg cfg = { .fourlw = fourlw_record, .fourlw_arg = &log, .fourlw_allowed = fourlw_allow };
    struct env *e = env_new(&cfg);
    static const uint8_t whole[12] = { 's', 't', 'm', 'k', 0x80, 0, 0, 0, 0, 0, 0x0f, 0xff };

    char *got = fourlw_ask(e, whole, sizeof whole, false);
    assert_string_equal(got, "ok");
    free(got);
    assert_int_equal(log.calls, 1);
    assert_string_equal(log.word, "stmk");
    assert_int_equal(log.word_arg, (int64_t)0x8000000000000fffULL);

    /* in pieces: the word and three bytes, then the rest */
    struct rx r = { 0 };
    int fd = client_open(e, "127.0.0.1");
    send_all(e, fd, whole, 7);
    pump(e, 5);
    rx_poll(fd, &r);
    assert_false(r.eof);
    assert_int_equal(r.len, 0);
    assert_int_equal(log.calls, 1);
    assert_null(e->dp->workers[0].resume); /* waiting, not spinning */
    assert_int_equal(stats(e).connections, 1);
    send_all(e, fd, whole + 7, sizeof whole - 7);
    read_to_eof(e, fd, &r);
    assert_int_equal(r.len, 2);
    assert_int_equal(log.calls, 2);
    assert_int_equal(log.word_arg, (int64_t)0x8000000000000fffULL);
    close(fd);
    free(r.buf);

    /* the client stops short: no answer, nothing run */
    got = fourlw_ask(e, whole, 6, true);
    assert_string_equal(got, "");
    free(got);
    got = fourlw_ask(e, "stmk", 4, true);
    assert_string_equal(got, "");
    free(got);
    assert_int_equal(log.calls, 2);

    got = fourlw_ask(e, "gtmk", 4, false);
    assert_string_equal(got, "ok");
    free(got);
    assert_int_equal(log.calls, 3);
    assert_string_equal(log.word, "gtmk");
    assert_int_equal(log.word_arg, 0);

    log.allow_stmk = false; /* refused at once, as ZooKeeper does, argument or not */
    got = fourlw_ask(e, "stmk", 4, false);
    assert_string_equal(got, "stmk is not executed because it is not in the whitelist.\n");
    free(got);
    assert_int_equal(log.calls, 3);
    env_free(e);
}

/* ---- SASL ------------------------------------------------------------------- */

static void frame_sasl(struct zk_wbuf *w, int32_t xid, const char *token, int32_t len)
{
    struct zk_wbuf b;
    zk_wbuf_init(&b);
    zk_put_sasl_request(&b, &(struct zk_sasl_request){ { token, len } });
    frame_request(w, xid, ZK_OP_SASL, &b);
    zk_wbuf_free(&b);
}

/* The next reply, which must be a SASL one: header into *h, its token
 * (NUL-terminated; NULL for a null token) returned, to be freed. */
static char *next_sasl_reply(struct env *e, int fd, struct rx *r, struct zk_reply_header *h)
{
    struct base_rd body;
    uint8_t *f = wait_frame(e, fd, r, &body);
    struct zk_sasl_response resp;
    assert_true(zk_get_reply_header(&body, h));
    assert_true(zk_get_sasl_response(&body, &resp));
    assert_int_equal(base_rd_left(&body), 0);
    char *token = resp.token.len < 0 ? NULL : strndup(resp.token.ptr, (size_t)resp.token.len);
    free(f);
    return token;
}

/* ZooKeeperServer.processSasl over the wire (the logins themselves are
 * test_saslsrv's and test_sasl.py's): without SASL the opcode is
 * UNIMPLEMENTED; with it the first, empty token is answered with the
 * DIGEST-MD5 challenge under the request's xid and zxid 0; a bad response
 * is AUTHFAILED with a null token, and the connection closes; a null
 * token closes it at once. */
static void test_sasl_exchange(void **state)
{
    static const struct saslsrv_user users[] = { { "bob", "bobsecret" } };
    char err[256];
    assert_int_equal(saslsrv_init(users, 1, err, sizeof err), 0);
    struct rx r = { 0 };
    struct zk_wbuf w;
    zk_wbuf_init(&w);
    struct zk_reply_header h;

    struct env *e = env_new(NULL);
    int fd = session_open(e, &r);
    frame_sasl(&w, 1, "", 0);
    send_wbuf(e, fd, &w);
    h = next_reply(e, fd, &r, false);
    assert_int_equal(h.xid, 1);
    assert_int_equal(h.err, ZK_EUNIMPLEMENTED);
    assert_true(wait_eof(e, fd, &r, 2000));
    close(fd);
    env_free(e);

    struct dp_cfg on = { .sasl = true };
    e = env_new(&on);
    r = (struct rx){ .buf = r.buf, .cap = r.cap };
    fd = session_open(e, &r);
    frame_path_watch(&w, 5, ZK_OP_EXISTS, "/", false);
    frame_sasl(&w, 6, "", 0);
    send_wbuf(e, fd, &w);
    assert_int_equal(next_reply(e, fd, &r, false).xid, 5);
    char *challenge = next_sasl_reply(e, fd, &r, &h);
    assert_int_equal(h.xid, 6);
    assert_true(h.zxid == 0);
    assert_int_equal(h.err, ZK_OK);
    assert_non_null(strstr(challenge, "realm=\"zk-sasl-md5\""));
    assert_non_null(strstr(challenge, "qop=\"auth\""));
    free(challenge);
    static const char wrong[] = "username=\"bob\",realm=\"zk-sasl-md5\",nonce=\"x\","
                                "cnonce=\"y\",nc=00000001,qop=auth,digest-uri=\"zookeeper/"
                                "zk-sasl-md5\",response=00000000000000000000000000000000";
    frame_sasl(&w, 7, wrong, (int32_t)strlen(wrong));
    send_wbuf(e, fd, &w);
    assert_null(next_sasl_reply(e, fd, &r, &h));
    assert_int_equal(h.xid, 7);
    assert_int_equal(h.err, ZK_EAUTHFAILED);
    assert_true(wait_eof(e, fd, &r, 2000));
    close(fd);

    r = (struct rx){ .buf = r.buf, .cap = r.cap };
    fd = session_open(e, &r);
    frame_sasl(&w, 8, NULL, -1);
    send_wbuf(e, fd, &w);
    assert_true(wait_eof(e, fd, &r, 2000));
    assert_int_equal(r.len, 0);
    close(fd);
    env_free(e);

    /* enforce.auth with sasl: SASL is served before the login, anything
     * else refused; a failed login says the server requires SASL */
    struct dp_cfg required = { .sasl = true, .enforce_auth = DP_AUTH_SASL };
    e = env_new(&required);
    r = (struct rx){ .buf = r.buf, .cap = r.cap };
    fd = session_open(e, &r);
    frame_sasl(&w, 9, "", 0);
    frame_sasl(&w, 10, "garbage", 7);
    send_wbuf(e, fd, &w);
    free(next_sasl_reply(e, fd, &r, &h));
    assert_int_equal(h.err, ZK_OK);
    assert_null(next_sasl_reply(e, fd, &r, &h));
    assert_int_equal(h.xid, 10);
    assert_int_equal(h.err, ZK_ESESSIONCLOSEDREQUIRESASL);
    assert_true(wait_eof(e, fd, &r, 2000));
    close(fd);
    r = (struct rx){ .buf = r.buf, .cap = r.cap };
    fd = session_open(e, &r);
    frame_path_watch(&w, 11, ZK_OP_EXISTS, "/", false);
    send_wbuf(e, fd, &w);
    assert_int_equal(next_reply(e, fd, &r, false).err, ZK_ESESSIONCLOSEDREQUIRESASL);
    assert_true(wait_eof(e, fd, &r, 2000));
    close(fd);
    env_free(e);
    free(r.buf);
    zk_wbuf_free(&w);
    saslsrv_done();
}

/* ---- TLS ------------------------------------------------------------------ */

/* The worker's only connection. */
static struct conn *only_conn(struct env *e)
{
    struct worker *w = &e->dp->workers[0];
    struct conn *found = NULL;
    for (uint32_t i = 0; i < w->nslots; i++) {
        if (w->slots[i] != NULL) {
            assert_null(found);
            found = w->slots[i];
        }
    }
    assert_non_null(found);
    return found;
}

/* Writes all of p through the client's session, running the server while
 * the session waits. */
static void tls_send_all(struct env *e, SSL *cli, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (int tries = 0; n > 0 && tries < PASSES_MAX; tries++) {
        int k = SSL_write(cli, b, (int)n);
        if (k > 0) {
            b += k;
            n -= (size_t)k;
            continue;
        }
        int err = SSL_get_error(cli, k);
        ERR_clear_error();
        if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE)
            fail_msg("SSL_write: %d", err);
        pump(e, 1);
    }
    assert_int_equal(n, 0);
}

static void tls_rx_poll(SSL *cli, struct rx *r)
{
    for (;;) {
        assert_int_equal(base_grow(&r->buf, &r->cap, r->len + 65536, 1), 0);
        int k = SSL_read(cli, r->buf + r->len, (int)(r->cap - r->len));
        if (k > 0) {
            r->len += (size_t)k;
            continue;
        }
        int err = SSL_get_error(cli, k);
        ERR_clear_error();
        if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE)
            r->eof = true;
        return;
    }
}

static uint8_t *tls_wait_frame(struct env *e, SSL *cli, struct rx *r, struct base_rd *body)
{
    uint8_t *owned = NULL;
    for (int i = 0; i < PASSES_MAX; i++) {
        if (rx_frame(r, body, &owned))
            return owned;
        pump(e, 1);
        tls_rx_poll(cli, r);
    }
    fail_msg("no frame from the server");
    return NULL;
}

/* Runs the client's handshake to its end, the server passing in between. */
static void tls_handshake(struct env *e, SSL *cli)
{
    int rc = -1;
    for (int i = 0; i < PASSES_MAX && rc != 1; i++) {
        rc = SSL_do_handshake(cli);
        if (rc != 1) {
            int why = SSL_get_error(cli, rc);
            ERR_clear_error();
            assert_true(why == SSL_ERROR_WANT_READ || why == SSL_ERROR_WANT_WRITE);
            pump(e, 1);
        }
    }
    assert_int_equal(rc, 1);
}

/* whoAmI over the client's session: "scheme=user" items joined by ';'. */
static void tls_whoami(struct env *e, SSL *cli, struct rx *r, char *out, size_t cap)
{
    struct zk_wbuf w;
    zk_wbuf_init(&w);
    frame_request(&w, 77, ZK_OP_WHOAMI, NULL);
    tls_send_all(e, cli, w.p, w.len);
    zk_wbuf_free(&w);
    struct base_rd body;
    uint8_t *f = tls_wait_frame(e, cli, r, &body);
    struct zk_reply_header h;
    assert_true(zk_get_reply_header(&body, &h));
    assert_int_equal(h.xid, 77);
    assert_int_equal(h.err, ZK_OK);
    int32_t n;
    assert_true(zk_get_i32(&body, &n));
    out[0] = '\0';
    for (int32_t i = 0; i < n; i++) {
        struct zk_str scheme, user;
        assert_true(zk_get_str(&body, &scheme) && zk_get_str(&body, &user));
        size_t used = strlen(out);
        snprintf(out + used, cap - used, "%s%.*s=%.*s", i ? ";" : "", scheme.len, scheme.ptr,
                 user.len, user.ptr);
    }
    free(f);
}

/* A secure port's connection whose socket takes a few KiB at a time: the
 * server's first flight (16 KiB of certificate) waits for writability, and
 * epoll watches for that instead of input; then a session runs over TLS,
 * replies larger than a record and than the socket's buffer included, and
 * the connection's session is freed with it. */
static void test_tls_connection(void **state)
{
    struct test_pki pki;
    assert_int_equal(test_pki_make(&pki), 0);
    char key[128];
    test_pki_path(&pki, "big.pem", key, sizeof key);
    struct tls_settings ts = { .key = { .path = key, .type = TLS_STORE_PEM },
                               .protocols = TLS_PROTO_1_2 | TLS_PROTO_1_3,
                               .client_auth = TLS_CLIENT_AUTH_NONE };
    char err[TLS_MSG_MAX];
    struct tls_ctx *ctx = tls_ctx_new(&ts, err, sizeof err);
    if (ctx == NULL)
        fail_msg("tls_ctx_new: %s", err);
    struct dp_cfg cfg = { .tls = ctx, .secure_bind_addr = "127.0.0.1" };
    struct env *e = env_new(&cfg);
    assert_true(dp_secure_port(e->dp) > 0);
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    int tiny = 1; /* the kernel's minimum, a few KiB */
    assert_int_equal(setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &tiny, sizeof tiny), 0);
    dp_test_adopt_tls(e->dp, 0, sv[1], "127.0.0.1", e->next_port++);
    SSL_CTX *cctx;
    SSL *cli = test_pki_client(&pki, &cctx, sv[0], NULL, TLS1_3_VERSION);
    SSL_CTX_set_mode(cctx, SSL_MODE_ENABLE_PARTIAL_WRITE);

    assert_int_equal(SSL_do_handshake(cli), -1); /* the ClientHello goes out */
    ERR_clear_error();
    pump(e, 1);
    struct conn *c = only_conn(e);
    assert_true(c->read_wants_out);
    assert_int_equal(c->ev_mask, EPOLLOUT);
    tls_handshake(e, cli);

    struct zk_wbuf w;
    zk_wbuf_init(&w);
    struct rx r = { 0 };
    struct base_rd body;
    frame_connect(&w);
    frame_create(&w, 1, "/big", 60000, NULL);
    frame_path_watch(&w, 2, ZK_OP_GETDATA, "/big", false);
    frame_path_watch(&w, 3, ZK_OP_GETDATA, "/big", false);
    tls_send_all(e, cli, w.p, w.len);
    uint8_t *f = tls_wait_frame(e, cli, &r, &body);
    struct zk_connect_resp resp;
    assert_true(zk_get_connect_resp(&body, &resp));
    assert_true(resp.timeout_ms > 0);
    free(f);
    for (int32_t xid = 1; xid <= 3; xid++) {
        f = tls_wait_frame(e, cli, &r, &body);
        struct zk_reply_header h;
        assert_true(zk_get_reply_header(&body, &h));
        assert_int_equal(h.xid, xid);
        assert_int_equal(h.err, ZK_OK);
        if (xid > 1)
            assert_int_equal(body.len - body.pos, 4 + 60000 + 68); /* data, then its Stat */
        free(f);
    }
    assert_false(c->read_wants_out);

    SSL_shutdown(cli); /* close_notify: the server closes its end */
    for (int i = 0; i < PASSES_MAX && !r.eof; i++) {
        pump(e, 1);
        tls_rx_poll(cli, &r);
    }
    assert_true(r.eof);
    assert_int_equal(stats(e).connections, 0);
    SSL_free(cli);
    SSL_CTX_free(cctx);
    close(sv[0]);
    free(r.buf);
    zk_wbuf_free(&w);
    env_free(e);
    tls_ctx_free(ctx);
    test_pki_free(&pki);
}

/* A client certificate is the connection's x509 identity from the end of
 * the handshake on (whoAmI lists it after the ip one, as ZooKeeper does);
 * X509AuthenticationProvider.superUser's subject is the super user too
 * ("super" with an empty name, as ZooKeeper shows it); a client without a
 * certificate (clientAuth want) holds the ip identity only. */
static void test_tls_client_certificate_identity(void **state)
{
    struct test_pki pki;
    assert_int_equal(test_pki_make(&pki), 0);
    char key[128], trust[128];
    test_pki_path(&pki, "server.pem", key, sizeof key);
    test_pki_path(&pki, "ca.pem", trust, sizeof trust);
    struct tls_settings ts = { .key = { .path = key, .type = TLS_STORE_PEM },
                               .trust = { .path = trust, .type = TLS_STORE_PEM },
                               .protocols = TLS_PROTO_1_3,
                               .client_auth = TLS_CLIENT_AUTH_WANT };
    char err[TLS_MSG_MAX];
    struct tls_ctx *ctx = tls_ctx_new(&ts, err, sizeof err);
    if (ctx == NULL)
        fail_msg("tls_ctx_new: %s", err);
    static const char *const cases[][3] = {
        /* certificate, superUser, whoAmI */
        { "client.pem", "", "ip=127.0.0.1;x509=CN=client" },
        { "client.pem", "CN=client", "ip=127.0.0.1;super=;x509=CN=client" },
        { "elsewhere.pem", "CN=client", "ip=127.0.0.1;x509=CN=client elsewhere" },
        { NULL, "CN=client", "ip=127.0.0.1" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct dp_cfg cfg = { .tls = ctx, .secure_bind_addr = "127.0.0.1",
                              .x509_super_user = cases[i][1] };
        struct env *e = env_new(&cfg);
        int sv[2];
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
        dp_test_adopt_tls(e->dp, 0, sv[1], "127.0.0.1", e->next_port++);
        SSL_CTX *cctx;
        SSL *cli = test_pki_client(&pki, &cctx, sv[0], cases[i][0], TLS1_3_VERSION);
        tls_handshake(e, cli);
        struct zk_wbuf w;
        zk_wbuf_init(&w);
        frame_connect(&w);
        tls_send_all(e, cli, w.p, w.len);
        zk_wbuf_free(&w);
        struct rx r = { 0 };
        struct base_rd body;
        free(tls_wait_frame(e, cli, &r, &body)); /* the ConnectResponse */
        char who[512];
        tls_whoami(e, cli, &r, who, sizeof who);
        assert_string_equal(who, cases[i][2]);
        assert_int_equal(only_conn(e)->super, strstr(cases[i][2], "super=") != NULL);
        SSL_free(cli);
        SSL_CTX_free(cctx);
        close(sv[0]);
        free(r.buf);
        env_free(e);
    }
    tls_ctx_free(ctx);
    test_pki_free(&pki);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* as larchd: a TLS session writes with write(2) */
    rcu_register_thread();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pipelined_writes_then_close),
        cmocka_unit_test(test_more_pipelined_than_outstanding_limit),
        cmocka_unit_test(test_stalled_handshake_is_closed),
        cmocka_unit_test(test_output_high_water_pauses_requests),
        cmocka_unit_test(test_slow_consumer_is_closed),
        cmocka_unit_test(test_memory_pressure_bounds_total),
        cmocka_unit_test(test_watch_events_respect_acl),
        cmocka_unit_test(test_auth_ip_and_long_password),
        cmocka_unit_test(test_max_cnxns),
        cmocka_unit_test(test_udp_every_read_op),
        cmocka_unit_test(test_udp_identity_and_mac),
        cmocka_unit_test(test_udp_bad_datagrams),
        cmocka_unit_test(test_udp_size_and_min_zxid),
        cmocka_unit_test(test_enforce_auth),
        cmocka_unit_test(test_crst_and_srst_reset_their_own_counters),
        cmocka_unit_test(test_stmk_reads_its_argument),
        cmocka_unit_test(test_sasl_exchange),
        cmocka_unit_test(test_tls_connection),
        cmocka_unit_test(test_tls_client_certificate_identity),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    rcu_unregister_thread();
    return rc;
}
