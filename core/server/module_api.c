/* The module-facing API: identity, configuration getters, registries,
 * services and logging. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/util.h"
#include "runtime/config_values.h"
#include "server/server.h"

const char *keel_module_name(keel_module *m)
{
    return m->name;
}

void keel_module_set_data(keel_module *m, void *data)
{
    m->data = data;
}

void *keel_module_data(keel_module *m)
{
    return m->data;
}

/* ---- configuration ----------------------------------------------------- */

const void *keel_module_config(keel_module *m)
{
    return m->config.conf;
}

int keel_module_config_scopes(keel_module *m, keel_config_scope_fn fn, void *userdata)
{
    if (fn == NULL || m->desc.config == NULL)
        return KEEL_ERR_INVAL;
    if (!m->server->loading)
        return KEEL_ERR_STATE;
    m->scope_fn = fn;
    m->scope_ud = userdata;
    return KEEL_OK;
}

int keel_field_prepare(keel_module *m, const char *name, size_t name_len, const char *value,
                       size_t value_len, const keel_prepared_field **out)
{
    if (out != NULL)
        *out = NULL;
    if (m == NULL || out == NULL)
        return KEEL_ERR_INVAL;
    if (!m->server->loading)
        return KEEL_ERR_STATE;
    keel_prepared_field *f;
    int rc = kl_prepared_field_new(name, name_len, value, value_len, &f);
    if (rc != KEEL_OK)
        return rc;
    f->next = m->prepared;
    m->prepared = f;
    *out = f;
    return KEEL_OK;
}

int keel_log_name_prepare(keel_module *m, const char *name, const keel_log_name **out)
{
    if (out != NULL)
        *out = NULL;
    if (m == NULL || out == NULL)
        return KEEL_ERR_INVAL;
    if (!m->server->loading)
        return KEEL_ERR_STATE;
    keel_log_name *n;
    int rc = kl_log_name_new(name, &n);
    if (rc != KEEL_OK)
        return rc;
    n->next = m->log_names;
    m->log_names = n;
    *out = n;
    return KEEL_OK;
}

int keel_config_value_error(keel_module *m, const char *value, const char *message)
{
    char name[256], where[300];
    kl_config_section *sec = NULL;
    const kl_config_value *v = m->desc.config == NULL || value == NULL
                                   ? NULL
                                   : kl_schema_find_value(m->desc.config, m->server->config,
                                                          m->name, value, &sec, name, sizeof name);
    if (v != NULL)
        kl_log(KEEL_LOG_ERROR, "%s: [%s] %s: %s", kl_config_where(v, where, sizeof where),
               kl_config_section_name(sec), name, message ? message : "");
    else
        kl_log(KEEL_LOG_ERROR, "[%s] %s", m->name, message ? message : "");
    return KEEL_ERR_CONFIG;
}

/* path resolved beside the file holding v, into buf. */
static int resolve_into(keel_module *m, const kl_config_value *v, const char *path, char *buf,
                        size_t size)
{
    char *resolved = kl_config_resolve(m->server->config, v, path);
    if (resolved == NULL)
        return KEEL_ERR_NOMEM;
    int n = snprintf(buf, size, "%s", resolved);
    free(resolved);
    return n >= 0 && (size_t)n < size ? KEEL_OK : KEEL_ERR_INVAL;
}

int keel_config_value_path(keel_module *m, const char *value, const char *path, char *buf,
                           size_t size)
{
    if (buf == NULL || size == 0 || path == NULL)
        return KEEL_ERR_INVAL;
    char name[256];
    kl_config_section *sec = NULL;
    const kl_config_value *v = m->desc.config == NULL || value == NULL
                                   ? NULL
                                   : kl_schema_find_value(m->desc.config, m->server->config,
                                                          m->name, value, &sec, name, sizeof name);
    if (v == NULL) {
        int n = snprintf(buf, size, "%s", path);
        return n >= 0 && (size_t)n < size ? KEEL_ERR_NOTFOUND : KEEL_ERR_INVAL;
    }
    return resolve_into(m, v, path, buf, size);
}

/* The single value of a key, or NULL; duplicates are reported. */
static int single_value(keel_module *m, const char *key, const kl_config_value **v)
{
    char err[512];
    *v = NULL;
    if (m->section == NULL)
        return KEEL_OK;
    int rc = kl_config_get_single(m->section, key, v, err, sizeof err);
    if (rc != KEEL_OK)
        kl_log(KEEL_LOG_ERROR, "%s", err);
    return rc;
}

static int bad_value(keel_module *m, const kl_config_value *v, const char *key, const char *why)
{
    char where[300];
    kl_log(KEEL_LOG_ERROR, "%s: [%s] %s: %s", kl_config_where(v, where, sizeof where), m->name, key,
           why);
    return KEEL_ERR_CONFIG;
}

int keel_config_string(keel_module *m, const char *key, const char *def, const char **out)
{
    const kl_config_value *v;
    *out = def;
    int rc = single_value(m, key, &v);
    if (rc == KEEL_OK && v != NULL)
        *out = v->text;
    return rc;
}

int keel_config_int(keel_module *m, const char *key, int64_t def, int64_t min, int64_t max,
                    int64_t *out)
{
    const kl_config_value *v;
    char why[128];
    *out = def;
    int rc = single_value(m, key, &v);
    if (rc != KEEL_OK || v == NULL)
        return rc;
    int64_t value;
    if (kl_parse_int(v->text, min, max, &value, why, sizeof why) != KEEL_OK)
        return bad_value(m, v, key, why);
    *out = value;
    return KEEL_OK;
}

int keel_config_bool(keel_module *m, const char *key, int def, int *out)
{
    const kl_config_value *v;
    char why[128];
    *out = def ? 1 : 0;
    int rc = single_value(m, key, &v);
    if (rc != KEEL_OK || v == NULL)
        return rc;
    int value;
    if (kl_parse_bool(v->text, &value, why, sizeof why) != KEEL_OK)
        return bad_value(m, v, key, why);
    *out = value;
    return KEEL_OK;
}

/* A single unsigned value read by `parse` (sizes, durations). */
static int config_u64(keel_module *m, const char *key, uint64_t def, uint64_t *out,
                      int (*parse)(const char *, uint64_t *, char *, size_t))
{
    const kl_config_value *v;
    char why[128];
    *out = def;
    int rc = single_value(m, key, &v);
    if (rc != KEEL_OK || v == NULL)
        return rc;
    uint64_t value;
    if (parse(v->text, &value, why, sizeof why) != KEEL_OK)
        return bad_value(m, v, key, why);
    *out = value;
    return KEEL_OK;
}

int keel_config_size(keel_module *m, const char *key, uint64_t def, uint64_t *out)
{
    return config_u64(m, key, def, out, kl_parse_size);
}

int keel_config_duration_ms(keel_module *m, const char *key, uint64_t def, uint64_t *out)
{
    return config_u64(m, key, def, out, kl_parse_duration_ms);
}

size_t keel_config_count(keel_module *m, const char *key)
{
    return kl_config_count(m->section, key);
}

int keel_config_string_at(keel_module *m, const char *key, size_t index, const char **out)
{
    const kl_config_value *v = kl_config_get(m->section, key, index);
    *out = v ? v->text : NULL;
    return v ? KEEL_OK : KEEL_ERR_NOTFOUND;
}

int keel_config_path(keel_module *m, const char *key, size_t index, const char *path, char *buf,
                     size_t size)
{
    const kl_config_value *v = m->section ? kl_config_get(m->section, key, index) : NULL;
    if (v == NULL || path == NULL)
        return KEEL_ERR_NOTFOUND;
    return resolve_into(m, v, path, buf, size);
}

int keel_config_errorv(keel_module *m, const char *key, const char *fmt, va_list ap)
{
    char why[512], where[300];
    vsnprintf(why, sizeof why, fmt, ap);
    size_t n = kl_config_count(m->section, key);
    const kl_config_value *v = n > 0 ? kl_config_get(m->section, key, n - 1) : NULL;
    if (v != NULL)
        kl_log(KEEL_LOG_ERROR, "%s: [%s] %s: %s", kl_config_where(v, where, sizeof where), m->name,
               key, why);
    else if (m->section != NULL)
        kl_log(KEEL_LOG_ERROR, "%s: [%s] %s: %s",
               kl_config_section_where(m->section, where, sizeof where), m->name, key, why);
    else
        kl_log(KEEL_LOG_ERROR, "[%s] %s: %s", m->name, key, why);
    return KEEL_ERR_CONFIG;
}

int keel_config_error(keel_module *m, const char *key, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = keel_config_errorv(m, key, fmt, ap);
    va_end(ap);
    return rc;
}

unsigned keel_module_worker_count(keel_module *m)
{
    return (unsigned)m->server->nworkers;
}

/* ---- registries and services ------------------------------------------- */

static int registering(keel_module *m, const char *what, const char *name)
{
    if (m->server->loading)
        return KEEL_OK;
    kl_log(KEEL_LOG_ERROR, "module '%s': %s '%s' outside load()", m->name, what,
           name ? name : "(null)");
    return KEEL_ERR_STATE;
}

/* Says why the registry refused a protocol, transport or service: the
 * module that has the name already, or which rule the struct broke (the
 * registry checks them in this order). `size` is the struct's .size and
 * `least` the smallest the host takes (0 for a service: no struct). */
static int refused(keel_module *m, int rc, const char *what, int given, const char *name,
                   size_t size, size_t least, const keel_module *owner)
{
    if (rc == KEEL_ERR_EXISTS)
        kl_log(KEEL_LOG_ERROR, "module '%s': %s '%s' is already registered by module '%s'", m->name,
               what, name, owner != NULL ? owner->name : "?");
    else if (rc == KEEL_ERR_INVAL && !given)
        kl_log(KEEL_LOG_ERROR, "module '%s': %s '%s': the struct or table is NULL", m->name, what,
               name ? name : "(null)");
    else if (rc == KEEL_ERR_INVAL && size < least)
        kl_log(KEEL_LOG_ERROR,
               "module '%s': %s '%s': .size is %zu, at least %zu (set it to sizeof the struct)",
               m->name, what, name ? name : "(null)", size, least);
    else if (rc == KEEL_ERR_INVAL)
        kl_log(KEEL_LOG_ERROR,
               "module '%s': %s '%s': invalid name (1 to 64 of a-z, 0-9, '_', '-', '.')", m->name,
               what, name ? name : "(null)");
    return rc;
}

int keel_protocol_register(keel_module *m, const keel_protocol *p)
{
    kl_registry *r = &m->server->registry;
    int rc = registering(m, "registers protocol", p ? p->name : NULL);
    if (rc != KEEL_OK || (rc = kl_registry_add_protocol(r, m, p)) == KEEL_OK)
        return rc;
    const kl_protocol *taken = p && p->name ? kl_registry_protocol(r, p->name) : NULL;
    return refused(m, rc, "protocol", p != NULL, p ? p->name : NULL, p ? p->size : 0,
                   offsetof(keel_protocol, on_open), taken ? taken->owner : NULL);
}

int keel_transport_register(keel_module *m, const keel_transport *t)
{
    kl_registry *r = &m->server->registry;
    int rc = registering(m, "registers transport", t ? t->name : NULL);
    if (rc != KEEL_OK || (rc = kl_registry_add_transport(r, m, t)) == KEEL_OK)
        return rc;
    const kl_transport *taken = t && t->name ? kl_registry_transport(r, t->name) : NULL;
    return refused(m, rc, "transport", t != NULL, t ? t->name : NULL, t ? t->size : 0,
                   offsetof(keel_transport, on_open), taken ? taken->owner : NULL);
}

int keel_dgram_protocol_register(keel_module *m, const keel_dgram_protocol *p)
{
    kl_registry *r = &m->server->registry;
    int rc = registering(m, "registers datagram protocol", p ? p->name : NULL);
    if (rc != KEEL_OK || (rc = kl_registry_add_dgram_protocol(r, m, p)) == KEEL_OK)
        return rc;
    size_t least = offsetof(keel_dgram_protocol, on_batch_end);
    if (rc == KEEL_ERR_INVAL && p != NULL && p->size >= least && p->on_datagram == NULL) {
        kl_log(KEEL_LOG_ERROR, "module '%s': datagram protocol '%s': on_datagram is NULL", m->name,
               p->name ? p->name : "(null)");
        return rc;
    }
    const kl_dgram_protocol *taken = p && p->name ? kl_registry_dgram_protocol(r, p->name) : NULL;
    return refused(m, rc, "datagram protocol", p != NULL, p ? p->name : NULL, p ? p->size : 0,
                   least, taken ? taken->owner : NULL);
}

int keel_metrics_source_register(keel_module *m, keel_metrics_source_fn fn, void *userdata)
{
    int rc = registering(m, "registers a metrics source", m->name);
    if (rc == KEEL_OK)
        rc = kl_registry_add_source(&m->server->registry, m, fn, userdata);
    return rc;
}

int keel_service_publish(keel_module *m, const char *name, uint32_t version, const void *table)
{
    kl_registry *r = &m->server->registry;
    int rc = registering(m, "publishes service", name);
    if (rc != KEEL_OK || (rc = kl_registry_add_service(r, m, name, version, table)) == KEEL_OK)
        return rc;
    const kl_service *taken = name ? kl_registry_service(r, name) : NULL;
    return refused(m, rc, "service", table != NULL, name, 0, 0, taken ? taken->owner : NULL);
}

int keel_service_lookup(keel_module *m, const char *name, uint32_t min_version, const void **table,
                        uint32_t *version_out)
{
    *table = NULL;
    const kl_service *svc = kl_registry_service(&m->server->registry, name);
    if (svc == NULL)
        return KEEL_ERR_NOTFOUND;
    if (version_out != NULL)
        *version_out = svc->version;
    if (svc->version < min_version)
        return KEEL_ERR_ABI;
    *table = svc->table;
    return KEEL_OK;
}

/* ---- logging ----------------------------------------------------------- */

void keel_logv(keel_module *m, int level, const char *fmt, va_list ap)
{
    kl_log_module(m ? m->name : NULL, level, fmt, ap);
}

void keel_log(keel_module *m, int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    kl_log_module(m ? m->name : NULL, level, fmt, ap);
    va_end(ap);
}

int keel_log_enabled(int level)
{
    return kl_log_enabled(level);
}

/* ---- status strings ---------------------------------------------------- */

const char *keel_strerror(int status)
{
    switch (status) {
    case KEEL_OK:
        return "success";
    case KEEL_ERR_NOMEM:
        return "out of memory";
    case KEEL_ERR_INVAL:
        return "invalid argument";
    case KEEL_ERR_NOTFOUND:
        return "not found";
    case KEEL_ERR_EXISTS:
        return "already exists";
    case KEEL_ERR_IO:
        return "I/O error";
    case KEEL_ERR_CLOSED:
        return "connection closed";
    case KEEL_ERR_STATE:
        return "not allowed in this state";
    case KEEL_ERR_LIMIT:
        return "limit exceeded";
    case KEEL_ERR_TIMEOUT:
        return "timed out";
    case KEEL_ERR_CONFIG:
        return "invalid configuration";
    case KEEL_ERR_ABI:
        return "incompatible ABI";
    case KEEL_ERR_SHUTDOWN:
        return "shutting down";
    case KEEL_ERR_PROTOCOL:
        return "protocol error";
    case KEEL_ERR_UNSUPPORTED:
        return "not supported";
    case KEEL_ERR_REFUSED:
        return "connection refused";
    default:
        return "unknown error";
    }
}

const char *keel_version(void)
{
    return KEEL_VERSION_STRING;
}

/* ---- reports (ABI 1.4) ------------------------------------------------- */

int keel_module_at(keel_module *m, size_t index, const char **name, const char **version)
{
    keel_server *s = m->server;
    size_t seen = 0;
    for (size_t i = 0; i < s->nmodules; i++) {
        keel_module *x = s->modules[i];
        if (!x->loaded || seen++ != index)
            continue;
        if (name)
            *name = x->name;
        if (version)
            *version = x->desc.version ? x->desc.version : "";
        return KEEL_OK;
    }
    return KEEL_ERR_NOTFOUND;
}

const char *keel_host_version(void)
{
    return KEEL_VERSION_STRING;
}

const char *keel_host_abi(void)
{
    return KL_STRINGIFY(KEEL_ABI_MAJOR) "." KL_STRINGIFY(KEEL_ABI_MINOR);
}
