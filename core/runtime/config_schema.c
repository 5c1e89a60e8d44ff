/* A module's declared keys: the table checked once, values parsed into the
 * module's struct, the reference printed. The getters of module_api.c and
 * this file share the value parsers of config_values.c, so a key reads the same
 * whichever way a module asks for it. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "keel/types.h"
#include "runtime/config_schema.h"
#include "runtime/config_values.h"
#include "runtime/scopes.h"
#include "base/log.h"
#include "base/util.h"

/* The i-th key as this host knows the struct: a module built against an
 * older keel/config.h has shorter entries (key_size), and the fields it
 * did not have read as zero. */
static keel_config_key key_at(const keel_config_schema *schema, size_t i)
{
    keel_config_key key;
    size_t n = schema->key_size < sizeof key ? schema->key_size : sizeof key;
    memset(&key, 0, sizeof key);
    memcpy(&key, (const char *)schema->keys + i * schema->key_size, n);
    if (key.scopes == 0)
        key.scopes = KEEL_SCOPE_GLOBAL;
    return key;
}

static size_t field_size_of(const keel_config_key *key)
{
    if (key->flags & KEEL_CONFIG_LIST)
        return sizeof(keel_config_list);
    switch (key->type) {
    case KEEL_CONFIG_STRING:
    case KEEL_CONFIG_ADDRESS:
    case KEEL_CONFIG_PATH:
        return sizeof(const char *);
    case KEEL_CONFIG_BOOL:
    case KEEL_CONFIG_ENUM:
        return sizeof(int);
    case KEEL_CONFIG_INT:
        return sizeof(int64_t);
    case KEEL_CONFIG_SIZE:
    case KEEL_CONFIG_DURATION:
        return sizeof(uint64_t);
    }
    return 0;
}

static const char *type_name(const keel_config_key *key)
{
    static const char *const names[] = {"?",        "string",  "bool", "int", "size",
                                        "duration", "address", "path", "enum"};
    unsigned t = (unsigned)key->type;
    return t < sizeof names / sizeof names[0] ? names[t] : "?";
}

/* 65536 -> "64k", 1500 -> "1500": a size as a person would write it. */
static const char *size_text(uint64_t v, char *buf, size_t len)
{
    static const char units[] = "kmg";
    int u = -1;
    while (u < 2 && v != 0 && v % 1024 == 0) {
        v /= 1024;
        u++;
    }
    if (u < 0)
        snprintf(buf, len, "%" PRIu64, v);
    else
        snprintf(buf, len, "%" PRIu64 "%c", v, units[u]);
    return buf;
}

static const char *duration_text(uint64_t ms, char *buf, size_t len)
{
    if (ms != 0 && ms % 3600000 == 0)
        snprintf(buf, len, "%" PRIu64 "h", ms / 3600000);
    else if (ms != 0 && ms % 60000 == 0)
        snprintf(buf, len, "%" PRIu64 "m", ms / 60000);
    else if (ms != 0 && ms % 1000 == 0)
        snprintf(buf, len, "%" PRIu64 "s", ms / 1000);
    else
        snprintf(buf, len, "%" PRIu64 "ms", ms);
    return buf;
}

/* The range a key accepts, as "between 64 and 1g"; "" when it is the
 * type's whole range. */
static const char *range_text(const keel_config_key *key, char *buf, size_t len)
{
    char lo[32], hi[32];
    buf[0] = '\0';
    if (key->min == 0 && key->max == 0)
        return buf;
    if (key->type == KEEL_CONFIG_SIZE) {
        size_text((uint64_t)key->min, lo, sizeof lo);
        size_text((uint64_t)key->max, hi, sizeof hi);
    } else if (key->type == KEEL_CONFIG_DURATION) {
        duration_text((uint64_t)key->min, lo, sizeof lo);
        duration_text((uint64_t)key->max, hi, sizeof hi);
    } else {
        snprintf(lo, sizeof lo, "%" PRId64, key->min);
        snprintf(hi, sizeof hi, "%" PRId64, key->max);
    }
    if (key->min == 0 && key->type != KEEL_CONFIG_INT)
        snprintf(buf, len, "up to %s", hi);
    else
        snprintf(buf, len, "between %s and %s", lo, hi);
    return buf;
}

/* HOST:PORT, [IPv6]:PORT or unix:/path: what a listen line or an upstream
 * takes. The host is not resolved here (that is the user's module's call,
 * and a name may resolve differently at start and at reload). */
static int valid_address(const char *s)
{
    if (strncmp(s, "unix:", 5) == 0)
        return s[5] != '\0';
    const char *colon;
    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (close == NULL || close == s + 1 || close[1] != ':')
            return 0;
        colon = close + 1;
    } else {
        colon = strrchr(s, ':');
        if (colon == NULL || colon == s || memchr(s, ':', (size_t)(colon - s)) != NULL)
            return 0;
        for (const char *p = s; p < colon; p++)
            if (*p == ' ' || *p == '\t' || *p == '/')
                return 0;
    }
    char *end;
    unsigned long port = strtoul(colon + 1, &end, 10);
    return colon[1] >= '0' && colon[1] <= '9' && *end == '\0' && port >= 1 && port <= 65535;
}

/* Parses one written value of key into *field (a scalar's storage; for a
 * list item, the caller keeps the text). KEEL_OK or KEEL_ERR_CONFIG with
 * the reason in why. */
static int parse_value(const keel_config_key *key, const char *text, void *field, char *why,
                       size_t whylen)
{
    char range[96];
    switch (key->type) {
    case KEEL_CONFIG_STRING:
    case KEEL_CONFIG_PATH:
        return KEEL_OK;
    case KEEL_CONFIG_ADDRESS:
        if (valid_address(text))
            return KEEL_OK;
        snprintf(why, whylen, "expected HOST:PORT, [IPv6]:PORT or unix:/path, not '%s'", text);
        return KEEL_ERR_CONFIG;
    case KEEL_CONFIG_BOOL: {
        int v;
        if (kl_parse_bool(text, &v, why, whylen) != KEEL_OK)
            return KEEL_ERR_CONFIG;
        if (field != NULL)
            *(int *)field = v;
        return KEEL_OK;
    }
    case KEEL_CONFIG_INT: {
        int64_t v, min = key->min, max = key->max;
        if (min == 0 && max == 0) {
            min = INT64_MIN;
            max = INT64_MAX;
        }
        if (kl_parse_int(text, min, max, &v, why, whylen) != KEEL_OK)
            return KEEL_ERR_CONFIG;
        if (field != NULL)
            *(int64_t *)field = v;
        return KEEL_OK;
    }
    case KEEL_CONFIG_SIZE:
    case KEEL_CONFIG_DURATION: {
        uint64_t v;
        int rc = key->type == KEEL_CONFIG_SIZE ? kl_parse_size(text, &v, why, whylen)
                                               : kl_parse_duration_ms(text, &v, why, whylen);
        if (rc != KEEL_OK)
            return KEEL_ERR_CONFIG;
        if ((key->min != 0 || key->max != 0) &&
            (v < (uint64_t)key->min || v > (uint64_t)key->max)) {
            snprintf(why, whylen, "expected a %s %s", type_name(key),
                     range_text(key, range, sizeof range));
            return KEEL_ERR_CONFIG;
        }
        if (field != NULL)
            *(uint64_t *)field = v;
        return KEEL_OK;
    }
    case KEEL_CONFIG_ENUM:
        for (int i = 0; key->choices != NULL && key->choices[i] != NULL; i++) {
            if (strcmp(key->choices[i], text) == 0) {
                if (field != NULL)
                    *(int *)field = i;
                return KEEL_OK;
            }
        }
        {
            size_t n = (size_t)snprintf(why, whylen, "expected one of");
            for (int i = 0; key->choices != NULL && key->choices[i] != NULL && n < whylen; i++)
                n += (size_t)snprintf(why + n, whylen - n, " %s", key->choices[i]);
        }
        return KEEL_ERR_CONFIG;
    }
    snprintf(why, whylen, "unknown type %d", (int)key->type);
    return KEEL_ERR_CONFIG;
}

/* parse_value, then the key's own check of the text (ABI 1.8). */
static int accept_value(const keel_config_key *key, const char *text, void *field, char *why,
                        size_t whylen)
{
    int rc = parse_value(key, text, field, why, whylen);
    if (rc == KEEL_OK && key->check != NULL) {
        why[0] = '\0';
        if (key->check(text, why, whylen) != 0) {
            why[whylen - 1] = '\0';
            if (why[0] == '\0')
                snprintf(why, whylen, "'%s' is not valid here", text);
            return KEEL_ERR_CONFIG;
        }
    }
    return rc;
}

int kl_schema_check(const keel_config_schema *schema, char *err, size_t errlen)
{
    if (schema->size < offsetof(keel_config_schema, struct_size) + sizeof(size_t) ||
        schema->key_size < offsetof(keel_config_key, doc) + sizeof(const char *) ||
        (schema->nkeys > 0 && schema->keys == NULL)) {
        snprintf(err, errlen, "config table: malformed (size %zu, key size %zu)", schema->size,
                 schema->key_size);
        return KEEL_ERR_ABI;
    }
    for (size_t i = 0; i < schema->nkeys; i++) {
        keel_config_key key = key_at(schema, i);
        char why[256];
        const char *name = key.name ? key.name : "(null)";
        if (!kl_config_valid_key(key.name)) {
            snprintf(err, errlen, "config table: key %zu: invalid name '%s'", i, name);
            return KEEL_ERR_ABI;
        }
        for (size_t j = 0; j < i; j++) {
            keel_config_key other = key_at(schema, j);
            if (strcmp(other.name, key.name) == 0) {
                snprintf(err, errlen, "config table: key '%s' declared twice", name);
                return KEEL_ERR_ABI;
            }
        }
        size_t want = field_size_of(&key);
        if (want == 0 || key.field_size != want || key.offset > schema->struct_size ||
            schema->struct_size - key.offset < want) {
            snprintf(err, errlen,
                     "config table: key '%s': a %s%s needs a field of %zu bytes inside the "
                     "struct (field of %zu bytes at %zu, struct of %zu)",
                     name, type_name(&key), key.flags & KEEL_CONFIG_LIST ? " list" : "", want,
                     key.field_size, key.offset, schema->struct_size);
            return KEEL_ERR_ABI;
        }
        if ((key.scopes & ~KEEL_SCOPE_ANY) != 0 || key.min > key.max ||
            ((key.type == KEEL_CONFIG_SIZE || key.type == KEEL_CONFIG_DURATION) && key.min < 0) ||
            (key.type == KEEL_CONFIG_ENUM && (key.choices == NULL || key.choices[0] == NULL))) {
            snprintf(err, errlen, "config table: key '%s': bad scopes, range or choices", name);
            return KEEL_ERR_ABI;
        }
        if (key.def != NULL && accept_value(&key, key.def, NULL, why, sizeof why) != KEEL_OK) {
            snprintf(err, errlen, "config table: key '%s': default '%s': %s", name, key.def, why);
            return KEEL_ERR_ABI;
        }
    }
    return KEEL_OK;
}

static void *store_alloc(kl_schema_store *store, size_t size)
{
    if (kl_grow((void **)&store->blocks, &store->cap, store->nblocks + 1, sizeof *store->blocks) !=
        KEEL_OK)
        return NULL;
    void *p = calloc(1, size ? size : 1);
    if (p != NULL)
        store->blocks[store->nblocks++] = p;
    return p;
}

/* A path key's value as its place says (kl_config_resolve; v NULL: the
 * default `text`, beside the config file), kept by the store. */
static const char *resolve_path(const kl_config *cfg, const kl_config_value *v, const char *text,
                                kl_schema_store *store)
{
    char *p = kl_config_resolve(cfg, v, text);
    if (p == NULL || kl_grow((void **)&store->blocks, &store->cap, store->nblocks + 1,
                             sizeof *store->blocks) != KEEL_OK) {
        free(p);
        return NULL;
    }
    store->blocks[store->nblocks++] = p;
    return p;
}

static int bad(const kl_config_value *v, const char *section, const char *key, const char *why)
{
    char where[300];
    kl_log(KEEL_LOG_ERROR, "%s: [%s] %s: %s", kl_config_where(v, where, sizeof where), section, key,
           why);
    return KEEL_ERR_CONFIG;
}

/* One key's field in conf from the values written in sec under `name`
 * (the key's own name in the module's section, "module.key" in a scope's).
 * With none written the field keeps what it holds: the default (or zero)
 * in a module's section, the enclosing scope's value in a scope. */
static int fill_key(const keel_config_key *key, const char *name, int use_default,
                    const kl_config *cfg, kl_config_section *sec, const char *section,
                    kl_schema_store *store, void *conf)
{
    char *field = (char *)conf + key->offset;
    char why[256];
    size_t n = kl_config_count(sec, name);
    if (n == 0 && !use_default)
        return KEEL_OK;
    if (key->flags & KEEL_CONFIG_LIST) {
        keel_config_list *list = (keel_config_list *)(void *)field;
        const char **items = store_alloc(store, (n ? n : 1) * sizeof *items);
        if (items == NULL)
            return KEEL_ERR_NOMEM;
        for (size_t i = 0; i < n; i++) {
            const kl_config_value *v = kl_config_get(sec, name, i);
            if (accept_value(key, v->text, NULL, why, sizeof why) != KEEL_OK)
                return bad(v, section, name, why);
            items[i] =
                key->type == KEEL_CONFIG_PATH ? resolve_path(cfg, v, v->text, store) : v->text;
            if (items[i] == NULL)
                return KEEL_ERR_NOMEM;
        }
        if (n == 0 && key->def != NULL && key->def[0] != '\0')
            items[n++] = key->def;
        list->count = n;
        list->items = items;
        return KEEL_OK;
    }
    const kl_config_value *v = NULL;
    if (n > 0) {
        char err[512];
        if (kl_config_get_single(sec, name, &v, err, sizeof err) != KEEL_OK) {
            kl_log(KEEL_LOG_ERROR, "%s", err);
            return KEEL_ERR_CONFIG;
        }
    }
    const char *text = v != NULL ? v->text : key->def;
    if (text == NULL)
        return KEEL_OK; /* zero, NULL: the struct was calloc'd */
    if (accept_value(key, text, field, why, sizeof why) != KEEL_OK)
        return bad(v, section, name, why); /* defaults were checked at load */
    if (key->type == KEEL_CONFIG_STRING || key->type == KEEL_CONFIG_ADDRESS)
        *(const char **)(void *)field = text;
    else if (key->type == KEEL_CONFIG_PATH &&
             (*(const char **)(void *)field = resolve_path(cfg, v, text, store)) == NULL)
        return KEEL_ERR_NOMEM;
    return KEEL_OK;
}

int kl_schema_fill(const keel_config_schema *schema, const kl_config *cfg, kl_config_section *sec,
                   const char *section_name, kl_schema_store *store)
{
    memset(store, 0, sizeof *store);
    if ((store->conf = store_alloc(store, schema->struct_size)) == NULL)
        return KEEL_ERR_NOMEM;
    for (size_t i = 0; i < schema->nkeys; i++) {
        keel_config_key key = key_at(schema, i);
        if ((key.flags & KEEL_CONFIG_REQUIRED) && kl_config_count(sec, key.name) == 0) {
            char where[300];
            if (sec != NULL)
                kl_log(KEEL_LOG_ERROR, "%s: [%s] %s: required",
                       kl_config_section_where(sec, where, sizeof where), section_name, key.name);
            else
                kl_log(KEEL_LOG_ERROR, "[%s] %s: required (the config has no [%s] section)",
                       section_name, key.name, section_name);
            return KEEL_ERR_CONFIG;
        }
        int rc = fill_key(&key, key.name, 1, cfg, sec, section_name, store, store->conf);
        if (rc != KEEL_OK)
            return rc;
    }
    return KEEL_OK;
}

static const char *scope_word(unsigned scope)
{
    return scope == KEEL_SCOPE_LISTENER ? "listener"
           : scope == KEEL_SCOPE_SITE   ? "site"
           : scope == KEEL_SCOPE_PATH   ? "path"
                                        : "global";
}

static void scopes_text(unsigned scopes, char *buf, size_t len);

int kl_schema_merge(const keel_config_schema *schema, const kl_config *cfg, kl_config_section *sec,
                    const char *module, unsigned scope, const void *base, kl_schema_store *store,
                    void **out)
{
    void *conf = store_alloc(store, schema->struct_size);
    if (conf == NULL)
        return KEEL_ERR_NOMEM;
    memcpy(conf, base, schema->struct_size);
    *out = conf;
    const char *section = kl_config_section_name(sec);
    for (size_t i = 0; i < schema->nkeys; i++) {
        keel_config_key key = key_at(schema, i);
        char name[256];
        snprintf(name, sizeof name, "%s.%s", module, key.name);
        if (kl_config_count(sec, name) > 0 && !(key.scopes & scope)) {
            char allowed[64], where[300];
            scopes_text(key.scopes, allowed, sizeof allowed);
            kl_log(KEEL_LOG_ERROR, "%s: [%s] %s: not allowed in a %s scope (only: %s)",
                   kl_config_where(kl_config_get(sec, name, 0), where, sizeof where), section, name,
                   scope_word(scope), allowed);
            return KEEL_ERR_CONFIG;
        }
        int rc = fill_key(&key, name, 0, cfg, sec, section, store, conf);
        if (rc != KEEL_OK)
            return rc;
    }
    return KEEL_OK;
}

const kl_config_value *kl_schema_find_value(const keel_config_schema *schema, kl_config *cfg,
                                            const char *module, const char *text,
                                            kl_config_section **sec, char *name, size_t cap)
{
    size_t nsec = kl_config_section_count(cfg);
    for (size_t s = 0; s < nsec; s++) {
        kl_config_section *cs = kl_config_section_at(cfg, s);
        const char *sname = kl_config_section_name(cs);
        int own = strcmp(sname, module) == 0;
        if (!own && !kl_scopes_is_scope_section(cs))
            continue;
        for (size_t i = 0; i < schema->nkeys; i++) {
            keel_config_key key = key_at(schema, i);
            if (own)
                snprintf(name, cap, "%s", key.name);
            else
                snprintf(name, cap, "%s.%s", module, key.name);
            size_t n = kl_config_count(cs, name);
            for (size_t k = 0; k < n; k++) {
                const kl_config_value *v = kl_config_get(cs, name, k);
                if (v != NULL && v->text == text) {
                    *sec = cs;
                    return v;
                }
            }
        }
    }
    return NULL;
}

void kl_schema_store_free(kl_schema_store *store)
{
    for (size_t i = 0; i < store->nblocks; i++)
        free(store->blocks[i]);
    free(store->blocks);
    memset(store, 0, sizeof *store);
}

static void scopes_text(unsigned scopes, char *buf, size_t len)
{
    static const char *const names[] = {"global", "listener", "site", "path"};
    size_t n = 0;
    buf[0] = '\0';
    for (unsigned i = 0; i < 4 && n < len; i++)
        if (scopes & (1u << i))
            n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? ", " : "", names[i]);
}

/* "size, 64k to 1g", "enum: keep replace", "string list". */
static void kind_text(const keel_config_key *key, char *buf, size_t len)
{
    char range[96];
    size_t n = (size_t)snprintf(buf, len, "%s%s", type_name(key),
                                key->flags & KEEL_CONFIG_LIST ? " list" : "");
    if (key->type == KEEL_CONFIG_ENUM) {
        for (int i = 0; key->choices[i] != NULL && n < len; i++)
            n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? ", " : ": ", key->choices[i]);
    } else if (range_text(key, range, sizeof range)[0] != '\0' && n < len) {
        snprintf(buf + n, len - n, ", %s", range);
    }
}

void kl_schema_describe(FILE *out, const char *module, const char *version,
                        const keel_config_schema *schema, int markdown)
{
    if (markdown) {
        fprintf(out,
                "# [%s]\n\n<!-- Generated by `keel --help-module %s --markdown` from the module's "
                "table; edit the table, not this page. -->\n\n",
                module, module);
    } else {
        fprintf(out, "module %s%s%s\n", module, version ? " " : "", version ? version : "");
    }
    if (schema == NULL || schema->nkeys == 0) {
        fprintf(out, "%s declares no keys: it reads its section itself (see its README).\n",
                module);
        return;
    }
    if (markdown)
        fprintf(out, "| key | type | default | scopes | what it does |\n|---|---|---|---|---|\n");
    for (size_t i = 0; i < schema->nkeys; i++) {
        keel_config_key key = key_at(schema, i);
        char kind[256], scopes[64];
        kind_text(&key, kind, sizeof kind);
        scopes_text(key.scopes, scopes, sizeof scopes);
        const char *def = key.flags & KEEL_CONFIG_REQUIRED ? "(required)"
                          : key.def && key.def[0]          ? key.def
                                                           : "(none)";
        const char *doc = key.doc ? key.doc : "";
        if (markdown) {
            fprintf(out, "| `%s` | %s | `%s` | %s | ", key.name, kind, def, scopes);
            for (const char *p = doc; *p; p++)
                fputs(*p == '|' ? "\\|" : (char[]){*p, '\0'}, out);
            fputs(" |\n", out);
        } else {
            fprintf(out, "  %-24s %s\n  %-24s default %s; in: %s\n  %-24s %s\n\n", key.name, kind,
                    "", def, scopes, "", doc);
        }
    }
}
