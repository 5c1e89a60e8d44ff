/* core/runtime/config_reader.c — the text that becomes a config: the
 * strict INI dialect of config.h, read from a file or a string line by
 * line, and --set's section.key=value. What it reads goes into config.c's
 * storage through config_store.h; every message names FILE:LINE.
 */
#include "runtime/config_store.h"

#include <keel/types.h>

#include <errno.h>
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

/* ---- names and blanks --------------------------------------------------- */

/* A blank inside a line: space or tab. */
static int is_ws(char c)
{
    return c == ' ' || c == '\t';
}

static int is_sect_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
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

int kl_config_valid_key(const char *name)
{
    return name && *name && !first_bad(name, strlen(name), is_key_char);
}

/* ---- files and strings ------------------------------------------------- */

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
            return kl_config_fail(err, errlen, name, r->line, "NUL byte in line");
        if (n > LINE_CAP) /* room for one more byte: a '\r' that may end it */
            return kl_config_fail(err, errlen, name, r->line, "line longer than %u bytes",
                                  LINE_CAP);
        r->buf[n++] = (char)c;
    }
    if (r->fp && ferror(r->fp)) {
        kl_config_fail(err, errlen, name, 0, "cannot read: %s", strerror(errno));
        return KEEL_ERR_IO;
    }
    if (n && r->buf[n - 1] == '\r')
        n--;
    if (n > LINE_CAP)
        return kl_config_fail(err, errlen, name, r->line, "line longer than %u bytes", LINE_CAP);
    r->buf[n] = '\0';
    return any;
}

/* A scope's header: [site ...], [listener ...] or [/...]. */
static int is_scope_header(const char *name, size_t len)
{
    return name[0] == '/' || (len > 5 && memcmp(name, "site", 4) == 0 && is_ws(name[4])) ||
           (len > 9 && memcmp(name, "listener", 8) == 0 && is_ws(name[8]));
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
        if (is_ws(name[i])) {
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
    const char *file = kl_config_name(cfg);
    char *name = p + 1, *end = strchr(name, ']');
    char what[16];

    if (!end)
        return kl_config_fail(err, errlen, file, line, "malformed section header: missing ']'");
    size_t len = (size_t)(end - name);
    if (len == 0)
        return kl_config_fail(err, errlen, file, line, "malformed section header: empty name");
    char scoped[1024];
    if (is_scope_header(name, len)) {
        if (len >= sizeof scoped)
            return kl_config_fail(err, errlen, file, line, "scope header longer than %u bytes",
                                  (unsigned)sizeof scoped - 1);
        /* [site NAME...], [site NAME /prefix], [/prefix], [listener NAME]
         * (docs/configuration.md): kept with single spaces, so that one
         * scope written twice is found as a duplicate. */
        const char *bad = first_bad(name, len, is_scope_char);
        if (bad)
            return kl_config_fail(err, errlen, file, line,
                                  "invalid scope header '%.*s': %s not allowed", (int)len, name,
                                  describe(*bad, what));
        len = squeeze_spaces(name, len, scoped);
        name = scoped;
    } else {
        const char *bad = first_bad(name, len, is_sect_char);
        if (bad)
            return kl_config_fail(err, errlen, file, line,
                                  "invalid section name '%.*s': %s not allowed (%s)", (int)len,
                                  name, describe(*bad, what), SECT_HELP);
    }
    const char *rest = skip_ws(end + 1);
    if (*rest && *rest != ';' && *rest != '#')
        return kl_config_fail(err, errlen, file, line,
                              "malformed section header: unexpected text after ']'");

    /* A section --set named before the parse has no line yet: the file
     * may still open it, once. */
    kl_config_section *s = kl_config_section_lookup(cfg, name, len);
    if (s && kl_config_section_line(s))
        return kl_config_fail(err, errlen, file, line, "duplicate section [%s] (first at line %u)",
                              kl_config_section_name(s), kl_config_section_line(s));
    if (!(s = kl_config_section_from_file(cfg, name, len, file, line)))
        return kl_config_nomem(err, errlen);
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
            return kl_config_fail(err, errlen, file, line, "unterminated quoted value");
        if (*src == '"')
            break;
        if (*src == '\\') {
            if (src[1] != '"' && src[1] != '\\') {
                if (src[1] == '\0')
                    return kl_config_fail(err, errlen, file, line, "unterminated quoted value");
                char what[16];
                return kl_config_fail(
                    err, errlen, file, line,
                    "'\\' followed by %s in quoted value: only \\\" and \\\\ are escapes",
                    describe(src[1], what));
            }
            src++;
        }
        *dst++ = *src++;
    }
    const char *rest = skip_ws(src + 1);
    if (*rest && *rest != ';' && *rest != '#')
        return kl_config_fail(err, errlen, file, line, "unexpected text after closing quote");
    *len = (size_t)(dst - p);
    return KEEL_OK;
}

static int parse_line(kl_config *cfg, kl_config_section **cur, char *p, unsigned line, char *err,
                      size_t errlen)
{
    const char *file = kl_config_name(cfg);
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
        return kl_config_fail(err, errlen, file, line, "missing key before '='");
    const char *bad = first_bad(key, klen, is_key_char);
    if (bad)
        return kl_config_fail(err, errlen, file, line, "invalid key '%.*s': %s not allowed (%s)",
                              (int)klen, key, describe(*bad, what), KEY_HELP);
    p = (char *)skip_ws(p);
    if (*p != '=')
        return kl_config_fail(err, errlen, file, line, "missing '=' after key '%.*s'", (int)klen,
                              key);
    if (!*cur)
        return kl_config_fail(err, errlen, file, line, "key '%.*s' outside of a section", (int)klen,
                              key);
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

    if (kl_config_add_value(cfg, *cur, key, klen, p, vlen, file, line) != KEEL_OK)
        return kl_config_nomem(err, errlen);
    return KEEL_OK;
}

static int parse(kl_config *cfg, FILE *fp, const char *text, char *err, size_t errlen)
{
    reader r = {fp, text, malloc(LINE_CAP + 2), 0};
    kl_config_section *cur = NULL;
    int rc;

    if (!r.buf)
        return kl_config_nomem(err, errlen);
    while ((rc = read_line(&r, kl_config_name(cfg), err, errlen)) == 1) {
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

/* A file that cannot be opened leaves cfg untouched, so that the caller may
 * fall back to another file or an embedded default. */
int kl_config_parse_file(kl_config *cfg, const char *path, char *err, size_t errlen)
{
    if (!cfg || !path)
        return KEEL_ERR_INVAL;
    if (kl_config_name(cfg)) /* parsed before: fails without opening the file */
        return kl_config_begin_parse(cfg, path, 1, err, errlen);
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
        kl_config_fail(err, errlen, path, 0, "cannot open: %s", strerror(e));
        return e == ENOENT ? KEEL_ERR_NOTFOUND : KEEL_ERR_IO;
    }
    int rc = kl_config_begin_parse(cfg, path, 1, err, errlen);
    if (rc == KEEL_OK)
        rc = parse(cfg, fp, NULL, err, errlen);
    fclose(fp);
    return rc;
}

int kl_config_parse_string(kl_config *cfg, const char *text, const char *name, char *err,
                           size_t errlen)
{
    if (!cfg || !text)
        return KEEL_ERR_INVAL;
    int rc = kl_config_begin_parse(cfg, name ? name : "<string>", 0, err, errlen);
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
        return kl_config_fail(err, errlen, NULL, 0, "%s '%s': expected section.key=value", label,
                              a);

    const char *sname = a, *kname = dot + 1, *val = eq + 1;
    size_t slen = (size_t)(dot - a), klen = (size_t)(eq - kname), vlen = strlen(val);
    trim(&sname, &slen);
    trim(&kname, &klen);
    trim(&val, &vlen);
    if (slen == 0 || klen == 0)
        return kl_config_fail(err, errlen, NULL, 0, "%s '%s': expected section.key=value", label,
                              a);
    const char *bad = first_bad(sname, slen, is_sect_char);
    if (bad)
        return kl_config_fail(err, errlen, NULL, 0,
                              "%s '%s': invalid section name '%.*s': %s not allowed (%s)", label, a,
                              (int)slen, sname, describe(*bad, what), SECT_HELP);
    bad = first_bad(kname, klen, is_key_char);
    if (bad)
        return kl_config_fail(err, errlen, NULL, 0,
                              "%s '%s': invalid key '%.*s': %s not allowed (%s)", label, a,
                              (int)klen, kname, describe(*bad, what), KEY_HELP);

    kl_config_section *s = kl_config_section_from_set(cfg, sname, slen, label);
    if (!s || kl_config_add_value(cfg, s, kname, klen, val, vlen, label, 0) != KEEL_OK)
        return kl_config_nomem(err, errlen);
    return KEEL_OK;
}
