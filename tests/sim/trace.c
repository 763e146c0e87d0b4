/* trace — see trace.h. */
#include "tests/sim/trace.h"

#include <inttypes.h>
#include <string.h>

#include "replication/raft.h"

void trace_init(struct trace *t, bool print, FILE *out)
{
    memset(t, 0, sizeof(*t));
    t->print = print;
    t->out = out;
}

const char *trace_zxid(int64_t zxid, char buf[24])
{
    snprintf(buf, 24, "%" PRIu32 ":%" PRIu32, raft_zxid_term(zxid), raft_zxid_counter(zxid));
    return buf;
}

void trace_msg(struct trace *t, int64_t step, uint16_t kind, const struct raft_msg *m, uint8_t why)
{
    struct trace_event ev = {
        .step = step, .kind = kind, .node = (uint8_t)m->from, .peer = (uint8_t)m->to,
        .mtype = m->type, .flags = (uint8_t)((m->reject ? 1 : 0) | (m->pre_vote ? 2 : 0)),
        .term = m->term, .why = why,
    };
    switch (m->type) {
    case RAFT_MSG_VOTE_REQ:
        ev.a = m->last_zxid;
        break;
    case RAFT_MSG_APPEND:
        ev.a = m->prev_zxid;
        ev.b = m->commit_zxid;
        ev.c = (int64_t)m->n_entries;
        break;
    case RAFT_MSG_APPEND_RESP:
        ev.a = m->match_zxid;
        ev.b = m->hint_zxid;
        ev.c = m->snap_zxid; /* > 0: raft_request_snapshot waits */
        break;
    case RAFT_MSG_SNAP:
        ev.a = m->snap_zxid;
        break;
    case RAFT_MSG_READ_INDEX:
    case RAFT_MSG_READ_INDEX_RESP:
        ev.a = (int64_t)m->read_ctx;
        ev.b = m->commit_zxid;
        break;
    default:
        break;
    }
    trace_add(t, &ev);
}

/* The message part of a send/deliver/drop line. */
static void format_msg(const struct trace_event *ev, char *buf, size_t len)
{
    char z1[24], z2[24], z3[24];
    const char *flags = (ev->flags & 2) ? (ev->flags & 1 ? " pre reject" : " pre")
                                        : (ev->flags & 1 ? " reject" : "");
    const char *name = raft_msg_type_name(ev->mtype);
    switch (ev->mtype) {
    case RAFT_MSG_VOTE_REQ:
        snprintf(buf, len, "%s t=%u%s last=%s", name, ev->term, flags, trace_zxid(ev->a, z1));
        break;
    case RAFT_MSG_APPEND:
        snprintf(buf, len, "%s t=%u prev=%s commit=%s n=%" PRId64, name, ev->term,
                 trace_zxid(ev->a, z1), trace_zxid(ev->b, z2), ev->c);
        break;
    case RAFT_MSG_APPEND_RESP:
        if (ev->c > 0)
            snprintf(buf, len, "%s t=%u%s match=%s hint=%s wants snap>=%s", name, ev->term,
                     flags, trace_zxid(ev->a, z1), trace_zxid(ev->b, z2),
                     trace_zxid(ev->c, z3));
        else
            snprintf(buf, len, "%s t=%u%s match=%s hint=%s", name, ev->term, flags,
                     trace_zxid(ev->a, z1), trace_zxid(ev->b, z2));
        break;
    case RAFT_MSG_SNAP:
        snprintf(buf, len, "%s t=%u snap=%s", name, ev->term, trace_zxid(ev->a, z1));
        break;
    case RAFT_MSG_READ_INDEX:
    case RAFT_MSG_READ_INDEX_RESP:
        snprintf(buf, len, "%s t=%u%s ctx=%" PRId64 " commit=%s", name, ev->term, flags, ev->a,
                 trace_zxid(ev->b, z1));
        break;
    default:
        snprintf(buf, len, "%s t=%u%s", name, ev->term, flags);
        break;
    }
}

static const char *drop_why(uint8_t why)
{
    switch (why) {
    case TR_DROP_RANDOM:
        return "lost";
    case TR_DROP_LINK:
        return "link down";
    case TR_DROP_DOWN:
        return "node down";
    case TR_DROP_POOL_FULL:
        return "pool full";
    }
    return "?";
}

static const char *crash_why(int64_t why)
{
    switch (why) {
    case TR_CRASH_RANDOM:
        return "crash";
    case TR_CRASH_IN_READY:
        return "crash mid-ready";
    case TR_CRASH_APPEND_ERR:
        return "ENOSPC on append";
    case TR_CRASH_SYNC_ERR:
        return "EIO on fdatasync";
    }
    return "?";
}

static const char *partition_name(int64_t kind)
{
    switch (kind) {
    case TR_PART_SPLIT:
        return "split";
    case TR_PART_ONE_WAY:
        return "one-way";
    case TR_PART_BRIDGE:
        return "bridge";
    case TR_PART_ISOLATE:
        return "isolate";
    }
    return "?";
}

static const char *gone_why(int64_t why)
{
    switch (why) {
    case TR_GONE_WRITE:
        return "a write overwrote it";
    case TR_GONE_CRASH:
        return "it was in memory only, and the node crashed";
    case TR_GONE_LED:
        return "the node became leader before a digest showed it (taken back: out of scope)";
    case TR_GONE_SNAP:
        return "a snapshot from the leader replaced the state";
    }
    return "?";
}

/* "{1,2,4}" from a mask with bit id set for each id (up to 15). */
static const char *format_ids(uint32_t mask, char *buf, size_t len)
{
    size_t at = 0;
    buf[at++] = '{';
    for (uint32_t id = 1; id < 16 && at + 5 < len; id++)
        if (mask & (1u << id))
            at += (size_t)snprintf(buf + at, len - at, "%s%u", at > 1 ? "," : "", id);
    snprintf(buf + at, len - at, "}");
    return buf;
}

/* "voters {1,2} observers {4}" from a trace word (voters | observers << 16). */
static const char *format_half(int64_t word, char *buf, size_t len)
{
    char v[64], o[64];
    uint32_t observers = (uint32_t)(word >> 16) & 0xffffu;
    if (observers)
        snprintf(buf, len, "voters %s observers %s", format_ids((uint32_t)word & 0xffffu, v, 64),
                 format_ids(observers, o, 64));
    else
        snprintf(buf, len, "voters %s", format_ids((uint32_t)word & 0xffffu, v, 64));
    return buf;
}

static const char *err_name(int64_t rc)
{
    switch (rc) {
    case RAFT_ENOTLEADER:
        return "ENOTLEADER";
    case RAFT_ELIMIT:
        return "ELIMIT";
    case RAFT_ENOMEM:
        return "ENOMEM";
    case RAFT_EINVAL:
        return "EINVAL";
    case RAFT_EBUSY:
        return "EBUSY";
    }
    return "?";
}

const char *trace_membership(int64_t b, int64_t c, char *buf, size_t len)
{
    char h1[80], h2[80];
    if (c >> 32)
        snprintf(buf, len, "JOINT new %s, old %s", format_half(b, h1, sizeof(h1)),
                 format_half(c & 0xffffffff, h2, sizeof(h2)));
    else
        snprintf(buf, len, "%s", format_half(b, h1, sizeof(h1)));
    return buf;
}

/* Membership events. */
static void format_membership(const struct trace_event *ev, char *buf, size_t len)
{
    char z[24], h[180];
    if (ev->kind == TR_RECONFIG && ev->a < 0)
        snprintf(buf, len, "n%u propose membership %s: refused (%s)", ev->node,
                 format_half(ev->b, h, sizeof(h)), err_name(ev->a));
    else if (ev->kind == TR_RECONFIG)
        snprintf(buf, len, "n%u propose membership %s: joint entry %s", ev->node,
                 format_half(ev->b, h, sizeof(h)), trace_zxid(ev->a, z));
    else
        snprintf(buf, len, "n%u membership of %s: %s", ev->node, trace_zxid(ev->a, z),
                 trace_membership(ev->b, ev->c, h, sizeof(h)));
}

/* A batch handed to the async log thread. */
static void format_log_queue(const struct trace_event *ev, char *buf, size_t len)
{
    char z1[24], z2[24], z3[24], trunc[48] = "";
    if (ev->flags & 1)
        snprintf(trunc, sizeof(trunc), " truncate after %s%s", trace_zxid(ev->a, z1),
                 ev->term ? "," : "");
    if (ev->term)
        snprintf(buf, len, "n%u queue log batch:%s append %s..%s (%u)", ev->node, trunc,
                 trace_zxid(ev->b, z2), trace_zxid(ev->c, z3), ev->term);
    else
        snprintf(buf, len, "n%u queue log batch:%s", ev->node, trunc);
}

/* Node-local events, one line each. */
static void format_node(const struct trace_event *ev, char *buf, size_t len)
{
    char z1[24], z2[24];
    switch (ev->kind) {
    case TR_ROLE:
        snprintf(buf, len, "n%u %s t=%u leader=%" PRId64, ev->node,
                 raft_role_name((enum raft_role)ev->mtype), ev->term, ev->a);
        break;
    case TR_HARD:
        snprintf(buf, len, "n%u persist t=%u vote=%" PRId64 " commit=%s", ev->node, ev->term,
                 ev->a, trace_zxid(ev->b, z1));
        break;
    case TR_APPEND:
        snprintf(buf, len, "n%u append %s..%s (%" PRId64 ")", ev->node, trace_zxid(ev->a, z1),
                 trace_zxid(ev->b, z2), ev->c);
        break;
    case TR_SYNC:
        snprintf(buf, len, "n%u fdatasync through %s", ev->node, trace_zxid(ev->a, z1));
        break;
    case TR_TRUNCATE:
        snprintf(buf, len, "n%u truncate after %s", ev->node, trace_zxid(ev->a, z1));
        break;
    case TR_APPLY:
        snprintf(buf, len, "n%u apply %s digest=%016" PRIx64, ev->node, trace_zxid(ev->a, z1),
                 (uint64_t)ev->b);
        break;
    case TR_SNAP_SEND:
        snprintf(buf, len, "n%u attach snapshot %s for n%u", ev->node, trace_zxid(ev->a, z1),
                 ev->peer);
        break;
    case TR_SNAP_INSTALL:
        snprintf(buf, len, "n%u install snapshot %s", ev->node, trace_zxid(ev->a, z1));
        break;
    case TR_COMPACT:
        snprintf(buf, len, "n%u snapshot at %s, compact keep=%" PRId64 "%s", ev->node,
                 trace_zxid(ev->a, z1), ev->b, ev->c ? " (a follower wants one)" : "");
        break;
    case TR_CORRUPT:
        snprintf(buf, len, "n%u CORRUPT: key %" PRId64 " flipped in its state machine at %s",
                 ev->node, ev->a, trace_zxid(ev->b, z1));
        break;
    case TR_CORRUPT_GONE:
        snprintf(buf, len, "n%u corruption of step %" PRId64 " gone: %s", ev->node, ev->b,
                 gone_why(ev->a));
        break;
    case TR_MISMATCH:
        snprintf(buf, len, "n%u digest at %s is %016" PRIx64 ", leader n%u's %016" PRIx64 ": %s",
                 ev->node, trace_zxid(ev->a, z1), (uint64_t)ev->b, ev->peer, (uint64_t)ev->c,
                 (ev->flags & 4) ? "IGNORED (--break no-resync)" : "raft_request_snapshot");
        break;
    case TR_RESYNC:
        if (ev->b >= 0)
            snprintf(buf, len, "n%u RESYNC from the leader's snapshot at %s (had applied %s; "
                     "corrupt since step %" PRId64 ")", ev->node, trace_zxid(ev->a, z1),
                     trace_zxid(ev->c, z2), ev->b);
        else
            snprintf(buf, len, "n%u RESYNC from the leader's snapshot at %s (had applied %s)",
                     ev->node, trace_zxid(ev->a, z1), trace_zxid(ev->c, z2));
        break;
    case TR_RECONFIG:
    case TR_CONFIG:
        format_membership(ev, buf, len);
        break;
    case TR_LOG_QUEUE:
        format_log_queue(ev, buf, len);
        break;
    case TR_LOG_SYNCED:
        snprintf(buf, len, "n%u log thread: %" PRId64 " batch%s durable (%" PRId64
                 " still queued), %" PRId64 " late message%s out", ev->node, ev->a,
                 ev->a == 1 ? "" : "es", ev->b, ev->c, ev->c == 1 ? " goes" : "s go");
        break;
    default:
        snprintf(buf, len, "n%u event %u", ev->node, ev->kind);
        break;
    }
}

/* Faults, clients and phases. */
static void format_other(const struct trace_event *ev, char *buf, size_t len)
{
    char z1[24], z2[24];
    switch (ev->kind) {
    case TR_CRASH:
        snprintf(buf, len, "n%u DOWN: %s (stage %u), kept %" PRId64 " of %" PRId64 " pending",
                 ev->node, crash_why(ev->a), ev->mtype, ev->b, ev->c);
        break;
    case TR_RESTART:
        snprintf(buf, len, "n%u UP: t=%u snap=%s reapplied through %s, %" PRId64 " log entries",
                 ev->node, ev->term, trace_zxid(ev->a, z1), trace_zxid(ev->b, z2), ev->c);
        break;
    case TR_SLOW_DISK:
        snprintf(buf, len, "n%u disk stalls until step %" PRId64, ev->node, ev->a);
        break;
    case TR_DISK_FAULT:
        snprintf(buf, len, "n%u disk will fail its next %s", ev->node,
                 ev->a ? "fdatasync (EIO)" : "append (ENOSPC)");
        break;
    case TR_PARTITION:
        snprintf(buf, len, "partition %s: side 0x%" PRIx64 " other %" PRId64,
                 partition_name(ev->a), (uint64_t)ev->b, ev->c);
        break;
    case TR_HEAL:
        snprintf(buf, len, "heal: every link up");
        break;
    case TR_PROPOSE:
        if (ev->c < 0)
            snprintf(buf, len, "client %" PRId64 " op %" PRId64 " propose on n%u: refused (%" PRId64
                     ")", ev->a, ev->b, ev->node, ev->c);
        else
            snprintf(buf, len, "client %" PRId64 " op %" PRId64 " propose on n%u: zxid %s", ev->a,
                     ev->b, ev->node, trace_zxid(ev->c, z1));
        break;
    case TR_OP_DONE:
        snprintf(buf, len, "op %" PRId64 " done on n%u: result %" PRId64 " at %s", ev->a, ev->node,
                 ev->b, trace_zxid(ev->c, z1));
        break;
    case TR_OP_LOST:
        snprintf(buf, len, "op %" PRId64 " on n%u: outcome unknown", ev->a, ev->node);
        break;
    case TR_READ_START:
        snprintf(buf, len, "op %" PRId64 " read_index on n%u: %" PRId64, ev->a, ev->node, ev->b);
        break;
    case TR_READ_INDEX:
        snprintf(buf, len, "op %" PRId64 " read index on n%u: %s ok=%" PRId64, ev->a, ev->node,
                 trace_zxid(ev->b, z1), ev->c);
        break;
    case TR_PHASE:
        snprintf(buf, len, "phase %" PRId64 "%s", ev->a,
                 ev->a == 1 ? ": faults stop, everything heals" : ev->a == 2 ? ": final write done"
                                                                       : ": converged");
        break;
    case TR_FAIL:
        if (ev->node)
            snprintf(buf, len, "CHECK FAILED (n%u)", ev->node);
        else
            snprintf(buf, len, "CHECK FAILED");
        break;
    default:
        format_node(ev, buf, len);
        break;
    }
}

static void format_event(const struct trace_event *ev, char *buf, size_t len)
{
    char msg[160];
    switch (ev->kind) {
    case TR_SEND:
    case TR_DELIVER:
    case TR_DUP:
        format_msg(ev, msg, sizeof(msg));
        snprintf(buf, len, "%s n%u -> n%u %s",
                 ev->kind == TR_SEND ? "send" : ev->kind == TR_DUP ? "dup " : "recv", ev->node,
                 ev->peer, msg);
        break;
    case TR_DROP:
        format_msg(ev, msg, sizeof(msg));
        snprintf(buf, len, "drop n%u -> n%u %s (%s)", ev->node, ev->peer, msg, drop_why(ev->why));
        break;
    default:
        format_other(ev, buf, len);
        break;
    }
}

static void print_event(const struct trace_event *ev, FILE *out)
{
    char line[256];
    format_event(ev, line, sizeof(line));
    fprintf(out, "  [%6" PRId64 "] %s\n", ev->step, line);
}

void trace_add(struct trace *t, const struct trace_event *ev)
{
    t->ring[t->n % TRACE_RING] = *ev;
    t->n++;
    if (ev->kind < TR_KINDS)
        t->count[ev->kind]++;
    if (t->print)
        print_event(ev, t->out);
}

void trace_dump(const struct trace *t, FILE *out, unsigned last)
{
    uint64_t kept = t->n < TRACE_RING ? t->n : TRACE_RING;
    if (last < kept)
        kept = last;
    for (uint64_t i = t->n - kept; i < t->n; i++)
        print_event(&t->ring[i % TRACE_RING], out);
}
