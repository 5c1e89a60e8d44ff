/* UDP listeners (ABI 1.9, docs/udp.md). A `udp` listen line binds one
 * socket per worker where the kernel balances a port over several
 * (SO_REUSEPORT), else one that worker 0 serves; no connection exists, so
 * none of conn.c applies: each worker's keel_dgram receives a batch of
 * datagrams per system call (libuv's recvmmsg) into one buffer kept for
 * the socket's life, hands each to the protocol with its peer, and sends
 * with uv_udp_try_send, queueing what the socket cannot take at once up to
 * the listener's send_queue bytes. */
#include "net/udp.h"

#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "net/worker.h"
#include "runtime/crash.h"

struct keel_dgram {
    uv_udp_t handle;
    keel_worker *worker;
    kl_listener *listener;
    const kl_dgram_protocol *protocol;
    void *data;
    char *buf; /* the receive batch: listener's batch slots of KL_UDP_SLOT */
    size_t buf_size;
    uint64_t queued; /* bytes in sends libuv holds */
    int closed;      /* on_close ran: no more callbacks, no sends */
    int in_batch;    /* datagrams were delivered since the last on_batch_end */
    keel_dgram *next;
};

/* A datagram the socket could not take at once, with its bytes. */
typedef struct udp_send {
    uv_udp_send_t req;
    keel_dgram *dgram;
    size_t len;
    char bytes[];
} udp_send;

static int64_t *slots_of(keel_dgram *d)
{
    return d->worker->metrics;
}

static void count(keel_dgram *d, keel_metric *m, int64_t n)
{
    kl_metric_add_slot(slots_of(d), m->slot, n);
}

static void count_drop(keel_dgram *d, int reason)
{
    count(d, d->worker->host->core_metrics.udp_dropped[reason], 1);
}

/* ---- receiving ---------------------------------------------------------- */

static void peer_of(const struct sockaddr *sa, keel_dgram_peer *peer)
{
    memset(peer, 0, sizeof *peer);
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        memcpy(peer->addr, &in6->sin6_addr, 16);
        peer->port = ntohs(in6->sin6_port);
        peer->scope_id = in6->sin6_scope_id;
    } else {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        peer->addr[10] = peer->addr[11] = 0xff;
        memcpy(peer->addr + 12, &in->sin_addr, 4);
        peer->port = ntohs(in->sin_port);
    }
}

static void end_batch(keel_dgram *d)
{
    if (!d->in_batch)
        return;
    d->in_batch = 0;
    if (d->protocol->cb.on_batch_end != NULL && !d->closed)
        KL_IN_MODULE(d->protocol->owner->name, d->protocol->cb.on_batch_end(d));
}

/* The same buffer every time: libuv fills it and hands every datagram of
 * the batch to on_recv before it asks again. */
static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf)
{
    keel_dgram *d = handle->data;
    (void)suggested;
    *buf = uv_buf_init(d->buf, (unsigned)d->buf_size);
}

static void on_recv(uv_udp_t *handle, ssize_t nread, const uv_buf_t *buf,
                    const struct sockaddr *addr, unsigned flags)
{
    keel_dgram *d = handle->data;
    /* After the batch's datagrams (UV_UDP_MMSG_CHUNK each), libuv calls
     * once more to have the buffer freed: the batch's end. */
    if (flags & UV_UDP_MMSG_FREE) {
        end_batch(d);
        return;
    }
    if (nread < 0) {
        count_drop(d, KL_UDP_DROP_ERROR);
        return;
    }
    if (addr == NULL) /* nothing more to read */
        return;
    if (flags & UV_UDP_PARTIAL) {
        /* Longer than its slot: what arrived is not the datagram. */
        count_drop(d, KL_UDP_DROP_TRUNCATED);
    } else if (!d->closed) {
        kl_core_metrics *cm = &d->worker->host->core_metrics;
        count(d, cm->udp_in, 1);
        count(d, cm->udp_bytes_in, nread);
        keel_dgram_peer peer;
        peer_of(addr, &peer);
        d->in_batch = 1;
        KL_IN_MODULE(d->protocol->owner->name,
                     d->protocol->cb.on_datagram(d, buf->base, (size_t)nread, &peer));
    }
    /* Without recvmmsg (Windows, an old kernel) each datagram is a batch. */
    if (!(flags & UV_UDP_MMSG_CHUNK))
        end_batch(d);
}

/* ---- opening and closing ------------------------------------------------ */

static void on_closed(uv_handle_t *handle)
{
    keel_dgram *d = handle->data;
    free(d->buf);
    free(d);
}

static int open_one(keel_worker *w, kl_listener *l, size_t k)
{
    keel_dgram *d = calloc(1, sizeof *d);
    if (d == NULL)
        return UV_ENOMEM;
    d->worker = w;
    d->listener = l;
    d->protocol = l->dgram;
    d->buf_size = (size_t)l->dgram_batch * KL_UDP_SLOT;
    d->buf = malloc(d->buf_size);
    if (d->buf == NULL) {
        free(d);
        return UV_ENOMEM;
    }
    /* recvmmsg where the system has it: libuv fills up to buf_size /
     * 64 KiB datagrams per system call. */
    int rc = uv_udp_init_ex(&w->loop, &d->handle, AF_UNSPEC | UV_UDP_RECVMMSG);
    if (rc != 0) {
        free(d->buf);
        free(d);
        return rc;
    }
    d->handle.data = d;
    /* From here the handle is the way to free d (on_closed). */
    d->next = w->dgrams;
    w->dgrams = d;
    rc = uv_udp_open(&d->handle, l->sockets[k]);
    if (rc != 0) {
        d->closed = 1;
        return rc;
    }
    /* The handle owns the socket now and closes it; its number stays in
     * l->sockets. */
    l->given[k] = 1;
    if (d->protocol->cb.on_open != NULL) {
        int status;
        KL_IN_MODULE(d->protocol->owner->name, status = d->protocol->cb.on_open(d));
        if (status < 0) {
            d->closed = 1; /* no on_close after a failed on_open */
            kl_log(KEEL_LOG_ERROR, "worker %u: %s: protocol '%s' refused to open: %s", w->id,
                   l->spec->text, d->protocol->cb.name, keel_strerror(status));
            return UV_ECANCELED;
        }
    }
    return uv_udp_recv_start(&d->handle, on_alloc, on_recv);
}

int kl_udp_open(keel_worker *w)
{
    kl_host *h = w->host;
    for (size_t i = 0; i < h->nlisteners; i++) {
        kl_listener *l = &h->listeners[i];
        if (l->dgram == NULL)
            continue;
        for (size_t k = w->id; k < l->nsockets; k += h->nworkers) {
            int rc = open_one(w, l, k);
            if (rc != 0) {
                if (rc != UV_ECANCELED)
                    kl_log(KEEL_LOG_ERROR, "worker %u: cannot receive on %s (udp): %s", w->id,
                           l->spec->text, uv_strerror(rc));
                return KEEL_ERR_IO;
            }
        }
    }
    return KEEL_OK;
}

void kl_udp_close(keel_worker *w)
{
    keel_dgram *d = w->dgrams;
    w->dgrams = NULL;
    while (d != NULL) {
        keel_dgram *next = d->next;
        if (!d->closed) {
            d->closed = 1;
            if (d->protocol->cb.on_close != NULL)
                KL_IN_MODULE(d->protocol->owner->name, d->protocol->cb.on_close(d));
        }
        /* Queued sends complete with UV_ECANCELED before on_closed. */
        uv_close((uv_handle_t *)&d->handle, on_closed);
        d = next;
    }
}

/* ---- sending ------------------------------------------------------------ */

static void on_sent(uv_udp_send_t *req, int status)
{
    udp_send *s = (udp_send *)req;
    keel_dgram *d = s->dgram;
    d->queued -= s->len;
    kl_core_metrics *cm = &d->worker->host->core_metrics;
    if (status == 0) {
        count(d, cm->udp_out, 1);
        count(d, cm->udp_bytes_out, (int64_t)s->len);
    } else if (status != UV_ECANCELED) {
        count_drop(d, KL_UDP_DROP_ERROR);
    }
    free(s);
}

/* The socket address for peer, in the socket's family: 0 if the peer is
 * of the other one. */
static int sockaddr_of(const keel_dgram *d, const keel_dgram_peer *peer,
                       struct sockaddr_storage *sa)
{
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    int v4 = memcmp(peer->addr, mapped, sizeof mapped) == 0;
    memset(sa, 0, sizeof *sa);
    if (d->listener->spec->addr.ss_family == AF_INET6) {
        if (v4)
            return 0;
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)sa;
        in6->sin6_family = AF_INET6;
        memcpy(&in6->sin6_addr, peer->addr, 16);
        in6->sin6_port = htons(peer->port);
        in6->sin6_scope_id = peer->scope_id;
        return 1;
    }
    if (!v4)
        return 0;
    struct sockaddr_in *in = (struct sockaddr_in *)sa;
    in->sin_family = AF_INET;
    memcpy(&in->sin_addr, peer->addr + 12, 4);
    in->sin_port = htons(peer->port);
    return 1;
}

int keel_dgram_send(keel_dgram *d, const keel_dgram_peer *peer, const void *data, size_t len)
{
    struct sockaddr_storage sa;
    if (d == NULL || peer == NULL || (data == NULL && len > 0) || len > KEEL_DGRAM_MAX ||
        !sockaddr_of(d, peer, &sa))
        return KEEL_ERR_INVAL;
    if (d->closed)
        return KEEL_ERR_CLOSED;
    kl_core_metrics *cm = &d->worker->host->core_metrics;
    uv_buf_t b = uv_buf_init((char *)(uintptr_t)data, (unsigned)len);
    /* libuv refuses a try_send while its own queue holds any, which keeps
     * the datagrams in order. */
    int rc = uv_udp_try_send(&d->handle, &b, 1, (const struct sockaddr *)&sa);
    if (rc >= 0) {
        count(d, cm->udp_out, 1);
        count(d, cm->udp_bytes_out, (int64_t)len);
        return KEEL_OK;
    }
    if (rc != UV_EAGAIN && rc != UV_ENOSYS) {
        count_drop(d, KL_UDP_DROP_ERROR);
        return KEEL_ERR_IO;
    }
    if (d->queued + len > d->listener->dgram_send_queue) {
        count_drop(d, KL_UDP_DROP_SEND_QUEUE);
        return KEEL_ERR_LIMIT;
    }
    udp_send *s = malloc(sizeof *s + len);
    if (s == NULL)
        return KEEL_ERR_NOMEM;
    s->dgram = d;
    s->len = len;
    if (len > 0)
        memcpy(s->bytes, data, len);
    b = uv_buf_init(s->bytes, (unsigned)len);
    rc = uv_udp_send(&s->req, &d->handle, &b, 1, (const struct sockaddr *)&sa, on_sent);
    if (rc != 0) {
        free(s);
        count_drop(d, KL_UDP_DROP_ERROR);
        return KEEL_ERR_IO;
    }
    d->queued += len;
    return KEEL_OK;
}

void keel_dgram_set_data(keel_dgram *d, void *data)
{
    d->data = data;
}

void *keel_dgram_data(keel_dgram *d)
{
    return d->data;
}

keel_worker *keel_dgram_worker(keel_dgram *d)
{
    return d->worker;
}

keel_module *keel_dgram_module(keel_dgram *d)
{
    return d->protocol->owner;
}

const char *keel_dgram_listen_option(keel_dgram *d, const char *key)
{
    return key != NULL ? kl_listen_spec_option(d->listener->spec, key) : NULL;
}
