/* session.c — the transport: one mbedtls_ssl_context per connection, fed
 * from the core's reads and writing through the core's output queue.
 *
 * Input: on_read hands the raw bytes to mbedTLS through bio_recv (which
 * serves exactly those bytes, then WANT_READ; mbedTLS keeps a partial
 * record itself), drives the handshake, then decrypts records and passes
 * the plaintext up with keel_transport_deliver. Nothing is kept here
 * between reads.
 *
 * Output: on_write gathers the protocol's buffers into full records
 * (16 KiB of plaintext, RFC 8446 5.1) so that a head and a small body
 * become one record, encrypts, and bio_send copies the ciphertext into the
 * core's queue (keel_transport_send), which never refuses: back-pressure
 * is the core's (write_high_water counts these bytes, and a keel_conn_write
 * callback waits until the queue is down to 64 KiB).
 *
 * The protocol is opened only after the handshake (the transport's on_open
 * returns KEEL_TRANSPORT_DEFER), so that ALPN can choose it and so that a
 * client that never completes a handshake never reaches it; the handshake
 * has its own deadline (handshake_timeout), which the core enforces and no
 * byte renews: a ClientHello trickled a byte at a time ends at it, and a
 * worker at max_connections may close such a connection to admit a new
 * one (keel_conn_set_deadline). */
#include "kt.h"

#include <stdlib.h>
#include <string.h>

/* Set by the ticket parser on this thread when a ticket was accepted:
 * how a handshake learns it resumed (mbedTLS 2.28 has no accessor). */
static _Thread_local int ticket_accepted;
/* The server session whose handshake runs on this thread: the ticket
 * callbacks (tickets.c) take the keys of the certificates it serves. */
static _Thread_local kt_session *handshaking;

void kt_note_ticket_accepted(void)
{
    ticket_accepted = 1;
}

kt_session *kt_handshaking(void)
{
    return handshaking;
}

#define KT_ERR_SEND (-0x0050) /* MBEDTLS_ERR_NET_CONN_RESET */

kt_session *kt_session_of(keel_conn *conn)
{
    const char *t = keel_conn_transport_name(conn);
    return t != NULL && strcmp(t, kt_transport.name) == 0 ? keel_conn_transport_data(conn) : NULL;
}

/* ---- the BIO ------------------------------------------------------------------ */

static int bio_send(void *ctx, const unsigned char *buf, size_t len)
{
    kt_session *s = ctx;
    if (len > 0x7fffffff)
        len = 0x7fffffff;
    return keel_transport_send(s->conn, buf, len) == KEEL_OK ? (int)len : KT_ERR_SEND;
}

static int bio_recv(void *ctx, unsigned char *buf, size_t len)
{
    kt_session *s = ctx;
    if (s->in_len == 0)
        return MBEDTLS_ERR_SSL_WANT_READ;
    if (len > s->in_len)
        len = s->in_len;
    if (len > 0x7fffffff)
        len = 0x7fffffff;
    memcpy(buf, s->in, len);
    s->in += len;
    s->in_len -= len;
    return (int)len;
}

/* ---- writing ------------------------------------------------------------------ */

static int write_all(kt_session *s, const unsigned char *p, size_t len)
{
    while (len > 0) {
        int rc = mbedtls_ssl_write(&s->ssl, p, len);
        if (rc > 0) {
            p += rc;
            len -= (size_t)rc;
            continue;
        }
#if KT_MBEDTLS3 && defined(MBEDTLS_SSL_PROTO_TLS1_3)
        if (rc == MBEDTLS_ERR_SSL_RECEIVED_NEW_SESSION_TICKET)
            continue;
#endif
        return KEEL_ERR_IO; /* bio_send never blocks: anything else is fatal */
    }
    return KEEL_OK;
}

static int write_bufs(kt_session *s, const keel_buf *bufs, size_t nbufs)
{
    unsigned char *stage = s->w->stage;
    size_t fill = 0;
    int rc;
    for (size_t i = 0; i < nbufs; i++) {
        const unsigned char *p = bufs[i].base;
        size_t len = bufs[i].len;
        while (len > 0) {
            if (fill == 0 && len >= KT_STAGE_SIZE) {
                /* Whole records straight from the caller's buffer. */
                size_t whole = len - len % KT_STAGE_SIZE;
                if ((rc = write_all(s, p, whole)) != KEEL_OK)
                    return rc;
                p += whole;
                len -= whole;
                continue;
            }
            size_t take = KT_STAGE_SIZE - fill < len ? KT_STAGE_SIZE - fill : len;
            memcpy(stage + fill, p, take);
            fill += take;
            p += take;
            len -= take;
            if (fill == KT_STAGE_SIZE) {
                if ((rc = write_all(s, stage, fill)) != KEEL_OK)
                    return rc;
                fill = 0;
            }
        }
    }
    return fill > 0 ? write_all(s, stage, fill) : KEEL_OK;
}

/* Plaintext a protocol wrote before the handshake ended (only where the
 * core opens the protocol with the transport): kept until it can go. */
static int hold(kt_session *s, const keel_buf *bufs, size_t nbufs)
{
    for (size_t i = 0; i < nbufs; i++) {
        if (s->pending_len + bufs[i].len > s->pending_cap) {
            size_t cap = s->pending_cap ? s->pending_cap : 1024;
            while (cap < s->pending_len + bufs[i].len)
                cap *= 2;
            char *grown = realloc(s->pending, cap);
            if (grown == NULL)
                return KEEL_ERR_NOMEM;
            s->pending = grown;
            s->pending_cap = cap;
        }
        memcpy(s->pending + s->pending_len, bufs[i].base, bufs[i].len);
        s->pending_len += bufs[i].len;
    }
    return KEEL_OK;
}

static void drop_pending(kt_session *s)
{
    if (s->pending != NULL)
        mbedtls_platform_zeroize(s->pending, s->pending_cap);
    free(s->pending);
    s->pending = NULL;
    s->pending_len = s->pending_cap = 0;
}

/* ---- the handshake --------------------------------------------------------------- */

static int handshake_done(kt_session *s)
{
    keel_worker *worker = keel_conn_worker(s->conn);
    s->state = KT_OPEN;
    keel_metric_add(worker, s->client ? kt_cfg.hs_client_ok : kt_cfg.hs_ok, 1);
    if (s->resumed)
        keel_metric_add(worker, kt_cfg.resumed, 1);
    /* The peer's subject counts only if its chain verified. */
    if (s->peer_subject != NULL && mbedtls_ssl_get_verify_result(&s->ssl) != 0) {
        free(s->peer_subject);
        s->peer_subject = NULL;
    }
    /* Back to the server's idle_timeout (the protocol may set its own). */
    keel_conn_set_deadline(s->conn, 0);
    keel_conn_set_timeout(s->conn, 0);
    if (keel_log_enabled(KEEL_LOG_DEBUG))
        keel_log(kt_self, KEEL_LOG_DEBUG, "connection %llu: %s %s%s alpn=%s sni=%s",
                 (unsigned long long)keel_conn_id(s->conn), mbedtls_ssl_get_version(&s->ssl),
                 mbedtls_ssl_get_ciphersuite(&s->ssl), s->resumed ? " resumed" : "",
                 mbedtls_ssl_get_alpn_protocol(&s->ssl) ? mbedtls_ssl_get_alpn_protocol(&s->ssl)
                                                        : "-",
                 s->server_name ? s->server_name : "-");
    if (s->deferred) {
        s->deferred = 0;
        int rc = kt_open_protocol(s->conn, mbedtls_ssl_get_alpn_protocol(&s->ssl));
        if (rc < 0)
            return rc;
    }
    if (s->pending_len > 0) {
        keel_buf b = {s->pending, s->pending_len};
        int rc = write_bufs(s, &b, 1);
        drop_pending(s);
        return rc;
    }
    return KEEL_OK;
}

static void handshake_failed(kt_session *s, int rc)
{
    keel_worker *worker = keel_conn_worker(s->conn);
    s->state = KT_FAILED;
    keel_metric_add(worker, s->client ? kt_cfg.hs_client_failed : kt_cfg.hs_failed, 1);
    char why[160];
    mbedtls_strerror(rc, why, sizeof why);
    if (s->client && rc == MBEDTLS_ERR_X509_CERT_VERIFY_FAILED) {
        char info[256];
        int n = mbedtls_x509_crt_verify_info(info, sizeof info, "",
                                             mbedtls_ssl_get_verify_result(&s->ssl));
        /* One line: the flags come one a line. */
        for (int i = 0; i < n; i++)
            if (info[i] == '\n')
                info[i] = i == n - 1 ? '\0' : ';';
        keel_log(kt_self, KEEL_LOG_WARN, "%s: certificate not accepted: %s",
                 s->server_name ? s->server_name : "?", n > 0 ? info : why);
    } else if (keel_log_enabled(KEEL_LOG_DEBUG)) {
        char peer[80] = "?";
        keel_conn_peer_name(s->conn, peer, sizeof peer);
        keel_log(kt_self, KEEL_LOG_DEBUG, "connection %llu from %s: handshake failed: %s",
                 (unsigned long long)keel_conn_id(s->conn), peer, why);
    }
    drop_pending(s);
    /* An orderly close lets the alert mbedTLS queued leave before the FIN. */
    keel_conn_close(s->conn);
}

/* Runs the handshake as far as the input allows. */
static int drive_handshake(kt_session *s)
{
    while (s->state == KT_HANDSHAKE) {
        ticket_accepted = 0;
        handshaking = s->client ? NULL : s;
        int rc = mbedtls_ssl_handshake(&s->ssl);
        handshaking = NULL;
        if (ticket_accepted)
            s->resumed = 1;
        if (rc == 0)
            return handshake_done(s);
        if (rc == MBEDTLS_ERR_SSL_WANT_READ || rc == MBEDTLS_ERR_SSL_WANT_WRITE)
            return KEEL_OK;
#if KT_MBEDTLS3 && defined(MBEDTLS_SSL_PROTO_TLS1_3)
        if (rc == MBEDTLS_ERR_SSL_RECEIVED_NEW_SESSION_TICKET)
            continue;
#endif
        handshake_failed(s, rc);
        return KEEL_OK;
    }
    return KEEL_OK;
}

/* ---- plain HTTP on a TLS port ----------------------------------------------------- */

/* Plain HTTP on a TLS port gets a 400 (keys.c). The answer goes out as
 * it is, the connection closes behind it (the core lingers, so the
 * unread request does not reset it). */
static void refuse_plain_http(kt_session *s)
{
    keel_worker *worker = keel_conn_worker(s->conn);
    s->state = KT_FAILED;
    keel_metric_add(worker, kt_cfg.hs_failed, 1);
    if (keel_log_enabled(KEEL_LOG_DEBUG)) {
        char peer[80] = "?";
        keel_conn_peer_name(s->conn, peer, sizeof peer);
        keel_log(kt_self, KEEL_LOG_DEBUG,
                 "connection %llu from %s: plain HTTP on a TLS port: answered 400",
                 (unsigned long long)keel_conn_id(s->conn), peer);
    }
    keel_transport_send(s->conn, kt_plain_http_answer, kt_plain_http_answer_len);
    drop_pending(s);
    keel_conn_close(s->conn);
}

/* ---- the transport's callbacks ----------------------------------------------------- */

static void session_free(kt_session *s)
{
    mbedtls_ssl_free(&s->ssl); /* wipes keys and record buffers */
    drop_pending(s);
    free(s->server_name);
    free(s->peer_subject);
    free(s);
}

static int on_open(keel_conn *conn)
{
    kt_worker *w = kt_worker_of(conn);
    const char *host = keel_conn_remote_host(conn);
    int client = host != NULL;
    int rc = kt_open_check(kt_self, client, kt_cfg.certs.n, kt_cfg.nsites);
    if (rc != KEEL_OK)
        return rc;
    const char *offer = kt_alpn_offer(conn, client, kt_cfg.alpn, kt_cfg.client_alpn);
    /* Without SNI, the handshake serves what a request without Host
     * would choose: the default site's own certificates, if it has some. */
    const kt_section *dflt_site = client ? NULL : keel_conn_site_config(conn, kt_self, "", 0);
    const kt_site_list *dflt = dflt_site != NULL ? kt_site_of(dflt_site) : NULL;
    kt_conf *cf = kt_conf_get(w, client, offer, dflt);
    kt_session *s = calloc(1, sizeof *s);
    if (cf == NULL || s == NULL) {
        free(s);
        return KEEL_ERR_NOMEM;
    }
    s->conn = conn;
    s->w = w;
    s->client = (unsigned char)client;
    s->site = dflt;
    s->in_dirty = s->out_dirty = 1; /* calloc may have zeroed reused pages */
    mbedtls_ssl_init(&s->ssl);
    if (mbedtls_ssl_setup(&s->ssl, &cf->ssl) != 0) {
        session_free(s);
        return KEEL_ERR_NOMEM;
    }
    mbedtls_ssl_set_bio(&s->ssl, s, bio_send, bio_recv, NULL);
    if (client) {
        if (kt_client_setup(s, host) != KEEL_OK) {
            session_free(s);
            return KEEL_ERR_NOMEM;
        }
    } else if (kt_cfg.verify_client != KT_VERIFY_OFF) {
        mbedtls_ssl_set_verify(&s->ssl, kt_verify_cb, s);
    }
    keel_conn_set_transport_data(conn, s);
    keel_conn_set_deadline(conn, kt_cfg.handshake_timeout_ms);
#ifdef KEEL_TRANSPORT_DEFER
    s->deferred = 1;
#endif
    if (client) {
        /* The client speaks first: the ClientHello leaves now. */
        drive_handshake(s);
        if (s->state == KT_FAILED) {
            keel_conn_set_transport_data(conn, NULL);
            session_free(s);
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
    kt_session *s = keel_conn_transport_data(conn);
    if (s->state == KT_FAILED || s->state == KT_CLOSED || s->peer_done)
        return KEEL_OK; /* nothing more is read from this peer */
    s->in = (const unsigned char *)data;
    s->in_len = len;
    int rc = KEEL_OK;
    if (s->state == KT_HANDSHAKE && !s->client && !s->first_read_seen) {
        s->first_read_seen = 1;
        if (kt_looks_like_http(data, len)) {
            s->in = NULL;
            s->in_len = 0;
            refuse_plain_http(s);
            return KEEL_OK;
        }
    }
    int handshaking = s->state == KT_HANDSHAKE;
    if (handshaking)
        rc = drive_handshake(s);
    unsigned char *plain = s->w->plain;
    while (rc == KEEL_OK && s->state == KT_OPEN) {
        int n = mbedtls_ssl_read(&s->ssl, plain, KT_STAGE_SIZE);
        if (n > 0) {
            rc = keel_transport_deliver(conn, plain, (size_t)n);
            continue;
        }
        if (n == MBEDTLS_ERR_SSL_WANT_READ || n == MBEDTLS_ERR_SSL_WANT_WRITE)
            break;
#if KT_MBEDTLS3 && defined(MBEDTLS_SSL_PROTO_TLS1_3)
        if (n == MBEDTLS_ERR_SSL_RECEIVED_NEW_SESSION_TICKET)
            continue;
#endif
        if (n == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY || n == 0) {
            /* The peer's close_notify (RFC 8446 6.1): no more input. The
             * TCP FIN that follows tells the protocol (on_eof). */
            s->peer_done = 1;
            break;
        }
        if (keel_log_enabled(KEEL_LOG_DEBUG)) {
            char why[160];
            mbedtls_strerror(n, why, sizeof why);
            keel_log(kt_self, KEEL_LOG_DEBUG, "connection %llu: %s",
                     (unsigned long long)keel_conn_id(conn), why);
        }
        rc = KEEL_ERR_PROTOCOL;
    }
    s->in = NULL;
    s->in_len = 0;
    mbedtls_platform_zeroize(plain, KT_STAGE_SIZE < len ? KT_STAGE_SIZE : len);
    if (len > 2048)
        s->in_dirty = 1;
    /* The end of a burst (a read shorter than a full record's worth):
     * give the buffers' pages back until the next one. Not in the read
     * that ended the handshake: the request follows at once (or the
     * connection closes), and the madvise with its TLB shootdown cost
     * about 6% of a full handshake (docs/tls.md); the next read trims. */
    if (rc == KEEL_OK && !handshaking && (s->in_dirty || s->out_dirty) && len < KT_STAGE_SIZE)
        kt_trim(s, s->in_dirty, s->out_dirty);
    return rc;
}

static int on_write(keel_conn *conn, const keel_buf *bufs, size_t nbufs)
{
    kt_session *s = keel_conn_transport_data(conn);
    if (s->state == KT_HANDSHAKE)
        return hold(s, bufs, nbufs);
    if (s->state != KT_OPEN)
        return KEEL_ERR_CLOSED;
    size_t total = 0;
    for (size_t i = 0; i < nbufs; i++)
        total += bufs[i].len;
    int rc = write_bufs(s, bufs, nbufs);
    if (total > 2048)
        s->out_dirty = 1;
    if (rc == KEEL_OK && s->out_dirty && total < KT_STAGE_SIZE)
        kt_trim(s, 0, 1);
    return rc;
}

static void on_shutdown(keel_conn *conn)
{
    kt_session *s = keel_conn_transport_data(conn);
    if (s == NULL || s->state != KT_OPEN)
        return;
    /* close_notify (RFC 8446 6.1, RFC 5246 7.2.1): the peer can tell the
     * end of our data from a truncation. */
    mbedtls_ssl_close_notify(&s->ssl);
    s->state = KT_CLOSED;
}

static void on_close(keel_conn *conn)
{
    kt_session *s = keel_conn_transport_data(conn);
    if (s == NULL)
        return;
    keel_conn_set_transport_data(conn, NULL);
    session_free(s);
}

const keel_transport kt_transport = {
    .size = sizeof(keel_transport),
    .name = "tls",
    .on_open = on_open,
    .on_read = on_read,
    .on_write = on_write,
    .on_shutdown = on_shutdown,
    .on_close = on_close,
    .describe = kt_describe,
};
