/* keys.c — the [tls] keys both backends declare (keys.h), their values
 * that mean the same on every library, and the plain-HTTP check. What a
 * library spells its own way (suites, curves, certificate and CA files)
 * each backend parses itself, from the same strings; the 421 filter for a
 * request whose Host chooses another site's certificates. */
#include "keys.h"

#include <keel/http.h>
#include <keel/tls.h>
#include <keel/util.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The enum keys' words, in the order of the values they give:
 * KT_VERIFY_*, and kt_common.ktls (0 off, 1 auto). */
static const char *const verify_modes[] = {"off", "optional", "required", NULL};
static const char *const ktls_modes[] = {"off", "auto", NULL};

static const keel_config_key kt_keys[] = {
    KEEL_KEY(kt_section, cert, "cert", KEEL_CONFIG_STRING, .flags = KEEL_CONFIG_LIST,
             .scopes = KEEL_SCOPE_GLOBAL | KEEL_SCOPE_LISTENER | KEEL_SCOPE_SITE,
             .doc = "CHAIN.pem KEY.pem [passphrase=...] [ocsp=RESPONSE.der]: a certificate; "
                    "several are chosen by SNI; in a [site] the site's own, served to the names "
                    "that choose it; ocsp= staples that file (OpenSSL backend)"),
    KEEL_KEY(kt_section, backend, "backend", KEEL_CONFIG_STRING, .def = "mbedtls",
             .doc = "the TLS library: mbedtls (mod_tls) or openssl (mod_tls_openssl, package "
                    "keel-tls-openssl); the loader picks the module"),
    KEEL_KEY(kt_section, min_version, "min_version", KEEL_CONFIG_STRING, .def = "1.2",
             .doc = "lowest TLS version: 1.2 or 1.3"),
    KEEL_KEY(kt_section, max_version, "max_version", KEEL_CONFIG_STRING,
             .doc = "highest TLS version: 1.2 or 1.3 (default: the highest the backend's "
                    "library has)"),
    KEEL_KEY(kt_section, ciphers, "ciphers", KEEL_CONFIG_STRING, .def = "",
             .doc = "cipher suites by IANA name, in order; empty: the module's modern default"),
    KEEL_KEY(kt_section, curves, "curves", KEEL_CONFIG_STRING, .def = "x25519 secp256r1 secp384r1",
             .doc = "key-exchange groups, in order"),
    KEEL_KEY(kt_section, handshake_timeout_ms, "handshake_timeout", KEEL_CONFIG_DURATION,
             .def = "10s", .doc = "time for a handshake to finish (no byte renews it)"),
    KEEL_KEY(kt_section, session_tickets, "session_tickets", KEEL_CONFIG_BOOL, .def = "on",
             .doc = "resume sessions with tickets (RFC 5077, RFC 8446 4.6.1)"),
    KEEL_KEY(kt_section, ticket_lifetime_ms, "ticket_lifetime", KEEL_CONFIG_DURATION, .def = "1h",
             .doc = "how long a ticket is honoured: 1s to 7d"),
    KEEL_KEY(kt_section, verify_client, "verify_client", KEEL_CONFIG_ENUM, .def = "off",
             .choices = verify_modes,
             .doc = "client certificates: off, optional or required (needs client_ca)"),
    KEEL_KEY(kt_section, client_ca, "client_ca", KEEL_CONFIG_STRING, .def = "",
             .doc = "PEM file of the CAs client certificates must chain to"),
    KEEL_KEY(kt_section, alpn, "alpn", KEEL_CONFIG_STRING, .def = "",
             .doc = "protocols offered by ALPN on listeners, comma-separated (a listen line's "
                    "alpn= wins)"),
    KEEL_KEY(kt_section, client_alpn, "client_alpn", KEEL_CONFIG_STRING, .def = "",
             .doc = "protocols asked for by ALPN on outbound connections"),
    KEEL_KEY(kt_section, client_verify, "client_verify", KEEL_CONFIG_BOOL, .def = "on",
             .doc = "verify the servers keel connects to (the proxy's HTTPS upstreams)"),
    KEEL_KEY(kt_section, ca, "ca", KEEL_CONFIG_STRING, .def = "",
             .doc = "PEM file of the CAs outbound connections trust; empty: the system's; none"),
    KEEL_KEY(kt_section, ocsp_stapling, "ocsp_stapling", KEEL_CONFIG_BOOL, .def = "off",
             .doc = "staple OCSP responses fetched from each certificate's responder (its AIA "
                    "http:// URL; RFC 6066 8; OpenSSL backend)"),
    KEEL_KEY(kt_section, ocsp_refresh_ms, "ocsp_refresh", KEEL_CONFIG_DURATION, .def = "1h",
             .doc = "the longest a fetched OCSP response is stapled before it is fetched again "
                    "(sooner: halfway to its nextUpdate)"),
    KEEL_KEY(kt_section, ktls, "ktls", KEEL_CONFIG_ENUM, .def = "auto", .choices = ktls_modes,
             .doc = "kernel TLS: auto (use it where the kernel and backend can; the start-up "
                    "log says whether and why not) or off"),
};

const keel_config_schema kt_schema = {sizeof(keel_config_schema), sizeof(keel_config_key), kt_keys,
                                      sizeof kt_keys / sizeof kt_keys[0], sizeof(kt_section)};

static int parse_version(keel_module *m, const char *key, const char *v, int max_tls,
                         const char *library, int *out)
{
    if (strcmp(v, "1.2") == 0 || strcmp(v, "TLSv1.2") == 0)
        *out = 2;
    else if (strcmp(v, "1.3") == 0 || strcmp(v, "TLSv1.3") == 0)
        *out = 3;
    else if (strcmp(v, "1.0") == 0 || strcmp(v, "1.1") == 0 || strcmp(v, "TLSv1") == 0 ||
             strcmp(v, "TLSv1.1") == 0)
        /* RFC 8996: TLS 1.0 and 1.1 are deprecated. */
        return keel_config_error(m, key, "TLS %s is not supported (RFC 8996); use 1.2 or 1.3", v);
    else
        return keel_config_error(m, key, "expected 1.2 or 1.3, got '%s'", v);
    if (*out > max_tls)
        return keel_config_error(m, key, "this %s has no TLS 1.3", library);
    return KEEL_OK;
}

/* The loader loads mod_tls_BACKEND when it exists, else mod_tls: a
 * backend that finds itself named for another was chosen because that
 * one is not installed. */
static int check_backend(keel_module *m, const char *wanted, const char *backend)
{
    if (strcmp(wanted, backend) == 0)
        return KEEL_OK;
    if (strcmp(wanted, "mbedtls") != 0 && strcmp(wanted, "openssl") != 0)
        return keel_config_error(m, "backend", "expected mbedtls or openssl, got '%s'", wanted);
    return keel_config_error(m, "backend",
                             "the %s backend is not installed (mod_tls_%s, package keel-tls-%s); "
                             "this is mod_tls on %s",
                             strcmp(wanted, "openssl") == 0 ? "OpenSSL" : "mbedTLS", wanted, wanted,
                             backend);
}

/* Set by kt_keys_read for a backend without server-side OCSP stapling
 * (mbedTLS): a cert line's ocsp= is then warned about, not read. */
static const char *no_stapling_library;

int kt_keys_read(keel_module *m, const char *backend, int max_tls, const char *library,
                 kt_common *out)
{
    const kt_section *sec = keel_module_config(m);
    int rc;
    memset(out, 0, sizeof *out);
    if ((rc = check_backend(m, sec->backend, backend)) != KEEL_OK)
        return rc;
    out->min_version = 2;
    out->max_version = max_tls;
    if ((rc = parse_version(m, "min_version", sec->min_version, max_tls, library,
                            &out->min_version)) != KEEL_OK)
        return rc;
    /* No default in the table: the highest the library has, which the
     * generated reference cannot know. Asking for 1.3 from a library
     * without it is not fatal (1.2 is still within what was asked), but
     * said: a TLS-1.3-only client will fail. */
    const char *max = sec->max_version;
    if (max != NULL && max_tls < 3 && (strcmp(max, "1.3") == 0 || strcmp(max, "TLSv1.3") == 0)) {
        keel_log(m, KEEL_LOG_WARN,
                 "[tls] max_version = %s: this %s has no TLS 1.3: TLS 1.2 only, TLS-1.3-only "
                 "clients fail",
                 max, library);
        max = NULL;
    }
    if (max != NULL &&
        (rc = parse_version(m, "max_version", max, max_tls, library, &out->max_version)) != KEEL_OK)
        return rc;
    if (out->max_version < out->min_version)
        return keel_config_error(m, "max_version", "below min_version");

    out->handshake_timeout_ms = sec->handshake_timeout_ms;
    if (out->handshake_timeout_ms == 0)
        return keel_config_error(m, "handshake_timeout", "must be above 0");

    uint64_t lifetime = sec->ticket_lifetime_ms;
    out->tickets_on = sec->session_tickets;
    /* RFC 8446 4.6.1: a ticket lives at most 7 days. */
    if (lifetime < 1000 || lifetime > 7ull * 86400 * 1000)
        return keel_config_error(m, "ticket_lifetime", "must be between 1s and 7d");
    out->ticket_lifetime_s = (uint32_t)(lifetime / 1000);

    out->verify_client = sec->verify_client;
    out->client_ca = sec->client_ca;
    if (*out->client_ca == '\0' && out->verify_client != KT_VERIFY_OFF)
        return keel_config_error(m, "verify_client", "needs client_ca = FILE");

    out->alpn = sec->alpn;
    out->client_alpn = sec->client_alpn;
    out->client_verify = sec->client_verify;
    out->ca = sec->ca;

    out->ocsp_stapling = sec->ocsp_stapling;
    out->ocsp_refresh_ms = sec->ocsp_refresh_ms;
    if (out->ocsp_refresh_ms < 1000 || out->ocsp_refresh_ms > 7ull * 86400 * 1000)
        return keel_config_error(m, "ocsp_refresh", "must be between 1s and 7d");
    /* mbedTLS (2.28, 3.6) parses a client's status_request but has no way
     * for a server to answer it (no OCSP code in its ssl_srv): say so
     * rather than serve handshakes without the staple asked for. */
    no_stapling_library = strcmp(backend, "mbedtls") == 0 ? library : NULL;
    if (out->ocsp_stapling && no_stapling_library != NULL)
        keel_log(m, KEEL_LOG_WARN,
                 "[tls] ocsp_stapling = on: %s has no server-side OCSP stapling; nothing is "
                 "stapled (backend = openssl staples)",
                 library);
    out->ktls = sec->ktls;
    return KEEL_OK;
}

/* ---- `cert` lines ------------------------------------------------------------ */

int kt_cert_error(keel_module *m, const char *value, const char *fmt, ...)
{
    char why[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return keel_config_value_error(m, value, why);
}

int kt_cert_line_parse(keel_module *m, const char *value, kt_cert_line *out)
{
    static const char usage[] = "expected CHAIN.pem KEY.pem [passphrase=...] [ocsp=FILE]";
    out->passphrase = NULL;
    out->ocsp[0] = '\0';
    if (value == NULL)
        return kt_cert_error(m, value, "cert: missing value");
    if (strlen(value) >= sizeof out->buf)
        return kt_cert_error(m, value, "value too long");
    strcpy(out->buf, value);
    char *words[4];
    const char *ocsp = NULL;
    size_t n = 0;
    for (char *p = out->buf; *p;) {
        p += strspn(p, " \t");
        if (*p == '\0')
            break;
        if (n == 4)
            return kt_cert_error(m, value, "%s", usage);
        words[n++] = p;
        p += strcspn(p, " \t");
        if (*p)
            *p++ = '\0';
    }
    /* After the two paths, named options in any order, each once. */
    for (size_t i = 2; i < n; i++) {
        if (strncmp(words[i], "passphrase=", 11) == 0 && out->passphrase == NULL)
            out->passphrase = words[i] + 11;
        else if (strncmp(words[i], "ocsp=", 5) == 0 && ocsp == NULL && words[i][5] != '\0')
            ocsp = words[i] + 5;
        else
            return kt_cert_error(m, value, "%s, got '%s'", usage, words[i]);
    }
    if (n < 2)
        return kt_cert_error(m, value, "%s", usage);
    if (keel_config_value_path(m, value, words[0], out->chain, sizeof out->chain) ==
            KEEL_ERR_INVAL ||
        keel_config_value_path(m, value, words[1], out->key, sizeof out->key) == KEEL_ERR_INVAL ||
        (ocsp != NULL &&
         keel_config_value_path(m, value, ocsp, out->ocsp, sizeof out->ocsp) == KEEL_ERR_INVAL))
        return kt_cert_error(m, value, "path too long");
    if (ocsp != NULL && no_stapling_library != NULL) {
        keel_log(m, KEEL_LOG_WARN,
                 "[tls] cert: ocsp=%s: %s has no server-side OCSP stapling; not stapled", ocsp,
                 no_stapling_library);
        out->ocsp[0] = '\0';
    }
    return KEEL_OK;
}

/* ---- metrics --------------------------------------------------------------------- */

int kt_metrics_register(keel_module *m, kt_metrics *out)
{
    static const char hs[] = "TLS handshakes by side and outcome";
    const struct {
        const char *name, *help, *labels;
        keel_metric **out;
    } all[] = {
        {"tls_handshakes_total", hs, "side=\"server\",result=\"ok\"", &out->hs_ok},
        {"tls_handshakes_total", hs, "side=\"server\",result=\"failed\"", &out->hs_failed},
        {"tls_handshakes_total", hs, "side=\"client\",result=\"ok\"", &out->hs_client_ok},
        {"tls_handshakes_total", hs, "side=\"client\",result=\"failed\"", &out->hs_client_failed},
        {"tls_resumed_total", "TLS handshakes that resumed a session (tickets)", NULL,
         &out->resumed},
    };
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        keel_metric_desc d = {.size = sizeof d,
                              .name = all[i].name,
                              .help = all[i].help,
                              .type = KEEL_METRIC_COUNTER,
                              .labels = all[i].labels};
        int rc = keel_metric_register(m, &d, all[i].out);
        if (rc != KEEL_OK)
            return rc;
    }
    return KEEL_OK;
}

/* ---- the tls service ------------------------------------------------------------- */

static int peer_subject(keel_conn *conn, char *buf, size_t size)
{
    const char *subject = kt_svc_peer_subject(conn);
    if (buf != NULL && size > 0)
        buf[0] = '\0';
    if (subject == NULL)
        return KEEL_ERR_NOTFOUND;
    if (buf == NULL || size == 0)
        return KEEL_ERR_INVAL;
    size_t len = strlen(subject);
    size_t n = len < size ? len : size - 1;
    memcpy(buf, subject, n);
    buf[n] = '\0';
    return len < size ? KEEL_OK : KEEL_ERR_INVAL;
}

static const keel_tls_api api = {
    .size = sizeof(keel_tls_api),
    .is_tls = kt_svc_is_tls,
    .version = kt_svc_version,
    .cipher = kt_svc_cipher,
    .alpn = kt_svc_alpn,
    .server_name = kt_svc_server_name,
    .peer_subject = peer_subject,
    .resumed = kt_svc_resumed,
};

int kt_service_publish(keel_module *m)
{
    return keel_service_publish(m, KEEL_TLS_SERVICE, KEEL_TLS_API_VERSION, &api);
}

/* ---- per-worker buffers ------------------------------------------------------------ */

/* A wipe the compiler may not drop (C11 has no memset_s everywhere). */
static void wipe(void *p, size_t len)
{
    volatile unsigned char *v = p;
    while (len--)
        *v++ = 0;
}

int kt_buffers_alloc(unsigned char **a, unsigned char **b, size_t size)
{
    *a = malloc(size);
    *b = malloc(size);
    if (*a != NULL && *b != NULL)
        return KEEL_OK;
    free(*a);
    free(*b);
    *a = *b = NULL;
    return KEEL_ERR_NOMEM;
}

void kt_buffers_free(unsigned char **a, unsigned char **b, size_t size)
{
    if (*a != NULL)
        wipe(*a, size);
    if (*b != NULL)
        wipe(*b, size);
    free(*a);
    free(*b);
    *a = *b = NULL;
}

/* ---- a request for another site's certificates: 421 -------------------------------- *
 * The handshake authenticated the server with the certificates of the
 * site its SNI chose (or, without SNI, the default site's). A request on
 * the same connection whose Host chooses a site with certificates of its
 * own other than those was never authenticated for: a client that reuses
 * a connection for another origin (HTTP/2 coalescing, RFC 9113 9.1.1; a
 * Host that differs from SNI) is told 421 Misdirected Request (RFC 9110
 * 15.5.20) and retries on a connection of its own. Sites that serve
 * [tls]'s certificates share them and stay reachable from one another's
 * connections. Which list a connection served is the backend's answer
 * (kt_conn_served_certs); the decision is the same on both. */

const char *const *kt_scope_certs(const kt_section *global, const kt_section *scope)
{
    return scope != NULL && scope->cert.count > 0 && scope->cert.items != global->cert.items
               ? scope->cert.items
               : NULL;
}

typedef struct kt_site {
    const char *const *items;
    void *list;
} kt_site;

static kt_site *sites; /* sorted by items pointer */
static size_t nsites;

static size_t site_at(const char *const *items)
{
    size_t lo = 0, hi = nsites;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((uintptr_t)sites[mid].items < (uintptr_t)items)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void *kt_site_find(const kt_section *scope)
{
    size_t at = site_at(scope->cert.items);
    return at < nsites && sites[at].items == scope->cert.items ? sites[at].list : NULL;
}

size_t kt_site_count(void)
{
    return nsites;
}

/* The backend's loader (keys.c is compiled into each backend: this is
 * that one's), for the scope calls, which come after load. */
static kt_site_load_fn site_loader;

static int site_add(keel_module *m, const void *confp, void *ud)
{
    (void)ud;
    const kt_section *scope = confp;
    if (kt_scope_certs(keel_module_config(m), scope) == NULL || kt_site_find(scope) != NULL)
        return KEEL_OK;
    if (keel_array_add(&sites, nsites, sizeof *sites) != 0)
        return KEEL_ERR_NOMEM;
    int rc = KEEL_OK;
    void *list = site_loader(m, scope, &rc);
    if (list == NULL)
        return rc != KEEL_OK ? rc : KEEL_ERR_NOMEM;
    size_t at = site_at(scope->cert.items);
    memmove(&sites[at + 1], &sites[at], (nsites - at) * sizeof *sites);
    sites[at] = (kt_site){scope->cert.items, list};
    /* The first list of a scope's own: requests may now ask for another
     * site's certificates than their connection's. */
    return nsites++ == 0 ? kt_misdirected_filter_add(m) : KEEL_OK;
}

int kt_sites_read(keel_module *m, kt_site_load_fn load)
{
    site_loader = load;
    return keel_module_config_scopes(m, site_add, NULL);
}

void kt_sites_free(void (*free_list)(void *list))
{
    for (size_t i = 0; i < nsites; i++)
        free_list(sites[i].list);
    free(sites);
    sites = NULL;
    nsites = 0;
}

/* What the filter needs of the module it is added for (keys.c is
 * compiled into each backend: this is that one's). */
typedef struct misdirected_ctx {
    keel_module *module;
    const kt_section *global;
} misdirected_ctx;

static int misdirected_on_request(keel_request *req, keel_response *res, void *ud)
{
    const misdirected_ctx *ctx = ud;
    const char *const *served;
    if (!kt_conn_served_certs(keel_request_conn(req), &served))
        return KEEL_HTTP_NEXT;
    const char *const *wanted = kt_scope_certs(ctx->global, keel_request_config(req, ctx->module));
    if (wanted == NULL || wanted == served)
        return KEEL_HTTP_NEXT;
    int rc = keel_response_send_status(res, 421);
    return rc < 0 && rc != KEEL_ERR_CLOSED ? rc : KEEL_HTTP_DONE;
}

int kt_misdirected_filter_add(keel_module *m)
{
    static misdirected_ctx ctx;
    static const keel_http_filter filter = {
        .size = sizeof(keel_http_filter),
        .name = "tls",
        /* First: nothing of the site runs for a request it does not take. */
        .order = KEEL_ORDER_FIRST,
        .userdata = &ctx,
        .on_request = misdirected_on_request,
    };
    ctx.module = m;
    ctx.global = keel_module_config(m);
    return keel_http_filter_add(m, &filter);
}

/* ---- plain HTTP on a TLS port ------------------------------------------------------ */

/* A method token (RFC 9110 9.1: upper-case letters in every registered
 * method) and a space. A TLS record starts with its content type (20 to
 * 24, RFC 8446 5.1), never a letter. */
int kt_looks_like_http(const char *data, size_t len)
{
    size_t i = 0;
    while (i < len && i < 16 && data[i] >= 'A' && data[i] <= 'Z')
        i++;
    return i > 0 && i < len && data[i] == ' ';
}

/* As nginx does (its 497 "The plain HTTP request was sent to HTTPS
 * port", answered as a 400): the client is told in its own protocol,
 * instead of a failed handshake it would show as an empty reply. */
const char kt_plain_http_answer[] = "HTTP/1.1 400 Bad Request\r\n"
                                    "Content-Type: text/plain\r\n"
                                    "Content-Length: 46\r\n"
                                    "Connection: close\r\n"
                                    "\r\n"
                                    "The plain HTTP request was sent to HTTPS port\n";
const size_t kt_plain_http_answer_len = sizeof kt_plain_http_answer - 1;

void kt_describe_versions(char *buf, size_t size, int min, int max, int max_tls,
                          const char *library)
{
    char why[96] = "";
    if (max_tls < 3)
        snprintf(why, sizeof why, ", no 1.3 in %s", library);
    if (min == max)
        snprintf(buf, size, "TLS 1.%d%s", max, why);
    else
        snprintf(buf, size, "TLS 1.%d-1.%d%s", min, max, why);
}

int kt_open_check(keel_module *m, int client, size_t ncerts, size_t nsites)
{
    if (client || ncerts > 0 || nsites > 0)
        return KEEL_OK;
    keel_log(m, KEEL_LOG_ERROR,
             "a tls listener needs [tls] cert = CHAIN.pem KEY.pem (or a site's tls.cert)");
    return KEEL_ERR_CONFIG;
}

const char *kt_alpn_offer(keel_conn *conn, int client, const char *alpn, const char *client_alpn)
{
    const char *offer = client ? client_alpn : keel_conn_listener_option(conn, "alpn");
    if (offer == NULL)
        offer = alpn;
    /* Nothing configured: an HTTP/1.1 listener offers what browsers
     * expect, h2 first (the backends keep only the ids whose protocol is
     * loaded), as nginx's `listen ... ssl http2` does. Other protocols
     * negotiate nothing. */
    if (!client && (offer == NULL || offer[0] == '\0') &&
        strcmp(keel_conn_protocol_name(conn), "http1") == 0)
        offer = "h2,http/1.1";
    return offer;
}
