/* session.c — OpenSSL's part of the transport (../tls/transport.c,
 * keys.h): one SSL per connection over a BIO of our own, the handshake's
 * steps, records gathered to 16 KiB.
 *
 * The BIO: reads serve exactly the bytes of the current on_read
 * (kt_take_input), then "retry" (OpenSSL keeps a partial record in its
 * own buffer); writes go to keel_transport_send, which writes to the
 * socket at once when its queue is empty, else copies into the queue, and
 * never refuses (back-pressure is the core's: write_high_water counts
 * these bytes). No memory BIO. A record goes straight from OpenSSL's
 * buffer; the records of a larger write are gathered into one send
 * (write_plain).
 *
 * SSL_MODE_RELEASE_BUFFERS gives an idle connection's record buffers back
 * (OpenSSL frees them when empty), which is what mod_tls's trim.c does by
 * hand for mbedTLS. */
#include "ko.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static BIO_METHOD *bio_method;

/* ---- the BIO ----------------------------------------------------------------------- */

/* Hands the records gathered to the core, in one keel_transport_send. */
static int send_gathered(ko_session *s)
{
    ko_worker *w = s->w;
    size_t len = w->gathered;
    w->gathered = 0;
    return len == 0 ? KEEL_OK : keel_transport_send(s->b.conn, w->gather, len);
}

static int bio_write(BIO *bio, const char *buf, int len)
{
    ko_session *s = BIO_get_data(bio);
    BIO_clear_retry_flags(bio);
    if (len <= 0)
        return 0;
    ko_worker *w = s->w;
    if (s->gathering && (size_t)len <= KO_GATHER_SIZE) {
        if (w->gathered + (size_t)len > KO_GATHER_SIZE && send_gathered(s) != KEEL_OK)
            return -1;
        memcpy(w->gather + w->gathered, buf, (size_t)len);
        w->gathered += (size_t)len;
        return len;
    }
    return keel_transport_send(s->b.conn, buf, (size_t)len) == KEEL_OK ? len : -1;
}

static int bio_read(BIO *bio, char *buf, int len)
{
    ko_session *s = BIO_get_data(bio);
    BIO_clear_retry_flags(bio);
    size_t n = len > 0 ? kt_take_input(&s->b, buf, (size_t)len) : 0;
    if (n == 0) {
        BIO_set_retry_read(bio);
        return -1;
    }
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

/* SSL_get_error reads the thread's error queue, so it must be empty before
 * each call (SSL_get_error(3)); every failure below empties it again, so
 * it nearly always is, and ERR_clear_error costs a pass over all its
 * slots (two frees each): only a queue with something in it is cleared. */
static void clear_errors(void)
{
    if (ERR_peek_error() != 0)
        ERR_clear_error();
}

/* ---- the handshake ------------------------------------------------------------------ */

int kt_be_handshake(kt_base *b, char *why, size_t size)
{
    ko_session *s = (ko_session *)b;
    clear_errors();
    int rc = SSL_do_handshake(s->ssl);
    if (rc == 1)
        return KT_HS_DONE;
    int err = SSL_get_error(s->ssl, rc);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE)
        return KT_HS_AGAIN;
    long verify = SSL_get_verify_result(s->ssl);
    int rejected = b->client && verify != X509_V_OK;
    if (rejected)
        snprintf(why, size, "%s", X509_verify_cert_error_string(verify));
    else
        ko_reason(why, size);
    ERR_clear_error();
    return rejected ? KT_HS_CERT_REJECTED : KT_HS_FAILED;
}

void kt_be_opened(kt_base *b)
{
    ko_session *s = (ko_session *)b;
    b->resumed = (unsigned char)SSL_session_reused(s->ssl);
    if (b->client && s->offer != NULL) {
        const unsigned char *p = NULL;
        unsigned len = 0;
        SSL_get0_alpn_selected(s->ssl, &p, &len);
        b->alpn = len > 0 ? ko_offer_id(s->offer, p, len) : NULL;
    }
    /* The peer's subject counts only if its chain verified. */
    b->peer_subject = ko_peer_subject(s->ssl);
    b->version = SSL_get_version(s->ssl);
    b->cipher = ko_cipher_name(SSL_get_current_cipher(s->ssl));
    b->sni = SSL_get_servername(s->ssl, TLSEXT_NAMETYPE_host_name);
}

/* ---- writing ---------------------------------------------------------------------- */

static int write_records(ko_session *s, const void *p, size_t len)
{
    size_t done = 0;
    clear_errors();
    /* The BIO never blocks: anything but a full write is fatal. */
    return SSL_write_ex(s->ssl, p, len, &done) == 1 && done == len ? KEEL_OK : KEEL_ERR_IO;
}

/* Plaintext of more than a record is encrypted KO_GATHER_RECORDS records
 * at a time, gathered into one write: a system call per 64 KiB rather
 * than per 16 KiB record, for a copy of each record in the cache (OpenSSL
 * encrypts into a buffer of its own, one record at a time, and needs it
 * back before the next). One record goes straight from that buffer. */
static int write_plain(ko_session *s, const unsigned char *p, size_t len)
{
    if (len <= KT_STAGE_SIZE)
        return len == 0 ? KEEL_OK : write_records(s, p, len);
    while (len > 0) {
        size_t n =
            len < KO_GATHER_RECORDS * KT_STAGE_SIZE ? len : KO_GATHER_RECORDS * KT_STAGE_SIZE;
        s->gathering = 1;
        int rc = write_records(s, p, n);
        s->gathering = 0;
        if (rc != KEEL_OK) {
            s->w->gathered = 0; /* the connection is cut: nothing more leaves */
            return rc;
        }
        if ((rc = send_gathered(s)) != KEEL_OK)
            return rc;
        p += n;
        len -= n;
    }
    return KEEL_OK;
}

/* The protocol's buffers gathered into full records (16 KiB of plaintext,
 * RFC 8446 5.1), so that a head and a small body become one record; a
 * buffer of a record or more goes as it is (OpenSSL cuts it). */
int kt_be_write(kt_base *b, const keel_buf *bufs, size_t nbufs)
{
    ko_session *s = (ko_session *)b;
    unsigned char *stage = s->w->stage;
    size_t fill = 0;
    for (size_t i = 0; i < nbufs; i++) {
        const unsigned char *p = bufs[i].base;
        size_t len = bufs[i].len;
        if (fill + len <= KT_STAGE_SIZE) {
            memcpy(stage + fill, p, len);
            fill += len;
            continue;
        }
        int rc = write_plain(s, stage, fill);
        fill = 0;
        if (rc != KEEL_OK)
            return rc;
        if (len >= KT_STAGE_SIZE) {
            if ((rc = write_plain(s, p, len)) != KEEL_OK)
                return rc;
        } else {
            memcpy(stage, p, len);
            fill = len;
        }
    }
    return write_plain(s, stage, fill);
}

/* ---- the rest of a connection's life ------------------------------------------------ */

kt_base *kt_be_new(keel_conn *conn, const char *host, int *rc)
{
    ko_worker *w = ko_worker_of(conn);
    int client = host != NULL;
    if ((*rc = kt_open_check(kt_self, client, ko_cfg.certs.n, kt_site_count())) != KEEL_OK)
        return NULL;
    const char *offer = kt_alpn_offer(conn, client, ko_cfg.c.alpn, ko_cfg.c.client_alpn);
    /* Without SNI, the handshake serves what a request without Host
     * would choose: the default site's own certificates, if it has some
     * ([site default]'s, or whichever the listener's rules make the
     * default), else [tls]'s first group. SNI chooses others (certs.c). */
    const ko_list *served = &ko_cfg.certs;
    if (!client && kt_site_count() > 0) {
        const kt_section *site = keel_conn_site_config(conn, kt_self, "", 0);
        const ko_list *own = site != NULL ? ko_site_list(site) : NULL;
        if (own != NULL && own->n > 0)
            served = own;
    }
    SSL_CTX *ctx = client ? ko_cfg.client : served->n > 0 ? served->v[0].ctx : ko_cfg.bare;
    ko_session *s = calloc(1, sizeof *s);
    BIO *bio = bio_method != NULL ? BIO_new(bio_method) : NULL;
    *rc = KEEL_ERR_NOMEM;
    if (s == NULL || bio == NULL || (s->ssl = SSL_new(ctx)) == NULL ||
        (s->offer = ko_offer_get(w, client, offer)) == NULL) {
        BIO_free(bio);
        if (s != NULL)
            kt_session_free(&s->b);
        return NULL;
    }
    s->b.conn = conn;
    s->b.client = (unsigned char)client;
    s->b.plain = w->plain;
    s->w = w;
    s->served = client ? NULL : served;
    BIO_set_data(bio, s);
    BIO_set_init(bio, 1);
    SSL_set_bio(s->ssl, bio, bio);
    SSL_set_app_data(s->ssl, s);
    /* OpenSSL takes all the input there is in one BIO read rather than a
     * header's 5 bytes, then the rest (kt_be_pending sees what it keeps). */
    SSL_set_read_ahead(s->ssl, 1);
    if (client) {
        SSL_set_connect_state(s->ssl);
        if (ko_client_setup(s, host) != KEEL_OK ||
            (s->offer->wire_len > 0 &&
             SSL_set_alpn_protos(s->ssl, s->offer->wire, s->offer->wire_len) != 0)) {
            kt_session_free(&s->b);
            return NULL;
        }
    } else {
        SSL_set_accept_state(s->ssl);
    }
    keel_conn_set_deadline(conn, ko_cfg.c.handshake_timeout_ms);
    *rc = KEEL_OK;
    return &s->b;
}

int kt_be_read(kt_base *b, unsigned char *buf, size_t size, char *why, size_t why_size)
{
    ko_session *s = (ko_session *)b;
    size_t n = 0;
    clear_errors();
    int ok = SSL_read_ex(s->ssl, buf, size, &n);
    if (ok == 1)
        return (int)n;
    int err = SSL_get_error(s->ssl, ok);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE)
        return KT_READ_AGAIN;
    if (err == SSL_ERROR_ZERO_RETURN)
        return KT_READ_END;
    ko_reason(why, why_size);
    ERR_clear_error();
    return KT_READ_ERROR;
}

int kt_be_pending(kt_base *b)
{
    return SSL_has_pending(((ko_session *)b)->ssl);
}

/* OpenSSL gives idle record buffers back itself (SSL_MODE_RELEASE_BUFFERS). */
void kt_be_read_done(kt_base *b, size_t len, int handshaking, int rc)
{
    (void)b;
    (void)len;
    (void)handshaking;
    (void)rc;
}

void kt_be_close_notify(kt_base *b)
{
    clear_errors();
    SSL_shutdown(((ko_session *)b)->ssl);
    clear_errors();
}

void kt_be_free(kt_base *b)
{
    SSL_free(((ko_session *)b)->ssl); /* frees the BIO; OpenSSL cleanses the keys */
}

void kt_be_wipe(void *p, size_t len)
{
    OPENSSL_cleanse(p, len);
}

void kt_be_describe(char *buf, size_t size)
{
    kt_describe_versions(buf, size, ko_cfg.c.min_version, ko_cfg.c.max_version, 3, "OpenSSL");
}
