/*
 * client — a few clients that issue ops to random servers and the history
 * they leave for the linearizability check:
 *   - write(k, v) and cas(k, expect, new) go to raft_propose on the chosen
 *     server; a refusal (not the leader, counter limit) fails with no
 *     effect and stays out of the history; an accepted op completes when
 *     that server applies the returned zxid (a cas learns its result
 *     there); if the server crashes, truncates or skips past that zxid, or
 *     the op waits too long, its outcome is unknown (open-ended);
 *   - a read is raft_read_index(ctx) on any server, then the local register
 *     once that server has applied through the index; a refused, rejected
 *     or timed-out read fails with no effect.
 * Calls and returns take their times from one logical clock, so the
 * history's order is exact.
 *
 * Threading: part of one struct sim.
 */
#ifndef LARCH_SIM_CLIENT_H
#define LARCH_SIM_CLIENT_H

#include "tests/sim/sim.h"

void clients_init(struct sim *s);

/* Issues new ops (while clients.issuing), times out old ones and serves
 * reads whose index their server has applied. */
void clients_step(struct sim *s);

/* Hooks from the node's ready processing. */
void clients_on_apply(struct sim *s, const struct sim_node *n, int64_t zxid,
                      const struct kv_result *res);
void clients_on_read_index(struct sim *s, const struct sim_node *n, const struct raft_read *rd);
void clients_on_crash(struct sim *s, const struct sim_node *n);
void clients_on_truncate(struct sim *s, const struct sim_node *n, int64_t after);
void clients_on_snapshot(struct sim *s, const struct sim_node *n, int64_t zxid);

/* The end phase: client 0 keeps trying one more write until one
 * completes. True once it has, with its zxid in *zxid. */
bool clients_final_write(struct sim *s, int64_t *zxid);

/* True once no client has an op in flight. */
bool clients_quiet(const struct sim *s);

/* Checks the history, key by key. False: sim_fail was called, and
 * clients.bad_key names the key. */
bool clients_check_history(struct sim *s);

/* Prints key's history (for the failure report). */
void clients_dump_key(const struct sim *s, uint8_t key, FILE *out);

#endif
