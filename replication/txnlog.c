/*
 * txnlog.c — txn codec, segmented write-ahead log with group commit, replay
 * with torn-tail repair, and purge. See txnlog.h for the format and rules.
 *
 * The writer follows ZooKeeper's FileTxnLog: segments are named after the
 * zxid of their first record, preallocated (FilePadding) so a group commit
 * costs one write + one fdatasync of data blocks, and a restarted writer
 * starts a new segment instead of appending to the old one.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replication/txnlog.h"

#define SEG_MAGIC "LRCH"
#define SEG_HEADER_BYTES 16u       /* magic, u32 version, u64 db id */
#define FRAME_BYTES 8u             /* u32 payload length, u32 CRC-32C */
#define OP_MIN_BYTES 9u            /* type, client type, field mask */
#define ACL_ENTRY_MIN_BYTES 12u    /* perms, scheme length, id length */
#define SEG_FILE_BYTES_MAX (1ull << 34) /* refuse to read absurd segment files */
#define SEG_NAME_PREFIX "log."

/* ---- record writer ------------------------------------------------------------ */

/* Writer over a base_buf that remembers the first failure, so encoders
 * can put a whole record and check once. */
struct wr {
    struct base_buf *b;
    int err;
};

static void put_bytes(struct wr *w, const void *p, size_t n)
{
    if (w->err == 0)
        w->err = base_buf_append(w->b, p, n);
}

static void put_u8(struct wr *w, uint8_t v)
{
    if (w->err == 0)
        w->err = base_buf_put_u8(w->b, v);
}

static void put_u32(struct wr *w, uint32_t v)
{
    if (w->err == 0)
        w->err = base_buf_put_be32(w->b, v);
}

static void put_u64(struct wr *w, uint64_t v)
{
    if (w->err == 0)
        w->err = base_buf_put_be64(w->b, v);
}

/* ---- txn codec --------------------------------------------------------------- */

/* Which optional txn_op fields follow an op's fixed part. Every field that
 * differs from its empty value is written, so a round trip is exact for all
 * txn types without a per-type schema that could drift from prep.c. */
enum op_field {
    F_PATH = 1u << 0,
    F_DATA = 1u << 1,
    F_ACL = 1u << 2,
    F_OWNER = 1u << 3,
    F_VERSION = 1u << 4,
    F_PCVERSION = 1u << 5,
    F_TIMEOUT = 1u << 6,
    F_ERR = 1u << 7,
};

static uint8_t op_fields(const struct txn_op *op)
{
    return (uint8_t)((op->path != NULL ? F_PATH : 0) | (op->data_len >= 0 ? F_DATA : 0) |
                     (op->acl != NULL ? F_ACL : 0) | (op->ephemeral_owner != 0 ? F_OWNER : 0) |
                     (op->version != 0 ? F_VERSION : 0) |
                     (op->parent_cversion != 0 ? F_PCVERSION : 0) |
                     (op->timeout_ms != 0 ? F_TIMEOUT : 0) | (op->err != 0 ? F_ERR : 0));
}

static bool type_known(int32_t type)
{
    switch (type) {
    case TXN_CREATE:
    case TXN_DELETE:
    case TXN_SETDATA:
    case TXN_SETACL:
    case TXN_CHECK:
    case TXN_MULTI:
    case TXN_CREATE_CONTAINER:
    case TXN_CREATE_TTL:
    case TXN_CREATE_SESSION:
    case TXN_CLOSE_SESSION:
    case TXN_ERROR:
    case TXN_NOOP:
    case TXN_CONFIG:
        return true;
    default:
        return false;
    }
}

/* A TXN_CONFIG txn is exactly one TXN_CONFIG op that holds nothing but a
 * membership raft_config_decode accepts (a Raft CONFIG entry's bytes), and
 * no other txn holds such an op: recovery turns the record back into the
 * entry it was (txnlog_entry_type), so the two must be one-to-one. Checked
 * by encode and by decode alike. */
static bool config_shape_ok(const struct txn *x)
{
    if (x->type != TXN_CONFIG) {
        for (uint32_t i = 0; i < x->nops; i++) {
            if (x->ops[i].type == TXN_CONFIG)
                return false;
        }
        return true;
    }
    if (x->nops != 1)
        return false;
    const struct txn_op *op = &x->ops[0];
    if (op->type != TXN_CONFIG || op_fields(op) != F_DATA || op->data_len <= 0 ||
        (size_t)op->data_len > RAFT_CONFIG_BYTES_MAX || op->passwd_known)
        return false;
    struct raft_config c;
    return raft_config_decode(op->data, (size_t)op->data_len, &c) == RAFT_OK;
}

/* The sizes below are encode_op's layout, field by field; encode_op
 * asserts that what it wrote is what txn_op_encoded_bytes says. */
static size_t acl_encoded_bytes(const struct tree_acl *acl)
{
    size_t n = 4; /* count */
    for (int32_t i = 0; i < acl->count; i++)
        n += ACL_ENTRY_MIN_BYTES + strlen(acl->items[i].scheme) + strlen(acl->items[i].id);
    return n;
}

size_t txn_op_encoded_bytes(const struct txn_op *op)
{
    uint8_t f = op_fields(op);
    size_t n = OP_MIN_BYTES;
    n += op->type == TXN_CREATE_SESSION ? TREE_PASSWD_BYTES : 0;
    if (f & F_PATH)
        n += 4 + strlen(op->path);
    if (f & F_DATA)
        n += 4 + (size_t)op->data_len;
    if (f & F_ACL)
        n += acl_encoded_bytes(op->acl);
    n += (f & F_OWNER) ? 8 : 0;
    n += (f & F_VERSION) ? 4 : 0;
    n += (f & F_PCVERSION) ? 4 : 0;
    n += (f & F_TIMEOUT) ? 4 : 0;
    n += (f & F_ERR) ? 4 : 0;
    return n;
}

static int encode_acl(struct wr *w, const struct tree_acl *acl)
{
    if (acl->count < 0 || acl->count > TREE_ACL_MAX)
        return -EINVAL;
    put_u32(w, (uint32_t)acl->count);
    for (int32_t i = 0; i < acl->count; i++) {
        const struct tree_acl_entry *e = &acl->items[i];
        size_t sl = strlen(e->scheme), il = strlen(e->id);
        /* no bound of their own, as paths: "auth" expands into the caller's
         * digest ids, which may be long; the record bound covers them */
        if (sl > TXNLOG_RECORD_BYTES_MAX || il > TXNLOG_RECORD_BYTES_MAX)
            return -EINVAL;
        put_u32(w, (uint32_t)e->perms);
        put_u32(w, (uint32_t)sl);
        put_bytes(w, e->scheme, sl);
        put_u32(w, (uint32_t)il);
        put_bytes(w, e->id, il);
    }
    return 0;
}

static int encode_op(struct wr *w, const struct txn_op *op)
{
    size_t start = w->b->len;
    uint8_t f = op_fields(op);
    put_u32(w, (uint32_t)op->type);
    put_u32(w, (uint32_t)op->client_type);
    put_u8(w, f);
    if (f & F_PATH) {
        /* no path limit of its own: the record bound covers it (checked
         * here too, so a huge path is refused before it is copied) */
        size_t n = strlen(op->path);
        if (n > TXNLOG_RECORD_BYTES_MAX)
            return -EINVAL;
        put_u32(w, (uint32_t)n);
        put_bytes(w, op->path, n);
    }
    if (f & F_DATA) {
        put_u32(w, (uint32_t)op->data_len);
        put_bytes(w, op->data, (size_t)op->data_len);
    }
    if ((f & F_ACL) && encode_acl(w, op->acl) != 0)
        return -EINVAL;
    if (f & F_OWNER)
        put_u64(w, (uint64_t)op->ephemeral_owner);
    if (f & F_VERSION)
        put_u32(w, (uint32_t)op->version);
    if (f & F_PCVERSION)
        put_u32(w, (uint32_t)op->parent_cversion);
    if (f & F_TIMEOUT)
        put_u32(w, (uint32_t)op->timeout_ms);
    if (f & F_ERR)
        put_u32(w, (uint32_t)op->err);
    if (op->type == TXN_CREATE_SESSION) {
        /* format 2 cannot say "no password": a format-1 txn is not re-logged */
        if (!op->passwd_known)
            return -EINVAL;
        put_bytes(w, op->passwd, TREE_PASSWD_BYTES);
    }
    /* prep sizes txns with txn_op_encoded_bytes: the two must not drift */
    BASE_ASSERT(w->err != 0 || w->b->len - start == txn_op_encoded_bytes(op));
    return 0;
}

int txn_encode(struct base_buf *b, const struct txn *x)
{
    if (!config_shape_ok(x))
        return -EINVAL;
    size_t start = b->len;
    struct wr w = { .b = b, .err = 0 };
    put_u64(&w, (uint64_t)x->zxid);
    put_u64(&w, (uint64_t)x->session_id);
    put_u32(&w, (uint32_t)x->cxid);
    put_u64(&w, (uint64_t)x->time_ms);
    put_u32(&w, (uint32_t)x->type);
    put_u32(&w, x->nops);
    /* the sequencer's bound for ops leaves exactly this much for the header */
    BASE_ASSERT(w.err != 0 || b->len - start == TXNLOG_TXN_HEADER_BYTES);
    int rc = 0;
    for (uint32_t i = 0; rc == 0 && i < x->nops; i++) {
        rc = encode_op(&w, &x->ops[i]);
        /* stop at the first op past the bound rather than copy the rest */
        if (rc == 0 && b->len - start > TXNLOG_RECORD_BYTES_MAX)
            rc = -EINVAL;
    }
    if (rc == 0)
        rc = w.err;
    if (rc != 0)
        b->len = start;
    BASE_ASSERT(rc != 0 || b->len - start <= TXNLOG_RECORD_BYTES_MAX);
    return rc;
}

/* A NUL-terminated copy of a length-prefixed string that must not contain
 * NUL (C strings in the tree could not represent it). Strings (paths, ACL
 * schemes and ids) have no bound of their own: base_rd_take refuses a
 * length that runs past the record's end before anything is allocated, so
 * garbage never allocates more than the record still holds. NULL and
 * r->err on bad input. */
static char *get_str(struct base_rd *r, bool *oom)
{
    uint32_t n = base_rd_be32(r);
    const uint8_t *p = base_rd_take(r, n);
    if (p == NULL || memchr(p, '\0', n) != NULL) {
        r->err = true;
        return NULL;
    }
    char *s = malloc((size_t)n + 1);
    if (s == NULL) {
        *oom = true;
        return NULL;
    }
    memcpy(s, p, n);
    s[n] = '\0';
    return s;
}

static bool acl_is_open_list(const struct tree_acl *acl)
{
    return acl->count == 1 && acl->items[0].perms == ZK_PERM_ALL &&
           strcmp(acl->items[0].scheme, "world") == 0 && strcmp(acl->items[0].id, "anyone") == 0;
}

/* Builds the list the way acl.c does (list, items and strings each
 * malloc'd, one reference), so tree_acl_unref frees it. */
static struct tree_acl *decode_acl(struct base_rd *r, bool *oom)
{
    uint32_t count = base_rd_be32(r);
    if (r->err || count > TREE_ACL_MAX || count > base_rd_left(r) / ACL_ENTRY_MIN_BYTES) {
        r->err = true;
        return NULL;
    }
    struct tree_acl *acl = calloc(1, sizeof *acl);
    if (acl != NULL)
        acl->items = calloc(count > 0 ? count : 1, sizeof *acl->items);
    if (acl == NULL || acl->items == NULL) {
        free(acl);
        *oom = true;
        return NULL;
    }
    acl->refs_ = 1;
    for (uint32_t i = 0; i < count && !r->err && !*oom; i++) {
        struct tree_acl_entry *e = &acl->items[i];
        e->perms = (int32_t)base_rd_be32(r);
        e->scheme = get_str(r, oom);
        e->id = e->scheme != NULL ? get_str(r, oom) : NULL;
        acl->count++;
        if (e->id == NULL)
            break;
    }
    if (r->err || *oom || acl_is_open_list(acl)) {
        bool open = !r->err && !*oom;
        tree_acl_unref(acl);
        return open ? tree_acl_open() : NULL;
    }
    return acl;
}

static void decode_data(struct base_rd *r, struct txn_op *op, bool *oom)
{
    uint32_t n = base_rd_be32(r);
    if (n > TXNLOG_RECORD_BYTES_MAX)
        r->err = true;
    const uint8_t *p = base_rd_take(r, n);
    if (p == NULL)
        return;
    /* prep.c allocates at least one byte for empty data; do the same */
    op->data = malloc(n > 0 ? n : 1);
    if (op->data == NULL) {
        *oom = true;
        return;
    }
    memcpy(op->data, p, n);
    op->data_len = (int32_t)n;
}

/* A createSession's password follows its fields from format 2 on; in
 * format 1 there is none and the op says so (passwd_known false). */
static void decode_passwd(struct base_rd *r, struct txn_op *op, uint32_t version)
{
    if (version < 2)
        return;
    const uint8_t *p = base_rd_take(r, TREE_PASSWD_BYTES);
    if (p == NULL)
        return; /* r->err is set */
    memcpy(op->passwd, p, TREE_PASSWD_BYTES);
    op->passwd_known = true;
}

static void decode_op(struct base_rd *r, struct txn_op *op, uint32_t version, bool *oom)
{
    op->type = (int32_t)base_rd_be32(r);
    op->client_type = (int32_t)base_rd_be32(r);
    uint8_t f = base_rd_u8(r);
    if (!type_known(op->type) || op->type == TXN_MULTI || op->type == TXN_NOOP)
        r->err = true;
    if ((f & F_PATH) && !r->err)
        op->path = get_str(r, oom); /* bounded by the record, see get_str */
    if ((f & F_DATA) && !r->err && !*oom)
        decode_data(r, op, oom);
    if ((f & F_ACL) && !r->err && !*oom)
        op->acl = decode_acl(r, oom);
    if (f & F_OWNER)
        op->ephemeral_owner = (int64_t)base_rd_be64(r);
    if (f & F_VERSION)
        op->version = (int32_t)base_rd_be32(r);
    if (f & F_PCVERSION)
        op->parent_cversion = (int32_t)base_rd_be32(r);
    if (f & F_TIMEOUT)
        op->timeout_ms = (int32_t)base_rd_be32(r);
    if (f & F_ERR)
        op->err = (int32_t)base_rd_be32(r);
    if (op->type == TXN_CREATE_SESSION && !r->err)
        decode_passwd(r, op, version);
}

int txn_decode(const uint8_t *p, size_t len, struct txn *out)
{
    return txn_decode_version(p, len, TXNLOG_VERSION, out);
}

int txn_decode_version(const uint8_t *p, size_t len, uint32_t version, struct txn *out)
{
    BASE_ASSERT(version >= TXNLOG_VERSION_MIN && version <= TXNLOG_VERSION);
    struct base_rd r;
    base_rd_init(&r, p, len);
    *out = (struct txn){ 0 };
    out->zxid = (int64_t)base_rd_be64(&r);
    out->session_id = (int64_t)base_rd_be64(&r);
    out->cxid = (int32_t)base_rd_be32(&r);
    out->time_ms = (int64_t)base_rd_be64(&r);
    out->type = (int32_t)base_rd_be32(&r);
    uint32_t nops = base_rd_be32(&r);
    /* every op takes OP_MIN_BYTES, which bounds nops by the record size */
    if (r.err || len > TXNLOG_RECORD_BYTES_MAX || !type_known(out->type) ||
        nops > (len - r.pos) / OP_MIN_BYTES || (out->type == TXN_NOOP && nops != 0) ||
        (out->type == TXN_CONFIG && version < TXNLOG_VERSION_CONFIG))
        return -EBADMSG;
    bool oom = false;
    if (nops > 0) {
        out->ops = malloc((size_t)nops * sizeof *out->ops);
        if (out->ops == NULL)
            return -ENOMEM;
        for (uint32_t i = 0; i < nops; i++)
            out->ops[i] = (struct txn_op){ .data_len = -1 };
        out->nops = nops;
    }
    for (uint32_t i = 0; i < nops && !r.err && !oom; i++)
        decode_op(&r, &out->ops[i], version, &oom);
    if (r.err || oom || r.pos != len || !config_shape_ok(out)) {
        txn_free(out);
        *out = (struct txn){ 0 };
        return oom ? -ENOMEM : -EBADMSG;
    }
    return 0;
}

/* ---- segments ------------------------------------------------------------------ */

struct seg {
    int64_t zxid; /* from the name: the zxid of its first record */
};

struct seg_list {
    struct seg *items;
    size_t count;
    size_t cap;
};

/* Parses "log.<hex>" as ZooKeeper writes it (Long.toHexString: lower case,
 * no leading zeros); anything else in the directory is not ours. */
static bool seg_name_parse(const char *name, int64_t *zxid)
{
    size_t plen = strlen(SEG_NAME_PREFIX);
    if (strncmp(name, SEG_NAME_PREFIX, plen) != 0)
        return false;
    const char *hex = name + plen;
    size_t n = strlen(hex);
    if (n == 0 || n > 16 || (hex[0] == '0' && n > 1))
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        char c = hex[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            return false;
        v = v << 4 | (uint64_t)d;
    }
    *zxid = (int64_t)v;
    return true;
}

static int seg_path(const char *dir, int64_t zxid, char *out, size_t cap)
{
    int n = snprintf(out, cap, "%s/" SEG_NAME_PREFIX "%llx", dir, (unsigned long long)zxid);
    return n > 0 && (size_t)n < cap ? 0 : -ENAMETOOLONG;
}

static int seg_list_add(void *arg, const char *name)
{
    struct seg_list *l = arg;
    int64_t zxid;
    if (!seg_name_parse(name, &zxid))
        return 0;
    if (base_grow(&l->items, &l->cap, l->count + 1, sizeof *l->items) != 0)
        return -ENOMEM;
    l->items[l->count++] = (struct seg){ .zxid = zxid };
    return 0;
}

static int seg_cmp(const void *a, const void *b)
{
    int64_t x = ((const struct seg *)a)->zxid, y = ((const struct seg *)b)->zxid;
    return x < y ? -1 : x > y;
}

/* The segments of dir in zxid order (signed, as ZooKeeper compares zxids). */
static int seg_list_load(struct storage *st, const char *dir, struct seg_list *l)
{
    *l = (struct seg_list){ 0 };
    int rc = storage_list(st, dir, seg_list_add, l);
    if (rc != 0) {
        free(l->items);
        *l = (struct seg_list){ 0 };
        return rc;
    }
    if (l->count > 1)
        qsort(l->items, l->count, sizeof *l->items, seg_cmp);
    return 0;
}

static void seg_header_fill(uint8_t h[SEG_HEADER_BYTES], uint64_t db_id)
{
    memcpy(h, SEG_MAGIC, 4);
    base_put_be32(h + 4, TXNLOG_VERSION); /* a new segment is always in the current format */
    base_put_be64(h + 8, db_id);
}

/* Reads a whole segment file into *buf (malloc'd, caller frees). */
static int seg_read(struct storage *st, const char *path, uint8_t **buf, size_t *len)
{
    struct storage_file *f;
    int rc = storage_open(st, path, 0, &f);
    if (rc != 0)
        return rc;
    uint64_t size = 0;
    rc = storage_size(f, &size);
    if (rc == 0 && size > SEG_FILE_BYTES_MAX)
        rc = -EFBIG;
    *buf = rc == 0 ? malloc(size > 0 ? (size_t)size : 1) : NULL;
    if (rc == 0 && *buf == NULL)
        rc = -ENOMEM;
    size_t got = 0;
    if (rc == 0)
        rc = storage_pread(f, *buf, (size_t)size, 0, &got);
    int crc = storage_close(f);
    if (rc == 0)
        rc = crc;
    if (rc != 0) {
        free(*buf);
        *buf = NULL;
        return rc;
    }
    *len = got;
    return 0;
}

/* The total length of the record framed at off in buf[0, len), or 0 when
 * there is no intact record there (short, absurd length, or CRC mismatch).
 * Every byte from zeros_from on is known to be zero (len when nothing is
 * known): a payload may end in zeros (a closeSession's last byte is 0),
 * and its CRC over them is extended arithmetically, so that probing every
 * offset of a torn tail costs its nonzero bytes, not the preallocated
 * chunk after it (up to 64 MiB for each plausible length). */
static size_t record_at(const uint8_t *buf, size_t len, size_t zeros_from, size_t off)
{
    BASE_ASSERT(zeros_from <= len);
    if (off > len || len - off < FRAME_BYTES)
        return 0;
    uint32_t plen = base_get_be32(buf + off);
    if (plen < TXNLOG_TXN_HEADER_BYTES || plen > TXNLOG_RECORD_BYTES_MAX ||
        len - off - FRAME_BYTES < plen)
        return 0;
    size_t start = off + FRAME_BYTES, end = start + plen;
    size_t stop = end < zeros_from ? end : start > zeros_from ? start : zeros_from;
    uint32_t crc = base_crc32c(0, buf + start, stop - start);
    if (stop < end)
        crc = base_crc32c_zeros(crc, end - stop);
    if (crc != base_get_be32(buf + off + 4))
        return 0;
    return FRAME_BYTES + plen;
}

/* One past the last nonzero byte: preallocated space reads as zeros. */
static size_t nonzero_end(const uint8_t *buf, size_t len)
{
    while (len > 0 && buf[len - 1] == 0)
        len--;
    return len;
}

/* True when an intact record starts at or after from: then damage before
 * it is not a torn tail but lost data in the middle of the log. nz is one
 * past the last nonzero byte. A record starts below nz (its length is not
 * zero) but may end past it, in its own trailing zeros: it is framed
 * against all len bytes, never against nz. */
static bool intact_record_after(const uint8_t *buf, size_t len, size_t nz, size_t from)
{
    BASE_ASSERT(nz <= len && (nz == len || buf[nz] == 0));
    for (size_t pos = from; pos < nz; pos++) {
        if (record_at(buf, len, nz, pos) != 0)
            return true;
    }
    return false;
}

/* ---- scanning and replay -------------------------------------------------------- */

struct scan {
    struct storage *st;
    const char *dir;
    int64_t from_zxid;
    txnlog_replay_fn fn; /* NULL: check only, decode nothing */
    void *arg;
    bool probe;          /* repair nothing, only note in repair_needed */
    bool repair_needed;  /* a probe found a torn tail (or segment) */
    int64_t last_zxid; /* INT64_MIN until a record is seen */
    uint64_t db_id;
    bool have_db_id;
    struct txnlog_replay_stats stats;
};

/* What checking a segment found. */
struct seg_layout {
    uint32_t version;   /* from the header: how its records decode */
    size_t valid_end;   /* end of the last intact record (or of the header) */
    size_t torn_bytes;  /* nonzero bytes after valid_end that will be dropped */
    bool drop_file;     /* the header itself never became durable */
};

/* Segments of every version this code reads may follow each other: an
 * upgraded server goes on with a new segment after the old ones. */
static bool seg_header_ok(struct scan *s, const uint8_t *buf, size_t len)
{
    if (len < SEG_HEADER_BYTES || memcmp(buf, SEG_MAGIC, 4) != 0 ||
        base_get_be32(buf + 4) < TXNLOG_VERSION_MIN || base_get_be32(buf + 4) > TXNLOG_VERSION)
        return false;
    uint64_t db = base_get_be64(buf + 8);
    if (s->have_db_id && db != s->db_id)
        return false;
    s->db_id = db;
    s->have_db_id = true;
    return true;
}

/* Classifies the bytes after the last intact record: zeros (clean end), a
 * torn tail (last segment only, no intact record after it), or corruption. */
static int seg_check_tail(const uint8_t *buf, size_t len, bool is_last, struct seg_layout *lay)
{
    size_t nz = nonzero_end(buf, len);
    if (nz <= lay->valid_end)
        return 0;
    if (!is_last || intact_record_after(buf, len, nz, lay->valid_end + 1))
        return TXNLOG_ECORRUPT;
    lay->torn_bytes = nz - lay->valid_end;
    return 0;
}

/* Pass one over a segment: header, framing, CRCs and zxid order. The
 * first record must carry the zxid the segment is named after, and every
 * record must precede the next segment's name (upper), so that skipping and
 * purging by name are sound. The last segment has no upper bound: a record
 * may carry INT64_MAX itself. */
static int seg_check(struct scan *s, const struct seg *seg, const uint8_t *buf, size_t len,
                     int64_t upper, bool is_last, struct seg_layout *lay)
{
    *lay = (struct seg_layout){ 0 };
    if (!seg_header_ok(s, buf, len)) {
        size_t nz = nonzero_end(buf, len);
        if (!is_last || intact_record_after(buf, len, nz, 0))
            return TXNLOG_ECORRUPT;
        /* nz may be 0 (created, never written): it goes all the same */
        lay->drop_file = true;
        lay->torn_bytes = nz;
        return 0;
    }
    lay->version = base_get_be32(buf + 4);
    size_t off = SEG_HEADER_BYTES, n;
    while ((n = record_at(buf, len, len, off)) != 0) {
        int64_t zxid = (int64_t)base_get_be64(buf + off + FRAME_BYTES);
        if (zxid <= s->last_zxid || (!is_last && zxid >= upper) ||
            (off == SEG_HEADER_BYTES && zxid != seg->zxid))
            return TXNLOG_EORDER;
        s->last_zxid = zxid;
        off += n;
    }
    lay->valid_end = off;
    return seg_check_tail(buf, len, is_last, lay);
}

/* Pass two: decode and hand out the records after from_zxid. */
static int seg_deliver(struct scan *s, const uint8_t *buf, const struct seg_layout *lay)
{
    size_t valid_end = lay->valid_end;
    size_t off = SEG_HEADER_BYTES;
    while (off < valid_end) {
        uint32_t plen = base_get_be32(buf + off);
        const uint8_t *payload = buf + off + FRAME_BYTES;
        off += FRAME_BYTES + plen;
        BASE_ASSERT(off <= valid_end);
        if ((int64_t)base_get_be64(payload) <= s->from_zxid)
            continue;
        struct txn x;
        int rc = txn_decode_version(payload, plen, lay->version, &x);
        if (rc != 0)
            return rc == -EBADMSG ? TXNLOG_ECORRUPT : rc;
        rc = s->fn(s->arg, &x);
        txn_free(&x);
        s->stats.records++;
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Removes a torn tail: the whole file when its header never landed,
 * else everything after the last intact record (the preallocated zeros go
 * too; the writer never appends to an existing segment). Also cuts a
 * sound segment's preallocated zeros (scan_segment). */
static int seg_repair(struct scan *s, const char *path, const struct seg_layout *lay)
{
    if (lay->drop_file) {
        int rc = storage_unlink(s->st, path);
        return rc != 0 ? rc : storage_sync_dir(s->st, s->dir);
    }
    struct storage_file *f;
    int rc = storage_open(s->st, path, 0, &f);
    if (rc != 0)
        return rc;
    rc = storage_truncate(f, lay->valid_end);
    if (rc == 0)
        rc = storage_datasync(f);
    int crc = storage_close(f);
    return rc != 0 ? rc : crc;
}

static int scan_segment(struct scan *s, const struct seg_list *l, size_t i)
{
    char path[PATH_MAX];
    int rc = seg_path(s->dir, l->items[i].zxid, path, sizeof path);
    uint8_t *buf = NULL;
    size_t len = 0;
    if (rc == 0)
        rc = seg_read(s->st, path, &buf, &len);
    if (rc != 0)
        return rc;
    bool is_last = i + 1 == l->count;
    int64_t upper = is_last ? INT64_MAX : l->items[i + 1].zxid; /* unused when last */
    struct seg_layout lay;
    rc = seg_check(s, &l->items[i], buf, len, upper, is_last, &lay);
    if (rc == 0 && s->fn != NULL && !lay.drop_file)
        rc = seg_deliver(s, buf, &lay);
    /* repair last, once everything before it was accepted */
    if (rc == 0 && (lay.torn_bytes > 0 || lay.drop_file)) {
        s->repair_needed = true;
        s->stats.torn_bytes = lay.torn_bytes;
        if (!s->probe)
            rc = seg_repair(s, path, &lay);
    } else if (rc == 0 && !s->probe && !lay.drop_file && lay.valid_end < len) {
        /* Only the preallocated zeros follow the last record. The writer
         * never appends to an existing segment, so they would only cost
         * every later recovery a read of them (a restart starts a new
         * segment: without this, each restart added a whole
         * preallocation to the next recovery's reading). */
        rc = seg_repair(s, path, &lay);
    }
    free(buf);
    return rc;
}

/* Scans segments [first, count) of l. */
static int scan_from(struct scan *s, const struct seg_list *l, size_t first)
{
    int rc = 0;
    for (size_t i = first; rc == 0 && i < l->count; i++)
        rc = scan_segment(s, l, i);
    s->stats.last_zxid = s->last_zxid == INT64_MIN ? 0 : s->last_zxid;
    return rc;
}

/* Segment i holds only zxids below the next segment's name, so it can be
 * skipped when that name is at most from_zxid + 1. */
static size_t first_needed(const struct seg_list *l, int64_t from_zxid)
{
    size_t i = 0;
    while (i + 1 < l->count &&
           (from_zxid == INT64_MAX || l->items[i + 1].zxid <= from_zxid + 1))
        i++;
    return i;
}

int txnlog_replay(struct storage *st, const char *dir, int64_t from_zxid, txnlog_replay_fn fn,
                  void *arg, struct txnlog_replay_stats *stats)
{
    BASE_ASSERT(fn != NULL);
    struct seg_list l;
    int rc = seg_list_load(st, dir, &l);
    if (rc != 0)
        return rc;
    struct scan s = { .st = st, .dir = dir, .from_zxid = from_zxid, .fn = fn, .arg = arg,
                      .last_zxid = INT64_MIN };
    rc = scan_from(&s, &l, first_needed(&l, from_zxid));
    free(l.items);
    if (stats != NULL)
        *stats = s.stats;
    return rc;
}

int txnlog_purge(struct storage *st, const char *dir, int64_t keep_from_zxid)
{
    struct seg_list l;
    int rc = seg_list_load(st, dir, &l);
    if (rc != 0)
        return rc;
    int removed = 0;
    char path[PATH_MAX];
    /* never the last segment: the writer may be appending to it */
    for (size_t i = 0; rc == 0 && i + 1 < l.count && l.items[i + 1].zxid <= keep_from_zxid; i++) {
        rc = seg_path(dir, l.items[i].zxid, path, sizeof path);
        if (rc == 0)
            rc = storage_unlink(st, path);
        removed += rc == 0;
    }
    if (removed > 0) {
        int src = storage_sync_dir(st, dir);
        if (rc == 0)
            rc = src;
    }
    free(l.items);
    return rc != 0 ? rc : removed;
}

/* ---- writer ---------------------------------------------------------------------- */

/* Where the writer stands in its current segment. */
struct seg_pos {
    struct storage_file *file; /* NULL before the first sync after open */
    int64_t zxid;              /* the segment's name */
    uint64_t off;              /* end of the records written so far */
    uint64_t prealloc;         /* bytes allocated */
};

struct txnlog {
    struct storage *st;
    char *dir;
    struct txnlog_opts opts;
    struct seg_pos cur;
    struct base_buf pending; /* framed records appended since the last good sync */
    int64_t last_zxid;
    int64_t durable_zxid;
    bool broken; /* a truncation failed half way: only a restart may go on */
    struct base_latency sync_us; /* each successful txnlog_sync: measured, never decided on */
};

/* The last zxid in the log: scanning only the last segment is enough unless
 * it holds no record, then one segment further back at a time. Those
 * probes repair nothing: as in replay, a torn last segment may go only
 * once every segment scanned before it was accepted (and l would name a
 * removed file). After a crash, one more pass over the same segments
 * repairs, as replay would. */
static int open_scan(struct storage *st, const char *dir, int64_t *last)
{
    struct seg_list l;
    int rc = seg_list_load(st, dir, &l);
    struct scan s = { .st = st, .dir = dir, .last_zxid = INT64_MIN };
    size_t first = l.count;
    while (rc == 0 && first > 0 && s.last_zxid == INT64_MIN) {
        first--;
        s = (struct scan){ .st = st, .dir = dir, .last_zxid = INT64_MIN, .probe = true };
        rc = scan_from(&s, &l, first);
    }
    if (rc == 0 && s.repair_needed) {
        int64_t probed = s.last_zxid;
        s = (struct scan){ .st = st, .dir = dir, .last_zxid = INT64_MIN };
        rc = scan_from(&s, &l, first);
        BASE_ASSERT(rc != 0 || s.last_zxid == probed);
    }
    free(l.items);
    *last = s.last_zxid == INT64_MIN ? 0 : s.last_zxid;
    return rc;
}

int txnlog_open(struct storage *st, const char *dir, const struct txnlog_opts *opts,
                struct txnlog **out)
{
    struct txnlog *log = calloc(1, sizeof *log);
    if (log == NULL)
        return -ENOMEM;
    log->dir = strdup(dir);
    if (log->dir == NULL) {
        free(log);
        return -ENOMEM;
    }
    log->st = st;
    if (opts != NULL)
        log->opts = *opts;
    if (log->opts.segment_bytes_max == 0)
        log->opts.segment_bytes_max = TXNLOG_SEGMENT_BYTES_DEFAULT;
    if (log->opts.prealloc_bytes == 0)
        log->opts.prealloc_bytes = TXNLOG_PREALLOC_BYTES_DEFAULT;
    int rc = open_scan(st, dir, &log->last_zxid);
    if (rc != 0) {
        txnlog_close(log);
        return rc;
    }
    log->durable_zxid = log->last_zxid;
    *out = log;
    return 0;
}

void txnlog_close(struct txnlog *log)
{
    if (log == NULL)
        return;
    if (log->cur.file != NULL)
        (void)storage_close(log->cur.file); /* nothing left to lose: no I/O pending */
    base_buf_free(&log->pending);
    free(log->dir);
    free(log);
}

int64_t txnlog_last_zxid(const struct txnlog *log)
{
    return log->last_zxid;
}

int64_t txnlog_durable_zxid(const struct txnlog *log)
{
    return log->durable_zxid;
}

/* Frames the record body the caller just wrote at pending[start + FRAME_BYTES..]. */
static void seal_record(struct txnlog *log, size_t start, int64_t zxid)
{
    uint8_t *frame = log->pending.data + start;
    size_t plen = log->pending.len - start - FRAME_BYTES;
    base_put_be32(frame, (uint32_t)plen);
    base_put_be32(frame + 4, base_crc32c(0, frame + FRAME_BYTES, plen));
    log->last_zxid = zxid;
}

int txnlog_append(struct txnlog *log, const struct txn *x)
{
    if (log->broken)
        return -EIO;
    if (x->zxid <= log->last_zxid)
        return TXNLOG_EORDER;
    size_t start = log->pending.len;
    int rc = base_buf_reserve(&log->pending, FRAME_BYTES);
    if (rc != 0)
        return rc;
    log->pending.len += FRAME_BYTES;
    rc = txn_encode(&log->pending, x);
    if (rc != 0) {
        log->pending.len = start;
        return rc;
    }
    seal_record(log, start, x->zxid);
    return 0;
}

int txnlog_append_encoded(struct txnlog *log, const uint8_t *p, size_t len)
{
    if (log->broken)
        return -EIO;
    if (len < TXNLOG_TXN_HEADER_BYTES || len > TXNLOG_RECORD_BYTES_MAX)
        return -EINVAL;
    int64_t zxid = (int64_t)base_get_be64(p); /* txn_encode's first field */
    if (zxid <= log->last_zxid)
        return TXNLOG_EORDER;
    size_t start = log->pending.len;
    int rc = base_buf_reserve(&log->pending, FRAME_BYTES + len);
    if (rc != 0)
        return rc;
    log->pending.len += FRAME_BYTES;
    rc = base_buf_append(&log->pending, p, len);
    BASE_ASSERT(rc == 0); /* reserved above */
    seal_record(log, start, zxid);
    return 0;
}

/* The txn type field of a txn_encode encoding (after zxid, session, cxid
 * and time), for an entry the caller hands in already encoded. */
#define TXN_TYPE_OFFSET 28u

int txnlog_append_entry(struct txnlog *log, const struct raft_entry *e)
{
    struct txn x = { .zxid = e->zxid };
    switch (e->type) {
    case RAFT_ENTRY_NOOP:
        if (e->len != 0)
            return -EINVAL;
        x.type = TXN_NOOP;
        return txnlog_append(log, &x);
    case RAFT_ENTRY_DATA: {
        if (e->len < TXNLOG_TXN_HEADER_BYTES || (int64_t)base_get_be64(e->data) != e->zxid)
            return -EINVAL;
        int32_t type = (int32_t)base_get_be32(e->data + TXN_TYPE_OFFSET);
        if (type == TXN_NOOP || type == TXN_CONFIG)
            return -EINVAL;
        return txnlog_append_encoded(log, e->data, e->len);
    }
    case RAFT_ENTRY_CONFIG: {
        if (e->len == 0 || e->len > RAFT_CONFIG_BYTES_MAX)
            return -EINVAL;
        /* borrowed: txn_encode only reads the op, and x is never freed */
        struct txn_op op = { .type = TXN_CONFIG, .client_type = ZK_OP_RECONFIG,
                             .data = (uint8_t *)(uintptr_t)e->data,
                             .data_len = (int32_t)e->len };
        x.type = TXN_CONFIG;
        x.nops = 1;
        x.ops = &op;
        int rc = txnlog_append(log, &x);
        /* a membership that does not decode is refused before it is logged */
        BASE_ASSERT(rc != 0 || log->last_zxid == e->zxid);
        return rc;
    }
    default:
        return -EINVAL;
    }
}

uint8_t txnlog_entry_type(const struct txn *x)
{
    if (x->type == TXN_NOOP)
        return RAFT_ENTRY_NOOP;
    if (x->type != TXN_CONFIG)
        return RAFT_ENTRY_DATA;
    /* decode let nothing else through (config_shape_ok) */
    BASE_ASSERT(x->nops == 1 && x->ops[0].type == TXN_CONFIG && x->ops[0].data_len > 0);
    return RAFT_ENTRY_CONFIG;
}

/* One sync attempt: the position it started from (restored on failure)
 * and the segments it created (removed on failure). */
struct sync_attempt {
    struct seg_pos saved;
    int64_t *created;
    size_t ncreated;
    size_t cap;
};

static int attempt_note_created(struct sync_attempt *a, int64_t zxid)
{
    if (base_grow(&a->created, &a->cap, a->ncreated + 1, sizeof *a->created) != 0)
        return -ENOMEM;
    a->created[a->ncreated++] = zxid;
    return 0;
}

/* Grows the preallocated area of a segment to cover end, a chunk at a
 * time, so fdatasync rarely has a file size to write (FilePadding). */
static int seg_prealloc(struct seg_pos *p, uint64_t chunk, uint64_t end)
{
    if (end <= p->prealloc)
        return 0;
    uint64_t target = (end + chunk - 1) / chunk * chunk;
    int rc = storage_preallocate(p->file, p->prealloc, target - p->prealloc);
    if (rc == 0)
        p->prealloc = target;
    return rc;
}

/* Creates segment "log.<zxid>": header, first chunk, and a durable name. */
static int seg_create(struct txnlog *log, int64_t zxid, struct seg_pos *out)
{
    char path[PATH_MAX];
    int rc = seg_path(log->dir, zxid, path, sizeof path);
    struct storage_file *f = NULL;
    /* private: createSession records hold session passwords */
    if (rc == 0)
        rc = storage_open(log->st, path, STORAGE_CREATE | STORAGE_PRIVATE, &f);
    if (rc != 0)
        return rc;
    *out = (struct seg_pos){ .file = f, .zxid = zxid, .off = SEG_HEADER_BYTES };
    uint8_t h[SEG_HEADER_BYTES];
    seg_header_fill(h, log->opts.db_id);
    rc = seg_prealloc(out, log->opts.prealloc_bytes, SEG_HEADER_BYTES);
    if (rc == 0)
        rc = storage_pwrite(f, h, sizeof h, 0);
    if (rc == 0)
        rc = storage_sync_dir(log->st, log->dir);
    if (rc != 0) {
        (void)storage_close(f);
        out->file = NULL;
    }
    return rc;
}

/* Closes the current segment (after making it durable) and starts a new
 * one named after the record about to be written. */
static int seg_roll(struct txnlog *log, struct sync_attempt *a, int64_t zxid)
{
    int rc = 0;
    if (log->cur.file != NULL)
        rc = storage_datasync(log->cur.file);
    if (rc != 0)
        return rc;
    rc = attempt_note_created(a, zxid);
    struct seg_pos next;
    if (rc == 0)
        rc = seg_create(log, zxid, &next);
    if (rc != 0)
        return rc;
    if (log->cur.file != NULL && log->cur.file != a->saved.file)
        (void)storage_close(log->cur.file); /* synced above; a close error loses nothing */
    log->cur = next;
    return 0;
}

/* Writes pending records from the current position on, one pwrite per run
 * of records that go to the same segment. */
static int write_pending(struct txnlog *log, struct sync_attempt *a)
{
    const struct base_buf *b = &log->pending;
    size_t pos = 0;
    while (pos < b->len) {
        if (log->cur.file == NULL || log->cur.off >= log->opts.segment_bytes_max) {
            int rc = seg_roll(log, a, (int64_t)base_get_be64(b->data + pos + FRAME_BYTES));
            if (rc != 0)
                return rc;
        }
        size_t end = pos;
        uint64_t off = log->cur.off;
        while (end < b->len && off < log->opts.segment_bytes_max) {
            size_t n = FRAME_BYTES + base_get_be32(b->data + end);
            end += n;
            off += n;
        }
        BASE_ASSERT(end > pos && end <= b->len);
        int rc = seg_prealloc(&log->cur, log->opts.prealloc_bytes, off);
        if (rc == 0)
            rc = storage_pwrite(log->cur.file, b->data + pos, end - pos, log->cur.off);
        if (rc != 0)
            return rc;
        log->cur.off = off;
        pos = end;
    }
    return 0;
}

/* Back to where the attempt started. Segments it created go away so a
 * retry recreates them from scratch; if removing one fails it only holds
 * records that were never reported durable (like the bytes this attempt
 * wrote past saved.off), which a retry overwrites or recovery may replay. */
static void attempt_undo(struct txnlog *log, struct sync_attempt *a)
{
    if (log->cur.file != NULL && log->cur.file != a->saved.file)
        (void)storage_close(log->cur.file);
    char path[PATH_MAX];
    for (size_t i = 0; i < a->ncreated; i++) {
        if (seg_path(log->dir, a->created[i], path, sizeof path) == 0)
            (void)storage_unlink(log->st, path);
    }
    log->cur = a->saved;
}

int txnlog_sync(struct txnlog *log)
{
    if (log->broken)
        return -EIO;
    if (log->pending.len == 0)
        return 0;
    struct sync_attempt a = { .saved = log->cur };
    int64_t t0_us = base_mono_us();
    int rc = write_pending(log, &a);
    if (rc == 0)
        rc = storage_datasync(log->cur.file);
    if (rc == 0)
        base_latency_add(&log->sync_us, (uint64_t)(base_mono_us() - t0_us));
    if (rc != 0) {
        attempt_undo(log, &a);
    } else {
        if (a.saved.file != NULL && a.saved.file != log->cur.file)
            (void)storage_close(a.saved.file); /* durable already (seg_roll synced it) */
        log->pending.len = 0;
        log->durable_zxid = log->last_zxid;
    }
    free(a.created);
    BASE_ASSERT(rc != 0 || log->durable_zxid == log->last_zxid);
    return rc;
}

void txnlog_sync_latency(const struct txnlog *log, struct base_latency_snapshot *out)
{
    base_latency_read(&log->sync_us, out);
}

/* ---- truncation ------------------------------------------------------------------ */

/* Drops the buffered records above zxid (never written, nothing to undo on
 * disk) and returns the highest zxid still buffered, 0 when none is. */
static int64_t pending_cut_after(struct base_buf *b, int64_t zxid)
{
    size_t pos = 0;
    int64_t kept = 0;
    while (pos < b->len) {
        int64_t z = (int64_t)base_get_be64(b->data + pos + FRAME_BYTES);
        if (z > zxid)
            break;
        kept = z;
        pos += FRAME_BYTES + base_get_be32(b->data + pos);
    }
    BASE_ASSERT(pos <= b->len);
    b->len = pos;
    return kept;
}

/* Cuts segment name (which holds records up to and past zxid) right after
 * its last record not above zxid, and syncs it. The records before the cut
 * were checked when the log was opened or written; a segment that no
 * longer frames up to there is damage, not something to cut around. */
static int seg_cut_after(struct txnlog *log, int64_t name, int64_t zxid)
{
    char path[PATH_MAX];
    int rc = seg_path(log->dir, name, path, sizeof path);
    uint8_t *buf = NULL;
    size_t len = 0;
    if (rc == 0)
        rc = seg_read(log->st, path, &buf, &len);
    if (rc != 0)
        return rc;
    size_t off = SEG_HEADER_BYTES, n = 0;
    if (len < SEG_HEADER_BYTES)
        rc = TXNLOG_ECORRUPT;
    while (rc == 0 && (n = record_at(buf, len, len, off)) != 0 &&
           (int64_t)base_get_be64(buf + off + FRAME_BYTES) <= zxid)
        off += n;
    if (rc == 0 && n == 0 && nonzero_end(buf, len) > off)
        rc = TXNLOG_ECORRUPT; /* bytes that frame no record where records were */
    free(buf);
    struct storage_file *f = NULL;
    if (rc == 0)
        rc = storage_open(log->st, path, 0, &f);
    if (rc != 0)
        return rc;
    rc = storage_truncate(f, off);
    if (rc == 0)
        rc = storage_datasync(f);
    int crc = storage_close(f);
    return rc != 0 ? rc : crc;
}

/* The durable half of txnlog_truncate_after: whole segments above zxid
 * first (newest first, so that what is left is always a prefix), then the
 * one holding the cut. */
static int disk_cut_after(struct txnlog *log, int64_t zxid)
{
    struct seg_list l;
    int rc = seg_list_load(log->st, log->dir, &l);
    if (rc != 0)
        return rc;
    char path[PATH_MAX];
    size_t keep = l.count;
    while (rc == 0 && keep > 0 && l.items[keep - 1].zxid > zxid) {
        keep--;
        rc = seg_path(log->dir, l.items[keep].zxid, path, sizeof path);
        if (rc == 0)
            rc = storage_unlink(log->st, path);
    }
    if (rc == 0 && keep < l.count)
        rc = storage_sync_dir(log->st, log->dir);
    if (rc == 0 && keep > 0)
        rc = seg_cut_after(log, l.items[keep - 1].zxid, zxid);
    free(l.items);
    return rc;
}

int txnlog_truncate_after(struct txnlog *log, int64_t zxid)
{
    BASE_ASSERT(zxid >= 0);
    if (log->broken)
        return -EIO;
    if (zxid >= log->last_zxid)
        return 0;
    int64_t buffered = pending_cut_after(&log->pending, zxid);
    if (log->durable_zxid <= zxid) {
        /* only never-written records went */
        log->last_zxid = buffered != 0 ? buffered : log->durable_zxid;
        return 0;
    }
    BASE_ASSERT(log->pending.len == 0); /* every buffered record was above the durable ones */
    if (log->cur.file != NULL)
        (void)storage_close(log->cur.file); /* synced: a close error loses nothing */
    log->cur = (struct seg_pos){ 0 };
    int64_t last = 0;
    int rc = disk_cut_after(log, zxid);
    if (rc == 0)
        rc = open_scan(log->st, log->dir, &last);
    if (rc != 0) {
        log->broken = true;
        return rc;
    }
    BASE_ASSERT(last <= zxid);
    log->last_zxid = log->durable_zxid = last;
    return 0;
}

/* ---- term and vote (Raft's hard state) ------------------------------------------------ */

#define HS_MAGIC "LRHS"
#define HS_VERSION 1u
#define HS_BYTES 28u /* magic, u32 version, u32 term, u32 vote, u64 commit, u32 CRC-32C */

static void hs_encode(const struct raft_hard_state *hs, uint8_t out[HS_BYTES])
{
    memcpy(out, HS_MAGIC, 4);
    base_put_be32(out + 4, HS_VERSION);
    base_put_be32(out + 8, hs->term);
    base_put_be32(out + 12, hs->vote);
    base_put_be64(out + 16, (uint64_t)hs->commit_zxid);
    base_put_be32(out + 24, base_crc32c(0, out, HS_BYTES - 4));
}

static bool hs_decode(const uint8_t *in, size_t len, struct raft_hard_state *hs)
{
    if (len != HS_BYTES || memcmp(in, HS_MAGIC, 4) != 0 || base_get_be32(in + 4) != HS_VERSION ||
        base_get_be32(in + 24) != base_crc32c(0, in, HS_BYTES - 4))
        return false;
    hs->term = base_get_be32(in + 8);
    hs->vote = base_get_be32(in + 12);
    hs->commit_zxid = (int64_t)base_get_be64(in + 16);
    return hs->term <= RAFT_TERM_MAX && hs->commit_zxid >= 0;
}

static int hs_path(const char *dir, char *out, size_t cap)
{
    int n = snprintf(out, cap, "%s/%s", dir, TXNLOG_HARD_STATE_FILE);
    return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

int txnlog_hard_state_write(struct storage *st, const char *dir, const struct raft_hard_state *hs)
{
    BASE_ASSERT(hs->term <= RAFT_TERM_MAX && hs->commit_zxid >= 0);
    char path[PATH_MAX];
    int rc = hs_path(dir, path, sizeof path);
    if (rc != 0)
        return rc;
    uint8_t buf[HS_BYTES];
    hs_encode(hs, buf);
    return storage_write_whole(st, dir, path, buf, sizeof buf, 0);
}

int txnlog_hard_state_read(struct storage *st, const char *dir, struct raft_hard_state *hs)
{
    char path[PATH_MAX];
    int rc = hs_path(dir, path, sizeof path);
    struct storage_file *f = NULL;
    if (rc == 0)
        rc = storage_open(st, path, 0, &f);
    if (rc != 0)
        return rc;
    uint8_t buf[HS_BYTES + 1];
    size_t got = 0;
    rc = storage_pread(f, buf, sizeof buf, 0, &got);
    int crc = storage_close(f);
    if (rc == 0)
        rc = crc;
    if (rc == 0 && !hs_decode(buf, got, hs))
        rc = TXNLOG_ECORRUPT;
    return rc;
}

/* ---- a membership kept beside a snapshot ---------------------------------------- */

#define CF_MAGIC "LRCF"
#define CF_VERSION 1u
#define CF_HEADER_BYTES 20u /* magic, u32 version, u64 zxid, u32 length */

size_t txnlog_config_file_encode(int64_t zxid, const struct raft_config *c,
                                 uint8_t out[TXNLOG_CONFIG_FILE_BYTES_MAX])
{
    size_t n = raft_config_encode(c, out + CF_HEADER_BYTES);
    BASE_ASSERT(n > 0 && n <= RAFT_CONFIG_BYTES_MAX);
    memcpy(out, CF_MAGIC, 4);
    base_put_be32(out + 4, CF_VERSION);
    base_put_be64(out + 8, (uint64_t)zxid);
    base_put_be32(out + 16, (uint32_t)n);
    size_t len = CF_HEADER_BYTES + n;
    base_put_be32(out + len, base_crc32c(0, out, len));
    return len + 4;
}

int txnlog_config_file_decode(const uint8_t *p, size_t len, int64_t *zxid,
                              struct raft_config *out)
{
    if (len < CF_HEADER_BYTES + 4 || len > TXNLOG_CONFIG_FILE_BYTES_MAX ||
        memcmp(p, CF_MAGIC, 4) != 0 || base_get_be32(p + 4) != CF_VERSION ||
        base_get_be32(p + 16) != len - CF_HEADER_BYTES - 4 ||
        base_get_be32(p + len - 4) != base_crc32c(0, p, len - 4))
        return TXNLOG_ECORRUPT;
    if (raft_config_decode(p + CF_HEADER_BYTES, len - CF_HEADER_BYTES - 4, out) != RAFT_OK)
        return TXNLOG_ECORRUPT;
    *zxid = (int64_t)base_get_be64(p + 8);
    return 0;
}

int txnlog_config_file_write(struct storage *st, const char *dir, const char *path, int64_t zxid,
                             const struct raft_config *c)
{
    uint8_t *buf = malloc(TXNLOG_CONFIG_FILE_BYTES_MAX);
    if (buf == NULL)
        return -ENOMEM;
    size_t len = txnlog_config_file_encode(zxid, c, buf);
    /* what is written is what a read gives back */
    BASE_ASSERT(len <= TXNLOG_CONFIG_FILE_BYTES_MAX);
    int rc = storage_write_whole(st, dir, path, buf, len, 0);
    free(buf);
    return rc;
}

int txnlog_config_file_read(struct storage *st, const char *path, int64_t *zxid,
                            struct raft_config *out)
{
    struct storage_file *f = NULL;
    int rc = storage_open(st, path, 0, &f);
    if (rc != 0)
        return rc;
    uint8_t *buf = malloc(TXNLOG_CONFIG_FILE_BYTES_MAX + 1);
    size_t got = 0;
    rc = buf != NULL ? storage_pread(f, buf, TXNLOG_CONFIG_FILE_BYTES_MAX + 1, 0, &got) : -ENOMEM;
    int crc = storage_close(f);
    if (rc == 0)
        rc = crc;
    if (rc == 0)
        rc = txnlog_config_file_decode(buf, got, zxid, out);
    free(buf);
    return rc;
}
