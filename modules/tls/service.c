/* service.c — mbedTLS's answers for the "tls" service (include/keel/tls.h,
 * the table in keys.c): what handlers may know about a connection's TLS.
 * Every function answers for connections of any transport (0 / NULL for
 * the others). */
#include "kt.h"

#include <string.h>

static kt_session *open_session(keel_conn *conn)
{
    kt_session *s = kt_session_of(conn);
    return s != NULL && (s->state == KT_OPEN || s->state == KT_CLOSED) ? s : NULL;
}

int kt_svc_is_tls(keel_conn *conn)
{
    return kt_session_of(conn) != NULL;
}

const char *kt_svc_version(keel_conn *conn)
{
    kt_session *s = open_session(conn);
    return s ? mbedtls_ssl_get_version(&s->ssl) : NULL;
}

const char *kt_svc_cipher(keel_conn *conn)
{
    kt_session *s = open_session(conn);
    return s ? mbedtls_ssl_get_ciphersuite(&s->ssl) : NULL;
}

const char *kt_svc_alpn(keel_conn *conn)
{
    kt_session *s = open_session(conn);
    return s ? mbedtls_ssl_get_alpn_protocol(&s->ssl) : NULL;
}

const char *kt_svc_server_name(keel_conn *conn)
{
    kt_session *s = kt_session_of(conn);
    return s ? s->server_name : NULL;
}

const char *kt_svc_peer_subject(keel_conn *conn)
{
    kt_session *s = open_session(conn);
    return s ? s->peer_subject : NULL;
}

int kt_svc_resumed(keel_conn *conn)
{
    kt_session *s = open_session(conn);
    return s != NULL && s->resumed;
}
