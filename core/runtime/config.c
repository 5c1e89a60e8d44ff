/* core/runtime/config.c — a config's storage and its lookups (config.h);
 * config_reader.c fills it through config_store.h.
 *
 * Storage: a config owns its sections, a section owns its keys, a key owns
 * two lists of values: the ones the file gave and the ones --set gave. When
 * a key has any override, lookups see only the overrides; this is how
 * "overrides win" holds whether kl_config_override runs before or after the
 * parse. Every value is one allocation (struct + text), so the pointers
 * handed out stay valid until kl_config_free.
 */
#include "runtime/config_store.h"
#include "base/util.h"

#include <keel/types.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ptrvec {
    void **v;
    size_t n, cap;
} ptrvec;

typedef struct kl_key {
    char *name;
    ptrvec file_vals;      /* kl_config_value *, in file order */
    ptrvec set_vals;       /* from --set; when non-empty they hide file_vals */
    unsigned long set_seq; /* order of the key's first override */
    int used;
} kl_key;

struct kl_config_section {
    char *name;
    const char *file;
    unsigned line; /* 0 while only overrides have named the section */
    ptrvec keys;   /* kl_key *, in order of first appearance */
};

struct kl_config {
    /* The parsed file's (or string's) name, which values point at; NULL
     * until the parse (a config is parsed once). */
    char *name;
    int is_file;  /* parsed from a file (name is its path), not from a string */
    ptrvec sects; /* kl_config_section *: [0, nfile) from the file, then --set */
    size_t nfile;
    unsigned long set_seq;
};

/* ---- storage ---------------------------------------------------------- */

static int vec_push(ptrvec *a, void *p)
{
    if (kl_grow((void **)&a->v, &a->cap, a->n + 1, sizeof *a->v) != KEEL_OK)
        return KEEL_ERR_NOMEM;
    a->v[a->n++] = p;
    return KEEL_OK;
}

static kl_config_value *value_new(const char *text, size_t len, const char *file, unsigned line)
{
    kl_config_value *v = malloc(sizeof *v + len + 1);
    if (!v)
        return NULL;
    char *t = (char *)(v + 1);
    memcpy(t, text, len);
    t[len] = '\0';
    v->text = t;
    v->file = file;
    v->line = line;
    return v;
}

static void vals_free(ptrvec *a)
{
    for (size_t i = 0; i < a->n; i++)
        free(a->v[i]);
    free(a->v);
}

static void section_free(kl_config_section *s)
{
    for (size_t i = 0; i < s->keys.n; i++) {
        kl_key *k = s->keys.v[i];
        vals_free(&k->file_vals);
        vals_free(&k->set_vals);
        free(k->name);
        free(k);
    }
    free(s->keys.v);
    free(s->name);
    free(s);
}

static kl_config_section *section_lookup(const kl_config *cfg, const char *name, size_t len,
                                         size_t *index)
{
    for (size_t i = 0; i < cfg->sects.n; i++) {
        kl_config_section *s = cfg->sects.v[i];
        if (strlen(s->name) == len && memcmp(s->name, name, len) == 0) {
            if (index)
                *index = i;
            return s;
        }
    }
    return NULL;
}

/* Adds a section at position pos of cfg->sects. */
static kl_config_section *section_add(kl_config *cfg, const char *name, size_t len,
                                      const char *file, unsigned line, size_t pos)
{
    kl_config_section *s = calloc(1, sizeof *s);
    if (!s || !(s->name = kl_strndup(name, len)) || vec_push(&cfg->sects, s) != KEEL_OK) {
        if (s)
            free(s->name);
        free(s);
        return NULL;
    }
    s->file = file;
    s->line = line;
    /* vec_push appended it; slide it down to pos. */
    memmove(&cfg->sects.v[pos + 1], &cfg->sects.v[pos],
            (cfg->sects.n - 1 - pos) * sizeof cfg->sects.v[0]);
    cfg->sects.v[pos] = s;
    return s;
}

static kl_key *key_lookup(const kl_config_section *sec, const char *name, size_t len)
{
    for (size_t i = 0; i < sec->keys.n; i++) {
        kl_key *k = sec->keys.v[i];
        if (strlen(k->name) == len && memcmp(k->name, name, len) == 0)
            return k;
    }
    return NULL;
}

static kl_key *key_get_or_add(kl_config_section *sec, const char *name, size_t len)
{
    kl_key *k = key_lookup(sec, name, len);
    if (k)
        return k;
    k = calloc(1, sizeof *k);
    if (!k || !(k->name = kl_strndup(name, len)) || vec_push(&sec->keys, k) != KEEL_OK) {
        if (k)
            free(k->name);
        free(k);
        return NULL;
    }
    return k;
}

/* The values lookups see: the overrides if there are any, else the file's. */
static const ptrvec *effective(const kl_key *k)
{
    return k->set_vals.n ? &k->set_vals : &k->file_vals;
}

static int add_value(ptrvec *list, const char *text, size_t len, const char *file, unsigned line)
{
    kl_config_value *v = value_new(text, len, file, line);
    if (!v)
        return KEEL_ERR_NOMEM;
    if (vec_push(list, v) != KEEL_OK) {
        free(v);
        return KEEL_ERR_NOMEM;
    }
    return KEEL_OK;
}

kl_config *kl_config_new(void)
{
    return calloc(1, sizeof(kl_config));
}

void kl_config_free(kl_config *cfg)
{
    if (!cfg)
        return;
    for (size_t i = 0; i < cfg->sects.n; i++)
        section_free(cfg->sects.v[i]);
    free(cfg->sects.v);
    free(cfg->name);
    free(cfg);
}

/* ---- filling (config_store.h) ----------------------------------------- */

/* Writes "FILE:LINE: ", "FILE: " (line 0) or nothing (file NULL), then the
 * message. Tolerates err == NULL. */
static void vseterr(char *err, size_t errlen, const char *file, unsigned line, const char *fmt,
                    va_list ap)
{
    int n = 0;
    if (!err || errlen == 0)
        return;
    err[0] = '\0';
    if (file && line)
        n = snprintf(err, errlen, "%s:%u: ", file, line);
    else if (file)
        n = snprintf(err, errlen, "%s: ", file);
    if (n < 0 || (size_t)n >= errlen)
        return;
    vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
}

int kl_config_fail(char *err, size_t errlen, const char *file, unsigned line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vseterr(err, errlen, file, line, fmt, ap);
    va_end(ap);
    return KEEL_ERR_CONFIG;
}

int kl_config_nomem(char *err, size_t errlen)
{
    kl_config_fail(err, errlen, NULL, 0, "out of memory");
    return KEEL_ERR_NOMEM;
}

int kl_config_begin_parse(kl_config *cfg, const char *name, int is_file, char *err, size_t errlen)
{
    if (cfg->name) {
        kl_config_fail(err, errlen, name, 0, "the config was already parsed from %s", cfg->name);
        return KEEL_ERR_STATE;
    }
    if (!(cfg->name = kl_strdup(name)))
        return kl_config_nomem(err, errlen);
    cfg->is_file = is_file;
    return KEEL_OK;
}

const char *kl_config_name(const kl_config *cfg)
{
    return cfg->name;
}

kl_config_section *kl_config_section_lookup(const kl_config *cfg, const char *name, size_t len)
{
    return section_lookup(cfg, name, len, NULL);
}

kl_config_section *kl_config_section_from_file(kl_config *cfg, const char *name, size_t len,
                                               const char *file, unsigned line)
{
    size_t index;
    kl_config_section *s = section_lookup(cfg, name, len, &index);
    if (s) {
        /* Named by --set before the parse: it now takes its file position. */
        memmove(&cfg->sects.v[cfg->nfile + 1], &cfg->sects.v[cfg->nfile],
                (index - cfg->nfile) * sizeof cfg->sects.v[0]);
        cfg->sects.v[cfg->nfile] = s;
    } else if (!(s = section_add(cfg, name, len, file, line, cfg->nfile))) {
        return NULL;
    }
    s->file = file;
    s->line = line;
    cfg->nfile++;
    return s;
}

kl_config_section *kl_config_section_from_set(kl_config *cfg, const char *name, size_t len,
                                              const char *label)
{
    kl_config_section *s = section_lookup(cfg, name, len, NULL);
    return s ? s : section_add(cfg, name, len, label, 0, cfg->sects.n);
}

int kl_config_add_value(kl_config *cfg, kl_config_section *sec, const char *key, size_t klen,
                        const char *text, size_t len, const char *file, unsigned line)
{
    kl_key *k = key_get_or_add(sec, key, klen);
    if (!k)
        return KEEL_ERR_NOMEM;
    if (line > 0)
        return add_value(&k->file_vals, text, len, file, line);
    if (k->set_vals.n == 0)
        k->set_seq = ++cfg->set_seq;
    return add_value(&k->set_vals, text, len, file, line);
}

/* ---- lookups ---------------------------------------------------------- */

int kl_config_value_from_file(const kl_config *cfg, const kl_config_value *v)
{
    /* Overrides have line 0; a file's values point at its name. */
    return cfg && v && cfg->is_file && v->line > 0 && v->file == cfg->name;
}

char *kl_config_resolve(const kl_config *cfg, const kl_config_value *v, const char *path)
{
    const char *file = v != NULL ? (kl_config_value_from_file(cfg, v) ? v->file : NULL)
                       : cfg != NULL && cfg->is_file ? cfg->name
                                                     : NULL;
    size_t base = file != NULL ? kl_path_dir_len(file) : 0;
    if (base == 0 || path[0] == '\0' || kl_path_is_absolute(path))
        return kl_strdup(path);
    char *folder = kl_strndup(file, base);
    char *joined = folder ? kl_path_join(folder, path) : NULL;
    free(folder);
    return joined;
}

size_t kl_config_section_count(const kl_config *cfg)
{
    return cfg ? cfg->sects.n : 0;
}

kl_config_section *kl_config_section_at(kl_config *cfg, size_t index)
{
    return cfg && index < cfg->sects.n ? cfg->sects.v[index] : NULL;
}

kl_config_section *kl_config_section_find(kl_config *cfg, const char *name)
{
    return cfg && name ? kl_config_section_lookup(cfg, name, strlen(name)) : NULL;
}

const char *kl_config_section_name(const kl_config_section *sec)
{
    return sec ? sec->name : NULL;
}

const char *kl_config_section_file(const kl_config_section *sec)
{
    return sec ? sec->file : NULL;
}

unsigned kl_config_section_line(const kl_config_section *sec)
{
    return sec ? sec->line : 0;
}

/* "FILE:LINE", or only the label for what an override wrote (line 0):
 * "--set", not "--set:0". */
static const char *place(const char *file, unsigned line, char *buf, size_t len)
{
    if (line == 0)
        snprintf(buf, len, "%s", file);
    else
        snprintf(buf, len, "%s:%u", file, line);
    return buf;
}

const char *kl_config_section_where(const kl_config_section *sec, char *buf, size_t len)
{
    if (sec == NULL) {
        snprintf(buf, len, "(no section)");
        return buf;
    }
    return place(sec->file, sec->line, buf, len);
}

/* Finds key and marks it used; NULL if sec or key is NULL or it is absent. */
static kl_key *use_key(kl_config_section *sec, const char *key)
{
    kl_key *k = sec && key ? key_lookup(sec, key, strlen(key)) : NULL;
    if (k)
        k->used = 1;
    return k;
}

size_t kl_config_count(kl_config_section *sec, const char *key)
{
    kl_key *k = use_key(sec, key);
    return k ? effective(k)->n : 0;
}

const kl_config_value *kl_config_get(kl_config_section *sec, const char *key, size_t index)
{
    kl_key *k = use_key(sec, key);
    return k && index < effective(k)->n ? effective(k)->v[index] : NULL;
}

const kl_config_value *kl_config_peek(kl_config_section *sec, const char *key)
{
    kl_key *k = sec && key ? key_lookup(sec, key, strlen(key)) : NULL;
    const ptrvec *vals = k ? effective(k) : NULL;
    return vals && vals->n > 0 ? vals->v[vals->n - 1] : NULL;
}

int kl_config_get_single(kl_config_section *sec, const char *key, const kl_config_value **out,
                         char *err, size_t errlen)
{
    kl_key *k = use_key(sec, key);
    const ptrvec *vals = k ? effective(k) : NULL;

    if (out)
        *out = NULL;
    if (!vals)
        return KEEL_OK;
    if (vals->n > 1) {
        const kl_config_value *first = vals->v[0], *second = vals->v[1];
        if (first->line) /* from the file */
            return kl_config_fail(err, errlen, second->file, second->line,
                                  "[%s] %s: given more than once (first at line %u)", sec->name,
                                  k->name, first->line);
        return kl_config_fail(err, errlen, second->file, 0, "[%s] %s: given more than once",
                              sec->name, k->name);
    }
    if (out)
        *out = vals->v[0];
    return KEEL_OK;
}

int kl_config_check_unused(kl_config_section *sec, char *err, size_t errlen)
{
    const kl_key *worst = NULL;
    int worst_set = 0;
    unsigned long worst_pos = 0;

    if (!sec)
        return KEEL_OK;
    /* Report the unused key whose (effective) first value comes first: file
     * lines in order, then overrides in the order they were given. */
    for (size_t i = 0; i < sec->keys.n; i++) {
        const kl_key *k = sec->keys.v[i];
        if (k->used)
            continue;
        int from_set = k->set_vals.n > 0;
        const kl_config_value *v = effective(k)->v[0];
        unsigned long pos = from_set ? k->set_seq : v->line;
        if (!worst || from_set < worst_set || (from_set == worst_set && pos < worst_pos)) {
            worst = k;
            worst_set = from_set;
            worst_pos = pos;
        }
    }
    if (!worst)
        return KEEL_OK;
    const kl_config_value *v = effective(worst)->v[0];
    return kl_config_fail(err, errlen, v->file, v->line, "[%s] unknown key '%s'", sec->name,
                          worst->name);
}

const char *kl_config_where(const kl_config_value *v, char *buf, size_t len)
{
    return place(v->file, v->line, buf, len);
}
