/*
 * digest.c — the hash of ZooKeeper's digest auth scheme, base64(sha1(
 * "user:password")), SHA-1 written from FIPS 180-4 (base64 is base's) so
 * neither larchd nor liblarch needs a crypto library. Pure, any thread.
 */
#include <string.h>

#include "proto/proto.h"

/* ---- SHA-1 (FIPS 180-4, section 6.1) ---------------------------------- */

struct sha1 {
    uint32_t h[5];
    uint64_t total_bytes;
    uint8_t block[64];
    size_t block_len;
};

static uint32_t rotl32(uint32_t x, unsigned n)
{
    return (x << n) | (x >> (32 - n));
}

static void sha1_init(struct sha1 *s)
{
    s->h[0] = 0x67452301u;
    s->h[1] = 0xEFCDAB89u;
    s->h[2] = 0x98BADCFEu;
    s->h[3] = 0x10325476u;
    s->h[4] = 0xC3D2E1F0u;
    s->total_bytes = 0;
    s->block_len = 0;
}

/* One 512-bit block: message schedule of 80 words, then 80 rounds whose
 * function and constant change every 20 rounds (Ch, Parity, Maj, Parity). */
static void sha1_compress(uint32_t h[5], const uint8_t block[64])
{
    uint32_t w[80];
    for (int t = 0; t < 16; t++)
        w[t] = base_get_be32(block + 4 * t);
    for (int t = 16; t < 80; t++)
        w[t] = rotl32(w[t - 3] ^ w[t - 8] ^ w[t - 14] ^ w[t - 16], 1);

    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
    for (int t = 0; t < 80; t++) {
        uint32_t f, k;
        if (t < 20) {
            f = (b & c) | (~b & d);
            k = 0x5A827999u;
        } else if (t < 40) {
            f = b ^ c ^ d;
            k = 0x6ED9EBA1u;
        } else if (t < 60) {
            f = (b & c) | (b & d) | (c & d);
            k = 0x8F1BBCDCu;
        } else {
            f = b ^ c ^ d;
            k = 0xCA62C1D6u;
        }
        uint32_t tmp = rotl32(a, 5) + f + e + k + w[t];
        e = d;
        d = c;
        c = rotl32(b, 30);
        b = a;
        a = tmp;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
}

static void sha1_update(struct sha1 *s, const uint8_t *p, size_t len)
{
    s->total_bytes += len;
    while (len > 0) {
        size_t take = 64 - s->block_len;
        if (take > len)
            take = len;
        memcpy(s->block + s->block_len, p, take);
        s->block_len += take;
        p += take;
        len -= take;
        if (s->block_len == 64) {
            sha1_compress(s->h, s->block);
            s->block_len = 0;
        }
    }
}

/* Padding (5.1.1): a 1 bit, zeros up to 56 mod 64 bytes, then the message
 * length in bits as a big-endian 64-bit integer. */
static void sha1_final(struct sha1 *s, uint8_t out[20])
{
    uint64_t bits = s->total_bytes * 8;
    uint8_t pad[72] = { 0x80 };
    size_t pad_len = (s->block_len < 56) ? 56 - s->block_len : 120 - s->block_len;
    base_put_be64(pad + pad_len, bits);
    sha1_update(s, pad, pad_len + 8);
    for (int i = 0; i < 5; i++)
        base_put_be32(out + 4 * i, s->h[i]);
}

/* DigestAuthenticationProvider.generateDigest hashes the whole "user:password"
 * string and keeps the user part in clear; callers build "user:" + out. */
void zk_digest_of(const char *user_colon_password, size_t len, char out[29])
{
    struct sha1 s;
    uint8_t md[20];
    sha1_init(&s);
    sha1_update(&s, (const uint8_t *)user_colon_password, len);
    sha1_final(&s, md);
    base_base64_encode(out, md, sizeof md); /* 28 characters and a NUL */
}
