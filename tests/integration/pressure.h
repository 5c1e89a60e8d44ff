/* pressure.h — what test_pressure.c and test_pressure_latency.c share:
 * raising the descriptor limit, and one request answered on each of many
 * connections at once. Static functions: one copy per test executable. */
#ifndef KEEL_TEST_PRESSURE_H
#define KEEL_TEST_PRESSURE_H

#include "harness.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/resource.h>

/* Raises the soft descriptor limit to at least want; 0 if impossible. */
static __attribute__((unused)) int raise_nofile(rlim_t want, rlim_t *hard)
{
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) != 0)
        return 0;
    *hard = r.rlim_max;
    if (r.rlim_cur >= want)
        return 1;
    if (r.rlim_max != RLIM_INFINITY && r.rlim_max < want)
        return 0;
    r.rlim_cur = want;
    return setrlimit(RLIMIT_NOFILE, &r) == 0;
}

static __attribute__((unused)) const char request[] = "GET /hello/p HTTP/1.1\r\nHost: x\r\n\r\n";
static __attribute__((unused)) const char answer[] = "Hello, p!";

/* Sends the request on every fd of the batch and reads every answer (each
 * ends with the body "Hello, p!"). Returns how many were answered. */
static __attribute__((unused)) int serve_batch(const int *fds, int n, int timeout_ms)
{
    struct pollfd *p = calloc((size_t)n, sizeof *p);
    size_t *got = calloc((size_t)n, sizeof *got);
    char(*buf)[256] = calloc((size_t)n, sizeof *buf);
    cr_assert(p && got && buf);
    int done = 0;
    for (int i = 0; i < n; i++) {
        p[i].fd = fds[i];
        p[i].events = POLLIN;
        if (send(fds[i], request, sizeof request - 1, MSG_NOSIGNAL) != (ssize_t)sizeof request - 1)
            p[i].fd = -1;
    }
    long long end = kh_now_ms() + timeout_ms;
    while (done < n && kh_now_ms() < end) {
        if (poll(p, (nfds_t)n, 100) <= 0)
            continue;
        for (int i = 0; i < n; i++) {
            if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t r = recv(p[i].fd, buf[i] + got[i], sizeof buf[i] - 1 - got[i], 0);
            if (r <= 0) {
                p[i].fd = -1;
                continue;
            }
            got[i] += (size_t)r;
            buf[i][got[i]] = '\0';
            if (strstr(buf[i], answer) != NULL) {
                done++;
                p[i].fd = -1; /* answered; stays open */
            }
        }
    }
    free(p);
    free(got);
    free(buf);
    return done;
}

#endif
