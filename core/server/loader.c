/* The module loader: finds mod_<name> on the module path (or takes a
 * descriptor compiled into the program), checks its ABI and requirements,
 * hands it the host's function table and runs load() in config order.
 * Any failure names the module in one line and stops start-up. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/api_table.h"
#include "server/appender.h"
#include "runtime/config_values.h"
#include "runtime/crash.h"
#include "base/log.h"
#include "platform/platform.h"
#include "server/server.h"
#include "net/udp.h"
#include "base/util.h"

/* Logs a module failure, prefixed with where the config's `modules` line
 * is (for modules the program compiled in and the list does not name,
 * there is no such place). */
static KEEL_PRINTF(2, 3) void module_error(const keel_server *s, const char *fmt, ...)
{
    char where[512];
    va_list ap;
    va_start(ap, fmt);
    if (s->host.settings.modules_where != NULL) {
        kl_config_where(s->host.settings.modules_where, where, sizeof where);
        kl_log_prefixed(where, KEEL_LOG_ERROR, fmt, ap);
    } else {
        kl_log_prefixed(NULL, KEEL_LOG_ERROR, fmt, ap);
    }
    va_end(ap);
}

static keel_module *find_loaded(keel_server *s, const char *name)
{
    for (size_t i = 0; i < s->nmodules; i++)
        if (strcmp(s->modules[i]->name, name) == 0)
            return s->modules[i];
    return NULL;
}

static const keel_module_desc *find_builtin(keel_server *s, const char *name)
{
    for (size_t i = 0; i < s->nbuiltins; i++)
        if (strcmp(s->builtins[i]->name, name) == 0)
            return s->builtins[i];
    return NULL;
}

/* Whether the config's module list (or the program's compiled-in ones)
 * names `name`, loaded yet or not. */
static int module_listed(keel_server *s, const char *name)
{
    for (size_t i = 0; i < s->host.settings.nmodules; i++)
        if (strcmp(s->host.settings.modules[i], name) == 0)
            return 1;
    return find_builtin(s, name) != NULL;
}

static int file_exists(keel_server *s, const char *path)
{
    uv_fs_t req;
    int rc = uv_fs_stat(&s->loop, &req, path, NULL);
    uv_fs_req_cleanup(&req);
    return rc == 0;
}

/* mod_<file_name><suffix> in the first directory of module_path that has
 * it; NULL (nothing logged) if none has, *file names the file looked for. */
static char *find_on_path(keel_server *s, const char *file_name, char *file, size_t size,
                          int *nomem)
{
    snprintf(file, size, "mod_%s%s", file_name, kl_module_suffix);
    for (size_t i = 0; i < s->host.settings.nmodule_path; i++) {
        char *path = kl_path_join(s->host.settings.module_path[i], file);
        if (path == NULL) {
            *nomem = 1;
            return NULL;
        }
        if (file_exists(s, path))
            return path;
        free(path);
    }
    return NULL;
}

/* Looks for mod_<name><suffix> in each directory of module_path. A module
 * with several implementations of one name (tls: mbedTLS in mod_tls,
 * OpenSSL in mod_tls_openssl) is chosen by its section's `backend = X`:
 * mod_<name>_X first, then mod_<name>, whose load reports a backend it is
 * not (libwebsockets' precedent: one API, a backend per library). The
 * value is read raw, before the module declares the key. */
static char *find_file(keel_server *s, const char *name)
{
    char file[128];
    int nomem = 0;
    const kl_config_value *backend =
        kl_config_peek(kl_config_section_find(s->config, name), "backend");
    if (backend != NULL && backend->text[0] != '\0' && strlen(backend->text) < 32 &&
        strpbrk(backend->text, "/\\.") == NULL) {
        char variant[96];
        snprintf(variant, sizeof variant, "%s_%s", name, backend->text);
        char *path = find_on_path(s, variant, file, sizeof file, &nomem);
        if (path != NULL || nomem)
            return path;
    }
    char *path = find_on_path(s, name, file, sizeof file, &nomem);
    if (path != NULL || nomem)
        return path;
    char dirs[1024] = "";
    size_t used = 0;
    for (size_t i = 0; i < s->host.settings.nmodule_path && used < sizeof dirs; i++) {
        int n = snprintf(dirs + used, sizeof dirs - used, "%s%s", i ? ", " : "",
                         s->host.settings.module_path[i]);
        if (n > 0)
            used += (size_t)n;
    }
    module_error(s, "module '%s': not found (looked for %s in %s)", name, file, dirs);
    return NULL;
}

/* What to do about a module that calls libkeel directly. */
#define LINKED_ADVICE                                                                              \
    "modules must not define it: build against `pkg-config --cflags keel` or keel::sdk, not "      \
    "libkeel"

/* The libkeel symbol a loader's message says is undefined, or NULL. A
 * module built with KEEL_LINKED names libkeel's functions; when its calls
 * are bound at load (-fno-plt, -Wl,-z,now, as Debian's hardening does),
 * dlopen refuses it before check_desc can say why. */
static const char *undefined_keel_symbol(const char *why)
{
    const char *at = strstr(why, "undefined symbol: keel_");
    return at != NULL ? at + strlen("undefined symbol: ") : NULL;
}

/* Opens the shared object and returns its descriptor, or NULL (logged). */
static const keel_module_desc *open_file(keel_module *m)
{
    if ((m->path = find_file(m->server, m->name)) == NULL)
        return NULL;
    kl_crash_opening(m->path);
    int failed = kl_lib_open(m->path, &m->lib) != 0;
    kl_crash_opening(NULL);
    if (failed) {
        /* Windows' messages end in a line break: one line per error. */
        char why[512];
        snprintf(why, sizeof why, "%s", uv_dlerror(&m->lib));
        size_t n = strlen(why);
        while (n > 0 && (why[n - 1] == '\n' || why[n - 1] == '\r' || why[n - 1] == ' '))
            why[--n] = '\0';
        const char *symbol = undefined_keel_symbol(why);
        if (symbol != NULL)
            module_error(m->server,
                         "module '%s': %s was built with KEEL_LINKED or calls libkeel directly "
                         "(undefined symbol %s); " LINKED_ADVICE,
                         m->name, m->path, symbol);
        else
            module_error(m->server, "module '%s': cannot load %s: %s", m->name, m->path, why);
        uv_dlclose(&m->lib);
        return NULL;
    }
    m->lib_open = 1;
    char symbol[128];
    void *desc = NULL;
    snprintf(symbol, sizeof symbol, KEEL_MODULE_SYMBOL_PREFIX "%s", m->name);
    if (uv_dlsym(&m->lib, symbol, &desc) != 0 || desc == NULL) {
        module_error(m->server, "module '%s': %s is not a keel module (no symbol %s)", m->name,
                     m->path, symbol);
        return NULL;
    }
    return desc;
}

/* The first fields up to `name` are the same in every ABI; read the
 * version before trusting anything else. */
static int check_desc_version(keel_module *m, const keel_module_desc *d)
{
    if (d->abi_major != KEEL_ABI_MAJOR || d->abi_minor > KEEL_ABI_MINOR) {
        module_error(m->server, "module '%s': built for ABI %u.%u, this keel has ABI %u.%u",
                     m->name, (unsigned)d->abi_major, (unsigned)d->abi_minor, KEEL_ABI_MAJOR,
                     KEEL_ABI_MINOR);
        return KEEL_ERR_ABI;
    }
    if (d->size < offsetof(keel_module_desc, unload) + sizeof d->unload) {
        module_error(m->server, "module '%s': descriptor too small (%zu bytes)", m->name,
                     (size_t)d->size);
        return KEEL_ERR_ABI;
    }
    /* Never "%s" with a NULL name: glibc prints "(null)", others crash. */
    if (d->name == NULL) {
        module_error(m->server, "module '%s': its descriptor has no name", m->name);
        return KEEL_ERR_ABI;
    }
    if (strcmp(d->name, m->name) != 0) {
        module_error(m->server, "module '%s': its descriptor is named '%s'", m->name, d->name);
        return KEEL_ERR_ABI;
    }
    return KEEL_OK;
}

static int check_desc(keel_module *m, const keel_module_desc *d)
{
    int rc = check_desc_version(m, d);
    if (rc != KEEL_OK)
        return rc;
    /* KEEL_LINKED (from `pkg-config --cflags libkeel`, the embedding
     * package) leaves the table slot NULL and makes every call name a
     * libkeel symbol the host does not export: such a module would load
     * and then die at its first call with "undefined symbol". Only code
     * compiled into the program may call libkeel directly. */
    if (d->api == NULL && m->path != NULL) {
        module_error(m->server,
                     "module '%s': %s was built with KEEL_LINKED (no slot for the host's "
                     "function table); " LINKED_ADVICE,
                     m->name, m->path);
        return KEEL_ERR_ABI;
    }
    memset(&m->desc, 0, sizeof m->desc);
    memcpy(&m->desc, d, d->size < sizeof m->desc ? d->size : sizeof m->desc);
    for (const char *const *r = m->desc.dependencies; r != NULL && *r != NULL; r++) {
        /* "?name" (ABI 1.4): used if present, so it must load first when
         * the list names it; absent is fine. */
        if ((*r)[0] == '?') {
            if (find_loaded(m->server, *r + 1) == NULL && module_listed(m->server, *r + 1)) {
                module_error(m->server,
                             "module '%s': uses module '%s' when it is loaded, so list '%s' "
                             "before '%s' in [keel] modules",
                             m->name, *r + 1, *r + 1, m->name);
                return KEEL_ERR_CONFIG;
            }
            continue;
        }
        keel_module *dep = find_loaded(m->server, *r);
        if (dep == NULL || !dep->loaded) {
            module_error(m->server,
                         "module '%s': requires module '%s', which is not loaded before it",
                         m->name, *r);
            return KEEL_ERR_NOTFOUND;
        }
    }
    return KEEL_OK;
}

/* The declared keys (ABI 1.7): the table checked, the section parsed into
 * the module's struct before its load runs. */
static int load_config(keel_module *m)
{
    char err[512];
    if (kl_schema_check(m->desc.config, err, sizeof err) != KEEL_OK) {
        module_error(m->server, "module '%s': %s", m->name, err);
        return KEEL_ERR_ABI;
    }
    int rc = kl_schema_fill(m->desc.config, m->server->config, m->section, m->name, &m->config);
    if (rc == KEEL_ERR_NOMEM)
        module_error(m->server, "module '%s': out of memory reading its config", m->name);
    return rc;
}

static int load_one(keel_server *s, const char *name)
{
    if (find_loaded(s, name) != NULL) {
        module_error(s, "module '%s' is listed twice in [keel] modules", name);
        return KEEL_ERR_CONFIG;
    }
    keel_module *m = calloc(1, sizeof *m);
    if (m == NULL || (m->name = kl_strdup(name)) == NULL) {
        free(m);
        return KEEL_ERR_NOMEM;
    }
    m->server = s;
    m->index = s->nmodules;
    s->modules[s->nmodules++] = m;

    const keel_module_desc *d = find_builtin(s, name);
    if (d == NULL && (d = open_file(m)) == NULL)
        return KEEL_ERR_NOTFOUND;
    int rc = check_desc(m, d);
    if (rc != KEEL_OK)
        return rc;
    if (m->desc.api != NULL)
        *m->desc.api = &kl_host_api;
    if (m->path != NULL && s->crash_reporting)
        kl_crash_add_module(m->name, m->path, d);
    m->section = kl_config_section_find(s->config, name);
    if (m->desc.config != NULL && (rc = load_config(m)) != KEEL_OK)
        return rc;
    if (m->desc.load != NULL) {
        KL_IN_MODULE(m->name, rc = m->desc.load(m));
        if (rc < 0) {
            module_error(s, "module '%s': load failed: %s", name, keel_strerror(rc));
            return rc;
        }
    }
    m->loaded = 1;
    kl_log(KEEL_LOG_DEBUG, "module '%s' %s (ABI %u.%u) loaded from %s", name,
           m->desc.version ? m->desc.version : "", (unsigned)m->desc.abi_major,
           (unsigned)m->desc.abi_minor, m->path ? m->path : "the program");
    return KEEL_OK;
}

/* [listener], [site] and path scopes (runtime/scopes.c), once every
 * module's table is known. */
static int build_scopes(keel_server *s)
{
    kl_scope_module *mods = calloc(s->nmodules ? s->nmodules : 1, sizeof *mods);
    const char **names = calloc(s->host.nlisteners ? s->host.nlisteners : 1, sizeof *names);
    int rc = KEEL_ERR_NOMEM;
    if (mods != NULL && names != NULL) {
        for (size_t i = 0; i < s->nmodules; i++)
            mods[i] = (kl_scope_module){s->modules[i]->name, s->modules[i]->desc.config,
                                        s->modules[i]->config.conf};
        for (size_t i = 0; i < s->host.nlisteners; i++)
            names[i] = kl_listen_spec_option(s->host.listeners[i].spec, "name");
        rc = kl_scopes_build(s->config, mods, s->nmodules, names, s->host.nlisteners,
                             s->host.settings.unknown_host, &s->host.scopes);
    }
    free(mods);
    free(names);
    return rc;
}

/* keel_module_config_scopes (ABI 1.8): each asking module is shown its
 * struct in every scope, now that they exist. */
typedef struct scope_call {
    keel_module *m;
} scope_call;

static int call_scope_fn(const void *conf, void *ud)
{
    keel_module *m = ((scope_call *)ud)->m;
    int rc;
    KL_IN_MODULE(m->name, rc = m->scope_fn(m, conf, m->scope_ud));
    return rc < 0 ? rc : KEEL_OK;
}

static int show_scopes(keel_server *s)
{
    if (s->host.scopes == NULL)
        return KEEL_OK;
    for (size_t i = 0; i < s->nmodules; i++) {
        keel_module *m = s->modules[i];
        if (m->scope_fn == NULL)
            continue;
        scope_call call = {m};
        int rc = kl_scopes_each(s->host.scopes, m->index, call_scope_fn, &call);
        if (rc != KEEL_OK)
            return rc;
    }
    return KEEL_OK;
}

/* What only the full set of loaded modules can tell. */
/* A listen line with the `udp` word (ABI 1.9, net/udp.c): its datagram
 * protocol and options. `udp` takes the transport's place, so no other
 * bare word may follow; a datagram has no PROXY protocol header. */
static int resolve_udp_listener(keel_server *s, kl_listener *l)
{
    const kl_listen_spec *spec = l->spec;
    char where[300], why[160];
    const char *what = NULL, *bad = NULL; /* why, and the option it is about */
    l->dgram = kl_registry_dgram_protocol(&s->registry, spec->protocol);
    l->dgram_batch = KL_UDP_BATCH_DEFAULT;
    l->dgram_send_queue = KL_UDP_SEND_QUEUE_DEFAULT;
    if (l->dgram == NULL) {
        snprintf(why, sizeof why, "unknown datagram protocol '%s'%s", spec->protocol,
                 s->registry.ndgram_protocols ? "" : " (no loaded module registers one)");
        what = why;
    }
    for (size_t k = 0; what == NULL && k < spec->noptions; k++) {
        const kl_listen_option *o = &spec->options[k];
        int64_t n = 0;
        uint64_t size = 0;
        if (strcmp(o->key, "udp") == 0 || strcmp(o->key, "name") == 0)
            continue;
        if (strcmp(o->key, "batch") == 0) {
            if (kl_parse_int(o->value, 1, KL_UDP_BATCH_MAX, &n, why, sizeof why) != KEEL_OK) {
                what = why;
                bad = o->key;
            }
            l->dgram_batch = (uint32_t)n;
        } else if (strcmp(o->key, "send_queue") == 0) {
            if (kl_parse_size(o->value, &size, why, sizeof why) != KEEL_OK) {
                what = why;
                bad = o->key;
            }
            l->dgram_send_queue = size;
        } else {
            snprintf(why, sizeof why,
                     "'%s' does not apply to a udp listener (it takes batch= and send_queue=)",
                     o->key);
            what = why;
        }
    }
    if (what == NULL)
        return KEEL_OK;
    kl_log(KEEL_LOG_ERROR, "%s: [keel] listen: %s%s%s",
           kl_config_where(spec->where, where, sizeof where), bad ? bad : "", bad ? ": " : "",
           what);
    return KEEL_ERR_CONFIG;
}

static int check_config(keel_server *s)
{
    char err[512];
    for (size_t i = 0; i < s->nmodules; i++) {
        kl_config_section *sec = s->modules[i]->section;
        if (sec != NULL && kl_config_check_unused(sec, err, sizeof err) != KEEL_OK) {
            kl_log(KEEL_LOG_ERROR, "%s", err);
            return KEEL_ERR_CONFIG;
        }
    }
    size_t nsections = kl_config_section_count(s->config);
    for (size_t i = 0; i < nsections; i++) {
        kl_config_section *sec = kl_config_section_at(s->config, i);
        const char *name = kl_config_section_name(sec);
        if (kl_scopes_is_scope_section(sec)) {
            if (kl_config_check_unused(sec, err, sizeof err) != KEEL_OK) {
                kl_log(KEEL_LOG_ERROR,
                       "%s (a scope takes MODULE.KEY for the keys a module "
                       "declares for it: keel --help-module MODULE)",
                       err);
                return KEEL_ERR_CONFIG;
            }
            continue;
        }
        if (strcmp(name, "keel") != 0 && find_loaded(s, name) == NULL) {
            char where[300];
            kl_log(KEEL_LOG_ERROR, "%s: unknown section [%s] (no module '%s' is loaded)",
                   kl_config_section_where(sec, where, sizeof where), name, name);
            return KEEL_ERR_CONFIG;
        }
    }
    for (size_t i = 0; i < s->host.nlisteners; i++) {
        kl_listener *l = &s->host.listeners[i];
        const kl_listen_spec *spec = l->spec;
        char where[300];
        if (kl_listen_spec_option(spec, "udp") != NULL) {
            int rc = resolve_udp_listener(s, l);
            if (rc != KEEL_OK)
                return rc;
            continue;
        }
        l->protocol = kl_registry_protocol(&s->registry, spec->protocol);
        if (l->protocol == NULL) {
            kl_log(KEEL_LOG_ERROR, "%s: [keel] listen: unknown protocol '%s'%s",
                   kl_config_where(spec->where, where, sizeof where), spec->protocol,
                   s->registry.nprotocols ? "" : " (no loaded module registers a protocol)");
            return KEEL_ERR_CONFIG;
        }
        /* A bare word after the protocol names a transport ("tls"). */
        for (size_t k = 0; k < spec->noptions; k++) {
            if (spec->options[k].value[0] != '\0')
                continue;
            const kl_transport *t = kl_registry_transport(&s->registry, spec->options[k].key);
            if (t == NULL || l->transport != NULL) {
                kl_log(KEEL_LOG_ERROR, "%s: [keel] listen: %s '%s'",
                       kl_config_where(spec->where, where, sizeof where),
                       t ? "a second transport" : "unknown transport", spec->options[k].key);
                return KEEL_ERR_CONFIG;
            }
            l->transport = t;
        }
    }
    return KEEL_OK;
}

int kl_modules_load(keel_server *s)
{
    size_t total = s->host.settings.nmodules + s->nbuiltins;
    s->modules = calloc(total ? total : 1, sizeof *s->modules);
    if (s->modules == NULL)
        return KEEL_ERR_NOMEM;
    /* The core's series come first: modules may read their names. */
    int rc = kl_metrics_register_core(s);
    s->loading = 1;
    for (size_t i = 0; rc == KEEL_OK && i < s->host.settings.nmodules; i++)
        rc = load_one(s, s->host.settings.modules[i]);
    /* Compiled-in modules the list does not name come after it. */
    for (size_t i = 0; rc == KEEL_OK && i < s->nbuiltins; i++)
        if (find_loaded(s, s->builtins[i]->name) == NULL)
            rc = load_one(s, s->builtins[i]->name);
    s->loading = 0;
    s->host.modules = s->modules;
    s->host.nmodules = s->nmodules;
    kl_metrics_seal(&s->metrics);
    if (rc == KEEL_OK)
        rc = build_scopes(s);
    /* The scope calls belong to load: a module may register the routes
     * its scopes need (the static module's per-site mounts) before the
     * router is prepared. */
    s->loading = 1;
    if (rc == KEEL_OK)
        rc = show_scopes(s);
    s->loading = 0;
    if (rc == KEEL_OK)
        rc = check_config(s);
    if (rc == KEEL_OK)
        rc = kl_http_prepare(s->http, &s->host);
    return rc;
}

int kl_module_describe(keel_server *s, const char *name, int markdown, FILE *out)
{
    keel_module *m = calloc(1, sizeof *m);
    if (m == NULL || (m->name = kl_strdup(name)) == NULL) {
        free(m);
        return KEEL_ERR_NOMEM;
    }
    m->server = s;
    /* Described, never loaded: the descriptor is read, load is not run. */
    const keel_module_desc *d = find_builtin(s, name);
    int rc = d != NULL || (d = open_file(m)) != NULL ? check_desc_version(m, d) : KEEL_ERR_NOTFOUND;
    if (rc == KEEL_OK) {
        char err[512];
        keel_module_desc desc;
        memset(&desc, 0, sizeof desc);
        memcpy(&desc, d, d->size < sizeof desc ? d->size : sizeof desc);
        if (desc.config != NULL && kl_schema_check(desc.config, err, sizeof err) != KEEL_OK) {
            module_error(s, "module '%s': %s", name, err);
            rc = KEEL_ERR_ABI;
        } else {
            kl_schema_describe(out, name, desc.version, desc.config, markdown);
        }
    }
    free(m->path);
    free(m->name);
    free(m);
    return rc;
}

void kl_modules_unload(keel_server *s)
{
    for (size_t i = s->nmodules; i-- > 0;) {
        keel_module *m = s->modules[i];
        if (m->loaded && m->desc.unload != NULL)
            KL_IN_MODULE(m->name, m->desc.unload(m));
        m->loaded = 0;
    }
    kl_appenders_close(s);
}

void kl_modules_free(keel_server *s)
{
    /* Never dlclose: a module's code may still be referenced (atexit
     * handlers, threads of its libraries); the OS unmaps it at exit. */
    kl_scopes_free(s->host.scopes); /* it points into the modules' structs */
    s->host.scopes = NULL;
    for (size_t i = 0; i < s->nmodules; i++) {
        kl_schema_store_free(&s->modules[i]->config);
        kl_prepared_fields_free(s->modules[i]->prepared);
        kl_log_names_free(s->modules[i]->log_names);
        free(s->modules[i]->name);
        free(s->modules[i]->path);
        free(s->modules[i]);
    }
    free(s->modules);
    s->modules = NULL;
    s->nmodules = 0;
}
