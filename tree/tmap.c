/*
 * tmap.c — the sequencer's private hash map (byte-string keys -> pointers)
 * and the hash functions the tree uses everywhere.
 *
 * Used for the prep overlay, pending sessions, the per-session ephemeral
 * sets and the container/TTL sets. Never touched by readers, so there is no
 * synchronisation. Open addressing with linear probing; deletion shifts the
 * following run back instead of leaving tombstones, so lookups stay short
 * after many insert/delete cycles (the overlay is cleared every batch).
 */
#include <stdlib.h>
#include <string.h>

#include "tree/tree_int.h"

#define TMAP_MIN_CAP 16

/* FNV-1a over the bytes, then a murmur3 finaliser so that the low bits (used
 * for slots here and for bucket order in cds_lfht) depend on every byte. */
uint64_t tree_hash_bytes(const void *p, size_t len)
{
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= b[i];
        h *= 0x100000001b3ULL;
    }
    return tree_hash_mix(h, len);
}

/* The node table's hash of a path: eight bytes per multiply, where FNV-1a
 * takes one (its byte loop was a twentieth of a read's CPU on the UDP
 * path), then tree_hash_mix's finaliser. Only the in-memory table uses it;
 * digests stay on tree_hash_bytes, whose values other servers compare. */
uint64_t tree_path_hash(const char *path, size_t len)
{
    const uint8_t *b = (const uint8_t *)path;
    uint64_t h = 0x9e3779b97f4a7c15ULL;
    size_t n = len;
    for (; n >= 8; b += 8, n -= 8) {
        h = (h ^ base_get_le64(b)) * 0xff51afd7ed558ccdULL;
        h = h << 31 | h >> 33;
    }
    uint64_t tail = 0;
    if (n > 0 && len >= 8) {
        /* the last 8 bytes as one load, shifted down to the n not yet
         * hashed: the same value as the loop below, which costs a read
         * of a typical path's tail some 30 instructions */
        tail = base_get_le64(b + n - 8) >> (8 * (8 - n));
    } else {
        for (size_t i = 0; i < n; i++)
            tail |= (uint64_t)b[i] << (8 * i);
    }
    h = (h ^ tail) * 0xc4ceb9fe1a85ec53ULL;
    return tree_hash_mix(h, len);
}

/* Folds v into h (order-dependent), with full avalanche. */
uint64_t tree_hash_mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

static size_t tmap_find(const struct tmap *m, const void *key, size_t len, uint64_t hash)
{
    size_t mask = m->cap - 1;
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
        const struct tmap_ent *e = &m->slots[i];
        if (e->key == NULL)
            return i;
        if (e->hash == hash && e->len == len && memcmp(e->key, key, len) == 0)
            return i;
    }
}

static int tmap_grow(struct tmap *m)
{
    size_t cap = m->cap ? m->cap * 2 : TMAP_MIN_CAP;
    struct tmap_ent *slots = calloc(cap, sizeof *slots);
    if (slots == NULL)
        return -1;
    struct tmap old = *m;
    m->slots = slots;
    m->cap = cap;
    for (size_t i = 0; i < old.cap; i++) {
        if (old.slots[i].key != NULL)
            m->slots[tmap_find(m, old.slots[i].key, old.slots[i].len, old.slots[i].hash)] =
                old.slots[i];
    }
    free(old.slots);
    return 0;
}

void **tmap_get(const struct tmap *m, const void *key, size_t len)
{
    if (m->count == 0)
        return NULL;
    struct tmap_ent *e = &m->slots[tmap_find(m, key, len, tree_hash_bytes(key, len))];
    return e->key != NULL ? &e->val : NULL;
}

int tmap_put(struct tmap *m, const void *key, size_t len, void *val, void **old)
{
    uint64_t hash = tree_hash_bytes(key, len);
    if (m->cap > 0) {
        struct tmap_ent *e = &m->slots[tmap_find(m, key, len, hash)];
        if (e->key != NULL) {
            /* replacing never allocates, so undo and rollback cannot fail */
            if (old != NULL)
                *old = e->val;
            e->val = val;
            return 0;
        }
    }
    /* keep the load factor under 3/4 so probe runs stay short */
    if ((m->count + 1) * 4 > m->cap * 3 && tmap_grow(m) != 0)
        return -1;
    char *copy = malloc(len + 1);
    if (copy == NULL)
        return -1;
    memcpy(copy, key, len);
    copy[len] = '\0';
    m->slots[tmap_find(m, key, len, hash)] =
        (struct tmap_ent){ .key = copy, .len = len, .hash = hash, .val = val };
    m->count++;
    if (old != NULL)
        *old = NULL;
    return 0;
}

bool tmap_del(struct tmap *m, const void *key, size_t len, void **val)
{
    if (m->count == 0)
        return false;
    size_t mask = m->cap - 1;
    size_t i = tmap_find(m, key, len, tree_hash_bytes(key, len));
    if (m->slots[i].key == NULL)
        return false;
    if (val != NULL)
        *val = m->slots[i].val;
    free(m->slots[i].key);
    m->count--;
    /* Backward-shift: move later entries of the run into the hole when the
     * hole lies between their home slot and where they sit now. */
    size_t hole = i;
    for (size_t j = (i + 1) & mask; m->slots[j].key != NULL; j = (j + 1) & mask) {
        size_t home = m->slots[j].hash & mask;
        bool movable = hole <= j ? (home <= hole || home > j) : (home <= hole && home > j);
        if (movable) {
            m->slots[hole] = m->slots[j];
            hole = j;
        }
    }
    m->slots[hole] = (struct tmap_ent){ 0 };
    return true;
}

void tmap_clear(struct tmap *m, void (*free_val)(void *))
{
    for (size_t i = 0; i < m->cap; i++) {
        if (m->slots[i].key == NULL)
            continue;
        if (free_val != NULL)
            free_val(m->slots[i].val);
        free(m->slots[i].key);
    }
    free(m->slots);
    *m = (struct tmap){ 0 };
}

static int cmp_key(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

const char **tmap_sorted_keys(const struct tmap *m, size_t *n, bool *oom)
{
    *n = 0;
    *oom = false;
    if (m->count == 0)
        return NULL;
    const char **keys = malloc(m->count * sizeof *keys);
    if (keys == NULL) {
        *oom = true;
        return NULL;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (m->slots[i].key != NULL)
            keys[(*n)++] = m->slots[i].key;
    }
    /* paths hold no NUL (validated), so strcmp order is bytewise order */
    qsort(keys, *n, sizeof *keys, cmp_key);
    return keys;
}
