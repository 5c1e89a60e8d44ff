/* transport.c — the `tls` transport, the same on both backends (keys.h):
 * one session per connection, fed from the core's reads and writing
 * through the core's output queue; the library's part is the backend's
 * kt_be_* functions (mod_tls's session.c on mbedTLS, mod_tls_openssl's on
 * OpenSSL).
 *
 * Input: on_read hands the raw bytes to the library through its BIO
 * (which serves exactly those bytes, kt_take_input, then "want read": the
 * library keeps a partial record itself), drives the handshake, then
 * decrypts records and passes the plaintext up with
 * keel_transport_deliver. Nothing is kept here between reads.
 *
 * Output: on_write hands the protocol's buffers to kt_be_write, which
 * gathers them into full records (16 KiB of plaintext, RFC 8446 5.1) so
 * that a head and a small body become one record, and whose BIO copies
 * the ciphertext into the core's queue (keel_transport_send), which never
 * refuses: back-pressure is the core's (write_high_water counts these
 * bytes, and a keel_conn_write callback waits until the queue is down to
 * 64 KiB).
 *
 * The protocol is opened only after the handshake (on_open returns
 * KEEL_TRANSPORT_DEFER), so that ALPN can choose it and so that a client
 * that never completes a handshake never reaches it; the handshake has
 * its own deadline (handshake_timeout), which the core enforces and no
 * byte renews: a ClientHello trickled a byte at a time ends at it, and a
 * worker at max_connections may close such a connection to admit a new
 * one (keel_conn_set_deadline). */
#include "keys.h"

#include <stdlib.h>
#include <string.h>

kt_metrics kt_mx;

kt_base *kt_base_of(keel_conn *conn)
{
    const char *t = keel_conn_transport_name(conn);
    return t != NULL && strcmp(t, kt_transport.name) == 0 ? keel_conn_transport_data(conn) : NULL;
}

size_t kt_take_input(kt_base *b, void *buf, size_t len)
{
    if (len > b->in_len)
        len = b->in_len;
    if (len == 0)
        return 0; /* in is NULL between reads */
    memcpy(buf, b->in, len);
    b->in += len;
    b->in_len -= len;
    return len;
}

int kt_set_server_name(kt_base *b, const char *name, size_t len)
{
    char *copy = malloc(len + 1);
    if (copy == NULL)
        return KEEL_ERR_NOMEM;
    memcpy(copy, name, len);
    copy[len] = '\0';
    free(b->server_name);
    b->server_name = copy;
    return KEEL_OK;
}

/* ---- the protocol after the handshake ------------------------------------------- */

const char *kt_alpn_protocol(const char *id)
{
    /* RFC 7301 6's registry ids to keel's protocol names; any other id
     * names a protocol registered under the same name. */
    if (strcmp(id, "http/1.1") == 0 || strcmp(id, "http/1.0") == 0)
        return "http1";
    return id;
}

int kt_open_protocol(keel_conn *conn, const char *alpn_id)
{
#ifdef KEEL_TRANSPORT_DEFER
    /* NULL: the listener's protocol (or the one keel_conn_connect named);
     * an outbound connection keeps the protocol its caller chose. */
    const char *name =
        alpn_id != NULL && keel_conn_remote_host(conn) == NULL ? kt_alpn_protocol(alpn_id) : NULL;
    int rc = keel_transport_open_protocol(conn, name);
    if (rc == KEEL_ERR_NOTFOUND && name != NULL)
        rc = keel_transport_open_protocol(conn, NULL); /* unloaded since: the default */
    return rc;
#else
    /* This core opens the protocol with the transport (no ALPN choice). */
    (void)conn;
    (void)alpn_id;
    return KEEL_OK;
#endif
}

/* ---- plaintext held until the handshake ends -------------------------------------- */

/* Plaintext a protocol wrote before the handshake ended (only where the
 * core opens the protocol with the transport): kept until it can go. */
static int hold(kt_base *b, const keel_buf *bufs, size_t nbufs)
{
    for (size_t i = 0; i < nbufs; i++) {
        if (b->pending_len + bufs[i].len > b->pending_cap) {
            size_t cap = b->pending_cap ? b->pending_cap : 1024;
            while (cap < b->pending_len + bufs[i].len)
                cap *= 2;
            char *grown = realloc(b->pending, cap);
            if (grown == NULL)
                return KEEL_ERR_NOMEM;
            b->pending = grown;
            b->pending_cap = cap;
        }
        memcpy(b->pending + b->pending_len, bufs[i].base, bufs[i].len);
        b->pending_len += bufs[i].len;
    }
    return KEEL_OK;
}

static void drop_pending(kt_base *b)
{
    if (b->pending != NULL)
        kt_be_wipe(b->pending, b->pending_cap);
    free(b->pending);
    b->pending = NULL;
    b->pending_len = b->pending_cap = 0;
}

void kt_session_free(kt_base *b)
{
    kt_be_free(b);
    drop_pending(b);
    free(b->server_name);
    free(b->peer_subject);
    free(b);
}

/* ---- the handshake ------------------------------------------------------------------ */

static int handshake_done(kt_base *b)
{
    keel_worker *worker = keel_conn_worker(b->conn);
    b->state = KT_OPEN;
    kt_be_opened(b);
    keel_metric_add(worker, b->client ? kt_mx.hs_client_ok : kt_mx.hs_ok, 1);
    if (b->resumed)
        keel_metric_add(worker, kt_mx.resumed, 1);
    /* Back to the server's idle_timeout (the protocol may set its own). */
    keel_conn_set_deadline(b->conn, 0);
    keel_conn_set_timeout(b->conn, 0);
    if (keel_log_enabled(KEEL_LOG_DEBUG))
        keel_log(kt_self, KEEL_LOG_DEBUG, "connection %llu: %s %s%s alpn=%s sni=%s",
                 (unsigned long long)keel_conn_id(b->conn), b->version, b->cipher,
                 b->resumed ? " resumed" : "", b->alpn ? b->alpn : "-", b->sni ? b->sni : "-");
    if (b->deferred) {
        b->deferred = 0;
        int rc = kt_open_protocol(b->conn, b->alpn);
        if (rc < 0)
            return rc;
    }
    if (b->pending_len > 0) {
        keel_buf held = {b->pending, b->pending_len};
        int rc = kt_be_write(b, &held, 1);
        drop_pending(b);
        return rc;
    }
    return KEEL_OK;
}

static void handshake_failed(kt_base *b, int cert_rejected, const char *why)
{
    keel_worker *worker = keel_conn_worker(b->conn);
    b->state = KT_FAILED;
    keel_metric_add(worker, b->client ? kt_mx.hs_client_failed : kt_mx.hs_failed, 1);
    if (cert_rejected) {
        keel_log(kt_self, KEEL_LOG_WARN, "%s: certificate not accepted: %s",
                 b->server_name ? b->server_name : "?", why);
    } else if (keel_log_enabled(KEEL_LOG_DEBUG)) {
        char peer[80] = "?";
        keel_conn_peer_name(b->conn, peer, sizeof peer);
        keel_log(kt_self, KEEL_LOG_DEBUG, "connection %llu from %s: handshake failed: %s",
                 (unsigned long long)keel_conn_id(b->conn), peer, why);
    }
    drop_pending(b);
    /* An orderly close lets the alert the library queued leave before the FIN. */
    keel_conn_close(b->conn);
}

/* Runs the handshake as far as the input allows. */
static int drive_handshake(kt_base *b)
{
    char why[256];
    int rc = kt_be_handshake(b, why, sizeof why);
    if (rc == KT_HS_DONE)
        return handshake_done(b);
    if (rc != KT_HS_AGAIN)
        handshake_failed(b, rc == KT_HS_CERT_REJECTED, why);
    return KEEL_OK;
}

/* Plain HTTP on a TLS port gets a 400 (keys.c). The answer goes out as
 * it is, the connection closes behind it (the core lingers, so the
 * unread request does not reset it). */
static void refuse_plain_http(kt_base *b)
{
    b->state = KT_FAILED;
    keel_metric_add(keel_conn_worker(b->conn), kt_mx.hs_failed, 1);
    if (keel_log_enabled(KEEL_LOG_DEBUG)) {
        char peer[80] = "?";
        keel_conn_peer_name(b->conn, peer, sizeof peer);
        keel_log(kt_self, KEEL_LOG_DEBUG,
                 "connection %llu from %s: plain HTTP on a TLS port: answered 400",
                 (unsigned long long)keel_conn_id(b->conn), peer);
    }
    keel_transport_send(b->conn, kt_plain_http_answer, kt_plain_http_answer_len);
    drop_pending(b);
    keel_conn_close(b->conn);
}

/* ---- the transport's callbacks ------------------------------------------------------ */

static int on_open(keel_conn *conn)
{
    int rc = KEEL_OK;
    kt_base *b = kt_be_new(conn, keel_conn_remote_host(conn), &rc);
    if (b == NULL)
        return rc;
    keel_conn_set_transport_data(conn, b);
#ifdef KEEL_TRANSPORT_DEFER
    b->deferred = 1;
#endif
    if (b->client) {
        /* The client speaks first: the ClientHello leaves now. */
        drive_handshake(b);
        if (b->state == KT_FAILED) {
            keel_conn_set_transport_data(conn, NULL);
            kt_session_free(b);
            return KEEL_ERR_IO;
        }
    }
#ifdef KEEL_TRANSPORT_DEFER
    return KEEL_TRANSPORT_DEFER;
#else
    return KEEL_OK;
#endif
}

static int on_read(keel_conn *conn, const char *data, size_t len)
{
    kt_base *b = keel_conn_transport_data(conn);
    if (b->state == KT_FAILED || b->state == KT_CLOSED || b->peer_done)
        return KEEL_OK; /* nothing more is read from this peer */
    if (b->state == KT_HANDSHAKE && !b->client && !b->first_read_seen) {
        b->first_read_seen = 1;
        if (kt_looks_like_http(data, len)) {
            refuse_plain_http(b);
            return KEEL_OK;
        }
    }
    b->in = (const unsigned char *)data;
    b->in_len = len;
    int rc = KEEL_OK;
    int handshaking = b->state == KT_HANDSHAKE;
    if (handshaking)
        rc = drive_handshake(b);
    size_t delivered = 0;
    /* The handshake just ended on the last of the input (the client's
     * Finished, nothing behind it): a read would only say "want read". */
    int input_left = !handshaking || b->state != KT_OPEN || b->in_len > 0 || kt_be_pending(b);
    while (input_left && rc == KEEL_OK && b->state == KT_OPEN) {
        char why[256];
        int n = kt_be_read(b, b->plain, KT_STAGE_SIZE, why, sizeof why);
        if (n > 0) {
            delivered += (size_t)n;
            rc = keel_transport_deliver(conn, b->plain, (size_t)n);
            /* All the input taken and nothing held: another read would
             * only say "want read" (a request in one record: one call). */
            if (b->in_len == 0 && !kt_be_pending(b))
                break;
            continue;
        }
        if (n == KT_READ_AGAIN)
            break;
        if (n == KT_READ_END) {
            /* The peer's close_notify (RFC 8446 6.1): no more input. The
             * TCP FIN that follows tells the protocol (on_eof). */
            b->peer_done = 1;
            break;
        }
        if (keel_log_enabled(KEEL_LOG_DEBUG))
            keel_log(kt_self, KEEL_LOG_DEBUG, "connection %llu: %s",
                     (unsigned long long)keel_conn_id(conn), why);
        rc = KEEL_ERR_PROTOCOL;
    }
    b->in = NULL;
    b->in_len = 0;
    kt_be_wipe(b->plain, delivered < KT_STAGE_SIZE ? delivered : KT_STAGE_SIZE);
    kt_be_read_done(b, len, handshaking, rc);
    return rc;
}

static int on_write(keel_conn *conn, const keel_buf *bufs, size_t nbufs)
{
    kt_base *b = keel_conn_transport_data(conn);
    if (b->state == KT_HANDSHAKE)
        return hold(b, bufs, nbufs);
    if (b->state != KT_OPEN)
        return KEEL_ERR_CLOSED;
    return kt_be_write(b, bufs, nbufs);
}

static void on_shutdown(keel_conn *conn)
{
    kt_base *b = keel_conn_transport_data(conn);
    if (b == NULL || b->state != KT_OPEN)
        return;
    /* close_notify (RFC 8446 6.1, RFC 5246 7.2.1): the peer can tell the
     * end of our data from a truncation. */
    kt_be_close_notify(b);
    b->state = KT_CLOSED;
}

static void on_close(keel_conn *conn)
{
    kt_base *b = keel_conn_transport_data(conn);
    if (b == NULL)
        return;
    keel_conn_set_transport_data(conn, NULL);
    kt_session_free(b);
}

const keel_transport kt_transport = {
    .size = sizeof(keel_transport),
    .name = "tls",
    .on_open = on_open,
    .on_read = on_read,
    .on_write = on_write,
    .on_shutdown = on_shutdown,
    .on_close = on_close,
    .describe = kt_be_describe,
};

/* ---- the tls service's answers (the table is keys.c's) ------------------------------- *
 * Every function answers for connections of any transport (0 / NULL for
 * the others). */

/* The session whose handshake is done, or one of none (all NULL and 0). */
static const kt_base *open_session(keel_conn *conn)
{
    static const kt_base none;
    const kt_base *b = kt_base_of(conn);
    return b != NULL && (b->state == KT_OPEN || b->state == KT_CLOSED) ? b : &none;
}

int kt_svc_is_tls(keel_conn *conn)
{
    return kt_base_of(conn) != NULL;
}

const char *kt_svc_version(keel_conn *conn)
{
    return open_session(conn)->version;
}

const char *kt_svc_cipher(keel_conn *conn)
{
    return open_session(conn)->cipher;
}

const char *kt_svc_alpn(keel_conn *conn)
{
    return open_session(conn)->alpn;
}

const char *kt_svc_server_name(keel_conn *conn)
{
    const kt_base *b = kt_base_of(conn);
    return b == NULL ? NULL : b->client ? b->server_name : b->sni;
}

const char *kt_svc_peer_subject(keel_conn *conn)
{
    return open_session(conn)->peer_subject;
}

int kt_svc_resumed(keel_conn *conn)
{
    return open_session(conn)->resumed;
}
