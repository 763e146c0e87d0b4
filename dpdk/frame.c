/*
 * frame.c — the frame handler (dpdk.h): Ethernet, ARP, IPv4, ICMP echo and
 * UDP, with the reply built in place. Pure: bytes in, bytes out.
 *
 * A reply goes back the way the request came: MAC, IP addresses and UDP
 * ports swapped. IPv4 with options, fragments and VLAN tags are dropped:
 * a request of UDP.md always fits one plain packet. The UDP checksum of a
 * request is not checked (a veth offloads it and may leave it unfilled:
 * the MAC and the jute record catch what matters); a reply's is computed,
 * unless the port is shared memory (ldp_iface.udp_checksum).
 */
#include "dpdk/dpdk.h"

#include <string.h>

#define ETHERTYPE_IPV4 0x0800
#define ETHERTYPE_ARP 0x0806
#define ARP_BYTES 28
#define IPPROTO_ICMP_ 1
#define IPPROTO_UDP_ 17
#define ICMP_ECHO_REQUEST 8
#define ICMP_ECHO_REPLY 0
#define IP_TTL 64

/* ---- layers ------------------------------------------------------------------ */

static size_t drop(struct ldp_counters *ctr, enum ldp_drop why)
{
    ctr->dropped[why]++;
    return 0;
}

static void eth_reply(uint8_t *buf, const struct ldp_iface *ifc)
{
    memcpy(buf, buf + 6, 6); /* to whoever sent it */
    memcpy(buf + 6, ifc->mac, 6);
}

/* An ARP request for our address gets our MAC, in place. */
static size_t arp(const struct ldp_iface *ifc, uint8_t *buf, size_t len, struct ldp_counters *ctr)
{
    uint8_t *a = buf + LDP_ETH_HEADER;
    if (len < LDP_ETH_HEADER + ARP_BYTES)
        return drop(ctr, LDP_DROP_RUNT);
    bool ethernet_ipv4 = base_get_be16(a) == 1 && base_get_be16(a + 2) == ETHERTYPE_IPV4 &&
                         a[4] == 6 && a[5] == 4;
    if (!ethernet_ipv4 || base_get_be16(a + 6) != 1 || memcmp(a + 24, ifc->ip, 4) != 0)
        return drop(ctr, LDP_DROP_ARP);
    eth_reply(buf, ifc);
    base_put_be16(a + 6, 2); /* reply */
    memcpy(a + 18, a + 8, 10); /* target := the sender (MAC and IP) */
    memcpy(a + 8, ifc->mac, 6);
    memcpy(a + 14, ifc->ip, 4);
    ctr->arp_replies++;
    return LDP_ETH_HEADER + ARP_BYTES;
}

/* Folds a sum of 16- or 32-bit big-endian words into the checksum a
 * header carries (RFC 1071: the one's-complement sum, complemented). */
static inline uint16_t fold_complement(uint64_t s)
{
    s = (s & 0xffffffffu) + (s >> 32);
    s = (s & 0xffffu) + (s >> 16);
    s = (s & 0xffffu) + (s >> 16);
    s = (s & 0xffffu) + (s >> 16);
    return (uint16_t)~s;
}

/* The checksum of a 20-byte IPv4 header: 0 when the header carries a
 * correct one. Five 32-bit words summed at once: the generic
 * base_csum_add's loop and fold cost more than the sum on headers this
 * small, and every frame takes two. */
static inline uint16_t ipv4_header_csum(const uint8_t *ip)
{
    return fold_complement((uint64_t)base_get_be32(ip) + base_get_be32(ip + 4) +
                           base_get_be32(ip + 8) + base_get_be32(ip + 12) +
                           base_get_be32(ip + 16));
}

/* The IPv4 header of a reply to ip (addresses swapped), payload bytes
 * after it. Built and summed as words in registers and stored once: summing
 * it back from memory right after storing its fields piecewise stalls the
 * loads (no store forwarding from narrower stores), which perf showed as a
 * tenth of the handler's time. */
static void ip_reply(uint8_t *ip, size_t payload)
{
    uint32_t w0 = base_get_be32(ip), w1 = base_get_be32(ip + 4), w2 = base_get_be32(ip + 8);
    uint32_t from = base_get_be32(ip + 12), to = base_get_be32(ip + 16);
    w0 = (w0 & 0xffff0000u) | (uint16_t)(LDP_IPV4_HEADER + payload); /* version, TOS, length */
    w1 = (w1 & 0xffff0000u) | 0x4000u;                   /* the id; DF, not a fragment */
    w2 = (uint32_t)IP_TTL << 24 | (w2 & 0x00ff0000u);    /* TTL, protocol, checksum 0 */
    w2 |= fold_complement((uint64_t)w0 + w1 + w2 + from + to);
    base_put_be32(ip, w0);
    base_put_be32(ip + 4, w1);
    base_put_be32(ip + 8, w2);
    base_put_be32(ip + 12, to);
    base_put_be32(ip + 16, from);
}

static size_t icmp(const struct ldp_iface *ifc, uint8_t *buf, uint8_t *ip, size_t ip_len,
                   struct ldp_counters *ctr)
{
    uint8_t *m = ip + LDP_IPV4_HEADER;
    size_t n = ip_len - LDP_IPV4_HEADER;
    if (n < 8 || m[0] != ICMP_ECHO_REQUEST || m[1] != 0 ||
        base_csum_fold(base_csum_add(0, m, n)) != 0)
        return drop(ctr, LDP_DROP_ICMP);
    m[0] = ICMP_ECHO_REPLY;
    base_put_be16(m + 2, 0);
    base_put_be16(m + 2, base_csum_fold(base_csum_add(0, m, n)));
    ip_reply(ip, n);
    eth_reply(buf, ifc);
    ctr->icmp_replies++;
    return LDP_ETH_HEADER + ip_len;
}

static size_t udp(const struct ldp_iface *ifc, struct dp *dp, uint8_t *buf, size_t cap,
                  uint8_t *ip, size_t ip_len, struct zk_wbuf *scratch, struct ldp_counters *ctr)
{
    uint8_t *u = ip + LDP_IPV4_HEADER;
    if (ip_len < LDP_IPV4_HEADER + LDP_UDP_HEADER)
        return drop(ctr, LDP_DROP_RUNT);
    size_t ulen = base_get_be16(u + 4);
    if (ulen < LDP_UDP_HEADER || ulen > ip_len - LDP_IPV4_HEADER)
        return drop(ctr, LDP_DROP_UDP_HEADER);
    if (base_get_be16(u + 2) != ifc->udp_port)
        return drop(ctr, LDP_DROP_PORT);
    /* ip ACLs match the source address as bytes: no text per packet */
    struct tree_addr peer = { .len = 4 };
    memcpy(peer.b, ip + 12, 4);
    /* one frame, no fragments: the reply fits the MTU and the buffer */
    size_t room = cap - LDP_FRAME_OVERHEAD;
    size_t mtu_room = (size_t)ifc->mtu - LDP_IPV4_HEADER - LDP_UDP_HEADER;
    size_t n = dp_udp_handle(dp, u + LDP_UDP_HEADER, ulen - LDP_UDP_HEADER, &peer,
                             room < mtu_room ? room : mtu_room, scratch, &ctr->udp);
    if (n == 0)
        return drop(ctr, LDP_DROP_UDP_REQUEST);
    uint16_t sport = base_get_be16(u);
    uint16_t ulen_out = (uint16_t)(LDP_UDP_HEADER + n);
    base_put_be16(u, ifc->udp_port);
    base_put_be16(u + 2, sport);
    base_put_be16(u + 4, ulen_out);
    ip_reply(ip, LDP_UDP_HEADER + n);
    if (!ifc->udp_checksum) {
        memcpy(u + LDP_UDP_HEADER, scratch->p, n);
        base_put_be16(u + 6, 0); /* IPv4's "no checksum" (RFC 768) */
    } else {
        /* the payload's share of the checksum as it is copied (it starts
         * at an even offset, so the pieces add up), then the pseudo-header
         * (addresses, protocol, length) and the header (ports, length) as
         * words into one sum; base_csum_fold's complement of the payload's
         * partial sum is undone by adding it as it is */
        uint32_t payload_sum = base_csum_copy(0, u + LDP_UDP_HEADER, scratch->p, n);
        uint64_t sum = (uint64_t)payload_sum + base_get_be32(ip + 12) + base_get_be32(ip + 16) +
                       IPPROTO_UDP_ + ulen_out + ((uint32_t)ifc->udp_port << 16 | sport) +
                       ulen_out;
        uint16_t c = fold_complement(sum);
        base_put_be16(u + 6, c ? c : 0xffff); /* 0 would mean "none" */
    }
    eth_reply(buf, ifc);
    ctr->udp_replies++;
    return LDP_FRAME_OVERHEAD + n;
}

static size_t ipv4(const struct ldp_iface *ifc, struct dp *dp, uint8_t *buf, size_t len,
                   size_t cap, struct zk_wbuf *scratch, struct ldp_counters *ctr)
{
    uint8_t *ip = buf + LDP_ETH_HEADER;
    if (len < LDP_ETH_HEADER + LDP_IPV4_HEADER)
        return drop(ctr, LDP_DROP_RUNT);
    size_t total = base_get_be16(ip + 2);
    if (ip[0] != 0x45 || total < LDP_IPV4_HEADER || total > len - LDP_ETH_HEADER ||
        total > ifc->mtu || ipv4_header_csum(ip) != 0)
        return drop(ctr, LDP_DROP_IP_HEADER);
    if (memcmp(ip + 16, ifc->ip, 4) != 0)
        return drop(ctr, LDP_DROP_NOT_OURS);
    if ((base_get_be16(ip + 6) & 0x3fff) != 0) /* MF, or an offset */
        return drop(ctr, LDP_DROP_FRAGMENT);
    if (ip[9] == IPPROTO_UDP_)
        return udp(ifc, dp, buf, cap, ip, total, scratch, ctr);
    if (ip[9] == IPPROTO_ICMP_)
        return icmp(ifc, buf, ip, total, ctr);
    return drop(ctr, LDP_DROP_PROTOCOL);
}

size_t ldp_frame_handle(const struct ldp_iface *ifc, struct dp *dp, uint8_t *buf, size_t len,
                        size_t cap, struct zk_wbuf *scratch, struct ldp_counters *ctr)
{
    ctr->frames++;
    if (len < LDP_ETH_HEADER || cap < LDP_FRAME_OVERHEAD + ZK_UDP_REPLY_HEADER_BYTES + 16)
        return drop(ctr, LDP_DROP_RUNT);
    switch (base_get_be16(buf + 12)) {
    case ETHERTYPE_ARP:
        return arp(ifc, buf, len, ctr);
    case ETHERTYPE_IPV4:
        return ipv4(ifc, dp, buf, len, cap, scratch, ctr);
    default:
        return drop(ctr, LDP_DROP_ETHERTYPE);
    }
}

/* The UDP request a frame carries for us, or NULL: checked only as far as
 * finding it safely needs (ldp_frames_prefetch). */
static const uint8_t *frame_request(const struct ldp_iface *ifc, const uint8_t *buf, size_t len,
                                    size_t *req_len)
{
    if (len < LDP_FRAME_OVERHEAD || base_get_be16(buf + 12) != ETHERTYPE_IPV4)
        return NULL;
    const uint8_t *ip = buf + LDP_ETH_HEADER, *u = ip + LDP_IPV4_HEADER;
    if (ip[0] != 0x45 || ip[9] != IPPROTO_UDP_ || base_get_be16(u + 2) != ifc->udp_port)
        return NULL;
    size_t ulen = base_get_be16(u + 4);
    if (ulen < LDP_UDP_HEADER || ulen > len - LDP_ETH_HEADER - LDP_IPV4_HEADER)
        return NULL;
    *req_len = ulen - LDP_UDP_HEADER;
    return u + LDP_UDP_HEADER;
}

unsigned ldp_frames_prefetch(const struct ldp_iface *ifc, const struct dp *dp,
                             uint8_t *const *frames, const size_t *lens, unsigned n)
{
    if (!dp_udp_prefetch_pays(dp))
        return 0; /* a small tree: parsing the frames would be all it did */
    const uint8_t *reqs[LDP_BURST_MAX];
    size_t req_lens[LDP_BURST_MAX];
    n = n < LDP_BURST_MAX ? n : LDP_BURST_MAX;
    for (unsigned i = 0; i < n; i++) {
        req_lens[i] = 0;
        reqs[i] = frame_request(ifc, frames[i], lens[i], &req_lens[i]);
    }
    return dp_udp_prefetch(dp, reqs, req_lens, n);
}
