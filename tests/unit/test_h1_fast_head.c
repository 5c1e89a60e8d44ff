/* http1's request-head fast path (modules/http1/fast_head.c) against
 * llhttp with the checks of parse.c and validate.c, the module's sources
 * compiled straight into this program: the heads it must take (and what it
 * fills in), the ones it must leave to llhttp (and what llhttp answers
 * them), and for every input tried the sameness h1_head_diff.h checks. */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "h1_head_diff.h"

static h1_config config(void)
{
    h1_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.max_request_line = 8192;
    cfg.max_header_bytes = 16384;
    cfg.max_headers = 100;
    cfg.max_body = 1 << 20;
    return cfg;
}

/* Runs n bytes (copied to a buffer of exactly n) through both parsers
 * under cfg; fails the test on any difference. */
static h1_head_diff diff_n(const h1_config *cfg, const char *s, size_t n)
{
    char *buf = malloc(n > 0 ? n : 1);
    cr_assert_not_null(buf);
    memcpy(buf, s, n);
    h1_head_diff d;
    h1_head_diff_run(cfg, buf, n, &d);
    free(buf);
    cr_assert_str_empty(d.why, "%s, for %zu bytes: '%.*s'", d.why, n, (int)n, s);
    return d;
}

static h1_head_diff diff(const char *s)
{
    h1_config cfg = config();
    return diff_n(&cfg, s, strlen(s));
}

static void taken(const char *s)
{
    h1_head_diff d = diff(s);
    cr_assert(d.fast, "the fast path should take '%s' (llhttp: %d)", s, d.slow);
}

/* Left to llhttp, which answers `status` (H1_READY: a valid head). */
static void left(const char *s, int status)
{
    h1_head_diff d = diff(s);
    cr_assert(!d.fast, "the fast path should leave '%s' to llhttp", s);
    cr_assert_eq(d.slow, status, "llhttp and the checks: %d, not %d, for '%s'", d.slow, status, s);
}

Test(h1_fast_head, common_heads, .timeout = 30)
{
    h1_head_diff d = diff("GET / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n");
    cr_assert(d.fast);
    cr_assert_eq(d.method, HTTP_GET);
    cr_assert_eq(d.version, 11);
    cr_assert(d.keep_alive);
    cr_assert_eq(d.host_index, 0);
    cr_assert_eq(d.head_len, 40);
    taken("HEAD /a/b?c=d&e HTTP/1.1\r\nHost: example.com\r\nUser-Agent: curl/8.0\r\n"
          "Accept: */*\r\n\r\n");
    taken("DELETE /x HTTP/1.1\r\nhost: a\r\n\r\n");
    taken("OPTIONS /x HTTP/1.1\r\nHOST: a\r\n\r\n");
    taken("PATCH /x HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n");
    taken("TRACE /x HTTP/1.1\r\nHost: a\r\n\r\n");
    taken("GET /~user/%41!$&'()*+,;=:@[]{}|\\^`\"<> HTTP/1.1\r\nHost: a\r\n\r\n");
    /* Pipelined bytes and a body after the head are not the head's. */
    d = diff("GET / HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\n");
    cr_assert(d.fast);
    cr_assert_eq(d.head_len, 27);
    d = diff("POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello");
    cr_assert(d.fast);
    cr_assert(d.has_body);
    cr_assert(d.cl_present);
    cr_assert_eq(d.content_length, 5);
    d = diff("PUT /p HTTP/1.1\r\nHost: a\r\nContent-Length: 000\r\n\r\n");
    cr_assert(d.fast);
    cr_assert(!d.has_body);
    cr_assert(d.cl_present);
}

Test(h1_fast_head, persistence, .timeout = 30)
{
    /* RFC 9112 9.3: HTTP/1.0 persists only with keep-alive; HTTP/1.1
     * unless close. */
    h1_head_diff d = diff("GET / HTTP/1.0\r\n\r\n");
    cr_assert(d.fast, "HTTP/1.0 needs no Host");
    cr_assert_eq(d.version, 10);
    cr_assert(!d.keep_alive);
    d = diff("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    cr_assert(d.fast);
    cr_assert(d.keep_alive);
    d = diff("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\nHost: a\r\n\r\n");
    cr_assert(d.fast);
    cr_assert(d.keep_alive);
    d = diff("GET / HTTP/1.0\r\nConnection: close\r\n\r\n");
    cr_assert(d.fast);
    cr_assert(!d.keep_alive);
    d = diff("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    cr_assert(d.fast);
    cr_assert(!d.keep_alive);
    d = diff("GET / HTTP/1.1\r\nHost: a\r\nConnection: CLOSE\r\nConnection: keep-alive\r\n\r\n");
    cr_assert(d.fast);
    cr_assert(!d.keep_alive);
    d = diff("GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\n\r\n");
    cr_assert(d.fast);
    cr_assert(d.keep_alive);
    /* Lists, upgrade and odd spellings are llhttp's. */
    left("GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, close\r\n\r\n", H1_READY);
    left("GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
         H1_READY);
    left("GET / HTTP/1.1\r\nHost: a\r\nConnection: close \r\n\r\n", H1_READY);
    left("GET / HTTP/1.1\r\nHost: a\r\nProxy-Connection: close\r\n\r\n", H1_READY);
}

Test(h1_fast_head, expectations, .timeout = 30)
{
    h1_head_diff d =
        diff("POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n");
    cr_assert(d.fast);
    cr_assert(d.expect_continue);
    d = diff("POST / HTTP/1.0\r\nExpect: 100-Continue\r\nContent-Length: 3\r\n\r\n");
    cr_assert(d.fast);
    cr_assert(!d.expect_continue, "HTTP/1.0's expectation is ignored (RFC 9110 10.1.1)");
    d = diff("GET / HTTP/1.1\r\nHost: a\r\nExpect:\r\n\r\n");
    cr_assert(d.fast);
    cr_assert(!d.expect_continue);
    left("GET / HTTP/1.1\r\nHost: a\r\nExpect: 200-ok\r\n\r\n", 417);
}

Test(h1_fast_head, left_to_llhttp, .timeout = 30)
{
    left("GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", 400);
    left("GET / HTTP/1.1\r\n\r\n", 400);
    left("GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400);
    left("GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", H1_READY);
    left("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n", 400);
    left("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: +1\r\n\r\n", 400);
    left("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1 \r\n\r\n", H1_READY);
    left("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999\r\n\r\n", 413);
    left("GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n", H1_READY);
    left("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n", H1_READY);
    left("CONNECT a:443 HTTP/1.1\r\nHost: a\r\n\r\n", 501);
    left("BREW / HTTP/1.1\r\nHost: a\r\n\r\n", 501);
    left("get / HTTP/1.1\r\nHost: a\r\n\r\n", 501);
    left("G@T / HTTP/1.1\r\nHost: a\r\n\r\n", 400);
    left("GET  / HTTP/1.1\r\nHost: a\r\n\r\n", 400);
    left("GET / HTTP/1.1 \r\nHost: a\r\n\r\n", 400);
    left("GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505);
    left("GET / HTTP/1.2\r\nHost: a\r\n\r\n", 505);
    left("GET /#f HTTP/1.1\r\nHost: a\r\n\r\n", 400);
    left("\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", H1_READY);
    left("GET / HTTP/1.1\nHost: a\r\n\r\n", 400);
    left("GET / HTTP/1.1\r\nHost: a\n\r\n", 400);
    left("GET / HTTP/1.1\r\nHost: a\r\n\n", 400);
    left("GET / HTTP/1.1\r\nHost: a\r\nX: a\r b\r\n\r\n", 400);
    left("GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n", 400);
    left("GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400);
    left("GET / HTTP/1.1\r\n: a\r\nHost: a\r\n\r\n", 400);
    left("GET / HTTP/1.1\r\nHost: a\r\nUpgrade: h2c\r\n\r\n", H1_READY);
    /* Not whole yet: llhttp's, which waits. */
    left("GET / HTTP/1.1\r\nHost: a\r\n", H1_NEED_MORE);
    left("GET / HTTP/1.1\r\nHost: a\r\n\r", H1_NEED_MORE);
    left("GET / HTT", H1_NEED_MORE);
    left("", H1_NEED_MORE);
}

Test(h1_fast_head, values, .timeout = 30)
{
    h1_head_diff d = diff("GET / HTTP/1.1\r\nHost: a\r\nX-Empty:\r\nX-Blank:  \t \r\n"
                          "X-Trail: v \t\r\nX-Inner: a \t b\r\nX-Obs: \x80\xff\r\n\r\n");
    cr_assert(d.fast);
    cr_assert_eq(d.nheaders, 6);
    /* Host may be empty (a target without authority, RFC 9110 7.2). */
    taken("GET / HTTP/1.1\r\nHost:\r\n\r\n");
    taken("GET / HTTP/1.1\r\nHost: \r\n\r\n");
    left("GET / HTTP/1.1\r\nHost: a\r\nX: a\x7f\r\n\r\n", 400);
    left("GET / HTTP/1.1\r\nHost: a\r\nX: a\x01\r\n\r\n", 400);
}

/* Every byte of a valid head replaced in turn by each byte that matters
 * to a line's structure or a class: whatever either parser makes of it,
 * the two agree (h1_head_diff), and some of the results are the fast
 * path's. */
Test(h1_fast_head, one_byte_changed, .timeout = 60)
{
    static const char base[] = "POST /p?q=1 HTTP/1.1\r\nHost: example.com:80\r\n"
                               "Content-Length: 12\r\nConnection: keep-alive\r\n"
                               "Expect: 100-continue\r\nX-Long-Name: some value here\r\n\r\n";
    static const unsigned char bytes[] = {'\r', '\n', '\t', ' ', 0,   0x7f, 0x80, 0xff, ':',
                                          '#',  '/',  'a',  '0', '?', ',',  '"',  '\\'};
    h1_config cfg = config();
    size_t n = sizeof base - 1, fast = 0;
    char buf[sizeof base];
    for (size_t i = 0; i < n; i++)
        for (size_t b = 0; b < sizeof bytes; b++) {
            memcpy(buf, base, n);
            buf[i] = (char)bytes[b];
            fast += (size_t)diff_n(&cfg, buf, n).fast;
            /* The same head cut short at that byte: never whole. */
            cr_assert(!diff_n(&cfg, buf, i).fast);
        }
    cr_assert_gt(fast, 100);
}

/* The head's parts moved across 16-byte blocks: the target, a value and
 * the line ends straddle every position of a block. */
Test(h1_fast_head, block_boundaries, .timeout = 60)
{
    h1_config cfg = config();
    char buf[512];
    for (int t = 0; t < 48; t++)
        for (int v = 0; v < 48; v++) {
            int len = snprintf(buf, sizeof buf, "GET /%.*s HTTP/1.1\r\nHost: h\r\nX: %.*s\r\n\r\n",
                               t, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", v,
                               "0123456789 0123456789\t0123456789 0123456789\t01234");
            h1_head_diff d = diff_n(&cfg, buf, (size_t)len);
            cr_assert(d.fast, "target %d, value %d", t, v);
            /* A bare CR, a bare LF, a NUL and DEL at the end of each. */
            static const char bad[] = {'\r', '\n', 0, 0x7f};
            for (size_t k = 0; k < sizeof bad; k++) {
                char copy[512];
                memcpy(copy, buf, (size_t)len);
                copy[5 + t - 1 + (t == 0)] = bad[k];
                cr_assert(!diff_n(&cfg, copy, (size_t)len).fast || bad[k] == 0x7f);
                memcpy(copy, buf, (size_t)len);
                copy[len - 5 - (v == 0 ? 0 : 1)] = bad[k];
                diff_n(&cfg, copy, (size_t)len);
            }
        }
}

Test(h1_fast_head, limits, .timeout = 30)
{
    static const char head[] = "GET /abc HTTP/1.1\r\nHost: a\r\nX-A: 1\r\nX-B: 2\r\n\r\n";
    size_t n = sizeof head - 1, line = 19;
    h1_config cfg = config();

    /* max_request_line: the line with its CRLF, at the limit and one over. */
    cfg.max_request_line = line;
    cr_assert(diff_n(&cfg, head, n).fast);
    cfg.max_request_line = line - 1;
    h1_head_diff d = diff_n(&cfg, head, n);
    cr_assert(!d.fast);
    cr_assert_eq(d.slow, 414);
    cfg = config();

    /* max_header_bytes: the whole head. */
    cfg.max_header_bytes = n;
    cr_assert(diff_n(&cfg, head, n).fast);
    cfg.max_header_bytes = n - 1;
    d = diff_n(&cfg, head, n);
    cr_assert(!d.fast);
    cr_assert_eq(d.slow, 431);
    cfg = config();

    /* max_headers. */
    cfg.max_headers = 3;
    cr_assert(diff_n(&cfg, head, n).fast);
    cfg.max_headers = 2;
    d = diff_n(&cfg, head, n);
    cr_assert(!d.fast);
    cr_assert_eq(d.slow, 431);
    cfg = config();

    /* max_body: a declared length at it, and one over (413). */
    static const char post[] = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\n";
    cfg.max_body = 100;
    cr_assert(diff_n(&cfg, post, sizeof post - 1).fast);
    cfg.max_body = 99;
    d = diff_n(&cfg, post, sizeof post - 1);
    cr_assert(!d.fast);
    cr_assert_eq(d.slow, 413);
}

/* More fields than the inline arrays hold: the arrays grow, as llhttp's
 * callbacks grow them. */
Test(h1_fast_head, many_fields, .timeout = 30)
{
    char buf[4096];
    size_t len = (size_t)snprintf(buf, sizeof buf, "GET / HTTP/1.1\r\n");
    for (int i = 0; i < H1_INLINE_HEADERS * 2; i++)
        len += (size_t)snprintf(buf + len, sizeof buf - len, "X-%d: %d\r\n", i, i);
    len += (size_t)snprintf(buf + len, sizeof buf - len, "Host: a\r\n\r\n");
    h1_config cfg = config();
    h1_head_diff d = diff_n(&cfg, buf, len);
    cr_assert(d.fast);
    cr_assert_eq(d.nheaders, H1_INLINE_HEADERS * 2 + 1);
    cr_assert_eq(d.host_index, H1_INLINE_HEADERS * 2);
}
