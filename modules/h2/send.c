/* send.c — what leaves when: the pump (everything due leaves in one write
 * per turn, and the connection closes once it is finished), response heads
 * held until their body can follow, and the DATA scheduler: which stream's
 * body goes next as the peer's windows (RFC 9113 6.9) and our output allow.
 *
 * Streams with body bytes that may go wait on c->ready, in the order they
 * became ready; each turn gives a stream one frame and puts it back at the
 * tail, so a large body does not hold back the small ones behind it
 * (round robin, as RFC 9218's default of equal urgency asks).
 */
#include "scheduler.h"

#include <string.h>

/* For the pump's two passes, each called once: inlined, they would make
 * every h2_pump call save the registers their loops use, and most calls
 * return at once (inside input or another pump). */
#if defined(__GNUC__) || defined(__clang__)
#define NOINLINE __attribute__((noinline))
#elif defined(_MSC_VER)
#define NOINLINE __declspec(noinline)
#else
#define NOINLINE
#endif

/* Output may stop here: the peer has not taken what is in flight (our
 * writes not yet completed), or the connection's queue holds that much
 * (keel_conn_write_queued: through a transport, or behind a file). It goes
 * on when a write completes (output.c) or the connection drains
 * (on_drain). */
static int output_full(h2_conn *c, size_t more)
{
    size_t pending = h2_out_pending(c);
    size_t queued = keel_conn_write_queued(c->conn);
    size_t held = c->inflight > queued ? c->inflight : queued;
    if (held + pending + more > H2_INFLIGHT_MAX && held + pending > 0) {
        c->blocked = 1;
        return 1;
    }
    return 0;
}

/* ---- response heads held until their body can follow --------------------- */

/* Takes s off the connection's list of held heads. */
void h2_stream_unhold(h2_stream *s)
{
    if (!s->held)
        return;
    s->held = 0;
    h2_conn *c = s->c;
    h2_stream *prev = NULL;
    for (h2_stream **pp = &c->held; *pp != NULL; prev = *pp, pp = &(*pp)->held_next) {
        if (*pp == s) {
            *pp = s->held_next;
            if (c->held_tail == s)
                c->held_tail = prev;
            break;
        }
    }
}

/* Sends the final heads held since the last pump, except those of streams
 * whose body is a small file still being read. */
static NOINLINE void submit_held(h2_conn *c)
{
    h2_stream **pp = &c->held;
    h2_stream *prev = NULL;
    while (*pp != NULL) {
        h2_stream *s = *pp;
        /* A small file still being read (fileload.c): its HEADERS wait to
         * leave with its DATA, in the same write. */
        if (!s->closed && s->queue != NULL && s->queue->loading) {
            prev = s;
            pp = &s->held_next;
            continue;
        }
        *pp = s->held_next;
        if (c->held_tail == s)
            c->held_tail = prev;
        s->held = 0;
        if (s->closed || c->closing)
            continue;
        h2_send_headers(c, (uint32_t)s->id, s->head_block, s->head_len, !s->has_data);
        if (s->has_data) {
            h2_ready(s);
            continue;
        }
        s->busy++; /* closing may end the exchange from inside */
        h2_stream_local_end(s);
        s->busy--;
        h2_stream_maybe_free(s);
    }
}

/* ---- DATA ---------------------------------------------------------------------- */

void h2_ready(h2_stream *s)
{
    if (s->ready || s->closed || s->held || !s->final_sent || !s->has_data || s->reset_pending ||
        s->local_ended)
        return;
    h2_conn *c = s->c;
    s->ready = 1;
    KEEL_QUEUE_APPEND(c->ready, c->ready_tail, s, ready_next);
}

static void ready_remove(h2_conn *c, h2_stream *s)
{
    h2_stream *prev = NULL;
    for (h2_stream *it = c->ready; it != NULL; prev = it, it = it->ready_next) {
        if (it != s)
            continue;
        *(prev != NULL ? &prev->ready_next : &c->ready) = s->ready_next;
        if (c->ready_tail == s)
            c->ready_tail = prev;
        break;
    }
    s->ready = 0;
}

static h2_stream *ready_pop(h2_conn *c)
{
    h2_stream *s = c->ready;
    c->ready = s->ready_next;
    if (c->ready == NULL)
        c->ready_tail = NULL;
    s->ready = 0;
    return s;
}

static void ready_push_front(h2_conn *c, h2_stream *s)
{
    s->ready = 1;
    s->ready_next = c->ready;
    c->ready = s;
    if (c->ready_tail == NULL)
        c->ready_tail = s;
}

/* One DATA frame of s, or nothing. 1 if output stopped (blocked). */
static int send_one(h2_conn *c, h2_stream *s)
{
    size_t n = h2_stream_sendable(s);
    int all = s->resp_ended && n == s->queued;
    if (n == 0 && !all)
        return 0; /* waits for the body (sink.c) or a file being read */
    int64_t win = s->send_window < c->send_window ? s->send_window : c->send_window;
    if (n > 0 && win <= 0)
        return 0; /* waits for WINDOW_UPDATE, which makes it ready again */
    size_t k = n;
    if (k > 0 && (uint64_t)k > (uint64_t)win)
        k = (size_t)win;
    if (k > c->peer_max_frame)
        k = c->peer_max_frame;
    if (output_full(c, k + H2_FRAME_HD)) {
        ready_push_front(c, s);
        return 1;
    }
    int end = all && k == n;
    int trailers = end && s->trailer_block != NULL;
    uint8_t hd[H2_FRAME_HD];
    h2_put_hd(hd, k, H2_DATA, end && !trailers ? H2_FLAG_END_STREAM : 0, (uint32_t)s->id);
    int rc = 0;
    if (k > 0 && s->queue->fd >= 0) {
        /* From a file: the header, then the file's bytes (sendfile on
         * plain TCP); h2_stream_sendable never spans a file piece's end. */
        rc = h2_stream_take_file(s, hd, k);
    } else if (k > 0 || !trailers) {
        rc = h2_out_copy(c, hd, sizeof hd) != KEEL_OK ? -1 : h2_stream_take(s, k);
    }
    if (rc != 0) {
        keel_conn_abort(c->conn);
        c->closing = 1;
        return 1;
    }
    s->send_window -= (int64_t)k;
    c->send_window -= (int64_t)k;
    s->progress_ms = keel_worker_now_ms(c->w->worker);
    if (end) {
        if (trailers) /* RFC 9113 8.1: trailers end the stream instead */
            h2_send_headers(c, (uint32_t)s->id, s->trailer_block, s->trailer_len, 1);
        h2_stream_local_end(s);
        return 0;
    }
    if (h2_out_pending(c) >= H2_BATCH_MAX)
        h2_out_flush(c);
    h2_ready(s); /* at the tail: the others get their turn first */
    return 0;
}

static NOINLINE void send_data(h2_conn *c)
{
    /* A stream that cannot go (no window, nothing queued) leaves the
     * list; one that can goes back at the tail. Each pass over the list
     * sends at least one frame or empties it, so this ends. */
    while (c->ready != NULL && !c->blocked && !c->closing) {
        h2_stream *s = ready_pop(c);
        if (s->closed || !s->has_data)
            continue;
        s->busy++; /* local end may end the exchange from inside */
        int stop = send_one(c, s);
        s->busy--;
        h2_stream_maybe_free(s);
        if (stop)
            break;
    }
}

void h2_window_grew(h2_conn *c, h2_stream *s)
{
    if (s != NULL) {
        h2_ready(s);
        return;
    }
    /* Streams stop only when a window is used up (send_one): any may wait
     * on the connection's, or on the initial window that grew. */
    for (s = c->streams; s != NULL; s = s->next)
        if (s->queued > 0 || s->resp_ended)
            h2_ready(s);
}

void h2_sched_release(h2_stream *s, int status)
{
    if (s->ready)
        ready_remove(s->c, s);
    h2_stream_unhold(s);
    if (s->queue != NULL)
        h2_stream_release_queue(s, status);
}

/* ---- the pump -------------------------------------------------------------------- */

void h2_close(h2_conn *c)
{
    if (c->closing)
        return;
    h2_out_flush(c);
    c->closing = 1;
    keel_conn_close(c->conn);
}

/* Closing it would lose nothing: no stream, nothing to write. At
 * max_connections the core may then reclaim it (keel_conn_set_idle); a
 * client retries on a new connection (RFC 9113 9.1). */
static void mark_idle(h2_conn *c)
{
    if (!c->idle_marked && !c->closing && !c->goaway && c->nactive == 0 && c->inflight == 0 &&
        c->streams == NULL) {
        c->idle_marked = 1;
        keel_conn_set_idle(c->conn, 1);
    }
}

/* After the peer's FIN nothing it could send will come; it may still read
 * (a half-closed TCP connection). True when no open stream can go on
 * without it: each waits for window the peer would have to give (no
 * WINDOW_UPDATE can come now) or for a request body it would have to send.
 * A handler at work, a response the windows let out, a file being read
 * can go on, and are waited for. */
static int nothing_without_peer(const h2_conn *c)
{
    if (c->loads != NULL || c->npending > 0)
        return 0;
    for (const h2_stream *s = c->streams; s != NULL; s = s->next) {
        if (s->closed)
            continue;
        if (s->queued > 0) {
            int64_t win = s->send_window < c->send_window ? s->send_window : c->send_window;
            if (win > 0 || (s->queue != NULL && s->queue->loading))
                return 0;
            continue;
        }
        if (s->local_ended || (s->exchange && s->want_body && !s->remote_ended))
            continue;
        return 0;
    }
    return 1;
}

void h2_pump(h2_conn *c)
{
    if (c->depth > 0) {
        c->want_send = 1;
        return;
    }
    if (c->closing)
        return;
    if (!c->failed) {
        h2_load_submit(c); /* small files asked for since the last turn: one job */
        c->depth++;
        do {
            c->want_send = 0;
            h2_stream_send_resets(c);
            submit_held(c); /* response heads whose body can follow */
            send_data(c);
        } while (c->want_send && !c->blocked && !c->closing);
        c->depth--;
        if (c->closing)
            return; /* aborted (out of memory mid-frame) */
    }
    h2_out_flush(c);
    int want_write = c->held != NULL || c->ready != NULL || c->resets != NULL;
    if (c->failed) {
        h2_close(c); /* GOAWAY written: done (5.4.1) */
    } else if ((c->goaway_sent || c->goaway_recv) && c->nopen == 0 && !want_write) {
        h2_close(c); /* GOAWAY said and no stream left: done (6.8) */
    } else if (c->eof && !want_write && (c->nactive == 0 || nothing_without_peer(c))) {
        /* Closed now, not at stream_timeout: after the client's FIN no
         * WINDOW_UPDATE can open the windows its responses wait behind,
         * and the connection would sit in CLOSE-WAIT. GOAWAY names the
         * last stream taken; what is written leaves before the FIN
         * (keel_conn_close). */
        if (!c->goaway_sent)
            h2_send_goaway(c, H2_NO_ERROR);
        h2_close(c);
    } else if (!want_write) {
        mark_idle(c);
    }
}
