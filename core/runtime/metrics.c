/* The metrics API (ABI 1.4): placeholder until the registry lands. */
#include "runtime/server.h"

int keel_metric_register(keel_module *m, const keel_metric_desc *desc, keel_metric **out)
{
    (void)m;
    (void)desc;
    if (out)
        *out = NULL;
    return KEEL_OK;
}

void keel_metric_add(keel_worker *w, keel_metric *metric, int64_t delta)
{
    (void)w;
    (void)metric;
    (void)delta;
}

void keel_metric_set(keel_worker *w, keel_metric *metric, int64_t value)
{
    (void)w;
    (void)metric;
    (void)value;
}

void keel_metric_observe(keel_worker *w, keel_metric *metric, int64_t value)
{
    (void)w;
    (void)metric;
    (void)value;
}

int keel_metrics_collect(keel_module *m, unsigned flags, keel_metric_visit_fn fn, void *ud)
{
    (void)m;
    (void)flags;
    (void)fn;
    (void)ud;
    return KEEL_OK;
}
