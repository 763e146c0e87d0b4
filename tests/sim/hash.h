/*
 * hash — the deterministic 64-bit hashes behind the simulator's checks:
 * entry hashes, log chain hashes and state-machine digests. FNV-1a over
 * bytes; not cryptographic, only has to make an accidental match between
 * two different logs or states vanishingly unlikely.
 *
 * Threading: pure functions.
 */
#ifndef LARCH_SIM_HASH_H
#define LARCH_SIM_HASH_H

#include <stddef.h>
#include <stdint.h>

#define HASH_FNV_OFFSET 0xcbf29ce484222325ull
#define HASH_FNV_PRIME 0x100000001b3ull

static inline uint64_t hash_bytes(uint64_t h, const void *data, size_t len)
{
    const uint8_t *p = data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= HASH_FNV_PRIME;
    }
    return h;
}

static inline uint64_t hash_u64(uint64_t h, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        h ^= (v >> (8 * i)) & 0xffu;
        h *= HASH_FNV_PRIME;
    }
    return h;
}

/* The hash of one log entry's content (type and data, not its zxid). */
static inline uint64_t hash_entry(uint8_t type, const uint8_t *data, size_t len)
{
    uint64_t h = hash_u64(HASH_FNV_OFFSET, type);
    h = hash_u64(h, len);
    return hash_bytes(h, data, len);
}

/* The log chain: chain(z) = H(chain(previous entry), z, entry hash). Two
 * logs with equal chains at z hold the same entries through z. */
static inline uint64_t hash_chain(uint64_t prev_chain, int64_t zxid, uint64_t entry_hash)
{
    uint64_t h = hash_u64(HASH_FNV_OFFSET, prev_chain);
    h = hash_u64(h, (uint64_t)zxid);
    return hash_u64(h, entry_hash);
}

#endif
