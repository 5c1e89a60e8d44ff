/* ratelimit (modules/ratelimit, docs/web.md "Rate limiting"): the burst
 * and then the status with Retry-After, nodelay against the delay, one
 * table for every worker, keys by header and by auth_basic user,
 * limit_conn, a table too small for its keys, and the config checks. */
#define _GNU_SOURCE
#include "auth_test.h"

#include <poll.h>

static char conf[4096];

static const char *config(const char *workers, const char *modules, const char *extra)
{
    snprintf(conf, sizeof conf,
             "[keel]\nlisten = 127.0.0.1:0 http1\nmodules = http1 %s hello stats\n"
             "workers = %s\n" KH_MODULE_PATH "%s[/metrics]\nratelimit.rate = 0\n"
             "ratelimit.connections = 0\n",
             modules, workers, extra);
    return conf;
}

Test(ratelimit, over_the_burst_the_status_and_retry_after, .fini = kh_cleanup_all, .timeout = 60)
{
    kh_proc *p = kh_start(config("1", "ratelimit",
                                 "[ratelimit]\nrate = 1\nperiod = 1m\nburst = 2\nnodelay = on\n"
                                 "[/busy/]\nratelimit.status = 503\nratelimit.zone = busy\n"),
                          NULL, 1, 10000);
    unsigned port = kh_port(p, 0);
    at_reply r;
    for (int i = 0; i < 3; i++)
        cr_expect_eq(at_get(port, "/", NULL, &r), 200, "request %d within the burst: %d", i,
                     r.status);
    cr_expect_eq(at_get(port, "/", NULL, &r), 429, "over the burst: %d", r.status);
    /* One request a minute, two of burst used up: the next conforms in 60s. */
    cr_expect(strstr(r.head, "\r\nRetry-After: 60\r\n") != NULL, "no Retry-After: 60 in\n%s",
              r.head);
    /* Another zone counts apart and answers as configured. */
    for (int i = 0; i < 3; i++)
        cr_expect_eq(at_get(port, "/busy/x", NULL, &r), 404, "busy %d: %d", i, r.status);
    cr_expect_eq(at_get(port, "/busy/x", NULL, &r), 503, "busy over: %d", r.status);
    cr_expect(strstr(r.head, "\r\nRetry-After: ") != NULL, "no Retry-After in\n%s", r.head);
    kh_assert(p, at_metric(port, "ratelimit_rejected_total{limit=\"req\"}") == 2, "rejected: %lld",
              at_metric(port, "ratelimit_rejected_total{limit=\"req\"}"));
}

/* n requests sent at once on n connections; the milliseconds until the
 * last answer, each status in statuses. */
static long long burst_of(unsigned port, int n, const char *headers, int *statuses)
{
    int fds[32];
    char req[512];
    snprintf(req, sizeof req, "GET / HTTP/1.1\r\nHost: t\r\n%sConnection: close\r\n\r\n",
             headers ? headers : "");
    long long start = kh_now_ms();
    for (int i = 0; i < n; i++) {
        fds[i] = kh_connect("127.0.0.1", port);
        cr_assert(fds[i] >= 0);
        cr_assert_eq(kh_send_str(fds[i], req), 0);
    }
    for (int i = 0; i < n; i++) {
        char buf[2048];
        size_t got = kh_recv_n(fds[i], buf, sizeof buf, sizeof buf - 1, 10000);
        buf[got] = '\0';
        statuses[i] = 0;
        sscanf(buf, "HTTP/1.1 %d", &statuses[i]);
        close(fds[i]);
    }
    return kh_now_ms() - start;
}

Test(ratelimit, the_burst_is_delayed_unless_nodelay, .fini = kh_cleanup_all, .timeout = 60)
{
    /* 10 r/s: one every 100 ms; a burst of 5 spaced at that rate takes
     * 500 ms for its last request. */
    int statuses[6];
    kh_proc *p =
        kh_start(config("1", "ratelimit", "[ratelimit]\nrate = 10\nburst = 5\n"), NULL, 1, 10000);
    long long took = burst_of(kh_port(p, 0), 6, NULL, statuses);
    for (int i = 0; i < 6; i++)
        cr_expect_eq(statuses[i], 200, "delayed request %d: %d", i, statuses[i]);
    kh_assert(p, took >= 380 && took < 8000, "6 requests at 10 r/s took %lld ms", took);
    kh_assert(p, at_metric(kh_port(p, 0), "ratelimit_delayed_total") == 5, "delayed: %lld",
              at_metric(kh_port(p, 0), "ratelimit_delayed_total"));
    kh_stop(p);

    p = kh_start(config("1", "ratelimit", "[ratelimit]\nrate = 10\nburst = 5\nnodelay = on\n"),
                 NULL, 1, 10000);
    took = burst_of(kh_port(p, 0), 6, NULL, statuses);
    for (int i = 0; i < 6; i++)
        cr_expect_eq(statuses[i], 200, "nodelay request %d: %d", i, statuses[i]);
    kh_assert(p, at_metric(kh_port(p, 0), "ratelimit_delayed_total") == 0, "delayed: %lld",
              at_metric(kh_port(p, 0), "ratelimit_delayed_total"));
    /* Over the burst, delay or not, is refused at once. */
    took = burst_of(kh_port(p, 0), 1, NULL, statuses);
    cr_expect_eq(statuses[0], 429, "over the burst: %d", statuses[0]);
}

/* Clients that leave while their requests wait: the delay's timer is
 * stopped (keel_request_on_abort), nothing runs for the gone requests, and
 * the server goes on (under ASan: no use after free). */
Test(ratelimit, clients_leaving_during_the_delay, .fini = kh_cleanup_all, .timeout = 60)
{
    kh_proc *p =
        kh_start(config("1", "ratelimit", "[ratelimit]\nrate = 4\nburst = 3\n"), NULL, 1, 10000);
    unsigned port = kh_port(p, 0);
    int fds[4];
    for (int i = 0; i < 4; i++) {
        fds[i] = kh_connect("127.0.0.1", port);
        cr_assert(fds[i] >= 0);
        cr_assert_eq(kh_send_str(fds[i], "GET / HTTP/1.1\r\nHost: t\r\n\r\n"), 0);
    }
    char buf[1024];
    cr_assert(kh_recv_n(fds[0], buf, sizeof buf, 12, 5000) == 12, "the first was not served");
    for (int i = 0; i < 4; i++)
        close(fds[i]);
    kh_assert(p, KH_WAIT_UNTIL(at_metric(port, "ratelimit_delayed_total") == 3, 5000),
              "delayed: %lld", at_metric(port, "ratelimit_delayed_total"));
    kh_sleep_ms(1200); /* past every delay: a timer left running would fire now */
    at_reply r;
    cr_expect_eq(at_get(port, "/", NULL, &r), 200, "after: %d", r.status);
    kh_assert(p, !kh_exited(p), "keel exited");
}

Test(ratelimit, every_worker_shares_the_counts, .fini = kh_cleanup_all, .timeout = 60)
{
    kh_proc *p = kh_start(
        config("2", "ratelimit", "[ratelimit]\nrate = 1\nperiod = 1m\nburst = 4\nnodelay = on\n"),
        NULL, 1, 10000);
    int statuses[16], ok = 0;
    burst_of(kh_port(p, 0), 16, NULL, statuses);
    for (int i = 0; i < 16; i++)
        ok += statuses[i] == 200;
    kh_assert(p, ok == 5, "%d of 16 requests over 2 workers passed, want 1 + burst 4", ok);
}

Test(ratelimit, keys_by_header, .fini = kh_cleanup_all, .timeout = 60)
{
    kh_proc *p = kh_start(config("1", "ratelimit",
                                 "[ratelimit]\nrate = 1\nperiod = 1m\nnodelay = on\nkey = header\n"
                                 "header = X-Api-Key\n"),
                          NULL, 1, 10000);
    unsigned port = kh_port(p, 0);
    at_reply r;
    cr_expect_eq(at_get(port, "/", "X-Api-Key: a\r\n", &r), 200);
    cr_expect_eq(at_get(port, "/", "X-Api-Key: a\r\n", &r), 429);
    cr_expect_eq(at_get(port, "/", "X-Api-Key: b\r\n", &r), 200);
    /* No key, no limit (nginx: an empty key is not accounted). */
    cr_expect_eq(at_get(port, "/", NULL, &r), 200);
    cr_expect_eq(at_get(port, "/", NULL, &r), 200);
}

/* keel with auth_basic (alice / alice-pw, bob / bob-pw) in front of
 * ratelimit's section `limits`; skips where auth_basic is not built. */
static kh_proc *start_with_auth(const char *limits)
{
    if (access(KEEL_MODULE_DIR "/mod_auth_basic.so", F_OK) != 0)
        cr_skip_test("auth_basic is not built (no crypt_r)");
    char dir[256], users[512], extra[1024];
    at_tmpdir(dir, sizeof dir, "rl");
    snprintf(users, sizeof users, "%s/users", dir);
    at_write(users, "alice:$2b$05$.YK.aMug64QMnnB0wFWfyuWiA/HCv3o9hDYpbTX142MsCpmPFq7l6\n"
                    "bob:$6$Kv0WTnyCuLgDQMda$1UqeVAjWEikptFnJWLxadcLY/5SYL6gQ/"
                    "5vJv0WjvvB.e6SFGboIGcFQTyRQpvrS4p/k.BsQxO8VfA9pc3ZF10\n");
    snprintf(extra, sizeof extra, "[auth_basic]\nfile = staff %s\nusers = staff\n[ratelimit]\n%s",
             users, limits);
    return kh_start(config("1", "auth_basic ratelimit", extra), NULL, 1, 10000);
}

Test(ratelimit, keys_by_user, .fini = kh_cleanup_all, .timeout = 60)
{
    kh_proc *p = start_with_auth("rate = 1\nperiod = 1m\nnodelay = on\nkey = user\n");
    unsigned port = kh_port(p, 0);
    at_reply r;
    cr_expect_eq(at_get(port, "/", "Authorization: Basic YWxpY2U6YWxpY2UtcHc=\r\n", &r), 200);
    cr_expect_eq(at_get(port, "/", "Authorization: Basic YWxpY2U6YWxpY2UtcHc=\r\n", &r), 429);
    cr_expect_eq(at_get(port, "/", "Authorization: Basic Ym9iOmJvYi1wdw==\r\n", &r), 200);
}

/* Limits written only in scopes, the module's section without any: each
 * kind (by client before auth_basic, by user after it, in-progress
 * requests released in the log phase) is set up from the scope that
 * needs it. */
Test(ratelimit, limits_written_only_in_scopes, .fini = kh_cleanup_all, .timeout = 60)
{
    kh_proc *p = start_with_auth("[/c/]\nratelimit.rate = 1\nratelimit.period = 1m\n"
                                 "ratelimit.nodelay = on\n"
                                 "[/u/]\nratelimit.rate = 1\nratelimit.period = 1m\n"
                                 "ratelimit.nodelay = on\nratelimit.key = user\n"
                                 "[/slow]\nratelimit.connections = 1\n");
    unsigned port = kh_port(p, 0);
    const char *alice = "Authorization: Basic YWxpY2U6YWxpY2UtcHc=\r\n";
    const char *bob = "Authorization: Basic Ym9iOmJvYi1wdw==\r\n";
    at_reply r;
    cr_expect_eq(at_get(port, "/c/x", alice, &r), 404, "first by client: %d", r.status);
    cr_expect_eq(at_get(port, "/c/x", bob, &r), 429, "second by client: %d", r.status);
    cr_expect_eq(at_get(port, "/u/x", alice, &r), 404, "alice's first: %d", r.status);
    cr_expect_eq(at_get(port, "/u/x", alice, &r), 429, "alice's second: %d", r.status);
    cr_expect_eq(at_get(port, "/u/x", bob, &r), 404, "bob's first: %d", r.status);
    /* One slow request holds the client's one slot of /slow... */
    int slow = kh_connect("127.0.0.1", port);
    cr_assert(slow >= 0);
    char req[256];
    snprintf(req, sizeof req,
             "GET /slow?ms=1000 HTTP/1.1\r\nHost: t\r\n%sConnection: close\r\n\r\n", alice);
    cr_assert_eq(kh_send_str(slow, req), 0);
    kh_assert(p, KH_WAIT_UNTIL(at_get(port, "/slow?ms=1", alice, &r) == 429, 1000),
              "a second request in progress was not refused: %d", r.status);
    char buf[1024];
    size_t got = kh_recv_n(slow, buf, sizeof buf, sizeof buf - 1, 10000);
    close(slow);
    cr_assert(got > 12 && strncmp(buf, "HTTP/1.1 200", 12) == 0, "the slow request failed");
    /* ...and its log phase gives it back. */
    kh_assert(p, KH_WAIT_UNTIL(at_get(port, "/slow?ms=1", alice, &r) == 200, 5000),
              "the slot stays taken after the request ended: %d", r.status);
}

/* A limit by client runs before auth_basic (nginx: limit_req's preaccess
 * phase before auth_basic's access phase): wrong passwords are limited
 * too, and cost no bcrypt once refused. */
Test(ratelimit, password_guessing_is_limited_before_auth, .fini = kh_cleanup_all, .timeout = 60)
{
    kh_proc *p = start_with_auth("rate = 1\nperiod = 1m\nburst = 1\nnodelay = on\n");
    unsigned port = kh_port(p, 0);
    at_reply r;
    const char *wrong = "Authorization: Basic YWxpY2U6d3Jvbmc=\r\n"; /* alice:wrong */
    cr_expect_eq(at_get(port, "/", wrong, &r), 401);
    cr_expect_eq(at_get(port, "/", wrong, &r), 401);
    cr_expect_eq(at_get(port, "/", wrong, &r), 429, "the third guess: %d", r.status);
}

Test(ratelimit, connections_in_progress_per_key, .fini = kh_cleanup_all, .timeout = 60)
{
    kh_proc *p = kh_start(
        config("1", "ratelimit", "[ratelimit]\nconnections = 1\nkey = header\nstatus = 503\n"),
        NULL, 1, 10000);
    unsigned port = kh_port(p, 0);
    /* One slow request holds key a for a second. */
    int slow = kh_connect("127.0.0.1", port);
    cr_assert(slow >= 0);
    cr_assert_eq(kh_send_str(slow, "GET /slow?ms=1500 HTTP/1.1\r\nHost: t\r\nX-Api-Key: a\r\n"
                                   "Connection: close\r\n\r\n"),
                 0);
    at_reply r;
    kh_assert(p, KH_WAIT_UNTIL(at_get(port, "/", "X-Api-Key: a\r\n", &r) == 503, 1000),
              "a second request of key a was not refused: %d", r.status);
    cr_expect_eq(at_get(port, "/", "X-Api-Key: b\r\n", &r), 200, "key b: %d", r.status);
    char buf[1024];
    size_t got = kh_recv_n(slow, buf, sizeof buf, sizeof buf - 1, 10000);
    close(slow);
    cr_assert(got > 12 && strncmp(buf, "HTTP/1.1 200", 12) == 0, "the slow request failed");
    /* Its log phase gave the count back. */
    kh_assert(p, KH_WAIT_UNTIL(at_get(port, "/", "X-Api-Key: a\r\n", &r) == 200, 5000),
              "key a stays refused after its request ended: %d", r.status);
    kh_assert(p, at_metric(port, "ratelimit_rejected_total{limit=\"conn\"}") >= 1, "rejected: %lld",
              at_metric(port, "ratelimit_rejected_total{limit=\"conn\"}"));
}

Test(ratelimit, a_full_table_gives_the_oldest_slot_away, .fini = kh_cleanup_all, .timeout = 60)
{
    /* 64 slots, 300 keys each allowed once a minute: memory stays at 64
     * slots; keys beyond what a bucket holds push the oldest out, counted.
     * The table keeps a 16-bit tag of each key's seeded hash, not the key
     * (ratelimit.c): a key whose tag matches one of the 7 others still in
     * its bucket shares that key's limit and is refused. That happens in
     * about 3% of runs (300 keys x 7 x 2^-16), never to two keys but in
     * one run of some 20,000: one such refusal is the design, more is a
     * bug. A refused key takes no slot, hence one eviction fewer. */
    kh_proc *p = kh_start(config("1", "ratelimit",
                                 "[ratelimit]\nzone_size = 64\nrate = 1\nperiod = 1m\n"
                                 "nodelay = on\nkey = header\n"),
                          NULL, 1, 10000);
    unsigned port = kh_port(p, 0);
    at_reply r;
    int refused = 0;
    for (int i = 0; i < 300; i++) {
        char h[64];
        snprintf(h, sizeof h, "X-Api-Key: k%d\r\n", i);
        int status = at_get(port, "/", h, &r);
        cr_assert(status == 200 || status == 429, "key %d: %d", i, status);
        refused += status == 429;
    }
    kh_assert(p, refused <= 1, "%d of 300 fresh keys refused: more than a tag collision", refused);
    long long evicted = at_metric(port, "ratelimit_evictions_total");
    kh_assert(p, evicted >= 300 - 64 - refused && evicted < 300, "evictions: %lld", evicted);
    /* The most recent key is still limited. */
    cr_expect_eq(at_get(port, "/", "X-Api-Key: k299\r\n", &r), 429);
}

Test(ratelimit, config_errors_name_the_line, .fini = kh_cleanup_all, .timeout = 60)
{
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"[ratelimit]\nkey = user\n", ":7: [ratelimit] key: key = user needs auth_basic"},
        {"[ratelimit]\nkey = cookie\n", ":7: [ratelimit] key:"},
        {"[ratelimit]\nstatus = 404\n", ":7: [ratelimit] status:"},
        {"[/a/]\nratelimit.burst = -1\n", ":7: [/a/] ratelimit.burst:"},
        {"[/a/]\nratelimit.zone_size = 100\n", ":7: [/a/]"},
    };
    const char *args[] = {"-t", NULL};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char text[2048];
        snprintf(text, sizeof text,
                 "[keel]\nlisten = 127.0.0.1:0 http1\nmodules = http1 ratelimit hello\n"
                 "workers = 1\n" KH_MODULE_PATH "%s",
                 cases[i].text);
        kh_proc *p = kh_spawn(text, args);
        int status = kh_wait_exit(p, 10000);
        cr_expect_eq(status, 1, "case %zu: keel -t exited %d", i, status);
        char want[512];
        snprintf(want, sizeof want, "%s%s", p->conf, cases[i].want);
        cr_expect(strstr(kh_stderr(p), want) != NULL, "case %zu: no '%s' in\n%s", i, want,
                  kh_stderr(p));
        kh_stop(p);
    }
}
