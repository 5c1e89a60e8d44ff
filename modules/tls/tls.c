/* tls.c — the tls module: its [tls] config, its life cycle (load builds
 * what every worker shares, start/stop each worker's RNG and configs,
 * unload wipes the keys), the transport and the service it registers.
 *
 *     [keel]
 *     listen = 0.0.0.0:443 http1 tls alpn=h2,http/1.1
 *     modules = tls http1 ...
 *     [tls]
 *     cert = site.pem site.key
 */
#include "kt.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

keel_module *kt_self;
kt_settings kt_cfg;

/* ECDHE (forward secrecy) with AEAD only, ECDSA first: the suites of
 * Mozilla's "intermediate" profile that mbedTLS has (RFC 5289, RFC 7905);
 * TLS 1.3's own three (RFC 8446 B.4) where the library speaks it. */
static const int default_ciphers[] = {
#if KT_HAVE_TLS13
    MBEDTLS_TLS1_3_AES_128_GCM_SHA256,
    MBEDTLS_TLS1_3_AES_256_GCM_SHA384,
    MBEDTLS_TLS1_3_CHACHA20_POLY1305_SHA256,
#endif
    MBEDTLS_TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    MBEDTLS_TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    MBEDTLS_TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    MBEDTLS_TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
#if defined(MBEDTLS_CHACHAPOLY_C)
    MBEDTLS_TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    MBEDTLS_TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
#endif
    0,
};

/* Where the system keeps its CA bundle: Debian/Ubuntu/Alpine/Arch,
 * Fedora/RHEL, macOS/FreeBSD. */
static const char *const system_cas[] = {
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
};

kt_worker *kt_worker_of(keel_conn *conn)
{
    return keel_worker_state(keel_conn_worker(conn), kt_self);
}

/* ---- config ------------------------------------------------------------------- */

void kt_be_describe(char *buf, size_t size)
{
    kt_describe_versions(buf, size, kt_cfg.min_version, kt_cfg.max_version, KT_HAVE_TLS13 ? 3 : 2,
                         "mbedTLS " MBEDTLS_VERSION_STRING);
}

/* `ciphers = A, B C`: mbedTLS's names ("TLS-ECDHE-ECDSA-WITH-AES-128-GCM-SHA256")
 * or the IANA ones with underscores ("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
 * "TLS_AES_128_GCM_SHA256"). */
static int parse_ciphers(keel_module *m, const char *value)
{
    size_t cap = 1;
    for (const char *p = value; *p; p++)
        cap += (*p == ',' || *p == ' ');
    int *ids = calloc(cap + 1, sizeof *ids);
    if (ids == NULL)
        return KEEL_ERR_NOMEM;
    size_t n = 0;
    const char *p = value;
    while (*p) {
        while (*p == ',' || *p == ' ' || *p == '\t')
            p++;
        size_t len = strcspn(p, ", \t");
        if (len == 0)
            break;
        char name[96];
        if (len >= sizeof name - 8) {
            free(ids);
            return keel_config_error(m, "ciphers", "unknown cipher suite '%.*s'", (int)len, p);
        }
        size_t k = 0;
        if (len > 8 && (strncmp(p, "TLS_AES_", 8) == 0 || strncmp(p, "TLS_CHACHA20_", 13) == 0)) {
            memcpy(name, "TLS1-3-", 7); /* mbedTLS's spelling of RFC 8446 B.4's */
            k = 7;
            p += 4, len -= 4;
        }
        for (size_t i = 0; i < len; i++)
            name[k++] = (char)(p[i] == '_' ? '-' : toupper((unsigned char)p[i]));
        name[k] = '\0';
        int id = mbedtls_ssl_get_ciphersuite_id(name);
        if (id == 0) {
            free(ids);
            return keel_config_error(m, "ciphers", "unknown cipher suite '%.*s'", (int)len, p);
        }
        ids[n++] = id;
        p += len;
    }
    if (n == 0) {
        free(ids);
        return keel_config_error(m, "ciphers", "empty list");
    }
    kt_cfg.ciphers = ids;
    return KEEL_OK;
}

/* `curves = x25519 secp256r1 secp384r1`: mbedTLS's names, and the
 * OpenSSL / NIST aliases of P-256 and P-384. mbedTLS's server picks the
 * first of its own list that the client offers, so the order matters:
 * left alone it would prefer secp521r1, the slowest. */
static int parse_curves(keel_module *m, const char *value)
{
    size_t n = 0;
    const char *p = value;
    while (*p) {
        while (*p == ',' || *p == ' ' || *p == '\t' || *p == ':')
            p++;
        size_t len = strcspn(p, ", \t:");
        if (len == 0)
            break;
        char name[32];
        snprintf(name, sizeof name, "%.*s", (int)len, p);
        if (strcmp(name, "prime256v1") == 0 || strcmp(name, "P-256") == 0)
            strcpy(name, "secp256r1");
        else if (strcmp(name, "P-384") == 0)
            strcpy(name, "secp384r1");
        else if (strcmp(name, "X25519") == 0)
            strcpy(name, "x25519");
        const mbedtls_ecp_curve_info *ci = mbedtls_ecp_curve_info_from_name(name);
        if (ci == NULL)
            return keel_config_error(m, "curves", "unknown or unsupported curve '%s'", name);
        if (n == sizeof kt_cfg.curves / sizeof *kt_cfg.curves - 1)
            return keel_config_error(m, "curves", "at most %d curves",
                                     (int)(sizeof kt_cfg.curves / sizeof *kt_cfg.curves) - 1);
        kt_cfg.curves[n] = ci->grp_id;
        kt_cfg.groups[n] = ci->tls_id;
        n++;
        p += len;
    }
    if (n == 0)
        return keel_config_error(m, "curves", "empty list");
    kt_cfg.curves[n] = MBEDTLS_ECP_DP_NONE;
    kt_cfg.groups[n] = 0;
    return KEEL_OK;
}

/* Session tickets, once some certificate serves. */
static int start_tickets(keel_module *m)
{
    if (!kt_cfg.tickets_on || kt_cfg.tickets != NULL)
        return KEEL_OK;
    kt_cfg.tickets = kt_tickets_new(kt_cfg.ticket_lifetime_s);
    if (kt_cfg.tickets == NULL && KT_HAVE_TICKETS)
        return keel_config_error(m, "session_tickets", "cannot set up ticket keys");
    return KEEL_OK;
}

/* The [tls] section: keys.c reads what means the same on every backend;
 * here what mbedTLS spells its own way (suites, curves, CA files). certs.c
 * reads each `cert` line word by word, each file relative to the config
 * file that names it. */
static int read_config(keel_module *m, kt_rng *rng)
{
    const kt_section *sec = keel_module_config(m);
    const char *v = NULL;
    kt_common common;
    int rc = kt_keys_read(m, "mbedtls", KT_HAVE_TLS13 ? 3 : 2, "mbedTLS " MBEDTLS_VERSION_STRING,
                          &common);
    if (rc != KEEL_OK)
        return rc;
    kt_cfg.min_version = common.min_version;
    kt_cfg.max_version = common.max_version;
    kt_cfg.handshake_timeout_ms = common.handshake_timeout_ms;
    kt_cfg.tickets_on = common.tickets_on;
    kt_cfg.verify_client = common.verify_client;

    v = sec->ciphers;
    if (*v != '\0' && (rc = parse_ciphers(m, v)) != KEEL_OK)
        return rc;

    /* X25519 first (RFC 7748: fast and hard to get wrong), then the NIST
     * curves certificates use. */
    if ((rc = parse_curves(m, sec->curves)) != KEEL_OK)
        return rc;

    v = sec->client_ca;
    if (*v != '\0') {
        mbedtls_x509_crt_init(&kt_cfg.client_ca);
        kt_cfg.have_client_ca = 1;
        if ((rc = kt_ca_load(m, "client_ca", v, &kt_cfg.client_ca)) != KEEL_OK)
            return rc;
    }

    kt_cfg.alpn = sec->alpn;
    kt_cfg.client_alpn = sec->client_alpn;
    kt_cfg.client_verify = sec->client_verify;

    /* Outbound verification: [tls] ca, else the system's bundle. */
    v = sec->ca;
    mbedtls_x509_crt_init(&kt_cfg.ca);
    kt_cfg.have_ca = 1;
    if (strcmp(v, "none") == 0) {
        kt_cfg.have_ca = 0;
    } else if (*v != '\0') {
        if ((rc = kt_ca_load(m, "ca", v, &kt_cfg.ca)) != KEEL_OK)
            return rc;
    } else if (kt_cfg.client_verify) {
        kt_cfg.have_ca = 0;
        for (size_t i = 0; i < sizeof system_cas / sizeof *system_cas && !kt_cfg.have_ca; i++) {
            FILE *f = fopen(system_cas[i], "rb");
            if (f == NULL)
                continue;
            fclose(f);
            if (kt_ca_load(m, "ca", system_cas[i], &kt_cfg.ca) != KEEL_OK)
                return KEEL_ERR_CONFIG;
            kt_cfg.have_ca = 1;
        }
    } else {
        kt_cfg.have_ca = 0;
    }
    if (!kt_cfg.have_ca)
        mbedtls_x509_crt_free(&kt_cfg.ca);

    if ((rc = kt_certs_load(m, &sec->cert, &kt_cfg.certs, kt_rng_random, rng)) != KEEL_OK)
        return rc;
    kt_cfg.ticket_lifetime_s = common.ticket_lifetime_s;
    return kt_cfg.certs.n > 0 ? start_tickets(m) : KEEL_OK;
}

/* ---- certificates per site ------------------------------------------------------ */

const kt_site_list *kt_site_of(const kt_section *scope)
{
    return kt_site_find(scope);
}

static void site_free(void *p)
{
    kt_site_list *list = p;
    kt_certs_free(&list->certs);
    kt_tickets_free(list->tickets);
    free(list);
}

/* A scope's own `tls.cert` list (kt_sites_read): its certificates and
 * its own ticket keys: a ticket issued under another list's certificates
 * does not decrypt here (RFC 8446 4.6.1: resume only where the original
 * certificate would be valid). */
static void *site_load(keel_module *m, const kt_section *scope, int *rc)
{
    kt_site_list *list = calloc(1, sizeof *list);
    if (list == NULL) {
        *rc = KEEL_ERR_NOMEM;
        return NULL;
    }
    list->items = scope->cert.items;
    kt_rng rng;
    if (kt_rng_init(&rng, "load", 0) != KEEL_OK) {
        free(list);
        *rc = KEEL_ERR_IO;
        return NULL;
    }
    *rc = kt_certs_load(m, &scope->cert, &list->certs, kt_rng_random, &rng);
    kt_rng_free(&rng);
    if (*rc != KEEL_OK) {
        free(list);
        return NULL;
    }
    if (kt_cfg.tickets_on && KT_HAVE_TICKETS &&
        (list->tickets = kt_tickets_new(kt_cfg.ticket_lifetime_s)) == NULL)
        *rc = keel_config_error(m, "session_tickets", "cannot set up ticket keys");
    else
        /* [tls]'s ticket keys exist once any list does: a handshake that
         * chose no site of its own issues and resumes under them. */
        *rc = start_tickets(m);
    if (*rc != KEEL_OK) {
        site_free(list);
        return NULL;
    }
    return list;
}

/* ---- life cycle ----------------------------------------------------------------- */

static void release_all(void)
{
    kt_certs_free(&kt_cfg.certs);
    kt_sites_free(site_free);
    if (kt_cfg.have_client_ca)
        mbedtls_x509_crt_free(&kt_cfg.client_ca);
    if (kt_cfg.have_ca)
        mbedtls_x509_crt_free(&kt_cfg.ca);
    kt_tickets_free(kt_cfg.tickets);
    free(kt_cfg.ciphers);
    mbedtls_platform_zeroize(&kt_cfg, sizeof kt_cfg);
}

const int *kt_ciphers(void)
{
    return kt_cfg.ciphers != NULL ? kt_cfg.ciphers : default_ciphers;
}

static int tls_load(keel_module *m)
{
    kt_self = m;
    memset(&kt_cfg, 0, sizeof kt_cfg);
#if KT_MBEDTLS3 && defined(MBEDTLS_PSA_CRYPTO_C)
    /* 3.x runs TLS 1.3 (and parts of 1.2) on PSA, which must be set up
     * once before any handshake. */
    if (psa_crypto_init() != PSA_SUCCESS) {
        keel_log(m, KEEL_LOG_ERROR, "psa_crypto_init failed");
        return KEEL_ERR_IO;
    }
#endif
    kt_rng rng;
    if (kt_rng_init(&rng, "load", 0) != KEEL_OK) {
        keel_log(m, KEEL_LOG_ERROR, "cannot seed a random generator");
        return KEEL_ERR_IO;
    }
    int rc = read_config(m, &rng);
    if (rc == KEEL_OK) {
#if KT_HAVE_TLS13 && (!defined(MBEDTLS_THREADING_C) || MBEDTLS_VERSION_NUMBER < 0x03060000)
        /* TLS 1.3 runs on PSA's global key store, thread-safe only from
         * 3.6 with MBEDTLS_THREADING_C. */
        if (kt_cfg.max_version == 3 && keel_module_worker_count(m) > 1) {
            keel_log(m, KEEL_LOG_WARN,
                     "mbedTLS %s is not thread-safe for TLS 1.3 (needs 3.6 with "
                     "MBEDTLS_THREADING_C): TLS 1.2 only with %u workers",
                     MBEDTLS_VERSION_STRING, keel_module_worker_count(m));
            kt_cfg.max_version = 2;
            if (kt_cfg.min_version == 3)
                rc = keel_config_error(m, "min_version", "1.3 needs workers = 1 with this mbedTLS");
        }
#endif
    }
    if (rc == KEEL_OK && kt_cfg.client_verify && !kt_cfg.have_ca)
        keel_log(m, KEEL_LOG_WARN,
                 "no CA bundle found (set [tls] ca): outbound TLS connections will fail "
                 "verification");
    /* Build both configs once now, so that what fails, fails at start-up
     * (and under keel -t). */
    for (int client = 0; client <= 1 && rc == KEEL_OK; client++) {
        mbedtls_ssl_config conf;
        mbedtls_ssl_config_init(&conf);
        if (kt_conf_setup(&conf, client, &rng, NULL) != KEEL_OK)
            rc = keel_config_error(m, client ? "ca" : "cert", "mbedTLS refused the settings");
        mbedtls_ssl_config_free(&conf);
    }
    kt_rng_free(&rng);
    if (rc == KEEL_OK && (rc = kt_metrics_register(m, &kt_mx)) == KEEL_OK &&
        (rc = keel_transport_register(m, &kt_transport)) == KEEL_OK &&
        (rc = kt_service_publish(m)) == KEEL_OK)
        rc = kt_sites_read(m, site_load);
    if (rc != KEEL_OK) {
        release_all();
        return rc;
    }
    /* What a TLS-1.3-only client would otherwise learn from a failed
     * handshake: the versions tls listeners offer. */
    keel_log(m, KEEL_LOG_INFO, "tls listeners offer TLS 1.%d-1.%d (mbedTLS %s, %zu certificate(s))",
             kt_cfg.min_version, kt_cfg.max_version, MBEDTLS_VERSION_STRING, kt_cfg.certs.n);
    return KEEL_OK;
}

static int tls_start(keel_module *m, keel_worker *worker, void *state)
{
    (void)m;
    kt_worker *w = state;
    w->worker = worker;
    w->id = keel_worker_id(worker);
    if (kt_rng_init(&w->rng, "worker", w->id) != KEEL_OK)
        return KEEL_ERR_IO;
    if (kt_buffers_alloc(&w->stage, &w->plain, KT_STAGE_SIZE) != KEEL_OK) {
        kt_rng_free(&w->rng);
        return KEEL_ERR_NOMEM;
    }
    return KEEL_OK;
}

static void tls_stop(keel_module *m, keel_worker *worker, void *state)
{
    (void)m;
    (void)worker;
    kt_worker *w = state;
    kt_confs_free(&w->server_confs);
    kt_confs_free(&w->client_confs);
    kt_buffers_free(&w->stage, &w->plain, KT_STAGE_SIZE);
    kt_rng_free(&w->rng);
}

static void tls_unload(keel_module *m)
{
    (void)m;
    release_all();
}

KEEL_MODULE(tls, .version = "1.0.0", .worker_state_size = sizeof(kt_worker), .load = tls_load,
            .start = tls_start, .stop = tls_stop, .unload = tls_unload, .config = &kt_schema);
