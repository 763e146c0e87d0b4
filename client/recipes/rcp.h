/*
 * rcp — the helpers every coordination recipe in client/recipes shares:
 * deadlines, the retry rule, the GUID rule, retried reads and writes,
 * one-shot watches that wake a waiting thread (struct rcp_wake), a
 * recipe's own watch-driven thread (struct rcp_runner: config, group,
 * master_worker), a recipe object's node in a directory (struct
 * rcp_member), the queue of sequential nodes behind lock, rwlock,
 * revocable and election (struct rcp_seq), and the item queue behind queue
 * and priority_queue (struct rcp_itemq). Internal to the recipes:
 * applications include the recipe headers, never this one.
 *
 * Threading: the helpers keep no state of their own but the GUID counter
 * (atomic). A wake, member, seq or itemq is driven by one thread at a time,
 * its owner's (for a runner's wake, the runner's thread; rcp_wake_stop and
 * rcp_wake_stopping may come from any thread). The wake's watcher runs on
 * the handle's event thread and only flips flags and signals a condition
 * variable (plus the optional hook, see rcp_wake_set_hook), so blocking
 * waits happen on the owner's thread. Free these objects before closing
 * their handle: freeing removes their pending watches through the handle.
 *
 * The GUID rule (seed 000 "Recoverable Errors and the GUID", seed 004 "Has
 * my sequential znode been created?"): a node a recipe creates and may have
 * to recognise after a lost reply carries a guid, the session id and a
 * process-wide counter in hex (rcp_guid). After ZK_ECONNECTIONLOSS the
 * recipe looks for its guid (or for an ephemeral receipt named by it)
 * before it creates again, so a lost reply never leaves a second node.
 *
 * The retry rule (seed 004 "CONNECTIONLOSS"): ZK_ECONNECTIONLOSS and
 * ZK_ESESSIONMOVED leave a request's outcome unknown and the handle
 * re-attaches by itself. Reads and idempotent writes are simply retried
 * once it has (rcp_retry); other writes first find out whether they
 * applied. Retries stop at the caller's deadline (ZK_EOPERATIONTIMEOUT) or
 * at the session's end (ZK_ESESSIONEXPIRED and the handle's other terminal
 * codes), which is returned as is.
 */
#ifndef LARCH_RECIPES_RCP_H
#define LARCH_RECIPES_RCP_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "client/larch.h"

/* ---- time ----------------------------------------------------------------- */
/* Clocks are base's (base_mono_ms, base/base.h, through client/larch.h). */
void rcp_sleep_ms(int64_t ms);
/* The deadline timeout_ms from now; ZK_EBADARGUMENTS for a negative timeout. */
int rcp_deadline(int32_t timeout_ms, int64_t *deadline_ms);
/* The deadline timeout_ms from now, a negative timeout counting as 0. */
int64_t rcp_deadline_after(int32_t timeout_ms);
/* Milliseconds until the deadline, 0 once it passed (clamped to int32). */
int32_t rcp_ms_left(int64_t deadline_ms);
/* The deadline for calls that take no timeout: twice the negotiated session
 * timeout from now (past that the session is gone anyway). */
int64_t rcp_default_deadline(struct larch *lh);
/* A condition variable on the monotonic clock, for rcp_cond_wait_until. */
bool rcp_cond_init(pthread_cond_t *cv);
/* pthread_cond_timedwait until deadline_ms: 0 or ETIMEDOUT. */
int rcp_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline_ms);

/* ---- the retry rule ------------------------------------------------------- */
/* Whether a request that failed with rc may or may not have applied. */
bool rcp_outcome_unknown(int rc);
/* Waits until the handle is connected again: ZK_OK to retry, else the code
 * to give up with (ZK_EOPERATIONTIMEOUT past the deadline, or the handle's
 * terminal code). */
int rcp_reconnect(struct larch *lh, int64_t deadline_ms);
/* Whether to retry a call that failed with *rc: true after the handle has
 * re-attached (outcome-unknown codes only); otherwise false with *rc set to
 * the code to report (unchanged, or rcp_reconnect's verdict). */
bool rcp_retry(struct larch *lh, int *rc, int64_t deadline_ms);

/* ---- the GUID rule -------------------------------------------------------- */
/* Length of a guid string, with its NUL (24 hex digits). */
#define RCP_GUID_LEN 25
/* A fresh guid; waits (up to the deadline) for the session to exist. */
int rcp_guid(struct larch *lh, int64_t deadline_ms, char out[RCP_GUID_LEN]);

/* ---- nodes, retried under the retry rule ---------------------------------- */
/* Creates path as a persistent node unless it exists; its parent must. */
int rcp_ensure_node(struct larch *lh, const char *path, int64_t deadline_ms);
/* Creates path and its missing parents as persistent nodes. */
int rcp_ensure_path(struct larch *lh, const char *path, int64_t deadline_ms);
/* getData without a watch; data, len and stat as in larch_get (may be NULL). */
int rcp_get(struct larch *lh, const char *path, char **data, int32_t *len,
            struct zk_stat *stat, int64_t deadline_ms);
/* exists without a watch (stat may be NULL). */
int rcp_exists(struct larch *lh, const char *path, struct zk_stat *stat, int64_t deadline_ms);
/* The children of dir, sorted by sequence suffix (names without one last,
 * by name). Free with larch_strings_free. */
int rcp_children(struct larch *lh, const char *dir, int64_t deadline_ms,
                 struct larch_strings *out);
/* Deletes path (any version); a node already gone counts as deleted. */
int rcp_delete(struct larch *lh, const char *path, int64_t deadline_ms);
/* Creates dir/<prefix><guid> with mode (no sequence flag) under the GUID
 * rule: after a lost reply ZK_ENODEEXISTS means the first try made it (the
 * name is ours alone). *name gets the child name (malloc'd). */
int rcp_create_guid_node(struct larch *lh, const char *dir, const char *prefix, int32_t mode,
                         int64_t deadline_ms, char **name);
/* Creates path EPHEMERAL with data. ZK_ENODEEXISTS counts as done when our
 * session owns the node (our lost first try made it); a node of another
 * session is ZK_ENODEEXISTS, and one that vanished meanwhile is created
 * again. */
int rcp_create_ephemeral(struct larch *lh, const char *path, const void *data, int32_t len,
                         int64_t deadline_ms);
/* After a lost reply: syncs sync_path (so this server has applied what the
 * one that took the request did) and looks for the ephemeral proof node
 * the request created. ZK_OK: it exists and is ours (the request applied);
 * ZK_ENONODE: it did not apply. */
int rcp_proof_exists(struct larch *lh, const char *sync_path, const char *proof,
                     int64_t deadline_ms);
/* Seed 004 multiop: creates the sequential node item_base (with data) and
 * the ephemeral receipt in one multi, so the receipt tells whether a put
 * whose reply was lost applied (rcp_proof_exists, syncing the item's
 * directory); a put that did not is sent again. ZK_OK
 * with *name (malloc'd, may be NULL) the item's child name when the reply
 * came, NULL when it applied with the reply lost. The caller deletes the
 * receipt. */
int rcp_create_receipted(struct larch *lh, const char *item_base, const char *receipt,
                         const void *data, int32_t len, int64_t deadline_ms, char **name);

/* ---- names and lists ------------------------------------------------------ */
bool rcp_has_prefix(const char *name, const char *prefix);
/* One path component: not empty, no '/', not "." or "..". */
bool rcp_is_component(const char *name);
/* parent/name (malloc'd), or NULL when name is not one component, the
 * result is not a valid path, or memory ran out. */
char *rcp_child_path(const char *parent, const char *name);
/* Whether two values are the same bytes (a length < 0 is a null value). */
bool rcp_data_equal(const char *a, int32_t alen, const void *b, int32_t blen);
bool rcp_strings_equal(const struct larch_strings *a, const struct larch_strings *b);
void rcp_sort_names(struct larch_strings *s);

/* ---- one-shot watches that wake a waiting thread -------------------------- */
/* A wake owns a recipe object's one-shot watches. Each watch is registered
 * with its own token as the watcher context, so ZooKeeper's (fn, ctx) dedup
 * never merges two of them and every token sees exactly one final event
 * (its node event, a *_WATCH_REMOVED event, or the session's end). A node
 * event bumps the wake's generation and signals its condition variable;
 * the owner waits for the generation to move. Disconnects do not wake: the
 * handle re-arms every watch when it re-attaches, and the server fires one
 * whose node changed meanwhile (seed 004). The wake stays allocated until
 * its owner freed it and every token had its final event, so a late
 * notification never touches freed memory. A watch of the same kind on the
 * same path that is still pending is not set twice: the call goes without
 * a watcher and the pending one fires on the next change. */
struct rcp_wake;
/* Runs on the event thread for each node event on a watch armed with
 * hooked = true, before waiters are woken. It may make synchronous calls;
 * keep it short. Never runs after rcp_wake_free returns. */
typedef void (*rcp_wake_hook_fn)(struct larch *lh, const struct larch_event *ev, void *arg);

int rcp_wake_create(struct rcp_wake **out);
/* Removes pending watches, stops the hook and drops the owner's reference. */
void rcp_wake_free(struct larch *lh, struct rcp_wake *w);
void rcp_wake_set_hook(struct rcp_wake *w, rcp_wake_hook_fn fn, void *arg);
/* Read before arming a watch; pass to rcp_wake_wait. */
uint64_t rcp_wake_generation(struct rcp_wake *w);
/* Waits until the generation differs from seen or rcp_wake_stop was
 * called: ZK_OK; the session's terminal code (ZK_ESESSIONEXPIRED, ...);
 * ZK_EOPERATIONTIMEOUT at the deadline, also when it has passed on entry,
 * so a stream of events cannot carry a caller's loop beyond it. */
int rcp_wake_wait(struct rcp_wake *w, uint64_t seen, int64_t deadline_ms);
/* rcp_wake_wait without a deadline, for a recipe's own thread: waits in
 * slices of slice_ms until an event, the session's end or rcp_wake_stop. */
int rcp_wake_idle(struct rcp_wake *w, uint64_t seen, int32_t slice_ms);
/* Asks the wake's thread to stop: wakes every wait, now and later. */
void rcp_wake_stop(struct rcp_wake *w);
bool rcp_wake_stopping(struct rcp_wake *w);
/* One request each with a one-shot watch through w, not retried: exists
 * (ZK_ENONODE leaves a creation watch), getData (hooked: node events run
 * the hook), getChildren (server's order). Outputs as in liblarch. */
int rcp_watch_exists(struct larch *lh, struct rcp_wake *w, const char *path,
                     struct zk_stat *stat);
int rcp_watch_get(struct larch *lh, struct rcp_wake *w, const char *path, bool hooked,
                  char **data, int32_t *len, struct zk_stat *stat);
int rcp_watch_children(struct larch *lh, struct rcp_wake *w, const char *path,
                       struct larch_strings *out);
/* The same, retried under the retry rule. rcp_wake_exists keeps the
 * creation watch on an absent node only if keep_if_absent (a waiter for a
 * deletion does not want it: seed 004, watches cost server memory). */
int rcp_wake_exists(struct larch *lh, struct rcp_wake *w, const char *path,
                    bool keep_if_absent, int64_t deadline_ms, bool *exists);
int rcp_wake_get(struct larch *lh, struct rcp_wake *w, const char *path, bool hooked,
                 int64_t deadline_ms, char **data, int32_t *len);
int rcp_wake_children(struct larch *lh, struct rcp_wake *w, const char *path,
                      int64_t deadline_ms, struct larch_strings *out);
/* Removes every watch still pending (for a wait that was abandoned) and
 * waits, up to 2 s, for the final events already on their way, so no event
 * of an abandoned wait arrives afterwards. Owner's thread only. */
void rcp_wake_disarm(struct larch *lh, struct rcp_wake *w);
/* Watches the server accepted, and node events delivered (tests check that
 * a release wakes one waiter). */
void rcp_wake_stats(struct rcp_wake *w, uint64_t *watches_set, uint64_t *wakeups);

/* ---- a recipe's own thread ------------------------------------------------ */
/* Internal result of a step (not a ZooKeeper code, which are <= 0): run it
 * again at once. */
#define RCP_AGAIN 1
/* One round of a recipe thread's work (seed 002 "Configuration management"
 * step 3, seed 004 "Master-Worker": read with a watch, act, sleep until the
 * watch fires). Returns ZK_OK once it has armed a watch through the
 * runner's wake (the thread then sleeps until that watch fires), RCP_AGAIN
 * to run again at once, an outcome-unknown code (the thread waits for the
 * handle to re-attach and runs again), or any other code, which ends the
 * thread after fail(arg, code). */
typedef int (*rcp_step_fn)(void *arg);
typedef void (*rcp_fail_fn)(void *arg, int err);
/* Embedded in the recipe object; its fields are the runner's own. */
struct rcp_runner {
    struct larch *lh;
    struct rcp_wake *wake; /* the step's watches; also the stop flag */
    rcp_step_fn step;
    rcp_fail_fn fail;
    void *arg;
    pthread_t thread;
    bool started;
};
/* Runs step in the caller's thread until it returns ZK_OK, retrying
 * RCP_AGAIN and outcome-unknown codes until the deadline (a recipe's first
 * reading, valid when its open returns). */
int rcp_step_until(struct larch *lh, rcp_step_fn step, void *arg, int64_t deadline_ms);
/* Starts the thread; ZK_ESYSTEMERROR when it cannot. */
int rcp_runner_start(struct rcp_runner *r, struct larch *lh, struct rcp_wake *wake,
                     rcp_step_fn step, rcp_fail_fn fail, void *arg);
/* Asks the thread to stop (rcp_wake_stop) and joins it, within about a
 * second plus one step; nothing when it never started. */
void rcp_runner_stop(struct rcp_runner *r);

/* ---- a member of a directory --------------------------------------------- */
/* A recipe object's place under a directory: its handle, the directory,
 * the child node it holds there (NULL when none) and its watches. Embedded
 * in the objects of rcp_seq, barrier and double_barrier. */
struct rcp_member {
    struct larch *lh;
    char *dir;
    char *node; /* malloc'd child name */
    struct rcp_wake *wake;
};
/* ZK_EBADARGUMENTS for no handle, an invalid dir or "/"; ZK_ESYSTEMERROR. */
int rcp_member_init(struct rcp_member *m, struct larch *lh, const char *dir);
/* Deletes the node (best effort: an ephemeral node left behind goes with
 * the session), removes the watches and frees what m holds. */
void rcp_member_fini(struct rcp_member *m);
/* Deletes the node when there is one. ZK_OK, or ZK_ESESSIONEXPIRED (an
 * ephemeral node went with the session), leaves m without one. */
int rcp_member_drop(struct rcp_member *m, int64_t deadline_ms);

/* ---- a queue of sequential nodes (seed 000 "Locks") ----------------------- */
/* One client's place in a queue of "<prefix>-<guid>-NNNNNNNNNN" nodes under
 * dir: the engine of lock, rwlock, revocable and election. A rule names
 * the node a member waits for. */
struct rcp_seq;
/* Given the children sorted by sequence and the index of our node, the
 * index of the node to wait for, or -1 when it is our turn. */
typedef int32_t (*rcp_seq_rule_fn)(const struct larch_strings *sorted, int32_t self);
/* Called by rcp_seq_await each time the node is still blocked, before it
 * waits (the revocable lock asks holders to release here). */
typedef int (*rcp_seq_blocked_fn)(struct rcp_seq *q, const struct larch_strings *sorted,
                                  int32_t self, void *arg);
/* The exclusive rule: wait for the node just below (seed 000 lock step 4). */
int32_t rcp_seq_rule_predecessor(const struct larch_strings *sorted, int32_t self);

/* ZK_EBADARGUMENTS for an invalid dir or "/". */
int rcp_seq_create(struct larch *lh, const char *dir, struct rcp_seq **out);
/* Leaves the queue (best effort: a node left behind is ephemeral and goes
 * with the session) and frees q. */
void rcp_seq_free(struct rcp_seq *q);
/* Creates our node (data may be NULL) under the GUID rule; dir and its
 * parents are created on first use. ZK_EBADARGUMENTS when already queued. */
int rcp_seq_enqueue(struct rcp_seq *q, const char *prefix, const void *data, int32_t len,
                    int64_t deadline_ms);
/* Lists the queue once (no watch): *blocker gets the malloc'd name of the
 * node the rule says to wait for, or NULL when it is our turn. ZK_ENONODE
 * when our node is gone (someone deleted it); q is then no longer queued. */
int rcp_seq_check(struct rcp_seq *q, rcp_seq_rule_fn rule, int64_t deadline_ms,
                  char **blocker);
/* Seed 000 lock steps 2-5: check; if blocked, exists-watch the blocker and
 * wait for it to change; repeat until our turn (ZK_OK) or the deadline.
 * On failure q stays queued; its pending watches are removed. */
int rcp_seq_await(struct rcp_seq *q, rcp_seq_rule_fn rule, rcp_seq_blocked_fn blocked,
                  void *arg, int64_t deadline_ms);
/* Removes pending watches and deletes our node. ZK_OK (or
 * ZK_ESESSIONEXPIRED: the node went with the session) leaves q unqueued. */
int rcp_seq_leave(struct rcp_seq *q, int64_t deadline_ms);
/* Our child name while queued, else NULL. */
const char *rcp_seq_node(const struct rcp_seq *q);
const char *rcp_seq_dir(const struct rcp_seq *q);
struct larch *rcp_seq_handle(const struct rcp_seq *q);
struct rcp_wake *rcp_seq_wake(const struct rcp_seq *q);

/* ---- an item queue (seed 000 "Queues" and "Priority Queues") -------------- */
/* The engine of queue and priority_queue: items P/qn-<guid>-<seq>, or with
 * priorities P/qn-PP-<guid>-<seq>; puts with a receipt, takes with a claim
 * (see queue.h). */
struct rcp_itemq;
/* Opens the queue at path (creating it, its parent must exist, and its
 * receipts/ and claims/ children). by_priority: items carry a priority
 * 0..RCP_ITEMQ_PRIORITY_MAX, are taken by (priority, sequence), and every
 * take works from a listing no watch event has made stale. */
#define RCP_ITEMQ_PRIORITY_MAX 99
int rcp_itemq_open(struct larch *lh, const char *path, bool by_priority, int32_t timeout_ms,
                   struct rcp_itemq **out);
void rcp_itemq_free(struct rcp_itemq *q);
/* priority: 0..RCP_ITEMQ_PRIORITY_MAX with by_priority, ignored without. */
int rcp_itemq_put(struct rcp_itemq *q, int priority, const void *data, int32_t len,
                  int32_t timeout_ms);
/* *priority (may be NULL) gets the item's priority (-1 without by_priority). */
int rcp_itemq_take(struct rcp_itemq *q, int *priority, char **data, int32_t *len,
                   int32_t timeout_ms);

#endif
