/* serialize.c — response heads and body framing as bytes.
 *
 * A head is written straight into the connection's output buffer: the
 * status line from a precomputed table, the handler's fields, then Date,
 * Server, the framing field and Connection. Its size is computed first so
 * the buffer is reserved once.
 */
#include "h1.h"

#include <stdio.h>
#include <string.h>

/* clang-format off */
#define H1_STATUS_LINES(X)                          \
    X(100, "Continue")                              \
    X(101, "Switching Protocols")                   \
    X(103, "Early Hints")                           \
    X(200, "OK")                                    \
    X(201, "Created")                               \
    X(202, "Accepted")                              \
    X(203, "Non-Authoritative Information")         \
    X(204, "No Content")                            \
    X(205, "Reset Content")                         \
    X(206, "Partial Content")                       \
    X(300, "Multiple Choices")                      \
    X(301, "Moved Permanently")                     \
    X(302, "Found")                                 \
    X(303, "See Other")                             \
    X(304, "Not Modified")                          \
    X(307, "Temporary Redirect")                    \
    X(308, "Permanent Redirect")                    \
    X(400, "Bad Request")                           \
    X(401, "Unauthorized")                          \
    X(402, "Payment Required")                      \
    X(403, "Forbidden")                             \
    X(404, "Not Found")                             \
    X(405, "Method Not Allowed")                    \
    X(406, "Not Acceptable")                        \
    X(407, "Proxy Authentication Required")         \
    X(408, "Request Timeout")                       \
    X(409, "Conflict")                              \
    X(410, "Gone")                                  \
    X(411, "Length Required")                       \
    X(412, "Precondition Failed")                   \
    X(413, "Content Too Large")                     \
    X(414, "URI Too Long")                          \
    X(415, "Unsupported Media Type")                \
    X(416, "Range Not Satisfiable")                 \
    X(417, "Expectation Failed")                    \
    X(421, "Misdirected Request")                   \
    X(422, "Unprocessable Content")                 \
    X(425, "Too Early")                             \
    X(426, "Upgrade Required")                      \
    X(428, "Precondition Required")                 \
    X(429, "Too Many Requests")                     \
    X(431, "Request Header Fields Too Large")       \
    X(451, "Unavailable For Legal Reasons")         \
    X(500, "Internal Server Error")                 \
    X(501, "Not Implemented")                       \
    X(502, "Bad Gateway")                           \
    X(503, "Service Unavailable")                   \
    X(504, "Gateway Timeout")                       \
    X(505, "HTTP Version Not Supported")
/* clang-format on */

const char *h1_status_line(int status, size_t *len)
{
    switch (status) {
#define X(code, reason)                                                                            \
    case code:                                                                                     \
        *len = sizeof("HTTP/1.1 " #code " " reason "\r\n") - 1;                                    \
        return "HTTP/1.1 " #code " " reason "\r\n";
        H1_STATUS_LINES(X)
#undef X
    default:
        return NULL;
    }
}

const char *h1_reason(int status)
{
    switch (status) {
#define X(code, reason)                                                                            \
    case code:                                                                                     \
        return reason;
        H1_STATUS_LINES(X)
#undef X
    default:
        return NULL;
    }
}

size_t h1_u64_dec(char *p, uint64_t v)
{
    char tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    for (size_t i = 0; i < n; i++)
        p[i] = tmp[n - 1 - i];
    return n;
}

size_t h1_u64_hex(char *p, uint64_t v)
{
    static const char digits[] = "0123456789abcdef";
    char tmp[16];
    size_t n = 0;
    do {
        tmp[n++] = digits[v & 15];
        v >>= 4;
    } while (v != 0);
    for (size_t i = 0; i < n; i++)
        p[i] = tmp[n - 1 - i];
    return n;
}

static int lower(int ch)
{
    return ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch;
}

static int name_is(keel_str name, const char *lit, size_t n)
{
    if (name.len != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (lower((unsigned char)name.ptr[i]) != lit[i])
            return 0;
    return 1;
}

/* Fields the module writes itself; a handler's copy of a framing field is
 * dropped (the core strips them already; this is the last line of defence
 * against a body framed twice). */
enum { F_KEEP = 0, F_SKIP, F_DATE, F_SERVER, F_CONNECTION, F_TRAILER };

static int classify(keel_str name)
{
    switch (name.len) {
    case 4:
        return name_is(name, "date", 4) ? F_DATE : F_KEEP;
    case 6:
        return name_is(name, "server", 6) ? F_SERVER : F_KEEP;
    case 7:
        return name_is(name, "trailer", 7) ? F_TRAILER : F_KEEP;
    case 10:
        return name_is(name, "connection", 10) ? F_CONNECTION : F_KEEP;
    case 14:
        return name_is(name, "content-length", 14) ? F_SKIP : F_KEEP;
    case 17:
        return name_is(name, "transfer-encoding", 17) ? F_SKIP : F_KEEP;
    default:
        return F_KEEP;
    }
}

/* Does a Connection value list "close"? */
static int lists_close(keel_str v)
{
    for (size_t i = 0; i + 5 <= v.len; i++)
        if (lower((unsigned char)v.ptr[i]) == 'c' && name_is((keel_str){v.ptr + i, 5}, "close", 5))
            return 1;
    return 0;
}

static char *put(char *p, const void *s, size_t n)
{
    memcpy(p, s, n);
    return p + n;
}

#define PUT_LIT(p, lit) put(p, lit, sizeof(lit) - 1)

int h1_head_serialize(h1_conn *c, int status, const keel_header *h, size_t n, int64_t length)
{
    int interim = status < 200;
    int close = c->close_after;
    int have_date = 0, have_server = 0, have_trailer = 0;

    /* The size first, so the buffer is reserved once. */
    size_t need = 64 /* status line of an unlisted code */ + 2;
    for (size_t i = 0; i < n; i++) {
        int kind = classify(h[i].name);
        if (kind == F_CONNECTION) {
            if (lists_close(h[i].value))
                close = 1;
            continue;
        }
        if (kind == F_SKIP)
            continue;
        have_date |= kind == F_DATE;
        have_server |= kind == F_SERVER;
        have_trailer |= kind == F_TRAILER;
        need += h[i].name.len + h[i].value.len + 4;
    }

    size_t date_len = 0;
    const char *date = have_date ? NULL : h1_date_line(c->w, &date_len);
    need += date_len + (have_server ? 0 : c->w->cfg->server_line_len);
    need +=
        sizeof("Content-Length: 18446744073709551615\r\n") + sizeof("Connection: keep-alive\r\n");

    /* Framing, RFC 9112 6.3. A response that announces trailer fields is
     * chunked even when its length is known: only chunked carries them. */
    int use_length = length >= 0 && !(have_trailer && !c->version10);
    int framing;
    if (interim || status == 204 || status == 304) {
        framing = H1_BODY_NONE; /* never a body, never a length (RFC 9110 8.6) */
    } else if (c->is_head) {
        framing = H1_BODY_NONE; /* same fields as GET, no body (RFC 9110 9.3.2) */
    } else if (use_length) {
        framing = H1_BODY_LENGTH;
    } else if (!c->version10) {
        framing = H1_BODY_CHUNKED;
    } else {
        /* An HTTP/1.0 client knows no chunked coding: the body ends when
         * the connection does. */
        framing = H1_BODY_EOF;
        close = 1;
    }

    char *start = h1_out_reserve(c, need);
    if (start == NULL)
        return KEEL_ERR_NOMEM;
    char *p = start;
    size_t sl_len;
    const char *sl = h1_status_line(status, &sl_len);
    if (sl != NULL) {
        p = put(p, sl, sl_len);
    } else {
        const char *reason = keel_http_reason(status);
        int w = snprintf(p, 64, "HTTP/1.1 %03d %.40s\r\n", status, reason ? reason : "");
        p += w > 0 && w < 64 ? w : 0;
    }
    for (size_t i = 0; i < n; i++) {
        int kind = classify(h[i].name);
        if (kind == F_SKIP || kind == F_CONNECTION)
            continue;
        p = put(p, h[i].name.ptr, h[i].name.len);
        p = PUT_LIT(p, ": ");
        p = put(p, h[i].value.ptr, h[i].value.len);
        p = PUT_LIT(p, "\r\n");
    }
    if (interim) {
        p = PUT_LIT(p, "\r\n");
        h1_out_commit(c, (size_t)(p - start));
        return KEEL_OK;
    }
    if (date != NULL)
        p = put(p, date, date_len);
    if (!have_server)
        p = put(p, c->w->cfg->server_line, c->w->cfg->server_line_len);
    if (framing == H1_BODY_LENGTH ||
        (framing == H1_BODY_NONE && c->is_head && use_length && status != 204 && status != 304)) {
        p = PUT_LIT(p, "Content-Length: ");
        p += h1_u64_dec(p, (uint64_t)length);
        p = PUT_LIT(p, "\r\n");
    } else if (framing == H1_BODY_CHUNKED) {
        p = PUT_LIT(p, "Transfer-Encoding: chunked\r\n");
    }
    if (close)
        p = PUT_LIT(p, "Connection: close\r\n");
    else if (c->version10)
        p = PUT_LIT(p, "Connection: keep-alive\r\n");
    p = PUT_LIT(p, "\r\n");
    h1_out_commit(c, (size_t)(p - start));

    c->framing = (uint8_t)framing;
    c->x->resp_left = framing == H1_BODY_LENGTH ? (uint64_t)length : 0;
    c->close_after = close ? 1u : 0u;
    c->head_sent = 1;
    return KEEL_OK;
}

size_t h1_trailers_size(const keel_header *t, size_t n)
{
    size_t need = 0;
    for (size_t i = 0; i < n; i++)
        need += t[i].name.len + t[i].value.len + 4;
    return need;
}

char *h1_trailers_put(char *p, const keel_header *t, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        /* Framing fields are never allowed in a trailer (RFC 9110 6.5.1). */
        if (classify(t[i].name) != F_KEEP)
            continue;
        p = put(p, t[i].name.ptr, t[i].name.len);
        p = PUT_LIT(p, ": ");
        p = put(p, t[i].value.ptr, t[i].value.len);
        p = PUT_LIT(p, "\r\n");
    }
    return p;
}
