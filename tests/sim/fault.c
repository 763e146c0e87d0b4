/* fault — see fault.h. */
#include "tests/sim/fault.h"

#include "tests/sim/net.h"
#include "tests/sim/node.h"

void fault_pick_profile(struct sim *s)
{
    struct rng *g = &s->rng;
    struct sim_profile *p = &s->prof;
    /* One seed in five has a perfect network: elections and catch-up then
     * run on their fast paths, which need covering too. */
    bool calm_net = rng_below(g, 5) == 0;
    p->drop = calm_net ? 0 : (uint32_t)rng_range(g, 0, 100000);
    p->dup = calm_net ? 0 : (uint32_t)rng_range(g, 0, 50000);
    p->reorder = calm_net ? 0 : (uint32_t)rng_range(g, 0, 200000);
    p->long_delay = calm_net ? 0 : (uint32_t)rng_range(g, 0, 20000);
    p->crash = (uint32_t)rng_range(g, 0, 2000);
    p->crash_in_ready = (uint32_t)rng_range(g, 0, 2000);
    p->disk_fault = (uint32_t)rng_range(g, 0, 2000);
    p->slow_disk = (uint32_t)rng_range(g, 0, 3000);
    p->partition = (uint32_t)rng_range(g, 0, 3000);
    p->heal = (uint32_t)rng_range(g, 2000, 10000);
    p->compact = (uint32_t)rng_range(g, 2000, 20000);
    p->tick_skip = (uint32_t)rng_range(g, 0, 200000);
    p->load = rng_below(g, 4) == 0 ? 0 : (uint32_t)rng_range(g, 0, 500000);
    /* Drawn last and only with --reconfig: the seeds without it keep
     * their runs. From a change or two per run to one every ~150 steps
     * (most attempts then meet one still under way: RAFT_EBUSY). */
    if (s->opts.reconfig)
        p->reconfig = (uint32_t)rng_range(g, 500, 8000);
    /* Likewise --corrupt (drawn after the reconfig rate): from one
     * corrupted follower per run to one every ~500 steps. */
    if (s->opts.corrupt)
        p->corrupt = (uint32_t)rng_range(g, 250, 2000);
    /* Likewise --async-log (drawn last): a log thread that finishes a
     * batch within a step or two, or one that takes five on average; one
     * that rarely groups batches, or one that mostly does. */
    if (s->opts.async_log) {
        p->log_sync = (uint32_t)rng_range(g, 200000, 1000000);
        p->log_group = (uint32_t)rng_range(g, 0, 900000);
    }
}

/* A random node that is up, or NULL if none is. */
static struct sim_node *random_up_node(struct sim *s)
{
    uint32_t start = (uint32_t)rng_below(&s->rng, s->n_nodes);
    for (uint32_t i = 0; i < s->n_nodes; i++) {
        struct sim_node *n = &s->nodes[(start + i) % s->n_nodes];
        if (n->up)
            return n;
    }
    return NULL;
}

static void trace_fault(struct sim *s, const struct sim_node *n, uint16_t kind, int64_t a)
{
    struct trace_event ev = {.step = s->now, .kind = kind, .node = (uint8_t)n->id, .a = a};
    trace_add(&s->trace, &ev);
}

/* A random node that is up and does not lead (a corrupted leader would
 * be authoritative: its followers would resync to its state), or NULL. */
static struct sim_node *random_follower(struct sim *s)
{
    uint32_t start = (uint32_t)rng_below(&s->rng, s->n_nodes);
    for (uint32_t i = 0; i < s->n_nodes; i++) {
        struct sim_node *n = &s->nodes[(start + i) % s->n_nodes];
        if (n->up && n->seen_role != RAFT_LEADER)
            return n;
    }
    return NULL;
}

/* The node-level faults: crash, mid-ready crash, disk error, slow disk,
 * and with --corrupt a follower's state machine going wrong. */
static void strike_nodes(struct sim *s)
{
    struct sim_node *n;
    if (rng_chance(&s->rng, s->prof.crash) && (n = random_up_node(s)) != NULL)
        node_crash(s, n, TR_CRASH_RANDOM, 0);
    if (rng_chance(&s->rng, s->prof.crash_in_ready) && (n = random_up_node(s)) != NULL)
        n->crash_in_ready = true;
    if (rng_chance(&s->rng, s->prof.disk_fault) && (n = random_up_node(s)) != NULL) {
        n->disk_fault = rng_below(&s->rng, 2) ? DISK_FAULT_SYNC : DISK_FAULT_APPEND;
        trace_fault(s, n, TR_DISK_FAULT, n->disk_fault == DISK_FAULT_SYNC);
    }
    if (rng_chance(&s->rng, s->prof.slow_disk) && (n = random_up_node(s)) != NULL) {
        int64_t stall = rng_range(&s->rng, 5, 60);
        /* The async log's driver goes on while its disk stalls, so now and
         * then a long stall, on the leader if there is one (it queues the
         * most batches): its log thread may fill up to
         * RAFT_LOG_BATCHES_MAX. Drawn only with --async-log. */
        if (s->opts.async_log && rng_below(&s->rng, 8) == 0) {
            struct sim_node *leader = sim_any_leader(s);
            n = leader != NULL ? leader : n;
            stall = rng_range(&s->rng, 200, 800);
        }
        /* A stall holds a synchronous driver's ready back from now; the
         * async log's holds only its log thread (node.c, log_room). */
        if (n->slow_since == 0 && !s->opts.async_log)
            n->slow_since = s->now;
        n->slow_until = s->now + stall;
        trace_fault(s, n, TR_SLOW_DISK, n->slow_until);
    }
    /* Only with --corrupt, so that other runs keep their schedules. */
    if (s->opts.corrupt && rng_chance(&s->rng, s->prof.corrupt) &&
        (n = random_follower(s)) != NULL)
        node_corrupt(s, n);
}

void fault_step(struct sim *s)
{
    for (uint32_t i = 0; i < s->n_nodes && !s->failed; i++) {
        struct sim_node *n = &s->nodes[i];
        if (!n->up && s->now >= n->restart_at)
            node_boot(s, n);
    }
    if (!s->faults_on || s->failed)
        return;
    strike_nodes(s);
    if (rng_chance(&s->rng, s->prof.partition))
        net_partition(s);
    if (rng_chance(&s->rng, s->prof.heal))
        net_heal(s);
}

void fault_stop(struct sim *s)
{
    s->faults_on = false;
    net_heal(s);
    for (uint32_t i = 0; i < s->n_nodes; i++) {
        struct sim_node *n = &s->nodes[i];
        n->slow_until = 0;
        n->disk_fault = DISK_FAULT_NONE;
        n->crash_in_ready = false;
        if (!n->up)
            n->restart_at = s->now;
    }
}
