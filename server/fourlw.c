/*
 * fourlw.c — ZooKeeper's four-letter words on the client port, with the
 * output formats of ZooKeeper 3.8 (tools such as zkServer.sh status, kazoo's
 * server_version and monitoring agents parse them).
 */
#include "server/server.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <urcu.h>

#define CONF_TEXT_MAX 16384 /* conf's text: the settings and up to 32 server.N lines */
#define DIRS_NAMES_MAX 65536 /* dirs reads at most this many names per directory */

/* Appends the formatted text whole, however long (a watched path may be as
 * long as a frame): measure, reserve, then format in place. On allocation
 * failure out->err is set (the caller sends nothing). */
static void outf(struct zk_wbuf *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void outf(struct zk_wbuf *out, const char *fmt, ...)
{
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    /* reserve one more byte for vsnprintf's NUL, which len then excludes */
    if (n >= 0 && zk_wbuf_reserve(out, (size_t)n + 1)) {
        vsnprintf((char *)out->p + out->len, (size_t)n + 1, fmt, again);
        out->len += (size_t)n;
    }
    va_end(again);
}

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

static void put_version(struct zk_wbuf *out)
{
    outf(out, "Zookeeper version: %s, built on %s %s\n", LARCH_ZK_VERSION, __DATE__, __TIME__);
}

struct tree_snapshot {
    struct tree_stats ts;
    struct dp_stats ds;
};

static void snapshot(struct server *srv, struct tree_snapshot *s)
{
    rcu_read_lock();
    tree_stats(srv->tree, &s->ts);
    rcu_read_unlock();
    dp_get_stats(srv->dp, &s->ds);
}

/* ZooKeeper's server states. A server of an ensemble that knows no leader
 * (an election is on) is "looking", as ZooKeeper's QuorumPeer says. */
static const char *server_state(struct server *srv, struct seq_ens_status *st)
{
    if (!srv->member || !seq_ens_status(srv->seq, st))
        return "standalone";
    if (st->read_only)
        return "read-only"; /* ZooKeeper's ReadOnlyZooKeeperServer */
    switch (st->raft.role) {
    case RAFT_LEADER:
        return "leader";
    case RAFT_OBSERVER:
        return "observer";
    default:
        return st->raft.leader_id != 0 ? "follower" : "looking";
    }
}

static const char *peer_state(const char *state)
{
    if (strcmp(state, "leader") == 0)
        return "leading - broadcast";
    if (strcmp(state, "follower") == 0)
        return "following - broadcast";
    if (strcmp(state, "observer") == 0)
        return "observing - broadcast";
    return "looking - election";
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

/* The ensemble part of mntr: ZooKeeper's names where it has them (the
 * leader's zk_followers and zk_synced_followers), ours for the rest. */
static void put_mntr_ensemble(struct server *srv, struct zk_wbuf *out,
                              const struct seq_ens_status *st, const char *state)
{
    const struct raft_status *r = &st->raft;
    outf(out, "zk_peer_state\t%s\n", peer_state(state));
    uint32_t voters = 0;
    for (uint32_t i = 0; i < r->config.n_members; i++)
        voters += r->config.members[i].voter;
    outf(out, "zk_quorum_size\t%u\n", voters); /* ZooKeeper's: the voting members */
    if (r->role == RAFT_LEADER) {
        uint32_t learners = 0, synced = 0;
        for (uint32_t i = 0; i < r->n_peers; i++) {
            if (r->peers[i].id == srv->ens.self_id)
                continue;
            learners += r->peers[i].recently_active;
            synced += r->peers[i].recently_active && r->peers[i].voter &&
                      r->peers[i].match_zxid == r->last_zxid;
        }
        outf(out, "zk_learners\t%u\n", learners);
        outf(out, "zk_followers\t%u\n", learners);
        outf(out, "zk_synced_followers\t%u\n", synced);
        outf(out, "zk_pending_syncs\t0\n");
    }
    outf(out, "zk_larch_term\t%u\n", r->term);
    outf(out, "zk_larch_leader_id\t%u\n", r->leader_id);
    outf(out, "zk_larch_commit_zxid\t0x%" PRIx64 "\n", (uint64_t)r->commit_zxid);
    outf(out, "zk_larch_last_zxid\t0x%" PRIx64 "\n", (uint64_t)r->last_zxid);
    outf(out, "zk_larch_log_start_zxid\t0x%" PRIx64 "\n", (uint64_t)r->snap_zxid);
    outf(out, "zk_larch_forwards_sent\t%" PRIu64 "\n", st->forwards_sent);
    outf(out, "zk_larch_forwards_received\t%" PRIu64 "\n", st->forwards_received);
    outf(out, "zk_larch_pending_requests\t%" PRIu64 "\n", st->pending);
    outf(out, "zk_larch_pending_failed\t%" PRIu64 "\n", st->pending_failed);
    outf(out, "zk_larch_serving\t%d\n", st->serving ? 1 : 0);
    outf(out, "zk_larch_digest\t0x%016" PRIx64 "\n", st->digest);
    outf(out, "zk_larch_digest_zxid\t0x%" PRIx64 "\n", (uint64_t)st->digest_zxid);
    /* ZooKeeper's name: digests that differed from the leader's */
    outf(out, "zk_digest_mismatches_count\t%" PRIu64 "\n", st->digest_mismatches);
    outf(out, "zk_larch_digest_checks\t%" PRIu64 "\n", st->digest_checks);
    outf(out, "zk_larch_resyncing\t%d\n", st->resyncing ? 1 : 0);
    outf(out, "zk_larch_snapshots_sent\t%" PRIu64 "\n", st->snapshots_sent);
    outf(out, "zk_larch_snapshots_installed\t%" PRIu64 "\n", st->snapshots_installed);
    outf(out, "zk_larch_proposals\t%" PRIu64 "\n", st->proposals);
    /* per peer: the link, and on the leader how far behind the peer is */
    struct peer_link_peer_status ps;
    for (uint32_t i = 0; peers_status(srv->peers, i, &ps) == 0; i++) {
        outf(out, "zk_larch_peer_%u_connected\t%d\n", ps.id, ps.connected ? 1 : 0);
        outf(out, "zk_larch_peer_%u_reconnects\t%" PRIu64 "\n", ps.id, ps.reconnects);
        outf(out, "zk_larch_peer_%u_dropped\t%" PRIu64 "\n", ps.id,
             ps.dropped_no_link + ps.dropped_full);
        for (uint32_t k = 0; r->role == RAFT_LEADER && k < r->n_peers; k++) {
            if (r->peers[k].id != ps.id)
                continue;
            int64_t m = r->peers[k].match_zxid;
            outf(out, "zk_larch_peer_%u_match_zxid\t0x%" PRIx64 "\n", ps.id, (uint64_t)m);
            /* entries behind, when both are in the leader's term (else unknown: -1) */
            int64_t lag = raft_zxid_term(m) == raft_zxid_term(r->last_zxid)
                              ? (int64_t)raft_zxid_counter(r->last_zxid) - raft_zxid_counter(m)
                              : -1;
            outf(out, "zk_larch_peer_%u_lag\t%" PRId64 "\n", ps.id, lag);
        }
    }
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
    outf(out, "UDP reads (%s): %s:%d received=%" PRIu64 " served=%" PRIu64 " refused=%" PRIu64
              " dropped=%" PRIu64 "\n",
         how, srv->cfg.udp.host, srv->cfg.udp.port, taken, served, other, dropped);
}

/* The average latency in ms as ZooKeeper prints it: AvgMinMaxCounter.getAvg
 * rounds total/count half up to 4 decimals, and Java's Double.toString
 * prints that: "0.0" with none, "2.0565", "1.5", "5.0E-4" below 0.001 and
 * "1.23456789E7" from 10^7 on. Computed in integers (ten-thousandths of a
 * ms), so the rounding is exact. buf has room for AVG_TEXT_MAX bytes. */
#define AVG_TEXT_MAX 48
static void format_avg_latency(uint64_t sum_us, uint64_t count, char *buf)
{
    /* ms * 10^4 = sum_us * 10 / count, rounded half up */
    unsigned __int128 k128 =
        count ? ((unsigned __int128)sum_us * 20 + count) / ((unsigned __int128)count * 2) : 0;
    uint64_t k = k128 > UINT64_MAX ? UINT64_MAX : (uint64_t)k128;
    char digits[24];
    if (k > 0 && k < 10) { /* below 10^-3: one digit, k x 10^-4 */
        snprintf(buf, AVG_TEXT_MAX, "%" PRIu64 ".0E-4", k);
        return;
    }
    if (k < 100000000000ull) { /* below 10^7: plain, trailing zeros dropped */
        int frac = (int)(k % 10000);
        int width = 4;
        while (width > 1 && frac % 10 == 0) {
            frac /= 10;
            width--;
        }
        snprintf(buf, AVG_TEXT_MAX, "%" PRIu64 ".%0*d", k / 10000, width, frac);
        return;
    }
    /* d.ddd...E<n>: every digit of k but trailing zeros, one at least after the point */
    int n = snprintf(digits, sizeof digits, "%" PRIu64, k);
    int last = n - 1;
    while (last > 1 && digits[last] == '0')
        last--;
    snprintf(buf, AVG_TEXT_MAX, "%c.%.*sE%d", digits[0], last, digits + 1, n - 1 - 4);
}

static void put_server_stats(struct server *srv, struct zk_wbuf *out, const struct tree_snapshot *s)
{
    const struct dp_stats *d = &s->ds;
    char avg[AVG_TEXT_MAX];
    format_avg_latency(d->latency_sum_us, d->latency_count, avg);
    outf(out, "Latency min/avg/max: %" PRIu64 "/%s/%" PRIu64 "\n", d->latency_min_us / 1000, avg,
         d->latency_max_us / 1000);
    outf(out, "Received: %" PRIu64 "\n", d->packets_received);
    outf(out, "Sent: %" PRIu64 "\n", d->packets_sent);
    outf(out, "Connections: %" PRIu64 "\n", d->connections);
    outf(out, "Outstanding: %" PRIu64 "\n", d->outstanding);
    outf(out, "Zxid: 0x%" PRIx64 "\n", (uint64_t)s->ts.last_zxid);
    struct seq_ens_status st;
    outf(out, "Mode: %s\n", server_state(srv, &st));
    outf(out, "Node count: %" PRId64 "\n", s->ts.node_count);
    put_srvr_udp(srv, out, d);
}

static void put_conn_brief(void *arg, const struct dp_conn_info *ci)
{
    struct zk_wbuf *out = arg;
    outf(out, " /%s[1](queued=%u,recved=%" PRIu64 ",sent=%" PRIu64 ")\n", ci->peer, ci->queued, ci->received,
         ci->sent);
}

static void put_conn_full(void *arg, const struct dp_conn_info *ci)
{
    struct zk_wbuf *out = arg;
    const char *lop = ci->last_op == DP_CONN_NO_OP ? "NA" : zk_op_name(ci->last_op);
    outf(out,
         " /%s[1](queued=%u,recved=%" PRIu64 ",sent=%" PRIu64 ",sid=0x%" PRIx64 ",lop=%s,est=%" PRId64
         ",to=%d,lzxid=0x%" PRIx64 ",llat=%" PRId64 ",minlat=%" PRId64 ",avglat=%" PRId64 ",maxlat=%" PRId64 ")\n",
         ci->peer, ci->queued, ci->received, ci->sent, (uint64_t)ci->session_id, lop,
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
static void put_mntr_udp(struct server *srv, struct zk_wbuf *out, const struct dp_stats *d)
{
    static const char *const dropped[DP_UDP_DROPS] = {
        "short", "not_larch", "reply", "header", "no_memory",
    };
    if (dp_udp_port(srv->dp) == 0)
        return;
    outf(out, "zk_larch_udp_port\t%d\n", dp_udp_port(srv->dp));
    outf(out, "zk_larch_udp_datagrams\t%" PRIu64 "\n", d->udp_datagrams);
    for (int i = 0; i < ZK_UDP_STATUSES; i++)
        outf(out, "zk_larch_udp_replies_%s\t%" PRIu64 "\n", zk_udp_status_name((uint32_t)i),
             d->udp_answered[i]);
    for (int i = 0; i < DP_UDP_DROPS; i++)
        outf(out, "zk_larch_udp_dropped_%s\t%" PRIu64 "\n", dropped[i], d->udp_dropped[i]);
    outf(out, "zk_larch_udp_unsent\t%" PRIu64 "\n", d->udp_unsent);
}

/* The UDP path on a DPDK port, when it runs: frames, what was answered,
 * drops by reason, and the reads each poll-mode core served. */
static void put_mntr_dpdk(struct server *srv, struct zk_wbuf *out)
{
#ifdef LARCH_HAVE_DPDK
    static const char *const dropped[LDP_DROPS] = {
        "runt", "ethertype", "arp", "not_ours", "ip_header", "fragment",
        "protocol", "icmp", "port", "udp_header", "udp_request",
    };
    if (!srv->ldp)
        return;
    struct ldp_stats *st = malloc(sizeof *st);
    if (!st)
        return;
    ldp_get_stats(srv->ldp, st);
    outf(out, "zk_larch_dpdk_cores\t%d\n", st->cores);
    outf(out, "zk_larch_dpdk_frames\t%" PRIu64 "\n", st->frames);
    outf(out, "zk_larch_dpdk_arp_replies\t%" PRIu64 "\n", st->arp_replies);
    outf(out, "zk_larch_dpdk_icmp_replies\t%" PRIu64 "\n", st->icmp_replies);
    outf(out, "zk_larch_dpdk_udp_replies\t%" PRIu64 "\n", st->udp_replies);
    outf(out, "zk_larch_dpdk_tx_dropped\t%" PRIu64 "\n", st->tx_dropped);
    for (int i = 0; i < LDP_DROPS; i++)
        outf(out, "zk_larch_dpdk_dropped_%s\t%" PRIu64 "\n", dropped[i], st->dropped[i]);
    for (int i = 0; i < ZK_UDP_STATUSES; i++)
        outf(out, "zk_larch_dpdk_replies_%s\t%" PRIu64 "\n", zk_udp_status_name((uint32_t)i),
             st->udp.answered[i]);
    for (int i = 0; i < st->cores && i < LDP_CORES_MAX; i++)
        outf(out, "zk_larch_dpdk_core%d_udp_replies\t%" PRIu64 "\n", i, st->core_udp_replies[i]);
    for (int i = 0; i < st->cores && i < LDP_CORES_MAX; i++)
        outf(out, "zk_larch_dpdk_core%d_busy_ns\t%" PRIu64 "\n", i, st->core_busy_ns[i]);
    free(st);
#else
    (void)srv, (void)out;
#endif
}

/* mntr: "key\tvalue" lines, the names ZooKeeper's monitoring uses. */
static void put_mntr(struct server *srv, struct zk_wbuf *out)
{
    struct tree_snapshot s;
    snapshot(srv, &s);
    struct seq_stats q;
    seq_get_stats(srv->seq, &q);
    const struct dp_stats *d = &s.ds;
    struct rlimit rl = { 0 };
    getrlimit(RLIMIT_NOFILE, &rl);
    char avg[AVG_TEXT_MAX];
    format_avg_latency(d->latency_sum_us, d->latency_count, avg);
    outf(out, "zk_version\t%s, built on %s %s\n", LARCH_ZK_VERSION, __DATE__, __TIME__);
    struct seq_ens_status est;
    const char *state = server_state(srv, &est);
    outf(out, "zk_server_state\t%s\n", state);
    outf(out, "zk_avg_latency\t%s\n", avg);
    outf(out, "zk_max_latency\t%" PRIu64 "\n", d->latency_max_us / 1000);
    outf(out, "zk_min_latency\t%" PRIu64 "\n", d->latency_min_us / 1000);
    outf(out, "zk_packets_received\t%" PRIu64 "\n", d->packets_received);
    outf(out, "zk_packets_sent\t%" PRIu64 "\n", d->packets_sent);
    outf(out, "zk_num_alive_connections\t%" PRIu64 "\n", d->connections);
    outf(out, "zk_outstanding_requests\t%" PRIu64 "\n", d->outstanding);
    outf(out, "zk_znode_count\t%" PRId64 "\n", s.ts.node_count);
    outf(out, "zk_watch_count\t%" PRIu64 "\n", d->watches);
    outf(out, "zk_ephemerals_count\t%" PRId64 "\n", s.ts.ephemeral_count);
    outf(out, "zk_approximate_data_size\t%" PRId64 "\n", s.ts.data_bytes);
    outf(out, "zk_open_file_descriptor_count\t%d\n", count_fds());
    outf(out, "zk_max_file_descriptor_count\t%llu\n", (unsigned long long)rl.rlim_cur);
    outf(out, "zk_global_sessions\t%" PRId64 "\n", s.ts.session_count);
    outf(out, "zk_last_proposal_size\t-1\n");
    outf(out, "zk_larch_reads\t%" PRIu64 "\n", d->reads);
    outf(out, "zk_larch_writes\t%" PRIu64 "\n", q.writes);
    outf(out, "zk_larch_sequencer_rounds\t%" PRIu64 "\n", q.rounds);
    outf(out, "zk_larch_sequencer_max_round\t%" PRIu64 "\n", q.max_round);
    outf(out, "zk_larch_sessions_expired\t%" PRIu64 "\n", q.sessions_expired);
    outf(out, "zk_larch_workers\t%d\n", srv->cfg.workers);
    outf(out, "zk_larch_durable\t%s\n", srv->dur ? "true" : "false");
    /* Nonzero while writes wait for the disk (full, failing): see README. */
    outf(out, "zk_larch_log_error\t%" PRId64 "\n", q.log_error);
    outf(out, "zk_larch_log_syncs\t%" PRIu64 "\n", q.log_syncs);
    /* The memory budget (README "Limits and hostile clients"). */
    outf(out, "zk_larch_buffered_bytes\t%" PRIu64 "\n", d->buffered_bytes);
    outf(out, "zk_larch_buffered_bytes_limit\t%" PRIu64 "\n", d->buffered_bytes_limit);
    outf(out, "zk_larch_memory_pressure\t%d\n", d->memory_pressure ? 1 : 0);
    outf(out, "zk_larch_throttled_connections\t%" PRIu64 "\n", d->throttled_connections);
    outf(out, "zk_larch_throttle_events\t%" PRIu64 "\n", d->throttle_events);
    outf(out, "zk_larch_slow_consumer_closes\t%" PRIu64 "\n", d->slow_consumer_closes);
    outf(out, "zk_larch_sessionless_timeouts\t%" PRIu64 "\n", d->sessionless_timeouts);
    outf(out, "zk_larch_connections_refused\t%" PRIu64 "\n", d->connections_refused);
    put_mntr_udp(srv, out, d);
    put_mntr_dpdk(srv, out);
    if (srv->member)
        put_mntr_ensemble(srv, out, &est, state);
    if (srv->dur) {
        struct durability_stats ds;
        durability_get_stats(srv->dur, &ds);
        outf(out, "zk_larch_last_snapshot_zxid\t0x%" PRIx64 "\n", (uint64_t)ds.last_snapshot_zxid);
        outf(out, "zk_larch_snapshots\t%" PRIu64 "\n", ds.snapshots);
        outf(out, "zk_larch_snapshot_error\t%" PRId64 "\n", ds.last_snapshot_error);
    }
}

static void put_envi(struct server *srv, struct zk_wbuf *out)
{
    struct utsname u;
    char host[256] = "", cwd[1024] = "";
    uname(&u);
    gethostname(host, sizeof(host) - 1);
    if (!getcwd(cwd, sizeof(cwd)))
        cwd[0] = '\0';
    struct passwd *pw = getpwuid(getuid());
    outf(out, "Environment:\n");
    outf(out, "zookeeper.version=%s, built on %s %s\n", LARCH_ZK_VERSION, __DATE__, __TIME__);
    outf(out, "host.name=%s\n", host);
    outf(out, "larch.version=%s\n", LARCH_VERSION);
    outf(out, "larch.workers=%d\n", srv->cfg.workers);
    outf(out, "os.name=%s\n", u.sysname);
    outf(out, "os.arch=%s\n", u.machine);
    outf(out, "os.version=%s\n", u.release);
    outf(out, "user.name=%s\n", pw ? pw->pw_name : "?");
    outf(out, "user.home=%s\n", pw ? pw->pw_dir : "?");
    outf(out, "user.dir=%s\n", cwd);
    outf(out, "os.memory.free=%ldMB\n", (long)(sysconf(_SC_AVPHYS_PAGES) * (sysconf(_SC_PAGESIZE) / 1024) / 1024));
}

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
    fprintf(stderr, "larchd: dirs: cannot sum the files in %s: %s\n", dir,
            rc == -E2BIG ? "more names than the bound" : strerror(-rc));
    return 0;
}

/* dirs: ZooKeeper's DirsCommand. Its datadir_size is getDataDirSize, which
 * sums FileTxnSnapLog.getDataDir(): the txn log directory, dataLogDir's
 * version-2; logdir_size sums the snapshot directory, dataDir's version-2.
 * The names are the other way round from zoo.cfg's, and stock 3.8 answers
 * so (a separate dataLogDir shows its preallocated log as datadir_size);
 * larchd answers alike for its own directories, so that what monitors
 * ZooKeeper reads larchd the same. With one directory for both, both lines
 * are its total. Without a dataDir both are 0. */
static void put_dirs(struct server *srv, struct zk_wbuf *out)
{
    uint64_t log_bytes = 0, snap_bytes = 0;
    if (srv->dur) {
        log_bytes = dir_bytes_or_zero(durability_log_dir(srv->dur));
        snap_bytes = dir_bytes_or_zero(durability_state_dir(srv->dur));
    }
    outf(out, "datadir_size: %" PRIu64 "\nlogdir_size: %" PRIu64 "\n", log_bytes, snap_bytes);
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
        outf(out, "%" PRIx64 ": %" PRId64 "\n", (uint64_t)log[i].zxid, (int64_t)log[i].digest);
    free(log);
}

/* ---- watch dumps ------------------------------------------------------------ */

struct wentry {
    int64_t session;
    char *path;
};
struct wlist {
    struct wentry *v;
    size_t n, cap;
    bool oom;
};

static void collect_watch(void *arg, int64_t session, enum watch_kind kind, const char *path)
{
    struct wlist *l = arg;
    (void)kind;
    if (l->oom)
        return;
    if (base_grow(&l->v, &l->cap, l->n + 1, sizeof *l->v) != 0) {
        l->oom = true;
        return;
    }
    l->v[l->n].session = session;
    l->v[l->n].path = strdup(path);
    if (!l->v[l->n].path) {
        l->oom = true;
        return;
    }
    l->n++;
}

static int by_session(const void *a, const void *b)
{
    const struct wentry *x = a, *y = b;
    if (x->session != y->session)
        return x->session < y->session ? -1 : 1;
    return strcmp(x->path, y->path);
}

static int by_path(const void *a, const void *b)
{
    const struct wentry *x = a, *y = b;
    int c = strcmp(x->path, y->path);
    if (c)
        return c;
    return x->session < y->session ? -1 : x->session > y->session;
}

static void put_watches(struct server *srv, struct zk_wbuf *out, char mode)
{
    struct wlist l = { 0 };
    dp_each_watch(srv->dp, collect_watch, &l);
    if (l.n == 0) {
        if (mode == 's')
            outf(out, "0 connections watching 0 paths\nTotal watches:0\n");
        return;
    }
    if (mode == 's') {
        qsort(l.v, l.n, sizeof(*l.v), by_path);
        size_t paths = 0;
        for (size_t i = 0; i < l.n; i++)
            paths += i == 0 || strcmp(l.v[i].path, l.v[i - 1].path) != 0;
        qsort(l.v, l.n, sizeof(*l.v), by_session);
        size_t sessions = 0;
        for (size_t i = 0; i < l.n; i++)
            sessions += i == 0 || l.v[i].session != l.v[i - 1].session;
        outf(out, "%zu connections watching %zu paths\nTotal watches:%zu\n", sessions, paths, l.n);
    } else if (mode == 'c') {
        qsort(l.v, l.n, sizeof(*l.v), by_session);
        for (size_t i = 0; i < l.n; i++) {
            if (i == 0 || l.v[i].session != l.v[i - 1].session)
                outf(out, "0x%" PRIx64 "\n", (uint64_t)l.v[i].session);
            out_path_line(out, "\t", l.v[i].path);
        }
    } else {
        qsort(l.v, l.n, sizeof(*l.v), by_path);
        for (size_t i = 0; i < l.n; i++) {
            if (i == 0 || strcmp(l.v[i].path, l.v[i - 1].path) != 0)
                out_path_line(out, "", l.v[i].path);
            outf(out, "\t0x%" PRIx64 "\n", (uint64_t)l.v[i].session);
        }
    }
    for (size_t i = 0; i < l.n; i++)
        free(l.v[i].path);
    free(l.v);
}

/* dump: sessions and their ephemerals, in the layout of ZooKeeper's
 * standalone dump ("Sessions with Ephemerals (N):", "0x<sid>:", "\t<path>"). */
struct dump_ctx {
    struct zk_wbuf *out;
    struct wlist eph; /* session id + ephemeral path, reusing the watch list */
};

static void dump_session(void *arg, struct tree_session *s)
{
    struct dump_ctx *d = arg;
    outf(d->out, "\t0x%" PRIx64 "\t%dms\n", (uint64_t)s->id, s->timeout_ms);
}

static void dump_ephemeral(void *arg, int64_t session, const char *path)
{
    struct dump_ctx *d = arg;
    collect_watch(&d->eph, session, WATCH_DATA, path);
}

static void count_session(void *arg, struct tree_session *s)
{
    (void)s;
    ++*(int64_t *)arg;
}

static void put_dump(struct server *srv, struct zk_wbuf *out)
{
    struct dump_ctx d = { .out = out };
    int64_t sessions_now = 0;
    rcu_read_lock();
    tree_session_each(srv->tree, count_session, &sessions_now);
    outf(out, "SessionTracker dump:\nGlobal Sessions(%" PRId64 "):\n", sessions_now);
    tree_session_each(srv->tree, dump_session, &d);
    tree_each_ephemeral(srv->tree, dump_ephemeral, &d);
    rcu_read_unlock();
    if (d.eph.n)
        qsort(d.eph.v, d.eph.n, sizeof(*d.eph.v), by_session);
    size_t owners = 0;
    for (size_t i = 0; i < d.eph.n; i++)
        owners += i == 0 || d.eph.v[i].session != d.eph.v[i - 1].session;
    outf(out, "ephemeral nodes dump:\nSessions with Ephemerals (%zu):\n", owners);
    for (size_t i = 0; i < d.eph.n; i++) {
        if (i == 0 || d.eph.v[i].session != d.eph.v[i - 1].session)
            outf(out, "0x%" PRIx64 ":\n", (uint64_t)d.eph.v[i].session);
        out_path_line(out, "\t", d.eph.v[i].path);
        free(d.eph.v[i].path);
    }
    free(d.eph.v);
}

void fourlw_answer(void *arg, struct dp *dp, const char *word, int64_t word_arg,
                   struct zk_wbuf *out)
{
    struct server *srv = arg;
    (void)dp;
    struct tree_snapshot s;
    if (strcmp(word, "ruok") == 0) {
        outf(out, "imok");
    } else if (strcmp(word, "isro") == 0) {
        struct seq_ens_status st;
        outf(out, "%s", srv->member && seq_ens_status(srv->seq, &st) && st.read_only ? "ro"
                                                                                     : "rw");
    } else if (strcmp(word, "srvr") == 0) {
        snapshot(srv, &s);
        put_version(out);
        put_server_stats(srv, out, &s);
    } else if (strcmp(word, "stat") == 0) {
        snapshot(srv, &s);
        put_version(out);
        outf(out, "Clients:\n");
        dp_each_conn(srv->dp, put_conn_brief, out);
        outf(out, "\n");
        put_server_stats(srv, out, &s);
    } else if (strcmp(word, "mntr") == 0) {
        put_mntr(srv, out);
    } else if (strcmp(word, "conf") == 0) {
        put_conf(srv, out);
    } else if (strcmp(word, "cons") == 0) {
        dp_each_conn(srv->dp, put_conn_full, out);
        outf(out, "\n");
    } else if (strcmp(word, "crst") == 0) {
        dp_reset_conn_stats(srv->dp);
        outf(out, "Connection stats reset.\n");
    } else if (strcmp(word, "srst") == 0) {
        dp_reset_stats(srv->dp);
        outf(out, "Server stats reset.\n");
    } else if (strcmp(word, "envi") == 0) {
        put_envi(srv, out);
    } else if (strcmp(word, "wchs") == 0) {
        put_watches(srv, out, 's');
    } else if (strcmp(word, "wchc") == 0) {
        put_watches(srv, out, 'c');
    } else if (strcmp(word, "wchp") == 0) {
        put_watches(srv, out, 'p');
    } else if (strcmp(word, "dump") == 0) {
        put_dump(srv, out);
    } else if (strcmp(word, "dirs") == 0) {
        put_dirs(srv, out);
    } else if (strcmp(word, "hash") == 0) {
        put_hash(srv, out);
    } else if (strcmp(word, "gtmk") == 0) {
        /* ZooKeeper's TraceMaskCommand: the number, no newline */
        outf(out, "%" PRId64, atomic_load(&srv->trace_mask));
    } else if (strcmp(word, "stmk") == 0) {
        /* SetTraceMaskCommand: sets the mask and echoes it, no newline */
        atomic_store(&srv->trace_mask, word_arg);
        outf(out, "%" PRId64, word_arg);
    }
}
