/* stats.h — the stats module's internal interfaces, one section per file.
 *
 * Everything here has hidden visibility (keel_add_module builds with
 * -fvisibility=hidden): the module exports its descriptor only. buf.c,
 * allow.c, snap.c, prom.c, json.c and text.c use no keel function, only
 * the types of keel/metrics.h, so the unit test compiles them as they are
 * and feeds them made-up samples.
 */
#ifndef KEEL_STATS_H
#define KEEL_STATS_H

#include <keel/metrics.h>
#include <keel/util.h>

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__) || defined(__clang__)
#define ST_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define ST_PRINTF(f, a)
#endif

/* ---- buf.c: a growable byte buffer ---------------------------------------
 * Appends never fail loudly: the first failure (out of memory, or the body
 * passing ST_BUF_MAX) sets `failed` and later appends do nothing, so a
 * formatter checks once at the end. */

#define ST_BUF_MAX (64u << 20) /* no page is ever this big: a runaway guard */

typedef struct stats_buf {
    char *data;
    size_t len, cap;
    int failed;
} stats_buf;

void stats_buf_init(stats_buf *b);
void stats_buf_free(stats_buf *b);
void stats_buf_put(stats_buf *b, const void *data, size_t len);
void stats_buf_puts(stats_buf *b, const char *s);
void stats_buf_putc(stats_buf *b, char c);
void stats_buf_printf(stats_buf *b, const char *fmt, ...) ST_PRINTF(2, 3);
/* v in at most 15 significant digits ("0.25", "1e-06", "3"); NaN and
 * infinities as the exposition format spells them. */
void stats_buf_put_double(stats_buf *b, double v);
/* A JSON string literal, quotes included. */
void stats_buf_put_json_str(stats_buf *b, const char *s, size_t len);

/* ---- allow.c: the client allow-list ---------------------------------------- */

typedef struct stats_allow {
    keel_cidr *nets;
    size_t n;
    int any; /* `any` was listed: every client */
} stats_allow;

/* Adds every address or CIDR of a space- or comma-separated list; the
 * word `any` lets every client in. Returns 0, or -1 with the offending
 * word copied into bad. */
int stats_allow_add(stats_allow *a, const char *list, char *bad, size_t badsize);
/* 1 if `any` was listed or the client's address ("1.2.3.4", "::1", as
 * keel_request_peer_ip writes it) is on the list. */
int stats_allow_peer(const stats_allow *a, const char *ip);
void stats_allow_free(stats_allow *a);

/* ---- snap.c: one collection, copied ----------------------------------------
 * keel_metrics_collect's samples live during the visit only; a snapshot
 * keeps what the pages show: families in registration order, their series
 * (the workers' sums) and, for counters and gauges, each worker's value. */

typedef struct stats_series {
    char *labels; /* exposition-format pairs, "" if none */
    int64_t value;
    uint64_t count;
    int64_t sum;
    uint64_t *cumulative; /* histograms: per bound, nbounds entries */
    int64_t *per_worker;  /* counters and gauges: nworkers entries, or NULL */
} stats_series;

typedef struct stats_family {
    char *name, *help, *module;
    int type;
    double scale;
    int64_t *bounds;
    size_t nbounds;
    stats_series *series;
    size_t nseries, cap;
} stats_family;

typedef struct stats_module_info {
    const char *name, *version;
} stats_module_info;

typedef struct stats_snap {
    const char *version, *abi; /* the host's */
    double now;                /* Unix time (seconds, ms precision) when collected */
    uint64_t mono_ms;          /* the collecting worker's loop clock */
    double start_time;         /* Unix seconds the server started */
    unsigned nworkers;
    stats_module_info *modules;
    size_t nmodules;
    stats_family *fam;
    size_t nfam, cap;
    int failed; /* out of memory somewhere: the page answers 500 */
} stats_snap;

void stats_snap_init(stats_snap *s, unsigned nworkers);
void stats_snap_free(stats_snap *s);
/* A sample of a KEEL_METRICS_SUM collection: a new series. */
void stats_snap_add(stats_snap *s, const keel_metric_sample *sample);
/* A sample of a KEEL_METRICS_PER_WORKER collection: the worker's value of
 * a series added before (others are ignored). */
void stats_snap_add_worker(stats_snap *s, const keel_metric_sample *sample);
void stats_snap_add_module(stats_snap *s, const char *name, const char *version);
const stats_family *stats_snap_find(const stats_snap *s, const char *name);
/* The series with these labels ("" for none), or NULL. */
const stats_series *stats_family_series(const stats_family *f, const char *labels);
/* Exported value of a counter or gauge series (value * scale). */
double stats_value(const stats_family *f, const stats_series *s);
/* The q-quantile (0..1) of a histogram's buckets in exported units, by
 * linear interpolation inside the bucket as Prometheus's
 * histogram_quantile does; -1 without observations. cumulative has
 * nbounds entries, count is the +Inf bucket. */
double stats_quantile(const int64_t *bounds, const uint64_t *cumulative, size_t nbounds,
                      uint64_t count, double scale, double q);

/* ---- prom.c, json.c, text.c: the three renderings of a snapshot ------------ */

/* The Prometheus text exposition format 0.0.4. per_worker adds a
 * worker="N" series for each worker's counter and gauge values. */
void stats_render_prom(stats_buf *b, const stats_snap *s, int per_worker);
/* Prometheus label pairs as a JSON object ({"class":"2xx"}). */
void stats_render_labels_json(stats_buf *b, const char *labels);
void stats_render_json(stats_buf *b, const stats_snap *s);
void stats_render_text(stats_buf *b, const stats_snap *s);

/* ---- history.c: the dashboard's last minutes -------------------------------
 * Rings of cap samples, one per metric the charts use, filled by one
 * worker's timer and read by any (under the file's lock). The values are
 * as collected (counters, not rates). */

#define ST_HISTORY_CLASSES 5 /* 1xx..5xx */

typedef struct stats_history {
    size_t cap, n, head; /* n samples from head (the oldest), wrapping at cap */
    unsigned nworkers;
    size_t nbounds;          /* the latency histogram's, once seen */
    double *bounds;          /* nbounds, in seconds */
    uint64_t *mono;          /* the sampling worker's loop clock */
    double *open, *in, *out; /* NaN: the family was missing */
    double *req;             /* ST_HISTORY_CLASSES rings of cap */
    uint64_t *count, *cum;   /* cap; cap rows of nbounds */
    double *idle;            /* cap rows of nworkers */
} stats_history;

/* cap 0 keeps nothing. Returns 0, or -1 out of memory (h is then empty). */
int stats_history_init(stats_history *h, size_t cap, unsigned nworkers);
void stats_history_free(stats_history *h);
void stats_history_record(stats_history *h, const stats_snap *s);
/* The rings as one JSON object (the dashboard's "history" event):
 * {"interval_ms", "mono_ms": [...], one array per counter or gauge family,
 * keel_http_requests_total: {"1xx": [...], ...}, the duration histogram as
 * {"le", "count", "cumulative": [[...] per sample]}, the loop idle seconds
 * as [[per worker] per sample]}, oldest first; null for a missing value.
 * Returns how many samples it wrote. */
size_t stats_history_render(stats_buf *b, const stats_history *h, uint64_t interval_ms);

/* The families the pages know by name (docs/metrics.md). */
#define ST_CONN_OPEN     "keel_connections_open"
#define ST_CONN_ACCEPTED "keel_connections_accepted_total"
#define ST_CONN_REJECTED "keel_connections_rejected_total"
#define ST_BYTES_IN      "keel_bytes_received_total"
#define ST_BYTES_OUT     "keel_bytes_sent_total"
#define ST_REQUESTS      "keel_http_requests_total"
#define ST_DURATION      "keel_http_request_duration_seconds"
#define ST_LOOP_IDLE     "keel_worker_loop_idle_seconds_total"
#define ST_START_TIME    "keel_start_time_seconds"

#endif
