/*
 * fuzz_ldp — the DPDK path's frame handler (ldp_frame_handle, dpdk/dpdk.h)
 * on arbitrary Ethernet frames.
 *
 * Input: [mode][frame]. Mode bits help the fuzzer past what it cannot
 * guess: bit 0 writes a valid IPv4 header (version, length, our address,
 * checksum) over the frame's when it is long enough; bit 1 also makes it
 * UDP to our port with a right UDP length; bit 2 makes it an ARP request
 * for our address instead; bit 3 leaves the UDP checksum out, as on memif.
 * The world's tree is large enough that the prefetch pass, which runs on
 * each frame first, does its work. The frame is an exact-size copy in a
 * buffer of 2,048 bytes (an mbuf's room), so ASan sees any access past
 * either.
 * Properties: nothing crashes or leaks; a reply fits the buffer and the
 * MTU; a reply is ARP or IPv4 from our MAC to the frame's sender, its IPv4
 * header checksum verifies, and it is from our address; every frame is
 * answered or counted as dropped, exactly once.
 */
#include <urcu.h>

#include "dpdk/dpdk.h"
#include "tests/fuzz/fuzz.h"
#include "tests/tree_fill.h"

#define ROOM 2048

static const uint8_t OUR_MAC[6] = { 0x02, 0, 0, 0, 0, 0x01 };
static const uint8_t OUR_IP[4] = { 198, 18, 0, 1 };

static struct tree *g_tree;
static struct seq *g_seq;
static struct dp *g_dp;
static struct zk_wbuf g_scratch;
static struct ldp_iface g_ifc;

static void world_build(void)
{
    rcu_register_thread();
    g_tree = tree_new();
    struct seq_cfg scfg = { .min_session_timeout_ms = 4000, .max_session_timeout_ms = 40000,
                            .container_check_ms = 60000, .tick_ms = 1000 };
    g_seq = seq_new(g_tree, &scfg, 1);
    struct dp_cfg cfg = { .bind_addr = "127.0.0.1", .workers = 1,
                          .max_buffer_bytes = ZK_MAX_BUFFER_DEFAULT, .super_digest = "" };
    char err[256];
    g_dp = g_tree && g_seq ? dp_new(&cfg, g_tree, g_seq, err, sizeof err) : NULL;
    BASE_ASSERT(g_dp != NULL);
    /* enough nodes that the prefetch pass runs (tree_prefetch_pays) */
    tree_fill_create(g_tree, 1, "/many", NULL, -1);
    for (int i = 0; !tree_prefetch_pays(g_tree); i++) {
        char path[32];
        snprintf(path, sizeof path, "/many/n%05d", i);
        tree_fill_create(g_tree, 2 + i, path, "value", 5);
    }
    tree_grow_index(g_tree);
    g_ifc = (struct ldp_iface){ .udp_port = 2182, .mtu = 1500 };
    memcpy(g_ifc.mac, OUR_MAC, 6);
    memcpy(g_ifc.ip, OUR_IP, 4);
    zk_wbuf_init(&g_scratch);
}

static uint16_t checksum(const uint8_t *p, size_t n)
{
    uint32_t sum = 0;
    for (; n >= 2; p += 2, n -= 2)
        sum += (uint32_t)p[0] << 8 | p[1];
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return (uint16_t)~sum;
}

static void fix(uint8_t *f, size_t n, uint8_t mode)
{
    if ((mode & 4) && n >= 42) {
        base_put_be16(f + 12, 0x0806);
        base_put_be16(f + 14, 1);
        base_put_be16(f + 16, 0x0800);
        f[18] = 6;
        f[19] = 4;
        base_put_be16(f + 20, 1);
        memcpy(f + 38, OUR_IP, 4);
        return;
    }
    if (!(mode & 1) || n < 34)
        return;
    uint8_t *ip = f + 14;
    base_put_be16(f + 12, 0x0800);
    ip[0] = 0x45;
    base_put_be16(ip + 2, (uint16_t)(n - 14));
    base_put_be16(ip + 6, 0);
    memcpy(ip + 16, OUR_IP, 4);
    if ((mode & 2) && n >= 42) {
        ip[9] = 17;
        base_put_be16(ip + 20 + 2, g_ifc.udp_port);
        base_put_be16(ip + 20 + 4, (uint16_t)(n - 34));
    }
    base_put_be16(ip + 10, 0);
    base_put_be16(ip + 10, checksum(ip, 20));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (g_dp == NULL)
        world_build();
    if (size == 0 || size - 1 > ROOM)
        return 0;
    uint8_t mode = data[0];
    size_t n = size - 1;
    uint8_t *buf = malloc(ROOM);
    BASE_ASSERT(buf != NULL);
    memcpy(buf, data + 1, n);
    fix(buf, n, mode);
    uint8_t sender[6];
    memcpy(sender, n >= 12 ? buf + 6 : OUR_MAC, 6);
    struct ldp_counters ctr = { 0 };
    g_ifc.udp_checksum = (mode & 8) != 0; /* memif leaves it out; other ports do not */
    rcu_read_lock();
    uint8_t *burst[1] = { buf };
    (void)ldp_frames_prefetch(&g_ifc, g_dp, burst, &n, 1); /* as the poll-mode loop runs it */
    size_t r = ldp_frame_handle(&g_ifc, g_dp, buf, n, ROOM, &g_scratch, &ctr);
    rcu_read_unlock();
    uint64_t dropped = 0;
    for (int i = 0; i < LDP_DROPS; i++)
        dropped += ctr.dropped[i];
    BASE_ASSERT(ctr.frames == 1);
    BASE_ASSERT(dropped + ctr.arp_replies + ctr.icmp_replies + ctr.udp_replies == 1);
    BASE_ASSERT((r == 0) == (dropped == 1));
    if (r > 0) {
        BASE_ASSERT(r <= ROOM && r <= (size_t)LDP_ETH_HEADER + g_ifc.mtu);
        BASE_ASSERT(memcmp(buf, sender, 6) == 0 && memcmp(buf + 6, OUR_MAC, 6) == 0);
        uint16_t type = base_get_be16(buf + 12);
        BASE_ASSERT(type == 0x0800 || type == 0x0806);
        if (type == 0x0800) {
            BASE_ASSERT(checksum(buf + 14, 20) == 0);
            BASE_ASSERT(memcmp(buf + 14 + 12, OUR_IP, 4) == 0);
            BASE_ASSERT(base_get_be16(buf + 14 + 2) == r - 14);
        }
    }
    free(buf);
    return 0;
}
