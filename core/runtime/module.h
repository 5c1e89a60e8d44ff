/* core/runtime/module.h — a loaded module's record: what the layers that
 * call into modules (net starts and stops them on each worker, http orders
 * their filters, the loader fills it) need to know of one. The loader and
 * the module API are core/server's. */
#ifndef KEEL_CORE_MODULE_H
#define KEEL_CORE_MODULE_H

#include <keel/module.h>
#include <uv.h>

#include "runtime/config.h"
#include "runtime/config_schema.h"

struct keel_module {
    keel_server *server;
    keel_module_desc desc; /* host-layout copy of the module's descriptor */
    char *name;
    char *path; /* NULL for a module compiled into the program */
    uv_lib_t lib;
    int lib_open;
    int loaded;   /* load() succeeded: unload() is due */
    size_t index; /* position in load order = per-worker state slot */
    void *data;   /* keel_module_set_data */
    kl_config_section *section;
    kl_schema_store config;        /* the declared keys' struct (ABI 1.7), or empty */
    keel_config_scope_fn scope_fn; /* keel_module_config_scopes (ABI 1.8) */
    void *scope_ud;
    struct keel_prepared_field *prepared; /* keel_field_prepare's, freed with the module */
    struct keel_log_name *log_names;      /* keel_log_name_prepare's, freed with the module */
};

#endif
