/* HTTP/1.1 limits and timeouts, each with its status code: 414 (request
 * line), 431 (header bytes, header count), 413 (body, by Content-Length and
 * chunked, chunked framing), 408 (header read timeout, slowloris, body read
 * timeout, body minimum rate), the
 * keep-alive idle timeout and max requests per connection. Every limit is
 * set small with --set so the tests are quick; after each refusal the server
 * must still serve. */
#define _GNU_SOURCE
#include "test_http.h"

#define GET(path) "GET " path " HTTP/1.1\r\nHost: localhost\r\n\r\n"

/* Expects `status`, then the connection closed (the refused request's
 * remaining bytes must never be read as a new request). */
static void expect_refused(kh_proc *p, ht_conn *c, int status, const char *what)
{
    ht_resp r;
    int rc = ht_read_response(c, &r, 0, 5000);
    kh_assert(p, rc == 0, "%s: reading the response: %s", what, r.err);
    kh_assert(p, r.status == status, "%s: status %d, expected %d\n%s", what, r.status, status,
              r.head);
    int closed = ht_wait_closed(c, 5000);
    kh_assert(p, closed == 1, "%s: connection %s after %d", what,
              closed ? "sent more bytes" : "left open", status);
    ht_resp_free(&r);
}

static void expect_ok(kh_proc *p, ht_conn *c, const char *what)
{
    ht_resp r;
    int rc = ht_read_response(c, &r, 0, 5000);
    kh_assert(p, rc == 0, "%s: reading the response: %s", what, r.err);
    kh_assert(p, r.status == 200 || r.status == 404, "%s: status %d\n%s", what, r.status, r.head);
    ht_resp_free(&r);
}

static void still_serving(kh_proc *p)
{
    ht_resp r;
    ht_roundtrip(p, GET("/"), &r);
    kh_assert(p, r.status == 200 && strcmp(r.body, "Hello, World!") == 0,
              "server unwell afterwards: %d '%s'", r.status, r.body);
    ht_resp_free(&r);
}

static char *repeat(char ch, size_t n)
{
    char *s = malloc(n + 1);
    cr_assert(s);
    memset(s, ch, n);
    s[n] = '\0';
    return s;
}

Test(http_limits, request_line_414, .timeout = 30, .fini = kh_cleanup_all)
{
    const char *args[] = {"--set", HT_MAX_REQUEST_LINE "=1k", NULL};
    kh_proc *p = ht_start(NULL, args);
    unsigned port = kh_port(p, 0);
    char *a = repeat('a', 4000);

    ht_conn *c = ht_connect(port); /* under the limit: routed (404) */
    ht_send_str(c, ht_fmt("GET /%.900s HTTP/1.1\r\nHost: h\r\n\r\n", a));
    expect_ok(p, c, "a 900-byte target under a 1k limit");
    ht_close(c);

    c = ht_connect(port); /* over it, complete */
    ht_send_str(c, ht_fmt("GET /%.2000s HTTP/1.1\r\nHost: h\r\n\r\n", a));
    expect_refused(p, c, 414, "a 2000-byte target");
    ht_close(c);

    c = ht_connect(port); /* over it and still coming: refused without waiting */
    ht_send_str(c, ht_fmt("GET /%.4000s", a));
    expect_refused(p, c, 414, "an unfinished 4000-byte request line");
    ht_close(c);

    free(a);
    still_serving(p);
    kh_stop(p);
}

Test(http_limits, request_line_414_default_limit, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = ht_start(NULL, NULL);
    char *a = repeat('a', 200000);
    ht_conn *c = ht_connect(kh_port(p, 0));
    ht_send_str(c, "GET /");
    /* The server may close while we are still sending: that is fine. */
    ht_try_send(c, a, strlen(a));
    expect_refused(p, c, 414, "a 200 KB target with the default limit");
    ht_close(c);
    free(a);
    still_serving(p);
    kh_stop(p);
}

Test(http_limits, header_bytes_431, .timeout = 30, .fini = kh_cleanup_all)
{
    const char *args[] = {"--set", HT_MAX_HEADER_BYTES "=4k", NULL};
    kh_proc *p = ht_start(NULL, args);
    unsigned port = kh_port(p, 0);
    char *v = repeat('v', 8000);

    ht_conn *c = ht_connect(port);
    ht_send_str(c, ht_fmt("GET / HTTP/1.1\r\nHost: h\r\nX-Big: %.3000s\r\n\r\n", v));
    expect_ok(p, c, "3000 bytes of header under a 4k limit");
    ht_close(c);

    c = ht_connect(port); /* one big field */
    ht_send_str(c, ht_fmt("GET / HTTP/1.1\r\nHost: h\r\nX-Big: %.6000s\r\n\r\n", v));
    expect_refused(p, c, 431, "one 6000-byte header field");
    ht_close(c);

    c = ht_connect(port); /* many small fields adding up */
    ht_send_str(c, "GET / HTTP/1.1\r\nHost: h\r\n");
    for (int i = 0; i < 60; i++) {
        const char *field = ht_fmt("X-F%02d: %.92s\r\n", i, v);
        ht_try_send(c, field, strlen(field));
    }
    ht_try_send(c, "\r\n", 2);
    expect_refused(p, c, 431, "60 fields of 100 bytes");
    ht_close(c);

    c = ht_connect(port); /* over the limit and never finished */
    ht_send_str(c, ht_fmt("GET / HTTP/1.1\r\nHost: h\r\nX-Big: %.7000s", v));
    expect_refused(p, c, 431, "an unfinished 7000-byte header");
    ht_close(c);

    free(v);
    still_serving(p);
    kh_stop(p);
}

Test(http_limits, header_count_431, .timeout = 30, .fini = kh_cleanup_all)
{
    const char *args[] = {"--set", HT_MAX_HEADERS "=20", NULL};
    kh_proc *p = ht_start(NULL, args);
    unsigned port = kh_port(p, 0);
    for (int n = 19; n <= 30; n += 11) { /* 19 + Host = 20 fields: fine; 31: too many */
        char req[4096];
        size_t len = (size_t)snprintf(req, sizeof req, "GET / HTTP/1.1\r\nHost: h\r\n");
        for (int i = 0; i < n; i++)
            len += (size_t)snprintf(req + len, sizeof req - len, "X-H%d: %d\r\n", i, i);
        snprintf(req + len, sizeof req - len, "\r\n");
        ht_conn *c = ht_connect(port);
        ht_send_str(c, req);
        if (n + 1 <= 20)
            expect_ok(p, c, "20 header fields with max_headers=20");
        else
            expect_refused(p, c, 431, "31 header fields with max_headers=20");
        ht_close(c);
    }
    still_serving(p);
    kh_stop(p);
}

Test(http_limits, body_413, .timeout = 30, .fini = kh_cleanup_all)
{
    const char *args[] = {"--set", HT_MAX_BODY "=1k", NULL};
    kh_proc *p = ht_start(NULL, args);
    unsigned port = kh_port(p, 0);
    char *b = repeat('b', 3000);

    ht_conn *c = ht_connect(port); /* exactly the limit */
    ht_send_str(c,
                ht_fmt("POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 1024\r\n\r\n%.1024s", b));
    ht_resp r;
    ht_expect_response(p, c, &r, 0);
    kh_assert(p, r.status == 200 && r.body_len == 1024, "1024-byte body: %d, %zu bytes", r.status,
              r.body_len);
    ht_resp_free(&r);
    ht_close(c);

    c = ht_connect(port); /* Content-Length over it: refused before the body */
    ht_send_str(c, "POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 2000\r\n\r\n");
    expect_refused(p, c, 413, "Content-Length: 2000 with max_body=1k");
    ht_close(c);

    c = ht_connect(port); /* the same, body sent along */
    const char *req =
        ht_fmt("POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 2000\r\n\r\n%.2000s", b);
    ht_try_send(c, req, strlen(req));
    expect_refused(p, c, 413, "a 2000-byte body with max_body=1k");
    ht_close(c);

    c = ht_connect(port); /* chunked: the limit is only known while reading */
    ht_send_str(c, "POST /echo HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n");
    for (int i = 0; i < 5; i++)
        ht_try_send(c, ht_fmt("190\r\n%.400s\r\n", b), 3 + 2 + 400 + 2);
    ht_try_send(c, "0\r\n\r\n", 5);
    expect_refused(p, c, 413, "a 2000-byte chunked body with max_body=1k");
    ht_close(c);

    free(b);
    still_serving(p);
    kh_stop(p);
}

/* Issue 13, weakness 3: chunk extensions counted for nothing, so 10,000
 * one-byte chunks with 4 KB extensions (41 MB) passed a 1 MiB max_body.
 * The attack, bounded: at the default limits keel must answer 413 long
 * before 10,000 chunks, having read little more than max_body. */
Test(http_limits, chunk_extensions_count_against_max_body, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = ht_start(NULL, NULL);
    ht_conn *c = ht_connect(kh_port(p, 0));
    char *ext = repeat('e', 4000);
    const char *chunk = ht_fmt("1;x=%s\r\nZ\r\n", ext);
    size_t chunk_len = strlen(chunk);
    ht_send_str(c, "POST /echo HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n");
    size_t sent = 0;
    int i = 0;
    /* In batches of 16 chunks (64 KB), looking for the answer in between,
     * so the client never writes into a connection the server has shut. */
    while (i < 10000 && ht_avail(c) == 0 && !c->eof) {
        for (int k = 0; k < 16 && i < 10000; k++, i++) {
            if (ht_try_send(c, chunk, chunk_len) < 0)
                goto answered;
            sent += chunk_len;
        }
        ht_fill(c, 0);
    }
answered:
    expect_refused(p, c, 413, "10,000 one-byte chunks with 4 KB extensions");
    /* 1.125 MiB of data and framing is allowed; the socket buffers hold a
     * few MB more at most. */
    kh_assert(p, sent < (size_t)8 << 20, "%zu bytes (%d chunks) sent before the 413", sent, i);
    ht_close(c);
    free(ext);
    still_serving(p);
    kh_stop(p);
}

/* Issue 13, weakness 4: a body trickled a byte at a time, each pause well
 * inside body_timeout, must still be cut off once it falls below
 * body_min_rate: body_timeout (1 s) plus 1 s per 10 bytes received; at 3
 * bytes a second the budget runs out after about 1.5 s. */
Test(http_limits, body_min_rate_cuts_a_trickle, .timeout = 30, .fini = kh_cleanup_all)
{
    const char *args[] = {"--set", HT_BODY_TIMEOUT "=1s", "--set", HT_BODY_MIN_RATE "=10", NULL};
    kh_proc *p = ht_start(NULL, args);
    ht_conn *c = ht_connect(kh_port(p, 0));
    long long t0 = kh_now_ms();
    ht_send_str(c, "POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 1000\r\n\r\n");
    while (ht_avail(c) == 0 && !c->eof && kh_now_ms() - t0 < 8000) {
        if (ht_try_send(c, "t", 1) < 0)
            break;
        ht_fill(c, 300); /* one byte every 300 ms: never a 1 s pause */
    }
    long long ms = kh_now_ms() - t0;
    expect_refused(p, c, 408, "a body trickled at 3 bytes/s with body_min_rate=10");
    kh_assert(p, ms >= 1000 && ms < 5000, "trickle cut after %lld ms (expected about 1.5 s)", ms);
    ht_close(c);
    still_serving(p);
    kh_stop(p);
}

/* The rate floor must not cut a body that keeps it: 3,000 bytes at about
 * 1,000 bytes/s take three body_timeouts and are answered. */
Test(http_limits, body_min_rate_spares_a_steady_body, .timeout = 30, .fini = kh_cleanup_all)
{
    const char *args[] = {"--set", HT_BODY_TIMEOUT "=1s", "--set", HT_BODY_MIN_RATE "=500", NULL};
    kh_proc *p = ht_start(NULL, args);
    ht_conn *c = ht_connect(kh_port(p, 0));
    char *b = repeat('s', 100);
    ht_send_str(c, "POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 3000\r\n\r\n");
    for (int i = 0; i < 30; i++) {
        ht_send(c, b, 100);
        if (i < 29) /* the last piece completes the body */
            kh_assert(p, ht_fill(c, 100) < 0 && !c->eof, "answered early, after %d00 bytes", i + 1);
    }
    ht_resp r;
    ht_expect_response(p, c, &r, 0);
    kh_assert(p, r.status == 200 && r.body_len == 3000, "a steady 3000-byte body: %d, %zu bytes",
              r.status, r.body_len);
    ht_resp_free(&r);
    ht_close(c);
    free(b);
    kh_stop(p);
}

Test(http_limits, header_timeout_408, .timeout = 30, .fini = kh_cleanup_all)
{
    const char *args[] = {"--set", HT_HEADER_TIMEOUT "=500ms", NULL};
    kh_proc *p = ht_start(NULL, args);
    ht_conn *c = ht_connect(kh_port(p, 0));
    long long t0 = kh_now_ms();
    ht_send_str(c, "GET / HTTP/1.1\r\nHost: h\r\n"); /* no blank line: head unfinished */
    expect_refused(p, c, 408, "an unfinished head");
    long long ms = kh_now_ms() - t0;
    kh_assert(p, ms >= 400 && ms < 5000, "408 after %lld ms with header_timeout=500ms", ms);
    ht_close(c);
    still_serving(p);
    kh_stop(p);
}

/* Slowloris: a byte now and then must not keep extending the deadline. */
Test(http_limits, slowloris_408, .timeout = 30, .fini = kh_cleanup_all)
{
    const char *args[] = {"--set", HT_HEADER_TIMEOUT "=1s", NULL};
    kh_proc *p = ht_start(NULL, args);
    ht_conn *c = ht_connect(kh_port(p, 0));
    long long t0 = kh_now_ms();
    ht_send_str(c, "GET / HTTP/1.1\r\n");
    int i = 0;
    while (ht_avail(c) == 0 && !c->eof && kh_now_ms() - t0 < 5000) {
        const char *line = ht_fmt("X-%d: %d\r\n", i, i);
        for (const char *s = line; *s; s++) { /* one byte every 50 ms */
            if (ht_try_send(c, s, 1) < 0 || ht_fill(c, 50) >= 0)
                break;
        }
        i++;
    }
    long long ms = kh_now_ms() - t0;
    expect_refused(p, c, 408, "a trickled head");
    kh_assert(p, ms >= 800 && ms < 4000, "slowloris cut after %lld ms with header_timeout=1s", ms);
    ht_close(c);
    still_serving(p);
    kh_stop(p);
}

Test(http_limits, body_timeout_408, .timeout = 30, .fini = kh_cleanup_all)
{
    const char *args[] = {"--set", HT_BODY_TIMEOUT "=500ms", NULL};
    kh_proc *p = ht_start(NULL, args);
    ht_conn *c = ht_connect(kh_port(p, 0));
    long long t0 = kh_now_ms();
    ht_send_str(c, "POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nhalf!");
    expect_refused(p, c, 408, "a body that stops half way");
    long long ms = kh_now_ms() - t0;
    kh_assert(p, ms >= 400 && ms < 5000, "408 after %lld ms with body_timeout=500ms", ms);
    ht_close(c);
    still_serving(p);
    kh_stop(p);
}

Test(http_limits, keepalive_timeout_closes_idle, .timeout = 30, .fini = kh_cleanup_all)
{
    const char *args[] = {"--set", HT_KEEPALIVE_TIMEOUT "=500ms", NULL};
    kh_proc *p = ht_start(NULL, args);
    ht_conn *c = ht_connect(kh_port(p, 0));
    ht_send_str(c, GET("/"));
    ht_resp r;
    ht_expect_response(p, c, &r, 0);
    ht_resp_free(&r);
    long long t0 = kh_now_ms();
    /* Between requests the server closes silently (no 408: RFC 9112 9.5). */
    int closed = ht_wait_closed(c, 5000);
    long long ms = kh_now_ms() - t0;
    kh_assert(p, closed == 1, "idle keep-alive connection %s",
              closed ? "received bytes" : "not closed within 5 s");
    kh_assert(p, ms >= 400 && ms < 4000, "closed after %lld ms with keepalive_timeout=500ms", ms);
    ht_close(c);
    kh_stop(p);
}

Test(http_limits, keepalive_timeout_restarts_with_each_request, .timeout = 30,
     .fini = kh_cleanup_all)
{
    const char *args[] = {"--set", HT_KEEPALIVE_TIMEOUT "=2s", NULL};
    kh_proc *p = ht_start(NULL, args);
    ht_conn *c = ht_connect(kh_port(p, 0));
    /* 4 s of requests 250 ms apart: longer than the timeout in all, never
     * idle for as long as it. */
    for (int i = 0; i < 16; i++) {
        ht_send_str(c, GET("/"));
        ht_resp r;
        ht_expect_response(p, c, &r, 0);
        kh_assert(p, r.status == 200, "request %d: %d", i, r.status);
        ht_resp_free(&r);
        kh_sleep_ms(250);
    }
    ht_close(c);
    kh_stop(p);
}

/* http1 keeps the state of its 128 most recently idle connections
 * (H1_WARM_MAX, modules/http1/h1.h) and parks the ones before them: a
 * connection parks once more connections than that went idle after it. On
 * one worker, so that they all count. */
#define MORE_THAN_WARM 140

/* A request on each of `others` (connected first if NULL): each goes idle. */
static void idle_after(kh_proc *p, ht_conn **others, int n)
{
    for (int k = 0; k < n; k++) {
        if (others[k] == NULL)
            others[k] = ht_connect(kh_port(p, 0));
        ht_expect_status_on(p, others[k], GET("/"), 200);
    }
}

/* An idle connection keeps no http1 state (modules/http1/park.c): what it
 * is rebuilt from must still say which timeout runs. After a request the
 * keep-alive timeout (3 s) applies, not the header timeout (300 ms): idle
 * for 1.2 s, parked, the connection still serves the next request. */
Test(http_limits, idle_connection_keeps_the_keepalive_timeout, .timeout = 60,
     .fini = kh_cleanup_all)
{
    const char *args[] = {"--set", HT_KEEPALIVE_TIMEOUT "=3s", "--set", HT_HEADER_TIMEOUT "=300ms",
                          NULL};
    kh_proc *p = ht_start_n(1, NULL, args);
    ht_conn *c = ht_connect(kh_port(p, 0));
    ht_conn *others[MORE_THAN_WARM] = {0};
    for (int i = 1; i <= 3; i++) {
        ht_expect_status_on(p, c, GET("/"), 200);
        idle_after(p, others, MORE_THAN_WARM);
        kh_assert(p, ht_wait_closed(c, 1200) == 0,
                  "closed (or bytes came) while idle after request %d", i);
    }
    ht_close(c);
    for (int k = 0; k < MORE_THAN_WARM; k++)
        ht_close(others[k]);
    kh_stop(p);
}

/* Connections parked and connections kept warm alike serve again: in the
 * order they went idle (the oldest parked), the reverse, pipelined, and
 * after a silence past the header timeout (a parked connection keeps the
 * keep-alive timeout). */
Test(http_limits, parked_and_warm_connections_serve_again, .timeout = 60, .fini = kh_cleanup_all)
{
    const char *args[] = {"--set", HT_KEEPALIVE_TIMEOUT "=5s", "--set", HT_HEADER_TIMEOUT "=300ms",
                          NULL};
    kh_proc *p = ht_start_n(1, NULL, args);
    enum { N = 200 };
    static ht_conn *conns[N];
    memset(conns, 0, sizeof conns);
    idle_after(p, conns, N);
    idle_after(p, conns, N);
    for (int k = N - 1; k >= 0; k--)
        ht_expect_status_on(p, conns[k], GET("/"), 200);
    for (int k = 0; k < N; k++)
        ht_send_str(conns[k], GET("/hello/1") GET("/hello/2"));
    for (int k = 0; k < N; k++) {
        for (int i = 1; i <= 2; i++) {
            ht_resp r;
            ht_expect_response(p, conns[k], &r, 0);
            kh_assert(p, strcmp(r.body, ht_fmt("Hello, %d!", i)) == 0,
                      "connection %d, response %d: '%s'", k, i, r.body);
            ht_resp_free(&r);
        }
    }
    kh_sleep_ms(800);
    idle_after(p, conns, N);
    for (int k = 0; k < N; k++)
        ht_close(conns[k]);
    kh_stop(p);
}

Test(http_limits, max_requests_per_connection, .timeout = 30, .fini = kh_cleanup_all)
{
    const char *args[] = {"--set", HT_MAX_REQUESTS "=3", NULL};
    kh_proc *p = ht_start(NULL, args);
    ht_conn *c = ht_connect(kh_port(p, 0));
    for (int i = 1; i <= 3; i++) {
        ht_send_str(c, GET("/"));
        ht_resp r;
        ht_expect_response(p, c, &r, 0);
        kh_assert(p, r.status == 200, "request %d: %d", i, r.status);
        int closing = ht_header_has_token(&r, "Connection", "close");
        kh_assert(p, closing == (i == 3), "request %d of 3: Connection: close %s:\n%s", i,
                  closing ? "present" : "absent", r.head);
        ht_resp_free(&r);
    }
    kh_assert(p, ht_wait_closed(c, 3000) == 1, "not closed after max_requests");
    ht_close(c);

    /* Pipelined past the limit: exactly 3 answers, then close. */
    c = ht_connect(kh_port(p, 0));
    ht_send_str(c, GET("/hello/1") GET("/hello/2") GET("/hello/3") GET("/hello/4") GET("/hello/5"));
    for (int i = 1; i <= 3; i++) {
        ht_resp r;
        ht_expect_response(p, c, &r, 0);
        kh_assert(p, strcmp(r.body, ht_fmt("Hello, %d!", i)) == 0, "response %d: '%s'", i, r.body);
        ht_resp_free(&r);
    }
    int closed = ht_wait_closed(c, 3000);
    kh_assert(p, closed == 1, "pipelined past max_requests: %s",
              closed ? "a 4th response" : "not closed");
    ht_close(c);
    kh_stop(p);
}

/* A connection that never sends a byte is closed too (by the header
 * timeout, or the keep-alive timeout: either way, not kept forever). */
Test(http_limits, silent_connection_is_closed, .timeout = 30, .fini = kh_cleanup_all)
{
    const char *args[] = {"--set", HT_HEADER_TIMEOUT "=500ms", "--set",
                          HT_KEEPALIVE_TIMEOUT "=500ms", NULL};
    kh_proc *p = ht_start(NULL, args);
    ht_conn *c = ht_connect(kh_port(p, 0));
    long long t0 = kh_now_ms();
    long n;
    while ((n = ht_fill(c, 5000)) > 0)
        ; /* a 408 is allowed; read until the close */
    long long ms = kh_now_ms() - t0;
    kh_assert(p, n == 0, "a silent connection was not closed within 5 s");
    kh_assert(p, ms < 3000, "closed after %lld ms", ms);
    if (ht_avail(c) > 0)
        kh_assert(p, strncmp(c->buf + c->pos, "HTTP/1.1 408 ", 13) == 0,
                  "unexpected bytes to a silent connection: '%s'", c->buf + c->pos);
    ht_close(c);
    kh_stop(p);
}

/* A value out of range stops keel at start with a line that names the
 * file and line of the key: the ranges http1 declares (keel/config.h),
 * checked by the core, and what only http1 checks (keel_config_error). */
Test(http_limits, out_of_range_values_name_file_and_line, .timeout = 30, .fini = kh_cleanup_all)
{
    static const struct {
        const char *line, *key, *why;
    } cases[] = {
        {"max_request_line = 10", "max_request_line", "expected a size between 64 and 1g"},
        {"max_header_bytes = 2g", "max_header_bytes", "expected a size between 256 and 1g"},
        {"header_timeout = 0", "header_timeout", "expected a duration between 1ms and 24h"},
        {"body_timeout = 0ms", "body_timeout", "expected a duration between 1ms and 24h"},
        {"server = a\x7f", "server", "control character 0x7f at 1"},
    };
    const char *args[] = {"-t", NULL};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char conf[1024];
        /* The key is on line 7: [keel] + 4 lines (module_path is one) + [http1]. */
        snprintf(conf, sizeof conf,
                 "[keel]\nlisten = 127.0.0.1:0 http1\nmodules = http1\n" KH_MODULE_PATH
                 "[http1]\nkeepalive_timeout = 5s\n%s\n",
                 cases[i].line);
        kh_proc *p = kh_spawn(conf, args);
        int status = kh_wait_exit(p, 10000);
        kh_assert(p, status == 1, "%s: keel -t exit status %d", cases[i].line, status);
        char want[512];
        snprintf(want, sizeof want, "%s:7: [http1] %s: %s", p->conf, cases[i].key, cases[i].why);
        kh_assert(p, strstr(kh_stderr(p), want) != NULL, "%s: no '%s' in the log", cases[i].line,
                  want);
        kh_stop(p);
    }
}
