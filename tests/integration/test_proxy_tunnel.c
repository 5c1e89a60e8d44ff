/* Tunnels: an Upgrade (WebSocket) passed through to the upstream, its 101
 * and then bytes both ways, closed when idle; and the forward proxy's
 * CONNECT (curl -p -x) with its allow-lists: client addresses, ports,
 * host patterns, private ranges (loopback is refused unless
 * connect_private = on, which these tests must set to reach 127.0.0.1),
 * 403 / 501 / 502 answers. */
#define _GNU_SOURCE
#include "test_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>

static unsigned dead_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    cr_assert(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
              getsockname(fd, (struct sockaddr *)&sa, &len) == 0);
    close(fd);
    return ntohs(sa.sin_port);
}

/* Sends an Upgrade request for /ws and reads the 101 head into head. */
static int open_ws(kh_proc *p, char *head, size_t cap)
{
    int fd = kh_connect("127.0.0.1", kh_port(p, 0));
    kh_assert(p, fd >= 0, "connect");
    kh_send_str(fd,
                "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n");
    size_t n = 0;
    while (n + 1 < cap && (n < 4 || memcmp(head + n - 4, "\r\n\r\n", 4) != 0)) {
        size_t got = kh_recv_n(fd, head + n, cap - n, 1, 5000);
        if (got == 0)
            break;
        n += got;
    }
    head[n] = '\0';
    return fd;
}

Test(proxy_tunnel, websocket_pass_through, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *up = px_upstream();
    char section[256], head[2048];
    snprintf(section, sizeof section, "upstream = py 127.0.0.1:%u\npass = / py\n", kh_port(up, 0));
    kh_proc *p = px_keel(section, 0);
    int fd = open_ws(p, head, sizeof head);
    kh_assert(p, strncmp(head, "HTTP/1.1 101 ", 13) == 0, "101: %s", head);
    kh_assert(p, strcasestr(head, "Upgrade: websocket\r\n") != NULL, "Upgrade: %s", head);
    kh_assert(p, strcasestr(head, "Connection: upgrade\r\n") != NULL, "Connection: %s", head);
    kh_assert(p, strstr(head, "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n") != NULL,
              "the upstream's accept: %s", head);
    /* 1 MiB each way through the relay (the upstream echoes). */
    size_t total = 1 << 20;
    char *out = malloc(total), *in = malloc(total + 1);
    cr_assert(out && in);
    for (size_t i = 0; i < total; i++)
        out[i] = (char)(i * 7);
    kh_assert(p, kh_send(fd, out, total) == 0, "send");
    size_t got = kh_recv_n(fd, in, total + 1, total, 15000);
    kh_assert(p, got == total && memcmp(in, out, total) == 0, "echo of 1 MiB: %zu bytes", got);
    free(out);
    free(in);
    /* The upstream ends: the client's side closes too. */
    shutdown(fd, SHUT_WR);
    kh_assert(p, kh_expect_eof(fd, NULL, 0, 5000) == 1, "closed after the upstream's EOF");
    close(fd);
    px_stop(p);
}

Test(proxy_tunnel, websocket_idle_timeout, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *up = px_upstream();
    char section[256], head[2048];
    snprintf(section, sizeof section,
             "upstream = py 127.0.0.1:%u\npass = / py\ntunnel_idle_timeout = 500ms\n",
             kh_port(up, 0));
    kh_proc *p = px_keel(section, 0);
    int fd = open_ws(p, head, sizeof head);
    kh_assert(p, strncmp(head, "HTTP/1.1 101 ", 13) == 0, "101: %s", head);
    long long t0 = kh_now_ms();
    kh_assert(p, kh_expect_eof(fd, NULL, 0, 5000) == 1, "idle tunnel closed");
    long long took = kh_now_ms() - t0;
    kh_assert(p, took >= 400 && took < 3000, "closed after %lld ms", took);
    close(fd);
    px_stop(p);
}

Test(proxy_tunnel, websocket_off_is_plain_request, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *up = px_upstream();
    char section[256], head[2048];
    snprintf(section, sizeof section, "upstream = py 127.0.0.1:%u\npass = / py websocket=off\n",
             kh_port(up, 0));
    kh_proc *p = px_keel(section, 0);
    /* Upgrade is hop-by-hop: the upstream sees a plain GET, answers 101
     * nobody asked for, and that is an invalid response: 502. */
    int fd = open_ws(p, head, sizeof head);
    kh_assert(p, strncmp(head, "HTTP/1.1 502 ", 13) == 0, "502: %s", head);
    close(fd);
    px_stop(p);
}

/* ---- CONNECT ---------------------------------------------------------------------- */

static kh_proc *forward_proxy(kh_proc **hello, const char *policy)
{
    *hello = px_hello();
    char section[512];
    snprintf(section, sizeof section, "connect = on\nconnect_ports = %u\n%s", kh_port(*hello, 0),
             policy);
    return px_keel(section, 1);
}

static ht_run_result curl_via(kh_proc *p, kh_proc *hello)
{
    char proxy[64], url[64];
    snprintf(proxy, sizeof proxy, "http://127.0.0.1:%u", kh_port(p, 1));
    snprintf(url, sizeof url, "http://127.0.0.1:%u/", kh_port(hello, 0));
    const char *args[] = {"-p", "-x", proxy, url, NULL};
    return px_curl(args);
}

Test(proxy_tunnel, connect_with_curl, .timeout = 60, .fini = kh_cleanup_all)
{
    px_need_curl();
    kh_proc *hello, *p = forward_proxy(&hello, "connect_private = on\n");
    ht_run_result rr = curl_via(p, hello);
    kh_assert(p, rr.status == 0 && strcmp(rr.out, "Hello, World!") == 0,
              "through the tunnel" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    ht_run_free(&rr);
    kh_assert(p, kh_wait_log(p, ": 200", 2000), "logged");
    px_stop(p);
}

static int connect_status(kh_proc *p, const char *target)
{
    int fd = kh_connect("127.0.0.1", kh_port(p, 1));
    kh_assert(p, fd >= 0, "connect");
    char req[256], buf[512];
    snprintf(req, sizeof req, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target);
    kh_send_str(fd, req);
    size_t n = kh_recv_n(fd, buf, sizeof buf, 12, 5000);
    close(fd);
    int code = 0;
    if (n >= 12)
        sscanf(buf, "HTTP/1.1 %d", &code);
    return code;
}

Test(proxy_tunnel, connect_refusals, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *hello, *p = forward_proxy(&hello, "");
    char target[64];
    snprintf(target, sizeof target, "127.0.0.1:%u", kh_port(hello, 0));
    /* loopback is private: refused unless connect_private = on */
    int s = connect_status(p, target);
    kh_assert(p, s == 403, "private destination: %d", s);
    /* a port not listed */
    s = connect_status(p, "127.0.0.1:1");
    kh_assert(p, s == 403, "port not allowed: %d", s);
    /* a name resolving to loopback is refused after resolution */
    snprintf(target, sizeof target, "localhost:%u", kh_port(hello, 0));
    s = connect_status(p, target);
    kh_assert(p, s == 403, "a name for a private address: %d", s);
    kh_stop(p);
    kh_stop(hello);

    /* a client not in connect_clients */
    p = forward_proxy(&hello, "connect_private = on\nconnect_clients = 10.0.0.0/8\n");
    snprintf(target, sizeof target, "127.0.0.1:%u", kh_port(hello, 0));
    s = connect_status(p, target);
    kh_assert(p, s == 403, "client not allowed: %d", s);
    kh_stop(p);
    kh_stop(hello);

    /* a host pattern that does not match */
    p = forward_proxy(&hello, "connect_private = on\nconnect_hosts = *.example.com\n");
    snprintf(target, sizeof target, "127.0.0.1:%u", kh_port(hello, 0));
    s = connect_status(p, target);
    kh_assert(p, s == 403, "host not allowed: %d", s);
    px_stop(p);
}

Test(proxy_tunnel, connect_off_and_failures, .timeout = 60, .fini = kh_cleanup_all)
{
    /* off by default: 501, as http1 answers it */
    kh_proc *p = px_keel("", 1);
    int s = connect_status(p, "127.0.0.1:443");
    kh_assert(p, s == 501, "CONNECT off: %d", s);
    kh_stop(p);
    /* nothing listening there: 502 */
    unsigned dead = dead_port();
    char section[256], target[64];
    snprintf(section, sizeof section, "connect = on\nconnect_ports = *\nconnect_private = on\n");
    p = px_keel(section, 1);
    snprintf(target, sizeof target, "127.0.0.1:%u", dead);
    s = connect_status(p, target);
    kh_assert(p, s == 502, "refused destination: %d", s);
    /* malformed target */
    s = connect_status(p, "no-port-here");
    kh_assert(p, s == 403 || s == 400, "bad target: %d", s);
    px_stop(p);
}

/* Anything but CONNECT on the forward-proxy listener is http1's. */
Test(proxy_tunnel, proxy_listener_serves_http, .timeout = 60, .fini = kh_cleanup_all)
{
    px_need_curl();
    kh_proc *hello = px_hello();
    char section[256], url[128];
    snprintf(section, sizeof section, "upstream = hello 127.0.0.1:%u\npass = / hello\n",
             kh_port(hello, 0));
    kh_proc *p = px_keel(section, 1);
    ht_run_result rr = px_get(px_url(url, sizeof url, p, 1, "/"));
    kh_assert(p, px_status(&rr) == 200 && strcmp(px_body(&rr), "Hello, World!") == 0,
              "GET on the proxy listener" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    ht_run_free(&rr);
    px_stop(p);
}

/* A socket listening on 127.0.0.1 (non-blocking), to count the connections
 * made to it. */
static int counting_listener(unsigned *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    cr_assert(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(fd, 16) == 0 &&
              getsockname(fd, (struct sockaddr *)&sa, &len) == 0);
    *port = ntohs(sa.sin_port);
    return fd;
}

static int accepted_count(int lfd)
{
    int n = 0, fd;
    while ((fd = accept(lfd, NULL, NULL)) >= 0) {
        close(fd);
        n++;
    }
    return n;
}

/* The destination is checked on every address it resolves to before
 * anything connects (issue 23, section 3): a refused one is a 403 whether
 * or not something listens there, and no connection reaches it. Checking
 * after connecting made a port scanner of the proxy (403 open, 502
 * closed) and touched internal hosts. Names that parse as addresses only
 * for the resolver (127.1, 2130706433) are names here. A literal with a
 * leading zero is octal to the resolver (inet_aton): 0177.0.0.1 was
 * checked as 177.0.0.1 and then connected to by its spelling, which the
 * resolver read as 127.0.0.1. */
Test(proxy_tunnel, connect_checks_before_connecting, .timeout = 60, .fini = kh_cleanup_all)
{
    unsigned open_port, closed_port = dead_port();
    int lfd = counting_listener(&open_port);
    kh_proc *p = px_keel("connect = on\nconnect_ports = *\n", 1);
    const char *hosts[] = {"127.0.0.1", "[::ffff:127.0.0.1]", "localhost",
                           "127.1",     "2130706433",         "0177.0.0.1"};
    for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++) {
        unsigned ports[2] = {open_port, closed_port};
        for (int k = 0; k < 2; k++) {
            char target[128];
            snprintf(target, sizeof target, "%s:%u", hosts[i], ports[k]);
            int s = connect_status(p, target);
            kh_assert(p, s == 403, "%s (%s): %d", target, k == 0 ? "listening" : "closed", s);
        }
    }
    /* Nothing may arrive: a wait for what must not happen is a time. A
     * connection keel made would be in the queue by now. */
    kh_sleep_ms(200);
    int n = accepted_count(lfd);
    kh_assert(p, n == 0, "%d connection(s) reached the refused destination", n);
    close(lfd);
    px_stop(p);
}

/* With connect_private = on, a name is resolved once and connected to by
 * the addresses checked (where "localhost" gives ::1 first, where nothing
 * listens, then 127.0.0.1). Only names the hosts file or the resolver's
 * own parsing answer: no query leaves the machine. */
Test(proxy_tunnel, connect_by_name, .timeout = 60, .fini = kh_cleanup_all)
{
    px_need_curl();
    kh_proc *hello, *p = forward_proxy(&hello, "connect_private = on\n");
    char proxy[64], url[64];
    snprintf(proxy, sizeof proxy, "http://127.0.0.1:%u", kh_port(p, 1));
    snprintf(url, sizeof url, "http://localhost:%u/", kh_port(hello, 0));
    const char *args[] = {"-p", "-x", proxy, url, NULL};
    ht_run_result rr = px_curl(args);
    kh_assert(p, rr.status == 0 && strcmp(rr.out, "Hello, World!") == 0,
              "through the tunnel" PX_SHOW(rr), PX_SHOW_ARGS(rr));
    ht_run_free(&rr);
    px_stop(p);
}

/* The CONNECT head has connect_header_timeout from the connection's start,
 * which no byte renews (issue 23, section 4): it was the read timeout,
 * renewed by every byte, so a client sending its head a byte at a time held
 * the connection for ever. */
Test(proxy_tunnel, connect_head_deadline, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = px_keel("connect = on\nconnect_header_timeout = 1s\n", 1);
    int fd = kh_connect("127.0.0.1", kh_port(p, 1));
    kh_assert(p, fd >= 0, "connect");
    const char *head = "CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\nX-Slow: "
                       "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    long long t0 = kh_now_ms();
    char buf[256] = "";
    size_t got = 0;
    /* A byte every 100 ms: 4 s of head, far past the deadline. */
    for (size_t i = 0; head[i] != '\0' && kh_now_ms() - t0 < 4000; i++) {
        if (send(fd, head + i, 1, MSG_NOSIGNAL) != 1)
            break;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, 100) > 0) {
            ssize_t n = recv(fd, buf, sizeof buf - 1, 0);
            got = n > 0 ? (size_t)n : 0;
            break;
        }
    }
    long long took = kh_now_ms() - t0;
    buf[got] = '\0';
    kh_assert(p, got >= 12 && strncmp(buf, "HTTP/1.1 408", 12) == 0,
              "408 while the head trickled: '%s' after %lld ms", buf, took);
    kh_assert(p, took >= 800 && took < 2500, "answered after %lld ms (deadline 1 s)", took);
    kh_assert(p, kh_expect_eof(fd, NULL, 0, 3000) == 1, "closed after the 408");
    close(fd);
    px_stop(p);
}
