/* headers.c — the fields a proxy must change on the way through:
 *
 * - hop-by-hop fields are the connection's, never forwarded (RFC 9110
 *   7.6.1): Connection, every field it names, Proxy-Connection,
 *   Keep-Alive, TE, Transfer-Encoding and Upgrade (the framing and the
 *   upgrade are ours to write on each side);
 * - the client's address, the scheme and the Host it asked for reach the
 *   upstream as X-Forwarded-For / -Proto / -Host (the de facto fields) and
 *   as Forwarded (RFC 7239), each appended to what an earlier proxy wrote;
 * - Via is appended both ways (RFC 9110 7.6.3: "A proxy MUST send an
 *   appropriate Via header field ... in each message that it forwards");
 * - Host is the client's, the upstream's address, or a fixed value
 *   (pass's host=); a redirect's Location naming the upstream is rewritten
 *   to the address the client used (nginx's proxy_redirect default);
 * - the upstream's Date and Server are dropped unless kept (server=keep,
 *   date=keep), so that keel's own are sent, as nginx does;
 * - the request line and fields are what HTTP/1.1 can carry: keel is a
 *   gateway from HTTP/2 too, where a :path may hold a space and a value a
 *   control byte (RFC 9110 5.5, RFC 9113 8.2.1), so what cannot be written
 *   as HTTP/1.1 is refused with 400 before anything is forwarded, and the
 *   head builder writes nothing unchecked whatever the caller did;
 * - the target goes in origin form (RFC 9112 3.2.1), an absolute-form
 *   target's authority standing for Host (3.2.2);
 * - Upgrade only for the protocols allowed (`upgrade`), never HTTP/2's.
 */
#include "px.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int name_eq(keel_str a, const char *b)
{
    return keel_ascii_iequal_z(a.ptr, a.len, b);
}

/* Calls fn for each element of a comma-separated list (RFC 9110 5.6.1),
 * trimmed; stops when it returns non-zero and returns that. */
static int each_element(keel_str list, int (*fn)(keel_str el, void *arg), void *arg)
{
    const char *at = list.ptr, *el;
    size_t len;
    if (list.ptr == NULL)
        return 0;
    while (keel_list_next(&at, list.ptr + list.len, &el, &len)) {
        int rc = fn((keel_str){el, len}, arg);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static int equal_element(keel_str el, void *name)
{
    const keel_str *n = name;
    return keel_ascii_iequal(el.ptr, el.len, n->ptr, n->len);
}

/* An element equal to the NUL-terminated arg (any case). */
static int element_equal(keel_str el, void *arg)
{
    return name_eq(el, arg);
}

/* Is `name` one of list's elements (any case)? */
static int listed(keel_str list, keel_str name)
{
    return each_element(list, equal_element, &name);
}

/* RFC 9110 7.6.1. `connection` is the message's Connection value (may be
 * absent): the fields it names are hop-by-hop too, as are those the token
 * table flags KEEL_HDR_FLAG_HOP_BY_HOP: the connection's own, HTTP2-Settings
 * (RFC 7540 3.2.1), which only an h2c upgrade carries, and Trailer: the
 * framing is re-done on each side, and a response's trailers are
 * announced again by http1's own framing. */
int px_hop_by_hop(keel_str name, unsigned token, keel_str connection)
{
    if (keel_header_token_flags(token) & KEEL_HDR_FLAG_HOP_BY_HOP)
        return 1;
    return connection.ptr != NULL && listed(connection, name);
}

/* A message's Connection options, walked once: a field is looked up in
 * them by length first. More than PX_NAMED_MAX options: the list is walked
 * for each field, as before. */
#define PX_NAMED_MAX 8

typedef struct named_list {
    keel_str list;
    size_t n; /* > PX_NAMED_MAX: too many to keep */
    keel_str el[PX_NAMED_MAX];
} named_list;

static void named_init(named_list *nl, keel_str list)
{
    const char *at = list.ptr, *el;
    size_t len;
    nl->list = list;
    nl->n = 0;
    if (list.ptr == NULL)
        return;
    /* No comma and no blank at either end ("keep-alive", "close"): the
     * one element keel_list_next would find is the whole value. */
    if (list.len > 0 && memchr(list.ptr, ',', list.len) == NULL && list.ptr[0] != ' ' &&
        list.ptr[0] != '\t' && list.ptr[list.len - 1] != ' ' && list.ptr[list.len - 1] != '\t') {
        nl->el[nl->n++] = list;
        return;
    }
    while (keel_list_next(&at, list.ptr + list.len, &el, &len)) {
        if (nl->n < PX_NAMED_MAX)
            nl->el[nl->n] = (keel_str){el, len};
        if (++nl->n > PX_NAMED_MAX)
            return;
    }
}

/* px_hop_by_hop with the Connection options walked once. */
static int hop_by_hop_named(keel_str name, unsigned token, const named_list *nl)
{
    if (keel_header_token_flags(token) & KEEL_HDR_FLAG_HOP_BY_HOP)
        return 1;
    if (nl->n > PX_NAMED_MAX)
        return listed(nl->list, name);
    for (size_t i = 0; i < nl->n; i++)
        if (nl->el[i].len == name.len &&
            keel_ascii_iequal(nl->el[i].ptr, name.len, name.ptr, name.len))
            return 1;
    return 0;
}

/* ---- what HTTP/1.1 can carry ------------------------------------------------------ */

/* The grammars are the core's (keel_http_valid), so that a request the
 * gateway passes on is the one keel's own protocols checked. */
static int is_token(keel_str s)
{
    return keel_http_valid(KEEL_HTTP_TOKEN, s.ptr, s.len);
}

/* RFC 9110 7.2: Host = uri-host [ ":" port ], never userinfo. Empty is
 * valid (a target with no authority). */
static int valid_host(keel_str h)
{
    return h.len == 0 || keel_http_valid(KEEL_HTTP_AUTHORITY, h.ptr, h.len);
}

/* RFC 9110 5.5 (CR, LF and NUL spliced into the upstream's stream; HTTP/2
 * lets the other controls through, RFC 9113 8.2.1 forbidding only those
 * three). */
static int value_ok(keel_str v)
{
    return keel_http_valid(KEEL_HTTP_FIELD_VALUE, v.ptr, v.len);
}

/* A field HTTP/1.1 can carry as it is: a token for a name (RFC 9110 5.1),
 * and a valid value. */
int px_field_ok(keel_str name, keel_str value)
{
    return is_token(name) && value_ok(value);
}

/* The parts of a request-target the upstream gets (RFC 9112 3.2):
 * `origin` is what follows the authority of an absolute-form target
 * (empty, "?query", or "/path..."), or the whole of an origin-form one or
 * of "*"; `authority` is an absolute-form target's, else empty. 0, or -1
 * for a target HTTP/1.1 cannot carry: a byte outside VCHAR or a '#', a
 * scheme other than http(s), userinfo (RFC 9110 4.2.4), no host. */
static int target_parts(keel_str t, keel_str *origin, keel_str *authority)
{
    *authority = (keel_str){"", 0};
    *origin = t;
    if (t.len == 0)
        return -1;
    if (!keel_http_valid(KEEL_HTTP_TARGET, t.ptr, t.len))
        return -1;
    if (t.ptr[0] == '/' || (t.len == 1 && t.ptr[0] == '*'))
        return 0;
    size_t i = 0;
    while (i < t.len && t.ptr[i] != ':')
        i++;
    keel_str scheme = {t.ptr, i};
    if (!name_eq(scheme, "http") && !name_eq(scheme, "https"))
        return -1;
    if (t.len - i < 3 || t.ptr[i + 1] != '/' || t.ptr[i + 2] != '/')
        return -1;
    size_t a = i + 3, e = a;
    while (e < t.len && t.ptr[e] != '/' && t.ptr[e] != '?')
        e++;
    *authority = (keel_str){t.ptr + a, e - a};
    *origin = (keel_str){t.ptr + e, t.len - e};
    if (e == a || memchr(t.ptr + a, '@', e - a) != NULL || !valid_host(*authority))
        return -1;
    return 0;
}

/* The authority the client asked for: an absolute-form target's (RFC 9112
 * 3.2.2: it replaces Host), else Host (HTTP/2's :authority stands for it,
 * RFC 9113 8.3.1). ptr NULL if there is none. */
static keel_str request_authority(keel_request *req)
{
    keel_str origin, authority;
    if (target_parts(keel_request_target(req), &origin, &authority) == 0 && authority.len > 0)
        return authority;
    return keel_request_header(req, "Host");
}

/* 400 for a request that cannot go to an HTTP/1.1 upstream as it is (RFC
 * 9110 5.5, RFC 9112 3; what an HTTP/2 client may send and RFC 9113 8.2.1
 * and 8.3.1 call malformed), else 0. http1 has refused all of it already;
 * h2 today lets some through, and a gateway must not rely on either. */
int px_request_refusal(keel_request *req)
{
    /* The method, the target's bytes, every field and Host's syntax are
     * ones HTTP/1.1 can carry: the core guarantees it for every protocol
     * (keel_http_sink's KEEL_HTTP_SINK_CHECKED, or its own check). What is
     * the gateway's own to refuse: */
    keel_str origin, authority;
    keel_str method = keel_request_method(req), target = keel_request_target(req);
    if (target_parts(target, &origin, &authority) != 0)
        return 400; /* a scheme but http(s), userinfo, no host */
    if (target.len == 1 && target.ptr[0] == '*' && !name_eq(method, "OPTIONS"))
        return 400; /* RFC 9112 3.2.4: asterisk-form is OPTIONS' alone */
    /* RFC 9112 3.2: one Host (the builder sends the first, and it must be
     * the one keel saw). */
    size_t n = keel_request_header_count(req), hosts = 0;
    for (size_t i = 0; i < n; i++) {
        keel_header h;
        if (keel_request_header_at(req, i, &h) == KEEL_OK && h.name.len == 4 &&
            name_eq(h.name, "host") && ++hosts > 1)
            return 400;
    }
    return 0;
}

/* ---- Upgrade ----------------------------------------------------------------------------- */

/* RFC 9113 3.1: "h2c" as an Upgrade token is deprecated, and an upgrade
 * to it would hand the client an HTTP/2 connection straight to the
 * upstream, past keel's routes; "h2" is never negotiated by Upgrade (RFC
 * 7540 3.2: a server ignores it). Neither is passed, whatever the list. */
int px_upgrade_name_ok(const char *name)
{
    keel_str n = {name, strlen(name)};
    const char *slash = strchr(name, '/');
    if (slash != NULL)
        n.len = (size_t)(slash - name);
    return n.len > 0 && !name_eq(n, "h2c") && !name_eq(n, "h2");
}

/* Is this element of an Upgrade list ("name" or "name/version", RFC 9110
 * 7.8) one the route passes? */
static int upgrade_allowed(const px_route *r, keel_str protocol)
{
    keel_str name = protocol;
    const char *slash = memchr(protocol.ptr, '/', protocol.len);
    if (slash != NULL)
        name.len = (size_t)(slash - protocol.ptr);
    if (name.len == 0 || name_eq(name, "h2c") || name_eq(name, "h2"))
        return 0;
    for (size_t i = 0; i < r->nupgrades; i++) {
        const char *a = r->upgrades[i];
        if (strchr(a, '/') != NULL ? name_eq(protocol, a) : name_eq(name, a))
            return 1;
    }
    return 0;
}

/* Is `token` one of the comma-separated elements of list (any case)? */
int px_token_in_list(keel_str list, const char *token)
{
    return keel_list_has(list.ptr, list.len, token);
}

static int allowed_element(keel_str el, void *arg)
{
    return upgrade_allowed(arg, el);
}

/* An HTTP/1.1 request asking to upgrade (Upgrade, and Connection naming
 * it: RFC 9110 7.8) to at least one protocol the route passes. Anything
 * else goes as an ordinary request without its Upgrade (hop-by-hop), as
 * nginx passes it. HTTP/1.0 has no upgrades (7.8), HTTP/2 none by this
 * field (RFC 9113 8.2.2). */
int px_upgrade_requested(const px_route *r, keel_request *req)
{
    keel_str upgrade = keel_request_header_token(req, KEEL_HDR_UPGRADE);
    return upgrade.ptr != NULL && keel_request_version(req) == 11 &&
           px_token_in_list(keel_request_header(req, "Connection"), "upgrade") &&
           each_element(upgrade, allowed_element, (void *)r) != 0;
}

typedef struct offered_check {
    const px_route *route;
    keel_str offered; /* the client's Upgrade list */
} offered_check;

/* 1 if the element is not one the client asked for and keel passed. */
static int not_offered(keel_str el, void *arg)
{
    const offered_check *oc = arg;
    char want[128];
    if (el.len >= sizeof want || !upgrade_allowed(oc->route, el))
        return 1;
    memcpy(want, el.ptr, el.len);
    want[el.len] = '\0';
    return each_element(oc->offered, element_equal, want) == 0;
}

/* A 101 switches to what it names in Upgrade, which must be among what the
 * client asked for (RFC 9110 7.8: "A server MUST NOT switch to a protocol
 * that was not indicated by the client") and what keel passed on: an
 * upstream answering 101 to h2c (or anything else) is not relayed. */
int px_upgrade_accepted(const px_ex *ex)
{
    if (ex->req == NULL)
        return 0;
    keel_str named = {NULL, 0};
    for (size_t i = 0; i < ex->nfields; i++)
        if (ex->fields[i].token == KEEL_HDR_UPGRADE)
            named = px_field_value(ex, i);
    offered_check oc = {ex->route, keel_request_header(ex->req, "Upgrade")};
    return named.len > 0 && each_element(named, not_offered, &oc) == 0;
}

/* ---- a small string builder ------------------------------------------------------ */

typedef struct sb {
    char *p;
    size_t len, cap;
    int failed;
} sb;

static void sb_put_slow(sb *b, const char *s, size_t n)
{
    if (!b->failed && keel_append(&b->p, &b->len, &b->cap, s, n, 1024) != 0)
        b->failed = 1;
}

/* keel_append's result (a NUL kept after the bytes), with the room
 * checked inline: a request head is some thirty puts. */
static inline void sb_put(sb *b, const char *s, size_t n)
{
    if (b->len + n < b->cap && !b->failed) {
        memcpy(b->p + b->len, s, n);
        b->len += n;
        b->p[b->len] = '\0';
        return;
    }
    sb_put_slow(b, s, n);
}

static void sb_str(sb *b, const char *s)
{
    sb_put(b, s, strlen(s));
}

static void sb_ks(sb *b, keel_str s)
{
    if (s.ptr != NULL)
        sb_put(b, s.ptr, s.len);
}

typedef struct upgrade_writer {
    sb *b;
    const px_route *route;
    int n;
} upgrade_writer;

static int write_allowed(keel_str el, void *arg)
{
    upgrade_writer *w = arg;
    if (upgrade_allowed(w->route, el)) {
        sb_str(w->b, w->n++ ? ", " : "");
        sb_ks(w->b, el);
    }
    return 0;
}

/* A hop-by-hop list field (X-Forwarded-For, Forwarded: RFC 7239 4, Via:
 * RFC 9110 7.6.3): its name, then the members the earlier hops listed and
 * a comma, so that this hop's member goes last. */
static void sb_hop_list(sb *b, const char *name, const sb *earlier)
{
    sb_str(b, name);
    if (earlier->len) {
        sb_put(b, earlier->p, earlier->len);
        sb_str(b, ", ");
    }
}

/* RFC 7239 4: a node or host that is not a token goes in a quoted-string
 * (an IPv6 address as "[v6]", a host with a port). */
static void sb_forwarded_value(sb *b, const char *v, size_t n, int bracket)
{
    if (!bracket && (n == 0 || keel_http_valid(KEEL_HTTP_TOKEN, v, n))) {
        sb_put(b, v, n);
        return;
    }
    sb_put(b, bracket ? "\"[" : "\"", bracket ? 2 : 1);
    /* An address or an authority has no byte to escape: one run. */
    if (memchr(v, '"', n) == NULL && memchr(v, '\\', n) == NULL) {
        sb_put(b, v, n);
    } else {
        for (size_t i = 0; i < n; i++) {
            if (v[i] == '"' || v[i] == '\\')
                sb_put(b, "\\", 1);
            sb_put(b, v + i, 1);
        }
    }
    sb_put(b, bracket ? "]\"" : "\"", bracket ? 2 : 1);
}

/* Every Connection field's options as one list. A message may carry the
 * field more than once, which means what one field with the values joined
 * means (RFC 9110 5.3), and each option names a hop-by-hop field (7.6.1):
 * looking at the first alone let "Connection: X-Secret" in a second one
 * pass X-Secret on. `joined` holds the list when there are several. */
static keel_str join_connection(keel_str value, size_t *count, keel_str first, sb *joined)
{
    if (++*count == 1)
        return value;
    if (*count == 2)
        sb_ks(joined, first);
    sb_str(joined, ", ");
    sb_ks(joined, value);
    return (keel_str){joined->p, joined->len};
}

/* The request's fields read once for the builder: views and tokens of the
 * first PX_FIELDS_SEEN (the rest are asked again), the first Host, and
 * every Connection's options as one list. */
#define PX_FIELDS_SEEN 64

typedef struct request_fields {
    size_t n;
    keel_header f[PX_FIELDS_SEEN];
    unsigned token[PX_FIELDS_SEEN];
    keel_str host, connection;
} request_fields;

static int request_field(keel_request *req, const request_fields *rf, size_t i, keel_header *h,
                         unsigned *token)
{
    if (i < PX_FIELDS_SEEN) {
        *h = rf->f[i];
        *token = rf->token[i];
        return h->name.ptr != NULL;
    }
    if (keel_request_header_at(req, i, h) != KEEL_OK)
        return 0;
    *token = keel_header_token(h->name.ptr, h->name.len);
    return 1;
}

static void read_fields(keel_request *req, request_fields *rf, sb *joined)
{
    size_t count = 0;
    rf->n = keel_request_header_count(req);
    rf->host = rf->connection = (keel_str){NULL, 0};
    for (size_t i = 0; i < rf->n; i++) {
        keel_header h;
        unsigned t = KEEL_HDR_UNKNOWN;
        if (keel_request_header_at(req, i, &h) != KEEL_OK)
            h = (keel_header){{NULL, 0}, {NULL, 0}};
        else
            t = keel_header_token(h.name.ptr, h.name.len);
        if (i < PX_FIELDS_SEEN) {
            rf->f[i] = h;
            rf->token[i] = t;
        }
        if (h.name.ptr == NULL)
            continue;
        if (t == KEEL_HDR_HOST && rf->host.ptr == NULL)
            rf->host = h.value;
        else if (t == KEEL_HDR_CONNECTION)
            rf->connection = join_connection(h.value, &count, rf->connection, joined);
    }
}

/* The request head for the upstream in a malloc'd px_block (its length
 * in *len), or NULL if out of memory or if the request is one HTTP/1.1
 * cannot carry in its request line (px_request_refusal answers those
 * before: this is the builder not trusting its caller with the line;
 * px_request_refusal's check of every field is not repeated). */
char *px_build_request_head(px_ex *ex, size_t *len)
{
    keel_request *req = ex->req;
    px_route *r = ex->route;
    px_config *c = r->cfg;
    sb b = {0};
    keel_str method = keel_request_method(req), origin, authority;
    sb joined = {0};
    request_fields rf;
    read_fields(req, &rf, &joined);
    named_list connection;
    named_init(&connection, rf.connection);
    const char *scheme = ex->scheme;
    /* Whatever the caller checked: nothing goes into the request line that
     * HTTP/1.1 cannot carry (a space would make "GET /admin /public"). */
    if (!is_token(method) || target_parts(keel_request_target(req), &origin, &authority) != 0 ||
        joined.failed) {
        free(joined.p);
        return NULL;
    }
    /* The authority the client asked for: an absolute-form target's (RFC
     * 9112 3.2.2: it replaces Host), else Host (HTTP/2's :authority stands
     * for it, RFC 9113 8.3.1). */
    keel_str host = authority.len > 0 ? authority : rf.host;

    /* Built behind a px_block's header, so that it goes to the upstream
     * without another copy (forward.c), in a block kept from an earlier
     * head if there is one. */
    px_block *kept = NULL;
    KEEL_FREELIST_TAKE(kept, ex->pw->free_heads, ex->pw->nfree_heads, next_free);
    if (kept != NULL) {
        b.p = (char *)kept;
        b.cap = PX_HEAD_BLOCK;
    }
    static const px_block blank;
    sb_put(&b, (const char *)&blank, offsetof(px_block, data));
    sb_ks(&b, method);
    sb_put(&b, " ", 1);
    /* Origin form (RFC 9112 3.2.1): an absolute-form target's path and
     * query, "/" when it has no path. */
    if (origin.len == 0 || origin.ptr[0] == '?')
        sb_put(&b, "/", 1);
    sb_ks(&b, origin);
    sb_str(&b, " HTTP/1.1\r\nHost: ");
    if (r->host_mode == PX_HOST_FIXED)
        sb_str(&b, r->host_value);
    else if (r->host_mode == PX_HOST_CLIENT && host.len > 0)
        sb_ks(&b, host);
    else
        sb_str(&b, ex->peer->srv->host_field);
    sb_put(&b, "\r\n", 2);

    /* The client's fields, less the hop-by-hop ones and those we write;
     * earlier proxies' X-Forwarded-For, Forwarded and Via are collected
     * to be extended below. */
    sb xff = {0}, fwd = {0}, via = {0};
    for (size_t i = 0; i < rf.n; i++) {
        keel_header h;
        unsigned t;
        if (!request_field(req, &rf, i, &h, &t))
            continue;
        /* Every field is one HTTP/1.1 can carry: px_request_refusal
         * answered 400 otherwise, before any upstream was chosen. Each
         * name is classified once; the questions below are integers. */
        if (hop_by_hop_named(h.name, t, &connection) || t == KEEL_HDR_HOST ||
            t == KEEL_HDR_CONTENT_LENGTH)
            continue;
        if (c->x_forwarded && (t == KEEL_HDR_X_FORWARDED_PROTO || t == KEEL_HDR_X_FORWARDED_HOST))
            continue; /* replaced: ours is what this hop saw */
        sb *list = c->x_forwarded && t == KEEL_HDR_X_FORWARDED_FOR ? &xff
                   : c->forwarded && t == KEEL_HDR_FORWARDED       ? &fwd
                   : c->via && t == KEEL_HDR_VIA                   ? &via
                                                                   : NULL;
        if (list != NULL) {
            if (h.value.len > 0) {
                if (list->len)
                    sb_put(list, ", ", 2);
                sb_ks(list, h.value);
            }
            continue;
        }
        /* Expect passes: 100-continue is answered end to end (forward.c). */
        sb_ks(&b, h.name);
        sb_put(&b, ": ", 2);
        sb_ks(&b, h.value);
        sb_put(&b, "\r\n", 2);
    }
    size_t iplen = strlen(ex->client_ip);
    if (c->x_forwarded) {
        sb_hop_list(&b, "X-Forwarded-For: ", &xff);
        sb_put(&b, ex->client_ip, iplen);
        sb_str(&b, "\r\nX-Forwarded-Proto: ");
        sb_str(&b, scheme);
        sb_put(&b, "\r\n", 2);
        if (host.len > 0) {
            sb_str(&b, "X-Forwarded-Host: ");
            sb_ks(&b, host);
            sb_put(&b, "\r\n", 2);
        }
    }
    if (c->forwarded) {
        sb_hop_list(&b, "Forwarded: ", &fwd);
        sb_put(&b, "for=", 4);
        sb_forwarded_value(&b, ex->client_ip, iplen, memchr(ex->client_ip, ':', iplen) != NULL);
        if (host.len > 0) {
            sb_put(&b, ";host=", 6);
            sb_forwarded_value(&b, host.ptr, host.len, 0);
        }
        sb_put(&b, ";proto=", 7);
        sb_str(&b, scheme);
        sb_put(&b, "\r\n", 2);
    }
    if (c->via) {
        sb_hop_list(&b, "Via: ", &via);
        sb_str(&b, keel_request_version(req) == 10 ? "1.0 keel\r\n" : "1.1 keel\r\n");
    }
    b.failed |= xff.failed | fwd.failed | via.failed;
    free(xff.p);
    free(fwd.p);
    free(via.p);
    free(joined.p);
    /* Framing is ours (RFC 9112 6.1: a proxy re-frames what it
     * forwards). */
    if (ex->body_kind == PX_BODY_LENGTH) {
        keel_str cl = keel_request_header_token(req, KEEL_HDR_CONTENT_LENGTH);
        for (size_t i = 0; i < cl.len; i++)
            b.failed |= cl.ptr[i] < '0' || cl.ptr[i] > '9';
        sb_str(&b, "Content-Length: ");
        sb_ks(&b, cl);
        sb_put(&b, "\r\n", 2);
    } else if (ex->body_kind == PX_BODY_CHUNKED) {
        sb_str(&b, "Transfer-Encoding: chunked\r\n");
    }
    if (ex->upgrade) {
        /* Only the protocols the route passes (px_upgrade_requested made
         * sure there is one). */
        upgrade_writer w = {&b, r, 0};
        sb_str(&b, "Connection: upgrade\r\nUpgrade: ");
        each_element(keel_request_header(req, "Upgrade"), write_allowed, &w);
        sb_put(&b, "\r\n", 2);
        b.failed |= w.n == 0;
    }
    sb_put(&b, "\r\n", 2);
    if (b.failed) {
        free(b.p);
        return NULL;
    }
    *len = b.len - offsetof(px_block, data);
    ((px_block *)(void *)b.p)->cap = b.cap - offsetof(px_block, data);
    return b.p;
}

/* ---- the response's fields ---------------------------------------------------------- */

keel_str px_field_name(const px_ex *ex, size_t i)
{
    return (keel_str){ex->hbuf + ex->fields[i].name, ex->fields[i].name_len};
}

keel_str px_field_value(const px_ex *ex, size_t i)
{
    return (keel_str){ex->hbuf + ex->fields[i].value, ex->fields[i].value_len};
}

/* The upstream's fields on their way to the response, a batch at a time
 * (keel_response_fields_addn): every name is a token and every value a
 * field-value, as the head's readers took them (fasthead.c, fcgi.c,
 * llhttp with response.c's not_a_token), and classified there, so the
 * core copies them without checking or classifying them again. */
typedef struct relayed {
    keel_response *res;
    size_t n;
    keel_field f[16];
} relayed;

static void relay_flush(relayed *r)
{
    if (r->n > 0)
        keel_response_fields_addn(r->res, r->f, r->n, 0);
    r->n = 0;
}

static void relay(relayed *r, keel_str name, keel_str value, unsigned token)
{
    if (r->n == sizeof r->f / sizeof r->f[0])
        relay_flush(r);
    r->f[r->n++] = (keel_field){name, value, NULL, 0, token + 1};
}

/* A Location naming the upstream ("http://127.0.0.1:9000/x") is rewritten
 * to what the client asked for ("http://example.com/x"), as nginx's
 * proxy_redirect default does with the proxy_pass address. */
static int rewrite_location(px_ex *ex, keel_str v, sb *out)
{
    keel_str host = request_authority(ex->req);
    if (host.len == 0)
        return 0;
    size_t skip = 0;
    if (v.len > 7 && memcmp(v.ptr, "http://", 7) == 0)
        skip = 7;
    else if (v.len > 8 && memcmp(v.ptr, "https://", 8) == 0)
        skip = 8;
    else
        return 0;
    const char *names[2] = {ex->peer->srv->host_field,
                            ex->route->host_mode == PX_HOST_FIXED ? ex->route->host_value : NULL};
    for (int k = 0; k < 2; k++) {
        if (names[k] == NULL)
            continue;
        size_t n = strlen(names[k]);
        if (v.len >= skip + n && strncmp(v.ptr + skip, names[k], n) == 0 &&
            (v.len == skip + n || v.ptr[skip + n] == '/' || v.ptr[skip + n] == '?')) {
            sb_str(out, ex->scheme);
            sb_str(out, "://");
            sb_ks(out, host);
            sb_put(out, v.ptr + skip + n, v.len - skip - n);
            return !out->failed;
        }
    }
    return 0;
}

void px_response_headers(px_ex *ex)
{
    keel_response *res = ex->res;
    px_config *c = ex->route->cfg;
    keel_str connection = {NULL, 0};
    size_t nconnection = 0;
    sb joined = {0};
    /* Each name was classified where it was parsed (response.c, fcgi.c):
     * the questions below are integers. */
    for (size_t i = 0; i < ex->nfields; i++)
        if (ex->fields[i].token == KEEL_HDR_CONNECTION)
            connection = join_connection(px_field_value(ex, i), &nconnection, connection, &joined);
    if (joined.failed) {
        /* Out of memory: no field another Connection names may pass, so
         * none but the ones keel writes itself. */
        free(joined.p);
        return;
    }
    named_list named;
    named_init(&named, connection);
    sb via = {0};
    relayed batch; /* its entries are written before they are read */
    batch.res = res;
    batch.n = 0;
    for (size_t i = 0; i < ex->nfields; i++) {
        keel_str name = px_field_name(ex, i), value = px_field_value(ex, i);
        unsigned t = ex->fields[i].token;
        if (ex->upgrade && ex->status == 101 && t == KEEL_HDR_UPGRADE) {
            relay(&batch, name, value, t); /* the 101 names the protocol */
            continue;
        }
        if (hop_by_hop_named(name, t, &named))
            continue;
        if ((!c->keep_server && t == KEEL_HDR_SERVER) || (!c->keep_date && t == KEEL_HDR_DATE))
            continue;
        if (c->via && t == KEEL_HDR_VIA) {
            if (via.len)
                sb_put(&via, ", ", 2);
            sb_ks(&via, value);
            continue;
        }
        if (ex->route->rewrite_location && t == KEEL_HDR_LOCATION) {
            sb loc = {0};
            if (rewrite_location(ex, value, &loc)) {
                /* in its place, checked: the client's Host is in it */
                relay_flush(&batch);
                keel_response_header_add(res, name.ptr, loc.p);
                free(loc.p);
                continue;
            }
            free(loc.p);
        }
        relay(&batch, name, value, t);
    }
    relay_flush(&batch);
    /* A FastCGI response came from no HTTP hop: nothing to say in Via
     * (nginx's fastcgi_pass adds none either). */
    if (c->via && !ex->route->group->fastcgi) {
        if (via.len == 0 && via.failed == 0 && c->via_field != NULL) {
            keel_response_field_add(res, c->via_field, 0);
        } else {
            sb_str(&via, via.len ? ", 1.1 keel" : "1.1 keel");
            if (!via.failed)
                keel_response_header_add(res, "Via", via.p);
        }
    }
    free(via.p);
    free(joined.p);
}
