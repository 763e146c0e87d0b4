/*
 * larch-cli internals — the zkCli.sh-like shell on liblarch.
 *
 * Four files share this header:
 *   main.c      options, connecting, the read-eval loop, exit status
 *   commands.c  the tokenizer, the command table and every command
 *   lineedit.c  reading lines: a raw-mode line editor for a tty, a plain
 *               buffered reader for pipes and files
 *   output.c    text (zkCli wording) and --json output, the watch-event queue
 *
 * Threading: everything runs on the main thread except the two liblarch
 * watchers, which only push onto the event queue (struct cli_events) and
 * wake the main thread through a pipe. All printing happens on the main
 * thread, so output never needs a lock and the line editor can redraw its
 * line after printing an event.
 *
 * Exit status (documented in --help): the worst status seen, in the order
 * CLI_OK < CLI_ESERVER < CLI_EUSAGE < CLI_ECONNECT.
 */
#ifndef LARCH_CLI_H
#define LARCH_CLI_H

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "client/larch.h"
#include "json/json.h"

enum cli_status {
    CLI_OK = 0,       /* every command succeeded */
    CLI_ESERVER = 1,  /* a server or operation error (NONODE, BADVERSION, ...) */
    CLI_EUSAGE = 2,   /* a malformed command */
    CLI_ECONNECT = 3, /* could not connect, or not connected */
};

#define CLI_DEFAULT_SERVER "127.0.0.1:2181"
#define CLI_DEFAULT_TIMEOUT_MS 10000
#define CLI_LINE_BYTES_MAX (4 * 1024 * 1024) /* escaped 1 MiB data fits */
#define CLI_HISTORY_MAX 1000
#define CLI_EVENTS_MAX 10000
#define CLI_WATCH_DEFAULT_TIMEOUT_MS 60000
#define CLI_TXN_OPS_MAX 1000
#define CLI_TREE_NODES_MAX 1000000 /* ls -R, deleteall, setAcl -R */

/* ---- growable byte buffer (output.c) ---------------------------------- */
struct cli_buf {
    char *data;
    size_t len;
    size_t cap;
    bool failed; /* an allocation failed; contents are truncated */
};
void cli_buf_append(struct cli_buf *b, const void *bytes, size_t len);
void cli_buf_puts(struct cli_buf *b, const char *s);
void cli_buf_printf(struct cli_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void cli_buf_free(struct cli_buf *b);

/* ---- JSON writer (output.c, over json/json.h's compact layout) ---------- */
struct cli_json {
    struct zk_wbuf out; /* the reply's bytes; err on out of memory */
    struct json w;
};
/* Every writer takes a key; pass NULL inside arrays. */
void cli_json_begin(struct cli_json *j); /* the top-level object */
void cli_json_obj(struct cli_json *j, const char *key);
void cli_json_arr(struct cli_json *j, const char *key);
void cli_json_end_obj(struct cli_json *j);
void cli_json_end_arr(struct cli_json *j);
/* A JSON string; bytes that are not UTF-8 become U+FFFD. */
void cli_json_str(struct cli_json *j, const char *key, const char *s);
void cli_json_strn(struct cli_json *j, const char *key, const char *s, size_t len);
void cli_json_int(struct cli_json *j, const char *key, int64_t v);
void cli_json_bool(struct cli_json *j, const char *key, bool v);
void cli_json_null(struct cli_json *j, const char *key);
/* Node data: "data" when valid UTF-8, else "data_b64"; null for len -1. */
void cli_json_data(struct cli_json *j, const char *data, int32_t len);
void cli_json_stat(struct cli_json *j, const char *key, const struct zk_stat *st);
/* Closes the top-level object, writes it as one line to stdout, frees. */
void cli_json_emit(struct cli_json *j);

/* ---- text output (output.c) ---------------------------------------------- */
void cli_print_stat(FILE *f, const struct zk_stat *st);
/* KeeperException's text for err ("Node does not exist: /a"). */
void cli_error_text(struct cli_buf *b, int err, const char *path);
const char *cli_event_type_name(int32_t type);
const char *cli_state_name(int32_t state);

/* ---- watch events (output.c) ------------------------------------------- */
struct cli_event {
    int32_t type;
    int32_t state;
    char *path;       /* NULL for session events */
    uint64_t watch_id; /* 0: default watcher; else the `watch` command's id */
    struct cli_event *next;
};
struct cli_events {
    pthread_mutex_t lock;
    pthread_cond_t cond; /* signalled on every push; CLOCK_MONOTONIC */
    struct cli_event *head, *tail;
    size_t count;
    uint64_t dropped;    /* pushes refused because count hit CLI_EVENTS_MAX */
    bool announced;      /* the handle's first SyncConnected was swallowed */
    int wake_fd[2];      /* pipe: one byte per push, read end polled by the reader */
};
int cli_events_init(struct cli_events *q);
void cli_events_destroy(struct cli_events *q);
/* Watcher-side push (event thread). Never blocks beyond the queue lock. */
void cli_events_push(struct cli_events *q, const struct larch_event *ev, uint64_t watch_id);
/* Takes the first event with this watch_id (type != NONE, or a terminal
 * session state), waiting up to timeout_ms or until *cancel is set.
 * Returns true and fills *out (caller frees out->path). */
bool cli_events_take(struct cli_events *q, uint64_t watch_id, int32_t timeout_ms,
                     volatile sig_atomic_t *cancel, struct cli_event *out);

/* ---- history (commands.c) ------------------------------------------------ */
struct cli_history {
    char **lines;
    size_t count;          /* entries held, at most CLI_HISTORY_MAX */
    int64_t first_number;  /* command number of lines[0] */
};
int cli_history_add(struct cli_history *h, const char *line); /* 0 or -1 (OOM) */
/* The line numbered n, or NULL when not held. */
const char *cli_history_get(const struct cli_history *h, int64_t n);
int64_t cli_history_next_number(const struct cli_history *h);
void cli_history_free(struct cli_history *h);

/* ---- line input (lineedit.c) ---------------------------------------------- */
struct cli_reader;
/* Called by the reader, on the main thread, when the event pipe is readable. */
typedef void (*cli_event_fn)(void *ctx);
/* Reads lines from fd: a line editor when tty is true, plain lines else.
 * event_fd is polled while waiting (-1: none); on_event prints events. */
struct cli_reader *cli_reader_open(int fd, bool tty, int event_fd, cli_event_fn on_event,
                                   void *event_ctx);
/* 1: *line (malloc'd, no newline) read; 0: end of input; -1: error (errno).
 * A line longer than CLI_LINE_BYTES_MAX is cut and *truncated set. */
int cli_reader_line(struct cli_reader *r, const char *prompt, const struct cli_history *h,
                    char **line, bool *truncated);
void cli_reader_close(struct cli_reader *r);

/* ---- the shell ------------------------------------------------------------ */
struct cli_watch_ctx; /* commands.c: context of one `watch` command's watcher */

struct cli {
    struct larch *lh; /* NULL when not connected */
    char *connect_string;
    /* -udp: get, ls and stat go over larchd's UDP read path, signed by lh's
     * session while there is one, anonymous otherwise */
    const char *udp_address; /* NULL: no -udp */
    struct larch_udp *udp;
    int32_t timeout_ms;
    bool json;
    bool print_watches;
    bool interactive; /* stdin is a tty */
    bool exit_on_error;
    bool quit;
    int worst; /* enum cli_status */
    struct cli_history history;
    struct cli_events events;
    struct cli_reader *reader; /* NULL in one-shot mode */
    uint64_t next_watch_id;
    struct cli_watch_ctx *watch_ctxs; /* freed when the handle closes */
    volatile sig_atomic_t *interrupted; /* set by SIGINT in interactive mode */
};

/* main.c */
/* Opens a handle on connect_string and waits up to c->timeout_ms.
 * CLI_OK or CLI_ECONNECT (reported). Replaces any open handle. */
int cli_connect(struct cli *c, const char *connect_string);
void cli_disconnect(struct cli *c);
/* (Re)opens the -udp transport for the current handle (or none).
 * CLI_OK, CLI_EUSAGE for a bad address (reported), CLI_ECONNECT. */
int cli_udp_attach(struct cli *c);
/* Prints and drops every queued event (printwatches decides printing). */
void cli_print_events(void *cli);

/* commands.c */
struct cli_token {
    char *text; /* NUL-terminated; may hold NULs from \x00 escapes */
    size_t len;
    bool quoted; /* quoted tokens are never options */
};
struct cli_tokens {
    struct cli_token *items;
    size_t count, cap;
};
/* Splits a line zkCli-style: words, "double quotes" with backslash escapes
 * (\" \\ \n \t \r \0 \xHH), 'single quotes' literal. 0 or -1 with msg set. */
int cli_tokenize(const char *line, struct cli_tokens *out, char *msg, size_t msg_cap);
void cli_tokens_free(struct cli_tokens *t);
/* Runs one input line (reading more lines for a txn block); enum cli_status. */
int cli_run_line(struct cli *c, const char *line);
/* Runs one command given as argv words (one-shot mode); enum cli_status. */
int cli_run_argv(struct cli *c, int argc, char **argv);
/* Whether the command named needs a connection (unknown names: true). */
bool cli_command_needs_connection(const char *name);
void cli_print_help(FILE *f);
void cli_free_watch_ctxs(struct cli *c);

/* Error reporting shared by commands and main (output.c); each returns the status. */
int cli_usage_error(struct cli *c, const char *cmd, const char *usage, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int cli_server_error(struct cli *c, const char *cmd, int err, const char *path);
int cli_connect_error(struct cli *c, const char *cmd, const char *msg);
/* An operation failure that is not a server error code (a `watch` timeout,
 * a subtree too large): CLI_ESERVER, error_name goes into the JSON. */
int cli_op_error(struct cli *c, const char *cmd, const char *error_name, const char *path,
                 const char *fmt, ...) __attribute__((format(printf, 5, 6)));

#endif
