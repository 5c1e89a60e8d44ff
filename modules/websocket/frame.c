/* frame.c — reading frames (RFC 6455 5): the protocol's on_data.
 *
 * Bytes are consumed as they are parsed, so the core's read buffer goes
 * back to its pool as soon as a read is processed; what a connection keeps
 * between reads is its frame state in struct keel_ws (remaining payload,
 * mask position, UTF-8 state) and, only while a message spans reads or
 * frames, its reassembly buffer. Two things are left unconsumed until they
 * are whole, because they are tiny and need no copy that way: a frame
 * header (at most 14 bytes) and a control frame (at most 131 bytes).
 *
 * A whole unfragmented, uncompressed data frame that arrived in one read is
 * handed to on_message straight from the read buffer, unmasked in place: no
 * copy, no allocation. Unmasking writes into the buffer the core passed as
 * const; the bytes are ours once we report them consumed and nobody reads
 * them after us, so we unmask exactly the bytes this call consumes (never
 * ones left for the next call, which would be unmasked twice).
 *
 * Every rule is checked as early as the bytes allow (RFC 6455 5.2, 5.4,
 * 5.5, 7.4), with the close code of 7.4.1: 1002 for protocol errors, 1007
 * for invalid UTF-8, 1009 for frames and messages over the limits.
 */
#include "ws.h"

#include <stdlib.h>
#include <string.h>

void ws_unmask(uint8_t *p, size_t len, const uint8_t mask[4], uint8_t *off)
{
    uint8_t o = *off;
    size_t i = 0;
    if (len >= 8) {
        /* The mask rotated to the current offset, twice: eight bytes. */
        uint8_t m8[8];
        for (int k = 0; k < 8; k++)
            m8[k] = mask[(o + k) & 3];
        uint64_t m;
        memcpy(&m, m8, 8);
        for (; i + 8 <= len; i += 8) {
            uint64_t w;
            memcpy(&w, p + i, 8); /* no alignment assumption */
            w ^= m;
            memcpy(p + i, &w, 8);
        }
    }
    for (; i < len; i++)
        p[i] ^= mask[(o + i) & 3];
    *off = (uint8_t)((o + len) & 3);
}

/* RFC 6455 7.4.1 and 7.4.2, with the IANA registry's 1012..1014: the
 * codes a close frame may carry. 1004 is reserved; 1005, 1006 and 1015
 * must never be sent; 0..999 are unused; 1016..2999 are for future
 * standards. */
static int close_code_valid(unsigned code)
{
    return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
           (code >= 3000 && code <= 4999);
}

/* ---- Messages ---------------------------------------------------------------- */

static void msg_reset(keel_ws *ws)
{
    free(ws->msg);
    ws->msg = NULL;
    if (ws->pmd && ws->msg_rsv1)
        ws_pmd_idle(ws->pmd, 1);
    ws->msg_kind = 0;
    ws->msg_rsv1 = 0;
    ws->msg_len = 0;
    ws->utf8 = WS_UTF8_ACCEPT;
    ws->carry_n = 0;
    ws->first_sent = 0;
}

static const keel_ws_endpoint *endpoint(keel_ws *ws)
{
    return ws->ep->ep;
}

static int append(keel_ws *ws, const uint8_t *p, size_t n)
{
    ws_buf *b = ws->msg;
    size_t need = (b ? b->len : 0) + n;
    if (!b || need > b->cap) {
        size_t cap = b ? b->cap * 2 : 256;
        while (cap < need)
            cap *= 2;
        if (cap > ws_g->cfg.max_message && need <= ws_g->cfg.max_message)
            cap = (size_t)ws_g->cfg.max_message;
        ws_buf *nb = realloc(b, sizeof *nb + cap);
        if (!nb)
            return KEEL_ERR_NOMEM;
        if (!b)
            nb->len = 0;
        nb->cap = cap;
        ws->msg = b = nb;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    return KEEL_OK;
}

static void fragment_out(keel_ws *ws, const uint8_t *p, size_t n, int last)
{
    const keel_ws_endpoint *ep = endpoint(ws);
    if (n == 0 && !last)
        return;
    int first = !ws->first_sent;
    ws->first_sent = 1;
    ep->on_fragment(ws, ws->msg_kind, (const char *)p, n, first, last, ep->userdata);
}

/* Streaming text must end each piece on a character boundary: the bytes
 * of a character split across pieces wait in ws->carry (at most 3). The
 * text has been validated already. */
static void fragment_text(keel_ws *ws, const uint8_t *p, size_t n)
{
    if (ws->carry_n) {
        uint8_t lead = ws->carry[0];
        size_t want = (lead >= 0xF0 ? 4u : lead >= 0xE0 ? 3u : 2u) - ws->carry_n;
        if (n < want) {
            memcpy(ws->carry + ws->carry_n, p, n);
            ws->carry_n = (uint8_t)(ws->carry_n + n);
            return;
        }
        uint8_t ch[4];
        memcpy(ch, ws->carry, ws->carry_n);
        memcpy(ch + ws->carry_n, p, want);
        size_t chn = ws->carry_n + want;
        ws->carry_n = 0;
        fragment_out(ws, ch, chn, 0);
        p += want;
        n -= want;
    }
    size_t tail = ws_utf8_tail(p, n);
    fragment_out(ws, p, n - tail, 0);
    memcpy(ws->carry, p + n - tail, tail);
    ws->carry_n = (uint8_t)tail;
}

/* Message bytes (decompressed): validated, counted, kept or streamed. */
static int message_bytes(keel_ws *ws, const uint8_t *p, size_t n)
{
    if (ws->flags & (WS_DISCARD | WS_CLOSE_RCVD))
        return KEEL_OK;
    if (ws->msg_kind == KEEL_WS_TEXT) {
        ws->utf8 = ws_utf8_run(ws->utf8, p, n);
        if (ws->utf8 == WS_UTF8_REJECT) {
            ws_fail(ws, KEEL_WS_CLOSE_INVALID_DATA, "invalid UTF-8");
            return KEEL_ERR_PROTOCOL;
        }
    }
    ws->msg_len += n;
    if (endpoint(ws)->on_fragment) {
        if (ws->msg_kind == KEEL_WS_TEXT)
            fragment_text(ws, p, n);
        else
            fragment_out(ws, p, n, 0);
        return KEEL_OK;
    }
    if (ws->msg_len > ws_g->cfg.max_message) {
        ws_fail(ws, KEEL_WS_CLOSE_TOO_BIG, "message too big");
        return KEEL_ERR_LIMIT;
    }
    if (n && append(ws, p, n) != KEEL_OK) {
        ws_fail(ws, KEEL_WS_CLOSE_INTERNAL, "out of memory");
        return KEEL_ERR_NOMEM;
    }
    return KEEL_OK;
}

static int inflated(void *ud, const void *data, size_t len)
{
    return message_bytes(ud, data, len);
}

static void message_end(keel_ws *ws)
{
    if (ws->flags & (WS_DISCARD | WS_CLOSE_RCVD)) {
        msg_reset(ws);
        return;
    }
    /* A text message must not end inside a character (RFC 6455 8.1). */
    if (ws->msg_kind == KEEL_WS_TEXT && ws->utf8 != WS_UTF8_ACCEPT) {
        ws_fail(ws, KEEL_WS_CLOSE_INVALID_DATA, "invalid UTF-8");
        return;
    }
    const keel_ws_endpoint *ep = endpoint(ws);
    keel_metric_add(keel_conn_worker(ws->conn), ws_g->m_in, 1);
    if (ep->on_fragment) {
        fragment_out(ws, (const uint8_t *)"", 0, 1);
    } else if (ep->on_message) {
        ep->on_message(ws, ws->msg_kind, ws->msg ? ws->msg->data : "", ws->msg ? ws->msg->len : 0,
                       ep->userdata);
    }
    msg_reset(ws);
}

/* One piece of the current frame's payload, unmasked. */
static int payload(keel_ws *ws, uint8_t *p, size_t n, int frame_end)
{
    int msg_end = frame_end && ws->frame_fin;
    if (ws->flags & (WS_DISCARD | WS_CLOSE_RCVD))
        return KEEL_OK;
    if (ws->msg_rsv1) {
        /* RFC 7692 7.2.2: the message's compressed bytes, then 00 00 ff ff
         * (appended by ws_pmd_inflate at the end); the output is capped so
         * a small input cannot inflate without end (1009). */
        uint64_t cap =
            endpoint(ws)->on_fragment ? ws_g->cfg.max_frame : ws_g->cfg.max_message - ws->msg_len;
        int rc = ws_pmd_inflate(ws->pmd, p, n, msg_end, cap + 1, inflated, ws);
        if (rc == KEEL_ERR_LIMIT) {
            ws_fail(ws, KEEL_WS_CLOSE_TOO_BIG, "message too big");
            return rc;
        }
        if (rc == KEEL_ERR_PROTOCOL) {
            ws_fail(ws, KEEL_WS_CLOSE_INVALID_DATA, "invalid compressed data");
            return rc;
        }
        if (rc < 0) {
            if (!(ws->flags & WS_CLOSE_RCVD)) /* not failed by message_bytes already */
                ws_fail(ws, KEEL_WS_CLOSE_INTERNAL, "decompression failed");
            return rc;
        }
    } else if (message_bytes(ws, p, n) < 0) {
        return KEEL_ERR_PROTOCOL;
    }
    if (msg_end)
        message_end(ws);
    return KEEL_OK;
}

/* ---- Control frames (RFC 6455 5.5) ---------------------------------------------- */

static void control(keel_ws *ws, int op, uint8_t *p, size_t n)
{
    const keel_ws_endpoint *ep = endpoint(ws);
    if (op == WS_OP_PING) {
        /* 5.5.3: answer with the same payload, unless we are closing. */
        if (!(ws->flags & WS_CLOSE_SENT))
            ws_pong(ws, p, n);
        return;
    }
    if (op == WS_OP_PONG) {
        if (ep->on_pong && !(ws->flags & WS_DISCARD)) {
            ep->on_pong(ws, (const char *)p, n, ep->userdata);
        }
        return;
    }
    /* Close (5.5.1): an optional code, then an optional UTF-8 reason. */
    unsigned code = KEEL_WS_CLOSE_NO_STATUS;
    if (n == 1) {
        ws_fail(ws, KEEL_WS_CLOSE_PROTOCOL_ERROR, "close frame of one byte");
        return;
    }
    if (n >= 2) {
        code = (unsigned)p[0] << 8 | p[1];
        if (!close_code_valid(code)) {
            ws_fail(ws, KEEL_WS_CLOSE_PROTOCOL_ERROR, "invalid close code");
            return;
        }
        if (ws_utf8_run(WS_UTF8_ACCEPT, p + 2, n - 2) != WS_UTF8_ACCEPT) {
            ws_fail(ws, KEEL_WS_CLOSE_INVALID_DATA, "invalid UTF-8 in the close reason");
            return;
        }
    }
    ws->flags |= WS_CLOSE_RCVD;
    /* Echo the code (5.5.1); an empty close answers an empty one. */
    if (!(ws->flags & WS_CLOSE_SENT))
        ws_send_close(ws, n >= 2 ? (int)code : 0, NULL, 0);
    ws_app_close(ws, (int)code, n > 2 ? (const char *)p + 2 : "", n > 2 ? n - 2 : 0);
    /* 7.1.1: after the closing handshake the server closes TCP first. */
    keel_conn_close(ws->conn);
}

/* ---- Headers -------------------------------------------------------------------- */

enum { NEED_MORE = 1 };

/* Parses the header at p (avail bytes). 0 with *hlen and the frame fields
 * set, NEED_MORE, or a negative status once the connection was failed. */
static int header(keel_ws *ws, const uint8_t *p, size_t avail, size_t *hlen, uint64_t *plen)
{
    if (avail < 2)
        return NEED_MORE;
    int fin = p[0] >> 7, rsv = (p[0] >> 4) & 7, op = p[0] & 15;
    int masked = p[1] >> 7, l7 = p[1] & 127;
    int is_control = op >= 8;

    /* What two bytes already tell (fail fast). */
    if (!(op <= WS_OP_BINARY || (op >= WS_OP_CLOSE && op <= WS_OP_PONG)))
        return ws_fail(ws, KEEL_WS_CLOSE_PROTOCOL_ERROR, "unknown opcode"), KEEL_ERR_PROTOCOL;
    /* 5.2: RSV bits only as an extension defines them; permessage-deflate
     * uses RSV1 on a message's first frame (RFC 7692 6). */
    if ((rsv & 3) || ((rsv & 4) && (!ws->pmd || is_control || op == WS_OP_CONT)))
        return ws_fail(ws, KEEL_WS_CLOSE_PROTOCOL_ERROR, "reserved bit set"), KEEL_ERR_PROTOCOL;
    /* 5.1: every client frame is masked. */
    if (!masked)
        return ws_fail(ws, KEEL_WS_CLOSE_PROTOCOL_ERROR, "unmasked frame"), KEEL_ERR_PROTOCOL;
    if (is_control && (!fin || l7 > 125))
        return ws_fail(ws, KEEL_WS_CLOSE_PROTOCOL_ERROR, "invalid control frame"),
               KEEL_ERR_PROTOCOL;
    /* 5.4: continuation only within a message, new data only outside one. */
    if (!(ws->flags & WS_DISCARD)) {
        if (op == WS_OP_CONT && !ws->msg_kind)
            return ws_fail(ws, KEEL_WS_CLOSE_PROTOCOL_ERROR, "continuation without a message"),
                   KEEL_ERR_PROTOCOL;
        if ((op == WS_OP_TEXT || op == WS_OP_BINARY) && ws->msg_kind)
            return ws_fail(ws, KEEL_WS_CLOSE_PROTOCOL_ERROR, "new message inside a message"),
                   KEEL_ERR_PROTOCOL;
    }

    size_t n = 2 + (l7 == 126 ? 2 : l7 == 127 ? 8 : 0) + 4;
    if (avail < n)
        return NEED_MORE;
    uint64_t len = (uint64_t)l7;
    if (l7 == 126) {
        len = (uint64_t)p[2] << 8 | p[3];
        if (len < 126)
            return ws_fail(ws, KEEL_WS_CLOSE_PROTOCOL_ERROR, "non-minimal length"),
                   KEEL_ERR_PROTOCOL;
    } else if (l7 == 127) {
        len = 0;
        for (int i = 0; i < 8; i++)
            len = len << 8 | p[2 + i];
        /* 5.2: the most significant bit must be 0; and minimal form. */
        if ((len >> 63) || len < 65536)
            return ws_fail(ws, KEEL_WS_CLOSE_PROTOCOL_ERROR, "non-minimal length"),
                   KEEL_ERR_PROTOCOL;
    }
    if (len > ws_g->cfg.max_frame)
        return ws_fail(ws, KEEL_WS_CLOSE_TOO_BIG, "frame too big"), KEEL_ERR_LIMIT;
    memcpy(ws->mask, p + n - 4, 4);
    ws->mask_off = 0;
    ws->frame_op = (uint8_t)op;
    ws->frame_fin = (uint8_t)fin;
    if ((op == WS_OP_TEXT || op == WS_OP_BINARY) && !(ws->flags & WS_DISCARD)) {
        ws->msg_kind = (uint8_t)op;
        ws->msg_rsv1 = (uint8_t)((rsv & 4) != 0);
        ws->msg_len = 0;
        ws->utf8 = WS_UTF8_ACCEPT;
    }
    *hlen = n;
    *plen = len;
    return 0;
}

/* ---- on_data ---------------------------------------------------------------------- */

int ws_on_data(keel_conn *conn, const char *data, size_t len, size_t *consumed)
{
    keel_ws *ws = keel_conn_data(conn);
    uint8_t *p = (uint8_t *)(uintptr_t)data; /* see the top of this file */
    size_t pos = 0;
    ws->last_read_ms = keel_worker_now_ms(keel_conn_worker(conn));
    if ((ws->flags & (WS_CLOSE_SENT | WS_CLOSE_RCVD)) == WS_CLOSE_SENT &&
        ws->last_read_ms >= ws->close_by_ms) {
        keel_conn_abort(conn); /* close_timeout passed without the peer's close */
        *consumed = len;
        return KEEL_OK;
    }

    for (;;) {
        if (ws->flags & WS_CLOSE_RCVD) {
            pos = len; /* nothing after a close frame counts (5.5.1) */
            break;
        }
        if (ws->state == WS_HEADER) {
            size_t hlen;
            uint64_t plen;
            int rc = header(ws, p + pos, len - pos, &hlen, &plen);
            if (rc == NEED_MORE)
                break;
            if (rc < 0) {
                pos = len;
                break;
            }
            if (ws->frame_op >= WS_OP_CLOSE) {
                /* Whole control frames only: at most 131 bytes wait. */
                if (len - pos < hlen + plen)
                    break;
                uint8_t *pl = p + pos + hlen;
                ws_unmask(pl, (size_t)plen, ws->mask, &ws->mask_off);
                pos += hlen + (size_t)plen;
                control(ws, ws->frame_op, pl, (size_t)plen);
                continue;
            }
            pos += hlen;
            const keel_ws_endpoint *ep = endpoint(ws);
            if (ws->frame_fin && ws->frame_op != WS_OP_CONT && !ws->msg_rsv1 && !ep->on_fragment &&
                plen <= len - pos && !(ws->flags & WS_DISCARD)) {
                /* The fast path: a whole message in this read. */
                uint8_t *pl = p + pos;
                ws_unmask(pl, (size_t)plen, ws->mask, &ws->mask_off);
                pos += (size_t)plen;
                if (plen > ws_g->cfg.max_message) {
                    ws_fail(ws, KEEL_WS_CLOSE_TOO_BIG, "message too big");
                    pos = len;
                    break;
                }
                if (ws->msg_kind == KEEL_WS_TEXT &&
                    ws_utf8_run(WS_UTF8_ACCEPT, pl, (size_t)plen) != WS_UTF8_ACCEPT) {
                    ws_fail(ws, KEEL_WS_CLOSE_INVALID_DATA, "invalid UTF-8");
                    pos = len;
                    break;
                }
                keel_metric_add(keel_conn_worker(conn), ws_g->m_in, 1);
                if (ep->on_message) {
                    ep->on_message(ws, ws->msg_kind, (const char *)pl, (size_t)plen, ep->userdata);
                }
                ws->msg_kind = 0;
                continue;
            }
            ws->remaining = plen;
            ws->state = WS_PAYLOAD;
        }
        /* WS_PAYLOAD: as much of the payload as this read holds. */
        size_t n = len - pos < ws->remaining ? len - pos : (size_t)ws->remaining;
        if (n == 0 && ws->remaining > 0)
            break;
        ws_unmask(p + pos, n, ws->mask, &ws->mask_off);
        ws->remaining -= n;
        int end = ws->remaining == 0;
        if (end)
            ws->state = WS_HEADER;
        payload(ws, p + pos, n, end); /* a failure sets WS_CLOSE_RCVD: see above */
        pos += n;
    }
    *consumed = pos;
    return KEEL_OK;
}
