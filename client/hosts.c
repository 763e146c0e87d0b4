/*
 * hosts.c — the connect string ("h1:2181,h2:2182/chroot") and chroot path
 * mapping, as ZooKeeper's ConnectStringParser reads it. Pure.
 */
#include <stdlib.h>
#include <string.h>

#include "client/lc_int.h"

#define DEFAULT_PORT "2181"

static bool port_valid(const char *p, size_t n)
{
    if (n == 0 || n > 5)
        return false;
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return false;
        v = v * 10 + (p[i] - '0');
    }
    return v > 0 && v <= 65535;
}

/* One "host[:port]" or "[v6]:port" item of length n into h. */
static int host_parse(const char *s, size_t n, struct lc_host *h)
{
    const char *name = s, *port = NULL;
    size_t name_len = n, port_len = 0;
    if (n > 0 && s[0] == '[') {
        const char *close = memchr(s, ']', n);
        if (close == NULL)
            return ZK_EBADARGUMENTS;
        name = s + 1;
        name_len = (size_t)(close - name);
        size_t rest = n - (size_t)(close + 1 - s);
        if (rest > 0) {
            if (close[1] != ':')
                return ZK_EBADARGUMENTS;
            port = close + 2;
            port_len = rest - 1;
        }
    } else {
        const char *colon = memchr(s, ':', n);
        if (colon != NULL) {
            name_len = (size_t)(colon - s);
            port = colon + 1;
            port_len = n - name_len - 1;
        }
    }
    if (name_len == 0 || (port != NULL && !port_valid(port, port_len)))
        return ZK_EBADARGUMENTS;
    h->name = strndup(name, name_len);
    h->port = port != NULL ? strndup(port, port_len) : strdup(DEFAULT_PORT);
    return h->name != NULL && h->port != NULL ? ZK_OK : ZK_ESYSTEMERROR;
}

static int chroot_parse(const char *slash, struct lc_hosts *out)
{
    size_t len = strlen(slash);
    if (len == 1)
        return ZK_OK; /* "/" is no chroot */
    if (zk_path_validate(slash, len) != ZK_OK)
        return ZK_EBADARGUMENTS;
    out->chroot = strdup(slash);
    return out->chroot != NULL ? ZK_OK : ZK_ESYSTEMERROR;
}

int lc_hosts_parse(const char *s, struct lc_hosts *out)
{
    *out = (struct lc_hosts){ 0 };
    if (s == NULL || s[0] == '\0')
        return ZK_EBADARGUMENTS;
    const char *slash = strchr(s, '/');
    size_t hosts_len = slash != NULL ? (size_t)(slash - s) : strlen(s);
    size_t cap = 1;
    for (size_t i = 0; i < hosts_len; i++)
        cap += s[i] == ',';
    out->items = calloc(cap, sizeof *out->items);
    if (out->items == NULL)
        return ZK_ESYSTEMERROR;
    int rc = ZK_OK;
    for (size_t start = 0; rc == ZK_OK && start <= hosts_len;) {
        const char *comma = memchr(s + start, ',', hosts_len - start);
        size_t end = comma != NULL ? (size_t)(comma - s) : hosts_len;
        rc = host_parse(s + start, end - start, &out->items[out->count]);
        if (out->items[out->count].name != NULL || out->items[out->count].port != NULL)
            out->count++;
        start = end + 1;
    }
    if (rc == ZK_OK && slash != NULL)
        rc = chroot_parse(slash, out);
    if (rc != ZK_OK)
        lc_hosts_free(out);
    return rc;
}

/* Fisher–Yates with xorshift64: ZooKeeper shuffles the host list so that
 * clients spread over the ensemble. */
void lc_hosts_shuffle(struct lc_hosts *h, uint64_t seed)
{
    uint64_t x = seed != 0 ? seed : 0x9E3779B97F4A7C15ULL;
    for (size_t i = h->count; i > 1; i--) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        size_t j = (size_t)(x % i);
        struct lc_host t = h->items[i - 1];
        h->items[i - 1] = h->items[j];
        h->items[j] = t;
    }
}

void lc_hosts_free(struct lc_hosts *h)
{
    for (size_t i = 0; i < h->count; i++) {
        free(h->items[i].name);
        free(h->items[i].port);
    }
    free(h->items);
    free(h->chroot);
    *h = (struct lc_hosts){ 0 };
}

char *lc_chroot_add(const char *chroot, const char *path)
{
    if (chroot == NULL)
        return strdup(path);
    size_t cl = strlen(chroot), pl = strlen(path);
    if (pl == 1 && path[0] == '/')
        return strdup(chroot);
    char *out = malloc(cl + pl + 1);
    if (out != NULL) {
        memcpy(out, chroot, cl);
        memcpy(out + cl, path, pl + 1);
    }
    return out;
}

const char *lc_chroot_strip(const char *chroot, const char *path)
{
    if (chroot == NULL || path == NULL)
        return path;
    size_t cl = strlen(chroot);
    if (strncmp(path, chroot, cl) != 0)
        return path;
    if (path[cl] == '\0')
        return "/";
    return path[cl] == '/' ? path + cl : path;
}
