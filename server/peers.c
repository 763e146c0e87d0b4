/*
 * peers.c — larchd's side of an ensemble: the peer link (replication/
 * peer_link.h) on this server's quorum address, and the adapter that makes
 * it the sequencer's peer transport (struct seq_peer_ops).
 *
 * Host names in server.N lines are resolved here, once, at start (the peer
 * link takes address literals only). The link's I/O thread wakes the
 * sequencer with seq_kick after each inbound batch; the sequencer drains
 * the link from its own thread and tells its driver when a link went down
 * (a frame sent on it may be lost) by watching each peer's status.
 */
#include "server/server.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>

#include "replication/peer_link.h"

struct peers {
    struct peer_link *pl;
    struct seq *seq; /* set by peers_attach before any thread starts */
    uint32_t n;
    uint32_t ids[CONFIG_SERVERS_MAX];
    uint64_t ups[CONFIG_SERVERS_MAX];  /* links seen established, per member */
    bool was_up[CONFIG_SERVERS_MAX];
};

/* ---- the sequencer's transport --------------------------------------------- */

static int ops_send_msg(void *arg, const struct raft_msg *m)
{
    struct peers *p = arg;
    return peer_link_send_msg(p->pl, m);
}

static int ops_send_forward(void *arg, uint32_t to, const struct peer_forward *f)
{
    struct peers *p = arg;
    return peer_link_send_forward(p->pl, to, f);
}

static int ops_send_touch(void *arg, uint32_t to, const int64_t *ids, uint32_t n)
{
    struct peers *p = arg;
    return peer_link_send_touch(p->pl, to, ids, n);
}

static void ops_flush(void *arg)
{
    struct peers *p = arg;
    peer_link_flush(p->pl);
}

static void deliver(void *arg, const struct peer_link_rx *rx)
{
    struct seq *s = arg;
    switch (rx->kind) {
    case PEER_LINK_RX_RAFT:
        seq_peer_msg(s, &rx->msg);
        break;
    case PEER_LINK_RX_FORWARD:
        seq_peer_forward(s, rx->from, &rx->forward);
        break;
    case PEER_LINK_RX_TOUCH:
        seq_peer_touch(s, rx->from, rx->touch.session_ids, rx->touch.n);
        break;
    default:
        break;
    }
}

/* A link that went down, or came back as a new link, may have lost what
 * was in flight on it: the driver fails writes it forwarded there. */
static void watch_links(struct peers *p, struct seq *s)
{
    for (uint32_t i = 0; i < p->n; i++) {
        struct peer_link_peer_status st;
        if (peer_link_status(p->pl, p->ids[i], &st) != 0)
            continue;
        if ((p->was_up[i] && !st.connected) || st.ups != p->ups[i]) {
            if (p->was_up[i])
                seq_peer_down(s, p->ids[i]);
        }
        p->was_up[i] = st.connected;
        p->ups[i] = st.ups;
    }
}

static size_t ops_drain(void *arg, struct seq *s)
{
    struct peers *p = arg;
    size_t n = peer_link_drain(p->pl, deliver, s);
    watch_links(p, s);
    return n;
}

/* The sequencer's last look before it sleeps: the link's queue is checked
 * after the sequencer announced sleep, and the link's notify reads that
 * announcement after its push (seq_cst both ways): no wake-up is lost. */
static bool ops_has_input(void *arg)
{
    struct peers *p = arg;
    bool empty = peer_link_idle_begin(p->pl);
    peer_link_idle_end(p->pl);
    return !empty;
}

static const struct seq_peer_ops PEER_OPS = {
    .send_msg = ops_send_msg,
    .send_forward = ops_send_forward,
    .send_touch = ops_send_touch,
    .flush = ops_flush,
    .drain = ops_drain,
    .has_input = ops_has_input,
};

const struct seq_peer_ops *peers_ops(void)
{
    return &PEER_OPS;
}

/* I/O thread: inbound frames are queued; wake the sequencer. */
static void notify_sequencer(void *arg)
{
    struct peers *p = arg;
    if (p->seq)
        seq_kick(p->seq);
}

/* ---- setup ---------------------------------------------------------------- */

/* host as an address literal: itself when it is one, else its first
 * address (IPv4 preferred by the resolver's order). */
static int resolve(const char *host, char *out, size_t len, char *err, size_t errlen)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0 || !res) {
        snprintf(err, errlen, "cannot resolve %s: %s", host, gai_strerror(rc));
        return -1;
    }
    rc = getnameinfo(res->ai_addr, res->ai_addrlen, out, (socklen_t)len, NULL, 0, NI_NUMERICHOST);
    freeaddrinfo(res);
    if (rc != 0) {
        snprintf(err, errlen, "cannot use the address of %s: %s", host, gai_strerror(rc));
        return -1;
    }
    return 0;
}

struct peers *peers_new(const struct config_ensemble *ens, char *err, size_t errlen)
{
    struct peers *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    char hosts[CONFIG_SERVERS_MAX][PEER_LINK_HOST_BYTES_MAX];
    struct peer_link_member members[CONFIG_SERVERS_MAX];
    for (uint32_t i = 0; i < ens->n_members; i++) {
        const struct config_member *m = &ens->members[i];
        char why[300];
        if (resolve(m->host, hosts[i], sizeof hosts[i], why, sizeof why) != 0) {
            snprintf(err, errlen, "%s: server.%u: %s", m->where, m->id, why);
            free(p);
            return NULL;
        }
        members[i] = (struct peer_link_member){ .id = m->id, .host = hosts[i],
                                                .port = (uint16_t)m->quorum_port };
        if (m->id != ens->self_id)
            p->ids[p->n++] = m->id;
    }
    uint64_t seed = 0;
    if (getrandom(&seed, sizeof seed, 0) != (ssize_t)sizeof seed)
        seed = (uint64_t)base_mono_ns() ^ ens->self_id;
    struct peer_link_cfg cfg = {
        .self_id = ens->self_id,
        .cluster_id = ens->cluster_id,
        .members = members,
        .n_members = ens->n_members,
        .seed = seed,
        .notify = notify_sequencer,
        .notify_arg = p,
        /* a link is given up on, and redialled, within an election timeout */
        .connect_timeout_ms = (uint32_t)(ens->raft_tick_ms * ens->election_ticks),
        .backoff_max_ms = (uint32_t)(ens->raft_tick_ms * ens->election_ticks / 2),
        /* a vanished peer's link goes within two election timeouts (at
         * least 3 s, so that keepalive's second-granularity probes fit) */
        .dead_link_ms = (uint32_t)(2 * ens->raft_tick_ms * ens->election_ticks) > 3000
                            ? (uint32_t)(2 * ens->raft_tick_ms * ens->election_ticks)
                            : 3000,
    };
    if (cfg.backoff_max_ms < 50)
        cfg.backoff_max_ms = 50;
    p->pl = peer_link_new(&cfg, err, errlen);
    if (!p->pl) {
        free(p);
        return NULL;
    }
    return p;
}

void peers_attach(struct peers *p, struct seq *s)
{
    p->seq = s;
}

int peers_start(struct peers *p)
{
    return peer_link_start(p->pl);
}

void peers_stop(struct peers *p)
{
    if (p)
        peer_link_stop(p->pl);
}

void peers_free(struct peers *p)
{
    if (!p)
        return;
    peer_link_free(p->pl);
    free(p);
}

int peers_status(const struct peers *p, uint32_t i, struct peer_link_peer_status *st)
{
    if (i >= p->n)
        return -ENOENT;
    return peer_link_status(p->pl, p->ids[i], st);
}
