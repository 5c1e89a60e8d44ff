/* service.c — OpenSSL's answers for the "tls" service (include/keel/tls.h,
 * the table in ../tls/keys.c), in mod_tls's spellings ("TLSv1.3",
 * mbedTLS's suite names, "CN=alice, O=Example"). Every function answers
 * for connections of any transport (0 / NULL for the others). */
#include "ko.h"

#include <string.h>

static ko_session *open_session(keel_conn *conn)
{
    ko_session *s = ko_session_of(conn);
    return s != NULL && (s->state == KO_OPEN || s->state == KO_CLOSED) ? s : NULL;
}

int kt_svc_is_tls(keel_conn *conn)
{
    return ko_session_of(conn) != NULL;
}

const char *kt_svc_version(keel_conn *conn)
{
    ko_session *s = open_session(conn);
    return s ? SSL_get_version(s->ssl) : NULL;
}

const char *kt_svc_cipher(keel_conn *conn)
{
    ko_session *s = open_session(conn);
    return s ? ko_cipher_name(SSL_get_current_cipher(s->ssl)) : NULL;
}

const char *kt_svc_alpn(keel_conn *conn)
{
    ko_session *s = open_session(conn);
    return s ? s->alpn : NULL;
}

const char *kt_svc_server_name(keel_conn *conn)
{
    ko_session *s = ko_session_of(conn);
    if (s == NULL)
        return NULL;
    return s->client ? s->server_name : SSL_get_servername(s->ssl, TLSEXT_NAMETYPE_host_name);
}

const char *kt_svc_peer_subject(keel_conn *conn)
{
    ko_session *s = open_session(conn);
    return s ? s->peer_subject : NULL;
}

int kt_svc_resumed(keel_conn *conn)
{
    ko_session *s = open_session(conn);
    return s != NULL && s->resumed;
}
