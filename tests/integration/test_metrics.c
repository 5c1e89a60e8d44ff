/* The metrics API (ABI 1.4) through the real binary: a module registers
 * and updates its series on two workers and reads them back summed and per
 * worker (tests/modules/mod_metrics.c); the core's own series count a known
 * load exactly. */
#define _GNU_SOURCE
#include "test_http.h"

#include <keel/version.h>
#include <stdlib.h>

static kh_proc *start(void)
{
    char conf[1024];
    snprintf(conf, sizeof conf,
             "[keel]\nlisten = 127.0.0.1:0 http1\nworkers = 2\nmodules = http1 "
             "metrics\n" KH_MODULE_PATH);
    kh_proc *p = kh_start(conf, NULL, 1, 10000);
    kh_assert(p, kh_wait_log(p, "metrics self-check passed", 5000), "the self-check failed");
    return p;
}

/* One request on a new connection (so that both workers get some). */
static void get(kh_proc *p, const char *path, int want_status, ht_resp *r)
{
    ht_conn *c = ht_connect(kh_port(p, 0));
    ht_send_str(c, ht_fmt("GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path));
    int rc = ht_read_response(c, r, 0, 5000);
    kh_assert(p, rc == 0, "GET %s: %s", path, r->err);
    kh_assert(p, r->status == want_status, "GET %s: status %d, expected %d", path, r->status,
              want_status);
    ht_close(c);
}

static char *dump(kh_proc *p, int per_worker)
{
    ht_resp r;
    get(p, per_worker ? "/dump?per_worker=1" : "/dump", 200, &r);
    char *body = strndup(r.body ? r.body : "", r.body_len);
    ht_resp_free(&r);
    return body;
}

/* The value on the line that starts with `series ` (-1 if absent). */
static long long value_of(const char *text, const char *series)
{
    size_t n = strlen(series);
    for (const char *line = text; line && *line;
         line = strchr(line, '\n'), line = line ? line + 1 : NULL)
        if (strncmp(line, series, n) == 0 && line[n] == ' ')
            return strtoll(line + n + 1, NULL, 10);
    return -1;
}

static void hits(kh_proc *p, const char *path, int n, int status)
{
    for (int i = 0; i < n; i++) {
        ht_resp r;
        get(p, path, status, &r);
        ht_resp_free(&r);
    }
}

Test(metrics, module_series_sum_over_workers, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = start();
    hits(p, "/hit/a", 7, 200);
    hits(p, "/hit/b", 3, 200);
    hits(p, "/level?v=5", 4, 200);
    hits(p, "/level?v=-2", 1, 200);
    hits(p, "/observe?v=5", 2, 200);
    hits(p, "/observe?v=50", 1, 200);
    hits(p, "/observe?v=5000", 1, 200);
    char *t = dump(p, 0);
    kh_assert(p, value_of(t, "test_hits_total{route=\"a\"}") == 7, "hits a:\n%s", t);
    kh_assert(p, value_of(t, "test_hits_total{route=\"b\"}") == 3, "hits b:\n%s", t);
    kh_assert(p, value_of(t, "test_level{}") == 18, "level:\n%s", t);
    kh_assert(p, strstr(t, "test_sizes{} count=4 sum=5060 le10=2 le100=3 le1000=3 first\n") != NULL,
              "histogram:\n%s", t);
    /* HELP/TYPE go once per family: the first series only. */
    kh_assert(p,
              strstr(t, "test_hits_total{route=\"a\"} 7 first\n") != NULL &&
                  strstr(t, "test_hits_total{route=\"b\"} 3\n") != NULL,
              "first_of_family:\n%s", t);
    free(t);
    /* Both workers' start() tried to register after load. */
    kh_assert(p, kh_count_log(p, "late registration: not allowed in this state") == 2,
              "a registration after load was not refused with KEEL_ERR_STATE");
    kh_stop(p);
}

Test(metrics, per_worker_values_add_up, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = start();
    hits(p, "/hit/a", 20, 200);
    char *t = dump(p, 1);
    long long w0 = value_of(t, "test_hits_total{route=\"a\"}@0");
    long long w1 = value_of(t, "test_hits_total{route=\"a\"}@1");
    kh_assert(p, w0 >= 0 && w1 >= 0 && w0 + w1 == 20, "per worker %lld + %lld:\n%s", w0, w1, t);
    /* libuv's idle time, per worker: both loops have waited. */
    kh_assert(p,
              value_of(t, "keel_worker_loop_idle_seconds_total{}@0") > 0 &&
                  value_of(t, "keel_worker_loop_idle_seconds_total{}@1") > 0,
              "loop idle time:\n%s", t);
    /* Process-wide series appear once, not per worker. */
    kh_assert(p,
              value_of(t, "keel_build_info{version=\"" KEEL_VERSION_STRING
                          "\",abi=\"" KH_STR(KEEL_ABI_MAJOR) "." KH_STR(KEEL_ABI_MINOR) "\"}") == 1,
              "build info:\n%s", t);
    free(t);
    kh_stop(p);
}

Test(metrics, core_counts_a_known_load, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = start();
    char *before = dump(p, 0);
    hits(p, "/hit/a", 12, 200);
    hits(p, "/nowhere", 5, 404);
    hits(p, "/hit/zzz", 2, 404);
    char *after = dump(p, 0);
    /* The first dump's own 200 is counted once its log phase ran, before
     * the second dump was collected. */
    long long d2 = value_of(after, "keel_http_requests_total{class=\"2xx\"}") -
                   value_of(before, "keel_http_requests_total{class=\"2xx\"}");
    long long d4 = value_of(after, "keel_http_requests_total{class=\"4xx\"}") -
                   value_of(before, "keel_http_requests_total{class=\"4xx\"}");
    kh_assert(p, d2 == 13 && d4 == 7, "2xx +%lld (want 13), 4xx +%lld (want 7):\n%s", d2, d4,
              after);
    long long accepted = value_of(after, "keel_connections_accepted_total{}") -
                         value_of(before, "keel_connections_accepted_total{}");
    kh_assert(p, accepted == 20, "accepted +%lld, want 20 (19 requests and the dump)", accepted);
    /* The dump's own connection is the only one open, once the others'
     * closes have been seen: on two workers, the other worker may tear
     * its last connection down after this one answered the dump. */
    long long open = value_of(after, "keel_connections_open{}");
    for (int i = 0; open != 1 && i < 50; i++) {
        kh_sleep_ms(20);
        char *again = dump(p, 0);
        open = value_of(again, "keel_connections_open{}");
        free(again);
    }
    kh_assert(p, open == 1, "%lld connections open, expected the dump's alone", open);
    kh_assert(p,
              value_of(after, "keel_bytes_received_total{}") >
                      value_of(before, "keel_bytes_received_total{}") + 19 * 30 &&
                  value_of(after, "keel_bytes_sent_total{}") >
                      value_of(before, "keel_bytes_sent_total{}") + 19 * 30,
              "bytes:\n%s", after);
    free(before);
    free(after);
    kh_stop(p);
}
