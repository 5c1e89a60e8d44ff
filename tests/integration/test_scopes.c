/* Scopes (docs/configuration.md): sites by Host, wildcards, path prefixes
 * nested in sites, listeners by name, the nginx-style merge, what an
 * unknown host gets, and the errors a config gets for scopes. The test
 * module `scoped` answers every GET with the values keel_request_config
 * gave it. */
#define _GNU_SOURCE
#include "harness.h"
#include "test_http.h"

#include <stdio.h>
#include <string.h>

/* GET path with the given Host (NULL: none) on port; returns the status,
 * the body's first line in body. */
static int get(unsigned port, const char *host, const char *path, char *body, size_t cap)
{
    int fd = kh_connect("127.0.0.1", port);
    cr_assert(fd >= 0, "connect to %u", port);
    char req[512];
    if (host != NULL)
        snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", path,
                 host);
    else
        snprintf(req, sizeof req, "GET %s HTTP/1.0\r\n\r\n", path);
    cr_assert_eq(kh_send_str(fd, req), 0);
    char buf[4096];
    size_t n = kh_recv_n(fd, buf, sizeof buf, sizeof buf - 1, 5000);
    close(fd);
    int status = 0;
    cr_assert(n > 12 && sscanf(buf, "HTTP/1.%*c %d", &status) == 1, "no answer to %s %s: '%s'",
              host ? host : "-", path, buf);
    const char *b = strstr(buf, "\r\n\r\n");
    snprintf(body, cap, "%s", b ? b + 4 : "");
    body[strcspn(body, "\n")] = '\0';
    return status;
}

static void expect(unsigned port, const char *host, const char *path, const char *want)
{
    char body[1024];
    int status = get(port, host, path, body, sizeof body);
    cr_expect_eq(status, 200, "%s %s: status %d", host ? host : "-", path, status);
    cr_expect_str_eq(body, want, "%s %s", host ? host : "-", path);
}

#define HEAD                                                                                       \
    "[keel]\nlisten = 127.0.0.1:0 http1 name=public\nlisten = 127.0.0.1:0 http1 "                  \
    "name=internal\nmodules = http1 scoped\nworkers = 1\n" KH_MODULE_PATH

static const char sites_conf[] =
    HEAD "[scoped]\ngreeting = hi\ntags = g1\ntags = g2\n"
         "[site example.com www.example.com]\nlisteners = public\nscoped.greeting = ex\n"
         "scoped.level = 1\n"
         "[site example.com /api/]\nscoped.level = 2\nscoped.tags = api\n"
         "[site example.com /api/v2/]\nscoped.tags = v2\n"
         "[site *.example.org]\nscoped.greeting = org\n"
         "[/static/]\nscoped.level = 5\n"
         "[listener internal]\nscoped.note = inside\nscoped.greeting = int\n";

Test(scopes, sites_paths_and_listeners_merge_inside_out, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = kh_start(sites_conf, NULL, 2, 10000);
    unsigned pub = kh_port(p, 0), internal = kh_port(p, 1);
    /* Exact names, any case, with a port or a trailing dot. */
    expect(pub, "example.com", "/", "greeting=ex level=1 tags=g1,g2 note=-");
    expect(pub, "WWW.Example.COM:8080", "/x", "greeting=ex level=1 tags=g1,g2 note=-");
    expect(pub, "example.com.", "/", "greeting=ex level=1 tags=g1,g2 note=-");
    /* Path prefixes: the longest wins and inherits from the shorter one;
     * a list written inside replaces the outer one. */
    expect(pub, "example.com", "/api/x", "greeting=ex level=2 tags=api note=-");
    expect(pub, "example.com", "/api/v2/y", "greeting=ex level=2 tags=v2 note=-");
    expect(pub, "example.com", "/apix", "greeting=ex level=1 tags=g1,g2 note=-");
    /* Dot segments are removed before the prefix is matched. */
    expect(pub, "example.com", "/x/../api/z", "greeting=ex level=2 tags=api note=-");
    /* Wildcards match one label or more, not the bare suffix. */
    expect(pub, "a.example.org", "/", "greeting=org level=0 tags=g1,g2 note=-");
    expect(pub, "a.b.example.org", "/", "greeting=org level=0 tags=g1,g2 note=-");
    expect(pub, "example.org", "/", "greeting=hi level=0 tags=g1,g2 note=-");
    /* No site: the implicit one, with its own path scope. */
    expect(pub, "other.test", "/static/a", "greeting=hi level=5 tags=g1,g2 note=-");
    expect(pub, NULL, "/", "greeting=hi level=0 tags=g1,g2 note=-");
    /* The internal listener: its own keys, and example.com is not served
     * there (listeners = public). */
    expect(internal, "example.com", "/", "greeting=int level=0 tags=g1,g2 note=inside");
    expect(internal, "a.example.org", "/", "greeting=org level=0 tags=g1,g2 note=inside");
    /* The worker remembers the last Host's site (one worker here): the
     * same bytes on the other listener, or on another path, are still
     * theirs. */
    expect(pub, "example.com", "/api/x", "greeting=ex level=2 tags=api note=-");
    expect(internal, "example.com", "/api/x", "greeting=int level=0 tags=g1,g2 note=inside");
    expect(pub, "example.com", "/", "greeting=ex level=1 tags=g1,g2 note=-");
    kh_stop(p);
}

Test(scopes, an_unknown_host_gets_421_or_the_default_site, .timeout = 60, .fini = kh_cleanup_all)
{
    char conf[2048];
    snprintf(conf, sizeof conf, "%sunknown_host = 421\n[site example.com]\nscoped.greeting = ex\n",
             HEAD);
    kh_proc *p = kh_start(conf, NULL, 2, 10000);
    char body[1024];
    cr_expect_eq(get(kh_port(p, 0), "nobody.test", "/", body, sizeof body), 421);
    cr_expect_eq(get(kh_port(p, 0), "nobody.test", "/", body, sizeof body), 421, "remembered");
    cr_expect_eq(get(kh_port(p, 0), NULL, "/", body, sizeof body), 421);
    expect(kh_port(p, 0), "example.com", "/", "greeting=ex level=0 tags= note=-");
    kh_stop(p);

    snprintf(conf, sizeof conf,
             "%sunknown_host = 404\n[site example.com]\nscoped.greeting = ex\n"
             "[site default]\nscoped.greeting = dflt\n[/p/]\nscoped.level = 3\n",
             HEAD);
    p = kh_start(conf, NULL, 2, 10000);
    /* A site named default takes what no other name does, whatever
     * unknown_host says; [/prefix] then belongs to it. */
    expect(kh_port(p, 0), "nobody.test", "/", "greeting=dflt level=0 tags= note=-");
    expect(kh_port(p, 0), "nobody.test", "/p/q", "greeting=dflt level=3 tags= note=-");
    expect(kh_port(p, 0), "example.com", "/p/q", "greeting=ex level=0 tags= note=-");
    kh_stop(p);
}

/* Over HTTP/2 the site comes from :authority (curl sends no Host). */
Test(scopes, http2_sites_come_from_the_authority, .timeout = 60, .fini = kh_cleanup_all)
{
    char conf[2048];
    snprintf(conf, sizeof conf,
             "[keel]\nlisten = 127.0.0.1:0 h2\nmodules = http1 h2 scoped\nworkers = 1\n"
             "%s[site example.com]\nscoped.greeting = ex\n[site example.com /api/]\n"
             "scoped.level = 2\n",
             KH_MODULE_PATH);
    kh_proc *p = kh_start(conf, NULL, 1, 10000);
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/api/x", kh_port(p, 0));
    const char *argv[] = {"curl", "-s", "--http2-prior-knowledge", "--connect-to", NULL, url, NULL};
    char connect_to[64];
    snprintf(connect_to, sizeof connect_to, "example.com:80:127.0.0.1:%u", kh_port(p, 0));
    argv[4] = connect_to;
    ht_run_result rr = ht_run(argv, 10000);
    cr_expect_eq(rr.status, 0, "curl: %s", rr.err);
    cr_expect_str_eq(rr.out, "greeting=hello level=0 tags= note=-\n", "an IP authority");
    ht_run_free(&rr);
    snprintf(url, sizeof url, "http://example.com/api/x");
    argv[5] = url;
    rr = ht_run(argv, 10000);
    cr_expect_eq(rr.status, 0, "curl: %s", rr.err);
    cr_expect_str_eq(rr.out, "greeting=ex level=2 tags= note=-\n");
    ht_run_free(&rr);
    kh_stop(p);
}

/* keel -t refuses each with FILE:LINE and the reason. */
Test(scopes, scope_errors_name_file_and_line, .timeout = 60, .fini = kh_cleanup_all)
{
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"[site a.test]\nscoped.note = x\n",
         ":8: [site a.test] scoped.note: not allowed in a site scope (only: global, listener)"},
        {"[site a.test]\nscoped.level = 10\n",
         ":8: [site a.test] scoped.level: expected an integer between 0 and 9"},
        {"[site a.test]\nscoped.nope = 1\n", ":8: [site a.test] unknown key 'scoped.nope'"},
        {"[site a.test]\nlisteners = nowhere\n",
         ":7: [site a.test] listeners: no listen line is named 'nowhere'"},
        {"[site Bad_Name]\n", ":7: [site Bad_Name] 'Bad_Name' is not a site name"},
        {"[site a.test]\n[site b.test a.test]\n",
         ":8: [site b.test a.test] the name 'a.test' is given to another site already"},
        {"[site b.test /x/]\n", ":7: [site b.test /x/] no [site] is named 'b.test'"},
        {"[listener nowhere]\n", ":7: [listener nowhere] no listen line is named 'nowhere'"},
        {"[/a/../b/]\n", ":7: [/a/../b/] '/a/../b/' is not a path prefix"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char conf[2048], label[32];
        snprintf(conf, sizeof conf, "%s%s", HEAD, cases[i].text);
        snprintf(label, sizeof label, "case %zu", i);
        ht_expect_config_error(conf, cases[i].want, label);
    }
}
