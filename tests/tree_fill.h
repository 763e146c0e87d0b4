/*
 * tree_fill.h — filling a tree fast for benches, unit tests and fuzz
 * targets (bench_snapshot, bench_ldp_frame, test_ldp_frame, fuzz_ldp):
 * requests prepared and applied as the sequencer does, straight on the
 * tree. Single-threaded; the caller is a registered RCU thread. Nothing
 * can go on after a failed step, so each exits on failure.
 */
#ifndef LARCH_TESTS_TREE_FILL_H
#define LARCH_TESTS_TREE_FILL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tree/tree.h"

/* Prepares and applies r as zxid. */
static inline void tree_fill_apply(struct tree *t, int64_t zxid, const struct tree_req *r,
                                   const char *path)
{
    struct tree_prep_cfg cfg = { 0 };
    struct tree_auth auth = { 0 };
    struct txn x = { .zxid = zxid, .time_ms = 1700000000000LL + zxid };
    if (tree_prep(t, &cfg, r, &auth, &x) != ZK_OK || tree_apply(t, &x, NULL, NULL, NULL) != ZK_OK) {
        fprintf(stderr, "op %d on %s failed\n", (int)r->type, path);
        exit(1);
    }
    txn_free(&x);
    tree_prep_reset(t);
}

/* Creates path with len bytes of value (-1: null data), open to all. */
static inline void tree_fill_create(struct tree *t, int64_t zxid, const char *path,
                                    const char *value, int32_t len)
{
    static struct zk_acl world_all = { ZK_PERM_ALL, { { "world", 5 }, { "anyone", 6 } } };
    struct tree_req r = { .type = ZK_OP_CREATE };
    r.u.create.path = (struct zk_str){ path, (int32_t)strlen(path) };
    r.u.create.data = (struct zk_str){ value, len };
    r.u.create.acl = (struct zk_aclvec){ 1, &world_all };
    r.u.create.ttl = -1;
    tree_fill_apply(t, zxid, &r, path);
}

/* Deletes path, whatever its version. */
static inline void tree_fill_delete(struct tree *t, int64_t zxid, const char *path)
{
    struct tree_req r = { .type = ZK_OP_DELETE };
    r.u.del.path = (struct zk_str){ path, (int32_t)strlen(path) };
    r.u.del.version = -1;
    tree_fill_apply(t, zxid, &r, path);
}

#endif /* LARCH_TESTS_TREE_FILL_H */
