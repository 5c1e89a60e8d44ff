/* Tunnels (keel_conn_open_tunnel): a byte stream carried inside another
 * connection, an HTTP/2 stream opened by RFC 8441's extended CONNECT, run
 * by a protocol as if it were a socket of its own.
 *
 * A tunnel is an ordinary keel_conn whose libuv handle is never opened,
 * and whose transport is its carrier, as TLS is a socket's (TLS takes the
 * protocol's bytes in on_write and gives it decoded ones with
 * keel_transport_deliver): everything above the transport (the protocol's
 * callbacks, the read buffer and its pause, write completions and their
 * pacing, on_drain, timeouts, the close sequence) is the core's, unchanged,
 * so a protocol cannot tell the two apart. What a socket does below the
 * transport is the carrier's: reading on or off becomes its flow control
 * (on_read_wanted), the bytes it still holds count as queued output
 * (queued, keel_tunnel_sent), the write side's end is the transport's
 * on_shutdown, with no FIN and no lingering after it (net/conn_close.c).
 *
 * The origin and the transport's table live in the connection's tail
 * (kl_conn_new), so a tunnel costs one allocation. It takes no
 * max_connections slot and no place in the worker's count of
 * connections: its carrier holds both, and aborts its tunnels before its
 * own end. Worker thread of the carrier. */
#include <stddef.h>
#include <string.h>

#include "base/atomic.h"
#include "net/conn.h"
#include "net/worker.h"

typedef struct kl_tunnel {
    kl_origin origin;
    kl_transport transport;
    keel_conn *carrier; /* aborts the tunnel before it is freed */
    void *transport_data;
} kl_tunnel;

static kl_tunnel *tunnel_of(keel_conn *c)
{
    return kl_conn_tail(c);
}

int keel_conn_open_tunnel(keel_conn *carrier, const keel_transport *transport, void *transport_data,
                          const char *protocol, void *arg, keel_conn **out)
{
    if (out != NULL)
        *out = NULL;
    if (carrier == NULL || transport == NULL || protocol == NULL || out == NULL ||
        transport->size < offsetof(keel_transport, on_write) + sizeof transport->on_write ||
        transport->on_write == NULL)
        return KEEL_ERR_INVAL;
    if (kl_conn_closing(carrier))
        return KEEL_ERR_CLOSED;
    keel_worker *w = kl_conn_worker(carrier);
    if (w->stopping)
        return KEEL_ERR_SHUTDOWN;
    const kl_protocol *p = kl_registry_protocol(w->host->registry, protocol);
    if (p == NULL)
        return KEEL_ERR_NOTFOUND;
    keel_conn *c = kl_conn_new(w, NULL, sizeof(kl_tunnel));
    if (c == NULL)
        return KEEL_ERR_NOMEM;
    kl_tunnel *t = tunnel_of(c);
    /* A transport built against an older header lacks the later
     * callbacks: they read as NULL. */
    size_t n = transport->size < sizeof t->transport.cb ? transport->size : sizeof t->transport.cb;
    memcpy(&t->transport.cb, transport, n);
    t->transport.cb.size = sizeof t->transport.cb;
    t->origin = (kl_origin){.protocol = p, .transport = &t->transport, .tunnel = 1};
    t->carrier = carrier;
    c->origin = &t->origin;
    t->transport_data = transport_data;
    c->protocol = p;
    c->id = kl_atomic_add(&w->host->next_conn_id, 1);
    kl_conn_retime(c, 1);
    kl_conn_open_layers(c, arg, NULL);
    if (c->flags & KL_CONN_PROTOCOL_OPEN) {
        /* Open, even if on_open closed it at once: the close reaches the
         * transport like any other. */
        *out = c;
        return KEEL_OK;
    }
    /* Refused by the transport or the protocol: aborted, freed from the
     * loop (a transport that deferred its protocol is refused too: a
     * tunnel's protocol is named by its opener). */
    if (!kl_conn_handle_closed(c))
        kl_conn_abort_status(c, KEEL_ERR_STATE);
    return c->close_status < 0 ? c->close_status : KEEL_ERR_CLOSED;
}

void kl_tunnel_update_reading(keel_conn *c, int want)
{
    int reading = (c->flags & KL_CONN_READING) != 0;
    if (want == reading)
        return;
    if (want)
        c->flags |= KL_CONN_READING;
    else
        c->flags &= ~KL_CONN_READING;
    const kl_transport *t = kl_conn_transport(c);
    if ((c->flags & KL_CONN_PROTOCOL_OPEN) && t->cb.on_read_wanted != NULL)
        t->cb.on_read_wanted(c, want);
}

int kl_tunnel_peer_addr(keel_conn *c, kl_peer_addr *out)
{
    return kl_conn_peer_addr(tunnel_of(c)->carrier, out);
}

void **kl_tunnel_transport_data(keel_conn *c)
{
    return &tunnel_of(c)->transport_data;
}

void keel_tunnel_eof(keel_conn *c)
{
    if (c == NULL || !kl_conn_is_tunnel(c) || kl_conn_closing(c) || (c->flags & KL_CONN_EOF))
        return;
    if (c->rbuf != NULL && c->rstart < c->rlen) {
        /* Bytes delivered before the end wait for the loop's delivery
         * (keel_transport_deliver): the protocol hears of the end after
         * them, as a socket's EOF after the read before it. */
        c->flags |= KL_CONN_EOF | KL_CONN_EOF_OWED;
        kl_conn_update_reading(c);
        kl_conn_schedule_delivery(c);
        return;
    }
    kl_conn_on_eof(c);
}
