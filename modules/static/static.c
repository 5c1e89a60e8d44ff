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

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ST_PATH_MAX 4096

static const int counted[] = {200, 206, 301, 304, 403, 404, 412, 416};
#define NCOUNTED (sizeof counted / sizeof counted[0])

typedef struct st_module {
    st_config cfg;
    keel_metric *m_codes[NCOUNTED + 1]; /* the last: any other status */
} st_module;

void st_count(const st_config *cfg, keel_request *req, int status, uint64_t bytes)
{
    const st_module *sm = (const st_module *)cfg;
    keel_worker *w = keel_conn_worker(keel_request_conn(req));
    size_t i = 0;
    while (i < NCOUNTED && counted[i] != status)
        i++;
    keel_metric_add(w, sm->m_codes[i], 1);
    if (bytes)
        keel_metric_add(w, cfg->m_bytes, (int64_t)bytes);
}

static const st_mount *find_mount(const st_config *cfg, const char *path, size_t len)
{
    const st_mount *best = NULL;
    for (size_t i = 0; i < cfg->nmounts; i++) {
        const st_mount *m = &cfg->mounts[i];
        if (m->prefix_len > len || memcmp(path, m->prefix, m->prefix_len) != 0)
            continue;
        if (len > m->prefix_len && path[m->prefix_len] != '/')
            continue; /* "/static" must not match "/staticfoo" */
        if (best == NULL || m->prefix_len > best->prefix_len)
            best = m;
    }
    return best;
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

static int answer(const st_config *cfg, keel_request *req, keel_response *res, int status)
{
    st_count(cfg, req, status, 0);
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
        return answer(cfg, req, res, 404);
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
        return answer(cfg, req, res, 404);
    return answer(cfg, req, res, 301);
}

/* Chooses a precompressed sibling of rel: br or gzip, by q-value (br on a
 * tie), when the mount allows it and the sibling is a regular file. On a
 * hit *fd and *info are the sibling's and the coding's name is returned. */
static const char *pick_sibling(const st_mount *m, keel_request *req, char *rel, size_t rlen,
                                int *fd, st_info *info)
{
    keel_str ae = keel_request_header(req, "Accept-Encoding");
    if (ae.ptr == NULL || rlen + 4 > ST_PATH_MAX)
        return NULL;
    int qbr = st_accept_q(ae, "br"), qgz = st_accept_q(ae, "gzip");
    typedef struct choice {
        const char *coding, *ext;
        int q;
    } choice;
    choice order[2] = {{"br", ".br", qbr}, {"gzip", ".gz", qgz}};
    if (qgz > qbr) {
        choice t = order[0];
        order[0] = order[1];
        order[1] = t;
    }
    for (int i = 0; i < 2; i++) {
        if (order[i].q <= 0)
            continue;
        memcpy(rel + rlen, order[i].ext, 4);
        int sfd;
        st_info sinfo;
        int rc = st_open(m, rel, &sfd, &sinfo);
        rel[rlen] = '\0';
        if (rc != 0)
            continue;
        if (sinfo.kind != ST_KIND_FILE) {
            st_close(sfd);
            continue;
        }
        *fd = sfd;
        *info = sinfo;
        return order[i].coding;
    }
    return NULL;
}

static int serve_file(const st_config *cfg, const st_mount *m, keel_request *req,
                      keel_response *res, int fd, st_info info, char *rel, size_t rlen)
{
    const char *type = st_mime_type(cfg, rel, rlen);
    const char *coding = NULL;
    if (m->precompressed) {
        int sfd;
        st_info sinfo;
        coding = pick_sibling(m, req, rel, rlen, &sfd, &sinfo);
        if (coding != NULL) {
            st_close(fd);
            fd = sfd;
            info = sinfo;
        }
        /* Every answer of such a mount varies, the identity one included,
         * or a cache would hand it to a client that asked for br. */
        keel_response_header_set(res, "Vary", "Accept-Encoding");
    }
    char etag[ST_ETAG_MAX], date[64];
    st_etag(&info, coding, etag, sizeof etag);
    keel_time_format(info.mtime, KEEL_TIME_HTTP, date, sizeof date);
    keel_response_header_set(res, "ETag", etag);
    keel_response_header_set(res, "Last-Modified", date);
    if (m->cache_control)
        keel_response_header_set(res, "Cache-Control", m->cache_control);
    if (coding)
        keel_response_header_set(res, "Content-Encoding", coding);

    int pc = st_preconditions(req, etag, info.mtime);
    if (pc == 304) {
        /* 15.4.5: the fields a 200 would carry that describe the
         * representation's metadata go with it; no body. */
        st_close(fd);
        st_count(cfg, req, 304, 0);
        keel_response_set_status(res, 304);
        return keel_response_end(res);
    }
    if (pc == 412) {
        st_close(fd);
        return answer(cfg, req, res, 412);
    }
    keel_response_header_set(res, "Content-Type", type);
    keel_response_header_set(res, "Accept-Ranges", cfg->max_ranges ? "bytes" : "none");

    keel_str range = keel_request_header(req, "Range");
    if (range.ptr != NULL && st_if_range(req, etag, info.mtime)) {
        st_range *ranges;
        size_t n;
        int r = st_range_parse(range.ptr, range.len, info.size, cfg->max_ranges, &ranges, &n);
        if (r == ST_RANGE_UNSAT) {
            char cr[64];
            snprintf(cr, sizeof cr, "bytes */%llu", (unsigned long long)info.size);
            st_close(fd);
            keel_response_header_set(res, "Content-Range", cr);
            return answer(cfg, req, res, 416);
        }
        if (r == ST_RANGE_OK && n == 1) {
            char cr[96];
            snprintf(cr, sizeof cr, "bytes %llu-%llu/%llu", (unsigned long long)ranges[0].first,
                     (unsigned long long)ranges[0].last, (unsigned long long)info.size);
            uint64_t off = ranges[0].first, len = ranges[0].last - ranges[0].first + 1;
            free(ranges);
            keel_response_set_status(res, 206);
            keel_response_header_set(res, "Content-Range", cr);
            st_count(cfg, req, 206, len);
            return keel_response_send_file(res, fd, off, len, 1);
        }
        if (r == ST_RANGE_OK) {
            st_count(cfg, req, 206, 0);
            return st_multipart_send(cfg, req, res, fd, info.size, type, ranges, n);
        }
    }
    st_count(cfg, req, 200, info.size);
    return keel_response_send_file(res, fd, 0, info.size, 1);
}

static int handle(keel_request *req, keel_response *res, void *userdata)
{
    const st_config *cfg = userdata;
    keel_str path = keel_request_path(req);
    const st_mount *m = find_mount(cfg, path.ptr, path.len);
    if (m == NULL)
        return answer(cfg, req, res, 404);
    const char *r = path.ptr + m->prefix_len;
    size_t rlen = path.len - m->prefix_len;
    while (rlen > 0 && r[0] == '/') {
        r++;
        rlen--;
    }
    int slash = path.len > 0 && path.ptr[path.len - 1] == '/';
    /* Room for "/" + an index name or ".br" after it. */
    char rel[ST_PATH_MAX + 300];
    if (rlen >= ST_PATH_MAX)
        return answer(cfg, req, res, 404);
    int rc = st_path_check(m, r, rlen);
    if (rc != 0)
        return answer(cfg, req, res, rc);
    memcpy(rel, r, rlen);
    while (rlen > 0 && rel[rlen - 1] == '/')
        rlen--;
    rel[rlen] = '\0';

    int fd;
    st_info info;
    rc = st_open(m, rel, &fd, &info);
    if (rc != 0)
        return answer(cfg, req, res, rc);
    if (info.kind == ST_KIND_FILE) {
        if (slash) { /* "/file.txt/" names no file (nginx: ENOTDIR, 404) */
            st_close(fd);
            return answer(cfg, req, res, 404);
        }
        return serve_file(cfg, m, req, res, fd, info, rel, rlen);
    }
    /* A directory. */
    if (!slash) {
        st_close(fd);
        return redirect_slash(cfg, req, res, path.ptr, path.len);
    }
    for (size_t i = 0; i < m->nindex; i++) {
        size_t at = rlen;
        if (at > 0)
            rel[at++] = '/';
        size_t nl = strlen(m->index[i]);
        memcpy(rel + at, m->index[i], nl + 1);
        int ifd;
        st_info iinfo;
        if (st_open(m, rel, &ifd, &iinfo) == 0) {
            if (iinfo.kind == ST_KIND_FILE) {
                st_close(fd);
                return serve_file(cfg, m, req, res, ifd, iinfo, rel, at + nl);
            }
            st_close(ifd);
        }
        rel[rlen] = '\0';
    }
    if (m->listing) {
        st_count(cfg, req, 200, 0);
        return st_listing_send(m, req, res, path.ptr, path.len, rel, fd);
    }
    st_close(fd);
    return answer(cfg, req, res, 403); /* a directory without an index (nginx: 403) */
}

/* ---- configuration -------------------------------------------------------------- */

static void config_free(st_module *sm)
{
    st_config *cfg = &sm->cfg;
    for (size_t i = 0; i < cfg->nmounts; i++)
        st_mount_free(&cfg->mounts[i]);
    free(cfg->mounts);
    for (size_t i = 0; i < cfg->ntypes; i++) {
        free(cfg->types[i].ext);
        free(cfg->types[i].mime);
    }
    free(cfg->types);
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
        cfg->types[i].mime = st_mime_with_charset(mime);
        cfg->ntypes = i + 1;
        if (cfg->types[i].ext == NULL || cfg->types[i].mime == NULL)
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
        keel_metric_desc d = {.size = sizeof d,
                              .name = "static_responses_total",
                              .help = "Responses of the static module by status",
                              .type = KEEL_METRIC_COUNTER,
                              .labels = labels[i]};
        int rc = keel_metric_register(module, &d, &sm->m_codes[i]);
        if (rc != KEEL_OK)
            return rc;
    }
    keel_metric_desc b = {.size = sizeof b,
                          .name = "static_bytes_sent_total",
                          .help = "Body bytes of the files the static module answered with "
                                  "(200 and single ranges)",
                          .type = KEEL_METRIC_COUNTER};
    return keel_metric_register(module, &b, &sm->cfg.m_bytes);
}

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
    int rc = keel_config_size(module, "max_ranges", 16, &cfg->max_ranges);
    if (rc == KEEL_OK && cfg->max_ranges > 1000)
        rc = keel_config_error(module, "max_ranges", "must be at most 1000");
    if (rc == KEEL_OK)
        rc = read_types(module, cfg);
    size_t n = keel_config_count(module, "mount");
    if (rc == KEEL_OK && n > 0) {
        cfg->mounts = calloc(n, sizeof *cfg->mounts);
        if (cfg->mounts == NULL)
            rc = KEEL_ERR_NOMEM;
    }
    for (size_t i = 0; rc == KEEL_OK && i < n; i++) {
        const char *line;
        rc = keel_config_string_at(module, "mount", i, &line);
        if (rc == KEEL_OK) {
            rc = st_mount_parse(module, line, &cfg->mounts[i]);
            cfg->nmounts = i + 1;
        }
        for (size_t j = 0; rc == KEEL_OK && j < i; j++)
            if (strcmp(cfg->mounts[j].prefix, cfg->mounts[i].prefix) == 0)
                rc = keel_config_error(module, "mount", "prefix '%s/' is mounted twice",
                                       cfg->mounts[i].prefix);
        if (rc == KEEL_OK)
            rc = st_root_open(module, &cfg->mounts[i]);
    }
    if (rc == KEEL_OK && n == 0)
        keel_log(module, KEEL_LOG_WARN, "no mount configured: nothing is served");
    if (rc == KEEL_OK)
        rc = register_metrics(module, sm);
    /* Routes: PREFIX and PREFIX/ *, GET only (the router adds HEAD and
     * answers 405 for the rest). The handler picks the longest prefix
     * itself, so overlapping mounts need no care from the router. */
    for (size_t i = 0; rc == KEEL_OK && i < cfg->nmounts; i++) {
        const st_mount *m = &cfg->mounts[i];
        char pat[1100];
        if (m->prefix_len + 3 > sizeof pat) {
            rc = keel_config_error(module, "mount", "prefix too long");
            break;
        }
        snprintf(pat, sizeof pat, "%s/*", m->prefix);
        rc = keel_route_add(module, "GET", pat, handle, cfg);
        if (rc == KEEL_OK && m->prefix_len > 0)
            rc = keel_route_add(module, "GET", m->prefix, handle, cfg);
        if (rc == KEEL_OK && m->prefix_len == 0)
            rc = keel_route_add(module, "GET", "/", handle, cfg);
    }
    if (rc != KEEL_OK) {
        config_free(sm);
        return rc;
    }
    keel_module_set_data(module, sm);
    return KEEL_OK;
}

static void static_unload(keel_module *module)
{
    st_module *sm = keel_module_data(module);
    if (sm != NULL)
        config_free(sm);
}

KEEL_MODULE(static, .version = "1.0.0", .worker_state_size = sizeof(st_worker), .load = static_load,
            .unload = static_unload);
