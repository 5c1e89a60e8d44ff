/* session.c — the transport on OpenSSL: one SSL per connection over a BIO
 * of our own, fed from the core's reads and writing into the core's
 * output queue (the same shape as mod_tls's session.c).
 *
 * The BIO: reads serve exactly the bytes of the current on_read, then
 * "retry" (OpenSSL keeps a partial record in its own buffer); writes go
 * straight to keel_transport_send, which copies into the core's queue and
 * never refuses (back-pressure is the core's: write_high_water counts
 * these bytes). No memory BIO, so no second copy either way.
 *
 * SSL_MODE_RELEASE_BUFFERS gives an idle connection's record buffers back
 * (OpenSSL frees them when empty), which is what mod_tls's trim.c does by
 * hand for mbedTLS.
 *
 * The protocol is opened after the handshake (on_open returns
 * KEEL_TRANSPORT_DEFER), so that ALPN can choose it and a client that
 * never finishes a handshake never reaches it; the handshake has its own
 * deadline (handshake_timeout), which no byte renews. */
#include "ko.h"

#include <stdlib.h>
#include <string.h>

static BIO_METHOD *bio_method;

ko_session *ko_session_of(keel_conn *conn)
{
    const char *t = keel_conn_transport_name(conn);
    return t != NULL && strcmp(t, ko_transport.name) == 0 ? keel_conn_transport_data(conn) : NULL;
}

/* ---- the BIO ----------------------------------------------------------------------- */

static int bio_write(BIO *bio, const char *buf, int len)
{
    ko_session *s = BIO_get_data(bio);
    BIO_clear_retry_flags(bio);
    if (len <= 0)
        return 0;
    return keel_transport_send(s->conn, buf, (size_t)len) == KEEL_OK ? len : -1;
}

static int bio_read(BIO *bio, char *buf, int len)
{
    ko_session *s = BIO_get_data(bio);
    BIO_clear_retry_flags(bio);
    if (s->in_len == 0) {
        BIO_set_retry_read(bio);
        return -1;
    }
    size_t n = (size_t)len < s->in_len ? (size_t)len : s->in_len;
    memcpy(buf, s->in, n);
    s->in += n;
    s->in_len -= n;
    return (int)n;
}

static long bio_ctrl(BIO *bio, int cmd, long num, void *ptr)
{
    (void)bio;
    (void)num;
    (void)ptr;
    return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

int ko_bio_init(void)
{
    bio_method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "keel");
    if (bio_method == NULL || !BIO_meth_set_write(bio_method, bio_write) ||
        !BIO_meth_set_read(bio_method, bio_read) || !BIO_meth_set_ctrl(bio_method, bio_ctrl))
        return KEEL_ERR_NOMEM;
    return KEEL_OK;
}

void ko_bio_free(void)
{
    BIO_meth_free(bio_method);
    bio_method = NULL;
}

/* ---- the handshake ------------------------------------------------------------------ */

static int handshake_done(ko_session *s)
{
    keel_worker *worker = keel_conn_worker(s->conn);
    s->state = KO_OPEN;
    s->resumed = (unsigned char)SSL_session_reused(s->ssl);
    keel_metric_add(worker, s->client ? ko_cfg.metrics.hs_client_ok : ko_cfg.metrics.hs_ok, 1);
    if (s->resumed)
        keel_metric_add(worker, ko_cfg.metrics.resumed, 1);
    if (s->client && s->offer != NULL) {
        const unsigned char *p = NULL;
        unsigned len = 0;
        SSL_get0_alpn_selected(s->ssl, &p, &len);
        s->alpn = len > 0 ? ko_offer_id(s->offer, p, len) : NULL;
    }
    /* The peer's subject counts only if its chain verified. */
    s->peer_subject = ko_peer_subject(s->ssl);
    /* Back to the server's idle_timeout (the protocol may set its own). */
    keel_conn_set_deadline(s->conn, 0);
    keel_conn_set_timeout(s->conn, 0);
    if (keel_log_enabled(KEEL_LOG_DEBUG)) {
        const char *sni = SSL_get_servername(s->ssl, TLSEXT_NAMETYPE_host_name);
        keel_log(ko_self, KEEL_LOG_DEBUG, "connection %llu: %s %s%s alpn=%s sni=%s",
                 (unsigned long long)keel_conn_id(s->conn), SSL_get_version(s->ssl),
                 ko_cipher_name(SSL_get_current_cipher(s->ssl)), s->resumed ? " resumed" : "",
                 s->alpn ? s->alpn : "-", sni ? sni : "-");
    }
    int rc = ko_open_protocol(s->conn, s->alpn);
    return rc < 0 ? rc : KEEL_OK;
}

static void handshake_failed(ko_session *s)
{
    keel_worker *worker = keel_conn_worker(s->conn);
    s->state = KO_FAILED;
    keel_metric_add(worker, s->client ? ko_cfg.metrics.hs_client_failed : ko_cfg.metrics.hs_failed,
                    1);
    char why[200];
    long verify = SSL_get_verify_result(s->ssl);
    if (s->client && verify != X509_V_OK) {
        ERR_clear_error();
        keel_log(ko_self, KEEL_LOG_WARN, "%s: certificate not accepted: %s",
                 s->server_name ? s->server_name : "?", X509_verify_cert_error_string(verify));
    } else if (keel_log_enabled(KEEL_LOG_DEBUG)) {
        char peer[80] = "?";
        keel_conn_peer_name(s->conn, peer, sizeof peer);
        keel_log(ko_self, KEEL_LOG_DEBUG, "connection %llu from %s: handshake failed: %s",
                 (unsigned long long)keel_conn_id(s->conn), peer, ko_reason(why, sizeof why));
    }
    ERR_clear_error();
    /* An orderly close lets the alert OpenSSL wrote leave before the FIN. */
    keel_conn_close(s->conn);
}

/* Runs the handshake as far as the input allows. */
static int drive_handshake(ko_session *s)
{
    ERR_clear_error();
    int rc = SSL_do_handshake(s->ssl);
    if (rc == 1)
        return handshake_done(s);
    int err = SSL_get_error(s->ssl, rc);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE)
        return KEEL_OK;
    handshake_failed(s);
    return KEEL_OK;
}

/* ---- writing ---------------------------------------------------------------------- */

static int write_plain(ko_session *s, const void *p, size_t len)
{
    size_t done = 0;
    ERR_clear_error();
    /* The BIO never blocks: anything but a full write is fatal. */
    return len == 0 || (SSL_write_ex(s->ssl, p, len, &done) == 1 && done == len) ? KEEL_OK
                                                                                 : KEEL_ERR_IO;
}

/* The protocol's buffers gathered into full records (16 KiB of plaintext,
 * RFC 8446 5.1), so that a head and a small body become one record; a
 * buffer of a record or more goes as it is (OpenSSL cuts it). */
static int write_bufs(ko_session *s, const keel_buf *bufs, size_t nbufs)
{
    unsigned char *stage = s->w->stage;
    size_t fill = 0;
    for (size_t i = 0; i < nbufs; i++) {
        const unsigned char *p = bufs[i].base;
        size_t len = bufs[i].len;
        if (fill + len <= KO_STAGE_SIZE) {
            memcpy(stage + fill, p, len);
            fill += len;
            continue;
        }
        int rc = write_plain(s, stage, fill);
        fill = 0;
        if (rc != KEEL_OK)
            return rc;
        if (len >= KO_STAGE_SIZE) {
            if ((rc = write_plain(s, p, len)) != KEEL_OK)
                return rc;
        } else {
            memcpy(stage, p, len);
            fill = len;
        }
    }
    return write_plain(s, stage, fill);
}

/* ---- the transport's callbacks ------------------------------------------------------ */

static void session_free(ko_session *s)
{
    SSL_free(s->ssl); /* frees the BIO; OpenSSL cleanses the keys */
    free(s->server_name);
    free(s->peer_subject);
    free(s);
}

static int on_open(keel_conn *conn)
{
    ko_worker *w = ko_worker_of(conn);
    const char *host = keel_conn_remote_host(conn);
    int client = host != NULL;
    int rc = kt_open_check(ko_self, client, ko_cfg.certs.n, ko_cfg.nsites);
    if (rc != KEEL_OK)
        return rc;
    const char *offer = kt_alpn_offer(conn, client, ko_cfg.c.alpn, ko_cfg.c.client_alpn);
    /* Without SNI, the handshake serves what a request without Host
     * would choose: the default site's own certificates, if it has some
     * ([site default]'s, or whichever the listener's rules make the
     * default), else [tls]'s first group. SNI chooses others (certs.c). */
    const ko_list *served = &ko_cfg.certs;
    if (!client && ko_cfg.nsites > 0) {
        const kt_section *site = keel_conn_site_config(conn, ko_self, "", 0);
        const ko_list *own = site != NULL ? ko_site_list(site) : NULL;
        if (own != NULL && own->n > 0)
            served = own;
    }
    SSL_CTX *ctx = client ? ko_cfg.client : served->n > 0 ? served->v[0].ctx : ko_cfg.bare;
    ko_session *s = calloc(1, sizeof *s);
    BIO *bio = bio_method != NULL ? BIO_new(bio_method) : NULL;
    if (s == NULL || bio == NULL || (s->ssl = SSL_new(ctx)) == NULL ||
        (s->offer = ko_offer_get(w, client, offer)) == NULL) {
        BIO_free(bio);
        if (s != NULL)
            session_free(s);
        return KEEL_ERR_NOMEM;
    }
    s->conn = conn;
    s->w = w;
    s->client = (unsigned char)client;
    s->served = client ? NULL : served;
    BIO_set_data(bio, s);
    BIO_set_init(bio, 1);
    SSL_set_bio(s->ssl, bio, bio);
    SSL_set_app_data(s->ssl, s);
    if (client) {
        SSL_set_connect_state(s->ssl);
        if (ko_client_setup(s, host) != KEEL_OK ||
            (s->offer->wire_len > 0 &&
             SSL_set_alpn_protos(s->ssl, s->offer->wire, s->offer->wire_len) != 0)) {
            session_free(s);
            return KEEL_ERR_NOMEM;
        }
    } else {
        SSL_set_accept_state(s->ssl);
    }
    keel_conn_set_transport_data(conn, s);
    keel_conn_set_deadline(conn, ko_cfg.c.handshake_timeout_ms);
    if (client) {
        /* The client speaks first: the ClientHello leaves now. */
        drive_handshake(s);
        if (s->state == KO_FAILED) {
            keel_conn_set_transport_data(conn, NULL);
            session_free(s);
            return KEEL_ERR_IO;
        }
    }
    return KEEL_TRANSPORT_DEFER;
}

static void refuse_plain_http(ko_session *s)
{
    s->state = KO_FAILED;
    keel_metric_add(keel_conn_worker(s->conn), ko_cfg.metrics.hs_failed, 1);
    if (keel_log_enabled(KEEL_LOG_DEBUG)) {
        char peer[80] = "?";
        keel_conn_peer_name(s->conn, peer, sizeof peer);
        keel_log(ko_self, KEEL_LOG_DEBUG,
                 "connection %llu from %s: plain HTTP on a TLS port: answered 400",
                 (unsigned long long)keel_conn_id(s->conn), peer);
    }
    keel_transport_send(s->conn, kt_plain_http_answer, kt_plain_http_answer_len);
    keel_conn_close(s->conn);
}

static int on_read(keel_conn *conn, const char *data, size_t len)
{
    ko_session *s = keel_conn_transport_data(conn);
    if (s->state == KO_FAILED || s->state == KO_CLOSED || s->peer_done)
        return KEEL_OK; /* nothing more is read from this peer */
    if (s->state == KO_HANDSHAKE && !s->client && !s->first_read_seen) {
        s->first_read_seen = 1;
        if (kt_looks_like_http(data, len)) {
            refuse_plain_http(s);
            return KEEL_OK;
        }
    }
    s->in = (const unsigned char *)data;
    s->in_len = len;
    int rc = KEEL_OK;
    if (s->state == KO_HANDSHAKE)
        rc = drive_handshake(s);
    unsigned char *plain = s->w->plain;
    size_t delivered = 0;
    while (rc == KEEL_OK && s->state == KO_OPEN) {
        size_t n = 0;
        ERR_clear_error();
        int ok = SSL_read_ex(s->ssl, plain, KO_STAGE_SIZE, &n);
        if (ok == 1) {
            delivered += n;
            rc = keel_transport_deliver(conn, plain, n);
            continue;
        }
        int err = SSL_get_error(s->ssl, ok);
        if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE)
            break;
        if (err == SSL_ERROR_ZERO_RETURN) {
            /* The peer's close_notify (RFC 8446 6.1): no more input. The
             * TCP FIN that follows tells the protocol (on_eof). */
            s->peer_done = 1;
            break;
        }
        if (keel_log_enabled(KEEL_LOG_DEBUG)) {
            char why[200];
            keel_log(ko_self, KEEL_LOG_DEBUG, "connection %llu: %s",
                     (unsigned long long)keel_conn_id(conn), ko_reason(why, sizeof why));
        }
        ERR_clear_error();
        rc = KEEL_ERR_PROTOCOL;
    }
    s->in = NULL;
    s->in_len = 0;
    OPENSSL_cleanse(plain, delivered < KO_STAGE_SIZE ? delivered : KO_STAGE_SIZE);
    return rc;
}

static int on_write(keel_conn *conn, const keel_buf *bufs, size_t nbufs)
{
    ko_session *s = keel_conn_transport_data(conn);
    /* The protocol opens after the handshake (KEEL_TRANSPORT_DEFER). */
    if (s->state == KO_HANDSHAKE)
        return KEEL_ERR_STATE;
    if (s->state != KO_OPEN)
        return KEEL_ERR_CLOSED;
    return write_bufs(s, bufs, nbufs);
}

static void on_shutdown(keel_conn *conn)
{
    ko_session *s = keel_conn_transport_data(conn);
    if (s == NULL || s->state != KO_OPEN)
        return;
    /* close_notify (RFC 8446 6.1, RFC 5246 7.2.1): the peer can tell the
     * end of our data from a truncation. */
    ERR_clear_error();
    SSL_shutdown(s->ssl);
    ERR_clear_error();
    s->state = KO_CLOSED;
}

static void on_close(keel_conn *conn)
{
    ko_session *s = keel_conn_transport_data(conn);
    if (s == NULL)
        return;
    keel_conn_set_transport_data(conn, NULL);
    session_free(s);
}

/* The versions a listener offers, for its start-up line. */
static void describe(char *buf, size_t size)
{
    kt_describe_versions(buf, size, ko_cfg.c.min_version, ko_cfg.c.max_version, 3, "OpenSSL");
}

const keel_transport ko_transport = {
    .size = sizeof(keel_transport),
    .name = "tls",
    .on_open = on_open,
    .on_read = on_read,
    .on_write = on_write,
    .on_shutdown = on_shutdown,
    .on_close = on_close,
    .describe = describe,
};
