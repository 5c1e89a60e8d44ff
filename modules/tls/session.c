/* session.c — mbedTLS's part of the transport (transport.c, keys.h):
 * one mbedtls_ssl_context per connection, its BIO over the core's reads
 * (bio_recv serves exactly the bytes of the current read, then
 * WANT_READ; mbedTLS keeps a partial record itself) and
 * keel_transport_send, the handshake's steps (each flight sent in one
 * piece), records gathered to 16 KiB and the idle record buffers' pages
 * given back (trim.c). */
#include "kt.h"

#include <stdio.h>
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

/* ---- the BIO ------------------------------------------------------------------ */

/* mbedTLS sends each handshake message as it writes it: a resumed
 * TLS 1.2 handshake's ServerHello, ChangeCipherSpec and Finished would be
 * three sends, and three system calls when the core's queue is empty.
 * Within a handshake step they are gathered in the worker's stage buffer
 * and leave together when the step returns, one flight (RFC 5246 7.3)
 * in one send, as OpenSSL sends it. The stage buffer is free then:
 * write_bufs, its other user, never runs inside a handshake step. */
static int send_gathered(kt_session *s)
{
    size_t len = s->gathered;
    s->gathered = 0;
    return len == 0 ? KEEL_OK : keel_transport_send(s->b.conn, s->w->stage, len);
}

static int bio_send(void *ctx, const unsigned char *buf, size_t len)
{
    kt_session *s = ctx;
    if (len > 0x7fffffff)
        len = 0x7fffffff;
    if (s->gathering) {
        if (s->gathered + len > KT_STAGE_SIZE && send_gathered(s) != KEEL_OK)
            return KT_ERR_SEND;
        if (len <= KT_STAGE_SIZE) {
            memcpy(s->w->stage + s->gathered, buf, len);
            s->gathered += len;
            return (int)len;
        }
    }
    return keel_transport_send(s->b.conn, buf, len) == KEEL_OK ? (int)len : KT_ERR_SEND;
}

static int bio_recv(void *ctx, unsigned char *buf, size_t len)
{
    size_t n = kt_take_input(ctx, buf, len > 0x7fffffff ? 0x7fffffff : len);
    return n > 0 ? (int)n : MBEDTLS_ERR_SSL_WANT_READ;
}

/* A TLS 1.3 NewSessionTicket arrived (mbedTLS 3.x reports it from
 * whichever call read it): nothing to do but to call again. */
static int new_ticket(int rc)
{
#if KT_MBEDTLS3 && defined(MBEDTLS_SSL_PROTO_TLS1_3)
    return rc == MBEDTLS_ERR_SSL_RECEIVED_NEW_SESSION_TICKET;
#else
    (void)rc;
    return 0;
#endif
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
        if (new_ticket(rc))
            continue;
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

int kt_be_write(kt_base *b, const keel_buf *bufs, size_t nbufs)
{
    kt_session *s = (kt_session *)b;
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

/* ---- the handshake --------------------------------------------------------------- */

static int failure(kt_session *s, int rc, char *why, size_t size)
{
    mbedtls_strerror(rc, why, size);
    if (!s->b.client || rc != MBEDTLS_ERR_X509_CERT_VERIFY_FAILED)
        return KT_HS_FAILED;
    char info[256];
    int n =
        mbedtls_x509_crt_verify_info(info, sizeof info, "", mbedtls_ssl_get_verify_result(&s->ssl));
    if (n > 0) {
        /* One line: the flags come one a line. */
        for (int i = 0; i < n; i++)
            if (info[i] == '\n')
                info[i] = i == n - 1 ? '\0' : ';';
        snprintf(why, size, "%s", info);
    }
    return KT_HS_CERT_REJECTED;
}

int kt_be_handshake(kt_base *b, char *why, size_t size)
{
    kt_session *s = (kt_session *)b;
    for (;;) {
        ticket_accepted = 0;
        handshaking = b->client ? NULL : s;
        s->gathering = 1;
        int rc = mbedtls_ssl_handshake(&s->ssl);
        s->gathering = 0;
        handshaking = NULL;
        /* The flight (or the alert of a failure) leaves now, before
         * anything the protocol writes once the handshake is done. */
        if (send_gathered(s) != KEEL_OK && (rc == 0 || rc == MBEDTLS_ERR_SSL_WANT_READ)) {
            snprintf(why, size, "connection closed while sending the handshake");
            return KT_HS_FAILED;
        }
        if (ticket_accepted)
            b->resumed = 1;
        if (rc == 0)
            return KT_HS_DONE;
        if (rc == MBEDTLS_ERR_SSL_WANT_READ || rc == MBEDTLS_ERR_SSL_WANT_WRITE)
            return KT_HS_AGAIN;
        if (new_ticket(rc))
            continue;
        return failure(s, rc, why, size);
    }
}

void kt_be_opened(kt_base *b)
{
    kt_session *s = (kt_session *)b;
    /* The peer's subject (kt_verify_cb) counts only if its chain verified. */
    if (b->peer_subject != NULL && mbedtls_ssl_get_verify_result(&s->ssl) != 0) {
        free(b->peer_subject);
        b->peer_subject = NULL;
    }
    b->version = mbedtls_ssl_get_version(&s->ssl);
    b->cipher = mbedtls_ssl_get_ciphersuite(&s->ssl);
    b->alpn = mbedtls_ssl_get_alpn_protocol(&s->ssl);
    b->sni = b->server_name;
}

/* ---- the rest of a connection's life ----------------------------------------------- */

kt_base *kt_be_new(keel_conn *conn, const char *host, int *rc)
{
    kt_worker *w = kt_worker_of(conn);
    int client = host != NULL;
    if ((*rc = kt_open_check(kt_self, client, kt_cfg.certs.n, kt_site_count())) != KEEL_OK)
        return NULL;
    const char *offer = kt_alpn_offer(conn, client, kt_cfg.alpn, kt_cfg.client_alpn);
    /* Without SNI, the handshake serves what a request without Host
     * would choose: the default site's own certificates, if it has some. */
    const kt_section *dflt_site = client ? NULL : keel_conn_site_config(conn, kt_self, "", 0);
    const kt_site_list *dflt = dflt_site != NULL ? kt_site_of(dflt_site) : NULL;
    kt_conf *cf = kt_conf_get(w, client, offer, dflt);
    kt_session *s = calloc(1, sizeof *s);
    *rc = KEEL_ERR_NOMEM;
    if (cf == NULL || s == NULL) {
        free(s);
        return NULL;
    }
    s->b.conn = conn;
    s->b.client = (unsigned char)client;
    s->b.plain = w->plain;
    s->w = w;
    s->site = dflt;
    s->in_dirty = s->out_dirty = 1; /* calloc may have zeroed reused pages */
    mbedtls_ssl_init(&s->ssl);
    if (mbedtls_ssl_setup(&s->ssl, &cf->ssl) != 0 ||
        (client && kt_client_setup(s, host) != KEEL_OK)) {
        kt_session_free(&s->b);
        return NULL;
    }
    mbedtls_ssl_set_bio(&s->ssl, s, bio_send, bio_recv, NULL);
    if (!client && kt_cfg.verify_client != KT_VERIFY_OFF)
        mbedtls_ssl_set_verify(&s->ssl, kt_verify_cb, s);
    keel_conn_set_deadline(conn, kt_cfg.handshake_timeout_ms);
    *rc = KEEL_OK;
    return &s->b;
}

int kt_be_read(kt_base *b, unsigned char *buf, size_t size, char *why, size_t why_size)
{
    kt_session *s = (kt_session *)b;
    for (;;) {
        int n = mbedtls_ssl_read(&s->ssl, buf, size);
        if (n > 0)
            return n;
        if (n == MBEDTLS_ERR_SSL_WANT_READ || n == MBEDTLS_ERR_SSL_WANT_WRITE)
            return KT_READ_AGAIN;
        if (new_ticket(n))
            continue;
        if (n == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY || n == 0)
            return KT_READ_END;
        mbedtls_strerror(n, why, why_size);
        return KT_READ_ERROR;
    }
}

int kt_be_pending(kt_base *b)
{
    return mbedtls_ssl_check_pending(&((kt_session *)b)->ssl);
}

void kt_be_read_done(kt_base *b, size_t len, int handshaking, int rc)
{
    kt_session *s = (kt_session *)b;
    if (len > 2048)
        s->in_dirty = 1;
    /* The end of a burst (a read shorter than a full record's worth):
     * give the buffers' pages back until the next one. Not in the read
     * that ended the handshake: the request follows at once (or the
     * connection closes), and the madvise with its TLB shootdown cost
     * about 6% of a full handshake (docs/tls.md); the next read trims. */
    if (rc == KEEL_OK && !handshaking && (s->in_dirty || s->out_dirty) && len < KT_STAGE_SIZE)
        kt_trim(s, s->in_dirty, s->out_dirty);
}

void kt_be_close_notify(kt_base *b)
{
    mbedtls_ssl_close_notify(&((kt_session *)b)->ssl);
}

void kt_be_free(kt_base *b)
{
    mbedtls_ssl_free(&((kt_session *)b)->ssl); /* wipes keys and record buffers */
}

void kt_be_wipe(void *p, size_t len)
{
    mbedtls_platform_zeroize(p, len);
}
