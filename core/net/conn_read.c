/* Reading: pooled buffers, the lazy read pause, delivering bytes to the
 * protocol (or first to the transport, which decodes them), end of input,
 * and the deliveries owed from the worker's idle pass. Everything here
 * runs on the connection's worker thread (net/conn.h). */
#include "net/conn.h"

#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "net/output.h"
#include "net/preamble.h"
#include "net/worker.h"

void kl_conn_release_buffer(keel_conn *c)
{
    /* A paused connection keeps its buffer for the read its lazy pause
     * lets through; an outbound one, paused at once, reads nothing more
     * until resumed, and holds nothing meanwhile (a proxy's upstream
     * waiting for its client: one per HTTP/2 stream). */
    int keep =
        (c->flags & KL_CONN_PAUSED) && ((c->flags & KL_CONN_READING) || c->origin->spec != NULL);
    if (c->rbuf != NULL && c->rstart == c->rlen && !keep) {
        kl_bufpool_put(&kl_conn_worker(c)->pool, c->rbuf, c->rcap);
        c->rbuf = NULL;
        c->rcap = c->rstart = c->rlen = 0;
    }
}

/* Makes room for at least one more byte after rlen. */
static int read_reserve(keel_conn *c, size_t want)
{
    kl_bufpool *pool = &kl_conn_worker(c)->pool;
    if (c->rbuf == NULL) {
        /* A connection asked for larger reads (keel_connect_options'
         * read_buffer_size) gets its buffer at once, not by doubling. */
        size_t size = want > pool->block_size ? want : pool->block_size;
        c->rbuf = size == pool->block_size ? kl_bufpool_get(pool) : malloc(size);
        if (c->rbuf == NULL)
            return KEEL_ERR_NOMEM;
        c->rcap = (uint32_t)size;
        c->rstart = c->rlen = 0;
    } else if (c->rstart == c->rlen) {
        c->rstart = c->rlen = 0;
    } else if (c->rstart > 0 && c->rcap - c->rlen < want) {
        /* Compact only when short of room: the protocol's unconsumed tail is
         * usually small, and moving it invalidates nothing it may keep. */
        memmove(c->rbuf, c->rbuf + c->rstart, c->rlen - c->rstart);
        c->rlen -= c->rstart;
        c->rstart = 0;
    }
    while (c->rcap - c->rlen < want) {
        size_t max = kl_conn_worker(c)->host->settings.read_buffer_max;
        if (c->rcap >= max)
            return KEEL_ERR_LIMIT;
        size_t cap = (size_t)c->rcap * 2 < max ? (size_t)c->rcap * 2 : max;
        char *grown = realloc(c->rbuf, cap);
        if (grown == NULL)
            return KEEL_ERR_NOMEM;
        c->rbuf = grown;
        c->rcap = (uint32_t)cap;
    }
    return KEEL_OK;
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);

/* The read a lazy pause lets through (kl_conn_update_reading) must not
 * move the buffer: keel_conn_pause promises that the bytes buffered and
 * the pointers on_data received stay valid, and http1 holds a request's
 * head as views into them while its exchange is in flight. Compacting or
 * growing a full buffer there let the next pipelined bytes take the
 * head's place (the proxy then forwarded them as the request keel had
 * routed), or freed it. Such a read takes what fits after the bytes held;
 * when nothing does, or a transport would deliver an amount not known
 * beforehand, reading stops before it (on_read sees UV_ENOBUFS). */
static int pause_holds_buffer(const keel_conn *c)
{
    return (c->flags & KL_CONN_PAUSED) && c->phase == KL_PHASE_OPEN && c->rbuf != NULL &&
           c->rstart < c->rlen && (kl_conn_transport(c) != NULL || c->rlen == c->rcap);
}

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf)
{
    keel_conn *c = kl_conn_of_handle(handle);
    (void)suggested;
    if ((c->flags & KL_CONN_PREAMBLE) && c->phase == KL_PHASE_OPEN) {
        /* The header goes to the read buffer whatever the transport, and
         * no further than its bound: what follows it in the same read is
         * then at most KL_PREAMBLE_MAX bytes, which fit the scratch buffer if
         * a transport must decode them (preamble_read). */
        if (read_reserve(c, 1) != KEEL_OK || c->rlen - c->rstart >= KL_PREAMBLE_MAX) {
            *buf = uv_buf_init(NULL, 0);
            return;
        }
        size_t room = c->rcap - c->rlen, left = KL_PREAMBLE_MAX - (c->rlen - c->rstart);
        *buf = uv_buf_init(c->rbuf + c->rlen, (unsigned)(room < left ? room : left));
        return;
    }
    if (pause_holds_buffer(c)) {
        *buf = uv_buf_init(NULL, 0);
        return;
    }
    if (kl_conn_transport(c) != NULL || c->phase == KL_PHASE_LINGERING) {
        *buf = uv_buf_init(kl_conn_worker(c)->scratch, KL_SCRATCH_SIZE);
        return;
    }
    /* A zero-length buffer makes libuv report UV_ENOBUFS to on_read. */
    size_t want = c->rbuf == NULL && c->origin->read_buffer > 1 ? c->origin->read_buffer : 1;
    if (read_reserve(c, want) != KEEL_OK) {
        *buf = uv_buf_init(NULL, 0);
        return;
    }
    /* An outbound connection's reads are bounded by its read size, which
     * its protocol may lower (keel_conn_set_read_size: a proxy relaying to
     * a client that cannot take more yet). */
    size_t room = c->rcap - c->rlen;
    if (c->origin->spec == NULL && c->origin->read_buffer > 0 && room > c->origin->read_buffer)
        room = c->origin->read_buffer;
    *buf = uv_buf_init(c->rbuf + c->rlen, (unsigned)room);
}

void kl_conn_update_reading(keel_conn *c)
{
    if (kl_conn_handle_closed(c))
        return;
    int open = c->phase == KL_PHASE_OPEN && !(c->flags & (KL_CONN_BACKPRESSURE | KL_CONN_EOF));
    /* Bytes read during a lazy pause are delivered before the next read:
     * each pause lets one read through, never more. */
    int want =
        c->phase == KL_PHASE_LINGERING || (open && !(c->flags & (KL_CONN_PAUSED | KL_CONN_UNSEEN)));
    /* A pause alone stops reading lazily: most pauses (a response in
     * flight, a file being sent) end before the peer sends more, and
     * stopping and restarting the poll for each costs two epoll_ctl
     * calls per request. Bytes that do arrive meanwhile are kept, not
     * delivered, and reading stops then (on_read): at most one more read
     * is buffered, as with an immediate stop and libuv's own reads. Not
     * when bytes read that way still wait unpresented: a protocol pausing
     * and resuming faster than they are delivered would let a read
     * through each time, and the buffer grow without bound. */
    if (kl_conn_is_tunnel(c)) {
        kl_tunnel_update_reading(c, want);
        return;
    }
    if (!want && open && (c->flags & KL_CONN_READING) && !(c->flags & KL_CONN_UNSEEN) &&
        c->origin->spec != NULL)
        return;
    /* An outbound connection stops at once: its pauses are back-pressure
     * (a proxy's client that does not keep up), which lasts, and a read
     * let through would be held for its whole length. */
    if (want && !(c->flags & KL_CONN_READING)) {
        if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0)
            c->flags |= KL_CONN_READING;
    } else if (!want && (c->flags & KL_CONN_READING)) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->flags &= ~KL_CONN_READING;
    }
}

void kl_conn_read_while_connecting(keel_conn *c)
{
    if (!(c->flags & KL_CONN_READING) &&
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0)
        c->flags |= KL_CONN_READING;
}

/* Hands buffered bytes to the protocol until it stops consuming, pauses,
 * closes, or has seen everything. */
void kl_conn_deliver(keel_conn *c)
{
    /* Bytes wait for a protocol the transport has yet to open, or for
     * the PROXY protocol header to end. */
    if (c->flags & (KL_CONN_DEFERRED | KL_CONN_PREAMBLE))
        return;
    while (c->rbuf != NULL && c->rstart < c->rlen && !kl_conn_closing(c) &&
           !(c->flags & KL_CONN_PAUSED)) {
        const kl_protocol *p = c->protocol;
        /* Bytes for the protocol: a message is starting, the connection is
         * no longer one to lose (it marks itself idle again later). */
        kl_conn_idle_unlink(c);
        size_t avail = c->rlen - c->rstart;
        size_t consumed = 0;
        c->flags &= ~KL_CONN_UNSEEN; /* presented now */
        if (p->cb.on_data == NULL) {
            consumed = avail;
        } else {
            c->flags |= KL_CONN_IN_DATA;
            int rc = p->cb.on_data(c, c->rbuf + c->rstart, avail, &consumed);
            c->flags &= ~KL_CONN_IN_DATA;
            if (rc < 0) {
                kl_conn_abort_status(c, rc);
                return;
            }
            if (consumed > avail)
                consumed = avail;
        }
        c->rstart += (uint32_t)consumed;
        /* Same protocol: it has seen every byte and waits for more. A
         * switched protocol gets the rest on the next turn. */
        if (c->protocol == p)
            break;
    }
}

/* The peer will send nothing more. A protocol with on_eof decides;
 * otherwise work in flight (reading paused) finishes first and the close
 * happens when the protocol resumes. */
void kl_conn_on_eof(keel_conn *c)
{
    if (c->phase == KL_PHASE_LINGERING) {
        kl_conn_abort_status(c, c->close_status);
        return;
    }
    c->flags |= KL_CONN_EOF;
    kl_conn_update_reading(c);
    if (kl_conn_closing(c))
        return;
    if (c->flags & (KL_CONN_DEFERRED | KL_CONN_PREAMBLE)) {
        kl_conn_close(c, KEEL_OK);
    } else if ((c->flags & KL_CONN_PAUSED) && c->rbuf != NULL && c->rstart < c->rlen) {
        /* Bytes read while paused (the lazy pause) come before the end:
         * the protocol hears of EOF once it has had them. */
        c->flags |= KL_CONN_EOF_OWED;
    } else if (c->protocol->cb.on_eof != NULL) {
        c->protocol->cb.on_eof(c);
    } else if (!(c->flags & KL_CONN_PAUSED)) {
        kl_conn_close(c, KEEL_OK);
    }
}

/* Raw bytes to the transport, which delivers what they decode to. */
int kl_conn_transport_read(keel_conn *c, const char *data, size_t len)
{
    c->flags |= KL_CONN_IN_TRANSPORT;
    int rc = kl_conn_transport(c)->cb.on_read ? kl_conn_transport(c)->cb.on_read(c, data, len)
                                              : keel_transport_deliver(c, data, len);
    c->flags &= ~KL_CONN_IN_TRANSPORT;
    if (rc < 0)
        kl_conn_abort_status(c, rc);
    return rc;
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    keel_conn *c = kl_conn_of_handle((uv_handle_t *)stream);
    if (nread > 0) {
        int paused_before = (c->flags & KL_CONN_PAUSED) != 0;
        keel_worker *w = kl_conn_worker(c);
        kl_metric_add_slot(w->metrics, w->host->core_metrics.bytes_in->slot, nread);
        if (c->phase == KL_PHASE_LINGERING)
            return; /* discarded, and the linger budget is not renewed */
        if (c->flags & KL_CONN_PREAMBLE) {
            if (kl_conn_closing(c))
                return; /* refused or timed out: nothing more is read */
            c->rlen += (uint32_t)nread;
            kl_conn_preamble_read(c);
            if (!kl_conn_handle_closed(c))
                kl_conn_release_buffer(c);
            return;
        }
        /* While output waits, only its progress counts: a peer that keeps
         * sending but never reads must still hit the write timeout. */
        if (c->timeout_kind == KL_TIMEOUT_READ && c->phase == KL_PHASE_OPEN)
            kl_timeouts_touch(&kl_conn_worker(c)->timeouts, &c->timeout);
        if (kl_conn_transport(c) != NULL) {
            if (kl_conn_transport_read(c, buf->base, (size_t)nread) < 0)
                return;
        } else {
            c->rlen += (uint32_t)nread;
        }
        kl_conn_deliver(c);
        /* The lazy pause (kl_conn_update_reading): these bytes came while
         * the protocol was paused and wait unseen, so reading stops now. */
        if (paused_before &&
            (c->flags & (KL_CONN_PAUSED | KL_CONN_READING)) == (KL_CONN_PAUSED | KL_CONN_READING) &&
            !kl_conn_handle_closed(c)) {
            uv_read_stop((uv_stream_t *)&c->tcp);
            c->flags &= ~KL_CONN_READING;
            c->flags |= KL_CONN_UNSEEN;
        }
    } else if (nread == UV_EOF) {
        kl_conn_on_eof(c);
        return;
    } else if (nread == UV_ENOBUFS && pause_holds_buffer(c)) {
        /* on_alloc declined the read: nothing was read, and reading
         * starts again with the resume. */
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->flags &= ~KL_CONN_READING;
        return;
    } else if (nread == UV_ENOBUFS) {
        kl_log(KEEL_LOG_DEBUG, "connection %llu: read buffer limit reached",
               (unsigned long long)c->id);
        kl_conn_abort_status(c, KEEL_ERR_LIMIT);
        return;
    } else if (nread < 0) {
        kl_conn_abort_status(c, KEEL_ERR_IO);
        return;
    }
    kl_conn_release_buffer(c);
}

/* ---- deliveries owed from the loop ------------------------------------------------ */

void kl_conn_schedule(keel_conn *c)
{
    if (c->flags & KL_CONN_PENDING)
        return;
    keel_worker *w = kl_conn_worker(c);
    c->flags |= KL_CONN_PENDING;
    c->pending_next = w->pending;
    w->pending = c;
    kl_worker_kick(w);
}

void kl_conn_schedule_delivery(keel_conn *c)
{
    c->flags |= KL_CONN_DELIVER;
    kl_conn_schedule(c);
}

void kl_conn_run_delivery(keel_conn *c)
{
    if (!(c->flags & KL_CONN_DELIVER))
        return;
    c->flags &= ~KL_CONN_DELIVER;
    if (kl_conn_closing(c) || (c->flags & KL_CONN_PAUSED))
        return;
    kl_conn_deliver(c);
    if (kl_conn_closing(c))
        return;
    kl_conn_update_reading(c); /* reading waited for these bytes (KL_CONN_UNSEEN) */
    if ((c->flags & KL_CONN_EOF_OWED) && !(c->flags & KL_CONN_PAUSED) &&
        c->protocol->cb.on_eof != NULL) {
        c->flags &= ~KL_CONN_EOF_OWED;
        c->protocol->cb.on_eof(c);
        if (kl_conn_closing(c))
            return;
    }
    if ((c->flags & KL_CONN_EOF) && !(c->flags & (KL_CONN_PAUSED | KL_CONN_DEFERRED)) &&
        c->protocol->cb.on_eof == NULL)
        kl_conn_close(c, KEEL_OK);
    else
        kl_conn_release_buffer(c);
}

void kl_conn_run_owed(keel_conn *c)
{
    kl_output_run_owed(c);
}

/* ---- the transport's side -------------------------------------------------- */

int keel_transport_deliver(keel_conn *c, const void *data, size_t len)
{
    if (kl_conn_closing(c))
        return KEEL_ERR_CLOSED;
    if (len > UINT32_MAX)
        return KEEL_ERR_LIMIT;
    int rc = read_reserve(c, len);
    if (rc != KEEL_OK)
        return rc;
    memcpy(c->rbuf + c->rlen, data, len);
    c->rlen += (uint32_t)len;
    /* A tunnel's bytes come from its carrier, not through on_read: they
     * are its activity, as a read is a socket's. */
    if (kl_conn_is_tunnel(c) && c->timeout_kind == KL_TIMEOUT_READ)
        kl_timeouts_touch(&kl_conn_worker(c)->timeouts, &c->timeout);
    if (!(c->flags & KL_CONN_IN_TRANSPORT))
        kl_conn_schedule_delivery(c);
    return KEEL_OK;
}
