/* fastcgi.c — FastCGI as the proxy's second upstream protocol (a group
 * written `upstream = php fastcgi 127.0.0.1:9000`): everything else —
 * balancing, the keep-alive pool, passive health, timeouts, retries, the
 * back-pressure both ways, the client leaving — is the proxy's own, so
 * this file only says what differs from HTTP on the wire:
 *
 * - the request: FCGI_BEGIN_REQUEST (Responder, FCGI_KEEP_CONN when the
 *   pool keeps connections), the parameters nginx's fastcgi_params and
 *   fastcgi.conf define (build_params), then the body as FCGI_STDIN
 *   records as it arrives, ended by an empty one (FastCGI 6.2);
 * - the response: records read by fcgi.c; FCGI_STDOUT is a CGI response
 *   (RFC 3875 6), whose head is gathered up to max_header and relayed,
 *   and whose body goes to the client as the proxy relays an HTTP body
 *   (response.c); FCGI_STDERR goes to the error log, a line at most
 *   PX_FCGI_STDERR_LINE bytes and PX_FCGI_STDERR_RATE lines a second per
 *   worker; FCGI_END_REQUEST ends the response, and the connection goes
 *   back to the pool if the application kept it (FCGI_REQUEST_COMPLETE,
 *   nothing after it).
 *
 * Anything else from the application (a record type a Responder does not
 * send, another request id, a head larger than max_header or not a CGI
 * head, a Status outside 200..599, the end before a head) is an invalid
 * response: 502, as nginx answers "upstream sent invalid header".
 */
#include "fcgi.h"
#include "px.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PX_FCGI_STDERR_LINE 1024
#define PX_FCGI_STDERR_RATE 20

/* ---- the parameters ------------------------------------------------------ */

typedef struct pbuf {
    unsigned char *p;
    size_t len, cap;
    int failed;
} pbuf;

static unsigned char *pbuf_room(pbuf *b, size_t n)
{
    if (b->failed)
        return NULL;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 2048;
        while (cap < b->len + n)
            cap *= 2;
        unsigned char *grown = realloc(b->p, cap);
        if (grown == NULL) {
            b->failed = 1;
            return NULL;
        }
        b->p = grown;
        b->cap = cap;
    }
    return b->p + b->len;
}

static void param(pbuf *b, const char *name, size_t nlen, const char *value, size_t vlen)
{
    size_t size = fcgi_pair_size(nlen, vlen);
    unsigned char *at = size ? pbuf_room(b, size) : NULL;
    if (at != NULL)
        b->len += fcgi_pair_put(at, name, nlen, value, vlen);
}

static void param_z(pbuf *b, const char *name, const char *value)
{
    param(b, name, strlen(name), value, strlen(value));
}

static void param_s(pbuf *b, const char *name, keel_str value)
{
    param(b, name, strlen(name), value.ptr ? value.ptr : "", value.ptr ? value.len : 0);
}

/* A value in two parts: the root and a path. */
static void param_2(pbuf *b, const char *name, const char *x, size_t xlen, const char *y,
                    size_t ylen)
{
    size_t nlen = strlen(name), size = fcgi_pair_size(nlen, xlen + ylen);
    unsigned char *at = size ? pbuf_room(b, size) : NULL;
    if (at == NULL)
        return;
    at += fcgi_pair_head(at, nlen, xlen + ylen);
    memcpy(at, name, nlen);
    if (xlen)
        memcpy(at + nlen, x, xlen);
    if (ylen)
        memcpy(at + nlen + xlen, y, ylen);
    b->len += size;
}

/* A connection's two addresses stay what they were for each of its
 * requests, and the server's costs a system call to ask
 * (keel_request_local_name): they are kept per worker for the last
 * connections seen, by id (never reused within the process). */
#define PX_CONN_NAMES 64

struct px_conn_names {
    uint64_t conn_id;
    char peer[64], local[64];
};

/* Asked in the handler: the request may be sent after it returned, when
 * the core no longer answers for the connection. */
void px_fcgi_names(px_ex *ex, keel_request *req)
{
    px_worker *pw = ex->pw;
    uint64_t id = keel_request_conn_id(req);
    if (pw->conn_names == NULL)
        pw->conn_names = calloc(PX_CONN_NAMES, sizeof *pw->conn_names);
    struct px_conn_names *e = pw->conn_names ? &pw->conn_names[id % PX_CONN_NAMES] : NULL;
    if (e == NULL || e->conn_id != id) {
        char peer[64], local[64];
        if (keel_request_peer_name(req, peer, sizeof peer) != KEEL_OK)
            peer[0] = '\0';
        if (keel_request_local_name(req, local, sizeof local) != KEEL_OK)
            local[0] = '\0';
        memcpy(ex->peer_name, peer, sizeof peer);
        memcpy(ex->local_name, local, sizeof local);
        /* a connection that broke early is not remembered without them */
        if (e == NULL || peer[0] == '\0' || local[0] == '\0')
            return;
        e->conn_id = id;
        memcpy(e->peer, peer, sizeof peer);
        memcpy(e->local, local, sizeof local);
        return;
    }
    memcpy(ex->peer_name, e->peer, sizeof e->peer);
    memcpy(ex->local_name, e->local, sizeof e->local);
}

void px_fcgi_worker_free(px_worker *pw)
{
    free(pw->conn_names);
    pw->conn_names = NULL;
}

/* "host:port" or "[v6]:port" into its parts (the port may be absent). */
static void split_hostport(const char *s, keel_str *host, keel_str *port)
{
    size_t len = strlen(s);
    const char *colon = strrchr(s, ':');
    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        *host = (keel_str){s + 1, close ? (size_t)(close - s - 1) : 0};
        colon = close && close[1] == ':' ? close + 1 : NULL;
    } else {
        *host = (keel_str){s, colon ? (size_t)(colon - s) : len};
    }
    *port = colon ? (keel_str){colon + 1, len - (size_t)(colon + 1 - s)} : (keel_str){"", 0};
}

/* nginx's fastcgi_split_path_info ^(.+\.php)(/.*)$: the script ends at
 * the last "EXT/" after at least one byte; what follows, from the slash,
 * is PATH_INFO. Without one the whole path is the script. */
static size_t script_end(keel_str path, const char *ext)
{
    size_t n = ext ? strlen(ext) : 0;
    if (n == 0 || path.len < n + 2)
        return path.len;
    for (size_t i = path.len - n - 1; i >= 1; i--)
        if (path.ptr[i + n] == '/' && memcmp(path.ptr + i, ext, n) == 0)
            return i + n;
    return path.len;
}

static int name_is(keel_str a, const char *b)
{
    return keel_ascii_iequal_z(a.ptr, a.len, b);
}

/* HTTP_* for each request field (RFC 3875 4.1.18), nginx's way: upper
 * case, '-' as '_', fields of one name joined (", ", "; " for Cookie). A
 * name holding '_' is left out, as nginx does (underscores_in_headers
 * off): "X_Foo" would pass for X-Foo. Proxy never passes (httpoxy,
 * CVE-2016-5385: a CGI application takes HTTP_PROXY for its outbound
 * proxy). Transfer-Encoding neither: it framed the body on the client's
 * hop, which FastCGI's records and CONTENT_LENGTH replace (a chunked body
 * arrives decoded and held, spool.c). */
static void header_params(pbuf *b, keel_request *req)
{
    size_t n = keel_request_header_count(req);
    keel_header h, o;
    char name[5 + 128];
    for (size_t i = 0; i < n; i++) {
        if (keel_request_header_at(req, i, &h) != KEEL_OK || h.name.len == 0 ||
            h.name.len > sizeof name - 5 || memchr(h.name.ptr, '_', h.name.len) != NULL ||
            name_is(h.name, "proxy") || name_is(h.name, "transfer-encoding"))
            continue;
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++)
            seen = keel_request_header_at(req, j, &o) == KEEL_OK &&
                   keel_ascii_iequal(o.name.ptr, o.name.len, h.name.ptr, h.name.len);
        if (seen)
            continue; /* joined with the first of its name */
        memcpy(name, "HTTP_", 5);
        for (size_t k = 0; k < h.name.len; k++) {
            char c = h.name.ptr[k];
            name[5 + k] = c == '-' ? '_' : c >= 'a' && c <= 'z' ? (char)(c - 32) : c;
        }
        size_t nlen = 5 + h.name.len, vlen = h.value.len, more = 0;
        const char *sep = name_is(h.name, "cookie") ? "; " : ", ";
        for (size_t j = i + 1; j < n; j++)
            if (keel_request_header_at(req, j, &o) == KEEL_OK &&
                keel_ascii_iequal(o.name.ptr, o.name.len, h.name.ptr, h.name.len)) {
                vlen += 2 + o.value.len;
                more++;
            }
        if (more == 0) {
            param(b, name, nlen, h.value.ptr, h.value.len);
            continue;
        }
        size_t size = fcgi_pair_size(nlen, vlen);
        unsigned char *at = size ? pbuf_room(b, size) : NULL;
        if (at == NULL)
            return;
        at += fcgi_pair_head(at, nlen, vlen);
        memcpy(at, name, nlen);
        at += nlen;
        memcpy(at, h.value.ptr, h.value.len);
        at += h.value.len;
        for (size_t j = i + 1; j < n; j++)
            if (keel_request_header_at(req, j, &o) == KEEL_OK &&
                keel_ascii_iequal(o.name.ptr, o.name.len, h.name.ptr, h.name.len)) {
                memcpy(at, sep, 2);
                memcpy(at + 2, o.value.ptr, o.value.len);
                at += 2 + o.value.len;
            }
        b->len += size;
    }
}

/* The parameters nginx's fastcgi_params (and fastcgi.conf's
 * SCRIPT_FILENAME) send, then the configured ones (`fastcgi_param`),
 * last so that they win: PHP keeps the last of a name. */
static void build_params(pbuf *b, px_ex *ex)
{
    keel_request *req = ex->req;
    px_route *r = ex->route;
    px_config *c = r->cfg;
    keel_str path = keel_request_path(req), target = keel_request_target(req);
    keel_str query = keel_request_query(req);
    const char *root = r->fcgi_root ? r->fcgi_root : "";
    size_t root_len = strlen(root);
    /* SCRIPT_NAME and PATH_INFO */
    keel_str script = path, info = {"", 0};
    if (r->fcgi_script != NULL) {
        script = (keel_str){r->fcgi_script, strlen(r->fcgi_script)};
    } else {
        size_t end = script_end(path, r->fcgi_split);
        script.len = end;
        info = (keel_str){path.ptr + end, path.len - end};
    }
    int add_index = r->fcgi_index != NULL && script.len > 0 && script.ptr[script.len - 1] == '/';
    const char *index = add_index ? r->fcgi_index : "";
    size_t index_len = strlen(index);
    char *sname = malloc(script.len + index_len + 1);
    if (sname == NULL) {
        b->failed = 1;
        return;
    }
    memcpy(sname, script.ptr, script.len);
    memcpy(sname + script.len, index, index_len + 1);
    size_t sname_len = script.len + index_len;
    param_2(b, "SCRIPT_FILENAME", root, root_len, sname, sname_len);
    param(b, "SCRIPT_NAME", 11, sname, sname_len);
    free(sname);
    if (info.len > 0) {
        param_s(b, "PATH_INFO", info);
        param_2(b, "PATH_TRANSLATED", root, root_len, info.ptr, info.len);
    }
    param_s(b, "QUERY_STRING", query);
    param_s(b, "REQUEST_METHOD", keel_request_method(req));
    param_s(b, "CONTENT_TYPE", keel_request_header(req, "Content-Type"));
    if (ex->spool != NULL) {
        char n[24];
        snprintf(n, sizeof n, "%llu", (unsigned long long)px_spool_length(ex));
        param_z(b, "CONTENT_LENGTH", n);
    } else {
        param_s(b, "CONTENT_LENGTH", keel_request_header(req, "Content-Length"));
    }
    param_s(b, "REQUEST_URI", target);
    param_s(b, "DOCUMENT_URI", path);
    param(b, "DOCUMENT_ROOT", 13, root, root_len);
    int v = keel_request_version(req);
    param_z(b, "SERVER_PROTOCOL", v == 10 ? "HTTP/1.0" : v == 20 ? "HTTP/2.0" : "HTTP/1.1");
    param_z(b, "REQUEST_SCHEME", ex->scheme);
    if (strcmp(ex->scheme, "https") == 0)
        param_z(b, "HTTPS", "on");
    param_z(b, "GATEWAY_INTERFACE", "CGI/1.1");
    param_z(b, "SERVER_SOFTWARE", "keel");
    /* the client as keel reports it: the PROXY protocol's when the
     * listener speaks it */
    keel_str host, port;
    param_z(b, "REMOTE_ADDR", ex->client_ip);
    if (ex->peer_name[0] != '\0') {
        split_hostport(ex->peer_name, &host, &port);
        param_s(b, "REMOTE_PORT", port);
    }
    keel_str server_host = {NULL, 0};
    if (ex->local_name[0] != '\0') {
        split_hostport(ex->local_name, &host, &port);
        param_s(b, "SERVER_ADDR", host);
        param_s(b, "SERVER_PORT", port);
        server_host = host;
    }
    /* nginx's $server_name is its server block's; keel has none: the
     * name the client asked for, without its port */
    keel_str h = keel_request_header(req, "Host");
    if (h.ptr != NULL) {
        char hz[256];
        size_t n = h.len < sizeof hz ? h.len : sizeof hz - 1;
        memcpy(hz, h.ptr, n);
        hz[n] = '\0';
        split_hostport(hz, &host, &port);
        param_s(b, "SERVER_NAME", host);
    } else {
        param_s(b, "SERVER_NAME", server_host);
    }
    param_z(b, "REDIRECT_STATUS", "200"); /* php-cgi's cgi.force_redirect wants it */
    header_params(b, req);
    for (size_t i = 0; i < c->nfcgi_params; i++)
        param_z(b, c->fcgi_params[i].name, c->fcgi_params[i].value);
}

/* The request's head: FCGI_BEGIN_REQUEST, the parameters in records of
 * at most 65535 bytes, the empty FCGI_PARAMS that ends them, and the
 * empty FCGI_STDIN too when there is no body. Built behind a px_block's
 * header (forward.c writes it as one); NULL when out of memory. */
char *px_fcgi_request_head(px_ex *ex, size_t *len)
{
    pbuf params = {0};
    build_params(&params, ex);
    if (params.failed) {
        free(params.p);
        return NULL;
    }
    size_t nrec = (params.len + FCGI_MAX_CONTENT - 1) / FCGI_MAX_CONTENT;
    int no_body = ex->body_kind == PX_BODY_NONE || ex->body_done;
    size_t size = 16 + nrec * FCGI_HEADER_LEN + params.len + FCGI_HEADER_LEN +
                  (no_body ? FCGI_HEADER_LEN : 0);
    px_block *blk = malloc(sizeof *blk + size);
    if (blk == NULL) {
        free(params.p);
        return NULL;
    }
    unsigned char *p = (unsigned char *)blk->data;
    fcgi_begin_request(p, ex->route->cfg->keepalive > 0);
    p += 16;
    for (size_t at = 0; at < params.len; at += FCGI_MAX_CONTENT) {
        size_t n = params.len - at < FCGI_MAX_CONTENT ? params.len - at : FCGI_MAX_CONTENT;
        fcgi_header(p, FCGI_PARAMS, n);
        memcpy(p + FCGI_HEADER_LEN, params.p + at, n);
        p += FCGI_HEADER_LEN + n;
    }
    fcgi_header(p, FCGI_PARAMS, 0);
    p += FCGI_HEADER_LEN;
    if (no_body)
        fcgi_header(p, FCGI_STDIN, 0);
    free(params.p);
    *len = size;
    return (char *)blk;
}

/* A piece of the request body as FCGI_STDIN records; the last call adds
 * the empty record that ends the stream. */
void px_fcgi_body(px_ex *ex, const char *data, size_t len, int last)
{
    static const unsigned char end[FCGI_HEADER_LEN] = {1, FCGI_STDIN, 0, FCGI_ID, 0, 0, 0, 0};
    do {
        size_t n = len < FCGI_MAX_CONTENT ? len : FCGI_MAX_CONTENT;
        int final = last && n == len;
        unsigned char head[FCGI_HEADER_LEN];
        fcgi_header(head, FCGI_STDIN, n);
        if (n > 0)
            px_ex_write_upstream(ex, (const char *)head, sizeof head, data, n,
                                 final ? (const char *)end : NULL, final ? sizeof end : 0);
        else if (final)
            px_ex_write_upstream(ex, (const char *)end, sizeof end, NULL, 0, NULL, 0);
        data += n;
        len -= n;
    } while (len > 0);
}

/* ---- the response ----------------------------------------------------------- */

/* FCGI_STDERR to the error log (nginx: "FastCGI sent in stderr"): one
 * line per record, cut at PX_FCGI_STDERR_LINE bytes, control bytes shown
 * as '?' (the application's text must not forge log lines), and at most
 * PX_FCGI_STDERR_RATE lines a second per worker, the rest counted and
 * said once the second is over. */
static void log_stderr(px_ex *ex, const char *data, size_t len)
{
    px_worker *pw = ex->pw;
    uint64_t now = keel_worker_now_ms(pw->worker);
    keel_module *m = ex->route->cfg->module;
    if (now - pw->stderr_window_ms >= 1000) {
        if (pw->stderr_dropped > 0)
            keel_log(m, KEEL_LOG_WARN, "fastcgi: %llu stderr record(s) not logged (over %d/s)",
                     (unsigned long long)pw->stderr_dropped, PX_FCGI_STDERR_RATE);
        pw->stderr_window_ms = now;
        pw->stderr_lines = 0;
        pw->stderr_dropped = 0;
    }
    if (pw->stderr_lines >= PX_FCGI_STDERR_RATE) {
        pw->stderr_dropped++;
        return;
    }
    pw->stderr_lines++;
    char line[PX_FCGI_STDERR_LINE];
    size_t n = len < sizeof line - 1 ? len : sizeof line - 1;
    while (n > 0 && (data[n - 1] == '\n' || data[n - 1] == '\r'))
        n--;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)data[i];
        line[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
    }
    line[n] = '\0';
    keel_log(m, KEEL_LOG_WARN, "fastcgi %s stderr: %s%s", ex->peer ? ex->peer->srv->authority : "-",
             line, len > n + 2 ? " [...]" : "");
}

/* The CGI head is complete in ex->hbuf[0..end): relayed; the bytes after
 * it are the body's first. 0, or -1 for an invalid head. */
static int head_done(px_ex *ex, px_up *up, size_t end)
{
    size_t n = 0;
    int status = 0;
    if (fcgi_head_parse(ex->hbuf, end, NULL, 0, &n, &status) != 0)
        return -1;
    if (n > ex->cap_fields) {
        px_field *grown = realloc(ex->fields, n * sizeof *grown);
        if (grown == NULL)
            return -1;
        ex->fields = grown;
        ex->cap_fields = n;
    }
    fcgi_head_parse(ex->hbuf, end, ex->fields, ex->cap_fields, &ex->nfields, &status);
    /* Each name and value NUL-terminated where it lies, as response.c
     * keeps an HTTP head's (headers.c relays them without a copy): a name
     * ends at its colon, a value at the blank, CR or LF after it, all
     * within the head and read no more (the body's bytes follow end). */
    for (size_t i = 0; i < ex->nfields; i++) {
        ex->hbuf[ex->fields[i].name + ex->fields[i].name_len] = '\0';
        ex->hbuf[ex->fields[i].value + ex->fields[i].value_len] = '\0';
    }
    up->cgi_head_done = 1;
    /* the body's first bytes: from this read (the head's end is in it),
     * so the gathering block has room (px_body_reserve) */
    size_t rest = ex->hlen - end;
    if (rest > 0 && ex->req != NULL && !px_bodiless(ex, status))
        px_body_add(ex, ex->hbuf + end, rest);
    px_response_head(ex, status);
    return 0;
}

static int stdout_bytes(px_ex *ex, px_up *up, const char *data, size_t len)
{
    if (up->cgi_head_done) {
        if (ex->req != NULL && !px_bodiless(ex, ex->status))
            px_body_add(ex, data, len);
        return 0;
    }
    /* the head, gathered: it may come in many records (nginx's
     * fastcgi_buffer_size bounds it as max_header does here) */
    size_t from = ex->hlen;
    if (px_head_append(ex, data, len) != 0)
        return -1;
    size_t end = fcgi_head_end(ex->hbuf, ex->hlen, from);
    if (end == 0)
        return 0;
    return head_done(ex, up, end);
}

/* One read of the application's records (response.c reserved room for
 * its body bytes and holds a reference to the exchange). */
void px_fcgi_records(px_ex *ex, px_up *up, const char *data, size_t len)
{
    size_t at = 0;
    int ev = FCGI_EV_MORE, invalid = 0;
    const char *why = NULL;
    while (at < len) {
        size_t used;
        const char *span;
        size_t span_len;
        ev = fcgi_read(&up->fcgi, data + at, len - at, &used, &span, &span_len);
        at += used;
        if (ev == FCGI_EV_STDOUT && stdout_bytes(ex, up, span, span_len) != 0) {
            why = "invalid or too large a CGI head";
            invalid = 1;
        } else if (ev == FCGI_EV_STDERR) {
            log_stderr(ex, span, span_len);
        } else if (ev == FCGI_EV_ERROR) {
            why = "not a FastCGI Responder's record";
            invalid = 1;
        }
        if (invalid || ev == FCGI_EV_END || ev == FCGI_EV_MORE)
            break;
    }
    if (!invalid && ev == FCGI_EV_END && !up->cgi_head_done) {
        why = "the request ended without a head";
        invalid = 1;
    }
    if (invalid) {
        keel_log(ex->route->cfg->module, KEEL_LOG_INFO, "fastcgi %s: invalid response: %s",
                 ex->peer ? ex->peer->srv->authority : "-", why);
        px_body_drop(ex);
        up->ex = NULL;
        ex->up = NULL;
        keel_conn_abort(up->conn);
        px_attempt_failed(ex, PX_FAIL_INVALID);
    } else if (ev == FCGI_EV_END) {
        /* FCGI_KEEP_CONN asked, and the application ended cleanly with
         * nothing after: the connection is good for the next request. */
        px_response_complete(ex, up,
                             at == len && up->fcgi.protocol_status == FCGI_REQUEST_COMPLETE);
    } else {
        px_body_flush_soon(ex);
        px_upstream_hold(ex);
    }
}
