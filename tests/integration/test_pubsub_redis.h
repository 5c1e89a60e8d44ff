/* test_pubsub_redis.h — what test_pubsub_redis*.c share: a redis-server
 * started on a free loopback port, keel instances (two workers, the wstest
 * module's "sub"/"pub" commands) bridged through it, and reading the
 * module's metrics. Define _GNU_SOURCE and include test_http.h and
 * ws_test.h first. */
#ifndef KEEL_TEST_PUBSUB_REDIS_H
#define KEEL_TEST_PUBSUB_REDIS_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdlib.h>

#define PR_FN static __attribute__((unused))

static const char *pr_redis_bin = "/usr/bin/redis-server";

/* Skips the test where redis-server or the module is missing. */
#define PR_REQUIRE()                                                                               \
    do {                                                                                           \
        if (access(pr_redis_bin, X_OK) != 0)                                                       \
            cr_skip_test("redis-server is not installed");                                         \
        char mod_[512];                                                                            \
        snprintf(mod_, sizeof mod_, "%s/mod_pubsub_redis.so", KEEL_MODULE_DIR);                    \
        if (access(mod_, R_OK) != 0)                                                               \
            cr_skip_test("the pubsub_redis module is not built (hiredis missing)");                \
    } while (0)

/* redis-server on 127.0.0.1:port (plain, or TLS only when the arguments
 * say --port 0 --tls-port ...), with no persistence; `more` (may be NULL)
 * appends arguments. Waits until the port accepts. */
PR_FN kh_proc *pr_start_redis_args(unsigned port, const char *const *more)
{
    char p[16];
    snprintf(p, sizeof p, "%u", port);
    const char *args[48] = {"--port",       p,    "--bind",      "127.0.0.1", "--save", "",
                            "--appendonly", "no", "--daemonize", "no"};
    int n = 10;
    for (int i = 0; more != NULL && more[i] != NULL && n < 47; i++)
        args[n++] = more[i];
    args[n] = NULL;
    kh_proc *r = kh_spawn_program(pr_redis_bin, NULL, args);
    if (!kh_wait_accepts(port, 5000))
        cr_assert_fail("redis-server did not start: %s", kh_stdout(r));
    return r;
}

PR_FN kh_proc *pr_start_redis(unsigned port)
{
    return pr_start_redis_args(port, NULL);
}

/* keel (two workers) with the modules given, keel_lines (may be "") added
 * to its [keel] section, and a [pubsub_redis] section naming Redis at
 * host:port; `more` adds lines to it (and may open other sections after). */
PR_FN kh_proc *pr_start_keel(const char *modules, const char *keel_lines, const char *host,
                             unsigned port, const char *more, ...)
    __attribute__((format(printf, 5, 6)));
PR_FN kh_proc *pr_start_keel(const char *modules, const char *keel_lines, const char *host,
                             unsigned port, const char *more, ...)
{
    char lines[2048] = "", extra[2800];
    if (more != NULL) {
        va_list ap;
        va_start(ap, more);
        vsnprintf(lines, sizeof lines, more, ap);
        va_end(ap);
    }
    snprintf(extra, sizeof extra,
             "%s[pubsub_redis]\naddress = %s:%u\nprefix = t:\nreconnect_max = 300ms\n%s",
             keel_lines, host, port, lines);
    return wt_start_modules(2, modules, extra);
}

#define PR_MODULES "http1 websocket wstest stats pubsub_redis"

PR_FN wsc *pr_subscriber(kh_proc *p, const char *topic)
{
    wsc *c = wsc_open(kh_port(p, 0), "/t/app", NULL);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "sub %s", topic);
    wsc_send_text(c, cmd);
    wsc_frame f;
    kh_assert(p, wsc_read(c, &f, 5000) == 0, "no answer to sub");
    kh_assert(p, strncmp((char *)f.data, "subscribed", 10) == 0, "'%s'", f.data);
    wsc_frame_free(&f);
    return c;
}

/* Reads frames until one equals want (1) or timeout_ms passes (0). */
PR_FN int pr_receives(wsc *c, const char *want, int timeout_ms)
{
    long long end = kh_now_ms() + timeout_ms;
    while (kh_now_ms() < end) {
        wsc_frame f;
        if (wsc_read(c, &f, (int)(end - kh_now_ms()) + 1) != 0)
            return 0;
        int hit = f.len == strlen(want) && memcmp(f.data, want, f.len) == 0;
        wsc_frame_free(&f);
        if (hit)
            return 1;
    }
    return 0;
}

/* Frames equal to want that arrive before a gap of ms (others are read
 * and left aside). */
PR_FN int pr_count_frames(wsc *c, const char *want, int ms)
{
    int n = 0;
    wsc_frame f;
    while (wsc_read(c, &f, ms) == 0) {
        if (f.len == strlen(want) && memcmp(f.data, want, f.len) == 0)
            n++;
        wsc_frame_free(&f);
    }
    return n;
}

/* Publishes "pub TOPIC MSG" from pub every 100ms until sub receives it
 * (Redis subscriptions take effect asynchronously). */
PR_FN int pr_publish_until_received(wsc *pub, wsc *sub, const char *topic, const char *msg,
                                    int timeout_ms)
{
    long long end = kh_now_ms() + timeout_ms;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "pub %s %s", topic, msg);
    while (kh_now_ms() < end) {
        wsc_send_text(pub, cmd);
        if (pr_receives(sub, msg, 100))
            return 1;
    }
    return 0;
}

/* The sum of a family's series in GET /metrics (all its labels: the
 * dropped counter has one series per reason), or the one series whose
 * name and labels are `series` exactly when it holds a '{'. -1 if absent. */
PR_FN double pr_metric(kh_proc *p, const char *series)
{
    ht_conn *c = ht_connect(kh_port(p, 0));
    ht_send_str(c, "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n");
    ht_resp r = {0};
    ht_expect_response(p, c, &r, 0);
    double v = -1;
    size_t n = strlen(series);
    int exact = strchr(series, '{') != NULL;
    for (const char *l = r.body; l != NULL && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        if (strncmp(l, series, n) != 0)
            continue;
        const char *value = NULL;
        if (l[n] == ' ')
            value = l + n + 1;
        else if (!exact && l[n] == '{' && strncmp(l + n, "{worker=", 8) != 0) {
            const char *close = strchr(l + n, '}');
            /* per-worker views repeat the total: only the total counts */
            if (close != NULL && close[1] == ' ' &&
                memmem(l + n, (size_t)(close - l - n), "worker=", 7) == NULL)
                value = close + 2;
        }
        if (value != NULL)
            v = (v < 0 ? 0 : v) + strtod(value, NULL);
    }
    ht_resp_free(&r);
    ht_close(c);
    return v;
}

/* Waits until pr_metric(p, series) >= at_least; returns the last value. */
PR_FN double pr_wait_metric(kh_proc *p, const char *series, double at_least, int timeout_ms)
{
    double v;
    KH_WAIT_UNTIL((v = pr_metric(p, series)) >= at_least, timeout_ms);
    return v;
}

#endif
