/* Protocol tests as data: runs every tests/http/cases/NAME.txt against keel
 * (http1 + hello, two workers). The file format is defined in
 * tests/http/README.md; adding a case needs no code.
 *
 * Each case runs on its own connection. Cases with the same configuration
 * share one keel (starting a process per case costs more than all the cases
 * together, the more so under ASan); a keel that dies is started again, and
 * the case that was running then fails. Every failing case is reported, each
 * with its file and line; the cases are split between two tests so that
 * Criterion runs them in parallel.
 *
 * The directory is found next to this source file (CMake compiles it by its
 * absolute path); KEEL_HTTP_CASES=DIR overrides it, and KEEL_HTTP_CASE=TEXT
 * runs only the cases whose file name contains TEXT. */
#define _GNU_SOURCE
#include "test_http.h"

#include <dirent.h>
#include <setjmp.h>
#include <sys/wait.h>

/* ---- Finding the cases --------------------------------------------------------- */

struct ht_case {
    char path[1024];
    char name[256];
};

static const char *cases_dir(char *buf, size_t size)
{
    const char *env = getenv("KEEL_HTTP_CASES");
    if (env && *env)
        return env;
    /* __FILE__ = .../tests/integration/test_http_cases.c */
    snprintf(buf, size, "%s", __FILE__);
    char *slash = strrchr(buf, '/');
    if (slash)
        *slash = '\0';
    slash = strrchr(buf, '/');
    if (slash)
        *slash = '\0';
    size_t len = strlen(buf);
    snprintf(buf + len, size - len, "/http/cases");
    return buf;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const struct ht_case *)a)->name, ((const struct ht_case *)b)->name);
}

static size_t find_cases(struct ht_case *out, size_t max)
{
    char buf[1024];
    const char *dir = cases_dir(buf, sizeof buf);
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".txt") != 0 || e->d_name[0] == '.')
            continue;
        if (n < max && out) {
            snprintf(out[n].path, sizeof out[n].path, "%s/%s", dir, e->d_name);
            snprintf(out[n].name, sizeof out[n].name, "%.*s", (int)(len - 4), e->d_name);
        }
        n++;
    }
    closedir(d);
    if (out)
        qsort(out, n < max ? n : max, sizeof *out, by_name);
    return n;
}

/* Fails if the directory was not found: a runner that runs nothing must not
 * pass. */
Test(http_cases, directory_has_cases, .timeout = 10)
{
    char buf[1024];
    size_t n = find_cases(NULL, 0);
    cr_assert(n >= 10, "only %zu case files in %s", n, cases_dir(buf, sizeof buf));
}

/* ---- Parsing a case file ------------------------------------------------------------ */

enum step_kind {
    S_SEND,
    S_PAUSE,
    S_RECONNECT,
    S_SHUTWR,
    S_STATUS,
    S_NOBODY,
    S_HEADER,      /* name [: value] */
    S_NOHEADER,    /* name */
    S_HEADERTOKEN, /* name: token */
    S_BODY,        /* data */
    S_BODYHAS,     /* data */
    S_TRAILER,     /* name: value */
    S_CLOSED,
    S_SILENCE,
    S_REASON, /* data */
    S_BYTES   /* data */
};

struct step {
    enum step_kind kind;
    int line;
    long num;
    char *name, *value; /* NUL-terminated; value NULL if absent */
    char *data;         /* decoded bytes */
    size_t len;
};

struct case_file {
    const char *name;
    char *config;
    size_t config_len;
    const char *set[64];
    int nset;
    struct step steps[256];
    int nsteps;
    char *key; /* config + --set values: cases with equal keys share a keel */
};

static void free_case(struct case_file *cf)
{
    for (int i = 0; i < cf->nsteps; i++) {
        free(cf->steps[i].name);
        free(cf->steps[i].value);
        free(cf->steps[i].data);
    }
    for (int i = 1; i < cf->nset; i += 2)
        free((char *)cf->set[i]);
    free(cf->config);
    free(cf->key);
    free(cf);
}

/* A failing case formats its message here and jumps back to the loop that
 * runs the cases, which records it and goes on with the next case. */
static jmp_buf case_jmp;
static char case_msg[16384];

static void fail_case(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail_case(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(case_msg, sizeof case_msg, fmt, ap);
    va_end(ap);
    longjmp(case_jmp, 1);
}

#define case_fail(cf, line, ...) case_fail_((cf), (line), __VA_ARGS__, "")
#define case_fail_(cf, line, fmt, ...)                                                             \
    fail_case("%s.txt:%d: " fmt "%s", (cf)->name, (line), __VA_ARGS__)

/* Decodes escapes from s (up to end or an unescaped `stop` char, if stop is
 * not 0) onto *out. Returns the position after what was consumed. */
static const char *decode(struct case_file *cf, int line, const char *s, char stop, char **out,
                          size_t *len)
{
    while (*s && *s != stop) {
        if (*s != '\\') {
            ht_append(out, len, s++, 1);
            continue;
        }
        s++;
        char ch;
        switch (*s) {
        case '\\':
            ch = '\\';
            break;
        case 'r':
            ch = '\r';
            break;
        case 'n':
            ch = '\n';
            break;
        case 't':
            ch = '\t';
            break;
        case '0':
            ch = '\0';
            break;
        case ']':
            ch = ']';
            break;
        case 'x': {
            char hex[3] = {s[1], s[1] ? s[2] : 0, 0};
            char *end;
            long v = strtol(hex, &end, 16);
            if (!isxdigit((unsigned char)hex[0]) || !isxdigit((unsigned char)hex[1]) || *end)
                case_fail(cf, line, "bad \\x escape: two hex digits needed");
            ch = (char)v;
            s += 2;
            break;
        }
        case '[': { /* \[N:TEXT] repeats TEXT N times */
            char *end;
            long n = strtol(s + 1, &end, 10);
            if (end == s + 1 || *end != ':' || n < 0 || n > 10000000)
                case_fail(cf, line, "bad repeat: \\[COUNT:TEXT] expected");
            char *text = NULL;
            size_t tlen = 0;
            ht_append(&text, &tlen, "", 0);
            const char *after = decode(cf, line, end + 1, ']', &text, &tlen);
            if (*after != ']')
                case_fail(cf, line, "unterminated \\[COUNT:TEXT]");
            for (long i = 0; i < n; i++)
                ht_append(out, len, text, tlen);
            free(text);
            s = after + 1;
            continue;
        }
        default:
            case_fail(cf, line, "unknown escape '\\%c'", *s ? *s : '0');
        }
        ht_append(out, len, &ch, 1);
        s++;
    }
    return s;
}

/* "Name: value" or "Name" into step->name / step->value. */
static void parse_field(struct case_file *cf, struct step *st, const char *s, int need_value)
{
    while (*s == ' ')
        s++;
    const char *colon = strchr(s, ':');
    if (!colon) {
        if (need_value)
            case_fail(cf, st->line, "expected 'Name: value' after the directive");
        st->name = strdup(s);
        return;
    }
    st->name = strndup(s, (size_t)(colon - s));
    const char *v = colon + 1;
    while (*v == ' ')
        v++;
    size_t vlen = 0;
    st->value = NULL;
    ht_append(&st->value, &vlen, "", 0);
    decode(cf, st->line, v, 0, &st->value, &vlen);
}

static struct step *add_step(struct case_file *cf, enum step_kind kind, int line)
{
    if (cf->nsteps == (int)(sizeof cf->steps / sizeof cf->steps[0]))
        case_fail(cf, line, "too many steps");
    struct step *st = &cf->steps[cf->nsteps++];
    memset(st, 0, sizeof *st);
    st->kind = kind;
    st->line = line;
    return st;
}

static long parse_num(struct case_file *cf, int line, const char *s)
{
    char *end;
    long v = strtol(s, &end, 10);
    while (*end == ' ')
        end++;
    if (end == s || *end)
        case_fail(cf, line, "expected a number, got '%s'", s);
    return v;
}

static void parse_case(struct case_file *cf, const char *text)
{
    enum { NONE, PREAMBLE, CONFIG, SET, SEND } section = PREAMBLE;
    struct step *send = NULL;
    int lineno = 0;
    const char *s = text;
    ht_append(&cf->config, &cf->config_len, "", 0);
    while (*s) {
        const char *nl = strchr(s, '\n');
        size_t len = nl ? (size_t)(nl - s) : strlen(s);
        char *line = strndup(s, len);
        s += len + (nl != NULL);
        lineno++;
        if (len && line[len - 1] == '\r') /* a CRLF checkout; use \r for a real CR */
            line[--len] = '\0';

        if (strncmp(line, "---", 3) == 0) {
            const char *d = line + 3;
            while (*d == ' ')
                d++;
            section = NONE;
            if (strcmp(d, "config") == 0) {
                section = CONFIG;
            } else if (strcmp(d, "set") == 0) {
                section = SET;
            } else if (strcmp(d, "send") == 0) {
                section = SEND;
                send = add_step(cf, S_SEND, lineno);
                ht_append(&send->data, &send->len, "", 0);
            } else if (strncmp(d, "pause ", 6) == 0) {
                add_step(cf, S_PAUSE, lineno)->num = parse_num(cf, lineno, d + 6);
            } else if (strcmp(d, "reconnect") == 0) {
                add_step(cf, S_RECONNECT, lineno);
            } else if (strcmp(d, "shutdown-write") == 0) {
                add_step(cf, S_SHUTWR, lineno);
            } else if (strncmp(d, "expect ", 7) == 0) {
                const char *e = d + 7;
                while (*e == ' ')
                    e++;
                struct step *st;
                if (strncmp(e, "status ", 7) == 0) {
                    add_step(cf, S_STATUS, lineno)->num = parse_num(cf, lineno, e + 7);
                } else if (strcmp(e, "no-body") == 0) {
                    add_step(cf, S_NOBODY, lineno);
                } else if (strncmp(e, "header ", 7) == 0) {
                    parse_field(cf, add_step(cf, S_HEADER, lineno), e + 7, 0);
                } else if (strncmp(e, "no-header ", 10) == 0) {
                    parse_field(cf, add_step(cf, S_NOHEADER, lineno), e + 10, 0);
                } else if (strncmp(e, "header-token ", 13) == 0) {
                    parse_field(cf, add_step(cf, S_HEADERTOKEN, lineno), e + 13, 1);
                } else if (strncmp(e, "trailer ", 8) == 0) {
                    parse_field(cf, add_step(cf, S_TRAILER, lineno), e + 8, 1);
                } else if (strcmp(e, "body") == 0 || strncmp(e, "body ", 5) == 0) {
                    st = add_step(cf, S_BODY, lineno);
                    ht_append(&st->data, &st->len, "", 0);
                    decode(cf, lineno, e[4] ? e + 5 : e + 4, 0, &st->data, &st->len);
                } else if (strncmp(e, "body-contains ", 14) == 0) {
                    st = add_step(cf, S_BODYHAS, lineno);
                    ht_append(&st->data, &st->len, "", 0);
                    decode(cf, lineno, e + 14, 0, &st->data, &st->len);
                } else if (strcmp(e, "reason") == 0 || strncmp(e, "reason ", 7) == 0) {
                    st = add_step(cf, S_REASON, lineno);
                    ht_append(&st->data, &st->len, "", 0);
                    decode(cf, lineno, e[6] ? e + 7 : e + 6, 0, &st->data, &st->len);
                } else if (strncmp(e, "bytes ", 6) == 0) {
                    st = add_step(cf, S_BYTES, lineno);
                    ht_append(&st->data, &st->len, "", 0);
                    decode(cf, lineno, e + 6, 0, &st->data, &st->len);
                    if (st->len == 0)
                        case_fail(cf, lineno, "'expect bytes' needs at least one byte");
                } else if (strcmp(e, "closed") == 0) {
                    add_step(cf, S_CLOSED, lineno);
                } else if (strncmp(e, "silence ", 8) == 0) {
                    add_step(cf, S_SILENCE, lineno)->num = parse_num(cf, lineno, e + 8);
                } else {
                    case_fail(cf, lineno, "unknown expectation '%s'", e);
                }
            } else {
                case_fail(cf, lineno, "unknown directive '%s'", d);
            }
            free(line);
            continue;
        }

        switch (section) {
        case PREAMBLE: /* the description */
            break;
        case NONE:
            if (line[0] && line[0] != '#')
                case_fail(cf, lineno, "text outside a section: '%s'", line);
            break;
        case CONFIG:
            ht_append(&cf->config, &cf->config_len, line, len);
            ht_append(&cf->config, &cf->config_len, "\n", 1);
            break;
        case SET:
            if (line[0] && line[0] != '#') {
                if (cf->nset + 2 >= (int)(sizeof cf->set / sizeof cf->set[0]))
                    case_fail(cf, lineno, "too many --set lines");
                cf->set[cf->nset++] = "--set";
                cf->set[cf->nset++] = strdup(line);
            }
            break;
        case SEND: {
            /* A line ends in CRLF unless its last character is a lone
             * backslash (then nothing is added). */
            size_t bs = 0;
            while (bs < len && line[len - 1 - bs] == '\\')
                bs++;
            int joined = bs % 2 == 1;
            if (joined)
                line[--len] = '\0';
            decode(cf, lineno, line, 0, &send->data, &send->len);
            if (!joined)
                ht_append(&send->data, &send->len, "\r\n", 2);
            break;
        }
        }
        free(line);
    }
    cf->set[cf->nset] = NULL;
}

/* ---- Running it --------------------------------------------------------------------- */

struct run {
    struct case_file *cf;
    kh_proc *p;
    ht_conn *c;
    ht_resp r;
    int have_head; /* r holds a response head */
    int have_body; /* and its body has been read */
    int no_body;   /* expect no-body was given for it */
};

/* The end of keel's log (it is shared by the cases of one configuration). */
static const char *log_tail(kh_proc *p)
{
    const char *err = kh_stderr(p);
    size_t len = strlen(err);
    return len > 3000 ? err + len - 3000 : err;
}

#define run_fail(rn, st, ...) run_fail_((rn), (st), __VA_ARGS__, "")
#define run_fail_(rn, st, fmt, ...)                                                                \
    fail_case("%s.txt:%d: " fmt "%s\n---- response head ----\n%s\n---- keel stderr (end) "         \
              "----\n%s---- end ----",                                                             \
              (rn)->cf->name, (st)->line, __VA_ARGS__,                                             \
              (rn)->have_head && (rn)->r.head ? (rn)->r.head : "(none)", log_tail((rn)->p))

static void finish_body(struct run *rn, const struct step *st)
{
    if (!rn->have_head || rn->have_body)
        return;
    if (ht_read_body(rn->c, &rn->r, rn->no_body, 5000) < 0)
        run_fail(rn, st, "reading the body of the %d response: %s", rn->r.status, rn->r.err);
    rn->have_body = 1;
}

static void need_head(struct run *rn, const struct step *st)
{
    if (!rn->have_head)
        run_fail(rn, st, "no response yet: put an 'expect status N' first");
}

/* Printable form of bytes for messages. */
static const char *show(const char *data, size_t len)
{
    static char buf[2][1200];
    static int k;
    char *b = buf[k++ & 1];
    size_t o = 0;
    for (size_t i = 0; i < len && o < sizeof buf[0] - 8; i++) {
        unsigned char ch = (unsigned char)data[i];
        if (ch == '\r')
            o += (size_t)snprintf(b + o, sizeof buf[0] - o, "\\r");
        else if (ch == '\n')
            o += (size_t)snprintf(b + o, sizeof buf[0] - o, "\\n");
        else if (ch < 0x20 || ch >= 0x7f)
            o += (size_t)snprintf(b + o, sizeof buf[0] - o, "\\x%02x", ch);
        else
            b[o++] = (char)ch;
    }
    b[o] = '\0';
    if (o >= sizeof buf[0] - 8)
        strcpy(b + o, "...");
    return b;
}

static void run_step(struct run *rn, struct step *st)
{
    switch (st->kind) {
    case S_SEND:
        /* The server may close early (a refused request): not an error
         * here; the expectations say what should have happened. */
        ht_try_send(rn->c, st->data, st->len);
        break;
    case S_PAUSE:
        kh_sleep_ms((int)st->num);
        break;
    case S_RECONNECT:
        ht_close(rn->c);
        ht_resp_free(&rn->r);
        rn->have_head = rn->have_body = rn->no_body = 0;
        rn->c = ht_connect(kh_port(rn->p, 0));
        break;
    case S_SHUTWR:
        shutdown(rn->c->fd, SHUT_WR);
        break;
    case S_STATUS:
        finish_body(rn, st);
        ht_resp_free(&rn->r);
        rn->have_head = rn->have_body = rn->no_body = 0;
        if (ht_read_head(rn->c, &rn->r, 5000) < 0)
            run_fail(rn, st, "expected a %ld response: %s", st->num, rn->r.err);
        rn->have_head = 1;
        if (rn->r.status != st->num)
            run_fail(rn, st, "status %d, expected %ld", rn->r.status, st->num);
        break;
    case S_NOBODY:
        need_head(rn, st);
        if (rn->have_body)
            run_fail(rn, st, "'expect no-body' must come before anything that reads the body");
        rn->no_body = 1;
        finish_body(rn, st);
        break;
    case S_HEADER: {
        need_head(rn, st);
        int found = 0;
        for (size_t i = 0; i < rn->r.nfields; i++)
            if (strcasecmp(rn->r.fields[i].name, st->name) == 0 &&
                (!st->value || strcmp(rn->r.fields[i].value, st->value) == 0))
                found = 1;
        if (!found)
            run_fail(rn, st, "no header '%s'%s%s", st->name, st->value ? " with value " : "",
                     st->value ? st->value : "");
        break;
    }
    case S_NOHEADER:
        need_head(rn, st);
        if (ht_header(&rn->r, st->name))
            run_fail(rn, st, "unexpected header '%s: %s'", st->name, ht_header(&rn->r, st->name));
        break;
    case S_HEADERTOKEN:
        need_head(rn, st);
        if (!ht_header_has_token(&rn->r, st->name, st->value))
            run_fail(rn, st, "header '%s' lacks the token '%s'", st->name, st->value);
        break;
    case S_TRAILER: {
        need_head(rn, st);
        finish_body(rn, st);
        const char *v = ht_trailer(&rn->r, st->name);
        if (!v || strcmp(v, st->value) != 0)
            run_fail(rn, st, "trailer '%s' is '%s', expected '%s'", st->name, v ? v : "(none)",
                     st->value);
        break;
    }
    case S_BODY:
        need_head(rn, st);
        finish_body(rn, st);
        if (rn->r.body_len != st->len || memcmp(rn->r.body, st->data, st->len) != 0)
            run_fail(rn, st, "body '%s', expected '%s'", show(rn->r.body, rn->r.body_len),
                     show(st->data, st->len));
        break;
    case S_BODYHAS:
        need_head(rn, st);
        finish_body(rn, st);
        if (!memmem(rn->r.body, rn->r.body_len, st->data, st->len))
            run_fail(rn, st, "body '%s' does not contain '%s'", show(rn->r.body, rn->r.body_len),
                     show(st->data, st->len));
        break;
    case S_REASON:
        need_head(rn, st);
        if (strlen(rn->r.reason) != st->len || memcmp(rn->r.reason, st->data, st->len) != 0)
            run_fail(rn, st, "reason phrase '%s', expected '%s'", rn->r.reason,
                     show(st->data, st->len));
        break;
    case S_BYTES:
        /* Raw bytes after the response read so far (what a protocol the
         * connection was handed to sends). */
        finish_body(rn, st);
        if (ht_wait_bytes(rn->c, st->len, 5000) < 0)
            run_fail(rn, st, "expected %zu bytes '%s', got '%s'%s", st->len,
                     show(st->data, st->len), show(rn->c->buf + rn->c->pos, ht_avail(rn->c)),
                     rn->c->eof ? " and a close" : "");
        if (memcmp(rn->c->buf + rn->c->pos, st->data, st->len) != 0)
            run_fail(rn, st, "expected bytes '%s', got '%s'", show(st->data, st->len),
                     show(rn->c->buf + rn->c->pos, st->len));
        rn->c->pos += st->len;
        break;
    case S_CLOSED: {
        finish_body(rn, st);
        int closed = ht_wait_closed(rn->c, 5000);
        if (closed != 1)
            run_fail(rn, st, "connection %s",
                     closed == 0       ? "still open after 5 s"
                     : ht_avail(rn->c) ? show(rn->c->buf + rn->c->pos, ht_avail(rn->c))
                                       : "sent more bytes");
        break;
    }
    case S_SILENCE:
        finish_body(rn, st);
        if (!ht_silent(rn->c, (int)st->num))
            run_fail(rn, st, "expected nothing for %ld ms, got %s", st->num,
                     rn->c->eof && !ht_avail(rn->c)
                         ? "a close"
                         : show(rn->c->buf + rn->c->pos, ht_avail(rn->c)));
        break;
    }
}

/* ---- Driver ---------------------------------------------------------------------------- */

static void run_case(struct run *rn);
static int keel_died(kh_proc *p);

/* Reads and parses a case into *out (set first, so that a failure can free
 * what was built). */
static void load_case(const struct ht_case *tc, struct case_file **out)
{
    struct case_file *cf = calloc(1, sizeof *cf);
    cr_assert(cf, "out of memory");
    *out = cf;
    cf->name = tc->name;
    FILE *f = fopen(tc->path, "rb");
    if (!f)
        fail_case("%s: %s", tc->path, strerror(errno));
    char *text = NULL, tmp[8192];
    size_t len = 0, n;
    while ((n = fread(tmp, 1, sizeof tmp, f)) > 0)
        ht_append(&text, &len, tmp, n);
    fclose(f);
    if (!text)
        fail_case("%s.txt: empty file", cf->name);
    parse_case(cf, text);
    free(text);
    if (cf->nsteps == 0)
        fail_case("%s.txt: no steps", cf->name);
    size_t klen = 0;
    ht_append(&cf->key, &klen, cf->config, cf->config_len);
    for (int i = 0; i < cf->nset; i++) {
        ht_append(&cf->key, &klen, "\n", 1);
        ht_append(&cf->key, &klen, cf->set[i], strlen(cf->set[i]));
    }
}

/* setjmp lives in these two small frames, so that nothing the callers keep
 * in locals can be clobbered by the longjmp of a failing case. */
static int try_load(const struct ht_case *tc, struct case_file **out)
{
    *out = NULL;
    if (setjmp(case_jmp) != 0) {
        if (*out)
            free_case(*out);
        *out = NULL;
        return -1;
    }
    load_case(tc, out);
    return 0;
}

static int try_run(struct run *rn)
{
    if (setjmp(case_jmp) != 0)
        return -1;
    run_case(rn);
    if (keel_died(rn->p))
        run_fail(rn, &rn->cf->steps[rn->cf->nsteps - 1], "keel exited (status 0x%x)",
                 rn->p->status);
    return 0;
}

/* Runs the case's steps on a new connection to p. */
static void run_case(struct run *rn)
{
    struct case_file *cf = rn->cf;
    rn->c = ht_connect(kh_port(rn->p, 0));
    for (int i = 0; i < cf->nsteps; i++)
        run_step(rn, &cf->steps[i]);

    /* Nothing may follow what the case expected (an answered smuggled
     * request would show here). */
    struct step *last = &cf->steps[cf->nsteps - 1];
    finish_body(rn, last);
    if (last->kind != S_CLOSED && last->kind != S_SILENCE) {
        if (ht_avail(rn->c) == 0 && !rn->c->eof)
            ht_fill(rn->c, 100);
        if (ht_avail(rn->c) > 0)
            run_fail(rn, last, "unexpected bytes after the last expectation: '%s'",
                     show(rn->c->buf + rn->c->pos, ht_avail(rn->c)));
    }
}

/* 1 if keel has exited (and reaps it). */
static int keel_died(kh_proc *p)
{
    int st;
    if (p->pid == 0)
        return 1;
    if (waitpid(p->pid, &st, WNOHANG) == p->pid) {
        p->pid = 0;
        p->status = st;
        return 1;
    }
    return 0;
}

static int by_key(const void *a, const void *b)
{
    const struct case_file *x = *(struct case_file *const *)a, *y = *(struct case_file *const *)b;
    int k = strcmp(x->key, y->key);
    return k ? k : strcmp(x->name, y->name);
}

/* Runs the cases whose index (in name order) is shard modulo nshards. */
static void run_shard(int shard, int nshards)
{
    size_t total = find_cases(NULL, 0);
    struct ht_case *tcs = calloc(total ? total : 1, sizeof *tcs);
    struct case_file **cases = calloc(total ? total : 1, sizeof *cases);
    cr_assert(tcs && cases, "out of memory");
    total = find_cases(tcs, total);

    char *report = NULL;
    size_t report_len = 0;
    int nrun = 0, nfail = 0;
    size_t ncases = 0;
    const char *only = getenv("KEEL_HTTP_CASE");

    for (size_t i = 0; i < total; i++) {
        if ((int)(i % (size_t)nshards) != shard || (only && *only && !strstr(tcs[i].name, only)))
            continue;
        if (try_load(&tcs[i], &cases[ncases]) == 0) {
            ncases++;
        } else { /* a syntax error in the case file */
            nrun++;
            nfail++;
            ht_append(&report, &report_len, case_msg, strlen(case_msg));
            ht_append(&report, &report_len, "\n\n", 2);
        }
    }
    qsort(cases, ncases, sizeof *cases, by_key);

    kh_proc *p = NULL;
    for (size_t i = 0; i < ncases; i++) {
        struct case_file *cf = cases[i];
        if (p && (strcmp(cf->key, cases[i - 1]->key) != 0 || keel_died(p))) {
            kh_stop(p);
            p = NULL;
        }
        if (!p)
            p = ht_start(cf->config, cf->set);
        struct run rn = {.cf = cf, .p = p};
        nrun++;
        if (try_run(&rn) != 0) {
            nfail++;
            ht_append(&report, &report_len, case_msg, strlen(case_msg));
            ht_append(&report, &report_len, "\n\n", 2);
        }
        ht_resp_free(&rn.r);
        ht_close(rn.c);
    }
    kh_stop(p);
    for (size_t i = 0; i < ncases; i++)
        free_case(cases[i]);
    free(cases);
    free(tcs);

    cr_log_info("%d case(s) run, %d failed", nrun, nfail);
    if (nfail > 0) {
        cr_log_error("%s", report);
        free(report);
        cr_assert_fail("%d of %d case(s) failed (each is listed above)", nfail, nrun);
    }
    free(report);
}

Test(http_cases, shard_1_of_2, .timeout = 110, .fini = kh_cleanup_all)
{
    run_shard(0, 2);
}

Test(http_cases, shard_2_of_2, .timeout = 110, .fini = kh_cleanup_all)
{
    run_shard(1, 2);
}
