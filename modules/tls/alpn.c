/* alpn.c — the mbedtls_ssl_config objects, with the ALPN (RFC 7301) list
 * each offers (the protocol opened after the handshake: transport.c).
 *
 * mbedTLS keeps the RNG and the ALPN list in the config, not in the
 * connection, and a config is not thread-safe to share with an RNG in it:
 * so each worker builds its own, one per distinct ALPN offer (a listener's
 * `alpn=` option, [tls] alpn, or client_alpn), on first use. There are as
 * many as there are distinct offers in the config (times the listeners
 * whose default site has certificates of its own): a handful. Everything
 * they point to (certificates, keys, CAs, ticket keys, suites) is the
 * module's shared, read-only state. */
#include "kt.h"

#include <stdlib.h>
#include <string.h>

int kt_conf_setup(mbedtls_ssl_config *conf, int client, kt_rng *rng, const kt_site_list *dflt)
{
    int rc =
        mbedtls_ssl_config_defaults(conf, client ? MBEDTLS_SSL_IS_CLIENT : MBEDTLS_SSL_IS_SERVER,
                                    MBEDTLS_SSL_TRANSPORT_STREAM, MBEDTLS_SSL_PRESET_DEFAULT);
    if (rc != 0)
        return KEEL_ERR_NOMEM;
    mbedtls_ssl_conf_rng(conf, kt_rng_random, rng);
    kt_conf_versions(conf, kt_cfg.min_version, kt_cfg.max_version);
    mbedtls_ssl_conf_ciphersuites(conf, kt_ciphers());
#if KT_MBEDTLS3
    mbedtls_ssl_conf_groups(conf, kt_cfg.groups);
#else
    mbedtls_ssl_conf_curves(conf, kt_cfg.curves);
#endif
#if defined(MBEDTLS_SSL_RENEGOTIATION)
    /* Renegotiation is off: it was the door of the triple-handshake and
     * renegotiation-injection attacks (RFC 5746) and a cheap way to make a
     * server compute handshakes; TLS 1.3 removed it (RFC 8446 1.2). */
    mbedtls_ssl_conf_renegotiation(conf, MBEDTLS_SSL_RENEGOTIATION_DISABLED);
#endif
    if (client)
        return kt_client_conf(conf);

    /* What a handshake without SNI gets: the certificates of the site a
     * request without Host would get ([site default]'s, or whichever the
     * listener's rules make the default), when it has its own, all of
     * them (the suite chooses between RSA and ECDSA); else [tls]'s first.
     * SNI chooses others. */
    if (dflt != NULL) {
        for (size_t i = 0; i < dflt->certs.n; i++)
            if (mbedtls_ssl_conf_own_cert(conf, &dflt->certs.v[i].chain, &dflt->certs.v[i].key) !=
                0)
                return KEEL_ERR_NOMEM;
    } else if (kt_cfg.certs.n > 0) {
        kt_cert *c = &kt_cfg.certs.v[0];
        if (mbedtls_ssl_conf_own_cert(conf, &c->chain, &c->key) != 0)
            return KEEL_ERR_NOMEM;
    }
    if (kt_cfg.certs.n > 0 || kt_site_count() > 0)
        mbedtls_ssl_conf_sni(conf, kt_certs_sni, &kt_cfg.certs);
    kt_tickets_conf(conf);
    if (kt_cfg.verify_client != KT_VERIFY_OFF) {
        mbedtls_ssl_conf_authmode(conf, kt_cfg.verify_client == KT_VERIFY_REQUIRED
                                            ? MBEDTLS_SSL_VERIFY_REQUIRED
                                            : MBEDTLS_SSL_VERIFY_OPTIONAL);
        mbedtls_ssl_conf_ca_chain(conf, &kt_cfg.client_ca, NULL);
    } else {
        mbedtls_ssl_conf_authmode(conf, MBEDTLS_SSL_VERIFY_NONE);
    }
    return KEEL_OK;
}

/* Splits "h2, http/1.1" into ids (',' ':' ';' or spaces between them: a
 * `listen` line splits its words at commas, so a listener writes
 * alpn=h2:http/1.1; no registered ALPN id contains these characters), keeping (on the server) only
 * those whose protocol is loaded, so that a client is never promised a protocol keel cannot speak.
 */
static int parse_offer(kt_conf *cf, int client, const char *offer)
{
    size_t len = strlen(offer), max = 1;
    for (size_t i = 0; i < len; i++)
        max += strchr(",:; ", offer[i]) != NULL;
    cf->alpn_storage = malloc(len + 1);
    cf->alpn = calloc(max + 1, sizeof *cf->alpn);
    if (cf->alpn_storage == NULL || cf->alpn == NULL)
        return KEEL_ERR_NOMEM;
    memcpy(cf->alpn_storage, offer, len + 1);
    size_t n = 0;
    for (char *p = cf->alpn_storage; *p;) {
        while (*p != '\0' && strchr(",:; ", *p) != NULL)
            *p++ = '\0';
        if (*p == '\0')
            break;
        char *id = p;
        while (*p != '\0' && strchr(",:; ", *p) == NULL)
            p++;
        if (*p)
            *p++ = '\0';
        /* RFC 7301 3.1: ids are 1..255 bytes. */
        if (strlen(id) > 255)
            continue;
#ifdef KEEL_TRANSPORT_DEFER
        if (!client && !keel_protocol_available(kt_self, kt_alpn_protocol(id)))
            continue;
#else
        (void)client;
#endif
        cf->alpn[n++] = id;
    }
    if (n == 0) {
        free(cf->alpn);
        cf->alpn = NULL;
    }
    return KEEL_OK;
}

static void conf_free(kt_conf *cf)
{
    mbedtls_ssl_config_free(&cf->ssl);
    free(cf->key);
    free(cf->alpn);
    free(cf->alpn_storage);
    free(cf);
}

kt_conf *kt_conf_get(kt_worker *w, int client, const char *offer, const kt_site_list *dflt)
{
    kt_conf **list = client ? &w->client_confs : &w->server_confs;
    if (offer == NULL)
        offer = "";
    for (kt_conf *cf = *list; cf != NULL; cf = cf->next)
        if (cf->dflt == dflt && strcmp(cf->key, offer) == 0)
            return cf;
    kt_conf *cf = calloc(1, sizeof *cf);
    if (cf == NULL)
        return NULL;
    mbedtls_ssl_config_init(&cf->ssl);
    size_t len = strlen(offer);
    if ((cf->key = malloc(len + 1)) == NULL ||
        kt_conf_setup(&cf->ssl, client, &w->rng, dflt) != KEEL_OK ||
        parse_offer(cf, client, offer) != KEEL_OK) {
        conf_free(cf);
        return NULL;
    }
    memcpy(cf->key, offer, len + 1);
    cf->dflt = dflt;
    if (cf->alpn != NULL && mbedtls_ssl_conf_alpn_protocols(&cf->ssl, cf->alpn) != 0) {
        conf_free(cf);
        return NULL;
    }
    cf->next = *list;
    *list = cf;
    return cf;
}

void kt_confs_free(kt_conf **list)
{
    while (*list != NULL) {
        kt_conf *cf = *list;
        *list = cf->next;
        conf_free(cf);
    }
}
