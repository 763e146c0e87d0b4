/*
 * Unit tests for tree/acl.c and tree/path.c: digest vectors, fixupACL rules,
 * checkACL, jute encoding, reference counting, and path validation.
 *
 * Expected values come from ZooKeeper itself: digests from python3 hashlib +
 * base64 (and DigestAuthenticationProvider.generateDigest for "super:test"),
 * validity tables from running PathUtils.validatePath,
 * DigestAuthenticationProvider.isValid and IPAuthenticationProvider.isValid
 * of zookeeper-3.8.0.jar (IPv6 rules from ZooKeeper 3.9+ parseV6addr), and
 * for x509 ids, X509AuthenticationProvider.isValid's `new X500Principal(id)`
 * on OpenJDK 17.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tree/tree.h"

/* ---- helpers -------------------------------------------------------------- */

static struct zk_str S(const char *s)
{
    return zk_str_c(s);
}

static struct zk_acl A(int32_t perms, const char *scheme, const char *id)
{
    struct zk_acl a = { perms, { S(scheme), S(id) } };
    return a;
}

/* fixupACL on a one-entry list; returns the error code, frees any result. */
static int fixup_one(int32_t perms, const char *scheme, const char *id, const struct tree_auth *auth)
{
    struct zk_acl item = A(perms, scheme, id);
    struct zk_aclvec v = { 1, &item };
    struct tree_acl *out = NULL;
    int rc = tree_acl_from_request(&v, auth, 0, &out);
    if (rc == ZK_OK) {
        assert_non_null(out);
        tree_acl_unref(out);
    }
    return rc;
}

static struct tree_acl *fixup_ok_with(struct zk_acl *items, int32_t n,
                                      const struct tree_auth *auth, uint32_t providers)
{
    struct zk_aclvec v = { n, items };
    struct tree_acl *out = NULL;
    assert_int_equal(tree_acl_from_request(&v, auth, providers, &out), ZK_OK);
    assert_non_null(out);
    return out;
}

static struct tree_acl *fixup_ok(struct zk_acl *items, int32_t n, const struct tree_auth *auth)
{
    return fixup_ok_with(items, n, auth, 0);
}

static void assert_entry(const struct tree_acl *acl, int32_t i, int32_t perms, const char *scheme,
                         const char *id)
{
    assert_true(i < acl->count);
    assert_int_equal(acl->items[i].perms, perms);
    assert_string_equal(acl->items[i].scheme, scheme);
    assert_string_equal(acl->items[i].id, id);
}

/* fixup_one with the x509 provider registered. */
static int fixup_x509(const char *id, const struct tree_auth *auth)
{
    struct zk_acl item = A(ZK_PERM_ALL, "x509", id);
    struct zk_aclvec v = { 1, &item };
    struct tree_acl *out = NULL;
    int rc = tree_acl_from_request(&v, auth, TREE_ACL_X509, &out);
    if (rc == ZK_OK)
        tree_acl_unref(out);
    return rc;
}

/* ---- digest ---------------------------------------------------------------- */

static void test_digest_vectors(void **state)
{
    static const struct {
        const char *in;
        size_t len;
        const char *out;
    } v[] = {
        { "super:test", 10, "D/InIHSb7yEEbrWz8b9l71RjZJU=" },
        { "", 0, "2jmj7l5rSw0yVb/vlWAYkK/YBwk=" },
        { "a", 1, "hvfkN/qlp/zhXR3cuerq6jd2Z7g=" },
        { "user:password", 13, "tpUq/4Pn5A64fVZyQ0gOJ8ZWqkY=" },
        { "bob:secret", 10, "fyVmFCwVbTJYrznoSu1koqYEYF0=" },
        { "\xc3\xbc:p\xc3\xa4", 6, "YaU0sS5YxKHLhFsvFFTao+h/xQ8=" },
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        char out[29];
        memset(out, 'X', sizeof out);
        zk_digest_of(v[i].in, v[i].len, out);
        assert_string_equal(out, v[i].out);
    }
}

/* Lengths around the SHA-1 padding boundaries (55, 56, 64, 119 bytes) and a
 * multi-block input. */
static void test_digest_block_boundaries(void **state)
{
    static const struct {
        size_t len;
        const char *out;
    } v[] = {
        { 55, "zvc0uoGgJEeeCetadbbdrmLmq/E=" },  { 56, "kBMFNnwlmVL056+DI/SA1Z+BM1s=" },
        { 64, "uy+j7nr7n1TG37XQIfFLH/5AwWM=" },  { 119, "QwAyA5T37iObzc59O4vO4XOgzVw=" },
        { 1000, "w++mkPo/3S4lJoU+7WcFOOoSdjg=" },
    };
    char buf[1000];
    memset(buf, 'x', sizeof buf);
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        char out[29];
        zk_digest_of(buf, v[i].len, out);
        assert_string_equal(out, v[i].out);
    }
}

/* ---- fixupACL -------------------------------------------------------------- */

static void test_fixup_empty_or_null_is_invalid(void **state)
{
    struct tree_acl *out = NULL;
    struct zk_aclvec empty = { 0, NULL };
    struct zk_aclvec null_vec = { -1, NULL };
    assert_int_equal(tree_acl_from_request(NULL, NULL, 0, &out), ZK_EINVALIDACL);
    assert_int_equal(tree_acl_from_request(&empty, NULL, 0, &out), ZK_EINVALIDACL);
    assert_int_equal(tree_acl_from_request(&null_vec, NULL, 0, &out), ZK_EINVALIDACL);
    assert_null(out);
}

static void test_fixup_open_acl_is_shared(void **state)
{
    struct zk_acl item = A(ZK_PERM_ALL, "world", "anyone");
    struct tree_acl *acl = fixup_ok(&item, 1, NULL);
    assert_ptr_equal(acl, tree_acl_open());
    assert_int_equal(acl->count, 1);
    assert_entry(acl, 0, ZK_PERM_ALL, "world", "anyone");
    tree_acl_unref(acl);

    /* world:anyone with fewer perms is a list of its own. */
    item.perms = ZK_PERM_READ;
    acl = fixup_ok(&item, 1, NULL);
    assert_ptr_not_equal(acl, tree_acl_open());
    assert_entry(acl, 0, ZK_PERM_READ, "world", "anyone");
    tree_acl_unref(acl);
}

static void test_fixup_world_needs_anyone(void **state)
{
    assert_int_equal(fixup_one(ZK_PERM_ALL, "world", "anyone", NULL), ZK_OK);
    assert_int_equal(fixup_one(ZK_PERM_ALL, "world", "everyone", NULL), ZK_EINVALIDACL);
    assert_int_equal(fixup_one(ZK_PERM_ALL, "world", "", NULL), ZK_EINVALIDACL);
    /* ZooKeeper's fixupACL calls id.equals("anyone") on a null id: NPE */
    assert_int_equal(fixup_one(ZK_PERM_ALL, "world", NULL, NULL), ZK_EMARSHALLINGERROR);
    assert_int_equal(fixup_one(ZK_PERM_ALL, "World", "anyone", NULL), ZK_EINVALIDACL);
}

static void test_fixup_unknown_or_null_scheme_is_invalid(void **state)
{
    static const char *const schemes[] = { "sasl", "x509", "super", "", "key", "DIGEST", "IP" };
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++)
        assert_int_equal(fixup_one(ZK_PERM_ALL, schemes[i], "a:b", NULL), ZK_EINVALIDACL);
    assert_int_equal(fixup_one(ZK_PERM_ALL, NULL, "anyone", NULL), ZK_EINVALIDACL);
}

static void test_fixup_digest_ids(void **state)
{
    /* DigestAuthenticationProvider.isValid: id.split(":").length == 2 */
    static const struct {
        const char *id;
        int rc;
    } v[] = {
        { "u:h", ZK_OK },           { ":h", ZK_OK },
        { "u:h:", ZK_OK },          { "u:h::", ZK_OK },
        { "u:", ZK_EINVALIDACL },   { "u", ZK_EINVALIDACL },
        { "a:b:c", ZK_EINVALIDACL }, { "::h", ZK_EINVALIDACL },
        { ":", ZK_EINVALIDACL },    { "::", ZK_EINVALIDACL },
        { "", ZK_EINVALIDACL },     { "u::h", ZK_EINVALIDACL },
        { "super:D/InIHSb7yEEbrWz8b9l71RjZJU=", ZK_OK },
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        int rc = fixup_one(ZK_PERM_READ, "digest", v[i].id, NULL);
        if (rc != v[i].rc)
            fail_msg("digest id '%s': got %d want %d", v[i].id, rc, v[i].rc);
    }
    /* isValid(null) throws in ZooKeeper: MARSHALLINGERROR, as it answers */
    assert_int_equal(fixup_one(ZK_PERM_READ, "digest", NULL, NULL), ZK_EMARSHALLINGERROR);
}

static void test_fixup_ip_ids(void **state)
{
    static const struct {
        const char *id;
        int rc;
    } v[] = {
        /* IPv4, as zookeeper-3.8.0.jar's IPAuthenticationProvider.isValid */
        { "1.2.3.4", ZK_OK },
        { "1.2.3.4/0", ZK_OK },
        { "1.2.3.4/32", ZK_OK },
        { "+1.2.3.4", ZK_OK },
        { "-0.0.0.0", ZK_OK },
        { "010.0.0.1", ZK_OK },
        { "1.2.3.4/+8", ZK_OK },
        { "1.2.3.4/08", ZK_OK },
        { "1.2.3.4/33", ZK_EINVALIDACL },
        { "1.2.3.4/-1", ZK_EINVALIDACL },
        { "1.2.3.4/", ZK_EINVALIDACL },
        { "1.2.3", ZK_EINVALIDACL },
        { "1.2.3.4.5", ZK_EINVALIDACL },
        { "256.1.1.1", ZK_EINVALIDACL },
        { "1.2.3.4/8/9", ZK_EINVALIDACL },
        { "a.b.c.d", ZK_EINVALIDACL },
        { "1..3.4", ZK_EINVALIDACL },
        { "", ZK_EINVALIDACL },
        { " 1.2.3.4", ZK_EINVALIDACL },
        { "localhost", ZK_EINVALIDACL },
        /* IPv6, as ZooKeeper 3.9+ parseV6addr */
        { "::1", ZK_OK },
        { "::", ZK_OK },
        { "1:2:3:4:5:6:7:8", ZK_OK },
        { "2001:db8::/32", ZK_OK },
        { "fe80::1/64", ZK_OK },
        { "FE80::ABCD", ZK_OK },
        { "1:2:3:4:5:6:7::", ZK_OK },
        { "::2:3:4:5:6:7:8", ZK_OK },
        { "::1/128", ZK_OK },
        { "::1/129", ZK_EINVALIDACL },
        { "1:2:3:4:5:6:7", ZK_EINVALIDACL },
        { "1:2:3:4:5:6:7:8:9", ZK_EINVALIDACL },
        { "1:2:3:4:5:6:7:8::", ZK_EINVALIDACL },
        { "1::2::3", ZK_EINVALIDACL },
        { ":::", ZK_EINVALIDACL },
        { "12345::", ZK_EINVALIDACL },
        { "g::1", ZK_EINVALIDACL },
        { ":1:2:3:4:5:6:7", ZK_EINVALIDACL },
        { "::ffff:1.2.3.4", ZK_EINVALIDACL },
        { "fe80::1%eth0", ZK_EINVALIDACL },
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        int rc = fixup_one(ZK_PERM_READ, "ip", v[i].id, NULL);
        if (rc != v[i].rc)
            fail_msg("ip id '%s': got %d want %d", v[i].id, rc, v[i].rc);
    }
}

static void test_fixup_auth_expands_digest_ids(void **state)
{
    static const struct tree_authid ids[] = {
        { "ip", "127.0.0.1" },
        { "digest", "bob:fyVmFCwVbTJYrznoSu1koqYEYF0=" },
        { "super", "" },
        { "digest", "alice:hvfkN/qlp/zhXR3cuerq6jd2Z7g=" },
    };
    struct tree_auth auth = { .ids = ids, .count = 4, .peer_ip = "127.0.0.1", .super = false,
                              .sasl_provider = false };
    struct zk_acl items[] = {
        A(ZK_PERM_READ, "world", "anyone"),
        A(ZK_PERM_READ | ZK_PERM_WRITE, "auth", "ignored"),
        A(ZK_PERM_ADMIN, "ip", "10.0.0.0/8"),
    };
    struct tree_acl *acl = fixup_ok(items, 3, &auth);
    assert_int_equal(acl->count, 4);
    assert_entry(acl, 0, ZK_PERM_READ, "world", "anyone");
    assert_entry(acl, 1, ZK_PERM_READ | ZK_PERM_WRITE, "digest", "bob:fyVmFCwVbTJYrznoSu1koqYEYF0=");
    assert_entry(acl, 2, ZK_PERM_READ | ZK_PERM_WRITE, "digest",
                 "alice:hvfkN/qlp/zhXR3cuerq6jd2Z7g=");
    assert_entry(acl, 3, ZK_PERM_ADMIN, "ip", "10.0.0.0/8");
    tree_acl_unref(acl);
}

static void test_fixup_auth_without_digest_is_invalid(void **state)
{
    static const struct tree_authid ids[] = { { "ip", "127.0.0.1" }, { "super", "" } };
    struct tree_auth auth = { .ids = ids, .count = 2, .peer_ip = "127.0.0.1", .super = true,
                              .sasl_provider = false };
    struct tree_auth none = { .ids = NULL, .count = 0, .peer_ip = "127.0.0.1", .super = false,
                              .sasl_provider = false };
    assert_int_equal(fixup_one(ZK_PERM_ALL, "auth", "", &auth), ZK_EINVALIDACL);
    assert_int_equal(fixup_one(ZK_PERM_ALL, "auth", "", &none), ZK_EINVALIDACL);
    assert_int_equal(fixup_one(ZK_PERM_ALL, "auth", "", NULL), ZK_EINVALIDACL);
}

/* "sasl" needs ZooKeeper's SASLAuthenticationProvider (authProvider.N):
 * without it the scheme has no provider and is InvalidACL; with it an id
 * is valid when Kerberos's KerberosName takes it. */
static void test_fixup_sasl_ids(void **state)
{
    const struct tree_auth served = { .sasl_provider = true };
    const struct tree_auth unserved = { .sasl_provider = false };
    assert_int_equal(fixup_one(ZK_PERM_ALL, "sasl", "bob", &unserved), ZK_EINVALIDACL);
    assert_int_equal(fixup_one(ZK_PERM_ALL, "sasl", "bob", NULL), ZK_EINVALIDACL);
    static const char *const valid[] = { "bob", "a/b", "svc/host.example.com@EXAMPLE.COM",
                                         "bob@EXAMPLE.COM", "@", "/@", "", "b:o b" };
    for (size_t i = 0; i < sizeof valid / sizeof valid[0]; i++)
        if (fixup_one(ZK_PERM_READ, "sasl", valid[i], &served) != ZK_OK)
            fail_msg("sasl:'%s' refused", valid[i]);
    static const char *const invalid[] = { "a@b@c", "a/b/c@R", "bob@R/x", "a@R@" };
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++)
        if (fixup_one(ZK_PERM_READ, "sasl", invalid[i], &served) != ZK_EINVALIDACL)
            fail_msg("sasl:'%s' accepted", invalid[i]);
    assert_int_equal(fixup_one(ZK_PERM_ALL, "sasl", NULL, &served), ZK_EMARSHALLINGERROR);
}

/* "auth" stands for every identity whose provider isAuthenticated():
 * sasl's is, when the provider is there. */
static void test_fixup_auth_expands_sasl_ids(void **state)
{
    static const struct tree_authid ids[] = {
        { "sasl", "bob" },
        { "digest", "alice:hvfkN/qlp/zhXR3cuerq6jd2Z7g=" },
    };
    struct tree_auth served = { .ids = ids, .count = 2, .peer_ip = "127.0.0.1", .super = false,
                              .sasl_provider = true };
    struct tree_auth unserved = { .ids = ids, .count = 2, .peer_ip = "127.0.0.1", .super = false,
                              .sasl_provider = false };
    struct tree_auth sasl_only = { .ids = ids, .count = 1, .peer_ip = "127.0.0.1", .super = false,
                              .sasl_provider = false };
    struct zk_acl item = A(ZK_PERM_READ, "auth", "");
    struct tree_acl *acl = fixup_ok(&item, 1, &served);
    assert_int_equal(acl->count, 2);
    assert_entry(acl, 0, ZK_PERM_READ, "sasl", "bob");
    assert_entry(acl, 1, ZK_PERM_READ, "digest", "alice:hvfkN/qlp/zhXR3cuerq6jd2Z7g=");
    tree_acl_unref(acl);
    acl = fixup_ok(&item, 1, &unserved);
    assert_int_equal(acl->count, 1);
    assert_entry(acl, 0, ZK_PERM_READ, "digest", "alice:hvfkN/qlp/zhXR3cuerq6jd2Z7g=");
    tree_acl_unref(acl);
    assert_int_equal(fixup_one(ZK_PERM_READ, "auth", "", &sasl_only), ZK_EINVALIDACL);
}

/* removeDuplicates runs before validation and compares whole entries. */
static void test_fixup_removes_duplicates(void **state)
{
    struct zk_acl items[] = {
        A(ZK_PERM_READ, "world", "anyone"), A(ZK_PERM_ALL, "digest", "u:h"),
        A(ZK_PERM_READ, "world", "anyone"), A(ZK_PERM_WRITE, "digest", "u:h"),
        A(ZK_PERM_ALL, "digest", "u:h"),
    };
    struct tree_acl *acl = fixup_ok(items, 5, NULL);
    assert_int_equal(acl->count, 3);
    assert_entry(acl, 0, ZK_PERM_READ, "world", "anyone");
    assert_entry(acl, 1, ZK_PERM_ALL, "digest", "u:h");
    assert_entry(acl, 2, ZK_PERM_WRITE, "digest", "u:h");
    tree_acl_unref(acl);

    /* Repeated world:anyone ALL collapses to the shared open list. */
    struct zk_acl open2[] = { A(ZK_PERM_ALL, "world", "anyone"), A(ZK_PERM_ALL, "world", "anyone") };
    acl = fixup_ok(open2, 2, NULL);
    assert_ptr_equal(acl, tree_acl_open());
}

/* One bad entry anywhere rejects the whole list. */
static void test_fixup_one_bad_entry_rejects_all(void **state)
{
    struct zk_acl items[] = { A(ZK_PERM_ALL, "world", "anyone"), A(ZK_PERM_ALL, "digest", "nocolon") };
    struct zk_aclvec v = { 2, items };
    struct tree_acl *out = NULL;
    assert_int_equal(tree_acl_from_request(&v, NULL, 0, &out), ZK_EINVALIDACL);
    assert_null(out);
}

/* ZooKeeper does not range-check perms: whatever int the client sends is kept. */
static void test_fixup_keeps_perms_as_sent(void **state)
{
    struct zk_acl items[] = { A(0, "digest", "u:h"), A(0x7fffffff, "ip", "1.2.3.4") };
    struct tree_acl *acl = fixup_ok(items, 2, NULL);
    assert_entry(acl, 0, 0, "digest", "u:h");
    assert_entry(acl, 1, 0x7fffffff, "ip", "1.2.3.4");
    tree_acl_unref(acl);
}

static void test_fixup_rejects_nul_bytes_and_oversize(void **state)
{
    struct zk_acl item = { ZK_PERM_ALL, { S("digest"), { "u:h\0x", 5 } } };
    struct zk_aclvec v = { 1, &item };
    struct tree_acl *out = NULL;
    assert_int_equal(tree_acl_from_request(&v, NULL, 0, &out), ZK_EINVALIDACL);

    struct zk_acl *many = calloc(TREE_ACL_MAX + 1, sizeof *many);
    assert_non_null(many);
    for (int i = 0; i < TREE_ACL_MAX + 1; i++)
        many[i] = A(ZK_PERM_ALL, "world", "anyone");
    struct zk_aclvec big = { TREE_ACL_MAX + 1, many };
    assert_int_equal(tree_acl_from_request(&big, NULL, 0, &out), ZK_EINVALIDACL);
    /* At the limit it is fine (and collapses to one entry). */
    big.count = TREE_ACL_MAX;
    assert_int_equal(tree_acl_from_request(&big, NULL, 0, &out), ZK_OK);
    assert_ptr_equal(out, tree_acl_open());
    free(many);
}

/* Null and empty scheme/id strings, each row measured against Debian's
 * ZooKeeper 3.8 (create with this ACL list): MARSHALLINGERROR where its
 * removeDuplicates (new.equals(kept): perms, then scheme.equals, then
 * id.equals) or fixupACL (world's id.equals("anyone"), digest/ip isValid)
 * dereferences a null; "auth" ignores the id, null included (kazoo's
 * CREATOR_ALL_ACL sends Id("auth", null)). */
static void test_fixup_null_strings(void **state)
{
    static const struct tree_authid ids[] = { { "digest", "u:h" } };
    const struct tree_auth digest_user = { .ids = ids, .count = 1 };
    static const struct tree_authid ip_ids[] = { { "ip", "127.0.0.1" } };
    const struct tree_auth ip_user = { .ids = ip_ids, .count = 1 };
    static const struct {
        struct zk_acl items[2];
        int32_t n;
        bool authed;
        int rc;
    } v[] = {
        { { { 31, { { "world", 5 }, { NULL, -1 } } } }, 1, false, ZK_EMARSHALLINGERROR },
        { { { 31, { { "world", 5 }, { "", 0 } } } }, 1, false, ZK_EINVALIDACL },
        { { { 31, { { "digest", 6 }, { NULL, -1 } } } }, 1, true, ZK_EMARSHALLINGERROR },
        { { { 31, { { "ip", 2 }, { NULL, -1 } } } }, 1, false, ZK_EMARSHALLINGERROR },
        { { { 31, { { "ip", 2 }, { "", 0 } } } }, 1, false, ZK_EINVALIDACL },
        { { { 31, { { "super", 5 }, { NULL, -1 } } } }, 1, false, ZK_EINVALIDACL },
        { { { 31, { { "sasl", 4 }, { NULL, -1 } } } }, 1, false, ZK_EINVALIDACL },
        { { { 31, { { NULL, -1 }, { "anyone", 6 } } } }, 1, false, ZK_EINVALIDACL },
        { { { 31, { { "", 0 }, { "anyone", 6 } } } }, 1, false, ZK_EINVALIDACL },
        { { { 31, { { "auth", 4 }, { NULL, -1 } } } }, 1, false, ZK_EINVALIDACL },
        { { { 31, { { "auth", 4 }, { NULL, -1 } } } }, 1, true, ZK_OK },
        { { { 31, { { "auth", 4 }, { "", 0 } } } }, 1, true, ZK_OK },
        /* removeDuplicates: the later entry's null is dereferenced when an
         * earlier one has the same perms (and, for the id, the same scheme) */
        { { { 31, { { "world", 5 }, { NULL, -1 } } }, { 31, { { "world", 5 }, { NULL, -1 } } } },
          2, false, ZK_EMARSHALLINGERROR },
        { { { 31, { { "world", 5 }, { "anyone", 6 } } }, { 31, { { NULL, -1 }, { "x", 1 } } } },
          2, false, ZK_EMARSHALLINGERROR },
        { { { 31, { { "world", 5 }, { "anyone", 6 } } }, { 1, { { NULL, -1 }, { "x", 1 } } } },
          2, false, ZK_EINVALIDACL },
        { { { 31, { { "world", 5 }, { "anyone", 6 } } }, { 1, { { "world", 5 }, { NULL, -1 } } } },
          2, false, ZK_EMARSHALLINGERROR },
        { { { 31, { { "foo", 3 }, { "x", 1 } } }, { 1, { { "world", 5 }, { NULL, -1 } } } },
          2, false, ZK_EINVALIDACL },
        { { { 1, { { "world", 5 }, { NULL, -1 } } }, { 31, { { "foo", 3 }, { "x", 1 } } } },
          2, false, ZK_EMARSHALLINGERROR },
        { { { 31, { { "auth", 4 }, { NULL, -1 } } }, { 31, { { "auth", 4 }, { NULL, -1 } } } },
          2, true, ZK_EMARSHALLINGERROR },
        { { { 31, { { "auth", 4 }, { "", 0 } } }, { 31, { { "auth", 4 }, { NULL, -1 } } } },
          2, true, ZK_EMARSHALLINGERROR },
        { { { 31, { { "auth", 4 }, { NULL, -1 } } }, { 31, { { "auth", 4 }, { "", 0 } } } },
          2, true, ZK_OK },
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        struct zk_aclvec vec = { v[i].n, (struct zk_acl *)v[i].items };
        struct tree_acl *out = NULL;
        int rc = tree_acl_from_request(&vec, v[i].authed ? &digest_user : NULL, 0, &out);
        if (rc != v[i].rc)
            fail_msg("row %zu: got %d want %d", i, rc, v[i].rc);
        if (rc == ZK_OK)
            tree_acl_unref(out);
    }
    /* ("auth", null) with only an ip identity: nothing to expand to */
    assert_int_equal(fixup_one(ZK_PERM_ALL, "auth", NULL, &ip_user), ZK_EINVALIDACL);
    /* kazoo's CREATOR_ALL_ACL expands to the caller's digest ids; an id
     * with a NUL byte does not matter for "auth" either */
    struct zk_acl creator = { ZK_PERM_ALL, { S("auth"), ZK_STR_NULL } };
    struct tree_acl *acl = fixup_ok(&creator, 1, &digest_user);
    assert_int_equal(acl->count, 1);
    assert_entry(acl, 0, ZK_PERM_ALL, "digest", "u:h");
    tree_acl_unref(acl);
    creator.id.id = (struct zk_str){ "a\0b", 3 };
    acl = fixup_ok(&creator, 1, &digest_user);
    assert_entry(acl, 0, ZK_PERM_ALL, "digest", "u:h");
    tree_acl_unref(acl);
}

/* x509 ids are valid where X500Principal parses them, and only with the
 * provider registered (ZooKeeper's ProviderRegistry). */
static void test_fixup_x509_ids(void **state)
{
    static const struct {
        const char *id;
        bool valid;
    } rows[] = {
        { "", true },
        { "CN=a", true },
        { "cn=a", true },
        { "CN = a ", true },
        { "CN=", true },
        { "CN=a,O=b", true },
        { "CN=a;O=b", true },
        { "CN=a+UID=b", true },
        { "CN=a,,O=b", false },
        { ",CN=a", false },
        { "CN=a,", false },
        { "FOO=a", false },
        { "OID.2.5.4.3=a", true },
        { "2.5.4.3=a", true },
        { "2.5.4.3.=a", false },
        { "2=a", false },
        { "CN=#0c0161", true },
        { "CN=#0c01", false },
        { "CN=#zz", false },
        { "CN=#", false },
        { "CN=\"quoted, yes\"", true },
        { "CN=\"unterminated", false },
        { "CN=a\"b", false },
        { "CN=a=b", true },
        { "CN=a\\=b", true },
        { "CN=a\\zz", false },
        { "CN=a\\4", false },
        { "CN=a\\41", true },
        { "CN=a<b", false },
        { "CN=a>b", false },
        { "CN=a#b", true },
        { "CN=a\\", false },
        { "emailaddress=x@y", true },
        { "T=x", true },
        { "IP=198.18.2.3", true },
        { "SURNAME=x", true },
        { "DNQ=x", true },
        { "CN=a\\ ", true },
        { "CN=\\ a", true },
        { "CN=a b", true },
        { "a", false },
        { "=a", false },
        { "CN=a+", false },
        { "CN=a++O=b", false },
        { "CN=\"a\"b", false },
        { "CN=\"a\" ", true },
        { "S=x", true },
        { "1.2=x", true },
        { "0.5=x", true },
        { "3.5=x", false },
        { "OID.1=x", false },
        { "CN=a\\00b", true },
        { "CN=a\\b", false },
        { "CN=a\\*", false },
        { "CN=#0c81", false },
        { "CN=#0C0161", true },
        { "CN=#0c0161 ", false },
        { "CN= #0c0161", true },
        { "CN=#0c016161", false },
        { "CN=\"a\\\"b\"", true },
        { "CN=\"a\"+O=b", true },
        { "CN=\"a\";O=b", true },
        { "CN= \"a\"", true },
        { " CN=a", true },
        { "CN=a , O=b", true },
        { "CN=a;;O=b", false },
        { "oid.2.5.4.3=x", true },
        { "2.5.4.3 =x", true },
        { "2.99999999999999999999=x", true },
        { "1.40=x", false },
        { "0.39=x", true },
        { "2.40=x", true },
        { "CN=a\\0D", true },
        { "CN=a\\0g", false },
        { "C N=x", false },
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        int rc = fixup_x509(rows[i].id, NULL);
        if ((rc == ZK_OK) != rows[i].valid)
            fprintf(stderr, "x509 id '%s': got %d\n", rows[i].id, rc);
        assert_int_equal(rc, rows[i].valid ? ZK_OK : ZK_EINVALIDACL);
    }
    assert_int_equal(fixup_one(ZK_PERM_ALL, "x509", "CN=a", NULL), ZK_EINVALIDACL);
    struct zk_acl null_id = { ZK_PERM_ALL, { S("x509"), { NULL, -1 } } };
    struct zk_aclvec v = { 1, &null_id };
    struct tree_acl *out = NULL;
    assert_int_equal(tree_acl_from_request(&v, NULL, TREE_ACL_X509, &out), ZK_EMARSHALLINGERROR);
}

/* "auth" stands for every digest and x509 id of the caller (both providers
 * say isAuthenticated); super and ip ids are not authenticated schemes. */
static void test_fixup_auth_expands_x509_ids(void **state)
{
    struct tree_authid ids[] = { { "super", "CN=admin" }, { "x509", "CN=admin,O=Larch" },
                                 { "digest", "bob:hash" } };
    struct tree_auth auth = { .ids = ids, .count = 3, .peer_ip = "127.0.0.1", .super = false,
                              .sasl_provider = false };
    struct zk_acl item = A(ZK_PERM_READ, "auth", "");
    struct zk_aclvec v = { 1, &item };
    struct tree_acl *out = NULL;
    assert_int_equal(tree_acl_from_request(&v, &auth, TREE_ACL_X509, &out), ZK_OK);
    assert_int_equal(out->count, 2);
    assert_entry(out, 0, ZK_PERM_READ, "x509", "CN=admin,O=Larch");
    assert_entry(out, 1, ZK_PERM_READ, "digest", "bob:hash");
    tree_acl_unref(out);
    /* without the provider, x509 ids stand for nothing */
    out = fixup_ok(&item, 1, &auth);
    assert_int_equal(out->count, 1);
    assert_entry(out, 0, ZK_PERM_READ, "digest", "bob:hash");
    tree_acl_unref(out);
}

/* An x509 entry matches the same subject text exactly, nothing else; a
 * ("super", DN) identity, which the x509 super user holds, passes all. */
static void test_permits_x509(void **state)
{
    struct zk_acl item = A(ZK_PERM_READ, "x509", "CN=client one,OU=Test,O=Larch,C=US");
    struct tree_acl *acl = fixup_ok_with(&item, 1, NULL, TREE_ACL_X509);
    struct tree_authid same[] = { { "x509", "CN=client one,OU=Test,O=Larch,C=US" } };
    struct tree_authid other[] = { { "x509", "CN=client one,OU=Test,O=Larch" } };
    struct tree_authid as_digest[] = { { "digest", "CN=client one,OU=Test,O=Larch,C=US" } };
    struct tree_authid super[] = { { "super", "CN=admin" } };
    struct tree_auth a = { .ids = same, .count = 1, .peer_ip = "127.0.0.1", .super = false,
                              .sasl_provider = false };
    assert_true(tree_acl_permits(acl, ZK_PERM_READ, &a));
    assert_false(tree_acl_permits(acl, ZK_PERM_WRITE, &a));
    a.ids = other;
    assert_false(tree_acl_permits(acl, ZK_PERM_READ, &a));
    a.ids = as_digest;
    assert_false(tree_acl_permits(acl, ZK_PERM_READ, &a));
    a.ids = super;
    assert_true(tree_acl_permits(acl, ZK_PERM_WRITE, &a));
    tree_acl_unref(acl);
}

/* ---- checkACL -------------------------------------------------------------- */

static void test_permits_null_and_empty(void **state)
{
    struct tree_acl empty = { 0, NULL, 1 };
    assert_true(tree_acl_permits(NULL, ZK_PERM_ADMIN, NULL));
    assert_true(tree_acl_permits(&empty, ZK_PERM_ADMIN, NULL));
}

static void test_permits_world(void **state)
{
    struct zk_acl item = A(ZK_PERM_READ | ZK_PERM_CREATE, "world", "anyone");
    struct tree_acl *acl = fixup_ok(&item, 1, NULL);
    struct tree_auth anon = { .ids = NULL, .count = 0, .peer_ip = "198.18.0.1", .super = false,
                              .sasl_provider = false };
    assert_true(tree_acl_permits(acl, ZK_PERM_READ, &anon));
    assert_true(tree_acl_permits(acl, ZK_PERM_CREATE, NULL));
    assert_false(tree_acl_permits(acl, ZK_PERM_WRITE, &anon));
    assert_false(tree_acl_permits(acl, ZK_PERM_DELETE, NULL));
    assert_false(tree_acl_permits(acl, ZK_PERM_ADMIN, &anon));
    tree_acl_unref(acl);
    assert_true(tree_acl_permits(tree_acl_open(), ZK_PERM_ADMIN, NULL));
}

static void test_permits_digest(void **state)
{
    const char *bob = "bob:fyVmFCwVbTJYrznoSu1koqYEYF0=";
    struct zk_acl item = A(ZK_PERM_READ | ZK_PERM_WRITE, "digest", bob);
    struct tree_acl *acl = fixup_ok(&item, 1, NULL);

    struct tree_authid good[] = { { "ip", "127.0.0.1" }, { "digest", bob } };
    struct tree_authid wrong_hash[] = { { "digest", "bob:hvfkN/qlp/zhXR3cuerq6jd2Z7g=" } };
    struct tree_authid wrong_scheme[] = { { "ip", bob }, { "auth", bob } };
    struct tree_auth a_good = { .ids = good, .count = 2, .peer_ip = "127.0.0.1", .super = false,
                              .sasl_provider = false };
    struct tree_auth a_wrong_hash = { .ids = wrong_hash, .count = 1, .peer_ip = "127.0.0.1", .super = false,
                              .sasl_provider = false };
    struct tree_auth a_wrong_scheme = { .ids = wrong_scheme, .count = 2, .peer_ip = "127.0.0.1", .super = false,
                              .sasl_provider = false };

    assert_true(tree_acl_permits(acl, ZK_PERM_READ, &a_good));
    assert_true(tree_acl_permits(acl, ZK_PERM_WRITE, &a_good));
    assert_false(tree_acl_permits(acl, ZK_PERM_DELETE, &a_good));
    assert_false(tree_acl_permits(acl, ZK_PERM_READ, &a_wrong_hash));
    assert_false(tree_acl_permits(acl, ZK_PERM_READ, &a_wrong_scheme));
    assert_false(tree_acl_permits(acl, ZK_PERM_READ, NULL));
    tree_acl_unref(acl);
}

static void test_permits_super(void **state)
{
    struct zk_acl item = A(ZK_PERM_READ, "digest", "u:h");
    struct tree_acl *acl = fixup_ok(&item, 1, NULL);
    struct tree_auth flag = { .ids = NULL, .count = 0, .peer_ip = NULL, .super = true,
                              .sasl_provider = false };
    struct tree_authid ids[] = { { "digest", "super:D/InIHSb7yEEbrWz8b9l71RjZJU=" }, { "super", "" } };
    struct tree_auth by_id = { .ids = ids, .count = 2, .peer_ip = NULL, .super = false,
                              .sasl_provider = false };
    struct tree_auth digest_only = { .ids = ids, .count = 1, .peer_ip = NULL, .super = false,
                              .sasl_provider = false };
    assert_true(tree_acl_permits(acl, ZK_PERM_ADMIN, &flag));
    assert_true(tree_acl_permits(acl, ZK_PERM_DELETE, &by_id));
    assert_false(tree_acl_permits(acl, ZK_PERM_READ, &digest_only));
    tree_acl_unref(acl);
}

/* SASLAuthenticationProvider.matches: the same id, or the SASL user
 * "super"; nothing at all without the provider; never another scheme's id. */
static void test_permits_sasl(void **state)
{
    struct zk_acl item = A(ZK_PERM_READ | ZK_PERM_WRITE, "sasl", "bob");
    const struct tree_auth served = { .sasl_provider = true };
    struct tree_acl *acl = fixup_ok(&item, 1, &served);
    static const struct tree_authid bob[] = { { "ip", "127.0.0.1" }, { "sasl", "bob" } };
    static const struct tree_authid alice[] = { { "sasl", "alice" }, { "sasl", "Bob" } };
    static const struct tree_authid sasl_super[] = { { "sasl", "super" } };
    static const struct tree_authid other_scheme[] = { { "digest", "bob" }, { "ip", "bob" } };
    struct tree_auth a_bob = { .ids = bob, .count = 2, .peer_ip = "127.0.0.1", .super = false,
                              .sasl_provider = true };
    struct tree_auth a_alice = { .ids = alice, .count = 2, .peer_ip = "127.0.0.1", .super = false,
                              .sasl_provider = true };
    struct tree_auth a_super = { .ids = sasl_super, .count = 1, .peer_ip = "127.0.0.1", .super = false,
                              .sasl_provider = true };
    struct tree_auth a_other = { .ids = other_scheme, .count = 2, .peer_ip = "127.0.0.1", .super = false,
                              .sasl_provider = true };
    struct tree_auth a_bob_unserved = { .ids = bob, .count = 2, .peer_ip = "127.0.0.1", .super = false,
                              .sasl_provider = false };
    struct tree_auth a_flag_super = { .ids = NULL, .count = 0, .peer_ip = NULL, .super = true,
                              .sasl_provider = false };
    assert_true(tree_acl_permits(acl, ZK_PERM_READ, &a_bob));
    assert_true(tree_acl_permits(acl, ZK_PERM_WRITE, &a_bob));
    assert_false(tree_acl_permits(acl, ZK_PERM_DELETE, &a_bob));
    assert_false(tree_acl_permits(acl, ZK_PERM_READ, &a_alice));
    assert_true(tree_acl_permits(acl, ZK_PERM_READ, &a_super));
    assert_false(tree_acl_permits(acl, ZK_PERM_DELETE, &a_super));
    assert_false(tree_acl_permits(acl, ZK_PERM_READ, &a_other));
    assert_false(tree_acl_permits(acl, ZK_PERM_READ, &a_bob_unserved));
    assert_true(tree_acl_permits(acl, ZK_PERM_DELETE, &a_flag_super));
    assert_false(tree_acl_permits(acl, ZK_PERM_READ, NULL));
    tree_acl_unref(acl);
}

static bool ip_permits(const char *acl_id, const char *peer)
{
    struct zk_acl item = A(ZK_PERM_READ, "ip", acl_id);
    struct tree_acl *acl = fixup_ok(&item, 1, NULL);
    struct tree_auth auth = { .ids = NULL, .count = 0, .peer_ip = peer, .super = false,
                              .sasl_provider = false };
    bool ok = tree_acl_permits(acl, ZK_PERM_READ, &auth);
    tree_acl_unref(acl);
    return ok;
}

static void test_permits_ip(void **state)
{
    assert_true(ip_permits("127.0.0.1", "127.0.0.1"));
    assert_false(ip_permits("127.0.0.1", "127.0.0.2"));
    assert_true(ip_permits("10.0.0.0/8", "10.1.2.3"));
    assert_false(ip_permits("10.0.0.0/8", "11.1.2.3"));
    assert_true(ip_permits("10.1.2.0/23", "10.1.2.3"));
    assert_true(ip_permits("10.1.2.0/23", "10.1.3.3"));
    assert_false(ip_permits("10.1.2.0/23", "10.1.4.3"));
    assert_true(ip_permits("10.1.2.99/24", "10.1.2.3")); /* host bits of the ACL are masked */
    assert_true(ip_permits("0.0.0.0/0", "203.0.113.7"));
    assert_false(ip_permits("0.0.0.0/0", "::1")); /* families never mix */
    assert_false(ip_permits("127.0.0.1", NULL));
    assert_false(ip_permits("127.0.0.1", "garbage"));

    assert_true(ip_permits("::1", "::1"));
    assert_true(ip_permits("::1", "0:0:0:0:0:0:0:1"));
    assert_false(ip_permits("::1", "127.0.0.1"));
    assert_true(ip_permits("2001:db8::/32", "2001:db8:1::5"));
    assert_false(ip_permits("2001:db8::/32", "2001:db9::1"));
    assert_true(ip_permits("fe80::/10", "febf::1"));
    assert_false(ip_permits("fe80::/10", "fec0::1"));
    assert_true(ip_permits("::/0", "2001:db8::1"));
}

/* The ip scheme also matches "ip" identities the caller holds. */
static void test_permits_ip_from_auth_ids(void **state)
{
    struct zk_acl item = A(ZK_PERM_WRITE, "ip", "192.0.2.0/24");
    struct tree_acl *acl = fixup_ok(&item, 1, NULL);
    struct tree_authid ids[] = { { "ip", "192.0.2.55" } };
    struct tree_auth auth = { .ids = ids, .count = 1, .peer_ip = "198.18.3.1", .super = false,
                              .sasl_provider = false };
    assert_true(tree_acl_permits(acl, ZK_PERM_WRITE, &auth));
    auth.count = 0;
    assert_false(tree_acl_permits(acl, ZK_PERM_WRITE, &auth));
    tree_acl_unref(acl);
}

/* A peer address given as bytes (the UDP path's) matches as its text
 * would: on the ACL's prefix, IPv4 against IPv4 only, IPv6 against IPv6. */
static void test_permits_ip_from_peer_bytes(void **state)
{
    struct zk_acl items[] = { A(ZK_PERM_READ, "ip", "198.18.0.0/15"),
                              A(ZK_PERM_WRITE, "ip", "2001:db8::/32") };
    struct tree_acl *acl = fixup_ok(items, 2, NULL);
    struct tree_addr inside = { .len = 4, .b = { 198, 19, 255, 1 } };
    struct tree_addr outside = { .len = 4, .b = { 198, 20, 0, 1 } };
    struct tree_addr v6 = { .len = 16, .b = { 0x20, 0x01, 0x0d, 0xb8, [15] = 7 } };
    struct tree_addr none = { .len = 0 };
    struct tree_auth auth = { .peer_addr = &inside };
    assert_true(tree_acl_permits(acl, ZK_PERM_READ, &auth));
    assert_false(tree_acl_permits(acl, ZK_PERM_WRITE, &auth));
    auth.peer_addr = &outside;
    assert_false(tree_acl_permits(acl, ZK_PERM_READ, &auth));
    auth.peer_addr = &v6;
    assert_false(tree_acl_permits(acl, ZK_PERM_READ, &auth));
    assert_true(tree_acl_permits(acl, ZK_PERM_WRITE, &auth));
    v6.b[3] = 0xb9;
    assert_false(tree_acl_permits(acl, ZK_PERM_WRITE, &auth));
    auth.peer_addr = &none;
    assert_false(tree_acl_permits(acl, ZK_PERM_READ | ZK_PERM_WRITE, &auth));
    /* text, when there is some, is what counts */
    auth.peer_addr = &outside;
    auth.peer_ip = "198.18.0.1";
    assert_true(tree_acl_permits(acl, ZK_PERM_READ, &auth));
    tree_acl_unref(acl);
}

/* Perm bits select entries: the matching identity must sit on an entry
 * that grants the asked bit. */
static void test_permits_picks_entry_by_perm(void **state)
{
    struct zk_acl items[] = { A(ZK_PERM_READ, "world", "anyone"),
                              A(ZK_PERM_WRITE, "digest", "u:h"),
                              A(ZK_PERM_DELETE, "ip", "10.0.0.0/8") };
    struct tree_acl *acl = fixup_ok(items, 3, NULL);
    struct tree_authid ids[] = { { "digest", "u:h" } };
    struct tree_auth auth = { .ids = ids, .count = 1, .peer_ip = "198.18.5.5", .super = false,
                              .sasl_provider = false };
    assert_true(tree_acl_permits(acl, ZK_PERM_READ, &auth));
    assert_true(tree_acl_permits(acl, ZK_PERM_WRITE, &auth));
    assert_false(tree_acl_permits(acl, ZK_PERM_DELETE, &auth));
    auth.peer_ip = "10.9.9.9";
    assert_true(tree_acl_permits(acl, ZK_PERM_DELETE, &auth));
    assert_false(tree_acl_permits(acl, ZK_PERM_ADMIN, &auth));
    tree_acl_unref(acl);
}

/* ---- encoding ---------------------------------------------------------------- */

/* Reads a jute string at *off and checks it equals want. */
static void expect_str(const struct zk_wbuf *w, size_t *off, const char *want)
{
    int32_t n = (int32_t)base_get_be32(w->p + *off);
    assert_int_equal(n, (int32_t)strlen(want));
    assert_memory_equal(w->p + *off + 4, want, (size_t)n);
    *off += 4 + (size_t)n;
}

static void test_put_encodes_jute_vector(void **state)
{
    struct zk_acl items[] = { A(ZK_PERM_READ, "world", "anyone"), A(ZK_PERM_ALL, "digest", "u:h") };
    struct tree_acl *acl = fixup_ok(items, 2, NULL);
    struct zk_wbuf w;
    zk_wbuf_init(&w);
    tree_acl_put(&w, acl);
    assert_false(w.err);
    size_t off = 0;
    assert_int_equal((int32_t)base_get_be32(w.p), 2);
    off += 4;
    assert_int_equal((int32_t)base_get_be32(w.p + off), ZK_PERM_READ);
    off += 4;
    expect_str(&w, &off, "world");
    expect_str(&w, &off, "anyone");
    assert_int_equal((int32_t)base_get_be32(w.p + off), ZK_PERM_ALL);
    off += 4;
    expect_str(&w, &off, "digest");
    expect_str(&w, &off, "u:h");
    assert_int_equal(off, w.len);
    tree_acl_unref(acl);

    /* A NULL ACL encodes as OPEN_ACL_UNSAFE. */
    zk_wbuf_reset(&w);
    tree_acl_put(&w, NULL);
    off = 0;
    assert_int_equal((int32_t)base_get_be32(w.p), 1);
    assert_int_equal((int32_t)base_get_be32(w.p + 4), ZK_PERM_ALL);
    off = 8;
    expect_str(&w, &off, "world");
    expect_str(&w, &off, "anyone");
    assert_int_equal(off, w.len);
    zk_wbuf_free(&w);
}

/* ---- reference counting ------------------------------------------------------ */

static void test_refcount(void **state)
{
    struct zk_acl item = A(ZK_PERM_READ, "digest", "u:h");
    struct tree_acl *acl = fixup_ok(&item, 1, NULL);
    assert_int_equal(acl->refs_, 1);
    assert_ptr_equal(tree_acl_ref(acl), acl);
    assert_ptr_equal(tree_acl_ref(acl), acl);
    assert_int_equal(acl->refs_, 3);
    tree_acl_unref(acl);
    tree_acl_unref(acl);
    assert_int_equal(acl->refs_, 1);
    assert_string_equal(acl->items[0].id, "u:h");
    tree_acl_unref(acl); /* frees: ASan reports a leak otherwise */

    assert_null(tree_acl_ref(NULL));
    tree_acl_unref(NULL);
}

static void test_open_acl_ignores_refcount(void **state)
{
    struct tree_acl *open = tree_acl_open();
    unsigned long before = open->refs_;
    for (int i = 0; i < 10; i++)
        tree_acl_unref(tree_acl_open());
    assert_ptr_equal(tree_acl_ref(open), open);
    assert_int_equal(open->refs_, before);
    assert_entry(open, 0, ZK_PERM_ALL, "world", "anyone");
}

#define RACE_ITERATIONS 200000

static void *ref_unref_loop(void *arg)
{
    struct tree_acl *acl = arg;
    for (int i = 0; i < RACE_ITERATIONS; i++) {
        tree_acl_ref(acl);
        tree_acl_unref(acl);
    }
    return NULL;
}

/* Two threads racing ref/unref leave the count where it started. */
static void test_refcount_is_atomic(void **state)
{
    struct zk_acl item = A(ZK_PERM_READ, "digest", "u:h");
    struct tree_acl *acl = fixup_ok(&item, 1, NULL);
    pthread_t t1, t2;
    assert_int_equal(pthread_create(&t1, NULL, ref_unref_loop, acl), 0);
    assert_int_equal(pthread_create(&t2, NULL, ref_unref_loop, acl), 0);
    assert_int_equal(pthread_join(t1, NULL), 0);
    assert_int_equal(pthread_join(t2, NULL), 0);
    assert_int_equal(acl->refs_, 1);
    tree_acl_unref(acl);
}

/* ---- paths --------------------------------------------------------------------- */

struct path_case {
    const char *path;
    size_t len; /* 0: strlen(path) */
    int rc;
};

static void test_path_table(void **state)
{
    /* Each row was checked against PathUtils.validatePath of zookeeper-3.8.0
     * (with the path given as the Java string the UTF-8 bytes decode to). */
    static const struct path_case v[] = {
        { "/", 0, ZK_OK },
        { "/a", 0, ZK_OK },
        { "/a/b/c", 0, ZK_OK },
        { "/zookeeper", 0, ZK_OK },
        { "/...", 0, ZK_OK },
        { "/.a", 0, ZK_OK },
        { "/a.", 0, ZK_OK },
        { "/..a", 0, ZK_OK },
        { "/a..", 0, ZK_OK },
        { "/a/.b/c..", 0, ZK_OK },
        { "/ ", 0, ZK_OK },
        { "/~", 0, ZK_OK },
        { "/a-b_c:d@e", 0, ZK_OK },
        { "a", 0, ZK_EBADARGUMENTS },
        { "a/b", 0, ZK_EBADARGUMENTS },
        { "/a/", 0, ZK_EBADARGUMENTS },
        { "//", 0, ZK_EBADARGUMENTS },
        { "/a//b", 0, ZK_EBADARGUMENTS },
        { "/.", 0, ZK_EBADARGUMENTS },
        { "/..", 0, ZK_EBADARGUMENTS },
        { "/a/.", 0, ZK_EBADARGUMENTS },
        { "/a/..", 0, ZK_EBADARGUMENTS },
        { "/a/./b", 0, ZK_EBADARGUMENTS },
        { "/a/../b", 0, ZK_EBADARGUMENTS },
        { "/a\x01", 0, ZK_EBADARGUMENTS },
        { "/\x1f", 0, ZK_EBADARGUMENTS },
        { "/\t", 0, ZK_EBADARGUMENTS },
        { "/\x7f", 0, ZK_EBADARGUMENTS },
        { "/a\0b", 4, ZK_EBADARGUMENTS },
        { "/\0", 2, ZK_EBADARGUMENTS },
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        size_t len = v[i].len ? v[i].len : strlen(v[i].path);
        int rc = zk_path_validate(v[i].path, len);
        if (rc != v[i].rc)
            fail_msg("path row %zu '%s': got %d want %d", i, v[i].path, rc, v[i].rc);
    }
}

static void test_path_unicode_ranges(void **state)
{
    static const struct path_case v[] = {
        { "/\xc3\xa9t\xc3\xa9", 0, ZK_OK },    /* "été" */
        { "/\xc2\xa0", 0, ZK_OK },             /* U+00A0, first after C1 */
        { "/\xc2\x80", 0, ZK_EBADARGUMENTS },  /* U+0080 */
        { "/\xc2\x9f", 0, ZK_EBADARGUMENTS },  /* U+009F */
        { "/\xed\x9f\xbf", 0, ZK_OK },         /* U+D7FF */
        { "/\xef\xa3\xbf", 0, ZK_EBADARGUMENTS }, /* U+F8FF private use */
        { "/\xee\x80\x80", 0, ZK_EBADARGUMENTS }, /* U+E000 private use */
        { "/\xef\xa4\x80", 0, ZK_OK },         /* U+F900 */
        { "/\xef\xbf\xaf", 0, ZK_OK },         /* U+FFEF */
        { "/\xef\xbf\xb0", 0, ZK_EBADARGUMENTS }, /* U+FFF0 */
        { "/\xef\xbf\xbd", 0, ZK_EBADARGUMENTS }, /* U+FFFD */
        { "/\xef\xbf\xbf", 0, ZK_EBADARGUMENTS }, /* U+FFFF */
        { "/\xf0\x9f\x98\x80", 0, ZK_EBADARGUMENTS }, /* U+1F600: a surrogate pair in Java */
        { "/\xe4\xb8\xad/\xe6\x96\x87", 0, ZK_OK },   /* CJK segments */
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        int rc = zk_path_validate(v[i].path, strlen(v[i].path));
        if (rc != v[i].rc)
            fail_msg("unicode row %zu: got %d want %d", i, rc, v[i].rc);
    }
}

static void test_path_malformed_utf8(void **state)
{
    static const char *const v[] = {
        "/\xc3",             /* truncated two-byte */
        "/\xe4\xb8",         /* truncated three-byte */
        "/\x80",             /* lone continuation */
        "/a\xbf",            /* lone continuation */
        "/\xc0\xaf",         /* overlong '/' */
        "/\xc1\xbf",         /* overlong */
        "/\xe0\x80\xaf",     /* overlong three-byte */
        "/\xed\xa0\x80",     /* encoded surrogate U+D800 */
        "/\xed\xbf\xbf",     /* encoded surrogate U+DFFF */
        "/\xc3\x28",         /* bad continuation */
        "/\xf8\x88\x80\x80", /* five-byte form */
        "/\xff",
        "/\xfe",
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        int rc = zk_path_validate(v[i], strlen(v[i]));
        if (rc != ZK_EBADARGUMENTS)
            fail_msg("malformed row %zu accepted", i);
    }
}

/* ZooKeeper bounds a path only by the frame (jute.maxbuffer, which may
 * exceed 1 MiB): no length is refused here. */
static void test_path_length_limits(void **state)
{
    const size_t big = 3u << 20;
    char *p = malloc(big);
    assert_non_null(p);
    memset(p, 'a', big);
    p[0] = '/';
    assert_int_equal(zk_path_validate(p, 4097), ZK_OK);
    assert_int_equal(zk_path_validate(p, 200000), ZK_OK);
    assert_int_equal(zk_path_validate(p, big), ZK_OK);
    free(p);
    assert_int_equal(zk_path_validate("", 0), ZK_EBADARGUMENTS);
    assert_int_equal(zk_path_validate(NULL, 0), ZK_EBADARGUMENTS);
    /* Only len bytes count: "/a/" cut at 2 is "/a". */
    assert_int_equal(zk_path_validate("/a/", 2), ZK_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_digest_vectors),
        cmocka_unit_test(test_digest_block_boundaries),
        cmocka_unit_test(test_fixup_empty_or_null_is_invalid),
        cmocka_unit_test(test_fixup_open_acl_is_shared),
        cmocka_unit_test(test_fixup_world_needs_anyone),
        cmocka_unit_test(test_fixup_unknown_or_null_scheme_is_invalid),
        cmocka_unit_test(test_fixup_digest_ids),
        cmocka_unit_test(test_fixup_ip_ids),
        cmocka_unit_test(test_fixup_auth_expands_digest_ids),
        cmocka_unit_test(test_fixup_auth_without_digest_is_invalid),
        cmocka_unit_test(test_fixup_sasl_ids),
        cmocka_unit_test(test_fixup_auth_expands_sasl_ids),
        cmocka_unit_test(test_fixup_x509_ids),
        cmocka_unit_test(test_fixup_auth_expands_x509_ids),
        cmocka_unit_test(test_permits_x509),
        cmocka_unit_test(test_fixup_removes_duplicates),
        cmocka_unit_test(test_fixup_one_bad_entry_rejects_all),
        cmocka_unit_test(test_fixup_keeps_perms_as_sent),
        cmocka_unit_test(test_fixup_rejects_nul_bytes_and_oversize),
        cmocka_unit_test(test_fixup_null_strings),
        cmocka_unit_test(test_permits_null_and_empty),
        cmocka_unit_test(test_permits_world),
        cmocka_unit_test(test_permits_digest),
        cmocka_unit_test(test_permits_super),
        cmocka_unit_test(test_permits_sasl),
        cmocka_unit_test(test_permits_ip),
        cmocka_unit_test(test_permits_ip_from_auth_ids),
        cmocka_unit_test(test_permits_ip_from_peer_bytes),
        cmocka_unit_test(test_permits_picks_entry_by_perm),
        cmocka_unit_test(test_put_encodes_jute_vector),
        cmocka_unit_test(test_refcount),
        cmocka_unit_test(test_open_acl_ignores_refcount),
        cmocka_unit_test(test_refcount_is_atomic),
        cmocka_unit_test(test_path_table),
        cmocka_unit_test(test_path_unicode_ranges),
        cmocka_unit_test(test_path_malformed_utf8),
        cmocka_unit_test(test_path_length_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
