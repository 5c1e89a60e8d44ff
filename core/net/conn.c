/* The connection manager: protocol hand-over, timeouts, the idle list and
 * the life cycle. Reading is net/conn_read.c, the PROXY protocol header
 * net/conn_preamble.c, output the output unit's (net/output.c), closing
 * net/conn_close.c, a connection's addresses and their text net/conn_addr.c. Everything here runs
 * on the connection's worker thread. */
#include "net/conn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/atomic.h"
#include "base/log.h"
#include "base/util.h"
#include "net/output.h"
#include "net/preamble.h"
#include "net/worker.h"

static void on_close(uv_handle_t *handle);

/* What a connection's handle carries in `data`: it tells connections
 * apart from the worker's other TCP handles in kl_conn_each. */
static const char conn_tag;

typedef struct each_ctx {
    void (*fn)(keel_conn *conn, void *arg);
    void *arg;
} each_ctx;

static void each_handle(uv_handle_t *handle, void *arg)
{
    const each_ctx *ctx = arg;
    if (handle->type != UV_TCP || handle->data != &conn_tag || uv_is_closing(handle))
        return;
    keel_conn *c = kl_conn_of_handle(handle);
    if (c->flags & KL_CONN_STARTED)
        ctx->fn(c, ctx->arg);
}

void kl_conn_each(keel_worker *w, void (*fn)(keel_conn *conn, void *arg), void *arg)
{
    each_ctx ctx = {fn, arg};
    uv_walk(&w->loop, each_handle, &ctx);
}

static kl_host *host_of(const keel_conn *c)
{
    return kl_conn_worker(c)->host;
}

/* ---- timeouts ------------------------------------------------------------ */

/* How long a closing connection keeps reading (and discarding) after its
 * write side is shut, so that unread input does not make the kernel send
 * RST and destroy the response in flight (nginx's lingering close). The
 * budget is for the whole linger: discarded bytes never renew it, so a
 * peer that trickles bytes cannot hold the connection (nginx's
 * lingering_time). */
#define LINGER_MS 2000

static uint64_t duration_of(const keel_conn *c, kl_timeout_kind kind)
{
    const kl_settings *s = &host_of(c)->settings;
    switch (kind) {
    case KL_TIMEOUT_WRITE:
        return s->write_timeout_ms;
    case KL_TIMEOUT_LINGER:
        return LINGER_MS;
    case KL_TIMEOUT_READ:
    case KL_TIMEOUT_DEADLINE: /* only when it was lost: the inactivity timeout stands in */
    default:
        return c->timeout_ms ? c->timeout_ms : s->idle_timeout_ms;
    }
}

/* The meaning the state gives the timeout. */
static kl_timeout_kind kind_now(const keel_conn *c)
{
    if (c->phase == KL_PHASE_LINGERING)
        return KL_TIMEOUT_LINGER;
    if ((c->flags & KL_CONN_DEADLINE) && c->phase == KL_PHASE_OPEN)
        return KL_TIMEOUT_DEADLINE;
    return kl_output_busy(c) ? KL_TIMEOUT_WRITE : KL_TIMEOUT_READ;
}

void kl_conn_retime(keel_conn *c, int reset)
{
    if (kl_conn_handle_closed(c))
        return;
    kl_timeout_kind kind = kind_now(c);
    int scheduled = kl_tnode_scheduled(&c->timeout);
    /* A deadline never moves: only keel_conn_set_deadline sets it. */
    if (kind == KL_TIMEOUT_DEADLINE && scheduled && c->timeout_kind == KL_TIMEOUT_DEADLINE)
        return;
    if (!reset && scheduled && kind == c->timeout_kind)
        return;
    /* Closing must not extend a connection's life: once its output has
     * left, the deadline in force stands (lingering has its own). */
    if (!reset && scheduled && kl_conn_closing(c) && kind == KL_TIMEOUT_READ)
        return;
    c->timeout_kind = (uint8_t)kind;
    if (kl_timeouts_set(&kl_conn_worker(c)->timeouts, &c->timeout, duration_of(c, kind)) != KEEL_OK)
        kl_conn_abort_status(c, KEEL_ERR_NOMEM);
}

void kl_conn_on_timeout(kl_timeouts *t, kl_tnode *node)
{
    keel_conn *c = KL_CONTAINER_OF(node, keel_conn, timeout);
    (void)t;
    if (kl_conn_closing(c)) {
        kl_conn_abort_status(c, c->close_status);
        return;
    }
    switch ((kl_timeout_kind)c->timeout_kind) {
    case KL_TIMEOUT_WRITE:
        kl_log(KEEL_LOG_DEBUG, "connection %llu: write timeout", (unsigned long long)c->id);
        kl_conn_abort_status(c, KEEL_ERR_TIMEOUT);
        return;
    case KL_TIMEOUT_LINGER:
        kl_conn_abort_status(c, c->close_status);
        return;
    case KL_TIMEOUT_DEADLINE:
        kl_log(KEEL_LOG_DEBUG, "connection %llu: deadline passed", (unsigned long long)c->id);
        c->flags &= ~KL_CONN_DEADLINE;
        if (!(c->flags & KL_CONN_IDLE))
            kl_conn_unlist(c);
        break;
    case KL_TIMEOUT_READ:
        break;
    }
    if (c->protocol->cb.on_timeout == NULL || (c->flags & (KL_CONN_DEFERRED | KL_CONN_PREAMBLE))) {
        kl_conn_close(c, KEEL_ERR_TIMEOUT);
        return;
    }
    c->protocol->cb.on_timeout(c);
    /* A protocol that neither closed nor set a new timeout gets the same
     * one again rather than a connection that never expires. */
    if (!kl_conn_closing(c) && !kl_tnode_scheduled(&c->timeout))
        kl_conn_retime(c, 1);
}

/* ---- what the output unit reports -------------------------------------- */

void kl_conn_output_progress(keel_conn *c)
{
    if (c->timeout_kind != KL_TIMEOUT_DEADLINE)
        kl_timeouts_touch(&kl_conn_worker(c)->timeouts, &c->timeout);
}

void kl_conn_output_grew(keel_conn *c)
{
    if (!(c->flags & KL_CONN_BACKPRESSURE) &&
        kl_output_queued(c) > host_of(c)->settings.write_high_water) {
        c->flags |= KL_CONN_BACKPRESSURE;
        kl_conn_update_reading(c);
    }
}

void kl_conn_output_settled(keel_conn *c)
{
    if (kl_conn_handle_closed(c))
        return;
    kl_conn_retime(c, 0);
    if ((c->flags & KL_CONN_BACKPRESSURE) &&
        kl_output_queued(c) <= host_of(c)->settings.write_high_water / 4) {
        c->flags &= ~KL_CONN_BACKPRESSURE;
        kl_conn_update_reading(c);
        if (c->protocol->cb.on_drain != NULL && !kl_conn_closing(c) &&
            !(c->flags & (KL_CONN_DEFERRED | KL_CONN_PREAMBLE)))
            c->protocol->cb.on_drain(c);
        if (kl_conn_handle_closed(c))
            return;
    }
    kl_conn_advance_close(c);
}

/* ---- life cycle -------------------------------------------------------- */

static void unlink_pending(keel_conn *c)
{
    /* The list is the worker's work for this turn: short. */
    keel_conn **p = &kl_conn_worker(c)->pending;
    while (*p != NULL && *p != c)
        p = &(*p)->pending_next;
    if (*p == c)
        *p = c->pending_next;
}

/* ---- idle connections, reclaimed at max_connections ---------------------- */

/* One list holds both kinds of connection a new client may displace:
 * idle ones (between messages) and those whose peer has a deadline to
 * finish what it began (a handshake, a head): slots a peer holds without
 * having delivered anything. The flags say why it is listed. */
static void list_add(keel_conn *c)
{
    keel_worker *w = kl_conn_worker(c);
    c->flags |= KL_CONN_LISTED;
    c->idle_next = NULL;
    c->idle_prev = w->idle_tail;
    if (w->idle_tail != NULL)
        w->idle_tail->idle_next = c;
    else
        w->idle_head = c;
    w->idle_tail = c;
    kl_relaxed_store64(&w->nidle, w->nidle + 1);
}

void kl_conn_unlist(keel_conn *c)
{
    if (!(c->flags & KL_CONN_LISTED))
        return;
    keel_worker *w = kl_conn_worker(c);
    if (c->idle_prev != NULL)
        c->idle_prev->idle_next = c->idle_next;
    else
        w->idle_head = c->idle_next;
    if (c->idle_next != NULL)
        c->idle_next->idle_prev = c->idle_prev;
    else
        w->idle_tail = c->idle_prev;
    c->idle_prev = c->idle_next = NULL;
    c->flags &= ~KL_CONN_LISTED;
    kl_relaxed_store64(&w->nidle, w->nidle - 1);
}

void kl_conn_idle_unlink(keel_conn *c)
{
    if (!(c->flags & KL_CONN_IDLE))
        return;
    c->flags &= ~KL_CONN_IDLE;
    if (!(c->flags & KL_CONN_DEADLINE))
        kl_conn_unlist(c);
}

/* An outbound connection holds no max_connections slot to give. */
static int may_list(const keel_conn *c)
{
    return !kl_conn_closing(c) && c->origin->spec != NULL;
}

void keel_conn_set_idle(keel_conn *c, int idle)
{
    if (!idle) {
        kl_conn_idle_unlink(c);
        return;
    }
    /* Already idle: it keeps its place (idle since the first mark). */
    if ((c->flags & (KL_CONN_IDLE | KL_CONN_DEFERRED)) || kl_conn_closing(c))
        return;
    /* An outbound one is marked, never listed: keel_conn_close then ends
     * it at once (kl_conn_close_idle_outbound). */
    c->flags |= KL_CONN_IDLE;
    /* Listed once its output has left (kl_conn_output_gone): a response
     * still leaving to a peer that does not read cannot be closed, and
     * such connections at the list's head would hide every other from the
     * bounded scan (16 peers that never read kept new clients out). */
    if (!(c->flags & KL_CONN_LISTED) && c->out == NULL && may_list(c))
        list_add(c);
}

void kl_conn_output_gone(keel_conn *c)
{
    if ((c->flags & (KL_CONN_IDLE | KL_CONN_LISTED)) == KL_CONN_IDLE && may_list(c))
        list_add(c);
}

/* Nothing would be lost by closing it now: the protocol said so, no byte
 * waits unconsumed, no output is queued or owed, nothing is in a
 * callback. */
int kl_conn_reclaimable(const keel_conn *c)
{
    return (c->flags & KL_CONN_IDLE) && c->phase == KL_PHASE_OPEN &&
           (c->rbuf == NULL || c->rstart == c->rlen) && c->out == NULL &&
           !(c->flags & (KL_CONN_IN_DATA | KL_CONN_IN_TRANSPORT | KL_CONN_PENDING));
}

/* Its peer has not finished what it began by the deadline it was given:
 * what it sent so far is dropped with it. Not while a callback runs or
 * output it may need waits (a handshake's reply being written). */
static int unfinished(const keel_conn *c)
{
    return (c->flags & KL_CONN_DEADLINE) && c->phase == KL_PHASE_OPEN && c->out == NULL &&
           !(c->flags & (KL_CONN_IN_DATA | KL_CONN_IN_TRANSPORT | KL_CONN_PENDING));
}

/* How far down the list to look past connections that cannot be closed
 * right now: bounded, so that accepting stays O(1). */
#define RECLAIM_SCAN 16

int kl_conn_reclaim_idle(keel_worker *w)
{
    /* Idle connections first: their peers lose nothing; failing that the
     * oldest peer that has yet to finish a handshake or a head, so that
     * peers trickling them cannot hold every slot (issue 23). */
    keel_conn *c = NULL, *unfinished_one = NULL, *at = w->idle_head;
    for (int n = 0; at != NULL && n < RECLAIM_SCAN; n++, at = at->idle_next) {
        if (kl_conn_reclaimable(at)) {
            c = at;
            break;
        }
        if (unfinished_one == NULL && unfinished(at))
            unfinished_one = at;
    }
    if (c == NULL)
        c = unfinished_one;
    if (c == NULL)
        return 0;
    kl_log(KEEL_LOG_DEBUG,
           "connection %llu: %s connection closed to admit a new one (max_connections)",
           (unsigned long long)c->id, c == unfinished_one ? "unfinished" : "idle");
    kl_metric_add_slot(w->metrics, w->host->core_metrics.conns_reclaimed->slot, 1);
    /* Its slot goes to the new connection now, not at its teardown: an
     * abort, as nginx closes a reusable connection: nothing is owed to
     * the peer, and the descriptor is closed at once. */
    c->flags |= KL_CONN_SLOT_GIVEN;
    kl_conn_abort_status(c, KEEL_ERR_LIMIT);
    return 1;
}

/* ---- deadlines -------------------------------------------------------------- */

void keel_conn_set_deadline(keel_conn *c, uint64_t ms)
{
    if (kl_conn_closing(c))
        return;
    if (ms == 0) {
        if (!(c->flags & KL_CONN_DEADLINE))
            return;
        c->flags &= ~KL_CONN_DEADLINE;
        if (!(c->flags & KL_CONN_IDLE))
            kl_conn_unlist(c);
        kl_conn_retime(c, 1); /* inactivity (or the write timeout) from now */
        return;
    }
    /* A deadline replaced keeps the connection's place on the list: its
     * peer has been unfinished since the first. */
    c->flags |= KL_CONN_DEADLINE;
    if (!(c->flags & KL_CONN_LISTED) && may_list(c))
        list_add(c);
    c->timeout_kind = KL_TIMEOUT_DEADLINE;
    if (kl_timeouts_set(&kl_conn_worker(c)->timeouts, &c->timeout, ms) != KEEL_OK)
        kl_conn_abort_status(c, KEEL_ERR_NOMEM);
}

/* ---- a protocol the transport opens (ALPN) -------------------------------- */

/* What the protocol's on_open will need, kept in the connection's data
 * slot (the protocol's, unused until it opens) while the transport
 * negotiates. Only connections whose transport deferred have one. */
typedef struct kl_deferred {
    void *arg;
    keel_connect_error_fn on_error; /* an outbound connection's caller */
    keel_connect *attempt;          /* ...and its handle, valid until it is answered */
} kl_deferred;

int kl_conn_deferred_attach(keel_conn *c, keel_connect *attempt)
{
    kl_deferred *d = c->protocol_data;
    if (!(c->flags & KL_CONN_DEFERRED) || d == NULL)
        return 0;
    d->attempt = attempt;
    return 1;
}

void kl_conn_deferred_cancel(keel_conn *c)
{
    kl_deferred *d = c->protocol_data;
    if ((c->flags & KL_CONN_DEFERRED) && d != NULL) {
        d->on_error = NULL;
        d->attempt = NULL;
    }
    kl_conn_abort_status(c, KEEL_ERR_CLOSED);
}

/* The connection ends before its protocol opened: an outbound one's
 * caller still gets its one answer. */
static void deferred_never_opened(keel_conn *c)
{
    kl_deferred *d = c->protocol_data;
    c->flags &= ~KL_CONN_DEFERRED;
    c->protocol_data = NULL;
    if (d != NULL && d->on_error != NULL) {
        kl_log(KEEL_LOG_DEBUG, "connection %llu: closed before the transport opened its protocol",
               (unsigned long long)c->id);
        keel_worker *w = kl_conn_worker(c);
        /* The TLS handshake failed, say: the transport logged why. */
        w->connect_detail = "closed before the transport (a handshake) opened the protocol";
        d->on_error(w, KEEL_ERR_IO, d->arg);
        w->connect_detail = NULL;
    }
    if (d != NULL && d->attempt != NULL)
        kl_connect_answered(d->attempt);
    free(d);
}

/* Runs the protocol's on_open and what follows it, for kl_conn_start and
 * keel_transport_open_protocol. Returns the on_open status. */
static int open_protocol(keel_conn *c, void *arg)
{
    int rc = c->protocol->cb.on_open ? c->protocol->cb.on_open(c, arg) : KEEL_OK;
    if (rc == KEEL_OK)
        c->flags |= KL_CONN_PROTOCOL_OPEN;
    if (rc < 0) {
        kl_conn_abort_status(c, rc);
        return rc;
    }
    if (kl_conn_closing(c))
        return rc; /* on_open closed it (a banner, say): let that finish */
    if (kl_conn_worker(c)->stopping)
        kl_conn_shutdown(c);
    kl_conn_update_reading(c);
    return rc;
}

int keel_transport_open_protocol(keel_conn *c, const char *protocol)
{
    if (!(c->flags & KL_CONN_DEFERRED))
        return KEEL_ERR_STATE;
    if (kl_conn_closing(c))
        return KEEL_ERR_CLOSED;
    if (protocol != NULL) {
        const kl_protocol *p = kl_registry_protocol(host_of(c)->registry, protocol);
        if (p == NULL)
            return KEEL_ERR_NOTFOUND;
        c->protocol = p;
    }
    kl_deferred *d = c->protocol_data;
    void *arg = d ? d->arg : NULL;
    keel_connect *attempt = d ? d->attempt : NULL;
    free(d);
    c->protocol_data = NULL;
    c->flags &= ~KL_CONN_DEFERRED;
    /* The caller's handle ends with this answer (keel_conn_connect). */
    if (attempt != NULL)
        kl_connect_answered(attempt);
    /* Bytes the transport delivered meanwhile go to the protocol from the
     * loop, as any delivery does. */
    if (c->rbuf != NULL && c->rstart < c->rlen)
        kl_conn_schedule_delivery(c);
    open_protocol(c, arg);
    return KEEL_OK;
}

const char *keel_conn_protocol_name(keel_conn *c)
{
    return c->protocol->cb.name;
}

const char *keel_conn_transport_name(keel_conn *c)
{
    const kl_transport *t = kl_conn_transport(c);
    return t != NULL ? t->cb.name : NULL;
}

void kl_conn_teardown(keel_conn *c)
{
    keel_worker *w = kl_conn_worker(c);
    kl_conn_unlist(c);
    if (c->flags & KL_CONN_PENDING)
        unlink_pending(c);
    /* Completions owed run first, then those of files and writes that
     * never left. */
    kl_output_finish(c);
    if (c->flags & KL_CONN_DEFERRED)
        deferred_never_opened(c);
    if ((c->flags & KL_CONN_PROTOCOL_OPEN) && c->protocol->cb.on_close != NULL)
        c->protocol->cb.on_close(c, c->close_status);
    if ((c->flags & KL_CONN_TRANSPORT_OPEN) && kl_conn_transport(c)->cb.on_close != NULL)
        kl_conn_transport(c)->cb.on_close(c);
    if (c->rbuf != NULL)
        kl_bufpool_put(&w->pool, c->rbuf, c->rcap);
    /* Outbound ones count in no max_connections; a reclaimed one gave its
     * slot away already. */
    int accepted = c->origin->spec != NULL && !(c->flags & KL_CONN_SLOT_GIVEN);
    int started = (c->flags & KL_CONN_STARTED) != 0;
    free(c);
    if (!started)
        return;
    w->nconns--;
    kl_metric_add_slot(w->metrics, w->host->core_metrics.conns_open->slot, -1);
    if (accepted)
        kl_host_release(w->host);
    kl_worker_conn_closed(w);
}

static void on_close(uv_handle_t *handle)
{
    keel_conn *c = kl_conn_of_handle(handle);
    c->phase = KL_PHASE_CLOSED;
    /* The file's owner may close it from the transfer's callback: not
     * while the thread pool still reads it. The read's completion comes
     * back to kl_conn_teardown. */
    if (kl_output_reading_file(c))
        return;
    kl_conn_teardown(c);
}

void kl_conn_close_handle(keel_conn *c, int reset)
{
    /* A reset (SO_LINGER 0) frees at once what the kernel still holds for
     * the peer, megabytes for one that stopped reading; an orderly end
     * keeps the plain close, whose FIN follows the data. */
    if (reset && !kl_conn_is_tunnel(c) && uv_tcp_close_reset(&c->tcp, on_close) == 0)
        return;
    uv_close((uv_handle_t *)&c->tcp, on_close);
}

/* A connection with a transport (TLS) has the transport's data pointer
 * right after the conn: plain TCP connections, the most, carry none. A
 * tunnel's origin is set after kl_conn_new: it keeps the pointer in its
 * own tail (net/tunnel.c). */
static int has_transport_slot(const kl_origin *origin)
{
    return origin != NULL && origin->transport != NULL && !origin->tunnel;
}

/* Where the caller's tail block starts: after the conn and the transport's
 * pointer, aligned. */
static size_t tail_offset(const kl_origin *origin)
{
    size_t end = sizeof(keel_conn) + (has_transport_slot(origin) ? sizeof(void *) : 0);
    return (end + 15) & ~(size_t)15;
}

keel_conn *kl_conn_new(keel_worker *w, const kl_origin *origin, size_t tail)
{
    size_t size = tail ? tail_offset(origin) + tail
                       : sizeof(keel_conn) + (has_transport_slot(origin) ? sizeof(void *) : 0);
    keel_conn *c = calloc(1, size);
    if (c == NULL)
        return NULL;
    if (uv_tcp_init(&w->loop, &c->tcp) != 0) {
        free(c);
        return NULL;
    }
    c->tcp.data = (void *)&conn_tag;
    c->origin = origin;
    kl_tnode_init(&c->timeout);
    return c;
}

void *kl_conn_tail(keel_conn *c)
{
    return (char *)c + tail_offset(c->origin);
}

static void **transport_data_slot(keel_conn *c)
{
    if (kl_conn_is_tunnel(c))
        return kl_tunnel_transport_data(c);
    return has_transport_slot(c->origin) ? (void **)(void *)(c + 1) : NULL;
}

static void on_discarded(uv_handle_t *handle)
{
    free(kl_conn_of_handle(handle));
}

void kl_conn_discard(keel_conn *c)
{
    uv_close((uv_handle_t *)&c->tcp, on_discarded);
}

int kl_conn_start(keel_conn *c, void *arg, keel_connect_error_fn on_error)
{
    keel_worker *w = kl_conn_worker(c);
    c->flags |= KL_CONN_STARTED;
    w->nconns++;
    const kl_core_metrics *cm = &w->host->core_metrics;
    kl_metric_add_slot(w->metrics, cm->conns_open->slot, 1);
    if (c->origin->spec != NULL) {
        w->accepted++; /* outbound connections are not accepted ones */
        kl_metric_add_slot(w->metrics, cm->conns_accepted->slot, 1);
    }
    c->id = kl_atomic_add(&w->host->next_conn_id, 1);
    c->protocol = c->origin->protocol;
    /* Request/response protocols want small writes to leave at once. */
    if (!kl_conn_is_tunnel(c) && !c->origin->nodelay_inherited)
        uv_tcp_nodelay(&c->tcp, 1);
    if (c->origin->spec != NULL && c->origin->spec->preamble != NULL)
        return kl_conn_preamble_start(c);
    kl_conn_retime(c, 1);
    return kl_conn_open_layers(c, arg, on_error);
}

/* The transport, then the protocol: kl_conn_start, or the end of the
 * PROXY protocol header. */
int kl_conn_open_layers(keel_conn *c, void *arg, keel_connect_error_fn on_error)
{
    keel_worker *w = kl_conn_worker(c);
    /* Until the protocol's on_open has succeeded there is nothing for its
     * on_close to release. */
    int rc = KEEL_OK;
    if (kl_conn_transport(c) != NULL) {
        rc = kl_conn_transport(c)->cb.on_open ? kl_conn_transport(c)->cb.on_open(c) : KEEL_OK;
        if (rc == KEEL_OK || rc == KEEL_TRANSPORT_DEFER)
            c->flags |= KL_CONN_TRANSPORT_OPEN;
    }
    if (rc == KEEL_TRANSPORT_DEFER && !kl_conn_closing(c)) {
        /* The transport opens the protocol once it knows which (ALPN). */
        kl_deferred *d = calloc(1, sizeof *d);
        if (d == NULL) {
            kl_conn_abort_status(c, KEEL_ERR_NOMEM);
            return 0;
        }
        *d = (kl_deferred){arg, on_error, NULL};
        c->protocol_data = d;
        c->flags |= KL_CONN_DEFERRED;
        if (w->stopping)
            kl_conn_abort_status(c, KEEL_ERR_SHUTDOWN);
        else
            kl_conn_update_reading(c);
        return 1; /* the outbound caller's answer comes from the connection now */
    }
    if (rc < 0 || rc == KEEL_TRANSPORT_DEFER) {
        kl_conn_abort_status(c, rc < 0 ? rc : KEEL_ERR_CLOSED);
        return 0;
    }
    if (kl_conn_closing(c))
        return 0;
    open_protocol(c, arg);
    return 1;
}

void kl_conn_shutdown(keel_conn *c)
{
    if (kl_conn_closing(c))
        return;
    if (c->flags & (KL_CONN_DEFERRED | KL_CONN_PREAMBLE))
        kl_conn_abort_status(c, KEEL_ERR_SHUTDOWN); /* still negotiating: nothing to finish */
    else if (c->protocol->cb.on_shutdown != NULL)
        c->protocol->cb.on_shutdown(c);
    else
        kl_conn_close(c, KEEL_OK);
}

/* ---- the rest of the public connection API ------------------------------ */

void keel_conn_close(keel_conn *c)
{
    kl_conn_close(c, KEEL_OK);
}

void keel_conn_abort(keel_conn *c)
{
    kl_conn_abort_status(c, KEEL_ERR_CLOSED);
}

void keel_conn_pause(keel_conn *c)
{
    c->flags |= KL_CONN_PAUSED | KL_CONN_PAUSE_OWN;
    kl_conn_update_reading(c);
}

/* No pause holds the connection any more: reading goes on, and what is
 * buffered is delivered again from the loop. */
static void pause_lifted(keel_conn *c)
{
    c->flags &= ~KL_CONN_PAUSED;
    if (kl_conn_closing(c))
        return;
    kl_conn_update_reading(c);
    if ((c->rbuf != NULL && c->rstart < c->rlen) || (c->flags & KL_CONN_EOF))
        kl_conn_schedule_delivery(c);
    else
        kl_conn_release_buffer(c);
}

void keel_conn_resume(keel_conn *c)
{
    if (!(c->flags & KL_CONN_PAUSE_OWN))
        return;
    c->flags &= ~KL_CONN_PAUSE_OWN;
    if ((c->flags >> KL_CONN_EXCHANGE_PAUSE_SHIFT) == 0)
        pause_lifted(c);
}

int kl_conn_exchange_pause(keel_conn *c, int paused)
{
    uint32_t n = c->flags >> KL_CONN_EXCHANGE_PAUSE_SHIFT;
    if (paused) {
        if (n == KL_CONN_EXCHANGE_PAUSE_MAX)
            return KEEL_ERR_LIMIT;
        c->flags += 1u << KL_CONN_EXCHANGE_PAUSE_SHIFT;
        c->flags |= KL_CONN_PAUSED;
        kl_conn_update_reading(c);
        return KEEL_OK;
    }
    if (n == 0)
        return KEEL_ERR_STATE;
    c->flags -= 1u << KL_CONN_EXCHANGE_PAUSE_SHIFT;
    if (n == 1 && !(c->flags & KL_CONN_PAUSE_OWN))
        pause_lifted(c);
    return KEEL_OK;
}

int keel_conn_set_protocol(keel_conn *c, const char *name, void *arg)
{
    const kl_protocol *p = kl_registry_protocol(host_of(c)->registry, name);
    if (p == NULL)
        return KEEL_ERR_NOTFOUND;
    if (kl_conn_closing(c))
        return KEEL_ERR_CLOSED;
    /* The new protocol says when it is idle, and sets its own deadlines. */
    c->flags &= ~(KL_CONN_IDLE | KL_CONN_DEADLINE);
    kl_conn_unlist(c);
    if (c->timeout_kind == KL_TIMEOUT_DEADLINE)
        kl_conn_retime(c, 1);
    c->protocol = p;
    c->protocol_data = NULL;
    /* The new protocol starts reading afresh (unless an exchange of the
     * old one still holds a pause: it is counted until it ends). */
    c->flags &= ~(KL_CONN_PAUSED | KL_CONN_PAUSE_OWN);
    if ((c->flags >> KL_CONN_EXCHANGE_PAUSE_SHIFT) != 0)
        c->flags |= KL_CONN_PAUSED;
    kl_conn_update_reading(c);
    if (p->cb.on_open != NULL) {
        int rc = p->cb.on_open(c, arg);
        if (rc < 0) {
            /* Neither protocol owns state now: close without on_close. */
            c->flags &= ~KL_CONN_PROTOCOL_OPEN;
            kl_conn_abort_status(c, rc);
            return rc;
        }
    }
    /* Inside the old protocol's on_data the delivery loop hands over the
     * rest; from anywhere else, schedule it. */
    if (!(c->flags & KL_CONN_IN_DATA) && c->rbuf != NULL && c->rstart < c->rlen)
        kl_conn_schedule_delivery(c);
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
    kl_conn_release_buffer(c);
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
    void **slot = transport_data_slot(c);
    if (slot != NULL)
        *slot = data;
}

void *keel_conn_transport_data(keel_conn *c)
{
    void **slot = transport_data_slot(c);
    return slot != NULL ? *slot : NULL;
}

void keel_conn_set_timeout(keel_conn *c, uint64_t timeout_ms)
{
    c->timeout_ms = timeout_ms > UINT32_MAX ? UINT32_MAX : (uint32_t)timeout_ms;
    if (!kl_conn_closing(c) && !kl_output_busy(c))
        kl_conn_retime(c, 1);
}

keel_worker *keel_conn_worker(keel_conn *c)
{
    return kl_conn_worker(c);
}

uint64_t keel_conn_id(keel_conn *c)
{
    return c->id;
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
