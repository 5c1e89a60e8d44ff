/* send.c — writing frames (RFC 6455 5.2; server frames are never masked,
 * 5.1), the close handshake's sending side (5.5.1, 7.1), and the send
 * queue's limits.
 *
 * A small message is framed on the stack and handed to keel_conn_write_copy
 * when nothing is queued: it usually leaves at once and costs no
 * allocation. Otherwise a frame is a record holding its header, written as
 * [header, payload] without copying the payload (the caller's bytes are
 * borrowed until the write's callback, which calls their free_fn), or, for
 * copies and compressed messages, one block holding both.
 *
 * Back-pressure: keel_conn_write_queued is the queue. Over
 * send_queue_limit, a send fails and the peer, which does not read, is
 * dropped (abort: the queue's memory is freed at once; a close frame would
 * only wait behind it). Over send_high_water, the endpoint's on_drain is
 * promised, and kept from a write callback once the queue is below
 * send_low_water.
 */
#include "ws.h"

#include <stdlib.h>
#include <string.h>

/* Messages up to this size are framed on the stack and copied by the core
 * when the queue is empty. */
#define WS_SMALL 1024

size_t ws_frame_header(uint8_t *out, int fin, int rsv1, int opcode, uint64_t len)
{
    out[0] = (uint8_t)((fin ? 0x80 : 0) | (rsv1 ? 0x40 : 0) | (opcode & 15));
    if (len < 126) {
        out[1] = (uint8_t)len;
        return 2;
    }
    if (len < 65536) {
        out[1] = 126;
        out[2] = (uint8_t)(len >> 8);
        out[3] = (uint8_t)len;
        return 4;
    }
    out[1] = 127;
    for (int i = 0; i < 8; i++)
        out[2 + i] = (uint8_t)(len >> (56 - 8 * i));
    return 10;
}

/* ---- Completions ------------------------------------------------------------------- */

static void ws_free_state(keel_ws *ws)
{
    free(ws->msg);
    ws_pmd_free(ws->pmd);
    free(ws->subs);
    free(ws);
}

void ws_release(keel_ws *ws)
{
    ws->dead = 1;
    ws->conn = NULL;
    if (ws->pending == 0)
        ws_free_state(ws);
}

/* Every write we make with a callback counts in ws->pending, so that the
 * callback can look at ws even when it runs after on_close (types.h: a
 * callback may come after the protocol's on_close); the last one frees. */
static void write_done(keel_ws *ws)
{
    ws->pending--;
    if (ws->dead) {
        if (ws->pending == 0)
            ws_free_state(ws);
        return;
    }
    ws_check_drain(ws);
}

void ws_check_drain(keel_ws *ws)
{
    if (!(ws->flags & WS_DRAIN_WANTED) || (ws->flags & (WS_APP_CLOSED | WS_CLOSE_SENT)) || ws->dead)
        return;
    if (keel_conn_write_queued(ws->conn) > ws_g->cfg.send_low_water)
        return;
    ws->flags &= (uint8_t)~WS_DRAIN_WANTED;
    const keel_ws_endpoint *ep = ws->ep->ep;
    if (ep->on_drain)
        ep->on_drain(ws, ep->userdata);
}

typedef struct borrowed { /* a frame whose payload is the caller's */
    keel_ws *ws;
    const void *data;
    keel_free_fn free_fn;
    void *userdata;
    uint8_t hdr[10];
} borrowed;

static void borrowed_done(keel_conn *conn, int status, void *ud)
{
    (void)conn, (void)status;
    borrowed *b = ud;
    if (b->free_fn)
        b->free_fn((void *)b->data, b->userdata);
    keel_ws *ws = b->ws;
    free(b);
    write_done(ws);
}

typedef struct block { /* a frame in one allocation: header + payload */
    keel_ws *ws;
    char bytes[];
} block;

static void block_done(keel_conn *conn, int status, void *ud)
{
    (void)conn, (void)status;
    block *b = ud;
    keel_ws *ws = b->ws;
    free(b);
    write_done(ws);
}

/* ---- Queue limits -------------------------------------------------------------------- */

int ws_queue_check(keel_ws *ws, size_t len)
{
    size_t q = keel_conn_write_queued(ws->conn);
    if (q + len <= ws_g->cfg.send_queue_limit || q == 0)
        return KEEL_OK;
    /* A peer that does not read: drop it (RFC 6455 7.4.1's 1008, policy,
     * is what we would say; it could not read it). */
    keel_log(ws_g->module, KEEL_LOG_DEBUG, "connection %llu: send queue over %llu bytes, closed",
             (unsigned long long)keel_conn_id(ws->conn),
             (unsigned long long)ws_g->cfg.send_queue_limit);
    ws->flags |= WS_CLOSE_SENT | WS_CLOSE_RCVD | WS_DISCARD;
    keel_conn_abort(ws->conn);
    return KEEL_ERR_LIMIT;
}

static void after_write(keel_ws *ws)
{
    if (keel_conn_write_queued(ws->conn) > ws_g->cfg.send_high_water)
        ws->flags |= WS_DRAIN_WANTED;
}

static int usable(keel_ws *ws)
{
    if (!ws || ws->dead || (ws->flags & (WS_CLOSE_SENT | WS_APP_CLOSED)) || !ws->conn)
        return KEEL_ERR_CLOSED;
    return KEEL_OK;
}

/* Writes bufs; obj is the callback's, which frees it, or freed here when
 * the write is refused. Counted in ws->pending until the callback. */
static int write_owned(keel_ws *ws, const keel_buf *bufs, size_t n, keel_write_cb cb, void *obj)
{
    int rc = keel_conn_write(ws->conn, bufs, n, cb, obj);
    if (rc != KEEL_OK) {
        free(obj);
        return rc;
    }
    ws->pending++;
    return KEEL_OK;
}

/* Frames [hdr | data] as one block (a copy), or on the stack when small. */
static int write_copied(keel_ws *ws, const uint8_t *hdr, size_t hlen, const void *data, size_t len)
{
    if (len <= WS_SMALL && keel_conn_write_queued(ws->conn) == 0) {
        uint8_t frame[10 + WS_SMALL];
        memcpy(frame, hdr, hlen);
        if (len)
            memcpy(frame + hlen, data, len);
        return keel_conn_write_copy(ws->conn, frame, hlen + len);
    }
    block *b = malloc(sizeof *b + hlen + len);
    if (!b)
        return KEEL_ERR_NOMEM;
    b->ws = ws;
    memcpy(b->bytes, hdr, hlen);
    if (len)
        memcpy(b->bytes + hlen, data, len);
    keel_buf buf = {b->bytes, hlen + len};
    return write_owned(ws, &buf, 1, block_done, b);
}

/* A whole message, compressed when that was negotiated and it is worth it
 * (RFC 7692 7.2.1: RSV1 on the frame, the 00 00 ff ff tail removed). */
static int send_message(keel_ws *ws, int kind, const void *data, size_t len, keel_free_fn free_fn,
                        void *userdata, int must_copy)
{
    if (ws->pmd && len >= ws_g->cfg.threshold) {
        size_t clen;
        uint8_t *c = ws_pmd_deflate(ws->pmd, data, len, sizeof(block) + 10, &clen);
        if (c) {
            if (free_fn)
                free_fn((void *)data, userdata);
            uint8_t hdr[10];
            size_t hlen = ws_frame_header(hdr, 1, 1, kind, clen);
            /* The compressed bytes sit after room for a block and a header. */
            uint8_t *start = c + sizeof(block) + 10 - hlen;
            int rc = ws_queue_check(ws, hlen + clen);
            if (rc != KEEL_OK) {
                free(c);
                return rc;
            }
            memcpy(start, hdr, hlen);
            block *b = (block *)(void *)c;
            b->ws = ws;
            keel_buf buf = {start, hlen + clen};
            rc = write_owned(ws, &buf, 1, block_done, b);
            if (rc == KEEL_OK)
                after_write(ws);
            return rc;
        }
    }
    uint8_t hdr[10];
    size_t hlen = ws_frame_header(hdr, 1, 0, kind, len);
    int rc = ws_queue_check(ws, hlen + len);
    if (rc != KEEL_OK)
        goto fail;
    if (must_copy || (len <= WS_SMALL && keel_conn_write_queued(ws->conn) == 0)) {
        rc = write_copied(ws, hdr, hlen, data, len);
        if (free_fn)
            free_fn((void *)data, userdata);
        if (rc == KEEL_OK)
            after_write(ws);
        return rc;
    }
    borrowed *b = malloc(sizeof *b);
    if (!b) {
        rc = KEEL_ERR_NOMEM;
        goto fail;
    }
    *b = (borrowed){ws, data, free_fn, userdata, {0}};
    memcpy(b->hdr, hdr, hlen);
    keel_buf bufs[2] = {{b->hdr, hlen}, {data, len}};
    rc = write_owned(ws, bufs, len ? 2 : 1, borrowed_done, b);
    if (rc != KEEL_OK)
        goto fail;
    after_write(ws);
    return KEEL_OK;
fail:
    if (free_fn)
        free_fn((void *)data, userdata);
    return rc;
}

/* ---- The service's sending functions --------------------------------------------------- */

int ws_send(keel_ws *ws, int kind, const void *data, size_t len, keel_free_fn free_fn,
            void *userdata)
{
    int rc = usable(ws);
    if (rc == KEEL_OK && kind != KEEL_WS_TEXT && kind != KEEL_WS_BINARY)
        rc = KEEL_ERR_INVAL;
    if (rc == KEEL_OK && (!data && len))
        rc = KEEL_ERR_INVAL;
    if (rc == KEEL_OK && (ws->flags & WS_OUT_OPEN))
        rc = KEEL_ERR_STATE; /* a streamed message is under way (5.4) */
    if (rc != KEEL_OK) {
        if (free_fn)
            free_fn((void *)data, userdata);
        return rc;
    }
    keel_metric_add(keel_conn_worker(ws->conn), ws_g->m_out, 1);
    return send_message(ws, kind, data, len, free_fn, userdata, 0);
}

int ws_send_copy(keel_ws *ws, int kind, const void *data, size_t len)
{
    int rc = usable(ws);
    if (rc != KEEL_OK)
        return rc;
    if ((kind != KEEL_WS_TEXT && kind != KEEL_WS_BINARY) || (!data && len))
        return KEEL_ERR_INVAL;
    if (ws->flags & WS_OUT_OPEN)
        return KEEL_ERR_STATE;
    keel_metric_add(keel_conn_worker(ws->conn), ws_g->m_out, 1);
    /* One copy at most: the compressor's output, or header and payload in
     * one block (none when the core can write a small frame at once). */
    return send_message(ws, kind, data, len, NULL, NULL, 1);
}

int ws_send_fragment(keel_ws *ws, int kind, const void *data, size_t len, int first, int last)
{
    int rc = usable(ws);
    if (rc != KEEL_OK)
        return rc;
    if (!data && len)
        return KEEL_ERR_INVAL;
    if (first) {
        if (ws->flags & WS_OUT_OPEN)
            return KEEL_ERR_STATE;
        if (kind != KEEL_WS_TEXT && kind != KEEL_WS_BINARY)
            return KEEL_ERR_INVAL;
    } else if (!(ws->flags & WS_OUT_OPEN)) {
        return KEEL_ERR_STATE;
    }
    /* Fragments go uncompressed: RFC 7692 compresses per message, and a
     * message whose first frame has RSV1 clear is simply not compressed. */
    uint8_t hdr[10];
    size_t hlen = ws_frame_header(hdr, last, 0, first ? kind : WS_OP_CONT, len);
    if ((rc = ws_queue_check(ws, hlen + len)) != KEEL_OK)
        return rc;
    if ((rc = write_copied(ws, hdr, hlen, data, len)) != KEEL_OK)
        return rc;
    if (first)
        ws->flags |= WS_OUT_OPEN;
    if (last) {
        ws->flags &= (uint8_t)~WS_OUT_OPEN;
        keel_metric_add(keel_conn_worker(ws->conn), ws_g->m_out, 1);
    }
    after_write(ws);
    return KEEL_OK;
}

int ws_send_shared(keel_ws *ws, const keel_buf *bufs, size_t nbufs, keel_write_cb cb, void *ud)
{
    int rc = usable(ws);
    if (rc != KEEL_OK)
        return rc;
    if (ws->flags & WS_OUT_OPEN)
        return KEEL_ERR_STATE;
    size_t total = 0;
    for (size_t i = 0; i < nbufs; i++)
        total += bufs[i].len;
    if ((rc = ws_queue_check(ws, total)) != KEEL_OK)
        return rc;
    rc = keel_conn_write(ws->conn, bufs, nbufs, cb, ud);
    if (rc == KEEL_OK) {
        keel_metric_add(keel_conn_worker(ws->conn), ws_g->m_out, 1);
        after_write(ws);
    }
    return rc;
}

/* ---- Control frames ---------------------------------------------------------------------- */

static int control(keel_ws *ws, int op, const void *data, size_t len)
{
    if (len > 125 || (!data && len))
        return KEEL_ERR_INVAL; /* 5.5 */
    uint8_t hdr[2];
    ws_frame_header(hdr, 1, 0, op, len);
    return write_copied(ws, hdr, 2, data, len);
}

int ws_ping(keel_ws *ws, const void *data, size_t len)
{
    int rc = usable(ws);
    return rc == KEEL_OK ? control(ws, WS_OP_PING, data, len) : rc;
}

int ws_pong(keel_ws *ws, const void *data, size_t len)
{
    int rc = usable(ws);
    return rc == KEEL_OK ? control(ws, WS_OP_PONG, data, len) : rc;
}

int ws_send_close(keel_ws *ws, int code, const char *reason, size_t reason_len)
{
    if (ws->flags & WS_CLOSE_SENT)
        return KEEL_OK;
    uint8_t body[125];
    size_t n = 0;
    if (code) {
        body[0] = (uint8_t)(code >> 8);
        body[1] = (uint8_t)code;
        if (reason_len > 123)
            reason_len = 123;
        if (reason_len)
            memcpy(body + 2, reason, reason_len);
        n = 2 + reason_len;
    }
    int rc = control(ws, WS_OP_CLOSE, body, n);
    /* Nothing more is sent after a close frame (5.5.1), even if queueing
     * it failed; data frames still arriving are dropped while we wait for
     * the peer's close, at most close_timeout. */
    ws->flags |= WS_CLOSE_SENT | WS_DISCARD;
    if (!(ws->flags & WS_CLOSE_RCVD)) {
        /* A deadline, not only inactivity: a peer that keeps sending
         * without ever answering must not keep the connection (frame.c
         * checks it on every read, the timeout when it goes quiet). */
        ws->close_by_ms =
            keel_worker_now_ms(keel_conn_worker(ws->conn)) + ws_g->cfg.close_timeout_ms;
        keel_conn_set_timeout(ws->conn, ws_g->cfg.close_timeout_ms);
    }
    return rc;
}

int ws_close(keel_ws *ws, int code, const char *reason)
{
    if (!ws || ws->dead || (ws->flags & WS_APP_CLOSED))
        return KEEL_ERR_CLOSED;
    if (ws->flags & WS_CLOSE_SENT)
        return KEEL_OK; /* idempotent */
    size_t rlen = reason ? strlen(reason) : 0;
    if (code == 0)
        code = KEEL_WS_CLOSE_NORMAL;
    /* Codes an endpoint may send (7.4.1, 7.4.2). */
    if (!((code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
          (code >= 3000 && code <= 4999)) ||
        rlen > 123 || ws_utf8_run(WS_UTF8_ACCEPT, (const uint8_t *)reason, rlen) != 0)
        return KEEL_ERR_INVAL;
    return ws_send_close(ws, code, reason, rlen);
}

void ws_fail(keel_ws *ws, int code, const char *reason)
{
    ws_send_close(ws, code, reason, reason ? strlen(reason) : 0);
    ws->flags |= WS_CLOSE_RCVD;
    ws_app_close(ws, KEEL_WS_CLOSE_ABNORMAL, "", 0);
    keel_conn_close(ws->conn);
}

void ws_app_close(keel_ws *ws, int code, const char *reason, size_t reason_len)
{
    if (ws->flags & WS_APP_CLOSED)
        return;
    ws->flags |= WS_APP_CLOSED; /* from here on nothing is sent to it (usable) */
    const keel_ws_endpoint *ep = ws->ep->ep;
    if (ep->on_close && (ws->flags & WS_OPENED))
        ep->on_close(ws, code, reason, reason_len, ep->userdata);
    /* After on_close: what the application publishes there (a chat's
     * "leave") goes out before this connection's topics may become idle,
     * so an observer bridging topics to other instances (pubsub_redis)
     * sees the message before it sees the last subscriber go, and does
     * not close its link in between (found by tests/cluster). */
    ws_unsubscribe_all(ws);
}
