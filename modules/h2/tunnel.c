/* tunnel.c — a stream as a connection (RFC 8441): an extended CONNECT
 * whose handler switches protocols (keel_response_upgrade, as the
 * websocket module's handshake does) is answered 200 (RFC 8441 5: no 101,
 * no Upgrade), and the stream becomes a byte stream that a protocol
 * written for a socket runs over unchanged.
 *
 * The protocol gets a keel_conn of its own from the core
 * (keel_conn_open_tunnel): this file is its transport, as TLS is a
 * socket's. The protocol's writes (on_write) are copied into response
 * body pieces on the stream's queue, where the scheduler sends them as
 * DATA within the peer's windows like any body; until a piece has been
 * written to the connection its bytes count as the tunnel's queued output
 * (queued), which is what keel_conn_write_queued, write_high_water and
 * the pacing of write completions see, and its departure is reported
 * with keel_tunnel_sent. The peer's DATA goes to the protocol with
 * keel_transport_deliver; the stream's window (window.c) is given back as
 * it is delivered while the tunnel reads, and held while it does not (its
 * protocol paused, or its output is over write_high_water:
 * on_read_wanted), so a protocol that stops reading stops its client
 * after one window, and the connection's other streams go on.
 *
 * The ends: the protocol's orderly close (on_shutdown) ends the stream
 * with END_STREAM after what is queued; an abort (on_close without it)
 * with RST_STREAM CANCEL. The client's END_STREAM is the protocol's EOF
 * (keel_tunnel_eof); its RST_STREAM, GOAWAY's end, or the connection's
 * end close the stream, which aborts the tunnel (h2_tunnel_stream_gone):
 * the protocol's on_close. The tunnel's state outlives whichever of the
 * stream and the connection goes first, and the pieces still in flight.
 */
#include "h2.h"

#include <stdlib.h>
#include <string.h>

struct h2_tunnel {
    h2_stream *s;    /* NULL once the stream is gone */
    keel_conn *conn; /* the protocol's connection; NULL once its transport closed */
    h2_worker *w;    /* for the metrics after the stream is gone */
    uint64_t queued; /* bytes taken by on_write and not yet written */
    uint64_t unread; /* delivered while not reading: the stream's window held */
    unsigned chunks; /* pieces whose callbacks are still owed */
    unsigned wanted : 1;
    unsigned shut : 1; /* orderly close: END_STREAM after the queue */
};

/* The bytes of one on_write, a body piece's. */
typedef struct tunnel_chunk {
    h2_tunnel *t;
    size_t len;
    char data[];
} tunnel_chunk;

static void tunnel_maybe_free(h2_tunnel *t)
{
    if (t->s == NULL && t->conn == NULL && t->chunks == 0)
        free(t);
}

/* The stream forgets the tunnel; what the protocol's delivery held goes
 * back to the windows' accounting (body_buffered). */
static void unlink_stream(h2_tunnel *t)
{
    h2_stream *s = t->s;
    if (s == NULL)
        return;
    if (t->unread > 0) {
        h2_window_read(s, t->unread);
        t->unread = 0;
    }
    s->tunnel = NULL;
    t->s = NULL;
}

/* ---- the tunnel's transport ------------------------------------------------------- */

static int t_open(keel_conn *conn)
{
    h2_tunnel *t = keel_conn_transport_data(conn);
    t->conn = conn;
    keel_metric_add(t->w->worker, t->w->mod->m.open_tunnels, 1);
    return KEEL_OK;
}

static void chunk_written(keel_conn *carrier, int status, void *ud)
{
    tunnel_chunk *ch = ud;
    h2_tunnel *t = ch->t;
    (void)carrier, (void)status;
    t->queued -= ch->len;
    t->chunks--;
    free(ch);
    if (t->conn != NULL)
        keel_tunnel_sent(t->conn);
    tunnel_maybe_free(t);
}

static int t_write(keel_conn *conn, const keel_buf *bufs, size_t nbufs)
{
    h2_tunnel *t = keel_conn_transport_data(conn);
    h2_stream *s = t->s;
    if (s == NULL || s->closed || s->resp_ended || s->c->closing)
        return KEEL_ERR_CLOSED;
    h2_conn *c = s->c;
    size_t total = 0;
    for (size_t i = 0; i < nbufs; i++)
        total += bufs[i].len;
    if (total == 0)
        return KEEL_OK;
    /* Copied: the protocol's buffers are released when this returns (the
     * transport contract); the piece borrows the copy until written. */
    tunnel_chunk *ch = malloc(sizeof *ch + total);
    h2_piece *p = ch != NULL ? h2_piece_new(c, chunk_written, ch) : NULL;
    if (p == NULL) {
        free(ch);
        return KEEL_ERR_NOMEM;
    }
    ch->t = t;
    ch->len = total;
    size_t at = 0;
    for (size_t i = 0; i < nbufs; i++) {
        if (bufs[i].len > 0)
            memcpy(ch->data + at, bufs[i].base, bufs[i].len);
        at += bufs[i].len;
    }
    p->bufs[0] = (keel_buf){ch->data, total};
    p->nbufs = 1;
    h2_stream_queue(s, p, total);
    t->queued += total;
    t->chunks++;
    h2_ready(s);
    h2_pump(c);
    return KEEL_OK;
}

static uint64_t t_queued(keel_conn *conn)
{
    h2_tunnel *t = keel_conn_transport_data(conn);
    return t->queued;
}

static void t_read_wanted(keel_conn *conn, int wanted)
{
    h2_tunnel *t = keel_conn_transport_data(conn);
    t->wanted = wanted != 0;
    h2_stream *s = t->s;
    if (!wanted || s == NULL || t->unread == 0)
        return;
    /* RFC 9113 6.9: the window the protocol's pause held goes back now. */
    h2_window_read(s, t->unread);
    t->unread = 0;
    h2_pump(s->c);
}

static void t_shutdown(keel_conn *conn)
{
    h2_tunnel *t = keel_conn_transport_data(conn);
    t->shut = 1;
    h2_stream *s = t->s;
    if (s == NULL || s->closed || s->resp_ended)
        return;
    /* END_STREAM once the queue has gone (send.c): RFC 9113 8.5's orderly
     * end of a tunnel, a TCP FIN's equivalent. */
    s->resp_ended = 1;
    h2_ready(s);
    h2_pump(s->c);
}

static void t_close(keel_conn *conn)
{
    h2_tunnel *t = keel_conn_transport_data(conn);
    t->conn = NULL;
    keel_metric_add(t->w->worker, t->w->mod->m.open_tunnels, -1);
    h2_stream *s = t->s;
    if (s != NULL) {
        unlink_stream(t);
        /* Aborted (a timeout, keel_conn_abort, the protocol's refusal):
         * nothing more will come; the client hears it (RFC 8441 inherits
         * RFC 9113 8.5's RST_STREAM for a tunnel that fails). What the
         * client still sends on the stream is unread (input.c). */
        if (!t->shut && !s->closed)
            h2_stream_reset(s, H2_CANCEL);
    }
    tunnel_maybe_free(t);
}

static const keel_transport tunnel_transport = {
    .size = sizeof(keel_transport),
    .name = "h2-stream",
    .on_open = t_open,
    .on_write = t_write,
    .on_shutdown = t_shutdown,
    .on_close = t_close,
    .queued = t_queued,
    .on_read_wanted = t_read_wanted,
};

/* ---- the stream's side --------------------------------------------------------------- */

/* Hands n bytes to the protocol; the stream's window goes back now if it
 * reads, else when it does again. */
static void deliver(h2_tunnel *t, const uint8_t *data, size_t n, int held)
{
    h2_stream *s = t->s;
    int rc = keel_transport_deliver(t->conn, data, n);
    if (rc != KEEL_OK) {
        if (held)
            h2_window_read(s, n);
        else
            h2_window_back(s, n);
        /* Closing already: the protocol reads nothing more. Else past
         * [keel] read_buffer_max: a protocol not consuming what it let in. */
        if (rc != KEEL_ERR_CLOSED)
            keel_conn_abort(t->conn);
        return;
    }
    if (t->wanted) {
        if (held)
            h2_window_read(s, n);
        else
            h2_window_back(s, n);
    } else {
        if (!held)
            h2_window_hold(s, n);
        t->unread += n;
    }
}

void h2_tunnel_data(h2_stream *s, const uint8_t *data, size_t len)
{
    s->progress_ms = keel_worker_now_ms(s->c->w->worker);
    h2_tunnel *t = s->tunnel;
    if (t != NULL && t->conn != NULL) {
        deliver(t, data, len, 0);
        return;
    }
    /* Before the handler has answered: kept, with the stream's window, for
     * the protocol it may switch to (a client may send before the 200). */
    h2_stream_hold_data(s, data, len);
}

void h2_tunnel_remote_end(h2_stream *s)
{
    h2_tunnel *t = s->tunnel;
    if (t != NULL && t->conn != NULL)
        keel_tunnel_eof(t->conn);
}

void h2_tunnel_conn_eof(h2_conn *c)
{
    /* A protocol may close at its EOF, and its end would send END_STREAM
     * and free streams under this walk: what it wants sent waits for the
     * caller's h2_pump. */
    c->depth++;
    for (h2_stream *s = c->streams; s != NULL; s = s->next)
        if (s->tunnel != NULL && !s->remote_ended && !s->closed)
            h2_tunnel_remote_end(s);
    c->depth--;
}

void h2_tunnel_stream_gone(h2_stream *s)
{
    h2_tunnel *t = s->tunnel;
    if (t == NULL)
        return;
    unlink_stream(t);
    if (t->conn != NULL)
        keel_conn_abort(t->conn); /* the protocol's on_close, from the loop */
    tunnel_maybe_free(t);
}

int h2_tunnel_upgrade(void *exchange, int status, const keel_header *headers, size_t nheaders,
                      const char *protocol, void *arg)
{
    h2_stream *s = exchange;
    h2_conn *c = s->c;
    (void)status; /* the core's 101: RFC 8441 5 answers with 2xx instead */
    if (!s->exchange || s->final_sent)
        return KEEL_ERR_STATE;
    if (!s->ext_connect)
        return KEEL_ERR_UNSUPPORTED; /* RFC 9113 8.6: no 101 in HTTP/2 */
    if (c->closing || s->closed || s->reset_pending)
        return KEEL_ERR_CLOSED;
    h2_tunnel *t = calloc(1, sizeof *t);
    if (t == NULL)
        return KEEL_ERR_NOMEM;
    t->w = c->w;
    size_t len;
    /* 200 with the handler's fields: Upgrade and Connection are dropped
     * as connection-specific (RFC 9113 8.2.2), no content-length. */
    if (h2_encode_head(s, 200, headers, nheaders, -1, NULL, 0, &len) == NULL) {
        free(t);
        return KEEL_ERR_NOMEM;
    }
    /* The head goes first: anything the protocol writes from its on_open
     * queues behind it. */
    s->head_sent = s->final_sent = s->has_data = 1;
    s->no_body = 0;
    s->resp_left = -1;
    h2_stream_hold(s);
    t->s = s;
    s->tunnel = t;
    s->busy++;
    keel_conn *conn;
    int rc = keel_conn_open_tunnel(c->conn, &tunnel_transport, t, protocol, arg, &conn);
    if (rc != KEEL_OK && t->conn == NULL) {
        /* Nothing was opened: the exchange is as it was. */
        h2_stream_unhold(s);
        s->head_sent = s->final_sent = s->has_data = 0;
        s->tunnel = NULL;
        free(t);
        s->busy--;
        return rc;
    }
    /* Handed over (the protocol may have refused in its on_open: the
     * stream is then reset when the transport closes). The exchange is
     * given up as `done` would. */
    s->exchange = 0;
    s->req = NULL;
    h2_count(c, c->w->mod->m.tunnels);
    if (rc == KEEL_OK && s->body_len > 0) {
        deliver(t, (const uint8_t *)s->body, s->body_len, 1);
        s->body_len = 0;
        free(s->body);
        s->body = NULL;
        s->body_cap = 0;
    }
    if (rc == KEEL_OK && s->remote_ended)
        h2_tunnel_remote_end(s);
    h2_pump(c);
    s->busy--;
    h2_stream_maybe_free(s);
    return KEEL_OK;
}
