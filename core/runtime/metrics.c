/* The metrics registry and the API over it (ABI 1.4; keel/metrics.h says
 * what it is for, runtime/metrics.h how values are laid out). */
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/util.h"
#include "net/worker.h"
#include "server/server.h"

#define MAX_BOUNDS 64

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
    if (d->nbounds == 0 || d->nbounds > MAX_BOUNDS || d->bounds == NULL)
        return 0;
    for (size_t i = 1; i < d->nbounds; i++)
        if (d->bounds[i] <= d->bounds[i - 1])
            return 0;
    return 1;
}

/* ---- registration -------------------------------------------------------- */

static kl_metric_family *family_find(kl_metrics *m, const char *name)
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

/* The registration itself, for modules and the core alike. */
static int metric_register(keel_server *s, const char *module, const keel_metric_desc *d,
                           kl_metric_sample_fn sample, int per_worker, keel_metric **out)
{
    kl_metrics *m = &s->metrics;
    if (out != NULL)
        *out = NULL;
    if (m->sealed)
        return KEEL_ERR_STATE;
    if (d == NULL || d->size < offsetof(keel_metric_desc, nbounds) + sizeof d->nbounds ||
        !valid_name(d->name, 1) || d->type < KEEL_METRIC_COUNTER ||
        d->type > KEEL_METRIC_HISTOGRAM || !valid_labels(d->labels, d->type == 2) ||
        !valid_bounds(d) || d->scale < 0)
        return KEEL_ERR_INVAL;
    if (sample != NULL && d->type == KEEL_METRIC_HISTOGRAM)
        return KEEL_ERR_INVAL;
    const char *labels = d->labels ? d->labels : "";
    kl_metric_family *f = family_find(m, d->name);
    if (f != NULL) {
        if (!same_family(f, d))
            return KEEL_ERR_INVAL;
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

int keel_metric_register(keel_module *module, const keel_metric_desc *desc, keel_metric **out)
{
    keel_server *s = module->server;
    int rc = s->loading ? metric_register(s, module->name, desc, NULL, 0, out) : KEEL_ERR_STATE;
    if (rc != KEEL_OK)
        kl_log(KEEL_LOG_ERROR, "module '%s': metric '%s': %s", module->name,
               desc && desc->name ? desc->name : "(null)",
               rc == KEEL_ERR_INVAL ? "invalid (name, type, labels or bounds, or another "
                                      "type than its family's)"
                                    : keel_strerror(rc));
    return rc;
}

void kl_metrics_seal(keel_server *s)
{
    s->metrics.sealed = 1;
}

int64_t *kl_metrics_worker_slots(keel_server *s)
{
    return calloc(s->metrics.nslots ? s->metrics.nslots : 1, sizeof(int64_t));
}

void kl_metrics_free(kl_metrics *m)
{
    for (size_t i = 0; i < m->nfamilies; i++)
        family_free(m->families[i]);
    free(m->families);
    memset(m, 0, sizeof *m);
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
    uint64_t cumulative[MAX_BOUNDS];
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

int keel_metrics_collect(keel_module *module, unsigned flags, keel_metric_visit_fn fn, void *ud)
{
    keel_server *s = module->server;
    if (fn == NULL)
        return KEEL_ERR_INVAL;
    if (!s->metrics.sealed || s->workers == NULL)
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
                    add_worker(c, x, s->workers[wi]);
                    emit(c, x, s->workers[wi]->id, fn, ud);
                }
                continue;
            }
            reset(c);
            if (process_wide)
                c->sample.value = x->sample(s, NULL);
            else
                for (size_t wi = 0; wi < s->nworkers; wi++)
                    add_worker(c, x, s->workers[wi]);
            emit(c, x, KEEL_METRIC_ALL_WORKERS, fn, ud);
        }
    }
    free(c);
    return KEEL_OK;
}

/* ---- the core's own series ------------------------------------------------ */

static int64_t sample_loop_idle_ns(keel_server *s, keel_worker *w)
{
    (void)s;
    /* Thread-safe: libuv guards the loop's metrics with its own mutex. */
    return (int64_t)uv_metrics_idle_time(&w->loop);
}

static int64_t sample_rejected_by_acceptor(keel_server *s, keel_worker *w)
{
    (void)w;
    return (int64_t)kl_atomic_load(&s->acceptor_rejected);
}

/* The single acceptor's accept errors, by reason (it runs on the main
 * thread, which has no slots). */
#define ACCEPTOR_ERRORS(reason)                                                                    \
    static int64_t sample_acceptor_##reason(keel_server *s, keel_worker *w)                        \
    {                                                                                              \
        (void)w;                                                                                   \
        return (int64_t)kl_atomic_load(&s->acceptor_errors[KL_ACCEPT_##reason]);                   \
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
    kl_core_metrics *cm = &s->core_metrics;
    keel_metric_desc d;
    int rc = KEEL_OK;
#define REG(out, fn, per_worker)                                                                   \
    do {                                                                                           \
        if (rc == KEEL_OK)                                                                         \
            rc = metric_register(s, "keel", &d, (fn), (per_worker), (out));                        \
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
