/* The metrics API over the registry (runtime/metrics.c): registration by
 * modules, the workers' updates, collection from any thread, and the
 * core's own series (ABI 1.4; keel/metrics.h says what it is for). */
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/util.h"
#include "net/worker.h"
#include "runtime/crash.h"
#include "server/server.h"

/* ---- registration (main thread, while modules load) ---------------------- */

int keel_metric_register(keel_module *module, const keel_metric_desc *desc, keel_metric **out)
{
    keel_server *s = module->server;
    int rc = s->loading ? kl_metrics_register(&s->metrics, module->name, desc, NULL, 0, out)
                        : KEEL_ERR_STATE;
    if (rc == KEEL_OK)
        return rc;
    const char *why = rc == KEEL_ERR_INVAL    ? kl_metrics_refusal(&s->metrics, desc, 0)
                      : rc == KEEL_ERR_EXISTS ? "a series with these labels is already registered"
                                              : keel_strerror(rc);
    kl_log(KEEL_LOG_ERROR, "module '%s': metric '%s': %s", module->name,
           desc && desc->name ? desc->name : "(null)", why ? why : keel_strerror(rc));
    return rc;
}

/* ---- updates: worker thread ---------------------------------------------- */

void keel_metric_add(keel_worker *w, keel_metric *metric, int64_t delta)
{
    if (metric != NULL && metric->sample == NULL)
        kl_metric_add_slot(w->metrics, metric->slot, delta);
}

void keel_metric_set(keel_worker *w, keel_metric *metric, int64_t value)
{
    if (metric != NULL && metric->sample == NULL)
        kl_relaxed_store64(&w->metrics[metric->slot], value);
}

void keel_metric_observe(keel_worker *w, keel_metric *metric, int64_t value)
{
    if (metric != NULL && metric->sample == NULL && metric->family->type == KEEL_METRIC_HISTOGRAM)
        kl_metric_observe_slots(w->metrics, metric, value);
}

/* ---- collection: any thread ---------------------------------------------- */

typedef struct collect {
    keel_server *s;
    keel_metric_sample sample;
    uint64_t cumulative[KL_METRIC_MAX_BOUNDS];
    int first;
} collect;

/* Adds worker w's copy of series x to the sample (histograms: buckets in
 * `cumulative`, made cumulative at the end). */
static void add_worker(collect *c, const keel_metric *x, keel_worker *w)
{
    const kl_metric_family *f = x->family;
    if (x->sample != NULL) {
        c->sample.value += x->sample(c->s, w);
        return;
    }
    const int64_t *slots = w->metrics;
    if (f->type != KEEL_METRIC_HISTOGRAM) {
        c->sample.value += kl_relaxed_load64(&slots[x->slot]);
        return;
    }
    for (size_t b = 0; b <= f->nbounds; b++) {
        uint64_t n = (uint64_t)kl_relaxed_load64(&slots[x->slot + b]);
        if (b < f->nbounds)
            c->cumulative[b] += n;
        c->sample.count += n;
    }
    c->sample.sum += kl_relaxed_load64(&slots[x->slot + f->nbounds + 1]);
}

static void emit(collect *c, const keel_metric *x, unsigned worker, keel_metric_visit_fn fn,
                 void *ud)
{
    const kl_metric_family *f = x->family;
    keel_metric_sample *s = &c->sample;
    s->worker = worker;
    s->labels = x->labels;
    s->module = x->module;
    s->first_of_family = c->first;
    c->first = 0;
    if (f->type == KEEL_METRIC_HISTOGRAM) {
        for (size_t b = 1; b < f->nbounds; b++)
            c->cumulative[b] += c->cumulative[b - 1];
        s->bounds = f->bounds;
        s->cumulative = c->cumulative;
        s->nbounds = f->nbounds;
    }
    fn(s, ud);
}

static void reset(collect *c)
{
    c->sample.value = 0;
    c->sample.count = 0;
    c->sample.sum = 0;
    memset(c->cumulative, 0, sizeof c->cumulative);
}

/* What a source hands over passes here: a family a source names that is
 * also registered would be exposed twice, which a scraper refuses, so its
 * samples are dropped (the registered one stays). Decided once per run of
 * samples of one name. */
typedef struct source_filter {
    keel_server *s;
    keel_metric_visit_fn fn;
    void *ud;
    char last[256]; /* the name last decided ("" none), and whether it was taken */
    int taken;
} source_filter;

static void filtered_visit(const keel_metric_sample *sample, void *userdata)
{
    source_filter *f = userdata;
    if (sample == NULL || sample->name == NULL)
        return;
    if (f->last[0] == '\0' || strcmp(f->last, sample->name) != 0) {
        f->taken = 0;
        for (size_t i = 0; i < f->s->metrics.nfamilies && !f->taken; i++)
            f->taken = strcmp(f->s->metrics.families[i]->name, sample->name) == 0;
        size_t n = strlen(sample->name);
        /* A name too long to keep is decided again at each sample. */
        if (n < sizeof f->last)
            memcpy(f->last, sample->name, n + 1);
        else
            f->last[0] = '\0';
    }
    if (!f->taken)
        f->fn(sample, f->ud);
}

int keel_metrics_collect(keel_module *module, unsigned flags, keel_metric_visit_fn fn, void *ud)
{
    keel_server *s = module->server;
    if (fn == NULL)
        return KEEL_ERR_INVAL;
    if (!s->metrics.sealed || s->host.workers == NULL)
        return KEEL_ERR_STATE;
    collect *c = calloc(1, sizeof *c);
    if (c == NULL)
        return KEEL_ERR_NOMEM;
    c->s = s;
    c->sample.size = sizeof c->sample;
    for (size_t i = 0; i < s->metrics.nfamilies; i++) {
        const kl_metric_family *f = s->metrics.families[i];
        c->sample.name = f->name;
        c->sample.help = f->help;
        c->sample.type = f->type;
        c->sample.scale = f->scale;
        c->first = 1;
        for (size_t k = 0; k < f->nseries; k++) {
            const keel_metric *x = f->series[k];
            int process_wide = x->sample != NULL && !x->per_worker;
            if ((flags & KEEL_METRICS_PER_WORKER) && !process_wide) {
                for (size_t wi = 0; wi < s->nworkers; wi++) {
                    reset(c);
                    add_worker(c, x, s->host.workers[wi]);
                    emit(c, x, s->host.workers[wi]->id, fn, ud);
                }
                continue;
            }
            reset(c);
            if (process_wide)
                c->sample.value = x->sample(s, NULL);
            else
                for (size_t wi = 0; wi < s->nworkers; wi++)
                    add_worker(c, x, s->host.workers[wi]);
            emit(c, x, KEEL_METRIC_ALL_WORKERS, fn, ud);
        }
    }
    free(c);
    /* The modules' own sources (ABI 1.9) after the registered families. */
    source_filter filter = {s, fn, ud, "", 0};
    for (size_t i = 0; i < s->registry.nsources; i++) {
        const kl_metrics_source *src = &s->registry.sources[i];
        KL_IN_MODULE(src->owner->name, src->fn(filtered_visit, &filter, src->userdata));
    }
    return KEEL_OK;
}

/* ---- the core's own series ------------------------------------------------ */

static int64_t sample_loop_idle_ns(keel_server *s, keel_worker *w)
{
    (void)s;
    return (int64_t)kl_worker_loop_idle_ns(w);
}

static int64_t sample_rejected_by_acceptor(keel_server *s, keel_worker *w)
{
    (void)w;
    return (int64_t)kl_atomic_load(&s->host.acceptor_rejected);
}

/* The single acceptor's accept errors, by reason (it runs on the main
 * thread, which has no slots). */
#define ACCEPTOR_ERRORS(reason)                                                                    \
    static int64_t sample_acceptor_##reason(keel_server *s, keel_worker *w)                        \
    {                                                                                              \
        (void)w;                                                                                   \
        return (int64_t)kl_atomic_load(&s->host.acceptor_errors[KL_ACCEPT_##reason]);              \
    }
ACCEPTOR_ERRORS(EMFILE)
ACCEPTOR_ERRORS(ENFILE)
ACCEPTOR_ERRORS(ENOMEM)
ACCEPTOR_ERRORS(OTHER)
#undef ACCEPTOR_ERRORS

static int64_t sample_start_time(keel_server *s, keel_worker *w)
{
    (void)w;
    return s->start_time_ms;
}

static int64_t sample_one(keel_server *s, keel_worker *w)
{
    (void)s;
    (void)w;
    return 1;
}

/* Request latency buckets, in microseconds: 100 µs to 10 s, roughly
 * 1-2.5-5 per decade as Prometheus client libraries default to. */
static const int64_t duration_bounds_us[] = {
    100,   250,    500,    1000,   2500,    5000,    10000,   25000,
    50000, 100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000,
};

#define CORE_SERIES(name_, help_, type_)                                                           \
    {                                                                                              \
        .size = sizeof(keel_metric_desc), .name = (name_), .help = (help_), .type = (type_)        \
    }

int kl_metrics_register_core(keel_server *s)
{
    kl_core_metrics *cm = &s->host.core_metrics;
    keel_metric_desc d;
    int rc = KEEL_OK;
#define REG(out, fn, per_worker)                                                                   \
    do {                                                                                           \
        if (rc == KEEL_OK)                                                                         \
            rc = kl_metrics_register(&s->metrics, "keel", &d, (fn), (per_worker), (out));          \
    } while (0)

    d = (keel_metric_desc)CORE_SERIES(
        "keel_connections_open", "Connections open now (accepted and outbound)", KEEL_METRIC_GAUGE);
    REG(&cm->conns_open, NULL, 0);
    d = (keel_metric_desc)CORE_SERIES("keel_connections_accepted_total", "Connections accepted",
                                      KEEL_METRIC_COUNTER);
    REG(&cm->conns_accepted, NULL, 0);
    d = (keel_metric_desc)CORE_SERIES("keel_connections_rejected_total",
                                      "Connections refused over max_connections",
                                      KEEL_METRIC_COUNTER);
    REG(&cm->conns_rejected, NULL, 0);
    d.labels = "by=\"acceptor\"";
    REG(NULL, sample_rejected_by_acceptor, 0);
    d = (keel_metric_desc)CORE_SERIES(
        "keel_connections_reclaimed_total",
        "Idle connections closed at max_connections to admit new ones", KEEL_METRIC_COUNTER);
    REG(&cm->conns_reclaimed, NULL, 0);
    static const struct {
        const char *labels, *acceptor_labels;
        kl_metric_sample_fn acceptor;
    } accept_reasons[KL_ACCEPT_NREASONS] = {
        [KL_ACCEPT_EMFILE] = {"reason=\"emfile\"", "reason=\"emfile\",by=\"acceptor\"",
                              sample_acceptor_EMFILE},
        [KL_ACCEPT_ENFILE] = {"reason=\"enfile\"", "reason=\"enfile\",by=\"acceptor\"",
                              sample_acceptor_ENFILE},
        [KL_ACCEPT_ENOMEM] = {"reason=\"enomem\"", "reason=\"enomem\",by=\"acceptor\"",
                              sample_acceptor_ENOMEM},
        [KL_ACCEPT_OTHER] = {"reason=\"other\"", "reason=\"other\",by=\"acceptor\"",
                             sample_acceptor_OTHER},
    };
    for (size_t i = 0; i < KL_ACCEPT_NREASONS; i++) {
        d = (keel_metric_desc)CORE_SERIES(
            "keel_accept_errors_total",
            "Accepts that failed for want of descriptors or memory; each pauses accepting 100 ms",
            KEEL_METRIC_COUNTER);
        d.labels = accept_reasons[i].labels;
        REG(&cm->accept_errors[i], NULL, 0);
        d.labels = accept_reasons[i].acceptor_labels;
        REG(NULL, accept_reasons[i].acceptor, 0);
    }
    d = (keel_metric_desc)CORE_SERIES("keel_bytes_received_total",
                                      "Bytes read from sockets (before any transport)",
                                      KEEL_METRIC_COUNTER);
    REG(&cm->bytes_in, NULL, 0);
    d = (keel_metric_desc)CORE_SERIES("keel_bytes_sent_total",
                                      "Bytes written to sockets (sendfile included)",
                                      KEEL_METRIC_COUNTER);
    REG(&cm->bytes_out, NULL, 0);
    static const char *const classes[] = {"class=\"1xx\"", "class=\"2xx\"", "class=\"3xx\"",
                                          "class=\"4xx\"", "class=\"5xx\""};
    for (size_t i = 0; i < 5; i++) {
        d = (keel_metric_desc)CORE_SERIES("keel_http_requests_total",
                                          "HTTP responses by status class", KEEL_METRIC_COUNTER);
        d.labels = classes[i];
        REG(&cm->requests[i], NULL, 0);
    }
    d = (keel_metric_desc)CORE_SERIES(
        "keel_http_request_duration_seconds",
        "From the request head to the response's end (completed responses)", KEEL_METRIC_HISTOGRAM);
    d.scale = 1e-6;
    d.bounds = duration_bounds_us;
    d.nbounds = KL_ARRAY_SIZE(duration_bounds_us);
    REG(&cm->request_duration, NULL, 0);
    d = (keel_metric_desc)CORE_SERIES(
        "keel_udp_datagrams_received_total",
        "Datagrams UDP listeners received and handed to their protocol", KEEL_METRIC_COUNTER);
    REG(&cm->udp_in, NULL, 0);
    d = (keel_metric_desc)CORE_SERIES("keel_udp_datagrams_sent_total",
                                      "Datagrams UDP listeners' protocols sent",
                                      KEEL_METRIC_COUNTER);
    REG(&cm->udp_out, NULL, 0);
    d = (keel_metric_desc)CORE_SERIES("keel_udp_bytes_received_total",
                                      "Payload bytes of the datagrams received",
                                      KEEL_METRIC_COUNTER);
    REG(&cm->udp_bytes_in, NULL, 0);
    d = (keel_metric_desc)CORE_SERIES("keel_udp_bytes_sent_total",
                                      "Payload bytes of the datagrams sent", KEEL_METRIC_COUNTER);
    REG(&cm->udp_bytes_out, NULL, 0);
    static const char *const udp_drops[KL_UDP_DROP_NREASONS] = {
        [KL_UDP_DROP_TRUNCATED] = "reason=\"truncated\"",
        [KL_UDP_DROP_SEND_QUEUE] = "reason=\"send_queue\"",
        [KL_UDP_DROP_ERROR] = "reason=\"error\"",
    };
    for (size_t i = 0; i < KL_UDP_DROP_NREASONS; i++) {
        d = (keel_metric_desc)CORE_SERIES(
            "keel_udp_dropped_total",
            "Datagrams dropped: longer than 64 KiB, over a send queue, or refused by the system",
            KEEL_METRIC_COUNTER);
        d.labels = udp_drops[i];
        REG(&cm->udp_dropped[i], NULL, 0);
    }
    d = (keel_metric_desc)CORE_SERIES(
        "keel_worker_loop_idle_seconds_total",
        "Time each worker's loop waited for events; utilisation is 1 - its rate",
        KEEL_METRIC_COUNTER);
    d.scale = 1e-9;
    REG(NULL, sample_loop_idle_ns, 1);
    d = (keel_metric_desc)CORE_SERIES("keel_start_time_seconds",
                                      "When the server started, in seconds since the epoch",
                                      KEEL_METRIC_GAUGE);
    d.scale = 1e-3;
    REG(NULL, sample_start_time, 0);
    d = (keel_metric_desc)CORE_SERIES("keel_build_info", "The running keel: version and ABI",
                                      KEEL_METRIC_GAUGE);
    d.labels = "version=\"" KEEL_VERSION_STRING
               "\",abi=\"" KL_STRINGIFY(KEEL_ABI_MAJOR) "." KL_STRINGIFY(KEEL_ABI_MINOR) "\"";
    REG(NULL, sample_one, 0);
#undef REG
    return rc;
}
