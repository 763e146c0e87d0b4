/*
 * name_service — a name service on liblarch (seed 000, "Out of the Box
 * Applications": name service is provided directly by the ZooKeeper API).
 *
 * A directory znode holds one child per bound name; the child's data is the
 * value. Binding is create() (NODEEXISTS means the name is taken), resolving
 * is getData(), unbinding is delete(), listing is getChildren(). A binding
 * may be ephemeral, so that a service's name goes away with its session
 * (seed 000: nodes of members that fail are removed automatically).
 *
 * Connection loss (seed 004, "CONNECTIONLOSS"): reads are retried once the
 * handle has re-attached; a bind whose reply was lost is re-tried and a
 * NODEEXISTS that follows is resolved by reading the node back (our session
 * owns the ephemeral, or the stored value is the one we wrote); an unbind
 * whose reply was lost and whose retry finds NONODE counts as done.
 * ZK_ESESSIONEXPIRED is terminal and returned as is.
 *
 * Threading: a struct ns may be used by one thread at a time; several
 * threads may each have their own struct ns on the same handle. ns_await
 * arms a one-shot exists watcher that only signals a condition variable on
 * the handle's event thread. Free the ns before closing its handle: ns_free
 * removes watchers that have not fired (liblarch drops them silently when
 * a handle closes).
 *
 * Every blocking call takes timeout_ms and returns ZK_EOPERATIONTIMEOUT when
 * it runs out; otherwise ZooKeeper codes (ZK_OK, ZK_ENONODE, ...).
 */
#ifndef LARCH_RECIPES_NAME_SERVICE_H
#define LARCH_RECIPES_NAME_SERVICE_H

#include <stdbool.h>
#include <stdint.h>

#include "client/larch.h"

struct ns;

/* Opens the name service rooted at root (created as a persistent znode if
 * absent; its parent must exist). lh stays owned by the caller and must
 * outlive the ns. */
int ns_open(struct larch *lh, const char *root, int32_t timeout_ms, struct ns **out);
/* Frees the ns; bindings stay (ephemeral ones until the session ends). */
void ns_free(struct ns *ns);

/* Binds name (one path component) to value (len bytes; NULL/-1 for none).
 * ZK_OK when the name now holds this value and we bound it (or, for a
 * persistent binding, it already held exactly this value); ZK_ENODEEXISTS
 * when it is bound to something else or, ephemeral, by another session;
 * ZK_EBADARGUMENTS for a bad name. */
int ns_bind(struct ns *ns, const char *name, const void *value, int32_t len, bool ephemeral,
            int32_t timeout_ms);
/* The value bound to name (*value malloc'd, NUL-terminated, NULL with *len
 * -1 for a null value); ZK_ENONODE when unbound. */
int ns_resolve(struct ns *ns, const char *name, char **value, int32_t *len, int32_t timeout_ms);
/* Like ns_resolve but waits (exists watch) until the name is bound. */
int ns_await(struct ns *ns, const char *name, char **value, int32_t *len, int32_t timeout_ms);
/* Removes the binding; ZK_ENONODE when it was not bound. */
int ns_unbind(struct ns *ns, const char *name, int32_t timeout_ms);
/* The bound names, sorted (strcmp); free with larch_strings_free. */
int ns_list(struct ns *ns, struct larch_strings *names, int32_t timeout_ms);

#endif
