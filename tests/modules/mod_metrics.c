/* metrics — the metrics API (ABI 1.4) as a module author uses it, for
 * test_metrics.c. In load it registers
 *
 *     test_hits_total{route="a"}, test_hits_total{route="b"}   counters
 *     test_level                                               a gauge
 *     test_sizes  (bounds 10, 100, 1000)                       a histogram
 *
 * and checks that bad registrations fail as api_list.h says (it refuses to
 * load otherwise, naming the check). Routes:
 *
 *     GET /hit/:route       adds 1 to test_hits_total{route=...}
 *     GET /level?v=N        adds N to this worker's test_level (N may be negative: -5)
 *     GET /observe?v=N      observes N in test_sizes
 *     GET /dump             every series, summed:     "name{labels} value"
 *                           histograms: "name{labels} count=C sum=S le10=.. le100=.. le1000=.."
 *     GET /dump?per_worker=1  the same per worker:  "name{labels}@W value"
 *
 * start() tries to register after load and logs what it got. */
#include <keel/keel.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static keel_metric *hits_a, *hits_b, *level, *sizes;
static keel_module *self;

static const int64_t size_bounds[] = {10, 100, 1000};

static keel_metric_desc desc(const char *name, int type, const char *labels)
{
    keel_metric_desc d = {sizeof d, name, "test series", type, labels, 0, NULL, 0};
    if (type == KEEL_METRIC_HISTOGRAM) {
        d.bounds = size_bounds;
        d.nbounds = 3;
    }
    return d;
}

/* A registration that must fail with `want`. */
static int refused(keel_module *m, keel_metric_desc d, int want, const char *what)
{
    keel_metric *x = (keel_metric *)&x;
    int rc = keel_metric_register(m, &d, &x);
    if (rc != want || x != NULL) {
        keel_log(m, KEEL_LOG_ERROR, "self-check '%s': got %s, expected %s", what, keel_strerror(rc),
                 keel_strerror(want));
        return 0;
    }
    return 1;
}

static int64_t query_int(keel_request *req, const char *name)
{
    keel_str v;
    if (keel_request_query_param(req, name, &v) != KEEL_OK || v.len == 0 || v.len > 20)
        return 0;
    char buf[24];
    memcpy(buf, v.ptr, v.len);
    buf[v.len] = '\0';
    return strtoll(buf, NULL, 10);
}

static keel_worker *worker_of(keel_request *req)
{
    return keel_request_worker(req);
}

static int hit(keel_request *req, keel_response *res, void *ud)
{
    (void)ud;
    keel_str route = keel_request_param(req, "route");
    keel_metric *m = route.len == 1 && route.ptr[0] == 'a'   ? hits_a
                     : route.len == 1 && route.ptr[0] == 'b' ? hits_b
                                                             : NULL;
    if (m == NULL)
        return keel_response_send_status(res, 404);
    keel_metric_add(worker_of(req), m, 1);
    return keel_response_send(res, "ok\n", 3, NULL, NULL);
}

static int set_level(keel_request *req, keel_response *res, void *ud)
{
    (void)ud;
    keel_metric_add(worker_of(req), level, query_int(req, "v"));
    return keel_response_send(res, "ok\n", 3, NULL, NULL);
}

static int observe(keel_request *req, keel_response *res, void *ud)
{
    (void)ud;
    keel_metric_observe(worker_of(req), sizes, query_int(req, "v"));
    return keel_response_send(res, "ok\n", 3, NULL, NULL);
}

typedef struct text {
    char *buf;
    size_t len, cap;
} text;

static void put(text *t, const char *fmt, ...) KEEL_PRINTF(2, 3);
static void put(text *t, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (n < 0)
            return;
        if ((size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = (t->cap + (size_t)n) * 2;
        char *grown = realloc(t->buf, cap);
        if (grown == NULL)
            return;
        t->buf = grown;
        t->cap = cap;
    }
}

static void visit(const keel_metric_sample *s, void *ud)
{
    text *t = ud;
    put(t, "%s{%s}", s->name, s->labels);
    if (s->worker != KEEL_METRIC_ALL_WORKERS)
        put(t, "@%u", s->worker);
    if (s->type != KEEL_METRIC_HISTOGRAM) {
        put(t, " %lld%s\n", (long long)s->value, s->first_of_family ? " first" : "");
        return;
    }
    put(t, " count=%llu sum=%lld", (unsigned long long)s->count, (long long)s->sum);
    for (size_t i = 0; i < s->nbounds; i++)
        put(t, " le%lld=%llu", (long long)s->bounds[i], (unsigned long long)s->cumulative[i]);
    put(t, "%s\n", s->first_of_family ? " first" : "");
}

static void free_text(void *data, void *ud)
{
    (void)ud;
    free(data);
}

static int dump(keel_request *req, keel_response *res, void *ud)
{
    (void)ud;
    text t = {NULL, 0, 0};
    unsigned flags = query_int(req, "per_worker") ? KEEL_METRICS_PER_WORKER : KEEL_METRICS_SUM;
    int rc = keel_metrics_collect(self, flags, visit, &t);
    if (rc != KEEL_OK || t.buf == NULL) {
        free(t.buf);
        return keel_response_send_status(res, 500);
    }
    keel_response_header_set(res, "Content-Type", "text/plain");
    return keel_response_send(res, t.buf, t.len, free_text, NULL);
}

static int metrics_load(keel_module *m)
{
    self = m;
    keel_metric_desc d;
    int rc;
    if ((d = desc("test_hits_total", KEEL_METRIC_COUNTER, "route=\"a\""),
         rc = keel_metric_register(m, &d, &hits_a)) != KEEL_OK ||
        (d = desc("test_hits_total", KEEL_METRIC_COUNTER, "route=\"b\""),
         rc = keel_metric_register(m, &d, &hits_b)) != KEEL_OK ||
        (d = desc("test_level", KEEL_METRIC_GAUGE, NULL),
         rc = keel_metric_register(m, &d, &level)) != KEEL_OK ||
        (d = desc("test_sizes", KEEL_METRIC_HISTOGRAM, NULL),
         rc = keel_metric_register(m, &d, &sizes)) != KEEL_OK)
        return rc;

    keel_metric_desc bad_bounds = desc("test_bad_bounds", KEEL_METRIC_HISTOGRAM, NULL);
    static const int64_t decreasing[] = {5, 1};
    bad_bounds.bounds = decreasing;
    bad_bounds.nbounds = 2;
    int ok = refused(m, desc("test_hits_total", KEEL_METRIC_COUNTER, "route=\"a\""),
                     KEEL_ERR_EXISTS, "a series twice") &&
             refused(m, desc("test_hits_total", KEEL_METRIC_GAUGE, "route=\"c\""), KEEL_ERR_INVAL,
                     "another type in a family") &&
             refused(m, desc("1bad", KEEL_METRIC_COUNTER, NULL), KEEL_ERR_INVAL, "a bad name") &&
             refused(m, desc("test_x", KEEL_METRIC_COUNTER, "worker=\"1\""), KEEL_ERR_INVAL,
                     "the core's label") &&
             refused(m, desc("test_x", KEEL_METRIC_COUNTER, "a=\"unterminated"), KEEL_ERR_INVAL,
                     "an unterminated label value") &&
             refused(m, desc("test_x", KEEL_METRIC_COUNTER, "a=b"), KEEL_ERR_INVAL,
                     "an unquoted label value") &&
             refused(m, desc("test_x", 7, NULL), KEEL_ERR_INVAL, "an unknown type") &&
             refused(m, bad_bounds, KEEL_ERR_INVAL, "decreasing bounds");
    if (!ok)
        return KEEL_ERR_STATE;
    if (keel_metrics_collect(m, 0, visit, NULL) != KEEL_ERR_STATE) {
        keel_log(m, KEEL_LOG_ERROR, "self-check: collect in load did not fail");
        return KEEL_ERR_STATE;
    }
    keel_log(m, KEEL_LOG_INFO, "metrics self-check passed");

    if ((rc = keel_route_add(m, "GET", "/hit/:route", hit, NULL)) != KEEL_OK ||
        (rc = keel_route_add(m, "GET", "/level", set_level, NULL)) != KEEL_OK ||
        (rc = keel_route_add(m, "GET", "/observe", observe, NULL)) != KEEL_OK ||
        (rc = keel_route_add(m, "GET", "/dump", dump, NULL)) != KEEL_OK)
        return rc;
    return KEEL_OK;
}

static int metrics_start(keel_module *m, keel_worker *w, void *state)
{
    (void)w;
    (void)state;
    keel_metric_desc d = desc("test_late", KEEL_METRIC_COUNTER, NULL);
    keel_metric *x = NULL;
    int rc = keel_metric_register(m, &d, &x);
    keel_log(m, KEEL_LOG_INFO, "late registration: %s", keel_strerror(rc));
    return KEEL_OK;
}

KEEL_MODULE(metrics, .version = "1.0.0", .load = metrics_load, .start = metrics_start);
