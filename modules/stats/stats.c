/* stats — keel's statistics pages and live dashboard.
 *
 *     [stats]
 *     text_path = /__stats              ; plain text for people (curl)
 *     json_path = /__stats.json         ; everything, as JSON (?history=1: the history)
 *     metrics_path = /metrics           ; Prometheus text format 0.0.4
 *     dashboard_path = /__stats/        ; the live dashboard (HTML)
 *     events_path = /__stats/events     ; its Server-Sent Events stream
 *     ready_path = /__ready             ; readiness: 200, 503 once shutting down
 *     events_interval = 1s              ; one snapshot per stream this often
 *     max_event_streams = 16            ; dashboards per worker; more get 503
 *     history = 5m                      ; the dashboard's last minutes, sent to a new page
 *     allow = 127.0.0.1 ::1 10.0.0.0/8  ; who may look (repeatable); default: loopback
 *                                       ; only; `any`: every client
 *
 * An empty path turns that page off. Nothing here runs on the request path
 * of other routes: the core counts, and this module reads the counts when
 * a page is asked for (docs/stats.md).
 */
#include "mod.h"

#include <stdlib.h>
#include <string.h>

extern const unsigned char stats_dashboard_html[];
extern const size_t stats_dashboard_html_len;

static void free_body(void *data, void *userdata)
{
    (void)userdata;
    free(data);
}

int stats_admit(const stats *st, keel_request *req, keel_response *res)
{
    if (st->allow.any)
        return 1;
    char ip[64];
    if (keel_request_peer_ip(req, ip, sizeof ip) == KEEL_OK && stats_allow_peer(&st->allow, ip))
        return 1;
    keel_response_send_status(res, 403);
    return 0;
}

/* Hands b (rendered) over as the body without a copy, never cached; a
 * rendering that ran out of memory is KEEL_ERR_NOMEM (the core answers
 * 500). */
static int send_buf(keel_response *res, stats_buf *b, const char *type)
{
    if (b->failed) {
        stats_buf_free(b);
        return KEEL_ERR_NOMEM;
    }
    keel_response_header_set(res, "Content-Type", type);
    keel_response_header_set(res, "Cache-Control", "no-store");
    return keel_response_send(res, b->data, b->len, free_body, NULL);
}

enum page { PAGE_TEXT, PAGE_JSON, PAGE_PROM };

/* Collects, renders into one buffer and hands it over without a copy. */
static int send_page(keel_request *req, keel_response *res, const stats *st, enum page page)
{
    if (!stats_admit(st, req, res))
        return KEEL_OK;
    stats_snap snap;
    stats_collect(st, keel_request_worker(req), &snap);
    stats_buf b;
    stats_buf_init(&b);
    static const char *const types[] = {
        "text/plain; charset=utf-8",
        "application/json",
        "text/plain; version=0.0.4; charset=utf-8",
    };
    if (page == PAGE_TEXT) {
        stats_render_text(&b, &snap);
    } else if (page == PAGE_JSON) {
        stats_render_json(&b, &snap);
    } else {
        keel_str v;
        int per_worker = keel_request_query_param(req, "per_worker", &v) == KEEL_OK && v.len == 1 &&
                         v.ptr[0] == '1';
        stats_render_prom(&b, &snap, per_worker);
    }
    b.failed |= snap.failed;
    stats_snap_free(&snap);
    return send_buf(res, &b, types[page]);
}

static int text_handler(keel_request *req, keel_response *res, void *userdata)
{
    return send_page(req, res, userdata, PAGE_TEXT);
}

/* The JSON page; with ?history=1 the dashboard's history instead (the
 * "history" event's data), for a page that polls. */
static int json_handler(keel_request *req, keel_response *res, void *userdata)
{
    const stats *st = userdata;
    keel_str v;
    if (keel_request_query_param(req, "history", &v) != KEEL_OK || v.len != 1 || v.ptr[0] != '1')
        return send_page(req, res, st, PAGE_JSON);
    if (!stats_admit(st, req, res))
        return KEEL_OK;
    stats_buf b;
    stats_buf_init(&b);
    stats_history_render(&b, st->history, st->interval_ms);
    return send_buf(res, &b, "application/json");
}

static int prom_handler(keel_request *req, keel_response *res, void *userdata)
{
    return send_page(req, res, userdata, PAGE_PROM);
}

static int dashboard_handler(keel_request *req, keel_response *res, void *userdata)
{
    const stats *st = userdata;
    if (!stats_admit(st, req, res))
        return KEEL_OK;
    keel_response_header_set(res, "Content-Type", "text/html; charset=utf-8");
    keel_response_header_set(res, "Cache-Control", "no-cache");
    keel_response_header_set(res, "X-Content-Type-Options", "nosniff");
    /* Everything is inline and nothing comes from elsewhere: say so. */
    keel_response_header_set(res, "Content-Security-Policy",
                             "default-src 'self'; script-src 'unsafe-inline'; "
                             "style-src 'unsafe-inline'; img-src 'self' data:");
    /* Made once in load: borrowed, never freed while the module runs. */
    return keel_response_send(res, st->page.data, st->page.len, NULL, NULL);
}

/* A balancer's readiness probe: 503 from the first stop request on, which
 * with [keel] shutdown_delay comes while keel still serves, so the
 * balancer takes the instance out before its listeners close. Not when
 * this process drains after a reload: its successor serves the same
 * sockets, and a probe that reached the old one on its way out must not
 * take the instance out. Not behind `allow`: the balancer probes from
 * its own address, and the answer says nothing a connection attempt
 * would not. */
static int ready_handler(keel_request *req, keel_response *res, void *userdata)
{
    (void)userdata;
    int draining = keel_worker_stopping(keel_request_worker(req)) == KEEL_STOPPING;
    static const char ready[] = "ready\n", stopping[] = "draining\n";
    keel_response_set_status(res, draining ? 503 : 200);
    keel_response_header_set(res, "Content-Type", "text/plain; charset=utf-8");
    keel_response_header_set(res, "Cache-Control", "no-store");
    if (draining)
        return keel_response_send(res, stopping, sizeof stopping - 1, NULL, NULL);
    return keel_response_send(res, ready, sizeof ready - 1, NULL, NULL);
}

/* ---- configuration -------------------------------------------------------- */

/* A path must start with '/' and is written into the dashboard's script,
 * so the characters that could end a string or a script are refused. */
/* A path key's value: empty (that page off) or an origin-form path that
 * can go into the dashboard's JSON and a route as it is. */
static int check_path(keel_module *m, const char *key, const char *value)
{
    if (value[0] != '\0' && value[0] != '/')
        return keel_config_error(m, key, "'%s' is not a path (it must start with '/')", value);
    for (const char *p = value; *p; p++)
        if ((unsigned char)*p <= ' ' || strchr("\"'\\<>`", *p) != NULL)
            return keel_config_error(m, key, "'%s': a path cannot hold '%c'", value, *p);
    return KEEL_OK;
}

/* The [stats] section (keel/config.h). */
typedef struct stats_section {
    const char *text_path, *json_path, *metrics_path, *dashboard_path, *events_path, *ready_path;
    uint64_t events_interval_ms;
    int64_t max_event_streams;
    keel_config_list allow;
    uint64_t history_ms;
} stats_section;

static const keel_config_key stats_keys[] = {
    KEEL_KEY(stats_section, text_path, "text_path", KEEL_CONFIG_STRING, .def = "/__stats",
             .doc = "the plain-text summary; empty: off"),
    KEEL_KEY(stats_section, json_path, "json_path", KEEL_CONFIG_STRING, .def = "/__stats.json",
             .doc = "the JSON snapshot; empty: off"),
    KEEL_KEY(stats_section, metrics_path, "metrics_path", KEEL_CONFIG_STRING, .def = "/metrics",
             .doc = "Prometheus text exposition (docs/metrics.md); empty: off"),
    KEEL_KEY(stats_section, dashboard_path, "dashboard_path", KEEL_CONFIG_STRING,
             .def = "/__stats/", .doc = "the live dashboard; empty: off"),
    KEEL_KEY(stats_section, events_path, "events_path", KEEL_CONFIG_STRING,
             .doc = "the dashboard's event stream (SSE); default: events under dashboard_path"),
    KEEL_KEY(stats_section, ready_path, "ready_path", KEEL_CONFIG_STRING, .def = "/__ready",
             .doc = "readiness probe: 200, or 503 once keel stops; empty: off"),
    KEEL_KEY(stats_section, events_interval_ms, "events_interval", KEEL_CONFIG_DURATION,
             .def = "1s", .min = 100, .max = 60000, .doc = "how often the stream sends a snapshot"),
    KEEL_KEY(stats_section, max_event_streams, "max_event_streams", KEEL_CONFIG_INT, .def = "16",
             .min = 0, .max = 100000, .doc = "event streams open at once, per worker; 503 past it"),
    KEEL_KEY(stats_section, allow, "allow", KEEL_CONFIG_STRING, .flags = KEEL_CONFIG_LIST,
             .def = "127.0.0.1 ::1",
             .doc = "addresses or CIDR blocks that may see the pages (PROXY protocol aware); "
                    "`any`: every client. The default lets only the machine itself in"),
    KEEL_KEY(stats_section, history_ms, "history", KEEL_CONFIG_DURATION, .def = "5m", .min = 0,
             .max = 3600000,
             .doc = "how much of the dashboard's charts the server keeps (one sample per "
                    "events_interval, at most 3600) and sends a page first, so that a reload "
                    "draws at once; 0: none"),
};
KEEL_CONFIG_SCHEMA(stats_schema, stats_section, stats_keys);

/* The dashboard with the paths it talks to written in: the embedded page
 * holds "__KEEL_EVENTS__" and "__KEEL_JSON__" (quotes included) where
 * they go, replaced by JSON strings, or null for a page turned off. */
static int build_page(stats *st)
{
    static const char *const marks[] = {"\"__KEEL_EVENTS__\"", "\"__KEEL_JSON__\""};
    const char *values[] = {st->events_path, st->json_path};
    const char *p = (const char *)stats_dashboard_html, *end = p + stats_dashboard_html_len;
    stats_buf_init(&st->page);
    while (p < end) {
        const char *hit = NULL;
        int which = 0;
        for (int i = 0; i < 2; i++) {
            const char *h = strstr(p, marks[i]); /* the array ends with a NUL */
            if (h != NULL && (hit == NULL || h < hit)) {
                hit = h;
                which = i;
            }
        }
        if (hit == NULL) {
            stats_buf_put(&st->page, p, (size_t)(end - p));
            break;
        }
        stats_buf_put(&st->page, p, (size_t)(hit - p));
        if (values[which][0] == '\0')
            stats_buf_puts(&st->page, "null");
        else
            stats_buf_put_json_str(&st->page, values[which], strlen(values[which]));
        p = hit + strlen(marks[which]);
    }
    return st->page.failed ? KEEL_ERR_NOMEM : KEEL_OK;
}

static int read_config(keel_module *m, stats *st)
{
    const stats_section *c = keel_module_config(m);
    const char *events = c->events_path ? c->events_path : "";
    int rc;
    st->text_path = c->text_path;
    st->json_path = c->json_path;
    st->metrics_path = c->metrics_path;
    st->dashboard_path = c->dashboard_path;
    st->ready_path = c->ready_path;
    st->interval_ms = c->events_interval_ms;
    st->max_streams = c->max_event_streams;
    /* The dashboard keeps five minutes (KEEP in dashboard.html); the rings
     * are sized for the key, bounded so a short interval cannot make them
     * large: 3600 samples of about 30 numbers each. */
    size_t samples =
        c->history_ms ? (size_t)((c->history_ms + st->interval_ms - 1) / st->interval_ms) : 0;
    if (samples > 3600)
        samples = 3600;
    if ((st->history = malloc(sizeof *st->history)) == NULL ||
        stats_history_init(st->history, samples, keel_module_worker_count(m)) < 0)
        return KEEL_ERR_NOMEM;
    if ((rc = check_path(m, "text_path", st->text_path)) < 0 ||
        (rc = check_path(m, "json_path", st->json_path)) < 0 ||
        (rc = check_path(m, "metrics_path", st->metrics_path)) < 0 ||
        (rc = check_path(m, "dashboard_path", st->dashboard_path)) < 0 ||
        (rc = check_path(m, "events_path", events)) < 0 ||
        (rc = check_path(m, "ready_path", st->ready_path)) < 0)
        return rc;

    /* The stream sits under the dashboard unless placed elsewhere:
     * /__stats/ -> /__stats/events, /dash -> /dash/events. */
    const char *from = events, *tail = "";
    if (events[0] == '\0' && st->dashboard_path[0] != '\0') {
        from = st->dashboard_path;
        tail = from[strlen(from) - 1] == '/' ? "events" : "/events";
    }
    size_t len = strlen(from) + strlen(tail);
    if ((st->events_path = malloc(len + 1)) == NULL)
        return KEEL_ERR_NOMEM;
    strcpy(st->events_path, from);
    strcat(st->events_path, tail);

    size_t n = c->allow.count;
    for (size_t i = 0; i < n; i++) {
        const char *list = c->allow.items[i];
        char bad[64];
        if (stats_allow_add(&st->allow, list, bad, sizeof bad) < 0)
            return keel_config_error(m, "allow", "'%s' is not an IP address or CIDR block", bad);
    }
    if (st->allow.n == 0 && !st->allow.any)
        return keel_config_error(m, "allow",
                                 "lists no address (`allow = any` lets every client in)");
    return KEEL_OK;
}

static int add_routes(keel_module *m, stats *st)
{
    struct {
        const char *path;
        keel_http_handler handler;
    } routes[] = {
        {st->text_path, text_handler},           {st->json_path, json_handler},
        {st->metrics_path, prom_handler},        {st->dashboard_path, dashboard_handler},
        {st->events_path, stats_events_handler}, {st->ready_path, ready_handler},
    };
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        if (routes[i].path[0] == '\0')
            continue;
        int rc = keel_route_add(m, "GET", routes[i].path, routes[i].handler, st);
        if (rc < 0) {
            keel_log(m, KEEL_LOG_ERROR, "[stats] cannot route %s: %s", routes[i].path,
                     keel_strerror(rc));
            return rc;
        }
    }
    return KEEL_OK;
}

static void stats_free(stats *st)
{
    if (st->history != NULL)
        stats_history_free(st->history);
    free(st->history);
    stats_allow_free(&st->allow);
    stats_buf_free(&st->page);
    free(st->events_path);
    free(st);
}

static int stats_load(keel_module *m)
{
    stats *st = calloc(1, sizeof *st);
    if (st == NULL)
        return KEEL_ERR_NOMEM;
    st->module = m;
    st->loaded_at = keel_time_now();
    int rc;
    if ((rc = read_config(m, st)) < 0 || (rc = build_page(st)) < 0 ||
        (rc = add_routes(m, st)) < 0) {
        stats_free(st);
        return rc;
    }
    keel_module_set_data(m, st);
    return KEEL_OK;
}

/* Worker 0's beat: one sample of the history. Not while stopping: the
 * process is going, and a reload's successor keeps its own. */
static void sample_history(keel_timer *timer, void *userdata)
{
    (void)timer;
    stats_worker *ws = userdata;
    const stats *st = keel_module_data(ws->module);
    if (keel_worker_stopping(ws->worker))
        return;
    stats_snap snap;
    stats_collect(st, ws->worker, &snap);
    if (!snap.failed)
        stats_history_record(st->history, &snap);
    stats_snap_free(&snap);
}

static int stats_start(keel_module *m, keel_worker *w, void *state)
{
    stats *st = keel_module_data(m);
    stats_worker *ws = state;
    ws->worker = w;
    ws->module = m;
    /* One worker samples for all: a collection already sums the workers. */
    if (keel_worker_id(w) == 0 && st->history->cap > 0) {
        ws->sampler = keel_timer_start(w, 0, st->interval_ms, sample_history, ws);
        if (ws->sampler == NULL)
            return KEEL_ERR_NOMEM;
    }
    return KEEL_OK;
}

static void stats_stop(keel_module *m, keel_worker *w, void *state)
{
    (void)m;
    (void)w;
    stats_worker *ws = state;
    if (ws->sampler != NULL) {
        keel_timer_stop(ws->sampler);
        ws->sampler = NULL;
    }
    stats_events_stop(ws);
}

static void stats_unload(keel_module *m)
{
    stats_free(keel_module_data(m));
}

KEEL_MODULE(stats, .version = "1.0.0", .dependencies = NULL,
            .worker_state_size = sizeof(stats_worker), .load = stats_load, .start = stats_start,
            .stop = stats_stop, .unload = stats_unload, .config = &stats_schema);
