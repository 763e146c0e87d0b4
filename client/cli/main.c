/*
 * larch-cli — an interactive and scriptable shell for larchd and any
 * ZooKeeper 3.5+ server, in the manner of zkCli.sh.
 *
 * Three modes: a command on the command line runs once; otherwise lines
 * come from stdin, edited with a prompt on a terminal, read plainly from a
 * pipe or file (scripts). main.c owns the options, the session handle and
 * the loop; commands.c runs each command.
 */
#include "client/cli/cli.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EVENT_PIPE_DRAIN_MAX 64 /* reads of the wake pipe per drain */

/* The only global: a signal handler can reach nothing else. */
static volatile sig_atomic_t g_interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    g_interrupted = 1;
}

static const char usage_text[] =
    "usage: larch-cli [-server host:port[,host:port...][/chroot]] [-udp ip:port]\n"
    "                 [--json] [--timeout ms] [-e|--exit-on-error] [cmd args...]\n"
    "\n"
    "Options:\n"
    "  -server, --server HOSTS  connect string (default " CLI_DEFAULT_SERVER ")\n"
    "  -udp, --udp IP:PORT      get, ls and stat read over larchd's UDP read path at\n"
    "                           that address (larchd --udp): with -server as that\n"
    "                           session (and seeing its writes); alone, anonymously\n"
    "                           and without a TCP session, so the other commands are\n"
    "                           refused (IP:PORT/chroot sets a chroot). A watch (-w)\n"
    "                           needs -server and goes over TCP.\n"
    "  --json                   one JSON object per line for every result, error and\n"
    "                           watch event (data that is not UTF-8 comes as data_b64)\n"
    "  --timeout ms             how long to wait for a connection, and the session\n"
    "                           timeout asked for (default 10000)\n"
    "  -e, --exit-on-error      stop at the first command that fails\n"
    "  -h, --help               this text\n"
    "\n"
    "With a command after the options, runs it and exits. Otherwise reads commands\n"
    "from stdin: with line editing and history on a terminal, one per line from a\n"
    "pipe or file (larch-cli -server h:2181 < script.txt). Lines starting with #\n"
    "are comments. Data: a word, \"double quoted\" with \\\" \\\\ \\n \\t \\r \\0 \\xHH\n"
    "escapes, or 'single quoted'. A quoted word is never taken for an option.\n"
    "A transaction: txn { op ; op ... } on one line, or 'txn {', one op per line and\n"
    "a closing '}' line; ops are create, delete, set and check [-v version] path.\n"
    "\n"
    "Exit status: 0 every command succeeded; 1 a server or operation error\n"
    "(e.g. NONODE); 2 a malformed command (unknown command, bad option, missing\n"
    "argument, bad version or ACL); 3 could not connect within the timeout, or a\n"
    "command needed a connection that was not there. Failed commands do not stop a\n"
    "script (nor the interactive shell) unless -e is given; the exit status is then\n"
    "the worst seen, in the order 0 < 1 < 2 < 3.\n"
    "\n"
    "Watch events (from -w, addWatch, session changes after the first connect)\n"
    "print as zkCli does (WATCHER:: / WatchedEvent ...) while printwatches is on,\n"
    "the default; the `watch` command waits for one event and prints it.\n"
    "\n"
    "Commands:\n";

static void print_usage(FILE *f)
{
    fputs(usage_text, f);
    cli_print_help(f);
}

/* ---- events ------------------------------------------------------------------------ */

static void default_watcher(struct larch *lh, const struct larch_event *ev, void *ctx)
{
    cli_events_push(ctx, ev, 0);
}

static void print_event(struct cli *c, const struct cli_event *e)
{
    if (c->json) {
        struct cli_json j;
        cli_json_begin(&j);
        cli_json_str(&j, "event", cli_event_type_name(e->type));
        cli_json_str(&j, "state", cli_state_name(e->state));
        cli_json_str(&j, "path", e->path);
        cli_json_emit(&j);
        return;
    }
    printf("\nWATCHER::\n\nWatchedEvent state:%s type:%s path:%s\n", cli_state_name(e->state),
           cli_event_type_name(e->type), e->path ? e->path : "null");
}

void cli_print_events(void *arg)
{
    struct cli *c = arg;
    struct cli_events *q = &c->events;
    char sink[256];
    for (int i = 0; i < EVENT_PIPE_DRAIN_MAX && read(q->wake_fd[0], sink, sizeof sink) > 0; i++)
        continue;
    /* Events for a `watch` command (watch_id != 0) are stale here: no
     * `watch` is waiting while the main thread prints, so they are dropped. */
    pthread_mutex_lock(&q->lock);
    struct cli_event *e = q->head;
    q->head = q->tail = NULL;
    q->count = 0;
    uint64_t dropped = q->dropped;
    q->dropped = 0;
    pthread_mutex_unlock(&q->lock);
    while (e != NULL) {
        struct cli_event *next = e->next;
        if (e->watch_id == 0 && c->print_watches)
            print_event(c, e);
        free(e->path);
        free(e);
        e = next;
    }
    if (dropped > 0)
        fprintf(stderr, "warning: %" PRIu64 " watch events dropped (queue full)\n", dropped);
    fflush(stdout);
}

/* ---- connection ------------------------------------------------------------------- */

int cli_udp_attach(struct cli *c)
{
    larch_udp_close(c->udp);
    c->udp = NULL;
    if (c->udp_address == NULL)
        return CLI_OK;
    struct larch_udp_options opt = { .timeout_ms = c->timeout_ms };
    int rc = larch_udp_open(&c->udp, c->udp_address, c->lh, &opt);
    if (rc == ZK_EBADARGUMENTS)
        return cli_usage_error(c, "udp", NULL, "bad -udp address '%s' (expected ip:port%s)",
                               c->udp_address,
                               c->lh != NULL ? "; the -server chroot applies" : "[/chroot]");
    if (rc != ZK_OK) {
        char msg[256];
        snprintf(msg, sizeof msg, "Could not open a UDP socket for %s: %s", c->udp_address,
                 larch_error(rc));
        return cli_connect_error(c, "udp", msg);
    }
    return CLI_OK;
}

void cli_disconnect(struct cli *c)
{
    if (c->lh == NULL)
        return;
    larch_udp_close(c->udp); /* it uses the handle: before larch_close */
    c->udp = NULL;
    int rc = larch_close(c->lh);
    c->lh = NULL;
    if (c->udp_address != NULL)
        (void)cli_udp_attach(c); /* anonymous now; it opened before, so it opens */
    /* closeSession failing (the server went away) leaves the session to
     * expire on its own; nothing more the shell can do. */
    if (rc != ZK_OK && rc != ZK_ECONNECTIONLOSS && rc != ZK_ESESSIONEXPIRED)
        fprintf(stderr, "warning: closing the session: %s\n", larch_error(rc));
    cli_free_watch_ctxs(c);
}

int cli_connect(struct cli *c, const char *connect_string)
{
    cli_disconnect(c);
    char *copy = strdup(connect_string);
    if (copy == NULL)
        return cli_connect_error(c, "connect", "out of memory");
    free(c->connect_string);
    c->connect_string = copy;
    pthread_mutex_lock(&c->events.lock);
    c->events.announced = false;
    pthread_mutex_unlock(&c->events.lock);
    struct larch_options opt = {
        .session_timeout_ms = c->timeout_ms,
        .watcher = default_watcher,
        .watcher_ctx = &c->events,
    };
    struct larch *lh = NULL;
    int rc = larch_open(&lh, connect_string, &opt);
    if (rc == ZK_EBADARGUMENTS)
        return cli_usage_error(c, "connect", "connect host:port[,host:port...][/chroot]",
                               "malformed connect string '%s'", connect_string);
    if (rc != ZK_OK) {
        char msg[256];
        snprintf(msg, sizeof msg, "Could not start a session for %s: %s", connect_string,
                 larch_error(rc));
        return cli_connect_error(c, "connect", msg);
    }
    rc = larch_wait_connected(lh, c->timeout_ms);
    if (rc != ZK_OK) {
        larch_close(lh); /* never connected: its result says nothing new */
        char msg[256];
        snprintf(msg, sizeof msg, "Could not connect to %s within %" PRId32 " ms (%s)",
                 connect_string, c->timeout_ms, larch_error(rc));
        return cli_connect_error(c, "connect", msg);
    }
    c->lh = lh;
    return cli_udp_attach(c);
}

/* ---- options ------------------------------------------------------------------------ */

struct options {
    const char *server;
    bool server_given;
    const char *udp;
    int32_t timeout_ms;
    bool json;
    bool exit_on_error;
    int cmd_index; /* first word of the command, argc when none */
};

/* "--name=value" or "--name value": the value, advancing *i for the latter. */
static const char *option_value(int argc, char **argv, int *i, const char *eq)
{
    if (eq != NULL)
        return eq + 1;
    if (*i + 1 >= argc)
        return NULL;
    return argv[++*i];
}

static bool option_is(const char *arg, const char *name, const char **eq)
{
    size_t n = strlen(name);
    if (strncmp(arg, name, n) != 0)
        return false;
    if (arg[n] == '\0') {
        *eq = NULL;
        return true;
    }
    if (arg[n] == '=') {
        *eq = arg + n;
        return true;
    }
    return false;
}

/* 0 ok, 1 --help shown, 2 usage error (reported). */
static int parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){.server = CLI_DEFAULT_SERVER, .timeout_ms = CLI_DEFAULT_TIMEOUT_MS};
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i], *eq = NULL, *v;
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (a[0] != '-')
            break;
        if (option_is(a, "-server", &eq) || option_is(a, "--server", &eq)) {
            if ((v = option_value(argc, argv, &i, eq)) == NULL || *v == '\0')
                goto missing;
            o->server = v;
            o->server_given = true;
        } else if (option_is(a, "-udp", &eq) || option_is(a, "--udp", &eq)) {
            if ((v = option_value(argc, argv, &i, eq)) == NULL || *v == '\0')
                goto missing;
            o->udp = v;
        } else if (option_is(a, "--timeout", &eq) || option_is(a, "-timeout", &eq)) {
            char *end;
            if ((v = option_value(argc, argv, &i, eq)) == NULL)
                goto missing;
            errno = 0;
            long t = strtol(v, &end, 10);
            if (errno != 0 || *end != '\0' || end == v || t < 1 || t > INT32_MAX) {
                fprintf(stderr, "larch-cli: bad timeout '%s' (expected milliseconds, 1 or more)\n", v);
                return 2;
            }
            o->timeout_ms = (int32_t)t;
        } else if (strcmp(a, "--json") == 0 || strcmp(a, "-json") == 0) {
            o->json = true;
        } else if (strcmp(a, "-e") == 0 || strcmp(a, "--exit-on-error") == 0) {
            o->exit_on_error = true;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0 || strcmp(a, "-help") == 0) {
            print_usage(stdout);
            return 1;
        } else {
            fprintf(stderr, "larch-cli: unknown option %s\n", a);
            fputs(usage_text, stderr);
            return 2;
        }
    }
    o->cmd_index = i;
    return 0;
missing:
    fprintf(stderr, "larch-cli: option %s needs a value\n", argv[i]);
    return 2;
}

/* ---- the loop ------------------------------------------------------------------------ */

static const char *state_word(struct cli *c)
{
    if (c->lh == NULL)
        return "CLOSED";
    switch (larch_state(c->lh)) {
    case ZK_STATE_SYNC_CONNECTED: return "CONNECTED";
    case ZK_STATE_CONNECTED_READONLY: return "CONNECTEDREADONLY";
    case LARCH_STATE_CONNECTING: return "CONNECTING";
    case ZK_STATE_EXPIRED: return "EXPIRED";
    case ZK_STATE_AUTH_FAILED: return "AUTH_FAILED";
    case ZK_STATE_CLOSED: return "CLOSED";
    default: return "DISCONNECTED";
    }
}

static void note_status(struct cli *c, int st)
{
    if (st > c->worst)
        c->worst = st;
}

/* Reads and runs lines until end of input, quit, or (-e) the first error. */
static void run_loop(struct cli *c)
{
    for (;;) {
        cli_print_events(c);
        char prompt[512];
        snprintf(prompt, sizeof prompt, "[larch: %s(%s) %" PRId64 "] ",
                 c->connect_string ? c->connect_string : "", state_word(c),
                 cli_history_next_number(&c->history));
        char *line = NULL;
        bool truncated = false;
        int rc = cli_reader_line(c->reader, prompt, &c->history, &line, &truncated);
        if (rc == 0)
            break;
        if (rc < 0) {
            fprintf(stderr, "larch-cli: reading input: %s\n", strerror(errno));
            note_status(c, CLI_ESERVER);
            break;
        }
        int st = truncated ? cli_usage_error(c, NULL, NULL, "line longer than %d bytes",
                                             CLI_LINE_BYTES_MAX)
                           : cli_run_line(c, line);
        free(line);
        fflush(stdout);
        note_status(c, st);
        cli_print_events(c);
        if (c->quit || (c->exit_on_error && st != CLI_OK))
            break;
    }
}

/* With -udp alone, nothing connects over TCP: get, ls and stat read
 * anonymously over UDP and the other commands say they are not connected. */
static bool udp_only(const struct cli *c, const struct options *o)
{
    return c->udp_address != NULL && !o->server_given;
}

static int run_one_shot(struct cli *c, int argc, char **argv, const struct options *o)
{
    const char *server = o->server;
    if (cli_command_needs_connection(argv[0]) && !udp_only(c, o)) {
        int st = cli_connect(c, server);
        if (st != CLI_OK)
            return st;
    } else if ((c->connect_string = strdup(server)) == NULL) {
        return cli_connect_error(c, argv[0], "out of memory");
    }
    int st = cli_run_argv(c, argc, argv);
    cli_print_events(c);
    return st;
}

static int run_shell(struct cli *c, const struct options *o)
{
    const char *server = o->server;
    if (c->interactive) {
        struct sigaction sa = {.sa_handler = on_sigint};
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, NULL);
        c->interrupted = &g_interrupted;
        if (udp_only(c, o))
            printf("Reading from %s over UDP\n", c->udp_address);
        else
            printf("Connecting to %s\n", server);
        fflush(stdout);
    }
    c->reader = cli_reader_open(STDIN_FILENO, c->interactive, c->events.wake_fd[0],
                                cli_print_events, c);
    if (c->reader == NULL) {
        fprintf(stderr, "larch-cli: out of memory\n");
        return CLI_ESERVER;
    }
    int st = udp_only(c, o) ? CLI_OK : cli_connect(c, server);
    /* A script cannot do anything useful without its server; a person at
     * the prompt can still `connect` elsewhere. */
    if (st != CLI_OK && !c->interactive)
        return st;
    note_status(c, st);
    run_loop(c);
    cli_print_events(c);
    return c->worst;
}

int main(int argc, char **argv)
{
    struct options o;
    int rc = parse_options(argc, argv, &o);
    if (rc != 0)
        return rc == 1 ? CLI_OK : CLI_EUSAGE;
    signal(SIGPIPE, SIG_IGN); /* a closed stdout shows up as write errors */
    struct cli c = {
        .timeout_ms = o.timeout_ms,
        .json = o.json,
        .print_watches = true,
        .exit_on_error = o.exit_on_error,
        .interactive = isatty(STDIN_FILENO) == 1,
    };
    if (cli_events_init(&c.events) != 0) {
        fprintf(stderr, "larch-cli: cannot set up the event queue: %s\n", strerror(errno));
        return CLI_ESERVER;
    }
    c.udp_address = o.udp;
    int st = cli_udp_attach(&c); /* a bad -udp address stops here */
    if (st == CLI_OK)
        st = o.cmd_index < argc ? run_one_shot(&c, argc - o.cmd_index, argv + o.cmd_index, &o)
                                : run_shell(&c, &o);
    cli_disconnect(&c);
    larch_udp_close(c.udp);
    if (c.reader != NULL)
        cli_reader_close(c.reader);
    cli_history_free(&c.history);
    cli_events_destroy(&c.events);
    free(c.connect_string);
    fflush(stdout);
    return st;
}
