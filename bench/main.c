/*
 * main.c — larch-bench: parse the arguments, create the keys, run every read
 * ratio with the chosen driver, print each result, optionally clean up.
 * Exit status: 0 all runs measured, 1 a run or the setup failed, 2 bad usage.
 */
#include "bench/bench.h"

#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/* Each session is a socket: lift the soft descriptor limit to the hard one
 * so that a few thousand sessions work without ulimit gymnastics. */
static void raise_fd_limit(int sessions)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    rlim_t want = (rlim_t)sessions + 64;
    if (rl.rlim_cur >= want)
        return;
    rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur < want)
        fprintf(stderr, "larch-bench: warning: descriptor limit %llu is low for %d sessions\n",
                (unsigned long long)rl.rlim_cur, sessions);
}

static int run_one(const struct bench_cfg *cfg, double read_pct, struct bench_result *r,
                   char *err, size_t err_len)
{
#ifdef LARCH_BENCH_HAVE_DPDK
    if (cfg->dpdk_args[0])
        return bench_dpdk_run(cfg, read_pct, r, err, err_len);
#endif
    if (cfg->udp_port != 0)
        return bench_udp_run(cfg, read_pct, r, err, err_len);
#ifdef LARCH_BENCH_HAVE_ZKC
    if (cfg->client == BENCH_CLIENT_C)
        return bench_zkc_run(cfg, read_pct, r, err, err_len);
#endif
    return bench_raw_run(cfg, read_pct, r, err, err_len);
}

static int run_all(const struct bench_cfg *cfg)
{
    struct bench_result *r = malloc(sizeof(*r));
    if (!r) {
        fprintf(stderr, "larch-bench: out of memory\n");
        return 1;
    }
    FILE *table = cfg->json ? stderr : stdout;
    int status = 0;
    bench_report_header(table, cfg);
    for (int i = 0; i < cfg->read_pct_count; i++) {
        char err[512];
        if (run_one(cfg, cfg->read_pcts[i], r, err, sizeof(err)) != 0) {
            fprintf(stderr, "larch-bench: run at %g %% reads against %s:%u failed: %s\n",
                    cfg->read_pcts[i], cfg->host, cfg->port, err);
            status = 1;
            continue;
        }
        bench_report_row(table, cfg, r);
        fflush(table);
        if (cfg->json)
            bench_report_json(stdout, cfg, r);
    }
    free(r);
    return status;
}

int main(int argc, char **argv)
{
    struct bench_cfg cfg;
    char err[512];
    bench_cfg_defaults(&cfg);
    switch (bench_args_parse(&cfg, argc, argv, err, sizeof(err))) {
    case BENCH_ARGS_HELP:
        fputs(bench_usage(), stdout);
        return 0;
    case BENCH_ARGS_VERSION:
        printf("larch-bench %s\n", BENCH_VERSION);
        return 0;
    case BENCH_ARGS_OK:
        break;
    default:
        fprintf(stderr, "larch-bench: %s\nsee 'larch-bench --help'\n", err);
        return 2;
    }
#ifndef LARCH_BENCH_HAVE_DPDK
    if (cfg.dpdk_args[0]) {
        fprintf(stderr, "larch-bench: --dpdk: this build has no DPDK (libdpdk-dev, meson "
                        "-Ddpdk=enabled)\n");
        return 2;
    }
#endif
#ifndef LARCH_BENCH_HAVE_ZKC
    if (cfg.client == BENCH_CLIENT_C) {
        fprintf(stderr, "larch-bench: --client: 'c' needs libzookeeper_mt, which this build "
                        "did not find\n");
        return 2;
    }
#endif
    raise_fd_limit(cfg.sessions);
    if (cfg.setup && bench_setup(&cfg, err, sizeof(err)) != 0) {
        fprintf(stderr, "larch-bench: setup against %s:%u failed: %s\n", cfg.host, cfg.port, err);
        return 1;
    }
    int status = run_all(&cfg);
    if (cfg.cleanup && bench_cleanup(&cfg, err, sizeof(err)) != 0) {
        fprintf(stderr, "larch-bench: cleanup failed: %s\n", err);
        status = 1;
    }
#ifdef LARCH_BENCH_HAVE_DPDK
    fflush(stdout); /* what was measured is out before the wait */
    if (cfg.dpdk_hold && bench_dpdk_hold() != 0) {
        fprintf(stderr, "larch-bench: --dpdk-hold: the peer kept the port up for 60 s\n");
        status = 1;
    }
#endif
    return status;
}
