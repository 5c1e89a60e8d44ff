/* table.c — the statsd series (table.h). Counters and gauges keep a
 * double (statsd's values are decimals) exported as an integer of
 * millionths with scale 1e-6; timings keep bucket counts, a count and a
 * sum in microseconds, exported in seconds. */
#include "table.h"

#include <stdlib.h>
#include <string.h>

struct statsd_series {
    char *name; /* NULL: the slot is free */
    char *labels;
    uint32_t hash;
    int type; /* enum statsd_type */
    double value;
    uint64_t buckets[STATSD_NBOUNDS + 1]; /* the last one: +Inf */
    uint64_t count;
    double sum_us;
};

static const int64_t bounds_us[STATSD_NBOUNDS] = {
    5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000};

/* FNV-1a over name, a NUL, labels. */
static uint32_t hash_of(const char *name, const char *labels)
{
    uint32_t h = 2166136261u;
    for (const char *p = name; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    h = (h ^ 0) * 16777619u;
    for (const char *p = labels; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return h;
}

int statsd_table_init(statsd_table *t, size_t max, const char *module_name)
{
    memset(t, 0, sizeof *t);
    t->lock = (keel_mutex)KEEL_MUTEX_INIT;
    t->max = max;
    t->module_name = module_name;
    /* At most half full: probes stay short. */
    for (t->cap = 16; t->cap < max * 2; t->cap *= 2)
        ;
    t->slots = calloc(t->cap, sizeof *t->slots);
    t->families = calloc(t->cap, sizeof *t->families);
    return t->slots && t->families ? KEEL_OK : KEEL_ERR_NOMEM;
}

void statsd_table_free(statsd_table *t)
{
    for (size_t i = 0; t->slots && i < t->cap; i++) {
        if (t->slots[i] != NULL) {
            free(t->slots[i]->name);
            free(t->slots[i]->labels);
            free(t->slots[i]);
        }
    }
    free(t->slots);
    free(t->families);
    t->slots = NULL;
    t->families = NULL;
}

/* The slot of the series of name and labels, or the free slot where it
 * would go. */
static statsd_series **find(statsd_table *t, const char *name, const char *labels, uint32_t h)
{
    for (size_t i = h & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
        statsd_series *s = t->slots[i];
        if (s == NULL ||
            (s->hash == h && strcmp(s->name, name) == 0 && strcmp(s->labels, labels) == 0))
            return &t->slots[i];
    }
}

/* FNV-1a over a name alone. */
static uint32_t hash_name(const char *name)
{
    uint32_t h = 2166136261u;
    for (const char *p = name; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return h;
}

/* The family of that name (its first series' name, and its type), or the
 * free slot where it would go: every series of a name has one type. */
static statsd_family *family(statsd_table *t, const char *name)
{
    uint32_t h = hash_name(name);
    for (size_t i = h & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
        statsd_family *f = &t->families[i];
        if (f->name == NULL || (f->hash == h && strcmp(f->name, name) == 0)) {
            f->hash = h;
            return f;
        }
    }
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    return d ? memcpy(d, s, n) : NULL;
}

int statsd_table_apply(statsd_table *t, const statsd_metric *m)
{
    uint32_t h = hash_of(m->name, m->labels);
    statsd_series **slot = find(t, m->name, m->labels, h);
    statsd_series *s = *slot;
    if (s == NULL) {
        if (t->count >= t->max)
            return STATSD_TABLE_FULL;
        statsd_family *f = family(t, m->name);
        if (f->name != NULL && f->type != m->type)
            return STATSD_TYPE_CONFLICT;
        /* Made only when it is needed: a table of max_metrics costs a
         * pointer per slot until then. */
        s = calloc(1, sizeof *s);
        if (s == NULL || (s->name = dup_str(m->name)) == NULL ||
            (s->labels = dup_str(m->labels)) == NULL) {
            if (s != NULL)
                free(s->name);
            free(s);
            return STATSD_TABLE_FULL;
        }
        s->hash = h;
        s->type = m->type;
        *slot = s;
        t->count++;
        if (f->name == NULL) {
            f->name = s->name;
            f->type = m->type;
        }
    } else if (s->type != m->type) {
        return STATSD_TYPE_CONFLICT;
    }
    switch (m->type) {
    case STATSD_COUNTER:
        /* A sampled counter stands for 1/rate times as many (statsd). */
        s->value += m->value / m->rate;
        break;
    case STATSD_GAUGE:
        s->value = m->delta ? s->value + m->value : m->value;
        break;
    default: {
        double us = m->value * 1000.0;
        /* A sampled timing stands for about 1/rate observations. */
        uint64_t times = (uint64_t)(1.0 / m->rate + 0.5);
        size_t b = 0;
        while (b < STATSD_NBOUNDS && (double)bounds_us[b] < us)
            b++;
        s->buckets[b] += times;
        s->count += times;
        s->sum_us += us * (double)times;
        break;
    }
    }
    return STATSD_APPLIED;
}

/* A double as whole millionths (or microseconds), clamped to int64. */
static int64_t fixed(double v, double unit)
{
    double x = v * unit;
    if (!(x == x))
        return 0;
    if (x >= 9.2e18)
        return INT64_MAX;
    if (x <= -9.2e18)
        return INT64_MIN;
    return (int64_t)(x < 0 ? x - 0.5 : x + 0.5); /* rounded: no libm */
}

/* A series' values as they were when copied, with its (never moved,
 * never freed) name and labels. */
typedef struct copy {
    const statsd_series *of;
    statsd_series values;
} copy;

static int by_name(const void *a, const void *b)
{
    const statsd_series *x = ((const copy *)a)->of, *y = ((const copy *)b)->of;
    int c = strcmp(x->name, y->name);
    return c ? c : strcmp(x->labels, y->labels);
}

static void emit_one(const copy *c, int first, const char *module, keel_metric_visit_fn visit,
                     void *visit_data)
{
    const statsd_series *s = &c->values;
    uint64_t cumulative[STATSD_NBOUNDS];
    keel_metric_sample x;
    memset(&x, 0, sizeof x);
    x.size = sizeof x;
    x.module = module;
    x.name = c->of->name;
    x.help = "From statsd lines";
    x.labels = c->of->labels;
    x.worker = KEEL_METRIC_ALL_WORKERS;
    x.first_of_family = first;
    x.scale = 1e-6;
    if (s->type == STATSD_TIMING) {
        x.type = KEEL_METRIC_HISTOGRAM;
        uint64_t below = 0;
        for (size_t b = 0; b < STATSD_NBOUNDS; b++)
            cumulative[b] = below += s->buckets[b];
        x.count = s->count;
        x.sum = fixed(s->sum_us, 1);
        x.bounds = bounds_us;
        x.cumulative = cumulative;
        x.nbounds = STATSD_NBOUNDS;
    } else {
        x.type = s->type == STATSD_COUNTER ? KEEL_METRIC_COUNTER : KEEL_METRIC_GAUGE;
        x.value = fixed(s->value, 1e6);
    }
    visit(&x, visit_data);
}

void statsd_table_emit(keel_metric_visit_fn visit, void *visit_data, void *table)
{
    statsd_table *t = table;
    /* Copied under the lock, handed over without it: a slow collector
     * must not hold up the workers applying lines. Series are never
     * removed, so count only grows: the copy made for it holds them. */
    keel_mutex_lock(&t->lock);
    size_t want = t->count;
    keel_mutex_unlock(&t->lock);
    copy *copies = malloc((want ? want : 1) * sizeof *copies);
    if (copies == NULL)
        return;
    size_t n = 0;
    keel_mutex_lock(&t->lock);
    for (size_t i = 0; i < t->cap && n < want; i++)
        if (t->slots[i] != NULL) {
            copies[n].of = t->slots[i];
            copies[n].values = *t->slots[i];
            n++;
        }
    keel_mutex_unlock(&t->lock);
    /* Every series of a family together, as keel_metrics_collect's
     * visitors expect. */
    qsort(copies, n, sizeof *copies, by_name);
    for (size_t i = 0; i < n; i++)
        emit_one(&copies[i], i == 0 || strcmp(copies[i - 1].of->name, copies[i].of->name) != 0,
                 t->module_name, visit, visit_data);
    free(copies);
}
