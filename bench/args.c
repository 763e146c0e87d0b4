/*
 * args.c — larch-bench command line: defaults, parsing, --help text.
 *
 * Every value is checked against a stated range and a bad one is refused with
 * a message that names the flag and quotes the value, so a typo in a long
 * benchmark script fails at once instead of measuring the wrong thing.
 */
#include "bench/bench.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void bench_cfg_defaults(struct bench_cfg *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    snprintf(cfg->host, sizeof(cfg->host), "%s", "127.0.0.1");
    cfg->port = 2181;
    cfg->sessions = 8;
    cfg->outstanding = 8;
    cfg->threads = 1;
    static const double ratios[] = { 90, 95, 99, 100 };
    for (int i = 0; i < 4; i++)
        cfg->read_pcts[i] = ratios[i];
    cfg->read_pct_count = 4;
    cfg->read_op = BENCH_READ_GETDATA;
    cfg->write_op = BENCH_WRITE_SETDATA;
    cfg->dist = BENCH_DIST_UNIFORM;
    cfg->zipf_theta = 0.99;
    cfg->keys = 1000;
    cfg->value_size_bytes = 100;
    cfg->warmup_s = 2.0;
    cfg->duration_s = 10.0;
    snprintf(cfg->label, sizeof(cfg->label), "%s", "server");
    cfg->setup = true;
    cfg->client = BENCH_CLIENT_RAW;
    cfg->timeout_ms = 30000;
    cfg->seed = 1;
}

const char *bench_read_op_name(enum bench_read_op op)
{
    switch (op) {
    case BENCH_READ_GETDATA: return "getData";
    case BENCH_READ_EXISTS: return "exists";
    case BENCH_READ_GETCHILDREN: return "getChildren";
    }
    return "unknown";
}

const char *bench_write_op_name(enum bench_write_op op)
{
    return op == BENCH_WRITE_SETDATA ? "setData" : "create-delete";
}

static int fail(char *err, size_t err_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t err_len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
    return BENCH_ARGS_ERROR;
}

/* A whole-string integer in [lo, hi]. */
static int parse_int(const char *flag, const char *s, long long lo, long long hi, long long *out,
                     char *err, size_t err_len)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*s == '\0' || *end != '\0' || errno == ERANGE)
        return fail(err, err_len, "%s: '%s' is not an integer", flag, s);
    if (v < lo || v > hi)
        return fail(err, err_len, "%s: '%s' is not in %lld..%lld", flag, s, lo, hi);
    *out = v;
    return BENCH_ARGS_OK;
}

/* A whole-string finite number in [lo, hi]. */
static int parse_num(const char *flag, const char *s, double lo, double hi, double *out,
                     char *err, size_t err_len)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*s == '\0' || *end != '\0' || errno == ERANGE || !isfinite(v))
        return fail(err, err_len, "%s: '%s' is not a number", flag, s);
    if (v < lo || v > hi)
        return fail(err, err_len, "%s: '%s' is not in %g..%g", flag, s, lo, hi);
    *out = v;
    return BENCH_ARGS_OK;
}

/* "90,95,99,100": one to BENCH_RATIOS_MAX percentages. */
static int parse_ratios(struct bench_cfg *cfg, const char *s, char *err, size_t err_len)
{
    char buf[256];
    if (strlen(s) >= sizeof(buf))
        return fail(err, err_len, "--read-ratio: list is too long");
    snprintf(buf, sizeof(buf), "%s", s);
    int n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (n == BENCH_RATIOS_MAX)
            return fail(err, err_len, "--read-ratio: more than %d values", BENCH_RATIOS_MAX);
        if (parse_num("--read-ratio", tok, 0, 100, &cfg->read_pcts[n], err, err_len) != 0)
            return BENCH_ARGS_ERROR;
        n++;
    }
    if (n == 0)
        return fail(err, err_len, "--read-ratio: '%s' has no value", s);
    cfg->read_pct_count = n;
    return BENCH_ARGS_OK;
}

/* --udp: "IPv4:PORT" or "[IPv6]:PORT", an address literal (the sockets
 * connect to it as given). */
static int parse_udp(struct bench_cfg *cfg, const char *s, char *err, size_t err_len)
{
    const char *colon = strrchr(s, ':');
    bool v6 = s[0] == '[';
    const char *host = v6 ? s + 1 : s;
    const char *host_end = v6 ? strchr(s, ']') : colon;
    if (!colon || !host_end || host_end <= host || (v6 && host_end + 1 != colon) ||
        (size_t)(host_end - host) >= sizeof(cfg->udp_host))
        return fail(err, err_len, "--udp: '%s' is not IP:PORT", s);
    long long port;
    if (parse_int("--udp", colon + 1, 1, 65535, &port, err, err_len) != 0)
        return BENCH_ARGS_ERROR;
    memcpy(cfg->udp_host, host, (size_t)(host_end - host));
    cfg->udp_host[host_end - host] = '\0';
    uint8_t addr[16];
    if (inet_pton(v6 ? AF_INET6 : AF_INET, cfg->udp_host, addr) != 1)
        return fail(err, err_len, "--udp: '%s' is not an IP%s address literal", cfg->udp_host,
                    v6 ? "v6" : "v4");
    cfg->udp_port = (uint16_t)port;
    return BENCH_ARGS_OK;
}

/* "host:port", "host" (port 2181) or "[v6addr]:port". */
static int parse_server(struct bench_cfg *cfg, const char *s, char *err, size_t err_len)
{
    const char *host = s, *colon = strrchr(s, ':');
    size_t host_len = strlen(s);
    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (!close || (close[1] != '\0' && close[1] != ':'))
            return fail(err, err_len, "--server: '%s' is not host:port", s);
        host = s + 1;
        host_len = (size_t)(close - host);
        colon = close[1] == ':' ? close + 1 : NULL;
    } else if (colon) {
        host_len = (size_t)(colon - s);
    }
    if (host_len == 0 || host_len >= sizeof(cfg->host))
        return fail(err, err_len, "--server: '%s' has no usable host", s);
    if (colon) {
        long long port;
        if (parse_int("--server", colon + 1, 1, 65535, &port, err, err_len) != 0)
            return BENCH_ARGS_ERROR;
        cfg->port = (uint16_t)port;
    }
    memcpy(cfg->host, host, host_len);
    cfg->host[host_len] = '\0';
    return BENCH_ARGS_OK;
}

/* One of names[]; its index in *out. */
static int parse_choice(const char *flag, const char *s, const char *const *names, int count,
                        int *out, char *err, size_t err_len)
{
    for (int i = 0; i < count; i++) {
        if (strcmp(s, names[i]) == 0) {
            *out = i;
            return BENCH_ARGS_OK;
        }
    }
    char list[128] = "";
    for (int i = 0; i < count; i++) {
        size_t used = strlen(list);
        snprintf(list + used, sizeof(list) - used, "%s%s", i ? ", " : "", names[i]);
    }
    return fail(err, err_len, "%s: '%s' is not one of %s", flag, s, list);
}

static int parse_label(struct bench_cfg *cfg, const char *s, char *err, size_t err_len)
{
    size_t n = strlen(s);
    if (n == 0 || n >= sizeof(cfg->label))
        return fail(err, err_len, "--label: '%s' must be 1..%zu characters", s,
                    sizeof(cfg->label) - 1);
    for (size_t i = 0; i < n; i++) {
        /* Printed raw into JSON and table columns: keep it to a safe set. */
        char c = s[i];
        if (!(c == '-' || c == '_' || c == '.' || c == '+' || (c >= '0' && c <= '9') ||
              (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')))
            return fail(err, err_len, "--label: '%s' may hold only letters, digits and -_.+", s);
    }
    memcpy(cfg->label, s, n + 1);
    return BENCH_ARGS_OK;
}

static const char *const read_op_names[] = { "getData", "exists", "getChildren" };
static const char *const write_op_names[] = { "setData", "create-delete" };
static const char *const dist_names[] = { "uniform", "zipf" };
static const char *const client_names[] = { "raw", "c" };

/* Applies one flag that takes a value. */
static int apply_value(struct bench_cfg *cfg, const char *flag, const char *v, char *err,
                       size_t err_len)
{
    long long n = 0;
    int choice = 0, rc;
#define INT_FLAG(name, lo, hi, field)                                             \
    if (strcmp(flag, name) == 0) {                                                \
        if ((rc = parse_int(flag, v, lo, hi, &n, err, err_len)) != 0)             \
            return rc;                                                            \
        field = n;                                                                \
        return BENCH_ARGS_OK;                                                     \
    }
#define CHOICE_FLAG(name, names, field, type)                                     \
    if (strcmp(flag, name) == 0) {                                                \
        int count = (int)(sizeof(names) / sizeof(names[0]));                      \
        if ((rc = parse_choice(flag, v, names, count, &choice, err, err_len)) != 0) \
            return rc;                                                            \
        field = (type)choice;                                                     \
        return BENCH_ARGS_OK;                                                     \
    }
    INT_FLAG("--sessions", 1, BENCH_SESSIONS_MAX, cfg->sessions)
    INT_FLAG("--threads", 1, BENCH_THREADS_MAX, cfg->threads)
    INT_FLAG("--keys", 1, BENCH_KEYS_MAX, cfg->keys)
    INT_FLAG("--value-size", 0, BENCH_VALUE_SIZE_MAX, cfg->value_size_bytes)
    INT_FLAG("--server-pid", 1, INT_MAX, cfg->server_pid)
    INT_FLAG("--timeout-ms", 1, INT32_MAX, cfg->timeout_ms)
    INT_FLAG("--seed", 0, LLONG_MAX, cfg->seed)
    CHOICE_FLAG("--read-op", read_op_names, cfg->read_op, enum bench_read_op)
    CHOICE_FLAG("--write-op", write_op_names, cfg->write_op, enum bench_write_op)
    CHOICE_FLAG("--dist", dist_names, cfg->dist, enum bench_dist)
    CHOICE_FLAG("--client", client_names, cfg->client, enum bench_client)
#undef INT_FLAG
#undef CHOICE_FLAG
    if (strcmp(flag, "--outstanding") == 0) {
        if ((rc = parse_int(flag, v, 1, BENCH_OUTSTANDING_MAX, &n, err, err_len)) != 0)
            return rc;
        cfg->outstanding = (int)n;
        cfg->outstanding_set = true;
        return BENCH_ARGS_OK;
    }
    if (strcmp(flag, "--rate") == 0)
        return parse_num(flag, v, 0, BENCH_RATE_MAX, &cfg->rate_per_s, err, err_len);
    if (strcmp(flag, "--zipf-theta") == 0) {
        if ((rc = parse_num(flag, v, 0.01, 0.999, &cfg->zipf_theta, err, err_len)) != 0)
            return rc;
        cfg->dist = BENCH_DIST_ZIPF;
        return BENCH_ARGS_OK;
    }
    if (strcmp(flag, "--warmup") == 0)
        return parse_num(flag, v, 0, BENCH_SECONDS_MAX, &cfg->warmup_s, err, err_len);
    if (strcmp(flag, "--duration") == 0) {
        if ((rc = parse_num(flag, v, 0.001, BENCH_SECONDS_MAX, &cfg->duration_s, err,
                            err_len)) != 0)
            return rc;
        return BENCH_ARGS_OK;
    }
    if (strcmp(flag, "--read-ratio") == 0)
        return parse_ratios(cfg, v, err, err_len);
    if (strcmp(flag, "--server") == 0)
        return parse_server(cfg, v, err, err_len);
    if (strcmp(flag, "--udp") == 0)
        return parse_udp(cfg, v, err, err_len);
    if (strcmp(flag, "--dpdk") == 0 || strcmp(flag, "--dpdk-src") == 0) {
        bool args = strcmp(flag, "--dpdk") == 0;
        char *dst = args ? cfg->dpdk_args : cfg->dpdk_src;
        size_t cap = args ? sizeof cfg->dpdk_args : sizeof cfg->dpdk_src;
        uint8_t addr[4];
        if (strlen(v) == 0 || strlen(v) >= cap)
            return fail(err, err_len, "%s: '%s' is empty or too long", flag, v);
        if (!args && inet_pton(AF_INET, v, addr) != 1)
            return fail(err, err_len, "--dpdk-src: '%s' is not an IPv4 address literal", v);
        memcpy(dst, v, strlen(v) + 1);
        return BENCH_ARGS_OK;
    }
    if (strcmp(flag, "--label") == 0)
        return parse_label(cfg, v, err, err_len);
    return fail(err, err_len, "%s: unknown option", flag);
}

/* Flags without a value; returns -2 when flag is not one of them. */
static int apply_switch(struct bench_cfg *cfg, const char *flag)
{
    if (strcmp(flag, "--help") == 0 || strcmp(flag, "-h") == 0)
        return BENCH_ARGS_HELP;
    if (strcmp(flag, "--version") == 0)
        return BENCH_ARGS_VERSION;
    bool *target = strcmp(flag, "--watch") == 0     ? &cfg->watch
                   : strcmp(flag, "--json") == 0    ? &cfg->json
                   : strcmp(flag, "--cleanup") == 0 ? &cfg->cleanup
                   : strcmp(flag, "--dpdk-hold") == 0 ? &cfg->dpdk_hold
                                                    : NULL;
    if (target) {
        *target = true;
        return BENCH_ARGS_OK;
    }
    if (strcmp(flag, "--no-setup") == 0) {
        cfg->setup = false;
        return BENCH_ARGS_OK;
    }
    return -2;
}

/* Cross-flag rules, checked once everything is parsed. */
static int check_combination(struct bench_cfg *cfg, char *err, size_t err_len)
{
    if (cfg->threads > cfg->sessions)
        return fail(err, err_len, "--threads: '%d' is more than --sessions (%d)", cfg->threads,
                    cfg->sessions);
    if (cfg->client == BENCH_CLIENT_C && cfg->rate_per_s > 0)
        return fail(err, err_len, "--rate: open loop needs --client raw (the C client "
                                  "driver is closed loop)");
    if (cfg->rate_per_s > 0 && !cfg->outstanding_set)
        cfg->outstanding = BENCH_OPEN_LOOP_OUTSTANDING;
    if (cfg->udp_port != 0) {
        if (cfg->write_op != BENCH_WRITE_SETDATA)
            return fail(err, err_len, "--udp: a mix's writes go over TCP as setData only "
                                      "(--write-op setData)");
        if (cfg->client == BENCH_CLIENT_C)
            return fail(err, err_len, "--udp: the C client speaks TCP only");
        if (cfg->rate_per_s > 0 && !cfg->dpdk_args[0])
            return fail(err, err_len, "--udp: the kernel-socket UDP driver is closed loop "
                                      "(no --rate; the --dpdk driver has an open loop)");
        if (cfg->watch)
            return fail(err, err_len, "--udp: watches need TCP");
        if (cfg->outstanding > 65535)
            return fail(err, err_len, "--udp: at most 65535 outstanding per session");
    }
    if (cfg->dpdk_args[0] && (cfg->udp_port == 0 || strchr(cfg->udp_host, ':')))
        return fail(err, err_len, "--dpdk: needs --udp with the server's IPv4 address");
    if (cfg->dpdk_hold && !cfg->dpdk_args[0])
        return fail(err, err_len, "--dpdk-hold: only with --dpdk");
    if (cfg->dpdk_args[0] && cfg->dpdk_src[0] == '\0')
        return fail(err, err_len, "--dpdk: needs --dpdk-src, the bench port's IPv4 address");
    if (cfg->dpdk_args[0] && cfg->sessions > 40000)
        return fail(err, err_len, "--dpdk: at most 40000 sessions (one UDP port each)");
    return BENCH_ARGS_OK;
}

static bool is_value_flag(const char *flag)
{
    static const char *const names[] = {
        "--server", "--udp", "--dpdk", "--dpdk-src", "--label", "--server-pid", "--client", "--sessions", "--outstanding",
        "--threads", "--rate", "--read-ratio", "--read-op", "--write-op", "--keys",
        "--value-size", "--dist", "--zipf-theta", "--seed", "--warmup", "--duration",
        "--timeout-ms",
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(flag, names[i]) == 0)
            return true;
    return false;
}

int bench_args_parse(struct bench_cfg *cfg, int argc, char **argv, char *err, size_t err_len)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (arg[0] != '-')
            return fail(err, err_len, "'%s': unexpected argument (options start with --)", arg);
        int rc = apply_switch(cfg, arg);
        if (rc == BENCH_ARGS_HELP || rc == BENCH_ARGS_VERSION)
            return rc;
        if (rc == BENCH_ARGS_OK)
            continue;
        /* "--flag=value" or "--flag value" */
        char flag[32];
        const char *eq = strchr(arg, '=');
        size_t n = eq ? (size_t)(eq - arg) : strlen(arg);
        if (n >= sizeof(flag))
            return fail(err, err_len, "%.*s: unknown option", (int)n, arg);
        memcpy(flag, arg, n);
        flag[n] = '\0';
        if (!is_value_flag(flag)) {
            if (apply_switch(cfg, flag) != -2)
                return fail(err, err_len, "%s: takes no value", flag);
            return fail(err, err_len, "%s: unknown option", flag);
        }
        const char *value = eq ? eq + 1 : NULL;
        if (!value) {
            if (i + 1 >= argc)
                return fail(err, err_len, "%s: needs a value", flag);
            value = argv[++i];
        }
        if (apply_value(cfg, flag, value, err, err_len) != 0)
            return BENCH_ARGS_ERROR;
    }
    return check_combination(cfg, err, err_len);
}

const char *bench_usage(void)
{
    return "usage: larch-bench [options]\n"
           "Load generator for ZooKeeper-protocol servers (stock ZooKeeper, larchd).\n"
           "Each read ratio is one run: connect, warm up, measure, drain, close.\n"
           "\n"
           "Target\n"
           "  --server HOST:PORT    server address (default 127.0.0.1:2181)\n"
           "  --udp IP:PORT         read over larchd's UDP path there (larchd --udp;\n"
           "                        dataplane/UDP.md), closed loop; a mix's writes\n"
           "                        (setData) and the keys go over TCP at --server\n"
           "  --dpdk 'EAL ARGS'     with --udp: read from a DPDK port of the bench's own\n"
           "                        (e.g. '-l 0 --no-huge --no-pci -m 256 --file-prefix bench\n"
           "                        --vdev net_memif0,role=client' to a larchd --dpdk on\n"
           "                        memif); one polling thread; open loop with --rate\n"
           "  --dpdk-src IP         the bench port's IPv4 address (needed with --dpdk)\n"
           "  --dpdk-hold           after the runs, keep the port until the peer closes it\n"
           "                        (at most 60 s): DPDK 22.11's memif unmaps a departing\n"
           "                        peer's memory under the other side's polling core, so\n"
           "                        a larchd on the other end must stop polling first\n"
           "  --label NAME          name printed in the table and JSON (default server)\n"
           "  --server-pid PID      read the server's CPU time from /proc/PID/stat over the\n"
           "                        measured interval and report CPU-us per op\n"
           "Load\n"
           "  --client raw|c        raw: built-in epoll driver (default); c: the official C\n"
           "                        client (libzookeeper_mt async API), closed loop only\n"
           "  --sessions N          client sessions (default 8), 1..20000\n"
           "  --outstanding N       requests in flight per session (default 8; with --rate\n"
           "                        it is the cap, default 1000)\n"
           "  --threads N           driver threads sharing the sessions (default 1)\n"
           "  --rate R              open loop: R requests/s in total at fixed intended send\n"
           "                        times; latency counts from the intended time, so a\n"
           "                        stalled server is not hidden (no coordinated omission).\n"
           "                        0 (default) is closed loop.\n"
           "Workload\n"
           "  --read-ratio LIST     read percentages, comma separated, one run each\n"
           "                        (default 90,95,99,100)\n"
           "  --read-op OP          getData (default), exists or getChildren\n"
           "  --write-op OP         setData (default) or create-delete (each session creates\n"
           "                        then deletes its own nodes; each is one write)\n"
           "  --keys N              number of keys " BENCH_ROOT "/k%08d (default 1000)\n"
           "  --value-size BYTES    value size (default 100), 0..1000000\n"
           "  --dist uniform|zipf   key choice (default uniform)\n"
           "  --zipf-theta T        zipf skew in 0.01..0.999 (default 0.99; implies zipf)\n"
           "  --watch               set a watch with every read\n"
           "  --seed N              random seed (default 1)\n"
           "Timing\n"
           "  --warmup SECONDS      warm-up before each measured interval (default 2)\n"
           "  --duration SECONDS    measured interval (default 10)\n"
           "  --timeout-ms MS       session timeout asked for (default 30000)\n"
           "Keys\n"
           "  --no-setup            do not create the keys (they must exist)\n"
           "  --cleanup             delete " BENCH_ROOT " and everything under it at the end\n"
           "Output\n"
           "  --json                one JSON object per run on stdout (the table goes to\n"
           "                        stderr): label, client, mode, read_ratio, ops_per_s,\n"
           "                        read_ops_per_s, write_ops_per_s, p50_us, p90_us, p99_us,\n"
           "                        p999_us, max_us, mean_us, read/write latencies, errors\n"
           "                        by code, server_cpu_s, server_cpu_us_per_op,\n"
           "                        bench_cpu_s, sessions, outstanding, duration_s, cdf\n"
           "  --help, --version\n"
           "\n"
           "Latency percentiles come from a log-linear histogram with <= 0.4 % error\n"
           "(128 buckets per power of two). Exit status: 0 ok, 1 run failed, 2 bad usage.\n";
}
