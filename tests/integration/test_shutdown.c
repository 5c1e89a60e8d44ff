/* Graceful shutdown: in-flight work finishes, idle connections close, the
 * deadline is enforced, the exit status is 0. */
#define _GNU_SOURCE
#include "harness.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Timing note: CI machines and VMs can stall a process for a few hundred
 * milliseconds, so the checks below compare orders of events and use wide
 * margins rather than tight absolute times. */

/* echo's `delay` keeps an answer in flight for a while (reading paused, a
 * timer pending): exactly what a graceful shutdown must wait for. */
static void in_flight_echo_finishes(int sig)
{
    kh_proc *p = kh_start("[keel]\n"
                          "listen = 127.0.0.1:0 echo\n"
                          "workers = 2\n"
                          "shutdown_timeout = 10s\n"
                          "modules = echo\n" KH_MODULE_PATH "[echo]\n"
                          "delay = 1500ms\n",
                          NULL, 1, 10000);
    unsigned port = kh_port(p, 0);
    char buf[256];

    int busy = kh_connect("127.0.0.1", port);
    int idle = kh_connect("127.0.0.1", port);
    kh_assert(p, busy >= 0 && idle >= 0, "connect failed");
    long long sent = kh_now_ms();
    kh_assert(p, kh_send_str(busy, "in flight\n") == 0, "send");
    /* The worker has read the line (and started its delay in the same
     * callback), and the idle connection is keel's, not the kernel's. */
    kh_assert(p, kh_wait_peer_read(busy, 5000), "keel did not read the line");
    kh_assert(p, kh_wait_accepted(port, 5000), "keel did not accept the idle connection");
    kh_signal(p, sig);

    /* The idle connection is closed at once, without waiting for the busy
     * one... */
    int r = kh_expect_eof(idle, buf, sizeof buf, 5000);
    long long idle_closed = kh_now_ms();
    kh_assert(p, r == 1, "idle connection at shutdown: %s", r == 0 ? "left open" : "got data");

    /* ...while the busy one still gets its answer (after its delay and after
     * the idle one was closed), then EOF. */
    kh_recv_line(busy, buf, sizeof buf, 5000);
    long long answered = kh_now_ms();
    kh_assert(p, strcmp(buf, "in flight\n") == 0, "the in-flight echo was lost: got '%s'", buf);
    kh_assert(p, answered - sent >= 1400, "the echo came after %lld ms, before its 1.5 s delay",
              answered - sent);
    kh_assert(p, idle_closed <= answered,
              "the idle connection was closed only after the busy one answered (it should not "
              "wait for it)");
    r = kh_expect_eof(busy, buf, sizeof buf, 5000);
    kh_assert(p, r == 1, "after its echo the connection was %s",
              r == 0 ? "left open" : "sent more data");

    int status = kh_wait_exit(p, 10000);
    kh_assert(p, status == 0, "exit status %d after signal %d", status, sig);
    kh_assert(p, kh_count_log(p, "[info] shutting down") == 1, "no '[info] shutting down' line");
    kh_assert(p, kh_count_log(p, " stopped: ") == 2, "expected a 'stopped' line per worker");
    close(busy);
    close(idle);
    kh_stop(p);
}

Test(shutdown, sigterm_lets_in_flight_work_finish, .timeout = 60, .fini = kh_cleanup_all)
{
    in_flight_echo_finishes(SIGTERM);
}

Test(shutdown, sigint_lets_in_flight_work_finish, .timeout = 60, .fini = kh_cleanup_all)
{
    in_flight_echo_finishes(SIGINT);
}

Test(shutdown, deadline_aborts_slow_work, .timeout = 60, .fini = kh_cleanup_all)
{
    /* The echo would take 30 s; the shutdown deadline is 300 ms. */
    kh_proc *p = kh_start("[keel]\n"
                          "listen = 127.0.0.1:0 echo\n"
                          "workers = 1\n"
                          "shutdown_timeout = 300ms\n"
                          "modules = echo\n" KH_MODULE_PATH "[echo]\n"
                          "delay = 30s\n",
                          NULL, 1, 10000);
    char buf[256];
    int fd = kh_connect("127.0.0.1", kh_port(p, 0));
    kh_assert(p, fd >= 0, "connect failed");
    kh_assert(p, kh_send_str(fd, "never answered\n") == 0, "send");
    kh_assert(p, kh_wait_peer_read(fd, 5000), "keel did not read the line");

    long long t0 = kh_now_ms();
    kh_signal(p, SIGTERM);
    int r = kh_expect_eof(fd, buf, sizeof buf, 5000);
    kh_assert(p, r == 1, "at the deadline the connection was %s",
              r == 0 ? "left open" : "answered");
    int status = kh_wait_exit(p, 5000);
    long long took = kh_now_ms() - t0;
    kh_assert(p, status == 0, "exit status %d", status);
    kh_assert(p, took >= 250 && took < 3000, "shutdown took %lld ms with a 300 ms deadline", took);
    close(fd);
    kh_stop(p);
}

Test(shutdown, refuses_new_connections, .timeout = 60, .fini = kh_cleanup_all)
{
    /* While a slow echo holds the shutdown open, the listener is closed. */
    kh_proc *p = kh_start("[keel]\n"
                          "listen = 127.0.0.1:0 echo\n"
                          "workers = 1\n"
                          "modules = echo\n" KH_MODULE_PATH "[echo]\n"
                          "delay = 1s\n",
                          NULL, 1, 10000);
    unsigned port = kh_port(p, 0);
    char buf[256];
    int fd = kh_connect("127.0.0.1", port);
    kh_assert(p, fd >= 0 && kh_send_str(fd, "slow\n") == 0, "connect/send");
    kh_assert(p, kh_wait_peer_read(fd, 5000), "keel did not read the line"); /* delay begun */
    kh_signal(p, SIGTERM);
    kh_assert(p, kh_wait_log(p, "shutting down", 5000), "no 'shutting down' line");
    kh_assert(p, kh_wait_refused(port, 5000), "the listener still accepts during shutdown");

    /* Either the connect is refused, or (if the kernel had already queued
     * it) it is closed without being served. */
    int late = kh_connect("127.0.0.1", port);
    if (late >= 0) {
        kh_send_str(late, "late\n");
        int r = kh_expect_eof(late, buf, sizeof buf, 3000);
        kh_assert(p, r == 1, "a connection made during shutdown was %s",
                  r == 0 ? "left open" : "served");
        close(late);
    }

    kh_recv_line(fd, buf, sizeof buf, 5000);
    kh_assert(p, strcmp(buf, "slow\n") == 0, "the in-flight echo was lost: '%s'", buf);
    int status = kh_wait_exit(p, 10000);
    kh_assert(p, status == 0, "exit status %d", status);
    close(fd);
    kh_stop(p);
}
