/*
 * group — group membership on liblarch (seed 000, "Out of the Box
 * Applications": the group is a znode, members create ephemeral children
 * that ZooKeeper removes when a member fails; seed 002, "Group membership",
 * steps 1-3).
 *
 * group_join creates <group>/<member> EPHEMERAL with the member's
 * information as data (seed 002 step 2.i; names are chosen by the caller
 * and must be unique, step 2.ii). group_leave deletes it; a crashed member
 * leaves when its session expires. A struct group also keeps the member
 * list: getChildren with a one-shot watch (step 3), re-read on every
 * notification by a refresher thread, so the list follows joins, leaves and
 * crashes; a generation counter goes up each time the list changes.
 *
 * Connection loss (seed 004): reads are retried; a join whose reply was
 * lost is recognised by the ephemeral owner (our session) of the node that
 * the retry finds; a leave whose retry finds NONODE counts as done.
 * ZK_ESESSIONEXPIRED is terminal: the refresher stops and reports it.
 *
 * Threading: each struct group owns one refresher thread, which runs the
 * change callback (never on the handle's event thread; the watcher only
 * signals a condition variable). The callback must not call group_close.
 * The other calls may come from any thread. Close the group before closing
 * its handle (group_close removes watchers that have not fired).
 */
#ifndef LARCH_RECIPES_GROUP_H
#define LARCH_RECIPES_GROUP_H

#include <stdint.h>

#include "client/larch.h"

/* Called with the new member list (sorted; valid during the call). */
typedef void (*group_change_fn)(const struct larch_strings *members, uint64_t generation,
                                void *ctx);

struct group;

/* Opens the group at path (created persistent if absent; its parent must
 * exist), reads the member list once (fn, if not NULL, is called with it
 * from this thread) and starts the refresher. lh must outlive the group. */
int group_open(struct larch *lh, const char *path, group_change_fn fn, void *ctx,
               int32_t timeout_ms, struct group **out);
/* Stops the refresher (within about a second) and frees the group. Does
 * not leave: memberships last until group_leave or the session's end. */
void group_close(struct group *g);

/* Joins as member (one path component) with data (NULL/-1 for none).
 * ZK_ENODEEXISTS when another session holds that name. */
int group_join(struct group *g, const char *member, const void *data, int32_t len,
               int32_t timeout_ms);
/* Leaves; ZK_ENONODE when this session is not a member by that name. */
int group_leave(struct group *g, const char *member, int32_t timeout_ms);

/* A copy of the member list (sorted; free with larch_strings_free) and its
 * generation (may be NULL). The refresher's terminal error once it stopped. */
int group_members(struct group *g, struct larch_strings *out, uint64_t *generation);
/* Waits until the list's generation exceeds `generation` (ZK_OK). */
int group_wait_change(struct group *g, uint64_t generation, int32_t timeout_ms);

#endif
