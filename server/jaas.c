/*
 * jaas.c — JAAS login configuration files, as the JDK's ConfigFile reads
 * them (sun.security.provider.ConfigFile over a java.io.StreamTokenizer),
 * down to the users ZooKeeper's SaslServerCallbackHandler takes from the
 * server's section. See jaas.h for what larchd refuses that the JDK takes.
 *
 * The lexer is StreamTokenizer as ConfigFile sets it up: bytes up to ' '
 * are blanks (a line ends at \n, \r or \r\n), "//" and a lone '/' comment
 * to the end of the line, slash-star comments end at star-slash, '"' and
 * '\'' quote (with Java's escapes), digits '.' and '-' start numbers, and
 * words are letters, bytes >= 0x80 and "$_-*" followed by those, digits
 * and '.'. The grammar: { NAME '{' { CLASS FLAG { KEY '=' VALUE } ';' }
 * '}' ';' }, where NAME, CLASS, FLAG, KEY and VALUE are words or
 * double-quoted strings. The first syntax error stops the parse, as the
 * JDK's IOException does; problems with users are all reported.
 */
#include "server/jaas.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define DIGEST_MODULE "org.apache.zookeeper.server.auth.DigestLoginModule"
#define USER_PREFIX "user_"
#define TOKEN_BYTES_MAX 65536

enum tok_kind { TOK_EOF, TOK_WORD, TOK_STRING, TOK_NUMBER, TOK_CHAR };

struct tok {
    enum tok_kind kind;
    char quote;  /* TOK_STRING: '"' or '\'' */
    char ch;     /* TOK_CHAR */
    char *text;  /* TOK_WORD, TOK_STRING, TOK_NUMBER: owned, NUL-terminated */
    size_t len;
    int line;
};

struct parse {
    const char *p, *end;
    int line;
    int last_line; /* of the last token read */
    const char *source, *section;
    config_report_fn fn;
    void *arg;
    int errors;
    struct tok look;
    struct jaas_users users;
    int section_line; /* where the wanted section began; 0: not seen */
    struct seen {     /* every section name, for duplicates */
        char *name;
        int line;
    } *seen;
    size_t nseen;
};

static void report(struct parse *ps, int line, int severity, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* "source:line: message" (just "source: " for line 0) to the callback. */
static void report(struct parse *ps, int line, int severity, const char *fmt, ...)
{
    char msg[CONFIG_MSG_MAX];
    int n = line > 0 ? snprintf(msg, sizeof msg, "%s:%d: ", ps->source, line)
                     : snprintf(msg, sizeof msg, "%s: ", ps->source);
    if (n < 0 || (size_t)n >= sizeof msg)
        n = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
    va_end(ap);
    if (severity != 0)
        ps->errors++;
    if (ps->fn)
        ps->fn(ps->arg, severity, msg);
}

/* ---- lexer ---------------------------------------------------------------- */

static bool is_digit_class(unsigned char c)
{
    return (c >= '0' && c <= '9') || c == '.' || c == '-';
}

static bool is_alpha_class(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80 || c == '$' ||
           c == '_' || c == '-' || c == '*';
}

static int peek_at(const struct parse *ps, size_t ahead)
{
    return ps->p + ahead < ps->end ? (unsigned char)ps->p[ahead] : -1;
}

/* Consumes one line end (\n, \r or \r\n) at p, counting it. */
static void take_eol(struct parse *ps)
{
    if (*ps->p++ == '\r' && ps->p < ps->end && *ps->p == '\n')
        ps->p++;
    ps->line++;
}

static void skip_to_eol(struct parse *ps)
{
    while (ps->p < ps->end && *ps->p != '\n' && *ps->p != '\r')
        ps->p++;
}

/* A slash-star comment from p. False when it never ends: StreamTokenizer
 * would read the rest of the file as comment. */
static bool skip_block_comment(struct parse *ps)
{
    int start = ps->line;
    ps->p += 2;
    while (ps->p < ps->end) {
        if (*ps->p == '*' && peek_at(ps, 1) == '/') {
            ps->p += 2;
            return true;
        }
        if (*ps->p == '\n' || *ps->p == '\r')
            take_eol(ps);
        else
            ps->p++;
    }
    report(ps, start, 1, "comment never closed (no */ after this /*)");
    return false;
}

/* Blanks, line ends and comments before the next token. */
static bool skip_blanks(struct parse *ps)
{
    while (ps->p < ps->end) {
        unsigned char c = (unsigned char)*ps->p;
        if (c == '\n' || c == '\r')
            take_eol(ps);
        else if (c <= ' ')
            ps->p++;
        else if (c == '/' && peek_at(ps, 1) == '*') {
            if (!skip_block_comment(ps))
                return false;
        } else if (c == '/')
            skip_to_eol(ps); /* "//", and a lone '/' (StreamTokenizer's comment char) */
        else
            return true;
    }
    return true;
}

/* Appends code point cp (< 0x100: an octal escape) as UTF-8, as a Java
 * char that is later encoded would be. */
static size_t put_cp(char *out, unsigned cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xc0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
}

/* One escape after a backslash inside a quoted string (StreamTokenizer's:
 * \a \b \f \n \r \t \v, up to three octal digits (\377 at most), any other
 * character stands for itself). Returns bytes written to out. */
static size_t take_escape(struct parse *ps, char *out)
{
    unsigned char c = (unsigned char)*ps->p++;
    if (c >= '0' && c <= '7') {
        unsigned v = c - '0';
        int digits = c <= '3' ? 3 : 2;
        for (int i = 1; i < digits && peek_at(ps, 0) >= '0' && peek_at(ps, 0) <= '7'; i++)
            v = v * 8 + (unsigned)(*ps->p++ - '0');
        return put_cp(out, v);
    }
    if (c == '\n' || c == '\r')
        ps->line++; /* an escaped line end goes into the string */
    static const char from[] = "abfnrtv", to[] = "\a\b\f\n\r\t\v";
    const char *k = c != '\0' ? strchr(from, c) : NULL;
    out[0] = k ? to[k - from] : (char)c;
    return 1;
}

/* A quoted string from p (at its quote). False when it does not end on
 * its line (the JDK would end it there silently) or is too long. */
static bool lex_string(struct parse *ps, struct tok *t, char *buf)
{
    char q = *ps->p++;
    size_t n = 0;
    t->kind = TOK_STRING;
    t->quote = q;
    while (ps->p < ps->end && *ps->p != q && *ps->p != '\n' && *ps->p != '\r') {
        if (n + 2 > TOKEN_BYTES_MAX) {
            report(ps, t->line, 1, "a quoted string longer than %d bytes", TOKEN_BYTES_MAX);
            return false;
        }
        if (*ps->p == '\\' && ps->p + 1 < ps->end) {
            ps->p++;
            n += take_escape(ps, buf + n);
        } else {
            buf[n++] = *ps->p++;
        }
    }
    if (ps->p >= ps->end || *ps->p != q) {
        report(ps, t->line, 1, "unterminated quoted string (close it with %c on its line)", q);
        return false;
    }
    ps->p++;
    t->len = n;
    return true;
}

/* A word, or what StreamTokenizer reads as a number: [-]digits[.digits]. */
static bool lex_word_or_number(struct parse *ps, struct tok *t, char *buf)
{
    const char *s = ps->p;
    if (is_digit_class((unsigned char)*s)) {
        t->kind = TOK_NUMBER;
        ps->p += *s == '-';
        bool dot = false;
        while (ps->p < ps->end && ((*ps->p >= '0' && *ps->p <= '9') || (*ps->p == '.' && !dot))) {
            dot = dot || *ps->p == '.';
            ps->p++;
        }
    } else {
        t->kind = TOK_WORD;
        while (ps->p < ps->end && (is_alpha_class((unsigned char)*ps->p) ||
                                   is_digit_class((unsigned char)*ps->p)))
            ps->p++;
    }
    t->len = (size_t)(ps->p - s);
    if (t->len >= TOKEN_BYTES_MAX) {
        report(ps, t->line, 1, "a word longer than %d bytes", TOKEN_BYTES_MAX - 1);
        return false;
    }
    memcpy(buf, s, t->len);
    return true;
}

/* Reads the next token into *t. False after reporting a lexical error or
 * running out of memory. */
static bool lex(struct parse *ps, struct tok *t)
{
    *t = (struct tok){ .kind = TOK_EOF, .line = ps->last_line };
    if (!skip_blanks(ps))
        return false;
    if (ps->p >= ps->end)
        return true; /* the end is reported at the last token's line */
    t->line = ps->last_line = ps->line;
    unsigned char c = (unsigned char)*ps->p;
    bool number = is_digit_class(c) && !(c == '-' && !(peek_at(ps, 1) == '.' ||
                                                      (peek_at(ps, 1) >= '0' && peek_at(ps, 1) <= '9')));
    if (c != '"' && c != '\'' && !number && (!is_alpha_class(c) || c == '-')) {
        t->kind = TOK_CHAR;
        t->ch = (char)c;
        ps->p++;
        return true;
    }
    char *buf = malloc(TOKEN_BYTES_MAX);
    if (!buf) {
        report(ps, t->line, 1, "out of memory");
        return false;
    }
    bool ok = c == '"' || c == '\'' ? lex_string(ps, t, buf) : lex_word_or_number(ps, t, buf);
    if (ok) {
        buf[t->len] = '\0';
        t->text = realloc(buf, t->len + 1);
        if (!t->text)
            t->text = buf;
    } else {
        free(buf);
    }
    return ok;
}

static void tok_free(struct tok *t)
{
    if (t->text)
        explicit_bzero(t->text, t->len); /* it may have been a password */
    free(t->text);
    t->text = NULL;
}

/* ---- parser ---------------------------------------------------------------- */

static bool advance(struct parse *ps)
{
    tok_free(&ps->look);
    return lex(ps, &ps->look);
}

/* How a token reads in a message. */
static void describe(const struct tok *t, char *out, size_t cap)
{
    switch (t->kind) {
    case TOK_EOF: snprintf(out, cap, "the end of the file"); break;
    case TOK_CHAR: snprintf(out, cap, "'%c'", t->ch); break;
    case TOK_NUMBER: snprintf(out, cap, "the number %.40s (quote it)", t->text); break;
    case TOK_STRING:
        snprintf(out, cap, t->quote == '"' ? "a quoted string" : "a 'single-quoted' string "
                                                                 "(use double quotes)");
        break;
    case TOK_WORD: snprintf(out, cap, "'%.60s'", t->text); break;
    }
}

static bool expected(struct parse *ps, const char *what)
{
    char found[96];
    describe(&ps->look, found, sizeof found);
    report(ps, ps->look.line, 1, "expected %s, found %s", what, found);
    return false;
}

/* Takes a word or double-quoted string (ConfigFile's match() of a name,
 * class, flag, key or value): *out owns it afterwards. */
static bool take_value(struct parse *ps, const char *what, struct tok *out)
{
    if (ps->look.kind != TOK_WORD && !(ps->look.kind == TOK_STRING && ps->look.quote == '"'))
        return expected(ps, what);
    *out = ps->look;
    ps->look.text = NULL;
    return lex(ps, &ps->look);
}

static bool take_char(struct parse *ps, char ch)
{
    char what[8];
    snprintf(what, sizeof what, "'%c'", ch);
    if (ps->look.kind != TOK_CHAR || ps->look.ch != ch)
        return expected(ps, what);
    return advance(ps);
}

static bool at_char(const struct parse *ps, char ch)
{
    return ps->look.kind == TOK_CHAR && ps->look.ch == ch;
}

/* Whether name is acceptable as a DIGEST-MD5 user larchd can serve;
 * reports why not. */
static bool user_name_ok(struct parse *ps, const char *name, size_t len, int line)
{
    if (len == 0)
        report(ps, line, 1, "user_ names no user (user_NAME=\"password\")");
    else if (len > JAAS_NAME_BYTES_MAX)
        report(ps, line, 1, "user name longer than %d bytes", JAAS_NAME_BYTES_MAX);
    else if (memchr(name, '\0', len))
        report(ps, line, 1, "user name contains a NUL character");
    else if ((unsigned char)name[0] <= ' ' || (unsigned char)name[len - 1] <= ' ')
        report(ps, line, 1, "user name '%s' begins or ends with a blank (SASL trims it: "
                            "no client could log in as it)", name);
    else if (strchr(name, '@'))
        report(ps, line, 1, "user name '%s' has a realm ('@'): ZooKeeper maps such names "
                            "through Kerberos name rules, which larchd does not have", name);
    else
        return true;
    return false;
}

static bool password_ok(struct parse *ps, const struct tok *v, const char *name)
{
    if (v->len == 0)
        report(ps, v->line, 1, "user '%s' has an empty password (DIGEST-MD5 in Cyrus SASL "
                               "refuses empty secrets)", name);
    else if (v->len > JAAS_PASSWORD_BYTES_MAX)
        report(ps, v->line, 1, "user '%s': password longer than %d bytes", name,
               JAAS_PASSWORD_BYTES_MAX);
    else if (memchr(v->text, '\0', v->len))
        report(ps, v->line, 1, "user '%s': password contains a NUL character", name);
    else if (strstr(v->text, "${"))
        report(ps, v->line, 1, "user '%s': larchd does not expand ${...} (a Java system "
                               "property) in passwords", name);
    else
        return true;
    return false;
}

static struct jaas_user *find_user(struct jaas_users *u, const char *name)
{
    for (size_t i = 0; i < u->count; i++)
        if (strcmp(u->items[i].name, name) == 0)
            return &u->items[i];
    return NULL;
}

static void user_free(struct jaas_user *u)
{
    if (u->password)
        explicit_bzero(u->password, strlen(u->password));
    free(u->password);
    free(u->name);
}

/* Adds (or, given again, replaces: ZooKeeper's credentials map keeps the
 * last) one user from a user_NAME option; takes the password text. */
static bool add_user(struct parse *ps, const struct tok *key, struct tok *value)
{
    const char *name = key->text + strlen(USER_PREFIX);
    size_t len = key->len - strlen(USER_PREFIX);
    if (!user_name_ok(ps, name, len, key->line) || !password_ok(ps, value, name))
        return true; /* reported; parsing goes on */
    struct jaas_user *old = find_user(&ps->users, name);
    if (old) {
        report(ps, key->line, 0, "user '%s' given again (line %d): this password replaces "
                                 "that one, as in ZooKeeper", name, old->line);
        explicit_bzero(old->password, strlen(old->password));
        free(old->password);
        old->password = value->text;
        old->line = key->line;
        value->text = NULL;
        return true;
    }
    if (ps->users.count == JAAS_USERS_MAX) {
        report(ps, key->line, 1, "more than %d users", JAAS_USERS_MAX);
        return true;
    }
    char *copy = strdup(name);
    struct jaas_user *items = realloc(ps->users.items, (ps->users.count + 1) * sizeof *items);
    if (!copy || !items) {
        free(copy);
        if (items)
            ps->users.items = items;
        report(ps, key->line, 1, "out of memory");
        return false;
    }
    ps->users.items = items;
    items[ps->users.count++] = (struct jaas_user){ copy, value->text, key->line };
    value->text = NULL;
    return true;
}

static bool flag_valid(const char *flag)
{
    static const char *const flags[] = { "required", "requisite", "sufficient", "optional" };
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (strcasecmp(flag, flags[i]) == 0)
            return true;
    return false;
}

/* KEY '=' VALUE; a user_ option of the wanted section's DigestLoginModule
 * becomes a user. */
static bool parse_option(struct parse *ps, bool digest_users)
{
    struct tok key = { 0 }, value = { 0 };
    bool ok = take_value(ps, "an option name", &key) && take_char(ps, '=') &&
              take_value(ps, "an option value (a word or a \"quoted\" string)", &value);
    if (ok && digest_users && strncmp(key.text, USER_PREFIX, strlen(USER_PREFIX)) == 0)
        ok = add_user(ps, &key, &value);
    tok_free(&key);
    tok_free(&value);
    return ok;
}

/* CLASS FLAG { option } ';' */
static bool parse_module(struct parse *ps, bool wanted)
{
    struct tok cls = { 0 }, flag = { 0 };
    bool ok = take_value(ps, "a login module class name", &cls) &&
              take_value(ps, "a control flag (required, requisite, sufficient, optional)", &flag);
    if (ok && !flag_valid(flag.text)) {
        report(ps, flag.line, 1, "'%.60s' is not a control flag (required, requisite, "
                                 "sufficient, optional)", flag.text);
        ok = false;
    }
    bool digest = ok && strcmp(cls.text, DIGEST_MODULE) == 0;
    if (ok && wanted && !digest)
        report(ps, cls.line, 0, "login module %.120s ignored: larchd serves SASL DIGEST-MD5 "
                                "from " DIGEST_MODULE " only (no Kerberos/GSSAPI)", cls.text);
    while (ok && !at_char(ps, ';'))
        ok = parse_option(ps, wanted && digest);
    tok_free(&cls);
    tok_free(&flag);
    return ok && advance(ps);
}

/* Records a section name; a second section of one name is the JDK's
 * "Can not specify multiple entries for appName". */
static bool note_section(struct parse *ps, struct tok *name)
{
    for (size_t i = 0; i < ps->nseen; i++) {
        if (strcmp(ps->seen[i].name, name->text) == 0) {
            report(ps, name->line, 1, "section '%.60s' given twice (first on line %d)",
                   name->text, ps->seen[i].line);
            return false;
        }
    }
    struct seen *s = realloc(ps->seen, (ps->nseen + 1) * sizeof *s);
    if (!s) {
        report(ps, name->line, 1, "out of memory");
        return false;
    }
    ps->seen = s;
    s[ps->nseen++] = (struct seen){ name->text, name->line };
    name->text = NULL;
    return true;
}

/* NAME '{' { module } '}' ';' */
static bool parse_section(struct parse *ps)
{
    struct tok name = { 0 };
    if (!take_value(ps, "a section name (a login context such as Server)", &name))
        return false;
    bool wanted = strcmp(name.text, ps->section) == 0;
    if (wanted)
        ps->section_line = name.line;
    bool ok = note_section(ps, &name) && take_char(ps, '{');
    tok_free(&name);
    while (ok && !at_char(ps, '}'))
        ok = parse_module(ps, wanted);
    return ok && take_char(ps, '}') && take_char(ps, ';');
}

void jaas_users_free(struct jaas_users *u)
{
    for (size_t i = 0; i < u->count; i++)
        user_free(&u->items[i]);
    free(u->items);
    u->items = NULL;
    u->count = 0;
}

static void parse_free(struct parse *ps)
{
    tok_free(&ps->look);
    for (size_t i = 0; i < ps->nseen; i++)
        free(ps->seen[i].name);
    free(ps->seen);
}

int jaas_parse(const char *text, size_t len, const char *source, const char *section,
               struct jaas_users *out, config_report_fn fn, void *arg)
{
    struct parse ps = { .p = text, .end = text + len, .line = 1, .last_line = 1, .source = source,
                        .section = section, .fn = fn, .arg = arg };
    *out = (struct jaas_users){ 0 };
    bool ok = lex(&ps, &ps.look);
    while (ok && ps.look.kind != TOK_EOF)
        ok = parse_section(&ps);
    if (ok && ps.section_line == 0)
        report(&ps, 0, 1, "no section '%s' (the login context whose DigestLoginModule "
                          "lists the users)", section);
    else if (ok && ps.users.count == 0 && ps.errors == 0)
        report(&ps, ps.section_line, 1, "section '%s' has no " DIGEST_MODULE
                                        " user_NAME=\"password\" option: no one could log in",
               section);
    parse_free(&ps);
    if (ps.errors > 0 || !ok) {
        jaas_users_free(&ps.users);
        return -1;
    }
    *out = ps.users;
    return 0;
}

int jaas_load(const char *path, const char *section, struct jaas_users *out,
              config_report_fn fn, void *arg)
{
    struct parse at = { .source = path, .fn = fn, .arg = arg };
    *out = (struct jaas_users){ 0 };
    FILE *f = fopen(path, "rb");
    if (!f) {
        report(&at, 0, 1, "cannot open the JAAS file: %s", strerror(errno));
        return -1;
    }
    char *buf = malloc(JAAS_FILE_BYTES_MAX + 1);
    size_t n = buf ? fread(buf, 1, JAAS_FILE_BYTES_MAX + 1, f) : 0;
    int rc = -1;
    if (!buf)
        report(&at, 0, 1, "out of memory");
    else if (ferror(f))
        report(&at, 0, 1, "cannot read the JAAS file: %s", strerror(errno));
    else if (n > JAAS_FILE_BYTES_MAX)
        report(&at, 0, 1, "larger than %d bytes: not a JAAS file?", JAAS_FILE_BYTES_MAX);
    else
        rc = jaas_parse(buf, n, path, section, out, fn, arg);
    if (buf) {
        explicit_bzero(buf, n);
        free(buf);
    }
    fclose(f);
    return rc;
}
