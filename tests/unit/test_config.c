/*
 * test_config — zoo.cfg parsing (java.util.Properties rules), value checks with
 * their exact messages and line numbers, flags overriding the file, derived
 * session timeouts, the 4lw whitelist, the "conf" view, and the ensemble as
 * this server takes part in it (myid, members, cluster id, Raft timing).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/config.h"

/* ------------------------------------------------------------------ capture */

#define MSGS_MAX 32

struct msgs {
    int n, errors, warnings;
    int severity[MSGS_MAX];
    char text[MSGS_MAX][CONFIG_MSG_MAX];
};

static void collect(void *arg, int severity, const char *msg)
{
    struct msgs *m = arg;
    assert_true(m->n < MSGS_MAX);
    assert_true(strlen(msg) < CONFIG_MSG_MAX);
    m->severity[m->n] = severity;
    snprintf(m->text[m->n], CONFIG_MSG_MAX, "%s", msg);
    m->n++;
    if (severity == 1)
        m->errors++;
    else
        m->warnings++;
}

/* True if some message of that severity equals want exactly. */
static bool has_msg(const struct msgs *m, int severity, const char *want)
{
    for (int i = 0; i < m->n; i++)
        if (m->severity[i] == severity && strcmp(m->text[i], want) == 0)
            return true;
    return false;
}

static void dump_msgs(const struct msgs *m)
{
    for (int i = 0; i < m->n; i++)
        fprintf(stderr, "  [%s] %s\n", m->severity[i] ? "error" : "warning", m->text[i]);
}

static int parse(struct config *c, struct msgs *m, const char *text)
{
    memset(m, 0, sizeof *m);
    config_defaults(c);
    return config_parse_text(c, text, strlen(text), "zoo.cfg", collect, m);
}

/* Runs config_from_args on "larchd" plus the NULL-terminated arguments. */
static int args(struct config *c, struct msgs *m, bool *help, bool *version, ...)
    __attribute__((sentinel));
static int args(struct config *c, struct msgs *m, bool *help, bool *version, ...)
{
    char *argv[32];
    int argc = 0;
    va_list ap;
    argv[argc++] = "larchd";
    va_start(ap, version);
    for (char *a = va_arg(ap, char *); a != NULL; a = va_arg(ap, char *)) {
        assert_true(argc < 31);
        argv[argc++] = a;
    }
    va_end(ap);
    argv[argc] = NULL;
    memset(m, 0, sizeof *m);
    config_defaults(c);
    return config_from_args(c, argc, argv, collect, m, help, version);
}

/* Writes text to a fresh temp file; path must hold 64 bytes. */
static void write_temp(char *path, const char *text)
{
    snprintf(path, 64, "/tmp/larch-test-config-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t len = strlen(text);
    assert_int_equal(write(fd, text, len), (ssize_t)len);
    assert_int_equal(close(fd), 0);
}

/* ------------------------------------------------------------------ defaults */

static void test_defaults(void **state)
{
    struct config c;
    struct msgs m = { 0 };
    config_defaults(&c);
    assert_int_equal(c.tick_time_ms, 2000);
    assert_string_equal(c.data_dir, "");
    assert_int_equal(c.client_port, 2181);
    assert_string_equal(c.client_port_address, "127.0.0.1");
    assert_int_equal(c.min_session_timeout_ms, -1);
    assert_int_equal(c.max_session_timeout_ms, -1);
    assert_int_equal(c.max_client_cnxns, 60);
    assert_string_equal(c.four_letter_words, "srvr");
    assert_false(c.read_only_mode);
    assert_string_equal(c.super_digest, "");
    assert_true(c.extended_types);
    assert_int_equal(c.max_buffer_bytes, 0xfffff);
    assert_int_equal(c.snap_count, 100000);
    assert_int_equal(c.autopurge_snap_retain, 3);
    assert_int_equal(c.autopurge_interval_h, 0);
    assert_int_equal(c.container_check_ms, 60000);
    assert_int_equal(c.global_outstanding_limit, 1000);
    assert_int_equal(c.max_cnxns, 0);
    assert_int_equal(c.sessionless_timeout_ms, 10000);
    assert_int_equal(c.max_buffered_bytes, 256 << 20);
    assert_int_equal(c.conn_out_high_water_bytes, 1 << 20);
    assert_int_equal(c.conn_max_unsent_bytes, 16 << 20);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    long want = cpus > 1 ? cpus - 1 : 1;
    assert_int_equal(c.workers, want > 64 ? 64 : want);
    assert_int_equal(c.log_level, 2);
    assert_false(c.min_session_set || c.max_session_set || c.data_log_dir_set);

    assert_int_equal(config_finish(&c, collect, &m), 0);
    assert_int_equal(m.n, 0);
    assert_int_equal(c.min_session_timeout_ms, 4000);
    assert_int_equal(c.max_session_timeout_ms, 40000);
    assert_string_equal(c.data_log_dir, "");
    assert_int_equal(c.conn_max_buffer_bytes, 2 * (0xfffff + 4)); /* two frames */
}

/* The memory budget's keys and their cross-field rules (dataplane/conn.c):
 * each rule broken is an error naming the keys, and a valid set is taken. */
static void test_memory_budget_keys(void **state)
{
    struct config c;
    struct msgs m;
    assert_int_equal(parse(&c, &m, "larch.maxBufferedBytes=8388608\n"
                                   "larch.connection.maxBufferBytes=4194304\n"
                                   "larch.connection.outputHighWaterBytes=65536\n"
                                   "larch.connection.maxUnsentBytes=131072\n"
                                   "maxCnxns=500\n"
                                   "zookeeper.nio.sessionlessCnxnTimeout=1500\n"), 0);
    assert_int_equal(m.n, 0);
    assert_int_equal(config_finish(&c, collect, &m), 0);
    assert_int_equal(c.max_buffered_bytes, 8388608);
    assert_int_equal(c.conn_max_buffer_bytes, 4194304);
    assert_int_equal(c.conn_out_high_water_bytes, 65536);
    assert_int_equal(c.conn_max_unsent_bytes, 131072);
    assert_int_equal(c.max_cnxns, 500);
    assert_int_equal(c.sessionless_timeout_ms, 1500);
    /* a key with a "set" flag records that it was given (it was lost for
     * booleans: larch.inlineSequencer=false did not override the auto choice) */
    assert_int_equal(parse(&c, &m, "larch.inlineSequencer=false\n"), 0);
    assert_true(c.inline_sequencer_set);
    assert_false(c.inline_sequencer);
    assert_int_equal(parse(&c, &m, "nio.sessionlessCnxnTimeout=2500\n"), 0);
    assert_int_equal(c.sessionless_timeout_ms, 2500);

    /* the derived default follows jute.maxbuffer */
    assert_int_equal(parse(&c, &m, "jute.maxbuffer=4000000\n"), 0);
    assert_int_equal(config_finish(&c, collect, &m), 0);
    assert_int_equal(c.conn_max_buffer_bytes, 8000008);

    assert_int_equal(parse(&c, &m, "larch.connection.maxBufferBytes=1000000\n"), 0);
    assert_int_equal(config_finish(&c, collect, &m), -1);
    assert_true(has_msg(&m, 1, "larchd: larch.connection.maxBufferBytes=1000000 must be at least "
                               "2097158 (two frames of jute.maxbuffer=1048575)"));
    assert_int_equal(parse(&c, &m, "larch.connection.outputHighWaterBytes=2000000\n"
                                   "larch.connection.maxUnsentBytes=1000000\n"), 0);
    assert_int_equal(config_finish(&c, collect, &m), -1);
    assert_true(has_msg(&m, 1, "larchd: larch.connection.maxUnsentBytes=1000000 must be at least "
                               "larch.connection.outputHighWaterBytes=2000000"));
    assert_int_equal(parse(&c, &m, "larch.maxBufferedBytes=2000000\n"), 0);
    assert_int_equal(config_finish(&c, collect, &m), -1);
    assert_true(has_msg(&m, 1, "larchd: larch.maxBufferedBytes=2000000 must be at least "
                               "larch.connection.maxBufferBytes=2097158"));
}

/* ------------------------------------------------------------------ keys */

static void test_every_key(void **state)
{
    struct config c;
    struct msgs m;
    const char *cfg = "tickTime=1000\n"
                      "dataDir=/var/lib/larch\n"
                      "dataLogDir=/var/log/larch\n"
                      "clientPort=2281\n"
                      "clientPortAddress=0.0.0.0\n"
                      "minSessionTimeout=3000\n"
                      "maxSessionTimeout=90000\n"
                      "maxClientCnxns=0\n"
                      "4lw.commands.whitelist=ruok,stat\n"
                      "readonlymode.enabled=TRUE\n"
                      "snapCount=5000\n"
                      "autopurge.snapRetainCount=7\n"
                      "autopurge.purgeInterval=24\n"
                      "globalOutstandingLimit=2000\n"
                      "znode.container.checkIntervalMs=5000000000\n"
                      "jute.maxbuffer=4194304\n"
                      "zookeeper.extendedTypesEnabled=false\n"
                      "DigestAuthenticationProvider.superDigest=super:D/InIHSb7yEEbrWz8b9l71RjZJU=\n"
                      "larch.workers=3\n"
                      "larch.logLevel=DEBUG\n"
                      "larch.logFile=/var/log/larch/larchd.log\n"
                      "larch.udp=[::1]:2282\n";
    assert_int_equal(parse(&c, &m, cfg), 0);
    if (m.n)
        dump_msgs(&m);
    assert_int_equal(m.n, 0);
    assert_int_equal(c.tick_time_ms, 1000);
    assert_string_equal(c.data_dir, "/var/lib/larch");
    assert_string_equal(c.data_log_dir, "/var/log/larch");
    assert_true(c.data_log_dir_set);
    assert_int_equal(c.client_port, 2281);
    assert_string_equal(c.client_port_address, "0.0.0.0");
    assert_int_equal(c.min_session_timeout_ms, 3000);
    assert_true(c.min_session_set);
    assert_int_equal(c.max_session_timeout_ms, 90000);
    assert_true(c.max_session_set);
    assert_int_equal(c.max_client_cnxns, 0);
    assert_string_equal(c.four_letter_words, "ruok,stat");
    assert_true(c.read_only_mode);
    assert_int_equal(c.snap_count, 5000);
    assert_int_equal(c.autopurge_snap_retain, 7);
    assert_int_equal(c.autopurge_interval_h, 24);
    assert_int_equal(c.global_outstanding_limit, 2000);
    assert_true(c.container_check_ms == 5000000000LL);
    assert_int_equal(c.max_buffer_bytes, 4194304);
    assert_false(c.extended_types);
    assert_string_equal(c.super_digest, "super:D/InIHSb7yEEbrWz8b9l71RjZJU=");
    assert_int_equal(c.workers, 3);
    assert_int_equal(c.log_level, 3);
    assert_string_equal(c.log_file, "/var/log/larch/larchd.log");
    assert_string_equal(c.udp.host, "::1");
    assert_int_equal(c.udp.port, 2282);
}

/* Keys that ZooKeeper turns into system properties work with or without the
 * "zookeeper." prefix; keys it parses itself do not take the prefix. */
static void test_prefixed_keys(void **state)
{
    struct config c;
    struct msgs m;
    const char *cfg = "zookeeper.DigestAuthenticationProvider.superDigest=su:D/InIHSb7yEEbrWz8b9l71RjZJU=\n"
                      "zookeeper.jute.maxbuffer=1000\n"
                      "extendedTypesEnabled=false\n"
                      "zookeeper.snapCount=77\n"
                      "zookeeper.4lw.commands.whitelist=ruok\n"
                      "zookeeper.globalOutstandingLimit=9\n"
                      "zookeeper.znode.container.checkIntervalMs=11\n"
                      "zookeeper.tickTime=5\n";
    assert_int_equal(parse(&c, &m, cfg), 0);
    assert_string_equal(c.super_digest, "su:D/InIHSb7yEEbrWz8b9l71RjZJU=");
    assert_int_equal(c.max_buffer_bytes, 1000);
    assert_false(c.extended_types);
    assert_int_equal(c.snap_count, 77);
    assert_string_equal(c.four_letter_words, "ruok");
    assert_int_equal(c.global_outstanding_limit, 9);
    assert_int_equal(c.container_check_ms, 11);
    assert_int_equal(c.tick_time_ms, 2000);
    assert_int_equal(m.errors, 0);
    assert_int_equal(m.warnings, 1);
    assert_true(has_msg(&m, 0, "zoo.cfg:8: unknown key 'zookeeper.tickTime' ignored"));
}

/* ------------------------------------------------------------------ syntax */

static void test_separators_and_blanks(void **state)
{
    struct config c;
    struct msgs m;
    const char *cfg = "tickTime=3000\n"
                      "clientPort:2182\n"
                      "dataDir /var/zk   \n"
                      "  maxClientCnxns   =   10\t \n"
                      "\tsnapCount : 5000\n"
                      "dataLogDir = = odd\n"
                      "clientPortAddress\t::1\n"
                      "larch.logLevel warn\n";
    assert_int_equal(parse(&c, &m, cfg), 0);
    assert_int_equal(m.n, 0);
    assert_int_equal(c.tick_time_ms, 3000);
    assert_int_equal(c.client_port, 2182);
    assert_string_equal(c.data_dir, "/var/zk");
    assert_int_equal(c.max_client_cnxns, 10);
    assert_int_equal(c.snap_count, 5000);
    /* Properties eats one separator only: the second '=' is part of the value. */
    assert_string_equal(c.data_log_dir, "= odd");
    /* "key<blank>:" then the value: ":1" after the one ':' separator is eaten. */
    assert_string_equal(c.client_port_address, ":1");
    assert_int_equal(c.log_level, 1);
}

static void test_comments_and_line_endings(void **state)
{
    struct config c;
    struct msgs m;
    const char *cfg = "# a comment\r\n"
                      "! another comment\r\n"
                      "   # indented comment with clientPort=1\r\n"
                      "\r\n"
                      "   \t  \r\n"
                      "# comment ending in a backslash does not continue \\\n"
                      "tickTime=4000\r"
                      "clientPort=2999\r\n"
                      "maxClientCnxns=bad\n";
    assert_int_equal(parse(&c, &m, cfg), -1);
    assert_int_equal(c.tick_time_ms, 4000);
    assert_int_equal(c.client_port, 2999);
    /* \r\n and a lone \r each end one line: maxClientCnxns is on line 9. */
    assert_int_equal(m.n, 1);
    assert_true(has_msg(&m, 1, "zoo.cfg:9: maxClientCnxns: 'bad' is not a number"));
}

static void test_continuation(void **state)
{
    struct config c;
    struct msgs m;
    const char *cfg = "dataDir=/var/\\\n"
                      "      lib/\\\n"
                      "\t#not-a-comment\n"
                      "4lw.commands.whitelist = ruok, \\\n"
                      "    stat, \\\n"
                      "    mntr\n"
                      "dataLogDir=C:\\\\\\\\\n"     /* two escaped backslashes: no continuation */
                      "tickTime=\\\n"
                      "\n"                           /* a blank line ends the continuation */
                      "clientPort=x\n";
    assert_int_equal(parse(&c, &m, cfg), -1);
    assert_string_equal(c.data_dir, "/var/lib/#not-a-comment");
    assert_string_equal(c.four_letter_words, "ruok,stat,mntr");
    assert_string_equal(c.data_log_dir, "C:\\\\");
    /* tickTime got an empty value (line 8); the clientPort error is on line 10. */
    assert_int_equal(m.errors, 2);
    assert_true(has_msg(&m, 1, "zoo.cfg:8: tickTime: '' is not a number"));
    assert_true(has_msg(&m, 1, "zoo.cfg:10: clientPort: 'x' is not a port number (1-65535)"));
}

static void test_escapes(void **state)
{
    struct config c;
    struct msgs m;
    const char *cfg = "dataDir=c\\:\\\\zk\\u0041\\u00e9\n"
                      "data\\Log\\Dir=/x\n"
                      "clientPort\\u003d=1\n";
    assert_int_equal(parse(&c, &m, cfg), 0);
    assert_string_equal(c.data_dir, "c:\\zkA\xc3\xa9");
    /* Escaped letters in a key are the letters themselves. */
    assert_string_equal(c.data_log_dir, "/x");
    /* An escaped '=' belongs to the key, so this key is "clientPort=". */
    assert_int_equal(c.client_port, 2181);
    assert_true(has_msg(&m, 0, "zoo.cfg:3: unknown key 'clientPort=' ignored"));

    assert_int_equal(parse(&c, &m, "\n\ndataDir=\\u00zz\n"), -1);
    assert_true(has_msg(&m, 1, "zoo.cfg:3: malformed \\uxxxx escape"));
    assert_string_equal(c.data_dir, "");
}

/* ------------------------------------------------------------------ bad values */

struct bad_case {
    const char *line;
    const char *message; /* expected, after the "zoo.cfg:3: " prefix */
};

static const struct bad_case bad_cases[] = {
    { "larch.udp=127.0.0.1", "larch.udp: '127.0.0.1' is not IP:PORT (an address literal, [..] for IPv6, and a port 1-65535)" },
    { "larch.udp=127.0.0.1:0", "larch.udp: '127.0.0.1:0' is not IP:PORT (an address literal, [..] for IPv6, and a port 1-65535)" },
    { "larch.udp=::1:53", "larch.udp: '::1' is not an IPv4 address literal" },
    { "larch.udp=localhost:53", "larch.udp: 'localhost' is not an IPv4 address literal" },
    { "larch.udp=[198.18.0.1]:53", "larch.udp: '198.18.0.1' is not an IPv6 address literal" },
    { "larch.udp=:53", "larch.udp: ':53' is not IP:PORT (an address literal, [..] for IPv6, and a port 1-65535)" },
    { "clientPort=abc", "clientPort: 'abc' is not a port number (1-65535)" },
    { "clientPort=0", "clientPort: '0' is not a port number (1-65535)" },
    { "clientPort=65536", "clientPort: '65536' is not a port number (1-65535)" },
    { "tickTime=12x", "tickTime: '12x' is not a number" },
    { "tickTime=0x10", "tickTime: '0x10' is not a number" },
    { "tickTime=0", "tickTime: '0' is out of range (must be at least 1)" },
    { "tickTime=99999999999", "tickTime: '99999999999' is out of range (must be at least 1)" },
    { "tickTime=99999999999999999999", "tickTime: '99999999999999999999' is out of range (must be at least 1)" },
    { "maxClientCnxns=-1", "maxClientCnxns: '-1' is out of range (must be at least 0)" },
    { "minSessionTimeout=0", "minSessionTimeout: '0' must be a positive number of milliseconds, or -1" },
    { "minSessionTimeout=-2", "minSessionTimeout: '-2' must be a positive number of milliseconds, or -1" },
    { "maxSessionTimeout=soon", "maxSessionTimeout: 'soon' is not a number" },
    { "readonlymode.enabled=yes", "readonlymode.enabled: 'yes' is not true or false" },
    { "zookeeper.extendedTypesEnabled=1", "zookeeper.extendedTypesEnabled: '1' is not true or false" },
    { "snapCount=1", "snapCount: '1' is out of range (must be at least 2)" },
    { "autopurge.snapRetainCount=many", "autopurge.snapRetainCount: 'many' is not a number" },
    { "autopurge.purgeInterval=-2", "autopurge.purgeInterval: '-2' is out of range (must be at least 0)" },
    { "globalOutstandingLimit=0", "globalOutstandingLimit: '0' is out of range (must be at least 1)" },
    { "znode.container.checkIntervalMs=0", "znode.container.checkIntervalMs: '0' is out of range (must be at least 1)" },
    { "jute.maxbuffer=1 MB", "jute.maxbuffer: '1 MB' is not a number" },
    { "zookeeper.jute.maxbuffer=-5", "zookeeper.jute.maxbuffer: '-5' is out of range (must be between 1 and 16777216)" },
    { "jute.maxbuffer=16777217", "jute.maxbuffer: '16777217' is out of range (must be between 1 and 16777216)" },
    { "maxCnxns=-1", "maxCnxns: '-1' is out of range (must be at least 0)" },
    { "zookeeper.nio.sessionlessCnxnTimeout=0", "zookeeper.nio.sessionlessCnxnTimeout: '0' is out of range (must be at least 1)" },
    { "larch.maxBufferedBytes=1000", "larch.maxBufferedBytes: '1000' is out of range (must be at least 1048576)" },
    { "larch.connection.maxUnsentBytes=lots", "larch.connection.maxUnsentBytes: 'lots' is not a number" },
    { "DigestAuthenticationProvider.superDigest=nocolon", "DigestAuthenticationProvider.superDigest: 'nocolon' is not user:base64-digest" },
    { "DigestAuthenticationProvider.superDigest=:abcd", "DigestAuthenticationProvider.superDigest: ':abcd' is not user:base64-digest" },
    { "zookeeper.DigestAuthenticationProvider.superDigest=su:not base64!", "zookeeper.DigestAuthenticationProvider.superDigest: 'su:not base64!' is not user:base64-digest" },
    { "DigestAuthenticationProvider.superDigest=su:ab=c", "DigestAuthenticationProvider.superDigest: 'su:ab=c' is not user:base64-digest" },
    { "larch.workers=65", "larch.workers: '65' is out of range (must be between 1 and 64)" },
    { "larch.workers=0", "larch.workers: '0' is out of range (must be between 1 and 64)" },
    { "larch.logLevel=loud", "larch.logLevel: 'loud' is not a log level (error, warn, info, debug)" },
    { "clientPortAddress=", "clientPortAddress: an empty value is not allowed" },
};

/* Each malformed value is an error naming line 3, the key and the value, and
 * leaves the default in place. */
static void test_malformed_values(void **state)
{
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        struct config c, d;
        struct msgs m;
        char cfg[256], want[CONFIG_MSG_MAX];
        snprintf(cfg, sizeof cfg, "# header\n\n%s\n", bad_cases[i].line);
        snprintf(want, sizeof want, "zoo.cfg:3: %s", bad_cases[i].message);
        int rc = parse(&c, &m, cfg);
        if (rc != -1 || m.n != 1 || !has_msg(&m, 1, want)) {
            fprintf(stderr, "case '%s': rc %d, want '%s', got:\n", bad_cases[i].line, rc, want);
            dump_msgs(&m);
        }
        assert_int_equal(rc, -1);
        assert_int_equal(m.errors, 1);
        assert_int_equal(m.n, 1);
        assert_true(has_msg(&m, 1, want));
        config_defaults(&d);
        d.workers = c.workers; /* sysconf-derived, identical anyway */
        assert_memory_equal(&c, &d, sizeof c);
    }
}

static void test_every_error_reported(void **state)
{
    struct config c;
    struct msgs m;
    const char *cfg = "tickTime=abc\n"
                      "clientPort=2500\n"
                      "initLimit=10\n"
                      "maxClientCnxns=many\n"
                      "readonlymode.enabled=on\n"
                      "dataDir=/ok\n";
    assert_int_equal(parse(&c, &m, cfg), -1);
    assert_int_equal(m.errors, 3);
    assert_int_equal(m.warnings, 0);
    assert_int_equal(c.init_limit, 10);
    assert_true(has_msg(&m, 1, "zoo.cfg:1: tickTime: 'abc' is not a number"));
    assert_true(has_msg(&m, 1, "zoo.cfg:4: maxClientCnxns: 'many' is not a number"));
    assert_true(has_msg(&m, 1, "zoo.cfg:5: readonlymode.enabled: 'on' is not true or false"));
    /* Lines after an error still apply. */
    assert_int_equal(c.client_port, 2500);
    assert_string_equal(c.data_dir, "/ok");
}

static void test_unknown_keys_warn(void **state)
{
    struct config c;
    struct msgs m;
    const char *cfg = "tickTime=2000\n"
                      "initLimit=10\n"
                      "server.1=localhost:2888:3888\n"
                      "admin.rateLimiterIntervalInMS=1000\n"
                      "zookeeper.jvm.heap=1g\n"
                      "frobnicate=yes\n"
                      "ticktime=5\n"
                      "metricsProvider.numWorkerThreads=2\n";
    assert_int_equal(parse(&c, &m, cfg), 0);
    assert_int_equal(m.errors, 0);
    assert_int_equal(m.warnings, 5);
    assert_int_equal(c.n_servers, 1); /* server.1 and initLimit are read, not ignored */
    assert_true(has_msg(&m, 0, "zoo.cfg:4: key 'admin.rateLimiterIntervalInMS' is not used by larchd (standalone)"));
    assert_true(has_msg(&m, 0, "zoo.cfg:5: key 'zookeeper.jvm.heap' is not used by larchd (standalone)"));
    assert_true(has_msg(&m, 0, "zoo.cfg:6: unknown key 'frobnicate' ignored"));
    assert_true(has_msg(&m, 0, "zoo.cfg:7: unknown key 'ticktime' ignored (keys are case-sensitive: did you mean 'tickTime'?)"));
    assert_true(has_msg(&m, 0, "zoo.cfg:8: key 'metricsProvider.numWorkerThreads' is not used by larchd (standalone)"));
    assert_int_equal(c.tick_time_ms, 2000);
}

/* Fail closed: a security, TLS, SASL or quorum line larchd cannot honour is
 * an error naming it; the values that say what larchd does are accepted. */
static void test_unhonoured_keys_refused(void **state)
{
    struct config c;
    struct msgs m;
    const char *cfg = "ssl.quorum.crl=true\n"
                      "zookeeper.ssl.crl=true\n"
                      "sslQuorumReloadCertFiles=true\n"
                      "authProvider.9=com.example.KerberosAuthenticationProvider\n"
                      "kerberos.removeHostFromPrincipal=true\n"
                      "quorum.auth.enableSasl=true\n"
                      "skipACL=yes\n"
                      "zookeeper.allowSaslFailedClients=true\n"
                      "DigestAuthenticationProvider.digestAlg=SHA3-256\n"
                      "electionAlg=1\n";
    assert_int_equal(parse(&c, &m, cfg), -1);
    if (m.errors != 10)
        dump_msgs(&m);
    assert_int_equal(m.errors, 10);
    assert_int_equal(m.warnings, 0);
    assert_true(has_msg(&m, 1, "zoo.cfg:1: ssl.quorum.crl='true' cannot be honoured: larchd "
                               "does not check certificate revocation lists (accepted: false)"));
    assert_true(has_msg(&m, 1, "zoo.cfg:2: zookeeper.ssl.crl='true' cannot be honoured: larchd "
                               "does not check certificate revocation lists (accepted: false)"));
    assert_true(has_msg(&m, 1, "zoo.cfg:3: sslQuorumReloadCertFiles='true' cannot be honoured: "
                               "larchd reads the quorum's key and trust stores once, when it "
                               "starts (accepted: false)"));
    assert_true(has_msg(&m, 1, "zoo.cfg:4: authProvider.9='com.example.KerberosAuthenticationProvider' "
                               "cannot be honoured: larchd's authentication providers are digest "
                               "and ip, built in, sasl and x509 (accepted: "
                               "org.apache.zookeeper.server.auth.DigestAuthenticationProvider|"
                               "org.apache.zookeeper.server.auth.IPAuthenticationProvider|"
                               "org.apache.zookeeper.server.auth.SASLAuthenticationProvider|"
                               "org.apache.zookeeper.server.auth.X509AuthenticationProvider)"));
    assert_true(has_msg(&m, 1, "zoo.cfg:5: key 'kerberos.removeHostFromPrincipal' cannot be "
                               "honoured: larchd's SASL is DIGEST-MD5 with a JAAS file's users: no "
                               "Kerberos (GSSAPI) (remove the line to run without it)"));
    assert_true(has_msg(&m, 1, "zoo.cfg:6: quorum.auth.enableSasl='true' cannot be honoured: "
                               "larchd has no SASL on the quorum links (accepted: false)"));
    assert_true(has_msg(&m, 1, "zoo.cfg:7: skipACL='yes' cannot be honoured: larchd always checks "
                               "ACLs (accepted: no)"));
    assert_true(has_msg(&m, 1, "zoo.cfg:8: zookeeper.allowSaslFailedClients='true' cannot be "
                               "honoured: larchd closes a connection whose SASL login fails, as "
                               "ZooKeeper does by default (accepted: false)"));

    /* what larchd does anyway is accepted, in any case */
    cfg = "sslQuorum=false\n"
          "zookeeper.sessionRequireClientSASLAuth=FALSE\n"
          "authProvider.1=org.apache.zookeeper.server.auth.DigestAuthenticationProvider\n"
          "quorum.auth.enableSasl=false\n"
          "skipACL=no\n"
          "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n"
          "audit.enable=false\n"
          "electionAlg=3\n";
    assert_int_equal(parse(&c, &m, cfg), 0);
    assert_int_equal(m.n, 0);
}

/* zookeeper.enforce.auth.*: the schemes larchd authenticates; any other
 * is refused by line, and enabling it without a scheme is an error, as in
 * ZooKeeper's AuthenticationHelper. */
static void test_enforce_auth_keys(void **state)
{
    struct config c;
    struct msgs m;
    assert_int_equal(parse(&c, &m, "enforce.auth.enabled=true\n"
                                   "zookeeper.enforce.auth.schemes= digest , ip\n"), 0);
    assert_int_equal(config_finish(&c, collect, &m), 0);
    assert_true(c.enforce_auth_enabled);
    assert_int_equal(c.enforce_auth_mask, CONFIG_AUTH_DIGEST | CONFIG_AUTH_IP);

    assert_int_equal(parse(&c, &m, "enforce.auth.enabled=true\n"
                                   "enforce.auth.schemes=digest,sasl,kerberos\n"), -1);
    assert_int_equal(m.errors, 1);
    assert_true(has_msg(&m, 1, "zoo.cfg:2: enforce.auth.schemes: authentication scheme "
                               "'kerberos' is not available (larchd authenticates digest, ip, "
                               "sasl and x509)"));
    assert_int_equal(c.enforce_auth_mask, 0);

    assert_int_equal(parse(&c, &m, "zookeeper.enforce.auth.enabled=true\n"), 0);
    assert_int_equal(config_finish(&c, collect, &m), -1);
    assert_true(has_msg(&m, 1, "larchd: zookeeper.enforce.auth.enabled is true: "
                               "zookeeper.enforce.auth.schemes must name a scheme (digest, ip, "
                               "sasl, x509)"));
}

#define SASL_PROVIDER_LINE "authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n"

/* SASL: the JAAS file in either spelling, the provider, superUser[.X],
 * sessionRequireClientSASLAuth as enforce.auth with sasl alone, and the
 * section's name. */
static void test_sasl_keys(void **state)
{
    struct config c;
    struct msgs m;
    assert_int_equal(parse(&c, &m, "jaasLoginConfig=/etc/zookeeper/jaas.conf\n"
                                   SASL_PROVIDER_LINE
                                   "enforce.auth.enabled=true\n"
                                   "enforce.auth.schemes=digest\n"
                                   "zookeeper.sessionRequireClientSASLAuth=true\n"
                                   "superUser=admin\n"
                                   "zookeeper.superUser.2=root\n"
                                   "superUser=boss\n"
                                   "zookeeper.sasl.serverconfig=ZkServer\n"), 0);
    assert_int_equal(m.n, 0);
    assert_int_equal(config_finish(&c, collect, &m), 0);
    assert_int_equal(m.n, 0);
    assert_string_equal(c.jaas_file, "/etc/zookeeper/jaas.conf");
    assert_string_equal(c.sasl_section, "ZkServer");
    assert_true(config_sasl_provider(&c));
    /* sessionRequireClientSASLAuth wins over enforce.auth.schemes */
    assert_true(c.enforce_auth_enabled);
    assert_int_equal(c.enforce_auth_mask, CONFIG_AUTH_SASL);
    /* a key given again replaces its value, as a system property would */
    assert_int_equal(c.n_sasl_super_users, 2);
    assert_string_equal(c.sasl_super_users[0].key, "superUser");
    assert_string_equal(c.sasl_super_users[0].value, "boss");
    assert_string_equal(c.sasl_super_users[1].key, "superUser.2");
    assert_string_equal(c.sasl_super_users[1].value, "root");

    /* the JVM property's spelling, and enforce.auth naming sasl with others */
    assert_int_equal(parse(&c, &m, "java.security.auth.login.config=/j.conf\n" SASL_PROVIDER_LINE
                                   "enforce.auth.enabled=true\n"
                                   "enforce.auth.schemes=sasl, digest\n"), 0);
    assert_int_equal(config_finish(&c, collect, &m), 0);
    assert_string_equal(c.jaas_file, "/j.conf");
    assert_string_equal(c.sasl_section, "Server");
    assert_int_equal(c.enforce_auth_mask, CONFIG_AUTH_SASL | CONFIG_AUTH_DIGEST);

    /* the provider given and taken back (authProvider.1 again) */
    assert_int_equal(parse(&c, &m, SASL_PROVIDER_LINE "authProvider.1=org.apache.zookeeper."
                                   "server.auth.DigestAuthenticationProvider\n"
                                   "authProvider.2=org.apache.zookeeper.server.auth."
                                   "IPAuthenticationProvider\njaasLoginConfig=/j.conf\n"), 0);
    assert_false(config_sasl_provider(&c));
    assert_int_equal(config_finish(&c, collect, &m), 0);
    assert_true(has_msg(&m, 0, "larchd: a JAAS file without authProvider.N=org.apache.zookeeper."
                               "server.auth.SASLAuthenticationProvider: clients may log in with "
                               "SASL, but, as in ZooKeeper, sasl ACLs are refused and match no "
                               "one"));

    /* --jaas gives the file too, over the zoo.cfg's */
    bool help, version;
    config_defaults(&c);
    memset(&m, 0, sizeof m);
    assert_int_equal(args(&c, &m, &help, &version, "--jaas", "/k.conf", NULL), 0);
    assert_string_equal(c.jaas_file, "/k.conf");
}

/* Every SASL setting needs the JAAS file; enforcing sasl needs its
 * provider, as ZooKeeper's AuthenticationHelper says at startup. */
static void test_sasl_settings_need_jaas_and_provider(void **state)
{
    struct config c;
    struct msgs m;
    assert_int_equal(parse(&c, &m, "sessionRequireClientSASLAuth=true\n"), 0);
    assert_int_equal(config_finish(&c, collect, &m), -1);
    assert_int_equal(m.errors, 2);
    assert_true(has_msg(&m, 1, "larchd: sessionRequireClientSASLAuth=true: authentication scheme "
                               "sasl is not available without authProvider.N=org.apache."
                               "zookeeper.server.auth.SASLAuthenticationProvider"));
    assert_true(has_msg(&m, 1, "larchd: sessionRequireClientSASLAuth=true needs the JAAS file "
                               "with the SASL users (jaasLoginConfig=FILE, java.security.auth."
                               "login.config=FILE or --jaas FILE)"));

    assert_int_equal(parse(&c, &m, "enforce.auth.enabled=true\nenforce.auth.schemes=sasl\n"
                                   "jaasLoginConfig=/j.conf\n"), 0);
    assert_int_equal(config_finish(&c, collect, &m), -1);
    assert_true(has_msg(&m, 1, "larchd: zookeeper.enforce.auth.schemes: authentication scheme "
                               "sasl is not available without authProvider.N=org.apache."
                               "zookeeper.server.auth.SASLAuthenticationProvider"));

    static const char *const lonely[][2] = {
        { SASL_PROVIDER_LINE, "authProvider.N=org.apache.zookeeper.server.auth."
                              "SASLAuthenticationProvider" },
        { "zookeeper.superUser.ops=alice\n", "superUser.ops" },
        { "sasl.serverconfig=ZkServer\n", "zookeeper.sasl.serverconfig" },
    };
    for (size_t i = 0; i < sizeof lonely / sizeof lonely[0]; i++) {
        char want[CONFIG_MSG_MAX];
        snprintf(want, sizeof want, "larchd: %s needs the JAAS file with the SASL users "
                 "(jaasLoginConfig=FILE, java.security.auth.login.config=FILE or --jaas FILE)",
                 lonely[i][1]);
        assert_int_equal(parse(&c, &m, lonely[i][0]), 0);
        assert_int_equal(config_finish(&c, collect, &m), -1);
        assert_int_equal(m.errors, 1);
        assert_true(has_msg(&m, 1, want));
    }
    /* the SASL client's and Kerberos's keys stay refused, by line */
    assert_int_equal(parse(&c, &m, "jaasLoginConfig=/j.conf\nzookeeper.sasl.client=true\n"
                                   "jaasLoginRenew=3600000\n"), -1);
    assert_int_equal(m.errors, 2);
    assert_true(has_msg(&m, 1, "zoo.cfg:2: key 'zookeeper.sasl.client' cannot be honoured: "
                               "larchd's SASL is DIGEST-MD5 with a JAAS file's users: no Kerberos "
                               "(GSSAPI) and no SASL client settings (sasl.serverconfig is "
                               "served) (remove the line to run without it)"));
    assert_true(has_msg(&m, 1, "zoo.cfg:3: key 'jaasLoginRenew' cannot be honoured: larchd's "
                               "SASL is DIGEST-MD5 with a JAAS file's users: no Kerberos (GSSAPI) "
                               "tickets to renew (remove the line to run without it)"));
}

/* metricsProvider.*: ZooKeeper's two providers, its host and port keys;
 * metrics over TLS cannot be honoured. */
static void test_metrics_provider_keys(void **state)
{
    struct config c;
    struct msgs m;
    assert_int_equal(parse(&c, &m, ""), 0);
    assert_false(c.metrics_prometheus);
    assert_string_equal(c.metrics_http_host, "0.0.0.0");
    assert_int_equal(c.metrics_http_port, 7000);
    assert_int_equal(parse(&c, &m, "metricsProvider.className=org.apache.zookeeper.metrics."
                                   "prometheus.PrometheusMetricsProvider\n"
                                   "metricsProvider.httpHost=127.0.0.9\n"
                                   "metricsProvider.httpPort=7100\n"
                                   "metricsProvider.exportJvmInfo=false\n"), 0);
    assert_int_equal(m.n, 0);
    assert_true(c.metrics_prometheus);
    assert_string_equal(c.metrics_http_host, "127.0.0.9");
    assert_int_equal(c.metrics_http_port, 7100);
    assert_int_equal(parse(&c, &m, "metricsProvider.className=org.apache.zookeeper.metrics."
                                   "impl.DefaultMetricsProvider\n"), 0);
    assert_false(c.metrics_prometheus);
    assert_int_equal(parse(&c, &m, "metricsProvider.className=Foo\n"
                                   "metricsProvider.httpsPort=7443\n"
                                   "metricsProvider.httpPort=70000\n"), -1);
    assert_int_equal(m.errors, 3);
    assert_true(has_msg(&m, 1, "zoo.cfg:1: metricsProvider.className: 'Foo' cannot be honoured: "
                               "larchd serves org.apache.zookeeper.metrics.prometheus."
                               "PrometheusMetricsProvider or org.apache.zookeeper.metrics.impl."
                               "DefaultMetricsProvider"));
    assert_true(has_msg(&m, 1, "zoo.cfg:2: key 'metricsProvider.httpsPort' cannot be honoured: "
                               "larchd has no TLS for /metrics (remove the line to run without "
                               "it)"));
}

/* admin.*: ZooKeeper's AdminServer keys with its defaults but for
 * enableServer (off unless asked for); HTTPS, client certificates and the
 * snapshot and restore commands cannot be honoured, each refused by line. */
static void test_admin_server_keys(void **state)
{
    struct config c;
    struct msgs m;
    assert_int_equal(parse(&c, &m, ""), 0);
    assert_false(c.admin_enabled);
    assert_string_equal(c.admin_host, "0.0.0.0");
    assert_int_equal(c.admin_port, 8080);
    assert_string_equal(c.admin_command_url, "/commands");
    assert_int_equal(c.admin_idle_timeout_ms, 30000);
    assert_int_equal(parse(&c, &m, "admin.enableServer=true\n"
                                   "admin.serverAddress=127.0.0.9\n"
                                   "zookeeper.admin.serverPort=0\n"
                                   "admin.commandURL=/zk/cmd\n"
                                   "admin.idleTimeout=1500\n"
                                   "admin.forceHttps=false\n"
                                   "admin.portUnification=false\n"
                                   "admin.needClientAuth=false\n"
                                   "admin.httpVersion=11\n"
                                   "admin.snapshot.enabled=false\n"
                                   "admin.restore.enabled=false\n"), 0);
    assert_int_equal(m.n, 0);
    assert_true(c.admin_enabled);
    assert_string_equal(c.admin_host, "127.0.0.9");
    assert_int_equal(c.admin_port, 0);
    assert_string_equal(c.admin_command_url, "/zk/cmd");
    assert_int_equal(c.admin_idle_timeout_ms, 1500);
    assert_int_equal(parse(&c, &m, "admin.forceHttps=true\n"
                                   "zookeeper.admin.portUnification=true\n"
                                   "admin.needClientAuth=true\n"
                                   "admin.snapshot.enabled=true\n"
                                   "admin.restore.enabled=true\n"
                                   "admin.httpVersion=20\n"
                                   "ssl.quorum.keyStore.type=JKS\n"
                                   "admin.serverPort=65536\n"
                                   "admin.commandURL=commands\n"
                                   "admin.commandURL=/commands/\n"
                                   "admin.commandURL=/a\"b\n"
                                   "admin.idleTimeout=0\n"
                                   "admin.enableServer=yes\n"), -1);
    if (m.errors != 13)
        dump_msgs(&m);
    assert_int_equal(m.errors, 13);
    assert_true(has_msg(&m, 1, "zoo.cfg:1: admin.forceHttps='true' cannot be honoured: larchd "
                               "has no TLS for the AdminServer (accepted: false)"));
    assert_true(has_msg(&m, 1, "zoo.cfg:2: zookeeper.admin.portUnification='true' cannot be "
                               "honoured: larchd has no TLS for the AdminServer (accepted: "
                               "false)"));
    assert_true(has_msg(&m, 1, "zoo.cfg:3: admin.needClientAuth='true' cannot be honoured: "
                               "larchd has no TLS for the AdminServer (client certificates) "
                               "(accepted: false)"));
    assert_true(has_msg(&m, 1, "zoo.cfg:4: admin.snapshot.enabled='true' cannot be honoured: "
                               "larchd's AdminServer does not serve snapshot (accepted: false)"));
    assert_true(has_msg(&m, 1, "zoo.cfg:5: admin.restore.enabled='true' cannot be honoured: "
                               "larchd's AdminServer does not serve restore (accepted: false)"));
    assert_true(has_msg(&m, 1, "zoo.cfg:6: admin.httpVersion='20' cannot be honoured: larchd's "
                               "AdminServer speaks HTTP/1.1 only (accepted: 11)"));
    assert_true(has_msg(&m, 1, "zoo.cfg:7: ssl.quorum.keyStore.type: larchd cannot read Java "
                               "keystores (JKS): convert it to PKCS12 (keytool -importkeystore "
                               "-srckeystore F.jks -destkeystore F.p12 -deststoretype PKCS12) "
                               "or PEM"));
    assert_true(has_msg(&m, 1, "zoo.cfg:9: admin.commandURL: 'commands' is not a URL path "
                               "larchd serves ('/' then letters, digits, '-', '.', '_', '~' or "
                               "'/', not ending in '/')"));
    assert_true(has_msg(&m, 1, "zoo.cfg:10: admin.commandURL: '/commands/' is not a URL path "
                               "larchd serves ('/' then letters, digits, '-', '.', '_', '~' or "
                               "'/', not ending in '/')"));
}

/* A zoo.cfg without clientPortAddress listens on every interface, as
 * ZooKeeper does; without a zoo.cfg larchd keeps to loopback. */
static void test_config_file_binds_all_interfaces(void **state)
{
    struct config c;
    struct msgs m = { 0 };
    bool help, version;
    char path[64];
    write_temp(path, "tickTime=2000\n");
    config_defaults(&c);
    assert_string_equal(c.client_port_address, "127.0.0.1");
    assert_int_equal(config_load(&c, path, collect, &m), 0);
    assert_string_equal(c.client_port_address, "0.0.0.0");
    assert_int_equal(args(&c, &m, &help, &version, "--bind", "127.0.0.5", "--config", path, NULL),
                     0);
    assert_string_equal(c.client_port_address, "127.0.0.5");
    unlink(path);
    write_temp(path, "clientPortAddress=127.0.0.6\n");
    assert_int_equal(args(&c, &m, &help, &version, "--config", path, NULL), 0);
    assert_string_equal(c.client_port_address, "127.0.0.6");
    unlink(path);
    assert_int_equal(args(&c, &m, &help, &version, "--port", "2300", NULL), 0);
    assert_string_equal(c.client_port_address, "127.0.0.1");
}

/* ------------------------------------------------------------------ server.N */

static void test_server_lines_parse(void **state)
{
    struct config c;
    struct msgs m;
    const char *cfg = "server.1=zk1.example:2888:3888\n"
                      "server.2 = 127.0.0.4:2889:3889:participant;2182\n"
                      "server.3=[::1]:2890:3890:OBSERVER;[::1]:2183\n"
                      "server.17=h:1:65535;0.0.0.0:2184\n";
    assert_int_equal(parse(&c, &m, cfg), 0);
    assert_int_equal(m.n, 0);
    assert_int_equal(c.n_servers, 4);
    assert_int_equal(c.servers[0].id, 1);
    assert_string_equal(c.servers[0].host, "zk1.example");
    assert_int_equal(c.servers[0].quorum_port, 2888);
    assert_int_equal(c.servers[0].election_port, 3888);
    assert_false(c.servers[0].observer);
    assert_int_equal(c.servers[0].client_port, 0);
    assert_string_equal(c.servers[0].where, "zoo.cfg:1");
    assert_int_equal(c.servers[1].client_port, 2182);
    assert_string_equal(c.servers[1].client_address, "");
    assert_string_equal(c.servers[2].host, "::1");
    assert_true(c.servers[2].observer);
    assert_string_equal(c.servers[2].client_address, "::1");
    assert_int_equal(c.servers[2].client_port, 2183);
    assert_int_equal(c.servers[3].id, 17);
    assert_string_equal(c.servers[3].client_address, "0.0.0.0");
    assert_string_equal(c.servers[3].where, "zoo.cfg:4");
    char out[4096];
    config_format(&c, out, sizeof out);
    assert_non_null(strstr(out, "server.1=zk1.example:2888:3888:participant\n"));
    assert_non_null(strstr(out, "server.2=127.0.0.4:2889:3889:participant;2182\n"));
    assert_non_null(strstr(out, "server.3=[::1]:2890:3890:observer;[::1]:2183\n"));
}

static void test_server_line_errors(void **state)
{
    static const struct {
        const char *line, *want;
    } cases[] = {
        { "server.0=h:1:2", "zoo.cfg:1: server.0: '0' is not a server id (1-255)" },
        { "server.256=h:1:2", "zoo.cfg:1: server.256: '256' is not a server id (1-255)" },
        { "server.x=h:1:2", "zoo.cfg:1: server.x: 'x' is not a server id (1-255)" },
        { "server.1=h:1", "zoo.cfg:1: server.1: 'h:1' is not host:quorumPort:electionPort"
                          "[:participant|observer][;[clientAddress:]clientPort]" },
        { "server.1=h:1:70000", "zoo.cfg:1: server.1: 'h:1:70000' is not host:quorumPort:"
                                "electionPort[:participant|observer][;[clientAddress:]clientPort]" },
        { "server.1=h:1:2:leader", "zoo.cfg:1: server.1: 'h:1:2:leader' is not host:quorumPort:"
                                   "electionPort[:participant|observer][;[clientAddress:]clientPort]" },
        { "server.1=h:1:2;port", "zoo.cfg:1: server.1: 'h:1:2;port' is not host:quorumPort:"
                                 "electionPort[:participant|observer][;[clientAddress:]clientPort]" },
        { "server.1=[::1:1:2", "zoo.cfg:1: server.1: '[::1:1:2' is not host:quorumPort:"
                               "electionPort[:participant|observer][;[clientAddress:]clientPort]" },
        { "server.1=a:1:2|b:1:2", "zoo.cfg:1: server.1: several addresses for one server "
                                  "(multiAddress) are not supported" },
        { "group.1=1:2:3", "zoo.cfg:1: 'group.1': hierarchical quorums (group.N, weight.N) are "
                           "not supported: larchd counts a majority of participants" },
        { "initLimit=0", "zoo.cfg:1: initLimit: '0' is out of range (must be at least 1)" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct config c;
        struct msgs m;
        assert_int_equal(parse(&c, &m, cases[i].line), -1);
        if (m.n != 1 || !has_msg(&m, 1, cases[i].want)) {
            dump_msgs(&m);
            fail_msg("case %zu: want %s", i, cases[i].want);
        }
        assert_int_equal(c.n_servers, 0);
    }
    struct config c;
    struct msgs m;
    assert_int_equal(parse(&c, &m, "server.1=a:1:2\nserver.1=b:1:2\n"), -1);
    assert_true(has_msg(&m, 1, "zoo.cfg:2: server.1: given twice (first at zoo.cfg:1)"));
    assert_int_equal(c.n_servers, 1);
}

/* Two participants, or a lone one with standaloneEnabled=false, ask for an
 * ensemble: larchd runs as a member, which needs a dataDir (its id, vote
 * and log); never a silent standalone (split brain). */
/* larch.dpdk serves larch.udp's address: without one (or with IPv6) it is
 * an error, not a server that silently serves nothing. */
static void test_dpdk_needs_an_ipv4_udp_address(void **state)
{
    struct config c;
    struct msgs m;
    static const char *const want = "larchd: larch.dpdk (--dpdk) needs larch.udp (--udp) "
                                    "with an IPv4 address: the one the DPDK port answers for";
    assert_int_equal(parse(&c, &m, "larch.dpdk=--no-huge --vdev net_null0\n"), 0);
    assert_int_equal(c.dpdk_cores, 1);
    assert_int_equal(config_finish(&c, collect, &m), -1);
    assert_true(has_msg(&m, 1, want));
    assert_int_equal(parse(&c, &m, "larch.dpdk=--no-huge\nlarch.udp=[::1]:2182\n"), 0);
    assert_int_equal(config_finish(&c, collect, &m), -1);
    assert_true(has_msg(&m, 1, want));
    assert_int_equal(parse(&c, &m, "larch.dpdk=-l 0-2 --no-huge\nlarch.udp=198.18.0.1:2182\n"
                                   "larch.dpdkCores=2\n"), 0);
    assert_int_equal(config_finish(&c, collect, &m), 0);
    assert_string_equal(c.dpdk, "-l 0-2 --no-huge");
    assert_int_equal(c.dpdk_cores, 2);
    (void)state;
}

static void test_replicated_mode_needs_a_data_dir(void **state)
{
    struct config c;
    struct msgs m;
    assert_int_equal(parse(&c, &m, "tickTime=2000\nserver.1=127.0.0.1:2888:3888\n"
                                   "server.2=127.0.0.2:2888:3888\n"), 0);
    assert_true(config_is_distributed(&c));
    assert_int_equal(config_finish(&c, collect, &m), -1);
    assert_int_equal(m.errors, 1);
    assert_true(has_msg(&m, 1, "zoo.cfg:3: server.2: replicated mode needs dataDir (it holds "
                               "this server's myid, its vote and its log)"));
    assert_int_equal(parse(&c, &m, "tickTime=2000\nserver.1=127.0.0.1:2888:3888\n"
                                   "server.2=127.0.0.2:2888:3888\ndataDir=/var/lib/zk\n"), 0);
    assert_int_equal(config_finish(&c, collect, &m), 0);
    assert_int_equal(m.n, 0);
    /* dynamic reconfig, and without it the membership is the server.N lines */
    assert_int_equal(parse(&c, &m, "server.1=127.0.0.1:2888:3888\nserver.2=127.0.0.2:2888:3888\n"
                                   "dataDir=/d\nreadonlymode.enabled=true\nreconfigEnabled=true\n"),
                     0);
    assert_true(c.reconfig_enabled);
    assert_int_equal(config_finish(&c, collect, &m), 0);
    assert_int_equal(m.n, 0);
    assert_int_equal(parse(&c, &m, "server.1=127.0.0.1:2888:3888\nserver.2=127.0.0.2:2888:3888\n"
                                   "dataDir=/d\nreadonlymode.enabled=true\nreconfigEnabled=false\n"),
                     0);
    assert_int_equal(config_finish(&c, collect, &m), 0);
    assert_int_equal(m.n, 0);

    assert_int_equal(parse(&c, &m, "server.1=127.0.0.1:2888:3888\nstandaloneEnabled=false\n"), 0);
    assert_true(config_is_distributed(&c));
    assert_int_equal(config_finish(&c, collect, &m), -1);
    assert_true(has_msg(&m, 1, "zoo.cfg:1: server.1: replicated mode needs dataDir (it holds "
                               "this server's myid, its vote and its log)"));

    /* one participant (plus observers) runs standalone, as ZooKeeper does */
    assert_int_equal(parse(&c, &m, "server.1=127.0.0.1:2888:3888\n"
                                   "server.2=127.0.0.2:2888:3888:observer\n"), 0);
    assert_false(config_is_distributed(&c));
    assert_int_equal(config_finish(&c, collect, &m), 0);
    assert_int_equal(m.n, 0);

    assert_int_equal(parse(&c, &m, "server.2=127.0.0.2:2888:3888:observer\n"), 0);
    assert_int_equal(config_finish(&c, collect, &m), -1);
    assert_true(has_msg(&m, 1, "zoo.cfg:1: server.2: no server is a participant: an ensemble "
                               "needs voters"));

    assert_int_equal(parse(&c, &m, "server.255=h:1:2\n"), 0);
    assert_int_equal(config_finish(&c, collect, &m), -1);
    assert_true(has_msg(&m, 1, "zoo.cfg:1: server.255: ids above 254 are not allowed with "
                               "zookeeper.extendedTypesEnabled=true"));
    assert_int_equal(parse(&c, &m, "server.255=h:1:2\nzookeeper.extendedTypesEnabled=false\n"), 0);
    assert_int_equal(config_finish(&c, collect, &m), 0);

    assert_int_equal(parse(&c, &m, "peerType=voter\n"), 0);
    assert_int_equal(config_finish(&c, collect, &m), -1);
    assert_true(has_msg(&m, 1, "larchd: peerType 'voter' is not participant or observer"));
}

static void test_dynamic_config_file(void **state)
{
    char dyn[64], main_cfg[64], text[256];
    struct config c;
    struct msgs m = { 0 };
    write_temp(dyn, "server.1=127.0.0.1:2888:3888;2181\nversion=100000000\n");
    snprintf(text, sizeof text, "tickTime=2000\ndynamicConfigFile=%s\n", dyn);
    write_temp(main_cfg, text);
    config_defaults(&c);
    assert_int_equal(config_load(&c, main_cfg, collect, &m), 0);
    assert_int_equal(m.n, 0);
    assert_int_equal(c.n_servers, 1);
    assert_int_equal(c.servers[0].client_port, 2181);
    char where[80];
    snprintf(where, sizeof where, "%s:1", dyn);
    assert_string_equal(c.servers[0].where, where);
    unlink(main_cfg);

    /* the membership in both places, and a key the dynamic file may not hold */
    write_temp(dyn, "server.2=127.0.0.2:2888:3888\ntickTime=1\n");
    snprintf(text, sizeof text, "server.1=127.0.0.1:2888:3888\ndynamicConfigFile=%s\n", dyn);
    write_temp(main_cfg, text);
    memset(&m, 0, sizeof m);
    config_defaults(&c);
    assert_int_equal(config_load(&c, main_cfg, collect, &m), -1);
    assert_int_equal(m.errors, 2);
    char want[256];
    snprintf(want, sizeof want, "%s:2: 'tickTime' does not belong in a dynamic configuration "
                                "file (server.N and version lines only)", dyn);
    assert_true(has_msg(&m, 1, want));
    assert_int_equal(c.tick_time_ms, 2000);
    unlink(main_cfg);
    unlink(dyn);
}

static void test_snap_retain_raised_to_three(void **state)
{
    struct config c;
    struct msgs m;
    assert_int_equal(parse(&c, &m, "autopurge.snapRetainCount=1\n"), 0);
    assert_int_equal(c.autopurge_snap_retain, 3);
    assert_true(has_msg(&m, 0, "zoo.cfg:1: autopurge.snapRetainCount: 1 is below the minimum of 3; using 3"));
}

static void test_super_digest(void **state)
{
    struct config c;
    struct msgs m;
    assert_int_equal(parse(&c, &m, "DigestAuthenticationProvider.superDigest=su:YWJjZA==\n"), 0);
    assert_string_equal(c.super_digest, "su:YWJjZA==");
    assert_true(has_msg(&m, 0, "zoo.cfg:1: DigestAuthenticationProvider.superDigest: digest is not a SHA-1 (28 base64 characters); no password will match it"));
    /* Empty: no super user. */
    assert_int_equal(parse(&c, &m, "DigestAuthenticationProvider.superDigest=\n"), 0);
    assert_string_equal(c.super_digest, "");
    assert_int_equal(m.n, 0);
}

static void test_limits(void **state)
{
    struct config c;
    struct msgs m;
    size_t n = 5000;
    char *cfg = malloc(n + 32);
    assert_non_null(cfg);
    /* A dataDir one byte longer than the field holds. */
    memcpy(cfg, "dataDir=", 8);
    memset(cfg + 8, 'a', 4096);
    strcpy(cfg + 8 + 4096, "\n");
    assert_int_equal(parse(&c, &m, cfg), -1);
    assert_int_equal(m.errors, 1);
    assert_non_null(strstr(m.text[0], "zoo.cfg:1: dataDir: 'aaaa"));
    assert_non_null(strstr(m.text[0], "is too long (at most 4095 bytes)"));
    assert_string_equal(c.data_dir, "");
    /* A logical line longer than the parser's line buffer. */
    free(cfg);
    n = 9000;
    cfg = malloc(n + 32);
    assert_non_null(cfg);
    memset(cfg, 'x', n);
    strcpy(cfg + n, "\ntickTime=7\n");
    assert_int_equal(parse(&c, &m, cfg), -1);
    assert_true(has_msg(&m, 1, "zoo.cfg:1: line too long (at most 8191 bytes)"));
    assert_int_equal(c.tick_time_ms, 7);
    free(cfg);
    /* No callback: still an error. */
    config_defaults(&c);
    assert_int_equal(config_parse_text(&c, "clientPort=x", 12, "f", NULL, NULL), -1);
    /* Text is taken by length: no NUL terminator needed, bytes past len ignored. */
    assert_int_equal(config_parse_text(&c, "tickTime=12345", 12, "f", NULL, NULL), 0);
    assert_int_equal(c.tick_time_ms, 123);
    assert_int_equal(config_parse_text(&c, "tickTime=1\0", 11, "f", NULL, NULL), -1);
}

/* ------------------------------------------------------------------ 4lw */

static void test_4lw_whitelist(void **state)
{
    struct config c;
    struct msgs m;

    config_defaults(&c);
    assert_true(config_4lw_allowed(&c, "srvr"));
    assert_false(config_4lw_allowed(&c, "ruok"));
    assert_false(config_4lw_allowed(&c, "isro"));

    assert_int_equal(parse(&c, &m, "4lw.commands.whitelist=*\n"), 0);
    assert_string_equal(c.four_letter_words, "*");
    assert_true(config_4lw_allowed(&c, "ruok"));
    assert_true(config_4lw_allowed(&c, "mntr"));
    assert_true(config_4lw_allowed(&c, "hash"));
    assert_false(config_4lw_allowed(&c, "abcd"));
    assert_false(config_4lw_allowed(&c, "ruo"));
    assert_false(config_4lw_allowed(&c, NULL));

    assert_int_equal(parse(&c, &m, "4lw.commands.whitelist= ruok , stat,,mntr ,ruok, blah\n"), 0);
    assert_string_equal(c.four_letter_words, "ruok,stat,mntr");
    assert_int_equal(m.errors, 0);
    assert_true(has_msg(&m, 0, "zoo.cfg:1: 4lw.commands.whitelist: unknown four-letter word 'blah' ignored"));
    assert_true(config_4lw_allowed(&c, "ruok"));
    assert_true(config_4lw_allowed(&c, "stat"));
    assert_true(config_4lw_allowed(&c, "mntr"));
    assert_true(config_4lw_allowed(&c, "srvr")); /* always, as ZooKeeper */
    assert_false(config_4lw_allowed(&c, "conf"));
    assert_false(config_4lw_allowed(&c, "isro"));
    c.read_only_mode = true;
    assert_true(config_4lw_allowed(&c, "isro"));

    /* "*" anywhere enables everything. */
    assert_int_equal(parse(&c, &m, "4lw.commands.whitelist=ruok, *\n"), 0);
    assert_string_equal(c.four_letter_words, "*");
    assert_true(config_4lw_allowed(&c, "dump"));

    /* Empty list: only srvr. */
    assert_int_equal(parse(&c, &m, "4lw.commands.whitelist=\n"), 0);
    assert_string_equal(c.four_letter_words, "");
    assert_true(config_4lw_allowed(&c, "srvr"));
    assert_false(config_4lw_allowed(&c, "ruok"));

    /* A list set directly by code (with blanks) is matched the same way. */
    config_defaults(&c);
    snprintf(c.four_letter_words, sizeof c.four_letter_words, " conf , wchs ");
    assert_true(config_4lw_allowed(&c, "conf"));
    assert_true(config_4lw_allowed(&c, "wchs"));
    assert_false(config_4lw_allowed(&c, "wchc"));
}

/* ------------------------------------------------------------------ flags */

static void test_flags_all(void **state)
{
    struct config c;
    struct msgs m;
    bool help, version;
    int rc = args(&c, &m, &help, &version, "--port", "3000", "--bind=0.0.0.0", "--workers",
                  "2", "--tick-time=500", "--min-session-timeout", "1000",
                  "--max-session-timeout=9000", "--max-client-cnxns", "5", "--4lw", "ruok,conf",
                  "--super-digest", "a:D/InIHSb7yEEbrWz8b9l71RjZJU=", "--ttl", "off",
                  "--data-dir", "/d", "--data-log-dir=/l", "--max-buffer", "2048", "--log-level",
                  "error", "--read-only=on", "--log-file", "/l/larchd.log", NULL);
    if (m.n)
        dump_msgs(&m);
    assert_int_equal(rc, 0);
    assert_int_equal(m.n, 0);
    assert_false(help);
    assert_false(version);
    assert_int_equal(c.client_port, 3000);
    assert_string_equal(c.client_port_address, "0.0.0.0");
    assert_int_equal(c.workers, 2);
    assert_int_equal(c.tick_time_ms, 500);
    assert_int_equal(c.min_session_timeout_ms, 1000);
    assert_int_equal(c.max_session_timeout_ms, 9000);
    assert_int_equal(c.max_client_cnxns, 5);
    assert_string_equal(c.four_letter_words, "ruok,conf");
    assert_string_equal(c.super_digest, "a:D/InIHSb7yEEbrWz8b9l71RjZJU=");
    assert_false(c.extended_types);
    assert_string_equal(c.data_dir, "/d");
    assert_string_equal(c.data_log_dir, "/l");
    assert_int_equal(c.max_buffer_bytes, 2048);
    assert_int_equal(c.log_level, 0);
    assert_string_equal(c.log_file, "/l/larchd.log");
    assert_true(c.read_only_mode);
}

static void test_flags_override_file(void **state)
{
    struct config c;
    struct msgs m;
    bool help, version;
    char path[64];
    write_temp(path, "clientPort=3000\ntickTime=100\ndataDir=/from-file\n");

    /* Flag before --config still wins over the file. */
    assert_int_equal(args(&c, &m, &help, &version, "--port", "4000", "--config", path, NULL), 0);
    assert_int_equal(c.client_port, 4000);
    assert_int_equal(c.tick_time_ms, 100);
    assert_string_equal(c.data_dir, "/from-file");

    /* And after it. */
    assert_int_equal(args(&c, &m, &help, &version, "--config", path, "--data-dir=/flag", NULL), 0);
    assert_string_equal(c.data_dir, "/flag");
    assert_int_equal(c.client_port, 3000);

    /* --config=FILE form; flags apply in order, the last one wins. */
    char eq[80];
    snprintf(eq, sizeof eq, "--config=%s", path);
    assert_int_equal(args(&c, &m, &help, &version, "--tick-time", "1", eq, "--tick-time",
                          "2", NULL), 0);
    assert_int_equal(c.tick_time_ms, 2);
    assert_int_equal(m.n, 0);
    unlink(path);
}

static void test_flag_errors(void **state)
{
    struct config c;
    struct msgs m;
    bool help, version;

    assert_int_equal(args(&c, &m, &help, &version, "--port", "x", NULL), -1);
    assert_true(has_msg(&m, 1, "larchd: --port: 'x' is not a port number (1-65535)"));
    assert_int_equal(args(&c, &m, &help, &version, "--prot=1", NULL), -1);
    assert_true(has_msg(&m, 1, "larchd: --prot: unknown flag (see --help)"));
    assert_int_equal(args(&c, &m, &help, &version, "--port", NULL), -1);
    assert_true(has_msg(&m, 1, "larchd: --port: missing value"));
    assert_int_equal(args(&c, &m, &help, &version, "zoo.cfg", NULL), -1);
    assert_true(has_msg(&m, 1, "larchd: unexpected argument 'zoo.cfg' (use --config FILE for a zoo.cfg)"));
    assert_int_equal(args(&c, &m, &help, &version, "--help=yes", NULL), -1);
    assert_true(has_msg(&m, 1, "larchd: --help: takes no value"));
    assert_int_equal(args(&c, &m, &help, &version, "--ttl", "yes", NULL), -1);
    assert_true(has_msg(&m, 1, "larchd: --ttl: 'yes' is not on or off"));
    assert_int_equal(args(&c, &m, &help, &version, "--read-only", "true", NULL), -1);
    assert_true(has_msg(&m, 1, "larchd: --read-only: 'true' is not on or off"));
    assert_int_equal(args(&c, &m, &help, &version, "--log-level", "loud", NULL), -1);
    assert_true(has_msg(&m, 1, "larchd: --log-level: 'loud' is not a log level (error, warn, info, debug)"));
    assert_int_equal(args(&c, &m, &help, &version, "--workers=100", NULL), -1);
    assert_true(has_msg(&m, 1, "larchd: --workers: '100' is out of range (must be between 1 and 64)"));
    assert_int_equal(args(&c, &m, &help, &version, "--super-digest", "bob", NULL), -1);
    assert_true(has_msg(&m, 1, "larchd: --super-digest: 'bob' is not user:base64-digest"));
    assert_int_equal(args(&c, &m, &help, &version, "--config", "a", "--config", "b", NULL), -1);
    assert_true(has_msg(&m, 1, "larchd: --config: given more than once"));

    /* Several bad values: every one is reported. */
    assert_int_equal(args(&c, &m, &help, &version, "--port", "0", "--tick-time", "-3", NULL), -1);
    assert_int_equal(m.errors, 2);
    assert_true(has_msg(&m, 1, "larchd: --tick-time: '-3' is out of range (must be at least 1)"));

    /* A value may begin with '-'. */
    assert_int_equal(args(&c, &m, &help, &version, "--min-session-timeout", "-1", NULL), 0);
    assert_int_equal(c.min_session_timeout_ms, -1);
    assert_false(c.min_session_set);
}

static void test_config_file_problems(void **state)
{
    struct config c;
    struct msgs m;
    bool help, version;
    char want[CONFIG_MSG_MAX];

    assert_int_equal(args(&c, &m, &help, &version, "--config", "/nonexistent/zoo.cfg", NULL), -1);
    assert_int_equal(m.errors, 1);
    assert_true(has_msg(&m, 1, "/nonexistent/zoo.cfg: cannot open: No such file or directory"));

    /* Errors in the file and in the flags are all reported. */
    char path[64];
    write_temp(path, "tickTime=2000\nclientPort=none\n");
    assert_int_equal(args(&c, &m, &help, &version, "--config", path, "--workers", "0", NULL), -1);
    assert_int_equal(m.errors, 2);
    snprintf(want, sizeof want, "%s:2: clientPort: 'none' is not a port number (1-65535)", path);
    assert_true(has_msg(&m, 1, want));
    assert_true(has_msg(&m, 1, "larchd: --workers: '0' is out of range (must be between 1 and 64)"));

    memset(&m, 0, sizeof m);
    config_defaults(&c);
    assert_int_equal(config_load(&c, path, collect, &m), -1);
    assert_int_equal(m.errors, 1);
    unlink(path);
}

static void test_help_and_version(void **state)
{
    struct config c;
    struct msgs m;
    bool help = false, version = true;

    assert_int_equal(args(&c, &m, &help, &version, "--help", NULL), 0);
    assert_true(help);
    assert_false(version);
    /* --help wins over bad flags and is not drowned in their errors. */
    assert_int_equal(args(&c, &m, &help, &version, "--bogus", "-h", "--port=x", NULL), 0);
    assert_true(help);
    assert_int_equal(m.n, 0);
    assert_int_equal(args(&c, &m, &help, &version, "-V", NULL), 0);
    assert_false(help);
    assert_true(version);
    assert_int_equal(args(&c, &m, &help, &version, "--version", NULL), 0);
    assert_true(version);
    assert_int_equal(args(&c, &m, &help, &version, NULL), 0);
    assert_false(help);
    assert_false(version);
}

/* ------------------------------------------------------------------ finish */

static void test_derived_session_timeouts(void **state)
{
    struct config c;
    struct msgs m;

    assert_int_equal(parse(&c, &m, "tickTime=3000\n"), 0);
    assert_int_equal(config_finish(&c, collect, &m), 0);
    assert_int_equal(c.min_session_timeout_ms, 6000);
    assert_int_equal(c.max_session_timeout_ms, 60000);

    assert_int_equal(parse(&c, &m, "tickTime=1000\nminSessionTimeout=-1\nmaxSessionTimeout=5000\n"), 0);
    assert_int_equal(config_finish(&c, collect, &m), 0);
    assert_int_equal(c.min_session_timeout_ms, 2000);
    assert_int_equal(c.max_session_timeout_ms, 5000);

    /* -1 after an explicit value resets to "derive". */
    assert_int_equal(parse(&c, &m, "minSessionTimeout=100\nminSessionTimeout=-1\n"), 0);
    assert_int_equal(config_finish(&c, collect, &m), 0);
    assert_int_equal(c.min_session_timeout_ms, 4000);

    /* Idempotent, and follows a later tickTime change. */
    assert_int_equal(config_finish(&c, collect, &m), 0);
    assert_int_equal(c.max_session_timeout_ms, 40000);
    c.tick_time_ms = 100;
    assert_int_equal(config_finish(&c, collect, &m), 0);
    assert_int_equal(c.min_session_timeout_ms, 200);
    assert_int_equal(c.max_session_timeout_ms, 2000);

    /* 20 x tickTime must fit in 32 bits. */
    assert_int_equal(parse(&c, &m, "tickTime=200000000\n"), 0);
    assert_int_equal(config_finish(&c, collect, &m), -1);
    assert_true(has_msg(&m, 1, "larchd: tickTime 200000000 is too large to derive maxSessionTimeout (20 x tickTime)"));
}

static void test_min_greater_than_max(void **state)
{
    struct config c;
    struct msgs m;

    assert_int_equal(parse(&c, &m, "minSessionTimeout=50000\nmaxSessionTimeout=40000\n"), 0);
    assert_int_equal(config_finish(&c, collect, &m), -1);
    assert_true(has_msg(&m, 1, "larchd: minSessionTimeout 50000 must not be larger than maxSessionTimeout 40000"));

    /* As in ZooKeeper, an explicit min above the derived max is refused too. */
    assert_int_equal(parse(&c, &m, "minSessionTimeout=50000\n"), 0);
    assert_int_equal(config_finish(&c, collect, &m), -1);
    assert_true(has_msg(&m, 1, "larchd: minSessionTimeout 50000 must not be larger than maxSessionTimeout 40000"));

    assert_int_equal(parse(&c, &m, "minSessionTimeout=40000\nmaxSessionTimeout=40000\n"), 0);
    assert_int_equal(config_finish(&c, collect, &m), 0);
}

static void test_finish_checks_fields(void **state)
{
    struct config c;
    struct msgs m = { 0 };

    config_defaults(&c);
    c.workers = 0;
    c.client_port = 70000;
    c.log_level = 9;
    c.client_port_address[0] = '\0';
    assert_int_equal(config_finish(&c, collect, &m), -1);
    assert_int_equal(m.errors, 4);
    assert_true(has_msg(&m, 1, "larchd: larch.workers: '0' is out of range (must be between 1 and 64)"));
    assert_true(has_msg(&m, 1, "larchd: clientPort: '70000' is out of range (must be between 1 and 65535)"));
    assert_true(has_msg(&m, 1, "larchd: larch.logLevel: '9' is out of range (must be between 0 and 3)"));
    assert_true(has_msg(&m, 1, "larchd: clientPortAddress must not be empty"));
}

static void test_data_log_dir_default(void **state)
{
    struct config c;
    struct msgs m;

    assert_int_equal(parse(&c, &m, "dataDir=/data\n"), 0);
    assert_int_equal(config_finish(&c, collect, &m), 0);
    assert_string_equal(c.data_log_dir, "/data");

    assert_int_equal(parse(&c, &m, "dataDir=/data\ndataLogDir=/log\n"), 0);
    assert_int_equal(config_finish(&c, collect, &m), 0);
    assert_string_equal(c.data_log_dir, "/log");

    /* Empty dataLogDir means "same as dataDir", as in ZooKeeper. */
    assert_int_equal(parse(&c, &m, "dataLogDir=\ndataDir=/data\n"), 0);
    assert_false(c.data_log_dir_set);
    assert_int_equal(config_finish(&c, collect, &m), 0);
    assert_string_equal(c.data_log_dir, "/data");
}

/* ------------------------------------------------------------------ TLS */

/* secureClientPort and ZooKeeper's ssl.* keys, in both spellings; where each
 * store's lines were is kept for the messages about its file. */
static void test_tls_keys(void **state)
{
    struct config c;
    struct msgs m;
    const char *cfg = "clientPort=2181\n"
                      "secureClientPort=2281\n"
                      "ssl.keyStore.location=/etc/zk/server.pem\n"
                      "zookeeper.ssl.keyStore.password=s3cret\n"
                      "ssl.trustStore.location=/etc/zk/trust.p12\n"
                      "ssl.trustStore.passwordPath=/etc/zk/trust.pass\n"
                      "zookeeper.ssl.enabledProtocols=TLSv1.2, TLSv1.3\n"
                      "ssl.ciphersuites=TLS_AES_128_GCM_SHA256\n"
                      "ssl.clientAuth=WANT\n"
                      "ssl.hostnameVerification=false\n"
                      "ssl.clientHostnameVerification=true\n"
                      "ssl.sslProvider=OPENSSL\n"
                      "ssl.authProvider=x509\n"
                      "ssl.crl=false\n";
    assert_int_equal(parse(&c, &m, cfg), 0);
    assert_int_equal(config_finish(&c, collect, &m), 0);
    if (m.n != 0)
        dump_msgs(&m);
    assert_int_equal(m.n, 0);
    assert_int_equal(c.secure_client_port, 2281);
    assert_string_equal(c.secure_client_port_address, "0.0.0.0"); /* ZooKeeper's default */
    assert_int_equal(config_plain_port(&c), 2181);
    assert_string_equal(c.tls.key.location, "/etc/zk/server.pem");
    assert_string_equal(c.tls.key.password, "s3cret");
    assert_int_equal(c.tls.key.type, CONFIG_STORE_PEM);      /* from the name */
    assert_int_equal(c.tls.trust.type, CONFIG_STORE_PKCS12); /* .p12 */
    assert_string_equal(c.tls.trust.password_path, "/etc/zk/trust.pass");
    assert_string_equal(c.tls.key.where_location, "zoo.cfg:3: ssl.keyStore.location");
    assert_string_equal(c.tls.key.where_password, "zoo.cfg:4: zookeeper.ssl.keyStore.password");
    assert_string_equal(c.tls.trust.where_password_path, "zoo.cfg:6: ssl.trustStore.passwordPath");
    assert_int_equal(c.tls.protocol, CONFIG_TLS_1_3); /* ZooKeeper 3.9's default */
    assert_int_equal(c.tls.enabled_protocols, CONFIG_TLS_1_2 | CONFIG_TLS_1_3);
    assert_string_equal(c.tls.ciphersuites, "TLS_AES_128_GCM_SHA256");
    assert_string_equal(c.tls.where_ciphersuites, "zoo.cfg:8: ssl.ciphersuites");
    assert_int_equal(c.tls.client_auth, CONFIG_CLIENT_AUTH_WANT);
    assert_false(c.tls.hostname_verification);
    assert_true(c.tls.client_hostname_verification);

    /* defaults: need, hostname verification on, TLSv1.3, an explicit type */
    assert_int_equal(parse(&c, &m, "secureClientPort=2281\nsecureClientPortAddress=127.0.0.1\n"
                                   "ssl.keyStore.location=/k\nssl.keyStore.type=pkcs12\n"
                                   "ssl.trustStore.location=/t.pem\n"), 0);
    assert_int_equal(config_finish(&c, collect, &m), 0);
    assert_int_equal(c.tls.client_auth, CONFIG_CLIENT_AUTH_NEED);
    assert_true(c.tls.hostname_verification);
    assert_false(c.tls.client_hostname_verification);
    assert_int_equal(c.tls.enabled_protocols, 0);
    assert_int_equal(c.tls.key.type, CONFIG_STORE_PKCS12);
    assert_string_equal(c.secure_client_port_address, "127.0.0.1");
}

#define ENSEMBLE_LINES "dataDir=/var/lib/zk\ninitLimit=5\nsyncLimit=2\n" \
                       "server.1=127.0.0.1:2888:3888\nserver.2=127.0.0.2:2888:3888\n"

/* sslQuorum and every ssl.quorum.* key, with and without the zookeeper.
 * prefix, into their own config_tls; QuorumX509Util's defaults. */
static void test_quorum_tls_keys(void **state)
{
    struct config c;
    struct msgs m;
    const char *cfg = ENSEMBLE_LINES
                      "sslQuorum=true\n"                                       /* 6 */
                      "ssl.quorum.keyStore.location=/etc/zk/member.p12\n"
                      "zookeeper.ssl.quorum.keyStore.password=k3y\n"
                      "ssl.quorum.keyStore.passwordPath=/etc/zk/key.pass\n"
                      "ssl.quorum.keyStore.type=PKCS12\n"                      /* 10 */
                      "zookeeper.ssl.quorum.trustStore.location=/etc/zk/ca.pem\n"
                      "ssl.quorum.trustStore.password=tru5t\n"
                      "ssl.quorum.trustStore.passwordPath=/etc/zk/trust.pass\n"
                      "ssl.quorum.trustStore.type=pem\n"
                      "ssl.quorum.protocol=TLSv1.2\n"                           /* 15 */
                      "zookeeper.ssl.quorum.enabledProtocols=TLSv1.3,TLSv1.2\n"
                      "ssl.quorum.ciphersuites=TLS_AES_256_GCM_SHA384\n"
                      "ssl.quorum.clientAuth=want\n"
                      "ssl.quorum.hostnameVerification=false\n"
                      "zookeeper.ssl.quorum.clientHostnameVerification=false\n" /* 20 */
                      "ssl.quorum.handshakeDetectionTimeoutMillis=5000\n";
    assert_int_equal(parse(&c, &m, cfg), 0);
    assert_int_equal(config_finish(&c, collect, &m), 0);
    assert_int_equal(m.errors, 0);
    assert_true(c.ssl_quorum);
    assert_string_equal(c.where_ssl_quorum, "zoo.cfg:6: sslQuorum");
    const struct config_tls *q = &c.quorum_tls;
    assert_string_equal(q->key.location, "/etc/zk/member.p12");
    assert_string_equal(q->key.password, "k3y");
    assert_string_equal(q->key.password_path, "/etc/zk/key.pass");
    assert_int_equal(q->key.type, CONFIG_STORE_PKCS12);
    assert_string_equal(q->key.where_password, "zoo.cfg:8: zookeeper.ssl.quorum.keyStore.password");
    assert_string_equal(q->trust.location, "/etc/zk/ca.pem");
    assert_string_equal(q->trust.where_location,
                        "zoo.cfg:11: zookeeper.ssl.quorum.trustStore.location");
    assert_string_equal(q->trust.password, "tru5t");
    assert_string_equal(q->trust.password_path, "/etc/zk/trust.pass");
    assert_int_equal(q->trust.type, CONFIG_STORE_PEM);
    assert_int_equal(q->protocol, CONFIG_TLS_1_2);
    assert_int_equal(q->enabled_protocols, CONFIG_TLS_1_2 | CONFIG_TLS_1_3);
    assert_string_equal(q->ciphersuites, "TLS_AES_256_GCM_SHA384");
    assert_int_equal(q->client_auth, CONFIG_CLIENT_AUTH_WANT);
    assert_false(q->hostname_verification);
    assert_false(q->client_hostname_verification);
    assert_false(c.tls.any_set); /* the client port's keys are apart */
    assert_string_equal(c.tls.key.location, "");
    assert_true(has_msg(&m, 0, "zoo.cfg:21: key 'ssl.quorum.handshakeDetectionTimeoutMillis' is "
                               "not used by larchd (standalone)"));

    /* defaults: need, both verifications on, TLSv1.3, types from the names */
    assert_int_equal(parse(&c, &m, ENSEMBLE_LINES "sslQuorum=true\n"
                                   "ssl.quorum.keyStore.location=/k.pem\n"
                                   "ssl.quorum.trustStore.location=/t.p12\n"), 0);
    assert_int_equal(config_finish(&c, collect, &m), 0);
    assert_int_equal(c.quorum_tls.client_auth, CONFIG_CLIENT_AUTH_NEED);
    assert_true(c.quorum_tls.hostname_verification);
    assert_true(c.quorum_tls.client_hostname_verification);
    assert_int_equal(c.quorum_tls.protocol, CONFIG_TLS_1_3);
    assert_int_equal(c.quorum_tls.key.type, CONFIG_STORE_PEM);
    assert_int_equal(c.quorum_tls.trust.type, CONFIG_STORE_PKCS12);
}

/* What sslQuorum=true cannot do without, and what larchd does not take. */
static void test_quorum_tls_refusals(void **state)
{
    struct config c;
    struct msgs m;
    assert_int_equal(parse(&c, &m, ENSEMBLE_LINES "sslQuorum=true\n"), 0);
    assert_int_equal(config_finish(&c, collect, &m), -1);
    if (m.errors != 2)
        dump_msgs(&m);
    assert_int_equal(m.errors, 2);
    assert_true(has_msg(&m, 1, "zoo.cfg:6: sslQuorum: sslQuorum=true needs "
                               "ssl.quorum.keyStore.location, this server's certificate and key"));
    assert_true(has_msg(&m, 1, "zoo.cfg:6: sslQuorum: sslQuorum=true needs "
                               "ssl.quorum.trustStore.location, the CAs the other members' "
                               "certificates chain to"));
    /* Java's stores, by type or by name, each at its line */
    assert_int_equal(parse(&c, &m, ENSEMBLE_LINES "sslQuorum=true\n"
                                   "ssl.quorum.keyStore.location=/etc/zk/member.jks\n"
                                   "ssl.quorum.trustStore.location=/etc/zk/ca.pem\n"
                                   "ssl.quorum.trustStore.type=BCFKS\n"), -1);
    assert_true(has_msg(&m, 1, "zoo.cfg:9: ssl.quorum.trustStore.type: larchd cannot read "
                               "BouncyCastle FIPS keystores (BCFKS): convert it to PKCS12 or PEM"));
    assert_int_equal(config_finish(&c, collect, &m), -1);
    assert_true(has_msg(&m, 1, "zoo.cfg:7: ssl.quorum.keyStore.location: '/etc/zk/member.jks' "
                               "is a Java keystore (JKS, by its name), which larchd cannot read: "
                               "convert it to PKCS12 or PEM (and set ssl.quorum.keyStore.type if "
                               "its name does not end in .p12 or .pem)"));
    /* clientAuth needs a trust store, named for the quorum's family */
    assert_int_equal(parse(&c, &m, "sslQuorumReloadCertFiles=true\n"
                                   "portUnification=true\n"
                                   "zookeeper.sslQuorum=true\n"
                                   "ssl.quorum.ocsp=true\n"
                                   "ssl.quorum.context.supplier.class=com.example.Ctx\n"
                                   "ssl.quorum.frobnicate=1\n"
                                   "portUnification=false\n"
                                   "sslQuorumReloadCertFiles=false\n"
                                   "sslQuorum=false\n"), -1);
    if (m.errors != 6)
        dump_msgs(&m);
    assert_int_equal(m.errors, 6);
    assert_true(has_msg(&m, 1, "zoo.cfg:1: sslQuorumReloadCertFiles='true' cannot be honoured: "
                               "larchd reads the quorum's key and trust stores once, when it "
                               "starts (accepted: false)"));
    assert_true(has_msg(&m, 1, "zoo.cfg:2: portUnification='true' cannot be honoured: larchd's "
                               "quorum port speaks TLS only (sslQuorum=true) or plain TCP only: "
                               "no port accepting both for a rolling upgrade (accepted: false)"));
    assert_true(has_msg(&m, 1, "zoo.cfg:3: zookeeper.sslQuorum='true' cannot be honoured: the "
                               "key is sslQuorum, without the zookeeper. prefix (accepted: "
                               "false)"));
    assert_true(has_msg(&m, 1, "zoo.cfg:4: ssl.quorum.ocsp='true' cannot be honoured: larchd "
                               "does not check certificates by OCSP (accepted: false)"));
    assert_true(has_msg(&m, 1, "zoo.cfg:5: key 'ssl.quorum.context.supplier.class' cannot be "
                               "honoured: larchd builds its quorum TLS context from the "
                               "ssl.quorum.* keys (remove the line to run without it)"));
    assert_true(has_msg(&m, 1, "zoo.cfg:6: key 'ssl.quorum.frobnicate' cannot be honoured: "
                               "larchd does not know this quorum TLS key (remove the line to "
                               "run without it)"));
    /* unused: without sslQuorum=true, and on a standalone server */
    assert_int_equal(parse(&c, &m, "ssl.quorum.keyStore.location=/k.pem\n"), 0);
    assert_int_equal(config_finish(&c, collect, &m), 0);
    assert_true(has_msg(&m, 0, "larchd: the ssl.quorum.* keys configure sslQuorum, which is not "
                               "true: they are not used"));
    assert_int_equal(parse(&c, &m, "sslQuorum=true\n"), 0);
    assert_int_equal(config_finish(&c, collect, &m), 0);
    assert_true(has_msg(&m, 0, "zoo.cfg:1: sslQuorum: sslQuorum=true, and this server runs "
                               "standalone: there are no quorum links, the ssl.quorum.* keys "
                               "are not used"));
}

/* Without a clientPort line the plain port is off, as ZooKeeper opens no
 * plain factory; "conf" prints -1 for it, and never a password. */
static void test_tls_secure_only(void **state)
{
    struct config c;
    struct msgs m;
    char out[4096];
    assert_int_equal(parse(&c, &m, "secureClientPort=2281\nssl.keyStore.location=/k.pem\n"
                                   "ssl.keyStore.password=hunter2\nssl.clientAuth=none\n"), 0);
    assert_int_equal(config_finish(&c, collect, &m), 0);
    assert_int_equal(config_plain_port(&c), 0);
    config_format(&c, out, sizeof out);
    assert_memory_equal(out, "clientPort=-1\nsecureClientPort=2281\n", 35);
    assert_non_null(strstr(out, "\nsecureClientPortAddress=0.0.0.0\n"));
    assert_null(strstr(out, "hunter2"));

    /* --port (or a clientPort line) keeps the plain port */
    bool help, version;
    char path[64];
    write_temp(path, "secureClientPort=2281\nssl.keyStore.location=/k.pem\nssl.clientAuth=none\n");
    assert_int_equal(args(&c, &m, &help, &version, "--config", path, "--port", "2300", NULL), 0);
    assert_int_equal(config_finish(&c, collect, &m), 0);
    assert_int_equal(config_plain_port(&c), 2300);
    unlink(path);

    /* reads over UDP would be in the clear */
    assert_int_equal(parse(&c, &m, "secureClientPort=2281\nssl.keyStore.location=/k.pem\n"
                                   "ssl.clientAuth=none\nlarch.udp=127.0.0.1:2999\n"), 0);
    assert_int_equal(config_finish(&c, collect, &m), -1);
    assert_true(has_msg(&m, 1, "larchd: larch.udp serves reads in the clear, and this server "
                               "serves clients over TLS only (secureClientPort without "
                               "clientPort)"));
}

/* What cannot be honoured is an error naming its line: Java's store
 * formats, old protocols, values ZooKeeper would refuse. */
static void test_tls_refusals(void **state)
{
    struct config c;
    struct msgs m;
    const char *cfg = "ssl.keyStore.type=JKS\n"
                      "ssl.trustStore.type=BCFKS\n"
                      "ssl.protocol=TLSv1.1\n"
                      "ssl.enabledProtocols=TLSv1.3,SSLv3\n"
                      "ssl.clientAuth=maybe\n"
                      "ssl.authProvider=sasl\n"
                      "ssl.allowReverseDnsLookup=true\n"
                      "ssl.context.supplier.class=com.example.Ctx\n"
                      "zookeeper.ssl.keystore.location=/k.pem\n"
                      "ssl.ciphersuites=\n";
    assert_int_equal(parse(&c, &m, cfg), -1);
    if (m.errors != 10)
        dump_msgs(&m);
    assert_int_equal(m.errors, 10);
    assert_true(has_msg(&m, 1, "zoo.cfg:1: ssl.keyStore.type: larchd cannot read Java keystores "
                               "(JKS): convert it to PKCS12 (keytool -importkeystore -srckeystore "
                               "F.jks -destkeystore F.p12 -deststoretype PKCS12) or PEM"));
    assert_true(has_msg(&m, 1, "zoo.cfg:2: ssl.trustStore.type: larchd cannot read BouncyCastle "
                               "FIPS keystores (BCFKS): convert it to PKCS12 or PEM"));
    assert_true(has_msg(&m, 1, "zoo.cfg:3: ssl.protocol: 'TLSv1.1' is disabled in OpenSSL 3 and "
                               "Java alike (larchd serves TLSv1.2 and TLSv1.3)"));
    assert_true(has_msg(&m, 1, "zoo.cfg:4: ssl.enabledProtocols: 'SSLv3' is not a TLS protocol "
                               "(larchd serves TLSv1.2 and TLSv1.3)"));
    assert_true(has_msg(&m, 1, "zoo.cfg:5: ssl.clientAuth: 'maybe' is not none, want or need"));
    assert_true(has_msg(&m, 1, "zoo.cfg:6: ssl.authProvider='sasl' cannot be honoured: client "
                               "certificates go to the x509 scheme (accepted: x509)"));
    assert_true(has_msg(&m, 1, "zoo.cfg:9: key 'zookeeper.ssl.keystore.location' cannot be "
                               "honoured: larchd does not know this TLS key (remove the line to "
                               "run without it)"));
    assert_true(has_msg(&m, 1, "zoo.cfg:10: ssl.ciphersuites: an empty value is not allowed"));

    /* a password that is too long is not quoted back */
    char long_cfg[1200] = "ssl.keyStore.password=";
    memset(long_cfg + strlen(long_cfg), 'p', 1100);
    assert_int_equal(parse(&c, &m, long_cfg), -1);
    assert_true(has_msg(&m, 1, "zoo.cfg:1: ssl.keyStore.password: value is too long (at most "
                               "1023 bytes)"));
}

/* Rules across lines, checked by config_finish: the store types from the
 * file names, the trust store client certificates need, ZooKeeper's own
 * refusals. */
static void test_tls_finish_rules(void **state)
{
    struct config c;
    struct msgs m;
    assert_int_equal(parse(&c, &m, "clientPortAddress=127.0.0.1\n"
                                   "secureClientPort=2281\n"
                                   "ssl.keyStore.location=/etc/zk/keys.jks\n"
                                   "ssl.trustStore.location=/etc/zk/trust.crt\n"), 0);
    assert_int_equal(config_finish(&c, collect, &m), -1);
    if (m.errors != 3)
        dump_msgs(&m);
    assert_int_equal(m.errors, 3);
    assert_true(has_msg(&m, 1, "larchd: clientPortAddress is set but clientPort is not set "
                               "(ZooKeeper refuses it too): a secure-only server listens on "
                               "secureClientPortAddress"));
    assert_true(has_msg(&m, 1, "zoo.cfg:3: ssl.keyStore.location: '/etc/zk/keys.jks' is a Java "
                               "keystore (JKS, by its name), which larchd cannot read: convert it "
                               "to PKCS12 or PEM (and set ssl.keyStore.type if its name does not "
                               "end in .p12 or .pem)"));
    assert_true(has_msg(&m, 1, "zoo.cfg:4: ssl.trustStore.location: cannot tell the store type "
                               "from the name '/etc/zk/trust.crt' (ZooKeeper reads .pem and .p12): "
                               "set ssl.trustStore.type (PEM or PKCS12)"));

    /* need (the default) without a trust store; no key store; one port twice */
    assert_int_equal(parse(&c, &m, "clientPort=2281\nsecureClientPort=2281\n"), 0);
    assert_int_equal(config_finish(&c, collect, &m), -1);
    assert_int_equal(m.errors, 3);
    assert_true(has_msg(&m, 1, "larchd: secureClientPort 2281 is clientPort too"));
    assert_true(has_msg(&m, 1, "larchd: secureClientPort needs ssl.keyStore.location, the "
                               "server's certificate and key (ZooKeeper: \"Keystore is required "
                               "for SSL server\")"));
    assert_true(has_msg(&m, 1, "larchd: ssl.clientAuth=need (ZooKeeper's default) asks clients "
                               "for certificates and needs ssl.trustStore.location, the CAs they "
                               "must chain to (or set ssl.clientAuth=none)"));
    assert_int_equal(parse(&c, &m, "secureClientPort=2281\nssl.keyStore.location=/k.p12\n"
                                   "ssl.clientAuth=want\n"), 0);
    assert_int_equal(config_finish(&c, collect, &m), -1);
    assert_true(has_msg(&m, 1, "zoo.cfg:3: ssl.clientAuth: ssl.clientAuth=want asks clients for "
                               "certificates and needs ssl.trustStore.location, the CAs they must "
                               "chain to (or set ssl.clientAuth=none)"));

    /* an address without its port; ssl.* without the port is only unused */
    assert_int_equal(parse(&c, &m, "secureClientPortAddress=127.0.0.1\n"), 0);
    assert_int_equal(config_finish(&c, collect, &m), -1);
    assert_true(has_msg(&m, 1, "larchd: secureClientPortAddress is set but secureClientPort is "
                               "not set (ZooKeeper refuses it too)"));
    assert_int_equal(parse(&c, &m, "ssl.keyStore.location=/k.pem\n"), 0);
    assert_int_equal(config_finish(&c, collect, &m), 0);
    assert_true(has_msg(&m, 0, "larchd: the ssl.* keys configure secureClientPort, which is not "
                               "set: they are not used"));
}

/* The x509 provider: registered by an authProvider line naming it or, as
 * ZooKeeper's configureSSLAuth does, by secureClientPort; enforce.auth may
 * name x509 only then, and superUser is unused without it. */
static void test_x509_provider(void **state)
{
    struct config c;
    struct msgs m;
    assert_int_equal(parse(&c, &m, "zookeeper.X509AuthenticationProvider.superUser= "
                                   "CN=admin,O=Larch \n"), 0);
    assert_string_equal(c.x509_super_user, "CN=admin,O=Larch");
    assert_false(config_x509_enabled(&c));
    assert_int_equal(config_finish(&c, collect, &m), 0);
    assert_true(has_msg(&m, 0, "larchd: X509AuthenticationProvider.superUser is set, and no x509 "
                               "provider is configured: it is not used"));

    assert_int_equal(parse(&c, &m, "authProvider.x509=org.apache.zookeeper.server.auth."
                                   "X509AuthenticationProvider\n"
                                   "zookeeper.authProvider.1=org.apache.zookeeper.server.auth."
                                   "DigestAuthenticationProvider\n"
                                   "enforce.auth.enabled=true\nenforce.auth.schemes=x509\n"), 0);
    assert_int_equal(config_finish(&c, collect, &m), 0);
    assert_int_equal(m.n, 0);
    assert_true(config_x509_enabled(&c));
    assert_int_equal(c.enforce_auth_mask, CONFIG_AUTH_X509);

    assert_int_equal(parse(&c, &m, "secureClientPort=2281\nssl.keyStore.location=/k.pem\n"
                                   "ssl.clientAuth=none\nenforce.auth.enabled=true\n"
                                   "enforce.auth.schemes=digest,x509\n"), 0);
    assert_int_equal(config_finish(&c, collect, &m), 0);
    assert_true(config_x509_enabled(&c));

    assert_int_equal(parse(&c, &m, "enforce.auth.enabled=true\nenforce.auth.schemes=x509\n"
                                   "X509AuthenticationProvider.trustManager=x\n"), -1);
    assert_true(has_msg(&m, 1, "zoo.cfg:3: key 'X509AuthenticationProvider.trustManager' cannot "
                               "be honoured: ZooKeeper's X509AuthenticationProvider reads "
                               "X509AuthenticationProvider.superUser only (remove the line to "
                               "run without it)"));
    m.errors = 0;
    assert_int_equal(config_finish(&c, collect, &m), -1);
    assert_true(has_msg(&m, 1, "larchd: zookeeper.enforce.auth.schemes names x509, and no x509 "
                               "provider is configured (secureClientPort, or authProvider.N="
                               "org.apache.zookeeper.server.auth.X509AuthenticationProvider): "
                               "ZooKeeper refuses it too (\"Authentication scheme x509 is not "
                               "available\")"));
}

/* ------------------------------------------------------------------ output */

static void test_format(void **state)
{
    struct config c;
    struct msgs m;
    char out[4096];

    assert_int_equal(parse(&c, &m, "dataDir=/d\nDigestAuthenticationProvider.superDigest=s:D/InIHSb7yEEbrWz8b9l71RjZJU=\n"), 0);
    assert_int_equal(config_finish(&c, collect, &m), 0);
    size_t n = config_format(&c, out, sizeof out);
    assert_int_equal(n, strlen(out));
    const char *zk_head = "clientPort=2181\n"
                          "secureClientPort=-1\n"
                          "dataDir=/d\n"
                          "dataLogDir=/d\n"
                          "tickTime=2000\n"
                          "maxClientCnxns=60\n"
                          "minSessionTimeout=4000\n"
                          "maxSessionTimeout=40000\n"
                          "clientPortListenBacklog=-1\n"
                          "serverId=0\n";
    assert_memory_equal(out, zk_head, strlen(zk_head));
    assert_non_null(strstr(out, "\n4lw.commands.whitelist=srvr\n"));
    assert_non_null(strstr(out, "\nlarch.logLevel=info\n"));
    assert_null(strstr(out, "D/InIHSb7"));  /* the super digest stays secret */
    assert_int_equal(out[n - 1], '\n');

    /* Truncation: NUL-terminated, returns what was written. */
    char small[12];
    assert_int_equal(config_format(&c, small, sizeof small), 11);
    assert_string_equal(small, "clientPort=");
    assert_int_equal(config_format(&c, small, 0), 0);
    assert_int_equal(config_format(&c, small, 1), 0);
    assert_int_equal(small[0], '\0');
}

/* What "conf" prints reads back as a zoo.cfg giving the same settings. */
static void test_format_round_trip(void **state)
{
    struct config c, d;
    struct msgs m;
    char first[4096], second[4096];

    assert_int_equal(parse(&c, &m, "tickTime=1500\nclientPort=2999\ndataDir=/x y\n"
                                   "4lw.commands.whitelist=ruok,mntr\nreadonlymode.enabled=true\n"
                                   "larch.workers=5\nlarch.logLevel=debug\nmaxSessionTimeout=60000\n"
                                   "larch.logFile=/var/log/larch d.log\n"), 0);
    assert_int_equal(config_finish(&c, collect, &m), 0);
    size_t n = config_format(&c, first, sizeof first);
    assert_int_equal(parse(&d, &m, first), 0);
    assert_int_equal(m.errors, 0);
    assert_int_equal(config_finish(&d, collect, &m), 0);
    assert_int_equal(config_format(&d, second, sizeof second), n);
    assert_string_equal(first, second);
    assert_non_null(strstr(first, "\nlarch.logFile=/var/log/larch d.log\n"));
    assert_int_equal(d.tick_time_ms, 1500);
    assert_int_equal(d.workers, 5);
    assert_string_equal(d.data_dir, "/x y");
}

static void test_usage_mentions_everything(void **state)
{
    const char *u = config_usage();
    static const char *const words[] = {
        "--config", "--port", "--bind", "--workers", "--tick-time", "--min-session-timeout",
        "--max-session-timeout", "--max-client-cnxns", "--4lw", "--super-digest", "--ttl",
        "--data-dir", "--data-log-dir", "--max-buffer", "--log-level", "--log-file",
        "--read-only", "--help",
        "-h,", "--version", "-V,", "tickTime=2000", "dataDir=", "dataLogDir=", "clientPort=2181",
        "clientPortAddress=0.0.0.0", "(127.0.0.1 without a zoo.cfg)", "minSessionTimeout=", "maxSessionTimeout=",
        "maxClientCnxns=60", "4lw.commands.whitelist=srvr", "readonlymode.enabled=false",
        "snapCount=100000", "autopurge.snapRetainCount=3", "autopurge.purgeInterval=0",
        "globalOutstandingLimit=1000", "znode.container.checkIntervalMs=60000",
        "jute.maxbuffer=1048575", "zookeeper.extendedTypesEnabled=true",
        "DigestAuthenticationProvider.superDigest=", "enforce.auth.enabled=false",
        "enforce.auth.schemes=", "cannot\n  honour", "--jaas", "jaasLoginConfig=",
        "java.security.auth.login.config", "sasl.serverconfig=Server", "authProvider.N=",
        "sessionRequireClientSASLAuth=false", "superUser=", "larch.workers=", "larch.logLevel=info",
        "larch.logFile=", "SIGHUP",
        "preAllocSize=65536", "--inline-sequencer", "larch.inlineSequencer=", "maxCnxns=0",
        "nio.sessionlessCnxnTimeout=10000", "larch.maxBufferedBytes=268435456",
        "larch.connection.maxBufferBytes=", "larch.connection.outputHighWaterBytes=1048576",
        "larch.connection.maxUnsentBytes=16777216",
        "Without dataDir data is in memory only", "dataDir/myid", "initLimit", "syncLimit",
        "secureClientPort=", "secureClientPortAddress=0.0.0.0", "ssl.keyStore.location=",
        "ssl.trustStore.location=", "ssl.protocol=TLSv1.3", "ssl.enabledProtocols=",
        "ssl.ciphersuites=", "ssl.clientAuth=need", "ssl.hostnameVerification=true",
        "ssl.clientHostnameVerification=true", "X509AuthenticationProvider.superUser=",
        "enforce.auth.schemes=             (digest, ip, sasl, x509)",
    };
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        if (strstr(u, words[i]) == NULL)
            fprintf(stderr, "usage lacks '%s'\n", words[i]);
        assert_non_null(strstr(u, words[i]));
    }
}

/* ------------------------------------------------------------------ packaging/zoo.cfg */

/* The sample configuration the systemd unit reads parses without a warning,
 * and so does every setting it leaves commented out ("#key=value" lines), so
 * an operator who enables one gets what the comment says. */
static void test_packaged_sample_loads_cleanly(void **state)
{
    (void)state;
    static const char path[] = LARCH_PACKAGING "/zoo.cfg";
    struct config c;
    struct msgs m = { 0 };
    config_defaults(&c);
    assert_int_equal(config_load(&c, path, collect, &m), 0);
    assert_int_equal(config_finish(&c, collect, &m), 0);
    if (m.n)
        dump_msgs(&m);
    assert_int_equal(m.n, 0);
    assert_string_equal(c.data_dir, "/var/lib/larch");
    assert_int_equal(c.client_port, 2181);
    assert_string_equal(c.client_port_address, "127.0.0.1");
    assert_string_equal(c.four_letter_words, "srvr,ruok,mntr,conf");
    assert_int_equal(c.autopurge_interval_h, 24);
    assert_int_equal(c.log_level, 2);
    assert_string_equal(c.log_file, "");

    /* the settings left off: each "#key=value" line without its '#' */
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char off[16384];
    size_t used = 0;
    int n_off = 0;
    char line[1024];
    while (fgets(line, sizeof line, f) != NULL) {
        if (line[0] != '#' || line[1] == ' ' || line[1] == '\n' || line[1] == '#')
            continue;
        size_t len = strlen(line + 1);
        assert_true(used + len < sizeof off);
        memcpy(off + used, line + 1, len + 1);
        used += len;
        n_off++;
    }
    fclose(f);
    assert_true(n_off >= 2);
    assert_int_equal(config_parse_text(&c, off, used, path, collect, &m), 0);
    assert_int_equal(config_finish(&c, collect, &m), 0);
    if (m.n)
        dump_msgs(&m);
    assert_int_equal(m.n, 0);
    assert_string_equal(c.log_file, "/var/log/larch/larchd.log");
    assert_true(c.data_log_dir_set);
}

/* ------------------------------------------------------------------ the ensemble */

/* Parses text (which must parse cleanly) and derives the ensemble for myid;
 * m then holds config_ensemble's messages only. */
static int ensemble(struct config *c, struct msgs *m, const char *text, uint32_t myid,
                    struct config_ensemble *e)
{
    assert_int_equal(parse(c, m, text), 0);
    assert_int_equal(m->n, 0);
    return config_ensemble(c, myid, e, collect, m);
}

static const char three_servers[] = "tickTime=2000\n"
                                    "initLimit=10\n"
                                    "syncLimit=5\n"
                                    "dataDir=/data/zk\n"
                                    "server.3=127.0.0.3:2890:3890;2183\n"
                                    "server.1=127.0.0.1:2888:3888;2181\n"
                                    "server.2=zk2.example:2889:3889:participant\n";

static void test_ensemble_three_servers(void **state)
{
    struct config c;
    struct msgs m;
    struct config_ensemble e;
    assert_int_equal(ensemble(&c, &m, three_servers, 2, &e), 0);
    assert_int_equal(m.n, 0);
    assert_int_equal(e.self_id, 2);
    assert_false(e.self_observer);
    assert_int_equal(e.n_members, 3);
    static const struct {
        uint32_t id;
        const char *host;
        int32_t port;
        const char *where;
    } want[] = {
        { 1, "127.0.0.1", 2888, "zoo.cfg:6" },
        { 2, "zk2.example", 2889, "zoo.cfg:7" },
        { 3, "127.0.0.3", 2890, "zoo.cfg:5" },
    };
    for (uint32_t i = 0; i < 3; i++) {
        assert_int_equal(e.members[i].id, want[i].id);
        assert_true(e.members[i].voter);
        assert_string_equal(e.members[i].host, want[i].host);
        assert_int_equal(e.members[i].quorum_port, want[i].port);
        assert_string_equal(e.members[i].where, want[i].where);
    }
    assert_true(e.cluster_id != 0);
    assert_int_equal(e.raft_tick_ms, 200);
    assert_int_equal(e.heartbeat_ticks, 5);
    assert_int_equal(e.election_ticks, 50);
    assert_int_equal(e.init_limit_ms, 20000);
    assert_int_equal(e.sync_limit_ms, 10000);
    /* replicated mode: config_finish asks only for the dataDir it needs */
    assert_true(config_is_distributed(&c));
}

/* tickTime / initLimit / syncLimit -> raft tick, heartbeat, election, limits. */
static void test_ensemble_timing(void **state)
{
    static const struct {
        int32_t tick, init, sync;
        int32_t raft_tick_ms;
        uint32_t heartbeat, election;
        int64_t init_ms, sync_ms;
    } cases[] = {
        { 2000, 10, 5, 200, 5, 50, 20000, 10000 },
        { 100, 4, 2, 10, 5, 20, 400, 200 },
        { 10, 1, 1, 1, 5, 10, 10, 10 },                 /* the smallest tickTime */
        { 2005, 3, 2, 200, 5, 20, 6015, 4010 },         /* raft ticks round down */
        { 1000, 1, 107374182, 100, 5, 1073741820, 1000, 107374182000LL }, /* at the bound */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[256];
        snprintf(text, sizeof text, "tickTime=%d\ninitLimit=%d\nsyncLimit=%d\n"
                                    "server.1=127.0.0.1:2888:3888\n"
                                    "server.2=127.0.0.2:2888:3888\n",
                 cases[i].tick, cases[i].init, cases[i].sync);
        struct config c;
        struct msgs m;
        struct config_ensemble e;
        if (ensemble(&c, &m, text, 1, &e) != 0) {
            dump_msgs(&m);
            fail_msg("case %zu refused", i);
        }
        assert_int_equal(e.raft_tick_ms, cases[i].raft_tick_ms);
        assert_int_equal(e.heartbeat_ticks, cases[i].heartbeat);
        assert_int_equal(e.election_ticks, cases[i].election);
        assert_int_equal(e.init_limit_ms, cases[i].init_ms);
        assert_int_equal(e.sync_limit_ms, cases[i].sync_ms);
    }
}

static void test_ensemble_observers(void **state)
{
    static const char text[] = "tickTime=2000\ninitLimit=10\nsyncLimit=5\n"
                               "server.1=127.0.0.1:2888:3888\n"
                               "server.2=127.0.0.2:2888:3888\n"
                               "server.3=127.0.0.3:2888:3888\n"
                               "server.4=127.0.0.4:2888:3888:observer\n"
                               "server.5=127.0.0.5:2888:3888:OBSERVER\n";
    struct config c;
    struct msgs m;
    struct config_ensemble e;
    assert_int_equal(ensemble(&c, &m, text, 1, &e), 0);
    assert_int_equal(e.n_members, 5);
    assert_false(e.self_observer);
    static const bool voter[] = { true, true, true, false, false };
    for (uint32_t i = 0; i < 5; i++) {
        assert_int_equal(e.members[i].id, i + 1);
        assert_int_equal(e.members[i].voter, voter[i]);
    }
    assert_int_equal(ensemble(&c, &m, text, 4, &e), 0);
    assert_int_equal(e.self_id, 4);
    assert_true(e.self_observer);
    /* peerType agreeing with the line is fine, either way */
    char more[512];
    snprintf(more, sizeof more, "%speerType=observer\n", text);
    assert_int_equal(ensemble(&c, &m, more, 5, &e), 0);
    assert_true(e.self_observer);
    snprintf(more, sizeof more, "%speerType=participant\n", text);
    assert_int_equal(ensemble(&c, &m, more, 3, &e), 0);
    assert_false(e.self_observer);
    assert_int_equal(m.n, 0);
}

static uint64_t ref_fnv1a(uint64_t h, const void *data, size_t len)
{
    const uint8_t *p = data;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* The cluster id as config.h documents it, written here independently: a
 * change of encoding (which would split an ensemble of mixed versions)
 * fails this test. */
static uint64_t ref_cluster_id(const uint32_t *ids, const bool *voters, size_t n)
{
    uint64_t h = ref_fnv1a(0xcbf29ce484222325ull, "larch-ensemble-v2", 18);
    for (size_t i = 0; i < n; i++) {
        uint8_t b[] = { (uint8_t)ids[i], (uint8_t)(ids[i] >> 8), (uint8_t)(ids[i] >> 16),
                        (uint8_t)(ids[i] >> 24), voters[i] };
        h = ref_fnv1a(h, b, sizeof b);
    }
    return h;
}

static uint64_t cluster_id_of(const char *servers, uint32_t myid)
{
    char text[1024];
    snprintf(text, sizeof text, "tickTime=2000\ninitLimit=10\nsyncLimit=5\n%s", servers);
    struct config c;
    struct msgs m;
    struct config_ensemble e;
    if (ensemble(&c, &m, text, myid, &e) != 0) {
        dump_msgs(&m);
        fail_msg("refused: %s", servers);
    }
    assert_true(e.cluster_id != 0);
    return e.cluster_id;
}

static void test_ensemble_cluster_id(void **state)
{
    static const char base[] = "server.1=127.0.0.1:2888:3888\n"
                               "server.2=127.0.0.2:2889:3889\n"
                               "server.3=127.0.0.3:2890:3890:observer\n";
    uint64_t id = cluster_id_of(base, 1);
    static const uint32_t ids[] = { 1, 2, 3 };
    static const bool voters[] = { true, true, false };
    assert_int_equal(id, ref_cluster_id(ids, voters, 3));
    static const char *const same[] = {
        /* another order, seen from another member */
        "server.3=127.0.0.3:2890:3890:observer\nserver.2=127.0.0.2:2889:3889\n"
        "server.1=127.0.0.1:2888:3888\n",
        /* client ports and election ports are not the quorum's */
        "server.1=127.0.0.1:2888:4888;2181\nserver.2=127.0.0.2:2889:4889;0.0.0.0:2182\n"
        "server.3=127.0.0.3:2890:4890:observer;2183\n",
        /* an explicit participant role, brackets, the role's case */
        "server.1=[127.0.0.1]:2888:3888:participant\nserver.2=127.0.0.2:2889:3889\n"
        "server.3=127.0.0.3:2890:3890:Observer\n",
        /* members that name one another differently: a peer reached through
         * a proxy port, another host's address (NAT), itself as 0.0.0.0 */
        "server.1=127.0.0.1:4888:3888\nserver.2=0.0.0.0:2889:3889\n"
        "server.3=198.18.0.3:2890:3890:observer\n",
    };
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
        assert_int_equal(cluster_id_of(same[i], 2), id);
    static const char *const different[] = {
        /* an id */
        "server.1=127.0.0.1:2888:3888\nserver.2=127.0.0.2:2889:3889\n"
        "server.4=127.0.0.3:2890:3890:observer\n",
        /* a role */
        "server.1=127.0.0.1:2888:3888\nserver.2=127.0.0.2:2889:3889\n"
        "server.3=127.0.0.3:2890:3890\n",
        /* a member fewer */
        "server.1=127.0.0.1:2888:3888\nserver.2=127.0.0.2:2889:3889\n",
        /* a member more */
        "server.1=127.0.0.1:2888:3888\nserver.2=127.0.0.2:2889:3889\n"
        "server.3=127.0.0.3:2890:3890:observer\nserver.4=127.0.0.4:2891:3891\n",
    };
    for (size_t i = 0; i < sizeof different / sizeof different[0]; i++)
        if (cluster_id_of(different[i], 1) == id)
            fail_msg("case %zu has the same cluster id", i);
    /* with reconfigEnabled the membership changes at run time: the id leaves
     * it out (a server joins with a zoo.cfg the members' do not match) */
    char text[1024];
    snprintf(text, sizeof text, "reconfigEnabled=true\n%s", base);
    uint64_t dynamic = cluster_id_of(text, 1);
    assert_true(dynamic != id);
    for (size_t i = 0; i < sizeof different / sizeof different[0]; i++) {
        snprintf(text, sizeof text, "reconfigEnabled=true\n%s", different[i]);
        assert_int_equal(cluster_id_of(text, 1), dynamic);
    }
}

/* Every refusal: -1, exactly one error, and its exact text. */
static void test_ensemble_errors(void **state)
{
#define LIMITS "tickTime=2000\ninitLimit=10\nsyncLimit=5\n"
    static const struct {
        const char *text;
        uint32_t myid;
        const char *want;
    } cases[] = {
        { LIMITS "dataDir=/data/zk\nserver.1=127.0.0.1:2888:3888\nserver.2=127.0.0.2:2888:3888\n",
          4, "larchd: myid 4 (from /data/zk/myid) is not listed in any server.N line" },
        { LIMITS "server.1=127.0.0.1:2888:3888\nserver.2=127.0.0.2:2888:3888\n"
                 "peerType=observer\n",
          2, "zoo.cfg:5: server.2: peerType=observer disagrees with this server's role here "
             "(participant): ZooKeeper would follow the server.N line; larchd refuses to guess" },
        { LIMITS "server.1=127.0.0.1:2888:3888\nserver.2=127.0.0.2:2888:3888:observer\n"
                 "peerType=participant\n",
          2, "zoo.cfg:5: server.2: peerType=participant disagrees with this server's role here "
             "(observer): ZooKeeper would follow the server.N line; larchd refuses to guess" },
        { LIMITS "server.1=127.0.0.1:2888:3888\nserver.2=127.0.0.2:2888:3888\npeerType=voter\n",
          1, "larchd: peerType 'voter' is not participant or observer" },
        { "syncLimit=5\nserver.1=127.0.0.1:2888:3888\nserver.2=127.0.0.2:2888:3888\n", 1,
          "larchd: initLimit is not set: replicated mode needs initLimit and syncLimit (ticks), "
          "as ZooKeeper does" },
        { "initLimit=10\nserver.1=127.0.0.1:2888:3888\nserver.2=127.0.0.2:2888:3888\n", 1,
          "larchd: syncLimit is not set: replicated mode needs initLimit and syncLimit (ticks), "
          "as ZooKeeper does" },
        { "tickTime=9\ninitLimit=10\nsyncLimit=5\nserver.1=127.0.0.1:2888:3888\n"
          "server.2=127.0.0.2:2888:3888\n",
          1, "larchd: tickTime 9 is below 10 ms: the raft tick (tickTime / 10) would be 0 ms" },
        { "tickTime=10\ninitLimit=1\nsyncLimit=107374183\nserver.1=127.0.0.1:2888:3888\n"
          "server.2=127.0.0.2:2888:3888\n",
          1, "larchd: syncLimit 107374183 is too large: the election timeout would be "
             "1073741830 raft ticks, above the Raft core's bound of 1073741824" },
        { LIMITS "server.1=127.0.0.1:2888:3888\nserver.2=127.0.0.2:2888:3888\n"
                 "server.3=127.0.0.1:2888:3889\n",
          1, "zoo.cfg:6: server.3: quorum address 127.0.0.1:2888 is also server.1's (zoo.cfg:4)" },
        { LIMITS "server.1=[::1]:2888:3888\nserver.2=[0:0:0:0:0:0:0:1]:2888:3889\n",
          1, "zoo.cfg:5: server.2: quorum address [0:0:0:0:0:0:0:1]:2888 is also server.1's "
             "(zoo.cfg:4)" },
        { LIMITS "server.1=ZK1:2888:3888\nserver.2=zk1:2888:3889\n",
          1, "zoo.cfg:5: server.2: quorum address zk1:2888 is also server.1's (zoo.cfg:4)" },
        /* a quorum port that is its own line's client port */
        { LIMITS "server.1=127.0.0.1:2888:3888\nserver.2=127.0.0.2:2182:3888;2182\n",
          1, "zoo.cfg:5: server.2: quorum port 2182 is also the client port of server.2 "
             "(zoo.cfg:5) on the same host 127.0.0.2" },
        /* ... another server's on the same host */
        { LIMITS "server.1=127.0.0.1:2888:3888;2183\nserver.2=127.0.0.2:2888:3888\n"
                 "server.3=127.0.0.1:2183:3889\n",
          2, "zoo.cfg:6: server.3: quorum port 2183 is also the client port of server.1 "
             "(zoo.cfg:4) on the same host 127.0.0.1" },
        /* ... or this server's clientPort */
        { LIMITS "clientPort=2889\nserver.1=127.0.0.1:2888:3888\nserver.2=127.0.0.1:2889:3889\n",
          1, "zoo.cfg:6: server.2: quorum port 2889 is also clientPort of this server "
             "(server.1) on the same host 127.0.0.1" },
        { LIMITS "server.1=127.0.0.1:2888:3888:observer\nserver.2=127.0.0.2:2888:3888:observer\n",
          1, "zoo.cfg:4: server.1: no server is a participant: an ensemble needs at least one "
             "voter" },
    };
#undef LIMITS
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct config c;
        struct msgs m;
        struct config_ensemble e;
        int rc = ensemble(&c, &m, cases[i].text, cases[i].myid, &e);
        if (rc != -1 || m.n != 1 || !has_msg(&m, 1, cases[i].want)) {
            dump_msgs(&m);
            fail_msg("case %zu (rc %d): want %s", i, rc, cases[i].want);
        }
    }
}

/* Several problems at once are all reported. */
static void test_ensemble_every_error_reported(void **state)
{
    struct config c;
    struct msgs m;
    struct config_ensemble e;
    assert_int_equal(ensemble(&c, &m, "tickTime=5\nserver.1=h:1:2\nserver.2=h:1:3\n", 3, &e),
                     -1);
    assert_int_equal(m.errors, 5);
    static const char *const want[] = {
        "larchd: myid 3 (from myid) is not listed in any server.N line",
        "larchd: tickTime 5 is below 10 ms: the raft tick (tickTime / 10) would be 0 ms",
        "larchd: initLimit is not set: replicated mode needs initLimit and syncLimit (ticks), "
        "as ZooKeeper does",
        "larchd: syncLimit is not set: replicated mode needs initLimit and syncLimit (ticks), "
        "as ZooKeeper does",
        "zoo.cfg:3: server.2: quorum address h:1 is also server.1's (zoo.cfg:2)",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        if (!has_msg(&m, 1, want[i])) {
            dump_msgs(&m);
            fail_msg("missing: %s", want[i]);
        }
    }
}

/* A mkdtemp directory for myid files, removed by its teardown even when
 * the test fails half-way. */
struct myid_dir {
    char dir[32];
    char path[64]; /* dir/myid */
};

static int myid_dir_setup(void **state)
{
    static struct myid_dir d;
    snprintf(d.dir, sizeof d.dir, "/tmp/larch-cfg-XXXXXX");
    if (mkdtemp(d.dir) == NULL)
        return -1;
    snprintf(d.path, sizeof d.path, "%s/myid", d.dir);
    *state = &d;
    return 0;
}

static int myid_dir_teardown(void **state)
{
    struct myid_dir *d = *state;
    if (unlink(d->path) != 0)
        rmdir(d->path); /* the test may leave a directory there */
    return rmdir(d->dir);
}

/* A myid file's content -> config_read_myid's answer. */
static void test_read_myid(void **state)
{
    const struct myid_dir *d = *state;
    const char *dir = d->dir, *path = d->path;
    char big[101];
    memset(big, '1', 100);
    big[100] = '\0';
    static const char *const ext = " with zookeeper.extendedTypesEnabled=true";
    const struct {
        const char *content; /* NULL: no file */
        bool extended;
        int rc;
        uint32_t id;
        const char *want; /* after "<path>: "; NULL when rc == 0 */
    } cases[] = {
        { "3\n", true, 0, 3, NULL },
        { "  7  ", true, 0, 7, NULL },
        { "\t007\r\n", true, 0, 7, NULL },
        { "1", true, 0, 1, NULL },
        { "255", false, 0, 255, NULL },
        { "254", true, 0, 254, NULL },
        { "", true, -1, 0, "is empty: it must hold this server's id, a decimal number (1-254%s)" },
        { " \n ", false, -1, 0, "is empty: it must hold this server's id, a decimal number "
                                "(1-255%s)" },
        { "abc", true, -1, 0, "'abc' is not a decimal server id (1-254%s)" },
        { "-1", false, -1, 0, "'-1' is not a decimal server id (1-255%s)" },
        { "0", true, -1, 0, "server id 0 is out of range (1-254%s)" },
        { "256", false, -1, 0, "server id 256 is out of range (1-255%s)" },
        { "255", true, -1, 0, "server id 255 is out of range (1-254%s)" },
        { "99999999999999999999", true, -1, 0,
          "server id 99999999999999999999 is out of range (1-254%s)" },
        { "3x", true, -1, 0, "'3x' has trailing junk after the server id '3' (only whitespace "
                             "may surround it)" },
        { "3\n4\n", true, -1, 0, "'3?4' has trailing junk after the server id '3' (only "
                                 "whitespace may surround it)" },
        { big, true, -1, 0, "larger than 64 bytes: a myid file holds one server id" },
        { NULL, true, -1, 0, "cannot open: No such file or directory" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unlink(path);
        if (cases[i].content != NULL) {
            FILE *f = fopen(path, "w");
            assert_non_null(f);
            fputs(cases[i].content, f);
            assert_int_equal(fclose(f), 0);
        }
        struct config c;
        struct msgs m = { 0 };
        config_defaults(&c);
        c.extended_types = cases[i].extended;
        snprintf(c.data_dir, sizeof c.data_dir, "%s", dir);
        uint32_t id = 99;
        int rc = config_read_myid(&c, &id, collect, &m);
        char want[CONFIG_MSG_MAX] = "";
        if (cases[i].want != NULL) {
            char tail[256];
            snprintf(tail, sizeof tail, cases[i].want, cases[i].extended ? ext : "");
            snprintf(want, sizeof want, "%s: %s", path, tail);
        }
        if (rc != cases[i].rc || (rc == 0 && (id != cases[i].id || m.n != 0)) ||
            (rc != 0 && (id != 99 || m.n != 1 || !has_msg(&m, 1, want)))) {
            dump_msgs(&m);
            fail_msg("case %zu: rc %d id %u; want rc %d id %u %s", i, rc, id, cases[i].rc,
                     cases[i].id, want);
        }
    }
    unlink(path);

    /* dataDir with a trailing slash; a directory where the file should be */
    struct config c;
    struct msgs m = { 0 };
    config_defaults(&c);
    snprintf(c.data_dir, sizeof c.data_dir, "%s/", dir);
    assert_int_equal(mkdir(path, 0700), 0);
    uint32_t id = 0;
    assert_int_equal(config_read_myid(&c, &id, collect, &m), -1);
    char want[CONFIG_MSG_MAX];
    snprintf(want, sizeof want, "%s: is not a regular file", path);
    assert_true(has_msg(&m, 1, want));
    assert_int_equal(rmdir(path), 0);
    assert_int_equal(mkdir(path, 0700), 0); /* the teardown removes either kind */

    /* no dataDir at all */
    memset(&m, 0, sizeof m);
    c.data_dir[0] = '\0';
    assert_int_equal(config_read_myid(&c, &id, collect, &m), -1);
    assert_int_equal(m.n, 1);
    assert_true(has_msg(&m, 1, "larchd: replicated mode needs dataDir holding a myid file "
                               "(dataDir is not set)"));
}

/* /zookeeper/config's text: ZooKeeper's quorum verifier lines, an IPv6
 * host in brackets, a client address only where the line named a port,
 * 0.0.0.0 where it named none, the version in hex. */
static void test_membership_text(void **state)
{
    (void)state;
    struct config c;
    struct msgs m = { 0 };
    assert_int_equal(parse(&c, &m, "server.1=127.0.0.1:2888:3888\n"
                                   "server.2=[::1]:2889:3889:participant;127.0.0.2:2182\n"
                                   "server.3=zoo3:2890:3890:observer;2183\n"), 0);
    char *text = config_membership_text(&c, 0x100000000LL); /* as after a reconfig */
    assert_non_null(text);
    assert_string_equal(text, "server.1=127.0.0.1:2888:3888:participant\n"
                              "server.2=[::1]:2889:3889:participant;127.0.0.2:2182\n"
                              "server.3=zoo3:2890:3890:observer;0.0.0.0:2183\n"
                              "version=100000000");
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_memory_budget_keys),
        cmocka_unit_test(test_every_key),
        cmocka_unit_test(test_prefixed_keys),
        cmocka_unit_test(test_separators_and_blanks),
        cmocka_unit_test(test_comments_and_line_endings),
        cmocka_unit_test(test_continuation),
        cmocka_unit_test(test_escapes),
        cmocka_unit_test(test_malformed_values),
        cmocka_unit_test(test_every_error_reported),
        cmocka_unit_test(test_unknown_keys_warn),
        cmocka_unit_test(test_unhonoured_keys_refused),
        cmocka_unit_test(test_enforce_auth_keys),
        cmocka_unit_test(test_sasl_keys),
        cmocka_unit_test(test_sasl_settings_need_jaas_and_provider),
        cmocka_unit_test(test_config_file_binds_all_interfaces),
        cmocka_unit_test(test_metrics_provider_keys),
        cmocka_unit_test(test_admin_server_keys),
        cmocka_unit_test(test_tls_keys),
        cmocka_unit_test(test_quorum_tls_keys),
        cmocka_unit_test(test_quorum_tls_refusals),
        cmocka_unit_test(test_tls_secure_only),
        cmocka_unit_test(test_tls_refusals),
        cmocka_unit_test(test_tls_finish_rules),
        cmocka_unit_test(test_x509_provider),
        cmocka_unit_test(test_server_lines_parse),
        cmocka_unit_test(test_server_line_errors),
        cmocka_unit_test(test_replicated_mode_needs_a_data_dir),
        cmocka_unit_test(test_dpdk_needs_an_ipv4_udp_address),
        cmocka_unit_test(test_dynamic_config_file),
        cmocka_unit_test(test_snap_retain_raised_to_three),
        cmocka_unit_test(test_super_digest),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_4lw_whitelist),
        cmocka_unit_test(test_flags_all),
        cmocka_unit_test(test_flags_override_file),
        cmocka_unit_test(test_flag_errors),
        cmocka_unit_test(test_config_file_problems),
        cmocka_unit_test(test_help_and_version),
        cmocka_unit_test(test_derived_session_timeouts),
        cmocka_unit_test(test_min_greater_than_max),
        cmocka_unit_test(test_finish_checks_fields),
        cmocka_unit_test(test_data_log_dir_default),
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_format_round_trip),
        cmocka_unit_test(test_usage_mentions_everything),
        cmocka_unit_test(test_packaged_sample_loads_cleanly),
        cmocka_unit_test(test_ensemble_three_servers),
        cmocka_unit_test(test_ensemble_timing),
        cmocka_unit_test(test_ensemble_observers),
        cmocka_unit_test(test_ensemble_cluster_id),
        cmocka_unit_test(test_ensemble_errors),
        cmocka_unit_test(test_ensemble_every_error_reported),
        cmocka_unit_test(test_membership_text),
        cmocka_unit_test_setup_teardown(test_read_myid, myid_dir_setup, myid_dir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
