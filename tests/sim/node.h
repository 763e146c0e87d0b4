/*
 * node — one simulated server's life: boot from its disk (fresh or after a
 * crash), ticks and messages into its core, and the processing of each
 * raft_ready in raft.h's order, with the faults that can strike part-way:
 * a crash before any stage, ENOSPC on append, EIO on fdatasync (then the
 * node must not raft_advance: it crashes and later restarts from disk).
 * With --async-log the log writes go to a log thread instead (cfg.async_log):
 * the ready advances at once, and the thread's batches become durable
 * later, where ENOSPC and EIO then strike.
 *
 * Threading: part of one struct sim.
 */
#ifndef LARCH_SIM_NODE_H
#define LARCH_SIM_NODE_H

#include "tests/sim/sim.h"

/* Starts n's core from n's disk: the state machine is the snapshot plus
 * the durable log re-applied through the stored commit zxid. False: a
 * check failed or raft_new refused the state. */
bool node_boot(struct sim *s, struct sim_node *n);

/* Stops n now: its pending disk write is lost or torn, its core freed.
 * why: enum trace_crash; stage: the ready stage it died before (0: none). */
void node_crash(struct sim *s, struct sim_node *n, int why, unsigned stage);

void node_tick(struct sim *s, struct sim_node *n);
void node_receive(struct sim *s, struct sim_node *n, const struct raft_msg *m);

/* Runs one raft_ready of n through the contract, unless its disk stalls
 * (with --async-log: unless its log thread is full and the disk stalls). */
void node_process_ready(struct sim *s, struct sim_node *n);

/* --async-log, now and then unless the disk stalls: n's log thread makes
 * its oldest queued batch durable, or several (group commit); their late
 * messages leave and the core hears of it (raft_log_synced). A crash
 * loses what is still queued (a torn tail of it may survive). */
void node_log_step(struct sim *s, struct sim_node *n);

/* Now and then: snapshot the state machine and let the core compact. */
void node_maybe_compact(struct sim *s, struct sim_node *n);

/* --corrupt: flips a bit of one register of n's state machine (n is up
 * and does not lead), as a bug or bad RAM would; the checker keeps what
 * it should be (sim_node.truth) until n resyncs. */
void node_corrupt(struct sim *s, struct sim_node *n);

/* Frees n's core (end of run). */
void node_free(struct sim_node *n);

#endif
