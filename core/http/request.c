/* Requests: creation from a protocol's head, the handler-facing accessors,
 * path decoding, query parameters, reference counting, and an exchange
 * its client abandons (keel_request_on_abort). Bodies are http/body.c. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <keel/util.h>

#include "net/conn.h"
#include "base/util.h"
#include "http/http.h"
#include "net/worker.h"

/* ---- arena ------------------------------------------------------------- */

struct kl_arena_block {
    kl_arena_block *next;
};

void *kl_arena_alloc(kl_arena *a, size_t size)
{
    size = (size + 7) & ~(size_t)7;
    if ((size_t)(a->end - a->at) < size) {
        size_t block = size + sizeof(kl_arena_block) > 4096 ? size + sizeof(kl_arena_block) : 4096;
        kl_arena_block *b = malloc(block);
        if (b == NULL)
            return NULL;
        b->next = a->blocks;
        a->blocks = b;
        a->at = (char *)(b + 1);
        a->end = (char *)b + block;
    }
    void *p = a->at;
    a->at += size;
    return p;
}

char *kl_arena_dup(kl_arena *a, const char *s, size_t len)
{
    char *copy = kl_arena_alloc(a, len + 1);
    if (copy != NULL) {
        memcpy(copy, s, len);
        copy[len] = '\0';
    }
    return copy;
}

static void arena_free(kl_arena *a)
{
    while (a->blocks != NULL) {
        kl_arena_block *b = a->blocks;
        a->blocks = b->next;
        free(b);
    }
}

/* ---- life cycle -------------------------------------------------------- */

static uint64_t now_us(void)
{
    return uv_hrtime() / 1000;
}

/* The head came without its fields' tokens (a protocol that does not
 * classify them, or one built before ABI 1.8): classified here, once. If
 * the arena has no room, kl_request_field_token classifies on each use. */
static void classify_fields(keel_request *req)
{
    const keel_http_head *h = &req->head;
    uint16_t *tokens = kl_arena_alloc(&req->arena, h->nheaders * sizeof *tokens);
    if (tokens == NULL)
        return;
    for (size_t i = 0; i < h->nheaders; i++)
        tokens[i] = (uint16_t)keel_header_token(h->headers[i].name.ptr, h->headers[i].name.len);
    req->head.tokens = tokens;
}

/* A struct of the host's size from one a module built with its `size`:
 * the fields it lacks zeroed. */
static void copy_sized(void *dst, size_t dst_size, const void *src, size_t src_size)
{
    if (src_size >= dst_size) {
        memcpy(dst, src, dst_size);
        return;
    }
    memcpy(dst, src, src_size);
    memset((char *)dst + src_size, 0, dst_size - src_size);
}

keel_request *keel_http_request_start(keel_conn *conn, const keel_http_sink *sink, void *exchange,
                                      const keel_http_head *head)
{
    if (sink == NULL || head == NULL ||
        sink->size < offsetof(keel_http_sink, done) + sizeof(void *))
        return NULL;
    /* Requests come from the worker's pool of spares: no allocation per
     * request in the steady state. */
    keel_worker *w = keel_conn_worker(conn);
    kl_http_worker *hw = kl_worker_slot(w, KL_SLOT_HTTP);
    keel_request *req = kl_freelist_get(&hw->pool, sizeof *req);
    if (req == NULL)
        return NULL;
    memset(req, 0, offsetof(keel_request, res) + offsetof(keel_response, inline_headers));
    req->route.nparams = 0;
    req->route.allow[0] = '\0';
    req->conn = conn;
    req->worker = w;
    req->http = hw->http;
    /* The sink and the head are copied whole, not zeroed first; what an
     * older (smaller) one lacks reads as zero. */
    copy_sized(&req->sink_copy, sizeof req->sink_copy, sink, sink->size);
    req->sink = &req->sink_copy;
    req->exchange = exchange;
    copy_sized(&req->head, sizeof req->head, head, head->size);
    req->head.size = sizeof req->head;
    req->arena.at = req->inline_arena;
    req->arena.end = req->inline_arena + sizeof req->inline_arena;
    req->arena.blocks = NULL;
    if (req->head.tokens == NULL && req->head.nheaders > 0)
        classify_fields(req);
    req->res.req = req;
    req->res.headers = req->res.inline_headers;
    req->res.headers_cap = sizeof req->res.inline_headers / sizeof req->res.inline_headers[0];
    req->res.status = 200;
    req->res.content_length = -1;
    req->res.file_fd = -1;
    req->start_us = now_us();
    req->refs = 2; /* the exchange (until done/abort) and the response (until ended) */
    return req;
}

void kl_request_ref(keel_request *req)
{
    req->refs++;
}

/* What a request may have allocated beyond its own object. */
static void release_extras(keel_request *req)
{
    free(req->body);
    free(req->work);
    if (req->res.headers != req->res.inline_headers)
        free(req->res.headers);
    free(req->res.trailers);
    if (req->res.file_reading)
        kl_file_reader_free(&req->res.file_reader);
    free(req->module_data);
    arena_free(&req->arena);
}

void kl_request_unref(keel_request *req)
{
    if (--req->refs > 0)
        return;
    /* Most requests allocate none of these: one test for all, where
     * free(NULL) would be a call apiece. */
    if (req->body != NULL || req->work != NULL || req->res.headers != req->res.inline_headers ||
        req->res.trailers != NULL || req->res.file_reading || req->module_data != NULL ||
        req->arena.blocks != NULL)
        release_extras(req);
    kl_http_worker *hw = kl_worker_slot(req->worker, KL_SLOT_HTTP);
    kl_freelist_put(&hw->pool, req);
}

void kl_http_worker_init(void *state, void *arg)
{
    kl_http_worker *hw = state;
    hw->http = arg;
    /* Deep enough for one HTTP/2 connection's 100 concurrent streams
     * ([h2] max_concurrent_streams' default), so that a full connection's
     * requests come from the pool, not from malloc and free
     * (modules/h2/CORE-NEEDS.md 7). At 2.7 KB a request, at most 340 KB
     * kept per worker after a burst. */
    hw->pool.max = 128;
}

void kl_http_worker_dispose(void *state)
{
    kl_http_worker *hw = state;
    kl_freelist_clear(&hw->pool);
}

/* The head's views lead nowhere (its copy failed): the request reads as
 * one with an empty method and target, no fields, the root path. */
static void forget_head(keel_request *req)
{
    req->head.method = (keel_str){"", 0};
    req->head.target = (keel_str){"", 0};
    req->head.headers = NULL;
    req->head.tokens = NULL;
    req->head.nheaders = 0;
    req->path = (keel_str){"/", 1};
    req->query = (keel_str){NULL, 0};
    req->route.nparams = 0;
}

static void run_abort(kl_soon *soon)
{
    keel_request *req = KL_CONTAINER_OF(soon, keel_request, abort_soon);
    keel_request_abort_fn cb = req->abort_cb;
    req->abort_queued = 0;
    req->abort_cb = NULL;
    /* Not if the handler learned it meanwhile: a response call that
     * returned KEEL_ERR_CLOSED has ended the response. */
    if (cb != NULL && !req->res.ended) {
        cb(req, req->abort_ud);
        kl_response_release_if_aborted(&req->res);
    }
    kl_request_unref(req); /* the queue's */
}

/* The handler asked to be told: from the loop, never inside a call of
 * its (a protocol may find its client gone while the handler writes). */
static void queue_abort(keel_request *req)
{
    if (req->abort_cb == NULL || req->abort_queued || req->res.ended)
        return;
    req->abort_queued = 1;
    req->abort_soon.fn = run_abort;
    kl_request_ref(req);
    kl_worker_soon(req->worker, &req->abort_soon);
}

void keel_http_request_abort(keel_request *req)
{
    if (req->aborted || req->exchange_done)
        return;
    kl_request_body_pause_end(req);
    req->aborted = 1;
    req->exchange_done = 1;
    /* The protocol takes the head's memory back once this returns (the
     * read buffer, the stream): a handler that still holds the request
     * reads its own copy until it learns the client left. */
    if (!req->res.ended && kl_request_own_head(req) != KEEL_OK)
        forget_head(req);
    kl_request_keep_facts(req);
    kl_request_fail_body(req, KEEL_ERR_CLOSED);
    if (!req->logged)
        kl_request_finish(req); /* logs as not completed; no sink calls */
    req->conn_gone = 1;         /* after the log phase, which may still read it */
    queue_abort(req);
    kl_request_unref(req); /* the exchange's reference */
}

int keel_request_on_abort(keel_request *req, keel_request_abort_fn cb, void *userdata)
{
    if (req->res.ended)
        return KEEL_ERR_STATE;
    req->abort_cb = cb;
    req->abort_ud = userdata;
    if (req->aborted)
        queue_abort(req);
    return KEEL_OK;
}

keel_worker *keel_request_worker(keel_request *req)
{
    return req->worker;
}

/* ---- the connection's facts (ABI 1.7) ------------------------------------ */

/* The peer's address into facts.peer: from the worker's cache when an
 * earlier exchange of the connection asked the kernel already. */
static int keep_peer(keel_request *req)
{
    if (req->facts_kept & KL_KEPT_PEER)
        return KEEL_OK;
    /* Once the facts are kept the connection may be freed at any time
     * (the exchange over, or abandoned): never read it again. */
    if (req->conn_gone || (req->facts_kept & KL_KEPT_CONN))
        return KEEL_ERR_CLOSED;
    kl_http_worker *hw = kl_worker_slot(req->worker, KL_SLOT_HTTP);
    uint64_t id = keel_conn_id(req->conn);
    size_t slot = (size_t)(id % KL_HTTP_PEER_CACHE);
    if (hw->peers[slot].conn_id == id && id != 0) {
        req->facts.peer = hw->peers[slot].addr;
    } else {
        int rc = kl_conn_peer_addr(req->conn, &req->facts.peer);
        if (rc != KEEL_OK)
            return rc;
        hw->peers[slot].conn_id = id;
        hw->peers[slot].addr = req->facts.peer;
    }
    req->facts_kept |= KL_KEPT_PEER;
    return KEEL_OK;
}

void kl_request_keep_facts(keel_request *req)
{
    if (req->conn_gone || (req->facts_kept & KL_KEPT_CONN))
        return;
    /* The peer first: it fails only once the socket has closed (the
     * handler answered while the client went), and the peer calls say
     * KEEL_ERR_CLOSED from then on. */
    keep_peer(req);
    req->facts.conn_id = keel_conn_id(req->conn);
    req->facts.transport = keel_conn_transport_name(req->conn);
    req->facts_kept |= KL_KEPT_CONN;
}

static int peer_name(keel_request *req, int with_port, char *buf, size_t size)
{
    if (buf == NULL || size == 0)
        return KEEL_ERR_INVAL;
    buf[0] = '\0';
    int rc = keep_peer(req);
    return rc == KEEL_OK ? kl_peer_addr_name(&req->facts.peer, with_port, buf, size) : rc;
}

int keel_request_peer_name(keel_request *req, char *buf, size_t size)
{
    return peer_name(req, 1, buf, size);
}

int keel_request_peer_ip(keel_request *req, char *buf, size_t size)
{
    return peer_name(req, 0, buf, size);
}

int keel_request_peer_ip_bytes(keel_request *req, unsigned char *out)
{
    if (out == NULL)
        return KEEL_ERR_INVAL;
    int rc = keep_peer(req);
    if (rc != KEEL_OK)
        return rc;
    const kl_peer_addr *a = &req->facts.peer;
    if (a->sa.sa_family == AF_INET) {
        static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        memcpy(out, mapped, 12);
        memcpy(out + 12, &a->in4.sin_addr, 4);
        return KEEL_OK;
    }
    if (a->sa.sa_family == AF_INET6) {
        memcpy(out, &a->in6.sin6_addr, 16);
        return KEEL_OK;
    }
    return KEEL_ERR_NOTFOUND;
}

int keel_request_peer_cred(keel_request *req, uint32_t *uid, uint32_t *gid, int64_t *pid)
{
    if (req == NULL)
        return KEEL_ERR_INVAL;
    int rc = keep_peer(req);
    if (rc != KEEL_OK)
        return rc;
    const kl_peer_addr *a = &req->facts.peer;
    if (a->sa.sa_family != AF_UNIX)
        return KEEL_ERR_NOTFOUND;
    if (a->un.uid == KL_PEER_NO_CRED)
        return KEEL_ERR_UNSUPPORTED;
    if (uid != NULL)
        *uid = a->un.uid;
    if (gid != NULL)
        *gid = a->un.gid;
    if (pid != NULL)
        *pid = a->un.pid;
    return KEEL_OK;
}

uint64_t keel_request_conn_id(keel_request *req)
{
    return (req->facts_kept & KL_KEPT_CONN) ? req->facts.conn_id : keel_conn_id(req->conn);
}

const char *keel_request_transport_name(keel_request *req)
{
    return (req->facts_kept & KL_KEPT_CONN) ? req->facts.transport
                                            : keel_conn_transport_name(req->conn);
}

const char *keel_request_scheme(keel_request *req)
{
    /* The tls module's transport is the one that makes a request https
     * (RFC 9110 4.2.2); any other, or plain TCP, carries http. */
    const char *t = keel_request_transport_name(req);
    return t != NULL && strcmp(t, "tls") == 0 ? "https" : "http";
}

int64_t keel_request_body_length(keel_request *req)
{
    return req->head.content_length;
}

/* ---- owning the head ----------------------------------------------------- */

/* A view inside [from, from + len) moves to the same place in `to`. (The
 * view may point anywhere, so addresses are compared as integers: relational
 * operators on pointers into different objects are undefined in C.) */
static void rebase(keel_str *s, const char *from, size_t len, const char *to)
{
    uintptr_t p = (uintptr_t)s->ptr, f = (uintptr_t)from;
    if (s->ptr != NULL && p >= f && p - f + s->len <= len)
        s->ptr = to + (p - f);
}

static int own_str(kl_arena *a, keel_str *s)
{
    if (s->ptr == NULL)
        return KEEL_OK;
    char *copy = kl_arena_dup(a, s->ptr, s->len);
    if (copy == NULL)
        return KEEL_ERR_NOMEM;
    s->ptr = copy;
    return KEEL_OK;
}

int kl_request_own_head(keel_request *req)
{
    keel_http_head *h = &req->head;
    keel_str old_target = h->target;
    keel_header *fields = kl_arena_alloc(&req->arena, (h->nheaders + 1) * sizeof *fields);
    if (fields == NULL || own_str(&req->arena, &h->method) != KEEL_OK ||
        own_str(&req->arena, &h->target) != KEEL_OK)
        return KEEL_ERR_NOMEM;
    for (size_t i = 0; i < h->nheaders; i++) {
        fields[i] = h->headers[i];
        if (own_str(&req->arena, &fields[i].name) != KEEL_OK ||
            own_str(&req->arena, &fields[i].value) != KEEL_OK)
            return KEEL_ERR_NOMEM;
    }
    h->headers = fields;
    if (h->tokens != NULL && h->nheaders > 0) {
        uint16_t *tokens = kl_arena_alloc(&req->arena, h->nheaders * sizeof *tokens);
        if (tokens == NULL)
            return KEEL_ERR_NOMEM;
        memcpy(tokens, h->tokens, h->nheaders * sizeof *tokens);
        h->tokens = tokens;
    }
    /* The path is a view into the target unless it had to be decoded (then
     * it is in the arena already); the query always is one, and route
     * parameters are views into the path. */
    if (old_target.ptr != NULL) {
        const char *from = old_target.ptr, *to = h->target.ptr;
        for (size_t i = 0; i < req->route.nparams; i++)
            rebase(&req->route.values[i], from, old_target.len, to);
        rebase(&req->path, from, old_target.len, to);
        rebase(&req->query, from, old_target.len, to);
    }
    return KEEL_OK;
}

/* ---- the target -------------------------------------------------------- */

/* Percent-decodes [s, s+len) into out (which has room for len bytes);
 * returns the decoded length or -1 for a bad escape or a NUL byte. With
 * plus_is_space, '+' decodes to ' ' (query strings). */
static long decode(const char *s, size_t len, char *out, int plus_is_space)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (c == '%') {
            int hi, lo;
            if (i + 2 >= len || (hi = keel_hex_value((unsigned char)s[i + 1])) < 0 ||
                (lo = keel_hex_value((unsigned char)s[i + 2])) < 0)
                return -1;
            c = (char)(hi * 16 + lo);
            if (c == '\0')
                return -1;
            i += 2;
        } else if (c == '+' && plus_is_space) {
            c = ' ';
        }
        out[o++] = c;
    }
    return (long)o;
}

/* Resolves "." and ".." segments in place (RFC 3986 5.2.4) and merges
 * runs of "/" into one; -1 if ".." would climb above the root. Merging is
 * nginx's merge_slashes (on by default): a file system reads "//admin/x"
 * as "/admin/x", so a path scope [/admin/] must hold it too, or its
 * access rules and authentication are skipped for the same file. */
static long remove_dot_segments(char *path, size_t len)
{
    size_t out = 0;
    size_t i = 0;
    while (i < len) {
        /* path[i] is '/' here: look at the segment after it. */
        size_t start = i + 1, end = start;
        while (end < len && path[end] != '/')
            end++;
        size_t seg = end - start;
        if (seg == 0 && end < len) {
            /* an empty segment before another '/': dropped */
        } else if (seg == 1 && path[start] == '.') {
            if (end == len)
                path[out++] = '/';
        } else if (seg == 2 && path[start] == '.' && path[start + 1] == '.') {
            if (out == 0)
                return -1;
            while (out > 0 && path[out - 1] != '/')
                out--;
            if (out > 0)
                out--;
            if (end == len)
                path[out++] = '/';
        } else {
            if (out != i) /* a segment was dropped before: move this one down */
                memmove(path + out, path + i, end - i);
            out += end - i;
        }
        i = end;
    }
    if (out == 0)
        path[out++] = '/';
    return (long)out;
}

/* The bytes kl_request_parse_target stops at in one pass over a target:
 * NUL (refused), '?' (the query starts), '%' (an escape to decode) and '/'
 * (a dot segment or "//" may follow). */
static const unsigned char target_stop[256] = {['\0'] = 1, ['%'] = 1, ['/'] = 1, ['?'] = 1};

int kl_request_parse_target(keel_request *req)
{
    keel_str t = req->head.target;
    const char *p = t.ptr, *end = t.ptr + t.len;
    /* No request-target holds a NUL (RFC 9112 3.2, RFC 3986 2). http1
     * refuses control bytes itself, but the core must not rely on every
     * protocol doing so (h2's :path is any octets until checked, RFC 9113
     * 8.2.1): a raw NUL in a path that needs no decoding stayed in it, and
     * a handler using C strings would then see a shorter path than the
     * router matched (found by tests/fuzz/fuzz_target). An origin-form
     * target is looked at in the one pass below. */
    if (t.len > 0 && p[0] != '/') {
        if (memchr(p, '\0', t.len) != NULL)
            return 400;
        if (t.len == 1 && p[0] == '*') { /* OPTIONS * (RFC 9112 3.2.4) */
            req->path = t;
            return 0;
        }
        /* absolute-form: skip scheme "://" authority */
        const char *colon = memchr(p, ':', t.len);
        if (colon == NULL || end - colon < 3 || colon[1] != '/' || colon[2] != '/')
            return 400;
        p = colon + 3;
        while (p < end && *p != '/' && *p != '?')
            p++;
    }
    /* The common path has no escape, no dot segment and no "//": it
     * stays a view. */
    int plain = 1;
    const char *q = NULL;
    for (const char *s = p; s < end; s++) {
        if (!target_stop[(unsigned char)*s])
            continue;
        if (*s == '\0')
            return 400;
        if (*s == '?') {
            if (memchr(s + 1, '\0', (size_t)(end - s - 1)) != NULL)
                return 400;
            q = s;
            break;
        }
        if (*s == '%' || (s + 1 < end && (s[1] == '.' || s[1] == '/')))
            plain = 0;
    }
    const char *path_end = q ? q : end;
    if (q != NULL)
        req->query = (keel_str){q + 1, (size_t)(end - q - 1)};
    if (path_end == p) {
        req->path = (keel_str){"/", 1};
        return 0;
    }
    if (*p != '/')
        return 400;
    size_t len = (size_t)(path_end - p);
    if (plain) {
        req->path = (keel_str){p, len};
        return 0;
    }
    char *buf = kl_arena_alloc(&req->arena, len + 1);
    if (buf == NULL)
        return 500;
    long n = decode(p, len, buf, 0);
    if (n < 0)
        return 400;
    n = remove_dot_segments(buf, (size_t)n);
    if (n < 0)
        return 400;
    buf[n] = '\0';
    req->path = (keel_str){buf, (size_t)n};
    return 0;
}

int kl_request_normalise_path(keel_request *req, const char *path, size_t len, keel_str *out)
{
    /* What kl_request_parse_target makes of a client's path holds for a
     * module's too: rooted, no NUL, no dot segment, never above "/". */
    if (path == NULL || len == 0 || path[0] != '/' || memchr(path, '\0', len) != NULL)
        return KEEL_ERR_INVAL;
    char *buf = kl_arena_alloc(&req->arena, len + 1);
    if (buf == NULL)
        return KEEL_ERR_NOMEM;
    memcpy(buf, path, len);
    long n = remove_dot_segments(buf, len);
    if (n < 0)
        return KEEL_ERR_INVAL;
    buf[n] = '\0';
    *out = (keel_str){buf, (size_t)n};
    return KEEL_OK;
}

int keel_request_local_name(keel_request *req, char *buf, size_t size)
{
    if (buf == NULL || size == 0)
        return KEEL_ERR_INVAL;
    buf[0] = '\0';
    /* Once the facts are kept the connection may be freed at any time. */
    if (req->conn_gone || (req->facts_kept & KL_KEPT_CONN))
        return KEEL_ERR_CLOSED;
    kl_peer_addr addr;
    int rc = kl_conn_local_addr(req->conn, &addr);
    return rc == KEEL_OK ? kl_peer_addr_name(&addr, 1, buf, size) : rc;
}

/* ---- accessors --------------------------------------------------------- */

keel_str keel_request_method(keel_request *req)
{
    return req->head.method;
}

keel_str keel_request_target(keel_request *req)
{
    return req->head.target;
}

keel_str keel_request_path(keel_request *req)
{
    return req->path;
}

keel_str keel_request_query(keel_request *req)
{
    return req->query;
}

int keel_request_query_param(keel_request *req, const char *name, keel_str *out)
{
    size_t nlen = strlen(name);
    keel_str q = req->query;
    *out = (keel_str){NULL, 0};
    if (q.ptr == NULL)
        return KEEL_ERR_NOTFOUND; /* no query (and no arithmetic on NULL: UB, found by fuzz_http1)
                                   */
    const char *p = q.ptr, *end = q.ptr + q.len;
    while (p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *pend = amp ? amp : end;
        const char *eq = memchr(p, '=', (size_t)(pend - p));
        const char *kend = eq ? eq : pend;
        char key[256];
        long klen = (size_t)(kend - p) < sizeof key ? decode(p, (size_t)(kend - p), key, 1) : -1;
        if (klen == (long)nlen && memcmp(key, name, nlen) == 0) {
            const char *v = eq ? eq + 1 : pend;
            size_t vlen = (size_t)(pend - v);
            char *buf = kl_arena_alloc(&req->arena, vlen + 1);
            if (buf == NULL)
                return KEEL_ERR_NOMEM;
            long n = decode(v, vlen, buf, 1);
            if (n < 0)
                return KEEL_ERR_INVAL;
            buf[n] = '\0';
            *out = (keel_str){buf, (size_t)n};
            return KEEL_OK;
        }
        p = amp ? amp + 1 : end;
    }
    return KEEL_ERR_NOTFOUND;
}

/* Field names compare case-insensitively (RFC 9110 5.1). */
int kl_name_equals(keel_str a, const char *b, size_t blen)
{
    return keel_ascii_iequal(a.ptr, a.len, b, blen);
}

unsigned kl_request_field_token_slow(const keel_request *req, size_t i)
{
    keel_str n = req->head.headers[i].name;
    return keel_header_token(n.ptr, n.len);
}

/* Only a field of the name's length can be it, and most names asked for
 * are absent (preconditions, ranges): the name is classified only at the
 * first field of its length, and from then on a
 * well-known name is found by its token, an integer compare; any other
 * name is compared only with the fields whose names are not well-known
 * either. */
keel_str keel_request_header(keel_request *req, const char *name)
{
    size_t len = strlen(name);
    unsigned token = UINT_MAX; /* not classified yet */
    const keel_http_head *h = &req->head;
    for (size_t i = 0; i < h->nheaders; i++) {
        if (h->headers[i].name.len != len)
            continue;
        if (token == UINT_MAX)
            token = keel_header_token(name, len);
        unsigned t = kl_request_field_token(req, i);
        if (t == token && (token != 0 || kl_name_equals(h->headers[i].name, name, len)))
            return h->headers[i].value;
    }
    return (keel_str){NULL, 0};
}

/* keel_request_header_token where the fields have no stored tokens (a
 * request the core could not classify when it started): out of line, so
 * that the usual search saves no registers for the classifier. */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((noinline))
#endif
static keel_str
header_by_classifying(const keel_request *req, unsigned token)
{
    for (size_t i = 0; i < req->head.nheaders; i++)
        if (kl_request_field_token_slow(req, i) == token)
            return req->head.headers[i].value;
    return (keel_str){NULL, 0};
}

keel_str keel_request_header_token(keel_request *req, unsigned token)
{
    const keel_http_head *h = &req->head;
    if (token == KEEL_HDR_UNKNOWN || token >= KEEL_HDR_COUNT_)
        return (keel_str){NULL, 0};
    if (h->tokens == NULL)
        return header_by_classifying(req, token);
    for (size_t i = 0; i < h->nheaders; i++)
        if (h->tokens[i] == token)
            return h->headers[i].value;
    return (keel_str){NULL, 0};
}

size_t keel_request_header_count(keel_request *req)
{
    return req->head.nheaders;
}

int keel_request_header_at(keel_request *req, size_t index, keel_header *out)
{
    if (index >= req->head.nheaders)
        return KEEL_ERR_NOTFOUND;
    *out = req->head.headers[index];
    return KEEL_OK;
}

keel_str keel_request_param(keel_request *req, const char *name)
{
    size_t len = strlen(name);
    for (size_t i = 0; i < req->route.nparams; i++)
        if (req->route.names[i].len == len && memcmp(req->route.names[i].ptr, name, len) == 0)
            return req->route.values[i];
    return (keel_str){NULL, 0};
}

int keel_request_version(keel_request *req)
{
    return req->head.version;
}

keel_conn *keel_request_conn(keel_request *req)
{
    return req->conn_gone ? NULL : req->conn;
}

void keel_request_set_data(keel_request *req, keel_module *module, void *data)
{
    size_t i = module->index;
    if (i < KL_ARRAY_SIZE(req->inline_module_data)) {
        req->inline_module_data[i] = data;
        req->inline_module_data_set |= (uint16_t)(1u << i);
        return;
    }
    if (req->module_data == NULL) {
        if (data == NULL)
            return;
        req->module_data = calloc(req->worker->host->nmodules, sizeof *req->module_data);
        if (req->module_data == NULL)
            return; /* past the 16th module, still a silent failure */
    }
    req->module_data[i] = data;
}

void *keel_request_data(keel_request *req, keel_module *module)
{
    size_t i = module->index;
    if (i < KL_ARRAY_SIZE(req->inline_module_data))
        return (req->inline_module_data_set >> i) & 1u ? req->inline_module_data[i] : NULL;
    return req->module_data ? req->module_data[i] : NULL;
}
