/* json.c — /__stats.json and the dashboard's events: the snapshot as one
 * JSON object. Families are an object keyed by name, in registration
 * order, so that the page finds keel_http_requests_total without a
 * search; values are in exported units (scale applied). Histogram buckets
 * are [upper bound, cumulative count] pairs for the finite bounds; count
 * is the +Inf bucket (JSON has no infinity). */
#include "stats.h"

#include <math.h>
#include <string.h>

static void put_num(stats_buf *b, double v)
{
    if (!isfinite(v))
        stats_buf_puts(b, "null");
    else
        stats_buf_put_double(b, v);
}

/* Reads one exposition-format label value after its opening quote,
 * unescaping \\ \" \n into out; returns the position after the closing
 * quote, or NULL if there is none. */
static const char *read_value(const char *p, stats_buf *out)
{
    for (; *p; p++) {
        if (*p == '"')
            return p + 1;
        if (*p == '\\' && p[1] != '\0') {
            p++;
            stats_buf_putc(out, *p == 'n' ? '\n' : *p);
        } else {
            stats_buf_putc(out, *p);
        }
    }
    return NULL;
}

void stats_render_labels_json(stats_buf *b, const char *labels)
{
    stats_buf val;
    stats_buf_init(&val);
    stats_buf_putc(b, '{');
    const char *p = labels;
    int first = 1;
    while (*p) {
        const char *eq = strchr(p, '=');
        if (eq == NULL || eq[1] != '"')
            break;
        val.len = 0;
        const char *next = read_value(eq + 2, &val);
        if (next == NULL || val.failed)
            break;
        if (!first)
            stats_buf_putc(b, ',');
        first = 0;
        stats_buf_put_json_str(b, p, (size_t)(eq - p));
        stats_buf_putc(b, ':');
        stats_buf_put_json_str(b, val.data ? val.data : "", val.len);
        p = *next == ',' ? next + 1 : next;
    }
    stats_buf_putc(b, '}');
    stats_buf_free(&val);
}

static const char *type_name(int type)
{
    return type == KEEL_METRIC_COUNTER ? "counter"
           : type == KEEL_METRIC_GAUGE ? "gauge"
                                       : "histogram";
}

static void put_series(stats_buf *b, const stats_snap *s, const stats_family *f,
                       const stats_series *t)
{
    stats_buf_puts(b, "{\"labels\":");
    stats_render_labels_json(b, t->labels);
    if (f->type == KEEL_METRIC_HISTOGRAM) {
        stats_buf_printf(b, ",\"count\":%llu,\"sum\":", (unsigned long long)t->count);
        put_num(b, (double)t->sum * f->scale);
        stats_buf_puts(b, ",\"buckets\":[");
        for (size_t i = 0; i < f->nbounds; i++) {
            stats_buf_puts(b, i ? ",[" : "[");
            put_num(b, (double)f->bounds[i] * f->scale);
            stats_buf_printf(b, ",%llu]", (unsigned long long)t->cumulative[i]);
        }
        stats_buf_putc(b, ']');
    } else {
        stats_buf_puts(b, ",\"value\":");
        put_num(b, stats_value(f, t));
        if (t->per_worker != NULL) {
            stats_buf_puts(b, ",\"workers\":[");
            for (unsigned w = 0; w < s->nworkers; w++) {
                if (w)
                    stats_buf_putc(b, ',');
                put_num(b, (double)t->per_worker[w] * f->scale);
            }
            stats_buf_putc(b, ']');
        }
    }
    stats_buf_putc(b, '}');
}

void stats_render_json(stats_buf *b, const stats_snap *s)
{
    stats_buf_puts(b, "{\"version\":");
    stats_buf_put_json_str(b, s->version, strlen(s->version));
    stats_buf_puts(b, ",\"abi\":");
    stats_buf_put_json_str(b, s->abi, strlen(s->abi));
    stats_buf_puts(b, ",\"time\":");
    put_num(b, s->now);
    stats_buf_printf(b, ",\"mono_ms\":%llu,\"start_time\":", (unsigned long long)s->mono_ms);
    put_num(b, s->start_time);
    stats_buf_puts(b, ",\"uptime_seconds\":");
    put_num(b, s->start_time > 0 && s->now > s->start_time ? s->now - s->start_time : 0);
    stats_buf_printf(b, ",\"workers\":%u,\"modules\":[", s->nworkers);
    for (size_t i = 0; i < s->nmodules; i++) {
        stats_buf_puts(b, i ? ",{\"name\":" : "{\"name\":");
        stats_buf_put_json_str(b, s->modules[i].name, strlen(s->modules[i].name));
        stats_buf_puts(b, ",\"version\":");
        stats_buf_put_json_str(b, s->modules[i].version, strlen(s->modules[i].version));
        stats_buf_putc(b, '}');
    }
    stats_buf_puts(b, "],\"metrics\":{");
    for (size_t i = 0; i < s->nfam; i++) {
        const stats_family *f = &s->fam[i];
        if (i)
            stats_buf_putc(b, ',');
        stats_buf_put_json_str(b, f->name, strlen(f->name));
        stats_buf_printf(b, ":{\"type\":\"%s\",\"help\":", type_name(f->type));
        stats_buf_put_json_str(b, f->help, strlen(f->help));
        stats_buf_puts(b, ",\"module\":");
        stats_buf_put_json_str(b, f->module, strlen(f->module));
        stats_buf_puts(b, ",\"series\":[");
        for (size_t j = 0; j < f->nseries; j++) {
            if (j)
                stats_buf_putc(b, ',');
            put_series(b, s, f, &f->series[j]);
        }
        stats_buf_puts(b, "]}");
    }
    stats_buf_puts(b, "}}\n");
}
