/*
 * test_jaas — JAAS login configuration files (server/jaas.c): the JDK's
 * syntax (comments, quoting and escapes, several sections), the users of
 * the server's section, and every refusal with its file and line.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/jaas.h"

#define MSGS_MAX 16

struct msgs {
    int n, errors, warnings;
    int severity[MSGS_MAX];
    char text[MSGS_MAX][CONFIG_MSG_MAX];
};

static void collect(void *arg, int severity, const char *msg)
{
    struct msgs *m = arg;
    assert_true(m->n < MSGS_MAX);
    m->severity[m->n] = severity;
    snprintf(m->text[m->n], CONFIG_MSG_MAX, "%s", msg);
    m->n++;
    if (severity)
        m->errors++;
    else
        m->warnings++;
}

static bool has_msg(const struct msgs *m, int severity, const char *want)
{
    for (int i = 0; i < m->n; i++)
        if (m->severity[i] == severity && strcmp(m->text[i], want) == 0)
            return true;
    for (int i = 0; i < m->n; i++)
        fprintf(stderr, "  [%s] %s\n", m->severity[i] ? "error" : "warning", m->text[i]);
    return false;
}

static int parse(const char *text, const char *section, struct jaas_users *u, struct msgs *m)
{
    memset(m, 0, sizeof *m);
    return jaas_parse(text, strlen(text), "jaas.conf", section, u, collect, m);
}

static void assert_user(const struct jaas_users *u, size_t i, const char *name,
                        const char *password, int line)
{
    assert_true(i < u->count);
    assert_string_equal(u->items[i].name, name);
    assert_string_equal(u->items[i].password, password);
    assert_int_equal(u->items[i].line, line);
}

/* The file ZooKeeper's SASL guide shows, with a client section beside it
 * and both kinds of comments. */
static void test_zookeeper_guide_file(void **state)
{
    const char *text =
        "// the server's users\n"
        "Server {\n"
        "       org.apache.zookeeper.server.auth.DigestLoginModule required\n"
        "       user_super=\"adminsecret\"\n"
        "       /* a second user,\n"
        "          over two lines */ user_bob=\"bobsecret\";\n"
        "};\n"
        "Client {\n"
        "       org.apache.zookeeper.server.auth.DigestLoginModule required\n"
        "       username=\"bob\"\n"
        "       password=\"bobsecret\";\n"
        "};\n";
    struct jaas_users u;
    struct msgs m;
    assert_int_equal(parse(text, JAAS_SECTION_DEFAULT, &u, &m), 0);
    assert_int_equal(m.n, 0);
    assert_int_equal(u.count, 2);
    assert_user(&u, 0, "super", "adminsecret", 4);
    assert_user(&u, 1, "bob", "bobsecret", 6);
    jaas_users_free(&u);
    assert_null(u.items);
    assert_int_equal(u.count, 0);
}

/* Words need no quotes; quoted strings take Java's escapes; a lone '/'
 * comments to the end of the line; the control flag's case is free; keys
 * and values may be quoted too. */
static void test_quoting_words_and_escapes(void **state)
{
    const char *text =
        "Server{org.apache.zookeeper.server.auth.DigestLoginModule REQUIRED\n"
        "  user_alice=s3cret.with-dots_and$*   / a comment after a lone slash\n"
        "  user_carol=\"tab\\there \\\"quoted\\\" back\\\\slash \\101\\60\\0601\"\n"
        "  \"user_dave\"=\"x\\ny\"\n"
        "  user_erin=\"\\351t\\351\";};\n";
    struct jaas_users u;
    struct msgs m;
    assert_int_equal(parse(text, "Server", &u, &m), 0);
    assert_int_equal(m.n, 0);
    assert_int_equal(u.count, 4);
    assert_user(&u, 0, "alice", "s3cret.with-dots_and$*", 2);
    assert_user(&u, 1, "carol", "tab\there \"quoted\" back\\slash A001", 3);
    assert_user(&u, 2, "dave", "x\ny", 4);
    assert_user(&u, 3, "erin", "\xc3\xa9t\xc3\xa9", 5); /* \351 is U+00E9, as a Java char */
    jaas_users_free(&u);
}

/* zookeeper.sasl.serverconfig names another section; only its users
 * count, and only DigestLoginModule's: another module is ignored with a
 * warning, and a user given twice keeps its last password, as ZooKeeper's
 * map does, with a warning. */
static void test_section_choice_modules_and_repeats(void **state)
{
    const char *text =
        "Server { org.apache.zookeeper.server.auth.DigestLoginModule required user_a=\"1\"; };\n"
        "ZkSasl {\n"
        "  com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true\n"
        "    user_krb=\"not-a-digest-user\";\n"
        "  org.apache.zookeeper.server.auth.DigestLoginModule optional\n"
        "    user_b=\"first\" user_c=\"c\";\n"
        "  org.apache.zookeeper.server.auth.DigestLoginModule sufficient user_b=\"second\";\n"
        "};\n";
    struct jaas_users u;
    struct msgs m;
    assert_int_equal(parse(text, "ZkSasl", &u, &m), 0);
    assert_int_equal(m.errors, 0);
    assert_int_equal(m.warnings, 2);
    assert_true(has_msg(&m, 0, "jaas.conf:3: login module com.sun.security.auth.module."
                               "Krb5LoginModule ignored: larchd serves SASL DIGEST-MD5 from "
                               "org.apache.zookeeper.server.auth.DigestLoginModule only (no "
                               "Kerberos/GSSAPI)"));
    assert_true(has_msg(&m, 0, "jaas.conf:7: user 'b' given again (line 6): this password "
                               "replaces that one, as in ZooKeeper"));
    assert_int_equal(u.count, 2);
    assert_user(&u, 0, "b", "second", 7);
    assert_user(&u, 1, "c", "c", 6);
    jaas_users_free(&u);
}

/* Syntax errors stop the parse at their line, as the JDK's do. */
static void test_syntax_errors_name_their_line(void **state)
{
    static const struct {
        const char *text, *msg;
    } cases[] = {
        { "Server {\n org.apache.zookeeper.server.auth.DigestLoginModule required\n"
          " user_bob=\"x\"\n};\n",
          "jaas.conf:4: expected an option name, found '}'" },
        { "Server {\n X required\n user_bob=\"unterminated\n\";\n};\n",
          "jaas.conf:3: unterminated quoted string (close it with \" on its line)" },
        { "Server {\n X required user_bob=12345;\n};\n",
          "jaas.conf:2: expected an option value (a word or a \"quoted\" string), found the "
          "number 12345 (quote it)" },
        { "Server {\n X required user_bob='pw';\n};\n",
          "jaas.conf:2: expected an option value (a word or a \"quoted\" string), found a "
          "'single-quoted' string (use double quotes)" },
        { "Server {\n X mandatory user_bob=pw;\n};\n",
          "jaas.conf:2: 'mandatory' is not a control flag (required, requisite, sufficient, "
          "optional)" },
        { "Server {\n X required user_bob pw;\n};\n",
          "jaas.conf:2: expected '=', found 'pw'" },
        { "Server {\n X required user_bob=pw;\n}\n",
          "jaas.conf:3: expected ';', found the end of the file" },
        { "Server {\n /* never closed\n X required user_bob=pw;\n};\n",
          "jaas.conf:2: comment never closed (no */ after this /*)" },
        { "Server {\n X required user_bob=pw;\n\n  // the end\n",
          "jaas.conf:2: expected a login module class name, found the end of the file" },
        { "# a shell comment is no JAAS comment\nServer {};\n",
          "jaas.conf:1: expected a section name (a login context such as Server), found '#'" },
        { "Server { X required user_a=x; };\nClient {};\n\nServer { };\n",
          "jaas.conf:4: section 'Server' given twice (first on line 1)" },
        { "Server { -x required; };\n",
          "jaas.conf:1: expected a login module class name, found '-'" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct jaas_users u;
        struct msgs m;
        assert_int_equal(parse(cases[i].text, "Server", &u, &m), -1);
        assert_int_equal(m.errors, 1);
        assert_true(has_msg(&m, 1, cases[i].msg));
        assert_int_equal(u.count, 0);
        assert_null(u.items);
    }
}

/* Users larchd cannot serve are refused, each by its line, and parsing
 * goes on to report the rest. */
static void test_unservable_users_are_errors(void **state)
{
    const char *text =
        "Server {\n"
        "  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
        "    user_=\"nameless\"\n"
        "    \"user_bob@EXAMPLE.COM\"=\"realm\"\n"
        "    user_empty=\"\"\n"
        "    user_prop=\"${user.home}\"\n"
        "    \"user_ padded\"=\"x\"\n"
        "    user_nul=\"a\\0b\"\n"
        "    user_ok=\"fine\";\n"
        "};\n";
    struct jaas_users u;
    struct msgs m;
    assert_int_equal(parse(text, "Server", &u, &m), -1);
    assert_int_equal(m.errors, 6);
    assert_true(has_msg(&m, 1, "jaas.conf:3: user_ names no user (user_NAME=\"password\")"));
    assert_true(has_msg(&m, 1, "jaas.conf:4: user name 'bob@EXAMPLE.COM' has a realm ('@'): "
                               "ZooKeeper maps such names through Kerberos name rules, which "
                               "larchd does not have"));
    assert_true(has_msg(&m, 1, "jaas.conf:5: user 'empty' has an empty password (DIGEST-MD5 in "
                               "Cyrus SASL refuses empty secrets)"));
    assert_true(has_msg(&m, 1, "jaas.conf:6: user 'prop': larchd does not expand ${...} (a Java "
                               "system property) in passwords"));
    assert_true(has_msg(&m, 1, "jaas.conf:7: user name ' padded' begins or ends with a blank "
                               "(SASL trims it: no client could log in as it)"));
    assert_true(has_msg(&m, 1, "jaas.conf:8: user 'nul': password contains a NUL character"));
    assert_int_equal(u.count, 0);
}

/* A file without the section, or whose section lists nobody, is an error
 * naming the file (and the section's line). */
static void test_missing_section_or_users(void **state)
{
    struct jaas_users u;
    struct msgs m;
    assert_int_equal(parse("Client { X required username=bob; };\n", "Server", &u, &m), -1);
    assert_true(has_msg(&m, 1, "jaas.conf: no section 'Server' (the login context whose "
                               "DigestLoginModule lists the users)"));
    assert_int_equal(parse("", "Server", &u, &m), -1);
    assert_int_equal(m.errors, 1);
    assert_int_equal(parse("\n\nServer {\n org.apache.zookeeper.server.auth.DigestLoginModule "
                           "required debug=true;\n};\n", "Server", &u, &m), -1);
    assert_true(has_msg(&m, 1, "jaas.conf:3: section 'Server' has no org.apache.zookeeper.server."
                               "auth.DigestLoginModule user_NAME=\"password\" option: no one "
                               "could log in"));
    assert_int_equal(u.count, 0);
}

/* Line ends: \n, \r and \r\n each end one line. */
static void test_line_ends(void **state)
{
    struct jaas_users u;
    struct msgs m;
    assert_int_equal(parse("Server {\r\n X required\r user_a=1;\n};", "Server", &u, &m), -1);
    assert_true(has_msg(&m, 1, "jaas.conf:3: expected an option value (a word or a \"quoted\" "
                               "string), found the number 1 (quote it)"));
}

static void test_load_names_the_file(void **state)
{
    struct jaas_users u;
    struct msgs m = { 0 };
    assert_int_equal(jaas_load("/nonexistent/larch-jaas.conf", "Server", &u, collect, &m), -1);
    assert_true(has_msg(&m, 1, "/nonexistent/larch-jaas.conf: cannot open the JAAS file: No "
                               "such file or directory"));

    char path[] = "/tmp/larch-test-jaas-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *text = "Server { org.apache.zookeeper.server.auth.DigestLoginModule required\n"
                       " user_bob=\"bobsecret\"; };\n";
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    memset(&m, 0, sizeof m);
    assert_int_equal(jaas_load(path, "Server", &u, collect, &m), 0);
    assert_int_equal(u.count, 1);
    assert_user(&u, 0, "bob", "bobsecret", 2);
    jaas_users_free(&u);
    assert_int_equal(jaas_load(path, "Other", &u, collect, &m), -1);
    char want[128];
    snprintf(want, sizeof want, "%s: no section 'Other' (the login context whose "
                                "DigestLoginModule lists the users)", path);
    assert_true(has_msg(&m, 1, want));
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_zookeeper_guide_file),
        cmocka_unit_test(test_quoting_words_and_escapes),
        cmocka_unit_test(test_section_choice_modules_and_repeats),
        cmocka_unit_test(test_syntax_errors_name_their_line),
        cmocka_unit_test(test_unservable_users_are_errors),
        cmocka_unit_test(test_missing_section_or_users),
        cmocka_unit_test(test_line_ends),
        cmocka_unit_test(test_load_names_the_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
