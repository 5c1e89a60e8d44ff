/* service.c — the "tls" service (include/keel/tls.h): what handlers may
 * know about a connection's TLS. Every function answers for connections
 * of any transport (0 / NULL / KEEL_ERR_NOTFOUND for the others). */
#include "kt.h"

#include <keel/tls.h>

#include <string.h>

static kt_session *open_session(keel_conn *conn)
{
    kt_session *s = kt_session_of(conn);
    return s != NULL && (s->state == KT_OPEN || s->state == KT_CLOSED) ? s : NULL;
}

static int is_tls(keel_conn *conn)
{
    return kt_session_of(conn) != NULL;
}

static const char *version(keel_conn *conn)
{
    kt_session *s = open_session(conn);
    return s ? mbedtls_ssl_get_version(&s->ssl) : NULL;
}

static const char *cipher(keel_conn *conn)
{
    kt_session *s = open_session(conn);
    return s ? mbedtls_ssl_get_ciphersuite(&s->ssl) : NULL;
}

static const char *alpn(keel_conn *conn)
{
    kt_session *s = open_session(conn);
    return s ? mbedtls_ssl_get_alpn_protocol(&s->ssl) : NULL;
}

static const char *server_name(keel_conn *conn)
{
    kt_session *s = kt_session_of(conn);
    return s ? s->server_name : NULL;
}

static int peer_subject(keel_conn *conn, char *buf, size_t size)
{
    kt_session *s = open_session(conn);
    if (buf != NULL && size > 0)
        buf[0] = '\0';
    if (s == NULL || s->peer_subject == NULL)
        return KEEL_ERR_NOTFOUND;
    size_t len = strlen(s->peer_subject);
    if (buf == NULL || size == 0)
        return KEEL_ERR_INVAL;
    if (len >= size) {
        memcpy(buf, s->peer_subject, size - 1);
        buf[size - 1] = '\0';
        return KEEL_ERR_INVAL;
    }
    memcpy(buf, s->peer_subject, len + 1);
    return KEEL_OK;
}

static int resumed(keel_conn *conn)
{
    kt_session *s = open_session(conn);
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

int kt_service_publish(keel_module *m)
{
    return keel_service_publish(m, KEEL_TLS_SERVICE, KEEL_TLS_API_VERSION, &api);
}
