/*
 * siphash.c — SipHash-2-4 (Aumasson and Bernstein, 2012): a keyed 64-bit
 * PRF, fast on short inputs. Larch signs UDP reads with it, keyed by the
 * session's password (dataplane/UDP.md).
 */
#include "base/base.h"

#include <string.h>

static inline uint64_t rotl(uint64_t x, int b)
{
    return (x << b) | (x >> (64 - b));
}

static inline void sip_round(struct base_sip *s)
{
    s->v[0] += s->v[1];
    s->v[1] = rotl(s->v[1], 13);
    s->v[1] ^= s->v[0];
    s->v[0] = rotl(s->v[0], 32);
    s->v[2] += s->v[3];
    s->v[3] = rotl(s->v[3], 16);
    s->v[3] ^= s->v[2];
    s->v[0] += s->v[3];
    s->v[3] = rotl(s->v[3], 21);
    s->v[3] ^= s->v[0];
    s->v[2] += s->v[1];
    s->v[1] = rotl(s->v[1], 17);
    s->v[1] ^= s->v[2];
    s->v[2] = rotl(s->v[2], 32);
}

static inline void sip_absorb(struct base_sip *s, uint64_t m)
{
    s->v[3] ^= m;
    sip_round(s);
    sip_round(s);
    s->v[0] ^= m;
}

void base_sip_init(struct base_sip *s, const uint8_t key[BASE_SIPHASH_KEY_BYTES])
{
    uint64_t k0 = base_get_le64(key), k1 = base_get_le64(key + 8);
    s->v[0] = k0 ^ 0x736f6d6570736575ull;
    s->v[1] = k1 ^ 0x646f72616e646f6dull;
    s->v[2] = k0 ^ 0x6c7967656e657261ull;
    s->v[3] = k1 ^ 0x7465646279746573ull;
    s->total = 0;
    s->nbuf = 0;
}

void base_sip_update(struct base_sip *s, const void *p, size_t n)
{
    const uint8_t *b = p;
    if (n == 0)
        return;
    s->total += n;
    if (s->nbuf > 0) { /* top up the partial word first */
        size_t take = 8 - s->nbuf < n ? 8 - s->nbuf : n;
        memcpy(s->buf + s->nbuf, b, take);
        s->nbuf += take;
        b += take;
        n -= take;
        if (s->nbuf < 8)
            return;
        sip_absorb(s, base_get_le64(s->buf));
        s->nbuf = 0;
    }
    for (; n >= 8; b += 8, n -= 8)
        sip_absorb(s, base_get_le64(b));
    if (n > 0)
        memcpy(s->buf, b, n);
    s->nbuf = n;
}

uint64_t base_sip_final(struct base_sip *s)
{
    /* the last word: the 0..7 bytes left, and the length's low byte on top */
    uint64_t last = (uint64_t)(s->total & 0xff) << 56;
    for (size_t i = 0; i < s->nbuf; i++)
        last |= (uint64_t)s->buf[i] << (8 * i);
    sip_absorb(s, last);
    s->v[2] ^= 0xff;
    for (int i = 0; i < 4; i++)
        sip_round(s);
    return s->v[0] ^ s->v[1] ^ s->v[2] ^ s->v[3];
}

uint64_t base_siphash24(const uint8_t key[BASE_SIPHASH_KEY_BYTES], const void *p, size_t n)
{
    struct base_sip s;
    base_sip_init(&s, key);
    base_sip_update(&s, p, n);
    return base_sip_final(&s);
}
