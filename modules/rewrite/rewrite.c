/* rewrite — redirects and path rewrites per scope, as nginx's `return` and
 * `rewrite` (ngx_http_rewrite_module) and Caddy's `redir` and `rewrite`:
 *
 *     [listener plain]
 *     rewrite.return = 308 https://$host$request_uri
 *     [site example.com]
 *     rewrite.rewrite = ^/old/(.*)$ /new/$1 last
 *
 * A request filter that runs first: every rule of the request's scope is
 * tried in order on the decoded path (PCRE2, compiled at load with JIT,
 * under a match limit); an internal rewrite gives the core the new path
 * (keel_request_set_path), which chooses the path scope again for `last`;
 * a redirect or a `return` answers at once. docs/web.md is the guide. */
#include <keel/keel.h>
#include <keel/util.h>

#include "rewrite.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct rw_conf {
    const char *ret;
    keel_config_list rewrite;
    int64_t https_port;
    int64_t match_limit;
    int64_t depth_limit;
} rw_conf;

static const keel_config_key rw_keys[] = {
    KEEL_KEY(rw_conf, ret, "return", KEEL_CONFIG_STRING, .scopes = KEEL_SCOPE_ANY,
             .doc = "STATUS [TARGET|TEXT] or URL: answer at once (301/302/303/307/308 with a "
                    "Location built from variables; another status with TEXT or its short body); "
                    "off: none here"),
    KEEL_KEY(rw_conf, rewrite, "rewrite", KEEL_CONFIG_STRING, .flags = KEEL_CONFIG_LIST,
             .scopes = KEEL_SCOPE_ANY,
             .doc = "REGEX REPLACEMENT [last|break|redirect|permanent]: rewrite the decoded path "
                    "(PCRE2; tried in order, before the scope's return)"),
    KEEL_KEY(rw_conf, https_port, "https_port", KEEL_CONFIG_INT, .scopes = KEEL_SCOPE_ANY,
             .def = "443", .min = 1, .max = 65535,
             .doc = "the HTTPS listener's port: $https_host is $host with :PORT unless it is 443"),
    KEEL_KEY(rw_conf, match_limit, "match_limit", KEEL_CONFIG_INT, .def = "100000", .min = 100,
             .max = 100000000,
             .doc = "PCRE2 match limit per expression and path (backtracking steps): a path that "
                    "needs more gets 500"),
    KEEL_KEY(rw_conf, depth_limit, "depth_limit", KEEL_CONFIG_INT, .def = "10000", .min = 10,
             .max = 10000000,
             .doc = "PCRE2 depth limit (backtracking nesting) for expressions without JIT"),
};
KEEL_CONFIG_SCHEMA(rw_schema, rw_conf, rw_keys);

/* nginx stops after 10 cycles of `last` (ngx_http_core_module's
 * NGX_HTTP_MAX_URI_CHANGES) and answers 500. */
#define RW_MAX_RESTARTS 10

/* A scope's rules, shared by the scopes that inherit the same list (the
 * same items pointer). */
typedef struct rw_ruleset {
    const char *const *items;
    rw_rule *rules;
    size_t nrules;
} rw_ruleset;

typedef struct rw_retdef {
    const char *text;
    rw_return ret;
    int off;
} rw_retdef;

typedef struct rw_state {
    keel_module *module;
    pcre2_match_context *mctx;
    rw_ruleset **rulesets;
    size_t nrulesets;
    rw_retdef **returns;
    size_t nreturns;
    rw_program *programs; /* sorted by conf */
    size_t nprograms;
} rw_state;

typedef struct rw_worker {
    pcre2_match_data *md;
} rw_worker;

static keel_http_filter rw_filter;
/* The module's state for the filter, whose userdata is a scope's program
 * (the one module instance a process loads). */
static rw_state *rw_state_of;

/* ---- load: one program per scope's struct ---- */

static int ruleset_for(rw_state *st, const keel_config_list *list, const rw_ruleset **out)
{
    *out = NULL;
    if (list->count == 0)
        return KEEL_OK;
    for (size_t i = 0; i < st->nrulesets; i++)
        if (st->rulesets[i]->items == list->items) {
            *out = st->rulesets[i];
            return KEEL_OK;
        }
    rw_ruleset *rs = calloc(1, sizeof *rs);
    if (rs == NULL || keel_array_add(&st->rulesets, st->nrulesets, sizeof *st->rulesets) != 0 ||
        (rs->rules = calloc(list->count, sizeof *rs->rules)) == NULL) {
        free(rs);
        return KEEL_ERR_NOMEM;
    }
    rs->items = list->items;
    st->rulesets[st->nrulesets++] = rs;
    for (size_t i = 0; i < list->count; i++) {
        char why[512], msg[700];
        if (rw_rule_parse(&rs->rules[i], list->items[i], why, sizeof why) != 0) {
            snprintf(msg, sizeof msg, "%s", why);
            return keel_config_value_error(st->module, list->items[i], msg);
        }
        rs->nrules++;
    }
    *out = rs;
    return KEEL_OK;
}

static int return_for(rw_state *st, const char *text, const rw_return **out)
{
    *out = NULL;
    if (text == NULL)
        return KEEL_OK;
    for (size_t i = 0; i < st->nreturns; i++)
        if (st->returns[i]->text == text) {
            *out = st->returns[i]->off ? NULL : &st->returns[i]->ret;
            return KEEL_OK;
        }
    rw_retdef *rd = calloc(1, sizeof *rd);
    if (rd == NULL || keel_array_add(&st->returns, st->nreturns, sizeof *st->returns) != 0) {
        free(rd);
        return KEEL_ERR_NOMEM;
    }
    rd->text = text;
    st->returns[st->nreturns++] = rd;
    if (strcmp(text, "off") == 0) {
        rd->off = 1; /* an inner scope drops the outer one's return */
        return KEEL_OK;
    }
    char why[512];
    if (rw_return_parse(&rd->ret, text, why, sizeof why) != 0) {
        rd->off = 1;
        return keel_config_value_error(st->module, text, why);
    }
    *out = &rd->ret;
    return KEEL_OK;
}

static int program_add(keel_module *m, const void *confp, void *ud)
{
    rw_state *st = ud;
    const rw_conf *c = confp;
    size_t at = 0;
    while (at < st->nprograms && (uintptr_t)st->programs[at].conf < (uintptr_t)confp)
        at++;
    if (at < st->nprograms && st->programs[at].conf == confp)
        return KEEL_OK; /* shown before */
    (void)m;
    const rw_ruleset *rs;
    const rw_return *ret;
    int rc = ruleset_for(st, &c->rewrite, &rs);
    if (rc == KEEL_OK)
        rc = return_for(st, c->ret, &ret);
    if (rc == KEEL_OK && keel_array_add(&st->programs, st->nprograms, sizeof *st->programs) != 0)
        rc = KEEL_ERR_NOMEM;
    if (rc != KEEL_OK)
        return rc;
    memmove(&st->programs[at + 1], &st->programs[at], (st->nprograms - at) * sizeof *st->programs);
    rw_program *p = &st->programs[at];
    memset(p, 0, sizeof *p);
    st->nprograms++;
    p->conf = confp;
    p->rules = rs ? rs->rules : NULL;
    p->nrules = rs ? rs->nrules : 0;
    p->ret = ret;
    for (size_t i = 0; i < p->nrules; i++)
        p->vars |= p->rules[i].replacement.vars;
    if (ret != NULL)
        p->vars |= ret->what.vars;
    return KEEL_OK;
}

static const rw_program *program_of(const rw_state *st, const void *conf)
{
    size_t lo = 0, hi = st->nprograms;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (st->programs[mid].conf == conf)
            return &st->programs[mid];
        if ((uintptr_t)st->programs[mid].conf < (uintptr_t)conf)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* ---- a request's variables ---- */

typedef struct rw_vars {
    rw_value v[RW_VAR_COUNT];
    unsigned have;
    char host[300];
    char https_host[310];
    char local[64];
    char peer[64];
} rw_vars;

/* The host without port or trailing dot, lower-case (nginx's $host): from
 * an absolute-form target first (RFC 9112 3.2.2), else Host (or
 * :authority), else the address the client reached. */
static void find_host(keel_request *req, rw_vars *vs)
{
    keel_str t = keel_request_target(req), h = {NULL, 0};
    if (t.len > 0 && t.ptr[0] != '/' && t.ptr[0] != '*') {
        const char *s = memchr(t.ptr, ':', t.len);
        if (s != NULL && (size_t)(t.ptr + t.len - s) > 3 && s[1] == '/' && s[2] == '/') {
            const char *a = s + 3, *end = t.ptr + t.len, *e = a;
            while (e < end && *e != '/' && *e != '?')
                e++;
            h = (keel_str){a, (size_t)(e - a)};
        }
    }
    if (h.len == 0)
        h = keel_request_header(req, "host");
    size_t n = 0;
    if (h.ptr != NULL && h.len > 0) {
        if (h.ptr[0] == '[') {
            const char *close = memchr(h.ptr, ']', h.len);
            n = close ? (size_t)(close - h.ptr) + 1 : 0;
        } else {
            const char *colon = memchr(h.ptr, ':', h.len);
            n = colon ? (size_t)(colon - h.ptr) : h.len;
        }
        if (n > 0 && h.ptr[n - 1] == '.')
            n--;
    }
    if (n > 0 && n < sizeof vs->host) {
        for (size_t i = 0; i < n; i++) {
            char c = h.ptr[i];
            vs->host[i] = c >= 'A' && c <= 'Z' ? (char)(c + 32) : c;
        }
        vs->host[n] = '\0';
    } else {
        /* No name: the address the client reached, "[::1]" for IPv6. */
        n = 0;
        if (vs->local[0] != '\0') {
            const char *colon = strrchr(vs->local, ':');
            n = colon ? (size_t)(colon - vs->local) : 0;
            memcpy(vs->host, vs->local, n);
        }
        vs->host[n] = '\0';
    }
    vs->v[RW_VAR_HOST] = (rw_value){vs->host, n};
}

static void fill_vars(keel_request *req, const rw_conf *c, unsigned want, rw_vars *vs)
{
    want &= ~vs->have;
    if (want == 0)
        return;
    vs->have |= want;
    if ((want & ((1u << RW_VAR_SERVER_PORT) | (1u << RW_VAR_HOST) | (1u << RW_VAR_HTTPS_HOST))) &&
        vs->local[0] == '\0')
        keel_request_local_name(req, vs->local, sizeof vs->local);
    if (want & (1u << RW_VAR_SCHEME)) {
        const char *s = keel_request_scheme(req);
        vs->v[RW_VAR_SCHEME] = (rw_value){s, strlen(s)};
    }
    if ((want & ((1u << RW_VAR_HOST) | (1u << RW_VAR_HTTPS_HOST))) &&
        vs->v[RW_VAR_HOST].ptr == NULL)
        find_host(req, vs);
    if (want & (1u << RW_VAR_HTTPS_HOST)) {
        int n = c->https_port == 443
                    ? snprintf(vs->https_host, sizeof vs->https_host, "%s", vs->host)
                    : snprintf(vs->https_host, sizeof vs->https_host, "%s:%lld", vs->host,
                               (long long)c->https_port);
        vs->v[RW_VAR_HTTPS_HOST] = (rw_value){vs->https_host, n > 0 ? (size_t)n : 0};
    }
    if (want & (1u << RW_VAR_REQUEST_URI)) {
        keel_str t = keel_request_target(req);
        if (t.len > 0 && t.ptr[0] != '/' && t.ptr[0] != '*') { /* absolute-form: from the path */
            const char *s = memchr(t.ptr, ':', t.len), *end = t.ptr + t.len;
            const char *p = s && (size_t)(end - s) > 3 ? s + 3 : end;
            while (p < end && *p != '/' && *p != '?')
                p++;
            t = (keel_str){p, (size_t)(end - p)};
        }
        vs->v[RW_VAR_REQUEST_URI] = (rw_value){t.ptr, t.len};
    }
    if (want & ((1u << RW_VAR_ARGS) | (1u << RW_VAR_IS_ARGS))) {
        keel_str q = keel_request_query(req);
        vs->v[RW_VAR_ARGS] = (rw_value){q.ptr, q.len};
        vs->v[RW_VAR_IS_ARGS] = (rw_value){"?", q.len > 0 ? 1u : 0u};
    }
    if (want & (1u << RW_VAR_SERVER_PORT)) {
        const char *colon = strrchr(vs->local, ':');
        vs->v[RW_VAR_SERVER_PORT] =
            colon ? (rw_value){colon + 1, strlen(colon + 1)} : (rw_value){NULL, 0};
    }
    if (want & (1u << RW_VAR_REMOTE_ADDR)) {
        keel_request_peer_ip(req, vs->peer, sizeof vs->peer);
        vs->v[RW_VAR_REMOTE_ADDR] = (rw_value){vs->peer, strlen(vs->peer)};
    }
}

/* $uri changes with every rewrite: read it afresh each time. */
static void fresh_uri(keel_request *req, rw_vars *vs)
{
    keel_str p = keel_request_path(req);
    vs->v[RW_VAR_URI] = (rw_value){p.ptr, p.len};
}

/* ---- answers ---- */

/* Answers with status (a failure to send means the client left: the
 * exchange is over either way). */
static int answer(keel_response *res, int status)
{
    (void)keel_response_send_status(res, status);
    return KEEL_HTTP_DONE;
}

/* The old query goes after a redirect's or rewrite's own (nginx), unless
 * its replacement ends with "?". */
static void add_old_query(const rw_template *t, const rw_vars *vs, int query_started, rw_buf *b)
{
    rw_value q = vs->v[RW_VAR_ARGS];
    if (t->ends_query || q.len == 0)
        return;
    rw_buf_add(b, query_started ? "&" : "?", 1);
    rw_buf_add(b, q.ptr, q.len);
}

/* A Location starting "//" or "/\" is a network-path reference (RFC 3986
 * 4.2): the client goes to the host after it (browsers read "\" as "/",
 * WHATWG URL). Unless the target was written so, a variable put it there:
 * "$request_uri/" for "//evil.example/..%2fgo/", which the core resolves
 * to /go/. Its second byte is percent-encoded, which keeps the client on
 * this host; nginx makes such a Location absolute (absolute_redirect). */
static void keep_on_host(const rw_template *t, rw_buf *location)
{
    const char *l = location->ptr;
    if (location->failed || location->len < 2 || l[0] != '/' || (l[1] != '/' && l[1] != '\\'))
        return;
    const rw_piece *first = t->npieces > 0 ? &t->pieces[0] : NULL;
    if (first != NULL && first->kind == RW_LITERAL && first->len >= 2 && first->text[1] == l[1])
        return; /* "//cdn.example/x" as the config wrote it */
    rw_buf b;
    rw_buf_init(&b);
    rw_buf_add(&b, l[1] == '/' ? "/%2F" : "/%5C", 4);
    rw_buf_add(&b, l + 2, location->len - 2);
    rw_buf_free(location);
    *location = b;
    if (!b.heap)
        location->ptr = location->inline_bytes;
}

static int redirect(keel_response *res, int status, rw_buf *location)
{
    if (location->failed || keel_response_header_set(res, "Location", location->ptr) != KEEL_OK)
        return answer(res, 500); /* out of memory, or a value no field may hold */
    /* keel_response_send_status would drop the Location: the same short
     * body, written here. */
    char text[96];
    int n = snprintf(text, sizeof text, "%d %s\n", status, keel_http_reason(status));
    keel_response_set_status(res, status);
    keel_response_header_set(res, "Content-Type", "text/plain; charset=utf-8");
    keel_response_send_copy(res, text, (size_t)n);
    return KEEL_HTTP_DONE;
}

static int do_return(keel_request *req, keel_response *res, const rw_conf *c, const rw_return *ret,
                     rw_vars *vs, const rw_captures *caps)
{
    if (!ret->has_target)
        return answer(res, ret->status);
    fill_vars(req, c, ret->what.vars, vs);
    fresh_uri(req, vs);
    rw_buf b;
    rw_buf_init(&b);
    rw_template_expand(&ret->what, vs->v, caps, ret->redirect, RW_PART_ALL, &b);
    int rc;
    if (ret->redirect) {
        keep_on_host(&ret->what, &b);
        rc = redirect(res, ret->status, &b);
    } else if (b.failed) {
        rc = answer(res, 500);
    } else {
        keel_response_set_status(res, ret->status);
        keel_response_header_set(res, "Content-Type", "text/plain; charset=utf-8");
        keel_response_send_copy(res, b.ptr, b.len);
        rc = KEEL_HTTP_DONE;
    }
    rw_buf_free(&b);
    return rc;
}

/* One rule matched: a redirect (DONE), or the path rewritten (NEXT; with
 * *stop set for a rule that ends the rewriting, or DONE with an error
 * answered). */
/* path_len: the length of the request's path the rule matched. */
static int apply(keel_request *req, keel_response *res, const rw_conf *c, const rw_rule *r,
                 rw_vars *vs, const rw_captures *caps, size_t path_len)
{
    /* "^/api/(.*)$ /api/$1 break": the path as it is. The core's path is
     * normalised already, so setting it again would change nothing but
     * cost a copy and a normalisation (and the expansion, to find out).
     * Not for `last`, whose scope is chosen again: an earlier rule without
     * a flag may have changed the path without it. */
    if (r->flag != RW_FLAG_LAST && rw_rule_keeps_path(r, caps, path_len))
        return KEEL_HTTP_NEXT;
    /* The old query is read only where it is put after the new target
     * (add_old_query): an internal rewrite without a '?' keeps it as it is. */
    unsigned want = r->replacement.vars;
    if (r->external || r->replacement.has_query)
        want |= 1u << RW_VAR_ARGS;
    fill_vars(req, c, want, vs);
    fresh_uri(req, vs);
    rw_buf b;
    rw_buf_init(&b);
    int rc = KEEL_HTTP_NEXT;
    if (r->external) {
        rw_template_expand(&r->replacement, vs->v, caps, 1, RW_PART_ALL, &b);
        if (r->replacement.ends_query && b.len > 0)
            b.ptr[--b.len] = '\0';
        add_old_query(&r->replacement, vs, r->replacement.has_query, &b);
        keep_on_host(&r->replacement, &b);
        rc = redirect(res, r->flag == RW_FLAG_PERMANENT ? 301 : 302, &b);
        rw_buf_free(&b);
        return rc;
    }
    rw_buf q; /* set up only for a query (its 1 KiB left as it is) */
    q.ptr = NULL;
    q.len = 0;
    q.failed = 0;
    rw_template_expand(&r->replacement, vs->v, caps, 0, RW_PART_PATH, &b);
    unsigned flags = r->flag == RW_FLAG_LAST ? KEEL_PATH_RESCOPE : 0;
    if (r->replacement.has_query) {
        rw_buf_init(&q);
        rw_template_expand(&r->replacement, vs->v, caps, 0, RW_PART_QUERY, &q);
        add_old_query(&r->replacement, vs, q.len > 0, &q);
        if (q.len > 0 && q.ptr[0] == '?') /* no query of its own: the old one alone */
            memmove(q.ptr, q.ptr + 1, q.len--);
        flags |= KEEL_PATH_QUERY;
    }
    /* The path as it is, from another replacement ("^/(.*)/$ /$1/"): as
     * above. */
    keel_str now = keel_request_path(req);
    int same = flags == 0 && !b.failed && b.len == now.len && memcmp(b.ptr, now.ptr, b.len) == 0;
    int set =
        same ? KEEL_OK
        : b.failed || q.failed
            ? KEEL_ERR_NOMEM
            : keel_request_set_path(req, b.ptr, b.len, q.len > 0 ? q.ptr : NULL, q.len, flags);
    if (set == KEEL_ERR_INVAL) {
        /* Above "/", a NUL, not a path, or a query with a byte no target
         * may hold: what the core answers a client whose own path is that. */
        keel_log(rw_filter.userdata, KEEL_LOG_INFO,
                 "rewrite '%s': '%.*s' is not a path under \"/\" (or its query is not one a "
                 "target may hold): 400",
                 r->line, (int)b.len, b.ptr);
        rc = answer(res, 400);
    } else if (set != KEEL_OK) {
        rc = answer(res, 500);
    } else {
        /* The query may have changed with the path. */
        vs->have &= ~((1u << RW_VAR_ARGS) | (1u << RW_VAR_IS_ARGS));
    }
    rw_buf_free(&b);
    if (r->replacement.has_query)
        rw_buf_free(&q);
    return rc;
}

/* The filter's part in a scope (keel_http_filter.scope): none where the
 * scope's struct has no rule and no return; else its program. */
static int rw_scope_of(const void *conf, void *ud, void **scope_ud)
{
    const rw_conf *c = conf;
    if (c->rewrite.count == 0 && c->ret == NULL)
        return 0;
    const rw_program *p = program_of(keel_module_data(ud), c);
    if (p == NULL)
        return KEEL_ERR_STATE; /* not shown at load: cannot happen */
    *scope_ud = (void *)p;
    return 1;
}

static int rw_on_request(keel_request *req, keel_response *res, void *ud)
{
    const rw_program *p = ud;
    const rw_conf *c = p->conf;
    const rw_state *st = rw_state_of;
    keel_module *m = st->module;
    /* The worker's match data, asked for when a rule needs PCRE2 (not
     * for the "^PREFIX(.*)$" rules matched inline). */
    pcre2_match_data *md = NULL;
    rw_vars vs;
    vs.have = 0;
    vs.local[0] = '\0';
    vs.v[RW_VAR_HOST].ptr = NULL;
    rw_captures caps;
    caps.n = 0;
    for (int restarts = 0;; restarts++) {
        int changed = 0, restart = 0;
        for (size_t i = 0; i < p->nrules && !restart; i++) {
            const rw_rule *r = &p->rules[i];
            keel_str path = keel_request_path(req);
            if (md == NULL && !r->rest_capture)
                md = ((rw_worker *)keel_worker_state(keel_request_worker(req), m))->md;
            int rc = rw_rule_match(r, path.ptr, path.len, md, st->mctx, &caps);
            if (rc == PCRE2_ERROR_NOMATCH)
                continue;
            if (rc < 0) {
                /* The match limit (a hostile path against a backtracking
                 * expression) or another failure: nginx answers 500. */
                char msg[128];
                pcre2_get_error_message(rc, (PCRE2_UCHAR *)msg, sizeof msg);
                keel_log(m, KEEL_LOG_WARN, "rewrite '%s' on a path of %zu bytes: %s: 500", r->line,
                         path.len, msg);
                return answer(res, 500);
            }
            rc = apply(req, res, c, r, &vs, &caps, path.len);
            if (rc != KEEL_HTTP_NEXT || r->external)
                return KEEL_HTTP_DONE;
            changed = 1;
            if (r->flag == RW_FLAG_BREAK)
                return KEEL_HTTP_NEXT;
            restart = r->flag == RW_FLAG_LAST;
        }
        if (!restart) {
            if (p->ret != NULL)
                return do_return(req, res, c, p->ret, &vs, &caps);
            if (!changed)
                return KEEL_HTTP_NEXT;
            /* Rules without a flag went on to the end: the path changed,
             * so its scope is chosen again (nginx searches the locations
             * again after the rewrite phase). */
            keel_str path = keel_request_path(req);
            if (keel_request_set_path(req, path.ptr, path.len, NULL, 0, KEEL_PATH_RESCOPE) !=
                KEEL_OK)
                return answer(res, 500);
        }
        if (restarts + 1 > RW_MAX_RESTARTS) {
            keel_str path = keel_request_path(req);
            keel_log(m, KEEL_LOG_ERROR,
                     "rewrite: more than %d rewrites restarted the scope choice (now at '%.*s'): "
                     "500",
                     RW_MAX_RESTARTS, (int)(path.len > 200 ? 200 : path.len), path.ptr);
            return answer(res, 500);
        }
        c = keel_request_config(req, m);
        if (c->rewrite.count == 0 && c->ret == NULL)
            return KEEL_HTTP_NEXT;
        if ((p = program_of(st, c)) == NULL)
            return KEEL_HTTP_NEXT; /* not shown at load: cannot happen */
    }
}

/* ---- the module ---- */

static int rw_start(keel_module *m, keel_worker *worker, void *state)
{
    (void)m;
    (void)worker;
    rw_worker *w = state;
    /* Ten pairs: $0..$9. */
    w->md = pcre2_match_data_create(10, NULL);
    return w->md != NULL ? KEEL_OK : KEEL_ERR_NOMEM;
}

static void rw_stop(keel_module *m, keel_worker *worker, void *state)
{
    (void)m;
    (void)worker;
    rw_worker *w = state;
    pcre2_match_data_free(w->md);
    w->md = NULL;
}

static void rw_unload(keel_module *m)
{
    rw_state *st = keel_module_data(m);
    if (st == NULL)
        return;
    for (size_t i = 0; i < st->nrulesets; i++) {
        for (size_t k = 0; k < st->rulesets[i]->nrules; k++)
            rw_rule_free(&st->rulesets[i]->rules[k]);
        free(st->rulesets[i]->rules);
        free(st->rulesets[i]);
    }
    for (size_t i = 0; i < st->nreturns; i++) {
        rw_return_free(&st->returns[i]->ret);
        free(st->returns[i]);
    }
    free(st->rulesets);
    free(st->returns);
    free(st->programs);
    pcre2_match_context_free(st->mctx);
    free(st);
    keel_module_set_data(m, NULL);
    rw_state_of = NULL;
}

static int rw_load(keel_module *m)
{
    const rw_conf *g = keel_module_config(m);
    rw_state *st = calloc(1, sizeof *st);
    if (st == NULL)
        return KEEL_ERR_NOMEM;
    st->module = m;
    keel_module_set_data(m, st);
    rw_state_of = st;
    /* PCRE2's defaults (ten million steps) let one crafted path hold a
     * worker for seconds against a backtracking expression; these bound
     * it per expression and path (docs/security.md). The JIT counts the
     * match limit too; the depth limit is the interpreter's. */
    st->mctx = pcre2_match_context_create(NULL);
    if (st->mctx == NULL)
        return KEEL_ERR_NOMEM;
    pcre2_set_match_limit(st->mctx, (uint32_t)g->match_limit);
    pcre2_set_depth_limit(st->mctx, (uint32_t)g->depth_limit);
    int rc = program_add(m, g, st);
    if (rc == KEEL_OK)
        rc = keel_module_config_scopes(m, program_add, st);
    if (rc != KEEL_OK)
        return rc;
    rw_filter = (keel_http_filter){
        .size = sizeof rw_filter,
        .name = "rewrite",
        /* First: the filters after it, the router and the handler see the
         * rewritten path and its scope (nginx's rewrite phases come before
         * access and content). */
        .order = KEEL_ORDER_FIRST,
        .userdata = m,
        .on_request = rw_on_request,
        .scope = rw_scope_of,
    };
    return keel_http_filter_add(m, &rw_filter);
}

KEEL_MODULE(rewrite, .version = "1.0.0", .worker_state_size = sizeof(rw_worker), .load = rw_load,
            .start = rw_start, .stop = rw_stop, .unload = rw_unload, .config = &rw_schema);
