/* Per-site mounts (docs/web.md, "Virtual hosts"): two sites on one
 * listener serve different directories by Host (and :authority over
 * HTTP/2), a wildcard site, a site without mount lines falls back to the
 * global ones, unknown_host 421 still holds, the open-file cache keeps
 * the sites' files apart, and keel -t names a bad line's file and line. */
#define _GNU_SOURCE
#include "harness.h"
#include "test_static.h"

#include <stdio.h>
#include <string.h>

/* a/ and b/ hold index.html and page.txt with their own text; www/ the
 * global one. */
static void make_sites(void)
{
    st_make_tree();
    st_mkdir("a");
    st_mkdir("b");
    st_write_str("a/index.html", "site A\n");
    st_write_str("b/index.html", "site B\n");
    st_write_str("a/only-a.txt", "only A\n");
    st_write_str("www/index.html", "global\n");
}

/* keel with http1, h2 and static: the global mount is www/, tail the
 * scope sections. */
static kh_proc *start_sites(const char *tail, const char *listen, const char *keel_extra)
{
    char conf[8192];
    snprintf(conf, sizeof conf,
             "[keel]\nlisten = 127.0.0.1:0 %s\nworkers = 1\nmodules = http1 h2 static\n%s"
             "%s[static]\nmount = / %s/www\n%s",
             listen, keel_extra, KH_MODULE_PATH, st_base, tail);
    kh_proc *p = kh_start(conf, NULL, 1, 10000);
    kh_assert(p, kh_port(p, 0) > 0, "no port in the 'listening on' line");
    return p;
}

static const char *sites_tail(void)
{
    return ht_fmt("[site a.test]\nstatic.mount = / %s/a\n"
                  "[site b.test *.b.test]\nstatic.mount = / %s/b\nstatic.mount = /extra %s/a\n"
                  "[site c.test]\n",
                  st_base, st_base, st_base);
}

/* GET path with Host on the open connection; the body must be want. */
static void expect_on(kh_proc *p, ht_conn *c, const char *host, const char *path, int status,
                      const char *want)
{
    ht_resp r;
    memset(&r, 0, sizeof r);
    ht_send_str(c, ht_fmt("GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, host));
    ht_expect_response(p, c, &r, 0);
    kh_assert(p, r.status == status, "%s %s: expected %d, got %d", host, path, status, r.status);
    if (want != NULL)
        kh_assert(p, r.body != NULL && strcmp(r.body, want) == 0, "%s %s: body '%s', not '%s'",
                  host, path, r.body ? r.body : "", want);
    ht_resp_free(&r);
}

/* Same path, different files, alternating on one keep-alive connection
 * with the open-file cache on (the default): each site gets its own. */
Test(static_sites, two_sites_by_host_alternating_on_one_connection, .timeout = 60,
     .fini = st_cleanup)
{
    make_sites();
    kh_proc *p = start_sites(sites_tail(), "http1", "");
    ht_conn *c = ht_connect(kh_port(p, 0));
    for (int i = 0; i < 3; i++) {
        expect_on(p, c, "a.test", "/index.html", 200, "site A\n");
        expect_on(p, c, "b.test", "/index.html", 200, "site B\n");
        expect_on(p, c, "a.test", "/", 200, "site A\n");
        expect_on(p, c, "b.test", "/", 200, "site B\n");
        expect_on(p, c, "nobody.test", "/index.html", 200, "global\n");
    }
    /* The wildcard, a prefix only b mounts, a file only a has. */
    expect_on(p, c, "x.b.test", "/index.html", 200, "site B\n");
    expect_on(p, c, "b.test", "/extra/only-a.txt", 200, "only A\n");
    expect_on(p, c, "a.test", "/extra/only-a.txt", 404, NULL);
    expect_on(p, c, "b.test", "/only-a.txt", 404, NULL);
    expect_on(p, c, "a.test", "/only-a.txt", 200, "only A\n");
    /* A site without mount lines serves the global ones. */
    expect_on(p, c, "c.test", "/index.html", 200, "global\n");
    ht_close(c);
    kh_stop(p);
}

Test(static_sites, an_unknown_host_gets_421, .timeout = 60, .fini = st_cleanup)
{
    make_sites();
    kh_proc *p = start_sites(sites_tail(), "http1", "unknown_host = 421\n");
    ht_conn *c = ht_connect(kh_port(p, 0));
    expect_on(p, c, "a.test", "/index.html", 200, "site A\n");
    expect_on(p, c, "nobody.test", "/index.html", 421, NULL);
    ht_close(c);
    kh_stop(p);
}

/* Over HTTP/2 the site comes from :authority. */
Test(static_sites, http2_sites_by_authority, .timeout = 60, .fini = st_cleanup)
{
    make_sites();
    kh_proc *p = start_sites(sites_tail(), "h2", "");
    char connect_a[64], connect_b[64];
    snprintf(connect_a, sizeof connect_a, "a.test:80:127.0.0.1:%u", kh_port(p, 0));
    snprintf(connect_b, sizeof connect_b, "b.test:80:127.0.0.1:%u", kh_port(p, 0));
    const char *argv[] = {"curl",         "-s",      "--http2-prior-knowledge",
                          "--connect-to", connect_a, "--connect-to",
                          connect_b,      NULL,      NULL};
    static const struct {
        const char *url, *want;
    } cases[] = {
        {"http://a.test/index.html", "site A\n"},
        {"http://b.test/index.html", "site B\n"},
        {"http://a.test/index.html", "site A\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        argv[7] = cases[i].url;
        ht_run_result rr = ht_run(argv, 10000);
        cr_expect_eq(rr.status, 0, "curl: %s", rr.err);
        cr_expect_str_eq(rr.out, cases[i].want, "%s", cases[i].url);
        ht_run_free(&rr);
    }
    kh_stop(p);
}

/* keel -t names the scope's line. */
Test(static_sites, a_bad_site_mount_names_file_and_line, .timeout = 60, .fini = st_cleanup)
{
    make_sites();
    static const struct {
        const char *line, *want;
    } cases[] = {
        {"static.mount = / %s/a listing=maybe",
         ":9: [site a.test] static.mount: listing: expected on or off"},
        {"static.mount = / %s/none",
         ":9: [site a.test] static.mount: %s/none: No such file or directory"},
        {"static.mount = / relative/dir%.0s",
         ":9: [site a.test] static.mount: a mount in a [listener] or [site] scope needs an "
         "absolute directory"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char conf[4096], line[512], want[512], label[32];
        snprintf(line, sizeof line, cases[i].line, st_base);
        snprintf(want, sizeof want, cases[i].want, st_base);
        snprintf(conf, sizeof conf,
                 "[keel]\nlisten = 127.0.0.1:0 http1\nworkers = 1\nmodules = http1 static\n"
                 "%s[static]\nmount = / %s/www\n[site a.test]\n%s\n",
                 KH_MODULE_PATH, st_base, line);
        snprintf(label, sizeof label, "case %zu", i);
        ht_expect_config_error(conf, want, label);
    }
}

/* examples/configs/sites.conf as written, with its /srv/www below the
 * test's directory and a free port. */
Test(static_sites, the_example_config_serves_each_site, .timeout = 60, .fini = st_cleanup)
{
    st_make_tree();
    st_mkdir("srv");
    st_mkdir("srv/www");
    static const char *const dirs[] = {"default", "example.com", "files", "blog"};
    for (size_t i = 0; i < 4; i++) {
        st_mkdir(ht_fmt("srv/www/%s", dirs[i]));
        st_write_str(ht_fmt("srv/www/%s/index.html", dirs[i]), ht_fmt("%s\n", dirs[i]));
    }
    char *text = kh_read_file(KEEL_SOURCE_DIR "/examples/configs/sites.conf");
    cr_assert(text != NULL, "read the example");
    char conf[8192];
    size_t n = 0;
    for (const char *s = text; *s && n + 600 < sizeof conf;) {
        if (strncmp(s, "/srv/www", 8) == 0) {
            n += (size_t)snprintf(conf + n, sizeof conf - n, "%s/srv/www", st_base);
            s += 8;
        } else if (strncmp(s, "127.0.0.1:8080", 14) == 0) {
            n += (size_t)snprintf(conf + n, sizeof conf - n, "127.0.0.1:0");
            s += 14;
        } else if (strncmp(s, "[keel]\n", 7) == 0) {
            n += (size_t)snprintf(conf + n, sizeof conf - n, "[keel]\n%s", KH_MODULE_PATH);
            s += 7;
        } else {
            conf[n++] = *s++;
        }
    }
    conf[n] = '\0';
    free(text);
    kh_proc *p = kh_start(conf, NULL, 1, 10000);
    ht_conn *c = ht_connect(kh_port(p, 0));
    expect_on(p, c, "example.com", "/", 200, "example.com\n");
    expect_on(p, c, "www.example.com", "/downloads/index.html", 200, "files\n");
    expect_on(p, c, "blog.example.com", "/", 200, "blog\n");
    expect_on(p, c, "blog.example.com", "/downloads/index.html", 404, NULL);
    expect_on(p, c, "other.test", "/", 200, "default\n");
    ht_close(c);
    kh_stop(p);
}
