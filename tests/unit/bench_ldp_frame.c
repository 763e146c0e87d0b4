/*
 * bench_ldp_frame.c — the DPDK read path's own cost per read, without a
 * PMD: ldp_frame_handle (dpdk/dpdk.h) on getData request frames for random
 * keys of a tree holding `keys` nodes of 100 bytes, in bursts of 32 inside
 * one RCU read-side section as the poll-mode loop runs them. Each request
 * is copied into its buffer first, as a PMD's receive would. Not part of
 * the unit suite and asserts nothing about time (STYLE.md: benches never
 * make timed assertions); it checks that every reply was a getData reply.
 *
 *   bench_ldp_frame [keys] [seconds] [memif] [noprefetch]   default 1000 keys, 3 s
 *
 * "memif" leaves the UDP checksum out, as larchd does on a memif port;
 * "noprefetch" skips the burst's prefetch pass (ldp_frames_prefetch),
 * which larchd runs when the tree is large.
 *
 * Prints ns per read (the handler plus the copy in) and reads/s on one
 * core; pin it with taskset to compare builds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <urcu.h>

#include "dpdk/dpdk.h"
#include "tests/tree_fill.h"

#define VALUE_BYTES 100
#define BURST 32
#define FRAME_ROOM 2048
#define PORT 2182

static const uint8_t OUR_MAC[6] = { 0x02, 0, 0, 0, 0, 0x01 };
static const uint8_t PEER_MAC[6] = { 0x02, 0, 0, 0, 0, 0x02 };
static const uint8_t OUR_IP[4] = { 198, 18, 0, 1 };
static const uint8_t PEER_IP[4] = { 198, 18, 0, 2 };

/* A getData request frame for path, as larch-bench's DPDK client sends. */
static size_t request_frame(uint8_t *f, const char *path, uint64_t id)
{
    memcpy(f, OUR_MAC, 6);
    memcpy(f + 6, PEER_MAC, 6);
    base_put_be16(f + 12, 0x0800);
    uint8_t *d = f + LDP_FRAME_OVERHEAD;
    memset(d, 0, ZK_UDP_REQUEST_HEADER_BYTES);
    base_put_be32(d, ZK_UDP_MAGIC);
    d[4] = ZK_UDP_VERSION;
    base_put_be16(d + 6, ZK_UDP_REQUEST_HEADER_BYTES);
    base_put_be64(d + 8, id);
    base_put_be32(d + 32, (uint32_t)ZK_OP_GETDATA);
    size_t n = ZK_UDP_REQUEST_HEADER_BYTES, plen = strlen(path);
    base_put_be32(d + n, (uint32_t)plen);
    memcpy(d + n + 4, path, plen);
    d[n + 4 + plen] = 0;
    n += 5 + plen;
    uint8_t *u = f + LDP_ETH_HEADER + LDP_IPV4_HEADER;
    base_put_be16(u, 40000);
    base_put_be16(u + 2, PORT);
    base_put_be16(u + 4, (uint16_t)(LDP_UDP_HEADER + n));
    base_put_be16(u + 6, 0);
    uint8_t *h = f + LDP_ETH_HEADER;
    memset(h, 0, LDP_IPV4_HEADER);
    h[0] = 0x45;
    base_put_be16(h + 2, (uint16_t)(LDP_IPV4_HEADER + LDP_UDP_HEADER + n));
    h[8] = 64;
    h[9] = 17;
    memcpy(h + 12, PEER_IP, 4);
    memcpy(h + 16, OUR_IP, 4);
    base_put_be16(h + 10, base_csum_fold(base_csum_add(0, h, LDP_IPV4_HEADER)));
    return LDP_FRAME_OVERHEAD + n;
}

int main(int argc, char **argv)
{
    long keys = argc > 1 ? atol(argv[1]) : 1000;
    double seconds = argc > 2 ? atof(argv[2]) : 3.0;
    bool checksum = true, prefetch = true, usage = keys < 1 || keys > 99999999 || seconds <= 0;
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "memif") == 0)
            checksum = false;
        else if (strcmp(argv[i], "noprefetch") == 0)
            prefetch = false;
        else
            usage = true;
    }
    if (usage) {
        fprintf(stderr, "usage: bench_ldp_frame [keys 1..99999999] [seconds > 0] [memif] "
                        "[noprefetch]\n");
        return 2;
    }
    rcu_register_thread();
    struct tree *t = tree_new();
    struct seq_cfg scfg = { .min_session_timeout_ms = 4000, .max_session_timeout_ms = 40000,
                            .container_check_ms = 60000, .tick_ms = 1000 };
    struct seq *s = seq_new(t, &scfg, 1);
    struct dp_cfg cfg = { .bind_addr = "127.0.0.1", .workers = 1,
                          .max_buffer_bytes = ZK_MAX_BUFFER_DEFAULT, .super_digest = "" };
    char err[256], value[VALUE_BYTES], path[64];
    struct dp *dp = dp_new(&cfg, t, s, err, sizeof err);
    if (dp == NULL || t == NULL || s == NULL) {
        fprintf(stderr, "bench_ldp_frame: %s\n", dp ? "out of memory" : err);
        return 1;
    }
    memset(value, 'v', sizeof value);
    int64_t zxid = 0;
    tree_fill_create(t, ++zxid, "/larch-bench", NULL, -1);
    for (long i = 0; i < keys; i++) {
        snprintf(path, sizeof path, "/larch-bench/k%08ld", i);
        tree_fill_create(t, ++zxid, path, value, VALUE_BYTES);
        if (i % 4096 == 0)
            tree_grow_index(t); /* as the sequencer does between rounds */
    }
    tree_grow_index(t);

    /* one request frame; each read patches a random key's 8 digits into
     * it, so reads spread over every key as larch-bench's do (a few
     * thousand fixed requests would keep their nodes in cache) */
    static uint8_t request[128];
    size_t request_len = request_frame(request, "/larch-bench/k00000000", 1);
    size_t digits_at = request_len - 1 - 8; /* the path's last 8 bytes, before the watch flag */
    static char four[10000][4];
    for (int i = 0; i < 10000; i++)
        memcpy(four[i], (char[5]){ (char)('0' + i / 1000), (char)('0' + i / 100 % 10),
                                   (char)('0' + i / 10 % 10), (char)('0' + i % 10), 0 }, 4);

    struct ldp_iface ifc = { .udp_port = PORT, .mtu = 1500, .udp_checksum = checksum };
    memcpy(ifc.mac, OUR_MAC, 6);
    memcpy(ifc.ip, OUR_IP, 4);
    struct zk_wbuf scratch;
    zk_wbuf_init(&scratch);
    struct ldp_counters ctr;
    memset(&ctr, 0, sizeof ctr);
    static uint8_t bufs[BURST][FRAME_ROOM];
    uint8_t *frames[BURST];
    size_t lens[BURST];
    for (int b = 0; b < BURST; b++) {
        frames[b] = bufs[b];
        lens[b] = request_len;
    }

    uint64_t rng = 0x9e3779b97f4a7c15u;
    uint64_t reads = 0, bad = 0, t0 = base_mono_ns(), deadline = t0 + (uint64_t)(seconds * 1e9);
    uint64_t now = t0;
    for (; now < deadline; now = base_mono_ns()) {
        for (int round = 0; round < 64; round++) {
            for (int b = 0; b < BURST; b++) { /* as the PMD's receive copies them in */
                rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
                unsigned key = (unsigned)(rng % (uint64_t)keys);
                memcpy(bufs[b], request, request_len);
                memcpy(bufs[b] + digits_at, four[key / 10000 % 10000], 4);
                memcpy(bufs[b] + digits_at + 4, four[key % 10000], 4);
            }
            rcu_read_lock();
            if (prefetch)
                (void)ldp_frames_prefetch(&ifc, dp, frames, lens, BURST);
            for (int b = 0; b < BURST; b++) {
                size_t n = ldp_frame_handle(&ifc, dp, bufs[b], request_len, FRAME_ROOM, &scratch,
                                            &ctr);
                bad += n < LDP_FRAME_OVERHEAD + ZK_UDP_REPLY_HEADER_BYTES + 16 + 4 + VALUE_BYTES;
            }
            rcu_read_unlock();
            reads += BURST;
        }
    }
    double ns = (double)(now - t0);
    printf("bench_ldp_frame: %ld keys%s%s, %llu reads in %.2f s: %.1f ns per read, %.2f M reads/s"
           " on one core\n",
           keys, checksum ? "" : ", no UDP checksum", prefetch ? "" : ", no prefetch",
           (unsigned long long)reads, ns / 1e9, ns / (double)reads,
           (double)reads / ns * 1e3);
    zk_wbuf_free(&scratch);
    dp_free(dp);
    seq_free(s);
    rcu_barrier();
    tree_free(t);
    rcu_unregister_thread();
    if (bad) {
        fprintf(stderr, "bench_ldp_frame: %llu replies were not getData replies\n",
                (unsigned long long)bad);
        return 1;
    }
    return 0;
}
