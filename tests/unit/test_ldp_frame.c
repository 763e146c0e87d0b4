/*
 * test_ldp_frame.c — the DPDK path's frame handler (dpdk/dpdk.h) on crafted
 * Ethernet frames, without EAL: ARP and ICMP echo answered in place, UDP
 * read requests answered through dp_udp_handle with the reply's headers
 * and checksums right, the MTU respected, and every frame that is not for
 * us dropped and counted by reason.
 *
 * With DPDK in the build, two more runs (one EAL per process, so one each:
 * `test_ldp_frame ring` and `test_ldp_frame null`) start the poll-mode back
 * end (dpdk/port.c) on a virtual port: net_ring, whose TX ring is its RX
 * ring, carries crafted requests in and each reply back round to the
 * server, which drops it as not its own; net_null floods the port with
 * frames that are nothing, and the core must count them and still stop.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <urcu.h>

#ifdef LARCH_HAVE_DPDK
#include <ftw.h>
#include <rte_eal.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#endif

#include "dpdk/dpdk.h"
#include "tests/tree_fill.h"

static const uint8_t OUR_MAC[6] = { 0x02, 0, 0, 0, 0, 0x01 };
static const uint8_t PEER_MAC[6] = { 0x02, 0, 0, 0, 0, 0x02 };
static const uint8_t OUR_IP[4] = { 198, 18, 0, 1 };
static const uint8_t PEER_IP[4] = { 198, 18, 0, 2 };
#define PORT 2182
#define PEER_PORT 40000

struct fx {
    struct tree *t;
    struct seq *s;
    struct dp *dp;
    struct ldp_iface ifc;
    struct zk_wbuf scratch;
    struct ldp_counters ctr;
};

static int setup(void **state)
{
    static struct fx f;
    memset(&f, 0, sizeof f);
    rcu_register_thread();
    f.t = tree_new();
    struct seq_cfg scfg = { .min_session_timeout_ms = 4000, .max_session_timeout_ms = 40000,
                            .container_check_ms = 60000, .tick_ms = 1000 };
    f.s = seq_new(f.t, &scfg, 1);
    struct dp_cfg cfg = { .bind_addr = "127.0.0.1", .workers = 1,
                          .max_buffer_bytes = ZK_MAX_BUFFER_DEFAULT, .super_digest = "" };
    char err[256];
    f.dp = dp_new(&cfg, f.t, f.s, err, sizeof err);
    assert_non_null(f.dp);
    f.ifc = (struct ldp_iface){ .udp_port = PORT, .mtu = 1500, .udp_checksum = true };
    memcpy(f.ifc.mac, OUR_MAC, 6);
    memcpy(f.ifc.ip, OUR_IP, 4);
    zk_wbuf_init(&f.scratch);
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    zk_wbuf_free(&f->scratch);
    dp_free(f->dp);
    seq_free(f->s);
    rcu_barrier();
    tree_free(f->t);
    rcu_unregister_thread();
    return 0;
}

static uint16_t checksum(const uint8_t *p, size_t n, uint32_t sum)
{
    for (; n >= 2; p += 2, n -= 2)
        sum += (uint32_t)p[0] << 8 | p[1];
    if (n)
        sum += (uint32_t)p[0] << 8;
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return (uint16_t)~sum;
}

static size_t eth(uint8_t *f, uint16_t type)
{
    memcpy(f, OUR_MAC, 6);
    memcpy(f + 6, PEER_MAC, 6);
    base_put_be16(f + 12, type);
    return 14;
}

/* An IPv4 packet from the peer to dst carrying payload n bytes of proto. */
static size_t ip(uint8_t *f, const uint8_t dst[4], uint8_t proto, size_t n)
{
    uint8_t *h = f + 14;
    memset(h, 0, 20);
    h[0] = 0x45;
    base_put_be16(h + 2, (uint16_t)(20 + n));
    base_put_be16(h + 4, 0x1234);
    h[8] = 64;
    h[9] = proto;
    memcpy(h + 12, PEER_IP, 4);
    memcpy(h + 16, dst, 4);
    base_put_be16(h + 10, checksum(h, 20, 0));
    return 34;
}

/* A UDP read request (dataplane/UDP.md) for exists or getData of path. */
static size_t udp_request(uint8_t *f, const uint8_t dst[4], uint16_t dport, int32_t op,
                          const char *path)
{
    uint8_t *u = f + 34;
    uint8_t *d = u + 8;
    memset(d, 0, ZK_UDP_REQUEST_HEADER_BYTES);
    base_put_be32(d, ZK_UDP_MAGIC);
    d[4] = ZK_UDP_VERSION;
    base_put_be16(d + 6, ZK_UDP_REQUEST_HEADER_BYTES);
    base_put_be64(d + 8, 0xabcdef);
    base_put_be32(d + 32, (uint32_t)op);
    size_t n = ZK_UDP_REQUEST_HEADER_BYTES;
    size_t plen = strlen(path);
    base_put_be32(d + n, (uint32_t)plen);
    memcpy(d + n + 4, path, plen);
    d[n + 4 + plen] = 0; /* no watch */
    n += 5 + plen;
    base_put_be16(u, PEER_PORT);
    base_put_be16(u + 2, dport);
    base_put_be16(u + 4, (uint16_t)(8 + n));
    base_put_be16(u + 6, 0); /* unfilled, as a veth's offload may leave it */
    eth(f, 0x0800);
    ip(f, dst, 17, 8 + n);
    return 34 + 8 + n;
}

static size_t handle(struct fx *f, uint8_t *buf, size_t len)
{
    rcu_read_lock(); /* as the poll-mode loop holds it for a burst */
    size_t r = ldp_frame_handle(&f->ifc, f->dp, buf, len, 2048, &f->scratch, &f->ctr);
    rcu_read_unlock();
    return r;
}

static void check_reply_headers(const uint8_t *r, size_t n)
{
    assert_memory_equal(r, PEER_MAC, 6);
    assert_memory_equal(r + 6, OUR_MAC, 6);
    assert_int_equal(base_get_be16(r + 12), 0x0800);
    const uint8_t *h = r + 14;
    assert_int_equal(h[0], 0x45);
    assert_int_equal(base_get_be16(h + 2), n - 14);
    assert_int_equal(checksum(h, 20, 0), 0);
    assert_memory_equal(h + 12, OUR_IP, 4);
    assert_memory_equal(h + 16, PEER_IP, 4);
}

static void test_arp_request_for_us_is_answered(void **state)
{
    struct fx *f = *state;
    uint8_t b[2048] = { 0 };
    size_t n = eth(b, 0x0806);
    memset(b, 0xff, 6); /* broadcast */
    uint8_t *a = b + n;
    base_put_be16(a, 1);
    base_put_be16(a + 2, 0x0800);
    a[4] = 6;
    a[5] = 4;
    base_put_be16(a + 6, 1);
    memcpy(a + 8, PEER_MAC, 6);
    memcpy(a + 14, PEER_IP, 4);
    memcpy(a + 24, OUR_IP, 4);
    size_t r = handle(f, b, n + 28);
    assert_int_equal(r, 42);
    assert_memory_equal(b, PEER_MAC, 6);
    assert_memory_equal(b + 6, OUR_MAC, 6);
    assert_int_equal(base_get_be16(a + 6), 2);
    assert_memory_equal(a + 8, OUR_MAC, 6);
    assert_memory_equal(a + 14, OUR_IP, 4);
    assert_memory_equal(a + 18, PEER_MAC, 6);
    assert_memory_equal(a + 24, PEER_IP, 4);
    /* for another address: nothing */
    base_put_be16(a + 6, 1);
    a[27] = 9;
    assert_int_equal(handle(f, b, n + 28), 0);
    assert_int_equal(f->ctr.dropped[LDP_DROP_ARP], 1);
    assert_int_equal(f->ctr.arp_replies, 1);
}

static void test_icmp_echo_is_answered(void **state)
{
    struct fx *f = *state;
    uint8_t b[2048];
    eth(b, 0x0800);
    uint8_t *m = b + 34;
    memset(m, 0, 8);
    m[0] = 8;
    base_put_be16(m + 4, 77);
    base_put_be16(m + 6, 1);
    memcpy(m + 8, "ping payload", 12);
    base_put_be16(m + 2, checksum(m, 20, 0));
    ip(b, OUR_IP, 1, 20);
    size_t r = handle(f, b, 54);
    assert_int_equal(r, 54);
    check_reply_headers(b, r);
    assert_int_equal(m[0], 0);
    assert_int_equal(checksum(m, 20, 0), 0);
    assert_int_equal(base_get_be16(m + 4), 77);
    assert_memory_equal(m + 8, "ping payload", 12);
    /* a bad checksum, or an echo reply: nothing */
    ip(b, OUR_IP, 1, 20);
    m[0] = 8;
    m[9] ^= 1;
    assert_int_equal(handle(f, b, 54), 0);
    assert_int_equal(f->ctr.dropped[LDP_DROP_ICMP], 1);
    assert_int_equal(f->ctr.icmp_replies, 1);
}

/* The UDP checksum of the reply in f verifies over the pseudo-header. */
static void check_udp_checksum(const uint8_t *f)
{
    const uint8_t *u = f + 34;
    size_t ulen = base_get_be16(u + 4);
    uint32_t pseudo = (uint32_t)(OUR_IP[0] << 8 | OUR_IP[1]) +
                      (uint32_t)(OUR_IP[2] << 8 | OUR_IP[3]) +
                      (uint32_t)(PEER_IP[0] << 8 | PEER_IP[1]) +
                      (uint32_t)(PEER_IP[2] << 8 | PEER_IP[3]) + 17 + (uint32_t)ulen;
    assert_int_not_equal(base_get_be16(u + 6), 0); /* 0 would say "none" */
    assert_int_equal(checksum(u, ulen, pseudo), 0);
}

static void test_udp_read_is_answered_in_place(void **state)
{
    struct fx *f = *state;
    uint8_t b[2048];
    size_t n = udp_request(b, OUR_IP, PORT, ZK_OP_GETDATA, "/zookeeper");
    size_t r = handle(f, b, n);
    assert_true(r > 42 + 40);
    check_reply_headers(b, r);
    const uint8_t *u = b + 34;
    assert_int_equal(base_get_be16(u), PORT);
    assert_int_equal(base_get_be16(u + 2), PEER_PORT);
    assert_int_equal(base_get_be16(u + 4), r - 34);
    check_udp_checksum(b);
    const uint8_t *d = u + 8;
    assert_int_equal(base_get_be32(d), ZK_UDP_MAGIC);
    assert_true(d[5] & ZK_UDP_FLAG_REPLY);
    assert_int_equal(base_get_be64(d + 8), 0xabcdef);
    assert_int_equal(base_get_be32(d + 16), ZK_UDP_OK);
    assert_int_equal((int32_t)base_get_be32(d + 24 + 12), ZK_OK);
    assert_int_equal(f->ctr.udp_replies, 1);
    assert_int_equal(f->ctr.udp.answered[ZK_UDP_OK], 1);

    /* getChildren of "/" is a record of odd length ("zookeeper"): the
     * padded last byte is summed as the pseudo-header's length says */
    n = udp_request(b, OUR_IP, PORT, ZK_OP_GETCHILDREN, "/");
    r = handle(f, b, n);
    assert_int_equal((r - 42) % 2, 1);
    assert_int_equal(base_get_be32(b + 42 + 16), ZK_UDP_OK);
    check_udp_checksum(b);

    /* a reply the MTU cannot carry is TOO_BIG, never a fragment */
    f->ifc.mtu = 100;
    n = udp_request(b, OUR_IP, PORT, ZK_OP_GETDATA, "/zookeeper");
    r = handle(f, b, n);
    assert_true(r > 0 && r <= 14 + 100);
    assert_int_equal(base_get_be32(b + 42 + 16), ZK_UDP_TOO_BIG);
    /* a packet above the MTU never arrives on a real port: dropped, not echoed */
    eth(b, 0x0800);
    memset(b + 34, 0, 200);
    b[34] = 8;
    base_put_be16(b + 34 + 2, checksum(b + 34, 200, 0));
    ip(b, OUR_IP, 1, 200);
    assert_int_equal(handle(f, b, 234), 0);
    assert_int_equal(f->ctr.dropped[LDP_DROP_IP_HEADER], 1);
    f->ifc.mtu = 1500;
}

/* On shared memory (memif) a reply carries no UDP checksum (0, IPv4's
 * "none"), and everything else is as on a wire: the same bytes. */
static void test_udp_reply_without_checksum_on_shared_memory(void **state)
{
    struct fx *f = *state;
    uint8_t with[2048], without[2048];
    size_t n = udp_request(with, OUR_IP, PORT, ZK_OP_GETCHILDREN, "/");
    memcpy(without, with, n);
    size_t r = handle(f, with, n);
    check_udp_checksum(with);
    f->ifc.udp_checksum = false;
    assert_int_equal(handle(f, without, n), r);
    f->ifc.udp_checksum = true;
    check_reply_headers(without, r);
    assert_int_equal(base_get_be16(without + 34 + 6), 0);
    assert_memory_equal(without, with, 34 + 6);
    assert_memory_equal(without + 42, with + 42, r - 42);
    assert_int_equal(f->ctr.udp_replies, 2);
}

#define BIG_NODES 8300 /* past tree_prefetch_pays' threshold */

/* A burst's prefetch pass (ldp_frames_prefetch) over a tree large enough
 * for it to run changes no answer, whatever the frames hold: every frame
 * gets the same reply, byte for byte, as without the pass. */
static void test_prefetch_pass_changes_no_answer(void **state)
{
    struct fx *f = *state;
    static char path[64];
    tree_fill_create(f->t, 1, "/big", NULL, -1);
    for (int i = 0; i < BIG_NODES; i++) {
        snprintf(path, sizeof path, "/big/k%05d", i);
        tree_fill_create(f->t, 2 + i, path, "ten bytes!", 10);
    }
    tree_grow_index(f->t);
    assert_true(tree_prefetch_pays(f->t));
    struct tree_path_ref refs[] = { { "/big/k00042", 11 }, { "/big/nope", 9 }, { NULL, 0 },
                                    { "/big", 4 }, { "/big/k08299", 11 } };
    rcu_read_lock();
    assert_int_equal(tree_prefetch_paths(f->t, refs, 5), 3);
    rcu_read_unlock();
    /* lookups follow hints: a delete clears its node's hint before the
     * node's grace period, or (under ASan) the pass after rcu_barrier
     * reads a freed node; the count is the table's, before and after the
     * nodes come back */
    int64_t zxid = 2 + BIG_NODES;
    tree_fill_delete(f->t, zxid++, "/big/k00042");
    tree_fill_delete(f->t, zxid++, "/big/k08299");
    rcu_barrier(); /* the deleted nodes are freed now */
    rcu_read_lock();
    assert_int_equal(tree_prefetch_paths(f->t, refs, 5), 1);
    rcu_read_unlock();
    tree_fill_create(f->t, zxid++, "/big/k00042", "back", 4);
    rcu_read_lock();
    assert_int_equal(tree_prefetch_paths(f->t, refs, 5), 2);
    rcu_read_unlock();

    enum { N = 10 };
    static uint8_t plain[N][2048], pre[N][2048];
    size_t len[N];
    len[0] = udp_request(plain[0], OUR_IP, PORT, ZK_OP_GETDATA, "/big/k00042");
    len[1] = udp_request(plain[1], OUR_IP, PORT, ZK_OP_EXISTS, "/big/k08299");
    len[2] = udp_request(plain[2], OUR_IP, PORT, ZK_OP_EXISTS, "/big/nope");
    len[3] = udp_request(plain[3], OUR_IP, PORT, ZK_OP_GETCHILDREN, "/big"); /* too big */
    len[4] = udp_request(plain[4], OUR_IP, PORT + 1, ZK_OP_GETDATA, "/big/k00001");
    len[5] = udp_request(plain[5], OUR_IP, PORT, ZK_OP_GETDATA, "/big/k00002");
    base_put_be32(plain[5] + 42 + ZK_UDP_REQUEST_HEADER_BYTES, 0x7fffffff); /* path length */
    len[6] = udp_request(plain[6], OUR_IP, PORT, ZK_OP_GETDATA, "/big/k00003");
    len[6] -= 6; /* cut inside the path, the UDP length still whole */
    len[7] = udp_request(plain[7], OUR_IP, PORT, ZK_OP_GETDATA, "/big/k00004");
    plain[7][42] ^= 0xff; /* not our magic */
    memset(plain[8], 0xa5, 200);
    len[8] = 200;
    len[9] = udp_request(plain[9], OUR_IP, PORT, ZK_OP_GETDATA, "/big/k00005");
    len[9] = 30; /* a runt */
    uint8_t *frames[N];
    for (int i = 0; i < N; i++) {
        memcpy(pre[i], plain[i], sizeof plain[i]);
        frames[i] = pre[i];
    }
    size_t want[N];
    for (int i = 0; i < N; i++)
        want[i] = handle(f, plain[i], len[i]);
    rcu_read_lock();
    assert_int_equal(ldp_frames_prefetch(&f->ifc, f->dp, frames, len, N), 2); /* 0 and 3 */
    struct ldp_counters ctr = { 0 };
    for (int i = 0; i < N; i++) {
        size_t got = ldp_frame_handle(&f->ifc, f->dp, pre[i], len[i], 2048, &f->scratch, &ctr);
        assert_int_equal(got, want[i]);
        assert_memory_equal(pre[i], plain[i], got);
    }
    rcu_read_unlock();
    assert_true(want[0] > 42 + 40 && want[1] > 42 && want[2] > 42);
    assert_int_equal(base_get_be32(plain[3] + 42 + 16), ZK_UDP_TOO_BIG);
    assert_int_equal(want[4] + want[7] + want[8] + want[9], 0);
}

static void test_frames_not_for_us_are_dropped_and_counted(void **state)
{
    struct fx *f = *state;
    static const uint8_t OTHER_IP[4] = { 198, 18, 0, 9 };
    uint8_t b[2048];
    size_t n;

    n = udp_request(b, OUR_IP, PORT + 1, ZK_OP_EXISTS, "/");
    assert_int_equal(handle(f, b, n), 0);
    n = udp_request(b, OTHER_IP, PORT, ZK_OP_EXISTS, "/");
    assert_int_equal(handle(f, b, n), 0);
    n = udp_request(b, OUR_IP, PORT, ZK_OP_EXISTS, "/");
    base_put_be16(b + 14 + 6, 0x2000); /* MF */
    base_put_be16(b + 14 + 10, 0);
    base_put_be16(b + 14 + 10, checksum(b + 14, 20, 0));
    assert_int_equal(handle(f, b, n), 0);
    n = udp_request(b, OUR_IP, PORT, ZK_OP_EXISTS, "/");
    b[14 + 10] ^= 1; /* IP checksum */
    assert_int_equal(handle(f, b, n), 0);
    n = udp_request(b, OUR_IP, PORT, ZK_OP_EXISTS, "/");
    b[14] = 0x46; /* options */
    assert_int_equal(handle(f, b, n), 0);
    n = udp_request(b, OUR_IP, PORT, ZK_OP_EXISTS, "/");
    base_put_be16(b + 34 + 4, (uint16_t)(n - 34 + 1)); /* UDP longer than the packet */
    assert_int_equal(handle(f, b, n), 0);
    n = udp_request(b, OUR_IP, PORT, ZK_OP_EXISTS, "/");
    assert_int_equal(handle(f, b, n - 30), 0); /* cut short */
    n = udp_request(b, OUR_IP, PORT, ZK_OP_EXISTS, "/");
    b[42] ^= 0xff; /* not a request of UDP.md */
    assert_int_equal(handle(f, b, n), 0);
    n = udp_request(b, OUR_IP, PORT, ZK_OP_EXISTS, "/");
    b[14 + 9] = 6; /* TCP */
    base_put_be16(b + 14 + 10, 0);
    base_put_be16(b + 14 + 10, checksum(b + 14, 20, 0));
    assert_int_equal(handle(f, b, n), 0);
    eth(b, 0x8100); /* a VLAN tag */
    assert_int_equal(handle(f, b, 60), 0);
    assert_int_equal(handle(f, b, 10), 0);

    assert_int_equal(f->ctr.dropped[LDP_DROP_PORT], 1);
    assert_int_equal(f->ctr.dropped[LDP_DROP_NOT_OURS], 1);
    assert_int_equal(f->ctr.dropped[LDP_DROP_FRAGMENT], 1);
    assert_int_equal(f->ctr.dropped[LDP_DROP_IP_HEADER], 3); /* checksum, options, cut short */
    assert_int_equal(f->ctr.dropped[LDP_DROP_UDP_HEADER], 1);
    assert_int_equal(f->ctr.dropped[LDP_DROP_UDP_REQUEST], 1);
    assert_int_equal(f->ctr.udp.dropped[DP_UDP_DROP_MAGIC], 1);
    assert_int_equal(f->ctr.dropped[LDP_DROP_PROTOCOL], 1);
    assert_int_equal(f->ctr.dropped[LDP_DROP_ETHERTYPE], 1);
    assert_int_equal(f->ctr.dropped[LDP_DROP_RUNT], 1);
    assert_int_equal(f->ctr.frames, 11);
    assert_int_equal(f->ctr.udp_replies + f->ctr.arp_replies + f->ctr.icmp_replies, 0);
}

#ifdef LARCH_HAVE_DPDK
/* ---- the poll-mode back end on virtual ports ------------------------------------ */

#define WAIT_MS_MAX 10000
/* the counters are read one at a time while the core publishes a burst's */
#define BURST_SLACK 64

static void sleep_ms(int ms)
{
    struct timespec ts = { .tv_sec = 0, .tv_nsec = ms * 1000000L };
    nanosleep(&ts, NULL);
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

/* Starts the back end on vdev (one poll-mode lcore) and returns it, with
 * EAL's runtime directory in rundir for stop_port to remove. */
static struct ldp *start_port(struct fx *f, const char *vdev, char *rundir, size_t cap)
{
    char eal[256];
    snprintf(eal, sizeof eal,
             "-l 0-1 --no-huge --no-pci -m 64 --log-level=error --file-prefix ldptest%d "
             "--vdev %s", (int)getpid(), vdev);
    struct ldp_cfg cfg = { .eal_args = eal, .cores = 1, .ifc = { .udp_port = PORT } };
    memcpy(cfg.ifc.ip, OUR_IP, 4);
    char err[256] = "";
    struct ldp *l = ldp_start(&cfg, f->dp, err, sizeof err);
    if (l == NULL)
        fail_msg("ldp_start on %s: %s", vdev, err);
    snprintf(rundir, cap, "%s", rte_eal_get_runtime_dir());
    return l;
}

static void stop_port(struct ldp *l, const char *rundir)
{
    ldp_stop(l);
    nftw(rundir, remove_entry, 8, FTW_DEPTH | FTW_PHYS); /* EAL leaves its files */
}

/* Polls the counters until done says so, for at most WAIT_MS_MAX. */
static bool wait_stats(struct ldp *l, struct ldp_stats *st, bool (*done)(const struct ldp_stats *))
{
    for (int waited = 0; waited < WAIT_MS_MAX; waited++) {
        ldp_get_stats(l, st);
        if (done(st))
            return true;
        sleep_ms(1);
    }
    return false;
}

static struct rte_mbuf *frame_mbuf(struct rte_mempool *pool, const uint8_t *frame, size_t n,
                                   const uint8_t mac[6])
{
    struct rte_mbuf *m = rte_pktmbuf_alloc(pool);
    assert_non_null(m);
    uint8_t *p = (uint8_t *)rte_pktmbuf_append(m, (uint16_t)n);
    assert_non_null(p);
    memcpy(p, frame, n);
    memcpy(p, mac, 6); /* to the port's own address */
    return m;
}

static bool three_answered_and_back(const struct ldp_stats *st)
{
    return st->frames >= 6;
}

static void test_port_on_a_ring_answers_through_the_poll_loop(void **state)
{
    struct fx *f = *state;
    char rundir[512];
    struct ldp *l = start_port(f, "net_ring0", rundir, sizeof rundir);
    struct ldp_stats st;
    ldp_get_stats(l, &st);
    assert_int_equal(st.cores, 1);
    /* the ring PMD's queue 0: what the port sends comes back to it */
    struct rte_ring *ring = rte_ring_lookup("ETH_RXTX0_net_ring0");
    assert_non_null(ring);
    struct rte_mempool *pool =
        rte_pktmbuf_pool_create("ldptest", 63, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
    assert_non_null(pool);

    uint8_t b[2048];
    struct rte_mbuf *in[3];
    size_t n = udp_request(b, OUR_IP, PORT, ZK_OP_GETDATA, "/zookeeper");
    in[0] = frame_mbuf(pool, b, n, st.ifc.mac);
    n = eth(b, 0x0806); /* an ARP request for our address */
    uint8_t *a = b + n;
    static const uint8_t arp_head[8] = { 0, 1, 8, 0, 6, 4, 0, 1 };
    memcpy(a, arp_head, 8);
    memcpy(a + 8, PEER_MAC, 6);
    memcpy(a + 14, PEER_IP, 4);
    memset(a + 18, 0, 6);
    memcpy(a + 24, OUR_IP, 4);
    in[1] = frame_mbuf(pool, b, n + 28, st.ifc.mac);
    memset(b + 34, 0, 16); /* an echo request */
    b[34] = 8;
    memcpy(b + 42, "ring-ping", 8);
    base_put_be16(b + 36, checksum(b + 34, 16, 0));
    eth(b, 0x0800);
    ip(b, OUR_IP, 1, 16);
    in[2] = frame_mbuf(pool, b, 50, st.ifc.mac);
    /* the ring is single-producer: the core enqueues only after taking
     * these, and nothing else is sent until it has */
    assert_int_equal(rte_ring_enqueue_bulk(ring, (void **)in, 3, NULL), 3);

    assert_true(wait_stats(l, &st, three_answered_and_back));
    assert_int_equal(st.frames, 6);
    assert_int_equal(st.udp_replies, 1);
    assert_int_equal(st.arp_replies, 1);
    assert_int_equal(st.icmp_replies, 1);
    assert_int_equal(st.udp.answered[ZK_UDP_OK], 1);
    assert_int_equal(st.core_udp_replies[0], 1);
    assert_int_equal(st.tx_dropped, 0);
    /* the replies came round: to the peer's address, or an ARP reply */
    assert_int_equal(st.dropped[LDP_DROP_NOT_OURS], 2);
    assert_int_equal(st.dropped[LDP_DROP_ARP], 1);
    rte_mempool_free(pool); /* every mbuf is back in it: the core freed the replies */
    stop_port(l, rundir);
}

static bool flooded(const struct ldp_stats *st)
{
    return st->frames >= 100000;
}

static void test_port_flooded_with_nothing_counts_and_stops(void **state)
{
    struct fx *f = *state;
    char rundir[512];
    struct ldp *l = start_port(f, "net_null0", rundir, sizeof rundir);
    struct ldp_stats st;
    assert_true(wait_stats(l, &st, flooded));
    uint64_t dropped = 0;
    for (int i = 0; i < LDP_DROPS; i++)
        dropped += st.dropped[i];
    /* the null PMD's frames are 64 bytes of nothing: dropped, never answered */
    assert_true(dropped + BURST_SLACK >= st.frames);
    assert_int_equal(st.udp_replies + st.arp_replies + st.icmp_replies, 0);
    stop_port(l, rundir); /* returns although frames keep coming */
}
#endif

int main(int argc, char **argv)
{
#ifdef LARCH_HAVE_DPDK
    const struct CMUnitTest ring[] = {
        cmocka_unit_test_setup_teardown(test_port_on_a_ring_answers_through_the_poll_loop, setup,
                                        teardown),
    };
    const struct CMUnitTest null[] = {
        cmocka_unit_test_setup_teardown(test_port_flooded_with_nothing_counts_and_stops, setup,
                                        teardown),
    };
    if (argc > 1 && strcmp(argv[1], "ring") == 0)
        return cmocka_run_group_tests_name("port on net_ring", ring, NULL, NULL);
    if (argc > 1 && strcmp(argv[1], "null") == 0)
        return cmocka_run_group_tests_name("port on net_null", null, NULL, NULL);
#endif
    if (argc > 1) {
        fprintf(stderr, "test_ldp_frame: no run '%s' in this build\n", argv[1]);
        return 2;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_arp_request_for_us_is_answered, setup, teardown),
        cmocka_unit_test_setup_teardown(test_icmp_echo_is_answered, setup, teardown),
        cmocka_unit_test_setup_teardown(test_udp_read_is_answered_in_place, setup, teardown),
        cmocka_unit_test_setup_teardown(test_udp_reply_without_checksum_on_shared_memory, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_prefetch_pass_changes_no_answer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_frames_not_for_us_are_dropped_and_counted, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
