/* service.c — the "tls" service (include/keel/tls.h) on OpenSSL: the same
 * answers as mod_tls's, in the same spellings ("TLSv1.3", mbedTLS's suite
 * names, "CN=alice, O=Example"). Every function answers for connections
 * of any transport (0 / NULL / KEEL_ERR_NOTFOUND for the others). */
#include "ko.h"

#include <keel/tls.h>

#include <string.h>

static ko_session *open_session(keel_conn *conn)
{
    ko_session *s = ko_session_of(conn);
    return s != NULL && (s->state == KO_OPEN || s->state == KO_CLOSED) ? s : NULL;
}

static int is_tls(keel_conn *conn)
{
    return ko_session_of(conn) != NULL;
}

static const char *version(keel_conn *conn)
{
    ko_session *s = open_session(conn);
    return s ? SSL_get_version(s->ssl) : NULL;
}

static const char *cipher(keel_conn *conn)
{
    ko_session *s = open_session(conn);
    return s ? ko_cipher_name(SSL_get_current_cipher(s->ssl)) : NULL;
}

static const char *alpn(keel_conn *conn)
{
    ko_session *s = open_session(conn);
    return s ? s->alpn : NULL;
}

static const char *server_name(keel_conn *conn)
{
    ko_session *s = ko_session_of(conn);
    if (s == NULL)
        return NULL;
    return s->client ? s->server_name : SSL_get_servername(s->ssl, TLSEXT_NAMETYPE_host_name);
}

static int peer_subject(keel_conn *conn, char *buf, size_t size)
{
    ko_session *s = open_session(conn);
    if (buf != NULL && size > 0)
        buf[0] = '\0';
    if (s == NULL || s->peer_subject == NULL)
        return KEEL_ERR_NOTFOUND;
    if (buf == NULL || size == 0)
        return KEEL_ERR_INVAL;
    size_t len = strlen(s->peer_subject);
    size_t n = len < size ? len : size - 1;
    memcpy(buf, s->peer_subject, n);
    buf[n] = '\0';
    return len < size ? KEEL_OK : KEEL_ERR_INVAL;
}

static int resumed(keel_conn *conn)
{
    ko_session *s = open_session(conn);
    return s != NULL && s->resumed;
}

static const keel_tls_api api = {
    .size = sizeof(keel_tls_api),
    .is_tls = is_tls,
    .version = version,
    .cipher = cipher,
    .alpn = alpn,
    .server_name = server_name,
    .peer_subject = peer_subject,
    .resumed = resumed,
};

int ko_service_publish(keel_module *m)
{
    return keel_service_publish(m, KEEL_TLS_SERVICE, KEEL_TLS_API_VERSION, &api);
}
