/* Scopes (docs/configuration.md): the config's [listener], [site] and path
 * sections turned, once at start, into one table per listener: the sites it
 * serves, found by exact name (binary search) or by the longest wildcard
 * suffix, each with its path prefixes longest first. Every scope holds each
 * module's struct merged from the enclosing one (nginx merges main, server
 * and location the same way), so a request pays one lookup and no merge. */
#include <stdlib.h>
#include <string.h>

#include "keel/types.h"
#include "runtime/config_schema.h"
#include "runtime/scopes.h"
#include "base/log.h"
#include "base/util.h"

#define MAX_HOST 255 /* RFC 1035 2.3.4: longer names cannot be sites */

/* A [site ...] section: its names and the listeners it serves. */
typedef struct site_def {
    kl_config_section *sec;
    char **names; /* as written, lower-case */
    size_t nnames;
    int is_default;       /* named `default` */
    keel_config_list ons; /* `listeners = NAME...`; none: every listener */
} site_def;

/* A path scope's section, and the site it belongs to (NULL: the implicit
 * one, or [site default] when there is one). */
typedef struct path_def {
    kl_config_section *sec;
    const site_def *site;
    const char *prefix;
    size_t len;
} path_def;

typedef struct path_scope {
    const char *prefix;
    size_t len;
    kl_scope scope;
} path_scope;

typedef struct kl_site_scope {
    kl_scope scope;
    path_scope *paths; /* longest prefix first */
    size_t npaths;
} site_scope;

/* A site name as a listener finds it. Wildcards are kept as their suffix
 * with its dot (".example.com"). */
typedef struct site_name {
    const char *name;
    size_t site; /* index into listener_scopes.sites */
} site_name;

typedef struct listener_scopes {
    site_scope *sites;
    size_t nsites;
    site_name *exact, *wild;
    size_t nexact, nwild;
    const site_scope *fallback; /* the default site or the implicit one; NULL: a status */
    site_scope implicit;
} listener_scopes;

struct kl_scopes {
    kl_schema_store store; /* every allocation below, freed at once */
    listener_scopes *listeners;
    size_t nlisteners;
    int unknown_host;
};

static void *alloc(kl_scopes *s, size_t size)
{
    /* kl_schema_merge allocates in the same store: one owner for all. */
    if (kl_grow((void **)&s->store.blocks, &s->store.cap, s->store.nblocks + 1,
                sizeof *s->store.blocks) != KEEL_OK)
        return NULL;
    void *p = calloc(1, size ? size : 1);
    if (p != NULL)
        s->store.blocks[s->store.nblocks++] = p;
    return p;
}

static int scope_error(const kl_config_section *sec, const char *fmt, const char *a)
{
    char why[512];
    snprintf(why, sizeof why, fmt, a);
    char where[300];
    kl_log(KEEL_LOG_ERROR, "%s: [%s] %s", kl_config_section_where(sec, where, sizeof where),
           kl_config_section_name(sec), why);
    return KEEL_ERR_CONFIG;
}

int kl_scopes_is_scope_section(const kl_config_section *sec)
{
    const char *n = kl_config_section_name(sec);
    return n[0] == '/' || strncmp(n, "site ", 5) == 0 || strncmp(n, "listener ", 9) == 0;
}

/* RFC 1123 2.1 host names (letters, digits, hyphens, dots), lower-case as
 * the config must write them, optionally "*." in front; or `default`. */
static int valid_site_name(const char *n)
{
    if (strcmp(n, "default") == 0)
        return 1;
    if (n[0] == '*' && n[1] == '.')
        n += 2;
    size_t len = strlen(n);
    if (len == 0 || len > MAX_HOST || n[0] == '.' || n[len - 1] == '.' || strstr(n, "..") != NULL)
        return 0;
    for (const char *p = n; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '.'))
            return 0;
    return 1;
}

/* Splits a scope header's words (single spaces: the parser squeezed them)
 * into a NULL-terminated array in the store. */
static char **split_words(kl_scopes *s, const char *text, size_t *n)
{
    size_t count = 1;
    for (const char *p = text; *p; p++)
        count += *p == ' ';
    char **words = alloc(s, (count + 1) * sizeof *words);
    char *copy = alloc(s, strlen(text) + 1);
    if (words == NULL || copy == NULL)
        return NULL;
    strcpy(copy, text);
    *n = 0;
    for (char *tok = copy, *sp; tok != NULL; tok = sp ? sp + 1 : NULL) {
        if ((sp = strchr(tok, ' ')) != NULL)
            *sp = '\0';
        words[(*n)++] = tok;
    }
    return words;
}

static const site_def *find_site(const site_def *sites, size_t nsites, const char *name)
{
    for (size_t i = 0; i < nsites; i++)
        for (size_t k = 0; k < sites[i].nnames; k++)
            if (strcmp(sites[i].names[k], name) == 0)
                return &sites[i];
    return NULL;
}

static int serves(const site_def *site, const char *listener)
{
    if (site->ons.count == 0)
        return 1;
    for (size_t i = 0; listener != NULL && i < site->ons.count; i++)
        if (strcmp(site->ons.items[i], listener) == 0)
            return 1;
    return 0;
}

/* Each module's struct for a scope: merged from parent with sec's keys. */
static int merge_all(kl_scopes *s, const kl_config *cfg, const kl_scope_module *mods, size_t nmods,
                     kl_config_section *sec, unsigned kind, const kl_scope *parent, kl_scope *out)
{
    if ((out->confs = alloc(s, (nmods ? nmods : 1) * sizeof *out->confs)) == NULL)
        return KEEL_ERR_NOMEM;
    for (size_t i = 0; i < nmods; i++) {
        if (mods[i].schema == NULL)
            continue;
        int rc = kl_schema_merge(mods[i].schema, cfg, sec, mods[i].name, kind, parent->confs[i],
                                 &s->store, &out->confs[i]);
        if (rc != KEEL_OK)
            return rc;
    }
    return KEEL_OK;
}

static int by_length_desc(const void *a, const void *b)
{
    const path_def *x = *(const path_def *const *)a, *y = *(const path_def *const *)b;
    return x->len < y->len ? 1 : x->len > y->len ? -1 : 0;
}

/* A site's path scopes on one listener, longest first; each inherits from
 * the longest shorter prefix of it, else from the site. */
static int build_paths(kl_scopes *s, const kl_config *cfg, const kl_scope_module *mods,
                       size_t nmods, path_def **paths, size_t npaths, const site_def *site,
                       site_scope *out)
{
    size_t n = 0;
    for (size_t i = 0; i < npaths; i++)
        n += paths[i]->site == site;
    if (n == 0)
        return KEEL_OK;
    if ((out->paths = alloc(s, n * sizeof *out->paths)) == NULL)
        return KEEL_ERR_NOMEM;
    /* paths[] is longest first: build from the shortest up so that every
     * enclosing prefix is built before what it encloses. */
    size_t at = n;
    for (size_t i = npaths; i-- > 0;) {
        const path_def *p = paths[i];
        if (p->site != site)
            continue;
        const kl_scope *parent = &out->scope;
        for (size_t k = at; k < n; k++) /* shorter ones, built already, longest first */
            if (out->paths[k].len < p->len &&
                memcmp(out->paths[k].prefix, p->prefix, out->paths[k].len) == 0) {
                parent = &out->paths[k].scope;
                break;
            }
        path_scope *ps = &out->paths[--at];
        ps->prefix = p->prefix;
        ps->len = p->len;
        int rc = merge_all(s, cfg, mods, nmods, p->sec, KEEL_SCOPE_PATH, parent, &ps->scope);
        if (rc != KEEL_OK)
            return rc;
    }
    out->npaths = n;
    return KEEL_OK;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const site_name *)a)->name, ((const site_name *)b)->name);
}

/* One listener's table. */
static int build_listener(kl_scopes *s, const kl_config *cfg, const kl_scope_module *mods,
                          size_t nmods, const char *lname, kl_config_section *lsec,
                          const site_def *sites, size_t nsites, path_def **paths, size_t npaths,
                          const site_def *default_site, listener_scopes *out)
{
    kl_scope global = {.confs = alloc(s, (nmods ? nmods : 1) * sizeof(void *))};
    if (global.confs == NULL)
        return KEEL_ERR_NOMEM;
    for (size_t i = 0; i < nmods; i++)
        global.confs[i] = (void *)mods[i].global;
    int rc = KEEL_OK;
    if (lsec != NULL)
        rc = merge_all(s, cfg, mods, nmods, lsec, KEEL_SCOPE_LISTENER, &global,
                       &out->implicit.scope);
    else
        out->implicit.scope = global;
    if (rc == KEEL_OK && default_site == NULL)
        rc = build_paths(s, cfg, mods, nmods, paths, npaths, NULL, &out->implicit);
    size_t nnames = 0;
    for (size_t i = 0; i < nsites; i++)
        nnames += serves(&sites[i], lname) ? sites[i].nnames : 0;
    out->sites = alloc(s, (nsites ? nsites : 1) * sizeof *out->sites);
    out->exact = alloc(s, (nnames ? nnames : 1) * sizeof *out->exact);
    out->wild = alloc(s, (nnames ? nnames : 1) * sizeof *out->wild);
    if (out->sites == NULL || out->exact == NULL || out->wild == NULL)
        return KEEL_ERR_NOMEM;
    out->fallback = &out->implicit;
    for (size_t i = 0; rc == KEEL_OK && i < nsites; i++) {
        const site_def *d = &sites[i];
        if (!serves(d, lname))
            continue;
        site_scope *ss = &out->sites[out->nsites];
        rc = merge_all(s, cfg, mods, nmods, d->sec, KEEL_SCOPE_SITE, &out->implicit.scope,
                       &ss->scope);
        if (rc == KEEL_OK)
            rc = build_paths(s, cfg, mods, nmods, paths, npaths, d, ss);
        for (size_t k = 0; rc == KEEL_OK && k < d->nnames; k++) {
            const char *n = d->names[k];
            if (strcmp(n, "default") == 0)
                out->fallback = ss;
            else if (n[0] == '*')
                out->wild[out->nwild++] = (site_name){n + 1, out->nsites};
            else
                out->exact[out->nexact++] = (site_name){n, out->nsites};
        }
        out->nsites++;
    }
    if (rc != KEEL_OK)
        return rc;
    if (default_site == NULL && s->unknown_host != KL_UNKNOWN_HOST_DEFAULT && out->nsites > 0)
        out->fallback = NULL;
    qsort(out->exact, out->nexact, sizeof *out->exact, by_name);
    qsort(out->wild, out->nwild, sizeof *out->wild, by_name);
    return KEEL_OK;
}

/* The [site ...] and path sections, checked. */
static int read_sections(kl_scopes *s, const kl_config *cfg, const char *const *lnames,
                         size_t nlisteners, site_def **sites_out, size_t *nsites,
                         path_def ***paths_out, size_t *npaths)
{
    size_t nsec = kl_config_section_count(cfg);
    site_def *sites = alloc(s, (nsec ? nsec : 1) * sizeof *sites);
    path_def *paths = alloc(s, (nsec ? nsec : 1) * sizeof *paths);
    path_def **order = alloc(s, (nsec ? nsec : 1) * sizeof *order);
    if (sites == NULL || paths == NULL || order == NULL)
        return KEEL_ERR_NOMEM;
    *nsites = *npaths = 0;
    kl_config *c = (kl_config *)cfg;
    /* Sites first, so a path section may name a site written after it. */
    for (size_t i = 0; i < nsec; i++) {
        kl_config_section *sec = kl_config_section_at(c, i);
        const char *name = kl_config_section_name(sec);
        size_t nw;
        if (strncmp(name, "site ", 5) != 0)
            continue;
        char **w = split_words(s, name + 5, &nw);
        if (w == NULL)
            return KEEL_ERR_NOMEM;
        if (w[nw - 1][0] == '/')
            continue; /* a path scope */
        site_def *d = &sites[(*nsites)++];
        d->sec = sec;
        d->names = w;
        d->nnames = nw;
        for (size_t k = 0; k < nw; k++) {
            if (!valid_site_name(w[k]))
                return scope_error(sec,
                                   "'%s' is not a site name (a lower-case host name, "
                                   "*.suffix, or default)",
                                   w[k]);
            const site_def *other = find_site(sites, *nsites - 1, w[k]);
            if (other != NULL)
                return scope_error(sec, "the name '%s' is given to another site already", w[k]);
            d->is_default |= strcmp(w[k], "default") == 0;
        }
        size_t n = kl_config_count(sec, "listeners");
        const char **ons = alloc(s, (n ? n : 1) * sizeof *ons);
        if (ons == NULL)
            return KEEL_ERR_NOMEM;
        for (size_t k = 0; k < n; k++) {
            ons[k] = kl_config_get(sec, "listeners", k)->text;
            size_t l = 0;
            while (l < nlisteners && (lnames[l] == NULL || strcmp(lnames[l], ons[k]) != 0))
                l++;
            if (l == nlisteners)
                return scope_error(sec, "listeners: no listen line is named '%s' (name=...)",
                                   ons[k]);
        }
        d->ons = (keel_config_list){n, ons};
    }
    const site_def *def = NULL;
    for (size_t i = 0; i < *nsites; i++)
        if (sites[i].is_default)
            def = &sites[i];
    for (size_t i = 0; i < nsec; i++) {
        kl_config_section *sec = kl_config_section_at(c, i);
        const char *name = kl_config_section_name(sec);
        path_def *p = &paths[*npaths];
        if (name[0] == '/') {
            p->site = def;
            p->prefix = name;
        } else if (strncmp(name, "site ", 5) == 0) {
            size_t nw;
            char **w = split_words(s, name + 5, &nw);
            if (w == NULL)
                return KEEL_ERR_NOMEM;
            if (w[nw - 1][0] != '/')
                continue;
            if (nw != 2)
                return scope_error(sec, "a path scope is [site NAME /prefix]%s", "");
            if ((p->site = find_site(sites, *nsites, w[0])) == NULL)
                return scope_error(sec, "no [site] is named '%s'", w[0]);
            p->prefix = w[1];
        } else if (strncmp(name, "listener ", 9) == 0) {
            size_t l = 0;
            while (l < nlisteners && (lnames[l] == NULL || strcmp(lnames[l], name + 9) != 0))
                l++;
            if (l == nlisteners || strchr(name + 9, ' ') != NULL)
                return scope_error(sec, "no listen line is named '%s' (name=...)", name + 9);
            continue;
        } else {
            continue;
        }
        if (strchr(p->prefix, ' ') != NULL || strstr(p->prefix, "/./") != NULL ||
            strstr(p->prefix, "/../") != NULL)
            return scope_error(sec, "'%s' is not a path prefix (one normalised path)", p->prefix);
        p->sec = sec;
        p->len = strlen(p->prefix);
        order[(*npaths)++] = p;
    }
    qsort(order, *npaths, sizeof *order, by_length_desc);
    *sites_out = sites;
    *paths_out = order;
    return KEEL_OK;
}

static kl_config_section *listener_section(const kl_config *cfg, const char *lname)
{
    char name[300];
    if (lname == NULL)
        return NULL;
    snprintf(name, sizeof name, "listener %s", lname);
    return kl_config_section_find((kl_config *)cfg, name);
}

int kl_scopes_build(const kl_config *cfg, const kl_scope_module *mods, size_t nmods,
                    const char *const *lnames, size_t nlisteners, int unknown_host, kl_scopes **out)
{
    *out = NULL;
    size_t nsec = kl_config_section_count(cfg), nscoped = 0;
    for (size_t i = 0; i < nsec; i++)
        nscoped += kl_scopes_is_scope_section(kl_config_section_at((kl_config *)cfg, i));
    if (nscoped == 0)
        return KEEL_OK;
    kl_scopes *s = calloc(1, sizeof *s);
    if (s == NULL)
        return KEEL_ERR_NOMEM;
    s->unknown_host = unknown_host;
    site_def *sites = NULL;
    path_def **paths = NULL;
    size_t nsites = 0, npaths = 0;
    int rc = read_sections(s, cfg, lnames, nlisteners, &sites, &nsites, &paths, &npaths);
    if (rc != KEEL_OK) {
        kl_scopes_free(s);
        return rc;
    }
    const site_def *def = NULL;
    for (size_t i = 0; i < nsites; i++)
        if (sites[i].is_default)
            def = &sites[i];
    if ((s->listeners = alloc(s, (nlisteners ? nlisteners : 1) * sizeof *s->listeners)) == NULL)
        rc = KEEL_ERR_NOMEM;
    for (size_t l = 0; rc == KEEL_OK && l < nlisteners; l++)
        rc = build_listener(s, cfg, mods, nmods, lnames[l], listener_section(cfg, lnames[l]), sites,
                            nsites, paths, npaths, def, &s->listeners[l]);
    s->nlisteners = nlisteners;
    if (rc != KEEL_OK) {
        kl_scopes_free(s);
        return rc;
    }
    *out = s;
    return KEEL_OK;
}

void kl_scopes_free(kl_scopes *s)
{
    if (s == NULL)
        return;
    kl_schema_store_free(&s->store);
    free(s);
}

static const site_name *find_name(const site_name *names, size_t n, const char *host)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(host, names[mid].name);
        if (c == 0)
            return &names[mid];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

/* The host of a Host value, lower-case, without port or trailing dot;
 * 0 if none or too long to be a site. */
static size_t host_key(keel_str host, char *buf)
{
    size_t n = host.len;
    if (n > 0 && host.ptr[0] == '[') { /* an IP literal: up to ']' */
        const char *close = memchr(host.ptr, ']', n);
        n = close ? (size_t)(close - host.ptr) + 1 : 0;
    } else {
        const char *colon = memchr(host.ptr, ':', n);
        if (colon != NULL)
            n = (size_t)(colon - host.ptr);
    }
    if (n > 0 && host.ptr[n - 1] == '.')
        n--;
    if (n == 0 || n > MAX_HOST)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = host.ptr[i];
        buf[i] = c >= 'A' && c <= 'Z' ? (char)(c + 32) : c;
    }
    buf[n] = '\0';
    return n;
}

const kl_site_scope *kl_scopes_site(const kl_scopes *s, size_t listener, keel_str host, int *status)
{
    const listener_scopes *l = &s->listeners[listener];
    const site_scope *site = NULL;
    char key[MAX_HOST + 1];
    size_t n = l->nsites > 0 ? host_key(host, key) : 0;
    if (n > 0) {
        const site_name *hit = find_name(l->exact, l->nexact, key);
        /* The longest wildcard first: a.b.example.com tries .b.example.com,
         * then .example.com, then .com. */
        for (const char *dot = strchr(key, '.'); hit == NULL && dot != NULL;
             dot = strchr(dot + 1, '.'))
            hit = find_name(l->wild, l->nwild, dot);
        if (hit != NULL)
            site = &l->sites[hit->site];
    }
    if (site == NULL && (site = l->fallback) == NULL)
        *status = s->unknown_host;
    return site;
}

const kl_scope *kl_scopes_path(const kl_site_scope *site, keel_str path)
{
    for (size_t i = 0; i < site->npaths; i++)
        if (path.len >= site->paths[i].len &&
            memcmp(path.ptr, site->paths[i].prefix, site->paths[i].len) == 0)
            return &site->paths[i].scope;
    return &site->scope;
}

const kl_scope *kl_scopes_listener(const kl_scopes *s, size_t listener)
{
    return &s->listeners[listener].implicit.scope;
}

const kl_scope *kl_scopes_site_own(const kl_site_scope *site)
{
    return &site->scope;
}

static int site_each(const site_scope *site, size_t index, int (*fn)(const void *, void *),
                     void *ud)
{
    int rc = fn(site->scope.confs[index], ud);
    for (size_t i = 0; rc == KEEL_OK && i < site->npaths; i++)
        rc = fn(site->paths[i].scope.confs[index], ud);
    return rc;
}

int kl_scopes_each(const kl_scopes *s, size_t index, int (*fn)(const void *conf, void *ud),
                   void *ud)
{
    int rc = KEEL_OK;
    for (size_t l = 0; rc == KEEL_OK && l < s->nlisteners; l++) {
        const listener_scopes *ls = &s->listeners[l];
        rc = site_each(&ls->implicit, index, fn, ud);
        for (size_t i = 0; rc == KEEL_OK && i < ls->nsites; i++)
            rc = site_each(&ls->sites[i], index, fn, ud);
    }
    return rc;
}

static int site_each_scope(site_scope *site, int (*fn)(kl_scope *, void *), void *ud)
{
    int rc = fn(&site->scope, ud);
    for (size_t i = 0; rc == KEEL_OK && i < site->npaths; i++)
        rc = fn(&site->paths[i].scope, ud);
    return rc;
}

int kl_scopes_each_scope(kl_scopes *s, int (*fn)(kl_scope *scope, void *ud), void *ud)
{
    int rc = KEEL_OK;
    for (size_t l = 0; rc == KEEL_OK && l < s->nlisteners; l++) {
        listener_scopes *ls = &s->listeners[l];
        rc = site_each_scope(&ls->implicit, fn, ud);
        for (size_t i = 0; rc == KEEL_OK && i < ls->nsites; i++)
            rc = site_each_scope(&ls->sites[i], fn, ud);
    }
    return rc;
}

const kl_scope *kl_scopes_select(const kl_scopes *s, size_t listener, keel_str host, keel_str path,
                                 int *status)
{
    const kl_site_scope *site = kl_scopes_site(s, listener, host, status);
    return site != NULL ? kl_scopes_path(site, path) : NULL;
}
