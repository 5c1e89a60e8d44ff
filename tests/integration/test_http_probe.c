/* The core's HTTP layer through a protocol that is not HTTP/1: the probe
 * module (tests/modules/mod_probe.c) feeds it requests and writes down, as
 * text, every sink call it gets. What an HTTP/2 module would be handed must
 * not carry HTTP/1 habits: no Connection field (RFC 9113 8.2.2 forbids it),
 * the wish to close told by keel_http_request_keep_alive and done, and an
 * upgrade refused where the sink has none. */
#define _GNU_SOURCE
#include "test_http.h"

static kh_proc *start(const char *protocol, const char *modules)
{
    char conf[1024];
    snprintf(conf, sizeof conf,
             "[keel]\nlisten = 127.0.0.1:0 %s\nworkers = 1\nmodules = %s\n" KH_MODULE_PATH,
             protocol, modules);
    return kh_start(conf, NULL, 1, 10000);
}

/* Sends one line on a new connection and reads exactly len(want) bytes. */
static void expect_exchange(kh_proc *p, const char *line, const char *want)
{
    int fd = kh_connect("127.0.0.1", kh_port(p, 0));
    kh_assert(p, fd >= 0, "connect");
    kh_assert(p, kh_send_str(fd, line) == 0, "send");
    char buf[2048];
    size_t n = kh_recv_n(fd, buf, sizeof buf, strlen(want), 5000);
    kh_assert(p, n == strlen(want) && memcmp(buf, want, n) == 0, "%s-> got:\n%.*s\nexpected:\n%s",
              line, (int)n, buf, want);
    close(fd);
}

Test(http_probe, nothing_connection_specific_reaches_the_protocol, .timeout = 30,
     .fini = kh_cleanup_all)
{
    kh_proc *p = start("probe", "probe");
    expect_exchange(p, "GET /probe/plain\n",
                    "head 200 keep-alive=1 Content-Type: text/plain\n"
                    "body 2 last=1\n"
                    "done keep-alive=1\n");
    /* Connection, Keep-Alive, Proxy-Connection and Transfer-Encoding are
     * the protocol's; Upgrade goes through (a 426 needs it). */
    expect_exchange(p, "GET /probe/hop\n",
                    "head 200 keep-alive=1 Upgrade: example/1; X-Kept: 1; "
                    "Content-Type: text/plain\n"
                    "body 2 last=1\n"
                    "done keep-alive=1\n");
    kh_stop(p);
}

/* The handler's "Connection: close" and keel_response_close_connection
 * reach the protocol as the flag, never as a field. */
Test(http_probe, closing_is_a_flag, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = start("probe", "probe");
    const char *want = "head 200 keep-alive=0 Content-Type: text/plain\n"
                       "body 2 last=1\n"
                       "done keep-alive=0\n";
    expect_exchange(p, "GET /probe/close-field\n", want);
    expect_exchange(p, "GET /probe/close-call\n", want);
    kh_stop(p);
}

/* A protocol built for ABI 1.2 could not ask: it still learns it from a
 * "Connection: close" field, as before 1.3. */
Test(http_probe, a_sink_from_before_1_3_still_gets_the_field, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = start("probe-old", "probe");
    expect_exchange(p, "GET /probe/close-call\n",
                    "head 200 keep-alive=0 Content-Type: text/plain; Connection: close\n"
                    "body 2 last=1\n"
                    "done keep-alive=0\n");
    expect_exchange(p, "GET /probe/plain\n",
                    "head 200 keep-alive=1 Content-Type: text/plain\n"
                    "body 2 last=1\n"
                    "done keep-alive=1\n");
    kh_stop(p);
}

/* Whether an error status ends the connection is the protocol's call: the
 * core's own answers (a handler's 400, the router's 404, a path above the
 * root) do not ask for it. */
Test(http_probe, error_statuses_do_not_close, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = start("probe", "probe");
    expect_exchange(p, "GET /probe/status\n",
                    "head 400 keep-alive=1 Content-Type: text/plain; charset=utf-8\n"
                    "body 16 last=1\n"
                    "done keep-alive=1\n");
    expect_exchange(p, "GET /nowhere\n",
                    "head 404 keep-alive=1 Content-Type: text/plain; charset=utf-8\n"
                    "body 14 last=1\n"
                    "done keep-alive=1\n");
    expect_exchange(p, "GET /../up\n",
                    "head 400 keep-alive=1 Content-Type: text/plain; charset=utf-8\n"
                    "body 16 last=1\n"
                    "done keep-alive=1\n");
    kh_stop(p);
}

/* Through http1 the flag becomes the field again, written once by http1;
 * the handler's connection-specific fields are replaced by http1's own. */
Test(http_probe, http1_writes_its_own_connection_field, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = start("http1", "http1 probe");
    ht_conn *c = ht_connect(kh_port(p, 0));
    ht_send_str(c, "GET /probe/hop HTTP/1.1\r\nHost: x\r\n\r\n"
                   "GET /probe/close-field HTTP/1.1\r\nHost: x\r\n\r\n"
                   "GET /probe/plain HTTP/1.1\r\nHost: x\r\n\r\n");
    ht_resp r;
    ht_expect_response(p, c, &r, 0);
    kh_assert(p, r.status == 200 && r.content_length == 2 && !r.chunked,
              "the handler's Transfer-Encoding framed the body:\n%s", r.head);
    kh_assert(p, !ht_header(&r, "Keep-Alive") && !ht_header(&r, "Proxy-Connection"),
              "connection-specific fields passed on:\n%s", r.head);
    /* RFC 9110 7.8: an Upgrade field goes with the "upgrade" option. */
    kh_assert(p,
              ht_header_count(&r, "Connection") == 1 &&
                  ht_header_has_token(&r, "Connection", "upgrade") &&
                  !ht_header_has_token(&r, "Connection", "X-Kept"),
              "Connection field:\n%s", r.head);
    ht_resp_free(&r);

    ht_expect_response(p, c, &r, 0);
    kh_assert(p, r.status == 200, "status %d", r.status);
    kh_assert(p,
              ht_header_count(&r, "Connection") == 1 &&
                  ht_header_has_token(&r, "Connection", "close") &&
                  !ht_header_has_token(&r, "Connection", "keep-alive"),
              "not one \"Connection: close\":\n%s", r.head);
    ht_resp_free(&r);
    int closed = ht_wait_closed(c, 5000);
    kh_assert(p, closed == 1, "%s after Connection: close",
              closed ? "the next request was answered" : "no close");
    ht_close(c);
    kh_stop(p);
}

/* A sink without upgrade refuses an upgrade as HTTP/2 would: the handler
 * learns KEEL_ERR_UNSUPPORTED and answers normally; so does one built
 * before ABI 1.3, which has no upgrade member at all. A
 * sink with one gets 101 with the handler's and filters' fields, none of
 * them connection-specific, and the bytes after the request go to the new
 * protocol. */
Test(http_probe, upgrade_through_the_sink, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = start("probe", "probe upgrade");
    expect_exchange(p, "GET /upgrade/upper\n",
                    "head 200 keep-alive=1 Content-Type: text/plain; X-Head-Filter: 200\n"
                    "body 26 last=1\n"
                    "done keep-alive=1\n");
    kh_stop(p);

    p = start("probe-old", "probe upgrade");
    expect_exchange(p, "GET /upgrade/upper\n",
                    "head 200 keep-alive=1 Content-Type: text/plain; X-Head-Filter: 200\n"
                    "body 26 last=1\n"
                    "done keep-alive=1\n");
    kh_stop(p);

    p = start("probe-up", "probe upgrade");
    expect_exchange(p, "GET /upgrade/upper\nafter\n",
                    "upgrade 101 Upgrade: upper; X-Head-Filter: 101; X-Set-Status: STATE\n"
                    "upper ready\n"
                    "AFTER\n");
    /* The protocol's wire form is its own: the probe switches without
     * asking about Upgrade fields, so the core alone refuses a protocol
     * nobody registered. */
    expect_exchange(p, "GET /upgrade/nosuch\n",
                    "head 200 keep-alive=1 Content-Type: text/plain; X-Head-Filter: 200\n"
                    "body 23 last=1\n"
                    "done keep-alive=1\n");
    kh_stop(p);
}

/* Request trailers (ABI 1.5) from a protocol that is not HTTP/1 (the
 * probe-tr protocol passes them as an HTTP/2 module would, lower-case,
 * with a pseudo-field): the core drops what RFC 9110 6.5.1 rules out of a
 * trailer section for every protocol alike, takes one trailer section
 * only, and shows the handler nothing until the body is read, although
 * the protocol gave the trailers before the handler ran. */
Test(http_probe, request_trailers_from_another_protocol, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = start("probe-tr", "probe trailers");
    expect_exchange(p, "POST /trailers/read\n",
                    "trailers success\n"
                    "again not allowed in this state\n"
                    "head 200 keep-alive=1 Content-Type: text/plain\n"
                    "body last=1\n"
                    "before=0\nbody=2\ncount=2\nx-checksum: c1\ngrpc-status: 0\nlookup=c1\n"
                    "late=not allowed in this state\n"
                    "done keep-alive=1\n");
    expect_exchange(p, "POST /trailers/stream\n",
                    "trailers success\n"
                    "again not allowed in this state\n"
                    "head 200 keep-alive=1 Content-Type: text/plain\n"
                    "body last=1\n"
                    "before=0\nduring=0\nbody=2\ncount=2\nx-checksum: c1\ngrpc-status: 0\n"
                    "lookup=c1\nlate=not allowed in this state\n"
                    "done keep-alive=1\n");
    kh_stop(p);
}

/* Issue 23: a protocol that does not say it checked its heads (the probe's
 * sink has no KEEL_HTTP_SINK_CHECKED) has them checked by the core before
 * any filter or route sees them: a fragment in the target ("/admin#/../x"
 * would be routed as "/x"), a space in it, a method that is not a token
 * are a 400, and nothing is routed. */
Test(http_probe, unchecked_heads_are_checked_by_the_core, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = start("probe", "probe");
    static const char *const bad[] = {"GET /probe#/../probe/plain\n", "GET /probe/pl ain\n",
                                      "G(T /probe/plain\n", "GET /probe/\x01plain\n"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int fd = kh_connect("127.0.0.1", kh_port(p, 0));
        kh_assert(p, fd >= 0, "connect");
        kh_send_str(fd, bad[i]);
        char buf[512];
        size_t n = kh_recv_n(fd, buf, sizeof buf, 8, 5000);
        kh_assert(p, n >= 8 && memcmp(buf, "head 400", 8) == 0, "%s-> %.*s", bad[i], (int)n, buf);
        close(fd);
    }
    expect_exchange(p, "GET /probe/plain\n",
                    "head 200 keep-alive=1 Content-Type: text/plain\n"
                    "body 2 last=1\n"
                    "done keep-alive=1\n");
    kh_stop(p);
}
