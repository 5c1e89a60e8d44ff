/* The reverse proxy when upstreams fail: refused, reset, not HTTP, silent
 * (504), dying mid-response (the client's response is cut, never passed
 * off as whole), retries of idempotent requests on another server (never
 * of a POST), passive health (max_fails / fail_timeout) and 503 once every
 * server is out. The upstream is proxy_upstream.py; a refusing server is a
 * port nothing listens on. */
#define _GNU_SOURCE
#include "test_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>

static int status_of(kh_proc *p, const char *path)
{
    char url[160];
    ht_run_result rr = px_get(px_url(url, sizeof url, p, 0, path));
    int s = px_status(&rr);
    ht_run_free(&rr);
    return s;
}

Test(proxy_fail, refused_is_502, .timeout = 60, .fini = kh_cleanup_all)
{
    px_need_curl();
    char section[256];
    snprintf(section, sizeof section, "upstream = gone 127.0.0.1:%u\npass = / gone\n",
             kh_free_port());
    kh_proc *p = px_keel(section, 0);
    int s = status_of(p, "/");
    kh_assert(p, s == 502, "got %d", s);
    /* A group's only server is never taken out (each request still tries
     * it), and the log says so instead of "is out for". */
    s = status_of(p, "/");
    kh_assert(p, s == 502, "got %d", s);
    kh_assert(
        p, KH_WAIT_UNTIL(kh_count_log(p, "the group's only server, so it stays in use") == 2, 5000),
        "no word of the only server staying in use");
    kh_assert(p, kh_count_log(p, "is out for") == 0, "the log says the only server is out");
    px_stop(p);
}

Test(proxy_fail, reset_close_and_garbage_are_502, .timeout = 60, .fini = kh_cleanup_all)
{
    px_need_curl();
    kh_proc *up = px_upstream();
    char section[256];
    snprintf(section, sizeof section, "upstream = py 127.0.0.1:%u\npass = / py\n", kh_port(up, 0));
    kh_proc *p = px_keel(section, 0);
    const char *paths[] = {"/reset", "/close", "/garbage"};
    for (size_t i = 0; i < 3; i++) {
        int s = status_of(p, paths[i]);
        kh_assert(p, s == 502, "%s: got %d", paths[i], s);
    }
    /* and the proxy still serves */
    kh_assert(p, status_of(p, "/id") == 200, "after failures");
    px_stop(p);
}

/* RFC 9110 15: no valid status lies beyond 599; an upstream's 650 is an
 * invalid response, not something to relay (issue 23). */
Test(proxy_fail, status_beyond_599_is_502, .timeout = 60, .fini = kh_cleanup_all)
{
    px_need_curl();
    kh_proc *up = px_upstream();
    char section[256];
    snprintf(section, sizeof section, "upstream = py 127.0.0.1:%u\npass = / py\n", kh_port(up, 0));
    kh_proc *p = px_keel(section, 0);
    int s = status_of(p, "/status?code=650");
    kh_assert(p, s == 502, "an upstream's 650: got %d", s);
    kh_assert(p, status_of(p, "/status?code=599") == 599, "599 is relayed");
    px_stop(p);
}

/* Found by the attack on issue 23's fixes: a transfer coding besides
 * chunked (which the proxy does not decode) was relayed as a plain body,
 * the client getting gzip bytes with nothing to say so; and an invalid
 * body right after a valid head was answered 500, though nothing had left
 * for the client yet. Both are the upstream's invalid responses: 502. */
Test(proxy_fail, unknown_transfer_coding_and_early_body_errors_are_502, .timeout = 60,
     .fini = kh_cleanup_all)
{
    px_need_curl();
    kh_proc *up = px_upstream();
    char section[256];
    snprintf(section, sizeof section, "upstream = py 127.0.0.1:%u\npass = / py\ntries = 1\n",
             kh_port(up, 0));
    kh_proc *p = px_keel(section, 0);
    int s = status_of(p, "/te_gzip");
    kh_assert(p, s == 502, "Transfer-Encoding: gzip, chunked: got %d", s);
    s = status_of(p, "/bad_chunk_ext");
    kh_assert(p, s == 502, "an invalid chunk extension after the head: got %d", s);
    kh_assert(p, status_of(p, "/chunked?n=1000") == 200, "a plain chunked body still passes");
    px_stop(p);
}

/* RFC 9112 2.2: a bare CR makes a message invalid. Loose llhttp took "\r"
 * and any byte for the end of the status line and of the head, so "HTTP/1.1
 * 200 O\rXContent-Length: 0" was an empty 200 to keel, relayed, and its
 * connection pooled and reused, where a parser that follows 2.2 sees a head
 * not yet ended; likewise in the chunked coding (7.1: the chunk-size line,
 * the CRLF after chunk data, which llhttp skipped whatever it was, the
 * trailer section). Each is an invalid response now (502), its connection
 * closed: the next request comes on a new one. CRs in chunk data are the
 * body's. */
Test(proxy_fail, bare_cr_in_head_is_502, .timeout = 60, .fini = kh_cleanup_all)
{
    px_need_curl();
    kh_proc *up = px_upstream();
    char section[256], url[160];
    snprintf(section, sizeof section, "upstream = py 127.0.0.1:%u\npass = / py\ntries = 1\n",
             kh_port(up, 0));
    kh_proc *p = px_keel(section, 0);
    const char *paths[] = {"/bare_cr?at=status",  "/bare_cr?at=split",   "/bare_cr?at=end",
                           "/bare_cr?at=interim", "/bare_cr?at=size",    "/bare_cr?at=data",
                           "/bare_cr?at=last",    "/bare_cr?at=trailer", "/bare_cr?at=final"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        int s = status_of(p, paths[i]);
        kh_assert(p, s == 502, "%s: got %d", paths[i], s);
        ht_run_result rr = px_get(px_url(url, sizeof url, p, 0, "/count"));
        kh_assert(p, strstr(px_body(&rr), " req=1") != NULL,
                  "after %s the upstream connection was reused: %s", paths[i], px_body(&rr));
        ht_run_free(&rr);
    }
    ht_run_result rr = px_get(px_url(url, sizeof url, p, 0, "/bare_cr?at=body"));
    kh_assert(p, px_status(&rr) == 200 && strcmp(px_body(&rr), "a\rb") == 0,
              "bare CRs in a body" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    ht_run_free(&rr);
    px_stop(p);
}

Test(proxy_fail, silent_upstream_is_504, .timeout = 60, .fini = kh_cleanup_all)
{
    px_need_curl();
    kh_proc *up = px_upstream();
    char section[256];
    snprintf(section, sizeof section,
             "upstream = py 127.0.0.1:%u\npass = / py read_timeout=500ms\n", kh_port(up, 0));
    kh_proc *p = px_keel(section, 0);
    long long t0 = kh_now_ms();
    int s = status_of(p, "/hang");
    long long took = kh_now_ms() - t0;
    kh_assert(p, s == 504, "got %d", s);
    kh_assert(p, took >= 400 && took < 5000, "504 after %lld ms", took);
    px_stop(p);
}

/* The upstream dies after part of the body: curl must see an error, not
 * a short body it takes for whole (exit 18: partial file; 56: recv
 * failure). */
Test(proxy_fail, truncated_response_is_cut, .timeout = 60, .fini = kh_cleanup_all)
{
    px_need_curl();
    kh_proc *up = px_upstream();
    char section[256], url[160];
    snprintf(section, sizeof section, "upstream = py 127.0.0.1:%u\npass = / py\n", kh_port(up, 0));
    kh_proc *p = px_keel(section, 0);
    const char *paths[] = {"/truncate?n=200000", "/truncate_chunked"};
    for (size_t i = 0; i < 2; i++) {
        const char *args[] = {"-o", "/dev/null", px_url(url, sizeof url, p, 0, paths[i]), NULL};
        ht_run_result rr = px_curl(args);
        kh_assert(p, rr.status == 18 || rr.status == 56, "%s: curl must fail" PX_SHOW(rr), paths[i],
                  PX_SHOW_ARGS(rr));
        ht_run_free(&rr);
    }
    kh_assert(p, status_of(p, "/id") == 200, "after cut responses");
    px_stop(p);
}

/* A dead server and a live one. Round robin starts with the first: the
 * dead one. A POST that meets it was never sent anywhere, so it goes to
 * the live one (nginx's rule); the dead one is then out for fail_timeout;
 * once it is back, GETs that meet it are retried too, so every request
 * succeeds. */
Test(proxy_fail, retries_and_passive_health, .timeout = 60, .fini = kh_cleanup_all)
{
    px_need_curl();
    kh_proc *up = px_upstream();
    char section[512], url[160];
    unsigned dead = kh_free_port();
    snprintf(section, sizeof section,
             "upstream = mixed 127.0.0.1:%u max_fails=1 fail_timeout=1s 127.0.0.1:%u\n"
             "pass = / mixed\n",
             dead, kh_port(up, 0));
    kh_proc *p = px_keel(section, 0);
    const char *post[] = {"-i", "--data-binary", "once", px_url(url, sizeof url, p, 0, "/echo"),
                          NULL};
    ht_run_result rr = px_curl(post);
    kh_assert(p, px_status(&rr) == 200 && strcmp(px_body(&rr), "once") == 0,
              "POST retried after a refused connect" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    ht_run_free(&rr);
    kh_assert(p, kh_count_log(p, "is out for 1000 ms") == 1, "the dead server was taken out");
    /* back after fail_timeout (1 s passing is the test): GETs meet it and
     * are retried */
    kh_sleep_ms(1200);
    for (int i = 0; i < 6; i++) {
        int s = status_of(p, "/id");
        kh_assert(p, s == 200, "GET %d: %d", i, s);
    }
    kh_assert(p, kh_count_log(p, "is out for 1000 ms") == 2, "tried again, and out again");
    px_stop(p);
}

/* A POST that reached an upstream which then failed is not sent again:
 * 502, and the other server never sees it. A GET in the same situation is
 * retried. */
Test(proxy_fail, post_sent_is_not_retried, .timeout = 60, .fini = kh_cleanup_all)
{
    px_need_curl();
    kh_proc *a = px_upstream(), *b = px_upstream();
    char section[512], url[160];
    snprintf(section, sizeof section,
             "upstream = two 127.0.0.1:%u max_fails=0 127.0.0.1:%u max_fails=0\npass = / two\n",
             kh_port(a, 0), kh_port(b, 0));
    kh_proc *p = px_keel(section, 0);
    const char *post[] = {"-i", "--data-binary", "x", px_url(url, sizeof url, p, 0, "/reset"),
                          NULL};
    ht_run_result rr = px_curl(post);
    int s = px_status(&rr);
    ht_run_free(&rr);
    kh_assert(p, s == 502, "POST that reached a resetting upstream: %d", s);
    /* An upstream logs a request as it reads it, before it resets, and
     * keel answers 502 only after every attempt was reset: the logs are
     * complete when the answer comes. */
    int posts = kh_count_log(a, "POST /reset") + kh_count_log(b, "POST /reset");
    kh_assert(p, posts == 1, "the POST was sent %d times", posts);
    s = status_of(p, "/reset");
    kh_assert(p, s == 502, "GET /reset: %d", s);
    int gets = kh_count_log(a, "GET /reset") + kh_count_log(b, "GET /reset");
    kh_assert(p, gets == 2, "the GET was retried on the other server: sent %d times", gets);
    px_stop(p);
}

Test(proxy_fail, all_out_is_503, .timeout = 60, .fini = kh_cleanup_all)
{
    px_need_curl();
    char section[256];
    snprintf(section, sizeof section, "upstream = gone 127.0.0.1:%u 127.0.0.1:%u\npass = / gone\n",
             kh_free_port(), kh_free_port());
    kh_proc *p = px_keel(section, 0);
    int first = status_of(p, "/");
    int second = status_of(p, "/");
    kh_assert(p, first == 502, "both tried and failed: %d", first);
    kh_assert(p, second == 503, "both out: %d", second);
    px_stop(p);
}

/* tries=1: no retry even for a GET. */
Test(proxy_fail, tries_limit, .timeout = 60, .fini = kh_cleanup_all)
{
    px_need_curl();
    kh_proc *up = px_upstream();
    char section[256];
    snprintf(section, sizeof section,
             "upstream = mixed 127.0.0.1:%u 127.0.0.1:%u\npass = / mixed tries=1\n", kh_free_port(),
             kh_port(up, 0));
    kh_proc *p = px_keel(section, 0);
    int s = status_of(p, "/id");
    kh_assert(p, s == 502, "one try, on the dead server: %d", s);
    px_stop(p);
}

/* A [proxy] section keel refuses: exit status 1 with the line's message,
 * and nothing of the half-read configuration left behind (under ASan,
 * LeakSanitizer reports it on stderr; the status stays keel's). */
static void expect_config_error(const char *proxy_section, const char *needle)
{
    char conf[1024];
    snprintf(conf, sizeof conf,
             "[keel]\n" KH_MODULE_PATH "modules = http1 proxy\nlisten = 127.0.0.1:0 http1\n"
             "[proxy]\n%s",
             proxy_section);
    const char *args[] = {"-t", NULL};
    kh_proc *p = kh_spawn(conf, args);
    int status = kh_wait_exit(p, 10000);
    kh_assert(p, status == 1, "keel -t exit status %d for:\n%s\n%s", status, proxy_section,
              kh_stderr(p));
    kh_assert(p, strstr(kh_stderr(p), needle) != NULL, "no '%s' in:\n%s", needle, kh_stderr(p));
    kh_assert(p, strstr(kh_stderr(p), "LeakSanitizer") == NULL, "a leak:\n%s", kh_stderr(p));
    kh_stop(p);
}

Test(proxy_fail, config_errors_are_refused_whole, .timeout = 60, .fini = kh_cleanup_all)
{
    expect_config_error("upstream = up 127.0.0.1:\npass = / up\n", "bad address '127.0.0.1:'");
    expect_config_error("upstream = up 127.0.0.1:1 127.0.0.1:2 weight=0\npass = / up\n",
                        "[proxy] upstream");
    expect_config_error("upstream = up 127.0.0.1:1\nupstream = up 127.0.0.1:2\npass = / up\n",
                        "group up defined twice");
    expect_config_error("upstream = up 127.0.0.1:1\npass = / down\n",
                        "no upstream group called 'down'");
    expect_config_error("upstream = up 127.0.0.1:1\npass = / up sideways\n",
                        "bad option 'sideways'");
    expect_config_error("upgrade = websocket\nupstream = up 127.0.0.1:1\npass = / up\n"
                        "pass = /a up sideways\n",
                        "bad option 'sideways'");
}
