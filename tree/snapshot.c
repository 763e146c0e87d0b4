/*
 * snapshot.c — the tree as bytes and back (format and threading: tree.h,
 * "snapshots").
 *
 * Writing is a fuzzy, ZooKeeper-style walk (FileTxnSnapLog / DataTree
 * serialize): depth-first from "/", looking every node up by path under its
 * own short rcu_read_lock section, so the walk never pins a grace period and
 * never dereferences a znode across sections. A node is emitted after its
 * children (post-order) so that its num_children can be the number of child
 * records actually written: a child deleted between the parent's capture and
 * its own lookup is skipped and not counted. That keeps every snapshot a
 * self-consistent tree whose digest the loader can check.
 *
 * Loading rebuilds the tree bottom-up from the post-order stream with a
 * stack (no parent lookups, no sorting) and builds everything off to the
 * side before publishing, so a bad snapshot leaves the tree untouched.
 * Version 1 differs only in its session records (no password), so one
 * loader reads both and branches in load_session alone.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tree/tree_int.h"

#define HEADER_BYTES 16u             /* magic, version, zxid_start */
#define TRAILER_BYTES 29u            /* 'T', 3 x u64, u32 crc */
#define NODE_RECORD_BYTES_MIN 71u    /* 'N' + "/" + stat + children + data_len + acl_count */
#define SESSION_V1_RECORD_BYTES 13u  /* 'S', i64 id, i32 timeout */
#define SESSION_RECORD_BYTES 30u     /* 'S', i64 id, i32 timeout, u8 flags, passwd */
#define SESSION_PASSWD_KNOWN 1u      /* the one flag of a session record */
#define OUT_BUF_BYTES (256u * 1024u) /* what the writer hands out per call, at most */
#define TAG_NODE 'N'
#define TAG_SESSION 'S'
#define TAG_TRAILER 'T'
#define ACL_OPEN 0  /* acl_count meaning the shared world:anyone ALL list */
#define ACL_NONE -1 /* acl_count meaning a node without an ACL */

/* =================================================================================
 * Writing
 * ================================================================================= */

/* Buffered output: bytes collect in buf and go to out() in OUT_BUF_BYTES
 * pieces; the CRC covers each piece as it leaves. The first error sticks. */
struct sink {
    tree_snap_out_fn out;
    void *arg;
    uint8_t *buf;
    size_t len;
    uint32_t crc;
    uint64_t total_bytes;
    int err;
};

static void sink_flush(struct sink *s)
{
    if (s->err != 0 || s->len == 0)
        return;
    s->crc = base_crc32c(s->crc, s->buf, s->len);
    s->total_bytes += s->len;
    s->err = s->out(s->arg, s->buf, s->len);
    s->len = 0;
}

static void sink_put(struct sink *s, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n > 0 && s->err == 0) {
        if (s->len == OUT_BUF_BYTES)
            sink_flush(s);
        size_t k = OUT_BUF_BYTES - s->len < n ? OUT_BUF_BYTES - s->len : n;
        memcpy(s->buf + s->len, b, k);
        s->len += k;
        b += k;
        n -= k;
    }
}

static void sink_u8(struct sink *s, uint8_t v)
{
    sink_put(s, &v, 1);
}

static void sink_u32(struct sink *s, uint32_t v)
{
    uint8_t b[4];
    base_put_le32(b, v);
    sink_put(s, b, 4);
}

static void sink_u64(struct sink *s, uint64_t v)
{
    uint8_t b[8];
    base_put_le64(b, v);
    sink_put(s, b, 8);
}

static void sink_acl(struct sink *s, const struct tree_acl *acl)
{
    if (acl == NULL || acl == tree_acl_open()) {
        sink_u32(s, (uint32_t)(acl == NULL ? ACL_NONE : ACL_OPEN));
        return;
    }
    sink_u32(s, (uint32_t)acl->count);
    for (int32_t i = 0; i < acl->count; i++) {
        const struct tree_acl_entry *e = &acl->items[i];
        size_t sl = strlen(e->scheme), il = strlen(e->id);
        sink_u32(s, (uint32_t)e->perms);
        sink_u32(s, (uint32_t)sl);
        sink_put(s, e->scheme, sl);
        sink_u32(s, (uint32_t)il);
        sink_put(s, e->id, il);
    }
}

/* One node on the walk's stack: what was captured of it under RCU, plus the
 * names of the children its captured version listed (NUL-separated) and how
 * far the walk got through them. Buffers are reused between depths. */
struct frame {
    char *path;
    size_t path_len, path_cap;
    struct zk_stat st;
    struct zdata *data;   /* one reference */
    struct tree_acl *acl; /* one reference */
    char *names;
    size_t names_len, names_cap, names_pos;
    uint32_t written; /* child records emitted so far */
};

static bool frame_copy_names(struct frame *f, const struct zkids *kids)
{
    size_t need = 0;
    for (uint32_t i = 0; kids != NULL && i < kids->count; i++)
        need += kids->items[i]->path_len - kids->items[i]->name_off + 1;
    if (base_grow(&f->names, &f->names_cap, need, 1) != 0)
        return false;
    size_t at = 0;
    for (uint32_t i = 0; kids != NULL && i < kids->count; i++) {
        const struct znode *c = kids->items[i];
        size_t n = c->path_len - c->name_off + 1; /* with its NUL */
        memcpy(f->names + at, znode_name(c), n);
        at += n;
    }
    f->names_len = at;
    f->names_pos = 0;
    return true;
}

/* Captures the node at f->path in its own read-side section. Returns 1 when
 * captured, 0 when the node is gone (deleted since its parent was captured),
 * -ENOMEM. References taken here keep data and ACL alive after unlock. */
static int frame_capture(const struct tree *t, struct frame *f)
{
    int rc = 0;
    rcu_read_lock();
    struct znode *n = tree_lookup(t, f->path, f->path_len);
    if (n != NULL) {
        const struct zver *v = znode_ver(n);
        if (frame_copy_names(f, v->kids)) {
            f->st = v->st;
            f->data = zdata_ref(v->data);
            f->acl = v->acl != NULL ? tree_acl_ref(v->acl) : NULL;
            f->written = 0;
            rc = 1;
        } else {
            rc = -ENOMEM;
        }
    }
    tree_read_unlock();
    return rc;
}

/* Drops the frame's references. If they are the last ones, the version that
 * held them was already retired and freed after a grace period, so no
 * reader can still see them and freeing here is safe. */
static void frame_release(struct frame *f)
{
    zdata_unref(f->data);
    f->data = NULL;
    if (f->acl != NULL)
        tree_acl_unref(f->acl);
    f->acl = NULL;
}

struct walk {
    const struct tree *t;
    struct sink *sink;
    struct frame *frames;
    size_t depth, cap;
    uint64_t node_count;
    uint64_t digest;
};

static void walk_emit(struct walk *w, struct frame *f)
{
    struct sink *s = w->sink;
    f->st.num_children = (int32_t)f->written;
    w->digest += tree_digest_parts(f->path, f->path_len, &f->st, f->data, f->acl);
    w->node_count++;
    sink_u8(s, TAG_NODE);
    sink_u32(s, (uint32_t)f->path_len);
    sink_put(s, f->path, f->path_len);
    const int64_t wide[] = { f->st.czxid, f->st.mzxid, f->st.ctime,
                             f->st.mtime, f->st.ephemeral_owner, f->st.pzxid };
    for (size_t i = 0; i < sizeof wide / sizeof wide[0]; i++)
        sink_u64(s, (uint64_t)wide[i]);
    sink_u32(s, (uint32_t)f->st.version);
    sink_u32(s, (uint32_t)f->st.cversion);
    sink_u32(s, (uint32_t)f->st.aversion);
    sink_u32(s, f->written);
    sink_u32(s, (uint32_t)(f->data != NULL ? f->data->len : -1));
    if (f->data != NULL)
        sink_put(s, f->data->bytes, (size_t)f->data->len);
    sink_acl(s, f->acl);
}

/* Makes frames[w->depth] the next child of the top frame. -ENOMEM or 0. */
static int walk_child_path(struct walk *w, const char *name, size_t name_len)
{
    size_t old_cap = w->cap;
    if (base_grow(&w->frames, &w->cap, w->depth + 1, sizeof *w->frames) != 0)
        return -ENOMEM;
    /* frames keep their buffers between depths: new ones start empty */
    memset(w->frames + old_cap, 0, (w->cap - old_cap) * sizeof *w->frames);
    const struct frame *p = &w->frames[w->depth - 1];
    struct frame *c = &w->frames[w->depth];
    size_t base = p->path_len == 1 ? 0 : p->path_len; /* children of "/" */
    if (base_grow(&c->path, &c->path_cap, base + 1 + name_len + 1, 1) != 0)
        return -ENOMEM;
    memcpy(c->path, p->path, base);
    c->path[base] = '/';
    memcpy(c->path + base + 1, name, name_len);
    c->path_len = base + 1 + name_len;
    c->path[c->path_len] = '\0';
    return 0;
}

/* One step: descend into the top frame's next child, or emit the top frame
 * once its children are done. Returns 0 or -ENOMEM. */
static int walk_step(struct walk *w)
{
    struct frame *top = &w->frames[w->depth - 1];
    if (top->names_pos < top->names_len) {
        const char *name = top->names + top->names_pos;
        size_t name_len = strlen(name);
        top->names_pos += name_len + 1;
        int rc = walk_child_path(w, name, name_len);
        if (rc == 0)
            rc = frame_capture(w->t, &w->frames[w->depth]);
        if (rc == 1)
            w->depth++;
        return rc < 0 ? rc : 0;
    }
    walk_emit(w, top);
    frame_release(top);
    if (--w->depth > 0)
        w->frames[w->depth - 1].written++;
    return 0;
}

static int walk_nodes(struct walk *w)
{
    w->cap = 32;
    w->frames = calloc(w->cap, sizeof *w->frames);
    if (w->frames == NULL)
        return -ENOMEM;
    struct frame *root = &w->frames[0];
    int rc = base_grow(&root->path, &root->path_cap, 2, 1);
    if (rc == 0) {
        memcpy(root->path, "/", 2);
        root->path_len = 1;
        rc = frame_capture(w->t, root);
        rc = rc == 0 ? -EIO : rc; /* "/" cannot be deleted: a broken tree */
    }
    w->depth = rc == 1 ? 1 : 0;
    rc = rc == 1 ? 0 : rc;
    /* bounded: each step consumes one child name or pops one frame */
    while (rc == 0 && w->depth > 0 && w->sink->err == 0)
        rc = walk_step(w);
    for (size_t i = 0; i < w->cap; i++) {
        if (i < w->depth)
            frame_release(&w->frames[i]);
        free(w->frames[i].path);
        free(w->frames[i].names);
    }
    free(w->frames);
    return rc;
}

struct sess_rec {
    int64_t id;
    int32_t timeout_ms;
    bool passwd_known;
    uint8_t passwd[TREE_PASSWD_BYTES];
};

/* Sessions are copied out in one short read-side section (there are
 * thousands, not millions) and written after it. */
static int write_sessions(const struct tree *t, struct sink *s, uint64_t *count)
{
    size_t cap = 64, n = 0;
    struct sess_rec *recs = malloc(cap * sizeof *recs);
    if (recs == NULL)
        return -ENOMEM;
    int rc = 0;
    struct cds_lfht_iter it;
    struct cds_lfht_node *node;
    rcu_read_lock();
    TREE_LFHT_FOREACH (tree_sessions_ht(t), &it, node) {
        const struct sess *ss = caa_container_of(node, struct sess, hnode);
        rc = base_grow(&recs, &cap, n + 1, sizeof *recs);
        if (rc != 0)
            break;
        struct sess_rec *r = &recs[n++];
        r->id = __atomic_load_n(&ss->pub.id, __ATOMIC_ACQUIRE);
        r->timeout_ms = ss->pub.timeout_ms;
        /* immutable once visible (tree.h), like the timeout */
        r->passwd_known = ss->pub.passwd_known;
        memcpy(r->passwd, ss->pub.passwd, sizeof r->passwd);
    }
    tree_read_unlock();
    for (size_t i = 0; rc == 0 && i < n; i++) {
        sink_u8(s, TAG_SESSION);
        sink_u64(s, (uint64_t)recs[i].id);
        sink_u32(s, (uint32_t)recs[i].timeout_ms);
        sink_u8(s, recs[i].passwd_known ? SESSION_PASSWD_KNOWN : 0);
        sink_put(s, recs[i].passwd, sizeof recs[i].passwd);
    }
    free(recs);
    *count = n;
    return rc;
}

static void write_header(struct sink *s, int64_t zxid_start)
{
    sink_put(s, TREE_SNAP_MAGIC, 4);
    sink_u32(s, TREE_SNAP_VERSION);
    sink_u64(s, (uint64_t)zxid_start);
}

/* The CRC covers everything before its own field, trailer counts included,
 * so a flipped count or digest is caught as corruption too. */
static void write_trailer(struct sink *s, uint64_t nodes, uint64_t sessions, uint64_t digest)
{
    sink_u8(s, TAG_TRAILER);
    sink_u64(s, nodes);
    sink_u64(s, sessions);
    sink_u64(s, digest);
    sink_flush(s);
    uint8_t b[4];
    base_put_le32(b, s->crc);
    sink_put(s, b, 4);
    s->total_bytes += s->len; /* the last flush below does not add to the CRC */
    if (s->err == 0)
        s->err = s->out(s->arg, s->buf, s->len);
    s->len = 0;
}

int tree_snapshot_write(const struct tree *t, tree_snap_out_fn out, void *arg,
                        struct tree_snap_info *info)
{
    struct sink *s = calloc(1, sizeof *s);
    if (s == NULL)
        return -ENOMEM;
    s->buf = malloc(OUT_BUF_BYTES);
    if (s->buf == NULL) {
        free(s);
        return -ENOMEM;
    }
    s->out = out;
    s->arg = arg;

    /* a walk across tree_replace would mix two trees: it is refused */
    uint64_t generation = tree_generation(t);
    /* everything applied up to here is in the walk; later txns may be too */
    int64_t zxid_start = tree_last_zxid(t);
    write_header(s, zxid_start);
    struct walk w = { .t = t, .sink = s };
    int rc = walk_nodes(&w);
    uint64_t sessions = 0;
    if (rc == 0 && s->err == 0)
        rc = write_sessions(t, s, &sessions);
    if (rc == 0 && s->err == 0)
        write_trailer(s, w.node_count, sessions, w.digest);
    if (rc == 0)
        rc = s->err;
    if (rc == 0 && ((generation & 1) || tree_generation(t) != generation))
        rc = -EAGAIN;
    if (rc == 0 && info != NULL)
        *info = (struct tree_snap_info){ .zxid_start = zxid_start, .node_count = w.node_count,
                                         .session_count = sessions, .digest = w.digest,
                                         .size_bytes = s->total_bytes };
    free(s->buf);
    free(s);
    return rc;
}

/* =================================================================================
 * Loading
 * ================================================================================= */

/* A node built but not yet published. existing: n is the znode tree_new
 * already made for this path (a built-in) and v its new version; otherwise
 * n is new and holds v. */
struct item {
    struct znode *n;
    struct zver *v;
    uint64_t hash;
    bool existing;
};

struct loader {
    struct tree *t;
    uint32_t version; /* of the snapshot: decides the session record's layout */
    struct base_rd r; /* header to trailer */
    struct item *items;
    uint64_t items_len, items_max;
    uint32_t *stack; /* finished subtrees waiting for their parent */
    uint64_t stack_len;
    uint32_t *seen; /* open addressing: item index + 1, 0 empty; catches duplicate paths */
    size_t seen_mask;
    struct tmap acls; /* encoded ACL bytes -> struct tree_acl * (one ref), shares lists */
    uint64_t existing_matched;
    uint64_t digest;
    struct sess_rec *sessions;
    uint64_t sessions_len, sessions_max;
};

/* 0 when path is new, TREE_SNAP_EFORMAT when already loaded. */
static int seen_add(struct loader *l, uint32_t idx)
{
    const struct item *it = &l->items[idx];
    for (size_t i = it->hash & l->seen_mask;; i = (i + 1) & l->seen_mask) {
        uint32_t s = l->seen[i];
        if (s == 0) {
            l->seen[i] = idx + 1;
            return 0;
        }
        const struct item *o = &l->items[s - 1];
        if (o->hash == it->hash && o->n->path_len == it->n->path_len &&
            memcmp(o->n->path, it->n->path, it->n->path_len) == 0)
            return TREE_SNAP_EFORMAT;
    }
}

/* Reads count ACL entries into *out (one reference). 0, TREE_SNAP_EFORMAT
 * or -ENOMEM. */
static int acl_decode(struct base_rd *r, int32_t count, struct tree_acl **out)
{
    struct tree_acl *acl = calloc(1, sizeof *acl);
    if (acl == NULL)
        return -ENOMEM;
    acl->refs_ = 1;
    acl->items = calloc((size_t)count, sizeof *acl->items);
    int rc = acl->items != NULL ? 0 : -ENOMEM;
    for (int32_t i = 0; rc == 0 && i < count; i++) {
        struct tree_acl_entry *e = &acl->items[i];
        e->perms = (int32_t)base_rd_le32(r);
        uint32_t sl = base_rd_le32(r);
        const uint8_t *sp = base_rd_take(r, sl);
        uint32_t il = base_rd_le32(r);
        const uint8_t *ip = base_rd_take(r, il);
        /* stored ACL strings are C strings (acl.c refuses NULs) */
        if (r->err || memchr(sp, '\0', sl) != NULL || memchr(ip, '\0', il) != NULL) {
            rc = TREE_SNAP_EFORMAT;
            break;
        }
        e->scheme = strndup((const char *)sp, sl);
        e->id = strndup((const char *)ip, il);
        acl->count = i + 1; /* owns what it holds, for the unref below */
        if (e->scheme == NULL || e->id == NULL)
            rc = -ENOMEM;
    }
    if (rc != 0) {
        tree_acl_unref(acl);
        return rc;
    }
    *out = acl;
    return 0;
}

static void acl_cache_unref(void *p)
{
    tree_acl_unref(p);
}

/* Reads an ACL field. Identical encoded lists share one tree_acl, as they
 * did in the tree that wrote them. Returns 0 (with *out one reference, or
 * NULL for ACL_NONE), TREE_SNAP_EFORMAT or -ENOMEM. */
static int load_acl(struct loader *l, struct tree_acl **out)
{
    size_t start = l->r.pos;
    int32_t count = (int32_t)base_rd_le32(&l->r);
    *out = NULL;
    if (l->r.err || count < ACL_NONE || count > TREE_ACL_MAX)
        return TREE_SNAP_EFORMAT;
    if (count == ACL_NONE)
        return 0;
    if (count == ACL_OPEN) {
        *out = tree_acl_open();
        return 0;
    }
    struct tree_acl *acl;
    int rc = acl_decode(&l->r, count, &acl);
    if (rc != 0)
        return rc;
    const uint8_t *key = l->r.ptr + start;
    size_t key_len = l->r.pos - start;
    void **had = tmap_get(&l->acls, key, key_len);
    if (had != NULL) {
        tree_acl_unref(acl);
        *out = tree_acl_ref(*had);
        return 0;
    }
    if (tmap_put(&l->acls, key, key_len, acl, NULL) != 0) {
        tree_acl_unref(acl);
        return -ENOMEM;
    }
    *out = tree_acl_ref(acl);
    return 0;
}

static int load_data(struct loader *l, struct zver *v)
{
    int32_t len = (int32_t)base_rd_le32(&l->r);
    if (len < -1)
        return TREE_SNAP_EFORMAT;
    const uint8_t *p = len > 0 ? base_rd_take(&l->r, (size_t)len) : NULL;
    if (l->r.err)
        return TREE_SNAP_EFORMAT;
    v->data = zdata_new(p, len);
    if (len >= 0 && v->data == NULL)
        return -ENOMEM;
    v->st.data_length = len > 0 ? len : 0;
    return 0;
}

static void load_stat(struct base_rd *r, struct zk_stat *st)
{
    st->czxid = (int64_t)base_rd_le64(r);
    st->mzxid = (int64_t)base_rd_le64(r);
    st->ctime = (int64_t)base_rd_le64(r);
    st->mtime = (int64_t)base_rd_le64(r);
    st->ephemeral_owner = (int64_t)base_rd_le64(r);
    st->pzxid = (int64_t)base_rd_le64(r);
    st->version = (int32_t)base_rd_le32(r);
    st->cversion = (int32_t)base_rd_le32(r);
    st->aversion = (int32_t)base_rd_le32(r);
}

/* Pops the k finished subtrees that are this node's children (they must
 * all be direct children of path) into a new child array. */
static int pop_children(struct loader *l, const char *path, size_t len, uint32_t k,
                        struct zkids **out)
{
    *out = NULL;
    if (k > l->stack_len)
        return TREE_SNAP_EFORMAT;
    if (k == 0)
        return 0;
    struct zkids *kids = zkids_new(k);
    if (kids == NULL)
        return -ENOMEM;
    uint64_t first = l->stack_len - k;
    for (uint32_t i = 0; i < k; i++) {
        const struct znode *c = l->items[l->stack[first + i]].n;
        if (c->path_len <= 1 || tree_parent_len(c->path, c->path_len) != len ||
            memcmp(c->path, path, len) != 0) {
            zkids_unref(kids);
            return TREE_SNAP_EFORMAT;
        }
        kids->items[i] = l->items[l->stack[first + i]].n; /* keeps the written order */
    }
    l->stack_len = first;
    *out = kids;
    return 0;
}

/* Makes v (already filled) the next item: on the built-in znode of that
 * path, or on a new one. Takes v over, also when it fails. */
static int load_place(struct loader *l, struct zver *v, const char *path, size_t len)
{
    struct item *it = &l->items[l->items_len];
    /* the tree is fresh (tree_is_fresh): only "/" and "/zookeeper..." can
     * exist, so the other million paths skip the table lookup */
    struct znode *had = NULL;
    if (len == 1 || (len >= 10 && memcmp(path, "/zookeeper", 10) == 0)) {
        rcu_read_lock();
        had = tree_lookup(l->t, path, len);
        tree_read_unlock();
    }
    it->v = v;
    it->existing = had != NULL;
    it->n = had != NULL ? had : znode_new(path, len, v);
    if (it->n == NULL) {
        zver_free_now(v); /* not owned by an item: items_len did not move */
        it->v = NULL;
        return -ENOMEM;
    }
    it->hash = tree_hash_bytes(path, len);
    uint32_t idx = (uint32_t)l->items_len++;
    int rc = seen_add(l, idx);
    if (rc != 0)
        return rc;
    l->existing_matched += it->existing;
    l->stack[l->stack_len++] = idx;
    return 0;
}

static int load_node(struct loader *l)
{
    if (l->items_len == l->items_max)
        return TREE_SNAP_EFORMAT; /* more nodes than the trailer says */
    uint32_t len = base_rd_le32(&l->r);
    /* no fixed path limit: the bytes left before the trailer bound it */
    const char *path = (const char *)base_rd_take(&l->r, len);
    if (path == NULL || zk_path_validate(path, len) != ZK_OK)
        return TREE_SNAP_EFORMAT;
    struct zver *v = calloc(1, sizeof *v);
    if (v == NULL)
        return -ENOMEM;
    load_stat(&l->r, &v->st);
    uint32_t k = base_rd_le32(&l->r);
    int rc = l->r.err ? TREE_SNAP_EFORMAT : load_data(l, v);
    if (rc == 0)
        rc = load_acl(l, &v->acl);
    if (rc == 0)
        rc = pop_children(l, path, len, k, &v->kids);
    if (rc != 0) {
        zver_free_now(v);
        return rc;
    }
    v->st.num_children = (int32_t)k;
    l->digest += tree_digest_parts(path, len, &v->st, v->data, v->acl);
    return load_place(l, v, path, len); /* owns v from here, also on failure */
}

/* A version-1 record ends after the timeout: its password was never
 * recorded (passwd_known false). A version-2 record has the flags and the
 * password; a flag this code does not know, or a password beside "not
 * known", is not something tree_snapshot_write made. */
static int load_session(struct loader *l)
{
    if (l->sessions_len == l->sessions_max)
        return TREE_SNAP_EFORMAT;
    struct sess_rec *s = &l->sessions[l->sessions_len];
    *s = (struct sess_rec){ .id = (int64_t)base_rd_le64(&l->r) };
    s->timeout_ms = (int32_t)base_rd_le32(&l->r);
    if (l->version >= 2) {
        static const uint8_t zeros[TREE_PASSWD_BYTES];
        uint8_t flags = base_rd_u8(&l->r);
        const uint8_t *pw = base_rd_take(&l->r, TREE_PASSWD_BYTES);
        if (l->r.err || (flags & ~SESSION_PASSWD_KNOWN) != 0 ||
            (flags == 0 && memcmp(pw, zeros, sizeof zeros) != 0))
            return TREE_SNAP_EFORMAT;
        s->passwd_known = flags == SESSION_PASSWD_KNOWN;
        memcpy(s->passwd, pw, TREE_PASSWD_BYTES);
    }
    if (l->r.err)
        return TREE_SNAP_EFORMAT;
    l->sessions_len++;
    return 0;
}

/* Parses every record between header and trailer. */
static int load_records(struct loader *l)
{
    int rc = 0;
    /* bounded: every record consumes at least one byte of the buffer */
    while (rc == 0 && l->r.pos < l->r.len) {
        uint8_t tag = base_rd_u8(&l->r);
        if (tag == TAG_NODE && l->sessions_len == 0)
            rc = load_node(l);
        else if (tag == TAG_SESSION)
            rc = load_session(l);
        else
            rc = TREE_SNAP_EFORMAT;
    }
    return rc;
}

static void loader_free(struct loader *l, bool published)
{
    for (uint64_t i = 0; !published && i < l->items_len; i++) {
        struct item *it = &l->items[i];
        zver_free_now(it->v);
        if (!it->existing)
            free(it->n);
    }
    tmap_clear(&l->acls, acl_cache_unref);
    free(l->items);
    free(l->stack);
    free(l->seen);
    free(l->sessions);
}

static int loader_alloc(struct loader *l, uint64_t nodes, uint64_t sessions, size_t len)
{
    size_t sess_bytes = l->version >= 2 ? SESSION_RECORD_BYTES : SESSION_V1_RECORD_BYTES;
    if (nodes == 0 || nodes > len / NODE_RECORD_BYTES_MIN || nodes > UINT32_MAX / 4 ||
        sessions > len / sess_bytes)
        return TREE_SNAP_EFORMAT;
    size_t seen_cap = 16;
    while (seen_cap < nodes * 2)
        seen_cap *= 2;
    l->items_max = nodes;
    l->sessions_max = sessions;
    l->items = calloc(nodes, sizeof *l->items);
    l->stack = malloc(nodes * sizeof *l->stack);
    l->seen = calloc(seen_cap, sizeof *l->seen);
    l->seen_mask = seen_cap - 1;
    l->sessions = malloc((sessions > 0 ? sessions : 1) * sizeof *l->sessions);
    if (l->items == NULL || l->stack == NULL || l->seen == NULL || l->sessions == NULL)
        return -ENOMEM;
    return 0;
}

static int sess_rec_cmp(const void *a, const void *b)
{
    int64_t x = ((const struct sess_rec *)a)->id, y = ((const struct sess_rec *)b)->id;
    return (x > y) - (x < y);
}

/* A session id listed twice is not a snapshot this code wrote: the tree
 * would hold one session fewer than the trailer counts (tree_sess_add takes
 * an id it has as a replayed createSession). Sorting is harmless: the order
 * sessions are added in means nothing. */
static int load_sessions_unique(struct loader *l)
{
    if (l->sessions_len > 1)
        qsort(l->sessions, l->sessions_len, sizeof *l->sessions, sess_rec_cmp);
    for (uint64_t i = 1; i < l->sessions_len; i++)
        if (l->sessions[i].id == l->sessions[i - 1].id)
            return TREE_SNAP_EFORMAT;
    return 0;
}

/* After parsing: the stream must have been exactly one tree rooted at "/",
 * covering the built-ins the fresh tree holds, with the trailer's counts
 * and digest. */
static int load_check(const struct loader *l, uint64_t builtins, uint64_t digest)
{
    if (l->stack_len != 1 || l->items_len != l->items_max || l->sessions_len != l->sessions_max)
        return TREE_SNAP_EFORMAT;
    const struct znode *root = l->items[l->stack[0]].n;
    if (root->path_len != 1 || l->existing_matched != builtins)
        return TREE_SNAP_EFORMAT;
    return l->digest == digest ? 0 : TREE_SNAP_EDIGEST;
}

/* Makes the built nodes visible: children before the parents that list
 * them (post-order), as apply inserts a node before its parent names it. */
static int load_publish(struct loader *l)
{
    struct tree *t = l->t;
    int rc = 0;
    /* sized before the inserts: each walks its bucket's chain for a twin */
    tree_reserve_index(t, (int64_t)l->items_len);
    rcu_read_lock();
    for (uint64_t i = 0; i < l->items_len; i++) {
        struct item *it = &l->items[i];
        if (it->existing) {
            atomic_fetch_add_explicit(&t->data_bytes,
                                      zver_data_len(it->v) - zver_data_len(it->n->ver),
                                      memory_order_relaxed);
            znode_publish(t, it->n, it->v);
        } else {
            tree_insert(t, it->n);
        }
        if (rc == 0 &&
            tree_index_add(t, it->n->path, it->n->path_len, it->v->st.ephemeral_owner) != 0)
            rc = -ENOMEM;
    }
    for (uint64_t i = 0; rc == 0 && i < l->sessions_len; i++) {
        const struct sess_rec *s = &l->sessions[i];
        if (tree_sess_add(t, s->id, s->timeout_ms, 0, s->passwd_known ? s->passwd : NULL) != 0)
            rc = -ENOMEM;
    }
    tree_read_unlock();
    return rc;
}

static bool tree_is_fresh(const struct tree *t, uint64_t *builtins)
{
    struct tree_stats st;
    tree_stats(t, &st);
    *builtins = (uint64_t)st.node_count;
    return st.node_count == 4 && st.session_count == 0 && st.ephemeral_count == 0 &&
           st.last_zxid == 0 && t->containers.count == 0 && t->ttls.count == 0;
}

/* Magic, version and CRC, in that order, before anything else is read. */
static int load_validate(const uint8_t *b, size_t len, uint32_t *version)
{
    if (len < HEADER_BYTES + TRAILER_BYTES)
        return TREE_SNAP_ETRUNC;
    if (memcmp(b, TREE_SNAP_MAGIC, 4) != 0)
        return TREE_SNAP_EMAGIC;
    *version = base_get_le32(b + 4);
    if (*version < TREE_SNAP_VERSION_MIN || *version > TREE_SNAP_VERSION)
        return TREE_SNAP_EVERSION;
    uint32_t crc = base_crc32c(0, b, len - 4);
    return crc == base_get_le32(b + len - 4) ? 0 : TREE_SNAP_ECRC;
}

int tree_snapshot_load(struct tree *t, const void *buf, size_t len, struct tree_snap_info *info)
{
    const uint8_t *b = buf;
    uint32_t version = 0;
    int rc = load_validate(b, len, &version);
    if (rc != 0)
        return rc;
    const uint8_t *tr = b + len - TRAILER_BYTES;
    uint64_t nodes = base_get_le64(tr + 1), sessions = base_get_le64(tr + 9);
    uint64_t digest = base_get_le64(tr + 17);
    uint64_t builtins;
    if (tr[0] != TAG_TRAILER)
        return TREE_SNAP_EFORMAT;
    if (!tree_is_fresh(t, &builtins))
        return TREE_SNAP_ENOTFRESH;

    struct loader l = { .t = t, .version = version };
    base_rd_init(&l.r, b, len - TRAILER_BYTES);
    l.r.pos = HEADER_BYTES; /* load_validate: len holds header and trailer */
    rc = loader_alloc(&l, nodes, sessions, len);
    if (rc == 0)
        rc = load_records(&l);
    if (rc == 0)
        rc = load_sessions_unique(&l);
    if (rc == 0)
        rc = load_check(&l, builtins, digest);
    if (rc != 0) {
        loader_free(&l, false);
        return rc;
    }
    rc = load_publish(&l);
    int64_t zxid_start = (int64_t)base_get_le64(b + 8);
    atomic_store_explicit(&t->last_zxid, zxid_start, memory_order_release);
    loader_free(&l, true);
    if (rc == 0 && info != NULL)
        *info = (struct tree_snap_info){ .zxid_start = zxid_start, .node_count = nodes,
                                         .session_count = sessions, .digest = digest,
                                         .size_bytes = len };
    return rc;
}
