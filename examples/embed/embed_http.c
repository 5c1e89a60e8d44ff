/* An HTTP server in one file, in the spirit of Boost.Beast's small servers:
 * a table of routes, then one call to run. libkeel is linked in and the
 * http1 module is compiled into the program: no dlopen, no module path.
 *
 *     embed_http [ADDRESS:PORT] [WORKERS]      default 127.0.0.1:8080, 2
 *
 *     curl http://127.0.0.1:8080/                 -> Hello from an embedded keel!
 *     curl http://127.0.0.1:8080/users/42         -> user 42
 *     curl -d 'some text' http://127.0.0.1:8080/upper   -> SOME TEXT
 */
#include <stdio.h>
#include <string.h>

#include <keel/embed.h>

KEEL_MODULE_DECLARE(http1);

static int home(keel_request *req, keel_response *res, void *ud)
{
    (void)req;
    (void)ud;
    static const char body[] = "Hello from an embedded keel!\n";
    keel_response_header_set(res, "Content-Type", "text/plain");
    return keel_response_send(res, body, sizeof body - 1, NULL, NULL);
}

static int user(keel_request *req, keel_response *res, void *ud)
{
    (void)ud;
    keel_str id = keel_request_param(req, "id");
    char body[128];
    int n = snprintf(body, sizeof body, "user %.*s\n", (int)id.len, id.ptr);
    keel_response_header_set(res, "Content-Type", "text/plain");
    return keel_response_send_copy(res, body, (size_t)n);
}

static void upper_body(keel_request *req, int status, void *ud)
{
    keel_response *res = ud;
    if (status != KEEL_OK)
        return; /* 413 or the client left: the core has answered / ended it */
    keel_str body = keel_request_body(req);
    char out[4096];
    size_t n = body.len < sizeof out ? body.len : sizeof out;
    for (size_t i = 0; i < n; i++) {
        char c = body.ptr[i];
        out[i] = (c >= 'a' && c <= 'z') ? (char)(c - 'a' + 'A') : c;
    }
    keel_response_header_set(res, "Content-Type", "text/plain");
    keel_response_send_copy(res, out, n);
}

static int upper(keel_request *req, keel_response *res, void *ud)
{
    (void)ud;
    return keel_request_read_body(req, 4096, upper_body, res);
}

/* The routes: method, path pattern, handler. */
static const struct route {
    const char *method, *path;
    keel_http_handler handler;
} routes[] = {
    {"GET", "/", home},
    {"GET", "/users/:id", user},
    {"POST", "/upper", upper},
};

static int app_load(keel_module *module)
{
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        int rc = keel_route_add(module, routes[i].method, routes[i].path, routes[i].handler, NULL);
        if (rc != KEEL_OK)
            return rc;
    }
    return KEEL_OK;
}

KEEL_MODULE(app, .version = "1.0.0", .load = app_load);

int main(int argc, char **argv)
{
    char listen[256], workers[64];
    snprintf(listen, sizeof listen, "keel.listen=%s http1", argc > 1 ? argv[1] : "127.0.0.1:8080");
    snprintf(workers, sizeof workers, "keel.workers=%s", argc > 2 ? argv[2] : "2");

    keel_server *server = keel_server_new();
    if (server == NULL)
        return 1;
    int rc = keel_server_add_module(server, &keel_module_http1);
    if (rc == KEEL_OK)
        rc = keel_server_add_module(server, &keel_module_app);
    if (rc == KEEL_OK)
        rc = keel_server_set(server, listen);
    if (rc == KEEL_OK)
        rc = keel_server_set(server, workers);
    if (rc == KEEL_OK)
        rc = keel_server_run(server); /* until SIGINT/SIGTERM */
    keel_server_free(server);
    return rc == KEEL_OK ? 0 : 1;
}
