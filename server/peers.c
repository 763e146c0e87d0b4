/*
 * peers.c — larchd's side of an ensemble: the peer link (replication/
 * peer_link.h) on this server's quorum address, and the adapter that makes
 * it the sequencer's peer transport (struct seq_peer_ops).
 *
 * Host names in server.N lines are resolved here (the peer link takes
 * address literals only): at start, and when the membership changes, for
 * the servers whose host is new (a name already resolved for that id keeps
 * its address, so a reconfig that leaves a server's line alone does not
 * look it up again). The link's I/O thread wakes the sequencer with
 * seq_kick after each inbound batch; the sequencer drains the link from
 * its own thread and tells its driver when a link went down (a frame sent
 * on it may be lost) by watching each peer's status.
 *
 * Threading: every op runs on the sequencer thread. peers_status runs on
 * any thread (a worker answering mntr): it reads the member list under mu,
 * which ops_membership holds while it changes the list and the link's set
 * together, so an index always names a server the link knows.
 */
#include "server/server.h"

#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>

#include "replication/peer_link.h"

/* A server's host as written and the address literal it resolved to. */
struct resolved {
    char host[sizeof ((struct config_server *)0)->host];
    char addr[PEER_LINK_HOST_BYTES_MAX];
};

struct peers {
    struct peer_link *pl;
    struct seq *seq; /* set by peers_attach before any thread starts */
    uint32_t self_id;
    /* the other members, in id order: written under mu (sequencer thread),
     * read under mu by peers_status */
    pthread_mutex_t mu;
    uint32_t n;
    uint32_t ids[CONFIG_SERVERS_MAX];
    /* sequencer thread only */
    uint64_t ups[PEER_SERVER_ID_MAX + 1]; /* links seen established, per server id */
    bool was_up[PEER_SERVER_ID_MAX + 1];
    struct resolved addr[PEER_SERVER_ID_MAX + 1]; /* host "" : none yet */
    struct config_server scratch[CONFIG_SERVERS_MAX]; /* ops_membership's parse */
    /* zoo.cfg's other members, to go back to when the membership in use
     * has no description (a change truncated away); dynamic: not in use */
    bool dynamic;
    uint32_t n_static;
    struct peer_link_member static_m[CONFIG_SERVERS_MAX];
    char static_addr[CONFIG_SERVERS_MAX][PEER_LINK_HOST_BYTES_MAX];
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

static uint64_t ops_link_gen(void *arg, uint32_t to)
{
    struct peers *p = arg;
    return peer_link_gen(p->pl, to);
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
 * was in flight on it: the driver fails writes it forwarded there. A
 * server that left the members counts as down (its link closed with it).
 * Sequencer thread: ids does not change under it, so no lock. */
static void watch_links(struct peers *p, struct seq *s)
{
    bool member[PEER_SERVER_ID_MAX + 1] = { false };
    for (uint32_t i = 0; i < p->n; i++)
        member[p->ids[i]] = true;
    for (uint32_t id = 1; id <= PEER_SERVER_ID_MAX; id++) {
        if (!member[id] && !p->was_up[id])
            continue;
        struct peer_link_peer_status st = { 0 };
        bool known = member[id] && peer_link_status(p->pl, id, &st) == 0;
        if (p->was_up[id] && (!st.connected || st.ups != p->ups[id]))
            seq_peer_down(s, id);
        p->was_up[id] = known && st.connected;
        if (known)
            p->ups[id] = st.ups;
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

/* The link has no thread: the sequencer's does its I/O (peer_link.h,
 * "Inline I/O"), so a raft message costs no hand-off on either side. */
static int ops_pump(void *arg)
{
    struct peers *p = arg;
    return peer_link_poll(p->pl);
}

static int ops_io_fd(void *arg)
{
    struct peers *p = arg;
    return peer_link_io_fd(p->pl);
}

static int resolve(const char *host, char *out, size_t len, char *err, size_t errlen);

static void report_membership(void *arg, int severity, const char *msg)
{
    (void)arg;
    base_log(severity ? BASE_LOG_ERROR : BASE_LOG_WARN, "larchd: peers: %s%s",
             severity ? "" : "warning: ", msg);
}

/* The address literal for server srv: the cached one when its host is as
 * it was, else resolved now (a name: the resolver may block this thread,
 * once per changed name). 0, or -1 after a log line. */
static int member_addr(struct peers *p, const struct config_server *srv, const char **addr)
{
    struct resolved *r = &p->addr[srv->id];
    if (r->host[0] == '\0' || strcmp(r->host, srv->host) != 0) {
        char why[300], lit[PEER_LINK_HOST_BYTES_MAX];
        if (resolve(srv->host, lit, sizeof lit, why, sizeof why) != 0) {
            base_log(BASE_LOG_ERROR, "larchd: peers: server.%u: %s: no link to it",
                     (unsigned)srv->id, why);
            return -1;
        }
        size_t len = strnlen(srv->host, sizeof r->host - 1); /* distinct arrays of one struct */
        memcpy(r->host, srv->host, len);
        r->host[len] = '\0';
        snprintf(r->addr, sizeof r->addr, "%s", lit);
    }
    *addr = r->addr;
    return 0;
}

/* Makes m[0..n) (self not in it) the link's members and the list
 * peers_status reads, together under mu. 0, or -1 after a log line with
 * both unchanged. */
static int links_set(struct peers *p, const struct peer_link_member *m, uint32_t n)
{
    char err[320];
    pthread_mutex_lock(&p->mu);
    int rc = peer_link_set_members(p->pl, m, n, err, sizeof err);
    if (rc == 0) {
        p->n = 0; /* in id order, as peers_status promises */
        for (uint32_t id = 1; id <= PEER_SERVER_ID_MAX; id++)
            for (uint32_t i = 0; i < n; i++)
                if (m[i].id == id)
                    p->ids[p->n++] = id;
        BASE_ASSERT(p->n == n);
    }
    pthread_mutex_unlock(&p->mu);
    if (rc != 0)
        base_log(BASE_LOG_ERROR, "larchd: peers: membership refused by the peer link: %s",
                 rc == -EINVAL ? err : strerror(-rc));
    return rc == 0 ? 0 : -1;
}

/* The membership changed: links to every server its server.N lines name
 * (both halves of a joint one), none to others. No description (extra
 * empty): zoo.cfg's membership, the one a membership without one is. A
 * description that does not parse leaves the links as they are. */
static bool in_membership(const struct raft_config *c, int64_t id)
{
    for (uint32_t i = 0; i < c->n_members; i++)
        if (c->members[i].id == id)
            return true;
    for (uint32_t i = 0; i < c->n_old; i++)
        if (c->old[i].id == id)
            return true;
    return false;
}

static void ops_membership(void *arg, const struct raft_config *c)
{
    struct peers *p = arg;
    uint32_t n_srv = 0;
    if (c->extra_len == 0) {
        if (p->dynamic && links_set(p, p->static_m, p->n_static) == 0)
            p->dynamic = false;
        return;
    }
    if (config_parse_members((const char *)c->extra, c->extra_len, "membership", p->scratch,
                             &n_srv, report_membership, NULL) != 0) {
        base_log(BASE_LOG_ERROR, "larchd: peers: membership not understood: links unchanged");
        return;
    }
    struct peer_link_member m[CONFIG_SERVERS_MAX];
    uint32_t n = 0;
    for (uint32_t i = 0; i < n_srv; i++) {
        const struct config_server *srv = &p->scratch[i];
        const char *addr;
        /* the description also names the servers a change removed (the
         * final entry keeps the joint one's): no link to them */
        if ((uint32_t)srv->id == p->self_id || !in_membership(c, srv->id) ||
            member_addr(p, srv, &addr) != 0)
            continue;
        m[n++] = (struct peer_link_member){ .id = (uint32_t)srv->id, .host = addr,
                                            .port = (uint16_t)srv->quorum_port,
                                            .tls_name = p->addr[srv->id].host };
    }
    if (links_set(p, m, n) == 0)
        p->dynamic = true;
}

static const struct seq_peer_ops PEER_OPS = {
    .send_msg = ops_send_msg,
    .send_forward = ops_send_forward,
    .link_gen = ops_link_gen,
    .send_touch = ops_send_touch,
    .flush = ops_flush,
    .drain = ops_drain,
    .has_input = ops_has_input,
    .pump = ops_pump,
    .io_fd = ops_io_fd,
    .membership = ops_membership,
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

struct peers *peers_new(const struct config_ensemble *ens, struct tls_ctx *tls,
                        bool tls_verify_host, char *err, size_t errlen)
{
    struct peers *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    struct peer_link_member members[CONFIG_SERVERS_MAX];
    p->self_id = ens->self_id;
    for (uint32_t i = 0; i < ens->n_members; i++) {
        const struct config_member *m = &ens->members[i];
        struct resolved *r = &p->addr[m->id];
        char why[300];
        if (resolve(m->host, r->addr, sizeof r->addr, why, sizeof why) != 0) {
            snprintf(err, errlen, "%s: server.%u: %s", m->where, m->id, why);
            free(p);
            return NULL;
        }
        snprintf(r->host, sizeof r->host, "%s", m->host);
        members[i] = (struct peer_link_member){ .id = m->id, .host = r->addr,
                                                .port = (uint16_t)m->quorum_port,
                                                .tls_name = r->host };
        if (m->id == ens->self_id)
            continue;
        p->ids[p->n++] = m->id; /* ens->members is in id order */
        memcpy(p->static_addr[p->n_static], r->addr, sizeof r->addr);
        p->static_m[p->n_static] = members[i];
        p->static_m[p->n_static].host = p->static_addr[p->n_static];
        p->n_static++;
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
        .inline_io = true,
        .tls = tls,
        .tls_verify_host = tls_verify_host,
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
    pthread_mutex_init(&p->mu, NULL);
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
    pthread_mutex_destroy(&p->mu);
    free(p);
}

int peers_status(struct peers *p, uint32_t i, struct peer_link_peer_status *st)
{
    pthread_mutex_lock(&p->mu);
    int rc = -ENOENT;
    if (i < p->n) {
        rc = peer_link_status(p->pl, p->ids[i], st);
        BASE_ASSERT(rc == 0); /* under mu the link's set is the list's */
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}
