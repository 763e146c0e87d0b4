/*
 * larch-sim — the seeded deterministic cluster simulator (see README.md):
 *   larch-sim --seed N [--servers 3|5] [--observers 0|1] [--steps N]
 *             [--reconfig] [--spares 0..3] [--counter-limit N] [--corrupt]
 *             [--async-log]
 *             [--break commit-minority|vote-log-check|config-no-joint|no-resync|
 *                      async-early-ack]
 *             [--trace]
 *   larch-sim --seeds A..B [same options] [--expect-failure]
 *   larch-sim --self-test
 * Exit status: 0 when every run passed (with --expect-failure: when some
 * seed failed, so a test can require that the checks still bite).
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/sim/selftest.h"
#include "tests/sim/sim.h"

struct cli {
    struct sim_opts opts;
    uint64_t first, last; /* the seed range (first == last: one seed) */
    bool range;
    bool expect_failure;
    bool self_test;
};

/* The run in progress, for the abort handler's replay line. */
static const struct sim_opts *current_run;

static void usage(FILE *out)
{
    fprintf(out, "usage: larch-sim --seed N | --seeds A..B | --self-test\n"
                 "  [--servers 3|5] [--observers 0|1] [--steps N] [--counter-limit N]\n"
                 "  [--reconfig] [--spares 0..%u] [--corrupt] [--async-log]\n"
                 "  [--break commit-minority|vote-log-check|config-no-joint|no-resync|\n"
                 "           async-early-ack]\n"
                 "  [--trace]\n"
                 "  [--expect-failure]\n", SIM_SPARES_MAX);
}

static bool parse_u64(const char *s, uint64_t *v)
{
    char *end;
    if (s == NULL || *s == '\0')
        return false;
    *v = strtoull(s, &end, 10);
    return *end == '\0';
}

static bool parse_u32(const char *s, uint32_t *v, uint32_t lo, uint32_t hi)
{
    uint64_t x;
    if (!parse_u64(s, &x) || x < lo || x > hi)
        return false;
    *v = (uint32_t)x;
    return true;
}

static bool parse_range(const char *s, uint64_t *first, uint64_t *last)
{
    const char *dots = s ? strstr(s, "..") : NULL;
    if (dots == NULL || dots - s >= 32)
        return false;
    char a[32];
    memcpy(a, s, (size_t)(dots - s));
    a[dots - s] = '\0';
    return parse_u64(a, first) && parse_u64(dots + 2, last) && *first <= *last;
}

static bool parse_break(const char *name, struct sim_opts *o)
{
    if (name && strcmp(name, "commit-minority") == 0)
        o->break_bits = RAFT_BREAK_COMMIT_MINORITY;
    else if (name && strcmp(name, "vote-log-check") == 0)
        o->break_bits = RAFT_BREAK_VOTE_LOG_CHECK;
    else if (name && strcmp(name, "config-no-joint") == 0)
        o->break_bits = RAFT_BREAK_CONFIG_NO_JOINT;
    else if (name && strcmp(name, "no-resync") == 0)
        o->sim_break = SIM_BREAK_NO_RESYNC; /* the driver's, not the core's */
    else if (name && strcmp(name, "async-early-ack") == 0)
        o->sim_break = SIM_BREAK_ASYNC_EARLY_ACK; /* the driver's too */
    else
        return false;
    o->break_name = name;
    return true;
}

/* One option with its value at argv[i + 1]; false: bad usage. */
static bool parse_valued(struct cli *c, const char *flag, const char *val)
{
    struct sim_opts *o = &c->opts;
    if (strcmp(flag, "--seed") == 0) {
        c->range = false;
        if (!parse_u64(val, &c->first))
            return false;
        c->last = c->first;
        return true;
    }
    if (strcmp(flag, "--seeds") == 0) {
        c->range = true;
        return parse_range(val, &c->first, &c->last);
    }
    if (strcmp(flag, "--servers") == 0)
        return parse_u32(val, &o->servers, 1, SIM_VOTERS_MAX);
    if (strcmp(flag, "--observers") == 0)
        return parse_u32(val, &o->observers, 0, SIM_OBSERVERS_MAX);
    if (strcmp(flag, "--steps") == 0)
        return parse_u32(val, &o->steps, 1, 10000000);
    if (strcmp(flag, "--spares") == 0) {
        o->spares_given = true;
        return parse_u32(val, &o->spares, 0, SIM_SPARES_MAX);
    }
    if (strcmp(flag, "--counter-limit") == 0)
        return parse_u32(val, &o->counter_limit, 2, 0xfffffffeu);
    if (strcmp(flag, "--break") == 0)
        return parse_break(val, o);
    return false;
}

static bool parse_args(struct cli *c, int argc, char **argv)
{
    memset(c, 0, sizeof(*c));
    c->opts = (struct sim_opts){.servers = 3, .steps = 4000, .argv0 = argv[0]};
    bool have_seed = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--trace") == 0)
            c->opts.trace = true;
        else if (strcmp(a, "--expect-failure") == 0)
            c->expect_failure = true;
        else if (strcmp(a, "--self-test") == 0)
            c->self_test = true;
        else if (strcmp(a, "--reconfig") == 0)
            c->opts.reconfig = true;
        else if (strcmp(a, "--corrupt") == 0)
            c->opts.corrupt = true;
        else if (strcmp(a, "--async-log") == 0)
            c->opts.async_log = true;
        else if (i + 1 < argc && parse_valued(c, a, argv[i + 1])) {
            have_seed = have_seed || strcmp(a, "--seed") == 0 || strcmp(a, "--seeds") == 0;
            i++;
        } else {
            return false;
        }
    }
    /* The break only shows with membership changes; the replay line
     * names --reconfig anyway. */
    if (c->opts.break_bits & RAFT_BREAK_CONFIG_NO_JOINT)
        c->opts.reconfig = true;
    /* Likewise: ignoring digest mismatches shows only when state
     * machines go wrong. */
    if (c->opts.sim_break & SIM_BREAK_NO_RESYNC)
        c->opts.corrupt = true;
    /* And acks that outrun the log thread need one. */
    if (c->opts.sim_break & SIM_BREAK_ASYNC_EARLY_ACK)
        c->opts.async_log = true;
    return c->self_test || have_seed;
}

/* A core assertion (BASE_ASSERT in raft.c) aborts the process: say which
 * seed did it and how to replay it before dying. */
static void on_abort(int sig)
{
    (void)sig;
    if (current_run != NULL) {
        char cmd[512];
        sim_replay_cmd(current_run, cmd, sizeof(cmd));
        fprintf(stderr, "ABORT in seed %" PRIu64 "\nreplay: %s\n", current_run->seed, cmd);
        fflush(stderr);
    }
    signal(SIGABRT, SIG_DFL);
    raise(SIGABRT);
}

/* Runs one seed; prints the full report (single seed) or one line. */
static bool run_seed(struct sim *s, struct sim_opts *o, bool one_line, struct sim_stats *stats)
{
    current_run = o;
    bool ok = sim_run(s, o, stats);
    current_run = NULL;
    if (!ok && one_line) {
        char cmd[512];
        sim_replay_cmd(o, cmd, sizeof(cmd));
        printf("seed %" PRIu64 " FAILED at step %" PRId64 ": %s | replay: %s\n", o->seed, s->now,
               s->fail_msg, cmd);
    } else if (!ok) {
        sim_report(s, stdout);
    }
    return ok;
}

static int run_seeds(struct cli *c, struct sim *s)
{
    uint64_t failed = 0, ran = 0;
    struct sim_stats stats = {0};
    for (uint64_t seed = c->first; seed <= c->last; seed++) {
        c->opts.seed = seed;
        ran++;
        if (!run_seed(s, &c->opts, c->range, &stats))
            failed++;
        if (failed && c->expect_failure)
            break; /* the checks bit: that is all the test asks */
        if (seed == UINT64_MAX)
            break;
    }
    if (c->range) {
        char spares[32] = "";
        if (c->opts.spares_given)
            snprintf(spares, sizeof(spares), ", %u spares", c->opts.spares);
        printf("seeds %" PRIu64 "..%" PRIu64 " (%u servers, %u observers%s, %u steps%s%s%s%s%s): "
               "ran %" PRIu64 " failed %" PRIu64 "\n", c->first, c->last, c->opts.servers,
               c->opts.observers, spares, c->opts.steps, c->opts.reconfig ? ", reconfig" : "",
               c->opts.corrupt ? ", corrupt" : "", c->opts.async_log ? ", async log" : "",
               c->opts.break_name ? ", break " : "", c->opts.break_name ? c->opts.break_name : "",
               ran, failed);
    } else if (!failed) {
        printf("seed %" PRIu64 " ok\n", c->first);
    }
    sim_print_stats(&stats, stdout);
    if (c->expect_failure) {
        if (!failed)
            printf("expected a failing seed (the checks should catch --break), found none\n");
        return failed ? 0 : 1;
    }
    return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
    struct cli c;
    if (!parse_args(&c, argc, argv)) {
        usage(stderr);
        return 2;
    }
    if (c.self_test)
        return selftest_run(stdout) ? 0 : 1;
    signal(SIGABRT, on_abort);
    struct sim *s = malloc(sizeof(*s));
    if (s == NULL)
        return 2;
    int rc = run_seeds(&c, s);
    free(s);
    return rc;
}
