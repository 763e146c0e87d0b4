/*
 * config — larchd settings: defaults, zoo.cfg parsing, command-line flags.
 *
 * ZooKeeper's own zoo.cfg is accepted as ZooKeeper reads it (java.util.Properties
 * key=value or key:value lines, '#'/'!' comments, surrounding blanks trimmed).
 * Keys ZooKeeper turns into system properties (DigestAuthenticationProvider.superDigest,
 * zookeeper.extendedTypesEnabled, jute.maxbuffer, ...) are honoured with or
 * without their "zookeeper." prefix. A malformed value is an error naming the
 * file and line; a key larchd does not use is a warning naming the line.
 * Flags given on the command line override the file, wherever they appear.
 *
 * Pure: config_parse_text does no I/O; config_load reads one file. Not thread-safe;
 * called once from main before any thread starts.
 */
#ifndef LARCH_SERVER_CONFIG_H
#define LARCH_SERVER_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CONFIG_MSG_MAX 512
#define JUTE_MAXBUFFER_MAX (16 << 20) /* half a txn log record (replication/txnlog.h) */

#define CONFIG_SERVERS_MAX 32 /* server.N lines (replication/raft.h RAFT_MEMBERS_MAX) */

/* One server.N line: "host:quorumPort:electionPort[:participant|observer]
 * [;[clientAddress:]clientPort]", as ZooKeeper's QuorumServer reads it. */
struct config_server {
    int64_t id;                /* N: 1..255, 1..254 with extended types (TTL) */
    char host[256];            /* an IPv6 address without its brackets */
    int32_t quorum_port;
    int32_t election_port;
    bool observer;
    char client_address[256];  /* "" when the line names none */
    int32_t client_port;       /* 0 when the line names none */
    char where[320];           /* "zoo.cfg:14": where the line was, for messages */
};

#define CONFIG_SERVER_TEXT_MAX 1024 /* a server.N value longer than this is malformed */

/* Why config_parse_server refused a spec. */
enum config_server_parse {
    CONFIG_SERVER_OK = 0,
    CONFIG_SERVER_BAD_ID,        /* N is not 1..255 written without a sign */
    CONFIG_SERVER_BAD_VALUE,     /* the value is not a server spec (config_parse_server) */
};

/* Parses one server spec: id_text is N of "server.N" ("7"), value what
 * follows the '=' ("host:quorumPort:electionPort[:participant|observer]
 * [;[clientAddress:]clientPort]", blanks around either part ignored), as
 * ZooKeeper's QuorumServer(sid, addressStr) reads it: an IPv6 host in
 * brackets, the role in any case, ports 1..65535, the quorum and election
 * ports different; larchd refuses several '|'-separated addresses
 * (multiAddress, off by default in ZooKeeper too) and ids outside 1..255.
 * The one parser of server specs: zoo.cfg's server.N lines, dynamic files
 * and reconfig requests all come through it. Pure. Returns CONFIG_SERVER_OK
 * with *out filled (where left ""), or another enum config_server_parse
 * with msg (msg_len bytes, may be 0) naming the problem; out->id is set
 * whenever the id itself was good. */
int config_parse_server(const char *id_text, const char *value, struct config_server *out,
                        char *msg, size_t msg_len);

/* The schemes enforce.auth.schemes may name: those whose identities larchd
 * gives a connection (ZooKeeper gives every connection its "ip" one). */
#define CONFIG_AUTH_IP 1u
#define CONFIG_AUTH_DIGEST 2u
#define CONFIG_AUTH_SASL 4u
#define CONFIG_AUTH_X509 8u /* needs the x509 provider (config_x509_enabled) */

#define CONFIG_WHERE_MAX 320 /* "zoo.cfg:7: ssl.keyStore.location": where a key was set */

/* ssl.keyStore.type / ssl.trustStore.type (ZooKeeper's KeyStoreFileType).
 * Unset, config_finish takes it from the file name as ZooKeeper does
 * (.pem, .p12); JKS and BCFKS are Java's, refused by line. */
enum config_store_type {
    CONFIG_STORE_UNSET = 0,
    CONFIG_STORE_PEM,
    CONFIG_STORE_PKCS12,
};

/* One store of the ssl.* keys, and where its lines were (for messages
 * about the file, which is read only when larchd starts). */
struct config_store {
    char location[4096];
    char password[1024];      /* never printed */
    char password_path[4096]; /* passwordPath: read instead of password */
    int32_t type;             /* enum config_store_type */
    char where_location[CONFIG_WHERE_MAX];
    char where_password[CONFIG_WHERE_MAX];
    char where_password_path[CONFIG_WHERE_MAX];
    char where_type[CONFIG_WHERE_MAX];
};

#define CONFIG_TLS_1_2 1u /* enabled protocols */
#define CONFIG_TLS_1_3 2u

/* ssl.clientAuth (ZooKeeper's X509Util.ClientAuth; unset or empty: need). */
enum config_client_auth {
    CONFIG_CLIENT_AUTH_NEED = 0,
    CONFIG_CLIENT_AUTH_WANT,
    CONFIG_CLIENT_AUTH_NONE,
};

/* The secure client port's ssl.* keys (ZooKeeper's ClientX509Util, whose
 * properties are "zookeeper.ssl.*": accepted with or without the prefix),
 * and, in a second copy, the quorum links' ssl.quorum.* keys
 * (QuorumX509Util's "zookeeper.ssl.quorum.*"). */
struct config_tls {
    struct config_store key;   /* ssl.keyStore.*: the server's chain and key */
    struct config_store trust; /* ssl.trustStore.*: the CAs of client certificates */
    uint32_t protocol;         /* ssl.protocol: one CONFIG_TLS_* bit, default 1.3 (3.9) */
    uint32_t enabled_protocols; /* ssl.enabledProtocols: CONFIG_TLS_* bits, 0 unset */
    char ciphersuites[2048];   /* ssl.ciphersuites, Java's names, "" unset */
    char where_ciphersuites[CONFIG_WHERE_MAX];
    int32_t client_auth;       /* enum config_client_auth */
    char where_client_auth[CONFIG_WHERE_MAX];
    /* ssl.hostnameVerification (default true) and
     * ssl.clientHostnameVerification (default false on the client port,
     * true on the quorum: ClientX509Util's and QuorumX509Util's
     * shouldVerifyClientHostname): ZooKeeper checks a client certificate's
     * address only when both are true
     * (X509Util.isClientHostnameVerificationEnabled). On the quorum, the
     * first also makes a dialler check the server's certificate against
     * the server.N host it dialled. */
    bool hostname_verification;
    bool client_hostname_verification;
    bool any_set; /* some ssl.* line was read */
};

#define CONFIG_KEYED_MAX 16 /* superUser[.X] and authProvider.N lines each */
#define CONFIG_SASL_PROVIDER "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"

/* One line of a key family (superUser.X, authProvider.N): ZooKeeper makes
 * each a system property, so a key given again replaces its value. */
struct config_keyed {
    char key[128];   /* without a "zookeeper." prefix */
    char value[256];
};

struct config {
    /* zoo.cfg keys */
    int32_t tick_time_ms;           /* tickTime, default 2000 */
    char data_dir[4096];            /* dataDir, default "" (not durable yet) */
    char data_log_dir[4096];        /* dataLogDir, default = data_dir */
    int32_t client_port;            /* clientPort, default 2181 */
    char client_port_address[256];  /* clientPortAddress, default "127.0.0.1" */
    /* secureClientPort (0: none): the same protocol over TLS (tls), on
     * secureClientPortAddress (default every interface, as ZooKeeper's).
     * With it and without a clientPort line (or --port), the plain port
     * is off: config_plain_port says which. */
    int32_t secure_client_port;
    char secure_client_port_address[256];
    struct config_tls tls;
    /* sslQuorum (default false): the links between members are TLS, with
     * the ssl.quorum.* keys (quorum_tls), both ends presenting and
     * verifying certificates. */
    bool ssl_quorum;
    char where_ssl_quorum[CONFIG_WHERE_MAX];
    struct config_tls quorum_tls;
    /* The x509 authentication provider (ZooKeeper's
     * X509AuthenticationProvider): registered by an authProvider.N line
     * naming it, and, as ZooKeeper's QuorumPeerConfig.configureSSLAuth
     * does, by secureClientPort (config_x509_enabled). It makes a client
     * certificate's subject the connection's ("x509", DN) identity and
     * makes x509 ACLs valid. X509AuthenticationProvider.superUser: the
     * subject (in that text) that is the super user. */
    bool x509_provider_line;
    char x509_super_user[4096]; /* TLS_DN_MAX: a subject's text */
    int32_t min_session_timeout_ms; /* minSessionTimeout, default 2 * tickTime */
    int32_t max_session_timeout_ms; /* maxSessionTimeout, default 20 * tickTime */
    int32_t max_client_cnxns;       /* maxClientCnxns per IP, default 60; 0 = unlimited */
    char four_letter_words[512];    /* 4lw.commands.whitelist, default "srvr"; "*" = all */
    bool read_only_mode;            /* readonlymode.enabled, default false */
    char super_digest[512];         /* DigestAuthenticationProvider.superDigest "user:base64" */
    /* zookeeper.enforce.auth.enabled / .schemes (ZooKeeper's
     * AuthenticationHelper): every request but auth from a connection
     * holding none of these schemes' identities is answered
     * SESSIONCLOSEDREQUIRESASLAUTH and the connection closed. The schemes
     * are those larchd authenticates ("digest", "ip", and "x509" where
     * its provider is: config_finish); the parser refuses the rest by
     * line. */
    bool enforce_auth_enabled;
    char enforce_auth_schemes[128]; /* comma-separated, as written */
    uint32_t enforce_auth_mask;     /* the same, as CONFIG_AUTH_* bits */
    /* SASL (DIGEST-MD5 for clients, saslsrv/): the users are the JAAS
     * file's (server/jaas.h), from jaasLoginConfig, its JVM spelling
     * java.security.auth.login.config, or --jaas. sessionRequireClientSASLAuth
     * is enforce.auth with the one scheme sasl (config_finish sets the two
     * fields above from it, as ZooKeeper's AuthenticationHelper ignores
     * enforce.auth.* then). Every SASL setting needs the JAAS file. */
    char jaas_file[4096];
    char sasl_section[256];         /* sasl.serverconfig: the JAAS section, default "Server" */
    bool session_require_sasl;      /* sessionRequireClientSASLAuth, default false */
    uint32_t n_auth_providers;      /* authProvider.N lines (config_sasl_provider) */
    struct config_keyed auth_providers[CONFIG_KEYED_MAX];
    uint32_t n_sasl_super_users;    /* superUser and superUser.X: SASL ids that are super */
    struct config_keyed sasl_super_users[CONFIG_KEYED_MAX];
    bool extended_types;            /* zookeeper.extendedTypesEnabled (TTL), default true */
    int32_t max_buffer_bytes;       /* jute.maxbuffer, default 0xfffff */
    int32_t snap_count;             /* snapCount, default 100000: txns between snapshots */
    int32_t commit_log_count;       /* commitLogCount, default 500: an ensemble member keeps
                                     * this many txns before its newest snapshot in memory */
    int32_t prealloc_kb;            /* preAllocSize, default 65536 (KB): log preallocation chunk */
    int32_t autopurge_snap_retain;  /* autopurge.snapRetainCount, default 3 */
    int32_t autopurge_interval_h;   /* autopurge.purgeInterval, default 0 */
    int64_t container_check_ms;     /* znode.container.checkIntervalMs, default 60000 */
    /* larch.zxidCounterLimit: the highest zxid counter a leader assigns
     * before it steps down so that a new term (epoch) starts
     * (ZOOKEEPER-1277 happens at 0xffffffff). Default 4294967294; small
     * values let tests and operators watch the rollover happen. */
    int64_t zxid_counter_limit;
    int32_t global_outstanding_limit; /* globalOutstandingLimit, default 1000 */
    int32_t max_cnxns;              /* maxCnxns: all client connections, default 0 = unlimited */
    int32_t sessionless_timeout_ms; /* zookeeper.nio.sessionlessCnxnTimeout, default 10000 */
    /* the memory budget (bytes; DESIGN.md invariant 6, README "Limits") */
    int64_t max_buffered_bytes;     /* larch.maxBufferedBytes, default 256 MiB */
    int64_t conn_max_buffer_bytes;  /* larch.connection.maxBufferBytes, default 2 frames */
    int64_t conn_out_high_water_bytes; /* larch.connection.outputHighWaterBytes, default 1 MiB */
    int64_t conn_max_unsent_bytes;  /* larch.connection.maxUnsentBytes, default 16 MiB */
    /* the ensemble (server.N and the keys that go with it). A configuration
     * that asks for replicated mode (config_is_distributed) makes larchd a
     * member of a Raft ensemble (replication/README.md): config_read_myid
     * and config_ensemble below derive its id (from <dataDir>/myid), the
     * members, a cluster id and the Raft timing; config_finish requires a
     * dataDir for it. */
    int32_t init_limit;             /* initLimit (ticks), 0 = unset; replicated mode needs it */
    int32_t sync_limit;             /* syncLimit (ticks), 0 = unset; replicated mode needs it */
    bool standalone_enabled;        /* standaloneEnabled, default true */
    bool reconfig_enabled;          /* reconfigEnabled, default false */
    char peer_type[16];             /* peerType: "participant" (default) or "observer" */
    char dynamic_config_file[4096]; /* dynamicConfigFile: more server.N lines */
    uint32_t n_servers;
    struct config_server servers[CONFIG_SERVERS_MAX];
    uint32_t my_id;                 /* this member's id (dataDir/myid), set by larchd once
                                     * config_read_myid read it; 0 standalone ("conf"
                                     * prints it as serverId, as ZooKeeper does) */
    /* metricsProvider.*: className ZooKeeper's PrometheusMetricsProvider
     * turns /metrics on at httpHost:httpPort (ZooKeeper's defaults 0.0.0.0
     * and 7000; port 0 takes any free one) */
    bool metrics_prometheus;
    char metrics_http_host[64];
    int32_t metrics_http_port;
    /* admin.*: ZooKeeper's AdminServer (server/admin.c), JSON answers to
     * the four-letter words at http://serverAddress:serverPort/commandURL.
     * enableServer defaults to false here (ZooKeeper's: true), see
     * config_usage; port 0 takes any free one. idleTimeout (ms) drops an
     * idle connection, rounded up to whole seconds. */
    bool admin_enabled;
    char admin_host[64];
    int32_t admin_port;
    char admin_command_url[128];
    int32_t admin_idle_timeout_ms;
    /* larchd-only (flags, and the same names as zoo.cfg keys) */
    int32_t workers;                /* --workers / larch.workers, default: cores - 1, at least 1 */
    int32_t log_level;              /* --log-level: 0 error .. 3 debug, default 2 (info) */
    char log_file[4096];            /* --log-file / larch.logFile: append log lines (all of
                                     * stderr) there, reopened on SIGHUP; "" = stderr */
    bool inline_sequencer;          /* --inline-sequencer / larch.inlineSequencer; unset: auto */
    bool inline_sequencer_set;      /* given explicitly (else main decides from CPU affinity) */
    /* --udp / larch.udp: where the UDP read path listens (dataplane/UDP.md);
     * port 0: off. host is an IPv4 or IPv6 literal. */
    struct config_hostport {
        char host[64];
        int32_t port;
    } udp;
    /* --dpdk / larch.dpdk: serve the UDP path from a DPDK port instead of
     * the kernel's sockets, with these EAL arguments ("" off); udp's host
     * is then the IPv4 address the port answers for. --dpdk-cores /
     * larch.dpdkCores: its poll-mode lcores (default 1). */
    char dpdk[1024];
    int32_t dpdk_cores;
    /* which of the above were set explicitly (bit per field is overkill: only what
     * derived defaults need) */
    bool min_session_set, max_session_set, data_log_dir_set, conn_max_buffer_set;
    bool client_port_address_set, client_port_set, secure_client_port_address_set;
    /* the --config file as given ("" when none), for the AdminServer's
     * initial_configuration, which shows its text as ZooKeeper does */
    char config_path[4096];
};

/* The plain client port larchd listens on, or 0 when it serves TLS only
 * (secureClientPort without clientPort, as ZooKeeper then opens no plain
 * factory). */
int32_t config_plain_port(const struct config *c);
/* Whether the x509 provider is registered (see x509_provider_line). */
bool config_x509_enabled(const struct config *c);

/* Fills c with ZooKeeper's defaults (derived ones computed from tickTime by
 * config_finish). */
void config_defaults(struct config *c);

/* Reports a problem: severity 0 = warning (parse goes on), 1 = error. */
typedef void (*config_report_fn)(void *arg, int severity, const char *msg);

/* Applies the key=value lines of text (a zoo.cfg body) to c. source names the
 * file in messages ("zoo.cfg:12: ..."). Returns 0, or -1 after reporting at
 * least one error. */
int config_parse_text(struct config *c, const char *text, size_t len, const char *source,
                      config_report_fn report, void *arg);
/* Reads and parses a file; -1 with a reported error when it cannot be read.
 * When it sets dynamicConfigFile, that file is read too: it may hold only
 * server.N and version lines, as ZooKeeper's dynamic configuration. */
int config_load(struct config *c, const char *path, config_report_fn report, void *arg);

/* What config_parse_members returns besides 0. */
enum {
    CONFIG_MEMBERS_REFUSED = -1,   /* some line was refused (reported) */
    CONFIG_MEMBERS_NO_MEMORY = -2, /* (reported) */
};
/* Parses a dynamic configuration body: java.util.Properties lines that are
 * server.N (through config_parse_server) or version, nothing else, as
 * ZooKeeper's QuorumPeerConfig.parseDynamicConfig takes a dynamic file or a
 * reconfig's newMembers. source names the text in messages ("newMembers:2:
 * server.4: ..."); each server's where is "source:line". An id given twice
 * is refused, as in zoo.cfg (ZooKeeper's Properties would keep the last).
 * Allocates scratch and frees it; no I/O. Returns 0 with servers[0..
 * *n_servers) filled in text order (servers has room for CONFIG_SERVERS_MAX;
 * more is refused), or one of the codes above after reporting each problem. */
int config_parse_members(const char *text, size_t len, const char *source,
                         struct config_server *servers, uint32_t *n_servers,
                         config_report_fn report, void *arg);

/* True when the server.N lines ask for replicated mode: more than one
 * participant, or standaloneEnabled=false (ZooKeeper's isDistributed). */
bool config_is_distributed(const struct config *c);
/* The membership as ZooKeeper's /zookeeper/config holds it (its quorum
 * verifier's text): one "server.N=host:quorumPort:electionPort:participant"
 * (or ":observer") line per server.N line, with ";clientAddress:clientPort"
 * when the line names a client port (0.0.0.0 when it names no address),
 * then "version=" and version in hex. A malloc'd string the caller frees;
 * NULL without memory. */
char *config_membership_text(const struct config *c, int64_t version);
/* The same text for any servers array, in its order (a reconfig's outcome);
 * a negative version leaves the version line out (the server.N lines only). */
char *config_servers_text(const struct config_server *servers, uint32_t n_servers,
                          int64_t version);
/* True when two hosts as written are one: IP literals by their address bytes
 * ("::1" is "0:0::1"), names by case-insensitive text. Never resolves. */
bool config_same_host(const char *a, const char *b);

/* ---- the ensemble as this server takes part in it ----------------------- */

/* The Raft core's bound on election_ticks (RAFT_ELECTION_TICKS_MAX in
 * replication/raft.c, where raft_new refuses more: twice the election
 * timeout must fit 32 bits). Kept equal by hand: config includes no
 * replication header. */
#define CONFIG_ELECTION_TICKS_MAX (1u << 30)
#define CONFIG_MYID_BYTES_MAX 64 /* a myid file holds one number */

/* Reads this server's id from <dataDir>/myid, as ZooKeeper's
 * QuorumPeerConfig does, a little stricter and a little kinder: ZooKeeper
 * takes the first line and Long.parseLong()s it; larchd trims whitespace
 * around the number (so "  7  " is 7) but refuses anything else in the file
 * (a second line included). The id must be 1..255, or 1..254 with
 * zookeeper.extendedTypesEnabled (finish_ensemble's rule for server.N).
 * Reads at most CONFIG_MYID_BYTES_MAX + 1 bytes of a regular file; the only
 * I/O config does besides config_load. Returns 0 with *myid set, or -1 after
 * reporting one error naming the file and the problem (*myid untouched). */
int config_read_myid(const struct config *c, uint32_t *myid, config_report_fn report, void *arg);

/* One member of the ensemble, as the peer link and the Raft core see it. */
struct config_member {
    uint32_t id;
    bool voter;       /* false: observer */
    char host[256];   /* quorum address as written: an IPv4/IPv6 literal (no
                       * brackets) or a host name, which config never resolves */
    int32_t quorum_port;
    char where[320];  /* where its server.N line was ("zoo.cfg:14"), for messages */
};

/* The ensemble from this server's point of view. Timing is derived from
 * tickTime, initLimit and syncLimit only, so the whole ensemble agrees on it:
 *   raft_tick_ms    = tickTime / 10 (tickTime >= 10 is required). Ten raft
 *                     ticks per ZooKeeper tick give the randomized election
 *                     timeout 10 * syncLimit slots to spread candidates over.
 *   heartbeat_ticks = 5: every tickTime / 2, as ZooKeeper's leader pings its
 *                     learners every half tick (Leader.lead).
 *   election_ticks  = 10 * syncLimit: a follower that hears no leader for
 *                     syncLimit ticks (to 2 * syncLimit: the core randomizes
 *                     in [election, 2 * election)) campaigns, as ZooKeeper's
 *                     follower gives up on a leader silent for syncLimit
 *                     ticks; a leader that hears no quorum for as long steps
 *                     down (CheckQuorum, ZooKeeper's syncLimit check of its
 *                     followers).
 *   init_limit_ms   = initLimit * tickTime: bounds one catch-up or snapshot
 *                     transfer, as ZooKeeper's initLimit bounds a learner's
 *                     connect-and-sync.
 *   sync_limit_ms   = syncLimit * tickTime.
 * With a tickTime that is not a multiple of 10, raft times round down to
 * whole raft ticks (tickTime=2005: heartbeats every 1000 ms). */
struct config_ensemble {
    uint32_t self_id;
    bool self_observer;
    uint32_t n_members;                               /* voters and observers, self included */
    struct config_member members[CONFIG_SERVERS_MAX]; /* in id order */
    /* Equal on every server given the same members, whatever the order of
     * the server.N lines or the addresses and ports they name (members may
     * name one another differently: 0.0.0.0 for itself, a NAT or proxy
     * address for a peer, as ZooKeeper allows), and different when an id
     * or a role changes or a member is added or removed. FNV-1a 64 over a
     * byte-order-independent encoding of the id-sorted (id, voter) pairs
     * (see ensemble_cluster_id in config.c). A guard against a server of
     * another ensemble, not authentication. With reconfigEnabled=true the
     * membership changes at run time, so the members are left out: every
     * such ensemble has one id. Never 0. */
    uint64_t cluster_id;
    int32_t raft_tick_ms;
    uint32_t heartbeat_ticks; /* in raft ticks (5) */
    uint32_t election_ticks;  /* in raft ticks (10 * syncLimit) */
    int64_t init_limit_ms;
    int64_t sync_limit_ms;
};

/* Derives the ensemble for myid (from config_read_myid) from the parsed
 * configuration. Pure: no I/O, no name resolution. Refuses, reporting each
 * problem at the server.N line or key it concerns: myid in no server.N
 * line; peerType given and not this server's role in its server.N line
 * (ZooKeeper warns and follows the line; larchd fails closed); initLimit or
 * syncLimit unset (ZooKeeper requires both in replicated mode); tickTime
 * below 10 ms; 10 * syncLimit above CONFIG_ELECTION_TICKS_MAX; two members
 * at one quorum address (host:quorumPort); a quorum port equal to a client
 * port on the same host (a server.N line's ;clientPort, or clientPort for
 * this server); no voter. Does not lift config_finish's refusal of
 * replicated mode. Returns 0 with *out filled, or -1 after reporting (*out
 * then unspecified). */
int config_ensemble(const struct config *c, uint32_t myid, struct config_ensemble *out,
                    config_report_fn report, void *arg);

/* Reads the whole file at path (at most the size config_load accepts)
 * into a malloc'd, NUL-terminated buffer the caller frees, *len its
 * length; NULL after reporting why (naming path). */
char *config_read_file(const char *path, size_t *len, config_report_fn report, void *arg);

/* Parses argv (argv[0] is the program name). Flags override the file: when
 * --config is present the file is parsed first, then every flag. Sets
 * *want_help / *want_version for --help / --version. Returns 0 or -1 after
 * reporting the offending flag or value. */
int config_from_args(struct config *c, int argc, char **argv, config_report_fn report, void *arg,
                     bool *want_help, bool *want_version);

/* Computes derived defaults and checks cross-field rules (min <= max session
 * timeout, port in 1..65535, workers in 1..64, ...). Returns 0 or -1 after reporting. */
int config_finish(struct config *c, config_report_fn report, void *arg);

/* True when an authProvider.N line names ZooKeeper's SASLAuthenticationProvider:
 * "sasl" ACLs are then valid and matched (tree_auth.sasl_provider). */
bool config_sasl_provider(const struct config *c);

/* True when the four-letter word (e.g. "ruok") is allowed by the whitelist. */
bool config_4lw_allowed(const struct config *c, const char *word);

/* The --help text: every flag and every zoo.cfg key with its default. */
const char *config_usage(void);

/* Writes the effective configuration as "key=value\n" lines (for the conf 4lw). */
size_t config_format(const struct config *c, char *out, size_t cap);

#endif /* LARCH_SERVER_CONFIG_H */
