/* deflate_ext.c — permessage-deflate (RFC 7692) through the deflate
 * module's service (keel/deflate.h): negotiation, and compressing and
 * decompressing whole messages. Offered only when a deflate module is
 * loaded and [websocket] compression is on.
 *
 * Negotiation (RFC 7692 5, 7.1): the client's offers are tried in order;
 * the first one we can honour is accepted, an offer with an unknown,
 * repeated or invalid parameter is declined (5.1), and the answer never
 * carries a parameter the client did not allow:
 *   server_no_context_takeover  honoured; also sent unasked unless
 *                               compression_context_takeover is on (7.1.1.1
 *                               lets a server do so)
 *   client_no_context_takeover  accepted; also sent unasked unless
 *                               compression_context_takeover is on
 *                               (7.1.1.2: the client must then comply)
 *   server_max_window_bits=N    we compress with min(our window, N); N = 8
 *                               cannot be honoured (zlib's raw deflate does
 *                               not do 8 and would use 9, 7.1.2.1 forbids
 *                               more than N): that offer is declined
 *   client_max_window_bits[=N]  answered with min(our client window, N);
 *                               without it in the offer, it is never
 *                               answered (7.1.2.2) and we inflate with 15.
 *
 * Memory: with no context takeover (the default) both streams are
 * released between messages (keel_deflate_release), so an idle compressed
 * connection holds only this small struct and two empty stream handles.
 */
#include "ws.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <keel/util.h>

struct ws_pmd {
    keel_deflate *tx, *rx; /* created on first use */
    uint8_t tx_bits, rx_bits;
    uint8_t tx_nct, rx_nct; /* no context takeover, each direction */
};

/* ---- Negotiation ------------------------------------------------------------------ */

typedef struct offer {
    int snct, cnct;
    int smwb; /* -1: absent */
    int cmwb; /* -1: absent, 0: present without a value */
} offer;

static int ieq(const char *a, size_t n, const char *b)
{
    return keel_ascii_iequal_z(a, n, b);
}

static void trim(const char **a, const char **b)
{
    while (*a < *b && (**a == ' ' || **a == '\t'))
        (*a)++;
    while (*b > *a && ((*b)[-1] == ' ' || (*b)[-1] == '\t'))
        (*b)--;
}

/* A window size 8..15, as a token or a quoted string (RFC 7692 7.1.2). */
static int bits_value(const char *v, const char *e)
{
    if (e - v >= 2 && *v == '"' && e[-1] == '"')
        v++, e--;
    if (e - v == 1 && *v >= '8' && *v <= '9')
        return *v - '0';
    if (e - v == 2 && v[0] == '1' && v[1] >= '0' && v[1] <= '5')
        return 10 + v[1] - '0';
    return -1;
}

/* Parses one extension element [s, e); 1 if it is a permessage-deflate
 * offer we understand (o filled), 0 if not ours or declined. */
static int parse_offer(const char *s, const char *e, offer *o)
{
    const char *semi = memchr(s, ';', (size_t)(e - s));
    const char *ne = semi ? semi : e, *ns = s;
    trim(&ns, &ne);
    if (!ieq(ns, (size_t)(ne - ns), "permessage-deflate"))
        return 0;
    *o = (offer){0, 0, -1, -1};
    int seen = 0;
    while (semi) {
        const char *ps = semi + 1;
        semi = memchr(ps, ';', (size_t)(e - ps));
        const char *pe = semi ? semi : e;
        const char *eq = memchr(ps, '=', (size_t)(pe - ps));
        const char *kn = ps, *ke = eq ? eq : pe;
        trim(&kn, &ke);
        const char *vs = eq ? eq + 1 : NULL, *ve = pe;
        if (vs)
            trim(&vs, &ve);
        size_t kl = (size_t)(ke - kn);
        int bit;
        if (ieq(kn, kl, "server_no_context_takeover") && !vs)
            bit = 1, o->snct = 1;
        else if (ieq(kn, kl, "client_no_context_takeover") && !vs)
            bit = 2, o->cnct = 1;
        else if (ieq(kn, kl, "server_max_window_bits") && vs && (o->smwb = bits_value(vs, ve)) >= 0)
            bit = 4;
        else if (ieq(kn, kl, "client_max_window_bits") &&
                 (!vs || (o->cmwb = bits_value(vs, ve)) >= 0))
            bit = 8, o->cmwb = vs ? o->cmwb : 0;
        else
            return 0; /* unknown or invalid: decline this offer (5.1) */
        if (seen & bit)
            return 0; /* a parameter twice */
        seen |= bit;
    }
    return 1;
}

struct negotiation {
    const ws_config *cfg;
    ws_pmd *pmd;
    char *answer;
    size_t cap;
    int failed;
};

static int try_offer(const char *s, const char *e, struct negotiation *n)
{
    offer o;
    if (!parse_offer(s, e, &o))
        return 0;
    const ws_config *c = n->cfg;
    int tx_bits = (int)c->window_bits;
    if (o.smwb >= 0) {
        if (o.smwb < 9)
            return 0; /* cannot honour 8: try the next offer */
        if (o.smwb < tx_bits)
            tx_bits = o.smwb;
    }
    int rx_bits = 15, answer_cmwb = -1;
    if (o.cmwb >= 0) {
        answer_cmwb = (int)c->client_window_bits;
        if (o.cmwb > 0 && o.cmwb < answer_cmwb)
            answer_cmwb = o.cmwb;
        rx_bits = answer_cmwb;
    }
    int snct = o.snct || !c->context_takeover, cnct = o.cnct || !c->context_takeover;
    ws_pmd *p = calloc(1, sizeof *p);
    if (!p) {
        n->failed = 1;
        return 1;
    }
    p->tx_bits = (uint8_t)tx_bits;
    p->rx_bits = (uint8_t)(rx_bits < 9 ? 9 : rx_bits); /* a larger window inflates anything */
    p->tx_nct = (uint8_t)snct;
    p->rx_nct = (uint8_t)cnct;
    int len = snprintf(n->answer, n->cap, "permessage-deflate%s%s",
                       snct ? "; server_no_context_takeover" : "",
                       cnct ? "; client_no_context_takeover" : "");
    if (o.smwb >= 0 && len >= 0 && (size_t)len < n->cap)
        len +=
            snprintf(n->answer + len, n->cap - (size_t)len, "; server_max_window_bits=%d", tx_bits);
    if (answer_cmwb >= 0 && len >= 0 && (size_t)len < n->cap)
        snprintf(n->answer + len, n->cap - (size_t)len, "; client_max_window_bits=%d", answer_cmwb);
    n->pmd = p;
    return 1;
}

int ws_pmd_negotiate(keel_request *req, ws_pmd **pmd, char *answer, size_t cap)
{
    struct negotiation n = {&ws_g->cfg, NULL, answer, cap, 0};
    *pmd = NULL;
    answer[0] = '\0';
    size_t count = keel_request_header_count(req);
    keel_header h;
    for (size_t i = 0; i < count && !n.pmd && !n.failed; i++) {
        if (keel_request_header_at(req, i, &h) != KEEL_OK ||
            !ieq(h.name.ptr, h.name.len, "Sec-WebSocket-Extensions"))
            continue;
        const char *s = h.value.ptr, *end = s + h.value.len;
        while (s < end && !n.pmd && !n.failed) {
            /* Elements are separated by commas; our parameters' values
             * never hold one, so a quoted comma only spoils that offer. */
            const char *e = memchr(s, ',', (size_t)(end - s));
            if (!e)
                e = end;
            try_offer(s, e, &n);
            s = e + 1;
        }
    }
    if (n.failed)
        return KEEL_ERR_NOMEM;
    *pmd = n.pmd;
    if (!n.pmd)
        answer[0] = '\0';
    return KEEL_OK;
}

void ws_pmd_free(ws_pmd *pmd)
{
    if (!pmd)
        return;
    if (pmd->tx)
        keel_deflate_free(pmd->tx);
    if (pmd->rx)
        keel_deflate_free(pmd->rx);
    free(pmd);
}

/* ---- Streams -------------------------------------------------------------------------- */

static keel_deflate_params params(int bits)
{
    keel_deflate_params p = {.size = sizeof p,
                             .format = KEEL_DEFLATE_RAW,
                             .level = (int)ws_g->cfg.level,
                             .window_bits = bits,
                             .mem_level = (int)ws_g->cfg.mem_level};
    return p;
}

int ws_pmd_inflate(ws_pmd *pmd, const void *in, size_t len, int last, uint64_t max_out,
                   keel_deflate_out_fn out, void *ud)
{
    if (!pmd->rx) {
        keel_deflate_params p = params(pmd->rx_bits);
        if (!(pmd->rx = keel_deflate_decompressor_new(&p)))
            return KEEL_ERR_NOMEM;
    }
    int rc = len ? keel_deflate_decompress(pmd->rx, in, len, max_out, out, ud) : KEEL_OK;
    if (rc == KEEL_OK && last) {
        /* RFC 7692 7.2.2: the sender removed this empty stored block. */
        static const uint8_t tail[4] = {0x00, 0x00, 0xff, 0xff};
        rc = keel_deflate_decompress(pmd->rx, tail, 4, max_out, out, ud);
    }
    return rc;
}

typedef struct outbuf {
    uint8_t *p;
    size_t len, cap;
} outbuf;

static int collect(void *ud, const void *data, size_t len)
{
    outbuf *o = ud;
    if (o->len + len > o->cap) {
        size_t cap = o->cap * 2;
        while (cap < o->len + len)
            cap *= 2;
        uint8_t *p = realloc(o->p, cap);
        if (!p)
            return KEEL_ERR_NOMEM;
        o->p = p;
        o->cap = cap;
    }
    memcpy(o->p + o->len, data, len);
    o->len += len;
    return KEEL_OK;
}

/* Compresses with a sync flush and strips the 00 00 ff ff it ends with
 * (RFC 7692 7.2.1). The output starts after room bytes. */
static uint8_t *compress(keel_deflate *s, const void *data, size_t len, size_t room,
                         size_t *out_len)
{
    outbuf o = {NULL, room, room + len / 2 + 64};
    if (!(o.p = malloc(o.cap)))
        return NULL;
    if (keel_deflate_compress(s, data, len, KEEL_DEFLATE_SYNC, collect, &o) != KEEL_OK ||
        o.len < room + 4 || memcmp(o.p + o.len - 4, "\x00\x00\xff\xff", 4) != 0) {
        free(o.p);
        return NULL;
    }
    *out_len = o.len - 4 - room;
    return o.p;
}

uint8_t *ws_pmd_deflate(ws_pmd *pmd, const void *data, size_t len, size_t hdr_room, size_t *out_len)
{
    if (!pmd->tx) {
        keel_deflate_params p = params(pmd->tx_bits);
        if (!(pmd->tx = keel_deflate_compressor_new(&p)))
            return NULL;
    }
    uint8_t *c = compress(pmd->tx, data, len, hdr_room, out_len);
    if (pmd->tx_nct) {
        /* No context to keep: give the window back until the next message
         * (and send it uncompressed if compressing did not pay). */
        keel_deflate_release(pmd->tx);
        if (c && *out_len >= len) {
            free(c);
            return NULL;
        }
    }
    /* With context takeover the peer's history must see what ours saw:
     * the compressed form is sent even when it is not smaller. */
    return c;
}

int ws_pmd_shared_bits(const ws_pmd *pmd)
{
    return pmd->tx_nct ? pmd->tx_bits : 0;
}

uint8_t *ws_pmd_deflate_shared(int bits, const void *data, size_t len, size_t *out_len)
{
    keel_deflate_params p = params(bits);
    keel_deflate *s = keel_deflate_compressor_new(&p);
    if (!s)
        return NULL;
    uint8_t *c = compress(s, data, len, 0, out_len);
    keel_deflate_free(s);
    if (c && *out_len >= len) {
        free(c);
        return NULL;
    }
    return c;
}

void ws_pmd_idle(ws_pmd *pmd, int rx)
{
    if (rx && pmd->rx && pmd->rx_nct)
        keel_deflate_release(pmd->rx);
}
