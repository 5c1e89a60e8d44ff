/* files — serves one file through keel_response_send_file (HTTP) and
 * keel_conn_write_file (a raw protocol), for test_sendfile.c.
 *
 *     [files]
 *     path = /tmp/.../data.bin   ; the file served
 *     body_filter = off          ; on: add a pass-through body filter, which
 *                                ; makes the core read the file in pieces;
 *                                ; skip: the filter skips every body
 *                                ; (keel_response_filter_skip_body, ABI 1.4)
 *                                ; and logs "files: filter saw a body" if its
 *                                ; body hook runs all the same;
 *                                ; wrap: a pieces filter (ABI 1.9) puts "<<"
 *                                ; before and ">>" after every body, passing
 *                                ; file ranges on unread, and logs at each
 *                                ; body's end "files: wrap passed F file bytes
 *                                ; and B bytes";
 *                                ; wrap+bytes: the same, followed by the
 *                                ; pass-through bytes filter (so the wrap
 *                                ; filter gets bytes, F is 0)
 *
 * HTTP routes (behind http1):
 *     GET /file                     the whole file
 *     GET /range?offset=N&length=M  those bytes, as 206 with Content-Range
 *     GET /short                    promises 1000 bytes more than the file has
 *     GET /notmodified              304 answered through send_file: no body
 *     GET /trailer                  the whole file with a trailer field (chunked)
 *     GET /small                    "small\n" from memory
 *     GET /pieces                   "A\n", the file, "B\n" in one
 *                                   keel_response_send_pieces (ABI 1.8)
 *     GET /cut?length=N             announces N bytes (or chunked without
 *                                   length), writes 100, then
 *                                   keel_response_abort (ABI 1.4)
 *
 * Protocol "filecat", one command a line:
 *     file    "BEGIN\n", the file, "END\n": a write, a file, a write
 *     twice   "BEGIN\n", the file, "MID\n", the file, "END\n"
 *     after   the same as file, with "BEGIN\n" as keel_conn_write_file_after's
 *             prefix (ABI 1.4)
 * and each transfer's end is logged as "files: transfer done: STATUS".
 */
#include <keel/keel.h>

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#ifdef _WIN32
#include <io.h>
#else
#include <unistd.h>
#endif

#ifndef O_BINARY
#define O_BINARY 0
#endif

struct files {
    keel_module *module;
    const char *path;
    int body_filter;
    int skip_body;
    int wrap;
    keel_http_filter filter, wrap_filter;
};

/* What the wrap filter saw of the body under way (one request at a time
 * in the tests; one worker). */
static uint64_t wrap_file_bytes, wrap_bytes;
static int wrap_started;

static int open_file(const struct files *f, uint64_t *size)
{
    int fd = open(f->path, O_RDONLY | O_BINARY);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < 0) {
        close(fd);
        return -1;
    }
    *size = (uint64_t)st.st_size;
    return fd;
}

static uint64_t query_u64(keel_request *req, const char *name, uint64_t def)
{
    keel_str v;
    if (keel_request_query_param(req, name, &v) != KEEL_OK || v.len == 0 || v.len > 18)
        return def;
    uint64_t n = 0;
    for (size_t i = 0; i < v.len; i++) {
        if (v.ptr[i] < '0' || v.ptr[i] > '9')
            return def;
        n = n * 10 + (uint64_t)(v.ptr[i] - '0');
    }
    return n;
}

/* ---- HTTP ------------------------------------------------------------------ */

static int get_file(keel_request *req, keel_response *res, void *userdata)
{
    (void)req;
    uint64_t size;
    int fd = open_file(userdata, &size);
    if (fd < 0)
        return keel_response_send_status(res, 404);
    keel_response_header_set(res, "Content-Type", "application/octet-stream");
    return keel_response_send_file(res, fd, 0, size, 1);
}

static int get_range(keel_request *req, keel_response *res, void *userdata)
{
    uint64_t size;
    int fd = open_file(userdata, &size);
    if (fd < 0)
        return keel_response_send_status(res, 404);
    uint64_t offset = query_u64(req, "offset", 0);
    uint64_t length = query_u64(req, "length", 0);
    if (offset >= size || length == 0 || length > size - offset) {
        close(fd);
        return keel_response_send_status(res, 416);
    }
    char range[96];
    snprintf(range, sizeof range, "bytes %llu-%llu/%llu", (unsigned long long)offset,
             (unsigned long long)(offset + length - 1), (unsigned long long)size);
    keel_response_set_status(res, 206);
    keel_response_header_set(res, "Content-Range", range);
    return keel_response_send_file(res, fd, offset, length, 1);
}

static int get_short(keel_request *req, keel_response *res, void *userdata)
{
    (void)req;
    uint64_t size;
    int fd = open_file(userdata, &size);
    if (fd < 0)
        return keel_response_send_status(res, 404);
    return keel_response_send_file(res, fd, 0, size + 1000, 1);
}

static int get_notmodified(keel_request *req, keel_response *res, void *userdata)
{
    (void)req;
    uint64_t size;
    int fd = open_file(userdata, &size);
    if (fd < 0)
        return keel_response_send_status(res, 404);
    keel_response_set_status(res, 304);
    return keel_response_send_file(res, fd, 0, size, 1);
}

/* A trailer needs chunked framing, which a protocol cannot wrap around a
 * file it sends whole: the core must fall back to reading it. */
static int get_trailer(keel_request *req, keel_response *res, void *userdata)
{
    (void)req;
    uint64_t size;
    int fd = open_file(userdata, &size);
    if (fd < 0)
        return keel_response_send_status(res, 404);
    keel_response_header_set(res, "Trailer", "X-Done");
    keel_response_trailer_add(res, "X-Done", "yes");
    return keel_response_send_file(res, fd, 0, size, 1);
}

static int get_cut(keel_request *req, keel_response *res, void *userdata)
{
    (void)userdata;
    keel_str v;
    if (keel_request_query_param(req, "length", &v) == KEEL_OK && v.len > 0 && v.len < 16) {
        char n[16];
        memcpy(n, v.ptr, v.len);
        n[v.len] = '\0';
        keel_response_header_set(res, "Content-Length", n);
    }
    static const char part[100] = {0};
    int rc = keel_response_write(res, part, sizeof part, NULL, NULL);
    if (rc != KEEL_OK)
        return KEEL_OK;
    if (keel_response_abort(res) != KEEL_OK || keel_response_abort(res) != KEEL_ERR_STATE)
        return KEEL_ERR_STATE; /* (the second call must be refused; the first ended it) */
    return KEEL_OK;
}

static void close_fd(void *data, void *userdata)
{
    (void)data;
    close((int)(intptr_t)userdata);
}

static int get_pieces(keel_request *req, keel_response *res, void *userdata)
{
    (void)req;
    uint64_t size;
    int fd = open_file(userdata, &size);
    if (fd < 0)
        return keel_response_send_status(res, 404);
    keel_piece pieces[] = {keel_piece_bytes("A\n", 2), keel_piece_file(fd, 0, size),
                           keel_piece_bytes("B\n", 2)};
    return keel_response_send_pieces(res, pieces, 3, close_fd, (void *)(intptr_t)fd);
}

static int get_small(keel_request *req, keel_response *res, void *userdata)
{
    (void)req;
    (void)userdata;
    return keel_response_send(res, "small\n", 6, NULL, NULL);
}

/* Passes the body on untouched: its only effect is that a body filter
 * exists, so the core cannot hand the file to the protocol whole. */
static int pass_body(keel_request *req, keel_response *res, const keel_buf *bufs, size_t nbufs,
                     int last, void *userdata)
{
    (void)req;
    struct files *f = userdata;
    if (f->skip_body)
        keel_log(f->module, KEEL_LOG_INFO, "files: filter saw a body");
    return keel_response_filter_emit(res, bufs, nbufs, last);
}

/* A pieces filter (ABI 1.9): frames the body without reading its files. */
static int wrap_pieces(keel_request *req, keel_response *res, const keel_piece *pieces,
                       size_t npieces, int last, void *userdata)
{
    (void)req;
    struct files *f = userdata;
    keel_piece out[18];
    size_t n = 0;
    if (npieces > 16)
        return KEEL_ERR_INVAL;
    if (!wrap_started) {
        wrap_started = 1;
        wrap_file_bytes = wrap_bytes = 0;
        out[n++] = keel_piece_bytes("<<", 2);
    }
    for (size_t i = 0; i < npieces; i++) {
        if (pieces[i].kind == KEEL_PIECE_FILE)
            wrap_file_bytes += pieces[i].len;
        else
            wrap_bytes += pieces[i].len;
        out[n++] = pieces[i];
    }
    if (last) {
        out[n++] = keel_piece_bytes(">>", 2);
        wrap_started = 0;
        keel_log(f->module, KEEL_LOG_INFO, "files: wrap passed %llu file bytes and %llu bytes",
                 (unsigned long long)wrap_file_bytes, (unsigned long long)wrap_bytes);
    }
    return keel_response_filter_emit_pieces(res, out, n, last);
}

static void skip_head(keel_request *req, keel_response *res, void *userdata)
{
    (void)req;
    struct files *f = userdata;
    if (f->skip_body && keel_response_filter_skip_body(res) != KEEL_OK)
        keel_log(f->module, KEEL_LOG_ERROR, "files: skip_body refused");
}

/* ---- the filecat protocol --------------------------------------------------- */

typedef struct xfer {
    keel_module *module;
    int fd;
} xfer;

static void on_sent(keel_conn *conn, int status, void *userdata)
{
    xfer *x = userdata;
    (void)conn;
    close(x->fd);
    keel_log(x->module, KEEL_LOG_INFO, "transfer done: %s",
             status == KEEL_OK           ? "ok"
             : status == KEEL_ERR_CLOSED ? "closed"
             : status == KEEL_ERR_IO     ? "io"
                                         : "other");
    free(x);
}

static int send_whole_after(keel_conn *conn, const char *prefix)
{
    keel_module *m = keel_conn_module(conn);
    const struct files *f = keel_module_data(m);
    xfer *x = malloc(sizeof *x);
    uint64_t size = 0;
    if (x == NULL)
        return KEEL_ERR_NOMEM;
    x->module = m;
    if ((x->fd = open_file(f, &size)) < 0) {
        free(x);
        return KEEL_ERR_NOTFOUND;
    }
    keel_buf head = {prefix, prefix ? strlen(prefix) : 0};
    int rc = prefix ? keel_conn_write_file_after(conn, &head, 1, x->fd, 0, size, on_sent, x)
                    : keel_conn_write_file(conn, x->fd, 0, size, on_sent, x);
    if (rc != KEEL_OK) {
        close(x->fd);
        free(x);
    }
    return rc;
}

static int send_whole(keel_conn *conn)
{
    return send_whole_after(conn, NULL);
}

static int filecat_data(keel_conn *conn, const char *data, size_t len, size_t *consumed)
{
    size_t at = 0;
    const char *nl;
    while ((nl = memchr(data + at, '\n', len - at)) != NULL) {
        size_t n = (size_t)(nl - (data + at)) + 1;
        const char *line = data + at;
        at += n;
        int rc = KEEL_OK;
        if (n == 5 && memcmp(line, "file\n", 5) == 0) {
            keel_conn_write_copy(conn, "BEGIN\n", 6);
            rc = send_whole(conn);
            keel_conn_write_copy(conn, "END\n", 4);
        } else if (n == 6 && memcmp(line, "after\n", 6) == 0) {
            char prefix[] = "BEGIN\n"; /* on the stack: the call copies it */
            rc = send_whole_after(conn, prefix);
            keel_conn_write_copy(conn, "END\n", 4);
        } else if (n == 6 && memcmp(line, "twice\n", 6) == 0) {
            static const keel_buf mid = {"MID\n", 4}; /* borrowed: static */
            keel_conn_write_copy(conn, "BEGIN\n", 6);
            rc = send_whole(conn);
            if (rc == KEEL_OK)
                rc = keel_conn_write(conn, &mid, 1, NULL, NULL);
            if (rc == KEEL_OK)
                rc = send_whole(conn);
            keel_conn_write_copy(conn, "END\n", 4);
        }
        if (rc < 0) {
            *consumed = at;
            return rc;
        }
    }
    *consumed = at;
    return KEEL_OK;
}

static const keel_protocol filecat = {
    .size = sizeof(keel_protocol),
    .name = "filecat",
    .on_data = filecat_data,
};

/* ---- life cycle -------------------------------------------------------------- */

static int files_load(keel_module *module)
{
    struct files *f = calloc(1, sizeof *f);
    if (f == NULL)
        return KEEL_ERR_NOMEM;
    f->module = module;
    int rc = keel_config_string(module, "path", "", &f->path);
    const char *filter = "off";
    if (rc == KEEL_OK)
        rc = keel_config_string(module, "body_filter", "off", &filter);
    f->skip_body = strcmp(filter, "skip") == 0;
    f->wrap = strcmp(filter, "wrap") == 0 || strcmp(filter, "wrap+bytes") == 0;
    f->body_filter = f->skip_body || strcmp(filter, "on") == 0 || strcmp(filter, "wrap+bytes") == 0;
    if (rc == KEEL_OK && f->path[0] == '\0') {
        keel_log(module, KEEL_LOG_ERROR, "[files] path is required");
        rc = KEEL_ERR_CONFIG;
    }
    if (rc != KEEL_OK) {
        free(f);
        return rc;
    }
    keel_module_set_data(module, f);
    static const struct {
        const char *path;
        keel_http_handler handler;
    } routes[] = {
        {"/file", get_file},       {"/range", get_range},
        {"/short", get_short},     {"/notmodified", get_notmodified},
        {"/trailer", get_trailer}, {"/small", get_small},
        {"/cut", get_cut},         {"/pieces", get_pieces},
    };
    for (size_t i = 0; rc == KEEL_OK && i < sizeof routes / sizeof routes[0]; i++)
        rc = keel_route_add(module, "GET", routes[i].path, routes[i].handler, f);
    if (rc == KEEL_OK && f->wrap) {
        f->wrap_filter = (keel_http_filter){
            .size = sizeof(keel_http_filter),
            .name = "files-wrap",
            .userdata = f,
            .on_response_pieces = wrap_pieces,
        };
        rc = keel_http_filter_add(module, &f->wrap_filter);
    }
    if (rc == KEEL_OK && f->body_filter) {
        f->filter = (keel_http_filter){
            .size = sizeof(keel_http_filter),
            .name = "files",
            .userdata = f,
            .on_response_head = skip_head,
            .on_response_body = pass_body,
        };
        rc = keel_http_filter_add(module, &f->filter);
    }
    if (rc == KEEL_OK)
        rc = keel_protocol_register(module, &filecat);
    if (rc != KEEL_OK) {
        keel_module_set_data(module, NULL); /* a module whose load failed is not unloaded */
        free(f);
    }
    return rc;
}

static void files_unload(keel_module *module)
{
    free(keel_module_data(module));
}

KEEL_MODULE(files, .version = "1.0.0", .load = files_load, .unload = files_unload);
