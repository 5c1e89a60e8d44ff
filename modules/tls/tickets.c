/* tickets.c — session resumption with tickets (RFC 5077; RFC 8446 4.6.1
 * for TLS 1.3), the keys shared by every worker so that a client resumes
 * on whichever worker accepts it (SO_REUSEPORT spreads them).
 *
 * mbedtls_ssl_ticket keeps two keys and rotates them every lifetime
 * (a ticket stays valid for at most that long, RFC 5077 5.5: short-lived
 * keys limit what a stolen key decrypts). The rotation happens inside
 * ticket_write/ticket_parse, on whichever worker calls first, drawing from
 * an RNG of its own; so every call goes through this file's lock. mbedTLS
 * has a lock of its own only when built with MBEDTLS_THREADING_C (Debian's
 * is, the default config and the Windows build are not): taking ours
 * always costs one uncontended mutex per full handshake or resumption and
 * makes no build depend on that option. */
#include "kt.h"

#include <stdlib.h>

#if KT_HAVE_TICKETS

struct kt_tickets {
    mbedtls_ssl_ticket_context ctx;
    kt_rng rng; /* used only under lock, by key rotation */
    kt_lock *lock;
};

/* The keys of the certificates the handshaking session serves: the
 * site list's own, else [tls]'s. */
static kt_tickets *keys_of(const kt_session *s)
{
    return s != NULL && s->site != NULL ? s->site->tickets : kt_cfg.tickets;
}

static int ticket_write(void *p, const mbedtls_ssl_session *session, unsigned char *start,
                        const unsigned char *end, size_t *tlen, uint32_t *lifetime)
{
    (void)p;
    kt_tickets *t = keys_of(kt_handshaking());
    if (t == NULL)
        return MBEDTLS_ERR_SSL_INTERNAL_ERROR; /* no ticket is sent; the handshake goes on */
    kt_lock_acquire(t->lock);
    int rc = mbedtls_ssl_ticket_write(&t->ctx, session, start, end, tlen, lifetime);
    kt_lock_release(t->lock);
    return rc;
}

static int ticket_parse(void *p, mbedtls_ssl_session *session, unsigned char *buf, size_t len)
{
    (void)p;
    const kt_session *s = kt_handshaking();
    /* The keys follow the site SNI chose; a ClientHello may carry its
     * ticket before its server_name (mbedTLS reads the extensions in the
     * client's order; Chrome shuffles them), and the site is then not
     * known yet: with sites of their own in play the ticket is not taken
     * (a full handshake) rather than resumed under keys the name might
     * not choose. TLS 1.3 puts pre_shared_key last (RFC 8446 4.2.11). */
    if (kt_site_count() > 0 && s != NULL && !s->sni_seen)
        return MBEDTLS_ERR_SSL_INVALID_MAC;
    kt_tickets *t = keys_of(s);
    if (t == NULL)
        return MBEDTLS_ERR_SSL_INVALID_MAC;
    kt_lock_acquire(t->lock);
    int rc = mbedtls_ssl_ticket_parse(&t->ctx, session, buf, len);
    kt_lock_release(t->lock);
    if (rc == 0)
        kt_note_ticket_accepted();
    return rc;
}

kt_tickets *kt_tickets_new(uint32_t lifetime_s)
{
    kt_tickets *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    mbedtls_ssl_ticket_init(&t->ctx);
    if ((t->lock = kt_lock_new()) == NULL || kt_rng_init(&t->rng, "tickets", 0) != KEEL_OK)
        goto fail;
    /* AES-256-GCM: the ticket is sealed and authenticated (RFC 5077 4's
     * recommended construction, with an AEAD in place of CBC + HMAC). */
    if (mbedtls_ssl_ticket_setup(&t->ctx, kt_rng_random, &t->rng, MBEDTLS_CIPHER_AES_256_GCM,
                                 lifetime_s) != 0)
        goto fail;
    return t;
fail:
    kt_tickets_free(t);
    return NULL;
}

void kt_tickets_free(kt_tickets *t)
{
    if (t == NULL)
        return;
    mbedtls_ssl_ticket_free(&t->ctx); /* wipes the keys */
    if (t->rng.ready)
        kt_rng_free(&t->rng);
    kt_lock_free(t->lock);
    free(t);
}

void kt_tickets_conf(mbedtls_ssl_config *conf)
{
    if (kt_cfg.tickets_on && (kt_cfg.tickets != NULL || kt_site_count() > 0))
        mbedtls_ssl_conf_session_tickets_cb(conf, ticket_write, ticket_parse, NULL);
}

#else /* no ticket support in this mbedTLS */

kt_tickets *kt_tickets_new(uint32_t lifetime_s)
{
    (void)lifetime_s;
    return NULL;
}
void kt_tickets_free(kt_tickets *t)
{
    (void)t;
}
void kt_tickets_conf(mbedtls_ssl_config *conf)
{
    (void)conf;
}

#endif
