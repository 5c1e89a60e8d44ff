/* core/runtime/metrics.h — the metrics registry (ABI 1.4, keel/metrics.h).
 *
 * Series are registered while modules load (the core's own first), which
 * fixes a layout of int64 slots: one for a counter or gauge, nbounds + 2
 * for a histogram (one count per bucket, +Inf included, then the sum).
 * Each worker holds its own array of slots, written only by its thread
 * with relaxed stores (no lock, no read-modify-write), read by any thread
 * with relaxed loads when a module collects. */
#ifndef KEEL_CORE_METRICS_H
#define KEEL_CORE_METRICS_H

#include <keel/metrics.h>

#include "base/atomic.h"

typedef struct keel_server keel_server;
typedef struct keel_worker keel_worker;
typedef struct keel_module keel_module;

typedef struct kl_metric_family kl_metric_family;

/* A value the core reads when collecting rather than keeps in slots
 * (libuv's idle time, the acceptor thread's count, a constant). w is NULL
 * for a process-wide series. */
typedef int64_t (*kl_metric_sample_fn)(keel_server *s, keel_worker *w);

struct keel_metric {
    kl_metric_family *family;
    const char *module; /* the registering module's name */
    char *labels;       /* "" if none */
    size_t slot;        /* first slot in each worker's array */
    kl_metric_sample_fn sample;
    int per_worker; /* sampled series: one value per worker (else one for the process) */
};

struct kl_metric_family {
    char *name;
    char *help;
    int type;
    double scale;
    int64_t *bounds;
    size_t nbounds;
    keel_metric **series;
    size_t nseries;
};

typedef struct kl_metrics {
    kl_metric_family **families; /* in order of first registration */
    size_t nfamilies;
    size_t nslots; /* per worker */
    int sealed;    /* workers exist: no more registrations */
} kl_metrics;

/* Why accepting failed and paused: keel_accept_errors_total's `reason`
 * (net/listener.c, kl_accept_reason). */
enum {
    KL_ACCEPT_EMFILE, /* the process is out of descriptors */
    KL_ACCEPT_ENFILE, /* the system is */
    KL_ACCEPT_ENOMEM, /* the kernel is out of memory (ENOMEM, ENOBUFS) */
    KL_ACCEPT_OTHER,
    KL_ACCEPT_NREASONS
};

/* Why a datagram was dropped: keel_udp_dropped_total's `reason`. */
enum {
    KL_UDP_DROP_TRUNCATED,  /* longer than a receive slot (64 KiB) */
    KL_UDP_DROP_SEND_QUEUE, /* the send queue was full */
    KL_UDP_DROP_ERROR,      /* the system refused a send, or a receive failed */
    KL_UDP_DROP_NREASONS
};

/* The core's own series (docs/metrics.md). */
typedef struct kl_core_metrics {
    keel_metric *conns_open;
    keel_metric *conns_accepted;
    keel_metric *conns_rejected;
    keel_metric *conns_reclaimed;
    keel_metric *accept_errors[KL_ACCEPT_NREASONS];
    keel_metric *bytes_in;
    keel_metric *bytes_out;
    keel_metric *requests[5]; /* by status class, 1xx..5xx */
    keel_metric *request_duration;
    /* UDP listeners (net/udp.c) */
    keel_metric *udp_in, *udp_out, *udp_bytes_in, *udp_bytes_out;
    keel_metric *udp_dropped[KL_UDP_DROP_NREASONS];
} kl_core_metrics;

/* A histogram's bounds: at most this many. */
#define KL_METRIC_MAX_BOUNDS 64

/* Registers one series for `module` (a name kept, not copied): its slots
 * in every worker's array, or, with `sample`, a value read when collected
 * (per_worker: one per worker). KEEL_ERR_INVAL for a bad description or
 * one that disagrees with its family, KEEL_ERR_EXISTS, KEEL_ERR_STATE once
 * sealed. Main thread, before the workers exist. */
/* Why kl_metrics_register refused `d` (with_sample: it was given a
 * sample function): the one rule it broke, in words, or NULL if none. For
 * the module's error line. Main thread. */
const char *kl_metrics_refusal(const kl_metrics *m, const keel_metric_desc *d, int with_sample);

int kl_metrics_register(kl_metrics *m, const char *module, const keel_metric_desc *d,
                        kl_metric_sample_fn sample, int per_worker, keel_metric **out);

/* No registrations from here on; worker arrays can be sized. */
void kl_metrics_seal(kl_metrics *m);

/* A zeroed slot array for one worker, or NULL. */
int64_t *kl_metrics_worker_slots(const kl_metrics *m);

void kl_metrics_free(kl_metrics *m);

/* The hot path, for the core and the API functions alike. */
static inline void kl_metric_add_slot(int64_t *slots, size_t slot, int64_t delta)
{
    int64_t *p = &slots[slot];
    kl_relaxed_store64(p, kl_relaxed_load64(p) + delta);
}

/* The bucket of value: the first bound >= value, else the +Inf one. A
 * scan from the smallest bound, not a binary search: most observations
 * (latencies, sizes) fall in the first buckets, where the scan stops after
 * a compare or two, where a binary search always pays log2(buckets) of
 * them (docs/performance.md). */
static inline size_t kl_metric_bucket(const kl_metric_family *f, int64_t value)
{
    const int64_t *b = f->bounds;
    size_t i = 0, n = f->nbounds;
    while (i < n && b[i] < value)
        i++;
    return i;
}

static inline void kl_metric_observe_slots(int64_t *slots, const keel_metric *m, int64_t value)
{
    kl_metric_add_slot(slots, m->slot + kl_metric_bucket(m->family, value), 1);
    kl_metric_add_slot(slots, m->slot + m->family->nbounds + 1, value);
}

#endif
