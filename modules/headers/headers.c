/* headers — response header fields per scope, nginx's add_header and
 * Caddy's header directive, and HSTS (RFC 6797):
 *
 *     [headers]
 *     add = X-Content-Type-Options: nosniff     ; repeatable, appended
 *     set = Cache-Control: no-store             ; replaces the handler's
 *     remove = X-Powered-By
 *     always = off                              ; on: every status
 *     hsts = max-age=31536000 includeSubDomains ; over TLS only
 *
 * Every key may be written in any scope ([site ...] headers.add = ...);
 * an inner scope that writes a list replaces the outer one as a whole
 * (docs/configuration.md, nginx's add_header inheritance).
 *
 * The filter runs last among the response head filters, so that it sees
 * the status and fields every other filter (CORS, error pages) left. */
#include <keel/keel.h>
#include <keel/util.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct headers_conf {
    keel_config_list add;
    keel_config_list set;
    keel_config_list remove;
    int always;
    const char *hsts;
} headers_conf;

/* The fields the protocol owns (framing and the connection, RFC 9110
 * 7.6.1) and those keel computes: a config that names them would be
 * dropped by the core or break the message, so it is refused. */
static int owned_by_protocol(const char *name, size_t len)
{
    static const char *const owned[] = {"content-length",
                                        "transfer-encoding",
                                        "connection",
                                        "keep-alive",
                                        "proxy-connection",
                                        "upgrade",
                                        "te",
                                        "trailer",
                                        "date"};
    for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++)
        if (keel_ascii_iequal_lc(name, len, owned[i], strlen(owned[i])))
            return 1;
    return 0;
}

static int check_name(const char *name, size_t len, char *why, size_t whylen)
{
    if (len == 0 || len > 64) {
        snprintf(why, whylen, "a field name of 1 to 64 characters is needed");
        return -1;
    }
    for (size_t i = 0; i < len; i++)
        if (!keel_token_char((unsigned char)name[i])) {
            snprintf(why, whylen, "'%.*s' is not a field name (RFC 9110 5.1)", (int)len, name);
            return -1;
        }
    if (owned_by_protocol(name, len)) {
        snprintf(why, whylen, "%.*s is the protocol's, not a header a config sets", (int)len, name);
        return -1;
    }
    return 0;
}

/* "NAME: VALUE": the value may be empty, holds no control byte but HTAB
 * (RFC 9110 5.5); the config reader has trimmed its ends. */
static int check_field(const char *text, char *why, size_t whylen)
{
    const char *colon = strchr(text, ':');
    if (colon == NULL) {
        snprintf(why, whylen, "expected NAME: VALUE");
        return -1;
    }
    if (check_name(text, (size_t)(colon - text), why, whylen) != 0)
        return -1;
    for (const char *p = colon + 1; *p != '\0'; p++)
        if (((unsigned char)*p < 0x20 && *p != '\t') || *p == 0x7f) {
            snprintf(why, whylen, "the value holds a control character");
            return -1;
        }
    return 0;
}

static int check_remove(const char *text, char *why, size_t whylen)
{
    return check_name(text, strlen(text), why, whylen);
}

/* RFC 6797 6.1: max-age=DIGITS, then includeSubDomains and preload (the
 * preload list's directive), words apart; ';' is the config's comment
 * character, so the words are written with spaces and the filter writes
 * the field with "; ". */
static int check_hsts(const char *text, char *why, size_t whylen)
{
    const char *at = text, *end = text + strlen(text), *w;
    size_t len;
    int n = 0, sub = 0, preload = 0;
    while (keel_word_next(&at, end, 0, &w, &len)) {
        if (n++ == 0) {
            size_t digits = 0;
            if (len > 8 && keel_ascii_ncasecmp(w, "max-age=", 8) == 0)
                for (digits = 8; digits < len && w[digits] >= '0' && w[digits] <= '9'; digits++)
                    ;
            if (digits == 0 || digits != len || len > 8 + 10) {
                snprintf(why, whylen, "expected max-age=SECONDS first");
                return -1;
            }
        } else if (keel_ascii_iequal_z(w, len, "includeSubDomains") && !sub) {
            sub = 1;
        } else if (keel_ascii_iequal_z(w, len, "preload") && !preload) {
            preload = 1;
        } else {
            snprintf(why, whylen, "'%.*s': expected includeSubDomains or preload", (int)len, w);
            return -1;
        }
    }
    if (n == 0) {
        snprintf(why, whylen, "expected max-age=SECONDS");
        return -1;
    }
    return 0;
}

static const keel_config_key headers_keys[] = {
    KEEL_KEY(headers_conf, add, "add", KEEL_CONFIG_STRING, .flags = KEEL_CONFIG_LIST,
             .scopes = KEEL_SCOPE_ANY,
             .doc = "NAME: VALUE appended to the response (repeatable; Set-Cookie, Link)",
             .check = check_field),
    KEEL_KEY(headers_conf, set, "set", KEEL_CONFIG_STRING, .flags = KEEL_CONFIG_LIST,
             .scopes = KEEL_SCOPE_ANY,
             .doc = "NAME: VALUE replacing every field of that name the response has",
             .check = check_field),
    KEEL_KEY(headers_conf, remove, "remove", KEEL_CONFIG_STRING, .flags = KEEL_CONFIG_LIST,
             .scopes = KEEL_SCOPE_ANY, .doc = "NAME of a field taken out of the response",
             .check = check_remove),
    KEEL_KEY(headers_conf, always, "always", KEEL_CONFIG_BOOL, .scopes = KEEL_SCOPE_ANY,
             .def = "off",
             .doc = "on: every status; off: only 200 201 204 206 301 302 303 304 307 308 (nginx)"),
    KEEL_KEY(headers_conf, hsts, "hsts", KEEL_CONFIG_STRING, .scopes = KEEL_SCOPE_ANY,
             .doc = "max-age=SECONDS [includeSubDomains] [preload]: Strict-Transport-Security "
                    "on TLS responses",
             .check = check_hsts),
};
KEEL_CONFIG_SCHEMA(headers_schema, headers_conf, headers_keys);

/* nginx's add_header without `always`: the statuses a response is
 * "successful or redirected" for (ngx_http_headers_filter). */
static int nginx_status(int status)
{
    switch (status) {
    case 200:
    case 201:
    case 204:
    case 206:
    case 301:
    case 302:
    case 303:
    case 304:
    case 307:
    case 308:
        return 1;
    default:
        return 0;
    }
}

/* A scope's `set` and `add` fields, prepared at load (keel_field_prepare):
 * a response gets them by pointer, neither split, checked nor copied
 * again. One per scope's struct, sorted by its address. */
typedef struct headers_scope {
    const headers_conf *conf;
    const keel_prepared_field **set, **add; /* set.count, then add.count */
} headers_scope;

static headers_scope *scopes;
static size_t nscopes;

static const headers_scope *scope_of(const headers_conf *c)
{
    size_t lo = 0, hi = nscopes;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (scopes[mid].conf == c)
            return &scopes[mid];
        if ((uintptr_t)scopes[mid].conf < (uintptr_t)c)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* "NAME: VALUE" (the check saw the colon) as a prepared field. */
static int prepare_item(keel_module *m, const char *item, const keel_prepared_field **out)
{
    const char *colon = strchr(item, ':'), *v = colon + 1;
    while (*v == ' ' || *v == '\t')
        v++;
    int rc = keel_field_prepare(m, item, (size_t)(colon - item), v, strlen(v), out);
    if (rc == KEEL_ERR_INVAL)
        return keel_config_value_error(m, item, "not a field a response may carry");
    return rc;
}

static int prepare_scope(keel_module *m, const void *confp, void *ud)
{
    (void)ud;
    const headers_conf *c = confp;
    size_t at = 0;
    while (at < nscopes && (uintptr_t)scopes[at].conf < (uintptr_t)c)
        at++;
    if (at < nscopes && scopes[at].conf == c)
        return KEEL_OK; /* shown before */
    size_t n = c->set.count + c->add.count;
    const keel_prepared_field **fields = calloc(n ? n : 1, sizeof *fields);
    headers_scope *grown = realloc(scopes, (nscopes + 1) * sizeof *grown);
    if (grown != NULL)
        scopes = grown;
    if (fields == NULL || grown == NULL) {
        free(fields);
        return KEEL_ERR_NOMEM;
    }
    memmove(&scopes[at + 1], &scopes[at], (nscopes - at) * sizeof *scopes);
    scopes[at] = (headers_scope){c, fields, fields + c->set.count};
    nscopes++;
    int rc = KEEL_OK;
    for (size_t i = 0; rc == KEEL_OK && i < c->set.count; i++)
        rc = prepare_item(m, c->set.items[i], &scopes[at].set[i]);
    for (size_t i = 0; rc == KEEL_OK && i < c->add.count; i++)
        rc = prepare_item(m, c->add.items[i], &scopes[at].add[i]);
    return rc;
}

static void put_hsts(keel_response *res, const char *words)
{
    char value[96];
    keel_response_header_set(res, "Strict-Transport-Security",
                             keel_words_join(words, 0, "; ", value, sizeof value));
}

/* The filter's part in a scope (keel_http_filter.scope): none where the
 * scope's struct has nothing to write; else that struct's fields, so that
 * a response neither asks for its scope nor searches for them. */
static int headers_scope_of(const void *conf, void *ud, void **scope_ud)
{
    (void)ud;
    const headers_conf *c = conf;
    if (c->add.count + c->set.count + c->remove.count == 0 && c->hsts == NULL)
        return 0;
    const headers_scope *p = scope_of(c);
    if (p == NULL)
        return KEEL_ERR_STATE; /* not shown at load: cannot happen */
    *scope_ud = (void *)p;
    return 1;
}

static void headers_on_head(keel_request *req, keel_response *res, void *ud)
{
    const headers_scope *p = ud;
    const headers_conf *c = p->conf;
    /* RFC 6797 7.2: a host sends the field over secure transport only; over
     * plain HTTP it could be stripped or forged by whoever is in between,
     * and a user agent ignores it (8.1). It is about the host, not the
     * response, so every status carries it (as Caddy's and h2o's do). */
    if (c->hsts != NULL && keel_request_transport_name(req) != NULL)
        put_hsts(res, c->hsts);
    if (!c->always && !nginx_status(keel_response_status(res)))
        return;
    for (size_t i = 0; i < c->remove.count; i++)
        keel_response_header_remove(res, c->remove.items[i]);
    if (c->set.count > 0)
        keel_response_fields_add(res, p->set, c->set.count, 1);
    if (c->add.count > 0)
        keel_response_fields_add(res, p->add, c->add.count, 0);
}

static const keel_http_filter headers_filter = {
    .size = sizeof(keel_http_filter),
    .name = "headers",
    /* Last, and after deflate (also last): the final status and the other
     * filters' fields (deflate's Vary and Content-Encoding) are known. */
    .order = KEEL_ORDER_LAST,
    .after = "deflate",
    .on_response_head = headers_on_head,
    .scope = headers_scope_of,
};

static int headers_load(keel_module *m)
{
    int rc = prepare_scope(m, keel_module_config(m), NULL);
    if (rc == KEEL_OK)
        rc = keel_module_config_scopes(m, prepare_scope, NULL);
    return rc == KEEL_OK ? keel_http_filter_add(m, &headers_filter) : rc;
}

static void headers_unload(keel_module *m)
{
    (void)m;
    for (size_t i = 0; i < nscopes; i++)
        free((void *)scopes[i].set);
    free(scopes);
    scopes = NULL;
    nscopes = 0;
}

KEEL_MODULE(headers, .version = "1.0.0", .load = headers_load, .unload = headers_unload,
            .config = &headers_schema);
