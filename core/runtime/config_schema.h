/* core/runtime/config_schema.h — a module's declared keys (keel/config.h):
 * checking the table, filling the module's struct from its section, and
 * printing the reference. docs/configuration.md is the design.
 *
 * Internal to libkeel; main thread only.
 */
#ifndef KEEL_CORE_CONFIG_SCHEMA_H
#define KEEL_CORE_CONFIG_SCHEMA_H

#include <stdio.h>

#include "keel/config.h"
#include "runtime/config.h"

/* What a filled struct owns besides the config's own strings: the struct,
 * list arrays and resolved paths. */
typedef struct kl_schema_store {
    void *conf;
    void **blocks;
    size_t nblocks, cap;
} kl_schema_store;

/* Checks a module's table itself (names, types against field sizes, ranges,
 * defaults that parse and fit). A faulty table is the module's bug:
 * KEEL_ERR_ABI with the reason in err ("key 'x': default '9z' ..."). */
int kl_schema_check(const keel_config_schema *schema, char *err, size_t errlen);

/* Fills store->conf (a new struct of schema->struct_size bytes) from sec
 * (NULL: no section, every key takes its default) of cfg. Every key of the
 * table is marked used in sec, so that the unknown-key check sees only the
 * keys no table and no getter read. On a bad value logs
 * "FILE:LINE: [section] key: reason" and returns KEEL_ERR_CONFIG; on
 * KEEL_ERR_NOMEM logs nothing. The store is left for kl_schema_store_free
 * either way. The schema must have passed kl_schema_check. */
int kl_schema_fill(const keel_config_schema *schema, const kl_config *cfg, kl_config_section *sec,
                   const char *section_name, kl_schema_store *store);

/* A scope's struct (docs/configuration.md, "Merging"): a copy of base (the
 * enclosing scope's) with the keys sec writes as "MODULE.KEY" applied; a
 * list written here replaces the enclosing one. A key written in a scope
 * its table does not allow (scope: KEEL_SCOPE_LISTENER, _SITE or _PATH)
 * is an error with FILE:LINE. The struct is allocated in store (*out). */
int kl_schema_merge(const keel_config_schema *schema, const kl_config *cfg, kl_config_section *sec,
                    const char *module, unsigned scope, const void *base, kl_schema_store *store,
                    void **out);

void kl_schema_store_free(kl_schema_store *store);

/* The config value whose text is `text` (the very pointer a struct's
 * string field or list item holds) among module's keys in its own section
 * and in the scope sections: the value, with its section and the key as
 * written ("return", or "rewrite.return" in a scope) in name; NULL if
 * none. */
const kl_config_value *kl_schema_find_value(const keel_config_schema *schema, kl_config *cfg,
                                            const char *module, const char *text,
                                            kl_config_section **sec, char *name, size_t cap);

/* Prints the reference of a module's keys: plain text for a terminal, or
 * the Markdown page kept in docs/reference/NAME.md. schema may be NULL
 * (a module that reads its section with the getters). */
void kl_schema_describe(FILE *out, const char *module, const char *version,
                        const keel_config_schema *schema, int markdown);

#endif
