/*
 * larch-cli commands: the tokenizer, history, the command table and each
 * command, in zkCli.sh 3.8's syntax (ZooKeeperMain's command set) on
 * liblarch's synchronous API.
 *
 * Every command returns an enum cli_status and prints its own result: text
 * in zkCli's wording, or one JSON object per line with --json. Malformed
 * input is caught before anything is sent (status CLI_EUSAGE); server
 * errors are reported with KeeperException's text (CLI_ESERVER).
 *
 * `txn { ... }` is larch-cli's own: create/delete/set/check lines run as one
 * multi (seed 004, "multiop and Transaction": all or nothing, with check ops
 * guarding versions).
 */
#include "client/cli/cli.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define POS_MAX 3
#define DELETEALL_BATCH_DEFAULT 1000 /* zkCli's deleteall -b default */
#define DELETEALL_BATCH_BYTES_MAX (256 * 1024)
#define HISTORY_SHOWN 11             /* zkCli prints the last ten and itself */

/* ---- tokens ------------------------------------------------------------------------ */

void cli_tokens_free(struct cli_tokens *t)
{
    for (size_t i = 0; i < t->count; i++)
        free(t->items[i].text);
    free(t->items);
    *t = (struct cli_tokens){0};
}

static int tokens_push(struct cli_tokens *t, struct cli_buf *text, bool quoted)
{
    if (text->data == NULL)
        cli_buf_append(text, "", 0);
    if (text->failed)
        return -1;
    if (base_grow(&t->items, &t->cap, t->count + 1, sizeof *t->items) != 0)
        return -1;
    t->items[t->count++] = (struct cli_token){.text = text->data, .len = text->len, .quoted = quoted};
    *text = (struct cli_buf){0};
    return 0;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)tolower((unsigned char)c);
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Reads a double-quoted part starting after the opening quote; *p ends
 * after the closing quote. 0, or -1 with msg set. */
static int read_double_quoted(const char **p, struct cli_buf *tok, char *msg, size_t cap)
{
    const char *s = *p;
    while (*s != '\0' && *s != '"') {
        if (*s != '\\' || s[1] == '\0') {
            cli_buf_append(tok, s++, 1);
            continue;
        }
        char out = 0;
        switch (s[1]) {
        case '"': out = '"'; break;
        case '\\': out = '\\'; break;
        case '\'': out = '\''; break;
        case 'n': out = '\n'; break;
        case 't': out = '\t'; break;
        case 'r': out = '\r'; break;
        case '0': out = '\0'; break;
        case 'x': {
            int hi = hex_digit(s[2]), lo = hi < 0 ? -1 : hex_digit(s[3]);
            if (lo < 0) {
                snprintf(msg, cap, "bad escape \\x%.2s: expected two hex digits", s + 2);
                return -1;
            }
            out = (char)(hi * 16 + lo);
            s += 2;
            break;
        }
        default:
            /* Unknown escapes stay literal, so "C:\dir" means what zkCli made of it. */
            cli_buf_append(tok, s, 2);
            s += 2;
            continue;
        }
        cli_buf_append(tok, &out, 1);
        s += 2;
    }
    if (*s != '"') {
        snprintf(msg, cap, "unterminated double quote");
        return -1;
    }
    *p = s + 1;
    return 0;
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

int cli_tokenize(const char *line, struct cli_tokens *out, char *msg, size_t msg_cap)
{
    *out = (struct cli_tokens){0};
    const char *p = line;
    for (;;) {
        while (is_blank(*p))
            p++;
        if (*p == '\0')
            return 0;
        struct cli_buf tok = {0};
        bool quoted = false;
        while (*p != '\0' && !is_blank(*p)) {
            if (*p == '"') {
                quoted = true;
                p++;
                if (read_double_quoted(&p, &tok, msg, msg_cap) != 0)
                    goto fail;
            } else if (*p == '\'') {
                const char *end = strchr(p + 1, '\'');
                if (end == NULL) {
                    snprintf(msg, msg_cap, "unterminated single quote");
                    goto fail;
                }
                quoted = true;
                cli_buf_append(&tok, p + 1, (size_t)(end - p - 1));
                p = end + 1;
            } else {
                cli_buf_append(&tok, p++, 1);
            }
        }
        if (tokens_push(out, &tok, quoted) != 0) {
            snprintf(msg, msg_cap, "out of memory");
            goto fail;
        }
        continue;
fail:
        cli_buf_free(&tok);
        cli_tokens_free(out);
        return -1;
    }
}

/* Writes t so cli_tokenize reads it back identically (history of a txn). */
static void append_token_source(struct cli_buf *b, const struct cli_token *t)
{
    bool plain = !t->quoted && t->len > 0;
    for (size_t i = 0; plain && i < t->len; i++) {
        unsigned char ch = (unsigned char)t->text[i];
        if (ch <= ' ' || ch == '"' || ch == '\'' || ch == '\\' || ch == 0x7f)
            plain = false;
    }
    if (plain) {
        cli_buf_append(b, t->text, t->len);
        return;
    }
    cli_buf_append(b, "\"", 1);
    for (size_t i = 0; i < t->len; i++) {
        unsigned char ch = (unsigned char)t->text[i];
        if (ch == '"' || ch == '\\')
            cli_buf_printf(b, "\\%c", ch);
        else if (ch == '\n')
            cli_buf_puts(b, "\\n");
        else if (ch == '\t')
            cli_buf_puts(b, "\\t");
        else if (ch == '\r')
            cli_buf_puts(b, "\\r");
        else if (ch < 0x20 || ch == 0x7f)
            cli_buf_printf(b, "\\x%02x", ch);
        else
            cli_buf_append(b, &t->text[i], 1);
    }
    cli_buf_append(b, "\"", 1);
}

static bool token_is(const struct cli_token *t, const char *word)
{
    return !t->quoted && strcmp(t->text, word) == 0;
}

/* ---- history --------------------------------------------------------------------------- */

int cli_history_add(struct cli_history *h, const char *line)
{
    if (h->lines == NULL) {
        h->lines = calloc(CLI_HISTORY_MAX, sizeof *h->lines);
        if (h->lines == NULL)
            return -1;
    }
    char *copy = strdup(line);
    if (copy == NULL)
        return -1;
    if (h->count == CLI_HISTORY_MAX) {
        free(h->lines[0]);
        memmove(h->lines, h->lines + 1, (CLI_HISTORY_MAX - 1) * sizeof *h->lines);
        h->count--;
        h->first_number++;
    }
    h->lines[h->count++] = copy;
    return 0;
}

const char *cli_history_get(const struct cli_history *h, int64_t n)
{
    if (n < h->first_number || n >= h->first_number + (int64_t)h->count)
        return NULL;
    return h->lines[n - h->first_number];
}

int64_t cli_history_next_number(const struct cli_history *h)
{
    return h->first_number + (int64_t)h->count;
}

void cli_history_free(struct cli_history *h)
{
    for (size_t i = 0; i < h->count; i++)
        free(h->lines[i]);
    free(h->lines);
    *h = (struct cli_history){0};
}

static void remember(struct cli *c, const char *line)
{
    if (cli_history_add(&c->history, line) != 0)
        fprintf(stderr, "warning: out of memory, command not kept in history\n");
}

/* ---- arguments -------------------------------------------------------------------------- */

struct command;
struct cli_args {
    bool flag[128];
    const char *value[128]; /* option values, NUL-terminated */
    const struct cli_token *pos[POS_MAX];
    size_t npos;
};
typedef int (*command_fn)(struct cli *c, const struct command *cmd, const struct cli_args *a);

struct command {
    const char *name;
    const char *usage;
    const char *options; /* getopt-style: "sv:" */
    const char *pos_names[POS_MAX];
    size_t min_pos, max_pos;
    bool needs_conn;
    command_fn run;
    const char *summary;
};

/* Options may come anywhere (commons-cli, as zkCli: "removewatches /a -d");
 * a token is an option when it is unquoted, starts with '-' and is longer
 * than "-"; "--" ends options. Clustered flags ("-es") are accepted. */
static int parse_option_token(struct cli *c, const struct command *cmd, const struct cli_token *t,
                              const struct cli_token *next, bool *used_next, struct cli_args *a)
{
    for (const char *p = t->text + 1; *p != '\0'; p++) {
        unsigned char f = (unsigned char)*p;
        const char *spec = (f != ':' && f < 128) ? strchr(cmd->options, f) : NULL;
        if (spec == NULL)
            return cli_usage_error(c, cmd->name, cmd->usage, "unknown option -%c", *p);
        a->flag[f] = true;
        if (spec[1] != ':')
            continue;
        if (p[1] != '\0') {
            a->value[f] = p + 1;
        } else if (next != NULL && !*used_next) {
            a->value[f] = next->text;
            *used_next = true;
        } else {
            return cli_usage_error(c, cmd->name, cmd->usage, "option -%c needs a value", *p);
        }
        return CLI_OK;
    }
    return CLI_OK;
}

static int parse_args(struct cli *c, const struct command *cmd, const struct cli_token *t, size_t n,
                      struct cli_args *a)
{
    memset(a, 0, sizeof *a);
    bool options_done = false;
    for (size_t i = 0; i < n; i++) {
        if (!options_done && token_is(&t[i], "--")) {
            options_done = true;
            continue;
        }
        if (!options_done && !t[i].quoted && t[i].text[0] == '-' && t[i].len > 1) {
            bool used_next = false;
            int st = parse_option_token(c, cmd, &t[i], i + 1 < n ? &t[i + 1] : NULL, &used_next, a);
            if (st != CLI_OK)
                return st;
            i += used_next ? 1 : 0;
            continue;
        }
        if (a->npos >= cmd->max_pos)
            return cli_usage_error(c, cmd->name, cmd->usage, "too many arguments ('%s')",
                                   t[i].text);
        a->pos[a->npos++] = &t[i];
    }
    if (a->npos < cmd->min_pos)
        return cli_usage_error(c, cmd->name, cmd->usage, "missing argument: %s",
                               cmd->pos_names[a->npos]);
    return CLI_OK;
}

/* A path argument: NUL-free and valid per PathUtils.validatePath. */
static int check_path(struct cli *c, const struct command *cmd, const struct cli_token *t,
                      bool sequential)
{
    if (strlen(t->text) != t->len || !larch_path_valid(t->text, sequential))
        return cli_usage_error(c, cmd->name, cmd->usage,
                               "invalid path '%s' (absolute, no empty, '.' or '..' parts%s)",
                               t->text, sequential ? "" : ", no trailing '/'");
    return CLI_OK;
}

static bool parse_int64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    if (s == NULL || *s == '\0' || isspace((unsigned char)*s))
        return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

/* -v version: any int32 (-1 matches every version), default -1. */
static int version_arg(struct cli *c, const struct command *cmd, const struct cli_args *a,
                       int32_t *version)
{
    int64_t v = -1;
    if (a->flag['v'] && !parse_int64(a->value['v'], INT32_MIN, INT32_MAX, &v))
        return cli_usage_error(c, cmd->name, cmd->usage,
                               "bad version '%s' (expected an integer, -1 for any)",
                               a->value['v']);
    *version = (int32_t)v;
    return CLI_OK;
}

static int acl_arg(struct cli *c, const struct command *cmd, const char *text,
                   struct larch_acl_list *acl)
{
    if (larch_acl_parse(text, acl) != ZK_OK)
        return cli_usage_error(c, cmd->name, cmd->usage,
                               "bad ACL '%s' (expected scheme:id:perms[,...] with perms "
                               "from cdrwa, e.g. world:anyone:cdrwa)",
                               text);
    return CLI_OK;
}

/* create's flags to a CreateMode (CreateCommand's rules). */
static int create_mode_arg(struct cli *c, const struct command *cmd, const struct cli_args *a,
                           int32_t *mode, int64_t *ttl_ms)
{
    bool e = a->flag['e'], s = a->flag['s'], ctr = a->flag['c'], t = a->flag['t'];
    *ttl_ms = 0;
    if (ctr && (e || s || t))
        return cli_usage_error(c, cmd->name, cmd->usage, "-c cannot be combined with -e, -s or -t");
    if (t && e)
        return cli_usage_error(c, cmd->name, cmd->usage, "TTLs cannot be used with ephemeral nodes");
    if (t && !parse_int64(a->value['t'], 1, INT64_MAX, ttl_ms))
        return cli_usage_error(c, cmd->name, cmd->usage,
                               "bad ttl '%s' (expected a positive number of milliseconds)",
                               a->value['t']);
    if (e)
        *mode = s ? ZK_EPHEMERAL_SEQUENTIAL : ZK_EPHEMERAL;
    else if (ctr)
        *mode = ZK_CONTAINER;
    else if (t)
        *mode = s ? ZK_PERSISTENT_SEQUENTIAL_WITH_TTL : ZK_PERSISTENT_WITH_TTL;
    else
        *mode = s ? ZK_PERSISTENT_SEQUENTIAL : ZK_PERSISTENT;
    return CLI_OK;
}

static larch_watch_fn watch_arg(const struct cli_args *a)
{
    return a->flag['w'] ? LARCH_DEFAULT_WATCHER : NULL;
}

/* ---- the reads -udp carries ---------------------------------------------------------------- */
/* Over UDP when -udp is given and no watch is asked for (a watch lives on
 * the session's TCP connection); over TCP otherwise. */
static bool over_udp(const struct cli *c, larch_watch_fn w)
{
    return c->udp != NULL && w == NULL;
}

static int read_children(struct cli *c, const char *path, larch_watch_fn w,
                         struct larch_strings *kids, struct zk_stat *stat)
{
    return over_udp(c, w) ? larch_udp_get_children(c->udp, path, kids, stat)
                          : larch_get_children(c->lh, path, w, NULL, kids, stat);
}

static int read_data(struct cli *c, const char *path, larch_watch_fn w, char **data,
                     int32_t *len, struct zk_stat *stat)
{
    return over_udp(c, w) ? larch_udp_get(c->udp, path, data, len, stat)
                          : larch_get(c->lh, path, w, NULL, data, len, stat);
}

static int read_stat(struct cli *c, const char *path, larch_watch_fn w, struct zk_stat *stat)
{
    return over_udp(c, w) ? larch_udp_exists(c->udp, path, stat)
                          : larch_exists(c->lh, path, w, NULL, stat);
}

/* A command that may run on -udp alone asked for a watch. */
static int check_watch_session(struct cli *c, const struct command *cmd, const struct cli_args *a)
{
    if (a->flag['w'] && c->lh == NULL)
        return cli_connect_error(c, cmd->name, "Not connected: a watch (-w) needs -server");
    return CLI_OK;
}

/* ---- small output helpers ------------------------------------------------------------------ */

static void json_cmd_path(struct cli_json *j, const char *cmd, const char *path)
{
    cli_json_begin(j);
    cli_json_str(j, "cmd", cmd);
    if (path != NULL)
        cli_json_str(j, "path", path);
}

/* The common reply of commands with nothing to print in text mode. */
static int reply_done(struct cli *c, const char *cmd, const char *path)
{
    if (c->json) {
        struct cli_json j;
        json_cmd_path(&j, cmd, path);
        cli_json_emit(&j);
    }
    return CLI_OK;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void sort_strings(struct larch_strings *s)
{
    if (s->count > 1)
        qsort(s->items, (size_t)s->count, sizeof *s->items, cmp_names);
}

/* zkCli's list form: "[a, b]". */
static void print_list(const struct larch_strings *s)
{
    fputc('[', stdout);
    for (int32_t i = 0; i < s->count; i++)
        printf("%s%s", i ? ", " : "", s->items[i]);
    fputs("]\n", stdout);
}

static void json_strings(struct cli_json *j, const char *key, const struct larch_strings *s)
{
    cli_json_arr(j, key);
    for (int32_t i = 0; i < s->count; i++)
        cli_json_str(j, NULL, s->items[i]);
    cli_json_end_arr(j);
}

/* ---- subtree walks (ls -R, deleteall, setAcl -R) ---------------------------------------- */

struct path_list {
    char **items;
    size_t count, cap;
};

static void path_list_free(struct path_list *l)
{
    for (size_t i = 0; i < l->count; i++)
        free(l->items[i]);
    free(l->items);
    *l = (struct path_list){0};
}

/* Takes ownership of path (freed on failure). */
static int path_list_push(struct path_list *l, char *path)
{
    if (path == NULL)
        return -1;
    if (base_grow(&l->items, &l->cap, l->count + 1, sizeof *l->items) != 0) {
        free(path);
        return -1;
    }
    l->items[l->count++] = path;
    return 0;
}

/* Pushes path's children (sorted, in reverse so they pop in order) onto stack. */
static int push_children(struct cli *c, const char *path, bool udp, struct path_list *stack,
                         int *err)
{
    struct larch_strings kids = {0};
    int rc = udp ? read_children(c, path, NULL, &kids, NULL)
                 : larch_get_children(c->lh, path, NULL, NULL, &kids, NULL);
    if (rc == ZK_ENONODE)
        return 0; /* deleted while we walked: nothing under it any more */
    if (rc != ZK_OK) {
        *err = rc;
        return -1;
    }
    sort_strings(&kids);
    int result = 0;
    for (int32_t i = kids.count - 1; i >= 0 && result == 0; i--) {
        if (path_list_push(stack, larch_path_join(path, kids.items[i])) != 0) {
            *err = ZK_ESYSTEMERROR;
            result = -1;
        }
    }
    larch_strings_free(&kids);
    return result;
}

/* Every path of root's subtree in depth-first pre-order, children sorted
 * (zkCli's ls -R order). 0, or -1 with *err the failing code (ZK_EAPIERROR
 * standing for "more than CLI_TREE_NODES_MAX nodes"). */
static int collect_tree(struct cli *c, const char *root, bool udp, struct path_list *out,
                        int *err)
{
    struct path_list stack = {0};
    *out = (struct path_list){0};
    int rc = udp ? read_stat(c, root, NULL, NULL) : larch_exists(c->lh, root, NULL, NULL, NULL);
    if (rc != ZK_OK) {
        *err = rc;
        return -1;
    }
    if (path_list_push(&stack, strdup(root)) != 0)
        goto oom;
    while (stack.count > 0) {
        if (out->count >= CLI_TREE_NODES_MAX) {
            *err = ZK_EAPIERROR; /* reported as "too many nodes" by callers */
            goto fail;
        }
        char *path = stack.items[--stack.count];
        if (path_list_push(out, path) != 0)
            goto oom;
        if (push_children(c, path, udp, &stack, err) != 0)
            goto fail;
    }
    path_list_free(&stack);
    return 0;
oom:
    *err = ZK_ESYSTEMERROR;
fail:
    path_list_free(&stack);
    path_list_free(out);
    return -1;
}

static int tree_error(struct cli *c, const struct command *cmd, int err, const char *root)
{
    if (err == ZK_EAPIERROR)
        return cli_op_error(c, cmd->name, "TOO_MANY_NODES", root, "more than %d nodes under %s",
                            CLI_TREE_NODES_MAX, root);
    return cli_server_error(c, cmd->name, err, root);
}

/* ---- read commands ---------------------------------------------------------------------------- */

static int ls_recursive(struct cli *c, const struct command *cmd, const char *path)
{
    struct path_list all;
    int err;
    if (collect_tree(c, path, true, &all, &err) != 0)
        return tree_error(c, cmd, err, path);
    if (c->json) {
        struct cli_json j;
        json_cmd_path(&j, cmd->name, path);
        cli_json_bool(&j, "recursive", true);
        cli_json_arr(&j, "paths");
        for (size_t i = 0; i < all.count; i++)
            cli_json_str(&j, NULL, all.items[i]);
        cli_json_end_arr(&j);
        cli_json_emit(&j);
    } else {
        for (size_t i = 0; i < all.count; i++)
            printf("%s\n", all.items[i]);
    }
    path_list_free(&all);
    return CLI_OK;
}

static int cmd_ls(struct cli *c, const struct command *cmd, const struct cli_args *a)
{
    const char *path = a->pos[0]->text;
    int st = check_path(c, cmd, a->pos[0], false);
    if (st != CLI_OK)
        return st;
    if (a->flag['R']) {
        if (a->flag['w'] || a->flag['s'])
            return cli_usage_error(c, cmd->name, cmd->usage, "-R cannot be combined with -w or -s");
        return ls_recursive(c, cmd, path);
    }
    if ((st = check_watch_session(c, cmd, a)) != CLI_OK)
        return st;
    struct larch_strings kids = {0};
    struct zk_stat stat;
    int rc = read_children(c, path, watch_arg(a), &kids, &stat);
    if (rc != ZK_OK)
        return cli_server_error(c, cmd->name, rc, path);
    sort_strings(&kids);
    if (c->json) {
        struct cli_json j;
        json_cmd_path(&j, cmd->name, path);
        json_strings(&j, "children", &kids);
        if (a->flag['s'])
            cli_json_stat(&j, "stat", &stat);
        cli_json_emit(&j);
    } else {
        print_list(&kids);
        if (a->flag['s'])
            cli_print_stat(stdout, &stat);
    }
    larch_strings_free(&kids);
    return CLI_OK;
}

static int cmd_get(struct cli *c, const struct command *cmd, const struct cli_args *a)
{
    const char *path = a->pos[0]->text;
    int st = check_path(c, cmd, a->pos[0], false);
    if (st != CLI_OK)
        return st;
    if ((st = check_watch_session(c, cmd, a)) != CLI_OK)
        return st;
    char *data = NULL;
    int32_t len = -1;
    struct zk_stat stat;
    int rc = read_data(c, path, watch_arg(a), &data, &len, &stat);
    if (rc != ZK_OK)
        return cli_server_error(c, cmd->name, rc, path);
    if (c->json) {
        struct cli_json j;
        json_cmd_path(&j, cmd->name, path);
        cli_json_data(&j, data, len);
        cli_json_stat(&j, "stat", &stat);
        cli_json_emit(&j);
    } else {
        if (data == NULL || len < 0)
            fputs("null", stdout); /* zkCli prints a null value so */
        else
            fwrite(data, 1, (size_t)len, stdout);
        fputc('\n', stdout);
        if (a->flag['s'])
            cli_print_stat(stdout, &stat);
    }
    free(data);
    return CLI_OK;
}

static int cmd_stat(struct cli *c, const struct command *cmd, const struct cli_args *a)
{
    const char *path = a->pos[0]->text;
    int st = check_path(c, cmd, a->pos[0], false);
    if (st != CLI_OK)
        return st;
    if ((st = check_watch_session(c, cmd, a)) != CLI_OK)
        return st;
    struct zk_stat stat;
    int rc = read_stat(c, path, watch_arg(a), &stat);
    if (rc != ZK_OK)
        return cli_server_error(c, cmd->name, rc, path);
    if (c->json) {
        struct cli_json j;
        json_cmd_path(&j, cmd->name, path);
        cli_json_stat(&j, "stat", &stat);
        cli_json_emit(&j);
    } else {
        cli_print_stat(stdout, &stat);
    }
    return CLI_OK;
}

static int cmd_get_acl(struct cli *c, const struct command *cmd, const struct cli_args *a)
{
    const char *path = a->pos[0]->text;
    int st = check_path(c, cmd, a->pos[0], false);
    if (st != CLI_OK)
        return st;
    struct larch_acl_list acl = {0};
    struct zk_stat stat;
    int rc = larch_get_acl(c->lh, path, &acl, &stat);
    if (rc != ZK_OK)
        return cli_server_error(c, cmd->name, rc, path);
    char perms[6];
    if (c->json) {
        struct cli_json j;
        json_cmd_path(&j, cmd->name, path);
        cli_json_arr(&j, "acl");
        for (int32_t i = 0; i < acl.count; i++) {
            larch_perms_format(acl.items[i].perms, perms);
            cli_json_obj(&j, NULL);
            cli_json_str(&j, "scheme", acl.items[i].scheme);
            cli_json_str(&j, "id", acl.items[i].id);
            cli_json_str(&j, "perms", perms);
            cli_json_end_obj(&j);
        }
        cli_json_end_arr(&j);
        cli_json_stat(&j, "stat", &stat);
        cli_json_emit(&j);
    } else {
        for (int32_t i = 0; i < acl.count; i++) {
            larch_perms_format(acl.items[i].perms, perms);
            printf("'%s,'%s\n: %s\n", acl.items[i].scheme, acl.items[i].id, perms);
        }
        if (a->flag['s'])
            cli_print_stat(stdout, &stat);
    }
    larch_acl_list_free(&acl);
    return CLI_OK;
}

static int cmd_get_ephemerals(struct cli *c, const struct command *cmd, const struct cli_args *a)
{
    const char *path = a->npos > 0 ? a->pos[0]->text : "/";
    if (a->npos > 0) {
        int st = check_path(c, cmd, a->pos[0], false);
        if (st != CLI_OK)
            return st;
    }
    struct larch_strings paths = {0};
    int rc = larch_get_ephemerals(c->lh, path, &paths);
    if (rc != ZK_OK)
        return cli_server_error(c, cmd->name, rc, path);
    sort_strings(&paths);
    if (c->json) {
        struct cli_json j;
        json_cmd_path(&j, cmd->name, path);
        json_strings(&j, "ephemerals", &paths);
        cli_json_emit(&j);
    } else {
        print_list(&paths);
    }
    larch_strings_free(&paths);
    return CLI_OK;
}

static int cmd_count_children(struct cli *c, const struct command *cmd, const struct cli_args *a)
{
    const char *path = a->pos[0]->text;
    int st = check_path(c, cmd, a->pos[0], false);
    if (st != CLI_OK)
        return st;
    int32_t number = 0;
    int rc = larch_get_all_children_number(c->lh, path, &number);
    if (rc != ZK_OK)
        return cli_server_error(c, cmd->name, rc, path);
    if (c->json) {
        struct cli_json j;
        json_cmd_path(&j, cmd->name, path);
        cli_json_int(&j, "number", number);
        cli_json_emit(&j);
    } else {
        printf("%" PRId32 "\n", number);
    }
    return CLI_OK;
}

/* ---- write commands ------------------------------------------------------------------------------ */

static int cmd_create(struct cli *c, const struct command *cmd, const struct cli_args *a)
{
    int32_t mode = ZK_PERSISTENT;
    int64_t ttl_ms = 0;
    int st = create_mode_arg(c, cmd, a, &mode, &ttl_ms);
    if (st == CLI_OK)
        st = check_path(c, cmd, a->pos[0], a->flag['s']);
    if (st != CLI_OK)
        return st;
    struct larch_acl_list acl = {0};
    if (a->npos > 2 && (st = acl_arg(c, cmd, a->pos[2]->text, &acl)) != CLI_OK)
        return st;
    /* Without a data argument zkCli creates the node with a null value. */
    const char *data = a->npos > 1 ? a->pos[1]->text : NULL;
    int32_t len = a->npos > 1 ? (int32_t)a->pos[1]->len : -1;
    const char *path = a->pos[0]->text;
    char *created = NULL;
    int rc = larch_create(c->lh, path, data, len, a->npos > 2 ? &acl : NULL, mode, ttl_ms,
                          &created, NULL);
    larch_acl_list_free(&acl);
    if (rc != ZK_OK)
        return cli_server_error(c, cmd->name, rc, path);
    const char *name = created ? created : path;
    if (c->json) {
        struct cli_json j;
        json_cmd_path(&j, cmd->name, path);
        cli_json_str(&j, "created", name);
        cli_json_emit(&j);
    } else {
        printf("Created %s\n", name);
    }
    free(created);
    return CLI_OK;
}

static int cmd_set(struct cli *c, const struct command *cmd, const struct cli_args *a)
{
    int32_t version = -1;
    int st = version_arg(c, cmd, a, &version);
    if (st == CLI_OK)
        st = check_path(c, cmd, a->pos[0], false);
    if (st != CLI_OK)
        return st;
    const char *path = a->pos[0]->text;
    struct zk_stat stat;
    int rc = larch_set(c->lh, path, a->pos[1]->text, (int32_t)a->pos[1]->len, version, &stat);
    if (rc != ZK_OK)
        return cli_server_error(c, cmd->name, rc, path);
    if (c->json) {
        struct cli_json j;
        json_cmd_path(&j, cmd->name, path);
        cli_json_stat(&j, "stat", &stat);
        cli_json_emit(&j);
    } else if (a->flag['s']) {
        cli_print_stat(stdout, &stat);
    }
    return CLI_OK;
}

static int cmd_delete(struct cli *c, const struct command *cmd, const struct cli_args *a)
{
    int32_t version = -1;
    int st = version_arg(c, cmd, a, &version);
    if (st == CLI_OK)
        st = check_path(c, cmd, a->pos[0], false);
    if (st != CLI_OK)
        return st;
    const char *path = a->pos[0]->text;
    int rc = larch_delete(c->lh, path, version);
    if (rc != ZK_OK)
        return cli_server_error(c, cmd->name, rc, path);
    return reply_done(c, cmd->name, path);
}

/* Deletes paths[from, to) one at a time (the fallback when a batch's multi
 * failed because the tree changed under us). A node already gone is fine. */
static int delete_each(struct cli *c, char **paths, size_t from, size_t to, size_t *failed_at)
{
    for (size_t i = to; i > from; i--) {
        int rc = larch_delete(c->lh, paths[i - 1], -1);
        if (rc != ZK_OK && rc != ZK_ENONODE) {
            *failed_at = i - 1;
            return rc;
        }
    }
    return ZK_OK;
}

/* Deletes paths[from, to) deepest first as one multi. */
static int delete_batch(struct cli *c, char **paths, size_t from, size_t to, size_t *failed_at)
{
    size_t n = to - from;
    struct larch_op *ops = calloc(n, sizeof *ops);
    if (ops == NULL)
        return ZK_ESYSTEMERROR;
    for (size_t i = 0; i < n; i++)
        ops[i] = larch_op_delete(paths[to - 1 - i], -1);
    int rc = larch_multi(c->lh, ops, (int32_t)n, NULL);
    free(ops);
    if (rc == ZK_ENONODE || rc == ZK_ENOTEMPTY)
        rc = delete_each(c, paths, from, to, failed_at);
    else if (rc != ZK_OK)
        *failed_at = to - 1;
    return rc;
}

/* Where the batch ending at end starts: at most batch ops and about
 * DELETEALL_BATCH_BYTES_MAX of paths, so the multi stays far below the
 * server's 1 MiB packet limit (jute.maxbuffer) even for long paths. */
static size_t batch_start(char **paths, size_t end, size_t batch)
{
    size_t start = end, bytes = 0;
    while (start > 0 && end - start < batch && bytes < DELETEALL_BATCH_BYTES_MAX)
        bytes += strlen(paths[--start]) + 16; /* + the op's fixed fields */
    return start;
}

static int cmd_deleteall(struct cli *c, const struct command *cmd, const struct cli_args *a)
{
    int64_t batch = DELETEALL_BATCH_DEFAULT;
    if (a->flag['b'] && !parse_int64(a->value['b'], 1, CLI_TXN_OPS_MAX, &batch))
        return cli_usage_error(c, cmd->name, cmd->usage,
                               "bad batch size '%s' (expected 1 to %d)", a->value['b'],
                               CLI_TXN_OPS_MAX);
    int st = check_path(c, cmd, a->pos[0], false);
    if (st != CLI_OK)
        return st;
    const char *path = a->pos[0]->text;
    struct path_list all;
    int err;
    if (collect_tree(c, path, false, &all, &err) != 0)
        return tree_error(c, cmd, err, path);
    /* Pre-order puts every node before its descendants, so deleting from
     * the end backwards empties each node before it is deleted. */
    size_t end = all.count, failed_at = 0;
    int rc = ZK_OK;
    while (end > 0 && rc == ZK_OK) {
        size_t start = batch_start(all.items, end, (size_t)batch);
        rc = batch > 1 ? delete_batch(c, all.items, start, end, &failed_at)
                       : delete_each(c, all.items, start, end, &failed_at);
        end = start;
    }
    if (rc != ZK_OK) {
        st = cli_server_error(c, cmd->name, rc, all.items[failed_at]);
    } else if (c->json) {
        struct cli_json j;
        json_cmd_path(&j, cmd->name, path);
        cli_json_int(&j, "deleted", (int64_t)all.count);
        cli_json_emit(&j);
    }
    path_list_free(&all);
    return st;
}

/* setAcl -R: the version applies to the named node only; its descendants
 * get -1, as their versions are unrelated. */
static int set_acl_tree(struct cli *c, const struct command *cmd, const char *path,
                        int32_t version, const struct larch_acl_list *acl)
{
    struct path_list all;
    int err;
    if (collect_tree(c, path, false, &all, &err) != 0)
        return tree_error(c, cmd, err, path);
    int st = CLI_OK;
    for (size_t i = 0; i < all.count && st == CLI_OK; i++) {
        int rc = larch_set_acl(c->lh, all.items[i], i == 0 ? version : -1, acl);
        if (rc != ZK_OK && !(rc == ZK_ENONODE && i > 0))
            st = cli_server_error(c, cmd->name, rc, all.items[i]);
    }
    path_list_free(&all);
    return st;
}

static int cmd_set_acl(struct cli *c, const struct command *cmd, const struct cli_args *a)
{
    int32_t version = -1;
    int st = version_arg(c, cmd, a, &version);
    if (st == CLI_OK)
        st = check_path(c, cmd, a->pos[0], false);
    struct larch_acl_list acl = {0};
    if (st == CLI_OK)
        st = acl_arg(c, cmd, a->pos[1]->text, &acl);
    if (st != CLI_OK)
        return st;
    const char *path = a->pos[0]->text;
    if (a->flag['R']) {
        st = set_acl_tree(c, cmd, path, version, &acl);
    } else {
        int rc = larch_set_acl(c->lh, path, version, &acl);
        if (rc != ZK_OK)
            st = cli_server_error(c, cmd->name, rc, path);
    }
    larch_acl_list_free(&acl);
    if (st != CLI_OK)
        return st;
    /* liblarch's synchronous setACL keeps the reply's Stat to itself, so
     * -s reads it back; a concurrent writer could show in it. */
    struct zk_stat stat;
    bool want_stat = a->flag['s'];
    if (want_stat) {
        int rc = larch_exists(c->lh, path, NULL, NULL, &stat);
        if (rc != ZK_OK)
            return cli_server_error(c, cmd->name, rc, path);
    }
    if (c->json) {
        struct cli_json j;
        json_cmd_path(&j, cmd->name, path);
        if (want_stat)
            cli_json_stat(&j, "stat", &stat);
        cli_json_emit(&j);
    } else if (want_stat) {
        cli_print_stat(stdout, &stat);
    }
    return CLI_OK;
}

static int cmd_addauth(struct cli *c, const struct command *cmd, const struct cli_args *a)
{
    const char *scheme = a->pos[0]->text;
    int rc = larch_add_auth(c->lh, scheme, a->pos[1]->text, (int32_t)a->pos[1]->len);
    if (rc != ZK_OK)
        return cli_server_error(c, cmd->name, rc, NULL);
    if (c->json) {
        struct cli_json j;
        json_cmd_path(&j, cmd->name, NULL);
        cli_json_str(&j, "scheme", scheme);
        cli_json_emit(&j);
    }
    return CLI_OK;
}

static int cmd_sync(struct cli *c, const struct command *cmd, const struct cli_args *a)
{
    const char *path = a->pos[0]->text;
    int st = check_path(c, cmd, a->pos[0], false);
    if (st != CLI_OK)
        return st;
    int rc = larch_sync(c->lh, path);
    if (rc != ZK_OK)
        return cli_server_error(c, cmd->name, rc, path);
    if (!c->json)
        printf("Sync is OK\n");
    return reply_done(c, cmd->name, path);
}

/* ---- watches ------------------------------------------------------------------------------------- */

static int cmd_add_watch(struct cli *c, const struct command *cmd, const struct cli_args *a)
{
    int32_t mode = ZK_ADD_WATCH_PERSISTENT_RECURSIVE; /* zkCli's default */
    if (a->flag['m']) {
        if (strcasecmp(a->value['m'], "PERSISTENT") == 0)
            mode = ZK_ADD_WATCH_PERSISTENT;
        else if (strcasecmp(a->value['m'], "PERSISTENT_RECURSIVE") != 0)
            return cli_usage_error(c, cmd->name, cmd->usage,
                                   "bad mode '%s' (expected PERSISTENT or PERSISTENT_RECURSIVE)",
                                   a->value['m']);
    }
    const char *path = a->pos[0]->text;
    int st = check_path(c, cmd, a->pos[0], false);
    if (st != CLI_OK)
        return st;
    int rc = larch_add_watch(c->lh, path, mode, LARCH_DEFAULT_WATCHER, NULL);
    if (rc != ZK_OK)
        return cli_server_error(c, cmd->name, rc, path);
    if (c->json) {
        struct cli_json j;
        json_cmd_path(&j, cmd->name, path);
        cli_json_str(&j, "mode",
                     mode == ZK_ADD_WATCH_PERSISTENT ? "PERSISTENT" : "PERSISTENT_RECURSIVE");
        cli_json_emit(&j);
    }
    return CLI_OK;
}

static int cmd_remove_watches(struct cli *c, const struct command *cmd, const struct cli_args *a)
{
    int kinds = a->flag['c'] + a->flag['d'] + a->flag['a'];
    if (kinds > 1)
        return cli_usage_error(c, cmd->name, cmd->usage, "only one of -c, -d and -a may be given");
    int32_t type = a->flag['c'] ? ZK_WATCHER_CHILDREN
                 : a->flag['d'] ? ZK_WATCHER_DATA
                                : ZK_WATCHER_ANY;
    const char *path = a->pos[0]->text;
    int st = check_path(c, cmd, a->pos[0], false);
    if (st != CLI_OK)
        return st;
    /* Every watcher of that type goes, as zkCli's removeAllWatches. */
    int rc = larch_remove_watches(c->lh, path, type, NULL, NULL, a->flag['l']);
    if (rc != ZK_OK)
        return cli_server_error(c, cmd->name, rc, path);
    return reply_done(c, cmd->name, path);
}

static int cmd_printwatches(struct cli *c, const struct command *cmd, const struct cli_args *a)
{
    if (a->npos == 1) {
        if (strcmp(a->pos[0]->text, "on") == 0)
            c->print_watches = true;
        else if (strcmp(a->pos[0]->text, "off") == 0)
            c->print_watches = false;
        else
            return cli_usage_error(c, cmd->name, cmd->usage, "expected on or off, not '%s'",
                                   a->pos[0]->text);
    }
    if (c->json) {
        struct cli_json j;
        json_cmd_path(&j, cmd->name, NULL);
        cli_json_bool(&j, "enabled", c->print_watches);
        cli_json_emit(&j);
    } else if (a->npos == 0) {
        printf("printwatches is %s\n", c->print_watches ? "on" : "off");
    }
    return CLI_OK;
}

/* The `watch` command's watcher context; lives until the handle closes,
 * since liblarch may call the watcher until then. */
struct cli_watch_ctx {
    struct cli_events *events;
    uint64_t id;
    struct cli_watch_ctx *next;
};

static void watch_cmd_watcher(struct larch *lh, const struct larch_event *ev, void *ctx)
{
    struct cli_watch_ctx *w = ctx;
    cli_events_push(w->events, ev, w->id);
}

void cli_free_watch_ctxs(struct cli *c)
{
    while (c->watch_ctxs != NULL) {
        struct cli_watch_ctx *next = c->watch_ctxs->next;
        free(c->watch_ctxs);
        c->watch_ctxs = next;
    }
}

/* Arms an exists watch (fires on create, delete, data change) and, when the
 * node is there, a child watch: one event of any kind on path ends `watch`. */
static int arm_watch(struct cli *c, const char *path, struct cli_watch_ctx *w)
{
    int rc = larch_exists(c->lh, path, watch_cmd_watcher, w, NULL);
    if (rc == ZK_ENONODE)
        return ZK_OK;
    if (rc != ZK_OK)
        return rc;
    struct larch_strings kids = {0};
    rc = larch_get_children(c->lh, path, watch_cmd_watcher, w, &kids, NULL);
    larch_strings_free(&kids);
    return rc == ZK_ENONODE ? ZK_OK : rc;
}

static void print_watch_result(struct cli *c, const char *path, const struct cli_event *ev)
{
    if (c->json) {
        struct cli_json j;
        json_cmd_path(&j, "watch", path);
        cli_json_obj(&j, "event");
        cli_json_str(&j, "type", cli_event_type_name(ev->type));
        cli_json_str(&j, "state", cli_state_name(ev->state));
        cli_json_str(&j, "path", ev->path);
        cli_json_end_obj(&j);
        cli_json_emit(&j);
    } else {
        printf("WatchedEvent state:%s type:%s path:%s\n", cli_state_name(ev->state),
               cli_event_type_name(ev->type), ev->path ? ev->path : "null");
    }
}

static int cmd_watch(struct cli *c, const struct command *cmd, const struct cli_args *a)
{
    int64_t timeout_ms = CLI_WATCH_DEFAULT_TIMEOUT_MS;
    if (a->flag['t'] && !parse_int64(a->value['t'], 1, INT32_MAX, &timeout_ms))
        return cli_usage_error(c, cmd->name, cmd->usage,
                               "bad timeout '%s' (expected milliseconds, 1 or more)",
                               a->value['t']);
    const char *path = a->pos[0]->text;
    int st = check_path(c, cmd, a->pos[0], false);
    if (st != CLI_OK)
        return st;
    struct cli_watch_ctx *w = calloc(1, sizeof *w);
    if (w == NULL)
        return cli_server_error(c, cmd->name, ZK_ESYSTEMERROR, path);
    *w = (struct cli_watch_ctx){.events = &c->events, .id = ++c->next_watch_id,
                                .next = c->watch_ctxs};
    c->watch_ctxs = w;
    int rc = arm_watch(c, path, w);
    if (rc != ZK_OK)
        return cli_server_error(c, cmd->name, rc, path);
    if (c->interrupted != NULL)
        *c->interrupted = 0;
    struct cli_event ev;
    if (!cli_events_take(&c->events, w->id, (int32_t)timeout_ms, c->interrupted, &ev)) {
        if (c->interrupted != NULL && *c->interrupted)
            return cli_op_error(c, cmd->name, "INTERRUPTED", path, "Interrupted waiting on %s",
                                path);
        return cli_op_error(c, cmd->name, "TIMEOUT", path, "No event on %s within %" PRId64 " ms",
                            path, timeout_ms);
    }
    /* The other watch of the pair may still be armed: drop it, so it does
     * not linger on the server. None left (NOWATCHER) is the usual case. */
    rc = larch_remove_watches(c->lh, path, ZK_WATCHER_ANY, watch_cmd_watcher, w, false);
    if (rc != ZK_OK && rc != ZK_ENOWATCHER && rc != ZK_ESESSIONEXPIRED)
        fprintf(stderr, "warning: could not remove the leftover watch on %s: %s\n", path,
                larch_error(rc));
    if (ev.type == ZK_EVENT_NONE) {
        free(ev.path);
        return cli_server_error(c, cmd->name,
                                ev.state == ZK_STATE_AUTH_FAILED ? ZK_EAUTHFAILED
                                                                 : ZK_ESESSIONEXPIRED,
                                path);
    }
    print_watch_result(c, path, &ev);
    free(ev.path);
    return CLI_OK;
}

/* ---- session and shell commands ----------------------------------------------------------------- */

static int cmd_connect(struct cli *c, const struct command *cmd, const struct cli_args *a)
{
    const char *wanted = a->npos > 0 ? a->pos[0]->text : c->connect_string;
    if (wanted == NULL)
        return cli_usage_error(c, cmd->name, cmd->usage, "missing argument: host:port");
    char *target = strdup(wanted);
    if (target == NULL)
        return cli_connect_error(c, cmd->name, "connect: out of memory");
    int st = cli_connect(c, target);
    if (st == CLI_OK && c->json) {
        char sid[24];
        snprintf(sid, sizeof sid, "0x%" PRIx64, (uint64_t)larch_session_id(c->lh));
        struct cli_json j;
        json_cmd_path(&j, cmd->name, NULL);
        cli_json_str(&j, "server", target);
        cli_json_str(&j, "session", sid);
        cli_json_emit(&j);
    }
    free(target);
    return st;
}

static int cmd_close(struct cli *c, const struct command *cmd, const struct cli_args *a)
{
    cli_disconnect(c);
    return reply_done(c, cmd->name, NULL);
}

static int cmd_quit(struct cli *c, const struct command *cmd, const struct cli_args *a)
{
    c->quit = true;
    return CLI_OK;
}

static int cmd_history(struct cli *c, const struct command *cmd, const struct cli_args *a)
{
    int64_t next = cli_history_next_number(&c->history);
    int64_t from = next - HISTORY_SHOWN;
    if (from < c->history.first_number)
        from = c->history.first_number;
    struct cli_json j;
    if (c->json) {
        json_cmd_path(&j, cmd->name, NULL);
        cli_json_arr(&j, "history");
    }
    for (int64_t n = from; n < next; n++) {
        const char *line = cli_history_get(&c->history, n);
        if (c->json) {
            cli_json_obj(&j, NULL);
            cli_json_int(&j, "n", n);
            cli_json_str(&j, "line", line);
            cli_json_end_obj(&j);
        } else {
            printf("%" PRId64 " - %s\n", n, line);
        }
    }
    if (c->json) {
        cli_json_end_arr(&j);
        cli_json_emit(&j);
    }
    return CLI_OK;
}

static int cmd_help(struct cli *c, const struct command *cmd, const struct cli_args *a);

/* ---- the table ------------------------------------------------------------------------------------ */

static const struct command commands[] = {
    {"ls", "ls [-s] [-w] [-R] path", "swR", {"path"}, 1, 1, true, cmd_ls,
     "list children (-s stat, -w watch, -R whole subtree)"},
    {"get", "get [-s] [-w] path", "sw", {"path"}, 1, 1, true, cmd_get,
     "print a node's data (-s stat, -w watch)"},
    {"set", "set [-s] [-v version] path data", "sv:", {"path", "data"}, 2, 2, true, cmd_set,
     "set a node's data"},
    {"create", "create [-e] [-s] [-c] [-t ttl] path [data] [acl]", "esct:", {"path", "data", "acl"},
     1, 3, true, cmd_create, "create a node (-e ephemeral, -s sequential, -c container, -t TTL)"},
    {"delete", "delete [-v version] path", "v:", {"path"}, 1, 1, true, cmd_delete,
     "delete a node"},
    {"deleteall", "deleteall path [-b batch size]", "b:", {"path"}, 1, 1, true, cmd_deleteall,
     "delete a node and its whole subtree"},
    {"stat", "stat [-w] path", "w", {"path"}, 1, 1, true, cmd_stat, "print a node's Stat"},
    {"getAcl", "getAcl [-s] path", "s", {"path"}, 1, 1, true, cmd_get_acl, "print a node's ACL"},
    {"setAcl", "setAcl [-s] [-v version] [-R] path acl", "sv:R", {"path", "acl"}, 2, 2, true,
     cmd_set_acl, "set a node's ACL (-R: the whole subtree)"},
    {"addauth", "addauth scheme auth", "", {"scheme", "auth"}, 2, 2, true, cmd_addauth,
     "add credentials to the session"},
    {"sync", "sync path", "", {"path"}, 1, 1, true, cmd_sync, "sync the server with the leader"},
    {"addWatch", "addWatch [-m mode] path", "m:", {"path"}, 1, 1, true, cmd_add_watch,
     "add a persistent watch (mode PERSISTENT or PERSISTENT_RECURSIVE, the default)"},
    {"removewatches", "removewatches path [-c|-d|-a] [-l]", "cdal", {"path"}, 1, 1, true,
     cmd_remove_watches, "remove watches (-c child, -d data, -a any; -l local only)"},
    {"printwatches", "printwatches on|off", "", {"on|off"}, 0, 1, false, cmd_printwatches,
     "turn printing of watch events on or off"},
    {"watch", "watch [-t timeout_ms] path", "t:", {"path"}, 1, 1, true, cmd_watch,
     "wait for one event on path and print it (default timeout 60000 ms)"},
    {"getEphemerals", "getEphemerals [path]", "", {"path"}, 0, 1, true, cmd_get_ephemerals,
     "list this session's ephemeral nodes"},
    {"getAllChildrenNumber", "getAllChildrenNumber path", "", {"path"}, 1, 1, true,
     cmd_count_children, "count all nodes under path"},
    {"txn", "txn { op ; op ... }  (or one op per line, then a line with })", "", {0}, 0, 0, true,
     NULL, "run create/delete/set/check ops as one transaction"},
    {"history", "history", "", {0}, 0, 0, false, cmd_history, "list recent commands"},
    {"redo", "redo cmdno", "", {"cmdno"}, 1, 1, false, NULL,
     "run command number cmdno again"},
    {"connect", "connect [host:port[,host:port...][/chroot]]", "", {"host:port"}, 0, 1, false,
     cmd_connect, "connect to another server (closes the current session)"},
    {"close", "close", "", {0}, 0, 0, false, cmd_close, "close the session"},
    {"quit", "quit", "", {0}, 0, 0, false, cmd_quit, "leave the shell"},
    {"exit", "exit", "", {0}, 0, 0, false, cmd_quit, "leave the shell"},
    {"help", "help", "", {0}, 0, 0, false, cmd_help, "this list"},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

/* The ops a txn block accepts, with the flags they share with the commands. */
static const struct command txn_ops[] = {
    {"create", "create [-e] [-s] [-c] [-t ttl] path [data] [acl]", "esct:", {"path", "data", "acl"},
     1, 3, true, NULL, NULL},
    {"delete", "delete [-v version] path", "v:", {"path"}, 1, 1, true, NULL, NULL},
    {"set", "set [-v version] path data", "v:", {"path", "data"}, 2, 2, true, NULL, NULL},
    {"check", "check [-v version] path", "v:", {"path"}, 1, 1, true, NULL, NULL},
};
#define NTXN_OPS (sizeof txn_ops / sizeof txn_ops[0])

static const struct command *find_command(const struct command *table, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(table[i].name, name) == 0)
            return &table[i];
    for (size_t i = 0; i < n; i++) /* "getacl" for "getAcl", as a courtesy */
        if (strcasecmp(table[i].name, name) == 0)
            return &table[i];
    return NULL;
}

void cli_print_help(FILE *f)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(f, "\t%s\n\t\t%s\n", commands[i].usage, commands[i].summary);
}

static int cmd_help(struct cli *c, const struct command *cmd, const struct cli_args *a)
{
    if (!c->json) {
        cli_print_help(stdout);
        return CLI_OK;
    }
    struct cli_json j;
    json_cmd_path(&j, cmd->name, NULL);
    cli_json_arr(&j, "commands");
    for (size_t i = 0; i < NCOMMANDS; i++)
        cli_json_str(&j, NULL, commands[i].usage);
    cli_json_end_arr(&j);
    cli_json_emit(&j);
    return CLI_OK;
}

bool cli_command_needs_connection(const char *name)
{
    const struct command *cmd = find_command(commands, NCOMMANDS, name);
    return cmd == NULL || cmd->needs_conn;
}

/* ---- txn ------------------------------------------------------------------------------------------ */

/* One parsed op; its strings point into the txn's tokens. */
struct txn_op {
    const struct command *kind;
    const char *path;
    struct larch_acl_list acl;
    bool has_acl;
};

struct txn {
    struct larch_op ops[CLI_TXN_OPS_MAX];
    struct txn_op info[CLI_TXN_OPS_MAX];
    int32_t n;
};

static void txn_free(struct txn *t)
{
    for (int32_t i = 0; i < t->n; i++)
        if (t->info[i].has_acl)
            larch_acl_list_free(&t->info[i].acl);
    free(t);
}

/* Parses one op's tokens into t->ops[t->n]. */
static int txn_add_op(struct cli *c, struct txn *t, const struct cli_token *tok, size_t n)
{
    const struct command *kind = find_command(txn_ops, NTXN_OPS, tok[0].text);
    if (kind == NULL || tok[0].quoted)
        return cli_usage_error(c, "txn", "txn { create|delete|set|check ... ; ... }",
                               "unknown transaction op '%s' (expected create, delete, set or check)",
                               tok[0].text);
    if (t->n >= CLI_TXN_OPS_MAX)
        return cli_usage_error(c, "txn", NULL, "more than %d ops in one transaction",
                               CLI_TXN_OPS_MAX);
    struct cli_args a;
    int st = parse_args(c, kind, tok + 1, n - 1, &a);
    if (st != CLI_OK)
        return st;
    struct larch_op *op = &t->ops[t->n];
    struct txn_op *info = &t->info[t->n];
    *info = (struct txn_op){.kind = kind, .path = a.pos[0]->text};
    int32_t version = -1, mode = ZK_PERSISTENT;
    int64_t ttl_ms = 0;
    bool creating = kind == &txn_ops[0];
    if (creating)
        st = create_mode_arg(c, kind, &a, &mode, &ttl_ms);
    else
        st = version_arg(c, kind, &a, &version);
    if (st == CLI_OK)
        st = check_path(c, kind, a.pos[0], creating && a.flag['s']);
    if (st == CLI_OK && creating && a.npos > 2) {
        st = acl_arg(c, kind, a.pos[2]->text, &info->acl);
        info->has_acl = st == CLI_OK;
    }
    if (st != CLI_OK)
        return st;
    const char *path = a.pos[0]->text;
    if (creating) {
        *op = larch_op_create(path, a.npos > 1 ? a.pos[1]->text : NULL,
                              a.npos > 1 ? (int32_t)a.pos[1]->len : -1,
                              info->has_acl ? &info->acl : NULL, mode);
        op->ttl_ms = ttl_ms;
    } else if (kind == &txn_ops[1]) {
        *op = larch_op_delete(path, version);
    } else if (kind == &txn_ops[2]) {
        *op = larch_op_set(path, a.pos[1]->text, (int32_t)a.pos[1]->len, version);
    } else {
        *op = larch_op_check(path, version);
    }
    t->n++;
    return CLI_OK;
}

/* Index of the first unquoted "}" token, or count when there is none. */
static size_t find_close(const struct cli_tokens *all)
{
    size_t i = 0;
    while (i < all->count && !token_is(&all->items[i], "}"))
        i++;
    return i;
}

/* Splits the tokens between "{" and the final "}" at ";" into ops. */
static int txn_parse(struct cli *c, const struct cli_tokens *all, struct txn *t)
{
    size_t last = all->count - 1, start = 2;
    for (size_t i = 2; i <= last; i++) {
        if (!token_is(&all->items[i], ";") && i != last)
            continue;
        if (i > start) {
            int st = txn_add_op(c, t, &all->items[start], i - start);
            if (st != CLI_OK)
                return st;
        }
        start = i + 1;
    }
    if (t->n == 0)
        return cli_usage_error(c, "txn", NULL, "empty transaction");
    return CLI_OK;
}

static const char *op_name(const struct txn *t, int32_t i)
{
    return t->info[i].kind->name;
}

static void print_txn_text(const struct txn *t, const struct larch_op_result *res, int32_t failed)
{
    for (int32_t i = 0; i < t->n; i++) {
        printf("%s %s: ", op_name(t, i), t->info[i].path);
        if (failed < 0 && res[i].path != NULL && t->ops[i].type == ZK_OP_CREATE)
            printf("Created %s\n", res[i].path);
        else if (failed < 0)
            printf("OK\n");
        else if (i < failed)
            printf("OK (rolled back)\n");
        else if (i > failed)
            printf("not executed\n");
        else {
            struct cli_buf text = {0};
            cli_error_text(&text, res[i].err, t->info[i].path);
            printf("%s\n", text.failed ? larch_error(res[i].err) : text.data);
            cli_buf_free(&text);
        }
    }
}

static void print_txn_json(const struct txn *t, const struct larch_op_result *res, int32_t failed,
                           int rc)
{
    struct cli_json j;
    json_cmd_path(&j, "txn", NULL);
    cli_json_bool(&j, "ok", rc == ZK_OK);
    if (rc != ZK_OK) {
        struct cli_buf text = {0};
        cli_error_text(&text, rc, failed >= 0 ? t->info[failed].path : NULL);
        cli_json_str(&j, "error", larch_error(rc));
        cli_json_int(&j, "code", rc);
        cli_json_str(&j, "message", text.failed ? larch_error(rc) : text.data);
        cli_json_int(&j, "failed_op", failed);
        cli_buf_free(&text);
    }
    cli_json_arr(&j, "results");
    for (int32_t i = 0; i < t->n; i++) {
        cli_json_obj(&j, NULL);
        cli_json_str(&j, "op", op_name(t, i));
        cli_json_str(&j, "path", t->info[i].path);
        cli_json_str(&j, "error", larch_error(res[i].err));
        cli_json_int(&j, "code", res[i].err);
        if (rc == ZK_OK && t->ops[i].type == ZK_OP_CREATE && res[i].path != NULL)
            cli_json_str(&j, "created", res[i].path);
        /* A multi's create result carries no Stat (plain create, not create2). */
        if (rc == ZK_OK && t->ops[i].type == ZK_OP_SETDATA)
            cli_json_stat(&j, "stat", &res[i].stat);
        cli_json_end_obj(&j);
    }
    cli_json_end_arr(&j);
    cli_json_emit(&j);
}

/* The human-readable verdict of a failed txn, on stderr in both modes. */
static int report_txn_failure(const struct txn *t, int32_t failed, int rc)
{
    struct cli_buf text = {0};
    cli_error_text(&text, rc, t->info[failed].path);
    fflush(stdout);
    fprintf(stderr, "Transaction failed at op %d (%s %s): %s\n", failed, op_name(t, failed),
            t->info[failed].path, text.failed ? larch_error(rc) : text.data);
    cli_buf_free(&text);
    return CLI_ESERVER;
}

/* The sentinel marks results liblarch did not fill (the whole request failed). */
#define RESULT_UNSET INT32_MIN

static int txn_execute(struct cli *c, struct txn *t)
{
    struct larch_op_result *res = calloc((size_t)t->n, sizeof *res);
    if (res == NULL)
        return cli_server_error(c, "txn", ZK_ESYSTEMERROR, NULL);
    for (int32_t i = 0; i < t->n; i++)
        res[i].err = RESULT_UNSET;
    int rc = larch_multi(c->lh, t->ops, t->n, res);
    int st = CLI_OK;
    int32_t failed = -1;
    for (int32_t i = 0; rc != ZK_OK && i < t->n && failed < 0; i++)
        if (res[i].err != ZK_OK && res[i].err != ZK_ERUNTIMEINCONSISTENCY &&
            res[i].err != RESULT_UNSET)
            failed = i;
    if (rc != ZK_OK && failed < 0) {
        st = cli_server_error(c, "txn", rc, NULL); /* the request itself failed */
    } else {
        if (c->json)
            print_txn_json(t, res, failed, rc);
        else
            print_txn_text(t, res, failed);
        if (rc != ZK_OK)
            st = report_txn_failure(t, failed, rc);
    }
    larch_op_results_free(res, t->n);
    free(res);
    return st;
}

/* Moves src's tokens to the end of dst (src is left empty). */
static int tokens_move(struct cli_tokens *dst, struct cli_tokens *src)
{
    if (src->count == 0)
        return 0;
    if (base_grow(&dst->items, &dst->cap, dst->count + src->count + 1, sizeof *dst->items) != 0)
        return -1;
    memcpy(dst->items + dst->count, src->items, src->count * sizeof *dst->items);
    dst->count += src->count;
    free(src->items);
    *src = (struct cli_tokens){0};
    return 0;
}

static bool txn_closed(const struct cli_tokens *all)
{
    return find_close(all) < all->count;
}

/* Ops on separate lines get a ";" between them, so the block is kept in
 * history as the equivalent one-line form. */
static bool needs_separator(const struct cli_tokens *all, const struct cli_tokens *more)
{
    const struct cli_token *last = &all->items[all->count - 1];
    return !token_is(last, "{") && !token_is(last, ";") && !token_is(&more->items[0], "}") &&
           !token_is(&more->items[0], ";");
}

static int push_word(struct cli_tokens *t, const char *word)
{
    struct cli_buf text = {0};
    cli_buf_puts(&text, word);
    if (tokens_push(t, &text, false) == 0)
        return 0;
    cli_buf_free(&text);
    return -1;
}

/* Appends a block line's tokens (taken over) to the txn's. */
static int append_line_tokens(struct cli_tokens *all, struct cli_tokens *more)
{
    struct cli_tokens sep = {0};
    int rc = needs_separator(all, more) ? push_word(&sep, ";") : 0;
    if (rc == 0)
        rc = tokens_move(all, &sep);
    if (rc == 0)
        rc = tokens_move(all, more);
    cli_tokens_free(&sep);
    cli_tokens_free(more);
    return rc;
}

/* Reads the block's further lines up to "}". Lines after a bad one are
 * still consumed, so they never run as commands outside the txn. */
static int txn_read_block(struct cli *c, struct cli_tokens *all)
{
    int st = CLI_OK;
    while (!txn_closed(all)) {
        char *line = NULL;
        bool truncated = false;
        int rc = c->reader ? cli_reader_line(c->reader, "txn> ", NULL, &line, &truncated) : 0;
        if (rc <= 0)
            return st != CLI_OK ? st : cli_usage_error(c, "txn", NULL, "missing '}' at end of input");
        struct cli_tokens more;
        char msg[160];
        if (truncated)
            st = cli_usage_error(c, "txn", NULL, "line too long");
        else if (cli_tokenize(line, &more, msg, sizeof msg) != 0)
            st = cli_usage_error(c, "txn", NULL, "syntax error: %s", msg);
        else if (more.count == 0 || more.items[0].text[0] == '#')
            cli_tokens_free(&more);
        else if (append_line_tokens(all, &more) != 0) {
            free(line);
            return cli_usage_error(c, "txn", NULL, "out of memory");
        }
        free(line);
    }
    return st;
}

/* "txn" with its tokens so far in all (taken over); reads the rest of the
 * block when it spans lines, records it in history as one line, runs it. */
static int run_txn(struct cli *c, struct cli_tokens *all, bool add_history)
{
    int st = CLI_OK;
    if (all->count < 2 || !token_is(&all->items[1], "{"))
        st = cli_usage_error(c, "txn", "txn { op ; op ... }", "expected '{' after txn");
    if (st == CLI_OK && !txn_closed(all))
        st = txn_read_block(c, all);
    if (st == CLI_OK && find_close(all) != all->count - 1)
        st = cli_usage_error(c, "txn", NULL, "text after '}'");
    if (add_history) {
        struct cli_buf line = {0};
        for (size_t i = 0; i < all->count; i++) {
            if (i > 0)
                cli_buf_append(&line, " ", 1);
            append_token_source(&line, &all->items[i]);
        }
        if (!line.failed)
            remember(c, line.data);
        cli_buf_free(&line);
    }
    struct txn *t = NULL;
    if (st == CLI_OK && (t = calloc(1, sizeof *t)) == NULL)
        st = cli_usage_error(c, "txn", NULL, "out of memory");
    if (st == CLI_OK)
        st = txn_parse(c, all, t);
    if (st == CLI_OK && c->lh == NULL)
        st = cli_connect_error(c, "txn", "Not connected");
    if (st == CLI_OK)
        st = txn_execute(c, t);
    if (t != NULL)
        txn_free(t);
    return st;
}

/* ---- dispatch ------------------------------------------------------------------------------------- */

/* The commands -udp carries without a TCP session. */
static bool runs_over_udp(const struct command *cmd)
{
    return cmd->run == cmd_ls || cmd->run == cmd_get || cmd->run == cmd_stat;
}

static int dispatch(struct cli *c, const struct cli_token *tok, size_t n)
{
    const struct command *cmd = tok[0].quoted ? NULL : find_command(commands, NCOMMANDS, tok[0].text);
    if (cmd == NULL) {
        cli_usage_error(c, NULL, NULL, "unknown command '%s'", tok[0].text);
        fprintf(stderr, "Type 'help' for the list of commands.\n");
        return CLI_EUSAGE;
    }
    struct cli_args a;
    int st = parse_args(c, cmd, tok + 1, n - 1, &a);
    if (st != CLI_OK)
        return st;
    if (cmd->needs_conn && c->lh == NULL && !(runs_over_udp(cmd) && c->udp != NULL))
        return cli_connect_error(c, cmd->name,
                                 c->udp != NULL ? "Not connected: over -udp alone only get, ls "
                                                  "and stat run; give -server for the rest"
                                                : "Not connected");
    return cmd->run(c, cmd, &a);
}

static int run_tokens(struct cli *c, const char *line, struct cli_tokens *toks, bool add_history);

/* redo N: runs history entry N again, recorded under the next number as
 * zkCli does (so history never holds a redo). */
static int run_redo(struct cli *c, struct cli_tokens *toks)
{
    const struct command *cmd = find_command(commands, NCOMMANDS, "redo");
    struct cli_args a;
    int st = parse_args(c, cmd, toks->items + 1, toks->count - 1, &a);
    if (st != CLI_OK)
        return st;
    int64_t n;
    if (!parse_int64(a.pos[0]->text, 0, INT64_MAX, &n))
        return cli_usage_error(c, cmd->name, cmd->usage, "bad command number '%s'",
                               a.pos[0]->text);
    const char *found = cli_history_get(&c->history, n);
    if (found == NULL)
        return cli_usage_error(c, cmd->name, cmd->usage, "no command number %" PRId64 " in history",
                               n);
    char *line = strdup(found);
    if (line == NULL)
        return cli_usage_error(c, cmd->name, NULL, "out of memory");
    struct cli_tokens again;
    char msg[160];
    if (cli_tokenize(line, &again, msg, sizeof msg) != 0 || again.count == 0) {
        free(line);
        return cli_usage_error(c, cmd->name, NULL, "command %" PRId64 " cannot be parsed", n);
    }
    st = run_tokens(c, line, &again, true);
    cli_tokens_free(&again);
    free(line);
    return st;
}

static int run_tokens(struct cli *c, const char *line, struct cli_tokens *toks, bool add_history)
{
    const struct command *cmd =
        toks->items[0].quoted ? NULL : find_command(commands, NCOMMANDS, toks->items[0].text);
    if (cmd != NULL && strcmp(cmd->name, "txn") == 0)
        return run_txn(c, toks, add_history);
    if (cmd != NULL && strcmp(cmd->name, "redo") == 0)
        return run_redo(c, toks);
    if (add_history)
        remember(c, line);
    return dispatch(c, toks->items, toks->count);
}

int cli_run_line(struct cli *c, const char *line)
{
    const char *p = line;
    while (is_blank(*p))
        p++;
    if (*p == '\0' || *p == '#')
        return CLI_OK;
    struct cli_tokens toks;
    char msg[160];
    if (cli_tokenize(p, &toks, msg, sizeof msg) != 0) {
        remember(c, p);
        return cli_usage_error(c, NULL, NULL, "syntax error: %s", msg);
    }
    int st = run_tokens(c, p, &toks, true);
    cli_tokens_free(&toks);
    return st;
}

int cli_run_argv(struct cli *c, int argc, char **argv)
{
    if (argc <= 0)
        return CLI_OK;
    struct cli_tokens toks = {0};
    for (int i = 0; i < argc; i++) {
        struct cli_buf text = {0};
        cli_buf_puts(&text, argv[i]);
        if (tokens_push(&toks, &text, false) != 0) {
            cli_buf_free(&text);
            cli_tokens_free(&toks);
            return cli_usage_error(c, NULL, NULL, "out of memory");
        }
    }
    int st = run_tokens(c, argv[0], &toks, false);
    cli_tokens_free(&toks);
    return st;
}
