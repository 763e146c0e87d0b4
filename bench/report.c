/*
 * report.c — one run as a human table row or as one JSON object per line.
 *
 * Throughput counts successful replies inside the measured interval; failed
 * ones are listed by error code instead. Latencies are those of successful
 * replies, in microseconds with 0.1 µs resolution (the histogram is finer).
 */
#include "bench/bench.h"
#include "proto/proto.h"

#include <string.h>

static double us(uint64_t ns)
{
    return (double)ns / 1000.0;
}

static uint64_t ok_ops(const struct bench_result *r)
{
    return r->counts.read_ok + r->counts.write_ok;
}

static double per_s(uint64_t n, const struct bench_result *r)
{
    return r->duration_s > 0 ? (double)n / r->duration_s : 0.0;
}

/* CPU microseconds per successful op, or -1 when unknown. */
static double cpu_us_per_op(double cpu_s, const struct bench_result *r)
{
    if (cpu_s < 0 || ok_ops(r) == 0)
        return -1;
    return cpu_s * 1e6 / (double)ok_ops(r);
}

static const char *client_name(const struct bench_cfg *cfg)
{
    return cfg->dpdk_args[0]   ? "dpdk"
           : cfg->udp_port != 0 ? "udp"
           : cfg->client == BENCH_CLIENT_C ? "c" : "raw";
}

void bench_report_header(FILE *out, const struct bench_cfg *cfg)
{
    fprintf(out, "# %s/%s, %u keys x %u B, %s%s, %d sessions x %d outstanding, %s",
            bench_read_op_name(cfg->read_op), bench_write_op_name(cfg->write_op), cfg->keys,
            cfg->value_size_bytes, cfg->dist == BENCH_DIST_ZIPF ? "zipf" : "uniform",
            cfg->watch ? ", watches" : "", cfg->sessions, cfg->outstanding, client_name(cfg));
    if (cfg->rate_per_s > 0)
        fprintf(out, ", open loop at %.0f req/s", cfg->rate_per_s);
    fprintf(out, "\n%-12s %5s %10s %10s %9s %8s %8s %8s %8s %9s %7s %8s %8s\n", "label", "read%",
            "ops/s", "reads/s", "writes/s", "p50us", "p90us", "p99us", "p99.9us", "maxus",
            "errors", "srvCPUs", "us/op");
}

void bench_report_row(FILE *out, const struct bench_cfg *cfg, const struct bench_result *r)
{
    const struct bench_hist *h = &r->all;
    double srv = cpu_us_per_op(r->server_cpu_s, r);
    char cpu_s[16] = "-", per_op[16] = "-";
    if (r->server_cpu_s >= 0)
        snprintf(cpu_s, sizeof(cpu_s), "%.2f", r->server_cpu_s);
    if (srv >= 0)
        snprintf(per_op, sizeof(per_op), "%.1f", srv);
    fprintf(out, "%-12s %5g %10.0f %10.0f %9.0f %8.1f %8.1f %8.1f %8.1f %9.1f %7llu %8s %8s\n",
            cfg->label, r->read_pct, per_s(ok_ops(r), r), per_s(r->counts.read_ok, r),
            per_s(r->counts.write_ok, r), us(bench_hist_value_at(h, 50)),
            us(bench_hist_value_at(h, 90)), us(bench_hist_value_at(h, 99)),
            us(bench_hist_value_at(h, 99.9)), us(bench_hist_max(h)),
            (unsigned long long)bench_counts_error_total(&r->counts), cpu_s, per_op);
    for (int i = 1; i < BENCH_ERR_SLOTS; i++)
        if (r->counts.errors[i])
            fprintf(out, "%12s   error %s (%d): %llu\n", "", zk_err_name(-i), -i,
                    (unsigned long long)r->counts.errors[i]);
    if (r->counts.errors_other)
        fprintf(out, "%12s   errors with other codes: %llu\n", "",
                (unsigned long long)r->counts.errors_other);
    if (r->counts.sessions_lost)
        fprintf(out, "%12s   sessions lost: %llu\n", "",
                (unsigned long long)r->counts.sessions_lost);
}

/* A JSON number, or null for "unknown" (negative). */
static void json_num_or_null(FILE *out, const char *key, double v, const char *fmt)
{
    fprintf(out, ",\"%s\":", key);
    if (v < 0)
        fputs("null", out);
    else
        fprintf(out, fmt, v);
}

static void json_latencies(FILE *out, const char *prefix, const struct bench_hist *h)
{
    static const struct { const char *name; double pct; } points[] = {
        { "p50", 50 }, { "p90", 90 }, { "p99", 99 }, { "p999", 99.9 }, { "max", 100 },
    };
    for (size_t i = 0; i < sizeof(points) / sizeof(points[0]); i++) {
        if (h->count == 0)
            fprintf(out, ",\"%s%s_us\":null", prefix, points[i].name); /* no such op ran */
        else
            fprintf(out, ",\"%s%s_us\":%.1f", prefix, points[i].name,
                    us(bench_hist_value_at(h, points[i].pct)));
    }
    if (h->count == 0)
        fprintf(out, ",\"%smean_us\":null", prefix);
    else
        fprintf(out, ",\"%smean_us\":%.1f", prefix, bench_hist_mean(h) / 1000.0);
}

static void json_errors(FILE *out, const struct bench_counts *c)
{
    fputs(",\"errors\":{", out);
    const char *sep = "";
    for (int i = 1; i < BENCH_ERR_SLOTS; i++) {
        if (!c->errors[i])
            continue;
        const char *name = zk_err_name(-i);
        if (strcmp(name, "unknown") == 0)
            fprintf(out, "%s\"code%d\":%llu", sep, -i, (unsigned long long)c->errors[i]);
        else
            fprintf(out, "%s\"%s\":%llu", sep, name, (unsigned long long)c->errors[i]);
        sep = ",";
    }
    if (c->errors_other)
        fprintf(out, "%s\"other\":%llu", sep, (unsigned long long)c->errors_other);
    fprintf(out, "},\"errors_total\":%llu", (unsigned long long)bench_counts_error_total(c));
}

/* Percentile -> latency points for a CDF plot: every 10 % up to 90, then
 * halving the distance to 100 % (90, 95, 97.5, ...) as HdrHistogram's
 * percentile distribution does, until one sample is left, then the max. */
static void json_cdf(FILE *out, const struct bench_hist *h)
{
    fputs(",\"cdf\":[", out);
    if (h->count > 0) {
        for (int p = 0; p < 90; p += 10)
            fprintf(out, "[%d,%.1f],", p, us(bench_hist_value_at(h, p)));
        for (double rest = 10.0; rest * (double)h->count >= 100.0; rest /= 2.0) {
            for (int step = 0; step < 4; step++) {
                double pct = 100.0 - rest + rest / 2.0 * step / 4.0;
                fprintf(out, "[%.10g,%.1f],", pct, us(bench_hist_value_at(h, pct)));
            }
        }
        fprintf(out, "[100,%.1f]", us(bench_hist_max(h)));
    }
    fputc(']', out);
}

void bench_report_json(FILE *out, const struct bench_cfg *cfg, const struct bench_result *r)
{
    fprintf(out, "{\"label\":\"%s\",\"client\":\"%s\",\"mode\":\"%s\",\"rate\":%.0f",
            cfg->label, client_name(cfg), cfg->rate_per_s > 0 ? "open" : "closed",
            cfg->rate_per_s);
    fprintf(out, ",\"read_ratio\":%g,\"read_op\":\"%s\",\"write_op\":\"%s\",\"keys\":%u",
            r->read_pct, bench_read_op_name(cfg->read_op), bench_write_op_name(cfg->write_op),
            cfg->keys);
    fprintf(out, ",\"value_size\":%u,\"dist\":\"%s\",\"zipf_theta\":%g,\"watch\":%s",
            cfg->value_size_bytes, cfg->dist == BENCH_DIST_ZIPF ? "zipf" : "uniform",
            cfg->dist == BENCH_DIST_ZIPF ? cfg->zipf_theta : 0.0, cfg->watch ? "true" : "false");
    fprintf(out, ",\"sessions\":%d,\"outstanding\":%d,\"threads\":%d,\"duration_s\":%.3f",
            cfg->sessions, cfg->outstanding, cfg->threads, r->duration_s);
    fprintf(out, ",\"ops\":%llu,\"reads\":%llu,\"writes\":%llu",
            (unsigned long long)ok_ops(r), (unsigned long long)r->counts.read_ok,
            (unsigned long long)r->counts.write_ok);
    fprintf(out, ",\"ops_per_s\":%.1f,\"read_ops_per_s\":%.1f,\"write_ops_per_s\":%.1f",
            per_s(ok_ops(r), r), per_s(r->counts.read_ok, r), per_s(r->counts.write_ok, r));
    json_latencies(out, "", &r->all);
    json_latencies(out, "read_", &r->read);
    json_latencies(out, "write_", &r->write);
    json_errors(out, &r->counts);
    fprintf(out, ",\"notifications\":%llu,\"sessions_lost\":%llu",
            (unsigned long long)r->counts.notifications,
            (unsigned long long)r->counts.sessions_lost);
    json_num_or_null(out, "server_pid", cfg->server_pid ? cfg->server_pid : -1, "%.0f");
    json_num_or_null(out, "server_cpu_s", r->server_cpu_s, "%.3f");
    json_num_or_null(out, "server_cpu_us_per_op", cpu_us_per_op(r->server_cpu_s, r), "%.2f");
    json_num_or_null(out, "bench_cpu_s", r->bench_cpu_s, "%.3f");
    json_num_or_null(out, "bench_cpu_us_per_op", cpu_us_per_op(r->bench_cpu_s, r), "%.2f");
    json_cdf(out, &r->all);
    fputs("}\n", out);
    fflush(out);
}
