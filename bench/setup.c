/*
 * setup.c — a small blocking ZooKeeper client for the phases that are not
 * measured: creating the keys before the first run and removing them after
 * the last. Requests are pipelined in windows so that setting up a million
 * keys takes seconds, not a round trip each.
 */
#include "bench/bench.h"
#include "proto/proto.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define IO_TIMEOUT_S 30          /* ZooKeeper fsyncs every write; be patient */
#define WINDOW_REQUESTS_MAX 256
#define WINDOW_BYTES_MAX (4u << 20)
#define FRAME_BYTES_MAX (64u << 20)

struct conn {
    int fd;
    int32_t next_xid;
    struct zk_wbuf out;
    uint8_t *in;
    size_t in_cap;
};

static int fail(char *err, size_t err_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t err_len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
    return -1;
}

static int send_all(int fd, const uint8_t *p, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int recv_all(int fd, uint8_t *p, size_t len)
{
    while (len > 0) {
        ssize_t n = recv(fd, p, len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Reads one frame into c->in (grown as needed); its length in *len. */
static int read_frame(struct conn *c, size_t *len, char *err, size_t err_len)
{
    uint8_t hdr[4];
    if (recv_all(c->fd, hdr, 4) != 0)
        return fail(err, err_len, "connection lost: %s", errno ? strerror(errno) : "closed");
    uint32_t n = base_get_be32(hdr);
    if (n > FRAME_BYTES_MAX)
        return fail(err, err_len, "server sent a %u-byte frame", n);
    if (base_grow(&c->in, &c->in_cap, n, 1) != 0)
        return fail(err, err_len, "out of memory");
    if (recv_all(c->fd, c->in, n) != 0)
        return fail(err, err_len, "connection lost mid-frame");
    *len = n;
    return 0;
}

int bench_open_socket(const struct bench_cfg *cfg, char *err, size_t err_len)
{
    char port[8];
    snprintf(port, sizeof(port), "%u", cfg->port);
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res = NULL;
    int rc = getaddrinfo(cfg->host, port, &hints, &res);
    if (rc != 0)
        return fail(err, err_len, "%s: %s", cfg->host, gai_strerror(rc));
    int fd = -1;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0)
        return fail(err, err_len, "cannot connect to %s:%u: %s", cfg->host, cfg->port,
                    strerror(errno));
    int one = 1;
    struct timeval tv = { IO_TIMEOUT_S, 0 };
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    return fd;
}

int bench_connect(const struct bench_cfg *cfg, char *err, size_t err_len)
{
    int fd = bench_open_socket(cfg, err, err_len);
    if (fd < 0)
        return -1;
    struct conn c = { .fd = fd };
    zk_wbuf_init(&c.out);
    bench_put_connect(&c.out, cfg->timeout_ms);
    size_t len = 0;
    int rc = -1;
    if (c.out.err)
        fail(err, err_len, "out of memory");
    else if (send_all(fd, c.out.p, c.out.len) != 0)
        fail(err, err_len, "handshake: send failed: %s", strerror(errno));
    else if (read_frame(&c, &len, err, err_len) == 0) {
        struct base_rd r;
        struct zk_connect_resp resp;
        base_rd_init(&r, c.in, len);
        if (!zk_get_connect_resp(&r, &resp))
            fail(err, err_len, "handshake: malformed ConnectResponse");
        else if (resp.timeout_ms <= 0)
            fail(err, err_len, "handshake: server refused the session");
        else
            rc = 0;
    }
    zk_wbuf_free(&c.out);
    free(c.in);
    if (rc != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* One pipelined batch: build(i) for i in [0, count), reply(i, err, body). */
typedef void (*build_fn)(struct zk_wbuf *w, int32_t xid, size_t i, void *arg);
typedef int (*reply_fn)(size_t i, int32_t code, struct base_rd *body, void *arg, char *err,
                        size_t err_len);

static int read_reply(struct conn *c, int32_t want_xid, int32_t *code, struct base_rd *body,
                      char *err, size_t err_len)
{
    for (;;) {
        size_t len;
        if (read_frame(c, &len, err, err_len) != 0)
            return -1;
        struct zk_reply_header h;
        base_rd_init(body, c->in, len);
        if (!zk_get_reply_header(body, &h))
            return fail(err, err_len, "malformed reply header");
        if (h.xid == ZK_XID_NOTIFICATION || h.xid == ZK_XID_PING)
            continue;
        if (h.xid != want_xid)
            return fail(err, err_len, "reply xid %d, expected %d", h.xid, want_xid);
        *code = h.err;
        return 0;
    }
}

static int pipeline(struct conn *c, size_t count, size_t request_bytes, build_fn build,
                    reply_fn reply, void *arg, char *err, size_t err_len)
{
    size_t window = WINDOW_BYTES_MAX / (request_bytes + 64);
    if (window > WINDOW_REQUESTS_MAX)
        window = WINDOW_REQUESTS_MAX;
    if (window == 0)
        window = 1;
    for (size_t start = 0; start < count; start += window) {
        size_t end = start + window < count ? start + window : count;
        int32_t first_xid = c->next_xid;
        zk_wbuf_reset(&c->out);
        for (size_t i = start; i < end; i++)
            build(&c->out, c->next_xid++, i, arg);
        if (c->out.err)
            return fail(err, err_len, "out of memory");
        if (send_all(c->fd, c->out.p, c->out.len) != 0)
            return fail(err, err_len, "send failed: %s", strerror(errno));
        for (size_t i = start; i < end; i++) {
            int32_t code = ZK_OK; /* read_reply sets it when it returns 0 */
            struct base_rd body;
            if (read_reply(c, first_xid + (int32_t)(i - start), &code, &body, err, err_len) != 0)
                return -1;
            if (reply(i, code, &body, arg, err, err_len) != 0)
                return -1;
        }
    }
    return 0;
}

/* ---- setup ---------------------------------------------------------- */

struct setup_ctx {
    const struct bench_cfg *cfg;
    const char *value;
    size_t *existing; /* keys that were there already: their value is rewritten */
    size_t existing_count;
};

static void build_create_key(struct zk_wbuf *w, int32_t xid, size_t i, void *arg)
{
    struct setup_ctx *s = arg;
    char path[BENCH_PATH_MAX];
    bench_key_path(path, sizeof(path), (uint32_t)i);
    bench_put_create(w, xid, path, s->value, s->cfg->value_size_bytes);
}

static int on_create_key(size_t i, int32_t code, struct base_rd *body, void *arg, char *err,
                         size_t err_len)
{
    struct setup_ctx *s = arg;
    if (code == ZK_ENODEEXISTS) {
        s->existing[s->existing_count++] = i;
        return 0;
    }
    if (code != ZK_OK)
        return fail(err, err_len, "create " BENCH_KEY_FMT ": %s", (uint32_t)i, zk_err_name(code));
    return 0;
}

static void build_set_existing(struct zk_wbuf *w, int32_t xid, size_t i, void *arg)
{
    struct setup_ctx *s = arg;
    char path[BENCH_PATH_MAX];
    bench_key_path(path, sizeof(path), (uint32_t)s->existing[i]);
    bench_put_setdata(w, xid, path, s->value, s->cfg->value_size_bytes);
}

static int on_set_existing(size_t i, int32_t code, struct base_rd *body, void *arg, char *err,
                           size_t err_len)
{
    struct setup_ctx *s = arg;
    if (code != ZK_OK)
        return fail(err, err_len, "setData " BENCH_KEY_FMT ": %s", (uint32_t)s->existing[i],
                    zk_err_name(code));
    return 0;
}

static void build_create_root(struct zk_wbuf *w, int32_t xid, size_t i, void *arg)
{
    bench_put_create(w, xid, BENCH_ROOT, NULL, 0);
}

static int on_create_root(size_t i, int32_t code, struct base_rd *body, void *arg, char *err,
                          size_t err_len)
{
    if (code != ZK_OK && code != ZK_ENODEEXISTS)
        return fail(err, err_len, "create " BENCH_ROOT ": %s", zk_err_name(code));
    return 0;
}

/* Sends closeSession and waits for its reply, so the server drops the
 * session now rather than after the session timeout. */
static void close_conn(struct conn *c)
{
    char err[128];
    zk_wbuf_reset(&c->out);
    int32_t xid = c->next_xid++;
    bench_put_close(&c->out, xid);
    if (!c->out.err && send_all(c->fd, c->out.p, c->out.len) == 0) {
        int32_t code;
        struct base_rd body;
        (void)read_reply(c, xid, &code, &body, err, sizeof(err)); /* best effort */
    }
    close(c->fd);
    zk_wbuf_free(&c->out);
    free(c->in);
}

static int open_conn(struct conn *c, const struct bench_cfg *cfg, char *err, size_t err_len)
{
    memset(c, 0, sizeof(*c));
    c->next_xid = 1;
    zk_wbuf_init(&c->out);
    c->fd = bench_connect(cfg, err, err_len);
    if (c->fd < 0) {
        zk_wbuf_free(&c->out);
        return -1;
    }
    return 0;
}

int bench_setup(const struct bench_cfg *cfg, char *err, size_t err_len)
{
    struct conn c;
    if (open_conn(&c, cfg, err, err_len) != 0)
        return -1;
    struct setup_ctx s = { .cfg = cfg };
    char *value = malloc(cfg->value_size_bytes + 1);
    s.existing = malloc(sizeof(size_t) * cfg->keys);
    int rc = -1;
    if (!value || !s.existing) {
        fail(err, err_len, "out of memory");
        goto out;
    }
    for (uint32_t i = 0; i < cfg->value_size_bytes; i++)
        value[i] = (char)('a' + i % 26);
    s.value = value;
    size_t req_bytes = cfg->value_size_bytes + BENCH_PATH_MAX + 64;
    if (pipeline(&c, 1, 64, build_create_root, on_create_root, &s, err, err_len) == 0 &&
        pipeline(&c, cfg->keys, req_bytes, build_create_key, on_create_key, &s, err, err_len) == 0 &&
        pipeline(&c, s.existing_count, req_bytes, build_set_existing, on_set_existing, &s, err,
                 err_len) == 0)
        rc = 0;
out:
    free(value);
    free(s.existing);
    close_conn(&c);
    return rc;
}

/* ---- cleanup -------------------------------------------------------- */

struct cleanup_ctx {
    char (*names)[BENCH_PATH_MAX]; /* full paths of other children */
    size_t count;
};

static void build_delete_key(struct zk_wbuf *w, int32_t xid, size_t i, void *arg)
{
    char path[BENCH_PATH_MAX];
    bench_key_path(path, sizeof(path), (uint32_t)i);
    bench_put_delete(w, xid, path);
}

static int on_delete(size_t i, int32_t code, struct base_rd *body, void *arg, char *err,
                     size_t err_len)
{
    if (code != ZK_OK && code != ZK_ENONODE)
        return fail(err, err_len, "delete: %s", zk_err_name(code));
    return 0;
}

static void build_list_root(struct zk_wbuf *w, int32_t xid, size_t i, void *arg)
{
    bench_put_children(w, xid, BENCH_ROOT);
}

static int on_list_root(size_t i, int32_t code, struct base_rd *body, void *arg, char *err,
                        size_t err_len)
{
    struct cleanup_ctx *cl = arg;
    if (code == ZK_ENONODE)
        return 0;
    struct zk_strvec v;
    if (code != ZK_OK)
        return fail(err, err_len, "getChildren " BENCH_ROOT ": %s", zk_err_name(code));
    if (!zk_get_strvec(body, &v))
        return fail(err, err_len, "getChildren " BENCH_ROOT ": malformed reply");
    if (v.count > 0) {
        cl->names = calloc((size_t)v.count, sizeof(*cl->names));
        if (!cl->names) {
            zk_strvec_free(&v);
            return fail(err, err_len, "out of memory");
        }
    }
    for (int32_t k = 0; k < v.count; k++)
        if (v.items[k].len < BENCH_PATH_MAX - (int32_t)sizeof(BENCH_ROOT) - 1)
            snprintf(cl->names[cl->count++], BENCH_PATH_MAX, BENCH_ROOT "/%.*s", v.items[k].len,
                     v.items[k].ptr);
    zk_strvec_free(&v);
    return 0;
}

static void build_delete_listed(struct zk_wbuf *w, int32_t xid, size_t i, void *arg)
{
    struct cleanup_ctx *cl = arg;
    bench_put_delete(w, xid, i < cl->count ? cl->names[i] : BENCH_ROOT);
}

int bench_cleanup(const struct bench_cfg *cfg, char *err, size_t err_len)
{
    struct conn c;
    if (open_conn(&c, cfg, err, err_len) != 0)
        return -1;
    struct cleanup_ctx cl = { 0 };
    int rc = -1;
    /* Keys first, by name (a getChildren of millions of keys would exceed
     * jute.maxbuffer); then what is left, then the root itself (index count). */
    if (pipeline(&c, cfg->keys, 96, build_delete_key, on_delete, NULL, err, err_len) == 0 &&
        pipeline(&c, 1, 64, build_list_root, on_list_root, &cl, err, err_len) == 0 &&
        pipeline(&c, cl.count + 1, 96, build_delete_listed, on_delete, &cl, err, err_len) == 0)
        rc = 0;
    free(cl.names);
    close_conn(&c);
    return rc;
}
