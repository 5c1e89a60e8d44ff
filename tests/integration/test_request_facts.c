/* What a handler knows of its request's connection without holding the
 * connection (ABI 1.7: keel_request_peer_name, _peer_ip, _scheme,
 * _transport_name, _conn_id), over HTTP/1.1 and HTTP/2, behind the PROXY
 * protocol, and after the client has left: the abort callback of a
 * handler that never asked before must still be told who it was (the
 * socket is closed by then, and keel_request_conn is NULL). The facts
 * module (tests/modules/mod_facts.c) logs what it is told. */
#define _GNU_SOURCE
#include "test_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "h2_raw.h"

static kh_proc *start(const char *listen)
{
    char conf[1024];
    snprintf(conf, sizeof conf,
             "[keel]\nlisten = %s\nworkers = 1\nmodules = http1 h2 facts\n" KH_MODULE_PATH, listen);
    return kh_start(conf, NULL, 1, 10000);
}

static unsigned local_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    cr_assert(getsockname(fd, (struct sockaddr *)&ss, &len) == 0);
    if (ss.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

/* Waits for the log line that begins with `head` and returns the
 * connection id it names (0 if none came). */
static unsigned long long expect_facts(kh_proc *p, const char *head)
{
    kh_assert(p, kh_wait_log(p, head, 5000), "no log line '%s' in:\n%s", head, kh_stderr(p));
    const char *line = strstr(kh_stderr(p), head);
    const char *conn = strstr(line, " conn=");
    unsigned long long id = 0;
    kh_assert(p, conn != NULL && sscanf(conn, " conn=%llu", &id) == 1 && id != 0,
              "no connection id in: %.200s", line);
    return id;
}

/* Closes with a reset (SO_LINGER 0): a connection that only half-closed
 * could still be waiting for its answer (RFC 9112 9.6). */
static void reset(int fd)
{
    struct linger lg = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
}

/* The line a client of 127.0.0.1 over plain TCP gets, for "WHEN TARGET". */
static unsigned long long expect_local(kh_proc *p, const char *when_target, unsigned port)
{
    char head[256];
    snprintf(head, sizeof head,
             "facts %s: peer=127.0.0.1:%u ip=127.0.0.1 scheme=http transport=- conn=", when_target,
             port);
    return expect_facts(p, head);
}

static void http1_get(kh_proc *p, int fd, const char *target)
{
    char req[256];
    snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", target);
    kh_assert(p, kh_send_str(fd, req) == 0, "send");
}

/* ---- HTTP/1.1 --------------------------------------------------------------- */

/* A new connection to the listener; *port is its local (the client's) port. */
static int http1_open(kh_proc *p, unsigned *port)
{
    int fd = kh_connect("127.0.0.1", kh_port(p, 0));
    cr_assert(fd >= 0);
    *port = local_port(fd);
    return fd;
}

/* GET target and wait for the answer's first bytes. */
static void http1_answered(kh_proc *p, int fd, const char *target)
{
    char buf[512];
    http1_get(p, fd, target);
    kh_assert(p, kh_recv_n(fd, buf, sizeof buf, 1, 5000) > 0, "an answer to %s", target);
}

Test(request_facts, http1_peer_scheme_and_connection, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = start("127.0.0.1:0 http1");
    unsigned port;
    int fd = http1_open(p, &port);
    http1_answered(p, fd, "/facts");
    unsigned long long first = expect_local(p, "now /facts", port);
    kh_assert(p, kh_count_log(p, "request_conn=set") == 1, "keel_request_conn while alive");

    /* The next request of the connection: the same connection id. */
    http1_get(p, fd, "/facts?again");
    unsigned long long second = expect_local(p, "now /facts?again", port);
    kh_assert(p, second == first, "one connection, one id: %llu, %llu", first, second);

    /* Another connection: another id. */
    unsigned port2;
    int fd2 = http1_open(p, &port2);
    http1_get(p, fd2, "/facts");
    unsigned long long other = expect_local(p, "now /facts", port2);
    kh_assert(p, other != first, "two connections share the id %llu", first);
    close(fd);
    close(fd2);
}

Test(request_facts, http1_facts_outlive_the_connection, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = start("127.0.0.1:0 http1");
    unsigned port;
    int fd = http1_open(p, &port);
    http1_get(p, fd, "/facts/hold");
    kh_assert(p, kh_wait_log(p, "facts held", 5000), "the handler holds the request");
    reset(fd); /* the client leaves: keel's socket closes, then the exchange is aborted */
    expect_local(p, "after abort /facts/hold", port);
    kh_assert(p, kh_count_log(p, "request_conn=null") == 1, "keel_request_conn after the abort");
}

/* The handler answered at once but its offload finishes after the client
 * has gone: the request outlives its exchange and its connection without
 * an abort (the exchange had ended). */
Test(request_facts, facts_outlive_an_ended_exchange, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = start("127.0.0.1:0 http1");
    unsigned port;
    int fd = http1_open(p, &port);
    http1_answered(p, fd, "/facts/later?ms=300");
    reset(fd);
    expect_local(p, "offloaded /facts/later?ms=300", port);
}

Test(request_facts, http1_over_ipv6, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = start("[::1]:0 http1");
    int fd = kh_connect("::1", kh_port(p, 0));
    if (fd < 0)
        cr_skip_test("no IPv6 loopback");
    http1_get(p, fd, "/facts");
    char head[256];
    snprintf(head, sizeof head, "facts now /facts: peer=[::1]:%u ip=::1 scheme=http",
             local_port(fd));
    expect_facts(p, head);
    close(fd);
}

/* Behind a balancer: the client of the PROXY header, also after the
 * connection is gone. */
Test(request_facts, http1_behind_the_proxy_protocol, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = start("127.0.0.1:0 http1 proxy_protocol=on proxy_from=127.0.0.1");
    int fd = kh_connect("127.0.0.1", kh_port(p, 0));
    cr_assert(fd >= 0);
    kh_assert(p,
              kh_send_str(fd, "PROXY TCP4 203.0.113.7 127.0.0.1 5555 80\r\n"
                              "GET /facts HTTP/1.1\r\nHost: x\r\n\r\n"
                              "GET /facts/hold HTTP/1.1\r\nHost: x\r\n\r\n") == 0,
              "send");
    expect_facts(p, "facts now /facts: peer=203.0.113.7:5555 ip=203.0.113.7 scheme=http");
    kh_assert(p, kh_wait_log(p, "facts held", 5000), "the handler holds the request");
    close(fd);
    expect_facts(p,
                 "facts after abort /facts/hold: peer=203.0.113.7:5555 ip=203.0.113.7 scheme=http");
}

/* ---- HTTP/2 ------------------------------------------------------------------ */

static int h2_open(kh_proc *p)
{
    int fd = kh_connect("127.0.0.1", kh_port(p, 0));
    cr_assert(fd >= 0);
    char out[64];
    memcpy(out, H2_PREFACE, 24);
    size_t n = 24 + frame(out + 24, 0x4, 0, 0, NULL, 0); /* SETTINGS */
    kh_assert(p, kh_send(fd, out, n) == 0, "preface");
    return fd;
}

static void h2_get(kh_proc *p, int fd, unsigned sid, const char *path)
{
    char out[512];
    size_t n = get_headers(out, sid, path, "facts.test");
    kh_assert(p, kh_send(fd, out, n) == 0, "HEADERS");
}

/* An HTTP/2 connection whose stream 1 the handler holds unanswered. */
static int h2_hold(kh_proc *p, unsigned *port)
{
    int fd = h2_open(p);
    *port = local_port(fd);
    h2_get(p, fd, 1, "/facts/hold");
    kh_assert(p, kh_wait_log(p, "facts held", 5000), "the handler holds the request");
    return fd;
}

Test(request_facts, h2_streams_share_the_connections_facts, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = start("127.0.0.1:0 h2");
    int fd = h2_open(p);
    unsigned port = local_port(fd);
    h2_get(p, fd, 1, "/facts");
    kh_assert(p, await_headers(fd, 1, 5000) == 0x88, "stream 1's 200");
    h2_get(p, fd, 3, "/facts?b");
    kh_assert(p, await_headers(fd, 3, 5000) == 0x88, "stream 3's 200");
    unsigned long long first = expect_local(p, "now /facts", port);
    unsigned long long second = expect_local(p, "now /facts?b", port);
    kh_assert(p, second == first, "the streams of one connection: %llu, %llu", first, second);
    close(fd);
}

/* RST_STREAM: the stream is gone, the connection is not. */
Test(request_facts, h2_facts_outlive_a_reset_stream, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = start("127.0.0.1:0 h2");
    unsigned port;
    int fd = h2_hold(p, &port);
    char out[64];
    const char cancel[4] = {0, 0, 0, 0x8};
    size_t n = frame(out, 0x3, 0, 1, cancel, 4); /* RST_STREAM CANCEL */
    kh_assert(p, kh_send(fd, out, n) == 0, "RST_STREAM");
    expect_local(p, "after abort /facts/hold", port);
    /* The connection goes on. */
    h2_get(p, fd, 3, "/facts");
    kh_assert(p, await_headers(fd, 3, 5000) == 0x88, "stream 3's 200");
    close(fd);
}

/* The whole connection closes under a held stream. */
Test(request_facts, h2_facts_outlive_the_connection, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = start("127.0.0.1:0 h2");
    unsigned port;
    int fd = h2_hold(p, &port);
    close(fd);
    expect_local(p, "after abort /facts/hold", port);
    kh_assert(p, kh_count_log(p, "request_conn=null") == 1, "keel_request_conn after the abort");
}

/* keel_request_body_limit (ABI 1.8): the protocol's max_body, over HTTP/1.1
 * (as configured) and HTTP/2 (its default, 1m). */
Test(request_facts, body_limit_is_the_protocols_max_body, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = kh_start("[keel]\nlisten = 127.0.0.1:0 http1\nworkers = 1\n"
                          "modules = http1 h2 facts\n" KH_MODULE_PATH "[http1]\nmax_body = 64k\n",
                          NULL, 1, 10000);
    unsigned port;
    int fd = http1_open(p, &port);
    http1_answered(p, fd, "/facts");
    kh_assert(p, kh_wait_log(p, "facts body_limit=65536\n", 5000), "not http1's max_body");
    close(fd);
}
