/*
 * reads.c — requests a worker answers itself from the RCU tree: exists,
 * getData, getChildren(2), getACL, getAllChildrenNumber, multiRead, whoAmI,
 * ping, and the watch operations (addWatch, setWatches(2), check/removeWatches).
 *
 * Every handler runs between rcu_read_lock and rcu_read_unlock, builds its
 * reply in the worker's scratch buffer, and registers any watch before it
 * leaves the read-side section, with the zxid of the state it observed
 * (DESIGN.md invariant 3). The reply is queued after worker_wait_events has
 * delivered every event the lookup could have seen.
 */
#include "dataplane/dp_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <urcu.h>

#define CONFIG_NODE "/zookeeper/config"

/* State of one read while it is being served. */
struct rd {
    struct conn *c; /* NULL: a UDP read (udp.c), which sets no watch */
    struct zk_wbuf *out;
    const struct tree *t;
    struct tree_auth auth;   /* whose identity the read has */
    const char *config_node; /* dp_cfg's: what /zookeeper/config reads as */
    int64_t config_mtime;
    int64_t before_zxid; /* tree_last_zxid before the lookup */
    int64_t fence_zxid;  /* the oldest view a watch set here was registered with */
};

/* Paths arrive as jute strings; the tree wants (ptr, len). As ZooKeeper
 * answers: a null path is a marshalling error (the connection stays); ""
 * reads the root, since DataTree keeps the root under "" as well as "/" (a
 * watch set on "" is kept and never fires, there too); a NUL inside a path
 * names no node. */
static int lookup(const struct rd *r, struct zk_str p, struct tree_view *v)
{
    if (p.len < 0)
        return ZK_EMARSHALLINGERROR;
    if (p.len == 0)
        return tree_get(r->t, "/", 1, v);
    if (memchr(p.ptr, '\0', (size_t)p.len) != NULL)
        return ZK_ENONODE;
    int rc = tree_get(r->t, p.ptr, (size_t)p.len, v);
    const char *membership = r->config_node;
    if (rc == ZK_OK && membership && v->stat.mzxid == 0 &&
        p.len == (int32_t)strlen(CONFIG_NODE) &&
        memcmp(p.ptr, CONFIG_NODE, strlen(CONFIG_NODE)) == 0) {
        /* as each ZooKeeper server sets this node from its own quorum
         * verifier, outside the txn log (a setData with version -1 at
         * startup): the tree's copy stays empty, so the digest and
         * snapshots do not depend on how a member names the others. Once
         * a reconfig committed, the tree holds the text its txn set. */
        v->data = (const uint8_t *)membership;
        v->data_len = (int32_t)strlen(membership);
        v->stat.data_length = v->data_len;
        v->stat.version = -1;
        v->stat.mtime = r->config_mtime;
    }
    return rc;
}

/* A path a watch may be registered on (see lookup). */
static bool path_ok(struct zk_str p)
{
    return p.len >= 0 && (p.len == 0 || memchr(p.ptr, '\0', (size_t)p.len) == NULL);
}

static void add_watch(struct rd *r, struct zk_str path, enum watch_kind kind, int64_t seen)
{
    struct worker *w = r->c->w;
    pthread_mutex_lock(&w->watch_lock);
    /* Out of memory leaves the watch unset: the read still answers, as a
     * ZooKeeper server under memory pressure would (no error code exists). */
    (void)watch_add(w->wt, path.ptr, (size_t)path.len, kind, r->c->token, seen);
    atomic_store_explicit(&w->nwatches, watch_count(w->wt), memory_order_relaxed);
    pthread_mutex_unlock(&w->watch_lock);
    if (seen < r->fence_zxid)
        r->fence_zxid = seen;
}

/* ---- single reads: each writes its response body, returns the error code ---- */

static int read_exists(struct rd *r, struct base_rd *in)
{
    struct zk_path_watch_req q;
    if (!zk_get_path_watch_req(in, &q))
        return ZK_EMARSHALLINGERROR;
    if (q.watch && !r->c)
        return DP_READ_TCP_ONLY;
    if (q.path.len > 0 && memchr(q.path.ptr, '\0', (size_t)q.path.len))
        return ZK_EBADARGUMENTS; /* exists alone validates (ZooKeeper's answer) */
    struct tree_view v;
    int rc = lookup(r, q.path, &v);
    if (rc == ZK_OK) {
        if (q.watch)
            add_watch(r, q.path, WATCH_DATA, v.stat.mzxid);
        zk_put_stat(r->out, &v.stat);
    } else if (rc == ZK_ENONODE && q.watch) {
        add_watch(r, q.path, WATCH_EXIST, r->before_zxid);
    }
    return rc;
}

static int lookup_readable(struct rd *r, struct zk_str path, struct tree_view *v)
{
    int rc = lookup(r, path, v);
    if (rc != ZK_OK)
        return rc;
    return tree_acl_permits(v->acl, ZK_PERM_READ, &r->auth) ? ZK_OK : ZK_ENOAUTH;
}

static int get_data_body(struct rd *r, struct zk_path_watch_req *q)
{
    if (q->watch && !r->c)
        return DP_READ_TCP_ONLY;
    struct tree_view v;
    int rc = lookup_readable(r, q->path, &v);
    if (rc != ZK_OK)
        return rc;
    if (q->watch)
        add_watch(r, q->path, WATCH_DATA, v.stat.mzxid);
    zk_put_bytes(r->out, v.data, v.data_len);
    zk_put_stat(r->out, &v.stat);
    return ZK_OK;
}

static int read_get_data(struct rd *r, struct base_rd *in)
{
    struct zk_path_watch_req q;
    if (!zk_get_path_watch_req(in, &q))
        return ZK_EMARSHALLINGERROR;
    return get_data_body(r, &q);
}

struct child_list {
    struct zk_wbuf *out;
    int32_t count;
};

static void put_child(void *arg, const char *name, size_t len)
{
    struct child_list *l = arg;
    zk_put_bytes(l->out, name, (int32_t)len);
    l->count++;
}

static void patch_i32(struct zk_wbuf *w, size_t at, int32_t v)
{
    if (w->err)
        return;
    base_put_be32(w->p + at, (uint32_t)v);
}

/* Writes the children vector (and the stat for getChildren2). The ACL check
 * needs the node's version, so the listing is taken first and dropped again
 * on NOAUTH: both come from one version of the node. */
static int get_children_body(struct rd *r, struct zk_path_watch_req *q, bool with_stat)
{
    if (q->path.len < 0)
        return ZK_EMARSHALLINGERROR;
    if (q->watch && !r->c)
        return DP_READ_TCP_ONLY;
    if (!path_ok(q->path))
        return ZK_ENONODE;
    struct zk_str p = q->path.len == 0 ? zk_str_c("/") : q->path; /* see lookup */
    size_t count_at = r->out->len;
    zk_put_i32(r->out, 0);
    struct child_list l = { .out = r->out, .count = 0 };
    struct tree_view v;
    int rc = tree_get_children(r->t, p.ptr, (size_t)p.len, &v, put_child, &l);
    if (rc != ZK_OK) {
        r->out->len = count_at;
        return rc;
    }
    if (!tree_acl_permits(v.acl, ZK_PERM_READ, &r->auth)) {
        r->out->len = count_at;
        return ZK_ENOAUTH;
    }
    patch_i32(r->out, count_at, l.count);
    if (with_stat)
        zk_put_stat(r->out, &v.stat);
    if (q->watch)
        add_watch(r, q->path, WATCH_CHILD, v.stat.pzxid);
    return ZK_OK;
}

static int read_get_children(struct rd *r, struct base_rd *in, bool with_stat)
{
    struct zk_path_watch_req q;
    if (!zk_get_path_watch_req(in, &q))
        return ZK_EMARSHALLINGERROR;
    return get_children_body(r, &q, with_stat);
}

/* ZooKeeper's getACL: READ or ADMIN may read the ACL; without ADMIN the
 * digest hashes are masked as "user:x" (ZOOKEEPER-1392). */
static int read_get_acl(struct rd *r, struct base_rd *in)
{
    struct zk_path_req q;
    if (!zk_get_path_req(in, &q))
        return ZK_EMARSHALLINGERROR;
    struct tree_view v;
    int rc = lookup(r, q.path, &v);
    if (rc != ZK_OK)
        return rc;
    if (!tree_acl_permits(v.acl, ZK_PERM_READ | ZK_PERM_ADMIN, &r->auth))
        return ZK_ENOAUTH;
    if (tree_acl_permits(v.acl, ZK_PERM_ADMIN, &r->auth) || !v.acl) {
        tree_acl_put(r->out, v.acl);
    } else {
        zk_put_i32(r->out, v.acl->count);
        for (int32_t i = 0; i < v.acl->count; i++) {
            const struct tree_acl_entry *e = &v.acl->items[i];
            zk_put_i32(r->out, e->perms);
            zk_put_str(r->out, zk_str_c(e->scheme));
            const char *colon = strchr(e->id, ':');
            if (strcmp(e->scheme, "digest") == 0 && colon) {
                int32_t user = (int32_t)(colon - e->id);
                zk_put_i32(r->out, user + 2); /* "user:x", written in place */
                zk_put_raw(r->out, e->id, (size_t)user);
                zk_put_raw(r->out, ":x", 2);
            } else {
                zk_put_str(r->out, zk_str_c(e->id));
            }
        }
    }
    zk_put_stat(r->out, &v.stat);
    return ZK_OK;
}

static int read_all_children_number(struct rd *r, struct base_rd *in)
{
    struct zk_path_req q;
    if (!zk_get_path_req(in, &q))
        return ZK_EMARSHALLINGERROR;
    struct tree_view v;
    int rc = lookup_readable(r, q.path, &v);
    if (rc != ZK_OK)
        return rc;
    /* ZooKeeper counts the keys under path + "/": for "" that is every node
     * but the "" entry itself, the root's count plus one. */
    bool root_alias = q.path.len == 0;
    int64_t n = 0;
    rc = tree_count_descendants(r->t, root_alias ? "/" : q.path.ptr, root_alias ? 1 : (size_t)q.path.len, &n);
    if (rc != ZK_OK)
        return rc;
    n += root_alias;
    zk_put_i32(r->out, n > INT32_MAX ? INT32_MAX : (int32_t)n);
    return ZK_OK;
}

/* WhoAmIResponse: the connection's identities, the ip one first, as
 * ZooKeeper lists its authInfo, each id as its provider's getUserName
 * gives it (AuthUtil.getClientInfos): digest ids show the user name only,
 * x509 ids the whole subject, sasl ids their whole name ("" without
 * SASLAuthenticationProvider: no provider, no user), and "super", which
 * has no provider, an empty name. */
static int read_whoami(struct rd *r)
{
    struct conn *c = r->c;
    zk_put_i32(r->out, 1 + c->nauth);
    zk_put_str(r->out, zk_str_c("ip"));
    zk_put_str(r->out, zk_str_c(c->peer_ip));
    for (int32_t i = 0; i < c->nauth; i++) {
        const char *scheme = c->auth[i].scheme, *id = c->auth[i].id;
        size_t len = strlen(id);
        if (strcmp(scheme, "digest") == 0 && strchr(id, ':') != NULL)
            len = (size_t)(strchr(id, ':') - id);
        else if (strcmp(scheme, "super") == 0 ||
                 (strcmp(scheme, "sasl") == 0 && !c->w->dp->cfg.sasl_provider))
            len = 0;
        zk_put_str(r->out, zk_str_c(scheme));
        zk_put_bytes(r->out, id, (int32_t)len);
    }
    return ZK_OK;
}

static int read_add_watch(struct rd *r, struct base_rd *in)
{
    struct zk_path_mode_req q;
    if (!zk_get_path_mode_req(in, &q))
        return ZK_EMARSHALLINGERROR;
    /* ZooKeeper takes a null or empty path and answers OK (a watch on ""
     * never fires); other paths must be valid. */
    if (q.path.len > 0 && zk_path_validate(q.path.ptr, (size_t)q.path.len) != ZK_OK)
        return ZK_EBADARGUMENTS;
    if (q.mode != ZK_ADD_WATCH_PERSISTENT && q.mode != ZK_ADD_WATCH_PERSISTENT_RECURSIVE)
        return ZK_EBADARGUMENTS;
    if (q.path.len >= 0)
        add_watch(r, q.path, q.mode == ZK_ADD_WATCH_PERSISTENT ? WATCH_PERSISTENT : WATCH_PERSISTENT_RECURSIVE,
                  r->before_zxid);
    zk_put_i32(r->out, 0); /* ErrorResponse(0), as ZooKeeper answers addWatch */
    return ZK_OK;
}

static int read_remove_watches(struct rd *r, struct base_rd *in, bool remove)
{
    struct zk_path_mode_req q;
    if (!zk_get_path_mode_req(in, &q))
        return ZK_EMARSHALLINGERROR;
    if (q.path.len < 0) /* ZooKeeper's answers to a null path */
        return remove ? ZK_ENOWATCHER : ZK_EMARSHALLINGERROR;
    if (q.path.len == 0 && !remove)
        return ZK_ENOWATCHER; /* ZooKeeper never finds a watch on "" to check */
    if (q.mode != ZK_WATCHER_CHILDREN && q.mode != ZK_WATCHER_DATA && q.mode != ZK_WATCHER_ANY)
        return ZK_EBADARGUMENTS;
    struct worker *w = r->c->w;
    pthread_mutex_lock(&w->watch_lock);
    int rc = watch_remove(w->wt, q.path.ptr, (size_t)q.path.len, r->c->token, q.mode, remove, NULL, NULL);
    atomic_store_explicit(&w->nwatches, watch_count(w->wt), memory_order_relaxed);
    pthread_mutex_unlock(&w->watch_lock);
    return rc;
}

/* ---- setWatches: re-arm after a reconnect (DataTree.setWatches) ---------- */

/* One path of a setWatches list: fire now for a change the client missed
 * while it was disconnected (relative to its last zxid rel), else re-arm the
 * watch with the state observed now. Persistent kinds are re-armed as is. */
static void setw_one(struct rd *r, struct zk_str p, enum watch_kind kind, int64_t rel)
{
    struct tree_view tv = { 0 };
    bool exists = lookup(r, p, &tv) == ZK_OK;
    int32_t fire = 0;
    int64_t seen = r->before_zxid;
    switch (kind) {
    case WATCH_DATA:
        fire = !exists ? ZK_EVENT_DELETED : tv.stat.mzxid > rel ? ZK_EVENT_DATA_CHANGED : 0;
        seen = tv.stat.mzxid;
        break;
    case WATCH_EXIST:
        fire = exists ? ZK_EVENT_CREATED : 0;
        break;
    case WATCH_CHILD:
        fire = !exists ? ZK_EVENT_DELETED : tv.stat.pzxid > rel ? ZK_EVENT_CHILD_CHANGED : 0;
        seen = tv.stat.pzxid;
        break;
    case WATCH_PERSISTENT:
    case WATCH_PERSISTENT_RECURSIVE:
        break;
    }
    if (fire) {
        /* READ on the node is needed to hear of it (ZooKeeper's setWatches
         * passes the node's ACL); a deletion names a node that is gone. */
        conn_send_event(r->c, fire, p, exists ? tv.acl : NULL);
    } else if (path_ok(p)) {
        add_watch(r, p, kind, seen);
    }
}

static void setw_list(struct rd *r, const struct zk_strvec *v, enum watch_kind kind, int64_t rel)
{
    for (int32_t i = 0; i < v->count; i++)
        setw_one(r, v->items[i], kind, rel);
}

static bool has_null(const struct zk_strvec *v)
{
    if (v->count < 0)
        return true; /* a null list */
    for (int32_t i = 0; i < v->count; i++)
        if (v->items[i].len < 0)
            return true;
    return false;
}

/* A null list, or a null path in the data, exist or child list, is
 * ZooKeeper's marshalling error, before anything is armed; a null path in
 * the persistent lists is skipped. */
static int read_set_watches(struct rd *r, struct base_rd *in, bool v2)
{
    struct zk_setwatches_req q;
    if (!zk_get_setwatches_req(in, &q, v2))
        return ZK_EMARSHALLINGERROR;
    if (has_null(&q.data) || has_null(&q.exist) || has_null(&q.child)) {
        zk_setwatches_req_free(&q);
        return ZK_EMARSHALLINGERROR;
    }
    setw_list(r, &q.data, WATCH_DATA, q.relative_zxid);
    setw_list(r, &q.exist, WATCH_EXIST, q.relative_zxid);
    setw_list(r, &q.child, WATCH_CHILD, q.relative_zxid);
    setw_list(r, &q.persistent, WATCH_PERSISTENT, q.relative_zxid);
    setw_list(r, &q.persistent_recursive, WATCH_PERSISTENT_RECURSIVE, q.relative_zxid);
    zk_setwatches_req_free(&q);
    return ZK_OK;
}

/* ---- multiRead: getData/getChildren sub-ops, each answered on its own ---- */

static int read_multi(struct rd *r, struct base_rd *in)
{
    for (int n = 0;; n++) {
        struct zk_multi_header h;
        if (!zk_get_multi_header(in, &h) || n > TREE_MULTI_OPS_MAX)
            return ZK_EMARSHALLINGERROR;
        if (h.done)
            break;
        struct zk_path_watch_req q;
        if ((h.type != ZK_OP_GETDATA && h.type != ZK_OP_GETCHILDREN) || !zk_get_path_watch_req(in, &q) ||
            q.path.len < 0)
            return ZK_EMARSHALLINGERROR; /* the whole request, as ZooKeeper answers */
        size_t hdr_at = r->out->len;
        struct zk_multi_header oh = { .type = h.type, .done = false, .err = 0 };
        zk_put_multi_header(r->out, &oh);
        int rc = h.type == ZK_OP_GETDATA ? get_data_body(r, &q) : get_children_body(r, &q, false);
        if (rc == DP_READ_TCP_ONLY)
            return rc;
        if (rc != ZK_OK) {
            r->out->len = hdr_at;
            struct zk_multi_header eh = { .type = ZK_OP_ERROR, .done = false, .err = rc };
            zk_put_multi_header(r->out, &eh);
            zk_put_i32(r->out, rc);
        }
    }
    zk_put_multi_end(r->out);
    return ZK_OK;
}

static int serve(struct rd *r, int32_t op, struct base_rd *in)
{
    switch (op) {
    case ZK_OP_PING:
        return ZK_OK;
    case ZK_OP_EXISTS:
        return read_exists(r, in);
    case ZK_OP_GETDATA:
        return read_get_data(r, in);
    case ZK_OP_GETCHILDREN:
        return read_get_children(r, in, false);
    case ZK_OP_GETCHILDREN2:
        return read_get_children(r, in, true);
    case ZK_OP_GETACL:
        return read_get_acl(r, in);
    case ZK_OP_GETALLCHILDRENNUMBER:
        return read_all_children_number(r, in);
    case ZK_OP_WHOAMI:
        return read_whoami(r);
    case ZK_OP_ADDWATCH:
        return read_add_watch(r, in);
    case ZK_OP_CHECKWATCHES:
        return read_remove_watches(r, in, false);
    case ZK_OP_REMOVEWATCHES:
        return read_remove_watches(r, in, true);
    case ZK_OP_SETWATCHES:
        return read_set_watches(r, in, false);
    case ZK_OP_SETWATCHES2:
        return read_set_watches(r, in, true);
    case ZK_OP_MULTIREAD:
        return read_multi(r, in);
    default:
        return -1;
    }
}

static void patch_reply_header(struct zk_wbuf *w, size_t at, int32_t xid, int64_t zxid, int32_t err)
{
    if (w->err)
        return;
    base_put_be32(w->p + at, (uint32_t)xid);
    base_put_be64(w->p + at + 4, (uint64_t)zxid);
    base_put_be32(w->p + at + 12, (uint32_t)err);
}

bool dp_serve_read(struct conn *c, int32_t xid, int32_t op, const uint8_t *body, size_t len,
                   int64_t arrived_us)
{
    struct worker *w = c->w;
    /* Invariant 3 only constrains a reply when this worker already held
     * watches: one of them may have an event pending that the lookup could
     * observe, and the reply must wait behind it (built in scratch). A watch
     * this read registers fires only for txns newer than what the reply
     * shows, so without earlier watches the reply is encoded straight into
     * the connection's output. setWatches emits notifications while it runs,
     * so it always uses scratch. */
    bool had_watches = atomic_load_explicit(&w->nwatches, memory_order_relaxed) > 0;
    bool direct = !had_watches && op != ZK_OP_SETWATCHES && op != ZK_OP_SETWATCHES2;
    struct zk_wbuf *out = direct ? &c->out : &w->scratch;
    if (!direct)
        zk_wbuf_reset(out);
    size_t mark = zk_frame_begin(out);
    size_t hdr_at = out->len;
    struct zk_reply_header ph = { 0 };
    zk_put_reply_header(out, &ph);
    size_t body_at = out->len;
    struct base_rd in;
    base_rd_init(&in, body, len);
    struct rd r = { .c = c, .out = out, .t = w->dp->tree, .auth = conn_auth(c),
                    .config_node = w->dp->cfg.config_node,
                    .config_mtime = w->dp->cfg.config_node_mtime, .fence_zxid = INT64_MAX };

    rcu_read_lock();
    r.before_zxid = tree_last_zxid(r.t);
    int rc = serve(&r, op, &in);
    int64_t zxid = tree_last_zxid(r.t);
    rcu_read_unlock();
    if (rc == -1)
        return false;
    if (rc != ZK_OK) {
        out->len = body_at; /* an error reply carries the header only ... */
        if (op == ZK_OP_MULTIREAD)
            zk_put_multi_end(out); /* ... but a multi's has an empty MultiResponse */
    }
    if (op == ZK_OP_PING)
        xid = ZK_XID_PING;
    else if (op == ZK_OP_SETWATCHES || op == ZK_OP_SETWATCHES2)
        xid = ZK_XID_SETWATCHES;
    patch_reply_header(out, hdr_at, xid, zxid, rc);
    zk_frame_end(out, mark);

    if (direct) {
        conn_frame_added(c);
    } else {
        /* Events the lookup may have observed go out first. The applying
         * zxid is read after the lookup (seq_cst), so it bounds what it saw.
         * Events newer than a watch this read set wait behind the reply:
         * the client registers the watch when the reply arrives, and a
         * notification before it would be dropped (and the watch spent). */
        if (had_watches) {
            c->fence_zxid = r.fence_zxid;
            worker_wait_events(w, seq_applying_zxid(w->dp->seq));
        }
        conn_queue_reply(c, out);
        zk_wbuf_reset(out);
        conn_fence_release(c);
    }
    atomic_store_explicit(&c->last_zxid, zxid, memory_order_relaxed);
    if (op != ZK_OP_PING)
        conn_note_latency(c, arrived_us);
    return true;
}

int dp_read_plain(const struct dp *dp, const struct tree_auth *auth, int32_t op,
                  struct base_rd *in, struct zk_wbuf *out)
{
    switch (op) {
    case ZK_OP_EXISTS:
    case ZK_OP_GETDATA:
    case ZK_OP_GETCHILDREN:
    case ZK_OP_GETCHILDREN2:
    case ZK_OP_GETALLCHILDRENNUMBER:
    case ZK_OP_MULTIREAD:
        break;
    default:
        return DP_READ_TCP_ONLY;
    }
    /* every field assigned: an initializer would zero the struct first,
     * which compiles to a `rep stos` that perf saw as 2 % of a UDP read */
    struct rd r;
    r.c = NULL;
    r.out = out;
    r.t = dp->tree;
    r.auth = *auth;
    r.config_node = dp->cfg.config_node;
    r.config_mtime = dp->cfg.config_node_mtime;
    r.fence_zxid = INT64_MAX;
    size_t at = out->len;
    r.before_zxid = tree_last_zxid(r.t);
    int rc = serve(&r, op, in);
    if (rc != ZK_OK)
        out->len = at;
    return rc;
}
