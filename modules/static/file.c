/* file.c — one regular file's response: opening it through the cache
 * (or not), its fields (the validators a cached file keeps formatted, its
 * type, Vary and Cache-Control), the preconditions, a range, and its bytes
 * (from the cache's memory in one write with the head, or sendfile).
 */
#include "static.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* Opens rel[0..len) (rel[len] is '\0'), a name made as `name` says
 * (ST_NAME_*): one from the request's path passes st_path_check first,
 * unless the cache's entry for it says it did. */
int st_open_rel(const st_ctx *x, const st_mount *m, const char *rel, size_t len, int name,
                st_open_file *of)
{
    int rc;
    of->held = 0;
    if (x->ws == NULL) {
        of->shared = NULL;
        if (name != ST_NAME_MADE && (rc = st_path_check(m, rel, len)) != 0)
            return rc;
        return st_open(m, rel, &of->fd, &of->info);
    }
    st_file *f;
    rc = st_cache_open(&x->ws->cache, x->now_ms, m, rel, len, name, &f);
    if (rc == ST_CHECK_NAME) {
        if ((rc = st_path_check(m, rel, len)) != 0)
            return rc;
        rc = st_cache_open(&x->ws->cache, x->now_ms, m, rel, len, ST_NAME_CHECKED, &f);
    }
    if (rc != 0)
        return rc;
    of->shared = f;
    of->fd = f->fd;
    of->info = f->info;
    return 0;
}

void st_of_close(st_open_file *of)
{
    if (of->shared == NULL)
        st_close(of->fd);
    else if (!of->held)
        st_file_release(of->shared);
    of->shared = NULL;
    of->fd = -1;
}

/* A descriptor the caller owns (multipart and listing read and close their
 * own on the pool), or what to answer instead: 500, or ST_NO_FD_* when no
 * descriptor was left for the copy. */
int st_of_take(st_open_file *of, int *fd)
{
    if (of->shared == NULL) {
        *fd = of->fd;
        of->fd = -1;
        return 0;
    }
    *fd = st_dup(of->fd);
    int why = *fd < 0 ? (st_no_fd_of(errno) ? st_no_fd_of(errno) : 500) : 0;
    st_of_close(of);
    return why;
}

/* Gives of's reference to a cached file to the request, until its log
 * phase (release_on_log): the file's descriptor stays open for sendfile
 * and its validator fields for the response's field list, which points
 * to them until then. */
static void hold_until_log(const st_ctx *x, st_open_file *of)
{
    if (of->held)
        return;
    keel_request_set_data(x->req, x->cfg->module, of->shared);
    of->held = 1;
}

/* Sends [off, off + len) and ends the response. A shared descriptor stays
 * open (close_fd 0) until the log phase releases the request's reference,
 * once the last byte has left; bytes from memory hold their own reference
 * (st_content), so the file's goes at once unless the request holds it
 * for its fields. */
static int send_range(const st_ctx *x, st_open_file *of, uint64_t off, uint64_t len)
{
    if (of->shared == NULL)
        return keel_response_send_file(x->res, of->fd, off, len, 1);
    /* A small file from memory: the head and the bytes in one write,
     * where sendfile needs a second system call (and TLS a read on the
     * thread pool). */
    st_content *k = st_cache_content(&x->ws->cache, of->shared);
    if (k != NULL && off + len <= k->size) {
        st_of_close(of);
        return keel_response_send_file_bytes(x->res, k->bytes + off, (size_t)len,
                                             st_content_release, k);
    }
    if (k != NULL)
        st_content_release(NULL, k);
    hold_until_log(x, of);
    return keel_response_send_file(x->res, of->fd, off, len, 0);
}

/* The Range of a request for a file whose validator If-Range let by
 * (RFC 9110 14.2): 1 with *rc when it was answered (206 with one part or
 * multipart/byteranges, 416, or what st_of_take could not do), 0 when the
 * field is to be ignored and the whole file served. */
static int serve_ranges(const st_ctx *x, st_open_file *of, keel_str range, const char *type,
                        int *rc)
{
    const st_config *cfg = x->cfg;
    keel_request *req = x->req;
    keel_response *res = x->res;
    uint64_t size = of->info.size;
    st_range *ranges;
    size_t n;
    int r = st_range_parse(range.ptr, range.len, size, cfg->max_ranges, &ranges, &n);
    if (r == ST_RANGE_UNSAT) {
        char cr[64];
        snprintf(cr, sizeof cr, "bytes */%llu", (unsigned long long)size);
        st_of_close(of);
        keel_response_header_set(res, "Content-Range", cr);
        *rc = st_answer(cfg, req, res, 416);
        return 1;
    }
    if (r != ST_RANGE_OK)
        return 0;
    if (n == 1) {
        char cr[96];
        snprintf(cr, sizeof cr, "bytes %llu-%llu/%llu", (unsigned long long)ranges[0].first,
                 (unsigned long long)ranges[0].last, (unsigned long long)size);
        uint64_t off = ranges[0].first, len = ranges[0].last - ranges[0].first + 1;
        free(ranges);
        keel_response_set_status(res, 206);
        keel_response_header_set(res, "Content-Range", cr);
        st_count(cfg, req, 206, len);
        *rc = send_range(x, of, off, len);
        return 1;
    }
    int fd, why = st_of_take(of, &fd);
    if (why != 0) {
        free(ranges);
        *rc = st_answer(cfg, req, res, why);
        return 1;
    }
    st_count(cfg, req, 206, 0);
    *rc = st_multipart_send(cfg, req, res, fd, size, type, ranges, n);
    return 1;
}

/* Chooses a precompressed sibling of rel: br, zstd or gzip, by q-value
 * (ties in that order: a sibling made ahead of time with brotli -q 11 is
 * the smallest), when the sibling is a regular file. On a hit *sib is
 * the sibling and the coding's name is returned. */
static const char *pick_sibling(const st_ctx *x, const st_mount *m, char *rel, size_t rlen,
                                st_open_file *sib)
{
    keel_str ae = keel_request_header_token(x->req, KEEL_HDR_ACCEPT_ENCODING);
    if (ae.ptr == NULL || rlen + 5 > ST_PATH_MAX)
        return NULL;
    typedef struct choice {
        const char *coding, *ext;
        int q;
    } choice;
    choice order[3] = {{"br", ".br", st_accept_q(ae, "br")},
                       {"zstd", ".zst", st_accept_q(ae, "zstd")},
                       {"gzip", ".gz", st_accept_q(ae, "gzip")}};
    for (int i = 1; i < 3; i++) /* stable: equal weights keep their order */
        for (int k = i; k > 0 && order[k].q > order[k - 1].q; k--) {
            choice t = order[k];
            order[k] = order[k - 1];
            order[k - 1] = t;
        }
    for (int i = 0; i < 3; i++) {
        if (order[i].q <= 0)
            continue;
        size_t el = strlen(order[i].ext);
        memcpy(rel + rlen, order[i].ext, el + 1);
        int rc = st_open_rel(x, m, rel, rlen + el, ST_NAME_MADE, sib);
        rel[rlen] = '\0';
        if (rc != 0)
            continue;
        if (sib->info.kind != ST_KIND_FILE) {
            st_of_close(sib);
            continue;
        }
        return order[i].coding;
    }
    return NULL;
}

/* Sets a field of a file's response: a field prepared at load, or text
 * (made now, or a value the core would not prepare: refused the same way).
 * `fresh`: the response had no field when the handler began, and each of
 * these names is set once, so there is no field of the same name to
 * replace, and adding skips the search that a set makes. */
static void put_field(keel_response *res, int fresh, const keel_prepared_field *field,
                      const char *name, const char *text)
{
    if (field != NULL)
        keel_response_field_add(res, field, !fresh);
    else if (fresh)
        keel_response_header_add(res, name, text);
    else
        keel_response_header_set(res, name, text);
}

int st_serve_file(const st_ctx *x, const st_mount *m, st_open_file *of, char *rel, size_t rlen)
{
    const st_config *cfg = x->cfg;
    keel_request *req = x->req;
    keel_response *res = x->res;
    int fresh = keel_response_header_count(res) == 0;
    /* The name's type, kept with a cached file (it is one name's). */
    const st_ctype *type;
    if (of->shared == NULL)
        type = st_mime_type(cfg, rel, rlen);
    else if ((type = of->shared->type) == NULL)
        type = of->shared->type = st_mime_type(cfg, rel, rlen);
    const char *coding = NULL;
    if (m->precompressed) {
        st_open_file sib;
        coding = pick_sibling(x, m, rel, rlen, &sib);
        if (coding != NULL) {
            st_of_close(of);
            *of = sib;
        }
        /* Every answer of such a mount varies, the identity one included,
         * or a cache would hand it to a client that asked for br. */
        put_field(res, fresh, cfg->vary_encoding, "Vary", "Accept-Encoding");
    }
    const st_info *info = &of->info;
    /* A cached file's validators and their fields are made once per file
     * (its metadata never changes, cache.c); a sibling's ETag has its
     * coding's suffix (RFC 9110 8.8.3: another representation, another
     * tag) and is made each time. Prepared fields go in one call. */
    char etag_buf[ST_ETAG_MAX], date_buf[ST_DATE_MAX];
    const char *etag = etag_buf, *date = date_buf;
    const keel_prepared_field *batch[3];
    size_t nbatch = 0;
    if (of->shared != NULL && coding == NULL) {
        st_file *f = of->shared;
        st_file_validators(f);
        etag = f->etag;
        date = f->last_modified;
        if (f->validator_fields[0] != NULL && f->validator_fields[1] != NULL) {
            hold_until_log(x, of);
            batch[nbatch++] = f->validator_fields[0];
            batch[nbatch++] = f->validator_fields[1];
        }
    } else {
        st_etag(info, coding, etag_buf, sizeof etag_buf);
        keel_time_format(info->mtime, KEEL_TIME_HTTP, date_buf, sizeof date_buf);
    }
    if (nbatch == 0) {
        put_field(res, fresh, NULL, "ETag", etag);
        put_field(res, fresh, NULL, "Last-Modified", date);
    }
    if (m->cache_control_field != NULL)
        batch[nbatch++] = m->cache_control_field;
    if (nbatch > 0)
        keel_response_fields_add(res, batch, nbatch, !fresh);
    if (m->cache_control != NULL && m->cache_control_field == NULL)
        put_field(res, fresh, NULL, "Cache-Control", m->cache_control);
    if (coding)
        put_field(res, fresh, NULL, "Content-Encoding", coding);

    int pc = st_preconditions(req, etag, info->mtime);
    if (pc == 304) {
        /* 15.4.5: the fields a 200 would carry that describe the
         * representation's metadata go with it; no body. */
        st_of_close(of);
        st_count(cfg, req, 304, 0);
        keel_response_set_status(res, 304);
        return keel_response_end(res);
    }
    if (pc == 412) {
        st_of_close(of);
        return st_answer(cfg, req, res, 412);
    }
    if (type->field != NULL && cfg->accept_ranges != NULL) {
        const keel_prepared_field *two[2] = {type->field, cfg->accept_ranges};
        keel_response_fields_add(res, two, 2, !fresh);
    } else {
        put_field(res, fresh, type->field, "Content-Type", type->text);
        put_field(res, fresh, cfg->accept_ranges, "Accept-Ranges",
                  cfg->max_ranges ? "bytes" : "none");
    }

    keel_str range = keel_request_header_token(req, KEEL_HDR_RANGE);
    if (range.ptr != NULL && st_if_range(req, etag, info->mtime)) {
        int rc;
        if (serve_ranges(x, of, range, type->text, &rc))
            return rc;
    }
    st_count(cfg, req, 200, info->size);
    return send_range(x, of, 0, info->size);
}
