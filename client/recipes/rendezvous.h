/*
 * rendezvous — a rendezvous znode on liblarch (seed 002, "Rendezvous",
 * steps 1-4).
 *
 * A scheduler starts a manager and workers in an unknown order; workers
 * need the manager's address. The scheduler creates an empty rendezvous
 * znode (step 1, rdv_create). A worker reads it with a one-shot watch and
 * sleeps while it is empty (step 2, rdv_wait). The manager writes its
 * details into it (step 3, rdv_publish), which fires every worker's watch;
 * each worker reads the details and proceeds (step 4). Empty data means
 * "not published yet", so published details must be non-empty.
 *
 * Seed 002 both calls the znode "normally a regular znode" and creates it
 * EPHEMERAL; rdv_create lets the scheduler choose (ephemeral: the
 * rendezvous goes away with the scheduler's session). rdv_wait also waits,
 * with an exists watch, while the znode does not exist yet, so a worker may
 * even start before the scheduler created it.
 *
 * Connection loss (seed 004): reads are retried once the handle has
 * re-attached; create and setData are idempotent here and simply retried.
 * ZK_ESESSIONEXPIRED is terminal and returned.
 *
 * Threading: a struct rdv is used by one thread at a time (one per worker
 * thread; they may share a handle). Its watcher runs on the handle's event
 * thread and only signals a condition variable. Free the rdv before closing
 * its handle (rdv_free removes watchers that have not fired).
 */
#ifndef LARCH_RECIPES_RENDEZVOUS_H
#define LARCH_RECIPES_RENDEZVOUS_H

#include <stdbool.h>
#include <stdint.h>

#include "client/larch.h"

struct rdv;

/* A rendezvous at path (no I/O). lh must outlive the rdv. */
int rdv_open(struct larch *lh, const char *path, struct rdv **out);
void rdv_free(struct rdv *r);

/* Step 1: creates the empty rendezvous znode (its parent must exist).
 * ZK_OK also when it already exists. */
int rdv_create(struct rdv *r, bool ephemeral, int32_t timeout_ms);
/* Step 3: the manager writes its details (len > 0). ZK_ENONODE when the
 * rendezvous was not created. */
int rdv_publish(struct rdv *r, const void *info, int32_t len, int32_t timeout_ms);
/* Steps 2 and 4: waits until the rendezvous holds details and returns a
 * copy (*info malloc'd, NUL-terminated). */
int rdv_wait(struct rdv *r, char **info, int32_t *len, int32_t timeout_ms);

#endif
