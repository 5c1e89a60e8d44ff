/* The reverse proxy's everyday behaviour, with curl as the client: keel's
 * own hello and the Python upstream (proxy_upstream.py) behind it. GET,
 * HEAD, bodies by Content-Length and chunked, the fields a proxy adds and
 * removes (RFC 9110 7.6, RFC 7239), Host and Location rewriting, Date and
 * Server, the keep-alive pool, trailers, 100-continue, HTTP/1.0 clients. */
#define _GNU_SOURCE
#include "test_proxy.h"

static kh_proc *with_python(kh_proc **up, const char *extra_pass_options)
{
    *up = px_upstream();
    char section[1024];
    snprintf(section, sizeof section, "upstream = py 127.0.0.1:%u\npass = / py %s\n%s",
             kh_port(*up, 0), extra_pass_options ? extra_pass_options : "", "");
    return px_keel(section, 0);
}

static ht_run_result get_headers(kh_proc *p, const char *const *extra)
{
    char url[128];
    const char *args[32] = {"-i"};
    int n = 1;
    for (; extra && *extra; extra++)
        args[n++] = *extra;
    args[n++] = px_url(url, sizeof url, p, 0, "/headers");
    args[n] = NULL;
    return px_curl(args);
}

Test(proxy, hello_get_head_post, .timeout = 60, .fini = kh_cleanup_all)
{
    px_need_curl();
    kh_proc *up = px_hello();
    char section[256], url[128];
    snprintf(section, sizeof section, "upstream = hello 127.0.0.1:%u\npass = / hello\n",
             kh_port(up, 0));
    kh_proc *p = px_keel(section, 0);

    ht_run_result rr = px_get(px_url(url, sizeof url, p, 0, "/"));
    kh_assert(p, rr.status == 0 && px_status(&rr) == 200, "GET /" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    kh_assert(p, strcmp(px_body(&rr), "Hello, World!") == 0, "body" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    kh_assert(p, strcasestr(rr.out, "\r\nVia: 1.1 keel\r\n") != NULL, "Via" PX_SHOW(rr),
              PX_SHOW_ARGS(rr));
    ht_run_free(&rr);

    /* HEAD: the upstream's Content-Length, no body (RFC 9110 9.3.2). */
    const char *head[] = {"-I", px_url(url, sizeof url, p, 0, "/"), NULL};
    rr = px_curl(head);
    kh_assert(p, rr.status == 0 && px_status(&rr) == 200, "HEAD" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    kh_assert(p, strcasestr(rr.out, "Content-Length: 13\r\n") != NULL, "HEAD length" PX_SHOW(rr),
              PX_SHOW_ARGS(rr));
    ht_run_free(&rr);

    /* A body by Content-Length, and one chunked. */
    const char *post[] = {"-i", "--data-binary", "proxied body",
                          px_url(url, sizeof url, p, 0, "/echo"), NULL};
    rr = px_curl(post);
    kh_assert(p, px_status(&rr) == 200 && strcmp(px_body(&rr), "proxied body") == 0,
              "POST" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    ht_run_free(&rr);
    const char *chunked[] = {"-i",
                             "-H",
                             "Transfer-Encoding: chunked",
                             "--data-binary",
                             "chunked body",
                             px_url(url, sizeof url, p, 0, "/echo"),
                             NULL};
    rr = px_curl(chunked);
    kh_assert(p, px_status(&rr) == 200 && strcmp(px_body(&rr), "chunked body") == 0,
              "chunked POST" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    ht_run_free(&rr);

    /* A streamed (chunked) response stays whole. */
    rr = px_get(px_url(url, sizeof url, p, 0, "/stream"));
    kh_assert(p, px_status(&rr) == 200 && strstr(px_body(&rr), "chunk 5 of 5") != NULL,
              "stream" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    ht_run_free(&rr);
    px_stop(p);
}

Test(proxy, forwarded_and_hop_by_hop_fields, .timeout = 60, .fini = kh_cleanup_all)
{
    px_need_curl();
    kh_proc *up, *p = with_python(&up, NULL);
    const char *extra[] = {"-H", "Connection: X-Custom",         "-H", "X-Custom: must-not-pass",
                           "-H", "Keep-Alive: timeout=9",        "-H", "TE: trailers",
                           "-H", "Proxy-Connection: keep-alive", "-H", "X-Forwarded-For: 10.1.2.3",
                           "-H", "Forwarded: for=10.1.2.3",      "-H", "X-End-To-End: yes",
                           NULL};
    ht_run_result rr = get_headers(p, extra);
    const char *b = px_body(&rr);
    kh_assert(p, px_status(&rr) == 200, "status" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    char want[256];
    snprintf(want, sizeof want, "Host: 127.0.0.1:%u\n", kh_port(p, 0));
    kh_assert(p, strstr(b, want) != NULL, "the client's Host" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    kh_assert(p, strstr(b, "X-End-To-End: yes\n") != NULL, "end-to-end field" PX_SHOW(rr),
              PX_SHOW_ARGS(rr));
    kh_assert(p, strstr(b, "X-Forwarded-For: 10.1.2.3, 127.0.0.1\n") != NULL,
              "X-Forwarded-For appended" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    kh_assert(p, strstr(b, "X-Forwarded-Proto: http\n") != NULL, "X-Forwarded-Proto" PX_SHOW(rr),
              PX_SHOW_ARGS(rr));
    snprintf(want, sizeof want, "X-Forwarded-Host: 127.0.0.1:%u\n", kh_port(p, 0));
    kh_assert(p, strstr(b, want) != NULL, "X-Forwarded-Host" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    snprintf(want, sizeof want,
             "Forwarded: for=10.1.2.3, for=127.0.0.1;host=\"127.0.0.1:%u\";proto=http\n",
             kh_port(p, 0));
    kh_assert(p, strstr(b, want) != NULL, "Forwarded (RFC 7239)" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    kh_assert(p, strstr(b, "Via: 1.1 keel\n") != NULL, "Via" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    const char *hop[] = {"X-Custom", "Keep-Alive", "TE:", "Proxy-Connection", "Connection:"};
    for (size_t i = 0; i < sizeof hop / sizeof hop[0]; i++)
        kh_assert(p, strcasestr(b, hop[i]) == NULL, "%s reached the upstream" PX_SHOW(rr), hop[i],
                  PX_SHOW_ARGS(rr));
    /* The response's hop-by-hop fields stay behind too; Via is appended. */
    kh_assert(p, strcasestr(rr.out, "X-Hop") == NULL && strcasestr(rr.out, "Keep-Alive") == NULL,
              "response hop-by-hop fields" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    kh_assert(p, strcasestr(rr.out, "Via: 1.1 inner, 1.1 keel\r\n") != NULL,
              "response Via" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    ht_run_free(&rr);
    px_stop(p);
}

Test(proxy, host_rewriting, .timeout = 60, .fini = kh_cleanup_all)
{
    px_need_curl();
    kh_proc *up = px_upstream();
    char section[512], url[128], want[128];
    snprintf(section, sizeof section,
             "upstream = py 127.0.0.1:%u\npass = /headers py host=upstream\n"
             "pass = /fixed py host=example.org\n",
             kh_port(up, 0));
    kh_proc *p = px_keel(section, 0);
    ht_run_result rr = px_get(px_url(url, sizeof url, p, 0, "/headers"));
    snprintf(want, sizeof want, "Host: 127.0.0.1:%u\n", kh_port(up, 0));
    kh_assert(p, strstr(px_body(&rr), want) != NULL, "host=upstream" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    ht_run_free(&rr);
    /* /fixed is not a path the upstream knows: its 404 still shows the
     * request went; the Host is checked in the upstream's log. */
    rr = px_get(px_url(url, sizeof url, p, 0, "/fixed"));
    kh_assert(p, px_status(&rr) == 404, "404 passed through" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    ht_run_free(&rr);
    px_stop(p);
}

Test(proxy, location_rewriting, .timeout = 60, .fini = kh_cleanup_all)
{
    px_need_curl();
    kh_proc *up = px_upstream();
    char section[512], url[128], want[160];
    snprintf(section, sizeof section,
             "upstream = py 127.0.0.1:%u\npass = /redirect py\npass = /raw py location=off\n",
             kh_port(up, 0));
    kh_proc *p = px_keel(section, 0);
    ht_run_result rr = px_get(px_url(url, sizeof url, p, 0, "/redirect?to=self"));
    snprintf(want, sizeof want, "Location: http://127.0.0.1:%u/moved\r\n", kh_port(p, 0));
    kh_assert(p, px_status(&rr) == 302 && strstr(rr.out, want) != NULL,
              "Location naming the upstream is rewritten" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    ht_run_free(&rr);
    /* A Location naming some other host is left alone. */
    rr = px_get(px_url(url, sizeof url, p, 0, "/redirect"));
    snprintf(want, sizeof want, "Location: http://127.0.0.1:%u/target\r\n", kh_port(p, 0));
    kh_assert(p, strstr(rr.out, want) != NULL, "Location already right" PX_SHOW(rr),
              PX_SHOW_ARGS(rr));
    ht_run_free(&rr);
    px_stop(p);
}

Test(proxy, date_and_server, .timeout = 60, .fini = kh_cleanup_all)
{
    px_need_curl();
    kh_proc *up = px_upstream();
    char section[512], url[128];
    snprintf(section, sizeof section, "upstream = py 127.0.0.1:%u\npass = / py\n", kh_port(up, 0));
    kh_proc *p = px_keel(section, 0);
    ht_run_result rr = px_get(px_url(url, sizeof url, p, 0, "/id"));
    kh_assert(p, strstr(rr.out, "pyup") == NULL && strstr(rr.out, "2001") == NULL,
              "replaced by default, as nginx does" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    ht_run_free(&rr);
    kh_stop(p);

    strcat(section, "server = keep\ndate = keep\n");
    p = px_keel(section, 0);
    rr = px_get(px_url(url, sizeof url, p, 0, "/id"));
    kh_assert(p,
              strstr(rr.out, "Server: pyup\r\n") != NULL &&
                  strstr(rr.out, "Date: Mon, 01 Jan 2001 00:00:00 GMT\r\n") != NULL,
              "kept" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    ht_run_free(&rr);
    px_stop(p);
}

/* The fields relayed are the ones keel_response_header_add took: a name
 * llhttp passes that is not a token ("Foo Bar", an empty one) is left
 * out, every other field goes as it came, in order (the proxy vouches for
 * the names and values it hands the core, keel_response_fields_addn). */
Test(proxy, names_that_are_not_tokens_are_left_out, .timeout = 60, .fini = kh_cleanup_all)
{
    px_need_curl();
    kh_proc *up = px_upstream();
    char section[512], url[128];
    snprintf(section, sizeof section, "upstream = py 127.0.0.1:%u\npass = / py\n", kh_port(up, 0));
    kh_proc *p = px_keel(section, 0);
    ht_run_result rr = px_get(px_url(url, sizeof url, p, 0, "/oddnames"));
    kh_assert(p, strstr(rr.out, "HTTP/1.1 200") != NULL, "status" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    const char *before = strstr(rr.out, "X-Before: 1\r\n"),
               *obs = strstr(rr.out, "X-Obs: caf\xe9\t \r\n"),
               *after = strstr(rr.out, "X-After: 2\r\n");
    kh_assert(p, before != NULL && obs != NULL && after != NULL && before < obs && obs < after,
              "the others relayed as they came, in order" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    kh_assert(p,
              strstr(rr.out, "Foo Bar") == NULL && strstr(rr.out, "\n: empty") == NULL &&
                  strstr(rr.out, "empty") == NULL,
              "not tokens, left out" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    ht_run_free(&rr);
    px_stop(p);
}

/* A body filter sees the upstream's Content-Length as a handler's own:
 * deflate compresses a text body its declared length says is long enough
 * (then framed anew, the length dropped) and leaves a short one alone,
 * its length relayed. */
Test(proxy, deflate_decides_by_the_upstreams_length, .timeout = 60, .fini = kh_cleanup_all)
{
    px_need_curl();
    kh_proc *up = px_upstream();
    char section[512], url[128];
    snprintf(section, sizeof section, "upstream = py 127.0.0.1:%u\npass = / py\n", kh_port(up, 0));
    kh_proc *p = px_keel_with("http1 proxy deflate", section, 0);
    const char *gzip[] = {"-i",
                          "-H",
                          "Accept-Encoding: gzip",
                          "-o",
                          "/dev/null",
                          "-D",
                          "-",
                          px_url(url, sizeof url, p, 0, "/text?n=2000"),
                          NULL};
    ht_run_result rr = px_curl(gzip);
    kh_assert(p,
              strstr(rr.out, "Content-Encoding: gzip\r\n") != NULL &&
                  strstr(rr.out, "Content-Length: 2000") == NULL,
              "compressed" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    ht_run_free(&rr);
    const char *whole[] = {"--compressed", px_url(url, sizeof url, p, 0, "/text?n=2000"), NULL};
    rr = px_curl(whole);
    size_t n = strspn(rr.out, "a");
    kh_assert(p, rr.status == 0 && n == 2000 && rr.out[n] == '\0', "the body back, %zu bytes", n);
    ht_run_free(&rr);
    const char *shorter[] = {"-i", "-H", "Accept-Encoding: gzip",
                             px_url(url, sizeof url, p, 0, "/text?n=100"), NULL};
    rr = px_curl(shorter);
    kh_assert(p,
              strstr(rr.out, "Content-Encoding") == NULL &&
                  strstr(rr.out, "Content-Length: 100\r\n") != NULL,
              "below min_length, as it came" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    ht_run_free(&rr);
    px_stop(p);
}

Test(proxy, keepalive_pool, .timeout = 60, .fini = kh_cleanup_all)
{
    px_need_curl();
    kh_proc *up, *p = with_python(&up, NULL);
    char url[128], want[64];
    /* Each curl is a new client connection; the upstream's stays. */
    for (int i = 1; i <= 5; i++) {
        ht_run_result rr = px_get(px_url(url, sizeof url, p, 0, "/count"));
        snprintf(want, sizeof want, "conn=1 req=%d", i);
        kh_assert(p, strcmp(px_body(&rr), want) == 0,
                  "request %d on the pooled connection" PX_SHOW(rr), i, PX_SHOW_ARGS(rr));
        ht_run_free(&rr);
    }
    kh_stop(p);
    /* keepalive = 0: a connection per request. */
    char section[256];
    snprintf(section, sizeof section, "upstream = py 127.0.0.1:%u\npass = / py\nkeepalive = 0\n",
             kh_port(up, 0));
    p = px_keel(section, 0);
    ht_run_result a = px_get(px_url(url, sizeof url, p, 0, "/count"));
    ht_run_result b = px_get(px_url(url, sizeof url, p, 0, "/count"));
    kh_assert(p,
              strstr(px_body(&a), "req=1") && strstr(px_body(&b), "req=1") &&
                  strcmp(px_body(&a), px_body(&b)) != 0,
              "no pool: %s / %s", px_body(&a), px_body(&b));
    ht_run_free(&a);
    ht_run_free(&b);
    px_stop(p);
}

/* Raw: the whole response, "Connection: close" so it ends with EOF. */
static char *raw_exchange(kh_proc *p, const char *request, size_t *len)
{
    int fd = kh_connect("127.0.0.1", kh_port(p, 0));
    kh_assert(p, fd >= 0, "connect");
    kh_assert(p, kh_send_str(fd, request) == 0, "send");
    size_t cap = 1 << 22;
    char *buf = malloc(cap + 1);
    cr_assert(buf);
    *len = kh_recv_n(fd, buf, cap + 1, cap, 10000);
    close(fd);
    return buf;
}

/* Trailer names that are not tokens are left out as the head's are. An
 * empty one was relayed as the string where its name lay in the head's
 * reused buffer: an earlier head's first byte and the value's bytes
 * (": empty" reached the client as "Tempty: empty"). */
Test(proxy, trailer_names_that_are_not_tokens_are_left_out, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *up, *p = with_python(&up, NULL);
    size_t len;
    char *r = raw_exchange(p,
                           "GET /oddnames?trailers=1 HTTP/1.1\r\nHost: x\r\n"
                           "TE: trailers\r\nConnection: close\r\n\r\n",
                           &len);
    kh_assert(p, strstr(r, "\r\n0\r\nX-After: 2\r\n\r\n") != NULL,
              "the token's trailer alone after the last chunk: %s", r);
    kh_assert(p, strstr(r, "empty") == NULL && strstr(r, "Foo Bar") == NULL,
              "names that are not tokens relayed: %s", r);
    free(r);
    px_stop(p);
}

Test(proxy, chunked_body_with_trailers, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *up, *p = with_python(&up, NULL);
    size_t len;
    char *r = raw_exchange(p,
                           "GET /chunked?n=100000&piece=777 HTTP/1.1\r\nHost: x\r\n"
                           "TE: trailers\r\nConnection: close\r\n\r\n",
                           &len);
    kh_assert(p, strstr(r, "Transfer-Encoding: chunked\r\n") != NULL, "chunked: %.300s", r);
    kh_assert(p, len > 100000 && strstr(r + len - 64, "0\r\nX-Sum: 100000\r\n\r\n") != NULL,
              "the trailer after the last chunk: ...%s", r + (len > 200 ? len - 200 : 0));
    /* de-chunk and count */
    const char *at = strstr(r, "\r\n\r\n") + 4;
    size_t body = 0;
    for (;;) {
        size_t n = strtoul(at, NULL, 16);
        at = strstr(at, "\r\n") + 2;
        if (n == 0)
            break;
        body += n;
        at += n + 2;
    }
    kh_assert(p, body == 100000, "body %zu bytes", body);
    free(r);
    px_stop(p);
}

/* A chunked request's trailer fields reach the upstream (RFC 9112 7.1.2),
 * less those a trailer must not carry (RFC 9110 6.5.1), which the core
 * drops whatever the protocol. */
Test(proxy, request_trailers_forwarded, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *up, *p = with_python(&up, NULL);
    size_t len;
    char *r = raw_exchange(p,
                           "POST /trailers HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                           "Trailer: X-Checksum\r\nConnection: close\r\n\r\n"
                           "5\r\nhello\r\n6\r\n world\r\n0\r\n"
                           "X-Checksum: c0ffee\r\nContent-Length: 99\r\nX-Other: two words\r\n\r\n",
                           &len);
    const char *body = strstr(r, "\r\n\r\n");
    kh_assert(p, strncmp(r, "HTTP/1.1 200", 12) == 0 && body != NULL, "answer: %.300s", r);
    kh_assert(p, strcmp(body + 4, "11\nX-Checksum: c0ffee\nX-Other: two words\n") == 0,
              "the upstream saw '%s'", body + 4);
    free(r);

    /* Without trailers, the last chunk alone. */
    r = raw_exchange(p,
                     "POST /trailers HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                     "Connection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
                     &len);
    body = strstr(r, "\r\n\r\n");
    kh_assert(p, body != NULL && strcmp(body + 4, "3\n") == 0, "the upstream saw '%s'",
              body ? body + 4 : r);
    free(r);
    px_stop(p);
}

Test(proxy, expect_100_continue, .timeout = 60, .fini = kh_cleanup_all)
{
    px_need_curl();
    kh_proc *up, *p = with_python(&up, NULL);
    char url[128];
    /* The upstream's 100 reaches the client (http1 sends it when the
     * proxy asks for the body, which it does on the upstream's 100). */
    const char *args[] = {"-i",
                          "-H",
                          "Expect: 100-continue",
                          "--data-binary",
                          "after continue",
                          px_url(url, sizeof url, p, 0, "/echo"),
                          NULL};
    ht_run_result rr = px_curl(args);
    kh_assert(p, strncmp(rr.out, "HTTP/1.1 100 Continue\r\n", 23) == 0, "100 first" PX_SHOW(rr),
              PX_SHOW_ARGS(rr));
    kh_assert(p, px_status(&rr) == 200 && strcmp(px_body(&rr), "after continue") == 0,
              "then the answer" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    ht_run_free(&rr);
    /* An upstream that refuses: its final answer, and no 100. */
    const char *refuse[] = {"-i",
                            "-H",
                            "Expect: 100-continue",
                            "--data-binary",
                            "never sent",
                            px_url(url, sizeof url, p, 0, "/echo?refuse=1"),
                            NULL};
    rr = px_curl(refuse);
    kh_assert(p, px_status(&rr) == 417 && strstr(rr.out, "100 Continue") == NULL, "417" PX_SHOW(rr),
              PX_SHOW_ARGS(rr));
    ht_run_free(&rr);
    px_stop(p);
}

Test(proxy, http10_client, .timeout = 60, .fini = kh_cleanup_all)
{
    px_need_curl();
    kh_proc *up, *p = with_python(&up, NULL);
    char url[128];
    const char *args[] = {"-0", "-i", px_url(url, sizeof url, p, 0, "/chunked?n=5000"), NULL};
    ht_run_result rr = px_curl(args);
    kh_assert(p, rr.status == 0 && px_status(&rr) == 200 && strlen(px_body(&rr)) == 5000,
              "HTTP/1.0 client of a chunked upstream response" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    kh_assert(p, strstr(rr.out, "Transfer-Encoding") == NULL, "no chunked to 1.0" PX_SHOW(rr),
              PX_SHOW_ARGS(rr));
    ht_run_free(&rr);
    px_stop(p);
}

/* An upstream's "Connection: close" (any case) on a response with a
 * Content-Length, in one read, ends that connection's use even when the
 * upstream would go on (proxy_upstream.py keeps it open): the next request
 * goes on a new one. "Connection: keep-alive" keeps it. This is the
 * response head that fasthead.c reads without llhttp. */
Test(proxy, upstream_close_ends_reuse, .timeout = 60, .fini = kh_cleanup_all)
{
    px_need_curl();
    kh_proc *up, *p = with_python(&up, NULL);
    static const struct {
        const char *path, *want;
    } steps[] = {
        {"/count_close?v=keep-alive", "conn=1 req=1"},
        {"/count_close", "conn=1 req=2"},
        {"/count", "conn=2 req=1"},
        {"/count_close?v=CLOSE", "conn=2 req=2"},
        {"/count", "conn=3 req=1"},
    };
    char url[160];
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        ht_run_result rr = px_get(px_url(url, sizeof url, p, 0, steps[i].path));
        kh_assert(p, px_status(&rr) == 200 && strcmp(px_body(&rr), steps[i].want) == 0,
                  "%s: want %s" PX_SHOW(rr), steps[i].path, steps[i].want, PX_SHOW_ARGS(rr));
        ht_run_free(&rr);
    }
    px_stop(p);
}

/* Statuses pass through as they are: an upstream's own 5xx is an answer,
 * not a failure (nginx counts none by default either). */
Test(proxy, statuses_pass_through, .timeout = 60, .fini = kh_cleanup_all)
{
    px_need_curl();
    kh_proc *up, *p = with_python(&up, NULL);
    const int codes[] = {201, 204, 304, 404, 500, 503};
    char url[160], path[64];
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        snprintf(path, sizeof path, "/status?code=%d", codes[i]);
        ht_run_result rr = px_get(px_url(url, sizeof url, p, 0, path));
        kh_assert(p, px_status(&rr) == codes[i], "%d" PX_SHOW(rr), codes[i], PX_SHOW_ARGS(rr));
        ht_run_free(&rr);
    }
    /* still on one upstream connection, and the server still in */
    ht_run_result rr = px_get(px_url(url, sizeof url, p, 0, "/count"));
    kh_assert(p, strncmp(px_body(&rr), "conn=1 ", 7) == 0, "pooled: %s", px_body(&rr));
    ht_run_free(&rr);
    px_stop(p);
}

/* A body that ends with the upstream's connection (no length) is whole
 * for the client: chunked to it, ended properly. */
Test(proxy, body_until_eof, .timeout = 60, .fini = kh_cleanup_all)
{
    px_need_curl();
    kh_proc *up, *p = with_python(&up, NULL);
    char url[160];
    for (int i = 0; i < 2; i++) {
        ht_run_result rr = px_get(px_url(url, sizeof url, p, 0, "/eof?n=70000"));
        kh_assert(p, rr.status == 0 && px_status(&rr) == 200 && strlen(px_body(&rr)) == 70000,
                  "EOF-delimited body" PX_SHOW(rr), PX_SHOW_ARGS(rr));
        ht_run_free(&rr);
    }
    px_stop(p);
}

Test(proxy, oversized_upstream_head_is_502, .timeout = 60, .fini = kh_cleanup_all)
{
    /* Server and Date are dropped as they are parsed, not copied; their
     * bytes still count (a head of endless Date fields never ends). */
    static const struct {
        const char *path;
        int status;
    } cases[] = {
        {"/bighead?n=100000", 502},
        {"/bighead?n=1000", 200},
        {"/bighead?n=100000&name=Server", 502},
        {"/bighead?n=1000&count=40&name=Date", 502},
        {"/bighead?n=1000&count=20&name=Date", 200},
    };
    px_need_curl();
    kh_proc *up, *p = with_python(&up, NULL);
    char url[160];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ht_run_result rr = px_get(px_url(url, sizeof url, p, 0, cases[i].path));
        kh_assert(p, px_status(&rr) == cases[i].status, "%s: want %d" PX_SHOW(rr), cases[i].path,
                  cases[i].status, PX_SHOW_ARGS(rr));
        ht_run_free(&rr);
    }
    px_stop(p);
}

/* [proxy] log: one line per exchange with the upstream's address, status
 * and time (what accesslog cannot log yet: CORE-NEEDS.md 5). */
Test(proxy, log_line, .timeout = 60, .fini = kh_cleanup_all)
{
    px_need_curl();
    kh_proc *up = px_upstream();
    char section[256], url[160], path[400], want[128];
    snprintf(section, sizeof section, "upstream = py 127.0.0.1:%u\npass = / py\nlog = proxy.log\n",
             kh_port(up, 0));
    kh_proc *p = px_keel(section, 0);
    ht_run_result rr = px_get(px_url(url, sizeof url, p, 0, "/status?code=418"));
    ht_run_free(&rr);
    px_stop(p); /* the appender has written everything once keel is gone */
    snprintf(path, sizeof path, "%s/proxy.log", p->dir);
    FILE *f = fopen(path, "r");
    kh_assert(p, f != NULL, "no %s", path);
    char line[1024] = "";
    kh_assert(p, fgets(line, sizeof line, f) != NULL, "empty log");
    fclose(f);
    snprintf(
        want, sizeof want,
        "\"GET /status?code=418\" 418 upstream=127.0.0.1:%u upstream_status=418 upstream_time=",
        kh_port(up, 0));
    kh_assert(p, strstr(line, want) != NULL && strncmp(line, "127.0.0.1 [", 11) == 0,
              "log line: %s", line);
}

/* SIGTERM while a proxied request waits for its upstream: the exchange
 * finishes (the client gets its answer), then keel exits 0. */
Test(proxy, graceful_stop_finishes_exchange, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *up, *p = with_python(&up, NULL);
    int fd = kh_connect("127.0.0.1", kh_port(p, 0));
    kh_assert(p, fd >= 0, "connect");
    kh_send_str(fd, "GET /slow?ms=1000 HTTP/1.1\r\nHost: x\r\n\r\n");
    kh_assert(p, kh_wait_log(up, "/slow", 3000), "the request reached the upstream");
    kh_signal(p, SIGTERM);
    char buf[1024];
    size_t n = kh_recv_n(fd, buf, sizeof buf, sizeof buf - 1, 5000);
    kh_assert(p, n > 0 && strncmp(buf, "HTTP/1.1 200 ", 13) == 0 && strstr(buf, "\r\n\r\nslow"),
              "the answer after SIGTERM: %.*s", (int)n, buf);
    close(fd);
    int status = kh_wait_exit(p, 15000);
    kh_assert(p, status == 0, "exit status %d", status);
}
