/*
 * text.c — UTF-8 decoding and base64 encoding (base.h): the one copy of
 * each that the JSON writer, the path validator, the CLI and the digest
 * scheme build on.
 */
#include "base/base.h"

/* The range the second byte of a sequence led by c must lie in (Unicode
 * 15, table 3-7): narrower than 80..BF where the lead alone would allow an
 * overlong form (E0, F0), a surrogate (ED) or a code point above U+10FFFF
 * (F4). Returns the sequence's length, or 0 for a byte that leads none. */
static size_t utf8_lead(uint8_t c, uint8_t *lo, uint8_t *hi)
{
    *lo = 0x80;
    *hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf)
        return 2;
    if (c >= 0xe0 && c <= 0xef) {
        *lo = c == 0xe0 ? 0xa0 : 0x80; /* overlong below U+0800 */
        *hi = c == 0xed ? 0x9f : 0xbf; /* surrogates U+D800..U+DFFF */
        return 3;
    }
    if (c >= 0xf0 && c <= 0xf4) {
        *lo = c == 0xf0 ? 0x90 : 0x80; /* overlong below U+10000 */
        *hi = c == 0xf4 ? 0x8f : 0xbf; /* above U+10FFFF */
        return 4;
    }
    return 0; /* a continuation byte, C0, C1 (always overlong), F5..FF */
}

size_t base_utf8_decode(const void *p, size_t avail, uint32_t *cp)
{
    static const uint8_t lead_bits[5] = { 0, 0x7f, 0x1f, 0x0f, 0x07 };
    const uint8_t *s = p;
    if (avail == 0)
        return 0;
    size_t n = s[0] < 0x80 ? 1 : 0;
    uint8_t lo = 0x80, hi = 0xbf;
    if (n == 0)
        n = utf8_lead(s[0], &lo, &hi);
    if (n == 0 || avail < n || (n > 1 && (s[1] < lo || s[1] > hi)))
        return 0;
    uint32_t v = s[0] & lead_bits[n];
    for (size_t i = 1; i < n; i++) {
        if (i > 1 && (s[i] < 0x80 || s[i] > 0xbf))
            return 0;
        v = v << 6 | (s[i] & 0x3fu);
    }
    if (cp != NULL)
        *cp = v;
    return n;
}

bool base_utf8_valid(const void *p, size_t n)
{
    const uint8_t *s = p;
    for (size_t i = 0; i < n;) {
        size_t len = base_utf8_decode(s + i, n - i, NULL);
        if (len == 0)
            return false;
        i += len;
    }
    return true;
}

size_t base_base64_encode(char *out, const void *in, size_t n)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const uint8_t *s = in;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        size_t left = n - i;
        uint32_t v = (uint32_t)s[i] << 16;
        if (left > 1)
            v |= (uint32_t)s[i + 1] << 8;
        if (left > 2)
            v |= s[i + 2];
        out[o++] = alphabet[v >> 18 & 63];
        out[o++] = alphabet[v >> 12 & 63];
        out[o++] = left > 1 ? alphabet[v >> 6 & 63] : '=';
        out[o++] = left > 2 ? alphabet[v & 63] : '=';
    }
    out[o] = '\0';
    return o;
}
