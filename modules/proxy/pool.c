/* pool.c — upstream connections: opening them (keel_conn_connect), the
 * "proxy_upstream" protocol that drives them, and the per-worker
 * keep-alive pool of idle ones (nginx's upstream keepalive: at most
 * `keepalive` idle connections per server and worker, most recently used
 * first, closed after `keepalive_timeout`).
 *
 * An idle connection belongs to the pool; a busy one to its exchange,
 * which gives it back (px_up_detach) reusable or not.
 */
#include "px.h"

#include <stdlib.h>
#include <string.h>

static void idle_unlink(px_up *up)
{
    px_peer *p = up->peer;
    if (!up->idle)
        return;
    if (up->prev != NULL)
        up->prev->next = up->next;
    else
        p->idle_head = up->next;
    if (up->next != NULL)
        up->next->prev = up->prev;
    up->prev = up->next = NULL;
    up->idle = 0;
    p->nidle--;
}

px_up *px_pool_take(px_peer *p)
{
    px_up *up = p->idle_head;
    if (up == NULL)
        return NULL;
    idle_unlink(up);
    keel_conn_set_idle(up->conn, 0);
    return up;
}

void px_pool_put(px_up *up)
{
    px_peer *p = up->peer;
    px_config *c = up->pw->cfg;
    if (c->keepalive == 0) {
        keel_conn_close(up->conn);
        return;
    }
    if (p->nidle >= c->keepalive) {
        /* Full: the least recently used one goes (nginx closes the
         * oldest cached connection too). */
        px_up *old = p->idle_head;
        while (old->next != NULL)
            old = old->next;
        idle_unlink(old);
        keel_conn_close(old->conn);
    }
    up->idle = 1;
    up->prev = NULL;
    up->next = p->idle_head;
    if (p->idle_head != NULL)
        p->idle_head->prev = up;
    p->idle_head = up;
    p->nidle++;
    keel_conn_set_timeout(up->conn, c->keepalive_timeout_ms);
    /* Nothing is owed on it now: closed from the pool (full, timed out,
     * the upstream's EOF), it goes at once rather than through a lingering
     * close, as nginx closes a cached connection. */
    keel_conn_set_idle(up->conn, 1);
}

void px_pool_close_all(px_worker *pw)
{
    if (pw->peers == NULL)
        return;
    for (size_t i = 0; i < pw->cfg->ngroups; i++)
        for (size_t j = 0; j < pw->cfg->groups[i].nservers; j++) {
            px_peer *p = &pw->peers[i][j];
            while (p->idle_head != NULL) {
                px_up *up = p->idle_head;
                idle_unlink(up);
                up->peer = NULL;
                keel_conn_abort(up->conn); /* its on_close frees it */
            }
        }
}

/* The exchange is done with the connection. A reusable one (the response
 * was read to its end, the request was sent whole, neither side said
 * close) goes back to the pool; anything else is closed. */
void px_up_detach(px_up *up, int reusable)
{
    up->ex = NULL;
    if (up->conn == NULL)
        return; /* still connecting: on_open will find no exchange */
    if (reusable && up->peer != NULL && !keel_worker_stopping(up->pw->worker)) {
        px_response_init(up);
        px_pool_put(up);
    } else {
        keel_conn_close(up->conn);
    }
}

void px_up_abandon(px_up *up)
{
    up->ex = NULL;
    if (up->conn != NULL) {
        /* Mid-exchange: what the upstream would still send is nobody's,
         * and the connection cannot be reused. */
        keel_conn_close(up->conn);
        return;
    }
    /* Still connecting: nginx keeps no upstream attempt for a client
     * that left either (proxy_ignore_client_abort off). */
    if (up->attempt != NULL)
        keel_connect_cancel(up->attempt);
    free(up);
}

/* ---- the protocol ---------------------------------------------------------------- */

static int up_open(keel_conn *conn, void *arg)
{
    px_up *up = arg;
    up->attempt = NULL;
    up->conn = conn;
    keel_conn_set_data(conn, up);
    px_response_init(up);
    if (up->ex == NULL) {
        /* The exchange gave up while we connected (the client left, say):
         * the connection is still good for the next one. */
        px_pool_put(up);
        return KEEL_OK;
    }
    px_up_ready(up->ex, up);
    return KEEL_OK;
}

static void up_error(keel_worker *w, int status, void *arg)
{
    px_up *up = arg;
    (void)w;
    px_ex *ex = up->ex;
    up->attempt = NULL;
    if (up->peer != NULL)
        keel_log(up->pw->cfg->module, KEEL_LOG_INFO, "connect to %s: %s", up->peer->srv->authority,
                 keel_strerror(status));
    free(up);
    if (ex != NULL) {
        ex->up = NULL;
        px_attempt_failed(ex, status == KEEL_ERR_TIMEOUT ? PX_FAIL_TIMEOUT
                              : status == KEEL_ERR_LIMIT || status == KEEL_ERR_NOMEM
                                  ? PX_FAIL_LOCAL
                                  : PX_FAIL_CONNECT);
    }
}

int px_up_connect(px_worker *pw, px_peer *p, px_ex *ex, uint64_t timeout_ms)
{
    px_up *up = calloc(1, sizeof *up);
    if (up == NULL)
        return KEEL_ERR_NOMEM;
    up->pw = pw;
    up->peer = p;
    up->ex = ex;
    ex->up = up;
    keel_connect_options o = {
        .size = sizeof o,
        .host = p->srv->host,
        .port = p->srv->port,
        .protocol = px_upstream_protocol.name,
        .arg = up,
        .timeout_ms = timeout_ms,
        .transport = p->group->transport,
        .on_error = up_error,
        .read_buffer_size = ex->route->cfg->read_buffer,
    };
    int rc = keel_conn_connect(pw->worker, &o, &up->attempt);
    if (rc != KEEL_OK) {
        keel_log(pw->cfg->module, KEEL_LOG_INFO, "connect to %s: %s", p->srv->authority,
                 keel_strerror(rc));
        ex->up = NULL;
        free(up);
        return rc;
    }
    keel_metric_add(pw->worker, pw->cfg->m_connects, 1);
    return KEEL_OK;
}

static int up_data(keel_conn *conn, const char *data, size_t len, size_t *consumed)
{
    px_up *up = keel_conn_data(conn);
    if (up->ex == NULL) {
        /* Bytes from an idle connection: nothing was asked, so the
         * upstream is confused (or closing with a 408). Never reuse it. */
        *consumed = len;
        idle_unlink(up);
        keel_conn_close(conn);
        return KEEL_OK;
    }
    return px_response_data(up, data, len, consumed);
}

static void up_drain(keel_conn *conn)
{
    (void)conn; /* the request body is paced by its own write callbacks */
}

static void up_timeout(keel_conn *conn)
{
    px_up *up = keel_conn_data(conn);
    px_ex *ex = up->ex;
    if (ex == NULL) {
        idle_unlink(up);
        keel_conn_close(conn);
        return;
    }
    /* Nothing read or written for read_timeout (send_timeout while the
     * request body was still going out): nginx's proxy_read_timeout and
     * proxy_send_timeout. */
    up->ex = NULL;
    ex->up = NULL;
    keel_conn_abort(conn);
    px_attempt_failed(ex, PX_FAIL_TIMEOUT);
}

static void up_eof(keel_conn *conn)
{
    px_up *up = keel_conn_data(conn);
    if (up->ex != NULL)
        px_response_eof(up); /* ends a body read until EOF, or fails it */
    else
        idle_unlink(up);
    keel_conn_close(conn);
}

static void up_shutdown(keel_conn *conn)
{
    px_up *up = keel_conn_data(conn);
    if (up->ex == NULL) {
        idle_unlink(up);
        keel_conn_close(conn);
    }
    /* a busy one finishes with its exchange, which the client's own
     * protocol is finishing too */
}

static void up_close(keel_conn *conn, int status)
{
    px_up *up = keel_conn_data(conn);
    (void)status;
    if (up == NULL)
        return;
    if (up->idle)
        idle_unlink(up);
    px_ex *ex = up->ex;
    up->conn = NULL;
    if (ex != NULL) {
        up->ex = NULL;
        ex->up = NULL;
        px_attempt_failed(ex, PX_FAIL_RESET);
    }
    free(up);
}

const keel_protocol px_upstream_protocol = {
    .size = sizeof(keel_protocol),
    .name = "proxy_upstream",
    .on_open = up_open,
    .on_data = up_data,
    .on_drain = up_drain,
    .on_timeout = up_timeout,
    .on_shutdown = up_shutdown,
    .on_close = up_close,
    .on_eof = up_eof,
};
