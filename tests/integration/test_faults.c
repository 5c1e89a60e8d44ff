/* test_faults.c — faults from outside keel's code (issue 13, "Fault
 * injection"; allocation failures are test_failalloc.c's):
 *
 *   - accept failing with EMFILE: keel's descriptor limit is lowered while
 *     it runs (prlimit on the child); the connections it holds keep being
 *     served, the ones over the limit wait in the queue without a crash
 *     (none is dropped), and are served once descriptors are free again
 *     (test_descriptors.c checks the log line, the metric and the 503);
 *   - a module whose start fails on one worker only: start-up stops with a
 *     message naming that worker, every worker whose modules started stops
 *     them again, keel exits with an error and without a sanitizer report.
 */
#define _GNU_SOURCE /* prlimit */
#include "harness.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/resource.h>

/* Reads the answer to a GET /hello/NAME sent on fd: 1 if a 200 with its
 * greeting came within 5 s. */
static int hello_answered(int fd, const char *name)
{
    char resp[2048], want[64];
    int wl = snprintf(want, sizeof want, "Hello, %s!", name);
    size_t n = 0;
    long long end = kh_now_ms() + 5000;
    while (kh_now_ms() < end && n + 1 < sizeof resp) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t r = recv(fd, resp + n, sizeof resp - 1 - n, 0);
        if (r <= 0)
            break;
        n += (size_t)r;
        resp[n] = '\0';
        if (strstr(resp, want) != NULL)
            break;
    }
    resp[n] = '\0';
    return strncmp(resp, "HTTP/1.1 200 ", 13) == 0 && n >= (size_t)wl && strstr(resp, want);
}

/* One keep-alive request on an open connection: 1 if answered 200. */
static int hello_on(int fd, const char *name)
{
    char req[128];
    snprintf(req, sizeof req, "GET /hello/%s HTTP/1.1\r\nHost: x\r\n\r\n", name);
    return kh_send_str(fd, req) == 0 && hello_answered(fd, name);
}

static int sanitizer_report(const char *err)
{
    return strstr(err, "AddressSanitizer") || strstr(err, "LeakSanitizer") ||
           strstr(err, "runtime error:");
}

/* 1 if a new connection to port is served. */
static int served_anew(unsigned port)
{
    int fd = kh_connect("127.0.0.1", port);
    if (fd < 0)
        return 0;
    int served = hello_on(fd, "again");
    close(fd);
    return served;
}

Test(faults, accept_emfile, .timeout = 60)
{
#ifndef __linux__
    cr_skip_test("prlimit on another process is Linux only");
#else
    kh_proc *p = kh_start("[keel]\n" KH_MODULE_PATH "listen = 127.0.0.1:0 http1\n"
                          "workers = 1\n"
                          "modules = http1 hello\n"
                          "[http1]\n"
                          "keepalive_timeout = 30s\n",
                          NULL, 1, 10000);
    unsigned port = kh_port(p, 0);
    /* Connections held before the limit: served throughout. */
    enum { HELD = 4, OVER = 30 };
    int held[HELD];
    for (int i = 0; i < HELD; i++) {
        held[i] = kh_connect("127.0.0.1", port);
        kh_assert(p, held[i] >= 0 && hello_on(held[i], "held"), "connection %d not served", i);
    }
    int base = kh_count_fds(p);
    kh_assert(p, base > 0, "cannot count keel's descriptors");
    /* Room for two more descriptors, no more. */
    struct rlimit lim, low;
    kh_assert(p, prlimit(p->pid, RLIMIT_NOFILE, NULL, &lim) == 0, "prlimit: %s", strerror(errno));
    low = lim;
    low.rlim_cur = (rlim_t)base + 2;
    kh_assert(p, prlimit(p->pid, RLIMIT_NOFILE, &low, NULL) == 0, "prlimit: %s", strerror(errno));

    /* A crowd over the limit: some may be served (the two spare
     * descriptors), the others wait in the backlog; none is a crash. */
    int over[OVER];
    for (int i = 0; i < OVER; i++) {
        over[i] = kh_connect("127.0.0.1", port);
        if (over[i] >= 0)
            kh_send_str(over[i], "GET /hello/over HTTP/1.1\r\nHost: x\r\n\r\n");
    }
    kh_assert(p, kh_wait_log(p, "out of file descriptors", 5000),
              "the descriptors did not run out");
    kh_assert(p, !kh_exited(p), "keel exited at the descriptor limit");
    /* The connections keel holds are still served, more than once. */
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < HELD; i++)
            kh_assert(p, hello_on(held[i], "held"), "held connection %d not served at the limit",
                      i);
    /* Over the limit, connections wait unanswered; none is closed (libuv's
     * uv_listen accepted them with a reserve descriptor and closed them). */
    int refused = 0, answered = 0;
    int waiting[OVER] = {0};
    for (int i = 0; i < OVER; i++) {
        if (over[i] < 0) {
            refused++;
            continue;
        }
        char buf[512];
        int rc = kh_expect_eof(over[i], buf, sizeof buf, 200);
        if (rc == 1)
            refused++;
        else if (rc == -1 && strncmp(buf, "HTTP/1.1 200", 12) == 0)
            answered++;
        else if (rc == 0)
            waiting[i] = 1;
    }
    int nwaiting = OVER - refused - answered;
    fprintf(stderr, "accept_emfile: %d over the limit: %d refused, %d answered, %d waiting\n", OVER,
            refused, answered, nwaiting);
    kh_assert(p, nwaiting > 0, "keel did not run into the limit (%d answered)", answered);
    kh_assert(p, refused == 0, "%d connections over the limit were closed", refused);

    /* Descriptors free again: accepting resumes, and the connections that
     * waited are answered. */
    kh_assert(p, prlimit(p->pid, RLIMIT_NOFILE, &lim, NULL) == 0, "prlimit: %s", strerror(errno));
    for (int i = 0; i < OVER; i++) {
        if (waiting[i])
            kh_assert(p, hello_answered(over[i], "over"),
                      "connection %d waited and was not answered", i);
        if (over[i] >= 0)
            close(over[i]);
    }
    kh_assert(p, KH_WAIT_UNTIL(served_anew(port), 10000), "accepting did not resume");
    for (int i = 0; i < HELD; i++) {
        kh_assert(p, hello_on(held[i], "after"), "held connection %d lost", i);
        close(held[i]);
    }
    kh_signal(p, SIGTERM);
    int st = kh_wait_exit(p, 15000);
    kh_assert(p, st == 0, "exit status %d", st);
    kh_assert(p, !sanitizer_report(kh_stderr(p)), "a sanitizer report");
    kh_stop(p);
#endif
}

Test(faults, start_fails_on_one_worker, .timeout = 60)
{
    kh_proc *p = kh_spawn("[keel]\n" KH_MODULE_PATH "listen = 127.0.0.1:0 http1\n"
                          "workers = 4\n"
                          "modules = http1 hello startfail\n"
                          "log_level = info\n"
                          "[startfail]\n"
                          "worker = 2\n",
                          NULL);
    int st = kh_wait_exit(p, 20000);
    kh_assert(p, st > 0, "keel did not exit with an error (%d)", st);
    const char *err = kh_stderr(p);
    kh_assert(p, strstr(err, "module 'startfail': start failed on worker 2") != NULL,
              "no message naming worker 2");
    kh_assert(p, strstr(err, "listening on") == NULL, "keel said it was listening");
    kh_assert(p, !sanitizer_report(err), "a sanitizer report");
    /* Every worker whose start succeeded was stopped again. */
    for (unsigned w = 0; w < 4; w++) {
        char started[64], stopped[64];
        snprintf(started, sizeof started, "startfail: started on worker %u", w);
        snprintf(stopped, sizeof stopped, "startfail: stopped on worker %u", w);
        kh_assert(p, kh_count_log(p, started) == kh_count_log(p, stopped),
                  "worker %u: started %d times, stopped %d times", w, kh_count_log(p, started),
                  kh_count_log(p, stopped));
        if (w != 2)
            kh_assert(p, kh_count_log(p, stopped) <= 1, "worker %u stopped twice", w);
    }
    kh_assert(p, kh_count_log(p, "startfail: started on worker 2") == 0, "worker 2 started");
    kh_stop(p);
}
