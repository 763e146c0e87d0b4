/*
 * config — configuration management with watch-driven refresh on liblarch
 * (seed 000, "Out of the Box Applications"; seed 002, "Configuration
 * management", steps 1-3).
 *
 * The configuration is the data of one znode. Writers call conf_write
 * (setData with an optional expected version, creating the znode when it is
 * absent: seed 002 step 1 and 3). A reader opens a struct conf, which keeps
 * a cached copy: it reads the znode with a one-shot data watch (step 2), and
 * each notification makes it read again and re-arm the watch. A watch fires
 * once for any number of changes before the re-read (step 3's note), so the
 * cache may skip intermediate values but always converges on the last
 * write. While the znode is absent an exists watch waits for its creation.
 *
 * Seed 002 creates the znode EPHEMERAL; conf_write creates it PERSISTENT
 * instead, so a configuration outlives the session of whoever wrote it.
 *
 * Threading: each struct conf owns one refresher thread. It runs the
 * change callback (never the handle's event thread, whose watcher only
 * signals a condition variable), with the new value, so the callback may
 * block or call liblarch; it must not call conf_close. conf_get and
 * conf_wait_version may be called from any thread. Close the conf before
 * closing its handle (conf_close removes watchers that have not fired).
 * Reads are retried across connection loss; ZK_ESESSIONEXPIRED stops the
 * refresher and is returned by every later conf_get.
 */
#ifndef LARCH_RECIPES_CONFIG_H
#define LARCH_RECIPES_CONFIG_H

#include <stdint.h>

#include "client/larch.h"

/* Called with each new value the cache takes (data NULL and version -1 when
 * the znode is absent; data is NUL-terminated and valid during the call). */
typedef void (*conf_change_fn)(const char *data, int32_t len, int32_t version, void *ctx);

struct conf;

/* Reads path once (the cache is valid when this returns ZK_OK; fn, if not
 * NULL, is called with that first value from this thread) and starts the
 * refresher. A missing znode is not an error: the cache says "absent". lh
 * must outlive the conf. */
int conf_open(struct larch *lh, const char *path, conf_change_fn fn, void *ctx,
              int32_t timeout_ms, struct conf **out);
/* Stops the refresher thread (within about a second) and frees the conf. */
void conf_close(struct conf *c);

/* A copy of the cached value (*data malloc'd, NUL-terminated; NULL and *len
 * -1 for a null value) and its znode version. ZK_ENONODE when absent; the
 * refresher's terminal error (ZK_ESESSIONEXPIRED, ...) once it stopped. */
int conf_get(struct conf *c, char **data, int32_t *len, int32_t *version);
/* Waits until the cached version is >= min_version (ZK_OK), the refresher
 * stopped (its error) or the timeout passed. Versions restart at 0 when the
 * znode is deleted and created again. */
int conf_wait_version(struct conf *c, int32_t min_version, int32_t timeout_ms);

/* Writes the configuration: setData(path, data, expected_version), creating
 * path (persistent, parent must exist) when it is absent and
 * expected_version is -1. *new_version (may be NULL) gets the version
 * written. ZK_EBADVERSION when expected_version is stale. A write whose
 * reply was lost is recognised when retried (seed 004). */
int conf_write(struct larch *lh, const char *path, const void *data, int32_t len,
               int32_t expected_version, int32_t *new_version, int32_t timeout_ms);

#endif
