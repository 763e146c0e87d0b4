/*
 * dpdk.c — the DPDK read driver (--dpdk 'EAL ARGS' with --udp IP:PORT):
 * reads over larchd's UDP path from a poll-mode port of the bench's own
 * (memif to a co-located larchd, af_packet, a NIC), with the workloads and
 * histograms of the other drivers.
 *
 * One thread polls the port (the main thread runs the timeline, as with
 * the other drivers). Each session is a UDP
 * source port with --outstanding reads in flight, closed loop; requests are
 * whole Ethernet frames built in mbufs and sent in bursts, replies are
 * matched by request id as in udp.c. The server's MAC is learnt by ARP
 * first (larchd answers it). A read unanswered for RESEND_NS is counted
 * lost and sent again. In a read/write mix a slot's write goes over a TCP
 * session through the kernel (tcpw.c), pumped between bursts while writes
 * are in flight.
 *
 * The driver must outrun one poll-mode server core, so a pass costs what
 * its replies cost: each session keeps a stack of its free slots (a pass
 * sends from those, not a walk over every slot), lost reads are looked for
 * every SCAN_NS only, and a frame's headers are a template with two
 * lengths and the IPv4 checksum filled in.
 *
 * With --rate the loop is open, as in raw.c: each session sends on a fixed
 * schedule (rate / sessions each, staggered) while it has a free slot, and
 * a read's latency runs from its intended send time, so a stall shows as
 * latency of everything scheduled behind it, not as fewer samples.
 */
#include "bench/bench.h"
#include "dataplane/dataplane.h"
#include "proto/proto.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#define RESEND_NS 200000000ull
#define SCAN_NS 10000000ull /* lost reads are looked for this often */
#define SLOT_BITS 16
#define BURST 32
#define MBUFS 8191
#define EAL_ARGS_MAX 64
#define SRC_PORT_BASE 20000
#define FRAME_HEADERS 42 /* Ethernet, IPv4, UDP */
#define WRITE_RID UINT64_MAX /* a slot's write in flight over TCP */

struct dslot {
    uint64_t rid; /* 0: free; WRITE_RID: a write */
    uint64_t t0_ns;   /* latency from here: the send, or the intended send (open loop) */
    uint64_t sent_ns; /* a read unanswered RESEND_NS after this is lost */
};

struct dsess {
    struct dslot *slots;
    uint32_t *free; /* the indexes of the slots not in flight, a stack */
    uint32_t nfree;
    uint64_t next_intended_ns; /* open loop: this session's next send */
    uint64_t gen;
    struct bench_rng rng;
};

struct ddrv {
    const struct bench_cfg *cfg;
    const struct bench_keys *keys;
    uint16_t port;
    struct rte_mempool *pool;
    uint8_t mac[6], server_mac[6];
    uint8_t ip[4], server_ip[4];
    struct dsess *sessions;
    struct bench_counts counts;
    struct bench_hist all, read, write;
    double read_pct;
    const char *value;     /* what writes set */
    struct bench_tcpw tcp; /* a mix's writes (fd -1: reads only) */
    uint32_t writes;       /* in flight */
    uint64_t interval_ns;  /* open loop: between one session's sends; 0 closed loop */
    uint64_t inflight;     /* slots in flight, reads and writes */
    uint64_t next_scan_ns; /* when expire_lost next looks */
    uint8_t hdr[FRAME_HEADERS]; /* every request's headers, lengths and checksum 0 */
    uint32_t ip_sum;            /* hdr's IPv4 header summed (base_csum_add) */
    bool tcp_broken;
    struct rte_mbuf *tx[BURST];
    int ntx;
    int cur_phase;
    _Atomic int *phase;
    struct zk_wbuf req; /* the next request's datagram, reused */
};

static void flush_tx(struct ddrv *d)
{
    uint16_t sent = d->ntx ? rte_eth_tx_burst(d->port, 0, d->tx, (uint16_t)d->ntx) : 0;
    for (int i = sent; i < d->ntx; i++)
        rte_pktmbuf_free(d->tx[i]); /* re-sent after RESEND_NS */
    d->ntx = 0;
}

static void queue_frame(struct ddrv *d, struct rte_mbuf *m)
{
    d->tx[d->ntx++] = m;
    if (d->ntx == BURST)
        flush_tx(d);
}

/* The headers every request frame shares, once the server's MAC is known:
 * the IPv4 total length, its checksum, the source port and the UDP length
 * are 0, filled in per frame. */
static void make_template(struct ddrv *d)
{
    uint8_t *f = d->hdr;
    memset(f, 0, sizeof d->hdr);
    memcpy(f, d->server_mac, 6);
    memcpy(f + 6, d->mac, 6);
    base_put_be16(f + 12, 0x0800);
    uint8_t *ip = f + 14;
    ip[0] = 0x45;
    ip[8] = 64;
    ip[9] = 17;
    memcpy(ip + 12, d->ip, 4);
    memcpy(ip + 16, d->server_ip, 4);
    base_put_be16(ip + 20 + 2, d->cfg->udp_port);
    d->ip_sum = base_csum_add(0, ip, 20);
}

/* An IPv4/UDP frame to the server from source port sport with payload n
 * bytes at p. NULL without mbufs. */
static struct rte_mbuf *udp_frame(struct ddrv *d, uint16_t sport, const uint8_t *p, size_t n)
{
    struct rte_mbuf *m = rte_pktmbuf_alloc(d->pool);
    if (!m)
        return NULL;
    uint8_t *f = (uint8_t *)rte_pktmbuf_append(m, (uint16_t)(FRAME_HEADERS + n));
    if (!f) {
        rte_pktmbuf_free(m);
        return NULL;
    }
    memcpy(f, d->hdr, FRAME_HEADERS);
    uint8_t *ip = f + 14, *u = ip + 20;
    base_put_be16(ip + 2, (uint16_t)(28 + n));
    /* the template's sum plus the length (a word of its own in the header) */
    base_put_be16(ip + 10, base_csum_fold(base_csum_add(d->ip_sum, ip + 2, 2)));
    base_put_be16(u, sport);
    base_put_be16(u + 4, (uint16_t)(8 + n)); /* the checksum stays 0: optional in IPv4 */
    memcpy(u + 8, p, n);
    return m;
}

/* Slot i of s is no longer in flight. */
static void slot_free(struct ddrv *d, struct dsess *s, uint32_t i)
{
    s->slots[i].rid = 0;
    s->free[s->nfree++] = i;
    d->inflight--;
}

static void send_read(struct ddrv *d, int si, uint32_t i, uint64_t t0_ns, uint64_t now_ns)
{
    struct dsess *s = &d->sessions[si];
    char path[64];
    (void)bench_key_path(path, sizeof path, bench_keys_pick(d->keys, &s->rng));
    uint64_t rid = (++s->gen << SLOT_BITS) | i;
    zk_wbuf_reset(&d->req);
    bench_put_udp_read(&d->req, rid, d->cfg->read_op, path);
    s->slots[i] = (struct dslot){ .rid = rid, .t0_ns = t0_ns, .sent_ns = now_ns };
    if (d->req.err)
        return; /* no memory: the slot is re-sent after RESEND_NS */
    struct rte_mbuf *m = udp_frame(d, (uint16_t)(SRC_PORT_BASE + si), d->req.p, d->req.len);
    if (m)
        queue_frame(d, m);
}

static void take_reply(struct ddrv *d, const uint8_t *f, size_t len, uint64_t now_ns)
{
    if (len < FRAME_HEADERS || base_get_be16(f + 12) != 0x0800 || f[23] != 17)
        return;
    const uint8_t *u = f + 34;
    int si = (int)base_get_be16(u + 2) - SRC_PORT_BASE;
    struct zk_udp_reply r;
    if (si < 0 || si >= d->cfg->sessions || !zk_get_udp_reply(u + 8, len - FRAME_HEADERS, &r))
        return;
    struct dsess *s = &d->sessions[si];
    uint64_t rid = r.request_id;
    uint32_t i = (uint32_t)(rid & ((1u << SLOT_BITS) - 1));
    if (i >= (uint32_t)d->cfg->outstanding || rid == 0 || rid == WRITE_RID ||
        s->slots[i].rid != rid)
        return;
    uint64_t t0 = s->slots[i].t0_ns;
    slot_free(d, s, i);
    if (d->cur_phase != BENCH_PHASE_MEASURE)
        return;
    bench_record_op(&d->counts, &d->all, &d->read, false,
                    r.status != ZK_UDP_OK ? ZK_ESYSTEMERROR : r.h.err, t0, now_ns);
}

/* Reads replies; returns how many frames came. */
static uint16_t poll_rx(struct ddrv *d)
{
    struct rte_mbuf *in[BURST];
    uint16_t n = rte_eth_rx_burst(d->port, 0, in, BURST);
    uint64_t now_ns = (uint64_t)base_mono_ns();
    for (uint16_t i = 0; i < n; i++)
        if (in[i]->nb_segs == 1)
            take_reply(d, rte_pktmbuf_mtod(in[i], const uint8_t *), rte_pktmbuf_data_len(in[i]),
                       now_ns);
    rte_pktmbuf_free_bulk(in, n);
    return n;
}

static void write_done(void *arg, int32_t xid, int32_t err)
{
    struct ddrv *d = arg;
    int32_t per = d->cfg->outstanding;
    if (xid / per >= d->cfg->sessions)
        return;
    struct dsess *s = &d->sessions[xid / per];
    uint32_t i = (uint32_t)(xid % per);
    if (s->slots[i].rid != WRITE_RID)
        return;
    uint64_t t0 = s->slots[i].t0_ns;
    slot_free(d, s, i);
    d->writes--;
    if (d->cur_phase == BENCH_PHASE_MEASURE)
        bench_record_op(&d->counts, &d->all, &d->write, true, err, t0, (uint64_t)base_mono_ns());
}

/* Sends queued writes and takes their replies; a broken session loses
 * its writes and the run goes on reading. */
static void pump_writes(struct ddrv *d)
{
    if (d->tcp.fd < 0 || d->tcp_broken || bench_tcpw_pump(&d->tcp, write_done, d) == 0)
        return;
    d->tcp_broken = true;
    d->counts.sessions_lost++;
    for (int si = 0; si < d->cfg->sessions; si++)
        for (uint32_t i = 0; i < (uint32_t)d->cfg->outstanding; i++)
            if (d->sessions[si].slots[i].rid == WRITE_RID) {
                slot_free(d, &d->sessions[si], i);
                if (d->cur_phase == BENCH_PHASE_MEASURE)
                    bench_counts_error(&d->counts, ZK_ECONNECTIONLOSS);
            }
    d->writes = 0;
}

static void send_write(struct ddrv *d, int si, uint32_t i, uint64_t t0_ns, uint64_t now_ns)
{
    struct dsess *s = &d->sessions[si];
    char path[64];
    (void)bench_key_path(path, sizeof path, bench_keys_pick(d->keys, &s->rng));
    int32_t xid = si * d->cfg->outstanding + (int32_t)i;
    bench_tcpw_set(&d->tcp, xid, path, d->value, d->cfg->value_size_bytes);
    s->slots[i] = (struct dslot){ .rid = WRITE_RID, .t0_ns = t0_ns, .sent_ns = now_ns };
    d->writes++;
}

/* Frees the slots whose reads are unanswered after RESEND_NS (each counted
 * lost): their next reads go out in this pass. */
static void expire_lost(struct ddrv *d, uint64_t now_ns)
{
    for (int si = 0; si < d->cfg->sessions; si++) {
        struct dsess *s = &d->sessions[si];
        for (uint32_t i = 0; i < (uint32_t)d->cfg->outstanding; i++) {
            uint64_t rid = s->slots[i].rid;
            if (rid == 0 || rid == WRITE_RID || now_ns - s->slots[i].sent_ns < RESEND_NS)
                continue;
            if (d->cur_phase == BENCH_PHASE_MEASURE)
                bench_counts_error(&d->counts, ZK_ECONNECTIONLOSS);
            slot_free(d, s, i);
        }
    }
}

static void send_one(struct ddrv *d, int si, uint32_t i, uint64_t t0_ns, uint64_t now_ns)
{
    bool mix = d->tcp.fd >= 0 && !d->tcp_broken;
    if (mix && !bench_pick_read(d->read_pct, &d->sessions[si].rng))
        send_write(d, si, i, t0_ns, now_ns);
    else
        send_read(d, si, i, t0_ns, now_ns);
}

/* Sends what is due: closed loop, a read or write from every free slot;
 * open loop, each session's scheduled sends while it has free slots. True
 * while anything is in flight. */
static bool fill(struct ddrv *d, uint64_t now_ns)
{
    if (now_ns >= d->next_scan_ns) {
        expire_lost(d, now_ns);
        d->next_scan_ns = now_ns + SCAN_NS;
    }
    for (int si = 0; si < d->cfg->sessions && d->cur_phase != BENCH_PHASE_DRAIN; si++) {
        struct dsess *s = &d->sessions[si];
        while (s->nfree > 0) {
            uint64_t t0_ns = now_ns;
            if (d->interval_ns != 0) {
                if (s->next_intended_ns > now_ns)
                    break;
                t0_ns = s->next_intended_ns;
                s->next_intended_ns += d->interval_ns;
            }
            uint32_t i = s->free[--s->nfree];
            d->inflight++;
            send_one(d, si, i, t0_ns, now_ns);
        }
    }
    flush_tx(d);
    if (d->writes > 0)
        pump_writes(d);
    return d->inflight > 0;
}

/* ARP for the server's MAC (larchd's frame handler answers). */
static int resolve(struct ddrv *d, char *err, size_t err_len)
{
    uint64_t end = (uint64_t)base_mono_ns() + 10000000000ull;
    uint64_t next_ask = 0;
    while ((uint64_t)base_mono_ns() < end) {
        if ((uint64_t)base_mono_ns() >= next_ask) {
            struct rte_mbuf *m = rte_pktmbuf_alloc(d->pool);
            uint8_t *f = m ? (uint8_t *)rte_pktmbuf_append(m, 42) : NULL;
            if (f) {
                memset(f, 0xff, 6);
                memcpy(f + 6, d->mac, 6);
                base_put_be16(f + 12, 0x0806);
                uint8_t *a = f + 14;
                base_put_be16(a, 1);
                base_put_be16(a + 2, 0x0800);
                a[4] = 6;
                a[5] = 4;
                base_put_be16(a + 6, 1);
                memcpy(a + 8, d->mac, 6);
                memcpy(a + 14, d->ip, 4);
                memset(a + 18, 0, 6);
                memcpy(a + 24, d->server_ip, 4);
                queue_frame(d, m);
                flush_tx(d);
            } else if (m) {
                rte_pktmbuf_free(m);
            }
            next_ask = (uint64_t)base_mono_ns() + 200000000ull;
        }
        struct rte_mbuf *in[BURST];
        uint16_t n = rte_eth_rx_burst(d->port, 0, in, BURST);
        bool answered = false;
        for (uint16_t i = 0; i < n; i++) {
            const uint8_t *f = rte_pktmbuf_mtod(in[i], const uint8_t *);
            bool answer = rte_pktmbuf_data_len(in[i]) >= 42 && base_get_be16(f + 12) == 0x0806 &&
                          base_get_be16(f + 20) == 2 && memcmp(f + 28, d->server_ip, 4) == 0;
            if (answer && !answered)
                memcpy(d->server_mac, f + 22, 6);
            answered |= answer;
            rte_pktmbuf_free(in[i]); /* every frame of the burst, the answer's too */
        }
        if (answered)
            return 0;
    }
    snprintf(err, err_len, "--dpdk: no ARP answer from %s (is larchd --dpdk on the other end?)",
             d->cfg->udp_host);
    return -1;
}

static int start_port(struct ddrv *d, char *err, size_t err_len)
{
    char *buf = strdup(d->cfg->dpdk_args);
    char *argv[EAL_ARGS_MAX];
    int argc = 0;
    argv[argc++] = "larch-bench";
    for (char *save = NULL, *t = buf ? strtok_r(buf, " \t", &save) : NULL; t;
         t = strtok_r(NULL, " \t", &save))
        if (argc < EAL_ARGS_MAX - 1)
            argv[argc++] = t;
    argv[argc] = NULL;
    int rc = buf ? rte_eal_init(argc, argv) : -1;
    free(buf);
    if (rc < 0) {
        snprintf(err, err_len, "--dpdk: EAL did not start: %s", rte_strerror(rte_errno));
        return -1;
    }
    if (rte_eth_dev_count_avail() == 0) {
        snprintf(err, err_len, "--dpdk: no port (give EAL a --vdev)");
        return -1;
    }
    RTE_ETH_FOREACH_DEV(d->port)
        break;
    d->pool = rte_pktmbuf_pool_create("bench_mbufs", MBUFS, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
                                      rte_eth_dev_socket_id(d->port));
    struct rte_eth_conf conf = { 0 };
    struct rte_ether_addr mac;
    if (!d->pool || rte_eth_dev_configure(d->port, 1, 1, &conf) != 0 ||
        rte_eth_rx_queue_setup(d->port, 0, 1024, (unsigned)rte_eth_dev_socket_id(d->port), NULL,
                               d->pool) != 0 ||
        rte_eth_tx_queue_setup(d->port, 0, 1024, (unsigned)rte_eth_dev_socket_id(d->port),
                               NULL) != 0 ||
        rte_eth_macaddr_get(d->port, &mac) != 0 || rte_eth_dev_start(d->port) != 0) {
        snprintf(err, err_len, "--dpdk: port %u could not be set up", d->port);
        return -1;
    }
    memcpy(d->mac, mac.addr_bytes, 6);
    return 0;
}

/* The port, once started (EAL starts once per process, the port too). */
static bool g_port_started;
static uint16_t g_port;

int bench_dpdk_hold(void)
{
    for (int waited_ms = 0; g_port_started && waited_ms < 60000; waited_ms += 10) {
        struct rte_eth_link link;
        if (rte_eth_link_get_nowait(g_port, &link) == 0 && link.link_status == RTE_ETH_LINK_DOWN)
            return 0;
        struct timespec ts = { .tv_sec = 0, .tv_nsec = 10 * 1000000L };
        nanosleep(&ts, NULL);
    }
    return g_port_started ? -1 : 0;
}

static bool always(void *arg)
{
    (void)arg;
    return true;
}

/* The port's one user while a run lasts: fill, poll, until drained. */
static void *poll_main(void *arg)
{
    struct ddrv *d = arg;
    uint64_t drain_end = 0;
    for (;;) {
        d->cur_phase = atomic_load_explicit(d->phase, memory_order_acquire);
        uint64_t now = (uint64_t)base_mono_ns();
        if (d->cur_phase == BENCH_PHASE_DRAIN && drain_end == 0)
            drain_end = now + 1000000000ull;
        bool inflight = fill(d, now);
        poll_rx(d);
        if (d->cur_phase == BENCH_PHASE_DRAIN && (!inflight || now >= drain_end))
            return NULL;
    }
}

int bench_dpdk_run(const struct bench_cfg *cfg, double read_pct, struct bench_result *r,
                   char *err, size_t err_len)
{
    static struct ddrv d; /* EAL starts once per process: so does the port */
    static bool started;
    struct bench_keys keys;
    err[0] = '\0';
    bench_keys_init(&keys, cfg);
    bench_result_reset(r, read_pct);
    d.cfg = cfg;
    d.keys = &keys;
    double interval = cfg->rate_per_s > 0 ? 1e9 * cfg->sessions / cfg->rate_per_s : 0;
    d.interval_ns = cfg->rate_per_s > 0 ? (interval < 1 ? 1 : (uint64_t)interval) : 0;
    if (inet_pton(AF_INET, cfg->udp_host, d.server_ip) != 1 ||
        inet_pton(AF_INET, cfg->dpdk_src, d.ip) != 1) {
        snprintf(err, err_len, "--dpdk: --udp and --dpdk-src must be IPv4 addresses");
        return -1;
    }
    if (!started) {
        if (start_port(&d, err, err_len) != 0 || resolve(&d, err, err_len) != 0)
            return -1;
        started = true;
        g_port_started = true;
        g_port = d.port;
    }
    make_template(&d);
    d.sessions = calloc((size_t)cfg->sessions, sizeof *d.sessions);
    d.inflight = 0;
    d.next_scan_ns = 0;
    for (int i = 0; d.sessions && i < cfg->sessions; i++) {
        struct dsess *s = &d.sessions[i];
        s->slots = calloc((size_t)cfg->outstanding, sizeof(struct dslot));
        s->free = calloc((size_t)cfg->outstanding, sizeof(uint32_t));
        for (uint32_t k = 0; s->free && k < (uint32_t)cfg->outstanding; k++)
            s->free[s->nfree++] = (uint32_t)cfg->outstanding - 1 - k; /* slot 0 first */
        bench_rng_seed(&d.sessions[i].rng, cfg->seed ^ (uint64_t)i);
        /* open loop: staggered, so the sessions do not send in lockstep */
        d.sessions[i].next_intended_ns =
            (uint64_t)base_mono_ns() + d.interval_ns * (uint64_t)i / (uint64_t)cfg->sessions;
        if (!s->slots || !s->free) {
            snprintf(err, err_len, "out of memory");
            return -1;
        }
    }
    memset(&d.counts, 0, sizeof d.counts);
    bench_hist_reset(&d.all);
    bench_hist_reset(&d.read);
    bench_hist_reset(&d.write);
    _Atomic int phase = BENCH_PHASE_WARMUP;
    d.phase = &phase;
    d.cur_phase = BENCH_PHASE_WARMUP;
    zk_wbuf_init(&d.req);
    d.read_pct = read_pct;
    d.writes = 0;
    d.tcp_broken = false;
    d.tcp.fd = -1;
    char *value = malloc(cfg->value_size_bytes + 1);
    if (!value) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    memset(value, 'v', cfg->value_size_bytes);
    d.value = value;
    /* a mix: the writes go over a TCP session through the kernel */
    if (read_pct < 100 && bench_tcpw_open(&d.tcp, cfg, err, err_len) != 0) {
        free(value);
        return -1;
    }
    pthread_t poller;
    if (pthread_create(&poller, NULL, poll_main, &d) != 0) {
        snprintf(err, err_len, "cannot start the polling thread");
        bench_tcpw_close(&d.tcp);
        free(value);
        return -1;
    }
    int rc = bench_timeline(cfg, &phase, r, always, NULL);
    atomic_store(&phase, BENCH_PHASE_DRAIN);
    pthread_join(poller, NULL);
    zk_wbuf_free(&d.req);
    bench_tcpw_close(&d.tcp);
    free(value);
    bench_counts_add(&r->counts, &d.counts);
    bench_hist_merge(&r->all, &d.all);
    bench_hist_merge(&r->read, &d.read);
    bench_hist_merge(&r->write, &d.write);
    for (int i = 0; i < cfg->sessions; i++) {
        free(d.sessions[i].slots);
        free(d.sessions[i].free);
    }
    free(d.sessions);
    d.sessions = NULL;
    return rc;
}
