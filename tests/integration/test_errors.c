/* Error pages (the errors module, ABI 1.8's keel_http_error_handler_set
 * and keel_response_redirect_internal; docs/web.md, "Error pages"): a
 * page for a missing file and for an unrouted path, for a handler's 500
 * (keel_response_send_status and an error return) and for the proxy's 502
 * to a dead upstream; the status kept or overridden (=200); HEAD; a page
 * that is missing itself ends with the plain text; a response a handler
 * made with its own body is left alone; pages per scope; and the config's
 * errors with file:line. */
#define _GNU_SOURCE
#include "test_static.h"

#define PAGE404 "<h1>custom not found</h1>\n"
#define PAGE50X "<h1>custom server error</h1>\n"
#define PAGE413 "<h1>too large</h1>\n"

/* keel with http1 errors static errfix proxy over st_root, the [errors]
 * section's lines and `more` (scopes) after it. */
static kh_proc *start_errors(const char *errors, const char *more)
{
    unsigned dead = kh_free_port(); /* nothing listens there: refused */
    char conf[8192];
    snprintf(conf, sizeof conf,
             "[keel]\nlisten = 127.0.0.1:0 http1\nworkers = 1\n"
             "modules = http1 errors static errfix proxy\n" KH_MODULE_PATH
             "[static]\nmount = / %s\n"
             "[proxy]\nupstream = gone 127.0.0.1:%u\npass = /api/ gone\n"
             "[errors]\n%s%s",
             st_root, dead, errors, more ? more : "");
    kh_proc *p = kh_start(conf, NULL, 1, 10000);
    kh_assert(p, kh_port(p, 0) > 0, "no port in the 'listening on' line");
    return p;
}

static void make_site(void)
{
    st_make_tree();
    st_write_str("www/index.html", "<h1>home</h1>\n");
    st_write_str("www/404.html", PAGE404);
    st_write_str("www/50x.html", PAGE50X);
    st_write_str("www/413.html", PAGE413);
    st_mkdir("www/shop");
    st_write_str("www/shop/404.html", "<h1>shop not found</h1>\n");
}

static void expect_page(kh_proc *p, const char *method, const char *target, int status,
                        const char *body)
{
    ht_resp r;
    st_req(p, method, target, NULL, &r);
    kh_assert(p, r.status == status, "%s %s: status %d, want %d\n%s", method, target, r.status,
              status, r.head);
    if (strcmp(method, "HEAD") == 0) {
        kh_assert(p, r.body_len == 0, "HEAD %s: a body", target);
        kh_assert(p, r.content_length == (int64_t)strlen(body), "HEAD %s: length %lld", target,
                  (long long)r.content_length);
    } else {
        kh_assert(p, r.body_len == strlen(body) && memcmp(r.body, body, r.body_len) == 0,
                  "%s %s: body '%.*s', want '%s'", method, target, (int)r.body_len,
                  r.body ? r.body : "", body);
    }
    ht_resp_free(&r);
}

Test(errors, pages_for_the_core_a_handler_and_the_proxy_keep_the_status, .timeout = 60,
     .fini = st_cleanup)
{
    make_site();
    kh_proc *p = start_errors(
        "page = 404 /404.html\npage = 500 502 503 504 /50x.html\npage = 413 /413.html\n", NULL);
    /* A missing file (static's 404) and a path no route takes (the
     * router's 404: errfix owns only /fail/...). */
    expect_page(p, "GET", "/missing.html", 404, PAGE404);
    expect_page(p, "GET", "/no/such/dir/", 404, PAGE404);
    /* The router's 405 has no page: the plain text, with Allow. */
    ht_resp r;
    st_req(p, "DELETE", "/index.html", NULL, &r);
    kh_assert(p,
              r.status == 405 && strstr(r.body, "405 Method Not Allowed") &&
                  ht_header(&r, "Allow") != NULL,
              "405: %d %s", r.status, r.body);
    ht_resp_free(&r);
    /* A handler's keel_response_send_status and its error return. */
    expect_page(p, "GET", "/fail/status/500", 500, PAGE50X);
    expect_page(p, "GET", "/fail/status/503", 503, PAGE50X);
    expect_page(p, "GET", "/fail/return", 500, PAGE50X);
    /* The proxy's 502: the upstream's port refuses. */
    expect_page(p, "GET", "/api/x", 502, PAGE50X);
    /* HEAD gets the page's head, with the error's status and length. */
    expect_page(p, "HEAD", "/missing.html", 404, PAGE404);
    /* Another method gets the page too (asked for with GET, as nginx). */
    st_req(p, "POST", "/api/x", "Content-Length: 0\r\n", &r);
    kh_assert(p, r.status == 502 && strcmp(r.body, PAGE50X) == 0, "POST: %d %s", r.status, r.body);
    ht_resp_free(&r);
    /* The page stands in whole: the request's validators and Range are
     * not applied to it. */
    st_get(p, "/missing.html", "If-None-Match: *\r\nRange: bytes=0-3\r\n", &r);
    kh_assert(p, r.status == 404 && strcmp(r.body, PAGE404) == 0, "conditional: %d %s", r.status,
              r.body);
    ht_resp_free(&r);
    /* The core's 413 over a handler's body limit, told in advance by
     * Content-Length and found while reading a chunked body. */
    st_req(p, "POST", "/fail/body", "Content-Length: 100\r\n", &r);
    kh_assert(p, r.status == 413 && strcmp(r.body, PAGE413) == 0, "413: %d %s", r.status, r.body);
    ht_resp_free(&r);
    {
        ht_conn *c = ht_connect(kh_port(p, 0));
        ht_send_str(c, "POST /fail/body HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n"
                       "Connection: close\r\n\r\n40\r\n"
                       "0123456789012345678901234567890123456789012345678901234567890123\r\n"
                       "0\r\n\r\n");
        ht_expect_response(p, c, &r, 0);
        kh_assert(p, r.status == 413 && strcmp(r.body, PAGE413) == 0, "chunked 413: %d %s",
                  r.status, r.body);
        ht_resp_free(&r);
        ht_close(c);
    }
    /* A handler's own error body is its answer, left alone. */
    expect_page(p, "GET", "/fail/own", 500, "own body\n");
    /* Unnamed statuses keep the plain text. */
    expect_page(p, "GET", "/fail/status/429", 429, "429 Too Many Requests\n");
    kh_stop(p);
}

Test(errors, a_missing_page_ends_with_the_plain_text_of_the_first_error, .timeout = 60,
     .fini = st_cleanup)
{
    make_site();
    kh_proc *p = start_errors("page = 404 /gone.html\npage = 500 /also-gone.html\n"
                              "page = 502 /fail/status/503\n",
                              NULL);
    expect_page(p, "GET", "/missing.html", 404, "404 Not Found\n");
    expect_page(p, "GET", "/fail/return", 500, "500 Internal Server Error\n");
    /* The page's own handler fails with another status: still the first. */
    expect_page(p, "GET", "/api/x", 502, "502 Bad Gateway\n");
    kh_stop(p);
}

Test(errors, status_override_handlers_as_pages_and_scopes, .timeout = 60, .fini = st_cleanup)
{
    make_site();
    kh_proc *p =
        start_errors("page = 404 =200 /index.html\npage = 500 /fail/page?from=500\n",
                     "[/shop/]\nerrors.page = 404 /shop/404.html\n[/plain/]\nerrors.page = 500 "
                     "/50x.html\n");
    expect_page(p, "GET", "/missing.html", 200, "<h1>home</h1>\n");
    /* A page a handler answers, with the query the line gives. */
    expect_page(p, "GET", "/fail/return", 500, "page for GET query=from=500\n");
    /* A path scope's own lines replace the outer ones. */
    expect_page(p, "GET", "/shop/nothing", 404, "<h1>shop not found</h1>\n");
    expect_page(p, "GET", "/plain/nothing", 404, "404 Not Found\n");
    kh_stop(p);
}

Test(errors, bad_lines_are_refused_with_file_and_line, .timeout = 60, .fini = st_cleanup)
{
    static const struct {
        const char *line, *why;
    } bad[] = {
        {"page = 404\n", "expected STATUS"},
        {"page = 404 index.html\n", "expected STATUS"},
        {"page = 200 /x.html\n", "400..599"},
        {"page = 404 =999 /x.html\n", "200..599"},
        {"page = 404 /a/../b.html\n", "dot segment"},
        {"page = 404 /x.html 500\n", "must come last"},
        {"page = 404 405 /x.html\n", "Allow"},
    };
    make_site();
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char conf[2048];
        snprintf(
            conf, sizeof conf,
            "[keel]\nlisten = 127.0.0.1:0 http1\nmodules = http1 errors static\n" KH_MODULE_PATH
            "[static]\nmount = / %s\n[/x/]\nerrors.%s",
            st_root, bad[i].line);
        const char *args[] = {"-t", NULL};
        kh_proc *p = kh_spawn(conf, args);
        cr_assert_eq(kh_wait_exit(p, 10000), 1, "%s", bad[i].line);
        cr_expect(strstr(kh_stderr(p), ":8: [/x/] errors.page: ") != NULL &&
                      strstr(kh_stderr(p), bad[i].why) != NULL,
                  "%s: %s", bad[i].line, kh_stderr(p));
    }
}

/* The same pages over HTTP/2 (cleartext, prior knowledge): the core's
 * error pages are the protocol's business in no way. curl is the client;
 * skipped without curl or its HTTP/2. */
Test(errors, pages_over_http2, .timeout = 60, .fini = st_cleanup)
{
    const char *ver[] = {"curl", "--version", NULL};
    ht_run_result v = ht_run(ver, 5000);
    int ok = v.status == 0 && strstr(v.out, "HTTP2") != NULL;
    ht_run_free(&v);
    if (!ok)
        cr_skip_test("curl with HTTP/2 is not installed");
    make_site();
    unsigned dead = kh_free_port();
    char conf[4096];
    snprintf(conf, sizeof conf,
             "[keel]\nlisten = 127.0.0.1:0 h2\nworkers = 1\n"
             "modules = http1 h2 errors static errfix proxy\n" KH_MODULE_PATH
             "[static]\nmount = / %s\n[proxy]\nupstream = gone 127.0.0.1:%u\npass = /api/ gone\n"
             "[errors]\npage = 404 /404.html\npage = 500 502 /50x.html\n",
             st_root, dead);
    kh_proc *p = kh_start(conf, NULL, 1, 10000);
    static const struct {
        const char *target, *want;
    } cases[] = {
        {"/missing.html", "404 " PAGE404},
        {"/fail/return", "500 " PAGE50X},
        {"/api/x", "502 " PAGE50X},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char url[128];
        snprintf(url, sizeof url, "http://127.0.0.1:%u%s", kh_port(p, 0), cases[i].target);
        const char *argv[] = {"curl",
                              "-s",
                              "--max-time",
                              "10",
                              "--http2-prior-knowledge",
                              "-w",
                              "%{http_code} ",
                              "-o",
                              "/dev/stderr",
                              url,
                              NULL};
        ht_run_result rr = ht_run(argv, 15000);
        char got[512];
        snprintf(got, sizeof got, "%s%s", rr.out, rr.err);
        kh_assert(p, rr.status == 0 && strcmp(got, cases[i].want) == 0, "%s: '%s', want '%s'",
                  cases[i].target, got, cases[i].want);
        ht_run_free(&rr);
    }
    kh_stop(p);
}

/* The page's request loses its conditional fields (If-None-Match here),
 * and the fields after them must still be found by name: the head's
 * tokens are taken out with the fields, or a lookup of User-Agent reads
 * the token of the field that used to be there. */
Test(errors, a_page_request_finds_the_fields_after_the_hidden_ones, .timeout = 60,
     .fini = st_cleanup)
{
    make_site();
    kh_proc *p = kh_start("[keel]\nlisten = 127.0.0.1:0 http1\nworkers = 1\n"
                          "modules = http1 errors h2test\n" KH_MODULE_PATH
                          "[errors]\npage = 404 /h2test/head?field=user-agent\n",
                          NULL, 1, 10000);
    ht_resp r;
    st_req(p, "GET", "/nothing", "If-None-Match: \"x\"\r\nUser-Agent: probe\r\n", &r);
    kh_assert(p, r.status == 404, "status %d\n%s", r.status, r.head);
    kh_assert(p, r.body && strstr(r.body, "field=probe") != NULL, "body '%.*s'", (int)r.body_len,
              r.body ? r.body : "");
    ht_resp_free(&r);
    kh_stop(p);
}
