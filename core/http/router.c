/* The router: a trie of path segments. Each node has literal children, at
 * most one ":param" child and at most one "*" (rest of the path) child, and
 * the handlers registered for the path ending there, per method. Matching
 * tries literal, then parameter, then wildcard at every segment, so the
 * most specific route wins; it backtracks when a more specific branch has
 * no handler for the method. */
#include <stdlib.h>
#include <string.h>

#include "http/http.h"
#include "base/util.h"

typedef struct kl_route_handler {
    char *method; /* "*" for any */
    size_t method_len;
    keel_http_handler handler;
    void *userdata;
    void *owner; /* who registered it, for the message naming a clash */
} kl_route_handler;

struct kl_route_node {
    char *segment;      /* literal text; for the param child, the name */
    size_t segment_len; /* strlen(segment): matching compares lengths first */
    kl_route_node **children;
    size_t nchildren, children_cap;
    kl_route_node *param;
    kl_route_node *wildcard;
    kl_route_handler *handlers;
    size_t nhandlers, handlers_cap;
    void *owner; /* a param node: whose route named the parameter first */
};

static kl_route_node *node_new(const char *segment, size_t len)
{
    kl_route_node *n = calloc(1, sizeof *n);
    if (n != NULL && (n->segment = kl_strndup(segment, len)) == NULL) {
        free(n);
        return NULL;
    }
    if (n != NULL)
        n->segment_len = len;
    return n;
}

void kl_router_free(kl_route_node *n)
{
    if (n == NULL)
        return;
    for (size_t i = 0; i < n->nchildren; i++)
        kl_router_free(n->children[i]);
    kl_router_free(n->param);
    kl_router_free(n->wildcard);
    for (size_t i = 0; i < n->nhandlers; i++)
        free(n->handlers[i].method);
    free(n->children);
    free(n->handlers);
    free(n->segment);
    free(n);
}

static int valid_method(const char *m)
{
    if (strcmp(m, "*") == 0)
        return 1;
    if (*m == '\0')
        return 0;
    for (; *m; m++)
        if (!((*m >= 'A' && *m <= 'Z') || (*m >= 'a' && *m <= 'z') || (*m >= '0' && *m <= '9') ||
              strchr("!#$%&'*+-.^_`|~", *m)))
            return 0;
    return 1;
}

int kl_router_add(kl_route_node **root, const char *method, const char *pattern,
                  keel_http_handler handler, void *userdata)
{
    return kl_router_add_owned(root, method, pattern, handler, userdata, NULL, NULL);
}

int kl_router_add_owned(kl_route_node **root, const char *method, const char *pattern,
                        keel_http_handler handler, void *userdata, void *owner, void **taken_by)
{
    if (taken_by != NULL)
        *taken_by = NULL;
    if (method == NULL || pattern == NULL || handler == NULL || pattern[0] != '/' ||
        !valid_method(method))
        return KEEL_ERR_INVAL;
    if (*root == NULL && (*root = node_new("", 0)) == NULL)
        return KEEL_ERR_NOMEM;
    kl_route_node *n = *root;
    const char *p = pattern + 1;
    size_t nparams = 0;
    int has = *p != '\0'; /* a segment starts at p ("/a/" ends with an empty one) */
    while (has) {
        const char *end = strchr(p, '/');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == 0 && end != NULL)
            return KEEL_ERR_INVAL; /* "//" */
        kl_route_node **slot = NULL;
        if (len == 1 && p[0] == '*') {
            if (end != NULL)
                return KEEL_ERR_INVAL; /* the wildcard must be last */
            slot = &n->wildcard;
        } else if (p[0] == ':') {
            if (len < 2 || ++nparams > KL_MAX_ROUTE_PARAMS - 1)
                return KEEL_ERR_INVAL;
            if (n->param != NULL && (n->param->segment_len != len - 1 ||
                                     memcmp(n->param->segment, p + 1, len - 1) != 0)) {
                if (taken_by != NULL)
                    *taken_by = n->param->owner;
                return KEEL_ERR_EXISTS; /* one name per position */
            }
            slot = &n->param;
            p++, len--;
        } else {
            for (size_t i = 0; i < n->nchildren && slot == NULL; i++)
                if (n->children[i]->segment_len == len &&
                    memcmp(n->children[i]->segment, p, len) == 0)
                    slot = &n->children[i];
            if (slot == NULL) {
                if (kl_grow((void **)&n->children, &n->children_cap, n->nchildren + 1,
                            sizeof *n->children) != KEEL_OK)
                    return KEEL_ERR_NOMEM;
                n->children[n->nchildren] = NULL;
                slot = &n->children[n->nchildren++];
            }
        }
        if (*slot == NULL) {
            if ((*slot = node_new(p, len)) == NULL)
                return KEEL_ERR_NOMEM;
            (*slot)->owner = owner;
        }
        n = *slot;
        has = end != NULL;
        p = has ? end + 1 : p + len;
    }
    for (size_t i = 0; i < n->nhandlers; i++)
        if (strcmp(n->handlers[i].method, method) == 0) {
            if (taken_by != NULL)
                *taken_by = n->handlers[i].owner;
            return KEEL_ERR_EXISTS;
        }
    if (kl_grow((void **)&n->handlers, &n->handlers_cap, n->nhandlers + 1, sizeof *n->handlers) !=
        KEEL_OK)
        return KEEL_ERR_NOMEM;
    kl_route_handler *h = &n->handlers[n->nhandlers];
    if ((h->method = kl_strdup(method)) == NULL)
        return KEEL_ERR_NOMEM;
    h->method_len = strlen(method);
    h->handler = handler;
    h->userdata = userdata;
    h->owner = owner;
    n->nhandlers++;
    return KEEL_OK;
}

/* Byte by byte: methods are a few bytes, shorter than a memcmp call. */
static int method_is(const char *method, size_t len, keel_str m)
{
    if (len != m.len)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (method[i] != m.ptr[i])
            return 0;
    return 1;
}

static const kl_route_handler *find_handler(const kl_route_node *n, keel_str method)
{
    const kl_route_handler *any = NULL;
    for (size_t i = 0; i < n->nhandlers; i++) {
        if (method_is(n->handlers[i].method, n->handlers[i].method_len, method))
            return &n->handlers[i];
        if (strcmp(n->handlers[i].method, "*") == 0)
            any = &n->handlers[i];
    }
    /* RFC 9110 9.3.2: HEAD is GET without the body. */
    if (any == NULL && method_is("HEAD", 4, method))
        for (size_t i = 0; i < n->nhandlers; i++)
            if (strcmp(n->handlers[i].method, "GET") == 0)
                return &n->handlers[i];
    return any;
}

typedef struct match_state {
    keel_str method;
    kl_route_match *m;
    const kl_route_node *first; /* first node matching the path, for 405 */
} match_state;

/* `has` says whether a segment starts at p: "/a/" is "a" then an empty
 * segment, distinct from "/a". */
static int match_node(match_state *st, const kl_route_node *n, const char *p, const char *end,
                      int has)
{
    if (!has) {
        if (n->nhandlers == 0)
            return 0;
        if (st->first == NULL)
            st->first = n;
        const kl_route_handler *h = find_handler(n, st->method);
        if (h == NULL)
            return 0;
        st->m->handler = h->handler;
        st->m->userdata = h->userdata;
        return 1;
    }
    const char *seg_end = memchr(p, '/', (size_t)(end - p));
    int more = seg_end != NULL;
    if (!more)
        seg_end = end;
    size_t len = (size_t)(seg_end - p);
    const char *next = more ? seg_end + 1 : end;

    for (size_t i = 0; i < n->nchildren; i++) {
        const kl_route_node *c = n->children[i];
        if (c->segment_len == len && memcmp(c->segment, p, len) == 0 &&
            match_node(st, c, next, end, more))
            return 1;
    }
    if (n->param != NULL && len > 0) {
        size_t k = st->m->nparams++;
        st->m->names[k] = (keel_str){n->param->segment, n->param->segment_len};
        st->m->values[k] = (keel_str){p, len};
        if (match_node(st, n->param, next, end, more))
            return 1;
        st->m->nparams--;
    }
    if (n->wildcard != NULL) {
        size_t k = st->m->nparams++;
        st->m->names[k] = (keel_str){"*", 1};
        st->m->values[k] = (keel_str){p, (size_t)(end - p)};
        if (match_node(st, n->wildcard, end, end, 0))
            return 1;
        st->m->nparams--;
    }
    return 0;
}

static void list_methods(const kl_route_node *n, char *out, size_t cap)
{
    size_t used = 0;
    int has_get = 0, has_head = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n->nhandlers; i++) {
        const char *m = n->handlers[i].method;
        has_get |= strcmp(m, "GET") == 0;
        has_head |= strcmp(m, "HEAD") == 0;
    }
    for (size_t i = 0; i <= n->nhandlers; i++) {
        const char *m =
            i < n->nhandlers ? n->handlers[i].method : (has_get && !has_head ? "HEAD" : NULL);
        if (m == NULL)
            break;
        size_t len = strlen(m);
        if (used + len + 3 > cap)
            break;
        if (used > 0) {
            memcpy(out + used, ", ", 2);
            used += 2;
        }
        memcpy(out + used, m, len);
        used += len;
        out[used] = '\0';
    }
}

int kl_router_match(const kl_route_node *root, keel_str method, keel_str path,
                    kl_route_match *match)
{
    match->handler = NULL;
    match->nparams = 0;
    match->allow[0] = '\0';
    if (root == NULL || path.len == 0 || path.ptr[0] != '/')
        return 404;
    match_state st = {method, match, NULL};
    const char *end = path.ptr + path.len;
    if (match_node(&st, root, path.ptr + 1, end, path.len > 1))
        return 200;
    match->nparams = 0;
    if (st.first != NULL) {
        list_methods(st.first, match->allow, sizeof match->allow);
        return 405;
    }
    return 404;
}
