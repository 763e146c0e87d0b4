/*
 * tree.c — znode storage, lifecycle and the read side of the tree.
 *
 * See tree_int.h for the storage model (stable znodes in a cds_lfht, each
 * pointing at an immutable, RCU-retired version). Read functions here run on
 * any registered thread under the caller's rcu_read_lock; the helpers that
 * build and publish versions run on the sequencer only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tree/tree_int.h"

#define NODES_INIT_BUCKETS 1024
#define SESSIONS_INIT_BUCKETS 64

#if defined(__SANITIZE_THREAD__)
static char tsan_grace_token;
void tree_tsan_reader_done(void) { __tsan_release(&tsan_grace_token); }
void tree_tsan_grace_acquire(void) { __tsan_acquire(&tsan_grace_token); }
#else
void tree_tsan_reader_done(void) {}
void tree_tsan_grace_acquire(void) {}
#endif

/* ---- owners ------------------------------------------------------------------ */

/* ZooKeeper's EphemeralType: TTL when the top byte is all ones (the low 40
 * bits carry the ttl), CONTAINER for Long.MIN_VALUE, NORMAL for any other
 * non-zero owner (a session id), VOID for 0. */
bool tree_owner_is_ttl(int64_t owner)
{
    return (owner & TREE_OWNER_TTL_MASK) == TREE_OWNER_TTL_MASK;
}

bool tree_owner_is_session(int64_t owner)
{
    return owner != 0 && owner != TREE_OWNER_CONTAINER && !tree_owner_is_ttl(owner);
}

size_t tree_parent_len(const char *path, size_t len)
{
    size_t i = len;
    while (i > 0 && path[i - 1] != '/')
        i--;
    /* i is one past the last '/'; the root's children and "/" have parent "/" */
    return i <= 1 ? 1 : i - 1;
}

/* ---- data blobs and child arrays ------------------------------------------- */

struct zdata *zdata_new(const uint8_t *p, int32_t len)
{
    if (len < 0)
        return NULL;
    struct zdata *d = malloc(sizeof *d + (size_t)len);
    if (d == NULL)
        return NULL;
    atomic_init(&d->refs, 1);
    d->len = len;
    if (len > 0)
        memcpy(d->bytes, p, (size_t)len);
    return d;
}

struct zdata *zdata_ref(struct zdata *d)
{
    if (d != NULL)
        atomic_fetch_add_explicit(&d->refs, 1, memory_order_relaxed);
    return d;
}

void zdata_unref(struct zdata *d)
{
    if (d != NULL && atomic_fetch_sub_explicit(&d->refs, 1, memory_order_acq_rel) == 1)
        free(d);
}

/* ---- children --------------------------------------------------------------
 * A create under a parent used to copy every sibling into a new array: a
 * million creates under one parent cost 5 * 10^11 pointer copies. Lists
 * of one parent now share a store. Adding a child to a list that ends
 * where the store's used part ends writes the next slot and makes a list
 * one longer over the same store; older lists never look past their own
 * count, so readers of them see nothing change. A list that is not its
 * store's longest (an extension that was never published, as when an
 * apply ran out of memory, used the slot), a full store, or a removal
 * copies into a new store, at twice the size for adds. Only the writer
 * (the sequencer role, handed over with acquire and release) adds; used
 * is its own. */
struct zkids_store {
    atomic_long refs;
    uint32_t cap;
    uint32_t used; /* slots written: the longest list over this store */
    struct znode *items[];
};

static struct zkids_store *store_new(uint32_t cap)
{
    struct zkids_store *st = malloc(sizeof *st + (size_t)cap * sizeof st->items[0]);
    if (st != NULL) {
        atomic_init(&st->refs, 1);
        st->cap = cap;
        st->used = 0;
    }
    return st;
}

static void store_unref(struct zkids_store *st)
{
    if (atomic_fetch_sub_explicit(&st->refs, 1, memory_order_acq_rel) == 1)
        free(st);
}

/* A list of the first count items of st, taking a reference to st. */
static struct zkids *list_over(struct zkids_store *st, uint32_t count)
{
    struct zkids *k = malloc(sizeof *k);
    if (k == NULL)
        return NULL;
    atomic_init(&k->refs, 1);
    k->count = count;
    k->items = st->items;
    k->store = st;
    atomic_fetch_add_explicit(&st->refs, 1, memory_order_relaxed);
    return k;
}

struct zkids *zkids_ref(struct zkids *k)
{
    if (k != NULL)
        atomic_fetch_add_explicit(&k->refs, 1, memory_order_relaxed);
    return k;
}

void zkids_unref(struct zkids *k)
{
    if (k != NULL && atomic_fetch_sub_explicit(&k->refs, 1, memory_order_acq_rel) == 1) {
        store_unref(k->store);
        free(k);
    }
}

struct zkids *zkids_new(uint32_t count)
{
    struct zkids_store *st = store_new(count > 0 ? count : 1);
    if (st == NULL)
        return NULL;
    st->used = count;
    struct zkids *k = list_over(st, count);
    store_unref(st); /* the list holds it now */
    return k;
}

struct zkids *zkids_with(const struct zkids *k, struct znode *child, bool *oom)
{
    uint32_t n = k != NULL ? k->count : 0;
    struct zkids_store *st = k != NULL ? k->store : NULL;
    *oom = false;
    if (st != NULL && st->used == n && n < st->cap) {
        struct zkids *nk = list_over(st, n + 1);
        if (nk == NULL) {
            *oom = true;
            return NULL;
        }
        st->items[n] = child; /* published with the version that holds nk */
        st->used = n + 1;
        return nk;
    }
    if (n >= UINT32_MAX / 2) {
        *oom = true;
        return NULL;
    }
    struct zkids_store *ns = store_new(n < 4 ? 8 : 2 * n);
    struct zkids *nk = ns != NULL ? list_over(ns, n + 1) : NULL;
    if (ns != NULL)
        store_unref(ns); /* nk holds it, or it goes */
    if (nk == NULL) {
        *oom = true;
        return NULL;
    }
    if (n > 0)
        memcpy(ns->items, k->items, n * sizeof k->items[0]);
    ns->items[n] = child;
    ns->used = n + 1;
    return nk;
}

static bool zkids_has(const struct zkids *k, const struct znode *child)
{
    for (uint32_t i = 0; k != NULL && i < k->count; i++) {
        if (k->items[i] == child)
            return true;
    }
    return false;
}

struct zkids *zkids_without(const struct zkids *k, const struct znode *child, bool *oom)
{
    *oom = false;
    if (!zkids_has(k, child))
        return zkids_ref((struct zkids *)k); /* not listed: unchanged */
    if (k->count == 1)
        return NULL;
    struct zkids *nk = zkids_new(k->count - 1);
    *oom = nk == NULL;
    if (nk == NULL)
        return NULL;
    uint32_t j = 0;
    for (uint32_t i = 0; i < k->count; i++) {
        if (k->items[i] != child)
            nk->items[j++] = k->items[i];
    }
    return nk;
}

/* ---- versions and znodes ------------------------------------------------------ */

struct zver *zver_clone(const struct zver *v)
{
    struct zver *nv = malloc(sizeof *nv);
    if (nv == NULL)
        return NULL;
    nv->st = v->st;
    nv->data = zdata_ref(v->data);
    nv->acl = v->acl != NULL ? tree_acl_ref(v->acl) : NULL;
    nv->kids = zkids_ref(v->kids);
    return nv;
}

void zver_free_now(struct zver *v)
{
    if (v == NULL)
        return;
    zdata_unref(v->data);
    if (v->acl != NULL)
        tree_acl_unref(v->acl);
    zkids_unref(v->kids);
    free(v);
}

static void zver_free_cb(struct rcu_head *h)
{
    struct zver *v = caa_container_of(h, struct zver, rcu);
    tree_tsan_grace_acquire();
    TREE_TSAN_ACQUIRE(v);
    zver_free_now(v);
}

static uint64_t digest_ver(const struct znode *n, const struct zver *v);

/* The running digest moves by what one node's hash changed by (a sum:
 * independent of order, and wrapping arithmetic cancels exactly). */
static void digest_move(struct tree *t, uint64_t add, uint64_t sub)
{
    uint64_t d = atomic_load_explicit(&t->digest_sum, memory_order_relaxed);
    atomic_store_explicit(&t->digest_sum, d + add - sub, memory_order_relaxed);
}

void znode_publish(struct tree *t, struct znode *n, struct zver *nv)
{
    struct zver *old = n->ver;
    digest_move(t, digest_ver(n, nv), old != NULL ? digest_ver(n, old) : 0);
    __atomic_store_n(&n->ver, nv, __ATOMIC_RELEASE);
    if (old != NULL) {
        TREE_TSAN_RELEASE(old);
        call_rcu(&old->rcu, zver_free_cb);
    }
}

struct znode *znode_new(const char *path, size_t len, struct zver *v)
{
    struct znode *n = malloc(sizeof *n + len + 1);
    if (n == NULL)
        return NULL;
    cds_lfht_node_init(&n->hnode);
    memcpy(n->path, path, len);
    n->path[len] = '\0';
    n->path_len = len;
    size_t slash = len;
    while (slash > 0 && path[slash - 1] != '/')
        slash--;
    n->name_off = slash;
    /* release: a reader that finds n in the table and loads ver sees the
     * path bytes written above */
    __atomic_store_n(&n->ver, v, __ATOMIC_RELEASE);
    return n;
}

static void znode_free_now(struct znode *n)
{
    zver_free_now(n->ver);
    free(n);
}

static void znode_free_cb(struct rcu_head *h)
{
    struct znode *n = caa_container_of(h, struct znode, rcu);
    tree_tsan_grace_acquire();
    TREE_TSAN_ACQUIRE(n);
    znode_free_now(n);
}

struct path_key {
    const char *p;
    size_t len;
};

static int znode_match(struct cds_lfht_node *node, const void *key)
{
    const struct path_key *k = key;
    struct znode *n = caa_container_of(node, struct znode, hnode);
    (void)znode_ver(n); /* acquire before reading the path (see znode_new) */
    return n->path_len == k->len && memcmp(n->path, k->p, k->len) == 0;
}

/* ---- hints (tree_int.h, struct tree.hints) ----------------------------------- */

/* Hint slots per bucket of the node table: at one slot per bucket a
 * million nodes filled the table to 0.95 per slot, and a third of the
 * lookups found another path's node in theirs (later inserts take a
 * slot); at four, a ninth, for 32 MB at a million nodes. */
#define HINTS_PER_BUCKET 4
struct tree_hints {
    struct rcu_head rcu;
    unsigned long mask;          /* slots - 1, slots a power of two */
    _Atomic uintptr_t slot[];    /* a struct znode *, or 0 */
};

static struct tree_hints *tree_hints_of(const struct tree *t)
{
    return __atomic_load_n(&t->hints, __ATOMIC_ACQUIRE);
}

static void hints_free_cb(struct rcu_head *head)
{
    tree_tsan_grace_acquire(); /* after every reader that could hold it (TSan) */
    free(caa_container_of(head, struct tree_hints, rcu));
}

/* Sequencer: n is now the node for its path (t->hints is the sequencer's).
 * Release: a reader that finds n here sees it whole. */
static void hints_note(struct tree *t, const struct znode *n, uint64_t hash)
{
    struct tree_hints *h = t->hints;
    if (h != NULL)
        atomic_store_explicit(&h->slot[hash & h->mask], (uintptr_t)n, memory_order_release);
}

/* Sequencer: n leaves the table; from now on no reader finds it in the
 * hints either, so the grace period that frees it covers every reader
 * that did. Tables replaced earlier need nothing: their readers began
 * before n's removal. */
static void hints_forget(struct tree *t, const struct znode *n, uint64_t hash)
{
    struct tree_hints *h = t->hints;
    if (h != NULL &&
        atomic_load_explicit(&h->slot[hash & h->mask], memory_order_relaxed) == (uintptr_t)n)
        atomic_store_explicit(&h->slot[hash & h->mask], 0, memory_order_relaxed);
}

/* The node path's hint names, when it is that path's and still in the
 * table; else NULL (the table decides). A node removed after the check is
 * one a table lookup could have returned just as well: the read comes
 * before the removal. */
static struct znode *lookup_hinted(const struct tree *t, const char *path, size_t len,
                                   uint64_t hash)
{
    const struct tree_hints *h = tree_hints_of(t);
    if (h == NULL)
        return NULL;
    struct znode *n =
        (struct znode *)atomic_load_explicit(&h->slot[hash & h->mask], memory_order_acquire);
    if (n == NULL || n->path_len != len || memcmp(n->path, path, len) != 0 ||
        cds_lfht_is_node_deleted(&n->hnode))
        return NULL;
    return n;
}

static struct znode *lookup_hashed(const struct tree *t, const char *path, size_t len,
                                   uint64_t hash)
{
    struct znode *hinted = lookup_hinted(t, path, len, hash);
    if (hinted != NULL)
        return hinted;
    struct path_key k = { path, len };
    struct cds_lfht_iter it;
    cds_lfht_lookup(tree_nodes_ht(t), hash, znode_match, &k, &it);
    struct cds_lfht_node *node = cds_lfht_iter_get_node(&it);
    return node != NULL ? caa_container_of(node, struct znode, hnode) : NULL;
}

struct znode *tree_lookup(const struct tree *t, const char *path, size_t len)
{
    return lookup_hashed(t, path, len, tree_path_hash(path, len));
}

/* An empty table of `slots` hints (a power of two); NULL without memory. */
static struct tree_hints *hints_new(unsigned long slots)
{
    struct tree_hints *h = calloc(1, sizeof *h + slots * sizeof h->slot[0]);
    if (h != NULL)
        h->mask = slots - 1;
    return h;
}

/* Sequencer, outside a read-side section: a table of `slots` hints filled
 * from the node table, published in place of the old one. Out of memory
 * keeps the old one: hints are only hints. */
static void hints_resize(struct tree *t, unsigned long slots)
{
    struct tree_hints *h = hints_new(slots);
    if (h == NULL)
        return;
    struct cds_lfht_iter it;
    struct cds_lfht_node *node;
    rcu_read_lock();
    TREE_LFHT_FOREACH (tree_nodes_ht(t), &it, node) {
        struct znode *n = caa_container_of(node, struct znode, hnode);
        (void)znode_ver(n); /* acquire before reading the path (see znode_new) */
        atomic_store_explicit(&h->slot[tree_path_hash(n->path, n->path_len) & h->mask],
                              (uintptr_t)n, memory_order_relaxed);
    }
    tree_read_unlock();
    struct tree_hints *old = t->hints;
    __atomic_store_n(&t->hints, h, __ATOMIC_RELEASE);
    if (old != NULL)
        call_rcu(&old->rcu, hints_free_cb);
}

void tree_insert(struct tree *t, struct znode *n)
{
    struct path_key k = { n->path, n->path_len };
    uint64_t hash = tree_path_hash(n->path, n->path_len);
    struct cds_lfht_node *got =
        cds_lfht_add_unique(tree_nodes_ht(t), hash, znode_match, &k, &n->hnode);
    if (got != &n->hnode) {
        /* callers look the path up first on the single writer thread */
        base_log(BASE_LOG_ERROR, "tree: duplicate insert of %s", n->path);
        abort();
    }
    hints_note(t, n, hash);
    atomic_fetch_add_explicit(&t->node_count, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&t->data_bytes, (int64_t)n->path_len + zver_data_len(n->ver),
                              memory_order_relaxed);
    digest_move(t, digest_ver(n, n->ver), 0);
}

/* liburcu's own growth of a table (CDS_LFHT_AUTO_RESIZE) is lazy: it runs
 * on its worker when a commit of its split counters lands on a power of
 * two, and lags far behind a table that fills fast. Measured here with
 * 100,000 nodes in the table: chains long enough that a lookup took 3.8 us
 * and was 80 % of a read's CPU (30 ns once sized); with 1,000,000, 44 us.
 * So the writer sizes it itself, to twice the nodes at each doubling. */
void tree_reserve_index(struct tree *t, int64_t nodes)
{
    /* resizing waits for grace periods: inside a read-side section (an
     * ensemble member loading the leader's snapshot on its sequencer) it
     * is left to the next tree_grow_index outside one */
    if (nodes <= (int64_t)t->index_buckets || rcu_read_ongoing())
        return;
    unsigned long want = t->index_buckets;
    while ((int64_t)want < 2 * nodes)
        want <<= 1;
    cds_lfht_resize(tree_nodes_ht(t), want);
    t->index_buckets = want;
    hints_resize(t, want * HINTS_PER_BUCKET);
}

void tree_grow_index(struct tree *t)
{
    tree_reserve_index(t, atomic_load_explicit(&t->node_count, memory_order_relaxed));
}

void tree_remove(struct tree *t, struct znode *n)
{
    if (cds_lfht_del(tree_nodes_ht(t), &n->hnode) != 0) {
        base_log(BASE_LOG_ERROR, "tree: removing %s which is not in the table", n->path);
        abort();
    }
    hints_forget(t, n, tree_path_hash(n->path, n->path_len));
    atomic_fetch_sub_explicit(&t->node_count, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&t->data_bytes, (int64_t)n->path_len + zver_data_len(n->ver),
                              memory_order_relaxed);
    digest_move(t, 0, digest_ver(n, n->ver));
    TREE_TSAN_RELEASE(n);
    call_rcu(&n->rcu, znode_free_cb);
}

int64_t zver_data_len(const struct zver *v)
{
    return v->data != NULL ? v->data->len : 0;
}

/* ZooKeeper's DataNode.copyStat: clients see cversion as the number of
 * child changes (2 * creates - live children) and an ephemeralOwner of 0 for
 * containers and TTL nodes. */
void zver_client_stat(const struct zver *v, struct zk_stat *out)
{
    *out = v->st;
    out->num_children = v->kids != NULL ? (int32_t)v->kids->count : 0;
    out->data_length = (int32_t)zver_data_len(v);
    out->cversion = (int32_t)((uint32_t)v->st.cversion * 2u - (uint32_t)out->num_children);
    if (!tree_owner_is_session(v->st.ephemeral_owner))
        out->ephemeral_owner = 0;
}

/* ---- sequencer-side indexes -------------------------------------------------- */

static int owner_set_add(struct tree *t, int64_t owner, const char *path, size_t len)
{
    void **slot = tmap_get(&t->ephemerals, &owner, sizeof owner);
    struct tmap *set = slot != NULL ? *slot : NULL;
    if (set == NULL) {
        set = calloc(1, sizeof *set);
        if (set == NULL || tmap_put(&t->ephemerals, &owner, sizeof owner, set, NULL) != 0) {
            free(set);
            return -1;
        }
    }
    void **had = tmap_get(set, path, len);
    if (had != NULL)
        return 0;
    if (tmap_put(set, path, len, NULL, NULL) != 0)
        return -1;
    atomic_fetch_add_explicit(&t->ephemeral_count, 1, memory_order_relaxed);
    return 0;
}

int tree_index_add(struct tree *t, const char *path, size_t len, int64_t owner)
{
    if (owner == 0)
        return 0;
    if (owner == TREE_OWNER_CONTAINER)
        return tmap_put(&t->containers, path, len, NULL, NULL);
    if (tree_owner_is_ttl(owner))
        return tmap_put(&t->ttls, path, len, NULL, NULL);
    return owner_set_add(t, owner, path, len);
}

struct tmap *tree_owned_paths(const struct tree *t, int64_t owner)
{
    void **slot = tmap_get(&t->ephemerals, &owner, sizeof owner);
    return slot != NULL ? *slot : NULL;
}

static void free_set(void *p)
{
    struct tmap *set = p;
    if (set != NULL) {
        tmap_clear(set, NULL);
        free(set);
    }
}

void tree_index_del(struct tree *t, const char *path, size_t len, int64_t owner)
{
    if (owner == 0)
        return;
    if (owner == TREE_OWNER_CONTAINER) {
        tmap_del(&t->containers, path, len, NULL);
        return;
    }
    if (tree_owner_is_ttl(owner)) {
        tmap_del(&t->ttls, path, len, NULL);
        return;
    }
    struct tmap *set = tree_owned_paths(t, owner);
    if (set != NULL && tmap_del(set, path, len, NULL)) {
        atomic_fetch_sub_explicit(&t->ephemeral_count, 1, memory_order_relaxed);
        if (set->count == 0 && tmap_del(&t->ephemerals, &owner, sizeof owner, NULL))
            free_set(set); /* the session's last ephemeral has gone */
    }
}

/* ---- lifecycle ------------------------------------------------------------------ */

static struct zver *zver_initial(struct tree_acl *acl)
{
    struct zver *v = calloc(1, sizeof *v);
    if (v == NULL)
        return NULL;
    /* ZooKeeper gives the built-in nodes new byte[0] (empty, not null) data */
    v->data = zdata_new(NULL, 0);
    if (v->data == NULL) {
        free(v);
        return NULL;
    }
    v->acl = tree_acl_ref(acl);
    return v;
}

/* Adds a built-in node (all-zero stat) under its already present parent. */
static int add_builtin(struct tree *t, const char *path, struct tree_acl *acl, int32_t aversion)
{
    size_t len = strlen(path);
    struct zver *v = zver_initial(acl);
    if (v == NULL)
        return -1;
    v->st.aversion = aversion;
    struct znode *n = znode_new(path, len, v);
    if (n == NULL) {
        zver_free_now(v);
        return -1;
    }
    if (len > 1) {
        struct znode *parent = tree_lookup(t, path, tree_parent_len(path, len));
        bool oom;
        struct zver *pv = zver_clone(parent->ver);
        struct zkids *kids = pv != NULL ? zkids_with(pv->kids, n, &oom) : NULL;
        if (kids == NULL) {
            zver_free_now(pv);
            znode_free_now(n);
            return -1;
        }
        zkids_unref(pv->kids);
        pv->kids = kids;
        pv->st.num_children = (int32_t)kids->count;
        tree_insert(t, n);
        znode_publish(t, parent, pv);
    } else {
        tree_insert(t, n);
    }
    return 0;
}

/* ZooKeeper's DataTree constructor: "/", "/zookeeper", "/zookeeper/quota"
 * and "/zookeeper/config". All stats are zero except /zookeeper/config,
 * whose ACL is set to READ_ACL_UNSAFE (world:anyone READ) with version -1,
 * which leaves its aversion at -1 (ZOOKEEPER-2014). */
static int add_builtins(struct tree *t)
{
    struct tree_acl *read_only = NULL;
    struct zk_acl entry = { .perms = ZK_PERM_READ,
                            .id = { .scheme = { "world", 5 }, .id = { "anyone", 6 } } };
    struct zk_aclvec vec = { .count = 1, .items = &entry };
    struct tree_auth nobody = { 0 };
    if (tree_acl_from_request(&vec, &nobody, 0, &read_only) != ZK_OK)
        return -1;
    int rc = -1;
    rcu_read_lock();
    if (add_builtin(t, "/", tree_acl_open(), 0) == 0 &&
        add_builtin(t, "/zookeeper", tree_acl_open(), 0) == 0 &&
        add_builtin(t, "/zookeeper/quota", tree_acl_open(), 0) == 0 &&
        add_builtin(t, "/zookeeper/config", read_only, -1) == 0)
        rc = 0;
    tree_read_unlock();
    tree_acl_unref(read_only);
    return rc;
}

struct tree *tree_new(void)
{
    struct tree *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    t->nodes = cds_lfht_new(NODES_INIT_BUCKETS, NODES_INIT_BUCKETS, 0,
                            CDS_LFHT_AUTO_RESIZE | CDS_LFHT_ACCOUNTING, NULL);
    t->index_buckets = NODES_INIT_BUCKETS;
    if (t->nodes == NULL)
        goto fail_nodes;
    t->sessions = cds_lfht_new(SESSIONS_INIT_BUCKETS, SESSIONS_INIT_BUCKETS, 0,
                               CDS_LFHT_AUTO_RESIZE | CDS_LFHT_ACCOUNTING, NULL);
    if (t->sessions == NULL)
        goto fail_sessions;
    t->hints = hints_new(NODES_INIT_BUCKETS * HINTS_PER_BUCKET); /* NULL: no hints yet */
    if (add_builtins(t) != 0)
        goto fail_builtins;
    return t;

fail_builtins:
    tree_free(t);
    return NULL;
fail_sessions:
    cds_lfht_destroy(t->nodes, NULL);
fail_nodes:
    free(t);
    return NULL;
}

static void free_all_nodes(struct tree *t)
{
    struct cds_lfht_iter it;
    struct cds_lfht_node *node;
    rcu_read_lock();
    TREE_LFHT_FOREACH (tree_nodes_ht(t), &it, node) {
        struct znode *n = caa_container_of(node, struct znode, hnode);
        cds_lfht_del(tree_nodes_ht(t), node);
        /* no reader may hold n (tree_free's contract); a call_rcu keeps the
         * table's own deferred unlinking safe */
        TREE_TSAN_RELEASE(n);
        call_rcu(&n->rcu, znode_free_cb);
    }
    tree_read_unlock();
}

void tree_free(struct tree *t)
{
    if (t == NULL)
        return;
    tree_pending_free(t);
    free_all_nodes(t);
    tree_sess_free_all(t);
    /* every callback queued above (and by earlier applies) must have run
     * before the tables go away and before tree_acl objects are released */
    rcu_barrier();
    cds_lfht_destroy(t->nodes, NULL);
    cds_lfht_destroy(t->sessions, NULL);
    tree_tsan_grace_acquire(); /* readers of a replaced tree's hints are done (TSan) */
    free(t->hints);
    tmap_clear(&t->ephemerals, free_set);
    tmap_clear(&t->containers, NULL);
    tmap_clear(&t->ttls, NULL);
    free(t);
}

/* Swaps a field between two trees: readers see t's new value atomically. */
#define SWAP_ATOMIC(a, b, field)                                                           \
    do {                                                                                   \
        int64_t tmp_ = atomic_load_explicit(&(a)->field, memory_order_relaxed);            \
        atomic_store_explicit(&(a)->field, atomic_load_explicit(&(b)->field,               \
                                                                memory_order_relaxed),     \
                              memory_order_relaxed);                                       \
        atomic_store_explicit(&(b)->field, tmp_, memory_order_relaxed);                    \
    } while (0)

void tree_replace(struct tree *t, struct tree *src)
{
    tree_prep_reset(t); /* the overlay described t's old contents */
    BASE_ASSERT(src->pending.count == 0 && src->pending_sessions.count == 0 && !src->undo_active);
    atomic_fetch_add_explicit(&t->generation, 1, memory_order_acq_rel); /* odd: swapping */
    struct cds_lfht *nodes = t->nodes, *sessions = t->sessions;
    __atomic_store_n(&t->nodes, src->nodes, __ATOMIC_RELEASE);
    __atomic_store_n(&t->sessions, src->sessions, __ATOMIC_RELEASE);
    src->nodes = nodes;
    src->sessions = sessions;
    struct tree_hints *hints = t->hints;
    __atomic_store_n(&t->hints, src->hints, __ATOMIC_RELEASE);
    src->hints = hints;
    unsigned long buckets = t->index_buckets;
    t->index_buckets = src->index_buckets;
    src->index_buckets = buckets;
    SWAP_ATOMIC(t, src, node_count);
    SWAP_ATOMIC(t, src, data_bytes);
    SWAP_ATOMIC(t, src, ephemeral_count);
    SWAP_ATOMIC(t, src, session_count);
    SWAP_ATOMIC(t, src, digest_sum);
    int64_t zxid = atomic_load_explicit(&src->last_zxid, memory_order_relaxed);
    atomic_store_explicit(&src->last_zxid, atomic_load(&t->last_zxid), memory_order_relaxed);
    atomic_store_explicit(&t->last_zxid, zxid, memory_order_release);
    struct tmap m = t->ephemerals;
    t->ephemerals = src->ephemerals;
    src->ephemerals = m;
    m = t->containers;
    t->containers = src->containers;
    src->containers = m;
    m = t->ttls;
    t->ttls = src->ttls;
    src->ttls = m;
    atomic_fetch_add_explicit(&t->generation, 1, memory_order_acq_rel); /* even again */
}

uint64_t tree_generation(const struct tree *t)
{
    return atomic_load_explicit(&t->generation, memory_order_acquire);
}

/* ---- read side ----------------------------------------------------------------- */

static void view_fill(const struct zver *v, struct tree_view *out)
{
    zver_client_stat(v, &out->stat);
    out->data = v->data != NULL ? v->data->bytes : NULL;
    out->data_len = v->data != NULL ? v->data->len : -1;
    out->acl = v->acl;
}

int tree_get(const struct tree *t, const char *path, size_t len, struct tree_view *out)
{
    struct znode *n = tree_lookup(t, path, len);
    int rc = ZK_ENONODE;
    if (n != NULL) {
        view_fill(znode_ver(n), out);
        rc = ZK_OK;
    }
    tree_tsan_reader_done();
    return rc;
}

/* Nodes from which a read's lines stop fitting the cache and prefetching
 * pays: a node with its version, data and table entry takes a few hundred
 * bytes. Measured with tests/unit/bench_ldp_frame (100-byte values,
 * random keys): it costs a fifth more per read at 1,000 nodes, breaks
 * even near 7,000 and saves a sixth at 10,000, half at 70,000. */
#define PREFETCH_MIN_NODES 8192

/* The data's first two lines (its length and up to about a hundred bytes):
 * reading its length to size the prefetch would itself wait for the
 * miss, and a prefetch past an allocation is harmless (it never faults). */
#define PREFETCH_DATA_BYTES 128
/* A node's table entry and its path, for paths of up to about 70 bytes. */
#define PREFETCH_NODE_BYTES 128

/* Starts loading the cache lines of n bytes at p. */
static void prefetch_lines(const void *p, size_t n)
{
    const char *c = p;
    size_t lines = (((uintptr_t)c & 63) + n + 63) / 64;
    for (size_t i = 0; i < lines; i++)
        __builtin_prefetch(c + 64 * i);
}

static void prefetch_data(const struct zver *v)
{
    if (v != NULL && v->data != NULL)
        prefetch_lines(v->data, PREFETCH_DATA_BYTES);
}

bool tree_prefetch_pays(const struct tree *t)
{
    return atomic_load_explicit(&t->node_count, memory_order_relaxed) >= PREFETCH_MIN_NODES;
}

/* Four stages over the batch, each asking for the lines the next needs:
 *  1. each path's hash, and its hint slot;
 *  2. the node the hint names;
 *  3. the lookup itself, which finds that node in cache when the hint is
 *     right (else it walks the table, whose bucket is then a miss in
 *     series), and the version of the node found;
 *  4. the version's data, one lookup later, once the version has come. */
unsigned tree_prefetch_paths(const struct tree *t, const struct tree_path_ref *paths, unsigned n)
{
    if (n == 0 || n > TREE_PREFETCH_MAX || !tree_prefetch_pays(t))
        return 0;
    const struct tree_hints *h = tree_hints_of(t);
    uint64_t hash[TREE_PREFETCH_MAX];
    for (unsigned i = 0; i < n; i++) {
        hash[i] = 0;
        if (paths[i].path == NULL)
            continue;
        hash[i] = tree_path_hash(paths[i].path, paths[i].len);
        if (h != NULL)
            __builtin_prefetch(&h->slot[hash[i] & h->mask]);
    }
    for (unsigned i = 0; h != NULL && i < n; i++) {
        uintptr_t z = paths[i].path != NULL
                          ? atomic_load_explicit(&h->slot[hash[i] & h->mask], memory_order_relaxed)
                          : 0;
        if (z != 0)
            prefetch_lines((const void *)z, PREFETCH_NODE_BYTES);
    }
    unsigned found = 0;
    const struct zver *prev = NULL;
    for (unsigned i = 0; i < n; i++) {
        if (paths[i].path == NULL)
            continue;
        const struct znode *z = lookup_hashed(t, paths[i].path, paths[i].len, hash[i]);
        const struct zver *v = z != NULL ? znode_ver(z) : NULL;
        if (v != NULL) {
            prefetch_lines(v, sizeof *v);
            found++;
        }
        prefetch_data(prev);
        prev = v;
    }
    prefetch_data(prev);
    tree_tsan_reader_done();
    return found;
}

int tree_get_children(const struct tree *t, const char *path, size_t len, struct tree_view *out,
                      tree_child_fn fn, void *arg)
{
    struct znode *n = tree_lookup(t, path, len);
    if (n == NULL) {
        tree_tsan_reader_done();
        return ZK_ENONODE;
    }
    /* one version: the stat and the names come from the same snapshot */
    const struct zver *v = znode_ver(n);
    view_fill(v, out);
    if (v->kids != NULL && fn != NULL) {
        for (uint32_t i = 0; i < v->kids->count; i++) {
            const struct znode *c = v->kids->items[i];
            fn(arg, znode_name(c), c->path_len - c->name_off);
        }
    }
    tree_tsan_reader_done();
    return ZK_OK;
}

/* Depth-first over child arrays with an explicit stack: paths may nest
 * ~2000 levels deep, too deep to recurse on a worker's stack. */
static int count_below(const struct zver *top, int64_t *out)
{
    size_t cap = 64, len = 0;
    const struct zver **stack = malloc(cap * sizeof *stack);
    if (stack == NULL)
        return ZK_ESYSTEMERROR;
    int64_t count = 0;
    stack[len++] = top;
    while (len > 0) {
        const struct zver *v = stack[--len];
        uint32_t nk = v->kids != NULL ? v->kids->count : 0;
        if (base_grow(&stack, &cap, len + nk, sizeof *stack) != 0) {
            free(stack);
            return ZK_ESYSTEMERROR;
        }
        for (uint32_t i = 0; i < nk; i++)
            stack[len++] = znode_ver(v->kids->items[i]);
        count += nk;
    }
    free(stack);
    *out = count;
    return ZK_OK;
}

int tree_count_descendants(const struct tree *t, const char *path, size_t len, int64_t *out)
{
    struct znode *n = tree_lookup(t, path, len);
    int rc = n != NULL ? count_below(znode_ver(n), out) : ZK_ENONODE;
    tree_tsan_reader_done();
    return rc;
}

void tree_stats(const struct tree *t, struct tree_stats *out)
{
    out->node_count = atomic_load_explicit(&t->node_count, memory_order_relaxed);
    out->data_bytes = atomic_load_explicit(&t->data_bytes, memory_order_relaxed);
    out->ephemeral_count = atomic_load_explicit(&t->ephemeral_count, memory_order_relaxed);
    out->session_count = atomic_load_explicit(&t->session_count, memory_order_relaxed);
    out->last_zxid = tree_last_zxid(t);
}

void tree_each_ephemeral(const struct tree *t, tree_ephemeral_fn fn, void *arg)
{
    struct cds_lfht_iter it;
    struct cds_lfht_node *node;
    TREE_LFHT_FOREACH (tree_nodes_ht(t), &it, node) {
        const struct znode *n = caa_container_of(node, struct znode, hnode);
        const struct zver *v = znode_ver(n);
        if (v && tree_owner_is_session(v->st.ephemeral_owner))
            fn(arg, v->st.ephemeral_owner, n->path);
    }
    tree_tsan_reader_done();
}

int64_t tree_last_zxid(const struct tree *t)
{
    int64_t z = atomic_load_explicit(&t->last_zxid, memory_order_acquire);
    tree_tsan_reader_done();
    return z;
}

/* ---- digest -------------------------------------------------------------------- */

static uint64_t digest_stat(uint64_t h, const struct zk_stat *s)
{
    const int64_t f[] = { s->czxid,    s->mzxid,          s->ctime,       s->mtime,
                          s->version,  s->cversion,       s->aversion,    s->ephemeral_owner,
                          s->pzxid,    s->num_children };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        h = tree_hash_mix(h, (uint64_t)f[i]);
    return h;
}

static uint64_t digest_ver(const struct znode *n, const struct zver *v)
{
    return tree_digest_parts(n->path, n->path_len, &v->st, v->data, v->acl);
}

static uint64_t digest_node(const struct znode *n)
{
    return digest_ver(n, znode_ver(n));
}

uint64_t tree_digest_running(const struct tree *t)
{
    return atomic_load_explicit(&t->digest_sum, memory_order_relaxed);
}

/* The sum of per-node hashes: independent of table order (which differs
 * between servers that resized their tables at different times), like
 * ZooKeeper's DigestCalculator adding node digests into the tree digest. */
uint64_t tree_digest(const struct tree *t)
{
    uint64_t sum = 0;
    struct cds_lfht_iter it;
    struct cds_lfht_node *node;
    rcu_read_lock();
    TREE_LFHT_FOREACH (tree_nodes_ht(t), &it, node)
        sum += digest_node(caa_container_of(node, struct znode, hnode));
    tree_read_unlock();
    return sum;
}

/* ---- reaper -------------------------------------------------------------------- */

static void reap_candidates(const struct tree *t, const struct tmap *set, int64_t now_ms,
                            tree_path_fn fn, void *arg)
{
    for (size_t i = 0; i < set->cap; i++) {
        const struct tmap_ent *e = &set->slots[i];
        if (e->key == NULL)
            continue;
        struct znode *n = tree_lookup(t, e->key, e->len);
        if (n == NULL)
            continue;
        const struct zver *v = znode_ver(n);
        if (v->kids != NULL)
            continue;
        int64_t owner = v->st.ephemeral_owner;
        if (owner == TREE_OWNER_CONTAINER) {
            /* ContainerManager: cversion > 0 keeps a container that never
             * had a child from being reaped right after its creation */
            if (v->st.cversion > 0)
                fn(arg, n->path);
        } else if (tree_owner_is_ttl(owner)) {
            int64_t ttl = owner & TREE_TTL_MAX; /* the low 40 bits */
            if (ttl > 0 && v->st.mtime + ttl <= now_ms)
                fn(arg, n->path);
        }
    }
}

void tree_reapable(const struct tree *t, int64_t now_ms, tree_path_fn fn, void *arg)
{
    rcu_read_lock();
    reap_candidates(t, &t->containers, now_ms, fn, arg);
    reap_candidates(t, &t->ttls, now_ms, fn, arg);
    tree_read_unlock();
}

/* ---- snapshot support ------------------------------------------------------------ */

/* digest_node over loose parts, for tree/snapshot.c: the writer hashes a
 * node it captured (with num_children = the children it wrote) and the
 * loader hashes what it built before publishing, and both must agree with
 * tree_digest. Kept next to digest_node so the two cannot drift apart. */
uint64_t tree_digest_parts(const char *path, size_t path_len, const struct zk_stat *st,
                           const struct zdata *data, const struct tree_acl *acl)
{
    uint64_t h = tree_hash_bytes(path, path_len);
    h = digest_stat(h, st);
    if (data != NULL)
        h = tree_hash_mix(h, tree_hash_bytes(data->bytes, (size_t)data->len));
    else
        h = tree_hash_mix(h, UINT64_MAX);
    for (int32_t i = 0; acl != NULL && i < acl->count; i++) {
        const struct tree_acl_entry *e = &acl->items[i];
        h = tree_hash_mix(h, (uint64_t)(uint32_t)e->perms);
        h = tree_hash_mix(h, tree_hash_bytes(e->scheme, strlen(e->scheme)));
        h = tree_hash_mix(h, tree_hash_bytes(e->id, strlen(e->id)));
    }
    return h;
}
