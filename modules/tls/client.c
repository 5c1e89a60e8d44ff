/* client.c — outbound connections through tls (keel_conn_connect with
 * transport "tls"): the server name sent (SNI, RFC 6066 3) and checked
 * against the certificate (RFC 6125 6, RFC 9110 4.3.4), the chain
 * verified against [tls] ca (default: the system's bundle). A failure
 * ends the handshake before the protocol opens, so the caller's on_error
 * gets KEEL_ERR_IO. */
#include "kt.h"

#include <stdlib.h>
#include <string.h>

int kt_client_conf(mbedtls_ssl_config *conf)
{
    if (kt_cfg.client_verify) {
        mbedtls_ssl_conf_authmode(conf, MBEDTLS_SSL_VERIFY_REQUIRED);
        if (kt_cfg.have_ca)
            mbedtls_ssl_conf_ca_chain(conf, &kt_cfg.ca, NULL);
    } else {
        mbedtls_ssl_conf_authmode(conf, MBEDTLS_SSL_VERIFY_NONE);
    }
#if defined(MBEDTLS_SSL_SESSION_TICKETS)
    /* Nothing here keeps sessions for later, so asking for tickets would
     * only cost the server work. */
    mbedtls_ssl_conf_session_tickets(conf, MBEDTLS_SSL_SESSION_TICKETS_DISABLED);
#endif
    return KEEL_OK;
}

int kt_client_setup(kt_session *s, const char *host)
{
    if (kt_set_server_name(&s->b, host, strlen(host)) != KEEL_OK)
        return KEEL_ERR_NOMEM;
    /* Both the SNI sent and the name the certificate must carry. */
    if (mbedtls_ssl_set_hostname(&s->ssl, host) != 0)
        return KEEL_ERR_NOMEM;
    mbedtls_ssl_set_verify(&s->ssl, kt_verify_cb, s);
    return KEEL_OK;
}

int kt_verify_cb(void *p, mbedtls_x509_crt *crt, int depth, uint32_t *flags)
{
    kt_session *s = p;
    (void)flags; /* judged after the whole chain: handshake_done */
    if (depth != 0 || s->b.peer_subject != NULL)
        return 0;
    char dn[512];
    int n = mbedtls_x509_dn_gets(dn, sizeof dn, KT_CRT_SUBJECT(crt));
    if (n < 0)
        return 0;
    if ((s->b.peer_subject = malloc((size_t)n + 1)) != NULL)
        memcpy(s->b.peer_subject, dn, (size_t)n + 1);
    return 0;
}
