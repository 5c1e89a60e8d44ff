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
 * (could not resolve or connect) or 504 (timed out). A destination is
 * resolved first, once, on the thread pool, and every address it resolves
 * to is checked against the private ranges before anything connects; the
 * connections are then made to those addresses by number, so no second
 * lookup can answer differently (DNS rebinding). A public name pointing at
 * 127.0.0.1 is refused (the usual SSRF hole of forward proxies), and a
 * refused destination is a 403 whether or not anything listens there:
 * checking after connecting would tell a client which internal ports are
 * open (403 open, 502 closed) and open connections to internal hosts.
 */
#include "px.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(_WIN32)
#include <winsock2.h>
#include <ws2tcpip.h>
#else
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#endif

/* ---- addresses --------------------------------------------------------------- */

/* An IPv4 or IPv6 literal, IPv4 as ::ffff:a.b.c.d (keel/util.h, which
 * refuses an IPv4 part with a leading zero: octal to inet_aton, which
 * getaddrinfo uses, so 0177.0.0.1 is a name for the resolver, whose answer
 * is what gets checked). 0 or -1. */
int px_ip_parse(const char *s, uint8_t out[16])
{
    keel_ip ip;
    if (!keel_ip_parse(s, strlen(s), &ip))
        return -1;
    memcpy(out, ip.bytes, 16);
    return 0;
}

static int cidr_match(const px_cidr *c, const uint8_t a[16])
{
    keel_ip ip;
    memcpy(ip.bytes, a, 16);
    return keel_cidr_match(c, &ip);
}

static int parse_cidr(const char *s, px_cidr *out)
{
    return keel_cidr_parse(s, strlen(s), out) ? 0 : -1;
}

/* The special-purpose ranges a forward proxy must not reach for its
 * clients unless told to (RFC 6890's registries): loopback, "this
 * network", RFC 1918, shared (CGNAT), link-local, IETF protocol
 * assignments, benchmarking, multicast, reserved and broadcast, and for
 * IPv6 unspecified, loopback, unique-local, link-local, site-local,
 * multicast. IPv4 is held as ::ffff:a.b.c.d, so a v4-mapped address is
 * checked as the IPv4 one it is. */
static int in_ranges(const uint8_t a[16], const char *const *ranges, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        px_cidr c;
        if (parse_cidr(ranges[i], &c) == 0 && cidr_match(&c, a))
            return 1;
    }
    return 0;
}

static int is_private(const uint8_t a[16])
{
    static const char *const ranges[] = {
        "0.0.0.0/8",      "10.0.0.0/8",    "100.64.0.0/10", "127.0.0.0/8",
        "169.254.0.0/16", "172.16.0.0/12", "192.0.0.0/24",  "192.168.0.0/16",
        "198.18.0.0/15",  "224.0.0.0/3",   "::/128",        "::1/128",
        "fc00::/7",       "fe80::/10",     "fec0::/10",     "ff00::/8",
    };
    if (in_ranges(a, ranges, sizeof ranges / sizeof ranges[0]))
        return 1;
    /* IPv6 forms that carry an IPv4 address to somewhere it is reached:
     * IPv4-compatible (::a.b.c.d, RFC 4291 2.5.5.1), NAT64's well-known
     * prefix (64:ff9b::/96, RFC 6052) and 6to4 (2002::/16, RFC 3056). The
     * IPv4 address inside is checked. */
    static const char *const carriers[] = {"::/96", "64:ff9b::/96"};
    uint8_t v4[16] = {[10] = 0xff, [11] = 0xff};
    if (in_ranges(a, carriers, 2)) {
        memcpy(v4 + 12, a + 12, 4);
        return is_private(v4);
    }
    if (a[0] == 0x20 && a[1] == 0x02) {
        memcpy(v4 + 12, a + 2, 4);
        return is_private(v4);
    }
    return 0;
}

/* ---- config -------------------------------------------------------------------- */

static size_t words_of(const char *v, char ***out)
{
    size_t n = 0, cap = 0, len;
    char **w = NULL;
    const char *at = v, *end = v + strlen(v), *word;
    while (keel_word_next(&at, end, 1, &word, &len)) {
        if (keel_reserve(&w, &cap, n + 1, sizeof *w, 8) != 0 ||
            (w[n] = keel_strndup(word, len)) == NULL)
            break;
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

int px_connect_config(px_config *c, keel_module *m, const px_connect_settings *s)
{
    const char *clients = s->clients, *ports = s->ports, *hosts = s->hosts;
    int rc;
    c->connect = s->on;
    c->connect_private = s->private_ok;
    c->connect_header_timeout_ms = s->header_timeout_ms;
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

typedef struct px_connect_client px_connect_client;

/* The addresses a destination resolves to (a literal: itself), each
 * checked before any is connected to. */
#define PX_MAX_ADDRESSES 16

typedef struct px_resolution {
    px_connect_client *c; /* NULL once the client has gone while resolving: then only freed */
    int status;           /* KEEL_OK, or KEEL_ERR_NOTFOUND (no TCP address) */
    size_t n;
    uint8_t addr[PX_MAX_ADDRESSES][16]; /* IPv4 as ::ffff:a.b.c.d */
    char text[PX_MAX_ADDRESSES][48];    /* the same, for keel_conn_connect */
    char host[256];
} px_resolution;

/* A client connection on a "proxy" listener: its CONNECT head as it is
 * read, then the destination being resolved and connected to. */
struct px_connect_client {
    keel_conn *conn;
    px_config *cfg;
    llhttp_t parser;
    char target[300];
    size_t target_len;
    int too_long;
    px_tunnel *t;
    keel_connect *attempt;
    px_resolution *res; /* the thread pool's while resolving, else ours */
    int resolving;
    size_t next_addr;     /* in res: the next to connect to */
    uint64_t deadline_ms; /* resolution and connects: connect_timeout from the head */
    int last_failure;     /* how the last connect failed */
    char host[256];
    unsigned port;
    char client[64];
};

static int client_on_url(llhttp_t *p, const char *at, size_t len)
{
    px_connect_client *c = p->data;
    if (c->target_len + len >= sizeof c->target) {
        c->too_long = 1;
        return 0;
    }
    memcpy(c->target + c->target_len, at, len);
    c->target_len += len;
    c->target[c->target_len] = '\0';
    return 0;
}

static int client_on_headers_complete(llhttp_t *p)
{
    return llhttp_get_method(p) == HTTP_CONNECT ? 0 : HPE_PAUSED;
}

static const llhttp_settings_t client_settings = {
    .on_url = client_on_url,
    .on_headers_complete = client_on_headers_complete,
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

static int client_open(keel_conn *conn, void *arg)
{
    (void)arg;
    px_connect_client *c = calloc(1, sizeof *c);
    if (c == NULL)
        return KEEL_ERR_NOMEM;
    c->conn = conn;
    c->cfg = keel_module_data(keel_conn_module(conn));
    keel_conn_set_data(conn, c);
    /* The head, from the connection's start, as http1's header_timeout:
     * a deadline, which no byte renews (under a read timeout, a client
     * trickling its head a byte at a time could keep the connection). */
    keel_conn_set_deadline(conn, c->cfg->connect_header_timeout_ms);
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

static void client_free(keel_conn *conn, px_connect_client *c)
{
    keel_conn_set_data(conn, NULL);
    if (c->t != NULL)
        px_tunnel_release(c->t);
    if (c->res != NULL) {
        if (c->resolving)
            c->res->c = NULL; /* resolve_done frees it */
        else
            free(c->res);
    }
    free(c);
}

static int client_allowed(const px_connect_client *c)
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
static int parse_target(px_connect_client *c)
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
    px_connect_client *c = keel_conn_data(client);
    (void)up; /* connected to an address checked before (resolved) */
    c->attempt = NULL;
    static const char ok200[] = "HTTP/1.1 200 Connection Established\r\n\r\n";
    keel_conn_write_copy(client, ok200, sizeof ok200 - 1);
    keel_log(t->cfg->module, KEEL_LOG_INFO, "CONNECT %s:%u from %s: 200", c->host, c->port,
             c->client);
    keel_metric_add(t->worker, t->cfg->m_tunnels, 1);
    t->pending_client = NULL;
    t->on_upstream_open = NULL;
    c->t = NULL; /* the creator's reference goes with c below */
    client_free(client, c);
    px_tunnel_expect(t, PX_SIDE_CLIENT);
    int rc = keel_conn_set_protocol(client, px_tunnel_protocol.name, t);
    px_tunnel_expect(t, PX_SIDE_UPSTREAM);
    px_tunnel_release(t); /* the client side holds it now (or nobody: then we fail) */
    return rc == KEEL_OK ? KEEL_OK : KEEL_ERR_CLOSED;
}

static void connect_next(px_connect_client *c);

static void connect_failed(keel_worker *w, int status, void *arg)
{
    px_tunnel *t = arg;
    (void)w;
    px_connect_client *c = keel_conn_data(t->pending_client);
    c->attempt = NULL;
    c->last_failure = status;
    keel_log(t->cfg->module, KEEL_LOG_DEBUG, "CONNECT %s:%u: %s: %s", c->host, c->port,
             c->res->text[c->next_addr - 1], keel_strerror(status));
    connect_next(c); /* the next address, or the answer */
}

/* Connects to the next checked address, by number, within what is left
 * of connect_timeout; when none is left, answers how the last failed. */
static void connect_next(px_connect_client *c)
{
    px_config *cfg = c->cfg;
    px_resolution *r = c->res;
    keel_worker *w = keel_conn_worker(c->conn);
    while (c->next_addr < r->n) {
        uint64_t now = keel_worker_now_ms(w);
        if (now >= c->deadline_ms) {
            c->last_failure = KEEL_ERR_TIMEOUT;
            break;
        }
        keel_connect_options o = {
            .size = sizeof o,
            .host = r->text[c->next_addr++],
            .port = c->port,
            .protocol = px_tunnel_protocol.name,
            .arg = c->t,
            .timeout_ms = c->deadline_ms == UINT64_MAX ? 0 : c->deadline_ms - now,
            .on_error = connect_failed,
        };
        int rc = keel_conn_connect(w, &o, &c->attempt);
        if (rc == KEEL_OK)
            return;
        c->attempt = NULL;
        c->last_failure = rc;
    }
    int code = c->last_failure == KEEL_ERR_TIMEOUT ? 504 : 502;
    keel_log(cfg->module, KEEL_LOG_INFO, "CONNECT %s:%u from %s: %d (%s)", c->host, c->port,
             c->client, code, keel_strerror(c->last_failure));
    reply_and_close(c->conn, code);
}

/* Every address checked: one refused refuses the destination (a name
 * that also points inside is no public name), else they are connected
 * to in the resolver's order. */
static void resolved(px_connect_client *c)
{
    px_config *cfg = c->cfg;
    px_resolution *r = c->res;
    if (r->status != KEEL_OK || r->n == 0) {
        keel_log(cfg->module, KEEL_LOG_INFO, "CONNECT %s:%u from %s: 502 (%s)", c->host, c->port,
                 c->client, keel_strerror(r->status != KEEL_OK ? r->status : KEEL_ERR_NOTFOUND));
        reply_and_close(c->conn, 502);
        return;
    }
    for (size_t i = 0; i < r->n && !cfg->connect_private; i++)
        if (is_private(r->addr[i])) {
            keel_log(cfg->module, KEEL_LOG_INFO, "CONNECT %s:%u from %s: 403 (private address %s)",
                     c->host, c->port, c->client, r->text[i]);
            reply_and_close(c->conn, 403);
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
    keel_conn_set_deadline(c->conn, 0); /* the connects have their own deadline */
    c->last_failure = KEEL_ERR_NOTFOUND;
    connect_next(c);
}

/* On the thread pool: the one lookup of the destination's name. */
static void resolve_work(void *userdata)
{
    px_resolution *r = userdata;
    struct addrinfo hints, *list = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_protocol = IPPROTO_TCP;
    r->status = KEEL_ERR_NOTFOUND;
    if (getaddrinfo(r->host, NULL, &hints, &list) != 0)
        return;
    for (struct addrinfo *ai = list; ai != NULL && r->n < PX_MAX_ADDRESSES; ai = ai->ai_next) {
        uint8_t a[16];
        char text[48];
        if (ai->ai_family == AF_INET) {
            const struct sockaddr_in *sa = (const struct sockaddr_in *)(const void *)ai->ai_addr;
            memset(a, 0, 10);
            a[10] = a[11] = 0xff;
            memcpy(a + 12, &sa->sin_addr, 4);
            if (inet_ntop(AF_INET, &sa->sin_addr, text, sizeof text) == NULL)
                continue;
        } else if (ai->ai_family == AF_INET6) {
            const struct sockaddr_in6 *sa = (const struct sockaddr_in6 *)(const void *)ai->ai_addr;
            memcpy(a, &sa->sin6_addr, 16);
            if (inet_ntop(AF_INET6, &sa->sin6_addr, text, sizeof text) == NULL)
                continue;
        } else {
            continue;
        }
        size_t k = 0;
        while (k < r->n && memcmp(r->addr[k], a, 16) != 0)
            k++;
        if (k < r->n)
            continue; /* the same address twice (one per socket type, say) */
        memcpy(r->addr[r->n], a, 16);
        memcpy(r->text[r->n], text, sizeof text);
        r->n++;
    }
    freeaddrinfo(list);
    if (r->n > 0)
        r->status = KEEL_OK;
}

static void resolve_done(keel_worker *w, int status, void *userdata)
{
    px_resolution *r = userdata;
    px_connect_client *c = r->c;
    (void)w;
    if (c == NULL) {
        free(r); /* the client left meanwhile */
        return;
    }
    c->resolving = 0;
    if (status != KEEL_OK) {
        reply_and_close(c->conn, 503); /* the worker is stopping */
        return;
    }
    resolved(c);
}

static void start_connect(px_connect_client *c)
{
    px_config *cfg = c->cfg;
    int refuse = 0;
    if (!cfg->connect)
        refuse = 501; /* as http1 answers it: this server does not tunnel */
    else if (!client_allowed(c) || parse_target(c) != 0 || !port_allowed(cfg, c->port) ||
             !host_allowed(cfg, c->host))
        refuse = 403;
    if (refuse) {
        keel_log(cfg->module, KEEL_LOG_INFO, "CONNECT %s from %s: %d", c->target, c->client,
                 refuse);
        reply_and_close(c->conn, refuse);
        return;
    }
    keel_worker *w = keel_conn_worker(c->conn);
    px_resolution *r = calloc(1, sizeof *r);
    if (r == NULL) {
        reply_and_close(c->conn, 500);
        return;
    }
    r->c = c;
    snprintf(r->host, sizeof r->host, "%s", c->host);
    c->res = r;
    /* connect_timeout = 0: no deadline of ours (each connect gets the
     * server's connect_timeout, as keel_connect_options says for 0). */
    c->deadline_ms =
        cfg->connect_timeout_ms ? keel_worker_now_ms(w) + cfg->connect_timeout_ms : UINT64_MAX;
    keel_conn_pause(c->conn); /* what the client sends next is the tunnel's */
    size_t host_len = strlen(c->host);
    if (host_len < sizeof r->text[0] && px_ip_parse(c->host, r->addr[0]) == 0) {
        /* A literal is its own address: checked as any other, and
         * connected to as the address checked, written out again. Its
         * spelling would be parsed anew by keel_conn_connect, and where
         * libuv refuses it, by getaddrinfo, which reads 0177.0.0.1 as
         * octal (inet_aton): 127.0.0.1, checked here as 177.0.0.1. */
        const uint8_t *a = r->addr[0];
        static const uint8_t mapped[12] = {[10] = 0xff, [11] = 0xff};
        int v4 = memcmp(a, mapped, sizeof mapped) == 0;
        if (inet_ntop(v4 ? AF_INET : AF_INET6, v4 ? a + 12 : a, r->text[0], sizeof r->text[0]) ==
            NULL) {
            reply_and_close(c->conn, 500);
            return;
        }
        r->n = 1;
        r->status = KEEL_OK;
        resolved(c);
        return;
    }
    /* The head's deadline gives way to connect_timeout's, which the
     * resolution counts in (client_timeout answers 504). */
    keel_conn_set_deadline(c->conn, cfg->connect_timeout_ms);
    c->resolving = 1;
    int rc = keel_worker_offload(w, resolve_work, resolve_done, r);
    if (rc != KEEL_OK) {
        c->resolving = 0;
        reply_and_close(c->conn, rc == KEEL_ERR_SHUTDOWN ? 503 : 500);
    }
}

static int client_data(keel_conn *conn, const char *data, size_t len, size_t *consumed)
{
    px_connect_client *c = keel_conn_data(conn);
    *consumed = 0;
    if (c->t != NULL || c->res != NULL)
        return KEEL_OK; /* resolving or connecting: the bytes wait for the tunnel */
    /* The head is parsed again from its start on each read: it is small,
     * and nothing is consumed until we know whose it is. */
    llhttp_init(&c->parser, HTTP_REQUEST, &client_settings);
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
        /* Not CONNECT: http1's, all of it, with its own header_timeout
         * (the head is complete, so it gains no time). */
        client_free(conn, c);
        keel_conn_set_deadline(conn, 0);
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

static void client_timeout(keel_conn *conn)
{
    px_connect_client *c = keel_conn_data(conn);
    if (c == NULL)
        return;
    if (c->resolving)
        reply_and_close(conn, 504); /* the name did not resolve in connect_timeout */
    else if (c->t == NULL && c->res == NULL)
        reply_and_close(conn, 408); /* connect_header_timeout: the head is late */
}

static void client_close(keel_conn *conn, int status)
{
    px_connect_client *c = keel_conn_data(conn);
    (void)status;
    if (c == NULL)
        return;
    if (c->attempt != NULL) {
        keel_connect_cancel(c->attempt);
        c->attempt = NULL;
    }
    client_free(conn, c);
}

const keel_protocol px_connect_protocol = {
    .size = sizeof(keel_protocol),
    .name = "proxy",
    .on_open = client_open,
    .on_data = client_data,
    .on_timeout = client_timeout,
    .on_close = client_close,
};
