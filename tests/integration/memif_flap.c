/*
 * memif_flap — connects to larchd's net_memif port as its client and drops
 * the connection again, many times, while larchd's poll-mode core is busy
 * answering: the departure of a co-located application, repeated.
 *
 *   memif_flap CYCLES SERVER_IP 'EAL ARGS with a net_memif client vdev'
 *
 * Each cycle starts the port, waits for the link, sends bursts of ARP
 * requests for SERVER_IP until larchd has answered ARP_ANSWERS of them,
 * sends one more burst without waiting, and stops the port: larchd's end
 * then disconnects (unmaps this end's memory) while its core may still be
 * polling the rings. Exits 0 after CYCLES cycles each answered; 1 when a
 * cycle's link or answers do not come within CYCLE_WAIT_NS (larchd died or
 * its core stopped); 2 on bad arguments or a port that cannot be set up.
 * Prints one line: "cycles=N answers=N".
 */
#include "base/base.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#define BURST 32
#define ARP_FRAME 42
#define ARP_ANSWERS 64
#define CYCLE_WAIT_NS 5000000000ull
#define EAL_ARGS_MAX 32

struct flap {
    uint16_t port;
    struct rte_mempool *pool;
    uint8_t mac[6];
    uint8_t src_ip[4], server_ip[4];
};

static struct rte_mbuf *arp_request(const struct flap *f)
{
    struct rte_mbuf *m = rte_pktmbuf_alloc(f->pool);
    uint8_t *p = m ? (uint8_t *)rte_pktmbuf_append(m, ARP_FRAME) : NULL;
    if (!p) {
        if (m)
            rte_pktmbuf_free(m);
        return NULL;
    }
    memset(p, 0xff, 6);
    memcpy(p + 6, f->mac, 6);
    base_put_be16(p + 12, 0x0806);
    uint8_t *a = p + 14;
    base_put_be16(a, 1);          /* Ethernet */
    base_put_be16(a + 2, 0x0800); /* IPv4 */
    a[4] = 6;
    a[5] = 4;
    base_put_be16(a + 6, 1); /* request */
    memcpy(a + 8, f->mac, 6);
    memcpy(a + 14, f->src_ip, 4);
    memset(a + 18, 0, 6);
    memcpy(a + 24, f->server_ip, 4);
    return m;
}

static void send_burst(const struct flap *f)
{
    struct rte_mbuf *out[BURST];
    uint16_t n = 0;
    while (n < BURST && (out[n] = arp_request(f)) != NULL)
        n++;
    uint16_t sent = n ? rte_eth_tx_burst(f->port, 0, out, n) : 0;
    for (uint16_t i = sent; i < n; i++)
        rte_pktmbuf_free(out[i]);
}

/* ARP replies from the server among the frames waiting; frees them all. */
static unsigned take_answers(const struct flap *f)
{
    struct rte_mbuf *in[BURST];
    uint16_t n = rte_eth_rx_burst(f->port, 0, in, BURST);
    unsigned answers = 0;
    for (uint16_t i = 0; i < n; i++) {
        const uint8_t *p = rte_pktmbuf_mtod(in[i], const uint8_t *);
        if (rte_pktmbuf_data_len(in[i]) >= ARP_FRAME && base_get_be16(p + 12) == 0x0806 &&
            base_get_be16(p + 20) == 2 && memcmp(p + 28, f->server_ip, 4) == 0)
            answers++;
        rte_pktmbuf_free(in[i]);
    }
    return answers;
}

static bool link_up(uint16_t port)
{
    struct rte_eth_link link;
    return rte_eth_link_get_nowait(port, &link) == 0 && link.link_status == RTE_ETH_LINK_UP;
}

/* One cycle: up, answered, down. The answers seen, or 0 when the link or
 * the answers did not come in time. */
static unsigned cycle(const struct flap *f)
{
    if (rte_eth_dev_start(f->port) != 0)
        return 0;
    uint64_t end = (uint64_t)base_mono_ns() + CYCLE_WAIT_NS;
    unsigned answers = 0;
    while (!link_up(f->port) && (uint64_t)base_mono_ns() < end)
        ;
    while (answers < ARP_ANSWERS && link_up(f->port) && (uint64_t)base_mono_ns() < end) {
        send_burst(f);
        answers += take_answers(f);
    }
    if (answers >= ARP_ANSWERS)
        send_burst(f); /* in flight as the link drops */
    (void)rte_eth_dev_stop(f->port);
    return answers >= ARP_ANSWERS ? answers : 0;
}

static int setup(struct flap *f, const char *eal_args)
{
    char *buf = strdup(eal_args);
    char *argv[EAL_ARGS_MAX];
    int argc = 0;
    argv[argc++] = "memif_flap";
    for (char *save = NULL, *t = buf ? strtok_r(buf, " \t", &save) : NULL; t;
         t = strtok_r(NULL, " \t", &save)) {
        if (argc == EAL_ARGS_MAX - 1) {
            free(buf);
            return -1;
        }
        argv[argc++] = t;
    }
    argv[argc] = NULL;
    int rc = buf ? rte_eal_init(argc, argv) : -1;
    free(buf);
    if (rc < 0 || rte_eth_dev_count_avail() == 0)
        return -1;
    RTE_ETH_FOREACH_DEV(f->port)
        break;
    int socket = rte_eth_dev_socket_id(f->port);
    f->pool = rte_pktmbuf_pool_create("flap", 4095, 128, 0, RTE_MBUF_DEFAULT_BUF_SIZE, socket);
    struct rte_eth_conf conf = { 0 };
    struct rte_ether_addr mac;
    if (!f->pool || rte_eth_dev_configure(f->port, 1, 1, &conf) != 0 ||
        rte_eth_rx_queue_setup(f->port, 0, 1024, (unsigned)socket, NULL, f->pool) != 0 ||
        rte_eth_tx_queue_setup(f->port, 0, 1024, (unsigned)socket, NULL) != 0 ||
        rte_eth_macaddr_get(f->port, &mac) != 0)
        return -1;
    memcpy(f->mac, mac.addr_bytes, 6);
    return 0;
}

int main(int argc, char **argv)
{
    struct flap f = { .src_ip = { 198, 18, 0, 2 } };
    char *end = NULL;
    long cycles = argc == 4 ? strtol(argv[1], &end, 10) : 0;
    if (argc != 4 || !end || *end || cycles <= 0 || inet_pton(AF_INET, argv[2], f.server_ip) != 1) {
        fprintf(stderr, "usage: memif_flap CYCLES SERVER_IP 'EAL ARGS'\n");
        return 2;
    }
    if (setup(&f, argv[3]) != 0) {
        fprintf(stderr, "memif_flap: the port could not be set up\n");
        return 2;
    }
    unsigned long total = 0;
    long done = 0;
    for (; done < cycles; done++) {
        unsigned answers = cycle(&f);
        if (answers == 0)
            break;
        total += answers;
    }
    printf("cycles=%ld answers=%lu\n", done, total);
    (void)rte_eth_dev_close(f.port);
    rte_mempool_free(f.pool);
    (void)rte_eal_cleanup();
    if (done < cycles) {
        fprintf(stderr, "memif_flap: cycle %ld: no link or no answers from %s\n", done + 1,
                argv[2]);
        return 1;
    }
    return 0;
}
