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

struct config {
    /* zoo.cfg keys */
    int32_t tick_time_ms;           /* tickTime, default 2000 */
    char data_dir[4096];            /* dataDir, default "" (not durable yet) */
    char data_log_dir[4096];        /* dataLogDir, default = data_dir */
    int32_t client_port;            /* clientPort, default 2181 */
    char client_port_address[256];  /* clientPortAddress, default "127.0.0.1" */
    int32_t min_session_timeout_ms; /* minSessionTimeout, default 2 * tickTime */
    int32_t max_session_timeout_ms; /* maxSessionTimeout, default 20 * tickTime */
    int32_t max_client_cnxns;       /* maxClientCnxns per IP, default 60; 0 = unlimited */
    char four_letter_words[512];    /* 4lw.commands.whitelist, default "srvr"; "*" = all */
    bool read_only_mode;            /* readonlymode.enabled, default false */
    char super_digest[512];         /* DigestAuthenticationProvider.superDigest "user:base64" */
    bool extended_types;            /* zookeeper.extendedTypesEnabled (TTL), default true */
    int32_t max_buffer_bytes;       /* jute.maxbuffer, default 0xfffff */
    int32_t snap_count;             /* snapCount, default 100000: txns between snapshots */
    int32_t prealloc_kb;            /* preAllocSize, default 65536 (KB): log preallocation chunk */
    int32_t autopurge_snap_retain;  /* autopurge.snapRetainCount, default 3 */
    int32_t autopurge_interval_h;   /* autopurge.purgeInterval, default 0 */
    int64_t container_check_ms;     /* znode.container.checkIntervalMs, default 60000 */
    int32_t global_outstanding_limit; /* globalOutstandingLimit, default 1000 */
    int32_t max_cnxns;              /* maxCnxns: all client connections, default 0 = unlimited */
    int32_t sessionless_timeout_ms; /* zookeeper.nio.sessionlessCnxnTimeout, default 10000 */
    /* the memory budget (bytes; DESIGN.md invariant 6, README "Limits") */
    int64_t max_buffered_bytes;     /* larch.maxBufferedBytes, default 256 MiB */
    int64_t conn_max_buffer_bytes;  /* larch.connection.maxBufferBytes, default 2 frames */
    int64_t conn_out_high_water_bytes; /* larch.connection.outputHighWaterBytes, default 1 MiB */
    int64_t conn_max_unsent_bytes;  /* larch.connection.maxUnsentBytes, default 16 MiB */
    /* the ensemble (server.N and the keys that go with it). A configuration
     * that asks for replicated mode is refused by config_finish, naming the
     * line: larchd cannot take part in a quorum yet, and running alone would
     * acknowledge writes no quorum holds (split brain). */
    int32_t init_limit;             /* initLimit (ticks), 0 = unset */
    int32_t sync_limit;             /* syncLimit (ticks), 0 = unset */
    bool standalone_enabled;        /* standaloneEnabled, default true */
    bool reconfig_enabled;          /* reconfigEnabled, default false */
    char peer_type[16];             /* peerType: "participant" (default) or "observer" */
    char dynamic_config_file[4096]; /* dynamicConfigFile: more server.N lines */
    uint32_t n_servers;
    struct config_server servers[CONFIG_SERVERS_MAX];
    /* larchd-only (flags, and the same names as zoo.cfg keys) */
    int32_t workers;                /* --workers / larch.workers, default: cores - 1, at least 1 */
    int32_t log_level;              /* --log-level: 0 error .. 3 debug, default 2 (info) */
    bool inline_sequencer;          /* --inline-sequencer / larch.inlineSequencer; unset: auto */
    bool inline_sequencer_set;      /* given explicitly (else main decides from CPU affinity) */
    /* which of the above were set explicitly (bit per field is overkill: only what
     * derived defaults need) */
    bool min_session_set, max_session_set, data_log_dir_set, conn_max_buffer_set;
};

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

/* True when the server.N lines ask for replicated mode: more than one
 * participant, or standaloneEnabled=false (ZooKeeper's isDistributed). */
bool config_is_distributed(const struct config *c);

/* Parses argv (argv[0] is the program name). Flags override the file: when
 * --config is present the file is parsed first, then every flag. Sets
 * *want_help / *want_version for --help / --version. Returns 0 or -1 after
 * reporting the offending flag or value. */
int config_from_args(struct config *c, int argc, char **argv, config_report_fn report, void *arg,
                     bool *want_help, bool *want_version);

/* Computes derived defaults and checks cross-field rules (min <= max session
 * timeout, port in 1..65535, workers in 1..64, ...). Returns 0 or -1 after reporting. */
int config_finish(struct config *c, config_report_fn report, void *arg);

/* True when the four-letter word (e.g. "ruok") is allowed by the whitelist. */
bool config_4lw_allowed(const struct config *c, const char *word);

/* The --help text: every flag and every zoo.cfg key with its default. */
const char *config_usage(void);

/* Writes the effective configuration as "key=value\n" lines (for the conf 4lw). */
size_t config_format(const struct config *c, char *out, size_t cap);

#endif /* LARCH_SERVER_CONFIG_H */
