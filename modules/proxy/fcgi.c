/* fcgi.c — FastCGI records and the CGI response head as pure functions
 * (fcgi.h): no allocation, no keel calls, every length checked against
 * what was given, so that a hostile application's bytes can do no more
 * than make the exchange a 502. tests/fuzz/fuzz_fcgi.c drives it.
 */
#include "fcgi.h"

#include <keel/header_tokens.h>
#include <keel/util.h>

#include <string.h>

void fcgi_header(unsigned char out[FCGI_HEADER_LEN], int type, size_t content_len)
{
    out[0] = 1; /* FCGI_VERSION_1 */
    out[1] = (unsigned char)type;
    out[2] = 0;
    out[3] = FCGI_ID;
    out[4] = (unsigned char)(content_len >> 8);
    out[5] = (unsigned char)content_len;
    out[6] = 0; /* no padding: alignment is a SHOULD for speed (3.3), not for meaning */
    out[7] = 0;
}

void fcgi_begin_request(unsigned char out[16], int keep)
{
    fcgi_header(out, FCGI_BEGIN_REQUEST, 8);
    memset(out + 8, 0, 8);
    out[9] = FCGI_RESPONDER;
    out[10] = keep ? FCGI_KEEP_CONN : 0;
}

static size_t length_size(size_t n)
{
    return n < 128 ? 1 : n <= 0x7fffffffu ? 4 : 0;
}

size_t fcgi_pair_size(size_t name_len, size_t value_len)
{
    size_t a = length_size(name_len), b = length_size(value_len);
    return a && b ? a + b + name_len + value_len : 0;
}

static unsigned char *put_length(unsigned char *p, size_t n)
{
    if (n < 128) {
        *p++ = (unsigned char)n;
        return p;
    }
    *p++ = (unsigned char)((n >> 24) | 0x80);
    *p++ = (unsigned char)(n >> 16);
    *p++ = (unsigned char)(n >> 8);
    *p++ = (unsigned char)n;
    return p;
}

size_t fcgi_pair_head(unsigned char *out, size_t name_len, size_t value_len)
{
    unsigned char *p = put_length(out, name_len);
    return (size_t)(put_length(p, value_len) - out);
}

size_t fcgi_pair_put(unsigned char *out, const char *name, size_t name_len, const char *value,
                     size_t value_len)
{
    if (fcgi_pair_size(name_len, value_len) == 0)
        return 0;
    unsigned char *p = out + fcgi_pair_head(out, name_len, value_len);
    if (name_len)
        memcpy(p, name, name_len);
    p += name_len;
    if (value_len)
        memcpy(p, value, value_len);
    return (size_t)(p + value_len - out);
}

/* ---- records ------------------------------------------------------------- */

int fcgi_read(fcgi_reader *r, const char *data, size_t len, size_t *used, const char **span,
              size_t *span_len)
{
    size_t at = 0;
    *span = NULL;
    *span_len = 0;
    while (at < len) {
        if (r->ended)
            goto error; /* nothing follows the end of the only request */
        if (r->type == 0) {
            size_t take = FCGI_HEADER_LEN - r->head_len;
            if (take > len - at)
                take = len - at;
            memcpy(r->head + r->head_len, data + at, take);
            r->head_len += take;
            at += take;
            if (r->head_len < FCGI_HEADER_LEN)
                break;
            r->head_len = 0;
            const unsigned char *h = r->head;
            int type = h[1];
            unsigned id = (unsigned)h[2] << 8 | h[3];
            /* A Responder answers with STDOUT, STDERR and END_REQUEST for
             * its request (FastCGI 6.2); management records (id 0) come
             * only in answer to management requests, which keel never
             * sends. */
            if (h[0] != 1 || id != FCGI_ID ||
                (type != FCGI_STDOUT && type != FCGI_STDERR && type != FCGI_END_REQUEST))
                goto error;
            r->type = type;
            r->content_left = (size_t)h[4] << 8 | h[5];
            r->padding_left = h[6];
            r->end_len = 0;
            if (type == FCGI_END_REQUEST && r->content_left != 8)
                goto error; /* FCGI_EndRequestBody is 8 bytes (5.5) */
            if (r->content_left == 0 && r->padding_left == 0 && type != FCGI_END_REQUEST) {
                /* an empty STDOUT or STDERR ends that stream: nothing to hand over */
                r->type = 0;
            }
            continue;
        }
        if (r->content_left > 0) {
            size_t take = r->content_left < len - at ? r->content_left : len - at;
            r->content_left -= take;
            if (r->type == FCGI_END_REQUEST) {
                memcpy(r->end + r->end_len, data + at, take);
                r->end_len += take;
                at += take;
                if (r->content_left > 0)
                    continue; /* at == len: the rest comes with the next bytes */
            } else {
                int type = r->type;
                *span = data + at;
                *span_len = take;
                at += take;
                if (r->content_left == 0 && r->padding_left == 0)
                    r->type = 0;
                *used = at;
                return type == FCGI_STDERR ? FCGI_EV_STDERR : FCGI_EV_STDOUT;
            }
        }
        if (r->padding_left > 0) {
            size_t take = r->padding_left < len - at ? r->padding_left : len - at;
            r->padding_left -= take;
            at += take;
        }
        if (r->content_left == 0 && r->padding_left == 0) {
            int type = r->type;
            r->type = 0;
            if (type == FCGI_END_REQUEST) {
                const unsigned char *b = r->end;
                r->app_status =
                    (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
                r->protocol_status = b[4];
                r->ended = 1;
                *used = at;
                return FCGI_EV_END;
            }
        }
    }
    *used = at;
    return FCGI_EV_MORE;
error:
    *used = at;
    return FCGI_EV_ERROR;
}

/* ---- the CGI response head --------------------------------------------------- */

size_t fcgi_head_end(const char *buf, size_t len, size_t from)
{
    /* An empty line: LF LF or LF CR LF (a script may end lines either way,
     * RFC 3875 6.3: "NL"; nginx accepts both). The head may also be just
     * the empty line. */
    if (len >= 1 && buf[0] == '\n')
        return 1;
    if (len >= 2 && buf[0] == '\r' && buf[1] == '\n')
        return 2;
    /* an end that a call with fewer bytes did not see has its LF at
     * from - 2 or later */
    for (size_t i = from > 2 ? from - 2 : 0; i + 1 < len; i++) {
        if (buf[i] != '\n')
            continue;
        if (buf[i + 1] == '\n')
            return i + 2;
        if (buf[i + 1] == '\r' && i + 2 < len && buf[i + 2] == '\n')
            return i + 3;
    }
    return 0;
}

int fcgi_head_parse(const char *buf, size_t len, fcgi_field *fields, size_t cap, size_t *nfields,
                    int *status)
{
    size_t n = 0, at = 0;
    int code = 0, location = 0;
    *nfields = 0;
    *status = 0;
    if (len > 0xffffffffu)
        return -1;
    while (at < len) {
        const char *nl = memchr(buf + at, '\n', len - at);
        if (nl == NULL)
            return -1; /* fcgi_head_end did not say this */
        size_t end = (size_t)(nl - buf), line_end = end;
        if (line_end > at && buf[line_end - 1] == '\r')
            line_end--;
        if (line_end == at)
            break; /* the empty line */
        size_t colon = at;
        while (colon < line_end && keel_token_char((unsigned char)buf[colon]))
            colon++;
        /* no folding (RFC 9112 5.2: obsolete), no space before the colon */
        if (colon == at || colon == line_end || buf[colon] != ':')
            return -1;
        size_t v = colon + 1, ve = line_end;
        while (v < ve && (buf[v] == ' ' || buf[v] == '\t'))
            v++;
        while (ve > v && (buf[ve - 1] == ' ' || buf[ve - 1] == '\t'))
            ve--;
        for (size_t i = v; i < ve; i++) {
            unsigned char c = (unsigned char)buf[i];
            if ((c < 0x20 && c != '\t') || c == 0x7f)
                return -1; /* RFC 9110 5.5: no CR, LF, NUL or other controls */
        }
        const char *name = buf + at;
        size_t name_len = colon - at;
        if (fcgi_iequal(name, name_len, "status")) {
            /* "Status: 404 Not Found" (RFC 3875 6.3.3) */
            if (code != 0 || ve - v < 3)
                return -1;
            const char *s = buf + v;
            if (s[0] < '2' || s[0] > '5' || s[1] < '0' || s[1] > '9' || s[2] < '0' || s[2] > '9' ||
                (ve - v > 3 && s[3] != ' ' && s[3] != '\t'))
                return -1;
            code = (s[0] - '0') * 100 + (s[1] - '0') * 10 + (s[2] - '0');
        } else {
            unsigned token = keel_header_token(name, name_len);
            if (token == KEEL_HDR_LOCATION)
                location = 1;
            if (n < cap)
                fields[n] = (fcgi_field){(uint32_t)at, (uint32_t)name_len, (uint32_t)v,
                                         (uint32_t)(ve - v), token};
            n++;
        }
        at = end + 1;
    }
    *nfields = n;
    *status = code ? code : location ? 302 : 200;
    return 0;
}
