/* health.c — active health checks (`check=/path` on an upstream group):
 * every check_interval, one worker (worker 0) sends
 *
 *     GET /path HTTP/1.1
 *     Host: <the server's address>
 *     Connection: close
 *
 * (for a FastCGI group, the path as the script of a FastCGI request: PHP-FPM's
 * ping.path) to each server of the group on a new connection; a 2xx or 3xx status
 * line within the interval keeps the server in, anything else (refused,
 * reset, timeout, 4xx, 5xx) takes it out until a check passes again (the
 * rule of nginx Plus's health_check and HAProxy's httpchk, with fall and
 * rise of 1). The result is one flag per server, written by worker 0 and
 * read by every worker when it balances: a word stored and loaded
 * atomically, without ordering (a worker that sees it one request late
 * does no harm). Passive health (upstream.c) works alongside, per worker.
 */
#include "px.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(_MSC_VER)
#define flag_store(p, v) (*(volatile int *)(p) = (v))
#else
#define flag_store(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#endif

typedef struct px_check {
    px_worker *pw;
    px_server *srv;
    int answered;
    /* a FastCGI group's check: the records read, the CGI head gathered */
    int fastcgi;
    fcgi_reader reader;
    char head[1024];
    size_t hlen;
} px_check;

static void verdict(px_check *c, int ok)
{
    if (c->answered)
        return;
    c->answered = 1;
    int was_down = c->srv->check_down;
    flag_store((int *)&c->srv->check_down, ok ? 0 : 1);
    if (was_down != !ok)
        keel_log(c->pw->cfg->module, ok ? KEEL_LOG_INFO : KEEL_LOG_WARN, "health check of %s: %s",
                 c->srv->authority, ok ? "up" : "down");
}

/* A FastCGI group's check asks for the path as its script, as PHP-FPM's
 * ping.path expects ("pong", 200): SCRIPT_NAME and SCRIPT_FILENAME both
 * the path, no body, the connection not kept. */
static int check_fcgi_request(const char *path, keel_conn *conn)
{
    static const char *const names[] = {"SCRIPT_NAME",     "SCRIPT_FILENAME",   "REQUEST_URI",
                                        "DOCUMENT_URI",    "REQUEST_METHOD",    "QUERY_STRING",
                                        "SERVER_SOFTWARE", "GATEWAY_INTERFACE", NULL};
    const char *values[] = {path, path, path, path, "GET", "", "keel-health-check", "CGI/1.1"};
    unsigned char req[16 + 8 + 1024 + 16];
    size_t at = 16 + FCGI_HEADER_LEN;
    fcgi_begin_request(req, 0);
    for (size_t i = 0; names[i] != NULL; i++) {
        size_t nlen = strlen(names[i]), vlen = strlen(values[i]);
        if (at + fcgi_pair_size(nlen, vlen) > sizeof req - 16)
            return KEEL_ERR_INVAL; /* a check path near 1 KiB */
        at += fcgi_pair_put(req + at, names[i], nlen, values[i], vlen);
    }
    fcgi_header(req + 16, FCGI_PARAMS, at - 16 - FCGI_HEADER_LEN);
    fcgi_header(req + at, FCGI_PARAMS, 0);
    fcgi_header(req + at + FCGI_HEADER_LEN, FCGI_STDIN, 0);
    return keel_conn_write_copy(conn, req, at + 2 * FCGI_HEADER_LEN);
}

/* The answer's CGI head says: a Status of 2xx or 3xx (or none) keeps the
 * server in; an invalid answer, or the end before a head, takes it out. */
static int check_fcgi_data(px_check *c, keel_conn *conn, const char *data, size_t len,
                           size_t *consumed)
{
    *consumed = len;
    size_t at = 0;
    while (at < len && !c->answered) {
        size_t used, span_len;
        const char *span;
        int ev = fcgi_read(&c->reader, data + at, len - at, &used, &span, &span_len);
        at += used;
        if (ev == FCGI_EV_STDOUT) {
            size_t from = c->hlen, take = span_len;
            if (take > sizeof c->head - c->hlen)
                take = sizeof c->head - c->hlen;
            memcpy(c->head + c->hlen, span, take);
            c->hlen += take;
            size_t end = fcgi_head_end(c->head, c->hlen, from), n;
            int status = 0;
            if (end > 0)
                verdict(c,
                        fcgi_head_parse(c->head, end, NULL, 0, &n, &status) == 0 && status < 400);
            else if (c->hlen == sizeof c->head)
                verdict(c, 0);
        } else if (ev == FCGI_EV_END || ev == FCGI_EV_ERROR) {
            verdict(c, 0);
        } else if (ev == FCGI_EV_MORE) {
            break;
        }
    }
    if (c->answered)
        keel_conn_close(conn);
    return KEEL_OK;
}

static int check_open(keel_conn *conn, void *arg)
{
    px_check *c = arg;
    keel_conn_set_data(conn, c);
    /* the whole check must fit in its interval */
    px_group *g = NULL;
    for (size_t i = 0; i < c->pw->cfg->ngroups && g == NULL; i++) {
        px_group *gi = &c->pw->cfg->groups[i];
        if (c->srv >= gi->servers && c->srv < gi->servers + gi->nservers)
            g = gi;
    }
    keel_conn_set_timeout(conn, g ? g->check_interval_ms : 5000);
    char req[1024];
    if (c->fastcgi) {
        int rc = check_fcgi_request(g && g->check_path ? g->check_path : "/", conn);
        if (rc != KEEL_OK) {
            verdict(c, 0);
            free(c);
        }
        return rc;
    }
    int n = snprintf(req, sizeof req,
                     "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: keel-health-check\r\n"
                     "Connection: close\r\n\r\n",
                     g && g->check_path ? g->check_path : "/", c->srv->host_field);
    int rc = n > 0 && (size_t)n < sizeof req ? keel_conn_write_copy(conn, req, (size_t)n)
                                             : KEEL_ERR_INVAL;
    if (rc != KEEL_OK) {
        /* a refused on_open gets no on_close: settle it here */
        verdict(c, 0);
        free(c);
    }
    return rc;
}

static int check_data(keel_conn *conn, const char *data, size_t len, size_t *consumed)
{
    px_check *c = keel_conn_data(conn);
    if (c->fastcgi)
        return check_fcgi_data(c, conn, data, len, consumed);
    const char *nl = memchr(data, '\n', len);
    if (nl == NULL && len < 256) {
        *consumed = 0; /* the status line is not complete yet */
        return KEEL_OK;
    }
    *consumed = len;
    int status = 0;
    if (len >= 12 && memcmp(data, "HTTP/1.", 7) == 0 && data[8] == ' ')
        status = (data[9] - '0') * 100 + (data[10] - '0') * 10 + (data[11] - '0');
    verdict(c, status >= 200 && status < 400);
    keel_conn_close(conn);
    return KEEL_OK;
}

static void check_timeout(keel_conn *conn)
{
    verdict(keel_conn_data(conn), 0);
    keel_conn_abort(conn);
}

static void check_close(keel_conn *conn, int status)
{
    px_check *c = keel_conn_data(conn);
    (void)status;
    verdict(c, 0); /* closed before a status line: down (no-op if answered) */
    free(c);
}

static void check_error(keel_worker *w, int status, void *arg)
{
    px_check *c = arg;
    (void)w, (void)status;
    verdict(c, 0);
    free(c);
}

const keel_protocol px_check_protocol = {
    .size = sizeof(keel_protocol),
    .name = "proxy_check",
    .on_open = check_open,
    .on_data = check_data,
    .on_timeout = check_timeout,
    .on_close = check_close,
};

static void run_checks(keel_timer *t, void *userdata)
{
    px_worker *pw = userdata;
    uint64_t now = keel_worker_now_ms(pw->worker);
    (void)t;
    if (keel_worker_stopping(pw->worker))
        return;
    for (size_t i = 0; i < pw->cfg->ngroups; i++) {
        px_group *g = &pw->cfg->groups[i];
        if (g->check_path == NULL)
            continue;
        /* each group at its own interval: the timer ticks at the
         * smallest, a group runs when its time has come */
        if (pw->check_next != NULL && now < pw->check_next[i])
            continue;
        if (pw->check_next != NULL)
            pw->check_next[i] = now + g->check_interval_ms;
        for (size_t j = 0; j < g->nservers; j++) {
            px_check *c = calloc(1, sizeof *c);
            if (c == NULL)
                return;
            c->pw = pw;
            c->srv = &g->servers[j];
            c->fastcgi = g->fastcgi;
            keel_connect_options o = {
                .size = sizeof o,
                .host = c->srv->host,
                .port = c->srv->port,
                .protocol = px_check_protocol.name,
                .arg = c,
                .timeout_ms = g->check_interval_ms,
                .transport = g->transport,
                .on_error = check_error,
            };
            if (keel_conn_connect(pw->worker, &o, NULL) != KEEL_OK)
                free(c);
        }
    }
}

void px_checks_start(px_worker *pw)
{
    uint64_t tick = 0;
    for (size_t i = 0; i < pw->cfg->ngroups; i++) {
        px_group *g = &pw->cfg->groups[i];
        if (g->check_path != NULL && (tick == 0 || g->check_interval_ms < tick))
            tick = g->check_interval_ms;
    }
    if (tick == 0 || keel_worker_id(pw->worker) != 0)
        return;
    pw->check_next = calloc(pw->cfg->ngroups, sizeof *pw->check_next);
    /* the first round at once, so a server down at start-up is known
     * before the first requests are balanced onto it */
    pw->check_timer = keel_timer_start(pw->worker, 0, tick, run_checks, pw);
}

void px_checks_stop(px_worker *pw)
{
    if (pw->check_timer != NULL) {
        keel_timer_stop(pw->check_timer);
        pw->check_timer = NULL;
    }
    free(pw->check_next);
    pw->check_next = NULL;
}
