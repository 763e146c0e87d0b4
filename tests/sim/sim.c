/* sim — one run: the world's set-up, the step loop, the end phase (heal,
 * one more write, convergence) and the final history check. See sim.h. */
#include "tests/sim/sim.h"

#include <inttypes.h>
#include <stdarg.h>
#include <string.h>

#include "base/base.h"
#include "tests/sim/check.h"
#include "tests/sim/client.h"
#include "tests/sim/fault.h"
#include "tests/sim/net.h"
#include "tests/sim/node.h"
#include "tests/sim/reconfig.h"

void sim_fail(struct sim *s, uint32_t node, const char *fmt, ...)
{
    if (s->failed)
        return;
    s->failed = true;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->fail_msg, sizeof(s->fail_msg), fmt, ap);
    va_end(ap);
    struct trace_event ev = {.step = s->now, .kind = TR_FAIL, .node = (uint8_t)node};
    trace_add(&s->trace, &ev);
}

/* The cluster's shape and the core's knobs, drawn per seed: small counter
 * limits so that terms roll over often, small append batches so that
 * catch-up takes many rounds. */
static void pick_params(struct sim *s)
{
    struct rng *g = &s->rng;
    s->counter_limit = s->opts.counter_limit ? s->opts.counter_limit
                                             : (uint32_t)rng_range(g, 8, 64);
    s->election_ticks = (uint32_t)rng_range(g, 8, 16);
    s->heartbeat_ticks = (uint32_t)rng_range(g, 1, 3);
    s->max_append_entries = (uint32_t)rng_range(g, 1, 8);
    s->max_append_bytes = rng_below(g, 2) ? 0 : (size_t)rng_range(g, 24, 200);
    fault_pick_profile(s);
}

struct sim_node *sim_any_leader(struct sim *s)
{
    uint32_t start = (uint32_t)rng_below(&s->rng, s->n_nodes);
    for (uint32_t i = 0; i < s->n_nodes; i++) {
        struct sim_node *n = &s->nodes[(start + i) % s->n_nodes];
        struct raft_status st;
        if (!n->up)
            continue;
        raft_status(n->r, &st);
        if (st.role == RAFT_LEADER)
            return n;
    }
    return NULL;
}

uint32_t sim_cfg_members(const struct sim *s, uint32_t id, struct raft_member *out)
{
    BASE_ASSERT(id >= 1 && id <= s->n_nodes);
    memcpy(out, s->members, s->n_members * sizeof(*out));
    uint32_t n = s->n_members;
    if (id > s->n_members)
        out[n++] = (struct raft_member){.id = id, .voter = false};
    return n;
}

/* How many spares: --spares, or with --reconfig 0..2 drawn per seed. The
 * draw happens only with --reconfig, so that the runs of seeds without it
 * are exactly what they were before spares existed. */
static uint32_t pick_spares(struct sim *s)
{
    if (s->opts.spares_given)
        return s->opts.spares;
    return s->opts.reconfig ? (uint32_t)rng_range(&s->rng, 0, SIM_SPARES_DRAWN_MAX) : 0;
}

/* The membership the run starts with (ids 1..n_members), then the spares
 * (n_members+1..n_nodes): every node has its seen membership set to what
 * it boots with, so that only changes are traced. */
static void setup_nodes(struct sim *s)
{
    const struct sim_opts *opts = &s->opts;
    s->n_members = opts->servers + opts->observers;
    s->n_nodes = s->n_members + pick_spares(s);
    BASE_ASSERT(s->n_nodes <= SIM_NODES_MAX);
    for (uint32_t i = 0; i < s->n_members; i++)
        s->members[i] = (struct raft_member){.id = i + 1, .voter = i < opts->servers};
    for (uint32_t i = 0; i < s->n_nodes; i++) {
        struct sim_node *n = &s->nodes[i];
        n->id = i + 1;
        disk_init(&n->disk);
        struct raft_config conf = {0};
        conf.n_members = sim_cfg_members(s, n->id, conf.members);
        reconfig_trace_words(&conf, &n->seen_conf_b, &n->seen_conf_c);
    }
}

static bool setup(struct sim *s, const struct sim_opts *opts)
{
    memset(s, 0, sizeof(*s));
    s->opts = *opts;
    BASE_ASSERT(opts->servers >= 1 && opts->servers <= SIM_VOTERS_MAX);
    BASE_ASSERT(opts->observers <= SIM_OBSERVERS_MAX);
    BASE_ASSERT(!opts->spares_given || opts->spares <= SIM_SPARES_MAX);
    rng_seed(&s->rng, opts->seed);
    trace_init(&s->trace, opts->trace, stdout);
    setup_nodes(s);
    pick_params(s);
    net_init(&s->net);
    check_init(&s->check, s->members, s->n_members);
    clients_init(s);
    s->faults_on = true;
    for (uint32_t i = 0; i < s->n_nodes && !s->failed; i++)
        node_boot(s, &s->nodes[i]);
    return !s->failed;
}

static void teardown(struct sim *s)
{
    for (uint32_t i = 0; i < s->n_nodes; i++)
        node_free(&s->nodes[i]);
    net_free(&s->net);
    check_free(&s->check);
}

static void tick_nodes(struct sim *s)
{
    for (uint32_t i = 0; i < s->n_nodes && !s->failed; i++) {
        struct sim_node *n = &s->nodes[i];
        if (!n->up || s->now < n->next_tick)
            continue;
        node_tick(s, n);
        /* Clock drift: now and then a node's tick comes a step late. */
        n->next_tick = s->now + 1 + (rng_chance(&s->rng, s->prof.tick_skip) ? 1 : 0);
    }
}

/* One step: faults, deliveries, ticks, every node's ready (in an order
 * that varies), snapshots, clients. */
static void step(struct sim *s)
{
    s->now++;
    fault_step(s);
    if (!s->failed)
        net_deliver(s);
    tick_nodes(s);
    uint32_t start = (uint32_t)rng_below(&s->rng, s->n_nodes);
    for (uint32_t i = 0; i < s->n_nodes && !s->failed; i++) {
        struct sim_node *n = &s->nodes[(start + i) % s->n_nodes];
        /* A snapshot may finish before or after the node's ready: before,
         * the core may already hold messages from this step's deliveries. */
        bool compact_first = rng_below(&s->rng, 2) == 0;
        /* With --async-log the log thread finishes its batches before or
         * after the ready (no draw otherwise: old seeds keep their runs). */
        bool log_first = s->opts.async_log && rng_below(&s->rng, 2) == 0;
        if (compact_first)
            node_maybe_compact(s, n);
        if (log_first)
            node_log_step(s, n);
        node_process_ready(s, n);
        if (!log_first)
            node_log_step(s, n);
        if (!compact_first)
            node_maybe_compact(s, n);
    }
    if (!s->failed)
        clients_step(s);
    if (!s->failed)
        reconfig_step(s);
}

static void trace_phase(struct sim *s, int64_t phase)
{
    struct trace_event ev = {.step = s->now, .kind = TR_PHASE, .a = phase};
    trace_add(&s->trace, &ev);
}

/* Why the end phase did not converge: every node's view (a node the
 * committed membership leaves out is marked "out"; it need not converge). */
static void fail_liveness(struct sim *s, bool final_done)
{
    char buf[900], z1[24], z2[24], z3[24], z4[24];
    size_t len = 0;
    int64_t conf_zxid;
    const struct raft_config *conf = check_committed_config(&s->check, &conf_zxid);
    for (uint32_t i = 0; i < s->n_nodes && len < sizeof(buf); i++) {
        const struct sim_node *n = &s->nodes[i];
        struct raft_status st = {0};
        if (n->up)
            raft_status(n->r, &st);
        /* last and the membership's zxid: a node whose newest membership
         * makes it no voter ("novote") but holds the newest log can stall
         * an election (FINDINGS.txt, finding 3) */
        len += (size_t)snprintf(buf + len, sizeof(buf) - len,
                                " n%u%s:%s t=%u commit=%s last=%s conf=%s%s applied=%s;", n->id,
                                reconfig_has(conf, n->id) ? "" : "(out)",
                                n->up ? raft_role_name(st.role) : "down", st.term,
                                trace_zxid(st.commit_zxid, z1), trace_zxid(st.last_zxid, z4),
                                trace_zxid(st.config_zxid, z3),
                                reconfig_votes(&st.config, n->id) ? "" : " novote",
                                trace_zxid(n->kv.applied_zxid, z2));
    }
    char z5[24];
    sim_fail(s, 0, "liveness: %d steps after healing, %s (committed membership of %s%s);%s",
             SIM_END_STEPS_MAX,
             final_done ? "the nodes have not converged" : "no write has completed",
             trace_zxid(conf_zxid, z5), conf->n_old ? ", joint" : "", buf);
}

/* Every node applied and committed the same last entry, but odd's state
 * machine still differs after SIM_DIVERGED_STEPS: it never resynced. */
static void fail_divergence(struct sim *s, uint32_t odd)
{
    const struct sim_node *n = sim_node(s, odd);
    const struct check_commit *last = &s->check.committed[s->check.n_committed - 1];
    char z[24], why[96];
    if (n->diverged || n->snap_diverged)
        snprintf(why, sizeof(why), "its state machine was corrupted at step %" PRId64
                 " and never rebuilt", n->diverged ? n->diverged_step : n->snap_diverged_step);
    else
        snprintf(why, sizeof(why), "no corruption was put there");
    sim_fail(s, odd, "divergence: %d steps after every node applied %s, n%u's digest is %016"
             PRIx64 ", the committed one %016" PRIx64 " (%s)", SIM_DIVERGED_STEPS,
             trace_zxid(last->zxid, z), odd, kv_digest(&n->kv), last->digest, why);
}

/* Heal everything, stop faults, then require progress: a new write
 * completes and every node applies the same last committed entry, with
 * the same digest (a corrupted state machine must have resynced). */
static void end_phase(struct sim *s)
{
    fault_stop(s);
    s->clients.issuing = false;
    trace_phase(s, 1);
    bool final_done = false;
    int64_t final_zxid = 0;
    int64_t odd_since = 0;
    for (int i = 0; i < SIM_END_STEPS_MAX && !s->failed; i++) {
        step(s);
        if (!final_done && !s->failed && clients_final_write(s, &final_zxid)) {
            final_done = true;
            trace_phase(s, 2);
        }
        uint32_t odd = 0;
        if (final_done && !s->failed && check_converged(s, final_zxid, &odd)) {
            trace_phase(s, 3);
            return;
        }
        if (odd == 0)
            odd_since = 0;
        else if (odd_since == 0)
            odd_since = s->now;
        else if (s->now - odd_since >= SIM_DIVERGED_STEPS)
            fail_divergence(s, odd);
    }
    if (!s->failed)
        fail_liveness(s, final_done);
}

static void add_stats(const struct sim *s, struct sim_stats *st)
{
    const uint64_t *count = s->trace.count;
    st->runs++;
    st->steps += (uint64_t)s->now;
    for (uint32_t i = 0; i < s->n_nodes; i++)
        if (s->nodes[i].disk.hard.term > st->max_term)
            st->max_term = s->nodes[i].disk.hard.term;
    st->committed += s->check.n_committed;
    st->ops_done += count[TR_OP_DONE];
    st->ops_unknown += count[TR_OP_LOST];
    st->crashes += count[TR_CRASH];
    st->snap_installs += count[TR_SNAP_INSTALL];
    st->truncations += count[TR_TRUNCATE];
    st->compactions += count[TR_COMPACT];
    st->msgs_sent += s->net.sent;
    st->msgs_dropped += s->net.dropped;
    st->msgs_duplicated += s->net.duplicated;
    for (size_t i = 0; i < s->check.n_configs; i++)
        st->configs_done += s->check.configs[i].conf.n_old == 0;
    st->reconfigs += s->reconfigs;
    st->corruptions += count[TR_CORRUPT];
    st->mismatches += count[TR_MISMATCH];
    st->resyncs += count[TR_RESYNC];
    for (int i = 0; i < 5; i++)
        st->corrupt_gone[i] += s->corrupt_gone[i];
    st->log_batches += count[TR_LOG_QUEUE];
    st->log_syncs += count[TR_LOG_SYNCED];
    st->log_grouped += s->log_grouped;
    st->log_full += s->log_full;
    st->log_lost += s->log_lost;
    if (s->log_depth_max > st->log_depth_max)
        st->log_depth_max = s->log_depth_max;
}

bool sim_run(struct sim *s, const struct sim_opts *opts, struct sim_stats *stats)
{
    if (setup(s, opts)) {
        for (uint32_t i = 0; i < opts->steps && !s->failed; i++)
            step(s);
        if (!s->failed)
            end_phase(s);
        if (!s->failed)
            clients_check_history(s);
    }
    add_stats(s, stats);
    teardown(s);
    return !s->failed;
}

void sim_print_stats(const struct sim_stats *st, FILE *out)
{
    fprintf(out, "  %" PRIu64 " runs, %" PRIu64 " steps; max term %" PRIu64 ", %" PRIu64
                 " entries committed; client ops %" PRIu64 " done, %" PRIu64 " unknown; %" PRIu64
                 " crashes, %" PRIu64 " snapshots installed, %" PRIu64 " truncations, %" PRIu64
                 " compactions; messages %" PRIu64 " sent, %" PRIu64 " dropped, %" PRIu64
                 " duplicated\n",
            st->runs, st->steps, st->max_term, st->committed, st->ops_done, st->ops_unknown,
            st->crashes, st->snap_installs, st->truncations, st->compactions, st->msgs_sent,
            st->msgs_dropped, st->msgs_duplicated);
    if (st->reconfigs || st->configs_done)
        fprintf(out, "  membership changes: %" PRIu64 " started, %" PRIu64 " done\n",
                st->reconfigs, st->configs_done);
    if (st->corruptions || st->mismatches || st->resyncs)
        fprintf(out, "  corruptions: %" PRIu64 " struck, %" PRIu64 " digest mismatches found, %"
                     PRIu64 " resyncs; gone otherwise: %" PRIu64 " overwritten, %" PRIu64
                     " crashed, %" PRIu64 " replaced by a SNAP, %" PRIu64
                     " led undetected (taken back)\n",
                st->corruptions, st->mismatches, st->resyncs, st->corrupt_gone[TR_GONE_WRITE],
                st->corrupt_gone[TR_GONE_CRASH], st->corrupt_gone[TR_GONE_SNAP],
                st->corrupt_gone[TR_GONE_LED]);
    if (st->log_batches)
        fprintf(out, "  async log: %" PRIu64 " batches queued, %" PRIu64 " fdatasyncs made them "
                     "durable (%" PRIu64 " of several at once), %" PRIu64 " lost queued in "
                     "crashes; at most %" PRIu64 " queued on a node, %" PRIu64
                     " readies waited for room\n",
                st->log_batches, st->log_syncs, st->log_grouped, st->log_lost,
                st->log_depth_max, st->log_full);
}

void sim_replay_cmd(const struct sim_opts *o, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s --seed %" PRIu64 " --servers %u --steps %u", o->argv0, o->seed,
                     o->servers, o->steps);
    if (n > 0 && (size_t)n < len && o->observers)
        n += snprintf(buf + n, len - (size_t)n, " --observers %u", o->observers);
    if (n > 0 && (size_t)n < len && o->spares_given)
        n += snprintf(buf + n, len - (size_t)n, " --spares %u", o->spares);
    if (n > 0 && (size_t)n < len && o->reconfig)
        n += snprintf(buf + n, len - (size_t)n, " --reconfig");
    if (n > 0 && (size_t)n < len && o->corrupt)
        n += snprintf(buf + n, len - (size_t)n, " --corrupt");
    if (n > 0 && (size_t)n < len && o->async_log)
        n += snprintf(buf + n, len - (size_t)n, " --async-log");
    if (n > 0 && (size_t)n < len && o->counter_limit)
        n += snprintf(buf + n, len - (size_t)n, " --counter-limit %u", o->counter_limit);
    if (n > 0 && (size_t)n < len && o->break_name)
        snprintf(buf + n, len - (size_t)n, " --break %s", o->break_name);
}

void sim_report(const struct sim *s, FILE *out)
{
    char cmd[512];
    sim_replay_cmd(&s->opts, cmd, sizeof(cmd));
    fprintf(out, "FAIL seed %" PRIu64 " at step %" PRId64 ": %s\n", s->opts.seed, s->now,
            s->fail_msg);
    fprintf(out, "last %u events:\n", TRACE_SHOWN);
    trace_dump(&s->trace, out, TRACE_SHOWN);
    if (s->clients.bad_key >= 0)
        clients_dump_key(s, (uint8_t)s->clients.bad_key, out);
    fprintf(out, "replay: %s\n", cmd);
}
