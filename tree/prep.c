/*
 * prep.c — request validation and txn generation (ZooKeeper's
 * PrepRequestProcessor), sequencer thread only.
 *
 * Prep never changes what readers see. It checks a request against the tree
 * as it will be once every txn prepared earlier in the batch is applied: the
 * "pending" overlay maps a path to its expected state (ZooKeeper's
 * outstandingChangesForPath of ChangeRecords). Each tree_prep runs in an undo
 * scope so that a failing request (or a failing op of a multi) leaves the
 * overlay exactly as it found it, like ZooKeeper's rollbackPendingChanges.
 *
 * Checks run in ZooKeeper's order so that a request with several faults gets
 * the error stock ZooKeeper would give, except that a malformed path is
 * reported first (ZooKeeper checks some paths only after the parent lookup;
 * its clients validate paths before sending, so only raw clients see it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tree/tree_int.h"

#define SEQ_SUFFIX_MAX 12 /* "%010d" of an int32 is at most 11 chars, plus NUL */

struct prep_ctx {
    struct tree *t;
    const struct tree_prep_cfg *cfg;
    const struct tree_auth *auth;
    const struct txn *x; /* zxid, time and session of the txn being built */
    size_t txn_bytes;    /* cfg->op_bytes of the ops accepted so far */
};

/* ---- overlay records ------------------------------------------------------- */

static void prec_free(void *p)
{
    struct prec *r = p;
    if (r == NULL)
        return;
    if (r->acl != NULL)
        tree_acl_unref(r->acl);
    free(r);
}

/* The state path will have after the pending changes. Fills *out (its acl is
 * borrowed) and returns whether the node exists then. */
static bool rec_get(const struct tree *t, const char *path, size_t len, struct prec *out)
{
    void **slot = tmap_get(&t->pending, path, len);
    if (slot != NULL) {
        *out = *(const struct prec *)*slot;
        return out->exists;
    }
    struct znode *n = tree_lookup(t, path, len);
    if (n == NULL) {
        *out = (struct prec){ .exists = false };
        return false;
    }
    const struct zver *v = n->ver;
    *out = (struct prec){ .exists = true, .st = v->st, .acl = v->acl };
    out->st.num_children = v->kids != NULL ? (int32_t)v->kids->count : 0;
    return true;
}

/* Room for one more undo entry: 0 or -ENOMEM. */
static int undo_reserve(struct tree *t)
{
    return base_grow(&t->undo, &t->undo_cap, t->undo_len + 1, sizeof *t->undo);
}

/* Records r as the pending state of path; the previous record goes to the
 * undo log. ZK_OK or ZK_ESYSTEMERROR. */
static int rec_put(struct tree *t, const char *path, size_t len, const struct prec *r)
{
    char *key = malloc(len + 1);
    struct prec *copy = malloc(sizeof *copy);
    if (key == NULL || copy == NULL || undo_reserve(t) != 0)
        goto oom;
    memcpy(key, path, len);
    key[len] = '\0';
    *copy = *r;
    if (copy->acl != NULL)
        tree_acl_ref(copy->acl);
    void *old;
    if (tmap_put(&t->pending, path, len, copy, &old) != 0) {
        prec_free(copy);
        free(key);
        return ZK_ESYSTEMERROR;
    }
    t->undo[t->undo_len++] = (struct undo_ent){ .path = key, .len = len, .old = old };
    return ZK_OK;
oom:
    free(key);
    free(copy);
    return ZK_ESYSTEMERROR;
}

/* Keeps the changes made since the scope began. */
static void undo_commit(struct tree *t)
{
    for (size_t i = 0; i < t->undo_len; i++) {
        prec_free(t->undo[i].old);
        free(t->undo[i].path);
    }
    t->undo_len = 0;
}

/* Restores the overlay to its state when the scope began, newest first. */
static void undo_rollback(struct tree *t)
{
    while (t->undo_len > 0) {
        struct undo_ent *u = &t->undo[--t->undo_len];
        void *cur = NULL;
        if (u->old != NULL)
            tmap_put(&t->pending, u->path, u->len, u->old, &cur); /* replace: cannot fail */
        else
            tmap_del(&t->pending, u->path, u->len, &cur);
        prec_free(cur);
        free(u->path);
    }
}

static bool session_live(const struct tree *t, int64_t id)
{
    void **slot = tmap_get(&t->pending_sessions, &id, sizeof id);
    if (slot != NULL)
        return (intptr_t)*slot == PS_LIVE;
    const struct sess *s = tree_sess_lookup(t, id);
    return s != NULL && !s->pub.closing;
}

static int set_pending_session(struct tree *t, int64_t id, enum pending_session_state st)
{
    return tmap_put(&t->pending_sessions, &id, sizeof id, (void *)(intptr_t)st, NULL) == 0
               ? ZK_OK
               : ZK_ESYSTEMERROR;
}

/* ---- small checks -------------------------------------------------------------- */

/* The schemes ACLs may name beyond world, ip and digest (no cfg: none). */
static uint32_t acl_providers(const struct prep_ctx *c)
{
    return c->cfg != NULL ? c->cfg->acl_providers : 0;
}

static bool permits(const struct prep_ctx *c, const struct tree_acl *acl, int32_t perm)
{
    static const struct tree_auth nobody = { 0 };
    return tree_acl_permits(acl, perm, c->auth != NULL ? c->auth : &nobody);
}

/* Counts op, as it will be logged, against the txn size bound
 * (tree_prep_cfg.max_txn_bytes). Called once op is complete and before its
 * pending change is recorded, so a refused op leaves nothing to undo.
 * ZooKeeper has no bound of this kind; BADARGUMENTS is its answer for a
 * request that is well-formed but unacceptable (a bad TTL or create mode).
 * The ErrorTxn ops of a failed multi need no check: each is a few bytes and
 * TREE_MULTI_OPS_MAX bounds their count far below any record. */
static int charge_op(struct prep_ctx *c, const struct txn_op *op)
{
    const struct tree_prep_cfg *cfg = c->cfg;
    if (cfg == NULL || cfg->max_txn_bytes == 0 || cfg->op_bytes == NULL)
        return ZK_OK;
    size_t n = cfg->op_bytes(op);
    if (n > cfg->max_txn_bytes - c->txn_bytes) /* txn_bytes <= max: no wrap */
        return ZK_EBADARGUMENTS;
    c->txn_bytes += n;
    return ZK_OK;
}

/* A jute null string (length -1). ZooKeeper's prep answers MARSHALLINGERROR
 * where it dereferences one (its catch-all for exceptions that are not
 * KeeperExceptions) and BADARGUMENTS where validatePath sees it first. */
static bool str_is_null(struct zk_str s)
{
    return s.len < 0 || (s.ptr == NULL && s.len > 0);
}

static int validate_path(struct zk_str p)
{
    if (p.ptr == NULL || p.len <= 0)
        return ZK_EBADARGUMENTS;
    return zk_path_validate(p.ptr, (size_t)p.len);
}

/* The only path checks ZooKeeper makes before it looks up the parent
 * (validatePathForCreate / getParentPathAndValidate): a '/' somewhere and no
 * NUL. Full validation comes later, so "/a//b" answers NONODE as it does in
 * ZooKeeper. A path not starting with '/' can have no parent here. */
static int check_path_shape(struct zk_str p)
{
    if (p.ptr == NULL || p.len <= 0 || memchr(p.ptr, '/', (size_t)p.len) == NULL ||
        memchr(p.ptr, '\0', (size_t)p.len) != NULL)
        return ZK_EBADARGUMENTS;
    return p.ptr[0] == '/' ? ZK_OK : ZK_ENONODE;
}

/* DataTree.isSpecialPath: nodes ZooKeeper itself owns cannot be deleted. */
static bool is_special_path(struct zk_str p)
{
    static const char *const special[] = { "/", "/zookeeper", "/zookeeper/quota",
                                           "/zookeeper/config" };
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) {
        if ((size_t)p.len == strlen(special[i]) && memcmp(p.ptr, special[i], (size_t)p.len) == 0)
            return true;
    }
    return false;
}

/* PrepRequestProcessor.checkAndIncVersion: -1 matches any version; the new
 * version skips -1 after wrapping so that clients can still name it
 * (ZOOKEEPER-4743). */
static int check_version(int32_t current, int32_t expected, int32_t *next)
{
    if (expected != -1 && expected != current)
        return ZK_EBADVERSION;
    int32_t n = (int32_t)((uint32_t)current + 1u);
    *next = n == -1 ? 0 : n;
    return ZK_OK;
}

static int copy_data(struct zk_str d, struct txn_op *op)
{
    op->data = NULL;
    op->data_len = -1;
    if (d.len < 0 || (d.ptr == NULL && d.len > 0))
        return ZK_OK; /* null data */
    op->data = malloc(d.len > 0 ? (size_t)d.len : 1);
    if (op->data == NULL)
        return ZK_ESYSTEMERROR;
    if (d.len > 0)
        memcpy(op->data, d.ptr, (size_t)d.len);
    op->data_len = d.len;
    return ZK_OK;
}

static char *dup_path(const char *p, size_t len)
{
    char *s = malloc(len + 1);
    if (s != NULL) {
        memcpy(s, p, len);
        s[len] = '\0';
    }
    return s;
}

/* ---- create ------------------------------------------------------------------ */

static bool mode_is_ttl(int32_t mode)
{
    return mode == ZK_PERSISTENT_WITH_TTL || mode == ZK_PERSISTENT_SEQUENTIAL_WITH_TTL;
}

static bool mode_is_sequential(int32_t mode)
{
    return mode == ZK_PERSISTENT_SEQUENTIAL || mode == ZK_EPHEMERAL_SEQUENTIAL ||
           mode == ZK_PERSISTENT_SEQUENTIAL_WITH_TTL;
}

/* CreateMode.fromFlag, then validateCreateRequest: TTL modes need
 * extendedTypesEnabled (UNIMPLEMENTED) and a ttl in (0, MAX_TTL]
 * (BADARGUMENTS). Stock clients send TTL modes only as createTTL and the
 * container mode only as createContainer; a mismatch is BADARGUMENTS here
 * (ZooKeeper would silently create a node of the wrong kind). */
static int check_create_mode(const struct prep_ctx *c, const struct tree_req *r)
{
    const struct zk_create_req *q = &r->u.create;
    int32_t mode = q->flags;
    if (mode < ZK_PERSISTENT || mode > ZK_PERSISTENT_SEQUENTIAL_WITH_TTL)
        return ZK_EBADARGUMENTS;
    bool ttl_enabled = c->cfg != NULL && c->cfg->ttl_enabled;
    if (mode_is_ttl(mode) && !ttl_enabled)
        return ZK_EUNIMPLEMENTED;
    if (r->type == ZK_OP_CREATETTL) {
        if (!mode_is_ttl(mode) || q->ttl <= 0 || q->ttl > TREE_TTL_MAX)
            return ZK_EBADARGUMENTS;
    } else if (mode_is_ttl(mode)) {
        return ZK_EBADARGUMENTS;
    }
    if ((r->type == ZK_OP_CREATECONTAINER) != (mode == ZK_CONTAINER))
        return ZK_EBADARGUMENTS;
    return ZK_OK;
}

/* The path with the sequence suffix ZooKeeper appends: the parent's
 * cversion (count of child creations) before this create, "%010d". */
static char *final_path(struct zk_str p, bool sequential, int32_t parent_cversion)
{
    char *s = malloc((size_t)p.len + SEQ_SUFFIX_MAX);
    if (s == NULL)
        return NULL;
    memcpy(s, p.ptr, (size_t)p.len);
    s[p.len] = '\0';
    if (sequential)
        snprintf(s + p.len, SEQ_SUFFIX_MAX, "%010d", parent_cversion);
    return s;
}

static int64_t create_owner(const struct prep_ctx *c, const struct tree_req *r)
{
    int32_t mode = r->u.create.flags;
    if (mode == ZK_CONTAINER)
        return TREE_OWNER_CONTAINER;
    if (mode_is_ttl(mode))
        return TREE_OWNER_TTL_MASK | r->u.create.ttl;
    if (mode == ZK_EPHEMERAL || mode == ZK_EPHEMERAL_SEQUENTIAL)
        return c->x->session_id;
    return 0;
}

static int record_create(struct prep_ctx *c, struct zk_str p, struct prec *parent,
                         const struct txn_op *op)
{
    size_t plen = tree_parent_len(p.ptr, (size_t)p.len);
    parent->st.cversion = op->parent_cversion;
    parent->st.pzxid = c->x->zxid;
    parent->st.num_children++;
    int err = rec_put(c->t, p.ptr, plen, parent);
    if (err != ZK_OK)
        return err;
    struct prec node = { .exists = true, .acl = op->acl };
    node.st = (struct zk_stat){ .czxid = c->x->zxid, .mzxid = c->x->zxid, .pzxid = c->x->zxid,
                                .ctime = c->x->time_ms, .mtime = c->x->time_ms,
                                .ephemeral_owner = op->ephemeral_owner };
    return rec_put(c->t, op->path, strlen(op->path), &node);
}

/* The part of create after the ACL is fixed up: parent, permission, name,
 * existence, ephemeral parent. On success op owns acl. */
static int create_under_parent(struct prep_ctx *c, const struct tree_req *r, struct tree_acl *acl,
                               struct txn_op *op)
{
    struct zk_str p = r->u.create.path;
    int32_t mode = r->u.create.flags;
    struct prec parent, existing;
    if (!rec_get(c->t, p.ptr, tree_parent_len(p.ptr, (size_t)p.len), &parent))
        return ZK_ENONODE;
    if (!permits(c, parent.acl, ZK_PERM_CREATE))
        return ZK_ENOAUTH;
    char *path = final_path(p, mode_is_sequential(mode), parent.st.cversion);
    if (path == NULL)
        return ZK_ESYSTEMERROR;
    int err = zk_path_validate(path, strlen(path));
    if (err == ZK_OK && rec_get(c->t, path, strlen(path), &existing))
        err = ZK_ENODEEXISTS;
    if (err == ZK_OK && tree_owner_is_session(parent.st.ephemeral_owner))
        err = ZK_ENOCHILDRENFOREPHEMERALS;
    if (err == ZK_OK)
        err = copy_data(r->u.create.data, op);
    if (err != ZK_OK) {
        free(path);
        return err;
    }
    op->type = r->type == ZK_OP_CREATECONTAINER ? TXN_CREATE_CONTAINER
               : r->type == ZK_OP_CREATETTL     ? TXN_CREATE_TTL
                                                : TXN_CREATE;
    op->path = path;
    op->acl = acl;
    op->ephemeral_owner = create_owner(c, r);
    op->parent_cversion = (int32_t)((uint32_t)parent.st.cversion + 1u);
    err = charge_op(c, op);
    if (err == ZK_OK)
        err = record_create(c, p, &parent, op);
    if (err != ZK_OK)
        op->acl = NULL; /* the caller still owns acl */
    return err;
}

static int prep_create(struct prep_ctx *c, const struct tree_req *r, struct txn_op *op)
{
    const struct zk_create_req *q = &r->u.create;
    int err = check_create_mode(c, r);
    if (err != ZK_OK)
        return err;
    bool ephemeral = q->flags == ZK_EPHEMERAL || q->flags == ZK_EPHEMERAL_SEQUENTIAL;
    /* SessionTracker.checkGlobalSession: unknown or closing -> expired */
    if (ephemeral && !session_live(c->t, c->x->session_id))
        return ZK_ESESSIONEXPIRED;
    if (str_is_null(q->path))
        return ZK_EMARSHALLINGERROR; /* validatePathForCreate: path.lastIndexOf NPE */
    err = check_path_shape(q->path);
    if (err != ZK_OK)
        return err;
    struct tree_acl *acl = NULL;
    err = tree_acl_from_request(&q->acl, c->auth, acl_providers(c), &acl);
    if (err != ZK_OK)
        return err;
    err = create_under_parent(c, r, acl, op);
    if (err != ZK_OK) {
        tree_acl_unref(acl);
        tree_txn_op_clear(op);
    }
    return err;
}

/* ---- delete ------------------------------------------------------------------ */

/* Fills a delete op for path and records the node gone and the parent's
 * pzxid/child count. ZooKeeper leaves the parent's stored cversion alone on
 * delete (clients still see it move: see zver_client_stat). */
static int record_delete(struct prep_ctx *c, const char *path, size_t len, struct prec *parent,
                         int32_t client_type, struct txn_op *op)
{
    op->type = TXN_DELETE;
    op->client_type = client_type;
    op->path = dup_path(path, len);
    op->data_len = -1;
    op->parent_cversion = parent->st.cversion;
    if (op->path == NULL)
        return ZK_ESYSTEMERROR;
    int err = charge_op(c, op);
    if (err != ZK_OK)
        return err;
    parent->st.num_children--;
    parent->st.pzxid = c->x->zxid;
    err = rec_put(c->t, path, tree_parent_len(path, len), parent);
    if (err != ZK_OK)
        return err;
    struct prec gone = { .exists = false };
    return rec_put(c->t, path, len, &gone);
}

static int check_delete_path(struct zk_str p)
{
    int err = check_path_shape(p);
    if (err == ZK_OK && is_special_path(p))
        err = ZK_EBADARGUMENTS;
    return err;
}

static int prep_delete(struct prep_ctx *c, const struct tree_req *r, struct txn_op *op)
{
    struct zk_str p = r->u.del.path;
    if (str_is_null(p))
        return ZK_EMARSHALLINGERROR; /* getParentPathAndValidate: NPE */
    int err = check_delete_path(p);
    if (err != ZK_OK)
        return err;
    struct prec parent, node;
    if (!rec_get(c->t, p.ptr, tree_parent_len(p.ptr, (size_t)p.len), &parent))
        return ZK_ENONODE;
    if (!permits(c, parent.acl, ZK_PERM_DELETE))
        return ZK_ENOAUTH;
    if (!rec_get(c->t, p.ptr, (size_t)p.len, &node))
        return ZK_ENONODE;
    int32_t unused = 0;
    err = check_version(node.st.version, r->u.del.version, &unused);
    if (err == ZK_OK && node.st.num_children > 0)
        err = ZK_ENOTEMPTY;
    if (err == ZK_OK)
        err = record_delete(c, p.ptr, (size_t)p.len, &parent, r->type, op);
    return err;
}

/* deleteContainer (the reaper's request): no ACL or session check, so it
 * must not reach anything but containers and TTL nodes: others answer
 * BADVERSION, as newer ZooKeeper does (3.8 would delete an empty persistent
 * node here, bypassing its ACL). A node with children is NOTEMPTY. */
static int prep_delete_container(struct prep_ctx *c, const struct tree_req *r, struct txn_op *op)
{
    struct zk_str p = r->u.path.path;
    int err = check_delete_path(p);
    if (err != ZK_OK)
        return err;
    struct prec parent, node;
    if (!rec_get(c->t, p.ptr, (size_t)p.len, &node))
        return ZK_ENONODE;
    if (node.st.num_children > 0)
        return ZK_ENOTEMPTY;
    if (node.st.ephemeral_owner != TREE_OWNER_CONTAINER &&
        (node.st.ephemeral_owner & TREE_OWNER_TTL_MASK) != TREE_OWNER_TTL_MASK)
        return ZK_EBADVERSION;
    if (!rec_get(c->t, p.ptr, tree_parent_len(p.ptr, (size_t)p.len), &parent))
        return ZK_ENONODE;
    return record_delete(c, p.ptr, (size_t)p.len, &parent, r->type, op);
}

/* ---- setData, setACL, check -------------------------------------------------- */

static int prep_setdata(struct prep_ctx *c, const struct tree_req *r, struct txn_op *op)
{
    const struct zk_setdata_req *q = &r->u.setdata;
    int err = validate_path(q->path);
    if (err != ZK_OK)
        return err;
    struct prec node;
    if (!rec_get(c->t, q->path.ptr, (size_t)q->path.len, &node))
        return ZK_ENONODE;
    if (!permits(c, node.acl, ZK_PERM_WRITE))
        return ZK_ENOAUTH;
    int32_t next = 0;
    err = check_version(node.st.version, q->version, &next);
    if (err != ZK_OK)
        return err;
    op->type = TXN_SETDATA;
    op->version = next;
    err = copy_data(q->data, op);
    if (err == ZK_OK && (op->path = dup_path(q->path.ptr, (size_t)q->path.len)) == NULL)
        err = ZK_ESYSTEMERROR;
    if (err == ZK_OK)
        err = charge_op(c, op);
    if (err == ZK_OK) {
        node.st.version = next;
        node.st.mzxid = c->x->zxid;
        node.st.mtime = c->x->time_ms;
        err = rec_put(c->t, op->path, (size_t)q->path.len, &node);
    }
    if (err != ZK_OK)
        tree_txn_op_clear(op);
    return err;
}

static int setacl_on_node(struct prep_ctx *c, const struct zk_setacl_req *q, struct tree_acl *acl,
                          struct txn_op *op)
{
    struct prec node;
    if (!rec_get(c->t, q->path.ptr, (size_t)q->path.len, &node))
        return ZK_ENONODE;
    if (!permits(c, node.acl, ZK_PERM_ADMIN))
        return ZK_ENOAUTH;
    int32_t next = 0;
    int err = check_version(node.st.aversion, q->version, &next);
    if (err != ZK_OK)
        return err;
    op->path = dup_path(q->path.ptr, (size_t)q->path.len);
    if (op->path == NULL)
        return ZK_ESYSTEMERROR;
    op->type = TXN_SETACL;
    op->data_len = -1;
    op->version = next;
    op->acl = acl;
    err = charge_op(c, op);
    if (err == ZK_OK) {
        node.st.aversion = next;
        node.acl = acl;
        err = rec_put(c->t, op->path, (size_t)q->path.len, &node);
    }
    if (err != ZK_OK)
        op->acl = NULL; /* the caller still owns acl */
    return err;
}

static int prep_setacl(struct prep_ctx *c, const struct tree_req *r, struct txn_op *op)
{
    const struct zk_setacl_req *q = &r->u.setacl;
    int err = validate_path(q->path);
    if (err != ZK_OK)
        return err;
    struct tree_acl *acl = NULL;
    err = tree_acl_from_request(&q->acl, c->auth, acl_providers(c), &acl);
    if (err != ZK_OK)
        return err;
    err = setacl_on_node(c, q, acl, op);
    if (err != ZK_OK) {
        tree_acl_unref(acl);
        tree_txn_op_clear(op);
    }
    return err;
}

/* check (standalone or in a multi): existence, READ permission, version. */
static int prep_check(struct prep_ctx *c, const struct tree_req *r, struct txn_op *op)
{
    struct zk_str p = r->u.del.path;
    int err = validate_path(p);
    if (err != ZK_OK)
        return err;
    struct prec node;
    if (!rec_get(c->t, p.ptr, (size_t)p.len, &node))
        return ZK_ENONODE;
    if (!permits(c, node.acl, ZK_PERM_READ))
        return ZK_ENOAUTH;
    int32_t unused = 0;
    err = check_version(node.st.version, r->u.del.version, &unused);
    if (err != ZK_OK)
        return err;
    op->type = TXN_CHECK;
    op->data_len = -1;
    op->version = node.st.version;
    op->path = dup_path(p.ptr, (size_t)p.len);
    return op->path != NULL ? charge_op(c, op) : ZK_ESYSTEMERROR;
}

/* One op that may appear alone or inside a multi. */
static int prep_op(struct prep_ctx *c, const struct tree_req *r, struct txn_op *op)
{
    *op = (struct txn_op){ .client_type = r->type, .data_len = -1 };
    switch (r->type) {
    case ZK_OP_CREATE:
    case ZK_OP_CREATE2:
    case ZK_OP_CREATECONTAINER:
    case ZK_OP_CREATETTL:
        return prep_create(c, r, op);
    case ZK_OP_DELETE:
        return prep_delete(c, r, op);
    case ZK_OP_SETDATA:
        return prep_setdata(c, r, op);
    case ZK_OP_CHECK:
        return prep_check(c, r, op);
    case ZK_OP_SETACL:
        return prep_setacl(c, r, op);
    case ZK_OP_DELETECONTAINER:
        return prep_delete_container(c, r, op);
    default:
        return ZK_EUNIMPLEMENTED;
    }
}

/* ---- multi -------------------------------------------------------------------- */

/* The op kinds ZooKeeper's MultiOperationRecord accepts in a write multi.
 * Anything else fails the whole request before any op is prepared
 * (ZooKeeper: IOException -> MARSHALLINGERROR). */
static bool multi_op_allowed(int32_t type)
{
    switch (type) {
    case ZK_OP_CREATE:
    case ZK_OP_CREATE2:
    case ZK_OP_CREATECONTAINER:
    case ZK_OP_CREATETTL:
    case ZK_OP_DELETE:
    case ZK_OP_SETDATA:
    case ZK_OP_CHECK:
        return true;
    default:
        return false;
    }
}

/* Turns every op into an ErrorTxn: ZK_OK before the failing op, its error
 * at it, RUNTIMEINCONSISTENCY after it (PrepRequestProcessor's multi). */
static void multi_fail(struct txn *x, const struct tree_req *r, uint32_t failed, int err)
{
    for (uint32_t i = 0; i < x->nops; i++) {
        tree_txn_op_clear(&x->ops[i]);
        int32_t e = i < failed ? ZK_OK : i == failed ? err : ZK_ERUNTIMEINCONSISTENCY;
        x->ops[i] = (struct txn_op){ .type = TXN_ERROR, .client_type = r->ops[i].type,
                                     .data_len = -1, .err = e };
    }
}

/* The path of an op that may appear in a multi. */
static struct zk_str multi_op_path(const struct tree_req *r)
{
    switch (r->type) {
    case ZK_OP_CREATE:
    case ZK_OP_CREATE2:
    case ZK_OP_CREATECONTAINER:
    case ZK_OP_CREATETTL:
        return r->u.create.path;
    case ZK_OP_SETDATA:
        return r->u.setdata.path;
    default: /* delete, check */
        return r->u.del.path;
    }
}

/* Frees whatever ops were prepared: the request fails as a whole. */
static void multi_abort(struct txn *x)
{
    for (uint32_t i = 0; i < x->nops; i++)
        tree_txn_op_clear(&x->ops[i]);
    free(x->ops);
    x->ops = NULL;
    x->nops = 0;
}

/* Whole-request checks before any op is prepared: op kinds a write multi
 * may hold, and no null path (ZooKeeper's getPendingChanges walks every
 * op's path first and throws on a null one). Both MARSHALLINGERROR. */
static int multi_precheck(const struct tree_req *r)
{
    if (r->nops > TREE_MULTI_OPS_MAX || (r->nops > 0 && r->ops == NULL))
        return ZK_EMARSHALLINGERROR;
    for (uint32_t i = 0; i < r->nops; i++) {
        if (!multi_op_allowed(r->ops[i].type) || str_is_null(multi_op_path(&r->ops[i])))
            return ZK_EMARSHALLINGERROR;
    }
    return ZK_OK;
}

static int prep_multi(struct prep_ctx *c, const struct tree_req *r, struct txn *x)
{
    int err = multi_precheck(r);
    if (err != ZK_OK)
        return err;
    x->type = TXN_MULTI;
    if (r->nops == 0)
        return ZK_OK;
    x->ops = calloc(r->nops, sizeof *x->ops);
    if (x->ops == NULL)
        return ZK_ESYSTEMERROR;
    x->nops = r->nops;
    for (uint32_t i = 0; i < r->nops; i++) {
        err = prep_op(c, &r->ops[i], &x->ops[i]);
        if (err == ZK_OK)
            continue;
        undo_rollback(c->t);
        /* MARSHALLINGERROR stands for an exception ZooKeeper's multi loop
         * does not catch per op (a null dereference): the request fails as
         * a whole, with no per-op results. Any other error is the op's. */
        if (err == ZK_EMARSHALLINGERROR)
            multi_abort(x);
        else
            multi_fail(x, r, i, err);
        return err;
    }
    return ZK_OK;
}

/* ---- sessions --------------------------------------------------------------- */

static int prep_create_session(struct prep_ctx *c, const struct tree_req *r, struct txn *x)
{
    x->ops = calloc(1, sizeof *x->ops);
    if (x->ops == NULL)
        return ZK_ESYSTEMERROR;
    x->nops = 1;
    x->type = TXN_CREATE_SESSION;
    x->ops[0] = (struct txn_op){ .type = TXN_CREATE_SESSION, .client_type = r->type,
                                 .data_len = -1, .timeout_ms = r->u.session.timeout_ms,
                                 .passwd_known = true };
    memcpy(x->ops[0].passwd, r->u.session.passwd, TREE_PASSWD_BYTES);
    int err = charge_op(c, &x->ops[0]);
    return err == ZK_OK ? set_pending_session(c->t, x->session_id, PS_LIVE) : err;
}

/* The paths the session will own once the pending changes are applied:
 * the tree's set, plus pending ephemeral creates, minus pending deletes (as
 * ZooKeeper walks outstandingChanges in closeSession). */
static int collect_ephemerals(const struct tree *t, int64_t id, struct tmap *out)
{
    const struct tmap *owned = tree_owned_paths(t, id);
    for (size_t i = 0; owned != NULL && i < owned->cap; i++) {
        const struct tmap_ent *e = &owned->slots[i];
        if (e->key != NULL && tmap_put(out, e->key, e->len, NULL, NULL) != 0)
            return ZK_ESYSTEMERROR;
    }
    for (size_t i = 0; i < t->pending.cap; i++) {
        const struct tmap_ent *e = &t->pending.slots[i];
        if (e->key == NULL)
            continue;
        const struct prec *p = e->val;
        if (!p->exists)
            tmap_del(out, e->key, e->len, NULL);
        else if (p->st.ephemeral_owner == id && tmap_put(out, e->key, e->len, NULL, NULL) != 0)
            return ZK_ESYSTEMERROR;
    }
    return ZK_OK;
}

/* ops[0] closes the session, ops[1..] delete its ephemerals (sorted, so the
 * txn and its events are the same on every server). */
static int close_session_ops(struct prep_ctx *c, const struct tree_req *r, struct txn *x,
                             const char **paths, size_t n)
{
    x->ops = calloc(n + 1, sizeof *x->ops);
    if (x->ops == NULL)
        return ZK_ESYSTEMERROR;
    x->nops = (uint32_t)(n + 1);
    x->type = TXN_CLOSE_SESSION;
    x->ops[0] = (struct txn_op){ .type = TXN_CLOSE_SESSION, .client_type = r->type,
                                 .data_len = -1 };
    int err = charge_op(c, &x->ops[0]);
    for (size_t i = 0; err == ZK_OK && i < n; i++) {
        size_t len = strlen(paths[i]);
        struct prec parent;
        if (!rec_get(c->t, paths[i], tree_parent_len(paths[i], len), &parent))
            return ZK_ERUNTIMEINCONSISTENCY; /* an ephemeral always has a parent */
        err = record_delete(c, paths[i], len, &parent, r->type, &x->ops[i + 1]);
    }
    return err;
}

static int prep_close_session(struct prep_ctx *c, const struct tree_req *r, struct txn *x)
{
    if (!session_live(c->t, x->session_id))
        return ZK_ESESSIONEXPIRED;
    struct tmap eph = { 0 };
    int err = collect_ephemerals(c->t, x->session_id, &eph);
    size_t n = 0;
    bool oom = false;
    const char **paths = err == ZK_OK ? tmap_sorted_keys(&eph, &n, &oom) : NULL;
    if (err == ZK_OK && oom)
        err = ZK_ESYSTEMERROR;
    if (err == ZK_OK)
        err = close_session_ops(c, r, x, paths, n);
    if (err == ZK_OK)
        err = set_pending_session(c->t, x->session_id, PS_CLOSED);
    free(paths);
    tmap_clear(&eph, NULL);
    if (err == ZK_OK) {
        /* later requests of the batch must see the session as closing */
        struct sess *s = tree_sess_lookup(c->t, x->session_id);
        if (s != NULL)
            s->pub.closing = true;
    }
    return err;
}

/* ---- entry points -------------------------------------------------------------- */

static int prep_dispatch(struct prep_ctx *c, const struct tree_req *req, struct txn *x)
{
    switch (req->type) {
    case ZK_OP_MULTI:
        return prep_multi(c, req, x);
    case ZK_OP_CREATESESSION:
        return prep_create_session(c, req, x);
    case ZK_OP_CLOSESESSION:
        return prep_close_session(c, req, x);
    default:
        break;
    }
    x->ops = calloc(1, sizeof *x->ops);
    if (x->ops == NULL)
        return ZK_ESYSTEMERROR;
    x->nops = 1;
    int err = prep_op(c, req, &x->ops[0]);
    x->type = x->ops[0].type;
    return err;
}

int tree_prep(struct tree *t, const struct tree_prep_cfg *cfg, const struct tree_req *req,
              const struct tree_auth *auth, struct txn *x)
{
    struct prep_ctx c = { .t = t, .cfg = cfg, .auth = auth, .x = x };
    x->ops = NULL;
    x->nops = 0;
    x->type = req->type;
    rcu_read_lock();
    int err = prep_dispatch(&c, req, x);
    tree_read_unlock();
    if (err == ZK_OK) {
        undo_commit(t);
        return ZK_OK;
    }
    undo_rollback(t);
    /* a failed multi keeps its ErrorTxn ops (they are logged and applied);
     * anything else leaves nothing to apply */
    bool failed_multi = req->type == ZK_OP_MULTI && x->nops > 0 && x->ops[0].type == TXN_ERROR;
    if (!failed_multi) {
        txn_free(x);
        x->type = TXN_ERROR;
    }
    return err;
}

static void reopen_dropped_sessions(struct tree *t)
{
    for (size_t i = 0; i < t->pending_sessions.cap; i++) {
        const struct tmap_ent *e = &t->pending_sessions.slots[i];
        if (e->key == NULL || (intptr_t)e->val != PS_CLOSED)
            continue;
        int64_t id;
        memcpy(&id, e->key, sizeof id);
        /* still present: its closeSession was dropped, not applied */
        struct sess *s = tree_sess_lookup(t, id);
        if (s != NULL)
            s->pub.closing = false;
    }
}

void tree_prep_reset(struct tree *t)
{
    rcu_read_lock();
    reopen_dropped_sessions(t);
    tree_read_unlock();
    tmap_clear(&t->pending_sessions, NULL);
    tmap_clear(&t->pending, prec_free);
}

void tree_pending_free(struct tree *t)
{
    undo_rollback(t);
    free(t->undo);
    t->undo = NULL;
    t->undo_cap = 0;
    tree_prep_reset(t);
}
