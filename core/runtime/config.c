/* core/config.c — the strict INI dialect described in config.h.
 *
 * Storage: a config owns its sections, a section owns its keys, a key owns
 * two lists of values: the ones the file gave and the ones --set gave. When
 * a key has any override, lookups see only the overrides; this is how
 * "overrides win" holds whether kl_config_override runs before or after the
 * parse. Every value is one allocation (struct + text), so the pointers
 * handed out stay valid until kl_config_free.
 */
#include "runtime/config.h"
#include "base/util.h"

#include <keel/types.h>

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _WIN32
#include <sys/stat.h>
#endif

#define LINE_CAP  65536u /* longest accepted line in bytes, without its end */
#define SET_FILE  "--set"
#define SECT_HELP "use a-z 0-9 _ -"
#define KEY_HELP  "use a-z 0-9 _ . -"

#if defined(__GNUC__)
#define KL_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define KL_PRINTF(f, a)
#endif

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
    char *name;   /* the parsed file's (or string's) name; values point at it */
    int parsed;   /* a config is parsed once */
    int is_file;  /* parsed from a file (name is its path), not from a string */
    ptrvec sects; /* kl_config_section *: [0, nfile) from the file, then --set */
    size_t nfile;
    unsigned long set_seq;
};

/* ---- small helpers ---------------------------------------------------- */

static int vec_push(ptrvec *a, void *p)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 4;
        void **v = realloc(a->v, cap * sizeof *v);
        if (!v)
            return KEEL_ERR_NOMEM;
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = p;
    return KEEL_OK;
}

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

static int is_ws(char c)
{
    return c == ' ' || c == '\t';
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int is_sect_char(char c)
{
    return (c >= 'a' && c <= 'z') || is_digit(c) || c == '_' || c == '-';
}

static int is_key_char(char c)
{
    return is_sect_char(c) || c == '.';
}

/* The first character of s[0, n) that pred rejects, or NULL. */
static const char *first_bad(const char *s, size_t n, int (*pred)(char))
{
    for (size_t i = 0; i < n; i++)
        if (!pred(s[i]))
            return s + i;
    return NULL;
}

/* "'x'" for a printable character, "byte 0xNN" otherwise. */
static const char *describe(char c, char buf[16])
{
    unsigned char u = (unsigned char)c;
    if (u >= 0x20 && u < 0x7f)
        snprintf(buf, 16, "'%c'", c);
    else
        snprintf(buf, 16, "byte 0x%02X", u);
    return buf;
}

static const char *skip_ws(const char *p)
{
    while (is_ws(*p))
        p++;
    return p;
}

/* Trims [*s, *s + *n) in place. */
static void trim(const char **s, size_t *n)
{
    while (*n && is_ws(**s)) {
        (*s)++;
        (*n)--;
    }
    while (*n && is_ws((*s)[*n - 1]))
        (*n)--;
}

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

KL_PRINTF(5, 6)
static int fail(char *err, size_t errlen, const char *file, unsigned line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vseterr(err, errlen, file, line, fmt, ap);
    va_end(ap);
    return KEEL_ERR_CONFIG;
}

static int nomem(char *err, size_t errlen)
{
    fail(err, errlen, NULL, 0, "out of memory");
    return KEEL_ERR_NOMEM;
}

/* ---- the data model --------------------------------------------------- */

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
    if (!s || !(s->name = dup_n(name, len)) || vec_push(&cfg->sects, s) != KEEL_OK) {
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
    if (!k || !(k->name = dup_n(name, len)) || vec_push(&sec->keys, k) != KEEL_OK) {
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

/* ---- the parser ------------------------------------------------------- */

typedef struct reader {
    FILE *fp;      /* reading a file, or */
    const char *s; /* reading a string */
    char *buf;     /* LINE_CAP + 2 bytes */
    unsigned line; /* number of the line last read */
} reader;

/* Reads the next line into r->buf, NUL-terminated and without its "\n" or
 * "\r\n". Returns 1 for a line, 0 at the end of the input, or an error. */
static int read_line(reader *r, const char *name, char *err, size_t errlen)
{
    size_t n = 0;
    int c, any = 0;

    r->line++;
    for (;;) {
        if (r->fp)
            c = getc(r->fp);
        else
            c = *r->s ? (unsigned char)*r->s++ : EOF;
        if (c == EOF || c == '\n') {
            any |= c == '\n';
            break;
        }
        any = 1;
        if (c == '\0')
            return fail(err, errlen, name, r->line, "NUL byte in line");
        if (n > LINE_CAP) /* room for one more byte: a '\r' that may end it */
            return fail(err, errlen, name, r->line, "line longer than %u bytes", LINE_CAP);
        r->buf[n++] = (char)c;
    }
    if (r->fp && ferror(r->fp)) {
        fail(err, errlen, name, 0, "cannot read: %s", strerror(errno));
        return KEEL_ERR_IO;
    }
    if (n && r->buf[n - 1] == '\r')
        n--;
    if (n > LINE_CAP)
        return fail(err, errlen, name, r->line, "line longer than %u bytes", LINE_CAP);
    r->buf[n] = '\0';
    return any;
}

static int is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* A scope's header: [site ...], [listener ...] or [/...]. */
static int is_scope_header(const char *name, size_t len)
{
    return name[0] == '/' || (len > 5 && memcmp(name, "site", 4) == 0 && is_blank(name[4])) ||
           (len > 9 && memcmp(name, "listener", 8) == 0 && is_blank(name[8]));
}

/* Host names (and *.wildcards), listener names, and path prefixes as an
 * origin-form path may hold them (RFC 3986 3.3 pchar, less '%' and the
 * sub-delims a config would have to quote). */
static int is_scope_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '-' || c == '_' || c == '*' || c == '/' || c == '~' || c == ':' || c == '@' ||
           c == '+' || c == ' ' || c == '\t';
}

/* Copies name[0..len) into out with runs of blanks made one space and the
 * ends trimmed; returns the new length. */
static size_t squeeze_spaces(const char *name, size_t len, char *out)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (is_blank(name[i])) {
            if (n > 0 && out[n - 1] != ' ')
                out[n++] = ' ';
        } else {
            out[n++] = name[i];
        }
    }
    while (n > 0 && out[n - 1] == ' ')
        n--;
    out[n] = '\0';
    return n;
}

static int parse_header(kl_config *cfg, kl_config_section **cur, char *p, unsigned line, char *err,
                        size_t errlen)
{
    const char *file = cfg->name;
    char *name = p + 1, *end = strchr(name, ']');
    char what[16];

    if (!end)
        return fail(err, errlen, file, line, "malformed section header: missing ']'");
    size_t len = (size_t)(end - name);
    if (len == 0)
        return fail(err, errlen, file, line, "malformed section header: empty name");
    char scoped[1024];
    if (is_scope_header(name, len)) {
        if (len >= sizeof scoped)
            return fail(err, errlen, file, line, "scope header longer than %u bytes",
                        (unsigned)sizeof scoped - 1);
        /* [site NAME...], [site NAME /prefix], [/prefix], [listener NAME]
         * (docs/configuration.md): kept with single spaces, so that one
         * scope written twice is found as a duplicate. */
        const char *bad = first_bad(name, len, is_scope_char);
        if (bad)
            return fail(err, errlen, file, line, "invalid scope header '%.*s': %s not allowed",
                        (int)len, name, describe(*bad, what));
        len = squeeze_spaces(name, len, scoped);
        name = scoped;
    } else {
        const char *bad = first_bad(name, len, is_sect_char);
        if (bad)
            return fail(err, errlen, file, line, "invalid section name '%.*s': %s not allowed (%s)",
                        (int)len, name, describe(*bad, what), SECT_HELP);
    }
    const char *rest = skip_ws(end + 1);
    if (*rest && *rest != ';' && *rest != '#')
        return fail(err, errlen, file, line, "malformed section header: unexpected text after ']'");

    size_t index;
    kl_config_section *s = section_lookup(cfg, name, len, &index);
    if (s && s->line)
        return fail(err, errlen, file, line, "duplicate section [%s] (first at line %u)", s->name,
                    s->line);
    if (s) {
        /* Named by --set before the parse: it now takes its file position. */
        memmove(&cfg->sects.v[cfg->nfile + 1], &cfg->sects.v[cfg->nfile],
                (index - cfg->nfile) * sizeof cfg->sects.v[0]);
        cfg->sects.v[cfg->nfile] = s;
    } else if (!(s = section_add(cfg, name, len, file, line, cfg->nfile))) {
        return nomem(err, errlen);
    }
    s->file = file;
    s->line = line;
    cfg->nfile++;
    *cur = s;
    return KEEL_OK;
}

/* Unquotes the value that starts at the '"' at p, in place. On success the
 * text is [p, p + *len). */
static int parse_quoted(char *p, size_t *len, const char *file, unsigned line, char *err,
                        size_t errlen)
{
    const char *src = p + 1;
    char *dst = p;

    for (;;) {
        if (*src == '\0')
            return fail(err, errlen, file, line, "unterminated quoted value");
        if (*src == '"')
            break;
        if (*src == '\\') {
            if (src[1] != '"' && src[1] != '\\') {
                if (src[1] == '\0')
                    return fail(err, errlen, file, line, "unterminated quoted value");
                char what[16];
                return fail(err, errlen, file, line,
                            "'\\' followed by %s in quoted value: only \\\" and \\\\ are escapes",
                            describe(src[1], what));
            }
            src++;
        }
        *dst++ = *src++;
    }
    const char *rest = skip_ws(src + 1);
    if (*rest && *rest != ';' && *rest != '#')
        return fail(err, errlen, file, line, "unexpected text after closing quote");
    *len = (size_t)(dst - p);
    return KEEL_OK;
}

static int parse_line(kl_config *cfg, kl_config_section **cur, char *p, unsigned line, char *err,
                      size_t errlen)
{
    const char *file = cfg->name;
    char what[16];

    p = (char *)skip_ws(p);
    if (*p == '\0' || *p == ';' || *p == '#')
        return KEEL_OK;
    if (*p == '[')
        return parse_header(cfg, cur, p, line, err, errlen);

    char *key = p;
    while (*p && !is_ws(*p) && *p != '=')
        p++;
    size_t klen = (size_t)(p - key);
    if (klen == 0)
        return fail(err, errlen, file, line, "missing key before '='");
    const char *bad = first_bad(key, klen, is_key_char);
    if (bad)
        return fail(err, errlen, file, line, "invalid key '%.*s': %s not allowed (%s)", (int)klen,
                    key, describe(*bad, what), KEY_HELP);
    p = (char *)skip_ws(p);
    if (*p != '=')
        return fail(err, errlen, file, line, "missing '=' after key '%.*s'", (int)klen, key);
    if (!*cur)
        return fail(err, errlen, file, line, "key '%.*s' outside of a section", (int)klen, key);
    p = (char *)skip_ws(p + 1);

    size_t vlen = 0;
    if (*p == '"') {
        int rc = parse_quoted(p, &vlen, file, line, err, errlen);
        if (rc != KEEL_OK)
            return rc;
    } else {
        /* A ';' or '#' after whitespace starts a comment. p[-1] exists: at
         * worst it is the '='. */
        char *q = p;
        while (*q && !((*q == ';' || *q == '#') && is_ws(q[-1])))
            q++;
        while (q > p && is_ws(q[-1]))
            q--;
        vlen = (size_t)(q - p);
    }

    kl_key *k = key_get_or_add(*cur, key, klen);
    if (!k || add_value(&k->file_vals, p, vlen, file, line) != KEEL_OK)
        return nomem(err, errlen);
    return KEEL_OK;
}

static int parse(kl_config *cfg, FILE *fp, const char *text, char *err, size_t errlen)
{
    reader r = {fp, text, malloc(LINE_CAP + 2), 0};
    kl_config_section *cur = NULL;
    int rc;

    if (!r.buf)
        return nomem(err, errlen);
    while ((rc = read_line(&r, cfg->name, err, errlen)) == 1) {
        char *p = r.buf;
        if (r.line == 1 && strncmp(p, "\xEF\xBB\xBF", 3) == 0) /* UTF-8 BOM */
            p += 3;
        rc = parse_line(cfg, &cur, p, r.line, err, errlen);
        if (rc != KEEL_OK)
            break;
    }
    free(r.buf);
    return rc;
}

static int begin_parse(kl_config *cfg, const char *name, char *err, size_t errlen)
{
    if (cfg->parsed) {
        fail(err, errlen, name, 0, "the config was already parsed from %s", cfg->name);
        return KEEL_ERR_STATE;
    }
    if (!(cfg->name = dup_n(name, strlen(name))))
        return nomem(err, errlen);
    cfg->parsed = 1;
    return KEEL_OK;
}

/* A file that cannot be opened leaves cfg untouched, so that the caller may
 * fall back to another file or an embedded default. */
int kl_config_parse_file(kl_config *cfg, const char *path, char *err, size_t errlen)
{
    if (!cfg || !path)
        return KEEL_ERR_INVAL;
    if (cfg->parsed)
        return begin_parse(cfg, path, err, errlen);
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        int e = errno;
#ifdef _WIN32
        /* Windows refuses to open a directory with EACCES: name the real
         * problem, as the read error does on POSIX. */
        struct _stat64 st;
        if (e == EACCES && _stat64(path, &st) == 0 && (st.st_mode & _S_IFDIR))
            e = EISDIR;
#endif
        fail(err, errlen, path, 0, "cannot open: %s", strerror(e));
        return e == ENOENT ? KEEL_ERR_NOTFOUND : KEEL_ERR_IO;
    }
    int rc = begin_parse(cfg, path, err, errlen);
    if (rc == KEEL_OK) {
        cfg->is_file = 1;
        rc = parse(cfg, fp, NULL, err, errlen);
    }
    fclose(fp);
    return rc;
}

int kl_config_parse_string(kl_config *cfg, const char *text, const char *name, char *err,
                           size_t errlen)
{
    if (!cfg || !text)
        return KEEL_ERR_INVAL;
    int rc = begin_parse(cfg, name ? name : "<string>", err, errlen);
    return rc == KEEL_OK ? parse(cfg, NULL, text, err, errlen) : rc;
}

/* ---- overrides -------------------------------------------------------- */

int kl_config_override(kl_config *cfg, const char *assignment, char *err, size_t errlen)
{
    return kl_config_override_from(cfg, assignment, SET_FILE, err, errlen);
}

int kl_config_override_from(kl_config *cfg, const char *assignment, const char *label, char *err,
                            size_t errlen)
{
    const char *a = assignment, *eq, *dot;
    char what[16];

    if (!cfg || !a)
        return KEEL_ERR_INVAL;
    eq = strchr(a, '=');
    dot = eq ? memchr(a, '.', (size_t)(eq - a)) : NULL;
    if (!dot)
        return fail(err, errlen, NULL, 0, "%s '%s': expected section.key=value", label, a);

    const char *sname = a, *kname = dot + 1, *val = eq + 1;
    size_t slen = (size_t)(dot - a), klen = (size_t)(eq - kname), vlen = strlen(val);
    trim(&sname, &slen);
    trim(&kname, &klen);
    trim(&val, &vlen);
    if (slen == 0 || klen == 0)
        return fail(err, errlen, NULL, 0, "%s '%s': expected section.key=value", label, a);
    const char *bad = first_bad(sname, slen, is_sect_char);
    if (bad)
        return fail(err, errlen, NULL, 0,
                    "%s '%s': invalid section name '%.*s': %s not allowed (%s)", label, a,
                    (int)slen, sname, describe(*bad, what), SECT_HELP);
    bad = first_bad(kname, klen, is_key_char);
    if (bad)
        return fail(err, errlen, NULL, 0, "%s '%s': invalid key '%.*s': %s not allowed (%s)", label,
                    a, (int)klen, kname, describe(*bad, what), KEY_HELP);

    kl_config_section *s = section_lookup(cfg, sname, slen, NULL);
    if (!s && !(s = section_add(cfg, sname, slen, label, 0, cfg->sects.n)))
        return nomem(err, errlen);
    kl_key *k = key_get_or_add(s, kname, klen);
    if (!k)
        return nomem(err, errlen);
    if (k->set_vals.n == 0)
        k->set_seq = ++cfg->set_seq;
    if (add_value(&k->set_vals, val, vlen, label, 0) != KEEL_OK)
        return nomem(err, errlen);
    return KEEL_OK;
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
        return dup_n(path, strlen(path));
    char *folder = dup_n(file, base);
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
    return cfg && name ? section_lookup(cfg, name, strlen(name), NULL) : NULL;
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

const char *kl_config_section_where(const kl_config_section *sec, char *buf, size_t len)
{
    /* A section only an override made has no line: "--set", not "--set:0". */
    if (sec == NULL)
        snprintf(buf, len, "(no section)");
    else if (sec->line == 0)
        snprintf(buf, len, "%s", sec->file);
    else
        snprintf(buf, len, "%s:%u", sec->file, sec->line);
    return buf;
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
            return fail(err, errlen, second->file, second->line,
                        "[%s] %s: given more than once (first at line %u)", sec->name, k->name,
                        first->line);
        return fail(err, errlen, second->file, 0, "[%s] %s: given more than once", sec->name,
                    k->name);
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
    return fail(err, errlen, v->file, v->line, "[%s] unknown key '%s'", sec->name, worst->name);
}

/* ---- value parsers ---------------------------------------------------- */

/* Parses the leading decimal digits of s into *out (at most limit); returns
 * the first byte after them, or NULL if there are none or they exceed limit. */
static const char *parse_digits(const char *s, uint64_t limit, uint64_t *out)
{
    uint64_t v = 0;
    if (!is_digit(*s))
        return NULL;
    for (; is_digit(*s); s++) {
        unsigned d = (unsigned)(*s - '0');
        if (v > (limit - d) / 10)
            return NULL;
        v = v * 10 + d;
    }
    *out = v;
    return s;
}

int kl_parse_int(const char *s, int64_t min, int64_t max, int64_t *out, char *err, size_t errlen)
{
    uint64_t mag;
    int neg = s && *s == '-';
    const char *end =
        s ? parse_digits(s + neg, neg ? (uint64_t)INT64_MAX + 1 : INT64_MAX, &mag) : NULL;

    if (end && *end == '\0') {
        /* mag may be INT64_MAX + 1: negate mag - 1 so nothing overflows */
        int64_t v = !neg ? (int64_t)mag : mag == 0 ? 0 : -(int64_t)(mag - 1) - 1;
        if (v >= min && v <= max) {
            *out = v;
            return KEEL_OK;
        }
    }
    return fail(err, errlen, NULL, 0, "expected an integer between %" PRId64 " and %" PRId64, min,
                max);
}

static int same_nocase(const char *a, const char *b)
{
    for (; *a && *b; a++, b++) {
        char x = (*a >= 'A' && *a <= 'Z') ? (char)(*a - 'A' + 'a') : *a;
        if (x != *b)
            return 0;
    }
    return *a == *b;
}

int kl_parse_bool(const char *s, int *out, char *err, size_t errlen)
{
    static const char *const words[] = {"off", "on", "no", "yes", "false", "true", "0", "1"};
    for (size_t i = 0; s && i < sizeof words / sizeof words[0]; i++) {
        if (same_nocase(s, words[i])) {
            *out = (int)(i % 2);
            return KEEL_OK;
        }
    }
    return fail(err, errlen, NULL, 0, "expected on/off, yes/no, true/false or 1/0");
}

int kl_parse_size(const char *s, uint64_t *out, char *err, size_t errlen)
{
    uint64_t v;
    const char *end = s ? parse_digits(s, UINT64_MAX, &v) : NULL;
    unsigned shift = 0;

    if (end && *end) {
        switch (*end) {
        case 'k':
        case 'K':
            shift = 10;
            break;
        case 'm':
        case 'M':
            shift = 20;
            break;
        case 'g':
        case 'G':
            shift = 30;
            break;
        default:
            end = NULL;
        }
        if (end && end[1] != '\0')
            end = NULL;
    }
    if (!end || v > UINT64_MAX >> shift)
        return fail(err, errlen, NULL, 0, "expected a size such as 64k or 1m");
    *out = v << shift;
    return KEEL_OK;
}

int kl_parse_duration_ms(const char *s, uint64_t *out, char *err, size_t errlen)
{
    static const struct {
        const char *suffix;
        uint64_t ms;
    } units[] = {{"", 1000}, {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}};
    uint64_t v;
    const char *end = s ? parse_digits(s, UINT64_MAX, &v) : NULL;

    for (size_t i = 0; end && i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(end, units[i].suffix) == 0) {
            if (v > UINT64_MAX / units[i].ms)
                break;
            *out = v * units[i].ms;
            return KEEL_OK;
        }
    }
    return fail(err, errlen, NULL, 0, "expected a duration such as 500ms, 10s or 5m");
}

const char *kl_config_where(const kl_config_value *v, char *buf, size_t len)
{
    if (v->line == 0)
        snprintf(buf, len, "%s", v->file);
    else
        snprintf(buf, len, "%s:%u", v->file, v->line);
    return buf;
}
