/*
 * test_reconfig — ZooKeeper's reconfig decision (server/reconfig.h): each
 * rule of PrepRequestProcessor's reconfig case with the exact error code,
 * message and /zookeeper/config text, plus the shared server-spec parser
 * (config_parse_server) and the membership text it feeds.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto.h"
#include "server/config.h"
#include "server/reconfig.h"

#define CUR_VERSION 0x100000003LL /* the version of the membership the leader has */
#define NEW_VERSION 0x100000007LL /* the zxid the reconfig txn would carry */

/* Three participants, client ports without address (";2181"). */
#define THREE "server.1=198.18.0.1:2888:3888;2181\n" \
              "server.2=198.18.0.2:2888:3888;2181\n" \
              "server.3=198.18.0.3:2888:3888;2181\n"
#define LINE1 "server.1=198.18.0.1:2888:3888:participant;0.0.0.0:2181\n"
#define LINE2 "server.2=198.18.0.2:2888:3888:participant;0.0.0.0:2181\n"
#define LINE3 "server.3=198.18.0.3:2888:3888:participant;0.0.0.0:2181\n"
#define JOIN4 "server.4=198.18.0.4:2888:3888;198.18.0.4:2181"
#define LINE4 "server.4=198.18.0.4:2888:3888:participant;198.18.0.4:2181\n"
#define VERSION_LINE "version=100000007"

struct fx {
    struct config_server cur[CONFIG_SERVERS_MAX];
    uint32_t synced[CONFIG_SERVERS_MAX + 4];
    struct reconfig_leader l;
    struct config_server out[CONFIG_SERVERS_MAX];
    uint32_t n_out;
    char msg[CONFIG_MSG_MAX];
};

/* A leader (id 1) of members (dynamic-file text) at CUR_VERSION, with
 * reconfig and standalone enabled, and every other member synced. */
static void leader(struct fx *f, const char *members)
{
    memset(f, 0, sizeof *f);
    assert_int_equal(config_parse_members(members, strlen(members), "test", f->cur,
                                          &f->l.n_members, NULL, NULL), 0);
    f->l.members = f->cur;
    f->l.version = CUR_VERSION;
    f->l.reconfig_enabled = true;
    f->l.standalone_enabled = true;
    f->l.extended_types = true;
    f->l.leader_id = 1;
    f->l.synced_ids = f->synced;
    for (uint32_t i = 0; i < f->l.n_members; i++)
        if (f->cur[i].id != 1)
            f->synced[f->l.n_synced++] = (uint32_t)f->cur[i].id;
}

static void set_synced(struct fx *f, uint32_t n, const uint32_t *ids)
{
    if (n > 0)
        memcpy(f->synced, ids, n * sizeof *ids);
    f->l.n_synced = n;
}

static int plan(struct fx *f, const char *joining, const char *leaving, const char *new_members,
                int64_t from)
{
    struct reconfig_request req = { .joining = joining, .leaving = leaving,
                                    .new_members = new_members, .from_config = from };
    memset(f->out, 0xa5, sizeof f->out);
    f->n_out = 0xdead;
    snprintf(f->msg, sizeof f->msg, "untouched");
    return reconfig_plan(&f->l, &req, f->out, &f->n_out, f->msg, sizeof f->msg);
}

/* The plan succeeded with this /zookeeper/config text (at NEW_VERSION). */
static void want_text(struct fx *f, int rc, const char *want)
{
    if (rc != ZK_OK)
        fail_msg("rc %d: %s", rc, f->msg);
    assert_string_equal(f->msg, "");
    char *text = config_servers_text(f->out, f->n_out, NEW_VERSION);
    assert_non_null(text);
    assert_string_equal(text, want);
    free(text);
}

static void want_error(struct fx *f, int rc, int code, const char *msg)
{
    if (rc != code)
        fail_msg("want %d, got %d: %s", code, rc, f->msg);
    assert_string_equal(f->msg, msg);
}

/* ------------------------------------------------------------------ incremental */

static void test_add_participant(void **state)
{
    struct fx f;
    leader(&f, THREE);
    want_text(&f, plan(&f, JOIN4, NULL, NULL, -1),
              LINE1 LINE2 LINE3 LINE4 VERSION_LINE);
    assert_int_equal(f.n_out, 4);
    assert_string_equal(f.out[3].where, "joiningServers");
    assert_string_equal(f.out[0].where, "test:1"); /* members that stay keep theirs */
    /* "N=spec" is accepted too (the id follows the last '.', if any), and
     * blank and empty words are skipped */
    leader(&f, THREE);
    want_text(&f, plan(&f, " , 4 = 198.18.0.4:2888:3888;198.18.0.4:2181 ,, ", NULL, NULL, -1),
              LINE1 LINE2 LINE3 LINE4 VERSION_LINE);
}

static void test_add_observer(void **state)
{
    struct fx f;
    leader(&f, THREE);
    /* the role in any case; an IPv6 host in brackets, written back so */
    want_text(&f, plan(&f, "server.9=[fd00::9]:2888:3888:OBSERVER;[fd00::9]:2181", "", NULL, -1),
              LINE1 LINE2 LINE3
              "server.9=[fd00::9]:2888:3888:observer;[fd00::9]:2181\n" VERSION_LINE);
    assert_true(f.out[3].observer);
    assert_string_equal(f.out[3].host, "fd00::9");
}

static void test_remove(void **state)
{
    struct fx f;
    leader(&f, THREE "server.4=198.18.0.4:2888:3888:observer\n");
    want_text(&f, plan(&f, NULL, "3", NULL, -1), LINE1 LINE2
              "server.4=198.18.0.4:2888:3888:observer\n" VERSION_LINE);
    /* several ids; an id that is no member is ignored (HashMap.remove) */
    leader(&f, THREE "server.4=198.18.0.4:2888:3888:observer\n");
    want_text(&f, plan(&f, NULL, " 4 ,9,, 3", NULL, -1), LINE1 LINE2 VERSION_LINE);
    /* leaving is applied before joining: a server may leave and come back */
    leader(&f, THREE);
    want_text(&f, plan(&f, "server.3=198.18.0.3:2888:3888:observer;2181", "3", NULL, -1),
              LINE1 LINE2 "server.3=198.18.0.3:2888:3888:observer;0.0.0.0:2181\n" VERSION_LINE);
}

static void test_change_role_and_address(void **state)
{
    struct fx f;
    /* participant -> observer: joining with the same id replaces it */
    leader(&f, THREE "server.4=198.18.0.4:2888:3888;2181\n");
    want_text(&f, plan(&f, "server.4=198.18.0.4:2888:3888:observer;2181", NULL, NULL, -1),
              LINE1 LINE2 LINE3 "server.4=198.18.0.4:2888:3888:observer;0.0.0.0:2181\n"
              VERSION_LINE);
    /* observer -> participant (4 is a synced follower: "remove, then add
     * back" leaves it one, zookeeperReconfig.md) */
    leader(&f, THREE "server.4=198.18.0.4:2888:3888:observer;2181\n");
    want_text(&f, plan(&f, "server.4=198.18.0.4:2888:3888:participant;2181", NULL, NULL, -1),
              LINE1 LINE2 LINE3 "server.4=198.18.0.4:2888:3888:participant;0.0.0.0:2181\n"
              VERSION_LINE);
    /* new ports for a member: its old addresses do not conflict with it */
    leader(&f, THREE);
    want_text(&f, plan(&f, "server.2=198.18.0.2:3888:2888;198.18.0.2:2888", NULL, NULL, -1),
              LINE1 "server.2=198.18.0.2:3888:2888:participant;198.18.0.2:2888\n" LINE3
              VERSION_LINE);
}

static void test_nothing_changes(void **state)
{
    struct fx f;
    /* no joiners, no leavers: the same members under a new version, as
     * ZooKeeper commits it */
    leader(&f, THREE);
    want_text(&f, plan(&f, NULL, NULL, NULL, -1), LINE1 LINE2 LINE3 VERSION_LINE);
    want_text(&f, plan(&f, "", " , ", NULL, -1), LINE1 LINE2 LINE3 VERSION_LINE);
}

/* ------------------------------------------------------------------ versions, state */

static void test_versions(void **state)
{
    struct fx f;
    leader(&f, THREE);
    want_error(&f, plan(&f, JOIN4, NULL, NULL, CUR_VERSION - 1), ZK_EBADVERSION,
               "reconfig from version 0x100000002: the last seen configuration is version "
               "0x100000003");
    want_error(&f, plan(&f, JOIN4, NULL, NULL, 0), ZK_EBADVERSION,
               "reconfig from version 0x0: the last seen configuration is version 0x100000003");
    want_text(&f, plan(&f, JOIN4, NULL, NULL, CUR_VERSION), LINE1 LINE2 LINE3 LINE4
              VERSION_LINE);
    want_text(&f, plan(&f, JOIN4, NULL, NULL, -1), LINE1 LINE2 LINE3 LINE4 VERSION_LINE);
    /* the version is checked before the request is read */
    want_error(&f, plan(&f, "garbage", NULL, NULL, 7), ZK_EBADVERSION,
               "reconfig from version 0x7: the last seen configuration is version 0x100000003");
}

static void test_disabled_and_in_progress(void **state)
{
    struct fx f;
    leader(&f, THREE);
    f.l.reconfig_enabled = false;
    f.l.in_progress = true;
    want_error(&f, plan(&f, JOIN4, NULL, NULL, 5), ZK_ERECONFIGDISABLED,
               "reconfig is disabled (reconfigEnabled=false)");
    f.l.reconfig_enabled = true;
    want_error(&f, plan(&f, JOIN4, NULL, NULL, 5), ZK_ERECONFIGINPROGRESS,
               "another reconfig is in progress");
}

/* ------------------------------------------------------------------ malformed */

static void test_malformed_joining(void **state)
{
    static const struct {
        const char *joining;
        int code;
        const char *msg;
    } cases[] = {
        { "server.4", ZK_EBADARGUMENTS, "joiningServers: 'server.4' is not server.N=host:"
          "quorumPort:electionPort[:participant|observer];[clientAddress:]clientPort" },
        { "server.4=", ZK_EBADARGUMENTS, "joiningServers: 'server.4=' is not server.N=host:"
          "quorumPort:electionPort[:participant|observer];[clientAddress:]clientPort" },
        { "server.4=a:1:2;3=x", ZK_EBADARGUMENTS, "joiningServers: 'server.4=a:1:2;3=x' is "
          "not server.N=host:quorumPort:electionPort[:participant|observer];"
          "[clientAddress:]clientPort" },
        { "server.4=198.18.0.4:2888", ZK_EBADARGUMENTS, "joiningServers: server.4: "
          "'198.18.0.4:2888' is not host:quorumPort:electionPort[:participant|observer]"
          "[;[clientAddress:]clientPort]" },
        { "server.4=198.18.0.4:2888:3888:leader;2181", ZK_EBADARGUMENTS, "joiningServers: "
          "server.4: '198.18.0.4:2888:3888:leader;2181' is not host:quorumPort:electionPort"
          "[:participant|observer][;[clientAddress:]clientPort]" },
        { "server.4=198.18.0.4:2888:3888;2181;2182", ZK_EBADARGUMENTS, "joiningServers: "
          "server.4: '198.18.0.4:2888:3888;2181;2182' is not host:quorumPort:electionPort"
          "[:participant|observer][;[clientAddress:]clientPort]" },
        { "server.4=198.18.0.4:2888:3888", ZK_EBADARGUMENTS, "joiningServers: server.4: a "
          "joining server needs its client port ('198.18.0.4:2888:3888;[clientAddress:]"
          "clientPort')" },
        { "server.4=198.18.0.4:2888:2888;2181", ZK_EBADARGUMENTS, "joiningServers: server.4: "
          "'198.18.0.4:2888:2888;2181': the quorum and election ports must differ" },
        { "server.4=a:1:2|b:1:2;2181", ZK_EBADARGUMENTS, "joiningServers: server.4: several "
          "addresses for one server (multiAddress) are not supported" },
        { "server.0=198.18.0.4:2888:3888;2181", ZK_EBADARGUMENTS, "joiningServers: server.0: "
          "'0' is not a server id (1-255)" },
        { "server.256=198.18.0.4:2888:3888;2181", ZK_EBADARGUMENTS, "joiningServers: "
          "server.256: '256' is not a server id (1-255)" },
        { "server.+4=198.18.0.4:2888:3888;2181", ZK_EBADARGUMENTS, "joiningServers: server.+4: "
          "'+4' is not a server id (1-255)" },
        { "server.255=198.18.0.4:2888:3888;2181", ZK_EBADARGUMENTS, "joiningServers: "
          "server.255: ids above 254 are not allowed with zookeeper.extendedTypesEnabled=true" },
        /* Long.parseLong fails uncaught in ZooKeeper: a marshalling error */
        { "server.x=198.18.0.4:2888:3888;2181", ZK_EBADARGUMENTS, "joiningServers: "
          "'server.x=198.18.0.4:2888:3888;2181': 'x' is not a server id" },
        { "server.99999999999999999999=h:1:2;3", ZK_EBADARGUMENTS, "joiningServers: "
          "'server.99999999999999999999=h:1:2;3': '99999999999999999999' is not a server id" },
        { JOIN4 "," JOIN4, ZK_EBADARGUMENTS, "joiningServers: server.4 is given twice" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct fx f;
        leader(&f, THREE);
        int rc = plan(&f, cases[i].joining, NULL, NULL, -1);
        if (rc != cases[i].code || strcmp(f.msg, cases[i].msg) != 0)
            fail_msg("case %zu (%s): got %d '%s'", i, cases[i].joining, rc, f.msg);
    }
    struct fx f;
    leader(&f, THREE);
    f.l.extended_types = false; /* 255 is a good id then */
    want_text(&f, plan(&f, "server.255=198.18.0.4:2888:3888;2181", NULL, NULL, -1),
              LINE1 LINE2 LINE3 "server.255=198.18.0.4:2888:3888:participant;0.0.0.0:2181\n"
              VERSION_LINE);
}

static void test_malformed_leaving(void **state)
{
    struct fx f;
    leader(&f, THREE);
    want_error(&f, plan(&f, NULL, "2,x", NULL, -1), ZK_EBADARGUMENTS,
               "leavingServers: 'x' is not a server id");
    want_error(&f, plan(&f, NULL, "server.2", NULL, -1), ZK_EBADARGUMENTS,
               "leavingServers: 'server.2' is not a server id");
    /* leaving is read first: its error wins over the joiner's */
    want_error(&f, plan(&f, "server.4", "1.5", NULL, -1), ZK_EBADARGUMENTS,
               "leavingServers: '1.5' is not a server id");
}

static void test_address_conflicts(void **state)
{
    struct fx f;
    leader(&f, THREE);
    want_error(&f, plan(&f, "server.4=198.18.0.3:2888:3999;2182", NULL, NULL, -1),
               ZK_EBADARGUMENTS, "joiningServers: server.4: 198.18.0.3:2888 is also an address "
               "of server.3");
    /* any of quorum, client, election against any of the other's */
    want_error(&f, plan(&f, "server.4=198.18.0.4:2888:3888;198.18.0.2:3888", NULL, NULL, -1),
               ZK_EBADARGUMENTS, "joiningServers: server.4: 198.18.0.2:3888 is also an address "
               "of server.2");
    /* against the joiners before it, and host names compare without case */
    want_error(&f, plan(&f, "server.4=zk4:2888:3888;2181,server.5=ZK4:2889:2888;2181", NULL,
                        NULL, -1), ZK_EBADARGUMENTS, "joiningServers: server.5: ZK4:2888 is "
               "also an address of server.4");
    /* a member that leaves frees its addresses */
    want_text(&f, plan(&f, "server.4=198.18.0.3:2888:3888;2181", "3", NULL, -1),
              LINE1 LINE2 "server.4=198.18.0.3:2888:3888:participant;0.0.0.0:2181\n"
              VERSION_LINE);
    /* loopback and wildcard addresses are not compared (QuorumServer's
     * excludedSpecialAddresses) */
    leader(&f, "server.1=127.0.0.1:2888:3888;2181\nserver.2=127.0.0.1:2889:3889;2182\n");
    want_text(&f, plan(&f, "server.3=localhost:2888:3889;2181", NULL, NULL, -1),
              "server.1=127.0.0.1:2888:3888:participant;0.0.0.0:2181\n"
              "server.2=127.0.0.1:2889:3889:participant;0.0.0.0:2182\n"
              "server.3=localhost:2888:3889:participant;0.0.0.0:2181\n" VERSION_LINE);
}

static void test_too_many_servers(void **state)
{
    char members[4096] = "", joining[256];
    size_t used = 0;
    for (int i = 1; i <= CONFIG_SERVERS_MAX; i++)
        used += (size_t)snprintf(members + used, sizeof members - used,
                                 "server.%d=10.0.1.%d:2888:3888;2181\n", i, i);
    struct fx f;
    leader(&f, members);
    assert_int_equal(f.l.n_members, CONFIG_SERVERS_MAX);
    snprintf(joining, sizeof joining, "server.%d=198.18.1.99:2888:3888;2181",
             CONFIG_SERVERS_MAX + 1);
    want_error(&f, plan(&f, joining, NULL, NULL, -1), ZK_EBADARGUMENTS,
               "joiningServers: server.33: more than 32 servers");
    /* replacing one is no growth */
    assert_int_equal(plan(&f, "server.32=198.18.1.32:2889:3889;2182", NULL, NULL, -1), ZK_OK);
    assert_int_equal(f.n_out, CONFIG_SERVERS_MAX);
    assert_int_equal(f.out[31].id, 32);
    assert_int_equal(f.out[31].quorum_port, 2889);
    assert_int_equal(f.out[31].client_port, 2182);
}

/* ------------------------------------------------------------------ bulk */

static void test_new_members(void **state)
{
    struct fx f;
    leader(&f, THREE);
    /* commas or newlines; any order; the version line is ignored */
    want_text(&f, plan(&f, NULL, NULL, "server.3=198.18.0.3:2888:3888;2181,version=1f,"
                       "server.1=198.18.0.1:2888:3888;2181\nserver.5=198.18.0.5:2888:3888:observer",
                       -1),
              LINE1 LINE3 "server.5=198.18.0.5:2888:3888:observer\n" VERSION_LINE);
    assert_string_equal(f.out[0].where, "newMembers:3");
    assert_string_equal(f.out[2].where, "newMembers:4");
    /* joiningServers and leavingServers are ignored when newMembers is given */
    want_text(&f, plan(&f, JOIN4, "1", THREE, -1), LINE1 LINE2 LINE3 VERSION_LINE);
    /* no client port needed here; an address may be any member's (no check
     * in parseDynamicConfig) */
    want_text(&f, plan(&f, NULL, NULL, "server.1=198.18.0.1:2888:3888,server.2=198.18.0.1:2888:3889",
                       -1),
              "server.1=198.18.0.1:2888:3888:participant\n"
              "server.2=198.18.0.1:2888:3889:participant\n" VERSION_LINE);
}

static void test_new_members_errors(void **state)
{
    static const struct {
        const char *members;
        bool standalone;
        int code;
        const char *msg;
    } cases[] = {
        { "", true, ZK_EBADARGUMENTS, "the new configuration would have 0 participants: it "
          "needs at least 2 (standaloneEnabled=true)" },
        { "server.1=198.18.0.1:2888:3888", true, ZK_EBADARGUMENTS, "the new configuration would "
          "have 1 participant: it needs at least 2 (standaloneEnabled=true)" },
        { "server.1=198.18.0.1:2888:3888,tickTime=2000", true, ZK_EBADARGUMENTS, "newMembers:2: "
          "'tickTime' does not belong in a dynamic configuration file (server.N and version "
          "lines only)" },
        { "server.1=198.18.0.1:2888:3888,group.1=1", true, ZK_EBADARGUMENTS, "newMembers:2: "
          "'group.1': hierarchical quorums (group.N, weight.N) are not supported: larchd "
          "counts a majority of participants" },
        { "server.1=a:1:2,server.2=b:1:2,server.1=c:1:2", true, ZK_EBADARGUMENTS,
          "newMembers:3: server.1: given twice (first at newMembers:1)" },
        { "server.1=a:1", true, ZK_EBADARGUMENTS, "newMembers:1: server.1: 'a:1' is not "
          "host:quorumPort:electionPort[:participant|observer][;[clientAddress:]clientPort]" },
        { "server.300=a:1:2", true, ZK_EBADARGUMENTS, "newMembers:1: server.300: '300' is "
          "not a server id (1-255)" },
        { "server.1=a:1:2,server.255=b:1:2", true, ZK_EBADARGUMENTS, "newMembers: server.255: "
          "ids above 254 are not allowed with zookeeper.extendedTypesEnabled=true" },
        /* ZooKeeper fails these on unchecked exceptions (ZMARSHALLINGERROR):
         * they are bad arguments */
        { "server.x=a:1:2,server.1=a:", true, ZK_EBADARGUMENTS, "newMembers:1: server.x: "
          "'x' is not a server id (1-255)" },
        { "server.1=a:1:2:observer", true, ZK_EBADARGUMENTS, "newMembers: observers "
          "without participants" },
        { "server.1=a:1:2,server.2=b:1:2:observer", true, ZK_EBADARGUMENTS, "newMembers: "
          "observers with a single participant (standaloneEnabled=true)" },
        { "", false, ZK_EBADARGUMENTS, "newMembers: no participant (standaloneEnabled=false "
          "needs at least one)" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct fx f;
        leader(&f, THREE);
        f.l.standalone_enabled = cases[i].standalone;
        int rc = plan(&f, NULL, NULL, cases[i].members, -1);
        if (rc != cases[i].code || strcmp(f.msg, cases[i].msg) != 0)
            fail_msg("case %zu (%s): got %d '%s'", i, cases[i].members, rc, f.msg);
    }
}

/* ------------------------------------------------------------------ the new membership */

static void test_voters_left(void **state)
{
    struct fx f;
    leader(&f, THREE "server.4=198.18.0.4:2888:3888:observer\n");
    want_error(&f, plan(&f, NULL, "1,2,3", NULL, -1), ZK_EBADARGUMENTS,
               "the new configuration would have 0 participants: it needs at least 2 "
               "(standaloneEnabled=true)");
    want_error(&f, plan(&f, NULL, "2,3", NULL, -1), ZK_EBADARGUMENTS,
               "the new configuration would have 1 participant: it needs at least 2 "
               "(standaloneEnabled=true)");
    /* demoting voters counts too */
    want_error(&f, plan(&f, "server.2=198.18.0.2:2888:3888:observer;2181", "3", NULL, -1),
               ZK_EBADARGUMENTS, "the new configuration would have 1 participant: it needs "
               "at least 2 (standaloneEnabled=true)");
    f.l.standalone_enabled = false;
    want_text(&f, plan(&f, NULL, "2,3", NULL, -1),
              LINE1 "server.4=198.18.0.4:2888:3888:observer\n" VERSION_LINE);
    want_error(&f, plan(&f, NULL, "1,2,3", NULL, -1), ZK_EBADARGUMENTS,
               "the new configuration would have 0 participants: it needs at least 1");
}

static void test_synced_quorum(void **state)
{
    struct fx f;
    leader(&f, THREE);
    /* 5 voters need 3: the leader and follower 2 are 2 */
    set_synced(&f, 1, (const uint32_t[]){ 2 });
    want_error(&f, plan(&f, JOIN4 ",server.5=198.18.0.5:2888:3888;2181", NULL, NULL, -1),
               ZK_ENEWCONFIGNOQUORUM, "2 of the new configuration's 5 participants are this "
               "leader or followers synced with it: 3 are needed");
    /* repeats, the leader's id, ids of no voter count nothing */
    set_synced(&f, 5, (const uint32_t[]){ 2, 2, 1, 99, 100000 });
    want_error(&f, plan(&f, JOIN4 ",server.5=198.18.0.5:2888:3888;2181", NULL, NULL, -1),
               ZK_ENEWCONFIGNOQUORUM, "2 of the new configuration's 5 participants are this "
               "leader or followers synced with it: 3 are needed");
    /* a joiner synced as a (non-voting) follower counts */
    set_synced(&f, 2, (const uint32_t[]){ 2, 4 });
    want_text(&f, plan(&f, JOIN4 ",server.5=198.18.0.5:2888:3888;2181", NULL, NULL, -1),
              LINE1 LINE2 LINE3 LINE4
              "server.5=198.18.0.5:2888:3888:participant;0.0.0.0:2181\n" VERSION_LINE);
    /* a leader that leaves counts for nothing: voters 2, 3 need both */
    set_synced(&f, 1, (const uint32_t[]){ 2 });
    want_error(&f, plan(&f, NULL, "1", NULL, -1), ZK_ENEWCONFIGNOQUORUM,
               "1 of the new configuration's 2 participants are this leader or followers "
               "synced with it: 2 are needed");
    set_synced(&f, 2, (const uint32_t[]){ 3, 2 });
    want_text(&f, plan(&f, NULL, "1", NULL, -1), LINE2 LINE3 VERSION_LINE);
    /* a follower this reconfig makes an observer votes no more: voters 1, 2 */
    leader(&f, THREE);
    set_synced(&f, 1, (const uint32_t[]){ 3 });
    want_error(&f, plan(&f, "server.3=198.18.0.3:2888:3888:observer;2181", NULL, NULL, -1),
               ZK_ENEWCONFIGNOQUORUM, "1 of the new configuration's 2 participants are this "
               "leader or followers synced with it: 2 are needed");
    /* zookeeperReconfig.md: A leads, B crashed, C follows, D observes; D
     * cannot become a participant in one step (an observer is no follower) */
    leader(&f, THREE "server.4=198.18.0.4:2888:3888:observer;2181\n");
    set_synced(&f, 1, (const uint32_t[]){ 3 });
    want_error(&f, plan(&f, "server.4=198.18.0.4:2888:3888;2181", NULL, NULL, -1),
               ZK_ENEWCONFIGNOQUORUM, "2 of the new configuration's 4 participants are this "
               "leader or followers synced with it: 3 are needed");
    /* the voter-count rule is checked before the quorum */
    set_synced(&f, 0, NULL);
    want_error(&f, plan(&f, NULL, "2,3", NULL, -1), ZK_EBADARGUMENTS,
               "the new configuration would have 1 participant: it needs at least 2 "
               "(standaloneEnabled=true)");
}

/* ------------------------------------------------------------------ the shared parser */

static void test_parse_server(void **state)
{
    struct config_server sv;
    char msg[CONFIG_MSG_MAX];
    assert_int_equal(config_parse_server("7", " [::1]:2888:3888:Observer ; 198.18.1.1:2181 ", &sv,
                                         msg, sizeof msg), CONFIG_SERVER_OK);
    assert_int_equal(sv.id, 7);
    assert_string_equal(sv.host, "::1");
    assert_int_equal(sv.quorum_port, 2888);
    assert_int_equal(sv.election_port, 3888);
    assert_true(sv.observer);
    assert_string_equal(sv.client_address, "198.18.1.1");
    assert_int_equal(sv.client_port, 2181);
    assert_string_equal(sv.where, "");
    assert_int_equal(config_parse_server("x", "a:1:2", &sv, msg, sizeof msg),
                     CONFIG_SERVER_BAD_ID);
    assert_string_equal(msg, "'x' is not a server id (1-255)");
    assert_int_equal(config_parse_server("", "a:1:2", &sv, msg, sizeof msg),
                     CONFIG_SERVER_BAD_ID);
    assert_int_equal(config_parse_server("-3", "a:1:2", &sv, msg, sizeof msg),
                     CONFIG_SERVER_BAD_ID);
    assert_int_equal(config_parse_server("3", "a:7:7", &sv, msg, sizeof msg),
                     CONFIG_SERVER_BAD_VALUE);
    assert_string_equal(msg, "'a:7:7': the quorum and election ports must differ");
    assert_int_equal(sv.id, 3); /* the id was good */
    char long_value[CONFIG_SERVER_TEXT_MAX + 8];
    memset(long_value, 'h', sizeof long_value - 1);
    long_value[sizeof long_value - 1] = '\0';
    assert_int_equal(config_parse_server("3", long_value, &sv, NULL, 0),
                     CONFIG_SERVER_BAD_VALUE);
    /* zoo.cfg goes through the same parser */
    struct config c;
    config_defaults(&c);
    const char *cfg = "server.1=a:7:7\n";
    assert_int_equal(config_parse_text(&c, cfg, strlen(cfg), "zoo.cfg", NULL, NULL), -1);
    assert_int_equal(c.n_servers, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_participant),
        cmocka_unit_test(test_add_observer),
        cmocka_unit_test(test_remove),
        cmocka_unit_test(test_change_role_and_address),
        cmocka_unit_test(test_nothing_changes),
        cmocka_unit_test(test_versions),
        cmocka_unit_test(test_disabled_and_in_progress),
        cmocka_unit_test(test_malformed_joining),
        cmocka_unit_test(test_malformed_leaving),
        cmocka_unit_test(test_address_conflicts),
        cmocka_unit_test(test_too_many_servers),
        cmocka_unit_test(test_new_members),
        cmocka_unit_test(test_new_members_errors),
        cmocka_unit_test(test_voters_left),
        cmocka_unit_test(test_synced_quorum),
        cmocka_unit_test(test_parse_server),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
