/* The echo plugin driven over real sockets: round trips on many concurrent
 * connections across two workers, greeting, line limits, IPv6. */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define NCONN  200
#define NLINES 5

/* Parses "worker N stopped: A connections, R rejected" for worker n. */
static int stopped_line(kh_proc *p, int n, long *accepted, long *rejected)
{
    char needle[64];
    snprintf(needle, sizeof needle, "worker %d stopped: ", n);
    const char *s = strstr(kh_stderr(p), needle);
    if (!s)
        return 0;
    return sscanf(s + strlen(needle), "%ld connections, %ld rejected", accepted, rejected) == 2;
}

Test(echo, many_connections_two_workers, .timeout = 90, .fini = kh_cleanup_all)
{
    kh_proc *p = kh_start("[keel]\n"
                          "listen = 127.0.0.1:0 echo\n"
                          "workers = 2\n"
                          "modules = echo\n" KH_MODULE_PATH "max_connections = 1000\n",
                          NULL, 1, 10000);
    unsigned port = kh_port(p, 0);
    kh_assert(p, port > 0, "no port in the 'listening on' line");
    kh_assert(p, kh_count_log(p, "listening on ") == 1,
              "expected one 'listening on' line for one listener with 2 workers");

    static int fds[NCONN];
    static char expect[NCONN][512];
    static char got[NCONN][512];
    static size_t got_len[NCONN], expect_len[NCONN];

    for (int i = 0; i < NCONN; i++) {
        fds[i] = kh_connect("127.0.0.1", port);
        kh_assert(p, fds[i] >= 0, "connect %d failed: %s", i, strerror(errno));
    }

    /* Every line goes out in two writes split mid-line, interleaved across
     * connections, so the server sees partial lines and must keep them. A
     * blank line and a CRLF line check that bytes are echoed as they are. */
    for (int l = 0; l < NLINES; l++) {
        char line[NCONN][96];
        for (int i = 0; i < NCONN; i++) {
            if (l == 2)
                snprintf(line[i], sizeof line[i], "\n");
            else if (l == 3)
                snprintf(line[i], sizeof line[i], "conn %d crlf line\r\n", i);
            else
                snprintf(line[i], sizeof line[i], "conn %d line %d %s\n", i, l,
                         "the quick brown fox jumps over the lazy dog");
            size_t n = strlen(line[i]);
            memcpy(expect[i] + expect_len[i], line[i], n);
            expect_len[i] += n;
            size_t half = n / 2;
            kh_assert(p, kh_send(fds[i], line[i], half) == 0, "send failed on conn %d", i);
        }
        for (int i = 0; i < NCONN; i++) {
            size_t n = strlen(line[i]);
            size_t half = n / 2;
            kh_assert(p, kh_send(fds[i], line[i] + half, n - half) == 0, "send failed on conn %d",
                      i);
        }
    }

    /* Read everything back, all connections at once. */
    static struct pollfd pfds[NCONN];
    int pending = NCONN;
    long long deadline = kh_now_ms() + 20000;
    while (pending > 0 && kh_now_ms() < deadline) {
        int np = 0;
        int map[NCONN];
        for (int i = 0; i < NCONN; i++)
            if (got_len[i] < expect_len[i]) {
                pfds[np] = (struct pollfd){.fd = fds[i], .events = POLLIN};
                map[np++] = i;
            }
        int r = poll(pfds, (nfds_t)np, 200);
        if (r < 0 && errno == EINTR)
            continue;
        kh_assert(p, r >= 0, "poll: %s", strerror(errno));
        for (int k = 0; k < np; k++) {
            if (!(pfds[k].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            int i = map[k];
            ssize_t n = recv(fds[i], got[i] + got_len[i], expect_len[i] - got_len[i], MSG_DONTWAIT);
            if (n < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            kh_assert(p, n > 0, "conn %d closed after %zu of %zu bytes", i, got_len[i],
                      expect_len[i]);
            got_len[i] += (size_t)n;
            if (got_len[i] == expect_len[i])
                pending--;
        }
    }
    for (int i = 0; i < NCONN; i++) {
        kh_assert(p, got_len[i] == expect_len[i], "conn %d: got %zu of %zu bytes", i, got_len[i],
                  expect_len[i]);
        kh_assert(p, memcmp(got[i], expect[i], expect_len[i]) == 0,
                  "conn %d: echo differs:\n%.*s\nexpected:\n%.*s", i, (int)got_len[i], got[i],
                  (int)expect_len[i], expect[i]);
    }

    for (int i = 0; i < NCONN; i++)
        close(fds[i]);
    kh_signal(p, SIGTERM);
    int status = kh_wait_exit(p, 15000);
    kh_assert(p, status == 0, "exit status %d after SIGTERM", status);
    kh_assert(p, kh_count_log(p, "[info] shutting down") == 1, "no 'shutting down' line");

    /* SO_REUSEPORT hashes each connection's 4-tuple to a worker: with 200
     * connections, one worker getting none would be a bug, not bad luck. */
    long a0, r0, a1, r1;
    kh_assert(p, stopped_line(p, 0, &a0, &r0), "no 'worker 0 stopped' line");
    kh_assert(p, stopped_line(p, 1, &a1, &r1), "no 'worker 1 stopped' line");
    kh_assert(p, a0 + a1 == NCONN, "workers accepted %ld + %ld connections, expected %d", a0, a1,
              NCONN);
    kh_assert(p, a0 > 0 && a1 > 0, "one worker accepted nothing: %ld and %ld", a0, a1);
    kh_assert(p, r0 == 0 && r1 == 0, "connections were rejected: %ld and %ld", r0, r1);
    kh_stop(p);
}

Test(echo, greeting_and_round_trip, .timeout = 30, .fini = kh_cleanup_all)
{
    const char *args[] = {"--set", "echo.greeting=hello there", NULL};
    kh_proc *p = kh_start("[keel]\n"
                          "listen = 127.0.0.1:0 echo\n"
                          "workers = 1\n"
                          "modules = echo\n" KH_MODULE_PATH,
                          args, 1, 10000);
    int fd = kh_connect("127.0.0.1", kh_port(p, 0));
    kh_assert(p, fd >= 0, "connect failed");

    char buf[256];
    kh_recv_line(fd, buf, sizeof buf, 5000);
    kh_assert(p, strcmp(buf, "hello there\n") == 0, "greeting was '%s'", buf);

    /* A partial line is held back until its newline arrives. */
    kh_assert(p, kh_send_str(fd, "abc") == 0, "send");
    kh_assert(p, kh_recv_n(fd, buf, sizeof buf, 1, 300) == 0, "echoed a partial line: '%s'", buf);
    kh_assert(p, kh_send_str(fd, "def\nxyz\n") == 0, "send");
    const char *want = "abcdef\nxyz\n";
    kh_recv_n(fd, buf, sizeof buf, strlen(want), 5000);
    kh_assert(p, strcmp(buf, want) == 0, "echo was '%s'", buf);
    close(fd);
    kh_stop(p);
}

Test(echo, long_line_closes, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_proc *p = kh_start("[keel]\n"
                          "listen = 127.0.0.1:0 echo\n"
                          "workers = 1\n"
                          "modules = echo\n" KH_MODULE_PATH "[echo]\n"
                          "max_line = 64\n",
                          NULL, 1, 10000);
    unsigned port = kh_port(p, 0);
    char buf[512];

    /* A line of exactly max_line bytes is fine. */
    int fd = kh_connect("127.0.0.1", port);
    kh_assert(p, fd >= 0, "connect failed");
    char line[200];
    memset(line, 'a', 64);
    line[64] = '\n';
    line[65] = '\0';
    kh_assert(p, kh_send_str(fd, line) == 0, "send");
    kh_recv_n(fd, buf, sizeof buf, 65, 5000);
    kh_assert(p, strcmp(buf, line) == 0, "echo of a 64-byte line was '%s'", buf);

    /* A complete line that is too long: the lines before it are echoed,
     * then the error, then the connection closes. */
    memset(line, 'b', 100);
    line[100] = '\n';
    line[101] = '\0';
    kh_assert(p, kh_send_str(fd, "ok\n") == 0, "send");
    kh_assert(p, kh_send_str(fd, line) == 0, "send");
    size_t n = kh_recv_n(fd, buf, sizeof buf, 3 + 21, 5000);
    kh_assert(p, n == 24 && strcmp(buf, "ok\nerror: line too long\n") == 0, "got '%s'", buf);
    kh_assert(p, kh_expect_eof(fd, buf, sizeof buf, 5000) == 1,
              "connection not closed after the error (data: '%s')", buf);
    close(fd);

    /* A partial line that already exceeds the limit is refused too, without
     * waiting for its newline. */
    fd = kh_connect("127.0.0.1", port);
    kh_assert(p, fd >= 0, "connect failed");
    memset(line, 'c', 150);
    line[150] = '\0';
    kh_assert(p, kh_send_str(fd, line) == 0, "send");
    kh_recv_line(fd, buf, sizeof buf, 5000);
    kh_assert(p, strcmp(buf, "error: line too long\n") == 0, "got '%s'", buf);
    kh_assert(p, kh_expect_eof(fd, buf, sizeof buf, 5000) == 1, "not closed (data: '%s')", buf);
    close(fd);

    /* The server is still fine. */
    fd = kh_connect("127.0.0.1", port);
    kh_assert(p, fd >= 0 && kh_send_str(fd, "still here\n") == 0, "connect/send");
    kh_recv_line(fd, buf, sizeof buf, 5000);
    kh_assert(p, strcmp(buf, "still here\n") == 0, "got '%s'", buf);
    close(fd);
    kh_stop(p);
}

static int have_ipv6_loopback(void)
{
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    if (fd < 0)
        return 0;
    struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    int ok = bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return ok;
}

Test(echo, ipv6_listener, .timeout = 30, .fini = kh_cleanup_all)
{
    if (!have_ipv6_loopback())
        cr_skip_test("this machine has no IPv6 loopback (::1)");

    kh_proc *p = kh_start("[keel]\n"
                          "listen = [::1]:0 echo\n"
                          "listen = 127.0.0.1:0 echo\n"
                          "workers = 2\n"
                          "modules = echo\n" KH_MODULE_PATH,
                          NULL, 2, 10000);
    kh_assert(p, strstr(kh_stderr(p), "listening on [::1]:") != NULL,
              "no 'listening on [::1]:PORT' line");
    unsigned port6 = kh_port(p, 0), port4 = kh_port(p, 1);
    kh_assert(p, port6 > 0 && port4 > 0, "ports %u %u", port6, port4);

    char buf[64];
    int fd = kh_connect("::1", port6);
    kh_assert(p, fd >= 0, "connect to [::1]:%u failed", port6);
    kh_assert(p, kh_send_str(fd, "over six\n") == 0, "send");
    kh_recv_line(fd, buf, sizeof buf, 5000);
    kh_assert(p, strcmp(buf, "over six\n") == 0, "got '%s'", buf);
    close(fd);

    fd = kh_connect("127.0.0.1", port4);
    kh_assert(p, fd >= 0, "connect to 127.0.0.1:%u failed", port4);
    kh_assert(p, kh_send_str(fd, "over four\n") == 0, "send");
    kh_recv_line(fd, buf, sizeof buf, 5000);
    kh_assert(p, strcmp(buf, "over four\n") == 0, "got '%s'", buf);
    close(fd);
    kh_stop(p);
}
