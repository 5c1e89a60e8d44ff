/* The statsd module (modules/statsd, a datagram protocol of ABI 1.9):
 * statsd lines sent over UDP from a real socket become series on the stats
 * module's /metrics, which `promtool check metrics` accepts; counters with
 * sample rates, gauges set and moved, timings and histograms with tags,
 * invalid lines counted, and the table's bound. */
#define _GNU_SOURCE
#include "test_stats.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

/* keel with http1 + stats (listener 0) and statsd on UDP (listener 1). */
static kh_proc *sd_start(const char *statsd_section)
{
    char conf[2048];
    snprintf(conf, sizeof conf,
             "[keel]\n"
             "listen = 127.0.0.1:0 http1\n"
             "listen = 127.0.0.1:0 statsd udp\n"
             "workers = 2\n"
             "modules = http1 stats statsd\n" KH_MODULE_PATH "[statsd]\n%s",
             statsd_section ? statsd_section : "");
    kh_proc *p = kh_start(conf, NULL, 2, 10000);
    kh_assert(p, kh_port(p, 0) > 0 && kh_port(p, 1) > 0, "no ports");
    return p;
}

static void sd_send(kh_proc *p, const char *datagram)
{
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)kh_port(p, 1))};
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    size_t n = strlen(datagram);
    kh_assert(
        p, fd >= 0 && sendto(fd, datagram, n, 0, (struct sockaddr *)&to, sizeof to) == (ssize_t)n,
        "sendto");
    close(fd);
}

/* The value of a series on /metrics, or -1 if it is not there yet. */
static double sd_value(kh_proc *p, const char *series)
{
    char *page = NULL;
    if (st_fetch(p, "/metrics", &page) != 200 || page == NULL) {
        free(page);
        return -1;
    }
    double v = -1;
    size_t n = strlen(series);
    for (const char *l = page; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
        if (strncmp(l, series, n) == 0 && l[n] == ' ')
            v = strtod(l + n + 1, NULL);
    free(page);
    return v;
}

#define EXPECT_VALUE(p, series, want)                                                              \
    do {                                                                                           \
        double got_ = sd_value(p, series);                                                         \
        kh_assert(p, got_ == (want), "%s is %g, expected %g", series, got_, (double)(want));       \
    } while (0)

Test(statsd, lines_become_series_promtool_accepts, .timeout = 90, .fini = kh_cleanup_all)
{
    kh_proc *p = sd_start(NULL);
    /* Several lines per datagram, CRLF and blank lines among them. */
    sd_send(p, "app.requests:1|c\n"
               "app.requests:2|c|@0.5\r\n"
               "\n"
               "queue.depth:10|g\n"
               "queue.depth:-3|g\n"
               "queue.depth:+1.5|g\n"
               "db.latency:12.5|ms|#db:main,region:eu\n"
               "db.latency:250|h|#region:eu,db:main\n"
               "9bad-name/x:1|c|#path:a\"b\n");
    sd_send(p, "not a metric\n"
               "visitors:1|s\n"
               "x:abc|c\n"
               "x:1|q\n"
               "x:1|c|@2\n"
               "keel_fake:1|c\n"
               "x:-1|c\n"
               "x:1|c|#le:3\n");
    kh_assert(p, KH_WAIT_UNTIL(sd_value(p, "statsd_lines_total") == 8, 5000),
              "statsd_lines_total never reached 8: %g", sd_value(p, "statsd_lines_total"));
    kh_assert(p, KH_WAIT_UNTIL(sd_value(p, "keel_udp_datagrams_received_total") == 2, 5000),
              "keel_udp_datagrams_received_total is not 2");
    /* 1 + 2 sampled at 0.5 (statsd counts it as 4): 5; "_total" added. */
    EXPECT_VALUE(p, "app_requests_total", 5);
    EXPECT_VALUE(p, "queue_depth", 8.5);
    EXPECT_VALUE(p, "db_latency_count{db=\"main\",region=\"eu\"}", 2);
    EXPECT_VALUE(p, "db_latency_bucket{db=\"main\",region=\"eu\",le=\"0.025\"}", 1);
    EXPECT_VALUE(p, "db_latency_bucket{db=\"main\",region=\"eu\",le=\"0.25\"}", 2);
    EXPECT_VALUE(p, "db_latency_sum{db=\"main\",region=\"eu\"}", 0.2625);
    EXPECT_VALUE(p, "_9bad_name_x_total{path=\"a\\\"b\"}", 1);
    EXPECT_VALUE(p, "statsd_lines_invalid_total{reason=\"format\"}", 1);
    EXPECT_VALUE(p, "statsd_lines_invalid_total{reason=\"unsupported\"}", 1);
    EXPECT_VALUE(p, "statsd_lines_invalid_total{reason=\"value\"}", 2);
    EXPECT_VALUE(p, "statsd_lines_invalid_total{reason=\"type\"}", 1);
    EXPECT_VALUE(p, "statsd_lines_invalid_total{reason=\"rate\"}", 1);
    EXPECT_VALUE(p, "statsd_lines_invalid_total{reason=\"reserved\"}", 1);
    EXPECT_VALUE(p, "statsd_lines_invalid_total{reason=\"tags\"}", 1);
    st_need_promtool();
    st_promtool_check(p, "/metrics");
    st_promtool_check(p, "/metrics?per_worker=1");
}

/* New names beyond max_metrics are dropped and counted; known ones still
 * count; a name of another type is refused. */
Test(statsd, table_is_bounded, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = sd_start("max_metrics = 3\nprefix = app_\n");
    sd_send(p, "a:1|c\nb:1|g\nc:1|ms\nd:1|c\ne:1|c\na:1|c\nb:1|c\nc:1|g\n");
    kh_assert(p, KH_WAIT_UNTIL(sd_value(p, "statsd_lines_total") == 4, 5000),
              "statsd_lines_total never reached 4: %g", sd_value(p, "statsd_lines_total"));
    /* d, e, and b as a counter (app_b_total, a new name) */
    EXPECT_VALUE(p, "statsd_series_dropped_total", 3);
    EXPECT_VALUE(p, "app_a_total", 2);
    EXPECT_VALUE(p, "app_d_total", -1);
    EXPECT_VALUE(p, "app_b", 1);
    /* c is a timing: a gauge line for it is refused. */
    EXPECT_VALUE(p, "statsd_lines_invalid_total{reason=\"type_conflict\"}", 1);
    EXPECT_VALUE(p, "app_c_count", 1);
}

/* A client as applications have one: Python's socket module, the way the
 * statsd and datadog client libraries send (one datagram per call). */
Test(statsd, python_client, .timeout = 60, .fini = kh_cleanup_all)
{
    kh_proc *p = sd_start(NULL);
    char port[16];
    snprintf(port, sizeof port, "%u", kh_port(p, 1));
    const char *argv[] = {"python3", "-c",
                          "import socket, sys\n"
                          "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                          "for line in (b'py.hits:1|c|#lang:python', b'py.hits:2|c|#lang:python',"
                          " b'py.temp:21.5|g', b'py.req:8|ms'):\n"
                          "    s.sendto(line, ('127.0.0.1', int(sys.argv[1])))\n",
                          port, NULL};
    ht_run_result rr = ht_run(argv, 10000);
    int status = rr.status;
    ht_run_free(&rr);
    if (status == 127)
        cr_skip_test("python3 is not installed");
    kh_assert(p, status == 0, "python3 exited %d", status);
    kh_assert(p, KH_WAIT_UNTIL(sd_value(p, "statsd_lines_total") == 4, 5000),
              "statsd_lines_total never reached 4: %g", sd_value(p, "statsd_lines_total"));
    EXPECT_VALUE(p, "py_hits_total{lang=\"python\"}", 3);
    EXPECT_VALUE(p, "py_temp", 21.5);
    EXPECT_VALUE(p, "py_req_bucket{le=\"0.01\"}", 1);
}

Test(statsd, bad_prefix_refused, .timeout = 30, .fini = kh_cleanup_all)
{
    kh_expect_refused("[keel]\nlisten = 127.0.0.1:0 statsd udp\nmodules = statsd\n" KH_MODULE_PATH
                      "[statsd]\nprefix = 1app.\n",
                      6, "a prefix is up to 64", "bad prefix");
}
