/*
 * reconfig — what a ZooKeeper reconfig request (opcode 16) asks of the
 * membership, decided as ZooKeeper 3.8's leader decides it
 * (PrepRequestProcessor.pRequest2Txn, case OpCode.reconfig, with
 * QuorumPeerConfig.parseDynamicConfig, QuorumServer and QuorumMaj): the
 * request either fails with ZooKeeper's error code, or yields the new
 * membership, which larchd then proposes through its Raft ensemble and
 * stores in /zookeeper/config (config_servers_text with the reconfig's zxid
 * as version, as ZooKeeper versions a config by the zxid that made it).
 *
 * Two forms, as in zookeeper.jute's ReconfigRequest:
 *   incremental  newMembers null: leavingServers (comma-separated ids) are
 *                removed from the current membership, then each of
 *                joiningServers ("server.N=host:quorumPort:electionPort
 *                [:role];[clientAddress:]clientPort", comma-separated) is
 *                added, or replaces server N (a new address or role);
 *   bulk         newMembers given: the whole new membership, server.N and
 *                version lines separated by commas or newlines (the version
 *                is ignored: the new one is the reconfig's zxid).
 * What the leader must know (its current configuration, who is synced with
 * it) comes in as struct reconfig_leader, so the decision is a pure
 * function of its inputs.
 *
 * The caller (larchd's ensemble driver, server/reconfig_ops.c) does the
 * rest: the session check, the superuser check (ZooKeeper's WRITE check
 * on /zookeeper/config, made after every check below, so a refused
 * reconfig answers its own error before ZNOAUTH), and proposing,
 * committing and answering the change. A standalone server never gets
 * here: it answers RECONFIGDISABLED.
 *
 * Pure: no I/O, no clocks, no globals; allocates only scratch it frees (the
 * bulk form's parse). Safe from any thread on distinct arguments. Every
 * buffer is the caller's; nothing is kept after return.
 */
#ifndef LARCH_SERVER_RECONFIG_H
#define LARCH_SERVER_RECONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/config.h"

/* ReconfigRequest's fields, decoded. NULL is jute's null string; a string
 * is NUL-terminated (a jute string holding a NUL byte is malformed: the
 * caller answers ZBADARGUMENTS without calling reconfig_plan). */
struct reconfig_request {
    const char *joining;     /* joiningServers */
    const char *leaving;     /* leavingServers */
    const char *new_members; /* newMembers: not NULL selects the bulk form */
    int64_t from_config;     /* curConfigId: -1 = whatever the current version */
};

/* The leader's state when the request reaches it. */
struct reconfig_leader {
    /* the last configuration this leader has seen (proposed or committed;
     * ZooKeeper's lastSeenQuorumVerifier), with its version */
    const struct config_server *members;
    uint32_t n_members; /* at most CONFIG_SERVERS_MAX */
    int64_t version;
    /* a reconfig is proposed but not yet committed (ZooKeeper compares
     * lastSeen's version with the committed one) */
    bool in_progress;
    bool reconfig_enabled;   /* reconfigEnabled */
    bool standalone_enabled; /* standaloneEnabled: a new config then needs 2 voters */
    bool extended_types;     /* zookeeper.extendedTypesEnabled: ids up to 254 only */
    uint32_t leader_id;      /* this server's id */
    /* followers connected to this leader and synced with it (ZooKeeper's
     * forwardingFollowers whose LearnerHandler.synced() holds); observers
     * are not followers. Ids that are not voters of the new configuration
     * are ignored, as are repeats and the leader's own id. */
    const uint32_t *synced_ids;
    uint32_t n_synced;
};

/* Decides req against l. Returns ZK_OK (0) with out[0, *n_out) the new
 * membership in id order (out has room for CONFIG_SERVERS_MAX; members
 * that stay keep their where, joiners get "joiningServers", bulk members
 * "newMembers:<item>"), or a ZooKeeper error code (enum zk_err, negative)
 * with msg (msg_len bytes, may be 0) naming the problem and out, *n_out
 * unspecified:
 *   ZRECONFIGDISABLED    reconfigEnabled is false
 *   ZRECONFIGINPROGRESS  l->in_progress
 *   ZBADVERSION          from_config is neither -1 nor l->version
 *   ZBADARGUMENTS        a malformed request or spec, an address another
 *                        member uses, too few voters left (2 with
 *                        standaloneEnabled, else 1), an id outside
 *                        1..255 (254 with extended types), more than
 *                        CONFIG_SERVERS_MAX members, an id given twice,
 *                        an id that is no number, a bulk membership with
 *                        observers but too few voters (ZooKeeper answers
 *                        those last two ZMARSHALLINGERROR, from exceptions
 *                        it does not catch; they are bad arguments)
 *   ZNEWCONFIGNOQUORUM   the leader and its synced followers are no
 *                        majority of the new configuration's voters
 *   ZSYSTEMERROR         out of memory
 * A request that changes nothing succeeds (ZooKeeper commits it under a
 * new version). */
int reconfig_plan(const struct reconfig_leader *l, const struct reconfig_request *req,
                  struct config_server *out, uint32_t *n_out, char *msg, size_t msg_len);

#endif /* LARCH_SERVER_RECONFIG_H */
