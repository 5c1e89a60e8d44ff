/* authors — what module authors asked for in ABI 1.3, exercised through the
 * real binary (test_authors.c):
 *
 *   [authors]
 *   mode = fast | safe       anything else: keel_config_error names the
 *                            key's FILE:LINE
 *   require_port = on        then `port` must be given: when it is absent
 *                            keel_config_error names the section's line
 *   file = NAME              logged as "file resolves to PATH" through
 *                            keel_config_path (ABI 1.4)
 *   clash = WHAT             load makes one registration the host must
 *                            refuse, naming the cause: protocol (http1's
 *                            name), size (a protocol with .size 0), route
 *                            (trailers' POST /trailers/read), param
 *                            (upgrade's /upgrade/:protocol as :other),
 *                            metric (a label named "worker")
 *
 * In load it logs "load sees N workers" (keel_module_worker_count), and
 * start fails on a worker whose keel_worker_count disagrees. It registers
 * the protocol "authors", which answers "strerror: TEXT" with
 * keel_strerror(KEEL_ERR_CLOSED) to any line. Its ABI 1.8 hooks log
 * "stopping on worker N (keel_worker_stopping's value)" and "reopen". */
#include <keel/keel.h>

#include <stdio.h>
#include <string.h>

static unsigned load_workers;

static int authors_data(keel_conn *conn, const char *data, size_t len, size_t *consumed)
{
    const char *nl = memchr(data, '\n', len);
    if (nl == NULL) {
        *consumed = 0;
        return KEEL_OK;
    }
    *consumed = (size_t)(nl - data) + 1;
    char line[128];
    int n = snprintf(line, sizeof line, "strerror: %s\n", keel_strerror(KEEL_ERR_CLOSED));
    if (n < 0)
        return KEEL_ERR_INVAL;
    return keel_conn_write_copy(conn, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

static const keel_protocol authors_protocol = {
    .size = sizeof(keel_protocol),
    .name = "authors",
    .on_data = authors_data,
};

static int noop_route(keel_request *req, keel_response *res, void *userdata)
{
    (void)req, (void)userdata;
    return keel_response_send_copy(res, "", 0);
}

/* One registration the host refuses; its status fails load. */
static int clash(keel_module *module, const char *what)
{
    static const keel_protocol taken = {.size = sizeof(keel_protocol), .name = "http1"};
    static const keel_protocol sizeless = {.size = 0, .name = "sizeless"};
    static const keel_metric_desc metric = {.size = sizeof(keel_metric_desc),
                                            .name = "authors_total",
                                            .type = KEEL_METRIC_COUNTER,
                                            .labels = "worker=\"1\""};
    keel_metric *out;
    if (strcmp(what, "protocol") == 0)
        return keel_protocol_register(module, &taken);
    if (strcmp(what, "size") == 0)
        return keel_protocol_register(module, &sizeless);
    if (strcmp(what, "route") == 0)
        return keel_route_add(module, "POST", "/trailers/read", noop_route, NULL);
    if (strcmp(what, "param") == 0)
        return keel_route_add(module, "GET", "/upgrade/:other", noop_route, NULL);
    if (strcmp(what, "metric") == 0)
        return keel_metric_register(module, &metric, &out);
    return keel_config_error(module, "clash", "unknown: %s", what);
}

static int authors_load(keel_module *module)
{
    const char *mode;
    int rc = keel_config_string(module, "mode", "fast", &mode);
    if (rc != KEEL_OK)
        return rc;
    if (strcmp(mode, "fast") != 0 && strcmp(mode, "safe") != 0)
        return keel_config_error(module, "mode", "expected fast or safe, got '%s'", mode);

    int require_port;
    int64_t port;
    if ((rc = keel_config_bool(module, "require_port", 0, &require_port)) != KEEL_OK ||
        (rc = keel_config_int(module, "port", 0, 0, 65535, &port)) != KEEL_OK)
        return rc;
    if (require_port && port == 0)
        return keel_config_error(module, "port", "required when require_port is on");

    if (keel_config_count(module, "file") > 0) {
        const char *file;
        char path[1024];
        if ((rc = keel_config_string(module, "file", "", &file)) != KEEL_OK ||
            (rc = keel_config_path(module, "file", 0, file, path, sizeof path)) != KEEL_OK)
            return rc;
        keel_log(module, KEEL_LOG_INFO, "file resolves to %s", path);
        char tiny[4];
        if (keel_config_path(module, "file", 0, file, tiny, sizeof tiny) != KEEL_ERR_INVAL ||
            keel_config_path(module, "file", 1, file, path, sizeof path) != KEEL_ERR_NOTFOUND)
            return keel_config_error(module, "file", "keel_config_path's errors are wrong");
    }

    if (keel_config_count(module, "clash") > 0) {
        const char *what;
        if ((rc = keel_config_string(module, "clash", "", &what)) != KEEL_OK ||
            (rc = clash(module, what)) != KEEL_OK)
            return rc;
    }

    load_workers = keel_module_worker_count(module);
    keel_log(module, KEEL_LOG_INFO, "load sees %u workers", load_workers);
    return keel_protocol_register(module, &authors_protocol);
}

static int authors_start(keel_module *module, keel_worker *worker, void *state)
{
    (void)state;
    if (keel_worker_count(worker) != load_workers) {
        keel_log(module, KEEL_LOG_ERROR, "load saw %u workers, worker %u sees %u", load_workers,
                 keel_worker_id(worker), keel_worker_count(worker));
        return KEEL_ERR_STATE;
    }
    return KEEL_OK;
}

static void authors_stopping(keel_module *module, keel_worker *worker, void *state)
{
    (void)state;
    keel_log(module, KEEL_LOG_INFO, "stopping on worker %u (%d)", keel_worker_id(worker),
             keel_worker_stopping(worker));
}

static void authors_reopen(keel_module *module)
{
    keel_log(module, KEEL_LOG_INFO, "reopen");
}

KEEL_MODULE(authors, .version = "1.0.0", .load = authors_load, .start = authors_start,
            .stopping = authors_stopping, .reopen = authors_reopen);
