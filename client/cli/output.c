/*
 * larch-cli output: zkCli.sh's text forms, the --json writer, error
 * reports and the watch-event queue the watchers fill.
 *
 * Text output copies zkCli.sh 3.8's wording (the Stat block, "'world,'anyone"
 * ACL lines, KeeperException messages) so scripts written against zkCli.sh
 * keep working; --json output is one object per line for machines.
 */
#include "client/cli/cli.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- growable buffer ------------------------------------------------------ */

/* Makes room for extra more bytes (plus a NUL); sets failed on OOM. */
static bool buf_reserve(struct cli_buf *b, size_t extra)
{
    if (b->failed)
        return false;
    if (extra > SIZE_MAX / 2 - b->len - 1) {
        b->failed = true;
        return false;
    }
    if (base_grow(&b->data, &b->cap, b->len + extra + 1, 1) != 0) {
        b->failed = true;
        return false;
    }
    return true;
}

void cli_buf_append(struct cli_buf *b, const void *bytes, size_t len)
{
    if (!buf_reserve(b, len))
        return;
    memcpy(b->data + b->len, bytes, len);
    b->len += len;
    b->data[b->len] = '\0';
}

void cli_buf_puts(struct cli_buf *b, const char *s)
{
    cli_buf_append(b, s, strlen(s));
}

void cli_buf_printf(struct cli_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !buf_reserve(b, (size_t)n)) {
        b->failed = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void cli_buf_free(struct cli_buf *b)
{
    free(b->data);
    *b = (struct cli_buf){0};
}

/* ---- JSON: one line per reply, written by json/json.h ------------------------ */

/* Every cli_json_* writer takes a member name inside an object and NULL
 * inside an array, where the value needs none. */
static void json_member(struct cli_json *j, const char *key)
{
    if (key != NULL)
        json_key(&j->w, key);
}

void cli_json_begin(struct cli_json *j)
{
    zk_wbuf_init(&j->out);
    json_init(&j->w, &j->out, JSON_COMPACT);
    json_object_begin(&j->w);
}

void cli_json_obj(struct cli_json *j, const char *key)
{
    json_member(j, key);
    json_object_begin(&j->w);
}

void cli_json_arr(struct cli_json *j, const char *key)
{
    json_member(j, key);
    json_array_begin(&j->w);
}

void cli_json_end_obj(struct cli_json *j) { json_object_end(&j->w); }
void cli_json_end_arr(struct cli_json *j) { json_array_end(&j->w); }

void cli_json_strn(struct cli_json *j, const char *key, const char *s, size_t len)
{
    json_member(j, key);
    json_string_n(&j->w, s, len);
}

void cli_json_str(struct cli_json *j, const char *key, const char *s)
{
    if (s == NULL) {
        cli_json_null(j, key);
        return;
    }
    cli_json_strn(j, key, s, strlen(s));
}

void cli_json_int(struct cli_json *j, const char *key, int64_t v)
{
    json_member(j, key);
    json_int(&j->w, v);
}

void cli_json_bool(struct cli_json *j, const char *key, bool v)
{
    json_member(j, key);
    json_bool(&j->w, v);
}

void cli_json_null(struct cli_json *j, const char *key)
{
    json_member(j, key);
    json_null(&j->w);
}

void cli_json_data(struct cli_json *j, const char *data, int32_t len)
{
    if (data == NULL || len < 0) {
        cli_json_null(j, "data");
        return;
    }
    if (base_utf8_valid(data, (size_t)len)) {
        cli_json_strn(j, "data", data, (size_t)len);
        return;
    }
    json_member(j, "data_b64");
    json_base64(&j->w, data, (size_t)len);
}

void cli_json_stat(struct cli_json *j, const char *key, const struct zk_stat *st)
{
    char owner[24];
    snprintf(owner, sizeof owner, "0x%" PRIx64, (uint64_t)st->ephemeral_owner);
    cli_json_obj(j, key);
    cli_json_int(j, "cZxid", st->czxid);
    cli_json_int(j, "ctime", st->ctime);
    cli_json_int(j, "mZxid", st->mzxid);
    cli_json_int(j, "mtime", st->mtime);
    cli_json_int(j, "pZxid", st->pzxid);
    cli_json_int(j, "cversion", st->cversion);
    cli_json_int(j, "dataVersion", st->version);
    cli_json_int(j, "aclVersion", st->aversion);
    /* A session id can exceed 2^53, beyond what many JSON readers keep
     * exact, so the owner goes out as zkCli's hex text. */
    cli_json_str(j, "ephemeralOwner", owner);
    cli_json_int(j, "dataLength", st->data_length);
    cli_json_int(j, "numChildren", st->num_children);
    cli_json_end_obj(j);
}

void cli_json_emit(struct cli_json *j)
{
    while (j->w.depth > 0) {
        if (j->w.in_object[j->w.depth - 1])
            json_object_end(&j->w);
        else
            json_array_end(&j->w);
    }
    if (j->out.err) {
        fputs("{\"error\":\"NOMEM\",\"message\":\"out of memory building the JSON reply\"}\n",
              stdout);
    } else {
        fwrite(j->out.p, 1, j->out.len, stdout);
        fputc('\n', stdout);
    }
    fflush(stdout);
    zk_wbuf_free(&j->out);
}

/* ---- text ------------------------------------------------------------------ */

/* Java's Date.toString() form, which zkCli.sh prints for ctime and mtime. */
static void format_time_ms(char *out, size_t cap, int64_t ms)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    if (localtime_r(&t, &tm) == NULL || strftime(out, cap, "%a %b %d %H:%M:%S %Z %Y", &tm) == 0)
        snprintf(out, cap, "%" PRId64, ms);
}

void cli_print_stat(FILE *f, const struct zk_stat *st)
{
    char ctime_text[64], mtime_text[64];
    format_time_ms(ctime_text, sizeof ctime_text, st->ctime);
    format_time_ms(mtime_text, sizeof mtime_text, st->mtime);
    fprintf(f,
            "cZxid = 0x%" PRIx64 "\nctime = %s\nmZxid = 0x%" PRIx64 "\nmtime = %s\n"
            "pZxid = 0x%" PRIx64 "\ncversion = %" PRId32 "\ndataVersion = %" PRId32 "\n"
            "aclVersion = %" PRId32 "\nephemeralOwner = 0x%" PRIx64 "\ndataLength = %" PRId32 "\n"
            "numChildren = %" PRId32 "\n",
            (uint64_t)st->czxid, ctime_text, (uint64_t)st->mzxid, mtime_text, (uint64_t)st->pzxid,
            st->cversion, st->version, st->aversion, (uint64_t)st->ephemeral_owner,
            st->data_length, st->num_children);
}

/* KeeperException.Code's messages (getCodeMessage), for codes zkCli.sh has
 * no special sentence for. */
static const char *code_message(int err)
{
    switch (err) {
    case ZK_ESYSTEMERROR: return "SystemError";
    case ZK_ERUNTIMEINCONSISTENCY: return "RuntimeInconsistency";
    case ZK_EDATAINCONSISTENCY: return "DataInconsistency";
    case ZK_ECONNECTIONLOSS: return "ConnectionLoss";
    case ZK_EMARSHALLINGERROR: return "MarshallingError";
    case ZK_EUNIMPLEMENTED: return "Unimplemented";
    case ZK_EOPERATIONTIMEOUT: return "OperationTimeout";
    case ZK_EBADARGUMENTS: return "BadArguments";
    case ZK_EUNKNOWNSESSION: return "UnknownSession";
    case ZK_EAPIERROR: return "APIError";
    case ZK_ENONODE: return "NoNode";
    case ZK_ENOAUTH: return "NoAuth";
    case ZK_EBADVERSION: return "BadVersion";
    case ZK_ENOCHILDRENFOREPHEMERALS: return "NoChildrenForEphemerals";
    case ZK_ENODEEXISTS: return "NodeExists";
    case ZK_ENOTEMPTY: return "Directory not empty";
    case ZK_ESESSIONEXPIRED: return "Session expired";
    case ZK_EINVALIDCALLBACK: return "Invalid callback";
    case ZK_EINVALIDACL: return "InvalidACL";
    case ZK_EAUTHFAILED: return "AuthFailed";
    case ZK_ESESSIONMOVED: return "Session moved";
    case ZK_ENOTREADONLY: return "Not a read-only call";
    case ZK_EEPHEMERALONLOCALSESSION: return "Ephemeral node on local session";
    case ZK_ENOWATCHER: return "No such watcher";
    case ZK_EREQUESTTIMEOUT: return "Request timeout";
    case ZK_ERECONFIGDISABLED: return "Reconfig is disabled";
    case ZK_EQUOTAEXCEEDED: return "Quota has exceeded";
    case ZK_ETHROTTLEDOP: return "Op throttled due to high load";
    case LARCH_ECLOSING: return "Closing";
    default: return NULL;
    }
}

void cli_error_text(struct cli_buf *b, int err, const char *path)
{
    const char *p = path ? path : "";
    switch (err) {
    /* zkCli.sh's own sentences (ZooKeeperMain / CliWrapperException). */
    case ZK_ENONODE: cli_buf_printf(b, "Node does not exist: %s", p); return;
    case ZK_ENODEEXISTS: cli_buf_printf(b, "Node already exists: %s", p); return;
    case ZK_ENOTEMPTY: cli_buf_printf(b, "Node not empty: %s", p); return;
    case ZK_EBADVERSION: cli_buf_printf(b, "version No is not valid : %s", p); return;
    case ZK_ENOAUTH: cli_buf_printf(b, "Insufficient permission : %s", p); return;
    case ZK_EINVALIDACL: cli_buf_printf(b, "Acl is not valid : %s", p); return;
    case ZK_ENOCHILDRENFOREPHEMERALS:
        cli_buf_printf(b, "Ephemerals cannot have children: %s", p);
        return;
    /* larch-cli's own: only -udp reads give it */
    case LARCH_ETOOBIG:
        cli_buf_printf(b, "Reply does not fit a UDP datagram: %s (read it over TCP: -server)", p);
        return;
    case LARCH_EUDPVERSION:
        cli_buf_printf(b, "The server speaks another UDP read protocol version: %s (read it "
                          "over TCP: -server)", p);
        return;
    default: break;
    }
    const char *msg = code_message(err);
    if (msg != NULL)
        cli_buf_printf(b, "KeeperErrorCode = %s", msg);
    else
        cli_buf_printf(b, "KeeperErrorCode = %d", err);
    if (path != NULL)
        cli_buf_printf(b, " for %s", path);
}

const char *cli_event_type_name(int32_t type)
{
    switch (type) {
    case ZK_EVENT_NONE: return "None";
    case ZK_EVENT_CREATED: return "NodeCreated";
    case ZK_EVENT_DELETED: return "NodeDeleted";
    case ZK_EVENT_DATA_CHANGED: return "NodeDataChanged";
    case ZK_EVENT_CHILD_CHANGED: return "NodeChildrenChanged";
    case ZK_EVENT_DATA_WATCH_REMOVED: return "DataWatchRemoved";
    case ZK_EVENT_CHILD_WATCH_REMOVED: return "ChildWatchRemoved";
    case ZK_EVENT_PERSISTENT_WATCH_REMOVED: return "PersistentWatchRemoved";
    default: return "Unknown";
    }
}

const char *cli_state_name(int32_t state)
{
    switch (state) {
    case ZK_STATE_DISCONNECTED: return "Disconnected";
    case LARCH_STATE_CONNECTING: return "Connecting";
    case ZK_STATE_SYNC_CONNECTED: return "SyncConnected";
    case ZK_STATE_AUTH_FAILED: return "AuthFailed";
    case ZK_STATE_CONNECTED_READONLY: return "ConnectedReadOnly";
    case ZK_STATE_SASL_AUTHENTICATED: return "SaslAuthenticated";
    case ZK_STATE_EXPIRED: return "Expired";
    case ZK_STATE_CLOSED: return "Closed";
    default: return "Unknown";
    }
}

/* ---- error reports ------------------------------------------------------------ */

/* The human-readable line goes to stderr in both modes (scripts keep their
 * diagnostics); --json also puts the error object on stdout so the JSON
 * stream holds every command's outcome. */
static void report_text(const char *text, const char *usage)
{
    fflush(stdout);
    fprintf(stderr, "%s\n", text);
    if (usage != NULL)
        fprintf(stderr, "usage: %s\n", usage);
    fflush(stderr);
}

int cli_usage_error(struct cli *c, const char *cmd, const char *usage, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    struct cli_buf text = {0};
    if (cmd != NULL)
        cli_buf_printf(&text, "%s: %s", cmd, msg);
    else
        cli_buf_puts(&text, msg);
    report_text(text.failed ? msg : text.data, usage);
    cli_buf_free(&text);
    if (c->json) {
        struct cli_json j;
        cli_json_begin(&j);
        if (cmd != NULL)
            cli_json_str(&j, "cmd", cmd);
        cli_json_str(&j, "error", "USAGE");
        cli_json_str(&j, "message", msg);
        if (usage != NULL)
            cli_json_str(&j, "usage", usage);
        cli_json_emit(&j);
    }
    return CLI_EUSAGE;
}

int cli_server_error(struct cli *c, const char *cmd, int err, const char *path)
{
    struct cli_buf text = {0};
    cli_error_text(&text, err, path);
    report_text(text.failed ? larch_error(err) : text.data, NULL);
    if (c->json) {
        struct cli_json j;
        cli_json_begin(&j);
        cli_json_str(&j, "cmd", cmd);
        cli_json_str(&j, "error", larch_error(err));
        cli_json_int(&j, "code", err);
        cli_json_str(&j, "message", text.failed ? larch_error(err) : text.data);
        if (path != NULL)
            cli_json_str(&j, "path", path);
        cli_json_emit(&j);
    }
    cli_buf_free(&text);
    return CLI_ESERVER;
}

int cli_connect_error(struct cli *c, const char *cmd, const char *msg)
{
    report_text(msg, NULL);
    if (c->json) {
        struct cli_json j;
        cli_json_begin(&j);
        if (cmd != NULL)
            cli_json_str(&j, "cmd", cmd);
        cli_json_str(&j, "error", "CONNECT");
        cli_json_str(&j, "message", msg);
        cli_json_emit(&j);
    }
    return CLI_ECONNECT;
}

int cli_op_error(struct cli *c, const char *cmd, const char *error_name, const char *path,
                 const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    report_text(msg, NULL);
    if (c->json) {
        struct cli_json j;
        cli_json_begin(&j);
        cli_json_str(&j, "cmd", cmd);
        cli_json_str(&j, "error", error_name);
        cli_json_str(&j, "message", msg);
        if (path != NULL)
            cli_json_str(&j, "path", path);
        cli_json_emit(&j);
    }
    return CLI_ESERVER;
}

/* ---- the event queue ------------------------------------------------------------ */

int cli_events_init(struct cli_events *q)
{
    *q = (struct cli_events){0};
    pthread_condattr_t attr;
    if (pthread_condattr_init(&attr) != 0)
        return -1;
    int rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (rc == 0)
        rc = pthread_cond_init(&q->cond, &attr);
    pthread_condattr_destroy(&attr);
    if (rc != 0)
        return -1;
    if (pthread_mutex_init(&q->lock, NULL) != 0)
        goto undo_cond;
    if (pipe2(q->wake_fd, O_NONBLOCK | O_CLOEXEC) != 0)
        goto undo_mutex;
    return 0;
undo_mutex:
    pthread_mutex_destroy(&q->lock);
undo_cond:
    pthread_cond_destroy(&q->cond);
    return -1;
}

void cli_events_destroy(struct cli_events *q)
{
    struct cli_event *e = q->head;
    while (e != NULL) {
        struct cli_event *next = e->next;
        free(e->path);
        free(e);
        e = next;
    }
    close(q->wake_fd[0]);
    close(q->wake_fd[1]);
    pthread_mutex_destroy(&q->lock);
    pthread_cond_destroy(&q->cond);
}

/* The default watcher's session events before the handle's first
 * SyncConnected are the connect itself, which main() reports, so they are
 * swallowed; later ones (disconnect, expiry) are news worth printing. */
static bool swallow_initial_session_event(struct cli_events *q, const struct larch_event *ev,
                                          uint64_t watch_id)
{
    if (watch_id != 0 || ev->type != ZK_EVENT_NONE || q->announced)
        return false;
    if (ev->state == ZK_STATE_SYNC_CONNECTED)
        q->announced = true;
    return true;
}

void cli_events_push(struct cli_events *q, const struct larch_event *ev, uint64_t watch_id)
{
    struct cli_event *e = calloc(1, sizeof *e);
    if (e == NULL)
        goto dropped;
    e->type = ev->type;
    e->state = ev->state;
    e->watch_id = watch_id;
    if (ev->type != ZK_EVENT_NONE && ev->path != NULL) {
        e->path = strdup(ev->path);
        if (e->path == NULL) {
            free(e);
            goto dropped;
        }
    }
    pthread_mutex_lock(&q->lock);
    if (swallow_initial_session_event(q, ev, watch_id) || q->count >= CLI_EVENTS_MAX) {
        if (q->count >= CLI_EVENTS_MAX)
            q->dropped++;
        pthread_mutex_unlock(&q->lock);
        free(e->path);
        free(e);
        return;
    }
    if (q->tail != NULL)
        q->tail->next = e;
    else
        q->head = e;
    q->tail = e;
    q->count++;
    pthread_cond_broadcast(&q->cond);
    pthread_mutex_unlock(&q->lock);
    /* A full pipe (EAGAIN) already holds a wake-up for the reader, so a
     * failed write loses nothing. */
    ssize_t n = write(q->wake_fd[1], "e", 1);
    (void)n;
    return;
dropped:
    pthread_mutex_lock(&q->lock);
    q->dropped++;
    pthread_mutex_unlock(&q->lock);
}

static bool terminal_state(int32_t state)
{
    return state == ZK_STATE_EXPIRED || state == ZK_STATE_AUTH_FAILED || state == ZK_STATE_CLOSED;
}

/* Unlinks the first event for watch_id; the caller holds the lock. */
static struct cli_event *unlink_first(struct cli_events *q, uint64_t watch_id)
{
    struct cli_event *prev = NULL;
    for (struct cli_event *e = q->head; e != NULL; prev = e, e = e->next) {
        if (e->watch_id != watch_id)
            continue;
        if (prev != NULL)
            prev->next = e->next;
        else
            q->head = e->next;
        if (q->tail == e)
            q->tail = prev;
        q->count--;
        e->next = NULL;
        return e;
    }
    return NULL;
}

/* Waits on the condition at most step_ms (so *cancel is seen promptly). */
static void wait_step(struct cli_events *q, int64_t step_ms)
{
    struct timespec ts = base_deadline(CLOCK_MONOTONIC, step_ms);
    pthread_cond_timedwait(&q->cond, &q->lock, &ts);
}

bool cli_events_take(struct cli_events *q, uint64_t watch_id, int32_t timeout_ms,
                     volatile sig_atomic_t *cancel, struct cli_event *out)
{
    int64_t deadline = base_mono_ms() + timeout_ms;
    bool found = false;
    pthread_mutex_lock(&q->lock);
    for (;;) {
        struct cli_event *e;
        while (!found && (e = unlink_first(q, watch_id)) != NULL) {
            /* Disconnected / SyncConnected leave the watch armed (liblarch
             * re-arms it); only a node event or a dead session ends the wait. */
            if (e->type != ZK_EVENT_NONE || terminal_state(e->state)) {
                *out = *e;
                found = true;
            } else {
                free(e->path);
            }
            free(e);
        }
        int64_t left = deadline - base_mono_ms();
        if (found || left <= 0 || (cancel != NULL && *cancel))
            break;
        wait_step(q, left < 200 ? left : 200);
    }
    pthread_mutex_unlock(&q->lock);
    return found;
}
