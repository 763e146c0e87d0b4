/*
 * fuzz_config — zoo.cfg text through server/config.h: config_parse_text,
 * config_finish, config_format.
 *
 * Properties: every report is a non-empty, NUL-terminated message shorter
 * than CONFIG_MSG_MAX with a text after its prefix; the parser's prefix is
 * "zoo.cfg:N: " with N a physical line of the input, config_finish's
 * "larchd: " (or, for a rule about one server.N line, that line's
 * "zoo.cfg:N: server.N: "). A -1 comes with at least one error report, a 0 with none.
 * String fields stay NUL-terminated; a finished config obeys the rules
 * config_finish checks. config_format writes, into a buffer of any size, a
 * NUL-terminated prefix of the full text and never past cap (exact-size heap
 * buffers, so ASan sees one byte too many). When no string value holds a
 * character Properties syntax would reinterpret, the formatted text parses
 * back to a config that formats identically (the "conf" 4lw is re-readable).
 */
#include "server/config.h"
#include "tests/fuzz/fuzz.h"

#define FORMAT_MAX 65536

struct seen {
    const char *prefix; /* "zoo.cfg:" (then a line number) or "larchd: " */
    long lines;         /* physical lines of the text */
    int errors;
    bool at_server_lines; /* config_finish: a server.N rule names the line */
};

static void on_report(void *arg, int severity, const char *msg)
{
    struct seen *s = arg;
    size_t n = strnlen(msg, CONFIG_MSG_MAX);
    BASE_ASSERT((severity == 0 || severity == 1) && n > 0 && n < CONFIG_MSG_MAX);
    size_t plen = strlen(s->prefix);
    bool at_line = s->lines > 0;
    if (s->at_server_lines && strncmp(msg, "zoo.cfg:", 8) == 0) {
        plen = 8;
        at_line = true;
        BASE_ASSERT(strstr(msg, ": server.") != NULL);
    } else {
        BASE_ASSERT(strncmp(msg, s->prefix, plen) == 0);
    }
    const char *rest = msg + plen;
    if (at_line) {
        char *end;
        long line = strtol(rest, &end, 10);
        BASE_ASSERT(end != rest && line >= 1 && strncmp(end, ": ", 2) == 0);
        BASE_ASSERT(s->lines == 0 || line <= s->lines);
        rest = end + 2;
    }
    BASE_ASSERT(*rest != '\0' || n == CONFIG_MSG_MAX - 1);
    s->errors += severity;
}

/* Lines as config.c counts them: \n, \r and \r\n each end one. */
static long physical_lines(const char *t, size_t len)
{
    long lines = 1;
    for (size_t i = 0; i < len; i++)
        if (t[i] == '\n' || (t[i] == '\r' && (i + 1 == len || t[i + 1] != '\n')))
            lines++;
    return lines;
}

/* True when s (NUL-terminated within cap) reads back unchanged as a
 * Properties value: no escape, no line break, nothing Java's trim drops. */
static bool plain(const char *s, size_t cap)
{
    size_t n = strnlen(s, cap);
    BASE_ASSERT(n < cap);
    if (n > 0 && ((unsigned char)s[0] <= ' ' || (unsigned char)s[n - 1] <= ' '))
        return false;
    return strpbrk(s, "\\\n\r") == NULL;
}

/* Checks that every string field is terminated (each is visited); true
 * when all the formatted ones are plain. The super digest is never formatted. */
static bool strings_plain(const struct config *c)
{
    (void)plain(c->super_digest, sizeof c->super_digest);
    bool ok = plain(c->data_dir, sizeof c->data_dir);
    ok = plain(c->data_log_dir, sizeof c->data_log_dir) && ok;
    ok = plain(c->client_port_address, sizeof c->client_port_address) && ok;
    for (uint32_t i = 0; i < c->n_servers; i++) {
        ok = plain(c->servers[i].host, sizeof c->servers[i].host) && ok;
        ok = plain(c->servers[i].client_address, sizeof c->servers[i].client_address) && ok;
    }
    return plain(c->four_letter_words, sizeof c->four_letter_words) && ok;
}

static void check_format(const struct config *c, char *full, size_t *full_len)
{
    *full_len = config_format(c, full, FORMAT_MAX);
    BASE_ASSERT(*full_len < FORMAT_MAX - 1 && strlen(full) == *full_len);
    const size_t caps[] = { 0, 1, 2, *full_len / 2, *full_len, *full_len + 1 };
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        char *buf = caps[i] > 0 ? malloc(caps[i]) : NULL;
        BASE_ASSERT(caps[i] == 0 || buf != NULL);
        size_t n = config_format(c, buf, caps[i]);
        BASE_ASSERT(caps[i] == 0 ? n == 0 : n < caps[i] && buf[n] == '\0');
        BASE_ASSERT(n == 0 || memcmp(buf, full, n) == 0);
        BASE_ASSERT(caps[i] <= *full_len || n == *full_len);
        free(buf);
    }
}

static void check_finished(const struct config *c)
{
    BASE_ASSERT(c->min_session_timeout_ms > 0 &&
               c->min_session_timeout_ms <= c->max_session_timeout_ms);
    BASE_ASSERT(c->client_port >= 1 && c->client_port <= 65535);
    BASE_ASSERT(c->workers >= 1 && c->workers <= 64 && c->client_port_address[0] != '\0');
}

/* Parses text into a default config and finishes it; returns 0 or -1. */
static int load(struct config *c, const char *text, size_t len, bool checked)
{
    struct seen s = { .prefix = "zoo.cfg:", .lines = physical_lines(text, len) };
    config_defaults(c);
    int rc = config_parse_text(c, text, len, NULL, checked ? on_report : NULL, &s);
    BASE_ASSERT(!checked || rc == (s.errors > 0 ? -1 : 0));
    (void)strings_plain(c); /* every string field NUL-terminated */
    s = (struct seen){ .prefix = "larchd: ", .at_server_lines = true };
    int frc = config_finish(c, checked ? on_report : NULL, &s);
    BASE_ASSERT(!checked || frc == (s.errors > 0 ? -1 : 0));
    return rc == 0 && frc == 0 ? 0 : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char full[FORMAT_MAX], again[FORMAT_MAX];
    static struct config c, c2;
    char *text = (char *)fuzz_dup(data, size);
    int rc = load(&c, text, size, true);
    BASE_ASSERT(load(&c2, text, size, false) == rc); /* the callback changes nothing */
    size_t n, n2;
    check_format(&c, full, &n);
    if (rc == 0) {
        check_finished(&c);
        if (strings_plain(&c)) {
            BASE_ASSERT(load(&c2, full, n, true) == 0);
            check_format(&c2, again, &n2);
            BASE_ASSERT(n2 == n && memcmp(full, again, n) == 0);
        }
    }
    free(text);
    return 0;
}
