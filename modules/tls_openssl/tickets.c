/* tickets.c — session resumption with tickets (RFC 5077; RFC 8446 4.6.1
 * for TLS 1.3) on OpenSSL, the keys shared by every worker so that a
 * client resumes on whichever worker accepts it (SO_REUSEPORT spreads
 * them), rotated as mod_tls's are: a new key every lifetime, the previous
 * one still decrypts (its tickets are renewed) until it is replaced, so a
 * ticket is honoured for at most twice the lifetime and a stolen key
 * decrypts little (RFC 5077 5.5).
 *
 * SSL_CTX_set_tlsext_ticket_key_evp_cb: OpenSSL seals the ticket with
 * AES-256-CBC and authenticates it with HMAC-SHA256 (RFC 5077 4's
 * recommended construction). The key pair is read and rotated under one
 * lock: one uncontended lock per full handshake or resumption.
 *
 * Each certificate list has its own keys ([tls]'s, each scope's own
 * `tls.cert`): a ticket issued under one site's certificates does not
 * open under another's, whose handshake is then a full one (RFC 8446
 * 4.6.1: resume only where the original certificate would be valid).
 * OpenSSL calls the callback of the SSL's first SSL_CTX whatever SNI
 * switched it to, so the callback takes the keys of the list the
 * session serves (ko_session.served, set by the ClientHello callback
 * before any ticket is opened). */
#include "ko.h"

#include <openssl/core_names.h>
#include <openssl/rand.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct ko_ticket_key {
    unsigned char name[16], aes[32], hmac[32];
    time_t born;
    int set;
} ko_ticket_key;

struct ko_tickets {
    CRYPTO_RWLOCK *lock;
    EVP_CIPHER *aes; /* fetched once: an implicit fetch per ticket costs a provider lookup */
    ko_ticket_key current, previous;
    uint32_t lifetime_s;
};

static int fresh_key(ko_ticket_key *k)
{
    if (RAND_bytes(k->name, sizeof k->name) != 1 || RAND_priv_bytes(k->aes, sizeof k->aes) != 1 ||
        RAND_priv_bytes(k->hmac, sizeof k->hmac) != 1)
        return 0;
    k->born = time(NULL);
    k->set = 1;
    return 1;
}

/* Under the lock. */
static int rotate(ko_tickets *t)
{
    time_t now = time(NULL);
    if (t->current.set && now - t->current.born < (time_t)t->lifetime_s)
        return 1;
    ko_ticket_key next;
    if (!fresh_key(&next))
        return 0;
    t->previous = t->current;
    t->current = next;
    OPENSSL_cleanse(&next, sizeof next);
    return 1;
}

static int set_keys(const ko_tickets *t, const ko_ticket_key *k, unsigned char *iv,
                    EVP_CIPHER_CTX *cipher, EVP_MAC_CTX *mac, int enc)
{
    OSSL_PARAM params[3];
    params[0] =
        OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, (void *)k->hmac, sizeof k->hmac);
    params[1] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0);
    params[2] = OSSL_PARAM_construct_end();
    if (EVP_MAC_CTX_set_params(mac, params) != 1)
        return 0;
    return enc ? EVP_EncryptInit_ex(cipher, t->aes, NULL, k->aes, iv) == 1
               : EVP_DecryptInit_ex(cipher, t->aes, NULL, k->aes, iv) == 1;
}

/* OpenSSL's contract: encrypting, 1 (0: no ticket, -1 on failure);
 * decrypting, 0 for an unknown key (full handshake), 1 valid, 2 valid but
 * renew it. */
static int ticket_cb(SSL *ssl, unsigned char key_name[16], unsigned char iv[16],
                     EVP_CIPHER_CTX *cipher, EVP_MAC_CTX *mac, int enc)
{
    const ko_session *s = SSL_get_app_data(ssl);
    ko_tickets *t = s != NULL && s->served != NULL ? s->served->tickets : NULL;
    ko_ticket_key k;
    int rc = -1;
    if (t == NULL)
        return 0;
    if (!CRYPTO_THREAD_write_lock(t->lock))
        return -1;
    if (!rotate(t)) {
        CRYPTO_THREAD_unlock(t->lock);
        return -1;
    }
    if (enc) {
        k = t->current;
        rc = 1;
    } else if (memcmp(key_name, t->current.name, 16) == 0) {
        k = t->current;
        rc = 1;
    } else if (t->previous.set && memcmp(key_name, t->previous.name, 16) == 0) {
        k = t->previous;
        rc = 2;
    } else {
        rc = 0;
    }
    CRYPTO_THREAD_unlock(t->lock);
    if (rc == 0)
        return 0;
    if (enc) {
        if (RAND_bytes(iv, 16) != 1) {
            OPENSSL_cleanse(&k, sizeof k);
            return -1;
        }
        memcpy(key_name, k.name, 16);
    }
    if (!set_keys(t, &k, iv, cipher, mac, enc))
        rc = -1;
    OPENSSL_cleanse(&k, sizeof k);
    return rc;
}

ko_tickets *ko_tickets_new(uint32_t lifetime_s)
{
    ko_tickets *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    t->lifetime_s = lifetime_s;
    if ((t->lock = CRYPTO_THREAD_lock_new()) == NULL ||
        (t->aes = EVP_CIPHER_fetch(NULL, "AES-256-CBC", NULL)) == NULL || !rotate(t)) {
        ko_tickets_free(t);
        return NULL;
    }
    return t;
}

void ko_tickets_free(ko_tickets *t)
{
    if (t == NULL)
        return;
    CRYPTO_THREAD_lock_free(t->lock);
    EVP_CIPHER_free(t->aes);
    OPENSSL_cleanse(t, sizeof *t);
    free(t);
}

void ko_tickets_conf(SSL_CTX *ctx)
{
    SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, ticket_cb);
}
