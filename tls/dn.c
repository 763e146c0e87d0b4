/*
 * dn.c — a certificate's subject as Java's X500Principal.getName() writes
 * it (RFC 2253), the identity ZooKeeper's X509AuthenticationProvider gives
 * a client: the scheme "x509" ACLs and superUser are compared with this
 * text byte for byte, so it follows Java, not OpenSSL's printer.
 *
 * Java's rules (sun.security.x509 AVA.toRFC2253String, checked against
 * OpenJDK 17 with certificates made to probe them):
 *   - relative names last to first, joined by ','; the values of one
 *     multi-valued name in their encoded order, joined by '+';
 *   - the keywords CN C L ST O OU STREET DC UID, any other type as its
 *     dotted OID;
 *   - a value of a dotted type, or not of a string type Java prints
 *     (UTF8String, PrintableString, T61String, IA5String, GeneralString,
 *     BMPString), as '#' and the lowercase hex of its DER encoding;
 *   - a string value's bytes read as UTF-8 whatever the type says (a
 *     BMPString too), malformed sequences becoming U+FFFD as Java's decoder
 *     makes them; then each of , = + < > # ; " \ escaped with a backslash,
 *     NUL as \00, and every space or CR before the first or after the last
 *     other character escaped with a backslash.
 * Pure: no OpenSSL, no allocation.
 */
#include "tls/tls.h"
#include "base/base.h"

#include <stdio.h>
#include <string.h>

/* A DER element: its tag, its content, and its whole encoding. */
struct der {
    uint8_t tag;
    const uint8_t *body;
    size_t len;
};

/* Reads one element at p (n bytes left) into e; the bytes it took, or 0
 * when it is malformed (an indefinite or over-long length, a high tag). */
static size_t der_next(const uint8_t *p, size_t n, struct der *e)
{
    if (n < 2 || (p[0] & 0x1f) == 0x1f)
        return 0;
    size_t hdr = 2, len = p[1];
    if (len & 0x80) {
        size_t k = len & 0x7f;
        if (k == 0 || k > 4 || n < 2 + k)
            return 0;
        len = 0;
        for (size_t i = 0; i < k; i++)
            len = len << 8 | p[2 + i];
        hdr += k;
    }
    if (len > n - hdr)
        return 0;
    e->tag = p[0];
    e->body = p + hdr;
    e->len = len;
    return hdr + len;
}

/* The output being built; overflow makes the result fail, not truncate. */
struct out {
    char *p;
    size_t cap, len;
    bool overflow;
};

static void put(struct out *o, const void *s, size_t n)
{
    if (o->overflow || n > o->cap - o->len) {
        o->overflow = true;
        return;
    }
    memcpy(o->p + o->len, s, n);
    o->len += n;
}

static void put_c(struct out *o, char c)
{
    put(o, &c, 1);
}

/* ---- attribute types ------------------------------------------------------ */

static const struct keyword {
    const char *name;
    uint8_t oid[10];
    size_t len;
} keywords[] = {
    { "CN", { 0x55, 0x04, 0x03 }, 3 },
    { "C", { 0x55, 0x04, 0x06 }, 3 },
    { "L", { 0x55, 0x04, 0x07 }, 3 },
    { "ST", { 0x55, 0x04, 0x08 }, 3 },
    { "STREET", { 0x55, 0x04, 0x09 }, 3 },
    { "O", { 0x55, 0x04, 0x0a }, 3 },
    { "OU", { 0x55, 0x04, 0x0b }, 3 },
    { "DC", { 0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x19 }, 10 },
    { "UID", { 0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x01 }, 10 },
};

static const char *keyword_of(const struct der *oid)
{
    for (size_t i = 0; i < sizeof keywords / sizeof keywords[0]; i++)
        if (oid->len == keywords[i].len && memcmp(oid->body, keywords[i].oid, oid->len) == 0)
            return keywords[i].name;
    return NULL;
}

/* The OID's dotted form; false when it is malformed. */
static bool put_oid(struct out *o, const struct der *oid)
{
    uint64_t arc = 0;
    bool first = true;
    if (oid->len == 0)
        return false;
    for (size_t i = 0; i < oid->len; i++) {
        if (arc > (UINT64_MAX >> 7) || (arc == 0 && oid->body[i] == 0x80))
            return false; /* too large, or a padded arc */
        arc = arc << 7 | (oid->body[i] & 0x7f);
        if (oid->body[i] & 0x80)
            continue;
        char text[48];
        int n;
        if (first)
            n = arc < 80 ? snprintf(text, sizeof text, "%u.%u", (unsigned)(arc / 40),
                                    (unsigned)(arc % 40))
                         : snprintf(text, sizeof text, "2.%llu", (unsigned long long)(arc - 80));
        else
            n = snprintf(text, sizeof text, ".%llu", (unsigned long long)arc);
        put(o, text, (size_t)n);
        first = false;
        arc = 0;
    }
    return (oid->body[oid->len - 1] & 0x80) == 0;
}

/* ---- values ------------------------------------------------------------------ */

/* The string types Java prints as text (DerValue tags; AVA.isDerString). */
static bool is_text_type(uint8_t tag)
{
    return tag == 0x0c || tag == 0x13 || tag == 0x14 || tag == 0x16 || tag == 0x1b || tag == 0x1e;
}

/* '#' and the value's DER encoding in lowercase hex (its length as Java
 * writes it again: the shortest form). */
static void put_hex(struct out *o, const struct der *v)
{
    static const char hex[] = "0123456789abcdef";
    uint8_t hdr[6];
    size_t n = 0;
    hdr[n++] = v->tag;
    if (v->len < 0x80) {
        hdr[n++] = (uint8_t)v->len;
    } else {
        size_t k = v->len > 0xffffff ? 4 : v->len > 0xffff ? 3 : v->len > 0xff ? 2 : 1;
        hdr[n++] = (uint8_t)(0x80 | k);
        for (size_t i = k; i > 0; i--)
            hdr[n++] = (uint8_t)(v->len >> (8 * (i - 1)));
    }
    put_c(o, '#');
    for (size_t i = 0; i < n + v->len; i++) {
        uint8_t b = i < n ? hdr[i] : v->body[i - n];
        put_c(o, hex[b >> 4]);
        put_c(o, hex[b & 15]);
    }
}

static bool cont(uint8_t b)
{
    return (b & 0xc0) == 0x80;
}

/* How many bytes of s[0..n), which start no well-formed UTF-8 sequence,
 * Java's decoder (String's decodeUTF8_UTF16 with replacement, OpenJDK 17)
 * turns into one U+FFFD: it stops at the first byte that cannot continue
 * the sequence, drops the rest of a truncated one, and takes an encoded
 * surrogate whole, where Unicode's maximal-subpart rule would not. */
static size_t java_malformed_length(const uint8_t *s, size_t n)
{
    uint8_t b1 = s[0];
    if ((b1 & 0xf0) == 0xe0) {
        bool bad2 = n >= 2 && ((b1 == 0xe0 && (s[1] & 0xe0) == 0x80) || !cont(s[1]));
        if (n < 3)
            return bad2 ? 1 : n;
        if (bad2)
            return 1;
        return cont(s[2]) ? 3 : 2; /* all three: a surrogate */
    }
    if (b1 >= 0xf0 && b1 <= 0xf7) {
        bool bad2 = b1 > 0xf4 || (n >= 2 && ((b1 == 0xf0 && (s[1] < 0x90 || s[1] > 0xbf)) ||
                                             (b1 == 0xf4 && (s[1] & 0xf0) != 0x80) || !cont(s[1])));
        if (bad2)
            return 1;
        if (n < 4)
            return n == 3 && !cont(s[2]) ? 2 : n;
        return cont(s[2]) ? 3 : 2; /* the fourth byte is the bad one */
    }
    return 1; /* C2..DF cut short or badly continued, a continuation, C0, C1, F8..FF */
}

/* One character of s[0..n) as Java's UTF-8 decoder reads it: its UTF-8
 * bytes into utf8 (*ulen of them), and the bytes of s it consumed. Java
 * copies exactly the well-formed sequences (base_utf8_decode); malformed
 * input gives U+FFFD for as many bytes as Java takes for it. */
static size_t decode_java(const uint8_t *s, size_t n, uint8_t utf8[4], size_t *ulen)
{
    static const uint8_t repl[3] = { 0xef, 0xbf, 0xbd };
    size_t len = base_utf8_decode(s, n, NULL);
    if (len != 0) {
        memcpy(utf8, s, len);
        *ulen = len;
        return len;
    }
    memcpy(utf8, repl, sizeof repl);
    *ulen = sizeof repl;
    return java_malformed_length(s, n);
}

/* A text value: decoded as Java does, escaped as AVA.toRFC2253String. */
static void put_text(struct out *o, const struct der *v)
{
    static const char escapees[] = ",=+<>#;\"\\";
    /* First the escaped text, then the spaces at either end. A value is
     * at most a few KiB (a certificate's whole subject); the escaped form
     * at most three bytes per input byte. */
    char buf[3 * 4096];
    struct out e = { .p = buf, .cap = sizeof buf };
    for (size_t i = 0; i < v->len;) {
        uint8_t ch[4];
        size_t n;
        i += decode_java(v->body + i, v->len - i, ch, &n);
        if (n == 1 && ch[0] != '\0' && strchr(escapees, ch[0]) != NULL) {
            put_c(&e, '\\');
            put_c(&e, (char)ch[0]);
        } else if (n == 1 && ch[0] == '\0') {
            put(&e, "\\00", 3);
        } else {
            put(&e, ch, n);
        }
    }
    if (e.overflow) {
        o->overflow = true;
        return;
    }
    size_t lead = 0, trail = e.len;
    while (lead < e.len && (buf[lead] == ' ' || buf[lead] == '\r'))
        lead++;
    while (trail > lead && (buf[trail - 1] == ' ' || buf[trail - 1] == '\r'))
        trail--;
    for (size_t i = 0; i < e.len; i++) {
        if (i < lead || i >= trail)
            put_c(o, '\\');
        put_c(o, buf[i]);
    }
}

/* ---- the name ------------------------------------------------------------------ */

/* One AttributeTypeAndValue; false when malformed. */
static bool put_atv(struct out *o, const struct der *atv)
{
    struct der oid, val;
    size_t a = der_next(atv->body, atv->len, &oid);
    size_t b = a ? der_next(atv->body + a, atv->len - a, &val) : 0;
    if (atv->tag != 0x30 || a == 0 || b == 0 || a + b != atv->len || oid.tag != 0x06)
        return false;
    const char *kw = keyword_of(&oid);
    if (kw != NULL)
        put(o, kw, strlen(kw));
    else if (!put_oid(o, &oid))
        return false;
    put_c(o, '=');
    if (kw != NULL && is_text_type(val.tag))
        put_text(o, &val);
    else
        put_hex(o, &val);
    return true;
}

/* One RelativeDistinguishedName (a SET of AVAs, in encoded order). */
static bool put_rdn(struct out *o, const struct der *rdn)
{
    if (rdn->tag != 0x31 || rdn->len == 0)
        return false;
    for (size_t off = 0; off < rdn->len;) {
        struct der atv;
        size_t k = der_next(rdn->body + off, rdn->len - off, &atv);
        if (k == 0 || !put_atv(o, &atv))
            return false;
        off += k;
        if (off < rdn->len)
            put_c(o, '+');
    }
    return true;
}

#define DN_RDNS_MAX 64 /* relative names in one subject */

int tls_dn_rfc2253(const uint8_t *der, size_t len, char *out, size_t cap)
{
    struct der name = { 0 }, rdns[DN_RDNS_MAX];
    size_t count = 0;
    /* len 0: der_next reads nothing and returns 0, which would equal it */
    if (cap == 0 || len == 0 || der_next(der, len, &name) != len || name.tag != 0x30)
        return -1;
    for (size_t off = 0; off < name.len; count++) {
        size_t k = count < DN_RDNS_MAX ? der_next(name.body + off, name.len - off, &rdns[count]) : 0;
        if (k == 0)
            return -1;
        off += k;
    }
    struct out o = { .p = out, .cap = cap - 1 };
    for (size_t i = count; i > 0; i--) {
        if (!put_rdn(&o, &rdns[i - 1]))
            return -1;
        if (i > 1)
            put_c(&o, ',');
    }
    if (o.overflow)
        return -1;
    out[o.len] = '\0';
    return (int)o.len;
}
