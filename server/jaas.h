/*
 * jaas — the SASL users of a ZooKeeper deployment, from the JAAS login
 * configuration file its server already has:
 *
 *     Server {
 *         org.apache.zookeeper.server.auth.DigestLoginModule required
 *             user_super="adminsecret"
 *             user_bob="bobsecret";
 *     };
 *
 * The file is read as the JDK's ConfigFile reads it (a StreamTokenizer:
 * // and slash-star comments, "quoted" strings with Java escapes, words of
 * letters, digits and . $ _ - *), every section is checked, and only one
 * matters: "Server", or the one zookeeper.sasl.serverconfig names. Its
 * DigestLoginModule entries' user_NAME options are the users and their
 * passwords, as ZooKeeper's SaslServerCallbackHandler takes them.
 *
 * Where larchd is stricter than the JDK, it says so by line rather than
 * serve something else: an unterminated string, a ${property} to expand,
 * a user name with a realm ('@': ZooKeeper would map it through Kerberos
 * name rules), an empty password (Cyrus's DIGEST-MD5 refuses it). Other
 * login modules (Krb5LoginModule: Kerberos) are ignored with a warning:
 * larchd serves DIGEST-MD5 only.
 *
 * Pure: jaas_parse takes text and reports through a callback; jaas_load
 * reads one file. Not thread-safe: main calls them once, before threads
 * start; the users are immutable afterwards.
 */
#ifndef LARCH_SERVER_JAAS_H
#define LARCH_SERVER_JAAS_H

#include <stddef.h>

#include "server/config.h"

#define JAAS_SECTION_DEFAULT "Server" /* ZooKeeperSaslServer.DEFAULT_LOGIN_CONTEXT_NAME */
#define JAAS_USERS_MAX 4096
#define JAAS_NAME_BYTES_MAX 255     /* Cyrus canonicalises names in 1 KiB with a realm */
#define JAAS_PASSWORD_BYTES_MAX 1023
#define JAAS_FILE_BYTES_MAX (1024 * 1024)

struct jaas_user {
    char *name;     /* NUL-terminated, owned */
    char *password; /* NUL-terminated, owned */
    int line;       /* where its option was */
};

struct jaas_users {
    struct jaas_user *items; /* owned; in the order the file names them */
    size_t count;
};

/* Parses a JAAS file's text; source names it in messages ("jaas.conf:7:
 * ..."), section is the login context whose users are wanted. Returns 0
 * with *out filled (at least one user; a later user_NAME of the same name
 * replaces the earlier password, as ZooKeeper's map does, with a warning),
 * or -1 after reporting every error (*out then empty). Warnings
 * (severity 0) go to report too. */
int jaas_parse(const char *text, size_t len, const char *source, const char *section,
               struct jaas_users *out, config_report_fn report, void *arg);
/* Reads path (at most JAAS_FILE_BYTES_MAX bytes) and parses it. */
int jaas_load(const char *path, const char *section, struct jaas_users *out,
              config_report_fn report, void *arg);
/* Frees what jaas_parse filled in; passwords are wiped first. */
void jaas_users_free(struct jaas_users *u);

#endif /* LARCH_SERVER_JAAS_H */
