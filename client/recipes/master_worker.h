/*
 * master_worker — the master-worker task assignment of seed 004 ("The
 * Master-Worker Example", "Has my sequential znode been created?",
 * "An Alternative Way: Multiop") on liblarch, under a chosen root R.
 *
 *   R/master              ephemeral, the elected master's id
 *   R/workers/<id>        ephemeral, one per live worker
 *   R/assign/<id>/<task>  a task assigned to worker <id> (task data)
 *   R/tasks/task-<guid>-<seq>  submitted, not yet assigned (task data)
 *   R/status/<task>       the result, written once when the task completes
 *   R/receipts/<guid>     ephemeral, a submitter's proof that its submit applied
 *
 * Mastership ("Mastership Changes"): a master runs for master by creating
 * R/master; on NODEEXISTS it sets an exists watch and runs again when the
 * node goes; after connection loss it reads R/master to learn whether its
 * own create applied (ephemeral owner = our session). The elected master
 * watches R/workers and R/tasks ("Master Waits for Changes to the List of
 * Workers", "... for New Tasks to Assign") and assigns each task to a
 * worker (round-robin) with ONE multi {create R/assign/<w>/<task>, delete
 * R/tasks/<task>}, so no task is ever both pending and assigned, and a
 * master that crashes mid-way leaves nothing to disambiguate (multiop
 * section). Whenever the worker list changes, and when it takes over, it
 * moves the tasks of every assign/<w> whose worker is gone back to
 * R/tasks, each with one multi {create R/tasks/<task>, delete
 * R/assign/<w>/<task>}, then removes the empty assign/<w>.
 *
 * A worker registers with one multi {create R/assign/<id>, create
 * R/workers/<id> EPHEMERAL} (seed 004 wants assign/<id> to exist before
 * workers/<id>; the multi gives both at once), watches R/assign/<id>
 * ("Worker Waits for New Task Assignments"), runs the execute callback on
 * its own thread, and completes a task with one multi {create
 * R/status/<task> result, delete R/assign/<id>/<task>}: a task completes
 * exactly once, and a worker whose task was moved away cannot complete it.
 * A task whose worker dies before completing it is executed again by
 * another worker (completion is exactly once, execution at least once).
 *
 * A client submits with one multi {create R/tasks/task-<guid>-
 * PERSISTENT_SEQUENTIAL, create R/receipts/<guid> EPHEMERAL}. The guid
 * (session id + counter, hex) follows seed 004's advice to put the
 * originator in the name; after a lost reply the receipt says whether the
 * submit applied (a fast master may already have moved the task out of
 * R/tasks, so listing R/tasks alone cannot tell), and the task is then
 * found by its guid. The client watches R/status/<task> ("Client Waits for
 * Task Execution Result").
 *
 * Worker ids are path components, unique per incarnation: an id is not
 * reused while tasks of its previous incarnation may still be assigned.
 *
 * Threading: a master and a worker each own one thread that makes
 * synchronous calls on the handle (never on the handle's event thread; the
 * watchers only signal a condition variable). A client object is used by
 * one thread at a time. Stop or free every object before closing its
 * handle. ZK_ESESSIONEXPIRED ends a master or worker thread (see
 * mw_master_wait_leader / mw_worker_error).
 */
#ifndef LARCH_RECIPES_MASTER_WORKER_H
#define LARCH_RECIPES_MASTER_WORKER_H

#include <stdbool.h>
#include <stdint.h>

#include "client/larch.h"

/* Executes one task on the worker's thread: *result (malloc'd, freed by the
 * worker; NULL with *result_len -1 for none) becomes R/status/<task>. */
typedef void (*mw_execute_fn)(const char *task, const char *data, int32_t len, char **result,
                              int32_t *result_len, void *ctx);

/* ---- master ------------------------------------------------------------- */
struct mw_master;

/* Creates the layout under root when absent (root's parent must exist) and
 * starts running for master as `id`. */
int mw_master_start(struct larch *lh, const char *root, const char *id, int32_t timeout_ms,
                    struct mw_master **out);
/* Waits until this master is elected (ZK_OK) or its thread stopped (its
 * error) or the timeout passed. */
int mw_master_wait_leader(struct mw_master *m, int32_t timeout_ms);
bool mw_master_is_leader(struct mw_master *m);
/* Stops the thread (within about a second); an elected master resigns by
 * deleting R/master, so a backup takes over at once. Frees m. */
void mw_master_stop(struct mw_master *m);

/* ---- worker ------------------------------------------------------------- */
struct mw_worker;

/* Creates the layout when absent, registers worker `id` and starts it.
 * ZK_ENODEEXISTS when the id is in use. */
int mw_worker_start(struct larch *lh, const char *root, const char *id, mw_execute_fn fn,
                    void *ctx, int32_t timeout_ms, struct mw_worker **out);
/* Tasks this worker completed so far. */
int64_t mw_worker_completed(struct mw_worker *w);
/* ZK_OK while the worker runs, else the error that stopped its thread. */
int mw_worker_error(struct mw_worker *w);
/* Stops the thread (within about a second), unregisters (its pending
 * assignments then go back to R/tasks) and frees w. */
void mw_worker_stop(struct mw_worker *w);

/* ---- client ------------------------------------------------------------- */
struct mw_client;

int mw_client_open(struct larch *lh, const char *root, int32_t timeout_ms,
                   struct mw_client **out);
void mw_client_free(struct mw_client *c);
/* Submits a task; *task (malloc'd) gets its name, "task-<guid>-<seq>". */
int mw_submit(struct mw_client *c, const void *data, int32_t len, char **task,
              int32_t timeout_ms);
/* Waits until the task completed and returns its result (*result malloc'd,
 * NUL-terminated; NULL with *len -1 for none). */
int mw_wait_status(struct mw_client *c, const char *task, char **result, int32_t *len,
                   int32_t timeout_ms);

#endif
