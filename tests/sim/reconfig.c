/* reconfig — see reconfig.h. */
#include "tests/sim/reconfig.h"

#include <string.h>

#include "base/base.h"
#include "tests/sim/check.h"

#define RECONFIG_DRAWS_MAX 8 /* attempts at a membership that differs */

enum plan_role { ROLE_NONE = 0, ROLE_OBSERVER = 1, ROLE_VOTER = 2 };

/* A membership being drawn: every node's role, by id. */
struct plan {
    uint8_t role[SIM_NODES_MAX + 1];
};

enum change_kind {
    CHANGE_ADD,
    CHANGE_REMOVE,
    CHANGE_PROMOTE,
    CHANGE_DEMOTE,
    CHANGE_REPLACE, /* two voters out, two others in: needs the joint phase */
    CHANGE_SHUFFLE,
};

static const struct raft_member *find_member(const struct raft_member *m, uint32_t n, uint32_t id)
{
    for (uint32_t i = 0; i < n; i++)
        if (m[i].id == id)
            return &m[i];
    return NULL;
}

static bool same_list(const struct raft_member *a, uint32_t na, const struct raft_member *b,
                      uint32_t nb)
{
    if (na != nb)
        return false;
    for (uint32_t i = 0; i < na; i++) {
        const struct raft_member *m = find_member(b, nb, a[i].id);
        if (m == NULL || m->voter != a[i].voter)
            return false;
    }
    return true;
}

bool reconfig_equal(const struct raft_config *a, const struct raft_config *b)
{
    return same_list(a->members, a->n_members, b->members, b->n_members) &&
           same_list(a->old, a->n_old, b->old, b->n_old);
}

bool reconfig_list_votes(const struct raft_member *m, uint32_t n, uint32_t id)
{
    const struct raft_member *x = find_member(m, n, id);
    return x != NULL && x->voter;
}

bool reconfig_votes(const struct raft_config *c, uint32_t id)
{
    return reconfig_list_votes(c->members, c->n_members, id) ||
           reconfig_list_votes(c->old, c->n_old, id);
}

bool reconfig_has(const struct raft_config *c, uint32_t id)
{
    return find_member(c->members, c->n_members, id) || find_member(c->old, c->n_old, id);
}

uint32_t reconfig_mask(const struct raft_member *m, uint32_t n, bool voters)
{
    uint32_t mask = 0;
    for (uint32_t i = 0; i < n; i++)
        if (m[i].voter == voters && m[i].id < 32)
            mask |= 1u << m[i].id;
    return mask;
}

void reconfig_trace_words(const struct raft_config *c, int64_t *b, int64_t *cw)
{
    *b = (int64_t)reconfig_mask(c->members, c->n_members, true) |
         (int64_t)reconfig_mask(c->members, c->n_members, false) << 16;
    *cw = (int64_t)reconfig_mask(c->old, c->n_old, true) |
          (int64_t)reconfig_mask(c->old, c->n_old, false) << 16 |
          (c->n_old ? (int64_t)1 << 32 : 0);
}

/* ---- drawing a membership ---------------------------------------------- */

static uint32_t count_role(const struct sim *s, const struct plan *p, uint8_t role)
{
    uint32_t n = 0;
    for (uint32_t id = 1; id <= s->n_nodes; id++)
        n += p->role[id] == role;
    return n;
}

/* A random node whose role is in the set roles (bits 1 << role); 0: none. */
static uint32_t pick_role(struct sim *s, const struct plan *p, unsigned roles)
{
    uint32_t ids[SIM_NODES_MAX], n = 0;
    for (uint32_t id = 1; id <= s->n_nodes; id++)
        if (roles & (1u << p->role[id]))
            ids[n++] = id;
    return n ? ids[rng_below(&s->rng, n)] : 0;
}

#define ANY_MEMBER ((1u << ROLE_OBSERVER) | (1u << ROLE_VOTER))
#define NOT_VOTER ((1u << ROLE_NONE) | (1u << ROLE_OBSERVER))

static bool change_add(struct sim *s, struct plan *p)
{
    uint32_t id = pick_role(s, p, 1u << ROLE_NONE);
    if (id == 0)
        return false;
    p->role[id] = rng_below(&s->rng, 3) ? ROLE_VOTER : ROLE_OBSERVER;
    return true;
}

/* Any member, the leader included; never the last voter. */
static bool change_remove(struct sim *s, struct plan *p)
{
    uint32_t id = pick_role(s, p, ANY_MEMBER);
    if (id == 0 || (p->role[id] == ROLE_VOTER && count_role(s, p, ROLE_VOTER) < 2))
        return false;
    p->role[id] = ROLE_NONE;
    return true;
}

/* to: ROLE_VOTER (promote an observer) or ROLE_OBSERVER (demote a voter,
 * never the last). */
static bool change_flip(struct sim *s, struct plan *p, uint8_t to)
{
    uint8_t from = to == ROLE_VOTER ? ROLE_OBSERVER : ROLE_VOTER;
    if (from == ROLE_VOTER && count_role(s, p, ROLE_VOTER) < 2)
        return false;
    uint32_t id = pick_role(s, p, 1u << from);
    if (id == 0)
        return false;
    p->role[id] = to;
    return true;
}

/* Up to two voters leave (or stay as observers) and as many non-voters
 * become voters, in one change: with old and new majorities that need not
 * overlap, only the joint phase keeps two leaders out of one term. */
static bool change_replace(struct sim *s, struct plan *p)
{
    uint32_t voters = count_role(s, p, ROLE_VOTER);
    uint32_t others = s->n_nodes - voters;
    uint32_t k = voters < others ? voters : others;
    if (k > 2)
        k = 2;
    if (k == 0)
        return false;
    struct plan was = *p; /* the newcomers come from the old non-voters */
    for (uint32_t i = 0; i < k; i++) {
        uint32_t out = pick_role(s, p, 1u << ROLE_VOTER);
        p->role[out] = rng_below(&s->rng, 4) ? ROLE_NONE : ROLE_OBSERVER;
    }
    for (uint32_t i = 0; i < k; i++) {
        uint32_t in = pick_role(s, &was, NOT_VOTER);
        was.role[in] = ROLE_VOTER; /* not picked twice */
        p->role[in] = ROLE_VOTER;
    }
    return true;
}

/* Every node a random role; at least one voter. */
static bool change_shuffle(struct sim *s, struct plan *p)
{
    static const uint8_t roles[6] = {ROLE_NONE, ROLE_NONE, ROLE_OBSERVER,
                                     ROLE_VOTER, ROLE_VOTER, ROLE_VOTER};
    for (uint32_t id = 1; id <= s->n_nodes; id++)
        p->role[id] = roles[rng_below(&s->rng, 6)];
    if (count_role(s, p, ROLE_VOTER) == 0)
        p->role[rng_range(&s->rng, 1, s->n_nodes)] = ROLE_VOTER;
    return true;
}

/* Mostly any kind; when the voters have drifted far from --servers, lean
 * back toward it so that runs keep a useful number of voters. */
static enum change_kind pick_kind(struct sim *s, const struct plan *p)
{
    static const uint8_t table[] = {CHANGE_ADD,     CHANGE_ADD,     CHANGE_ADD,    CHANGE_REMOVE,
                                    CHANGE_REMOVE,  CHANGE_REMOVE,  CHANGE_PROMOTE, CHANGE_DEMOTE,
                                    CHANGE_REPLACE, CHANGE_REPLACE, CHANGE_REPLACE, CHANGE_SHUFFLE};
    uint32_t voters = count_role(s, p, ROLE_VOTER);
    if (voters < s->opts.servers && rng_below(&s->rng, 2))
        return rng_below(&s->rng, 2) ? CHANGE_ADD : CHANGE_PROMOTE;
    if (voters > s->opts.servers + 1 && rng_below(&s->rng, 2))
        return rng_below(&s->rng, 2) ? CHANGE_REMOVE : CHANGE_DEMOTE;
    return (enum change_kind)table[rng_below(&s->rng, sizeof(table))];
}

static bool apply_kind(struct sim *s, struct plan *p, enum change_kind kind)
{
    switch (kind) {
    case CHANGE_ADD:
        return change_add(s, p);
    case CHANGE_REMOVE:
        return change_remove(s, p);
    case CHANGE_PROMOTE:
        return change_flip(s, p, ROLE_VOTER);
    case CHANGE_DEMOTE:
        return change_flip(s, p, ROLE_OBSERVER);
    case CHANGE_REPLACE:
        return change_replace(s, p);
    case CHANGE_SHUFFLE:
        return change_shuffle(s, p);
    }
    return false;
}

static void plan_from(const struct sim *s, struct plan *p, const struct raft_member *m,
                      uint32_t n)
{
    memset(p, 0, sizeof(*p));
    for (uint32_t i = 0; i < n; i++)
        if (m[i].id >= 1 && m[i].id <= s->n_nodes)
            p->role[m[i].id] = m[i].voter ? ROLE_VOTER : ROLE_OBSERVER;
}

/* The plan as a member list (ascending ids); returns how many. */
static uint32_t plan_members(const struct sim *s, const struct plan *p, struct raft_member *out)
{
    uint32_t n = 0;
    for (uint32_t id = 1; id <= s->n_nodes; id++)
        if (p->role[id] != ROLE_NONE)
            out[n++] = (struct raft_member){.id = id, .voter = p->role[id] == ROLE_VOTER};
    return n;
}

/* A membership with a voter that differs from cur (the new half of the
 * leader's membership) into out; returns how many members, 0: none found. */
static uint32_t draw_membership(struct sim *s, const struct raft_config *cur,
                                struct raft_member *out)
{
    for (int tries = 0; tries < RECONFIG_DRAWS_MAX; tries++) {
        struct plan p;
        plan_from(s, &p, cur->members, cur->n_members);
        if (!apply_kind(s, &p, pick_kind(s, &p)) || count_role(s, &p, ROLE_VOTER) == 0)
            continue;
        uint32_t n = plan_members(s, &p, out);
        if (!same_list(out, n, cur->members, cur->n_members))
            return n;
    }
    return 0;
}


static void trace_proposal(struct sim *s, const struct sim_node *n, int rc, int64_t zxid,
                           const struct raft_member *m, uint32_t k)
{
    struct trace_event ev = {.step = s->now, .kind = TR_RECONFIG, .node = (uint8_t)n->id,
                             .a = rc == RAFT_OK ? zxid : rc,
                             .b = (int64_t)reconfig_mask(m, k, true) |
                                  (int64_t)reconfig_mask(m, k, false) << 16};
    trace_add(&s->trace, &ev);
}

void reconfig_step(struct sim *s)
{
    /* opts.reconfig first: without it no draw is made, so the runs of
     * seeds without --reconfig are exactly what they were before it. */
    if (!s->opts.reconfig || !s->faults_on || s->failed ||
        !rng_chance(&s->rng, s->prof.reconfig))
        return;
    struct sim_node *n = sim_any_leader(s);
    if (n == NULL)
        return;
    struct raft_status st;
    raft_status(n->r, &st);
    struct raft_member m[SIM_NODES_MAX];
    uint32_t k = draw_membership(s, &st.config, m);
    if (k == 0)
        return;
    int64_t zxid = 0;
    int rc = raft_propose_config(n->r, m, k, NULL, 0, &zxid);
    check_leader(s, n);
    trace_proposal(s, n, rc, zxid, m, k);
    BASE_ASSERT(rc != RAFT_ENOMEM);
    if (rc == RAFT_OK)
        s->reconfigs++;
    if (rc == RAFT_EINVAL)
        sim_fail(s, n->id, "n%u refuses a valid membership change with RAFT_EINVAL", n->id);
}
