/* lin — see lin.h. The search follows Lowe, "Testing for linearizability"
 * (2017) and Porcupine's checkSingle: walk the history's call/return list;
 * at a call, try to linearize that op now (the register model must accept
 * it and the (linearized set, value) pair must be new); at a return whose
 * op is not linearized yet, undo the last choice. */
#include "tests/sim/lin.h"

#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "tests/sim/hash.h"

struct lin_event {
    int64_t time;
    bool is_return;
    uint32_t op;
};

/* The memo: (linearized set, register value) pairs already explored. */
struct lin_cache {
    uint64_t *bits;
    int64_t *value;
    bool *used;
    size_t cap; /* a power of two */
    size_t n;
};

struct lin_search {
    const struct lin_op *ops;
    size_t n_events;
    struct lin_event *ev;
    int *next, *prev, *match; /* list links; index n_events is the head */
    struct lin_cache cache;
};

static int event_cmp(const void *a, const void *b)
{
    const struct lin_event *x = a, *y = b;
    if (x->time != y->time)
        return x->time < y->time ? -1 : 1;
    return (int)x->op - (int)y->op; /* only unknown returns share a time */
}

/* The register model: may op run on value v, and what is left after. */
static bool model_step(const struct lin_op *op, int64_t v, int64_t *next)
{
    switch (op->kind) {
    case LIN_WRITE:
        *next = op->value;
        return true;
    case LIN_READ:
        *next = v;
        return v == op->value;
    case LIN_CAS:
        if (op->unknown) {
            *next = v == op->expect ? op->value : v;
            return true;
        }
        *next = op->cas_ok ? op->value : v;
        return op->cas_ok == (v == op->expect);
    default:
        BASE_ASSERT(!"unknown lin op kind");
    }
    return false;
}

static size_t cache_slot(const struct lin_cache *c, uint64_t bits, int64_t value)
{
    uint64_t h = hash_u64(hash_u64(HASH_FNV_OFFSET, bits), (uint64_t)value);
    size_t i = (size_t)h & (c->cap - 1);
    for (size_t probe = 0; probe < c->cap; probe++) {
        if (!c->used[i] || (c->bits[i] == bits && c->value[i] == value))
            return i;
        i = (i + 1) & (c->cap - 1);
    }
    BASE_ASSERT(!"lin cache full"); /* never: it grows at half load */
    return 0;
}

static bool cache_alloc(struct lin_cache *c, size_t cap)
{
    c->bits = calloc(cap, sizeof(*c->bits));
    c->value = calloc(cap, sizeof(*c->value));
    c->used = calloc(cap, sizeof(*c->used));
    c->cap = cap;
    c->n = 0;
    return c->bits && c->value && c->used;
}

static void cache_free(struct lin_cache *c)
{
    free(c->bits);
    free(c->value);
    free(c->used);
    memset(c, 0, sizeof(*c));
}

/* Doubles the table, rehashing every entry. */
static bool cache_grow(struct lin_cache *c)
{
    struct lin_cache old = *c;
    if (!cache_alloc(c, old.cap * 2)) {
        cache_free(c);
        *c = old;
        return false;
    }
    for (size_t i = 0; i < old.cap; i++) {
        if (!old.used[i])
            continue;
        size_t s = cache_slot(c, old.bits[i], old.value[i]);
        c->used[s] = true;
        c->bits[s] = old.bits[i];
        c->value[s] = old.value[i];
        c->n++;
    }
    cache_free(&old);
    return true;
}

/* Adds (bits, value); 1 if it was new, 0 if already there, -1 if the memo
 * is at its limit. */
static int cache_add(struct lin_cache *c, uint64_t bits, int64_t value)
{
    if (2 * (c->n + 1) > c->cap && (c->cap >= 2 * (size_t)LIN_CACHE_MAX || !cache_grow(c)))
        return -1;
    size_t s = cache_slot(c, bits, value);
    if (c->used[s])
        return 0;
    c->used[s] = true;
    c->bits[s] = bits;
    c->value[s] = value;
    c->n++;
    return 1;
}

/* Builds the time-ordered event list; unknown ops return after everything. */
static bool search_init(struct lin_search *s, const struct lin_op *ops, size_t n)
{
    memset(s, 0, sizeof(*s));
    s->ops = ops;
    s->n_events = 2 * n;
    s->ev = calloc(2 * n + 1, sizeof(*s->ev));
    s->next = calloc(2 * n + 1, sizeof(int));
    s->prev = calloc(2 * n + 1, sizeof(int));
    s->match = calloc(2 * n + 1, sizeof(int));
    if (!s->ev || !s->next || !s->prev || !s->match || !cache_alloc(&s->cache, 1024))
        return false;
    for (size_t i = 0; i < n; i++) {
        BASE_ASSERT(ops[i].unknown || ops[i].call < ops[i].ret);
        s->ev[2 * i] = (struct lin_event){ops[i].call, false, (uint32_t)i};
        int64_t ret = ops[i].unknown ? INT64_MAX : ops[i].ret;
        s->ev[2 * i + 1] = (struct lin_event){ret, true, (uint32_t)i};
    }
    qsort(s->ev, 2 * n, sizeof(*s->ev), event_cmp);
    int head = (int)(2 * n);
    int call_at[LIN_OPS_MAX];
    for (int i = 0; i <= head; i++) {
        s->next[i] = i + 1 < head ? i + 1 : -1;
        s->prev[i] = i == 0 ? head : i - 1;
    }
    s->next[head] = head > 0 ? 0 : -1;
    for (int i = 0; i < head; i++) {
        if (!s->ev[i].is_return)
            call_at[s->ev[i].op] = i;
        else
            s->match[call_at[s->ev[i].op]] = i;
    }
    return true;
}

static void search_free(struct lin_search *s)
{
    free(s->ev);
    free(s->next);
    free(s->prev);
    free(s->match);
    cache_free(&s->cache);
}

static void unlink_node(struct lin_search *s, int e)
{
    s->next[s->prev[e]] = s->next[e];
    if (s->next[e] >= 0)
        s->prev[s->next[e]] = s->prev[e];
}

static void relink_node(struct lin_search *s, int e)
{
    s->next[s->prev[e]] = e;
    if (s->next[e] >= 0)
        s->prev[s->next[e]] = e;
}

/* Takes a call and its return out of the list (the op is linearized). */
static void lift(struct lin_search *s, int e)
{
    unlink_node(s, e);
    unlink_node(s, s->match[e]);
}

/* Puts them back, in the reverse order of lift. */
static void unlift(struct lin_search *s, int e)
{
    relink_node(s, s->match[e]);
    relink_node(s, e);
}

/* The search proper; every pass either lifts an op (bounded by the memo:
 * each lift adds a new pair) or moves along or back, so it ends. */
static enum lin_result search_run(struct lin_search *s, int64_t init)
{
    int head = (int)s->n_events;
    int stack_ev[LIN_OPS_MAX];
    int64_t stack_val[LIN_OPS_MAX];
    size_t depth = 0;
    uint64_t bits = 0;
    int64_t value = init;
    int e = s->next[head];
    while (s->next[head] >= 0) {
        BASE_ASSERT(e >= 0);
        const struct lin_event *ev = &s->ev[e];
        if (!ev->is_return) {
            int64_t after;
            if (model_step(&s->ops[ev->op], value, &after)) {
                uint64_t nbits = bits | (1ull << ev->op);
                int added = cache_add(&s->cache, nbits, after);
                if (added < 0)
                    return LIN_GAVE_UP;
                if (added > 0) {
                    stack_ev[depth] = e;
                    stack_val[depth++] = value;
                    bits = nbits;
                    value = after;
                    lift(s, e);
                    e = s->next[head];
                    continue;
                }
            }
            e = s->next[e];
        } else {
            if (depth == 0)
                return LIN_VIOLATION;
            e = stack_ev[--depth];
            value = stack_val[depth];
            bits &= ~(1ull << s->ev[e].op);
            unlift(s, e);
            e = s->next[e];
        }
    }
    return LIN_OK;
}

enum lin_result lin_check(const struct lin_op *ops, size_t n, int64_t init)
{
    BASE_ASSERT(n <= LIN_OPS_MAX);
    if (n == 0)
        return LIN_OK;
    struct lin_search s;
    enum lin_result r = LIN_GAVE_UP;
    if (search_init(&s, ops, n))
        r = search_run(&s, init);
    search_free(&s);
    return r;
}

const char *lin_result_name(enum lin_result r)
{
    switch (r) {
    case LIN_OK:
        return "linearizable";
    case LIN_VIOLATION:
        return "NOT linearizable";
    case LIN_GAVE_UP:
        return "checker gave up (memo limit)";
    }
    return "?";
}
