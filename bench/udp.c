/*
 * udp.c — the UDP read driver (--udp IP:PORT): reads over larchd's UDP read
 * path (dataplane/UDP.md) from kernel sockets, with the workloads and
 * histograms of the raw driver.
 *
 * Each session is a connected UDP socket with up to --outstanding requests
 * in flight, closed loop: a reply frees its slot and the next read goes
 * out. A session's reads go out together with one sendmmsg, and replies
 * come in with recvmmsg: the driver's system calls, not the server, would
 * otherwise set the pace. A slot is found from the reply's request id (slot index and a
 * generation, so that a late reply to a re-sent request is not taken for
 * the new one). A request unanswered for RESEND_NS is counted as lost (a
 * datagram is gone: CONNECTIONLOSS in the error table) and its slot sends
 * a fresh read. In a read/write mix (--read-ratio below 100) a slot's
 * write goes over the thread's TCP session (tcpw.c) as setData: the UDP
 * path carries reads only. Watches need TCP, which the raw driver drives.
 */
#include "bench/bench.h"
#include "dataplane/dataplane.h"
#include "proto/proto.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define RESEND_NS 200000000ull /* 200 ms */
#define EVENTS_MAX 64
#define POLL_MS 20
#define REPLY_BYTES_MAX 65536
#define SLOT_BITS 16 /* a request id: generation << 16 | slot */
#define BATCH 64       /* datagrams per sendmmsg / recvmmsg */
#define REQ_BYTES_MAX 128

struct uslot {
    uint64_t rid;   /* 0: free; WRITE_RID: a write in flight over TCP */
    uint64_t t0_ns;
};
#define WRITE_RID UINT64_MAX

struct usession {
    int fd;
    struct uslot *slots;
    uint32_t inflight;
    uint64_t gen;
    struct bench_rng rng;
};

struct uworker {
    const struct bench_cfg *cfg;
    const struct bench_keys *keys;
    _Atomic int *phase;
    int cur_phase;
    int ep;
    struct usession *sessions;
    int nsessions;
    struct bench_counts counts;
    struct bench_hist all, read, write;
    double read_pct;
    const char *value;     /* what writes set */
    struct bench_tcpw tcp; /* the writes' session (fd -1: a reads-only run) */
    bool tcp_broken;
    pthread_t thread;
    bool started;
    char err[160];
    uint8_t *reply; /* BATCH x REPLY_BYTES_MAX */
    struct zk_wbuf req;
    uint8_t reqs[BATCH][REQ_BYTES_MAX];
    struct iovec iov[BATCH];
    struct mmsghdr msgs[BATCH];
    int nreqs;
};

/* Sends what queue_read queued for s (one system call per BATCH). */
static void send_queued(struct uworker *w, struct usession *s)
{
    for (int sent = 0; sent < w->nreqs;) {
        int k = sendmmsg(s->fd, w->msgs + sent, (unsigned)(w->nreqs - sent), MSG_DONTWAIT);
        if (k <= 0) {
            if (w->err[0] == '\0')
                snprintf(w->err, sizeof w->err, "sendmmsg: %s", strerror(errno));
            break; /* the unsent are re-sent after RESEND_NS */
        }
        sent += k;
    }
    w->nreqs = 0;
}

/* Queues a read from slot i of s. */
static void queue_read(struct uworker *w, struct usession *s, uint32_t i, uint64_t now_ns)
{
    if (w->nreqs == BATCH)
        send_queued(w, s);
    char path[64];
    bench_key_path(path, sizeof path, bench_keys_pick(w->keys, &s->rng));
    uint64_t rid = (++s->gen << SLOT_BITS) | i;
    zk_wbuf_reset(&w->req);
    bench_put_udp_read(&w->req, rid, w->cfg->read_op, path);
    s->slots[i] = (struct uslot){ .rid = rid, .t0_ns = now_ns };
    if (w->req.err || w->req.len > REQ_BYTES_MAX)
        return; /* key paths are short: cannot happen, and a lost read is re-sent */
    int k = w->nreqs++;
    memcpy(w->reqs[k], w->req.p, w->req.len);
    w->iov[k] = (struct iovec){ w->reqs[k], w->req.len };
    w->msgs[k].msg_hdr = (struct msghdr){ .msg_iov = &w->iov[k], .msg_iovlen = 1 };
}

static void take_reply(struct uworker *w, struct usession *s, const uint8_t *d, size_t n,
                       uint64_t now_ns)
{
    struct zk_udp_reply r;
    if (!zk_get_udp_reply(d, n, &r))
        return;
    uint64_t rid = r.request_id;
    uint32_t i = (uint32_t)(rid & ((1u << SLOT_BITS) - 1));
    if (i >= (uint32_t)w->cfg->outstanding || s->slots[i].rid != rid)
        return; /* a reply to a request given up on */
    uint32_t status = r.status;
    int32_t err = r.h.err;
    uint64_t t0 = s->slots[i].t0_ns;
    s->slots[i].rid = 0;
    s->inflight--;
    if (w->cur_phase != BENCH_PHASE_MEASURE)
        return;
    /* a UDP status other than OK is no read: counted as SYSTEMERROR */
    bench_record_op(&w->counts, &w->all, &w->read, false,
                    status != ZK_UDP_OK ? ZK_ESYSTEMERROR : err, t0, now_ns);
}

/* Fills free slots, and gives up on (and re-sends) the overdue. */
/* Queues a setData from slot i of s on the thread's TCP session; its xid
 * names the session and the slot. */
static void queue_write(struct uworker *w, struct usession *s, uint32_t i, uint64_t now_ns)
{
    char path[64];
    bench_key_path(path, sizeof path, bench_keys_pick(w->keys, &s->rng));
    int32_t xid = (int32_t)((s - w->sessions) * w->cfg->outstanding + (int32_t)i);
    bench_tcpw_set(&w->tcp, xid, path, w->value, w->cfg->value_size_bytes);
    s->slots[i] = (struct uslot){ .rid = WRITE_RID, .t0_ns = now_ns };
}

/* A write's reply (tcpw.c): the slot it came from is free again. */
static void write_done(void *arg, int32_t xid, int32_t err)
{
    struct uworker *w = arg;
    int32_t per = w->cfg->outstanding;
    if (xid / per >= w->nsessions)
        return;
    struct usession *s = &w->sessions[xid / per];
    struct uslot *slot = &s->slots[xid % per];
    if (slot->rid != WRITE_RID)
        return;
    slot->rid = 0;
    s->inflight--;
    if (w->cur_phase == BENCH_PHASE_MEASURE)
        bench_record_op(&w->counts, &w->all, &w->write, true, err, slot->t0_ns,
                        (uint64_t)base_mono_ns());
}

/* The write session broke: its writes are lost, and the run goes on reading. */
static void drop_writes(struct uworker *w)
{
    if (w->tcp_broken)
        return;
    w->tcp_broken = true;
    w->counts.sessions_lost++;
    snprintf(w->err, sizeof w->err, "the TCP write session broke (port %u)", w->cfg->port);
    for (int k = 0; k < w->nsessions; k++) {
        struct usession *s = &w->sessions[k];
        for (uint32_t i = 0; i < (uint32_t)w->cfg->outstanding; i++) {
            if (s->slots[i].rid != WRITE_RID)
                continue;
            s->slots[i].rid = 0;
            s->inflight--;
            if (w->cur_phase == BENCH_PHASE_MEASURE)
                bench_counts_error(&w->counts, ZK_ECONNECTIONLOSS);
        }
    }
}

/* Fills free slots, and gives up on (and re-sends) the overdue reads; a
 * write waits for its TCP reply. */
static void fill(struct uworker *w, struct usession *s, uint64_t now_ns)
{
    for (uint32_t i = 0; i < (uint32_t)w->cfg->outstanding; i++) {
        uint64_t rid = s->slots[i].rid;
        if (rid == WRITE_RID || (rid != 0 && now_ns - s->slots[i].t0_ns < RESEND_NS))
            continue;
        if (rid != 0) {
            s->inflight--;
            if (w->cur_phase == BENCH_PHASE_MEASURE)
                bench_counts_error(&w->counts, ZK_ECONNECTIONLOSS);
        }
        if (w->cur_phase == BENCH_PHASE_DRAIN) {
            s->slots[i].rid = 0;
            continue;
        }
        if (w->tcp.fd >= 0 && !w->tcp_broken && !bench_pick_read(w->read_pct, &s->rng))
            queue_write(w, s, i, now_ns);
        else
            queue_read(w, s, i, now_ns);
        s->inflight++;
    }
    send_queued(w, s);
}

static void drain_socket(struct uworker *w, struct usession *s)
{
    struct iovec iov[BATCH];
    struct mmsghdr in[BATCH];
    for (;;) {
        for (int i = 0; i < BATCH; i++) {
            iov[i] = (struct iovec){ w->reply + (size_t)i * REPLY_BYTES_MAX, REPLY_BYTES_MAX };
            in[i].msg_hdr = (struct msghdr){ .msg_iov = &iov[i], .msg_iovlen = 1 };
        }
        int n = recvmmsg(s->fd, in, BATCH, MSG_DONTWAIT, NULL);
        if (n <= 0)
            return; /* EAGAIN; an ICMP error (no server yet) shows as lost reads */
        uint64_t now_ns = (uint64_t)base_mono_ns();
        for (int i = 0; i < n; i++)
            take_reply(w, s, iov[i].iov_base, in[i].msg_len, now_ns);
        if (n < BATCH)
            return;
    }
}

static void *uworker_main(void *arg)
{
    struct uworker *w = arg;
    for (;;) {
        w->cur_phase = atomic_load_explicit(w->phase, memory_order_acquire);
        uint64_t now_ns = (uint64_t)base_mono_ns();
        bool idle = true;
        for (int i = 0; i < w->nsessions; i++)
            fill(w, &w->sessions[i], now_ns);
        if (w->tcp.fd >= 0 && !w->tcp_broken && bench_tcpw_pump(&w->tcp, write_done, w) != 0)
            drop_writes(w);
        for (int i = 0; i < w->nsessions; i++)
            idle &= w->sessions[i].inflight == 0;
        if (w->cur_phase == BENCH_PHASE_DRAIN && idle)
            return NULL;
        struct epoll_event ev[EVENTS_MAX];
        int n = epoll_wait(w->ep, ev, EVENTS_MAX, POLL_MS);
        for (int i = 0; i < n; i++) {
            if (ev[i].data.ptr == &w->tcp) {
                if (!w->tcp_broken && bench_tcpw_pump(&w->tcp, write_done, w) != 0)
                    drop_writes(w);
            } else {
                drain_socket(w, ev[i].data.ptr);
            }
        }
    }
}

static int open_session(struct uworker *w, struct usession *s, const struct sockaddr_storage *sa,
                        socklen_t len, uint64_t seed)
{
    s->slots = calloc((size_t)w->cfg->outstanding, sizeof *s->slots);
    s->fd = socket(sa->ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    bench_rng_seed(&s->rng, seed);
    if (!s->slots || s->fd < 0 || connect(s->fd, (const struct sockaddr *)sa, len) != 0)
        return -1;
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = s };
    return epoll_ctl(w->ep, EPOLL_CTL_ADD, s->fd, &ev);
}

static int server_addr(const struct bench_cfg *cfg, struct sockaddr_storage *sa, socklen_t *len)
{
    memset(sa, 0, sizeof *sa);
    struct sockaddr_in *v4 = (struct sockaddr_in *)sa;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)sa;
    if (inet_pton(AF_INET, cfg->udp_host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(cfg->udp_port);
        *len = sizeof *v4;
        return 0;
    }
    if (inet_pton(AF_INET6, cfg->udp_host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(cfg->udp_port);
        *len = sizeof *v6;
        return 0;
    }
    return -1;
}

static void free_workers(struct uworker *ws, int n)
{
    for (int t = 0; t < n; t++) {
        struct uworker *w = &ws[t];
        for (int i = 0; w->sessions && i < w->nsessions; i++) {
            if (w->sessions[i].fd >= 0)
                close(w->sessions[i].fd);
            free(w->sessions[i].slots);
        }
        free(w->sessions);
        if (w->ep >= 0)
            close(w->ep);
        free(w->reply);
        zk_wbuf_free(&w->req);
        bench_tcpw_close(&w->tcp);
    }
    free(ws);
}

static int init_worker(struct uworker *w, const struct bench_cfg *cfg, int t,
                       const struct sockaddr_storage *sa, socklen_t len)
{
    w->cfg = cfg;
    w->nsessions = cfg->sessions / cfg->threads + (t < cfg->sessions % cfg->threads);
    w->ep = epoll_create1(EPOLL_CLOEXEC);
    w->sessions = calloc((size_t)w->nsessions, sizeof *w->sessions);
    w->reply = malloc((size_t)BATCH * REPLY_BYTES_MAX);
    zk_wbuf_init(&w->req);
    bench_hist_reset(&w->all);
    bench_hist_reset(&w->read);
    bench_hist_reset(&w->write);
    if (w->ep < 0 || !w->sessions || !w->reply)
        return -1;
    for (int i = 0; i < w->nsessions; i++)
        w->sessions[i].fd = -1;
    for (int i = 0; i < w->nsessions; i++)
        if (open_session(w, &w->sessions[i], sa, len,
                         cfg->seed ^ ((uint64_t)t << 32 | (uint64_t)i)) != 0)
            return -1;
    return 0;
}

static bool always(void *arg)
{
    (void)arg;
    return true;
}

int bench_udp_run(const struct bench_cfg *cfg, double read_pct, struct bench_result *r,
                  char *err, size_t err_len)
{
    _Atomic int phase = BENCH_PHASE_WARMUP;
    struct bench_keys keys;
    struct sockaddr_storage sa;
    socklen_t len;
    err[0] = '\0';
    bench_keys_init(&keys, cfg);
    bench_result_reset(r, read_pct);
    if (server_addr(cfg, &sa, &len) != 0) {
        snprintf(err, err_len, "--udp: '%s' is not an IP address literal", cfg->udp_host);
        return -1;
    }
    struct uworker *ws = calloc((size_t)cfg->threads, sizeof *ws);
    if (!ws) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    char *value = malloc(cfg->value_size_bytes + 1);
    if (!value) {
        free(ws);
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    memset(value, 'v', cfg->value_size_bytes);
    for (int t = 0; t < cfg->threads; t++) {
        ws[t].ep = -1;
        ws[t].tcp.fd = -1;
    }
    int rc = 0;
    for (int t = 0; t < cfg->threads && rc == 0; t++) {
        ws[t].keys = &keys;
        ws[t].phase = &phase;
        ws[t].read_pct = read_pct;
        ws[t].value = value;
        rc = init_worker(&ws[t], cfg, t, &sa, len);
    }
    if (rc != 0)
        snprintf(err, err_len, "UDP sockets to %s:%u: %s", cfg->udp_host, cfg->udp_port,
                 strerror(errno));
    /* a mix: each thread's writes go over a TCP session of its own */
    for (int t = 0; t < cfg->threads && rc == 0 && read_pct < 100; t++) {
        rc = bench_tcpw_open(&ws[t].tcp, cfg, err, err_len);
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &ws[t].tcp };
        if (rc == 0 && epoll_ctl(ws[t].ep, EPOLL_CTL_ADD, ws[t].tcp.fd, &ev) != 0) {
            snprintf(err, err_len, "epoll: %s", strerror(errno));
            rc = -1;
        }
    }
    for (int t = 0; t < cfg->threads && rc == 0; t++) {
        if (pthread_create(&ws[t].thread, NULL, uworker_main, &ws[t]) != 0) {
            snprintf(err, err_len, "cannot start the driver threads: %s", strerror(errno));
            rc = -1;
        } else {
            ws[t].started = true;
        }
    }
    if (rc == 0)
        rc = bench_timeline(cfg, &phase, r, always, NULL);
    atomic_store(&phase, BENCH_PHASE_DRAIN);
    for (int t = 0; t < cfg->threads; t++) {
        if (!ws[t].started)
            continue;
        pthread_join(ws[t].thread, NULL);
        bench_counts_add(&r->counts, &ws[t].counts);
        bench_hist_merge(&r->all, &ws[t].all);
        bench_hist_merge(&r->read, &ws[t].read);
        bench_hist_merge(&r->write, &ws[t].write);
        if (ws[t].err[0])
            fprintf(stderr, "larch-bench: warning: %s\n", ws[t].err);
    }
    free_workers(ws, cfg->threads);
    free(value);
    return rc;
}
