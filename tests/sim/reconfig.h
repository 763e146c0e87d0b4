/*
 * reconfig — membership changes during a run (--reconfig). Now and then
 * the step asks a node that believes it leads to raft_propose_config a
 * random valid membership over every node of the run, members and spares
 * alike: add a node (voter or observer), remove one (the leader too),
 * promote, demote, replace two voters at once (the change only joint
 * consensus makes safe), or reshuffle everything. At least one voter
 * always stays. A refusal (RAFT_ENOTLEADER, RAFT_EBUSY while a change is
 * under way or before the leader committed in its term, RAFT_ELIMIT) has
 * no effect: a later attempt draws again.
 *
 * Also the small helpers on struct raft_config that the checks share:
 * memberships compare as sets (the order of a list does not matter).
 *
 * Threading: part of one struct sim.
 */
#ifndef LARCH_SIM_RECONFIG_H
#define LARCH_SIM_RECONFIG_H

#include "tests/sim/sim.h"

/* While faults run and opts.reconfig is on: maybe propose a change. */
void reconfig_step(struct sim *s);

/* Whether a and b are the same membership: the same members with the
 * same voter flags in each half (in any order). */
bool reconfig_equal(const struct raft_config *a, const struct raft_config *b);

/* Whether id votes in either half of c. */
bool reconfig_votes(const struct raft_config *c, uint32_t id);

/* Whether id votes in the list m of n members. */
bool reconfig_list_votes(const struct raft_member *m, uint32_t n, uint32_t id);

/* Whether id is in either half of c. */
bool reconfig_has(const struct raft_config *c, uint32_t id);

/* The ids of m (n of them) as a bitmask (bit id), voters or observers. */
uint32_t reconfig_mask(const struct raft_member *m, uint32_t n, bool voters);

/* c as two trace words: b = new voters | new observers << 16, c = old
 * voters | old observers << 16 | (joint ? 1 << 32 : 0). */
void reconfig_trace_words(const struct raft_config *c, int64_t *b, int64_t *cw);

#endif
