/* Issue 13, weakness 5: at max_connections a new client was refused while
 * idle keep-alive connections held every slot until their timeouts. Now,
 * as nginx does (ngx_drain_connections), the least recently idle
 * connection the protocol marked idle (keel_conn_set_idle) is closed to
 * admit the new one, never one in the middle of a request. */
#define _GNU_SOURCE
#include "test_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#define GET "GET / HTTP/1.1\r\nHost: h\r\n\r\n"

/* keel with http1 + hello + the metrics test module, `workers` workers,
 * max_connections = max, debug log (the reclaim line), and `reuseport`. */
static kh_proc *start(int workers, int max, const char *reuseport)
{
    const char *args[] = {
        "--set", ht_fmt("keel.max_connections=%d", max),
        "--set", "keel.log_level=debug",
        "--set", ht_fmt("keel.reuseport=%s", reuseport),
        "--set", "keel.modules=http1 hello metrics", /* tests/modules: GET /dump */
        NULL};
    return ht_start_n(workers, NULL, args);
}

static void get_ok(kh_proc *p, ht_conn *c, const char *what)
{
    ht_send_str(c, GET);
    ht_resp r;
    int rc = ht_read_response(c, &r, 0, 5000);
    kh_assert(p, rc == 0 && r.status == 200, "%s: %s (status %d)", what, rc ? r.err : "ok",
              r.status);
    ht_resp_free(&r);
}

/* Opens n keep-alive connections, each with one request answered. */
static void open_idle(kh_proc *p, ht_conn **c, int n)
{
    for (int i = 0; i < n; i++) {
        c[i] = ht_connect(kh_port(p, 0));
        /* Answered before the next one connects: the reclaim list is kept
         * in the order connections went idle, not by their timestamps. */
        get_ok(p, c[i], ht_fmt("idle connection %d", i));
    }
}

static long count(const char *haystack, const char *needle)
{
    long n = 0;
    for (const char *s = haystack; (s = strstr(s, needle)) != NULL; s++)
        n++;
    return n;
}

Test(reclaim, idle_keepalive_makes_room, .timeout = 60, .fini = kh_cleanup_all)
{
    /* One worker: every connection is its own to reclaim. */
    kh_proc *p = start(1, 3, "on");
    ht_conn *c[3];
    open_idle(p, c, 3);

    /* A fourth client is served, and the least recently idle (the first)
     * connection is closed to make room for it. */
    ht_conn *d = ht_connect(kh_port(p, 0));
    get_ok(p, d, "the client over max_connections");
    kh_assert(p, ht_wait_closed(c[0], 5000) == 1, "the oldest idle connection is still open");
    kh_assert(p, kh_wait_log(p, "idle connection closed to admit a new one", 5000),
              "no debug line for the reclaim");
    /* The others were left alone. */
    get_ok(p, c[1], "second idle connection, afterwards");
    get_ok(p, c[2], "third idle connection, afterwards");

    /* Again: c[1] and c[2] went idle again after d did, so d goes. */
    ht_conn *e = ht_connect(kh_port(p, 0));
    get_ok(p, e, "a fifth client");
    kh_assert(p, ht_wait_closed(d, 5000) == 1, "the least recently idle connection is open");
    kh_assert(p, count(kh_stderr(p), "idle connection closed to admit") == 2,
              "expected two reclaims");
    /* And the metric counts them. */
    ht_send_str(e, "GET /dump HTTP/1.1\r\nHost: h\r\n\r\n");
    ht_resp r;
    ht_expect_response(p, e, &r, 0);
    kh_assert(p, r.status == 200 && strstr(r.body, "keel_connections_reclaimed_total{} 2"),
              "/dump: %d\n%s", r.status, r.body);
    ht_resp_free(&r);
    for (int i = 0; i < 3; i++)
        ht_close(c[i]);
    ht_close(d);
    ht_close(e);
    kh_stop(p);
}

/* Connections opened and left silent to fill max_connections are idle too
 * (nginx counts a connection waiting for its first request reusable):
 * the oldest makes room for a real client. */
Test(reclaim, silent_connections_make_room, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = start(1, 2, "on");
    /* Each accepted before the next connects: a is the oldest. */
    ht_conn *a = ht_connect(kh_port(p, 0));
    kh_assert(p, kh_wait_accepted(kh_port(p, 0), 5000), "a was not accepted");
    ht_conn *b = ht_connect(kh_port(p, 0));
    kh_assert(p, kh_wait_accepted(kh_port(p, 0), 5000), "b was not accepted");
    ht_conn *c = ht_connect(kh_port(p, 0));
    get_ok(p, c, "a client while two silent connections hold every slot");
    kh_assert(p, ht_wait_closed(a, 5000) == 1, "the oldest silent connection is still open");
    get_ok(p, b, "the other silent connection");
    ht_close(a);
    ht_close(b);
    ht_close(c);
    kh_stop(p);
}

/* A request whose head has come is never reclaimed: not while its
 * handler works, not while its body arrives (an unfinished head is, see
 * unfinished_heads_make_room). */
Test(reclaim, never_a_connection_mid_request, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = start(1, 2, "on");
    ht_conn *a = ht_connect(kh_port(p, 0));
    ht_conn *b = ht_connect(kh_port(p, 0));
    /* 3 s: still working when c comes even if this machine stalls us for
     * a second or two (with 1 s, a had been answered, and so idle). */
    ht_send_str(a, "GET /slow?ms=3000 HTTP/1.1\r\nHost: h\r\n\r\n");
    ht_send_str(b, "POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n12345");
    kh_assert(p, kh_wait_peer_read(a->fd, 5000) && kh_wait_peer_read(b->fd, 5000),
              "keel did not read the two requests");

    /* No idle or unfinished connection to close: the newcomer is refused
     * (closed without a byte), and the two requests finish. */
    ht_conn *c = ht_connect(kh_port(p, 0));
    kh_assert(p, ht_wait_closed(c, 5000) == 1, "the client over the limit was not refused");
    ht_close(c);
    ht_send_str(b, "67890");
    ht_resp r;
    ht_expect_response(p, a, &r, 0);
    kh_assert(p, r.status == 200 && strstr(r.body, "Hello after") != NULL, "a: %d %s", r.status,
              r.body);
    ht_resp_free(&r);
    ht_expect_response(p, b, &r, 0);
    kh_assert(p, r.status == 200 && strcmp(r.body, "1234567890") == 0, "b: %d %s", r.status,
              r.body);
    ht_resp_free(&r);
    kh_assert(p, strstr(kh_stderr(p), "connection closed to admit") == NULL,
              "a connection mid-request was reclaimed");
    ht_close(a);
    ht_close(b);
    kh_stop(p);
}

/* The single acceptor (Windows, macOS; reuseport = off here) hands the
 * client over the limit to a worker that has idle connections. */
Test(reclaim, through_the_acceptor, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = start(2, 3, "off");
    ht_conn *c[3];
    open_idle(p, c, 3);
    ht_conn *d = ht_connect(kh_port(p, 0));
    get_ok(p, d, "the client over max_connections");
    int closed = 0;
    for (int i = 0; i < 3; i++)
        closed += ht_wait_closed(c[i], i == 0 ? 3000 : 300) == 1;
    kh_assert(p, closed == 1, "%d idle connections closed, expected 1", closed);
    for (int i = 0; i < 3; i++)
        ht_close(c[i]);
    ht_close(d);
    kh_stop(p);
}

/* Issue 23: a head that has not arrived whole by its first read runs on a
 * deadline (keel_conn_set_deadline), and at max_connections such a
 * connection is closed, oldest first, when no idle one can be: clients
 * trickling heads can no longer hold every slot until header_timeout. */
Test(reclaim, unfinished_heads_make_room, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = start(1, 3, "on");
    int fds[3];
    for (int i = 0; i < 3; i++) {
        fds[i] = kh_connect("127.0.0.1", kh_port(p, 0));
        kh_assert(p, fds[i] >= 0, "connect %d", i);
        kh_assert(p, kh_send_str(fds[i], "GET / HTTP/1.1\r\nHo") == 0, "send %d", i);
        /* read (its deadline set) before the next one: fds[0] is the oldest */
        kh_assert(p, kh_wait_peer_read(fds[i], 5000), "keel did not read head %d", i);
    }
    ht_conn *d = ht_connect(kh_port(p, 0));
    get_ok(p, d, "the client over max_connections");
    kh_assert(p, kh_expect_eof(fds[0], NULL, 0, 3000) == 1, "the oldest unfinished head is open");
    kh_assert(p, kh_wait_log(p, "unfinished connection closed to admit a new one", 5000),
              "no debug line for the reclaim");
    /* Idle ones go before unfinished ones: d is idle now, and goes next. */
    ht_conn *e = ht_connect(kh_port(p, 0));
    get_ok(p, e, "a fifth client");
    kh_assert(p, ht_wait_closed(d, 5000) == 1, "the idle connection is still open");
    /* The younger unfinished heads are still there, and may finish. */
    kh_assert(p, kh_send_str(fds[2], "st: h\r\n\r\n") == 0, "finish the head");
    char buf[256];
    size_t n = kh_recv_n(fds[2], buf, sizeof buf, 12, 5000);
    kh_assert(p, n >= 12 && strncmp(buf, "HTTP/1.1 200", 12) == 0, "a finished head: %s", buf);
    for (int i = 0; i < 3; i++)
        close(fds[i]);
    ht_close(d);
    ht_close(e);
    kh_stop(p);
}

/* Found by the attack on issue 23's fixes: a connection whose last
 * response is complete but still leaving to a peer that does not read is
 * listed idle and cannot be closed; the scan looked only 16 entries down
 * the list, so 16 such peers at its head hid every connection behind
 * them, and each new client was refused while trickled heads kept their
 * slots. Such entries now move to the list's tail as the scan passes. */
Test(reclaim, peers_that_do_not_read_hide_nothing, .timeout = 90, .fini = kh_cleanup_all)
{
    /* deflatefix's /fix/body hands a body from memory over whole: the
     * exchange ends at once, its bytes queued behind a peer that reads
     * none of them (deflate itself is not loaded: nothing is compressed). */
    char conf[1024];
    snprintf(conf, sizeof conf,
             "[keel]\nlisten = 127.0.0.1:0 http1\nworkers = 1\nmax_connections = 20\n"
             "log_level = debug\nmodules = http1 deflatefix\n" KH_MODULE_PATH);
    kh_proc *p = kh_start(conf, NULL, 1, 10000);
    unsigned port = kh_port(p, 0);
    /* 17 peers (more than the 16 the scan looks at) that ask for 5 MB and
     * read none of it: the kernel takes 4 MB of each (tcp_wmem's maximum),
     * the rest waits in keel's queue. */
    int blockers[17];
    for (int i = 0; i < 17; i++) {
        blockers[i] = socket(AF_INET, SOCK_STREAM, 0);
        int small = 4096;
        setsockopt(blockers[i], SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_port = htons((uint16_t)port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        cr_assert(connect(blockers[i], (struct sockaddr *)&a, sizeof a) == 0);
        kh_send_str(blockers[i], "GET /fix/body?len=5000000 HTTP/1.1\r\nHost: h\r\n\r\n");
    }
    /* each request read, so its response handed over, most of it still queued */
    for (int i = 0; i < 17; i++)
        kh_assert(p, kh_wait_peer_read(blockers[i], 10000), "request %d not read", i);
    /* three trickled heads behind them */
    int heads[3];
    for (int i = 0; i < 3; i++) {
        heads[i] = kh_connect("127.0.0.1", port);
        kh_send_str(heads[i], "GET /fix/body HTTP/1.1\r\nHo");
    }
    for (int i = 0; i < 3; i++) /* 85 MB of bodies were made first */
        kh_assert(p, kh_wait_peer_read(heads[i], 10000), "head %d not read", i);
    /* max_connections is reached: a new client must still be served */
    for (int round = 0; round < 2; round++) {
        ht_conn *c = ht_connect(port);
        ht_send_str(c, "GET /fix/body?len=10 HTTP/1.1\r\nHost: h\r\n\r\n");
        ht_resp r;
        int rc = ht_read_response(c, &r, 0, 5000);
        kh_assert(p, rc == 0 && r.status == 200, "client %d over max_connections: %s", round,
                  rc ? r.err : "ok");
        ht_resp_free(&r);
        ht_close(c);
    }
    /* The room came from the unfinished heads: the first client's took
     * one; the second's took another, or the slot the first client gave
     * back when it closed, whichever keel saw first. */
    int heads_closed = 0;
    for (int i = 0; i < 3; i++)
        heads_closed += kh_expect_eof(heads[i], NULL, 0, i == 0 ? 2000 : 200) == 1;
    kh_assert(p, heads_closed >= 1 && heads_closed <= 2,
              "%d of the trickled heads were closed to make room", heads_closed);
    for (int i = 0; i < 17; i++)
        close(blockers[i]);
    for (int i = 0; i < 3; i++)
        close(heads[i]);
    kh_stop(p);
}
