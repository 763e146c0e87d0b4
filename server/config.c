/*
 * config.c — larchd settings: ZooKeeper defaults, zoo.cfg (java.util.Properties)
 * parsing, command-line flags, derived defaults and the "conf" view.
 *
 * Every setting is a row in one of two tables (zoo.cfg keys, command-line flags)
 * that names its field, its kind and its range; parsing a key and parsing a flag
 * share the same value checks, so "clientPort=abc" and "--port abc" are refused
 * for the same reason. Problems go to the caller's report callback, prefixed with
 * where they came from ("zoo.cfg:3: clientPort: ..." or "larchd: --port: ...").
 */
#include "server/config.h"

#include "base/base.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>

enum { SEV_WARNING = 0, SEV_ERROR = 1 };

/* Limits (TigerBeetle style: everything has one). A logical line holds a key, a
 * separator and at most a dataDir-sized value, so 8 KiB is ample. */
#define LINE_BYTES_MAX 8192
#define FILE_BYTES_MAX (1024 * 1024)
#define WORKERS_MAX 64
#define VALUE_ECHO_MAX 200 /* bytes of a bad value quoted back in a message */
#define ZK_PREFIX "zookeeper."
#define PROGRAM "larchd"

/* ------------------------------------------------------------------ reporting */

/* Where a message comes from: "source:line" (line > 0) or just "source", then
 * optionally the key or flag being set. Counts errors so callers return -1. */
struct reporter {
    config_report_fn fn;
    void *arg;
    const char *source;
    int line;
    const char *what;
    int errors;
    bool dynamic_file; /* a dynamicConfigFile: server.N and version lines only */
    bool out_of_memory;
};

static void report(struct reporter *r, int severity, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Formats one message with its location prefix and hands it to the callback
 * (which may be NULL: the error is still counted). Long messages are cut at
 * CONFIG_MSG_MAX - 1 bytes. */
static void report(struct reporter *r, int severity, const char *fmt, ...)
{
    char msg[CONFIG_MSG_MAX];
    int n;

    if (r->line > 0)
        n = snprintf(msg, sizeof msg, "%s:%d: ", r->source, r->line);
    else
        n = snprintf(msg, sizeof msg, "%s: ", r->source);
    if (n < 0)
        n = 0;
    if (r->what != NULL && (size_t)n < sizeof msg) {
        int m = snprintf(msg + n, sizeof msg - (size_t)n, "%s: ", r->what);
        if (m > 0)
            n += m;
    }
    if ((size_t)n < sizeof msg) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
        va_end(ap);
    }
    if (severity == SEV_ERROR)
        r->errors++;
    if (r->fn != NULL)
        r->fn(r->arg, severity, msg);
}

/* ------------------------------------------------------------------ settings */

enum kind {
    K_INT32,           /* decimal in [min, max] */
    K_INT64,           /* decimal in [min, max] */
    K_TICKS,           /* decimal in [min, max]; 0 (unset) is left alone by check_ranges */
    K_PORT,            /* 1..65535 */
    K_OPT_PORT,        /* 1..65535, or -1 (what "conf" prints for none): off, stored as 0 */
    K_SESSION_TIMEOUT, /* positive ms, or -1 = derive from tickTime */
    K_SNAP_RETAIN,     /* ZooKeeper raises values below 3 to 3 with a warning */
    K_BOOL,            /* true/false, as Boolean.parseBoolean but strict */
    K_ONOFF,           /* on/off (flags) */
    K_STRING,          /* at least min bytes, fits the field */
    K_SECRET,          /* a string never echoed in messages (passwords) */
    K_STORE_TYPE,      /* ssl.*Store.type: PEM or PKCS12 (JKS, BCFKS refused) */
    K_TLS_PROTOCOL,    /* ssl.protocol: TLSv1.2 or TLSv1.3 */
    K_TLS_PROTOCOLS,   /* ssl.enabledProtocols: a comma-separated list of those */
    K_CLIENT_AUTH,     /* ssl.clientAuth: none, want, need */
    K_FOURLW,          /* 4lw whitelist */
    K_DIGEST,          /* "user:base64" or empty (no super user) */
    K_LOGLEVEL,        /* error|warn|info|debug -> 0..3 */
    K_HOSTPORT,        /* IPv4:PORT or [IPv6]:PORT, a literal and 1..65535 */
    K_AUTH_SCHEMES,    /* enforce.auth.schemes: digest, ip (comma-separated) */
    K_METRICS_CLASS,   /* metricsProvider.className: Prometheus's or ZooKeeper's default */
    K_URL_PATH,        /* admin.commandURL: "/" then URL-safe characters, no trailing '/' */
    K_META_CONFIG,     /* --config FILE */
    K_META_HELP,       /* --help, -h */
    K_META_VERSION,    /* --version, -V */
};

#define NO_SET_FLAG ((size_t)-1)

struct setting {
    const char *name;  /* zoo.cfg key, or flag with its dashes */
    enum kind kind;
    size_t offset;     /* field in struct config */
    size_t size;       /* field size (strings) */
    size_t set_offset; /* bool recording an explicit value, or NO_SET_FLAG */
    int64_t min, max;  /* integer range; strings: min length */
    bool sysprop;      /* key may carry the "zookeeper." prefix */
    size_t where_offset; /* char[CONFIG_WHERE_MAX] for "file:line: key", or NO_SET_FLAG */
};

#define FIELD(f) offsetof(struct config, f), sizeof(((struct config *)0)->f)
#define ROW(n, k, f, lo, hi, sp) { n, k, FIELD(f), NO_SET_FLAG, lo, hi, sp, NO_SET_FLAG }
#define ROW_SET(n, k, f, setf, lo, hi) \
    { n, k, FIELD(f), offsetof(struct config, setf), lo, hi, false, NO_SET_FLAG }
/* A system-property key whose line later messages name (the files it names
 * are read when larchd starts). */
#define ROW_AT(n, k, f, wheref, lo, hi) \
    { n, k, FIELD(f), NO_SET_FLAG, lo, hi, true, offsetof(struct config, wheref) }
/* A QuorumPeerConfig key (no prefix) whose line later messages name. */
#define ROW_KEY_AT(n, k, f, wheref) \
    { n, k, FIELD(f), NO_SET_FLAG, 0, 0, false, offsetof(struct config, wheref) }
#define META(n, k) { n, k, 0, 0, NO_SET_FLAG, 0, 0, false, NO_SET_FLAG }
/* One X509Util family of keys (prefix "ssl." or "ssl.quorum.") over the
 * config_tls member f. */
#define TLS_ROWS(prefix, f)                                                                    \
    ROW_AT(prefix "keyStore.location", K_STRING, f.key.location, f.key.where_location, 1, 0),   \
    ROW_AT(prefix "keyStore.password", K_SECRET, f.key.password, f.key.where_password, 0, 0),   \
    ROW_AT(prefix "keyStore.passwordPath", K_STRING, f.key.password_path,                      \
           f.key.where_password_path, 0, 0),                                                   \
    ROW_AT(prefix "keyStore.type", K_STORE_TYPE, f.key.type, f.key.where_type, 0, 0),           \
    ROW_AT(prefix "trustStore.location", K_STRING, f.trust.location, f.trust.where_location, 1, \
           0),                                                                                 \
    ROW_AT(prefix "trustStore.password", K_SECRET, f.trust.password, f.trust.where_password, 0, \
           0),                                                                                 \
    ROW_AT(prefix "trustStore.passwordPath", K_STRING, f.trust.password_path,                  \
           f.trust.where_password_path, 0, 0),                                                 \
    ROW_AT(prefix "trustStore.type", K_STORE_TYPE, f.trust.type, f.trust.where_type, 0, 0),     \
    ROW(prefix "protocol", K_TLS_PROTOCOL, f.protocol, 0, 0, true),                            \
    ROW(prefix "enabledProtocols", K_TLS_PROTOCOLS, f.enabled_protocols, 0, 0, true),          \
    ROW_AT(prefix "ciphersuites", K_STRING, f.ciphersuites, f.where_ciphersuites, 1, 0),        \
    ROW_AT(prefix "clientAuth", K_CLIENT_AUTH, f.client_auth, f.where_client_auth, 0, 0),       \
    ROW(prefix "hostnameVerification", K_BOOL, f.hostname_verification, 0, 0, true),           \
    ROW(prefix "clientHostnameVerification", K_BOOL, f.client_hostname_verification, 0, 0, true)

/* zoo.cfg keys. Those ZooKeeper's QuorumPeerConfig does not parse itself become
 * Java system properties named "zookeeper.<key>" (or are read as system
 * properties already), so they are accepted with or without that prefix. */
static const struct setting key_settings[] = {
    ROW("tickTime", K_INT32, tick_time_ms, 1, INT32_MAX, false),
    ROW("dataDir", K_STRING, data_dir, 0, 0, false),
    ROW_SET("dataLogDir", K_STRING, data_log_dir, data_log_dir_set, 0, 0),
    ROW_SET("clientPort", K_PORT, client_port, client_port_set, 1, 65535),
    ROW_SET("clientPortAddress", K_STRING, client_port_address, client_port_address_set, 1, 0),
    ROW("secureClientPort", K_OPT_PORT, secure_client_port, 0, 65535, false), /* 0: off */
    ROW_SET("secureClientPortAddress", K_STRING, secure_client_port_address,
            secure_client_port_address_set, 1, 0),
    /* ZooKeeper's ClientX509Util reads them as "zookeeper.ssl.*" system
     * properties, which zoo.cfg's "ssl.*" lines become */
    TLS_ROWS("ssl.", tls),
    /* the quorum links' (QuorumX509Util: "zookeeper.ssl.quorum.*"), the
     * same rows over a second config_tls */
    ROW_KEY_AT("sslQuorum", K_BOOL, ssl_quorum, where_ssl_quorum),
    TLS_ROWS("ssl.quorum.", quorum_tls),
    ROW_SET("minSessionTimeout", K_SESSION_TIMEOUT, min_session_timeout_ms, min_session_set, 1,
            INT32_MAX),
    ROW_SET("maxSessionTimeout", K_SESSION_TIMEOUT, max_session_timeout_ms, max_session_set, 1,
            INT32_MAX),
    ROW("maxClientCnxns", K_INT32, max_client_cnxns, 0, INT32_MAX, false),
    ROW("4lw.commands.whitelist", K_FOURLW, four_letter_words, 0, 0, true),
    ROW("readonlymode.enabled", K_BOOL, read_only_mode, 0, 0, true),
    /* SyncRequestProcessor never snapshots more often than every 2 txns. */
    ROW("snapCount", K_INT32, snap_count, 2, INT32_MAX, true),
    /* ZKDatabase's zookeeper.commitLogCount: committed txns kept in memory
     * for followers just behind (a DIFF rather than a snapshot) */
    ROW("commitLogCount", K_INT32, commit_log_count, 1, INT32_MAX, true),
    ROW("preAllocSize", K_INT32, prealloc_kb, 1, 1048576, true),
    ROW("autopurge.snapRetainCount", K_SNAP_RETAIN, autopurge_snap_retain, 3, INT32_MAX, false),
    ROW("autopurge.purgeInterval", K_INT32, autopurge_interval_h, 0, INT32_MAX, false),
    ROW("globalOutstandingLimit", K_INT32, global_outstanding_limit, 1, INT32_MAX, true),
    ROW("maxCnxns", K_INT32, max_cnxns, 0, INT32_MAX, false),
    ROW("nio.sessionlessCnxnTimeout", K_INT32, sessionless_timeout_ms, 1, INT32_MAX, true),
    ROW("larch.maxBufferedBytes", K_INT64, max_buffered_bytes, 1 << 20, INT64_MAX, false),
    ROW_SET("larch.connection.maxBufferBytes", K_INT64, conn_max_buffer_bytes, conn_max_buffer_set,
            0, INT64_MAX),
    ROW("larch.connection.outputHighWaterBytes", K_INT64, conn_out_high_water_bytes, 1, INT64_MAX,
        false),
    ROW("larch.connection.maxUnsentBytes", K_INT64, conn_max_unsent_bytes, 1, INT64_MAX, false),
    ROW("znode.container.checkIntervalMs", K_INT64, container_check_ms, 1, INT64_MAX, true),
    /* A frame must fit one txn log record (TXNLOG_RECORD_BYTES_MAX, 32 MiB)
     * with room for what prep adds: larger would be refused at write time. */
    ROW("jute.maxbuffer", K_INT32, max_buffer_bytes, 1, JUTE_MAXBUFFER_MAX, true),
    ROW("extendedTypesEnabled", K_BOOL, extended_types, 0, 0, true),
    ROW("DigestAuthenticationProvider.superDigest", K_DIGEST, super_digest, 0, 0, true),
    ROW("metricsProvider.className", K_METRICS_CLASS, metrics_prometheus, 0, 0, false),
    ROW("metricsProvider.httpHost", K_STRING, metrics_http_host, 1, 0, false),
    ROW("metricsProvider.httpPort", K_INT32, metrics_http_port, 0, 65535, false),
    /* ZooKeeper's AdminServer (JettyAdminServer reads these as
     * zookeeper.admin.* system properties); larchd's default for
     * enableServer is false: see config_usage */
    ROW("admin.enableServer", K_BOOL, admin_enabled, 0, 0, true),
    ROW("admin.serverAddress", K_STRING, admin_host, 1, 0, true),
    ROW("admin.serverPort", K_INT32, admin_port, 0, 65535, true),
    ROW("admin.commandURL", K_URL_PATH, admin_command_url, 2, 0, true),
    ROW("admin.idleTimeout", K_INT32, admin_idle_timeout_ms, 1, INT32_MAX, true),
    ROW("enforce.auth.enabled", K_BOOL, enforce_auth_enabled, 0, 0, true),
    ROW("enforce.auth.schemes", K_AUTH_SCHEMES, enforce_auth_schemes, 0, 0, true),
    /* SASL (authProvider.N and superUser[.X] are families: apply_keyed_family) */
    ROW("sessionRequireClientSASLAuth", K_BOOL, session_require_sasl, 0, 0, true),
    ROW("jaasLoginConfig", K_STRING, jaas_file, 1, 0, false),
    ROW("java.security.auth.login.config", K_STRING, jaas_file, 1, 0, false),
    ROW("sasl.serverconfig", K_STRING, sasl_section, 1, 0, true),
    ROW("X509AuthenticationProvider.superUser", K_STRING, x509_super_user, 1, 0, true),
    ROW("larch.workers", K_INT32, workers, 1, WORKERS_MAX, false),
    ROW("larch.zxidCounterLimit", K_INT64, zxid_counter_limit, 16, 4294967294LL, false),
    ROW("larch.logLevel", K_LOGLEVEL, log_level, 0, 3, false),
    ROW("larch.logFile", K_STRING, log_file, 1, 0, false),
    ROW_SET("larch.inlineSequencer", K_BOOL, inline_sequencer, inline_sequencer_set, 0, 0),
    ROW("larch.udp", K_HOSTPORT, udp, 0, 0, false),
    ROW("larch.dpdk", K_STRING, dpdk, 1, 0, false),
    ROW("larch.dpdkCores", K_INT32, dpdk_cores, 1, 64, false),
    /* the ensemble: server.N lines are parsed by parse_server_line */
    ROW("initLimit", K_TICKS, init_limit, 1, INT32_MAX, false),
    ROW("syncLimit", K_TICKS, sync_limit, 1, INT32_MAX, false),
    ROW("standaloneEnabled", K_BOOL, standalone_enabled, 0, 0, false),
    ROW("reconfigEnabled", K_BOOL, reconfig_enabled, 0, 0, false),
    ROW("peerType", K_STRING, peer_type, 1, 0, false),
    ROW("dynamicConfigFile", K_STRING, dynamic_config_file, 1, 0, false),
};

static const struct setting flag_settings[] = {
    META("--config", K_META_CONFIG),
    META("--help", K_META_HELP),
    META("-h", K_META_HELP),
    META("--version", K_META_VERSION),
    META("-V", K_META_VERSION),
    ROW_SET("--port", K_PORT, client_port, client_port_set, 1, 65535),
    ROW_SET("--bind", K_STRING, client_port_address, client_port_address_set, 1, 0),
    ROW("--workers", K_INT32, workers, 1, WORKERS_MAX, false),
    ROW("--tick-time", K_INT32, tick_time_ms, 1, INT32_MAX, false),
    ROW_SET("--min-session-timeout", K_SESSION_TIMEOUT, min_session_timeout_ms, min_session_set,
            1, INT32_MAX),
    ROW_SET("--max-session-timeout", K_SESSION_TIMEOUT, max_session_timeout_ms, max_session_set,
            1, INT32_MAX),
    ROW("--max-client-cnxns", K_INT32, max_client_cnxns, 0, INT32_MAX, false),
    ROW("--4lw", K_FOURLW, four_letter_words, 0, 0, false),
    ROW("--super-digest", K_DIGEST, super_digest, 0, 0, false),
    ROW("--jaas", K_STRING, jaas_file, 1, 0, false),
    ROW("--ttl", K_ONOFF, extended_types, 0, 0, false),
    ROW("--data-dir", K_STRING, data_dir, 0, 0, false),
    ROW_SET("--data-log-dir", K_STRING, data_log_dir, data_log_dir_set, 0, 0),
    ROW("--max-buffer", K_INT32, max_buffer_bytes, 1, JUTE_MAXBUFFER_MAX, false),
    ROW("--log-level", K_LOGLEVEL, log_level, 0, 3, false),
    ROW("--log-file", K_STRING, log_file, 1, 0, false),
    ROW("--read-only", K_ONOFF, read_only_mode, 0, 0, false),
    ROW_SET("--inline-sequencer", K_ONOFF, inline_sequencer, inline_sequencer_set, 0, 0),
    ROW("--udp", K_HOSTPORT, udp, 0, 0, false),
    ROW("--dpdk", K_STRING, dpdk, 1, 0, false),
    ROW("--dpdk-cores", K_INT32, dpdk_cores, 1, 64, false),
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Keys of a ZooKeeper ensemble or JVM that a standalone larchd has no use for:
 * they get a milder warning than a misspelt key. Matched after dropping an
 * optional "zookeeper." prefix; entries ending in '.' match as prefixes. */
static const char *const ignored_keys[] = {
    "electionAlg", "electionPortBindRetry", "quorumListenOnAllIPs",
    /* paces the AdminServer's snapshot and restore, which larchd does not serve */
    "admin.rateLimiterIntervalInMS", "metricsProvider.", "forceSync", "clientPortListenBacklog",
    "localSessionsEnabled", "localSessionsUpgradingEnabled", "connectToLearnerMasterLimit",
    "syncEnabled", "quorum.", "multiAddress.", "enforceQuota", "maxResponseCacheSize",
    "maxGetChildrenResponseCacheSize", "fsync.warningthresholdms", "leaderServes", "cnxTimeout",
    "digest.enabled", "snapshot.", "txnLogSizeLimitInKb", "snapSizeLimitInKb", "jvm.",
    "clientCnxnSocket", "netty.", "learner.",
    /* how long the quorum port's unified socket waits to tell TLS from plain */
    "ssl.handshakeDetectionTimeoutMillis", "ssl.quorum.handshakeDetectionTimeoutMillis",
    "leader.", "follower.", "commitProcessor.", "request_throttler.", "flushDelay",
    "maxWriteQueuePollTime", "maxBatchSize", "serializeLastProcessedZxid.enabled",
};

/* Security, TLS, SASL and quorum keys larchd cannot honour: a line asking
 * for what they configure is an error naming it, never a warning, so that
 * a configuration meaning "refuse unauthenticated clients" or "TLS only"
 * cannot start a server that serves in the clear. A value saying what
 * larchd does anyway ("false", the built-in providers) is accepted.
 * Matched after an optional "zookeeper." prefix; a key ending in '.' names
 * a family; the first match wins, so specific keys come before families. */
struct unhonoured_key {
    const char *key;
    const char *allowed; /* '|'-separated values larchd honours (case-insensitive); NULL: none */
    const char *lacks;   /* what larchd does not have; NULL: not refused (a family's
                          * exception, left to the warnings) */
};

#define NO_TLS "larchd has no TLS"
#define NO_KERBEROS "larchd's SASL is DIGEST-MD5 with a JAAS file's users: no Kerberos (GSSAPI)"
#define NO_QUORUM_SASL "larchd has no SASL on the quorum links"
#define AUTH_CLASS "org.apache.zookeeper.server.auth."
#define CNXN_CLASS "org.apache.zookeeper.server."

static const struct unhonoured_key unhonoured_keys[] = {
    /* sslQuorum itself is a row; prefixed, ZooKeeper would set a property
     * nothing reads, and the line surely meant the quorum to be TLS */
    { "sslQuorum", "false", "the key is sslQuorum, without the zookeeper. prefix" },
    { "sslQuorumReloadCertFiles", "false",
      "larchd reads the quorum's key and trust stores once, when it starts" },
    { "portUnification", "false", "larchd's quorum port speaks TLS only (sslQuorum=true) or "
      "plain TCP only: no port accepting both for a rolling upgrade" },
    /* the quorum's keys larchd does not take (those it takes are rows) */
    { "ssl.quorum.crl", "false", "larchd does not check certificate revocation lists" },
    { "ssl.quorum.ocsp", "false", "larchd does not check certificates by OCSP" },
    { "ssl.quorum.allowReverseDnsLookup", "false",
      "larchd matches a member's certificate to its address or server.N host, never a "
      "reverse lookup" },
    { "ssl.quorum.context.supplier.class", NULL,
      "larchd builds its quorum TLS context from the ssl.quorum.* keys" },
    { "ssl.quorum.handshakeDetectionTimeoutMillis", NULL, NULL },
    { "ssl.quorum.", NULL, "larchd does not know this quorum TLS key" },
    /* the secure client port's keys larchd does not take (those it takes
     * are rows of key_settings, found first) */
    { "ssl.authProvider", "x509", "client certificates go to the x509 scheme" },
    { "ssl.crl", "false", "larchd does not check certificate revocation lists" },
    { "ssl.ocsp", "false", "larchd does not check certificates by OCSP" },
    { "ssl.allowReverseDnsLookup", "false",
      "a reverse DNS lookup would block a worker (larchd matches the client's address)" },
    { "ssl.context.supplier.class", NULL, "larchd builds its TLS context from the ssl.* keys" },
    { "ssl.sslProvider", "JDK|OPENSSL|OPENSSL_REFCNT", "larchd's TLS is OpenSSL's" },
    /* the quorum port's: ignored with a warning (ignored_keys) */
    { "ssl.handshakeDetectionTimeoutMillis", NULL, NULL },
    { "ssl.", NULL, "larchd does not know this TLS key" },
    { "X509AuthenticationProvider.", NULL,
      "ZooKeeper's X509AuthenticationProvider reads X509AuthenticationProvider.superUser only" },
    { "DigestAuthenticationProvider.digestAlg", "SHA1|SHA-1",
      "larchd's digest scheme hashes with SHA-1 (ZooKeeper's default)" },
    { "allowSaslFailedClients", "false",
      "larchd closes a connection whose SASL login fails, as ZooKeeper does by default" },
    { "SASLAuthenticationProvider.superPassword", NULL,
      "larchd takes every SASL password from the JAAS file (user_super for the user super)" },
    { "letAnySaslUserDoX", NULL, "larchd's sasl ACLs match their own id and the user super only" },
    { "sasl.", NULL, NO_KERBEROS " and no SASL client settings (sasl.serverconfig is served)" },
    { "kerberos.", NULL, NO_KERBEROS },
    { "jaasLoginRenew", NULL, NO_KERBEROS " tickets to renew" },
    { "quorum.auth.enableSasl", "false", NO_QUORUM_SASL },
    { "quorum.auth.learnerRequireSasl", "false", NO_QUORUM_SASL },
    { "quorum.auth.serverRequireSasl", "false", NO_QUORUM_SASL },
    { "quorum.auth.", NULL, NO_QUORUM_SASL },
    { "skipACL", "no", "larchd always checks ACLs" },
    { "audit.enable", "false", "larchd writes no audit log" },
    { "serverCnxnFactory", CNXN_CLASS "NIOServerCnxnFactory|" CNXN_CLASS "NettyServerCnxnFactory",
      "larchd's connection layer stands in for ZooKeeper's NIO and Netty factories" },
    { "electionAlg", "3", "ZooKeeper's only election algorithm is 3" },
    { "quorumListenOnAllIPs", "false", "larchd's quorum port binds its server.N address" },
    { "multiAddress.enabled", "false", "a larchd member has one quorum address" },
    { "observerMasterPort", NULL, "larchd's observers follow the leader, not an observer master" },
    { "metricsProvider.httpsPort", NULL, NO_TLS " for /metrics" },
    { "metricsProvider.ssl.", NULL, NO_TLS " for /metrics" },
    /* the AdminServer over HTTPS (ZooKeeper's uses the ssl.quorum.* stores,
     * which larchd takes for the quorum links only) */
    { "admin.forceHttps", "false", NO_TLS " for the AdminServer" },
    { "admin.portUnification", "false", NO_TLS " for the AdminServer" },
    { "admin.needClientAuth", "false", NO_TLS " for the AdminServer (client certificates)" },
    /* ZooKeeper picks the HTTPS connector's protocol with it; larchd's
     * AdminServer is plain HTTP/1.1 */
    { "admin.httpVersion", "11", "larchd's AdminServer speaks HTTP/1.1 only" },
    /* ZooKeeper's snapshot and restore commands need its admin
     * authentication, which larchd does not implement: not served */
    { "admin.snapshot.enabled", "false", "larchd's AdminServer does not serve snapshot" },
    { "admin.restore.enabled", "false", "larchd's AdminServer does not serve restore" },
    /* process_* metrics are exported either way; there is no JVM to describe */
    { "metricsProvider.exportJvmInfo", "true|false", "it takes true or false" },
};

/* ZooKeeper 3.8 FourLetterCommands (checked against the 3.8.0 jar). */
static const char *const known_4lw[] = {
    "conf", "cons", "crst", "dirs", "dump", "envi", "gtmk", "hash", "isro",
    "mntr", "ruok", "srst", "srvr", "stat", "stmk", "wchc", "wchp", "wchs",
};

static const char *const log_level_names[] = { "error", "warn", "info", "debug" };

/* ------------------------------------------------------------------ small helpers */

static bool is_blank(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\f';
}

/* Trims as Java's String.trim (every byte <= ' ' at either end), in place. */
static char *trim_java(char *s)
{
    size_t n = strlen(s);
    while (n > 0 && (unsigned char)s[n - 1] <= ' ')
        s[--n] = '\0';
    while (*s != '\0' && (unsigned char)*s <= ' ')
        s++;
    return s;
}

static void *field_of(struct config *c, const struct setting *s)
{
    return (char *)c + s->offset;
}

static void mark_set(struct config *c, const struct setting *s, bool value)
{
    if (s->set_offset != NO_SET_FLAG)
        *(bool *)((char *)c + s->set_offset) = value;
}

static bool is_known_4lw(const char *word, size_t len)
{
    for (size_t i = 0; i < COUNT(known_4lw); i++)
        if (len == 4 && memcmp(known_4lw[i], word, 4) == 0)
            return true;
    return false;
}

/* Calls visit for each comma-separated, blank-trimmed, non-empty word of list
 * and stops when it returns true; returns whether it did. */
static bool each_word(const char *list, bool (*visit)(const char *w, size_t n, const void *ctx),
                      const void *ctx)
{
    const char *p = list;
    while (*p != '\0') {
        size_t n = strcspn(p, ",");
        const char *w = p;
        size_t wn = n;
        while (wn > 0 && (unsigned char)*w <= ' ') {
            w++;
            wn--;
        }
        while (wn > 0 && (unsigned char)w[wn - 1] <= ' ')
            wn--;
        if (wn > 0 && visit(w, wn, ctx))
            return true;
        p += n;
        if (*p == ',')
            p++;
    }
    return false;
}

static bool word_matches(const char *w, size_t n, const void *ctx)
{
    const char *want = ctx;
    return (n == 1 && w[0] == '*') || (strlen(want) == n && memcmp(w, want, n) == 0);
}

/* ------------------------------------------------------------------ value parsers */

enum num_result { NUM_OK, NUM_NOT_A_NUMBER, NUM_OVERFLOW };

/* Decimal with an optional sign, nothing else (as Integer.parseInt: no hex, no
 * blanks, no suffix). */
static enum num_result parse_decimal(const char *s, int64_t *out)
{
    const char *digits = (*s == '+' || *s == '-') ? s + 1 : s;
    if (*digits < '0' || *digits > '9')
        return NUM_NOT_A_NUMBER;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end != '\0')
        return NUM_NOT_A_NUMBER;
    if (errno == ERANGE)
        return NUM_OVERFLOW;
    *out = v;
    return NUM_OK;
}

static void report_range(struct reporter *r, const char *value, int64_t min, int64_t max)
{
    if (max == INT32_MAX || max == INT64_MAX)
        report(r, SEV_ERROR, "'%.*s' is out of range (must be at least %lld)", VALUE_ECHO_MAX,
               value, (long long)min);
    else
        report(r, SEV_ERROR, "'%.*s' is out of range (must be between %lld and %lld)",
               VALUE_ECHO_MAX, value, (long long)min, (long long)max);
}

/* Parses an integer within the row's range; reports and returns false if not. */
static bool parse_ranged(const struct setting *s, const char *value, struct reporter *r,
                         int64_t *out)
{
    int64_t v = 0;
    enum num_result res = parse_decimal(value, &v);
    if (res == NUM_NOT_A_NUMBER) {
        report(r, SEV_ERROR, "'%.*s' is not a number", VALUE_ECHO_MAX, value);
        return false;
    }
    if (res == NUM_OVERFLOW || v < s->min || v > s->max) {
        report_range(r, value, s->min, s->max);
        return false;
    }
    *out = v;
    return true;
}

static void apply_int(struct config *c, const struct setting *s, const char *value,
                      struct reporter *r)
{
    int64_t v;
    if (!parse_ranged(s, value, r, &v))
        return;
    if (s->kind == K_INT64)
        *(int64_t *)field_of(c, s) = v;
    else
        *(int32_t *)field_of(c, s) = (int32_t)v;
    mark_set(c, s, true);
}

static void apply_port(struct config *c, const struct setting *s, const char *value,
                       struct reporter *r)
{
    int64_t v = 0;
    if (parse_decimal(value, &v) != NUM_OK || v < 1 || v > 65535) {
        report(r, SEV_ERROR, "'%.*s' is not a port number (1-65535)", VALUE_ECHO_MAX, value);
        return;
    }
    *(int32_t *)field_of(c, s) = (int32_t)v;
    mark_set(c, s, true);
}

/* ZooKeeper treats -1 as "not set": the timeout is then derived from tickTime
 * (2x for the minimum, 20x for the maximum) by config_finish. */
static void apply_session_timeout(struct config *c, const struct setting *s, const char *value,
                                  struct reporter *r)
{
    int64_t v = 0;
    enum num_result res = parse_decimal(value, &v);
    if (res == NUM_NOT_A_NUMBER) {
        report(r, SEV_ERROR, "'%.*s' is not a number", VALUE_ECHO_MAX, value);
        return;
    }
    if (res == NUM_OK && v == -1) {
        *(int32_t *)field_of(c, s) = -1;
        mark_set(c, s, false);
        return;
    }
    if (res == NUM_OVERFLOW || v < s->min || v > s->max) {
        report(r, SEV_ERROR, "'%.*s' must be a positive number of milliseconds, or -1",
               VALUE_ECHO_MAX, value);
        return;
    }
    *(int32_t *)field_of(c, s) = (int32_t)v;
    mark_set(c, s, true);
}

/* PurgeTxnLog keeps at least 3 snapshots; ZooKeeper logs and uses 3 for less. */
static void apply_snap_retain(struct config *c, const struct setting *s, const char *value,
                              struct reporter *r)
{
    int64_t v = 0;
    enum num_result res = parse_decimal(value, &v);
    if (res == NUM_NOT_A_NUMBER) {
        report(r, SEV_ERROR, "'%.*s' is not a number", VALUE_ECHO_MAX, value);
        return;
    }
    if (res == NUM_OVERFLOW || v > INT32_MAX) {
        report_range(r, value, s->min, s->max);
        return;
    }
    if (v < s->min) {
        report(r, SEV_WARNING, "%lld is below the minimum of %lld; using %lld", (long long)v,
               (long long)s->min, (long long)s->min);
        v = s->min;
    }
    *(int32_t *)field_of(c, s) = (int32_t)v;
}

/* Boolean.parseBoolean takes "true" in any case and reads everything else as
 * false; larchd refuses anything but true/false so a typo is not silently "off". */
static void apply_bool(struct config *c, const struct setting *s, const char *value,
                       struct reporter *r)
{
    const char *yes = s->kind == K_ONOFF ? "on" : "true";
    const char *no = s->kind == K_ONOFF ? "off" : "false";
    if (strcasecmp(value, yes) == 0)
        *(bool *)field_of(c, s) = true;
    else if (strcasecmp(value, no) == 0)
        *(bool *)field_of(c, s) = false;
    else {
        report(r, SEV_ERROR, "'%.*s' is not %s or %s", VALUE_ECHO_MAX, value, yes, no);
        return;
    }
    mark_set(c, s, true);
}

static void apply_string(struct config *c, const struct setting *s, const char *value,
                         struct reporter *r)
{
    size_t len = strlen(value);
    if (len >= s->size) {
        report(r, SEV_ERROR, "'%.*s...' is too long (at most %zu bytes)", 40, value,
               s->size - 1);
        return;
    }
    if ((int64_t)len < s->min) {
        report(r, SEV_ERROR, "an empty value is not allowed");
        return;
    }
    memcpy(field_of(c, s), value, len + 1);
    mark_set(c, s, len > 0);
}

/* "IPv4:PORT" or "[IPv6]:PORT": address literals only (a server binds what
 * it is told; names are not resolved) and a port 1..65535. */
static void apply_hostport(struct config *c, const struct setting *s, const char *value,
                           struct reporter *r)
{
    struct config_hostport *hp = field_of(c, s);
    const char *colon = strrchr(value, ':');
    char host[sizeof hp->host];
    size_t hlen = colon ? (size_t)(colon - value) : 0;
    bool v6 = hlen >= 2 && value[0] == '[' && value[hlen - 1] == ']';
    const char *h = v6 ? value + 1 : value;
    size_t n = v6 ? hlen - 2 : hlen;
    uint8_t addr[16];
    char *end = NULL;
    long port = colon ? strtol(colon + 1, &end, 10) : 0;
    if (!colon || n == 0 || n >= sizeof host || !end || *end != '\0' || end == colon + 1 ||
        port < 1 || port > 65535) {
        report(r, SEV_ERROR, "'%s' is not IP:PORT (an address literal, [..] for IPv6, and a "
               "port 1-65535)", value);
        return;
    }
    memcpy(host, h, n);
    host[n] = '\0';
    if (inet_pton(v6 ? AF_INET6 : AF_INET, host, addr) != 1) {
        report(r, SEV_ERROR, "'%s' is not an IP%s address literal", host, v6 ? "v6" : "v4");
        return;
    }
    memcpy(hp->host, host, n + 1);
    hp->port = (int32_t)port;
}

struct fourlw_acc {
    char list[sizeof(((struct config *)0)->four_letter_words)];
    bool all;
    struct reporter *r;
};

static bool add_4lw(const char *w, size_t n, const void *ctx)
{
    struct fourlw_acc *acc = (struct fourlw_acc *)ctx;
    char word[5];
    if (n == 1 && w[0] == '*') {
        acc->all = true; /* ZooKeeper stops reading the list at "*" */
        return true;
    }
    if (!is_known_4lw(w, n)) {
        report(acc->r, SEV_WARNING, "unknown four-letter word '%.*s' ignored", (int)n, w);
        return false;
    }
    memcpy(word, w, 4);
    word[4] = '\0';
    if (each_word(acc->list, word_matches, word))
        return false; /* listed twice */
    size_t used = strlen(acc->list);
    assert(used + 6 <= sizeof acc->list); /* 18 known words * 5 bytes fit */
    snprintf(acc->list + used, sizeof acc->list - used, "%s%s", used ? "," : "", word);
    return false;
}

/* Stores the whitelist normalised ("ruok,stat" or "*"), keeping only known words.
 * srvr (and isro in read-only mode) are allowed regardless: see config_4lw_allowed. */
static void apply_4lw(struct config *c, const struct setting *s, const char *value,
                      struct reporter *r)
{
    struct fourlw_acc acc = { .list = "", .all = false, .r = r };
    each_word(value, add_4lw, &acc);
    assert(s->size == sizeof acc.list);
    snprintf(field_of(c, s), s->size, "%s", acc.all ? "*" : acc.list);
}

static bool is_base64(const char *s)
{
    size_t n = strlen(s), pad = 0;
    if (n == 0 || n % 4 != 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        bool alnum = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
                     (ch >= '0' && ch <= '9');
        if (ch == '=')
            pad++;
        else if (pad > 0 || !(alnum || ch == '+' || ch == '/'))
            return false;
    }
    return pad <= 2;
}

/* DigestAuthenticationProvider compares "user:" + base64(SHA-1("user:password"))
 * with this string, so anything else could never match. Empty = no super user. */
static void apply_digest(struct config *c, const struct setting *s, const char *value,
                         struct reporter *r)
{
    const char *colon = strchr(value, ':');
    if (*value != '\0' && (colon == NULL || colon == value || !is_base64(colon + 1))) {
        report(r, SEV_ERROR, "'%.*s' is not user:base64-digest", VALUE_ECHO_MAX, value);
        return;
    }
    if (strlen(value) >= s->size) {
        report(r, SEV_ERROR, "value is too long (at most %zu bytes)", s->size - 1);
        return;
    }
    if (colon != NULL && strlen(colon + 1) != 28)
        report(r, SEV_WARNING, "digest is not a SHA-1 (28 base64 characters); no password "
                               "will match it");
    memcpy(field_of(c, s), value, strlen(value) + 1);
}

static void apply_log_level(struct config *c, const struct setting *s, const char *value,
                            struct reporter *r)
{
    for (size_t i = 0; i < COUNT(log_level_names); i++) {
        if (strcasecmp(value, log_level_names[i]) == 0) {
            *(int32_t *)field_of(c, s) = (int32_t)i;
            return;
        }
    }
    report(r, SEV_ERROR, "'%.*s' is not a log level (error, warn, info, debug)", VALUE_ECHO_MAX,
           value);
}

struct auth_schemes {
    struct reporter *r;
    uint32_t mask;
};

static bool add_auth_scheme(const char *w, size_t n, const void *ctx)
{
    struct auth_schemes *a = (struct auth_schemes *)ctx;
    if (n == 6 && memcmp(w, "digest", 6) == 0)
        a->mask |= CONFIG_AUTH_DIGEST;
    else if (n == 2 && memcmp(w, "ip", 2) == 0)
        a->mask |= CONFIG_AUTH_IP;
    else if (n == 4 && memcmp(w, "sasl", 4) == 0)
        a->mask |= CONFIG_AUTH_SASL; /* config_finish wants its provider and users */
    else if (n == 4 && memcmp(w, "x509", 4) == 0)
        a->mask |= CONFIG_AUTH_X509; /* config_finish: only with the provider */
    else
        report(a->r, SEV_ERROR, "authentication scheme '%.*s' is not available (larchd "
                                "authenticates digest, ip, sasl and x509)", (int)(n > 64 ? 64 : n), w);
    return false;
}

/* ZooKeeper's AuthenticationHelper: comma-separated, blanks trimmed, every
 * scheme one an authentication provider serves. */
static void apply_auth_schemes(struct config *c, const struct setting *s, const char *value,
                               struct reporter *r)
{
    struct auth_schemes a = { .r = r, .mask = 0 };
    int errors = r->errors;
    (void)each_word(value, add_auth_scheme, &a);
    if (r->errors != errors)
        return;
    apply_string(c, s, value, r);
    if (r->errors == errors)
        c->enforce_auth_mask = a.mask;
}

/* A password: like a string, but never quoted back. */
static void apply_secret(struct config *c, const struct setting *s, const char *value,
                         struct reporter *r)
{
    size_t len = strlen(value);
    if (len >= s->size) {
        report(r, SEV_ERROR, "value is too long (at most %zu bytes)", s->size - 1);
        return;
    }
    memcpy(field_of(c, s), value, len + 1);
}

/* ZooKeeper's KeyStoreFileType.fromPropertyValue: a name in any case, empty
 * for "from the file name". Java's own formats cannot be read here. */
static void apply_store_type(struct config *c, const struct setting *s, const char *value,
                             struct reporter *r)
{
    int32_t *type = field_of(c, s);
    if (value[0] == '\0')
        *type = CONFIG_STORE_UNSET;
    else if (strcasecmp(value, "PEM") == 0)
        *type = CONFIG_STORE_PEM;
    else if (strcasecmp(value, "PKCS12") == 0)
        *type = CONFIG_STORE_PKCS12;
    else if (strcasecmp(value, "JKS") == 0)
        report(r, SEV_ERROR, "larchd cannot read Java keystores (JKS): convert it to PKCS12 "
                             "(keytool -importkeystore -srckeystore F.jks -destkeystore F.p12 "
                             "-deststoretype PKCS12) or PEM");
    else if (strcasecmp(value, "BCFKS") == 0)
        report(r, SEV_ERROR, "larchd cannot read BouncyCastle FIPS keystores (BCFKS): convert it "
                             "to PKCS12 or PEM");
    else
        report(r, SEV_ERROR, "'%.*s' is not a store type (PEM, PKCS12)", VALUE_ECHO_MAX, value);
}

/* One protocol name as Java's SSLEngine takes it (case matters there). */
static uint32_t tls_protocol_bit(const char *w, size_t n)
{
    if (n == 7 && memcmp(w, "TLSv1.2", 7) == 0)
        return CONFIG_TLS_1_2;
    if (n == 7 && memcmp(w, "TLSv1.3", 7) == 0)
        return CONFIG_TLS_1_3;
    return 0;
}

static void report_protocol(struct reporter *r, const char *w, size_t n)
{
    bool old = (n == 5 && memcmp(w, "TLSv1", 5) == 0) || (n == 7 && memcmp(w, "TLSv1.1", 7) == 0);
    report(r, SEV_ERROR, "'%.*s' %s (larchd serves TLSv1.2 and TLSv1.3)",
           (int)(n > VALUE_ECHO_MAX ? VALUE_ECHO_MAX : n), w,
           old ? "is disabled in OpenSSL 3 and Java alike" : "is not a TLS protocol");
}

static void apply_tls_protocol(struct config *c, const struct setting *s, const char *value,
                               struct reporter *r)
{
    uint32_t bit = tls_protocol_bit(value, strlen(value));
    if (bit == 0)
        report_protocol(r, value, strlen(value));
    else
        *(uint32_t *)field_of(c, s) = bit;
}

struct tls_protocols {
    struct reporter *r;
    uint32_t bits;
};

static bool add_tls_protocol(const char *w, size_t n, const void *ctx)
{
    struct tls_protocols *p = (struct tls_protocols *)ctx;
    uint32_t bit = tls_protocol_bit(w, n);
    if (bit == 0)
        report_protocol(p->r, w, n);
    p->bits |= bit;
    return false;
}

/* ssl.enabledProtocols: comma-separated, blanks around names ignored. */
static void apply_tls_protocols(struct config *c, const struct setting *s, const char *value,
                                struct reporter *r)
{
    struct tls_protocols p = { .r = r, .bits = 0 };
    int errors = r->errors;
    (void)each_word(value, add_tls_protocol, &p);
    if (r->errors != errors)
        return;
    if (p.bits == 0)
        report(r, SEV_ERROR, "names no protocol (TLSv1.2, TLSv1.3)");
    else
        *(uint32_t *)field_of(c, s) = p.bits;
}

/* X509Util.ClientAuth.fromPropertyValue: a name in any case; empty: need. */
static void apply_client_auth(struct config *c, const struct setting *s, const char *value,
                              struct reporter *r)
{
    int32_t *auth = field_of(c, s);
    if (value[0] == '\0' || strcasecmp(value, "need") == 0)
        *auth = CONFIG_CLIENT_AUTH_NEED;
    else if (strcasecmp(value, "want") == 0)
        *auth = CONFIG_CLIENT_AUTH_WANT;
    else if (strcasecmp(value, "none") == 0)
        *auth = CONFIG_CLIENT_AUTH_NONE;
    else
        report(r, SEV_ERROR, "'%.*s' is not none, want or need", VALUE_ECHO_MAX, value);
}

#define METRICS_PROMETHEUS "org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider"
#define METRICS_DEFAULT "org.apache.zookeeper.metrics.impl.DefaultMetricsProvider"

/* ZooKeeper's two providers: Prometheus's serves /metrics, the default
 * serves nothing but the 4lw and the AdminServer, as here. */
static void apply_metrics_class(struct config *c, const char *value, struct reporter *r)
{
    if (strcmp(value, METRICS_PROMETHEUS) == 0)
        c->metrics_prometheus = true;
    else if (strcmp(value, METRICS_DEFAULT) == 0)
        c->metrics_prometheus = false;
    else
        report(r, SEV_ERROR, "'%.*s' cannot be honoured: larchd serves " METRICS_PROMETHEUS
                             " or " METRICS_DEFAULT, VALUE_ECHO_MAX, value);
}

/* admin.commandURL: the path the AdminServer serves under. ZooKeeper's
 * Jetty maps everything under it; larchd asks for '/' then URL-safe characters (RFC
 * 3986's unreserved ones and '/'), no '/' at the end: the value goes into
 * the HTML of the command list unescaped. */
static void apply_url_path(struct config *c, const struct setting *s, const char *value,
                           struct reporter *r)
{
    size_t n = strlen(value);
    bool ok = n >= 2 && value[0] == '/' && value[n - 1] != '/';
    for (size_t i = 0; ok && i < n; i++)
        ok = isalnum((unsigned char)value[i]) || strchr("/-._~", value[i]) != NULL;
    if (!ok) {
        report(r, SEV_ERROR, "'%.*s' is not a URL path larchd serves ('/' then letters, "
                             "digits, '-', '.', '_', '~' or '/', not ending in '/')",
               VALUE_ECHO_MAX, value);
        return;
    }
    apply_string(c, s, value, r);
}

/* Applies one value to the field a row names; problems go to r (whose prefix
 * already says where and which key). */
static void apply_setting(struct config *c, const struct setting *s, const char *value,
                          struct reporter *r)
{
    switch (s->kind) {
    case K_INT32:
    case K_INT64:
    case K_TICKS: apply_int(c, s, value, r); break;
    case K_PORT: apply_port(c, s, value, r); break;
    case K_OPT_PORT:
        if (strcmp(value, "-1") == 0)
            *(int32_t *)field_of(c, s) = 0;
        else
            apply_port(c, s, value, r);
        break;
    case K_SESSION_TIMEOUT: apply_session_timeout(c, s, value, r); break;
    case K_SNAP_RETAIN: apply_snap_retain(c, s, value, r); break;
    case K_BOOL:
    case K_ONOFF: apply_bool(c, s, value, r); break;
    case K_STRING: apply_string(c, s, value, r); break;
    case K_SECRET: apply_secret(c, s, value, r); break;
    case K_STORE_TYPE: apply_store_type(c, s, value, r); break;
    case K_TLS_PROTOCOL: apply_tls_protocol(c, s, value, r); break;
    case K_TLS_PROTOCOLS: apply_tls_protocols(c, s, value, r); break;
    case K_CLIENT_AUTH: apply_client_auth(c, s, value, r); break;
    case K_FOURLW: apply_4lw(c, s, value, r); break;
    case K_DIGEST: apply_digest(c, s, value, r); break;
    case K_LOGLEVEL: apply_log_level(c, s, value, r); break;
    case K_HOSTPORT: apply_hostport(c, s, value, r); break;
    case K_AUTH_SCHEMES: apply_auth_schemes(c, s, value, r); break;
    case K_METRICS_CLASS: apply_metrics_class(c, value, r); break;
    case K_URL_PATH: apply_url_path(c, s, value, r); break;
    case K_META_CONFIG:
    case K_META_HELP:
    case K_META_VERSION: break; /* handled by config_from_args */
    }
}

/* ------------------------------------------------------------------ defaults */

void config_defaults(struct config *c)
{
    assert(c != NULL);
    memset(c, 0, sizeof *c);
    c->tick_time_ms = 2000;
    c->client_port = 2181;
    snprintf(c->client_port_address, sizeof c->client_port_address, "127.0.0.1");
    /* ZooKeeper binds secureClientPort on every interface unless told */
    snprintf(c->secure_client_port_address, sizeof c->secure_client_port_address, "0.0.0.0");
    c->tls.protocol = CONFIG_TLS_1_3;   /* X509Util.DEFAULT_PROTOCOL on Java 11+ (3.9.2 on) */
    c->tls.client_auth = CONFIG_CLIENT_AUTH_NEED;
    c->tls.hostname_verification = true;
    c->quorum_tls.protocol = CONFIG_TLS_1_3;
    c->quorum_tls.client_auth = CONFIG_CLIENT_AUTH_NEED;
    c->quorum_tls.hostname_verification = true;
    c->quorum_tls.client_hostname_verification = true; /* QuorumX509Util's default */
    c->min_session_timeout_ms = -1; /* derived by config_finish */
    c->max_session_timeout_ms = -1;
    c->max_client_cnxns = 60;
    snprintf(c->four_letter_words, sizeof c->four_letter_words, "srvr");
    c->read_only_mode = false;
    c->extended_types = true;
    c->max_buffer_bytes = 0xfffff;
    c->snap_count = 100000;
    c->commit_log_count = 500;
    c->prealloc_kb = 65536; /* ZooKeeper's preAllocSize: 64 MiB */
    c->autopurge_snap_retain = 3;
    c->autopurge_interval_h = 0;
    c->container_check_ms = 60000;
    c->zxid_counter_limit = 4294967294LL;
    snprintf(c->metrics_http_host, sizeof c->metrics_http_host, "0.0.0.0");
    c->metrics_http_port = 7000;
    c->admin_enabled = false; /* ZooKeeper's is true: see config_usage */
    snprintf(c->admin_host, sizeof c->admin_host, "0.0.0.0");
    c->admin_port = 8080;
    snprintf(c->admin_command_url, sizeof c->admin_command_url, "/commands");
    c->admin_idle_timeout_ms = 30000;
    c->global_outstanding_limit = 1000;
    c->max_cnxns = 0;
    c->sessionless_timeout_ms = 10000;
    c->max_buffered_bytes = (int64_t)256 << 20;
    c->conn_max_buffer_bytes = 0; /* derived from jute.maxbuffer by config_finish */
    c->conn_out_high_water_bytes = 1 << 20;
    c->conn_max_unsent_bytes = 16 << 20;
    /* One core is the sequencer's; the rest serve reads (DESIGN.md threads). */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    long workers = cpus > 1 ? cpus - 1 : 1;
    c->workers = (int32_t)(workers > WORKERS_MAX ? WORKERS_MAX : workers);
    c->log_level = 2;
    c->dpdk_cores = 1;
    c->standalone_enabled = true;
    snprintf(c->sasl_section, sizeof c->sasl_section, "Server");
}

/* ------------------------------------------------------------------ zoo.cfg text */

struct cursor {
    const char *p, *end;
    int line; /* number of the next physical line */
};

/* Yields the next physical line (without its \n, \r or \r\n terminator). */
static bool next_physical_line(struct cursor *t, const char **start, size_t *len, int *lineno)
{
    if (t->p >= t->end)
        return false;
    const char *s = t->p;
    while (t->p < t->end && *t->p != '\n' && *t->p != '\r')
        t->p++;
    *start = s;
    *len = (size_t)(t->p - s);
    if (t->p < t->end && *t->p++ == '\r' && t->p < t->end && *t->p == '\n')
        t->p++; /* \r\n is one terminator */
    *lineno = t->line++;
    return true;
}

struct logical_line {
    char buf[LINE_BYTES_MAX];
    size_t len;
    int first_line;
    bool too_long;
    char key[LINE_BYTES_MAX]; /* unescaped key and value of buf */
    char value[LINE_BYTES_MAX];
};

/* Joins physical lines the way java.util.Properties does: leading blanks of
 * every physical line dropped; '#'/'!' lines and blank lines skipped (only at
 * the start of a logical line); an odd number of trailing backslashes
 * continues the line (the last backslash is dropped); a blank continuation
 * line ends it. Escapes other than the continuation stay for unescape(). */
static bool read_logical_line(struct cursor *t, struct logical_line *ll)
{
    const char *s;
    size_t n;
    int lineno;
    bool in_line = false;

    ll->len = 0;
    ll->too_long = false;
    while (next_physical_line(t, &s, &n, &lineno)) {
        while (n > 0 && is_blank(*s)) {
            s++;
            n--;
        }
        if (!in_line) {
            if (n == 0 || *s == '#' || *s == '!')
                continue;
            in_line = true;
            ll->first_line = lineno;
        } else if (n == 0) {
            return true;
        }
        size_t slashes = 0;
        while (slashes < n && s[n - 1 - slashes] == '\\')
            slashes++;
        bool continues = slashes % 2 == 1;
        if (continues)
            n--;
        if (ll->len + n >= sizeof ll->buf)
            ll->too_long = true;
        else {
            memcpy(ll->buf + ll->len, s, n);
            ll->len += n;
        }
        if (!continues)
            break;
    }
    ll->buf[ll->len] = '\0';
    return in_line;
}

/* Key ends at the first unescaped '=', ':' or blank; then blanks, at most one
 * '='/':' and blanks again precede the value (Properties.load). */
static void split_key_value(const char *line, size_t len, size_t *key_len, size_t *value_start)
{
    size_t i = 0, v;
    bool escaped = false, has_sep = false;
    for (; i < len; i++) {
        char ch = line[i];
        if (!escaped && (ch == '=' || ch == ':' || is_blank(ch))) {
            has_sep = ch == '=' || ch == ':';
            break;
        }
        escaped = ch == '\\' ? !escaped : false;
    }
    *key_len = i;
    for (v = i < len ? i + 1 : len; v < len; v++) {
        if (is_blank(line[v]))
            continue;
        if (!has_sep && (line[v] == '=' || line[v] == ':'))
            has_sep = true;
        else
            break;
    }
    *value_start = v;
}

static int hex_value(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* Writes code point cp (< 0x10000) as UTF-8; returns bytes written. */
static size_t put_utf8(char *out, unsigned cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    out[0] = (char)(0xe0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[2] = (char)(0x80 | (cp & 0x3f));
    return 3;
}

/* Resolves Properties escapes (\t \n \r \f \uXXXX, \x -> x) of in[0..len) into
 * out (NUL-terminated; never longer than the input). False on a bad \u. */
static bool unescape(const char *in, size_t len, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        char ch = in[i];
        if (ch != '\\') {
            out[o++] = ch;
            continue;
        }
        if (++i == len)
            break; /* a lone trailing backslash means nothing */
        ch = in[i];
        if (ch == 'u') {
            unsigned cp = 0;
            for (int k = 0; k < 4; k++) {
                int h = i + 1 < len ? hex_value(in[i + 1]) : -1;
                if (h < 0)
                    return false;
                cp = cp * 16 + (unsigned)h;
                i++;
            }
            o += put_utf8(out + o, cp);
            continue;
        }
        out[o++] = ch == 't' ? '\t' : ch == 'n' ? '\n' : ch == 'r' ? '\r' : ch == 'f' ? '\f' : ch;
    }
    out[o] = '\0';
    return true;
}

static const struct setting *find_key(const char *key)
{
    size_t prefix = strlen(ZK_PREFIX);
    bool prefixed = strncmp(key, ZK_PREFIX, prefix) == 0;
    for (size_t i = 0; i < COUNT(key_settings); i++) {
        const struct setting *s = &key_settings[i];
        if (strcmp(s->name, key) == 0 ||
            (prefixed && s->sysprop && strcmp(s->name, key + prefix) == 0))
            return s;
    }
    return NULL;
}

static bool key_matches(const char *key, const char *pattern)
{
    size_t n = strlen(pattern);
    return pattern[n - 1] == '.' ? strncmp(key, pattern, n) == 0 : strcmp(key, pattern) == 0;
}

static bool value_allowed(const char *value, const char *allowed)
{
    for (const char *p = allowed; p != NULL && *p != '\0';) {
        size_t n = strcspn(p, "|");
        if (strlen(value) == n && strncasecmp(value, p, n) == 0)
            return true;
        p += n + (p[n] == '|');
    }
    return false;
}

/* Whether key is one of unhonoured_keys; if so, a value asking for what
 * larchd lacks has been reported as an error. */
static bool check_unhonoured(const char *key, const char *value, struct reporter *r)
{
    const char *bare = strncmp(key, ZK_PREFIX, strlen(ZK_PREFIX)) == 0 ? key + strlen(ZK_PREFIX)
                                                                      : key;
    for (size_t i = 0; i < COUNT(unhonoured_keys); i++) {
        const struct unhonoured_key *u = &unhonoured_keys[i];
        if (!key_matches(bare, u->key))
            continue;
        if (u->lacks == NULL)
            return false;
        if (u->allowed == NULL)
            report(r, SEV_ERROR, "key '%.*s' cannot be honoured: %s (remove the line to run "
                                 "without it)", VALUE_ECHO_MAX, key, u->lacks);
        else if (!value_allowed(value, u->allowed))
            report(r, SEV_ERROR, "%.*s='%.*s' cannot be honoured: %s (accepted: %s)",
                   VALUE_ECHO_MAX, key, VALUE_ECHO_MAX, value, u->lacks, u->allowed);
        return true;
    }
    return false;
}

static bool is_ignored_key(const char *key)
{
    if (strncmp(key, ZK_PREFIX, strlen(ZK_PREFIX)) == 0)
        key += strlen(ZK_PREFIX);
    for (size_t i = 0; i < COUNT(ignored_keys); i++)
        if (key_matches(key, ignored_keys[i]))
            return true;
    return false;
}

/* Keys are case-sensitive in ZooKeeper; a key that differs only in case is
 * almost certainly a typo worth pointing at. */
static void warn_unused_key(const char *key, struct reporter *r)
{
    if (is_ignored_key(key)) {
        report(r, SEV_WARNING, "key '%.*s' is not used by larchd (standalone)", VALUE_ECHO_MAX,
               key);
        return;
    }
    for (size_t i = 0; i < COUNT(key_settings); i++) {
        if (strcasecmp(key_settings[i].name, key) == 0) {
            report(r, SEV_WARNING, "unknown key '%.*s' ignored (keys are case-sensitive: did you "
                                   "mean '%s'?)", VALUE_ECHO_MAX, key, key_settings[i].name);
            return;
        }
    }
    report(r, SEV_WARNING, "unknown key '%.*s' ignored", VALUE_ECHO_MAX, key);
}

/* ------------------------------------------------------------------ server.N */

#define SERVER_FORMAT "host:quorumPort:electionPort[:participant|observer][;[clientAddress:]clientPort]"
#define SERVER_ID_MAX 255

/* A port as ZooKeeper's QuorumServer takes it: decimal, 1..65535. */
static bool parse_port_text(const char *text, size_t len, int32_t *out)
{
    char buf[8];
    int64_t v;
    if (len == 0 || len >= sizeof buf)
        return false;
    memcpy(buf, text, len);
    buf[len] = '\0';
    if (parse_decimal(buf, &v) != NUM_OK || v < 1 || v > 65535)
        return false;
    *out = (int32_t)v;
    return true;
}

/* Copies text[0, len) into a NUL-terminated field of cap bytes. */
static bool copy_field(char *out, size_t cap, const char *text, size_t len)
{
    if (len == 0 || len >= cap)
        return false;
    memcpy(out, text, len);
    out[len] = '\0';
    return true;
}

/* Splits "host" or "[v6]" off the front of p; *rest points after it. */
static bool take_host(const char *p, char *host, size_t cap, const char **rest)
{
    if (*p == '[') {
        const char *close = strchr(p, ']');
        if (close == NULL || !copy_field(host, cap, p + 1, (size_t)(close - p - 1)))
            return false;
        *rest = close + 1;
        return true;
    }
    size_t n = strcspn(p, ":");
    if (!copy_field(host, cap, p, n))
        return false;
    *rest = p + n;
    return true;
}

/* "host:quorumPort:electionPort[:participant|observer]" */
static bool parse_server_address(const char *p, struct config_server *sv)
{
    const char *rest;
    if (!take_host(p, sv->host, sizeof sv->host, &rest) || *rest++ != ':')
        return false;
    size_t n = strcspn(rest, ":");
    if (!parse_port_text(rest, n, &sv->quorum_port) || rest[n] != ':')
        return false;
    rest += n + 1;
    n = strcspn(rest, ":");
    if (!parse_port_text(rest, n, &sv->election_port))
        return false;
    rest += n;
    if (*rest == '\0')
        return true;
    rest++;
    /* QuorumServer lower-cases the role before comparing it */
    if (strcasecmp(rest, "observer") == 0)
        sv->observer = true;
    else if (strcasecmp(rest, "participant") != 0)
        return false;
    return true;
}

/* "[clientAddress:]clientPort" after the ';'. */
static bool parse_server_client(const char *p, struct config_server *sv)
{
    const char *colon = strrchr(p, ':');
    if (colon == NULL)
        return parse_port_text(p, strlen(p), &sv->client_port);
    const char *rest;
    char host[sizeof sv->client_address];
    if (!take_host(p, host, sizeof host, &rest) || rest != colon)
        return false;
    memcpy(sv->client_address, host, sizeof host);
    return parse_port_text(colon + 1, strlen(colon + 1), &sv->client_port);
}

static struct config_server *find_server(struct config *c, int64_t id)
{
    for (uint32_t i = 0; i < c->n_servers; i++)
        if (c->servers[i].id == id)
            return &c->servers[i];
    return NULL;
}

int config_parse_server(const char *id_text, const char *value, struct config_server *out,
                        char *msg, size_t msg_len)
{
    assert(id_text != NULL && value != NULL && out != NULL);
    assert(msg != NULL || msg_len == 0);
    int64_t id;
    enum num_result res = parse_decimal(id_text, &id);
    memset(out, 0, sizeof *out);
    if (res != NUM_OK || id_text[0] == '+' || id < 1 || id > SERVER_ID_MAX) {
        snprintf(msg, msg_len, "'%.*s' is not a server id (1-%d)", VALUE_ECHO_MAX, id_text,
                 SERVER_ID_MAX);
        return CONFIG_SERVER_BAD_ID;
    }
    out->id = id;
    if (strchr(value, '|') != NULL) {
        snprintf(msg, msg_len,
                 "several addresses for one server (multiAddress) are not supported");
        return CONFIG_SERVER_BAD_VALUE;
    }
    /* host 255 + client address 255 + ports and role: longer is malformed */
    char buf[CONFIG_SERVER_TEXT_MAX];
    size_t len = strlen(value);
    char *semi = NULL;
    if (len < sizeof buf) {
        memcpy(buf, value, len + 1);
        semi = strchr(buf, ';');
    }
    if (semi != NULL)
        *semi = '\0';
    if (len >= sizeof buf || !parse_server_address(trim_java(buf), out) ||
        (semi != NULL && !parse_server_client(trim_java(semi + 1), out))) {
        snprintf(msg, msg_len, "'%.*s' is not " SERVER_FORMAT, VALUE_ECHO_MAX, value);
        return CONFIG_SERVER_BAD_VALUE;
    }
    /* QuorumServer.initializeWithAddressString refuses one port for both */
    if (out->quorum_port == out->election_port) {
        snprintf(msg, msg_len, "'%.*s': the quorum and election ports must differ",
                 VALUE_ECHO_MAX, value);
        return CONFIG_SERVER_BAD_VALUE;
    }
    assert(out->quorum_port > 0 && out->election_port > 0);
    return CONFIG_SERVER_OK;
}

/* server.N=...: one member of the ensemble, kept with where it was given.
 * The id is judged first, then whether it repeats, then the address. */
static void parse_server_line(struct config *c, const char *key, char *value, struct reporter *r)
{
    char msg[CONFIG_MSG_MAX];
    struct config_server sv;
    int rc = config_parse_server(key + strlen("server."), value, &sv, msg, sizeof msg);
    if (rc == CONFIG_SERVER_BAD_ID) {
        report(r, SEV_ERROR, "%s", msg);
        return;
    }
    const struct config_server *dup = find_server(c, sv.id);
    if (dup != NULL) {
        report(r, SEV_ERROR, "given twice (first at %s)", dup->where);
        return;
    }
    if (c->n_servers == CONFIG_SERVERS_MAX) {
        report(r, SEV_ERROR, "more than %d servers", CONFIG_SERVERS_MAX);
        return;
    }
    if (rc != CONFIG_SERVER_OK) {
        report(r, SEV_ERROR, "%s", msg);
        return;
    }
    snprintf(sv.where, sizeof sv.where, "%s:%d", r->source, r->line);
    c->servers[c->n_servers++] = sv;
}

/* Keys handled here rather than by a table row. True when key was one. */
static bool apply_ensemble_key(struct config *c, const char *key, char *value,
                               struct reporter *r)
{
    if (strncmp(key, "server.", strlen("server.")) == 0) {
        r->what = key;
        parse_server_line(c, key, value, r);
        r->what = NULL;
        return true;
    }
    if (strncmp(key, "group.", strlen("group.")) == 0 ||
        strncmp(key, "weight.", strlen("weight.")) == 0) {
        report(r, SEV_ERROR, "'%.*s': hierarchical quorums (group.N, weight.N) are not "
                             "supported: larchd counts a majority of participants",
               VALUE_ECHO_MAX, key);
        return true;
    }
    if (r->dynamic_file) {
        /* ZooKeeper's dynamic file carries the membership and its version */
        if (strcmp(key, "version") != 0)
            report(r, SEV_ERROR, "'%.*s' does not belong in a dynamic configuration file "
                                 "(server.N and version lines only)", VALUE_ECHO_MAX, key);
        return true;
    }
    return false;
}

#define X509_PROVIDER AUTH_CLASS "X509AuthenticationProvider"
#define PROVIDERS_SERVED AUTH_CLASS "DigestAuthenticationProvider|" AUTH_CLASS \
    "IPAuthenticationProvider|" CONFIG_SASL_PROVIDER "|" X509_PROVIDER

/* Sets key's value in a family's list: a key given again replaces its
 * value, as the system property ZooKeeper makes of it would. */
static void keyed_put(struct config_keyed *list, uint32_t *n, const char *key, const char *value,
                      struct reporter *r)
{
    if (strlen(key) >= sizeof list->key || strlen(value) >= sizeof list->value) {
        report(r, SEV_ERROR, "too long (keys of at most %zu bytes, values of %zu)",
               sizeof list->key - 1, sizeof list->value - 1);
        return;
    }
    uint32_t i = 0;
    while (i < *n && strcmp(list[i].key, key) != 0)
        i++;
    if (i == CONFIG_KEYED_MAX) {
        report(r, SEV_ERROR, "more than %d such lines", CONFIG_KEYED_MAX);
        return;
    }
    snprintf(list[i].key, sizeof list[i].key, "%s", key);
    snprintf(list[i].value, sizeof list[i].value, "%s", value);
    if (i == *n)
        (*n)++;
}

/* authProvider.N and superUser[.X]: ZooKeeper loads every authProvider.N
 * class (ProviderRegistry) and takes every superUser[.X] value as a SASL
 * super user (ZooKeeperServer.isSaslSuperUser). True when key was one. */
static bool apply_keyed_family(struct config *c, const char *key, const char *value,
                               struct reporter *r)
{
    const char *bare = strncmp(key, ZK_PREFIX, strlen(ZK_PREFIX)) == 0 ? key + strlen(ZK_PREFIX)
                                                                      : key;
    bool provider = strncmp(bare, "authProvider.", strlen("authProvider.")) == 0;
    bool super = strcmp(bare, "superUser") == 0 ||
                 strncmp(bare, "superUser.", strlen("superUser.")) == 0;
    if (!provider && !super)
        return false;
    if (provider && !value_allowed(value, PROVIDERS_SERVED)) {
        report(r, SEV_ERROR, "%.*s='%.*s' cannot be honoured: %s (accepted: %s)", VALUE_ECHO_MAX,
               key, VALUE_ECHO_MAX, value,
               "larchd's authentication providers are digest and ip, built in, sasl and x509",
               PROVIDERS_SERVED);
        return true;
    }
    r->what = key;
    /* ZooKeeper's ProviderRegistry registers the class under its scheme */
    if (provider && strcmp(value, X509_PROVIDER) == 0)
        c->x509_provider_line = true;
    if (provider)
        keyed_put(c->auth_providers, &c->n_auth_providers, bare, value, r);
    else
        keyed_put(c->sasl_super_users, &c->n_sasl_super_users, bare, value, r);
    r->what = NULL;
    return true;
}

/* Records where a key whose files are read later was set ("zoo.cfg:7:
 * ssl.keyStore.location", the key as written), and that an ssl.* key was. */
static void note_where(struct config *c, const struct setting *s, const char *key,
                       const struct reporter *r)
{
    if (strncmp(s->name, "ssl.quorum.", 11) == 0)
        c->quorum_tls.any_set = true;
    else if (strncmp(s->name, "ssl.", 4) == 0)
        c->tls.any_set = true;
    if (s->where_offset == NO_SET_FLAG)
        return;
    char *where = (char *)c + s->where_offset;
    if (r->line > 0)
        snprintf(where, CONFIG_WHERE_MAX, "%s:%d: %.*s", r->source, r->line, VALUE_ECHO_MAX, key);
    else
        snprintf(where, CONFIG_WHERE_MAX, "%s: %.*s", r->source, VALUE_ECHO_MAX, key);
}

/* Parses one logical line into key and value and applies it. */
static void apply_line(struct config *c, struct logical_line *ll, struct reporter *r)
{
    size_t key_len, value_start;

    if (memchr(ll->buf, '\0', ll->len) != NULL) {
        report(r, SEV_ERROR, "line contains a NUL byte");
        return;
    }
    split_key_value(ll->buf, ll->len, &key_len, &value_start);
    if (!unescape(ll->buf, key_len, ll->key) ||
        !unescape(ll->buf + value_start, ll->len - value_start, ll->value)) {
        report(r, SEV_ERROR, "malformed \\uxxxx escape");
        return;
    }
    /* QuorumPeerConfig trims both key and value before using them. */
    const char *key = trim_java(ll->key);
    char *value = trim_java(ll->value);
    if (apply_ensemble_key(c, key, value, r))
        return;
    if (apply_keyed_family(c, key, value, r))
        return;
    /* a key larchd serves first: sasl.serverconfig and the ssl.* keys it
     * takes are of families it refuses otherwise */
    const struct setting *s = find_key(key);
    if (s == NULL) {
        if (!check_unhonoured(key, value, r))
            warn_unused_key(key, r);
        return;
    }
    int errors = r->errors;
    r->what = key;
    apply_setting(c, s, value, r);
    r->what = NULL;
    if (r->errors == errors)
        note_where(c, s, key, r);
}

/* Applies text's lines to c, reporting through r (which the caller set up and
 * reads afterwards: its error count and what the first error was). */
static int parse_text(struct config *c, const char *text, size_t len, struct reporter *r)
{
    assert(c != NULL && r != NULL);
    assert(text != NULL || len == 0);
    struct cursor t = { .p = text, .end = text + len, .line = 1 };
    static_assert(LINE_BYTES_MAX > sizeof c->data_dir, "a dataDir line must fit");
    struct logical_line *ll = malloc(sizeof *ll); /* 24 KiB: keep it off the stack */
    if (ll == NULL) {
        r->out_of_memory = true;
        report(r, SEV_ERROR, "out of memory");
        return -1;
    }
    while (read_logical_line(&t, ll)) {
        r->line = ll->first_line;
        if (ll->too_long)
            report(r, SEV_ERROR, "line too long (at most %d bytes)", LINE_BYTES_MAX - 1);
        else
            apply_line(c, ll, r);
    }
    free(ll);
    return r->errors > 0 ? -1 : 0;
}

int config_parse_text(struct config *c, const char *text, size_t len, const char *source,
                      config_report_fn fn, void *arg)
{
    struct reporter r = { .fn = fn, .arg = arg, .source = source ? source : "zoo.cfg" };
    return parse_text(c, text, len, &r);
}

int config_parse_members(const char *text, size_t len, const char *source,
                         struct config_server *servers, uint32_t *n_servers,
                         config_report_fn fn, void *arg)
{
    assert(servers != NULL && n_servers != NULL);
    struct reporter r = { .fn = fn, .arg = arg, .source = source ? source : "members",
                          .dynamic_file = true };
    /* only n_servers and servers are touched by dynamic lines: no defaults */
    struct config *c = calloc(1, sizeof *c);
    if (c == NULL) {
        report(&r, SEV_ERROR, "out of memory");
        return CONFIG_MEMBERS_NO_MEMORY;
    }
    int rc = parse_text(c, text, len, &r);
    if (rc == 0) {
        memcpy(servers, c->servers, c->n_servers * sizeof *servers);
        *n_servers = c->n_servers;
    }
    free(c);
    if (rc == 0)
        return 0;
    if (r.out_of_memory)
        return CONFIG_MEMBERS_NO_MEMORY;
    return CONFIG_MEMBERS_REFUSED;
}

/* Reads the whole file (bounded by FILE_BYTES_MAX) into a fresh buffer that the
 * caller frees, NUL-terminated. Reports and returns NULL on failure. */
static char *read_file(const char *path, size_t *len, struct reporter *r)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        report(r, SEV_ERROR, "cannot open: %s", strerror(errno));
        return NULL;
    }
    char *buf = malloc(FILE_BYTES_MAX + 1);
    if (buf == NULL) {
        report(r, SEV_ERROR, "out of memory");
        goto close_file;
    }
    *len = fread(buf, 1, FILE_BYTES_MAX + 1, f);
    if (ferror(f)) {
        report(r, SEV_ERROR, "cannot read: %s", strerror(errno));
        goto free_buf;
    }
    if (*len > FILE_BYTES_MAX) {
        report(r, SEV_ERROR, "larger than %d bytes; not a zoo.cfg?", FILE_BYTES_MAX);
        goto free_buf;
    }
    fclose(f);
    buf[*len] = '\0';
    return buf;
free_buf:
    free(buf);
close_file:
    fclose(f);
    return NULL;
}

char *config_read_file(const char *path, size_t *len, config_report_fn fn, void *arg)
{
    assert(path != NULL && len != NULL);
    struct reporter r = { .fn = fn, .arg = arg, .source = path };
    return read_file(path, len, &r);
}

static int load_file(struct config *c, const char *path, config_report_fn fn, void *arg,
                     bool dynamic_file)
{
    struct reporter r = { .fn = fn, .arg = arg, .source = path, .dynamic_file = dynamic_file };
    size_t len = 0;
    char *text = read_file(path, &len, &r);
    if (text == NULL)
        return -1;
    int rc = parse_text(c, text, len, &r);
    free(text);
    return rc;
}

int config_load(struct config *c, const char *path, config_report_fn fn, void *arg)
{
    assert(c != NULL && path != NULL);
    uint32_t static_servers = c->n_servers;
    int rc = load_file(c, path, fn, arg, false);
    /* ZooKeeper binds every interface unless clientPortAddress says one;
     * only larchd without a zoo.cfg keeps to loopback */
    if (!c->client_port_address_set)
        snprintf(c->client_port_address, sizeof c->client_port_address, "0.0.0.0");
    if (c->dynamic_config_file[0] == '\0')
        return rc;
    static_servers = c->n_servers - static_servers;
    if (load_file(c, c->dynamic_config_file, fn, arg, true) != 0)
        rc = -1;
    if (static_servers > 0 && c->n_servers > static_servers) {
        struct reporter r = { .fn = fn, .arg = arg, .source = path };
        report(&r, SEV_ERROR, "server.N lines both here and in dynamicConfigFile %.*s: "
                              "keep the membership in one place", VALUE_ECHO_MAX,
               c->dynamic_config_file);
        rc = -1;
    }
    return rc;
}

/* ------------------------------------------------------------------ flags */

static const struct setting *find_flag(const char *name, size_t len)
{
    for (size_t i = 0; i < COUNT(flag_settings); i++)
        if (strlen(flag_settings[i].name) == len && memcmp(flag_settings[i].name, name, len) == 0)
            return &flag_settings[i];
    return NULL;
}

static bool takes_value(const struct setting *s)
{
    return s->kind != K_META_HELP && s->kind != K_META_VERSION;
}

/* Identifies argv[*i] ("--flag value", "--flag=value", "-h") and its value,
 * advancing *i past what it used. Reports and returns NULL on a bad argument.
 * A value may start with '-' ("--min-session-timeout -1"), as with getopt. */
static const struct setting *next_flag(int argc, char **argv, int *i, const char **value,
                                       struct reporter *r)
{
    const char *arg = argv[(*i)++];
    if (arg[0] != '-') {
        report(r, SEV_ERROR, "unexpected argument '%.*s' (use --config FILE for a zoo.cfg)",
               VALUE_ECHO_MAX, arg);
        return NULL;
    }
    const char *eq = strncmp(arg, "--", 2) == 0 ? strchr(arg, '=') : NULL;
    size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg);
    const struct setting *s = find_flag(arg, name_len);
    if (s == NULL) {
        report(r, SEV_ERROR, "%.*s: unknown flag (see --help)", (int)name_len, arg);
        return NULL;
    }
    r->what = s->name;
    if (!takes_value(s) && eq != NULL) {
        report(r, SEV_ERROR, "takes no value");
        return NULL;
    }
    *value = eq ? eq + 1 : NULL;
    if (takes_value(s) && eq == NULL) {
        if (*i >= argc) {
            report(r, SEV_ERROR, "missing value");
            return NULL;
        }
        *value = argv[(*i)++];
    }
    return s;
}

/* --help and --version win over everything else, including bad flags. */
static void scan_help_version(int argc, char **argv, bool *want_help, bool *want_version)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            *want_help = true;
        if (strcmp(argv[i], "--version") == 0 || strcmp(argv[i], "-V") == 0)
            *want_version = true;
    }
}

/* First pass: checks every flag is known and has its value, and finds --config. */
static void check_flags(int argc, char **argv, struct reporter *r, const char **config_path)
{
    int i = 1;
    while (i < argc) {
        const char *value = NULL;
        const struct setting *s = next_flag(argc, argv, &i, &value, r);
        if (s != NULL && s->kind == K_META_CONFIG) {
            if (*config_path != NULL)
                report(r, SEV_ERROR, "given more than once");
            *config_path = value;
        }
        r->what = NULL;
    }
}

/* Second pass: applies the flags in order, so a later flag wins over an earlier. */
static void apply_flags(struct config *c, int argc, char **argv, struct reporter *r)
{
    int i = 1;
    while (i < argc) {
        const char *value = NULL;
        const struct setting *s = next_flag(argc, argv, &i, &value, r);
        assert(s != NULL); /* check_flags accepted this argv */
        if (s != NULL)
            apply_setting(c, s, value, r);
        r->what = NULL;
    }
}

int config_from_args(struct config *c, int argc, char **argv, config_report_fn fn, void *arg,
                     bool *want_help, bool *want_version)
{
    assert(c != NULL && argv != NULL && want_help != NULL && want_version != NULL);
    struct reporter r = { .fn = fn, .arg = arg, .source = PROGRAM };
    const char *config_path = NULL;

    *want_help = false;
    *want_version = false;
    scan_help_version(argc, argv, want_help, want_version);
    if (*want_help || *want_version)
        return 0;
    check_flags(argc, argv, &r, &config_path);
    if (r.errors > 0)
        return -1;
    if (config_path != NULL && strlen(config_path) >= sizeof c->config_path) {
        report(&r, SEV_ERROR, "--config: the path is longer than %zu bytes",
               sizeof c->config_path - 1);
        return -1;
    }
    if (config_path != NULL) {
        memcpy(c->config_path, config_path, strlen(config_path) + 1);
        if (config_load(c, config_path, fn, arg) != 0)
            r.errors++; /* go on: report the flags' problems too */
    }
    apply_flags(c, argc, argv, &r);
    return r.errors > 0 ? -1 : 0;
}

/* ------------------------------------------------------------------ finish */

/* Rechecks every integer field against its row: main may have set fields
 * directly, and this is the last gate before threads start. */
static void check_ranges(const struct config *c, struct reporter *r)
{
    for (size_t i = 0; i < COUNT(key_settings); i++) {
        const struct setting *s = &key_settings[i];
        const char *field = (const char *)c + s->offset;
        int64_t v;
        if (s->kind == K_INT32 || s->kind == K_PORT || s->kind == K_OPT_PORT ||
            s->kind == K_SNAP_RETAIN ||
            s->kind == K_LOGLEVEL)
            v = *(const int32_t *)(const void *)field;
        else if (s->kind == K_INT64)
            v = *(const int64_t *)(const void *)field;
        else
            continue;
        if (v < s->min || v > s->max) {
            char text[24];
            snprintf(text, sizeof text, "%lld", (long long)v);
            r->what = s->name;
            report_range(r, text, s->min, s->max);
            r->what = NULL;
        }
    }
}

/* tickTime * factor as a timeout, or -1 (reported) if it does not fit. */
static int32_t derive_timeout(const struct config *c, int factor, const char *name,
                              struct reporter *r)
{
    int64_t v = (int64_t)c->tick_time_ms * factor;
    if (v > INT32_MAX) {
        report(r, SEV_ERROR, "tickTime %d is too large to derive %s (%d x tickTime)",
               c->tick_time_ms, name, factor);
        return -1;
    }
    return (int32_t)v;
}

/* ZooKeeper (QuorumPeerConfig): min/max default to 2x/20x tickTime when unset
 * or -1, and the minimum may not exceed the maximum. */
static void finish_session_timeouts(struct config *c, struct reporter *r)
{
    if (c->tick_time_ms <= 0)
        return; /* already reported by check_ranges */
    if (!c->min_session_set || c->min_session_timeout_ms == -1)
        c->min_session_timeout_ms = derive_timeout(c, 2, "minSessionTimeout", r);
    if (!c->max_session_set || c->max_session_timeout_ms == -1)
        c->max_session_timeout_ms = derive_timeout(c, 20, "maxSessionTimeout", r);
    if (c->min_session_timeout_ms <= 0 || c->max_session_timeout_ms <= 0) {
        if (r->errors == 0)
            report(r, SEV_ERROR, "session timeouts must be positive (min %d, max %d)",
                   c->min_session_timeout_ms, c->max_session_timeout_ms);
        return;
    }
    if (c->min_session_timeout_ms > c->max_session_timeout_ms)
        report(r, SEV_ERROR, "minSessionTimeout %d must not be larger than maxSessionTimeout %d",
               c->min_session_timeout_ms, c->max_session_timeout_ms);
}

/* The memory budget's cross-field rules (see dataplane/conn.c): a
 * connection's input bound must hold two frames, or one frame arriving
 * behind a full queue could never complete; a slow consumer cannot be
 * closed below the mark at which its reading already stops. */
static void finish_budget(struct config *c, struct reporter *r)
{
    int64_t two_frames = 2 * ((int64_t)c->max_buffer_bytes + 4);
    if (!c->conn_max_buffer_set)
        c->conn_max_buffer_bytes = two_frames;
    else if (c->conn_max_buffer_bytes < two_frames)
        report(r, SEV_ERROR, "larch.connection.maxBufferBytes=%lld must be at least %lld "
                             "(two frames of jute.maxbuffer=%d)",
               (long long)c->conn_max_buffer_bytes, (long long)two_frames, c->max_buffer_bytes);
    if (c->conn_max_unsent_bytes < c->conn_out_high_water_bytes)
        report(r, SEV_ERROR, "larch.connection.maxUnsentBytes=%lld must be at least "
                             "larch.connection.outputHighWaterBytes=%lld",
               (long long)c->conn_max_unsent_bytes, (long long)c->conn_out_high_water_bytes);
    if (c->max_buffered_bytes < c->conn_max_buffer_bytes)
        report(r, SEV_ERROR, "larch.maxBufferedBytes=%lld must be at least "
                             "larch.connection.maxBufferBytes=%lld",
               (long long)c->max_buffered_bytes, (long long)c->conn_max_buffer_bytes);
}

/* ZooKeeper's QuorumPeerConfig.isDistributed: replicated mode when more
 * than one participant is listed, or when a lone one may not run alone. */
/* Appends n bytes of p to b unless an earlier append failed (*err). */
static void text_put(struct base_buf *b, int *err, const char *p, size_t n)
{
    if (*err == 0)
        *err = base_buf_append(b, p, n);
}

/* host as ZooKeeper writes one: an IPv6 address in brackets */
static void text_put_host(struct base_buf *b, int *err, const char *host)
{
    bool v6 = strchr(host, ':') != NULL;
    text_put(b, err, "[", v6 ? 1 : 0);
    text_put(b, err, host, strlen(host));
    text_put(b, err, "]", v6 ? 1 : 0);
}

char *config_servers_text(const struct config_server *servers, uint32_t n_servers,
                          int64_t version)
{
    assert(servers != NULL || n_servers == 0);
    struct base_buf b = { 0 };
    int err = 0;
    char num[96];
    for (uint32_t i = 0; i < n_servers; i++) {
        const struct config_server *sv = &servers[i];
        int n = snprintf(num, sizeof num, "server.%lld=", (long long)sv->id);
        text_put(&b, &err, num, (size_t)n);
        text_put_host(&b, &err, sv->host);
        n = snprintf(num, sizeof num, ":%d:%d:%s", sv->quorum_port, sv->election_port,
                     sv->observer ? "observer" : "participant");
        text_put(&b, &err, num, (size_t)n);
        if (sv->client_port > 0) {
            text_put(&b, &err, ";", 1);
            text_put_host(&b, &err, sv->client_address[0] ? sv->client_address : "0.0.0.0");
            n = snprintf(num, sizeof num, ":%d", sv->client_port);
            text_put(&b, &err, num, (size_t)n);
        }
        text_put(&b, &err, "\n", 1);
    }
    if (version >= 0) {
        int n = snprintf(num, sizeof num, "version=%llx", (unsigned long long)version);
        text_put(&b, &err, num, (size_t)n);
    }
    text_put(&b, &err, "", 1); /* the NUL */
    if (err != 0) {
        base_buf_free(&b);
        return NULL;
    }
    return (char *)b.data;
}

char *config_membership_text(const struct config *c, int64_t version)
{
    return config_servers_text(c->servers, c->n_servers, version);
}

bool config_is_distributed(const struct config *c)
{
    uint32_t voters = 0;
    for (uint32_t i = 0; i < c->n_servers; i++)
        voters += !c->servers[i].observer;
    return c->n_servers > 0 && (!c->standalone_enabled || voters > 1);
}

/* Reports at a server.N line's own file and line. */
static void report_at_server(struct reporter *r, const struct config_server *sv,
                             const char *msg)
{
    struct reporter at = *r;
    at.source = sv->where;
    at.line = 0;
    at.what = NULL;
    at.errors = 0;
    report(&at, SEV_ERROR, "server.%lld: %s", (long long)sv->id, msg);
    r->errors += at.errors;
}

/* The ensemble's rules. Replicated mode (config_is_distributed) runs the
 * ensemble driver; what it needs beyond these lines (myid, initLimit,
 * syncLimit, distinct quorum addresses) is checked by config_ensemble when
 * larchd starts. Never a silent standalone: a server that ran alone would
 * acknowledge writes no quorum holds (split brain). */
static void finish_ensemble(struct config *c, struct reporter *r)
{
    if (c->peer_type[0] != '\0' && strcmp(c->peer_type, "participant") != 0 &&
        strcmp(c->peer_type, "observer") != 0)
        report(r, SEV_ERROR, "peerType '%s' is not participant or observer", c->peer_type);
    const struct config_server *second = NULL, *first = NULL;
    for (uint32_t i = 0; i < c->n_servers; i++) {
        const struct config_server *sv = &c->servers[i];
        /* session ids carry the server id in their top byte; 255 would make
         * TTL nodes' ephemeral owner look like a TTL (ZooKeeper's rule) */
        if (c->extended_types && sv->id > 254)
            report_at_server(r, sv, "ids above 254 are not allowed with "
                                    "zookeeper.extendedTypesEnabled=true");
        if (!sv->observer && first == NULL)
            first = sv;
        else if (!sv->observer && second == NULL)
            second = sv;
    }
    if (c->n_servers > 0 && first == NULL)
        report_at_server(r, &c->servers[0], "no server is a participant: an ensemble "
                                            "needs voters");
    if (!config_is_distributed(c) || first == NULL)
        return;
    /* an ensemble member keeps its id, term, vote and log in dataDir: without
     * one it would forget its vote on a restart and vote twice in a term */
    if (c->data_dir[0] == '\0')
        report_at_server(r, second ? second : first,
                         "replicated mode needs dataDir (it holds this server's myid, its "
                         "vote and its log)");
}

bool config_sasl_provider(const struct config *c)
{
    for (uint32_t i = 0; i < c->n_auth_providers; i++)
        if (strcasecmp(c->auth_providers[i].value, CONFIG_SASL_PROVIDER) == 0)
            return true;
    return false;
}

/* The SASL setting that needs a JAAS file, or NULL when none is made. */
static const char *sasl_setting(const struct config *c)
{
    if (c->session_require_sasl)
        return "sessionRequireClientSASLAuth=true";
    if (c->enforce_auth_enabled && (c->enforce_auth_mask & CONFIG_AUTH_SASL))
        return "zookeeper.enforce.auth.schemes with sasl";
    if (config_sasl_provider(c))
        return "authProvider.N=" CONFIG_SASL_PROVIDER;
    if (c->n_sasl_super_users > 0)
        return c->sasl_super_users[0].key;
    if (strcmp(c->sasl_section, "Server") != 0)
        return "zookeeper.sasl.serverconfig";
    return NULL;
}

/* sessionRequireClientSASLAuth=true is enforce.auth with the scheme sasl
 * alone (AuthenticationHelper ignores enforce.auth.* then); enforcing sasl
 * needs its provider ("Authentication scheme sasl is not available"), and
 * every SASL setting needs the JAAS file the users come from. */
static void finish_sasl(struct config *c, struct reporter *r)
{
    if (c->session_require_sasl) {
        c->enforce_auth_enabled = true;
        c->enforce_auth_mask = CONFIG_AUTH_SASL;
    }
    bool enforced = c->enforce_auth_enabled && (c->enforce_auth_mask & CONFIG_AUTH_SASL);
    if (enforced && !config_sasl_provider(c))
        report(r, SEV_ERROR, "%s: authentication scheme sasl is not available without "
                             "authProvider.N=" CONFIG_SASL_PROVIDER,
               c->session_require_sasl ? "sessionRequireClientSASLAuth=true"
                                       : "zookeeper.enforce.auth.schemes");
    const char *setting = sasl_setting(c);
    if (c->jaas_file[0] == '\0' && setting != NULL)
        report(r, SEV_ERROR, "%s needs the JAAS file with the SASL users (jaasLoginConfig=FILE, "
                             "java.security.auth.login.config=FILE or --jaas FILE)", setting);
    else if (c->jaas_file[0] != '\0' && !config_sasl_provider(c))
        report(r, SEV_WARNING, "a JAAS file without authProvider.N=" CONFIG_SASL_PROVIDER
                               ": clients may log in with SASL, but, as in ZooKeeper, sasl ACLs "
                               "are refused and match no one");
}

static void report_at(struct reporter *r, const char *where, int severity, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Reports at where ("zoo.cfg:7: ssl.keyStore.location", recorded when the
 * line was read), or as larchd's own message when where is empty. */
static void report_at(struct reporter *r, const char *where, int severity, const char *fmt, ...)
{
    char msg[CONFIG_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    struct reporter at = *r;
    at.source = where[0] != '\0' ? where : PROGRAM;
    at.line = 0;
    at.what = NULL;
    at.errors = 0;
    report(&at, severity, "%s", msg);
    r->errors += at.errors;
}

/* A store's type, when no line gave it, from the file name as ZooKeeper's
 * KeyStoreFileType.fromFilename takes it: ".pem" or ".p12", case and all;
 * Java's ".jks" and ".bcfks" cannot be read here. */
static void finish_store(struct config_store *st, const char *key, struct reporter *r)
{
    if (st->location[0] == '\0' || st->type != CONFIG_STORE_UNSET)
        return;
    const char *dot = strrchr(st->location, '.');
    if (dot != NULL && strcmp(dot, ".pem") == 0)
        st->type = CONFIG_STORE_PEM;
    else if (dot != NULL && strcmp(dot, ".p12") == 0)
        st->type = CONFIG_STORE_PKCS12;
    else if (dot != NULL && (strcmp(dot, ".jks") == 0 || strcmp(dot, ".bcfks") == 0))
        report_at(r, st->where_location, SEV_ERROR, "'%.*s' is a Java keystore (%s, by its "
                  "name), which larchd cannot read: convert it to PKCS12 or PEM (and set "
                  "%s.type if its name does not end in .p12 or .pem)", VALUE_ECHO_MAX,
                  st->location, dot[1] == 'j' ? "JKS" : "BCFKS", key);
    else
        report_at(r, st->where_location, SEV_ERROR, "cannot tell the store type from the name "
                  "'%.*s' (ZooKeeper reads .pem and .p12): set %s.type (PEM or PKCS12)",
                  VALUE_ECHO_MAX, st->location, key);
}

/* One family's stores (family: "ssl." or "ssl.quorum."): their types, and
 * the trust store that a clientAuth asking for certificates needs. */
static void finish_tls_stores(struct config_tls *t, const char *family, struct reporter *r)
{
    char key[48], trust[48];
    snprintf(key, sizeof key, "%skeyStore", family);
    snprintf(trust, sizeof trust, "%strustStore", family);
    finish_store(&t->key, key, r);
    finish_store(&t->trust, trust, r);
    if (t->client_auth != CONFIG_CLIENT_AUTH_NONE && t->trust.location[0] == '\0')
        report_at(r, t->where_client_auth, SEV_ERROR, "%sclientAuth=%s%s asks clients for "
                  "certificates and needs %s.location, the CAs they must chain to (or set "
                  "%sclientAuth=none)", family,
                  t->client_auth == CONFIG_CLIENT_AUTH_NEED ? "need" : "want",
                  t->where_client_auth[0] ? "" : " (ZooKeeper's default)", trust, family);
}

/* sslQuorum and the ssl.quorum.* keys. Both ends of a link present a
 * certificate and verify the other's: the dialler a server's, the acceptor
 * (clientAuth need, ZooKeeper's default) a client's, so both stores are
 * needed; ZooKeeper would fall back on the JVM's CAs without a trust
 * store, which larchd does not have. */
static void finish_quorum_tls(struct config *c, struct reporter *r)
{
    struct config_tls *t = &c->quorum_tls;
    if (!c->ssl_quorum) {
        if (t->any_set)
            report(r, SEV_WARNING, "the ssl.quorum.* keys configure sslQuorum, which is not "
                                   "true: they are not used");
        return;
    }
    if (!config_is_distributed(c)) {
        report_at(r, c->where_ssl_quorum, SEV_WARNING, "sslQuorum=true, and this server runs "
                  "standalone: there are no quorum links, the ssl.quorum.* keys are not used");
        return;
    }
    if (t->key.location[0] == '\0')
        report_at(r, c->where_ssl_quorum, SEV_ERROR, "sslQuorum=true needs "
                  "ssl.quorum.keyStore.location, this server's certificate and key");
    if (t->trust.location[0] != '\0') {
        finish_tls_stores(t, "ssl.quorum.", r);
        return;
    }
    report_at(r, c->where_ssl_quorum, SEV_ERROR, "sslQuorum=true needs "
              "ssl.quorum.trustStore.location, the CAs the other members' certificates chain to");
    finish_store(&t->key, "ssl.quorum.keyStore", r);
}

/* secureClientPort and the ssl.* keys, as far as they can be checked
 * without reading the stores (larchd reads those when it starts). */
static void finish_tls(struct config *c, struct reporter *r)
{
    struct config_tls *t = &c->tls;
    if (c->secure_client_port == 0) {
        if (c->secure_client_port_address_set)
            report(r, SEV_ERROR, "secureClientPortAddress is set but secureClientPort is not "
                                 "set (ZooKeeper refuses it too)");
        else if (t->any_set)
            report(r, SEV_WARNING, "the ssl.* keys configure secureClientPort, which is not "
                                   "set: they are not used");
        return;
    }
    if (!c->client_port_set && c->client_port_address_set)
        report(r, SEV_ERROR, "clientPortAddress is set but clientPort is not set (ZooKeeper "
                             "refuses it too): a secure-only server listens on "
                             "secureClientPortAddress");
    if (config_plain_port(c) == c->secure_client_port)
        report(r, SEV_ERROR, "secureClientPort %d is clientPort too", c->secure_client_port);
    if (t->key.location[0] == '\0')
        report(r, SEV_ERROR, "secureClientPort needs ssl.keyStore.location, the server's "
                             "certificate and key (ZooKeeper: \"Keystore is required for SSL "
                             "server\")");
    finish_tls_stores(t, "ssl.", r);
    if (config_plain_port(c) == 0 && c->udp.port != 0)
        report(r, SEV_ERROR, "larch.udp serves reads in the clear, and this server serves "
                             "clients over TLS only (secureClientPort without clientPort)");
}

/* The x509 scheme needs its provider, as ZooKeeper's AuthenticationHelper
 * refuses a scheme no provider serves. */
static void finish_x509(const struct config *c, struct reporter *r)
{
    if (config_x509_enabled(c))
        return;
    if (c->enforce_auth_mask & CONFIG_AUTH_X509)
        report(r, SEV_ERROR, "zookeeper.enforce.auth.schemes names x509, and no x509 provider "
                             "is configured (secureClientPort, or authProvider.N=" AUTH_CLASS
                             "X509AuthenticationProvider): ZooKeeper refuses it too "
                             "(\"Authentication scheme x509 is not available\")");
    if (c->x509_super_user[0] != '\0')
        report(r, SEV_WARNING, "X509AuthenticationProvider.superUser is set, and no x509 "
                               "provider is configured: it is not used");
}

bool config_x509_enabled(const struct config *c)
{
    return c->x509_provider_line || c->secure_client_port != 0;
}

int32_t config_plain_port(const struct config *c)
{
    return c->secure_client_port != 0 && !c->client_port_set ? 0 : c->client_port;
}

int config_finish(struct config *c, config_report_fn fn, void *arg)
{
    assert(c != NULL);
    struct reporter r = { .fn = fn, .arg = arg, .source = PROGRAM };

    check_ranges(c, &r);
    finish_session_timeouts(c, &r);
    finish_budget(c, &r);
    finish_ensemble(c, &r);
    finish_tls(c, &r);
    finish_quorum_tls(c, &r);
    if (c->dpdk[0] != '\0' && (c->udp.port == 0 || strchr(c->udp.host, ':')))
        report(&r, SEV_ERROR, "larch.dpdk (--dpdk) needs larch.udp (--udp) with an IPv4 "
               "address: the one the DPDK port answers for");
    if (c->client_port_address[0] == '\0')
        report(&r, SEV_ERROR, "clientPortAddress must not be empty");
    finish_sasl(c, &r);
    if (c->enforce_auth_enabled && c->enforce_auth_mask == 0)
        report(&r, SEV_ERROR, "zookeeper.enforce.auth.enabled is true: "
                              "zookeeper.enforce.auth.schemes must name a scheme (digest, ip, "
                              "sasl, x509)");
    finish_x509(c, &r);
    /* ZooKeeper writes the txn log into dataDir unless dataLogDir is given. */
    if (!c->data_log_dir_set || c->data_log_dir[0] == '\0')
        memcpy(c->data_log_dir, c->data_dir, sizeof c->data_log_dir);
    return r.errors > 0 ? -1 : 0;
}

/* ------------------------------------------------------------------ the ensemble */

#define RAFT_TICKS_PER_TICK 10 /* raft ticks per ZooKeeper tick */
#define HEARTBEAT_TICKS 5      /* raft ticks: tickTime / 2 */
#define TICK_TIME_MIN_MS RAFT_TICKS_PER_TICK /* below it the raft tick would be 0 ms */

static void report_server(struct reporter *r, const struct config_server *sv, const char *fmt,
                          ...) __attribute__((format(printf, 3, 4)));

/* report_at_server with a formatted message. */
static void report_server(struct reporter *r, const struct config_server *sv, const char *fmt,
                          ...)
{
    char msg[CONFIG_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    report_at_server(r, sv, msg);
}

/* "<dataDir>/myid" (no doubled '/'), for reading and for messages; just
 * "myid" when dataDir is unset (config_read_myid refuses that first). */
static void myid_path(const struct config *c, char *path, size_t cap)
{
    size_t n = strlen(c->data_dir);
    if (n == 0) {
        snprintf(path, cap, "myid");
        return;
    }
    bool slash = n > 0 && c->data_dir[n - 1] == '/';
    snprintf(path, cap, "%s%smyid", c->data_dir, slash ? "" : "/");
}

static bool is_space(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f';
}

/* Reads at most cap bytes of the regular file at path into buf (*len set;
 * *len == cap means the file is at least that long). Reports and returns
 * false on failure. O_NONBLOCK: a FIFO put there by mistake is refused by
 * the S_ISREG check instead of blocking the open. */
static bool read_small_file(const char *path, char *buf, size_t cap, size_t *len,
                            struct reporter *r)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        report(r, SEV_ERROR, "cannot open: %s", strerror(errno));
        return false;
    }
    struct stat st;
    bool ok = false;
    if (fstat(fd, &st) != 0) {
        report(r, SEV_ERROR, "cannot stat: %s", strerror(errno));
        goto close_fd;
    }
    if (!S_ISREG(st.st_mode)) {
        report(r, SEV_ERROR, "is not a regular file");
        goto close_fd;
    }
    *len = 0;
    while (*len < cap) {
        ssize_t n = read(fd, buf + *len, cap - *len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            report(r, SEV_ERROR, "cannot read: %s", strerror(errno));
            goto close_fd;
        }
        if (n == 0)
            break;
        *len += (size_t)n;
    }
    ok = true;
close_fd:
    close(fd);
    return ok;
}

/* Copies text[0, len) into out (cap bytes) for quoting in a message, with
 * every byte that is not printable ASCII shown as '?'. */
static void quote_safe(char *out, size_t cap, const char *text, size_t len)
{
    size_t n = len < cap - 1 ? len : cap - 1;
    for (size_t i = 0; i < n; i++)
        out[i] = text[i] >= ' ' && text[i] <= '~' ? text[i] : '?';
    out[n] = '\0';
}

/* Parses a myid file's content (len bytes, not NUL-terminated): blanks, a
 * decimal id in [1, id_max], blanks. Reports and returns false if not. */
static bool parse_myid(const char *text, size_t len, uint32_t id_max, const char *range_note,
                       uint32_t *out, struct reporter *r)
{
    while (len > 0 && is_space(text[len - 1]))
        len--;
    while (len > 0 && is_space(*text)) {
        text++;
        len--;
    }
    char shown[CONFIG_MYID_BYTES_MAX + 1];
    quote_safe(shown, sizeof shown, text, len);
    if (len == 0) {
        report(r, SEV_ERROR, "is empty: it must hold this server's id, a decimal number "
                             "(1-%u%s)", id_max, range_note);
        return false;
    }
    size_t digits = 0;
    uint64_t v = 0;
    while (digits < len && text[digits] >= '0' && text[digits] <= '9') {
        if (v <= id_max) /* saturate: anything above is out of range anyway */
            v = v * 10 + (uint64_t)(text[digits] - '0');
        digits++;
    }
    if (digits == 0) {
        report(r, SEV_ERROR, "'%s' is not a decimal server id (1-%u%s)", shown, id_max,
               range_note);
        return false;
    }
    if (digits < len) {
        report(r, SEV_ERROR, "'%s' has trailing junk after the server id '%.*s' (only "
                             "whitespace may surround it)", shown, (int)digits, text);
        return false;
    }
    if (v < 1 || v > id_max) {
        report(r, SEV_ERROR, "server id %s is out of range (1-%u%s)", shown, id_max, range_note);
        return false;
    }
    *out = (uint32_t)v;
    return true;
}

int config_read_myid(const struct config *c, uint32_t *myid, config_report_fn fn, void *arg)
{
    assert(c != NULL && myid != NULL);
    struct reporter r = { .fn = fn, .arg = arg, .source = PROGRAM };
    if (c->data_dir[0] == '\0') {
        report(&r, SEV_ERROR, "replicated mode needs dataDir holding a myid file "
                              "(dataDir is not set)");
        return -1;
    }
    char path[sizeof c->data_dir + sizeof "/myid"];
    myid_path(c, path, sizeof path);
    r.source = path;
    char buf[CONFIG_MYID_BYTES_MAX + 1];
    size_t len = 0;
    if (!read_small_file(path, buf, sizeof buf, &len, &r))
        return -1;
    if (len > CONFIG_MYID_BYTES_MAX) {
        report(&r, SEV_ERROR, "larger than %d bytes: a myid file holds one server id",
               CONFIG_MYID_BYTES_MAX);
        return -1;
    }
    /* finish_ensemble's rule: with TTLs, 255 would make an ephemeral
     * owner (id << 56) look like a TTL node */
    uint32_t id_max = c->extended_types ? 254 : SERVER_ID_MAX;
    const char *note = c->extended_types ? " with zookeeper.extendedTypesEnabled=true" : "";
    if (!parse_myid(buf, len, id_max, note, myid, &r))
        return -1;
    assert(*myid >= 1 && *myid <= id_max);
    return 0;
}

/* A host as compared and hashed: an IP literal by its address bytes (so
 * "::1" and "0:0::1" are one host), a name lower-cased (DNS ignores case). */
struct host_key {
    uint8_t kind; /* '4', '6' or 'n' */
    uint8_t len;
    uint8_t bytes[255];
};

static void host_key_of(const char *host, struct host_key *k)
{
    memset(k, 0, sizeof *k);
    if (inet_pton(AF_INET, host, k->bytes) == 1) {
        k->kind = '4';
        k->len = 4;
    } else if (inet_pton(AF_INET6, host, k->bytes) == 1) {
        k->kind = '6';
        k->len = 16;
    } else {
        size_t n = strlen(host);
        assert(n <= sizeof k->bytes); /* config_server.host holds 255 bytes */
        k->kind = 'n';
        k->len = (uint8_t)n;
        for (size_t i = 0; i < n; i++)
            k->bytes[i] = (uint8_t)(host[i] >= 'A' && host[i] <= 'Z' ? host[i] + 32 : host[i]);
    }
}

bool config_same_host(const char *a, const char *b)
{
    struct host_key ka, kb;
    host_key_of(a, &ka);
    host_key_of(b, &kb);
    return ka.kind == kb.kind && ka.len == kb.len && memcmp(ka.bytes, kb.bytes, ka.len) == 0;
}

/* tickTime, initLimit, syncLimit: ZooKeeper's QuorumPeerConfig requires
 * both limits in replicated mode; the raft tick needs tickTime >= 10 ms. */
static void ensemble_timing(const struct config *c, struct config_ensemble *out,
                            struct reporter *r)
{
    if (c->tick_time_ms < TICK_TIME_MIN_MS)
        report(r, SEV_ERROR, "tickTime %d is below %d ms: the raft tick (tickTime / %d) would "
                             "be 0 ms", c->tick_time_ms, TICK_TIME_MIN_MS, RAFT_TICKS_PER_TICK);
    if (c->init_limit < 1)
        report(r, SEV_ERROR, "initLimit is not set: replicated mode needs initLimit and "
                             "syncLimit (ticks), as ZooKeeper does");
    if (c->sync_limit < 1)
        report(r, SEV_ERROR, "syncLimit is not set: replicated mode needs initLimit and "
                             "syncLimit (ticks), as ZooKeeper does");
    uint64_t election = (uint64_t)(c->sync_limit > 0 ? c->sync_limit : 0) * RAFT_TICKS_PER_TICK;
    if (election > CONFIG_ELECTION_TICKS_MAX)
        report(r, SEV_ERROR, "syncLimit %d is too large: the election timeout would be %llu "
                             "raft ticks, above the Raft core's bound of %u", c->sync_limit,
               (unsigned long long)election, CONFIG_ELECTION_TICKS_MAX);
    out->raft_tick_ms = c->tick_time_ms / RAFT_TICKS_PER_TICK;
    out->heartbeat_ticks = HEARTBEAT_TICKS;
    out->election_ticks = (uint32_t)(election > CONFIG_ELECTION_TICKS_MAX ? 0 : election);
    out->init_limit_ms = (int64_t)c->init_limit * c->tick_time_ms;
    out->sync_limit_ms = (int64_t)c->sync_limit * c->tick_time_ms;
}

/* This server's own server.N line; peerType, when given, must agree with
 * it. NULL (reported) when myid is in no line. */
static const struct config_server *ensemble_self(const struct config *c, uint32_t myid,
                                                 struct reporter *r)
{
    const struct config_server *self = NULL;
    for (uint32_t i = 0; i < c->n_servers; i++)
        if (c->servers[i].id == (int64_t)myid)
            self = &c->servers[i];
    if (self == NULL) {
        char path[sizeof c->data_dir + sizeof "/myid"];
        myid_path(c, path, sizeof path);
        report(r, SEV_ERROR, "myid %u (from %.*s) is not listed in any server.N line", myid,
               VALUE_ECHO_MAX, path);
        return NULL;
    }
    if (c->peer_type[0] == '\0')
        return self;
    bool observer = strcmp(c->peer_type, "observer") == 0;
    if (!observer && strcmp(c->peer_type, "participant") != 0)
        report(r, SEV_ERROR, "peerType '%s' is not participant or observer", c->peer_type);
    else if (observer != self->observer)
        report_server(r, self, "peerType=%s disagrees with this server's role here (%s): "
                               "ZooKeeper would follow the server.N line; larchd refuses to "
                               "guess", c->peer_type, self->observer ? "observer" : "participant");
    return self;
}

/* The client ports that listen on sv's host: its own line's, and clientPort
 * when sv is this server (main binds it). Reports a quorum port of q that
 * equals one of them. */
static void check_client_ports_of(const struct config *c, const struct config_server *q,
                                  const struct config_server *sv, const struct config_server *self,
                                  struct reporter *r)
{
    if (!config_same_host(q->host, sv->host))
        return;
    if (sv->client_port != 0 && sv->client_port == q->quorum_port)
        report_server(r, q, "quorum port %d is also the client port of server.%lld (%s) on "
                            "the same host %s", q->quorum_port, (long long)sv->id, sv->where,
                      q->host);
    else if (sv == self && config_plain_port(c) == q->quorum_port)
        report_server(r, q, "quorum port %d is also clientPort of this server (server.%lld) "
                            "on the same host %s", q->quorum_port, (long long)sv->id, q->host);
    else if (sv == self && c->secure_client_port == q->quorum_port)
        report_server(r, q, "quorum port %d is also secureClientPort of this server "
                            "(server.%lld) on the same host %s", q->quorum_port,
                      (long long)sv->id, q->host);
}

/* No two members at one quorum address; no quorum port that is a client
 * port on the same host (both would bind it); at least one voter. */
static void ensemble_addresses(const struct config *c, const struct config_server *self,
                               struct reporter *r)
{
    uint32_t voters = 0;
    for (uint32_t i = 0; i < c->n_servers; i++) {
        const struct config_server *q = &c->servers[i];
        voters += !q->observer;
        for (uint32_t j = 0; j < i; j++) {
            const struct config_server *o = &c->servers[j];
            if (o->quorum_port == q->quorum_port && config_same_host(o->host, q->host)) {
                bool v6 = strchr(q->host, ':') != NULL;
                report_server(r, q, "quorum address %s%s%s:%d is also server.%lld's (%s)",
                              v6 ? "[" : "", q->host, v6 ? "]" : "", q->quorum_port,
                              (long long)o->id, o->where);
                break;
            }
        }
        for (uint32_t j = 0; j < c->n_servers; j++)
            check_client_ports_of(c, q, &c->servers[j], self, r);
    }
    if (c->n_servers > 0 && voters == 0)
        report_at_server(r, &c->servers[0], "no server is a participant: an ensemble needs "
                                            "at least one voter");
}

/* The members in id order (at most CONFIG_SERVERS_MAX: insertion sort). */
static void ensemble_members(const struct config *c, struct config_ensemble *out)
{
    out->n_members = 0;
    for (uint32_t i = 0; i < c->n_servers; i++) {
        const struct config_server *sv = &c->servers[i];
        struct config_member m = { .id = (uint32_t)sv->id, .voter = !sv->observer,
                                   .quorum_port = sv->quorum_port };
        memcpy(m.host, sv->host, sizeof m.host);
        memcpy(m.where, sv->where, sizeof m.where);
        uint32_t k = out->n_members++;
        while (k > 0 && out->members[k - 1].id > m.id) {
            out->members[k] = out->members[k - 1];
            k--;
        }
        out->members[k] = m;
    }
}

#define FNV64_OFFSET 0xcbf29ce484222325ull
#define FNV64_PRIME 0x100000001b3ull

static uint64_t fnv1a(uint64_t h, const void *data, size_t len)
{
    const uint8_t *p = data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= FNV64_PRIME;
    }
    return h;
}

/* FNV-1a 64 (small, dependency-free, and a misconfiguration guard needs no
 * more) over a version tag, then per member in id order: id (4 bytes,
 * little-endian) and voter (1 byte). Each integer is written byte by byte
 * so big- and little-endian servers agree. Addresses are left out on
 * purpose: members may name one another differently (a server names
 * itself 0.0.0.0, peers reach it through NAT or a proxy), as ZooKeeper
 * allows. 0 is reserved for "none". */
static uint64_t ensemble_cluster_id(const struct config_ensemble *e, bool reconfig)
{
    /* With reconfigEnabled the membership changes at run time, and a server
     * joins with a zoo.cfg the others' do not match: the members are left
     * out and only the tag guards (a server of another kind of ensemble). */
    static const char tag[] = "larch-ensemble-v2";
    static const char dynamic[] = "larch-ensemble-dynamic-v1";
    if (reconfig)
        return fnv1a(FNV64_OFFSET, dynamic, sizeof dynamic);
    uint64_t h = fnv1a(FNV64_OFFSET, tag, sizeof tag);
    for (uint32_t i = 0; i < e->n_members; i++) {
        const struct config_member *m = &e->members[i];
        uint8_t b[5] = { (uint8_t)m->id, (uint8_t)(m->id >> 8), (uint8_t)(m->id >> 16),
                         (uint8_t)(m->id >> 24), (uint8_t)m->voter };
        h = fnv1a(h, b, sizeof b);
    }
    return h != 0 ? h : 1;
}

int config_ensemble(const struct config *c, uint32_t myid, struct config_ensemble *out,
                    config_report_fn fn, void *arg)
{
    assert(c != NULL && out != NULL && c->n_servers <= CONFIG_SERVERS_MAX);
    struct reporter r = { .fn = fn, .arg = arg, .source = PROGRAM };
    memset(out, 0, sizeof *out);
    const struct config_server *self = ensemble_self(c, myid, &r);
    ensemble_timing(c, out, &r);
    ensemble_addresses(c, self, &r);
    if (r.errors > 0)
        return -1;
    assert(self != NULL);
    out->self_id = myid;
    out->self_observer = self->observer;
    ensemble_members(c, out);
    out->cluster_id = ensemble_cluster_id(out, c->reconfig_enabled);
    /* what raft_new checks: the caller must never be refused there */
    assert(out->n_members == c->n_servers && out->n_members >= 1);
    assert(out->heartbeat_ticks > 0 && out->election_ticks > out->heartbeat_ticks &&
           out->election_ticks <= CONFIG_ELECTION_TICKS_MAX && out->raft_tick_ms >= 1);
    return 0;
}

/* ------------------------------------------------------------------ queries */

bool config_4lw_allowed(const struct config *c, const char *word)
{
    assert(c != NULL);
    if (word == NULL || !is_known_4lw(word, strlen(word)))
        return false;
    /* FourLetterCommands.isEnabled: zkServer.sh status needs srvr, and clients
     * probe isro when read-only mode is on, so both are always allowed then. */
    if (strcmp(word, "srvr") == 0)
        return true;
    if (c->read_only_mode && strcmp(word, "isro") == 0)
        return true;
    return each_word(c->four_letter_words, word_matches, word);
}

const char *config_usage(void)
{
    return "Usage: larchd [--config FILE] [flags]\n"
           "\n"
           "larchd is a standalone ZooKeeper-compatible coordination server. Flags override\n"
           "the settings of the --config file, wherever they appear on the command line.\n"
           "Flags take their value as \"--flag value\" or \"--flag=value\".\n"
           "\n"
           "Flags:\n"
           "  --config FILE             zoo.cfg to read first (ZooKeeper syntax)\n"
           "  --port N                  client port, 1-65535 (clientPort; default 2181)\n"
           "  --bind ADDR               address to listen on (clientPortAddress; default\n"
           "                            127.0.0.1, or 0.0.0.0 with a --config file)\n"
           "  --workers N               worker threads, 1-64 (larch.workers; default CPUs - 1,\n"
           "                            at least 1)\n"
           "  --inline-sequencer on|off run write rounds on the worker that submitted them\n"
           "                            when it can take the sequencer role (flat combining)\n"
           "                            (larch.inlineSequencer; default: on when larchd has\n"
           "                            fewer CPUs than workers + 1, so no context switch per\n"
           "                            write; off when the sequencer has a core of its own)\n"
           "  --udp IP:PORT             also serve reads over UDP there, one socket per worker\n"
           "                            (larch.udp; dataplane/UDP.md; [..] for IPv6)\n"
           "  --dpdk 'EAL ARGS'         serve --udp from a DPDK port instead, its poll-mode\n"
           "                            lcores answering ARP, ping and reads (larch.dpdk;\n"
           "                            e.g. '-l 0-1 --no-huge --no-pci --vdev net_memif0')\n"
           "  --dpdk-cores N            poll-mode lcores, one queue pair each (larch.dpdkCores;\n"
           "                            default 1; EAL's -l must list N more than the main)\n"
           "  --tick-time MS            tickTime (default 2000)\n"
           "  --min-session-timeout MS  minSessionTimeout (default 2 x tickTime; -1 = default)\n"
           "  --max-session-timeout MS  maxSessionTimeout (default 20 x tickTime; -1 = default)\n"
           "  --max-client-cnxns N      maxClientCnxns, connections per client IP (default 60;\n"
           "                            0 = unlimited)\n"
           "  --4lw LIST                4lw.commands.whitelist: comma-separated words or *\n"
           "                            (default srvr; srvr is always allowed, and isro too\n"
           "                            in read-only mode)\n"
           "  --super-digest USER:B64   DigestAuthenticationProvider.superDigest (default none)\n"
           "  --jaas FILE               the JAAS file whose Server section's DigestLoginModule\n"
           "                            lists the SASL DIGEST-MD5 users (jaasLoginConfig)\n"
           "  --ttl on|off              zookeeper.extendedTypesEnabled: TTL znodes (default on;\n"
           "                            ZooKeeper's default is off)\n"
           "  --data-dir DIR            dataDir (default none)\n"
           "  --data-log-dir DIR        dataLogDir (default: dataDir)\n"
           "  --max-buffer BYTES        jute.maxbuffer, largest packet (default 1048575, at\n"
           "                            most 16777216)\n"
           "  --log-level LEVEL         error, warn, info or debug (larch.logLevel; default info)\n"
           "  --log-file FILE           append the log there instead of stderr (larch.logFile;\n"
           "                            created 0640; SIGHUP reopens it, for log rotation)\n"
           "  --read-only on|off        readonlymode.enabled (default off)\n"
           "  -h, --help                print this text and exit\n"
           "  -V, --version             print the version and exit\n"
           "\n"
           "zoo.cfg keys (key=value, key:value or key value; lines starting with # or ! are\n"
           "comments; a trailing backslash continues a line), with their defaults:\n"
           "  tickTime=2000\n"
           "  dataDir=                          (none)\n"
           "  dataLogDir=                       (same as dataDir)\n"
           "  clientPort=2181\n"
           "  clientPortAddress=0.0.0.0          (127.0.0.1 without a zoo.cfg)\n"
           "  secureClientPort=                 (off; the same protocol over TLS. Without\n"
           "                                    a clientPort line, the plain port is off)\n"
           "  secureClientPortAddress=0.0.0.0\n"
           "  ssl.keyStore.location=            (PEM: chain and key in one file; PKCS12)\n"
           "  ssl.keyStore.password=            (or ssl.keyStore.passwordPath=FILE)\n"
           "  ssl.keyStore.type=                (PEM or PKCS12; from a .pem/.p12 name)\n"
           "  ssl.trustStore.location=          (the CAs of client certificates; likewise\n"
           "                                    .password, .passwordPath, .type)\n"
           "  ssl.protocol=TLSv1.3              (TLSv1.2 or TLSv1.3)\n"
           "  ssl.enabledProtocols=             (default: ssl.protocol alone)\n"
           "  ssl.ciphersuites=                 (Java's names; default: ZooKeeper's list)\n"
           "  ssl.clientAuth=need               (none, want, need)\n"
           "  ssl.hostnameVerification=true     (with ssl.clientHostnameVerification=true:\n"
           "                                    a client certificate must name its address)\n"
           "  sslQuorum=false                   (true: the links between members are TLS,\n"
           "                                    with ssl.quorum.keyStore.*, .trustStore.*\n"
           "                                    (both required), .protocol, .enabledProtocols,\n"
           "                                    .ciphersuites, .clientAuth=need,\n"
           "                                    .hostnameVerification=true and\n"
           "                                    .clientHostnameVerification=true)\n"
           "  minSessionTimeout=-1              (-1 = 2 x tickTime)\n"
           "  maxSessionTimeout=-1              (-1 = 20 x tickTime)\n"
           "  maxClientCnxns=60\n"
           "  4lw.commands.whitelist=srvr      *\n"
           "  readonlymode.enabled=false        *\n"
           "  snapCount=100000                  *\n"
           "  commitLogCount=500                (ensembles: txns before the newest snapshot\n"
           "                                    kept in memory for followers just behind) *\n"
           "  preAllocSize=65536                (KB preallocated per txn log chunk) *\n"
           "  autopurge.snapRetainCount=3       (at least 3)\n"
           "  autopurge.purgeInterval=0         (hours; 0 = never)\n"
           "  globalOutstandingLimit=1000       (requests read and not yet answered,\n"
           "                                    server-wide, before reading pauses) *\n"
           "  maxCnxns=0                        (client connections in all; 0 = unlimited)\n"
           "  nio.sessionlessCnxnTimeout=10000  (ms a connection may take to open its session) *\n"
           "  larch.maxBufferedBytes=268435456  (bytes all connections may hold: above it,\n"
           "                                    heavy connections are not read)\n"
           "  larch.connection.maxBufferBytes=  (unparsed input + queued requests per\n"
           "                                    connection; default and minimum: 2 frames)\n"
           "  larch.connection.outputHighWaterBytes=1048576 (unsent output above which a\n"
           "                                    connection is not read)\n"
           "  larch.connection.maxUnsentBytes=16777216 (unsent output that closes a\n"
           "                                    connection: the client is not reading)\n"
           "  znode.container.checkIntervalMs=60000 *\n"
           "  jute.maxbuffer=1048575            (at most 16 MiB: a txn log record is 32 MiB) *\n"
           "  zookeeper.extendedTypesEnabled=true *\n"
           "  DigestAuthenticationProvider.superDigest=   (none) *\n"
           "  metricsProvider.className=        (ZooKeeper's PrometheusMetricsProvider\n"
           "                                    serves /metrics; default: none)\n"
           "  metricsProvider.httpHost=0.0.0.0\n"
           "  metricsProvider.httpPort=7000\n"
           "  admin.enableServer=false          (the AdminServer: JSON answers to the\n"
           "                                    four-letter words over HTTP. Off unless set:\n"
           "                                    ZooKeeper's default, true, serves sessions,\n"
           "                                    ephemeral paths, the environment and stat\n"
           "                                    resets on every interface without\n"
           "                                    authentication, and port 8080 on every\n"
           "                                    server of a host; larchd opens nothing you\n"
           "                                    did not ask for, as with /metrics and the\n"
           "                                    four-letter words) *\n"
           "  admin.serverAddress=0.0.0.0 *\n"
           "  admin.serverPort=8080             (0: any free port, as logged) *\n"
           "  admin.commandURL=/commands *\n"
           "  admin.idleTimeout=30000           (ms an idle connection is kept; whole\n"
           "                                    seconds, rounded up) *\n"
           "  enforce.auth.enabled=false        (refuse every request of a connection\n"
           "                                    without an identity of these schemes) *\n"
           "  enforce.auth.schemes=             (digest, ip, sasl, x509) *\n"
           "  jaasLoginConfig=                  (none; also java.security.auth.login.config: the\n"
           "                                    JAAS file of the SASL DIGEST-MD5 users)\n"
           "  sasl.serverconfig=Server          (its section) *\n"
           "  authProvider.N=                   (" CONFIG_SASL_PROVIDER ":\n"
           "                                    sasl ACLs; ZooKeeper's X509AuthenticationProvider:\n"
           "                                    x509, also on wherever secureClientPort is set;\n"
           "                                    digest and ip are built in) *\n"
           "  sessionRequireClientSASLAuth=false (enforce.auth with sasl alone) *\n"
           "  superUser=, superUser.X=          (SASL users who pass every ACL) *\n"
           "  X509AuthenticationProvider.superUser= (a client certificate's subject, as\n"
           "                                    Java's X500Principal.getName() writes it) *\n"
           "  larch.workers=                    (CPUs - 1, at least 1, at most 64)\n"
           "  larch.zxidCounterLimit=4294967294 (ensembles: the leader steps down before\n"
           "                                    assigning a higher zxid counter; a new\n"
           "                                    term starts: ZOOKEEPER-1277's rollover)\n"
           "  larch.logLevel=info               (error, warn, info, debug)\n"
           "  larch.logFile=                    (none: stderr)\n"
           "  larch.inlineSequencer=            (auto: true when CPUs < workers + 1)\n"
           "  larch.udp=IP:PORT                 (off)\n"
           "  larch.dpdk=EAL ARGS               (off)\n"
           "  larch.dpdkCores=N                 (1)\n"
           "Keys marked * and the ssl.* keys may also be written with or without a\n"
           "\"zookeeper.\" prefix.\n"
           "Ensemble keys: server.N=host:quorumPort:electionPort[:participant|observer]\n"
           "  [;[clientAddress:]clientPort], initLimit, syncLimit, standaloneEnabled=true,\n"
           "  reconfigEnabled=false, peerType, dynamicConfigFile. One participant runs\n"
           "  standalone; two or more (or standaloneEnabled=false) make this server a\n"
           "  member of a Raft ensemble on the quorum ports (the election port is not\n"
           "  used). Replicated mode needs, as ZooKeeper does, dataDir, this server's id\n"
           "  (1-255; 1-254 with extended types) in the file dataDir/myid, and both\n"
           "  initLimit and syncLimit; Raft's timing follows tickTime (heartbeat every\n"
           "  tickTime / 2, election after syncLimit ticks without a leader).\n"
           "  JVM and other ZooKeeper tuning keys (jvm.*, ...) are accepted with a\n"
           "  warning and ignored. A security, TLS, SASL or quorum key larchd cannot\n"
           "  honour (sslQuorumReloadCertFiles=true, portUnification=true, ssl.crl=true,\n"
           "  ssl.quorum.crl=true, a JKS store,\n"
           "  Kerberos and quorum SASL keys, admin.forceHttps=true,\n"
           "  admin.portUnification=true, admin.needClientAuth=true, ...) is an error\n"
           "  naming its line: larchd does not start rather than run without it.\n"
           "\n"
           "Durability: with dataDir set, every write is in the txn log (fdatasync, group\n"
           "commit) before it is acknowledged, snapshots are taken every snapCount txns,\n"
           "and a restart recovers from them. Without dataDir data is in memory only.\n";
}

struct out_buf {
    char *p;
    size_t cap, used;
};

static void out_printf(struct out_buf *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Appends to o, silently truncating at its capacity (always NUL-terminated). */
static void out_printf(struct out_buf *o, const char *fmt, ...)
{
    if (o->cap == 0 || o->used >= o->cap - 1)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(o->p + o->used, o->cap - o->used, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    size_t room = o->cap - o->used - 1;
    o->used += (size_t)n < room ? (size_t)n : room;
}

/* The membership in ZooKeeper's own server.N format (as its dynamic
 * configuration and "conf" in quorum mode print it). */
static void format_servers(const struct config *c, struct out_buf *o)
{
    for (uint32_t i = 0; i < c->n_servers; i++) {
        const struct config_server *sv = &c->servers[i];
        /* brackets whenever reading back needs them: a ':' inside, or a
         * '[' in front that would start a bracketed address */
        bool v6 = strchr(sv->host, ':') != NULL || sv->host[0] == '[';
        out_printf(o, "server.%lld=%s%s%s:%d:%d:%s", (long long)sv->id, v6 ? "[" : "", sv->host,
                   v6 ? "]" : "", sv->quorum_port, sv->election_port,
                   sv->observer ? "observer" : "participant");
        if (sv->client_port != 0) {
            bool cv6 = strchr(sv->client_address, ':') != NULL || sv->client_address[0] == '[';
            out_printf(o, ";%s%s%s%s%d", cv6 ? "[" : "", sv->client_address, cv6 ? "]" : "",
                       sv->client_address[0] != '\0' ? ":" : "", sv->client_port);
        }
        out_printf(o, "\n");
    }
}

/* The first lines are those of ZooKeeper 3.8's "conf" (ZooKeeperServer.dumpConf),
 * in its order, minus dataDirSize/dataLogSize (sizes on disk are not config);
 * larchd's other settings follow. The super digest is never printed.
 * Returns the bytes written to out (excluding the NUL, at most cap - 1). */
size_t config_format(const struct config *c, char *out, size_t cap)
{
    assert(c != NULL && (out != NULL || cap == 0));
    struct out_buf o = { .p = out, .cap = cap, .used = 0 };
    if (cap > 0)
        out[0] = '\0';
    /* -1 for a port that is off, as ZooKeeper's getClientPort answers */
    int32_t plain = config_plain_port(c);
    out_printf(&o, "clientPort=%d\nsecureClientPort=%d\n", plain ? plain : -1,
               c->secure_client_port ? c->secure_client_port : -1);
    out_printf(&o, "dataDir=%s\ndataLogDir=%s\n", c->data_dir, c->data_log_dir);
    out_printf(&o, "tickTime=%d\nmaxClientCnxns=%d\n", c->tick_time_ms, c->max_client_cnxns);
    out_printf(&o, "minSessionTimeout=%d\nmaxSessionTimeout=%d\n", c->min_session_timeout_ms,
               c->max_session_timeout_ms);
    out_printf(&o, "clientPortListenBacklog=-1\nserverId=%u\n", c->my_id);
    out_printf(&o, "clientPortAddress=%s\n", c->client_port_address);
    if (c->secure_client_port != 0)
        out_printf(&o, "secureClientPortAddress=%s\n", c->secure_client_port_address);
    out_printf(&o, "4lw.commands.whitelist=%s\n", c->four_letter_words);
    out_printf(&o, "readonlymode.enabled=%s\nzookeeper.extendedTypesEnabled=%s\n",
               c->read_only_mode ? "true" : "false", c->extended_types ? "true" : "false");
    out_printf(&o, "jute.maxbuffer=%d\nsnapCount=%d\npreAllocSize=%d\n", c->max_buffer_bytes,
               c->snap_count, c->prealloc_kb);
    out_printf(&o, "autopurge.snapRetainCount=%d\nautopurge.purgeInterval=%d\n",
               c->autopurge_snap_retain, c->autopurge_interval_h);
    out_printf(&o, "globalOutstandingLimit=%d\nznode.container.checkIntervalMs=%lld\n",
               c->global_outstanding_limit, (long long)c->container_check_ms);
    out_printf(&o, "maxCnxns=%d\nzookeeper.nio.sessionlessCnxnTimeout=%d\n", c->max_cnxns,
               c->sessionless_timeout_ms);
    out_printf(&o, "larch.maxBufferedBytes=%lld\nlarch.connection.maxBufferBytes=%lld\n",
               (long long)c->max_buffered_bytes, (long long)c->conn_max_buffer_bytes);
    out_printf(&o, "larch.connection.outputHighWaterBytes=%lld\nlarch.connection.maxUnsentBytes=%lld\n",
               (long long)c->conn_out_high_water_bytes, (long long)c->conn_max_unsent_bytes);
    const char *level = c->log_level >= 0 && c->log_level < (int32_t)COUNT(log_level_names)
                            ? log_level_names[c->log_level] : "info";
    out_printf(&o, "larch.workers=%d\nlarch.logLevel=%s\n", c->workers, level);
    if (c->log_file[0] != '\0')
        out_printf(&o, "larch.logFile=%s\n", c->log_file);
    if (c->inline_sequencer_set)
        out_printf(&o, "larch.inlineSequencer=%s\n", c->inline_sequencer ? "true" : "false");
    if (c->udp.port != 0)
        out_printf(&o, strchr(c->udp.host, ':') ? "larch.udp=[%s]:%d\n" : "larch.udp=%s:%d\n",
                   c->udp.host, c->udp.port);
    if (c->dpdk[0] != '\0')
        out_printf(&o, "larch.dpdk=%s\nlarch.dpdkCores=%d\n", c->dpdk,
                   c->dpdk_cores > 0 ? c->dpdk_cores : 1);
    format_servers(c, &o);
    return o.used;
}
