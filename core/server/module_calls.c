/* Module API calls that reach a layer below the server through the
 * module's server, which those layers do not see: routes and filters
 * (core/http), whether a protocol is registered (core/net). The rest of
 * the module API is in module_api.c. */
#include "base/log.h"
#include "http/http.h"
#include "server/server.h"

/* ---- registration (main thread, during load) ---------------------------- */

static int loading(keel_module *m, const char *what)
{
    if (m->server->loading)
        return KEEL_OK;
    kl_log(KEEL_LOG_ERROR, "module '%s': %s outside load()", m->name, what);
    return KEEL_ERR_STATE;
}

int keel_route_add(keel_module *m, const char *method, const char *pattern,
                   keel_http_handler handler, void *userdata)
{
    int rc = loading(m, "adds a route");
    if (rc != KEEL_OK)
        return rc;
    keel_module *owner = NULL;
    rc = kl_http_route_add(m->server->http, m, method, pattern, handler, userdata, &owner);
    if (rc == KEEL_ERR_EXISTS)
        kl_log(KEEL_LOG_ERROR,
               "module '%s': route %s %s clashes with a route of module '%s' (the same method "
               "and path, or a :param named differently at the same place)",
               m->name, method ? method : "?", pattern ? pattern : "?",
               owner != NULL ? owner->name : "?");
    else if (rc == KEEL_ERR_INVAL)
        kl_log(KEEL_LOG_ERROR, "module '%s': invalid route %s %s", m->name, method ? method : "?",
               pattern ? pattern : "?");
    return rc;
}

int keel_http_filter_add(keel_module *m, const keel_http_filter *f)
{
    int rc = loading(m, "adds an HTTP filter");
    return rc != KEEL_OK ? rc : kl_http_filter_add(m->server->http, m, f);
}

int keel_http_error_handler_set(keel_module *m, keel_http_error_fn fn, void *userdata)
{
    int rc = loading(m, "sets the error-page handler");
    if (rc != KEEL_OK)
        return rc;
    kl_http *http = m->server->http;
    if (fn == NULL)
        return KEEL_ERR_INVAL;
    if (http->error_fn != NULL) {
        kl_log(KEEL_LOG_ERROR, "module '%s': module '%s' already answers the error pages", m->name,
               http->error_owner->name);
        return KEEL_ERR_EXISTS;
    }
    http->error_fn = fn;
    http->error_ud = userdata;
    http->error_owner = m;
    return KEEL_OK;
}

/* ---- lookups ------------------------------------------------------------- */

int keel_protocol_available(keel_module *m, const char *name)
{
    return name != NULL && kl_registry_protocol(&m->server->registry, name) != NULL;
}
