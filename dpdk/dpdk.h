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
 * registered RCU thread (dp_udp_handle reads the tree).
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
};

/* Why a frame got no answer. */
enum ldp_drop {
    LDP_DROP_RUNT,        /* shorter than its headers say */
    LDP_DROP_ETHERTYPE,   /* neither IPv4 nor ARP (VLAN tags included) */
    LDP_DROP_ARP,         /* an ARP that is not a request for our address */
    LDP_DROP_NOT_OURS,    /* IPv4 for another address, or a broadcast */
    LDP_DROP_IP_HEADER,   /* bad version, header length, options, total length or checksum */
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

#endif /* LARCH_DPDK_H */
