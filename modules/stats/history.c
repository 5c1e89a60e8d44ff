/* history.c — the last minutes of what the dashboard charts, kept by the
 * server so that a page opened (or reloaded) draws them at once instead of
 * starting empty.
 *
 * One ring per metric the charts use, all of the same length and indexed
 * together: the loop clock of each sample, the open connections, the
 * requests by status class, the latency histogram's count and cumulative
 * buckets, each worker's loop idle seconds and the bytes in and out. The
 * values are the counters themselves, not rates: the page derives rates
 * from consecutive samples exactly as it does from live snapshots, so one
 * code path draws both. Sampled by one worker (stats.c), read by whichever
 * worker a page's stream lands on, under one lock held for a copy's
 * length. */
#include "stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* One stats module per process: one lock for its history. */
static keel_mutex history_lock = KEEL_MUTEX_INIT;

static const char *const classes[ST_HISTORY_CLASSES] = {"1xx", "2xx", "3xx", "4xx", "5xx"};

int stats_history_init(stats_history *h, size_t cap, unsigned nworkers)
{
    memset(h, 0, sizeof *h);
    h->cap = cap;
    h->nworkers = nworkers;
    if (cap == 0)
        return 0;
    h->mono = calloc(cap, sizeof *h->mono);
    h->open = calloc(cap, sizeof *h->open);
    h->in = calloc(cap, sizeof *h->in);
    h->out = calloc(cap, sizeof *h->out);
    h->req = calloc(cap * ST_HISTORY_CLASSES, sizeof *h->req);
    h->count = calloc(cap, sizeof *h->count);
    h->idle = calloc(cap * (nworkers ? nworkers : 1), sizeof *h->idle);
    if (!h->mono || !h->open || !h->in || !h->out || !h->req || !h->count || !h->idle) {
        stats_history_free(h);
        return -1;
    }
    return 0;
}

void stats_history_free(stats_history *h)
{
    free(h->mono);
    free(h->open);
    free(h->in);
    free(h->out);
    free(h->req);
    free(h->count);
    free(h->cum);
    free(h->bounds);
    free(h->idle);
    memset(h, 0, sizeof *h);
}

/* A counter's or gauge's value summed over its series; NaN without the
 * family (a server without HTTP has no request counters). */
static double family_total(const stats_snap *s, const char *name)
{
    const stats_family *f = stats_snap_find(s, name);
    if (f == NULL)
        return NAN;
    double sum = 0;
    for (size_t i = 0; i < f->nseries; i++)
        sum += stats_value(f, &f->series[i]);
    return sum;
}

/* The histogram's bounds as the page sees them. A change (never expected:
 * bounds are fixed at registration) empties the ring rather than mixing
 * two shapes. Returns 0, or -1 out of memory (then no histogram is kept). */
static int fit_bounds(stats_history *h, const stats_family *f)
{
    if (h->cum != NULL && h->nbounds == f->nbounds) {
        for (size_t i = 0; i < f->nbounds; i++)
            if (h->bounds[i] != (double)f->bounds[i] * f->scale)
                goto reshape;
        return 0;
    }
reshape:
    free(h->cum);
    free(h->bounds);
    h->n = h->head = 0;
    h->nbounds = f->nbounds;
    h->cum = calloc(h->cap * (f->nbounds ? f->nbounds : 1), sizeof *h->cum);
    h->bounds = calloc(f->nbounds ? f->nbounds : 1, sizeof *h->bounds);
    if (h->cum == NULL || h->bounds == NULL) {
        free(h->cum);
        free(h->bounds);
        h->cum = NULL;
        h->bounds = NULL;
        h->nbounds = 0;
        return -1;
    }
    for (size_t i = 0; i < f->nbounds; i++)
        h->bounds[i] = (double)f->bounds[i] * f->scale;
    return 0;
}

void stats_history_record(stats_history *h, const stats_snap *s)
{
    if (h->cap == 0)
        return;
    keel_mutex_lock(&history_lock);
    const stats_family *dur = stats_snap_find(s, ST_DURATION);
    const stats_series *hs = dur && dur->nseries > 0 ? &dur->series[0] : NULL;
    if (hs != NULL)
        fit_bounds(h, dur);
    size_t i = (h->head + h->n) % h->cap;
    if (h->n == h->cap)
        h->head = (h->head + 1) % h->cap;
    else
        h->n++;
    h->mono[i] = s->mono_ms;
    h->open[i] = family_total(s, ST_CONN_OPEN);
    h->in[i] = family_total(s, ST_BYTES_IN);
    h->out[i] = family_total(s, ST_BYTES_OUT);

    const stats_family *req = stats_snap_find(s, ST_REQUESTS);
    for (int c = 0; c < ST_HISTORY_CLASSES; c++)
        h->req[c * h->cap + i] = req ? 0 : NAN;
    for (size_t k = 0; req != NULL && k < req->nseries; k++) {
        const char *cls = strstr(req->series[k].labels, "class=\"");
        int digit = cls ? cls[7] - '1' : -1;
        if (digit >= 0 && digit < ST_HISTORY_CLASSES)
            h->req[digit * h->cap + i] += stats_value(req, &req->series[k]);
    }

    h->count[i] = hs ? hs->count : 0;
    if (h->cum != NULL)
        for (size_t b = 0; b < h->nbounds; b++)
            h->cum[i * h->nbounds + b] = hs && hs->cumulative ? hs->cumulative[b] : 0;

    const stats_family *idle = stats_snap_find(s, ST_LOOP_IDLE);
    const stats_series *is = idle && idle->nseries > 0 ? &idle->series[0] : NULL;
    for (unsigned w = 0; w < h->nworkers; w++)
        h->idle[i * h->nworkers + w] =
            is && is->per_worker ? (double)is->per_worker[w] * idle->scale : NAN;
    keel_mutex_unlock(&history_lock);
}

/* A number, or null for a value the server did not have. */
static void put_value(stats_buf *b, double v)
{
    if (isfinite(v))
        stats_buf_put_double(b, v);
    else
        stats_buf_puts(b, "null");
}

static void put_column(stats_buf *b, const char *name, const stats_history *h, const double *col)
{
    stats_buf_printf(b, ",\"%s\":[", name);
    for (size_t k = 0; k < h->n; k++) {
        if (k)
            stats_buf_putc(b, ',');
        put_value(b, col[(h->head + k) % h->cap]);
    }
    stats_buf_putc(b, ']');
}

size_t stats_history_render(stats_buf *b, const stats_history *h, uint64_t interval_ms)
{
    keel_mutex_lock(&history_lock);
    size_t n = h->n;
    stats_buf_printf(b, "{\"interval_ms\":%llu,\"mono_ms\":[", (unsigned long long)interval_ms);
    for (size_t k = 0; k < h->n; k++)
        stats_buf_printf(b, "%s%llu", k ? "," : "",
                         (unsigned long long)h->mono[(h->head + k) % h->cap]);
    stats_buf_putc(b, ']');
    put_column(b, ST_CONN_OPEN, h, h->open);
    put_column(b, ST_BYTES_IN, h, h->in);
    put_column(b, ST_BYTES_OUT, h, h->out);
    stats_buf_puts(b, ",\"" ST_REQUESTS "\":{");
    for (int c = 0; c < ST_HISTORY_CLASSES; c++) {
        stats_buf_printf(b, "%s\"%s\":[", c ? "," : "", classes[c]);
        for (size_t k = 0; k < h->n; k++) {
            if (k)
                stats_buf_putc(b, ',');
            put_value(b, h->req[c * h->cap + (h->head + k) % h->cap]);
        }
        stats_buf_putc(b, ']');
    }
    stats_buf_puts(b, "},\"" ST_DURATION "\":{\"le\":[");
    for (size_t i = 0; h->cum != NULL && i < h->nbounds; i++) {
        if (i)
            stats_buf_putc(b, ',');
        put_value(b, h->bounds[i]);
    }
    stats_buf_puts(b, "],\"count\":[");
    for (size_t k = 0; k < h->n; k++)
        stats_buf_printf(b, "%s%llu", k ? "," : "",
                         (unsigned long long)h->count[(h->head + k) % h->cap]);
    stats_buf_puts(b, "],\"cumulative\":[");
    for (size_t k = 0; h->cum != NULL && k < h->n; k++) {
        size_t i = (h->head + k) % h->cap;
        stats_buf_puts(b, k ? ",[" : "[");
        for (size_t j = 0; j < h->nbounds; j++)
            stats_buf_printf(b, "%s%llu", j ? "," : "",
                             (unsigned long long)h->cum[i * h->nbounds + j]);
        stats_buf_putc(b, ']');
    }
    stats_buf_puts(b, "]},\"" ST_LOOP_IDLE "\":[");
    for (size_t k = 0; k < h->n; k++) {
        size_t i = (h->head + k) % h->cap;
        stats_buf_puts(b, k ? ",[" : "[");
        for (unsigned w = 0; w < h->nworkers; w++) {
            if (w)
                stats_buf_putc(b, ',');
            put_value(b, h->idle[i * h->nworkers + w]);
        }
        stats_buf_putc(b, ']');
    }
    stats_buf_puts(b, "]}");
    keel_mutex_unlock(&history_lock);
    return n;
}
