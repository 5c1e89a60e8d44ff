/* alpn.c — ALPN (RFC 7301) on OpenSSL: each worker parses the offers it
 * meets (a listener's `alpn=` option, [tls] alpn, client_alpn) once into
 * the wire form OpenSSL takes, and the select callback (the protocol
 * opened after the handshake is ../tls/transport.c's). SSL_CTX is
 * shared, so the offer is the connection's (ko_session.offer), read by
 * the select callback. */
#include "ko.h"

#include <stdlib.h>
#include <string.h>

static void offer_free(ko_offer *o)
{
    free(o->key);
    free(o->wire);
    free(o->ids);
    free(o);
}

/* "h2, http/1.1" (',' ':' ';' or spaces between ids: a `listen` line
 * splits its words at commas, so a listener writes alpn=h2:http/1.1),
 * keeping on the server only the ids whose protocol is loaded, so that a
 * client is never promised a protocol keel cannot speak. */
static ko_offer *offer_parse(int client, const char *text)
{
    size_t len = strlen(text);
    ko_offer *o = calloc(1, sizeof *o);
    if (o == NULL || (o->key = malloc(len + 1)) == NULL || (o->wire = malloc(len + 1)) == NULL ||
        (o->ids = calloc(1, len + 2)) == NULL) {
        if (o != NULL)
            offer_free(o);
        return NULL;
    }
    memcpy(o->key, text, len + 1);
    size_t at = 0;
    for (const char *p = text; *p;) {
        p += strspn(p, ",:; ");
        size_t n = strcspn(p, ",:; ");
        if (n == 0)
            break;
        char id[256];
        /* RFC 7301 3.1: ids are 1..255 bytes. */
        if (n < sizeof id) {
            memcpy(id, p, n);
            id[n] = '\0';
            if (client || keel_protocol_available(kt_self, kt_alpn_protocol(id))) {
                o->wire[o->wire_len++] = (unsigned char)n;
                memcpy(o->wire + o->wire_len, id, n);
                o->wire_len += (unsigned)n;
                memcpy(o->ids + at, id, n + 1);
                at += n + 1;
            }
        }
        p += n;
    }
    return o;
}

const ko_offer *ko_offer_get(ko_worker *w, int client, const char *text)
{
    ko_offer **list = client ? &w->client_offers : &w->server_offers;
    if (text == NULL)
        text = "";
    for (ko_offer *o = *list; o != NULL; o = o->next)
        if (strcmp(o->key, text) == 0)
            return o;
    ko_offer *o = offer_parse(client, text);
    if (o == NULL)
        return NULL;
    o->next = *list;
    *list = o;
    return o;
}

void ko_offers_free(ko_offer **list)
{
    while (*list != NULL) {
        ko_offer *o = *list;
        *list = o->next;
        offer_free(o);
    }
}

const char *ko_offer_id(const ko_offer *o, const unsigned char *p, size_t len)
{
    for (const char *id = o != NULL ? o->ids : ""; *id; id += strlen(id) + 1)
        if (strlen(id) == len && memcmp(id, p, len) == 0)
            return id;
    return NULL;
}

/* The server's order of preference (as mod_tls); no common protocol: the
 * no_application_protocol alert (RFC 7301 3.2). No offer: no ALPN. */
int ko_alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                   const unsigned char *in, unsigned inlen, void *arg)
{
    (void)arg;
    ko_session *s = SSL_get_app_data(ssl);
    if (s == NULL || s->offer == NULL || s->offer->wire_len == 0)
        return SSL_TLSEXT_ERR_NOACK;
    unsigned char *chosen = NULL;
    if (SSL_select_next_proto(&chosen, outlen, s->offer->wire, s->offer->wire_len, in, inlen) !=
        OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    *out = chosen;
    s->b.alpn = ko_offer_id(s->offer, chosen, *outlen);
    return SSL_TLSEXT_ERR_OK;
}
