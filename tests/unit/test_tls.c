/*
 * test_tls — the TLS module: cipher suite names, key and trust stores in
 * PEM and PKCS12 with the messages their problems get, and server sessions
 * driven over socketpairs against an OpenSSL client, one non-blocking step
 * at a time (the handshake's rules: protocols, client certificates, the
 * client's address; a handshake reply that does not fit the socket).
 *
 * And the subject's text ZooKeeper's x509 identities are made of: Java's
 * X500Principal.getName(), whose expected values below were printed by
 * OpenJDK 17 for the same DER.
 *
 * Certificates are made here with OpenSSL's API into a temporary directory.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "tls/tls.h"
#include "tls_pki.h"

#define PUMP_STEPS_MAX 200 /* handshake steps before a test gives up */

static struct test_pki pki;

static void path_of(char *out, size_t cap, const char *name)
{
    test_pki_path(&pki, name, out, cap);
}

static int pki_setup(void **state)
{
    signal(SIGPIPE, SIG_IGN);
    return test_pki_make(&pki);
}

static int pki_teardown(void **state)
{
    test_pki_free(&pki);
    return 0;
}

/* ------------------------------------------------------------------ settings */

struct paths {
    char key[128], trust[128], pass[128];
};

/* The settings of a working server: PEM key store, PEM trust store, both
 * protocols, client certificates needed. */
static struct tls_settings base_settings(struct paths *p)
{
    path_of(p->key, sizeof p->key, "server.pem");
    path_of(p->trust, sizeof p->trust, "ca.pem");
    path_of(p->pass, sizeof p->pass, "pass.txt");
    return (struct tls_settings){
        .key = { .path = p->key, .type = TLS_STORE_PEM, .what_path = "zoo.cfg:3: ssl.keyStore.location",
                 .what_password = "zoo.cfg:4: ssl.keyStore.password" },
        .trust = { .path = p->trust, .type = TLS_STORE_PEM,
                   .what_path = "zoo.cfg:5: ssl.trustStore.location",
                   .what_password = "zoo.cfg:6: ssl.trustStore.password" },
        .protocols = TLS_PROTO_1_2 | TLS_PROTO_1_3,
        .client_auth = TLS_CLIENT_AUTH_NEED,
    };
}

/* tls_ctx_new must fail with exactly want. */
static void expect_error(const struct tls_settings *s, const char *want)
{
    char err[TLS_MSG_MAX] = "";
    struct tls_ctx *ctx = tls_ctx_new(s, err, sizeof err);
    if (ctx != NULL || strcmp(err, want) != 0)
        fprintf(stderr, "got: %s\nwant: %s\n", ctx ? "(a context)" : err, want);
    assert_null(ctx);
    assert_string_equal(err, want);
    assert_int_equal(ERR_peek_error(), 0); /* nothing left on the thread's queue */
}

static struct tls_ctx *expect_ctx(const struct tls_settings *s)
{
    char err[TLS_MSG_MAX] = "";
    struct tls_ctx *ctx = tls_ctx_new(s, err, sizeof err);
    if (ctx == NULL)
        fprintf(stderr, "tls_ctx_new: %s\n", err);
    assert_non_null(ctx);
    assert_int_equal(ERR_peek_error(), 0);
    return ctx;
}

static void test_cipher_names(void **state)
{
    char out[128];
    const char *gcm = "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256";
    assert_int_equal(tls_cipher_to_openssl(gcm, strlen(gcm), out, sizeof out), 0);
    assert_string_equal(out, "ECDHE-RSA-AES128-GCM-SHA256");
    const char *t13 = "TLS_AES_256_GCM_SHA384";
    assert_int_equal(tls_cipher_to_openssl(t13, strlen(t13), out, sizeof out), 1);
    assert_string_equal(out, "TLS_AES_256_GCM_SHA384");
    /* Java's legacy "SSL_" spelling of an IANA name */
    const char *cbc = "SSL_ECDHE_ECDSA_WITH_AES_256_CBC_SHA";
    assert_int_equal(tls_cipher_to_openssl(cbc, strlen(cbc), out, sizeof out), 0);
    assert_string_equal(out, "ECDHE-ECDSA-AES256-SHA");
    const char *nope = "TLS_ECDH_anon_WITH_NOTHING";
    assert_int_equal(tls_cipher_to_openssl(nope, strlen(nope), out, sizeof out), -1);
}

/* Stores load in both formats, with passwords given or read from a file. */
static void test_stores_load(void **state)
{
    struct paths p;
    struct tls_settings s = base_settings(&p);
    tls_ctx_free(expect_ctx(&s));

    char enc[128], p12[128], trust[128];
    path_of(enc, sizeof enc, "server-enc.pem");
    s.key.path = enc;
    s.key.password_path = p.pass; /* "s3cret\n": the newline is not the password's */
    tls_ctx_free(expect_ctx(&s));

    path_of(p12, sizeof p12, "server.p12");
    path_of(trust, sizeof trust, "trust.p12");
    s.key = (struct tls_store){ .path = p12, .password = "p12pass", .type = TLS_STORE_PKCS12 };
    s.trust = (struct tls_store){ .path = trust, .password = "trustpass", .type = TLS_STORE_PKCS12 };
    tls_ctx_free(expect_ctx(&s));

    /* clientAuth=none needs no trust store */
    s = base_settings(&p);
    s.trust.path = NULL;
    s.client_auth = TLS_CLIENT_AUTH_NONE;
    tls_ctx_free(expect_ctx(&s));
}

/* Every problem names the setting and the file. */
static void test_store_errors(void **state)
{
    struct paths p;
    struct tls_settings s = base_settings(&p);
    char path[128], want[TLS_MSG_MAX];

    s.key.path = "/nonexistent/server.pem";
    expect_error(&s, "zoo.cfg:3: ssl.keyStore.location: cannot read /nonexistent/server.pem: "
                     "No such file or directory");
    s.key.path = pki.dir;
    snprintf(want, sizeof want, "zoo.cfg:3: ssl.keyStore.location: cannot read %s: not a regular "
             "file", pki.dir);
    expect_error(&s, want);

    path_of(path, sizeof path, "server-enc.pem");
    s.key.path = path;
    s.key.password = "wrong";
    snprintf(want, sizeof want, "zoo.cfg:3: ssl.keyStore.location: %s: wrong password (zoo.cfg:4: "
             "ssl.keyStore.password)", path);
    expect_error(&s, want);
    s.key.password = NULL;
    snprintf(want, sizeof want, "zoo.cfg:3: ssl.keyStore.location: %s: the private key is "
             "encrypted and no password is set (ssl.keyStore.password)", path);
    expect_error(&s, want);

    path_of(path, sizeof path, "server.p12");
    s.key = (struct tls_store){ .path = path, .password = "nope", .type = TLS_STORE_PKCS12,
                                .what_path = "zoo.cfg:3: ssl.keyStore.location",
                                .what_password = "zoo.cfg:4: ssl.keyStore.password" };
    snprintf(want, sizeof want, "zoo.cfg:3: ssl.keyStore.location: %s: wrong password (zoo.cfg:4: "
             "ssl.keyStore.password)", path);
    expect_error(&s, want);
    path_of(path, sizeof path, "server.pem"); /* PEM read as PKCS12 */
    s.key.path = path;
    snprintf(want, sizeof want, "zoo.cfg:3: ssl.keyStore.location: %s: not a PKCS12 file", path);
    char err[TLS_MSG_MAX];
    assert_null(tls_ctx_new(&s, err, sizeof err));
    assert_memory_equal(err, want, strlen(want));

    s = base_settings(&p);
    path_of(path, sizeof path, "certs-only.pem");
    s.key.path = path;
    snprintf(want, sizeof want, "zoo.cfg:3: ssl.keyStore.location: %s: holds no private key (a "
             "PEM key store holds the certificate chain and the key)", path);
    expect_error(&s, want);
    path_of(path, sizeof path, "mismatch.pem");
    s.key.path = path;
    snprintf(want, sizeof want, "zoo.cfg:3: ssl.keyStore.location: %s: the private key does not "
             "match the (first) certificate", path);
    expect_error(&s, want);

    s = base_settings(&p);
    path_of(path, sizeof path, "pass.txt"); /* no certificate in it */
    s.trust.path = path;
    snprintf(want, sizeof want, "zoo.cfg:5: ssl.trustStore.location: %s: holds no certificate",
             path);
    expect_error(&s, want);
    s.trust.path = NULL;
    expect_error(&s, "ssl.clientAuth=need needs ssl.trustStore.location: the CAs client "
                     "certificates must chain to (or ssl.clientAuth=none)");
    s = base_settings(&p);
    s.key.password_path = "/nonexistent/pass";
    expect_error(&s, "zoo.cfg:4: ssl.keyStore.password: cannot read /nonexistent/pass: No such "
                     "file or directory");
}

static void test_cipher_settings(void **state)
{
    struct paths p;
    struct tls_settings s = base_settings(&p);
    s.what_ciphers = "zoo.cfg:9: ssl.ciphersuites";
    s.ciphers = "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_NO_SUCH_SUITE";
    char want[TLS_MSG_MAX];
    snprintf(want, sizeof want, "zoo.cfg:9: ssl.ciphersuites: cipher suite 'TLS_NO_SUCH_SUITE' is "
             "not one OpenSSL %s has (the names are Java's, as IANA's: "
             "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_AES_128_GCM_SHA256, ...)",
             OpenSSL_version(OPENSSL_VERSION_STRING));
    expect_error(&s, want);
    s.ciphers = "TLS_AES_128_GCM_SHA256";
    s.protocols = TLS_PROTO_1_2;
    expect_error(&s, "zoo.cfg:9: ssl.ciphersuites: no suite listed serves an enabled protocol "
                     "(TLSv1.2)");
    s.ciphers = "TLS_EMPTY_RENEGOTIATION_INFO_SCSV,TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384";
    tls_ctx_free(expect_ctx(&s));
}

/* ------------------------------------------------------------------ sessions */

struct session {
    int fd[2];            /* [0] the server's end, [1] the client's */
    struct tls_conn *srv;
    SSL_CTX *cctx;
    SSL *cli;
    bool srv_failed, cli_done, cli_failed;
    int srv_waits_write;  /* times the server's read waited to write */
};

/* A client of the test CA, with cert_file's certificate (NULL: none) and
 * at most max_proto. */
static void session_open(struct session *x, struct tls_ctx *ctx, const char *peer_ip,
                         const char *cert_file, int max_proto)
{
    memset(x, 0, sizeof *x);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, x->fd), 0);
    x->srv = tls_conn_new(ctx, x->fd[0], peer_ip);
    assert_non_null(x->srv);
    x->cli = test_pki_client(&pki, &x->cctx, x->fd[1], cert_file, max_proto);
}

static void session_close(struct session *x)
{
    tls_conn_free(x->srv);
    SSL_free(x->cli);
    SSL_CTX_free(x->cctx);
    close(x->fd[0]);
    close(x->fd[1]);
    ERR_clear_error();
}

/* Steps both sides until the server's handshake is over (established or
 * failed). The server reads as the dataplane does: EAGAIN means wait. */
static void session_handshake(struct session *x)
{
    char buf[64];
    for (int step = 0; step < PUMP_STEPS_MAX; step++) {
        if (!x->cli_done && !x->cli_failed) {
            int rc = SSL_do_handshake(x->cli);
            int e = SSL_get_error(x->cli, rc);
            x->cli_done = rc == 1;
            x->cli_failed = rc != 1 && e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE;
            ERR_clear_error();
        }
        ssize_t n = tls_conn_recv(x->srv, buf, sizeof buf);
        if (n < 0 && errno == EAGAIN && tls_conn_wants_write(x->srv))
            x->srv_waits_write++;
        if (n < 0 && errno != EAGAIN) {
            x->srv_failed = true;
            return;
        }
        assert_true(n <= 0); /* the client sends no data yet */
        if (tls_conn_established(x->srv) && (x->cli_done || x->cli_failed))
            return;
    }
    fail_msg("the handshake did not end in %d steps", PUMP_STEPS_MAX);
}

/* Application data both ways once established. */
static void session_exchange(struct session *x)
{
    assert_true(tls_conn_established(x->srv));
    assert_int_equal(SSL_write(x->cli, "ruok", 4), 4);
    char buf[TLS_RECORD_MAX];
    ssize_t n = -1;
    for (int step = 0; step < PUMP_STEPS_MAX && n < 0; step++)
        n = tls_conn_recv(x->srv, buf, sizeof buf);
    assert_int_equal(n, 4);
    assert_memory_equal(buf, "ruok", 4);
    assert_int_equal(tls_conn_send(x->srv, "imok", 4), 4);
    int got = -1;
    for (int step = 0; step < PUMP_STEPS_MAX && got <= 0; step++) {
        got = SSL_read(x->cli, buf, sizeof buf);
        ERR_clear_error();
    }
    assert_int_equal(got, 4);
    assert_memory_equal(buf, "imok", 4);
}

static void test_session_need(void **state)
{
    struct paths p;
    struct tls_settings s = base_settings(&p);
    struct tls_ctx *ctx = expect_ctx(&s);
    struct session x;

    session_open(&x, ctx, "127.0.0.1", "client.pem", TLS1_3_VERSION);
    session_handshake(&x);
    assert_false(x.srv_failed);
    assert_string_equal(tls_conn_protocol(x.srv), "TLSv1.3");
    session_exchange(&x);
    session_close(&x);

    /* no certificate: the server's handshake fails, with OpenSSL's reason */
    session_open(&x, ctx, "127.0.0.1", NULL, TLS1_3_VERSION);
    session_handshake(&x);
    assert_true(x.srv_failed);
    assert_string_equal(tls_conn_error(x.srv), "peer did not return a certificate");
    assert_int_equal(tls_conn_send(x.srv, "x", 1), -1);
    assert_int_equal(errno, EPROTO);
    session_close(&x);
    tls_ctx_free(ctx);

    /* want: served without one, refused with one that does not chain */
    s.client_auth = TLS_CLIENT_AUTH_WANT;
    ctx = expect_ctx(&s);
    session_open(&x, ctx, "127.0.0.1", NULL, TLS1_2_VERSION);
    session_handshake(&x);
    assert_false(x.srv_failed);
    assert_string_equal(tls_conn_protocol(x.srv), "TLSv1.2");
    session_exchange(&x);
    session_close(&x);
    tls_ctx_free(ctx);
    char other[128];
    path_of(other, sizeof other, "other-ca.pem");
    s.trust.path = other;
    ctx = expect_ctx(&s);
    session_open(&x, ctx, "127.0.0.1", "client.pem", TLS1_3_VERSION);
    session_handshake(&x);
    assert_true(x.srv_failed);
    assert_string_equal(tls_conn_error(x.srv), "certificate verify failed");
    session_close(&x);
    tls_ctx_free(ctx);
}

/* Only the enabled protocols are served. */
static void test_session_protocols(void **state)
{
    struct paths p;
    struct tls_settings s = base_settings(&p);
    s.protocols = TLS_PROTO_1_3;
    struct tls_ctx *ctx = expect_ctx(&s);
    struct session x;
    session_open(&x, ctx, "127.0.0.1", "client.pem", TLS1_2_VERSION);
    session_handshake(&x);
    assert_true(x.srv_failed);
    assert_string_equal(tls_conn_error(x.srv), "unsupported protocol");
    session_close(&x);
    tls_ctx_free(ctx);
}

/* ssl.clientHostnameVerification: the certificate must name the address. */
static void test_session_client_address(void **state)
{
    struct paths p;
    struct tls_settings s = base_settings(&p);
    s.verify_client_address = true;
    struct tls_ctx *ctx = expect_ctx(&s);
    struct session x;
    session_open(&x, ctx, "::ffff:127.0.0.1", "client.pem", TLS1_3_VERSION);
    session_handshake(&x);
    assert_false(x.srv_failed);
    session_close(&x);
    session_open(&x, ctx, "127.0.0.1", "elsewhere.pem", TLS1_3_VERSION);
    session_handshake(&x);
    assert_true(x.srv_failed);
    assert_string_equal(tls_conn_error(x.srv), "certificate verify failed");
    session_close(&x);
    tls_ctx_free(ctx);
}

/* A server whose socket takes almost nothing: its handshake reply waits
 * for writability (reported, not lost), and the session still completes
 * as the client drains it. */
static void test_session_reply_waits_for_socket(void **state)
{
    struct paths p;
    struct tls_settings s = base_settings(&p);
    char big[128];
    path_of(big, sizeof big, "big.pem");
    s.key.path = big;
    struct tls_ctx *ctx = expect_ctx(&s);
    struct session x;
    session_open(&x, ctx, "127.0.0.1", "client.pem", TLS1_3_VERSION);
    int tiny = 1; /* the kernel raises it to its minimum, a few KiB */
    assert_int_equal(setsockopt(x.fd[0], SOL_SOCKET, SO_SNDBUF, &tiny, sizeof tiny), 0);
    session_handshake(&x);
    assert_false(x.srv_failed);
    assert_true(x.srv_waits_write > 0);
    session_exchange(&x);
    session_close(&x);
    tls_ctx_free(ctx);
}

/* ------------------------------------------------------------------ names */

/* ------------------------------------------------------------------ both ends ours */

/* A dialler's session (tls_conn_new_client) against a server's
 * (tls_conn_new), as the quorum links run them: each side's context is
 * one a member would have (peer.pem or rogue-peer.pem, the test CA). */
struct duo {
    int fd[2]; /* [0] the server's end, [1] the dialler's */
    struct tls_conn *srv, *cli;
    bool srv_done, srv_failed, cli_done, cli_failed;
};

static struct tls_ctx *member_ctx(struct paths *p, const char *key_file)
{
    struct tls_settings s = base_settings(p);
    path_of(p->key, sizeof p->key, key_file);
    return expect_ctx(&s);
}

static void duo_open(struct duo *d, struct tls_ctx *srv, struct tls_ctx *cli, const char *host)
{
    memset(d, 0, sizeof *d);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, d->fd), 0);
    d->srv = tls_conn_new(srv, d->fd[0], "127.0.0.1");
    d->cli = tls_conn_new_client(cli, d->fd[1], host);
    assert_non_null(d->srv);
    assert_non_null(d->cli);
    assert_true(tls_conn_wants_write(d->cli)); /* the ClientHello goes first */
}

static void duo_close(struct duo *d)
{
    tls_conn_free(d->srv);
    tls_conn_free(d->cli);
    close(d->fd[0]);
    close(d->fd[1]);
}

/* One handshake step of t unless it ended; a failure is recorded. */
static void duo_step(struct tls_conn *t, bool *done, bool *failed)
{
    if (*done || *failed)
        return;
    int rc = tls_conn_handshake(t);
    *done = rc == 1;
    *failed = rc == 0 || (rc < 0 && errno != EAGAIN);
    assert_int_equal(ERR_peek_error(), 0);
}

/* Steps both until each has ended (established or failed). In TLS 1.3 a
 * dialler is established before the server has checked its certificate:
 * the server's refusal reaches it at its first read. */
static void duo_handshake(struct duo *d)
{
    for (int step = 0; step < PUMP_STEPS_MAX; step++) {
        duo_step(d->cli, &d->cli_done, &d->cli_failed);
        duo_step(d->srv, &d->srv_done, &d->srv_failed);
        if ((d->cli_done || d->cli_failed) && (d->srv_done || d->srv_failed))
            return;
    }
    fail_msg("the handshakes did not end in %d steps", PUMP_STEPS_MAX);
}

/* recv on t until it gives bytes or fails: the bytes' count, or -1. */
static ssize_t duo_recv(struct tls_conn *t, char *buf, size_t len)
{
    ssize_t n = -1;
    for (int step = 0; step < PUMP_STEPS_MAX && n < 0; step++) {
        n = tls_conn_recv(t, buf, len);
        if (n < 0 && errno != EAGAIN)
            return -1;
    }
    return n;
}

/* Both ends present certificates and verify the other's; data flows both
 * ways; the dialler checks the server's name, a literal or a DNS name. */
static void test_dialler_session(void **state)
{
    struct paths p;
    struct tls_ctx *ctx = member_ctx(&p, "peer.pem");
    /* NULL: ssl.quorum.hostnameVerification=false, the chain alone */
    const char *good[] = { "127.0.0.1", "127.0.0.5", "localhost", NULL };
    for (int i = 0; i < 4; i++) {
        struct duo d;
        duo_open(&d, ctx, ctx, good[i]);
        duo_handshake(&d);
        assert_true(d.cli_done && d.srv_done);
        assert_string_equal(tls_conn_protocol(d.cli), "TLSv1.3");
        char dn[TLS_DN_MAX];
        assert_int_equal(tls_conn_peer_dn(d.srv, dn, sizeof dn), 1); /* it presented one */
        assert_string_equal(dn, "CN=peer");
        assert_int_equal(tls_conn_peer_dn(d.cli, dn, sizeof dn), 1);
        assert_int_equal(tls_conn_send(d.cli, "HELLO", 5), 5);
        char buf[TLS_RECORD_MAX];
        assert_int_equal(duo_recv(d.srv, buf, sizeof buf), 5);
        assert_memory_equal(buf, "HELLO", 5);
        assert_int_equal(tls_conn_send(d.srv, "olleh", 5), 5);
        assert_int_equal(duo_recv(d.cli, buf, sizeof buf), 5);
        assert_memory_equal(buf, "olleh", 5);
        duo_close(&d);
    }
    tls_ctx_free(ctx);
}

/* ssl.quorum.hostnameVerification: a server whose certificate does not
 * name the host dialled is refused by the dialler, with OpenSSL's reason;
 * and the server, whose peer is gone, fails too (never hangs). */
static void test_dialler_refuses_wrong_name(void **state)
{
    struct paths p;
    struct tls_ctx *ctx = member_ctx(&p, "peer.pem");
    const char *bad[] = { "127.0.0.10", "::1", "elsewhere.example", "localhost.example" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct duo d;
        duo_open(&d, ctx, ctx, bad[i]);
        duo_handshake(&d);
        assert_true(d.cli_failed);
        assert_string_equal(tls_conn_error(d.cli), "certificate verify failed");
        assert_false(tls_conn_established(d.cli));
        assert_false(d.srv_done);
        duo_close(&d);
    }
    tls_ctx_free(ctx);
}

/* Mutual authentication: a dialler whose certificate is from a CA the
 * server does not trust is refused by the server (need), and a server
 * from such a CA by the dialler, whatever the server's own rule. */
static void test_untrusted_peer_refused(void **state)
{
    struct paths p, q;
    struct tls_ctx *good = member_ctx(&p, "peer.pem");
    struct tls_ctx *rogue = member_ctx(&q, "rogue-peer.pem");
    struct duo d;
    duo_open(&d, good, rogue, "127.0.0.1");
    duo_handshake(&d);
    assert_true(d.srv_failed);
    assert_string_equal(tls_conn_error(d.srv), "certificate verify failed");
    if (d.cli_done) { /* TLS 1.3: the refusal comes as an alert at its read */
        char buf[TLS_RECORD_MAX];
        assert_int_equal(duo_recv(d.cli, buf, sizeof buf), -1);
        assert_int_equal(errno, EPROTO);
    }
    assert_string_not_equal(tls_conn_error(d.cli), "");
    duo_close(&d);
    duo_open(&d, rogue, good, "127.0.0.1");
    duo_handshake(&d);
    assert_true(d.cli_failed);
    assert_string_equal(tls_conn_error(d.cli), "certificate verify failed");
    duo_close(&d);
    tls_ctx_free(good);
    tls_ctx_free(rogue);
}

static size_t unhex(const char *h, uint8_t *out)
{
    size_t n = strlen(h) / 2;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        assert_int_equal(sscanf(h + 2 * i, "%2x", &v), 1);
        out[i] = (uint8_t)v;
    }
    return n;
}

/* DER names and what OpenJDK 17's X500Principal(der).getName() printed. */
static const struct {
    const char *der, *java;
} dn_vectors[] = {
    { "3041310b3009060355040613025553310e300c060355040a0c054c61726368310d300b060355040b0c0454"
      "6573743113301106035504030c0a636c69656e74206f6e65",
      "CN=client one,OU=Test,O=Larch,C=US" },
    { "301e311c301a06035504030c13612c622b6322645c653c663e673b683d69236a",
      "CN=a\\,b\\+c\\\"d\\\\e\\<f\\>g\\;h\\=i\\#j" },
    { "302a311b3019060355040a0c1220206c65616420616e6420747261696c200d310b300906035504030c022378",
      "CN=\\#x,O=\\ \\ lead and trail\\ \\\r" },
    { "300e310c300a06035504030c03610062", "CN=a\\00b" },
    /* a multi-valued name in its encoded order; DC and UID by keyword */
    { "3032311b300f060a0992268993f22c6401010c0175300806035504030c016331133011060a0992268993f2"
      "2c64011916036f7267",
      "DC=org,UID=u+CN=c" },
    /* types without an RFC 2253 keyword: the OID, and the value's DER in hex */
    { "30233121301206092a864886f70d01090116056140622e63300b0603550405130431323334",
      "1.2.840.113549.1.9.1=#16056140622e63+2.5.4.5=#130431323334" },
    { "300c310a300806038837010c0176", "2.999.1=#0c0176" },
    /* a BMPString's bytes read as UTF-8, as Java reads them */
    { "300f310d300b06035504031e0465e5672c", "CN=e\xef\xbf\xbdg\\," },
    /* a NumericString is no string type Java prints */
    { "300e310c300a06035504031203313233", "CN=#1203313233" },
    /* malformed UTF-8: a truncated sequence, a surrogate, a truncated 4-byte one */
    { "300e310c300a06035504030c0378e381", "CN=x\xef\xbf\xbd" },
    { "30123110300e06035504030c07eda0807af09f98", "CN=\xef\xbf\xbdz\xef\xbf\xbd" },
    { "30153113301106035504030c0a4a6f73c3a920f09f9880", "CN=Jos\xc3\xa9 \xf0\x9f\x98\x80" },
    { "300e310c300a06035504030c03202020", "CN=\\ \\ \\ " },
    { "3000", "" },
};

static void test_dn_java_form(void **state)
{
    uint8_t der[512];
    char out[TLS_DN_MAX];
    for (size_t i = 0; i < sizeof dn_vectors / sizeof dn_vectors[0]; i++) {
        size_t n = unhex(dn_vectors[i].der, der);
        int k = tls_dn_rfc2253(der, n, out, sizeof out);
        if (k < 0 || strcmp(out, dn_vectors[i].java) != 0)
            fprintf(stderr, "vector %zu: got %s, want %s\n", i, k < 0 ? "(error)" : out,
                    dn_vectors[i].java);
        assert_int_equal(k, (int)strlen(dn_vectors[i].java));
        assert_string_equal(out, dn_vectors[i].java);
    }
    /* a long value (length in two bytes), then no room for it */
    size_t n = unhex("3081d63181d33081d006035504030c81c8", der);
    memset(der + n, 'y', 200);
    assert_int_equal(tls_dn_rfc2253(der, n + 200, out, sizeof out), 203);
    assert_memory_equal(out, "CN=yyy", 6);
    assert_int_equal(tls_dn_rfc2253(der, n + 200, out, 203), -1);
    assert_int_equal(tls_dn_rfc2253(der, n + 200, out, 204), 203);
    /* malformed: truncated, trailing bytes, an indefinite length, not a SET */
    assert_int_equal(tls_dn_rfc2253(der, n + 199, out, sizeof out), -1);
    n = unhex("300e310c300a06035504030c0361626300", der);
    assert_int_equal(tls_dn_rfc2253(der, n, out, sizeof out), -1);
    n = unhex("3080310c300a06035504030c03616263", der);
    assert_int_equal(tls_dn_rfc2253(der, n, out, sizeof out), -1);
    n = unhex("300e300c300a06035504030c03616263", der);
    assert_int_equal(tls_dn_rfc2253(der, n, out, sizeof out), -1);
    /* nothing at all is no name either */
    assert_int_equal(tls_dn_rfc2253(der, 0, out, sizeof out), -1);
}

/* The client certificate's subject through a session. */
static void test_session_peer_dn(void **state)
{
    struct paths p;
    struct tls_settings s = base_settings(&p);
    s.client_auth = TLS_CLIENT_AUTH_WANT;
    struct tls_ctx *ctx = expect_ctx(&s);
    struct session x;
    char dn[TLS_DN_MAX];
    session_open(&x, ctx, "127.0.0.1", "client.pem", TLS1_3_VERSION);
    assert_int_equal(tls_conn_peer_dn(x.srv, dn, sizeof dn), 0); /* not yet established */
    session_handshake(&x);
    assert_int_equal(tls_conn_peer_dn(x.srv, dn, sizeof dn), 1);
    assert_string_equal(dn, "CN=client");
    assert_int_equal(tls_conn_peer_dn(x.srv, dn, 5), -1);
    session_close(&x);
    session_open(&x, ctx, "127.0.0.1", NULL, TLS1_3_VERSION);
    session_handshake(&x);
    assert_int_equal(tls_conn_peer_dn(x.srv, dn, sizeof dn), 0);
    session_close(&x);
    tls_ctx_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cipher_names),
        cmocka_unit_test(test_stores_load),
        cmocka_unit_test(test_store_errors),
        cmocka_unit_test(test_cipher_settings),
        cmocka_unit_test(test_session_need),
        cmocka_unit_test(test_session_protocols),
        cmocka_unit_test(test_session_client_address),
        cmocka_unit_test(test_session_reply_waits_for_socket),
        cmocka_unit_test(test_dn_java_form),
        cmocka_unit_test(test_session_peer_dn),
        cmocka_unit_test(test_dialler_session),
        cmocka_unit_test(test_dialler_refuses_wrong_name),
        cmocka_unit_test(test_untrusted_peer_refused),
    };
    return cmocka_run_group_tests(tests, pki_setup, pki_teardown);
}
