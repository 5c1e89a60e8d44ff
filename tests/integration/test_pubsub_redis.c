/* The pubsub_redis module: two keel instances (two workers each) bridged
 * through a redis-server the test starts on a free loopback port. Redis
 * is down when they start (they retry), then up; a message published on
 * one instance reaches the other's subscribers, and the publisher's own
 * instance delivers it once (not again from Redis); Redis is killed (the
 * messages meanwhile are counted as dropped, local delivery goes on) and
 * restarted on the same port, and delivery across instances resumes.
 * Skipped where redis-server is not installed or the module not built. */
#define _GNU_SOURCE
#include "test_http.h"
#include "ws_test.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>

static const char *redis_bin = "/usr/bin/redis-server";

static unsigned free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    cr_assert(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
              getsockname(fd, (struct sockaddr *)&sa, &len) == 0);
    close(fd);
    return ntohs(sa.sin_port);
}

static kh_proc *start_redis(unsigned port)
{
    char p[16];
    snprintf(p, sizeof p, "%u", port);
    const char *args[] = {"--port",       p,    "--bind",      "127.0.0.1", "--save", "",
                          "--appendonly", "no", "--daemonize", "no",        NULL};
    kh_proc *r = kh_spawn_program(redis_bin, NULL, args);
    for (int i = 0; i < 100; i++) {
        int fd = kh_connect("127.0.0.1", port);
        if (fd >= 0) {
            close(fd);
            return r;
        }
        kh_sleep_ms(50);
    }
    cr_assert_fail("redis-server did not start: %s", kh_stdout(r));
    return r;
}

static kh_proc *start_keel(unsigned redis_port)
{
    char extra[512];
    snprintf(extra, sizeof extra,
             "[pubsub_redis]\naddress = 127.0.0.1:%u\nprefix = t:\nreconnect_max = 300ms\n",
             redis_port);
    return wt_start_modules(2, "http1 websocket wstest stats pubsub_redis", extra);
}

static wsc *subscriber(kh_proc *p, const char *topic)
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
static int receives(wsc *c, const char *want, int timeout_ms)
{
    long long end = kh_now_ms() + timeout_ms;
    while (kh_now_ms() < end) {
        wsc_frame f;
        if (wsc_read(c, &f, (int)(end - kh_now_ms()) + 1) != 0)
            return 0;
        int hit = strcmp((char *)f.data, want) == 0;
        wsc_frame_free(&f);
        if (hit)
            return 1;
    }
    return 0;
}

/* Frames that arrive within ms (the "published N" answers aside). */
static int count_frames(wsc *c, const char *want, int ms)
{
    int n = 0;
    wsc_frame f;
    while (wsc_read(c, &f, ms) == 0) {
        if (strcmp((char *)f.data, want) == 0)
            n++;
        wsc_frame_free(&f);
    }
    return n;
}

/* Publishes "pub TOPIC MSG-i" from pub every 100ms until sub receives
 * one of them (Redis subscriptions take effect asynchronously). */
static int publish_until_received(wsc *pub, wsc *sub, const char *topic, const char *msg,
                                  int timeout_ms)
{
    long long end = kh_now_ms() + timeout_ms;
    char cmd[128], want[64];
    snprintf(cmd, sizeof cmd, "pub %s %s", topic, msg);
    snprintf(want, sizeof want, "%s", msg);
    while (kh_now_ms() < end) {
        wsc_send_text(pub, cmd);
        if (receives(sub, want, 100))
            return 1;
    }
    return 0;
}

static double metric(kh_proc *p, const char *series)
{
    char *body = NULL;
    ht_conn *c = ht_connect(kh_port(p, 0));
    ht_send_str(c, "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n");
    ht_resp r = {0};
    ht_expect_response(p, c, &r, 0);
    body = r.body;
    double v = -1;
    size_t n = strlen(series);
    for (const char *l = body; l != NULL && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
        if (strncmp(l, series, n) == 0 && l[n] == ' ')
            v = strtod(l + n + 1, NULL);
    ht_resp_free(&r);
    ht_close(c);
    return v;
}

Test(pubsub_redis, across_instances_and_a_redis_restart, .timeout = 120, .fini = kh_cleanup_all)
{
    if (access(redis_bin, X_OK) != 0)
        cr_skip_test("redis-server is not installed");
    char mod[512];
    snprintf(mod, sizeof mod, "%s/mod_pubsub_redis.so", KEEL_MODULE_DIR);
    if (access(mod, R_OK) != 0)
        cr_skip_test("the pubsub_redis module is not built (hiredis missing)");

    unsigned rport = free_port();
    /* Redis down at start: both instances start anyway and retry. */
    kh_proc *k1 = start_keel(rport), *k2 = start_keel(rport);
    kh_assert(k1, kh_wait_log(k1, "cannot connect", 5000), "k1 says Redis is not there");

    wsc *a = subscriber(k1, "room"); /* on k1, with the publisher */
    wsc *b = subscriber(k2, "room"); /* on k2 */
    wsc *pub1 = wsc_open(kh_port(k1, 0), "/t/app", NULL);
    wsc *pub2 = wsc_open(kh_port(k2, 0), "/t/app", NULL);

    /* Local delivery works with Redis down; the message is dropped for
     * the other instance and counted. */
    wsc_send_text(pub1, "pub room while-down");
    kh_assert(k1, receives(a, "while-down", 5000), "local delivery with Redis down");
    kh_assert(k2, !receives(b, "while-down", 300), "nothing can cross without Redis");
    kh_assert(k1, metric(k1, "pubsub_redis_dropped_total") >= 1, "the drop is counted");

    kh_proc *redis = start_redis(rport);
    kh_assert(k1, kh_wait_log(k1, "(subscribe): connected", 10000), "k1 connects");
    kh_assert(k2, kh_wait_log(k2, "(subscribe): connected", 10000), "k2 connects");
    kh_assert(k2, publish_until_received(pub1, b, "room", "k1-to-k2", 10000),
              "a message from k1 reaches k2's subscriber");
    kh_assert(k1, publish_until_received(pub2, a, "room", "k2-to-k1", 10000),
              "a message from k2 reaches k1's subscriber");

    /* Exactly once on each side, the publisher's instance included
     * (its own message coming back from Redis is skipped). */
    count_frames(a, "", 300);
    count_frames(b, "", 300);
    wsc_send_text(pub1, "pub room once");
    kh_assert(k1, count_frames(a, "once", 700) == 1, "k1's subscriber got it once");
    kh_assert(k2, count_frames(b, "once", 300) == 1, "k2's subscriber got it once");

    /* Redis killed and restarted on the same port: resubscribed, and
     * delivery resumes. */
    kh_stop(redis);
    kh_assert(k1, kh_wait_log(k1, "connection lost", 5000), "k1 saw Redis go");
    double before = metric(k1, "pubsub_redis_dropped_total");
    wsc_send_text(pub1, "pub room lost");
    kh_assert(k1, receives(a, "lost", 5000), "local delivery while Redis restarts");
    kh_sleep_ms(100);
    kh_assert(k1, metric(k1, "pubsub_redis_dropped_total") > before, "counted as dropped");
    redis = start_redis(rport);
    kh_assert(k2, publish_until_received(pub1, b, "room", "after-restart", 15000),
              "delivery k1 -> k2 resumes after the restart");
    kh_assert(k1, publish_until_received(pub2, a, "room", "after-restart-2", 15000),
              "delivery k2 -> k1 resumes after the restart");
    kh_assert(k1, metric(k1, "pubsub_redis_reconnects_total") >= 2, "reconnects counted");

    /* The last subscriber leaving unsubscribes in Redis: k2's message no
     * longer reaches k1 at all (Redis has no subscriber from k1). */
    wsc_close(a);
    kh_assert(k1, kh_wait_log(k1, "wstest topic idle room", 5000), "topic idle on k1");
    kh_sleep_ms(200);
    kh_assert(k1, metric(k1, "pubsub_redis_received_total") >= 1, "received counted");
    double received = metric(k1, "pubsub_redis_received_total");
    wsc_send_text(pub2, "pub room nobody-on-k1");
    kh_assert(k2, receives(b, "nobody-on-k1", 5000), "k2's own subscriber");
    kh_sleep_ms(300);
    kh_assert(k1, metric(k1, "pubsub_redis_received_total") == received,
              "k1 still received messages for a topic it left");

    wsc_close(b);
    wsc_close(pub1);
    wsc_close(pub2);
    kh_signal(k1, SIGTERM);
    kh_signal(k2, SIGTERM);
    kh_assert(k1, kh_wait_exit(k1, 10000) == 0, "k1 exits cleanly");
    kh_assert(k2, kh_wait_exit(k2, 10000) == 0, "k2 exits cleanly");
    kh_stop(redis);
    kh_stop(k1);
    kh_stop(k2);
}
