/*
 * path.c — znode path validation with ZooKeeper's PathUtils.validatePath
 * rules, applied to the UTF-8 bytes a client sent.
 *
 * ZooKeeper checks UTF-16 chars of a Java String decoded from those bytes.
 * Two consequences shape the code below:
 *  - Malformed UTF-8 decodes to U+FFFD, which lies in the banned
 *    U+FFF0..U+FFFF range, so any malformed sequence is rejected.
 *  - Code points above U+FFFF become surrogate pairs (U+D800..U+DFFF), which
 *    lie in the banned U+D800..U+F8FF range, so every 4-byte sequence is
 *    rejected too: codepoint_banned's cp >= 0xFFF0 covers them.
 * So the check is base's well-formedness (base_utf8_decode) plus the banned
 * code points.
 * Pure function, any thread; larchd checks client paths with it and
 * liblarch checks them before they leave the client.
 */
#include <string.h>

#include "proto/proto.h"

/* The characters validatePath refuses: NUL and C0 controls, DEL and the C1
 * controls, surrogates and the private use area, and U+FFF0..U+FFFF. */
static bool codepoint_banned(uint32_t cp)
{
    return cp <= 0x1F || (cp >= 0x7F && cp <= 0x9F) || (cp >= 0xD800 && cp <= 0xF8FF) ||
           cp >= 0xFFF0;
}

/* True when the segment s[0..n) is "." or "..": relative paths are refused. */
static bool segment_is_relative(const char *s, size_t n)
{
    return (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.');
}

/* Walks the segments after the leading '/': none may be empty, "." or "..".
 * The caller has excluded "/" and a trailing '/'. */
static bool segments_valid(const char *path, size_t len)
{
    size_t start = 1;
    for (size_t i = 1; i <= len; i++) {
        if (i < len && path[i] != '/')
            continue;
        size_t seg_len = i - start;
        if (seg_len == 0 || segment_is_relative(path + start, seg_len))
            return false;
        start = i + 1;
    }
    return true;
}

static bool characters_valid(const char *path, size_t len)
{
    const uint8_t *p = (const uint8_t *)path;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t n = base_utf8_decode(p + i, len - i, &cp);
        if (n == 0 || codepoint_banned(cp))
            return false;
        i += n;
    }
    return true;
}

int zk_path_validate(const char *path, size_t len)
{
    if (path == NULL || len == 0 || path[0] != '/')
        return ZK_EBADARGUMENTS;
    if (len == 1)
        return ZK_OK;
    if (path[len - 1] == '/' || !segments_valid(path, len) || !characters_valid(path, len))
        return ZK_EBADARGUMENTS;
    return ZK_OK;
}
