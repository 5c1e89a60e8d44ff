/* Fields a module vouches for (ABI 1.13: keel_response_fields_addn),
 * through tests/modules/mod_vouched.c: the same fields added by name one
 * at a time and as one batch of views reach the client byte for byte the
 * same, on HTTP/1.1 and HTTP/2, with deflate compressing by the
 * Content-Length among them or not, and the framing field the core takes
 * out taken out. */
#define _GNU_SOURCE
#include "harness.h"
#include "test_http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONF                                                                                       \
    "[keel]\nlisten = 127.0.0.1:0 http1\nlisten = 127.0.0.1:0 h2\nworkers = 1\n" KH_MODULE_PATH    \
    "modules = http1 h2 deflate vouched\n"

/* The text without its Date line (the only one that may differ between
 * two responses). */
static char *without_date(const char *text)
{
    char *out = strdup(text);
    cr_assert_not_null(out);
    for (char *d; (d = strcasestr(out, "\ndate: ")) != NULL;) {
        char *end = strchr(d + 1, '\n');
        if (end == NULL)
            *d = '\0';
        else
            memmove(d, end, strlen(end) + 1);
    }
    return out;
}

static void get(kh_proc *p, const char *path, const char *extra, ht_resp *r)
{
    char req[512];
    snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: a\r\n%sConnection: close\r\n\r\n", path,
             extra);
    ht_roundtrip(p, req, r);
}

Test(vouched_fields, http1_the_same_as_by_name, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = kh_start(CONF, NULL, 2, 10000);
    static const char *extras[] = {"", "Accept-Encoding: gzip\r\n"};
    for (size_t k = 0; k < 2; k++) {
        ht_resp a = {0}, b = {0};
        get(p, "/name/x", extras[k], &a);
        get(p, "/batch/x", extras[k], &b);
        kh_assert(p, a.status == 200 && b.status == 200, "status %d %d", a.status, b.status);
        char *ha = without_date(a.head), *hb = without_date(b.head);
        kh_assert(p, strcmp(ha, hb) == 0, "by name:\n%s\nbatched:\n%s", a.head, b.head);
        kh_assert(p, a.body_len == b.body_len && memcmp(a.body, b.body, a.body_len) == 0,
                  "bodies differ: %zu, %zu bytes", a.body_len, b.body_len);
        kh_assert(p, strstr(hb, "\r\nKeep-Alive") == NULL, "Keep-Alive taken out:\n%s", b.head);
        kh_assert(
            p,
            ht_header_count(&b, "Content-Length") + ht_header_count(&b, "Transfer-Encoding") == 1,
            "one framing:\n%s", b.head);
        kh_assert(p,
                  strstr(hb, "\r\nX-Upstream: a\tb c\r\n") && strstr(hb, "\r\nx-lower-case: \r\n"),
                  "relayed as given:\n%s", b.head);
        if (k == 0)
            kh_assert(p,
                      strcmp(ht_header(&b, "Content-Length"), "600") == 0 &&
                          ht_header(&b, "Content-Encoding") == NULL,
                      "the declared length:\n%s", b.head);
        else
            kh_assert(p,
                      ht_header(&b, "Content-Encoding") != NULL &&
                          strcmp(ht_header(&b, "Content-Encoding"), "gzip") == 0,
                      "compressed by the declared length:\n%s", b.head);
        free(ha);
        free(hb);
        ht_resp_free(&a);
        ht_resp_free(&b);
    }
    kh_stop(p);
}

Test(vouched_fields, http2_the_same_as_by_name, .timeout = 60, .fini = kh_cleanup_all)
{
    const char *probe[] = {"sh", "-c", "curl -V | grep -q HTTP2", NULL};
    ht_run_result rr = ht_run(probe, 10000);
    if (rr.status != 0)
        cr_skip_test("curl without HTTP/2");
    ht_run_free(&rr);
    kh_proc *p = kh_start(CONF, NULL, 2, 10000);
    static const char *extras[] = {"", "-H 'Accept-Encoding: gzip'"};
    for (size_t k = 0; k < 2; k++) {
        char *out[2];
        static const char *paths[] = {"/name/h2", "/batch/h2"};
        for (size_t i = 0; i < 2; i++) {
            /* One curl a request (test_made_fields.c says why). */
            char cmd[512];
            snprintf(cmd, sizeof cmd,
                     "curl -sS -D - -o /dev/null -w '%%{size_download}\\n' --max-time 10 "
                     "--http2-prior-knowledge %s http://127.0.0.1:%u%s",
                     extras[k], kh_port(p, 1), paths[i]);
            const char *argv[] = {"sh", "-c", cmd, NULL};
            rr = ht_run(argv, 20000);
            kh_assert(p, rr.status == 0, "%s: %d %s", cmd, rr.status, rr.err);
            out[i] = without_date(rr.out);
            ht_run_free(&rr);
        }
        kh_assert(p, strcmp(out[0], out[1]) == 0, "by name:\n%s\nbatched:\n%s", out[0], out[1]);
        kh_assert(p,
                  strstr(out[1], "HTTP/2 200") && strstr(out[1], "x-upstream: a\tb c\r\n") &&
                      strstr(out[1], "set-cookie: b=2\r\n") && !strstr(out[1], "keep-alive"),
                  "the head:\n%s", out[1]);
        kh_assert(p, (k == 0) == (strstr(out[1], "content-length: 600\r\n") != NULL),
                  "the declared length only uncompressed:\n%s", out[1]);
        free(out[0]);
        free(out[1]);
    }
    kh_stop(p);
}
