/* The answers a protocol makes before a request exists (http1's 400, 408,
 * 413 on a declared length, 414, 431, 505; h2's 431 and 413 are in
 * tests/h2) go through the core (keel_http_request_refuse): the
 * listener's `[headers] always` fields and the errors module's pages
 * reach them, a site's do not (a refused head's Host is not trusted), and
 * the connection closes after them, and the access log has them with a
 * request line of "-". Raw sockets to the real keel. */
#define _GNU_SOURCE
#include "harness.h"
#include "test_http.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* Sends `request` (any bytes) on a new connection; reads the response and
 * checks that the connection closes after it. */
static void refused(kh_proc *p, unsigned port, const void *request, size_t len, ht_resp *r)
{
    ht_conn *c = ht_connect(port);
    ht_send(c, request, len);
    ht_expect_response(p, c, r, 0);
    kh_assert(p, ht_wait_closed(c, 5000), "closed after %d", r->status);
    ht_close(c);
}

static char *repeat(char ch, size_t n)
{
    char *s = malloc(n + 1);
    cr_assert(s != NULL);
    memset(s, ch, n);
    s[n] = '\0';
    return s;
}

#define REFUSED_BASE                                                                               \
    "[keel]\n" KH_MODULE_PATH "listen = 127.0.0.1:0 http1\n"                                       \
    "listen = 127.0.0.1:0 http1 name=inner\nworkers = 1\n"                                         \
    "modules = http1 headers hello\n"                                                              \
    "[http1]\nmax_request_line = 1k\nmax_header_bytes = 4k\nmax_body = 1k\n"                       \
    "header_timeout = 1s\n"

Test(web_refused, always_fields_reach_the_protocols_own_errors, .timeout = 60,
     .fini = kh_cleanup_all)
{
    kh_proc *p = kh_start(REFUSED_BASE "[headers]\nalways = on\nadd = X-Frame-Options: DENY\n"
                                       "[listener inner]\nheaders.add = X-Inner: yes\n"
                                       "[site x.test]\nheaders.add = X-Site: yes\n",
                          NULL, 2, 10000);
    char *uri = repeat('a', 2000), *field = repeat('b', 5000);
    char big_uri[2100], big_field[5100];
    snprintf(big_uri, sizeof big_uri, "GET /%s HTTP/1.1\r\nHost: x.test\r\n\r\n", uri);
    snprintf(big_field, sizeof big_field, "GET / HTTP/1.1\r\nHost: x.test\r\nX-Big: %s\r\n\r\n",
             field);
    const struct {
        const char *request;
        int status;
    } cases[] = {
        {"GARBAGE\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: x.test\r\nBad Field: 1\r\n\r\n", 400},
        {big_uri, 414},
        {big_field, 431},
        {"GET / HTTP/3.0\r\nHost: x.test\r\n\r\n", 505},
        {"POST / HTTP/1.1\r\nHost: x.test\r\nContent-Length: 5000\r\n\r\n", 413},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        for (int l = 0; l < 2; l++) {
            ht_resp r = {0};
            refused(p, kh_port(p, l), cases[i].request, strlen(cases[i].request), &r);
            kh_assert(p, r.status == cases[i].status, "case %zu: status %d, want %d", i, r.status,
                      cases[i].status);
            /* The listener's scope: the global `always` list, or the
             * listener's own (which replaces it); never a site's. */
            const char *want = l == 0 ? "X-Frame-Options" : "X-Inner";
            kh_assert(p, ht_header(&r, want) != NULL, "case %zu, listener %d: %s missing:\n%s", i,
                      l, want, r.head);
            kh_assert(p, ht_header(&r, "X-Site") == NULL, "case %zu: a site's field:\n%s", i,
                      r.head);
            kh_assert(p, ht_header(&r, "Content-Length") != NULL && r.body_len > 0,
                      "case %zu: a short body:\n%s", i, r.head);
            ht_resp_free(&r);
        }
    }
    /* A head that comes too slowly: 408 with the fields too. */
    ht_conn *c = ht_connect(kh_port(p, 0));
    ht_send_str(c, "GET / HTTP/1.1\r\n");
    ht_resp r = {0};
    ht_expect_response(p, c, &r, 0);
    kh_assert(p, r.status == 408 && ht_header(&r, "X-Frame-Options") != NULL, "408:\n%s", r.head);
    ht_resp_free(&r);
    ht_close(c);
    free(uri);
    free(field);
    kh_stop(p);
}

/* Without `always` (nginx's add_header), an error carries no field, as
 * before; the errors module's page answers a refused head. */
Test(web_refused, error_pages_answer_a_refused_head, .timeout = 60, .fini = kh_cleanup_all)
{
    char dir[] = "/tmp/keel-refused-XXXXXX";
    cr_assert(mkdtemp(dir) != NULL);
    char path[200];
    snprintf(path, sizeof path, "%s/bad.html", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f != NULL && fputs("<p>That request was not right.</p>\n", f) >= 0 && fclose(f) == 0);
    char conf[2048];
    snprintf(conf, sizeof conf,
             "[keel]\n" KH_MODULE_PATH "listen = 127.0.0.1:0 http1\nworkers = 1\n"
             "modules = http1 errors headers static accesslog\n"
             "[headers]\nadd = X-Frame-Options: DENY\n"
             "[static]\nmount = /errors %s\n"
             "[errors]\npage = 400 431 /errors/bad.html\n"
             "[accesslog]\npath = %s/access.log\n",
             dir, dir);
    kh_proc *p = kh_start(conf, NULL, 1, 10000);
    ht_resp r = {0};
    refused(p, kh_port(p, 0), "GARBAGE\r\n\r\n", 11, &r);
    kh_assert(p, r.status == 400 && r.body != NULL && strstr(r.body, "not right") != NULL,
              "the page for 400: %d\n%s\n%s", r.status, r.head, r.body ? r.body : "");
    kh_assert(p, ht_header(&r, "X-Frame-Options") == NULL, "no field without always:\n%s", r.head);
    ht_resp_free(&r);
    /* Logged as nginx logs it: a request line of "-". */
    snprintf(path, sizeof path, "%s/access.log", dir);
    char *log = NULL;
    for (int i = 0; i < 500 && (log == NULL || strstr(log, "\"-\" 400 ") == NULL); i++) {
        free(log);
        kh_sleep_ms(10);
        log = kh_read_file(path);
    }
    kh_assert(p, log != NULL && strstr(log, "\"-\" 400 ") != NULL, "access log: %s",
              log ? log : "(none)");
    free(log);
    kh_stop(p);
    snprintf(conf, sizeof conf, "rm -rf '%s'", dir);
    cr_assert(system(conf) == 0);
}
