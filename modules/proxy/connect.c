/* connect.c — the forward proxy: CONNECT host:port (RFC 9110 9.3.6) on a
 * listener of protocol "proxy", off unless `connect = on`:
 *
 *     [keel]
 *     listen = 127.0.0.1:3128 proxy
 *     [proxy]
 *     connect = on
 *     connect_clients = 127.0.0.0/8 ::1/128     ; who may tunnel
 *     connect_ports = 443                       ; where to
 *     connect_hosts = *.example.com api.example.net
 *     connect_private = off                     ; loopback, RFC 1918, link-local...
 *
 * Why a protocol of its own: http1 answers CONNECT with 501 before any
 * handler sees it (CORE-NEEDS.md 1). This protocol reads the first request
 * head with llhttp; anything but CONNECT goes to http1 untouched (the
 * bytes are handed over unconsumed), so the same port serves the reverse
 * proxy's routes too.
 *
 * Refusals are 403 (a client or destination not allowed), failures 502
 * (could not connect) or 504 (timed out). A name is checked against the
 * private ranges after it resolved, on the address actually connected to,
 * so that a public name pointing at 127.0.0.1 is refused as well (the
 * usual SSRF hole of forward proxies).
 */
#include "px.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- addresses --------------------------------------------------------------- */

static int parse_v4(const char *s, uint8_t out[4])
{
    unsigned parts[4];
    int n = 0;
    const char *p = s;
    while (n < 4) {
        if (*p < '0' || *p > '9')
            return -1;
        unsigned v = 0;
        int digits = 0;
        while (*p >= '0' && *p <= '9' && digits < 4) {
            v = v * 10 + (unsigned)(*p++ - '0');
            digits++;
        }
        if (v > 255)
            return -1;
        parts[n++] = v;
        if (n < 4 && *p++ != '.')
            return -1;
    }
    if (*p != '\0')
        return -1;
    for (int i = 0; i < 4; i++)
        out[i] = (uint8_t)parts[i];
    return 0;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static int parse_v6(const char *s, uint8_t out[16])
{
    uint16_t words[8] = {0};
    int n = 0, gap = -1;
    const char *p = s;
    if (p[0] == ':' && p[1] == ':') {
        gap = 0;
        p += 2;
    }
    while (*p != '\0' && n < 8) {
        if (strchr(p, '.') != NULL && strchr(p, ':') == NULL) {
            uint8_t v4[4];
            if (n > 6 || parse_v4(p, v4) != 0)
                return -1;
            words[n++] = (uint16_t)(v4[0] << 8 | v4[1]);
            words[n++] = (uint16_t)(v4[2] << 8 | v4[3]);
            p += strlen(p);
            break;
        }
        unsigned v = 0;
        int digits = 0, h;
        while ((h = hexval(*p)) >= 0 && digits < 4) {
            v = v * 16 + (unsigned)h;
            p++;
            digits++;
        }
        if (digits == 0)
            return -1;
        words[n++] = (uint16_t)v;
        if (*p == ':') {
            p++;
            if (*p == ':') {
                if (gap >= 0)
                    return -1;
                gap = n;
                p++;
            } else if (*p == '\0') {
                return -1;
            }
        } else if (*p != '\0') {
            return -1;
        }
    }
    if (*p != '\0')
        return -1;
    if (gap >= 0) {
        int move = n - gap;
        for (int i = 0; i < move; i++)
            words[7 - i] = words[n - 1 - i];
        for (int i = gap; i < 8 - move; i++)
            words[i] = 0;
    } else if (n != 8) {
        return -1;
    }
    for (int i = 0; i < 8; i++) {
        out[2 * i] = (uint8_t)(words[i] >> 8);
        out[2 * i + 1] = (uint8_t)words[i];
    }
    return 0;
}

/* An IPv4 or IPv6 literal, IPv4 as ::ffff:a.b.c.d. 0 or -1. */
int px_ip_parse(const char *s, uint8_t out[16])
{
    uint8_t v4[4];
    if (parse_v4(s, v4) == 0) {
        memset(out, 0, 10);
        out[10] = out[11] = 0xff;
        memcpy(out + 12, v4, 4);
        return 0;
    }
    return parse_v6(s, out);
}

static int cidr_match(const px_cidr *c, const uint8_t a[16])
{
    unsigned bits = c->bits;
    for (unsigned i = 0; i < 16 && bits > 0; i++) {
        unsigned take = bits >= 8 ? 8 : bits;
        uint8_t mask = (uint8_t)(0xff << (8 - take));
        if ((a[i] & mask) != (c->addr[i] & mask))
            return 0;
        bits -= take;
    }
    return 1;
}

static int parse_cidr(const char *s, px_cidr *out)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%s", s);
    char *slash = strchr(buf, '/');
    if (slash != NULL)
        *slash = '\0';
    if (px_ip_parse(buf, out->addr) != 0)
        return -1;
    int v4 = strchr(buf, ':') == NULL;
    unsigned max = v4 ? 32 : 128;
    unsigned bits = max;
    if (slash != NULL) {
        char *end;
        unsigned long b = strtoul(slash + 1, &end, 10);
        if (*end != '\0' || b > max)
            return -1;
        bits = (unsigned)b;
    }
    out->bits = v4 ? bits + 96 : bits;
    return 0;
}

/* Loopback, private, shared, link-local, unspecified, unique-local: what a
 * forward proxy must not reach for its clients unless told to (RFC 6890's
 * special-purpose registries). */
static int is_private(const uint8_t a[16])
{
    static const char *const ranges[] = {
        "0.0.0.0/8",      "10.0.0.0/8",    "100.64.0.0/10",  "127.0.0.0/8",
        "169.254.0.0/16", "172.16.0.0/12", "192.168.0.0/16", "::/128",
        "::1/128",        "fc00::/7",      "fe80::/10",
    };
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
        px_cidr c;
        if (parse_cidr(ranges[i], &c) == 0 && cidr_match(&c, a))
            return 1;
    }
    return 0;
}

/* ---- config -------------------------------------------------------------------- */

static size_t words_of(const char *v, char ***out)
{
    size_t n = 0, cap = 0;
    char **w = NULL;
    const char *p = v;
    while (*p != '\0') {
        while (*p == ' ' || *p == ',' || *p == '\t')
            p++;
        if (*p == '\0')
            break;
        const char *s = p;
        while (*p != '\0' && *p != ' ' && *p != ',' && *p != '\t')
            p++;
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            char **g = realloc(w, cap * sizeof *g);
            if (g == NULL)
                break;
            w = g;
        }
        w[n] = malloc((size_t)(p - s) + 1);
        if (w[n] == NULL)
            break;
        memcpy(w[n], s, (size_t)(p - s));
        w[n][p - s] = '\0';
        n++;
    }
    *out = w;
    return n;
}

static void words_free(char **w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(w[i]);
    free(w);
}

int px_connect_config(px_config *c, keel_module *m)
{
    const char *clients, *ports, *hosts;
    int rc;
    if ((rc = keel_config_bool(m, "connect", 0, &c->connect)) < 0 ||
        (rc = keel_config_string(m, "connect_clients", "127.0.0.0/8 ::1/128", &clients)) < 0 ||
        (rc = keel_config_string(m, "connect_ports", "443", &ports)) < 0 ||
        (rc = keel_config_string(m, "connect_hosts", "*", &hosts)) < 0 ||
        (rc = keel_config_bool(m, "connect_private", 0, &c->connect_private)) < 0)
        return rc;
    char **w;
    size_t n = words_of(clients, &w);
    c->connect_clients = calloc(n ? n : 1, sizeof *c->connect_clients);
    for (size_t i = 0; c->connect_clients && i < n; i++) {
        if (parse_cidr(w[i], &c->connect_clients[i]) != 0) {
            rc = keel_config_error(m, "connect_clients", "bad address or CIDR '%s'", w[i]);
            words_free(w, n);
            return rc;
        }
        c->nconnect_clients++;
    }
    words_free(w, n);
    n = words_of(ports, &w);
    c->connect_ports = calloc(n ? n : 1, sizeof *c->connect_ports);
    for (size_t i = 0; c->connect_ports && i < n; i++) {
        char *end;
        unsigned long p = strtoul(w[i], &end, 10);
        if (strcmp(w[i], "*") == 0) {
            p = 0; /* any port */
        } else if (*end != '\0' || p == 0 || p > 65535) {
            rc = keel_config_error(m, "connect_ports", "bad port '%s'", w[i]);
            words_free(w, n);
            return rc;
        }
        c->connect_ports[c->nconnect_ports++] = (unsigned)p;
    }
    words_free(w, n);
    c->nconnect_hosts = words_of(hosts, &c->connect_hosts);
    if (c->connect_clients == NULL || c->connect_ports == NULL)
        return KEEL_ERR_NOMEM;
    return KEEL_OK;
}

static int host_allowed(const px_config *c, const char *host)
{
    size_t hl = strlen(host);
    for (size_t i = 0; i < c->nconnect_hosts; i++) {
        const char *p = c->connect_hosts[i];
        if (strcmp(p, "*") == 0)
            return 1;
        size_t pl = strlen(p);
        if (p[0] == '*' && p[1] == '.') {
            /* "*.example.com": any name below example.com, not itself */
            if (hl > pl - 1) {
                const char *tail = host + hl - (pl - 1);
                size_t k = 0;
                while (k < pl - 1 && (tail[k] | 32) == (p[1 + k] | 32))
                    k++;
                if (k == pl - 1)
                    return 1;
            }
        } else if (hl == pl) {
            size_t k = 0;
            while (k < pl && (host[k] | 32) == (p[k] | 32))
                k++;
            if (k == pl)
                return 1;
        }
    }
    return 0;
}

static int port_allowed(const px_config *c, unsigned port)
{
    for (size_t i = 0; i < c->nconnect_ports; i++)
        if (c->connect_ports[i] == 0 || c->connect_ports[i] == port)
            return 1;
    return 0;
}

/* ---- the "proxy" protocol -------------------------------------------------------- */

typedef struct cc {
    keel_conn *conn;
    px_config *cfg;
    llhttp_t parser;
    char target[300];
    size_t target_len;
    int too_long;
    px_tunnel *t;
    keel_connect *attempt;
    char host[256];
    unsigned port;
    char client[64];
} cc;

static int cc_on_url(llhttp_t *p, const char *at, size_t len)
{
    cc *c = p->data;
    if (c->target_len + len >= sizeof c->target) {
        c->too_long = 1;
        return 0;
    }
    memcpy(c->target + c->target_len, at, len);
    c->target_len += len;
    c->target[c->target_len] = '\0';
    return 0;
}

static int cc_on_headers_complete(llhttp_t *p)
{
    return llhttp_get_method(p) == HTTP_CONNECT ? 0 : HPE_PAUSED;
}

static const llhttp_settings_t cc_settings = {
    .on_url = cc_on_url,
    .on_headers_complete = cc_on_headers_complete,
};

static void reply_and_close(keel_conn *conn, int status)
{
    char line[160];
    int n = snprintf(line, sizeof line,
                     "HTTP/1.1 %d %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", status,
                     keel_http_reason(status));
    keel_conn_write_copy(conn, line, (size_t)n);
    keel_conn_close(conn);
}

static int cc_open(keel_conn *conn, void *arg)
{
    (void)arg;
    cc *c = calloc(1, sizeof *c);
    if (c == NULL)
        return KEEL_ERR_NOMEM;
    c->conn = conn;
    c->cfg = keel_module_data(keel_conn_module(conn));
    keel_conn_set_data(conn, c);
    keel_conn_set_timeout(conn, 10000); /* the head, as http1's header_timeout */
    char peer[80];
    if (keel_conn_peer_name(conn, peer, sizeof peer) == KEEL_OK) {
        char *colon = strrchr(peer, ':');
        if (colon != NULL)
            *colon = '\0';
        const char *s = peer[0] == '[' ? peer + 1 : peer;
        size_t l = strlen(s);
        if (l >= sizeof c->client)
            l = sizeof c->client - 1;
        memcpy(c->client, s, l);
        c->client[l] = '\0';
        if (l > 0 && c->client[l - 1] == ']')
            c->client[l - 1] = '\0';
    }
    return KEEL_OK;
}

static void cc_free(keel_conn *conn, cc *c)
{
    keel_conn_set_data(conn, NULL);
    if (c->t != NULL)
        px_tunnel_release(c->t);
    free(c);
}

static int client_allowed(const cc *c)
{
    uint8_t a[16];
    if (px_ip_parse(c->client, a) != 0)
        return 0;
    for (size_t i = 0; i < c->cfg->nconnect_clients; i++)
        if (cidr_match(&c->cfg->connect_clients[i], a))
            return 1;
    return 0;
}

/* authority-form (RFC 9112 3.2.3): host:port, IPv6 in brackets. */
static int parse_target(cc *c)
{
    const char *t = c->target;
    const char *colon;
    size_t hl;
    if (t[0] == '[') {
        const char *close = strchr(t, ']');
        if (close == NULL || close[1] != ':')
            return -1;
        t++;
        hl = (size_t)(close - t);
        colon = close + 1;
    } else {
        colon = strrchr(t, ':');
        if (colon == NULL)
            return -1;
        hl = (size_t)(colon - t);
    }
    char *end;
    unsigned long port = strtoul(colon + 1, &end, 10);
    if (hl == 0 || hl >= sizeof c->host || *end != '\0' || port == 0 || port > 65535)
        return -1;
    memcpy(c->host, t, hl);
    c->host[hl] = '\0';
    c->port = (unsigned)port;
    return 0;
}

static int established(px_tunnel *t, keel_conn *up)
{
    keel_conn *client = t->pending_client;
    cc *c = keel_conn_data(client);
    c->attempt = NULL;
    char peer[80];
    uint8_t a[16];
    int ok = keel_conn_peer_name(up, peer, sizeof peer) == KEEL_OK;
    if (ok) {
        char *colon = strrchr(peer, ':');
        if (colon != NULL)
            *colon = '\0';
        char *s = peer[0] == '[' ? peer + 1 : peer;
        size_t l = strlen(s);
        if (l > 0 && s[l - 1] == ']')
            s[l - 1] = '\0';
        ok = px_ip_parse(s, a) == 0;
    }
    if (!ok || (!t->cfg->connect_private && is_private(a))) {
        keel_log(t->cfg->module, KEEL_LOG_INFO, "CONNECT %s:%u from %s: 403 (private address)",
                 c->host, c->port, c->client);
        reply_and_close(client, 403);
        return KEEL_ERR_REFUSED;
    }
    static const char ok200[] = "HTTP/1.1 200 Connection Established\r\n\r\n";
    keel_conn_write_copy(client, ok200, sizeof ok200 - 1);
    keel_log(t->cfg->module, KEEL_LOG_INFO, "CONNECT %s:%u from %s: 200", c->host, c->port,
             c->client);
    keel_metric_add(t->worker, t->cfg->m_tunnels, 1);
    t->pending_client = NULL;
    t->on_upstream_open = NULL;
    c->t = NULL; /* the creator's reference goes with cc below */
    cc_free(client, c);
    px_tunnel_expect(t, PX_SIDE_CLIENT);
    int rc = keel_conn_set_protocol(client, px_tunnel_protocol.name, t);
    px_tunnel_expect(t, PX_SIDE_UPSTREAM);
    px_tunnel_release(t); /* the client side holds it now (or nobody: then we fail) */
    return rc == KEEL_OK ? KEEL_OK : KEEL_ERR_CLOSED;
}

static void connect_failed(keel_worker *w, int status, void *arg)
{
    px_tunnel *t = arg;
    (void)w;
    keel_conn *client = t->pending_client;
    cc *c = keel_conn_data(client);
    c->attempt = NULL;
    int code = status == KEEL_ERR_TIMEOUT ? 504 : 502;
    keel_log(t->cfg->module, KEEL_LOG_INFO, "CONNECT %s:%u from %s: %d (%s)", c->host, c->port,
             c->client, code, keel_strerror(status));
    reply_and_close(client, code);
}

static void start_connect(cc *c)
{
    px_config *cfg = c->cfg;
    int refuse = 0;
    if (!cfg->connect)
        refuse = 501; /* as http1 answers it: this server does not tunnel */
    else if (!client_allowed(c) || parse_target(c) != 0 || !port_allowed(cfg, c->port) ||
             !host_allowed(cfg, c->host))
        refuse = c->host[0] || client_allowed(c) ? 403 : 403;
    uint8_t a[16];
    if (!refuse && !cfg->connect_private && px_ip_parse(c->host, a) == 0 && is_private(a))
        refuse = 403;
    if (refuse) {
        keel_log(cfg->module, KEEL_LOG_INFO, "CONNECT %s from %s: %d", c->target, c->client,
                 refuse);
        reply_and_close(c->conn, refuse);
        return;
    }
    px_tunnel *t = px_tunnel_new(cfg, keel_conn_worker(c->conn));
    if (t == NULL) {
        reply_and_close(c->conn, 500);
        return;
    }
    t->pending_client = c->conn;
    t->on_upstream_open = established;
    px_tunnel_expect(t, PX_SIDE_UPSTREAM);
    c->t = t;
    keel_connect_options o = {
        .size = sizeof o,
        .host = c->host,
        .port = c->port,
        .protocol = px_tunnel_protocol.name,
        .arg = t,
        .timeout_ms = cfg->connect_timeout_ms,
        .on_error = connect_failed,
    };
    keel_conn_pause(c->conn); /* what the client sends next is the tunnel's */
    keel_conn_set_timeout(c->conn, 0);
    if (keel_conn_connect(keel_conn_worker(c->conn), &o, &c->attempt) != KEEL_OK) {
        c->attempt = NULL;
        reply_and_close(c->conn, 502);
    }
}

static int cc_data(keel_conn *conn, const char *data, size_t len, size_t *consumed)
{
    cc *c = keel_conn_data(conn);
    *consumed = 0;
    if (c->t != NULL)
        return KEEL_OK; /* connecting: the bytes wait for the tunnel */
    /* The head is parsed again from its start on each read: it is small,
     * and nothing is consumed until we know whose it is. */
    llhttp_init(&c->parser, HTTP_REQUEST, &cc_settings);
    c->parser.data = c;
    c->target_len = 0;
    c->too_long = 0;
    llhttp_errno_t err = llhttp_execute(&c->parser, data, len);
    if (err == HPE_OK) {
        if (len > 16384)
            reply_and_close(conn, 431);
        return KEEL_OK; /* more to come */
    }
    if (err == HPE_PAUSED) {
        /* Not CONNECT: http1's, all of it. */
        cc_free(conn, c);
        int rc = keel_conn_set_protocol(conn, "http1", NULL);
        if (rc != KEEL_OK)
            keel_conn_close(conn);
        return KEEL_OK;
    }
    if (err == HPE_PAUSED_UPGRADE && llhttp_get_method(&c->parser) == HTTP_CONNECT &&
        !c->too_long) {
        const char *pos = llhttp_get_error_pos(&c->parser);
        *consumed = pos != NULL ? (size_t)(pos - data) : len;
        start_connect(c);
        return KEEL_OK;
    }
    *consumed = len;
    reply_and_close(conn, 400);
    return KEEL_OK;
}

static void cc_timeout(keel_conn *conn)
{
    cc *c = keel_conn_data(conn);
    if (c != NULL && c->t == NULL)
        reply_and_close(conn, 408);
}

static void cc_close(keel_conn *conn, int status)
{
    cc *c = keel_conn_data(conn);
    (void)status;
    if (c == NULL)
        return;
    if (c->attempt != NULL) {
        keel_connect_cancel(c->attempt);
        c->attempt = NULL;
    }
    cc_free(conn, c);
}

const keel_protocol px_connect_protocol = {
    .size = sizeof(keel_protocol),
    .name = "proxy",
    .on_open = cc_open,
    .on_data = cc_data,
    .on_timeout = cc_timeout,
    .on_close = cc_close,
};
