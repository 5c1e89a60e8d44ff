/* The metrics registry (ABI 1.4; keel/metrics.h says what it is for,
 * runtime/metrics.h how values are laid out). The API over it, collection
 * and the core's own series are core/server's (server/metrics.c). */
#include <stdlib.h>
#include <string.h>

#include "runtime/metrics.h"

#include "base/log.h"
#include "base/util.h"

/* ---- validation ----------------------------------------------------------
 * The exposition format is the strictest reader (Prometheus text format
 * 0.0.4): names [a-zA-Z_:][a-zA-Z0-9_:]*, label names without the colon,
 * label values quoted with \\ \" \n escaped. */

static int name_char(char c, int first, int colon)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':'))
        return 1;
    return !first && c >= '0' && c <= '9';
}

static int valid_name(const char *s, int colon)
{
    if (s == NULL || *s == '\0')
        return 0;
    for (size_t i = 0; s[i]; i++)
        if (!name_char(s[i], i == 0, colon))
            return 0;
    return 1;
}

/* `a="x",b="y"`: names valid and not "worker" (the core adds it) nor
 * reserved ("__" prefix, "le" on histograms), values quoted and escaped. */
static int valid_labels(const char *s, int histogram)
{
    if (s == NULL || *s == '\0')
        return 1;
    const char *p = s;
    for (;;) {
        const char *name = p;
        while (name_char(*p, p == name, 0))
            p++;
        size_t n = (size_t)(p - name);
        if (n == 0 || (n >= 2 && name[0] == '_' && name[1] == '_') ||
            (n == 6 && memcmp(name, "worker", 6) == 0) ||
            (histogram && n == 2 && memcmp(name, "le", 2) == 0))
            return 0;
        if (*p++ != '=' || *p++ != '"')
            return 0;
        while (*p != '"') {
            if (*p == '\0' || *p == '\n')
                return 0;
            if (*p == '\\') {
                p++;
                if (*p != '\\' && *p != '"' && *p != 'n')
                    return 0;
            }
            p++;
        }
        p++;
        if (*p == '\0')
            return 1;
        if (*p++ != ',')
            return 0;
    }
}

static int valid_bounds(const keel_metric_desc *d)
{
    if (d->type != KEEL_METRIC_HISTOGRAM)
        return 1;
    if (d->nbounds == 0 || d->nbounds > KL_METRIC_MAX_BOUNDS || d->bounds == NULL)
        return 0;
    for (size_t i = 1; i < d->nbounds; i++)
        if (d->bounds[i] <= d->bounds[i - 1])
            return 0;
    return 1;
}

/* ---- registration -------------------------------------------------------- */

static kl_metric_family *family_find(const kl_metrics *m, const char *name)
{
    for (size_t i = 0; i < m->nfamilies; i++)
        if (strcmp(m->families[i]->name, name) == 0)
            return m->families[i];
    return NULL;
}

static void family_free(kl_metric_family *f)
{
    for (size_t i = 0; i < f->nseries; i++) {
        free(f->series[i]->labels);
        free(f->series[i]);
    }
    free(f->series);
    free(f->bounds);
    free(f->name);
    free(f->help);
    free(f);
}

static kl_metric_family *family_new(kl_metrics *m, const keel_metric_desc *d)
{
    kl_metric_family *f = calloc(1, sizeof *f);
    kl_metric_family **grown = realloc(m->families, (m->nfamilies + 1) * sizeof *grown);
    if (grown != NULL)
        m->families = grown;
    if (f == NULL || grown == NULL)
        goto fail;
    f->type = d->type;
    f->scale = d->scale != 0 ? d->scale : 1;
    if ((f->name = kl_strdup(d->name)) == NULL ||
        (f->help = kl_strdup(d->help ? d->help : "")) == NULL)
        goto fail;
    /* Help is one line in the exposition format. */
    for (char *c = f->help; *c; c++)
        if (*c == '\n' || *c == '\r')
            *c = ' ';
    if (d->type == KEEL_METRIC_HISTOGRAM) {
        if ((f->bounds = malloc(d->nbounds * sizeof *f->bounds)) == NULL)
            goto fail;
        memcpy(f->bounds, d->bounds, d->nbounds * sizeof *f->bounds);
        f->nbounds = d->nbounds;
    }
    m->families[m->nfamilies++] = f;
    return f;
fail:
    if (f != NULL)
        family_free(f);
    return NULL;
}

static int same_family(const kl_metric_family *f, const keel_metric_desc *d)
{
    if (f->type != d->type || f->scale != (d->scale != 0 ? d->scale : 1))
        return 0;
    if (d->type != KEEL_METRIC_HISTOGRAM)
        return 1;
    return f->nbounds == d->nbounds && memcmp(f->bounds, d->bounds, d->nbounds * 8) == 0;
}

const char *kl_metrics_refusal(const kl_metrics *m, const keel_metric_desc *d, int with_sample)
{
    if (d == NULL)
        return "no description (NULL)";
    if (d->size < offsetof(keel_metric_desc, nbounds) + sizeof d->nbounds)
        return ".size is too small (set it to sizeof(keel_metric_desc))";
    if (!valid_name(d->name, 1))
        return "invalid name (a Prometheus metric name: [a-zA-Z_:][a-zA-Z0-9_:]*)";
    if (d->type < KEEL_METRIC_COUNTER || d->type > KEEL_METRIC_HISTOGRAM)
        return "unknown type";
    if (!valid_labels(d->labels, d->type == KEEL_METRIC_HISTOGRAM))
        return "invalid labels (name=\"value\",... with escaped values; not \"worker\", "
               "\"__\" names, or \"le\" on a histogram)";
    if (!valid_bounds(d))
        return "invalid bounds (a histogram needs 1 to 64, strictly increasing)";
    if (d->scale < 0)
        return "negative scale";
    if (with_sample && d->type == KEEL_METRIC_HISTOGRAM)
        return "a histogram cannot be sampled";
    const kl_metric_family *f = family_find(m, d->name);
    if (f != NULL && !same_family(f, d))
        return "another type, scale or bounds than the family registered under this name";
    return NULL;
}

int kl_metrics_register(kl_metrics *m, const char *module, const keel_metric_desc *d,
                        kl_metric_sample_fn sample, int per_worker, keel_metric **out)
{
    if (out != NULL)
        *out = NULL;
    if (m->sealed)
        return KEEL_ERR_STATE;
    if (kl_metrics_refusal(m, d, sample != NULL) != NULL)
        return KEEL_ERR_INVAL;
    const char *labels = d->labels ? d->labels : "";
    kl_metric_family *f = family_find(m, d->name);
    if (f != NULL) {
        for (size_t i = 0; i < f->nseries; i++)
            if (strcmp(f->series[i]->labels, labels) == 0)
                return KEEL_ERR_EXISTS;
    } else if ((f = family_new(m, d)) == NULL) {
        return KEEL_ERR_NOMEM;
    }
    keel_metric *x = calloc(1, sizeof *x);
    keel_metric **grown = realloc(f->series, (f->nseries + 1) * sizeof *grown);
    if (grown != NULL)
        f->series = grown;
    if (x == NULL || grown == NULL || (x->labels = kl_strdup(labels)) == NULL) {
        free(x);
        return KEEL_ERR_NOMEM;
    }
    x->family = f;
    x->module = module;
    x->sample = sample;
    x->per_worker = per_worker;
    x->slot = m->nslots;
    if (sample == NULL)
        m->nslots += d->type == KEEL_METRIC_HISTOGRAM ? f->nbounds + 2 : 1;
    f->series[f->nseries++] = x;
    if (out != NULL)
        *out = x;
    return KEEL_OK;
}

void kl_metrics_seal(kl_metrics *m)
{
    m->sealed = 1;
}

int64_t *kl_metrics_worker_slots(const kl_metrics *m)
{
    return calloc(m->nslots ? m->nslots : 1, sizeof(int64_t));
}

void kl_metrics_free(kl_metrics *m)
{
    for (size_t i = 0; i < m->nfamilies; i++)
        family_free(m->families[i]);
    free(m->families);
    memset(m, 0, sizeof *m);
}
