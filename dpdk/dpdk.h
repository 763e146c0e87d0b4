/*
 * dpdk — the UDP read path straight from NIC queues (DESIGN.md, "UDP read
 * path and the DPDK dataplane"; dataplane/UDP.md is the protocol).
 *
 * This header's first part is the frame handler, pure and built with or
 * without DPDK: one received Ethernet frame in, the reply built in the same
 * buffer, or nothing. It answers ARP requests for the interface's address
 * and ICMP echo requests to it (a poll-mode port has no kernel to do that),
 * and hands UDP datagrams for the interface's address and port to
 * dp_udp_handle. Everything else is dropped and counted by reason.
 *
 * Threading: ldp_frame_handle may run on any number of threads at once,
 * each with its own scratch buffer and counters; the thread must be a
 * registered RCU thread inside rcu_read_lock (dp_udp_handle reads the
 * tree; the poll-mode loop holds the lock once for a whole burst).
 */
#ifndef LARCH_DPDK_H
#define LARCH_DPDK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dataplane/dataplane.h"

#define LDP_ETH_HEADER 14
#define LDP_IPV4_HEADER 20
#define LDP_UDP_HEADER 8
#define LDP_FRAME_OVERHEAD (LDP_ETH_HEADER + LDP_IPV4_HEADER + LDP_UDP_HEADER)

/* The interface a poll-mode port stands for. */
struct ldp_iface {
    uint8_t mac[6];
    uint8_t ip[4];     /* IPv4, network order */
    uint16_t udp_port; /* host order */
    uint16_t mtu;      /* IP packet bytes, e.g. 1500: a reply never exceeds it */
    /* Replies carry a UDP checksum. False on a port that is shared memory
     * between two processes of one host (memif): no wire or NIC touches
     * the datagram, so, as Linux leaves it out on loopback, the reply goes
     * with IPv4's "no checksum" (0) and the sum is not computed. */
    bool udp_checksum;
};

/* Why a frame got no answer. */
enum ldp_drop {
    LDP_DROP_RUNT,        /* shorter than its headers say */
    LDP_DROP_ETHERTYPE,   /* neither IPv4 nor ARP (VLAN tags included) */
    LDP_DROP_ARP,         /* an ARP that is not a request for our address */
    LDP_DROP_NOT_OURS,    /* IPv4 for another address, or a broadcast */
    LDP_DROP_IP_HEADER,   /* bad version, header length, options, total length (or above
                           * the MTU) or checksum */
    LDP_DROP_FRAGMENT,    /* a fragment: requests fit one packet (UDP.md) */
    LDP_DROP_PROTOCOL,    /* neither UDP nor ICMP */
    LDP_DROP_ICMP,        /* ICMP other than an echo request, or a bad checksum */
    LDP_DROP_PORT,        /* UDP to another port */
    LDP_DROP_UDP_HEADER,  /* a UDP length that disagrees with the IP packet's */
    LDP_DROP_UDP_REQUEST, /* dp_udp_handle answered nothing (its counters say why) */
    LDP_DROPS
};

struct ldp_counters {
    uint64_t frames;
    uint64_t arp_replies;
    uint64_t icmp_replies;
    uint64_t udp_replies;
    uint64_t dropped[LDP_DROPS];
    struct dp_udp_counters udp; /* dp_udp_handle's, for the datagrams it saw */
};

/* Handles the frame of len bytes in buf (cap bytes of room). Returns the
 * length of the reply now in buf, or 0 when there is none. dp serves the
 * UDP requests (dp_udp_handle); scratch is the caller's reply buffer, kept
 * from call to call. */
size_t ldp_frame_handle(const struct ldp_iface *ifc, struct dp *dp, uint8_t *buf, size_t len,
                        size_t cap, struct zk_wbuf *scratch, struct ldp_counters *ctr);

/* Before a burst of n frames (frames[i], lens[i] bytes) is handled: the
 * UDP requests among them through dp_udp_prefetch (starting to load, when
 * the tree is larger than the cache, what their reads will touch), and its
 * count of requests that name a node. Reads the frames only; a hint, with
 * no effect on what ldp_frame_handle answers. Same rcu_read_lock rule,
 * held until the frames are handled. */
#define LDP_BURST_MAX TREE_PREFETCH_MAX /* frames looked at, at most */
unsigned ldp_frames_prefetch(const struct ldp_iface *ifc, const struct dp *dp,
                             uint8_t *const *frames, const size_t *lens, unsigned n);

/* ---- the poll-mode back end (port.c) ---------------------------------------
 * Only in a build with DPDK (LARCH_HAVE_DPDK). Owner: one thread calls
 * ldp_start and, after the last ldp_get_stats, ldp_stop; ldp_get_stats may
 * run on any thread meanwhile. EAL starts once per process. */

#define LDP_CORES_MAX 64

struct ldp_cfg {
    const char *eal_args; /* EAL's command line, blank-separated (--no-huge --vdev ...) */
    int cores;            /* poll-mode lcores, one RX/TX queue pair each; 0 means 1 */
    struct ldp_iface ifc; /* ip and udp_port; the MAC and the MTU are the port's */
};

struct ldp;

/* Starts EAL, the first port and the poll-mode lcores, which then serve
 * until ldp_stop. NULL with a message in err (naming what EAL or the port
 * refused) on failure. */
struct ldp *ldp_start(const struct ldp_cfg *cfg, struct dp *dp, char *err, size_t errlen);
/* Stops the lcores, the port and EAL, and frees l. NULL is ignored. */
void ldp_stop(struct ldp *l);

#define LDP_STALL_NS 20000 /* the read latency the path is built for */
struct ldp_stats {
    int cores;
    uint16_t port;
    struct ldp_iface ifc;
    uint64_t frames, arp_replies, icmp_replies, udp_replies;
    uint64_t tx_dropped; /* replies the TX queue did not take */
    uint64_t dropped[LDP_DROPS];
    struct dp_udp_counters udp;
    uint64_t core_udp_replies[LDP_CORES_MAX];
    uint64_t core_busy_ns[LDP_CORES_MAX]; /* time in bursts that carried frames */
    /* How often the core came back LDP_STALL_NS or more after it was due,
     * and by how much in all: time it was taken away between passes or
     * inside a receive, when frames may have waited (a stall while a burst
     * is served counts as busy). On a CPU of its own (isolcpus, nohz_full)
     * it should stay near zero. */
    uint64_t core_stalls[LDP_CORES_MAX];
    uint64_t core_stalled_ns[LDP_CORES_MAX];
};
void ldp_get_stats(struct ldp *l, struct ldp_stats *out);

#endif /* LARCH_DPDK_H */
