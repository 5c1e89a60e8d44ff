/* fasthead.c — the plainest upstream response read without llhttp
 * (fasthead.h). Strict on purpose: the upstream may be hostile, so every
 * shape llhttp treats specially — a 1xx, 204 or 304, Transfer-Encoding,
 * an Upgrade, a Connection or Proxy-Connection other than a lone
 * "keep-alive" or "close", a second Content-Length, a body that is not
 * exactly the rest of the read, bytes after it, obs-text, a bare LF,
 * obsolete line folding, HTTP/1.0 — makes it say 0, and llhttp reads the
 * same bytes from their start. What it accepts, llhttp reads the same:
 * tests/fuzz/fuzz_proxy_head.c compares every accepted input.
 */
#include "fasthead.h"

#include <keel/header_tokens.h>
#include <keel/util.h>

#include <stdint.h>
#include <string.h>

static int digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

/* Which byte of a little-endian word's marks (0x80 in each marked byte)
 * comes first. */
static size_t first_marked(uint64_t marks)
{
#if defined(__GNUC__) || defined(__clang__)
    return (size_t)__builtin_ctzll(marks) / 8;
#else
    size_t i = 0;
    while (!(marks & 0x80u)) {
        marks >>= 8;
        i++;
    }
    return i;
#endif
}

/* The offset of the first byte from at that a value may not hold (not
 * VCHAR, SP or HTAB: the CR ending the line, if the value is one this
 * reader takes), or len. Eight bytes at a time: a word's first byte
 * outside 0x20..0x7e is found exactly (a borrow only marks bytes above a
 * marked one), and an HTAB there is stepped over. */
static size_t value_end(const unsigned char *p, size_t len, size_t at)
{
    const uint64_t lo = 0x0101010101010101u, hi = 0x8080808080808080u;
    for (;;) {
        if (at + 8 <= len) {
            uint64_t w;
            memcpy(&w, p + at, 8);
            uint64_t del = w ^ (0x7f * lo);
            uint64_t odd = (w | ((w - 0x20 * lo) & ~w) | ((del - lo) & ~del)) & hi;
            if (odd == 0) {
                at += 8;
                continue;
            }
            at += first_marked(odd);
        } else {
            while (at < len && p[at] >= 0x20 && p[at] < 0x7f)
                at++;
        }
        if (at < len && p[at] == '\t') {
            at++;
            continue;
        }
        return at;
    }
}

/* CRLF at p[at], within len */
static int crlf_at(const unsigned char *p, size_t len, size_t at)
{
    return at + 1 < len && p[at] == '\r' && p[at + 1] == '\n';
}

int px_fast_head_scan(const char *data, size_t len, fcgi_field *fields, size_t cap,
                      px_fast_head *out)
{
    const unsigned char *p = (const unsigned char *)data;
    /* "HTTP/1.1 " status SP reason CRLF (RFC 9112 4), a reason of
     * printable ASCII (it may be empty) */
    if (len < 17 || len > UINT32_MAX || memcmp(data, "HTTP/1.1 ", 9) != 0)
        return 0;
    if (p[9] < '2' || p[9] > '5' || !digit(p[10]) || !digit(p[11]) || p[12] != ' ')
        return 0;
    int status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
    if (status == 204 || status == 304)
        return 0; /* bodiless whatever the fields say: llhttp's */
    size_t at = 13;
    while (at < len && p[at] >= 0x20 && p[at] < 0x7f)
        at++;
    if (!crlf_at(p, len, at))
        return 0;
    at += 2;
    size_t n = 0;
    int have_length = 0, close = 0;
    uint64_t length = 0;
    for (;;) {
        if (crlf_at(p, len, at)) {
            at += 2; /* the empty line */
            break;
        }
        /* The name: up to the colon, a token (a well-known name is one,
         * as its token says; any other is looked at byte by byte). */
        size_t name = at;
        const unsigned char *colon = memchr(p + at, ':', len - at);
        if (colon == NULL || colon == p + at)
            return 0;
        size_t name_len = (size_t)(colon - p) - name;
        unsigned token = keel_header_token(data + name, name_len);
        for (size_t i = 0; token == 0 && i < name_len; i++)
            if (!keel_token_char(p[name + i]))
                return 0;
        at = name + name_len + 1;
        /* llhttp's value: leading blanks skipped, trailing ones kept, up
         * to the CRLF */
        while (at < len && (p[at] == ' ' || p[at] == '\t'))
            at++;
        size_t value = at;
        at = value_end(p, len, at);
        size_t value_len = at - value;
        if (!crlf_at(p, len, at))
            return 0;
        at += 2;
        switch (token) {
        case KEEL_HDR_CONTENT_LENGTH:
            if (have_length || value_len == 0 || value_len > 15)
                return 0;
            for (size_t i = 0; i < value_len; i++) {
                if (!digit(p[value + i]))
                    return 0;
                length = length * 10 + (uint64_t)(p[value + i] - '0');
            }
            have_length = 1;
            break;
        case KEEL_HDR_CONNECTION:
            /* "keep-alive" (any case) is the Keep-Alive field's name */
            if (value_len == 5 && fcgi_iequal(data + value, value_len, "close"))
                close = 1;
            else if (keel_header_token(data + value, value_len) != KEEL_HDR_KEEP_ALIVE)
                return 0;
            break;
        case KEEL_HDR_TRANSFER_ENCODING:
        case KEEL_HDR_PROXY_CONNECTION:
        case KEEL_HDR_UPGRADE:
            return 0;
        default:
            break;
        }
        if (n == cap)
            return 0;
        fields[n++] = (fcgi_field){(uint32_t)name, (uint32_t)name_len, (uint32_t)value,
                                   (uint32_t)value_len, token};
    }
    /* the body is the rest of this read, exactly */
    if (!have_length || length != len - at)
        return 0;
    out->status = status;
    out->keep_alive = !close;
    out->head_len = at;
    out->nfields = n;
    return 1;
}
