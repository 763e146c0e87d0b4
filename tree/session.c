/*
 * session.c — the replicated session table.
 *
 * Sessions live in a cds_lfht keyed by id so that workers can find theirs
 * under RCU (tree_session_find) while the sequencer adds and removes them in
 * tree_apply. A closed session is unlinked and freed after a grace period.
 * The paths a session owns are kept beside it, sequencer-side, in
 * tree->ephemerals (see tree.c), so that closeSession can list them without
 * scanning the tree, as ZooKeeper's DataTree.ephemerals map does.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tree/tree_int.h"

static uint64_t sess_hash(int64_t id)
{
    return tree_hash_mix(0, (uint64_t)id);
}

static int sess_match(struct cds_lfht_node *node, const void *key)
{
    const struct sess *s = caa_container_of(node, struct sess, hnode);
    return s->pub.id == *(const int64_t *)key;
}

struct sess *tree_sess_lookup(const struct tree *t, int64_t id)
{
    struct cds_lfht_iter it;
    cds_lfht_lookup(tree_sessions_ht(t), sess_hash(id), sess_match, &id, &it);
    struct cds_lfht_node *node = cds_lfht_iter_get_node(&it);
    if (node == NULL)
        return NULL;
    struct sess *s = caa_container_of(node, struct sess, hnode);
    /* pairs with the release in tree_sess_add: the fields are initialised */
    (void)__atomic_load_n(&s->pub.id, __ATOMIC_ACQUIRE);
    return s;
}

struct tree_session *tree_session_find(const struct tree *t, int64_t id)
{
    struct sess *s = tree_sess_lookup(t, id);
    tree_tsan_reader_done();
    return s != NULL ? &s->pub : NULL;
}

int tree_sess_add(struct tree *t, int64_t id, int32_t timeout_ms, int64_t now_ms,
                  const uint8_t *passwd)
{
    if (tree_sess_lookup(t, id) != NULL)
        return 0; /* replaying a createSession the tree already holds */
    struct sess *s = calloc(1, sizeof *s);
    if (s == NULL)
        return -1;
    s->pub.timeout_ms = timeout_ms;
    if (passwd != NULL)
        memcpy(s->pub.passwd, passwd, TREE_PASSWD_BYTES);
    s->pub.passwd_known = passwd != NULL;
    atomic_init(&s->pub.last_seen_ms, now_ms);
    atomic_init(&s->pub.owner_worker, -1);
    atomic_init(&s->pub.owner_conn, 0);
    s->pub.closing = false;
    __atomic_store_n(&s->pub.id, id, __ATOMIC_RELEASE);
    cds_lfht_node_init(&s->hnode);
    cds_lfht_add(tree_sessions_ht(t), sess_hash(id), &s->hnode);
    atomic_fetch_add_explicit(&t->session_count, 1, memory_order_relaxed);
    return 0;
}

/* A published identity list: the ids, then their strings, in one block. */
struct sess_auth {
    struct rcu_head rcu;
    int32_t worker;
    uint64_t conn;
    bool super;
    int32_t count;
    struct tree_authid ids[];
};

static void sess_auth_free_cb(struct rcu_head *h)
{
    struct sess_auth *a = caa_container_of(h, struct sess_auth, rcu);
    tree_tsan_grace_acquire();
    TREE_TSAN_ACQUIRE(a);
    free(a);
}

static void sess_free_cb(struct rcu_head *h)
{
    struct sess *s = caa_container_of(h, struct sess, rcu);
    tree_tsan_grace_acquire();
    TREE_TSAN_ACQUIRE(s);
    /* a grace period after the unlink: no publisher still holds s */
    struct sess_auth *a = atomic_load_explicit(&s->auth, memory_order_acquire);
    if (a != NULL) {
        TREE_TSAN_ACQUIRE(a);
        free(a);
    }
    free(s);
}

static struct sess_auth *sess_auth_copy(const struct tree_authid *ids, int32_t count, bool super,
                                        int32_t worker, uint64_t conn)
{
    size_t bytes = sizeof(struct sess_auth) + (size_t)count * sizeof(struct tree_authid);
    for (int32_t i = 0; i < count; i++)
        bytes += strlen(ids[i].scheme) + 1 + strlen(ids[i].id) + 1;
    struct sess_auth *a = malloc(bytes);
    if (a == NULL)
        return NULL;
    *a = (struct sess_auth){ .worker = worker, .conn = conn, .super = super, .count = count };
    char *text = (char *)&a->ids[count];
    for (int32_t i = 0; i < count; i++) {
        size_t ns = strlen(ids[i].scheme) + 1, ni = strlen(ids[i].id) + 1;
        a->ids[i].scheme = memcpy(text, ids[i].scheme, ns);
        a->ids[i].id = memcpy(text + ns, ids[i].id, ni);
        text += ns + ni;
    }
    return a;
}

int tree_session_publish_auth(struct tree *t, int64_t id, const struct tree_authid *ids,
                              int32_t count, bool super, int32_t worker, uint64_t conn)
{
    struct sess_auth *a = sess_auth_copy(ids, count, super, worker, conn);
    if (a == NULL)
        return -ENOMEM;
    rcu_read_lock();
    struct sess *s = tree_sess_lookup(t, id);
    struct sess_auth *old = NULL;
    if (s != NULL) {
        TREE_TSAN_RELEASE(a);
        old = atomic_exchange_explicit(&s->auth, a, memory_order_acq_rel);
    }
    tree_read_unlock();
    if (s == NULL) {
        free(a);
        return -ENOENT;
    }
    if (old != NULL) {
        TREE_TSAN_RELEASE(old);
        call_rcu(&old->rcu, sess_auth_free_cb);
    }
    return 0;
}

void tree_session_withdraw_auth(struct tree *t, int64_t id, int32_t worker, uint64_t conn)
{
    rcu_read_lock();
    struct sess *s = tree_sess_lookup(t, id);
    struct sess_auth *a = s ? atomic_load_explicit(&s->auth, memory_order_acquire) : NULL;
    bool mine = a != NULL && a->worker == worker && a->conn == conn &&
                atomic_compare_exchange_strong_explicit(&s->auth, &a, NULL, memory_order_acq_rel,
                                                        memory_order_acquire);
    tree_read_unlock();
    if (mine) {
        TREE_TSAN_RELEASE(a);
        call_rcu(&a->rcu, sess_auth_free_cb);
    }
}

bool tree_session_auth(const struct tree_session *pub, struct tree_session_auth *out)
{
    const struct sess *s = caa_container_of(pub, struct sess, pub);
    struct sess_auth *a = atomic_load_explicit(&((struct sess *)s)->auth, memory_order_acquire);
    if (a == NULL)
        return false;
    TREE_TSAN_ACQUIRE(a);
    *out = (struct tree_session_auth){ .ids = a->ids, .count = a->count, .super = a->super };
    return true;
}

void tree_sess_remove(struct tree *t, int64_t id)
{
    struct sess *s = tree_sess_lookup(t, id);
    if (s == NULL || cds_lfht_del(tree_sessions_ht(t), &s->hnode) != 0)
        return;
    atomic_fetch_sub_explicit(&t->session_count, 1, memory_order_relaxed);
    TREE_TSAN_RELEASE(s);
    call_rcu(&s->rcu, sess_free_cb);
}

void tree_sess_free_all(struct tree *t)
{
    struct cds_lfht_iter it;
    struct cds_lfht_node *node;
    rcu_read_lock();
    TREE_LFHT_FOREACH (tree_sessions_ht(t), &it, node) {
        struct sess *s = caa_container_of(node, struct sess, hnode);
        cds_lfht_del(tree_sessions_ht(t), node);
        TREE_TSAN_RELEASE(s);
        call_rcu(&s->rcu, sess_free_cb);
    }
    tree_read_unlock();
}

void tree_session_each(struct tree *t, tree_session_fn fn, void *arg)
{
    struct cds_lfht_iter it;
    struct cds_lfht_node *node;
    rcu_read_lock();
    TREE_LFHT_FOREACH (tree_sessions_ht(t), &it, node)
        fn(arg, &caa_container_of(node, struct sess, hnode)->pub);
    tree_read_unlock();
}

/* Writes the password in place, which is what "immutable once visible"
 * forbids in general; it is sound here only because recovery runs before
 * any reader thread exists (tree.h). */
int tree_sessions_fill_passwd(struct tree *t, tree_passwd_fn fn, void *arg, uint64_t *filled)
{
    struct cds_lfht_iter it;
    struct cds_lfht_node *node;
    uint64_t n = 0;
    int rc = 0;
    rcu_read_lock();
    TREE_LFHT_FOREACH (tree_sessions_ht(t), &it, node) {
        struct tree_session *s = &caa_container_of(node, struct sess, hnode)->pub;
        if (s->passwd_known)
            continue;
        rc = fn(arg, s->id, s->passwd);
        if (rc != 0) {
            memset(s->passwd, 0, sizeof s->passwd); /* whatever fn left there */
            break;
        }
        s->passwd_known = true;
        n++;
    }
    tree_read_unlock();
    if (filled != NULL)
        *filled = n;
    return rc;
}

/* ZooKeeper's getEphemerals matches a plain string prefix ("/a" also
 * matches "/ab"); an empty prefix or "/" matches everything. */
static bool has_prefix(const char *path, size_t len, const char *prefix, size_t plen)
{
    if (plen == 0 || (plen == 1 && prefix[0] == '/'))
        return true;
    return len >= plen && memcmp(path, prefix, plen) == 0;
}

void tree_session_ephemerals(const struct tree *t, int64_t id, const char *prefix, tree_path_fn fn,
                             void *arg)
{
    const struct tmap *set = tree_owned_paths(t, id);
    if (set == NULL)
        return;
    size_t plen = prefix != NULL ? strlen(prefix) : 0;
    for (size_t i = 0; i < set->cap; i++) {
        const struct tmap_ent *e = &set->slots[i];
        if (e->key != NULL && has_prefix(e->key, e->len, prefix, plen))
            fn(arg, e->key);
    }
}
