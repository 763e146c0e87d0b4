/*
 * metrics.c — /metrics in Prometheus's text exposition format (0.0.4), as
 * ZooKeeper's PrometheusMetricsProvider serves it, so that a dashboard
 * built for ZooKeeper shows larchd unchanged.
 *
 * One source for the numbers: every numeric value of mntr (server_monitor)
 * becomes the gauge ZooKeeper registers under the same name without "zk_" (znode_count,
 * num_alive_connections, avg_latency, quorum_size, ...; larchd's own are
 * larch_*). Then what mntr has no line for: uptime, the fsynctime and
 * snapshottime summaries (quantile 0.5, _count and _sum in milliseconds,
 * ZooKeeper's BASIC detail), the same two as histograms in seconds
 * (larch_fsync_seconds, larch_snapshot_seconds), reads by worker
 * (larch_worker_reads), and the process_* metrics every Prometheus client
 * library exports (from /proc/self).
 *
 * Not served, and why: the jvm_* family (there is no JVM); readlatency,
 * updatelatency and the other per-request summaries of ZooKeeper's
 * ServerMetrics (larchd keeps the min/avg/max of avg_latency, not a
 * distribution per request: recording one would cost the read path an
 * atomic add per request).
 */
#include "server/server.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROMETHEUS_TYPE "text/plain; version=0.0.4; charset=utf-8"

static void family(struct zk_wbuf *out, const char *name, const char *type, const char *help)
{
    zk_wbuf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void gauge(struct zk_wbuf *out, const char *name, const char *help, double v)
{
    family(out, name, "gauge", help);
    zk_wbuf_printf(out, "%s %.17g\n", name, v);
}

/* One mntr value as gauge <key>: numbers, booleans as 0/1, zxids (hex
 * text) as their value; other text (the version, the state) is no gauge. */
static void monitor_gauge(void *arg, const char *key, const struct report_value *v)
{
    struct zk_wbuf *out = arg;
    double x;
    switch (v->type) {
    case REPORT_INT: x = (double)v->i; break;
    case REPORT_UINT: x = (double)v->u; break;
    case REPORT_DOUBLE: x = v->d; break;
    case REPORT_BOOL: x = v->b; break;
    case REPORT_TEXT: {
        char *end;
        if (strncmp(v->text, "0x", 2) != 0)
            return;
        x = (double)strtoull(v->text + 2, &end, 16);
        if (end == v->text + 2 || *end != '\0')
            return;
        break;
    }
    default: return;
    }
    gauge(out, key, key, x);
}

/* ZooKeeper's Summary at BASIC detail, in milliseconds: the median,
 * count and sum. */
static void summary_ms(struct zk_wbuf *out, const char *name,
                       const struct base_latency_snapshot *s)
{
    family(out, name, "summary", name);
    zk_wbuf_printf(out, "%s{quantile=\"0.5\",} %.17g\n", name, base_latency_quantile(s, 0.5) / 1e3);
    zk_wbuf_printf(out, "%s_count %" PRIu64 "\n", name, s->count);
    zk_wbuf_printf(out, "%s_sum %.17g\n", name, (double)s->sum_us / 1e3);
}

/* The same values as a Prometheus histogram in seconds. */
static void histogram_s(struct zk_wbuf *out, const char *name, const char *help,
                        const struct base_latency_snapshot *s)
{
    family(out, name, "histogram", help);
    uint64_t below = 0;
    for (size_t i = 0; i < BASE_LATENCY_BUCKETS; i++) {
        below += s->bucket[i];
        if (i == BASE_LATENCY_BUCKETS - 1)
            zk_wbuf_printf(out, "%s_bucket{le=\"+Inf\"} %" PRIu64 "\n", name, below);
        else
            zk_wbuf_printf(out, "%s_bucket{le=\"%g\"} %" PRIu64 "\n", name,
                           (double)base_latency_bound_us[i] / 1e6, below);
    }
    zk_wbuf_printf(out, "%s_count %" PRIu64 "\n", name, s->count);
    zk_wbuf_printf(out, "%s_sum %.17g\n", name, (double)s->sum_us / 1e6);
}

static void put_latencies(struct server *srv, struct zk_wbuf *out)
{
    struct base_latency_snapshot fsync = { 0 }, snap = { 0 };
    if (srv->dur) {
        struct durability_stats ds;
        txnlog_sync_latency(durability_log(srv->dur), &fsync);
        durability_get_stats(srv->dur, &ds);
        snap = ds.snapshot_time;
    }
    summary_ms(out, "fsynctime", &fsync);
    summary_ms(out, "snapshottime", &snap);
    histogram_s(out, "larch_fsync_seconds", "txn log group commits: writes and fdatasync", &fsync);
    histogram_s(out, "larch_snapshot_seconds", "snapshots taken", &snap);
}

/* /proc/self/stat's utime, stime (ticks), starttime (ticks after boot),
 * vsize (bytes) and rss (pages): fields 14, 15, 22, 23 and 24. */
static bool proc_stat(double *cpu_s, double *start_ticks, double *vsize, double *rss_pages)
{
    FILE *f = fopen("/proc/self/stat", "r");
    if (!f)
        return false;
    char buf[1024];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* the command name may hold blanks */
    if (!p)
        return false;
    unsigned long long utime, stime, start, vs;
    long long rss;
    /* after ") ": state(3) ... utime(14) stime(15) ... starttime(22) vsize(23) rss(24) */
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d "
                      "%*d %*d %llu %llu %lld", &utime, &stime, &start, &vs, &rss) != 5)
        return false;
    double hz = (double)sysconf(_SC_CLK_TCK);
    *cpu_s = (double)(utime + stime) / hz;
    *start_ticks = (double)start / hz;
    *vsize = (double)vs;
    *rss_pages = (double)rss;
    return true;
}

static double boot_time_s(void)
{
    FILE *f = fopen("/proc/stat", "r");
    if (!f)
        return 0;
    char line[256];
    double bt = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "btime %lf", &bt) == 1)
            break;
    fclose(f);
    return bt;
}

static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e = readdir(d); e; e = readdir(d))
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1; /* not the one reading the directory */
}

/* What the Prometheus client libraries' process collector exports. */
static void put_process(struct zk_wbuf *out)
{
    double cpu, start, vsize, rss;
    if (proc_stat(&cpu, &start, &vsize, &rss)) {
        family(out, "process_cpu_seconds_total", "counter",
               "Total user and system CPU time spent in seconds.");
        zk_wbuf_printf(out, "process_cpu_seconds_total %.17g\n", cpu);
        gauge(out, "process_start_time_seconds",
              "Start time of the process since unix epoch in seconds.", boot_time_s() + start);
        gauge(out, "process_virtual_memory_bytes", "Virtual memory size in bytes.", vsize);
        gauge(out, "process_resident_memory_bytes", "Resident memory size in bytes.",
              rss * (double)sysconf(_SC_PAGESIZE));
    }
    int fds = open_fds();
    if (fds >= 0)
        gauge(out, "process_open_fds", "Number of open file descriptors.", fds);
    gauge(out, "process_max_fds", "Maximum number of open file descriptors.",
          (double)sysconf(_SC_OPEN_MAX));
}

/* Reads by worker: how evenly the kernel spreads connections over them. */
static void put_workers(struct server *srv, struct zk_wbuf *out)
{
    struct dp_stats *d = malloc(sizeof *d);
    if (!d) {
        out->err = true;
        return;
    }
    dp_get_stats(srv->dp, d);
    family(out, "larch_worker_reads", "counter", "reads answered, by worker");
    for (int i = 0; i < d->workers; i++)
        zk_wbuf_printf(out, "larch_worker_reads{worker=\"%d\"} %" PRIu64 "\n", i,
                       d->worker_reads[i]);
    free(d);
}

void metrics_prometheus(struct server *srv, struct zk_wbuf *out)
{
    server_monitor(srv, monitor_gauge, out); /* ZooKeeper registers these as gauges */
    put_workers(srv, out);
    gauge(out, "uptime", "uptime", (double)(base_wall_ms() - srv->started_ms));
    put_latencies(srv, out);
    put_process(out);
}

int metrics_http_get(void *arg, const char *url, struct zk_wbuf *out, const char **type)
{
    if (strcmp(url, "/metrics") != 0) {
        zk_wbuf_printf(out, "not found: %s (this port serves /metrics)\n", url);
        return 404;
    }
    metrics_prometheus(arg, out);
    *type = PROMETHEUS_TYPE;
    return 200;
}
