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
 * and the ACL check on watch notifications. Every test ends by closing
 * everything and checking the budget returns to zero.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <urcu.h>

#include "dataplane/dp_int.h"

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

/* A client with an open session. */
static int session_open(struct env *e, struct rx *r)
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
    free(f);
    return fd;
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

int main(void)
{
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
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    rcu_unregister_thread();
    return rc;
}
