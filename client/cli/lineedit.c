/*
 * larch-cli input: a small line editor for terminals and a plain line
 * reader for pipes and files, behind one interface (cli_reader_line).
 *
 * The editor puts the terminal in raw mode only while a line is being typed
 * and restores it before returning, so command output and the `watch` wait
 * run in the normal (cooked) mode. It supports left/right, home/end,
 * backspace/delete, ctrl-a/e/b/f/u/k/w/d/c/l, and up/down (ctrl-p/n) through
 * the shell's history, and scrolls long lines horizontally (no readline
 * dependency; the same key set as linenoise).
 *
 * Both readers poll the event pipe while waiting for input, so watch events
 * are printed as they arrive; the editor clears its line first and redraws
 * it after, so the user's half-typed command is never garbled.
 */
#include "client/cli/cli.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#define POLL_STEP_MS 1000       /* how long one poll waits before re-polling */
#define ESC_SEQ_TIMEOUT_MS 100  /* the rest of an escape sequence comes at once */
#define ESC_PARAMS_MAX 16
#define DEFAULT_COLS 80

struct cli_reader {
    int fd;
    bool tty;
    int event_fd;
    cli_event_fn on_event;
    void *event_ctx;
    unsigned char chunk[8192]; /* bytes read but not consumed */
    size_t chunk_pos, chunk_len;
    bool eof;
    struct termios saved; /* the terminal mode to restore */
};

/* One line being edited. */
struct edit {
    struct cli_buf text;
    size_t pos; /* cursor, a byte offset on a UTF-8 boundary */
    const char *prompt;
    const struct cli_history *history;
    size_t hist_pos;     /* history index shown; history->count = the new line */
    char *typed_line;    /* the new line, saved while browsing history */
};

struct cli_reader *cli_reader_open(int fd, bool tty, int event_fd, cli_event_fn on_event,
                                   void *event_ctx)
{
    struct cli_reader *r = calloc(1, sizeof *r);
    if (r == NULL)
        return NULL;
    r->fd = fd;
    r->tty = tty;
    r->event_fd = on_event != NULL ? event_fd : -1; /* nobody would drain it */
    r->on_event = on_event;
    r->event_ctx = event_ctx;
    return r;
}

void cli_reader_close(struct cli_reader *r)
{
    free(r);
}

/* ---- terminal output ------------------------------------------------------------ */

static void write_all(const char *s, size_t len)
{
    size_t done = 0;
    int tries = 0;
    while (done < len && tries++ < 1000) {
        ssize_t n = write(STDOUT_FILENO, s + done, len - done);
        if (n > 0)
            done += (size_t)n;
        else if (n < 0 && errno != EINTR && errno != EAGAIN)
            return; /* the terminal is gone; nothing left to show it on */
    }
}

static size_t terminal_cols(void)
{
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    return DEFAULT_COLS;
}

static bool utf8_continuation(unsigned char c)
{
    return (c & 0xC0) == 0x80;
}

/* Terminal columns of s[from, to): one per code point (no wide glyphs). */
static size_t columns(const char *s, size_t from, size_t to)
{
    size_t n = 0;
    for (size_t i = from; i < to; i++)
        if (!utf8_continuation((unsigned char)s[i]))
            n++;
    return n;
}

static size_t next_char(const struct edit *e, size_t at)
{
    if (at >= e->text.len)
        return e->text.len;
    at++;
    while (at < e->text.len && utf8_continuation((unsigned char)e->text.data[at]))
        at++;
    return at;
}

static size_t prev_char(const struct edit *e, size_t at)
{
    if (at == 0)
        return 0;
    at--;
    while (at > 0 && utf8_continuation((unsigned char)e->text.data[at]))
        at--;
    return at;
}

/* Redraws prompt and line; scrolls so the cursor stays on screen. */
static void refresh_line(const struct edit *e)
{
    size_t cols = terminal_cols();
    size_t prompt_cols = columns(e->prompt, 0, strlen(e->prompt));
    size_t room = cols > prompt_cols + 1 ? cols - prompt_cols - 1 : 1;
    const char *s = e->text.data ? e->text.data : "";
    size_t start = 0;
    while (columns(s, start, e->pos) > room)
        start = next_char(e, start);
    size_t end = start;
    while (end < e->text.len && columns(s, start, next_char(e, end)) <= room)
        end = next_char(e, end);
    struct cli_buf out = {0};
    cli_buf_puts(&out, "\r");
    cli_buf_puts(&out, e->prompt);
    cli_buf_append(&out, s + start, end - start);
    cli_buf_puts(&out, "\x1b[0K\r");
    size_t cursor_col = prompt_cols + columns(s, start, e->pos);
    if (cursor_col > 0)
        cli_buf_printf(&out, "\x1b[%zuC", cursor_col);
    if (!out.failed)
        write_all(out.data, out.len);
    cli_buf_free(&out);
}

/* ---- raw mode --------------------------------------------------------------------- */

/* Raw input (no echo, no line buffering, no signals from ^C, no CR->NL) but
 * output post-processing kept, so text printed for events still gets CR-LF.
 * TCSANOW rather than TCSAFLUSH: keystrokes typed ahead must not be lost. */
static int enable_raw(struct cli_reader *r)
{
    if (tcgetattr(r->fd, &r->saved) != 0)
        return -1;
    struct termios raw = r->saved;
    raw.c_iflag &= ~(tcflag_t)(BRKINT | ICRNL | INPCK | ISTRIP | IXON);
    raw.c_cflag |= CS8;
    raw.c_lflag &= ~(tcflag_t)(ECHO | ICANON | IEXTEN | ISIG);
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    return tcsetattr(r->fd, TCSANOW, &raw);
}

static void disable_raw(struct cli_reader *r)
{
    /* Failing to restore leaves the terminal raw; nothing better to do. */
    if (tcsetattr(r->fd, TCSANOW, &r->saved) != 0)
        write_all("\r\n", 2);
}

/* ---- input ----------------------------------------------------------------------- */

/* Prints pending events; in the editor, clears the line first and redraws it. */
static void handle_events(struct cli_reader *r, const struct edit *e)
{
    if (r->on_event == NULL)
        return;
    if (e != NULL)
        write_all("\r\x1b[0K", 5);
    r->on_event(r->event_ctx);
    if (e != NULL)
        refresh_line(e);
}

/* Reads more bytes into chunk. 1: bytes available; 0: timeout_ms passed
 * (timeout_ms < 0: wait for input, polling in steps); -1: end of input or
 * an error (errno kept, 0 for end of input). A shell waits for its user as
 * long as the user likes, hence the unbounded wait for timeout_ms < 0; every
 * single poll is bounded so events are printed while waiting. */
static int fill(struct cli_reader *r, int timeout_ms, const struct edit *e)
{
    if (r->eof) {
        errno = 0;
        return -1;
    }
    int waited_ms = 0;
    for (;;) {
        struct pollfd pfd[2] = {{.fd = r->fd, .events = POLLIN},
                                {.fd = r->event_fd, .events = POLLIN}};
        int step = timeout_ms < 0 ? POLL_STEP_MS : timeout_ms - waited_ms;
        int n = poll(pfd, r->event_fd >= 0 ? 2 : 1, step);
        if (n < 0 && errno != EINTR)
            return -1;
        if (n > 0 && r->event_fd >= 0 && (pfd[1].revents & POLLIN))
            handle_events(r, e);
        if (n > 0 && (pfd[0].revents & (POLLIN | POLLHUP | POLLERR))) {
            ssize_t got = read(r->fd, r->chunk, sizeof r->chunk);
            if (got > 0) {
                r->chunk_pos = 0;
                r->chunk_len = (size_t)got;
                return 1;
            }
            if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
                if (got == 0)
                    errno = 0;
                r->eof = true;
                return -1;
            }
        }
        if (n == 0 && timeout_ms >= 0) {
            waited_ms += step;
            if (waited_ms >= timeout_ms)
                return 0;
        }
    }
}

/* One byte: 1 read, 0 timeout, -1 end of input / error. */
static int next_byte(struct cli_reader *r, int timeout_ms, const struct edit *e, unsigned char *c)
{
    if (r->chunk_pos == r->chunk_len) {
        int rc = fill(r, timeout_ms, e);
        if (rc <= 0)
            return rc;
    }
    *c = r->chunk[r->chunk_pos++];
    return 1;
}

/* Hands out acc's text as a malloc'd string ("" for an empty line). */
static int finish_line(struct cli_buf *acc, char **line)
{
    if (acc->failed) {
        cli_buf_free(acc);
        errno = ENOMEM;
        return -1;
    }
    if (acc->data == NULL) {
        *line = strdup("");
        if (*line == NULL) {
            errno = ENOMEM;
            return -1;
        }
        return 1;
    }
    if (acc->len > 0 && acc->data[acc->len - 1] == '\r')
        acc->data[--acc->len] = '\0';
    *line = acc->data;
    *acc = (struct cli_buf){0};
    return 1;
}

/* fgets-style: up to a newline; the last line may lack one. */
static int read_plain(struct cli_reader *r, char **line, bool *truncated)
{
    struct cli_buf acc = {0};
    bool got_any = false;
    for (;;) {
        if (r->chunk_pos == r->chunk_len) {
            if (fill(r, -1, NULL) < 0) {
                if (errno != 0) {
                    cli_buf_free(&acc);
                    return -1;
                }
                break;
            }
            continue;
        }
        got_any = true;
        unsigned char *start = r->chunk + r->chunk_pos;
        size_t avail = r->chunk_len - r->chunk_pos;
        unsigned char *nl = memchr(start, '\n', avail);
        size_t n = nl ? (size_t)(nl - start) : avail;
        size_t room = acc.len < CLI_LINE_BYTES_MAX ? CLI_LINE_BYTES_MAX - acc.len : 0;
        if (n > room)
            *truncated = true;
        cli_buf_append(&acc, start, n < room ? n : room);
        r->chunk_pos += n + (nl ? 1 : 0);
        if (nl != NULL)
            return finish_line(&acc, line);
    }
    if (!got_any) {
        cli_buf_free(&acc);
        return 0;
    }
    return finish_line(&acc, line);
}

/* ---- editing ------------------------------------------------------------------------ */

static void set_text(struct edit *e, const char *s)
{
    e->text.len = 0;
    cli_buf_puts(&e->text, s ? s : "");
    if (e->text.data == NULL)
        cli_buf_append(&e->text, "", 0);
    e->pos = e->text.len;
}

static void delete_range(struct edit *e, size_t from, size_t to)
{
    if (to <= from || e->text.data == NULL)
        return;
    memmove(e->text.data + from, e->text.data + to, e->text.len - to + 1);
    e->text.len -= to - from;
    if (e->pos > to)
        e->pos -= to - from;
    else if (e->pos > from)
        e->pos = from;
}

static void insert_byte(struct edit *e, unsigned char c)
{
    if (e->text.len >= CLI_LINE_BYTES_MAX)
        return;
    cli_buf_append(&e->text, "", 1); /* grow by one; moved into place below */
    if (e->text.failed)
        return;
    memmove(e->text.data + e->pos + 1, e->text.data + e->pos, e->text.len - 1 - e->pos);
    e->text.data[e->pos++] = (char)c;
    e->text.data[e->text.len] = '\0';
}

/* Up (dir -1) or down (+1) through history; the typed line is kept aside. */
static void browse_history(struct edit *e, int dir)
{
    const struct cli_history *h = e->history;
    if (h == NULL || h->count == 0)
        return;
    if (dir < 0 && e->hist_pos == 0)
        return;
    if (dir > 0 && e->hist_pos >= h->count)
        return;
    if (e->hist_pos == h->count) {
        free(e->typed_line);
        e->typed_line = strdup(e->text.data ? e->text.data : "");
    }
    e->hist_pos = dir < 0 ? e->hist_pos - 1 : e->hist_pos + 1;
    set_text(e, e->hist_pos == h->count ? e->typed_line : h->lines[e->hist_pos]);
}

static void delete_word_before(struct edit *e)
{
    size_t at = e->pos;
    while (at > 0 && e->text.data[at - 1] == ' ')
        at--;
    while (at > 0 && e->text.data[at - 1] != ' ')
        at--;
    delete_range(e, at, e->pos);
}

enum key_result { KEY_CONTINUE, KEY_DONE, KEY_EOF };

/* Applies an escape sequence's final byte (CSI / SS3 cursor keys). */
static void apply_escape(struct edit *e, const char *params, unsigned char final)
{
    switch (final) {
    case 'A': browse_history(e, -1); break;
    case 'B': browse_history(e, +1); break;
    case 'C': e->pos = next_char(e, e->pos); break;
    case 'D': e->pos = prev_char(e, e->pos); break;
    case 'H': e->pos = 0; break;
    case 'F': e->pos = e->text.len; break;
    case '~':
        if (strcmp(params, "1") == 0 || strcmp(params, "7") == 0)
            e->pos = 0;
        else if (strcmp(params, "4") == 0 || strcmp(params, "8") == 0)
            e->pos = e->text.len;
        else if (strcmp(params, "3") == 0)
            delete_range(e, e->pos, next_char(e, e->pos));
        break;
    default: break; /* keys we do not bind are ignored */
    }
}

/* Reads the rest of ESC [ ... or ESC O ... and applies it. */
static void read_escape(struct cli_reader *r, struct edit *e)
{
    unsigned char intro = 0, c = 0;
    if (next_byte(r, ESC_SEQ_TIMEOUT_MS, e, &intro) != 1)
        return;
    if (intro != '[' && intro != 'O')
        return;
    char params[ESC_PARAMS_MAX + 1];
    size_t n = 0;
    while (next_byte(r, ESC_SEQ_TIMEOUT_MS, e, &c) == 1) {
        if (c >= 0x30 && c <= 0x3F) { /* parameter bytes: digits, ';' */
            if (n < ESC_PARAMS_MAX)
                params[n++] = (char)c;
            continue;
        }
        params[n] = '\0';
        /* "1;5C" (ctrl-arrow) is treated as the plain arrow. */
        char *semi = strchr(params, ';');
        if (semi != NULL && c != '~')
            *semi = '\0';
        apply_escape(e, params, c);
        return;
    }
}

static enum key_result apply_key(struct cli_reader *r, struct edit *e, unsigned char c)
{
    switch (c) {
    case '\r':
    case '\n': return KEY_DONE;
    case 1: e->pos = 0; break;                            /* ctrl-a */
    case 2: e->pos = prev_char(e, e->pos); break;         /* ctrl-b */
    case 3:                                               /* ctrl-c */
        set_text(e, "");
        write_all("^C", 2);
        return KEY_DONE;
    case 4:                                               /* ctrl-d */
        if (e->text.len == 0)
            return KEY_EOF;
        delete_range(e, e->pos, next_char(e, e->pos));
        break;
    case 5: e->pos = e->text.len; break;                  /* ctrl-e */
    case 6: e->pos = next_char(e, e->pos); break;         /* ctrl-f */
    case 8:
    case 127: delete_range(e, prev_char(e, e->pos), e->pos); break;
    case 11: delete_range(e, e->pos, e->text.len); break; /* ctrl-k */
    case 12: write_all("\x1b[H\x1b[2J", 7); break;        /* ctrl-l */
    case 14: browse_history(e, +1); break;                /* ctrl-n */
    case 16: browse_history(e, -1); break;                /* ctrl-p */
    case 21: delete_range(e, 0, e->pos); break;           /* ctrl-u */
    case 23: delete_word_before(e); break;                /* ctrl-w */
    case 27: read_escape(r, e); break;
    default:
        if (c >= 32)
            insert_byte(e, c);
        break; /* other control keys (tab, ...) do nothing */
    }
    return KEY_CONTINUE;
}

static int edit_line(struct cli_reader *r, const char *prompt, const struct cli_history *h,
                     char **line)
{
    struct edit e = {.prompt = prompt, .history = h, .hist_pos = h ? h->count : 0};
    set_text(&e, "");
    refresh_line(&e);
    int rc;
    for (;;) {
        unsigned char c = 0;
        int got = next_byte(r, -1, &e, &c);
        if (got < 0) {
            /* End of input on a typed line returns that line first. */
            rc = (errno == 0 && e.text.len > 0) ? 1 : (errno == 0 ? 0 : -1);
            break;
        }
        enum key_result k = apply_key(r, &e, c);
        if (k == KEY_EOF) {
            rc = 0;
            break;
        }
        if (k == KEY_DONE) {
            rc = 1;
            break;
        }
        refresh_line(&e);
    }
    write_all("\n", 1);
    free(e.typed_line);
    if (rc == 1)
        return finish_line(&e.text, line);
    cli_buf_free(&e.text);
    return rc;
}

int cli_reader_line(struct cli_reader *r, const char *prompt, const struct cli_history *h,
                    char **line, bool *truncated)
{
    *line = NULL;
    *truncated = false;
    if (!r->tty || enable_raw(r) != 0)
        return read_plain(r, line, truncated);
    int rc = edit_line(r, prompt ? prompt : "", h, line);
    int saved_errno = errno;
    disable_raw(r);
    errno = saved_errno;
    return rc;
}
