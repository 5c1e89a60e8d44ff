/* HTTP/1.1 over real sockets: keel with http1 + the hello plugin, two
 * workers. Connection management (keep-alive, HTTP/1.0, Connection: close,
 * pipelining behind asynchronous handlers), request bodies (Content-Length,
 * chunked with extensions and trailers, 100-continue), HEAD, 404 vs 405,
 * Date and Server, offload, streaming with trailers, graceful shutdown.
 * Limits and timeouts are in test_http_limits.c, curl in test_http_curl.c,
 * byte-exact protocol cases in tests/http/cases (test_http_cases.c). */
#define _GNU_SOURCE
#include "test_http.h"

#define GET(path) "GET " path " HTTP/1.1\r\nHost: localhost\r\n\r\n"

/* ---- Basics ------------------------------------------------------------------ */

Test(http, get_root, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = ht_start(NULL, NULL);
    ht_resp r;
    ht_roundtrip(p, GET("/"), &r);
    kh_assert(p, r.status == 200, "status %d", r.status);
    kh_assert(p, r.minor == 1, "HTTP/1.%d", r.minor);
    kh_assert(p, strcmp(r.body, "Hello, World!") == 0, "body '%s'", r.body);
    kh_assert(p, r.content_length == 13 && !r.chunked, "not framed by Content-Length: 13:\n%s",
              r.head);
    const char *ct = ht_header(&r, "Content-Type");
    kh_assert(p, ct && strncmp(ct, "text/plain", 10) == 0, "Content-Type '%s'", ct ? ct : "");
    const char *server = ht_header(&r, "Server");
    kh_assert(p, server && *server, "no Server header by default:\n%s", r.head);
    kh_assert(p, !ht_header_has_token(&r, "Connection", "close"), "asks to close:\n%s", r.head);
    ht_resp_free(&r);
    kh_stop(p);
}

Test(http, hello_name_is_decoded, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = ht_start(NULL, NULL);
    static const struct {
        const char *path, *body;
    } cases[] = {
        {"/hello/World", "Hello, World!"},
        {"/hello/a%20b", "Hello, a b!"},
        {"/hello/%C3%A9t%C3%A9", "Hello, \xC3\xA9t\xC3\xA9!"},
        {"/hello/x?y=z", "Hello, x!"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ht_resp r;
        ht_roundtrip(p, ht_fmt("GET %s HTTP/1.1\r\nHost: h\r\n\r\n", cases[i].path), &r);
        kh_assert(p, r.status == 200 && strcmp(r.body, cases[i].body) == 0,
                  "GET %s: %d '%s', expected '%s'", cases[i].path, r.status, r.body, cases[i].body);
        ht_resp_free(&r);
    }
    kh_stop(p);
}

Test(http, request_headers_as_received, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = ht_start(NULL, NULL);
    ht_resp r;
    ht_roundtrip(p,
                 "GET /headers HTTP/1.1\r\n"
                 "Host: example.test\r\n"
                 "X-One: 1\r\n"
                 "x-mixed-CASE:  spaced value \t\r\n"
                 "X-Empty:\r\n"
                 "X-Dup: a\r\n"
                 "X-Dup: b\r\n"
                 "\r\n",
                 &r);
    kh_assert(p, r.status == 200, "status %d", r.status);
    const char *want = "Host: example.test\n"
                       "X-One: 1\n"
                       "x-mixed-CASE: spaced value\n"
                       "X-Empty: \n"
                       "X-Dup: a\n"
                       "X-Dup: b\n";
    kh_assert(p, strcmp(r.body, want) == 0,
              "headers as the handler saw them:\n%s\nexpected (names as sent, OWS trimmed, "
              "order kept):\n%s",
              r.body, want);
    ht_resp_free(&r);
    kh_stop(p);
}

/* keel_request_header_token (ABI 1.10): the first field of a well-known
 * name, in any case, found by the token the parser gave it; nothing for a
 * name the head lacks (another name of the same length included), for
 * KEEL_HDR_UNKNOWN and for an id past the host's list. */
Test(http, request_header_by_token, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = kh_start("[keel]\nlisten = 127.0.0.1:0 http1\nworkers = 1\n"
                          "modules = http1 h2test\n" KH_MODULE_PATH,
                          NULL, 1, 10000);
    static const struct {
        const char *id, *want;
    } cases[] = {
        {"14", "Basic one"},    /* KEEL_HDR_AUTHORIZATION: the first of two */
        {"10", "a/b"},          /* KEEL_HDR_ACCEPT */
        {"29", "example.test"}, /* KEEL_HDR_HOST */
        {"13", "-"},            /* KEEL_HDR_ALLOW: absent, X-Allow is not it */
        {"12", "-"},            /* KEEL_HDR_AGE: absent, X-A is as long */
        {"0", "-"},             /* KEEL_HDR_UNKNOWN */
        {"4096", "-"},          /* no such id */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char req[512], want[64];
        snprintf(req, sizeof req,
                 "GET /h2test/head?token=%s HTTP/1.1\r\nHost: example.test\r\n"
                 "authorization: Basic one\r\nAUTHORIZATION: Basic two\r\nAccept: a/b\r\n"
                 "X-Allow: no\r\nX-A: b\r\n\r\n",
                 cases[i].id);
        snprintf(want, sizeof want, "token=%s\n", cases[i].want);
        ht_resp r;
        ht_roundtrip(p, req, &r);
        kh_assert(p, r.status == 200 && strstr(r.body, want) != NULL, "id %s: %d '%s'", cases[i].id,
                  r.status, r.body);
        ht_resp_free(&r);
    }
    kh_stop(p);
}

/* ---- Connection management -------------------------------------------------- */

Test(http, keep_alive_by_default_on_1_1, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = ht_start(NULL, NULL);
    ht_conn *c = ht_connect(kh_port(p, 0));
    for (int i = 0; i < 5; i++) {
        ht_send_str(c, ht_fmt("GET /hello/%d HTTP/1.1\r\nHost: h\r\n\r\n", i));
        ht_resp r;
        ht_expect_response(p, c, &r, 0);
        kh_assert(p, r.status == 200 && strcmp(r.body, ht_fmt("Hello, %d!", i)) == 0,
                  "request %d: %d '%s'", i, r.status, r.body);
        kh_assert(p, !ht_header_has_token(&r, "Connection", "close"),
                  "request %d: Connection: close on a keep-alive exchange:\n%s", i, r.head);
        ht_resp_free(&r);
    }
    kh_assert(p, ht_silent(c, 300), "connection closed (or data) after keep-alive responses");
    ht_close(c);
    kh_stop(p);
}

Test(http, http_1_0_closes_by_default, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = ht_start(NULL, NULL);
    ht_conn *c = ht_connect(kh_port(p, 0));
    ht_send_str(c, "GET / HTTP/1.0\r\n\r\n"); /* no Host: fine in 1.0 */
    ht_resp r;
    ht_expect_response(p, c, &r, 0);
    kh_assert(p, r.status == 200 && strcmp(r.body, "Hello, World!") == 0, "%d '%s'", r.status,
              r.body);
    kh_assert(p, !r.chunked, "chunked response to an HTTP/1.0 request");
    kh_assert(p, !ht_header_has_token(&r, "Connection", "keep-alive"),
              "keep-alive offered to a 1.0 client that did not ask:\n%s", r.head);
    kh_assert(p, ht_wait_closed(c, 3000) == 1, "connection not closed after a 1.0 response");
    ht_resp_free(&r);
    ht_close(c);
    kh_stop(p);
}

Test(http, http_1_0_keep_alive_when_asked, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = ht_start(NULL, NULL);
    ht_conn *c = ht_connect(kh_port(p, 0));
    for (int i = 0; i < 3; i++) {
        ht_send_str(c, "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
        ht_resp r;
        ht_expect_response(p, c, &r, 0);
        kh_assert(p, r.status == 200, "request %d: status %d", i, r.status);
        kh_assert(p, ht_header_has_token(&r, "Connection", "keep-alive"),
                  "request %d: no Connection: keep-alive in the answer to a 1.0 client:\n%s", i,
                  r.head);
        kh_assert(p, r.content_length == 13, "request %d: not framed by Content-Length", i);
        ht_resp_free(&r);
    }
    kh_assert(p, ht_silent(c, 300), "connection closed after 1.0 keep-alive responses");
    /* The last one may ask to close again. */
    ht_send_str(c, "GET / HTTP/1.0\r\n\r\n");
    ht_resp r;
    ht_expect_response(p, c, &r, 0);
    kh_assert(p, ht_wait_closed(c, 3000) == 1, "not closed after a 1.0 request without keep-alive");
    ht_resp_free(&r);
    ht_close(c);
    kh_stop(p);
}

Test(http, connection_close_honoured, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = ht_start(NULL, NULL);
    ht_conn *c = ht_connect(kh_port(p, 0));
    /* The request after the one that says close must never be answered. */
    ht_send_str(c, "GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n" GET("/hello/after"));
    ht_resp r;
    ht_expect_response(p, c, &r, 0);
    kh_assert(p, r.status == 200, "status %d", r.status);
    kh_assert(p, ht_header_has_token(&r, "Connection", "close"), "no Connection: close:\n%s",
              r.head);
    int closed = ht_wait_closed(c, 3000);
    kh_assert(p, closed == 1, "%s after Connection: close: '%s'", closed ? "data" : "no close",
              c->buf + c->pos);
    ht_resp_free(&r);
    ht_close(c);
    kh_stop(p);
}

/* ---- Pipelining ----------------------------------------------------------------- */

Test(http, pipelined_in_order_behind_slow_handler, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = ht_start(NULL, NULL);
    ht_conn *c = ht_connect(kh_port(p, 0));
    long long t0 = kh_now_ms();
    /* One write: an asynchronous handler first, then fast ones, a body, an
     * offload and another timer; the answers must come back in this order. */
    ht_send_str(c, GET("/slow?ms=300") GET("/")
                       GET("/hello/third") "POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: "
                                           "6\r\n\r\nfourth" GET("/offload?n=1000")
                                               GET("/slow?ms=10") GET("/hello/last"));
    const char *want[] = {
        "Hello after 300 ms!",
        "Hello, World!",
        "Hello, third!",
        "fourth",
        ht_fmt("fnv1a64 x 1000 = %016llx\n", (unsigned long long)ht_fnv_rounds(1000)),
        "Hello after 10 ms!",
        "Hello, last!"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        ht_resp r;
        ht_expect_response(p, c, &r, 0);
        if (i == 0)
            kh_assert(p, kh_now_ms() - t0 >= 250, "/slow?ms=300 answered after %lld ms",
                      kh_now_ms() - t0);
        kh_assert(p, r.status == 200 && strcmp(r.body, want[i]) == 0,
                  "response %zu: %d '%s', expected '%s'", i, r.status, r.body, want[i]);
        ht_resp_free(&r);
    }
    kh_assert(p, ht_silent(c, 200), "extra bytes or close after the pipelined responses");
    ht_close(c);
    kh_stop(p);
}

Test(http, pipelined_many_in_one_write, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = ht_start(NULL, NULL);
    ht_conn *c = ht_connect(kh_port(p, 0));
    enum { N = 200 };
    static char all[N * 64];
    size_t len = 0;
    for (int i = 0; i < N; i++)
        len += (size_t)snprintf(all + len, sizeof all - len,
                                "GET /hello/%d HTTP/1.1\r\nHost: h\r\n\r\n", i);
    ht_send(c, all, len);
    for (int i = 0; i < N; i++) {
        ht_resp r;
        ht_expect_response(p, c, &r, 0);
        kh_assert(p, r.status == 200 && strcmp(r.body, ht_fmt("Hello, %d!", i)) == 0,
                  "response %d: %d '%s'", i, r.status, r.body);
        ht_resp_free(&r);
    }
    ht_close(c);
    kh_stop(p);
}

Test(http, requests_split_byte_by_byte, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = ht_start(NULL, NULL);
    ht_conn *c = ht_connect(kh_port(p, 0));
    const char *reqs =
        GET("/hello/one") "POST /echo HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: "
                          "chunked\r\n\r\n3;x=y\r\nabc\r\n0\r\nT: v\r\n\r\n" GET("/hello/three");
    for (const char *s = reqs; *s; s++) { /* a byte a read */
        ht_send(c, s, 1);
        kh_assert(p, kh_wait_peer_read(c->fd, 5000), "byte %zu not read", (size_t)(s - reqs));
    }
    const char *want[] = {"Hello, one!", "abc", "Hello, three!"};
    for (int i = 0; i < 3; i++) {
        ht_resp r;
        ht_expect_response(p, c, &r, 0);
        kh_assert(p, r.status == 200 && strcmp(r.body, want[i]) == 0, "response %d: %d '%s'", i,
                  r.status, r.body);
        ht_resp_free(&r);
    }
    ht_close(c);
    kh_stop(p);
}

/* ---- Request bodies --------------------------------------------------------------- */

Test(http, echo_content_length, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = ht_start(NULL, NULL);
    ht_resp r;
    ht_roundtrip(p,
                 "POST /echo HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\n"
                 "Content-Length: 15\r\n\r\n{\"hello\":\"you\"}",
                 &r);
    kh_assert(p, r.status == 200 && strcmp(r.body, "{\"hello\":\"you\"}") == 0, "%d '%s'", r.status,
              r.body);
    const char *ct = ht_header(&r, "Content-Type");
    kh_assert(p, ct && strcmp(ct, "application/json") == 0, "Content-Type '%s'", ct ? ct : "");
    ht_resp_free(&r);

    /* Empty body: still a framed, empty answer. */
    ht_roundtrip(p, "POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n", &r);
    kh_assert(p, r.status == 200 && r.body_len == 0 && r.content_length == 0, "%d len %zu\n%s",
              r.status, r.body_len, r.head);
    ct = ht_header(&r, "Content-Type");
    kh_assert(p, ct && strcmp(ct, "application/octet-stream") == 0, "Content-Type '%s'",
              ct ? ct : "");
    ht_resp_free(&r);
    kh_stop(p);
}

Test(http, echo_binary_and_large_bodies, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = ht_start(NULL, NULL);
    ht_conn *c = ht_connect(kh_port(p, 0));
    size_t sizes[] = {256, 4096, 65536 + 7, 300000};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        char *body = malloc(n);
        cr_assert(body);
        for (size_t i = 0; i < n; i++)
            body[i] = (char)(i * 7 + k); /* every byte value, NUL and CR/LF too */
        ht_send_str(c, ht_fmt("POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: %zu\r\n"
                              "Content-Type: application/octet-stream\r\n\r\n",
                              n));
        ht_send(c, body, n);
        ht_resp r;
        ht_expect_response(p, c, &r, 0);
        kh_assert(p, r.status == 200, "%zu bytes: status %d", n, r.status);
        kh_assert(p, r.body_len == n && memcmp(r.body, body, n) == 0,
                  "%zu bytes: echo differs (got %zu bytes)", n, r.body_len);
        ht_resp_free(&r);
        free(body);
    }
    ht_close(c);
    kh_stop(p);
}

Test(http, echo_chunked_with_extensions_and_trailers, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = ht_start(NULL, NULL);
    ht_conn *c = ht_connect(kh_port(p, 0));
    const char *req = "POST /echo HTTP/1.1\r\n"
                      "Host: h\r\n"
                      "Content-Type: text/x-pieces\r\n"
                      "Transfer-Encoding: chunked\r\n"
                      "\r\n"
                      "5;name=value\r\n"
                      "hello\r\n"
                      "1;a;b=\"quoted ; string\"\r\n"
                      " \r\n"
                      "A\r\n"
                      "0123456789\r\n"
                      "0;last\r\n"
                      "X-Checksum: abc\r\n"
                      "X-Other: 1\r\n"
                      "\r\n";
    /* Once in one write, once in small pieces that cut through every
     * syntactic element (size line, CRLF, data, trailer). */
    for (int round = 0; round < 2; round++) {
        if (round == 0) {
            ht_send_str(c, req);
        } else {
            size_t len = strlen(req);
            for (size_t i = 0; i < len; i += 3) {
                ht_send(c, req + i, len - i < 3 ? len - i : 3);
                kh_assert(p, kh_wait_peer_read(c->fd, 5000), "piece at %zu not read", i);
            }
        }
        ht_resp r;
        ht_expect_response(p, c, &r, 0);
        kh_assert(p, r.status == 200 && strcmp(r.body, "hello 0123456789") == 0,
                  "round %d: %d '%s'", round, r.status, r.body);
        const char *ct = ht_header(&r, "Content-Type");
        kh_assert(p, ct && strcmp(ct, "text/x-pieces") == 0, "Content-Type '%s'", ct ? ct : "");
        ht_resp_free(&r);
    }
    /* The trailers were consumed: the connection goes on cleanly. */
    ht_send_str(c, GET("/"));
    ht_resp r;
    ht_expect_response(p, c, &r, 0);
    kh_assert(p, r.status == 200 && strcmp(r.body, "Hello, World!") == 0, "after: %d '%s'",
              r.status, r.body);
    ht_resp_free(&r);
    ht_close(c);
    kh_stop(p);
}

Test(http, expect_100_continue, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = ht_start(NULL, NULL);
    ht_conn *c = ht_connect(kh_port(p, 0));
    ht_send_str(c, "POST /echo HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n"
                   "Content-Length: 5\r\n\r\n");
    ht_resp r;
    ht_expect_response(p, c, &r, 0);
    kh_assert(p, r.status == 100, "expected 100 Continue before the body, got %d", r.status);
    kh_assert(p, ht_avail(c) == 0, "more than the 100 before the body was sent: '%s'",
              c->buf + c->pos);
    ht_resp_free(&r);
    ht_send_str(c, "howdy");
    ht_expect_response(p, c, &r, 0);
    kh_assert(p, r.status == 200 && strcmp(r.body, "howdy") == 0, "%d '%s'", r.status, r.body);
    ht_resp_free(&r);

    /* Chunked with 100-continue too. */
    ht_send_str(c, "POST /echo HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n"
                   "Transfer-Encoding: chunked\r\n\r\n");
    ht_expect_response(p, c, &r, 0);
    kh_assert(p, r.status == 100, "chunked: expected 100 Continue, got %d", r.status);
    ht_resp_free(&r);
    ht_send_str(c, "3\r\nabc\r\n0\r\n\r\n");
    ht_expect_response(p, c, &r, 0);
    kh_assert(p, r.status == 200 && strcmp(r.body, "abc") == 0, "%d '%s'", r.status, r.body);
    ht_resp_free(&r);
    ht_close(c);
    kh_stop(p);
}

Test(http, expect_100_continue_not_sent_when_body_unread, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = ht_start(NULL, NULL);
    ht_conn *c = ht_connect(kh_port(p, 0));
    /* GET / never reads a body: answer at once, no 100 (RFC 9110 10.1.1). */
    ht_send_str(c, "GET / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n"
                   "Content-Length: 5\r\n\r\n");
    ht_resp r;
    ht_expect_response(p, c, &r, 0);
    kh_assert(p, r.status == 200, "expected the final 200 without a 100 first, got %d", r.status);
    ht_resp_free(&r);
    ht_close(c);
    kh_stop(p);
}

Test(http, expect_100_continue_too_large_is_413, .timeout = 30, .fini = kh_cleanup_all)
{
    const char *args[] = {"--set", HT_MAX_BODY "=1k", NULL};
    kh_proc *p = ht_start(NULL, args);
    ht_conn *c = ht_connect(kh_port(p, 0));
    ht_send_str(c, "POST /echo HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n"
                   "Content-Length: 5000\r\n\r\n");
    ht_resp r;
    ht_expect_response(p, c, &r, 0);
    kh_assert(p, r.status == 413, "expected 413 without 100 Continue, got %d", r.status);
    ht_resp_free(&r);
    ht_close(c);
    kh_stop(p);
}

/* ---- Responses ----------------------------------------------------------------------- */

Test(http, head_has_headers_and_no_body, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = ht_start(NULL, NULL);
    ht_conn *c = ht_connect(kh_port(p, 0));
    const char *paths[] = {"/", "/hello/head", "/stream?n=3", "/headers"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        ht_send_str(c, ht_fmt("GET %s HTTP/1.1\r\nHost: h\r\n\r\n", paths[i]));
        ht_resp g;
        ht_expect_response(p, c, &g, 0);
        ht_send_str(c, ht_fmt("HEAD %s HTTP/1.1\r\nHost: h\r\n\r\n", paths[i]));
        ht_resp h;
        ht_expect_response(p, c, &h, 1);
        kh_assert(p, h.status == g.status, "%s: HEAD %d vs GET %d", paths[i], h.status, g.status);
        const char *hct = ht_header(&h, "Content-Type"), *gct = ht_header(&g, "Content-Type");
        kh_assert(p, hct && gct && strcmp(hct, gct) == 0, "%s: Content-Type '%s' vs '%s'", paths[i],
                  hct ? hct : "", gct ? gct : "");
        if (g.content_length >= 0)
            kh_assert(p, h.content_length == g.content_length,
                      "%s: HEAD Content-Length %lld, GET %lld", paths[i],
                      (long long)h.content_length, (long long)g.content_length);
        ht_resp_free(&g);
        ht_resp_free(&h);
    }
    /* No body bytes followed any HEAD answer: the next response parses. */
    ht_send_str(c, GET("/"));
    ht_resp r;
    ht_expect_response(p, c, &r, 0);
    kh_assert(p, r.status == 200 && strcmp(r.body, "Hello, World!") == 0, "after HEADs: %d '%s'",
              r.status, r.body);
    ht_resp_free(&r);
    ht_close(c);
    kh_stop(p);
}

Test(http, not_found_vs_method_not_allowed, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = ht_start(NULL, NULL);
    ht_resp r;

    ht_roundtrip(p, GET("/no/such/thing"), &r);
    kh_assert(p, r.status == 404, "GET /no/such/thing: %d", r.status);
    kh_assert(p, r.body_len > 0 && r.body_len < 512, "404 body of %zu bytes", r.body_len);
    ht_resp_free(&r);

    ht_roundtrip(p, "POST /nope HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n", &r);
    kh_assert(p, r.status == 404, "POST /nope: %d (no route of any method: 404)", r.status);
    ht_resp_free(&r);

    static const struct {
        const char *req;
        const char *allow[3];
    } cases[] = {
        {"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n", {"GET", "HEAD", NULL}},
        {"GET /echo HTTP/1.1\r\nHost: h\r\n\r\n", {"POST", NULL, NULL}},
        {"DELETE /hello/x HTTP/1.1\r\nHost: h\r\n\r\n", {"GET", "HEAD", NULL}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ht_roundtrip(p, cases[i].req, &r);
        kh_assert(p, r.status == 405, "%.20s...: %d, expected 405", cases[i].req, r.status);
        const char *allow = ht_header(&r, "Allow");
        kh_assert(p, allow, "405 without Allow:\n%s", r.head);
        for (int k = 0; cases[i].allow[k]; k++)
            kh_assert(p, ht_header_has_token(&r, "Allow", cases[i].allow[k]),
                      "%.20s...: Allow '%s' lacks %s", cases[i].req, allow, cases[i].allow[k]);
        ht_resp_free(&r);
    }
    kh_stop(p);
}

Test(http, date_on_every_response, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = ht_start(NULL, NULL);
    char longline[12000];
    memset(longline, 'a', sizeof longline - 1);
    longline[sizeof longline - 1] = '\0';
    const struct {
        const char *req;
        int status;
    } cases[] = {
        {GET("/"), 200},
        {GET("/missing"), 404},
        {"PUT / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n", 405},
        {"GET / HTTP/1.1\r\nHost: h\r\nBad Header: x\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\n\r\n", 400},
        {ht_fmt("GET /%s HTTP/1.1\r\nHost: h\r\n\r\n", longline), 414},
    };
    time_t now = time(NULL);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ht_resp r;
        ht_roundtrip(p, cases[i].req, &r); /* checks Date's presence and format */
        kh_assert(p, r.status == cases[i].status, "case %zu: %d, expected %d", i, r.status,
                  cases[i].status);
        struct tm tm;
        memset(&tm, 0, sizeof tm);
        strptime(ht_header(&r, "Date"), "%a, %d %b %Y %H:%M:%S GMT", &tm);
        long long skew = (long long)(timegm(&tm) - now);
        kh_assert(p, skew > -5 && skew < 5, "case %zu: Date '%s' is %lld s off", i,
                  ht_header(&r, "Date"), skew);
        ht_resp_free(&r);
    }
    kh_stop(p);
}

Test(http, server_header_configurable, .timeout = 30, .fini = kh_cleanup_all)
{
    const char *args[] = {"--set", HT_SERVER "=keel-test/9.9", NULL};
    kh_proc *p = ht_start(NULL, args);
    const char *reqs[] = {GET("/"), GET("/missing"), "GET / HTTP/1.1\r\n\r\n"};
    for (size_t i = 0; i < 3; i++) {
        ht_resp r;
        ht_roundtrip(p, reqs[i], &r);
        const char *server = ht_header(&r, "Server");
        kh_assert(p, server && strcmp(server, "keel-test/9.9") == 0,
                  "%d response: Server '%s', expected 'keel-test/9.9'", r.status,
                  server ? server : "(none)");
        ht_resp_free(&r);
    }
    kh_stop(p);
}

/* ---- Offload, timers, streaming ----------------------------------------------------- */

Test(http, offload_answers_from_the_thread_pool, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = ht_start(NULL, NULL);
    ht_resp r;
    ht_roundtrip(p, GET("/offload?n=12345"), &r);
    const char *want =
        ht_fmt("fnv1a64 x 12345 = %016llx\n", (unsigned long long)ht_fnv_rounds(12345));
    kh_assert(p, r.status == 200 && strcmp(r.body, want) == 0, "%d '%s', expected '%s'", r.status,
              r.body, want);
    ht_resp_free(&r);
    kh_stop(p);
}

Test(http, offload_does_not_block_the_loop, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = ht_start_n(1, NULL, NULL); /* one worker: every connection on one loop */
    unsigned port = kh_port(p, 0);
    /* Calibrate: how long do 2M rounds take here? Aim at about 1 s. */
    long long t0 = kh_now_ms();
    ht_resp r;
    ht_roundtrip(p, GET("/offload?n=2000000"), &r);
    long long ms = kh_now_ms() - t0;
    ht_resp_free(&r);
    unsigned long long n = ms > 0 ? 2000000ULL * 1000 / (unsigned long long)ms : 50000000ULL;
    if (n > 50000000ULL)
        n = 50000000ULL;

    ht_conn *slow = ht_connect(port);
    t0 = kh_now_ms();
    ht_send_str(slow, ht_fmt("GET /offload?n=%llu HTTP/1.1\r\nHost: h\r\n\r\n", n));
    kh_assert(p, kh_wait_peer_read(slow->fd, 5000), "keel did not read the offload's request");
    /* While the pool hashes, the loop serves others: GET / is answered
     * again and again before the offload's answer comes. (Counting rather
     * than timing keeps this right on a busy machine.) */
    int served = 0;
    while (served < 5) {
        ht_roundtrip(p, GET("/"), &r);
        kh_assert(p, r.status == 200, "status %d", r.status);
        ht_resp_free(&r);
        if (ht_avail(slow) > 0 || ht_fill(slow, 0) >= 0)
            break; /* the offload answered (or the connection died) */
        served++;
    }
    kh_assert(p, served >= 3, "only %d GET / answered while an offload of %llu rounds ran", served,
              n);
    int rc = ht_read_response(slow, &r, 0, 30000); /* a busy machine slows the hashing */
    kh_assert(p, rc == 0, "the offload's answer: %s", r.err);
    long long total = kh_now_ms() - t0;
    const char *want =
        ht_fmt("fnv1a64 x %llu = %016llx\n", n, (unsigned long long)ht_fnv_rounds((uint64_t)n));
    kh_assert(p, r.status == 200 && strcmp(r.body, want) == 0, "%d '%s'", r.status, r.body);
    cr_log_info("offload of %llu rounds took %lld ms", n, total);
    ht_resp_free(&r);
    ht_close(slow);
    kh_stop(p);
}

/* A client that leaves while its handler waits (offload, timer, stream):
 * the server must drop the exchange cleanly and stay up. Under ASan this is
 * where use-after-free would show. */
/* 1 if keel_connections_open (tests/modules' metrics: GET /dump) counts
 * only the connection that asks. */
static int only_connection_open(kh_proc *p)
{
    ht_resp r;
    ht_roundtrip(p, "GET /dump HTTP/1.1\r\nHost: h\r\n\r\n", &r);
    const char *v = r.status == 200 ? strstr(r.body, "keel_connections_open{} ") : NULL;
    int one = v != NULL && atoi(v + strlen("keel_connections_open{} ")) == 1;
    ht_resp_free(&r);
    return one;
}

Test(http, client_leaves_during_async_handlers, .timeout = 60, .fini = kh_cleanup_all)
{
    const char *args[] = {"--set", "keel.modules=http1 hello metrics", NULL};
    kh_proc *p = ht_start(NULL, args);
    unsigned port = kh_port(p, 0);
    const char *reqs[] = {GET("/offload?n=3000000"), GET("/slow?ms=200"), GET("/stream?n=100000"),
                          "POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n\r\npartial"};
    for (int round = 0; round < 3; round++)
        for (size_t i = 0; i < sizeof reqs / sizeof reqs[0]; i++) {
            ht_conn *c = ht_connect(port);
            ht_send_str(c, reqs[i]);
            /* Leaving at three points of the handler's life: at once,
             * and 20 or 40 ms into it (time passing, not a condition). */
            if (round > 0)
                kh_sleep_ms(round * 20);
            struct linger lg = {.l_onoff = 1, .l_linger = 0}; /* RST on close */
            if (round == 2)
                setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
            ht_close(c);
        }
    /* Every connection of the clients that left is closed and freed: the
     * one asking is the only one open. (Their requests may outlive them:
     * an offload still hashing is the graceful stop's to wait for, below.) */
    kh_assert(p, KH_WAIT_UNTIL(only_connection_open(p), 10000),
              "the exchanges of the clients that left are still open");
    ht_resp r;
    ht_roundtrip(p, GET("/"), &r);
    kh_assert(p, r.status == 200, "server unwell after clients left: %d", r.status);
    ht_resp_free(&r);
    kh_signal(p, SIGTERM);
    int status = kh_wait_exit(p, 15000);
    kh_assert(p, status == 0, "exit status %d after SIGTERM", status);
    kh_stop(p);
}

Test(http, stream_chunked_with_trailer, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = ht_start(NULL, NULL);
    ht_conn *c = ht_connect(kh_port(p, 0));
    const unsigned counts[] = {5, 1, 0, 3000};
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
        unsigned n = counts[k];
        ht_send_str(c, ht_fmt("GET /stream?n=%u HTTP/1.1\r\nHost: h\r\nTE: trailers\r\n\r\n", n));
        ht_resp r;
        ht_expect_response(p, c, &r, 0);
        kh_assert(p, r.status == 200, "n=%u: status %d", n, r.status);
        kh_assert(p, r.chunked, "n=%u: not chunked:\n%s", n, r.head);
        size_t want_len = 0;
        char *want = NULL;
        for (unsigned i = 1; i <= n; i++) {
            const char *piece = ht_fmt("chunk %u of %u\n", i, n);
            ht_append(&want, &want_len, piece, strlen(piece));
        }
        kh_assert(p, r.body_len == want_len && (!n || memcmp(r.body, want, want_len) == 0),
                  "n=%u: body of %zu bytes differs (expected %zu)", n, r.body_len, want_len);
        const char *t = ht_trailer(&r, "X-Stream-Chunks");
        kh_assert(p, t && atoi(t) == (int)n, "n=%u: trailer X-Stream-Chunks '%s'", n,
                  t ? t : "(none)");
        free(want);
        ht_resp_free(&r);
    }
    ht_close(c);
    kh_stop(p);
}

Test(http, stream_to_http_1_0_is_close_delimited, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = ht_start(NULL, NULL);
    ht_conn *c = ht_connect(kh_port(p, 0));
    ht_send_str(c, "GET /stream?n=3 HTTP/1.0\r\n\r\n");
    ht_resp r;
    ht_expect_response(p, c, &r, 0);
    kh_assert(p, r.status == 200 && !r.chunked, "%d, chunked %d:\n%s", r.status, r.chunked, r.head);
    kh_assert(p, strcmp(r.body, "chunk 1 of 3\nchunk 2 of 3\nchunk 3 of 3\n") == 0, "body '%s'",
              r.body);
    ht_resp_free(&r);
    ht_close(c);
    kh_stop(p);
}

/* ---- Shutdown -------------------------------------------------------------------------- */

Test(http, sigterm_finishes_in_flight_requests, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = ht_start(NULL, NULL);
    unsigned port = kh_port(p, 0);
    ht_conn *busy = ht_connect(port);
    ht_conn *idle = ht_connect(port);
    ht_send_str(idle, GET("/"));
    ht_resp r;
    ht_expect_response(p, idle, &r, 0);
    ht_resp_free(&r);
    ht_send_str(busy, GET("/slow?ms=500"));
    kh_assert(p, kh_wait_peer_read(busy->fd, 5000), "keel did not read the busy request");
    kh_signal(p, SIGTERM);
    /* The idle keep-alive connection is closed, the busy one answered. */
    kh_assert(p, ht_wait_closed(idle, 5000) == 1, "idle keep-alive connection not closed");
    ht_expect_response(p, busy, &r, 0);
    kh_assert(p, r.status == 200 && strcmp(r.body, "Hello after 500 ms!") == 0,
              "in-flight request: %d '%s'", r.status, r.body);
    ht_resp_free(&r);
    kh_assert(p, ht_wait_closed(busy, 5000) == 1, "busy connection not closed after its answer");
    int status = kh_wait_exit(p, 10000);
    kh_assert(p, status == 0, "exit status %d", status);
    ht_close(busy);
    ht_close(idle);
    kh_stop(p);
}
