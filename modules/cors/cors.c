/* cors — Cross-Origin Resource Sharing per scope, as the Fetch standard's
 * CORS protocol (fetch.spec.whatwg.org, "CORS protocol") asks of a server:
 *
 *     [site api.example.com]
 *     cors.origins = https://app.example.com https://app.example.net
 *     cors.credentials = on
 *     cors.methods = GET POST PUT DELETE
 *     cors.headers = Content-Type Authorization
 *     cors.expose = X-Request-Id
 *     cors.max_age = 10m
 *
 * A preflight (OPTIONS with Origin and Access-Control-Request-Method) is
 * answered here, 204, with the request's origin echoed, the methods and
 * the requested headers when all are allowed; a preflight the rules do
 * not allow gets 403 and no Access-Control-Allow-* field, which fails it
 * in the browser. Other requests go on to their handler, and their
 * response gets Access-Control-Allow-Origin (with -Credentials and
 * -Expose-Headers) when the Origin is allowed. Every response in a scope
 * whose answer depends on the Origin says so (Vary: Origin), so that a
 * cache never hands one origin's answer to another. */
#include <keel/keel.h>
#include <keel/util.h>

#include <stdio.h>
#include <string.h>

typedef struct cors_conf {
    keel_config_list origins;
    int credentials;
    const char *methods;
    const char *headers;
    const char *expose;
    uint64_t max_age_ms;
} cors_conf;

/* RFC 6454 7: scheme "://" host [":" port], the serialisation an Origin
 * field holds; a pattern may put "*." before the host (one label). */
static int check_origin_word(const char *w, size_t len, char *why, size_t whylen)
{
    if (len == 1 && w[0] == '*')
        return 0;
    const char *sep = NULL;
    for (size_t i = 0; i + 2 < len; i++)
        if (w[i] == ':' && w[i + 1] == '/' && w[i + 2] == '/') {
            sep = w + i;
            break;
        }
    if (sep == NULL || sep == w) {
        snprintf(why, whylen, "'%.*s' is not an origin (scheme://host[:port])", (int)len, w);
        return -1;
    }
    const char *host = sep + 3, *end = w + len;
    if (end - host > 2 && host[0] == '*' && host[1] == '.')
        host += 2;
    if (host == end) {
        snprintf(why, whylen, "'%.*s' names no host", (int)len, w);
        return -1;
    }
    for (const char *p = host; p < end; p++)
        if (*p == '/' || *p == '*' || *p == '?' || *p == '#' || *p == '@') {
            snprintf(why, whylen, "'%.*s': an origin has no path, userinfo or other wildcard",
                     (int)len, w);
            return -1;
        }
    return 0;
}

static int check_origins(const char *text, char *why, size_t whylen)
{
    const char *at = text, *end = text + strlen(text), *w;
    size_t len;
    int n = 0;
    while (keel_word_next(&at, end, 1, &w, &len)) {
        /* "null" is the origin of every sandboxed frame and file: trusting
         * it trusts them all (Fetch, "CORS protocol and credentials"). */
        if (keel_ascii_iequal_z(w, len, "null")) {
            snprintf(why, whylen, "'null' is every opaque origin's: not allowed");
            return -1;
        }
        if (check_origin_word(w, len, why, whylen) != 0)
            return -1;
        n++;
    }
    if (n == 0) {
        snprintf(why, whylen, "lists no origin");
        return -1;
    }
    return 0;
}

/* Methods and field names: tokens (RFC 9110 5.6.2), apart with spaces or
 * commas. */
static int check_tokens(const char *text, char *why, size_t whylen)
{
    const char *at = text, *end = text + strlen(text), *w;
    size_t len;
    while (keel_word_next(&at, end, 1, &w, &len))
        for (size_t i = 0; i < len; i++)
            if (!keel_token_char((unsigned char)w[i]) || (len == 1 && w[0] == '*')) {
                /* "*" means any only without credentials (Fetch); naming
                 * them is what works in both modes. */
                snprintf(why, whylen, "'%.*s' is not a method or field name", (int)len, w);
                return -1;
            }
    return 0;
}

static const keel_config_key cors_keys[] = {
    KEEL_KEY(cors_conf, origins, "origins", KEEL_CONFIG_STRING, .flags = KEEL_CONFIG_LIST,
             .scopes = KEEL_SCOPE_ANY,
             .doc = "origins allowed: https://a.example, https://*.b.example (one label), or * "
                    "(without credentials)",
             .check = check_origins),
    KEEL_KEY(cors_conf, credentials, "credentials", KEEL_CONFIG_BOOL, .scopes = KEEL_SCOPE_ANY,
             .def = "off",
             .doc = "on: cookies and authentication (Access-Control-Allow-Credentials)"),
    KEEL_KEY(cors_conf, methods, "methods", KEEL_CONFIG_STRING, .scopes = KEEL_SCOPE_ANY,
             .def = "GET HEAD POST", .doc = "methods a preflight may allow", .check = check_tokens),
    KEEL_KEY(cors_conf, headers, "headers", KEEL_CONFIG_STRING, .scopes = KEEL_SCOPE_ANY,
             .doc = "request fields a preflight may allow (beyond the CORS-safelisted ones)",
             .check = check_tokens),
    KEEL_KEY(cors_conf, expose, "expose", KEEL_CONFIG_STRING, .scopes = KEEL_SCOPE_ANY,
             .doc = "response fields the page's script may read (Access-Control-Expose-Headers)",
             .check = check_tokens),
    KEEL_KEY(cors_conf, max_age_ms, "max_age", KEEL_CONFIG_DURATION, .scopes = KEEL_SCOPE_ANY,
             .max = 86400000,
             .doc = "how long a browser may keep a preflight's answer (0: not sent: 5 s)"),
};
KEEL_CONFIG_SCHEMA(cors_schema, cors_conf, cors_keys);

/* An origin "scheme://host[:port]" against one pattern: the same bytes
 * (scheme and host ASCII case-insensitive, RFC 6454 4), or with "*."
 * after the "://" standing for one label of letters, digits and hyphens. */
static int origin_matches(const char *o, size_t olen, const char *p, size_t plen)
{
    const char *star = NULL;
    for (size_t i = 0; i + 4 < plen; i++)
        if (p[i] == ':' && p[i + 1] == '/' && p[i + 2] == '/') {
            if (p[i + 3] == '*')
                star = p + i + 3;
            break;
        }
    if (star == NULL)
        return keel_ascii_iequal(o, olen, p, plen);
    size_t head = (size_t)(star - p), tail = plen - head - 1; /* "scheme://", ".b.example" */
    if (olen <= head + tail || !keel_ascii_iequal(o, head, p, head) ||
        !keel_ascii_iequal(o + olen - tail, tail, star + 1, tail))
        return 0;
    for (size_t i = head; i < olen - tail; i++) {
        char c = o[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-'))
            return 0;
    }
    return 1;
}

enum { ORIGIN_NO = 0, ORIGIN_LISTED, ORIGIN_ANY };

static int origin_allowed(const cors_conf *c, keel_str origin)
{
    int any = 0;
    for (size_t i = 0; i < c->origins.count; i++) {
        const char *at = c->origins.items[i], *end = at + strlen(at), *w;
        size_t len;
        while (keel_word_next(&at, end, 1, &w, &len)) {
            if (len == 1 && w[0] == '*')
                any = 1;
            else if (origin.ptr != NULL && origin_matches(origin.ptr, origin.len, w, len))
                return ORIGIN_LISTED;
        }
    }
    /* Fetch forbids "*" with credentials (the CORS check fails): such a
     * scope answers no origin it does not list. The module's section is
     * refused at load; a scope's merge is seen only here. */
    return any && !c->credentials ? ORIGIN_ANY : ORIGIN_NO;
}

/* 1 if the only pattern is "*" (without credentials): the answer is the
 * same for every origin, and needs no Vary. */
static int answer_is_any(const cors_conf *c)
{
    return c->origins.count == 1 && strcmp(c->origins.items[0], "*") == 0 && !c->credentials;
}

static int word_listed(const char *list, const char *w, size_t len)
{
    const char *at = list, *end = list + (list ? strlen(list) : 0), *x;
    size_t n;
    while (list != NULL && keel_word_next(&at, end, 1, &x, &n))
        if (keel_ascii_iequal(x, n, w, len))
            return 1;
    return 0;
}

/* Fetch's CORS-safelisted methods need no listing. Methods are
 * case-sensitive (RFC 9110 9.1). */
static int method_allowed(const cors_conf *c, keel_str m)
{
    if ((m.len == 3 && memcmp(m.ptr, "GET", 3) == 0) ||
        (m.len == 4 && (memcmp(m.ptr, "HEAD", 4) == 0 || memcmp(m.ptr, "POST", 4) == 0)))
        return 1;
    const char *at = c->methods, *end = at + (at ? strlen(at) : 0), *x;
    size_t n;
    while (at != NULL && keel_word_next(&at, end, 1, &x, &n))
        if (n == m.len && memcmp(x, m.ptr, n) == 0)
            return 1;
    return 0;
}

/* Every field an Access-Control-Request-Headers list names is allowed. */
static int headers_allowed(const cors_conf *c, keel_str list)
{
    const char *at = list.ptr, *e;
    size_t n;
    while (list.ptr != NULL && keel_list_next(&at, list.ptr + list.len, &e, &n))
        if (!word_listed(c->headers, e, n))
            return 0;
    return 1;
}

/* The fields whose values never change, prepared at load
 * (keel_field_prepare): added by pointer, not checked and copied on every
 * response. */
static const keel_prepared_field *vary_origin, *vary_preflight, *allow_any, *allow_credentials;

/* Access-Control-Allow-Origin (and -Credentials) for an allowed origin. */
static void put_origin(keel_response *res, const cors_conf *c, int allowed, keel_str origin)
{
    char value[256];
    if (allowed == ORIGIN_ANY) {
        keel_response_field_add(res, allow_any, 1);
        return;
    }
    size_t n = origin.len < sizeof value - 1 ? origin.len : sizeof value - 1;
    memcpy(value, origin.ptr, n);
    value[n] = '\0';
    keel_response_header_set(res, "Access-Control-Allow-Origin", value);
    if (c->credentials)
        keel_response_field_add(res, allow_credentials, 1);
}

static const char preflight_vary[] =
    "Origin, Access-Control-Request-Method, Access-Control-Request-Headers";

static int preflight(keel_request *req, keel_response *res, const cors_conf *c, keel_str origin,
                     keel_str method)
{
    keel_str asked = keel_request_header(req, "Access-Control-Request-Headers");
    int allowed = origin_allowed(c, origin);
    if (allowed == ORIGIN_NO || !method_allowed(c, method) || !headers_allowed(c, asked))
        return keel_response_send_status(res, 403);
    /* The answer depends on all three fields of the request. */
    keel_response_field_add(res, vary_preflight, 0);
    char buf[512];
    put_origin(res, c, allowed, origin);
    keel_response_header_set(
        res, "Access-Control-Allow-Methods",
        c->methods != NULL ? keel_words_join(c->methods, 1, ", ", buf, sizeof buf) : "GET");
    if (asked.ptr != NULL && asked.len > 0 && asked.len < sizeof buf) {
        /* Echoed: every name was checked against the list above. */
        memcpy(buf, asked.ptr, asked.len);
        buf[asked.len] = '\0';
        keel_response_header_set(res, "Access-Control-Allow-Headers", buf);
    }
    if (c->max_age_ms > 0) {
        snprintf(buf, sizeof buf, "%llu", (unsigned long long)(c->max_age_ms / 1000));
        keel_response_header_set(res, "Access-Control-Max-Age", buf);
    }
    keel_response_set_status(res, 204);
    return keel_response_send(res, "", 0, NULL, NULL);
}

/* The filter's part in a scope (keel_http_filter.scope): none without
 * origins; else the scope's struct, so that a request does not ask for
 * it. */
static int cors_scope(const void *conf, void *ud, void **scope_ud)
{
    (void)ud;
    const cors_conf *c = conf;
    if (c->origins.count == 0)
        return 0;
    *scope_ud = (void *)c;
    return 1;
}

static int cors_on_request(keel_request *req, keel_response *res, void *ud)
{
    const cors_conf *c = ud;
    keel_str m = keel_request_method(req);
    if (m.len != 7 || memcmp(m.ptr, "OPTIONS", 7) != 0)
        return KEEL_HTTP_NEXT;
    keel_str origin = keel_request_header(req, "Origin");
    keel_str method = keel_request_header(req, "Access-Control-Request-Method");
    if (origin.ptr == NULL || method.ptr == NULL)
        return KEEL_HTTP_NEXT; /* an OPTIONS of the application's own */
    int rc = preflight(req, res, c, origin, method);
    return rc < 0 && rc != KEEL_ERR_CLOSED ? rc : KEEL_HTTP_DONE;
}

/* OPTIONS with Access-Control-Request-Method: a preflight (Fetch, "CORS
 * protocol"), whether this module answered it or refused it. */
static int is_preflight(keel_request *req)
{
    keel_str m = keel_request_method(req);
    return m.len == 7 && memcmp(m.ptr, "OPTIONS", 7) == 0 &&
           keel_request_header(req, "Origin").ptr != NULL &&
           keel_request_header(req, "Access-Control-Request-Method").ptr != NULL;
}

static void cors_on_head(keel_request *req, keel_response *res, void *ud)
{
    const cors_conf *c = ud;
    if (keel_response_header(res, "Access-Control-Allow-Origin").ptr)
        return; /* answered (an allowed preflight, the application) */
    if (is_preflight(req)) {
        /* Refused (403 from keel_response_send_status, which starts the
         * fields afresh): no Allow-* field, which fails it in the browser. */
        keel_response_field_add(res, vary_preflight, 0);
        return;
    }
    if (!answer_is_any(c))
        keel_response_field_add(res, vary_origin, 0);
    keel_str origin = keel_request_header(req, "Origin");
    if (origin.ptr == NULL)
        return;
    int allowed = origin_allowed(c, origin);
    if (allowed == ORIGIN_NO)
        return;
    put_origin(res, c, allowed, origin);
    if (c->expose != NULL) {
        char buf[512];
        keel_response_header_set(res, "Access-Control-Expose-Headers",
                                 keel_words_join(c->expose, 1, ", ", buf, sizeof buf));
    }
}

static const keel_http_filter cors_filter = {
    .size = sizeof(keel_http_filter),
    .name = "cors",
    /* A preflight carries no credentials (Fetch): it is answered before
     * an authentication filter would ask for them. */
    .before = "auth_basic",
    .after = "rewrite", /* the scope's origins are those of the rewritten path */
    .on_request = cors_on_request,
    .on_response_head = cors_on_head,
    .scope = cors_scope,
};

static int cors_load(keel_module *m)
{
    const cors_conf *c = keel_module_config(m);
    for (size_t i = 0; c->credentials && i < c->origins.count; i++)
        if (word_listed(c->origins.items[i], "*", 1))
            return keel_config_error(m, "origins",
                                     "* cannot go with credentials = on (the Fetch standard "
                                     "forbids it): list the origins");
    static const char any[] = "*", yes[] = "true", origin[] = "Origin";
    int rc = keel_field_prepare(m, "Vary", 4, origin, sizeof origin - 1, &vary_origin);
    if (rc == KEEL_OK)
        rc = keel_field_prepare(m, "Vary", 4, preflight_vary, sizeof preflight_vary - 1,
                                &vary_preflight);
    if (rc == KEEL_OK)
        rc = keel_field_prepare(m, "Access-Control-Allow-Origin", 27, any, 1, &allow_any);
    if (rc == KEEL_OK)
        rc = keel_field_prepare(m, "Access-Control-Allow-Credentials", 32, yes, 4,
                                &allow_credentials);
    return rc == KEEL_OK ? keel_http_filter_add(m, &cors_filter) : rc;
}

KEEL_MODULE(cors, .version = "1.0.0", .load = cors_load, .config = &cors_schema);
