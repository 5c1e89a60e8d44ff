/* Closing a connection: the phases of kl_phase (net/conn.h), moved on by
 * one function, so that what a closing connection waits for is read in
 * one place:
 *
 *   OPEN -> DRAINING   keel_conn_close: reading stops; files and the
 *                      writes held behind them leave first.
 *   DRAINING -> FLUSHING  nothing held any more: the transport queues its
 *                      closing record (TLS close_notify) behind the rest.
 *   FLUSHING -> SHUTTING  libuv's queue is empty: uv_shutdown (FIN).
 *   SHUTTING -> LINGERING the write side is shut: input is read and
 *                      discarded for LINGER_MS at most, so that unread
 *                      input does not turn into a reset that destroys the
 *                      response in flight (nginx's lingering close); the
 *                      peer's EOF or the budget ends it.
 *   any -> CLOSING     an abort, or the end of the above: uv_close.
 *   CLOSING -> CLOSED  the handle closed; teardown (completions owed,
 *                      on_close, free) runs now, or once a thread-pool
 *                      read of a file has come back.
 *
 * Worker thread of the connection. */
#include <stdlib.h>

#include "net/conn.h"
#include "net/output.h"
#include "net/worker.h"

static void on_shutdown_done(uv_shutdown_t *req, int status)
{
    keel_conn *c = (keel_conn *)req->handle;
    free(req);
    if (kl_conn_handle_closed(c))
        return;
    /* Lingering is for input the peer may still send; after its EOF there
     * is none (and on Windows the handle can no longer be read). */
    if (status < 0 || (c->flags & KL_CONN_EOF)) {
        kl_conn_abort_status(c, c->close_status);
        return;
    }
    c->phase = KL_PHASE_LINGERING;
    kl_conn_retime(c, 1);
    kl_conn_update_reading(c);
}

static void start_shutdown(keel_conn *c)
{
    if (kl_conn_is_tunnel(c)) {
        /* No socket: the transport's on_shutdown ended the stream, and what
         * it still holds is its own to send. */
        kl_conn_abort_status(c, c->close_status);
        return;
    }
    c->phase = KL_PHASE_SHUTTING;
    uv_shutdown_t *req = malloc(sizeof *req);
    if (req == NULL || uv_shutdown(req, (uv_stream_t *)&c->tcp, on_shutdown_done) != 0) {
        free(req);
        kl_conn_abort_status(c, c->close_status);
    }
}

void kl_conn_advance_close(keel_conn *c)
{
    for (;;) {
        switch ((kl_phase)c->phase) {
        case KL_PHASE_DRAINING:
            if (kl_output_held(c))
                return;
            c->phase = KL_PHASE_FLUSHING;
            if (kl_conn_transport(c) != NULL && kl_conn_transport(c)->cb.on_shutdown != NULL) {
                kl_conn_transport(c)->cb.on_shutdown(c);
                if (c->phase != KL_PHASE_FLUSHING)
                    return; /* it aborted */
            }
            continue;
        case KL_PHASE_FLUSHING:
            if (kl_output_in_flight(c))
                return;
            start_shutdown(c);
            return;
        case KL_PHASE_OPEN:
        case KL_PHASE_SHUTTING:
        case KL_PHASE_LINGERING:
        case KL_PHASE_CLOSING:
        case KL_PHASE_CLOSED:
        default:
            return; /* moved on by events of their own */
        }
    }
}

static void close_handle_now(keel_conn *c, int status, int reset);

void kl_conn_close(keel_conn *c, int status)
{
    if (kl_conn_closing(c))
        return;
    /* An outbound connection its protocol marked idle (a kept-alive one
     * in a pool) owes its peer nothing: every byte it was sent was
     * answered, and no answer of ours is in flight for a reset to
     * destroy. Closed at once, plainly (a FIN, no lingering), as nginx
     * closes a cached upstream connection and keel an idle one it
     * reclaims; a transport's closing record (TLS close_notify) still
     * goes the long way. */
    if (c->origin->spec == NULL && kl_conn_transport(c) == NULL && kl_conn_reclaimable(c)) {
        close_handle_now(c, status, 0);
        return;
    }
    kl_conn_unlist(c);
    c->phase = KL_PHASE_DRAINING;
    c->close_status = status;
    kl_conn_update_reading(c);
    kl_conn_advance_close(c);
}

void kl_conn_abort_status(keel_conn *c, int status)
{
    if (kl_conn_handle_closed(c))
        return;
    /* Output nobody will read is dropped with a reset (SO_LINGER 0), as
     * nginx's reset_timedout_connection does: a write timeout, the
     * shutdown deadline, or keel_conn_abort (a peer that stopped reading,
     * a close handshake never answered). Other failures (a short file, a
     * write error) close plainly, so the bytes already queued still
     * arrive; so does the end of a lingering close, after the FIN. libuv
     * refuses a reset while a shutdown is pending (SHUTTING). */
    int reset =
        (status == KEEL_ERR_TIMEOUT || status == KEEL_ERR_SHUTDOWN || status == KEEL_ERR_CLOSED) &&
        c->phase < KL_PHASE_SHUTTING;
    close_handle_now(c, status, reset);
}

static void close_handle_now(keel_conn *c, int status, int reset)
{
    if (!kl_conn_closing(c))
        c->close_status = status;
    kl_conn_unlist(c);
    c->phase = KL_PHASE_CLOSING;
    c->flags &= ~KL_CONN_READING;
    kl_timeouts_remove(&kl_conn_worker(c)->timeouts, &c->timeout);
    kl_output_abort(c);
    kl_conn_close_handle(c, reset);
}
