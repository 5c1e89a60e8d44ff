/* The rewrite module (modules/rewrite, docs/web.md "Redirects and
 * rewrites"): `return` with each status and target form, the variables,
 * HTTP to HTTPS followed by curl, `rewrite` with captures and nginx's flags
 * (last picks the new path's scope, break keeps the scope), the loop
 * limit, the PCRE2 match limit, no escape above "/", keel -t's errors,
 * the example config, and the same scenario against nginx. The `scoped`
 * test module answers what the router saw (show_path). Skipped where the
 * module was not built (no PCRE2). */
#define _GNU_SOURCE
#include "harness.h"
#include "nginx.h"
#include "test_http.h"
#include "tls_helpers.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static void need_module(void)
{
    if (access(KEEL_MODULE_DIR "/mod_rewrite.so", R_OK) != 0)
        cr_skip_test("the rewrite module is not built (PCRE2 absent)");
}

typedef struct answer {
    int status;
    char location[512];
    char body[1024]; /* the first line */
} answer;

/* One request (raw, so that the target goes out exactly as written). */
static answer ask(unsigned port, const char *host, const char *target)
{
    answer a = {0};
    int fd = kh_connect("127.0.0.1", port);
    cr_assert(fd >= 0, "connect to %u", port);
    char req[9000];
    if (host != NULL)
        snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n",
                 target, host);
    else
        snprintf(req, sizeof req, "GET %s HTTP/1.0\r\n\r\n", target);
    cr_assert_eq(kh_send_str(fd, req), 0);
    char buf[8192];
    size_t n = kh_recv_n(fd, buf, sizeof buf, sizeof buf - 1, 5000);
    close(fd);
    buf[n] = '\0';
    cr_assert(n > 12 && sscanf(buf, "HTTP/1.%*c %d", &a.status) == 1, "no answer to %s: '%s'",
              target, buf);
    const char *loc = strcasestr(buf, "\r\nLocation: ");
    if (loc != NULL)
        snprintf(a.location, sizeof a.location, "%.*s", (int)strcspn(loc + 12, "\r"), loc + 12);
    const char *b = strstr(buf, "\r\n\r\n");
    snprintf(a.body, sizeof a.body, "%s", b ? b + 4 : "");
    a.body[strcspn(a.body, "\n")] = '\0';
    return a;
}

typedef struct rw_case {
    const char *host, *target;
    int status;
    const char *location; /* NULL: none expected */
    const char *body;     /* NULL: not checked */
} rw_case;

static void check(unsigned port, const rw_case *c)
{
    answer a = ask(port, c->host, c->target);
    cr_expect_eq(a.status, c->status, "%s: status %d, wanted %d (%s)", c->target, a.status,
                 c->status, a.body);
    if (c->location != NULL)
        cr_expect_str_eq(a.location, c->location, "%s: Location", c->target);
    else
        cr_expect_str_eq(a.location, "", "%s: no Location", c->target);
    if (c->body != NULL)
        cr_expect_str_eq(a.body, c->body, "%s: body", c->target);
}

#define HEAD                                                                                       \
    "[keel]\nlisten = 127.0.0.1:0 http1\nmodules = http1 rewrite scoped\nworkers = "               \
    "1\n" KH_MODULE_PATH "[scoped]\nshow_path = on\n"

static const char returns_conf[] =
    HEAD "[/301/]\nrewrite.return = 301 https://$host$request_uri\n"
         "[/302/]\nrewrite.return = 302 /login?from=$uri\n"
         "[/303/]\nrewrite.return = 303 http://other.test/done\n"
         "[/307/]\nrewrite.return = 307 https://$host:8443$uri$is_args$args\n"
         "[/308/]\nrewrite.return = 308 $scheme://${host}x$request_uri\n"
         "[/url/]\nrewrite.return = https://example.org/\n"
         "[/403/]\nrewrite.return = 403 no $uri for $remote_addr on $server_port, $$5\n"
         "[/410/]\nrewrite.return = 410\n"
         "[/410/open/]\nrewrite.return = off\n";

Test(rewrite, return_statuses_and_targets, .timeout = 60, .fini = kh_cleanup_all)
{
    need_module();
    kh_proc *p = kh_start(returns_conf, NULL, 1, 10000);
    unsigned port = kh_port(p, 0);
    char port_body[128];
    snprintf(port_body, sizeof port_body, "no /403/x for 127.0.0.1 on %u, $5", port);
    const rw_case cases[] = {
        /* $host: lower-case, without the port; $request_uri as received. */
        {"Example.COM:8080", "/301/a%20b?x=1", 301, "https://example.com/301/a%20b?x=1",
         "301 Moved Permanently"},
        /* A relative target stays relative (RFC 9110 10.2.2); a decoded
         * $uri is escaped in a Location. */
        {"a.test", "/302/a%20b", 302, "/login?from=/302/a%20b", "302 Found"},
        {"a.test", "/303/", 303, "http://other.test/done", "303 See Other"},
        {"a.test", "/307/x?q=1", 307, "https://a.test:8443/307/x?q=1", NULL},
        {"a.test", "/307/x", 307, "https://a.test:8443/307/x", NULL},
        {"a.test", "/308/y", 308, "http://a.testx/308/y", "308 Permanent Redirect"},
        {"a.test", "/url/", 302, "https://example.org/", NULL},
        /* Another status: the text, variables expanded, or the short body. */
        {"a.test", "/403/x", 403, NULL, port_body},
        {"a.test", "/410/x", 410, NULL, "410 Gone"},
        /* `off` drops the enclosing scope's return. */
        {"a.test", "/410/open/x", 200, NULL,
         "greeting=hello level=0 tags= note=- path=/410/open/x query="},
        /* No Host (HTTP/1.0): the address the client reached. */
        {NULL, "/301/z", 301, "https://127.0.0.1/301/z", NULL},
        {"a.test", "/other", 200, NULL, "greeting=hello level=0 tags= note=- path=/other query="},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check(port, &cases[i]);
    kh_stop(p);
}

static const char rules_conf[] = HEAD "[rewrite]\n"
                                      /* captures, a new query with the old one after it */
                                      "rewrite = ^/user/(\\w+)/(\\d+)$ /profile/$2?name=$1\n"
                                      /* a trailing ? drops the old query */
                                      "rewrite = ^/clean/(.*)$ /plain/$1? break\n"
                                      "rewrite = ^/l/(.*)$ /api/$1 last\n"
                                      "rewrite = ^/b/(.*)$ /api/$1 break\n"
                                      /* rules that give the path back as it is */
                                      "rewrite = ^/keep/(.*)$ /keep/$1 break\n"
                                      "rewrite = ^/keep/(.*)$ /api/never/$1\n"
                                      "rewrite = ^/id/(.*)$ /id/$1\n"
                                      "rewrite = ^/id/(.*)$ /api/id/$1\n"
                                      "rewrite = ^/same/(.*)$ /same/$1 last\n"
                                      /* without a flag the next rules see the new path */
                                      "rewrite = ^/one/(.*)$ /two/$1\n"
                                      "rewrite = ^/two/(.*)$ /api/three/$1\n"
                                      "rewrite = ^/moved/(.*)$ /new/$1 permanent\n"
                                      "rewrite = ^/temp/(.*)$ /new/$1 redirect\n"
                                      "rewrite = ^/ext/(.*)$ https://$host/x/$1\n"
                                      "rewrite = ^/loop(.*)$ /loop$1x last\n"
                                      "rewrite = ^/a(\\.+)$ /$1 last\n"
                                      "rewrite = ^/nest/(.*)$ /nest/../../$1\n"
                                      "rewrite = ^/(z+)+$ /matched\n"
                                      /* the literal prefix checked before PCRE2 stops before x? */
                                      "rewrite = ^/opt/x?y$ /api/opt last\n"
                                      "[/api/]\nscoped.greeting = api\n"
                                      "rewrite.rewrite = ^/api/old$ /api/new\n";

Test(rewrite, captures_flags_and_scopes, .timeout = 60, .fini = kh_cleanup_all)
{
    need_module();
    kh_proc *p = kh_start(rules_conf, NULL, 1, 10000);
    unsigned port = kh_port(p, 0);
    const rw_case cases[] = {
        {"a.test", "/user/ann/42?x=1", 200, NULL,
         "greeting=hello level=0 tags= note=- path=/profile/42 query=name=ann&x=1"},
        {"a.test", "/clean/p?x=1", 200, NULL,
         "greeting=hello level=0 tags= note=- path=/plain/p query="},
        /* last: the scope is chosen again for /api/x, and its own rules
         * run (the list there replaces the outer one). */
        {"a.test", "/l/x?k=v", 200, NULL,
         "greeting=api level=0 tags= note=- path=/api/x query=k=v"},
        {"a.test", "/l/old", 200, NULL, "greeting=api level=0 tags= note=- path=/api/new query="},
        /* break: the same path, but the scope stays the one chosen first. */
        {"a.test", "/b/x", 200, NULL, "greeting=hello level=0 tags= note=- path=/api/x query="},
        /* A rule that gives the path back: break stops there, without
         * a flag the next rules run, `last` loops (nginx: 500); a final
         * LF is not in $1, so that rule's path is a new one. */
        {"a.test", "/keep/y?k=v", 200, NULL,
         "greeting=hello level=0 tags= note=- path=/keep/y query=k=v"},
        {"a.test", "/keep/x%0A", 200, NULL,
         "greeting=hello level=0 tags= note=- path=/keep/x query="},
        {"a.test", "/id/x", 200, NULL, "greeting=api level=0 tags= note=- path=/api/id/x query="},
        {"a.test", "/same/x", 500, NULL, NULL},
        /* no flag: rules go on, then the scope is chosen again */
        {"a.test", "/one/q", 200, NULL,
         "greeting=api level=0 tags= note=- path=/api/three/q query="},
        /* a decoded capture is escaped in a Location */
        {"a.test", "/moved/a%20b?q=1", 301, "/new/a%20b?q=1", NULL},
        {"a.test", "/temp/t", 302, "/new/t", NULL},
        {"A.test", "/ext/e", 302, "https://a.test/x/e", NULL},
        /* ten restarts at most, as nginx */
        {"a.test", "/loop", 500, NULL, NULL},
        /* the new path is checked as a client's: never above "/" */
        {"a.test", "/a..", 400, NULL, NULL},
        {"a.test", "/nest/etc", 400, NULL, NULL},
        {"a.test", "/zzz", 200, NULL, "greeting=hello level=0 tags= note=- path=/matched query="},
        {"a.test", "/opt/y", 200, NULL, "greeting=api level=0 tags= note=- path=/api/opt query="},
        {"a.test", "/opt/xy", 200, NULL, "greeting=api level=0 tags= note=- path=/api/opt query="},
        {"a.test", "/opt/z", 200, NULL, "greeting=hello level=0 tags= note=- path=/opt/z query="},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check(port, &cases[i]);
    cr_expect(kh_wait_log(p, "more than 10 rewrites", 5000), "the loop is logged");
    kh_stop(p);
}

/* A backtracking expression against a path made for it: PCRE2's own
 * default (ten million steps) would let this one run to a no-match (200);
 * the module's limit (100,000) cuts it: 500, logged, at once. */
Test(rewrite, the_match_limit_cuts_backtracking, .timeout = 60, .fini = kh_cleanup_all)
{
    need_module();
    kh_proc *p = kh_start(rules_conf, NULL, 1, 10000);
    unsigned port = kh_port(p, 0);
    char target[8200] = "/";
    memset(target + 1, 'z', 20);
    strcpy(target + 21, "!");
    long long t0 = kh_now_ms();
    answer a = ask(port, "a.test", target);
    cr_expect_eq(a.status, 500, "status %d", a.status);
    cr_expect(kh_wait_log(p, "match limit exceeded", 5000), "logged: %s", kh_stderr(p));
    /* The same on a long path, in bounded time. */
    memset(target + 1, 'z', 4000);
    strcpy(target + 4001, "!");
    a = ask(port, "a.test", target);
    cr_expect_eq(a.status, 500, "status %d", a.status);
    cr_expect_lt(kh_now_ms() - t0, 2000, "answered in %lld ms", kh_now_ms() - t0);
    kh_stop(p);
}

/* HTTP to HTTPS in one line, followed by curl to the TLS listener with
 * the test certificate. */
Test(rewrite, http_to_https_followed_by_curl, .timeout = 90, .fini = tt_cleanup)
{
    need_module();
    tt_mkdir();
    tt_make_cert("lh", "localhost", "127.0.0.1", NULL);
    unsigned tls_port = kh_free_port();
    char conf[4096];
    snprintf(conf, sizeof conf,
             "[keel]\nlisten = 127.0.0.1:0 http1 name=plain\nlisten = 127.0.0.1:%u http1 tls "
             "name=secure\nmodules = tls http1 rewrite scoped\nworkers = 1\n%s"
             "[tls]\ncert = %s %s\n[scoped]\nshow_path = on\n"
             "[listener plain]\nrewrite.return = 308 https://$https_host$request_uri\n"
             "rewrite.https_port = %u\n",
             tls_port, KH_MODULE_PATH, tt_path("lh.pem"), tt_path("lh.key"), tls_port);
    kh_proc *p = kh_start(conf, NULL, 2, 10000);
    ht_run_result rr = tt_sh(20000,
                             "curl -sS -L --max-time 10 --cacert %s -w ' %%{url_effective} "
                             "%%{num_redirects}' 'http://localhost:%u/a/b?c=d'",
                             tt_path("lh.pem"), kh_port(p, 0));
    char want[256];
    snprintf(want, sizeof want,
             "greeting=hello level=0 tags= note=- path=/a/b query=c=d\n "
             "https://localhost:%u/a/b?c=d 1",
             tls_port);
    kh_assert(p, rr.status == 0 && strcmp(rr.out, want) == 0, "curl: %d '%s', wanted '%s'",
              rr.status, rr.out, want);
    ht_run_free(&rr);
    kh_stop(p);
}

/* Over HTTP/2: $host from :authority (curl sends no Host field there), and
 * a rewrite's new path and scope as over HTTP/1.1. */
Test(rewrite, http2_the_same, .timeout = 60, .fini = kh_cleanup_all)
{
    need_module();
    char conf[2048];
    snprintf(conf, sizeof conf,
             "[keel]\nlisten = 127.0.0.1:0 h2\nmodules = http1 h2 rewrite scoped\nworkers = 1\n"
             "%s[scoped]\nshow_path = on\n[rewrite]\nrewrite = ^/l/(.*)$ /api/$1 last\n"
             "[/api/]\nscoped.greeting = api\n[/r/]\nrewrite.return = 301 "
             "https://$host$request_uri\n",
             KH_MODULE_PATH);
    kh_proc *p = kh_start(conf, NULL, 1, 10000);
    char connect_to[64], url[128];
    snprintf(connect_to, sizeof connect_to, "example.com:80:127.0.0.1:%u", kh_port(p, 0));
    const char *argv[] = {"curl",     "-s", "--http2-prior-knowledge",      "--connect-to",
                          connect_to, "-w", "%{http_code} %{redirect_url}", url,
                          NULL};
    snprintf(url, sizeof url, "http://Example.com/l/x?q=1");
    ht_run_result rr = ht_run(argv, 10000);
    cr_expect_eq(rr.status, 0, "curl: %s", rr.err);
    cr_expect_str_eq(rr.out, "greeting=api level=0 tags= note=- path=/api/x query=q=1\n200 ");
    ht_run_free(&rr);
    snprintf(url, sizeof url, "http://Example.com/r/y?z=2");
    rr = ht_run(argv, 10000);
    cr_expect_eq(rr.status, 0, "curl: %s", rr.err);
    cr_expect_str_eq(rr.out, "301 Moved Permanently\n301 https://example.com/r/y?z=2");
    ht_run_free(&rr);
    kh_stop(p);
}

/* Replaces every `from` in s (in place, s has room for cap bytes). */
static void replace_all(char *s, size_t cap, const char *from, const char *to)
{
    size_t fl = strlen(from), tl = strlen(to);
    for (char *at = strstr(s, from); at != NULL; at = strstr(at + tl, from)) {
        size_t rest = strlen(at + fl);
        cr_assert(at - s + tl + rest < cap);
        memmove(at + tl, at + fl, rest + 1);
        memcpy(at, to, tl);
    }
}

/* examples/configs/https-redirect.conf, with its ports, certificate and
 * folder replaced: what the docs show runs. */
Test(rewrite, the_example_config_runs, .timeout = 90, .fini = tt_cleanup)
{
    need_module();
    tt_mkdir();
    tt_make_cert("lh", "localhost", "127.0.0.1", NULL);
    char conf[8192];
    FILE *f = fopen(KEEL_SOURCE_DIR "/examples/configs/https-redirect.conf", "r");
    cr_assert(f != NULL);
    size_t n = fread(conf, 1, sizeof conf - 1, f);
    fclose(f);
    conf[n] = '\0';
    char www[512], port_text[32], cert[1024], path[600];
    snprintf(www, sizeof www, "%s", tt_path("www"));
    mkdir(www, 0755);
    snprintf(path, sizeof path, "%s/index.html", www);
    f = fopen(path, "w");
    cr_assert(f != NULL && fputs("secure hello\n", f) >= 0 && fclose(f) == 0);
    unsigned plain = kh_free_port(), secure = kh_free_port();
    snprintf(port_text, sizeof port_text, "127.0.0.1:%u", plain);
    replace_all(conf, sizeof conf, "127.0.0.1:8080", port_text);
    snprintf(port_text, sizeof port_text, "%u", secure);
    replace_all(conf, sizeof conf, "8443", port_text);
    replace_all(conf, sizeof conf, "/var/www/html", www);
    snprintf(cert, sizeof cert, "%s %s", tt_path("lh.pem"), tt_path("lh.key"));
    replace_all(conf, sizeof conf, "/etc/keel/cert.pem /etc/keel/key.pem", cert);
    char full[9000];
    /* the module path goes in [keel]: appended to the example's section */
    char *keel_sec = strstr(conf, "[keel]\n");
    cr_assert(keel_sec != NULL);
    snprintf(full, sizeof full, "%.*s[keel]\n%s%s", (int)(keel_sec - conf), conf, KH_MODULE_PATH,
             keel_sec + 7);
    kh_proc *p = kh_start(full, NULL, 2, 10000);
    ht_run_result rr = tt_sh(20000, "curl -sS -L --max-time 10 --cacert %s http://localhost:%u/",
                             tt_path("lh.pem"), plain);
    kh_assert(p, rr.status == 0 && strcmp(rr.out, "secure hello\n") == 0, "curl: %d '%s'",
              rr.status, rr.out);
    ht_run_free(&rr);
    answer a = ask(plain, "www.example.com", "/x?y=1");
    cr_expect_eq(a.status, 308);
    snprintf(path, sizeof path, "https://www.example.com:%u/x?y=1", secure);
    cr_expect_str_eq(a.location, path);
    kh_stop(p);
}

/* keel -t refuses each with FILE:LINE and the reason. */
Test(rewrite, config_errors_name_file_and_line, .timeout = 60, .fini = kh_cleanup_all)
{
    need_module();
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"[rewrite]\nrewrite = ^/(a /b\n",
         ":7: [rewrite] rewrite: bad regular expression '^/(a': missing closing parenthesis at "
         "offset 4"},
        {"[rewrite]\nreturn = 299x\n", ":7: [rewrite] return: expected STATUS [TARGET]"},
        {"[rewrite]\nreturn = 150\n", ":7: [rewrite] return: expected STATUS [TARGET]"},
        {"[rewrite]\nreturn = 301\n", ":7: [rewrite] return: a 301 needs a target"},
        {"[rewrite]\nreturn = 301 https://$hots/\n",
         ":7: [rewrite] return: unknown variable '$hots'"},
        {"[rewrite]\nrewrite = ^/(a)$ /b/$2\n",
         ":7: [rewrite] rewrite: '/b/$2' names $2, and '^/(a)$' has 1 group"},
        {"[rewrite]\nrewrite = ^/a$ /b lastly\n", ":7: [rewrite] rewrite: unknown flag 'lastly'"},
        {"[site a.test]\nrewrite.return = 308 https://$hots$request_uri\n",
         ":7: [site a.test] rewrite.return: unknown variable '$hots'"},
        {"[/p/]\nrewrite.rewrite = ^/p/(x /q\n",
         ":7: [/p/] rewrite.rewrite: bad regular expression '^/p/(x'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char conf[2048], label[32];
        snprintf(conf, sizeof conf,
                 "[keel]\nlisten = 127.0.0.1:0 http1\nmodules = http1 rewrite scoped\n"
                 "workers = 1\n" KH_MODULE_PATH "%s",
                 cases[i].text);
        snprintf(label, sizeof label, "case %zu", i);
        ht_expect_config_error(conf, cases[i].want, label);
    }
}

/* ---- the same scenario in nginx ---- */

/* Each location answers which one it is and what $uri and $args are;
 * keel's path scopes say the same with their own `return`. */
static const char nginx_server[] =
    "  server {\n    listen 127.0.0.1:%u;\n"
    "    location / {\n"
    "      rewrite ^/old/(.*)$ /api/$1 last;\n"
    "      rewrite ^/q/(.*)$ /api/$1?x=1 last;\n"
    "      rewrite ^/loop(.*)$ /loop$1x last;\n"
    "      rewrite ^/moved/(.*)$ /new/$1 permanent;\n"
    "      return 200 \"scope=root uri=$uri args=$args\";\n"
    "    }\n"
    "    location /api/ { return 200 \"scope=api uri=$uri args=$args\"; }\n"
    "    location /r/ { return 301 https://$host$request_uri; }\n"
    "    location /t/ { return 302 /login; }\n"
    "  }\n";

static const char keel_scenario[] = "[rewrite]\n"
                                    "rewrite = ^/old/(.*)$ /api/$1 last\n"
                                    "rewrite = ^/q/(.*)$ /api/$1?x=1 last\n"
                                    "rewrite = ^/loop(.*)$ /loop$1x last\n"
                                    "rewrite = ^/moved/(.*)$ /new/$1 permanent\n"
                                    "return = 200 scope=root uri=$uri args=$args\n"
                                    "[/api/]\nrewrite.return = 200 scope=api uri=$uri args=$args\n"
                                    "[/r/]\nrewrite.return = 301 https://$host$request_uri\n"
                                    "[/t/]\nrewrite.return = 302 /login\n";

Test(rewrite, the_same_answers_as_nginx, .timeout = 90, .fini = kh_cleanup_all)
{
    need_module();
    kn_nginx_bin(); /* skips where nginx is not installed */
    char dir[] = "/tmp/keel-rewrite-nginx-XXXXXX";
    cr_assert(mkdtemp(dir) != NULL);
    chmod(dir, 0755);
    unsigned nport = kh_free_port();
    char server[2048], nconf[4096];
    snprintf(server, sizeof server, nginx_server, nport);
    snprintf(nconf, sizeof nconf,
             "worker_processes 1;\ndaemon off;\npid %s/nginx.pid;\nerror_log %s/error.log "
             "warn;\nevents { worker_connections 64; }\nhttp {\n  access_log off;\n"
             "  client_body_temp_path %s/body;\n  proxy_temp_path %s/proxy;\n"
             "  fastcgi_temp_path %s/fastcgi;\n  uwsgi_temp_path %s/uwsgi;\n"
             "  scgi_temp_path %s/scgi;\n  absolute_redirect off;\n%s}\n",
             dir, dir, dir, dir, dir, dir, dir, server);
    kh_proc *n = kn_nginx_start(dir, nconf, nport);

    char conf[4096];
    snprintf(conf, sizeof conf, "%s%s", HEAD, keel_scenario);
    kh_proc *k = kh_start(conf, NULL, 1, 10000);
    static const char *const targets[] = {
        "/old/a?b=2", "/old/a%20b", "/plain?k=v", "/q/z?k=v",     "/q/z",
        "/r/x?y=1",   "/t/",        "/loop",      "/moved/m?n=1", "/api/direct",
    };
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++) {
        answer want = ask(nport, "Site.Test:81", targets[i]);
        answer got = ask(kh_port(k, 0), "Site.Test:81", targets[i]);
        cr_expect_eq(got.status, want.status, "%s: keel %d, nginx %d", targets[i], got.status,
                     want.status);
        cr_expect_str_eq(got.location, want.location, "%s: keel '%s', nginx '%s'", targets[i],
                         got.location, want.location);
        if (want.status == 200)
            cr_expect_str_eq(got.body, want.body, "%s: keel '%s', nginx '%s'", targets[i], got.body,
                             want.body);
    }
    kh_stop(k);
    kh_stop(n);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_expect(system(cmd) == 0);
}
