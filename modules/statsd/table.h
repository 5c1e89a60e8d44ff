/* table.h — the series statsd lines feed: a fixed-size table every worker
 * shares under one mutex, and its samples for keel_metrics_collect (a
 * metrics source, keel/metrics.h). */
#ifndef KEEL_STATSD_TABLE_H
#define KEEL_STATSD_TABLE_H

#include <keel/keel.h>
#include <keel/util.h>

#include "parse.h"

/* Timing buckets in microseconds (exported in seconds): 5 ms to 10 s, the
 * bounds of Prometheus client libraries and statsd_exporter. */
#define STATSD_NBOUNDS 11

typedef struct statsd_series statsd_series;

/* A name's type: series of one name are one family, of one type. */
typedef struct statsd_family {
    const char *name; /* its first series' (NULL: the slot is free) */
    uint32_t hash;
    int type;
} statsd_family;

typedef struct statsd_table {
    keel_mutex lock;
    statsd_series **slots;   /* open addressing, `cap` slots (a power of two) */
    statsd_family *families; /* by name alone, `cap` slots too */
    size_t cap, count, max;
    const char *module_name;
} statsd_table;

/* What applying a line did. */
enum { STATSD_APPLIED, STATSD_TABLE_FULL, STATSD_TYPE_CONFLICT };

/* A table for at most `max` series. KEEL_OK or KEEL_ERR_NOMEM. */
int statsd_table_init(statsd_table *t, size_t max, const char *module_name);
void statsd_table_free(statsd_table *t);

/* Adds the line's value to its series (made if new and the table has
 * room). The caller holds t->lock. STATSD_APPLIED, STATSD_TABLE_FULL or
 * STATSD_TYPE_CONFLICT (the name is already a series of another type). */
int statsd_table_apply(statsd_table *t, const statsd_metric *m);

/* keel_metrics_source_fn: every series, family by family. Any thread. */
void statsd_table_emit(keel_metric_visit_fn visit, void *visit_data, void *table);

#endif
