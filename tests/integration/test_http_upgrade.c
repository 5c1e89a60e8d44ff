/* HTTP upgrades and the HTTP/2 preface over real sockets, with the real
 * keel: the upgrade test module (tests/modules/mod_upgrade.c) switches to
 * its line protocol "upper" from the handler, from a timer and from an
 * offload's completion; fakeh2 (tests/modules/mod_fakeh2.c) stands in for
 * an HTTP/2 module. The byte-exact cases (the 101's fields, refusals) are in
 * tests/http/cases/upgrade-*.txt and conn-h2-preface-*.txt; here are the
 * ones that need timing, the access log or several connections. */
#define _GNU_SOURCE
#include "test_http.h"

#include <stdlib.h>

#define UPGRADE(path)                                                                              \
    "GET " path " HTTP/1.1\r\nHost: x\r\nUpgrade: upper\r\nConnection: Upgrade\r\n\r\n"

static const char greeting[] = "upper ready\n";

static kh_proc *start(const char *modules, const char *extra)
{
    char conf[2048];
    snprintf(conf, sizeof conf,
             "[keel]\nlisten = 127.0.0.1:0 http1\nworkers = 2\nmodules = %s\n" KH_MODULE_PATH "%s",
             modules, extra ? extra : "");
    kh_proc *p = kh_start(conf, NULL, 1, 10000);
    kh_assert(p, kh_port(p, 0) > 0, "no port in the 'listening on' line");
    return p;
}

/* Reads a 101 and checks what RFC 9110 7.8 and 15.2.2 ask of it. */
static void expect_101(kh_proc *p, ht_conn *c)
{
    ht_resp r;
    int rc = ht_read_head(c, &r, 5000);
    kh_assert(p, rc == 0, "reading the 101: %s", r.err);
    kh_assert(p, r.status == 101, "status %d, expected 101:\n%s", r.status, r.head);
    const char *upgrade = ht_header(&r, "Upgrade");
    kh_assert(p, upgrade && strcmp(upgrade, "upper") == 0, "Upgrade '%s'",
              upgrade ? upgrade : "(none)");
    kh_assert(p, ht_header_has_token(&r, "Connection", "upgrade"), "no Connection: upgrade:\n%s",
              r.head);
    kh_assert(p, !ht_header(&r, "Content-Length") && !ht_header(&r, "Transfer-Encoding"),
              "framing in a 101:\n%s", r.head);
    ht_resp_free(&r);
}

/* Waits for exactly `want` (and fails on anything else, extra bytes that
 * arrived with it included). */
static void expect_bytes(kh_proc *p, ht_conn *c, const char *want)
{
    size_t n = strlen(want);
    int rc = ht_wait_bytes(c, n, 5000);
    kh_assert(p, rc == 0, "expected '%s', got %zu bytes '%.*s'%s", want, ht_avail(c),
              (int)ht_avail(c), c->buf + c->pos, c->eof ? " and a close" : "");
    kh_assert(p, ht_avail(c) == n && memcmp(c->buf + c->pos, want, n) == 0,
              "expected '%s', got '%.*s'", want, (int)ht_avail(c), c->buf + c->pos);
    c->pos += n;
}

/* After a switch: the new protocol still answers, and only that. */
static void expect_upper_alive(kh_proc *p, ht_conn *c)
{
    ht_send_str(c, "still there\n");
    expect_bytes(p, c, "STILL THERE\n");
    kh_assert(p, ht_silent(c, 100), "bytes after the echo: '%.*s'", (int)ht_avail(c),
              c->buf + c->pos);
}

/* ---- Switching, at once and later ----------------------------------------------- */

Test(http_upgrade, from_the_handler_with_bytes_in_the_same_write, .timeout = 30,
     .fini = kh_cleanup_all)
{
    kh_proc *p = start("http1 hello upgrade", NULL);
    ht_conn *c = ht_connect(kh_port(p, 0));
    /* One write: the head, a whole line and half of the next. */
    ht_send_str(c, UPGRADE("/upgrade/upper") "first\nsec");
    expect_101(p, c);
    expect_bytes(p, c, ht_fmt("%sFIRST\n", greeting));
    ht_send_str(c, "ond\n");
    expect_bytes(p, c, "SECOND\n");
    expect_upper_alive(p, c);
    ht_send_str(c, "quit\n");
    kh_assert(p, ht_wait_closed(c, 5000) == 1, "the new protocol's close did not happen");
    ht_close(c);
    kh_stop(p);
}

/* A timer decides: http1 waits paused with the request unconsumed, and the
 * hand-over must drop it, not give it to the new protocol. */
Test(http_upgrade, from_a_timer_without_replaying_the_request, .timeout = 30,
     .fini = kh_cleanup_all)
{
    kh_proc *p = start("http1 hello upgrade", NULL);
    ht_conn *c = ht_connect(kh_port(p, 0));
    long long t0 = kh_now_ms();
    ht_send_str(c, UPGRADE("/later/upper?ms=150") "early\n");
    expect_101(p, c);
    kh_assert(p, kh_now_ms() - t0 >= 140, "101 after %lld ms, before the 150 ms timer",
              kh_now_ms() - t0);
    expect_bytes(p, c, ht_fmt("%sEARLY\n", greeting));
    expect_upper_alive(p, c);
    ht_close(c);
    kh_stop(p);
}

Test(http_upgrade, from_an_offload_completion, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = start("http1 hello upgrade", NULL);
    ht_conn *c = ht_connect(kh_port(p, 0));
    ht_send_str(c, UPGRADE("/offload/upper") "early\n");
    expect_101(p, c);
    expect_bytes(p, c, ht_fmt("%sEARLY\n", greeting));
    expect_upper_alive(p, c);
    ht_close(c);
    kh_stop(p);
}

/* Bytes that arrive while the handler is still deciding wait, then go to
 * the new protocol in order. */
Test(http_upgrade, bytes_sent_while_a_timer_decides, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = start("http1 hello upgrade", NULL);
    ht_conn *c = ht_connect(kh_port(p, 0));
    ht_send_str(c, UPGRADE("/later/upper?ms=300") "one\n");
    kh_assert(p, ht_silent(c, 100), "answered before the timer");
    ht_send_str(c, "two\n");
    expect_101(p, c);
    expect_bytes(p, c, ht_fmt("%sONE\nTWO\n", greeting));
    ht_close(c);
    kh_stop(p);
}

/* A request pipelined behind the upgrade request is the new protocol's,
 * whichever way the switch was decided. */
Test(http_upgrade, pipelined_request_belongs_to_the_new_protocol, .timeout = 30,
     .fini = kh_cleanup_all)
{
    kh_proc *p = start("http1 hello upgrade", NULL);
    const char *paths[] = {"/upgrade/upper", "/later/upper", "/offload/upper"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        ht_conn *c = ht_connect(kh_port(p, 0));
        ht_send_str(c, ht_fmt("GET %s HTTP/1.1\r\nHost: x\r\nUpgrade: upper\r\n"
                              "Connection: Upgrade\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
                              paths[i]));
        expect_101(p, c);
        expect_bytes(p, c, ht_fmt("%sGET / HTTP/1.1\r\nHOST: X\r\n\r\n", greeting));
        kh_assert(p, ht_silent(c, 100), "%s: an HTTP answer after the switch: '%.*s'", paths[i],
                  (int)ht_avail(c), c->buf + c->pos);
        ht_close(c);
    }
    kh_stop(p);
}

/* The body read whole from the handler, and the switch from a timer: http1
 * has consumed the body by then and holds its own copy of the head. */
Test(http_upgrade, after_the_body_from_a_timer, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = start("http1 hello upgrade", NULL);
    ht_conn *c = ht_connect(kh_port(p, 0));
    ht_send_str(c, "POST /read/upper?ms=50 HTTP/1.1\r\nHost: x\r\nUpgrade: upper\r\n"
                   "Connection: Upgrade\r\nContent-Length: 5\r\n\r\nhel");
    kh_assert(p, ht_silent(c, 50), "answered before the body was whole");
    ht_send_str(c, "lonext\n");
    expect_101(p, c);
    expect_bytes(p, c, ht_fmt("%sNEXT\n", greeting));
    ht_close(c);
    kh_stop(p);
}

/* ---- Refusals ---------------------------------------------------------------------- */

static void expect_refused(kh_proc *p, ht_conn *c, const char *request, const char *why)
{
    ht_send_str(c, request);
    ht_resp r;
    ht_expect_response(p, c, &r, 0);
    kh_assert(p, r.status == 200 && strcmp(r.body, ht_fmt("not upgraded: %s\n", why)) == 0,
              "expected 'not upgraded: %s', got %d '%s'", why, r.status, r.body);
    kh_assert(p, !ht_header(&r, "Upgrade"), "Upgrade field in a refusal:\n%s", r.head);
    ht_resp_free(&r);
}

/* Each refusal is answered normally and the connection stays HTTP/1.1. */
Test(http_upgrade, refusals_leave_an_http_connection, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = start("http1 hello upgrade", NULL);
    ht_conn *c = ht_connect(kh_port(p, 0));
    expect_refused(p, c,
                   "GET /upgrade/nosuch HTTP/1.1\r\nHost: x\r\nUpgrade: nosuch\r\n"
                   "Connection: Upgrade\r\n\r\n",
                   "NOTFOUND");
    expect_refused(p, c,
                   "GET /later/nosuch HTTP/1.1\r\nHost: x\r\nUpgrade: nosuch\r\n"
                   "Connection: Upgrade\r\n\r\n",
                   "NOTFOUND");
    expect_refused(p, c, "GET /upgrade/upper HTTP/1.1\r\nHost: x\r\n\r\n", "UNSUPPORTED");
    expect_refused(p, c,
                   "POST /upgrade/upper HTTP/1.1\r\nHost: x\r\nUpgrade: upper\r\n"
                   "Connection: Upgrade\r\nContent-Length: 4\r\n\r\nbody",
                   "STATE");
    ht_send_str(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    ht_resp r;
    ht_expect_response(p, c, &r, 0);
    kh_assert(p, r.status == 200 && strcmp(r.body, "Hello, World!") == 0, "%d '%s'", r.status,
              r.body);
    ht_resp_free(&r);
    ht_close(c);

    /* RFC 9110 7.8: Upgrade in HTTP/1.0 is ignored (and the 1.0 answer
     * closes). */
    c = ht_connect(kh_port(p, 0));
    expect_refused(p, c,
                   "GET /upgrade/upper HTTP/1.0\r\nUpgrade: upper\r\nConnection: Upgrade\r\n\r\n",
                   "UNSUPPORTED");
    kh_assert(p, ht_wait_closed(c, 5000) == 1, "HTTP/1.0 connection not closed");
    ht_close(c);
    kh_stop(p);
}

/* ---- The log phase ------------------------------------------------------------------- */

/* Waits until the file holds `needle` (the access log is written by a
 * background thread, promptly); returns the file's text, or NULL. */
static const char *wait_for_line(const char *path, const char *needle, int timeout_ms)
{
    static char buf[16384];
    long long deadline = kh_now_ms() + timeout_ms;
    for (;;) {
        FILE *f = fopen(path, "rb");
        size_t n = 0;
        if (f != NULL) {
            n = fread(buf, 1, sizeof buf - 1, f);
            fclose(f);
        }
        buf[n] = '\0';
        if (strstr(buf, needle) != NULL)
            return buf;
        if (kh_now_ms() >= deadline)
            return NULL;
        kh_sleep_ms(10);
    }
}

/* Closes with a reset (SO_LINGER 0): the server's next write fails at once. */
static void reset_close(ht_conn *c)
{
    struct linger lg = {1, 0};
    setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    ht_close(c);
}

/* The log phase runs with status 101 and still sees the request line and
 * fields, whose bytes the hand-over consumed. A connection that breaks just
 * as a timer decides to switch ends the exchange unanswered (status 0). */
Test(http_upgrade, access_log_records_101, .timeout = 30, .fini = kh_cleanup_all)
{
    char dir[] = "/tmp/keel-upgrade-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char log[256], extra[512];
    snprintf(log, sizeof log, "%s/access.log", dir);
    snprintf(extra, sizeof extra, "[accesslog]\npath = %s\n", log);
    kh_proc *p = start("http1 hello upgrade accesslog", extra);

    ht_conn *c = ht_connect(kh_port(p, 0));
    ht_send_str(c, "GET /upgrade/upper?q=1 HTTP/1.1\r\nHost: x\r\nUpgrade: upper\r\n"
                   "Connection: Upgrade\r\nUser-Agent: ua/1\r\n\r\n");
    expect_101(p, c);
    expect_bytes(p, c, greeting);
    const char *line = "\"GET /upgrade/upper?q=1 HTTP/1.1\" 101 - \"-\" \"ua/1\"\n";
    kh_assert(p, wait_for_line(log, line, 5000), "no '%s' in the log:\n%s", line,
              wait_for_line(log, "", 0));
    ht_close(c);

    c = ht_connect(kh_port(p, 0));
    ht_send_str(c, "GET /later/upper?ms=30 HTTP/1.1\r\nHost: x\r\nUpgrade: upper\r\n"
                   "Connection: Upgrade\r\nUser-Agent: ua/2\r\n\r\n");
    expect_101(p, c);
    expect_bytes(p, c, greeting);
    line = "\"GET /later/upper?ms=30 HTTP/1.1\" 101 - \"-\" \"ua/2\"\n";
    kh_assert(p, wait_for_line(log, line, 5000), "no '%s' in the log:\n%s", line,
              wait_for_line(log, "", 0));
    ht_close(c);

    /* Reset before the timer fires: the 101 cannot be written, the switch
     * reports KEEL_ERR_CLOSED and the exchange is released. */
    c = ht_connect(kh_port(p, 0));
    ht_send_str(c, UPGRADE("/later/upper?ms=200"));
    kh_assert(p, ht_silent(c, 50), "answered before the timer");
    reset_close(c);
    line = "\"GET /later/upper?ms=200 HTTP/1.1\" 0 - ";
    kh_assert(p, wait_for_line(log, line, 5000), "no '%s' in the log:\n%s", line,
              wait_for_line(log, "", 0));

    /* Still serving; and a clean exit (under ASan: nothing leaked). */
    ht_resp r;
    ht_roundtrip(p, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", &r);
    kh_assert(p, r.status == 200, "status %d after the upgrades", r.status);
    ht_resp_free(&r);
    kh_signal(p, SIGTERM);
    kh_assert(p, kh_wait_exit(p, 10000) == 0, "no clean exit");
    kh_stop(p);
    unlink(log);
    rmdir(dir);
}

/* ---- The HTTP/2 preface ------------------------------------------------------------- */

#define PREFACE "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
static const char settings[9] = {0, 0, 0, 4, 0, 0, 0, 0, 0};

Test(http_upgrade, h2_preface_goes_to_h2, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = start("http1 hello fakeh2", NULL);
    ht_conn *c = ht_connect(kh_port(p, 0));
    ht_send_str(c, PREFACE "abc");
    kh_assert(p, ht_wait_bytes(c, sizeof settings + 3, 5000) == 0, "got %zu bytes: '%.*s'",
              ht_avail(c), (int)ht_avail(c), c->buf + c->pos);
    kh_assert(p,
              memcmp(c->buf + c->pos, settings, sizeof settings) == 0 &&
                  memcmp(c->buf + c->pos + sizeof settings, "abc", 3) == 0,
              "not the fake h2's SETTINGS and echo: '%.*s'", (int)ht_avail(c), c->buf + c->pos);
    c->pos += sizeof settings + 3;
    ht_send_str(c, "def");
    expect_bytes(p, c, "def");
    ht_close(c);

    /* An HTTP/1.1 connection on the same listener is still HTTP/1.1. */
    ht_resp r;
    ht_roundtrip(p, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", &r);
    kh_assert(p, r.status == 200, "status %d", r.status);
    ht_resp_free(&r);
    kh_stop(p);
}

Test(http_upgrade, h2_preface_without_h2_is_505, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = start("http1 hello", NULL);
    ht_conn *c = ht_connect(kh_port(p, 0));
    ht_send_str(c, PREFACE);
    ht_resp r;
    ht_expect_response(p, c, &r, 0);
    kh_assert(p, r.status == 505, "status %d, expected 505", r.status);
    kh_assert(p, ht_wait_closed(c, 5000) == 1, "not closed after the 505");
    ht_resp_free(&r);
    ht_close(c);
    kh_stop(p);
}
