/*
 * reconfig_ops.c — larchd's side of dynamic reconfig (struct seq_reconfig_ops):
 * the ensemble driver runs the protocol (replication/README.md, "Reconfig");
 * here a ReconfigRequest is decoded and decided (reconfig_plan), the
 * memberships the log carries are turned into server.N lines and back, and
 * the committed text goes to dynamicConfigFile.
 *
 * A membership's description (raft_config.extra) is the server.N lines of
 * every member of both halves; a membership without one is the configured
 * one (zoo.cfg's server.N lines). Sequencer thread only.
 */
#include "server/server.h"

#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto.h"
#include "replication/txnlog.h"
#include "server/reconfig.h"

static void ignore_report(void *arg, int severity, const char *msg)
{
    (void)arg;
    (void)severity;
    (void)msg;
}

static const struct raft_member *member_of(const struct raft_member *m, uint32_t n, int64_t id)
{
    for (uint32_t i = 0; i < n; i++)
        if (m[i].id == id)
            return &m[i];
    return NULL;
}

/* The servers of membership c, in id order: its description's lines (or
 * the configured ones), only those c names (the new half; with_old, the
 * old half too), each with the role c gives it. -1 when the description
 * does not parse (the log carries only what this code wrote). */
static int servers_of(const struct server *srv, const struct raft_config *c, bool with_old,
                      struct config_server *out, uint32_t *n)
{
    struct config_server all[CONFIG_SERVERS_MAX];
    uint32_t n_all = 0;
    if (c->extra_len > 0) {
        if (config_parse_members((const char *)c->extra, c->extra_len, "membership", all,
                                 &n_all, ignore_report, NULL) != 0)
            return -1;
    } else {
        n_all = srv->cfg.n_servers;
        memcpy(all, srv->cfg.servers, n_all * sizeof *all);
    }
    *n = 0;
    for (uint32_t i = 0; i < n_all; i++) {
        const struct raft_member *m = member_of(c->members, c->n_members, all[i].id);
        if (!m && with_old)
            m = member_of(c->old, c->n_old, all[i].id);
        if (!m)
            continue;
        struct config_server sv = all[i];
        sv.observer = !m->voter;
        uint32_t k = (*n)++;
        while (k > 0 && out[k - 1].id > sv.id) {
            out[k] = out[k - 1];
            k--;
        }
        out[k] = sv;
    }
    return 0;
}

/* A jute ustring as a NUL-terminated copy (NULL for jute's null). False
 * without memory or for a string holding a NUL byte (*bad set). */
static bool take_string(struct zk_str s, char **out, bool *bad)
{
    *out = NULL;
    if (s.len < 0)
        return true;
    if (memchr(s.ptr, '\0', (size_t)s.len) != NULL) {
        *bad = true;
        return false;
    }
    *out = malloc((size_t)s.len + 1);
    if (!*out)
        return false;
    memcpy(*out, s.ptr, (size_t)s.len);
    (*out)[s.len] = '\0';
    return true;
}

struct decoded {
    char *joining, *leaving, *new_members;
    int64_t from_config;
};

static void decoded_free(struct decoded *d)
{
    free(d->joining);
    free(d->leaving);
    free(d->new_members);
}

/* ReconfigRequest (zookeeper.jute): ustring joiningServers, ustring
 * leavingServers, ustring newMembers, long curConfigId. */
static int decode_request(const uint8_t *body, size_t len, struct decoded *d)
{
    struct base_rd r;
    base_rd_init(&r, body, len);
    struct zk_str joining, leaving, members;
    *d = (struct decoded){ 0 };
    if (!zk_get_str(&r, &joining) || !zk_get_str(&r, &leaving) || !zk_get_str(&r, &members) ||
        !zk_get_i64(&r, &d->from_config) || base_rd_left(&r) != 0)
        return ZK_EMARSHALLINGERROR;
    bool bad = false;
    if (!take_string(joining, &d->joining, &bad) || !take_string(leaving, &d->leaving, &bad) ||
        !take_string(members, &d->new_members, &bad)) {
        decoded_free(d);
        return bad ? ZK_EBADARGUMENTS : ZK_ESYSTEMERROR;
    }
    return ZK_OK;
}

/* The description of a change: the new members, then the old ones that
 * leave (the joint entry needs their addresses too). */
static char *change_description(const struct config_server *next, uint32_t n_next,
                                const struct config_server *cur, uint32_t n_cur)
{
    struct config_server all[CONFIG_SERVERS_MAX];
    uint32_t n = 0;
    for (uint32_t i = 0; i < n_next; i++)
        all[n++] = next[i];
    for (uint32_t i = 0; i < n_cur && n < CONFIG_SERVERS_MAX; i++) {
        bool kept = false;
        for (uint32_t k = 0; k < n_next; k++)
            kept |= next[k].id == cur[i].id;
        if (!kept)
            all[n++] = cur[i];
    }
    return config_servers_text(all, n, -1);
}

static int ops_plan(void *arg, const uint8_t *body, size_t len, bool super,
                    const struct raft_config *cur, int64_t version, uint32_t leader_id,
                    const uint32_t *synced, uint32_t n_synced, struct seq_reconfig_plan *out)
{
    const struct server *srv = arg;
    *out = (struct seq_reconfig_plan){ 0 };
    struct decoded d;
    int rc = decode_request(body, len, &d);
    if (rc != ZK_OK)
        return rc;
    struct config_server now[CONFIG_SERVERS_MAX], next[CONFIG_SERVERS_MAX];
    uint32_t n_now = 0, n_next = 0;
    if (servers_of(srv, cur, false, now, &n_now) != 0) {
        decoded_free(&d);
        return ZK_ESYSTEMERROR;
    }
    struct reconfig_leader l = {
        .members = now, .n_members = n_now, .version = version,
        .reconfig_enabled = srv->cfg.reconfig_enabled,
        .standalone_enabled = srv->cfg.standalone_enabled,
        .extended_types = srv->cfg.extended_types,
        .leader_id = leader_id, .synced_ids = synced, .n_synced = n_synced,
    };
    struct reconfig_request req = { d.joining, d.leaving, d.new_members, d.from_config };
    char msg[CONFIG_MSG_MAX];
    rc = reconfig_plan(&l, &req, next, &n_next, msg, sizeof msg);
    decoded_free(&d);
    /* ZooKeeper checks the WRITE permission on /zookeeper/config (whose ACL
     * only a superuser passes) after the request's own checks */
    if (rc == ZK_OK && !super)
        rc = ZK_ENOAUTH;
    if (rc != ZK_OK) {
        if (rc != ZK_ENOAUTH)
            base_log(BASE_LOG_WARN, "larchd: reconfig refused (%s): %s", zk_err_name(rc), msg);
        return rc;
    }
    char *desc = change_description(next, n_next, now, n_now);
    if (!desc)
        return ZK_ESYSTEMERROR;
    size_t dlen = strlen(desc);
    if (dlen > RAFT_CONFIG_EXTRA_MAX) {
        base_log(BASE_LOG_WARN,
                 "larchd: reconfig refused: the membership's server.N lines take %zu "
                 "bytes, more than %d", dlen, RAFT_CONFIG_EXTRA_MAX);
        free(desc);
        return ZK_EBADARGUMENTS;
    }
    for (uint32_t i = 0; i < n_next; i++)
        out->members[i] = (struct raft_member){ (uint32_t)next[i].id, !next[i].observer };
    out->n_members = n_next;
    out->extra = (uint8_t *)desc;
    out->extra_len = dlen;
    return ZK_OK;
}

static char *ops_text(void *arg, const struct raft_config *c, int64_t version)
{
    struct config_server sv[CONFIG_SERVERS_MAX];
    uint32_t n = 0;
    if (servers_of(arg, c, false, sv, &n) != 0)
        return NULL;
    return config_servers_text(sv, n, version);
}

/* dynamicConfigFile follows the committed membership, as ZooKeeper keeps
 * its dynamic file: written whole (a crash leaves the old or the new). */
static void ops_applied(void *arg, const char *text, size_t len)
{
    const struct server *srv = arg;
    const char *path = srv->cfg.dynamic_config_file;
    if (!path[0] || !srv->st)
        return;
    char dir[sizeof srv->cfg.dynamic_config_file];
    snprintf(dir, sizeof dir, "%s", path);
    int rc = storage_write_whole(srv->st, dirname(dir), path, text, len, 0);
    if (rc != 0)
        base_log(BASE_LOG_ERROR,
                 "larchd: cannot write dynamicConfigFile %s: %s (the data dir keeps "
                 "the membership all the same)", path, strerror(-rc));
}

int reconfig_current_servers(const struct server *srv, const struct raft_config *c,
                             struct config_server *out, uint32_t *n)
{
    return servers_of(srv, c, false, out, n);
}

const struct seq_reconfig_ops *reconfig_ops(void)
{
    static const struct seq_reconfig_ops ops = {
        .plan = ops_plan,
        .text = ops_text,
        .applied = ops_applied,
    };
    return &ops;
}
