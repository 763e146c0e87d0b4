/*
 * tls_ctx.c — the context: key store, trust store, protocols, cipher
 * suites and the client-certificate rule, loaded and checked once, at
 * startup, as ZooKeeper's ClientX509Util.createNettySslContextForServer
 * builds its SslContext (and QuorumX509Util its quorum sockets' context,
 * which also dials: the same certificate is presented either way).
 *
 * Every failure is reported as "<where the setting is>: <file>: <problem>",
 * so that the operator sees which line of which zoo.cfg names which file.
 */
#include "tls/tls_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <openssl/x509.h>

#define STORE_BYTES_MAX (1 << 20)  /* a key or trust store larger than this is not one */
#define PASSWORD_BYTES_MAX 1024
#define CIPHER_NAME_MAX 128
#define CIPHER_LIST_MAX 4096

/* ZooKeeper's default suites on Java 9 and later (X509Util.DEFAULT_CIPHERS_JAVA9,
 * 3.9): ECDHE with AES-GCM, then ECDHE with AES-CBC, then TLS 1.3's. */
static const char zk_default_ciphers[] =
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,"
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,"
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256,TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256,"
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA,TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA,"
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384,TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384,"
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA,TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA,"
    "TLS_AES_256_GCM_SHA384,TLS_AES_128_GCM_SHA256,TLS_CHACHA20_POLY1305_SHA256";

/* Every TLS 1.3 suite OpenSSL 3 has, for the name lookups. */
static const char all_tls13[] = "TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256:"
                                "TLS_AES_128_GCM_SHA256:TLS_AES_128_CCM_SHA256:"
                                "TLS_AES_128_CCM_8_SHA256";

/* Java lists it among the suites; OpenSSL always signals secure
 * renegotiation itself. */
#define RENEGOTIATION_SCSV "TLS_EMPTY_RENEGOTIATION_INFO_SCSV"

const char *tls_take_error(const char *dflt)
{
    unsigned long e = ERR_peek_last_error();
    const char *why = e != 0 ? ERR_reason_error_string(e) : NULL;
    ERR_clear_error();
    return why != NULL ? why : dflt;
}

static void fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    ERR_clear_error();
}

static const char *what_or(const char *what, const char *dflt)
{
    return what != NULL && what[0] != '\0' ? what : dflt;
}

/* ---- files ------------------------------------------------------------------ */

/* Reads the regular file at path (at most STORE_BYTES_MAX bytes) into a
 * fresh buffer the caller frees. NULL with errno set (EFBIG: too large,
 * EINVAL: not a regular file). O_NONBLOCK: a FIFO is refused, not waited on. */
static char *read_file(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return NULL;
    struct stat st;
    char *buf = NULL;
    int saved;
    if (fstat(fd, &st) != 0) {
        saved = errno;
        goto close_fd;
    }
    if (!S_ISREG(st.st_mode)) {
        saved = EINVAL;
        goto close_fd;
    }
    if (st.st_size > STORE_BYTES_MAX) {
        saved = EFBIG;
        goto close_fd;
    }
    buf = malloc((size_t)st.st_size + 1);
    if (buf == NULL) {
        saved = ENOMEM;
        goto close_fd;
    }
    *len = 0;
    while (*len < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + *len, (size_t)st.st_size - *len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            saved = n < 0 ? errno : EIO;
            free(buf);
            buf = NULL;
            goto close_fd;
        }
        *len += (size_t)n;
    }
    buf[*len] = '\0';
    close(fd);
    return buf;
close_fd:
    close(fd);
    errno = saved;
    return NULL;
}

/* The store's password into out: password_path's text when that is set
 * (ZooKeeper's SecretUtils.readSecret: one trailing newline dropped), else
 * password. */
static bool store_password(const struct tls_store *s, char *out, size_t cap, char *err,
                           size_t errlen)
{
    out[0] = '\0';
    if (s->password_path == NULL || s->password_path[0] == '\0') {
        if (s->password != NULL && strlen(s->password) >= cap) {
            fail(err, errlen, "%s: longer than %zu bytes",
                 what_or(s->what_password, "password"), cap - 1);
            return false;
        }
        snprintf(out, cap, "%s", s->password != NULL ? s->password : "");
        return true;
    }
    size_t len = 0;
    char *text = read_file(s->password_path, &len);
    if (text == NULL) {
        fail(err, errlen, "%s: cannot read %s: %s", what_or(s->what_password, "passwordPath"),
             s->password_path, strerror(errno));
        return false;
    }
    if (len > 0 && text[len - 1] == '\n')
        text[--len] = '\0';
    bool ok = len < cap && memchr(text, '\0', len) == NULL;
    if (ok)
        memcpy(out, text, len + 1);
    else
        fail(err, errlen, "%s: %s: not a password (at most %zu bytes of text)",
             what_or(s->what_password, "passwordPath"), s->password_path, cap - 1);
    explicit_bzero(text, len);
    free(text);
    return ok;
}

/* ---- stores ------------------------------------------------------------------ */

/* What a store held: the key store's key with its certificate first and the
 * chain after it, or the trust store's certificates. */
struct store_items {
    EVP_PKEY *key;
    STACK_OF(X509) *certs;
};

static void store_items_free(struct store_items *it)
{
    EVP_PKEY_free(it->key);
    sk_X509_pop_free(it->certs, X509_free);
    it->key = NULL;
    it->certs = NULL;
}

struct pem_password {
    const char *password;
    bool asked;
};

/* OpenSSL's passphrase callback: the configured password, never a prompt
 * on the terminal. */
static int password_cb(char *buf, int size, int rwflag, void *u)
{
    struct pem_password *p = u;
    (void)rwflag;
    p->asked = true;
    size_t n = strlen(p->password);
    if (n == 0 || n > (size_t)size)
        return -1;
    memcpy(buf, p->password, n);
    return (int)n;
}

/* Every certificate in a PEM text, in file order (other blocks skipped). */
static bool pem_certs(const char *text, size_t len, STACK_OF(X509) *out)
{
    BIO *bio = BIO_new_mem_buf(text, (int)len);
    if (bio == NULL)
        return false;
    X509 *x;
    bool ok = true;
    while (ok && (x = PEM_read_bio_X509(bio, NULL, NULL, NULL)) != NULL) {
        if (!sk_X509_push(out, x)) {
            X509_free(x);
            ok = false;
        }
    }
    BIO_free(bio);
    ERR_clear_error(); /* the end of the text reads as "no start line" */
    return ok;
}

/* The first private key in a PEM text, decrypted with password. */
static bool pem_key(const char *text, size_t len, const char *password, const struct tls_store *s,
                    EVP_PKEY **key, char *err, size_t errlen)
{
    /* OpenSSL's decoders report a text without a key as "unsupported":
     * look for a key block first, as ZooKeeper's PemReader does */
    if (memmem(text, len, "PRIVATE KEY-----", 16) == NULL) {
        fail(err, errlen, "%s: %s: holds no private key (a PEM key store holds the certificate "
             "chain and the key)", what_or(s->what_path, "key store"), s->path);
        return false;
    }
    BIO *bio = BIO_new_mem_buf(text, (int)len);
    if (bio == NULL) {
        fail(err, errlen, "out of memory");
        return false;
    }
    struct pem_password pw = { .password = password, .asked = false };
    *key = PEM_read_bio_PrivateKey(bio, NULL, password_cb, &pw);
    BIO_free(bio);
    if (*key != NULL) {
        ERR_clear_error();
        return true;
    }
    const char *where = what_or(s->what_path, "key store");
    if (pw.asked && password[0] == '\0')
        fail(err, errlen, "%s: %s: the private key is encrypted and no password is set "
             "(ssl.keyStore.password)", where, s->path);
    else if (pw.asked)
        fail(err, errlen, "%s: %s: wrong password (%s)", where, s->path,
             what_or(s->what_password, "ssl.keyStore.password"));
    else
        fail(err, errlen, "%s: %s: cannot read the private key: %s", where, s->path,
             tls_take_error("malformed"));
    return false;
}

static bool load_pem(const struct tls_store *s, const char *text, size_t len, const char *password,
                     bool want_key, struct store_items *it, char *err, size_t errlen)
{
    if (!pem_certs(text, len, it->certs)) {
        fail(err, errlen, "out of memory");
        return false;
    }
    if (want_key && !pem_key(text, len, password, s, &it->key, err, errlen))
        return false;
    return true;
}

static bool load_pkcs12(const struct tls_store *s, const char *text, size_t len,
                        const char *password, struct store_items *it, char *err, size_t errlen)
{
    const char *where = what_or(s->what_path, "store");
    const unsigned char *p = (const unsigned char *)text;
    PKCS12 *p12 = d2i_PKCS12(NULL, &p, (long)len);
    if (p12 == NULL) {
        fail(err, errlen, "%s: %s: not a PKCS12 file (%s)", where, s->path,
             tls_take_error("malformed"));
        return false;
    }
    X509 *cert = NULL;
    STACK_OF(X509) *ca = NULL;
    bool ok = PKCS12_parse(p12, password, &it->key, &cert, &ca) == 1;
    PKCS12_free(p12);
    if (!ok) {
        unsigned long e = ERR_peek_last_error();
        if (ERR_GET_LIB(e) == ERR_LIB_PKCS12 && ERR_GET_REASON(e) == PKCS12_R_MAC_VERIFY_FAILURE)
            fail(err, errlen, "%s: %s: wrong password (%s)", where, s->path,
                 what_or(s->what_password, "the store's password"));
        else
            fail(err, errlen, "%s: %s: cannot read the PKCS12 file: %s", where, s->path,
                 tls_take_error("malformed"));
        return false;
    }
    /* the certificate that goes with the key first, then the rest */
    ok = cert == NULL || sk_X509_push(it->certs, cert);
    if (!ok)
        X509_free(cert);
    while (ok && ca != NULL && sk_X509_num(ca) > 0) {
        X509 *x = sk_X509_shift(ca);
        if (!sk_X509_push(it->certs, x)) {
            X509_free(x);
            ok = false;
        }
    }
    sk_X509_pop_free(ca, X509_free);
    if (!ok)
        fail(err, errlen, "out of memory");
    return ok;
}

/* Reads s into it (certs allocated here): the key and its chain when
 * want_key, else the certificates. Checks that what is needed is there. */
static bool load_store(const struct tls_store *s, bool want_key, struct store_items *it,
                       char *err, size_t errlen)
{
    const char *where = what_or(s->what_path, want_key ? "key store" : "trust store");
    char password[PASSWORD_BYTES_MAX];
    if (!store_password(s, password, sizeof password, err, errlen))
        return false;
    size_t len = 0;
    char *text = read_file(s->path, &len);
    bool ok = false;
    it->certs = sk_X509_new_null();
    if (text == NULL) {
        fail(err, errlen, "%s: cannot read %s: %s", where, s->path,
             errno == EINVAL ? "not a regular file" : errno == EFBIG ? "too large for a store"
                                                                     : strerror(errno));
        goto out;
    }
    if (it->certs == NULL) {
        fail(err, errlen, "out of memory");
        goto out;
    }
    ok = s->type == TLS_STORE_PKCS12 ? load_pkcs12(s, text, len, password, it, err, errlen)
                                     : load_pem(s, text, len, password, want_key, it, err, errlen);
    if (ok && sk_X509_num(it->certs) == 0) {
        fail(err, errlen, "%s: %s: holds no certificate", where, s->path);
        ok = false;
    } else if (ok && want_key && it->key == NULL) {
        fail(err, errlen, "%s: %s: holds no private key", where, s->path);
        ok = false;
    }
out:
    explicit_bzero(password, sizeof password);
    if (text != NULL) {
        explicit_bzero(text, len);
        free(text);
    }
    if (!ok)
        store_items_free(it);
    return ok;
}

/* The server's certificate (the store's first), its key and its chain. */
static bool use_key_store(SSL_CTX *ctx, const struct tls_store *s, char *err, size_t errlen)
{
    const char *where = what_or(s->what_path, "key store");
    struct store_items it = { 0 };
    if (!load_store(s, true, &it, err, errlen))
        return false;
    bool ok = false;
    if (X509_check_private_key(sk_X509_value(it.certs, 0), it.key) != 1) {
        fail(err, errlen, "%s: %s: the private key does not match the (first) certificate",
             where, s->path);
        goto out;
    }
    if (SSL_CTX_use_certificate(ctx, sk_X509_value(it.certs, 0)) != 1 ||
        SSL_CTX_use_PrivateKey(ctx, it.key) != 1) {
        fail(err, errlen, "%s: %s: cannot use the certificate and key: %s", where, s->path,
             tls_take_error("refused"));
        goto out;
    }
    for (int i = 1; i < sk_X509_num(it.certs); i++) {
        if (SSL_CTX_add1_chain_cert(ctx, sk_X509_value(it.certs, i)) != 1) {
            fail(err, errlen, "%s: %s: cannot use chain certificate %d: %s", where, s->path, i,
                 tls_take_error("refused"));
            goto out;
        }
    }
    ok = true;
out:
    store_items_free(&it);
    return ok;
}

/* The CAs client certificates must chain to, also named to clients in the
 * CertificateRequest (as Java's trust manager names its accepted issuers). */
static bool use_trust_store(SSL_CTX *ctx, const struct tls_store *s, char *err, size_t errlen)
{
    const char *where = what_or(s->what_path, "trust store");
    struct store_items it = { 0 };
    if (!load_store(s, false, &it, err, errlen))
        return false;
    X509_STORE *st = SSL_CTX_get_cert_store(ctx);
    bool ok = true;
    for (int i = 0; ok && i < sk_X509_num(it.certs); i++) {
        X509 *x = sk_X509_value(it.certs, i);
        ok = X509_STORE_add_cert(st, x) == 1 && SSL_CTX_add_client_CA(ctx, x) == 1;
    }
    if (!ok)
        fail(err, errlen, "%s: %s: cannot trust its certificates: %s", where, s->path,
             tls_take_error("refused"));
    store_items_free(&it);
    return ok;
}

/* ---- protocols and cipher suites ------------------------------------------------ */

/* A context that knows every suite of this OpenSSL, for name lookups. */
static SSL_CTX *all_suites_ctx(void)
{
    SSL_CTX *all = SSL_CTX_new(TLS_method());
    if (all != NULL && (SSL_CTX_set_cipher_list(all, "ALL:COMPLEMENTOFALL:@SECLEVEL=0") != 1 ||
                        SSL_CTX_set_ciphersuites(all, all_tls13) != 1)) {
        SSL_CTX_free(all);
        all = NULL;
    }
    ERR_clear_error();
    return all;
}

static int lookup_suite(SSL_CTX *all, const char *name, size_t len, char *out, size_t cap)
{
    STACK_OF(SSL_CIPHER) *sk = SSL_CTX_get_ciphers(all);
    for (int i = 0; i < sk_SSL_CIPHER_num(sk); i++) {
        const SSL_CIPHER *c = sk_SSL_CIPHER_value(sk, i);
        const char *std = SSL_CIPHER_standard_name(c);
        if (std == NULL || strlen(std) != len || memcmp(std, name, len) != 0)
            continue;
        if ((size_t)snprintf(out, cap, "%s", SSL_CIPHER_get_name(c)) >= cap)
            return -1;
        return strcmp(SSL_CIPHER_get_version(c), "TLSv1.3") == 0;
    }
    return -1;
}

/* Java's legacy "SSL_RSA_WITH_..." names are IANA's "TLS_RSA_WITH_...". */
static int map_suite(SSL_CTX *all, const char *name, size_t len, char *out, size_t cap)
{
    if (len > 4 && memcmp(name, "SSL_", 4) == 0) {
        char tls[CIPHER_NAME_MAX];
        if (len >= sizeof tls)
            return -1;
        memcpy(tls, "TLS_", 4);
        memcpy(tls + 4, name + 4, len - 4);
        return lookup_suite(all, tls, len, out, cap);
    }
    return lookup_suite(all, name, len, out, cap);
}

int tls_cipher_to_openssl(const char *name, size_t len, char *out, size_t cap)
{
    SSL_CTX *all = all_suites_ctx();
    if (all == NULL)
        return -1;
    int rc = map_suite(all, name, len, out, cap);
    SSL_CTX_free(all);
    return rc;
}

/* OpenSSL's two lists, TLS 1.2's ("A:B") and TLS 1.3's. */
struct suite_lists {
    char tls12[CIPHER_LIST_MAX];
    char tls13[CIPHER_LIST_MAX];
    size_t len12, len13;
};

static bool list_add(char *list, size_t *used, const char *name)
{
    int n = snprintf(list + *used, CIPHER_LIST_MAX - *used, "%s%s", *used ? ":" : "", name);
    if (n < 0 || (size_t)n >= CIPHER_LIST_MAX - *used)
        return false;
    *used += (size_t)n;
    return true;
}

/* Maps a comma-separated list of Java/IANA names; an unknown one is an
 * error naming it. */
static bool map_suites(const char *names, const char *what, struct suite_lists *out, char *err,
                       size_t errlen)
{
    SSL_CTX *all = all_suites_ctx();
    if (all == NULL) {
        fail(err, errlen, "out of memory");
        return false;
    }
    bool ok = true;
    for (const char *p = names; ok && *p != '\0';) {
        size_t n = strcspn(p, ",");
        const char *w = p;
        size_t wl = n;
        p += n + (p[n] == ',');
        while (wl > 0 && (*w == ' ' || *w == '\t'))
            w++, wl--;
        while (wl > 0 && (w[wl - 1] == ' ' || w[wl - 1] == '\t'))
            wl--;
        if (wl == 0 || (wl == strlen(RENEGOTIATION_SCSV) && memcmp(w, RENEGOTIATION_SCSV, wl) == 0))
            continue;
        char name[CIPHER_NAME_MAX];
        int kind = map_suite(all, w, wl, name, sizeof name);
        if (kind < 0) {
            fail(err, errlen, "%s: cipher suite '%.*s' is not one OpenSSL %s has (the names are "
                 "Java's, as IANA's: TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, "
                 "TLS_AES_128_GCM_SHA256, ...)", what, (int)(wl > 100 ? 100 : wl), w,
                 OpenSSL_version(OPENSSL_VERSION_STRING));
            ok = false;
        } else if (!list_add(kind ? out->tls13 : out->tls12, kind ? &out->len13 : &out->len12,
                             name)) {
            fail(err, errlen, "%s: too many cipher suites", what);
            ok = false;
        }
    }
    SSL_CTX_free(all);
    return ok;
}

/* The suites and the protocol range. As in Java, a protocol none of the
 * suites serves is not offered (JSSE leaves a protocol without suites out
 * of its active protocols); none left is an error. */
static bool set_policy(SSL_CTX *ctx, const struct tls_settings *s, char *err, size_t errlen)
{
    struct suite_lists l = { .len12 = 0 };
    bool dflt = s->ciphers == NULL || s->ciphers[0] == '\0';
    const char *what = dflt ? "ZooKeeper's default cipher suites" : what_or(s->what_ciphers,
                                                                            "ssl.ciphersuites");
    if (!map_suites(dflt ? zk_default_ciphers : s->ciphers, what, &l, err, errlen))
        return false;
    unsigned protos = s->protocols & ((l.len12 ? TLS_PROTO_1_2 : 0) | (l.len13 ? TLS_PROTO_1_3 : 0));
    if (protos == 0) {
        fail(err, errlen, "%s: no suite listed serves an enabled protocol (%s)", what,
             s->protocols == TLS_PROTO_1_2   ? "TLSv1.2"
             : s->protocols == TLS_PROTO_1_3 ? "TLSv1.3"
                                             : "TLSv1.2, TLSv1.3");
        return false;
    }
    /* an empty TLS 1.2 list leaves OpenSSL's list empty, and set_cipher_list
     * says so by failing: the protocol is off then anyway */
    if ((SSL_CTX_set_cipher_list(ctx, l.tls12) != 1 && l.len12 > 0) ||
        SSL_CTX_set_ciphersuites(ctx, l.tls13) != 1) {
        fail(err, errlen, "%s: OpenSSL refuses the suites: %s", what, tls_take_error("refused"));
        return false;
    }
    ERR_clear_error();
    int lo = (protos & TLS_PROTO_1_2) ? TLS1_2_VERSION : TLS1_3_VERSION;
    int hi = (protos & TLS_PROTO_1_3) ? TLS1_3_VERSION : TLS1_2_VERSION;
    if (SSL_CTX_set_min_proto_version(ctx, lo) != 1 || SSL_CTX_set_max_proto_version(ctx, hi) != 1) {
        fail(err, errlen, "cannot set the protocol range: %s", tls_take_error("refused"));
        return false;
    }
    return true;
}

static void set_client_auth(SSL_CTX *ctx, enum tls_client_auth auth)
{
    int mode = SSL_VERIFY_NONE;
    if (auth == TLS_CLIENT_AUTH_WANT)
        mode = SSL_VERIFY_PEER;
    else if (auth == TLS_CLIENT_AUTH_NEED)
        mode = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
    SSL_CTX_set_verify(ctx, mode, NULL);
}

/* ---- the context ---------------------------------------------------------------- */

struct tls_ctx *tls_ctx_new(const struct tls_settings *s, char *err, size_t errlen)
{
    ERR_clear_error();
    if (s->key.path == NULL || s->key.path[0] == '\0') {
        fail(err, errlen, "a TLS port needs a key store: ssl.keyStore.location (ZooKeeper: "
             "\"Keystore is required for SSL server\")");
        return NULL;
    }
    bool asks = s->client_auth != TLS_CLIENT_AUTH_NONE;
    if (asks && (s->trust.path == NULL || s->trust.path[0] == '\0')) {
        fail(err, errlen, "ssl.clientAuth=%s needs ssl.trustStore.location: the CAs client "
             "certificates must chain to (or ssl.clientAuth=none)",
             s->client_auth == TLS_CLIENT_AUTH_NEED ? "need" : "want");
        return NULL;
    }
    struct tls_ctx *t = calloc(1, sizeof *t);
    /* either role: the quorum links accept and dial on one context */
    if (t == NULL || (t->ssl = SSL_CTX_new(TLS_method())) == NULL) {
        fail(err, errlen, "out of memory");
        free(t);
        return NULL;
    }
    t->verify_client_address = s->verify_client_address && asks;
    /* Java refuses client-initiated renegotiation (X509Util sets
     * jdk.tls.rejectClientInitiatedRenegotiation); partial writes let a
     * record go out at a time; the output buffer may move between retries
     * (it grows as replies are queued); idle sessions give their buffers
     * back; no read-ahead, so nothing decrypted hides from epoll. A
     * client that closes without close_notify has closed: the ZooKeeper
     * protocol frames its own messages, so a truncation cannot pass. */
    SSL_CTX_set_options(t->ssl, SSL_OP_NO_RENEGOTIATION | SSL_OP_IGNORE_UNEXPECTED_EOF);
    SSL_CTX_set_mode(t->ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                                 SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_read_ahead(t->ssl, 0);
    static const unsigned char sid_ctx[] = "larchd";
    if (SSL_CTX_set_session_id_context(t->ssl, sid_ctx, sizeof sid_ctx - 1) != 1 ||
        !set_policy(t->ssl, s, err, errlen) || !use_key_store(t->ssl, &s->key, err, errlen) ||
        (s->trust.path != NULL && s->trust.path[0] != '\0' &&
         !use_trust_store(t->ssl, &s->trust, err, errlen))) {
        tls_ctx_free(t);
        return NULL;
    }
    set_client_auth(t->ssl, s->client_auth);
    ERR_clear_error();
    return t;
}

void tls_ctx_free(struct tls_ctx *ctx)
{
    if (ctx == NULL)
        return;
    SSL_CTX_free(ctx->ssl);
    free(ctx);
}
