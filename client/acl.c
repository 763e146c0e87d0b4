/*
 * acl.c — liblarch's pure helpers: ACL lists (ZooDefs.Ids, zkCli's ACL and
 * permission syntax, digest ids), string lists and sequence suffixes, path
 * checks, error names. No handle, no I/O; any thread.
 */
#include <stdlib.h>
#include <string.h>

#include "client/lc_int.h"

static struct larch_acl open_items[] = { { ZK_PERM_ALL, (char *)"world", (char *)"anyone" } };
static struct larch_acl read_items[] = { { ZK_PERM_READ, (char *)"world", (char *)"anyone" } };
static struct larch_acl creator_items[] = { { ZK_PERM_ALL, (char *)"auth", (char *)"" } };
const struct larch_acl_list LARCH_OPEN_ACL_UNSAFE = { 1, open_items };
const struct larch_acl_list LARCH_READ_ACL_UNSAFE = { 1, read_items };
const struct larch_acl_list LARCH_CREATOR_ALL_ACL = { 1, creator_items };

/* ---- digest ids and permissions ------------------------------------------- */

int larch_digest_id(const char *cred, char *out, size_t cap)
{
    const char *colon = cred != NULL ? strchr(cred, ':') : NULL;
    if (colon == NULL)
        return ZK_EBADARGUMENTS;
    size_t user_len = (size_t)(colon - cred);
    if (cap < user_len + 1 + 29)
        return ZK_EBADARGUMENTS;
    memcpy(out, cred, user_len);
    out[user_len] = ':';
    zk_digest_of(cred, strlen(cred), out + user_len + 1);
    return ZK_OK;
}

static const char perm_letters[] = "cdrwa";
static const int32_t perm_bits[] = { ZK_PERM_CREATE, ZK_PERM_DELETE, ZK_PERM_READ, ZK_PERM_WRITE,
                                     ZK_PERM_ADMIN };

int32_t larch_perms_parse(const char *letters)
{
    int32_t perms = 0;
    for (const char *p = letters; *p != '\0'; p++) {
        const char *at = strchr(perm_letters, *p);
        if (at == NULL)
            return -1;
        perms |= perm_bits[at - perm_letters];
    }
    return perms;
}

void larch_perms_format(int32_t perms, char out[6])
{
    size_t n = 0;
    for (size_t i = 0; i < 5; i++) {
        if (perms & perm_bits[i])
            out[n++] = perm_letters[i];
    }
    out[n] = '\0';
}

/* ---- ACL lists ------------------------------------------------------------ */

void larch_acl_list_free(struct larch_acl_list *acl)
{
    if (acl == NULL)
        return;
    for (int32_t i = 0; i < acl->count && acl->items != NULL; i++) {
        free(acl->items[i].scheme);
        free(acl->items[i].id);
    }
    free(acl->items);
    acl->items = NULL;
    acl->count = 0;
}

/* One "scheme:id:perms" entry; the id may hold ':' (digest, IPv6), so the
 * scheme ends at the first ':' and the perms start after the last. */
static int acl_entry_parse(const char *s, size_t n, struct larch_acl *out)
{
    const char *first = memchr(s, ':', n);
    const char *last = NULL;
    for (size_t i = n; i > 0 && last == NULL; i--)
        last = s[i - 1] == ':' ? s + i - 1 : NULL;
    if (first == NULL || last == first || first == s)
        return ZK_EBADARGUMENTS;
    char *perm_text = strndup(last + 1, (size_t)(s + n - last - 1));
    if (perm_text == NULL)
        return ZK_ESYSTEMERROR;
    int32_t perms = perm_text[0] != '\0' ? larch_perms_parse(perm_text) : -1;
    free(perm_text);
    if (perms < 0)
        return ZK_EBADARGUMENTS;
    out->perms = perms;
    out->scheme = strndup(s, (size_t)(first - s));
    out->id = strndup(first + 1, (size_t)(last - first - 1));
    return out->scheme != NULL && out->id != NULL ? ZK_OK : ZK_ESYSTEMERROR;
}

int larch_acl_parse(const char *text, struct larch_acl_list *out)
{
    *out = (struct larch_acl_list){ 0 };
    if (text == NULL || text[0] == '\0')
        return ZK_EBADARGUMENTS;
    int32_t cap = 1;
    for (const char *p = text; *p != '\0'; p++)
        cap += *p == ',';
    out->items = calloc((size_t)cap, sizeof *out->items);
    if (out->items == NULL)
        return ZK_ESYSTEMERROR;
    int rc = ZK_OK;
    for (const char *s = text; rc == ZK_OK;) {
        const char *comma = strchr(s, ',');
        size_t n = comma != NULL ? (size_t)(comma - s) : strlen(s);
        rc = acl_entry_parse(s, n, &out->items[out->count]);
        out->count++;
        if (comma == NULL)
            break;
        s = comma + 1;
    }
    if (rc != ZK_OK)
        larch_acl_list_free(out);
    return rc;
}

int larch_acl_copy(const struct larch_acl_list *in, struct larch_acl_list *out)
{
    *out = (struct larch_acl_list){ 0 };
    if (in->count == 0)
        return ZK_OK;
    out->items = calloc((size_t)in->count, sizeof *out->items);
    if (out->items == NULL)
        return ZK_ESYSTEMERROR;
    for (int32_t i = 0; i < in->count; i++) {
        out->count++;
        out->items[i].perms = in->items[i].perms;
        out->items[i].scheme = strdup(in->items[i].scheme);
        out->items[i].id = strdup(in->items[i].id);
        if (out->items[i].scheme == NULL || out->items[i].id == NULL) {
            larch_acl_list_free(out);
            return ZK_ESYSTEMERROR;
        }
    }
    return ZK_OK;
}

/* ---- strings and sequence numbers --------------------------------------------- */

void larch_strings_free(struct larch_strings *s)
{
    if (s == NULL)
        return;
    for (int32_t i = 0; i < s->count && s->items != NULL; i++)
        free(s->items[i]);
    free(s->items);
    s->items = NULL;
    s->count = 0;
}

/* ZooKeeper appends String.format("%010d", counter): the last ten
 * characters are digits. */
int64_t larch_sequence_of(const char *name)
{
    size_t n = name != NULL ? strlen(name) : 0;
    if (n < 10)
        return -1;
    int64_t v = 0;
    for (size_t i = n - 10; i < n; i++) {
        if (name[i] < '0' || name[i] > '9')
            return -1;
        v = v * 10 + (name[i] - '0');
    }
    return v;
}

static int by_sequence(const void *a, const void *b)
{
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    int64_t sx = larch_sequence_of(x), sy = larch_sequence_of(y);
    if (sx >= 0 && sy >= 0 && sx != sy)
        return sx < sy ? -1 : 1;
    if ((sx < 0) != (sy < 0))
        return sx < 0 ? 1 : -1;
    return strcmp(x, y);
}

void larch_sort_by_sequence(struct larch_strings *s)
{
    if (s->count > 1)
        qsort(s->items, (size_t)s->count, sizeof *s->items, by_sequence);
}

/* ---- paths -------------------------------------------------------------------- */

bool larch_path_valid(const char *path, bool sequential)
{
    if (path == NULL)
        return false;
    size_t len = strlen(path);
    /* a sequential create may end in '/': the server appends the number */
    if (sequential && len > 1 && path[len - 1] == '/') {
        char *tmp = strndup(path, len);
        if (tmp == NULL)
            return false;
        tmp[len - 1] = 'x';
        bool ok = zk_path_validate(tmp, len) == ZK_OK;
        free(tmp);
        return ok;
    }
    return zk_path_validate(path, len) == ZK_OK;
}

char *larch_path_join(const char *parent, const char *child)
{
    size_t pl = strlen(parent), cl = strlen(child);
    bool root = pl == 1 && parent[0] == '/';
    char *out = malloc(pl + cl + 2);
    if (out == NULL)
        return NULL;
    memcpy(out, parent, pl);
    size_t o = pl;
    if (!root)
        out[o++] = '/';
    memcpy(out + o, child, cl + 1);
    return out;
}

const char *larch_error(int err)
{
    if (err == LARCH_ECLOSING)
        return "CLOSING";
    if (err == LARCH_ETOOBIG)
        return "TOOBIG";
    if (err == LARCH_EUDPVERSION)
        return "UDPVERSION";
    return zk_err_name(err);
}
