/*
 * tls_pki.h — a throwaway PKI for the unit tests that speak TLS (test_tls,
 * test_dataplane): a CA, server and client certificates and their keys,
 * made with OpenSSL's API into a temporary directory, in the formats the
 * key and trust stores take. Header-only: static inline so that a test
 * using part of it compiles without warnings.
 *
 * Files (test_pki_path names them):
 *   server.pem      server certificate (CN=localhost, IP:127.0.0.1), CA, key
 *   server-enc.pem  server certificate and its key encrypted with "s3cret"
 *   server.p12      the same in PKCS12, password "p12pass"
 *   big.pem         a server certificate of some 16 KiB, and its key
 *   ca.pem          the CA;  trust.p12: the CA in PKCS12, "trustpass"
 *   other-ca.pem    a CA nothing here is signed by
 *   client.pem      client certificate (CN=client, IP:127.0.0.1) and key
 *   elsewhere.pem   client certificate naming IP:198.18.1.3, and key
 *   certs-only.pem  a certificate without a key;  mismatch.pem: a key that
 *                   is not the certificate's;  pass.txt: "s3cret\n"
 *   peer.pem        a quorum member's certificate (serverAuth and clientAuth:
 *                   it dials and accepts; IP:127.0.0.1 .. 127.0.0.9 and
 *                   DNS:localhost), the CA, and its key
 *   rogue-peer.pem  the same names under other-ca.pem's CA, and its key
 */
#ifndef LARCH_TESTS_TLS_PKI_H
#define LARCH_TESTS_TLS_PKI_H

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

struct test_pki {
    char dir[64];
    EVP_PKEY *ca_key, *server_key, *client_key, *other_key;
    X509 *ca, *server, *client, *client_elsewhere;
};

static const char *const test_pki_files[] = {
    "server.pem", "server-enc.pem", "server.p12", "ca.pem", "trust.p12", "client.pem",
    "elsewhere.pem", "certs-only.pem", "mismatch.pem", "pass.txt", "other-ca.pem", "big.pem",
    "peer.pem", "rogue-peer.pem",
};

static inline void test_pki_path(const struct test_pki *p, const char *name, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s", p->dir, name);
}

static inline void test_pki_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
    X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    assert_non_null(e);
    assert_int_equal(X509_add_ext(x, e, -1), 1);
    X509_EXTENSION_free(e);
}

/* A certificate for key named cn, signed by issuer (itself when NULL); a
 * CA when eku is NULL, else a leaf with that extended key usage and san. */
static inline X509 *test_pki_cert(EVP_PKEY *key, const char *cn, X509 *issuer, EVP_PKEY *issuer_key,
                                  const char *eku, const char *san)
{
    static long serial = 1;
    X509 *x = X509_new();
    assert_non_null(x);
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
    X509_gmtime_adj(X509_getm_notBefore(x), -3600);
    X509_gmtime_adj(X509_getm_notAfter(x), 86400);
    X509_set_pubkey(x, key);
    X509_NAME *n = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1, -1, 0);
    X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : n);
    X509 *signer = issuer ? issuer : x;
    if (eku == NULL) {
        test_pki_ext(x, signer, NID_basic_constraints, "critical,CA:TRUE");
        test_pki_ext(x, signer, NID_key_usage, "critical,keyCertSign,cRLSign");
    } else {
        test_pki_ext(x, signer, NID_basic_constraints, "CA:FALSE");
        test_pki_ext(x, signer, NID_ext_key_usage, eku);
        test_pki_ext(x, signer, NID_subject_alt_name, san);
    }
    assert_true(X509_sign(x, issuer_key ? issuer_key : key, EVP_sha256()) > 0);
    return x;
}

/* Writes certificates c1, c2 and key (encrypted when password is set),
 * each that is not NULL, to name as PEM. */
static inline void test_pki_pem(const struct test_pki *p, const char *name, X509 *c1, X509 *c2,
                                EVP_PKEY *key, const char *password)
{
    char path[128];
    test_pki_path(p, name, path, sizeof path);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    if (c1)
        assert_int_equal(PEM_write_X509(f, c1), 1);
    if (c2)
        assert_int_equal(PEM_write_X509(f, c2), 1);
    if (key && password)
        assert_int_equal(PEM_write_PKCS8PrivateKey(f, key, EVP_aes_256_cbc(), NULL, 0, NULL,
                                                   (void *)password), 1);
    else if (key)
        assert_int_equal(PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL), 1);
    fclose(f);
}

static inline void test_pki_p12(const struct test_pki *p, const char *name, const char *password,
                                EVP_PKEY *key, X509 *cert, X509 *chain)
{
    char path[128];
    test_pki_path(p, name, path, sizeof path);
    STACK_OF(X509) *ca = sk_X509_new_null();
    if (chain)
        sk_X509_push(ca, chain);
    PKCS12 *p12 = PKCS12_create(password, "larch", key, cert, ca, 0, 0, 0, 0, 0);
    assert_non_null(p12);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(i2d_PKCS12_fp(f, p12), 1);
    fclose(f);
    PKCS12_free(p12);
    sk_X509_free(ca);
}

static inline void test_pki_text(const struct test_pki *p, const char *name, const char *text)
{
    char path[128];
    test_pki_path(p, name, path, sizeof path);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* A server certificate whose subjectAltName makes it some 16 KiB: a first
 * flight larger than a small socket buffer takes. */
static inline void test_pki_big(struct test_pki *p)
{
    char san[20000] = "IP:127.0.0.1";
    for (int i = 0; i < 800; i++)
        snprintf(san + strlen(san), sizeof san - strlen(san), ",DNS:h%03d.example", i);
    X509 *big = test_pki_cert(p->server_key, "localhost", p->ca, p->ca_key, "serverAuth", san);
    test_pki_pem(p, "big.pem", big, NULL, p->server_key, NULL);
    X509_free(big);
}

#define TEST_PKI_PEER_SAN \
    "DNS:localhost,IP:127.0.0.1,IP:127.0.0.2,IP:127.0.0.3,IP:127.0.0.4,IP:127.0.0.5," \
    "IP:127.0.0.6,IP:127.0.0.7,IP:127.0.0.8,IP:127.0.0.9"

/* The quorum members' certificates: one from the test CA, one from a CA
 * nobody trusts (other_ca, other_key). */
static inline void test_pki_peers(struct test_pki *p, X509 *other_ca)
{
    X509 *peer = test_pki_cert(p->server_key, "peer", p->ca, p->ca_key, "serverAuth,clientAuth",
                               TEST_PKI_PEER_SAN);
    X509 *rogue = test_pki_cert(p->server_key, "peer", other_ca, p->other_key,
                                "serverAuth,clientAuth", TEST_PKI_PEER_SAN);
    test_pki_pem(p, "peer.pem", peer, p->ca, p->server_key, NULL);
    test_pki_pem(p, "rogue-peer.pem", rogue, other_ca, p->server_key, NULL);
    X509_free(peer);
    X509_free(rogue);
}

/* Makes the directory and every file above; 0 or -1. */
static inline int test_pki_make(struct test_pki *p)
{
    snprintf(p->dir, sizeof p->dir, "/tmp/larch-test-pki-XXXXXX");
    if (mkdtemp(p->dir) == NULL)
        return -1;
    p->ca_key = EVP_EC_gen("P-256");
    p->server_key = EVP_EC_gen("P-256");
    p->client_key = EVP_EC_gen("P-256");
    p->other_key = EVP_EC_gen("P-256");
    p->ca = test_pki_cert(p->ca_key, "Larch Test CA", NULL, NULL, NULL, NULL);
    p->server = test_pki_cert(p->server_key, "localhost", p->ca, p->ca_key, "serverAuth",
                              "DNS:localhost,IP:127.0.0.1");
    p->client = test_pki_cert(p->client_key, "client", p->ca, p->ca_key, "clientAuth",
                              "IP:127.0.0.1");
    p->client_elsewhere = test_pki_cert(p->client_key, "client elsewhere", p->ca, p->ca_key,
                                        "clientAuth", "IP:198.18.1.3");
    X509 *other_ca = test_pki_cert(p->other_key, "Other CA", NULL, NULL, NULL, NULL);
    test_pki_pem(p, "server.pem", p->server, p->ca, p->server_key, NULL);
    test_pki_pem(p, "server-enc.pem", p->server, NULL, p->server_key, "s3cret");
    test_pki_p12(p, "server.p12", "p12pass", p->server_key, p->server, p->ca);
    test_pki_pem(p, "ca.pem", p->ca, NULL, NULL, NULL);
    test_pki_p12(p, "trust.p12", "trustpass", NULL, NULL, p->ca);
    test_pki_pem(p, "client.pem", p->client, NULL, p->client_key, NULL);
    test_pki_pem(p, "elsewhere.pem", p->client_elsewhere, NULL, p->client_key, NULL);
    test_pki_pem(p, "certs-only.pem", p->server, NULL, NULL, NULL);
    test_pki_pem(p, "mismatch.pem", p->server, NULL, p->client_key, NULL);
    test_pki_pem(p, "other-ca.pem", other_ca, NULL, NULL, NULL);
    test_pki_text(p, "pass.txt", "s3cret\n");
    test_pki_big(p);
    test_pki_peers(p, other_ca);
    X509_free(other_ca);
    return 0;
}

static inline void test_pki_free(struct test_pki *p)
{
    char path[128];
    for (size_t i = 0; i < sizeof test_pki_files / sizeof test_pki_files[0]; i++) {
        test_pki_path(p, test_pki_files[i], path, sizeof path);
        unlink(path);
    }
    rmdir(p->dir);
    X509_free(p->ca);
    X509_free(p->server);
    X509_free(p->client);
    X509_free(p->client_elsewhere);
    EVP_PKEY_free(p->ca_key);
    EVP_PKEY_free(p->server_key);
    EVP_PKEY_free(p->client_key);
    EVP_PKEY_free(p->other_key);
    memset(p, 0, sizeof *p);
}

/* An OpenSSL client of the test CA on fd, with the certificate and key in
 * cert_file (NULL: none), at most max_proto; non-blocking like fd. */
static inline SSL *test_pki_client(const struct test_pki *p, SSL_CTX **cctx, int fd,
                                   const char *cert_file, int max_proto)
{
    *cctx = SSL_CTX_new(TLS_client_method());
    assert_non_null(*cctx);
    SSL_CTX_set_max_proto_version(*cctx, max_proto);
    X509_STORE_add_cert(SSL_CTX_get_cert_store(*cctx), p->ca);
    SSL_CTX_set_verify(*cctx, SSL_VERIFY_PEER, NULL);
    if (cert_file) {
        char path[128];
        test_pki_path(p, cert_file, path, sizeof path);
        assert_int_equal(SSL_CTX_use_certificate_file(*cctx, path, SSL_FILETYPE_PEM), 1);
        assert_int_equal(SSL_CTX_use_PrivateKey_file(*cctx, path, SSL_FILETYPE_PEM), 1);
    }
    SSL *ssl = SSL_new(*cctx);
    assert_non_null(ssl);
    SSL_set_fd(ssl, fd);
    SSL_set_connect_state(ssl);
    return ssl;
}

#endif /* LARCH_TESTS_TLS_PKI_H */
