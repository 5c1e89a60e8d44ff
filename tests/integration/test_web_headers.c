/* Response headers, CORS and access by address (modules/headers, cors,
 * access; docs/web.md): each key, the scope merge, nginx's `always`, the
 * CORS protocol's preflight and actual requests as the Fetch standard
 * has them, allow/deny over IPv4, IPv6 and the PROXY protocol's client,
 * and the config errors `keel -t` reports with file:line. The real keel
 * over real sockets (test_http.h). */
#define _GNU_SOURCE
#include "harness.h"
#include "test_http.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* One request on a fresh connection to host:port; the response in r. */
static void rt(kh_proc *p, const char *host, unsigned port, const char *request, ht_resp *r)
{
    ht_conn *c = calloc(1, sizeof *c);
    cr_assert(c != NULL);
    c->fd = kh_connect(host, port);
    kh_assert(p, c->fd >= 0, "connect to %s %u", host, port);
    c->cap = 1 << 16;
    c->buf = malloc(c->cap);
    cr_assert(c->buf != NULL);
    ht_send_str(c, request);
    ht_expect_response(p, c, r, strncmp(request, "HEAD ", 5) == 0);
    ht_close(c);
}

/* GET path with Host on port (127.0.0.1), extra fields (CRLF-ended) after. */
static void get(kh_proc *p, unsigned port, const char *method, const char *host, const char *path,
                const char *extra, ht_resp *r)
{
    char req[1024];
    snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: %s\r\n%sConnection: close\r\n\r\n", method,
             path, host, extra ? extra : "");
    rt(p, "127.0.0.1", port, req, r);
}

#define BASE                                                                                       \
    "[keel]\nlisten = 127.0.0.1:0 http1\nworkers = 1\n" KH_MODULE_PATH                             \
    "modules = http1 access cors headers hello h2test\n"

/* ---- headers ------------------------------------------------------------ */

static const char headers_conf[] =
    BASE "[headers]\nadd = X-A: one\nadd = X-A: two\nset = Content-Type: text/x-set\n"
         "remove = ETag\n"
         "[site example.com]\nheaders.add = X-Site: yes\n"
         "[site example.com /api/]\nheaders.add = X-Api: yes\nheaders.always = on\n"
         "[/always/]\nheaders.always = on\n";

Test(web_headers, add_set_remove_and_the_scope_merge, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = kh_start(headers_conf, NULL, 1, 10000);
    unsigned port = kh_port(p, 0);
    ht_resp r = {0};
    /* The module's section: two adds (both sent, in order), a set that
     * replaces the handler's field, a remove. */
    get(p, port, "GET", "other.test", "/h2test/status?code=200", NULL, &r);
    kh_assert(p, r.status == 200, "status %d", r.status);
    kh_assert(p, ht_header_count(&r, "X-A") == 2, "two X-A:\n%s", r.head);
    const char *first = NULL, *second = NULL;
    for (size_t i = 0; i < r.nfields; i++)
        if (strcasecmp(r.fields[i].name, "X-A") == 0)
            *(first == NULL ? &first : &second) = r.fields[i].value;
    kh_assert(p, first && second && !strcmp(first, "one") && !strcmp(second, "two"), "order");
    kh_assert(p, ht_header_count(&r, "Content-Type") == 1, "set replaced:\n%s", r.head);
    kh_assert(p, ht_header(&r, "ETag") == NULL, "ETag removed:\n%s", r.head);
    ht_resp_free(&r);
    /* A site's add replaces the section's list; its set and remove stay. */
    get(p, port, "GET", "example.com", "/h2test/status?code=200", NULL, &r);
    kh_assert(p, ht_header(&r, "X-Site") && ht_header(&r, "X-A") == NULL, "site list:\n%s", r.head);
    kh_assert(p,
              ht_header(&r, "ETag") == NULL &&
                  strcmp(ht_header(&r, "Content-Type"), "text/x-set") == 0,
              "inherited set/remove:\n%s", r.head);
    ht_resp_free(&r);
    /* The path scope's add replaces the site's. */
    get(p, port, "GET", "example.com", "/api/x", NULL, &r);
    kh_assert(p, r.status == 404, "status %d", r.status);
    kh_assert(p, ht_header(&r, "X-Api") && !ht_header(&r, "X-Site"), "path list:\n%s", r.head);
    ht_resp_free(&r);
    kh_stop(p);
}

/* always = off sends the fields on nginx's statuses only; on, on every
 * response: the router's 404 and 405, a handler's 500, a filter's 403. */
static const struct {
    const char *path, *method;
    int status, with_always, without;
} always_cases[] = {
    {"/h2test/status?code=200", "GET", 200, 1, 1},
    {"/h2test/status?code=204", "GET", 204, 1, 1},
    {"/h2test/status?code=304", "GET", 304, 1, 1},
    {"/h2test/status?code=308", "GET", 308, 1, 1},
    {"/h2test/status?code=500", "GET", 500, 1, 0},
    {"/h2test/status?code=503", "GET", 503, 1, 0},
    {"/h2test/status?code=400", "GET", 400, 1, 0},
    {"/nothing-here", "GET", 404, 1, 0},
    {"/", "DELETE", 405, 1, 0},
    {"/denied/", "GET", 403, 1, 0},
};

Test(web_headers, always_covers_every_status, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = kh_start(BASE "[headers]\nadd = X-A: one\n"
                               "[site always.test]\nheaders.always = on\n"
                               "[/denied/]\naccess.rule = deny all\n"
                               "[site always.test /denied/]\naccess.rule = deny all\n",
                          NULL, 1, 10000);
    for (size_t i = 0; i < sizeof always_cases / sizeof always_cases[0]; i++)
        for (int always = 0; always < 2; always++) {
            ht_resp r = {0};
            const char *path = always_cases[i].path;
            char req[512];
            snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n",
                     always_cases[i].method, path, always ? "always.test" : "other.test");
            rt(p, "127.0.0.1", kh_port(p, 0), req, &r);
            kh_assert(p, r.status == always_cases[i].status, "%s: status %d", path, r.status);
            int want = always ? always_cases[i].with_always : always_cases[i].without;
            kh_assert(p, (ht_header(&r, "X-A") != NULL) == want, "%s always=%d: X-A %s\n%s", path,
                      always, want ? "missing" : "sent", r.head);
            ht_resp_free(&r);
        }
    kh_stop(p);
}

/* ---- config errors ------------------------------------------------------- */

static const struct {
    const char *body; /* after BASE (line 6 on) */
    int line;
    const char *says;
} config_errors[] = {
    {"[headers]\nadd = X-A one\n", 7, "[headers] add: expected NAME: VALUE"},
    {"[headers]\nset = Bad Name: v\n", 7, "is not a field name"},
    {"[headers]\nadd = Content-Length: 5\n", 7, "the protocol's"},
    {"[headers]\nremove = X/Y\n", 7, "is not a field name"},
    {"[headers]\nhsts = max-age=abc\n", 7, "expected max-age=SECONDS"},
    {"[headers]\nhsts = max-age=60 preload sometimes\n", 7, "'sometimes'"},
    {"[site a.test]\nheaders.add = nocolon\n", 7, "headers.add: expected NAME: VALUE"},
    {"[cors]\norigins = *\ncredentials = on\n", 7, "cannot go with credentials"},
    {"[cors]\norigins = null\n", 7, "opaque origin"},
    {"[cors]\norigins = a.example\n", 7, "is not an origin"},
    {"[cors]\norigins = https://a.example/path\n", 7, "no path"},
    {"[/x/]\ncors.origins = https://*.*.example\n", 7, "other wildcard"},
    {"[cors]\nmethods = GET P(T\n", 7, "not a method"},
    {"[access]\nrule = permit 10.0.0.0/8\n", 7, "expected allow or deny"},
    {"[access]\nrule = allow 10.0.0.300\n", 7, "'10.0.0.300' is not an IP address"},
    {"[/p/]\naccess.rule = deny 10.0.0.0/33\n", 7, "is not an IP address"},
};

Test(web_headers, config_errors_name_the_line, .timeout = 120, .fini = kh_cleanup_all)
{
    for (size_t i = 0; i < sizeof config_errors / sizeof config_errors[0]; i++) {
        char conf[2048], label[32];
        snprintf(conf, sizeof conf, "%s%s", BASE, config_errors[i].body);
        snprintf(label, sizeof label, "case %zu", i);
        kh_expect_refused(conf, config_errors[i].line, config_errors[i].says, label);
    }
}

/* ---- CORS ------------------------------------------------------------------ */

static const char cors_conf[] =
    BASE "[cors]\norigins = https://a.example https://*.b.example\ncredentials = on\n"
         "methods = GET PUT DELETE\nheaders = Content-Type X-Token\nexpose = X-Request-Id\n"
         "max_age = 10m\n"
         "[/open/]\ncors.origins = *\ncors.credentials = off\n";

#define PREFLIGHT(origin, method, hdrs)                                                            \
    "Origin: " origin "\r\nAccess-Control-Request-Method: " method "\r\n"                          \
    "Access-Control-Request-Headers: " hdrs "\r\n"

Test(web_headers, cors_preflight, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = kh_start(cors_conf, NULL, 1, 10000);
    unsigned port = kh_port(p, 0);
    ht_resp r = {0};
    /* Allowed: 204 from the module, the origin echoed (never the list). */
    get(p, port, "OPTIONS", "h", "/",
        PREFLIGHT("https://x.b.example", "PUT", "content-type, x-token"), &r);
    kh_assert(p, r.status == 204, "status %d\n%s", r.status, r.head);
    const char *acao = ht_header(&r, "Access-Control-Allow-Origin");
    kh_assert(p, acao && strcmp(acao, "https://x.b.example") == 0, "origin echoed:\n%s", r.head);
    kh_assert(p,
              ht_header(&r, "Access-Control-Allow-Credentials") &&
                  !strcmp(ht_header(&r, "Access-Control-Allow-Credentials"), "true"),
              "credentials:\n%s", r.head);
    kh_assert(p, ht_header_has_token(&r, "Access-Control-Allow-Methods", "PUT"), "methods");
    kh_assert(p,
              ht_header_has_token(&r, "Access-Control-Allow-Headers", "x-token") &&
                  ht_header_has_token(&r, "Access-Control-Allow-Headers", "content-type"),
              "headers echoed:\n%s", r.head);
    kh_assert(p, !strcmp(ht_header(&r, "Access-Control-Max-Age"), "600"), "max age");
    kh_assert(p, ht_header_has_token(&r, "Vary", "Origin"), "Vary:\n%s", r.head);
    ht_resp_free(&r);
    /* Refused: an origin not listed, a wildcard of two labels or of none,
     * a method or header not allowed. No Allow-* field: the browser fails
     * the preflight. */
    static const char *const refused[] = {
        PREFLIGHT("https://evil.example", "PUT", "x-token"),
        PREFLIGHT("https://x.y.b.example", "GET", "x-token"),
        PREFLIGHT("https://b.example", "GET", "x-token"),
        PREFLIGHT("http://a.example", "GET", "x-token"),
        PREFLIGHT("https://a.example", "PATCH", "x-token"),
        PREFLIGHT("https://a.example", "PUT", "x-token, x-other"),
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        get(p, port, "OPTIONS", "h", "/", refused[i], &r);
        kh_assert(p, r.status == 403, "case %zu: status %d", i, r.status);
        kh_assert(p,
                  ht_header(&r, "Access-Control-Allow-Origin") == NULL &&
                      ht_header(&r, "Access-Control-Allow-Methods") == NULL,
                  "case %zu: allow fields:\n%s", i, r.head);
        ht_resp_free(&r);
    }
    /* An OPTIONS that is no preflight goes on to the application (hello
     * routes GET / only: 405). */
    get(p, port, "OPTIONS", "h", "/", "Origin: https://a.example\r\n", &r);
    kh_assert(p, r.status == 405, "plain OPTIONS: %d", r.status);
    ht_resp_free(&r);
    /* "*" without credentials: any origin, "*" answered. */
    get(p, port, "OPTIONS", "h", "/open/", PREFLIGHT("https://any.example", "GET", "x-other"), &r);
    kh_assert(p, r.status == 403, "x-other is not allowed: %d", r.status);
    ht_resp_free(&r);
    get(p, port, "OPTIONS", "h", "/open/",
        "Origin: https://any.example\r\n"
        "Access-Control-Request-Method: PUT\r\n",
        &r);
    kh_assert(p,
              r.status == 204 && !strcmp(ht_header(&r, "Access-Control-Allow-Origin"), "*") &&
                  ht_header(&r, "Access-Control-Allow-Credentials") == NULL,
              "open preflight:\n%s", r.head);
    ht_resp_free(&r);
    kh_stop(p);
}

/* A preflight carries no credentials (Fetch 4.8): listed before cors,
 * auth_basic would answer it 401 and the browser would never send the
 * request; cors places its filter before auth_basic's. */
Test(web_headers, cors_preflight_comes_before_authentication, .timeout = 60, .fini = kh_cleanup_all)
{
    if (access(KEEL_MODULE_DIR "/mod_auth_basic.so", F_OK) != 0)
        cr_skip_test("auth_basic is not built (no crypt_r: libxcrypt, Debian libcrypt-dev)");
    kh_proc *p = kh_start("[keel]\nlisten = 127.0.0.1:0 http1\nworkers = 1\n" KH_MODULE_PATH
                          "modules = http1 auth_basic cors hello\n"
                          "[auth_basic]\nfile = api " KEEL_SOURCE_DIR
                          "/examples/configs/api-auth-ratelimit.htpasswd\nusers = api\n"
                          "[cors]\norigins = https://a.example\ncredentials = on\n"
                          "methods = GET PUT\nheaders = Content-Type\n",
                          NULL, 1, 10000);
    unsigned port = kh_port(p, 0);
    ht_resp r = {0};
    get(p, port, "OPTIONS", "h", "/", PREFLIGHT("https://a.example", "PUT", "content-type"), &r);
    kh_assert(p, r.status == 204, "preflight answered before auth: status %d\n%s", r.status,
              r.head);
    kh_assert(p, ht_header(&r, "Access-Control-Allow-Origin") != NULL, "allow origin:\n%s", r.head);
    ht_resp_free(&r);
    /* The request itself still needs its user. */
    get(p, port, "GET", "h", "/", "Origin: https://a.example\r\n", &r);
    kh_assert(p, r.status == 401, "status %d", r.status);
    ht_resp_free(&r);
    kh_stop(p);
}

Test(web_headers, cors_actual_requests_and_vary, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = kh_start(cors_conf, NULL, 1, 10000);
    unsigned port = kh_port(p, 0);
    ht_resp r = {0};
    get(p, port, "GET", "h", "/", "Origin: https://a.example\r\n", &r);
    kh_assert(p,
              r.status == 200 &&
                  !strcmp(ht_header(&r, "Access-Control-Allow-Origin"), "https://a.example"),
              "allowed:\n%s", r.head);
    kh_assert(p,
              ht_header(&r, "Access-Control-Allow-Credentials") != NULL &&
                  !strcmp(ht_header(&r, "Access-Control-Expose-Headers"), "X-Request-Id"),
              "credentials and expose:\n%s", r.head);
    kh_assert(p, ht_header_has_token(&r, "Vary", "Origin"), "Vary:\n%s", r.head);
    ht_resp_free(&r);
    /* Not allowed, and no Origin at all: no CORS field, but the answer
     * still depends on the Origin, so a cache must know. */
    static const char *const others[] = {"Origin: https://evil.example\r\n", NULL};
    for (size_t i = 0; i < 2; i++) {
        get(p, port, "GET", "h", "/", others[i], &r);
        kh_assert(p, r.status == 200 && ht_header(&r, "Access-Control-Allow-Origin") == NULL,
                  "case %zu:\n%s", i, r.head);
        kh_assert(p, ht_header_has_token(&r, "Vary", "Origin"), "case %zu: Vary:\n%s", i, r.head);
        ht_resp_free(&r);
    }
    /* Errors too: a 404 carries the fields for an allowed origin. */
    get(p, port, "GET", "h", "/missing", "Origin: https://a.example\r\n", &r);
    kh_assert(p, r.status == 404 && ht_header(&r, "Access-Control-Allow-Origin"), "404:\n%s",
              r.head);
    ht_resp_free(&r);
    /* "*": the same answer for everyone, no Vary needed. */
    get(p, port, "GET", "h", "/open/x", "Origin: https://z.example\r\n", &r);
    kh_assert(p,
              !strcmp(ht_header(&r, "Access-Control-Allow-Origin"), "*") &&
                  !ht_header_has_token(&r, "Vary", "Origin"),
              "open:\n%s", r.head);
    ht_resp_free(&r);
    kh_stop(p);
}

/* ---- access ------------------------------------------------------------- */

Test(web_headers, access_rules_ipv4_ipv6_and_scopes, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = kh_start("[keel]\nlisten = 127.0.0.1:0 http1\nlisten = [::1]:0 http1\n"
                          "workers = 1\n" KH_MODULE_PATH "modules = http1 access hello\n"
                          "[access]\nrule = deny 127.0.0.2\nrule = allow 127.0.0.0/8 ::1\n"
                          "[/admin/]\naccess.rule = deny all\n"
                          "[/v6only/]\naccess.rule = allow ::1\n"
                          "[/v4only/]\naccess.rule = deny ::1/128\n",
                          NULL, 2, 10000);
    unsigned v4 = kh_port(p, 0), v6 = kh_port(p, 1);
    static const struct {
        int six;
        const char *path;
        int status;
    } cases[] = {
        {0, "/", 200},        {1, "/", 200},        {0, "/admin/", 403},  {1, "/admin/x", 403},
        {0, "/v6only/", 403}, {1, "/v6only/", 404}, {0, "/v4only/", 404}, {1, "/v4only/", 403},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ht_resp r = {0};
        char req[256];
        snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
                 cases[i].path);
        rt(p, cases[i].six ? "::1" : "127.0.0.1", cases[i].six ? v6 : v4, req, &r);
        kh_assert(p, r.status == cases[i].status, "%s over %s: %d, want %d", cases[i].path,
                  cases[i].six ? "::1" : "127.0.0.1", r.status, cases[i].status);
        ht_resp_free(&r);
    }
    kh_stop(p);
}

/* Behind a balancer speaking the PROXY protocol, the client in its header
 * is the one the rules see, not the balancer's 127.0.0.1. */
Test(web_headers, access_sees_the_proxy_protocol_client, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = kh_start("[keel]\nlisten = 127.0.0.1:0 http1 proxy_protocol=on "
                          "proxy_from=127.0.0.1\nworkers = 1\n" KH_MODULE_PATH
                          "modules = http1 access hello\n"
                          "[access]\nrule = deny 192.0.2.66\n"
                          "rule = allow 192.0.2.0/24 2001:db8::/32\n",
                          NULL, 1, 10000);
    static const struct {
        const char *proxy;
        int status;
    } cases[] = {
        {"PROXY TCP4 192.0.2.7 10.0.0.1 5000 80\r\n", 200},
        {"PROXY TCP4 192.0.2.66 10.0.0.1 5000 80\r\n", 403},
        {"PROXY TCP4 198.51.100.1 10.0.0.1 5000 80\r\n", 403},
        {"PROXY TCP6 2001:db8::5 2001:db8::1 5000 80\r\n", 200},
        {"PROXY TCP6 2001:db9::5 2001:db8::1 5000 80\r\n", 403},
        /* IPv4-mapped IPv6 is IPv4 to the rules. */
        {"PROXY TCP6 ::ffff:192.0.2.7 ::1 5000 80\r\n", 200},
        {"PROXY TCP6 ::ffff:192.0.2.66 ::1 5000 80\r\n", 403},
        /* Without an address (UNKNOWN) the socket's own, 127.0.0.1: no rule
         * holds it and the rules allow some, so refused. */
        {"PROXY UNKNOWN\r\n", 403},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ht_resp r = {0};
        char req[512];
        snprintf(req, sizeof req, "%sGET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
                 cases[i].proxy);
        rt(p, "127.0.0.1", kh_port(p, 0), req, &r);
        kh_assert(p, r.status == cases[i].status, "%s: %d", cases[i].proxy, r.status);
        ht_resp_free(&r);
    }
    kh_stop(p);
}

/* The example of docs/web.md passes `keel -t`. */
Test(web_headers, example_config_checks, .timeout = 30, .fini = kh_cleanup_all)
{
    const char *args[] = {"-t",
                          "-c",
                          KEEL_SOURCE_DIR "/examples/configs/api-cors.conf",
                          "--set",
                          "keel.module_path=" KEEL_MODULE_DIR,
                          NULL};
    kh_proc *p = kh_spawn_program(KEEL_BIN, NULL, args);
    int status = kh_wait_exit(p, 10000);
    kh_assert(p, status == 0, "keel -t api-cors.conf: exit status %d", status);
    kh_assert(p, strstr(kh_stderr(p), "configuration ok") != NULL, "no 'configuration ok'");
    kh_stop(p);
}

/* The filters are the HTTP layer's, not http1's: the same answers over
 * HTTP/2 (curl with prior knowledge on an h2 listener). */
Test(web_headers, over_http2, .timeout = 60, .fini = kh_cleanup_all)
{
    const char *probe[] = {"sh", "-c", "curl -V | grep -q HTTP2", NULL};
    ht_run_result rr = ht_run(probe, 10000);
    if (rr.status != 0)
        cr_skip_test("curl without HTTP/2");
    ht_run_free(&rr);
    kh_proc *p = kh_start("[keel]\nlisten = 127.0.0.1:0 h2\nworkers = 1\n" KH_MODULE_PATH
                          "modules = h2 http1 access cors headers hello\n"
                          "[headers]\nadd = X-A: one\nalways = on\n"
                          "[cors]\norigins = https://a.example\ncredentials = on\n"
                          "[/nope/]\naccess.rule = deny all\n",
                          NULL, 1, 10000);
    unsigned port = kh_port(p, 0);
    static const struct {
        const char *args, *want[3];
    } cases[] = {
        {"-H 'Origin: https://a.example' %s/",
         {"HTTP/2 200", "access-control-allow-origin: https://a.example", "x-a: one"}},
        {"-X OPTIONS -H 'Origin: https://a.example' -H 'Access-Control-Request-Method: GET' %s/",
         {"HTTP/2 204", "access-control-allow-credentials: true", "x-a: one"}},
        {"%s/nope/", {"HTTP/2 403", "x-a: one", "vary: Origin"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char base[64], args[512], cmd[700];
        snprintf(base, sizeof base, "http://127.0.0.1:%u", port);
        snprintf(args, sizeof args, cases[i].args, base);
        snprintf(cmd, sizeof cmd, "curl -sS -i --max-time 10 --http2-prior-knowledge %s", args);
        const char *argv[] = {"sh", "-c", cmd, NULL};
        rr = ht_run(argv, 20000);
        kh_assert(p, rr.status == 0, "%s: %d %s", cmd, rr.status, rr.err);
        for (int k = 0; k < 3; k++)
            kh_assert(p, strstr(rr.out, cases[i].want[k]) != NULL, "%s: no '%s' in\n%s", cmd,
                      cases[i].want[k], rr.out);
        ht_run_free(&rr);
    }
    kh_stop(p);
}
