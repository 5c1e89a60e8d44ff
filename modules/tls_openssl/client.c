/* client.c — outbound connections through tls on OpenSSL (keel_conn_connect
 * with transport "tls"): the server name sent (SNI, RFC 6066 3) and checked
 * against the certificate (RFC 6125 6, RFC 9110 4.3.4), the chain verified
 * against [tls] ca (default: the system's store). A failure ends the
 * handshake before the protocol opens, so the caller's on_error gets
 * KEEL_ERR_IO. */
#include "ko.h"

#include <stdlib.h>
#include <string.h>

int ko_client_ctx(keel_module *m)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (ctx == NULL)
        return KEEL_ERR_NOMEM;
    ko_cfg.client = ctx;
    int min = ko_cfg.c.min_version == 3 ? TLS1_3_VERSION : TLS1_2_VERSION;
    int max = ko_cfg.c.max_version == 3 ? TLS1_3_VERSION : TLS1_2_VERSION;
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
                                 SSL_OP_NO_TICKET); /* nothing keeps sessions for later */
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    if (SSL_CTX_set_min_proto_version(ctx, min) != 1 ||
        SSL_CTX_set_max_proto_version(ctx, max) != 1 ||
        (ko_cfg.ciphers12[0] != '\0' && SSL_CTX_set_cipher_list(ctx, ko_cfg.ciphers12) != 1) ||
        SSL_CTX_set_ciphersuites(ctx, ko_cfg.ciphers13) != 1 ||
        SSL_CTX_set1_groups_list(ctx, ko_cfg.groups) != 1)
        return keel_config_error(m, "ciphers", "OpenSSL refused the outbound settings");
    if (!ko_cfg.c.client_verify) {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
        return KEEL_OK;
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    const char *ca = ko_cfg.c.ca;
    if (strcmp(ca, "none") == 0)
        return KEEL_OK;
    if (*ca != '\0')
        return ko_ca_load(m, "ca", ca, SSL_CTX_get_cert_store(ctx), NULL);
    /* The system's store (the distribution's bundle and hashed directory). */
    if (SSL_CTX_set_default_verify_paths(ctx) != 1)
        keel_log(m, KEEL_LOG_WARN,
                 "no CA bundle found (set [tls] ca): outbound TLS "
                 "connections will fail verification");
    ERR_clear_error();
    return KEEL_OK;
}

int ko_client_setup(ko_session *s, const char *host)
{
    if (kt_set_server_name(&s->b, host, strlen(host)) != KEEL_OK)
        return KEEL_ERR_NOMEM;
    ASN1_OCTET_STRING *ip = a2i_IPADDRESS(host);
    int ok;
    if (ip != NULL) {
        /* RFC 6066 3: no SNI for an address; the certificate must carry it. */
        ASN1_OCTET_STRING_free(ip);
        ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(s->ssl), host);
    } else {
        ok = SSL_set_tlsext_host_name(s->ssl, host) == 1 && SSL_set1_host(s->ssl, host) == 1;
    }
    ERR_clear_error();
    return ok ? KEEL_OK : KEEL_ERR_NOMEM;
}

char *ko_peer_subject(SSL *ssl)
{
    X509 *peer = SSL_get0_peer_certificate(ssl);
    if (peer == NULL || SSL_get_verify_result(ssl) != X509_V_OK)
        return NULL;
    /* "CN=alice, O=Example", in the certificate's order: mod_tls's
     * spelling (mbedtls_x509_dn_gets). */
    BIO *mem = BIO_new(BIO_s_mem());
    if (mem == NULL)
        return NULL;
    char *out = NULL;
    unsigned long flags = XN_FLAG_SEP_CPLUS_SPC | XN_FLAG_FN_SN |
                          (ASN1_STRFLGS_RFC2253 & ~(unsigned long)ASN1_STRFLGS_ESC_MSB);
    if (X509_NAME_print_ex(mem, X509_get_subject_name(peer), 0, flags) >= 0) {
        char *data = NULL;
        long len = BIO_get_mem_data(mem, &data);
        if (len >= 0 && (out = malloc((size_t)len + 1)) != NULL) {
            memcpy(out, data, (size_t)len);
            out[len] = '\0';
        }
    }
    BIO_free(mem);
    return out;
}
