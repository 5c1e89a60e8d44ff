/* park.c — idle keep-alive connections hold no h1_conn.
 *
 * Between requests, with no byte waiting, nothing owed and no timer of its
 * own, a connection needs nothing of its h1_conn but how many requests it
 * has served and whether it served one. Both ride in the connection's data
 * pointer, tagged in its low bit (an h1_conn is malloc-aligned), and the
 * h1_conn goes back to the worker's pool until bytes, a timeout or the
 * server's stop come. nginx does the same: ngx_http_set_keepalive frees the
 * request and its buffers and keeps the connection alone. An idle
 * keep-alive connection then costs the core's keel_conn and nothing here
 * (96 bytes less each, a fifth of it).
 *
 * Parking and taking the state back cost a request more than the rest of
 * its bookkeeping here, and a client under load sends its next request
 * soon. So a worker keeps the h1_conn of its H1_WARM_MAX most recently idle
 * connections: a connection parks once that many others have gone idle
 * after it (and none of its callbacks came since). The memory it keeps is
 * bounded per worker, not per connection.
 */
#include "h1.h"

#include <stdint.h>
#include <string.h>

/* The ring's counters wrap modulo 2^32: its size must divide that. */
_Static_assert(H1_WARM_MAX <= 255 && (H1_WARM_MAX & (H1_WARM_MAX - 1)) == 0,
               "H1_WARM_MAX must be a power of two that warm_slot holds");

#define PARKED          1u
#define HAD_REQUEST     2u
#define NREQUESTS_SHIFT 2

/* The timeout a connection parked with: what settle gives an idle one. */
static uint64_t idle_timeout(const h1_worker *w, int had_request)
{
    return had_request ? w->cfg->keepalive_timeout_ms : w->cfg->header_timeout_ms;
}

static void park(h1_conn *c)
{
    /* Only what unpark rebuilds may differ from a zeroed h1_conn: every
     * per-message field is reset between messages (h1_exchange_next). */
    if (c->closing || c->handed_over || c->shutdown || c->close_after || c->in_process ||
        c->paused || c->deadline_set || !c->idle_marked || c->head_started || c->exch != NULL ||
        c->out != NULL || c->skip != 0 || c->read_state != H1_READ_HEAD ||
        c->timeout_ms != idle_timeout(c->w, c->had_request))
        return;
#if UINTPTR_MAX <= UINT32_MAX
    if (c->nrequests > (UINTPTR_MAX >> NREQUESTS_SHIFT))
        return; /* no room left in the pointer for the count */
#endif
    uintptr_t tag =
        PARKED | (c->had_request ? HAD_REQUEST : 0) | (uintptr_t)c->nrequests << NREQUESTS_SHIFT;
    keel_conn_set_data(c->conn, (void *)tag);
    h1_conn_put(c->w, c);
}

void h1_conn_unwarm(h1_conn *c)
{
    if (c->warm_slot != 0) {
        c->w->warm[c->warm_slot - 1] = NULL;
        c->warm_slot = 0;
    }
}

/* The ring's holes are dropped as the oldest end reaches them: a
 * connection that leaves it costs a store, and one that joins it one
 * look at the oldest place when the ring is full. */
void h1_idle(h1_conn *c)
{
    h1_worker *w = c->w;
    if (c->warm_slot != 0)
        return;
    if (w->warm_tail - w->warm_head == H1_WARM_MAX) {
        h1_conn *oldest = w->warm[w->warm_head++ % H1_WARM_MAX];
        if (oldest != NULL) {
            oldest->warm_slot = 0;
            park(oldest);
        }
    }
    uint32_t i = w->warm_tail++ % H1_WARM_MAX;
    w->warm[i] = c;
    c->warm_slot = (uint8_t)(i + 1);
}

h1_conn *h1_conn_start(keel_conn *conn)
{
    h1_worker *w = keel_worker_state(keel_conn_worker(conn), keel_conn_module(conn));
    h1_conn *c = h1_conn_get(w);
    if (c == NULL)
        return NULL;
    c->conn = conn;
    c->w = w;
    keel_conn_set_data(conn, c);
    return c;
}

h1_conn *h1_conn_of(keel_conn *conn)
{
    void *data = keel_conn_data(conn);
    uintptr_t tag = (uintptr_t)data;
    if (!(tag & PARKED)) {
        h1_conn *c = data;
        if (c != NULL)
            h1_conn_unwarm(c); /* its state changes from here */
        return c;
    }
    h1_conn *c = h1_conn_start(conn);
    if (c == NULL)
        return NULL;
    c->nrequests = (uint32_t)(tag >> NREQUESTS_SHIFT);
    c->had_request = (tag & HAD_REQUEST) != 0;
    c->idle_marked = 1; /* parked only while the core held the mark */
    c->timeout_ms = idle_timeout(c->w, c->had_request);
    return c;
}

int h1_conn_parked(keel_conn *conn)
{
    return ((uintptr_t)keel_conn_data(conn) & PARKED) != 0;
}
