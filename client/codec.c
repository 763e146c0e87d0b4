/*
 * codec.c — liblarch's side of the jute records: ACL vectors and multi ops
 * out, reply bodies in (zookeeper.jute's *Response records, per request
 * kind). Pure: no handle, no I/O. Decoded replies own copies of everything,
 * since the frame they came from is freed right after.
 */
#include <stdlib.h>
#include <string.h>

#include "client/lc_int.h"

void lc_put_acl(struct zk_wbuf *w, const struct larch_acl_list *acl)
{
    if (acl == NULL)
        acl = &LARCH_OPEN_ACL_UNSAFE;
    zk_put_i32(w, acl->count);
    for (int32_t i = 0; i < acl->count; i++) {
        zk_put_i32(w, acl->items[i].perms);
        zk_put_str(w, zk_str_c(acl->items[i].scheme));
        zk_put_str(w, zk_str_c(acl->items[i].id));
    }
}

/* The create opcode for a mode: containers and TTL nodes have their own. */
static int32_t create_op_of(int32_t mode, bool in_multi)
{
    if (mode == ZK_CONTAINER)
        return ZK_OP_CREATECONTAINER;
    if (mode == ZK_PERSISTENT_WITH_TTL || mode == ZK_PERSISTENT_SEQUENTIAL_WITH_TTL)
        return ZK_OP_CREATETTL;
    return in_multi ? ZK_OP_CREATE : ZK_OP_CREATE2;
}

int32_t lc_create_op(int32_t mode)
{
    return create_op_of(mode, false);
}

int lc_put_multi_op(struct zk_wbuf *w, const struct larch_op *op, const char *chroot)
{
    bool seq = op->type == ZK_OP_CREATE &&
               (op->mode == ZK_PERSISTENT_SEQUENTIAL || op->mode == ZK_EPHEMERAL_SEQUENTIAL ||
                op->mode == ZK_PERSISTENT_SEQUENTIAL_WITH_TTL);
    if (!larch_path_valid(op->path, seq))
        return ZK_EBADARGUMENTS;
    char *path = lc_chroot_add(chroot, op->path);
    if (path == NULL)
        return ZK_ESYSTEMERROR;
    int32_t type = op->type == ZK_OP_CREATE ? create_op_of(op->mode, true) : op->type;
    struct zk_multi_header h = { .type = type, .done = false, .err = -1 };
    zk_put_multi_header(w, &h);
    zk_put_str(w, zk_str_c(path));
    switch (op->type) {
    case ZK_OP_CREATE:
        zk_put_bytes(w, op->data, op->data != NULL ? op->len : -1);
        lc_put_acl(w, op->acl);
        zk_put_i32(w, op->mode);
        if (type == ZK_OP_CREATETTL)
            zk_put_i64(w, op->ttl_ms);
        break;
    case ZK_OP_SETDATA:
        zk_put_bytes(w, op->data, op->data != NULL ? op->len : -1);
        zk_put_i32(w, op->version);
        break;
    case ZK_OP_DELETE:
    case ZK_OP_CHECK:
        zk_put_i32(w, op->version);
        break;
    default:
        free(path);
        return ZK_EBADARGUMENTS;
    }
    free(path);
    return ZK_OK;
}

/* ---- reply decoding ----------------------------------------------------------- */

static char *dup_str(struct zk_str s)
{
    if (s.len < 0)
        return NULL;
    char *p = malloc((size_t)s.len + 1);
    if (p != NULL) {
        memcpy(p, s.ptr, (size_t)s.len);
        p[s.len] = '\0';
    }
    return p;
}

/* A path the server sent, chroot removed, as a new string. */
static char *dup_path(struct zk_str s, const char *chroot)
{
    char *full = dup_str(s);
    if (full == NULL || chroot == NULL)
        return full;
    char *out = strdup(lc_chroot_strip(chroot, full));
    free(full);
    return out;
}

static bool get_path(struct base_rd *r, const char *chroot, char **out)
{
    struct zk_str s;
    if (!zk_get_str(r, &s) || s.len < 0)
        return false;
    *out = dup_path(s, chroot);
    return *out != NULL;
}

static bool get_strings(struct base_rd *r, const char *chroot, bool paths,
                        struct larch_strings *out)
{
    struct zk_strvec v;
    if (!zk_get_strvec(r, &v))
        return false;
    bool ok = true;
    int32_t n = v.count > 0 ? v.count : 0;
    out->items = calloc((size_t)n + 1, sizeof *out->items);
    ok = out->items != NULL;
    for (int32_t i = 0; ok && i < n; i++) {
        out->items[i] = paths ? dup_path(v.items[i], chroot) : dup_str(v.items[i]);
        ok = out->items[i] != NULL;
        out->count += ok;
    }
    zk_strvec_free(&v);
    return ok;
}

static bool get_acl(struct base_rd *r, struct larch_acl_list *out)
{
    struct zk_aclvec v;
    if (!zk_get_aclvec(r, &v))
        return false;
    int32_t n = v.count > 0 ? v.count : 0;
    out->items = calloc((size_t)n + 1, sizeof *out->items);
    bool ok = out->items != NULL;
    for (int32_t i = 0; ok && i < n; i++) {
        struct larch_acl *a = &out->items[i];
        a->perms = v.items[i].perms;
        a->scheme = dup_str(v.items[i].id.scheme);
        a->id = dup_str(v.items[i].id.id);
        out->count++;
        ok = a->scheme != NULL && a->id != NULL;
    }
    zk_aclvec_free(&v);
    return ok;
}

static bool get_stat(struct base_rd *r, struct lc_reply *out)
{
    out->has_stat = zk_get_stat(r, &out->stat);
    return out->has_stat;
}

static bool get_data(struct base_rd *r, struct lc_reply *out)
{
    struct zk_str d;
    if (!zk_get_str(r, &d))
        return false;
    out->data_len = d.len;
    if (d.len < 0)
        return true;
    out->data = malloc((size_t)d.len + 1);
    if (out->data == NULL)
        return false;
    memcpy(out->data, d.ptr, (size_t)d.len);
    out->data[d.len] = '\0';
    return true;
}

/* One multi result after its header (MultiResponse's per-type bodies). */
static bool get_multi_one(struct base_rd *r, const struct zk_multi_header *h, const char *chroot,
                          struct larch_op_result *res)
{
    res->err = ZK_OK;
    switch (h->type) {
    case ZK_OP_CREATE:
        return get_path(r, chroot, &res->path);
    case ZK_OP_CREATE2:
    case ZK_OP_CREATECONTAINER:
    case ZK_OP_CREATETTL:
        return get_path(r, chroot, &res->path) && zk_get_stat(r, &res->stat);
    case ZK_OP_SETDATA:
        return zk_get_stat(r, &res->stat);
    case ZK_OP_DELETE:
    case ZK_OP_DELETECONTAINER:
    case ZK_OP_CHECK:
        return true;
    case ZK_OP_ERROR:
        return zk_get_i32(r, &res->err);
    default:
        return false;
    }
}

static bool get_multi(struct base_rd *r, const char *chroot, struct lc_reply *out)
{
    size_t cap = 8;
    out->results = calloc(cap, sizeof *out->results);
    if (out->results == NULL)
        return false;
    for (int32_t i = 0; i < ZK_VECTOR_MAX; i++) {
        struct zk_multi_header h;
        if (!zk_get_multi_header(r, &h))
            return false;
        if (h.done)
            return true;
        size_t old_cap = cap;
        if (base_grow(&out->results, &cap, (size_t)out->nresults + 1, sizeof *out->results) != 0)
            return false;
        /* results past nresults stay zeroed, as calloc left the first ones */
        memset(out->results + old_cap, 0, (cap - old_cap) * sizeof *out->results);
        if (!get_multi_one(r, &h, chroot, &out->results[out->nresults++]))
            return false;
    }
    return false;
}

static bool decode_body(const struct lc_req *req, struct base_rd *r, const char *chroot,
                        struct lc_reply *out)
{
    switch (req->kind) {
    case LC_CREATE:
        return get_path(r, chroot, &out->path) && get_stat(r, out);
    case LC_EXISTS:
    case LC_SET:
    case LC_SETACL:
        return get_stat(r, out);
    case LC_GET:
        return get_data(r, out) && get_stat(r, out);
    case LC_CHILDREN:
        return get_strings(r, chroot, false, &out->strings) && get_stat(r, out);
    case LC_GETACL:
        return get_acl(r, &out->acl) && get_stat(r, out);
    case LC_SYNC:
        return get_path(r, chroot, &out->path);
    case LC_MULTI:
        return get_multi(r, chroot, out);
    case LC_EPHEMERALS:
        return get_strings(r, chroot, true, &out->strings);
    case LC_CHILDCOUNT:
        return zk_get_i32(r, &out->number);
    default: /* delete, auth, addWatch, removeWatches, close: no body */
        return true;
    }
}

void lc_reply_decode(const struct lc_req *req, const char *chroot, struct lc_reply *out)
{
    *out = (struct lc_reply){ .err = req->err, .data_len = -1 };
    /* a failed multi still carries every op's result; other errors no body */
    bool has_body = req->err == ZK_OK || (req->kind == LC_MULTI && req->body_len > 0);
    if (!has_body)
        return;
    struct base_rd r;
    base_rd_init(&r, req->body, req->body_len);
    if (!decode_body(req, &r, chroot, out)) {
        lc_reply_free(out);
        *out = (struct lc_reply){ .err = ZK_EMARSHALLINGERROR, .data_len = -1 };
        return;
    }
    /* ZooKeeper answers a failed multi with err 0 in the header; the
     * transaction's error is its first failing op's */
    for (int32_t i = 0; req->kind == LC_MULTI && out->err == ZK_OK && i < out->nresults; i++)
        out->err = out->results[i].err;
}

void lc_reply_free(struct lc_reply *r)
{
    free(r->data);
    free(r->path);
    larch_strings_free(&r->strings);
    larch_acl_list_free(&r->acl);
    larch_op_results_free(r->results, r->nresults);
    free(r->results);
    r->data = NULL;
    r->path = NULL;
    r->results = NULL;
    r->nresults = 0;
}

int lc_reply_take_data(struct lc_reply *rep, int rc, char **data, int32_t *len,
                       struct zk_stat *stat)
{
    if (rc == ZK_OK) {
        if (data != NULL) {
            *data = rep->data;
            rep->data = NULL;
        }
        if (len != NULL)
            *len = rep->data_len;
        if (stat != NULL)
            *stat = rep->stat;
    }
    lc_reply_free(rep);
    return rc;
}

int lc_reply_take_children(struct lc_reply *rep, int rc, struct larch_strings *children,
                           struct zk_stat *stat)
{
    if (rc == ZK_OK && children != NULL) {
        *children = rep->strings;
        rep->strings = (struct larch_strings){ 0 };
    }
    if (rc == ZK_OK && stat != NULL)
        *stat = rep->stat;
    lc_reply_free(rep);
    return rc;
}

void lc_reply_result(const struct lc_reply *rep, struct larch_result *res)
{
    *res = (struct larch_result){
        .err = rep->err,
        .stat = rep->has_stat ? &rep->stat : NULL,
        .data = rep->data,
        .data_len = rep->data_len,
        .path = rep->path,
        .strings = rep->strings.items != NULL ? &rep->strings : NULL,
        .acl = rep->acl.items != NULL ? &rep->acl : NULL,
        .results = rep->results,
        .nresults = rep->nresults,
        .number = rep->number,
    };
}

void larch_op_results_free(struct larch_op_result *results, int32_t n)
{
    for (int32_t i = 0; results != NULL && i < n; i++) {
        free(results[i].path);
        results[i].path = NULL;
    }
}
