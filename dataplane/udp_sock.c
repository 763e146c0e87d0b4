/*
 * udp_sock.c — the UDP read path over the kernel's sockets (dataplane/UDP.md):
 * one SO_REUSEPORT socket per worker on cfg.udp_host:udp_port, so the
 * kernel spreads clients over the workers, each reading a batch of
 * datagrams with one recvmmsg and answering them with one sendmmsg. The
 * requests themselves are dp_udp_handle's (udp.c); this file is the I/O.
 *
 * A worker serves its socket from its own epoll loop (level-triggered), at
 * most UDP_BATCHES_PER_PASS batches a pass so that its TCP connections
 * are not starved; what is left is there on the next pass.
 *
 * What waits meanwhile sits in the socket's receive buffer. The kernel's
 * default (net.core.rmem_default, 208 KiB) holds a couple of hundred
 * small datagrams on loopback, fewer than the reads a few clients keep in
 * flight, so a worker off its CPU for a moment lost some (a thousand in a
 * five-second larch-bench run). Each socket asks for UDP_RCVBUF_BYTES,
 * past net.core.rmem_max where larchd may (CAP_NET_ADMIN); mntr shows
 * what the kernel granted and counts what still overflowed (SO_RXQ_OVFL).
 */
#include "dataplane/dp_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <urcu.h>

#define UDP_BATCH 32
#define UDP_BATCHES_PER_PASS 8
#define UDP_BUF_BYTES 65536   /* the largest UDP payload fits */
#define UDP_REPLY_MAX 65507   /* the largest IPv4 UDP payload */
#define UDP_RCVBUF_BYTES (8 << 20)
#define UDP_CMSG_BYTES 64     /* room for SO_RXQ_OVFL's one uint32_t */

struct udp_batch {
    struct mmsghdr in[UDP_BATCH];
    struct mmsghdr out[UDP_BATCH];
    struct iovec iov_in[UDP_BATCH];
    struct iovec iov_out[UDP_BATCH];
    struct sockaddr_storage from[UDP_BATCH];
    union { /* aligned for struct cmsghdr */
        struct cmsghdr align;
        uint8_t bytes[UDP_CMSG_BYTES];
    } control[UDP_BATCH];
    struct zk_wbuf reply[UDP_BATCH];
    uint8_t *buf; /* UDP_BATCH x UDP_BUF_BYTES */
};

static void batch_free(struct udp_batch *b)
{
    if (!b)
        return;
    for (int i = 0; i < UDP_BATCH; i++)
        zk_wbuf_free(&b->reply[i]);
    free(b->buf);
    free(b);
}

static struct udp_batch *batch_new(void)
{
    struct udp_batch *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    /* address space: pages are touched only by datagrams that need them */
    b->buf = malloc((size_t)UDP_BATCH * UDP_BUF_BYTES);
    if (!b->buf) {
        free(b);
        return NULL;
    }
    for (int i = 0; i < UDP_BATCH; i++)
        zk_wbuf_init(&b->reply[i]);
    return b;
}

/* The receive buffer UDP_RCVBUF_BYTES asks for: past rmem_max when the
 * process may (SO_RCVBUFFORCE), else as much as rmem_max allows. */
static int size_receive_buffer(int fd)
{
    int want = UDP_RCVBUF_BYTES;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &want, sizeof want) == 0)
        return 0;
    if (errno != EPERM)
        return -errno;
    return setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &want, sizeof want) == 0 ? 0 : -errno;
}

/* One socket on sa (port: the first socket's, so that all share it). */
static int open_one(const struct sockaddr_storage *sa, socklen_t len)
{
    int fd = socket(sa->ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1, rc;
    if ((rc = size_receive_buffer(fd)) != 0) {
        close(fd);
        return rc;
    }
    if (setsockopt(fd, SOL_SOCKET, SO_RXQ_OVFL, &one, sizeof one) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0 ||
        bind(fd, (const struct sockaddr *)sa, len) != 0) {
        rc = -errno;
        close(fd);
        return rc;
    }
    return fd;
}

int udp_sock_open(struct dp *dp, char *err, size_t errlen)
{
    struct sockaddr_storage sa = { 0 };
    socklen_t len;
    const char *host = dp->cfg.udp_host;
    if (inet_pton(AF_INET, host, &((struct sockaddr_in *)&sa)->sin_addr) == 1) {
        sa.ss_family = AF_INET;
        ((struct sockaddr_in *)&sa)->sin_port = htons((uint16_t)dp->cfg.udp_port);
        len = sizeof(struct sockaddr_in);
    } else if (inet_pton(AF_INET6, host, &((struct sockaddr_in6 *)&sa)->sin6_addr) == 1) {
        sa.ss_family = AF_INET6;
        ((struct sockaddr_in6 *)&sa)->sin6_port = htons((uint16_t)dp->cfg.udp_port);
        len = sizeof(struct sockaddr_in6);
    } else {
        snprintf(err, errlen, "UDP address '%s' is not an IP address literal", host);
        return -1;
    }
    for (int i = 0; i < dp->nworkers; i++) {
        struct worker *w = &dp->workers[i];
        int fd = open_one(&sa, len);
        if (fd < 0) {
            snprintf(err, errlen, "cannot bind UDP %s:%d: %s", host, dp->cfg.udp_port,
                     strerror(-fd));
            return -1;
        }
        w->udp_fd = fd;
        int granted = 0;
        socklen_t glen = sizeof granted;
        if (getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &granted, &glen) != 0) {
            snprintf(err, errlen, "UDP socket of worker %d: %s", i, strerror(errno));
            return -1;
        }
        w->udp_rcvbuf_bytes = (uint64_t)granted;
        w->udp = batch_new();
        struct epoll_event ev = { .events = EPOLLIN, .data.u64 = DP_EV_UDP };
        if (!w->udp || epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
            snprintf(err, errlen, "UDP setup of worker %d: %s", i,
                     w->udp ? strerror(errno) : "out of memory");
            return -1;
        }
    }
    dp->udp_port = dp->cfg.udp_port;
    return 0;
}

void udp_sock_close(struct worker *w)
{
    if (w->udp_fd >= 0)
        close(w->udp_fd);
    w->udp_fd = -1;
    batch_free(w->udp);
    w->udp = NULL;
}

/* The source address as ip ACLs match it: an IPv4-mapped IPv6 address as
 * the IPv4 address it is. */
static void peer_addr(const struct sockaddr_storage *sa, struct tree_addr *out)
{
    out->len = 0;
    if (sa->ss_family == AF_INET) {
        out->len = 4;
        memcpy(out->b, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (sa->ss_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        bool mapped = IN6_IS_ADDR_V4MAPPED(a);
        out->len = mapped ? 4 : 16;
        memcpy(out->b, mapped ? &a->s6_addr[12] : a->s6_addr, out->len);
    }
}

/* Publishes the worker's counters for dp_get_stats (another thread). */
static void publish_counters(struct worker *w)
{
    const struct dp_udp_counters *c = &w->udp_ctr;
    atomic_store_explicit(&w->st_udp_datagrams, c->datagrams, memory_order_relaxed);
    for (int i = 0; i < ZK_UDP_STATUSES; i++)
        atomic_store_explicit(&w->st_udp_answered[i], c->answered[i], memory_order_relaxed);
    for (int i = 0; i < DP_UDP_DROPS; i++)
        atomic_store_explicit(&w->st_udp_dropped[i], c->dropped[i], memory_order_relaxed);
    atomic_store_explicit(&w->st_udp_unsent, w->udp_unsent, memory_order_relaxed);
    atomic_store_explicit(&w->st_udp_overflows, w->udp_overflows, memory_order_relaxed);
}

/* The kernel's count of datagrams dropped on the socket so far, from a
 * received datagram's SO_RXQ_OVFL message; the last one seen when it has
 * none (the kernel adds it once the count is not 0). A datagram carries
 * the count as it was when it was queued, so drops show with the next
 * datagram that gets in. */
static uint32_t overflows_reported(const struct msghdr *m, uint32_t last)
{
    for (const struct cmsghdr *c = CMSG_FIRSTHDR(m); c != NULL;
         c = CMSG_NXTHDR((struct msghdr *)m, (struct cmsghdr *)c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_RXQ_OVFL &&
            c->cmsg_len >= CMSG_LEN(sizeof(uint32_t))) {
            uint32_t n;
            memcpy(&n, CMSG_DATA(c), sizeof n);
            return n;
        }
    }
    return last;
}

/* One batch: false when the socket had nothing (or failed). */
static bool serve_batch(struct worker *w)
{
    struct udp_batch *b = w->udp;
    for (int i = 0; i < UDP_BATCH; i++) {
        b->iov_in[i] = (struct iovec){ b->buf + (size_t)i * UDP_BUF_BYTES, UDP_BUF_BYTES };
        b->in[i].msg_hdr = (struct msghdr){ .msg_name = &b->from[i],
                                            .msg_namelen = sizeof b->from[i],
                                            .msg_iov = &b->iov_in[i], .msg_iovlen = 1,
                                            .msg_control = b->control[i].bytes,
                                            .msg_controllen = sizeof b->control[i] };
    }
    int n = recvmmsg(w->udp_fd, b->in, UDP_BATCH, MSG_DONTWAIT, NULL);
    if (n <= 0)
        return false; /* EAGAIN, or an error a datagram socket recovers from */
    /* the batch's last datagram carries the newest count; it wraps at 2^32 */
    uint32_t ovfl = overflows_reported(&b->in[n - 1].msg_hdr, w->udp_ovfl_seen);
    w->udp_overflows += (uint32_t)(ovfl - w->udp_ovfl_seen);
    w->udp_ovfl_seen = ovfl;
    int nout = 0;
    rcu_read_lock();
    const uint8_t *reqs[UDP_BATCH];
    size_t lens[UDP_BATCH];
    for (int i = 0; i < n; i++) {
        reqs[i] = b->iov_in[i].iov_base;
        lens[i] = b->in[i].msg_len;
    }
    (void)dp_udp_prefetch(w->dp, reqs, lens, (unsigned)n);
    for (int i = 0; i < n; i++) {
        struct tree_addr peer;
        peer_addr(&b->from[i], &peer);
        size_t len = dp_udp_handle(w->dp, b->iov_in[i].iov_base, b->in[i].msg_len, &peer,
                                   UDP_REPLY_MAX, &b->reply[i], &w->udp_ctr);
        if (len == 0)
            continue;
        b->iov_out[nout] = (struct iovec){ b->reply[i].p, len };
        b->out[nout].msg_hdr = (struct msghdr){ .msg_name = &b->from[i],
                                                .msg_namelen = b->in[i].msg_hdr.msg_namelen,
                                                .msg_iov = &b->iov_out[nout], .msg_iovlen = 1 };
        nout++;
    }
    rcu_read_unlock();
    for (int sent = 0; sent < nout;) {
        int k = sendmmsg(w->udp_fd, b->out + sent, (unsigned)(nout - sent), MSG_DONTWAIT);
        if (k <= 0) {
            if (k < 0 && errno == EINTR)
                continue;
            /* a full socket buffer: the client asks again (UDP.md) */
            w->udp_unsent += (uint64_t)(nout - sent);
            break;
        }
        sent += k;
    }
    return n == UDP_BATCH;
}

void udp_sock_pass(struct worker *w)
{
    for (int i = 0; i < UDP_BATCHES_PER_PASS && serve_batch(w); i++)
        ;
    publish_counters(w);
}
