/* tls.c — the tls module on OpenSSL 3: the same descriptor name ("tls"),
 * transport, service and [tls] keys as mod_tls (mbedTLS), chosen with
 * `[tls] backend = openssl` (the loader loads mod_tls_openssl for it).
 * Load builds the SSL_CTX objects every worker shares; start/stop each
 * worker's buffers and ALPN offers; unload frees the keys (OpenSSL wipes
 * private keys as it frees them; the ticket keys are cleansed here). */
#include "ko.h"
#include "ktls.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

keel_module *kt_self;
ko_settings ko_cfg;

/* The same suites as mod_tls's default (Mozilla's "intermediate" profile:
 * ECDHE with AEAD only, ECDSA first; TLS 1.3's three, RFC 8446 B.4). */
static const char default_ciphers12[] =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";
static const char default_ciphers13[] =
    "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";

ko_worker *ko_worker_of(keel_conn *conn)
{
    return keel_worker_state(keel_conn_worker(conn), kt_self);
}

/* ---- suites and groups --------------------------------------------------------- */

static int is_tls13(const SSL_CIPHER *c)
{
    return strcmp(SSL_CIPHER_get_version(c), "TLSv1.3") == 0;
}

/* Appends ":word" (or "word") to a malloc'ed string. */
static int append(char **list, const char *word, size_t len)
{
    size_t have = *list ? strlen(*list) : 0;
    char *grown = realloc(*list, have + len + 2);
    if (grown == NULL)
        return KEEL_ERR_NOMEM;
    if (have > 0)
        grown[have++] = ':';
    memcpy(grown + have, word, len);
    grown[have + len] = '\0';
    *list = grown;
    return KEEL_OK;
}

/* `ciphers` as mod_tls reads it: IANA names ("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
 * "TLS_AES_128_GCM_SHA256") or mbedTLS's ("TLS-ECDHE-ECDSA-WITH-...",
 * "TLS1-3-AES-128-GCM-SHA256"), turned into OpenSSL's two lists (TLS 1.2
 * suites by OpenSSL name, TLS 1.3 ones by IANA name). */
static int parse_ciphers(keel_module *m, const char *value)
{
    SSL_CTX *all = SSL_CTX_new(TLS_method());
    if (all == NULL || SSL_CTX_set_cipher_list(all, "ALL:COMPLEMENTOFALL") != 1) {
        SSL_CTX_free(all);
        return KEEL_ERR_NOMEM;
    }
    STACK_OF(SSL_CIPHER) *known = SSL_CTX_get_ciphers(all);
    int rc = KEEL_OK;
    const char *p = value;
    while (rc == KEEL_OK && *p) {
        p += strspn(p, ", \t");
        size_t len = strcspn(p, ", \t");
        if (len == 0)
            break;
        char iana[96];
        size_t k = 0;
        const char *w = p;
        size_t wl = len;
        if (wl > 7 && strncmp(w, "TLS1-3-", 7) == 0) { /* mbedTLS's TLS 1.3 spelling */
            memcpy(iana, "TLS_", 4);
            k = 4;
            w += 7, wl -= 7;
        }
        const SSL_CIPHER *found = NULL;
        if (k + wl < sizeof iana) {
            for (size_t i = 0; i < wl; i++)
                iana[k++] = (char)(w[i] == '-' ? '_' : toupper((unsigned char)w[i]));
            iana[k] = '\0';
            for (int i = 0; found == NULL && i < sk_SSL_CIPHER_num(known); i++) {
                const SSL_CIPHER *c = sk_SSL_CIPHER_value(known, i);
                if (strcmp(SSL_CIPHER_standard_name(c), iana) == 0)
                    found = c;
            }
        }
        if (found == NULL) {
            rc = keel_config_error(m, "ciphers", "unknown cipher suite '%.*s'", (int)len, p);
        } else if (is_tls13(found)) {
            rc = append(&ko_cfg.ciphers13, iana, strlen(iana));
        } else {
            const char *name = SSL_CIPHER_get_name(found);
            rc = append(&ko_cfg.ciphers12, name, strlen(name));
        }
        p += len;
    }
    SSL_CTX_free(all);
    if (rc == KEEL_OK && ko_cfg.ciphers12 == NULL && ko_cfg.ciphers13 == NULL)
        rc = keel_config_error(m, "ciphers", "empty list");
    /* Only TLS 1.3 suites named: no TLS 1.2 suite, and the reverse. */
    if (rc == KEEL_OK && ko_cfg.ciphers12 == NULL)
        rc = append(&ko_cfg.ciphers12, "", 0);
    if (rc == KEEL_OK && ko_cfg.ciphers13 == NULL)
        rc = append(&ko_cfg.ciphers13, "", 0);
    return rc;
}

/* `curves`: mod_tls's names and their OpenSSL / NIST aliases. */
static int parse_curves(keel_module *m, const char *value)
{
    static const char *const alias[][2] = {
        {"x25519", "X25519"},    {"x448", "X448"},       {"secp256r1", "P-256"},
        {"prime256v1", "P-256"}, {"secp384r1", "P-384"}, {"secp521r1", "P-521"},
        {"p-256", "P-256"},      {"p-384", "P-384"},     {"p-521", "P-521"},
    };
    const char *p = value;
    int n = 0;
    while (*p) {
        p += strspn(p, ", \t:");
        size_t len = strcspn(p, ", \t:");
        if (len == 0)
            break;
        const char *name = NULL;
        for (size_t i = 0; i < sizeof alias / sizeof *alias && name == NULL; i++)
            if (strlen(alias[i][0]) == len && OPENSSL_strncasecmp(alias[i][0], p, len) == 0)
                name = alias[i][1];
        if (name == NULL)
            return keel_config_error(m, "curves", "unknown or unsupported curve '%.*s'", (int)len,
                                     p);
        if (append(&ko_cfg.groups, name, strlen(name)) != KEEL_OK)
            return KEEL_ERR_NOMEM;
        n++;
        p += len;
    }
    return n > 0 ? KEEL_OK : keel_config_error(m, "curves", "empty list");
}

/* A list's own ticket keys: a ticket issued under another list's
 * certificates does not open here (tickets.c). */
static int list_tickets(keel_module *m, ko_list *list)
{
    if (ko_cfg.c.tickets_on && (list->tickets = ko_tickets_new(ko_cfg.c.ticket_lifetime_s)) == NULL)
        return keel_config_error(m, "session_tickets", "cannot set up ticket keys");
    return KEEL_OK;
}

static int read_config(keel_module *m)
{
    const kt_section *sec = keel_module_config(m);
    char library[64];
    snprintf(library, sizeof library, "OpenSSL %s", OpenSSL_version(OPENSSL_VERSION_STRING));
    int rc = kt_keys_read(m, "openssl", 3, library, &ko_cfg.c);
    if (rc != KEEL_OK)
        return rc;
    if (*sec->ciphers != '\0') {
        if ((rc = parse_ciphers(m, sec->ciphers)) != KEEL_OK)
            return rc;
    } else if (append(&ko_cfg.ciphers12, default_ciphers12, sizeof default_ciphers12 - 1) ||
               append(&ko_cfg.ciphers13, default_ciphers13, sizeof default_ciphers13 - 1)) {
        return KEEL_ERR_NOMEM;
    }
    /* X25519 first (RFC 7748: fast and hard to get wrong), then the NIST
     * curves certificates use. */
    if ((rc = parse_curves(m, sec->curves)) != KEEL_OK)
        return rc;
    if (ko_cfg.c.verify_client != KT_VERIFY_OFF) {
        if ((ko_cfg.client_ca = X509_STORE_new()) == NULL)
            return KEEL_ERR_NOMEM;
        if ((rc = ko_ca_load(m, "client_ca", ko_cfg.c.client_ca, ko_cfg.client_ca,
                             &ko_cfg.client_ca_names)) != KEEL_OK)
            return rc;
    }
    /* A context without certificates, built now so that what OpenSSL
     * refuses (a suite or group list) stops start-up, under keel -t too. */
    if ((ko_cfg.bare = ko_server_ctx()) == NULL) {
        char why[200];
        return keel_config_error(m, "ciphers", "OpenSSL refused the settings (%s)",
                                 ko_reason(why, sizeof why));
    }
    if ((rc = ko_list_load(m, &sec->cert, &ko_cfg.certs, 0)) != KEEL_OK ||
        (rc = list_tickets(m, &ko_cfg.certs)) != KEEL_OK)
        return rc;
    return ko_client_ctx(m);
}

/* ---- certificates per site ------------------------------------------------------ */

const ko_list *ko_site_list(const kt_section *scope)
{
    return kt_site_find(scope);
}

/* A scope's own `tls.cert` list (kt_sites_read), with its own ticket
 * keys. */
static void *site_load(keel_module *m, const kt_section *scope, int *rc)
{
    ko_list *list = malloc(sizeof *list);
    if (list == NULL) {
        *rc = KEEL_ERR_NOMEM;
        return NULL;
    }
    if ((*rc = ko_list_load(m, &scope->cert, list, 1)) != KEEL_OK) {
        free(list);
        return NULL;
    }
    if ((*rc = list_tickets(m, list)) != KEEL_OK) {
        ko_list_free(list);
        free(list);
        return NULL;
    }
    list->items = scope->cert.items;
    return list;
}

static void site_free(void *p)
{
    ko_list_free(p);
    free(p);
}

/* ---- suite names for the service ------------------------------------------------ */

/* keel/tls.h documents mbedTLS's spelling of the IANA name; the table is
 * built in load for every suite the contexts enable, read-only after. */
static struct cipher_name {
    const SSL_CIPHER *cipher;
    char name[64];
} * cipher_names;
static size_t ncipher_names;

static int build_cipher_names(void)
{
    STACK_OF(SSL_CIPHER) *sk = SSL_CTX_get_ciphers(ko_cfg.bare);
    int n = sk_SSL_CIPHER_num(sk);
    cipher_names = calloc(n > 0 ? (size_t)n : 1, sizeof *cipher_names);
    if (cipher_names == NULL)
        return KEEL_ERR_NOMEM;
    for (int i = 0; i < n; i++) {
        const SSL_CIPHER *c = sk_SSL_CIPHER_value(sk, i);
        const char *iana = SSL_CIPHER_standard_name(c);
        struct cipher_name *e = &cipher_names[ncipher_names++];
        e->cipher = c;
        size_t k = 0;
        if (is_tls13(c) && strncmp(iana, "TLS_", 4) == 0) {
            memcpy(e->name, "TLS1-3-", 7);
            k = 7;
            iana += 4;
        }
        for (; *iana && k < sizeof e->name - 1; iana++)
            e->name[k++] = *iana == '_' ? '-' : *iana;
        e->name[k] = '\0';
    }
    return KEEL_OK;
}

const char *ko_cipher_name(const SSL_CIPHER *cipher)
{
    for (size_t i = 0; i < ncipher_names; i++)
        if (cipher_names[i].cipher == cipher)
            return cipher_names[i].name;
    return cipher != NULL ? SSL_CIPHER_standard_name(cipher) : NULL;
}

/* ---- life cycle -------------------------------------------------------------------- */

static void release_all(void)
{
    ko_list_free(&ko_cfg.certs);
    kt_sites_free(site_free);
    SSL_CTX_free(ko_cfg.bare);
    SSL_CTX_free(ko_cfg.client);
    X509_STORE_free(ko_cfg.client_ca);
    sk_X509_NAME_pop_free(ko_cfg.client_ca_names, X509_NAME_free);
    free(ko_cfg.ciphers12);
    free(ko_cfg.ciphers13);
    free(ko_cfg.groups);
    free(cipher_names);
    cipher_names = NULL;
    ncipher_names = 0;
    ko_bio_free();
    ko_ocsp_free();
    OPENSSL_cleanse(&ko_cfg, sizeof ko_cfg);
}

static const char *version_name(int v)
{
    return v == 3 ? "1.3" : "1.2";
}

static int tls_load(keel_module *m)
{
    kt_self = m;
    memset(&ko_cfg, 0, sizeof ko_cfg);
    int rc = ko_bio_init();
    if (rc == KEEL_OK)
        rc = read_config(m);
    if (rc == KEEL_OK && (rc = build_cipher_names()) == KEEL_OK &&
        (rc = kt_metrics_register(m, &kt_mx)) == KEEL_OK &&
        (rc = keel_transport_register(m, &kt_transport)) == KEEL_OK &&
        (rc = kt_service_publish(m)) == KEEL_OK && (rc = kt_sites_read(m, site_load)) == KEEL_OK)
        rc = ko_ocsp_register(m);
    if (rc != KEEL_OK) {
        release_all();
        return rc;
    }
    keel_log(m, KEEL_LOG_INFO, "tls listeners offer TLS %s-%s (OpenSSL %s, %zu name group(s))",
             version_name(ko_cfg.c.min_version), version_name(ko_cfg.c.max_version),
             OpenSSL_version(OPENSSL_VERSION_STRING), ko_cfg.certs.n);
    char ktls[300];
#ifdef OPENSSL_NO_KTLS
    ko_ktls_describe(ko_cfg.c.ktls, 0, ktls, sizeof ktls);
#else
    ko_ktls_describe(ko_cfg.c.ktls, 1, ktls, sizeof ktls);
#endif
    keel_log(m, KEEL_LOG_INFO, "kTLS: %s", ktls);
    return KEEL_OK;
}

static int tls_start(keel_module *m, keel_worker *worker, void *state)
{
    (void)m;
    ko_worker *w = state;
    w->worker = worker;
    int rc = kt_buffers_alloc(&w->stage, &w->plain, KT_STAGE_SIZE);
    if (rc == KEEL_OK && (w->gather = malloc(KO_GATHER_SIZE)) == NULL) {
        kt_buffers_free(&w->stage, &w->plain, KT_STAGE_SIZE);
        rc = KEEL_ERR_NOMEM;
    }
    if (rc == KEEL_OK)
        ko_ocsp_start(worker);
    return rc;
}

static void tls_stopping(keel_module *m, keel_worker *worker, void *state)
{
    (void)m;
    (void)state;
    ko_ocsp_stopping(worker);
}

static void tls_stop(keel_module *m, keel_worker *worker, void *state)
{
    (void)m;
    ko_worker *w = state;
    ko_ocsp_stopping(worker);
    ko_offers_free(&w->server_offers);
    ko_offers_free(&w->client_offers);
    kt_buffers_free(&w->stage, &w->plain, KT_STAGE_SIZE);
    free(w->gather); /* ciphertext only */
    w->gather = NULL;
}

static void tls_unload(keel_module *m)
{
    (void)m;
    release_all();
}

KEEL_MODULE(tls, .version = "1.0.0", .worker_state_size = sizeof(ko_worker), .load = tls_load,
            .start = tls_start, .stop = tls_stop, .stopping = tls_stopping, .unload = tls_unload,
            .config = &kt_schema);
