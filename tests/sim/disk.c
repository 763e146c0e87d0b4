/* disk — see disk.h. */
#include "tests/sim/disk.h"

#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "tests/sim/hash.h"

static void log_free_from(struct disk_log *l, size_t from)
{
    for (size_t i = from; i < l->n; i++)
        free(l->v[i].data);
    if (from < l->n)
        l->n = from;
}

static void log_push(struct disk_log *l, struct disk_entry e)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        struct disk_entry *v = realloc(l->v, cap * sizeof(*v));
        BASE_ASSERT(v != NULL);
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = e;
}

/* How many entries of l have zxid <= zxid (l is zxid-ordered). */
static size_t log_count_through(const struct disk_log *l, int64_t zxid)
{
    size_t lo = 0, hi = l->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (l->v[mid].zxid <= zxid)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void disk_init(struct disk *d)
{
    memset(d, 0, sizeof(*d));
    struct kv empty;
    kv_init(&empty);
    kv_save(&empty, d->snap);
}

void disk_free(struct disk *d)
{
    log_free_from(&d->log, 0);
    log_free_from(&d->pend, 0);
    free(d->log.v);
    free(d->pend.v);
    free(d->cuts);
    free(d->view);
    memset(d, 0, sizeof(*d));
}

/* Forgets the pending write; the entries' data must be freed or moved. */
static void pending_clear(struct disk *d)
{
    d->pend.n = 0;
    d->n_cuts = 0;
    d->n_view = 0;
    d->pend_truncate = false;
}

/* How many durable entries a reader sees (the pending truncations cut
 * the rest). */
static size_t view_durable(const struct disk *d)
{
    return d->pend_truncate ? log_count_through(&d->log, d->pend_truncate_after) : d->log.n;
}

void disk_save_hard(struct disk *d, const struct raft_hard_state *hs)
{
    d->hard = *hs;
}

void disk_last(const struct disk *d, int64_t *zxid, uint64_t *chain)
{
    if (d->n_view > 0) {
        const struct disk_entry *e = &d->pend.v[d->view[d->n_view - 1]];
        *zxid = e->zxid;
        *chain = e->chain;
        return;
    }
    size_t n = view_durable(d);
    if (n > 0) {
        *zxid = d->log.v[n - 1].zxid;
        *chain = d->log.v[n - 1].chain;
    } else {
        *zxid = d->snap_zxid;
        *chain = d->snap_chain;
    }
}

void disk_install_snapshot(struct disk *d, int64_t zxid, uint64_t chain,
                           const uint8_t *data, size_t len, const struct raft_config *conf)
{
    BASE_ASSERT(len == KV_SNAP_BYTES && conf != NULL);
    memcpy(d->snap, data, len);
    d->snap_config = *conf;
    d->snap_has_config = true;
    d->snap_zxid = zxid;
    d->snap_chain = chain;
    log_free_from(&d->log, 0);
    log_free_from(&d->pend, 0);
    pending_clear(d);
}

/* Drops the first drop entries of the durable log. */
static void log_drop_front(struct disk_log *l, size_t drop)
{
    if (drop == 0)
        return; /* l->v may be NULL: a log never written */
    for (size_t i = 0; i < drop; i++)
        free(l->v[i].data);
    memmove(l->v, l->v + drop, (l->n - drop) * sizeof(l->v[0]));
    l->n -= drop;
}

bool disk_install_snapshot_keep(struct disk *d, int64_t zxid, uint64_t chain,
                                const uint8_t *data, size_t len, const struct raft_config *conf)
{
    BASE_ASSERT(len == KV_SNAP_BYTES && conf != NULL);
    BASE_ASSERT(!disk_has_pending(d));
    if (zxid < d->snap_zxid)
        return false; /* the log it dropped through its own snapshot is gone */
    log_drop_front(&d->log, log_count_through(&d->log, zxid));
    memcpy(d->snap, data, len);
    d->snap_config = *conf;
    d->snap_has_config = true;
    d->snap_zxid = zxid;
    d->snap_chain = chain;
    return true;
}

/* Records a truncation at the pending write's current position; two with
 * no entry between them are one, to the lower point. */
static void cut_push(struct disk *d, int64_t after)
{
    if (d->n_cuts > 0 && d->cuts[d->n_cuts - 1].at == d->pend.n) {
        struct disk_cut *last = &d->cuts[d->n_cuts - 1];
        if (after < last->after)
            last->after = after;
        return;
    }
    if (d->n_cuts == d->cap_cuts) {
        size_t cap = d->cap_cuts ? 2 * d->cap_cuts : 8;
        struct disk_cut *v = realloc(d->cuts, cap * sizeof(*v));
        BASE_ASSERT(v != NULL);
        d->cuts = v;
        d->cap_cuts = cap;
    }
    d->cuts[d->n_cuts++] = (struct disk_cut){d->pend.n, after};
}

void disk_truncate(struct disk *d, int64_t after)
{
    /* What a reader sees loses the pending entries above after, and once
     * none is left before the cut, durable ones too. */
    while (d->n_view > 0 && d->pend.v[d->view[d->n_view - 1]].zxid > after)
        d->n_view--;
    if (d->n_view == 0 && (!d->pend_truncate || after < d->pend_truncate_after)) {
        d->pend_truncate_after = after;
        d->pend_truncate = true;
    }
    cut_push(d, after);
}

static void view_push(struct disk *d, size_t at)
{
    if (d->n_view == d->cap_view) {
        size_t cap = d->cap_view ? 2 * d->cap_view : 16;
        size_t *v = realloc(d->view, cap * sizeof(*v));
        BASE_ASSERT(v != NULL);
        d->view = v;
        d->cap_view = cap;
    }
    d->view[d->n_view++] = at;
}

bool disk_append(struct disk *d, const struct raft_entry *e)
{
    int64_t last;
    uint64_t chain;
    disk_last(d, &last, &chain);
    if (e->zxid <= last || (e->len > 0 && e->data == NULL))
        return false;
    struct disk_entry de = {
        .zxid = e->zxid,
        .type = e->type,
        .len = e->len,
        .chain = hash_chain(chain, e->zxid, hash_entry(e->type, e->data, e->len)),
    };
    de.data = malloc(e->len ? e->len : 1);
    BASE_ASSERT(de.data != NULL);
    if (e->len)
        memcpy(de.data, e->data, e->len);
    log_push(&d->pend, de);
    view_push(d, d->pend.n - 1);
    return true;
}

bool disk_has_pending(const struct disk *d)
{
    return d->pend.n > 0 || d->n_cuts > 0;
}

size_t disk_pending_len(const struct disk *d)
{
    bool leading = d->n_cuts > 0 && d->cuts[0].at == 0;
    return d->pend.n + d->n_cuts - (leading ? 1 : 0);
}

/* Carries out a prefix of the pending write on the durable log, in the
 * order it was made: nothing (keep < 0), or the leading truncation (if
 * any) and the next keep operations. The rest is lost. Returns how many
 * pending entries moved to the durable log (their data with them). */
static size_t land_pending(struct disk *d, long keep)
{
    size_t moved = 0, c = 0;
    long left = keep;
    for (size_t at = 0; keep >= 0 && at <= d->pend.n; at++) {
        if (c < d->n_cuts && d->cuts[c].at == at) {
            if (at > 0 && left-- <= 0)
                break;
            const struct disk_cut *cut = &d->cuts[c++];
            log_free_from(&d->log, log_count_through(&d->log, cut->after));
        }
        if (at == d->pend.n || left-- <= 0)
            break;
        log_push(&d->log, d->pend.v[at]);
        moved = at + 1;
    }
    for (size_t i = moved; i < d->pend.n; i++)
        free(d->pend.v[i].data);
    pending_clear(d);
    return moved;
}

void disk_sync(struct disk *d)
{
    land_pending(d, (long)disk_pending_len(d));
}

size_t disk_crash(struct disk *d, long keep)
{
    return land_pending(d, keep);
}

size_t disk_view_len(const struct disk *d)
{
    return view_durable(d) + d->n_view;
}

const struct disk_entry *disk_view_at(const struct disk *d, size_t i)
{
    size_t durable = view_durable(d);
    if (i < durable)
        return &d->log.v[i];
    BASE_ASSERT(i - durable < d->n_view);
    return &d->pend.v[d->view[i - durable]];
}

const struct disk_entry *disk_find(const struct disk *d, int64_t zxid)
{
    size_t n = log_count_through(&d->log, zxid);
    if (n == 0 || d->log.v[n - 1].zxid != zxid)
        return NULL;
    return &d->log.v[n - 1];
}

bool disk_compact(struct disk *d, int64_t zxid, const uint8_t *data, size_t len,
                  const struct raft_config *conf)
{
    uint64_t chain = d->snap_chain;
    if (zxid != d->snap_zxid) {
        const struct disk_entry *e = disk_find(d, zxid);
        if (e == NULL)
            return false;
        chain = e->chain;
    }
    disk_compact_ahead(d, zxid, chain, data, len, conf);
    return true;
}

void disk_compact_ahead(struct disk *d, int64_t zxid, uint64_t chain, const uint8_t *data,
                        size_t len, const struct raft_config *conf)
{
    BASE_ASSERT(len == KV_SNAP_BYTES && conf != NULL);
    BASE_ASSERT(zxid >= d->snap_zxid && !disk_has_pending(d));
    log_drop_front(&d->log, log_count_through(&d->log, zxid));
    memcpy(d->snap, data, len);
    d->snap_zxid = zxid;
    d->snap_chain = chain;
    d->snap_config = *conf;
    d->snap_has_config = true;
}

bool disk_boot(const struct disk *d, struct raft_boot *boot, struct raft_entry **entries)
{
    BASE_ASSERT(!disk_has_pending(d));
    memset(boot, 0, sizeof(*boot));
    boot->hard_state = d->hard;
    boot->snap_zxid = d->snap_zxid;
    boot->snap_config = d->snap_has_config ? &d->snap_config : NULL;
    *entries = calloc(d->log.n ? d->log.n : 1, sizeof(**entries));
    if (*entries == NULL)
        return false;
    for (size_t i = 0; i < d->log.n; i++) {
        const struct disk_entry *de = &d->log.v[i];
        (*entries)[i] = (struct raft_entry){de->zxid, de->type, de->data, de->len};
    }
    boot->entries = *entries;
    boot->n_entries = d->log.n;
    return true;
}
