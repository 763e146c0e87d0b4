/*
 * saslsrv.c — Cyrus libsasl2 set up to serve DIGEST-MD5 from the JAAS
 * users only (see saslsrv.h), and one exchange per client connection.
 *
 * Cyrus consults its environment in four places, each closed here:
 *   config file     <appname>.conf on SASL_CB_GETCONFPATH: no appname is
 *                   given to sasl_server_init, so none is read;
 *   plugins         every .so in the plugin directory: SASL_CB_VERIFYFILE
 *                   lets only libdigestmd5.so load (no sasldb, sql, ldapdb);
 *   options         SASL_CB_GETOPT answers mech_list, auxprop_plugin,
 *                   reauth_timeout and auto_transition, and nothing else;
 *   secrets         the auxprop plugin "larch-jaas" below answers
 *                   *userPassword from the table; no store is offered.
 * Messages Cyrus logs go to stderr at SASL_LOG_ERR (library trouble),
 * never to syslog; a refused client's reason is saslsrv_error's.
 */
#include "saslsrv/saslsrv.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sasl/sasl.h>
#include <sasl/saslplug.h>

#include "base/base.h"

#define AUXPROP_NAME "larch-jaas"
#define PLUGIN_FILE "libdigestmd5.so"

enum state { FRESH, STEPPING, DONE, FAILED };

struct saslsrv_conn {
    sasl_conn_t *conn;
    enum state state;
    const char *user; /* after DONE: the table's name */
    char error[160];
};

/* The users, read-only between saslsrv_init and saslsrv_done. */
static struct saslsrv_user *users;
static size_t nusers;
static bool started;

/* ---- Cyrus's mutexes: pthread's ---------------------------------------- */

static void *mutex_alloc(void)
{
    pthread_mutex_t *m = malloc(sizeof *m);
    if (m && pthread_mutex_init(m, NULL) != 0) {
        free(m);
        m = NULL;
    }
    return m;
}

static int mutex_lock(void *m)
{
    return pthread_mutex_lock(m) == 0 ? SASL_OK : SASL_FAIL;
}

static int mutex_unlock(void *m)
{
    return pthread_mutex_unlock(m) == 0 ? SASL_OK : SASL_FAIL;
}

static void mutex_free(void *m)
{
    if (m) {
        pthread_mutex_destroy(m);
        free(m);
    }
}

/* ---- the auxprop plugin ---------------------------------------------------- */

/* The last user of that name (saslsrv.h: a later one replaces). */
static const struct saslsrv_user *find_user(const char *name, size_t len)
{
    for (size_t i = nusers; i-- > 0;)
        if (strlen(users[i].name) == len && memcmp(users[i].name, name, len) == 0)
            return &users[i];
    return NULL;
}

/* Fills *userPassword for the authentication id (the only property the
 * DIGEST-MD5 server asks for). An authorization id lookup has nothing to
 * fill: identities are authentication ids (saslsrv.h). SASL_NOUSER for a
 * name not in the table. */
static int jaas_lookup(void *glob_context, sasl_server_params_t *sparams, unsigned flags,
                       const char *user, unsigned ulen)
{
    (void)glob_context;
    if (!sparams || !user)
        return SASL_BADPARAM;
    if (flags & SASL_AUXPROP_AUTHZID)
        return SASL_OK;
    const struct saslsrv_user *u = find_user(user, ulen);
    if (!u)
        return SASL_NOUSER;
    const struct propval *want = sparams->utils->prop_get(sparams->propctx);
    if (!want)
        return SASL_NOMEM;
    for (const struct propval *p = want; p->name; p++) {
        /* '*' marks the authentication id's properties */
        if (strcmp(p->name, "*" SASL_AUX_PASSWORD_PROP) != 0)
            continue;
        if (p->values && !(flags & SASL_AUXPROP_OVERRIDE))
            continue;
        if (p->values)
            sparams->utils->prop_erase(sparams->propctx, p->name);
        int rc = sparams->utils->prop_set(sparams->propctx, p->name, u->password,
                                          (int)strlen(u->password));
        if (rc != SASL_OK)
            return rc;
    }
    return SASL_OK;
}

static sasl_auxprop_plug_t jaas_plugin = {
    .auxprop_lookup = jaas_lookup,
    .name = (char *)AUXPROP_NAME,
};

static int jaas_plugin_init(const sasl_utils_t *utils, int max_version, int *out_version,
                            sasl_auxprop_plug_t **plug, const char *plugname)
{
    (void)utils;
    (void)plugname;
    if (max_version < SASL_AUXPROP_PLUG_VERSION)
        return SASL_BADVERS;
    *out_version = SASL_AUXPROP_PLUG_VERSION;
    *plug = &jaas_plugin;
    return SASL_OK;
}

/* ---- global callbacks ------------------------------------------------------- */

static int get_option(void *context, const char *plugin, const char *option,
                      const char **result, unsigned *len)
{
    (void)context;
    (void)plugin;
    static const char *const options[][2] = {
        { "mech_list", SASLSRV_MECHANISM },
        { "auxprop_plugin", AUXPROP_NAME },
        { "reauth_timeout", "0" },   /* no cache shared between connections */
        { "auto_transition", "no" }, /* never write secrets anywhere */
    };
    for (size_t i = 0; i < sizeof options / sizeof options[0]; i++) {
        if (strcmp(option, options[i][0]) == 0) {
            *result = options[i][1];
            if (len)
                *len = (unsigned)strlen(*result);
            return SASL_OK;
        }
    }
    return SASL_FAIL; /* Cyrus's default */
}

/* Only the DIGEST-MD5 plugin loads; no configuration file is used. */
static int verify_file(void *context, const char *file, sasl_verify_type_t type)
{
    (void)context;
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    return type == SASL_VRFY_PLUGIN && strcmp(base, PLUGIN_FILE) == 0 ? SASL_OK : SASL_CONTINUE;
}

static int log_message(void *context, int level, const char *message)
{
    (void)context;
    if (level <= SASL_LOG_ERR)
        base_log(BASE_LOG_ERROR, "larchd: SASL: %s", message);
    return SASL_OK;
}

/* Any authorization id is accepted: the identity is the authentication
 * id (SaslServerCallbackHandler.handleAuthorizeCallback authorizes every
 * request and sets the authorized id from the authentication id). */
static int proxy_policy(sasl_conn_t *conn, void *context, const char *requested_user,
                        unsigned rlen, const char *auth_identity, unsigned alen,
                        const char *def_realm, unsigned urlen, struct propctx *propctx)
{
    (void)conn, (void)context, (void)requested_user, (void)rlen, (void)auth_identity;
    (void)alen, (void)def_realm, (void)urlen, (void)propctx;
    return SASL_OK;
}

/* Cyrus stores every callback as int (*)(void) and calls it by its id's
 * type; the cast goes through void (*)(void), the type GCC's
 * -Wcast-function-type takes as "any function". */
#define CALLBACK(f) ((sasl_callback_ft)(void (*)(void))(f))

static const sasl_callback_t callbacks[] = {
    { SASL_CB_GETOPT, CALLBACK(get_option), NULL },
    { SASL_CB_VERIFYFILE, CALLBACK(verify_file), NULL },
    { SASL_CB_LOG, CALLBACK(log_message), NULL },
    { SASL_CB_PROXY_POLICY, CALLBACK(proxy_policy), NULL },
    { SASL_CB_LIST_END, NULL, NULL },
};

/* ---- init / done ------------------------------------------------------------ */

static void users_free(void)
{
    for (size_t i = 0; i < nusers; i++) {
        explicit_bzero((char *)users[i].password, strlen(users[i].password));
        free((char *)users[i].password);
        free((char *)users[i].name);
    }
    free(users);
    users = NULL;
    nusers = 0;
}

static int users_copy(const struct saslsrv_user *in, size_t count)
{
    users = calloc(count ? count : 1, sizeof *users);
    if (!users)
        return -1;
    for (size_t i = 0; i < count; i++) {
        char *name = strdup(in[i].name), *password = strdup(in[i].password);
        if (!name || !password) {
            free(name);
            free(password);
            return -1;
        }
        users[nusers++] = (struct saslsrv_user){ name, password };
    }
    return 0;
}

/* Whether a connection offers DIGEST-MD5: the plugin loaded. */
static bool digest_md5_offered(void)
{
    sasl_conn_t *probe = NULL;
    const char *list = NULL;
    bool ok = sasl_server_new(SASLSRV_SERVICE, SASLSRV_SERVER_NAME, NULL, NULL, NULL, NULL, 0,
                              &probe) == SASL_OK &&
              sasl_listmech(probe, NULL, "", " ", "", &list, NULL, NULL) == SASL_OK &&
              strstr(list, SASLSRV_MECHANISM) != NULL;
    sasl_dispose(&probe);
    return ok;
}

int saslsrv_init(const struct saslsrv_user *in, size_t count, char *err, size_t errlen)
{
    if (started) {
        snprintf(err, errlen, "SASL is set up already");
        return -1;
    }
    if (users_copy(in, count) != 0) {
        snprintf(err, errlen, "out of memory");
        users_free();
        return -1;
    }
    sasl_set_mutex(mutex_alloc, mutex_lock, mutex_unlock, mutex_free);
    int rc = sasl_server_init(callbacks, NULL);
    if (rc != SASL_OK) {
        snprintf(err, errlen, "Cyrus SASL did not start: %s", sasl_errstring(rc, NULL, NULL));
        users_free();
        return -1;
    }
    started = true;
    rc = sasl_auxprop_add_plugin(AUXPROP_NAME, jaas_plugin_init);
    if (rc != SASL_OK || !digest_md5_offered()) {
        snprintf(err, errlen, rc != SASL_OK ? "Cyrus SASL refused the password plugin: %s"
                                            : "Cyrus SASL has no " SASLSRV_MECHANISM " mechanism "
                                              "(%s is Debian's libsasl2-modules)",
                 rc != SASL_OK ? sasl_errstring(rc, NULL, NULL) : PLUGIN_FILE);
        saslsrv_done();
        return -1;
    }
    return 0;
}

void saslsrv_done(void)
{
    if (started)
        sasl_server_done();
    started = false;
    users_free();
}

/* ---- one exchange ------------------------------------------------------------ */

struct saslsrv_conn *saslsrv_conn_new(void)
{
    struct saslsrv_conn *c = calloc(1, sizeof *c);
    if (!c || !started)
        goto fail;
    /* no user realm: the realm is the server name and user names get no
     * "@realm" appended before the table lookup */
    if (sasl_server_new(SASLSRV_SERVICE, SASLSRV_SERVER_NAME, NULL, NULL, NULL, NULL,
                        SASL_SUCCESS_DATA, &c->conn) != SASL_OK)
        goto fail;
    /* qop "auth" only, as ZooKeeper's server offers: no security layer */
    sasl_security_properties_t props = { .min_ssf = 0, .max_ssf = 0, .maxbufsize = 0,
                                         .security_flags = SASL_SEC_NOANONYMOUS |
                                                           SASL_SEC_NOPLAINTEXT };
    if (sasl_setprop(c->conn, SASL_SEC_PROPS, &props) != SASL_OK)
        goto fail;
    return c;
fail:
    saslsrv_conn_free(c);
    return NULL;
}

/* Names the table entry Cyrus authenticated, or NULL. */
static const char *authenticated_user(sasl_conn_t *conn)
{
    const void *name = NULL;
    if (sasl_getprop(conn, SASL_AUTHUSER, &name) != SASL_OK || !name)
        return NULL;
    const struct saslsrv_user *u = find_user(name, strlen(name));
    return u ? u->name : NULL;
}

static enum saslsrv_result fail(struct saslsrv_conn *c, int rc)
{
    const char *detail = c->conn ? sasl_errdetail(c->conn) : NULL;
    snprintf(c->error, sizeof c->error, "%s", detail ? detail : sasl_errstring(rc, NULL, NULL));
    c->state = FAILED;
    return SASLSRV_FAILED;
}

enum saslsrv_result saslsrv_step(struct saslsrv_conn *c, const void *in, size_t len,
                                 const void **out, size_t *out_len)
{
    const char *token = NULL;
    unsigned token_len = 0;
    *out = NULL;
    *out_len = 0;
    if (c->state == DONE || c->state == FAILED) {
        snprintf(c->error, sizeof c->error, "a token after the exchange %s",
                 c->state == DONE ? "completed" : "failed");
        c->state = FAILED;
        return SASLSRV_FAILED;
    }
    int rc = c->state == FRESH
                 ? sasl_server_start(c->conn, SASLSRV_MECHANISM, len ? in : NULL, (unsigned)len,
                                     &token, &token_len)
                 : sasl_server_step(c->conn, len ? in : NULL, (unsigned)len, &token, &token_len);
    c->state = STEPPING;
    if (rc != SASL_OK && rc != SASL_CONTINUE)
        return fail(c, rc);
    if (rc == SASL_OK && !(c->user = authenticated_user(c->conn)))
        return fail(c, SASL_NOUSER);
    *out = token;
    *out_len = token_len;
    c->state = rc == SASL_OK ? DONE : STEPPING;
    return rc == SASL_OK ? SASLSRV_DONE : SASLSRV_CONTINUE;
}

const char *saslsrv_user(const struct saslsrv_conn *c)
{
    return c->state == DONE ? c->user : NULL;
}

const char *saslsrv_error(const struct saslsrv_conn *c)
{
    return c->error;
}

void saslsrv_conn_free(struct saslsrv_conn *c)
{
    if (!c)
        return;
    if (c->conn)
        sasl_dispose(&c->conn);
    free(c);
}
