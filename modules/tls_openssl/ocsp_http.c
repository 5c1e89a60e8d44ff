/* ocsp_http.c — an OCSP responder's HTTP/1.x answer (ocsp_http.h): the
 * status line, the head (Content-Length, Transfer-Encoding) and where the
 * body lies, every size bounded. The body itself is DER that OpenSSL
 * parses (ocsp.c). */
#include "ocsp_http.h"

#include <string.h>

#include <keel/util.h>

static int bad(ko_ocsp_http *out, const char *why)
{
    out->why = why;
    return KO_OCSP_HTTP_BAD;
}

/* The end of the head (after its empty line), or 0 if not there yet.
 * Lines end in CRLF or, leniently, a bare LF (RFC 9112 2.2). */
static size_t head_end(const char *buf, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (buf[i] != '\n')
            continue;
        if (i + 1 < len && buf[i + 1] == '\n')
            return i + 2;
        if (i + 2 < len && buf[i + 1] == '\r' && buf[i + 2] == '\n')
            return i + 3;
    }
    return 0;
}

/* Whether the head line `line` (n bytes) is a field called `name` (lower
 * case): its name, then the colon. */
static int name_is(const char *line, size_t n, const char *name)
{
    size_t k = strlen(name);
    return n > k && line[k] == ':' && keel_ascii_iequal_lc(line, k, name, k);
}

/* Content-Length's value: digits only, optional spaces around (RFC
 * 9110 8.6); -1 if malformed or above the body bound. */
static long content_length(const char *v, size_t n)
{
    size_t i = 0;
    while (i < n && (v[i] == ' ' || v[i] == '\t'))
        i++;
    while (n > i && (v[n - 1] == ' ' || v[n - 1] == '\t' || v[n - 1] == '\r'))
        n--;
    if (i == n)
        return -1;
    long value = 0;
    for (; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return -1;
        value = value * 10 + (v[i] - '0');
        if (value > KO_OCSP_HTTP_BODY_MAX)
            return -1;
    }
    return value;
}

int ko_ocsp_http_parse(const char *buf, size_t len, int eof, ko_ocsp_http *out)
{
    memset(out, 0, sizeof *out);
    size_t scan = len < KO_OCSP_HTTP_HEAD_MAX ? len : KO_OCSP_HTTP_HEAD_MAX;
    size_t end = head_end(buf, scan);
    if (end == 0) {
        if (len >= KO_OCSP_HTTP_HEAD_MAX)
            return bad(out, "response head too long");
        return eof ? bad(out, "connection closed before the response head") : KO_OCSP_HTTP_MORE;
    }
    /* "HTTP/1.x SSS" then a space or the line's end (RFC 9112 4). */
    if (end < 13 || memcmp(buf, "HTTP/1.", 7) != 0 || buf[7] < '0' || buf[7] > '9' ||
        buf[8] != ' ' || buf[9] < '1' || buf[9] > '9' || buf[10] < '0' || buf[10] > '9' ||
        buf[11] < '0' || buf[11] > '9' || (buf[12] != ' ' && buf[12] != '\r' && buf[12] != '\n'))
        return bad(out, "not an HTTP/1.x status line");
    out->status = (buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] - '0');

    long length = -1;
    const char *line = memchr(buf, '\n', end);
    while (line != NULL && (size_t)(line + 1 - buf) < end) {
        line++;
        const char *nl = memchr(line, '\n', end - (size_t)(line - buf));
        size_t n = (size_t)(nl - line); /* nl exists: the head ends in one */
        if (name_is(line, n, "transfer-encoding"))
            return bad(out, "Transfer-Encoding in an answer to HTTP/1.0");
        if (name_is(line, n, "content-length")) {
            long v = content_length(line + 15, n - 15);
            if (v < 0)
                return bad(out, "bad or too large Content-Length");
            if (length >= 0 && v != length)
                return bad(out, "conflicting Content-Length"); /* RFC 9112 6.3 */
            length = v;
        }
        line = nl;
    }
    out->body = end;
    size_t have = len - end;
    if (length >= 0) {
        if (have >= (size_t)length) {
            out->body_len = (size_t)length; /* bytes after it are ignored */
            return KO_OCSP_HTTP_DONE;
        }
        return eof ? bad(out, "response body truncated") : KO_OCSP_HTTP_MORE;
    }
    if (have > KO_OCSP_HTTP_BODY_MAX)
        return bad(out, "response body too large");
    if (!eof)
        return KO_OCSP_HTTP_MORE;
    out->body_len = have;
    return KO_OCSP_HTTP_DONE;
}
