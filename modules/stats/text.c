/* text.c — /__stats: a page a person reads in a terminal (curl), in the
 * spirit of robaho's httpserver stats page: the headline numbers first,
 * then every registered metric. Rates and utilisation here are averages
 * since start (one collection has no earlier one to compare with); the
 * dashboard shows them live. */
#include "stats.h"

#include <stdio.h>
#include <string.h>

static void put_duration(stats_buf *b, double secs)
{
    long long t = secs > 0 ? (long long)secs : 0;
    long long d = t / 86400, h = t / 3600 % 24, m = t / 60 % 60, s = t % 60;
    if (d > 0)
        stats_buf_printf(b, "%lldd %02lldh %02lldm %02llds", d, h, m, s);
    else if (h > 0)
        stats_buf_printf(b, "%lldh %02lldm %02llds", h, m, s);
    else if (m > 0)
        stats_buf_printf(b, "%lldm %02llds", m, s);
    else
        stats_buf_printf(b, "%llds", s);
}

static void put_bytes(stats_buf *b, double v)
{
    static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    while (v >= 1024 && u < 5) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        stats_buf_printf(b, "%.0f B", v);
    else
        stats_buf_printf(b, "%.1f %s", v, unit[u]);
}

static void put_seconds(stats_buf *b, double v)
{
    if (v < 0)
        stats_buf_puts(b, "-");
    else if (v < 1e-3)
        stats_buf_printf(b, "%.0f us", v * 1e6);
    else if (v < 1)
        stats_buf_printf(b, "%.1f ms", v * 1e3);
    else
        stats_buf_printf(b, "%.2f s", v);
}

/* The sum of a family's series (0 if it is not registered). */
static double total(const stats_snap *s, const char *name)
{
    const stats_family *f = stats_snap_find(s, name);
    double v = 0;
    for (size_t i = 0; f != NULL && i < f->nseries; i++)
        v += stats_value(f, &f->series[i]);
    return v;
}

static void put_row(stats_buf *b, const char *label)
{
    stats_buf_printf(b, "%-16s", label);
}

static void put_requests(stats_buf *b, const stats_snap *s, double uptime)
{
    const stats_family *f = stats_snap_find(s, ST_REQUESTS);
    double all = total(s, ST_REQUESTS);
    put_row(b, "requests");
    stats_buf_printf(b, "%.0f", all);
    if (uptime > 0)
        stats_buf_printf(b, " (%.2f/s average since start)", all / uptime);
    stats_buf_putc(b, '\n');
    if (f == NULL)
        return;
    put_row(b, "");
    for (size_t i = 0; i < f->nseries; i++) {
        const stats_series *t = &f->series[i];
        /* class="2xx" reads as "2xx"; other labels as they are. */
        const char *l = t->labels;
        char name[64];
        if (strncmp(l, "class=\"", 7) == 0 && strlen(l) == 11)
            snprintf(name, sizeof name, "%.3s", l + 7);
        else
            snprintf(name, sizeof name, "%s", l[0] ? l : "all");
        stats_buf_printf(b, "%s%s %.0f", i ? "  " : "", name, stats_value(f, t));
    }
    stats_buf_putc(b, '\n');
}

static void put_latency(stats_buf *b, const stats_snap *s)
{
    const stats_family *f = stats_snap_find(s, ST_DURATION);
    const stats_series *t = f && f->nseries > 0 ? &f->series[0] : NULL;
    put_row(b, "latency");
    if (t == NULL || t->count == 0) {
        stats_buf_puts(b, "no requests yet\n");
        return;
    }
    static const double q[] = {0.5, 0.9, 0.99};
    static const char *qn[] = {"p50", "p90", "p99"};
    for (int i = 0; i < 3; i++) {
        stats_buf_printf(b, "%s%s ", i ? ", " : "", qn[i]);
        put_seconds(b,
                    stats_quantile(f->bounds, t->cumulative, f->nbounds, t->count, f->scale, q[i]));
    }
    stats_buf_puts(b, ", mean ");
    put_seconds(b, (double)t->sum * f->scale / (double)t->count);
    stats_buf_puts(b, " (since start, estimated from the histogram)\n");
}

static void put_workers(stats_buf *b, const stats_snap *s, double uptime)
{
    const stats_family *f = stats_snap_find(s, ST_LOOP_IDLE);
    const stats_series *t = f && f->nseries > 0 ? &f->series[0] : NULL;
    if (t == NULL || t->per_worker == NULL || uptime <= 0)
        return;
    stats_buf_puts(b, "\nworker loop utilisation (average since start)\n");
    for (unsigned w = 0; w < s->nworkers; w++) {
        double idle = (double)t->per_worker[w] * f->scale, busy = 1 - idle / uptime;
        if (busy < 0)
            busy = 0;
        stats_buf_printf(b, "  worker %-4u %5.1f%%\n", w, busy * 100);
    }
}

/* Every metric, one line a series, for what the headline does not show. */
static void put_all(stats_buf *b, const stats_snap *s)
{
    stats_buf_puts(b, "\nall metrics\n");
    for (size_t i = 0; i < s->nfam; i++) {
        const stats_family *f = &s->fam[i];
        for (size_t j = 0; j < f->nseries; j++) {
            const stats_series *t = &f->series[j];
            stats_buf_printf(b, "  %s%s%s%s ", f->name, t->labels[0] ? "{" : "", t->labels,
                             t->labels[0] ? "}" : "");
            if (f->type == KEEL_METRIC_HISTOGRAM) {
                stats_buf_printf(b, "count %llu sum ", (unsigned long long)t->count);
                stats_buf_put_double(b, (double)t->sum * f->scale);
            } else {
                stats_buf_put_double(b, stats_value(f, t));
            }
            stats_buf_putc(b, '\n');
        }
    }
}

void stats_render_text(stats_buf *b, const stats_snap *s)
{
    double uptime = s->start_time > 0 && s->now > s->start_time ? s->now - s->start_time : 0;
    stats_buf_printf(b, "keel %s (ABI %s)\n\n", s->version, s->abi);
    put_row(b, "uptime");
    put_duration(b, uptime);
    stats_buf_putc(b, '\n');
    put_row(b, "workers");
    stats_buf_printf(b, "%u\n", s->nworkers);
    put_row(b, "modules");
    for (size_t i = 0; i < s->nmodules; i++)
        stats_buf_printf(b, "%s%s%s%s", i ? ", " : "", s->modules[i].name,
                         s->modules[i].version[0] ? " " : "", s->modules[i].version);
    stats_buf_puts(b, "\n\n");

    put_row(b, "connections");
    stats_buf_printf(b, "%.0f open, %.0f accepted, %.0f rejected\n", total(s, ST_CONN_OPEN),
                     total(s, ST_CONN_ACCEPTED), total(s, ST_CONN_REJECTED));
    put_row(b, "traffic");
    put_bytes(b, total(s, ST_BYTES_IN));
    stats_buf_puts(b, " received, ");
    put_bytes(b, total(s, ST_BYTES_OUT));
    stats_buf_puts(b, " sent\n");
    put_requests(b, s, uptime);
    put_latency(b, s);
    put_workers(b, s, uptime);
    put_all(b, s);
}
