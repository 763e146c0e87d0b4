/*
 * net — the simulated network: a pool of in-flight messages, each a deep
 * copy (what rd lends is only valid until raft_advance), delivered at a
 * step chosen at send time. Faults while the schedule runs: loss,
 * duplication, reordering (a random delay), long delays, and partitions
 * (split, one-way link, bridge, isolated node) checked at delivery, so a
 * partition also catches messages already on the wire.
 *
 * Threading: part of one struct sim.
 */
#ifndef LARCH_SIM_NET_H
#define LARCH_SIM_NET_H

#include "tests/sim/sim.h"

void net_init(struct net *net);
void net_free(struct net *net);

/* Copies m into the pool (or loses it, or sends it twice). */
void net_send(struct sim *s, const struct raft_msg *m);

/* Delivers every message due by s->now, in (due step, send order). */
void net_deliver(struct sim *s);

/* Cuts links: a random split, one-way link, bridge or isolation. */
void net_partition(struct sim *s);

/* Every link works again. */
void net_heal(struct sim *s);

#endif
