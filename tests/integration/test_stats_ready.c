/* The readiness endpoint ([stats] ready_path) and [keel] shutdown_delay:
 * 200 while serving; from the first SIGTERM on, 503 on existing and new
 * connections while keel still accepts and serves other routes for
 * shutdown_delay; then the listeners close and keel exits. */
#define _GNU_SOURCE
#include "test_stats.h"

Test(stats_ready, draining_then_closed, .timeout = 60, .fini = kh_cleanup_all)
{
    const char *args[] = {"--set", "keel.shutdown_delay=1500ms", NULL};
    kh_proc *p = st_start(2, NULL, args);
    unsigned port = kh_port(p, 0);
    char *body = NULL;
    kh_assert(p, st_fetch(p, "/__ready", &body) == 200, "ready before the signal");
    kh_assert(p, body != NULL && strcmp(body, "ready\n") == 0, "body '%s'", body);
    free(body);

    ht_conn *kept = ht_connect(port);
    ht_resp r = {0};
    st_get(p, kept, "/__ready", &r);
    kh_assert(p, r.status == 200, "kept-alive connection: %d", r.status);
    ht_resp_free(&r);

    long long sent = kh_now_ms();
    kh_signal(p, SIGTERM);
    kh_assert(p, kh_wait_log(p, "draining: still serving for 1500 ms", 5000), "draining logged");

    /* The open connection: now 503. */
    memset(&r, 0, sizeof r);
    st_get(p, kept, "/__ready", &r);
    kh_assert(p, r.status == 503, "kept-alive connection while draining: %d", r.status);
    kh_assert(p, r.body != NULL && strcmp(r.body, "draining\n") == 0, "body '%s'", r.body);
    ht_resp_free(&r);
    /* New connections are still accepted, and served. */
    kh_assert(p, st_fetch(p, "/__ready", NULL) == 503, "new connection while draining");
    kh_assert(p, st_fetch(p, "/hello/x", NULL) == 200, "other routes still served");
    ht_close(kept);

    /* Then the listeners close, and keel ends. */
    kh_assert(p, kh_wait_log(p, "shutdown_delay over: closing the listeners", 5000),
              "the delay ends");
    long long took = kh_now_ms() - sent;
    kh_assert(p, took >= 1400, "the listeners closed %lld ms after the signal", took);
    kh_assert(p, kh_wait_exit(p, 10000) == 0, "clean exit");
    int fd = kh_connect("127.0.0.1", port);
    kh_assert(p, fd < 0, "still accepting after the exit");
    kh_stop(p);
}

Test(stats_ready, second_signal_ends_the_delay, .timeout = 60, .fini = kh_cleanup_all)
{
    const char *args[] = {"--set", "keel.shutdown_delay=30s", NULL};
    kh_proc *p = st_start(1, NULL, args);
    kh_signal(p, SIGTERM);
    kh_assert(p, kh_wait_log(p, "draining: still serving for 30000 ms", 5000), "draining logged");
    kh_assert(p, st_fetch(p, "/__ready", NULL) == 503, "draining");
    long long start = kh_now_ms();
    kh_signal(p, SIGTERM);
    kh_assert(p, kh_wait_exit(p, 10000) == 0, "clean exit");
    kh_assert(p, kh_now_ms() - start < 5000, "the second signal did not wait for the delay");
    kh_stop(p);
}

Test(stats_ready, without_delay_and_turned_off, .timeout = 60, .fini = kh_cleanup_all)
{
    /* shutdown_delay = 0 (the default): the listeners close at once. */
    kh_proc *p = st_start(1, NULL, NULL);
    kh_assert(p, st_fetch(p, "/__ready", NULL) == 200, "ready");
    kh_signal(p, SIGTERM);
    kh_assert(p, kh_wait_exit(p, 10000) == 0, "clean exit");
    kh_assert(p, kh_count_log(p, "draining") == 0, "no drain without shutdown_delay");
    kh_stop(p);
    p = st_start(1, "ready_path =\n", NULL);
    kh_assert(p, st_fetch(p, "/__ready", NULL) == 404, "ready_path turned off");
    kh_stop(p);
}
