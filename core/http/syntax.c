/* What each part of a request may hold (RFC 9110, 9112, 3986), checked the
 * same way whichever protocol brought the request (keel_http_valid): a
 * gateway from one protocol to another, and the core behind both, must see
 * a request as every other hop does. http1, h2 and the proxy's gateway to
 * HTTP/1.1 all ask here. Any thread, no allocation. */
#include <stdint.h>
#include <string.h>

#include <keel/http.h>

#include "http/http.h"

/* Character classes, one table lookup a byte:
 *   CL_TCHAR   RFC 9110 5.6.2 tchar: ALPHA DIGIT and !#$%&'*+-.^_`|~
 *   CL_HOST    RFC 3986 2.3 unreserved and 2.2 sub-delims: a reg-name or an
 *           IPv4 address ('%' starts a pct-encoding, checked apart)
 *   CL_TARGET  what a request-target may hold: VCHAR but '#' (RFC 3986 2
 *           allows no CTL, SP, DEL or non-ASCII; a fragment is never sent,
 *           RFC 9110 4.2.4: "/admin#/../x" must not become "/x")
 *   CL_SCHEME  RFC 3986 3.1 after its first letter: ALPHA DIGIT "+" "-" "."
 *   CL_DIGIT   a port's */
enum { CL_TCHAR = 1, CL_HOST = 2, CL_TARGET = 4, CL_SCHEME = 8, CL_DIGIT = 16 };
static const uint8_t char_class[256] = {
    ['!'] = CL_TCHAR | CL_HOST | CL_TARGET,
    ['"'] = CL_TARGET,
    ['#'] = CL_TCHAR,
    ['$'] = CL_TCHAR | CL_HOST | CL_TARGET,
    ['%'] = CL_TCHAR | CL_TARGET,
    ['&'] = CL_TCHAR | CL_HOST | CL_TARGET,
    ['\''] = CL_TCHAR | CL_HOST | CL_TARGET,
    ['('] = CL_HOST | CL_TARGET,
    [')'] = CL_HOST | CL_TARGET,
    ['*'] = CL_TCHAR | CL_HOST | CL_TARGET,
    ['+'] = CL_TCHAR | CL_HOST | CL_TARGET | CL_SCHEME,
    [','] = CL_HOST | CL_TARGET,
    ['-'] = CL_TCHAR | CL_HOST | CL_TARGET | CL_SCHEME,
    ['.'] = CL_TCHAR | CL_HOST | CL_TARGET | CL_SCHEME,
    ['/'] = CL_TARGET,
    ['0'] = CL_TCHAR | CL_HOST | CL_TARGET | CL_SCHEME | CL_DIGIT,
    ['1'] = CL_TCHAR | CL_HOST | CL_TARGET | CL_SCHEME | CL_DIGIT,
    ['2'] = CL_TCHAR | CL_HOST | CL_TARGET | CL_SCHEME | CL_DIGIT,
    ['3'] = CL_TCHAR | CL_HOST | CL_TARGET | CL_SCHEME | CL_DIGIT,
    ['4'] = CL_TCHAR | CL_HOST | CL_TARGET | CL_SCHEME | CL_DIGIT,
    ['5'] = CL_TCHAR | CL_HOST | CL_TARGET | CL_SCHEME | CL_DIGIT,
    ['6'] = CL_TCHAR | CL_HOST | CL_TARGET | CL_SCHEME | CL_DIGIT,
    ['7'] = CL_TCHAR | CL_HOST | CL_TARGET | CL_SCHEME | CL_DIGIT,
    ['8'] = CL_TCHAR | CL_HOST | CL_TARGET | CL_SCHEME | CL_DIGIT,
    ['9'] = CL_TCHAR | CL_HOST | CL_TARGET | CL_SCHEME | CL_DIGIT,
    [':'] = CL_TARGET,
    [';'] = CL_HOST | CL_TARGET,
    ['<'] = CL_TARGET,
    ['='] = CL_HOST | CL_TARGET,
    ['>'] = CL_TARGET,
    ['?'] = CL_TARGET,
    ['@'] = CL_TARGET,
    ['['] = CL_TARGET,
    ['\\'] = CL_TARGET,
    [']'] = CL_TARGET,
    ['^'] = CL_TCHAR | CL_TARGET,
    ['_'] = CL_TCHAR | CL_HOST | CL_TARGET,
    ['`'] = CL_TCHAR | CL_TARGET,
    ['{'] = CL_TARGET,
    ['|'] = CL_TCHAR | CL_TARGET,
    ['}'] = CL_TARGET,
    ['~'] = CL_TCHAR | CL_HOST | CL_TARGET,
#define LETTER(c) [c] = CL_TCHAR | CL_HOST | CL_TARGET | CL_SCHEME
    LETTER('A'),
    LETTER('B'),
    LETTER('C'),
    LETTER('D'),
    LETTER('E'),
    LETTER('F'),
    LETTER('G'),
    LETTER('H'),
    LETTER('I'),
    LETTER('J'),
    LETTER('K'),
    LETTER('L'),
    LETTER('M'),
    LETTER('N'),
    LETTER('O'),
    LETTER('P'),
    LETTER('Q'),
    LETTER('R'),
    LETTER('S'),
    LETTER('T'),
    LETTER('U'),
    LETTER('V'),
    LETTER('W'),
    LETTER('X'),
    LETTER('Y'),
    LETTER('Z'),
    LETTER('a'),
    LETTER('b'),
    LETTER('c'),
    LETTER('d'),
    LETTER('e'),
    LETTER('f'),
    LETTER('g'),
    LETTER('h'),
    LETTER('i'),
    LETTER('j'),
    LETTER('k'),
    LETTER('l'),
    LETTER('m'),
    LETTER('n'),
    LETTER('o'),
    LETTER('p'),
    LETTER('q'),
    LETTER('r'),
    LETTER('s'),
    LETTER('t'),
    LETTER('u'),
    LETTER('v'),
    LETTER('w'),
    LETTER('x'),
    LETTER('y'),
    LETTER('z'),
#undef LETTER
};

/* Every byte of s in class cls, and at least one. */
static int all_in(const unsigned char *s, size_t n, unsigned cls)
{
    for (size_t i = 0; i < n; i++)
        if (!(char_class[s[i]] & cls))
            return 0;
    return n > 0;
}

static int is_hex(unsigned char c)
{
    return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f');
}

size_t kl_http_authority_host(const char *p, size_t n)
{
    const unsigned char *s = (const unsigned char *)p;
    size_t i = 0;
    if (n > 0 && s[0] == '[') {
        /* An IP-literal: the address's own grammar is the resolver's. */
        const unsigned char *close = memchr(s, ']', n);
        if (close == NULL || close - s < 3)
            return 0;
        for (i = 1; s + i < close; i++)
            if (!(char_class[s[i]] & CL_HOST) && s[i] != ':')
                return 0;
        i++;
    } else {
        /* A table lookup a byte, the rare pct-encoding apart: this runs
         * for every request. */
        for (;;) {
            while (i < n && (char_class[s[i]] & CL_HOST))
                i++;
            if (i + 2 < n && s[i] == '%' && is_hex(s[i + 1]) && is_hex(s[i + 2])) {
                i += 3;
                continue;
            }
            break;
        }
    }
    size_t host = i;
    if (host == 0)
        return 0; /* ":80" names no host (RFC 9110 4.2.1: not empty) */
    if (i < n) {
        if (s[i++] != ':')
            return 0; /* '@' (userinfo), '/', a space... */
        while (i < n && (char_class[s[i]] & CL_DIGIT))
            i++;
        if (i < n)
            return 0;
    }
    return host;
}

/* RFC 9110 5.5: VCHAR, obs-text, SP and HTAB; neither SP nor HTAB first or
 * last. CR, LF and NUL are "invalid and dangerous"; the other controls are
 * invalid too, and a gateway to HTTP/1.1 could not carry them. */
static int field_value(const unsigned char *s, size_t n)
{
    if (n > 0 && (s[0] == ' ' || s[0] == '\t' || s[n - 1] == ' ' || s[n - 1] == '\t'))
        return 0;
    return kl_field_value_clean((const char *)s, n);
}

int keel_http_valid(int syntax, const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    if (s == NULL)
        return syntax == KEEL_HTTP_FIELD_VALUE && len == 0;
    switch (syntax) {
    case KEEL_HTTP_TOKEN:
        return all_in(p, len, CL_TCHAR);
    case KEEL_HTTP_FIELD_VALUE:
        return field_value(p, len);
    case KEEL_HTTP_SCHEME:
        return len > 0 && ((p[0] | 0x20) >= 'a' && (p[0] | 0x20) <= 'z') &&
               all_in(p, len, CL_SCHEME);
    case KEEL_HTTP_AUTHORITY:
        return kl_http_authority_host(s, len) > 0;
    case KEEL_HTTP_TARGET:
        return all_in(p, len, CL_TARGET);
    case KEEL_HTTP_ORIGIN_FORM:
        return len > 0 && p[0] == '/' && all_in(p, len, CL_TARGET);
    default:
        return 0;
    }
}

int kl_request_check_head(const keel_request *req)
{
    const keel_http_head *h = &req->head;
    if (!keel_http_valid(KEEL_HTTP_TOKEN, h->method.ptr, h->method.len) ||
        !keel_http_valid(KEEL_HTTP_TARGET, h->target.ptr, h->target.len))
        return 400;
    for (size_t i = 0; i < h->nheaders; i++) {
        keel_str n = h->headers[i].name, v = h->headers[i].value;
        if (!keel_http_valid(KEEL_HTTP_TOKEN, n.ptr, n.len) ||
            !keel_http_valid(KEEL_HTTP_FIELD_VALUE, v.ptr, v.len))
            return 400;
        if (kl_request_field_token(req, i) == KEEL_HDR_HOST && v.len > 0 &&
            !keel_http_valid(KEEL_HTTP_AUTHORITY, v.ptr, v.len))
            return 400;
    }
    return 0;
}
