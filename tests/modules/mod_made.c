/* made — keel_field_make and keel_field_free (ABI 1.12) for
 * test_made_fields.c: fields made at run time, on the worker, from what
 * the request says, added by pointer and freed in the log phase.
 *
 * GET /PATH answers "made\n" with X-Made: by-name set by name first, then
 * X-Made: PATH and X-Second: two made now and added with one
 * keel_response_fields_add replacing (so one X-Made is left, the made
 * one); GET /single/PATH adds X-Made: PATH alone with
 * keel_response_field_add, without replacing (both stay). The fields
 * live until a function on_log posts frees them: the access log, loaded
 * after this module, reads them in its own on_log, which runs later. Each request first checks the
 * refusals (a name that is not a token, a value with CR LF, NUL, a
 * framing field, Date, a NULL out): X-Refusal-Error: WHAT says one was not
 * refused or left *out set.
 *
 * Built for ABI 1.12 (KEEL_TARGET_ABI_MINOR): the module every 1.12 host
 * loads, which test_made_fields.c checks newer hosts still load. */
#define KEEL_TARGET_ABI_MINOR 12
#include <keel/keel.h>

#include <stdlib.h>
#include <string.h>

typedef struct made_fields {
    const keel_prepared_field *f[2];
} made_fields;

static keel_module *self;

static const char *refusal_error(void)
{
    static const struct {
        const char *name, *value;
        size_t value_len;
    } bad[] = {
        {"Bad Name", "v", 1}, {"X-Split", "a\r\nInjected: 1", 15},
        {"X-Nul", "a\0b", 3}, {"Content-Length", "5", 1},
        {"Date", "today", 5}, {"", "v", 1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const keel_prepared_field *f = (const keel_prepared_field *)&bad[i];
        if (keel_field_make(bad[i].name, strlen(bad[i].name), bad[i].value, bad[i].value_len, &f) !=
            KEEL_ERR_INVAL)
            return bad[i].name[0] ? bad[i].name : "an empty name";
        if (f != NULL)
            return "*out left set";
    }
    if (keel_field_make("X-A", 3, "v", 1, NULL) != KEEL_ERR_INVAL)
        return "a NULL out";
    return NULL;
}

static int answer(keel_request *req, keel_response *res, void *ud)
{
    (void)ud;
    const char *error = refusal_error();
    if (error != NULL)
        keel_response_header_set(res, "X-Refusal-Error", error);
    keel_response_header_set(res, "Content-Type", "text/plain");
    keel_response_header_set(res, "X-Made", "by-name");
    keel_str path = keel_request_path(req);
    int single = path.len >= 8 && memcmp(path.ptr, "/single/", 8) == 0;
    made_fields *m = calloc(1, sizeof *m);
    if (m == NULL)
        return keel_response_send_status(res, 500);
    keel_request_set_data(req, self, m);
    if (keel_field_make("X-Made", 6, path.ptr, path.len, &m->f[0]) != KEEL_OK)
        return keel_response_send_status(res, 500);
    if (single) {
        if (keel_response_field_add(res, m->f[0], 0) != KEEL_OK)
            return keel_response_send_status(res, 500);
    } else {
        if (keel_field_make("X-Second", 8, "two", 3, &m->f[1]) != KEEL_OK ||
            keel_response_fields_add(res, m->f, 2, 1) != KEEL_OK)
            return keel_response_send_status(res, 500);
    }
    return keel_response_send_copy(res, "made\n", 5);
}

static void free_posted(keel_worker *worker, void *data)
{
    (void)worker;
    made_fields *m = data;
    keel_field_free(m->f[0]);
    keel_field_free(m->f[1]);
    free(m);
}

/* The response is over, but the log hooks after this one (the access
 * log's: `modules` names it later) still read its fields: freed from a
 * posted function, which runs after them. */
static void free_on_log(keel_request *req, keel_response *res, const keel_http_log_info *info,
                        void *ud)
{
    (void)res;
    (void)info;
    (void)ud;
    made_fields *m = keel_request_data(req, self);
    if (m == NULL)
        return;
    keel_request_set_data(req, self, NULL);
    if (keel_worker_post(keel_request_worker(req), free_posted, m) != KEEL_OK)
        free_posted(NULL, m); /* out of memory: freed now */
}

static const keel_http_filter log_filter = {
    .size = sizeof(keel_http_filter),
    .name = "made",
    .on_log = free_on_log,
};

static int made_load(keel_module *m)
{
    self = m;
    int rc = keel_http_filter_add(m, &log_filter);
    return rc < 0 ? rc : keel_route_add(m, "GET", "/*", answer, NULL);
}

KEEL_MODULE(made, .version = "1.0.0", .load = made_load);
