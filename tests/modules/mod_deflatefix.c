/* deflatefix — the responses test_deflate*.c compress, or must not.
 *
 *   GET /fix/body?len=N[&type=T][&status=S][&etag=E][&vary=V][&ce=C][&cc=X][&cl=1]
 *       N bytes of text (the same for the same N) with those fields;
 *       cl=1 declares the Content-Length as a field as well
 *   GET /fix/tick?n=N&ms=M
 *       N lines streamed, one every M ms from a timer: a stream whose end
 *       is far behind its start
 *   GET /fix/pump?n=N&size=S
 *       N pieces of S pseudo-random bytes (text/plain, so compressed, and
 *       incompressible), each written once the previous one was released:
 *       a streamer paced by its peer, as hello's /stream, in bulk
 *   GET /fix/file?path=P
 *       the file P with keel_response_send_file (text/plain)
 *   GET /fix/service
 *       the deflate service seen from another module: gzip through it,
 *       gunzip back, report what an idle stream holds
 */
#include <keel/keel.h>
#include <keel/deflate.h>

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

KEEL_DEFLATE_DEFINE

struct fix {
    keel_module *module;
    keel_http_filter filter;
};

static void free_body(void *data, void *userdata)
{
    (void)userdata;
    free(data);
}

/* Query parameters as C strings, in the caller's slots, or NULL. */
typedef char params[8][512];

static const char *param(keel_request *req, const char *name, params p, int slot)
{
    keel_str v;
    if (keel_request_query_param(req, name, &v) != KEEL_OK || v.len >= sizeof p[0])
        return NULL;
    memcpy(p[slot], v.ptr, v.len);
    p[slot][v.len] = '\0';
    return p[slot];
}

/* The text both the server and the tests can make: numbered lines. */
static void fill_text(char *b, size_t n)
{
    size_t at = 0;
    for (unsigned line = 0; at < n; line++) {
        char tmp[64];
        int k =
            snprintf(tmp, sizeof tmp, "line %u: the quick brown fox jumps over the dog\n", line);
        for (int i = 0; i < k && at < n; i++)
            b[at++] = tmp[i];
    }
}

static int fix_body(keel_request *req, keel_response *res, void *userdata)
{
    (void)userdata;
    params q;
    const char *len_s = param(req, "len", q, 0);
    size_t n = len_s ? strtoul(len_s, NULL, 10) : 1000;
    if (n > (64u << 20))
        return keel_response_send_status(res, 400);
    const char *type = param(req, "type", q, 1), *status = param(req, "status", q, 2);
    const char *etag = param(req, "etag", q, 3), *vary = param(req, "vary", q, 4);
    const char *ce = param(req, "ce", q, 5), *cc = param(req, "cc", q, 6),
               *cl = param(req, "cl", q, 7);
    keel_response_header_set(res, "Content-Type", type ? type : "text/html; charset=utf-8");
    if (status)
        keel_response_set_status(res, atoi(status));
    if (etag)
        keel_response_header_set(res, "ETag", etag);
    if (vary)
        keel_response_header_set(res, "Vary", vary);
    if (ce)
        keel_response_header_set(res, "Content-Encoding", ce);
    if (cc)
        keel_response_header_set(res, "Cache-Control", cc);
    keel_response_header_set(res, "Accept-Ranges", "bytes");
    if (cl && strcmp(cl, "1") == 0) {
        char v[32];
        snprintf(v, sizeof v, "%zu", n);
        keel_response_header_set(res, "Content-Length", v);
    }
    char *body = malloc(n ? n : 1);
    if (body == NULL)
        return KEEL_ERR_NOMEM;
    fill_text(body, n);
    return keel_response_send(res, body, n, free_body, NULL);
}

/* ---- /fix/pump: a stream paced by its pieces' release ----------------------- */

struct pump {
    keel_response *res;
    unsigned next, total;
    size_t size;
    uint64_t seed;
    int in_write, released;
    char piece[];
};

static void pump_step(struct pump *pm);

static void pump_released(void *data, void *userdata)
{
    (void)data;
    struct pump *pm = userdata;
    if (pm->in_write)
        pm->released = 1;
    else
        pump_step(pm);
}

static void pump_step(struct pump *pm)
{
    for (;;) {
        if (pm->next == pm->total) {
            keel_response_end(pm->res);
            free(pm);
            return;
        }
        pm->next++;
        for (size_t i = 0; i < pm->size; i++) { /* xorshift64: incompressible */
            pm->seed ^= pm->seed << 13;
            pm->seed ^= pm->seed >> 7;
            pm->seed ^= pm->seed << 17;
            pm->piece[i] = (char)(pm->seed >> 24);
        }
        pm->released = 0;
        pm->in_write = 1;
        int rc = keel_response_write(pm->res, pm->piece, pm->size, pump_released, pm);
        pm->in_write = 0;
        if (rc < 0) {
            free(pm);
            return;
        }
        if (!pm->released)
            return;
    }
}

static int fix_pump(keel_request *req, keel_response *res, void *userdata)
{
    (void)userdata;
    params q;
    const char *n = param(req, "n", q, 0), *size = param(req, "size", q, 1);
    size_t s = size ? (size_t)atoi(size) : 4096;
    if (s == 0 || s > 65536)
        return keel_response_send_status(res, 400);
    struct pump *pm = calloc(1, sizeof *pm + s);
    if (pm == NULL)
        return KEEL_ERR_NOMEM;
    pm->res = res;
    pm->total = n ? (unsigned)atoi(n) : 10;
    pm->size = s;
    pm->seed = 0x9e3779b97f4a7c15u;
    keel_response_header_set(res, "Content-Type", "text/plain");
    pump_step(pm);
    return KEEL_OK;
}

/* ---- /fix/tick: a stream paced by a timer ----------------------------------- */

struct tick {
    struct fix *fix;
    keel_request *req;
    keel_response *res;
    keel_timer *timer;
    unsigned next, total;
    int in_call; /* inside keel_response_write or _end, where the log phase may run */
    int log_ran; /* it did, meanwhile: tick_fire frees */
    int done;    /* the timer is stopped and the response over: on_log frees */
};

/* Ends or writes with the log phase possibly running inside the call;
 * returns 1 if t was freed. */
static int tick_call(struct tick *t, const char *line, size_t len)
{
    t->in_call = 1;
    int rc =
        line ? keel_response_write(t->res, line, len, free_body, NULL) : keel_response_end(t->res);
    t->in_call = 0;
    if (line == NULL || rc < 0) {
        if (!t->done)
            keel_timer_stop(t->timer);
        t->done = 1;
        if (t->log_ran) {
            free(t);
            return 1;
        }
    }
    return 0;
}

static void tick_fire(keel_timer *timer, void *userdata)
{
    struct tick *t = userdata;
    (void)timer;
    if (t->next == t->total) {
        keel_timer_stop(t->timer);
        t->done = 1;
        tick_call(t, NULL, 0);
        return;
    }
    t->next++;
    char *line = malloc(64);
    if (line == NULL)
        return;
    int k = snprintf(line, 64, "tick %u of %u\n", t->next, t->total);
    tick_call(t, line, (size_t)k);
}

static int fix_tick(keel_request *req, keel_response *res, void *userdata)
{
    struct fix *f = userdata;
    struct tick *t = calloc(1, sizeof *t);
    if (t == NULL)
        return KEEL_ERR_NOMEM;
    params q;
    const char *n = param(req, "n", q, 0), *ms = param(req, "ms", q, 1);
    t->fix = f;
    t->req = req;
    t->res = res;
    t->total = n ? (unsigned)atoi(n) : 5;
    keel_response_header_set(res, "Content-Type", "text/event-stream");
    t->timer = keel_timer_start(keel_request_worker(req), ms ? (uint64_t)atoi(ms) : 50,
                                ms ? (uint64_t)atoi(ms) : 50, tick_fire, t);
    if (t->timer == NULL) {
        free(t);
        return KEEL_ERR_NOMEM;
    }
    keel_request_set_data(req, f->module, t);
    return KEEL_OK;
}

/* Frees a stream's state once its exchange is over; if the client left
 * before the end, stops the timer and ends the response first. */
static void fix_log(keel_request *req, keel_response *res, const keel_http_log_info *info,
                    void *userdata)
{
    (void)info;
    struct fix *f = userdata;
    struct tick *t = keel_request_data(req, f->module);
    if (t == NULL)
        return;
    keel_request_set_data(req, f->module, NULL);
    if (t->in_call) {
        t->log_ran = 1;
        return;
    }
    if (!t->done) {
        keel_timer_stop(t->timer);
        keel_response_end(res);
    }
    free(t);
}

/* ---- /fix/file ----------------------------------------------------------------- */

static int fix_file(keel_request *req, keel_response *res, void *userdata)
{
    (void)userdata;
    params q;
    const char *path = param(req, "path", q, 0);
    int fd = path ? open(path, O_RDONLY | O_BINARY) : -1;
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        if (fd >= 0)
            close(fd);
        return keel_response_send_status(res, 404);
    }
    keel_response_header_set(res, "Content-Type", "text/plain");
    return keel_response_send_file(res, fd, 0, (uint64_t)st.st_size, 1);
}

/* ---- /fix/service ----------------------------------------------------------------- */

struct grow {
    char *data;
    size_t len;
};

static int grow_out(void *userdata, const void *data, size_t len)
{
    struct grow *g = userdata;
    char *p = realloc(g->data, g->len + len);
    if (p == NULL)
        return KEEL_ERR_NOMEM;
    memcpy(p + g->len, data, len);
    g->data = p;
    g->len += len;
    return KEEL_OK;
}

static int fix_service(keel_request *req, keel_response *res, void *userdata)
{
    (void)req;
    (void)userdata;
    if (!keel_deflate_available())
        return keel_response_send_status(res, 501);
    size_t n = 100000;
    char *text = malloc(n);
    if (text == NULL)
        return KEEL_ERR_NOMEM;
    fill_text(text, n);
    keel_deflate_params p = {.size = sizeof p, .format = KEEL_DEFLATE_GZIP};
    keel_deflate *c = keel_deflate_compressor_new(&p);
    keel_deflate *d = keel_deflate_decompressor_new(&p);
    struct grow z = {0}, back = {0};
    int ok = c && d &&
             keel_deflate_compress(c, text, n, KEEL_DEFLATE_FINISH, grow_out, &z) == KEEL_OK &&
             keel_deflate_decompress(d, z.data, z.len, n, grow_out, &back) == KEEL_OK &&
             back.len == n && memcmp(back.data, text, n) == 0;
    size_t live = c ? keel_deflate_memory(c) : 0;
    keel_deflate_release(c);
    size_t idle = c ? keel_deflate_memory(c) : 0;
    keel_deflate_free(c);
    keel_deflate_free(d);
    free(back.data);
    free(text);
    char h[64];
    snprintf(h, sizeof h, "%s live=%zu idle=%zu", ok ? "ok" : "failed", live, idle);
    keel_response_header_set(res, "X-Service", h);
    keel_response_header_set(res, "Content-Type", "application/gzip");
    return keel_response_send(res, z.data, z.len, free_body, NULL);
}

static int fix_load(keel_module *module)
{
    struct fix *f = calloc(1, sizeof *f);
    if (f == NULL)
        return KEEL_ERR_NOMEM;
    f->module = module;
    f->filter = (keel_http_filter){
        .size = sizeof(keel_http_filter), .name = "deflatefix", .userdata = f, .on_log = fix_log};
    keel_deflate_bind(module); /* optional: /fix/service answers 501 without it */
    int rc;
    if ((rc = keel_route_add(module, "GET", "/fix/body", fix_body, f)) < 0 ||
        (rc = keel_route_add(module, "GET", "/fix/tick", fix_tick, f)) < 0 ||
        (rc = keel_route_add(module, "GET", "/fix/pump", fix_pump, f)) < 0 ||
        (rc = keel_route_add(module, "GET", "/fix/file", fix_file, f)) < 0 ||
        (rc = keel_route_add(module, "GET", "/fix/service", fix_service, f)) < 0 ||
        (rc = keel_http_filter_add(module, &f->filter)) < 0) {
        free(f);
        return rc;
    }
    keel_module_set_data(module, f);
    return KEEL_OK;
}

static void fix_unload(keel_module *module)
{
    free(keel_module_data(module));
}

static const char *const fix_deps[] = {"?deflate", NULL};

KEEL_MODULE(deflatefix, .version = "1.0.0", .dependencies = fix_deps, .load = fix_load,
            .unload = fix_unload);
