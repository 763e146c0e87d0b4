/* client — see client.h. */
#include "tests/sim/client.h"

#include <inttypes.h>
#include <string.h>

#include "base/base.h"
#include "tests/sim/check.h"

#define CLIENT_WRITE_TIMEOUT_STEPS 400
#define CLIENT_READ_TIMEOUT_STEPS 300

void clients_init(struct sim *s)
{
    struct clients *cl = &s->clients;
    memset(cl, 0, sizeof(*cl));
    cl->gap_steps = (int64_t)s->opts.steps * SIM_CLIENTS / (SIM_OPS_MAX - SIM_FINAL_TRIES);
    if (cl->gap_steps < 1)
        cl->gap_steps = 1;
    for (uint32_t i = 0; i < SIM_CLIENTS; i++) {
        cl->c[i].id = i + 1;
        cl->c[i].next_at = rng_range(&s->rng, 1, cl->gap_steps);
    }
    cl->next_value = 1;
    cl->issuing = true;
    cl->final_op = UINT32_MAX;
    cl->bad_key = -1;
}

static void trace_op(struct sim *s, uint16_t kind, uint32_t node, int64_t a, int64_t b, int64_t c)
{
    struct trace_event ev = {.step = s->now, .kind = kind, .node = (uint8_t)node, .a = a, .b = b,
                             .c = c};
    trace_add(&s->trace, &ev);
}

/* A fresh history slot for a call that has happened at logical time call. */
static uint32_t record_op(struct sim *s, struct client *c, uint8_t kind, uint8_t key,
                          int64_t call)
{
    struct clients *cl = &s->clients;
    BASE_ASSERT(cl->n_ops < SIM_OPS_MAX && cl->per_key[key] < LIN_OPS_MAX);
    uint32_t id = cl->n_ops++;
    struct client_op *op = &cl->ops[id];
    memset(op, 0, sizeof(*op));
    op->lin.kind = kind;
    op->lin.call = call;
    op->key = key;
    op->recorded = true;
    op->client = c->id;
    op->node = c->node;
    cl->per_key[key]++;
    return id;
}

/* The op had no effect (a failed read): it leaves the history. */
static void unrecord(struct sim *s, struct client *c)
{
    struct client_op *op = &s->clients.ops[c->op];
    op->recorded = false;
    op->finished = true;
    s->clients.per_key[op->key]--;
    c->state = CLIENT_IDLE;
    c->next_at = s->now + rng_range(&s->rng, 1, s->clients.gap_steps);
}

/* The op may or may not have taken effect: it stays, open-ended. */
static void give_up(struct sim *s, struct client *c)
{
    struct client_op *op = &s->clients.ops[c->op];
    op->lin.unknown = true;
    op->finished = true;
    trace_op(s, TR_OP_LOST, op->node, c->op, 0, 0);
    c->state = CLIENT_IDLE;
    c->next_at = s->now + rng_range(&s->rng, 1, s->clients.gap_steps);
}

static void finish(struct sim *s, struct client *c, int64_t result, int64_t zxid)
{
    struct client_op *op = &s->clients.ops[c->op];
    op->lin.ret = ++s->clock;
    op->finished = true;
    trace_op(s, TR_OP_DONE, op->node, c->op, result, zxid);
    c->state = CLIENT_IDLE;
    c->leader_hint = op->node;
    c->next_at = s->now + rng_range(&s->rng, 1, s->clients.gap_steps);
}

/* A refused attempt: no effect, try again soon, maybe where the refusing
 * server says the leader is. */
static void refused(struct sim *s, struct client *c, const struct sim_node *n)
{
    c->leader_hint = 0;
    if (n != NULL && n->up) {
        struct raft_status st;
        raft_status(n->r, &st);
        c->leader_hint = st.leader_id;
    }
    c->next_at = s->now + rng_range(&s->rng, 1, 5);
}

static struct sim_node *pick_server(struct sim *s, struct client *c)
{
    uint32_t id = c->leader_hint;
    if (id == 0 || rng_below(&s->rng, 4) == 0)
        id = (uint32_t)rng_range(&s->rng, 1, s->n_nodes);
    c->node = id;
    return sim_node(s, id);
}

/* A key with room in its history, starting from a random one; -1: none. */
static int pick_key(struct sim *s)
{
    int start = (int)rng_below(&s->rng, KV_CLIENT_KEYS);
    for (int i = 0; i < KV_CLIENT_KEYS; i++) {
        int k = (start + i) % KV_CLIENT_KEYS;
        if (s->clients.per_key[k] < LIN_OPS_MAX)
            return k;
    }
    return -1;
}

/* write or cas through raft_propose; false if the server refused. */
static bool issue_write(struct sim *s, struct client *c, struct sim_node *n, uint8_t kind,
                        uint8_t key)
{
    struct clients *cl = &s->clients;
    struct kv_op op = {.kind = kind, .key = key, .op_id = cl->n_ops, .value = cl->next_value++};
    if (kind == KV_OP_CAS)
        op.expect = rng_below(&s->rng, 10) < 7 ? cl->last_value[key]
                                               : rng_range(&s->rng, 0, cl->next_value);
    uint8_t buf[KV_OP_BYTES];
    kv_encode_op(&op, buf);
    int64_t call = ++s->clock, zxid = 0;
    int rc = n->up ? raft_propose(n->r, buf, sizeof(buf), &zxid) : RAFT_ENOTLEADER;
    if (n->up)
        check_leader(s, n);
    trace_op(s, TR_PROPOSE, n->id, c->id, op.op_id, rc == RAFT_OK ? zxid : rc);
    BASE_ASSERT(rc != RAFT_ENOMEM);
    if (rc != RAFT_OK)
        return false;
    c->op = record_op(s, c, kind == KV_OP_CAS ? LIN_CAS : LIN_WRITE, key, call);
    BASE_ASSERT(c->op == op.op_id);
    struct client_op *rec = &cl->ops[c->op];
    rec->lin.value = op.value;
    rec->lin.expect = op.expect;
    rec->zxid = zxid;
    c->state = CLIENT_WRITE_WAIT;
    c->deadline = s->now + CLIENT_WRITE_TIMEOUT_STEPS;
    return true;
}

/* sync + read: raft_read_index; false if the server refused. */
static bool issue_read(struct sim *s, struct client *c, struct sim_node *n, uint8_t key)
{
    uint64_t ctx = ++s->clients.read_ctx_seq;
    int64_t call = ++s->clock;
    int rc = n->up ? raft_read_index(n->r, ctx) : RAFT_ENOTLEADER;
    if (n->up)
        check_leader(s, n);
    BASE_ASSERT(rc != RAFT_ENOMEM);
    if (rc != RAFT_OK)
        return false;
    c->op = record_op(s, c, LIN_READ, key, call);
    trace_op(s, TR_READ_START, n->id, c->op, rc, 0);
    c->read_ctx = ctx;
    c->state = CLIENT_READ_INDEX;
    c->deadline = s->now + CLIENT_READ_TIMEOUT_STEPS;
    return true;
}

static void issue(struct sim *s, struct client *c)
{
    int key = pick_key(s);
    if (key < 0 || s->clients.n_ops >= SIM_OPS_MAX - SIM_FINAL_TRIES)
        return;
    struct sim_node *n = pick_server(s, c);
    uint64_t r = rng_below(&s->rng, 10);
    bool ok;
    if (r < 4)
        ok = issue_write(s, c, n, KV_OP_WRITE, (uint8_t)key);
    else if (r < 6)
        ok = issue_write(s, c, n, KV_OP_CAS, (uint8_t)key);
    else
        ok = issue_read(s, c, n, (uint8_t)key);
    if (!ok)
        refused(s, c, n);
}

/* A read whose index the server has applied: read the register. */
static void serve_read(struct sim *s, struct client *c)
{
    struct client_op *op = &s->clients.ops[c->op];
    const struct sim_node *n = sim_node(s, op->node);
    if (!n->up || n->kv.applied_zxid < op->zxid)
        return;
    op->lin.value = n->kv.values[op->key];
    s->clients.last_value[op->key] = op->lin.value;
    finish(s, c, op->lin.value, n->kv.applied_zxid);
}


/* Background load: a write to KV_LOAD_KEY on a leader. It has no history
 * entry (its key is not checked for linearizability, only by digest), so
 * it can be plentiful: long logs, counter roll-over, truncations,
 * snapshot catch-up. */
static void propose_load(struct sim *s)
{
    struct sim_node *n = sim_any_leader(s);
    if (n == NULL)
        return;
    struct kv_op op = {.kind = KV_OP_WRITE, .key = KV_LOAD_KEY, .op_id = UINT32_MAX,
                       .value = s->clients.next_value++};
    uint8_t buf[KV_OP_BYTES];
    kv_encode_op(&op, buf);
    int64_t zxid;
    int rc = raft_propose(n->r, buf, sizeof(buf), &zxid);
    BASE_ASSERT(rc != RAFT_ENOMEM);
    check_leader(s, n);
}

void clients_step(struct sim *s)
{
    if (s->clients.issuing && rng_chance(&s->rng, s->prof.load))
        propose_load(s);
    for (uint32_t i = 0; i < SIM_CLIENTS && !s->failed; i++) {
        struct client *c = &s->clients.c[i];
        if (c->state == CLIENT_READ_APPLY)
            serve_read(s, c);
        if (c->state == CLIENT_IDLE) {
            if (s->clients.issuing && s->now >= c->next_at)
                issue(s, c);
        } else if (s->now > c->deadline) {
            if (c->state == CLIENT_WRITE_WAIT)
                give_up(s, c);
            else
                unrecord(s, c);
        }
    }
}

void clients_on_apply(struct sim *s, const struct sim_node *n, int64_t zxid,
                      const struct kv_result *res)
{
    char z[24];
    for (uint32_t i = 0; i < SIM_CLIENTS; i++) {
        struct client *c = &s->clients.c[i];
        struct client_op *op = &s->clients.ops[c->op];
        if (c->state != CLIENT_WRITE_WAIT || op->node != n->id || op->zxid > zxid)
            continue;
        if (op->zxid < zxid) { /* skipped past it: cannot tell */
            give_up(s, c);
        } else if (!res->is_op || res->op.op_id != c->op) {
            sim_fail(s, n->id, "n%u applies %s, which raft_propose gave op %u, but it holds %s",
                     n->id, trace_zxid(zxid, z), c->op,
                     res->is_op ? "another op" : "a no-op or a membership");
        } else {
            op->lin.cas_ok = res->cas_ok;
            if (op->lin.kind == LIN_WRITE || res->cas_ok)
                s->clients.last_value[op->key] = op->lin.value;
            finish(s, c, res->cas_ok, zxid);
        }
    }
}

void clients_on_read_index(struct sim *s, const struct sim_node *n, const struct raft_read *rd)
{
    for (uint32_t i = 0; i < SIM_CLIENTS; i++) {
        struct client *c = &s->clients.c[i];
        struct client_op *op = &s->clients.ops[c->op];
        if (c->state != CLIENT_READ_INDEX || op->node != n->id || c->read_ctx != rd->ctx)
            continue;
        trace_op(s, TR_READ_INDEX, n->id, c->op, rd->zxid, rd->ok);
        if (!rd->ok) {
            unrecord(s, c);
            continue;
        }
        op->zxid = rd->zxid;
        c->state = CLIENT_READ_APPLY;
    }
}

/* Every op waiting on n whose zxid matches lost (in flight on a crashed
 * node: writes become unknown, reads fail). */
static void lose_ops(struct sim *s, const struct sim_node *n, int64_t above, int64_t through)
{
    for (uint32_t i = 0; i < SIM_CLIENTS; i++) {
        struct client *c = &s->clients.c[i];
        struct client_op *op = &s->clients.ops[c->op];
        if (c->state == CLIENT_IDLE || op->node != n->id)
            continue;
        if (c->state == CLIENT_WRITE_WAIT && op->zxid > above && op->zxid <= through)
            give_up(s, c);
        else if (c->state != CLIENT_WRITE_WAIT && above < 0)
            unrecord(s, c);
    }
}

void clients_on_crash(struct sim *s, const struct sim_node *n)
{
    lose_ops(s, n, -1, INT64_MAX);
}

void clients_on_truncate(struct sim *s, const struct sim_node *n, int64_t after)
{
    lose_ops(s, n, after, INT64_MAX);
}

void clients_on_snapshot(struct sim *s, const struct sim_node *n, int64_t zxid)
{
    lose_ops(s, n, 0, zxid);
}

bool clients_quiet(const struct sim *s)
{
    for (uint32_t i = 0; i < SIM_CLIENTS; i++)
        if (s->clients.c[i].state != CLIENT_IDLE)
            return false;
    return true;
}

/* The key with the fewest ops: the final write always has room. */
static uint8_t quietest_key(const struct sim *s)
{
    uint8_t best = 0;
    for (uint8_t k = 1; k < KV_CLIENT_KEYS; k++)
        if (s->clients.per_key[k] < s->clients.per_key[best])
            best = k;
    return best;
}

bool clients_final_write(struct sim *s, int64_t *zxid)
{
    struct clients *cl = &s->clients;
    struct client *c = &cl->c[0];
    if (cl->final_op != UINT32_MAX && cl->ops[cl->final_op].finished &&
        !cl->ops[cl->final_op].lin.unknown) {
        *zxid = cl->ops[cl->final_op].zxid;
        return true;
    }
    if (c->state != CLIENT_IDLE || s->now < c->next_at || cl->final_tries >= SIM_FINAL_TRIES ||
        cl->n_ops >= SIM_OPS_MAX)
        return false;
    struct sim_node *n = pick_server(s, c);
    if (issue_write(s, c, n, KV_OP_WRITE, quietest_key(s))) {
        cl->final_op = c->op;
        cl->final_tries++;
    } else {
        refused(s, c, n);
    }
    return false;
}

/* The lin ops of key's history; ops still in flight at the end are
 * writes with an unknown outcome (reads still in flight had no effect). */
static size_t key_history(const struct sim *s, uint8_t key, struct lin_op *out)
{
    size_t n = 0;
    for (uint32_t i = 0; i < s->clients.n_ops; i++) {
        const struct client_op *op = &s->clients.ops[i];
        if (!op->recorded || op->key != key)
            continue;
        if (!op->finished && op->lin.kind == LIN_READ)
            continue;
        BASE_ASSERT(n < LIN_OPS_MAX);
        out[n] = op->lin;
        if (!op->finished)
            out[n].unknown = true;
        n++;
    }
    return n;
}

bool clients_check_history(struct sim *s)
{
    for (uint8_t key = 0; key < KV_CLIENT_KEYS; key++) {
        struct lin_op ops[LIN_OPS_MAX];
        size_t n = key_history(s, key, ops);
        enum lin_result r = lin_check(ops, n, 0);
        if (r != LIN_OK) {
            s->clients.bad_key = key;
            sim_fail(s, 0, "linearizability: the history of key %u (%zu ops) is %s", key, n,
                     lin_result_name(r));
            return false;
        }
    }
    return true;
}

void clients_dump_key(const struct sim *s, uint8_t key, FILE *out)
{
    static const char *kind_name[] = {"?", "write", "cas", "read"};
    fprintf(out, "history of key %u (call..return logical times):\n", key);
    for (uint32_t i = 0; i < s->clients.n_ops; i++) {
        const struct client_op *op = &s->clients.ops[i];
        if (!op->recorded || op->key != key)
            continue;
        const struct lin_op *l = &op->lin;
        fprintf(out, "  op %3u client %u n%u %-5s", i, op->client, op->node, kind_name[l->kind]);
        if (l->kind == LIN_CAS)
            fprintf(out, " %" PRId64 "->%" PRId64 " %s", l->expect, l->value,
                    l->unknown ? "?" : l->cas_ok ? "ok" : "failed");
        else
            fprintf(out, " %" PRId64, l->value);
        if (l->unknown || !op->finished)
            fprintf(out, "  [%" PRId64 ", open)\n", l->call);
        else
            fprintf(out, "  [%" PRId64 ", %" PRId64 "]\n", l->call, l->ret);
    }
}
