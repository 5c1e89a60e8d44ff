/* test_descriptors.c — keel out of file descriptors (issue 23, section 6):
 * started under a low RLIMIT_NOFILE, it raises the soft limit to the hard
 * one and warns that max_connections cannot fit; a crowd of connections
 * then uses up every descriptor, and keel must say so in its log (at most
 * a line a second), count it (keel_accept_errors_total,
 * static_open_errors_total), answer a static file it cannot open with 503
 * and Retry-After rather than 500, keep the connections it could not
 * accept queued rather than drop them, and accept and serve them, and new
 * ones, once descriptors are free again.
 *
 * Before the fix keel left the soft limit where it was, logged nothing
 * (libuv accepted each queued connection with a reserve descriptor and
 * closed it unseen), counted nothing and answered 500. */
#define _GNU_SOURCE
#include "test_static.h"

#include <sys/resource.h>

#define SOFT  64
#define HARD  128
#define CROWD 200 /* more connections than keel has descriptors */
#define FIRST 150 /* closed to free descriptors: more than keel can have accepted */

/* "Max open files  SOFT  HARD  files" from /proc/PID/limits: 1 if read. */
static int read_nofile(pid_t pid, unsigned long *soft, unsigned long *hard)
{
    FILE *f = fopen(ht_fmt("/proc/%d/limits", (int)pid), "r");
    if (f == NULL)
        return 0;
    char line[256];
    int found = 0;
    while (!found && fgets(line, sizeof line, f) != NULL)
        found = sscanf(line, "Max open files %lu %lu", soft, hard) == 2;
    fclose(f);
    return found;
}

/* The value of the sample line "series value" in a Prometheus page, or -1. */
static double prom_value(const char *page, const char *series)
{
    size_t n = strlen(series);
    for (const char *l = page; l != NULL && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
        if (strncmp(l, series, n) == 0 && l[n] == ' ')
            return strtod(l + n + 1, NULL);
    return -1;
}

/* GET target on c (kept alive); the response in r (free it). */
static void get_on(kh_proc *p, ht_conn *c, const char *target, ht_resp *r)
{
    ht_send_str(c, ht_fmt("GET %s HTTP/1.1\r\nHost: t\r\n\r\n", target));
    ht_expect_response(p, c, r, 0);
}

/* Sends GET /static/a.txt on each of fds[0, n) and reads each answer: how
 * many were a 200 with the file's bytes within timeout_ms. What the first
 * connection that was not served received goes to why (for the failure). */
static int served(const int *fds, int n, int timeout_ms, char *why, size_t why_size)
{
    static const char req[] = "GET /static/a.txt HTTP/1.1\r\nHost: t\r\n\r\n";
    char(*got)[512] = calloc((size_t)n, sizeof *got);
    size_t *len = calloc((size_t)n, sizeof *len);
    int *done = calloc((size_t)n, sizeof *done);
    cr_assert(got && len && done);
    int *send_errno = calloc((size_t)n, sizeof *send_errno);
    cr_assert(send_errno);
    int left = n;
    for (int i = 0; i < n; i++) {
        errno = 0;
        if (kh_send(fds[i], req, sizeof req - 1) != 0) {
            /* Counted as done: a connection that cannot take the request
             * will not answer it, so waiting for it would only hide why. */
            send_errno[i] = errno ? errno : EIO;
            done[i] = -1;
            left--;
        }
    }
    int ok = 0;
    long long end = kh_now_ms() + timeout_ms;
    while (left > 0 && kh_now_ms() < end) {
        for (int i = 0; i < n; i++) {
            if (done[i])
                continue;
            struct pollfd pf = {.fd = fds[i], .events = POLLIN};
            if (poll(&pf, 1, 0) <= 0)
                continue;
            ssize_t r = recv(fds[i], got[i] + len[i], sizeof got[i] - 1 - len[i], 0);
            if (r <= 0) {
                done[i] = -1;
                left--;
                continue;
            }
            len[i] += (size_t)r;
            got[i][len[i]] = '\0';
            if (strstr(got[i], "\r\n\r\nfile a\n") != NULL) {
                done[i] = 1;
                left--;
                ok += strncmp(got[i], "HTTP/1.1 200 ", 13) == 0;
            }
        }
        kh_sleep_ms(5);
    }
    snprintf(why, why_size, "all served");
    for (int i = 0; i < n; i++) {
        if (done[i] == 1 && strncmp(got[i], "HTTP/1.1 200 ", 13) == 0)
            continue;
        char *eol = strchr(got[i], '\r');
        if (send_errno[i] != 0)
            snprintf(why, why_size, "connection %d: the request could not be sent: %s", i,
                     strerror(send_errno[i]));
        else
            snprintf(why, why_size, "connection %d: %s after %zu bytes: \"%.*s\"", i,
                     done[i] < 0 ? "closed"
                     : done[i]   ? "answered"
                                 : "no whole answer",
                     len[i], eol ? (int)(eol - got[i]) : (int)len[i], got[i]);
        break;
    }
    free(send_errno);
    free(got);
    free(len);
    free(done);
    return ok;
}

static int sanitizer_report(const char *err)
{
    return strstr(err, "AddressSanitizer") || strstr(err, "LeakSanitizer") ||
           strstr(err, "runtime error:");
}

Test(descriptors, exhausted_then_recovered, .timeout = 90, .fini = st_cleanup)
{
#ifndef __linux__
    cr_skip_test("reads /proc/PID/limits");
#else
    st_make_tree();
    st_write_str("www/a.txt", "file a\n");
    st_write_str("www/b.txt", "file b\n");
    char conf[2048];
    snprintf(conf, sizeof conf,
             "[keel]\n" KH_MODULE_PATH "listen = 127.0.0.1:0 http1\n"
             "workers = 1\n"
             "modules = http1 static stats\n"
             "[http1]\n"
             "header_timeout = 60s\n"
             "keepalive_timeout = 60s\n"
             "[static]\n"
             "mount = /static %s\n",
             st_root);
    kh_next_nofile(SOFT, HARD);
    kh_proc *p = kh_start(conf, NULL, 1, 10000);
    unsigned port = kh_port(p, 0);

    /* At start: the soft limit raised to the hard one, and one line saying
     * that max_connections (10000) cannot fit in it. */
    unsigned long soft = 0, hard = 0;
    kh_assert(p, read_nofile(p->pid, &soft, &hard), "cannot read keel's limits");
    kh_assert(p, soft == HARD && hard == HARD, "keel's descriptor limit is %lu/%lu, not %d/%d",
              soft, hard, HARD, HARD);
    kh_assert(p, kh_count_log(p, "the descriptor limit (128) is below") == 1,
              "no single warning that max_connections cannot fit");

    /* A connection accepted before the crowd, to ask on afterwards. */
    ht_conn *early = ht_connect(port);
    ht_resp r = {0};
    get_on(p, early, "/__stats", &r);
    kh_assert(p, r.status == 200, "status %d before the crowd", r.status);
    ht_resp_free(&r);

    /* The crowd: keel accepts until its descriptors run out; the others
     * wait in the listening socket's queue (the handshake is the kernel's). */
    int crowd[CROWD];
    for (int i = 0; i < CROWD; i++) {
        crowd[i] = kh_connect("127.0.0.1", port);
        kh_assert(p, crowd[i] >= 0, "connection %d of the crowd: %s", i, strerror(errno));
    }
    kh_assert(p, kh_wait_log(p, "out of file descriptors: the process's limit", 5000),
              "no line about accept failing with EMFILE");
    kh_assert(p, kh_count_log(p, "accept on 127.0.0.1:0 (worker 0): out of file") >= 1,
              "the accept line does not name the listener and worker");
    /* The worker retries every 100 ms; the lines come at most once a second
     * (a rate: time passing is the test). */
    kh_sleep_ms(1500);
    int lines = kh_count_log(p, "accept on 127.0.0.1:0 (worker 0): out of file");
    kh_assert(p, lines >= 1 && lines <= 3, "%d accept lines in 1.5 s", lines);
    kh_assert(p, lines < 2 || kh_count_log(p, "more since the last line)") >= 1,
              "the held-back lines are not counted");

    /* A file keel cannot open now: 503 with Retry-After, not 500. */
    get_on(p, early, "/static/b.txt", &r);
    kh_assert(p, r.status == 503, "a file opened without descriptors: status %d", r.status);
    const char *retry = ht_header(&r, "Retry-After");
    kh_assert(p, retry != NULL && strcmp(retry, "1") == 0, "Retry-After: %s",
              retry ? retry : "(none)");
    ht_resp_free(&r);
    kh_assert(p, kh_wait_log(p, "static: cannot open a file: out of file descriptors", 2000),
              "no line about the file");

    /* Counted. */
    get_on(p, early, "/metrics", &r);
    kh_assert(p, r.status == 200, "metrics: status %d", r.status);
    double accept_errors = prom_value(r.body, "keel_accept_errors_total{reason=\"emfile\"}");
    double open_errors = prom_value(r.body, "static_open_errors_total{reason=\"emfile\"}");
    double unavailable = prom_value(r.body, "static_responses_total{code=\"503\"}");
    kh_assert(p, accept_errors >= 1, "keel_accept_errors_total{reason=\"emfile\"} = %g",
              accept_errors);
    kh_assert(p, open_errors == 1 && unavailable == 1,
              "static_open_errors_total{emfile} = %g, static_responses_total{503} = %g",
              open_errors, unavailable);
    ht_resp_free(&r);

    /* Descriptors free again: the connections that waited in the queue
     * are accepted and served (none was dropped), and so are new ones. */
    for (int i = 0; i < FIRST; i++)
        close(crowd[i]);
    /* The requests wait until keel has seen those closes and has
     * descriptors to spare: until then it may still accept connections
     * the closes have not reached, use its last descriptor on them and
     * rightly answer a file it cannot open with 503. */
    kh_wait_fds_at_most(p, HARD - 16, 5000);
    char why[256];
    int n = served(crowd + FIRST, CROWD - FIRST, 10000, why, sizeof why);
    kh_assert(p, n == CROWD - FIRST, "%d of the %d connections that waited were served (%s)", n,
              CROWD - FIRST, why);
    ht_conn *later = ht_connect(port);
    get_on(p, later, "/static/b.txt", &r);
    kh_assert(p, r.status == 200 && strcmp(r.body, "file b\n") == 0, "a new connection: status %d",
              r.status);
    ht_resp_free(&r);

    ht_close(later);
    ht_close(early);
    for (int i = FIRST; i < CROWD; i++)
        close(crowd[i]);
    kh_signal(p, SIGTERM);
    int st = kh_wait_exit(p, 15000);
    kh_assert(p, st == 0, "exit status %d", st);
    kh_assert(p, !sanitizer_report(kh_stderr(p)), "a sanitizer report");
    kh_stop(p);
#endif
}
