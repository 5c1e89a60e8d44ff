/* What test_auth_basic.c and test_ratelimit.c share: one request on a new
 * connection, its status, head and timing, and a scratch folder. */
#ifndef KEEL_TEST_AUTH_H
#define KEEL_TEST_AUTH_H

#include "harness.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct at_reply {
    int status;
    char head[4096]; /* the whole response, NUL-terminated */
} at_reply;

/* GET path with extra header lines (each ending in \r\n; NULL: none). */
static __attribute__((unused)) int at_get(unsigned port, const char *path, const char *headers,
                                          at_reply *r)
{
    int fd = kh_connect("127.0.0.1", port);
    cr_assert(fd >= 0, "connect to %u", port);
    char req[2048];
    snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: t\r\n%sConnection: close\r\n\r\n", path,
             headers ? headers : "");
    cr_assert_eq(kh_send_str(fd, req), 0);
    size_t n = kh_recv_n(fd, r->head, sizeof r->head, sizeof r->head - 1, 10000);
    close(fd);
    r->head[n] = '\0';
    r->status = 0;
    if (sscanf(r->head, "HTTP/1.1 %d", &r->status) != 1)
        r->status = -1;
    return r->status;
}

/* The value of counter `name` (with its labels) on /metrics, or -1. */
static __attribute__((unused)) long long at_metric(unsigned port, const char *name)
{
    int fd = kh_connect("127.0.0.1", port);
    cr_assert(fd >= 0);
    cr_assert_eq(kh_send_str(fd, "GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"),
                 0);
    static char buf[1 << 17];
    size_t n = kh_recv_n(fd, buf, sizeof buf, sizeof buf - 1, 10000);
    close(fd);
    buf[n] = '\0';
    char needle[256];
    snprintf(needle, sizeof needle, "\n%s ", name);
    const char *at = strstr(buf, needle);
    return at ? atoll(at + strlen(needle)) : -1;
}

static __attribute__((unused)) void at_write(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert(f != NULL, "cannot write %s: %s", path, strerror(errno));
    fputs(text, f);
    fclose(f);
}

static __attribute__((unused)) void at_tmpdir(char *dir, size_t size, const char *what)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, size, "%s/keel-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", what);
    cr_assert(mkdtemp(dir) != NULL, "mkdtemp: %s", strerror(errno));
}

#endif
