/*
 * txn.c — applying txns to the tree (ZooKeeper's DataTree.processTxn),
 * sequencer thread only.
 *
 * Every change builds a new version of the touched znodes and publishes it
 * (znode_publish: release store + call_rcu of the old version), so readers
 * see each znode either before or after the op. Watch events go out after
 * the change they report is published, in DataTree's trigger order.
 *
 * Apply is idempotent for a txn the tree already holds, because replay
 * after a crash starts from a snapshot that may already contain some of the
 * replayed txns: a create of a path that exists only repairs the parent's
 * cversion/pzxid (DataTree.processTxn's NODEEXISTS branch), a delete of a
 * missing node or of a newer incarnation is skipped, and setData/setACL are
 * skipped when the node already holds that version or a later one.
 */
#include <stdlib.h>
#include <string.h>

#include "tree/tree_int.h"

struct apply_ctx {
    struct tree *t;
    const struct txn *x;
    tree_event_fn ev;
    void *ev_arg;
};

/* acl is that of the version the event is about (tree.h, struct
 * tree_event); apply holds rcu_read_lock, so it outlives the callback even
 * when the version was retired just before. */
static void emit(const struct apply_ctx *a, int32_t type, const char *path,
                 const struct tree_acl *acl)
{
    if (a->ev == NULL)
        return;
    struct tree_event e = { .type = type, .path = path, .zxid = a->x->zxid, .acl = acl };
    a->ev(a->ev_arg, &e);
}

static void fill_result(struct tree_op_result *res, const struct znode *n, bool with_path)
{
    if (res == NULL)
        return;
    zver_client_stat(n->ver, &res->stat);
    if (with_path && res->path == NULL) {
        res->path = strdup(n->path);
        if (res->path == NULL)
            res->err = ZK_ESYSTEMERROR;
    }
}

/* Serial-number comparison, so version wrap-around keeps working. */
static bool version_reached(int32_t current, int32_t target)
{
    return (int32_t)((uint32_t)current - (uint32_t)target) >= 0;
}

/* ---- create ------------------------------------------------------------------ */

/* DataTree.createNode's parent update: -1 means "one more than now"; the
 * cversion/pzxid only move forward, so replaying an old create after a
 * newer snapshot cannot roll them back. Returns the new parent version (to
 * publish) or NULL when nothing changes; *oom on allocation failure. */
static struct zver *parent_after_create(const struct zver *pv, int32_t parent_cversion,
                                        int64_t zxid, struct znode *child, bool *oom)
{
    *oom = false;
    int32_t cv = parent_cversion == -1 ? (int32_t)((uint32_t)pv->st.cversion + 1u)
                                       : parent_cversion;
    bool bump = cv > pv->st.cversion;
    if (!bump && child == NULL)
        return NULL;
    struct zver *nv = zver_clone(pv);
    *oom = nv == NULL;
    if (nv == NULL)
        return NULL;
    if (child != NULL) {
        struct zkids *kids = zkids_with(nv->kids, child, oom);
        if (kids == NULL) {
            zver_free_now(nv);
            return NULL;
        }
        zkids_unref(nv->kids);
        nv->kids = kids;
        nv->st.num_children = (int32_t)kids->count;
    }
    if (bump) {
        nv->st.cversion = cv;
        nv->st.pzxid = zxid;
    }
    return nv;
}

static struct zver *zver_for_create(const struct apply_ctx *a, const struct txn_op *op)
{
    struct zver *v = calloc(1, sizeof *v);
    if (v == NULL)
        return NULL;
    v->data = zdata_new(op->data, op->data_len);
    if (op->data_len >= 0 && v->data == NULL) {
        free(v);
        return NULL;
    }
    v->acl = tree_acl_ref(op->acl != NULL ? op->acl : tree_acl_open());
    v->st = (struct zk_stat){ .czxid = a->x->zxid, .mzxid = a->x->zxid, .pzxid = a->x->zxid,
                              .ctime = a->x->time_ms, .mtime = a->x->time_ms,
                              .ephemeral_owner = op->ephemeral_owner,
                              .data_length = (int32_t)zver_data_len(v) };
    return v;
}

/* The path already exists (replay): only the parent's cversion/pzxid may
 * need the repair DataTree.processTxn makes after NODEEXISTS. */
static int create_existing(const struct apply_ctx *a, const struct txn_op *op,
                           struct znode *parent, struct znode *n, struct tree_op_result *res)
{
    bool oom;
    struct zver *pv = parent_after_create(parent->ver, op->parent_cversion, a->x->zxid, NULL, &oom);
    if (oom)
        return ZK_ESYSTEMERROR;
    if (pv != NULL)
        znode_publish(a->t, parent, pv);
    fill_result(res, n, true);
    return ZK_OK;
}

static int apply_create(const struct apply_ctx *a, const struct txn_op *op,
                        struct tree_op_result *res)
{
    size_t len = op->path != NULL ? strlen(op->path) : 0;
    /* Prep only logs valid paths, but recovery applies whatever the log
     * holds: a path such as "//" or "a" would be listed under a parent it
     * does not name, and the snapshot walk (which rebuilds paths from
     * names) would disagree with the tree's digest and write duplicates. */
    if (len <= 1 || zk_path_validate(op->path, len) != ZK_OK)
        return ZK_ERUNTIMEINCONSISTENCY;
    struct znode *parent = tree_lookup(a->t, op->path, tree_parent_len(op->path, len));
    if (parent == NULL)
        return ZK_ERUNTIMEINCONSISTENCY;
    struct znode *n = tree_lookup(a->t, op->path, len);
    if (n != NULL)
        return create_existing(a, op, parent, n, res);

    bool oom = true;
    struct zver *v = zver_for_create(a, op);
    n = v != NULL ? znode_new(op->path, len, v) : NULL;
    struct zver *pv = n != NULL ? parent_after_create(parent->ver, op->parent_cversion,
                                                      a->x->zxid, n, &oom)
                                : NULL;
    if (pv == NULL || tree_index_add(a->t, op->path, len, op->ephemeral_owner) != 0) {
        zver_free_now(pv);
        if (n != NULL)
            free(n);
        zver_free_now(v);
        return ZK_ESYSTEMERROR;
    }
    /* the node goes into the table before the parent lists it, so a reader
     * that sees the name can look the node up */
    tree_insert(a->t, n);
    znode_publish(a->t, parent, pv);
    emit(a, ZK_EVENT_CREATED, n->path, v->acl);
    emit(a, ZK_EVENT_CHILD_CHANGED, parent->path, pv->acl);
    fill_result(res, n, true);
    return ZK_OK;
}

/* ---- delete ------------------------------------------------------------------ */

/* DataTree.deleteNode's parent update: drop the child, raise pzxid (never
 * lower it). NULL when nothing changes; *oom on allocation failure. */
static struct zver *parent_after_delete(const struct zver *pv, const struct znode *child,
                                        int64_t zxid, bool *oom)
{
    *oom = false;
    if (child == NULL && zxid <= pv->st.pzxid)
        return NULL;
    struct zver *nv = zver_clone(pv);
    *oom = nv == NULL;
    if (nv == NULL)
        return NULL;
    if (child != NULL) {
        struct zkids *kids = zkids_without(nv->kids, child, oom);
        if (*oom) {
            zver_free_now(nv);
            return NULL;
        }
        zkids_unref(nv->kids);
        nv->kids = kids;
        nv->st.num_children = kids != NULL ? (int32_t)kids->count : 0;
    }
    if (zxid > nv->st.pzxid)
        nv->st.pzxid = zxid;
    return nv;
}

static int delete_path(const struct apply_ctx *a, const char *path)
{
    size_t len = strlen(path);
    if (len <= 1)
        return ZK_ERUNTIMEINCONSISTENCY;
    struct znode *parent = tree_lookup(a->t, path, tree_parent_len(path, len));
    struct znode *n = tree_lookup(a->t, path, len);
    if (n != NULL && n->ver->st.czxid > a->x->zxid)
        n = NULL; /* a later incarnation: this delete was already applied */
    if (parent == NULL)
        return n == NULL ? ZK_OK : ZK_ERUNTIMEINCONSISTENCY;
    if (n != NULL && n->ver->kids != NULL)
        return ZK_ERUNTIMEINCONSISTENCY;
    bool oom;
    struct zver *pv = parent_after_delete(parent->ver, n, a->x->zxid, &oom);
    if (oom)
        return ZK_ESYSTEMERROR;
    if (pv != NULL)
        znode_publish(a->t, parent, pv);
    if (n == NULL)
        return ZK_OK;
    int64_t owner = n->ver->st.ephemeral_owner;
    tree_index_del(a->t, n->path, n->path_len, owner);
    /* events after the removal is visible (invariant 3); n->path and the
     * deleted version's ACL stay valid because apply holds rcu_read_lock,
     * which defers n's free */
    tree_remove(a->t, n);
    emit(a, ZK_EVENT_DELETED, n->path, n->ver->acl);
    emit(a, ZK_EVENT_CHILD_CHANGED, parent->path, parent->ver->acl);
    return ZK_OK;
}

/* ---- setData / setACL -------------------------------------------------------- */

static int apply_setdata(const struct apply_ctx *a, const struct txn_op *op,
                         struct tree_op_result *res)
{
    struct znode *n = op->path != NULL ? tree_lookup(a->t, op->path, strlen(op->path)) : NULL;
    if (n == NULL)
        return ZK_ERUNTIMEINCONSISTENCY;
    const struct zver *v = n->ver;
    bool applied = v->st.czxid > a->x->zxid || v->st.mzxid > a->x->zxid ||
                   (v->st.mzxid == a->x->zxid && version_reached(v->st.version, op->version));
    if (!applied) {
        struct zver *nv = zver_clone(v);
        struct zdata *d = zdata_new(op->data, op->data_len);
        if (nv == NULL || (op->data_len >= 0 && d == NULL)) {
            zver_free_now(nv);
            zdata_unref(d);
            return ZK_ESYSTEMERROR;
        }
        zdata_unref(nv->data);
        nv->data = d;
        nv->st.data_length = (int32_t)zver_data_len(nv);
        nv->st.version = op->version;
        nv->st.mzxid = a->x->zxid;
        nv->st.mtime = a->x->time_ms;
        atomic_fetch_add_explicit(&a->t->data_bytes, zver_data_len(nv) - zver_data_len(v),
                                  memory_order_relaxed);
        znode_publish(a->t, n, nv);
        emit(a, ZK_EVENT_DATA_CHANGED, n->path, nv->acl);
    }
    fill_result(res, n, false);
    return ZK_OK;
}

static int apply_setacl(const struct apply_ctx *a, const struct txn_op *op,
                        struct tree_op_result *res)
{
    struct znode *n = op->path != NULL ? tree_lookup(a->t, op->path, strlen(op->path)) : NULL;
    if (n == NULL || op->acl == NULL)
        return ZK_ERUNTIMEINCONSISTENCY;
    const struct zver *v = n->ver;
    bool applied = v->st.czxid > a->x->zxid || version_reached(v->st.aversion, op->version);
    if (!applied) {
        struct zver *nv = zver_clone(v);
        if (nv == NULL)
            return ZK_ESYSTEMERROR;
        tree_acl_unref(nv->acl);
        nv->acl = tree_acl_ref(op->acl);
        nv->st.aversion = op->version;
        znode_publish(a->t, n, nv); /* DataTree.setACL triggers no watch */
    }
    fill_result(res, n, false);
    return ZK_OK;
}

/* ---- sessions --------------------------------------------------------------- */

/* After the txn's own deletes, anything the session still owns goes too
 * (DataTree.killSession's "unexpected extra paths"), then the session.
 * Nodes created after this txn (czxid above its zxid) are a later
 * incarnation and stay, with their owner index entries. */
static int close_session(const struct apply_ctx *a)
{
    int64_t id = a->x->session_id;
    struct tmap *left = tree_owned_paths(a->t, id);
    int rc = ZK_OK;
    if (left != NULL) {
        size_t n;
        bool oom;
        const char **keys = tmap_sorted_keys(left, &n, &oom);
        char **copies = calloc(n + 1, sizeof *copies);
        /* copy: deleting removes the keys from the set they live in */
        for (size_t i = 0; copies != NULL && i < n; i++)
            copies[i] = strdup(keys[i]);
        free(keys);
        for (size_t i = 0; copies != NULL && i < n; i++) {
            int err = copies[i] != NULL ? delete_path(a, copies[i]) : ZK_ESYSTEMERROR;
            if (err != ZK_OK && rc == ZK_OK)
                rc = err;
            free(copies[i]);
        }
        if (oom || copies == NULL)
            rc = ZK_ESYSTEMERROR;
        free(copies);
        /* No blanket drop of the owner set: in a replay over a fuzzy
         * snapshot a path may hold a later incarnation the session owns
         * again (delete_path skips it), and its index entry must stay so a
         * later close still finds it. Every delete that ran took its own
         * entry out, and the set went with its last one. */
    }
    tree_sess_remove(a->t, id);
    return rc;
}

/* ---- dispatch ------------------------------------------------------------------ */

static int apply_op(const struct apply_ctx *a, const struct txn_op *op,
                    struct tree_op_result *res, bool *closing)
{
    switch (op->type) {
    case TXN_CREATE:
    case TXN_CREATE_CONTAINER:
    case TXN_CREATE_TTL:
        return apply_create(a, op, res);
    case TXN_DELETE:
        return op->path != NULL ? delete_path(a, op->path) : ZK_ERUNTIMEINCONSISTENCY;
    case TXN_SETDATA:
        return apply_setdata(a, op, res);
    case TXN_SETACL:
        return apply_setacl(a, op, res);
    case TXN_CHECK:
    case TXN_CONFIG: /* the membership is the Raft core's: only the zxid moves */
        return ZK_OK;
    case TXN_CREATE_SESSION:
        return tree_sess_add(a->t, a->x->session_id, op->timeout_ms, a->x->time_ms,
                             op->passwd_known ? op->passwd : NULL) == 0
                   ? ZK_OK
                   : ZK_ESYSTEMERROR;
    case TXN_CLOSE_SESSION:
        *closing = true;
        return ZK_OK;
    default:
        return ZK_ERUNTIMEINCONSISTENCY;
    }
}

/* DataTree.processTxn for a multi holding an ErrorTxn: nothing is applied;
 * ops before the first error report OK, ops after it RUNTIMEINCONSISTENCY. */
static bool txn_failed(const struct txn *x)
{
    for (uint32_t i = 0; i < x->nops; i++) {
        if (x->ops[i].type == TXN_ERROR)
            return true;
    }
    return false;
}

static void report_failed(const struct txn *x, struct tree_op_result *results)
{
    bool after = false;
    for (uint32_t i = 0; i < x->nops; i++) {
        if (x->ops[i].type == TXN_ERROR) {
            results[i].err = x->ops[i].err;
            after = true;
        } else {
            results[i].err = after ? ZK_ERUNTIMEINCONSISTENCY : ZK_OK;
        }
    }
}

static int apply_ops(const struct apply_ctx *a, struct tree_op_result *results)
{
    int rc = ZK_OK;
    bool closing = false;
    for (uint32_t i = 0; i < a->x->nops; i++) {
        struct tree_op_result *res = results != NULL ? &results[i] : NULL;
        int err = apply_op(a, &a->x->ops[i], res, &closing);
        if (res != NULL && res->err == ZK_OK)
            res->err = err;
        if (err != ZK_OK && rc == ZK_OK)
            rc = err;
    }
    if (closing) {
        int err = close_session(a);
        if (err != ZK_OK && rc == ZK_OK)
            rc = err;
    }
    return rc;
}

int tree_apply(struct tree *t, const struct txn *x, tree_event_fn ev, void *ev_arg,
               struct tree_op_result *results)
{
    struct apply_ctx a = { .t = t, .x = x, .ev = ev, .ev_arg = ev_arg };
    for (uint32_t i = 0; results != NULL && i < x->nops; i++)
        results[i] = (struct tree_op_result){ .err = ZK_OK };
    int rc = ZK_OK;
    if (txn_failed(x)) {
        if (results != NULL)
            report_failed(x, results);
    } else {
        rcu_read_lock();
        rc = apply_ops(&a, results);
        tree_read_unlock();
    }
    /* release: a reader that sees the new zxid sees everything it covers */
    if (x->zxid > atomic_load_explicit(&t->last_zxid, memory_order_relaxed))
        atomic_store_explicit(&t->last_zxid, x->zxid, memory_order_release);
    return rc;
}

void tree_results_free(struct tree_op_result *r, uint32_t n)
{
    for (uint32_t i = 0; r != NULL && i < n; i++) {
        free(r[i].path);
        r[i].path = NULL;
    }
}

void tree_txn_op_clear(struct txn_op *op)
{
    free(op->path);
    free(op->data);
    if (op->acl != NULL)
        tree_acl_unref(op->acl);
    *op = (struct txn_op){ .data_len = -1 };
}

void txn_free(struct txn *x)
{
    for (uint32_t i = 0; x->ops != NULL && i < x->nops; i++)
        tree_txn_op_clear(&x->ops[i]);
    free(x->ops);
    x->ops = NULL;
    x->nops = 0;
}
