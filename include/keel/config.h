/* keel/config.h — a module's configuration keys, declared in a table the
 * core reads (ABI 1.7). docs/configuration.md is the guide.
 *
 * A module describes each key it accepts: name, type, default, range, the
 * scopes where it may be written and one line of documentation. The core
 * parses and validates the module's section against the table before the
 * module's load runs, reports every bad or unknown key with FILE:LINE, and
 * fills one struct of the module's own type, which load finds with
 * keel_module_config(). `keel --help-module NAME` prints the table, and
 * the reference pages in docs/reference/ are generated from it.
 *
 *     typedef struct hello_conf { uint64_t slow_delay_ms; } hello_conf;
 *     static const keel_config_key hello_keys[] = {
 *         KEEL_KEY(hello_conf, slow_delay_ms, "slow_delay", KEEL_CONFIG_DURATION,
 *                  .def = "50ms", .max = 60000, .doc = "how long GET /slow waits"),
 *     };
 *     KEEL_CONFIG_SCHEMA(hello_schema, hello_conf, hello_keys);
 *     KEEL_MODULE(hello, .load = hello_load, .config = &hello_schema);
 */
#ifndef KEEL_CONFIG_H
#define KEEL_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a key's value is, and the type of its field in the module's struct. */
typedef enum keel_config_type {
    KEEL_CONFIG_STRING = 1, /* any text                              const char * */
    KEEL_CONFIG_BOOL,       /* on/off yes/no true/false 1/0          int (0 or 1) */
    KEEL_CONFIG_INT,        /* decimal, within [min, max]            int64_t */
    KEEL_CONFIG_SIZE,       /* bytes: 512, 64k, 1m, 2g (1024s)       uint64_t */
    KEEL_CONFIG_DURATION,   /* 250ms 10s 5m 1h; bare number: seconds uint64_t, ms */
    KEEL_CONFIG_ADDRESS,    /* HOST:PORT, [IPv6]:PORT, unix:/path    const char * */
    KEEL_CONFIG_PATH, /* relative to the config file's folder  const char *, resolved (defaults too)
                       */
    KEEL_CONFIG_ENUM  /* one of `choices`                      int, its index */
} keel_config_type;

/* Where a key may be written (docs/configuration.md, "Scopes"). */
#define KEEL_SCOPE_GLOBAL   0x1u /* the module's own [name] section */
#define KEEL_SCOPE_LISTENER 0x2u /* [listener NAME] */
#define KEEL_SCOPE_SITE     0x4u /* [site NAME...] */
#define KEEL_SCOPE_PATH     0x8u /* [site NAME /prefix/] and [/prefix/] */
#define KEEL_SCOPE_ANY      0xfu

/* keel_config_key.flags */
#define KEEL_CONFIG_LIST     0x1u /* may be written several times: the field is a keel_config_list */
#define KEEL_CONFIG_REQUIRED 0x2u /* the section must write it (no default) */

/* A list key's field: every value written, in file order, each validated
 * by the key's type and kept as text (paths resolved). Owned by the core,
 * valid until the module is unloaded. */
typedef struct keel_config_list {
    size_t count;
    const char *const *items;
} keel_config_list;

/* One key. Write entries with KEEL_KEY, which fills the first four fields;
 * the rest are designated initialisers given in declaration order (C++20
 * requires the order). Ranges are in the field's unit (bytes for SIZE,
 * milliseconds for DURATION); min = max = 0 means the type's whole range
 * (for INT: any int64_t; for SIZE and DURATION: from 0). */
typedef struct keel_config_key {
    size_t offset;              /* offsetof the field in the module's struct */
    size_t field_size;          /* sizeof the field: checked against the type */
    const char *name;           /* [a-z0-9_.-]+ */
    keel_config_type type;      /* KEEL_CONFIG_* */
    unsigned flags;             /* KEEL_CONFIG_LIST, KEEL_CONFIG_REQUIRED */
    unsigned scopes;            /* KEEL_SCOPE_*; 0 = KEEL_SCOPE_GLOBAL */
    const char *def;            /* the default as it would be written; NULL: zero / empty */
    int64_t min, max;           /* INT, SIZE, DURATION: the accepted range */
    const char *const *choices; /* ENUM: NULL-terminated words; the field gets the index */
    const char *doc;            /* one line for --help-module and docs/reference */
    /* ABI 1.8: checks a value the type accepted (each item of a list), in
     * every section and scope it is written: 0, or nonzero with the reason
     * written to why (NUL-terminated, at most whylen bytes), which the core
     * reports as "FILE:LINE: [section] key: why". What a table cannot say
     * (a compound value's grammar) is then refused by `keel -t` too, with
     * the line, in a scope as well as in the module's section. Main
     * thread; it must not call keel. */
    int (*check)(const char *value, char *why, size_t whylen);
} keel_config_key;

/* A module's table and the size of its struct. The descriptor points to
 * one (keel_module_desc.config). size and key_size let later ABIs grow
 * both structs at the end. */
typedef struct keel_config_schema {
    size_t size;     /* sizeof(keel_config_schema) as the module was built */
    size_t key_size; /* sizeof(keel_config_key) as the module was built */
    const keel_config_key *keys;
    size_t nkeys;
    size_t struct_size; /* bytes of the module's config struct */
} keel_config_schema;

#define KEEL_KEY(conf_type, field, key_name, key_type, ...)                                        \
    {                                                                                              \
        .offset = offsetof(conf_type, field), .field_size = sizeof(((conf_type *)0)->field),       \
        .name = key_name, .type = key_type, __VA_ARGS__                                            \
    }

/* Defines `static const keel_config_schema ident` for the array `keys` of
 * keel_config_key and the struct type `conf_type`. */
/* keel_module_config_scopes (ABI 1.8): called with one scope's struct of
 * the module (docs/configuration.md, "Scopes"). Return KEEL_OK, or
 * KEEL_ERR_CONFIG after reporting the value (keel_config_value_error). */
typedef int (*keel_config_scope_fn)(struct keel_module *module, const void *conf, void *userdata);

#define KEEL_CONFIG_SCHEMA(ident, conf_type, keys)                                                 \
    static const keel_config_schema ident = {sizeof(keel_config_schema), sizeof(keel_config_key),  \
                                             keys, sizeof(keys) / sizeof((keys)[0]),               \
                                             sizeof(conf_type)}

#ifdef __cplusplus
}
#endif

#endif
