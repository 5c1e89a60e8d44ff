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
 *   date=keep), so that keel's own are sent, as nginx does.
 */
#include "px.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

static int name_eq(keel_str a, const char *b)
{
    size_t n = strlen(b);
    if (a.len != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (lower((unsigned char)a.ptr[i]) != lower((unsigned char)b[i]))
            return 0;
    return 1;
}

/* Is `token` one of the comma-separated elements of list (any case)? */
int px_token_in_list(keel_str list, const char *token)
{
    size_t n = strlen(token);
    size_t i = 0;
    while (list.ptr != NULL && i < list.len) {
        while (i < list.len && (list.ptr[i] == ' ' || list.ptr[i] == '\t' || list.ptr[i] == ','))
            i++;
        size_t start = i;
        while (i < list.len && list.ptr[i] != ',')
            i++;
        size_t end = i;
        while (end > start && (list.ptr[end - 1] == ' ' || list.ptr[end - 1] == '\t'))
            end--;
        if (end - start == n && name_eq((keel_str){list.ptr + start, n}, token))
            return 1;
    }
    return 0;
}

/* The same name, any case; b is lower case, n its length. */
static int is_name(keel_str a, const char *b, size_t n)
{
    if (a.len != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (lower((unsigned char)a.ptr[i]) != b[i])
            return 0;
    return 1;
}

/* Does list name this field (a Connection option equal to it)? */
static int listed(keel_str list, keel_str name)
{
    size_t i = 0;
    while (i < list.len) {
        while (i < list.len && (list.ptr[i] == ' ' || list.ptr[i] == '\t' || list.ptr[i] == ','))
            i++;
        size_t start = i;
        while (i < list.len && list.ptr[i] != ',')
            i++;
        size_t end = i;
        while (end > start && (list.ptr[end - 1] == ' ' || list.ptr[end - 1] == '\t'))
            end--;
        if (end - start == name.len) {
            size_t k = 0;
            while (k < name.len &&
                   lower((unsigned char)list.ptr[start + k]) == lower((unsigned char)name.ptr[k]))
                k++;
            if (k == name.len)
                return 1;
        }
    }
    return 0;
}

/* RFC 9110 7.6.1. `connection` is the message's Connection value (may be
 * absent): the fields it names are hop-by-hop too. Trailer is dropped with
 * them: the framing is re-done on each side, and a response's trailers are
 * announced again by http1's own framing. Switched on the length first:
 * this runs for every field of every message. */
int px_hop_by_hop(keel_str name, keel_str connection)
{
    switch (name.len) {
    case 2:
        if (is_name(name, "te", 2))
            return 1;
        break;
    case 7:
        if (is_name(name, "upgrade", 7) || is_name(name, "trailer", 7))
            return 1;
        break;
    case 10:
        if (is_name(name, "connection", 10) || is_name(name, "keep-alive", 10))
            return 1;
        break;
    case 16:
        if (is_name(name, "proxy-connection", 16))
            return 1;
        break;
    case 17:
        if (is_name(name, "transfer-encoding", 17))
            return 1;
        break;
    default:
        break;
    }
    return connection.ptr != NULL && listed(connection, name);
}

/* ---- a small string builder ------------------------------------------------------ */

typedef struct sb {
    char *p;
    size_t len, cap;
    int failed;
} sb;

static void sb_put(sb *b, const char *s, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *grown = realloc(b->p, cap);
        if (grown == NULL) {
            b->failed = 1;
            return;
        }
        b->p = grown;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
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

/* RFC 7239 4: a node or host that is not a token goes in a quoted-string
 * (an IPv6 address as "[v6]", a host with a port). */
static void sb_forwarded_value(sb *b, const char *v, size_t n, int bracket)
{
    int token = !bracket;
    for (size_t i = 0; token && i < n; i++) {
        unsigned char c = (unsigned char)v[i];
        token = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                strchr("!#$%&'*+-.^_`|~", c) != NULL;
    }
    if (token) {
        sb_put(b, v, n);
        return;
    }
    sb_put(b, "\"", 1);
    if (bracket)
        sb_put(b, "[", 1);
    for (size_t i = 0; i < n; i++) {
        if (v[i] == '"' || v[i] == '\\')
            sb_put(b, "\\", 1);
        sb_put(b, v + i, 1);
    }
    if (bracket)
        sb_put(b, "]", 1);
    sb_put(b, "\"", 1);
}

/* The request head for the upstream in a malloc'd px_block (its length
 * in *len), or NULL if out of memory. */
char *px_build_request_head(px_ex *ex, size_t *len)
{
    keel_request *req = ex->req;
    px_route *r = ex->route;
    px_config *c = r->cfg;
    sb b = {0};
    keel_str method = keel_request_method(req), target = keel_request_target(req);
    keel_str host = keel_request_header(req, "Host");
    keel_str connection = keel_request_header(req, "Connection");
    const char *scheme = ex->scheme;

    /* Built behind a px_block's header, so that it goes to the upstream
     * without another copy (forward.c). */
    static const px_block blank;
    sb_put(&b, (const char *)&blank, offsetof(px_block, data));
    sb_ks(&b, method);
    sb_str(&b, " ");
    sb_ks(&b, target);
    sb_str(&b, " HTTP/1.1\r\nHost: ");
    if (r->host_mode == PX_HOST_FIXED)
        sb_str(&b, r->host_value);
    else if (r->host_mode == PX_HOST_CLIENT && host.ptr != NULL)
        sb_ks(&b, host);
    else
        sb_str(&b, ex->peer->srv->authority);
    sb_str(&b, "\r\n");

    /* The client's fields, less the hop-by-hop ones and those we write;
     * earlier proxies' X-Forwarded-For, Forwarded and Via are collected
     * to be extended below. */
    size_t n = keel_request_header_count(req);
    sb xff = {0}, fwd = {0}, via = {0};
    for (size_t i = 0; i < n; i++) {
        keel_header h;
        if (keel_request_header_at(req, i, &h) != KEEL_OK)
            continue;
        if (px_hop_by_hop(h.name, connection) || name_eq(h.name, "host") ||
            name_eq(h.name, "content-length"))
            continue;
        if (c->x_forwarded &&
            (name_eq(h.name, "x-forwarded-proto") || name_eq(h.name, "x-forwarded-host")))
            continue; /* replaced: ours is what this hop saw */
        sb *list = c->x_forwarded && name_eq(h.name, "x-forwarded-for") ? &xff
                   : c->forwarded && name_eq(h.name, "forwarded")       ? &fwd
                   : c->via && name_eq(h.name, "via")                   ? &via
                                                                        : NULL;
        if (list != NULL) {
            if (h.value.len > 0) {
                sb_str(list, list->len ? ", " : "");
                sb_ks(list, h.value);
            }
            continue;
        }
        /* Expect passes: 100-continue is answered end to end (forward.c). */
        sb_ks(&b, h.name);
        sb_str(&b, ": ");
        sb_ks(&b, h.value);
        sb_str(&b, "\r\n");
    }
    if (c->x_forwarded) {
        sb_str(&b, "X-Forwarded-For: ");
        if (xff.len) {
            sb_put(&b, xff.p, xff.len);
            sb_str(&b, ", ");
        }
        sb_str(&b, ex->client_ip);
        sb_str(&b, "\r\nX-Forwarded-Proto: ");
        sb_str(&b, scheme);
        sb_str(&b, "\r\n");
        if (host.ptr != NULL) {
            sb_str(&b, "X-Forwarded-Host: ");
            sb_ks(&b, host);
            sb_str(&b, "\r\n");
        }
    }
    if (c->forwarded) {
        sb_str(&b, "Forwarded: ");
        if (fwd.len) {
            sb_put(&b, fwd.p, fwd.len);
            sb_str(&b, ", ");
        }
        sb_str(&b, "for=");
        sb_forwarded_value(&b, ex->client_ip, strlen(ex->client_ip),
                           strchr(ex->client_ip, ':') != NULL);
        if (host.ptr != NULL) {
            sb_str(&b, ";host=");
            sb_forwarded_value(&b, host.ptr, host.len, 0);
        }
        sb_str(&b, ";proto=");
        sb_str(&b, scheme);
        sb_str(&b, "\r\n");
    }
    if (c->via) {
        sb_str(&b, "Via: ");
        if (via.len) {
            sb_put(&b, via.p, via.len);
            sb_str(&b, ", ");
        }
        sb_str(&b, keel_request_version(req) == 10 ? "1.0 keel\r\n" : "1.1 keel\r\n");
    }
    b.failed |= xff.failed | fwd.failed | via.failed;
    free(xff.p);
    free(fwd.p);
    free(via.p);
    /* Framing is ours (RFC 9112 6.1: a proxy re-frames what it
     * forwards). */
    if (ex->body_kind == PX_BODY_LENGTH) {
        keel_str cl = keel_request_header(req, "Content-Length");
        sb_str(&b, "Content-Length: ");
        sb_ks(&b, cl);
        sb_str(&b, "\r\n");
    } else if (ex->body_kind == PX_BODY_CHUNKED) {
        sb_str(&b, "Transfer-Encoding: chunked\r\n");
    }
    if (ex->upgrade) {
        sb_str(&b, "Connection: upgrade\r\nUpgrade: ");
        sb_ks(&b, keel_request_header(req, "Upgrade"));
        sb_str(&b, "\r\n");
    }
    sb_str(&b, "\r\n");
    if (b.failed) {
        free(b.p);
        return NULL;
    }
    *len = b.len - offsetof(px_block, data);
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

static int add_field(keel_response *res, keel_str name, const char *value, size_t vlen)
{
    char nbuf[256], vbuf[8192];
    if (name.len >= sizeof nbuf || vlen >= sizeof vbuf) {
        char *big = malloc(vlen + 1);
        if (big == NULL || name.len >= sizeof nbuf) {
            free(big);
            return KEEL_ERR_INVAL;
        }
        memcpy(nbuf, name.ptr, name.len);
        nbuf[name.len] = '\0';
        memcpy(big, value, vlen);
        big[vlen] = '\0';
        int rc = keel_response_header_add(res, nbuf, big);
        free(big);
        return rc;
    }
    memcpy(nbuf, name.ptr, name.len);
    nbuf[name.len] = '\0';
    memcpy(vbuf, value, vlen);
    vbuf[vlen] = '\0';
    return keel_response_header_add(res, nbuf, vbuf);
}

/* A Location naming the upstream ("http://127.0.0.1:9000/x") is rewritten
 * to what the client asked for ("http://example.com/x"), as nginx's
 * proxy_redirect default does with the proxy_pass address. */
static int rewrite_location(px_ex *ex, keel_str v, sb *out)
{
    keel_str host = keel_request_header(ex->req, "Host");
    if (host.ptr == NULL)
        return 0;
    size_t skip = 0;
    if (v.len > 7 && memcmp(v.ptr, "http://", 7) == 0)
        skip = 7;
    else if (v.len > 8 && memcmp(v.ptr, "https://", 8) == 0)
        skip = 8;
    else
        return 0;
    const char *names[2] = {ex->peer->srv->authority,
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
    for (size_t i = 0; i < ex->nfields; i++)
        if (name_eq(px_field_name(ex, i), "connection")) {
            connection = px_field_value(ex, i);
            break;
        }
    sb via = {0};
    for (size_t i = 0; i < ex->nfields; i++) {
        keel_str name = px_field_name(ex, i), value = px_field_value(ex, i);
        if (ex->upgrade && ex->status == 101 && name_eq(name, "upgrade")) {
            add_field(res, name, value.ptr, value.len); /* the 101 names the protocol */
            continue;
        }
        if (px_hop_by_hop(name, connection))
            continue;
        if ((!c->keep_server && name_eq(name, "server")) ||
            (!c->keep_date && name_eq(name, "date")))
            continue;
        if (c->via && name_eq(name, "via")) {
            sb_str(&via, via.len ? ", " : "");
            sb_ks(&via, value);
            continue;
        }
        if (ex->route->rewrite_location && name_eq(name, "location")) {
            sb loc = {0};
            if (rewrite_location(ex, value, &loc)) {
                add_field(res, name, loc.p, loc.len);
                free(loc.p);
                continue;
            }
            free(loc.p);
        }
        add_field(res, name, value.ptr, value.len);
    }
    if (c->via) {
        sb_str(&via, via.len ? ", 1.1 keel" : "1.1 keel");
        if (!via.failed)
            keel_response_header_add(res, "Via", via.p);
    }
    free(via.p);
}
