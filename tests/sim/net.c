/* net — see net.h. */
#include "tests/sim/net.h"

#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "tests/sim/node.h"

void net_init(struct net *net)
{
    memset(net, 0, sizeof(*net));
    net->pool = calloc(NET_POOL_MAX, sizeof(*net->pool));
    net->due = calloc(NET_POOL_MAX, sizeof(*net->due));
    BASE_ASSERT(net->pool != NULL && net->due != NULL);
}

void net_free(struct net *net)
{
    for (size_t i = 0; i < net->n; i++)
        free(net->pool[i].blob);
    free(net->pool);
    free(net->due);
    memset(net, 0, sizeof(*net));
}

/* A copy of m whose entries, entry data, snapshot membership and snapshot
 * bytes live in one malloc'd blob, so the copy outlives the sender's
 * raft_advance. Layout: the entries (8-aligned at the blob's start), the
 * membership (4-aligned: the entries' size is a multiple of 8), bytes. */
_Static_assert(sizeof(struct raft_entry) % _Alignof(struct raft_config) == 0,
               "the membership after the entries must be aligned");

static void copy_msg(struct net_msg *out, const struct raft_msg *m)
{
    size_t entries_size = (size_t)m->n_entries * sizeof(struct raft_entry);
    size_t conf_size = m->snap_config ? sizeof(struct raft_config) : 0;
    size_t size = entries_size + conf_size + m->snap_len;
    for (uint32_t i = 0; i < m->n_entries; i++)
        size += m->entries[i].len;
    uint8_t *blob = malloc(size ? size : 1);
    BASE_ASSERT(blob != NULL);
    out->m = *m;
    out->blob = blob;
    struct raft_entry *entries = (struct raft_entry *)blob;
    if (m->snap_config) {
        struct raft_config *conf = (struct raft_config *)(blob + entries_size);
        *conf = *m->snap_config;
        out->m.snap_config = conf;
    }
    uint8_t *p = blob + entries_size + conf_size;
    for (uint32_t i = 0; i < m->n_entries; i++) {
        entries[i] = m->entries[i];
        if (m->entries[i].len) {
            memcpy(p, m->entries[i].data, m->entries[i].len);
            entries[i].data = p;
            p += m->entries[i].len;
        }
    }
    out->m.entries = m->n_entries ? entries : NULL;
    if (m->snap_len) {
        memcpy(p, m->snap_data, m->snap_len);
        out->m.snap_data = p;
    }
}

/* How long this copy stays on the wire: a short hop normally; reordering
 * and long delays while faults run. */
static int64_t pick_delay(struct sim *s)
{
    int64_t delay = rng_range(&s->rng, 1, 3);
    if (!s->faults_on)
        return delay;
    if (rng_chance(&s->rng, s->prof.reorder))
        delay = rng_range(&s->rng, 1, 25);
    if (rng_chance(&s->rng, s->prof.long_delay))
        delay = rng_range(&s->rng, 50, 400);
    return delay;
}

static void enqueue(struct sim *s, const struct raft_msg *m)
{
    struct net *net = &s->net;
    if (net->n == NET_POOL_MAX) {
        net->dropped++;
        trace_msg(&s->trace, s->now, TR_DROP, m, TR_DROP_POOL_FULL);
        return;
    }
    struct net_msg *slot = &net->pool[net->n++];
    copy_msg(slot, m);
    slot->deliver_at = s->now + pick_delay(s);
    slot->seq = net->seq++;
}

void net_send(struct sim *s, const struct raft_msg *m)
{
    BASE_ASSERT(sim_node(s, m->to) != NULL && sim_node(s, m->from) != NULL);
    s->net.sent++;
    trace_msg(&s->trace, s->now, TR_SEND, m, 0);
    if (s->faults_on && rng_chance(&s->rng, s->prof.drop)) {
        s->net.dropped++;
        trace_msg(&s->trace, s->now, TR_DROP, m, TR_DROP_RANDOM);
        return;
    }
    enqueue(s, m);
    if (s->faults_on && rng_chance(&s->rng, s->prof.dup)) {
        s->net.duplicated++;
        trace_msg(&s->trace, s->now, TR_DUP, m, 0);
        enqueue(s, m);
    }
}

static int due_cmp(const void *a, const void *b)
{
    const struct net_msg *x = a, *y = b;
    if (x->deliver_at != y->deliver_at)
        return x->deliver_at < y->deliver_at ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Hands one message to its node, unless the node is down or the link cut. */
static void deliver_one(struct sim *s, struct net_msg *nm)
{
    struct sim_node *to = sim_node(s, nm->m.to);
    if (!to->up) {
        s->net.dropped++;
        trace_msg(&s->trace, s->now, TR_DROP, &nm->m, TR_DROP_DOWN);
    } else if (s->net.blocked[nm->m.from - 1][nm->m.to - 1]) {
        s->net.dropped++;
        trace_msg(&s->trace, s->now, TR_DROP, &nm->m, TR_DROP_LINK);
    } else {
        s->net.delivered++;
        trace_msg(&s->trace, s->now, TR_DELIVER, &nm->m, 0);
        node_receive(s, to, &nm->m);
    }
}

void net_deliver(struct sim *s)
{
    struct net *net = &s->net;
    size_t n_due = 0;
    for (size_t i = 0; i < net->n;) {
        if (net->pool[i].deliver_at <= s->now) {
            net->due[n_due++] = net->pool[i];
            net->pool[i] = net->pool[--net->n];
        } else {
            i++;
        }
    }
    qsort(net->due, n_due, sizeof(*net->due), due_cmp);
    for (size_t i = 0; i < n_due; i++) {
        if (!s->failed)
            deliver_one(s, &net->due[i]);
        free(net->due[i].blob);
    }
}

/* Blocks both directions between the nodes in side (a bitmask of
 * indexes) and the nodes in other. */
static void cut_between(struct sim *s, uint32_t side, uint32_t other)
{
    for (uint32_t a = 0; a < s->n_nodes; a++)
        for (uint32_t b = 0; b < s->n_nodes; b++)
            if (((side >> a) & 1) && ((other >> b) & 1))
                s->net.blocked[a][b] = s->net.blocked[b][a] = true;
}

/* A random non-empty proper subset of the nodes in all (a bitmask). */
static uint32_t random_side(struct sim *s, uint32_t all)
{
    uint32_t side = 0;
    for (int tries = 0; tries < 16 && (side == 0 || side == all); tries++)
        side = (uint32_t)rng_below(&s->rng, (uint64_t)all + 1) & all;
    return (side == 0 || side == all) ? (all & (0u - all)) : side; /* lowest bit */
}

void net_partition(struct sim *s)
{
    uint32_t all = (1u << s->n_nodes) - 1;
    int64_t kind = rng_range(&s->rng, TR_PART_SPLIT, TR_PART_ISOLATE);
    uint32_t side = 0;
    int64_t other = 0;
    if (kind == TR_PART_SPLIT) {
        side = random_side(s, all);
        cut_between(s, side, all & ~side);
    } else if (kind == TR_PART_ONE_WAY) {
        uint32_t a = (uint32_t)rng_below(&s->rng, s->n_nodes);
        uint32_t b = (a + 1 + (uint32_t)rng_below(&s->rng, s->n_nodes - 1)) % s->n_nodes;
        s->net.blocked[a][b] = true;
        side = 1u << a;
        other = b + 1;
    } else if (kind == TR_PART_BRIDGE) {
        uint32_t mid = (uint32_t)rng_below(&s->rng, s->n_nodes);
        uint32_t rest = all & ~(1u << mid);
        side = random_side(s, rest);
        cut_between(s, side, rest & ~side);
        other = mid + 1;
    } else {
        side = 1u << rng_below(&s->rng, s->n_nodes);
        cut_between(s, side, all & ~side);
    }
    struct trace_event ev = {.step = s->now, .kind = TR_PARTITION, .a = kind, .b = side, .c = other};
    trace_add(&s->trace, &ev);
}

void net_heal(struct sim *s)
{
    memset(s->net.blocked, 0, sizeof(s->net.blocked));
    struct trace_event ev = {.step = s->now, .kind = TR_HEAL};
    trace_add(&s->trace, &ev);
}
