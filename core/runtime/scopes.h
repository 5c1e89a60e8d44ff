/* core/runtime/scopes.h — listeners, sites and path prefixes
 * (docs/configuration.md, "Scopes"): built once from the config and the
 * modules' declared keys, each scope holding every module's merged struct;
 * a request's scope is chosen by its listener, host and path.
 *
 * Built and freed on the main thread; kl_scopes_select is read-only and
 * runs on any worker.
 */
#ifndef KEEL_CORE_SCOPES_H
#define KEEL_CORE_SCOPES_H

#include <stddef.h>

#include "keel/config.h"
#include "keel/http.h"
#include "runtime/config.h"

struct kl_pipeline;

/* One scope as a request sees it: each module's struct there, by the
 * module's load index (NULL for a module that declares no keys), and the
 * HTTP filters its requests run (set by the HTTP layer once the filters
 * are ordered: http/pipeline.c). */
typedef struct kl_scope {
    void **confs;
    const struct kl_pipeline *pipeline;
} kl_scope;

/* A module as the scopes see it. */
typedef struct kl_scope_module {
    const char *name;
    const keel_config_schema *schema; /* NULL: no declared keys */
    const void *global;               /* its struct from its own section */
} kl_scope_module;

typedef struct kl_scopes kl_scopes;

/* What an unknown host gets when no site is named `default` ([keel]
 * unknown_host): the implicit site, or a status. */
#define KL_UNKNOWN_HOST_DEFAULT 0

/* Builds the scopes: the config's [listener NAME], [site NAME...],
 * [site NAME /prefix] and [/prefix] sections for these modules and these
 * listeners (listener_names[i]: the name= of listen line i, or NULL).
 * KEEL_OK with *out NULL when the config has no scope section (then every
 * request uses each module's global struct). KEEL_ERR_CONFIG after logging
 * "FILE:LINE: [section] ..." for a scope or key that is not right. Marks
 * the keys it reads used, so kl_config_check_unused finds the rest. */
int kl_scopes_build(const kl_config *cfg, const kl_scope_module *modules, size_t nmodules,
                    const char *const *listener_names, size_t nlisteners, int unknown_host,
                    kl_scopes **out);

void kl_scopes_free(kl_scopes *scopes);

/* Non-zero if sec is a scope's section rather than a module's. */
int kl_scopes_is_scope_section(const kl_config_section *sec);

/* A site as one listener serves it (opaque). */
typedef struct kl_site_scope kl_site_scope;

/* The site a request that came on listener `listener` for host (the Host
 * field or :authority as received; empty if none) belongs to. NULL when no
 * site takes the host and unknown_host is a status: *status is then 421
 * or 404. The answer depends on nothing else, so a caller may remember it
 * for the same listener and host bytes. */
const kl_site_scope *kl_scopes_site(const kl_scopes *scopes, size_t listener, keel_str host,
                                    int *status);

/* The scope of a request to site for its normalised path: the longest path
 * prefix that matches, else the site's own. */
const kl_scope *kl_scopes_path(const kl_site_scope *site, keel_str path);

/* A listener's own scope (global merged with its [listener]), for what
 * is answered before a site is known. */
const kl_scope *kl_scopes_listener(const kl_scopes *scopes, size_t listener);

/* The site's own scope, whatever the path (TLS chooses by site alone). */
const kl_scope *kl_scopes_site_own(const kl_site_scope *site);

/* Calls fn with module `index`'s struct in every scope (a struct may come
 * more than once); stops at the first error and returns it. */
int kl_scopes_each(const kl_scopes *scopes, size_t index, int (*fn)(const void *conf, void *ud),
                   void *ud);

/* Calls fn with every scope a request may have (each listener's own,
 * each site's and each path's), for the HTTP layer to attach its
 * pipeline; stops at the first error and returns it. Main thread, before
 * the workers start. */
int kl_scopes_each_scope(kl_scopes *scopes, int (*fn)(kl_scope *scope, void *ud), void *ud);

/* Both: the scope of the request, NULL with *status as kl_scopes_site. */
const kl_scope *kl_scopes_select(const kl_scopes *scopes, size_t listener, keel_str host,
                                 keel_str path, int *status);

#endif
