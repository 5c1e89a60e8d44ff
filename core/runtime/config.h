/* core/runtime/config.h — the config file: a strict INI dialect with line numbers.
 *
 * Syntax:
 *   [section]                  names: [a-z0-9_-]+
 *   key = value                keys: [a-z0-9_.-]+, value trimmed, may be empty
 *   key = "quoted ; value"     double quotes keep ; and #; escapes \" and \\
 *   ; comment   # comment      at line start, or after whitespace in a value
 * A key may repeat (e.g. listen); a section may appear only once. Every value
 * remembers its file and line so that errors can name them.
 *
 * config_reader.c reads the dialect (and --set's assignments); config.c
 * keeps what it read and answers the lookups; config_values.h says what a
 * value's text means. Internal to libkeel; not thread-safe (used on the
 * main thread only).
 */
#ifndef KEEL_CORE_CONFIG_H
#define KEEL_CORE_CONFIG_H

#include <stddef.h>

typedef struct kl_config kl_config;
typedef struct kl_config_section kl_config_section;

typedef struct kl_config_value {
    const char *text; /* NUL-terminated, owned by the config */
    const char *file; /* file name, the config's name, or "--set" */
    unsigned line;    /* 1-based; 0 for values from --set */
} kl_config_value;

kl_config *kl_config_new(void);
void kl_config_free(kl_config *cfg);

/* Parse a file / a string into cfg. May be called once per config (a second
 * call fails with KEEL_ERR_STATE). On error returns KEEL_ERR_CONFIG (syntax)
 * or KEEL_ERR_NOTFOUND / KEEL_ERR_IO (file) and writes "FILE:LINE: reason"
 * (or "FILE: reason") into err. */
int kl_config_parse_file(kl_config *cfg, const char *path, char *err, size_t errlen);
int kl_config_parse_string(kl_config *cfg, const char *text, const char *name, char *err,
                           size_t errlen);

/* Apply "section.key=value" (the command line's --set). The first override of
 * a key drops the values the file gave it; later overrides of the same key
 * add values. Creates the section if needed. KEEL_ERR_CONFIG on a malformed
 * assignment, with the reason in err. May be called before or after parsing:
 * overrides always win over the file. */
int kl_config_override(kl_config *cfg, const char *assignment, char *err, size_t errlen);
/* The same, with the values and their messages labelled `label` (a static
 * string: "--set" on the command line, "keel_server_set" in an embedding
 * program) instead of "--set". */
int kl_config_override_from(kl_config *cfg, const char *assignment, const char *label, char *err,
                            size_t errlen);

/* Non-zero if v was read from a config file (so v->file is a path), zero
 * for a value from a config string or an override. */
int kl_config_value_from_file(const kl_config *cfg, const kl_config_value *v);

/* path as v's place says: relative to the folder of the config file v was
 * read from (as nginx's `include` and Caddy's paths are), as written when
 * it is absolute or empty or v came from --set or a config string (then
 * relative to the working directory). v NULL: a default, relative to the
 * folder of the config file the program loaded (the working directory
 * for a config string). A new string, or NULL if out of memory. The one
 * rule for every path a config holds: [keel] module_path, pid_file and
 * log, declared path keys (their defaults too), keel_config_path. */
char *kl_config_resolve(const kl_config *cfg, const kl_config_value *v, const char *path);

/* Sections in file order (sections created by overrides come last). */
size_t kl_config_section_count(const kl_config *cfg);
kl_config_section *kl_config_section_at(kl_config *cfg, size_t index);
kl_config_section *kl_config_section_find(kl_config *cfg, const char *name);
const char *kl_config_section_name(const kl_config_section *sec);
const char *kl_config_section_file(const kl_config_section *sec);
unsigned kl_config_section_line(const kl_config_section *sec);
/* Where the section was opened, for messages: "FILE:LINE", or the override's
 * label ("--set") for a section only an override made. Returns buf. */
const char *kl_config_section_where(const kl_config_section *sec, char *buf, size_t len);

/* Number of values a key has in the section (0 if absent or sec is NULL).
 * Marks the key as used. */
size_t kl_config_count(kl_config_section *sec, const char *key);

/* The index-th value of key (file order, overrides applied), or NULL.
 * Marks the key as used. sec may be NULL. */
const kl_config_value *kl_config_get(kl_config_section *sec, const char *key, size_t index);

/* The last value of key, or NULL, without marking it used: for the loader,
 * which reads a module's section before the module declares its keys. */
const kl_config_value *kl_config_peek(kl_config_section *sec, const char *key);

/* The single value of a key that must not repeat: NULL if absent; if the key
 * has several values returns KEEL_ERR_CONFIG with
 * "FILE:LINE: [section] key: given more than once (first at line N)" in err.
 * Marks the key as used. */
int kl_config_get_single(kl_config_section *sec, const char *key, const kl_config_value **out,
                         char *err, size_t errlen);

/* Finds the first key of the section that was never used and writes
 * "FILE:LINE: [section] unknown key 'KEY'" into err; returns KEEL_ERR_CONFIG,
 * or KEEL_OK when every key was used. */
int kl_config_check_unused(kl_config_section *sec, char *err, size_t errlen);

/* Where a value was written, for messages: "FILE:LINE", or "--set" for an
 * override. Returns buf. */
const char *kl_config_where(const kl_config_value *v, char *buf, size_t len);

/* Non-zero if name is a key the dialect accepts ([a-z0-9_.-]+): also the
 * rule for the names in a module's table of declared keys. */
int kl_config_valid_key(const char *name);

#endif
