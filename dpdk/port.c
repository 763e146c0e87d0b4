/*
 * port.c — the poll-mode back end (dpdk.h, second part): EAL, one port, an
 * RX/TX queue pair per poll-mode lcore, and each lcore's run-to-completion
 * loop: a burst in, a prefetch pass over it (ldp_frames_prefetch: the
 * node lookups of a large tree overlap their cache misses), each frame
 * through ldp_frame_handle (the reply built in the frame's own mbuf), the
 * replies out in one burst. No lock and no
 * allocation per packet: an lcore owns its queue pair, its scratch buffer
 * and its counters, and publishes the counters for mntr after each busy
 * pass and each stall (a pass, or its receive, that came back 20 us or
 * more late: the core was taken away, and frames may have waited).
 *
 * RSS spreads clients over the queues when the port has more than one
 * (one queue per lcore); on a PMD without RSS (memif, af_packet) one lcore
 * is all there is.
 */
#include "dpdk/dpdk.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <urcu.h>

#define BURST 32
#define RX_DESC 1024
#define TX_DESC 1024
#define MBUFS 8191
#define MBUF_CACHE 256
#define EAL_ARGS_MAX 64

struct ldp_core {
    struct ldp *ldp;
    uint16_t queue;
    unsigned lcore;
    struct ldp_counters ctr;     /* the lcore's own */
    uint64_t tx_dropped;         /* replies the queue did not take */
    uint64_t busy_cycles;        /* TSC cycles in bursts that had frames */
    uint64_t stalls;             /* comebacks LDP_STALL_NS or more late (note_late) */
    uint64_t stalled_cycles;     /* and how late, in all */
    uint64_t stall_min_cycles;   /* LDP_STALL_NS in TSC cycles */
    struct zk_wbuf scratch;
    /* published for ldp_get_stats (relaxed: each value one the lcore wrote) */
    _Atomic uint64_t st_frames, st_arp, st_icmp, st_udp, st_tx_dropped, st_busy_cycles;
    _Atomic uint64_t st_stalls, st_stalled_cycles;
    _Atomic uint64_t st_dropped[LDP_DROPS];
    _Atomic uint64_t st_udp_answered[ZK_UDP_STATUSES];
    _Atomic uint64_t st_udp_dropped[DP_UDP_DROPS];
};

struct ldp {
    struct dp *dp;
    struct ldp_iface ifc;
    uint16_t port;
    struct rte_mempool *pool;
    struct ldp_core *cores;
    int ncores;
    uint64_t tsc_hz;
    atomic_bool stop;
    bool port_started;
};

/* ---- munmap waits for the poll-mode cores ---------------------------------------
 * DPDK 22.11's memif driver (and DPDK's since, to this day) tears a
 * connection down on EAL's interrupt thread: it clears its "connected" flag
 * and at once unmaps the peer's memory, without waiting for a poll-mode core
 * that read the flag a moment before and is now inside a burst on that
 * memory. Every co-located client that went away was a chance of SIGSEGV
 * (seen once in a few disconnects with traffic in flight).
 *
 * What the driver lacks is a grace period between unpublishing and freeing,
 * and munmap is where it frees. So larchd defines munmap: while poll-mode
 * cores run, a munmap from any other thread first waits until each core is
 * between two passes of its loop, then unmaps. A pass begins with a
 * store and a full barrier before the burst reads the driver's flags, and
 * the waiter has a full barrier after the driver cleared them: a
 * core either had not begun its pass (and its burst will see the flag
 * cleared and touch nothing) or is waited for. The cost is one pass (a
 * burst, microseconds) per munmap while cores poll; without poll-mode cores
 * munmap is a plain call. The executable's definition takes precedence over
 * libc's for every shared library, DPDK's drivers included (the link
 * exports it: dpdk/meson.build); the next definition (libc's, or a
 * sanitizer's interceptor) does the unmapping.
 *
 * The counters are static: EAL starts once per process, and munmap may run
 * on the interrupt thread while ldp_stop frees the ldp. */
static _Atomic uint64_t g_core_pass[LDP_CORES_MAX]; /* odd while in a pass */
static _Atomic int g_cores_polling;                 /* cores whose counters count */
static _Thread_local bool t_poll_core;

typedef int (*munmap_fn)(void *, size_t);

/* A full barrier: stores before it are visible before loads after it.
 * gcc refuses atomic_thread_fence under -fsanitize=thread (TSan has no
 * model of fences); there a seq_cst read-modify-write of a private
 * variable stands in, a locked instruction and so a full barrier on x86. */
static inline void full_barrier(void)
{
#if defined(__SANITIZE_THREAD__)
    static _Atomic int token;
    atomic_fetch_add_explicit(&token, 0, memory_order_seq_cst);
#else
    atomic_thread_fence(memory_order_seq_cst);
#endif
}

static int next_munmap(void *addr, size_t len)
{
    static _Atomic(munmap_fn) next;
    munmap_fn f = atomic_load_explicit(&next, memory_order_acquire);
    if (f == NULL) {
        f = (munmap_fn)dlsym(RTLD_NEXT, "munmap");
        if (f == NULL) /* no other definition: the system call itself */
            return (int)syscall(SYS_munmap, addr, len);
        atomic_store_explicit(&next, f, memory_order_release);
    }
    return f(addr, len);
}

static void wait_for_poll_passes(void)
{
    int n = atomic_load_explicit(&g_cores_polling, memory_order_acquire);
    if (n == 0 || t_poll_core)
        return;
    full_barrier(); /* the driver's flag stores before our loads */
    for (int i = 0; i < n; i++) {
        uint64_t seen = atomic_load_explicit(&g_core_pass[i], memory_order_seq_cst);
        if (seen & 1) /* mid-pass: until it ends, however it ends */
            while (atomic_load_explicit(&g_core_pass[i], memory_order_acquire) == seen)
                rte_pause();
    }
}

int munmap(void *addr, size_t len)
{
    wait_for_poll_passes();
    return next_munmap(addr, len);
}

/* The counter goes odd, and is visible as such, before the burst reads
 * the driver's flags (a store then loads: only a full barrier orders
 * them on every architecture). */
static void pass_begin(int i)
{
    uint64_t v = atomic_load_explicit(&g_core_pass[i], memory_order_relaxed);
    atomic_store_explicit(&g_core_pass[i], v + 1, memory_order_relaxed);
    full_barrier();
}

static void pass_end(int i)
{
    uint64_t v = atomic_load_explicit(&g_core_pass[i], memory_order_relaxed);
    atomic_store_explicit(&g_core_pass[i], v + 1, memory_order_release);
}

static void publish(struct ldp_core *c)
{
    atomic_store_explicit(&c->st_frames, c->ctr.frames, memory_order_relaxed);
    atomic_store_explicit(&c->st_arp, c->ctr.arp_replies, memory_order_relaxed);
    atomic_store_explicit(&c->st_icmp, c->ctr.icmp_replies, memory_order_relaxed);
    atomic_store_explicit(&c->st_udp, c->ctr.udp_replies, memory_order_relaxed);
    atomic_store_explicit(&c->st_tx_dropped, c->tx_dropped, memory_order_relaxed);
    atomic_store_explicit(&c->st_busy_cycles, c->busy_cycles, memory_order_relaxed);
    atomic_store_explicit(&c->st_stalls, c->stalls, memory_order_relaxed);
    atomic_store_explicit(&c->st_stalled_cycles, c->stalled_cycles, memory_order_relaxed);
    for (int i = 0; i < LDP_DROPS; i++)
        atomic_store_explicit(&c->st_dropped[i], c->ctr.dropped[i], memory_order_relaxed);
    for (int i = 0; i < ZK_UDP_STATUSES; i++)
        atomic_store_explicit(&c->st_udp_answered[i], c->ctr.udp.answered[i],
                              memory_order_relaxed);
    for (int i = 0; i < DP_UDP_DROPS; i++)
        atomic_store_explicit(&c->st_udp_dropped[i], c->ctr.udp.dropped[i], memory_order_relaxed);
}

/* A received burst: each frame handled in place, the replies sent. */
static void serve_burst(struct ldp_core *c, struct rte_mbuf **in, uint16_t n)
{
    _Static_assert(BURST <= LDP_BURST_MAX, "ldp_frames_prefetch sees every frame");
    struct ldp *l = c->ldp;
    struct rte_mbuf *out[BURST];
    uint16_t nout = 0;
    rcu_read_lock(); /* one read-side section for the burst, not one per read */
    uint8_t *frames[BURST];
    size_t lens[BURST];
    for (uint16_t i = 0; i < n; i++) {
        frames[i] = rte_pktmbuf_mtod(in[i], uint8_t *);
        lens[i] = rte_pktmbuf_data_len(in[i]);
    }
    (void)ldp_frames_prefetch(&l->ifc, l->dp, frames, lens, n);
    for (uint16_t i = 0; i < n; i++) {
        struct rte_mbuf *m = in[i];
        size_t r = 0;
        if (m->nb_segs == 1) {
            uint8_t *p = rte_pktmbuf_mtod(m, uint8_t *);
            size_t cap = (size_t)rte_pktmbuf_data_len(m) + rte_pktmbuf_tailroom(m);
            r = ldp_frame_handle(&l->ifc, l->dp, p, rte_pktmbuf_data_len(m), cap, &c->scratch,
                                 &c->ctr);
        } else {
            c->ctr.frames++;
            c->ctr.dropped[LDP_DROP_RUNT]++; /* a request fits one segment */
        }
        if (r == 0) {
            rte_pktmbuf_free(m);
            continue;
        }
        m->data_len = (uint16_t)r;
        m->pkt_len = (uint32_t)r;
        m->ol_flags = 0; /* no checksum offload asked: frame.c fills them in */
        out[nout++] = m;
    }
    rcu_read_unlock();
    uint16_t sent = nout ? rte_eth_tx_burst(l->port, c->queue, out, nout) : 0;
    for (uint16_t i = sent; i < nout; i++)
        rte_pktmbuf_free(out[i]);
    c->tx_dropped += (uint64_t)(nout - sent);
}

/* The core comes back at `now`, due at `due`: 20 us or more late, it was
 * taken away (an interrupt, the hypervisor, another thread on its CPU)
 * while frames may have been waiting. Published at once: an idle core
 * publishes nothing else. */
static void note_late(struct ldp_core *c, uint64_t now, uint64_t due)
{
    uint64_t late = now - due;
    if (now < due || late < c->stall_min_cycles)
        return; /* on time (or a clock that stepped back: nothing to say) */
    c->stalls++;
    c->stalled_cycles += late;
    publish(c);
}

static int core_main(void *arg)
{
    struct ldp_core *c = arg;
    rcu_register_thread(); /* dp_udp_handle reads the tree */
    t_poll_core = true;
    int i = c->queue;
    /* when the next pass should begin: right after a busy pass ends, or
     * right after an empty one began (a receive that finds nothing takes
     * well under a microsecond); it costs no clock read an idle pass
     * did not already take */
    uint64_t due = rte_rdtsc();
    while (!atomic_load_explicit(&c->ldp->stop, memory_order_acquire)) {
        uint64_t t0 = rte_rdtsc();
        note_late(c, t0, due);
        pass_begin(i);
        struct rte_mbuf *in[BURST];
        uint16_t n = rte_eth_rx_burst(c->ldp->port, c->queue, in, BURST);
        due = t0;
        if (n > 0) {
            /* a core taken away inside the receive finds the frames that
             * came meanwhile: that time was a stall, not work. The time
             * in bursts that carried frames is the core's real cost per
             * read: a polling core is busy whether or not frames come. */
            uint64_t t1 = rte_rdtsc();
            note_late(c, t1, t0);
            serve_burst(c, in, n);
            due = rte_rdtsc();
            c->busy_cycles += due - t1;
            publish(c);
        }
        pass_end(i);
    }
    publish(c);
    rcu_unregister_thread();
    return 0;
}

/* TSC cycles to nanoseconds and back, without overflow for any count a
 * core reaches (the remainder is scaled on its own). */
static uint64_t tsc_ns(const struct ldp *l, uint64_t cycles)
{
    if (l->tsc_hz == 0)
        return 0;
    return cycles / l->tsc_hz * 1000000000u + cycles % l->tsc_hz * 1000000000u / l->tsc_hz;
}

static uint64_t ns_tsc(const struct ldp *l, uint64_t ns)
{
    return ns / 1000000000u * l->tsc_hz + ns % 1000000000u * l->tsc_hz / 1000000000u;
}

/* Splits s at blanks into argv[1..] (argv[0] = "larchd"); the strings
 * live in buf, which the caller frees after rte_eal_init. */
static int split_args(const char *s, char **buf, char **argv, int max)
{
    *buf = strdup(s);
    if (!*buf)
        return -1;
    int argc = 0;
    argv[argc++] = "larchd";
    for (char *save = NULL, *t = strtok_r(*buf, " \t", &save); t;
         t = strtok_r(NULL, " \t", &save)) {
        if (argc == max - 1)
            return -1;
        argv[argc++] = t;
    }
    argv[argc] = NULL;
    return argc;
}

static int port_setup(struct ldp *l, int nq, char *err, size_t errlen)
{
    struct rte_eth_dev_info info;
    int rc = rte_eth_dev_info_get(l->port, &info);
    if (rc != 0) {
        snprintf(err, errlen, "DPDK port %u: no device info: %s", l->port, rte_strerror(-rc));
        return -1;
    }
    if (nq > info.max_rx_queues || nq > info.max_tx_queues) {
        snprintf(err, errlen, "DPDK port %u (%s) has %u RX / %u TX queues, fewer than the %d "
                 "poll-mode cores asked for", l->port, info.driver_name, info.max_rx_queues,
                 info.max_tx_queues, nq);
        return -1;
    }
    /* memif is shared memory between two processes of this host: no wire
     * to guard a reply against (ldp_iface.udp_checksum) */
    l->ifc.udp_checksum = strcmp(info.driver_name, "net_memif") != 0;
    struct rte_eth_conf conf = { 0 };
    if (nq > 1) {
        conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
        conf.rx_adv_conf.rss_conf.rss_hf =
            (RTE_ETH_RSS_IP | RTE_ETH_RSS_UDP) & info.flow_type_rss_offloads;
    }
    if ((rc = rte_eth_dev_configure(l->port, (uint16_t)nq, (uint16_t)nq, &conf)) != 0) {
        snprintf(err, errlen, "DPDK port %u: configure: %s", l->port, rte_strerror(-rc));
        return -1;
    }
    uint16_t rxd = RX_DESC, txd = TX_DESC;
    (void)rte_eth_dev_adjust_nb_rx_tx_desc(l->port, &rxd, &txd);
    int socket = rte_eth_dev_socket_id(l->port);
    for (int q = 0; q < nq; q++) {
        rc = rte_eth_rx_queue_setup(l->port, (uint16_t)q, rxd, (unsigned)socket, NULL, l->pool);
        if (rc == 0)
            rc = rte_eth_tx_queue_setup(l->port, (uint16_t)q, txd, (unsigned)socket, NULL);
        if (rc != 0) {
            snprintf(err, errlen, "DPDK port %u: queue %d: %s", l->port, q, rte_strerror(-rc));
            return -1;
        }
    }
    struct rte_ether_addr mac;
    uint16_t mtu = 1500;
    if ((rc = rte_eth_macaddr_get(l->port, &mac)) != 0) {
        snprintf(err, errlen, "DPDK port %u: no MAC address: %s", l->port, rte_strerror(-rc));
        return -1;
    }
    memcpy(l->ifc.mac, mac.addr_bytes, 6);
    if (rte_eth_dev_get_mtu(l->port, &mtu) == 0 && mtu >= 576)
        l->ifc.mtu = mtu;
    if ((rc = rte_eth_dev_start(l->port)) != 0) {
        snprintf(err, errlen, "DPDK port %u: start: %s", l->port, rte_strerror(-rc));
        return -1;
    }
    l->port_started = true;
    return 0;
}

struct ldp *ldp_start(const struct ldp_cfg *cfg, struct dp *dp, char *err, size_t errlen)
{
    char *argbuf = NULL;
    char *argv[EAL_ARGS_MAX];
    int argc = split_args(cfg->eal_args, &argbuf, argv, EAL_ARGS_MAX);
    if (argc < 0) {
        free(argbuf);
        snprintf(err, errlen, "--dpdk: more than %d EAL arguments", EAL_ARGS_MAX - 2);
        return NULL;
    }
    int rc = rte_eal_init(argc, argv);
    free(argbuf);
    if (rc < 0) {
        snprintf(err, errlen, "--dpdk: EAL did not start: %s", rte_strerror(rte_errno));
        return NULL;
    }
    struct ldp *l = calloc(1, sizeof *l);
    if (!l) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    l->dp = dp;
    l->ifc = cfg->ifc;
    if (l->ifc.mtu == 0)
        l->ifc.mtu = 1500;
    int workers = (int)rte_lcore_count() - 1; /* the main lcore is larchd's own thread */
    l->ncores = cfg->cores > 0 ? cfg->cores : 1;
    if (l->ncores > LDP_CORES_MAX) {
        snprintf(err, errlen, "--dpdk-cores: at most %d", LDP_CORES_MAX);
        goto fail;
    }
    l->tsc_hz = rte_get_tsc_hz();
    if (rte_eth_dev_count_avail() == 0) {
        snprintf(err, errlen, "--dpdk: no port (give EAL a --vdev or a device)");
        goto fail;
    }
    if (workers < l->ncores) {
        snprintf(err, errlen, "--dpdk: %d poll-mode cores asked for, EAL has %d lcores besides "
                 "the main one (give it -l with more)", l->ncores, workers);
        goto fail;
    }
    RTE_ETH_FOREACH_DEV(l->port)
        break; /* the first port: the interface */
    l->pool = rte_pktmbuf_pool_create("larch_mbufs", MBUFS, MBUF_CACHE, 0,
                                      RTE_MBUF_DEFAULT_BUF_SIZE, rte_eth_dev_socket_id(l->port));
    l->cores = calloc((size_t)l->ncores, sizeof *l->cores);
    if (!l->pool || !l->cores) {
        snprintf(err, errlen, "--dpdk: no memory for the mbuf pool (EAL -m?)");
        goto fail;
    }
    if (port_setup(l, l->ncores, err, errlen) != 0)
        goto fail;
    /* munmap waits for these cores from now on (their counters are even) */
    atomic_store_explicit(&g_cores_polling, l->ncores, memory_order_release);
    unsigned lcore = rte_get_next_lcore(-1, 1, 0);
    for (int i = 0; i < l->ncores; i++, lcore = rte_get_next_lcore(lcore, 1, 0)) {
        struct ldp_core *c = &l->cores[i];
        c->ldp = l;
        c->queue = (uint16_t)i;
        c->lcore = lcore;
        c->stall_min_cycles = ns_tsc(l, LDP_STALL_NS);
        zk_wbuf_init(&c->scratch);
        if ((rc = rte_eal_remote_launch(core_main, c, lcore)) != 0) {
            snprintf(err, errlen, "--dpdk: lcore %u: %s", lcore, rte_strerror(-rc));
            goto fail;
        }
    }
    return l;
fail:
    ldp_stop(l);
    return NULL;
}

void ldp_stop(struct ldp *l)
{
    if (!l)
        return;
    atomic_store_explicit(&l->stop, true, memory_order_release);
    rte_eal_mp_wait_lcore();
    atomic_store_explicit(&g_cores_polling, 0, memory_order_release); /* munmap: plain again */
    if (l->port_started) {
        (void)rte_eth_dev_stop(l->port);
        (void)rte_eth_dev_close(l->port);
    }
    for (int i = 0; l->cores && i < l->ncores; i++)
        zk_wbuf_free(&l->cores[i].scratch);
    free(l->cores);
    rte_mempool_free(l->pool);
    free(l);
    (void)rte_eal_cleanup();
}

void ldp_get_stats(struct ldp *l, struct ldp_stats *out)
{
    memset(out, 0, sizeof *out);
    out->cores = l->ncores;
    out->port = l->port;
    memcpy(&out->ifc, &l->ifc, sizeof out->ifc);
    for (int i = 0; i < l->ncores && i < LDP_CORES_MAX; i++) {
        struct ldp_core *c = &l->cores[i];
        uint64_t udp = atomic_load_explicit(&c->st_udp, memory_order_relaxed);
        out->frames += atomic_load_explicit(&c->st_frames, memory_order_relaxed);
        out->arp_replies += atomic_load_explicit(&c->st_arp, memory_order_relaxed);
        out->icmp_replies += atomic_load_explicit(&c->st_icmp, memory_order_relaxed);
        out->udp_replies += udp;
        out->core_udp_replies[i] = udp;
        out->tx_dropped += atomic_load_explicit(&c->st_tx_dropped, memory_order_relaxed);
        uint64_t busy = atomic_load_explicit(&c->st_busy_cycles, memory_order_relaxed);
        out->core_busy_ns[i] = tsc_ns(l, busy);
        out->core_stalls[i] = atomic_load_explicit(&c->st_stalls, memory_order_relaxed);
        out->core_stalled_ns[i] =
            tsc_ns(l, atomic_load_explicit(&c->st_stalled_cycles, memory_order_relaxed));
        for (int k = 0; k < LDP_DROPS; k++)
            out->dropped[k] += atomic_load_explicit(&c->st_dropped[k], memory_order_relaxed);
        for (int k = 0; k < ZK_UDP_STATUSES; k++)
            out->udp.answered[k] +=
                atomic_load_explicit(&c->st_udp_answered[k], memory_order_relaxed);
        for (int k = 0; k < DP_UDP_DROPS; k++)
            out->udp.dropped[k] +=
                atomic_load_explicit(&c->st_udp_dropped[k], memory_order_relaxed);
    }
}
