/*
 * fourlw.c — ZooKeeper's four-letter words on the client port, with the
 * output formats of ZooKeeper 3.8 (tools such as zkServer.sh status, kazoo's
 * server_version and monitoring agents parse them), and the facts behind
 * them as the AdminServer (admin.c) reads them too (server.h): each is
 * gathered here once, the 4lw print it as text and the AdminServer as JSON.
 */
#include "server/server.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <urcu.h>

#define CONF_TEXT_MAX 16384 /* conf's text: the settings and up to 32 server.N lines */
#define DIRS_NAMES_MAX 65536 /* dirs reads at most this many names per directory */

/* prefix, path, newline: a path goes out as raw bytes, never through a format. */
static void out_path_line(struct zk_wbuf *out, const char *prefix, const char *path)
{
    zk_put_raw(out, prefix, strlen(prefix));
    zk_put_raw(out, path, strlen(path));
    zk_put_raw(out, "\n", 1);
}

bool fourlw_allowed(void *arg, const char *word)
{
    struct server *srv = arg;
    return config_4lw_allowed(&srv->cfg, word);
}

const char *server_full_version(void)
{
    /* one translation unit's __DATE__: the 4lw and the AdminServer agree */
    return LARCH_ZK_VERSION ", built on " __DATE__ " " __TIME__;
}

static void put_version(struct zk_wbuf *out)
{
    zk_wbuf_printf(out, "Zookeeper version: %s\n", server_full_version());
}

void server_get_counts(struct server *srv, struct server_counts *out)
{
    rcu_read_lock();
    tree_stats(srv->tree, &out->tree);
    rcu_read_unlock();
    dp_get_stats(srv->dp, &out->dp);
}

/* The average latency in ms as ZooKeeper prints it: AvgMinMaxCounter.getAvg
 * rounds total/count half up to 4 decimals, and Java's Double.toString
 * prints that: "0.0" with none, "2.0565", "1.5", "5.0E-4" below 0.001 and
 * "1.23456789E7" from 10^7 on. Computed in integers (ten-thousandths of a
 * ms: k below), so the rounding is exact. buf has room for SERVER_AVG_TEXT_MAX
 * bytes. */
static void format_avg_e4(uint64_t k, char *buf)
{
    char digits[24];
    if (k > 0 && k < 10) { /* below 10^-3: one digit, k x 10^-4 */
        snprintf(buf, SERVER_AVG_TEXT_MAX, "%" PRIu64 ".0E-4", k);
        return;
    }
    if (k < 100000000000ull) { /* below 10^7: plain, trailing zeros dropped */
        int frac = (int)(k % 10000);
        int width = 4;
        while (width > 1 && frac % 10 == 0) {
            frac /= 10;
            width--;
        }
        snprintf(buf, SERVER_AVG_TEXT_MAX, "%" PRIu64 ".%0*d", k / 10000, width, frac);
        return;
    }
    /* d.ddd...E<n>: every digit of k but trailing zeros, one at least after the point */
    int n = snprintf(digits, sizeof digits, "%" PRIu64, k);
    int last = n - 1;
    while (last > 1 && digits[last] == '0')
        last--;
    snprintf(buf, SERVER_AVG_TEXT_MAX, "%c.%.*sE%d", digits[0], last, digits + 1, n - 1 - 4);
}

void server_latency(const struct dp_stats *d, struct server_latency *out)
{
    out->min_ms = d->latency_min_us / 1000;
    out->max_ms = d->latency_max_us / 1000;
    /* ms * 10^4 = sum_us * 10 / count, rounded half up: AvgMinMaxCounter's
     * four decimals */
    uint64_t count = d->latency_count;
    unsigned __int128 k128 =
        count ? ((unsigned __int128)d->latency_sum_us * 20 + count) / ((unsigned __int128)count * 2)
              : 0;
    uint64_t k = k128 > UINT64_MAX ? UINT64_MAX : (uint64_t)k128;
    out->avg_ms = (double)k / 1e4;
    format_avg_e4(k, out->avg_text);
}

/* ZooKeeper's server states. A server of an ensemble that knows no leader
 * (an election is on) is "looking", as ZooKeeper's QuorumPeer says. */
static const char *ens_state(struct server *srv, struct seq_ens_status *st)
{
    if (!srv->member || !seq_ens_status(srv->seq, st))
        return "standalone";
    if (st->read_only)
        return "read-only"; /* ZooKeeper's ReadOnlyZooKeeperServer */
    /* not serving: its leader or its quorum is gone, and a ZooKeeper peer
     * in that state is already looking, even while larchd's Raft role has
     * not timed out yet */
    if (!st->serving)
        return "looking";
    switch (st->raft.role) {
    case RAFT_LEADER:
        return "leader";
    case RAFT_OBSERVER:
        return "observer";
    default:
        return st->raft.leader_id != 0 ? "follower" : "looking";
    }
}

const char *server_state_name(struct server *srv)
{
    struct seq_ens_status st;
    return ens_state(srv, &st);
}

bool server_read_only(struct server *srv)
{
    struct seq_ens_status st;
    return srv->member && seq_ens_status(srv->seq, &st) && st.read_only;
}

bool server_serving(struct server *srv)
{
    struct seq_ens_status st;
    return !srv->member || (seq_ens_status(srv->seq, &st) && (st.serving || st.read_only));
}

const char *server_zab_phase(const char *state)
{
    if (strcmp(state, "standalone") == 0)
        return "";
    /* larchd's Raft has no discovery or synchronization phase apart from
     * its log: a member that knows its leader (or leads) is broadcasting */
    if (strcmp(state, "leader") == 0 || strcmp(state, "follower") == 0 ||
        strcmp(state, "observer") == 0)
        return "broadcast";
    return "election";
}

/* mntr's zk_peer_state: ZooKeeper's QuorumPeer.getDetailedPeerState. */
static void peer_state(const char *state, char *out, size_t len)
{
    const char *role = strcmp(state, "leader") == 0     ? "leading"
                       : strcmp(state, "follower") == 0 ? "following"
                       : strcmp(state, "observer") == 0 ? "observing"
                                                        : "looking";
    snprintf(out, len, "%s - %s", role, server_zab_phase(strcmp(role, "looking") == 0 ? "looking"
                                                                                      : state));
}

/* conf: the settings, with the membership this member uses now (a
 * reconfig changes it from zoo.cfg's server.N lines). */
static void put_conf(struct server *srv, struct zk_wbuf *out)
{
    struct config *c = malloc(sizeof *c);
    struct seq_ens_status *st = malloc(sizeof *st);
    char *buf = malloc(CONF_TEXT_MAX);
    if (c && st && buf) {
        *c = srv->cfg;
        uint32_t n = 0;
        if (srv->seq && seq_ens_status(srv->seq, st) &&
            reconfig_current_servers(srv, &st->raft.config, c->servers, &n) == 0)
            c->n_servers = n;
        size_t len = config_format(c, buf, CONF_TEXT_MAX);
        zk_put_raw(out, buf, len < CONF_TEXT_MAX ? len : CONF_TEXT_MAX - 1);
    }
    free(c);
    free(st);
    free(buf);
}

/* ---- reports: one key and typed value at a time ----------------------------- */

struct rep {
    report_fn fn;
    void *arg;
};

static void rep_int(const struct rep *r, const char *key, int64_t v)
{
    struct report_value rv = { .type = REPORT_INT, .i = v };
    r->fn(r->arg, key, &rv);
}

static void rep_uint(const struct rep *r, const char *key, uint64_t v)
{
    struct report_value rv = { .type = REPORT_UINT, .u = v };
    r->fn(r->arg, key, &rv);
}

static void rep_double(const struct rep *r, const char *key, double v)
{
    struct report_value rv = { .type = REPORT_DOUBLE, .d = v };
    r->fn(r->arg, key, &rv);
}

static void rep_text(const struct rep *r, const char *key, const char *v)
{
    struct report_value rv = { .type = REPORT_TEXT, .text = v };
    r->fn(r->arg, key, &rv);
}

static void rep_bool(const struct rep *r, const char *key, bool v)
{
    struct report_value rv = { .type = REPORT_BOOL, .b = v };
    r->fn(r->arg, key, &rv);
}

/* A zxid or digest as mntr has always printed it: "0x" and hex (digits
 * wide, zero-padded; 0: as long as it takes). Text in JSON too. */
static void rep_hex(const struct rep *r, const char *key, uint64_t v, int digits)
{
    char text[24];
    snprintf(text, sizeof text, "0x%0*" PRIx64, digits, v);
    rep_text(r, key, text);
}

/* A key made of a format ("larch_peer_%u_lag"). */
static const char *keyf(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static const char *keyf(char *buf, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, len, fmt, ap);
    va_end(ap);
    return buf;
}

#define KEY_MAX 64

/* Per peer: the link, and on the leader how far behind the peer is. */
static void rep_peers(struct server *srv, const struct rep *r, const struct raft_status *rs)
{
    struct peer_link_peer_status ps;
    char k[KEY_MAX];
    for (uint32_t i = 0; peers_status(srv->peers, i, &ps) == 0; i++) {
        rep_int(r, keyf(k, sizeof k, "larch_peer_%u_connected", ps.id), ps.connected ? 1 : 0);
        rep_int(r, keyf(k, sizeof k, "larch_peer_%u_tls", ps.id), ps.tls ? 1 : 0); /* sslQuorum */
        rep_uint(r, keyf(k, sizeof k, "larch_peer_%u_reconnects", ps.id), ps.reconnects);
        rep_uint(r, keyf(k, sizeof k, "larch_peer_%u_dropped", ps.id),
                 ps.dropped_no_link + ps.dropped_full);
        for (uint32_t j = 0; rs->role == RAFT_LEADER && j < rs->n_peers; j++) {
            if (rs->peers[j].id != ps.id)
                continue;
            int64_t m = rs->peers[j].match_zxid;
            rep_hex(r, keyf(k, sizeof k, "larch_peer_%u_match_zxid", ps.id), (uint64_t)m, 0);
            /* entries behind, when both are in the leader's term (else unknown: -1) */
            int64_t lag = raft_zxid_term(m) == raft_zxid_term(rs->last_zxid)
                              ? (int64_t)raft_zxid_counter(rs->last_zxid) - raft_zxid_counter(m)
                              : -1;
            rep_int(r, keyf(k, sizeof k, "larch_peer_%u_lag", ps.id), lag);
        }
    }
}

/* The ensemble part of mntr: ZooKeeper's names where it has them (the
 * leader's zk_followers and zk_synced_followers), ours for the rest. */
static void rep_ensemble(struct server *srv, const struct rep *r, const struct seq_ens_status *st,
                         const char *state)
{
    const struct raft_status *rs = &st->raft;
    char ps[48];
    peer_state(state, ps, sizeof ps);
    rep_text(r, "peer_state", ps);
    uint32_t voters = 0;
    for (uint32_t i = 0; i < rs->config.n_members; i++)
        voters += rs->config.members[i].voter;
    rep_uint(r, "quorum_size", voters); /* ZooKeeper's: the voting members */
    if (rs->role == RAFT_LEADER) {
        uint32_t learners = 0, synced = 0;
        for (uint32_t i = 0; i < rs->n_peers; i++) {
            if (rs->peers[i].id == srv->ens.self_id)
                continue;
            learners += rs->peers[i].recently_active;
            synced += rs->peers[i].recently_active && rs->peers[i].voter &&
                      rs->peers[i].match_zxid == rs->last_zxid;
        }
        rep_uint(r, "learners", learners);
        rep_uint(r, "followers", learners);
        rep_uint(r, "synced_followers", synced);
        rep_uint(r, "pending_syncs", 0);
    }
    rep_uint(r, "larch_term", rs->term);
    rep_uint(r, "larch_leader_id", rs->leader_id);
    rep_hex(r, "larch_commit_zxid", (uint64_t)rs->commit_zxid, 0);
    rep_hex(r, "larch_last_zxid", (uint64_t)rs->last_zxid, 0);
    rep_hex(r, "larch_log_start_zxid", (uint64_t)rs->snap_zxid, 0);
    rep_uint(r, "larch_forwards_sent", st->forwards_sent);
    rep_uint(r, "larch_forwards_received", st->forwards_received);
    rep_uint(r, "larch_pending_requests", st->pending);
    rep_uint(r, "larch_pending_failed", st->pending_failed);
    rep_int(r, "larch_serving", st->serving ? 1 : 0);
    rep_hex(r, "larch_digest", st->digest, 16);
    rep_hex(r, "larch_digest_zxid", (uint64_t)st->digest_zxid, 0);
    /* ZooKeeper's name: digests that differed from the leader's */
    rep_uint(r, "digest_mismatches_count", st->digest_mismatches);
    rep_uint(r, "larch_digest_checks", st->digest_checks);
    rep_int(r, "larch_resyncing", st->resyncing ? 1 : 0);
    rep_uint(r, "larch_snapshots_sent", st->snapshots_sent);
    rep_uint(r, "larch_snapshots_installed", st->snapshots_installed);
    rep_uint(r, "larch_proposals", st->proposals);
    rep_peers(srv, r, rs);
}

/* srvr and stat: the UDP read path in one line, when it is on: datagrams
 * taken, reads served (status ok, whatever their ZooKeeper error), other
 * statuses, and datagrams that got no answer. */
static void put_srvr_udp(struct server *srv, struct zk_wbuf *out, const struct dp_stats *d)
{
    const char *how = NULL;
    uint64_t taken = 0, served = 0, other = 0, dropped = 0;
    if (dp_udp_port(srv->dp) != 0) {
        how = "sockets";
        taken = d->udp_datagrams;
        served = d->udp_answered[ZK_UDP_OK];
        for (int i = 1; i < ZK_UDP_STATUSES; i++)
            other += d->udp_answered[i];
        for (int i = 0; i < DP_UDP_DROPS; i++)
            dropped += d->udp_dropped[i];
    }
#ifdef LARCH_HAVE_DPDK
    struct ldp_stats *st = srv->ldp ? malloc(sizeof *st) : NULL;
    if (st) {
        ldp_get_stats(srv->ldp, st);
        how = "DPDK";
        taken = st->udp.datagrams;
        served = st->udp.answered[ZK_UDP_OK];
        for (int i = 1; i < ZK_UDP_STATUSES; i++)
            other += st->udp.answered[i];
        for (int i = 0; i < DP_UDP_DROPS; i++)
            dropped += st->udp.dropped[i];
        free(st);
    }
#endif
    if (how == NULL)
        return;
    zk_wbuf_printf(out, "UDP reads (%s): %s:%d received=%" PRIu64 " served=%" PRIu64 " refused=%" PRIu64
              " dropped=%" PRIu64 "\n",
         how, srv->cfg.udp.host, srv->cfg.udp.port, taken, served, other, dropped);
}

static void put_server_stats(struct server *srv, struct zk_wbuf *out, const struct server_counts *s)
{
    const struct dp_stats *d = &s->dp;
    struct server_latency lat;
    server_latency(d, &lat);
    zk_wbuf_printf(out, "Latency min/avg/max: %" PRIu64 "/%s/%" PRIu64 "\n", lat.min_ms, lat.avg_text,
         lat.max_ms);
    zk_wbuf_printf(out, "Received: %" PRIu64 "\n", d->packets_received);
    zk_wbuf_printf(out, "Sent: %" PRIu64 "\n", d->packets_sent);
    zk_wbuf_printf(out, "Connections: %" PRIu64 "\n", d->connections);
    zk_wbuf_printf(out, "Outstanding: %" PRIu64 "\n", d->outstanding);
    zk_wbuf_printf(out, "Zxid: 0x%" PRIx64 "\n", (uint64_t)s->tree.last_zxid);
    zk_wbuf_printf(out, "Mode: %s\n", server_state_name(srv));
    zk_wbuf_printf(out, "Node count: %" PRId64 "\n", s->tree.node_count);
    put_srvr_udp(srv, out, d);
}

/* ServerCnxn's lastOp: "NA" before the first request or after crst. */
const char *server_last_op_name(const struct dp_conn_info *ci)
{
    return ci->last_op == DP_CONN_NO_OP ? "NA" : zk_op_name(ci->last_op);
}

static void put_conn_brief(void *arg, const struct dp_conn_info *ci)
{
    struct zk_wbuf *out = arg;
    zk_wbuf_printf(out, " /%s[1](queued=%u,recved=%" PRIu64 ",sent=%" PRIu64 ")\n", ci->peer, ci->queued, ci->received,
         ci->sent);
}

static void put_conn_full(void *arg, const struct dp_conn_info *ci)
{
    struct zk_wbuf *out = arg;
    zk_wbuf_printf(out,
         " /%s[1](queued=%u,recved=%" PRIu64 ",sent=%" PRIu64 ",sid=0x%" PRIx64 ",lop=%s,est=%" PRId64
         ",to=%d,lzxid=0x%" PRIx64 ",llat=%" PRId64 ",minlat=%" PRId64 ",avglat=%" PRId64 ",maxlat=%" PRId64 ")\n",
         ci->peer, ci->queued, ci->received, ci->sent, (uint64_t)ci->session_id, server_last_op_name(ci),
         ci->established_ms, ci->timeout_ms, (uint64_t)ci->last_zxid, ci->last_latency_us / 1000,
         ci->min_latency_us / 1000, ci->avg_latency_us / 1000, ci->max_latency_us / 1000);
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1; /* the directory handle itself */
}

/* The UDP read path (dataplane/UDP.md), when it is on: datagrams taken,
 * replies by status, datagrams dropped by reason. */
static void rep_udp(struct server *srv, const struct rep *r, const struct dp_stats *d)
{
    static const char *const dropped[DP_UDP_DROPS] = {
        "short", "not_larch", "reply", "header", "no_memory",
    };
    char k[KEY_MAX];
    if (dp_udp_port(srv->dp) == 0)
        return;
    rep_int(r, "larch_udp_port", dp_udp_port(srv->dp));
    rep_uint(r, "larch_udp_datagrams", d->udp_datagrams);
    for (int i = 0; i < ZK_UDP_STATUSES; i++)
        rep_uint(r, keyf(k, sizeof k, "larch_udp_replies_%s", zk_udp_status_name((uint32_t)i)),
                 d->udp_answered[i]);
    for (int i = 0; i < DP_UDP_DROPS; i++)
        rep_uint(r, keyf(k, sizeof k, "larch_udp_dropped_%s", dropped[i]), d->udp_dropped[i]);
    rep_uint(r, "larch_udp_unsent", d->udp_unsent);
    rep_uint(r, "larch_udp_socket_buffer_overflows", d->udp_overflows);
    rep_uint(r, "larch_udp_socket_buffer_bytes", d->udp_rcvbuf_bytes);
}

/* The UDP path on a DPDK port, when it runs: frames, what was answered,
 * drops by reason, and the reads each poll-mode core served. */
static void rep_dpdk(struct server *srv, const struct rep *r)
{
#ifdef LARCH_HAVE_DPDK
    static const char *const dropped[LDP_DROPS] = {
        "runt", "ethertype", "arp", "not_ours", "ip_header", "fragment",
        "protocol", "icmp", "port", "udp_header", "udp_request",
    };
    char k[KEY_MAX];
    if (!srv->ldp)
        return;
    struct ldp_stats *st = malloc(sizeof *st);
    if (!st)
        return;
    ldp_get_stats(srv->ldp, st);
    rep_int(r, "larch_dpdk_cores", st->cores);
    rep_uint(r, "larch_dpdk_frames", st->frames);
    rep_uint(r, "larch_dpdk_arp_replies", st->arp_replies);
    rep_uint(r, "larch_dpdk_icmp_replies", st->icmp_replies);
    rep_uint(r, "larch_dpdk_udp_replies", st->udp_replies);
    rep_uint(r, "larch_dpdk_tx_dropped", st->tx_dropped);
    for (int i = 0; i < LDP_DROPS; i++)
        rep_uint(r, keyf(k, sizeof k, "larch_dpdk_dropped_%s", dropped[i]), st->dropped[i]);
    for (int i = 0; i < ZK_UDP_STATUSES; i++)
        rep_uint(r, keyf(k, sizeof k, "larch_dpdk_replies_%s", zk_udp_status_name((uint32_t)i)),
                 st->udp.answered[i]);
    for (int i = 0; i < st->cores && i < LDP_CORES_MAX; i++)
        rep_uint(r, keyf(k, sizeof k, "larch_dpdk_core%d_udp_replies", i),
                 st->core_udp_replies[i]);
    for (int i = 0; i < st->cores && i < LDP_CORES_MAX; i++)
        rep_uint(r, keyf(k, sizeof k, "larch_dpdk_core%d_busy_ns", i), st->core_busy_ns[i]);
    for (int i = 0; i < st->cores && i < LDP_CORES_MAX; i++)
        rep_uint(r, keyf(k, sizeof k, "larch_dpdk_core%d_stalls", i), st->core_stalls[i]);
    for (int i = 0; i < st->cores && i < LDP_CORES_MAX; i++)
        rep_uint(r, keyf(k, sizeof k, "larch_dpdk_core%d_stalled_ns", i), st->core_stalled_ns[i]);
    free(st);
#else
    (void)srv, (void)r;
#endif
}

/* larchd's own: the sequencer, the durable log and the memory budget. */
static void rep_larch(struct server *srv, const struct rep *r, const struct dp_stats *d)
{
    struct seq_stats q;
    seq_get_stats(srv->seq, &q);
    rep_uint(r, "larch_reads", d->reads);
    rep_uint(r, "larch_writes", q.writes);
    rep_uint(r, "larch_sequencer_rounds", q.rounds);
    rep_uint(r, "larch_sequencer_max_round", q.max_round);
    rep_uint(r, "larch_sessions_expired", q.sessions_expired);
    rep_int(r, "larch_workers", srv->cfg.workers);
    rep_bool(r, "larch_durable", srv->dur != NULL);
    /* Nonzero while writes wait for the disk (full, failing): see README. */
    rep_int(r, "larch_log_error", q.log_error);
    rep_uint(r, "larch_log_syncs", q.log_syncs);
    /* The memory budget (README "Limits and hostile clients"). */
    rep_uint(r, "larch_buffered_bytes", d->buffered_bytes);
    rep_uint(r, "larch_buffered_bytes_limit", d->buffered_bytes_limit);
    rep_int(r, "larch_memory_pressure", d->memory_pressure ? 1 : 0);
    rep_uint(r, "larch_throttled_connections", d->throttled_connections);
    rep_uint(r, "larch_throttle_events", d->throttle_events);
    rep_uint(r, "larch_slow_consumer_closes", d->slow_consumer_closes);
    rep_uint(r, "larch_sessionless_timeouts", d->sessionless_timeouts);
    rep_uint(r, "larch_connections_refused", d->connections_refused);
}

void server_monitor(struct server *srv, report_fn fn, void *arg)
{
    const struct rep r = { fn, arg };
    struct server_counts s;
    server_get_counts(srv, &s);
    const struct dp_stats *d = &s.dp;
    struct server_latency lat;
    server_latency(d, &lat);
    struct rlimit rl = { 0 };
    getrlimit(RLIMIT_NOFILE, &rl);
    struct seq_ens_status est;
    const char *state = ens_state(srv, &est);
    rep_text(&r, "version", server_full_version());
    rep_text(&r, "server_state", state);
    rep_double(&r, "avg_latency", lat.avg_ms);
    rep_uint(&r, "max_latency", lat.max_ms);
    rep_uint(&r, "min_latency", lat.min_ms);
    rep_uint(&r, "packets_received", d->packets_received);
    rep_uint(&r, "packets_sent", d->packets_sent);
    rep_uint(&r, "num_alive_connections", d->connections);
    rep_uint(&r, "outstanding_requests", d->outstanding);
    rep_int(&r, "znode_count", s.tree.node_count);
    rep_uint(&r, "watch_count", d->watches);
    rep_int(&r, "ephemerals_count", s.tree.ephemeral_count);
    rep_int(&r, "approximate_data_size", s.tree.data_bytes);
    rep_int(&r, "open_file_descriptor_count", count_fds());
    rep_uint(&r, "max_file_descriptor_count", (uint64_t)rl.rlim_cur);
    rep_int(&r, "global_sessions", s.tree.session_count);
    rep_int(&r, "last_proposal_size", -1);
    rep_larch(srv, &r, d);
    rep_udp(srv, &r, d);
    rep_dpdk(srv, &r);
    if (srv->member)
        rep_ensemble(srv, &r, &est, state);
    if (srv->dur) {
        struct durability_stats ds;
        durability_get_stats(srv->dur, &ds);
        rep_hex(&r, "larch_last_snapshot_zxid", (uint64_t)ds.last_snapshot_zxid, 0);
        rep_uint(&r, "larch_snapshots", ds.snapshots);
        rep_int(&r, "larch_snapshot_error", ds.last_snapshot_error);
    }
}

/* mntr: "zk_<key>\t<value>" lines, the names ZooKeeper's monitoring uses. */
static void mntr_line(void *arg, const char *key, const struct report_value *v)
{
    struct zk_wbuf *out = arg;
    switch (v->type) {
    case REPORT_INT: zk_wbuf_printf(out, "zk_%s\t%" PRId64 "\n", key, v->i); break;
    case REPORT_UINT: zk_wbuf_printf(out, "zk_%s\t%" PRIu64 "\n", key, v->u); break;
    case REPORT_DOUBLE: { /* four decimals (avg_latency), as Java prints the double */
        char text[SERVER_AVG_TEXT_MAX];
        format_avg_e4((uint64_t)(v->d * 1e4 + 0.5), text);
        zk_wbuf_printf(out, "zk_%s\t%s\n", key, text);
        break;
    }
    case REPORT_TEXT: zk_wbuf_printf(out, "zk_%s\t%s\n", key, v->text); break;
    case REPORT_BOOL: zk_wbuf_printf(out, "zk_%s\t%s\n", key, v->b ? "true" : "false"); break;
    }
}

void server_environment(struct server *srv, report_fn fn, void *arg)
{
    const struct rep r = { fn, arg };
    struct utsname u;
    char host[256] = "", cwd[1024] = "", num[32];
    if (uname(&u) != 0)
        memset(&u, 0, sizeof u);
    gethostname(host, sizeof(host) - 1);
    if (!getcwd(cwd, sizeof(cwd)))
        cwd[0] = '\0';
    /* getpwuid_r: the AdminServer's thread and a worker may ask at once */
    struct passwd pw, *found = NULL;
    char pwbuf[1024];
    if (getpwuid_r(getuid(), &pw, pwbuf, sizeof pwbuf, &found) != 0)
        found = NULL;
    rep_text(&r, "zookeeper.version", server_full_version());
    rep_text(&r, "host.name", host);
    rep_text(&r, "larch.version", LARCH_VERSION);
    snprintf(num, sizeof num, "%d", srv->cfg.workers);
    rep_text(&r, "larch.workers", num);
    rep_text(&r, "os.name", u.sysname);
    rep_text(&r, "os.arch", u.machine);
    rep_text(&r, "os.version", u.release);
    rep_text(&r, "user.name", found ? found->pw_name : "?");
    rep_text(&r, "user.home", found ? found->pw_dir : "?");
    rep_text(&r, "user.dir", cwd);
    snprintf(num, sizeof num, "%ldMB",
             (long)(sysconf(_SC_AVPHYS_PAGES) * (sysconf(_SC_PAGESIZE) / 1024) / 1024));
    rep_text(&r, "os.memory.free", num);
}

static void envi_line(void *arg, const char *key, const struct report_value *v)
{
    assert(v->type == REPORT_TEXT); /* ZooKeeper's Environment holds text */
    zk_wbuf_printf(arg, "%s=%s\n", key, v->text);
}

/* ---- the data dirs ------------------------------------------------------------ */

/* The bytes of the regular files in dir, as ZooKeeper's
 * ZooKeeperServer.getDirSize sums a version-2 directory (File.length, which
 * follows symbolic links). larchd makes no directories inside its own, so
 * none is walked. This runs on a worker, so it reads at most DIRS_NAMES_MAX
 * names (a purged data dir holds a few dozen). A file gone between the
 * listing and its stat (purged, or a snapshot renamed into place) counts as
 * absent. 0 or -errno (-E2BIG past the bound). */
static int dir_bytes(const char *dir, uint64_t *out)
{
    *out = 0;
    DIR *d = opendir(dir);
    if (!d)
        return -errno;
    int rc = 0;
    for (int n = 0;; n++) {
        if (n == DIRS_NAMES_MAX) {
            rc = -E2BIG;
            break;
        }
        errno = 0;
        struct dirent *e = readdir(d);
        if (!e) {
            rc = -errno;
            break;
        }
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, 0) != 0) {
            if (errno == ENOENT)
                continue;
            rc = -errno;
            break;
        }
        if (S_ISREG(st.st_mode))
            *out += (uint64_t)st.st_size;
    }
    closedir(d);
    return rc;
}

/* dir_bytes, or 0 (as ZooKeeper answers when it cannot list a directory)
 * with a log line saying why. */
static uint64_t dir_bytes_or_zero(const char *dir)
{
    uint64_t n;
    int rc = dir_bytes(dir, &n);
    if (rc == 0)
        return n;
    base_log(BASE_LOG_WARN, "larchd: dirs: cannot sum the files in %s: %s", dir,
             rc == -E2BIG ? "more names than the bound" : strerror(-rc));
    return 0;
}

/* ZooKeeper's DirsCommand. Its datadir_size is getDataDirSize, which
 * sums FileTxnSnapLog.getDataDir(): the txn log directory, dataLogDir's
 * version-2; logdir_size sums the snapshot directory, dataDir's version-2.
 * The names are the other way round from zoo.cfg's, and stock 3.8 answers
 * so (a separate dataLogDir shows its preallocated log as datadir_size);
 * larchd answers alike for its own directories, so that what monitors
 * ZooKeeper reads larchd the same. With one directory for both, both are
 * its total. Without a dataDir both are 0. */
void server_dir_sizes(struct server *srv, uint64_t *datadir_size, uint64_t *logdir_size)
{
    *datadir_size = srv->dur ? dir_bytes_or_zero(durability_log_dir(srv->dur)) : 0;
    *logdir_size = srv->dur ? dir_bytes_or_zero(durability_state_dir(srv->dur)) : 0;
}

/* ---- watches, sessions and ephemerals ---------------------------------------- */

static bool paths_add(struct server_paths *l, int64_t session, const char *path)
{
    if (l->oom)
        return false;
    if (base_grow(&l->v, &l->cap, l->n + 1, sizeof *l->v) != 0 ||
        (l->v[l->n].path = strdup(path)) == NULL) {
        l->oom = true;
        return false;
    }
    l->v[l->n++].session = session;
    return true;
}

void server_paths_free(struct server_paths *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].path);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static void collect_watch(void *arg, int64_t session, enum watch_kind kind, const char *path)
{
    (void)kind;
    paths_add(arg, session, path);
}

static int by_session(const void *a, const void *b)
{
    const struct server_path_entry *x = a, *y = b;
    if (x->session != y->session)
        return x->session < y->session ? -1 : 1;
    return strcmp(x->path, y->path);
}

static int by_path(const void *a, const void *b)
{
    const struct server_path_entry *x = a, *y = b;
    int c = strcmp(x->path, y->path);
    if (c)
        return c;
    return x->session < y->session ? -1 : x->session > y->session;
}

int server_watches(struct server *srv, enum server_order order, struct server_paths *out)
{
    memset(out, 0, sizeof *out);
    dp_each_watch(srv->dp, collect_watch, out);
    if (out->oom) {
        server_paths_free(out);
        return -ENOMEM;
    }
    if (out->n > 1)
        qsort(out->v, out->n, sizeof *out->v, order == SERVER_BY_PATH ? by_path : by_session);
    return 0;
}

int server_watch_summary(struct server *srv, struct server_watch_summary *out)
{
    struct server_paths l;
    int rc = server_watches(srv, SERVER_BY_PATH, &l);
    if (rc != 0)
        return rc;
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < l.n; i++)
        out->paths += i == 0 || strcmp(l.v[i].path, l.v[i - 1].path) != 0;
    if (l.n > 1)
        qsort(l.v, l.n, sizeof *l.v, by_session);
    for (size_t i = 0; i < l.n; i++)
        out->connections += i == 0 || l.v[i].session != l.v[i - 1].session;
    out->watches = l.n;
    server_paths_free(&l);
    return 0;
}

static void put_watches(struct server *srv, struct zk_wbuf *out, char mode)
{
    if (mode == 's') {
        struct server_watch_summary sum;
        if (server_watch_summary(srv, &sum) != 0) {
            out->err = true;
            return;
        }
        zk_wbuf_printf(out, "%zu connections watching %zu paths\nTotal watches:%zu\n", sum.connections,
             sum.paths, sum.watches);
        return;
    }
    struct server_paths l;
    if (server_watches(srv, mode == 'c' ? SERVER_BY_SESSION : SERVER_BY_PATH, &l) != 0) {
        out->err = true;
        return;
    }
    for (size_t i = 0; i < l.n; i++) {
        if (mode == 'c') {
            if (i == 0 || l.v[i].session != l.v[i - 1].session)
                zk_wbuf_printf(out, "0x%" PRIx64 "\n", (uint64_t)l.v[i].session);
            out_path_line(out, "\t", l.v[i].path);
        } else {
            if (i == 0 || strcmp(l.v[i].path, l.v[i - 1].path) != 0)
                out_path_line(out, "", l.v[i].path);
            zk_wbuf_printf(out, "\t0x%" PRIx64 "\n", (uint64_t)l.v[i].session);
        }
    }
    server_paths_free(&l);
}

static void collect_session(void *arg, struct tree_session *s)
{
    struct server_sessions *ss = arg;
    if (ss->ephemerals.oom)
        return;
    if (base_grow(&ss->v, &ss->cap, ss->n + 1, sizeof *ss->v) != 0) {
        ss->ephemerals.oom = true;
        return;
    }
    /* the sequencer expires a session silent for longer than its timeout */
    int64_t seen = atomic_load_explicit(&s->last_seen_ms, memory_order_relaxed);
    ss->v[ss->n++] = (struct server_session_entry){ .id = s->id, .timeout_ms = s->timeout_ms,
                                                    .expires_ms = seen + s->timeout_ms };
}

static void collect_ephemeral(void *arg, int64_t session, const char *path)
{
    paths_add(arg, session, path);
}

int server_sessions(struct server *srv, struct server_sessions *out)
{
    memset(out, 0, sizeof *out);
    rcu_read_lock();
    tree_session_each(srv->tree, collect_session, out);
    tree_each_ephemeral(srv->tree, collect_ephemeral, &out->ephemerals);
    rcu_read_unlock();
    if (out->ephemerals.oom) {
        server_sessions_free(out);
        return -ENOMEM;
    }
    if (out->ephemerals.n > 1)
        qsort(out->ephemerals.v, out->ephemerals.n, sizeof *out->ephemerals.v, by_session);
    return 0;
}

void server_sessions_free(struct server_sessions *s)
{
    free(s->v);
    server_paths_free(&s->ephemerals);
    memset(s, 0, sizeof *s);
}

/* dump: sessions and their ephemerals, in the layout of ZooKeeper's
 * standalone dump ("Sessions with Ephemerals (N):", "0x<sid>:", "\t<path>"). */
static void put_dump(struct server *srv, struct zk_wbuf *out)
{
    struct server_sessions ss;
    if (server_sessions(srv, &ss) != 0) {
        out->err = true;
        return;
    }
    zk_wbuf_printf(out, "SessionTracker dump:\nGlobal Sessions(%zu):\n", ss.n);
    for (size_t i = 0; i < ss.n; i++)
        zk_wbuf_printf(out, "\t0x%" PRIx64 "\t%dms\n", (uint64_t)ss.v[i].id, ss.v[i].timeout_ms);
    const struct server_paths *eph = &ss.ephemerals;
    size_t owners = 0;
    for (size_t i = 0; i < eph->n; i++)
        owners += i == 0 || eph->v[i].session != eph->v[i - 1].session;
    zk_wbuf_printf(out, "ephemeral nodes dump:\nSessions with Ephemerals (%zu):\n", owners);
    for (size_t i = 0; i < eph->n; i++) {
        if (i == 0 || eph->v[i].session != eph->v[i - 1].session)
            zk_wbuf_printf(out, "0x%" PRIx64 ":\n", (uint64_t)eph->v[i].session);
        out_path_line(out, "\t", eph->v[i].path);
    }
    server_sessions_free(&ss);
}

/* hash: ZooKeeper's DigestCommand, one line per entry of the digest log
 * (replication.h), oldest first: the zxid as Long.toHexString prints it (no
 * 0x, no padding), ": ", the digest as a Java long prints (signed decimal:
 * larchd's digest is 64 bits of hash, negative half the time, and printed
 * so it parses as the long ZooKeeper prints). Nothing before the first
 * zxid that is a multiple of 128, as in ZooKeeper. */
static void put_hash(struct server *srv, struct zk_wbuf *out)
{
    struct seq_digest *log = malloc(SEQ_DIGEST_LOG_MAX * sizeof *log);
    if (!log) {
        out->err = true;
        return;
    }
    size_t n = seq_digest_log(srv->seq, log, SEQ_DIGEST_LOG_MAX);
    for (size_t i = 0; i < n; i++)
        zk_wbuf_printf(out, "%" PRIx64 ": %" PRId64 "\n", (uint64_t)log[i].zxid, (int64_t)log[i].digest);
    free(log);
}

void fourlw_answer(void *arg, struct dp *dp, const char *word, int64_t word_arg,
                   struct zk_wbuf *out)
{
    struct server *srv = arg;
    (void)dp;
    struct server_counts s;
    if (strcmp(word, "ruok") == 0) {
        zk_wbuf_printf(out, "imok");
    } else if (strcmp(word, "isro") == 0) {
        zk_wbuf_printf(out, "%s", server_read_only(srv) ? "ro" : "rw");
    } else if (strcmp(word, "srvr") == 0) {
        server_get_counts(srv, &s);
        put_version(out);
        put_server_stats(srv, out, &s);
    } else if (strcmp(word, "stat") == 0) {
        server_get_counts(srv, &s);
        put_version(out);
        zk_wbuf_printf(out, "Clients:\n");
        dp_each_conn(srv->dp, put_conn_brief, out);
        zk_wbuf_printf(out, "\n");
        put_server_stats(srv, out, &s);
    } else if (strcmp(word, "mntr") == 0) {
        server_monitor(srv, mntr_line, out);
    } else if (strcmp(word, "conf") == 0) {
        put_conf(srv, out);
    } else if (strcmp(word, "cons") == 0) {
        dp_each_conn(srv->dp, put_conn_full, out);
        zk_wbuf_printf(out, "\n");
    } else if (strcmp(word, "crst") == 0) {
        dp_reset_conn_stats(srv->dp);
        zk_wbuf_printf(out, "Connection stats reset.\n");
    } else if (strcmp(word, "srst") == 0) {
        dp_reset_stats(srv->dp);
        zk_wbuf_printf(out, "Server stats reset.\n");
    } else if (strcmp(word, "envi") == 0) {
        zk_wbuf_printf(out, "Environment:\n");
        server_environment(srv, envi_line, out);
    } else if (strcmp(word, "wchs") == 0) {
        put_watches(srv, out, 's');
    } else if (strcmp(word, "wchc") == 0) {
        put_watches(srv, out, 'c');
    } else if (strcmp(word, "wchp") == 0) {
        put_watches(srv, out, 'p');
    } else if (strcmp(word, "dump") == 0) {
        put_dump(srv, out);
    } else if (strcmp(word, "dirs") == 0) {
        uint64_t data, log;
        server_dir_sizes(srv, &data, &log);
        zk_wbuf_printf(out, "datadir_size: %" PRIu64 "\nlogdir_size: %" PRIu64 "\n", data, log);
    } else if (strcmp(word, "hash") == 0) {
        put_hash(srv, out);
    } else if (strcmp(word, "gtmk") == 0) {
        /* ZooKeeper's TraceMaskCommand: the number, no newline */
        zk_wbuf_printf(out, "%" PRId64, atomic_load(&srv->trace_mask));
    } else if (strcmp(word, "stmk") == 0) {
        /* SetTraceMaskCommand: sets the mask and echoes it, no newline */
        atomic_store(&srv->trace_mask, word_arg);
        zk_wbuf_printf(out, "%" PRId64, word_arg);
    }
}
