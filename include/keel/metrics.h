/* keel/metrics.h — the types of the metrics API (ABI 1.4).
 *
 * Any module registers counters, gauges and histograms in its load
 * (keel_metric_register) and updates them on its worker threads
 * (keel_metric_add, keel_metric_set, keel_metric_observe). Every worker
 * writes its own copy of each value, so an update takes no lock and no
 * atomic read-modify-write: it is a load and a store on memory no other
 * thread writes. A reader (the stats module, any module, any thread) sums
 * the copies with keel_metrics_collect.
 *
 * Names and labels follow the Prometheus data model
 * (https://prometheus.io/docs/concepts/data_model/): a family is a name
 * with one HELP and one TYPE; each registration is one series of it, told
 * apart by its labels. Values are integers in a unit of the module's
 * choosing (microseconds, bytes), and `scale` converts them to the
 * exported unit (seconds: scale 1e-6), so the hot path never touches a
 * floating-point number.
 */
#ifndef KEEL_METRICS_H
#define KEEL_METRICS_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One registered series (opaque); valid until the server is freed. */
typedef struct keel_metric keel_metric;

typedef enum keel_metric_type {
    KEEL_METRIC_COUNTER = 0,  /* only goes up: add(delta >= 0) */
    KEEL_METRIC_GAUGE = 1,    /* goes up and down: add(any delta) or set */
    KEEL_METRIC_HISTOGRAM = 2 /* observe(value): counts per bucket, count, sum */
} keel_metric_type;

/* What keel_metric_register is given. Set size to sizeof(keel_metric_desc);
 * grows at the end. The core copies the struct and its strings. */
typedef struct keel_metric_desc {
    size_t size;
    /* [a-zA-Z_:][a-zA-Z0-9_:]*; a counter's name ends in "_total" by
     * convention (the exposition format appends nothing). Name it after
     * the module: "websocket_messages_received_total". */
    const char *name;
    const char *help; /* one line; the first registration of a family sets it */
    int type;         /* keel_metric_type; the same for every series of a family */
    /* NULL or label pairs as the exposition format writes them, e.g.
     * "class=\"2xx\"" or "dir=\"in\",kind=\"text\"" (values escaped: \\ \"
     * \n). Each series of a family has different labels. "worker" is the
     * core's (per-worker views add it). */
    const char *labels;
    /* Exported value = stored integer * scale (0 means 1). Seconds from
     * microseconds: 1e-6. */
    double scale;
    /* Histograms only: the upper bounds of the buckets, in stored units,
     * strictly increasing (at most 64); the +Inf bucket is implicit.
     * Copied. */
    const int64_t *bounds;
    size_t nbounds;
} keel_metric_desc;

/* One value as a reader sees it (keel_metrics_collect). Grows at the end;
 * a reader checks size before reading a field added later. */
typedef struct keel_metric_sample {
    size_t size;
    const char *module;         /* the registering module's name ("keel" for the core's) */
    const char *name;           /* the family */
    const char *help;           /* the family's help */
    int type;                   /* keel_metric_type */
    const char *labels;         /* "" if none */
    double scale;               /* as registered (1 if it was 0) */
    unsigned worker;            /* the worker's id, or KEEL_METRIC_ALL_WORKERS for the sum */
    int first_of_family;        /* 1 for the family's first sample of this collection */
    int64_t value;              /* counter or gauge, stored units */
    uint64_t count;             /* histogram: observations */
    int64_t sum;                /* histogram: their sum, stored units */
    const int64_t *bounds;      /* histogram: bucket upper bounds, stored units */
    const uint64_t *cumulative; /* histogram: observations <= each bound (nbounds) */
    size_t nbounds;
} keel_metric_sample;

#define KEEL_METRIC_ALL_WORKERS 0xffffffffu

/* keel_metrics_collect's flags. */
enum {
    KEEL_METRICS_SUM = 0,       /* one sample per series: the workers' sum */
    KEEL_METRICS_PER_WORKER = 1 /* one sample per series and worker */
};

/* Called for each sample, family by family (every series of a family
 * together, families in the order they were first registered). The
 * sample and what it points to are valid during the call only. */
typedef void (*keel_metric_visit_fn)(const keel_metric_sample *sample, void *userdata);

/* A source of samples the module keeps itself (ABI 1.9), for series whose
 * names are not known at load (a statsd receiver's): keel_metrics_collect
 * calls it after the registered families, with the collector's visit
 * function and userdata, and it calls visit once per sample, every series
 * of a family together, first_of_family set on a family's first, worker
 * KEEL_METRIC_ALL_WORKERS (the source's own totals), module set to its
 * module's name. Its names must not be those of registered families.
 * Called on the collecting thread (any thread, concurrently with the
 * workers): the source locks what it reads. */
typedef void (*keel_metrics_source_fn)(keel_metric_visit_fn visit, void *visit_data,
                                       void *userdata);

#ifdef __cplusplus
}
#endif

#endif
