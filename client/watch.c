/*
 * watch.c — the client's watch registry: for each kind (data, exist, child,
 * persistent, persistent-recursive) a hash of path -> watchers, and the
 * rules of ZooKeeper's ZKWatchManager.materialize for which watchers an
 * event triggers. Pure; the handle's mutex guards it.
 */
#include <stdlib.h>
#include <string.h>

#include "client/lc_int.h"

struct lc_wentry {
    struct lc_wentry *next;
    char *path;
    struct lc_watcher *items;
    size_t count, cap;
};

#define BUCKETS_MIN 16

static uint64_t path_hash(const char *p)
{
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */
    for (; *p != '\0'; p++) {
        h ^= (uint8_t)*p;
        h *= 0x100000001b3ULL;
    }
    return h;
}

void lc_watches_init(struct lc_watches *w)
{
    *w = (struct lc_watches){ 0 };
}

static void entry_free(struct lc_wentry *e)
{
    free(e->path);
    free(e->items);
    free(e);
}

void lc_watches_free(struct lc_watches *w)
{
    for (int k = 0; k < LC_W_KINDS; k++) {
        for (size_t b = 0; b < w->nbuckets[k]; b++) {
            struct lc_wentry *e = w->buckets[k][b];
            while (e != NULL) {
                struct lc_wentry *next = e->next;
                entry_free(e);
                e = next;
            }
        }
        free(w->buckets[k]);
    }
    *w = (struct lc_watches){ 0 };
}

static struct lc_wentry **slot_of(const struct lc_watches *w, enum lc_wkind k, const char *path)
{
    if (w->nbuckets[k] == 0)
        return NULL;
    struct lc_wentry **s = &w->buckets[k][path_hash(path) & (w->nbuckets[k] - 1)];
    while (*s != NULL && strcmp((*s)->path, path) != 0)
        s = &(*s)->next;
    return s;
}

/* Doubles kind k's table once it holds as many paths as buckets. */
static int grow(struct lc_watches *w, enum lc_wkind k)
{
    if (w->count[k] < w->nbuckets[k])
        return 0;
    size_t n = w->nbuckets[k] != 0 ? w->nbuckets[k] * 2 : BUCKETS_MIN;
    struct lc_wentry **nb = calloc(n, sizeof *nb);
    if (nb == NULL)
        return -1;
    for (size_t b = 0; b < w->nbuckets[k]; b++) {
        for (struct lc_wentry *e = w->buckets[k][b], *next; e != NULL; e = next) {
            next = e->next;
            struct lc_wentry **s = &nb[path_hash(e->path) & (n - 1)];
            e->next = *s;
            *s = e;
        }
    }
    free(w->buckets[k]);
    w->buckets[k] = nb;
    w->nbuckets[k] = n;
    return 0;
}

static int entry_add(struct lc_wentry *e, larch_watch_fn fn, void *ctx)
{
    for (size_t i = 0; i < e->count; i++) {
        if (e->items[i].fn == fn && e->items[i].ctx == ctx)
            return 0; /* ZooKeeper keeps a set: the same watcher once */
    }
    if (base_grow(&e->items, &e->cap, e->count + 1, sizeof *e->items) != 0)
        return -1;
    e->items[e->count++] = (struct lc_watcher){ fn, ctx };
    return 0;
}

int lc_watches_add(struct lc_watches *w, enum lc_wkind kind, const char *path, larch_watch_fn fn,
                   void *ctx)
{
    if (grow(w, kind) != 0)
        return -1;
    struct lc_wentry **s = slot_of(w, kind, path);
    if (*s == NULL) {
        struct lc_wentry *e = calloc(1, sizeof *e);
        if (e == NULL || (e->path = strdup(path)) == NULL) {
            free(e);
            return -1;
        }
        *s = e;
        w->count[kind]++;
    }
    return entry_add(*s, fn, ctx);
}

int lc_wset_add(struct lc_wset *s, larch_watch_fn fn, void *ctx)
{
    for (size_t i = 0; i < s->count; i++) {
        if (s->items[i].fn == fn && s->items[i].ctx == ctx)
            return 0;
    }
    if (base_grow(&s->items, &s->cap, s->count + 1, sizeof *s->items) != 0)
        return -1;
    s->items[s->count++] = (struct lc_watcher){ fn, ctx };
    return 0;
}

void lc_wset_free(struct lc_wset *s)
{
    free(s->items);
    *s = (struct lc_wset){ 0 };
}

/* Copies kind k's watchers on path into out; one-shot kinds are removed. */
static int collect(struct lc_watches *w, enum lc_wkind k, const char *path, bool remove,
                   struct lc_wset *out)
{
    struct lc_wentry **s = slot_of(w, k, path);
    if (s == NULL || *s == NULL)
        return 0;
    struct lc_wentry *e = *s;
    for (size_t i = 0; i < e->count; i++) {
        if (lc_wset_add(out, e->items[i].fn, e->items[i].ctx) != 0)
            return -1;
    }
    if (remove) {
        *s = e->next;
        entry_free(e);
        w->count[k]--;
    }
    return 0;
}

/* Persistent-recursive watches fire for events on the path and on every
 * descendant, so each ancestor of path (and path itself) is looked up. */
static int collect_recursive(struct lc_watches *w, const char *path, struct lc_wset *out)
{
    if (w->count[LC_W_RECURSIVE] == 0)
        return 0;
    size_t len = strlen(path);
    char *buf = malloc(len + 1);
    if (buf == NULL)
        return -1;
    memcpy(buf, path, len + 1);
    int rc = collect(w, LC_W_RECURSIVE, "/", false, out);
    for (size_t i = 1; rc == 0 && i <= len; i++) {
        if (i == len || buf[i] == '/') {
            char c = buf[i];
            buf[i] = '\0';
            rc = collect(w, LC_W_RECURSIVE, buf, false, out);
            buf[i] = c;
        }
    }
    free(buf);
    return rc;
}

int lc_watches_trigger(struct lc_watches *w, int32_t type, const char *path, struct lc_wset *out)
{
    int rc = 0;
    switch (type) {
    case ZK_EVENT_CREATED:
    case ZK_EVENT_DATA_CHANGED:
        rc |= collect(w, LC_W_DATA, path, true, out);
        rc |= collect(w, LC_W_EXIST, path, true, out);
        break;
    case ZK_EVENT_CHILD_CHANGED:
        rc |= collect(w, LC_W_CHILD, path, true, out);
        break;
    case ZK_EVENT_DELETED:
        rc |= collect(w, LC_W_DATA, path, true, out);
        rc |= collect(w, LC_W_EXIST, path, true, out);
        rc |= collect(w, LC_W_CHILD, path, true, out);
        break;
    default:
        return 0;
    }
    rc |= collect(w, LC_W_PERSISTENT, path, false, out);
    /* recursive watches see no child events (the child's own event covers it) */
    if (type != ZK_EVENT_CHILD_CHANGED)
        rc |= collect_recursive(w, path, out);
    return rc != 0 ? -1 : 0;
}

int lc_watches_all(struct lc_watches *w, struct lc_wset *out, bool clear)
{
    for (int k = 0; k < LC_W_KINDS; k++) {
        for (size_t b = 0; b < w->nbuckets[k]; b++) {
            for (struct lc_wentry *e = w->buckets[k][b]; e != NULL; e = e->next) {
                for (size_t i = 0; i < e->count; i++) {
                    if (lc_wset_add(out, e->items[i].fn, e->items[i].ctx) != 0)
                        return -1;
                }
            }
        }
    }
    if (clear)
        lc_watches_free(w);
    return 0;
}

/* Removes the matching watchers of one kind on path into out. */
static int remove_kind(struct lc_watches *w, enum lc_wkind k, const char *path, larch_watch_fn fn,
                       void *ctx, struct lc_wset *out)
{
    struct lc_wentry **s = slot_of(w, k, path);
    if (s == NULL || *s == NULL)
        return 0;
    struct lc_wentry *e = *s;
    size_t keep = 0;
    for (size_t i = 0; i < e->count; i++) {
        struct lc_watcher it = e->items[i];
        if (fn != NULL && (it.fn != fn || it.ctx != ctx)) {
            e->items[keep++] = it;
            continue;
        }
        if (lc_wset_add(out, it.fn, it.ctx) != 0)
            return -1;
    }
    e->count = keep;
    if (keep == 0) {
        *s = e->next;
        entry_free(e);
        w->count[k]--;
    }
    return 0;
}

int lc_watches_remove(struct lc_watches *w, unsigned mask, const char *path, larch_watch_fn fn,
                      void *ctx, struct lc_wset *out)
{
    for (int k = 0; k < LC_W_KINDS; k++) {
        if ((mask & (1u << k)) &&
            remove_kind(w, (enum lc_wkind)k, path, fn, ctx, out) != 0)
            return -1;
    }
    return 0;
}

size_t lc_watches_count(const struct lc_watches *w, enum lc_wkind kind, const char *path,
                        larch_watch_fn fn, void *ctx)
{
    struct lc_wentry **s = slot_of(w, kind, path);
    if (s == NULL || *s == NULL)
        return 0;
    if (fn == NULL)
        return (*s)->count;
    size_t n = 0;
    for (size_t i = 0; i < (*s)->count; i++)
        n += (*s)->items[i].fn == fn && (*s)->items[i].ctx == ctx;
    return n;
}

bool lc_watches_has(const struct lc_watches *w, enum lc_wkind kind, const char *path)
{
    struct lc_wentry **s = slot_of(w, kind, path);
    return s != NULL && *s != NULL;
}

int lc_watches_each_path(const struct lc_watches *w, enum lc_wkind kind, lc_path_fn fn, void *arg)
{
    for (size_t b = 0; b < w->nbuckets[kind]; b++) {
        for (struct lc_wentry *e = w->buckets[kind][b]; e != NULL; e = e->next) {
            int rc = fn(arg, e->path);
            if (rc != 0)
                return rc;
        }
    }
    return 0;
}
