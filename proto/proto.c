/*
 * proto.c — the jute codec: big-endian primitives, ZooKeeper records, names.
 *
 * Reader rules (see proto.h): a get never reads past r->len; the first
 * failure sets r->err and every later get fails without touching the input,
 * so a record decoder can chain gets and check once. Lengths follow jute:
 * -1 is null, any other negative length or one above jute.maxbuffer is a
 * protocol error (ZooKeeper's BinaryInputArchive rejects them the same way).
 *
 * Writer rules: a zk_wbuf grows by doubling; the first allocation failure
 * sets w->err and turns every later put into a no-op, so an encoder chains
 * puts and the caller checks err once.
 */
#include "proto/proto.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Smallest wire size of one vector item, used to reject counts that cannot
 * possibly fit in what is left before allocating anything. */
#define STR_MIN_BYTES 4u  /* int32 length */
#define ACL_MIN_BYTES 12u /* perms + two string lengths */

#define WBUF_INITIAL_CAP 256u

/* ---- strings ----------------------------------------------------------- */

struct zk_str zk_str_c(const char *s)
{
    if (s == NULL)
        return ZK_STR_NULL;
    size_t n = strlen(s);
    if (n > (size_t)INT32_MAX) {
        /* A C string this long cannot be a jute string; it is a caller bug. */
        base_log(BASE_LOG_ERROR, "zk_str_c: string of %zu bytes exceeds jute limit", n);
        abort();
    }
    return (struct zk_str){ s, (int32_t)n };
}

/* Null is any negative length (the decoder only produces -1). */
bool zk_str_eq(struct zk_str a, struct zk_str b)
{
    bool a_null = a.len < 0;
    bool b_null = b.len < 0;
    if (a_null || b_null)
        return a_null && b_null;
    if (a.len != b.len)
        return false;
    return a.len == 0 || memcmp(a.ptr, b.ptr, (size_t)a.len) == 0;
}

void zk_strvec_free(struct zk_strvec *v)
{
    free(v->items);
    v->items = NULL;
    v->count = 0;
}

void zk_aclvec_free(struct zk_aclvec *v)
{
    free(v->items);
    v->items = NULL;
    v->count = 0;
}

/* ---- reader ------------------------------------------------------------ */
/* The reader is base's bounded reader (base.h): a failed take sets r->err,
 * which is exactly the jute rule above. */

static bool rbuf_fail(struct base_rd *r)
{
    r->err = true;
    return false;
}

bool zk_get_i32(struct base_rd *r, int32_t *v)
{
    uint32_t u = base_rd_be32(r);
    if (r->err)
        return false;
    *v = (int32_t)u;
    return true;
}

bool zk_get_i64(struct base_rd *r, int64_t *v)
{
    uint64_t u = base_rd_be64(r);
    if (r->err)
        return false;
    *v = (int64_t)u;
    return true;
}

/* Jute writes a boolean as one byte; like DataInputStream.readBoolean, any
 * nonzero byte reads as true. */
bool zk_get_bool(struct base_rd *r, bool *v)
{
    uint8_t b = base_rd_u8(r);
    if (r->err)
        return false;
    *v = b != 0;
    return true;
}

/* Points empty strings at a static "" rather than at the frame, so callers
 * can hand ptr to memcpy/strncmp even when the frame pointer is NULL. The
 * only bound on the length is the input: the frame a string arrives in is
 * already limited by jute.maxbuffer, which may be configured above 1 MiB. */
bool zk_get_str(struct base_rd *r, struct zk_str *v)
{
    int32_t n;
    if (!zk_get_i32(r, &n))
        return false;
    if (n == -1) {
        *v = ZK_STR_NULL;
        return true;
    }
    if (n < 0)
        return rbuf_fail(r);
    const uint8_t *b = base_rd_take(r, (size_t)n);
    if (b == NULL)
        return false;
    v->ptr = n == 0 ? "" : (const char *)b;
    v->len = n;
    return true;
}

/* Reads a vector count: -1 (null) or 0..ZK_VECTOR_MAX, and no more items
 * than the remaining input could hold at min_item_bytes each. Checking the
 * count against the input first bounds the allocation by the frame size. */
static bool get_vector_count(struct base_rd *r, int32_t *count, size_t min_item_bytes)
{
    int32_t n;
    if (!zk_get_i32(r, &n))
        return false;
    if (n == -1) {
        *count = -1;
        return true;
    }
    if (n < 0 || n > ZK_VECTOR_MAX)
        return rbuf_fail(r);
    if ((size_t)n > base_rd_left(r) / min_item_bytes)
        return rbuf_fail(r);
    *count = n;
    return true;
}

/* On failure v is left empty (count 0, items NULL) with nothing allocated.
 * Running out of memory is reported as a decode failure. */
bool zk_get_strvec(struct base_rd *r, struct zk_strvec *v)
{
    int32_t n;
    v->count = 0;
    v->items = NULL;
    if (!get_vector_count(r, &n, STR_MIN_BYTES))
        return false;
    if (n <= 0) {
        v->count = n;
        return true;
    }
    struct zk_str *items = calloc((size_t)n, sizeof *items);
    if (items == NULL)
        return rbuf_fail(r);
    for (int32_t i = 0; i < n; i++) {
        if (!zk_get_str(r, &items[i])) {
            free(items);
            return false;
        }
    }
    v->count = n;
    v->items = items;
    return true;
}

/* ---- writer ------------------------------------------------------------ */

void zk_wbuf_init(struct zk_wbuf *w)
{
    w->p = NULL;
    w->len = 0;
    w->cap = 0;
    w->err = false;
}

void zk_wbuf_free(struct zk_wbuf *w)
{
    free(w->p);
    zk_wbuf_init(w);
}

/* Starts a new message in the same allocation; clears err because the
 * failed message is discarded with it. */
void zk_wbuf_reset(struct zk_wbuf *w)
{
    w->len = 0;
    w->err = false;
}

/* Makes room for extra more bytes; base_grow doubles the capacity, so a
 * sequence of puts costs amortised O(1) reallocations. The first allocation
 * is WBUF_INITIAL_CAP: the dataplane's memory budget counts capacity. */
bool zk_wbuf_reserve(struct zk_wbuf *w, size_t extra)
{
    if (w->err)
        return false;
    if (extra <= w->cap - w->len)
        return true;
    if (extra > SIZE_MAX - w->len) {
        w->err = true;
        return false;
    }
    size_t need = w->len + extra;
    if (base_grow(&w->p, &w->cap, need > WBUF_INITIAL_CAP ? need : WBUF_INITIAL_CAP, 1) != 0) {
        w->err = true;
        return false;
    }
    return true;
}

void zk_wbuf_printf(struct zk_wbuf *w, const char *fmt, ...)
{
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    /* one more byte for vsnprintf's NUL, which len then excludes */
    if (n < 0)
        w->err = true;
    else if (zk_wbuf_reserve(w, (size_t)n + 1)) {
        vsnprintf((char *)w->p + w->len, (size_t)n + 1, fmt, again);
        w->len += (size_t)n;
    }
    va_end(again);
}

/* n more bytes at the end of w, to be written by the caller; NULL when
 * the buffer failed. The common case (room left) is a compare: the
 * encoders of a read reply call this once per record, not per field. */
static inline uint8_t *wbuf_take(struct zk_wbuf *w, size_t n)
{
    if (w->err || n > w->cap - w->len) {
        if (!zk_wbuf_reserve(w, n))
            return NULL;
    }
    uint8_t *at = w->p + w->len;
    w->len += n;
    return at;
}

uint8_t *zk_put_space(struct zk_wbuf *w, size_t n)
{
    return wbuf_take(w, n);
}

void zk_put_raw(struct zk_wbuf *w, const void *p, size_t len)
{
    uint8_t *at = len ? wbuf_take(w, len) : NULL;
    if (at)
        memcpy(at, p, len);
}

void zk_put_i32(struct zk_wbuf *w, int32_t v)
{
    uint8_t *at = wbuf_take(w, 4);
    if (at)
        base_put_be32(at, (uint32_t)v);
}

void zk_put_i64(struct zk_wbuf *w, int64_t v)
{
    uint8_t *at = wbuf_take(w, 8);
    if (at)
        base_put_be64(at, (uint64_t)v);
}

void zk_put_bool(struct zk_wbuf *w, bool v)
{
    uint8_t *at = wbuf_take(w, 1);
    if (at)
        *at = v ? 1 : 0;
}

/* A length below -1, or bytes missing for a positive length, cannot be put
 * on the wire; it marks the buffer failed rather than emit a bad record. */
void zk_put_bytes(struct zk_wbuf *w, const void *p, int32_t len)
{
    if (len < -1 || (len > 0 && p == NULL)) {
        w->err = true;
        return;
    }
    uint8_t *at = wbuf_take(w, 4 + (len > 0 ? (size_t)len : 0));
    if (at == NULL)
        return;
    base_put_be32(at, (uint32_t)len);
    if (len > 0)
        memcpy(at + 4, p, (size_t)len);
}

void zk_put_str(struct zk_wbuf *w, struct zk_str s)
{
    zk_put_bytes(w, s.ptr, s.len);
}

/* A NULL vector pointer or a negative count encodes the null vector (-1). */
void zk_put_strvec(struct zk_wbuf *w, const struct zk_strvec *v)
{
    if (v == NULL || v->count < 0) {
        zk_put_i32(w, -1);
        return;
    }
    if (v->count > 0 && v->items == NULL) {
        w->err = true;
        return;
    }
    zk_put_i32(w, v->count);
    for (int32_t i = 0; i < v->count; i++)
        zk_put_str(w, v->items[i]);
}

size_t zk_frame_begin(struct zk_wbuf *w)
{
    size_t mark = w->len;
    zk_put_i32(w, 0);
    return mark;
}

/* Patches the length reserved at mark with the bytes written since. */
void zk_frame_end(struct zk_wbuf *w, size_t mark)
{
    if (w->err)
        return;
    if (mark > w->len || w->len - mark < 4 || w->len - mark - 4 > (size_t)INT32_MAX) {
        w->err = true;
        return;
    }
    base_put_be32(w->p + mark, (uint32_t)(w->len - mark - 4));
}

/* ---- small records ----------------------------------------------------- */

bool zk_get_stat(struct base_rd *r, struct zk_stat *v)
{
    return zk_get_i64(r, &v->czxid) && zk_get_i64(r, &v->mzxid) && zk_get_i64(r, &v->ctime) &&
           zk_get_i64(r, &v->mtime) && zk_get_i32(r, &v->version) &&
           zk_get_i32(r, &v->cversion) && zk_get_i32(r, &v->aversion) &&
           zk_get_i64(r, &v->ephemeral_owner) && zk_get_i32(r, &v->data_length) &&
           zk_get_i32(r, &v->num_children) && zk_get_i64(r, &v->pzxid);
}

#define STAT_BYTES 68

void zk_put_stat(struct zk_wbuf *w, const struct zk_stat *v)
{
    uint8_t *at = wbuf_take(w, STAT_BYTES);
    if (at == NULL)
        return;
    base_put_be64(at, (uint64_t)v->czxid);
    base_put_be64(at + 8, (uint64_t)v->mzxid);
    base_put_be64(at + 16, (uint64_t)v->ctime);
    base_put_be64(at + 24, (uint64_t)v->mtime);
    base_put_be32(at + 32, (uint32_t)v->version);
    base_put_be32(at + 36, (uint32_t)v->cversion);
    base_put_be32(at + 40, (uint32_t)v->aversion);
    base_put_be64(at + 44, (uint64_t)v->ephemeral_owner);
    base_put_be32(at + 52, (uint32_t)v->data_length);
    base_put_be32(at + 56, (uint32_t)v->num_children);
    base_put_be64(at + 60, (uint64_t)v->pzxid);
}

bool zk_get_id(struct base_rd *r, struct zk_id *v)
{
    return zk_get_str(r, &v->scheme) && zk_get_str(r, &v->id);
}

void zk_put_id(struct zk_wbuf *w, const struct zk_id *v)
{
    zk_put_str(w, v->scheme);
    zk_put_str(w, v->id);
}

/* A null ACL vector (-1) decodes as count -1; rejecting it is the request
 * processor's job (ZooKeeper answers INVALIDACL), not the codec's. */
bool zk_get_aclvec(struct base_rd *r, struct zk_aclvec *v)
{
    int32_t n;
    v->count = 0;
    v->items = NULL;
    if (!get_vector_count(r, &n, ACL_MIN_BYTES))
        return false;
    if (n <= 0) {
        v->count = n;
        return true;
    }
    struct zk_acl *items = calloc((size_t)n, sizeof *items);
    if (items == NULL)
        return rbuf_fail(r);
    for (int32_t i = 0; i < n; i++) {
        if (!zk_get_i32(r, &items[i].perms) || !zk_get_id(r, &items[i].id)) {
            free(items);
            return false;
        }
    }
    v->count = n;
    v->items = items;
    return true;
}

void zk_put_aclvec(struct zk_wbuf *w, const struct zk_aclvec *v)
{
    if (v == NULL || v->count < 0) {
        zk_put_i32(w, -1);
        return;
    }
    if (v->count > 0 && v->items == NULL) {
        w->err = true;
        return;
    }
    zk_put_i32(w, v->count);
    for (int32_t i = 0; i < v->count; i++) {
        zk_put_i32(w, v->items[i].perms);
        zk_put_id(w, &v->items[i].id);
    }
}

/* ---- session and framing records --------------------------------------- */

/* Reads the readOnly flag that 3.4+ peers append to ConnectRequest and
 * ConnectResponse. ZooKeeper reads it only if bytes remain, since older
 * clients end the record after passwd. */
static bool get_optional_read_only(struct base_rd *r, bool *read_only, bool *has_read_only)
{
    *read_only = false;
    *has_read_only = false;
    if (r->err)
        return false;
    if (base_rd_left(r) == 0)
        return true;
    *has_read_only = zk_get_bool(r, read_only);
    return *has_read_only;
}

bool zk_get_connect_req(struct base_rd *r, struct zk_connect_req *v)
{
    return zk_get_i32(r, &v->protocol_version) && zk_get_i64(r, &v->last_zxid_seen) &&
           zk_get_i32(r, &v->timeout_ms) && zk_get_i64(r, &v->session_id) &&
           zk_get_str(r, &v->passwd) &&
           get_optional_read_only(r, &v->read_only, &v->has_read_only);
}

void zk_put_connect_req(struct zk_wbuf *w, const struct zk_connect_req *v)
{
    zk_put_i32(w, v->protocol_version);
    zk_put_i64(w, v->last_zxid_seen);
    zk_put_i32(w, v->timeout_ms);
    zk_put_i64(w, v->session_id);
    zk_put_str(w, v->passwd);
    if (v->has_read_only)
        zk_put_bool(w, v->read_only);
}

bool zk_get_connect_resp(struct base_rd *r, struct zk_connect_resp *v)
{
    return zk_get_i32(r, &v->protocol_version) && zk_get_i32(r, &v->timeout_ms) &&
           zk_get_i64(r, &v->session_id) && zk_get_str(r, &v->passwd) &&
           get_optional_read_only(r, &v->read_only, &v->has_read_only);
}

/* Old clients do not expect the readOnly byte; the server echoes it only
 * when the request carried one (as ZooKeeper's NIOServerCnxn does). */
void zk_put_connect_resp(struct zk_wbuf *w, const struct zk_connect_resp *v)
{
    zk_put_i32(w, v->protocol_version);
    zk_put_i32(w, v->timeout_ms);
    zk_put_i64(w, v->session_id);
    zk_put_str(w, v->passwd);
    if (v->has_read_only)
        zk_put_bool(w, v->read_only);
}

bool zk_get_request_header(struct base_rd *r, struct zk_request_header *v)
{
    return zk_get_i32(r, &v->xid) && zk_get_i32(r, &v->type);
}

void zk_put_request_header(struct zk_wbuf *w, const struct zk_request_header *v)
{
    zk_put_i32(w, v->xid);
    zk_put_i32(w, v->type);
}

bool zk_get_reply_header(struct base_rd *r, struct zk_reply_header *v)
{
    return zk_get_i32(r, &v->xid) && zk_get_i64(r, &v->zxid) && zk_get_i32(r, &v->err);
}

void zk_write_reply_header(uint8_t *at, const struct zk_reply_header *v)
{
    base_put_be32(at, (uint32_t)v->xid);
    base_put_be64(at + 4, (uint64_t)v->zxid);
    base_put_be32(at + 12, (uint32_t)v->err);
}

void zk_put_reply_header(struct zk_wbuf *w, const struct zk_reply_header *v)
{
    uint8_t *at = wbuf_take(w, ZK_REPLY_HEADER_BYTES);
    if (at != NULL)
        zk_write_reply_header(at, v);
}

/* MultiHeader.done is a jute boolean: one byte on the wire, even though the
 * generated C struct in libzookeeper declares it int32_t. */
bool zk_get_multi_header(struct base_rd *r, struct zk_multi_header *v)
{
    return zk_get_i32(r, &v->type) && zk_get_bool(r, &v->done) && zk_get_i32(r, &v->err);
}

void zk_put_multi_header(struct zk_wbuf *w, const struct zk_multi_header *v)
{
    zk_put_i32(w, v->type);
    zk_put_bool(w, v->done);
    zk_put_i32(w, v->err);
}

void zk_put_multi_end(struct zk_wbuf *w)
{
    struct zk_multi_header end = { .type = -1, .done = true, .err = -1 };
    zk_put_multi_header(w, &end);
}

bool zk_get_auth_packet(struct base_rd *r, struct zk_auth_packet *v)
{
    return zk_get_i32(r, &v->type) && zk_get_str(r, &v->scheme) && zk_get_str(r, &v->auth);
}

void zk_put_auth_packet(struct zk_wbuf *w, const struct zk_auth_packet *v)
{
    zk_put_i32(w, v->type);
    zk_put_str(w, v->scheme);
    zk_put_str(w, v->auth);
}

bool zk_get_sasl_request(struct base_rd *r, struct zk_sasl_request *v)
{
    return zk_get_str(r, &v->token);
}

void zk_put_sasl_request(struct zk_wbuf *w, const struct zk_sasl_request *v)
{
    zk_put_str(w, v->token);
}

bool zk_get_sasl_response(struct base_rd *r, struct zk_sasl_response *v)
{
    return zk_get_str(r, &v->token);
}

void zk_put_sasl_response(struct zk_wbuf *w, const struct zk_sasl_response *v)
{
    zk_put_str(w, v->token);
}

bool zk_get_watcher_event(struct base_rd *r, struct zk_watcher_event *v)
{
    return zk_get_i32(r, &v->type) && zk_get_i32(r, &v->state) && zk_get_str(r, &v->path);
}

void zk_put_watcher_event(struct zk_wbuf *w, const struct zk_watcher_event *v)
{
    zk_put_i32(w, v->type);
    zk_put_i32(w, v->state);
    zk_put_str(w, v->path);
}

/* ---- request bodies ---------------------------------------------------- */

bool zk_get_path_watch_req(struct base_rd *r, struct zk_path_watch_req *v)
{
    return zk_get_str(r, &v->path) && zk_get_bool(r, &v->watch);
}

void zk_put_path_watch_req(struct zk_wbuf *w, const struct zk_path_watch_req *v)
{
    zk_put_str(w, v->path);
    zk_put_bool(w, v->watch);
}

bool zk_get_path_req(struct base_rd *r, struct zk_path_req *v)
{
    return zk_get_str(r, &v->path);
}

void zk_put_path_req(struct zk_wbuf *w, const struct zk_path_req *v)
{
    zk_put_str(w, v->path);
}

/* Plain creates carry no ttl; it reads back as -1, the value ZooKeeper's
 * PrepRequestProcessor uses for "no TTL". */
bool zk_get_create_req(struct base_rd *r, struct zk_create_req *v, bool with_ttl)
{
    memset(v, 0, sizeof *v);
    v->ttl = -1;
    if (!zk_get_str(r, &v->path) || !zk_get_str(r, &v->data) || !zk_get_aclvec(r, &v->acl) ||
        !zk_get_i32(r, &v->flags))
        goto fail;
    if (with_ttl && !zk_get_i64(r, &v->ttl))
        goto fail;
    return true;
fail:
    zk_create_req_free(v);
    return false;
}

void zk_put_create_req(struct zk_wbuf *w, const struct zk_create_req *v, bool with_ttl)
{
    zk_put_str(w, v->path);
    zk_put_str(w, v->data);
    zk_put_aclvec(w, &v->acl);
    zk_put_i32(w, v->flags);
    if (with_ttl)
        zk_put_i64(w, v->ttl);
}

void zk_create_req_free(struct zk_create_req *v)
{
    zk_aclvec_free(&v->acl);
}

bool zk_get_path_version_req(struct base_rd *r, struct zk_path_version_req *v)
{
    return zk_get_str(r, &v->path) && zk_get_i32(r, &v->version);
}

void zk_put_path_version_req(struct zk_wbuf *w, const struct zk_path_version_req *v)
{
    zk_put_str(w, v->path);
    zk_put_i32(w, v->version);
}

bool zk_get_setdata_req(struct base_rd *r, struct zk_setdata_req *v)
{
    return zk_get_str(r, &v->path) && zk_get_str(r, &v->data) && zk_get_i32(r, &v->version);
}

void zk_put_setdata_req(struct zk_wbuf *w, const struct zk_setdata_req *v)
{
    zk_put_str(w, v->path);
    zk_put_str(w, v->data);
    zk_put_i32(w, v->version);
}

bool zk_get_setacl_req(struct base_rd *r, struct zk_setacl_req *v)
{
    memset(v, 0, sizeof *v);
    if (zk_get_str(r, &v->path) && zk_get_aclvec(r, &v->acl) && zk_get_i32(r, &v->version))
        return true;
    zk_setacl_req_free(v);
    return false;
}

void zk_put_setacl_req(struct zk_wbuf *w, const struct zk_setacl_req *v)
{
    zk_put_str(w, v->path);
    zk_put_aclvec(w, &v->acl);
    zk_put_i32(w, v->version);
}

void zk_setacl_req_free(struct zk_setacl_req *v)
{
    zk_aclvec_free(&v->acl);
}

/* SetWatches (op 101) ends after childWatches; SetWatches2 (op 105) adds the
 * persistent and persistent-recursive lists. For v1 those stay empty. */
bool zk_get_setwatches_req(struct base_rd *r, struct zk_setwatches_req *v, bool v2)
{
    memset(v, 0, sizeof *v);
    if (!zk_get_i64(r, &v->relative_zxid) || !zk_get_strvec(r, &v->data) ||
        !zk_get_strvec(r, &v->exist) || !zk_get_strvec(r, &v->child))
        goto fail;
    if (v2 && (!zk_get_strvec(r, &v->persistent) || !zk_get_strvec(r, &v->persistent_recursive)))
        goto fail;
    return true;
fail:
    zk_setwatches_req_free(v);
    return false;
}

void zk_put_setwatches_req(struct zk_wbuf *w, const struct zk_setwatches_req *v, bool v2)
{
    zk_put_i64(w, v->relative_zxid);
    zk_put_strvec(w, &v->data);
    zk_put_strvec(w, &v->exist);
    zk_put_strvec(w, &v->child);
    if (v2) {
        zk_put_strvec(w, &v->persistent);
        zk_put_strvec(w, &v->persistent_recursive);
    }
}

void zk_setwatches_req_free(struct zk_setwatches_req *v)
{
    zk_strvec_free(&v->data);
    zk_strvec_free(&v->exist);
    zk_strvec_free(&v->child);
    zk_strvec_free(&v->persistent);
    zk_strvec_free(&v->persistent_recursive);
}

bool zk_get_path_mode_req(struct base_rd *r, struct zk_path_mode_req *v)
{
    return zk_get_str(r, &v->path) && zk_get_i32(r, &v->mode);
}

void zk_put_path_mode_req(struct zk_wbuf *w, const struct zk_path_mode_req *v)
{
    zk_put_str(w, v->path);
    zk_put_i32(w, v->mode);
}

/* ---- names ------------------------------------------------------------- */

/* Names follow the ZooDefs.OpCode constants (as printed by ZooKeeper's
 * Request.op2String), so logs and 4lw output read like ZooKeeper's. */
const char *zk_op_name(int32_t op)
{
    switch (op) {
    case ZK_OP_NOTIFICATION: return "notification";
    case ZK_OP_CREATE: return "create";
    case ZK_OP_DELETE: return "delete";
    case ZK_OP_EXISTS: return "exists";
    case ZK_OP_GETDATA: return "getData";
    case ZK_OP_SETDATA: return "setData";
    case ZK_OP_GETACL: return "getACL";
    case ZK_OP_SETACL: return "setACL";
    case ZK_OP_GETCHILDREN: return "getChildren";
    case ZK_OP_SYNC: return "sync";
    case ZK_OP_PING: return "ping";
    case ZK_OP_GETCHILDREN2: return "getChildren2";
    case ZK_OP_CHECK: return "check";
    case ZK_OP_MULTI: return "multi";
    case ZK_OP_CREATE2: return "create2";
    case ZK_OP_RECONFIG: return "reconfig";
    case ZK_OP_CHECKWATCHES: return "checkWatches";
    case ZK_OP_REMOVEWATCHES: return "removeWatches";
    case ZK_OP_CREATECONTAINER: return "createContainer";
    case ZK_OP_DELETECONTAINER: return "deleteContainer";
    case ZK_OP_CREATETTL: return "createTTL";
    case ZK_OP_MULTIREAD: return "multiRead";
    case ZK_OP_AUTH: return "auth";
    case ZK_OP_SETWATCHES: return "setWatches";
    case ZK_OP_SASL: return "sasl";
    case ZK_OP_GETEPHEMERALS: return "getEphemerals";
    case ZK_OP_GETALLCHILDRENNUMBER: return "getAllChildrenNumber";
    case ZK_OP_SETWATCHES2: return "setWatches2";
    case ZK_OP_ADDWATCH: return "addWatch";
    case ZK_OP_WHOAMI: return "whoAmI";
    case ZK_OP_CREATESESSION: return "createSession";
    case ZK_OP_CLOSESESSION: return "closeSession";
    case ZK_OP_ERROR: return "error";
    default: return "unknown";
    }
}

/* Names are the KeeperException.Code constants. */
const char *zk_err_name(int32_t err)
{
    switch (err) {
    case ZK_OK: return "OK";
    case ZK_ESYSTEMERROR: return "SYSTEMERROR";
    case ZK_ERUNTIMEINCONSISTENCY: return "RUNTIMEINCONSISTENCY";
    case ZK_EDATAINCONSISTENCY: return "DATAINCONSISTENCY";
    case ZK_ECONNECTIONLOSS: return "CONNECTIONLOSS";
    case ZK_EMARSHALLINGERROR: return "MARSHALLINGERROR";
    case ZK_EUNIMPLEMENTED: return "UNIMPLEMENTED";
    case ZK_EOPERATIONTIMEOUT: return "OPERATIONTIMEOUT";
    case ZK_EBADARGUMENTS: return "BADARGUMENTS";
    case ZK_EUNKNOWNSESSION: return "UNKNOWNSESSION";
    case ZK_ENEWCONFIGNOQUORUM: return "NEWCONFIGNOQUORUM";
    case ZK_ERECONFIGINPROGRESS: return "RECONFIGINPROGRESS";
    case ZK_EAPIERROR: return "APIERROR";
    case ZK_ENONODE: return "NONODE";
    case ZK_ENOAUTH: return "NOAUTH";
    case ZK_EBADVERSION: return "BADVERSION";
    case ZK_ENOCHILDRENFOREPHEMERALS: return "NOCHILDRENFOREPHEMERALS";
    case ZK_ENODEEXISTS: return "NODEEXISTS";
    case ZK_ENOTEMPTY: return "NOTEMPTY";
    case ZK_ESESSIONEXPIRED: return "SESSIONEXPIRED";
    case ZK_EINVALIDCALLBACK: return "INVALIDCALLBACK";
    case ZK_EINVALIDACL: return "INVALIDACL";
    case ZK_EAUTHFAILED: return "AUTHFAILED";
    case ZK_ESESSIONMOVED: return "SESSIONMOVED";
    case ZK_ENOTREADONLY: return "NOTREADONLY";
    case ZK_EEPHEMERALONLOCALSESSION: return "EPHEMERALONLOCALSESSION";
    case ZK_ENOWATCHER: return "NOWATCHER";
    case ZK_EREQUESTTIMEOUT: return "REQUESTTIMEOUT";
    case ZK_ERECONFIGDISABLED: return "RECONFIGDISABLED";
    case ZK_ESESSIONCLOSEDREQUIRESASL: return "SESSIONCLOSEDREQUIRESASL";
    case ZK_EQUOTAEXCEEDED: return "QUOTAEXCEEDED";
    case ZK_ETHROTTLEDOP: return "THROTTLEDOP";
    default: return "unknown";
    }
}

/* Writes change the tree or session table and so go through the sequencer.
 * check is listed because, as a top-level op, ZooKeeper routes it through
 * the write pipeline (it must observe every earlier write in zxid order).
 * sync is not: it changes nothing and logs nothing. */
bool zk_op_is_write(int32_t op)
{
    switch (op) {
    case ZK_OP_CREATE:
    case ZK_OP_CREATE2:
    case ZK_OP_CREATECONTAINER:
    case ZK_OP_CREATETTL:
    case ZK_OP_DELETE:
    case ZK_OP_DELETECONTAINER:
    case ZK_OP_SETDATA:
    case ZK_OP_SETACL:
    case ZK_OP_MULTI:
    case ZK_OP_CHECK:
    case ZK_OP_CREATESESSION:
    case ZK_OP_CLOSESESSION:
    case ZK_OP_RECONFIG:
        return true;
    default:
        return false;
    }
}
