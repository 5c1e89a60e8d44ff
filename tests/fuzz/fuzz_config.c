/* fuzz_config — keel's config parser (core/runtime/config.c): the INI
 * dialect every operator writes, with FILE:LINE errors, the --set
 * overrides, and the value parsers (integers, sizes, durations, booleans).
 *
 * The input is parsed as a config; its last line, if it has an '=', is
 * also applied as an override; every value is read back and run through
 * each value parser. Checked besides ASan/UBSan: an error always comes with
 * a NUL-terminated message, and values read back are NUL-terminated
 * strings with a file name. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <keel/types.h>

#include "runtime/config.h"

#define CHECK(cond, what)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_config: %s\n", what);                                            \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

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
    kl_config_free(cfg);
    free(text);
    return 0;
}
