/*
 * admin.c — ZooKeeper's AdminServer (its JettyAdminServer and Commands,
 * 3.9): GET <commandURL> lists the commands as HTML links, GET
 * <commandURL>/<name> runs one and answers ZooKeeper's JSON, under the
 * primary name or an alias: the command's members, then "command" (the
 * primary name) and "error" (null, or what went wrong). An unknown name
 * gets ZooKeeper's {"command": <name>, "error": "Unknown command: <name>"}
 * with status 200, as ZooKeeper answers it; a command that needs a
 * serving server gets ZooKeeper's "not currently serving requests" while
 * an ensemble member has no leader.
 *
 * Every value comes from what the four-letter words report (fourlw.c,
 * declared in server.h), with ZooKeeper's member names and JSON types. A
 * ZooKeeper member larchd has no truth for (JVM facts, per-connection
 * interest ops, response sizes, ...) is left out rather than made up;
 * README "AdminServer" lists them. Not served: snapshot and restore (3.9
 * guards them with its admin authentication, which larchd does not
 * implement), set_trace_mask (it takes an argument, which larchd's
 * AdminServer does not read: the 4lw stmk sets the mask) and
 * observer_connection_stat_reset (larchd keeps no per-observer counters
 * to reset): each answers 503 (ZooKeeper's status for a disabled
 * snapshot or restore) with the reason in "error".
 *
 * Threading: admin_http_get runs on the HTTP server's thread (http.c),
 * registered with liburcu, and reads everything through fourlw.c's
 * any-thread functions and the dataplane's locked walks.
 */
#include "server/server.h"

#include "json/json.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <urcu.h>

#define JSON_TYPE "application/json"
#define HTML_TYPE "text/html; charset=utf-8"
#define NOT_SERVING "This ZooKeeper instance is not currently serving requests"
#define NO_LEADER_ID (-1) /* ZooKeeper's QuorumPeer.getLeaderId() without a leader */

struct admin {
    struct server *srv;
    struct http *http;
    char url[sizeof(((struct config *)0)->admin_command_url)];
    char *initial_config; /* the --config file's text at start; NULL: none */
};

/* Writes the command's members into the open response object. Returns
 * NULL, or the error the response carries (ZooKeeper's leader command on
 * a standalone server puts one). */
typedef const char *(*admin_run_fn)(struct admin *a, struct json *j);

struct admin_cmd {
    const char *names[4];   /* the primary name first, then aliases; NULL ends */
    admin_run_fn run;       /* NULL: not served, see why */
    bool server_required;   /* ZooKeeper's CommandBase.isServerRequired() */
    const char *why;        /* not served: the reason */
};

/* ---- small writers ------------------------------------------------------------ */

static void member_int(struct json *j, const char *key, int64_t v)
{
    json_key(j, key);
    json_int(j, v);
}

static void member_uint(struct json *j, const char *key, uint64_t v)
{
    json_key(j, key);
    json_uint(j, v);
}

static void member_text(struct json *j, const char *key, const char *v)
{
    json_key(j, key);
    json_string(j, v);
}

static void member_bool(struct json *j, const char *key, bool v)
{
    json_key(j, key);
    json_bool(j, v);
}

/* A report value as the JSON type ZooKeeper gives the same Java value. */
static void report_member(void *arg, const char *key, const struct report_value *v)
{
    struct json *j = arg;
    json_key(j, key);
    switch (v->type) {
    case REPORT_INT: json_int(j, v->i); break;
    case REPORT_UINT: json_uint(j, v->u); break;
    case REPORT_DOUBLE: json_double(j, v->d); break;
    case REPORT_TEXT: json_string(j, v->text); break;
    case REPORT_BOOL: json_bool(j, v->b); break;
    }
}

/* A map key from a number: JSON's keys are strings, as Jackson writes a
 * Map<Long, ...>'s. */
static void key_int(struct json *j, int64_t v)
{
    char k[24];
    snprintf(k, sizeof k, "%" PRId64, v);
    json_key(j, k);
}

/* "host:port", brackets around an IPv6 host (ZooKeeper's
 * QuorumServer.delimitedHostString). */
static void host_port(char *out, size_t len, const char *host, int port)
{
    bool v6 = strchr(host, ':') != NULL;
    snprintf(out, len, "%s%s%s:%d", v6 ? "[" : "", host, v6 ? "]" : "", port);
}

/* ---- the commands ------------------------------------------------------------- */

static const char *run_ruok(struct admin *a, struct json *j)
{
    (void)a, (void)j;
    return NULL;
}

static const char *run_stat_reset(struct admin *a, struct json *j)
{
    (void)j;
    /* as the 4lw srst: the server-wide packet and latency counters */
    dp_reset_stats(a->srv->dp);
    return NULL;
}

static const char *run_connection_stat_reset(struct admin *a, struct json *j)
{
    (void)j;
    /* as the 4lw crst: each connection's counters */
    dp_reset_conn_stats(a->srv->dp);
    return NULL;
}

/* ZooKeeperServerConf.toMap(): the settings as the 4lw conf prints them. */
static const char *run_configuration(struct admin *a, struct json *j)
{
    const struct config *c = &a->srv->cfg;
    member_int(j, "client_port", dp_port(a->srv->dp));
    member_text(j, "data_dir", c->data_dir);
    member_text(j, "data_log_dir", c->data_log_dir);
    member_int(j, "tick_time", c->tick_time_ms);
    member_int(j, "max_client_cnxns", c->max_client_cnxns);
    member_int(j, "min_session_timeout", c->min_session_timeout_ms);
    member_int(j, "max_session_timeout", c->max_session_timeout_ms);
    member_int(j, "server_id", c->my_id);
    member_int(j, "client_port_listen_backlog", -1); /* conf's: the system's default */
    return NULL;
}

/* ServerCnxn.getConnectionInfo(brief), less what larchd does not keep:
 * interest_ops (no selector), last_cxid and last_response_time. */
static void conn_member(struct json *j, const struct dp_conn_info *ci, bool brief)
{
    json_object_begin(j);
    member_text(j, "remote_socket_address", ci->peer);
    member_uint(j, "outstanding_requests", ci->queued);
    member_uint(j, "packets_received", ci->received);
    member_uint(j, "packets_sent", ci->sent);
    if (!brief) {
        member_int(j, "session_id", ci->session_id);
        member_text(j, "last_operation", server_last_op_name(ci));
        member_int(j, "established", ci->established_ms);
        member_int(j, "session_timeout", ci->timeout_ms);
        member_int(j, "last_zxid", ci->last_zxid);
        member_int(j, "last_latency", ci->last_latency_us / 1000);
        member_int(j, "min_latency", ci->min_latency_us / 1000);
        member_int(j, "avg_latency", ci->avg_latency_us / 1000);
        member_int(j, "max_latency", ci->max_latency_us / 1000);
    }
    json_object_end(j);
}

static void conn_full(void *arg, const struct dp_conn_info *ci)
{
    conn_member(arg, ci, false);
}

static void conn_brief(void *arg, const struct dp_conn_info *ci)
{
    conn_member(arg, ci, true);
}

/* "connections" and "secure_connections" (larchd has no TLS port: none). */
static void connections(struct admin *a, struct json *j, bool brief)
{
    json_key(j, "connections");
    json_array_begin(j);
    dp_each_conn(a->srv->dp, brief ? conn_brief : conn_full, j);
    json_array_end(j);
    json_key(j, "secure_connections");
    json_array_begin(j);
    json_array_end(j);
}

static const char *run_connections(struct admin *a, struct json *j)
{
    connections(a, j, false);
    return NULL;
}

/* DataTree.getDigestLog(): the digest log the 4lw hash prints (a digest
 * every 128 zxids, replication.h), oldest first. larchd's digest is its
 * own function of the tree, not ZooKeeper's. */
static const char *run_hash(struct admin *a, struct json *j)
{
    struct seq_digest *log = malloc(SEQ_DIGEST_LOG_MAX * sizeof *log);
    if (!log)
        return "out of memory";
    size_t n = seq_digest_log(a->srv->seq, log, SEQ_DIGEST_LOG_MAX);
    json_key(j, "digests");
    json_array_begin(j);
    for (size_t i = 0; i < n; i++) {
        json_object_begin(j);
        member_int(j, "zxid", log[i].zxid);
        member_int(j, "digest", (int64_t)log[i].digest); /* a Java long */
        json_object_end(j);
    }
    json_array_end(j);
    free(log);
    return NULL;
}

static const char *run_dirs(struct admin *a, struct json *j)
{
    uint64_t data, log;
    server_dir_sizes(a->srv, &data, &log);
    member_uint(j, "datadir_size", data);
    member_uint(j, "logdir_size", log);
    return NULL;
}

static int by_expiry(const void *x, const void *y)
{
    const struct server_session_entry *p = x, *q = y;
    if (p->expires_ms != q->expires_ms)
        return p->expires_ms < q->expires_ms ? -1 : 1;
    return p->id < q->id ? -1 : p->id > q->id;
}

/* SessionTracker.getSessionExpiryMap(): expiry time -> session ids. */
static void expiry_map(struct json *j, struct server_sessions *ss)
{
    if (ss->n > 1)
        qsort(ss->v, ss->n, sizeof *ss->v, by_expiry);
    json_key(j, "expiry_time_to_session_ids");
    json_object_begin(j);
    for (size_t i = 0; i < ss->n; i++) {
        if (i == 0 || ss->v[i].expires_ms != ss->v[i - 1].expires_ms) {
            if (i > 0)
                json_array_end(j);
            key_int(j, ss->v[i].expires_ms);
            json_array_begin(j);
        }
        json_int(j, ss->v[i].id);
    }
    if (ss->n > 0)
        json_array_end(j);
    json_object_end(j);
}

/* A Map<K, Set<V>> from pairs sorted by key: K the session (by_session)
 * or the path; the set's repeats (a data and a child watch) once. */
static void pairs_map(struct json *j, const struct server_paths *l, bool by_session)
{
    json_object_begin(j);
    for (size_t i = 0; i < l->n; i++) {
        const struct server_path_entry *e = &l->v[i], *prev = i ? &l->v[i - 1] : NULL;
        bool same_key = prev && (by_session ? e->session == prev->session
                                            : strcmp(e->path, prev->path) == 0);
        if (!same_key) {
            if (prev)
                json_array_end(j);
            if (by_session)
                key_int(j, e->session);
            else
                json_key(j, e->path);
            json_array_begin(j);
        } else if (by_session ? strcmp(e->path, prev->path) == 0 : e->session == prev->session) {
            continue;
        }
        if (by_session)
            json_string(j, e->path);
        else
            json_int(j, e->session);
    }
    if (l->n > 0)
        json_array_end(j);
    json_object_end(j);
}

static const char *run_dump(struct admin *a, struct json *j)
{
    struct server_sessions ss;
    if (server_sessions(a->srv, &ss) != 0)
        return "out of memory";
    expiry_map(j, &ss);
    json_key(j, "session_id_to_ephemeral_paths");
    pairs_map(j, &ss.ephemerals, true);
    server_sessions_free(&ss);
    return NULL;
}

static const char *run_environment(struct admin *a, struct json *j)
{
    server_environment(a->srv, report_member, j);
    return NULL;
}

/* ZooTrace's mask as the 4lw gtmk reads it and stmk sets it (kept for the
 * tools that use it; larchd writes no ZooKeeper trace). */
static const char *run_get_trace_mask(struct admin *a, struct json *j)
{
    member_int(j, "tracemask", atomic_load(&a->srv->trace_mask));
    return NULL;
}

static const char *run_initial_configuration(struct admin *a, struct json *j)
{
    json_key(j, "initial_configuration");
    if (a->initial_config)
        json_string(j, a->initial_config);
    else
        json_null(j); /* started from flags alone: there was no file */
    return NULL;
}

static const char *run_is_read_only(struct admin *a, struct json *j)
{
    member_bool(j, "read_only", server_read_only(a->srv));
    return NULL;
}

/* zxid as Long.toHexString (no "0x"); timestamp in seconds; -1 for both
 * without a snapshot, as ZooKeeper answers a null SnapshotInfo. */
static const char *run_last_snapshot(struct admin *a, struct json *j)
{
    int64_t zxid = -1, time_s = -1;
    if (!a->srv->dur || durability_last_snapshot(a->srv->dur, &zxid, &time_s) != 0)
        zxid = time_s = -1;
    char hex[20];
    snprintf(hex, sizeof hex, "%" PRIx64, (uint64_t)zxid);
    member_text(j, "zxid", hex);
    member_int(j, "timestamp", time_s);
    return NULL;
}

/* The current membership's servers (a reconfig changes zoo.cfg's): a
 * malloc'd array of CONFIG_SERVERS_MAX, *n set; NULL standalone or
 * without memory. */
static struct config_server *current_servers(struct admin *a, struct seq_ens_status *st,
                                             uint32_t *n)
{
    if (!a->srv->member || !seq_ens_status(a->srv->seq, st))
        return NULL;
    struct config_server *sv = malloc(CONFIG_SERVERS_MAX * sizeof *sv);
    if (sv && reconfig_current_servers(a->srv, &st->raft.config, sv, n) != 0) {
        free(sv);
        sv = NULL;
    }
    return sv;
}

static const struct config_server *find_server(const struct config_server *sv, uint32_t n,
                                               uint32_t id)
{
    for (uint32_t i = 0; sv && i < n; i++)
        if (sv[i].id == id)
            return &sv[i];
    return NULL;
}

static const char *run_leader(struct admin *a, struct json *j)
{
    struct seq_ens_status st;
    uint32_t n = 0;
    struct config_server *sv = current_servers(a, &st, &n);
    if (!sv)
        return a->srv->member ? "out of memory" : "server is not initialized"; /* ZooKeeper's */
    uint32_t leader = st.raft.leader_id;
    const struct config_server *l = leader ? find_server(sv, n, leader) : NULL;
    member_bool(j, "is_leader", st.raft.role == RAFT_LEADER);
    member_int(j, "leader_id", leader ? (int64_t)leader : NO_LEADER_ID);
    member_text(j, "leader_ip", l ? l->host : ""); /* ZooKeeper's: the quorum host */
    free(sv);
    return NULL;
}

static const char *run_monitor(struct admin *a, struct json *j)
{
    server_monitor(a->srv, report_member, j);
    return NULL;
}

/* The leader's observers (Leader.getObservingLearnersInfo): larchd's
 * peer link counts frames, ZooKeeper's learner handler packets. Other
 * servers have none: larchd's observers follow the leader only. */
static const char *run_observers(struct admin *a, struct json *j)
{
    struct seq_ens_status st;
    bool leader = a->srv->member && seq_ens_status(a->srv->seq, &st) &&
                  st.raft.role == RAFT_LEADER;
    uint32_t synced = 0;
    for (uint32_t i = 0; leader && i < st.raft.n_peers; i++)
        synced += !st.raft.peers[i].voter && st.raft.peers[i].recently_active;
    member_uint(j, "synced_observers", synced);
    json_key(j, "observers");
    json_array_begin(j);
    for (uint32_t i = 0; leader && i < st.raft.n_peers; i++) {
        const struct raft_peer_status *p = &st.raft.peers[i];
        if (p->voter || !p->recently_active)
            continue;
        json_object_begin(j);
        member_uint(j, "sid", p->id);
        struct peer_link_peer_status ps;
        for (uint32_t k = 0; peers_status(a->srv->peers, k, &ps) == 0; k++) {
            if (ps.id != p->id)
                continue;
            member_uint(j, "packets_received", ps.frames_in);
            member_uint(j, "packets_sent", ps.frames_out);
        }
        member_int(j, "last_zxid", p->match_zxid);
        json_object_end(j);
    }
    json_array_end(j);
    return NULL;
}

/* SrvrCommand: the version, read-only mode, ServerStats (as Jackson
 * writes its getters) and the node count. */
static void server_stats(struct admin *a, struct json *j)
{
    struct server *srv = a->srv;
    struct server_counts s;
    struct server_latency lat;
    uint64_t data, log;
    server_get_counts(srv, &s);
    server_latency(&s.dp, &lat);
    server_dir_sizes(srv, &data, &log);
    member_text(j, "version", server_full_version());
    member_bool(j, "read_only", server_read_only(srv));
    json_key(j, "server_stats");
    json_object_begin(j);
    member_uint(j, "packets_sent", s.dp.packets_sent);
    member_uint(j, "packets_received", s.dp.packets_received);
    member_uint(j, "data_dir_size", data);
    member_uint(j, "log_dir_size", log);
    member_text(j, "server_state", server_state_name(srv));
    member_int(j, "last_processed_zxid", s.tree.last_zxid);
    member_uint(j, "outstanding_requests", s.dp.outstanding);
    json_key(j, "avg_latency");
    json_double(j, lat.avg_ms);
    member_uint(j, "max_latency", lat.max_ms);
    member_uint(j, "min_latency", lat.min_ms);
    member_uint(j, "num_alive_client_connections", s.dp.connections);
    member_int(j, "uptime", base_wall_ms() - srv->started_ms);
    json_object_end(j);
    member_int(j, "node_count", s.tree.node_count);
}

static const char *run_server_stats(struct admin *a, struct json *j)
{
    server_stats(a, j);
    return NULL;
}

static const char *run_stats(struct admin *a, struct json *j)
{
    server_stats(a, j);
    connections(a, j, true);
    return NULL;
}

/* The JVM's properties have no larchd counterpart; what is true for
 * larchd is its version and the settings it runs with, as the 4lw conf
 * prints them (secrets never), sorted by name as ZooKeeper's TreeMap. */
struct prop {
    char *key, *value;
};

static int by_key(const void *x, const void *y)
{
    return strcmp(((const struct prop *)x)->key, ((const struct prop *)y)->key);
}

static const char *run_system_properties(struct admin *a, struct json *j)
{
    struct zk_wbuf conf;
    zk_wbuf_init(&conf);
    fourlw_answer(a->srv, a->srv->dp, "conf", 0, &conf);
    zk_wbuf_printf(&conf, "larch.version=%s\nzookeeper.version=%s\n", LARCH_VERSION,
                   server_full_version());
    size_t lines = 0;
    for (size_t i = 0; i < conf.len; i++)
        lines += conf.p[i] == '\n';
    struct prop *props = conf.err ? NULL : calloc(lines ? lines : 1, sizeof *props);
    if (!props) {
        zk_wbuf_free(&conf);
        return "out of memory";
    }
    size_t n = 0;
    char *save = NULL;
    conf.p[conf.len - 1] = '\0'; /* the last '\n' */
    for (char *line = strtok_r((char *)conf.p, "\n", &save); line && n < lines;
         line = strtok_r(NULL, "\n", &save)) {
        char *eq = strchr(line, '=');
        if (!eq)
            continue;
        *eq = '\0';
        props[n++] = (struct prop){ line, eq + 1 };
    }
    qsort(props, n, sizeof *props, by_key);
    for (size_t i = 0; i < n; i++)
        member_text(j, props[i].key, props[i].value);
    free(props);
    zk_wbuf_free(&conf);
    return NULL;
}

/* QuorumPeer.getVotingView(): the voting members, each with its quorum
 * and election addresses, its client address ("" when its server.N line
 * names none) and its type. */
static const char *run_voting_view(struct admin *a, struct json *j)
{
    struct seq_ens_status st;
    uint32_t n = 0;
    struct config_server *sv = current_servers(a, &st, &n);
    if (!sv && a->srv->member)
        return "out of memory";
    char addr[300];
    json_key(j, "current_config");
    json_object_begin(j);
    for (uint32_t i = 0; i < n; i++) {
        if (sv[i].observer)
            continue;
        key_int(j, sv[i].id);
        json_object_begin(j);
        json_key(j, "server_addresses");
        json_array_begin(j);
        host_port(addr, sizeof addr, sv[i].host, sv[i].quorum_port);
        json_string(j, addr);
        json_array_end(j);
        json_key(j, "election_addresses");
        json_array_begin(j);
        host_port(addr, sizeof addr, sv[i].host, sv[i].election_port);
        json_string(j, addr);
        json_array_end(j);
        addr[0] = '\0';
        if (sv[i].client_port != 0)
            host_port(addr, sizeof addr, sv[i].client_address[0] ? sv[i].client_address
                                                                  : "0.0.0.0",
                      sv[i].client_port);
        member_text(j, "client_address", addr);
        member_text(j, "learner_type", "participant");
        json_object_end(j);
    }
    json_object_end(j);
    free(sv);
    return NULL;
}

static const char *run_watches(struct admin *a, struct json *j)
{
    struct server_paths l;
    if (server_watches(a->srv, SERVER_BY_SESSION, &l) != 0)
        return "out of memory";
    json_key(j, "session_id_to_watched_paths");
    pairs_map(j, &l, true);
    server_paths_free(&l);
    return NULL;
}

static const char *run_watches_by_path(struct admin *a, struct json *j)
{
    struct server_paths l;
    if (server_watches(a->srv, SERVER_BY_PATH, &l) != 0)
        return "out of memory";
    json_key(j, "path_to_session_ids");
    pairs_map(j, &l, false);
    server_paths_free(&l);
    return NULL;
}

static const char *run_watch_summary(struct admin *a, struct json *j)
{
    struct server_watch_summary sum;
    if (server_watch_summary(a->srv, &sum) != 0)
        return "out of memory";
    member_uint(j, "num_connections", sum.connections);
    member_uint(j, "num_paths", sum.paths);
    member_uint(j, "num_total_watches", sum.watches);
    return NULL;
}

/* This member's place in the ensemble and its Zab phase (larchd's Raft
 * mapped onto it: server_zab_phase); the last zxid applied, split as
 * ZooKeeper splits a zxid into epoch and counter. */
static const char *run_zabstate(struct admin *a, struct json *j)
{
    struct seq_ens_status st;
    uint32_t n = 0;
    struct config_server *sv = current_servers(a, &st, &n);
    if (!sv) {
        if (a->srv->member)
            return "out of memory";
        member_bool(j, "voting", false); /* ZooKeeper's answer for a standalone server */
        member_text(j, "zabstate", "");
        return NULL;
    }
    const struct config_server *self = find_server(sv, n, a->srv->ens.self_id);
    if (!self) { /* a reconfig removed it */
        free(sv);
        return "this server is not in the current membership";
    }
    const struct config *c = &a->srv->cfg;
    int64_t zxid = tree_last_zxid(a->srv->tree);
    char addr[300], hex[24];
    member_int(j, "myid", a->srv->ens.self_id);
    member_bool(j, "is_leader", st.raft.role == RAFT_LEADER);
    host_port(addr, sizeof addr, self->host, self->quorum_port);
    member_text(j, "quorum_address", addr);
    host_port(addr, sizeof addr, self->host, self->election_port);
    member_text(j, "election_address", addr);
    host_port(addr, sizeof addr, c->client_port_address, dp_port(a->srv->dp));
    member_text(j, "client_address", addr);
    member_bool(j, "voting", !self->observer);
    snprintf(hex, sizeof hex, "0x%" PRIx64, (uint64_t)zxid);
    member_text(j, "last_zxid", hex);
    member_int(j, "zab_epoch", (int64_t)((uint64_t)zxid >> 32));
    member_int(j, "zab_counter", (int64_t)((uint64_t)zxid & 0xffffffffu));
    member_text(j, "zabstate", server_zab_phase(server_state_name(a->srv)));
    free(sv);
    return NULL;
}

#define NO_AUTH "ZooKeeper 3.9 guards it with its admin authentication, which larchd does not have"

/* ZooKeeper 3.9's commands (Commands.java), sorted by primary name: the
 * order of the command list. */
static const struct admin_cmd commands[] = {
    { { "configuration", "conf", "config" }, run_configuration, true, NULL },
    { { "connection_stat_reset", "crst" }, run_connection_stat_reset, true, NULL },
    { { "connections", "cons" }, run_connections, true, NULL },
    { { "dirs" }, run_dirs, true, NULL },
    { { "dump" }, run_dump, true, NULL },
    { { "environment", "env", "envi" }, run_environment, false, NULL },
    { { "get_trace_mask", "gtmk" }, run_get_trace_mask, false, NULL },
    { { "hash" }, run_hash, true, NULL },
    { { "initial_configuration", "icfg" }, run_initial_configuration, true, NULL },
    { { "is_read_only", "isro" }, run_is_read_only, true, NULL },
    { { "last_snapshot", "lsnp" }, run_last_snapshot, true, NULL },
    { { "leader", "lead" }, run_leader, true, NULL },
    { { "monitor", "mntr" }, run_monitor, false, NULL },
    { { "observer_connection_stat_reset", "orst" }, NULL, true,
      "larchd keeps no per-observer counters to reset" },
    { { "observers", "obsr" }, run_observers, true, NULL },
    { { "restore", "rest" }, NULL, true, NO_AUTH },
    { { "ruok" }, run_ruok, true, NULL },
    { { "server_stats", "srvr" }, run_server_stats, true, NULL },
    { { "set_trace_mask", "stmk" }, NULL, false,
      "larchd's AdminServer takes no command arguments: the 4lw stmk sets the mask" },
    { { "snapshot", "snap" }, NULL, true, NO_AUTH },
    { { "stat_reset", "srst" }, run_stat_reset, true, NULL },
    { { "stats", "stat" }, run_stats, true, NULL },
    { { "system_properties", "sysp" }, run_system_properties, false, NULL },
    { { "voting_view" }, run_voting_view, true, NULL },
    { { "watch_summary", "wchs" }, run_watch_summary, true, NULL },
    { { "watches", "wchc" }, run_watches, true, NULL },
    { { "watches_by_path", "wchp" }, run_watches_by_path, true, NULL },
    { { "zabstate" }, run_zabstate, false, NULL },
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const struct admin_cmd *find_command(const char *name)
{
    for (size_t i = 0; i < COUNT(commands); i++)
        for (size_t k = 0; k < COUNT(commands[i].names) && commands[i].names[k]; k++)
            if (strcmp(commands[i].names[k], name) == 0)
                return &commands[i];
    return NULL;
}

/* ---- HTTP -------------------------------------------------------------------- */

/* A response with no members of its own: "command" and "error". */
static void error_response(struct zk_wbuf *out, const char *command, const char *error)
{
    struct json j;
    json_init(&j, out, JSON_PRETTY);
    json_object_begin(&j);
    member_text(&j, "command", command);
    member_text(&j, "error", error);
    json_object_end(&j);
}

static int run_command(struct admin *a, const char *name, struct zk_wbuf *out)
{
    const struct admin_cmd *cmd = find_command(name);
    char msg[256];
    if (!cmd) {
        /* the name as asked, whole: ZooKeeper's answer, status 200 */
        struct zk_wbuf m;
        zk_wbuf_init(&m);
        zk_wbuf_printf(&m, "Unknown command: %s", name);
        zk_put_raw(&m, "", 1);
        if (m.err)
            out->err = true;
        else
            error_response(out, name, (const char *)m.p);
        zk_wbuf_free(&m);
        return 200;
    }
    if (!cmd->run) {
        snprintf(msg, sizeof msg, "not served by larchd: %s", cmd->why);
        error_response(out, cmd->names[0], msg);
        return 503;
    }
    if (cmd->server_required && !server_serving(a->srv)) {
        error_response(out, name, NOT_SERVING); /* ZooKeeper names it as asked */
        return 200;
    }
    struct json j;
    json_init(&j, out, JSON_PRETTY);
    json_object_begin(&j);
    const char *error = cmd->run(a, &j);
    member_text(&j, "command", cmd->names[0]);
    json_key(&j, "error");
    if (error)
        json_string(&j, error);
    else
        json_null(&j);
    json_object_end(&j);
    assert(json_complete(&j));
    return 200;
}

/* JettyAdminServer.commandLinks(): a link to each served primary name. */
static void command_links(struct admin *a, struct zk_wbuf *out)
{
    for (size_t i = 0; i < COUNT(commands); i++)
        if (commands[i].run)
            zk_wbuf_printf(out, "<a href=\"%s/%s\">%s</a>\n<br/>\n", a->url,
                           commands[i].names[0], commands[i].names[0]);
}

static int admin_http_get(void *arg, const char *url, struct zk_wbuf *out, const char **type)
{
    struct admin *a = arg;
    size_t n = strlen(a->url);
    if (strncmp(url, a->url, n) != 0 || (url[n] != '\0' && url[n] != '/')) {
        zk_wbuf_printf(out, "not found: %s (this port serves %s)\n", url, a->url);
        return 404;
    }
    const char *name = url[n] == '/' ? url + n + 1 : "";
    if (*name == '\0') {
        command_links(a, out);
        *type = HTML_TYPE;
        return 200;
    }
    *type = JSON_TYPE;
    return run_command(a, name, out);
}

static void report_stderr(void *arg, int severity, const char *msg)
{
    (void)arg;
    base_log(severity ? BASE_LOG_ERROR : BASE_LOG_WARN, "larchd: %s%s",
             severity ? "error: " : "warning: ", msg);
}

struct admin *admin_start(struct server *srv, char *err, size_t errlen)
{
    const struct config *c = &srv->cfg;
    struct admin *a = calloc(1, sizeof *a);
    if (!a) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    a->srv = srv;
    snprintf(a->url, sizeof a->url, "%s", c->admin_command_url);
    size_t len;
    if (c->config_path[0] &&
        !(a->initial_config = config_read_file(c->config_path, &len, report_stderr, NULL))) {
        snprintf(err, errlen, "initial_configuration: cannot read %s again", c->config_path);
        goto free_admin;
    }
    /* Jetty's idle timeout is in ms, libmicrohttpd's in whole seconds */
    unsigned idle_s = (unsigned)(((int64_t)c->admin_idle_timeout_ms + 999) / 1000);
    char why[256];
    a->http = http_start(c->admin_host, c->admin_port, idle_s, admin_http_get, a, why,
                         sizeof why);
    if (!a->http) {
        snprintf(err, errlen, "admin.serverAddress/serverPort %s", why);
        goto free_config;
    }
    return a;
free_config:
    free(a->initial_config);
free_admin:
    free(a);
    return NULL;
}

int admin_port(const struct admin *a)
{
    return http_port(a->http);
}

void admin_stop(struct admin *a)
{
    if (!a)
        return;
    http_stop(a->http);
    free(a->initial_config);
    free(a);
}
