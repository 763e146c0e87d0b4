/*
 * test_saslsrv — DIGEST-MD5 through saslsrv (Cyrus libsasl2), driven by
 * an RFC 2831 client written here the way kazoo's pure-sasl writes its
 * responses: the challenge's realm, nonce and qop, a cnonce, nc=00000001,
 * digest-uri "zookeeper/zk-sasl-md5", no charset. Checks what the server
 * offers, who a login makes the client, and every refusal.
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

#include <openssl/evp.h>

#include "saslsrv/saslsrv.h"

#define DIGEST_URI "zookeeper/zk-sasl-md5"

static const struct saslsrv_user table[] = {
    { "bob", "bobsecret" },
    { "super", "adminsecret" },
    { "carol", "old" },
    { "carol", "new" }, /* given again: the later password counts */
};

/* ---- an RFC 2831 client ------------------------------------------------ */

static void md5(const void *p, size_t n, unsigned char out[16])
{
    unsigned int len = 0;
    assert_int_equal(EVP_Digest(p, n, out, &len, EVP_md5(), NULL), 1);
    assert_int_equal(len, 16);
}

static void hex(const unsigned char in[16], char out[33])
{
    for (int i = 0; i < 16; i++)
        sprintf(out + 2 * i, "%02x", in[i]);
}

/* The value of key in a challenge: key=value or key="quoted \"value\"". */
static bool directive(const char *text, size_t len, const char *key, char *out, size_t cap)
{
    size_t i = 0, klen = strlen(key);
    while (i < len) {
        while (i < len && (text[i] == ',' || text[i] == ' '))
            i++;
        size_t k = i;
        while (i < len && text[i] != '=')
            i++;
        bool match = i - k == klen && memcmp(text + k, key, klen) == 0;
        size_t o = 0;
        bool quoted = ++i < len && text[i] == '"';
        i += quoted;
        while (i < len && (quoted ? text[i] != '"' : text[i] != ',')) {
            if (quoted && text[i] == '\\' && i + 1 < len)
                i++;
            if (o + 1 < cap)
                out[o++] = text[i];
            i++;
        }
        i += quoted;
        out[o] = '\0';
        if (match)
            return true;
    }
    return false;
}

struct client {
    const char *user, *password, *authzid, *uri, *realm; /* realm NULL: the server's */
    char nonce[256], server_realm[128];
    char ha1_hex[33];
};

/* response= for A2 (without the digest-uri's prefix) */
static void response_value(const struct client *cl, const char *a2_prefix, char out[33])
{
    char buf[1024];
    unsigned char h[16];
    char ha2[33];
    snprintf(buf, sizeof buf, "%s%s", a2_prefix, cl->uri);
    md5(buf, strlen(buf), h);
    hex(h, ha2);
    snprintf(buf, sizeof buf, "%s:%s:00000001:c-nonce-42:auth:%s", cl->ha1_hex, cl->nonce, ha2);
    md5(buf, strlen(buf), h);
    hex(h, out);
}

/* The digest-response to a challenge, as pure-sasl builds it. */
static size_t client_response(struct client *cl, const char *challenge, size_t clen, char *out,
                              size_t cap)
{
    char qop[64];
    assert_true(directive(challenge, clen, "nonce", cl->nonce, sizeof cl->nonce));
    assert_true(directive(challenge, clen, "realm", cl->server_realm, sizeof cl->server_realm));
    assert_true(directive(challenge, clen, "qop", qop, sizeof qop));
    assert_string_equal(qop, "auth"); /* no security layer is offered */
    const char *realm = cl->realm ? cl->realm : cl->server_realm;
    char buf[1024];
    unsigned char key[16], a1[16 + 512];
    snprintf(buf, sizeof buf, "%s:%s:%s", cl->user, realm, cl->password);
    md5(buf, strlen(buf), key);
    memcpy(a1, key, 16);
    int n = snprintf((char *)a1 + 16, sizeof a1 - 16, ":%s:c-nonce-42%s%s", cl->nonce,
                     cl->authzid ? ":" : "", cl->authzid ? cl->authzid : "");
    unsigned char h[16];
    md5(a1, 16 + (size_t)n, h);
    hex(h, cl->ha1_hex);
    char resp[33];
    response_value(cl, "AUTHENTICATE:", resp);
    int len = snprintf(out, cap, "qop=auth,realm=\"%s\",username=\"%s\",nonce=\"%s\","
                       "cnonce=\"c-nonce-42\",nc=00000001,digest-uri=\"%s\",response=%s%s%s%s",
                       realm, cl->user, cl->nonce, cl->uri, resp,
                       cl->authzid ? ",authzid=\"" : "", cl->authzid ? cl->authzid : "",
                       cl->authzid ? "\"" : "");
    assert_true(len > 0 && (size_t)len < cap);
    return (size_t)len;
}

/* Runs an exchange; returns the second step's result and checks what the
 * first (the challenge) and, on success, the rspauth were. */
static enum saslsrv_result login(struct client *cl, struct saslsrv_conn **out_conn)
{
    struct saslsrv_conn *c = saslsrv_conn_new();
    assert_non_null(c);
    const void *tok;
    size_t len;
    assert_int_equal(saslsrv_step(c, "", 0, &tok, &len), SASLSRV_CONTINUE);
    char challenge[1024];
    assert_true(len > 0 && len < sizeof challenge);
    memcpy(challenge, tok, len);
    challenge[len] = '\0';
    char resp[2048];
    size_t rlen = client_response(cl, challenge, len, resp, sizeof resp);
    assert_string_equal(cl->server_realm, "zk-sasl-md5");
    enum saslsrv_result r = saslsrv_step(c, resp, rlen, &tok, &len);
    if (r == SASLSRV_DONE) {
        char want[64], rspauth[33];
        response_value(cl, ":", rspauth);
        snprintf(want, sizeof want, "rspauth=%s", rspauth);
        assert_int_equal(len, strlen(want));
        assert_memory_equal(tok, want, len); /* the server knew the password too */
    } else {
        assert_null(saslsrv_user(c));
        assert_true(strlen(saslsrv_error(c)) > 0);
    }
    if (out_conn)
        *out_conn = c;
    else
        saslsrv_conn_free(c);
    return r;
}

/* A login that fails, for the reason Cyrus gives containing why. */
static void login_fails(struct client *cl, const char *why)
{
    struct saslsrv_conn *c;
    assert_int_equal(login(cl, &c), SASLSRV_FAILED);
    if (!strstr(saslsrv_error(c), why))
        fail_msg("%s: '%s' does not say '%s'", cl->user, saslsrv_error(c), why);
    saslsrv_conn_free(c);
}

/* ---- tests --------------------------------------------------------------- */

static void test_login_gives_the_user_name(void **state)
{
    struct client cl = { .user = "bob", .password = "bobsecret", .uri = DIGEST_URI };
    struct saslsrv_conn *c;
    assert_int_equal(login(&cl, &c), SASLSRV_DONE);
    assert_string_equal(saslsrv_user(c), "bob");
    /* the exchange is over: another token is refused */
    const void *tok;
    size_t len;
    assert_int_equal(saslsrv_step(c, "x", 1, &tok, &len), SASLSRV_FAILED);
    assert_null(saslsrv_user(c));
    assert_string_equal(saslsrv_error(c), "a token after the exchange completed");
    saslsrv_conn_free(c);
}

static void test_wrong_password_or_user_fails(void **state)
{
    struct client wrong = { .user = "bob", .password = "guess", .uri = DIGEST_URI };
    struct client nobody = { .user = "mallory", .password = "bobsecret", .uri = DIGEST_URI };
    struct client old = { .user = "carol", .password = "old", .uri = DIGEST_URI };
    struct client fresh = { .user = "carol", .password = "new", .uri = DIGEST_URI };
    login_fails(&wrong, "client response doesn't match");
    login_fails(&nobody, "user not found");
    login_fails(&old, "client response doesn't match");
    assert_int_equal(login(&fresh, NULL), SASLSRV_DONE);
}

/* ZooKeeper's callback handler sets the authorized id from the
 * authentication id: asking to be "super" makes bob nobody else. */
static void test_authorization_id_is_not_the_identity(void **state)
{
    struct client cl = { .user = "bob", .password = "bobsecret", .authzid = "super",
                         .uri = DIGEST_URI };
    struct saslsrv_conn *c;
    assert_int_equal(login(&cl, &c), SASLSRV_DONE);
    assert_string_equal(saslsrv_user(c), "bob");
    saslsrv_conn_free(c);
}

/* The digest-uri must name the zookeeper service; a realm other than the
 * server's makes the user name "bob@realm", whom the table lacks. */
static void test_service_and_realm_are_checked(void **state)
{
    struct client ldap = { .user = "bob", .password = "bobsecret", .uri = "ldap/zk-sasl-md5" };
    struct client realm = { .user = "bob", .password = "bobsecret", .uri = DIGEST_URI,
                            .realm = "EXAMPLE.COM" };
    login_fails(&ldap, "bad digest-uri");
    login_fails(&realm, "user not found");
}

static void test_garbage_fails_and_stays_failed(void **state)
{
    struct saslsrv_conn *c = saslsrv_conn_new();
    assert_non_null(c);
    const void *tok;
    size_t len;
    assert_int_equal(saslsrv_step(c, "", 0, &tok, &len), SASLSRV_CONTINUE);
    static const char junk[] = "username=\"bob\",,,===\"\\";
    assert_int_equal(saslsrv_step(c, junk, sizeof junk - 1, &tok, &len), SASLSRV_FAILED);
    assert_null(tok);
    assert_int_equal(len, 0);
    assert_int_equal(saslsrv_step(c, "", 0, &tok, &len), SASLSRV_FAILED);
    assert_string_equal(saslsrv_error(c), "a token after the exchange failed");
    saslsrv_conn_free(c);
    saslsrv_conn_free(NULL);
}

/* Each worker steps its own connections: exchanges on several threads at
 * once (the sanitizer builds watch this one). */
static void *login_many(void *arg)
{
    (void)arg;
    for (int i = 0; i < 25; i++) {
        struct client cl = { .user = i % 2 ? "bob" : "super",
                             .password = i % 2 ? "bobsecret" : "adminsecret", .uri = DIGEST_URI };
        struct saslsrv_conn *c;
        if (login(&cl, &c) != SASLSRV_DONE || strcmp(saslsrv_user(c), cl.user) != 0)
            return (void *)1;
        saslsrv_conn_free(c);
    }
    return NULL;
}

static void test_threads_log_in_at_once(void **state)
{
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&t[i], NULL, login_many, NULL), 0);
    for (int i = 0; i < 4; i++) {
        void *rc;
        assert_int_equal(pthread_join(t[i], &rc), 0);
        assert_null(rc);
    }
}

static int setup(void **state)
{
    char err[256];
    if (saslsrv_init(table, sizeof table / sizeof table[0], err, sizeof err) != 0) {
        fprintf(stderr, "saslsrv_init: %s\n", err);
        return -1;
    }
    assert_int_equal(saslsrv_init(table, 1, err, sizeof err), -1); /* once */
    assert_string_equal(err, "SASL is set up already");
    return 0;
}

static int teardown(void **state)
{
    saslsrv_done();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_login_gives_the_user_name),
        cmocka_unit_test(test_wrong_password_or_user_fails),
        cmocka_unit_test(test_authorization_id_is_not_the_identity),
        cmocka_unit_test(test_service_and_realm_are_checked),
        cmocka_unit_test(test_garbage_fails_and_stays_failed),
        cmocka_unit_test(test_threads_log_in_at_once),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
