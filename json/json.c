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

void json_init(struct json *j, struct zk_wbuf *out)
{
    memset(j, 0, sizeof *j);
    j->out = out;
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

/* A new line indented by the objects open: Jackson's arrays are inline
 * and add no indentation. */
static void newline(struct json *j)
{
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
    put_str(j, j->has_members[d] ? ", " : " ");
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
    else
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

/* s[0, len) as a JSON string, quotes included. */
static void put_quoted(struct json *j, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    put(j, "\"", 1);
    size_t run = 0; /* bytes that go out as they are, not yet written */
    for (size_t i = 0; i < len;) {
        unsigned char c = p[i];
        size_t n = base_utf8_decode(p + i, len - i, NULL);
        if (n != 0 && c >= 0x20 && c != '"' && c != '\\') {
            run += n;
            i += n;
            continue;
        }
        put(j, s + i - run, run);
        run = 0;
        i++;
        switch (c) {
        case '"': put_str(j, "\\\""); break;
        case '\\': put_str(j, "\\\\"); break;
        case '\b': put_str(j, "\\b"); break;
        case '\f': put_str(j, "\\f"); break;
        case '\n': put_str(j, "\\n"); break;
        case '\r': put_str(j, "\\r"); break;
        case '\t': put_str(j, "\\t"); break;
        default:
            if (c < 0x20) {
                char u[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 0xf] };
                put(j, u, sizeof u);
            } else {
                put_str(j, "\xef\xbf\xbd"); /* U+FFFD for a byte that is not UTF-8 */
            }
        }
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
    put_str(j, " : ");
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
