/* The proxy forwards only what it should (issue 23, sections 2 and 3):
 * Upgrade only for the protocols allowed (never h2c, RFC 9113 3.1), an
 * absolute-form target in origin form with its authority for Host (RFC
 * 9112 3.2.2), no body after a 1xx, 204, 304 or HEAD whatever the length
 * says (RFC 9110 6.4.1, 8.6), an HTTP/2 body without content-length
 * forwarded (chunked), and nothing HTTP/1.1 cannot carry passed on from
 * HTTP/2 (RFC 9110 5.5, RFC 9113 8.2.1). The upstream is proxy_upstream.py;
 * HTTP/2 requests are sent raw by proxy_h2client.py (tests/h2/h2lib.py),
 * so that they can be what a hostile client sends. */
#define _GNU_SOURCE
#include "test_proxy.h"

/* keel with http1 (listener 0) and h2 (listener 1, prior knowledge) in
 * front of the Python upstream: "pass = / py OPTIONS", then `extra`. */
static kh_proc *keel_for(kh_proc **up, const char *pass_options, const char *extra)
{
    *up = px_upstream();
    char conf[4096];
    snprintf(conf, sizeof conf,
             "[keel]\n"
             "listen = 127.0.0.1:0 http1\n"
             "listen = 127.0.0.1:0 h2\n"
             "workers = 1\n"
             "modules = http1 h2 proxy\n" KH_MODULE_PATH "[proxy]\n"
             "upstream = py 127.0.0.1:%u\n"
             "pass = / py %s\n"
             "%s",
             kh_port(*up, 0), pass_options ? pass_options : "", extra ? extra : "");
    kh_proc *p = kh_start(conf, NULL, 2, 10000);
    kh_assert(p, kh_port(p, 1) > 0, "no h2 port");
    return p;
}

/* One request on a new connection, read until the server closes (the
 * request says "Connection: close") or 10 s pass. */
static char *raw_exchange(kh_proc *p, const char *request)
{
    int fd = kh_connect("127.0.0.1", kh_port(p, 0));
    kh_assert(p, fd >= 0, "connect");
    kh_assert(p, kh_send_str(fd, request) == 0, "send");
    size_t cap = 1 << 20;
    char *buf = malloc(cap + 1);
    cr_assert(buf);
    kh_recv_n(fd, buf, cap + 1, cap, 10000);
    close(fd);
    return buf;
}

/* What the upstream logged about requests (its stderr). */
static const char *upstream_log(kh_proc *up)
{
    return kh_stderr(up);
}

/* One HTTP/2 request through proxy_h2client.py (SPEC is its JSON). */
static ht_run_result h2_request(kh_proc *p, const char *spec)
{
    static char script[1024];
    char here[1024], port[16];
    snprintf(here, sizeof here, "%s", __FILE__);
    snprintf(script, sizeof script, "%s/proxy_h2client.py", dirname(here));
    snprintf(port, sizeof port, "%u", kh_port(p, 1));
    const char *argv[] = {px_python(), script, port, spec, NULL};
    ht_run_result rr = ht_run(argv, 40000);
    if (rr.status == 77)
        cr_skip_test("python3-h2 (hpack, hyperframe) is not installed");
    return rr;
}

#define H2_SHOW(rr)      "\n---- client exit %d ----\n%s%.2000s\n---- end ----"
#define H2_SHOW_ARGS(rr) (rr).status, (rr).err, (rr).out

/* The request never reached the upstream as an HTTP/1.1 request: keel
 * refused it (400), or HTTP/2 reset it before (once h2 validates it too). */
static int refused(const ht_run_result *rr)
{
    return strncmp(rr->out, "status 400\n", 11) == 0 || strncmp(rr->out, "reset ", 6) == 0;
}

/* ---- 1. Upgrade ---------------------------------------------------------------------------- */

/* An h2c-capable upstream switches any path to HTTP/2 when it sees
 * "Upgrade: h2c": a client would then speak HTTP/2 straight to it, past
 * keel's routes. h2c is never passed (RFC 9113 3.1 deprecates it), whatever
 * the list says, and HTTP2-Settings is hop-by-hop (RFC 7540 3.2.1); the
 * request goes on as an ordinary one, as nginx passes it. */
Test(proxy_forward, upgrade_h2c_never_passed, .timeout = 60, .fini = kh_cleanup_all)
{
    const char *lists[] = {"", "upgrade = h2c websocket\n"};
    for (size_t i = 0; i < 2; i++) {
        kh_proc *up, *p = keel_for(&up, NULL, lists[i]);
        char *r = raw_exchange(p, "GET /headers HTTP/1.1\r\nHost: x\r\n"
                                  "Connection: Upgrade, close\r\nUpgrade: h2c\r\n"
                                  "HTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n");
        kh_assert(p, strncmp(r, "HTTP/1.1 200 ", 13) == 0, "list '%s': an ordinary answer: %.600s",
                  lists[i], r);
        const char *body = strstr(r, "\r\n\r\n");
        kh_assert(p, body && !strcasestr(body, "upgrade") && !strcasestr(body, "http2-settings"),
                  "the upstream saw: %s", body ? body : r);
        free(r);
        /* Offered beside websocket: only websocket goes. */
        r = raw_exchange(p, "GET /headers HTTP/1.1\r\nHost: x\r\n"
                            "Connection: Upgrade, close\r\nUpgrade: h2c, websocket\r\n\r\n");
        body = strstr(r, "\r\n\r\n");
        kh_assert(p, strncmp(r, "HTTP/1.1 200 ", 13) == 0 && body != NULL, "answer: %.600s", r);
        kh_assert(p, strstr(body, "Upgrade: websocket\n") && !strcasestr(body, "h2c"),
                  "the upstream saw: %s", body);
        free(r);
        kh_assert(up, strstr(upstream_log(up), "upgrade h2c") == NULL,
                  "the upstream switched to h2c");
        px_stop(p);
        kh_stop(up);
    }
}

/* `upgrade =` lists the protocols passed ([proxy], and per route with
 * upgrade= repeated, or off); anything else goes as a plain request. */
Test(proxy_forward, upgrade_allow_list, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *up, *p = keel_for(&up, NULL, "upgrade = foo/2\npass = /ws py upgrade=websocket\n");
    char *r = raw_exchange(p, "GET /headers HTTP/1.1\r\nHost: x\r\n"
                              "Connection: Upgrade, close\r\nUpgrade: FOO/2\r\n\r\n");
    const char *body = strstr(r, "\r\n\r\n");
    kh_assert(p, body && strstr(body, "Upgrade: FOO/2\n") && strstr(body, "Connection: upgrade\n"),
              "listed: passed: %s", r);
    free(r);
    r = raw_exchange(p, "GET /headers HTTP/1.1\r\nHost: x\r\n"
                        "Connection: Upgrade, close\r\nUpgrade: websocket\r\n\r\n");
    body = strstr(r, "\r\n\r\n");
    kh_assert(p, body && strncmp(r, "HTTP/1.1 200 ", 13) == 0 && !strcasestr(body, "upgrade"),
              "not listed for /: a plain request: %s", r);
    free(r);
    /* the route's own list */
    int fd = kh_connect("127.0.0.1", kh_port(p, 0));
    kh_send_str(fd,
                "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n");
    char head[1024];
    size_t n = kh_recv_n(fd, head, sizeof head, 13, 5000);
    kh_assert(p, n >= 13 && strncmp(head, "HTTP/1.1 101 ", 13) == 0, "route upgrade=websocket: %s",
              head);
    close(fd);
    px_stop(p);
}

/* The upstream's 101 must switch to a protocol the client asked for and
 * keel passed (RFC 9110 7.8): a 101 naming another is not relayed. */
Test(proxy_forward, upgrade_101_names_an_offered_protocol, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *up, *p = keel_for(&up, NULL, "");
    int fd = kh_connect("127.0.0.1", kh_port(p, 0));
    kh_send_str(fd, "GET /ws?proto=h2c HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                    "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                    "Sec-WebSocket-Version: 13\r\n\r\n");
    char head[1024];
    size_t n = kh_recv_n(fd, head, sizeof head, 13, 5000);
    kh_assert(p, n >= 13 && strncmp(head, "HTTP/1.1 502 ", 13) == 0, "a 101 to h2c: %s", head);
    close(fd);
    px_stop(p);
}

/* ---- 2. absolute-form ------------------------------------------------------------------------ */

/* RFC 9112 3.2.2: a proxy replaces Host with the target's authority and
 * (3.2.1) sends an origin server the origin form. The upstream used to get
 * "GET http://evil.example/headers" and pick its virtual host from that. */
Test(proxy_forward, absolute_form_goes_as_origin_form, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *up, *p = keel_for(&up, NULL, "pass = /fixed py host=fixed.example\n");
    char *r = raw_exchange(p, "GET http://evil.example/headers?x=1 HTTP/1.1\r\n"
                              "Host: good.example\r\nConnection: close\r\n\r\n");
    const char *body = strstr(r, "\r\n\r\n");
    kh_assert(p, strncmp(r, "HTTP/1.1 200 ", 13) == 0 && body, "answer: %.600s", r);
    kh_assert(p, strstr(body, "\nHost: evil.example\n"), "Host is the target's authority: %s",
              body);
    kh_assert(p, strstr(body, "X-Forwarded-Host: evil.example\n"), "X-Forwarded-Host: %s", body);
    free(r);
    char want[128];
    snprintf(want, sizeof want, "req %u GET /headers?x=1 conn=", kh_port(up, 0));
    kh_assert(up, strstr(upstream_log(up), want), "origin form upstream (%s)", want);
    /* No path: "/" (RFC 9112 3.2.1), the query kept. */
    r = raw_exchange(
        p, "GET http://evil.example?y=2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    free(r);
    snprintf(want, sizeof want, "req %u GET /?y=2 conn=", kh_port(up, 0));
    kh_assert(up, kh_wait_log(up, want, 3000), "the empty path as / (%s)", want);
    /* host= still decides, over the target's authority. */
    r = raw_exchange(
        p, "GET http://evil.example/fixed HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    free(r);
    kh_assert(up, strstr(upstream_log(up), "GET http://") == NULL,
              "an absolute-form target passed");

    /* The same target as HTTP/2's :path: refused (RFC 9113 8.3.1 wants
     * origin-form), or passed in origin form; never as it came. */
    ht_run_result rr = h2_request(p, "{\"path\": \"http://evil.example/headers?h2=1\","
                                     "\"authority\": \"good.example\"}");
    if (!refused(&rr)) {
        kh_assert(p, strncmp(rr.out, "status 200\n", 11) == 0, "h2" H2_SHOW(rr), H2_SHOW_ARGS(rr));
        kh_assert(p, strstr(rr.out, "Host: evil.example\n"), "h2 Host" H2_SHOW(rr),
                  H2_SHOW_ARGS(rr));
        snprintf(want, sizeof want, "req %u GET /headers?h2=1 conn=", kh_port(up, 0));
        kh_assert(up, strstr(upstream_log(up), want), "h2: origin form upstream (%s)", want);
    }
    ht_run_free(&rr);
    kh_assert(up, strstr(upstream_log(up), "GET http://") == NULL,
              "an absolute-form target passed");
    px_stop(p);
}

/* ---- 3. responses without a body ------------------------------------------------------------ */

/* RFC 9110 6.4.1: 1xx, 204 and 304 responses, and any response to HEAD,
 * end with their head whatever Content-Length says. keel used to wait for
 * the declared bytes until read_timeout; the pooled connection must stay
 * usable afterwards. */
Test(proxy_forward, no_body_whatever_the_length, .timeout = 60, .fini = kh_cleanup_all)
{
    px_need_curl();
    kh_proc *up, *p = keel_for(&up, "read_timeout=5s", "");
    char url[160];
    const char *paths[] = {"/nobody?code=304&cl=10", "/nobody?code=204&cl=10", "/interim_cl"};
    const int codes[] = {304, 204, 200};
    for (size_t i = 0; i < 3; i++) {
        long long t0 = kh_now_ms();
        ht_run_result rr = px_get(px_url(url, sizeof url, p, 0, paths[i]));
        long long took = kh_now_ms() - t0;
        kh_assert(p, rr.status == 0 && px_status(&rr) == codes[i], "%s" PX_SHOW(rr), paths[i],
                  PX_SHOW_ARGS(rr));
        kh_assert(p, took < 2500, "%s took %lld ms (read_timeout is 5 s)", paths[i], took);
        if (codes[i] == 200)
            kh_assert(p, strcmp(px_body(&rr), "ok") == 0, "the final body" PX_SHOW(rr),
                      PX_SHOW_ARGS(rr));
        ht_run_free(&rr);
    }
    /* HEAD of a response that declares a length. */
    const char *head[] = {"-I", px_url(url, sizeof url, p, 0, "/nobody?code=200&cl=10"), NULL};
    ht_run_result rr = px_curl(head);
    kh_assert(p, rr.status == 0 && px_status(&rr) == 200, "HEAD" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    ht_run_free(&rr);
    /* Every one of them on the one pooled connection, and it still works. */
    rr = px_get(px_url(url, sizeof url, p, 0, "/count"));
    kh_assert(p, strcmp(px_body(&rr), "conn=1 req=5") == 0, "pooled connection reused: %s",
              px_body(&rr));
    ht_run_free(&rr);
    px_stop(p);
}

/* ---- 4. an HTTP/2 body of unknown length ---------------------------------------------------- */

/* HTTP/2 frames a body by END_STREAM, content-length is optional (RFC
 * 9113 8.1.1): such a body goes upstream chunked. It used to be dropped
 * and the upstream's answer to an empty request relayed. */
Test(proxy_forward, h2_body_without_content_length, .timeout = 90, .fini = kh_cleanup_all)
{
    kh_proc *up, *p = keel_for(&up, NULL, "");
    ht_run_result rr = h2_request(p, "{\"method\": \"POST\", \"path\": \"/echo\","
                                     "\"body\": \"through HTTP/2 without a length\"}");
    kh_assert(p, strstr(rr.out, "status 200\n") && strstr(rr.out, "echo match\n"),
              "a small body" H2_SHOW(rr), H2_SHOW_ARGS(rr));
    ht_run_free(&rr);
    /* More than the windows and the proxy's buffer hold at once. */
    rr = h2_request(p, "{\"method\": \"PUT\", \"path\": \"/echo\", \"body_len\": 300000}");
    kh_assert(p, strstr(rr.out, "status 200\n") && strstr(rr.out, "echo match\n"),
              "300 kB" H2_SHOW(rr), H2_SHOW_ARGS(rr));
    ht_run_free(&rr);
    /* An empty DATA with END_STREAM: an empty body. */
    rr = h2_request(p, "{\"method\": \"POST\", \"path\": \"/echo\", \"body\": \"\"}");
    kh_assert(p, strstr(rr.out, "status 200\nlength 0\n"), "empty" H2_SHOW(rr), H2_SHOW_ARGS(rr));
    ht_run_free(&rr);
    /* With content-length, as before; and a GET (END_STREAM on HEADERS)
     * has no body and no framing fields upstream. */
    rr = h2_request(p, "{\"method\": \"POST\", \"path\": \"/echo\", \"body\": \"abc\","
                       "\"fields\": [[\"content-length\", \"3\"]]}");
    kh_assert(p, strstr(rr.out, "status 200\n") && strstr(rr.out, "echo match\n"),
              "with a length" H2_SHOW(rr), H2_SHOW_ARGS(rr));
    ht_run_free(&rr);
    rr = h2_request(p, "{\"path\": \"/headers\"}");
    kh_assert(p,
              strstr(rr.out, "status 200\n") && !strcasestr(rr.out, "transfer-encoding") &&
                  !strcasestr(rr.out, "content-length"),
              "GET" H2_SHOW(rr), H2_SHOW_ARGS(rr));
    ht_run_free(&rr);
    px_stop(p);
}

/* ---- 5. HTTP/2 to HTTP/1.1 --------------------------------------------------------------------
 */

/* What HTTP/2 can carry and an HTTP/1.1 request cannot (RFC 9110 5.5, RFC
 * 9113 8.2.1, 8.3.1) is refused, never forwarded: it used to reach the
 * upstream as "GET /headers /public HTTP/1.1". Each case is marked by its
 * query, which the upstream must never log. */
Test(proxy_forward, gateway_refuses_what_http11_cannot_carry, .timeout = 90, .fini = kh_cleanup_all)
{
    kh_proc *up, *p = keel_for(&up, NULL, "");
    static const struct {
        const char *spec, *marker;
    } cases[] = {
        {"{\"path\": \"/headers?case=1 /public\"}", "case=1"},
        {"{\"path\": \"/headers?case=2\\t/public\"}", "case=2"},
        {"{\"method\": \"GET /x\", \"path\": \"/headers?case=3\"}", "case=3"},
        {"{\"method\": \"G\\u0001T\", \"path\": \"/headers?case=4\"}", "case=4"},
        {"{\"path\": \"/headers?case=5\", \"fields\": [[\"x-ctl\", \"a\\u0001b\"]]}", "case=5"},
        {"{\"path\": \"/headers?case=6\", \"fields\": [[\"x-del\", \"a\\u007fb\"]]}", "case=6"},
        {"{\"path\": \"/headers?case=7\", \"authority\": \"evil host\"}", "case=7"},
        {"{\"path\": \"/headers?case=8\", \"authority\": \"user@evil.example\"}", "case=8"},
        {"{\"path\": \"/headers?case=9\\u0080\"}", "case=9"},
        {"{\"path\": \"/headers?case=10\", \"fields\": [[\"host\", \"a.example\"], "
         "[\"host\", \"b.example\"]]}",
         "case=10"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ht_run_result rr = h2_request(p, cases[i].spec);
        kh_assert(p, refused(&rr), "%s: refused" H2_SHOW(rr), cases[i].spec, H2_SHOW_ARGS(rr));
        ht_run_free(&rr);
        kh_assert(up, strstr(upstream_log(up), cases[i].marker) == NULL, "%s reached the upstream",
                  cases[i].spec);
    }
    /* A sound request on the same terms still goes. */
    ht_run_result rr = h2_request(p, "{\"path\": \"/headers?case=ok\", \"fields\": "
                                     "[[\"x-fine\", \"tab\\tinside \\u00e9\"]]}");
    kh_assert(p, strstr(rr.out, "status 200\n") && strstr(rr.out, "x-fine: tab\tinside \xe9\n"),
              "sound" H2_SHOW(rr), H2_SHOW_ARGS(rr));
    ht_run_free(&rr);
    px_stop(p);
}

/* ---- hop-by-hop fields named by any Connection field ---------------------------------------- */

/* A message may carry Connection more than once (RFC 9110 5.3: the same
 * as one list); every option of every one of them is hop-by-hop (7.6.1).
 * Only the first field's used to count, so a second "Connection: X-Secret"
 * let X-Secret through, both ways. */
Test(proxy_forward, every_connection_field_counts, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *up, *p = keel_for(&up, NULL, "");
    char *r = raw_exchange(p, "GET /headers HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n"
                              "Connection: X-Secret, close\r\nX-Secret: hop\r\n\r\n");
    const char *body = strstr(r, "\r\n\r\n");
    kh_assert(p, strncmp(r, "HTTP/1.1 200 ", 13) == 0 && body, "answer: %.600s", r);
    kh_assert(p, !strcasestr(body, "x-secret"), "a field named by the second Connection: %s", body);
    free(r);
    r = raw_exchange(p, "GET /twoconn HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    kh_assert(p, strncmp(r, "HTTP/1.1 200 ", 13) == 0 && !strcasestr(r, "x-hop2"),
              "a response field named by the second Connection: %.600s", r);
    free(r);
    px_stop(p);
}
