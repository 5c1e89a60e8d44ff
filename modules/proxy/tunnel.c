/* tunnel.c — the "proxy_tunnel" protocol: bytes both ways between two
 * connections, for an upgraded exchange (WebSocket and the like, after
 * the upstream's 101) and for CONNECT (RFC 9110 9.3.6).
 *
 * Each direction is paced separately: bytes read from one side are copied
 * once and queued to the other, and while more than `buffer` bytes wait
 * for a side, the side that sends them is not read (so a fast sender and a
 * slow receiver cost `buffer` bytes, not the difference of their speeds).
 * `tunnel_idle_timeout` closes a tunnel in which neither side has sent or
 * received anything for that long (nginx's proxy_read_timeout plays this
 * part for its upgraded connections). When one side ends (EOF, error,
 * close), the other is closed once what was queued to it has left.
 */
#include "px.h"

#include <stdlib.h>
#include <string.h>

typedef struct tblock {
    px_tunnel *t;
    int to; /* the side the bytes go to */
    size_t len;
    char data[];
} tblock;

px_tunnel *px_tunnel_new(px_config *cfg, keel_worker *w)
{
    px_tunnel *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    t->cfg = cfg;
    t->worker = w;
    t->refs = 1;
    return t;
}

void px_tunnel_expect(px_tunnel *t, int side)
{
    t->expect = side;
}

void px_tunnel_release(px_tunnel *t)
{
    if (--t->refs == 0)
        free(t);
}

static int side_of(px_tunnel *t, keel_conn *conn)
{
    return t->side[PX_SIDE_UPSTREAM] == conn ? PX_SIDE_UPSTREAM : PX_SIDE_CLIENT;
}

static int t_open(keel_conn *conn, void *arg)
{
    px_tunnel *t = arg;
    if (t == NULL)
        return KEEL_ERR_INVAL; /* never on a listener */
    int s = t->expect;         /* the hook below opens the other side in between */
    if (s == PX_SIDE_UPSTREAM && t->on_upstream_open != NULL) {
        /* CONNECT: connect.c decides whether this destination is allowed
         * and hands the client over. */
        int rc = t->on_upstream_open(t, conn);
        if (rc != KEEL_OK)
            return rc;
    }
    t->side[s] = conn;
    t->refs++;
    keel_conn_set_data(conn, t);
    keel_conn_set_timeout(conn, t->cfg->tunnel_idle_ms);
    int o = 1 - s;
    if (t->side[o] != NULL && t->waiting[o]) {
        t->waiting[o] = 0;
        if (!t->paused[o])
            keel_conn_resume(t->side[o]);
    }
    return KEEL_OK;
}

static void written(keel_conn *conn, int status, void *userdata)
{
    tblock *b = userdata;
    px_tunnel *t = b->t;
    (void)conn, (void)status;
    int to = b->to, from = 1 - to;
    t->out[to] -= b->len;
    keel_metric_add(t->worker, t->cfg->m_buffered, -(int64_t)b->len);
    if (t->paused[from] && t->out[to] <= t->cfg->buffer / 2) {
        t->paused[from] = 0;
        if (t->side[from] != NULL && !t->waiting[from])
            keel_conn_resume(t->side[from]);
    }
    free(b);
    px_tunnel_release(t);
}

static int t_data(keel_conn *conn, const char *data, size_t len, size_t *consumed)
{
    px_tunnel *t = keel_conn_data(conn);
    int s = side_of(t, conn), o = 1 - s;
    if (t->side[o] == NULL) {
        /* The other side is not open yet (an upgrade's second half is
         * a moment away): keep the bytes. */
        *consumed = 0;
        t->waiting[s] = 1;
        keel_conn_pause(conn);
        return KEEL_OK;
    }
    *consumed = len;
    tblock *b = malloc(sizeof *b + len);
    if (b == NULL)
        return KEEL_ERR_NOMEM;
    b->t = t;
    b->to = o;
    b->len = len;
    memcpy(b->data, data, len);
    keel_buf buf = {b->data, len};
    if (keel_conn_write(t->side[o], &buf, 1, written, b) != KEEL_OK) {
        free(b);
        keel_conn_close(conn);
        return KEEL_OK;
    }
    t->refs++;
    t->out[o] += len;
    keel_metric_add(t->worker, t->cfg->m_buffered, (int64_t)len);
    if (t->out[o] > t->cfg->buffer && !t->paused[s]) {
        t->paused[s] = 1;
        keel_conn_pause(conn);
    }
    return KEEL_OK;
}

static void close_both(px_tunnel *t)
{
    for (int i = 0; i < 2; i++)
        if (t->side[i] != NULL)
            keel_conn_close(t->side[i]);
}

static void t_eof(keel_conn *conn)
{
    close_both(keel_conn_data(conn));
}

static void t_timeout(keel_conn *conn)
{
    px_tunnel *t = keel_conn_data(conn);
    keel_log(t->cfg->module, KEEL_LOG_DEBUG, "tunnel idle for %llu ms: closing",
             (unsigned long long)t->cfg->tunnel_idle_ms);
    close_both(t);
}

static void t_shutdown(keel_conn *conn)
{
    close_both(keel_conn_data(conn));
}

static void t_close(keel_conn *conn, int status)
{
    px_tunnel *t = keel_conn_data(conn);
    (void)status;
    if (t == NULL)
        return;
    int s = side_of(t, conn);
    t->side[s] = NULL;
    if (t->side[1 - s] != NULL)
        keel_conn_close(t->side[1 - s]);
    px_tunnel_release(t);
}

const keel_protocol px_tunnel_protocol = {
    .size = sizeof(keel_protocol),
    .name = "proxy_tunnel",
    .on_open = t_open,
    .on_data = t_data,
    .on_timeout = t_timeout,
    .on_shutdown = t_shutdown,
    .on_close = t_close,
    .on_eof = t_eof,
};
