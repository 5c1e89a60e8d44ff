/* static's `try` (nginx's try_files; docs/web.md, "Single-page apps and
 * try_files"): client-side routes get the app's index.html with 200, an
 * asset is served, a missing asset under a scope that says `$uri =404`
 * is a 404 (not the app); a directory's index through `$uri/`; a list
 * ending in =STATUS; the config's errors with file:line; and the example
 * examples/configs/spa.conf, run as written. */
#define _GNU_SOURCE
#include "test_static.h"

#define APP "<!doctype html><title>app</title>\n"
#define JS  "console.log('app')\n"

static void make_app(void)
{
    st_make_tree();
    st_write_str("www/index.html", APP);
    st_mkdir("www/assets");
    st_write_str("www/assets/x.js", JS);
    st_mkdir("www/docs");
    st_write_str("www/docs/index.html", "docs\n");
    st_write_str("www/404.html", "not here\n");
}

static kh_proc *start_try(const char *statics, const char *more)
{
    char conf[8192];
    snprintf(conf, sizeof conf,
             "[keel]\nlisten = 127.0.0.1:0 http1\nworkers = 1\n"
             "modules = http1 errors static\n" KH_MODULE_PATH "[static]\nmount = / %s\n%s%s",
             st_root, statics, more ? more : "");
    kh_proc *p = kh_start(conf, NULL, 1, 10000);
    kh_assert(p, kh_port(p, 0) > 0, "no port in the 'listening on' line");
    return p;
}

static void expect(kh_proc *p, const char *target, int status, const char *body)
{
    ht_resp r;
    st_get(p, target, NULL, &r);
    kh_assert(p, r.status == status, "GET %s: status %d, want %d\n%s", target, r.status, status,
              r.head);
    kh_assert(p, r.body_len == strlen(body) && memcmp(r.body, body, r.body_len) == 0,
              "GET %s: body '%.*s', want '%s'", target, (int)r.body_len, r.body ? r.body : "",
              body);
    ht_resp_free(&r);
}

Test(static_try, spa_routes_get_the_app_and_missing_assets_a_404, .timeout = 60, .fini = st_cleanup)
{
    make_app();
    kh_proc *p =
        start_try("try = $uri $uri/ /index.html\n", "[/assets/]\nstatic.try = $uri =404\n");
    expect(p, "/", 200, APP);
    expect(p, "/users/42", 200, APP);
    expect(p, "/a/deep/client/route?tab=2", 200, APP);
    expect(p, "/missing.png", 200, APP); /* outside /assets/: a route like any other */
    expect(p, "/assets/x.js", 200, JS);
    expect(p, "/assets/missing.js", 404, "404 Not Found\n");
    expect(p, "/assets/", 404, "404 Not Found\n");
    /* $uri/: a directory's index; without its slash, the redirect to it
     * first (nginx's try_files does the same: test_web_nginx.c). */
    expect(p, "/docs/", 200, "docs\n");
    ht_resp d;
    st_get(p, "/docs?x=1", NULL, &d);
    kh_assert(p,
              d.status == 301 && ht_header(&d, "Location") &&
                  strcmp(ht_header(&d, "Location"), "/docs/?x=1") == 0,
              "/docs: %d\n%s", d.status, d.head);
    ht_resp_free(&d);
    /* The app keeps its validators: a revalidation is a 304. */
    ht_resp r;
    st_get(p, "/users/42", NULL, &r);
    const char *etag = ht_header(&r, "ETag");
    kh_assert(p, etag != NULL, "no ETag");
    char et[128];
    snprintf(et, sizeof et, "%s", etag);
    ht_resp_free(&r);
    st_get(p, "/users/7", ht_fmt("If-None-Match: %s\r\n", et), &r);
    kh_assert(p, r.status == 304, "revalidation: %d", r.status);
    ht_resp_free(&r);
    kh_stop(p);
}

Test(static_try, a_final_status_and_the_error_page_it_gets, .timeout = 60, .fini = st_cleanup)
{
    make_app();
    kh_proc *p = start_try("try = $uri $uri.html =410\n", "[errors]\npage = 404 /404.html\n"
                                                          "[/x/]\nstatic.try = $uri =404\n");
    st_write_str("www/about.html", "about\n");
    expect(p, "/about", 200, "about\n"); /* $uri.html: clean URLs */
    expect(p, "/nothing", 410, "410 Gone\n");
    expect(p, "/x/nothing", 404, "not here\n"); /* =404 gets the page */
    kh_stop(p);
}

Test(static_try, no_try_is_the_plain_lookup, .timeout = 60, .fini = st_cleanup)
{
    make_app();
    kh_proc *p = start_try("", "[/app/]\nstatic.try = /index.html\n");
    expect(p, "/users/42", 404, "404 Not Found\n");
    expect(p, "/app/anything", 200, APP);
    kh_stop(p);
}

Test(static_try, bad_lists_are_refused_with_file_and_line, .timeout = 60, .fini = st_cleanup)
{
    static const struct {
        const char *value, *why;
    } bad[] = {
        {"$uri =404 /index.html", "may only end the list"},
        {"$uri index.html", "expected a path"},
        {"$uri =200", "300..599"},
        {"$path /index.html", "expected a path"},
        {"/$host/x", "$uri is the only variable"},
    };
    make_app();
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char conf[2048];
        snprintf(conf, sizeof conf,
                 "[keel]\nlisten = 127.0.0.1:0 http1\nmodules = http1 static\n" KH_MODULE_PATH
                 "[static]\nmount = / %s\n[/x/]\nstatic.try = %s\n",
                 st_root, bad[i].value);
        const char *args[] = {"-t", NULL};
        kh_proc *p = kh_spawn(conf, args);
        cr_assert_eq(kh_wait_exit(p, 10000), 1, "%s", bad[i].value);
        cr_expect(strstr(kh_stderr(p), ":8: [/x/] static.try: ") != NULL &&
                      strstr(kh_stderr(p), bad[i].why) != NULL,
                  "%s: %s", bad[i].value, kh_stderr(p));
    }
}

/* examples/configs/spa.conf as written, on a free port. */
Test(static_try, the_spa_example_runs, .timeout = 60, .fini = kh_cleanup_all)
{
    const char *args[] = {"-c",    KEEL_SOURCE_DIR "/examples/configs/spa.conf",
                          "--set", "keel.listen=127.0.0.1:0 http1",
                          "--set", "keel.module_path=" KEEL_MODULE_DIR,
                          "--set", "keel.workers=1",
                          NULL};
    kh_proc *p = kh_start(NULL, args, 1, 10000);
    ht_resp r;
    st_get(p, "/users/42", NULL, &r);
    kh_assert(p, r.status == 200 && strstr(r.body, "<script src=\"/assets/app.js\">"), "route: %d",
              r.status);
    ht_resp_free(&r);
    st_get(p, "/assets/app.js", NULL, &r);
    kh_assert(p, r.status == 200 && strstr(r.body, "function render()"), "asset: %d", r.status);
    ht_resp_free(&r);
    st_get(p, "/assets/missing.js", NULL, &r);
    kh_assert(p, r.status == 404 && strstr(r.body, "There is no such file here."), "missing: %d",
              r.status);
    ht_resp_free(&r);
    kh_stop(p);
}
