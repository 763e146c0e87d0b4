/*
 * acl.c — ZooKeeper ACLs: validation of client lists (fixupACL), permission
 * checks (checkACL), jute encoding and reference counting. The digest
 * scheme's hash is proto/digest.c's zk_digest_of.
 *
 * Threading: every function here is pure except tree_acl_ref/unref, which
 * touch the atomic reference count and may run on any thread (unref also on
 * liburcu's call_rcu thread). Lists are immutable once built.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tree/tree.h"

/* ---- lifetime ------------------------------------------------------------ */

static struct tree_acl_entry open_acl_entry = { ZK_PERM_ALL, (char *)"world", (char *)"anyone" };
static struct tree_acl open_acl = { 1, &open_acl_entry, 1 };

/* The static world:anyone ALL list (ZooDefs.Ids.OPEN_ACL_UNSAFE). Most nodes
 * carry it, so every such node shares this one list and never counts refs. */
struct tree_acl *tree_acl_open(void)
{
    return &open_acl;
}

struct tree_acl *tree_acl_ref(struct tree_acl *acl)
{
    if (acl != NULL && acl != &open_acl)
        __atomic_add_fetch(&acl->refs_, 1, __ATOMIC_RELAXED);
    return acl;
}

/* Frees strings, items and the list itself, each allocated separately (the
 * ownership tree.h documents), so lists built elsewhere free the same way. */
static void acl_free(struct tree_acl *acl)
{
    for (int32_t i = 0; i < acl->count; i++) {
        free(acl->items[i].scheme);
        free(acl->items[i].id);
    }
    free(acl->items);
    free(acl);
}

/* Drops one reference; the last one frees. Acquire-release ordering makes
 * every earlier use of the list by other threads happen before the free. */
void tree_acl_unref(struct tree_acl *acl)
{
    if (acl == NULL || acl == &open_acl)
        return;
    if (__atomic_sub_fetch(&acl->refs_, 1, __ATOMIC_ACQ_REL) == 0)
        acl_free(acl);
}

/* ---- small string helpers ------------------------------------------------ */

static bool str_is(struct zk_str s, const char *lit)
{
    size_t n = strlen(lit);
    return s.len >= 0 && (size_t)s.len == n && memcmp(s.ptr, lit, n) == 0;
}

/* Java's Integer.parseInt(s, radix): optional '+' or '-', at least one digit,
 * result within int32. ZooKeeper parses address parts and mask bits with it,
 * so "010" is ten and "+8" is eight there too. */
static bool java_parse_int(const char *s, size_t n, int radix, int32_t *out)
{
    size_t i = 0;
    bool neg = false;
    if (n > 0 && (s[0] == '+' || s[0] == '-')) {
        neg = s[0] == '-';
        i = 1;
    }
    if (i == n)
        return false;
    int64_t v = 0;
    for (; i < n; i++) {
        int d;
        char c = s[i];
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'z')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'Z')
            d = c - 'A' + 10;
        else
            return false;
        if (d >= radix)
            return false;
        v = v * radix + d;
        if (v > (int64_t)INT32_MAX + 1)
            return false;
    }
    if (!neg && v > INT32_MAX)
        return false;
    *out = (int32_t)(neg ? -v : v);
    return true;
}

/* ---- "ip" scheme (IPAuthenticationProvider) ------------------------------ */

/* Dotted quad: exactly four '.'-separated decimal parts, each 0..255. */
static size_t ipv4_parse(const char *s, size_t n, uint8_t out[16])
{
    size_t start = 0;
    int part = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != '.')
            continue;
        int32_t v;
        if (part == 4 || !java_parse_int(s + start, i - start, 10, &v) || v < 0 || v > 255)
            return 0;
        out[part++] = (uint8_t)v;
        start = i + 1;
    }
    return part == 4 ? 4 : 0;
}

/* Parses up to max ':'-separated 16-bit hex groups from s[0..n) into out
 * (2 bytes each). Returns the group count, or -1 on an empty, over-long or
 * non-hex group. n == 0 means no groups. */
static int ipv6_groups(const char *s, size_t n, uint8_t *out, int max)
{
    if (n == 0)
        return 0;
    int count = 0;
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != ':')
            continue;
        int32_t v;
        size_t glen = i - start;
        if (count == max || glen == 0 || glen > 4 || !java_parse_int(s + start, glen, 16, &v))
            return -1;
        out[2 * count] = (uint8_t)((v >> 8) & 0xFF);
        out[2 * count + 1] = (uint8_t)(v & 0xFF);
        count++;
        start = i + 1;
    }
    return count;
}

/* IPv6 text as ZooKeeper (3.9+, parseV6addr) reads it: eight hex groups, or
 * one "::" standing for at least one zero group. No embedded IPv4 tail and
 * no zone id, as there. */
static size_t ipv6_parse(const char *s, size_t n, uint8_t out[16])
{
    const char *gap = memmem(s, n, "::", 2);
    memset(out, 0, 16);
    if (gap == NULL)
        return ipv6_groups(s, n, out, 8) == 8 ? 16 : 0;

    size_t head_len = (size_t)(gap - s);
    const char *tail = gap + 2;
    size_t tail_len = n - head_len - 2;
    if (memmem(tail, tail_len, "::", 2) != NULL)
        return 0;
    uint8_t head_b[16], tail_b[16];
    int head = ipv6_groups(s, head_len, head_b, 8);
    int rest = ipv6_groups(tail, tail_len, tail_b, 8);
    if (head < 0 || rest < 0 || head + rest >= 8)
        return 0;
    memcpy(out, head_b, 2 * (size_t)head);
    memcpy(out + 16 - 2 * rest, tail_b, 2 * (size_t)rest);
    return 16;
}

/* addr2Bytes: anything with a ':' is IPv6, else anything with a '.' is IPv4.
 * Returns the address length in bytes (4 or 16), 0 when it does not parse. */
static size_t ip_parse(const char *s, size_t n, uint8_t out[16])
{
    if (memchr(s, ':', n) != NULL)
        return ipv6_parse(s, n, out);
    if (memchr(s, '.', n) != NULL)
        return ipv4_parse(s, n, out);
    return 0;
}

/* Splits "addr[/bits]" at the first '/'. Returns the address length (0 when
 * invalid) and the prefix length in *bits (the whole address without '/'). */
static size_t ip_expr_parse(const char *s, size_t n, uint8_t addr[16], int32_t *bits)
{
    const char *slash = memchr(s, '/', n);
    size_t addr_len = ip_parse(s, slash ? (size_t)(slash - s) : n, addr);
    if (addr_len == 0)
        return 0;
    *bits = (int32_t)(addr_len * 8);
    if (slash != NULL) {
        size_t rest = n - (size_t)(slash - s) - 1;
        if (!java_parse_int(slash + 1, rest, 10, bits) || *bits < 0 ||
            *bits > (int32_t)(addr_len * 8))
            return 0;
    }
    return addr_len;
}

/* Keeps the first bits bits of b, zeroes the rest. */
static void ip_mask(uint8_t *b, size_t len, int32_t bits)
{
    size_t start = (size_t)bits / 8;
    if (start < len)
        b[start] &= (uint8_t)~((1u << (8 - bits % 8)) - 1);
    for (size_t i = start + 1; i < len; i++)
        b[i] = 0;
}

/* IPAuthenticationProvider.matches: peer and ACL address agree on the
 * ACL's prefix; an IPv4 ACL never matches an IPv6 peer or the reverse. */
static bool ip_addr_matches(const uint8_t *peer, size_t peer_len, const char *expr)
{
    uint8_t acl_addr[16], peer_addr[16];
    int32_t bits;
    size_t acl_len = ip_expr_parse(expr, strlen(expr), acl_addr, &bits);
    if (acl_len == 0 || peer_len != acl_len)
        return false;
    memcpy(peer_addr, peer, peer_len);
    ip_mask(acl_addr, acl_len, bits);
    ip_mask(peer_addr, peer_len, bits);
    return memcmp(acl_addr, peer_addr, acl_len) == 0;
}

static bool ip_matches(const char *peer, const char *expr)
{
    uint8_t peer_addr[16];
    size_t peer_len = peer != NULL ? ip_parse(peer, strlen(peer), peer_addr) : 0;
    return peer_len != 0 && ip_addr_matches(peer_addr, peer_len, expr);
}

/* The caller's own address against an "ip" ACL id, in whichever form it came. */
static bool peer_matches(const struct tree_auth *auth, const char *expr)
{
    if (auth->peer_ip != NULL)
        return ip_matches(auth->peer_ip, expr);
    const struct tree_addr *a = auth->peer_addr;
    return a != NULL && ip_addr_matches(a->b, a->len, expr);
}

/* ---- fixupACL ------------------------------------------------------------- */

/* DigestAuthenticationProvider.isValid is `id.split(":").length == 2`; Java's
 * split drops trailing empty pieces, so after stripping trailing ':' exactly
 * one ':' must remain ("u:h", ":h" and "u:h:" pass, "u:", "u" and "a:b:c"
 * do not). */
static bool digest_id_valid(struct zk_str id)
{
    size_t n = (size_t)id.len;
    while (n > 0 && id.ptr[n - 1] == ':')
        n--;
    if (n == 0)
        return false;
    size_t colons = 0;
    for (size_t i = 0; i < n; i++)
        colons += id.ptr[i] == ':';
    return colons == 1;
}

static bool ip_id_valid(struct zk_str id)
{
    uint8_t addr[16];
    int32_t bits;
    return ip_expr_parse(id.ptr, (size_t)id.len, addr, &bits) != 0;
}

/* SASLAuthenticationProvider.isValid: whether Kerberos's KerberosName
 * constructor takes the id. A name without '@' is simple (all of it is
 * the service name); one with '@' must be name[/host]@realm, none of the
 * parts holding '/' or '@' (its pattern ([^/@]*)(/([^/@]*))?@([^/@]*)). */
static bool sasl_id_valid(struct zk_str id)
{
    const char *at = memchr(id.ptr, '@', (size_t)id.len);
    if (at == NULL)
        return true;
    size_t before = (size_t)(at - id.ptr), after = (size_t)id.len - before - 1;
    const char *slash = memchr(id.ptr, '/', before);
    if (slash != NULL && memchr(slash + 1, '/', before - (size_t)(slash - id.ptr) - 1) != NULL)
        return false;
    return memchr(at + 1, '@', after) == NULL && memchr(at + 1, '/', after) == NULL;
}

/* Whether a scheme has a provider on this server: ZooKeeper's registry
 * always has ip and digest, and sasl when authProvider.N names it. */
static bool sasl_served(const char *scheme, const struct tree_auth *auth)
{
    return auth != NULL && auth->sasl_provider && strcmp(scheme, "sasl") == 0;
}

/* Schemes whose provider says isAuthenticated(): only their ids stand in for
 * "auth". ip and world are not; "super" has no provider and is skipped. */
static bool scheme_is_authenticated(const char *scheme, const struct tree_auth *auth,
                                    uint32_t providers)
{
    return scheme != NULL &&
           (strcmp(scheme, "digest") == 0 || sasl_served(scheme, auth) ||
            ((providers & TREE_ACL_X509) && strcmp(scheme, "x509") == 0));
}

/* ---- x509 ids: what Java's X500Principal(String) parses --------------------
 *
 * X509AuthenticationProvider.isValid is `new X500Principal(id)` not
 * throwing. Its grammar, as OpenJDK 17 takes it (checked against it):
 * relative names separated by ',' or ';', values of one name by '+', none
 * empty; "keyword=value", blanks around either; a keyword of Java's table
 * in any case, or a dotted OID (optionally "OID."-prefixed) of at least two
 * arcs; a value '#' and the hex of one DER element, or a quoted string, or
 * text where '"', '<' and '>' must be escaped and '\' escapes one of
 * ,=+<>#;"\, space and CR (getName escapes a CR at either end), or gives a
 * byte as two hex digits. The empty name is valid. Java's parser has
 * quirks this does not copy (it decides whether a separator is escaped by
 * counting every backslash of the name before it, not the adjacent ones):
 * on such names the two disagree; on what getName writes for ordinary
 * certificates they agree. */

static const char *const x500_keywords[] = {
    "CN", "C", "L", "S", "ST", "O", "OU", "T", "IP", "STREET", "DC", "DNQUALIFIER", "DNQ",
    "SURNAME", "GIVENNAME", "INITIALS", "GENERATION", "EMAIL", "EMAILADDRESS", "UID",
    "SERIALNUMBER",
};

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int hex_value(char c)
{
    if (is_digit(c))
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* "1.2.840": at least two arcs, the first 0..2, the second below 40 under 0 or 1. */
static bool x500_oid_valid(const char *s, size_t n)
{
    size_t arcs = 0;
    uint64_t second = 0;
    for (size_t i = 0; i < n; arcs++) {
        size_t start = i;
        while (i < n && is_digit(s[i])) {
            if (arcs == 1 && second < 1000)
                second = second * 10 + (uint64_t)(s[i] - '0');
            i++;
        }
        if (i == start || (arcs == 0 && (i - start != 1 || s[start] > '2')))
            return false;
        if (i < n && (s[i] != '.' || i + 1 == n))
            return false;
        i += i < n;
    }
    return arcs >= 2 && (s[0] == '2' || second < 40);
}

static bool x500_keyword_valid(const char *s, size_t n)
{
    for (size_t i = 0; i < sizeof x500_keywords / sizeof x500_keywords[0]; i++)
        if (strlen(x500_keywords[i]) == n && strncasecmp(s, x500_keywords[i], n) == 0)
            return true;
    if (n > 4 && strncasecmp(s, "OID.", 4) == 0)
        return x500_oid_valid(s + 4, n - 4);
    return x500_oid_valid(s, n);
}

static bool is_separator(char c)
{
    return c == ',' || c == ';' || c == '+';
}

/* '\' at s[*i]: a special character or two hex digits follow. */
static bool x500_escape(const char *s, size_t n, size_t *i)
{
    if (*i + 1 < n && strchr(",=+<>#;\"\\ \r", s[*i + 1]) != NULL && s[*i + 1] != '\0') {
        *i += 2;
        return true;
    }
    if (*i + 2 < n && hex_value(s[*i + 1]) >= 0 && hex_value(s[*i + 2]) >= 0) {
        *i += 3;
        return true;
    }
    return false;
}

/* '#' and hex at s[*i]: exactly one DER element (tag, definite length,
 * content), up to the next separator. */
static bool x500_hex_value(const char *s, size_t n, size_t *i)
{
    size_t start = ++*i, len = 0, hdr = 2, body = 0;
    uint8_t head[6] = { 0 };
    while (*i < n && !is_separator(s[*i])) {
        if (hex_value(s[*i]) < 0)
            return false;
        (*i)++;
    }
    size_t digits = *i - start;
    if (digits < 4 || digits % 2 != 0)
        return false;
    len = digits / 2;
    for (size_t k = 0; k < 6 && k < len; k++)
        head[k] = (uint8_t)(hex_value(s[start + 2 * k]) << 4 | hex_value(s[start + 2 * k + 1]));
    if ((head[0] & 0x1f) == 0x1f)
        return false;
    if (head[1] & 0x80) {
        size_t k = head[1] & 0x7f;
        if (k == 0 || k > 4 || len < 2 + k)
            return false;
        for (size_t j = 0; j < k; j++)
            body = body << 8 | head[2 + j];
        hdr += k;
    } else {
        body = head[1];
    }
    return len == hdr + body;
}

/* A quoted value at s[*i], then blanks up to the separator. */
static bool x500_quoted_value(const char *s, size_t n, size_t *i)
{
    for (++*i; *i < n && s[*i] != '"';) {
        if (s[*i] != '\\')
            ++*i;
        else if (!x500_escape(s, n, i))
            return false;
    }
    if (*i == n)
        return false;
    for (++*i; *i < n && s[*i] == ' ';)
        ++*i;
    return *i == n || is_separator(s[*i]);
}

/* The value at s[*i] (blanks before it skipped), up to a separator or the end. */
static bool x500_value(const char *s, size_t n, size_t *i)
{
    if (*i < n && s[*i] == '#')
        return x500_hex_value(s, n, i);
    if (*i < n && s[*i] == '"')
        return x500_quoted_value(s, n, i);
    while (*i < n && !is_separator(s[*i])) {
        char c = s[*i];
        if (c == '"' || c == '<' || c == '>')
            return false;
        if (c != '\\')
            ++*i;
        else if (!x500_escape(s, n, i))
            return false;
    }
    return true;
}

static bool x509_id_valid(struct zk_str id)
{
    const char *s = id.ptr;
    size_t n = (size_t)id.len;
    if (n == 0)
        return true;
    for (size_t i = 0;;) {
        while (i < n && s[i] == ' ')
            i++;
        size_t kw = i;
        while (i < n && s[i] != '=' && !is_separator(s[i]))
            i++;
        size_t kw_end = i;
        while (kw_end > kw && s[kw_end - 1] == ' ')
            kw_end--;
        if (i == n || s[i] != '=' || !x500_keyword_valid(s + kw, kw_end - kw))
            return false;
        for (i++; i < n && s[i] == ' ';)
            i++;
        if (!x500_value(s, n, &i))
            return false;
        if (i == n)
            return true;
        i++; /* a separator: another value must follow */
    }
}

static int32_t auth_expansion_count(const struct tree_auth *auth, uint32_t providers)
{
    int32_t n = 0;
    for (int32_t i = 0; auth != NULL && i < auth->count; i++)
        n += scheme_is_authenticated(auth->ids[i].scheme, auth, providers) && auth->ids[i].id != NULL;
    return n;
}

/* Jute strings may carry NUL bytes; a stored ACL is a C string, so such an
 * id could not round-trip and is refused rather than silently truncated.
 * The caller has excluded null strings. */
static bool str_usable(struct zk_str s)
{
    return s.len == 0 || memchr(s.ptr, '\0', (size_t)s.len) == NULL;
}

/* A jute null (length -1); a NULL pointer with bytes claimed counts too. */
static bool str_is_null(struct zk_str s)
{
    return s.len < 0 || (s.ptr == NULL && s.len > 0);
}

/* Checks one entry (duplicates already dropped) as fixupACL does and says
 * how many output entries it becomes (the number of digest ids for "auth",
 * else 1), or the error: ZK_EINVALIDACL, or ZK_EMARSHALLINGERROR where
 * ZooKeeper dereferences a null id (world's id.equals("anyone"), the
 * digest and ip providers' isValid). A null scheme is InvalidACL there. */
static int32_t acl_entry_check(const struct zk_acl *a, const struct tree_auth *auth,
                               uint32_t providers)
{
    if (str_is_null(a->id.scheme) || !str_usable(a->id.scheme))
        return ZK_EINVALIDACL;
    if (str_is(a->id.scheme, "auth")) {
        int32_t n = auth_expansion_count(auth, providers);
        return n > 0 ? n : ZK_EINVALIDACL;
    }
    bool world = str_is(a->id.scheme, "world");
    bool digest = str_is(a->id.scheme, "digest");
    bool ip = str_is(a->id.scheme, "ip");
    bool sasl = str_is(a->id.scheme, "sasl") && sasl_served("sasl", auth);
    bool x509 = (providers & TREE_ACL_X509) && str_is(a->id.scheme, "x509");
    if (!world && !digest && !ip && !sasl && !x509)
        return ZK_EINVALIDACL; /* no provider for the scheme */
    if (str_is_null(a->id.id))
        return ZK_EMARSHALLINGERROR;
    if (!str_usable(a->id.id))
        return ZK_EINVALIDACL;
    if (world)
        return str_is(a->id.id, "anyone") ? 1 : ZK_EINVALIDACL;
    if (digest)
        return digest_id_valid(a->id.id) ? 1 : ZK_EINVALIDACL;
    if (sasl)
        return sasl_id_valid(a->id.id) ? 1 : ZK_EINVALIDACL;
    if (x509)
        return x509_id_valid(a->id.id) ? 1 : ZK_EINVALIDACL;
    return ip_id_valid(a->id.id) ? 1 : ZK_EINVALIDACL;
}

/* removeDuplicates keeps an ArrayList and calls later.equals(kept) on each
 * kept entry until one is equal: ACL.equals compares perms, then
 * scheme.equals, then id.equals, so a null scheme or id on the later entry
 * throws once an earlier entry gets that far. Comparing with every earlier
 * entry (not only the kept ones) reaches the same verdict: a dropped entry
 * equals a kept one before it. Returns 1 for a duplicate, 0 for a new
 * entry, or ZK_EMARSHALLINGERROR. */
static int acl_duplicate_of_earlier(const struct zk_aclvec *req, int32_t i)
{
    const struct zk_acl *a = &req->items[i];
    for (int32_t j = 0; j < i; j++) {
        const struct zk_acl *b = &req->items[j];
        if (a->perms != b->perms)
            continue;
        if (str_is_null(a->id.scheme))
            return ZK_EMARSHALLINGERROR;
        if (!zk_str_eq(a->id.scheme, b->id.scheme))
            continue;
        if (str_is_null(a->id.id))
            return ZK_EMARSHALLINGERROR;
        if (zk_str_eq(a->id.id, b->id.id))
            return 1;
    }
    return 0;
}

static bool is_duplicate(const struct zk_aclvec *req, int32_t i)
{
    return acl_duplicate_of_earlier(req, i) == 1;
}

static char *dup_bytes(const char *p, size_t n)
{
    char *s = malloc(n + 1);
    if (s != NULL) {
        if (n > 0)
            memcpy(s, p, n);
        s[n] = '\0';
    }
    return s;
}

/* Appends (perms, scheme, id) to acl->items[acl->count]; false on OOM. */
static bool acl_append(struct tree_acl *acl, int32_t perms, const char *scheme, size_t scheme_len,
                       const char *id, size_t id_len)
{
    struct tree_acl_entry *e = &acl->items[acl->count];
    e->perms = perms;
    e->scheme = dup_bytes(scheme, scheme_len);
    e->id = dup_bytes(id, id_len);
    if (e->scheme == NULL || e->id == NULL) {
        free(e->scheme);
        free(e->id);
        return false;
    }
    acl->count++;
    return true;
}

/* Adds the entries one request entry stands for: the entry itself, or for
 * "auth" one (perms, scheme, id) per authenticated identity of the caller. */
static bool acl_append_expanded(struct tree_acl *acl, const struct zk_acl *a,
                                const struct tree_auth *auth, uint32_t providers)
{
    if (!str_is(a->id.scheme, "auth"))
        return acl_append(acl, a->perms, a->id.scheme.ptr, (size_t)a->id.scheme.len, a->id.id.ptr,
                          (size_t)a->id.id.len);
    for (int32_t i = 0; i < auth->count; i++) {
        const struct tree_authid *cid = &auth->ids[i];
        if (!scheme_is_authenticated(cid->scheme, auth, providers) || cid->id == NULL)
            continue;
        if (!acl_append(acl, a->perms, cid->scheme, strlen(cid->scheme), cid->id, strlen(cid->id)))
            return false;
    }
    return true;
}

static bool acl_is_open(const struct tree_acl *acl)
{
    return acl->count == 1 && acl->items[0].perms == ZK_PERM_ALL &&
           strcmp(acl->items[0].scheme, "world") == 0 && strcmp(acl->items[0].id, "anyone") == 0;
}

/* Validates req (PrepRequestProcessor.fixupACL after removeDuplicates) and
 * sizes the result. Returns ZK_OK with *total set, ZK_EINVALIDACL, or
 * ZK_EMARSHALLINGERROR (see acl_entry_check). The whole duplicate pass runs
 * first, as there. Perms are not range-checked: ZooKeeper stores whatever
 * int the client sent. */
static int acl_request_check(const struct zk_aclvec *req, const struct tree_auth *auth,
                             uint32_t providers, int32_t *total)
{
    if (req == NULL || req->count <= 0 || req->items == NULL || req->count > TREE_ACL_MAX)
        return ZK_EINVALIDACL;
    for (int32_t i = 0; i < req->count; i++) {
        if (acl_duplicate_of_earlier(req, i) < 0)
            return ZK_EMARSHALLINGERROR;
    }
    int64_t n = 0;
    for (int32_t i = 0; i < req->count; i++) {
        if (is_duplicate(req, i))
            continue;
        int32_t k = acl_entry_check(&req->items[i], auth, providers);
        if (k < 0)
            return k;
        n += k;
    }
    if (n > TREE_ACL_MAX)
        return ZK_EINVALIDACL;
    *total = (int32_t)n;
    return ZK_OK;
}

/* See tree.h. Output order is request order with duplicates dropped and
 * "auth" expanded in place, as ZooKeeper returns it from getACL. A result
 * equal to OPEN_ACL_UNSAFE is the shared static list. */
int tree_acl_from_request(const struct zk_aclvec *req, const struct tree_auth *auth,
                          uint32_t providers, struct tree_acl **out)
{
    int32_t total;
    int rc = acl_request_check(req, auth, providers, &total);
    if (rc != ZK_OK)
        return rc;

    struct tree_acl *acl = calloc(1, sizeof *acl);
    if (acl == NULL)
        return ZK_ESYSTEMERROR;
    acl->items = calloc((size_t)total, sizeof *acl->items);
    if (acl->items == NULL)
        goto fail_free_acl;
    acl->refs_ = 1;
    for (int32_t i = 0; i < req->count; i++) {
        if (!is_duplicate(req, i) && !acl_append_expanded(acl, &req->items[i], auth, providers))
            goto fail_free_acl;
    }
    if (acl_is_open(acl)) {
        acl_free(acl);
        acl = tree_acl_open();
    }
    *out = acl;
    return ZK_OK;

fail_free_acl:
    acl_free(acl);
    return ZK_ESYSTEMERROR;
}

/* ---- checkACL ------------------------------------------------------------ */

/* ZooKeeper skips every check for a connection holding the ("super", "")
 * identity, which a digest login matching the configured superDigest adds
 * (DigestAuthenticationProvider.handleAuthentication). */
static bool auth_is_super(const struct tree_auth *auth)
{
    if (auth->super)
        return true;
    for (int32_t i = 0; i < auth->count; i++)
        if (auth->ids[i].scheme != NULL && strcmp(auth->ids[i].scheme, "super") == 0)
            return true;
    return false;
}

/* SASLAuthenticationProvider.matches: the same id, or the caller is the
 * SASL user named "super" (a JAAS user_super), who matches every sasl
 * entry. */
static bool sasl_matches(const char *id, const char *acl_id)
{
    return strcmp(id, "super") == 0 || strcmp(id, acl_id) == 0;
}

/* Does one ACL entry's identity match the caller? world:anyone matches all;
 * ip matches the peer address (and any "ip" identity); digest and x509
 * need the same (scheme, id) pair (X509AuthenticationProvider.matches also
 * lets its superUser match any id: that connection is the super user,
 * which passes every check anyway); sasl, when served, sasl_matches.
 * Schemes with no provider match nobody; a connection holds x509 ids only
 * where the provider is. */
static bool acl_entry_matches(const struct tree_acl_entry *e, const struct tree_auth *auth)
{
    if (strcmp(e->scheme, "world") == 0)
        return strcmp(e->id, "anyone") == 0;
    bool is_ip = strcmp(e->scheme, "ip") == 0;
    bool is_sasl = sasl_served(e->scheme, auth);
    if (!is_ip && !is_sasl && strcmp(e->scheme, "digest") != 0 && strcmp(e->scheme, "x509") != 0)
        return false;
    if (is_ip && peer_matches(auth, e->id))
        return true;
    for (int32_t i = 0; i < auth->count; i++) {
        const struct tree_authid *cid = &auth->ids[i];
        if (cid->scheme == NULL || cid->id == NULL || strcmp(cid->scheme, e->scheme) != 0)
            continue;
        if (is_ip ? ip_matches(cid->id, e->id)
                  : is_sasl ? sasl_matches(cid->id, e->id) : strcmp(cid->id, e->id) == 0)
            return true;
    }
    return false;
}

bool tree_acl_permits(const struct tree_acl *acl, int32_t perm, const struct tree_auth *auth)
{
    static const struct tree_auth nobody = { NULL, 0, NULL, false, false, NULL };
    if (acl == NULL || acl->count == 0)
        return true;
    if (acl == &open_acl) /* most nodes: what the loop below finds, without its strcmps */
        return (perm & ZK_PERM_ALL) != 0;
    if (auth == NULL)
        auth = &nobody;
    if (auth_is_super(auth))
        return true;
    for (int32_t i = 0; i < acl->count; i++) {
        const struct tree_acl_entry *e = &acl->items[i];
        if ((e->perms & perm) != 0 && acl_entry_matches(e, auth))
            return true;
    }
    return false;
}

/* ---- encoding -------------------------------------------------------------- */

/* vector<ACL>: count, then per entry perms, Id.scheme, Id.id. A NULL list is
 * the open ACL, as ZooKeeper's ACL cache maps its "no ACL" marker to
 * OPEN_ACL_UNSAFE. */
void tree_acl_put(struct zk_wbuf *w, const struct tree_acl *acl)
{
    if (acl == NULL)
        acl = &open_acl;
    zk_put_i32(w, acl->count);
    for (int32_t i = 0; i < acl->count; i++) {
        zk_put_i32(w, acl->items[i].perms);
        zk_put_str(w, zk_str_c(acl->items[i].scheme));
        zk_put_str(w, zk_str_c(acl->items[i].id));
    }
}
