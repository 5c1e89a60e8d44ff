/* pieces — bytes and file ranges interleaved in one call (ABI 1.8), for
 * test_pieces.c: keel_response_send_pieces behind http1, and
 * keel_conn_write_pieces under the raw "piececat" protocol, both on the
 * file named by [pieces] path.
 *
 * The "mixed" body, SIZE being the file's size (at least 300,000 bytes):
 *     "<", file [0, 1000), "" (empty bytes), file [5000, +0) (an empty
 *     range), "|", file [10000, 300000), ">\n"
 * "pastend": "x", file [SIZE - 10, SIZE + 10) (past the end), "y".
 * "big": "A", the whole file, "B", the whole file, "C".
 *
 * HTTP routes:
 *     GET /mixed     the mixed body as the response's
 *     GET /pastend   the pastend body: its promised length cannot be kept
 *
 * Protocol "piececat", one command a line:
 *     mixed     "BEGIN\n" (keel_conn_write_copy), the mixed pieces in one
 *               keel_conn_write_pieces, "END\n" (a write queued behind them)
 *     pastend   the same around the pastend pieces
 *     big       the same around the big pieces
 *     bytes     "BEGIN\n", then bytes only: "a", "", "b\n"; "END\n"
 * and each write of pieces logs "pieces done: STATUS" at its end, and each
 * response's release "pieces released".
 */
#include <keel/keel.h>

#include <fcntl.h>
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

typedef struct pieces_cfg {
    keel_module *module;
    const char *path;
} pieces_cfg;

/* One write of pieces in flight: the file stays open until its end. */
typedef struct xfer {
    keel_module *module;
    int fd;
    keel_piece pieces[8];
    size_t n;
} xfer;

enum { BODY_MIXED, BODY_PASTEND, BODY_BIG, BODY_BYTES };

static xfer *xfer_new(keel_module *m, int body)
{
    const pieces_cfg *cfg = keel_module_data(m);
    xfer *x = calloc(1, sizeof *x);
    if (x == NULL)
        return NULL;
    x->module = m;
    x->fd = open(cfg->path, O_RDONLY | O_BINARY);
    struct stat st;
    if (x->fd < 0 || fstat(x->fd, &st) != 0) {
        if (x->fd >= 0)
            close(x->fd);
        free(x);
        return NULL;
    }
    uint64_t size = (uint64_t)st.st_size;
    keel_piece *p = x->pieces;
    switch (body) {
    case BODY_MIXED:
        p[0] = keel_piece_bytes("<", 1);
        p[1] = keel_piece_file(x->fd, 0, 1000);
        p[2] = keel_piece_bytes("", 0);
        p[3] = keel_piece_file(x->fd, 5000, 0);
        p[4] = keel_piece_bytes("|", 1);
        p[5] = keel_piece_file(x->fd, 10000, 290000);
        p[6] = keel_piece_bytes(">\n", 2);
        x->n = 7;
        break;
    case BODY_PASTEND:
        p[0] = keel_piece_bytes("x", 1);
        p[1] = keel_piece_file(x->fd, size - 10, 20);
        p[2] = keel_piece_bytes("y", 1);
        x->n = 3;
        break;
    case BODY_BIG:
        p[0] = keel_piece_bytes("A", 1);
        p[1] = keel_piece_file(x->fd, 0, size);
        p[2] = keel_piece_bytes("B", 1);
        p[3] = keel_piece_file(x->fd, 0, size);
        p[4] = keel_piece_bytes("C", 1);
        x->n = 5;
        break;
    default:
        p[0] = keel_piece_bytes("a", 1);
        p[1] = keel_piece_bytes("", 0);
        p[2] = keel_piece_bytes("b\n", 2);
        x->n = 3;
        break;
    }
    return x;
}

static void xfer_free(xfer *x)
{
    close(x->fd);
    free(x);
}

static const char *status_name(int status)
{
    return status == KEEL_OK           ? "ok"
           : status == KEEL_ERR_CLOSED ? "closed"
           : status == KEEL_ERR_IO     ? "io"
                                       : "other";
}

/* ---- HTTP ------------------------------------------------------------------ */

static void on_released(void *data, void *userdata)
{
    xfer *x = userdata;
    (void)data;
    keel_log(x->module, KEEL_LOG_INFO, "pieces released");
    xfer_free(x);
}

static int send_body(keel_response *res, keel_module *m, int body)
{
    xfer *x = xfer_new(m, body);
    if (x == NULL)
        return keel_response_send_status(res, 500);
    keel_response_header_set(res, "Content-Type", "application/octet-stream");
    return keel_response_send_pieces(res, x->pieces, x->n, on_released, x);
}

static int get_mixed(keel_request *req, keel_response *res, void *userdata)
{
    (void)req;
    return send_body(res, ((pieces_cfg *)userdata)->module, BODY_MIXED);
}

static int get_pastend(keel_request *req, keel_response *res, void *userdata)
{
    (void)req;
    return send_body(res, ((pieces_cfg *)userdata)->module, BODY_PASTEND);
}

/* ---- the piececat protocol -------------------------------------------------- */

static void on_written(keel_conn *conn, int status, void *userdata)
{
    xfer *x = userdata;
    (void)conn;
    keel_log(x->module, KEEL_LOG_INFO, "pieces done: %s", status_name(status));
    xfer_free(x);
}

static int write_body(keel_conn *conn, int body)
{
    xfer *x = xfer_new(keel_conn_module(conn), body);
    if (x == NULL)
        return KEEL_ERR_NOMEM;
    int rc = keel_conn_write_copy(conn, "BEGIN\n", 6);
    if (rc == KEEL_OK)
        rc = keel_conn_write_pieces(conn, x->pieces, x->n, on_written, x);
    if (rc != KEEL_OK) {
        xfer_free(x);
        return rc;
    }
    return keel_conn_write_copy(conn, "END\n", 4);
}

static int piececat_data(keel_conn *conn, const char *data, size_t len, size_t *consumed)
{
    static const struct {
        const char *line;
        int body;
    } commands[] = {{"mixed\n", BODY_MIXED},
                    {"pastend\n", BODY_PASTEND},
                    {"big\n", BODY_BIG},
                    {"bytes\n", BODY_BYTES}};
    size_t at = 0;
    const char *nl;
    while ((nl = memchr(data + at, '\n', len - at)) != NULL) {
        size_t n = (size_t)(nl - (data + at)) + 1;
        const char *line = data + at;
        at += n;
        for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
            if (n != strlen(commands[i].line) || memcmp(line, commands[i].line, n) != 0)
                continue;
            int rc = write_body(conn, commands[i].body);
            if (rc != KEEL_OK) {
                *consumed = at;
                return rc;
            }
        }
    }
    *consumed = at;
    return KEEL_OK;
}

static const keel_protocol piececat = {
    .size = sizeof(keel_protocol),
    .name = "piececat",
    .on_data = piececat_data,
};

/* ---- life cycle -------------------------------------------------------------- */

static int pieces_load(keel_module *module)
{
    pieces_cfg *cfg = calloc(1, sizeof *cfg);
    if (cfg == NULL)
        return KEEL_ERR_NOMEM;
    cfg->module = module;
    int rc = keel_config_string(module, "path", "", &cfg->path);
    if (rc == KEEL_OK && cfg->path[0] == '\0') {
        keel_log(module, KEEL_LOG_ERROR, "[pieces] path is required");
        rc = KEEL_ERR_CONFIG;
    }
    if (rc == KEEL_OK) {
        keel_module_set_data(module, cfg);
        rc = keel_route_add(module, "GET", "/mixed", get_mixed, cfg);
    }
    if (rc == KEEL_OK)
        rc = keel_route_add(module, "GET", "/pastend", get_pastend, cfg);
    if (rc == KEEL_OK)
        rc = keel_protocol_register(module, &piececat);
    if (rc != KEEL_OK) {
        keel_module_set_data(module, NULL); /* a module whose load failed is not unloaded */
        free(cfg);
    }
    return rc;
}

static void pieces_unload(keel_module *module)
{
    free(keel_module_data(module));
}

KEEL_MODULE(pieces, .version = "1.0.0", .load = pieces_load, .unload = pieces_unload);
