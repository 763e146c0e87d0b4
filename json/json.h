/*
 * json — the one JSON writer (RFC 8259): objects, arrays, strings,
 * integers, doubles, booleans and null, appended to a zk_wbuf as they are
 * written, in one of two layouts. JSON_PRETTY indents as Jackson's default
 * pretty printer indents ZooKeeper's (objects one member a line, arrays on
 * one line), so a person reading the AdminServer's answers with curl sees
 * ZooKeeper's layout; JSON_COMPACT writes no whitespace at all, the one
 * line per reply that larch-cli --json prints for line-based readers.
 *
 * Strings are escaped per RFC 8259 section 7: '"', '\\' and the control
 * characters U+0000..U+001F, the latter as \b \f \n \r \t or \u00XX. JSON
 * text is UTF-8 (section 8.1), and znode paths and data are bytes a client
 * chose: each byte that does not start a well-formed UTF-8 sequence
 * (base_utf8_decode: overlong forms, surrogates and code points above
 * U+10FFFF are not well formed) becomes \ufffd, as Java's decoder makes it
 * U+FFFD when ZooKeeper reads a path. The C1 controls (NEL among them) and
 * U+2028/U+2029 are legal raw but end a line for many readers (JavaScript,
 * Python's splitlines), so they go out as \u escapes too: a compact
 * document is always exactly one line. Every escape decodes to the string
 * as written, so a JSON reader sees the same text either way.
 *
 * The caller pairs every begin with its end and, inside an object, writes
 * json_key before each value; a mistake (a value without a key, an end
 * that closes nothing, nesting past JSON_DEPTH_MAX) is a bug of the
 * caller and asserts. Out of memory is the zk_wbuf's err flag, checked
 * once at the end. Not thread-safe: one writer per document, on one thread.
 */
#ifndef LARCH_JSON_JSON_H
#define LARCH_JSON_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/proto.h"

#define JSON_DEPTH_MAX 16 /* the AdminServer's deepest answer nests 4, the CLI's 3 */

enum json_layout {
    JSON_PRETTY,  /* Jackson's DefaultPrettyPrinter: the AdminServer */
    JSON_COMPACT, /* no whitespace: larch-cli --json */
};

struct json {
    struct zk_wbuf *out;
    enum json_layout layout;
    int depth;                          /* containers open */
    bool in_object[JSON_DEPTH_MAX];     /* per level: object (else array) */
    bool has_members[JSON_DEPTH_MAX];   /* per level: something written */
    bool key_pending;                   /* json_key written, its value not yet */
};

/* Starts a document written to out (the caller's; appended to) in layout. */
void json_init(struct json *j, struct zk_wbuf *out, enum json_layout layout);
/* True when every container opened was closed (a whole document). */
bool json_complete(const struct json *j);

void json_object_begin(struct json *j);
void json_object_end(struct json *j);
void json_array_begin(struct json *j);
void json_array_end(struct json *j);
/* The member name of the next value (inside an object only), escaped as a
 * string is. */
void json_key(struct json *j, const char *key);

/* Values: at the top level, as an array element, or after json_key. */
void json_string(struct json *j, const char *s);            /* NUL-terminated */
void json_string_n(struct json *j, const char *s, size_t len); /* may hold NULs */
/* len bytes as a string of their base64 (RFC 4648 section 4, padded). */
void json_base64(struct json *j, const void *bytes, size_t len);
void json_int(struct json *j, int64_t v);
void json_uint(struct json *j, uint64_t v);
/* The shortest decimal that reads back as v, with ".0" when it would
 * otherwise read as an integer (as Java prints a double); NaN and the
 * infinities, which JSON cannot write, are null. */
void json_double(struct json *j, double v);
void json_bool(struct json *j, bool v);
void json_null(struct json *j);

#endif /* LARCH_JSON_JSON_H */
