/*
 * check — the invariants checked as the run goes, each against a small
 * incremental structure so that checking every step stays cheap:
 *   - election safety: at most one leader per term, ever;
 *   - log matching: every (zxid, log chain hash) any node appends agrees
 *     with the first node that held that zxid;
 *   - the committed sequence: every entry a node applies (from
 *     rd.committed, or re-applied from disk at restart) is the successor of
 *     the node's previous applied zxid in one global sequence, or extends
 *     it; no node ever truncates an entry of that sequence;
 *   - state machine safety: the digest after applying a zxid is the same
 *     on every node (and for a snapshot installed at that zxid); for a
 *     node --corrupt made wrong, node.c hands in the digest of what it
 *     should hold until it resyncs;
 *   - durable before send: a message never claims state (term, vote,
 *     matched log) that the sender's disk does not hold;
 *   - hard state: the term never falls, a vote never changes in its term;
 *   - the core agrees with its disk after every raft_advance (with the
 *     async log: through what it counts as durable, while batches wait);
 *   - at the end, every node of the membership agrees (check_converged);
 *   - membership: only a voter of its own membership campaigns or leads,
 *     once that membership is known committed (before, a server it leaves
 *     out may still be needed);
 *     every CONFIG entry decodes; the membership a core uses is its log's
 *     newest CONFIG entry (else its snapshot's, else its cfg's); a snapshot
 *     keeps, and a SNAP carries, the committed membership at its zxid.
 * A failed check calls sim_fail; the run stops at the end of the step.
 *
 * Threading: part of one struct sim.
 */
#ifndef LARCH_SIM_CHECK_H
#define LARCH_SIM_CHECK_H

#include "tests/sim/sim.h"

/* initial: the membership every member boots with (n of them). */
void check_init(struct check *c, const struct raft_member *initial, uint32_t n);
void check_free(struct check *c);

/* After any call into n's core: one leader per term; traces role changes. */
void check_leader(struct sim *s, struct sim_node *n);

/* n appended de (its chain already computed) to its log. */
void check_log_entry(struct sim *s, const struct sim_node *n, const struct disk_entry *de);

/* n, whose state machine is at n->kv, is about to apply e: its zxid must
 * be above the applied one. False: the check failed. */
bool check_apply_order(struct sim *s, const struct sim_node *n, const struct raft_entry *e);

/* n (check_apply_order passed) is about to apply e and reach digest_after:
 * it must be the committed successor, and in n's durable log with the
 * committed chain (--async-log: or in a batch queued for n's log thread,
 * the same entry). False: a check failed (the caller applies nothing). */
bool check_apply(struct sim *s, const struct sim_node *n, const struct raft_entry *e,
                 uint64_t digest_after);

/* n installs a snapshot at zxid with digest and membership conf; *chain
 * gets the committed log chain at zxid. keeps_log: a resync
 * (raft_request_snapshot), which may be below n's applied zxid (the
 * entries after it are applied again). False: a check failed. */
bool check_snapshot(struct sim *s, const struct sim_node *n, int64_t zxid, uint64_t digest,
                    const struct raft_config *conf, bool keeps_log, uint64_t *chain);

/* conf, which n says is the membership at zxid (committed), must be the
 * committed sequence's there; what names it in the message. False: the
 * check failed. */
bool check_config_at(struct sim *s, const struct sim_node *n, int64_t zxid,
                     const struct raft_config *conf, const char *what);

/* After raft_advance and at boot: the membership n's core uses is the
 * newest CONFIG entry in its log, else its snapshot's, else its cfg's. */
void check_membership(struct sim *s, const struct sim_node *n);

/* The newest membership of the committed sequence, and its zxid (0: the
 * initial one). */
const struct raft_config *check_committed_config(const struct check *c, int64_t *zxid);

/* n's ready truncates after `after`: not below what n has applied. False:
 * the check failed. */
bool check_truncate_applied(struct sim *s, const struct sim_node *n, int64_t after);

/* n's disk drops its log entries after `after`: none committed before
 * decided_by, the step from which the core had decided it (a stalled disk
 * may hold the ready back, and the async log its batch). */
void check_truncate(struct sim *s, const struct sim_node *n, int64_t after, int64_t decided_by);

/* n is about to persist hs. */
void check_hard_state(struct sim *s, const struct sim_node *n, const struct raft_hard_state *hs);

/* n is about to send m: everything m claims must be on n's disk. */
void check_send(struct sim *s, const struct sim_node *n, const struct raft_msg *m);

/* After raft_advance: the core's log and applied zxid match n's disk and
 * state machine; with log batches queued (--async-log), the log only
 * through the core's durable_zxid (the batches hold the rest). */
void check_core_matches_disk(struct sim *s, const struct sim_node *n);

/* Any time outside a ready (--async-log: after raft_log_synced): the
 * core's log through its durable_zxid is on n's disk. (The core may have
 * stepped messages since its last ready; what it holds past durable_zxid
 * the next ready hands out.) */
void check_core_durable(struct sim *s, const struct sim_node *n);

/* The committed entry at zxid, or NULL. */
const struct check_commit *check_committed_at(const struct check *c, int64_t zxid);

/* The end state: the newest committed membership is not joint, and every
 * node in it applied the same last committed entry with the same digest
 * (nodes it leaves out may lag: no leader sends to them). *odd: 0, or a
 * node whose digest alone keeps the state from converging (it applied
 * and committed the last entry like the rest). */
bool check_converged(struct sim *s, int64_t min_zxid, uint32_t *odd);

#endif
