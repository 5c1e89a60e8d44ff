/* json.c — /__stats.json and the dashboard's events: the snapshot as one
 * JSON object. Families are an object keyed by name, in registration
 * order, so that the page finds keel_http_requests_total without a
 * search; values are in exported units (scale applied). Histogram buckets
 * are [upper bound, cumulative count] pairs for the finite bounds; count
 * is the +Inf bucket (JSON has no infinity). */
#include "stats.h"

#include <math.h>
#include <string.h>

static void put_num(st_buf *b, double v)
{
    if (!isfinite(v))
        st_buf_puts(b, "null");
    else
        st_buf_put_double(b, v);
}

/* Reads one exposition-format label value after its opening quote,
 * unescaping \\ \" \n into out; returns the position after the closing
 * quote, or NULL if there is none. */
static const char *read_value(const char *p, st_buf *out)
{
    for (; *p; p++) {
        if (*p == '"')
            return p + 1;
        if (*p == '\\' && p[1] != '\0') {
            p++;
            st_buf_putc(out, *p == 'n' ? '\n' : *p);
        } else {
            st_buf_putc(out, *p);
        }
    }
    return NULL;
}

void st_render_labels_json(st_buf *b, const char *labels)
{
    st_buf val;
    st_buf_init(&val);
    st_buf_putc(b, '{');
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
            st_buf_putc(b, ',');
        first = 0;
        st_buf_put_json_str(b, p, (size_t)(eq - p));
        st_buf_putc(b, ':');
        st_buf_put_json_str(b, val.data ? val.data : "", val.len);
        p = *next == ',' ? next + 1 : next;
    }
    st_buf_putc(b, '}');
    st_buf_free(&val);
}

static const char *type_name(int type)
{
    return type == KEEL_METRIC_COUNTER ? "counter"
           : type == KEEL_METRIC_GAUGE ? "gauge"
                                       : "histogram";
}

static void put_series(st_buf *b, const st_snap *s, const st_family *f, const st_series *t)
{
    st_buf_puts(b, "{\"labels\":");
    st_render_labels_json(b, t->labels);
    if (f->type == KEEL_METRIC_HISTOGRAM) {
        st_buf_printf(b, ",\"count\":%llu,\"sum\":", (unsigned long long)t->count);
        put_num(b, (double)t->sum * f->scale);
        st_buf_puts(b, ",\"buckets\":[");
        for (size_t i = 0; i < f->nbounds; i++) {
            st_buf_puts(b, i ? ",[" : "[");
            put_num(b, (double)f->bounds[i] * f->scale);
            st_buf_printf(b, ",%llu]", (unsigned long long)t->cumulative[i]);
        }
        st_buf_putc(b, ']');
    } else {
        st_buf_puts(b, ",\"value\":");
        put_num(b, st_value(f, t));
        if (t->per_worker != NULL) {
            st_buf_puts(b, ",\"workers\":[");
            for (unsigned w = 0; w < s->nworkers; w++) {
                if (w)
                    st_buf_putc(b, ',');
                put_num(b, (double)t->per_worker[w] * f->scale);
            }
            st_buf_putc(b, ']');
        }
    }
    st_buf_putc(b, '}');
}

void st_render_json(st_buf *b, const st_snap *s)
{
    st_buf_puts(b, "{\"version\":");
    st_buf_put_json_str(b, s->version, strlen(s->version));
    st_buf_puts(b, ",\"abi\":");
    st_buf_put_json_str(b, s->abi, strlen(s->abi));
    st_buf_puts(b, ",\"time\":");
    put_num(b, s->now);
    st_buf_printf(b, ",\"mono_ms\":%llu,\"start_time\":", (unsigned long long)s->mono_ms);
    put_num(b, s->start_time);
    st_buf_puts(b, ",\"uptime_seconds\":");
    put_num(b, s->start_time > 0 && s->now > s->start_time ? s->now - s->start_time : 0);
    st_buf_printf(b, ",\"workers\":%u,\"modules\":[", s->nworkers);
    for (size_t i = 0; i < s->nmodules; i++) {
        st_buf_puts(b, i ? ",{\"name\":" : "{\"name\":");
        st_buf_put_json_str(b, s->modules[i].name, strlen(s->modules[i].name));
        st_buf_puts(b, ",\"version\":");
        st_buf_put_json_str(b, s->modules[i].version, strlen(s->modules[i].version));
        st_buf_putc(b, '}');
    }
    st_buf_puts(b, "],\"metrics\":{");
    for (size_t i = 0; i < s->nfam; i++) {
        const st_family *f = &s->fam[i];
        if (i)
            st_buf_putc(b, ',');
        st_buf_put_json_str(b, f->name, strlen(f->name));
        st_buf_printf(b, ":{\"type\":\"%s\",\"help\":", type_name(f->type));
        st_buf_put_json_str(b, f->help, strlen(f->help));
        st_buf_puts(b, ",\"module\":");
        st_buf_put_json_str(b, f->module, strlen(f->module));
        st_buf_puts(b, ",\"series\":[");
        for (size_t j = 0; j < f->nseries; j++) {
            if (j)
                st_buf_putc(b, ',');
            put_series(b, s, f, &f->series[j]);
        }
        st_buf_puts(b, "]}");
    }
    st_buf_puts(b, "}}\n");
}
