/* prom.c — the Prometheus text exposition format, version 0.0.4
 * (https://prometheus.io/docs/instrumenting/exposition_formats/): per
 * family one "# HELP" (backslash and newline escaped) and one "# TYPE",
 * then its samples; a histogram as cumulative _bucket{le=...} lines ending
 * with le="+Inf", then _sum and _count. Values are exported in the
 * family's unit: stored integer times scale. Label strings arrive already
 * in exposition syntax (keel_metric_desc.labels), so they are copied as
 * they are and only "le" and "worker" are added. */
#include "stats.h"

#include <stdio.h>
#include <string.h>

static void put_help(stats_buf *b, const char *help)
{
    size_t run = 0, i = 0;
    for (; help[i]; i++) {
        if (help[i] != '\\' && help[i] != '\n')
            continue;
        stats_buf_put(b, help + run, i - run);
        stats_buf_puts(b, help[i] == '\\' ? "\\\\" : "\\n");
        run = i + 1;
    }
    stats_buf_put(b, help + run, i - run);
}

static const char *type_name(int type)
{
    switch (type) {
    case KEEL_METRIC_COUNTER:
        return "counter";
    case KEEL_METRIC_GAUGE:
        return "gauge";
    case KEEL_METRIC_HISTOGRAM:
        return "histogram";
    default:
        return "untyped";
    }
}

/* name{labels,extra} — the braces only when there is a label at all. */
static void put_series(stats_buf *b, const char *name, const char *suffix, const char *labels,
                       const char *extra)
{
    stats_buf_puts(b, name);
    stats_buf_puts(b, suffix);
    int has = labels[0] != '\0', more = extra != NULL && extra[0] != '\0';
    if (has || more) {
        stats_buf_putc(b, '{');
        stats_buf_puts(b, labels);
        if (has && more)
            stats_buf_putc(b, ',');
        if (more)
            stats_buf_puts(b, extra);
        stats_buf_putc(b, '}');
    }
    stats_buf_putc(b, ' ');
}

static void put_histogram(stats_buf *b, const stats_family *f, const stats_series *s)
{
    char le[64];
    for (size_t i = 0; i < f->nbounds; i++) {
        stats_buf tmp;
        stats_buf_init(&tmp);
        stats_buf_put_double(&tmp, (double)f->bounds[i] * f->scale);
        snprintf(le, sizeof le, "le=\"%s\"", tmp.failed ? "NaN" : tmp.data);
        stats_buf_free(&tmp);
        put_series(b, f->name, "_bucket", s->labels, le);
        stats_buf_printf(b, "%llu\n", (unsigned long long)s->cumulative[i]);
    }
    put_series(b, f->name, "_bucket", s->labels, "le=\"+Inf\"");
    stats_buf_printf(b, "%llu\n", (unsigned long long)s->count);
    put_series(b, f->name, "_sum", s->labels, NULL);
    stats_buf_put_double(b, (double)s->sum * f->scale);
    stats_buf_putc(b, '\n');
    put_series(b, f->name, "_count", s->labels, NULL);
    stats_buf_printf(b, "%llu\n", (unsigned long long)s->count);
}

void stats_render_prom(stats_buf *b, const stats_snap *s, int per_worker)
{
    for (size_t i = 0; i < s->nfam; i++) {
        const stats_family *f = &s->fam[i];
        if (f->help[0] != '\0') {
            stats_buf_printf(b, "# HELP %s ", f->name);
            put_help(b, f->help);
            stats_buf_putc(b, '\n');
        }
        stats_buf_printf(b, "# TYPE %s %s\n", f->name, type_name(f->type));
        for (size_t j = 0; j < f->nseries; j++) {
            const stats_series *t = &f->series[j];
            if (f->type == KEEL_METRIC_HISTOGRAM) {
                put_histogram(b, f, t);
            } else if (per_worker && t->per_worker != NULL) {
                /* Each worker's own series instead of their sum, so that
                 * sum() in PromQL still adds up. */
                for (unsigned w = 0; w < s->nworkers; w++) {
                    char wl[32];
                    snprintf(wl, sizeof wl, "worker=\"%u\"", w);
                    put_series(b, f->name, "", t->labels, wl);
                    stats_buf_put_double(b, (double)t->per_worker[w] * f->scale);
                    stats_buf_putc(b, '\n');
                }
            } else {
                put_series(b, f->name, "", t->labels, NULL);
                stats_buf_put_double(b, stats_value(f, t));
                stats_buf_putc(b, '\n');
            }
        }
    }
}
