/* The connection manager: reading into pooled buffers, delivering bytes to
 * the protocol, queued writes with back-pressure, timeouts and orderly
 * close. Everything here runs on the connection's worker thread. */
#include "net/conn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/atomic.h"
#include "base/log.h"
#include "base/util.h"
#include "net/worker.h"

/* How long a closing connection keeps reading (and discarding) after its
 * write side is shut, so that unread input does not make the kernel send
 * RST and destroy the response in flight (nginx's lingering close). */
#define LINGER_MS 2000
/* Bytes a transport reads raw before decoding (per worker, reused). */
#define SCRATCH_SIZE (64 * 1024)

typedef struct kl_write {
    uv_write_t req;
    keel_write_cb cb;
    void *userdata;
    /* copied bytes follow for keel_conn_write_copy */
} kl_write;

static void update_reading(keel_conn *c);
static void close_gracefully(keel_conn *c, int status);
static void on_close(uv_handle_t *handle);

/* What a connection's handle carries in `data`: it tells connections
 * apart from the worker's other TCP handles in kl_conn_each. */
static const char conn_tag;

static keel_conn *conn_of(uv_handle_t *handle)
{
    return (keel_conn *)handle; /* tcp is the first member */
}

const kl_transport *kl_conn_transport(const keel_conn *c)
{
    return c->origin->transport;
}

typedef struct each_ctx {
    void (*fn)(keel_conn *conn, void *arg);
    void *arg;
} each_ctx;

static void each_handle(uv_handle_t *handle, void *arg)
{
    const each_ctx *ctx = arg;
    if (handle->type != UV_TCP || handle->data != &conn_tag || uv_is_closing(handle))
        return;
    keel_conn *c = conn_of(handle);
    if (c->flags & KL_CONN_STARTED)
        ctx->fn(c, ctx->arg);
}

void kl_conn_each(keel_worker *w, void (*fn)(keel_conn *conn, void *arg), void *arg)
{
    each_ctx ctx = {fn, arg};
    uv_walk(&w->loop, each_handle, &ctx);
}

static keel_server *server_of(keel_conn *c)
{
    return kl_conn_worker(c)->server;
}

static uint64_t read_timeout(keel_conn *c)
{
    return c->timeout_ms ? c->timeout_ms : server_of(c)->settings.idle_timeout_ms;
}

static void set_timeout(keel_conn *c, uint64_t ms)
{
    if (kl_timeouts_set(&kl_conn_worker(c)->timeouts, &c->timeout, ms) != KEEL_OK)
        kl_conn_abort_status(c, KEEL_ERR_NOMEM);
}

int kl_conn_writing(keel_conn *c)
{
    return c->writes_pending > 0 || kl_ops_pending(c);
}

/* What write_high_water is compared with: libuv's queue and ours. */
static uint64_t queued(keel_conn *c)
{
    return (uint64_t)c->tcp.write_queue_size + kl_ops_bytes(c);
}

/* ---- reading ----------------------------------------------------------- */

static void release_buffer(keel_conn *c)
{
    if (c->rbuf != NULL && c->rstart == c->rlen && !(c->flags & KL_CONN_PAUSED)) {
        kl_bufpool_put(&kl_conn_worker(c)->pool, c->rbuf, c->rcap);
        c->rbuf = NULL;
        c->rcap = c->rstart = c->rlen = 0;
    }
}

/* Makes room for at least one more byte after rlen. */
static int reserve(keel_conn *c, size_t want)
{
    kl_bufpool *pool = &kl_conn_worker(c)->pool;
    if (c->rbuf == NULL) {
        if ((c->rbuf = kl_bufpool_get(pool)) == NULL)
            return KEEL_ERR_NOMEM;
        c->rcap = (uint32_t)pool->block_size;
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
        size_t max = server_of(c)->settings.read_buffer_max;
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

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf)
{
    keel_conn *c = conn_of(handle);
    (void)suggested;
    if (kl_conn_transport(c) != NULL || (c->flags & KL_CONN_LINGERING)) {
        *buf = uv_buf_init(kl_conn_worker(c)->scratch, SCRATCH_SIZE);
        return;
    }
    /* A zero-length buffer makes libuv report UV_ENOBUFS to on_read. */
    if (reserve(c, 1) != KEEL_OK) {
        *buf = uv_buf_init(NULL, 0);
        return;
    }
    *buf = uv_buf_init(c->rbuf + c->rlen, c->rcap - c->rlen);
}

/* Hands buffered bytes to the protocol until it stops consuming, pauses,
 * closes, or has seen everything. */
static void deliver(keel_conn *c)
{
    while (c->rbuf != NULL && c->rstart < c->rlen &&
           !(c->flags & (KL_CONN_CLOSING | KL_CONN_PAUSED))) {
        const kl_protocol *p = c->protocol;
        size_t avail = c->rlen - c->rstart;
        size_t consumed = 0;
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

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    keel_conn *c = conn_of((uv_handle_t *)stream);
    if (nread > 0) {
        /* While writes wait, only their progress counts: a peer that keeps
         * sending but never reads must still hit the write timeout. */
        if (!kl_conn_writing(c))
            kl_timeouts_touch(&kl_conn_worker(c)->timeouts, &c->timeout);
        if (c->flags & KL_CONN_LINGERING)
            return; /* discarded */
        if (kl_conn_transport(c) != NULL) {
            c->flags |= KL_CONN_IN_TRANSPORT;
            int rc = kl_conn_transport(c)->cb.on_read
                         ? kl_conn_transport(c)->cb.on_read(c, buf->base, (size_t)nread)
                         : keel_transport_deliver(c, buf->base, (size_t)nread);
            c->flags &= ~KL_CONN_IN_TRANSPORT;
            if (rc < 0) {
                kl_conn_abort_status(c, rc);
                return;
            }
        } else {
            c->rlen += (uint32_t)nread;
        }
        deliver(c);
    } else if (nread == UV_EOF) {
        if (c->flags & KL_CONN_LINGERING) {
            kl_conn_abort_status(c, c->close_status);
            return;
        }
        /* The peer will send nothing more. A protocol with on_eof decides;
         * otherwise work in flight (reading paused) finishes first and the
         * close happens when the protocol resumes. */
        c->flags |= KL_CONN_SHUTDOWN_SEEN;
        update_reading(c);
        if (c->protocol->cb.on_eof != NULL)
            c->protocol->cb.on_eof(c);
        else if (!(c->flags & KL_CONN_PAUSED))
            close_gracefully(c, KEEL_OK);
    } else if (nread == UV_ENOBUFS) {
        kl_log(KEEL_LOG_DEBUG, "connection %llu: read buffer limit reached",
               (unsigned long long)c->id);
        kl_conn_abort_status(c, KEEL_ERR_LIMIT);
        return;
    } else if (nread < 0) {
        kl_conn_abort_status(c, KEEL_ERR_IO);
        return;
    }
    release_buffer(c);
}

static void update_reading(keel_conn *c)
{
    if (c->flags & KL_CONN_HANDLE_CLOSED)
        return;
    int want = (c->flags & KL_CONN_LINGERING) ||
               !(c->flags &
                 (KL_CONN_PAUSED | KL_CONN_BACKPRESSURE | KL_CONN_CLOSING | KL_CONN_SHUTDOWN_SEEN));
    if (want && !(c->flags & KL_CONN_READING)) {
        if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0)
            c->flags |= KL_CONN_READING;
    } else if (!want && (c->flags & KL_CONN_READING)) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->flags &= ~KL_CONN_READING;
    }
}

static void schedule_delivery(keel_conn *c)
{
    if (c->flags & KL_CONN_PENDING)
        return;
    c->flags |= KL_CONN_PENDING;
    c->pending_next = kl_conn_worker(c)->pending;
    kl_conn_worker(c)->pending = c;
    kl_worker_kick(kl_conn_worker(c));
}

void kl_conn_deliver_pending(keel_conn *c)
{
    c->flags &= ~KL_CONN_PENDING;
    if (c->flags & (KL_CONN_CLOSING | KL_CONN_PAUSED))
        return;
    deliver(c);
    if (c->flags & KL_CONN_CLOSING)
        return;
    if ((c->flags & KL_CONN_SHUTDOWN_SEEN) && !(c->flags & KL_CONN_PAUSED) &&
        c->protocol->cb.on_eof == NULL)
        close_gracefully(c, KEEL_OK);
    else
        release_buffer(c);
}

/* ---- writing ----------------------------------------------------------- */

static int status_from_write(int uv_status)
{
    if (uv_status == 0)
        return KEEL_OK;
    return uv_status == UV_ECANCELED ? KEEL_ERR_CLOSED : KEEL_ERR_IO;
}

static void finish_close(keel_conn *c);
static void shut_down(keel_conn *c);

void kl_conn_arm_write_timeout(keel_conn *c)
{
    set_timeout(c, server_of(c)->settings.write_timeout_ms);
}

void kl_conn_progress(keel_conn *c)
{
    kl_timeouts_touch(&kl_conn_worker(c)->timeouts, &c->timeout);
}

void kl_conn_check_pressure(keel_conn *c)
{
    if (!(c->flags & KL_CONN_BACKPRESSURE) && queued(c) > server_of(c)->settings.write_high_water) {
        c->flags |= KL_CONN_BACKPRESSURE;
        update_reading(c);
    }
}

void kl_conn_settle(keel_conn *c)
{
    if (c->flags & KL_CONN_HANDLE_CLOSED)
        return;
    kl_ops_trim(c);
    if (!kl_conn_writing(c) && !(c->flags & KL_CONN_CLOSING))
        set_timeout(c, read_timeout(c));
    if ((c->flags & KL_CONN_BACKPRESSURE) &&
        queued(c) <= server_of(c)->settings.write_high_water / 4) {
        c->flags &= ~KL_CONN_BACKPRESSURE;
        update_reading(c);
        if (c->protocol->cb.on_drain != NULL && !(c->flags & KL_CONN_CLOSING))
            c->protocol->cb.on_drain(c);
        if (c->flags & KL_CONN_HANDLE_CLOSED)
            return;
    }
    if ((c->flags & KL_CONN_CLOSE_OWED) && !kl_ops_pending(c)) {
        c->flags &= ~KL_CONN_CLOSE_OWED;
        shut_down(c);
    } else if ((c->flags & KL_CONN_FLUSHING) && c->writes_pending == 0) {
        finish_close(c);
    }
}

static void on_write_done(uv_write_t *req, int status)
{
    kl_write *w = KL_CONTAINER_OF(req, kl_write, req);
    keel_conn *c = conn_of((uv_handle_t *)req->handle);
    c->writes_pending--;
    if (w->cb != NULL)
        w->cb(c, status_from_write(status), w->userdata);
    free(w);
    if (c->flags & KL_CONN_HANDLE_CLOSED)
        return;
    if (status < 0) {
        kl_conn_abort_status(c, KEEL_ERR_IO);
        return;
    }
    kl_timeouts_touch(&kl_conn_worker(c)->timeouts, &c->timeout);
    kl_conn_settle(c);
    /* A file waits for libuv's queue to empty before it is sent, and a
     * file read through a transport for it to drain. */
    if (!(c->flags & KL_CONN_HANDLE_CLOSED) && c->ops != NULL) {
        if (c->writes_pending == 0 && kl_ops_pending(c))
            kl_ops_run(c);
        kl_ops_on_drain(c);
    }
}

/* Writes to the socket: straight away when nothing is queued (most small
 * responses leave here with no allocation), the rest through a queued
 * request. With `copy` the bytes not written at once are copied. */
static int raw_write(keel_conn *c, const keel_buf *bufs, size_t nbufs, keel_write_cb cb, void *ud,
                     int copy)
{
    uv_buf_t stack[16];
    uv_buf_t *ub = nbufs <= KL_ARRAY_SIZE(stack) ? stack : malloc(nbufs * sizeof *ub);
    if (ub == NULL)
        return KEEL_ERR_NOMEM;
    size_t total = 0;
    int rc = KEEL_OK;
    for (size_t i = 0; i < nbufs; i++) {
        if (bufs[i].len > KEEL_BUF_MAX) {
            rc = KEEL_ERR_INVAL;
            goto out;
        }
        ub[i] = uv_buf_init((char *)bufs[i].base, (unsigned)bufs[i].len);
        total += bufs[i].len;
    }
    uv_buf_t *rest = ub;
    size_t nrest = nbufs;
    size_t done = 0;
    /* Nothing may fail once bytes have left without a record to report
     * them, so the completion record is made before writing. */
    kl_deferred *completion = NULL;
    if (cb != NULL && c->writes_pending == 0 &&
        (completion = kl_deferred_new(c, cb, ud, KEEL_OK)) == NULL) {
        rc = KEEL_ERR_NOMEM;
        goto out;
    }

    if (c->writes_pending == 0) {
        int n = total ? uv_try_write((uv_stream_t *)&c->tcp, ub, (unsigned)nbufs) : 0;
        if (n < 0 && n != UV_EAGAIN) {
            free(completion);
            rc = KEEL_ERR_IO;
            goto out;
        }
        done = n > 0 ? (size_t)n : 0;
        if (done == total) {
            kl_timeouts_touch(&kl_conn_worker(c)->timeouts, &c->timeout);
            if (completion != NULL)
                kl_worker_defer(kl_conn_worker(c), completion);
            goto out;
        }
        free(completion);
        size_t skip = done;
        while (nrest > 0 && skip >= rest->len) {
            skip -= rest->len;
            rest++;
            nrest--;
        }
        rest->base += skip;
        rest->len -= (unsigned)skip;
    }

    size_t left = 0;
    for (size_t i = 0; i < nrest; i++)
        left += rest[i].len;
    kl_write *w = malloc(sizeof *w + (copy ? left : 0));
    if (w == NULL) {
        rc = KEEL_ERR_NOMEM;
        /* Part of it is out already: the byte stream cannot be repaired. */
        if (done > 0)
            kl_conn_abort_status(c, KEEL_ERR_NOMEM);
        goto out;
    }
    w->cb = cb;
    w->userdata = ud;
    if (copy) {
        char *p = (char *)(w + 1);
        for (size_t i = 0; i < nrest; i++) {
            memcpy(p, rest[i].base, rest[i].len);
            p += rest[i].len;
        }
        uv_buf_t one = uv_buf_init((char *)(w + 1), (unsigned)left);
        rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, &one, 1, on_write_done);
    } else {
        rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, rest, (unsigned)nrest, on_write_done);
    }
    if (rc != 0) {
        free(w);
        rc = KEEL_ERR_IO;
        goto out;
    }
    if (c->writes_pending++ == 0)
        set_timeout(c, server_of(c)->settings.write_timeout_ms);
    kl_conn_check_pressure(c);
out:
    if (ub != stack)
        free(ub);
    return rc;
}

int kl_conn_send(keel_conn *c, const keel_buf *bufs, size_t nbufs, keel_write_cb cb, void *ud)
{
    if (kl_conn_transport(c) != NULL) {
        kl_deferred *completion = NULL;
        if (cb != NULL && (completion = kl_deferred_new(c, cb, ud, KEEL_OK)) == NULL)
            return KEEL_ERR_NOMEM;
        int rc = kl_conn_transport(c)->cb.on_write
                     ? kl_conn_transport(c)->cb.on_write(c, bufs, nbufs)
                     : KEEL_OK;
        if (rc < 0) {
            free(completion);
            kl_conn_abort_status(c, rc);
            return rc;
        }
        if (completion != NULL &&
            (c->tcp.write_queue_size <= KL_PACE_BYTES || kl_ops_park(c, completion) != KEEL_OK))
            kl_worker_defer(kl_conn_worker(c), completion);
        return KEEL_OK;
    }
    int rc = raw_write(c, bufs, nbufs, cb, ud, 0);
    if (rc == KEEL_ERR_IO)
        kl_conn_abort_status(c, rc);
    return rc;
}

int keel_conn_write(keel_conn *c, const keel_buf *bufs, size_t nbufs, keel_write_cb cb, void *ud)
{
    if (c->flags & KL_CONN_CLOSING)
        return KEEL_ERR_CLOSED;
    if (kl_ops_pending(c))
        return kl_ops_hold(c, bufs, nbufs, cb, ud, 0);
    return kl_conn_send(c, bufs, nbufs, cb, ud);
}

int keel_conn_write_copy(keel_conn *c, const void *data, size_t len)
{
    if (c->flags & KL_CONN_CLOSING)
        return KEEL_ERR_CLOSED;
    keel_buf buf = {data, len};
    if (kl_ops_pending(c))
        return kl_ops_hold(c, &buf, 1, NULL, NULL, 1);
    if (kl_conn_transport(c) != NULL)
        return keel_conn_write(c, &buf, 1, NULL, NULL);
    int rc = raw_write(c, &buf, 1, NULL, NULL, 1);
    if (rc == KEEL_ERR_IO)
        kl_conn_abort_status(c, rc);
    return rc;
}

size_t keel_conn_write_queued(keel_conn *c)
{
    size_t q = c->tcp.write_queue_size;
    return kl_ops_bytes(c) > (uint64_t)(SIZE_MAX - q) ? SIZE_MAX : q + (size_t)kl_ops_bytes(c);
}

int keel_transport_send(keel_conn *c, const void *data, size_t len)
{
    if (c->flags & KL_CONN_HANDLE_CLOSED)
        return KEEL_ERR_CLOSED;
    keel_buf buf = {data, len};
    int rc = raw_write(c, &buf, 1, NULL, NULL, 1);
    if (rc == KEEL_ERR_IO)
        kl_conn_abort_status(c, rc);
    return rc;
}

int keel_transport_deliver(keel_conn *c, const void *data, size_t len)
{
    if (c->flags & KL_CONN_CLOSING)
        return KEEL_ERR_CLOSED;
    if (len > UINT32_MAX)
        return KEEL_ERR_LIMIT;
    int rc = reserve(c, len);
    if (rc != KEEL_OK)
        return rc;
    memcpy(c->rbuf + c->rlen, data, len);
    c->rlen += (uint32_t)len;
    if (!(c->flags & KL_CONN_IN_TRANSPORT))
        schedule_delivery(c);
    return KEEL_OK;
}

/* ---- closing ----------------------------------------------------------- */

static void on_shutdown_done(uv_shutdown_t *req, int status)
{
    keel_conn *c = conn_of((uv_handle_t *)req->handle);
    free(req);
    if (c->flags & KL_CONN_HANDLE_CLOSED)
        return;
    /* Lingering is for input the peer may still send; after its EOF there
     * is none (and on Windows the handle can no longer be read). */
    if (status < 0 || (c->flags & KL_CONN_SHUTDOWN_SEEN)) {
        kl_conn_abort_status(c, c->close_status);
        return;
    }
    c->flags |= KL_CONN_LINGERING;
    set_timeout(c, LINGER_MS);
    update_reading(c);
}

/* Every queued byte is out: shut the write side down, then linger. */
static void finish_close(keel_conn *c)
{
    c->flags &= ~KL_CONN_FLUSHING;
    uv_shutdown_t *req = malloc(sizeof *req);
    if (req == NULL || uv_shutdown(req, (uv_stream_t *)&c->tcp, on_shutdown_done) != 0) {
        free(req);
        kl_conn_abort_status(c, c->close_status);
    }
}

/* Everything the protocol wrote has reached the transport or libuv: the
 * transport's closing record goes last, then the write side shuts once
 * libuv's queue is empty. */
static void shut_down(keel_conn *c)
{
    if (kl_conn_transport(c) != NULL && kl_conn_transport(c)->cb.on_shutdown != NULL)
        kl_conn_transport(c)->cb.on_shutdown(c);
    if (c->flags & KL_CONN_HANDLE_CLOSED)
        return;
    if (c->writes_pending > 0)
        c->flags |= KL_CONN_FLUSHING;
    else
        finish_close(c);
}

static void close_gracefully(keel_conn *c, int status)
{
    if (c->flags & KL_CONN_CLOSING)
        return;
    c->flags |= KL_CONN_CLOSING;
    c->close_status = status;
    update_reading(c);
    /* A file still going out, and what waits behind it, leave first. */
    if (kl_ops_pending(c)) {
        c->flags |= KL_CONN_CLOSE_OWED;
        return;
    }
    shut_down(c);
}

void kl_conn_abort_status(keel_conn *c, int status)
{
    if (c->flags & KL_CONN_HANDLE_CLOSED)
        return;
    if (!(c->flags & KL_CONN_CLOSING))
        c->close_status = status;
    c->flags |= KL_CONN_CLOSING | KL_CONN_HANDLE_CLOSED;
    c->flags &= ~KL_CONN_READING;
    kl_timeouts_remove(&c->timeout);
    kl_ops_abort(c);
    uv_close((uv_handle_t *)&c->tcp, on_close);
}

void keel_conn_close(keel_conn *c)
{
    close_gracefully(c, KEEL_OK);
}

void keel_conn_abort(keel_conn *c)
{
    kl_conn_abort_status(c, KEEL_ERR_CLOSED);
}

static void unlink_pending(keel_conn *c)
{
    keel_conn **p = &kl_conn_worker(c)->pending;
    while (*p != NULL && *p != c)
        p = &(*p)->pending_next;
    if (*p == c)
        *p = c->pending_next;
}

static void on_close(uv_handle_t *handle)
{
    keel_conn *c = conn_of(handle);
    /* The file's owner may close it from the transfer's callback: not
     * while the thread pool still reads it. The read's completion comes
     * back here (kl_conn_teardown). */
    if (kl_ops_reading(c)) {
        c->flags |= KL_CONN_TEARDOWN_WAIT;
        return;
    }
    kl_conn_teardown(c);
}

void kl_conn_teardown(keel_conn *c)
{
    keel_worker *w = kl_conn_worker(c);
    if (c->flags & KL_CONN_PENDING)
        unlink_pending(c);
    /* Callbacks of writes that completed at once are still owed, then
     * those of a file and of the writes held behind it. */
    kl_worker_run_deferred_for(w, c);
    kl_ops_fail(c);
    if (!(c->flags & KL_CONN_SILENT_CLOSE) && c->protocol->cb.on_close != NULL)
        c->protocol->cb.on_close(c, c->close_status);
    if ((c->flags & KL_CONN_TRANSPORT_OPEN) && kl_conn_transport(c)->cb.on_close != NULL)
        kl_conn_transport(c)->cb.on_close(c);
    if (c->rbuf != NULL)
        kl_bufpool_put(&w->pool, c->rbuf, c->rcap);
    int accepted = c->origin->spec != NULL; /* outbound ones count in no max_connections */
    free(c);
    w->nconns--;
    if (accepted)
        kl_atomic_sub(&w->server->connections, 1);
    kl_worker_conn_closed(w);
}

/* ---- life cycle -------------------------------------------------------- */

/* Where the caller's tail block starts: after the conn, aligned. */
#define TAIL_OFFSET ((sizeof(keel_conn) + 15) & ~(size_t)15)

keel_conn *kl_conn_new(keel_worker *w, const kl_origin *origin, size_t tail)
{
    keel_conn *c = calloc(1, tail ? TAIL_OFFSET + tail : sizeof *c);
    if (c == NULL)
        return NULL;
    if (uv_tcp_init(&w->loop, &c->tcp) != 0) {
        free(c);
        return NULL;
    }
    c->tcp.data = (void *)&conn_tag;
    c->origin = origin;
    return c;
}

void *kl_conn_tail(keel_conn *c)
{
    return (char *)c + TAIL_OFFSET;
}

static void on_discarded(uv_handle_t *handle)
{
    free(conn_of(handle));
}

void kl_conn_discard(keel_conn *c)
{
    uv_close((uv_handle_t *)&c->tcp, on_discarded);
}

void kl_conn_start(keel_conn *c, void *arg)
{
    keel_worker *w = kl_conn_worker(c);
    c->flags |= KL_CONN_STARTED;
    w->nconns++;
    w->accepted++;
    c->id = kl_atomic_add(&w->server->next_conn_id, 1);
    c->protocol = c->origin->protocol;
    /* Request/response protocols want small writes to leave at once. */
    uv_tcp_nodelay(&c->tcp, 1);
    set_timeout(c, read_timeout(c));

    /* Until the protocol's on_open has succeeded there is nothing for its
     * on_close to release. */
    c->flags |= KL_CONN_SILENT_CLOSE;
    int rc = KEEL_OK;
    if (kl_conn_transport(c) != NULL) {
        rc = kl_conn_transport(c)->cb.on_open ? kl_conn_transport(c)->cb.on_open(c) : KEEL_OK;
        if (rc == KEEL_OK)
            c->flags |= KL_CONN_TRANSPORT_OPEN;
    }
    if (rc == KEEL_OK && !(c->flags & KL_CONN_CLOSING)) {
        rc = c->protocol->cb.on_open ? c->protocol->cb.on_open(c, arg) : KEEL_OK;
        if (rc == KEEL_OK)
            c->flags &= ~KL_CONN_SILENT_CLOSE;
    }
    if (rc < 0) {
        kl_conn_abort_status(c, rc);
        return;
    }
    if (c->flags & KL_CONN_CLOSING)
        return; /* on_open closed it (a banner, say): let that finish */
    if (w->stopping)
        kl_conn_shutdown(c);
    update_reading(c);
}

void kl_conn_shutdown(keel_conn *c)
{
    if (c->flags & KL_CONN_CLOSING)
        return;
    if (c->protocol->cb.on_shutdown != NULL)
        c->protocol->cb.on_shutdown(c);
    else
        close_gracefully(c, KEEL_OK);
}

void kl_conn_on_timeout(kl_timeouts *t, kl_tnode *node)
{
    keel_conn *c = KL_CONTAINER_OF(node, keel_conn, timeout);
    (void)t;
    if (c->flags & (KL_CONN_LINGERING | KL_CONN_CLOSING)) {
        kl_conn_abort_status(c, c->close_status);
    } else if (kl_conn_writing(c)) {
        kl_log(KEEL_LOG_DEBUG, "connection %llu: write timeout", (unsigned long long)c->id);
        kl_conn_abort_status(c, KEEL_ERR_TIMEOUT);
    } else if (c->protocol->cb.on_timeout != NULL) {
        c->protocol->cb.on_timeout(c);
        /* A protocol that neither closed nor set a new timeout gets the
         * same one again rather than a connection that never expires. */
        if (!(c->flags & KL_CONN_CLOSING) && c->timeout.queue == NULL)
            set_timeout(c, read_timeout(c));
    } else {
        close_gracefully(c, KEEL_ERR_TIMEOUT);
    }
}

/* ---- the rest of the public connection API ------------------------------ */

void keel_conn_pause(keel_conn *c)
{
    c->flags |= KL_CONN_PAUSED;
    update_reading(c);
}

void keel_conn_resume(keel_conn *c)
{
    if (!(c->flags & KL_CONN_PAUSED))
        return;
    c->flags &= ~KL_CONN_PAUSED;
    if (c->flags & KL_CONN_CLOSING)
        return;
    update_reading(c);
    if ((c->rbuf != NULL && c->rstart < c->rlen) || (c->flags & KL_CONN_SHUTDOWN_SEEN))
        schedule_delivery(c);
    else
        release_buffer(c);
}

int keel_conn_set_protocol(keel_conn *c, const char *name, void *arg)
{
    const kl_protocol *p = kl_registry_protocol(&server_of(c)->registry, name);
    if (p == NULL)
        return KEEL_ERR_NOTFOUND;
    if (c->flags & KL_CONN_CLOSING)
        return KEEL_ERR_CLOSED;
    c->protocol = p;
    c->protocol_data = NULL;
    /* The new protocol starts reading afresh. */
    c->flags &= ~KL_CONN_PAUSED;
    update_reading(c);
    if (p->cb.on_open != NULL) {
        int rc = p->cb.on_open(c, arg);
        if (rc < 0) {
            /* Neither protocol owns state now: close without on_close. */
            c->flags |= KL_CONN_SILENT_CLOSE;
            kl_conn_abort_status(c, rc);
            return rc;
        }
    }
    /* Inside the old protocol's on_data the delivery loop hands over the
     * rest; from anywhere else, schedule it. */
    if (c->rbuf != NULL && c->rstart < c->rlen)
        schedule_delivery(c);
    return KEEL_OK;
}

int keel_conn_consume(keel_conn *c, size_t len)
{
    if (c->flags & KL_CONN_IN_DATA)
        return KEEL_ERR_STATE;
    size_t avail = c->rbuf != NULL ? c->rlen - c->rstart : 0;
    if (len > avail)
        return KEEL_ERR_INVAL;
    c->rstart += (uint32_t)len;
    release_buffer(c);
    return KEEL_OK;
}

void keel_conn_set_data(keel_conn *c, void *data)
{
    c->protocol_data = data;
}

void *keel_conn_data(keel_conn *c)
{
    return c->protocol_data;
}

void keel_conn_set_transport_data(keel_conn *c, void *data)
{
    c->transport_data = data;
}

void *keel_conn_transport_data(keel_conn *c)
{
    return c->transport_data;
}

void keel_conn_set_timeout(keel_conn *c, uint64_t timeout_ms)
{
    c->timeout_ms = timeout_ms;
    if (!(c->flags & KL_CONN_CLOSING) && !kl_conn_writing(c))
        set_timeout(c, read_timeout(c));
}

keel_worker *keel_conn_worker(keel_conn *c)
{
    return kl_conn_worker(c);
}

uint64_t keel_conn_id(keel_conn *c)
{
    return c->id;
}

int keel_conn_peer_name(keel_conn *c, char *buf, size_t size)
{
    struct sockaddr_storage addr;
    int len = sizeof addr;
    char ip[64];
    if (size == 0)
        return KEEL_ERR_INVAL;
    buf[0] = '\0';
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&addr, &len) != 0)
        return KEEL_ERR_CLOSED;
    int n;
    if (addr.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&addr;
        uv_ip6_name(a, ip, sizeof ip);
        n = snprintf(buf, size, "[%s]:%u", ip, (unsigned)ntohs(a->sin6_port));
    } else {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&addr;
        uv_ip4_name(a, ip, sizeof ip);
        n = snprintf(buf, size, "%s:%u", ip, (unsigned)ntohs(a->sin_port));
    }
    return n >= 0 && (size_t)n < size ? KEEL_OK : KEEL_ERR_INVAL;
}

const char *keel_conn_listener_option(keel_conn *c, const char *key)
{
    const kl_listen_spec *spec = c->origin->spec;
    if (spec == NULL)
        return NULL;
    for (size_t i = 0; i < spec->noptions; i++)
        if (strcmp(spec->options[i].key, key) == 0)
            return spec->options[i].value;
    return NULL;
}

keel_module *keel_conn_module(keel_conn *c)
{
    return c->protocol->owner;
}
