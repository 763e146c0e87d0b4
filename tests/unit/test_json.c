/*
 * test_json — json/json.c: string escaping per RFC 8259 (quotes,
 * backslashes, every control character, bytes that are not UTF-8, the
 * characters that end a line), numbers at their limits, doubles that read
 * back, base64 values, and both layouts of nested objects and arrays.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json/json.h"

typedef void write_fn(struct json *j, const void *arg);

/* One top-level value written by fn in layout, as text (the caller frees). */
static char *write_value_in(enum json_layout layout, write_fn *fn, const void *arg)
{
    struct zk_wbuf out;
    struct json j;
    zk_wbuf_init(&out);
    json_init(&j, &out, layout);
    fn(&j, arg);
    assert_true(json_complete(&j));
    assert_false(out.err);
    char *s = malloc(out.len + 1);
    assert_non_null(s);
    memcpy(s, out.p, out.len);
    s[out.len] = '\0';
    zk_wbuf_free(&out);
    return s;
}

static char *write_value(write_fn *fn, const void *arg)
{
    return write_value_in(JSON_PRETTY, fn, arg);
}

struct bytes {
    const char *p;
    size_t len;
};

static void write_string(struct json *j, const void *arg)
{
    const struct bytes *b = arg;
    json_string_n(j, b->p, b->len);
}

static void assert_escapes(const char *in, size_t len, const char *want)
{
    struct bytes b = { in, len };
    char *got = write_value(write_string, &b);
    if (strcmp(got, want) != 0)
        fail_msg("escaping %zu bytes: got %s, want %s", len, got, want);
    free(got);
}

#define ESCAPES(lit, want) assert_escapes(lit, sizeof(lit) - 1, want)

static void test_escapes_quotes_backslashes_and_controls(void **state)
{
    (void)state;
    ESCAPES("", "\"\"");
    ESCAPES("/zookeeper/quota", "\"/zookeeper/quota\""); /* '/' needs no escape */
    ESCAPES("a\"b\\c", "\"a\\\"b\\\\c\"");
    ESCAPES("\b\f\n\r\t", "\"\\b\\f\\n\\r\\t\"");
    ESCAPES("\x01\x1f\x7f", "\"\\u0001\\u001f\x7f\""); /* DEL is not a control in JSON */
    ESCAPES("a\0b", "\"a\\u0000b\"");                    /* a NUL inside, with its length */
    /* every control character is escaped, and nothing else below 0x80 is */
    for (int c = 0; c < 0x80; c++) {
        char in = (char)c, want[16];
        if (c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' ||
            c == '\t')
            continue;
        if (c < 0x20)
            snprintf(want, sizeof want, "\"\\u%04x\"", c);
        else
            snprintf(want, sizeof want, "\"%c\"", c);
        assert_escapes(&in, 1, want);
    }
}

static void test_utf8_passes_and_bad_bytes_become_replacement(void **state)
{
    (void)state;
    /* well formed: two, three and four bytes, the largest code point */
    ESCAPES("/caf\xc3\xa9/\xe2\x82\xac/\xf0\x9f\x8c\xb2/\xf4\x8f\xbf\xbf",
            "\"/caf\xc3\xa9/\xe2\x82\xac/\xf0\x9f\x8c\xb2/\xf4\x8f\xbf\xbf\"");
    /* a lone continuation byte, a lead byte at the end, one cut short */
    ESCAPES("a\x80z", "\"a\\ufffdz\"");
    ESCAPES("a\xc3", "\"a\\ufffd\"");
    ESCAPES("\xe2\x82z", "\"\\ufffd\\ufffdz\"");
    /* overlong '/', a UTF-16 surrogate, above U+10FFFF, bytes never used */
    ESCAPES("\xc0\xaf", "\"\\ufffd\\ufffd\"");
    ESCAPES("\xe0\x80\xaf", "\"\\ufffd\\ufffd\\ufffd\"");
    ESCAPES("\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"");
    ESCAPES("\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");
    ESCAPES("\xfe\xff", "\"\\ufffd\\ufffd\"");
    /* a quote right after a bad byte is still escaped */
    ESCAPES("\x80\"", "\"\\ufffd\\\"\"");
}

/* C1 controls and U+2028/U+2029 end a line for some readers: escaped, a
 * document stays on its lines; their neighbours go out raw. */
static void test_line_breaking_characters_are_escaped(void **state)
{
    (void)state;
    ESCAPES("\xc2\x80|\xc2\x85|\xc2\x9f", "\"\\u0080|\\u0085|\\u009f\"");
    ESCAPES("\xe2\x80\xa8\xe2\x80\xa9", "\"\\u2028\\u2029\"");
    ESCAPES("\xc2\xa0\xe2\x80\xa7\xe2\x80\xaa", "\"\xc2\xa0\xe2\x80\xa7\xe2\x80\xaa\"");
}

static void write_base64(struct json *j, const void *arg)
{
    (void)arg;
    json_array_begin(j);
    json_base64(j, "", 0);
    json_base64(j, "foob", 4);
    json_base64(j, "\xff\xfe\xfd", 3);
    json_array_end(j);
}

static void test_base64_values(void **state)
{
    (void)state;
    char *got = write_value(write_base64, NULL);
    assert_string_equal(got, "[ \"\", \"Zm9vYg==\", \"//79\" ]");
    free(got);
}

static void write_numbers(struct json *j, const void *arg)
{
    (void)arg;
    json_array_begin(j);
    json_int(j, INT64_MIN);
    json_int(j, INT64_MAX);
    json_uint(j, UINT64_MAX);
    json_int(j, -1);
    json_double(j, 0.0);
    json_double(j, 9.5714);
    json_double(j, 0.1);
    json_double(j, -2.5e-7);
    json_double(j, 1e300);
    json_double(j, 12.0);
    json_array_end(j);
}

static void test_numbers(void **state)
{
    (void)state;
    char *got = write_value(write_numbers, NULL);
    assert_string_equal(got, "[ -9223372036854775808, 9223372036854775807, "
                             "18446744073709551615, -1, 0.0, 9.5714, 0.1, -2.5e-07, 1e+300, "
                             "12.0 ]");
    free(got);
}

static void test_doubles_read_back(void **state)
{
    (void)state;
    const double v[] = { 1.0 / 3, 2.0 / 3, 0.1 + 0.2, 1e-320, 1.7976931348623157e308, -0.0 };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        struct zk_wbuf out;
        struct json j;
        zk_wbuf_init(&out);
        json_init(&j, &out, JSON_PRETTY);
        json_double(&j, v[i]);
        zk_wbuf_printf(&out, "%s", ""); /* the NUL after the text */
        assert_false(out.err);
        assert_true(strtod((char *)out.p, NULL) == v[i]);
        zk_wbuf_free(&out);
    }
}

static void write_not_numbers(struct json *j, const void *arg)
{
    (void)arg;
    json_array_begin(j);
    json_double(j, NAN);
    json_double(j, INFINITY);
    json_double(j, -INFINITY);
    json_bool(j, true);
    json_bool(j, false);
    json_null(j);
    json_array_end(j);
}

static void test_non_finite_doubles_are_null(void **state)
{
    (void)state;
    char *got = write_value(write_not_numbers, NULL);
    assert_string_equal(got, "[ null, null, null, true, false, null ]");
    free(got);
}

/* A ZooKeeper-shaped answer: members, an empty object and array, an
 * array of objects, a key that needs escaping. */
static void write_nested(struct json *j, const void *arg)
{
    (void)arg;
    json_object_begin(j);
    json_key(j, "connections");
    json_array_begin(j);
    json_object_begin(j);
    json_key(j, "session_id");
    json_int(j, 72062696427159552);
    json_key(j, "paths");
    json_array_begin(j);
    json_string(j, "/a");
    json_string(j, "/b");
    json_array_end(j);
    json_object_end(j);
    json_object_begin(j);
    json_object_end(j);
    json_array_end(j);
    json_key(j, "secure_connections");
    json_array_begin(j);
    json_array_end(j);
    json_key(j, "a\"key");
    json_object_begin(j);
    json_object_end(j);
    json_key(j, "error");
    json_null(j);
    json_object_end(j);
}

static void test_nesting_layout(void **state)
{
    (void)state;
    char *got = write_value(write_nested, NULL);
    assert_string_equal(got, "{\n"
                             "  \"connections\" : [ {\n"
                             "    \"session_id\" : 72062696427159552,\n"
                             "    \"paths\" : [ \"/a\", \"/b\" ]\n"
                             "  }, { } ],\n"
                             "  \"secure_connections\" : [ ],\n"
                             "  \"a\\\"key\" : { },\n"
                             "  \"error\" : null\n"
                             "}");
    free(got);
}

/* The same document on one line, without a byte of whitespace. */
static void test_compact_layout(void **state)
{
    (void)state;
    char *got = write_value_in(JSON_COMPACT, write_nested, NULL);
    assert_string_equal(got, "{\"connections\":[{\"session_id\":72062696427159552,"
                             "\"paths\":[\"/a\",\"/b\"]},{}],\"secure_connections\":[],"
                             "\"a\\\"key\":{},\"error\":null}");
    free(got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escapes_quotes_backslashes_and_controls),
        cmocka_unit_test(test_utf8_passes_and_bad_bytes_become_replacement),
        cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_doubles_read_back),
        cmocka_unit_test(test_non_finite_doubles_are_null),
        cmocka_unit_test(test_nesting_layout),
        cmocka_unit_test(test_line_breaking_characters_are_escaped),
        cmocka_unit_test(test_base64_values),
        cmocka_unit_test(test_compact_layout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
