/* snap.c — a collection copied out of the visit callback, so that the
 * three pages render from one plain structure (and the unit test can build
 * one from made-up samples). Families arrive together and in order
 * (keel/metrics.h), so a family is the last one unless first_of_family. */
#include "stats.h"

#include <stdlib.h>
#include <string.h>

static char *dup_str(stats_snap *s, const char *src)
{
    size_t n = strlen(src ? src : "");
    char *d = malloc(n + 1);
    if (d == NULL) {
        s->failed = 1;
        return NULL;
    }
    memcpy(d, src ? src : "", n + 1);
    return d;
}

static void *grow(stats_snap *s, void *p, size_t *cap, size_t need, size_t size)
{
    if (keel_reserve(&p, cap, need, size, 8) != 0) {
        s->failed = 1;
        return NULL;
    }
    return p;
}

void stats_snap_init(stats_snap *s, unsigned nworkers)
{
    memset(s, 0, sizeof *s);
    s->nworkers = nworkers;
    s->version = "";
    s->abi = "";
}

void stats_snap_free(stats_snap *s)
{
    for (size_t i = 0; i < s->nfam; i++) {
        stats_family *f = &s->fam[i];
        for (size_t j = 0; j < f->nseries; j++) {
            free(f->series[j].labels);
            free(f->series[j].cumulative);
            free(f->series[j].per_worker);
        }
        free(f->series);
        free(f->name);
        free(f->help);
        free(f->module);
        free(f->bounds);
    }
    free(s->fam);
    free(s->modules);
    memset(s, 0, sizeof *s);
}

void stats_snap_add_module(stats_snap *s, const char *name, const char *version)
{
    size_t cap = s->nmodules; /* grown one at a time: a handful of modules */
    stats_module_info *m = grow(s, s->modules, &cap, s->nmodules + 1, sizeof *m);
    if (m == NULL)
        return;
    s->modules = m;
    m[s->nmodules++] = (stats_module_info){name ? name : "", version ? version : ""};
}

static stats_family *new_family(stats_snap *s, const keel_metric_sample *x)
{
    stats_family *fam = grow(s, s->fam, &s->cap, s->nfam + 1, sizeof *fam);
    if (fam == NULL)
        return NULL;
    s->fam = fam;
    stats_family *f = &fam[s->nfam];
    memset(f, 0, sizeof *f);
    f->type = x->type;
    f->scale = x->scale != 0 ? x->scale : 1;
    f->name = dup_str(s, x->name);
    f->help = dup_str(s, x->help);
    f->module = dup_str(s, x->module);
    if (x->type == KEEL_METRIC_HISTOGRAM && x->nbounds > 0) {
        f->bounds = malloc(x->nbounds * sizeof *f->bounds);
        if (f->bounds == NULL)
            s->failed = 1;
        else {
            memcpy(f->bounds, x->bounds, x->nbounds * sizeof *f->bounds);
            f->nbounds = x->nbounds;
        }
    }
    s->nfam++; /* counted even when half-made: stats_snap_free frees it */
    return f;
}

void stats_snap_add(stats_snap *s, const keel_metric_sample *x)
{
    if (s->failed || x->name == NULL)
        return;
    stats_family *f = NULL;
    if (!x->first_of_family && s->nfam > 0 && strcmp(s->fam[s->nfam - 1].name, x->name) == 0)
        f = &s->fam[s->nfam - 1];
    else if ((f = new_family(s, x)) == NULL || s->failed)
        return;
    stats_series *ser = grow(s, f->series, &f->cap, f->nseries + 1, sizeof *ser);
    if (ser == NULL)
        return;
    f->series = ser;
    stats_series *t = &ser[f->nseries++];
    memset(t, 0, sizeof *t);
    t->labels = dup_str(s, x->labels);
    t->value = x->value;
    t->count = x->count;
    t->sum = x->sum;
    if (f->type == KEEL_METRIC_HISTOGRAM && f->nbounds > 0) {
        t->cumulative = calloc(f->nbounds, sizeof *t->cumulative);
        if (t->cumulative == NULL) {
            s->failed = 1;
            return;
        }
        size_t n = x->nbounds < f->nbounds ? x->nbounds : f->nbounds;
        if (x->cumulative != NULL)
            memcpy(t->cumulative, x->cumulative, n * sizeof *t->cumulative);
    }
}

const stats_family *stats_snap_find(const stats_snap *s, const char *name)
{
    for (size_t i = 0; i < s->nfam; i++)
        if (strcmp(s->fam[i].name, name) == 0)
            return &s->fam[i];
    return NULL;
}

const stats_series *stats_family_series(const stats_family *f, const char *labels)
{
    if (f == NULL)
        return NULL;
    for (size_t i = 0; i < f->nseries; i++)
        if (strcmp(f->series[i].labels, labels) == 0)
            return &f->series[i];
    return NULL;
}

void stats_snap_add_worker(stats_snap *s, const keel_metric_sample *x)
{
    if (s->failed || x->name == NULL || x->worker >= s->nworkers ||
        x->type == KEEL_METRIC_HISTOGRAM)
        return;
    stats_family *f = (stats_family *)stats_snap_find(s, x->name);
    stats_series *t = (stats_series *)stats_family_series(f, x->labels ? x->labels : "");
    if (t == NULL)
        return; /* registered between the two collections: shown next time */
    if (t->per_worker == NULL && (t->per_worker = calloc(s->nworkers, sizeof(int64_t))) == NULL) {
        s->failed = 1;
        return;
    }
    t->per_worker[x->worker] = x->value;
}

double stats_value(const stats_family *f, const stats_series *s)
{
    return (double)s->value * f->scale;
}

double stats_quantile(const int64_t *bounds, const uint64_t *cumulative, size_t nbounds,
                      uint64_t count, double scale, double q)
{
    if (count == 0)
        return -1;
    double rank = q * (double)count;
    uint64_t below = 0;
    double lower = 0;
    for (size_t i = 0; i < nbounds; i++) {
        double upper = (double)bounds[i] * scale;
        if ((double)cumulative[i] >= rank) {
            uint64_t in = cumulative[i] - below;
            if (in == 0)
                return upper;
            return lower + (upper - lower) * ((rank - (double)below) / (double)in);
        }
        below = cumulative[i];
        lower = upper;
    }
    /* In the +Inf bucket: the highest finite bound is all that is known
     * (histogram_quantile answers the same). */
    return nbounds > 0 ? (double)bounds[nbounds - 1] * scale : -1;
}
