/* The stats module's pages through the real binary: each page's status,
 * content type and content, the paths and the allow-list from the config,
 * bad config refused, and the core's counters checked against a known
 * load (hello's routes and 404s) on one keep-alive connection, so that
 * every request has been counted, on the same worker, before the next is
 * read. */
#define _GNU_SOURCE
#include "test_stats.h"

#include <keel/version.h>

Test(stats, pages, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = st_start(2, NULL, NULL);
    ht_conn *c = ht_connect(kh_port(p, 0));
    ht_resp r = {0};

    st_get(p, c, "/__stats", &r);
    kh_assert(p, r.status == 200, "/__stats: %d", r.status);
    cr_assert_str_eq(ht_header(&r, "Content-Type"), "text/plain; charset=utf-8");
    cr_assert_str_eq(ht_header(&r, "Cache-Control"), "no-store");
    cr_assert(strstr(r.body, "keel " KEEL_VERSION_STRING " (ABI " KH_STR(KEEL_ABI_MAJOR) "." KH_STR(
                                 KEEL_ABI_MINOR) ")\n") != NULL,
              "%s", r.body);
    cr_assert(strstr(r.body, "modules         http1 ") && strstr(r.body, "hello ") &&
                  strstr(r.body, "stats "),
              "%s", r.body);
    cr_assert(strstr(r.body, "\nworker loop utilisation") && strstr(r.body, "  worker 1 "), "%s",
              r.body);
    cr_assert(strstr(r.body, "  keel_build_info{version=\"" KEEL_VERSION_STRING "\",abi=\"" KH_STR(
                                 KEEL_ABI_MAJOR) "." KH_STR(KEEL_ABI_MINOR) "\"} 1\n"),
              "%s", r.body);
    ht_resp_free(&r);

    st_get(p, c, "/__stats.json", &r);
    kh_assert(p, r.status == 200, "/__stats.json: %d", r.status);
    cr_assert_str_eq(ht_header(&r, "Content-Type"), "application/json");
    static const char json_start[] =
        "{\"version\":\"" KEEL_VERSION_STRING
        "\",\"abi\":\"" KH_STR(KEEL_ABI_MAJOR) "." KH_STR(KEEL_ABI_MINOR) "\",\"time\":";
    cr_assert(strncmp(r.body, json_start, sizeof json_start - 1) == 0, "%s", r.body);
    cr_assert(strstr(r.body, "\"workers\":2,\"modules\":[{\"name\":\"http1\""), "%s", r.body);
    cr_assert(strstr(r.body, "\"keel_http_requests_total\":{\"type\":\"counter\""), "%s", r.body);
    cr_assert(strstr(r.body, "\"keel_worker_loop_idle_seconds_total\":") &&
                  strstr(r.body, "\"workers\":["),
              "per-worker values: %s", r.body);
    ht_resp_free(&r);

    st_get(p, c, "/metrics", &r);
    kh_assert(p, r.status == 200, "/metrics: %d", r.status);
    cr_assert_str_eq(ht_header(&r, "Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
    cr_assert(strstr(r.body, "# HELP keel_http_requests_total ") &&
                  strstr(r.body, "# TYPE keel_http_requests_total counter\n"),
              "%s", r.body);
    cr_assert(strstr(r.body, "# TYPE keel_http_request_duration_seconds histogram\n"
                             "keel_http_request_duration_seconds_bucket{le=\"0.0001\"} "),
              "%s", r.body);
    cr_assert(strstr(r.body, "keel_http_request_duration_seconds_bucket{le=\"+Inf\"} "), "%s",
              r.body);
    ht_resp_free(&r);

    st_get(p, c, "/metrics?per_worker=1", &r);
    cr_assert(strstr(r.body, "keel_worker_loop_idle_seconds_total{worker=\"0\"} ") &&
                  strstr(r.body, "keel_worker_loop_idle_seconds_total{worker=\"1\"} "),
              "%s", r.body);
    ht_resp_free(&r);

    st_get(p, c, "/__stats/", &r);
    kh_assert(p, r.status == 200, "/__stats/: %d", r.status);
    cr_assert_str_eq(ht_header(&r, "Content-Type"), "text/html; charset=utf-8");
    cr_assert(strstr(r.body, "<svg class=\"chart\"") != NULL);
    cr_assert(strstr(r.body, "events: \"/__stats/events\", json: \"/__stats.json\""),
              "the paths are written into the page");
    cr_assert(strstr(r.body, "__KEEL_") == NULL);
    static const char *const external[] = {"src=\"http", "href=\"http", "src=\"//",
                                           "href=\"//",  "url(",        "@import"};
    for (size_t i = 0; i < sizeof external / sizeof external[0]; i++)
        cr_assert(strstr(r.body, external[i]) == NULL, "the page loads nothing from elsewhere (%s)",
                  external[i]);
    ht_resp_free(&r);

    /* HEAD: the same head, no body. */
    ht_send_str(c, "HEAD /metrics HTTP/1.1\r\nHost: t\r\n\r\n");
    ht_expect_response(p, c, &r, 1);
    cr_assert(r.status == 200 && r.body_len == 0);
    ht_resp_free(&r);
    ht_close(c);
}

Test(stats, counters_match_a_known_load, .timeout = 60, .fini = kh_cleanup_all)
{
    enum { OK = 25, MISSING = 7, NAMED = 3 };
    kh_proc *p = st_start(2, NULL, NULL);
    ht_conn *c = ht_connect(kh_port(p, 0));
    ht_resp r = {0};
    st_get(p, c, "/metrics", &r);
    double ok0 = st_prom_value(p, r.body, "keel_http_requests_total{class=\"2xx\"}");
    double nf0 = st_prom_value(p, r.body, "keel_http_requests_total{class=\"4xx\"}");
    double err0 = st_prom_value(p, r.body, "keel_http_requests_total{class=\"5xx\"}");
    double n0 = st_prom_value(p, r.body, "keel_http_request_duration_seconds_count");
    ht_resp_free(&r);

    for (int i = 0; i < OK; i++) {
        st_get(p, c, "/", &r);
        cr_assert(r.status == 200);
        ht_resp_free(&r);
    }
    for (int i = 0; i < NAMED; i++) {
        st_get(p, c, "/hello/stats", &r);
        cr_assert(r.status == 200);
        ht_resp_free(&r);
    }
    for (int i = 0; i < MISSING; i++) {
        st_get(p, c, "/no/such/page", &r);
        cr_assert(r.status == 404);
        ht_resp_free(&r);
    }

    st_get(p, c, "/metrics", &r);
    /* The first /metrics was counted too, after it had been rendered. */
    double ok = st_prom_value(p, r.body, "keel_http_requests_total{class=\"2xx\"}") - ok0;
    double nf = st_prom_value(p, r.body, "keel_http_requests_total{class=\"4xx\"}") - nf0;
    double err = st_prom_value(p, r.body, "keel_http_requests_total{class=\"5xx\"}") - err0;
    double n = st_prom_value(p, r.body, "keel_http_request_duration_seconds_count") - n0;
    kh_assert(p, ok == OK + NAMED + 1, "2xx went up by %.0f, not %d", ok, OK + NAMED + 1);
    kh_assert(p, nf == MISSING, "4xx went up by %.0f, not %d", nf, MISSING);
    kh_assert(p, err == 0, "5xx went up by %.0f", err);
    kh_assert(p, n == OK + NAMED + MISSING + 1, "latency count went up by %.0f", n);
    cr_assert(st_prom_value(p, r.body, "keel_connections_open") >= 1);
    cr_assert(st_prom_value(p, r.body, "keel_connections_accepted_total") >= 1);
    double start = st_prom_value(p, r.body, "keel_start_time_seconds");
    cr_assert(start > 1.7e9 && start < 4e9, "start time %f", start);
    ht_resp_free(&r);

    /* The text page says the same in words. */
    st_get(p, c, "/__stats", &r);
    cr_assert(strstr(r.body, ht_fmt("2xx %.0f", ok0 + ok + 1)) != NULL, "%s", r.body);
    cr_assert(strstr(r.body, ht_fmt("4xx %.0f", nf0 + nf)) != NULL, "%s", r.body);
    ht_resp_free(&r);
    ht_close(c);
}

Test(stats, paths_from_the_config, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = st_start(1,
                          "text_path = /s\n"
                          "json_path = /s.json\n"
                          "metrics_path =\n"
                          "dashboard_path = /dash\n",
                          NULL);
    cr_assert_eq(st_fetch(p, "/s", NULL), 200);
    cr_assert_eq(st_fetch(p, "/s.json", NULL), 200);
    cr_assert_eq(st_fetch(p, "/dash", NULL), 200);
    cr_assert_eq(st_fetch(p, "/__stats", NULL), 404);
    cr_assert_eq(st_fetch(p, "/__stats.json", NULL), 404);
    cr_assert_eq(st_fetch(p, "/__stats/", NULL), 404);
    cr_assert_eq(st_fetch(p, "/metrics", NULL), 404, "an empty path turns the page off");
    char *page = NULL;
    cr_assert_eq(st_fetch(p, "/dash", &page), 200);
    cr_assert(strstr(page, "events: \"/dash/events\", json: \"/s.json\""), "%.300s", page);
    free(page);
    /* The stream is under the dashboard: a HEAD answers without streaming. */
    ht_resp r = {0};
    ht_roundtrip(p, "HEAD /dash/events HTTP/1.1\r\nHost: t\r\n\r\n", &r);
    cr_assert_eq(r.status, 200);
    cr_assert_str_eq(ht_header(&r, "Content-Type"), "text/event-stream");
    ht_resp_free(&r);
}

Test(stats, allow_list, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = st_start(1, "allow = 10.0.0.0/8 ::1\n", NULL);
    cr_assert_eq(st_fetch(p, "/metrics", NULL), 403);
    cr_assert_eq(st_fetch(p, "/__stats", NULL), 403);
    cr_assert_eq(st_fetch(p, "/__stats.json", NULL), 403);
    cr_assert_eq(st_fetch(p, "/__stats/", NULL), 403);
    cr_assert_eq(st_fetch(p, "/__stats/events", NULL), 403);
    cr_assert_eq(st_fetch(p, "/", NULL), 200, "other routes are not the allow-list's");
    kh_stop(p);

    /* Repeated keys add up; 127.0.0.0/8 covers the test's address. */
    p = st_start(1, "allow = 10.0.0.0/8\nallow = 192.168.0.1, 127.0.0.0/8\n", NULL);
    cr_assert_eq(st_fetch(p, "/metrics", NULL), 200);
    cr_assert_eq(st_fetch(p, "/__stats", NULL), 200);
}

/* The status of GET path from `client` (an IPv4 address), told to keel
 * by a PROXY protocol v1 header: the one way a test on loopback can be
 * another machine. */
static int fetch_from(kh_proc *p, const char *client, const char *path)
{
    int fd = kh_connect("127.0.0.1", kh_port(p, 0));
    kh_assert(p, fd >= 0, "connect");
    char req[512], buf[512];
    snprintf(req, sizeof req,
             "PROXY TCP4 %s 127.0.0.1 40000 80\r\n"
             "GET %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
             client, path);
    kh_assert(p, kh_send_str(fd, req) == 0, "send");
    size_t n = kh_recv_line(fd, buf, sizeof buf, 5000);
    close(fd);
    return n > 12 && strncmp(buf, "HTTP/1.1 ", 9) == 0 ? atoi(buf + 9) : 0;
}

/* Without `allow`, the pages are the machine's own: loopback clients
 * only; `allow = any` opens them. */
Test(stats, loopback_only_by_default, .timeout = 60, .fini = kh_cleanup_all)
{
    static const char listen[] = "[keel]\n"
                                 "listen = 127.0.0.1:0 http1 proxy_protocol=on "
                                 "proxy_from=127.0.0.1\n"
                                 "modules = http1 hello stats\n" KH_MODULE_PATH "[stats]\n";
    char conf[1024];
    snprintf(conf, sizeof conf, "%s", listen);
    kh_proc *p = kh_start(conf, NULL, 1, 10000);
    static const char *const pages[] = {"/metrics", "/__stats", "/__stats.json", "/__stats/"};
    for (size_t i = 0; i < sizeof pages / sizeof *pages; i++) {
        kh_assert(p, fetch_from(p, "192.0.2.7", pages[i]) == 403, "%s open to 192.0.2.7", pages[i]);
        kh_assert(p, fetch_from(p, "127.0.0.1", pages[i]) == 200, "%s closed to loopback",
                  pages[i]);
    }
    kh_assert(p, fetch_from(p, "192.0.2.7", "/__ready") == 200, "readiness is for balancers");
    kh_assert(p, fetch_from(p, "192.0.2.7", "/hello/x") == 200, "other routes are not its");
    kh_stop(p);

    snprintf(conf, sizeof conf, "%sallow = any\n", listen);
    p = kh_start(conf, NULL, 1, 10000);
    kh_assert(p, fetch_from(p, "192.0.2.7", "/metrics") == 200, "allow = any still closed");
    kh_stop(p);
}

/* A config the module refuses: keel exits 1 naming the key. */
static void refused(const char *stats, const char *needle)
{
    char conf[2048];
    snprintf(conf, sizeof conf,
             "[keel]\nlisten = 127.0.0.1:0 http1\nmodules = http1 stats\n" KH_MODULE_PATH
             "[stats]\n%s",
             stats);
    kh_proc *p = kh_spawn(conf, NULL);
    int rc = kh_wait_exit(p, 10000);
    kh_assert(p, rc == 1, "exit %d for [stats] %s", rc, stats);
    kh_assert(p, strstr(kh_stderr(p), needle) != NULL, "no '%s' in the log", needle);
    kh_stop(p);
}

Test(stats, bad_config, .timeout = 60, .fini = kh_cleanup_all)
{
    refused("allow = 10.0.0.0/40\n", "[stats] allow: '10.0.0.0/40' is not an IP address");
    refused("allow = localhost\n", "'localhost' is not an IP address");
    refused("text_path = stats\n", "[stats] text_path: 'stats' is not a path");
    refused("json_path = /a\"b\n", "a path cannot hold '\"'");
    refused("events_interval = 10ms\n",
            "events_interval: expected a duration between 100ms and 1m");
    refused("text_path = /x\njson_path = /x\n", "cannot route /x");
}
