/* A connection's output (see output.h): writes to the socket or through
 * the transport, pacing, and the completions owed for them. The queue of
 * ops (pieces with file ranges, and the writes held behind them) is in
 * output_queue.c. */
#include "net/output.h"

#include <stdlib.h>
#include <string.h>

#include <keel/util.h>

#include "base/freelist.h"
#include "base/util.h"
#include "net/worker.h"

typedef struct kl_write {
    uv_write_t req;
    keel_write_cb cb;
    void *userdata;
    /* copied bytes follow for keel_conn_write_copy */
} kl_write;

/* ---- state and records ------------------------------------------------------ */

kl_output *kl_output_get(keel_conn *c)
{
    if (c->out != NULL)
        return c->out;
    kl_output *o = kl_freelist_get(&kl_conn_worker(c)->output_cache, sizeof *o);
    if (o != NULL) {
        memset(o, 0, sizeof *o);
        c->out = o;
    }
    return o;
}

void kl_output_trim(keel_conn *c)
{
    kl_output *o = c->out;
    if (o != NULL && o->head == NULL && o->in_flight == 0 && o->owed.head == NULL &&
        o->paced.head == NULL) {
        c->out = NULL;
        kl_freelist_put(&kl_conn_worker(c)->output_cache, o);
        if (c->flags & KL_CONN_IDLE)
            kl_conn_output_gone(c);
    }
}

kl_done *kl_done_new(keel_conn *c, keel_write_cb cb, void *ud, int status)
{
    kl_done *d = kl_freelist_get(&kl_conn_worker(c)->done_cache, sizeof *d);
    if (d != NULL)
        *d = (kl_done){NULL, cb, ud, status};
    return d;
}

static void done_free(keel_worker *w, kl_done *d)
{
    kl_freelist_put(&w->done_cache, d);
}

void kl_done_push(kl_done_list *list, kl_done *d)
{
    KEEL_QUEUE_APPEND(list->head, list->tail, d, next);
}

static kl_done *take_all(kl_done_list *list)
{
    kl_done *d = list->head;
    list->head = list->tail = NULL;
    return d;
}

void kl_output_owe_record(keel_conn *c, kl_done *d)
{
    /* The state exists: whoever made the record asked for it first. */
    kl_done_push(&c->out->owed, d);
    kl_conn_schedule(c);
}

int kl_output_owe(keel_conn *c, keel_write_cb cb, void *ud, int status)
{
    kl_done *d = kl_output_get(c) != NULL ? kl_done_new(c, cb, ud, status) : NULL;
    if (d == NULL) {
        kl_output_trim(c);
        return KEEL_ERR_NOMEM;
    }
    kl_output_owe_record(c, d);
    return KEEL_OK;
}

int kl_worker_defer_write_cb(keel_worker *w, keel_conn *conn, keel_write_cb cb, void *ud,
                             int status)
{
    (void)w;
    return kl_output_owe(conn, cb, ud, status);
}

/* Calls and frees a list of records; the connection may close meanwhile
 * (its memory stays: teardown runs from libuv's close callback). */
static void run_list(keel_conn *c, kl_done *d, int override)
{
    keel_worker *w = kl_conn_worker(c);
    while (d != NULL) {
        kl_done *next = d->next;
        keel_write_cb cb = d->cb;
        void *ud = d->userdata;
        int status = override ? override : d->status;
        done_free(w, d);
        cb(c, status, ud);
        d = next;
    }
}

void kl_output_run_owed(keel_conn *c)
{
    if (c->out == NULL)
        return;
    run_list(c, take_all(&c->out->owed), 0);
    if (c->out != NULL && !kl_conn_handle_closed(c))
        kl_output_trim(c);
}

/* ---- what the queue holds --------------------------------------------------- */

/* What a tunnel's transport holds for its carrier to send. */
static uint64_t tunnel_held(const keel_conn *c)
{
    const kl_transport *t = kl_conn_transport(c);
    return kl_conn_is_tunnel(c) && t->cb.queued != NULL ? t->cb.queued((keel_conn *)c) : 0;
}

uint64_t kl_output_queued(const keel_conn *c)
{
    return (uint64_t)c->tcp.write_queue_size + (c->out != NULL ? c->out->held_bytes : 0) +
           tunnel_held(c);
}

int kl_output_busy(const keel_conn *c)
{
    return c->out != NULL && (c->out->in_flight > 0 || c->out->head != NULL);
}

int kl_output_held(const keel_conn *c)
{
    return c->out != NULL && c->out->head != NULL;
}

int kl_output_in_flight(const keel_conn *c)
{
    return c->out != NULL && c->out->in_flight > 0;
}

/* ---- to the socket ------------------------------------------------------------ */

static int status_from_write(int uv_status)
{
    if (uv_status == 0)
        return KEEL_OK;
    return uv_status == UV_ECANCELED ? KEEL_ERR_CLOSED : KEEL_ERR_IO;
}

/* Transport completions held until libuv's queue is small again. */
static void release_paced(keel_conn *c)
{
    kl_output *o = c->out;
    if (o == NULL || o->paced.head == NULL ||
        c->tcp.write_queue_size + tunnel_held(c) > KL_PACE_BYTES)
        return;
    kl_done *d = take_all(&o->paced);
    while (d != NULL) {
        kl_done *next = d->next;
        kl_done_push(&o->owed, d);
        d = next;
    }
    kl_conn_schedule(c);
}

static void on_write_done(uv_write_t *req, int status)
{
    kl_write *w = KL_CONTAINER_OF(req, kl_write, req);
    keel_conn *c = (keel_conn *)req->handle;
    c->out->in_flight--;
    /* Completions owed for earlier writes (they left at once and wait for
     * the idle pass) come first, so that callbacks keep the writes' order:
     * a write cancelled by the handle's close is called back from libuv's
     * close, before the teardown would run what is owed. */
    if (c->out->owed.head != NULL)
        run_list(c, take_all(&c->out->owed), 0);
    if (w->cb != NULL)
        w->cb(c, status_from_write(status), w->userdata);
    free(w);
    if (kl_conn_handle_closed(c))
        return;
    if (status < 0) {
        kl_conn_abort_status(c, KEEL_ERR_IO);
        return;
    }
    kl_conn_output_progress(c);
    /* A file waits for libuv's queue to empty before it is sent (sendfile
     * bypasses the queue), and transport completions for it to drain.
     * The callbacks above may have written through a public entry point,
     * which gives the state back once nothing is left: c->out may be NULL. */
    if (kl_output_held(c) && !kl_output_in_flight(c))
        kl_ops_run(c);
    if (kl_conn_handle_closed(c))
        return;
    release_paced(c);
    kl_output_trim(c);
    kl_conn_output_settled(c);
}

/* keel_bytes_sent_total. */
static void count_sent(keel_conn *c, size_t n)
{
    keel_worker *w = kl_conn_worker(c);
    kl_metric_add_slot(w->metrics, w->host->core_metrics.bytes_out->slot, (int64_t)n);
}

/* The part of bufs not written yet, as uv_buf_t (in `stack` if it fits). */
static uv_buf_t *to_uv(const keel_buf *bufs, size_t nbufs, uv_buf_t *stack, size_t nstack,
                       size_t *total)
{
    uv_buf_t *ub = nbufs <= nstack ? stack : malloc(nbufs * sizeof *ub);
    if (ub == NULL)
        return NULL;
    *total = 0;
    for (size_t i = 0; i < nbufs; i++) {
        ub[i] = uv_buf_init((char *)bufs[i].base, (unsigned)bufs[i].len);
        *total += bufs[i].len;
    }
    return ub;
}

/* Queues what uv_try_write left through a write request; copies it when
 * asked. The uv_buf_t array itself is copied by libuv. */
static int queue_rest(keel_conn *c, uv_buf_t *rest, size_t nrest, keel_write_cb cb, void *ud,
                      int copy)
{
    size_t left = 0;
    for (size_t i = 0; i < nrest; i++)
        left += rest[i].len;
    kl_write *w = malloc(sizeof *w + (copy ? left : 0));
    if (w == NULL)
        return KEEL_ERR_NOMEM;
    w->cb = cb;
    w->userdata = ud;
    int rc;
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
        return KEEL_ERR_IO;
    }
    count_sent(c, left); /* libuv writes it or the connection dies */
    if (c->out->in_flight++ == 0)
        kl_conn_retime(c, 0); /* the write timeout starts */
    kl_conn_output_grew(c);
    return KEEL_OK;
}

/* Writes to the socket: straight away when libuv's queue is empty (most
 * small responses leave here), the rest through a write request. */
static int raw_write(keel_conn *c, const keel_buf *bufs, size_t nbufs, keel_write_cb cb, void *ud,
                     int copy)
{
    for (size_t i = 0; i < nbufs; i++)
        if (bufs[i].len > KEEL_BUF_MAX)
            return KEEL_ERR_INVAL;
    uv_buf_t stack[16], *ub;
    size_t total;
    if ((ub = to_uv(bufs, nbufs, stack, KL_ARRAY_SIZE(stack), &total)) == NULL)
        return KEEL_ERR_NOMEM;
    int rc = KEEL_OK;
    size_t done = 0;
    uv_buf_t *rest = ub;
    size_t nrest = nbufs;
    if (!kl_output_in_flight(c)) {
        /* The completion may not fail to be recorded once bytes have left,
         * so the record is made before writing. A write without one that
         * leaves whole (most small responses) needs no state at all. */
        kl_done *record = NULL;
        if (cb != NULL &&
            (kl_output_get(c) == NULL || (record = kl_done_new(c, cb, ud, KEEL_OK)) == NULL)) {
            rc = KEEL_ERR_NOMEM;
            goto out;
        }
        int n = total ? uv_try_write((uv_stream_t *)&c->tcp, ub, (unsigned)nbufs) : 0;
        if (n < 0 && n != UV_EAGAIN) {
            if (record != NULL)
                done_free(kl_conn_worker(c), record);
            rc = KEEL_ERR_IO;
            goto out;
        }
        done = n > 0 ? (size_t)n : 0;
        count_sent(c, done);
        if (done == total) {
            kl_conn_output_progress(c);
            if (record != NULL)
                kl_output_owe_record(c, record);
            goto out;
        }
        if (record != NULL)
            done_free(kl_conn_worker(c), record);
        size_t skip = done;
        while (nrest > 0 && skip >= rest->len) {
            skip -= rest->len;
            rest++;
            nrest--;
        }
        rest->base += skip;
        rest->len -= (unsigned)skip;
    }
    rc = kl_output_get(c) != NULL ? queue_rest(c, rest, nrest, cb, ud, copy) : KEEL_ERR_NOMEM;
    /* Part of it is out already: the byte stream cannot be repaired. */
    if (rc == KEEL_ERR_NOMEM && done > 0)
        rc = KEEL_ERR_IO;
out:
    if (ub != stack)
        free(ub);
    return rc;
}

/* ---- through a transport ------------------------------------------------------ */

/* Takes back a record held for a write whose transport failed at once. */
static void drop_paced(keel_conn *c, kl_done *record)
{
    kl_done_list *list = &c->out->paced;
    kl_done **link = &list->head, *prev = NULL;
    while (*link != record) {
        prev = *link;
        link = &(*link)->next;
    }
    *link = record->next;
    if (list->tail == record)
        list->tail = prev;
    done_free(kl_conn_worker(c), record);
}

/* The completion is held with the paced ones before the transport runs
 * (so the state it lives in stays while the transport writes), and owed
 * at once if libuv's queue is small enough afterwards. */
static int transport_write(keel_conn *c, const keel_buf *bufs, size_t nbufs, keel_write_cb cb,
                           void *ud)
{
    const kl_transport *t = kl_conn_transport(c);
    kl_done *record = NULL;
    if (cb != NULL) {
        if (kl_output_get(c) == NULL || (record = kl_done_new(c, cb, ud, KEEL_OK)) == NULL)
            return KEEL_ERR_NOMEM;
        kl_done_push(&c->out->paced, record);
    }
    int rc = t->cb.on_write ? t->cb.on_write(c, bufs, nbufs) : KEEL_OK;
    if (rc < 0) {
        /* The caller gets the error, so its callback must not come. */
        if (record != NULL)
            drop_paced(c, record);
        kl_conn_abort_status(c, rc);
        return rc;
    }
    if (record != NULL)
        release_paced(c);
    /* A tunnel's bytes stay with its transport: no libuv write reports
     * them, so the queue's growth is told here. */
    if (kl_conn_is_tunnel(c) && !kl_conn_handle_closed(c))
        kl_conn_output_grew(c);
    return KEEL_OK;
}

void keel_tunnel_sent(keel_conn *c)
{
    if (c == NULL || !kl_conn_is_tunnel(c) || kl_conn_handle_closed(c))
        return;
    /* As a libuv write's completion (on_write_done): progress, the
     * completions paced for the queue, then drain and the close. */
    kl_conn_output_progress(c);
    release_paced(c);
    kl_output_trim(c);
    kl_conn_output_settled(c);
}

/* ---- the unit's entry points ------------------------------------------------- */

int kl_output_send(keel_conn *c, const keel_buf *bufs, size_t nbufs, keel_write_cb cb, void *ud)
{
    if (kl_conn_transport(c) != NULL)
        return transport_write(c, bufs, nbufs, cb, ud);
    int rc = raw_write(c, bufs, nbufs, cb, ud, 0);
    if (rc == KEEL_ERR_IO)
        kl_conn_abort_status(c, rc);
    return rc;
}

int kl_output_write(keel_conn *c, const keel_buf *bufs, size_t nbufs, keel_write_cb cb, void *ud,
                    int copy)
{
    if (kl_output_held(c))
        return kl_ops_hold(c, bufs, nbufs, cb, ud, copy);
    /* A transport copies what it encodes: no need to copy first. */
    if (kl_conn_transport(c) != NULL || !copy)
        return kl_output_send(c, bufs, nbufs, cb, ud);
    int rc = raw_write(c, bufs, nbufs, cb, ud, 1);
    if (rc == KEEL_ERR_IO)
        kl_conn_abort_status(c, rc);
    return rc;
}

int kl_output_send_raw(keel_conn *c, const void *data, size_t len)
{
    keel_buf buf = {data, len};
    int rc = raw_write(c, &buf, 1, NULL, NULL, 1);
    if (rc == KEEL_ERR_IO)
        kl_conn_abort_status(c, rc);
    return rc;
}

void kl_output_abort(keel_conn *c)
{
    if (c->out != NULL)
        kl_ops_abort(c);
}

int kl_output_reading_file(const keel_conn *c)
{
    return c->out != NULL && kl_ops_reading(c);
}

void kl_output_finish(keel_conn *c)
{
    if (c->out == NULL)
        return;
    /* Writes that completed at once: their callbacks are owed as is. */
    run_list(c, take_all(&c->out->owed), 0);
    /* Paced bytes may never have left: the callers learn it, before the
     * files and held writes queued after them. */
    run_list(c, take_all(&c->out->paced), KEEL_ERR_CLOSED);
    kl_ops_fail(c);
    /* Callbacks run above may have owed more (a write refused now). */
    run_list(c, take_all(&c->out->owed), 0);
    kl_freelist_put(&kl_conn_worker(c)->output_cache, c->out);
    c->out = NULL;
}

void kl_output_cache_free(keel_worker *w)
{
    kl_freelist_clear(&w->output_cache);
    kl_freelist_clear(&w->done_cache);
}

/* ---- the public write API ------------------------------------------------------ */

/* The public entry points give the state back when a write left whole
 * and owes nothing; the unit's inner functions never do, so no caller
 * inside the unit holds a state that went away under it. */
static int trimmed(keel_conn *c, int rc)
{
    if (!kl_conn_handle_closed(c))
        kl_output_trim(c);
    return rc;
}

int keel_conn_write(keel_conn *c, const keel_buf *bufs, size_t nbufs, keel_write_cb cb, void *ud)
{
    if (kl_conn_closing(c))
        return KEEL_ERR_CLOSED;
    return trimmed(c, kl_output_write(c, bufs, nbufs, cb, ud, 0));
}

int keel_conn_write_copy(keel_conn *c, const void *data, size_t len)
{
    if (kl_conn_closing(c))
        return KEEL_ERR_CLOSED;
    keel_buf buf = {data, len};
    return trimmed(c, kl_output_write(c, &buf, 1, NULL, NULL, 1));
}

size_t keel_conn_write_queued(keel_conn *c)
{
    uint64_t q = kl_output_queued(c);
    return q > SIZE_MAX ? SIZE_MAX : (size_t)q;
}

int keel_transport_send(keel_conn *c, const void *data, size_t len)
{
    if (kl_conn_handle_closed(c))
        return KEEL_ERR_CLOSED;
    if (kl_conn_is_tunnel(c))
        return KEEL_ERR_UNSUPPORTED; /* no socket: its carrier sends */
    return trimmed(c, kl_output_send_raw(c, data, len));
}
