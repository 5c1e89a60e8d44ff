/* window.c — the receive windows (RFC 9113 5.2, 6.9): what the peer may
 * still send us, on the connection and on each stream, and when it gets
 * more (WINDOW_UPDATE). Every change to a receive window is made here; the
 * peer's windows (what we may send) are the scheduler's (send.c).
 *
 * HTTP/2 cannot stop one stream's sender except by not giving back its
 * window. So a stream's window is given back only as its handler takes
 * the body (or as bytes nobody will read are dropped), in steps of half the
 * window; the connection's is given back on arrival, so that a handler
 * slow to read holds back its own client and not the other streams, until
 * the connection holds more unread body than [h2] body_buffer: then it too
 * goes back only as handlers read. A paused body (keel_request_body_pause)
 * is one whose handler does not read.
 */
#include "state.h"

void h2_window_conn_init(h2_conn *c)
{
    c->recv_window = c->w->cfg->conn_window;
}

void h2_window_open(h2_conn *c)
{
    /* 6.9.2: the connection's window starts at 65,535 whatever SETTINGS
     * say; only WINDOW_UPDATE widens it. */
    const h2_config *cfg = c->w->cfg;
    if (cfg->conn_window > H2_DEFAULT_WINDOW)
        h2_send_window_update(c, 0, cfg->conn_window - H2_DEFAULT_WINDOW);
}

void h2_window_stream_init(h2_stream *s)
{
    /* Until our SETTINGS are acknowledged the client may count on 65,535
     * (6.9.2); h2_window_settings_acked takes the difference off. */
    const h2_conn *c = s->c;
    s->recv_window = c->w->cfg->initial_window;
    if (!c->settings_acked && s->recv_window < H2_DEFAULT_WINDOW) {
        s->recv_window = H2_DEFAULT_WINDOW;
        s->early = 1;
    }
}

void h2_window_settings_acked(h2_conn *c)
{
    const h2_config *cfg = c->w->cfg;
    if (cfg->initial_window >= H2_DEFAULT_WINDOW)
        return;
    for (h2_stream *s = c->streams; s != NULL; s = s->next) {
        if (s->early) {
            s->recv_window -= (int64_t)(H2_DEFAULT_WINDOW - cfg->initial_window);
            s->early = 0;
        }
    }
}

int h2_window_take_conn(h2_conn *c, uint32_t length)
{
    /* 6.9.1: the whole payload, padding too, counts against both windows. */
    if ((int64_t)length > c->recv_window)
        return -1;
    c->recv_window -= length;
    return 0;
}

int h2_window_take_stream(h2_stream *s, uint32_t length)
{
    if ((int64_t)length > s->recv_window)
        return -1;
    s->recv_window -= length;
    return 0;
}

int h2_window_spent(const h2_stream *s)
{
    return s->recv_window <= 0;
}

int h2_window_can_carry(const h2_stream *s, int64_t left)
{
    return left <= s->recv_window && left <= s->c->recv_window;
}

void h2_window_conn_back(h2_conn *c, size_t n)
{
    /* The connection's window goes back in steps of half of it, so a
     * stream of small DATA frames costs few WINDOW_UPDATEs. */
    c->recv_window += (int64_t)n;
    c->recv_unacked += (uint32_t)n;
    if (c->recv_unacked >= c->w->cfg->conn_window / 2) {
        h2_send_window_update(c, 0, c->recv_unacked);
        c->recv_unacked = 0;
    }
}

/* The stream's window: given back in steps of half of it, and not once
 * the request has ended (nothing more may come). */
static void stream_back(h2_stream *s, size_t n)
{
    h2_conn *c = s->c;
    s->recv_window += (int64_t)n;
    s->recv_unacked += (uint32_t)n;
    if (!s->remote_ended && !s->closed && !c->closing &&
        s->recv_unacked >= c->w->cfg->initial_window / 2) {
        h2_send_window_update(c, (uint32_t)s->id, s->recv_unacked);
        s->recv_unacked = 0;
    }
}

void h2_window_back(h2_stream *s, size_t n)
{
    if (n == 0 || s->c->closing)
        return;
    stream_back(s, n);
    h2_window_conn_back(s->c, n);
}

void h2_window_hold(h2_stream *s, size_t n)
{
    h2_conn *c = s->c;
    c->body_buffered += n;
    /* The stream's window stays taken until the handler reads. The
     * connection's goes back now, so that other streams go on, unless the
     * connection already holds more unread bodies than body_buffer. */
    if (c->body_buffered > c->w->cfg->body_buffer)
        s->conn_held += n;
    else
        h2_window_conn_back(c, n);
}

void h2_window_read(h2_stream *s, size_t n)
{
    h2_conn *c = s->c;
    c->body_buffered -= n;
    if (n == 0 || c->closing)
        return;
    stream_back(s, n);
    size_t held = s->conn_held < n ? s->conn_held : n;
    if (held > 0) {
        h2_window_conn_back(c, held);
        s->conn_held -= held;
    }
}

void h2_window_drop_held(h2_stream *s)
{
    h2_conn *c = s->c;
    c->body_buffered -= s->body_len;
    if (s->conn_held > 0 && !c->closing)
        h2_window_conn_back(c, s->conn_held);
    s->conn_held = 0;
}

void h2_window_unread(h2_stream *s, size_t n)
{
    /* Awaiting the request's end after the response: the stream's window
     * stays spent, bounding what the client may still send (stream.c). */
    if (s->local_ended && !s->c->closing)
        h2_window_conn_back(s->c, n);
    else
        h2_window_back(s, n);
}
