/* core/runtime/config_values.h — what a config value's text means: the
 * value parsers shared by the core's settings ([keel]), the declared keys
 * (config_schema.c) and the module getters (module_api.c).
 *
 * Each returns KEEL_OK, or KEEL_ERR_CONFIG with a short reason ("expected
 * an integer between 1 and 64") in err; err may be NULL. The caller adds
 * the value's place (kl_config_where). Internal to libkeel; any thread.
 */
#ifndef KEEL_CORE_CONFIG_VALUES_H
#define KEEL_CORE_CONFIG_VALUES_H

#include <stddef.h>
#include <stdint.h>

/* A decimal integer in [min, max], with an optional '-'. */
int kl_parse_int(const char *s, int64_t min, int64_t max, int64_t *out, char *err, size_t errlen);
/* on/off, yes/no, true/false, 1/0, any case: *out 1 or 0. */
int kl_parse_bool(const char *s, int *out, char *err, size_t errlen);
/* Bytes, with an optional k, m or g (powers of 1024): 64k, 1m, 2g. */
int kl_parse_size(const char *s, uint64_t *out, char *err, size_t errlen);
/* Milliseconds from 250ms, 10s, 5m, 1h; a bare number is seconds. */
int kl_parse_duration_ms(const char *s, uint64_t *out, char *err, size_t errlen);

#endif
