/* share.c — what one client connection may hold of the proxy's buffered
 * response bytes, across all its exchanges.
 *
 * An HTTP/1.1 client has one exchange at a time, bounded by `buffer`. An
 * HTTP/2 client multiplexes up to its max_concurrent_streams exchanges on
 * one connection, and one that shuts its flow-control windows (a window
 * of 0, then a 1-byte WINDOW_UPDATE per stream now and then) takes no
 * bytes at all: were each exchange bounded alone, it would hold `buffer`
 * plus a read or two of its upstream, ~200 KiB a stream, 19.5 MiB for a
 * connection of 100 streams. RFC 9113 10.5: a server limits the resources a peer
 * can commit. So the exchanges of one HTTP/2 connection share
 * `client_buffer` bytes: each may hold an equal share of it (never more
 * than `buffer`, never less than PX_SHARE_MIN), its upstream is read at
 * most a share at a time (keel_conn_set_read_size), and when the
 * connection holds its whole budget the exchanges that hold some of it
 * stop reading their upstreams, to go on, in the order they stopped, as
 * the client takes bytes. What an upstream sends meanwhile waits in the
 * kernel, as with any slow client.
 *
 * The clients are found by connection id in a per-worker hash table:
 * ids are never reused, so an entry that outlives its connection (an
 * exchange still releasing pieces) cannot be mistaken for a new one.
 */
#include "px.h"

#include <stdlib.h>

/* Reads and shares below this cost more in system calls than they save:
 * 100 streams of a full connection hold 100 KiB this way. */
#define PX_SHARE_MIN 1024

static size_t bucket_of(const px_worker *pw, uint64_t id)
{
    return (size_t)((id * 0x9E3779B97F4A7C15ull) >> 40) & (pw->nbuckets - 1);
}

static int grow(px_worker *pw)
{
    size_t n = pw->nbuckets ? pw->nbuckets * 2 : 64;
    px_client **b = calloc(n, sizeof *b);
    if (b == NULL)
        return KEEL_ERR_NOMEM;
    for (size_t i = 0; i < pw->nbuckets; i++) {
        while (pw->buckets[i] != NULL) {
            px_client *c = pw->buckets[i];
            pw->buckets[i] = c->next;
            size_t j = (size_t)((c->conn_id * 0x9E3779B97F4A7C15ull) >> 40) & (n - 1);
            c->next = b[j];
            b[j] = c;
        }
    }
    free(pw->buckets);
    pw->buckets = b;
    pw->nbuckets = n;
    return KEEL_OK;
}

px_client *px_client_join(px_worker *pw, uint64_t conn_id)
{
    if (pw->nbuckets == 0 || pw->nclients >= pw->nbuckets * 2) {
        if (grow(pw) != KEEL_OK && pw->nbuckets == 0)
            return NULL;
    }
    px_client **at = &pw->buckets[bucket_of(pw, conn_id)];
    for (px_client *c = *at; c != NULL; c = c->next)
        if (c->conn_id == conn_id) {
            c->nexch++;
            return c;
        }
    px_client *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL; /* the exchange goes on unshared, bounded by `buffer` */
    c->conn_id = conn_id;
    c->nexch = 1;
    c->next = *at;
    *at = c;
    pw->nclients++;
    return c;
}

static void unwait(px_ex *ex)
{
    px_client *c = ex->share;
    if (!ex->share_waiting)
        return;
    px_ex **at = &c->waiting;
    while (*at != ex)
        at = &(*at)->share_next;
    *at = ex->share_next;
    if (c->waiting_tail == ex) {
        c->waiting_tail = NULL;
        for (px_ex *w = c->waiting; w != NULL; w = w->share_next)
            c->waiting_tail = w;
    }
    ex->share_next = NULL;
    ex->share_waiting = 0;
}

void px_client_leave(px_ex *ex)
{
    px_client *c = ex->share;
    if (c == NULL)
        return;
    px_worker *pw = ex->pw;
    unwait(ex);
    c->buffered -= ex->client_out; /* nothing, once every piece came back */
    ex->share = NULL;
    if (--c->nexch > 0)
        return;
    px_client **at = &pw->buckets[bucket_of(pw, c->conn_id)];
    while (*at != c)
        at = &(*at)->next;
    *at = c->next;
    pw->nclients--;
    free(c);
}

void px_clients_free(px_worker *pw)
{
    for (size_t i = 0; i < pw->nbuckets; i++)
        while (pw->buckets[i] != NULL) {
            px_client *c = pw->buckets[i];
            pw->buckets[i] = c->next;
            free(c);
        }
    free(pw->buckets);
    pw->buckets = NULL;
    pw->nbuckets = pw->nclients = 0;
}

size_t px_ex_share(const px_ex *ex)
{
    const px_config *cfg = ex->route->cfg;
    if (ex->share == NULL)
        return cfg->buffer;
    size_t s = cfg->client_buffer / ex->share->nexch;
    if (s > cfg->buffer)
        s = cfg->buffer;
    return s < PX_SHARE_MIN ? PX_SHARE_MIN : s;
}

size_t px_ex_read_size(const px_ex *ex)
{
    size_t s = px_ex_share(ex);
    return s < ex->route->cfg->read_buffer ? s : ex->route->cfg->read_buffer;
}

/* The exchange holds its share; or its connection holds the whole budget
 * and the exchange holds something of it. Counting what it gathered this
 * turn and has yet to hand over (libuv reads a readable socket up to 32
 * times in one turn). An exchange that holds nothing may always read
 * once more: the streams its client is taking bytes from go on while the
 * others' bytes wait for their windows (a full connection would
 * otherwise starve the very streams that move). So a connection holds at
 * most its budget and a read of each exchange. */
static int over(const px_ex *ex)
{
    size_t held = ex->client_out + ex->plen;
    if (held > px_ex_share(ex))
        return 1;
    return ex->share != NULL && held > 0 &&
           ex->share->buffered + ex->plen >= ex->route->cfg->client_buffer;
}

/* Back under half of either (or holding nothing): reading again cannot
 * overshoot by more than a read. */
static int room(const px_ex *ex)
{
    return ex->client_out <= px_ex_share(ex) / 2 &&
           (ex->share == NULL || ex->client_out == 0 ||
            ex->share->buffered <= ex->route->cfg->client_buffer / 2);
}

void px_upstream_hold(px_ex *ex)
{
    if (ex->up_paused || ex->up == NULL || ex->up->conn == NULL || !over(ex))
        return;
    ex->up_paused = 1;
    keel_conn_pause(ex->up->conn);
    px_client *c = ex->share;
    if (c != NULL && !ex->share_waiting) {
        ex->share_waiting = 1;
        KEEL_QUEUE_APPEND(c->waiting, c->waiting_tail, ex, share_next);
    }
}

static void release(px_ex *ex)
{
    unwait(ex);
    ex->up_paused = 0;
    if (ex->up != NULL && ex->up->conn != NULL)
        keel_conn_resume(ex->up->conn);
}

void px_upstream_release(px_ex *ex)
{
    if (ex->up_paused && room(ex))
        release(ex);
    /* The connection's other exchanges, in the order they stopped. */
    px_client *c = ex->share;
    if (c == NULL || c->buffered > ex->route->cfg->client_buffer / 2 || c->waiting == NULL)
        return;
    for (px_ex *w = c->waiting, *next; w != NULL; w = next) {
        next = w->share_next;
        if (room(w))
            release(w);
    }
}

void px_upstream_unhold(px_ex *ex)
{
    if (ex->up_paused)
        release(ex);
    else
        unwait(ex);
}
