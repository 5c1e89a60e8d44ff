/* The exchange: request filters, routing, the handler, the log phase; and
 * the registration of routes and filters, with their run order. */
#include <stdlib.h>
#include <string.h>

#include "http/http.h"
#include "base/log.h"
#include "runtime/crash.h"
#include "base/util.h"
#include "net/conn.h"
#include "net/worker.h"

/* ---- registration (main thread, during load) ---------------------------- */

kl_http *kl_http_new(void)
{
    return calloc(1, sizeof(kl_http));
}

int kl_http_route_add(kl_http *http, keel_module *owner, const char *method, const char *pattern,
                      keel_http_handler handler, void *userdata, keel_module **taken_by)
{
    void *other = NULL;
    int rc = kl_router_add_owned(&http->routes, method, pattern, handler, userdata, owner, &other);
    if (taken_by != NULL)
        *taken_by = other;
    return rc;
}

int kl_http_filter_add(kl_http *http, keel_module *owner, const keel_http_filter *f)
{
    if (f == NULL || f->size < offsetof(keel_http_filter, on_request))
        return KEEL_ERR_INVAL;
    if (kl_grow((void **)&http->filters, &http->filters_cap, http->nfilters + 1,
                sizeof *http->filters) != KEEL_OK)
        return KEEL_ERR_NOMEM;
    kl_filter *entry = &http->filters[http->nfilters++];
    memset(entry, 0, sizeof *entry);
    memcpy(&entry->cb, f, f->size < sizeof entry->cb ? f->size : sizeof entry->cb);
    entry->cb.size = sizeof entry->cb;
    entry->owner = owner;
    entry->module_index = owner->index;
    if (entry->cb.on_response_body != NULL || entry->cb.on_response_pieces != NULL)
        http->has_body_filters = 1;
    return KEEL_OK;
}

/* Lists the filters that have a log hook, in run order. */
static int index_hooks(kl_http *http)
{
    free(http->log_filters);
    http->nlog_filters = 0;
    size_t n = http->nfilters ? http->nfilters : 1;
    http->log_filters = malloc(n * sizeof *http->log_filters);
    if (http->log_filters == NULL)
        return KEEL_ERR_NOMEM;
    for (size_t i = 0; i < http->nfilters; i++)
        if (http->filters[i].cb.on_log != NULL)
            http->log_filters[http->nlog_filters++] = i;
    return KEEL_OK;
}

/* ---- the pipelines (keel_http_filter.scope, ABI 1.11) --------------------- */

/* A scope hook's answer for one struct of its module: scopes share their
 * structs (an inner scope that sets nothing of a module's has its
 * parent's), and the hook is asked once per struct. */
typedef struct scope_answer {
    size_t filter;
    const void *conf;
    int keep;
    void *userdata;
} scope_answer;

typedef struct pipeline_build {
    kl_http *http;
    scope_answer *answers;
    size_t nanswers, cap;
} pipeline_build;

static int ask_scope(pipeline_build *b, size_t i, const void *conf, int *keep, void **ud)
{
    const kl_filter *f = &b->http->filters[i];
    *keep = 1;
    *ud = f->cb.userdata;
    if (f->cb.scope == NULL)
        return KEEL_OK;
    for (size_t k = 0; k < b->nanswers; k++)
        if (b->answers[k].filter == i && b->answers[k].conf == conf) {
            *keep = b->answers[k].keep;
            *ud = b->answers[k].userdata;
            return KEEL_OK;
        }
    int rc;
    KL_IN_MODULE(f->owner->name, rc = f->cb.scope(conf, f->cb.userdata, ud));
    if (rc < 0) {
        kl_log(KEEL_LOG_ERROR, "module '%s': filter '%s': %s", f->owner->name,
               f->cb.name ? f->cb.name : "", keel_strerror(rc));
        return rc;
    }
    *keep = rc > 0;
    if (kl_grow((void **)&b->answers, &b->cap, b->nanswers + 1, sizeof *b->answers) != KEEL_OK)
        return KEEL_ERR_NOMEM;
    b->answers[b->nanswers++] = (scope_answer){i, conf, *keep, *ud};
    return KEEL_OK;
}

/* The pipeline of a scope (NULL: of requests outside every scope). */
static int build_pipeline(pipeline_build *b, const kl_scope *scope, const kl_pipeline **out)
{
    kl_http *http = b->http;
    size_t n = http->nfilters ? http->nfilters : 1;
    kl_pipeline *p = calloc(1, sizeof *p);
    if (p == NULL)
        return KEEL_ERR_NOMEM;
    p->next = http->pipelines;
    http->pipelines = p;
    p->request = malloc(n * sizeof *p->request);
    p->head = malloc(n * sizeof *p->head);
    if (p->request == NULL || p->head == NULL)
        return KEEL_ERR_NOMEM;
    for (size_t i = 0; i < http->nfilters; i++) {
        const kl_filter *f = &http->filters[i];
        if (f->cb.on_request == NULL && f->cb.on_response_head == NULL)
            continue;
        const keel_module *m = f->owner;
        const void *conf = scope != NULL ? scope->confs[m->index] : m->config.conf;
        int keep;
        void *ud;
        int rc = ask_scope(b, i, conf, &keep, &ud);
        if (rc != KEEL_OK)
            return rc;
        if (!keep)
            continue;
        if (f->cb.on_request != NULL)
            p->request[p->nrequest++] = (kl_request_stage){f->cb.on_request, ud, i};
        if (f->cb.on_response_head != NULL)
            p->head[p->nhead++] = (kl_head_stage){f->cb.on_response_head, ud, i};
    }
    *out = p;
    return KEEL_OK;
}

static int build_scope_pipeline(kl_scope *scope, void *ud)
{
    return build_pipeline(ud, scope, &scope->pipeline);
}

static void free_pipelines(kl_http *http)
{
    while (http->pipelines != NULL) {
        kl_pipeline *next = http->pipelines->next;
        free(http->pipelines->request);
        free(http->pipelines->head);
        free(http->pipelines);
        http->pipelines = next;
    }
    http->pipeline = NULL;
}

static int build_pipelines(kl_http *http, kl_host *host)
{
    free_pipelines(http);
    pipeline_build b = {http, NULL, 0, 0};
    int rc = build_pipeline(&b, NULL, &http->pipeline);
    if (rc == KEEL_OK && host->scopes != NULL)
        rc = kl_scopes_each_scope(host->scopes, build_scope_pipeline, &b);
    free(b.answers);
    return rc;
}

static int order_of(const kl_filter *f)
{
    return f->cb.order < 0 ? -1 : f->cb.order > 0 ? 1 : 0;
}

static void move_filter(kl_filter *list, size_t from, size_t to)
{
    kl_filter moving = list[from];
    if (from < to)
        memmove(&list[from], &list[from + 1], (to - from) * sizeof *list);
    else
        memmove(&list[to + 1], &list[to], (from - to) * sizeof *list);
    list[to] = moving;
}

/* Coarse order first (FIRST, MIDDLE, LAST), then the config's module
 * order; then "before"/"after" constraints move single filters, as
 * Apache's hook ordering does. */
int kl_http_prepare(kl_http *http, kl_host *host)
{
    host->slots[KL_SLOT_HTTP] =
        (kl_slot_type){sizeof(kl_http_worker), kl_http_worker_init, kl_http_worker_dispose, http};
    kl_filter *f = http->filters;
    size_t n = http->nfilters;
    for (size_t i = 1; i < n; i++) /* insertion sort: stable, n is small */
        for (size_t k = i; k > 0; k--) {
            int a = order_of(&f[k - 1]), b = order_of(&f[k]);
            if (a < b || (a == b && f[k - 1].module_index <= f[k].module_index))
                break;
            kl_filter t = f[k];
            f[k] = f[k - 1];
            f[k - 1] = t;
        }
    for (size_t pass = 0; pass <= n; pass++) {
        int moved = 0;
        for (size_t i = 0; i < n; i++) {
            const char *before = f[i].cb.before, *after = f[i].cb.after;
            for (size_t k = 0; before && k < i; k++)
                if (strcmp(f[k].owner->name, before) == 0) {
                    move_filter(f, i, k);
                    moved = 1;
                    break;
                }
            for (size_t k = n; after && k-- > i + 1;)
                if (strcmp(f[k].owner->name, after) == 0) {
                    move_filter(f, i, k);
                    moved = 1;
                    break;
                }
        }
        if (!moved) {
            /* Which filters want bodies, in their final order; past the
             * 64th, all of them count (keel_response_filter_skip_body
             * then has no effect on them). */
            for (size_t i = 0; i < n; i++) {
                int body = f[i].cb.on_response_body != NULL || f[i].cb.on_response_pieces != NULL;
                uint64_t bit = i < 64 ? (uint64_t)1 << i : ~(uint64_t)0;
                if (body || i >= 64)
                    http->body_filter_mask |= bit;
                if ((body && f[i].cb.on_response_pieces == NULL) || i >= 64)
                    http->bytes_filter_mask |= bit;
            }
            int rc = index_hooks(http);
            return rc == KEEL_OK ? build_pipelines(http, host) : rc;
        }
    }
    kl_log(KEEL_LOG_ERROR, "HTTP filters: contradictory before/after constraints");
    return KEEL_ERR_CONFIG;
}

void kl_http_free(kl_http *http)
{
    if (http == NULL)
        return;
    kl_router_free(http->routes);
    free_pipelines(http);
    free(http->filters);
    free(http->log_filters);
    free(http);
}

/* ---- the exchange ------------------------------------------------------ */

/* keel_http_requests_total and keel_http_request_duration_seconds: every
 * response that had a status (its class), the duration of completed ones. */
static void count_exchange(keel_request *req, const keel_http_log_info *info)
{
    if (info->status < 100 || info->status > 599)
        return;
    keel_worker *w = req->worker;
    const kl_core_metrics *cm = &w->host->core_metrics;
    kl_metric_add_slot(w->metrics, cm->requests[info->status / 100 - 1]->slot, 1);
    if (info->completed)
        kl_metric_observe_slots(w->metrics, cm->request_duration, (int64_t)info->duration_us);
}

void kl_request_finish(keel_request *req)
{
    if (req->logged)
        return;
    req->logged = 1;
    const kl_http *http = req->http;
    keel_http_log_info info = {
        sizeof info,
        req->res.head_sent ? req->res.status : 0,
        req->res.body_bytes,
        req->body_received,
        uv_hrtime() / 1000 - req->start_us,
        req->res.ended && !req->aborted && !req->res.cut,
        req->head.stream_id,
    };
    count_exchange(req, &info);
    for (size_t k = 0; k < http->nlog_filters; k++) {
        const kl_filter *f = &http->filters[http->log_filters[k]];
        f->cb.on_log(req, &req->res, &info, f->cb.userdata);
    }
    if (!req->exchange_done) {
        kl_request_body_pause_end(req);
        req->exchange_done = 1;
        /* The protocol may go on with the next request from here: the
         * head's views die now, which is why logging came first. */
        req->sink->done(req->exchange, !req->res.close_connection);
        kl_request_unref(req); /* the exchange's reference */
    }
}

int keel_http_request_keep_alive(keel_request *req)
{
    return !req->res.close_connection;
}

/* Answers with `status`, or, once a head has gone, cuts the response
 * short (kl_response_send_status knows which). */
static void answer_error(keel_request *req, int status)
{
    if (!req->res.ended)
        kl_response_send_status(&req->res, status);
}

/* The request's scope (docs/configuration.md): by its listener, its host
 * and its normalised path. 0, or the status for a host no site takes. */
static int select_scope(keel_request *req)
{
    const kl_listen_spec *spec = req->conn->origin->spec;
    if (spec == NULL) /* not accepted: the implicit scope */
        return 0;
    keel_str host = {"", 0};
    for (size_t i = 0; i < req->head.nheaders; i++) {
        if (kl_request_field_token(req, i) == KEEL_HDR_HOST) {
            host = req->head.headers[i].value;
            break;
        }
    }
    const kl_host *h = req->worker->host;
    size_t listener = (size_t)(spec - h->settings.listen);
    kl_http_worker *hw = kl_worker_slot(req->worker, KL_SLOT_HTTP);
    const kl_site_scope *site;
    int status = 0;
    if ((hw->last_site.site != NULL || hw->last_site.status != 0) &&
        hw->last_site.listener == listener && hw->last_site.len == host.len &&
        memcmp(hw->last_site.host, host.ptr, host.len) == 0) {
        site = hw->last_site.site;
        status = hw->last_site.status;
    } else {
        site = kl_scopes_site(h->scopes, listener, host, &status);
        if (host.len <= sizeof hw->last_site.host) {
            hw->last_site.site = site;
            hw->last_site.status = status;
            hw->last_site.listener = listener;
            hw->last_site.len = (uint8_t)host.len;
            memcpy(hw->last_site.host, host.ptr, host.len);
        }
    }
    if (site == NULL)
        return status;
    req->site = site;
    req->scope = kl_scopes_path(site, req->path);
    return 0;
}

int keel_request_set_path(keel_request *req, const char *path, size_t path_len, const char *query,
                          size_t query_len, unsigned flags)
{
    if (req->routed || req->res.head_sent || req->res.ended)
        return KEEL_ERR_STATE;
    keel_str new_query = req->query;
    if (flags & KEEL_PATH_QUERY) {
        new_query = (keel_str){NULL, 0};
        if (query != NULL) {
            /* The query is raw target text: the bytes a target may hold
             * (RFC 9112 3.2), no fragment. */
            for (size_t i = 0; i < query_len; i++)
                if ((unsigned char)query[i] <= 0x20 || (unsigned char)query[i] >= 0x7f ||
                    query[i] == '#')
                    return KEEL_ERR_INVAL;
            char *q = kl_arena_dup(&req->arena, query, query_len);
            if (q == NULL)
                return KEEL_ERR_NOMEM;
            new_query = (keel_str){q, query_len};
        }
    }
    keel_str new_path;
    int rc = kl_request_normalise_path(req, path, path_len, &new_path);
    if (rc != KEEL_OK)
        return rc;
    req->path = new_path;
    req->query = new_query;
    if ((flags & KEEL_PATH_RESCOPE) && req->site != NULL)
        req->scope = kl_scopes_path(req->site, new_path);
    return KEEL_OK;
}

const void *keel_request_config(keel_request *req, keel_module *module)
{
    if (req->scope != NULL)
        return req->scope->confs[module->index];
    return module->config.conf;
}

const void *keel_conn_site_config(keel_conn *conn, keel_module *module, const char *host,
                                  size_t host_len)
{
    if (conn == NULL || module == NULL)
        return NULL;
    const kl_listen_spec *spec = conn->origin->spec;
    const kl_host *h = kl_conn_worker(conn)->host;
    if (spec == NULL || h->scopes == NULL)
        return module->config.conf;
    int status = 0;
    const kl_site_scope *site = kl_scopes_site(h->scopes, (size_t)(spec - h->settings.listen),
                                               (keel_str){host, host ? host_len : 0}, &status);
    return site != NULL ? kl_scopes_site_own(site)->confs[module->index] : NULL;
}

/* The handler (or a filter) answers later (a body to read, an upstream,
 * a timer): the client may leave before it does, so the request keeps
 * what it may still ask of the connection. A file being sent needs
 * nothing more of the handler. */
static void finish_dispatch(keel_request *req)
{
    keel_response *res = &req->res;
    if (!res->ended && !res->from_file && !req->aborted)
        kl_request_keep_facts(req);
}

/* The first stage of p whose filter is `from` or later. */
static size_t stage_from(const kl_pipeline *p, size_t from)
{
    size_t k = 0;
    while (k < p->nrequest && p->request[k].filter < from)
        k++;
    return k;
}

/* The request filters of the request's scope from filter index `from` on,
 * then the router and the handler. A filter that returns KEEL_HTTP_DONE
 * without having answered holds the request: keel_request_continue
 * resumes after it. A filter that changes the request's scope (a rewrite)
 * hands the rest of the run to the new scope's pipeline. */
static void run_filters_from(keel_request *req, size_t from)
{
    keel_response *res = &req->res;
    const kl_http *http = req->http;
    const struct kl_scope *scope = req->scope;
    const kl_pipeline *p = kl_request_pipeline(req);
    for (size_t k = from ? stage_from(p, from) : 0; k < p->nrequest; k++) {
        const kl_request_stage *s = &p->request[k];
        int rc = s->on_request(req, res, s->userdata);
        if (rc < 0) {
            answer_error(req, 500);
            goto out;
        }
        if (rc == KEEL_HTTP_DONE) {
            if (!res->ended && !res->head_sent && !req->aborted)
                req->filter_next = s->filter + 1;
            goto out;
        }
        if (req->scope != scope) {
            size_t next = s->filter + 1;
            scope = req->scope;
            p = kl_request_pipeline(req);
            k = stage_from(p, next) - 1; /* the loop's k++ comes first */
        }
    }
    req->routed = 1;
    int status = kl_router_match(http->routes, req->head.method, req->path, &req->route);
    if (status != 200) {
        answer_error(req, status);
        goto out;
    }
    if (req->route.handler(req, res, req->route.userdata) < 0)
        answer_error(req, 500);
out:
    finish_dispatch(req);
}

void keel_http_request_dispatch(keel_request *req)
{
    kl_request_ref(req);
    /* Before anything is routed or forwarded, whatever protocol brought
     * it (issue 23): what a protocol did not check, the core does. */
    int status = (req->sink->flags & KEEL_HTTP_SINK_CHECKED) ? 0 : kl_request_check_head(req);
    if (status == 0)
        status = kl_request_parse_target(req);
    if (status == 0 && req->worker->host->scopes != NULL)
        status = select_scope(req);
    if (status != 0) {
        answer_error(req, status);
        finish_dispatch(req);
    } else {
        run_filters_from(req, 0);
    }
    kl_request_unref(req);
}

int keel_http_request_refuse(keel_request *req, int status)
{
    if (req == NULL || status < 400 || status > 599)
        return KEEL_ERR_INVAL;
    kl_request_ref(req);
    if (req->path.ptr == NULL)
        req->path = (keel_str){"/", 1};
    const kl_listen_spec *spec = req->conn->origin->spec;
    const kl_host *h = req->worker->host;
    if (spec != NULL && h->scopes != NULL)
        req->scope = kl_scopes_listener(h->scopes, (size_t)(spec - h->settings.listen));
    answer_error(req, status);
    finish_dispatch(req);
    kl_request_unref(req);
    return KEEL_OK;
}

/* ---- internal redirects (ABI 1.8) -------------------------------------- */

#define KL_MAX_REDIRECTS 8

/* RFC 9110 13.1 and 14.2: the fields that make a request conditional or
 * partial. A page answered in place of the resource must not be judged by
 * the resource's validators (nginx answers error pages whole, as here). */
static int conditional_field(unsigned token)
{
    return token == KEEL_HDR_RANGE || token == KEEL_HDR_IF_MATCH || token == KEEL_HDR_IF_RANGE ||
           token == KEEL_HDR_IF_NONE_MATCH || token == KEEL_HDR_IF_MODIFIED_SINCE ||
           token == KEEL_HDR_IF_UNMODIFIED_SINCE;
}

/* Takes the conditional fields out of the head, and their tokens with
 * them: the two arrays stay in step (keel_request_header reads both). */
static int hide_conditionals(keel_request *req)
{
    size_t n = req->head.nheaders, kept = 0, hidden = 0;
    for (size_t i = 0; i < n; i++)
        hidden += (size_t)conditional_field(kl_request_field_token(req, i));
    if (hidden == 0)
        return KEEL_OK;
    keel_header *h = kl_arena_alloc(&req->arena, (n - hidden) * sizeof *h + 1);
    uint16_t *t = kl_arena_alloc(&req->arena, (n - hidden) * sizeof *t + 1);
    if (h == NULL || t == NULL)
        return KEEL_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        unsigned token = kl_request_field_token(req, i);
        if (!conditional_field(token)) {
            t[kept] = (uint16_t)token;
            h[kept++] = req->head.headers[i];
        }
    }
    req->head.headers = h;
    req->head.tokens = t;
    req->head.nheaders = kept;
    return KEEL_OK;
}

int keel_response_redirect_internal(keel_response *res, const char *path, int status)
{
    if (res == NULL || path == NULL || (status != 0 && (status < 200 || status > 599)))
        return KEEL_ERR_INVAL;
    keel_request *req = res->req;
    size_t len = strlen(path);
    const char *q = memchr(path, '?', len);
    size_t plen = q ? (size_t)(q - path) : len;
    if (q && !kl_field_value_clean(q + 1, len - plen - 1))
        return KEEL_ERR_INVAL;
    if (res->head_sent || res->ended || res->upgrading || res->in_status)
        return KEEL_ERR_STATE;
    if (req->aborted)
        return KEEL_ERR_CLOSED;
    if (res->redirects >= KL_MAX_REDIRECTS)
        return KEEL_ERR_LIMIT;
    /* The same rule as a client's path and keel_request_set_path's. */
    keel_str new_path;
    int rc = kl_request_normalise_path(req, path, plen, &new_path);
    if (rc != KEEL_OK)
        return rc;
    char *query = q ? kl_arena_dup(&req->arena, q + 1, len - plen - 1) : NULL;
    if ((q && query == NULL) || hide_conditionals(req) != KEEL_OK)
        return KEEL_ERR_NOMEM;
    res->redirects++;
    req->path = new_path;
    req->query = q ? (keel_str){query, len - plen - 1} : (keel_str){NULL, 0};
    keel_str m = req->head.method;
    if (!(m.len == 4 && memcmp(m.ptr, "HEAD", 4) == 0))
        req->head.method = (keel_str){"GET", 3};
    /* The caller gave the response up: what it asked to be told is void. */
    req->abort_cb = NULL;
    req->abort_ud = NULL;
    res->status = 200;
    res->nheaders = 0;
    res->ntrailers = 0;
    res->content_length = -1;
    if (status != 0)
        res->forced_status = status;
    kl_request_ref(req); /* the handler may end the response, and free it */
    rc = req->worker->host->scopes != NULL && req->conn != NULL ? select_scope(req) : 0;
    if (rc == 0)
        rc = kl_router_match(req->http->routes, req->head.method, req->path, &req->route);
    if (rc != 200 && rc != 0)
        kl_response_send_status(res, rc);
    else if (req->route.handler(req, res, req->route.userdata) < 0 && !res->ended)
        kl_response_send_status(res, 500);
    kl_request_unref(req);
    return KEEL_OK;
}

/* ---- filters that hold a request (keel_request_continue) ---------------- */

int keel_request_continue(keel_request *req)
{
    if (req == NULL || req->filter_next == 0 || req->res.head_sent || req->res.ended)
        return KEEL_ERR_STATE;
    if (req->aborted) {
        /* The filter learns it here, as a handler does from a response
         * call: the request is released. */
        req->filter_next = 0;
        kl_response_release_if_aborted(&req->res);
        return KEEL_ERR_CLOSED;
    }
    size_t from = req->filter_next;
    req->filter_next = 0;
    kl_request_ref(req);
    run_filters_from(req, from);
    kl_request_unref(req);
    return KEEL_OK;
}

/* ---- offload ----------------------------------------------------------- */

static void on_work(uv_work_t *work)
{
    keel_request *req = work->data;
    req->work_fn(req->work_ud);
}

static void on_work_done(uv_work_t *work, int status)
{
    keel_request *req = work->data;
    keel_offload_done_fn done = req->work_done;
    req->work_fn = NULL;
    req->work_done = NULL;
    (void)status;
    if (done != NULL)
        done(req, req->aborted ? KEEL_ERR_CLOSED : KEEL_OK, req->work_ud);
    kl_response_release_if_aborted(&req->res);
    kl_request_unref(req);
}

int keel_offload(keel_request *req, keel_offload_fn work, keel_offload_done_fn done, void *userdata)
{
    if (work == NULL)
        return KEEL_ERR_INVAL;
    if (req->work_fn != NULL)
        return KEEL_ERR_STATE;
    if (req->work == NULL && (req->work = malloc(sizeof *req->work)) == NULL)
        return KEEL_ERR_NOMEM;
    /* done may run after the response has ended and the connection has
     * closed without an abort (the exchange was over): what it may ask
     * of the connection is kept now, while the connection is there. */
    kl_request_keep_facts(req);
    req->work->data = req;
    req->work_fn = work;
    req->work_done = done;
    req->work_ud = userdata;
    kl_request_ref(req);
    if (uv_queue_work(&req->worker->loop, req->work, on_work, on_work_done) != 0) {
        req->work_fn = NULL;
        kl_request_unref(req);
        return KEEL_ERR_IO;
    }
    return KEEL_OK;
}
