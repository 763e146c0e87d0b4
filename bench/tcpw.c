/*
 * tcpw.c — the write channel of the UDP and DPDK drivers: their sessions
 * read over UDP, which carries reads only (dataplane/UDP.md), so the writes
 * of a read/write mix go over one TCP session per driver thread, as a
 * co-located application would send them. Non-blocking: the driver's loop
 * pumps it between its own bursts, and it pings when writes are rare so
 * the session outlives any run.
 */
#include "bench/bench.h"
#include "proto/proto.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define READ_CHUNK 65536
#define FRAME_MAX (ZK_MAX_BUFFER_DEFAULT + 4)

int bench_tcpw_open(struct bench_tcpw *t, const struct bench_cfg *cfg, char *err, size_t err_len)
{
    memset(t, 0, sizeof *t);
    zk_wbuf_init(&t->out);
    t->ping_ns = (int64_t)cfg->timeout_ms * 1000000 / 3;
    t->last_send_ns = base_mono_ns();
    t->fd = bench_connect(cfg, err, err_len);
    if (t->fd < 0)
        return -1;
    int fl = fcntl(t->fd, F_GETFL);
    if (fl < 0 || fcntl(t->fd, F_SETFL, fl | O_NONBLOCK) != 0) {
        snprintf(err, err_len, "write session: fcntl: %s", strerror(errno));
        bench_tcpw_close(t);
        return -1;
    }
    return 0;
}

void bench_tcpw_close(struct bench_tcpw *t)
{
    if (t->fd > 0)
        close(t->fd);
    t->fd = -1;
    zk_wbuf_free(&t->out);
    free(t->in);
    t->in = NULL;
}

void bench_tcpw_set(struct bench_tcpw *t, int32_t xid, const char *path, const void *value,
                    uint32_t value_len)
{
    bench_put_setdata(&t->out, xid, path, value, value_len);
    t->last_send_ns = base_mono_ns();
}

static int flush_out(struct bench_tcpw *t)
{
    while (t->out_off < t->out.len) {
        ssize_t n = send(t->fd, t->out.p + t->out_off, t->out.len - t->out_off, MSG_NOSIGNAL);
        if (n < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
        t->out_off += (size_t)n;
    }
    zk_wbuf_reset(&t->out);
    t->out_off = 0;
    return 0;
}

/* Hands every whole reply frame in t->in to done and keeps the rest. */
static int take_frames(struct bench_tcpw *t, bench_tcpw_done_fn done, void *arg)
{
    size_t at = 0;
    while (t->in_len - at >= 4) {
        uint32_t n = base_get_be32(t->in + at);
        if (n < 16 || n > FRAME_MAX)
            return -1; /* not a ZooKeeper reply frame */
        if (t->in_len - at - 4 < n)
            break;
        struct base_rd r;
        base_rd_init(&r, t->in + at + 4, n);
        struct zk_reply_header h;
        if (!zk_get_reply_header(&r, &h))
            return -1;
        if (h.xid >= 0) /* pings and notifications are not write replies */
            done(arg, h.xid, h.err);
        at += 4 + n;
    }
    memmove(t->in, t->in + at, t->in_len - at);
    t->in_len -= at;
    return 0;
}

int bench_tcpw_pump(struct bench_tcpw *t, bench_tcpw_done_fn done, void *arg)
{
    if (t->out.len == 0 && base_mono_ns() - t->last_send_ns > t->ping_ns) {
        bench_put_ping(&t->out);
        t->last_send_ns = base_mono_ns();
    }
    if (t->fd < 0 || t->out.err || flush_out(t) != 0)
        return -1;
    for (;;) {
        if (t->in_cap - t->in_len < READ_CHUNK) {
            if (base_grow(&t->in, &t->in_cap, t->in_len + READ_CHUNK, 1) != 0)
                return -1;
        }
        ssize_t n = recv(t->fd, t->in + t->in_len, t->in_cap - t->in_len, MSG_DONTWAIT);
        if (n == 0)
            return -1;
        if (n < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
        t->in_len += (size_t)n;
        if (take_frames(t, done, arg) != 0)
            return -1;
    }
}
