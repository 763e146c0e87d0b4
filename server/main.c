/*
 * main.c — larchd: read the configuration, set up the log, build the tree,
 * start the sequencer and the workers, tell the service manager, wait for
 * SIGINT/SIGTERM (reopening the log at each SIGHUP), stop in reverse order.
 */
#include "server/server.h"
#include "server/jaas.h"
#include "saslsrv/saslsrv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <urcu.h>

/* ---- configuration messages --------------------------------------------- */
/* The log's level and file come from the configuration being read, so the
 * configuration's own messages are held until the log is set up, then
 * logged in order: a warning then obeys --log-level and lands in --log-file
 * like every later line. More than HELD_MSGS_MAX are not held back: they
 * are all logged at once, as they come, rather than lost. */
#define HELD_MSGS_MAX 64

static struct {
    bool holding;
    unsigned n;
    struct {
        int severity;
        char text[CONFIG_MSG_MAX];
    } msg[HELD_MSGS_MAX];
} held = { .holding = true };

static void log_config_msg(int severity, const char *msg)
{
    base_log(severity ? BASE_LOG_ERROR : BASE_LOG_WARN, "larchd: %s%s",
             severity ? "error: " : "warning: ", msg);
}

/* Logs what was held, in order; report logs at once from then on. */
static void release_held(void)
{
    for (unsigned i = 0; i < held.n; i++)
        log_config_msg(held.msg[i].severity, held.msg[i].text);
    held.n = 0;
    held.holding = false;
}
#define METRICS_IDLE_TIMEOUT_S 10 /* a scraper's connection idle this long is dropped */

static void report(void *arg, int severity, const char *msg)
{
    (void)arg;
    if (held.holding && held.n == HELD_MSGS_MAX)
        release_held();
    if (!held.holding) {
        log_config_msg(severity, msg);
        return;
    }
    held.msg[held.n].severity = severity;
    snprintf(held.msg[held.n].text, sizeof held.msg[held.n].text, "%s", msg);
    held.n++;
}

/* The super digest is given as "user:base64"; connections prove it by
 * addauth digest user:password, which the dataplane turns into the same id. */
/* Flat combining pays when the sequencer thread would share a CPU with a
 * worker (every write hand-off is then two context switches); with a core
 * of its own, a dedicated sequencer keeps writes off the read path. */
static bool want_inline_sequencer(const struct config *c)
{
    if (c->inline_sequencer_set)
        return c->inline_sequencer;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) != 0)
        return false;
    return CPU_COUNT(&set) < c->workers + 1;
}

/* SASL DIGEST-MD5 for the users of the JAAS file (jaasLoginConfig, --jaas),
 * set up before any thread starts; a file that does not parse, or lists no
 * user, stops larchd with the file and line. */
static int start_sasl(struct server *srv)
{
    const struct config *c = &srv->cfg;
    struct jaas_users users;
    if (jaas_load(c->jaas_file, c->sasl_section, &users, report, NULL) != 0)
        return -1;
    struct saslsrv_user *table = calloc(users.count, sizeof *table);
    char err[256] = "out of memory";
    int rc = -1;
    if (table) {
        for (size_t i = 0; i < users.count; i++)
            table[i] = (struct saslsrv_user){ users.items[i].name, users.items[i].password };
        rc = saslsrv_init(table, users.count, err, sizeof err);
        free(table);
    }
    if (rc != 0)
        base_log(BASE_LOG_ERROR, "larchd: error: %s: %s", c->jaas_file, err);
    else
        base_log(BASE_LOG_INFO, "larchd: SASL DIGEST-MD5 for %zu user%s of %s (section %s)%s",
                 users.count, users.count == 1 ? "" : "s", c->jaas_file, c->sasl_section,
                 config_sasl_provider(c) ? "" : "; sasl ACLs are not served (no authProvider.N="
                                                CONFIG_SASL_PROVIDER ")");
    jaas_users_free(&users);
    srv->sasl = rc == 0;
    for (uint32_t i = 0; i < c->n_sasl_super_users; i++)
        srv->sasl_super_users[i] = c->sasl_super_users[i].value;
    return rc;
}

/* An ensemble member: its id (dataDir/myid) and its view of the ensemble. */
static int load_membership(struct server *srv)
{
    uint32_t myid = 0;
    if (config_read_myid(&srv->cfg, &myid, report, NULL) != 0 ||
        config_ensemble(&srv->cfg, myid, &srv->ens, report, NULL) != 0)
        return -1;
    srv->member = true;
    srv->cfg.my_id = myid;
    /* /zookeeper/config: a static membership is version 0, as ZooKeeper
     * 3.8 shows one; reconfig, which would change it, is not served */
    srv->config_node = config_membership_text(&srv->cfg, 0);
    srv->config_node_mtime = base_wall_ms();
    if (!srv->config_node) {
        base_log(BASE_LOG_ERROR, "larchd: out of memory");
        return -1;
    }
    return 0;
}

static int open_data(struct server *srv, struct durability_boot *boot)
{
    struct config *c = &srv->cfg;
    char err[512];
    srv->st = storage_posix_new();
    if (!srv->st) {
        base_log(BASE_LOG_ERROR, "larchd: out of memory");
        return -1;
    }
    int rc = srv->member ? durability_open_member(c, srv->st, srv->tree, &srv->dur, boot, err,
                                                  sizeof(err))
                         : durability_open(c, srv->st, srv->tree, &srv->dur, err, sizeof(err));
    if (rc != 0) {
        base_log(BASE_LOG_ERROR, "larchd: %s", err);
        return -1;
    }
    return 0;
}

/* The sequencer; in an ensemble, over the Raft core booted from the data
 * dir and the peer link. */
static int make_sequencer(struct server *srv, struct durability_boot *boot)
{
    struct config *c = &srv->cfg;
    struct seq_cfg scfg = {
        .min_session_timeout_ms = c->min_session_timeout_ms,
        .max_session_timeout_ms = c->max_session_timeout_ms,
        .container_check_ms = c->container_check_ms,
        .ttl_enabled = c->extended_types,
        .x509_acls = config_x509_enabled(c),
        .tick_ms = c->tick_time_ms / 2 > 0 ? c->tick_time_ms / 2 : 1,
        .inline_rounds = want_inline_sequencer(c),
        .passwd_key_set = srv->dur != NULL,
        .sasl_provider = config_sasl_provider(c),
        .log = srv->dur ? durability_log(srv->dur) : NULL,
    };
    struct raft_member members[CONFIG_SERVERS_MAX];
    struct seq_ensemble_cfg ecfg;
    if (srv->member) {
        char err[512];
        srv->peers = peers_new(&srv->ens, srv->quorum_tls,
                               srv->cfg.quorum_tls.hostname_verification, err, sizeof(err));
        if (!srv->peers) {
            base_log(BASE_LOG_ERROR, "larchd: %s", err);
            return -1;
        }
        for (uint32_t i = 0; i < srv->ens.n_members; i++)
            members[i] = (struct raft_member){ .id = srv->ens.members[i].id,
                                               .voter = srv->ens.members[i].voter };
        uint64_t seed = (uint64_t)base_mono_ns() ^ ((uint64_t)srv->ens.self_id << 56);
        ecfg = (struct seq_ensemble_cfg){
            .raft = { .self_id = srv->ens.self_id, .members = members,
                      .n_members = srv->ens.n_members,
                      .election_ticks = srv->ens.election_ticks,
                      .heartbeat_ticks = srv->ens.heartbeat_ticks,
                      /* the first election after two heartbeats, not a whole timeout */
                      .first_election_ticks = 2 * srv->ens.heartbeat_ticks <
                                                      srv->ens.election_ticks
                                                  ? 2 * srv->ens.heartbeat_ticks
                                                  : srv->ens.election_ticks,
                      /* a whole round per APPEND: followers fsync once per
                       * round, not once per 64 entries (the frame bound is
                       * 64 MiB; one larger entry still goes alone) */
                      .counter_limit = (uint32_t)c->zxid_counter_limit,
                      .max_append_entries = 4096,
                      .max_append_bytes = 8u << 20,
                      .seed = seed },
            .boot = { .hard_state = boot->hard_state, .snap_zxid = boot->snap_zxid,
                      .entries = boot->entries, .n_entries = boot->n_entries,
                      .snap_config = boot->snap_config },
            .raft_tick_ms = srv->ens.raft_tick_ms,
            .peer = peers_ops(),
            .peer_arg = srv->peers,
            .hard_state_st = srv->st,
            .hard_state_dir = durability_state_dir(srv->dur),
            .tolerate_repeats_until = boot->log_end_zxid,
            .snap = durability_snap_ops(),
            .snap_arg = srv->dur,
            .commit_log_count = (uint32_t)c->commit_log_count,
            .read_only_mode = c->read_only_mode,
            .reconfig = reconfig_ops(),
            .reconfig_arg = srv,
        };
        scfg.ensemble = &ecfg;
    }
    if (srv->dur)
        durability_passwd_key(srv->dur, scfg.passwd_key);
    srv->seq = seq_new(srv->tree, &scfg, c->workers);
    explicit_bzero(scfg.passwd_key, sizeof scfg.passwd_key);
    if (!srv->seq) {
        base_log(BASE_LOG_ERROR, "larchd: cannot create the sequencer%s: %s",
                 srv->member ? " (is the term/vote file consistent with the log?)" : "",
                 strerror(errno));
        return -1;
    }
    if (srv->peers)
        peers_attach(srv->peers, srv->seq);
    return 0;
}

/* The UDP path on a DPDK port (--dpdk), answering for --udp's address. */
static int start_dpdk(struct server *srv)
{
#ifdef LARCH_HAVE_DPDK
    const struct config *c = &srv->cfg;
    struct ldp_cfg lc = { .eal_args = c->dpdk, .cores = c->dpdk_cores };
    lc.ifc.udp_port = (uint16_t)c->udp.port;
    if (inet_pton(AF_INET, c->udp.host, lc.ifc.ip) != 1) {
        base_log(BASE_LOG_ERROR, "larchd: --dpdk: '%s' is not an IPv4 address", c->udp.host);
        return -1;
    }
    char err[512];
    srv->ldp = ldp_start(&lc, srv->dp, err, sizeof err);
    if (!srv->ldp) {
        base_log(BASE_LOG_ERROR, "larchd: %s", err);
        return -1;
    }
    struct ldp_stats st;
    ldp_get_stats(srv->ldp, &st);
    const uint8_t *mac = st.ifc.mac;
    base_log(BASE_LOG_INFO, "larchd: reads over UDP on %s:%d from DPDK port %u (MAC "
             "%02x:%02x:%02x:%02x:%02x:%02x, MTU %u, %d poll-mode core%s)",
             c->udp.host, c->udp.port, st.port, mac[0], mac[1], mac[2], mac[3], mac[4], mac[5],
             st.ifc.mtu, st.cores, st.cores == 1 ? "" : "s");
    return 0;
#else
    (void)srv;
    base_log(BASE_LOG_ERROR,
             "larchd: --dpdk: this larchd was built without DPDK (meson -Ddpdk=enabled "
             "with libdpdk-dev installed builds it in)");
    return -1;
#endif
}

/* One store as the TLS module takes it; what_* name the lines it came from. */
static struct tls_store tls_store_of(const struct config_store *st, const char *key,
                                     const char *password_key)
{
    bool from_path = st->password_path[0] != '\0';
    const char *what_password = from_path ? st->where_password_path : st->where_password;
    return (struct tls_store){
        .path = st->location,
        .password = st->password,
        .password_path = st->password_path,
        .type = st->type == CONFIG_STORE_PKCS12 ? TLS_STORE_PKCS12 : TLS_STORE_PEM,
        .what_path = st->where_location[0] ? st->where_location : key,
        .what_password = what_password[0] ? what_password : password_key,
    };
}

/* The default names of a family's store settings, for messages about a
 * store whose lines left no place ("ssl.quorum.keyStore.location"). */
struct tls_names {
    char key[64], key_password[80], trust[64], trust_password[80];
};

/* One family of ssl keys (family: "ssl." or "ssl.quorum.") loaded into a
 * context: every store is read and checked here, before anything is
 * served (config_finish checked the rest). NULL after logging why. */
static struct tls_ctx *load_tls_family(const struct config_tls *t, const char *family)
{
    struct tls_names n;
    snprintf(n.key, sizeof n.key, "%skeyStore.location", family);
    snprintf(n.key_password, sizeof n.key_password, "%skeyStore.password (unset)", family);
    snprintf(n.trust, sizeof n.trust, "%strustStore.location", family);
    snprintf(n.trust_password, sizeof n.trust_password, "%strustStore.password (unset)",
             family);
    uint32_t protos = t->enabled_protocols ? t->enabled_protocols : t->protocol;
    struct tls_settings s = {
        .key = tls_store_of(&t->key, n.key, n.key_password),
        .trust = tls_store_of(&t->trust, n.trust, n.trust_password),
        .protocols = ((protos & CONFIG_TLS_1_2) ? TLS_PROTO_1_2 : 0) |
                     ((protos & CONFIG_TLS_1_3) ? TLS_PROTO_1_3 : 0),
        .ciphers = t->ciphersuites,
        .what_ciphers = t->where_ciphersuites,
        .client_auth = t->client_auth == CONFIG_CLIENT_AUTH_NONE   ? TLS_CLIENT_AUTH_NONE
                       : t->client_auth == CONFIG_CLIENT_AUTH_WANT ? TLS_CLIENT_AUTH_WANT
                                                                   : TLS_CLIENT_AUTH_NEED,
        .verify_client_address = t->hostname_verification && t->client_hostname_verification,
    };
    char err[TLS_MSG_MAX];
    struct tls_ctx *ctx = tls_ctx_new(&s, err, sizeof err);
    if (!ctx)
        base_log(BASE_LOG_ERROR, "larchd: error: %s", err);
    return ctx;
}

/* The secure client port's context and, with sslQuorum=true in an
 * ensemble, the quorum links' (one context: they accept and dial). */
static int load_tls(struct server *srv)
{
    const struct config *c = &srv->cfg;
    if (c->secure_client_port != 0 && !(srv->tls = load_tls_family(&c->tls, "ssl.")))
        return -1;
    if (config_is_distributed(c) && c->ssl_quorum &&
        !(srv->quorum_tls = load_tls_family(&c->quorum_tls, "ssl.quorum.")))
        return -1;
    return 0;
}

static int start(struct server *srv)
{
    struct config *c = &srv->cfg;
    if (load_tls(srv) != 0)
        return -1;
    srv->tree = tree_new();
    if (!srv->tree) {
        base_log(BASE_LOG_ERROR, "larchd: out of memory building the tree");
        return -1;
    }
    if (config_is_distributed(c) && load_membership(srv) != 0)
        return -1;
    struct durability_boot boot = { 0 };
    if (c->data_dir[0] && open_data(srv, &boot) != 0)
        return -1;
    int rc = make_sequencer(srv, &boot);
    durability_boot_free(&boot); /* the core copied it */
    if (rc != 0)
        return -1;
    struct dp_cfg dcfg = {
        .bind_addr = c->client_port_address,
        .port = config_plain_port(c) ? config_plain_port(c) : -1,
        .tls = srv->tls,
        .secure_bind_addr = c->secure_client_port_address,
        .secure_port = c->secure_client_port,
        .x509_super_user = c->x509_super_user,
        .workers = c->workers,
        .max_buffer_bytes = c->max_buffer_bytes,
        .max_client_cnxns = c->max_client_cnxns,
        .max_cnxns = c->max_cnxns,
        .max_outstanding = c->global_outstanding_limit,
        .sessionless_timeout_ms = c->sessionless_timeout_ms,
        .conn_max_buffer_bytes = c->conn_max_buffer_bytes,
        .conn_out_high_water_bytes = c->conn_out_high_water_bytes,
        .conn_max_unsent_bytes = c->conn_max_unsent_bytes,
        .max_buffered_bytes = c->max_buffered_bytes,
        .super_digest = c->super_digest,
        .sasl = srv->sasl,
        .sasl_provider = config_sasl_provider(c),
        .sasl_super_users = srv->sasl_super_users,
        .n_sasl_super_users = (int32_t)c->n_sasl_super_users,
        .enforce_auth = !c->enforce_auth_enabled ? 0
                        : ((c->enforce_auth_mask & CONFIG_AUTH_IP) ? DP_AUTH_IP : 0) |
                          ((c->enforce_auth_mask & CONFIG_AUTH_DIGEST) ? DP_AUTH_DIGEST : 0) |
                          ((c->enforce_auth_mask & CONFIG_AUTH_SASL) ? DP_AUTH_SASL : 0) |
                          ((c->enforce_auth_mask & CONFIG_AUTH_X509) ? DP_AUTH_X509 : 0),
        .config_node = srv->config_node,
        .config_node_mtime = srv->config_node_mtime,
        .udp_host = c->udp.host,
        .udp_port = c->dpdk[0] ? 0 : c->udp.port, /* DPDK's port serves it instead */
        .fourlw = fourlw_answer,
        .fourlw_arg = srv,
        .fourlw_allowed = fourlw_allowed,
    };
    char err[512];
    srv->dp = dp_new(&dcfg, srv->tree, srv->seq, err, sizeof(err));
    if (!srv->dp) {
        base_log(BASE_LOG_ERROR, "larchd: %s", err);
        return -1;
    }
    rc = seq_start(srv->seq);
    if (rc == 0 && srv->peers)
        rc = peers_start(srv->peers);
    if (rc == 0)
        rc = dp_start(srv->dp);
    if (rc == 0 && srv->dur)
        rc = durability_start(srv->dur);
    if (rc != 0) {
        base_log(BASE_LOG_ERROR, "larchd: cannot start threads: %s", strerror(-rc));
        return -1;
    }
    if (c->dpdk[0] && start_dpdk(srv) != 0)
        return -1;
    srv->started_ms = base_wall_ms();
    if (c->metrics_prometheus) {
        srv->metrics = http_start(c->metrics_http_host, c->metrics_http_port,
                                  METRICS_IDLE_TIMEOUT_S, metrics_http_get, srv, err, sizeof(err));
        if (!srv->metrics) {
            base_log(BASE_LOG_ERROR, "larchd: /metrics (metricsProvider.httpHost/httpPort): %s",
                     err);
            return -1;
        }
        base_log(BASE_LOG_INFO, "larchd: /metrics on %s:%d", c->metrics_http_host,
                 http_port(srv->metrics));
    }
    if (c->admin_enabled) {
        srv->admin = admin_start(srv, err, sizeof(err));
        if (!srv->admin) {
            base_log(BASE_LOG_ERROR, "larchd: AdminServer: %s", err);
            return -1;
        }
        base_log(BASE_LOG_INFO, "larchd: AdminServer on %s:%d, command URL %s", c->admin_host,
                 admin_port(srv->admin), c->admin_command_url);
    }
    return 0;
}

static void stop(struct server *srv)
{
    admin_stop(srv->admin); /* first: its answers read everything below */
    srv->admin = NULL;
    http_stop(srv->metrics); /* likewise */
    srv->metrics = NULL;
    if (srv->dp)
        dp_stop(srv->dp);
#ifdef LARCH_HAVE_DPDK
    /* after the workers (mntr reads srv->ldp on them), before dp_free (the
     * lcores read the tree through the dataplane) */
    ldp_stop(srv->ldp);
    srv->ldp = NULL;
#endif
    if (srv->seq)
        seq_stop(srv->seq);
    peers_stop(srv->peers);
    durability_stop(srv->dur);
    dp_free(srv->dp);
    tls_ctx_free(srv->tls); /* after the dataplane: its sessions were of it */
    srv->tls = NULL;
    free(srv->config_node); /* the dataplane borrowed it */
    srv->config_node = NULL;
    seq_free(srv->seq);
    peers_free(srv->peers); /* after the sequencer: its driver sent through it */
    tls_ctx_free(srv->quorum_tls); /* after the link: its sessions were of it */
    srv->quorum_tls = NULL;
    durability_free(srv->dur); /* after the sequencer: it used the log */
    if (srv->st)
        storage_destroy(srv->st);
    if (srv->tree) {
        rcu_barrier(); /* callbacks that free old versions finish before the tree goes */
        tree_free(srv->tree);
    }
}

/* larchd --purge [flags]: one purge of the data dirs, then exit. The flag is
 * taken out before the rest of the command line is parsed as usual. */
static bool take_purge_flag(int *argc, char **argv)
{
    bool found = false;
    int n = 0;
    for (int i = 0; i < *argc; i++) {
        if (i > 0 && strcmp(argv[i], "--purge") == 0)
            found = true;
        else
            argv[n++] = argv[i];
    }
    *argc = n;
    return found;
}

/* ---- the log and the service manager ---------------------------------------- */

/* Reads the flags and zoo.cfg, then sets the log up as they say (level,
 * file). Returns -1 to go on serving, or the status to exit with. A --purge
 * run keeps stderr: it is a command whose errors belong to whoever ran it. */
static int configure(struct config *c, int argc, char **argv, bool purge)
{
    bool want_help = false, want_version = false;
    config_defaults(c);
    if (config_from_args(c, argc, argv, report, NULL, &want_help, &want_version) != 0) {
        release_held();
        base_log(BASE_LOG_ERROR, "larchd: see 'larchd --help'");
        return 2;
    }
    if (want_help || want_version) {
        release_held();
        if (want_help)
            fputs(config_usage(), stdout);
        else
            printf("larchd %s (ZooKeeper protocol %s)\n", LARCH_VERSION, LARCH_ZK_VERSION);
        return 0;
    }
    if (config_finish(c, report, NULL) != 0) {
        release_held();
        return 2;
    }
    base_log_set_level((enum base_log_level)c->log_level);
    if (!purge && c->log_file[0] != '\0') {
        int rc = base_log_open_file(c->log_file);
        if (rc != 0) {
            release_held(); /* still on the old stderr, beside the error */
            base_log(BASE_LOG_ERROR, "larchd: cannot open log file %s: %s", c->log_file,
                     strerror(-rc));
            return 1;
        }
    }
    release_held();
    return -1;
}

/* SIGHUP: reopens --log-file at its path, so that after logrotate renamed
 * the file (without copytruncate) lines go to a new one there. The
 * message is the new file's first line. */
static void reopen_log(const struct config *c)
{
    if (c->log_file[0] == '\0') {
        base_log(BASE_LOG_INFO, "larchd: SIGHUP ignored: no log file to reopen (--log-file)");
        return;
    }
    int rc = base_log_open_file(c->log_file);
    if (rc != 0)
        base_log(BASE_LOG_ERROR, "larchd: SIGHUP: cannot reopen log file %s: %s (still "
                 "writing to the one open before)", c->log_file, strerror(-rc));
    else
        base_log(BASE_LOG_INFO, "larchd: SIGHUP: log reopened: %s", c->log_file);
}

/* Waits for SIGINT or SIGTERM (returned), reopening the log at each SIGHUP
 * on the way. The signals are blocked in every thread (main blocked them
 * before any started), so they queue here. */
static int wait_for_stop(const struct config *c, const sigset_t *set)
{
    for (;;) {
        int sig = 0;
        int rc = sigwait(set, &sig);
        BASE_ASSERT(rc == 0); /* fails only for a set with an invalid signal */
        if (sig != SIGHUP)
            return sig;
        reopen_log(c);
    }
}

/* Tells a service manager that listens ($NOTIFY_SOCKET; systemd's
 * Type=notify) what larchd is doing. A failure does not stop larchd: the
 * manager, which waits for READY=1, times the start out itself. */
static void notify_manager(const char *state)
{
    const char *addr = getenv("NOTIFY_SOCKET");
    int rc = notify_service(addr, state);
    if (rc != 0)
        base_log(BASE_LOG_WARN, "larchd: cannot notify the service manager at NOTIFY_SOCKET=%s: %s",
                 addr, strerror(-rc));
}

/* The "serving on" line, and the same as the service manager's status. */
static void announce_serving(const struct server *srv)
{
    const struct config *c = &srv->cfg;
    for (uint32_t i = 0; srv->member && i < srv->ens.n_members; i++)
        if (srv->ens.members[i].id == srv->ens.self_id)
            base_log(BASE_LOG_INFO,
                     "larchd: server %u of an ensemble of %u (%s), quorum address %s:%d",
                     srv->ens.self_id, srv->ens.n_members,
                     srv->ens.self_observer ? "observer" : "participant",
                     srv->ens.members[i].host, srv->ens.members[i].quorum_port);
    if (dp_secure_port(srv->dp) >= 0)
        base_log(BASE_LOG_INFO, "larchd: serving TLS on %s:%d%s", c->secure_client_port_address,
                 dp_secure_port(srv->dp),
                 dp_port(srv->dp) < 0 ? " (no plain port: TLS only)" : "");
    /* the plain port, or the secure one of a TLS-only server */
    bool plain = dp_port(srv->dp) >= 0;
    const char *host = plain ? c->client_port_address : c->secure_client_port_address;
    int port = plain ? dp_port(srv->dp) : dp_secure_port(srv->dp);
    base_log(BASE_LOG_INFO, "larchd: serving on %s:%d (%d workers + 1 sequencer%s; %s%s)",
             host, port, c->workers,
             want_inline_sequencer(c) && !srv->dur ? ", write rounds inline on workers" : "",
             srv->dur ? "durable in " : "no dataDir: data is in memory only",
             srv->dur ? c->data_dir : "");
    if (dp_udp_port(srv->dp) != 0)
        base_log(BASE_LOG_INFO, "larchd: reads over UDP on %s:%d (dataplane/UDP.md)",
                 c->udp.host, dp_udp_port(srv->dp));
    char state[sizeof c->client_port_address + sizeof c->log_file + 64];
    snprintf(state, sizeof state, "READY=1\nSTATUS=serving on %s:%d%s%s%s",
             host, port, c->log_file[0] ? " (log: " : "",
             c->log_file, c->log_file[0] ? ")" : "");
    notify_manager(state);
}

int main(int argc, char **argv)
{
    static struct server srv;
    bool want_purge = take_purge_flag(&argc, argv);
    atomic_init(&srv.trace_mask, LARCH_TRACE_MASK_DEFAULT);
    int status = configure(&srv.cfg, argc, argv, want_purge);
    if (status >= 0)
        return status;
    if (srv.cfg.jaas_file[0] != '\0' && !want_purge && start_sasl(&srv) != 0)
        return 2;
    if (want_purge) {
        struct storage *st = storage_posix_new();
        int rc = st && durability_purge(&srv.cfg, st) == 0 ? 0 : 1;
        if (st)
            storage_destroy(st);
        return rc;
    }
    rcu_register_thread(); /* recovery applies txns on this thread */

    /* Threads inherit this mask; only main takes the signals, via sigwait. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    if (start(&srv) != 0) {
        stop(&srv);
        saslsrv_done();
        rcu_unregister_thread();
        return 1;
    }
    announce_serving(&srv);
    int sig = wait_for_stop(&srv.cfg, &set);
    base_log(BASE_LOG_INFO, "larchd: %s, shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
    notify_manager(sig == SIGINT ? "STOPPING=1\nSTATUS=shutting down (SIGINT)"
                                 : "STOPPING=1\nSTATUS=shutting down (SIGTERM)");
    stop(&srv);
    saslsrv_done(); /* after the workers freed every exchange */
    rcu_unregister_thread();
    return 0;
}
