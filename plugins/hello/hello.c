/* hello — an HTTP handler module written as a third party would write one.
 *
 * It includes only <keel/keel.h> and the C library, links against nothing
 * and is built by its own CMakeLists.txt through find_package(keel). It is
 * keel's benchmark and conformance fixture, and a tour of the handler API:
 *
 *     GET  /              "Hello, World!" from static memory (the fast path)
 *     POST /echo          the request body, with the request's Content-Type
 *     GET  /hello/:name   "Hello, NAME!" (a route parameter)
 *     GET  /slow[?ms=N]   answers after a timer (an asynchronous handler)
 *     GET  /offload[?n=N] hashes on libuv's thread pool, answers when done
 *     GET  /stream[?n=N]  N chunks streamed at the peer's pace, then a trailer
 *     GET  /headers       the request's header fields as text, one a line
 *     GET  /ws            a WebSocket echo (text as text, binary as binary),
 *                         only when the websocket module is loaded
 *
 * Every GET route answers HEAD too (the core drops the body). Load it
 * behind an HTTP protocol module:
 *
 *     [keel]
 *     listen = 127.0.0.1:8080 http1
 *     modules = http1 hello
 *     [hello]
 *     slow_delay = 50ms      ; how long /slow waits unless ?ms= says otherwise
 */
#include <keel/keel.h>
#include <keel/websocket.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The [hello] section, declared (keel/config.h): the core validates it,
 * fills this struct before load and prints it for --help-module. */
struct hello_conf {
    uint64_t slow_ms;
};

static const keel_config_key hello_keys[] = {
    KEEL_KEY(struct hello_conf, slow_ms, "slow_delay", KEEL_CONFIG_DURATION, .def = "50ms",
             .max = 3600000, .doc = "how long GET /slow waits unless ?ms= says otherwise"),
};
KEEL_CONFIG_SCHEMA(hello_schema, struct hello_conf, hello_keys);

/* Module-wide data, made in load and shared read-only by every worker
 * (keel_module_set_data). */
struct hello {
    keel_module *module;
    uint64_t slow_ms;
    /* "Content-Type: text/plain", checked and classified once at load
     * (keel_field_prepare): every GET / carries the same field. */
    const keel_prepared_field *text_plain;
};

/* ---- Small helpers ------------------------------------------------------ */

/* A decimal query parameter, clamped to [0, max]; def if absent or bad. */
static uint64_t query_u64(keel_request *req, const char *name, uint64_t def, uint64_t max)
{
    keel_str v;
    if (keel_request_query_param(req, name, &v) != KEEL_OK || v.len == 0)
        return def;
    uint64_t n = 0;
    for (size_t i = 0; i < v.len; i++) {
        if (v.ptr[i] < '0' || v.ptr[i] > '9')
            return def;
        n = n * 10 + (uint64_t)(v.ptr[i] - '0');
        if (n > max)
            return max;
    }
    return n;
}

static void free_body(void *data, void *userdata)
{
    (void)userdata;
    free(data);
}

/* ---- GET / ----------------------------------------------------------------
 * The body is static, so it is borrowed with no free callback: nothing is
 * copied or allocated for it, and the protocol can send head and body in one
 * write. This is the route the benchmark hammers. */
static int hello_root(keel_request *req, keel_response *res, void *userdata)
{
    (void)req;
    const struct hello *h = userdata;
    static const char body[] = "Hello, World!";
    keel_response_field_add(res, h->text_plain, 1);
    return keel_response_send(res, body, sizeof body - 1, NULL, NULL);
}

/* ---- POST /echo ----------------------------------------------------------- */

static void echo_body_read(keel_request *req, int status, void *userdata)
{
    keel_response *res = userdata;
    /* KEEL_ERR_LIMIT: the core is already answering 413. KEEL_ERR_CLOSED:
     * the client is gone. Either way there is nothing left for us to do. */
    if (status != KEEL_OK)
        return;

    /* keel_str views are not NUL-terminated; header setters take C strings. */
    keel_str ct = keel_request_header(req, "Content-Type");
    if (ct.ptr) {
        char *value = malloc(ct.len + 1);
        if (!value) {
            keel_response_send_status(res, 500);
            return;
        }
        memcpy(value, ct.ptr, ct.len);
        value[ct.len] = '\0';
        keel_response_header_set(res, "Content-Type", value); /* copies it */
        free(value);
    } else {
        keel_response_header_set(res, "Content-Type", "application/octet-stream");
    }

    /* The body belongs to the request, which outlives its response: it can
     * be sent back borrowed, without a copy. */
    keel_str body = keel_request_body(req);
    keel_response_send(res, body.ptr, body.len, NULL, NULL);
}

static int hello_echo(keel_request *req, keel_response *res, void *userdata)
{
    (void)userdata;
    /* 0: the protocol's own body limit ([http1] max_body). Asking for the
     * body is also what makes HTTP/1.1 send "100 Continue" to a client that
     * waits for it. */
    return keel_request_read_body(req, 0, echo_body_read, res);
}

/* ---- GET /hello/:name ------------------------------------------------------ */

static int hello_name(keel_request *req, keel_response *res, void *userdata)
{
    (void)userdata;
    keel_str name = keel_request_param(req, "name"); /* already percent-decoded */
    size_t len = sizeof "Hello, !" - 1 + name.len;
    char *body = malloc(len);
    if (!body)
        return KEEL_ERR_NOMEM; /* the core answers 500 */
    memcpy(body, "Hello, ", 7);
    if (name.len) /* memcpy from NULL is undefined even for 0 bytes */
        memcpy(body + 7, name.ptr, name.len);
    body[len - 1] = '!';
    keel_response_header_set(res, "Content-Type", "text/plain");
    /* Borrowed with a free callback: sent without a copy, freed when sent
     * (or at once if sending fails). */
    return keel_response_send(res, body, len, free_body, NULL);
}

/* ---- GET /slow --------------------------------------------------------------
 * An asynchronous handler: it returns at once and answers from a timer.
 * Pipelined requests behind it must still be answered after it, in order.
 *
 * If the client goes away first, the core tells the handler through the
 * abort callback (keel_request_on_abort): the timer is stopped there, and
 * the request is gone once the callback returns. */
struct slow {
    keel_request *req;
    keel_response *res;
    keel_timer *timer;
    uint64_t ms;
};

static void slow_fire(keel_timer *timer, void *userdata)
{
    struct slow *s = userdata;
    keel_timer_stop(timer);
    keel_request_on_abort(s->req, NULL, NULL); /* answered now: nothing to cancel */

    char body[64];
    int n = snprintf(body, sizeof body, "Hello after %llu ms!", (unsigned long long)s->ms);
    keel_response_header_set(s->res, "Content-Type", "text/plain");
    keel_response_send_copy(s->res, body, (size_t)n);
    free(s);
}

/* The client left before the timer fired. */
static void slow_abandoned(keel_request *req, void *userdata)
{
    struct slow *s = userdata;
    (void)req;
    keel_timer_stop(s->timer);
    free(s);
}

static int hello_slow(keel_request *req, keel_response *res, void *userdata)
{
    struct hello *h = userdata;
    struct slow *s = calloc(1, sizeof *s);
    if (!s)
        return KEEL_ERR_NOMEM;
    s->req = req;
    s->res = res;
    s->ms = query_u64(req, "ms", h->slow_ms, 10000);
    s->timer = keel_timer_start(keel_request_worker(req), s->ms, 0, slow_fire, s);
    if (!s->timer) {
        free(s);
        return KEEL_ERR_NOMEM;
    }
    keel_request_on_abort(req, slow_abandoned, s);
    return KEEL_OK;
}

/* ---- GET /offload -----------------------------------------------------------
 * CPU-bound work must not run on the loop: every other connection of the
 * worker would wait. keel_offload runs it on libuv's thread pool and calls
 * back on the request's own worker, where keel may be used again.
 *
 * The work: n rounds of x = FNV-1a-64(the 8 little-endian bytes of x),
 * starting from the FNV offset basis. Deterministic, so tests can check it;
 * about 10 ns a round. */
struct offload_job {
    keel_response *res;
    uint64_t rounds;
    uint64_t result;
};

#define FNV64_OFFSET 14695981039346656037ULL
#define FNV64_PRIME  1099511628211ULL

static void offload_work(void *userdata) /* thread pool: no keel calls here */
{
    struct offload_job *job = userdata;
    uint64_t x = FNV64_OFFSET;
    for (uint64_t r = 0; r < job->rounds; r++) {
        uint64_t h = FNV64_OFFSET;
        for (int i = 0; i < 8; i++) {
            h ^= (x >> (8 * i)) & 0xff;
            h *= FNV64_PRIME;
        }
        x = h;
    }
    job->result = x;
}

static void offload_done(keel_request *req, int status, void *userdata)
{
    (void)req;
    struct offload_job *job = userdata;
    if (status == KEEL_OK) { /* else the client left: only release the job */
        char body[80];
        int n = snprintf(body, sizeof body, "fnv1a64 x %llu = %016llx\n",
                         (unsigned long long)job->rounds, (unsigned long long)job->result);
        keel_response_header_set(job->res, "Content-Type", "text/plain");
        keel_response_send_copy(job->res, body, (size_t)n);
    }
    free(job);
}

static int hello_offload(keel_request *req, keel_response *res, void *userdata)
{
    (void)userdata;
    struct offload_job *job = calloc(1, sizeof *job);
    if (!job)
        return KEEL_ERR_NOMEM;
    job->res = res;
    job->rounds = query_u64(req, "n", 2000000, 100000000);
    int rc = keel_offload(req, offload_work, offload_done, job);
    if (rc < 0)
        free(job);
    return rc;
}

/* ---- GET /stream ------------------------------------------------------------
 * A body of unknown length, written piece by piece: HTTP/1.1 frames it as
 * chunked. The next piece is written only once the previous one's free
 * callback says the peer took it, so a slow reader is never buffered for.
 * The free callback may run inside keel_response_write itself (when the
 * protocol copied the bytes, or at once on error), hence the trampoline
 * rather than plain recursion. */
struct stream {
    keel_response *res;
    unsigned next, total;
    int in_write; /* inside keel_response_write */
    int released; /* the piece being written was released during that call */
    char piece[48];
};

static void stream_step(struct stream *st);

static void stream_released(void *data, void *userdata)
{
    (void)data;
    struct stream *st = userdata;
    if (st->in_write)
        st->released = 1; /* stream_step carries on when the write returns */
    else
        stream_step(st);
}

static void stream_step(struct stream *st)
{
    for (;;) {
        if (st->next == st->total) {
            char count[16];
            snprintf(count, sizeof count, "%u", st->total);
            keel_response_trailer_add(st->res, "X-Stream-Chunks", count);
            keel_response_end(st->res);
            free(st);
            return;
        }
        st->next++;
        int n = snprintf(st->piece, sizeof st->piece, "chunk %u of %u\n", st->next, st->total);
        st->released = 0;
        st->in_write = 1;
        int rc = keel_response_write(st->res, st->piece, (size_t)n, stream_released, st);
        st->in_write = 0;
        if (rc < 0) { /* the client left (the piece was released already) */
            free(st);
            return;
        }
        if (!st->released)
            return; /* stream_released continues once the peer has it */
    }
}

static int hello_stream(keel_request *req, keel_response *res, void *userdata)
{
    (void)userdata;
    struct stream *st = calloc(1, sizeof *st);
    if (!st)
        return KEEL_ERR_NOMEM;
    st->res = res;
    st->total = (unsigned)query_u64(req, "n", 5, 100000);
    keel_response_header_set(res, "Content-Type", "text/plain");
    /* Announces the trailer field (RFC 9110 6.6.2). */
    keel_response_header_set(res, "Trailer", "X-Stream-Chunks");
    stream_step(st);
    return KEEL_OK;
}

/* ---- GET /headers ----------------------------------------------------------- */

static int hello_headers(keel_request *req, keel_response *res, void *userdata)
{
    (void)userdata;
    size_t count = keel_request_header_count(req), len = 0;
    keel_header hd;
    for (size_t i = 0; i < count; i++)
        if (keel_request_header_at(req, i, &hd) == KEEL_OK)
            len += hd.name.len + 2 + hd.value.len + 1;

    char *body = malloc(len ? len : 1);
    if (!body)
        return KEEL_ERR_NOMEM;
    char *p = body;
    for (size_t i = 0; i < count; i++) {
        if (keel_request_header_at(req, i, &hd) != KEEL_OK)
            continue;
        memcpy(p, hd.name.ptr, hd.name.len);
        p += hd.name.len;
        *p++ = ':';
        *p++ = ' ';
        if (hd.value.len) /* an empty value's ptr may be NULL */
            memcpy(p, hd.value.ptr, hd.value.len);
        p += hd.value.len;
        *p++ = '\n';
    }
    keel_response_header_set(res, "Content-Type", "text/plain");
    return keel_response_send(res, body, (size_t)(p - body), free_body, NULL);
}

/* ---- GET /ws -----------------------------------------------------------------
 * A WebSocket echo through the websocket module's service (keel/websocket.h):
 * hello lists "?websocket" among its dependencies, so the websocket module
 * loads first when the config names it, and hello works without it (no /ws
 * then). Each message is sent back as it came, text as text, binary as
 * binary; the bytes are copied, as they are valid during the call only. */
KEEL_WEBSOCKET_DEFINE

static void ws_echo(keel_ws *ws, int kind, const char *data, size_t len, void *userdata)
{
    (void)userdata;
    keel_ws_send_copy(ws, kind, data, len);
}

static const char *const ws_protocols[] = {"echo", NULL};

static const keel_ws_endpoint ws_endpoint = {
    .size = sizeof(keel_ws_endpoint),
    .path = "/ws",
    .subprotocols = ws_protocols,
    .on_message = ws_echo,
};

/* ---- Module ------------------------------------------------------------------ */

static int hello_load(keel_module *module)
{
    struct hello *h = calloc(1, sizeof *h);
    if (!h)
        return KEEL_ERR_NOMEM;
    h->module = module;
    h->slow_ms = ((const struct hello_conf *)keel_module_config(module))->slow_ms;

    int rc;
    static const char ct[] = "Content-Type", text[] = "text/plain";
    if ((rc = keel_field_prepare(module, ct, sizeof ct - 1, text, sizeof text - 1,
                                 &h->text_plain)) != KEEL_OK ||
        (rc = keel_route_add(module, "GET", "/", hello_root, h)) < 0 ||
        (rc = keel_route_add(module, "POST", "/echo", hello_echo, h)) < 0 ||
        (rc = keel_route_add(module, "GET", "/hello/:name", hello_name, h)) < 0 ||
        (rc = keel_route_add(module, "GET", "/slow", hello_slow, h)) < 0 ||
        (rc = keel_route_add(module, "GET", "/offload", hello_offload, h)) < 0 ||
        (rc = keel_route_add(module, "GET", "/stream", hello_stream, h)) < 0 ||
        (rc = keel_route_add(module, "GET", "/headers", hello_headers, h)) < 0 ||
        (keel_ws_bind(module) == KEEL_OK &&
         (rc = keel_ws_endpoint_add(module, &ws_endpoint)) < 0)) {
        free(h);
        return rc;
    }
    keel_module_set_data(module, h);
    return KEEL_OK;
}

static void hello_unload(keel_module *module)
{
    free(keel_module_data(module));
}

/* websocket is optional ("?"): loaded first when the config lists it. */
static const char *const hello_dependencies[] = {"?websocket", NULL};

KEEL_MODULE(hello, .version = "1.0.0", .dependencies = hello_dependencies, .load = hello_load,
            .unload = hello_unload, .config = &hello_schema);
