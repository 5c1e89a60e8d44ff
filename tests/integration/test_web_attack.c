/* A hostile client against the web-serving modules (access, auth_basic,
 * rewrite, ratelimit with static): each case is a way around a scope's
 * defence that worked once, kept so that it cannot come back.
 * docs/security.md lists the defences. */
#define _GNU_SOURCE
#include "auth_test.h"

#include <sys/stat.h>

static char dir[256], conf[4096];

static void setup(void)
{
    at_tmpdir(dir, sizeof dir, "attack");
    char path[512];
    snprintf(path, sizeof path, "%s/admin", dir);
    cr_assert_eq(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%s/admin/secret.txt", dir);
    at_write(path, "the secret\n");
    snprintf(path, sizeof path, "%s/index.html", dir);
    at_write(path, "public\n");
}

/* Starts keel, one worker on one port, with `modules` after http1 and
 * `sections` (a format with %s for the scratch folder); returns the port. */
static unsigned start(const char *modules, const char *sections)
{
    char body[2048];
    snprintf(body, sizeof body, sections, dir);
    snprintf(conf, sizeof conf,
             "[keel]\nlisten = 127.0.0.1:0 http1\nmodules = http1 %s\nworkers = 1\n" KH_MODULE_PATH
             "%s",
             modules, body);
    return kh_port(kh_start(conf, NULL, 1, 10000), 0);
}

static void expect_status(unsigned port, const char *path, int want)
{
    at_reply r;
    at_get(port, path, NULL, &r);
    cr_expect_eq(r.status, want, "%s: %d, want %d\n%s", path, r.status, want, r.head);
    cr_expect(strstr(r.head, "the secret") == NULL || want == 200, "%s: the file was served", path);
}

/* A path scope holds every spelling of its paths the file system reads as
 * the same file: a run of slashes (raw or %2F-encoded) is one, as nginx's
 * merge_slashes has it. "//admin/secret.txt" was served by the static
 * mount at "/" without the [/admin/] scope's access rules. */
Test(web_attack, path_scope_holds_doubled_slashes, .init = setup, .fini = kh_cleanup_all,
     .timeout = 60)
{
    unsigned port =
        start("access static", "[static]\nmount = / %s\n[/admin/]\naccess.rule = deny all\n");
    static const char *const refused[] = {
        "/admin/secret.txt",      "//admin/secret.txt",         "///admin/secret.txt",
        "/%2Fadmin/secret.txt",   "/%2f%2fadmin/secret.txt",    "/./admin/secret.txt",
        "/x/../admin/secret.txt", "/x/%2e%2e/admin/secret.txt", "/x//..//admin/secret.txt",
        "/%61dmin/secret.txt",    "http://t//admin/secret.txt",
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        expect_status(port, refused[i], 403);
    /* The rest of the site is still served, doubled slashes or not. */
    expect_status(port, "/index.html", 200);
    expect_status(port, "//index.html", 200);
}

/* A redirect's target that starts with a variable must not send the client
 * to another host: "$request_uri/" made "//evil.example/..%2fgo/x/" of a
 * request the core resolves to /go/x, and browsers read "/\" as "//". */
Test(web_attack, redirect_stays_on_host, .init = setup, .fini = kh_cleanup_all, .timeout = 60)
{
    if (access(KEEL_MODULE_DIR "/mod_rewrite.so", F_OK) != 0)
        cr_skip_test("rewrite is not built (no PCRE2)");
    unsigned port = start("rewrite static", "[static]\nmount = / %s\n[/go/]\nrewrite.return = 302 "
                                            "$request_uri/\n[/cdn/]\nrewrite.return = 301 "
                                            "//cdn.example$uri\n");
    static const struct {
        const char *target, *location;
    } cases[] = {
        {"//evil.example/..%2fgo/x", "Location: /%2Fevil.example/..%2fgo/x/\r\n"},
        {"/\\evil.example/..%2fgo/x", "Location: /%5Cevil.example/..%2fgo/x/\r\n"},
        {"/go/x", "Location: /go/x/\r\n"},
        /* Written so in the config: a network-path reference on purpose. */
        {"/cdn/a", "Location: //cdn.example/cdn/a\r\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        at_reply r;
        at_get(port, cases[i].target, NULL, &r);
        cr_expect(strstr(r.head, cases[i].location) != NULL, "%s: want %s\n%s", cases[i].target,
                  cases[i].location, r.head);
    }
}

/* Two keys whose (unseeded) hashes agree on the 29 bits the table keeps at
 * its default size shared one limit: "attacker-1189535002" was found
 * offline, in minutes, to spend the limit of "X-Api-Key: victim-key". The
 * hash now starts from a random seed, which no one outside keel knows. */
Test(web_attack, ratelimit_keys_cannot_be_aimed, .init = setup, .fini = kh_cleanup_all,
     .timeout = 60)
{
    unsigned port =
        start("ratelimit hello", "[ratelimit]\nrate = 1\nperiod = 1m\nnodelay = on\nkey = "
                                 "header\nheader = X-Api-Key\n");
    at_reply r;
    at_get(port, "/", "X-Api-Key: attacker-1189535002\r\n", &r);
    cr_assert_eq(r.status, 200, "%s", r.head);
    at_get(port, "/", "X-Api-Key: attacker-1189535002\r\n", &r);
    cr_assert_eq(r.status, 429, "the limit holds for the attacker's own key\n%s", r.head);
    at_get(port, "/", "X-Api-Key: victim-key\r\n", &r);
    cr_expect_eq(r.status, 200, "the victim's key was spent by another\n%s", r.head);
}

/* A burst whose tolerance (burst x period / rate) reached 2^48 us wrapped
 * the key's arrival time, kept in 48 bits, to a time long past: rate = 1,
 * period = 1440m, burst = 3300 refused nothing, ever. The tolerance is now
 * capped at 2^46 us (814 days: 814 requests at 1 r/day). */
Test(web_attack, ratelimit_huge_burst_still_limits, .init = setup, .fini = kh_cleanup_all,
     .timeout = 60)
{
    unsigned port = start("ratelimit hello",
                          "[ratelimit]\nrate = 1\nperiod = 1440m\nburst = 3300\nnodelay = on\n");
    int fd = kh_connect("127.0.0.1", port);
    cr_assert(fd >= 0);
    enum { N = 900 }; /* under http1's max_requests (1000) on one connection */
    static const char one[] = "GET / HTTP/1.1\r\nHost: t\r\n\r\n";
    static char reqs[N * sizeof one], resp[N * 1024];
    for (int i = 0; i < N; i++)
        memcpy(reqs + i * (sizeof one - 1), one, sizeof one - 1);
    cr_assert_eq(kh_send(fd, reqs, N * (sizeof one - 1)), 0);
    size_t n = 0, scanned = 0;
    int done = 0;
    long long until = kh_now_ms() + 20000;
    while (done < N && kh_now_ms() < until) {
        /* One byte with a wait, then whatever else has come; each answer
         * counted once (a rescan of the whole buffer per read was
         * quadratic: under ASan it ran out of time at ~290 answers). */
        long long left = until - kh_now_ms();
        size_t got = kh_recv_n(fd, resp + n, sizeof resp - 1 - n, 1, left > 0 ? (int)left : 1);
        if (got == 0)
            break;
        n += got;
        ssize_t more = recv(fd, resp + n, sizeof resp - 1 - n, MSG_DONTWAIT);
        if (more > 0)
            n += (size_t)more;
        resp[n] = '\0';
        const char *at = resp + scanned;
        while ((at = strstr(at, "HTTP/1.1 ")) != NULL) {
            done++;
            at += 9;
        }
        /* A status line cut at the end of what came is counted next time. */
        scanned = n >= 8 ? n - 8 : 0;
    }
    close(fd);
    int refused = 0;
    for (const char *at = resp; (at = strstr(at, "HTTP/1.1 429")) != NULL; at++)
        refused++;
    cr_expect_eq(done, N, "%d responses of %d", done, N);
    cr_expect(refused > 0, "%d requests at once, none refused at 1 r/day", N);
}

/* A rewrite with `last` chooses the new path's scope, whose rules hold,
 * whatever the order of [keel] modules: with access listed before rewrite
 * its filter ran first, on the scope the client's path chose, and
 * /files/admin/secret.txt rewritten to /admin/secret.txt was served past
 * [/admin/]'s deny. */
Test(web_attack, rewrite_last_scope_rules_hold, .init = setup, .fini = kh_cleanup_all,
     .timeout = 60)
{
    if (access(KEEL_MODULE_DIR "/mod_rewrite.so", F_OK) != 0)
        cr_skip_test("rewrite is not built (no PCRE2)");
    unsigned port = start("access rewrite static",
                          "[static]\nmount = / %s\n[/admin/]\naccess.rule = deny all\n[/files/]\n"
                          "rewrite.rewrite = ^/files/(.*)$ /$1 last\n");
    expect_status(port, "/files/admin/secret.txt", 403);
    expect_status(port, "/files/index.html", 200);
}

/* The same with filters that are in the pipelines of some scopes only
 * (keel_http_filter.scope, ABI 1.11): auth_basic and ratelimit are in
 * [/admin/]'s, not in [/files/]'s, where the request starts. After the
 * rewrite the request goes on with [/admin/]'s filters: a pipeline kept
 * from the first scope would serve the file without a password. */
Test(web_attack, rewrite_last_new_scopes_filters_run, .init = setup, .fini = kh_cleanup_all,
     .timeout = 60)
{
    if (access(KEEL_MODULE_DIR "/mod_rewrite.so", F_OK) != 0)
        cr_skip_test("rewrite is not built (no PCRE2)");
    char users[512];
    snprintf(users, sizeof users, "%s/users", dir);
    at_write(users, "alice:$2b$05$.YK.aMug64QMnnB0wFWfyuWiA/HCv3o9hDYpbTX142MsCpmPFq7l6\n");
    unsigned port = start("rewrite auth_basic ratelimit static",
                          "[static]\nmount = / %1$s\n[auth_basic]\nfile = staff %1$s/users\n"
                          "[/admin/]\nauth_basic.users = staff\n"
                          "[/limited/]\nratelimit.rate = 1\nratelimit.period = 1m\n"
                          "[/files/]\nrewrite.rewrite = ^/files/(.*)$ /$1 last\n");
    expect_status(port, "/files/admin/secret.txt", 401);
    expect_status(port, "/files/index.html", 200);
    /* ratelimit, before auth_basic: one request a minute in [/limited/]. */
    expect_status(port, "/files/limited/x", 404);
    expect_status(port, "/files/limited/x", 429);
}
