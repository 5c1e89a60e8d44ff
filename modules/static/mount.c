/* mount.c — one `mount = PREFIX DIRECTORY [key=value...]` line.
 *
 *     mount = /static /srv/www/static index=index.html,index.htm listing=on
 *     mount = / site cache_control="public, max-age=3600" symlinks=off
 *
 * Words are separated by blanks; a value may be double-quoted to hold
 * blanks and commas. Every error names the key's file and line through
 * keel_config_value_error and stops keel (nothing runs half-configured).
 *
 * A relative DIRECTORY is relative to the folder of the config file that
 * holds the line (keel_config_path, as keel's own module_path and nginx's
 * include), or to the working directory for a line from --set. A line of a
 * [listener] or [site] scope names an absolute DIRECTORY.
 */
#include "static.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The next word of *p: a run of non-blanks, where "..." may hold blanks
 * (the quotes are dropped). NULL at the end; *err on an open quote. */
static char *next_word(const char **p, int *err)
{
    const char *s = *p;
    while (*s == ' ' || *s == '\t')
        s++;
    if (*s == '\0') {
        *p = s;
        return NULL;
    }
    char *out = malloc(strlen(s) + 1);
    if (out == NULL) {
        *err = 1;
        return NULL;
    }
    size_t n = 0;
    int quoted = 0;
    for (; *s != '\0'; s++) {
        if (*s == '"') {
            quoted = !quoted;
            continue;
        }
        if (!quoted && (*s == ' ' || *s == '\t'))
            break;
        out[n++] = *s;
    }
    out[n] = '\0';
    if (quoted) {
        free(out);
        *err = 2;
        return NULL;
    }
    *p = s;
    return out;
}

static int set_index(keel_module *module, st_mount *m, const char *v)
{
    for (size_t i = 0; i < m->nindex; i++)
        free(m->index[i]);
    m->nindex = 0;
    if (strcmp(v, "off") == 0 || v[0] == '\0')
        return KEEL_OK;
    const char *s = v;
    while (*s) {
        size_t n = strcspn(s, ",");
        if (n > 0) {
            if (m->nindex == ST_MAX_INDEX)
                return st_mount_error(module, m, "index: at most %d names", ST_MAX_INDEX);
            if (memchr(s, '/', n) != NULL || (n <= 2 && s[0] == '.'))
                return st_mount_error(module, m, "index: '%.*s' is not a file name", (int)n, s);
            if ((m->index[m->nindex] = keel_strndup(s, n)) == NULL)
                return KEEL_ERR_NOMEM;
            m->nindex++;
        }
        s += n;
        if (*s == ',')
            s++;
    }
    return KEEL_OK;
}

static int set_option(keel_module *module, st_mount *m, const char *key, const char *v)
{
    if (strcmp(key, "index") == 0)
        return set_index(module, m, v);
    if (strcmp(key, "listing") == 0) {
        if (keel_onoff_parse_z(v, &m->listing) == 0)
            return KEEL_OK;
        return st_mount_error(module, m, "listing: expected on or off");
    }
    if (strcmp(key, "precompressed") == 0) {
        if (keel_onoff_parse_z(v, &m->precompressed) == 0)
            return KEEL_OK;
        return st_mount_error(module, m, "precompressed: expected on or off");
    }
    if (strcmp(key, "dotfiles") == 0) {
        if (strcmp(v, "allow") == 0 || strcmp(v, "deny") == 0) {
            m->dotfiles = v[0] == 'a';
            return KEEL_OK;
        }
        return st_mount_error(module, m, "dotfiles: expected allow or deny");
    }
    if (strcmp(key, "symlinks") == 0) {
        if (strcmp(v, "off") == 0)
            m->symlinks = ST_LINKS_OFF;
        else if (strcmp(v, "inside") == 0)
            m->symlinks = ST_LINKS_INSIDE;
        else if (strcmp(v, "follow") == 0)
            m->symlinks = ST_LINKS_FOLLOW;
        else
            return st_mount_error(module, m, "symlinks: expected off, inside or follow");
        return KEEL_OK;
    }
    if (strcmp(key, "resolve") == 0) {
        if (strcmp(v, "auto") == 0 || strcmp(v, "walk") == 0) {
            m->resolver = v[0] == 'w' ? ST_RESOLVE_WALK : ST_RESOLVE_AUTO;
            return KEEL_OK;
        }
        return st_mount_error(module, m, "resolve: expected auto or walk");
    }
    if (strcmp(key, "cache_control") == 0 || strcmp(key, "cache") == 0) {
        free(m->cache_control);
        m->cache_control = NULL;
        if (strcmp(v, "off") == 0 || v[0] == '\0')
            return KEEL_OK;
        if (strcmp(key, "cache") == 0) {
            char *end;
            unsigned long long secs = strtoull(v, &end, 10);
            if (*end != '\0' || v[0] < '0' || v[0] > '9')
                return st_mount_error(module, m, "cache: expected seconds");
            char buf[48];
            snprintf(buf, sizeof buf, "max-age=%llu", secs);
            m->cache_control = keel_strndup(buf, strlen(buf));
        } else {
            for (const char *c = v; *c; c++)
                if ((unsigned char)*c < 0x20)
                    return st_mount_error(module, m, "cache_control: control character");
            m->cache_control = keel_strndup(v, strlen(v));
        }
        return m->cache_control ? KEEL_OK : KEEL_ERR_NOMEM;
    }
    return st_mount_error(module, m, "unknown option '%s'", key);
}

int st_mount_error(keel_module *module, const st_mount *m, const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    /* By the line's own text: its file and line, in the global section or
     * a [listener]/[site] scope alike (keel_config_error would name the
     * global key's last line). */
    return keel_config_value_error(module, m->line, why);
}

int st_mount_parse(keel_module *module, const char *line, size_t index, st_mount *m)
{
    memset(m, 0, sizeof *m);
    m->line = line;
    m->root_fd = -1;
    m->symlinks = ST_LINKS_INSIDE;
    m->precompressed = 1;
    int err = 0, rc = KEEL_OK;
    const char *p = line;
    char *prefix = next_word(&p, &err);
    char *root = prefix ? next_word(&p, &err) : NULL;
    if (root == NULL || prefix[0] != '/') {
        free(prefix);
        free(root);
        return err == 1 ? KEEL_ERR_NOMEM
                        : st_mount_error(module, m, "expected /PREFIX DIRECTORY [key=value...]");
    }
    size_t plen = strlen(prefix);
    while (plen > 0 && prefix[plen - 1] == '/')
        prefix[--plen] = '\0';
    char resolved[4096];
    if (index == ST_MOUNT_SCOPED && root[0] != '/' && root[0] != '\\' &&
        !(root[0] != '\0' && root[1] == ':')) {
        /* The ABI resolves a path against the file of a global value only
         * (keel_config_path); a guess at another folder would serve the
         * wrong tree, so a scope's line says where it means. */
        free(prefix);
        free(root);
        return st_mount_error(module, m,
                              "a mount in a [listener] or [site] scope needs an absolute "
                              "directory");
    }
    if (index == ST_MOUNT_SCOPED) {
        if (strlen(root) >= sizeof resolved) {
            free(prefix);
            free(root);
            return st_mount_error(module, m, "directory path too long");
        }
        memcpy(resolved, root, strlen(root) + 1);
    } else if (keel_config_path(module, "mount", index, root, resolved, sizeof resolved) !=
               KEEL_OK) {
        free(prefix);
        free(root);
        return st_mount_error(module, m, "directory path too long");
    }
    free(root);
    if ((root = keel_strndup(resolved, strlen(resolved))) == NULL) {
        free(prefix);
        return KEEL_ERR_NOMEM;
    }
    size_t rlen = strlen(root);
    while (rlen > 1 && root[rlen - 1] == '/')
        root[--rlen] = '\0';
    m->prefix = prefix;
    m->prefix_len = plen;
    m->root = root;
    if ((m->index[0] = keel_strndup("index.html", 10)) == NULL)
        return KEEL_ERR_NOMEM;
    m->nindex = 1;
    char *word;
    while (rc == KEEL_OK && (word = next_word(&p, &err)) != NULL) {
        char *eq = strchr(word, '=');
        if (eq == NULL || eq == word)
            rc = st_mount_error(module, m, "'%s': expected key=value", word);
        else {
            *eq = '\0';
            rc = set_option(module, m, word, eq + 1);
        }
        free(word);
    }
    if (rc == KEEL_OK && err)
        rc = err == 1 ? KEEL_ERR_NOMEM : st_mount_error(module, m, "unclosed quote");
    return rc;
}

void st_mount_free(st_mount *m)
{
    st_root_close(m);
    free(m->prefix);
    free(m->root);
    for (size_t i = 0; i < m->nindex; i++)
        free(m->index[i]);
    free(m->cache_control);
    memset(m, 0, sizeof *m);
    m->root_fd = -1;
}

static int refuse_status(const char *s, size_t n, char *why, size_t whylen)
{
    snprintf(why, whylen, "'%.*s': =STATUS (300..599) may only end the list", (int)n, s);
    return -1;
}

/* `try = ELEMENT...`: every element a path ("/...", "$uri..."), the last
 * one a path or =STATUS (300..599, as nginx's try_files allows codes). */
int st_try_check(const char *value, char *why, size_t whylen)
{
    const char *at = value, *s, *status = NULL;
    size_t n;
    int count = 0;
    while (keel_word_next(&at, value + strlen(value), 0, &s, &n)) {
        if (status != NULL)
            return refuse_status(status, 4, why, whylen); /* a word follows it */
        count++;
        if (s[0] == '=') {
            char *stop;
            long code = strtol(s + 1, &stop, 10);
            if (stop != s + n || n != 4 || code < 300 || code > 599)
                return refuse_status(s, n, why, whylen);
            status = s;
        } else if (s[0] != '/' && !(n >= 4 && memcmp(s, "$uri", 4) == 0)) {
            snprintf(why, whylen, "'%.*s': expected a path (/...), $uri, $uri/ or =STATUS", (int)n,
                     s);
            return -1;
        }
        for (size_t i = 0; i < n; i++)
            if (s[i] == '$' && (n - i < 4 || memcmp(s + i, "$uri", 4) != 0)) {
                snprintf(why, whylen, "'%.*s': $uri is the only variable", (int)n, s);
                return -1;
            }
    }
    if (count == 0 && value[0] != '\0') {
        snprintf(why, whylen, "expected $uri, $uri/, /PATH or =STATUS");
        return -1;
    }
    return 0;
}
