/* The PROXY protocol preamble of a listener with proxy_protocol=on
 * (net/preamble.h parses the header; this is the connection's side). */
#include "net/conn.h"

#include <string.h>

#include "base/log.h"
#include "net/preamble.h"
#include "net/worker.h"

/* A listener with proxy_protocol=on (net/preamble.h): the balancer's
 * header comes before anything else, so neither the transport nor the
 * protocol opens until it has been read, and every byte waits in the read
 * buffer meanwhile (KL_CONN_PREAMBLE, much as KL_CONN_DEFERRED holds bytes
 * for a protocol a transport has yet to choose). The client's address it
 * carries lives in the conn's tail (kl_conn_accept_tail). */

size_t kl_conn_accept_tail(const kl_origin *origin)
{
    return origin->spec != NULL && origin->spec->preamble != NULL ? sizeof(kl_preamble_addr) : 0;
}

/* The address from the header, or NULL: not a PROXY listener, the header
 * is still awaited, or it said to use the socket's own (LOCAL, UNKNOWN). */
const struct sockaddr *kl_conn_proxied_peer(keel_conn *c)
{
    if (c->origin->spec == NULL || c->origin->spec->preamble == NULL)
        return NULL;
    const kl_preamble_addr *a = kl_conn_tail(c);
    return a->sa.sa_family == AF_UNSPEC ? NULL : &a->sa;
}

int kl_conn_preamble_start(keel_conn *c)
{
    const kl_preamble_conf *pc = c->origin->spec->preamble;
    struct sockaddr_storage addr;
    int len = sizeof addr;
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&addr, &len) != 0) {
        kl_conn_abort_status(c, KEEL_ERR_IO);
        return 0;
    }
    /* Section 1 of the spec: the header is trusted only from the
     * balancers, or any client could claim any address. */
    if (addr.ss_family != AF_UNIX &&
        !kl_preamble_allowed((struct sockaddr *)&addr, pc->from, pc->nfrom)) {
        char peer[80];
        keel_conn_peer_name(c, peer, sizeof peer);
        kl_log(KEEL_LOG_DEBUG, "connection %llu: %s is not in proxy_from: closed",
               (unsigned long long)c->id, peer);
        kl_conn_abort_status(c, KEEL_ERR_REFUSED);
        return 0;
    }
    c->flags |= KL_CONN_PREAMBLE;
    /* The header's whole budget: a deadline, which bytes that trickle in
     * do not renew, and which makes the connection one a worker at
     * max_connections may close to admit a new client. */
    keel_conn_set_deadline(c, pc->timeout_ms);
    if (kl_conn_worker(c)->stopping) {
        kl_conn_abort_status(c, KEEL_ERR_SHUTDOWN);
        return 0;
    }
    kl_conn_update_reading(c);
    return 1;
}

/* Bytes arrived while the header is awaited (all of them in rbuf). */
void kl_conn_preamble_read(keel_conn *c)
{
    kl_preamble_addr src;
    size_t have = c->rlen - c->rstart;
    int n = kl_preamble_parse(c->rbuf + c->rstart, have, &src);
    if (n == 0 && have >= KL_PREAMBLE_MAX)
        n = KEEL_ERR_LIMIT;
    if (n == 0)
        return;
    if (n < 0) {
        /* Section 2: a receiver must not guess that no header came, and
         * drops a connection whose header is invalid. */
        kl_log(KEEL_LOG_DEBUG, "connection %llu: %s PROXY protocol header: closed",
               (unsigned long long)c->id, n == KEEL_ERR_LIMIT ? "oversized" : "invalid");
        kl_conn_abort_status(c, n);
        return;
    }
    c->rstart += (uint32_t)n;
    *(kl_preamble_addr *)kl_conn_tail(c) = src;
    c->flags &= ~KL_CONN_PREAMBLE;
    keel_conn_set_deadline(c, 0); /* back to idle_timeout, or what the layers set */
    if (!kl_conn_open_layers(c, NULL, NULL) || kl_conn_closing(c))
        return;
    /* What came after the header in the same reads: raw bytes for the
     * transport, which decodes them into a buffer of its own (they fit the
     * scratch buffer: on_alloc bounded the reads), or the protocol's. */
    size_t rest = c->rlen - c->rstart;
    if (rest == 0)
        return;
    if (kl_conn_transport(c) != NULL) {
        char *scratch = kl_conn_worker(c)->scratch;
        memcpy(scratch, c->rbuf + c->rstart, rest);
        c->rstart = c->rlen;
        if (kl_conn_transport_read(c, scratch, rest) < 0)
            return;
    }
    kl_conn_deliver(c);
}
