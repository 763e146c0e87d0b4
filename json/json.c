/*
 * json.c — the JSON writer (json.h).
 */
#include "json/json.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INDENT "  " /* Jackson's DefaultPrettyPrinter: two spaces a level */

void json_init(struct json *j, struct zk_wbuf *out, enum json_layout layout)
{
    memset(j, 0, sizeof *j);
    j->out = out;
    j->layout = layout;
}

bool json_complete(const struct json *j)
{
    return j->depth == 0 && !j->key_pending;
}

static void put(struct json *j, const char *s, size_t len)
{
    zk_put_raw(j->out, s, len);
}

static void put_str(struct json *j, const char *s)
{
    put(j, s, strlen(s));
}

static bool pretty(const struct json *j)
{
    return j->layout == JSON_PRETTY;
}

/* A new line indented by the objects open: Jackson's arrays are inline
 * and add no indentation. Nothing in the compact layout. */
static void newline(struct json *j)
{
    if (!pretty(j))
        return;
    put(j, "\n", 1);
    for (int i = 0; i < j->depth; i++)
        if (j->in_object[i])
            put_str(j, INDENT);
}

/* What goes before a value: the separator from the previous element of
 * an array (a member's separator went out with its key). */
static void before_value(struct json *j)
{
    if (j->depth == 0)
        return;
    int d = j->depth - 1;
    if (j->in_object[d]) {
        assert(j->key_pending && "a member's value needs json_key first");
        j->key_pending = false;
        return;
    }
    if (pretty(j))
        put_str(j, j->has_members[d] ? ", " : " ");
    else if (j->has_members[d])
        put_str(j, ",");
    j->has_members[d] = true;
}

static void begin(struct json *j, bool object)
{
    before_value(j);
    assert(j->depth < JSON_DEPTH_MAX && "JSON nested deeper than JSON_DEPTH_MAX");
    if (j->depth >= JSON_DEPTH_MAX) {
        j->out->err = true; /* release builds: refuse the document */
        return;
    }
    put_str(j, object ? "{" : "[");
    j->in_object[j->depth] = object;
    j->has_members[j->depth] = false;
    j->depth++;
}

static void end(struct json *j, bool object)
{
    assert(j->depth > 0 && j->in_object[j->depth - 1] == object && !j->key_pending);
    if (j->depth == 0 || j->in_object[j->depth - 1] != object) {
        j->out->err = true;
        return;
    }
    j->depth--;
    bool members = j->has_members[j->depth];
    if (object && members)
        newline(j);
    else if (pretty(j))
        put_str(j, " "); /* "{ }", "[ ]", "[ 1, 2 ]" */
    put_str(j, object ? "}" : "]");
}

void json_object_begin(struct json *j)
{
    begin(j, true);
}

void json_object_end(struct json *j)
{
    end(j, true);
}

void json_array_begin(struct json *j)
{
    begin(j, false);
}

void json_array_end(struct json *j)
{
    end(j, false);
}

/* C1 controls (NEL among them) and U+2028/U+2029 are legal raw in JSON but
 * end a line for many readers (JavaScript, Python's splitlines). */
static bool line_breaking(uint32_t cp)
{
    return (cp >= 0x80 && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029;
}

/* Writes the escape for the character cp that cannot go out raw. */
static void put_escape(struct json *j, uint32_t cp)
{
    static const char hex[] = "0123456789abcdef";
    switch (cp) {
    case '"': put_str(j, "\\\""); return;
    case '\\': put_str(j, "\\\\"); return;
    case '\b': put_str(j, "\\b"); return;
    case '\f': put_str(j, "\\f"); return;
    case '\n': put_str(j, "\\n"); return;
    case '\r': put_str(j, "\\r"); return;
    case '\t': put_str(j, "\\t"); return;
    default: break;
    }
    char u[6] = { '\\', 'u', hex[cp >> 12 & 0xf], hex[cp >> 8 & 0xf], hex[cp >> 4 & 0xf],
                  hex[cp & 0xf] };
    put(j, u, sizeof u);
}

/* s[0, len) as a JSON string, quotes included: runs of characters that
 * need no escape are copied whole. */
static void put_quoted(struct json *j, const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    put(j, "\"", 1);
    size_t run = 0; /* bytes that go out as they are, not yet written */
    for (size_t i = 0; i < len;) {
        uint32_t cp = 0xfffd; /* for a byte that is not UTF-8 */
        size_t n = base_utf8_decode(p + i, len - i, &cp);
        if (n != 0 && cp >= 0x20 && cp != '"' && cp != '\\' && !line_breaking(cp)) {
            run += n;
            i += n;
            continue;
        }
        put(j, s + i - run, run);
        run = 0;
        i += n != 0 ? n : 1;
        put_escape(j, cp);
    }
    put(j, s + len - run, run);
    put(j, "\"", 1);
}

void json_key(struct json *j, const char *key)
{
    assert(j->depth > 0 && j->in_object[j->depth - 1] && !j->key_pending);
    int d = j->depth - 1;
    if (j->has_members[d])
        put(j, ",", 1);
    newline(j);
    put_quoted(j, key, strlen(key));
    put_str(j, pretty(j) ? " : " : ":");
    j->has_members[d] = true;
    j->key_pending = true;
}

void json_string(struct json *j, const char *s)
{
    json_string_n(j, s, strlen(s));
}

void json_string_n(struct json *j, const char *s, size_t len)
{
    before_value(j);
    put_quoted(j, s, len);
}

void json_base64(struct json *j, const void *bytes, size_t len)
{
    before_value(j);
    put(j, "\"", 1);
    if (len > (SIZE_MAX - 8) / 4 * 3)
        j->out->err = true; /* BASE_BASE64_LEN would overflow */
    else if (zk_wbuf_reserve(j->out, BASE_BASE64_LEN(len) + 1)) /* + base64's NUL */
        j->out->len += base_base64_encode((char *)j->out->p + j->out->len, bytes, len);
    put(j, "\"", 1);
}

void json_int(struct json *j, int64_t v)
{
    before_value(j);
    zk_wbuf_printf(j->out, "%" PRId64, v);
}

void json_uint(struct json *j, uint64_t v)
{
    before_value(j);
    zk_wbuf_printf(j->out, "%" PRIu64, v);
}

void json_double(struct json *j, double v)
{
    before_value(j);
    if (!isfinite(v)) {
        put_str(j, "null");
        return;
    }
    char buf[32];
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, v);
        if (strtod(buf, NULL) == v)
            break; /* 17 significant digits always read back (IEEE 754 binary64) */
    }
    put_str(j, buf);
    if (strpbrk(buf, ".e") == NULL)
        put_str(j, ".0");
}

void json_bool(struct json *j, bool v)
{
    before_value(j);
    put_str(j, v ? "true" : "false");
}

void json_null(struct json *j)
{
    before_value(j);
    put_str(j, "null");
}
