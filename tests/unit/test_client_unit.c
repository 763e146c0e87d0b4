/*
 * test_client_unit — liblarch's pure parts: connect strings and chroot,
 * the watch registry's trigger rules, reply decoding, ACL syntax, digest
 * ids, sequence suffixes, path helpers. No server.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/lc_int.h"

/* ---- connect strings ------------------------------------------------------------- */

static void test_hosts_parse(void **state)
{
    (void)state;
    struct lc_hosts h;
    assert_int_equal(lc_hosts_parse("a:1,b,[::1]:3/app/x", &h), ZK_OK);
    assert_int_equal(h.count, 3);
    assert_string_equal(h.items[0].name, "a");
    assert_string_equal(h.items[0].port, "1");
    assert_string_equal(h.items[1].name, "b");
    assert_string_equal(h.items[1].port, "2181");
    assert_string_equal(h.items[2].name, "::1");
    assert_string_equal(h.items[2].port, "3");
    assert_string_equal(h.chroot, "/app/x");
    lc_hosts_free(&h);
    assert_int_equal(lc_hosts_parse("127.0.0.1:2181/", &h), ZK_OK);
    assert_null(h.chroot); /* "/" is no chroot */
    lc_hosts_free(&h);

    const char *bad[] = { "", "a:", ":1", "a:0", "a:65536", "a:x1", "a,,b", "a,", "[::1",
                          "[::1]x", "a/b/", "a//b", "/chroot", "a/./b" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(lc_hosts_parse(bad[i], &h), ZK_EBADARGUMENTS);
        assert_null(h.items);
        assert_int_equal(h.count, 0);
    }
}

static void test_shuffle_is_a_permutation(void **state)
{
    (void)state;
    struct lc_hosts h;
    assert_int_equal(lc_hosts_parse("h0,h1,h2,h3,h4,h5,h6,h7", &h), ZK_OK);
    bool moved = false;
    for (uint64_t seed = 1; seed < 20; seed++) {
        lc_hosts_shuffle(&h, seed);
        unsigned seen = 0;
        for (size_t i = 0; i < h.count; i++) {
            seen |= 1u << (h.items[i].name[1] - '0');
            moved |= h.items[i].name[1] - '0' != (int)i;
        }
        assert_int_equal(seen, 0xff);
    }
    assert_true(moved);
    lc_hosts_free(&h);
}

static void test_chroot_mapping(void **state)
{
    (void)state;
    char *p = lc_chroot_add("/app", "/");
    assert_string_equal(p, "/app");
    free(p);
    p = lc_chroot_add("/app", "/x/y");
    assert_string_equal(p, "/app/x/y");
    free(p);
    p = lc_chroot_add(NULL, "/x");
    assert_string_equal(p, "/x");
    free(p);
    assert_string_equal(lc_chroot_strip("/app", "/app"), "/");
    assert_string_equal(lc_chroot_strip("/app", "/app/x"), "/x");
    assert_string_equal(lc_chroot_strip("/app", "/apple"), "/apple"); /* not inside */
    assert_string_equal(lc_chroot_strip(NULL, "/q"), "/q");
}

/* ---- watch registry --------------------------------------------------------------- */

static int marker_a, marker_b;

static void fn1(struct larch *lh, const struct larch_event *ev, void *ctx)
{
    (void)lh;
    (void)ev;
    (void)ctx;
}

static void fn2(struct larch *lh, const struct larch_event *ev, void *ctx)
{
    (void)lh;
    (void)ev;
    (void)ctx;
}

static size_t trigger(struct lc_watches *w, int32_t type, const char *path)
{
    struct lc_wset s = { 0 };
    assert_int_equal(lc_watches_trigger(w, type, path, &s), 0);
    size_t n = s.count;
    lc_wset_free(&s);
    return n;
}

static void test_trigger_rules(void **state)
{
    (void)state;
    struct lc_watches w;
    lc_watches_init(&w);
    assert_int_equal(lc_watches_add(&w, LC_W_DATA, "/a", fn1, &marker_a), 0);
    assert_int_equal(lc_watches_add(&w, LC_W_DATA, "/a", fn1, &marker_a), 0); /* once */
    assert_int_equal(lc_watches_add(&w, LC_W_EXIST, "/a", fn2, &marker_a), 0);
    assert_int_equal(lc_watches_add(&w, LC_W_CHILD, "/a", fn1, &marker_b), 0);
    assert_int_equal(lc_watches_count(&w, LC_W_DATA, "/a", NULL, NULL), 1);
    /* a child event touches only child watchers */
    assert_int_equal(trigger(&w, ZK_EVENT_CHILD_CHANGED, "/a"), 1);
    assert_int_equal(trigger(&w, ZK_EVENT_CHILD_CHANGED, "/a"), 0); /* one-shot */
    /* a data change fires data and exist watchers, once */
    assert_int_equal(trigger(&w, ZK_EVENT_DATA_CHANGED, "/a"), 2);
    assert_int_equal(trigger(&w, ZK_EVENT_DATA_CHANGED, "/a"), 0);
    /* deletion fires all three kinds */
    lc_watches_add(&w, LC_W_DATA, "/b", fn1, &marker_a);
    lc_watches_add(&w, LC_W_CHILD, "/b", fn2, &marker_a);
    assert_int_equal(trigger(&w, ZK_EVENT_DELETED, "/b"), 2);
    /* persistent stays; recursive sees descendants but not child events */
    lc_watches_add(&w, LC_W_PERSISTENT, "/p", fn1, &marker_a);
    lc_watches_add(&w, LC_W_RECURSIVE, "/r", fn2, &marker_b);
    for (int i = 0; i < 3; i++)
        assert_int_equal(trigger(&w, ZK_EVENT_DATA_CHANGED, "/p"), 1);
    assert_int_equal(trigger(&w, ZK_EVENT_CHILD_CHANGED, "/p"), 1);
    assert_int_equal(trigger(&w, ZK_EVENT_CREATED, "/r/x/y"), 1);
    assert_int_equal(trigger(&w, ZK_EVENT_DELETED, "/r"), 1);
    assert_int_equal(trigger(&w, ZK_EVENT_CHILD_CHANGED, "/r"), 0);
    assert_int_equal(trigger(&w, ZK_EVENT_CREATED, "/rx"), 0); /* not a descendant */
    lc_watches_free(&w);
}

static int count_path(void *arg, const char *path)
{
    (void)path;
    (*(int *)arg)++;
    return 0;
}

static void test_registry_grows_removes_and_clears(void **state)
{
    (void)state;
    struct lc_watches w;
    lc_watches_init(&w);
    char path[32];
    for (int i = 0; i < 1000; i++) {
        snprintf(path, sizeof path, "/n%d", i);
        assert_int_equal(lc_watches_add(&w, LC_W_DATA, path, fn1, &marker_a), 0);
        assert_int_equal(lc_watches_add(&w, LC_W_DATA, path, fn2, &marker_b), 0);
    }
    int n = 0;
    assert_int_equal(lc_watches_each_path(&w, LC_W_DATA, count_path, &n), 0);
    assert_int_equal(n, 1000);
    struct lc_wset out = { 0 };
    assert_int_equal(lc_watches_remove(&w, 1u << LC_W_DATA, "/n7", fn1, &marker_a, &out), 0);
    assert_int_equal(out.count, 1);
    assert_true(lc_watches_has(&w, LC_W_DATA, "/n7"));
    assert_int_equal(lc_watches_count(&w, LC_W_DATA, "/n7", fn2, &marker_b), 1);
    lc_wset_free(&out);
    assert_int_equal(lc_watches_remove(&w, 1u << LC_W_DATA, "/n7", NULL, NULL, &out), 0);
    assert_int_equal(out.count, 1);
    assert_false(lc_watches_has(&w, LC_W_DATA, "/n7"));
    lc_wset_free(&out);
    /* session events: every distinct watcher once, then cleared on expiry */
    assert_int_equal(lc_watches_all(&w, &out, true), 0);
    assert_int_equal(out.count, 2);
    lc_wset_free(&out);
    n = 0;
    assert_int_equal(lc_watches_each_path(&w, LC_W_DATA, count_path, &n), 0);
    assert_int_equal(n, 0);
    lc_watches_free(&w);
}

/* ---- reply decoding ------------------------------------------------------------------ */

static struct lc_req reply_of(enum lc_kind kind, int32_t err, struct zk_wbuf *w)
{
    return (struct lc_req){ .kind = kind, .err = err, .body = w->p, .body_len = w->len };
}

static void test_decode_get_and_children(void **state)
{
    (void)state;
    struct zk_wbuf w;
    zk_wbuf_init(&w);
    zk_put_bytes(&w, "hello", 5);
    struct zk_stat st = { .version = 7, .data_length = 5 };
    zk_put_stat(&w, &st);
    struct lc_req r = reply_of(LC_GET, ZK_OK, &w);
    struct lc_reply rep;
    lc_reply_decode(&r, NULL, &rep);
    assert_int_equal(rep.err, ZK_OK);
    assert_int_equal(rep.data_len, 5);
    assert_string_equal(rep.data, "hello");
    assert_int_equal(rep.stat.version, 7);
    lc_reply_free(&rep);

    /* a truncated body is a marshalling error, not garbage */
    r.body_len = 6;
    lc_reply_decode(&r, NULL, &rep);
    assert_int_equal(rep.err, ZK_EMARSHALLINGERROR);
    assert_null(rep.data);
    lc_reply_free(&rep);

    zk_wbuf_reset(&w);
    struct zk_str items[2] = { zk_str_c("/app/e1"), zk_str_c("/app/sub/e2") };
    struct zk_strvec v = { 2, items };
    zk_put_strvec(&w, &v);
    r = reply_of(LC_EPHEMERALS, ZK_OK, &w);
    lc_reply_decode(&r, "/app", &rep);
    assert_int_equal(rep.strings.count, 2);
    assert_string_equal(rep.strings.items[0], "/e1"); /* chroot removed */
    assert_string_equal(rep.strings.items[1], "/sub/e2");
    lc_reply_free(&rep);
    zk_wbuf_free(&w);
}

static void test_decode_failed_multi(void **state)
{
    (void)state;
    struct zk_wbuf w;
    zk_wbuf_init(&w);
    struct zk_multi_header h = { .type = ZK_OP_ERROR, .done = false, .err = 0 };
    zk_put_multi_header(&w, &h);
    zk_put_i32(&w, ZK_OK);
    h.err = ZK_ENONODE;
    zk_put_multi_header(&w, &h);
    zk_put_i32(&w, ZK_ENONODE);
    h.err = ZK_ERUNTIMEINCONSISTENCY;
    zk_put_multi_header(&w, &h);
    zk_put_i32(&w, ZK_ERUNTIMEINCONSISTENCY);
    zk_put_multi_end(&w);
    /* ZooKeeper sends err 0 in the reply header of a failed multi */
    struct lc_req r = reply_of(LC_MULTI, ZK_OK, &w);
    struct lc_reply rep;
    lc_reply_decode(&r, NULL, &rep);
    assert_int_equal(rep.err, ZK_ENONODE);
    assert_int_equal(rep.nresults, 3);
    assert_int_equal(rep.results[0].err, ZK_OK);
    assert_int_equal(rep.results[1].err, ZK_ENONODE);
    assert_int_equal(rep.results[2].err, ZK_ERUNTIMEINCONSISTENCY);
    lc_reply_free(&rep);
    zk_wbuf_free(&w);
}

/* ---- ACLs, digests, sequences, paths ----------------------------------------------------- */

static void test_acl_syntax(void **state)
{
    (void)state;
    struct larch_acl_list acl;
    assert_int_equal(larch_acl_parse("world:anyone:cdrwa,digest:bob:h4sh=:r,ip:::1:rw", &acl),
                     ZK_OK);
    assert_int_equal(acl.count, 3);
    assert_string_equal(acl.items[0].scheme, "world");
    assert_string_equal(acl.items[0].id, "anyone");
    assert_int_equal(acl.items[0].perms, ZK_PERM_ALL);
    assert_string_equal(acl.items[1].id, "bob:h4sh=");
    assert_int_equal(acl.items[1].perms, ZK_PERM_READ);
    assert_string_equal(acl.items[2].scheme, "ip");
    assert_string_equal(acl.items[2].id, "::1");
    assert_int_equal(acl.items[2].perms, ZK_PERM_READ | ZK_PERM_WRITE);
    struct larch_acl_list copy;
    assert_int_equal(larch_acl_copy(&acl, &copy), ZK_OK);
    assert_string_equal(copy.items[1].id, "bob:h4sh=");
    larch_acl_list_free(&copy);
    larch_acl_list_free(&acl);
    const char *bad[] = { "", "world", "world:anyone", "world:anyone:", "world:anyone:q",
                          ":anyone:r", "world:anyone:r,", "world:anyone:r,,ip:1:r" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(larch_acl_parse(bad[i], &acl), ZK_EBADARGUMENTS);
        assert_int_equal(acl.count, 0);
    }
    char letters[6];
    larch_perms_format(ZK_PERM_ALL, letters);
    assert_string_equal(letters, "cdrwa");
    larch_perms_format(ZK_PERM_READ | ZK_PERM_ADMIN, letters);
    assert_string_equal(letters, "ra");
    assert_int_equal(larch_perms_parse("ar"), ZK_PERM_READ | ZK_PERM_ADMIN);
    assert_int_equal(larch_perms_parse("rx"), -1);
}

static void test_digest_id(void **state)
{
    (void)state;
    char id[64];
    /* the superDigest the integration tests configure: super:test */
    assert_int_equal(larch_digest_id("super:test", id, sizeof id), ZK_OK);
    assert_string_equal(id, "super:D/InIHSb7yEEbrWz8b9l71RjZJU=");
    assert_int_equal(larch_digest_id("nocolon", id, sizeof id), ZK_EBADARGUMENTS);
    assert_int_equal(larch_digest_id("u:p", id, 10), ZK_EBADARGUMENTS);
}

static void test_sequences_and_paths(void **state)
{
    (void)state;
    assert_int_equal(larch_sequence_of("/q/lock-0000000042"), 42);
    assert_int_equal(larch_sequence_of("x0000000007"), 7);
    assert_int_equal(larch_sequence_of("lock-000000004"), -1);
    assert_int_equal(larch_sequence_of("lock-00000000a4"), -1);
    char *items[] = { strdup("b-0000000010"), strdup("a-0000000002"), strdup("plain"),
                      strdup("c-0000000001") };
    struct larch_strings s = { 4, malloc(4 * sizeof(char *)) };
    memcpy(s.items, items, sizeof items);
    larch_sort_by_sequence(&s);
    assert_string_equal(s.items[0], "c-0000000001");
    assert_string_equal(s.items[1], "a-0000000002");
    assert_string_equal(s.items[2], "b-0000000010");
    assert_string_equal(s.items[3], "plain");
    larch_strings_free(&s);
    assert_true(larch_path_valid("/a/b", false));
    assert_false(larch_path_valid("/a/", false));
    assert_true(larch_path_valid("/a/", true));
    assert_false(larch_path_valid("a", false));
    assert_false(larch_path_valid(NULL, false));
    char *p = larch_path_join("/", "a");
    assert_string_equal(p, "/a");
    free(p);
    p = larch_path_join("/a", "b");
    assert_string_equal(p, "/a/b");
    free(p);
    assert_string_equal(larch_error(ZK_ENONODE), "NONODE");
    assert_string_equal(larch_error(LARCH_ECLOSING), "CLOSING");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hosts_parse),
        cmocka_unit_test(test_shuffle_is_a_permutation),
        cmocka_unit_test(test_chroot_mapping),
        cmocka_unit_test(test_trigger_rules),
        cmocka_unit_test(test_registry_grows_removes_and_clears),
        cmocka_unit_test(test_decode_get_and_children),
        cmocka_unit_test(test_decode_failed_multi),
        cmocka_unit_test(test_acl_syntax),
        cmocka_unit_test(test_digest_id),
        cmocka_unit_test(test_sequences_and_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
