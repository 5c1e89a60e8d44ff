/* test_http.h — helpers shared by the test_http*.c integration tests: start
 * keel with http1 + hello, read and check HTTP/1.1 responses off a raw
 * socket, run curl with a deadline.
 *
 * Everything here is static (one copy per test executable). Define
 * _GNU_SOURCE before including it (memmem, strndup, strptime). The response reader is deliberately
 * strict: it accepts only CRLF line ends, one well-formed status line, well-formed fields and
 * consistent framing, so every test also checks the server's output format.
 */
#ifndef KEEL_TEST_HTTP_H
#define KEEL_TEST_HTTP_H

#ifndef _GNU_SOURCE
#error "define _GNU_SOURCE before including test_http.h"
#endif
#include "harness.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HT_FN static __attribute__((unused))

/* ---- Config ---------------------------------------------------------------
 * The [http1] keys the tests set (with --set), in one place. */
#define HT_MAX_REQUEST_LINE  "http1.max_request_line"
#define HT_MAX_HEADER_BYTES  "http1.max_header_bytes"
#define HT_MAX_HEADERS       "http1.max_headers"
#define HT_MAX_BODY          "http1.max_body"
#define HT_HEADER_TIMEOUT    "http1.header_timeout"
#define HT_BODY_TIMEOUT      "http1.body_timeout"
#define HT_BODY_MIN_RATE     "http1.body_min_rate"
#define HT_KEEPALIVE_TIMEOUT "http1.keepalive_timeout"
#define HT_MAX_REQUESTS      "http1.max_requests"
#define HT_SERVER            "http1.server"

/* keel with http1 + hello on one port; `extra` (may be NULL) is appended to
 * the config, args (may be NULL) are extra command-line arguments. */
HT_FN kh_proc *ht_start_n(int workers, const char *extra, const char *const *args)
{
    char conf[4096];
    snprintf(conf, sizeof conf,
             "[keel]\n"
             "listen = 127.0.0.1:0 http1\n"
             "workers = %d\n"
             "modules = http1 hello\n" KH_MODULE_PATH "%s",
             workers, extra ? extra : "");
    kh_proc *p = kh_start(conf, args, 1, 10000);
    kh_assert(p, kh_port(p, 0) > 0, "no port in the 'listening on' line");
    return p;
}

HT_FN kh_proc *ht_start(const char *extra, const char *const *args)
{
    return ht_start_n(2, extra, args);
}

/* ---- A connection with a read buffer --------------------------------------- */

typedef struct ht_conn {
    int fd;
    char *buf;
    size_t len, pos, cap; /* unread bytes are buf[pos, len) */
    int eof;              /* the peer closed (or reset) */
} ht_conn;

HT_FN ht_conn *ht_connect(unsigned port)
{
    ht_conn *c = calloc(1, sizeof *c);
    cr_assert(c, "out of memory");
    c->fd = kh_connect("127.0.0.1", port);
    cr_assert(c->fd >= 0, "connect to 127.0.0.1:%u: %s", port, strerror(errno));
    c->cap = 1 << 16;
    c->buf = malloc(c->cap);
    cr_assert(c->buf, "out of memory");
    return c;
}

HT_FN void ht_close(ht_conn *c)
{
    if (!c)
        return;
    if (c->fd >= 0)
        close(c->fd);
    free(c->buf);
    free(c);
}

HT_FN void ht_send(ht_conn *c, const void *data, size_t len)
{
    cr_assert(kh_send(c->fd, data, len) == 0, "send of %zu bytes failed: %s", len, strerror(errno));
}

HT_FN void ht_send_str(ht_conn *c, const char *s)
{
    ht_send(c, s, strlen(s));
}

/* Like ht_send, but reports failure instead of asserting (the server may
 * legitimately close while a test is still sending). */
HT_FN int ht_try_send(ht_conn *c, const void *data, size_t len)
{
    return kh_send(c->fd, data, len);
}

HT_FN size_t ht_avail(const ht_conn *c)
{
    return c->len - c->pos;
}

/* Reads whatever arrives within timeout_ms (at least one byte unless EOF).
 * Returns bytes read, 0 on EOF/reset, -1 on timeout. */
HT_FN long ht_fill(ht_conn *c, int timeout_ms)
{
    if (c->eof)
        return 0;
    if (c->pos > 0 && c->pos == c->len)
        c->pos = c->len = 0;
    if (c->cap - c->len < 4096) {
        if (c->pos > 0) {
            memmove(c->buf, c->buf + c->pos, c->len - c->pos);
            c->len -= c->pos;
            c->pos = 0;
        }
        if (c->cap - c->len < 4096) {
            c->cap *= 2;
            c->buf = realloc(c->buf, c->cap);
            cr_assert(c->buf, "out of memory");
        }
    }
    long long deadline = kh_now_ms() + timeout_ms;
    for (;;) {
        long long left = deadline - kh_now_ms();
        if (left < 0)
            left = 0;
        struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
        int r = poll(&pfd, 1, (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        ssize_t n = recv(c->fd, c->buf + c->len, c->cap - c->len - 1, MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (n <= 0) {
            c->eof = 1;
            return 0;
        }
        c->len += (size_t)n;
        c->buf[c->len] = '\0';
        return n;
    }
}

/* 1 if the peer closes with no further byte within timeout_ms, 0 on
 * timeout, -1 if bytes arrived (or were already buffered). */
HT_FN int ht_wait_closed(ht_conn *c, int timeout_ms)
{
    if (ht_avail(c) > 0)
        return -1;
    long n = ht_fill(c, timeout_ms);
    if (n == 0)
        return 1;
    return n < 0 ? 0 : -1;
}

/* 1 if nothing at all (no byte, no close) happens for ms. */
HT_FN int ht_silent(ht_conn *c, int ms)
{
    if (ht_avail(c) > 0 || c->eof)
        return 0;
    return ht_fill(c, ms) < 0;
}

/* ---- Responses --------------------------------------------------------------- */

#define HT_MAX_FIELDS 64

typedef struct ht_field {
    char *name;
    char *value;
} ht_field;

typedef struct ht_resp {
    int minor;  /* HTTP/1.x */
    int status; /* 0 if nothing could be parsed */
    char reason[128];
    char *head; /* the raw head, NUL-terminated, without the blank line */
    ht_field fields[HT_MAX_FIELDS];
    size_t nfields;
    ht_field trailers[HT_MAX_FIELDS];
    size_t ntrailers;
    char *body; /* decoded body, NUL-terminated (may hold NULs) */
    size_t body_len;
    int chunked;            /* framed with Transfer-Encoding: chunked */
    int64_t content_length; /* -1 if none */
    int close_delimited;    /* no framing: the body ran to EOF */
    char err[512];          /* why reading failed ("" if it did not) */
} ht_resp;

HT_FN void ht_resp_free(ht_resp *r)
{
    free(r->head);
    for (size_t i = 0; i < r->nfields; i++) {
        free(r->fields[i].name);
        free(r->fields[i].value);
    }
    for (size_t i = 0; i < r->ntrailers; i++) {
        free(r->trailers[i].name);
        free(r->trailers[i].value);
    }
    free(r->body);
    memset(r, 0, sizeof *r);
}

HT_FN int ht_fail(ht_resp *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
HT_FN int ht_fail(ht_resp *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, sizeof r->err, fmt, ap);
    va_end(ap);
    return -1;
}

HT_FN const char *ht_field_get(const ht_field *f, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcasecmp(f[i].name, name) == 0)
            return f[i].value;
    return NULL;
}

/* The first field called name (case-insensitive), or NULL. */
HT_FN const char *ht_header(const ht_resp *r, const char *name)
{
    return ht_field_get(r->fields, r->nfields, name);
}

HT_FN const char *ht_trailer(const ht_resp *r, const char *name)
{
    return ht_field_get(r->trailers, r->ntrailers, name);
}

HT_FN int ht_header_count(const ht_resp *r, const char *name)
{
    int n = 0;
    for (size_t i = 0; i < r->nfields; i++)
        n += strcasecmp(r->fields[i].name, name) == 0;
    return n;
}

/* Whether some field called name holds token in its comma-separated list
 * (case-insensitive), as for Connection, Allow, Transfer-Encoding. */
HT_FN int ht_header_has_token(const ht_resp *r, const char *name, const char *token)
{
    size_t tl = strlen(token);
    for (size_t i = 0; i < r->nfields; i++) {
        if (strcasecmp(r->fields[i].name, name) != 0)
            continue;
        const char *s = r->fields[i].value;
        while (*s) {
            while (*s == ' ' || *s == '\t' || *s == ',')
                s++;
            const char *e = s;
            while (*e && *e != ',')
                e++;
            const char *t = e;
            while (t > s && (t[-1] == ' ' || t[-1] == '\t'))
                t--;
            if ((size_t)(t - s) == tl && strncasecmp(s, token, tl) == 0)
                return 1;
            s = e;
        }
    }
    return 0;
}

/* RFC 9110 5.6.2: tchar. */
HT_FN int ht_is_tchar(int ch)
{
    return isalnum(ch) || (ch && strchr("!#$%&'*+-.^_`|~", ch) != NULL);
}

/* Parses one field line [s, e) (no CRLF) into f. */
HT_FN int ht_parse_field(ht_resp *r, const char *s, const char *e, ht_field *f)
{
    const char *colon = memchr(s, ':', (size_t)(e - s));
    if (!colon || colon == s)
        return ht_fail(r, "malformed field line '%.*s'", (int)(e - s), s);
    for (const char *q = s; q < colon; q++)
        if (!ht_is_tchar((unsigned char)*q))
            return ht_fail(r, "invalid character 0x%02x in field name '%.*s'", (unsigned char)*q,
                           (int)(colon - s), s);
    const char *v = colon + 1, *ve = e;
    while (v < ve && (*v == ' ' || *v == '\t'))
        v++;
    while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
        ve--;
    for (const char *q = v; q < ve; q++)
        if ((unsigned char)*q < 0x20 && *q != '\t')
            return ht_fail(r, "control character 0x%02x in the value of '%.*s'", (unsigned char)*q,
                           (int)(colon - s), s);
    f->name = strndup(s, (size_t)(colon - s));
    f->value = strndup(v, (size_t)(ve - v));
    cr_assert(f->name && f->value, "out of memory");
    return 0;
}

/* Waits until [pos, len) contains `needle`; returns its offset from pos or
 * -1 on timeout/EOF. */
HT_FN long ht_wait_for(ht_conn *c, const char *needle, int timeout_ms)
{
    long long deadline = kh_now_ms() + timeout_ms;
    size_t nl = strlen(needle);
    for (;;) {
        if (ht_avail(c) >= nl) {
            const char *hit = memmem(c->buf + c->pos, ht_avail(c), needle, nl);
            if (hit)
                return (long)(hit - (c->buf + c->pos));
        }
        long long left = deadline - kh_now_ms();
        if (left <= 0 || ht_fill(c, (int)left) <= 0)
            return -1;
    }
}

/* Waits until at least n bytes are buffered; 0 on success. */
HT_FN int ht_wait_bytes(ht_conn *c, size_t n, int timeout_ms)
{
    long long deadline = kh_now_ms() + timeout_ms;
    while (ht_avail(c) < n) {
        long long left = deadline - kh_now_ms();
        if (left <= 0 || ht_fill(c, (int)left) <= 0)
            return -1;
    }
    return 0;
}

/* Reads a response head: status line and fields. Returns 0, or -1 with
 * r->err set. Checks the format strictly. */
HT_FN int ht_read_head(ht_conn *c, ht_resp *r, int timeout_ms)
{
    memset(r, 0, sizeof *r);
    r->content_length = -1;
    long end = ht_wait_for(c, "\r\n\r\n", timeout_ms);
    if (end < 0) {
        if (ht_avail(c) == 0)
            return ht_fail(
                r, c->eof ? "connection closed before a response" : "no response within %d ms",
                timeout_ms);
        return ht_fail(r, "incomplete response head after %d ms%s: '%.*s'", timeout_ms,
                       c->eof ? " (then closed)" : "", (int)ht_avail(c), c->buf + c->pos);
    }
    const char *s = c->buf + c->pos, *e = s + end;
    r->head = strndup(s, (size_t)end);
    cr_assert(r->head, "out of memory");
    c->pos += (size_t)end + 4;

    /* status-line = HTTP-version SP status-code SP [ reason-phrase ] */
    const char *eol = memmem(s, (size_t)(e - s) + 2, "\r\n", 2);
    int n = 0;
    char digits[4] = {0};
    if (sscanf(s, "HTTP/1.%1d %3[0-9]%n", &r->minor, digits, &n) != 2 || strlen(digits) != 3 ||
        s + n > eol || (s[n] != ' ' && s + n != eol))
        return ht_fail(r, "malformed status line '%.*s'", (int)(eol - s), s);
    r->status = atoi(digits);
    const char *reason = s + n + (s + n < eol);
    snprintf(r->reason, sizeof r->reason, "%.*s", (int)(eol - reason), reason);
    for (const char *q = s; q < eol; q++)
        if (*q == '\r' || *q == '\n' || *q == '\0')
            return ht_fail(r, "control character in the status line");

    const char *line = eol + 2;
    while (line < e + 2 && line < e) {
        const char *le = memmem(line, (size_t)(e + 2 - line), "\r\n", 2);
        if (!le)
            le = e;
        if (memchr(line, '\n', (size_t)(le - line)) || memchr(line, '\r', (size_t)(le - line)))
            return ht_fail(r, "bare CR or LF in the response head");
        if (line[0] == ' ' || line[0] == '\t')
            return ht_fail(r, "obs-fold in the response head");
        if (r->nfields == HT_MAX_FIELDS)
            return ht_fail(r, "more than %d header fields", HT_MAX_FIELDS);
        if (ht_parse_field(r, line, le, &r->fields[r->nfields]) < 0)
            return -1;
        r->nfields++;
        line = le + 2;
    }

    /* Framing (RFC 9112 6.1-6.3): never both, never conflicting. */
    int ncl = ht_header_count(r, "Content-Length");
    const char *te = ht_header(r, "Transfer-Encoding");
    if (ncl > 1)
        return ht_fail(r, "%d Content-Length fields", ncl);
    if (ncl && te)
        return ht_fail(r, "both Content-Length and Transfer-Encoding");
    if (te) {
        if (strcasecmp(te, "chunked") != 0)
            return ht_fail(r, "unexpected Transfer-Encoding '%s'", te);
        r->chunked = 1;
    }
    if (ncl) {
        const char *v = ht_header(r, "Content-Length");
        char *endp;
        errno = 0;
        long long cl = strtoll(v, &endp, 10);
        if (!*v || *endp || cl < 0 || errno || !isdigit((unsigned char)v[0]))
            return ht_fail(r, "invalid Content-Length '%s'", v);
        r->content_length = cl;
    }
    if (r->status >= 200) {
        const char *date = ht_header(r, "Date");
        struct tm tm;
        memset(&tm, 0, sizeof tm);
        const char *rest = date ? strptime(date, "%a, %d %b %Y %H:%M:%S GMT", &tm) : NULL;
        if (!date)
            return ht_fail(r, "no Date header in a %d response", r->status);
        if (!rest || *rest || strlen(date) != 29)
            return ht_fail(r, "Date '%s' is not an IMF-fixdate", date);
    }
    return 0;
}

/* Reads one CRLF-terminated line at pos (without it) into line. */
HT_FN int ht_read_line(ht_conn *c, ht_resp *r, char *line, size_t cap, int timeout_ms)
{
    long end = ht_wait_for(c, "\r\n", timeout_ms);
    if (end < 0)
        return ht_fail(r, "chunked body: no complete line%s", c->eof ? " (closed)" : "");
    if ((size_t)end >= cap)
        return ht_fail(r, "chunked body: line of %ld bytes", end);
    memcpy(line, c->buf + c->pos, (size_t)end);
    line[end] = '\0';
    c->pos += (size_t)end + 2;
    return 0;
}

HT_FN void ht_body_append(ht_resp *r, const char *data, size_t len)
{
    r->body = realloc(r->body, r->body_len + len + 1);
    cr_assert(r->body, "out of memory");
    memcpy(r->body + r->body_len, data, len);
    r->body_len += len;
    r->body[r->body_len] = '\0';
}

/* Reads the body the head announced. no_body: the response has none
 * whatever its fields say (a HEAD request's, or a 1xx/204/304). */
HT_FN int ht_read_body(ht_conn *c, ht_resp *r, int no_body, int timeout_ms)
{
    ht_body_append(r, "", 0);
    if (no_body || r->status < 200 || r->status == 204 || r->status == 304)
        return 0;
    if (r->chunked) {
        char line[1024];
        for (;;) {
            if (ht_read_line(c, r, line, sizeof line, timeout_ms) < 0)
                return -1;
            char *endp;
            if (!isxdigit((unsigned char)line[0]))
                return ht_fail(r, "bad chunk-size line '%s'", line);
            unsigned long long size = strtoull(line, &endp, 16);
            if (*endp && *endp != ';')
                return ht_fail(r, "bad chunk-size line '%s'", line);
            if (size == 0)
                break;
            if (ht_wait_bytes(c, size + 2, timeout_ms) < 0)
                return ht_fail(r, "chunk of %llu bytes incomplete", size);
            ht_body_append(r, c->buf + c->pos, size);
            c->pos += size;
            if (memcmp(c->buf + c->pos, "\r\n", 2) != 0)
                return ht_fail(r, "chunk data not followed by CRLF");
            c->pos += 2;
        }
        for (;;) { /* trailer section */
            if (ht_read_line(c, r, line, sizeof line, timeout_ms) < 0)
                return -1;
            if (!line[0])
                return 0;
            if (r->ntrailers == HT_MAX_FIELDS)
                return ht_fail(r, "too many trailer fields");
            if (ht_parse_field(r, line, line + strlen(line), &r->trailers[r->ntrailers]) < 0)
                return -1;
            r->ntrailers++;
        }
    }
    if (r->content_length >= 0) {
        if (ht_wait_bytes(c, (size_t)r->content_length, timeout_ms) < 0)
            return ht_fail(r, "body: %zu of %lld bytes%s", ht_avail(c),
                           (long long)r->content_length, c->eof ? " (closed)" : "");
        ht_body_append(r, c->buf + c->pos, (size_t)r->content_length);
        c->pos += (size_t)r->content_length;
        return 0;
    }
    /* No framing: the body runs until the server closes. */
    r->close_delimited = 1;
    long long deadline = kh_now_ms() + timeout_ms;
    for (;;) {
        ht_body_append(r, c->buf + c->pos, ht_avail(c));
        c->pos = c->len;
        if (c->eof)
            return 0;
        long long left = deadline - kh_now_ms();
        if (left <= 0 || ht_fill(c, (int)left) < 0)
            return ht_fail(r, "close-delimited body: no close within %d ms", timeout_ms);
    }
}

HT_FN int ht_read_response(ht_conn *c, ht_resp *r, int no_body, int timeout_ms)
{
    if (ht_read_head(c, r, timeout_ms) < 0)
        return -1;
    return ht_read_body(c, r, no_body, timeout_ms);
}

/* Reads a response and fails the test (showing keel's stderr) if it cannot. */
HT_FN void ht_expect_response(kh_proc *p, ht_conn *c, ht_resp *r, int no_body)
{
    int rc = ht_read_response(c, r, no_body, 5000);
    kh_assert(p, rc == 0, "reading the response: %s\nhead:\n%s", r->err,
              r->head ? r->head : "(none)");
}

/* Sends a request on c and reads its response, which must have `status`. */
HT_FN void ht_expect_status_on(kh_proc *p, ht_conn *c, const char *request, int status)
{
    ht_resp r;
    ht_send_str(c, request);
    ht_expect_response(p, c, &r, strncmp(request, "HEAD ", 5) == 0);
    kh_assert(p, r.status == status, "%s: %d, not %d", request, r.status, status);
    ht_resp_free(&r);
}

/* Sends a request on a fresh connection and reads one response (5 s). */
HT_FN void ht_roundtrip(kh_proc *p, const char *request, ht_resp *r)
{
    ht_conn *c = ht_connect(kh_port(p, 0));
    ht_send_str(c, request);
    ht_expect_response(p, c, r, strncmp(request, "HEAD ", 5) == 0);
    ht_close(c);
}

/* ---- Running a program (curl) with a deadline ------------------------------ */

typedef struct ht_run_result {
    int status; /* exit status, -1 if killed by a signal, -2 on timeout */
    char *out;  /* stdout, NUL-terminated */
    size_t out_len;
    char *err; /* stderr */
    size_t err_len;
} ht_run_result;

HT_FN void ht_run_free(ht_run_result *rr)
{
    free(rr->out);
    free(rr->err);
    memset(rr, 0, sizeof *rr);
}

HT_FN void ht_append(char **buf, size_t *len, const char *data, size_t n)
{
    *buf = realloc(*buf, *len + n + 1);
    cr_assert(*buf, "out of memory");
    memcpy(*buf + *len, data, n);
    *len += n;
    (*buf)[*len] = '\0';
}

/* Runs argv[0] (searched in PATH) with stdin from /dev/null, collecting
 * stdout and stderr; kills it after timeout_ms. */
HT_FN ht_run_result ht_run(const char *const *argv, int timeout_ms)
{
    ht_run_result rr = {0};
    ht_append(&rr.out, &rr.out_len, "", 0);
    ht_append(&rr.err, &rr.err_len, "", 0);
    int po[2], pe[2];
    cr_assert(pipe(po) == 0 && pipe(pe) == 0, "pipe: %s", strerror(errno));
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        int nul = open("/dev/null", O_RDONLY);
        dup2(nul, 0);
        dup2(po[1], 1);
        dup2(pe[1], 2);
        close(po[0]);
        close(pe[0]);
        execvp(argv[0], (char *const *)argv);
        dprintf(2, "cannot execute %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(po[1]);
    close(pe[1]);
    long long deadline = kh_now_ms() + timeout_ms;
    int open_fds = 2, timed_out = 0;
    while (open_fds > 0) {
        struct pollfd pfd[2] = {{.fd = po[0], .events = POLLIN}, {.fd = pe[0], .events = POLLIN}};
        long long left = deadline - kh_now_ms();
        if (left <= 0) {
            timed_out = 1;
            break;
        }
        int r = poll(pfd, 2, (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            continue;
        for (int i = 0; i < 2; i++) {
            if (pfd[i].fd < 0 || !(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            char tmp[8192];
            ssize_t n = read(pfd[i].fd, tmp, sizeof tmp);
            if (n > 0) {
                if (i == 0)
                    ht_append(&rr.out, &rr.out_len, tmp, (size_t)n);
                else
                    ht_append(&rr.err, &rr.err_len, tmp, (size_t)n);
            } else if (n == 0 || errno != EINTR) {
                close(pfd[i].fd);
                if (i == 0)
                    po[0] = -1;
                else
                    pe[0] = -1;
                open_fds--;
            }
        }
    }
    if (po[0] >= 0)
        close(po[0]);
    if (pe[0] >= 0)
        close(pe[0]);
    if (timed_out)
        kill(pid, SIGKILL);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (timed_out)
        rr.status = -2;
    else
        rr.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return rr;
}

/* ---- Misc ------------------------------------------------------------------ */

/* hello's /offload computation, to check its answer. */
HT_FN uint64_t ht_fnv_rounds(uint64_t rounds)
{
    uint64_t x = 14695981039346656037ULL;
    for (uint64_t r = 0; r < rounds; r++) {
        uint64_t h = 14695981039346656037ULL;
        for (int i = 0; i < 8; i++) {
            h ^= (x >> (8 * i)) & 0xff;
            h *= 1099511628211ULL;
        }
        x = h;
    }
    return x;
}

/* A formatted string in a static rotating buffer (for building requests). */
HT_FN const char *ht_fmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
HT_FN const char *ht_fmt(const char *fmt, ...)
{
    static char bufs[4][16384];
    static int i;
    char *b = bufs[i++ & 3];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b, sizeof bufs[0], fmt, ap);
    va_end(ap);
    return b;
}

/* `keel -t` on conf must exit 1 and say, on stderr, the config file's
 * name followed by want (":7: [section] key: reason"); label names the
 * case in the messages. */
HT_FN void ht_expect_config_error(const char *conf, const char *want, const char *label)
{
    const char *args[] = {"-t", NULL};
    kh_proc *p = kh_spawn(conf, args);
    int status = kh_wait_exit(p, 10000);
    cr_expect_eq(status, 1, "%s: keel -t exit status %d", label, status);
    char full[1024];
    snprintf(full, sizeof full, "%s%s", p->conf, want);
    cr_expect(strstr(kh_stderr(p), full) != NULL, "%s: no '%s' in '%s'", label, full, kh_stderr(p));
    kh_stop(p);
}

/* Reads until EOF (or timeout_ms); returns the bytes (malloc'ed, grown as
 * needed from `hint` bytes), *len their count. */
HT_FN char *ht_read_to_eof(int fd, size_t hint, size_t *len, int timeout_ms)
{
    size_t cap = hint > 65536 ? hint : 65536;
    char *buf = malloc(cap);
    cr_assert(buf, "out of memory");
    *len = 0;
    long long end = kh_now_ms() + timeout_ms;
    for (;;) {
        long long left = end - kh_now_ms();
        if (left <= 0)
            break;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int r = poll(&pfd, 1, (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        if (cap - *len < 65536) {
            cap *= 2;
            buf = realloc(buf, cap);
            cr_assert(buf, "out of memory");
        }
        ssize_t n = recv(fd, buf + *len, cap - *len, MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0)
            break;
        *len += (size_t)n;
    }
    return buf;
}

/* Bytes the keel process has read with read(2)-like calls (pread and
 * sendfile included: the kernel counts both), from /proc/PID/io (Linux);
 * -1 where there is none. */
HT_FN long long ht_bytes_read(kh_proc *p)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/io", (int)p->pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    long long n = -1;
    while (fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "rchar: %lld", &n) == 1)
            break;
    fclose(f);
    return n;
}

/* The rot13 transport's encoding (tests/modules/mod_rot13.c), in place:
 * its own inverse. */
HT_FN void ht_rot13(char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if ((c >= 'a' && c <= 'm') || (c >= 'A' && c <= 'M'))
            p[i] = (char)(c + 13);
        else if ((c >= 'n' && c <= 'z') || (c >= 'N' && c <= 'Z'))
            p[i] = (char)(c - 13);
    }
}

#endif
