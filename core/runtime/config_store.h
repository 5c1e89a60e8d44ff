/* core/runtime/config_store.h — how text becomes a config: the calls with
 * which config_reader.c (the dialect of a file or a string, and --set's
 * assignments) fills the storage that config.c owns and looks values up
 * in. Nothing else includes this header: the rest of the core reads a
 * config through config.h.
 *
 * Internal to core/runtime; main thread only.
 */
#ifndef KEEL_CORE_CONFIG_STORE_H
#define KEEL_CORE_CONFIG_STORE_H

#include "runtime/config.h"

#if defined(__GNUC__)
#define KL_CONFIG_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define KL_CONFIG_PRINTF(f, a)
#endif

/* Writes "FILE:LINE: ", "FILE: " (line 0) or nothing (file NULL), then the
 * message, into err (which may be NULL). Returns KEEL_ERR_CONFIG. */
KL_CONFIG_PRINTF(5, 6)
int kl_config_fail(char *err, size_t errlen, const char *file, unsigned line, const char *fmt, ...);

/* "out of memory" into err; returns KEEL_ERR_NOMEM. */
int kl_config_nomem(char *err, size_t errlen);

/* Starts the one parse a config gets: remembers name (a path when is_file)
 * as the name the values point at. KEEL_ERR_STATE if cfg was parsed
 * before, KEEL_ERR_NOMEM; the reason in err. */
int kl_config_begin_parse(kl_config *cfg, const char *name, int is_file, char *err, size_t errlen);

/* The name kl_config_begin_parse kept: values read from the file point at
 * this very string (kl_config_value_from_file relies on it). */
const char *kl_config_name(const kl_config *cfg);

/* The section named name[0, len), or NULL. */
kl_config_section *kl_config_section_lookup(const kl_config *cfg, const char *name, size_t len);

/* The section the file opens at file:line, placed after the sections the
 * file opened before it: a new one, or the one an override made before the
 * parse, moved there. The caller has checked that the file did not open it
 * already. NULL if out of memory. */
kl_config_section *kl_config_section_from_file(kl_config *cfg, const char *name, size_t len,
                                               const char *file, unsigned line);

/* The section an override names: the existing one, or a new one after all
 * others, labelled `label`. NULL if out of memory. */
kl_config_section *kl_config_section_from_set(kl_config *cfg, const char *name, size_t len,
                                              const char *label);

/* Appends text[0, len) to the values of key[0, klen) in sec: to the file's
 * values when line > 0, to the overrides (which hide the file's) when line
 * is 0. file is kept as a pointer. KEEL_OK or KEEL_ERR_NOMEM. */
int kl_config_add_value(kl_config *cfg, kl_config_section *sec, const char *key, size_t klen,
                        const char *text, size_t len, const char *file, unsigned line);

#endif
