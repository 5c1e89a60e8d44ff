/* The headers and access modules against nginx on the same scenario:
 * add_header with and without `always` on a page and on a 404, and
 * allow/deny lists that admit or refuse this client (127.0.0.1). nginx
 * runs with a generated config on a free port (as test_proxy_nginx.c
 * starts it); keel serves the same folder with static. For each request,
 * the status and whether the field came must be the same. Skipped where
 * nginx is not installed. */
#define _GNU_SOURCE
#include "harness.h"
#include "nginx.h"
#include "test_http.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static void put(const char *dir, const char *name, const char *text)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    cr_assert(f && fputs(text, f) >= 0 && fclose(f) == 0, "%s", path);
}

/* The status of GET path on port, and whether X-A came. */
static int get(kh_proc *p, unsigned port, const char *path, int *has_field)
{
    ht_conn *c = ht_connect(port);
    char req[256];
    snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", path);
    ht_send_str(c, req);
    ht_resp r = {0};
    ht_expect_response(p, c, &r, 0);
    ht_close(c);
    *has_field = ht_header(&r, "X-A") != NULL;
    int status = r.status;
    ht_resp_free(&r);
    return status;
}

/* The same rules in both servers' words, path scope by location. */
static const struct {
    const char *prefix, *nginx, *keel;
} scopes[] = {
    {"/plain/", "add_header X-A one;", "headers.add = X-A: one\n"},
    {"/always/", "add_header X-A one always;", "headers.add = X-A: one\nheaders.always = on\n"},
    {"/acl-in/", "deny 127.0.0.2; allow 127.0.0.0/8; deny all;",
     "access.rule = deny 127.0.0.2\naccess.rule = allow 127.0.0.0/8\naccess.rule = deny all\n"},
    {"/acl-out/", "allow 10.0.0.0/8; allow ::1; deny all;",
     "access.rule = allow 10.0.0.0/8 ::1\naccess.rule = deny all\n"},
    {"/acl-v6/", "deny ::1; allow all;", "access.rule = deny ::1\naccess.rule = allow all\n"},
    {"/acl-acl/", "add_header X-A one always; allow 127.0.0.1; deny all;",
     "headers.add = X-A: one\nheaders.always = on\naccess.rule = allow 127.0.0.1\n"
     "access.rule = deny all\n"},
};

Test(web_nginx, same_answers_as_nginx, .timeout = 90, .fini = kh_cleanup_all)
{
    const char *bin = kn_nginx_bin();
    char dir[] = "/tmp/keel-web-nginx-XXXXXX";
    cr_assert(mkdtemp(dir) != NULL);
    chmod(dir, 0755); /* nginx's worker runs as an unprivileged user when started as root */
    char www[600], path[700];
    snprintf(www, sizeof www, "%s/www", dir);
    mkdir(www, 0755);
    for (size_t i = 0; i < sizeof scopes / sizeof scopes[0]; i++) {
        snprintf(path, sizeof path, "%s%s", www, scopes[i].prefix);
        mkdir(path, 0755);
        put(path, "index.html", "page\n");
    }
    snprintf(path, sizeof path, "%s/logs", dir);
    mkdir(path, 0755);

    unsigned nport = kh_free_port();
    char nconf[4096], kconf[4096];
    int n = snprintf(nconf, sizeof nconf,
                     "worker_processes 1;\ndaemon off;\npid %s/nginx.pid;\n"
                     "error_log %s/logs/error.log warn;\nevents { worker_connections 64; }\n"
                     "http {\n  access_log off;\n  client_body_temp_path %s/body;\n"
                     "  server {\n    listen 127.0.0.1:%u;\n    root %s;\n",
                     dir, dir, dir, nport, www);
    int k = snprintf(kconf, sizeof kconf,
                     "[keel]\nlisten = 127.0.0.1:0 http1\nworkers = 1\n" KH_MODULE_PATH
                     "modules = http1 access headers static\n[static]\nmount = / %s\n",
                     www);
    for (size_t i = 0; i < sizeof scopes / sizeof scopes[0]; i++) {
        n += snprintf(nconf + n, sizeof nconf - (size_t)n, "    location %s { %s }\n",
                      scopes[i].prefix, scopes[i].nginx);
        k += snprintf(kconf + k, sizeof kconf - (size_t)k, "[%s]\n%s", scopes[i].prefix,
                      scopes[i].keel);
    }
    snprintf(nconf + n, sizeof nconf - (size_t)n, "  }\n}\n");
    snprintf(path, sizeof path, "%s/nginx.conf", dir);
    put(dir, "nginx.conf", nconf);
    const char *args[] = {"-p", dir, "-e", "/dev/stderr", "-c", path, NULL};
    kh_proc *ng = kh_spawn_program(bin, NULL, args);
    if (!kh_wait_accepts(nport, 5000))
        cr_assert_fail("nginx did not start: %s", kh_stderr(ng));
    kh_proc *p = kh_start(kconf, NULL, 1, 10000);

    int compared = 0;
    for (size_t i = 0; i < sizeof scopes / sizeof scopes[0]; i++)
        for (int missing = 0; missing < 2; missing++) {
            char url[128];
            snprintf(url, sizeof url, "%s%s", scopes[i].prefix, missing ? "nothing" : "index.html");
            int nf, kf;
            int ns = get(ng, nport, url, &nf), ks = get(p, kh_port(p, 0), url, &kf);
            kh_assert(p, ns == ks && nf == kf, "%s: nginx %d%s, keel %d%s", url, ns,
                      nf ? " with X-A" : "", ks, kf ? " with X-A" : "");
            compared++;
        }
    kh_assert(p, compared == 12, "compared %d", compared);
    kh_stop(p);
    kh_stop(ng);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_expect(system(cmd) == 0);
}
