/* keel/tls.h — what the `tls` module tells handlers about a connection.
 *
 * The tls module (mbedTLS) publishes this table as the service "tls"; a
 * handler or protocol module asks it whether a connection is encrypted, with
 * which version and cipher suite, which ALPN protocol and server name the
 * client chose, and whose client certificate was verified, without linking
 * mbedTLS. The pattern is keel/deflate.h's: a versioned table looked up once
 * in load, behind call wrappers.
 *
 *     #include <keel/keel.h>
 *     #include <keel/tls.h>
 *
 *     KEEL_TLS_DEFINE   // once per module, at file scope
 *
 *     static int my_load(keel_module *m)
 *     {
 *         keel_tls_bind(m);   // list "?tls" in dependencies; absent: no TLS at all
 *         ...
 *     }
 *
 *     static int handler(keel_request *req, keel_response *res, void *ud)
 *     {
 *         keel_conn *conn = keel_request_conn(req);
 *         char who[256];
 *         if (keel_tls_is_tls(conn) &&
 *             keel_tls_peer_subject(conn, who, sizeof who) == KEEL_OK)
 *             ...   // a client certificate that chains to client_ca
 *     }
 *
 * Without a tls module loaded (keel_tls_bind failed) every wrapper answers
 * as for a plain TCP connection: 0, NULL or KEEL_ERR_NOTFOUND.
 *
 * Threads: the connection's worker, as for every keel_conn function. The
 * strings returned are valid until the connection closes (on_close).
 */
#ifndef KEEL_TLS_H
#define KEEL_TLS_H

#include "keel.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KEEL_TLS_SERVICE     "tls"
#define KEEL_TLS_API_VERSION 1

/* The service table, published as KEEL_TLS_SERVICE. Grows at the end with
 * KEEL_TLS_API_VERSION bumped; `size` says how much of it the publishing
 * module has. */
typedef struct keel_tls_api {
    size_t size;

    /* 1 if the connection runs through the tls transport (accepted on a
     * `tls` listener or connected with transport "tls"), else 0. */
    int (*is_tls)(keel_conn *conn);

    /* The protocol version once the handshake is done: "TLSv1.2",
     * "TLSv1.3"; NULL for a connection that is not TLS or still
     * handshaking. */
    const char *(*version)(keel_conn *conn);

    /* The cipher suite, in mbedTLS's spelling of the IANA name
     * ("TLS-ECDHE-ECDSA-WITH-AES-128-GCM-SHA256"); NULL as for version. */
    const char *(*cipher)(keel_conn *conn);

    /* The ALPN protocol id negotiated (RFC 7301: "http/1.1", "h2"); NULL
     * if none was. */
    const char *(*alpn)(keel_conn *conn);

    /* The server name the client asked for (SNI, RFC 6066 3), as sent
     * (lowercase is not enforced); for an outbound connection the name
     * keel sent. NULL if none. */
    const char *(*server_name)(keel_conn *conn);

    /* Writes the subject of the client's certificate, if the client sent
     * one and it was verified against [tls] client_ca, as a distinguished
     * name ("CN=alice, O=Example"), NUL-terminated; for an outbound
     * connection, the server's verified certificate. KEEL_ERR_NOTFOUND if
     * there is none (not TLS, no certificate, or one that did not verify
     * under verify_client = optional), KEEL_ERR_INVAL if buf is too small
     * (truncated, still NUL-terminated). */
    int (*peer_subject)(keel_conn *conn, char *buf, size_t size);

    /* 1 if the handshake resumed an earlier session (a session ticket,
     * RFC 5077 / RFC 8446 2.2), else 0. */
    int (*resumed)(keel_conn *conn);
} keel_tls_api;

/* ---- Call wrappers ---------------------------------------------------------
 * KEEL_TLS_DEFINE defines the module's private pointer to the table (once
 * per module, in one source file); keel_tls_bind() fills it in load. */

#ifdef __cplusplus
#define KEEL_TLS_DEFINE                                                                            \
    extern "C" {                                                                                   \
    KEEL_HIDDEN const keel_tls_api *keel__tls = 0;                                                 \
    }
#else
#define KEEL_TLS_DEFINE KEEL_HIDDEN const keel_tls_api *keel__tls = 0;
#endif

extern KEEL_HIDDEN const keel_tls_api *keel__tls;

/* Looks the service up (main thread, from load). KEEL_ERR_NOTFOUND if no
 * tls module is loaded before the caller (name "?tls" in the descriptor's
 * dependencies), KEEL_ERR_ABI if it is older than this header. */
static inline int keel_tls_bind(keel_module *module)
{
    const void *table = 0;
    int rc = keel_service_lookup(module, KEEL_TLS_SERVICE, KEEL_TLS_API_VERSION, &table, 0);
    if (rc == KEEL_OK)
        keel__tls = (const keel_tls_api *)table;
    return rc;
}

/* 1 once keel_tls_bind succeeded. */
static inline int keel_tls_available(void)
{
    return keel__tls != 0;
}

static inline int keel_tls_is_tls(keel_conn *conn)
{
    return keel__tls ? keel__tls->is_tls(conn) : 0;
}
static inline const char *keel_tls_version(keel_conn *conn)
{
    return keel__tls ? keel__tls->version(conn) : 0;
}
static inline const char *keel_tls_cipher(keel_conn *conn)
{
    return keel__tls ? keel__tls->cipher(conn) : 0;
}
static inline const char *keel_tls_alpn(keel_conn *conn)
{
    return keel__tls ? keel__tls->alpn(conn) : 0;
}
static inline const char *keel_tls_server_name(keel_conn *conn)
{
    return keel__tls ? keel__tls->server_name(conn) : 0;
}
static inline int keel_tls_peer_subject(keel_conn *conn, char *buf, size_t size)
{
    if (keel__tls == 0) {
        if (buf != 0 && size > 0)
            buf[0] = '\0';
        return KEEL_ERR_NOTFOUND;
    }
    return keel__tls->peer_subject(conn, buf, size);
}
static inline int keel_tls_resumed(keel_conn *conn)
{
    return keel__tls ? keel__tls->resumed(conn) : 0;
}

#ifdef __cplusplus
}
#endif

#endif
