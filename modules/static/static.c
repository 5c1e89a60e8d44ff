/* static.c — the module: config, routes, and the handler that ties the
 * other files together.
 *
 *     [static]
 *     mount = /static /srv/www/static listing=on cache=3600
 *     type = .md text/markdown
 *     max_ranges = 16
 *
 * The handler runs on the worker thread for GET and HEAD (the router
 * answers other methods 405 with "Allow: GET, HEAD" itself, because only
 * GET routes are registered and GET routes answer HEAD).
 */
#include "static.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int counted[] = {200, 206, 301, 304, 403, 404, 412, 416, 503};
#define NCOUNTED (sizeof counted / sizeof counted[0])

typedef struct st_module {
    st_config cfg;
    keel_http_filter filter;            /* on_log only: no body filter, sendfile stays */
    keel_metric *m_codes[NCOUNTED + 1]; /* the last: any other status */
} st_module;

void st_count(const st_config *cfg, keel_request *req, int status, uint64_t bytes)
{
    const st_module *sm = (const st_module *)cfg;
    keel_worker *w = keel_request_worker(req);
    size_t i = 0;
    while (i < NCOUNTED && counted[i] != status)
        i++;
    keel_metric_add(w, sm->m_codes[i], 1);
    if (bytes)
        keel_metric_add(w, cfg->m_bytes, (int64_t)bytes);
}

static const st_mount *find_mount(const st_table *t, const char *path, size_t len)
{
    const st_mount *best = NULL;
    for (size_t i = 0; i < t->nmounts; i++) {
        const st_mount *m = &t->mounts[i];
        if (m->prefix_len > len || memcmp(path, m->prefix, m->prefix_len) != 0)
            continue;
        if (len > m->prefix_len && path[m->prefix_len] != '/')
            continue; /* "/static" must not match "/staticfoo" */
        if (best == NULL || m->prefix_len > best->prefix_len)
            best = m;
    }
    return best;
}

/* The mount table of the request's scope. A config without scope
 * sections, or a scope that inherits the global lines, costs one
 * pointer compare; only a scope with its own lines is searched for. */
static const st_table *table_of(const st_config *cfg, const st_settings *set)
{
    if (set->mount.items == cfg->global.items)
        return &cfg->global;
    size_t lo = 0, hi = cfg->nscopes;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cfg->scopes[mid].conf == set)
            return cfg->scopes[mid].table;
        if ((uintptr_t)cfg->scopes[mid].conf < (uintptr_t)set)
            lo = mid + 1;
        else
            hi = mid;
    }
    return &cfg->global; /* not reached: every scope was shown at load */
}

/* A short text body ("404 Not Found\n") that keeps the fields already set
 * (keel_response_send_status starts the head afresh, and a 301 needs its
 * Location, a 416 its Content-Range). The text names the status only,
 * never a path. */
static int send_short(keel_response *res, int status)
{
    char body[96];
    int n = snprintf(body, sizeof body, "%d %s\n", status, keel_http_reason(status));
    keel_response_set_status(res, status);
    keel_response_header_set(res, "Content-Type", "text/plain; charset=utf-8");
    return keel_response_send_copy(res, body, n > 0 && (size_t)n < sizeof body ? (size_t)n : 0);
}

int st_unavailable(const st_config *cfg, keel_request *req, keel_response *res, int why)
{
    keel_worker *w = keel_request_worker(req);
    keel_metric_add(w, cfg->m_no_descriptor[why == ST_NO_FD_SYSTEM], 1);
    st_worker *ws = keel_worker_state(w, cfg->module);
    uint64_t now = keel_worker_now_ms(w);
    if (!ws->no_fd_any || now - ws->no_fd_logged_ms >= 1000) {
        char more[64] = "";
        if (ws->no_fd_held > 0)
            snprintf(more, sizeof more, " (%llu more since the last line)",
                     (unsigned long long)ws->no_fd_held);
        keel_log(cfg->module, KEEL_LOG_ERROR,
                 "cannot open a file: out of file descriptors: %s; answering 503 (worker %u)%s",
                 why == ST_NO_FD_SYSTEM ? "the system's limit [ENFILE]"
                                        : "the process's limit [EMFILE] (RLIMIT_NOFILE, "
                                          "docs/operations.md)",
                 keel_worker_id(w), more);
        ws->no_fd_any = 1;
        ws->no_fd_logged_ms = now;
        ws->no_fd_held = 0;
    } else {
        ws->no_fd_held++;
    }
    /* RFC 9110 15.6.4: a temporary overload; descriptors come back as
     * responses finish, so the client may try again shortly. Not 500: the
     * file is there and nothing is broken. */
    keel_response_header_set(res, "Retry-After", "1");
    st_count(cfg, req, 503, 0);
    return send_short(res, 503);
}

/* status: an HTTP status, or ST_NO_FD_* (503). A 403 or 404 carries no
 * field of its own, so the core's keel_response_send_status answers it:
 * the same short text, and the site's error page where one is configured
 * (the errors module). */
int st_answer(const st_config *cfg, keel_request *req, keel_response *res, int status)
{
    if (status == ST_NO_FD_PROCESS || status == ST_NO_FD_SYSTEM)
        return st_unavailable(cfg, req, res, status);
    st_count(cfg, req, status, 0);
    if (status == 403 || status == 404)
        return keel_response_send_status(res, status);
    return send_short(res, status);
}

/* 301 to the same path with a slash (and the query kept): a directory's
 * relative links resolve against it. The Location is re-encoded from the
 * decoded path, so nothing the client sent reaches the header raw. */
static int redirect_slash(const st_config *cfg, keel_request *req, keel_response *res,
                          const char *path, size_t len)
{
    char loc[ST_PATH_MAX * 3 + 8];
    size_t n = st_url_encode(path, len, 1, loc, sizeof loc - 2);
    if (n == 0)
        return st_answer(cfg, req, res, 404);
    loc[n++] = '/';
    loc[n] = '\0';
    keel_str q = keel_request_query(req);
    char *full = loc;
    char *heap = NULL;
    if (q.ptr != NULL) {
        heap = malloc(n + q.len + 2);
        if (heap == NULL)
            return KEEL_ERR_NOMEM;
        memcpy(heap, loc, n);
        heap[n] = '?';
        memcpy(heap + n + 1, q.ptr, q.len);
        heap[n + 1 + q.len] = '\0';
        full = heap;
    }
    int rc = keel_response_header_set(res, "Location", full);
    free(heap);
    if (rc != KEEL_OK) /* a query with a control byte: no redirect then */
        return st_answer(cfg, req, res, 404);
    return st_answer(cfg, req, res, 301);
}

/* What serve_path is asked to find: anything (the request's own path, a
 * try list's last element), or, for a try list's other elements, a file
 * or a directory only, answering nothing when there is none. */
enum { ST_WANT_ANY, ST_WANT_FILE, ST_WANT_DIR };
#define ST_TRY_NEXT 1 /* serve_path found nothing it was asked for */

/* Answers for the decoded URL path [path, path + plen): a file, or a
 * directory's redirect, index, listing or 403. With want other than
 * ST_WANT_ANY, a path that names no file (or no directory) of that kind
 * answers nothing and returns ST_TRY_NEXT. */
static int serve_path(const st_ctx *x, const char *path, size_t plen, int want)
{
    const st_config *cfg = x->cfg;
    keel_request *req = x->req;
    keel_response *res = x->res;
    const st_mount *m = find_mount(x->table, path, plen);
    if (m == NULL)
        return want != ST_WANT_ANY ? ST_TRY_NEXT : st_answer(cfg, req, res, 404);
    const char *r = path + m->prefix_len;
    size_t rlen = plen - m->prefix_len;
    while (rlen > 0 && r[0] == '/') {
        r++;
        rlen--;
    }
    int slash = plen > 0 && path[plen - 1] == '/';
    /* Room for "/" + an index name or ".br" after it. */
    char rel[ST_PATH_MAX + 300];
    if (rlen >= ST_PATH_MAX)
        return want != ST_WANT_ANY ? ST_TRY_NEXT : st_answer(cfg, req, res, 404);
    /* Trailing slashes make empty segments, which st_path_check lets by:
     * the name without them is checked (open_rel) and opened. */
    while (rlen > 0 && r[rlen - 1] == '/')
        rlen--;
    memcpy(rel, r, rlen);
    rel[rlen] = '\0';

    st_open_file of;
    int rc = st_open_rel(x, m, rel, rlen, ST_NAME_UNCHECKED, &of);
    if (rc != 0) {
        if (want != ST_WANT_ANY && rc != ST_NO_FD_PROCESS && rc != ST_NO_FD_SYSTEM)
            return ST_TRY_NEXT;
        return st_answer(cfg, req, res, rc);
    }
    if (of.info.kind == ST_KIND_FILE && want != ST_WANT_DIR) {
        if (slash) { /* "/file.txt/" names no file (nginx: ENOTDIR, 404) */
            st_of_close(&of);
            return want != ST_WANT_ANY ? ST_TRY_NEXT : st_answer(cfg, req, res, 404);
        }
        return st_serve_file(x, m, &of, rel, rlen);
    }
    if (of.info.kind != ST_KIND_DIR || want == ST_WANT_FILE) {
        st_of_close(&of);
        return want != ST_WANT_ANY ? ST_TRY_NEXT : st_answer(cfg, req, res, 404);
    }
    /* A directory. */
    if (!slash) {
        st_of_close(&of);
        return redirect_slash(cfg, req, res, path, plen);
    }
    for (size_t i = 0; i < m->nindex; i++) {
        size_t at = rlen;
        if (at > 0)
            rel[at++] = '/';
        size_t nl = strlen(m->index[i]);
        memcpy(rel + at, m->index[i], nl + 1);
        st_open_file idx;
        rc = st_open_rel(x, m, rel, at + nl, ST_NAME_MADE, &idx);
        if (rc == 0) {
            if (idx.info.kind == ST_KIND_FILE) {
                st_of_close(&of);
                return st_serve_file(x, m, &idx, rel, at + nl);
            }
            st_of_close(&idx);
        } else if (rc == ST_NO_FD_PROCESS || rc == ST_NO_FD_SYSTEM) {
            /* The index may well exist: not a listing, nor a 403. */
            st_of_close(&of);
            return st_answer(cfg, req, res, rc);
        }
        rel[rlen] = '\0';
    }
    if (m->listing) {
        int fd, why = st_of_take(&of, &fd);
        if (why != 0)
            return st_answer(cfg, req, res, why);
        st_count(cfg, req, 200, 0);
        return st_listing_send(cfg, m, req, res, path, plen, rel, fd);
    }
    st_of_close(&of);
    return st_answer(cfg, req, res, 403); /* a directory without an index (nginx: 403) */
}

/* One element of a try list with $uri replaced by the request's path:
 * its length, or 0 if it does not fit. */
static size_t expand_uri(const char *e, size_t elen, keel_str uri, char *out, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < elen;) {
        if (elen - i >= 4 && memcmp(e + i, "$uri", 4) == 0) {
            if (n + uri.len >= cap)
                return 0;
            memcpy(out + n, uri.ptr, uri.len);
            n += uri.len;
            i += 4;
        } else {
            if (n + 1 >= cap)
                return 0;
            out[n++] = e[i++];
        }
    }
    out[n] = '\0';
    return n;
}

/* `try = ELEMENT...` (nginx's try_files): each element but the last names
 * a file ("$uri", "/maintenance.html") or, ending in "/", a directory
 * ("$uri/"), answered if there is one; the last is the fallback: a path
 * answered as a request for it would be, or "=STATUS". */
static int serve_try(const st_ctx *x, const char *list, keel_str uri)
{
    const char *at = list, *end = list + strlen(list), *s, *next;
    size_t n, next_len;
    char buf[ST_PATH_MAX];
    int more = keel_word_next(&at, end, 0, &next, &next_len);
    while (more) {
        s = next;
        n = next_len;
        more = keel_word_next(&at, end, 0, &next, &next_len);
        int last = !more;
        if (last && s[0] == '=')
            return st_answer(x->cfg, x->req, x->res, atoi(s + 1));
        size_t len = expand_uri(s, n, uri, buf, sizeof buf);
        if (len == 0 || buf[0] != '/') {
            if (last)
                return st_answer(x->cfg, x->req, x->res, 404);
        } else if (last) {
            return serve_path(x, buf, len, ST_WANT_ANY);
        } else {
            /* The element's own text says which ("$uri/"), not what the
             * request's path made of it ("/assets/" for "$uri"). A
             * directory asked for without its slash is redirected to it,
             * as nginx does, so that its page's relative links resolve. */
            int dir = s[n - 1] == '/';
            if (dir && len > 1 && uri.len > 0 && uri.ptr[uri.len - 1] != '/')
                len--;
            int rc = serve_path(x, buf, len, dir ? ST_WANT_DIR : ST_WANT_FILE);
            if (rc != ST_TRY_NEXT)
                return rc;
        }
    }
    return st_answer(x->cfg, x->req, x->res, 404); /* an empty list (st_try_check lets "" by) */
}

static int handle(keel_request *req, keel_response *res, void *userdata)
{
    const st_config *cfg = userdata;
    const st_settings *set = keel_request_config(req, cfg->module);
    st_ctx x = {.cfg = cfg, .table = table_of(cfg, set), .req = req, .res = res};
    if (cfg->cache_on) {
        keel_worker *w = keel_request_worker(req);
        x.ws = keel_worker_state(w, cfg->module);
        x.now_ms = keel_worker_now_ms(w);
    }
    keel_str path = keel_request_path(req);
    if (set->try_files != NULL && set->try_files[0] != '\0')
        return serve_try(&x, set->try_files, path);
    return serve_path(&x, path.ptr, path.len, ST_WANT_ANY);
}

static void release_posted(keel_worker *worker, void *file)
{
    (void)worker;
    st_file_release(file);
}

/* The log phase: the response is over, its last byte gone: the request's
 * reference to a shared file goes. */
static void release_on_log(keel_request *req, keel_response *res, const keel_http_log_info *info,
                           void *userdata)
{
    const st_config *cfg = userdata;
    (void)res;
    (void)info;
    st_file *f = keel_request_data(req, cfg->module);
    if (f == NULL)
        return;
    keel_request_set_data(req, cfg->module, NULL);
    /* The last reference (the file left the cache while it was sent)
     * would free its validator fields, which the log hooks after this
     * one may still read (an access log's $sent_http_etag): released
     * from a posted function, which runs after them (keel_field_make).
     * Otherwise the cache's reference keeps them. */
    if (f->refs == 1 && f->validator_fields[0] != NULL &&
        keel_worker_post(keel_request_worker(req), release_posted, f) == KEEL_OK)
        return;
    st_file_release(f);
}

/* ---- configuration -------------------------------------------------------------- */

static void table_free(st_table *t)
{
    for (size_t i = 0; i < t->nmounts; i++)
        st_mount_free(&t->mounts[i]);
    free(t->mounts);
    t->mounts = NULL;
    t->nmounts = 0;
}

/* A field prepared at load from a value of the config (NULL: none): a
 * value the core refuses leaves *out NULL and is set as text on each
 * response, as it was before. KEEL_OK or KEEL_ERR_NOMEM. */
static int prepare_optional(keel_module *module, const char *name, const char *value,
                            const keel_prepared_field **out)
{
    *out = NULL;
    if (value == NULL)
        return KEEL_OK;
    int rc = keel_field_prepare(module, name, strlen(name), value, strlen(value), out);
    return rc == KEEL_ERR_NOMEM ? rc : KEEL_OK;
}

/* Parses a list of mount lines and opens their roots. The global
 * section's relative directories are resolved by the line's index
 * (keel_config_path); a scope's must be absolute (scoped). */
static int table_read(keel_module *module, st_table *t, const keel_config_list *list, int scoped)
{
    t->items = list->items;
    if (list->count == 0)
        return KEEL_OK;
    t->mounts = calloc(list->count, sizeof *t->mounts);
    if (t->mounts == NULL)
        return KEEL_ERR_NOMEM;
    int rc = KEEL_OK;
    for (size_t i = 0; rc == KEEL_OK && i < list->count; i++) {
        st_mount *m = &t->mounts[i];
        rc = st_mount_parse(module, list->items[i], scoped ? ST_MOUNT_SCOPED : i, m);
        t->nmounts = i + 1;
        for (size_t j = 0; rc == KEEL_OK && j < i; j++)
            if (strcmp(t->mounts[j].prefix, m->prefix) == 0)
                rc = st_mount_error(module, m, "prefix '%s/' is mounted twice", m->prefix);
        if (rc == KEEL_OK && m->prefix_len + 3 > 1100)
            rc = st_mount_error(module, m, "prefix too long");
        if (rc == KEEL_OK)
            rc = st_root_open(module, m);
        if (rc == KEEL_OK)
            rc = prepare_optional(module, "Cache-Control", m->cache_control,
                                  &m->cache_control_field);
    }
    return rc;
}

/* Whether a mount of another table already registered prefix's routes. */
static int prefix_routed(const st_config *cfg, const st_table *upto, const char *prefix)
{
    const st_table *t = &cfg->global;
    for (size_t k = 0;; t = cfg->tables[k++]) {
        if (t == upto)
            return 0;
        for (size_t i = 0; i < t->nmounts; i++)
            if (strcmp(t->mounts[i].prefix, prefix) == 0)
                return 1;
        if (k == cfg->ntables)
            return 0;
    }
}

/* Routes: PREFIX and PREFIX/ *, GET only (the router adds HEAD and
 * answers 405 for the rest), once per prefix across every scope's table:
 * the router does not know scopes, the handler picks the request scope's
 * table and in it the longest prefix. */
static int table_routes(keel_module *module, st_config *cfg, const st_table *t)
{
    int rc = KEEL_OK;
    for (size_t i = 0; rc == KEEL_OK && i < t->nmounts; i++) {
        const st_mount *m = &t->mounts[i];
        int again = 0;
        for (size_t j = 0; j < i; j++)
            again |= strcmp(t->mounts[j].prefix, m->prefix) == 0;
        if (again || prefix_routed(cfg, t, m->prefix))
            continue;
        char pat[1100];
        snprintf(pat, sizeof pat, "%s/*", m->prefix);
        rc = keel_route_add(module, "GET", pat, handle, cfg);
        if (rc == KEEL_OK)
            rc = keel_route_add(module, "GET", m->prefix_len > 0 ? m->prefix : "/", handle, cfg);
    }
    return rc;
}

/* keel_module_config_scopes: each scope's struct; its own mount list is
 * read once (the scopes that inherit it share the items pointer) and the
 * scope remembered for table_of. */
static int scope_add(keel_module *module, const void *confp, void *ud)
{
    st_config *cfg = ud;
    const st_settings *set = confp;
    if (set->mount.items == cfg->global.items)
        return KEEL_OK; /* table_of answers these without a search */
    size_t at = 0;
    while (at < cfg->nscopes && (uintptr_t)cfg->scopes[at].conf < (uintptr_t)confp)
        at++;
    if (at < cfg->nscopes && cfg->scopes[at].conf == confp)
        return KEEL_OK; /* shown before */
    const st_table *table = NULL;
    for (size_t i = 0; i < cfg->ntables && table == NULL; i++)
        if (cfg->tables[i]->items == set->mount.items)
            table = cfg->tables[i];
    if (table == NULL) {
        st_table *t = calloc(1, sizeof *t);
        if (t == NULL || keel_array_add(&cfg->tables, cfg->ntables, sizeof *cfg->tables) != 0) {
            free(t);
            return KEEL_ERR_NOMEM;
        }
        cfg->tables[cfg->ntables++] = t;
        int rc = table_read(module, t, &set->mount, 1);
        if (rc == KEEL_OK)
            rc = table_routes(module, cfg, t);
        if (rc != KEEL_OK)
            return rc;
        table = t;
    }
    if (keel_array_add(&cfg->scopes, cfg->nscopes, sizeof *cfg->scopes) != 0)
        return KEEL_ERR_NOMEM;
    memmove(&cfg->scopes[at + 1], &cfg->scopes[at], (cfg->nscopes - at) * sizeof *cfg->scopes);
    cfg->scopes[at] = (st_scope){confp, table};
    cfg->nscopes++;
    return KEEL_OK;
}

static void config_free(st_module *sm)
{
    st_config *cfg = &sm->cfg;
    table_free(&cfg->global);
    for (size_t i = 0; i < cfg->ntables; i++) {
        table_free(cfg->tables[i]);
        free(cfg->tables[i]);
    }
    free(cfg->tables);
    free(cfg->scopes);
    for (size_t i = 0; i < cfg->ntypes; i++) {
        free(cfg->types[i].ext);
        free((char *)cfg->types[i].type.text);
    }
    free(cfg->types);
    free(cfg->builtin_types);
    free(sm);
}

static int read_types(keel_module *module, st_config *cfg)
{
    size_t n = keel_config_count(module, "type");
    if (n == 0)
        return KEEL_OK;
    cfg->types = calloc(n, sizeof *cfg->types);
    if (cfg->types == NULL)
        return KEEL_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        const char *v;
        int rc = keel_config_string_at(module, "type", i, &v);
        if (rc != KEEL_OK)
            return rc;
        char ext[32], mime[200];
        if (sscanf(v, " .%31[^ \t] %199[^\n]", ext, mime) != 2 || strchr(mime, '/') == NULL)
            return keel_config_error(module, "type", "expected .EXT TYPE/SUBTYPE, got '%s'", v);
        for (char *c = ext; *c; c++)
            if (*c >= 'A' && *c <= 'Z')
                *c = (char)(*c + 32);
        size_t ml = strlen(mime);
        while (ml > 0 && (mime[ml - 1] == ' ' || mime[ml - 1] == '\t'))
            mime[--ml] = '\0';
        cfg->types[i].ext = malloc(strlen(ext) + 1);
        cfg->types[i].type.text = st_mime_with_charset(mime);
        cfg->ntypes = i + 1;
        if (cfg->types[i].ext == NULL || cfg->types[i].type.text == NULL)
            return KEEL_ERR_NOMEM;
        memcpy(cfg->types[i].ext, ext, strlen(ext) + 1);
    }
    return KEEL_OK;
}

static int register_metrics(keel_module *module, st_module *sm)
{
    char labels[NCOUNTED + 1][32];
    for (size_t i = 0; i <= NCOUNTED; i++) {
        if (i < NCOUNTED)
            snprintf(labels[i], sizeof labels[i], "code=\"%d\"", counted[i]);
        else
            snprintf(labels[i], sizeof labels[i], "code=\"other\"");
        int rc = keel_metric_new(module, "static_responses_total",
                                 "Responses of the static module by status", KEEL_METRIC_COUNTER,
                                 labels[i], &sm->m_codes[i]);
        if (rc != KEEL_OK)
            return rc;
    }
    static const char *const no_fd[2] = {"reason=\"emfile\"", "reason=\"enfile\""};
    for (size_t i = 0; i < 2; i++) {
        int rc = keel_metric_new(module, "static_open_errors_total",
                                 "Files not opened for want of descriptors (answered 503)",
                                 KEEL_METRIC_COUNTER, no_fd[i], &sm->cfg.m_no_descriptor[i]);
        if (rc != KEEL_OK)
            return rc;
    }
    return keel_metric_new(module, "static_bytes_sent_total",
                           "Body bytes of the files the static module answered with "
                           "(200 and single ranges)",
                           KEEL_METRIC_COUNTER, NULL, &sm->cfg.m_bytes);
}

/* The [static] section (keel/config.h): st_settings in static.h. mount
 * and type are read line by line below and in mount.c; the table declares
 * them so that the core checks and documents them. */

static const keel_config_key st_keys[] = {
    KEEL_KEY(st_settings, mount, "mount", KEEL_CONFIG_STRING, .flags = KEEL_CONFIG_LIST,
             .scopes = KEEL_SCOPE_GLOBAL | KEEL_SCOPE_LISTENER | KEEL_SCOPE_SITE,
             .doc = "/PREFIX DIRECTORY [index=...] [listing=on] [precompressed=on] "
                    "[dotfiles=allow] [symlinks=off|inside|follow] [cache=SECONDS] "
                    "[resolve=auto|walk] [cache_control=...] (docs/static.md)"),
    KEEL_KEY(st_settings, type, "type", KEEL_CONFIG_STRING, .flags = KEEL_CONFIG_LIST,
             .doc = ".EXT TYPE/SUBTYPE: a media type added to or replacing the built-in table"),
    KEEL_KEY(st_settings, max_ranges, "max_ranges", KEEL_CONFIG_INT, .def = "16", .min = 0,
             .max = 1000, .doc = "ranges one request may ask for; more get the whole file"),
    KEEL_KEY(st_settings, cache_valid_ms, "cache_valid", KEEL_CONFIG_DURATION, .def = "1s",
             .doc = "how long a file's looked-up metadata is trusted; 0: no cache"),
    KEEL_KEY(st_settings, cache_entries, "cache_entries", KEEL_CONFIG_INT, .def = "1024", .min = 0,
             .max = 1 << 20, .doc = "metadata cache entries per worker; 0: no cache"),
    KEEL_KEY(st_settings, cache_content, "cache_content", KEEL_CONFIG_SIZE, .def = "16k",
             .max = 1 << 20,
             .doc = "files up to this size are read once and answered from memory (with the "
                    "open-file cache); 0: always sendfile"),
    KEEL_KEY(st_settings, cache_content_max, "cache_content_max", KEEL_CONFIG_SIZE, .def = "8m",
             .max = (int64_t)1 << 32,
             .doc = "memory the cached files' bytes may take per worker (least recently used "
                    "out first)"),
    KEEL_KEY(st_settings, try_files, "try", KEEL_CONFIG_STRING, .scopes = KEEL_SCOPE_ANY,
             .doc = "ELEMENT... as nginx's try_files: files ($uri, /x.html), directories "
                    "($uri/), then a fallback path or =STATUS (docs/web.md)",
             .check = st_try_check),
};
KEEL_CONFIG_SCHEMA(st_schema, st_settings, st_keys);

static int static_load(keel_module *module)
{
    if (!st_mime_table_sorted()) {
        keel_log(module, KEEL_LOG_ERROR, "internal error: the MIME table is not sorted");
        return KEEL_ERR_STATE;
    }
    st_module *sm = calloc(1, sizeof *sm);
    if (sm == NULL)
        return KEEL_ERR_NOMEM;
    st_config *cfg = &sm->cfg;
    cfg->module = module;
    const st_settings *set = keel_module_config(module);
    cfg->max_ranges = (uint64_t)set->max_ranges;
    cfg->cache_valid_ms = set->cache_valid_ms;
    cfg->cache_entries = (uint64_t)set->cache_entries;
    cfg->cache_content = set->cache_content;
    cfg->cache_content_max = set->cache_content_max;
    int rc = KEEL_OK;
    cfg->cache_on = cfg->cache_valid_ms > 0 && cfg->cache_entries > 0;
    if (rc == KEEL_OK)
        rc = read_types(module, cfg);
    if (rc == KEEL_OK)
        rc = st_mime_prepare(module, cfg);
    if (rc == KEEL_OK)
        rc = prepare_optional(module, "Accept-Ranges", cfg->max_ranges ? "bytes" : "none",
                              &cfg->accept_ranges);
    if (rc == KEEL_OK)
        rc = prepare_optional(module, "Vary", "Accept-Encoding", &cfg->vary_encoding);
    if (rc == KEEL_OK)
        rc = table_read(module, &cfg->global, &set->mount, 0);
    if (rc == KEEL_OK && cfg->global.nmounts == 0)
        keel_log(module, KEEL_LOG_INFO, "no global mount: only scopes' mounts are served");
    if (rc == KEEL_OK)
        rc = register_metrics(module, sm);
    if (rc == KEEL_OK)
        rc = table_routes(module, cfg, &cfg->global);
    if (rc == KEEL_OK)
        rc = keel_module_config_scopes(module, scope_add, cfg);
    if (rc == KEEL_OK && cfg->cache_on) {
        sm->filter = (keel_http_filter){.size = sizeof(keel_http_filter),
                                        .name = "static",
                                        .order = KEEL_ORDER_LAST,
                                        .userdata = cfg,
                                        .on_log = release_on_log};
        rc = keel_http_filter_add(module, &sm->filter);
    }
    if (rc != KEEL_OK) {
        config_free(sm);
        return rc;
    }
    keel_module_set_data(module, sm);
    return KEEL_OK;
}

static int static_start(keel_module *module, keel_worker *worker, void *state)
{
    const st_module *sm = keel_module_data(module);
    st_worker *ws = state;
    if (!sm->cfg.cache_on)
        return KEEL_OK;
    return st_cache_init(&ws->cache, worker, sm->cfg.cache_valid_ms, (size_t)sm->cfg.cache_entries,
                         (size_t)sm->cfg.cache_content, (size_t)sm->cfg.cache_content_max);
}

/* Every request is over by now (the worker stopped its connections): the
 * cache holds the only references left. */
static void static_stop(keel_module *module, keel_worker *worker, void *state)
{
    st_worker *ws = state;
    if (ws->cache.buckets != NULL) {
        keel_log(module, KEEL_LOG_DEBUG, "worker %u: open-file cache: %llu hits, %llu misses",
                 keel_worker_id(worker), (unsigned long long)ws->cache.hits,
                 (unsigned long long)ws->cache.misses);
        st_cache_free(&ws->cache);
    }
}

static void static_unload(keel_module *module)
{
    st_module *sm = keel_module_data(module);
    if (sm != NULL)
        config_free(sm);
}

KEEL_MODULE(static, .version = "1.0.0", .worker_state_size = sizeof(st_worker), .load = static_load,
            .start = static_start, .stop = static_stop, .unload = static_unload,
            .config = &st_schema);
