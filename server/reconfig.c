/*
 * reconfig.c — ZooKeeper's reconfig decision (reconfig.h), rule by rule.
 *
 * Citations are to ZooKeeper release-3.8.6, zookeeper-server/src/main/java/
 * org/apache/zookeeper/server/: PrepRequestProcessor.java (PRP),
 * quorum/QuorumPeerConfig.java (QPC), quorum/QuorumPeer.java
 * (QuorumServer), quorum/flexible/QuorumMaj.java, quorum/Leader.java.
 * Server specs are parsed by config_parse_server (config.c), the one parser
 * of them; a bulk membership by config_parse_members.
 */
#include "server/reconfig.h"

#include "proto/proto.h"

#include <arpa/inet.h>
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define ID_MAX 255          /* config_parse_server's bound */
#define ID_MAX_EXTENDED 254 /* with extended types (EphemeralType.MAX_EXTENDED_SERVER_ID) */
#define ECHO_MAX 200        /* bytes of a bad word quoted back */
#define JOINER_FORMAT "server.N=host:quorumPort:electionPort[:participant|observer];" \
                      "[clientAddress:]clientPort"

static int fail(char *msg, size_t msg_len, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Writes the message (when there is room for one) and returns code. */
static int fail(char *msg, size_t msg_len, int code, const char *fmt, ...)
{
    assert(code < 0);
    if (msg_len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, msg_len, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* The next word of *p between seps, blanks (bytes <= ' ') trimmed, empty
 * words skipped: ZooKeeper's StringUtils.split, which PRP uses on
 * joiningServers, leavingServers (",") and each joiner ("="). */
static bool next_word(const char **p, char sep, const char **word, size_t *len)
{
    while (**p != '\0') {
        const char *s = *p, *e = s;
        while (*e != '\0' && *e != sep)
            e++;
        *p = *e == sep ? e + 1 : e;
        while (s < e && (unsigned char)*s <= ' ')
            s++;
        while (e > s && (unsigned char)e[-1] <= ' ')
            e--;
        if (e > s) {
            *word = s;
            *len = (size_t)(e - s);
            return true;
        }
    }
    return false;
}

/* Java's Long.parseLong: an optional sign, then decimal digits, in range. */
static bool java_long(const char *w, size_t n, int64_t *out)
{
    size_t i = n > 0 && (w[0] == '+' || w[0] == '-') ? 1 : 0;
    bool neg = i == 1 && w[0] == '-';
    uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    uint64_t v = 0;
    if (i == n)
        return false;
    for (; i < n; i++) {
        if (w[i] < '0' || w[i] > '9')
            return false;
        uint64_t d = (uint64_t)(w[i] - '0');
        if (v > (limit - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = !neg ? (int64_t)v : v == limit ? INT64_MIN : -(int64_t)v;
    return true;
}

static int find_member(const struct config_server *s, uint32_t n, int64_t id)
{
    for (uint32_t i = 0; i < n; i++)
        if (s[i].id == id)
            return (int)i;
    return -1;
}

/* ------------------------------------------------------------------ addresses */

struct addr {
    const char *host;
    int32_t port;
};

/* Addresses QuorumServer.excludedSpecialAddresses leaves out of the
 * duplicate check: the wildcard (0.0.0.0, ::) and loopback (127/8, ::1,
 * and localhost, which resolves to it). */
static bool is_special_host(const char *host)
{
    uint8_t b[16];
    static const uint8_t zero[16], one[16] = { [15] = 1 };
    if (inet_pton(AF_INET, host, b) == 1)
        return memcmp(b, zero, 4) == 0 || b[0] == 127;
    if (inet_pton(AF_INET6, host, b) == 1)
        return memcmp(b, zero, 16) == 0 || memcmp(b, one, 16) == 0;
    return strcasecmp(host, "localhost") == 0;
}

/* sv's quorum, client and election addresses (QuorumServer.myAddrs), less
 * the special ones. A client port without an address listens on 0.0.0.0. */
static uint32_t addresses_of(const struct config_server *sv, struct addr a[3])
{
    struct addr all[3];
    uint32_t n = 0, kept = 0;
    all[n++] = (struct addr){ sv->host, sv->quorum_port };
    if (sv->client_port > 0)
        all[n++] = (struct addr){ sv->client_address[0] ? sv->client_address : "0.0.0.0",
                                  sv->client_port };
    all[n++] = (struct addr){ sv->host, sv->election_port };
    for (uint32_t i = 0; i < n; i++)
        if (!is_special_host(all[i].host))
            a[kept++] = all[i];
    return kept;
}

/* QuorumServer.checkAddressDuplicate, as PRP runs it for each joiner
 * against every other member of the configuration being built (PRP:500-508):
 * no address of the joiner may be an address of another member. ZooKeeper
 * compares resolved addresses and skips names that do not resolve; larchd
 * resolves nothing, so names compare as written (config_same_host). */
static int check_addresses(const struct config_server *j, const struct config_server *s,
                           uint32_t n, char *msg, size_t msg_len)
{
    struct addr mine[3], theirs[3];
    uint32_t n_mine = addresses_of(j, mine);
    for (uint32_t i = 0; i < n; i++) {
        if (s[i].id == j->id)
            continue;
        uint32_t n_theirs = addresses_of(&s[i], theirs);
        for (uint32_t a = 0; a < n_mine; a++)
            for (uint32_t b = 0; b < n_theirs; b++)
                if (mine[a].port == theirs[b].port &&
                    config_same_host(mine[a].host, theirs[b].host)) {
                    bool v6 = strchr(mine[a].host, ':') != NULL;
                    return fail(msg, msg_len, ZK_EBADARGUMENTS,
                                "joiningServers: server.%lld: %s%s%s:%d is also an address of "
                                "server.%lld", (long long)j->id, v6 ? "[" : "", mine[a].host,
                                v6 ? "]" : "", mine[a].port, (long long)s[i].id);
                }
    }
    return ZK_OK;
}

/* ------------------------------------------------------------------ incremental */

/* Removes each id of leavingServers (PRP:480-487): an id that is no member
 * is ignored. One that is no number is malformed input: ZBADARGUMENTS
 * (ZooKeeper's Long.parseLong fails uncaught there and answers
 * ZMARSHALLINGERROR, PRP:948-967, an accident of its exception handling). */
static int apply_leaving(const char *leaving, struct config_server *s, uint32_t *n, char *msg,
                         size_t msg_len)
{
    const char *p = leaving, *w;
    size_t wn;
    while (leaving != NULL && next_word(&p, ',', &w, &wn)) {
        int64_t id;
        if (!java_long(w, wn, &id))
            return fail(msg, msg_len, ZK_EBADARGUMENTS,
                        "leavingServers: '%.*s' is not a server id",
                        (int)(wn > ECHO_MAX ? ECHO_MAX : wn), w);
        int at = find_member(s, *n, id);
        if (at >= 0) {
            memmove(&s[at], &s[at + 1], (*n - (uint32_t)at - 1) * sizeof *s);
            (*n)--;
        }
    }
    return ZK_OK;
}

/* One joiner, "server.N=spec" (PRP:490-502): exactly two non-blank parts
 * around '='; N is what follows the last '.' of the first (so "N=spec"
 * does too), a number (else ZBADARGUMENTS, where ZooKeeper's uncaught
 * Long.parseLong answers ZMARSHALLINGERROR); the
 * spec as QuorumServer reads it (ConfigException: ZBADARGUMENTS, PRP:515),
 * and it must name a client port (PRP:498). */
static int parse_joiner(const char *w, size_t wn, bool extended, struct config_server *sv,
                        char *msg, size_t msg_len)
{
    char buf[CONFIG_SERVER_TEXT_MAX + 64], why[CONFIG_MSG_MAX];
    const char *part[2] = { NULL, NULL }, *p = buf, *pw;
    size_t part_len[2] = { 0, 0 }, pn, parts = 0;
    int echo = (int)(wn > ECHO_MAX ? ECHO_MAX : wn);
    if (wn < sizeof buf) {
        memcpy(buf, w, wn);
        buf[wn] = '\0';
        for (; next_word(&p, '=', &pw, &pn); parts++)
            if (parts < 2) {
                part[parts] = pw;
                part_len[parts] = pn;
            }
    }
    if (parts != 2)
        return fail(msg, msg_len, ZK_EBADARGUMENTS, "joiningServers: '%.*s' is not "
                    JOINER_FORMAT, echo, w);
    char *key = buf + (part[0] - buf), *spec = buf + (part[1] - buf);
    key[part_len[0]] = '\0';
    spec[part_len[1]] = '\0';
    const char *dot = strrchr(key, '.');
    const char *id_text = dot != NULL ? dot + 1 : key;
    int64_t id;
    if (!java_long(id_text, strlen(id_text), &id))
        return fail(msg, msg_len, ZK_EBADARGUMENTS, "joiningServers: '%.*s': '%s' is "
                    "not a server id", echo, w, id_text);
    if (config_parse_server(id_text, spec, sv, why, sizeof why) != CONFIG_SERVER_OK)
        return fail(msg, msg_len, ZK_EBADARGUMENTS, "joiningServers: server.%s: %s", id_text,
                    why);
    if (extended && sv->id > ID_MAX_EXTENDED)
        return fail(msg, msg_len, ZK_EBADARGUMENTS, "joiningServers: server.%lld: ids above "
                    "254 are not allowed with zookeeper.extendedTypesEnabled=true",
                    (long long)sv->id);
    if (sv->client_port == 0)
        return fail(msg, msg_len, ZK_EBADARGUMENTS, "joiningServers: server.%lld: a joining "
                    "server needs its client port ('%s;[clientAddress:]clientPort')",
                    (long long)sv->id, spec);
    snprintf(sv->where, sizeof sv->where, "joiningServers");
    return ZK_OK;
}

/* Adds each joiner, or replaces the member with its id: a new address or
 * role needs no removal first (PRP:509-511; zookeeperReconfig.md,
 * "Modifying server parameters"). One id twice in joiningServers is
 * refused: ZooKeeper would keep the last, silently. */
static int apply_joining(const char *joining, bool extended, struct config_server *s,
                         uint32_t *n, char *msg, size_t msg_len)
{
    bool joined[ID_MAX + 1] = { false };
    const char *p = joining, *w;
    size_t wn;
    while (joining != NULL && next_word(&p, ',', &w, &wn)) {
        struct config_server sv;
        int rc = parse_joiner(w, wn, extended, &sv, msg, msg_len);
        if (rc != ZK_OK)
            return rc;
        assert(sv.id >= 1 && sv.id <= ID_MAX);
        if (joined[sv.id])
            return fail(msg, msg_len, ZK_EBADARGUMENTS, "joiningServers: server.%lld is "
                        "given twice", (long long)sv.id);
        joined[sv.id] = true;
        rc = check_addresses(&sv, s, *n, msg, msg_len);
        if (rc != ZK_OK)
            return rc;
        int at = find_member(s, *n, sv.id);
        if (at < 0 && *n == CONFIG_SERVERS_MAX)
            return fail(msg, msg_len, ZK_EBADARGUMENTS, "joiningServers: server.%lld: more "
                        "than %d servers", (long long)sv.id, CONFIG_SERVERS_MAX);
        s[at >= 0 ? (uint32_t)at : (*n)++] = sv;
    }
    return ZK_OK;
}

/* ------------------------------------------------------------------ bulk */

struct first_error {
    char *msg;
    size_t msg_len;
    bool have;
};

static void keep_first_error(void *arg, int severity, const char *text)
{
    struct first_error *f = arg;
    if (severity == 0 || f->have)
        return;
    f->have = true;
    if (f->msg_len > 0)
        snprintf(f->msg, f->msg_len, "%s", text);
}

/* QPC.parseDynamicConfig's refusals of too few voters (QPC:689-705).
 * ZooKeeper throws IllegalArgumentExceptions there, which PRP does not
 * catch (ZMARSHALLINGERROR); to a client they are bad arguments, and larch
 * says so: ZBADARGUMENTS. */
static int check_dynamic_voters(const struct reconfig_leader *l, const struct config_server *s,
                                uint32_t n, char *msg, size_t msg_len)
{
    uint32_t voters = 0;
    for (uint32_t i = 0; i < n; i++)
        voters += !s[i].observer;
    uint32_t observers = n - voters;
    if (voters == 0 && !l->standalone_enabled)
        return fail(msg, msg_len, ZK_EBADARGUMENTS, "newMembers: no participant "
                    "(standaloneEnabled=false needs at least one)");
    if (voters == 0 && observers > 0)
        return fail(msg, msg_len, ZK_EBADARGUMENTS, "newMembers: observers without "
                    "participants");
    if (voters == 1 && l->standalone_enabled && observers > 0)
        return fail(msg, msg_len, ZK_EBADARGUMENTS, "newMembers: observers with a single "
                    "participant (standaloneEnabled=true)");
    return ZK_OK;
}

/* newMembers: commas become line breaks (PRP:450), then the text is a
 * dynamic configuration (QPC.parseDynamicConfig: server.N and version keys
 * only, QPC:673-685; a ConfigException is ZBADARGUMENTS, PRP:458). An id
 * that is no number is ZBADARGUMENTS too (ZooKeeper's QuorumMaj fails on it
 * uncaught: ZMARSHALLINGERROR). Larch refuses group./weight. (hierarchical quorums,
 * which ZooKeeper would accept here) and an id given twice. */
static int plan_bulk(const struct reconfig_leader *l, const char *members,
                     struct config_server *out, uint32_t *n_out, char *msg, size_t msg_len)
{
    size_t len = strlen(members);
    char *text = malloc(len + 1);
    if (text == NULL)
        return fail(msg, msg_len, ZK_ESYSTEMERROR, "out of memory");
    for (size_t i = 0; i <= len; i++)
        text[i] = members[i] == ',' ? '\n' : members[i];
    struct first_error f = { .msg = msg, .msg_len = msg_len };
    int rc = config_parse_members(text, len, "newMembers", out, n_out, keep_first_error, &f);
    free(text);
    if (rc == CONFIG_MEMBERS_NO_MEMORY)
        return ZK_ESYSTEMERROR;
    if (rc != 0)
        return ZK_EBADARGUMENTS;
    for (uint32_t i = 0; i < *n_out; i++)
        if (l->extended_types && out[i].id > ID_MAX_EXTENDED)
            return fail(msg, msg_len, ZK_EBADARGUMENTS, "newMembers: server.%lld: ids above "
                        "254 are not allowed with zookeeper.extendedTypesEnabled=true",
                        (long long)out[i].id);
    return check_dynamic_voters(l, out, *n_out, msg, msg_len);
}

/* ------------------------------------------------------------------ the new membership */

/* PRP:526-534: at least 2 voters with standaloneEnabled, else at least 1. */
static int check_voters(const struct reconfig_leader *l, const struct config_server *s,
                        uint32_t n, char *msg, size_t msg_len)
{
    uint32_t voters = 0, need = l->standalone_enabled ? 2 : 1;
    for (uint32_t i = 0; i < n; i++)
        voters += !s[i].observer;
    if (voters < need)
        return fail(msg, msg_len, ZK_EBADARGUMENTS, "the new configuration would have %u "
                    "participant%s: it needs at least %u%s", voters, voters == 1 ? "" : "s",
                    need, l->standalone_enabled ? " (standaloneEnabled=true)" : "");
    return ZK_OK;
}

/* Counts id once if it is a voter of s. */
static void count_ack(const struct config_server *s, uint32_t n, uint32_t id, bool *counted,
                      uint32_t *acks)
{
    int at = id <= ID_MAX ? find_member(s, n, id) : -1;
    if (at >= 0 && !s[at].observer && !counted[id]) {
        counted[id] = true;
        (*acks)++;
    }
}

/* Leader.isQuorumSynced (Leader.java:272-285), PRP:536-540: the leader, if
 * it votes in the new configuration, and its synced followers that do,
 * must be more than half its voters (QuorumMaj.containsQuorum). */
static int check_synced(const struct reconfig_leader *l, const struct config_server *s,
                        uint32_t n, char *msg, size_t msg_len)
{
    bool counted[ID_MAX + 1] = { false };
    uint32_t voters = 0, acks = 0;
    for (uint32_t i = 0; i < n; i++)
        voters += !s[i].observer;
    count_ack(s, n, l->leader_id, counted, &acks);
    for (uint32_t i = 0; i < l->n_synced; i++)
        count_ack(s, n, l->synced_ids[i], counted, &acks);
    if (acks <= voters / 2)
        return fail(msg, msg_len, ZK_ENEWCONFIGNOQUORUM, "%u of the new configuration's %u "
                    "participants are this leader or followers synced with it: %u are needed",
                    acks, voters, voters / 2 + 1);
    return ZK_OK;
}

/* In id order: QuorumMaj.toString walks a HashMap<Long, ...>, which is id
 * order while the ids are below its table size (16 up to 12 members). */
static void sort_by_id(struct config_server *s, uint32_t n)
{
    for (uint32_t i = 1; i < n; i++) {
        struct config_server v = s[i];
        uint32_t j = i;
        for (; j > 0 && s[j - 1].id > v.id; j--)
            s[j] = s[j - 1];
        s[j] = v;
    }
}

int reconfig_plan(const struct reconfig_leader *l, const struct reconfig_request *req,
                  struct config_server *out, uint32_t *n_out, char *msg, size_t msg_len)
{
    assert(l != NULL && req != NULL && out != NULL && n_out != NULL);
    assert(l->n_members <= CONFIG_SERVERS_MAX && (l->members != NULL || l->n_members == 0));
    assert(l->synced_ids != NULL || l->n_synced == 0);
    assert(msg != NULL || msg_len == 0);
    if (msg_len > 0)
        msg[0] = '\0';
    /* PRP:411-414, 430-432, 436-442, in ZooKeeper's order */
    if (!l->reconfig_enabled)
        return fail(msg, msg_len, ZK_ERECONFIGDISABLED, "reconfig is disabled "
                    "(reconfigEnabled=false)");
    if (l->in_progress)
        return fail(msg, msg_len, ZK_ERECONFIGINPROGRESS, "another reconfig is in progress");
    if (req->from_config != -1 && req->from_config != l->version)
        return fail(msg, msg_len, ZK_EBADVERSION, "reconfig from version 0x%llx: the last "
                    "seen configuration is version 0x%llx",
                    (unsigned long long)req->from_config, (unsigned long long)l->version);
    int rc;
    if (req->new_members != NULL) {
        rc = plan_bulk(l, req->new_members, out, n_out, msg, msg_len);
    } else {
        /* PRP:459-519: leaving first, then joining, on the last seen config */
        if (l->n_members > 0)
            memcpy(out, l->members, l->n_members * sizeof *out);
        *n_out = l->n_members;
        rc = apply_leaving(req->leaving, out, n_out, msg, msg_len);
        if (rc == ZK_OK)
            rc = apply_joining(req->joining, l->extended_types, out, n_out, msg, msg_len);
    }
    if (rc == ZK_OK)
        rc = check_voters(l, out, *n_out, msg, msg_len);
    if (rc == ZK_OK)
        rc = check_synced(l, out, *n_out, msg, msg_len);
    if (rc != ZK_OK)
        return rc;
    sort_by_id(out, *n_out);
    assert(*n_out >= 1 && *n_out <= CONFIG_SERVERS_MAX);
    for (uint32_t i = 1; i < *n_out; i++)
        assert(out[i - 1].id < out[i].id);
    return ZK_OK;
}
