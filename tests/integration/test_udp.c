/* UDP listeners and datagram protocols (ABI 1.9, docs/udp.md), driven
 * through the echo plugin's udp_echo over real sockets: round trips and the
 * peer's address on IPv4 and IPv6, receiving in batches (recvmmsg), sends
 * the core refuses, several workers, and the listen line's errors. */
#define _GNU_SOURCE
#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define UDP_CONFIG(listen, workers)                                                                \
    "[keel]\nlisten = " listen "\nworkers = " workers "\nmodules = echo\n" KH_MODULE_PATH

/* A UDP socket of `family` aimed at the listener (connect(2) on UDP only
 * fixes the peer: send and recv then need no address). */
static int udp_client(int family, unsigned port)
{
    int fd = socket(family, SOCK_DGRAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    socklen_t len;
    if (family == AF_INET6) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        in6->sin6_addr = in6addr_loopback;
        len = sizeof *in6;
    } else {
        struct sockaddr_in *in = (struct sockaddr_in *)&ss;
        in->sin_family = AF_INET;
        in->sin_port = htons((uint16_t)port);
        in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        len = sizeof *in;
    }
    if (connect(fd, (struct sockaddr *)&ss, len) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* One datagram within timeout_ms, NUL-terminated; its length or -1. */
static ssize_t recv_dgram(int fd, char *buf, size_t cap, int timeout_ms)
{
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    if (poll(&pfd, 1, timeout_ms) != 1)
        return -1;
    ssize_t n = recv(fd, buf, cap - 1, 0);
    if (n >= 0)
        buf[n] = '\0';
    return n;
}

/* Sends s and expects `want` back (the whole datagram). */
static void round_trip(kh_proc *p, int fd, const char *s, const char *want)
{
    char buf[2048];
    kh_assert(p, send(fd, s, strlen(s), 0) == (ssize_t)strlen(s), "send: %s", strerror(errno));
    ssize_t n = recv_dgram(fd, buf, sizeof buf, 5000);
    kh_assert(p, n >= 0, "no answer to '%s'", s);
    kh_assert(p, strcmp(buf, want) == 0, "'%s' answered '%s', expected '%s'", s, buf, want);
}

/* "whoami": the address and port the core handed the protocol are the
 * client socket's own. */
static void check_peer(kh_proc *p, int fd, const char *want_addr)
{
    struct sockaddr_storage me;
    socklen_t len = sizeof me;
    kh_assert(p, getsockname(fd, (struct sockaddr *)&me, &len) == 0, "getsockname");
    unsigned port = me.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&me)->sin6_port)
                                             : ntohs(((struct sockaddr_in *)&me)->sin_port);
    char want[128];
    snprintf(want, sizeof want, "peer %s %u", want_addr, port);
    round_trip(p, fd, "whoami", want);
}

Test(udp, echo_and_peer_ipv4, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = kh_start(UDP_CONFIG("127.0.0.1:0 udp_echo udp", "2"), NULL, 1, 10000);
    unsigned port = kh_port(p, 0);
    kh_assert(p, port > 0, "no port");
    kh_assert(p, kh_count_log(p, "(udp_echo, udp)") == 1, "the listening line names udp");
    int fd = udp_client(AF_INET, port);
    kh_assert(p, fd >= 0, "udp client");
    round_trip(p, fd, "hello", "hello");
    round_trip(p, fd, "", "");
    check_peer(p, fd, "127.0.0.1");
    close(fd);
    /* Clients spread over both workers' sockets (SO_REUSEPORT hashes the
     * peer): each gets its own answers. */
    for (int i = 0; i < 16; i++) {
        char msg[32];
        snprintf(msg, sizeof msg, "client %d", i);
        fd = udp_client(AF_INET, port);
        kh_assert(p, fd >= 0, "udp client %d", i);
        round_trip(p, fd, msg, msg);
        close(fd);
    }
    kh_stop(p);
}

Test(udp, echo_and_peer_ipv6, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = kh_start(UDP_CONFIG("[::1]:0 udp_echo udp", "1"), NULL, 1, 10000);
    unsigned port = kh_port(p, 0);
    kh_assert(p, port > 0, "no port");
    int fd = udp_client(AF_INET6, port);
    kh_assert(p, fd >= 0, "udp client");
    round_trip(p, fd, "over six", "over six");
    check_peer(p, fd, "0:0:0:0:0:0:0:1");
    close(fd);
    kh_stop(p);
}

/* While the worker is busy, datagrams wait in the kernel; once it reads
 * again one receive takes several (recvmmsg), at most `batch`. Each is
 * answered. */
Test(udp, receives_in_batches, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = kh_start(UDP_CONFIG("127.0.0.1:0 udp_echo udp batch=8", "1"), NULL, 1, 10000);
    unsigned port = kh_port(p, 0);
    int fd = udp_client(AF_INET, port);
    kh_assert(p, fd >= 0, "udp client");
    int rcvbuf = 4 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    kh_assert(p, send(fd, "stall 300", 9, 0) == 9, "send");
    enum { N = 40 };
    for (int i = 0; i < N; i++) {
        char msg[16];
        int n = snprintf(msg, sizeof msg, "d%d", i);
        kh_assert(p, send(fd, msg, (size_t)n, 0) == n, "send %d", i);
    }
    char buf[256];
    int answers = 0, stalled = 0;
    for (int i = 0; i < N + 1; i++) {
        kh_assert(p, recv_dgram(fd, buf, sizeof buf, 5000) >= 0, "answer %d of %d missing", i,
                  N + 1);
        if (strcmp(buf, "stalled") == 0)
            stalled = 1;
        else
            answers++;
    }
    kh_assert(p, stalled && answers == N, "stalled %d, %d echoes", stalled, answers);
    kh_assert(p, send(fd, "stats", 5, 0) == 5, "send");
    kh_assert(p, recv_dgram(fd, buf, sizeof buf, 5000) >= 0, "no stats");
    unsigned long long batches = 0, datagrams = 0, max_batch = 0;
    kh_assert(p,
              sscanf(buf, "batches=%llu datagrams=%llu max_batch=%llu", &batches, &datagrams,
                     &max_batch) == 3,
              "stats: '%s'", buf);
    kh_assert(p, datagrams == N + 2, "%llu datagrams, expected %d", datagrams, N + 2);
    kh_assert(p, max_batch > 1 && max_batch <= 8, "max_batch %llu: not batched, or over batch=8",
              max_batch);
    close(fd);
    kh_stop(p);
}

/* keel_dgram_send refuses what no datagram can carry, and sends the rest. */
Test(udp, send_refuses_oversized, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = kh_start(UDP_CONFIG("127.0.0.1:0 udp_echo udp", "1"), NULL, 1, 10000);
    int fd = udp_client(AF_INET, kh_port(p, 0));
    kh_assert(p, fd >= 0, "udp client");
    round_trip(p, fd, "flood 2 65508", "flooded ok=0 limit=0 inval=2 other=0");
    static char big[65536];
    kh_assert(p, send(fd, "flood 1 65507", 13, 0) == 13, "send");
    ssize_t n = recv_dgram(fd, big, sizeof big, 5000);
    kh_assert(p, n == 65507, "the largest datagram came back with %zd bytes", n);
    kh_assert(p,
              recv_dgram(fd, big, sizeof big, 5000) >= 0 &&
                  strcmp(big, "flooded ok=1 limit=0 inval=0 other=0") == 0,
              "flood result: '%s'", big);
    close(fd);
    kh_stop(p);
}

#ifdef KEEL_UDPFAULT_SO
/* The send queue and its bound: the first datagram the socket cannot take
 * (tests/udpfault makes sendmsg say EAGAIN once) is queued, the ones after
 * it queue behind it (in order) up to send_queue bytes, the rest are
 * refused with KEEL_ERR_LIMIT and counted; what was queued arrives. */
Test(udp, send_queue_is_bounded, .timeout = 30, .fini = kh_cleanup_all)
{
    setenv("LD_PRELOAD", KEEL_UDPFAULT_SO, 1);
    setenv("KEEL_UDPFAULT_EAGAIN", "1", 1);
    /* Under ASan the interposer comes before libasan in the load order. */
    const char *asan = getenv("ASAN_OPTIONS");
    char opts[512];
    snprintf(opts, sizeof opts, "%s%sverify_asan_link_order=0", asan ? asan : "",
             asan && *asan ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
    kh_proc *p =
        kh_start(UDP_CONFIG("127.0.0.1:0 udp_echo udp send_queue=10500", "1"), NULL, 1, 10000);
    unsetenv("LD_PRELOAD");
    int fd = udp_client(AF_INET, kh_port(p, 0));
    kh_assert(p, fd >= 0, "udp client");
    int rcvbuf = 1 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    kh_assert(p, send(fd, "flood 100 1000", 14, 0) == 14, "send");
    /* 10 x 1000 bytes fit in 10500; the result line (37 bytes) too. */
    static char buf[2048];
    int floods = 0;
    for (;;) {
        ssize_t n = recv_dgram(fd, buf, sizeof buf, 5000);
        kh_assert(p, n >= 0, "missing datagrams: %d of 10 then the result", floods);
        if (buf[0] != 'x')
            break;
        kh_assert(p, n == 1000, "a flood datagram of %zd bytes", n);
        floods++;
    }
    kh_assert(p, strcmp(buf, "flooded ok=10 limit=90 inval=0 other=0") == 0, "result: '%s'", buf);
    kh_assert(p, floods == 10, "%d queued datagrams arrived, expected 10", floods);
    close(fd);
    kh_stop(p);
}
#endif

Test(udp, listen_line_errors, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_expect_refused(UDP_CONFIG("127.0.0.1:0 nosuch udp", "1"), 2,
                      "unknown datagram protocol 'nosuch'", "unknown protocol");
    kh_expect_refused(UDP_CONFIG("127.0.0.1:0 udp_echo udp batch=21", "1"), 2, "batch",
                      "batch over 20");
    kh_expect_refused(
        UDP_CONFIG("127.0.0.1:0 udp_echo udp proxy_protocol=on proxy_from=127.0.0.1", "1"), 2,
        "'proxy_protocol' does not apply to a udp listener", "proxy protocol");
    /* A stream protocol's name is not a datagram protocol's. */
    kh_expect_refused(UDP_CONFIG("127.0.0.1:0 echo udp", "1"), 2,
                      "unknown datagram protocol 'echo'", "stream protocol");
}
