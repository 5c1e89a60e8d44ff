/* Fields made at run time (ABI 1.12: keel_field_make, keel_field_free),
 * through tests/modules/mod_made.c: made on the worker from the request's
 * path, added by pointer (one or a batch, replacing or not), freed in the
 * log phase; the same on HTTP/1.1 (the field line copied whole) and
 * HTTP/2 (HPACK); what keel_field_prepare refuses is refused here too. */
#define _GNU_SOURCE
#include "harness.h"
#include "test_http.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONF                                                                                       \
    "[keel]\nlisten = 127.0.0.1:0 http1\nlisten = 127.0.0.1:0 h2\nworkers = 1\n" KH_MODULE_PATH    \
    "modules = http1 h2 made accesslog\n"                                                          \
    "[accesslog]\nformat = \"$request $sent_http_x_made $sent_http_x_second\"\npath = %s\n"

/* A scratch access log's path in *out, the config naming it in conf. */
static void config_with_log(char *conf, size_t cap, char *log, size_t logcap)
{
    char dir[] = "/tmp/keel-made-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    snprintf(log, logcap, "%s/access.log", dir);
    snprintf(conf, cap, CONF, log);
}

static void get(kh_proc *p, const char *path, ht_resp *r)
{
    char req[512];
    snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", path);
    ht_roundtrip(p, req, r);
}

Test(made_fields, made_added_and_freed_over_http1, .timeout = 60, .fini = kh_cleanup_all)
{
    char conf[1024], log[256];
    config_with_log(conf, sizeof conf, log, sizeof log);
    kh_proc *p = kh_start(conf, NULL, 2, 10000);
    for (int round = 0; round < 3; round++) {
        ht_resp r = {0};
        char path[64];
        snprintf(path, sizeof path, "/file-%d.txt", round);
        get(p, path, &r);
        kh_assert(p, r.status == 200, "status %d", r.status);
        kh_assert(p, ht_header(&r, "X-Refusal-Error") == NULL, "a refusal missed:\n%s", r.head);
        kh_assert(p,
                  ht_header_count(&r, "X-Made") == 1 && strcmp(ht_header(&r, "X-Made"), path) == 0,
                  "the made X-Made replaces the handler's:\n%s", r.head);
        kh_assert(p, ht_header(&r, "X-Second") && strcmp(ht_header(&r, "X-Second"), "two") == 0,
                  "X-Second:\n%s", r.head);
        kh_assert(
            p, ht_header(&r, "Content-Length") && strcmp(ht_header(&r, "Content-Length"), "5") == 0,
            "framing untouched:\n%s", r.head);
        kh_assert(p, strcmp(r.body, "made\n") == 0, "body %s", r.body);
        ht_resp_free(&r);
    }
    ht_resp r = {0};
    get(p, "/single/x", &r);
    kh_assert(p, r.status == 200, "status %d", r.status);
    kh_assert(p, ht_header_count(&r, "X-Made") == 2, "added without replacing:\n%s", r.head);
    kh_assert(p, strstr(r.head, "X-Made: by-name\r\nX-Made: /single/x\r\n") != NULL,
              "in order, the line as made:\n%s", r.head);
    ht_resp_free(&r);
    kh_signal(p, SIGTERM);
    kh_assert(p, kh_wait_exit(p, 10000) == 0, "clean exit");
    /* The access log read the made fields in the log phase, before they
     * were freed. */
    FILE *f = fopen(log, "r");
    kh_assert(p, f != NULL, "%s", log);
    char text[4096];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    kh_assert(p, strstr(text, "GET /file-2.txt HTTP/1.1 /file-2.txt two\n") != NULL,
              "the access log's line:\n%s", text);
}

Test(made_fields, the_same_over_http2, .timeout = 60, .fini = kh_cleanup_all)
{
    const char *probe[] = {"sh", "-c", "curl -V | grep -q HTTP2", NULL};
    ht_run_result rr = ht_run(probe, 10000);
    if (rr.status != 0)
        cr_skip_test("curl without HTTP/2");
    ht_run_free(&rr);
    char conf[1024], log[256];
    config_with_log(conf, sizeof conf, log, sizeof log);
    kh_proc *p = kh_start(conf, NULL, 2, 10000);
    /* One curl a request: curl 7.88 fails a second request on a reused
     * prior-knowledge connection (nghttp's pass on one). */
    static const struct {
        const char *path, *want[4];
    } cases[] = {
        {"/h2/a", {"HTTP/2 200", "x-made: /h2/a\r\n", "x-second: two\r\n", "content-length: 5"}},
        {"/h2/b", {"HTTP/2 200", "x-made: /h2/b\r\n", "x-second: two\r\n", "content-length: 5"}},
        {"/single/h2", {"HTTP/2 200", "x-made: by-name\r\n", "x-made: /single/h2\r\n", "made"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cmd[256];
        snprintf(cmd, sizeof cmd,
                 "curl -sS -i --max-time 10 --http2-prior-knowledge http://127.0.0.1:%u%s",
                 kh_port(p, 1), cases[i].path);
        const char *argv[] = {"sh", "-c", cmd, NULL};
        rr = ht_run(argv, 20000);
        kh_assert(p, rr.status == 0, "%s: %d %s", cmd, rr.status, rr.err);
        for (size_t k = 0; k < 4; k++)
            kh_assert(p, strstr(rr.out, cases[i].want[k]) != NULL, "no '%s' in\n%s",
                      cases[i].want[k], rr.out);
        kh_assert(p, strstr(rr.out, "x-refusal") == NULL, "a refusal missed:\n%s", rr.out);
        if (i < 2)
            kh_assert(p, strstr(rr.out, "by-name") == NULL, "replaced:\n%s", rr.out);
        ht_run_free(&rr);
    }
    kh_stop(p);
}

/* A module built for ABI 1.12 (mod_made.c targets it) loads on a 1.13
 * host, says so, and its 1.12 calls work as before. */
Test(made_fields, a_module_built_for_1_12_loads, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = kh_start(
        "[keel]\nlisten = 127.0.0.1:0 http1\nworkers = 1\nlog_level = debug\n" KH_MODULE_PATH
        "modules = http1 made\n",
        NULL, 1, 10000);
    kh_assert(p, strstr(kh_stderr(p), "module 'made' 1.0.0 (ABI 1.12) loaded from") != NULL,
              "the load line");
    ht_resp r = {0};
    get(p, "/file-a.txt", &r);
    kh_assert(p, r.status == 200, "status %d", r.status);
    kh_assert(p, ht_header(&r, "X-Made") && strcmp(ht_header(&r, "X-Made"), "/file-a.txt") == 0,
              "X-Made:\n%s", r.head);
    ht_resp_free(&r);
    kh_stop(p);
}
