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

static void put_help(st_buf *b, const char *help)
{
    size_t run = 0, i = 0;
    for (; help[i]; i++) {
        if (help[i] != '\\' && help[i] != '\n')
            continue;
        st_buf_put(b, help + run, i - run);
        st_buf_puts(b, help[i] == '\\' ? "\\\\" : "\\n");
        run = i + 1;
    }
    st_buf_put(b, help + run, i - run);
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
static void put_series(st_buf *b, const char *name, const char *suffix, const char *labels,
                       const char *extra)
{
    st_buf_puts(b, name);
    st_buf_puts(b, suffix);
    int has = labels[0] != '\0', more = extra != NULL && extra[0] != '\0';
    if (has || more) {
        st_buf_putc(b, '{');
        st_buf_puts(b, labels);
        if (has && more)
            st_buf_putc(b, ',');
        if (more)
            st_buf_puts(b, extra);
        st_buf_putc(b, '}');
    }
    st_buf_putc(b, ' ');
}

static void put_histogram(st_buf *b, const st_family *f, const st_series *s)
{
    char le[64];
    for (size_t i = 0; i < f->nbounds; i++) {
        st_buf tmp;
        st_buf_init(&tmp);
        st_buf_put_double(&tmp, (double)f->bounds[i] * f->scale);
        snprintf(le, sizeof le, "le=\"%s\"", tmp.failed ? "NaN" : tmp.data);
        st_buf_free(&tmp);
        put_series(b, f->name, "_bucket", s->labels, le);
        st_buf_printf(b, "%llu\n", (unsigned long long)s->cumulative[i]);
    }
    put_series(b, f->name, "_bucket", s->labels, "le=\"+Inf\"");
    st_buf_printf(b, "%llu\n", (unsigned long long)s->count);
    put_series(b, f->name, "_sum", s->labels, NULL);
    st_buf_put_double(b, (double)s->sum * f->scale);
    st_buf_putc(b, '\n');
    put_series(b, f->name, "_count", s->labels, NULL);
    st_buf_printf(b, "%llu\n", (unsigned long long)s->count);
}

void st_render_prom(st_buf *b, const st_snap *s, int per_worker)
{
    for (size_t i = 0; i < s->nfam; i++) {
        const st_family *f = &s->fam[i];
        if (f->help[0] != '\0') {
            st_buf_printf(b, "# HELP %s ", f->name);
            put_help(b, f->help);
            st_buf_putc(b, '\n');
        }
        st_buf_printf(b, "# TYPE %s %s\n", f->name, type_name(f->type));
        for (size_t j = 0; j < f->nseries; j++) {
            const st_series *t = &f->series[j];
            if (f->type == KEEL_METRIC_HISTOGRAM) {
                put_histogram(b, f, t);
            } else if (per_worker && t->per_worker != NULL) {
                /* Each worker's own series instead of their sum, so that
                 * sum() in PromQL still adds up. */
                for (unsigned w = 0; w < s->nworkers; w++) {
                    char wl[32];
                    snprintf(wl, sizeof wl, "worker=\"%u\"", w);
                    put_series(b, f->name, "", t->labels, wl);
                    st_buf_put_double(b, (double)t->per_worker[w] * f->scale);
                    st_buf_putc(b, '\n');
                }
            } else {
                put_series(b, f->name, "", t->labels, NULL);
                st_buf_put_double(b, st_value(f, t));
                st_buf_putc(b, '\n');
            }
        }
    }
}
