/* scoped — a module whose keys are declared for every scope
 * (keel/config.h): every GET answers with the values keel_request_config
 * gives it for the request's listener, site and path, one line:
 *     greeting=G level=N tags=a,b note=T
 * so that test_scopes.c can check which scope a request landed in and how
 * the scopes merged; with show_path on, " path=P query=Q" follows (what
 * the router saw, for test_rewrite.c). */
#include <keel/keel.h>

#include <stdio.h>
#include <string.h>

typedef struct scoped_conf {
    const char *greeting;
    int64_t level;
    keel_config_list tags;
    const char *note;
    int show_path;
} scoped_conf;

static const keel_config_key scoped_keys[] = {
    KEEL_KEY(scoped_conf, greeting, "greeting", KEEL_CONFIG_STRING, .scopes = KEEL_SCOPE_ANY,
             .def = "hello", .doc = "the first word of the answer"),
    KEEL_KEY(scoped_conf, level, "level", KEEL_CONFIG_INT,
             .scopes = KEEL_SCOPE_GLOBAL | KEEL_SCOPE_SITE | KEEL_SCOPE_PATH, .def = "0", .min = 0,
             .max = 9, .doc = "a number sites and paths may change"),
    KEEL_KEY(scoped_conf, tags, "tags", KEEL_CONFIG_STRING, .flags = KEEL_CONFIG_LIST,
             .scopes = KEEL_SCOPE_ANY, .doc = "a list an inner scope replaces"),
    KEEL_KEY(scoped_conf, note, "note", KEEL_CONFIG_STRING,
             .scopes = KEEL_SCOPE_GLOBAL | KEEL_SCOPE_LISTENER, .def = "-",
             .doc = "a connection-level key: global and listener only"),
    KEEL_KEY(scoped_conf, show_path, "show_path", KEEL_CONFIG_BOOL, .scopes = KEEL_SCOPE_ANY,
             .def = "off", .doc = "add the request's path and query to the answer"),
};
KEEL_CONFIG_SCHEMA(scoped_schema, scoped_conf, scoped_keys);

static int scoped_answer(keel_request *req, keel_response *res, void *ud)
{
    const scoped_conf *c = keel_request_config(req, (keel_module *)ud);
    char text[512];
    int n = snprintf(text, sizeof text, "greeting=%s level=%lld tags=", c->greeting,
                     (long long)c->level);
    for (size_t i = 0; i < c->tags.count && n > 0 && (size_t)n < sizeof text; i++)
        n += snprintf(text + n, sizeof text - (size_t)n, "%s%s", i ? "," : "", c->tags.items[i]);
    if (n > 0 && (size_t)n < sizeof text)
        n += snprintf(text + n, sizeof text - (size_t)n, " note=%s", c->note);
    if (c->show_path && n > 0 && (size_t)n < sizeof text) {
        keel_str path = keel_request_path(req), query = keel_request_query(req);
        n += snprintf(text + n, sizeof text - (size_t)n, " path=%.*s query=%.*s", (int)path.len,
                      path.ptr, (int)query.len, query.ptr ? query.ptr : "");
    }
    if (n > 0 && (size_t)n < sizeof text)
        n += snprintf(text + n, sizeof text - (size_t)n, "\n");
    if (n < 0 || (size_t)n >= sizeof text)
        return keel_response_send_status(res, 500);
    keel_response_header_set(res, "Content-Type", "text/plain");
    return keel_response_send_copy(res, text, (size_t)n);
}

static int scoped_load(keel_module *m)
{
    int rc = keel_route_add(m, "GET", "/", scoped_answer, m);
    return rc < 0 ? rc : keel_route_add(m, "GET", "/*", scoped_answer, m);
}

KEEL_MODULE(scoped, .version = "1.0.0", .load = scoped_load, .config = &scoped_schema);
