/* fuzz_config — keel's config parser (core/runtime/config.c): the INI
 * dialect every operator writes, with FILE:LINE errors, the --set
 * overrides, and the value parsers (integers, sizes, durations, booleans).
 *
 * The input is parsed as a config; its last line, if it has an '=', is
 * also applied as an override; every value is read back and run through
 * each value parser. Checked besides ASan/UBSan: an error always comes with
 * a NUL-terminated message, and values read back are NUL-terminated
 * strings with a file name.
 *
 * Then the declared keys and scopes (runtime/config_schema.c, scopes.c):
 * the [m] section fills a struct through a table of every type, the
 * [listener], [site] and path sections are built into scopes for two
 * listeners, and a few hosts and paths (some taken from the input) choose
 * a scope; every chosen scope has a struct for the module. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <keel/types.h>

#include "runtime/config.h"
#include "runtime/config_values.h"
#include "runtime/config_schema.h"
#include "runtime/scopes.h"
#include "base/log.h"

#define CHECK(cond, what)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_config: %s\n", what);                                            \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

typedef struct fz_conf {
    const char *s, *addr, *path;
    int b, e;
    int64_t i;
    uint64_t size, ms;
    keel_config_list list;
} fz_conf;

static const char *const fz_choices[] = {"a", "b", NULL};

static const keel_config_key fz_keys[] = {
    KEEL_KEY(fz_conf, s, "s", KEEL_CONFIG_STRING, .scopes = KEEL_SCOPE_ANY, .def = "d"),
    KEEL_KEY(fz_conf, addr, "addr", KEEL_CONFIG_ADDRESS, .scopes = KEEL_SCOPE_SITE),
    KEEL_KEY(fz_conf, path, "path", KEEL_CONFIG_PATH, .scopes = KEEL_SCOPE_PATH, .def = "p"),
    KEEL_KEY(fz_conf, b, "b", KEEL_CONFIG_BOOL, .scopes = KEEL_SCOPE_LISTENER, .def = "on"),
    KEEL_KEY(fz_conf, e, "e", KEEL_CONFIG_ENUM, .scopes = KEEL_SCOPE_ANY, .choices = fz_choices),
    KEEL_KEY(fz_conf, i, "i", KEEL_CONFIG_INT, .scopes = KEEL_SCOPE_ANY, .min = -5, .max = 5),
    KEEL_KEY(fz_conf, size, "size", KEEL_CONFIG_SIZE, .scopes = KEEL_SCOPE_ANY, .max = 1 << 20),
    KEEL_KEY(fz_conf, ms, "ms", KEEL_CONFIG_DURATION, .scopes = KEEL_SCOPE_ANY),
    KEEL_KEY(fz_conf, list, "list", KEEL_CONFIG_PATH, .flags = KEEL_CONFIG_LIST,
             .scopes = KEEL_SCOPE_ANY),
};
KEEL_CONFIG_SCHEMA(fz_schema, fz_conf, fz_keys);

static void scopes(kl_config *cfg, const char *text)
{
    kl_schema_store store;
    char err[512];
    if (kl_schema_check(&fz_schema, err, sizeof err) != KEEL_OK)
        abort();
    if (kl_schema_fill(&fz_schema, cfg, kl_config_section_find(cfg, "m"), "m", &store) == KEEL_OK) {
        kl_scope_module mods[2] = {{"m", &fz_schema, store.conf}, {"n", NULL, NULL}};
        const char *names[2] = {"a", NULL};
        kl_scopes *sc = NULL;
        if (kl_scopes_build(cfg, mods, 2, names, 2, 421, &sc) == KEEL_OK && sc != NULL) {
            size_t n = strcspn(text, "\n");
            keel_str hosts[] = {{"example.com", 11},
                                {"A.B.example.org:80", 18},
                                {"[::1]:8", 7},
                                {"", 0},
                                {text, n < 300 ? n : 300}};
            keel_str paths[] = {{"/", 1}, {"/api/x", 6}, {text, strlen(text)}};
            for (size_t l = 0; l < 2; l++)
                for (size_t h = 0; h < sizeof hosts / sizeof hosts[0]; h++)
                    for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++) {
                        int status = 0;
                        const kl_scope *scope =
                            kl_scopes_select(sc, l, hosts[h], paths[p], &status);
                        CHECK(scope != NULL || status == 421, "no scope and no status");
                        CHECK(scope == NULL || scope->confs[0] != NULL,
                              "a scope without the struct");
                        if (scope != NULL) {
                            const fz_conf *c = scope->confs[0];
                            CHECK(c->s != NULL && c->path != NULL,
                                  "a merged struct lost a default");
                        }
                    }
            kl_scopes_free(sc);
        }
    }
    kl_schema_store_free(&store);
}

static void parse_values(const char *text)
{
    char err[256];
    int64_t i;
    uint64_t u;
    int b;
    kl_parse_int(text, -1000, 1000000, &i, err, sizeof err);
    kl_parse_size(text, &u, err, sizeof err);
    kl_parse_duration_ms(text, &u, err, sizeof err);
    kl_parse_bool(text, &b, err, sizeof err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int quiet;
    if (!quiet) {
        char err[64];
        quiet = kl_log_configure("stderr", KEEL_LOG_ERROR - 1, err, sizeof err) == KEEL_OK;
    }
    char *text = malloc(size + 1);
    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';

    kl_config *cfg = kl_config_new();
    if (cfg == NULL) {
        free(text);
        return 0;
    }
    char err[512];
    err[0] = 'x';
    err[sizeof err - 1] = 'x';
    int rc = kl_config_parse_string(cfg, text, "fuzz.conf", err, sizeof err);
    if (rc != KEEL_OK)
        CHECK(memchr(err, '\0', sizeof err) != NULL, "an error message without its NUL");

    /* The last line as a --set override. */
    const char *last = strrchr(text, '\n');
    last = last ? last + 1 : text;
    if (strchr(last, '=') != NULL) {
        err[0] = 'x';
        if (kl_config_override(cfg, last, err, sizeof err) != KEEL_OK)
            CHECK(memchr(err, '\0', sizeof err) != NULL, "an override error without its NUL");
    }

    char where[256];
    for (size_t s = 0; s < kl_config_section_count(cfg); s++) {
        kl_config_section *sec = kl_config_section_at(cfg, s);
        CHECK(kl_config_section_name(sec) != NULL, "a section without a name");
        /* Every key this config has, found through the section: keys are
         * what the parser stored, so look a few up by the names modules use. */
        static const char *const keys[] = {"listen", "workers", "modules", "max_body", "x", ""};
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            size_t n = kl_config_count(sec, keys[k]);
            for (size_t v = 0; v < n; v++) {
                const kl_config_value *val = kl_config_get(sec, keys[k], v);
                CHECK(val != NULL && val->text != NULL && val->file != NULL, "a missing value");
                kl_config_where(val, where, sizeof where);
                CHECK(memchr(where, '\0', sizeof where) != NULL, "a location without its NUL");
                parse_values(val->text);
            }
        }
        kl_config_check_unused(sec, err, sizeof err);
    }
    parse_values(text);
    scopes(cfg, text);
    kl_config_free(cfg);
    free(text);
    return 0;
}
