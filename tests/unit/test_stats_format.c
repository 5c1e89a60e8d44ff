/* The stats module's formatters fed made-up samples: the Prometheus
 * exposition format (HELP/TYPE, escaping, histograms with scale), the JSON
 * page, the text page, quantile estimates, number formatting and the
 * address allow-list. The sources are the module's own
 * (modules/stats/{buf,allow,snap,prom,json,text}.c), compiled into this
 * test; they call no keel function. */
#include <criterion/criterion.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "stats.h"

/* ---- made-up samples --------------------------------------------------- */

static const int64_t bounds_us[] = {1000, 10000, 100000}; /* 1 ms, 10 ms, 100 ms */

static keel_metric_sample sample(const char *name, int type, const char *labels, int first,
                                 int64_t value)
{
    keel_metric_sample s = {
        .size = sizeof s,
        .module = "keel",
        .name = name,
        .help = "help",
        .type = type,
        .labels = labels,
        .scale = 1,
        .worker = KEEL_METRIC_ALL_WORKERS,
        .first_of_family = first,
        .value = value,
    };
    return s;
}

/* A snapshot of the shape the core's metrics have. */
static void fill(stats_snap *s)
{
    stats_snap_init(s, 2);
    s->version = "0.1.0";
    s->abi = "1.4";
    s->now = 1000;
    s->start_time = 900;
    stats_snap_add_module(s, "http1", "1.0.0");
    stats_snap_add_module(s, "stats", "");

    keel_metric_sample x = sample("keel_connections_open", KEEL_METRIC_GAUGE, "", 1, 3);
    x.help = "Open connections.";
    stats_snap_add(s, &x);

    x = sample("keel_http_requests_total", KEEL_METRIC_COUNTER, "class=\"2xx\"", 1, 90);
    x.help = "Requests by \\ class\nsecond line";
    stats_snap_add(s, &x);
    x = sample("keel_http_requests_total", KEEL_METRIC_COUNTER, "class=\"4xx\"", 0, 10);
    stats_snap_add(s, &x);

    static const uint64_t cum[] = {50, 90, 99};
    x = sample("keel_http_request_duration_seconds", KEEL_METRIC_HISTOGRAM, "", 1, 0);
    x.scale = 1e-6;
    x.count = 100;
    x.sum = 1234567; /* 1.234567 s */
    x.bounds = bounds_us;
    x.cumulative = cum;
    x.nbounds = 3;
    stats_snap_add(s, &x);

    x = sample("keel_worker_loop_idle_seconds_total", KEEL_METRIC_COUNTER, "", 1, 150000000);
    x.scale = 1e-6;
    stats_snap_add(s, &x);
    for (unsigned w = 0; w < 2; w++) {
        keel_metric_sample y = x;
        y.worker = w;
        y.value = w == 0 ? 90000000 : 60000000; /* 90 s and 60 s idle of 100 */
        stats_snap_add_worker(s, &y);
    }
}

static char *render(void (*fn)(stats_buf *, const stats_snap *), const stats_snap *s)
{
    stats_buf b;
    stats_buf_init(&b);
    fn(&b, s);
    cr_assert(!b.failed);
    return b.data;
}

/* ---- Prometheus ---------------------------------------------------------- */

Test(stats_prom, exposition_format, .timeout = 10)
{
    stats_snap s;
    fill(&s);
    stats_buf b;
    stats_buf_init(&b);
    stats_render_prom(&b, &s, 0);
    const char *want = "# HELP keel_connections_open Open connections.\n"
                       "# TYPE keel_connections_open gauge\n"
                       "keel_connections_open 3\n"
                       "# HELP keel_http_requests_total Requests by \\\\ class\\nsecond line\n"
                       "# TYPE keel_http_requests_total counter\n"
                       "keel_http_requests_total{class=\"2xx\"} 90\n"
                       "keel_http_requests_total{class=\"4xx\"} 10\n"
                       "# HELP keel_http_request_duration_seconds help\n"
                       "# TYPE keel_http_request_duration_seconds histogram\n"
                       "keel_http_request_duration_seconds_bucket{le=\"0.001\"} 50\n"
                       "keel_http_request_duration_seconds_bucket{le=\"0.01\"} 90\n"
                       "keel_http_request_duration_seconds_bucket{le=\"0.1\"} 99\n"
                       "keel_http_request_duration_seconds_bucket{le=\"+Inf\"} 100\n"
                       "keel_http_request_duration_seconds_sum 1.234567\n"
                       "keel_http_request_duration_seconds_count 100\n"
                       "# HELP keel_worker_loop_idle_seconds_total help\n"
                       "# TYPE keel_worker_loop_idle_seconds_total counter\n"
                       "keel_worker_loop_idle_seconds_total 150\n";
    cr_assert_str_eq(b.data, want);
    stats_buf_free(&b);
    stats_snap_free(&s);
}

Test(stats_prom, histogram_labels_and_per_worker, .timeout = 10)
{
    stats_snap s;
    stats_snap_init(&s, 2);
    static const uint64_t cum[] = {1};
    static const int64_t one[] = {5};
    keel_metric_sample x = sample("h", KEEL_METRIC_HISTOGRAM, "a=\"x\\\"y\"", 1, 0);
    x.help = "";
    x.count = 2;
    x.sum = 7;
    x.bounds = one;
    x.cumulative = cum;
    x.nbounds = 1;
    stats_snap_add(&s, &x);
    x = sample("c_total", KEEL_METRIC_COUNTER, "k=\"v\"", 1, 5);
    stats_snap_add(&s, &x);
    x.worker = 0, x.value = 2;
    stats_snap_add_worker(&s, &x);
    x.worker = 1, x.value = 3;
    stats_snap_add_worker(&s, &x);

    stats_buf b;
    stats_buf_init(&b);
    stats_render_prom(&b, &s, 1);
    /* No HELP line for an empty help; label values pass through escaped;
     * per-worker series replace the sum for counters only. */
    cr_assert_str_eq(b.data, "# TYPE h histogram\n"
                             "h_bucket{a=\"x\\\"y\",le=\"5\"} 1\n"
                             "h_bucket{a=\"x\\\"y\",le=\"+Inf\"} 2\n"
                             "h_sum{a=\"x\\\"y\"} 7\n"
                             "h_count{a=\"x\\\"y\"} 2\n"
                             "# HELP c_total help\n"
                             "# TYPE c_total counter\n"
                             "c_total{k=\"v\",worker=\"0\"} 2\n"
                             "c_total{k=\"v\",worker=\"1\"} 3\n");
    stats_buf_free(&b);
    stats_snap_free(&s);
}

/* ---- JSON ------------------------------------------------------------------ */

Test(stats_json, snapshot, .timeout = 10)
{
    stats_snap s;
    fill(&s);
    char *j = render(stats_render_json, &s);
    cr_assert(strncmp(j, "{\"version\":\"0.1.0\",\"abi\":\"1.4\",\"time\":1000,", 43) == 0, "%s",
              j);
    cr_assert(strstr(j, "\"uptime_seconds\":100,\"workers\":2,\"modules\":[{\"name\":\"http1\","
                        "\"version\":\"1.0.0\"},{\"name\":\"stats\",\"version\":\"\"}]"),
              "%s", j);
    cr_assert(strstr(j, "\"keel_http_requests_total\":{\"type\":\"counter\",\"help\":\"Requests by "
                        "\\\\ class\\nsecond line\",\"module\":\"keel\",\"series\":[{\"labels\":{"
                        "\"class\":\"2xx\"},\"value\":90},"),
              "%s", j);
    cr_assert(strstr(j,
                     "{\"labels\":{},\"count\":100,\"sum\":1.234567,\"buckets\":[[0.001,50],[0.01,"
                     "90],[0.1,99]]}"),
              "%s", j);
    cr_assert(strstr(j, "{\"labels\":{},\"value\":150,\"workers\":[90,60]}"), "%s", j);
    cr_assert(strcmp(j + strlen(j) - 3, "}}\n") == 0);
    free(j);
    stats_snap_free(&s);
}

Test(stats_json, labels_unescaped_then_escaped, .timeout = 10)
{
    stats_buf b;
    stats_buf_init(&b);
    stats_render_labels_json(&b, "a=\"1\",path=\"C:\\\\x \\\"q\\\"\\n\"");
    cr_assert_str_eq(b.data, "{\"a\":\"1\",\"path\":\"C:\\\\x \\\"q\\\"\\n\"}");
    b.len = 0;
    stats_render_labels_json(&b, "");
    cr_assert_str_eq(b.data, "{}");
    stats_buf_free(&b);
}

/* ---- text ------------------------------------------------------------------ */

Test(stats_text, headline_and_every_metric, .timeout = 10)
{
    stats_snap s;
    fill(&s);
    char *t = render(stats_render_text, &s);
    cr_assert(strstr(t, "keel 0.1.0 (ABI 1.4)\n"), "%s", t);
    cr_assert(strstr(t, "uptime          1m 40s\n"), "%s", t);
    cr_assert(strstr(t, "modules         http1 1.0.0, stats\n"), "%s", t);
    cr_assert(strstr(t, "connections     3 open, 0 accepted, 0 rejected\n"), "%s", t);
    cr_assert(strstr(t, "requests        100 (1.00/s average since start)\n"), "%s", t);
    cr_assert(strstr(t, "2xx 90  4xx 10\n"), "%s", t);
    /* p50: rank 50 is the whole first bucket, 1 ms; p90: 10 ms; p99: 100 ms. */
    cr_assert(strstr(t, "latency         p50 1.0 ms, p90 10.0 ms, p99 100.0 ms, mean 12.3 ms"),
              "%s", t);
    cr_assert(strstr(t, "worker 0     10.0%\n"), "%s", t);
    cr_assert(strstr(t, "worker 1     40.0%\n"), "%s", t);
    cr_assert(strstr(t, "  keel_http_requests_total{class=\"4xx\"} 10\n"), "%s", t);
    cr_assert(strstr(t, "  keel_http_request_duration_seconds count 100 sum 1.234567\n"), "%s", t);
    free(t);
    stats_snap_free(&s);
}

Test(stats_text, empty_snapshot, .timeout = 10)
{
    stats_snap s;
    stats_snap_init(&s, 1);
    char *t = render(stats_render_text, &s);
    cr_assert(strstr(t, "latency         no requests yet\n"), "%s", t);
    free(t);
    stats_snap_free(&s);
}

/* ---- numbers --------------------------------------------------------------- */

Test(stats_numbers, quantile_interpolates, .timeout = 10)
{
    static const int64_t b[] = {10, 20, 40};
    static const uint64_t c[] = {0, 10, 20};
    cr_assert(stats_quantile(b, c, 3, 0, 1, 0.5) < 0);
    /* rank 5 of 20: halfway through (10, 20]. */
    cr_assert_float_eq(stats_quantile(b, c, 3, 20, 1, 0.25), 15, 1e-9);
    cr_assert_float_eq(stats_quantile(b, c, 3, 20, 1, 0.75), 30, 1e-9);
    cr_assert_float_eq(stats_quantile(b, c, 3, 20, 1e-3, 1.0), 0.040, 1e-12);
    /* In the +Inf bucket: the highest bound. */
    cr_assert_float_eq(stats_quantile(b, c, 3, 40, 1, 0.99), 40, 1e-9);
}

Test(stats_numbers, doubles, .timeout = 10)
{
    static const struct {
        double v;
        const char *want;
    } cases[] = {
        {0, "0"},
        {3, "3"},
        {-2, "-2"},
        {0.25, "0.25"},
        {123 * 1e-6, "0.000123"},
        {1e-6, "1e-06"},
        {1.5e300, "1.5e+300"},
        {NAN, "NaN"},
        {INFINITY, "+Inf"},
        {-INFINITY, "-Inf"},
        {9007199254740993.0, "9007199254740992"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        stats_buf b;
        stats_buf_init(&b);
        stats_buf_put_double(&b, cases[i].v);
        cr_assert_str_eq(b.data, cases[i].want);
        stats_buf_free(&b);
    }
}

Test(stats_numbers, buffer_grows_and_json_escapes, .timeout = 10)
{
    stats_buf b;
    stats_buf_init(&b);
    for (int i = 0; i < 10000; i++)
        stats_buf_printf(&b, "%d,", i);
    cr_assert(!b.failed && b.len > 40000 && strncmp(b.data + b.len - 5, "9999,", 5) == 0);
    b.len = 0;
    stats_buf_put_json_str(&b, "a\"b\\c\n\x01\x7f", 8);
    cr_assert_str_eq(b.data, "\"a\\\"b\\\\c\\n\\u0001\\u007f\"");
    stats_buf_free(&b);
}

/* ---- allow-list ------------------------------------------------------------- */

Test(stats_allow, peers, .timeout = 10)
{
    stats_allow al = {0};
    char bad[64];
    cr_assert(!stats_allow_peer(&al, "203.0.113.9"), "an empty list lets nobody in");
    cr_assert(stats_allow_add(&al, "127.0.0.1 ::1, 10.0.0.0/8", bad, sizeof bad) == 0);
    cr_assert(stats_allow_add(&al, "2001:db8::/32", bad, sizeof bad) == 0);
    cr_assert(stats_allow_peer(&al, "127.0.0.1"));
    cr_assert(stats_allow_peer(&al, "::1"));
    cr_assert(stats_allow_peer(&al, "10.200.3.4"));
    cr_assert(stats_allow_peer(&al, "::ffff:10.9.9.9"), "IPv4-mapped matches IPv4 rules");
    cr_assert(stats_allow_peer(&al, "2001:db8:ffff::1"));
    cr_assert(!stats_allow_peer(&al, "2001:db9::1"));
    cr_assert(!stats_allow_peer(&al, "127.0.0.2"));
    cr_assert(!stats_allow_peer(&al, "11.0.0.1"));
    cr_assert(!stats_allow_peer(&al, "::2"));
    cr_assert(!stats_allow_peer(&al, "garbage"));
    cr_assert(!stats_allow_peer(&al, "127.0.0.1:5678"), "a port is not an address");
    cr_assert(stats_allow_add(&al, "10.0.0.0/33", bad, sizeof bad) < 0);
    cr_assert_str_eq(bad, "10.0.0.0/33");
    cr_assert(stats_allow_add(&al, "ok.example", bad, sizeof bad) < 0);
    cr_assert(stats_allow_add(&al, "::/0", bad, sizeof bad) == 0);
    cr_assert(stats_allow_peer(&al, "2001:db9::1"), "::/0 allows every IPv6 address");
    stats_allow_free(&al);
    cr_assert(stats_allow_add(&al, "10.0.0.0/8", bad, sizeof bad) == 0);
    cr_assert(!stats_allow_peer(&al, "203.0.113.9"));
    cr_assert(stats_allow_add(&al, "any", bad, sizeof bad) == 0);
    cr_assert(stats_allow_peer(&al, "203.0.113.9"), "`any` lets every client in");
    stats_allow_free(&al);
}

Test(stats_allow, prefix_bits, .timeout = 10)
{
    stats_allow al = {0};
    char bad[64];
    cr_assert(stats_allow_add(&al, "192.168.1.128/25", bad, sizeof bad) == 0);
    cr_assert(stats_allow_peer(&al, "192.168.1.200"));
    cr_assert(!stats_allow_peer(&al, "192.168.1.127"));
    stats_allow_free(&al);
}
